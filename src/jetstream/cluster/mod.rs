//! Clustered JetStream: the JetStream nodes of a cluster form one meta group (which streams
//! exist, on which nodes) and one Raft group per stream (its messages), on `crate::raft`
//! over the routes. Every JetStream node gets every `$JS.API` request (each subscribes);
//! [`JsCluster::intercept`] decides which one answers: the meta leader for what changes or
//! lists the streams of an account, the stream's leader for everything about one stream.
//!
//! - Discovery (`hello.rs`): nodes announce themselves on `$NATSD.JS.HELLO` in the system
//!   account; the first meta group is bootstrapped by the lowest node id once the set of
//!   nodes has been stable for a while; later nodes are added by the meta leader.
//! - Streams (`replicas.rs`): a meta assignment names the stream's peers; each peer creates
//!   its copy and opens the stream's group; the leader subscribes to the stream's subjects,
//!   batches the publishes into log entries (`entry.rs`) and acks each once its entry is
//!   committed and applied (a quorum has it).
//! - Consumers (`cgroups.rs`): each consumer of a replicated stream runs in a group of its
//!   own on the stream's peers; its leader's copy delivers and proposes its progress.
//!
//! docs/architecture.md ("Clustered JetStream") has the design and what is not built yet.

mod cgroup_boot;
mod cgroups;
pub mod copier;
pub mod entry;
mod events;
mod hello;
pub mod meta;
pub mod placement;
mod proposer;
mod raftz;
mod replicas;
mod requests;
pub mod restore;
mod scale;
mod transfer;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use super::engine::Engine;
use super::{Event, EventKind, JetStream};
use crate::raft::{Group, NatsTransport, NodeId};
use crate::server::ServerShared;
use meta::MetaState;

/// The meta group's name.
const META_GROUP: &str = "_meta_";
/// Publishes waiting for a stream's proposer, in bytes, at most (more are dropped: the
/// publisher gets no ack and retries).
const MAX_QUEUED: usize = 64 << 20;

/// A node's id in every group: a hash of its server name (unique in a JetStream cluster,
/// stable across restarts), kept below 2^53 so JSON readers keep it exact.
pub fn node_id(server_name: &str) -> NodeId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in server_name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h & ((1 << 53) - 1)).max(1)
}

/// nats-server's `getHash`: a server name's SHA-256, URL-safe base64, its first 8 characters
/// (the `peer` of `/jsz` `meta_cluster`).
pub fn server_hash(name: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let mut s = data_encoding::BASE64URL_NOPAD.encode(d.as_ref());
    s.truncate(8);
    s
}

/// Whether a member leads its group with a majority behind it: the leader role and a
/// majority's acknowledgement in this leadership, lately (5 s: well past an election
/// timeout, and past the heartbeats a loaded machine delays). A restarted node may come
/// back as the leader of a term the others have left; it must not answer (its copy is
/// not rebuilt yet) until a majority follows it.
pub(crate) fn leads(m: &crate::raft::GroupMetrics) -> bool {
    m.role == crate::raft::Role::Leader
        && (m.voters.len() <= 1 || m.millis_since_quorum_ack.is_some_and(|t| t < 5000))
}

fn group_leads(g: &Group) -> bool {
    leads(&g.metrics())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the async start brings: the transport and the meta group.
struct Ready {
    transport: Arc<NatsTransport>,
    meta: Group,
}

/// Work for a stream's proposer (its leader).
enum Item {
    Msg(entry::PubMsg),
    Api {
        subject: String,
        reply: String,
        payload: bytes::Bytes,
    },
}

/// This node's copy of one replicated stream.
struct Replica {
    /// Shared: the tick reads it for every copy every 100 ms.
    sa: Arc<meta::StreamAssignment>,
    group: Group,
    tx: mpsc::UnboundedSender<Item>,
    /// The creation's answer, until the group's first leader is known.
    answer: Option<String>,
    /// A membership change of the group is under way (on its leader).
    changing: Arc<AtomicBool>,
    /// The assignment update (`sa.updated`) this node last proposed to the log.
    proposed_update: i64,
    /// This node led the group at the last tick (a leader-elected advisory when it comes
    /// to), and when it last said it leads without a quorum.
    led: bool,
    lost_sent: Option<tokio::time::Instant>,
    /// Since when (unix nanos) this node leads the group with a majority: STREAM and
    /// CONSUMER INFO's `cluster.leader_since`.
    led_since: Option<i64>,
    json_pace: events::JsonPace,
    /// On the leader of a mirror or a source: its copier, until leadership moves.
    copier: Option<tokio_util::sync::CancellationToken>,
    /// Since when the copy is no longer assigned here (it stays a while so that its group
    /// can commit the change that removes it).
    unassigned: Option<tokio::time::Instant>,
    /// Unix nanos this copy was opened here: a consumer created before it had its group
    /// formed without this node, whose leader adds it (`cgroups.rs`).
    opened_ns: i64,
    /// On the leader of a stream being restored: the data's subscription (`restore.rs`).
    receiving: Option<restore::Receiving>,
    /// A later member of the group's creation, until the group has members here.
    boot: Option<replicas::Boot>,
}

pub struct JsCluster {
    srv: Weak<ServerShared>,
    js: Weak<JetStream>,
    pub me: NodeId,
    pub name: String,
    pub cluster_name: String,
    /// `<store_dir>/natsd-cluster`: `raft/<group>` and `streams/<group>`.
    base: PathBuf,
    ready: OnceLock<Ready>,
    pub meta_state: Arc<Mutex<MetaState>>,
    /// Nodes heard from on `$NATSD.JS.HELLO`.
    peers: Mutex<BTreeMap<NodeId, hello::Peer>>,
    settle: Mutex<hello::Settle>,
    replicas: Mutex<BTreeMap<(String, String), Replica>>,
    /// This node's members of the replicated consumers' groups (`cgroups.rs`).
    cgroups: Mutex<BTreeMap<cgroups::CKey, cgroups::ConsumerReplica>>,
    /// Runs the tick's group work now rather than at its next interval: a group came to
    /// have a leader, or a stream's log changed its consumers (creations are answered
    /// within a round trip or two, not a tick or two).
    kick: Arc<tokio::sync::Notify>,
    /// The consumers of this node's stream copies may have changed since the tick last
    /// reconciled their groups (a stream's log applied a request, a restore or a snapshot,
    /// or the copies changed); the tick reconciles them then, or once a second regardless.
    consumers_stale: Arc<AtomicBool>,
    /// Bytes waiting in the proposers' queues.
    queued: Arc<AtomicUsize>,
    /// Names this process as the proposer of stream log entries: random at every start, so
    /// entries replayed after a restart (proposed by an earlier run) are applied without
    /// answering anyone again — their reply subjects may belong to other requests by now.
    pub session: u64,
    /// Unix nanos this process's clustered JetStream started: creations assigned before
    /// that (replayed from the meta log) are not answered again.
    started: i64,
    /// nats-server's JetStream runs in this cluster: answer nothing (hello.rs).
    standby: std::sync::atomic::AtomicBool,
    /// A meta leader has been known since the start (`meta_health`).
    meta_seen: AtomicBool,
}

/// Notifies `kick` once `group` is led (here with a majority behind it, or elsewhere),
/// waiting an election or two at most.
async fn kick_once_led(group: &Group, kick: &tokio::sync::Notify) {
    let within = group.election_timeout_max() * 2;
    let led = |m: &crate::raft::GroupMetrics| m.leader.is_some_and(|l| l != m.id) || leads(m);
    if group.wait_for(within, led).await.is_ok() {
        kick.notify_one();
    }
}

/// Campaigns for a group this node just bootstrapped (which started a first election)
/// until it has a leader, then kicks the tick. The other members open the group when they
/// apply the creation, a moment after this one: a vote request that reached them before
/// is lost, and this campaigns again soon rather than after an election timeout.
async fn campaign_until_led(group: &Group, kick: &tokio::sync::Notify) {
    let mut wait = Duration::from_millis(20);
    for _ in 0..6 {
        if group.wait_for(wait, |m| m.leader.is_some()).await.is_ok() {
            break;
        }
        group.campaign().await;
        wait *= 2;
    }
    kick_once_led(group, kick).await;
}

impl JsCluster {
    /// Starts clustered JetStream for `js` when the server has a cluster; the groups open
    /// in a task, and until then no request is answered.
    pub fn start(srv: &Arc<ServerShared>, js: &Arc<JetStream>) -> Option<Arc<JsCluster>> {
        let copts = srv.opts.cluster.as_ref()?;
        let base = js
            .config
            .store_dir
            .parent()
            .unwrap_or(&js.config.store_dir)
            .join("natsd-cluster");
        let c = Arc::new(JsCluster {
            srv: Arc::downgrade(srv),
            js: Arc::downgrade(js),
            me: node_id(&srv.name),
            name: srv.name.clone(),
            cluster_name: copts.name.clone().unwrap_or_default(),
            base,
            ready: OnceLock::new(),
            meta_state: Arc::new(Mutex::new(MetaState::default())),
            peers: Mutex::new(BTreeMap::new()),
            settle: Mutex::new(hello::Settle::default()),
            replicas: Mutex::new(BTreeMap::new()),
            cgroups: Mutex::new(BTreeMap::new()),
            kick: Arc::new(tokio::sync::Notify::new()),
            consumers_stale: Arc::new(AtomicBool::new(true)),
            queued: Arc::new(AtomicUsize::new(0)),
            standby: std::sync::atomic::AtomicBool::new(false),
            session: rand::random::<u64>() | 1,
            started: super::types::now_nanos(),
            meta_seen: AtomicBool::new(false),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        let task = c.clone();
        srv.tasks.spawn(async move {
            if let Err(e) = task.open(tx).await {
                tracing::error!("JetStream cluster could not start: {e}");
                return;
            }
            task.run(rx).await;
        });
        tracing::info!(
            "JetStream cluster: node {} ({}) in cluster {:?}",
            c.name,
            c.me,
            c.cluster_name
        );
        Some(c)
    }

    fn raft_dir(&self, group: &str) -> PathBuf {
        self.base.join("raft").join(group)
    }

    /// A group's settings: its directory, and its log fsynced as the streams are
    /// (`jetstream { sync_interval }`: every append only with `sync_always`, as nats-server
    /// syncs its Raft logs).
    fn group_config(&self, group: &str) -> crate::raft::GroupConfig {
        let mut cfg = crate::raft::GroupConfig::new(group, self.me, self.raft_dir(group));
        if let Some(js) = self.js.upgrade() {
            let sync = js.config.sync;
            cfg.sync_every = (!sync.always).then_some(sync.interval);
        }
        cfg
    }

    async fn open(self: &Arc<Self>, changed: mpsc::UnboundedSender<()>) -> Result<(), String> {
        let srv = self.srv.upgrade().ok_or("server gone")?;
        let transport = NatsTransport::start(&srv, self.me)?;
        let cfg = self.group_config(META_GROUP);
        let sm = meta::MetaSm {
            state: self.meta_state.clone(),
            changed,
        };
        let meta = Group::open(cfg, Box::new(sm), transport.clone())
            .await
            .map_err(|e| e.to_string())?;
        transport.register(&meta);
        hello::subscribe(self, &srv)?;
        transfer::subscribe(self, &srv)?;
        let _ = self.ready.set(Ready { transport, meta });
        Ok(())
    }

    /// The loops: hello and bootstrap, reconcile on meta changes, the replicas' tick.
    async fn run(self: Arc<Self>, mut changed: mpsc::UnboundedReceiver<()>) {
        let Some(srv) = self.srv.upgrade() else {
            return;
        };
        let stop = srv.shutdown_signal();
        let mut hello = tokio::time::interval(hello::EVERY);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        hello.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        let mut ticks = 0u64;
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = hello.tick() => self.hello_round().await,
                _ = tick.tick() => {
                    self.meta_health();
                    self.tick();
                    ticks += 1;
                    let leaving = self.leaving();
                    if leaving {
                        self.reconcile().await;
                    }
                    if self.consumers_stale.swap(false, Relaxed) || leaving || ticks % 10 == 0 {
                        self.reconcile_consumers().await;
                    }
                    self.consumers_tick();
                }
                _ = self.kick.notified() => {
                    self.tick();
                    if self.consumers_stale.swap(false, Relaxed) {
                        self.reconcile_consumers().await;
                    }
                    self.consumers_tick();
                }
                c = changed.recv() => {
                    if c.is_none() {
                        break;
                    }
                    while changed.try_recv().is_ok() {}
                    self.reconcile().await;
                }
            }
        }
        self.shutdown().await;
    }

    fn meta(&self) -> Option<&Group> {
        self.ready.get().map(|r| &r.meta)
    }

    /// nats-server's JetStream runs in this cluster and this node's stands by (hello.rs).
    pub fn is_standby(&self) -> bool {
        self.standby.load(Relaxed)
    }

    pub fn is_meta_leader(&self) -> bool {
        self.meta().is_some_and(group_leads)
    }

    /// What `/healthz` says of the meta group (nats-server 2.15.1's words): `None` when this
    /// node knows its leader (itself or another); before it ever has, "still recovering" (as
    /// a fresh nats-server node answers); after, "not established contact".
    pub fn meta_health(&self) -> Option<&'static str> {
        if self.meta().is_some_and(|m| m.leader().is_some()) {
            self.meta_seen.store(true, Relaxed);
            None
        } else if self.meta_seen.load(Relaxed) {
            Some("JetStream has not established contact with a meta leader")
        } else {
            Some("JetStream is still recovering meta layer")
        }
    }

    /// `/jsz` `meta_cluster` (nats-server's `MetaClusterInfo`): the meta group as this node
    /// sees it; `replicas` (the other members' progress) on the leader only, as there.
    pub fn meta_cluster(&self) -> Option<serde_json::Value> {
        let m = self.meta()?.metrics();
        let size = m.voters.len();
        let mut v = serde_json::json!({
            "name": self.cluster_name,
            "cluster_size": size,
            "quorum_needed": size / 2 + 1,
            "pending": 0,
            "pending_requests": 0,
            "pending_infos": 0,
        });
        if let Some(l) = m.leader {
            let name = self.name_of(l);
            v["peer"] = server_hash(&name).into();
            v["leader"] = name.into();
        }
        if m.role == crate::raft::Role::Leader {
            let reps: Vec<serde_json::Value> = m
                .replicas
                .iter()
                .map(|r| {
                    let name = self.name_of(r.id);
                    let mut p = serde_json::json!({
                        "name": name,
                        "current": r.lag == 0,
                        "active": 0,
                        "peer": server_hash(&name),
                    });
                    if r.lag > 0 {
                        p["lag"] = r.lag.into();
                    }
                    p
                })
                .collect();
            v["replicas"] = reps.into();
        }
        Some(v)
    }

    /// The nodes heard from lately: (id, server name).
    pub fn live_peers(&self) -> Vec<(NodeId, String)> {
        let now = tokio::time::Instant::now();
        lock(&self.peers)
            .iter()
            .filter(|(_, p)| now.duration_since(p.seen) < hello::GONE)
            .map(|(id, p)| (*id, p.name.clone()))
            .collect()
    }

    /// The server name of node `id`, as far as this node knows.
    pub fn name_of(&self, id: NodeId) -> String {
        if id == self.me {
            return self.name.clone();
        }
        lock(&self.peers)
            .get(&id)
            .map(|p| p.name.clone())
            .unwrap_or_default()
    }

    /// `true` when the event was taken care of here (forwarded, answered, or not ours to
    /// answer); `false` lets the engine handle it as on a single server.
    pub fn intercept(&self, engine: &mut Engine, srv: &Arc<ServerShared>, ev: &mut Event) -> bool {
        if self.ready.get().is_none() || self.standby.load(Relaxed) {
            return true;
        }
        match ev.kind.clone() {
            EventKind::Publish(stream) => self.forward_publish(engine, srv, ev, &stream),
            _ if ev.subject == "$JS.API.META.LEADER.STEPDOWN" => {
                self.meta_stepdown(srv, ev);
                true
            }
            _ if ev.subject == "$JS.API.SERVER.REMOVE" => {
                self.server_remove(srv, ev);
                true
            }
            EventKind::Api => self.api(engine, srv, ev),
            EventKind::NotEnabled => !self.is_meta_leader(),
            EventKind::Ack
            | EventKind::FlowControl
            | EventKind::Template(_)
            | EventKind::Sync(..) => false,
        }
    }

    /// A client's publish into a replicated stream: the leader queues it for its
    /// proposer; anyone else drops it (only the leader subscribes, but a subscription can
    /// outlive the leadership by a moment).
    fn forward_publish(
        &self,
        engine: &Engine,
        srv: &Arc<ServerShared>,
        ev: &mut Event,
        stream: &str,
    ) -> bool {
        // The tick's view of the leadership (`Engine::set_replica`, every 100 ms): reading
        // the group's metrics here would clone them for every message.
        let (leads, no_ack) = match engine
            .accounts
            .get(&*ev.acc)
            .and_then(|ja| ja.streams.get(stream))
            .map(|st| (st.replica.as_ref().map(|r| r.leader), st.cfg.no_ack))
        {
            Some((Some(leads), no_ack)) => (leads, no_ack),
            _ => return false,
        };
        if !leads {
            return true;
        }
        // A `no_ack` stream answers its publishers nothing, errors and refusals included
        // (nats-server's `canRespond`).
        if no_ack {
            ev.reply = None;
        }
        // The account's limits, before the proposal (nats-server's
        // `processClusteredInboundMsg`): refused, it never reaches the log.
        let refused = engine
            .accounts
            .get(&*ev.acc)
            .and_then(|ja| super::limits::refuse_replicated(ja, stream, ev));
        if let Some(e) = refused {
            if let Some(reply) = &ev.reply {
                let mut o = crate::jetstream::types::Obj::new();
                o.field("error", &e)
                    .field("stream", stream)
                    .field("seq", &0);
                requests::send(srv, &ev.acc, reply, &o.done());
            }
            return true;
        }
        let key = (ev.acc.to_string(), stream.to_string());
        let reps = lock(&self.replicas);
        let Some(r) = reps.get(&key) else {
            return true;
        };
        let size = ev.size();
        if self.queued.fetch_add(size, Relaxed) > MAX_QUEUED {
            self.queued.fetch_sub(size, Relaxed);
            tracing::warn!("JetStream: stream {stream:?} proposals backed up, publish dropped");
            return true;
        }
        let m = super::engine::replica::pub_msg(ev);
        if r.tx.send(Item::Msg(m)).is_err() {
            self.queued.fetch_sub(size, Relaxed);
        }
        true
    }

    /// Lame duck mode, as nats-server's `transferRaftLeaders`: every group this node is in
    /// makes it an observer (it follows and votes, never stands again) and the groups it
    /// leads step down, so clients see a new leader before this node goes. `None`: it led
    /// nothing; else whether every group it led has another leader now.
    pub async fn lame_duck(&self) -> Option<bool> {
        let mut groups: Vec<Group> = lock(&self.replicas)
            .values()
            .map(|r| r.group.clone())
            .collect();
        groups.extend(self.meta().cloned());
        groups.extend(self.consumer_groups().into_iter().map(|(_, g)| g));
        let mut all = tokio::task::JoinSet::new();
        for g in groups {
            all.spawn(async move { g.observe().await });
        }
        let mut out = None;
        while let Some(r) = all.join_next().await {
            if let Ok(Some(handed)) = r {
                out = Some(out.unwrap_or(true) && handed);
            }
        }
        out
    }

    /// Every replicated stream of this node and the meta group stop.
    async fn shutdown(&self) {
        self.close_consumer_groups().await;
        let reps = std::mem::take(&mut *lock(&self.replicas));
        for (_, r) in reps {
            if let Some(c) = &r.copier {
                c.cancel();
            }
            r.group.shutdown().await;
        }
        if let Some(r) = self.ready.get() {
            r.meta.shutdown().await;
            r.transport.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    /// nats-server's `getHash("nats-1")` (SHA-256, URL-safe base64, 8 characters), as
    /// Python's hashlib and base64 compute it.
    #[test]
    fn server_hash_is_nats_servers() {
        assert_eq!(super::server_hash("nats-1"), "PO89UlKX");
    }
}
