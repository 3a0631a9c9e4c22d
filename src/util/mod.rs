//! Small helpers with no protocol knowledge: time formats in nats-server's styles and random ids.

pub mod ids;
pub mod time;
