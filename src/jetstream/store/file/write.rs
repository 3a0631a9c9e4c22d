//! Writing: the write segment (`Writer`), segment creation and rolling, appends (`store`),
//! handing the buffer to the OS (`write_out`), and the fsync bookkeeping of `sync`.

use super::record::{self, MAGIC, MAX_RECORD, OVERHEAD};
use super::{io_err, seg_path, Inner, Seg, Slot};
use crate::jetstream::store::{file_msg_size, Discard, StoreError};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Instant;

use crate::util::writeback::Writeback;

/// Buffered appends are written to the OS once they reach this size, flush or not.
const WRITE_BUF_LIMIT: usize = 1 << 20;

/// The segment being appended to.
pub(super) struct Writer {
    pub(super) idx: u32,
    pub(super) file: File,
    /// Bytes already in the file.
    pub(super) flushed: u64,
    pub(super) buf: Vec<u8>,
    /// How far the kernel was asked to write the file back.
    pub(super) wb: Writeback,
}

impl Writer {
    pub(super) fn size(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }
}

/// A file to fsync, opened under the store's lock.
pub(super) struct ToSync {
    /// The segment, or `None` for the directory.
    seg: Option<u32>,
    path: PathBuf,
    file: File,
}

pub(super) fn fsync_files(files: &[ToSync]) -> Result<(), StoreError> {
    for f in files {
        let r = match f.seg {
            Some(_) => f.file.sync_data(),
            None => f.file.sync_all(),
        };
        r.map_err(|e| io_err("fsync", &f.path, e))?;
    }
    Ok(())
}

impl Inner {
    pub(super) fn writer(&mut self) -> Result<&mut Writer, StoreError> {
        self.writer.as_mut().ok_or(StoreError::Closed)
    }

    /// Create segment `idx` as the new write segment (its SEQS record buffered).
    pub(super) fn new_segment(&mut self, idx: u32) -> Result<(), StoreError> {
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
            wb: Writeback::default(),
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
    pub(super) fn maybe_roll(&mut self, rec_len: usize) -> Result<(), StoreError> {
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
        if let Some(w) = self.writer.as_mut() {
            w.wb.finish(&w.file, w.flushed);
        }
        self.seal_writer();
        self.new_segment(next)
    }

    /// Record the write segment's final length before a new one takes over.
    pub(super) fn seal_writer(&mut self) {
        if let Some(w) = self.writer.as_ref() {
            let (idx, size) = (w.idx, w.size());
            if let Some(s) = self.segs.get_mut(&idx) {
                s.size = size;
            }
        }
    }

    pub(super) fn mark_dirty(&mut self) {
        if self.dirty_since.is_none() {
            self.dirty_since = Some(Instant::now());
            if let Some(s) = &self.syncer {
                s.wake();
            }
        }
    }

    /// Hand the write buffer to the OS (with a SEQS record first if the floor moved).
    pub(super) fn write_out(&mut self) -> Result<(), StoreError> {
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
        w.wb.wrote(&w.file, w.flushed);
        w.buf.clear();
        if w.buf.capacity() > 4 * WRITE_BUF_LIMIT {
            w.buf.shrink_to(WRITE_BUF_LIMIT);
        }
        let idx = w.idx;
        self.note_written(idx);
        self.mark_dirty();
        self.write_last_seq()
    }

    pub(super) fn note_written(&mut self, idx: u32) {
        self.sync_gen += 1;
        self.unsynced.insert(idx, self.sync_gen);
    }

    pub(super) fn note_dir(&mut self) {
        self.sync_gen += 1;
        self.dir_dirty = self.sync_gen;
    }

    /// Flush, then fsync every segment written since the last sync and the directory.
    pub(super) fn sync_all(&mut self) -> Result<(), StoreError> {
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
    pub(super) fn prepare_sync(&mut self) -> Result<(Vec<ToSync>, u64), StoreError> {
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
        if let Some(f) = self.seqfile.as_ref().filter(|_| self.seq_dirty > 0) {
            let path = super::seqfile::path(&self.dir);
            let file = f.file().try_clone().map_err(|e| io_err("open", &path, e))?;
            files.push(ToSync {
                seg: None,
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
    pub(super) fn sync_done(&mut self, files: &[ToSync], gen: u64) {
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
                    if self.seq_dirty <= gen {
                        self.seq_dirty = 0;
                    }
                }
            }
        }
        let clean = self.unsynced.is_empty()
            && self.dir_dirty == 0
            && self.seq_dirty == 0
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
    pub(super) fn sync_failed(&mut self) {
        self.dirty_since = Some(Instant::now());
        if let Some(s) = &self.syncer {
            s.wake();
        }
    }

    pub(super) fn store(
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
}
