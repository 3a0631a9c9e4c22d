//! The `last_seq` file: the store's last sequence and its timestamp, rewritten in place
//! whenever a flush hands out a higher sequence (28 bytes: magic, u64 sequence, i64 time,
//! CRC-32C; little endian). Recovery takes the higher of it and the segments' own last
//! sequence, so a segment cut short or corrupt at its tail never makes the store hand out an
//! acknowledged sequence again: the lost range stays a gap (deleted messages).

use super::record::crc32c;
use super::{io_err, Inner};
use crate::jetstream::store::StoreError;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"NJSLAST\x01";
const LEN: usize = 28;

pub(super) fn path(dir: &Path) -> PathBuf {
    dir.join("last_seq")
}

/// The sequence and timestamp the file holds, if it is there and intact (a damaged one is
/// ignored with a warning: the segments still give a last sequence).
pub(super) fn read(dir: &Path) -> Option<(u64, i64)> {
    let p = path(dir);
    let b = std::fs::read(&p).ok().filter(|b| !b.is_empty())?;
    let ok =
        b.len() == LEN && b[..8] == *MAGIC && crc32c(&b[..LEN - 4]).to_le_bytes() == b[LEN - 4..];
    if !ok {
        tracing::warn!(
            "JetStream file store: {}: damaged, ignored (the segments give the last sequence)",
            p.display()
        );
        return None;
    }
    let u = |r: std::ops::Range<usize>| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[r]);
        a
    };
    Some((u64::from_le_bytes(u(8..16)), i64::from_le_bytes(u(16..24))))
}

fn encode(seq: u64, ts: i64) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..24].copy_from_slice(&ts.to_le_bytes());
    let crc = crc32c(&b[..LEN - 4]);
    b[LEN - 4..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The open `last_seq` file and what it holds.
pub(super) struct SeqFile {
    file: File,
    pub(super) written: u64,
}

impl SeqFile {
    pub(super) fn open(dir: &Path) -> Result<SeqFile, StoreError> {
        let p = path(dir);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&p)
            .map_err(|e| io_err("open", &p, e))?;
        Ok(SeqFile { file, written: 0 })
    }

    pub(super) fn file(&self) -> &File {
        &self.file
    }
}

impl Inner {
    /// Record the last sequence in the `last_seq` file when it moved past what it holds.
    pub(super) fn write_last_seq(&mut self) -> Result<(), StoreError> {
        let (seq, ts) = (self.last_seq, self.last_ts);
        let Some(f) = self.seqfile.as_mut() else {
            return Ok(());
        };
        if seq <= f.written {
            return Ok(());
        }
        f.file
            .write_all_at(&encode(seq, ts), 0)
            .map_err(|e| io_err("write", &path(&self.dir), e))?;
        f.written = seq;
        self.sync_gen += 1;
        self.seq_dirty = self.sync_gen;
        self.mark_dirty();
        Ok(())
    }
}
