//! natsd: a NATS server in Rust, a drop-in for nats-server. The library face (`Server`,
//! `Options`) lets tests and examples embed real servers; `main.rs` is the command line.
//!
//! Layout: `proto` (wire formats, no I/O), `subject` + `sublist` (interest), `account`,
//! `auth`, `conn` (what every connection kind shares), `client`, `server`, `monitor`.

pub mod account;
pub mod auth;
pub mod client;
pub mod cluster;
pub mod compress;
pub mod config;
pub mod conn;
pub mod deliver;
pub mod fabric;
pub mod gateway;
pub mod imports;
pub mod internal;
pub mod jetstream;
pub mod jwt;
pub mod leaf;
pub mod logging;
pub mod mapping;
pub mod monitor;
pub mod proto;
pub mod raft;
pub mod route_interest;
pub mod server;
pub mod signal;
pub mod subject;
pub mod sublist;
pub mod sys;
pub mod tls;
pub mod topology;
pub mod trace;
pub mod transform;
pub mod util;

pub use config::Options;
pub use server::Server;
