//! Wire formats of the NATS protocol, as pure code with no I/O: the incremental zero-copy
//! parser for client, route and gateway ops ([`parser`], with argument grammar in [`args`]),
//! the frame writers into `BytesMut` ([`encode`]) and the INFO / CONNECT JSON structs
//! ([`info`]). This module owns byte-level syntax and size limits only; it knows nothing about
//! sockets, accounts, subscriptions or what an op means to a connection — callers decide that
//! (e.g. which `-ERR` to send, via [`ParseError::err_text`]).

pub mod args;
pub mod encode;
pub mod info;
pub mod parser;
pub mod trace;

#[cfg(test)]
mod parser_tests;

pub use info::{ConnectInfo, RouteConnectInfo, ServerInfo, SubjectPermission};
pub use parser::{Kind, Limits, Op, ParseError, Parser, Queues, RoutedMsg};
