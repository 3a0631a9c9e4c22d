//! Startup recovery: scan the segments in order, keep the good prefix of each (truncating a
//! torn or corrupt tail with a warning), rebuild the index and per-subject state.

use super::record::{self, RecHdr, HDR, MAGIC, MAGIC_PREFIX, OVERHEAD};
use super::subjects::Subjects;
use super::write::Writer;
use super::{io_err, parse_seg_name, Inner, Seg, Slot};
use crate::jetstream::store::{StoreError, StoreLimits, SyncPolicy};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read};
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

/// Scan one segment: apply its good records, return the length of its good prefix.
fn scan_segment(path: &Path, idx: u32, scan: &mut Scan) -> Result<u64, StoreError> {
    let file = File::open(path).map_err(|e| io_err("open", path, e))?;
    let file_len = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
    let mut rd = BufReader::with_capacity(256 << 10, file);
    let mut magic = [0u8; 8];
    let n = read_full(&mut rd, &mut magic).map_err(|e| io_err("read", path, e))?;
    if n < MAGIC.len() || magic != *MAGIC {
        if n == MAGIC.len() && magic[..MAGIC_PREFIX.len()] == *MAGIC_PREFIX {
            return Err(StoreError::Corrupt(format!(
                "{}: unsupported segment format version {}",
                path.display(),
                magic[7]
            )));
        }
        if !(n < MAGIC.len() && magic[..n] == MAGIC[..n]) {
            tracing::warn!(
                "JetStream file store: {}: bad segment magic at offset 0, discarding the segment's {file_len} bytes",
                path.display()
            );
        } else if n > 0 || file_len == 0 {
            tracing::warn!(
                "JetStream file store: {}: segment header cut short ({n} bytes), rewriting it",
                path.display()
            );
        }
        return Ok(0);
    }
    let mut pos = MAGIC.len() as u64;
    let mut rec = Vec::new();
    loop {
        if pos == file_len {
            return Ok(pos);
        }
        let remaining = file_len - pos;
        let bad = |why: &str| {
            tracing::warn!(
                "JetStream file store: {}: {why} at offset {pos}; recovering up to there and truncating {} bytes",
                path.display(),
                file_len - pos
            );
        };
        if remaining < OVERHEAD as u64 {
            bad("record cut short");
            return Ok(pos);
        }
        rec.clear();
        rec.resize(HDR, 0);
        let n = read_full(&mut rd, &mut rec[..HDR]).map_err(|e| io_err("read", path, e))?;
        let Some(h) = RecHdr::parse(&rec[..n]) else {
            bad("record header cut short");
            return Ok(pos);
        };
        if let Err(why) = h.check() {
            bad(why);
            return Ok(pos);
        }
        if h.len as u64 > remaining {
            bad("record cut short");
            return Ok(pos);
        }
        if pos + h.len as u64 > u32::MAX as u64 {
            bad("segment longer than 4 GiB");
            return Ok(pos);
        }
        let len = h.len as usize;
        rec.resize(len, 0);
        let n = read_full(&mut rd, &mut rec[HDR..len]).map_err(|e| io_err("read", path, e))?;
        if n < len - HDR {
            bad("record cut short");
            return Ok(pos);
        }
        if !record::verify(&rec) {
            bad("checksum mismatch");
            return Ok(pos);
        }
        scan.apply(idx, pos, &h, &rec, path);
        pos += h.len as u64;
    }
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
            let good = scan_segment(path, *idx, &mut scan)?;
            let len = std::fs::metadata(path)
                .map_err(|e| io_err("stat", path, e))?
                .len();
            if good < len || good == 0 {
                let f = OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(|e| io_err("open", path, e))?;
                f.set_len(good).map_err(|e| io_err("truncate", path, e))?;
                if good == 0 {
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
        };
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
