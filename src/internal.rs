//! The server's own subscriptions and publishes: what the `$SYS` services and cross-account
//! relays (imports) build on. An internal subscription lives in an account's sublist like any
//! other — so its interest goes to routes as RS+ — but its deliveries run a [`Handler`] instead
//! of writing to a socket. An internal publish goes through the same fan-out as a client's.
//! These work on any [`Fabric`]; `ServerShared` has them as methods (`server/fabric.rs`).

use crate::account::{Account, Handler, SubRef, Subscription};
use crate::deliver::{Fanout, Msg, Origin};
use crate::fabric::Fabric;
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

static NEXT_SID: AtomicU64 = AtomicU64::new(1);

/// Subscribe the server itself to `subject` (optionally in a queue group) in `acc`.
/// The interest is advertised to routes; `handler` runs for every matching message.
pub fn subscribe(
    fabric: &dyn Fabric,
    acc: &Account,
    subject: &str,
    queue: Option<&str>,
    handler: Handler,
) -> Result<Arc<Subscription>, String> {
    subscribe_as(fabric, acc, subject, queue, handler, false)
}

/// [`subscribe`] for a handler that takes part in message tracing (`Subscription::traced`).
pub fn subscribe_traced(
    fabric: &dyn Fabric,
    acc: &Account,
    subject: &str,
    queue: Option<&str>,
    handler: Handler,
) -> Result<Arc<Subscription>, String> {
    subscribe_as(fabric, acc, subject, queue, handler, true)
}

fn subscribe_as(
    fabric: &dyn Fabric,
    acc: &Account,
    subject: &str,
    queue: Option<&str>,
    handler: Handler,
    traced: bool,
) -> Result<Arc<Subscription>, String> {
    let sid = Bytes::from(NEXT_SID.fetch_add(1, Relaxed).to_string());
    let sub = Arc::new(Subscription {
        conn: fabric.internal_conn().clone(),
        subject: Bytes::copy_from_slice(subject.as_bytes()),
        queue: queue.map(|q| Bytes::copy_from_slice(q.as_bytes())),
        sid: sid.clone(),
        max: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        deny: None,
        weight: 1,
        handler: Some(handler),
        traced,
    });
    acc.sublist
        .insert(
            subject.as_bytes(),
            queue.map(str::as_bytes),
            SubRef(sub.clone()),
        )
        .map_err(|e| format!("internal subscription to {subject:?}: {e}"))?;
    fabric.internal_conn().subs().insert(sub.clone());
    fabric.local_interest_changed(acc, &sub.subject, sub.queue.as_ref(), 1);
    Ok(sub)
}

/// Remove an internal subscription (idempotent) and withdraw its interest from routes.
pub fn unsubscribe(fabric: &dyn Fabric, acc: &Account, sub: &Arc<Subscription>) {
    if acc.retire(sub) {
        fabric.local_interest_changed(acc, &sub.subject, sub.queue.as_ref(), -1);
    }
}

/// How many destinations of one internal publish batch [`Fanout::finish_sync`] writes to
/// in place ([`crate::conn::Outbound::flush_or_kick`]).
const IN_PLACE_DESTINATIONS: usize = 4;

/// Publish a message from the server itself into `acc`: local subscribers (internal ones
/// included) and routes, exactly as a client's publish would go.
pub fn publish(fabric: Arc<dyn Fabric>, acc: &Account, m: &Msg<'_>) -> u64 {
    let origin = origin(&*fabric);
    publish_from(fabric, acc, m, origin)
}

/// [`publish`] for the other servers only: this server's own internal subscriptions are
/// skipped (nats-server's system client publishes without echo), so a queue group's member
/// here never takes it — a request only another server can answer (the full resolver's
/// pack request: its own responder would always find its own hash the same).
pub fn publish_to_others(fabric: Arc<dyn Fabric>, acc: &Account, m: &Msg<'_>) -> u64 {
    let origin = Origin::Client {
        cid: fabric.internal_conn().cid,
        echo: false,
    };
    publish_from(fabric, acc, m, origin)
}

fn publish_from(fabric: Arc<dyn Fabric>, acc: &Account, m: &Msg<'_>, origin: Origin) -> u64 {
    let mut fan = Fanout::new(fabric);
    let delivered = fan.publish_in(acc, m, origin);
    fan.finish_sync();
    delivered
}

/// The origin internal publishes carry (echo on: a server may ask itself too).
pub fn origin(fabric: &dyn Fabric) -> Origin {
    Origin::Client {
        cid: fabric.internal_conn().cid,
        echo: true,
    }
}

impl Fanout {
    /// Match `m.subject` in `acc` and deliver (for publishers without an L1 cache: internal
    /// publishes and cross-account relays).
    pub fn publish_in(&mut self, acc: &Account, m: &Msg<'_>, origin: Origin) -> u64 {
        let r = acc.sublist.matches(m.subject);
        self.publish(acc, &r, m, origin, None)
    }

    /// End a batch outside a connection's read loop: retire auto-unsubscribed subscriptions,
    /// wake writers (no producer stall: the server never waits on a slow consumer).
    pub fn finish_sync(&mut self) {
        self.run_hooks();
        let fabric = self.fabric().clone();
        for sub in std::mem::take(&mut self.retired) {
            if let Some(acc) = sub_account(&*fabric, &sub) {
                if acc.retire(&sub) {
                    fabric.interest_changed_deferred(
                        &acc,
                        &sub.subject,
                        sub.queue.as_ref(),
                        -1,
                        self.kicks(),
                    );
                    crate::imports::client_unsubscribed(&*fabric, &acc, &sub);
                }
            }
        }
        self.flush_counters();
        // The server's own messages (PubAcks, Raft appends and answers) go out from here
        // when the socket takes them at once; past a few destinations the writers do it, in
        // parallel.
        for (i, c) in self.kicks().drain(..).enumerate() {
            if i < IN_PLACE_DESTINATIONS {
                c.out.flush_or_kick();
            } else {
                c.out.kick();
            }
        }
    }
}

/// The account a local subscriber's connection belongs to.
fn sub_account(fabric: &dyn Fabric, sub: &Subscription) -> Option<Arc<Account>> {
    let name = sub.conn.meta().account.clone();
    fabric.accounts().get(&name)
}

#[cfg(test)]
mod tests {
    use crate::account::Handler;
    use crate::config::Options;
    use crate::deliver::Msg;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;

    #[tokio::test]
    async fn internal_subscription_gets_internal_publish_and_can_be_removed() {
        let o = Options {
            port: 0,
            host: "127.0.0.1".into(),
            ..Default::default()
        };
        let srv = crate::server::Server::start(o).await.expect("start");
        let shared = srv.shared();
        let acc = shared.accounts.global();
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let handler: Handler = Arc::new(move |_, m: &Msg<'_>| {
            assert_eq!(m.payload, b"hi");
            h.fetch_add(1, SeqCst);
        });
        let sub = shared
            .subscribe_internal(&acc, "a.*", None, handler)
            .expect("subscribe");
        let m = Msg {
            subject: b"a.b",
            reply: None,
            header: None,
            payload: b"hi",
        };
        assert_eq!(shared.publish_internal(&acc, &m), 1);
        assert_eq!(hits.load(SeqCst), 1);
        shared.unsubscribe_internal(&acc, &sub);
        assert_eq!(shared.publish_internal(&acc, &m), 0);
        assert_eq!(hits.load(SeqCst), 1);
        srv.shutdown().await;
    }
}
