//! Startup recovery: scan the segments in order, keep every good record of each (a corrupt
//! record is skipped up to the next good one and overwritten with a filler; a torn or corrupt
//! tail is truncated, each with a warning), rebuild the index and per-subject state. The last
//! sequence never goes back: it is also kept in the `last_seq` file (see `seqfile.rs`).

use super::record::{self, RecHdr, HDR, MAGIC, MAGIC_PREFIX, OVERHEAD};
use super::subjects::Subjects;
use super::write::Writer;
use super::{io_err, parse_seg_name, Inner, Seg, Slot};
use crate::jetstream::store::{StoreError, StoreLimits, SyncPolicy};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// State collected while scanning segments.
struct Scan {
    index: BTreeMap<u64, Slot>,
    names: Vec<Arc<str>>,
    name_ids: HashMap<Arc<str>, u32>,
    floor: u64,
    last_seq: u64,
    last_ts: i64,
    /// Per segment: (lowest message sequence, message records, tombstones).
    files: HashMap<u32, (u64, u64, u64)>,
}

impl Scan {
    fn apply(&mut self, seg: u32, off: u64, h: &RecHdr, rec: &[u8], path: &Path) {
        if h.kind == record::KIND_ERASED && h.seq == 0 {
            // A filler over bytes recovery skipped: it names no message.
            self.files.entry(seg).or_insert((0, 0, 0)).1 += 1;
            return;
        }
        let file = self.files.entry(seg).or_insert((0, 0, 0));
        match h.kind {
            record::KIND_MSG | record::KIND_ERASED => {
                if file.0 == 0 || h.seq < file.0 {
                    file.0 = h.seq;
                }
                file.1 += 1;
            }
            record::KIND_DEL => file.2 += 1,
            _ => {}
        }
        match h.kind {
            record::KIND_MSG => {
                if h.seq == 0 || self.index.contains_key(&h.seq) {
                    tracing::warn!(
                        "JetStream file store: {}: duplicate message sequence {} at offset {off}, ignored",
                        path.display(),
                        h.seq
                    );
                    return;
                }
                let s = h.subj_len as usize;
                let subject = String::from_utf8_lossy(&rec[HDR..HDR + s]);
                let subj = match self.name_ids.get(subject.as_ref()) {
                    Some(&id) => id,
                    None => {
                        let name: Arc<str> = Arc::from(subject.as_ref());
                        let id = self.names.len() as u32;
                        self.names.push(name.clone());
                        self.name_ids.insert(name, id);
                        id
                    }
                };
                self.index.insert(
                    h.seq,
                    Slot {
                        seg,
                        off: off as u32,
                        len_hdr: Slot::len_hdr(h.len, h.hdr_len as usize),
                        subj,
                        ts: h.ts,
                    },
                );
                if h.seq >= self.last_seq {
                    self.last_seq = h.seq;
                    self.last_ts = h.ts;
                }
            }
            record::KIND_DEL => {
                self.index.remove(&h.seq);
            }
            record::KIND_ERASED => {
                self.index.remove(&h.seq);
                self.last_seq = self.last_seq.max(h.seq);
            }
            record::KIND_SEQS => {
                self.floor = self.floor.max(h.seq);
                let last = h.ts as u64;
                if last > self.last_seq {
                    self.last_seq = last;
                    self.last_ts = record::seqs_last_ts(rec);
                }
            }
            _ => {}
        }
    }
}

/// What one segment's scan found: the length of its good part and the byte ranges
/// (offset, length) inside it that were skipped.
struct Scanned {
    good: u64,
    holes: Vec<(u64, u64)>,
    /// The segment magic was damaged (the records after it were still read): rewrite it.
    bad_magic: bool,
}

/// Scan one segment: apply its good records. A bad record is skipped when a good one follows
/// it (the bytes between become a hole); a bad tail ends the good part.
fn scan_segment(path: &Path, idx: u32, scan: &mut Scan) -> Result<Scanned, StoreError> {
    let file = File::open(path).map_err(|e| io_err("open", path, e))?;
    let file_len = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
    let mut rd = BufReader::with_capacity(256 << 10, file);
    let mut magic = [0u8; 8];
    let n = read_full(&mut rd, &mut magic).map_err(|e| io_err("read", path, e))?;
    let mut holes = Vec::new();
    let mut bad_magic = false;
    if n < MAGIC.len() || magic != *MAGIC {
        if n == MAGIC.len() && magic[..MAGIC_PREFIX.len()] == *MAGIC_PREFIX {
            return Err(StoreError::Corrupt(format!(
                "{}: unsupported segment format version {}",
                path.display(),
                magic[7]
            )));
        }
        if n == MAGIC.len() {
            tracing::warn!(
                "JetStream file store: {}: bad segment magic at offset 0; rewriting it and recovering the records after it",
                path.display()
            );
            bad_magic = true;
        } else {
            if n > 0 || file_len == 0 {
                tracing::warn!(
                    "JetStream file store: {}: segment header cut short ({n} bytes), rewriting it",
                    path.display()
                );
            }
            return Ok(Scanned {
                good: 0,
                holes,
                bad_magic,
            });
        }
    }
    let mut pos = MAGIC.len() as u64;
    let mut rec = Vec::new();
    loop {
        if pos == file_len {
            return Ok(Scanned {
                good: pos,
                holes,
                bad_magic,
            });
        }
        let why = match read_record(&mut rd, &mut rec, file_len - pos, pos)
            .map_err(|e| io_err("read", path, e))?
        {
            Ok(h) => {
                scan.apply(idx, pos, &h, &rec, path);
                pos += h.len as u64;
                continue;
            }
            Err(why) => why,
        };
        let next =
            find_next(rd.get_ref(), pos + 1, file_len).map_err(|e| io_err("read", path, e))?;
        match next {
            Some(next) if next - pos >= OVERHEAD as u64 => {
                tracing::warn!(
                    "JetStream file store: {}: {why} at offset {pos}; skipping {} bytes to the next good record at offset {next}",
                    path.display(),
                    next - pos
                );
                holes.push((pos, next - pos));
                rd.seek(SeekFrom::Start(next))
                    .map_err(|e| io_err("seek", path, e))?;
                pos = next;
            }
            _ => {
                tracing::warn!(
                    "JetStream file store: {}: {why} at offset {pos}; recovering up to there and truncating {} bytes",
                    path.display(),
                    file_len - pos
                );
                return Ok(Scanned {
                    good: pos,
                    holes,
                    bad_magic,
                });
            }
        }
    }
}

/// Read the record at `pos` (`remaining` bytes to the end of the file) into `rec`: its header,
/// or why it is not a good record.
fn read_record(
    rd: &mut impl Read,
    rec: &mut Vec<u8>,
    remaining: u64,
    pos: u64,
) -> std::io::Result<Result<RecHdr, &'static str>> {
    if remaining < OVERHEAD as u64 {
        return Ok(Err("record cut short"));
    }
    rec.clear();
    rec.resize(HDR, 0);
    let n = read_full(rd, &mut rec[..HDR])?;
    let Some(h) = RecHdr::parse(&rec[..n]) else {
        return Ok(Err("record header cut short"));
    };
    if let Err(why) = h.check() {
        return Ok(Err(why));
    }
    if h.len as u64 > remaining {
        return Ok(Err("record cut short"));
    }
    if pos + h.len as u64 > u32::MAX as u64 {
        return Ok(Err("segment longer than 4 GiB"));
    }
    let len = h.len as usize;
    rec.resize(len, 0);
    let n = read_full(rd, &mut rec[HDR..len])?;
    if n < len - HDR {
        return Ok(Err("record cut short"));
    }
    if !record::verify(rec) {
        return Ok(Err("checksum mismatch"));
    }
    Ok(Ok(h))
}

/// The first offset at or after `from` where a whole good record starts (header checks and
/// checksum), reading the file in 1 MiB windows.
fn find_next(f: &File, from: u64, file_len: u64) -> std::io::Result<Option<u64>> {
    const WIN: usize = 1 << 20;
    let mut buf = vec![0u8; WIN + HDR];
    let mut rec = Vec::new();
    let mut start = from;
    while start + OVERHEAD as u64 <= file_len {
        let n = ((file_len - start) as usize).min(WIN + HDR);
        f.read_exact_at(&mut buf[..n], start)?;
        for i in 0..n.min(WIN) {
            let q = start + i as u64;
            let Some(h) = RecHdr::parse(&buf[i..n]) else {
                return Ok(None);
            };
            if h.check().is_err() || q + h.len as u64 > file_len.min(u32::MAX as u64) {
                continue;
            }
            rec.resize(h.len as usize, 0);
            f.read_exact_at(&mut rec, q)?;
            if record::verify(&rec) {
                return Ok(Some(q));
            }
        }
        start += WIN as u64;
    }
    Ok(None)
}

/// Overwrite a skipped range with filler records (erased, sequence 0: they name no message),
/// so the segment reads record by record again.
fn fill_hole(f: &File, mut off: u64, mut len: u64) -> std::io::Result<()> {
    let max = record::MAX_RECORD as u64;
    while len > 0 {
        let n = if len <= max {
            len
        } else if len - max >= OVERHEAD as u64 {
            max
        } else {
            max - OVERHEAD as u64
        };
        f.write_all_at(&record::encode_erased(n as usize, 0), off)?;
        off += n;
        len -= n;
    }
    Ok(())
}

/// Read until `buf` is full or EOF; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Inner {
    pub(super) fn recover(
        dir: &Path,
        limits: StoreLimits,
        policy: SyncPolicy,
        seg_size: u64,
    ) -> Result<Inner, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))?;
        let mut found: Vec<(u32, PathBuf)> = Vec::new();
        let rd = std::fs::read_dir(dir).map_err(|e| io_err("read directory", dir, e))?;
        for ent in rd {
            let ent = ent.map_err(|e| io_err("read directory", dir, e))?;
            let name = ent.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(idx) = parse_seg_name(name) {
                found.push((idx, ent.path()));
            } else if name.ends_with(".blk.tmp") {
                // A compaction that did not finish: the original segment is intact.
                let _ = std::fs::remove_file(ent.path());
            }
        }
        found.sort_by_key(|(idx, _)| *idx);

        let mut scan = Scan {
            index: BTreeMap::new(),
            names: Vec::new(),
            name_ids: HashMap::new(),
            floor: 0,
            last_seq: 0,
            last_ts: 0,
            files: HashMap::new(),
        };
        let mut segs = BTreeMap::new();
        let mut last_len = 0u64;
        for (idx, path) in &found {
            let Scanned {
                good,
                holes,
                bad_magic,
            } = scan_segment(path, *idx, &mut scan)?;
            let len = std::fs::metadata(path)
                .map_err(|e| io_err("stat", path, e))?
                .len();
            if good < len || good == 0 || !holes.is_empty() || bad_magic {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| io_err("open", path, e))?;
                for &(off, n) in &holes {
                    fill_hole(&f, off, n).map_err(|e| io_err("write", path, e))?;
                }
                f.set_len(good).map_err(|e| io_err("truncate", path, e))?;
                if good == 0 || bad_magic {
                    f.write_all_at(MAGIC, 0)
                        .map_err(|e| io_err("write", path, e))?;
                }
                f.sync_all().map_err(|e| io_err("fsync", path, e))?;
            }
            last_len = good.max(MAGIC.len() as u64);
            segs.insert(
                *idx,
                Seg {
                    path: path.clone(),
                    live: 0,
                    first_seq: 0,
                    max_ts: i64::MIN,
                    live_bytes: 0,
                    size: good.max(MAGIC.len() as u64),
                    has_dead: false,
                    dels: 0,
                },
            );
        }

        // Everything below the floor is gone.
        let mut index = scan.index.split_off(&scan.floor);
        let mut subjects = Subjects::default();
        let (mut msgs, mut bytes) = (0u64, 0u64);
        for (&seq, slot) in index.iter_mut() {
            slot.subj = subjects.add(&scan.names[slot.subj as usize], seq);
            msgs += 1;
            bytes += slot.size();
            if let Some(s) = segs.get_mut(&slot.seg) {
                s.live += 1;
                s.live_bytes += slot.len() as u64;
                s.max_ts = s.max_ts.max(slot.ts);
            }
        }
        for (idx, s) in segs.iter_mut() {
            if let Some(&(first, records, dels)) = scan.files.get(idx) {
                s.first_seq = first;
                s.has_dead = records > s.live;
                s.dels = dels;
            }
        }
        // The last sequence handed out never goes back, whatever the segments lost.
        if let Some((seq, ts)) = super::seqfile::read(dir) {
            if seq > scan.last_seq {
                tracing::warn!(
                    "JetStream file store {}: messages {}..={seq} were lost from the segments; \
                     their sequences stay used (deleted messages), the next one is {}",
                    dir.display(),
                    scan.last_seq + 1,
                    seq + 1
                );
                scan.last_seq = seq;
                scan.last_ts = ts;
            }
        }
        let mut floor = scan.floor;
        if index.is_empty() && scan.last_seq > 0 {
            floor = floor.max(scan.last_seq + 1);
        }
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            limits,
            policy,
            seg_size,
            closed: false,
            index,
            subjects,
            msgs,
            bytes,
            last_seq: scan.last_seq.max(floor.saturating_sub(1)),
            last_ts: scan.last_ts,
            floor,
            floor_written: floor,
            segs,
            writer: None,
            readers: HashMap::new(),
            ahead: Default::default(),
            unsynced: BTreeMap::new(),
            dir_dirty: 0,
            sync_gen: 0,
            dirty_since: None,
            touched: BTreeSet::new(),
            syncer: None,
            seqfile: None,
            seq_dirty: 0,
        };
        inner.seqfile = Some(super::seqfile::SeqFile::open(dir)?);
        // Written now: a store that predates the file, or whose file was damaged.
        inner.write_last_seq()?;
        match inner
            .segs
            .last_key_value()
            .map(|(k, s)| (*k, s.path.clone()))
        {
            Some((idx, path)) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .map_err(|e| io_err("open", &path, e))?;
                inner.writer = Some(Writer {
                    idx,
                    file,
                    flushed: last_len,
                    buf: Vec::new(),
                    wb: crate::util::writeback::Writeback::at(last_len),
                });
            }
            None => inner.new_segment(1)?,
        }
        if !found.is_empty() {
            tracing::debug!(
                "JetStream file store {}: recovered {} messages, first {} last {}, {} segments",
                dir.display(),
                inner.msgs,
                inner.first_seq(),
                inner.last_seq,
                inner.segs.len()
            );
        }
        Ok(inner)
    }
}
