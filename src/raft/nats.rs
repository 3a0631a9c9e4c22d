//! The NATS [`Transport`]: Raft RPCs as internal request/reply in the system account,
//! over the routes like any `$SYS` traffic.
//!
//! A request for group `G`, op `OP` (`AE`, `VOTE`, `SNAP`) to node `T` is published on
//! `$NATSD.RAFT.G.OP.T` with reply `$NATSD.RAFT._R.<from>.<n>`. Each node subscribes
//! `$NATSD.RAFT.*.*.<self>` and its own reply inbox. Our own prefix, never `$NRG.`
//! (nats-server's Raft, a different protocol), so mixed clusters cannot cross.
//! Reply bodies start with `+` (then the group's reply) or `-` (then an error text).
//! Handlers only parse and spawn; the group's work runs in its own task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::oneshot;

use super::group::Group;
use super::network::{RpcOp, Transport, TransportError, TransportFuture};
use super::NodeId;
use crate::account::{Account, Handler, Subscription};
use crate::deliver::Msg;
use crate::server::ServerShared;

const PREFIX: &str = "$NATSD.RAFT.";
/// RPCs being handled at once on this node; more are dropped (their senders time out and
/// retry), so a flood cannot grow tasks without bound.
const MAX_IN_FLIGHT: usize = 1024;

/// One node's Raft transport over its server's routes.
pub struct NatsTransport {
    srv: Weak<ServerShared>,
    acc: Arc<Account>,
    node: NodeId,
    groups: Mutex<HashMap<String, Group>>,
    waiters: Mutex<HashMap<u64, oneshot::Sender<Vec<u8>>>>,
    next: AtomicU64,
    subs: Mutex<Vec<Arc<Subscription>>>,
    in_flight: Arc<AtomicUsize>,
    me: Weak<NatsTransport>,
    /// Nodes that said they take appends in binary form.
    binary: Mutex<std::collections::HashSet<NodeId>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes a waiter when its call ends, answered or not.
struct WaiterGuard {
    transport: Weak<NatsTransport>,
    n: u64,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        if let Some(t) = self.transport.upgrade() {
            lock(&t.waiters).remove(&self.n);
        }
    }
}

impl NatsTransport {
    /// Subscribes node `node`'s RPC and reply subjects in the system account of `srv`.
    pub fn start(srv: &Arc<ServerShared>, node: NodeId) -> Result<Arc<NatsTransport>, String> {
        let name = srv.system_account_name();
        let acc = srv.accounts.get(name).ok_or_else(|| {
            format!("raft transport needs the system account; {name:?} does not exist")
        })?;
        let t = Arc::new_cyclic(|me| NatsTransport {
            srv: Arc::downgrade(srv),
            acc,
            node,
            groups: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            subs: Mutex::new(Vec::new()),
            in_flight: Arc::new(AtomicUsize::new(0)),
            me: me.clone(),
            binary: Mutex::new(std::collections::HashSet::new()),
        });
        let weak = Arc::downgrade(&t);
        let requests: Handler = Arc::new(move |_, m: &Msg<'_>| {
            if let Some(t) = weak.upgrade() {
                t.on_request(m);
            }
        });
        let weak = Arc::downgrade(&t);
        let replies: Handler = Arc::new(move |_, m: &Msg<'_>| {
            if let Some(t) = weak.upgrade() {
                t.on_reply(m);
            }
        });
        let req_sub =
            srv.subscribe_internal(&t.acc, &format!("{PREFIX}*.*.{node}"), None, requests)?;
        let rep_sub =
            srv.subscribe_internal(&t.acc, &format!("{PREFIX}_R.{node}.*"), None, replies)?;
        *lock(&t.subs) = vec![req_sub, rep_sub];
        Ok(t)
    }

    /// Serves RPCs for `group` on this node.
    pub fn register(&self, group: &Group) {
        lock(&self.groups).insert(group.name().to_string(), group.clone());
    }

    /// Records whether node `id` takes appends in binary form (its hello says so).
    pub fn set_binary_append(&self, id: NodeId, yes: bool) {
        let mut b = lock(&self.binary);
        if yes {
            b.insert(id);
        } else {
            b.remove(&id);
        }
    }

    pub fn unregister(&self, name: &str) {
        lock(&self.groups).remove(name);
    }

    /// Withdraws the subscriptions.
    pub fn stop(&self) {
        let subs = std::mem::take(&mut *lock(&self.subs));
        if let Some(srv) = self.srv.upgrade() {
            for s in &subs {
                srv.unsubscribe_internal(&self.acc, s);
            }
        }
    }

    fn on_request(&self, m: &Msg<'_>) {
        let Some(reply) = m.reply.and_then(|r| std::str::from_utf8(r).ok()) else {
            return;
        };
        let parsed = std::str::from_utf8(m.subject).ok().and_then(|s| {
            let mut it = s.strip_prefix(PREFIX)?.split('.');
            let (g, op) = (it.next()?, RpcOp::parse(it.next()?)?);
            Some((g.to_string(), op))
        });
        let Some((name, op)) = parsed else {
            tracing::debug!(subject = %String::from_utf8_lossy(m.subject), "raft rpc: bad subject");
            return;
        };
        let group = lock(&self.groups).get(&name).cloned();
        let (Some(srv), reply, body) = (
            self.srv.upgrade(),
            reply.to_string(),
            // The one copy out of the route's read buffer; an append's entries are slices
            // of it from here on.
            bytes::Bytes::copy_from_slice(m.payload),
        ) else {
            return;
        };
        if self.in_flight.fetch_add(1, Relaxed) >= MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Relaxed);
            tracing::debug!(group = %name, "raft rpc dropped: {MAX_IN_FLIGHT} already in flight");
            return;
        }
        let in_flight = self.in_flight.clone();
        let acc = self.acc.clone();
        srv.clone().tasks.spawn(async move {
            let out = match group {
                Some(g) => g.handle_rpc(op, body).await,
                None => Err(format!("group {name} is not served here")),
            };
            let mut payload = Vec::new();
            match out {
                Ok(b) => {
                    payload.push(b'+');
                    payload.extend_from_slice(&b);
                }
                Err(e) => {
                    payload.push(b'-');
                    payload.extend_from_slice(e.as_bytes());
                }
            }
            let m = Msg {
                subject: reply.as_bytes(),
                reply: None,
                header: None,
                payload: &payload,
            };
            srv.publish_internal(&acc, &m);
            in_flight.fetch_sub(1, Relaxed);
        });
    }

    fn on_reply(&self, m: &Msg<'_>) {
        let n = std::str::from_utf8(m.subject)
            .ok()
            .and_then(|s| s.rsplit('.').next())
            .and_then(|t| t.parse::<u64>().ok());
        if let Some(tx) = n.and_then(|n| lock(&self.waiters).remove(&n)) {
            let _ = tx.send(m.payload.to_vec());
        }
    }
}

impl Transport for NatsTransport {
    fn call(
        &self,
        group: &str,
        _from: NodeId,
        target: NodeId,
        op: RpcOp,
        body: &[u8],
    ) -> TransportFuture {
        let n = self.next.fetch_add(1, Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiters).insert(n, tx);
        let guard = WaiterGuard {
            transport: self.me.clone(),
            n,
        };
        let subject = format!("{PREFIX}{group}.{}.{target}", op.as_str());
        let reply = format!("{PREFIX}_R.{}.{n}", self.node);
        let sent = match self.srv.upgrade() {
            Some(srv) => {
                let m = Msg {
                    subject: subject.as_bytes(),
                    reply: Some(reply.as_bytes()),
                    header: None,
                    payload: body,
                };
                srv.publish_internal(&self.acc, &m)
            }
            None => 0,
        };
        Box::pin(async move {
            let _guard = guard;
            if sent == 0 {
                return Err(TransportError::Unreachable(format!(
                    "no route to node {target} for {subject}"
                )));
            }
            let reply = rx
                .await
                .map_err(|_| TransportError::Failed("transport stopped".into()))?;
            match reply.split_first() {
                Some((b'+', rest)) => Ok(rest.to_vec()),
                Some((b'-', rest)) => Err(TransportError::Failed(
                    String::from_utf8_lossy(rest).into_owned(),
                )),
                _ => Err(TransportError::Failed("empty raft reply".into())),
            }
        })
    }

    fn binary_append(&self, target: NodeId) -> bool {
        lock(&self.binary).contains(&target)
    }
}
