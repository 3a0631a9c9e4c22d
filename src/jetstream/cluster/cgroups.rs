//! Replicated consumers: one Raft group per consumer of a replicated stream, as nats-server
//! keeps them. A consumer is created and deleted through its stream's log (every copy of
//! the stream has it); every node holding a copy opens the consumer's group, whose members
//! are the stream's peers — all of them, or `num_replicas` of them chosen by a hash of the
//! group's name, so every node chooses the same ones.
//!
//! - The group's leader runs the consumer (the engine's copy there is active): it delivers,
//!   takes acks and pull requests, and proposes its progress to the group
//!   (`engine/replica_consumers.rs`); the other members restore each committed progress.
//! - A consumer created by a fresh log entry is bootstrapped by the stream's leader, which
//!   campaigns at once, so the creation is answered within a round trip or two; the other
//!   members learn the group from it. A member added later (a stream scaled up, a peer
//!   replaced) waits for the consumer's leader to add it, as streams do
//!   (`placement::membership_step`); a member leaving stays until its removal commits.
//! - Interest and work-queue retention: the stream's leader relays the progress the
//!   consumers' groups committed into the stream's log, where every copy sweeps alike.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cgroup_boot::{self, Seen};
use super::entry::Entry;
use super::placement::{self, Step};
use super::{lock, JsCluster};
use crate::jetstream::advisory::{self, Leadership};
use crate::jetstream::consumer::Cx;
use crate::jetstream::engine::replica::CONSUMER_STATES;
use crate::jetstream::engine::replica_consumers::{ConsumerDesc, Led};
use crate::jetstream::types::now_nanos;
use crate::jetstream::JetStream;
use crate::raft::{Group, NodeId, StateMachine};
use crate::server::ServerShared;

/// (account, stream, consumer).
pub(super) type CKey = (String, String, String);
/// A stream's peers, and whether this node leads it.
type StreamView = (Vec<(NodeId, String)>, bool);

/// A member knowing no leader of its consumer's group says so after this.
const LEADERLESS_AFTER: std::time::Duration = std::time::Duration::from_secs(10);
/// A creation this recent (and made while this process ran) bootstraps its group.
const FRESH_NS: i64 = 30_000_000_000;

/// This node's member of one consumer's group.
pub(super) struct ConsumerReplica {
    pub group: Group,
    /// Wakes the group's proposer: the leader's progress may be due.
    wake: Arc<Notify>,
    stop: CancellationToken,
    desc: ConsumerDesc,
    opened: Instant,
    /// Unix nanos this node's copy of the stream opened.
    copy_opened: i64,
    /// The stream's peers never changed and this node is one of them.
    initial: bool,
    /// The stream group's name (the consumer's belongs to that copy of the stream).
    stream_group: String,
    led: bool,
    led_since: Option<i64>,
    json_pace: super::events::JsonPace,
    /// A bootstrap or a membership change is under way.
    busy: Arc<AtomicBool>,
}

/// The consumer's group name: `C-<F|M>-` and a hash of what names the consumer's
/// incarnation, the same on every node whenever it opens the group (so no replica count:
/// that may change); a consumer created again gets a new group.
pub fn group_name(account: &str, stream_group: &str, d: &ConsumerDesc) -> String {
    let key = format!("{account}\n{stream_group}\n{}\n{}", d.name, d.created);
    let h = super::server_hash(&key).replace(['-', '_'], "x");
    format!("C-{}-{h}", if d.memory { "M" } else { "F" })
}

/// The members a consumer's group should have: the stream's `peers`, or `replicas` of them
/// (0: all) — those in `first` first (its members, the first of them before the others: its
/// leader keeps its place when the group shrinks; at a bootstrap the consumer's origin),
/// then by a hash of the group's name.
pub fn target(
    group: &str,
    replicas: usize,
    peers: &[(NodeId, String)],
    first: &[NodeId],
) -> Vec<(NodeId, String)> {
    if replicas == 0 || replicas >= peers.len() {
        return peers.to_vec();
    }
    let rank = |id: NodeId| {
        let d = ring::digest::digest(&ring::digest::SHA256, format!("{group}/{id}").as_bytes());
        u64::from_le_bytes(d.as_ref()[..8].try_into().unwrap_or([0; 8]))
    };
    let mut v = peers.to_vec();
    v.sort_by_key(|(id, _)| (!first.contains(id), first.first() != Some(id), rank(*id)));
    v.truncate(replicas);
    v
}

/// A consumer group's state machine: the engine's copy of the consumer.
struct ConsumerSm {
    js: Weak<JetStream>,
    srv: Weak<ServerShared>,
    key: CKey,
    session: u64,
}

impl StateMachine for ConsumerSm {
    fn apply(&mut self, index: u64, data: &[u8]) -> Vec<u8> {
        let (acc, stream, name) = &self.key;
        match Entry::decode(data) {
            Ok(Entry::Api {
                proposer, payload, ..
            }) => {
                if let (Some(js), Some(srv)) = (self.js.upgrade(), self.srv.upgrade()) {
                    let mine = proposer == self.session;
                    js.engine()
                        .apply_consumer_entry(&srv, acc, stream, name, &payload, mine);
                }
            }
            Ok(_) => tracing::error!(
                "JetStream: consumer {stream:?} > {name:?}: entry {index}: not progress"
            ),
            Err(e) => {
                tracing::error!("JetStream: consumer {stream:?} > {name:?}: entry {index}: {e}")
            }
        }
        Vec::new()
    }

    fn snapshot(&self) -> Vec<u8> {
        let (acc, stream, name) = &self.key;
        self.js.upgrade().map_or_else(Vec::new, |js| {
            js.engine().consumer_snapshot(acc, stream, name)
        })
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
        if snapshot.is_empty() {
            return Ok(());
        }
        let (acc, stream, name) = &self.key;
        let js = self.js.upgrade().ok_or("JetStream stopped")?;
        let srv = self.srv.upgrade().ok_or("server stopped")?;
        js.engine()
            .apply_consumer_entry(&srv, acc, stream, name, snapshot, false);
        Ok(())
    }
}

impl JsCluster {
    /// Opens the groups of the consumers this node's stream copies have, and closes those
    /// of consumers gone (or created again: a new incarnation gets a new group).
    pub(super) async fn reconcile_consumers(self: &Arc<Self>) {
        let (Some(js), Some(srv), Some(ready)) =
            (self.js.upgrade(), self.srv.upgrade(), self.ready.get())
        else {
            return;
        };
        struct CopyView {
            key: (String, String),
            group: String,
            leaving: bool,
            opened: i64,
            /// This node has been one of the stream's peers since its creation.
            initial: bool,
        }
        let copies: Vec<CopyView> = lock(&self.replicas)
            .iter()
            .map(|(k, r)| CopyView {
                key: k.clone(),
                group: r.sa.group.clone(),
                leaving: r.unassigned.is_some(),
                opened: r.opened_ns,
                initial: r.sa.bootstrap_members().iter().any(|p| p.0 == self.me),
            })
            .collect();
        let mut want: BTreeMap<CKey, Want> = BTreeMap::new();
        {
            let e = js.engine();
            for v in &copies {
                let (acc, s) = &v.key;
                for d in e.replica_consumers(acc, s) {
                    let key = (acc.clone(), s.clone(), d.name.clone());
                    let w = Want {
                        desc: d,
                        stream_group: v.group.clone(),
                        leaving: v.leaving,
                        copy_opened: v.opened,
                        initial: v.initial,
                    };
                    want.insert(key, w);
                }
            }
        }
        let gone: Vec<(CKey, ConsumerReplica)> = {
            let mut cg = lock(&self.cgroups);
            let keys: Vec<CKey> = cg
                .iter_mut()
                .filter_map(|(k, c)| {
                    let Some(w) = want.get(k) else {
                        return Some(k.clone());
                    };
                    if w.desc.created != c.desc.created || w.stream_group != c.stream_group {
                        return Some(k.clone());
                    }
                    // A copy leaving this node keeps its consumers' groups while they
                    // need it (their leaders remove it, as the stream's does).
                    if w.leaving && !super::replicas::still_needed(&c.group.metrics(), self.me) {
                        return Some(k.clone());
                    }
                    // `num_replicas` may change (the stream's or the consumer's), and the
                    // stream's peers.
                    c.desc.replicas = w.desc.replicas;
                    c.initial = w.initial;
                    None
                })
                .collect();
            keys.into_iter()
                .filter_map(|k| cg.remove(&k).map(|c| (k, c)))
                .collect()
        };
        if !gone.is_empty() {
            // A copy whose group closes runs no more (a new group says who leads).
            let mut e = js.engine();
            for ((acc, s, n), _) in &gone {
                e.set_consumer_leader(&srv, acc, s, n, Led::Unknown, Some(String::new()));
            }
        }
        for (k, c) in gone {
            tracing::debug!("JetStream: consumer {k:?}: group {} closed", c.group.name());
            c.stop.cancel();
            ready.transport.unregister(c.group.name());
            c.group.shutdown().await;
            crate::jetstream::persist::remove_dir(&self.raft_dir(c.group.name()));
        }
        for (key, w) in want {
            if w.leaving || lock(&self.cgroups).contains_key(&key) {
                continue;
            }
            let Want {
                desc,
                stream_group,
                copy_opened,
                initial,
                ..
            } = w;
            let name = group_name(&key.0, &stream_group, &desc);
            let mut cfg = self.group_config(&name);
            cfg.snapshot_every = 1000;
            cfg.keep_after_snapshot = 100;
            let sm = ConsumerSm {
                js: Arc::downgrade(&js),
                srv: Arc::downgrade(&srv),
                key: key.clone(),
                session: self.session,
            };
            let group = match Group::open(cfg, Box::new(sm), ready.transport.clone()).await {
                Ok(g) => g,
                Err(e) => {
                    tracing::error!("JetStream: consumer {:?} > {:?} group: {e}", key.1, key.2);
                    continue;
                }
            };
            ready.transport.register(&group);
            group.notify_leadership(self.kick.clone());
            let wake = Arc::new(Notify::new());
            let stop = CancellationToken::new();
            srv.tasks.spawn(proposer(
                group.clone(),
                wake.clone(),
                stop.clone(),
                Arc::downgrade(&js),
                key.clone(),
                self.session,
            ));
            lock(&self.cgroups).insert(
                key,
                ConsumerReplica {
                    group,
                    wake,
                    stop,
                    desc,
                    opened: Instant::now(),
                    copy_opened,
                    initial,
                    stream_group,
                    led: false,
                    led_since: None,
                    json_pace: Default::default(),
                    busy: Arc::new(AtomicBool::new(false)),
                },
            );
        }
    }

    /// Each consumer group's leadership into the engine (the leader's copy runs the
    /// consumer), CONSUMER INFO's `cluster`, the leader's progress into the group, the
    /// group's bootstrap and membership changes, leader-elected advisories, and the held
    /// creation answers.
    pub(super) fn consumers_tick(&self) {
        let (Some(js), Some(srv)) = (self.js.upgrade(), self.srv.upgrade()) else {
            return;
        };
        // The streams' peers and whether this node leads them (as the streams' tick, just
        // before, saw it), first (lock order: the replicas' lock is never taken while the
        // engine's is held by this tick).
        let streams: BTreeMap<(String, String), StreamView> = lock(&self.replicas)
            .iter()
            .map(|(k, r)| (k.clone(), (r.sa.peers.clone(), r.led)))
            .collect();
        let mut spawn: Vec<(Group, Arc<AtomicBool>, Job)> = Vec::new();
        let mut elected: Vec<(String, String, String, String)> = Vec::new();
        let now_ns = now_nanos();
        {
            let mut e = js.engine();
            let mut cg = lock(&self.cgroups);
            for ((acc, s, name), c) in cg.iter_mut() {
                let Some((peers, stream_leads)) = streams.get(&(acc.clone(), s.clone())) else {
                    continue;
                };
                let m = c.group.metrics();
                let leads = super::leads(&m);
                // Its leader first: a group that shrinks keeps it.
                let led_first: Vec<NodeId>;
                let first: &[NodeId] = if leads {
                    led_first = std::iter::once(self.me)
                        .chain(m.voters.iter().copied().filter(|v| *v != self.me))
                        .collect();
                    &led_first
                } else {
                    &m.voters
                };
                let target = target(c.group.name(), c.desc.replicas, peers, first);
                if !leads {
                    c.led_since = None;
                }
                c.led_since = c.led_since.or(leads.then_some(now_ns));
                let json = c.json_pace.due(&m, c.led_since).then(|| {
                    if m.voters.len() > 1 {
                        self.cluster_json_of(&m, c.group.name(), &target, c.led_since)
                    } else if m.voters.is_empty() {
                        String::new() // not a member (yet)
                    } else {
                        self.r1_cluster_json(leads.then_some(self.name.as_str()))
                    }
                });
                let led = if leads {
                    Led::Here
                } else if m.leader.is_some_and(|l| l != self.me) {
                    Led::Elsewhere
                } else {
                    Led::Unknown
                };
                e.set_consumer_leader(&srv, acc, s, name, led, json);
                if leads && !c.led && target.len() > 1 {
                    let replicas = serde_json::to_string(&self.replica_infos_of(&m, &target))
                        .unwrap_or_else(|_| "[]".into());
                    elected.push((acc.clone(), s.clone(), name.clone(), replicas));
                }
                c.led = leads;
                if leads && e.consumer_progress_pending(acc, s, name) {
                    c.wake.notify_one();
                }
                if c.busy.load(Relaxed) {
                    continue;
                }
                if leads {
                    if let Some(step) = placement::membership_step(&target, &m.voters, self.me) {
                        c.busy.store(true, Relaxed);
                        spawn.push((c.group.clone(), c.busy.clone(), Job::Step(step)));
                    }
                } else if m.voters.is_empty() && m.leader.is_none() {
                    // A new group (`cgroup_boot.rs`): the stream's leader bootstraps it
                    // and campaigns, the others learn it from that leader (every member
                    // campaigning at once would split the votes); a member bootstraps
                    // it itself when that first bootstrap was lost. A copy opened after
                    // the creation (a stream scaled up, a peer replaced) is added by the
                    // group's leader.
                    let fresh =
                        c.original() && c.created_live_within(self.started, now_ns, FRESH_NS);
                    let seen = Seen {
                        me: self.me,
                        group: c.group.name(),
                        peers,
                        replicas: c.desc.replicas,
                        origin: c.desc.origin,
                        initial: c.initial,
                        fresh,
                        stream_leads: *stream_leads,
                        memberless_for: c.opened.elapsed(),
                    };
                    if let Some(members) = cgroup_boot::bootstrap(&seen) {
                        c.busy.store(true, Relaxed);
                        spawn.push((c.group.clone(), c.busy.clone(), Job::Bootstrap(members)));
                    }
                }
            }
            drop(cg);
            e.answer_held(&srv);
        }
        for (group, busy, job) in spawn {
            match job {
                Job::Step(step) => {
                    srv.tasks
                        .spawn(placement::run_step(group, step, busy, "consumer"));
                }
                Job::Bootstrap(members) => {
                    let kick = self.kick.clone();
                    srv.tasks.spawn(async move {
                        if let Err(e) = group.bootstrap(&members).await {
                            tracing::warn!(
                                "JetStream: consumer group {} bootstrap: {e}",
                                group.name()
                            );
                        } else {
                            // Led within a round trip or two: the tick answers then.
                            super::campaign_until_led(&group, &kick).await;
                        }
                        busy.store(false, Relaxed);
                    });
                }
            }
        }
        let sys = srv.accounts.get(srv.system_account_name());
        for (acc, stream, consumer, replicas) in elected {
            let Some(a) = srv.accounts.get(&acc) else {
                continue;
            };
            let cx = Cx::new(&srv, &a);
            let sys_cx = sys.as_ref().map(|s| Cx::new(&srv, s));
            let l = Leadership {
                stream: &stream,
                consumer: Some(&consumer),
                leader: Some(&self.name),
                replicas: &replicas,
            };
            advisory::leadership(&cx, sys_cx.as_ref(), &l, false);
        }
    }

    /// A synchronous ack waits for its progress entry: the consumer's leader proposes it
    /// now, not at the next tick (acks that come meanwhile go in the same entry).
    pub fn progress_now(&self, account: &str, stream: &str, consumer: &str) {
        let key = (
            account.to_string(),
            stream.to_string(),
            consumer.to_string(),
        );
        if let Some(c) = lock(&self.cgroups).get(&key) {
            c.wake.notify_one();
        }
    }

    /// Whether this node is a member of the consumer's group and knows no leader of it:
    /// after one it knew (and JetStream has run 10 s), or 10 s after the group opened here
    /// (nats-server's `isGroupLeaderless`, with its `lostQuorumInterval`).
    pub(super) fn consumer_leaderless(&self, account: &str, stream: &str, name: &str) -> bool {
        let Some((m, opened)) =
            self.with_consumer(account, stream, name, |c| (c.group.metrics(), c.opened))
        else {
            return false;
        };
        if !m.voters.contains(&self.me) || m.leader.is_some() {
            return false;
        }
        let had_leader = m.applied.is_some();
        let up = now_nanos().saturating_sub(self.started) >= LEADERLESS_AFTER.as_nanos() as i64;
        (had_leader && up) || opened.elapsed() >= LEADERLESS_AFTER
    }

    /// Whether this node is in the group of a consumer created moments ago (by a live
    /// request, while this process ran), which has had no leader with a following yet.
    /// (Not a group reopened after a restart or a snapshot: its state is the leader's to
    /// tell.)
    pub(super) fn consumer_unled_yet(&self, account: &str, stream: &str, name: &str) -> bool {
        let now_ns = now_nanos();
        let within = LEADERLESS_AFTER.as_nanos() as i64;
        self.with_consumer(account, stream, name, |c| {
            let m = c.group.metrics();
            let new = c.created_live_within(self.started, now_ns, within);
            // A leader elected but not yet followed has applied nothing either.
            new && !super::leads(&m) && m.applied.is_none() && m.voters.contains(&self.me)
        })
        .unwrap_or(false)
    }

    /// `f` of this node's member of the consumer's group, if it has one.
    fn with_consumer<T>(
        &self,
        account: &str,
        stream: &str,
        name: &str,
        f: impl FnOnce(&ConsumerReplica) -> T,
    ) -> Option<T> {
        let key = (account.to_string(), stream.to_string(), name.to_string());
        lock(&self.cgroups).get(&key).map(f)
    }

    /// The group of a consumer this node holds a copy of.
    pub(super) fn consumer_group(&self, account: &str, stream: &str, name: &str) -> Option<Group> {
        let key = (account.to_string(), stream.to_string(), name.to_string());
        lock(&self.cgroups).get(&key).map(|c| c.group.clone())
    }

    /// The streams (account, name) of which some consumer's group still needs this node
    /// (see [`super::replicas::still_needed`]).
    pub(super) fn consumers_need(&self) -> std::collections::BTreeSet<(String, String)> {
        lock(&self.cgroups)
            .iter()
            .filter(|(_, c)| super::replicas::still_needed(&c.group.metrics(), self.me))
            .map(|(k, _)| (k.0.clone(), k.1.clone()))
            .collect()
    }

    /// Every consumer group here, with its account (for `/raftz`, holds, lame duck).
    pub(super) fn consumer_groups(&self) -> Vec<(String, Group)> {
        lock(&self.cgroups)
            .iter()
            .map(|(k, c)| (k.0.clone(), c.group.clone()))
            .collect()
    }

    /// Closes every consumer group (at shutdown).
    pub(super) async fn close_consumer_groups(&self) {
        let all = std::mem::take(&mut *lock(&self.cgroups));
        for (_, c) in all {
            c.stop.cancel();
            c.group.shutdown().await;
        }
    }
}

/// Proposes a consumer's progress whenever woken and it is due (on the leader's copy: the
/// engine says), one entry at a time: what changes while one is proposed (acks, their
/// replies) goes in the next. A failed proposal answers nobody: a synchronous ack's
/// client times out and acks again.
async fn proposer(
    group: Group,
    wake: Arc<Notify>,
    stop: CancellationToken,
    js: Weak<JetStream>,
    key: CKey,
    session: u64,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.notified() => {}
        }
        let Some(js) = js.upgrade() else {
            return;
        };
        let due = js.engine().consumer_progress_due(&key.0, &key.1, &key.2);
        drop(js);
        let Some(payload) = due else {
            continue;
        };
        let entry = Entry::Api {
            proposer: session,
            ts: now_nanos(),
            subject: CONSUMER_STATES.to_string(),
            reply: String::new(),
            payload: payload.into(),
        };
        if let Err(e) = group.propose(entry.encode()).await {
            tracing::debug!(
                "JetStream: consumer group {}: progress not committed: {e}",
                group.name()
            );
        }
    }
}

/// A consumer group this node should have open.
struct Want {
    desc: ConsumerDesc,
    stream_group: String,
    /// Its stream's copy is leaving this node: an open group stays while needed, none opens.
    leaving: bool,
    copy_opened: i64,
    initial: bool,
}

impl ConsumerReplica {
    /// Created by a live request (not revived from a snapshot) while this process ran
    /// (since `started`), under `window_ns` before `now_ns`.
    fn created_live_within(&self, started: i64, now_ns: i64, window_ns: i64) -> bool {
        self.desc.born_live
            && self.desc.created >= started
            && now_ns.saturating_sub(self.desc.created) < window_ns
    }

    /// This node's copy of the stream had the consumer from the start: it was one of the
    /// stream's first peers (which never changed), or the consumer was created after the
    /// copy opened here. Only such a member may bootstrap the group.
    fn original(&self) -> bool {
        self.initial || self.desc.created >= self.copy_opened
    }
}

/// Work a consumer tick starts.
enum Job {
    Step(Step),
    /// The members (this node campaigns at once).
    Bootstrap(Vec<(NodeId, String)>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(n: u64) -> Vec<(NodeId, String)> {
        (1..=n).map(|i| (i, format!("n{i}"))).collect()
    }

    #[test]
    fn every_node_chooses_the_same_members() {
        let all = peers(5);
        for seed in 0..200 {
            let g = format!("C-R2F-{seed}");
            let a = target(&g, 2, &all, &[]);
            let mut shuffled = all.clone();
            shuffled.rotate_left(seed % 5);
            let b = target(&g, 2, &shuffled, &[]);
            let (mut a2, mut b2) = (a.clone(), b.clone());
            a2.sort();
            b2.sort();
            assert_eq!(a2, b2, "seed {seed}");
            assert_eq!(a.len(), 2);
            // Members stay members while they are still peers.
            let kept = target(&g, 2, &all, &[a[1].0]);
            assert!(kept.iter().any(|p| p.0 == a[1].0), "seed {seed}");
            // Shrunk to one, the first of its members (its leader) stays.
            let members: Vec<NodeId> = target(&g, 3, &all, &[]).iter().map(|p| p.0).collect();
            for m in &members {
                let mut first = vec![*m];
                first.extend(members.iter().filter(|x| *x != m));
                assert_eq!(target(&g, 1, &all, &first)[0].0, *m, "seed {seed}");
            }
        }
        assert_eq!(target("g", 0, &all, &[]), all);
        assert_eq!(target("g", 7, &all, &[]), all);
    }

    #[test]
    fn a_group_name_is_the_same_everywhere_and_new_for_a_new_incarnation() {
        let d = ConsumerDesc {
            name: "C".into(),
            created: 42,
            replicas: 0,
            born_live: true,
            memory: false,
            origin: None,
        };
        let a = group_name("A", "S-R3F-x", &d);
        assert!(a.starts_with("C-F-") && a.len() == 12, "{a}");
        assert_eq!(a, group_name("A", "S-R3F-x", &d));
        let again = ConsumerDesc { created: 43, ..d };
        assert_ne!(a, group_name("A", "S-R3F-x", &again));
    }
}
