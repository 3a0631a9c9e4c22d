//! Log file rotation by size, as nats-server 2.15.1 (docs/nats-server-behaviour.md, "Log file
//! rotation"): `logfile_size_limit` / `--log_size_limit` rename a full log file to
//! `<file>.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn` and start a new one with `Rotated log, backup saved
//! as "<backup>"`; `logfile_max_num` N keeps the live file and N - 1 backups, deleting the
//! oldest with `Purged log file "<name>"`. The `natsd` binary, traffic traced with `-V`.

mod common;

use common::binary::{tmp_dir, write_conf, Proc, BIN};
use common::DEADLINE;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The files of `dir` whose name starts with `n.log`, sorted (the live one first).
fn logs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("n.log"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Everything the log files of `dir` hold.
fn all_text(dir: &Path) -> String {
    logs(dir)
        .iter()
        .map(|n| std::fs::read_to_string(dir.join(n)).unwrap_or_default())
        .collect()
}

/// Start natsd with `args` and wait for `Server is ready` in its (maybe rotated) log files;
/// returns it and its client address.
fn start(dir: &Path, args: &[&str]) -> (Proc, SocketAddr) {
    let n = Proc::spawn(BIN, args, Stdio::null());
    let end = Instant::now() + DEADLINE;
    loop {
        let text = all_text(dir);
        if text.contains("Server is ready") {
            let addr = text
                .lines()
                .find_map(|l| l.split("Listening for client connections on ").nth(1))
                .expect("listening line")
                .trim()
                .parse()
                .expect("address");
            return (n, addr);
        }
        assert!(Instant::now() < end, "natsd never got ready: {text}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A few traced client round trips: a few hundred bytes of log each.
fn traffic(addr: SocketAddr, clients: usize) {
    for _ in 0..clients {
        let s = TcpStream::connect(addr).expect("connect");
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut line = String::new();
        r.read_line(&mut line).expect("INFO");
        (&s).write_all(b"CONNECT {\"verbose\":false}\r\nPUB a 2\r\nhi\r\nPING\r\n")
            .expect("write");
        line.clear();
        r.read_line(&mut line).expect("PONG");
        assert_eq!(line, "PONG\r\n");
    }
}

/// Poll until `f` holds for the log files of `dir`.
fn wait_logs(dir: &Path, what: &str, f: impl Fn(&[String]) -> bool) -> Vec<String> {
    let end = Instant::now() + DEADLINE;
    loop {
        let v = logs(dir);
        if f(&v) {
            return v;
        }
        assert!(Instant::now() < end, "{what}: {v:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn is_backup(name: &str) -> bool {
    // n.log.YYYY.MM.DD.hh.mm.ss.nnnnnnnnn
    name.strip_prefix("n.log.").is_some_and(|s| {
        let parts: Vec<&str> = s.split('.').collect();
        parts.len() == 7
            && parts
                .iter()
                .zip([4, 2, 2, 2, 2, 2, 9])
                .all(|(p, w)| p.len() == w && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

#[test]
fn log_size_limit_rotates_and_max_num_prunes() {
    let dir = tmp_dir("logrot", "maxnum");
    let log: PathBuf = dir.join("n.log");
    let conf = write_conf(
        &dir,
        "n.conf",
        &format!(
            "listen: 127.0.0.1:-1\nlogfile: \"{}\"\nlogfile_size_limit: 1KB\nlogfile_max_num: 3\n",
            log.display()
        ),
    );
    let (mut n, addr) = start(&dir, &["-c", conf.to_str().expect("path"), "-V"]);
    traffic(addr, 12);
    // The live file and two backups; older backups were purged.
    wait_logs(&dir, "a purge", |_| {
        all_text(&dir).contains("[INF] Purged log file \"n.log.")
    });
    let files = wait_logs(&dir, "three files", |v| v.len() == 3);
    assert_eq!(files[0], "n.log");
    assert!(files[1..].iter().all(|f| is_backup(f)), "{files:?}");
    for b in &files[1..] {
        let size = std::fs::metadata(dir.join(b)).expect("backup").len();
        assert!(size > 1024, "{b} rotated before the limit: {size}");
    }
    let live = std::fs::read_to_string(&log).expect("live log");
    // nats-server ends this line in CRLF (`logDirect`).
    let first = live.split('\n').next().unwrap_or_default();
    let want = format!("[{}] ", n.pid());
    assert!(first.starts_with(&want), "{first}");
    let (_, rest) = first.split_once(" [INF] ").expect("an INF line");
    let backup = rest
        .strip_prefix("Rotated log, backup saved as \"")
        .and_then(|r| r.strip_suffix("\"\r"))
        .unwrap_or_else(|| panic!("{first:?}"));
    assert!(
        backup.starts_with(&format!("{}.", log.display())),
        "{backup}"
    );
    n.signal("-INT");
    n.wait_exit(DEADLINE, Duration::from_millis(100));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn log_size_limit_flag_without_max_num_keeps_every_backup() {
    let dir = tmp_dir("logrot", "flag");
    let log = dir.join("n.log");
    let log_s = log.to_str().expect("path").to_string();
    let (mut n, addr) = start(
        &dir,
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-l",
            &log_s,
            "--log_size_limit",
            "1024",
            "-V",
        ],
    );
    traffic(addr, 12);
    let files = wait_logs(&dir, "four backups", |v| v.len() >= 5);
    assert!(files[1..].iter().all(|f| is_backup(f)), "{files:?}");
    assert!(!all_text(&dir).contains("Purged log file"));
    n.signal("-INT");
    n.wait_exit(DEADLINE, Duration::from_millis(100));
    let _ = std::fs::remove_dir_all(&dir);
}
