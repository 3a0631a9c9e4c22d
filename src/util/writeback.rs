//! Starting the kernel's writeback of a file's appends as they come, a few MiB at a time.
//!
//! Without an fsync per write (JetStream's `sync_interval`, the Raft logs' likewise),
//! appends stay dirty pages until the kernel writes them back 30 s later
//! (`vm.dirty_expire_centisecs`), everything written meanwhile in one burst. Appends made
//! during such a burst waited: a 100 MB R3 stream's files, flushed at once, held
//! synchronous publishers' PubAcks 195–272 ms, 30 s after the stream was written. So each
//! appending file asks for the writeback of what it received every [`EVERY`] bytes
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which starts it and returns; Linux only).
//! It makes nothing durable — fsyncs still do that — and keeps the dirty pages of a file
//! within a few MiB, so the kernel writes them back as they come.

use std::fs::File;
use std::io::{self, Write};

/// A file's writeback is started once this much was written since the last start.
pub const EVERY: u64 = 4 << 20;

const PAGE: u64 = 4096;

/// How far an appended file's writeback has been started.
#[derive(Debug, Default)]
pub struct Writeback {
    started: u64,
}

impl Writeback {
    /// For a file that already holds `len` bytes (left to the kernel).
    pub fn at(len: u64) -> Writeback {
        Writeback {
            started: len & !(PAGE - 1),
        }
    }

    /// The range whose writeback is due now that the file holds `len` bytes: whole pages
    /// since the last start, once they reach [`EVERY`]. A file cut shorter starts over there.
    pub fn due(&mut self, len: u64) -> Option<(u64, u64)> {
        if len < self.started {
            self.started = len & !(PAGE - 1);
            return None;
        }
        if len - self.started < EVERY {
            return None;
        }
        let end = len & !(PAGE - 1);
        let range = (self.started, end - self.started);
        self.started = end;
        Some(range)
    }

    /// The range left to write back once the file is complete at `len` bytes (a length of
    /// 0: to the end of the file), if any.
    pub fn rest(&mut self, len: u64) -> Option<(u64, u64)> {
        if len <= self.started {
            return None;
        }
        let from = self.started;
        self.started = len;
        Some((from, 0))
    }

    /// `file` is complete at `len` bytes (a segment rolled): starts the writeback of the
    /// rest, which would otherwise wait for the kernel.
    pub fn finish(&mut self, file: &File, len: u64) {
        start_logged(file, self.rest(len));
    }

    /// `file` now holds `len` bytes: starts the writeback of what is due. Advisory: a
    /// failure changes nothing but when the kernel writes the pages, so it is only logged.
    pub fn wrote(&mut self, file: &File, len: u64) {
        start_logged(file, self.due(len));
    }
}

/// [`start`] of `range` (from, bytes), if any; a failure is only logged (see `wrote`).
fn start_logged(file: &File, range: Option<(u64, u64)>) {
    if let Some((from, n)) = range {
        if let Err(e) = start(file, from, n) {
            tracing::debug!(error = %e, "sync_file_range");
        }
    }
}

/// Starts the writeback of `n` bytes of `file` from `from`, without waiting for it.
#[cfg(target_os = "linux")]
pub fn start(file: &File, from: u64, n: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(from), Ok(n)) = (i64::try_from(from), i64::try_from(n)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: the descriptor is open for the borrow of `file`; sync_file_range reads and
    // writes no memory of this process.
    let r =
        unsafe { libc::sync_file_range(file.as_raw_fd(), from, n, libc::SYNC_FILE_RANGE_WRITE) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
pub fn start(_: &File, _: u64, _: u64) -> io::Result<()> {
    Ok(())
}

/// A file written front to back through [`Write`], its writeback started as it grows.
pub struct Appender {
    pub file: File,
    len: u64,
    wb: Writeback,
}

impl Appender {
    pub fn new(file: File) -> Appender {
        Appender {
            file,
            len: 0,
            wb: Writeback::default(),
        }
    }
}

impl Write for Appender {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.len += n as u64;
        self.wb.wrote(&self.file, self.len);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writeback_is_started_for_whole_pages_every_few_mib() {
        let mut wb = Writeback::default();
        assert_eq!(wb.due(EVERY - 1), None);
        assert_eq!(wb.due(EVERY + 100), Some((0, EVERY)));
        assert_eq!(wb.due(2 * EVERY - 1), None);
        assert_eq!(wb.due(2 * EVERY + 5000), Some((EVERY, EVERY + 4096)));
        // A file cut shorter (a log truncated, rewritten) starts over where it ends.
        assert_eq!(wb.due(10_000), None);
        assert_eq!(wb.due(8192 + EVERY), Some((8192, EVERY)));
        // A complete file: the rest, once.
        assert_eq!(wb.rest(8192 + EVERY + 10), Some((8192 + EVERY, 0)));
        assert_eq!(wb.rest(8192 + EVERY + 10), None);
        // A file opened with data already in it.
        let mut wb = Writeback::at(EVERY + 10);
        assert_eq!(wb.due(2 * EVERY - 1), None);
        assert_eq!(wb.due(2 * EVERY + 10), Some((EVERY, EVERY)));
    }

    #[test]
    fn an_appender_writes_everything_and_its_writeback_starts() {
        let dir = std::env::temp_dir().join(format!("natsd-wb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("f");
        let mut a = Appender::new(File::create(&path).expect("create"));
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..9 {
            a.write_all(&chunk).expect("write");
        }
        assert_eq!(a.wb.started, 8 * (1 << 20), "started for what was written");
        start(&a.file, 0, 4096).expect("sync_file_range on a real file");
        drop(a);
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), 9 << 20);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
