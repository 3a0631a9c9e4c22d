//! This node's copies of replicated streams: opened and closed to match the meta
//! assignments (`reconcile`), fed by their groups' logs (`StreamSm`), led by whichever
//! member its group elects (`tick`), written to through one proposer task per stream.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use super::cgroup_boot::ORPHAN_AFTER;
use super::entry::Entry;
use super::meta::StreamAssignment;
use super::placement::{self, Step};
use super::{lock, Item, JsCluster, Replica};
use crate::jetstream::consumer::Cx;
use crate::jetstream::engine::replica::CONSUMER_STATES;
use crate::jetstream::engine::replica_snap::{self, SnapCursor, SNAP_PIECE};
use crate::jetstream::types::now_nanos;
use crate::jetstream::JetStream;
use crate::raft::{Group, GroupMetrics, NodeId, Role, StateMachine};
use crate::server::ServerShared;

/// A creation older than this is not answered again when its assignment is replayed.
const ANSWER_WITHIN_NS: i64 = 30_000_000_000;
/// A copy no longer assigned here is closed after this at the latest.
const LEAVE_WITHIN: Duration = Duration::from_secs(30);

/// A stream group snapshots at the latest after this many times `stream_snapshot_every`
/// entries (it bounds the log, whose index costs 40 bytes an entry in memory).
const SNAPSHOT_CAP: u64 = 16;

/// Whether a stream's group should snapshot now: at least `every` entries since its last
/// snapshot, and log bytes since then of at least half what the snapshot writes (the
/// stream's bytes). A snapshot is the whole stream, so a large stream is not rewritten for
/// a few small entries: what snapshots write stays within twice what the log received.
///
/// The leader of a stream over [`LEADER_DEFERS_ABOVE`] waits for log bytes of twice the
/// stream's instead: a member's applies wait while it writes its snapshot, and the leader's
/// applies send the PubAcks (a 100 MB stream's took its publishers' acks 200–250 ms),
/// while a follower's build delays no commit (it answers appends meanwhile). So the
/// followers snapshot, and the leader once it no longer leads, or once its longer log
/// holds twice the stream (a stream at its limits, whose old messages go), or at
/// openraft's cap: its log stays within twice the stream's bytes or the cap's entries.
///
/// Members take turns: the thresholds of the member of `rank` (its place among the
/// group's voters by id) are `(8 + rank) / 8` times the first's, so the followers, which
/// see the same entries at about the same time, do not write the stream at once. When
/// they did, both were slow to answer appends together and a 100 MB stream's PubAcks
/// stalled 160–200 ms though the leader left snapshots to them.
pub(super) fn snapshot_due(
    entries: u64,
    bytes: u64,
    stream_bytes: u64,
    every: u64,
    leading: bool,
    rank: u64,
) -> bool {
    let needed = if leading && stream_bytes > LEADER_DEFERS_ABOVE {
        stream_bytes.saturating_mul(4)
    } else {
        stream_bytes
    };
    let scale = 8u64.saturating_add(rank);
    entries.saturating_mul(8) >= every.saturating_mul(scale)
        && bytes.saturating_mul(16) >= needed.saturating_mul(scale)
}

/// A stream's leader leaves snapshots of a stream larger than this to its followers.
const LEADER_DEFERS_ABOVE: u64 = 16 << 20;

/// A stream group's state machine: the engine's copy of the stream.
struct StreamSm {
    js: Weak<JetStream>,
    srv: Weak<ServerShared>,
    account: String,
    stream: String,
    /// This process's proposer token ([`JsCluster::session`]).
    session: u64,
    kick: Arc<tokio::sync::Notify>,
    consumers_stale: Arc<AtomicBool>,
}

impl StateMachine for StreamSm {
    fn apply(&mut self, index: u64, data: &[u8]) -> Vec<u8> {
        self.apply_entry(index, None, data)
    }

    fn apply_from(&mut self, index: u64, leader: NodeId, data: &[u8]) -> Vec<u8> {
        self.apply_entry(index, Some(leader), data)
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Err(e) = self.snapshot_to(&mut out) {
            tracing::error!("JetStream: {e}");
        }
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        self.restore_from(&mut &snapshot[..])
    }

    /// The whole stream, a piece at a time (engine/replica_snap.rs), the engine taken for
    /// each piece only.
    fn snapshot_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        // (Not an empty snapshot while JetStream stops: it would stand for the stream.)
        let js = self
            .js
            .upgrade()
            .ok_or_else(|| std::io::Error::other("JetStream stopped"))?;
        let mut cur = SnapCursor::default();
        let mut buf = Vec::with_capacity(SNAP_PIECE * 2);
        loop {
            let done = js.engine().replica_snapshot_piece(
                &self.account,
                &self.stream,
                &mut cur,
                &mut buf,
            )?;
            out.write_all(&buf)?;
            buf.clear();
            if done {
                return Ok(());
            }
        }
    }

    fn restore_from(&mut self, input: &mut dyn std::io::Read) -> Result<(), String> {
        let js = self.js.upgrade().ok_or("JetStream stopped")?;
        let srv = self.srv.upgrade().ok_or("server stopped")?;
        // Read into a store of its own first, the engine held only to put it in place.
        let r = replica_snap::restore_replica(&js, &srv, &self.account, &self.stream, input);
        // Its consumers are the snapshot's now (set after, so a tick between does not
        // take the old ones for the new).
        self.consumers_stale.store(true, Relaxed);
        r
    }
}

impl StreamSm {
    /// `leader`: the member that appended the entry (consumers' origins follow from it).
    fn apply_entry(&mut self, index: u64, leader: Option<NodeId>, data: &[u8]) -> Vec<u8> {
        let entry = match Entry::decode(data) {
            Ok(e) => e,
            Err(e) => {
                tracing::error!("JetStream: stream {:?} log entry {index}: {e}", self.stream);
                return Vec::new();
            }
        };
        if let (Some(js), Some(srv)) = (self.js.upgrade(), self.srv.upgrade()) {
            let mine = match &entry {
                Entry::Msgs { proposer, .. } | Entry::Api { proposer, .. } => {
                    *proposer == self.session
                }
            };
            // A client's request (a consumer created, updated or deleted, the stream
            // updated): the tick opens or closes groups and answers at once.
            let request =
                matches!(&entry, Entry::Api { subject, .. } if subject.starts_with("$JS.API."));
            // Consumers come and go with requests and restores, not with their progress
            // or a source's copies.
            let consumers = matches!(&entry, Entry::Api { subject, .. }
                if subject != CONSUMER_STATES && subject != super::copier::COPY);
            js.engine()
                .apply_replicated(&srv, &self.account, &self.stream, entry, mine, leader);
            if consumers {
                self.consumers_stale.store(true, Relaxed);
            }
            if request {
                self.kick.notify_one();
            }
        }
        Vec::new()
    }
}

/// A replica's group as the tick sees it: (account, stream, metrics, assignment).
type View = (String, String, GroupMetrics, Arc<StreamAssignment>);

impl JsCluster {
    /// Opens the copies this node should hold and closes those it should not. A copy whose
    /// stream moved away from this node stays open while its group may still need it to
    /// commit the change: while it counts itself a member and hears from a leader (once the
    /// leader has dropped it, its election timer runs out), [`LEAVE_WITHIN`] at most.
    pub(super) async fn reconcile(self: &Arc<Self>) {
        self.consumers_stale.store(true, Relaxed);
        let (want, all): (Vec<StreamAssignment>, Vec<StreamAssignment>) = {
            let ms = lock(&self.meta_state);
            let all = ms
                .streams
                .values()
                .flat_map(|m| m.values())
                .cloned()
                .collect();
            let want = ms
                .streams
                .values()
                .flat_map(|m| m.values())
                .filter(|sa| sa.peers.iter().any(|p| p.0 == self.me))
                .cloned()
                .collect();
            (want, all)
        };
        let now = tokio::time::Instant::now();
        let mut close = Vec::new();
        // Copies whose consumers' groups still need this node to commit its removal.
        let consumers_need = self.consumers_need();
        {
            let mut reps = lock(&self.replicas);
            for ((acc, name), r) in reps.iter_mut() {
                let same =
                    |a: &String, n: &String, g: &String| a == acc && n == name && *g == r.sa.group;
                if let Some(sa) = want
                    .iter()
                    .find(|sa| same(&sa.account, &sa.name, &sa.group))
                {
                    r.unassigned = None;
                    if *r.sa != *sa {
                        r.sa = Arc::new(sa.clone());
                    }
                    continue;
                }
                // Moved away: the leader of the copy still moves the group (itself last).
                let moved = all.iter().find(|sa| same(&sa.account, &sa.name, &sa.group));
                if let Some(sa) = moved {
                    if *r.sa != *sa {
                        r.sa = Arc::new(sa.clone());
                    }
                }
                let moved = moved.is_some();
                let since = *r.unassigned.get_or_insert(now);
                // Still a member its leader talks to (of the stream's group or of one of
                // its consumers'): it may be needed for the change.
                let needed = still_needed(&r.group.metrics(), self.me)
                    || consumers_need.contains(&(acc.clone(), name.clone()));
                if !moved || !needed || now.duration_since(since) >= LEAVE_WITHIN {
                    close.push((acc.clone(), name.clone()));
                }
            }
        }
        for (acc, name) in close {
            self.close_replica(&acc, &name).await;
        }
        for sa in want {
            let key = (sa.account.clone(), sa.name.clone());
            if lock(&self.replicas).contains_key(&key) {
                continue;
            }
            if let Err(e) = self.open_replica(sa).await {
                tracing::error!("JetStream: {e}");
            }
        }
    }

    /// Whether a copy is waiting to leave (the tick then reconciles again).
    pub(super) fn leaving(&self) -> bool {
        lock(&self.replicas)
            .values()
            .any(|r| r.unassigned.is_some())
    }

    async fn open_replica(self: &Arc<Self>, sa: StreamAssignment) -> Result<(), String> {
        let (Some(js), Some(srv), Some(ready)) =
            (self.js.upgrade(), self.srv.upgrade(), self.ready.get())
        else {
            return Ok(());
        };
        let dir = self.base.join("streams").join(&sa.group);
        js.engine().create_replica(&sa, &dir)?;
        let mut cfg = self.group_config(&sa.group);
        // A snapshot is the whole stream (engine/replica_snap.rs): not too often. openraft
        // takes one every SNAPSHOT_CAP × `every` entries; the tick asks for one sooner
        // when the log since the last carries enough bytes (`snapshot_due`).
        let every = js.config.stream_snapshot_every;
        cfg.snapshot_every = every.saturating_mul(SNAPSHOT_CAP);
        cfg.keep_after_snapshot = cfg.keep_after_snapshot.min(every);
        let sm = StreamSm {
            js: Arc::downgrade(&js),
            srv: Arc::downgrade(&srv),
            account: sa.account.clone(),
            stream: sa.name.clone(),
            session: self.session,
            kick: self.kick.clone(),
            consumers_stale: self.consumers_stale.clone(),
        };
        let group = Group::open(cfg, Box::new(sm), ready.transport.clone())
            .await
            .map_err(|e| format!("stream {:?} group: {e}", sa.name))?;
        ready.transport.register(&group);
        group.notify_leadership(self.kick.clone());
        // Only the peers the group was created with bootstrap it, the first of them at
        // once; a node added later waits for its leader to bring it in. A group with
        // members here (reopened after a restart) is never bootstrapped: the first
        // member's campaign would depose the leader it has not heard from yet.
        let initial = sa.bootstrap_members().to_vec();
        let boot = match boot_after(&initial, self.me).filter(|_| group.is_blank()) {
            Some(after) if after.is_zero() => {
                self.bootstrap(&srv, group.clone(), initial);
                None
            }
            Some(after) => Some(Boot {
                members: initial,
                at: tokio::time::Instant::now() + after,
            }),
            None => None,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        srv.tasks.spawn(super::proposer::run(
            group.clone(),
            rx,
            self.session,
            self.queued.clone(),
            Arc::downgrade(&srv),
            sa.account.clone(),
        ));
        let fresh =
            sa.created >= self.started && now_nanos().saturating_sub(sa.created) < ANSWER_WITHIN_NS;
        let answer = (fresh && !sa.reply.is_empty()).then(|| sa.reply.clone());
        let key = (sa.account.clone(), sa.name.clone());
        lock(&self.replicas).insert(
            key,
            Replica {
                sa: Arc::new(sa),
                group,
                tx,
                answer,
                changing: Arc::new(AtomicBool::new(false)),
                proposed_update: 0,
                unassigned: None,
                opened_ns: now_nanos(),
                led: false,
                lost_sent: None,
                led_since: None,
                json_pace: Default::default(),
                copier: None,
                receiving: None,
                boot,
            },
        );
        Ok(())
    }

    /// Bootstraps a stream's group here with `members` and campaigns until it has a
    /// leader (a kick of the tick then answers the creation).
    fn bootstrap(&self, srv: &ServerShared, group: Group, members: Vec<(NodeId, String)>) {
        let kick = self.kick.clone();
        srv.tasks.spawn(async move {
            match group.bootstrap(&members).await {
                Ok(()) => super::campaign_until_led(&group, &kick).await,
                Err(e) => tracing::warn!("JetStream: stream group {} bootstrap: {e}", group.name()),
            }
        });
    }

    async fn close_replica(&self, account: &str, name: &str) {
        let key = (account.to_string(), name.to_string());
        let Some(r) = lock(&self.replicas).remove(&key) else {
            return;
        };
        if let Some(c) = &r.copier {
            c.cancel();
        }
        if let Some(ready) = self.ready.get() {
            ready.transport.unregister(&r.sa.group);
        }
        r.group.shutdown().await;
        crate::jetstream::persist::remove_dir(&self.raft_dir(&r.sa.group));
        if let (Some(js), Some(srv)) = (self.js.upgrade(), self.srv.upgrade()) {
            js.engine().drop_replica(&srv, account, name);
        }
        crate::jetstream::persist::remove_dir(&self.base.join("streams").join(&r.sa.group));
    }

    /// Leadership into the engine (the leader subscribes), STREAM INFO's `cluster`, and
    /// the creation's answer from the first leader.
    pub(super) fn tick(&self) {
        let (Some(js), Some(srv)) = (self.js.upgrade(), self.srv.upgrade()) else {
            return;
        };
        let views: Vec<View> = lock(&self.replicas)
            .iter()
            .map(|(k, r)| (k.0.clone(), k.1.clone(), r.group.metrics(), r.sa.clone()))
            .collect();
        let mut answers = Vec::new();
        let mut progress = Vec::new();
        let mut steps = Vec::new();
        let mut events = Vec::new();
        let mut snapshots = Vec::new();
        let every = js.config.stream_snapshot_every;
        {
            let mut e = js.engine();
            for (acc, name, m, sa) in &views {
                let leader = super::leads(m);
                let (since, due) = lock(&self.replicas)
                    .get_mut(&(acc.clone(), name.clone()))
                    .map_or((None, true), |r| {
                        if !leader {
                            r.led_since = None;
                        }
                        r.led_since = r.led_since.or(leader.then(now_nanos));
                        (r.led_since, r.json_pace.due(m, r.led_since))
                    });
                let json = due.then(|| self.cluster_json(m, sa, since));
                e.set_replica(&srv, acc, name, leader, json);
                {
                    let mut reps = lock(&self.replicas);
                    if let Some(r) = reps.get_mut(&(acc.clone(), name.clone())) {
                        self.leadership(r, m, leader, &mut events);
                        let follows = e
                            .accounts
                            .get(acc)
                            .is_some_and(|ja| ja.follows.contains_key(name));
                        self.run_copier(&srv, &js, r, leader && follows);
                    }
                }
                if leader {
                    if let Some(p) = e.relay_due(acc, name) {
                        progress.push(((acc.clone(), name.clone()), p));
                    }
                    let copy = e
                        .accounts
                        .get(acc)
                        .and_then(|ja| ja.streams.get(name))
                        .map(|st| st.cfg.num_replicas.max(1) as usize);
                    let mut reps = lock(&self.replicas);
                    if let Some(r) = reps.get_mut(&(acc.clone(), name.clone())) {
                        self.follow_assignment(r, m, copy, &mut steps);
                    }
                }
                if let Some(r) = lock(&self.replicas).get_mut(&(acc.clone(), name.clone())) {
                    if let Some(b) = r.boot.take_if(|b| !m.voters.is_empty() || b.due()) {
                        if m.voters.is_empty() {
                            self.bootstrap(&srv, r.group.clone(), b.members);
                        }
                    }
                    self.check_receiving(&srv, r);
                    let (entries, bytes) = r.group.since_snapshot();
                    let stream_bytes = e
                        .accounts
                        .get(acc)
                        .and_then(|ja| ja.streams.get(name))
                        .map_or(0, |st| st.store.state().bytes);
                    let mut voters = r.group.metrics().voters;
                    voters.sort_unstable();
                    let rank = voters.iter().position(|v| *v == self.me).unwrap_or(0);
                    if snapshot_due(entries, bytes, stream_bytes, every, leader, rank as u64) {
                        snapshots.push(r.group.clone());
                    }
                }
                if m.leader.is_some() {
                    let mut reps = lock(&self.replicas);
                    let Some(r) = reps.get_mut(&(acc.clone(), name.clone())) else {
                        continue;
                    };
                    // Another member leads: it answers. This one answers once it knows
                    // every replica (the answer names them).
                    if m.leader != Some(self.me) {
                        r.answer = None;
                    }
                    let known = m.replicas.len() + 1 >= sa.peers.len();
                    if let Some(reply) = r.answer.take_if(|_| leader && known) {
                        if sa.restore {
                            self.start_receiving(&srv, r, &reply);
                        } else if let Some((a, body)) = e.replica_created(acc, name) {
                            answers.push((a, reply, body));
                        }
                    }
                }
            }
        }
        for (acc, reply, body) in answers {
            Cx::new(&srv, &acc).send(&reply, None, None, body.as_bytes());
        }
        super::events::send(&srv, events);
        for g in snapshots {
            srv.tasks.spawn(async move {
                if let Err(e) = g.ask_snapshot().await {
                    tracing::debug!("JetStream: group {}: snapshot: {e}", g.name());
                }
            });
        }
        for (group, changing, step) in steps {
            srv.tasks
                .spawn(placement::run_step(group, step, changing, "stream"));
        }
        if !progress.is_empty() {
            let reps = lock(&self.replicas);
            for (key, payload) in progress {
                if let Some(r) = reps.get(&key) {
                    let _ = r.tx.send(Item::Api {
                        subject: CONSUMER_STATES.to_string(),
                        reply: String::new(),
                        payload: payload.into(),
                    });
                }
            }
        }
    }

    /// Starts the copier of a mirror or a source on its leader, stops it elsewhere.
    fn run_copier(&self, srv: &Arc<ServerShared>, js: &Arc<JetStream>, r: &mut Replica, on: bool) {
        if !on {
            if let Some(c) = r.copier.take() {
                c.cancel();
            }
            return;
        }
        if r.copier.is_some() {
            return;
        }
        let stop = tokio_util::sync::CancellationToken::new();
        r.copier = Some(stop.clone());
        let copier = super::copier::Copier {
            srv: Arc::downgrade(srv),
            js: Arc::downgrade(js),
            account: r.sa.account.clone(),
            stream: r.sa.name.clone(),
            group: r.group.clone(),
            session: self.session,
            stop,
        };
        srv.tasks.spawn(copier.run());
    }

    /// On a stream's leader: the assignment's new configuration into the log (once; its
    /// proposer answers the update), and the next membership change toward the assigned
    /// peers (one at a time).
    fn follow_assignment(
        &self,
        r: &mut Replica,
        m: &GroupMetrics,
        copy_replicas: Option<usize>,
        steps: &mut Vec<(Group, Arc<AtomicBool>, Step)>,
    ) {
        let sa = &r.sa;
        if let Some(cfg) = &sa.update {
            let behind = copy_replicas.is_some_and(|n| n != sa.replicas());
            if behind && r.proposed_update != sa.updated {
                r.proposed_update = sa.updated;
                let fresh = sa.updated >= self.started
                    && now_nanos().saturating_sub(sa.updated) < ANSWER_WITHIN_NS;
                let _ = r.tx.send(Item::Api {
                    subject: format!("$JS.API.STREAM.UPDATE.{}", sa.name),
                    reply: if fresh {
                        sa.reply.clone()
                    } else {
                        String::new()
                    },
                    payload: cfg.to_string().into(),
                });
            }
        }
        if r.changing.load(Relaxed) {
            return;
        }
        if let Some(step) = placement::membership_step(&sa.peers, &m.voters, self.me) {
            r.changing.store(true, Relaxed);
            steps.push((r.group.clone(), r.changing.clone(), step));
        }
    }

    /// Queues an API request that changes the stream (purge, message delete, update) for
    /// its log; `false` when this node does not lead it.
    pub(super) fn propose_api(
        &self,
        account: &str,
        stream: &str,
        ev: &crate::jetstream::Event,
    ) -> bool {
        self.propose_api_with(account, stream, ev, ev.payload.clone())
    }

    /// [`JsCluster::propose_api`] with another body (an ephemeral consumer named here).
    pub(super) fn propose_api_with(
        &self,
        account: &str,
        stream: &str,
        ev: &crate::jetstream::Event,
        payload: bytes::Bytes,
    ) -> bool {
        let reps = lock(&self.replicas);
        let Some(r) = reps
            .get(&(account.to_string(), stream.to_string()))
            .filter(|r| super::group_leads(&r.group))
        else {
            return false;
        };
        let _ = r.tx.send(Item::Api {
            subject: ev.subject.clone(),
            reply: ev.reply.clone().unwrap_or_default(),
            payload,
        });
        true
    }

    /// The group of a stream this node holds.
    pub(super) fn replica_group(&self, account: &str, stream: &str) -> Option<Group> {
        lock(&self.replicas)
            .get(&(account.to_string(), stream.to_string()))
            .map(|r| r.group.clone())
    }

    /// The group of a stream this node holds, by the group's name.
    pub(super) fn group_named(&self, name: &str) -> Option<Group> {
        lock(&self.replicas)
            .values()
            .find(|r| r.group.name() == name)
            .map(|r| r.group.clone())
    }
}

/// Whether this node is still a member of group `m` that its leader talks to: a copy
/// leaving the group stays open for the change that removes it to commit.
pub(super) fn still_needed(m: &GroupMetrics, me: crate::raft::NodeId) -> bool {
    m.voters.contains(&me) && matches!(m.role, Role::Follower | Role::Leader) && m.leader.is_some()
}

/// A member of a stream group's creation other than the first, until the group has
/// members here: it bootstraps the group itself at `at` (the first's bootstrap was lost).
pub(super) struct Boot {
    members: Vec<(NodeId, String)>,
    at: tokio::time::Instant,
}

impl Boot {
    fn due(&self) -> bool {
        tokio::time::Instant::now() >= self.at
    }
}

/// When member `me` of a new stream group (created with `members`) bootstraps it: the
/// first at once, the one ranked `r` after `r` × [`ORPHAN_AFTER`] if no leader has brought
/// it in by then; `None`: not one of them. One bootstrap at a time, because every member
/// that bootstraps campaigns at once: with several candidates in the first term, a leader
/// already elected gave way to a later candidate with a higher id (openraft orders the
/// votes of one term by node id), and the group had no leader for a second or more.
fn boot_after(members: &[(NodeId, String)], me: NodeId) -> Option<Duration> {
    let rank = members.iter().position(|m| m.0 == me)?;
    Some(ORPHAN_AFTER * rank as u32)
}

#[cfg(test)]
mod tests {
    use super::{boot_after, snapshot_due, ORPHAN_AFTER};

    #[test]
    fn a_new_stream_group_is_bootstrapped_by_its_first_member_and_the_others_in_turn_later() {
        let members: Vec<(u64, String)> = [(30, "n0"), (10, "n1"), (20, "n2")]
            .iter()
            .map(|(id, n)| (*id, n.to_string()))
            .collect();
        // The creation's order, not the ids', so that every member agrees.
        assert_eq!(boot_after(&members, 30), Some(std::time::Duration::ZERO));
        assert_eq!(boot_after(&members, 10), Some(ORPHAN_AFTER));
        assert_eq!(boot_after(&members, 20), Some(ORPHAN_AFTER * 2));
        assert_eq!(boot_after(&members, 40), None, "a node added later waits");
    }

    #[test]
    fn a_stream_snapshots_when_its_log_carries_half_the_stream_since_the_last() {
        let every = 50_000;
        for leading in [false, true] {
            // Too few entries, whatever their bytes.
            assert!(!snapshot_due(
                every - 1,
                1 << 30,
                1 << 20,
                every,
                leading,
                0
            ));
            // A small stream: at `every` entries.
            assert!(snapshot_due(every, 2_000_000, 3_000_000, every, leading, 0));
            // A large stream and small entries: not yet.
            assert!(!snapshot_due(
                every * 10,
                50 << 20,
                10 << 30,
                every,
                leading,
                0
            ));
            // An empty stream (all deleted or expired).
            assert!(snapshot_due(every, 0, 0, every, leading, 0));
        }
        // Half the stream's bytes since the last: now, on a follower; a large stream's
        // leader leaves it to them.
        assert!(snapshot_due(every, 5 << 30, 10 << 30, every, false, 0));
        assert!(!snapshot_due(every, 5 << 30, 10 << 30, every, true, 0));
        assert!(snapshot_due(every, 8 << 20, 16 << 20, every, true, 0));
        // Unless its log since the last holds twice the stream (a stream at its limits).
        assert!(!snapshot_due(
            every,
            (20 << 30) - 1,
            10 << 30,
            every,
            true,
            0
        ));
        assert!(snapshot_due(every, 20 << 30, 10 << 30, every, true, 0));
        // Members take turns: the second by id an eighth later, the third a quarter.
        let (e, b) = (every, 10u64 << 30);
        assert!(snapshot_due(e, b / 2, b, e, false, 0));
        assert!(!snapshot_due(e, b / 2, b, e, false, 1));
        assert!(!snapshot_due(e * 9 / 8 - 1, b * 8, b, e, false, 1));
        assert!(!snapshot_due(e * 2, b * 9 / 16 - 1, b, e, false, 1));
        assert!(snapshot_due(e * 9 / 8, b * 9 / 16, b, e, false, 1));
        assert!(!snapshot_due(e * 9 / 8, b * 9 / 16, b, e, false, 2));
        assert!(snapshot_due(e * 5 / 4, b * 5 / 8, b, e, false, 2));
    }
}
