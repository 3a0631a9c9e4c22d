//! The log file, rotated by size as nats-server's file logger (`logfile_size_limit`,
//! `logfile_max_num`; docs/nats-server-behaviour.md, "Log file rotation"): after a write takes
//! the file past the limit it is renamed `<file>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn`, a new file
//! is opened by the same name and starts with `[INF] Rotated log, backup saved as "<backup>"`;
//! with `max_num` N > 0, the oldest backups past N - 1 are deleted, each with
//! `[INF] Purged log file "<name>"`. Those two lines end in CRLF, as nats-server's.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// nats-server's `defaultLogPerms`.
#[cfg(unix)]
const MODE: u32 = 0o640;

pub fn open(p: &Path) -> Result<File, String> {
    let mut o = std::fs::OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, MODE);
    o.open(p)
        .map_err(|e| format!("error opening log file {}: {e}", p.display()))
}

/// An open log file and what it holds.
pub struct LogFile {
    path: PathBuf,
    file: Option<File>,
    /// Bytes in the file (its size when opened, then what was written).
    size: u64,
}

impl LogFile {
    pub fn open(path: &Path) -> Result<LogFile, String> {
        let file = open(path)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(LogFile {
            path: path.to_path_buf(),
            file: Some(file),
            size,
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Append one line.
    pub fn write_line(&mut self, line: &[u8]) {
        if let Some(f) = self.file.as_mut() {
            if f.write_all(line).is_ok() {
                self.size += line.len() as u64;
            }
        }
    }

    /// Rotate when past `limit` (> 0), keeping at most `max_num` files in all (0: all).
    /// `prefix` makes the start of a log line (`[pid] stamp `).
    pub fn rotate_if_past(&mut self, limit: i64, max_num: i64, prefix: &dyn Fn() -> String) {
        if limit <= 0 || self.size <= limit as u64 {
            return;
        }
        let backup = backup_name(&self.path, std::time::SystemTime::now());
        // Closed before the rename, as nats-server.
        self.file = None;
        let renamed = std::fs::rename(&self.path, &backup);
        match open(&self.path) {
            Ok(f) => self.file = Some(f),
            Err(e) => {
                // Keep logging somewhere rather than nowhere: the old file under its old name
                // if the rename failed, else stderr gets the complaint.
                eprintln!("natsd: unable to re-open the logfile after rotation: {e}");
                return;
            }
        }
        self.size = 0;
        if let Err(e) = renamed {
            self.write_line(
                format!(
                    "{}[ERR] Unable to rename logfile for rotation ({e}), will attempt next rotation\r\n",
                    prefix()
                )
                .as_bytes(),
            );
            return;
        }
        let line = format!(
            "{}[INF] Rotated log, backup saved as {:?}\r\n",
            prefix(),
            backup.display().to_string()
        );
        self.write_line(line.as_bytes());
        if max_num > 0 {
            self.purge(max_num as usize, prefix);
        }
    }

    /// Delete the oldest backups so that at most `max_num - 1` remain.
    fn purge(&mut self, max_num: usize, prefix: &dyn Fn() -> String) {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let Some(base) = self.path.file_name().and_then(|b| b.to_str()) else {
            return;
        };
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                let line = format!(
                    "{}[ERR] Unable to read directory {:?} for log purge ({e}), will attempt next rotation\r\n",
                    prefix(),
                    dir.display().to_string()
                );
                self.write_line(line.as_bytes());
                return;
            }
        };
        let mut backups: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| {
                n.strip_prefix(base)
                    .and_then(|r| r.strip_prefix('.'))
                    .is_some_and(is_stamp)
            })
            .collect();
        // The stamps sort oldest first.
        backups.sort();
        let keep = max_num - 1;
        let excess = backups.len().saturating_sub(keep);
        for name in &backups[..excess] {
            if let Err(e) = std::fs::remove_file(dir.join(name)) {
                let line = format!(
                    "{}[ERR] Unable to remove backup log file {name:?} ({e}), will attempt next rotation\r\n",
                    prefix()
                );
                self.write_line(line.as_bytes());
                return;
            }
            let line = format!("{}[INF] Purged log file {name:?}\r\n", prefix());
            self.write_line(line.as_bytes());
        }
    }
}

/// `<path>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn` at `t`.
fn backup_name(path: &Path, t: std::time::SystemTime) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(".");
    s.push(crate::util::time::backup_stamp(t));
    PathBuf::from(s)
}

/// A backup suffix as nats-server recognises one when purging: `YYYY.MM.DD.hh.mm.ss`, then
/// optionally `.` and 1 to 9 digits (Go's `2006:01:02:15:04:05.999999999` after the first
/// five dots become colons).
fn is_stamp(s: &str) -> bool {
    let mut parts = s.split('.');
    let widths = [4, 2, 2, 2, 2, 2];
    let ranges = [(0, 9999), (1, 12), (1, 31), (0, 23), (0, 59), (0, 59)];
    for (w, (lo, hi)) in widths.iter().zip(ranges) {
        let Some(p) = parts.next() else {
            return false;
        };
        if p.len() != *w || !p.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
        let n: u32 = p.parse().unwrap_or(u32::MAX);
        if n < lo || n > hi {
            return false;
        }
    }
    match (parts.next(), parts.next()) {
        (None, _) => true,
        (Some(f), None) => (1..=9).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_as_nats_server_parses_them() {
        assert!(is_stamp("2026.12.02.08.37.03.961596662"));
        assert!(is_stamp("2026.12.02.08.37.03"));
        assert!(is_stamp("2026.12.02.08.37.03.5"));
        assert!(!is_stamp("2026.13.02.08.37.03.961596662"));
        assert!(!is_stamp("2026.12.02.08.37"));
        assert!(!is_stamp("2026.12.02.08.37.03.1234567890"));
        assert!(!is_stamp("old"));
    }

    #[test]
    fn rotates_past_the_limit_and_keeps_max_num_files() {
        let dir = std::env::temp_dir().join(format!("natsd-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("n.log");
        let mut f = LogFile::open(&path).expect("open");
        let prefix = || "[1] ".to_string();
        // Another file whose name only looks alike is never touched.
        std::fs::write(dir.join("n.log.keep"), b"x").expect("write");
        for i in 0..40 {
            f.write_line(format!("[1] [INF] line {i:02} of some length\n").as_bytes());
            f.rotate_if_past(100, 3, &prefix);
        }
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("read")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        assert_eq!(names.len(), 4, "{names:?}");
        assert_eq!(names[0], "n.log");
        assert!(names[1].starts_with("n.log.20") && names[2].starts_with("n.log.20"));
        assert_eq!(names[3], "n.log.keep");
        let live = std::fs::read_to_string(&path).expect("read");
        assert!(
            live.starts_with("[1] [INF] Rotated log, backup saved as \""),
            "{live}"
        );
        assert!(live.contains("[INF] Purged log file \"n.log.20"), "{live}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
