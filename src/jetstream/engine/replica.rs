//! The engine's side of clustered JetStream (`jetstream/cluster/`): this node's copy of a
//! replicated stream. The copy is created and dropped by the meta group's assignments and
//! changed only by its stream group's log (`apply_replicated`), so every replica holds the
//! same messages with the same sequences and timestamps. Only the group's leader subscribes
//! to the stream's subjects and answers its API requests.
//!
//! Consumers are created and deleted through the stream's log, so every replica has each
//! one; each then runs in a Raft group of its own (`cluster/cgroups.rs`,
//! `replica_consumers.rs`): only the copy on that group's leader delivers, takes acks and
//! runs timers (the others are `passive`), and its progress goes through that group. For
//! interest and work-queue retention the stream's leader relays the consumers' committed
//! progress into the stream's log ([`CONSUMER_STATES`]), where every copy sweeps by it.
//!
//! The local store is rebuilt at every start from the group's snapshot and log (it is
//! wiped when the copy is created), so nothing applied twice can reach it.

use super::replica_snap::{RESTORE, RESTORE_END};
use super::*;
use crate::jetstream::cluster::copier::{Copies, COPY};
use crate::jetstream::cluster::entry::Entry;
use crate::jetstream::cluster::meta::StreamAssignment;
use crate::raft::NodeId;
use bytes::Bytes;
use std::path::Path;

/// The subject of the log entries that carry consumer progress: in a consumer's group, its
/// leader's; in an interest or work-queue stream's log, what the consumers' groups
/// committed, relayed by the stream's leader.
pub const CONSUMER_STATES: &str = "$NATSD.JS.CSTATE";

/// One consumer's progress in a [`CONSUMER_STATES`] entry.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct Progress {
    pub name: String,
    pub state: ConsumerState,
}

/// A [`CONSUMER_STATES`] entry: the progress, and the synchronous acks it answers (by the
/// node that proposed it, once applied there: committed).
#[derive(serde::Serialize, serde::Deserialize, Default)]
pub(super) struct ProgressEntry {
    pub states: Vec<Progress>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replies: Vec<String>,
}

/// A consumer the entry appended by `leader` created records that leader and its replica
/// count then: its group's first members follow from them (`cluster/cgroups.rs`). `made`:
/// whether the entry created it (an API entry at `ts`: its `created` is the entry's time
/// on every copy). Replayed, the entry records the same.
pub(super) fn record_origin(
    st: &mut Stream,
    leader: Option<NodeId>,
    made: impl Fn(&Consumer) -> bool,
) {
    let Some(leader) = leader else {
        return;
    };
    let stream_cfg = &st.cfg;
    for c in st.consumers.values_mut() {
        if c.origin.is_some() || !made(c) {
            continue;
        }
        let replicas = super::replica_consumers::group_size(&c.cfg, stream_cfg);
        c.origin = Some(persist::Origin { leader, replicas });
        if let Err(e) = save_consumer_meta_in(st.dir.as_deref(), c) {
            tracing::error!("JetStream: consumer {:?} origin not saved: {e}", c.name);
        }
    }
}

/// At most this many sequences are looked at by one [`sweep`].
const SWEEP_MAX: u64 = 100_000;

/// Interest and work-queue retention on a replicated stream, at a point of its log: the
/// messages every consumer is done with as of its applied progress are removed — on every
/// replica alike (the leader's live acknowledgements remove nothing: `retire`). Without
/// consumers, an interest stream keeps nothing.
fn sweep(st: &mut Stream) {
    if st.cfg.retention == Retention::Limits {
        return;
    }
    let state = st.store.state();
    if state.msgs == 0 {
        return;
    }
    let upto = if st.consumers.is_empty() {
        if st.cfg.retention != Retention::Interest {
            return;
        }
        state.last_seq
    } else {
        // Nothing at or past the cursor of a consumer that wants every subject can go; with
        // only filtered consumers, nothing past the furthest cursor.
        let next = |c: &Consumer| c.applied.as_ref().map_or(c.sseq, |a| a.sseq);
        let all = st.consumers.values().filter(|c| c.filter().is_none());
        all.map(next)
            .min()
            .or_else(|| st.consumers.values().map(next).max())
            .unwrap_or(0)
            .saturating_sub(1)
            .min(state.last_seq)
    };
    let upto = upto.min(state.first_seq.saturating_add(SWEEP_MAX));
    let mut seq = state.first_seq;
    while seq <= upto {
        if let Ok(m) = st.store.load(seq) {
            if st
                .consumers
                .values()
                .all(|c| c.applied_done_with(seq, &m.subject))
            {
                let _ = st.store.remove(seq, false);
            }
        }
        seq += 1;
    }
}

/// What a replicated stream knows of its group (kept fresh by the cluster's tick).
#[derive(Debug, Default, Clone)]
pub struct ReplicaState {
    pub leader: bool,
    /// STREAM INFO's `cluster` object.
    pub cluster_json: String,
}

impl Engine {
    /// Creates this node's copy of an assigned stream, empty, with its store under `dir`
    /// (file streams; wiped first) and no subscriptions.
    pub fn create_replica(&mut self, sa: &StreamAssignment, dir: &Path) -> Result<(), String> {
        let ja = self
            .accounts
            .get_mut(&sa.account)
            .ok_or_else(|| format!("account {:?} has no JetStream here", sa.account))?;
        let cfg: StreamConfig = serde_json::from_value(sa.config.clone())
            .map_err(|e| format!("stream {:?} assignment: bad config: {e}", sa.name))?;
        if let Some(st) = ja.streams.get(&sa.name) {
            if st.replica.is_some() {
                return Ok(());
            }
            return Err(format!(
                "stream {:?} exists here as a single-server stream",
                sa.name
            ));
        }
        persist::remove_dir(dir);
        let limits = stream::limits_of(&cfg);
        let (store, sdir): (Box<dyn MsgStore>, Option<PathBuf>) = match cfg.storage {
            Storage::Memory => (Box::new(MemStore::new(limits)), None),
            Storage::File => {
                let store = crate::jetstream::store::open::open_file(
                    &dir.join("msgs"),
                    limits,
                    self.config.sync,
                )
                .map_err(|e| format!("stream {:?} store: {e}", sa.name))?;
                (store, Some(dir.to_path_buf()))
            }
        };
        let follows = crate::jetstream::mirror::parse(&cfg).ok().flatten();
        let mut st = Stream::new(cfg, sa.created, store, sdir);
        st.replica = Some(ReplicaState::default());
        ja.streams.insert(sa.name.clone(), st);
        // A mirror or a source: its leader's copier reads the origins (cluster/copier.rs).
        match follows {
            Some(f) => ja.follows.insert(sa.name.clone(), f),
            None => ja.follows.remove(&sa.name),
        };
        tracing::debug!(
            "JetStream: replica of stream {:?} (account {:?}) created",
            sa.name,
            sa.account
        );
        Ok(())
    }

    /// Drops this node's copy (the stream was deleted, or moved away from this node).
    pub fn drop_replica(&mut self, srv: &Arc<ServerShared>, account: &str, name: &str) {
        let Some(ja) = self.accounts.get_mut(account) else {
            return;
        };
        let Some(mut st) = ja.streams.remove(name) else {
            return;
        };
        ja.follows.remove(name);
        unsubscribe_stream(srv, &ja.acc, &mut st);
        let cx = Cx::new(srv, &ja.acc);
        let leader = st.replica.as_ref().is_some_and(|r| r.leader);
        for c in st.consumers.values_mut() {
            c.deleted(&cx);
        }
        if let Err(e) = st.store.delete() {
            tracing::warn!("JetStream: stream {name:?} store delete: {e}");
        }
        if let Some(d) = &st.dir {
            persist::remove_dir(d);
        }
        if leader {
            advisory::stream_action(&cx, name, "", Action::Delete);
        }
    }

    /// Applies one committed entry of a replicated stream's log. `mine`: this node
    /// proposed it, so it answers the clients (PubAcks, the API response). `leader`: the
    /// member that appended it (a consumer it creates records it as its origin).
    pub fn apply_replicated(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        stream: &str,
        entry: Entry,
        mine: bool,
        leader: Option<NodeId>,
    ) {
        let acc: Arc<str> = Arc::from(account);
        match entry {
            Entry::Msgs { ts, msgs, .. } => {
                let name: Arc<str> = Arc::from(stream);
                for m in msgs {
                    let ev = Event {
                        acc: acc.clone(),
                        kind: EventKind::Publish(name.clone()),
                        subject: m.subject,
                        reply: (mine && !m.reply.is_empty()).then_some(m.reply),
                        header: m.header,
                        payload: m.payload,
                        trace: None,
                        ts: Some(ts),
                    };
                    self.handle_queued(srv, ev);
                }
            }
            Entry::Api {
                subject, payload, ..
            } if subject == CONSUMER_STATES => {
                self.apply_progress(srv, account, stream, &payload, mine)
            }
            Entry::Api {
                subject,
                payload,
                ts,
                ..
            } if subject == COPY => self.apply_copies(srv, account, stream, &payload, ts),
            Entry::Api {
                subject,
                reply,
                payload,
                ..
            } if subject == RESTORE || subject == RESTORE_END => {
                let reply = (mine && !reply.is_empty()).then_some(reply.as_str());
                let last = subject == RESTORE_END;
                self.apply_restore(srv, account, stream, &payload, last, reply);
                // Every consumer the backup holds came in through the restore's entries.
                if let Some(st) = self
                    .accounts
                    .get_mut(account)
                    .and_then(|ja| ja.streams.get_mut(stream))
                {
                    record_origin(st, leader, |_| true);
                }
            }
            Entry::Api {
                ts,
                subject,
                reply,
                payload,
                ..
            } => {
                let ev = Event {
                    acc,
                    kind: EventKind::Api,
                    subject,
                    reply: (mine && !reply.is_empty()).then_some(reply),
                    header: None,
                    payload,
                    trace: None,
                    ts: Some(ts),
                };
                self.handle_queued(srv, ev);
                // A consumer created by this entry starts from its creation's state; one
                // deleted may leave messages nobody is interested in.
                if let Some(st) = self
                    .accounts
                    .get_mut(account)
                    .and_then(|ja| ja.streams.get_mut(stream))
                {
                    for c in st.consumers.values_mut() {
                        if c.applied.is_none() {
                            c.applied = Some(c.state());
                        }
                    }
                    record_origin(st, leader, |c| c.created == ts);
                    sweep(st);
                }
            }
        }
        self.finish_batch(srv);
    }

    /// Records the group's view; the leader subscribes to the stream's subjects, others
    /// do not. `false` when the stream is not (or no longer) here.
    pub fn set_replica(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        name: &str,
        leader: bool,
        cluster_json: Option<String>,
    ) -> bool {
        let tx = self.tx.clone();
        let Some(ja) = self.accounts.get_mut(account) else {
            return false;
        };
        let Some(st) = ja.streams.get_mut(name) else {
            return false;
        };
        let Some(r) = st.replica.as_mut() else {
            return false;
        };
        let was = r.leader;
        r.leader = leader;
        if let Some(j) = cluster_json {
            r.cluster_json = j;
        }
        if leader && !was {
            tracing::debug!("JetStream: this server leads stream {name:?} (account {account:?})");
            subscribe_stream(srv, &ja.acc, &tx, st);
        } else if was && !leader {
            unsubscribe_stream(srv, &ja.acc, st);
        }
        true
    }

    /// On an interest or work-queue stream's leader: the consumers' progress committed in
    /// their groups since it was last relayed, as a [`CONSUMER_STATES`] entry's payload for
    /// the stream's log; `None` when none changed (or the stream keeps by limits).
    pub fn relay_due(&mut self, account: &str, name: &str) -> Option<Vec<u8>> {
        let st = self.accounts.get_mut(account)?.streams.get_mut(name)?;
        if st.cfg.retention == Retention::Limits {
            return None;
        }
        let mut e = ProgressEntry::default();
        for c in st.consumers.values_mut() {
            let Some(state) = c.group_applied.as_ref() else {
                continue;
            };
            if c.relayed.as_ref() != Some(state) {
                c.relayed = Some(state.clone());
                e.states.push(Progress {
                    name: c.name.clone(),
                    state: state.clone(),
                });
            }
        }
        (!e.states.is_empty()).then(|| serde_json::to_vec(&e).unwrap_or_default())
    }

    /// A [`CONSUMER_STATES`] entry of the stream's log: the progress retention sweeps by.
    fn apply_progress(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        name: &str,
        payload: &[u8],
        mine: bool,
    ) {
        let Some(ja) = self.accounts.get_mut(account) else {
            return;
        };
        let Some(st) = ja.streams.get_mut(name) else {
            return;
        };
        let e: ProgressEntry = match serde_json::from_slice(payload) {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("JetStream: stream {name:?}: bad consumer progress entry: {e}");
                return;
            }
        };
        if mine && !e.replies.is_empty() {
            let cx = Cx::new(srv, &ja.acc);
            for r in &e.replies {
                cx.send(r, None, None, b"");
            }
        }
        for p in e.states {
            if let Some(c) = st.consumers.get_mut(&p.name) {
                c.applied = Some(p.state);
            }
        }
        sweep(st);
    }

    /// A `$NATSD.JS.COPY` entry (`cluster/copier.rs`): the origin's messages into this copy
    /// of a mirror or a source, as the single server copies them, stamped with the entry's
    /// time. A batch that continues from before this copy's cursor was read by a leader
    /// that lost its place: ignored (its messages are here already).
    fn apply_copies(
        &mut self,
        srv: &Arc<ServerShared>,
        account: &str,
        name: &str,
        payload: &[u8],
        ts: i64,
    ) {
        let c: Copies = match serde_json::from_slice(payload) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("JetStream: stream {name:?}: bad copy entry: {e}");
                return;
            }
        };
        let Some(ja) = self.accounts.get_mut(account) else {
            return;
        };
        let (Some(fl), Some(st)) = (ja.follows.get_mut(name), ja.streams.get_mut(name)) else {
            return;
        };
        let mirror = fl.mirror;
        let Some(f) = fl.list.iter_mut().find(|f| f.origin.name == c.origin) else {
            return;
        };
        if c.from < f.next {
            tracing::debug!(
                "JetStream: stream {name:?}: copies from {} already here",
                c.from
            );
            return;
        }
        for m in &c.msgs {
            match m.decode() {
                Ok(msg) => {
                    crate::jetstream::mirror::copy(st, mirror, &c.origin, msg, ts, None);
                }
                Err(e) => tracing::error!("JetStream: stream {name:?}: {e}"),
            }
            f.next = m.seq + 1;
        }
        f.active = Some(Instant::now());
        let cx = Cx::new(srv, &ja.acc);
        let leader = st.replica.as_ref().is_some_and(|r| r.leader);
        for r in st.take_republished() {
            if leader {
                cx.send(&r.subject, None, Some(&r.header), &r.payload);
            }
        }
        if let Err(e) = st.store.flush() {
            tracing::error!("JetStream: stream {name:?} flush: {e}");
        }
        let mut acked = Vec::new();
        for con in st.consumers.values_mut() {
            con.pump(&cx, st.store.as_ref(), &mut acked);
        }
    }

    /// The answer to the stream's creation, from its first leader.
    pub fn replica_created(&self, account: &str, name: &str) -> Option<(Arc<Account>, String)> {
        let ja = self.accounts.get(account)?;
        let st = ja.streams.get(name)?;
        let mut o = Obj::typed("stream_create_response");
        st.info_fields(&mut o, None);
        o.field("did_create", &true);
        Some((ja.acc.clone(), o.done()))
    }
}

/// A replicated publish's message, for the proposer (the leader's copy of the event).
pub fn pub_msg(ev: &mut Event) -> crate::jetstream::cluster::entry::PubMsg {
    crate::jetstream::cluster::entry::PubMsg {
        subject: std::mem::take(&mut ev.subject),
        reply: ev.reply.take().unwrap_or_default(),
        header: ev.header.take(),
        payload: std::mem::replace(&mut ev.payload, Bytes::new()),
    }
}
