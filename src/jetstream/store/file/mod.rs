//! The JetStream file store: one stream's messages in append-only segment files.
//!
//! Layout of the store's directory: `0000000001.blk`, `0000000002.blk`, … (segment files,
//! numbered in write order; only the last one is appended to). Every segment starts with
//! [`record::MAGIC`] and a SEQS record (sequence floor, last sequence, last timestamp), then
//! holds checksummed records (see [`record`]): messages, tombstones of removed messages,
//! SEQS records that move the floor (front removals, purges, compaction), and messages
//! erased in place.
//!
//! Memory: an index `seq → (segment, offset, length, subject id, ts)` and per-subject counts
//! with first/last sequences; payloads are read from the files on load (the unflushed write
//! buffer is read from memory).
//!
//! Reclaiming space: a segment is deleted when it holds no live message and is the oldest
//! one (so the tombstones it holds can only refer to messages already gone); a full purge,
//! or a compaction that empties the store, starts a new segment whose SEQS record carries
//! the sequences, then deletes every older segment.
//!
//! Recovery (`open`): segments are scanned in order; the first record that is cut short, has
//! an impossible length or a checksum mismatch ends that segment: it is truncated there with
//! a warning naming the file and offset. Later segments are still read.
//!
//! Durability: `store` appends to a buffer; `flush` writes it (pwrite) to the OS; `sync`
//! fsyncs every segment written since the last sync and the directory. `SyncPolicy::always`
//! makes each flush a sync; with a non-zero `SyncPolicy::interval`, one process-wide
//! background thread (`natsd-fs-sync`, started with the first such store) flushes and syncs
//! each store at most that long after its first unsynced append.
//!
//! Code: this module holds `FileStore`, the index and removals/limits; `subjects` the
//! per-subject state, `write` appends and flush/sync, `read` loads, `query` counts and state,
//! `recover` the startup scan, `compact` segment rewriting, `sync` the background syncer.

mod compact;
mod query;
mod read;
pub mod record;
mod recover;
mod seqfile;
mod subjects;
mod sync;
mod write;

use read::ReadAhead;
use subjects::Subjects;
use sync::Syncer;
use write::Writer;

use super::{
    file_msg_size, MsgStore, Purge, StoreError, StoreLimits, StoredMsg, StreamState, SyncPolicy,
};
use record::OVERHEAD;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Default segment size bound (a segment rolls over before it would pass it).
pub const DEFAULT_SEGMENT_SIZE: u64 = 8 << 20;

/// Tuning for [`FileStore::open_with`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStoreOptions {
    /// Segment size bound in bytes (a larger single record still gets its own segment).
    pub segment_size: u64,
}

impl Default for FileStoreOptions {
    fn default() -> Self {
        FileStoreOptions {
            segment_size: DEFAULT_SEGMENT_SIZE,
        }
    }
}

/// Where a live message is.
#[derive(Clone, Copy, Debug)]
struct Slot {
    seg: u32,
    off: u32,
    /// The record's length, with `HAS_HDR` set when the message has a non-empty header
    /// (records are far below 2 GiB; the flag keeps a slot at 24 bytes).
    len_hdr: u32,
    subj: u32,
    ts: i64,
}

const HAS_HDR: u32 = 1 << 31;

impl Slot {
    fn len_hdr(rec_len: u32, hdr_len: usize) -> u32 {
        rec_len | if hdr_len > 0 { HAS_HDR } else { 0 }
    }

    /// The record's length in its segment.
    fn len(&self) -> u32 {
        self.len_hdr & !HAS_HDR
    }

    /// What the message counts for against `max_bytes`: nats-server's `fileStoreMsgSize`
    /// (subject + header + data + its record framing) from our record's length.
    fn size(&self) -> u64 {
        let body = (self.len() as u64).saturating_sub(OVERHEAD as u64);
        body + if self.len_hdr & HAS_HDR != 0 { 34 } else { 30 }
    }
}

/// One segment file.
struct Seg {
    path: PathBuf,
    /// Live messages in it.
    live: u64,
    /// Lowest sequence of the message records in its file, live or dead (0: none).
    first_seq: u64,
    /// Highest timestamp of any message written to it (i64::MIN: none).
    max_ts: i64,
    /// Record bytes of its live messages.
    live_bytes: u64,
    /// File length once sealed (the write segment's length is the writer's).
    size: u64,
    /// Its file still holds records of removed messages (which tombstones elsewhere hide).
    has_dead: bool,
    /// Tombstone records in its file.
    dels: u64,
}

struct Inner {
    dir: PathBuf,
    limits: StoreLimits,
    policy: SyncPolicy,
    seg_size: u64,
    closed: bool,

    index: BTreeMap<u64, Slot>,
    subjects: Subjects,
    msgs: u64,
    bytes: u64,
    last_seq: u64,
    last_ts: i64,
    /// Every sequence below is gone.
    floor: u64,
    /// The floor as last written to the current buffer/file.
    floor_written: u64,

    segs: BTreeMap<u32, Seg>,
    writer: Option<Writer>,
    readers: HashMap<u32, File>,
    ahead: ReadAhead,
    /// Segments written (or erased into) since the last fsync.
    /// Segments written (or erased into) and not yet confirmed fsynced, with the write
    /// generation of their latest change.
    unsynced: BTreeMap<u32, u64>,
    /// The directory changed (files created or removed) at this generation (0: clean).
    dir_dirty: u64,
    /// Counts changes that need an fsync.
    sync_gen: u64,
    /// When the oldest not-yet-synced append happened.
    dirty_since: Option<Instant>,
    /// Segments that lost messages since the last compaction check.
    touched: BTreeSet<u32>,
    /// The background syncer, when `policy.interval` is non-zero.
    syncer: Option<Arc<Syncer>>,
    /// The `last_seq` file (`seqfile.rs`), and the generation of its last unsynced write
    /// (0: clean).
    seqfile: Option<seqfile::SeqFile>,
    seq_dirty: u64,
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Io(format!("{what} {}: {e}", path.display()))
}

fn seg_path(dir: &Path, idx: u32) -> PathBuf {
    dir.join(format!("{idx:010}.blk"))
}

fn parse_seg_name(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".blk")?;
    if stem.len() != 10 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// `None` for "every subject" (`None`, empty, `>`).
fn norm(filter: Option<&str>) -> Option<&str> {
    match filter {
        None | Some("") | Some(">") => None,
        Some(f) => Some(f),
    }
}

/// A JetStream message store in segment files under one directory. See the module docs.
pub struct FileStore {
    inner: Arc<Mutex<Inner>>,
}

impl FileStore {
    /// Open (create or recover) the store in `dir` with the default segment size.
    pub fn open(
        dir: &Path,
        limits: StoreLimits,
        sync: SyncPolicy,
    ) -> Result<FileStore, StoreError> {
        Self::open_with(dir, limits, sync, FileStoreOptions::default())
    }

    /// [`FileStore::open`] with tuning options (segment size).
    pub fn open_with(
        dir: &Path,
        limits: StoreLimits,
        sync: SyncPolicy,
        opts: FileStoreOptions,
    ) -> Result<FileStore, StoreError> {
        // Offsets are u32: segments stay well below 4 GiB.
        let seg_size = opts.segment_size.clamp(1024, 1 << 30);
        let mut inner = Inner::recover(dir, limits, sync, seg_size)?;
        // Recovered state may be over (changed) limits.
        inner.enforce_limits(None);
        inner.drop_front_segments();
        inner.write_out()?;
        if !sync.interval.is_zero() {
            inner.syncer = Some(Syncer::get()?);
        }
        let syncer = inner.syncer.clone();
        let inner = Arc::new(Mutex::new(inner));
        if let Some(s) = syncer {
            s.register(Arc::downgrade(&inner));
        }
        Ok(FileStore { inner })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The directory this store keeps its files in.
    pub fn dir(&self) -> PathBuf {
        self.lock().dir.clone()
    }

    /// Number of segment files (for tests and monitoring).
    pub fn segment_count(&self) -> usize {
        self.lock().segs.len()
    }

    /// Moves the store's directory to `to` (which must not exist, or be an empty
    /// directory), everything synced first; the store goes on there. A replicated stream's
    /// copy is rebuilt from a snapshot in a store of its own and moved in place at the end.
    pub fn move_to(&self, to: &Path) -> Result<(), StoreError> {
        MsgStore::sync(self)?;
        let mut g = self.lock();
        if g.closed {
            return Err(StoreError::Closed);
        }
        std::fs::rename(&g.dir, to).map_err(|e| {
            StoreError::Io(format!(
                "moving {} to {}: {e}",
                g.dir.display(),
                to.display()
            ))
        })?;
        g.dir = to.to_path_buf();
        if let Some(parent) = to.parent() {
            File::open(parent)
                .and_then(|f| f.sync_all())
                .map_err(|e| io_err("sync", parent, e))?;
        }
        Ok(())
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        let mut g = self.lock();
        if !g.closed {
            if let Err(e) = g.write_out() {
                tracing::warn!(
                    "JetStream file store {}: flush on close failed: {e}",
                    g.dir.display()
                );
            }
        }
    }
}

impl Inner {
    fn check_open(&self) -> Result<(), StoreError> {
        if self.closed {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }

    fn first_seq(&self) -> u64 {
        match self.index.first_key_value() {
            Some((&seq, _)) => seq,
            None if self.last_seq == 0 && self.floor == 0 => 0,
            None => self.floor.max(self.last_seq + 1),
        }
    }

    /// Remove messages over the limits, oldest first: per subject (only `only` if given),
    /// then by count and bytes.
    fn enforce_limits(&mut self, only: Option<u32>) {
        let per = self.limits.max_msgs_per_subject;
        if per > 0 {
            let ids: Vec<u32> = match only {
                Some(id) => vec![id],
                None => (0..self.subjects.infos.len() as u32).collect(),
            };
            for id in ids {
                while self.subjects.get(id).is_some_and(|i| i.count > per as u64) {
                    let Some(seq) = self.first_of(id) else { break };
                    if self.remove_internal(seq).is_none() {
                        break;
                    }
                }
            }
        }
        if self.limits.max_msgs > 0 {
            while self.msgs > self.limits.max_msgs as u64 {
                if !self.remove_first() {
                    break;
                }
            }
        }
        if self.limits.max_bytes > 0 {
            while self.bytes > self.limits.max_bytes as u64 {
                if !self.remove_first() {
                    break;
                }
            }
        }
    }

    fn remove_first(&mut self) -> bool {
        match self.index.first_key_value() {
            Some((&seq, _)) => self.remove_internal(seq).is_some(),
            None => false,
        }
    }

    /// Drop `seq` from the index and counts; record it (a floor move if it was the first
    /// message, a tombstone otherwise). Segment files are not touched.
    fn remove_internal(&mut self, seq: u64) -> Option<Slot> {
        let is_first = self.index.first_key_value().map(|(k, _)| *k) == Some(seq);
        let slot = self.index.remove(&seq)?;
        self.msgs -= 1;
        self.bytes = self.bytes.saturating_sub(slot.size());
        self.subjects.remove(slot.subj, seq);
        if let Some(s) = self.segs.get_mut(&slot.seg) {
            s.live = s.live.saturating_sub(1);
            s.live_bytes = s.live_bytes.saturating_sub(slot.len() as u64);
            s.has_dead = true;
        }
        self.touched.insert(slot.seg);
        if is_first {
            self.floor = match self.index.first_key_value() {
                Some((&k, _)) => k,
                None => self.last_seq + 1,
            };
        } else {
            self.append_tombstone(seq);
        }
        self.mark_dirty();
        Some(slot)
    }

    fn append_tombstone(&mut self, seq: u64) {
        // A roll failure here leaves the tombstone in the current segment (it may pass the
        // size bound by one record); the error surfaces on the next flush.
        if let Err(e) = self.maybe_roll(OVERHEAD) {
            tracing::warn!("JetStream file store {}: {e}", self.dir.display());
        }
        if let Some(w) = self.writer.as_mut() {
            record::encode_del(&mut w.buf, seq);
            let idx = w.idx;
            if let Some(s) = self.segs.get_mut(&idx) {
                s.dels += 1;
            }
        }
    }

    /// Delete the oldest segments while they hold no live message (never the write segment),
    /// then compact the sparse ones that lost messages.
    fn drop_front_segments(&mut self) {
        let widx = self.writer.as_ref().map(|w| w.idx);
        while let Some((&idx, seg)) = self.segs.first_key_value() {
            if Some(idx) == widx || seg.live > 0 {
                break;
            }
            if let Err(e) = std::fs::remove_file(&seg.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(
                        "JetStream file store: cannot remove empty segment {}: {e}",
                        seg.path.display()
                    );
                    break;
                }
            }
            self.segs.remove(&idx);
            self.readers.remove(&idx);
            self.ahead.forget_segment(idx);
            self.unsynced.remove(&idx);
            self.note_dir();
        }
        self.maybe_compact();
    }

    /// Start a fresh segment carrying the sequences, then delete every older one (the store
    /// is empty).
    fn replace_all_segments(&mut self) -> Result<(), StoreError> {
        let next = self
            .writer()?
            .idx
            .checked_add(1)
            .ok_or_else(|| StoreError::Io("segment numbers exhausted".to_string()))?;
        self.write_out()?;
        self.seal_writer();
        self.new_segment(next)?;
        self.write_out()?;
        let old: Vec<u32> = self.segs.keys().copied().filter(|&k| k != next).collect();
        for idx in old {
            if let Some(seg) = self.segs.get(&idx) {
                if let Err(e) = std::fs::remove_file(&seg.path) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(io_err("remove", &seg.path, e));
                    }
                }
            }
            self.segs.remove(&idx);
            self.readers.remove(&idx);
            self.ahead.forget_segment(idx);
            self.unsynced.remove(&idx);
        }
        self.note_dir();
        Ok(())
    }

    fn remove(&mut self, seq: u64, erase: bool) -> Result<bool, StoreError> {
        self.check_open()?;
        let Some(slot) = self.remove_internal(seq) else {
            return Ok(false);
        };
        if erase {
            // The tombstone (or floor) goes to the OS first, then the bytes are overwritten.
            self.write_out()?;
            let rec = record::encode_erased(slot.len() as usize, seq);
            self.ahead.forget_segment(slot.seg);
            let path = match self.segs.get(&slot.seg) {
                Some(s) => s.path.clone(),
                None => seg_path(&self.dir, slot.seg),
            };
            match self.writer.as_ref() {
                Some(w) if w.idx == slot.seg => w.file.write_all_at(&rec, slot.off as u64),
                _ => OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.write_all_at(&rec, slot.off as u64)),
            }
            .map_err(|e| io_err("erase in", &path, e))?;
            self.note_written(slot.seg);
            self.mark_dirty();
        }
        self.drop_front_segments();
        Ok(true)
    }

    /// Remove everything below `seq`; returns how many went.
    fn compact(&mut self, seq: u64) -> Result<u64, StoreError> {
        let mut n = 0;
        while let Some((&first, _)) = self.index.first_key_value() {
            if first >= seq {
                break;
            }
            self.remove_internal(first);
            n += 1;
        }
        if seq > self.last_seq + 1 {
            self.last_seq = seq - 1;
        }
        self.floor = self.floor.max(seq);
        if self.index.is_empty() {
            self.replace_all_segments()?;
        } else {
            self.drop_front_segments();
        }
        Ok(n)
    }

    fn purge(&mut self, p: &Purge) -> Result<u64, StoreError> {
        self.check_open()?;
        let keep = p.keep.filter(|&k| k > 0);
        let seq = p.seq.filter(|&s| s > 0);
        match norm(p.filter.as_deref()) {
            None => match (seq, keep) {
                (Some(s), _) => self.compact(s),
                (None, Some(k)) => {
                    if k >= self.msgs {
                        return Ok(0);
                    }
                    let Some(&target) = self.index.keys().rev().nth(k as usize - 1) else {
                        return Ok(0);
                    };
                    self.compact(target)
                }
                (None, None) => {
                    let n = self.msgs;
                    self.index.clear();
                    self.subjects.clear();
                    self.msgs = 0;
                    self.bytes = 0;
                    self.floor = self.floor.max(self.last_seq + 1);
                    self.replace_all_segments()?;
                    Ok(n)
                }
            },
            Some(f) => {
                let (mask, n) = self.subjects.mask(f);
                if n == 0 {
                    return Ok(0);
                }
                let upper = seq.unwrap_or(u64::MAX);
                let mut doomed: Vec<u64> = self
                    .index
                    .range(..upper)
                    .filter(|(_, s)| mask[s.subj as usize])
                    .map(|(k, _)| *k)
                    .collect();
                if let Some(k) = keep {
                    let k = k.min(doomed.len() as u64) as usize;
                    doomed.truncate(doomed.len() - k);
                }
                let mut n = 0;
                for s in doomed {
                    if self.remove_internal(s).is_some() {
                        n += 1;
                    }
                }
                if self.index.is_empty() && n > 0 {
                    self.replace_all_segments()?;
                } else {
                    self.drop_front_segments();
                }
                Ok(n)
            }
        }
    }

    fn expire(&mut self, now: i64) -> u64 {
        if self.closed || self.limits.max_age.is_zero() {
            return 0;
        }
        let age = i64::try_from(self.limits.max_age.as_nanos()).unwrap_or(i64::MAX);
        let cutoff = now.saturating_sub(age);
        let mut n = 0;
        while let Some((&seq, slot)) = self.index.first_key_value() {
            if slot.ts > cutoff {
                break;
            }
            self.remove_internal(seq);
            n += 1;
        }
        if n > 0 {
            self.drop_front_segments();
        }
        n
    }

    /// See [`MsgStore::skip_to`]: the sequences are recorded in a SEQS record (recovery
    /// takes the last sequence from it; the skipped ones have no record to hide).
    fn skip_to(&mut self, next: u64, last_ts: i64) -> Result<(), StoreError> {
        self.check_open()?;
        if next <= self.last_seq + 1 {
            return Ok(());
        }
        self.last_seq = next - 1;
        self.last_ts = last_ts;
        if self.index.is_empty() {
            self.floor = self.floor.max(next);
        }
        self.maybe_roll(OVERHEAD + 8)?;
        let (floor, last, ts) = (self.floor, self.last_seq, self.last_ts);
        record::encode_seqs(&mut self.writer()?.buf, floor, last, ts);
        self.floor_written = floor;
        self.mark_dirty();
        Ok(())
    }

    fn delete(&mut self) -> Result<(), StoreError> {
        self.check_open()?;
        self.closed = true;
        self.writer = None;
        self.readers.clear();
        self.ahead.forget();
        self.index.clear();
        self.subjects.clear();
        for seg in std::mem::take(&mut self.segs).into_values() {
            if let Err(e) = std::fs::remove_file(&seg.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(io_err("remove", &seg.path, e));
                }
            }
        }
        self.seqfile = None;
        let seqs = seqfile::path(&self.dir);
        if let Err(e) = std::fs::remove_file(&seqs) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(io_err("remove", &seqs, e));
            }
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::debug!(
                "JetStream file store: keeping directory {}: {e}",
                self.dir.display()
            );
        }
        Ok(())
    }
}

impl MsgStore for FileStore {
    fn msg_size(&self, subject: &str, header: Option<&[u8]>, data: &[u8]) -> u64 {
        file_msg_size(subject, header, data)
    }

    fn store(
        &self,
        subject: &str,
        header: Option<&[u8]>,
        data: &[u8],
        ts: i64,
    ) -> Result<u64, StoreError> {
        self.lock().store(subject, header, data, ts)
    }

    fn load(&self, seq: u64) -> Result<StoredMsg, StoreError> {
        self.lock().load(seq)
    }

    fn load_next(&self, filter: Option<&str>, start: u64) -> Result<StoredMsg, StoreError> {
        self.lock().load_next(filter, start)
    }

    fn load_last(&self, filter: Option<&str>) -> Result<StoredMsg, StoreError> {
        self.lock().load_last(filter)
    }

    fn remove(&self, seq: u64, erase: bool) -> Result<bool, StoreError> {
        self.lock().remove(seq, erase)
    }

    fn purge(&self, p: &Purge) -> Result<u64, StoreError> {
        self.lock().purge(p)
    }

    fn state(&self) -> StreamState {
        self.lock().state()
    }

    fn subjects(&self, filter: Option<&str>) -> BTreeMap<String, u64> {
        self.lock().subjects(filter)
    }

    fn num_pending(&self, filter: Option<&str>, start: u64, last_per_subject: bool) -> u64 {
        self.lock().num_pending(filter, start, last_per_subject)
    }

    fn seq_for_time(&self, ts: i64) -> u64 {
        let g = self.lock();
        if g.closed {
            return 0;
        }
        g.seq_for_time(ts)
    }

    fn update_limits(&self, limits: StoreLimits) -> Result<(), StoreError> {
        let mut g = self.lock();
        g.check_open()?;
        g.limits = limits;
        g.enforce_limits(None);
        g.drop_front_segments();
        Ok(())
    }

    fn expire(&self, now: i64) -> u64 {
        self.lock().expire(now)
    }

    fn flush(&self) -> Result<(), StoreError> {
        let mut g = self.lock();
        g.check_open()?;
        if g.policy.always {
            g.sync_all()
        } else {
            g.write_out()
        }
    }

    fn sync(&self) -> Result<(), StoreError> {
        let mut g = self.lock();
        g.check_open()?;
        g.sync_all()
    }

    fn delete(&self) -> Result<(), StoreError> {
        self.lock().delete()
    }

    fn skip_to(&self, next: u64, last_ts: i64) -> Result<(), StoreError> {
        self.lock().skip_to(next, last_ts)
    }
}
