//! Reading: records of live messages from the write buffer or the segment files (with
//! read-ahead for sequential loads), and `load`/`load_next`/`load_last`.

use super::record::{self, RecHdr, HDR};
use super::{io_err, norm, seg_path, Inner, Slot};
use crate::jetstream::store::{StoreError, StoredMsg};
use crate::subject::has_wildcard;
use bytes::Bytes;
use std::fs::File;
use std::os::unix::fs::FileExt;

/// Open read handles kept for older segments.
const READERS_CACHED: usize = 8;

/// Read-ahead for sequential loads from files: a load that starts where the previous one
/// ended reads a whole chunk, and the following loads are served from it. Random loads read
/// just their record.
#[derive(Default)]
pub(super) struct ReadAhead {
    valid: bool,
    seg: u32,
    off: u64,
    buf: Vec<u8>,
    last: Option<(u32, u64)>,
}

const READ_AHEAD: usize = 64 << 10;

impl ReadAhead {
    pub(super) fn forget(&mut self) {
        self.valid = false;
        self.last = None;
    }

    pub(super) fn forget_segment(&mut self, seg: u32) {
        if self.seg == seg || self.last.is_some_and(|(s, _)| s == seg) {
            self.forget();
        }
    }

    /// Fill `out` from `file` at `off`, never using bytes at or past `limit`.
    pub(super) fn read(
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

impl Inner {
    /// Read and check the record of a live message.
    pub(super) fn read_record(&mut self, slot: &Slot) -> Result<Vec<u8>, StoreError> {
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

    pub(super) fn load(&mut self, seq: u64) -> Result<StoredMsg, StoreError> {
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

    pub(super) fn load_next(
        &mut self,
        filter: Option<&str>,
        start: u64,
    ) -> Result<StoredMsg, StoreError> {
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

    pub(super) fn load_last(&mut self, filter: Option<&str>) -> Result<StoredMsg, StoreError> {
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
}
