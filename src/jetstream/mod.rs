//! JetStream: streams, consumers and the `$JS.API` on one node — a module beside the routing
//! core that reaches the rest of the server only through internal subscriptions and
//! publishes (`crate::internal`).

pub mod store;
