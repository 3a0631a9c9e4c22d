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
//! Every entry's place in the file is kept in memory, and the newest entries themselves up
//! to a bound (log_index.rs); older ones are read back from the file. The file is read
//! record by record on open, never whole. Every append is fsynced before openraft is told
//! it is flushed, unless `sync_every` says otherwise. An fsync runs on the blocking pool;
//! the mutex is never held across an `.await`.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::ops::RangeBounds;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, Entry, LogId, RaftLogReader, StorageError, StorageIOError, Vote};
use serde::{Deserialize, Serialize};

use super::frame;
use super::log_index::{LogIndex, Slot};
use super::{NodeId, TypeConfig};
use crate::util::writeback::Writeback;

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
    /// Opened to append and to read back entries no longer cached.
    file: File,
    /// Where the next record goes.
    file_len: u64,
    /// How far the kernel was asked to write the file back.
    wb: Writeback,
    index: LogIndex,
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

impl LogStore {
    /// The last entry's id (or the last purged one's): what a vote compares.
    pub(crate) fn last_log_id(&self) -> Option<openraft::LogId<super::NodeId>> {
        let inner = lock(&self.inner);
        inner.index.last_log_id().or(inner.last_purged)
    }
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
    /// At most `cache_bytes` of entries stay in memory.
    pub(crate) fn open(
        dir: &Path,
        sync_every: Option<std::time::Duration>,
        cache_bytes: usize,
    ) -> io::Result<LogStore> {
        std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
        let path = dir.join("log");
        let vote_path = dir.join("vote");
        let vote = match frame::read_single(&vote_path)? {
            Some(b) => Some(serde_json::from_slice(&b).map_err(|e| io_err(&vote_path, e))?),
            None => None,
        };
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        let mut index = LogIndex::new(cache_bytes);
        let mut last_purged = None;
        let mut records = 0u64;
        let scanned = frame::scan(&file, |at, rec| {
            let r = decode_record(rec)
                .map_err(|e| format!("record {records} (offset {at}) does not decode: {e}"))?;
            records += 1;
            match r {
                LogRecord::Entry(e) => {
                    let slot = Slot {
                        log_id: e.log_id,
                        at,
                        len: rec.len() as u32,
                    };
                    index.push(slot, Some(e));
                }
                LogRecord::Truncate(since) => index.truncate(since),
                LogRecord::Purge(id) => {
                    index.purge(id.index);
                    last_purged = Some(id);
                }
            }
            Ok(())
        })
        .map_err(|e| io_err(&path, format!("corrupt raft log: {e}")))?;
        if scanned.torn_tail {
            let size = file.metadata().map_err(|e| io_err(&path, e))?.len();
            tracing::warn!(
                path = %path.display(),
                dropped = size - scanned.valid_len,
                "raft log ends in a torn record (crash during an append); cutting it off"
            );
            file.set_len(scanned.valid_len)
                .map_err(|e| io_err(&path, e))?;
            file.sync_all().map_err(|e| io_err(&path, e))?;
        }
        let inner = Inner {
            path,
            file,
            file_len: scanned.valid_len,
            wb: Writeback::at(scanned.valid_len),
            index,
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

    /// Whether the group has no state here: no vote ever saved, no record in the log (a
    /// member that never took part).
    pub(crate) fn is_blank(&self) -> bool {
        let i = lock(&self.inner);
        i.vote.is_none() && i.records == 0
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
        // Each record's header in `heads` and the payload written after it.
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
        let mut at = self.file_len;
        let places: Vec<(u64, u32)> = parts
            .iter()
            .map(|(head, tail)| {
                let n = head.len() + tail.len();
                let place = (at, (n - frame::HEADER) as u32);
                at += n as u64;
                place
            })
            .collect();
        self.file_len = at;
        self.after_write(entries.len(), may_sync)?;
        for (e, (at, len)) in entries.into_iter().zip(places) {
            let slot = Slot {
                log_id: e.log_id,
                at,
                len,
            };
            self.index.push(slot, Some(e));
        }
        Ok(())
    }

    /// Writes `n` framed records in `buf`; fsyncs when `may_sync` and one is due.
    fn write_buf(&mut self, buf: Vec<u8>, n: usize, may_sync: bool) -> io::Result<()> {
        self.file
            .write_all(&buf)
            .map_err(|e| io_err(&self.path, e))?;
        self.file_len += buf.len() as u64;
        self.after_write(n, may_sync)
    }

    /// Counts `n` records written; fsyncs when `may_sync` and one is due.
    fn after_write(&mut self, n: usize, may_sync: bool) -> io::Result<()> {
        self.wb.wrote(&self.file, self.file_len);
        if may_sync && self.sync_due() {
            self.file.sync_data().map_err(|e| io_err(&self.path, e))?;
            self.last_sync = std::time::Instant::now();
        }
        self.records += n as u64;
        Ok(())
    }

    /// Rewrites the log file with only what is live, once it is mostly dead records. Live
    /// records are copied as they are from the old file, one at a time.
    fn maybe_compact(&mut self) -> io::Result<()> {
        let live = self.index.len() as u64 + 1;
        if self.records < 1024 || self.records < 2 * live {
            return Ok(());
        }
        let mut moved = std::collections::HashMap::with_capacity(self.index.len());
        let mut len = 0u64;
        let mut n = 0;
        frame::write_atomic_with(&self.path, |w| {
            let mut rec = Vec::new();
            if let Some(p) = self.last_purged {
                let mut buf = Vec::new();
                encode_record(&mut rec, &LogRecord::Purge(p)).map_err(io::Error::other)?;
                frame::encode(&mut buf, &rec)?;
                w.write_all(&buf)?;
                len += buf.len() as u64;
                n += 1;
            }
            for s in self.index.slots() {
                rec.resize(frame::HEADER + s.len as usize, 0);
                self.file.read_exact_at(&mut rec, s.at)?;
                w.write_all(&rec)?;
                moved.insert(s.log_id.index, len);
                len += rec.len() as u64;
                n += 1;
            }
            Ok(())
        })
        .map_err(|e| io_err(&self.path, e))?;
        self.file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| io_err(&self.path, e))?;
        self.file_len = len;
        self.index.relocate(|i| moved.get(&i).copied());
        self.records = n;
        Ok(())
    }

    /// Entry `s`, from memory (`cached`) or read back from the file.
    fn entry(&self, s: &Slot, cached: Option<&Entry<TypeConfig>>) -> io::Result<Entry<TypeConfig>> {
        if let Some(e) = cached {
            return Ok(e.clone());
        }
        let rec = frame::read_at(&self.file, s.at, s.len).map_err(|e| io_err(&self.path, e))?;
        match decode_record(&rec) {
            Ok(LogRecord::Entry(e)) if e.log_id == s.log_id => Ok(e),
            Ok(_) => Err(io_err(
                &self.path,
                format!("record at offset {} is not entry {}", s.at, s.log_id),
            )),
            Err(e) => Err(io_err(
                &self.path,
                format!("record at offset {} does not decode: {e}", s.at),
            )),
        }
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
        inner
            .index
            .range(range)
            .map(|(s, e)| inner.entry(s, e))
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| StorageIOError::read_logs(AnyError::new(&e)).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let inner = lock(&self.inner);
        let last = inner.index.last_log_id().or(inner.last_purged);
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
            inner.index.truncate(log_id.index);
            Ok(())
        })
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        self.blocking(move |inner| {
            inner.write_records(&[LogRecord::Purge(log_id)])?;
            inner.index.purge(log_id.index);
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

    /// Every entry the store holds, from memory or the file.
    fn all(store: &LogStore) -> Vec<Entry<TypeConfig>> {
        let inner = lock(&store.inner);
        inner
            .index
            .range(..)
            .map(|(s, e)| inner.entry(s, e).expect("entry"))
            .collect()
    }

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
        let store = LogStore::open(&dir, None, 1 << 20).expect("open");
        let got = all(&store);
        assert_eq!(got, vec![entry(1, b"old one"), entry(2, b"new two")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An append writes each entry's payload from the entry's own buffer: the file holds
    /// exactly the records a whole-buffer encoding gives, and they read back.
    #[test]
    fn an_append_writes_the_framed_records_and_they_read_back() {
        let dir = std::env::temp_dir().join(format!("natsd-logstore-vec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = LogStore::open(&dir, None, 1 << 20).expect("open");
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
        let store = LogStore::open(&dir, None, 1 << 20).expect("reopen");
        let got = all(&store);
        assert_eq!(got, entries);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Memory holds only the newest entries within the bound; the others read back from
    /// the file, also after the file is compacted and after a reopen.
    #[tokio::test]
    async fn entries_beyond_the_cache_read_back_from_the_file() {
        let dir = std::env::temp_dir().join(format!("natsd-logstore-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let payload = |i: u64| -> &'static [u8] {
            Box::leak(
                format!("entry number {i:05}")
                    .into_bytes()
                    .into_boxed_slice(),
            )
        };
        let mut store = LogStore::open(&dir, None, 1000).expect("open");
        let want: Vec<_> = (1..=1200).map(|i| entry(i, payload(i))).collect();
        for chunk in want.chunks(7) {
            lock(&store.inner)
                .append_entries(chunk.to_vec(), false)
                .expect("append");
            assert!(lock(&store.inner).index.cached_bytes() <= 1000);
        }
        assert_eq!(store.try_get_log_entries(..).await.expect("read"), want);
        assert_eq!(
            store.try_get_log_entries(3..=5).await.expect("read"),
            want[2..5]
        );
        // A purge far enough compacts the file: what is left still reads back.
        store.purge(want[1099].log_id).await.expect("purge");
        let size = std::fs::metadata(dir.join("log")).expect("log").len();
        assert!(size < 200 * 40, "not compacted: {size} bytes");
        assert_eq!(
            store.try_get_log_entries(..).await.expect("read"),
            want[1100..]
        );
        // A truncation, then appends at its place.
        store.truncate(want[1149].log_id).await.expect("truncate");
        let again: Vec<_> = (1150..=1160).map(|i| entry(i, b"again")).collect();
        lock(&store.inner)
            .append_entries(again.clone(), false)
            .expect("append");
        let mut expect = want[1100..1149].to_vec();
        expect.extend(again);
        assert_eq!(store.try_get_log_entries(..).await.expect("read"), expect);
        drop(store);
        let mut store = LogStore::open(&dir, None, 1000).expect("reopen");
        assert_eq!(store.try_get_log_entries(..).await.expect("read"), expect);
        assert!(lock(&store.inner).index.cached_bytes() <= 1000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
