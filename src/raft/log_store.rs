//! A group's durable Raft log and vote (openraft's `RaftLogStorage`).
//!
//! Files in the group's directory:
//! - `log`: append-only crc-framed records (frame.rs), each a [`LogRecord`]: an entry
//!   (byte `1` and the entry's binary form, codec.rs; a JSON record from an older natsd
//!   is read too), a truncation (conflicting suffix dropped) or a purge (prefix covered by
//!   a snapshot), both JSON. Replayed on open; a torn last record is cut off with a warning, damage
//!   anywhere else is an error naming the file and offset. Rewritten compactly (temp
//!   file + rename) once dead records outnumber live entries.
//! - `vote`: the current vote, replaced atomically and fsynced before it is used.
//!
//! Entries live in memory too (a `BTreeMap`), bounded by snapshots purging the prefix.
//! Every append is fsynced before openraft is told it is flushed. File I/O runs on the
//! blocking pool; the mutex is never held across an `.await`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, Entry, LogId, RaftLogReader, StorageError, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use super::frame;
use super::{NodeId, TypeConfig};

type StorageResult<T> = Result<T, StorageError<NodeId>>;

#[derive(Serialize, Deserialize)]
enum LogRecord {
    Entry(Entry<TypeConfig>),
    /// Entries at this index and after are gone.
    Truncate(u64),
    /// Entries up to and including this id are gone (in a snapshot).
    Purge(LogId<NodeId>),
}

struct Inner {
    path: PathBuf,
    file: File,
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    last_purged: Option<LogId<NodeId>>,
    /// Records in the file, for deciding when to rewrite it.
    records: u64,
    vote_path: PathBuf,
    vote: Option<Vote<NodeId>>,
    /// `None`: every append is fsynced before openraft hears it is flushed. `Some(d)`:
    /// appends are fsynced at most `d` apart (nats-server's `sync_interval` for its Raft
    /// logs: a process crash loses nothing, the page cache has it; a machine's power loss
    /// may lose the last `d` of a node's log, which the other replicas still hold).
    sync_every: Option<std::time::Duration>,
    last_sync: std::time::Instant,
}

/// The log and the vote of one group, shared with its readers.
#[derive(Clone)]
pub(crate) struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{}: {e}", path.display()))
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding the lock leaves plain data behind; keep going.
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl LogStore {
    /// Opens (or creates) the log and vote under `dir`.
    pub(crate) fn open(
        dir: &Path,
        sync_every: Option<std::time::Duration>,
    ) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let path = dir.join("log");
        let vote_path = dir.join("vote");
        let vote = match frame::read_single(&vote_path)? {
            Some(b) => Some(serde_json::from_slice(&b).map_err(|e| io_err(&vote_path, e))?),
            None => None,
        };
        let buf = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io_err(&path, e)),
        };
        let decoded =
            frame::decode_all(&buf).map_err(|e| io_err(&path, format!("corrupt raft log: {e}")))?;
        let mut entries = BTreeMap::new();
        let mut last_purged = None;
        let mut records = 0u64;
        for (i, rec) in decoded.records.iter().enumerate() {
            let rec = decode_record(rec).map_err(|e| {
                io_err(
                    &path,
                    format!("corrupt raft log: record {i} does not decode: {e}"),
                )
            })?;
            records += 1;
            match rec {
                LogRecord::Entry(e) => {
                    entries.insert(e.log_id.index, e);
                }
                LogRecord::Truncate(since) => {
                    entries.split_off(&since);
                }
                LogRecord::Purge(id) => {
                    entries = entries.split_off(&(id.index + 1));
                    last_purged = Some(id);
                }
            }
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        if decoded.torn_tail {
            tracing::warn!(
                path = %path.display(),
                dropped = buf.len() - decoded.valid_len,
                "raft log ends in a torn record (crash during an append); cutting it off"
            );
            file.set_len(decoded.valid_len as u64)
                .map_err(|e| io_err(&path, e))?;
            file.sync_all().map_err(|e| io_err(&path, e))?;
        }
        let inner = Inner {
            path,
            file,
            entries,
            last_purged,
            records,
            vote_path,
            vote,
            sync_every,
            last_sync: std::time::Instant::now(),
        };
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Runs `f` on the blocking pool with the store locked.
    async fn blocking<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Inner) -> io::Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&mut lock(&inner)))
            .await
            .map_err(|e| io::Error::other(format!("raft log task failed: {e}")))?
    }
}

impl Inner {
    /// Whether the next write must be followed by an fsync.
    fn sync_due(&self) -> bool {
        self.sync_every
            .is_none_or(|d| self.last_sync.elapsed() >= d)
    }

    fn write_records(&mut self, recs: &[LogRecord]) -> io::Result<()> {
        let mut buf = Vec::new();
        let mut rec = Vec::new();
        for r in recs {
            encode_record(&mut rec, r).map_err(|e| io_err(&self.path, e))?;
            frame::encode(&mut buf, &rec)?;
        }
        self.write_buf(buf, recs.len(), true)
    }

    /// Writes and keeps `entries` (no copy of them); fsyncs when `may_sync` and one is due.
    /// Each record's header and the head of its entry are built in one buffer; a normal
    /// entry's payload (most of the bytes) is written from the entry's own buffer by the
    /// same `writev`, never copied: a copy into a growing buffer was the largest cost of a
    /// follower's append with 1 KiB messages (the copy, and page faults as it grew).
    fn append_entries(
        &mut self,
        entries: Vec<Entry<TypeConfig>>,
        may_sync: bool,
    ) -> io::Result<()> {
        let mut heads = Vec::with_capacity(entries.len() * 64);
        let mut parts: Vec<(std::ops::Range<usize>, &[u8])> = Vec::with_capacity(entries.len());
        for e in &entries {
            let at = frame::open_record(&mut heads);
            heads.push(BIN_ENTRY);
            let tail = super::codec::encode_entry_head(&mut heads, e)
                .map_err(|e| io_err(&self.path, e))?
                .unwrap_or_default();
            frame::seal(&mut heads, at, tail)?;
            parts.push((at..heads.len(), tail));
        }
        let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(2 * parts.len());
        for (head, tail) in &parts {
            slices.push(IoSlice::new(&heads[head.clone()]));
            if !tail.is_empty() {
                slices.push(IoSlice::new(tail));
            }
        }
        write_all_vectored(&mut self.file, &mut slices).map_err(|e| io_err(&self.path, e))?;
        self.after_write(entries.len(), may_sync)?;
        for e in entries {
            self.entries.insert(e.log_id.index, e);
        }
        Ok(())
    }

    /// Writes `n` framed records in `buf`; fsyncs when `may_sync` and one is due.
    fn write_buf(&mut self, buf: Vec<u8>, n: usize, may_sync: bool) -> io::Result<()> {
        self.file
            .write_all(&buf)
            .map_err(|e| io_err(&self.path, e))?;
        self.after_write(n, may_sync)
    }

    /// Counts `n` records written; fsyncs when `may_sync` and one is due.
    fn after_write(&mut self, n: usize, may_sync: bool) -> io::Result<()> {
        if may_sync && self.sync_due() {
            self.file.sync_data().map_err(|e| io_err(&self.path, e))?;
            self.last_sync = std::time::Instant::now();
        }
        self.records += n as u64;
        Ok(())
    }

    /// Rewrites the log file with only what is live, once it is mostly dead records.
    fn maybe_compact(&mut self) -> io::Result<()> {
        let live = self.entries.len() as u64 + 1;
        if self.records < 1024 || self.records < 2 * live {
            return Ok(());
        }
        let mut buf = Vec::new();
        let mut rec = Vec::new();
        let mut n = 0;
        let purge = self.last_purged.map(LogRecord::Purge);
        let entries = self.entries.values().map(|e| LogRecord::Entry(e.clone()));
        for r in purge.into_iter().chain(entries) {
            encode_record(&mut rec, &r).map_err(|e| io_err(&self.path, e))?;
            frame::encode(&mut buf, &rec)?;
            n += 1;
        }
        frame::write_atomic_raw(&self.path, &buf)?;
        self.file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(|e| io_err(&self.path, e))?;
        self.records = n;
        Ok(())
    }
}

/// The first byte of an entry record in binary form (a JSON record starts with `{`).
const BIN_ENTRY: u8 = 1;

/// Replaces `out` with record `r`'s bytes.
fn encode_record(out: &mut Vec<u8>, r: &LogRecord) -> Result<(), String> {
    match r {
        LogRecord::Entry(e) => encode_entry_record(out, e),
        _ => {
            out.clear();
            serde_json::to_writer(&mut *out, r).map_err(|e| e.to_string())
        }
    }
}

/// Replaces `out` with an entry record's bytes.
fn encode_entry_record(out: &mut Vec<u8>, e: &Entry<TypeConfig>) -> Result<(), String> {
    out.clear();
    out.push(BIN_ENTRY);
    super::codec::encode_entry(out, e)
}

/// Writes all of `bufs` (as `write_all` does for one buffer).
fn write_all_vectored(f: &mut File, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match f.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn decode_record(rec: &[u8]) -> Result<LogRecord, String> {
    match rec.split_first() {
        Some((&BIN_ENTRY, entry)) => {
            super::codec::decode_entry(&bytes::Bytes::copy_from_slice(entry)).map(LogRecord::Entry)
        }
        _ => serde_json::from_slice(rec).map_err(|e| e.to_string()),
    }
}

fn write_err(e: io::Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        let inner = lock(&self.inner);
        Ok(inner.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let inner = lock(&self.inner);
        let last = inner
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(inner.last_purged);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let vote = *vote;
        self.blocking(move |inner| {
            let json = serde_json::to_vec(&vote).map_err(|e| io_err(&inner.vote_path, e))?;
            frame::write_atomic(&inner.vote_path, &json)
                .map_err(|e| io_err(&inner.vote_path, e))?;
            inner.vote = Some(vote);
            Ok(())
        })
        .await
        .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)).into())
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        Ok(lock(&self.inner).vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        // With no fsync due (`sync_interval`), the write only fills the page cache: done
        // here rather than on the blocking pool, which would cost two thread hops on every
        // append of every member (the latency of each synchronous publish).
        let res = {
            let mut inner = lock(&self.inner);
            if inner.sync_due() {
                Err(entries)
            } else {
                Ok(inner.append_entries(entries, false))
            }
        };
        let res = match res {
            Ok(r) => r,
            Err(entries) => {
                self.blocking(move |inner| inner.append_entries(entries, true))
                    .await
            }
        };
        match res {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::other(e.to_string())));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        self.blocking(move |inner| {
            inner.write_records(&[LogRecord::Truncate(log_id.index)])?;
            inner.entries.split_off(&log_id.index);
            Ok(())
        })
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        self.blocking(move |inner| {
            inner.write_records(&[LogRecord::Purge(log_id)])?;
            inner.entries = inner.entries.split_off(&(log_id.index + 1));
            inner.last_purged = Some(log_id);
            inner.maybe_compact()
        })
        .await
        .map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(i: u64, data: &'static [u8]) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), i),
            payload: EntryPayload::Normal(super::super::Bin(bytes::Bytes::from_static(data))),
        }
    }

    /// A log written by an older natsd (JSON entry records) opens, and new binary records
    /// appended after them read back with them.
    #[test]
    fn json_records_of_an_older_log_read_beside_binary_ones() {
        let dir = std::env::temp_dir().join(format!("natsd-logstore-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let mut buf = Vec::new();
        for r in [
            LogRecord::Entry(entry(1, b"old one")),
            LogRecord::Entry(entry(2, b"old two")),
        ] {
            let json = serde_json::to_vec(&r).expect("json");
            assert_eq!(json.first(), Some(&b'{'));
            frame::encode(&mut buf, &json).expect("frame");
        }
        let mut rec = Vec::new();
        for r in [
            LogRecord::Truncate(2),
            LogRecord::Entry(entry(2, b"new two")),
        ] {
            encode_record(&mut rec, &r).expect("encode");
            frame::encode(&mut buf, &rec).expect("frame");
        }
        std::fs::write(dir.join("log"), &buf).expect("write");
        let store = LogStore::open(&dir, None).expect("open");
        let got: Vec<_> = lock(&store.inner).entries.values().cloned().collect();
        assert_eq!(got, vec![entry(1, b"old one"), entry(2, b"new two")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An append writes each entry's payload from the entry's own buffer: the file holds
    /// exactly the records a whole-buffer encoding gives, and they read back.
    #[test]
    fn an_append_writes_the_framed_records_and_they_read_back() {
        let dir = std::env::temp_dir().join(format!("natsd-logstore-vec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = LogStore::open(&dir, None).expect("open");
        let big: &'static [u8] = Box::leak(vec![7u8; 70_000].into_boxed_slice());
        let mut members = std::collections::BTreeSet::new();
        members.insert(1u64);
        let membership = openraft::Membership::new(vec![members], None);
        let entries = vec![
            Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), 1),
                payload: EntryPayload::Blank,
            },
            entry(2, b"two"),
            Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), 3),
                payload: EntryPayload::Membership(membership),
            },
            entry(4, big),
            entry(5, b""),
        ];
        lock(&store.inner)
            .append_entries(entries.clone(), true)
            .expect("append");
        let mut want = Vec::new();
        let mut rec = Vec::new();
        for e in &entries {
            encode_record(&mut rec, &LogRecord::Entry(e.clone())).expect("encode");
            frame::encode(&mut want, &rec).expect("frame");
        }
        assert_eq!(std::fs::read(dir.join("log")).expect("read"), want);
        drop(store);
        let store = LogStore::open(&dir, None).expect("reopen");
        let got: Vec<_> = lock(&store.inner).entries.values().cloned().collect();
        assert_eq!(got, entries);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
