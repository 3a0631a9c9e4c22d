//! Route and leafnode compression: the S2 stream codec (`stream`), the pure rules
//! that pick a compression mode (`mode`: what nats-server 2.10+ calls `compression: ...`) and
//! one route or leaf connection's handshake as steps (`negotiate`). Nothing here does I/O or
//! knows a connection; the route and leaf sessions own a `RouteCompression`, and an `Encoder`
//! and a `Decoder` once it says so.

pub mod mode;
pub mod negotiate;
pub mod stream;

pub use mode::{CompressionMode, CompressionOpts};
pub use negotiate::{InfoStep, RouteCompression};
pub use stream::{DecodeError, Decoder, Encoder, Level};
