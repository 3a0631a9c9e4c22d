//! Space reclamation inside sealed segments: a segment that lost at least half its bytes is
//! rewritten (temp file, fsync, rename) with its live messages, the tombstones that still
//! hide records in older segments, and its SEQS records; a segment left with nothing of
//! that is deleted.

use super::record::{self, RecHdr, MAGIC, OVERHEAD};
use super::{io_err, Inner};
use crate::jetstream::store::StoreError;
use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;

impl Inner {
    /// Rewrite sealed segments that lost at least half their bytes (see `compact_segment`).
    pub(super) fn maybe_compact(&mut self) {
        if self.touched.is_empty() {
            return;
        }
        let widx = self.writer.as_ref().map(|w| w.idx);
        while let Some(idx) = self.touched.pop_first() {
            let Some(seg) = self.segs.get(&idx) else {
                continue;
            };
            let overhead = (MAGIC.len() + OVERHEAD + 8) as u64;
            if Some(idx) == widx || seg.live_bytes * 2 >= seg.size.saturating_sub(overhead) {
                continue;
            }
            if let Err(e) = self.compact_segment(idx) {
                tracing::warn!("JetStream file store: compaction of segment {idx} skipped: {e}");
            }
        }
    }

    /// Rewrite sealed segment `idx` with only its live messages, the tombstones that refer to
    /// older segments and its SEQS records (atomic: temp file, fsync, rename). A segment left
    /// with nothing of that is deleted.
    fn compact_segment(&mut self, idx: u32) -> Result<(), StoreError> {
        let Some(seg) = self.segs.get(&idx) else {
            return Ok(());
        };
        let (path, first, had_dead) = (seg.path.clone(), seg.first_seq, seg.has_dead);
        let first = if first == 0 { u64::MAX } else { first };
        // Which older segments still hold records of removed messages, by first sequence:
        // a tombstone is kept only if its message's record may still be on disk.
        let dirty: Vec<(u64, bool)> = self
            .segs
            .range(..idx)
            .filter(|(_, s)| s.first_seq > 0)
            .map(|(_, s)| (s.first_seq, s.has_dead))
            .collect();
        let needs_tombstone = |t: u64| {
            let i = dirty.partition_point(|(f, _)| *f <= t);
            i > 0 && dirty[i - 1].1
        };
        let data = std::fs::read(&path).map_err(|e| io_err("read", &path, e))?;
        if data.len() < MAGIC.len() || data[..MAGIC.len()] != *MAGIC {
            return Err(StoreError::Corrupt(format!(
                "{}: bad segment magic",
                path.display()
            )));
        }
        let mut out = Vec::with_capacity(seg.live_bytes as usize + 4096);
        out.extend_from_slice(MAGIC);
        let mut moves: Vec<(u64, u32)> = Vec::new();
        let mut needed = false;
        let mut dels = 0u64;
        let mut pos = MAGIC.len();
        while pos < data.len() {
            let bad = |why: &str| {
                StoreError::Corrupt(format!("{}: {why} at offset {pos}", path.display()))
            };
            let h = RecHdr::parse(&data[pos..]).ok_or_else(|| bad("record cut short"))?;
            h.check().map_err(bad)?;
            let rec = data
                .get(pos..pos + h.len as usize)
                .ok_or_else(|| bad("record cut short"))?;
            if !record::verify(rec) {
                return Err(bad("checksum mismatch"));
            }
            match h.kind {
                record::KIND_MSG => {
                    let live = self
                        .index
                        .get(&h.seq)
                        .is_some_and(|s| s.seg == idx && s.off as usize == pos);
                    if live {
                        moves.push((h.seq, out.len() as u32));
                        out.extend_from_slice(rec);
                        needed = true;
                    }
                }
                // A tombstone can only name this segment's messages or older ones'.
                record::KIND_DEL if h.seq < first && needs_tombstone(h.seq) => {
                    out.extend_from_slice(rec);
                    needed = true;
                    dels += 1;
                }
                record::KIND_SEQS => out.extend_from_slice(rec),
                _ => {}
            }
            pos += h.len as usize;
        }
        if !needed {
            // Nothing in it matters any more (the write segment carries the sequences).
            std::fs::remove_file(&path).map_err(|e| io_err("remove", &path, e))?;
            self.segs.remove(&idx);
            self.readers.remove(&idx);
            self.ahead.forget_segment(idx);
            self.unsynced.remove(&idx);
            self.note_dir();
            self.after_compaction(idx, had_dead);
            return Ok(());
        }
        if out.len() >= data.len() {
            return Ok(());
        }
        let tmp = path.with_extension("blk.tmp");
        let write = || -> std::io::Result<()> {
            let f = File::create(&tmp)?;
            f.write_all_at(&out, 0)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err("rewrite", &path, e));
        }
        for (seq, off) in moves {
            if let Some(s) = self.index.get_mut(&seq) {
                s.off = off;
            }
        }
        self.readers.remove(&idx);
        self.ahead.forget_segment(idx);
        self.unsynced.remove(&idx);
        if let Some(s) = self.segs.get_mut(&idx) {
            s.size = out.len() as u64;
            s.has_dead = false;
            s.dels = dels;
        }
        self.after_compaction(idx, had_dead);
        tracing::debug!(
            "JetStream file store: compacted {} from {} to {} bytes",
            path.display(),
            data.len(),
            out.len()
        );
        Ok(())
    }

    /// Records of removed messages left segment `idx`: tombstones for them in newer sealed
    /// segments are now useless, so those segments are worth another look.
    fn after_compaction(&mut self, idx: u32, had_dead: bool) {
        if !had_dead {
            return;
        }
        let newer: Vec<u32> = self
            .segs
            .range((Bound::Excluded(idx), Bound::Unbounded))
            .filter(|(_, s)| s.dels > 0)
            .map(|(k, _)| *k)
            .collect();
        self.touched.extend(newer);
    }
}
