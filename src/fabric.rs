//! What the routing core (accounts, fan-out, imports, internal subscriptions) needs from the
//! rest of the server, as one small trait. `deliver`, `imports` and `internal` hold a
//! `dyn Fabric`, never the server itself: the core does not depend on `server`, `cluster` or
//! `gateway` (`.ci/modcycles.py` checks it). `server/fabric.rs` implements it for
//! `ServerShared`.

use crate::account::{Accounts, SubRef};
use crate::conn::Conn;
use crate::deliver::{Fanout, Msg};
use bytes::Bytes;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Server-wide counters (what `/varz` reports).
#[derive(Default, Debug)]
pub struct Stats {
    pub in_msgs: AtomicU64,
    pub in_bytes: AtomicU64,
    pub out_msgs: AtomicU64,
    pub out_bytes: AtomicU64,
    /// Slow-consumer events, in all and by connection kind.
    pub slow: Arc<crate::conn::writer::SlowConsumerStats>,
    pub total_connections: AtomicU64,
    /// From and to clients only (`/varz` `in_client_msgs`…).
    pub in_client_msgs: AtomicU64,
    pub in_client_bytes: AtomicU64,
    pub out_client_msgs: AtomicU64,
    pub out_client_bytes: AtomicU64,
    /// Clients closed as stale.
    pub stale_clients: AtomicU64,
    /// Client batches that waited for stalled destinations.
    pub stalled_clients: AtomicU64,
}

/// The server as the routing core sees it. Called per read batch (counters, stalls) and per
/// subscription change, never per message except [`Fabric::to_gateways`] when gateways exist.
pub trait Fabric: Send + Sync + 'static {
    /// Server-wide counters.
    fn stats(&self) -> &Stats;

    /// `no_fast_producer_stall`: client producers never wait for slow destinations.
    fn no_fast_producer_stall(&self) -> bool;

    /// The server's accounts.
    fn accounts(&self) -> &Accounts;

    /// The server's own connection, owner of internal subscriptions.
    fn internal_conn(&self) -> &Arc<Conn>;

    /// A local subscription appeared (+1) or went (-1) in `acc`: queue what routes and
    /// gateways must learn, with writer wake-ups deferred to `kicks`.
    fn interest_changed_deferred(
        &self,
        acc: &crate::account::Account,
        subject: &Bytes,
        queue: Option<&Bytes>,
        delta: i32,
        kicks: &mut Vec<Arc<Conn>>,
    );

    /// As [`Fabric::interest_changed_deferred`], waking the writers at once.
    fn local_interest_changed(
        &self,
        acc: &crate::account::Account,
        subject: &Bytes,
        queue: Option<&Bytes>,
        delta: i32,
    ) {
        let mut kicks = Vec::new();
        self.interest_changed_deferred(acc, subject, queue, delta, &mut kicks);
        for c in kicks {
            c.out.kick();
        }
    }

    /// This server as its system services describe it (the `server` of a message trace
    /// event); None without a system account.
    fn trace_server_info(&self) -> Option<serde_json::Value>;

    /// Account `acc`'s trace destination for messages with a sampled W3C `traceparent`
    /// (`accounts { A { msg_trace: … } }`).
    fn account_msg_trace(&self, _acc: &str) -> Option<crate::config::AccountMsgTrace> {
        None
    }

    /// Whether some account has a trace destination: only then does a message's header get
    /// searched for `traceparent` (one relaxed load per message with a header).
    fn external_trace(&self) -> bool {
        false
    }

    /// Whether this server has gateways at all (fixed for its life: asked once per fan-out).
    fn has_gateways(&self) -> bool;

    /// Forward a client's message, matched as `r` in `acc`, to the gateways that want it.
    /// Returns the number of gateways it went to.
    fn to_gateways(
        &self,
        fan: &mut Fanout,
        acc: &crate::account::Account,
        r: &crate::sublist::SublistResult<SubRef>,
        m: &Msg<'_>,
    ) -> u64;
}
