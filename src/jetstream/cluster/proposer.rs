//! A replicated stream's proposer: the one task that turns the messages and API requests
//! queued for the stream's group into log entries, in order.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use tokio::sync::mpsc;

use super::entry::{Entry, PubMsg};
use super::Item;
use crate::jetstream::consumer::Cx;
use crate::jetstream::engine::no_responders;
use crate::jetstream::types::now_nanos;
use crate::raft::{Group, ProposeError};
use crate::server::ServerShared;

/// A proposal carries at most this many bytes of messages, or this many messages.
const BATCH_BYTES: usize = 256 << 10;
const BATCH_MSGS: usize = 1024;

/// Proposes a stream's writes in order: as many queued messages as fit in one entry, an
/// API request alone. One proposal at a time; what queues meanwhile goes in the next one.
/// A proposal that may still commit (it timed out) is not answered: the publisher's ack
/// times out and it retries (with `Nats-Msg-Id`, safely). Messages refused because this
/// member no longer leads (it hands over, or another was elected) were never appended:
/// each publisher gets the `503` status a stream without a leader here gives (what
/// nats-server's clients see while a stream's leadership moves, and retry on at once).
pub(super) async fn run(
    group: Group,
    mut rx: mpsc::UnboundedReceiver<Item>,
    session: u64,
    queued: Arc<AtomicUsize>,
    srv: Weak<ServerShared>,
    account: String,
) {
    let mut held: Option<Item> = None;
    loop {
        let first = match held.take() {
            Some(i) => i,
            None => match rx.recv().await {
                Some(i) => i,
                None => return,
            },
        };
        let entry = match first {
            Item::Api {
                subject,
                reply,
                payload,
            } => Entry::Api {
                proposer: session,
                ts: now_nanos(),
                subject,
                reply,
                payload,
            },
            Item::Msg(m) => {
                let mut size = m.encoded_len();
                let mut msgs = vec![m];
                while size < BATCH_BYTES && msgs.len() < BATCH_MSGS {
                    match rx.try_recv() {
                        Ok(Item::Msg(m)) => {
                            size += m.encoded_len();
                            msgs.push(m);
                        }
                        Ok(other) => {
                            held = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let bytes: usize = msgs.iter().map(queued_size).sum();
                queued.fetch_sub(bytes.min(queued.load(Relaxed)), Relaxed);
                Entry::Msgs {
                    proposer: session,
                    ts: now_nanos(),
                    msgs,
                }
            }
        };
        if let Err(e) = group.propose(entry.encode()).await {
            tracing::debug!(
                "JetStream: stream group {}: proposal failed: {e}",
                group.name()
            );
            if let (ProposeError::NotLeader { .. }, Entry::Msgs { msgs, .. }) = (&e, &entry) {
                refuse(&srv, &account, msgs);
            }
        }
    }
}

/// Answers the publishers of `msgs` with a no-responders status (see [`run`]).
fn refuse(srv: &Weak<ServerShared>, account: &str, msgs: &[PubMsg]) {
    let Some(srv) = srv.upgrade() else {
        return;
    };
    let Some(acc) = srv.accounts.get(account) else {
        return;
    };
    let cx = Cx::new(&srv, &acc);
    for m in msgs {
        no_responders(&cx, &m.reply);
    }
}

/// What a queued message counted for (`Event::size` of the publish it came from).
fn queued_size(m: &PubMsg) -> usize {
    64 + m.subject.len()
        + m.reply.len()
        + m.header.as_ref().map_or(0, |h| h.len())
        + m.payload.len()
}
