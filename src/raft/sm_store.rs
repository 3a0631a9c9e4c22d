//! The bridge from openraft's `RaftStateMachine` to our [`StateMachine`]: applies
//! committed entries, tracks the last applied id and membership, and builds, installs
//! and persists snapshots.
//!
//! The latest snapshot is the file `snapshot` in the group's directory: one crc-framed
//! JSON record `{meta, data}` replaced atomically (frame.rs). On open it is restored
//! into the state machine; openraft then re-applies the log after it. Only its `meta`
//! stays in memory: the data (a whole stream, for a stream's group) is read back from the
//! file when a follower needs it.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::frame;
use super::{NodeId, StateMachine, TypeConfig};

type StorageResult<T> = Result<T, StorageError<NodeId>>;

#[derive(Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    #[serde(with = "super::bin")]
    data: Vec<u8>,
}

struct Inner {
    user: Box<dyn StateMachine>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    /// The latest snapshot's meta (its data is in the file).
    current: Option<SnapshotMeta<NodeId, BasicNode>>,
    built: u64,
}

/// The state machine side of one group.
#[derive(Clone)]
pub(crate) struct SmStore {
    inner: Arc<Mutex<Inner>>,
    path: PathBuf,
    /// This node's id in the group: entries another node appended are a follower's to
    /// apply (see [`RaftStateMachine::apply`]).
    me: NodeId,
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

fn sm_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::error(e.to_string())).into()
}

impl SmStore {
    /// Opens the state machine side under `dir`, restoring `user` from the snapshot.
    pub(crate) fn open(
        dir: &Path,
        me: NodeId,
        mut user: Box<dyn StateMachine>,
    ) -> io::Result<SmStore> {
        std::fs::create_dir_all(dir)
            .map_err(|e| io::Error::other(format!("{}: {e}", dir.display())))?;
        let path = dir.join("snapshot");
        let bad = |e: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        };
        let current: Option<StoredSnapshot> = match frame::read_single(&path)? {
            Some(b) => Some(serde_json::from_slice(&b).map_err(|e| bad(e.to_string()))?),
            None => None,
        };
        let (last_applied, membership) = match &current {
            Some(s) => {
                user.restore(&s.data)
                    .map_err(|e| bad(format!("snapshot does not restore: {e}")))?;
                (s.meta.last_log_id, s.meta.last_membership.clone())
            }
            None => (None, StoredMembership::default()),
        };
        let inner = Inner {
            user,
            last_applied,
            membership,
            current: current.map(|s| s.meta),
            built: 0,
        };
        Ok(SmStore {
            inner: Arc::new(Mutex::new(inner)),
            path,
            me,
        })
    }

    /// Writes `snap` as the latest snapshot and gives it back.
    async fn persist(&self, snap: StoredSnapshot) -> io::Result<StoredSnapshot> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let json = serde_json::to_vec(&snap).map_err(io::Error::other)?;
            frame::write_atomic(&path, &json)
                .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))?;
            Ok(snap)
        })
        .await
        .map_err(|e| io::Error::other(format!("snapshot write task failed: {e}")))?
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SmStore {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let snap = {
            let mut inner = lock(&self.inner);
            inner.built += 1;
            let idx = inner.last_applied.map(|l| l.index).unwrap_or(0);
            let meta = SnapshotMeta {
                last_log_id: inner.last_applied,
                last_membership: inner.membership.clone(),
                snapshot_id: format!("{idx}-{}", inner.built),
            };
            StoredSnapshot {
                meta,
                data: inner.user.snapshot(),
            }
        };
        let sig = snap.meta.signature();
        let snap = self.persist(snap).await.map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(Some(sig), AnyError::new(&e)))
        })?;
        lock(&self.inner).current = Some(snap.meta.clone());
        Ok(Snapshot {
            meta: snap.meta,
            snapshot: Box::new(Cursor::new(snap.data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for SmStore {
    type SnapshotBuilder = SmStore;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>)> {
        let inner = lock(&self.inner);
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Vec<u8>>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut entries = entries.into_iter().peekable();
        // A follower learns of a commit from the append that also carries the next entry,
        // and openraft hands the apply to this task just after answering that append. Tokio
        // runs the task woken last first, so without this yield the follower would apply
        // (store writes) before its answer left for the leader, and every commit on the
        // leader (a synchronous publisher's PubAck) would wait for a follower's apply.
        // Nothing waits for a follower's apply; the leader's own entries are applied at once.
        // (A batch's entries come from one leader but where a new leader applies its
        // predecessor's last ones: the first entry decides.)
        if entries
            .peek()
            .is_some_and(|e| e.log_id.leader_id.node_id != self.me)
        {
            tokio::task::yield_now().await;
        }
        let mut inner = lock(&self.inner);
        let mut out = Vec::new();
        for e in entries {
            inner.last_applied = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => out.push(Vec::new()),
                EntryPayload::Normal(data) => {
                    let (index, leader) = (e.log_id.index, e.log_id.leader_id.node_id);
                    let r = inner.user.apply_from(index, leader, &data.0);
                    out.push(r);
                }
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(e.log_id), m);
                    out.push(Vec::new());
                }
            }
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let snap = StoredSnapshot {
            meta: meta.clone(),
            data: snapshot.into_inner(),
        };
        let sig = meta.signature();
        let snap = self.persist(snap).await.map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(Some(sig), AnyError::new(&e)))
        })?;
        let mut inner = lock(&self.inner);
        inner
            .user
            .restore(&snap.data)
            .map_err(|e| sm_err(format!("received snapshot does not restore: {e}")))?;
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.current = Some(snap.meta);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let Some(meta) = lock(&self.inner).current.clone() else {
            return Ok(None);
        };
        let sig = meta.signature();
        let path = self.path.clone();
        let read = tokio::task::spawn_blocking(move || -> io::Result<StoredSnapshot> {
            let b = frame::read_single(&path)?.ok_or_else(|| {
                io::Error::other(format!("{}: the snapshot file is gone", path.display()))
            })?;
            serde_json::from_slice(&b)
                .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
        })
        .await
        .map_err(|e| io::Error::other(format!("snapshot read task failed: {e}")))
        .and_then(|r| r)
        .map_err(|e| {
            StorageError::from(StorageIOError::read_snapshot(Some(sig), AnyError::new(&e)))
        })?;
        Ok(Some(Snapshot {
            meta: read.meta,
            snapshot: Box::new(Cursor::new(read.data)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;
    use std::sync::Mutex as StdMutex;

    /// Records what it applied, in order, in a log shared with the test.
    struct Recorder(Arc<StdMutex<Vec<String>>>);

    impl StateMachine for Recorder {
        fn apply(&mut self, index: u64, _data: &[u8]) -> Vec<u8> {
            if let Ok(mut v) = self.0.lock() {
                v.push(format!("apply {index}"));
            }
            Vec::new()
        }
        fn snapshot(&self) -> Vec<u8> {
            Vec::new()
        }
        fn restore(&mut self, _snapshot: &[u8]) -> Result<(), String> {
            Ok(())
        }
    }

    fn entry(leader: NodeId, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, leader), index),
            payload: EntryPayload::Normal(super::super::Bin(bytes::Bytes::from_static(b"x"))),
        }
    }

    /// What runs first when the apply and another ready task (the append's answer) are
    /// both queued on one thread, the apply ahead of the answer (as tokio's slot for the
    /// task woken last puts it on a node).
    async fn order(me: NodeId, leader: NodeId) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!(
            "natsd-smstore-{}-{me}-{leader}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let log = Arc::new(StdMutex::new(Vec::new()));
        let mut sm = SmStore::open(&dir, me, Box::new(Recorder(log.clone()))).expect("open");
        let apply = tokio::spawn(async move { sm.apply(vec![entry(leader, 7)]).await });
        let l2 = log.clone();
        let answer = tokio::spawn(async move {
            if let Ok(mut v) = l2.lock() {
                v.push("answer".to_string());
            }
        });
        apply.await.expect("apply task").expect("apply");
        answer.await.expect("answer task");
        let _ = std::fs::remove_dir_all(&dir);
        let v = log.lock().map(|v| v.clone()).unwrap_or_default();
        v
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_follower_answers_the_leader_before_it_applies() {
        // Entries appended by node 2, applied on node 1 (a follower): the answer goes first.
        assert_eq!(order(1, 2).await, ["answer", "apply 7"]);
        // The leader's own entries are applied at once: its proposer waits for the result.
        assert_eq!(order(1, 1).await, ["apply 7", "answer"]);
    }
}
