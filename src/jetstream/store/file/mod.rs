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

mod compact;
pub mod record;
mod recover;
mod sync;

use sync::Syncer;

use super::{
    file_msg_size, Discard, MsgStore, Purge, StoreError, StoreLimits, StoredMsg, StreamState,
    SyncPolicy,
};
use crate::subject::{has_wildcard, pattern_matches};
use bytes::Bytes;
use record::{RecHdr, HDR, MAGIC, MAX_RECORD, OVERHEAD};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Default segment size bound (a segment rolls over before it would pass it).
pub const DEFAULT_SEGMENT_SIZE: u64 = 8 << 20;
/// Buffered appends are written to the OS once they reach this size, flush or not.
const WRITE_BUF_LIMIT: usize = 1 << 20;
/// Open read handles kept for older segments.
const READERS_CACHED: usize = 8;

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

struct SubjInfo {
    name: Arc<str>,
    count: u64,
    /// Lower bound of the first sequence when `first_stale`, exact otherwise.
    first: u64,
    /// Upper bound of the last sequence when `last_stale`, exact otherwise.
    last: u64,
    first_stale: bool,
    last_stale: bool,
}

/// Subject interning with per-subject counts.
#[derive(Default)]
struct Subjects {
    ids: HashMap<Arc<str>, u32>,
    infos: Vec<Option<SubjInfo>>,
    free: Vec<u32>,
}

impl Subjects {
    fn add(&mut self, subject: &str, seq: u64) -> u32 {
        if let Some(&id) = self.ids.get(subject) {
            if let Some(Some(i)) = self.infos.get_mut(id as usize) {
                i.count += 1;
                i.last = seq;
                i.last_stale = false;
                return id;
            }
        }
        let name: Arc<str> = Arc::from(subject);
        let info = SubjInfo {
            name: name.clone(),
            count: 1,
            first: seq,
            last: seq,
            first_stale: false,
            last_stale: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.infos[id as usize] = Some(info);
                id
            }
            None => {
                self.infos.push(Some(info));
                (self.infos.len() - 1) as u32
            }
        };
        self.ids.insert(name, id);
        id
    }

    fn remove(&mut self, id: u32, seq: u64) {
        let Some(slot) = self.infos.get_mut(id as usize) else {
            return;
        };
        let Some(info) = slot.as_mut() else {
            return;
        };
        info.count = info.count.saturating_sub(1);
        if info.count == 0 {
            self.ids.remove(&info.name);
            *slot = None;
            self.free.push(id);
            return;
        }
        if seq == info.first {
            info.first = seq + 1;
            info.first_stale = true;
        }
        if seq == info.last {
            info.last = seq - 1;
            info.last_stale = true;
        }
    }

    fn get(&self, id: u32) -> Option<&SubjInfo> {
        self.infos.get(id as usize).and_then(Option::as_ref)
    }

    fn id(&self, subject: &str) -> Option<u32> {
        self.ids.get(subject).copied()
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    /// Subject ids matching a (normalised, non-`None`) filter, as a mask by id.
    fn mask(&self, filter: &str) -> (Vec<bool>, usize) {
        let mut mask = vec![false; self.infos.len()];
        let mut n = 0;
        if !has_wildcard(filter.as_bytes()) {
            if let Some(id) = self.id(filter) {
                mask[id as usize] = true;
                n = 1;
            }
            return (mask, n);
        }
        for (id, info) in self.infos.iter().enumerate() {
            if let Some(info) = info {
                if pattern_matches(filter.as_bytes(), info.name.as_bytes()) {
                    mask[id] = true;
                    n += 1;
                }
            }
        }
        (mask, n)
    }

    fn clear(&mut self) {
        *self = Subjects::default();
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

/// The segment being appended to.
struct Writer {
    idx: u32,
    file: File,
    /// Bytes already in the file.
    flushed: u64,
    buf: Vec<u8>,
}

impl Writer {
    fn size(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }
}

/// Read-ahead for sequential loads from files: a load that starts where the previous one
/// ended reads a whole chunk, and the following loads are served from it. Random loads read
/// just their record.
#[derive(Default)]
struct ReadAhead {
    valid: bool,
    seg: u32,
    off: u64,
    buf: Vec<u8>,
    last: Option<(u32, u64)>,
}

const READ_AHEAD: usize = 64 << 10;

impl ReadAhead {
    fn forget(&mut self) {
        self.valid = false;
        self.last = None;
    }

    fn forget_segment(&mut self, seg: u32) {
        if self.seg == seg || self.last.is_some_and(|(s, _)| s == seg) {
            self.forget();
        }
    }

    /// Fill `out` from `file` at `off`, never using bytes at or past `limit`.
    fn read(
        &mut self,
        file: &File,
        seg: u32,
        off: u64,
        limit: u64,
        out: &mut [u8],
    ) -> std::io::Result<()> {
        let len = out.len();
        let end = off + len as u64;
        let sequential = self
            .last
            .is_some_and(|(s, e)| s == seg && off >= e && off - e <= 4096);
        self.last = Some((seg, end));
        if self.valid
            && self.seg == seg
            && off >= self.off
            && end <= self.off + self.buf.len() as u64
        {
            let at = (off - self.off) as usize;
            out.copy_from_slice(&self.buf[at..at + len]);
            return Ok(());
        }
        if !sequential || len >= READ_AHEAD {
            return file.read_exact_at(out, off);
        }
        self.valid = false;
        let want = (READ_AHEAD as u64).min(limit.saturating_sub(off)) as usize;
        self.buf.resize(want.max(len), 0);
        let mut n = 0;
        while n < self.buf.len() {
            match file.read_at(&mut self.buf[n..], off + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if n < len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.buf.truncate(n.min(want.max(len)));
        out.copy_from_slice(&self.buf[..len]);
        (self.valid, self.seg, self.off) = (true, seg, off);
        Ok(())
    }
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
}

/// A file to fsync, opened under the store's lock.
struct ToSync {
    /// The segment, or `None` for the directory.
    seg: Option<u32>,
    path: PathBuf,
    file: File,
}

fn fsync_files(files: &[ToSync]) -> Result<(), StoreError> {
    for f in files {
        let r = match f.seg {
            Some(_) => f.file.sync_data(),
            None => f.file.sync_all(),
        };
        r.map_err(|e| io_err("fsync", &f.path, e))?;
    }
    Ok(())
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

    fn writer(&mut self) -> Result<&mut Writer, StoreError> {
        self.writer.as_mut().ok_or(StoreError::Closed)
    }

    fn first_seq(&self) -> u64 {
        match self.index.first_key_value() {
            Some((&seq, _)) => seq,
            None if self.last_seq == 0 && self.floor == 0 => 0,
            None => self.floor.max(self.last_seq + 1),
        }
    }

    /// Create segment `idx` as the new write segment (its SEQS record buffered).
    fn new_segment(&mut self, idx: u32) -> Result<(), StoreError> {
        let path = seg_path(&self.dir, idx);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| io_err("create", &path, e))?;
        let mut buf = Vec::with_capacity(64 << 10);
        buf.extend_from_slice(MAGIC);
        record::encode_seqs(&mut buf, self.floor, self.last_seq, self.last_ts);
        self.floor_written = self.floor;
        self.writer = Some(Writer {
            idx,
            file,
            flushed: 0,
            buf,
        });
        self.segs.insert(
            idx,
            Seg {
                path,
                live: 0,
                first_seq: 0,
                max_ts: i64::MIN,
                live_bytes: 0,
                size: 0,
                has_dead: false,
                dels: 0,
            },
        );
        self.note_dir();
        self.mark_dirty();
        Ok(())
    }

    /// Roll to a new segment if appending `rec_len` bytes would pass the size bound.
    fn maybe_roll(&mut self, rec_len: usize) -> Result<(), StoreError> {
        let seg_size = self.seg_size;
        let w = self.writer()?;
        let header = (MAGIC.len() + OVERHEAD + 8) as u64;
        if w.size() <= header || w.size() + rec_len as u64 <= seg_size {
            return Ok(());
        }
        let next = w
            .idx
            .checked_add(1)
            .ok_or_else(|| StoreError::Io("segment numbers exhausted".to_string()))?;
        self.write_out()?;
        self.seal_writer();
        self.new_segment(next)
    }

    /// Record the write segment's final length before a new one takes over.
    fn seal_writer(&mut self) {
        if let Some(w) = self.writer.as_ref() {
            let (idx, size) = (w.idx, w.size());
            if let Some(s) = self.segs.get_mut(&idx) {
                s.size = size;
            }
        }
    }

    fn mark_dirty(&mut self) {
        if self.dirty_since.is_none() {
            self.dirty_since = Some(Instant::now());
            if let Some(s) = &self.syncer {
                s.wake();
            }
        }
    }

    /// Hand the write buffer to the OS (with a SEQS record first if the floor moved).
    fn write_out(&mut self) -> Result<(), StoreError> {
        let (floor, last_seq, last_ts) = (self.floor, self.last_seq, self.last_ts);
        let floor_moved = floor > self.floor_written;
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        if floor_moved {
            record::encode_seqs(&mut w.buf, floor, last_seq, last_ts);
            self.floor_written = floor;
        }
        if w.buf.is_empty() {
            return Ok(());
        }
        w.file
            .write_all_at(&w.buf, w.flushed)
            .map_err(|e| io_err("write", &seg_path(&self.dir, w.idx), e))?;
        w.flushed += w.buf.len() as u64;
        w.buf.clear();
        if w.buf.capacity() > 4 * WRITE_BUF_LIMIT {
            w.buf.shrink_to(WRITE_BUF_LIMIT);
        }
        let idx = w.idx;
        self.note_written(idx);
        self.mark_dirty();
        Ok(())
    }

    fn note_written(&mut self, idx: u32) {
        self.sync_gen += 1;
        self.unsynced.insert(idx, self.sync_gen);
    }

    fn note_dir(&mut self) {
        self.sync_gen += 1;
        self.dir_dirty = self.sync_gen;
    }

    /// Flush, then fsync every segment written since the last sync and the directory.
    fn sync_all(&mut self) -> Result<(), StoreError> {
        let (files, gen) = self.prepare_sync()?;
        if let Err(e) = fsync_files(&files) {
            self.sync_failed();
            return Err(e);
        }
        self.sync_done(&files, gen);
        Ok(())
    }

    /// Flush, and open what must be fsynced (segments written since the last confirmed sync,
    /// the directory if files came or went), with the generation they cover. The fsyncs can
    /// run without the store's lock (`fsync_files`); `sync_done` then clears what they
    /// covered. Until then the bookkeeping stays, so a `sync` meanwhile fsyncs again itself.
    fn prepare_sync(&mut self) -> Result<(Vec<ToSync>, u64), StoreError> {
        self.write_out()?;
        let widx = self.writer.as_ref().map(|w| w.idx);
        let mut files = Vec::new();
        for &idx in self.unsynced.keys() {
            let path = match self.segs.get(&idx) {
                Some(s) => s.path.clone(),
                None => continue,
            };
            let file = match self.writer.as_ref().filter(|_| Some(idx) == widx) {
                Some(w) => w.file.try_clone(),
                None => File::open(&path),
            }
            .map_err(|e| io_err("open", &path, e))?;
            files.push(ToSync {
                seg: Some(idx),
                path,
                file,
            });
        }
        if self.dir_dirty > 0 {
            let file = File::open(&self.dir).map_err(|e| io_err("open", &self.dir, e))?;
            files.push(ToSync {
                seg: None,
                path: self.dir.clone(),
                file,
            });
        }
        Ok((files, self.sync_gen))
    }

    /// The fsyncs of `prepare_sync` at generation `gen` succeeded.
    fn sync_done(&mut self, files: &[ToSync], gen: u64) {
        for f in files {
            match f.seg {
                Some(idx) => {
                    if self.unsynced.get(&idx).is_some_and(|&g| g <= gen) {
                        self.unsynced.remove(&idx);
                    }
                }
                None => {
                    if self.dir_dirty <= gen {
                        self.dir_dirty = 0;
                    }
                }
            }
        }
        let clean = self.unsynced.is_empty()
            && self.dir_dirty == 0
            && self.writer.as_ref().is_none_or(|w| w.buf.is_empty());
        if clean {
            self.dirty_since = None;
        } else {
            // Changed while the fsyncs ran: due again one interval from now.
            self.dirty_since = Some(Instant::now());
            if let Some(s) = &self.syncer {
                s.wake();
            }
        }
    }

    /// Retried after another interval (or at the next `sync`), not in a tight loop.
    fn sync_failed(&mut self) {
        self.dirty_since = Some(Instant::now());
        if let Some(s) = &self.syncer {
            s.wake();
        }
    }

    fn store(
        &mut self,
        subject: &str,
        header: Option<&[u8]>,
        data: &[u8],
        ts: i64,
    ) -> Result<u64, StoreError> {
        self.check_open()?;
        if subject.is_empty() || subject.len() > u16::MAX as usize {
            return Err(StoreError::Io(format!(
                "bad subject length {} for the file store",
                subject.len()
            )));
        }
        let rec_len = record::msg_record_len(subject, header, data);
        if rec_len > MAX_RECORD {
            return Err(StoreError::Io(format!(
                "message of {rec_len} bytes is over the file store's record limit of {MAX_RECORD}"
            )));
        }
        let size = file_msg_size(subject, header, data);
        if self.limits.discard == Discard::New {
            if self.limits.max_msgs > 0 && self.msgs + 1 > self.limits.max_msgs as u64 {
                return Err(StoreError::MaxMsgs);
            }
            if self.limits.max_bytes > 0 && self.bytes + size > self.limits.max_bytes as u64 {
                return Err(StoreError::MaxBytes);
            }
        }
        if self.writer()?.buf.len() >= WRITE_BUF_LIMIT {
            self.write_out()?;
        }
        self.maybe_roll(rec_len)?;
        let seq = self.last_seq + 1;
        let w = self.writer()?;
        let off = w.size();
        let seg = w.idx;
        record::encode_msg(&mut w.buf, seq, ts, subject, header, data);
        let subj = self.subjects.add(subject, seq);
        self.index.insert(
            seq,
            Slot {
                seg,
                off: off as u32,
                len_hdr: Slot::len_hdr(rec_len as u32, header.map_or(0, <[u8]>::len)),
                subj,
                ts,
            },
        );
        if let Some(s) = self.segs.get_mut(&seg) {
            s.live += 1;
            s.live_bytes += rec_len as u64;
            if s.first_seq == 0 {
                s.first_seq = seq;
            }
            s.max_ts = s.max_ts.max(ts);
        }
        self.msgs += 1;
        self.bytes += size;
        self.last_seq = seq;
        self.last_ts = ts;
        self.mark_dirty();
        self.enforce_limits(Some(subj));
        self.drop_front_segments();
        Ok(seq)
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

    /// The exact first sequence of subject `id`.
    fn first_of(&mut self, id: u32) -> Option<u64> {
        let info = self.subjects.get(id)?;
        if !info.first_stale {
            return Some(info.first);
        }
        let (from, to) = (info.first, info.last);
        if from > to {
            return None;
        }
        let seq = self
            .index
            .range(from..=to)
            .find(|(_, s)| s.subj == id)
            .map(|(k, _)| *k)?;
        if let Some(Some(i)) = self.subjects.infos.get_mut(id as usize) {
            i.first = seq;
            i.first_stale = false;
        }
        Some(seq)
    }

    /// The exact last sequence of subject `id`.
    fn last_of(&mut self, id: u32) -> Option<u64> {
        let info = self.subjects.get(id)?;
        if !info.last_stale {
            return Some(info.last);
        }
        let (from, to) = (info.first, info.last);
        if from > to {
            return None;
        }
        let seq = self
            .index
            .range(from..=to)
            .rev()
            .find(|(_, s)| s.subj == id)
            .map(|(k, _)| *k)?;
        if let Some(Some(i)) = self.subjects.infos.get_mut(id as usize) {
            i.last = seq;
            i.last_stale = false;
        }
        Some(seq)
    }

    /// Read and check the record of a live message.
    fn read_record(&mut self, slot: &Slot) -> Result<Vec<u8>, StoreError> {
        let off = slot.off as u64;
        let len = slot.len() as usize;
        let mut rec = vec![0u8; len];
        let path = match self.segs.get(&slot.seg) {
            Some(s) => s.path.clone(),
            None => seg_path(&self.dir, slot.seg),
        };
        let seg = slot.seg;
        let in_writer = self.writer.as_ref().is_some_and(|w| w.idx == seg);
        if let Some(w) = self
            .writer
            .as_ref()
            .filter(|w| in_writer && off >= w.flushed)
        {
            let start = (off - w.flushed) as usize;
            let src = w.buf.get(start..start + len).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "{}: offset {off} beyond the write buffer",
                    path.display()
                ))
            })?;
            rec.copy_from_slice(src);
        } else {
            if !in_writer && !self.readers.contains_key(&seg) {
                if self.readers.len() >= READERS_CACHED {
                    self.readers.clear();
                    self.ahead.forget();
                }
                let f = File::open(&path).map_err(|e| io_err("open", &path, e))?;
                self.readers.insert(seg, f);
            }
            // The bytes a file may be read up to (the write segment: what was written).
            let (file, limit) = match self.writer.as_ref().filter(|_| in_writer) {
                Some(w) => (Some(&w.file), w.flushed),
                None => (self.readers.get(&seg), u64::MAX),
            };
            let file =
                file.ok_or_else(|| io_err("read", &path, std::io::ErrorKind::NotFound.into()))?;
            self.ahead
                .read(file, seg, off, limit, &mut rec)
                .map_err(|e| io_err("read", &path, e))?;
        }
        if !record::verify(&rec) {
            return Err(StoreError::Corrupt(format!(
                "{}: checksum mismatch in the record at offset {off}",
                path.display()
            )));
        }
        Ok(rec)
    }

    fn load(&mut self, seq: u64) -> Result<StoredMsg, StoreError> {
        self.check_open()?;
        let slot = *self.index.get(&seq).ok_or(StoreError::NotFound)?;
        let rec = self.read_record(&slot)?;
        let bad = |why: &str| {
            StoreError::Corrupt(format!(
                "segment {} offset {}: {why} (expected message {seq})",
                slot.seg, slot.off
            ))
        };
        let h = RecHdr::parse(&rec).ok_or_else(|| bad("short record"))?;
        h.check().map_err(bad)?;
        if h.kind != record::KIND_MSG || h.seq != seq || h.len != slot.len() {
            return Err(bad("record does not match the index"));
        }
        let (s, hl, _) = h.parts();
        let end = rec.len() - 4;
        let b = Bytes::from(rec);
        let subject = String::from_utf8_lossy(&b[HDR..HDR + s]).into_owned();
        let header = (h.flags & record::FLAG_HDR != 0).then(|| b.slice(HDR + s..HDR + s + hl));
        Ok(StoredMsg {
            subject,
            seq,
            ts: h.ts,
            header,
            data: b.slice(HDR + s + hl..end),
        })
    }

    fn load_next(&mut self, filter: Option<&str>, start: u64) -> Result<StoredMsg, StoreError> {
        self.check_open()?;
        let seq = match norm(filter) {
            None => self.index.range(start..).next().map(|(k, _)| *k),
            Some(f) if !has_wildcard(f.as_bytes()) => {
                let id = self.subjects.id(f).ok_or(StoreError::NotFound)?;
                let first = self.first_of(id).ok_or(StoreError::NotFound)?;
                let last = self.last_of(id).ok_or(StoreError::NotFound)?;
                if start > last {
                    return Err(StoreError::NotFound);
                }
                self.index
                    .range(start.max(first)..=last)
                    .find(|(_, s)| s.subj == id)
                    .map(|(k, _)| *k)
            }
            Some(f) => {
                let (mask, n) = self.subjects.mask(f);
                if n == 0 {
                    return Err(StoreError::NotFound);
                }
                self.index
                    .range(start..)
                    .find(|(_, s)| mask[s.subj as usize])
                    .map(|(k, _)| *k)
            }
        };
        self.load(seq.ok_or(StoreError::NotFound)?)
    }

    fn load_last(&mut self, filter: Option<&str>) -> Result<StoredMsg, StoreError> {
        self.check_open()?;
        let seq = match norm(filter) {
            None => self.index.last_key_value().map(|(k, _)| *k),
            Some(f) => {
                let (mask, _) = self.subjects.mask(f);
                let mut best = None;
                for (id, m) in mask.iter().enumerate() {
                    if *m {
                        best = best.max(self.last_of(id as u32));
                    }
                }
                best
            }
        };
        self.load(seq.ok_or(StoreError::NotFound)?)
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

    fn state(&self) -> StreamState {
        if self.closed {
            return StreamState::default();
        }
        let first_seq = self.first_seq();
        let first_ts = self.index.first_key_value().map_or(0, |(_, s)| s.ts);
        let num_deleted = if self.msgs > 0 {
            (self.last_seq - first_seq + 1).saturating_sub(self.msgs)
        } else {
            0
        };
        StreamState {
            msgs: self.msgs,
            bytes: self.bytes,
            first_seq,
            first_ts,
            last_seq: self.last_seq,
            last_ts: self.last_ts,
            num_deleted,
            num_subjects: self.subjects.len() as u64,
        }
    }

    fn subjects(&self, filter: Option<&str>) -> BTreeMap<String, u64> {
        let f = norm(filter);
        self.subjects
            .infos
            .iter()
            .flatten()
            .filter(|i| f.is_none_or(|f| pattern_matches(f.as_bytes(), i.name.as_bytes())))
            .map(|i| (i.name.to_string(), i.count))
            .collect()
    }

    fn num_pending(&mut self, filter: Option<&str>, start: u64, last_per_subject: bool) -> u64 {
        if self.closed || self.msgs == 0 {
            return 0;
        }
        let first = self.first_seq();
        if norm(filter).is_none() && !last_per_subject {
            // No gaps: the count is arithmetic (the common case of a consumer walking on).
            if start > self.last_seq {
                return 0;
            }
            if start <= first {
                return self.msgs;
            }
            if self.msgs == self.last_seq - first + 1 {
                return self.last_seq - start + 1;
            }
        }
        let (mask, n) = match norm(filter) {
            None => (vec![true; self.subjects.infos.len()], usize::MAX),
            Some(f) => self.subjects.mask(f),
        };
        if n == 0 {
            return 0;
        }
        if last_per_subject {
            let mut count = 0;
            for (id, m) in mask.iter().enumerate() {
                if *m && self.last_of(id as u32).is_some_and(|l| l >= start) {
                    count += 1;
                }
            }
            return count;
        }
        if start <= first {
            if n == usize::MAX {
                return self.msgs;
            }
            return mask
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .filter_map(|(id, _)| self.subjects.get(id as u32))
                .map(|i| i.count)
                .sum();
        }
        if n == usize::MAX {
            // Count whichever side of `start` is shorter.
            if start - first < self.last_seq.saturating_sub(start) {
                return self.msgs - self.index.range(..start).count() as u64;
            }
            return self.index.range(start..).count() as u64;
        }
        if n == 1 {
            // One subject: only its own span of sequences.
            if let Some(id) = mask.iter().position(|m| *m) {
                let id = id as u32;
                let (Some(f), Some(l)) = (self.first_of(id), self.last_of(id)) else {
                    return 0;
                };
                if start > l {
                    return 0;
                }
                return self
                    .index
                    .range(start.max(f)..=l)
                    .filter(|(_, s)| s.subj == id)
                    .count() as u64;
            }
        }
        self.index
            .range(start..)
            .filter(|(_, s)| mask[s.subj as usize])
            .count() as u64
    }

    fn seq_for_time(&self, ts: i64) -> u64 {
        let from = self
            .segs
            .values()
            .find(|s| s.first_seq > 0 && s.max_ts >= ts)
            .map(|s| s.first_seq);
        from.and_then(|f| {
            self.index
                .range(f..)
                .find(|(_, s)| s.ts >= ts)
                .map(|(k, _)| *k)
        })
        .unwrap_or(self.last_seq + 1)
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
}
