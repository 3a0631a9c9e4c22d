//! [`Group`]: one Raft group on this node, the handle the rest of natsd uses.
//!
//! It opens the group's storage under its directory, runs openraft on it, and turns
//! openraft's results into ours: [`ProposeError`], [`GroupMetrics`], plain node ids.
//! Incoming RPCs for the group are handed to [`Group::handle_rpc`] by the transport.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{BasicNode, ChangeMembers, Raft, ServerState, SnapshotPolicy};

use super::log_store::LogStore;
use super::network::{decode_request, encode_reply, NetFactory, RpcOp, Transport};
use super::sm_store::{SinceSnapshot, SmStore};
use super::{GroupMetrics, NodeId, ProposeError, ReplicaProgress, Role, StateMachine, TypeConfig};

mod elect;
mod handover;
use handover::watch_leading;
pub use handover::StepDown;

/// How long a snapshot's last chunk may take to be answered: the member installs the whole
/// snapshot first.
const INSTALL_SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(600);
/// How long any other chunk of a snapshot may take to be answered.
const SNAPSHOT_CHUNK_TIMEOUT: Duration = Duration::from_secs(10);

/// How one group runs on this node.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// The group's name: unique in the cluster, one subject token (`[A-Za-z0-9_-]`).
    pub name: String,
    /// This node's id in the group.
    pub id: NodeId,
    /// Where the log, vote and snapshot live (`<store_dir>/…/raft/<group>/`).
    pub dir: PathBuf,
    pub heartbeat: Duration,
    pub election_timeout_min: Duration,
    pub election_timeout_max: Duration,
    /// Take a snapshot after this many applied entries since the last one (the owner may
    /// ask for one sooner: [`Group::ask_snapshot`]).
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot, so a briefly absent follower catches
    /// up from the log instead of a full snapshot.
    pub keep_after_snapshot: u64,
    /// How long `propose` and membership changes wait for a commit.
    pub propose_timeout: Duration,
    /// Entries sent in one append RPC at most (an RPC is one message over the routes,
    /// whose parser takes up to 64 MiB).
    pub max_entries_per_rpc: u64,
    /// `None` (the default): every log append is fsynced before it counts. `Some(d)`: at
    /// most `d` apart, as nats-server's Raft logs follow `jetstream { sync_interval }`.
    pub sync_every: Option<Duration>,
    /// A heartbeat that only brings a follower the new commit index waits this long for
    /// an append to carry it instead (network.rs `Deferred`); `None` sends each at once.
    pub defer_heartbeat: Option<Duration>,
    /// Bytes of the newest log entries kept in memory; older ones are read back from the
    /// log file when a follower needs them (log_index.rs).
    pub log_cache_bytes: usize,
}

impl GroupConfig {
    /// Defaults close to nats-server's Raft (heartbeat 1 s there, elections after 4-9 s;
    /// ours are quicker so a new leader comes well within 5 s). A heartbeat every 500 ms
    /// keeps an idle cluster's CPU at nats-server's (at 250 ms, three nodes with five R3
    /// streams and their consumers idled at 1.4-1.9x its CPU, docs/benchmarks.md); the
    /// pre-vote's quiet time follows it (`elect.rs`).
    pub fn new(name: impl Into<String>, id: NodeId, dir: impl Into<PathBuf>) -> GroupConfig {
        GroupConfig {
            name: name.into(),
            id,
            dir: dir.into(),
            heartbeat: Duration::from_millis(500),
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            snapshot_every: 10_000,
            keep_after_snapshot: 1000,
            propose_timeout: Duration::from_secs(5),
            max_entries_per_rpc: 64,
            sync_every: None,
            defer_heartbeat: Some(Duration::from_millis(5)),
            log_cache_bytes: 16 << 20,
        }
    }
}

/// A handle on one group; cheap to clone.
#[derive(Clone)]
pub struct Group {
    inner: Arc<Inner>,
}

struct Inner {
    raft: Raft<TypeConfig>,
    cfg: GroupConfig,
    /// Never stands for election again (`observe`): the member is on its way out.
    observer: std::sync::atomic::AtomicBool,
    /// Elections held off until then ([`Group::hold_elections`]).
    hold_until: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// A step-down is under way: nothing new is proposed (see [`Group::step_down`]).
    stepping_down: std::sync::atomic::AtomicBool,
    /// A step-down is under way, from its first step (a second one is refused).
    handing_over: std::sync::atomic::AtomicBool,
    /// Proposals on their way into the log, and their last one's end during a step-down.
    inflight: std::sync::atomic::AtomicUsize,
    drained: tokio::sync::Notify,
    /// For the step-down's [`RpcOp::Elect`] (openraft's own RPCs go through `NetFactory`).
    transport: Arc<dyn Transport>,
    /// What was applied since the last snapshot.
    since: Arc<SinceSnapshot>,
    /// Opened without any state here (see [`Group::is_blank`]).
    blank: bool,
    /// While this member leads: the term, and when it was first seen leading in it (no
    /// earlier than openraft started its lease, see [`Group::settle_before_handover`]).
    led_since: Arc<std::sync::Mutex<Option<(u64, tokio::time::Instant)>>>,
    /// The member this leader sends nothing to for now (0: none; see `handover.rs`).
    muted: Arc<std::sync::atomic::AtomicU64>,
    /// When each peer last accepted an append or heartbeat from this member.
    heard: Arc<super::network::Heard>,
    /// When this member last accepted an append or snapshot from a leader, on `heard`'s
    /// clock (0: never). Its elections go by it (`elect.rs`).
    heard_leader: std::sync::atomic::AtomicU64,
    /// The log (shared with openraft), for the last log id a pre-vote compares.
    log: LogStore,
}

/// How many of `voters` make a majority.
fn majority(voters: usize) -> usize {
    voters / 2 + 1
}

fn ms(d: Duration) -> u64 {
    d.as_millis().try_into().unwrap_or(u64::MAX)
}

fn write_err(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ProposeError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => {
            ProposeError::Membership(c.to_string())
        }
        RaftError::Fatal(f) => ProposeError::Stopped(f.to_string()),
    }
}

impl Group {
    /// Opens the group's storage and starts it. A new group does nothing until it is
    /// bootstrapped on its initial members or added to an existing group.
    pub async fn open(
        cfg: GroupConfig,
        sm: Box<dyn StateMachine>,
        transport: Arc<dyn Transport>,
    ) -> io::Result<Group> {
        let ctx = |e: String| {
            io::Error::other(format!(
                "raft group {} at {}: {e}",
                cfg.name,
                cfg.dir.display()
            ))
        };
        // The name is one subject token on the NATS transport.
        if cfg.name.is_empty()
            || cfg
                .name
                .chars()
                .any(|c| c == '.' || c == '*' || c == '>' || c.is_whitespace())
        {
            return Err(ctx(
                "the name must be one subject token (no '.', '*', '>' or spaces)".into(),
            ));
        }
        // Reading the log and restoring the snapshot (a whole stream, for a stream's
        // group) take as long as they are large: not on a runtime thread.
        let (dir, id, every, cache) =
            (cfg.dir.clone(), cfg.id, cfg.sync_every, cfg.log_cache_bytes);
        let (log, sm) = tokio::task::spawn_blocking(move || -> io::Result<_> {
            let log = LogStore::open(&dir, every, cache)?;
            Ok((log, SmStore::open(&dir, id, sm)?))
        })
        .await
        .map_err(|e| ctx(format!("open task failed: {e}")))??;
        #[allow(deprecated)] // `send_snapshot_timeout`: the timeout of a chunk but the last
        let rcfg = openraft::Config {
            cluster_name: cfg.name.clone(),
            heartbeat_interval: ms(cfg.heartbeat),
            election_timeout_min: ms(cfg.election_timeout_min),
            election_timeout_max: ms(cfg.election_timeout_max),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_every.max(1)),
            max_in_snapshot_log_to_keep: cfg.keep_after_snapshot,
            // One chunk per RPC: keep each well under a route's max_payload (1 MiB default).
            snapshot_max_chunk_size: 256 * 1024,
            // The last chunk's answer waits for the member to install the snapshot (a whole
            // stream, for a stream's group). openraft's default, 200 ms for every chunk,
            // made the transfer of a snapshot whose chunks take longer (a busy route, a
            // loaded machine) start over and over: the member never caught up.
            install_snapshot_timeout: ms(INSTALL_SNAPSHOT_TIMEOUT),
            send_snapshot_timeout: ms(SNAPSHOT_CHUNK_TIMEOUT),
            max_payload_entries: cfg.max_entries_per_rpc.max(1),
            ..Default::default()
        }
        .validate()
        .map_err(|e| ctx(format!("bad config: {e}")))?;
        let net = NetFactory {
            group: Arc::from(cfg.name.as_str()),
            me: cfg.id,
            transport: transport.clone(),
            // A member that was unreachable is tried again this soon (a restarted one
            // catches up as quickly as with 250 ms heartbeats).
            backoff: cfg.heartbeat.min(Duration::from_millis(250)),
            defer: cfg.defer_heartbeat,
            muted: Default::default(),
            heard: Default::default(),
        };
        let (muted, heard) = (net.muted.clone(), net.heard.clone());
        let since = sm.since.clone();
        let blank = log.is_blank();
        let log_handle = log.clone();
        let raft = Raft::new(cfg.id, Arc::new(rcfg), net, log, sm)
            .await
            .map_err(|e| ctx(format!("start: {e}")))?;
        let led_since = Arc::new(std::sync::Mutex::new(None));
        watch_leading(&raft, cfg.id, led_since.clone());
        let group = Group {
            inner: Arc::new(Inner {
                raft,
                cfg,
                observer: Default::default(),
                hold_until: Default::default(),
                stepping_down: Default::default(),
                handing_over: Default::default(),
                inflight: Default::default(),
                drained: Default::default(),
                transport,
                since,
                blank,
                led_since,
                muted,
                heard,
                heard_leader: Default::default(),
                log: log_handle,
            }),
        };
        // openraft's own election timer stays off: elections go through a pre-vote.
        group.inner.raft.runtime_config().elect(false);
        elect::drive_elections(
            Arc::downgrade(&group.inner),
            group.inner.cfg.election_timeout_min,
            group.inner.cfg.election_timeout_max,
        );
        Ok(group)
    }

    /// Whether the group opened without any state on this node (no vote ever saved, an
    /// empty log): a new member, not one reopened after a restart. (Its metrics cannot
    /// tell at once: they start empty until openraft reports the loaded state.)
    pub fn is_blank(&self) -> bool {
        self.inner.blank
    }

    pub fn name(&self) -> &str {
        &self.inner.cfg.name
    }

    pub fn id(&self) -> NodeId {
        self.inner.cfg.id
    }

    /// Makes a brand-new group of `members` (id, server name). Every initial member may
    /// call it with the same set; on a group that already has state it does nothing.
    pub async fn bootstrap(&self, members: &[(NodeId, String)]) -> Result<(), ProposeError> {
        let nodes: BTreeMap<NodeId, BasicNode> = members
            .iter()
            .map(|(id, name)| (*id, BasicNode::new(name.clone())))
            .collect();
        match self.inner.raft.initialize(nodes).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(RaftError::APIError(e)) => Err(ProposeError::Membership(e.to_string())),
            Err(RaftError::Fatal(f)) => Err(ProposeError::Stopped(f.to_string())),
        }
    }

    /// Replicates `data` and returns what the state machine's `apply` returned for it
    /// on this (the leader) member, once a majority has it.
    pub async fn propose(&self, data: Vec<u8>) -> Result<Vec<u8>, ProposeError> {
        // Counted before the check, so a step-down either refuses it or waits for it.
        let _inflight = Inflight::enter(&self.inner);
        self.check_leader()?;
        match tokio::time::timeout(
            self.inner.cfg.propose_timeout,
            self.inner.raft.client_write(super::Bin(data.into())),
        )
        .await
        {
            Err(_) => Err(ProposeError::Timeout),
            Ok(Ok(resp)) => Ok(resp.data),
            Ok(Err(e)) => Err(write_err(e)),
        }
    }

    /// Refuses early when this member is not a leader that a majority still follows.
    fn check_leader(&self) -> Result<(), ProposeError> {
        let m = self.metrics();
        let leaving = self.inner.stepping_down.load(SeqCst);
        if m.role != Role::Leader || leaving {
            return Err(ProposeError::NotLeader {
                leader: m.leader.filter(|_| !leaving),
            });
        }
        // `None` on a leader: just elected, no heartbeat round acknowledged yet.
        let stale = m
            .millis_since_quorum_ack
            .is_some_and(|t| t > ms(self.inner.cfg.election_timeout_max));
        if m.voters.len() > 1 && stale {
            return Err(ProposeError::NoQuorum);
        }
        Ok(())
    }

    /// Whether this member follows and votes but never stands (lame duck mode).
    pub fn is_observer(&self) -> bool {
        self.inner.observer.load(Relaxed)
    }

    pub fn is_leader(&self) -> bool {
        self.metrics().role == Role::Leader
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.metrics().leader
    }

    /// The voting members, as this member last learned them.
    pub fn members(&self) -> Vec<NodeId> {
        self.metrics().voters
    }

    /// On the leader: brings `id` (server `name`) up to date as a learner, then makes it
    /// a voter. The new member must have opened the group (without bootstrapping it).
    pub async fn add_member(&self, id: NodeId, name: &str) -> Result<(), ProposeError> {
        self.check_leader()?;
        let t = self.inner.cfg.propose_timeout;
        let raft = &self.inner.raft;
        match tokio::time::timeout(t, raft.add_learner(id, BasicNode::new(name), true)).await {
            Err(_) => return Err(ProposeError::Timeout),
            Ok(r) => r.map_err(write_err)?,
        };
        let change = ChangeMembers::AddVoterIds(BTreeSet::from([id]));
        match tokio::time::timeout(t, raft.change_membership(change, false)).await {
            Err(_) => Err(ProposeError::Timeout),
            Ok(r) => r.map(|_| ()).map_err(write_err),
        }
    }

    /// On the leader: removes `id` from the group (it stops receiving entries).
    pub async fn remove_member(&self, id: NodeId) -> Result<(), ProposeError> {
        self.check_leader()?;
        let change = ChangeMembers::RemoveVoters(BTreeSet::from([id]));
        let t = self.inner.cfg.propose_timeout;
        match tokio::time::timeout(t, self.inner.raft.change_membership(change, false)).await {
            Err(_) => Err(ProposeError::Timeout),
            Ok(r) => r.map(|_| ()).map_err(write_err),
        }
    }

    /// Notifies `n` whenever this member's leadership changes: its role or the group's
    /// leader, and a new leader's first acknowledgement by a majority (not on appends).
    /// For a tick that acts on leadership (subscribes a stream's subjects on its leader): a
    /// handover then moves it within a round trip, not a tick. Call it once per group; the
    /// watch ends when the group stops.
    pub fn notify_leadership(&self, n: Arc<tokio::sync::Notify>) {
        let mut rx = self.inner.raft.server_metrics();
        let weak = Arc::downgrade(&self.inner);
        let within = self.inner.cfg.election_timeout_max;
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                n.notify_one();
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let g = Group { inner };
                if g.metrics().role == Role::Leader {
                    let acked = |m: &GroupMetrics| {
                        m.role != Role::Leader || m.millis_since_quorum_ack.is_some()
                    };
                    if g.wait_for(within, acked).await.is_ok() {
                        n.notify_one();
                    }
                }
            }
        });
    }

    /// Keeps this member from standing for election for `d` (it still follows and votes):
    /// while a leader hands over to a preferred member, only that one campaigns.
    pub fn hold_elections(&self, d: Duration) {
        let until = tokio::time::Instant::now() + d;
        {
            let mut h = self
                .inner
                .hold_until
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if h.is_some_and(|h| h >= until) {
                return;
            }
            *h = Some(until);
        }
        let g = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            let mut h = g.inner.hold_until.lock().unwrap_or_else(|p| p.into_inner());
            if *h == Some(until) {
                *h = None;
            }
        });
    }

    /// The election timeout's upper bound (how long a handover may take).
    pub fn election_timeout_max(&self) -> Duration {
        self.inner.cfg.election_timeout_max
    }

    /// Makes this member an observer, as nats-server's lame duck mode does: it keeps
    /// following (and voting) but never stands for election again; a leader steps down.
    /// Whether it led and handed over (`Some(true)`), led and could not (`Some(false)`), or
    /// did not lead (`None`).
    pub async fn observe(&self) -> Option<bool> {
        self.inner.observer.store(true, Relaxed);
        if !self.is_leader() {
            return None;
        }
        match self.step_down().await {
            Ok(_) => Some(true),
            // A `STEPDOWN` request's handover is under way: its outcome is this one's.
            Err(ProposeError::HandingOver) => Some(self.another_leads().await.is_ok()),
            Err(e) => {
                tracing::warn!(group = %self.inner.cfg.name, "lame duck: leadership not handed over: {e}");
                Some(false)
            }
        }
    }

    /// Stands for election now rather than after an election timeout (a group just
    /// bootstrapped, whose creator wants it led at once). Failure only means the usual
    /// timeout decides.
    pub async fn campaign(&self) {
        if let Err(e) = self.inner.raft.trigger().elect().await {
            tracing::debug!("raft group {}: campaign: {e}", self.inner.cfg.name);
        }
    }

    /// Takes a snapshot now (and purges the log behind it as configured).
    pub async fn snapshot_now(&self) -> Result<(), ProposeError> {
        self.inner
            .raft
            .trigger()
            .snapshot()
            .await
            .map_err(|f| ProposeError::Stopped(f.to_string()))
    }

    /// Entries and their payload bytes applied since the last snapshot (built or
    /// installed).
    pub fn since_snapshot(&self) -> (u64, u64) {
        let s = &self.inner.since;
        (s.entries.load(Relaxed), s.bytes.load(Relaxed))
    }

    /// As [`Group::snapshot_now`], besides openraft's every `snapshot_every` entries, but
    /// once until a build ends (openraft ignores one asked for while it builds).
    pub async fn ask_snapshot(&self) -> Result<(), ProposeError> {
        if self.inner.since.asked.swap(true, Relaxed) {
            return Ok(());
        }
        self.inner.raft.trigger().snapshot().await.map_err(|e| {
            self.inner.since.asked.store(false, Relaxed);
            ProposeError::Stopped(e.to_string())
        })
    }

    pub fn metrics(&self) -> GroupMetrics {
        let m = self.inner.raft.metrics().borrow().clone();
        let role = match m.state {
            ServerState::Leader => Role::Leader,
            ServerState::Candidate => Role::Candidate,
            ServerState::Follower => Role::Follower,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Stopped,
        };
        let membership = m.membership_config.membership();
        let last = m.last_log_index.unwrap_or(0);
        let replicas = m
            .replication
            .as_ref()
            .map(|r| {
                r.iter()
                    .filter(|(id, _)| **id != m.id)
                    .map(|(id, matched)| {
                        let matched = matched.map(|l| l.index);
                        ReplicaProgress {
                            id: *id,
                            matched,
                            lag: last.saturating_sub(matched.unwrap_or(0)),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        GroupMetrics {
            id: m.id,
            role,
            term: m.current_term,
            leader: self.known_leader(role, m.current_leader),
            last_log_index: m.last_log_index,
            applied: m.last_applied.map(|l| l.index),
            snapshot: m.snapshot.map(|l| l.index),
            purged: m.purged.map(|l| l.index),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            millis_since_quorum_ack: m.millis_since_quorum_ack,
            voted_for: m.vote.leader_id().voted_for(),
            applied_term: m.last_applied.map(|l| l.leader_id.term),
            replicas,
        }
    }

    /// Waits until `cond` holds for this member's metrics, up to `timeout`; the last
    /// metrics seen come back either way.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        cond: impl Fn(&GroupMetrics) -> bool,
    ) -> Result<GroupMetrics, GroupMetrics> {
        let mut rx = self.inner.raft.metrics();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let m = self.metrics();
            if cond(&m) {
                return Ok(m);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return Err(self.metrics()),
            }
        }
    }

    /// Handles one RPC that arrived for this group; the reply body goes back to the
    /// sender. A bad body is an error for the transport to report, not a panic.
    /// A binary append's entries keep slices of `body` (no copy of the payloads).
    pub async fn handle_rpc(&self, op: RpcOp, body: bytes::Bytes) -> Result<Vec<u8>, String> {
        let raft = &self.inner.raft;
        let body_ref: &[u8] = &body;
        match op {
            RpcOp::Append => {
                let req: AppendEntriesRequest<TypeConfig> = decode_request(op, body_ref)?;
                let res = raft.append_entries(req).await;
                self.note_append(&res);
                encode_reply(op, &res)
            }
            RpcOp::AppendBin => {
                let req = super::codec::decode_append(body)
                    .map_err(|e| format!("bad {} request: {e}", op.as_str()))?;
                let res = raft.append_entries(req).await;
                self.note_append(&res);
                encode_reply(op, &res)
            }
            RpcOp::Vote => {
                let req: VoteRequest<NodeId> = decode_request(op, body_ref)?;
                encode_reply(op, &raft.vote(req).await)
            }
            RpcOp::Snapshot => {
                let req: InstallSnapshotRequest<TypeConfig> = decode_request(op, body_ref)?;
                let res = raft.install_snapshot(req).await;
                if res.is_ok() {
                    self.heard_leader();
                }
                encode_reply(op, &res)
            }
            RpcOp::Elect => {
                // A member on its way out (lame duck) or holding off does not stand.
                if self.held_off() {
                    return Err("not standing for election".into());
                }
                raft.trigger().elect().await.map_err(|e| e.to_string())?;
                Ok(Vec::new())
            }
            RpcOp::PreVote => self.prevote(body_ref).await,
            RpcOp::Hold => {
                let millis: u64 = std::str::from_utf8(body_ref)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or("bad HOLD request: not a number of milliseconds")?;
                self.hold_elections(Duration::from_millis(millis.min(60_000)));
                Ok(Vec::new())
            }
        }
    }

    /// Stops the group and closes its files; the handle answers `Stopped` afterwards.
    pub async fn shutdown(&self) {
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::warn!(group = %self.inner.cfg.name, error = %e, "raft group did not stop cleanly");
        }
    }
}

/// A proposal counted in [`Inner::inflight`] until it ends (or is dropped).
struct Inflight<'a>(&'a Inner);

impl<'a> Inflight<'a> {
    fn enter(inner: &'a Inner) -> Self {
        inner.inflight.fetch_add(1, SeqCst);
        Inflight(inner)
    }
}

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, SeqCst) == 1 && self.0.stepping_down.load(SeqCst) {
            self.0.drained.notify_waiters();
        }
    }
}
