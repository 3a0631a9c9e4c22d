//! The `natsd` binary (or any program) as a child process: run to completion with a deadline,
//! or kept running with its stderr lines collected, killed on drop.

use super::DEADLINE;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_natsd");

/// Run `bin args…` to completion, killing it and panicking if it takes longer than `within`
/// (polled every `poll`).
pub fn run_within(bin: &str, args: &[&str], within: Duration, poll: Duration) -> Output {
    run_within_env(bin, args, &[], within, poll)
}

/// A command for `bin` with environment variables set (`Some`) or removed (`None`).
pub fn command_env(bin: &str, env: &[(&str, Option<&str>)]) -> Command {
    let mut cmd = Command::new(bin);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd
}

/// `run_within` with environment variables set or removed (`command_env`).
pub fn run_within_env(
    bin: &str,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    within: Duration,
    poll: Duration,
) -> Output {
    let mut child = command_env(bin, env)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let end = Instant::now() + within;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{bin} {args:?} did not exit");
        }
        std::thread::sleep(poll);
    }
    child.wait_with_output().expect("output")
}

/// Run `natsd args…` to completion (for flags that print and exit), within [`DEADLINE`].
pub fn run(args: &[&str]) -> Output {
    run_within(BIN, args, DEADLINE, Duration::from_millis(10))
}

/// The lines read from `r` on a channel. The reader keeps draining to EOF even after the
/// receiver is gone, so the writer never blocks on a full pipe.
pub fn line_channel(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    rx
}

/// A fresh directory `<temp>/natsd-<prefix>-<name>-<pid>-<n>` (n: this process's count of calls).
pub fn tmp_dir(prefix: &str, name: &str) -> PathBuf {
    // Unique per call: tests of one binary run in parallel and reuse names (two tests'
    // nats-server "g0" once read each other's config file).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("natsd-{prefix}-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// Write `text` to `dir/name` (creating its directory); returns the path.
pub fn write_conf(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("create dir");
    }
    std::fs::write(&p, text).expect("write config");
    p
}

/// Poll the file `p` until it contains `want` (within [`DEADLINE`]); returns its text.
pub fn wait_file(p: &Path, want: &str) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        if text.contains(want) {
            return text;
        }
        assert!(
            Instant::now() < end,
            "{} never contained {want:?}: {text}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A child process killed (and reaped) on drop, also when the test panics.
pub struct Killed(pub Child);

impl Killed {
    /// Spawn `natsd args…` with stdin, stdout and stderr closed (it logs to a file).
    pub fn natsd_quiet(args: &[&str]) -> Killed {
        Killed(
            Command::new(BIN)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn natsd"),
        )
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running program, killed on drop; its stderr lines arrive on `lines`, and those read so
/// far are in `seen`.
pub struct Proc {
    pub child: Child,
    pub lines: Receiver<String>,
    pub seen: Vec<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// Spawn `exe args…` with stdin closed, stderr piped and stdout as given.
    pub fn spawn(exe: impl AsRef<OsStr>, args: &[&str], stdout: Stdio) -> Proc {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn natsd");
        let lines = line_channel(child.stderr.take().expect("stderr"));
        Proc {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Spawn `natsd args…` (stdout as given) and wait for a line ending in `ready`.
    pub fn ready(args: &[&str], stdout: Stdio, ready: &str) -> Proc {
        let mut n = Proc::spawn(BIN, args, stdout);
        n.wait_line(|l| l.ends_with(ready));
        n
    }

    /// Read stderr until a new line satisfies `f` (within [`DEADLINE`]); returns it.
    pub fn wait_line(&mut self, f: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if f(&l) {
                        return l;
                    }
                }
                Err(_) => panic!("line not seen; stderr so far: {:#?}", self.seen),
            }
        }
    }

    /// The first line seen so far that satisfies `f`, or else the next one to.
    pub fn find_line(&mut self, f: impl Fn(&str) -> bool) -> String {
        if let Some(l) = self.seen.iter().find(|l| f(l)) {
            return l.clone();
        }
        self.wait_line(f)
    }

    /// The address after `marker` in the first stderr line seen that has it.
    pub fn addr_after(&self, marker: &str) -> SocketAddr {
        addr_after(&self.seen, marker)
    }

    /// The client address from `Listening for client connections on …`.
    pub fn client_addr(&self) -> SocketAddr {
        self.addr_after("Listening for client connections on ")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `kill <sig> <pid>`, which must succeed.
    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([sig, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(st.success(), "kill {sig} failed");
    }

    /// Wait for the exit (within `within`), then collect the rest of stderr, waiting up to
    /// `drain` for each further line.
    pub fn wait_exit(&mut self, within: Duration, drain: Duration) -> ExitStatus {
        let end = Instant::now() + within;
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st;
            }
            assert!(Instant::now() < end, "natsd did not exit: {:#?}", self.seen);
            std::thread::sleep(Duration::from_millis(10));
        };
        while let Ok(l) = self.lines.recv_timeout(drain) {
            self.seen.push(l);
        }
        status
    }
}

/// The address after `marker` in the first of `lines` that has it.
pub fn addr_after(lines: &[String], marker: &str) -> SocketAddr {
    lines
        .iter()
        .find_map(|l| l.split(marker).nth(1))
        .unwrap_or_else(|| panic!("no {marker:?} line in {lines:#?}"))
        .trim()
        .parse()
        .expect("an address")
}
