//! Route (and later leafnode) compression: the S2 stream codec (`stream`) and the pure rules
//! that pick a compression mode (`mode`): what nats-server 2.10+ calls `compression: ...`.
//! Nothing here does I/O or knows a connection; the route session owns an `Encoder` and a
//! `Decoder` once negotiation says so.

pub mod mode;
pub mod stream;

pub use mode::{CompressionMode, CompressionOpts};
pub use stream::{DecodeError, Decoder, Encoder, Level};
