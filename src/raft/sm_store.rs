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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
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
use crate::util::writeback::Appender;

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

/// What a group applied since its last snapshot, for its owner to ask for one sooner than
/// openraft's entry count would ([`super::Group::since_snapshot`]).
#[derive(Default)]
pub(crate) struct SinceSnapshot {
    pub(crate) entries: AtomicU64,
    /// The entries' payload bytes.
    pub(crate) bytes: AtomicU64,
    /// A snapshot was asked for and no build has ended since (openraft drops a request
    /// that comes while it builds one: it may be asked again once that ends).
    pub(crate) asked: AtomicBool,
}

impl SinceSnapshot {
    /// A snapshot holds everything applied so far.
    fn reset(&self) {
        self.entries.store(0, Relaxed);
        self.bytes.store(0, Relaxed);
    }
}

/// The state machine side of one group.
#[derive(Clone)]
pub(crate) struct SmStore {
    inner: Arc<Mutex<Inner>>,
    pub(crate) since: Arc<SinceSnapshot>,
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
            since: Arc::default(),
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

/// A data file being written (to `<name>`[`BUILDING`]), counted and checksummed, its
/// writeback started as it grows (so its fsync has little left to do).
type DataWriter = Crc<BufWriter<Appender>>;

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
    Ok(Crc::new(BufWriter::with_capacity(
        1 << 20,
        Appender::new(f),
    )))
}

/// Makes what `w` holds durable as the data file `name`.
fn finish_data(dir: &Path, mut w: DataWriter, name: &str) -> io::Result<DataFile> {
    let tmp = building(dir, name);
    let at = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", tmp.display()));
    w.flush().map_err(at)?;
    let (len, crc) = (w.len, w.crc);
    let f = w.inner.into_inner().map_err(|e| at(e.into_error()))?.file;
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
                this.since.reset();
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
        self.since.asked.store(false, Relaxed);
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
            self.since.entries.fetch_add(1, Relaxed);
            match e.payload {
                EntryPayload::Blank => out.push(Vec::new()),
                EntryPayload::Normal(data) => {
                    self.since.bytes.fetch_add(data.0.len() as u64, Relaxed);
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
            this.since.reset();
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
#[path = "sm_store_tests.rs"]
mod tests;
