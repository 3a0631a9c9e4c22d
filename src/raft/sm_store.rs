//! The bridge from openraft's `RaftStateMachine` to our [`StateMachine`]: applies
//! committed entries, tracks the last applied id and membership, and builds, installs
//! and persists snapshots.
//!
//! The latest snapshot is two files in the group's directory: its data,
//! `snapshot-<index>-<n>.data`, written piece by piece by the state machine
//! ([`StateMachine::snapshot_to`]) and never held in memory whole, so it has no size limit
//! of its own; and `snapshot`, one crc-framed JSON record (frame.rs) with openraft's meta
//! and the data file's name, length and CRC-32C, replaced atomically after the data file
//! is durable. On open the data is restored into the state machine (and checked against
//! that length and CRC); openraft then re-applies the log after it. A follower is sent the
//! data file in chunks (openraft's `Chunked`), received into `<n>.receiving`.
//!
//! A `snapshot` record written before data files holds the data inline (base64); it is
//! restored as before and rewritten in the new form.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Mutex;

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::frame;
use super::{NodeId, StateMachine, TypeConfig};
use crate::jetstream::store::file::record::crc32c_append;

type StorageResult<T> = Result<T, StorageError<NodeId>>;

/// Where a snapshot's data is: a file in the group's directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct DataFile {
    name: String,
    len: u64,
    crc: u32,
}

/// The `snapshot` record.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<DataFile>,
    /// A record written before data files: the data itself.
    #[serde(default, with = "super::bin", skip_serializing_if = "Vec::is_empty")]
    data: Vec<u8>,
}

struct Inner {
    user: Box<dyn StateMachine>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    /// The latest snapshot's meta and data file.
    current: Option<(SnapshotMeta<NodeId, BasicNode>, DataFile)>,
    /// Names the next data file (unique within this directory: it starts from the clock).
    next_file: u64,
    /// The file the snapshot being received goes to.
    receiving: Option<PathBuf>,
}

/// The state machine side of one group.
#[derive(Clone)]
pub(crate) struct SmStore {
    inner: Arc<Mutex<Inner>>,
    dir: PathBuf,
    /// This node's id in the group: entries another node appended are a follower's to
    /// apply (see [`RaftStateMachine::apply`]).
    me: NodeId,
}

/// Counts and checksums what passes through to `inner`.
struct Crc<T> {
    inner: T,
    len: u64,
    crc: u32,
}

impl<T> Crc<T> {
    fn new(inner: T) -> Crc<T> {
        Crc {
            inner,
            len: 0,
            crc: 0,
        }
    }
}

impl<W: Write> Write for Crc<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c_append(self.crc, &buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Crc<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc = crc32c_append(self.crc, &buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
}

fn invalid(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}

/// Restores `user` from the data file at `path`, which must hold what `want` says (when
/// given), and gives back what it held.
fn restore_file(
    user: &mut dyn StateMachine,
    path: &Path,
    want: Option<&DataFile>,
) -> io::Result<(u64, u32)> {
    let f = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut r = Crc::new(BufReader::with_capacity(1 << 20, f));
    user.restore_from(&mut r)
        .map_err(|e| invalid(path, format!("snapshot does not restore: {e}")))?;
    // What the state machine left unread still counts.
    io::copy(&mut r, &mut io::sink()).map_err(|e| invalid(path, e))?;
    if let Some(w) = want {
        if (w.len, w.crc) != (r.len, r.crc) {
            return Err(invalid(
                path,
                format!(
                    "damaged: {} bytes with crc {:08x}, the snapshot record says {} and {:08x}",
                    r.len, r.crc, w.len, w.crc
                ),
            ));
        }
    }
    Ok((r.len, r.crc))
}

impl SmStore {
    /// Opens the state machine side under `dir`, restoring `user` from the snapshot.
    pub(crate) fn open(dir: &Path, me: NodeId, user: Box<dyn StateMachine>) -> io::Result<SmStore> {
        std::fs::create_dir_all(dir)
            .map_err(|e| io::Error::other(format!("{}: {e}", dir.display())))?;
        let path = dir.join("snapshot");
        let stored: Option<StoredSnapshot> = match frame::read_single(&path)? {
            Some(b) => Some(serde_json::from_slice(&b).map_err(|e| invalid(&path, e))?),
            None => None,
        };
        let next_file = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let mut inner = Inner {
            user,
            last_applied: None,
            membership: StoredMembership::default(),
            current: None,
            next_file,
            receiving: None,
        };
        if let Some(s) = stored {
            let file = match s.file {
                Some(df) => {
                    restore_file(inner.user.as_mut(), &dir.join(&df.name), Some(&df))?;
                    df
                }
                None => {
                    inner
                        .user
                        .restore(&s.data)
                        .map_err(|e| invalid(&path, format!("snapshot does not restore: {e}")))?;
                    // Rewritten in the current form: the data in a file of its own.
                    let name = inner.file_name(&s.meta);
                    let df = write_data(dir, &name, |w| w.write_all(&s.data))?;
                    write_record(dir, &s.meta, &df)?;
                    df
                }
            };
            inner.last_applied = s.meta.last_log_id;
            inner.membership = s.meta.last_membership.clone();
            inner.current = Some((s.meta, file));
        }
        let store = SmStore {
            inner: Arc::new(Mutex::new(inner)),
            dir: dir.to_path_buf(),
            me,
        };
        if let Ok(inner) = store.inner.try_lock() {
            store.remove_stale(&inner, true);
        }
        Ok(store)
    }

    /// Removes data files other than the current one, and with `unfinished` (on open:
    /// nothing is being built) those a crash left half written.
    fn remove_stale(&self, inner: &Inner, unfinished: bool) {
        let keep = inner.current.as_ref().map(|(_, df)| df.name.as_str());
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            let data = name.starts_with("snapshot-") && name.ends_with(".data");
            let half = name.ends_with(BUILDING) || name.ends_with(RECEIVING);
            if (data && Some(name) != keep) || (unfinished && half) {
                if let Err(err) = std::fs::remove_file(e.path()) {
                    tracing::warn!("raft: {}: not removed: {err}", e.path().display());
                }
            }
        }
    }

    /// Makes the snapshot whose data is the file `name` (already durable) the current one,
    /// unless a newer one is: `false` then (the caller's file was removed).
    fn make_current(
        &self,
        inner: &mut Inner,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        df: DataFile,
    ) -> io::Result<bool> {
        let newer = inner
            .current
            .as_ref()
            .is_some_and(|(m, _)| m.last_log_id > meta.last_log_id);
        if newer {
            let _ = std::fs::remove_file(self.dir.join(&df.name));
            return Ok(false);
        }
        write_record(&self.dir, meta, &df)?;
        inner.current = Some((meta.clone(), df));
        self.remove_stale(inner, false);
        Ok(true)
    }

    /// The current snapshot with its data file opened (under the lock, so a newer
    /// snapshot cannot remove the file first).
    async fn open_current(&self) -> io::Result<Option<Snapshot<TypeConfig>>> {
        let inner = self.inner.lock().await;
        let Some((meta, df)) = inner.current.clone() else {
            return Ok(None);
        };
        let path = self.dir.join(&df.name);
        let f = File::open(&path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(f)),
        }))
    }
}

/// A data file is written as `<its name>.building`, then renamed.
const BUILDING: &str = ".building";
/// A snapshot from the leader is received into `<n>.receiving`.
const RECEIVING: &str = ".receiving";

impl Inner {
    fn file_name(&mut self, meta: &SnapshotMeta<NodeId, BasicNode>) -> String {
        self.next_file += 1;
        let idx = meta.last_log_id.map_or(0, |l| l.index);
        format!("snapshot-{idx}-{}.data", self.next_file)
    }
}

/// A data file being written (to `<name>`[`BUILDING`]), counted and checksummed.
type DataWriter = Crc<BufWriter<File>>;

fn building(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}{BUILDING}"))
}

fn start_data(dir: &Path, name: &str) -> io::Result<DataWriter> {
    let tmp = building(dir, name);
    let f = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", tmp.display())))?;
    Ok(Crc::new(BufWriter::with_capacity(1 << 20, f)))
}

/// Makes what `w` holds durable as the data file `name`.
fn finish_data(dir: &Path, mut w: DataWriter, name: &str) -> io::Result<DataFile> {
    let tmp = building(dir, name);
    let at = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", tmp.display()));
    w.flush().map_err(at)?;
    let (len, crc) = (w.len, w.crc);
    let f = w.inner.into_inner().map_err(|e| at(e.into_error()))?;
    f.sync_all().map_err(at)?;
    std::fs::rename(&tmp, dir.join(name)).map_err(at)?;
    frame::sync_dir(dir).map_err(at)?;
    Ok(DataFile {
        name: name.to_string(),
        len,
        crc,
    })
}

/// Writes the data file `name` in `dir` with what `fill` writes, durably.
fn write_data(
    dir: &Path,
    name: &str,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<DataFile> {
    let mut w = start_data(dir, name)?;
    fill(&mut w)?;
    finish_data(dir, w, name)
}

/// Replaces the `snapshot` record, durably (the data file is durable already).
fn write_record(
    dir: &Path,
    meta: &SnapshotMeta<NodeId, BasicNode>,
    df: &DataFile,
) -> io::Result<()> {
    let path = dir.join("snapshot");
    let rec = StoredSnapshot {
        meta: meta.clone(),
        file: Some(df.clone()),
        data: Vec::new(),
    };
    let json = serde_json::to_vec(&rec).map_err(io::Error::other)?;
    frame::write_atomic(&path, &json)
        .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

impl RaftSnapshotBuilder<TypeConfig> for SmStore {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let this = self.clone();
        let built = tokio::task::spawn_blocking(move || -> io::Result<Snapshot<TypeConfig>> {
            // The state and its meta are read under one lock; the file is made durable
            // after it is released (applies go on meanwhile).
            let (meta, name, w) = {
                let mut inner = this.inner.blocking_lock();
                let idx = inner.last_applied.map(|l| l.index).unwrap_or(0);
                let meta = SnapshotMeta {
                    last_log_id: inner.last_applied,
                    last_membership: inner.membership.clone(),
                    snapshot_id: format!("{idx}-{}", inner.next_file + 1),
                };
                let name = inner.file_name(&meta);
                let mut w = start_data(&this.dir, &name)?;
                inner.user.snapshot_to(&mut w)?;
                (meta, name, w)
            };
            let df = finish_data(&this.dir, w, &name)?;
            let path = this.dir.join(&df.name);
            let f = File::open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            this.make_current(&mut this.inner.blocking_lock(), &meta, df)?;
            Ok(Snapshot {
                meta,
                snapshot: Box::new(tokio::fs::File::from_std(f)),
            })
        })
        .await
        .map_err(|e| io::Error::other(format!("snapshot task failed: {e}")))
        .and_then(|r| r);
        built.map_err(|e| {
            StorageError::from(StorageIOError::write_snapshot(None, AnyError::new(&e)))
        })
    }
}

impl RaftStateMachine<TypeConfig> for SmStore {
    type SnapshotBuilder = SmStore;

    async fn applied_state(
        &mut self,
    ) -> StorageResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>)> {
        let inner = self.inner.lock().await;
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
        let mut inner = self.inner.lock().await;
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

    /// Each snapshot is received into a file of its own: one whose stream was dropped for a
    /// newer one may still have a write under way.
    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<tokio::fs::File>> {
        let path = {
            let mut inner = self.inner.lock().await;
            inner.next_file += 1;
            let path = self.dir.join(format!("{}{RECEIVING}", inner.next_file));
            if let Some(old) = inner.receiving.replace(path.clone()) {
                let _ = std::fs::remove_file(old);
            }
            path
        };
        let f = tokio::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(true)
            .open(&path)
            .await
            .map_err(|e| {
                let e = io::Error::new(e.kind(), format!("{}: {e}", path.display()));
                StorageError::from(StorageIOError::write_snapshot(None, AnyError::new(&e)))
            })?;
        Ok(Box::new(f))
    }

    /// A snapshot received from the leader (in [`RECEIVING`]): restored into the state
    /// machine, then kept as the current one.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<tokio::fs::File>,
    ) -> StorageResult<()> {
        let sig = meta.signature();
        let err = move |e: io::Error| {
            StorageError::from(StorageIOError::write_snapshot(
                Some(sig.clone()),
                AnyError::new(&e),
            ))
        };
        snapshot.sync_all().await.map_err(&err)?;
        drop(snapshot);
        let this = self.clone();
        let meta = meta.clone();
        tokio::task::spawn_blocking(move || -> io::Result<()> {
            let mut inner = this.inner.blocking_lock();
            let received = inner
                .receiving
                .take()
                .ok_or_else(|| io::Error::other("no snapshot was being received"))?;
            let name = inner.file_name(&meta);
            let path = this.dir.join(&name);
            std::fs::rename(&received, &path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            frame::sync_dir(&this.dir)?;
            let (len, crc) = restore_file(inner.user.as_mut(), &path, None)?;
            inner.last_applied = meta.last_log_id;
            inner.membership = meta.last_membership.clone();
            this.make_current(&mut inner, &meta, DataFile { name, len, crc })?;
            Ok(())
        })
        .await
        .map_err(|e| io::Error::other(format!("snapshot task failed: {e}")))
        .and_then(|r| r)
        .map_err(err)
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        self.open_current()
            .await
            .map_err(|e| StorageError::from(StorageIOError::read_snapshot(None, AnyError::new(&e))))
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
        /// What it applied, joined by commas.
        fn snapshot(&self) -> Vec<u8> {
            self.0
                .lock()
                .map(|v| v.join(","))
                .unwrap_or_default()
                .into_bytes()
        }
        fn restore(&mut self, snapshot: &[u8]) -> Result<(), String> {
            let s = String::from_utf8_lossy(snapshot).to_string();
            if let Ok(mut v) = self.0.lock() {
                v.push(format!("restore {s}"));
            }
            Ok(())
        }
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("natsd-smstore-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn data_files(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.starts_with("snapshot") && n != "snapshot")
            .collect();
        v.sort();
        v
    }

    async fn read_all(snap: Snapshot<TypeConfig>) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut f = snap.snapshot;
        let mut v = Vec::new();
        f.read_to_end(&mut v).await.expect("read snapshot data");
        v
    }

    fn opened(dir: &Path) -> (SmStore, Arc<StdMutex<Vec<String>>>) {
        let log = Arc::new(StdMutex::new(Vec::new()));
        let sm = SmStore::open(dir, 1, Box::new(Recorder(log.clone()))).expect("open");
        (sm, log)
    }

    fn logged(log: &Arc<StdMutex<Vec<String>>>) -> Vec<String> {
        log.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The one data file left is the snapshot at index 9, and `sm` reopened restores `data`.
    fn reopened_restores(sm: SmStore, dir: &Path, data: &str) {
        let files = data_files(dir);
        assert!(
            files.len() == 1 && files[0].starts_with("snapshot-9-"),
            "{files:?}"
        );
        drop(sm);
        let (_, log) = opened(dir);
        assert_eq!(logged(&log), [format!("restore {data}")]);
    }

    /// A snapshot's data is a file of its own, replaced with the next snapshot, restored
    /// on open and checked against the record's length and crc; one received from a leader
    /// becomes the current one; a record with inline data (written before data files) is
    /// restored and rewritten with a file.
    #[tokio::test(flavor = "current_thread")]
    async fn a_snapshot_is_a_file_of_its_own_checked_on_open() {
        let dir = tmp("files");
        let (mut sm, _) = opened(&dir);
        sm.apply(vec![entry(1, 1), entry(1, 2)])
            .await
            .expect("apply");
        let first = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
        assert_eq!(read_all(first).await, b"apply 1,apply 2");
        sm.apply(vec![entry(1, 3)]).await.expect("apply");
        let snap = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .expect("build");
        assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(3));
        let files = data_files(&dir);
        assert_eq!(files.len(), 1, "only the newest data file stays: {files:?}");
        assert!(files[0].starts_with("snapshot-3-"), "{files:?}");
        let current = sm
            .get_current_snapshot()
            .await
            .expect("current")
            .expect("some");
        assert_eq!(read_all(current).await, b"apply 1,apply 2,apply 3");
        drop(sm);

        // What a crash leaves (a data file half written, an older one) goes on open.
        std::fs::write(dir.join("snapshot-4-1.data.building"), b"half").expect("write");
        std::fs::write(dir.join("snapshot-2-1.data"), b"old").expect("write");
        let (mut sm, log) = opened(&dir);
        assert_eq!(logged(&log), ["restore apply 1,apply 2,apply 3"]);
        assert_eq!(
            data_files(&dir),
            files,
            "only the current data file is left"
        );
        let (applied, _) = sm.applied_state().await.expect("applied");
        assert_eq!(applied.map(|l| l.index), Some(3));

        // Received from a leader.
        use tokio::io::AsyncWriteExt;
        // (A stream given up for a newer one writes into a file of its own.)
        let mut dropped = sm.begin_receiving_snapshot().await.expect("begin");
        let mut f = sm.begin_receiving_snapshot().await.expect("begin again");
        dropped
            .write_all(b"stale, longer than the new one")
            .await
            .expect("write");
        dropped.shutdown().await.expect("shutdown");
        f.write_all(b"from the leader").await.expect("write");
        f.shutdown().await.expect("shutdown");
        let meta = SnapshotMeta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(2, 2), 9)),
            last_membership: StoredMembership::default(),
            snapshot_id: "9-1".into(),
        };
        sm.install_snapshot(&meta, f).await.expect("install");
        assert_eq!(
            logged(&log).last().map(String::as_str),
            Some("restore from the leader")
        );
        reopened_restores(sm, &dir, "from the leader");

        // A damaged data file is an error naming it.
        let path = dir.join(&data_files(&dir)[0]);
        let mut b = std::fs::read(&path).expect("read");
        b[0] ^= 1;
        std::fs::write(&path, &b).expect("write");
        let log = Arc::new(StdMutex::new(Vec::new()));
        let err = SmStore::open(&dir, 1, Box::new(Recorder(log)))
            .err()
            .expect("damaged");
        assert!(err.to_string().contains("damaged"), "{err}");
        assert!(err.to_string().contains(&data_files(&dir)[0]), "{err}");

        // A record with the data inline.
        let inline = StoredSnapshot {
            meta,
            file: None,
            data: b"inline".to_vec(),
        };
        let json = serde_json::to_vec(&inline).expect("json");
        frame::write_atomic(&dir.join("snapshot"), &json).expect("write record");
        let (sm, log) = opened(&dir);
        assert_eq!(logged(&log), ["restore inline"]);
        reopened_restores(sm, &dir, "inline");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn entry(leader: NodeId, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, leader), index),
            payload: EntryPayload::Normal(super::super::Bin(bytes::Bytes::from_static(b"x"))),
        }
    }

    /// Writes its snapshot only once released; says when it has started.
    struct Gate {
        started: Arc<std::sync::atomic::AtomicBool>,
        release: StdMutex<Option<std::sync::mpsc::Receiver<()>>>,
    }

    impl StateMachine for Gate {
        fn apply(&mut self, _index: u64, _data: &[u8]) -> Vec<u8> {
            Vec::new()
        }
        fn snapshot(&self) -> Vec<u8> {
            Vec::new()
        }
        fn restore(&mut self, _snapshot: &[u8]) -> Result<(), String> {
            Ok(())
        }
        fn snapshot_to(&self, out: &mut dyn Write) -> io::Result<()> {
            self.started
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let rx = self.release.lock().ok().and_then(|mut r| r.take());
            if let Some(rx) = rx {
                let _ = rx.recv();
            }
            out.write_all(b"gate")
        }
    }

    /// While a snapshot is written (a whole stream, for a stream's group) the group's
    /// applies wait for it without holding a runtime thread: on a one-thread runtime, the
    /// task that lets the snapshot finish still runs. (Held, the thread would wait for the
    /// watchdog, which lets the snapshot finish after 10 s and says so.)
    #[tokio::test(flavor = "current_thread")]
    async fn an_apply_waiting_for_a_snapshot_does_not_hold_the_thread() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        let dir = tmp("gate");
        let (tx, rx) = std::sync::mpsc::channel();
        let started = Arc::new(AtomicBool::new(false));
        let gate = Gate {
            started: started.clone(),
            release: StdMutex::new(Some(rx)),
        };
        let mut sm = SmStore::open(&dir, 1, Box::new(gate)).expect("open");
        sm.apply(vec![entry(1, 1)]).await.expect("apply");
        let mut builder = sm.get_snapshot_builder().await;
        let build = tokio::spawn(async move { builder.build_snapshot().await });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !started.load(SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the snapshot never started"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let fired = Arc::new(AtomicBool::new(false));
        let (watchdog, f) = (tx.clone(), fired.clone());
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(10));
            f.store(true, SeqCst);
            let _ = watchdog.send(());
        });
        let mut other = sm.clone();
        let apply = tokio::spawn(async move { other.apply(vec![entry(1, 2)]).await });
        tokio::task::yield_now().await;
        let _ = tx.send(());
        build.await.expect("build task").expect("build");
        apply.await.expect("apply task").expect("apply");
        assert!(
            !fired.load(SeqCst),
            "the thread was held while the snapshot was written"
        );
        let (applied, _) = sm.applied_state().await.expect("applied");
        assert_eq!(applied.map(|l| l.index), Some(2));
        let _ = std::fs::remove_dir_all(&dir);
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
