//! An account's connections counted across the cluster, as nats-server's `nrclients` and
//! `nrleafs` (docs/nats-server-behaviour.md, "Account connections across a cluster", §35):
//! each server publishes its local client and leaf counts of an account (not `$G`) in `$SYS` on
//! `$SYS.SERVER.ACCOUNT.<acc>.CONNS` and `$SYS.ACCOUNT.<acc>.SERVER.CONNS` whenever it changes
//! and every 30 s while it is not zero (`AccountNumConns`); every server listens on the first
//! and keeps the last count per remote server. A connection is refused when local + remote
//! reaches the account's `max_connections` (`client/connect.rs`; a leaf: `max_leafnodes`,
//! `leaf/conn/handshake.rs`), and when an update shows the account over a limit, the newest
//! local clients (leaf connections) past it are closed, as nats-server's
//! `updateRemoteServer`. Requests `$SYS.REQ.ACCOUNT.<acc>.CONNS` are answered to their reply
//! when there are local clients; a server's `SHUTDOWN` drops its counts; counts not refreshed
//! for three heartbeats are dropped. Unlike nats-server, the first update from a server also
//! makes natsd send its own count at once (the peer may have missed it while the route was
//! forming), and so does a server's first STATSZ, which also asks it (and everyone) for
//! their counts; so counts converge without waiting for the 30 s heartbeat.

use super::{DataStats, ServerInfo, Sys};
use crate::account::Handler;
use crate::client::errs;
use crate::conn::{CloseReason, ConnKind};
use crate::deliver::Msg;
use crate::server::ServerShared;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// nats-server's `eventsHBInterval`.
pub const HEARTBEAT: Duration = Duration::from_secs(30);
/// A remote count older than this is dropped (its server stopped sending).
const EXPIRE: Duration = Duration::from_secs(90);

/// What the service task is told.
pub enum Event {
    /// This server's count of the account changed.
    Local(String),
    /// An `AccountNumConns` from a peer.
    Remote(Bytes),
    /// `$SYS.REQ.ACCOUNT.<acc>.CONNS` with its reply subject.
    Request { acc: String, reply: String },
    /// `$SYS.SERVER.<id>.SHUTDOWN`.
    Shutdown(Bytes),
    /// `$SYS.SERVER.<id>.STATSZ`: a server is alive.
    Statsz(Bytes),
}

/// One server's counts of an account: clients and leafnode connections.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Counts {
    pub conns: usize,
    pub leafs: usize,
}

impl std::ops::Add for Counts {
    type Output = Counts;
    fn add(self, o: Counts) -> Counts {
        Counts {
            conns: self.conns + o.conns,
            leafs: self.leafs + o.leafs,
        }
    }
}

/// One account's remote counts: server id → (counts, when heard).
type PerServer = HashMap<String, (Counts, Instant)>;

fn total(per: &PerServer) -> Counts {
    per.values().fold(Counts::default(), |t, v| t + v.0)
}

/// An account's local count changed: tell the service task, which tells the other servers
/// (never for `$G`, as nats-server).
pub fn changed(srv: &ServerShared, acc: &str) {
    if acc == crate::account::GLOBAL_ACCOUNT {
        return;
    }
    if let Some(sys) = srv.sys.get() {
        sys.conns.send(Event::Local(acc.to_string()));
    }
}

/// Whether this server has clients or leaf connections of `acc`.
fn has_local(acc: &crate::account::Account) -> bool {
    acc.num_conns.load(Relaxed) + acc.num_leafs.load(Relaxed) > 0
}

/// Remote counts by account.
#[derive(Default)]
pub struct Tracker {
    remote: Mutex<HashMap<String, PerServer>>,
    /// Servers heard from (STATSZ): a new one is asked for its counts and told ours.
    known: Mutex<std::collections::HashSet<String>>,
    tx: Mutex<Option<mpsc::UnboundedSender<Event>>>,
}

impl Tracker {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, PerServer>> {
        self.remote.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tell the service task (no-op once it has stopped).
    pub fn send(&self, e: Event) {
        if let Some(tx) = self.tx.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = tx.send(e);
        }
    }

    /// Set one server's counts of `acc`; returns the account's remote totals and whether
    /// that server was new for the account.
    fn set(&self, acc: &str, server: &str, counts: Counts) -> (Counts, bool) {
        let mut m = self.lock();
        let per = m.entry(acc.to_string()).or_default();
        let new = per
            .insert(server.to_string(), (counts, Instant::now()))
            .is_none();
        (total(per), new)
    }

    /// Forget a server; returns the accounts whose totals changed, with their new totals.
    fn remove_server(&self, server: &str) -> Vec<(String, Counts)> {
        let mut m = self.lock();
        let mut out = Vec::new();
        for (acc, per) in m.iter_mut() {
            if per.remove(server).is_some() {
                out.push((acc.clone(), total(per)));
            }
        }
        out
    }

    /// Drop counts not heard for [`EXPIRE`]; returns the changed totals.
    fn expire(&self) -> Vec<(String, Counts)> {
        let mut m = self.lock();
        let mut out = Vec::new();
        for (acc, per) in m.iter_mut() {
            let before = per.len();
            per.retain(|_, v| v.1.elapsed() < EXPIRE);
            if per.len() != before {
                out.push((acc.clone(), total(per)));
            }
        }
        out
    }
}

/// Subscribe the updates, requests and shutdowns; returns the task's receiver.
pub fn start(
    srv: &Arc<ServerShared>,
    sys: &Arc<Sys>,
    subs: &mut Vec<Arc<crate::account::Subscription>>,
) -> mpsc::UnboundedReceiver<Event> {
    let (tx, rx) = mpsc::unbounded_channel();
    *sys.conns.tx.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    let own_inbox = format!("$SYS._INBOX_.{}", srv.id);
    let mut sub =
        |subject: &str, h: Handler| match srv.subscribe_internal(&sys.acc, subject, None, h) {
            Ok(s) => subs.push(s),
            Err(e) => tracing::error!("$SYS services: {e}"),
        };
    // Updates (published, or answers to our requests) carry their payload; peers' STATSZ and
    // SHUTDOWN only their subject (the server id in it).
    let remote: fn(&Msg<'_>) -> Event = |m| Event::Remote(Bytes::copy_from_slice(m.payload));
    let statsz: fn(&Msg<'_>) -> Event = |m| Event::Statsz(Bytes::copy_from_slice(m.subject));
    let shutdown: fn(&Msg<'_>) -> Event = |m| Event::Shutdown(Bytes::copy_from_slice(m.subject));
    for (subject, event) in [
        ("$SYS.SERVER.ACCOUNT.*.CONNS", remote),
        (own_inbox.as_str(), remote),
        ("$SYS.SERVER.*.STATSZ", statsz),
        ("$SYS.SERVER.*.SHUTDOWN", shutdown),
    ] {
        let weak = Arc::downgrade(sys);
        sub(
            subject,
            Arc::new(move |_, m: &Msg<'_>| {
                if let Some(sys) = weak.upgrade() {
                    sys.conns.send(event(m));
                }
            }),
        );
    }
    let weak = Arc::downgrade(sys);
    sub(
        "$SYS.REQ.ACCOUNT.*.CONNS",
        Arc::new(move |_, m: &Msg<'_>| {
            let (Some(sys), Some(reply)) = (weak.upgrade(), m.reply) else {
                return;
            };
            let acc = super::account::account_token(m.subject);
            if let (Some(acc), Ok(reply)) = (acc, std::str::from_utf8(reply)) {
                sys.conns.send(Event::Request {
                    acc,
                    reply: reply.to_string(),
                });
            }
        }),
    );
    rx
}

#[derive(Serialize)]
struct Stats {
    msgs: u64,
    bytes: u64,
    gateways: DataStats,
    routes: DataStats,
    leafs: DataStats,
}

/// nats-server's `AccountNumConns`.
#[derive(Serialize)]
struct AccountNumConns {
    #[serde(rename = "type")]
    kind: &'static str,
    id: String,
    timestamp: String,
    server: ServerInfo,
    acc: String,
    name: String,
    conns: usize,
    leafnodes: usize,
    total_conns: usize,
    num_subscriptions: usize,
    sent: Stats,
    received: Stats,
    slow_consumers: u64,
}

/// What natsd reads of a peer's `AccountNumConns`.
#[derive(Deserialize)]
struct Incoming {
    server: IncomingServer,
    acc: String,
    #[serde(default)]
    conns: usize,
    #[serde(default)]
    leafnodes: usize,
}

#[derive(Deserialize)]
struct IncomingServer {
    id: String,
}

fn message(srv: &ServerShared, sys: &Sys, acc: &crate::account::Account) -> Vec<u8> {
    let conns = acc.num_conns.load(Relaxed);
    let leafnodes = acc.num_leafs.load(Relaxed);
    let k = &acc.kinds;
    let out = acc.out_msgs.load(Relaxed);
    let inn = acc.in_msgs.load(Relaxed);
    let m = AccountNumConns {
        kind: "io.nats.server.advisory.v1.account_connections",
        id: crate::util::ids::alnum(22),
        timestamp: crate::util::time::rfc3339_nano(SystemTime::now()),
        server: sys.server_info(srv),
        acc: acc.name.clone(),
        name: acc.name.clone(),
        conns,
        leafnodes,
        total_conns: conns + leafnodes,
        num_subscriptions: acc.sublist.count(),
        sent: Stats {
            msgs: out,
            bytes: 0,
            gateways: ms(&k.gateways_out),
            routes: ms(&k.routes_out),
            leafs: DataStats::default(),
        },
        received: Stats {
            msgs: inn,
            bytes: 0,
            gateways: ms(&k.gateways_in),
            routes: ms(&k.routes_in),
            leafs: DataStats::default(),
        },
        slow_consumers: 0,
    };
    serde_json::to_vec(&m).unwrap_or_default()
}

fn ms(m: &crate::account::MsgBytes) -> DataStats {
    let (msgs, bytes) = m.get();
    DataStats { msgs, bytes }
}

/// Publish this server's count of `name` on both subjects (never for `$G`, as nats-server).
fn publish(srv: &Arc<ServerShared>, sys: &Sys, name: &str) {
    if name == crate::account::GLOBAL_ACCOUNT {
        return;
    }
    let Some(acc) = srv.accounts.get(name) else {
        return;
    };
    let body = message(srv, sys, &acc);
    sys.publish(
        srv,
        &format!("$SYS.SERVER.ACCOUNT.{name}.CONNS"),
        None,
        &body,
    );
    sys.publish(
        srv,
        &format!("$SYS.ACCOUNT.{name}.SERVER.CONNS"),
        None,
        &body,
    );
}

/// Handle one event in the service task.
pub fn handle(srv: &Arc<ServerShared>, sys: &Sys, e: Event) {
    match e {
        Event::Local(name) => publish(srv, sys, &name),
        Event::Request { acc, reply } => {
            if let Some(a) = srv.accounts.get(&acc) {
                if has_local(&a) {
                    let body = message(srv, sys, &a);
                    sys.publish(srv, &reply, None, &body);
                }
            }
        }
        Event::Remote(payload) => {
            let m: Incoming = match serde_json::from_slice(&payload) {
                Ok(m) => m,
                Err(e) => {
                    tracing::error!("Error unmarshalling account connection event message: {e}");
                    return;
                }
            };
            if m.server.id == srv.id {
                return;
            }
            // Only accounts this server has.
            if srv.accounts.get(&m.acc).is_none() {
                return;
            }
            let counts = Counts {
                conns: m.conns,
                leafs: m.leafnodes,
            };
            let (total, new) = sys.conns.set(&m.acc, &m.server.id, counts);
            apply(srv, &m.acc, total);
            // A server heard of for the first time may have missed our last update (sent
            // before its interest reached us over a new route): tell it now rather than at
            // the next heartbeat. (nats-server waits for the heartbeat; the extra update is
            // the same message, idempotent.)
            if new && srv.accounts.get(&m.acc).is_some_and(|a| has_local(&a)) {
                publish(srv, sys, &m.acc);
            }
        }
        Event::Shutdown(subject) => {
            if let Some(id) = server_token(&subject, ".SHUTDOWN") {
                sys.conns
                    .known
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id);
                for (acc, total) in sys.conns.remove_server(&id) {
                    apply(srv, &acc, total);
                }
            }
        }
        Event::Statsz(subject) => {
            let Some(id) = server_token(&subject, ".STATSZ") else {
                return;
            };
            let new = id != srv.id
                && sys
                    .conns
                    .known
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id);
            if new {
                sync(srv, sys);
            }
        }
    }
}

/// The `<id>` of `$SYS.SERVER.<id><suffix>`.
fn server_token(subject: &[u8], suffix: &str) -> Option<String> {
    std::str::from_utf8(subject)
        .ok()?
        .strip_prefix("$SYS.SERVER.")?
        .strip_suffix(suffix)
        .map(str::to_string)
}

/// A server appeared (its first STATSZ): updates either side sent before the route carried
/// their interest were lost, so ask everyone for their counts of our accounts
/// (`$SYS.REQ.ACCOUNT.<acc>.CONNS`, answered to `$SYS._INBOX_.<our id>` by servers with
/// clients of it, nats-server's `enableAccountTracking` request) and send ours.
fn sync(srv: &Arc<ServerShared>, sys: &Sys) {
    #[derive(Serialize)]
    struct Req {
        server: ServerInfo,
        acc: String,
    }
    let reply = format!("$SYS._INBOX_.{}", srv.id);
    for a in srv.accounts.all() {
        if a.name == crate::account::GLOBAL_ACCOUNT || !super::account::is_token(&a.name) {
            continue;
        }
        let body = serde_json::to_vec(&Req {
            server: sys.server_info(srv),
            acc: a.name.clone(),
        })
        .unwrap_or_default();
        let subject = format!("$SYS.REQ.ACCOUNT.{}.CONNS", a.name);
        sys.publish(srv, &subject, Some(&reply), &body);
        if has_local(&a) {
            publish(srv, sys, &a.name);
        }
    }
}

/// The heartbeat: republish every account with local clients, drop stale remote counts.
pub fn heartbeat(srv: &Arc<ServerShared>, sys: &Sys) {
    let names: Vec<String> = srv
        .accounts
        .all()
        .iter()
        .filter(|a| has_local(a))
        .map(|a| a.name.clone())
        .collect();
    for n in names {
        publish(srv, sys, &n);
    }
    for (acc, total) in sys.conns.expire() {
        apply(srv, &acc, total);
    }
}

/// Store the account's remote totals and, when local + remote is over its `max_connections`
/// (`max_leafnodes`), close the newest local clients (leaf connections) past it (`-ERR
/// 'maximum account active connections exceeded'`, `Maximum Account Connections Exceeded`),
/// as nats-server's `updateRemoteServer`.
fn apply(srv: &Arc<ServerShared>, name: &str, remote: Counts) {
    let Some(acc) = srv.accounts.get(name) else {
        return;
    };
    acc.remote_conns.store(remote.conns, Relaxed);
    acc.remote_leafs.store(remote.leafs, Relaxed);
    let Some(limits) = srv.live_opts().account_limits.get(name).cloned() else {
        return;
    };
    let over = |max: i64, local: usize, remote: usize| {
        usize::try_from(max).map_or(0, |max| (local + remote).saturating_sub(max))
    };
    let clients = over(
        limits.max_connections,
        acc.num_conns.load(Relaxed),
        remote.conns,
    );
    let leafs = over(
        limits.max_leafnodes,
        acc.num_leafs.load(Relaxed),
        remote.leafs,
    );
    for (kind, n) in [(ConnKind::Client, clients), (ConnKind::Leaf, leafs)] {
        if n == 0 {
            continue;
        }
        let all = match kind {
            ConnKind::Leaf => srv.leafnodes.as_ref().map_or_else(Vec::new, |l| {
                l.links().iter().map(|k| k.conn.clone()).collect()
            }),
            _ => srv.clients(),
        };
        let mut conns: Vec<_> = all
            .into_iter()
            .filter(|c| c.kind == kind && !c.is_closed() && c.meta().account == name)
            .collect();
        conns.sort_by_key(|c| std::cmp::Reverse(c.start));
        for c in conns.into_iter().take(n) {
            let line = format!("-ERR '{}'\r\n", errs::MAX_ACCOUNT_CONNECTIONS);
            c.out
                .push_now(line.len(), |b| b.extend_from_slice(line.as_bytes()));
            tracing::error!("{} - {}", c.log_prefix(), errs::MAX_ACCOUNT_CONNECTIONS);
            c.close(CloseReason::MaxAccountConnectionsExceeded);
        }
    }
}
