//! natsd benchmark harness: compares NATS server binaries side by side over loopback.
//!
//! Self-contained: uses only the Rust standard library, so it builds whatever the main crate's
//! dependencies are. Speaks the raw NATS client protocol over TCP (TCP_NODELAY, big buffers).
//!
//! ```text
//! cargo run --release --example bench -- \
//!     --server target/release/natsd --server /usr/sbin/nats-server --rounds 3
//! ```
//!
//! For every round, every scenario and every server it starts a fresh server process
//! (`PATH -a 127.0.0.1 -p <free port>`), runs the scenario and kills the server. The order of the
//! servers alternates between rounds (round 1: A B, round 2: B A, ...) so that slow drifts of the
//! machine cancel out. Per scenario it reports the median over rounds and the ratio of each server
//! to the first one. See docs/benchmarks.md.
//!
//! Every loop is bounded in count and in time; child servers are killed on drop (also on error or
//! panic).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Tunables (identical for every server).

/// Size of the pre-built publish buffer written with one `write` call.
const PUB_CHUNK: usize = 64 * 1024;
/// The publisher appends `PING\r\n` after every this many bytes of PUB frames...
const FLOW_WINDOW: usize = 1024 * 1024;
/// ...and before writing past a PING it waits until at most this many PINGs are unanswered.
/// So at most ~FLOW_WINDOW * FLOW_MAX_OUTSTANDING bytes are in flight unprocessed.
const FLOW_MAX_OUTSTANDING: u64 = 1;
/// Read buffer per client connection.
const READ_BUF: usize = 256 * 1024;
/// After the publisher finished: stop waiting for deliveries when nothing arrived for this long...
const DRAIN_STALL: Duration = Duration::from_secs(3);
/// ...or after this long in total.
const DRAIN_MAX: Duration = Duration::from_secs(30);
/// Deadline for a flow-control / flush PONG.
const PONG_DEADLINE: Duration = Duration::from_secs(15);
/// Socket write timeout (a write blocked longer than this is reported as an error).
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);
/// Socket read timeout (how often blocked readers look at their stop flag).
const READ_POLL: Duration = Duration::from_millis(50);
/// How long a server may take to accept connections after start.
const SERVER_START_DEADLINE: Duration = Duration::from_secs(10);
/// Request/reply: requests not measured at the start (warm-up) and the maximum count.
const REQREP_WARMUP: usize = 500;
const REQREP_MAX: usize = 2_000_000;
/// Request/reply: a single request timing out after this is an error.
const REQ_TIMEOUT: Duration = Duration::from_secs(5);

const CONNECT_LINE: &[u8] =
    b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"echo\":false,\"protocol\":1}\r\nPING\r\n";

type Res<T> = Result<T, String>;

fn ioe(ctx: &str, e: io::Error) -> String {
    format!("{ctx}: {e}")
}

// ---------------------------------------------------------------------------------------------
// Server process management.

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(path: &str) -> Res<Server> {
        let port = free_port()?;
        let child = Command::new(path)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ioe(&format!("cannot start {path}"), e))?;
        let mut srv = Server { child, port };
        let addr = srv.addr();
        let deadline = Instant::now() + SERVER_START_DEADLINE;
        loop {
            if let Ok(Some(status)) = srv.child.try_wait() {
                return Err(format!("{path} exited during start-up: {status}"));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(srv);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{path} did not accept connections on port {} within {:?}",
                    srv.port, SERVER_START_DEADLINE
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Err if the server process has exited.
    fn check_alive(&mut self) -> Res<()> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(format!("server process exited: {status}")),
            _ => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Res<u16> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| ioe("bind 127.0.0.1:0", e))?;
    let port = l.local_addr().map_err(|e| ioe("local_addr", e))?.port();
    drop(l);
    Ok(port)
}

// ---------------------------------------------------------------------------------------------
// Minimal NATS protocol reader.

enum Ev<'a> {
    Msg {
        reply: Option<&'a [u8]>,
        payload: &'a [u8],
    },
    Pong,
    Err(&'a [u8]),
}

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

fn parse_usize(b: &[u8]) -> Option<usize> {
    if b.is_empty() || b.len() > 18 {
        return None;
    }
    let mut n = 0usize;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c - b'0') as usize;
    }
    Some(n)
}

impl Conn {
    /// Connects, reads INFO, sends CONNECT+PING and waits for PONG.
    fn open(addr: SocketAddr) -> Res<Conn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| ioe("connect", e))?;
        s.set_nodelay(true).map_err(|e| ioe("nodelay", e))?;
        s.set_read_timeout(Some(READ_POLL))
            .map_err(|e| ioe("read timeout", e))?;
        s.set_write_timeout(Some(WRITE_TIMEOUT))
            .map_err(|e| ioe("write timeout", e))?;
        let mut c = Conn {
            s,
            buf: vec![0; READ_BUF],
            start: 0,
            end: 0,
        };
        // INFO line first.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Some(nl) = c.buf[c.start..c.end].iter().position(|&b| b == b'\n') {
                if !c.buf[c.start..].starts_with(b"INFO") {
                    return Err("server did not start with INFO".into());
                }
                c.start += nl + 1;
                break;
            }
            if Instant::now() > deadline {
                return Err("no INFO from server".into());
            }
            c.read_some()?;
        }
        c.write(CONNECT_LINE)?;
        c.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
        Ok(c)
    }

    fn write(&mut self, b: &[u8]) -> Res<()> {
        self.s.write_all(b).map_err(|e| ioe("write", e))
    }

    /// Waits for `n` PONGs (ignoring MSGs), failing on -ERR, EOF or deadline.
    fn wait_pongs(&mut self, n: u64, deadline: Instant) -> Res<()> {
        let mut got = 0u64;
        let mut err = None;
        while got < n {
            self.pump(&mut |ev| match ev {
                Ev::Pong => got += 1,
                Ev::Err(e) => err = Some(String::from_utf8_lossy(e).into_owned()),
                Ev::Msg { .. } => {}
            })?;
            if let Some(e) = err.take() {
                return Err(format!("server error: {e}"));
            }
            if got < n && Instant::now() > deadline {
                return Err("timed out waiting for PONG".into());
            }
        }
        Ok(())
    }

    /// One read (may time out after READ_POLL: returns Ok(0)). EOF is an error.
    fn read_some(&mut self) -> Res<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < self.buf.len() / 4 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let n = self.buf.len() * 2;
            self.buf.resize(n, 0);
        }
        match self.s.read(&mut self.buf[self.end..]) {
            Ok(0) => Err("connection closed by server".into()),
            Ok(n) => {
                self.end += n;
                Ok(n)
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut =>
            {
                Ok(0)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(ioe("read", e)),
        }
    }

    /// Reads once and handles every complete operation in the buffer. Server PINGs are answered
    /// here. Returns the number of bytes read (0 on read timeout).
    fn pump(&mut self, f: &mut dyn FnMut(Ev)) -> Res<usize> {
        let n = self.read_some()?;
        let mut need_pong = false;
        loop {
            let avail = &self.buf[self.start..self.end];
            let nl = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => i,
                None => break,
            };
            let line = if nl > 0 && avail[nl - 1] == b'\r' {
                &avail[..nl - 1]
            } else {
                &avail[..nl]
            };
            let is_msg = line.starts_with(b"MSG ");
            if is_msg || line.starts_with(b"HMSG ") {
                // MSG <subject> <sid> [reply] <size> / HMSG <subject> <sid> [reply] <hdr> <total>
                let mut toks: [&[u8]; 6] = [&[]; 6];
                let mut k = 0;
                for t in line
                    .split(|&b| b == b' ' || b == b'\t')
                    .filter(|t| !t.is_empty())
                {
                    if k == 6 {
                        return Err(format!("bad MSG line: {}", String::from_utf8_lossy(line)));
                    }
                    toks[k] = t;
                    k += 1;
                }
                let fixed = if is_msg { 4 } else { 5 };
                if k != fixed && k != fixed + 1 {
                    return Err(format!("bad MSG line: {}", String::from_utf8_lossy(line)));
                }
                let size = parse_usize(toks[k - 1])
                    .ok_or_else(|| format!("bad MSG size: {}", String::from_utf8_lossy(line)))?;
                let reply = if k == fixed + 1 { Some(toks[3]) } else { None };
                let total = nl + 1 + size + 2;
                if avail.len() < total {
                    if total > self.buf.len() {
                        let n = total.next_power_of_two();
                        self.buf.resize(n, 0);
                    }
                    break;
                }
                let payload = &avail[nl + 1..nl + 1 + size];
                f(Ev::Msg { reply, payload });
                self.start += total;
                continue;
            }
            if line == b"PING" {
                need_pong = true;
            } else if line == b"PONG" {
                f(Ev::Pong);
            } else if line.starts_with(b"-ERR") {
                f(Ev::Err(line));
            } else if line.starts_with(b"+OK") || line.starts_with(b"INFO") || line.is_empty() {
                // ignored
            } else {
                return Err(format!(
                    "unexpected protocol line: {}",
                    String::from_utf8_lossy(&line[..line.len().min(80)])
                ));
            }
            self.start += nl + 1;
        }
        if need_pong {
            self.write(b"PONG\r\n")?;
        }
        Ok(n)
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios.

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    PubSub {
        payload: usize,
        subs: usize,
        queue: bool,
    },
    ReqRep,
}

struct Scenario {
    name: &'static str,
    desc: &'static str,
    kind: Kind,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "pubsub16",
        desc: "1 publisher -> 1 subscriber, 16 B payload",
        kind: Kind::PubSub {
            payload: 16,
            subs: 1,
            queue: false,
        },
    },
    Scenario {
        name: "pubsub1k",
        desc: "1 publisher -> 1 subscriber, 1 KiB payload",
        kind: Kind::PubSub {
            payload: 1024,
            subs: 1,
            queue: false,
        },
    },
    Scenario {
        name: "fanout8",
        desc: "1 publisher -> 8 subscribers on one subject, 16 B payload",
        kind: Kind::PubSub {
            payload: 16,
            subs: 8,
            queue: false,
        },
    },
    Scenario {
        name: "queue4",
        desc: "1 publisher -> 4 subscribers in one queue group, 16 B payload",
        kind: Kind::PubSub {
            payload: 16,
            subs: 4,
            queue: true,
        },
    },
    Scenario {
        name: "reqrep",
        desc: "sequential request/reply through one responder, 16 B",
        kind: Kind::ReqRep,
    },
];

#[derive(Default, Clone)]
struct RunResult {
    /// msgs/s delivered (pub/sub) or requests/s (reqrep)
    rate: f64,
    /// payload MB/s (10^6 bytes) delivered
    mbps: f64,
    /// rate at which the publisher wrote (msgs/s), pub/sub only
    pub_rate: f64,
    sent: u64,
    expected: u64,
    received: u64,
    secs: f64,
    /// latency percentiles in µs: p50, p99, p99.9 (reqrep only)
    lat: Option<[f64; 3]>,
    /// problems that make the figure suspect (loss, duplicates, server errors)
    errors: Vec<String>,
}

#[repr(align(64))]
struct Padded(AtomicU64);

struct SubOutcome {
    count: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    error: Option<String>,
}

fn run_subscriber(mut c: Conn, counter: Arc<Padded>, stop: Arc<AtomicBool>) -> SubOutcome {
    let mut count = 0u64;
    let mut first = None;
    let mut last = None;
    let mut error: Option<String> = None;
    // Bounded: exits on stop flag (set by main within DRAIN_MAX after publishing) or EOF/error.
    while !stop.load(Ordering::Relaxed) {
        let before = count;
        let mut err = None;
        let r = c.pump(&mut |ev| match ev {
            Ev::Msg { .. } => count += 1,
            Ev::Err(e) => err = Some(String::from_utf8_lossy(e).into_owned()),
            Ev::Pong => {}
        });
        if count != before {
            let now = Instant::now();
            if first.is_none() {
                first = Some(now);
            }
            last = Some(now);
            counter.0.store(count, Ordering::Relaxed);
        }
        if let Some(e) = err {
            error = Some(format!("subscriber got {e}"));
        }
        if let Err(e) = r {
            error = Some(match error {
                Some(prev) => format!("{prev}; then {e}"),
                None => format!("subscriber: {e}"),
            });
            break;
        }
    }
    SubOutcome {
        count,
        first,
        last,
        error,
    }
}

fn run_pubsub(
    srv: &mut Server,
    payload: usize,
    nsubs: usize,
    queue: bool,
    dur: Duration,
) -> Res<RunResult> {
    let addr = srv.addr();
    let subject = "bench.subj";
    let stop = Arc::new(AtomicBool::new(false));
    let mut counters = Vec::new();
    let mut handles = Vec::new();
    // Make sure subscriber threads are stopped whatever happens below.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _guard = StopOnDrop(stop.clone());

    for i in 0..nsubs {
        let mut c = Conn::open(addr)?;
        let sub = if queue {
            format!("SUB {subject} benchq {}\r\nPING\r\n", i + 1)
        } else {
            format!("SUB {subject} {}\r\nPING\r\n", i + 1)
        };
        c.write(sub.as_bytes())?;
        c.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
        let ctr = Arc::new(Padded(AtomicU64::new(0)));
        counters.push(ctr.clone());
        let st = stop.clone();
        handles.push(
            thread::Builder::new()
                .name(format!("sub{i}"))
                .spawn(move || run_subscriber(c, ctr, st))
                .map_err(|e| ioe("spawn", e))?,
        );
    }

    // Publisher: pre-built 64 KiB of whole PUB frames, written again and again.
    let mut p = Conn::open(addr)?;
    let mut frame = format!("PUB {subject} {payload}\r\n").into_bytes();
    frame.extend((0..payload).map(|i| b'a' + (i % 26) as u8));
    frame.extend_from_slice(b"\r\n");
    let per_chunk = (PUB_CHUNK / frame.len()).max(1) as u64;
    let mut chunk = Vec::with_capacity(frame.len() * per_chunk as usize + 6);
    for _ in 0..per_chunk {
        chunk.extend_from_slice(&frame);
    }
    let mut chunk_ping = chunk.clone();
    chunk_ping.extend_from_slice(b"PING\r\n");
    let chunks_per_ping = (FLOW_WINDOW / chunk.len()).max(1) as u64;

    let mut chunks = 0u64;
    let mut since_ping = 0u64;
    let mut pings = 0u64;
    let mut pongs = 0u64;
    let mut pub_err: Option<String> = None;
    let t0 = Instant::now();
    let t_end = t0 + dur;
    // Bounded by time: at most `dur` plus one PONG_DEADLINE per wait.
    let pub_result: Res<()> = (|| {
        while Instant::now() < t_end {
            chunks += 1;
            since_ping += 1;
            if since_ping == chunks_per_ping {
                since_ping = 0;
                p.write(&chunk_ping)?;
                pings += 1;
                let deadline = Instant::now() + PONG_DEADLINE;
                while pings - pongs > FLOW_MAX_OUTSTANDING {
                    p.pump(&mut |ev| match ev {
                        Ev::Pong => pongs += 1,
                        Ev::Err(e) => pub_err = Some(String::from_utf8_lossy(e).into_owned()),
                        Ev::Msg { .. } => {}
                    })?;
                    if let Some(e) = pub_err.take() {
                        return Err(format!("publisher got {e}"));
                    }
                    if Instant::now() > deadline {
                        return Err("publisher: flow-control PONG timed out".into());
                    }
                }
            } else {
                p.write(&chunk)?;
            }
        }
        // Flush: PING and wait for every outstanding PONG.
        p.write(b"PING\r\n")?;
        pings += 1;
        let outstanding = pings - pongs;
        p.wait_pongs(outstanding, Instant::now() + PONG_DEADLINE)
    })();
    let pub_secs = t0.elapsed().as_secs_f64();
    let sent = chunks * per_chunk;

    let mut res = RunResult {
        sent,
        ..Default::default()
    };
    res.pub_rate = sent as f64 / pub_secs;
    if let Err(e) = pub_result {
        res.errors.push(e);
    }
    res.expected = if queue { sent } else { sent * nsubs as u64 };

    // Drain: wait until everything arrived, progress stalls, or DRAIN_MAX.
    let drain_start = Instant::now();
    let mut last_total = u64::MAX;
    let mut last_progress = Instant::now();
    loop {
        let total: u64 = counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum();
        if total >= res.expected || handles.iter().all(|h| h.is_finished()) {
            break;
        }
        if total != last_total {
            last_total = total;
            last_progress = Instant::now();
        } else if last_progress.elapsed() > DRAIN_STALL {
            break;
        }
        if drain_start.elapsed() > DRAIN_MAX {
            break;
        }
        thread::sleep(Duration::from_millis(5));
    }
    // Give a moment for duplicates (queue) to show up, then stop the subscribers.
    if queue {
        thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let mut counts = Vec::new();
    for h in handles {
        let o = h
            .join()
            .map_err(|_| "subscriber thread panicked".to_string())?;
        counts.push(o.count);
        res.received += o.count;
        if let Some(f) = o.first {
            first = Some(first.map_or(f, |x: Instant| x.min(f)));
        }
        if let Some(l) = o.last {
            last = Some(last.map_or(l, |x: Instant| x.max(l)));
        }
        if let Some(e) = o.error {
            res.errors.push(e);
        }
    }
    if let Err(e) = srv.check_alive() {
        res.errors.push(e);
    }
    if res.received < res.expected {
        res.errors.push(format!(
            "lost {} of {} deliveries",
            res.expected - res.received,
            res.expected
        ));
    } else if res.received > res.expected {
        res.errors.push(format!(
            "{} deliveries more than expected {} (duplicates)",
            res.received - res.expected,
            res.expected
        ));
    }
    if !queue {
        for (i, c) in counts.iter().enumerate() {
            if *c != sent && res.received == res.expected {
                res.errors
                    .push(format!("subscriber {i} got {c}, expected {sent}"));
            }
        }
    }
    if let (Some(f), Some(l)) = (first, last) {
        res.secs = l.duration_since(f).as_secs_f64();
    }
    if res.secs > 0.0 {
        res.rate = res.received as f64 / res.secs;
        res.mbps = res.rate * payload as f64 / 1e6;
    } else {
        res.errors.push("no deliveries measured".into());
    }
    Ok(res)
}

fn run_reqrep(srv: &mut Server, dur: Duration) -> Res<RunResult> {
    let addr = srv.addr();
    let stop = Arc::new(AtomicBool::new(false));
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _guard = StopOnDrop(stop.clone());

    // Responder: replies to every request, one write per read batch.
    let mut resp = Conn::open(addr)?;
    resp.write(b"SUB bench.req 1\r\nPING\r\n")?;
    resp.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
    let st = stop.clone();
    let responder = thread::Builder::new()
        .name("responder".into())
        .spawn(move || -> Res<u64> {
            let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
            let mut n = 0u64;
            while !st.load(Ordering::Relaxed) {
                let mut err = None;
                resp.pump(&mut |ev| match ev {
                    Ev::Msg {
                        reply: Some(r),
                        payload,
                    } => {
                        out.extend_from_slice(b"PUB ");
                        out.extend_from_slice(r);
                        let _ = write!(DirectFmt(&mut out), " {}\r\n", payload.len());
                        out.extend_from_slice(payload);
                        out.extend_from_slice(b"\r\n");
                        n += 1;
                    }
                    Ev::Err(e) => err = Some(String::from_utf8_lossy(e).into_owned()),
                    _ => {}
                })?;
                if !out.is_empty() {
                    resp.write(&out)?;
                    out.clear();
                }
                if let Some(e) = err {
                    return Err(format!("responder got {e}"));
                }
            }
            Ok(n)
        })
        .map_err(|e| ioe("spawn", e))?;

    let mut req = Conn::open(addr)?;
    req.write(b"SUB _INBOX.bench.1 1\r\nPING\r\n")?;
    req.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
    let msg: &[u8] = b"PUB bench.req _INBOX.bench.1 16\r\n0123456789abcdef\r\n";
    let mut lat_ns: Vec<u32> = Vec::with_capacity(1 << 20);
    let mut errors = Vec::new();
    let mut done = 0usize;
    let mut t_start = Instant::now();
    let t_end = Instant::now() + dur + Duration::from_millis(50);
    // Bounded by REQREP_MAX, by time, and by REQ_TIMEOUT per request.
    let r: Res<()> = (|| {
        while done < REQREP_MAX + REQREP_WARMUP {
            if done == REQREP_WARMUP {
                t_start = Instant::now();
            }
            if done > REQREP_WARMUP && Instant::now() > t_end {
                break;
            }
            let t = Instant::now();
            req.write(msg)?;
            let mut got = false;
            let mut err = None;
            while !got {
                req.pump(&mut |ev| match ev {
                    Ev::Msg { .. } => got = true,
                    Ev::Err(e) => err = Some(String::from_utf8_lossy(e).into_owned()),
                    Ev::Pong => {}
                })?;
                if let Some(e) = err.take() {
                    return Err(format!("requester got {e}"));
                }
                if !got && t.elapsed() > REQ_TIMEOUT {
                    return Err(format!("request {done} timed out"));
                }
            }
            if done >= REQREP_WARMUP {
                lat_ns.push(t.elapsed().as_nanos().min(u32::MAX as u128) as u32);
            }
            done += 1;
        }
        Ok(())
    })();
    let secs = t_start.elapsed().as_secs_f64();
    if let Err(e) = r {
        errors.push(e);
    }
    stop.store(true, Ordering::Relaxed);
    match responder.join() {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => errors.push(e),
        Err(_) => errors.push("responder thread panicked".into()),
    }
    if let Err(e) = srv.check_alive() {
        errors.push(e);
    }
    let mut res = RunResult {
        errors,
        ..Default::default()
    };
    let n = lat_ns.len();
    res.sent = n as u64;
    res.received = n as u64;
    res.expected = n as u64;
    res.secs = secs;
    if n > 0 {
        lat_ns.sort_unstable();
        let pct = |q: f64| lat_ns[((n as f64 * q) as usize).min(n - 1)] as f64 / 1000.0;
        res.lat = Some([pct(0.50), pct(0.99), pct(0.999)]);
        res.rate = n as f64 / secs;
        res.mbps = res.rate * 16.0 / 1e6;
    } else {
        res.errors.push("no requests completed".into());
    }
    Ok(res)
}

/// `fmt::Write` adapter appending to a Vec<u8> without allocating.
struct DirectFmt<'a>(&'a mut Vec<u8>);
impl std::fmt::Write for DirectFmt<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

fn run_one(path: &str, sc: &Scenario, dur: Duration) -> RunResult {
    let mut srv = match Server::start(path) {
        Ok(s) => s,
        Err(e) => {
            return RunResult {
                errors: vec![e],
                ..Default::default()
            }
        }
    };
    let r = match sc.kind {
        Kind::PubSub {
            payload,
            subs,
            queue,
        } => run_pubsub(&mut srv, payload, subs, queue, dur),
        Kind::ReqRep => run_reqrep(&mut srv, dur),
    };
    drop(srv); // kill the server
    r.unwrap_or_else(|e| RunResult {
        errors: vec![e],
        ..Default::default()
    })
}

// ---------------------------------------------------------------------------------------------
// Reporting.

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn fmt_rate(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else if x >= 1e6 {
        format!("{:.3} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{:.0}", x)
    }
}

fn fmt_ratio(x: f64, base: f64) -> String {
    if x.is_nan() || base.is_nan() || base == 0.0 {
        "n/a".into()
    } else {
        format!("{:.2}x", x / base)
    }
}

/// Median over rounds of one metric, ignoring failed rounds.
fn med_of(runs: &[RunResult], f: impl Fn(&RunResult) -> Option<f64>) -> f64 {
    let mut v: Vec<f64> = runs
        .iter()
        .filter_map(&f)
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    median(&mut v)
}

fn spread(runs: &[RunResult], f: impl Fn(&RunResult) -> Option<f64>) -> String {
    let v: Vec<f64> = runs
        .iter()
        .filter_map(&f)
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    if v.len() < 2 {
        return "-".into();
    }
    let mn = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let mx = v.iter().cloned().fold(0.0, f64::max);
    let mut w = v.clone();
    let m = median(&mut w);
    format!("±{:.1}%", (mx - mn) / m * 50.0)
}

fn usage() -> ! {
    eprintln!(
        "usage: bench --server PATH [--server PATH ...] [--rounds N] [--duration SECS] [--scenario NAME ...]\n\
         scenarios: {}\n\
         Each server is started as `PATH -a 127.0.0.1 -p <free port>`; ratios are relative to the first --server.",
        SCENARIOS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
    );
    std::process::exit(2);
}

fn main() {
    let mut servers: Vec<String> = Vec::new();
    let mut rounds = 3usize;
    let mut dur = 3.0f64;
    let mut wanted: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("{name} needs a value");
                usage()
            })
        };
        match a.as_str() {
            "--server" | "-s" => servers.push(val("--server")),
            "--rounds" | "-r" => rounds = val("--rounds").parse().unwrap_or_else(|_| usage()),
            "--duration" | "-d" => dur = val("--duration").parse().unwrap_or_else(|_| usage()),
            "--scenario" => wanted.extend(
                val("--scenario")
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            ),
            "-h" | "--help" => usage(),
            _ => {
                eprintln!("unknown argument {a}");
                usage()
            }
        }
    }
    if servers.is_empty() || rounds == 0 || !(dur > 0.0 && dur <= 600.0) {
        usage();
    }
    for s in &servers {
        if !Path::new(s).exists() {
            eprintln!("server binary {s} does not exist");
            std::process::exit(2);
        }
    }
    let scenarios: Vec<&Scenario> = if wanted.is_empty() {
        SCENARIOS.iter().collect()
    } else {
        wanted
            .iter()
            .map(|w| {
                SCENARIOS.iter().find(|s| s.name == w).unwrap_or_else(|| {
                    eprintln!("unknown scenario {w}");
                    usage()
                })
            })
            .collect()
    };
    // Labels: file name, made unique.
    let mut labels: Vec<String> = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for s in &servers {
        let base = Path::new(s)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| s.clone());
        let n = seen.entry(base.clone()).or_insert(0);
        *n += 1;
        labels.push(if *n == 1 { base } else { format!("{base}#{n}") });
    }
    let duration = Duration::from_secs_f64(dur);
    println!(
        "natsd bench: {} server(s), {} round(s), {:.1} s per run, scenarios: {}",
        servers.len(),
        rounds,
        dur,
        scenarios
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for (l, s) in labels.iter().zip(&servers) {
        println!("  {l} = {s}");
    }
    println!();

    // results[scenario][server] = runs
    let mut results: Vec<Vec<Vec<RunResult>>> =
        vec![vec![Vec::new(); servers.len()]; scenarios.len()];
    for round in 0..rounds {
        // Alternate order: round 1 A B C, round 2 C B A, ...
        let order: Vec<usize> = if round % 2 == 0 {
            (0..servers.len()).collect()
        } else {
            (0..servers.len()).rev().collect()
        };
        for (si, sc) in scenarios.iter().enumerate() {
            for &k in &order {
                let r = run_one(&servers[k], sc, duration);
                let mut line = format!("[round {}] {:<9} {:<16} ", round + 1, sc.name, labels[k]);
                if r.rate == 0.0 && !r.errors.is_empty() {
                    line.push_str("FAILED");
                } else if let Some([p50, p99, p999]) = r.lat {
                    let _ = write!(
                        line,
                        "{:>10} req/s  p50 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs  ({} reqs)",
                        fmt_rate(r.rate),
                        p50,
                        p99,
                        p999,
                        r.received
                    );
                } else {
                    let _ = write!(line, "{:>10} msgs/s {:>8.1} MB/s  (pub {} msgs/s, sent {}, received {}/{} in {:.2} s)",
                        fmt_rate(r.rate), r.mbps, fmt_rate(r.pub_rate), r.sent, r.received, r.expected, r.secs);
                }
                for e in &r.errors {
                    let _ = write!(line, "\n      ERROR: {e}");
                }
                println!("{line}");
                results[si][k].push(r);
                thread::sleep(Duration::from_millis(200));
            }
        }
    }

    // Per-scenario tables.
    let mut summary: Vec<(String, Vec<f64>)> = Vec::new();
    for (si, sc) in scenarios.iter().enumerate() {
        println!(
            "\n### {} — {} (median of {} rounds)\n",
            sc.name, sc.desc, rounds
        );
        let rs = &results[si];
        let failed = |k: usize| rs[k].iter().filter(|r| !r.errors.is_empty()).count();
        if sc.kind == Kind::ReqRep {
            println!("| server | req/s | p50 µs | p99 µs | p99.9 µs | req/s spread | p50 vs first | failed runs |");
            println!("|---|---|---|---|---|---|---|---|");
            let base = med_of(&rs[0], |r| r.lat.map(|l| l[0]));
            let mut rates = Vec::new();
            let mut p50s = Vec::new();
            let mut p99s = Vec::new();
            for k in 0..servers.len() {
                let rate = med_of(&rs[k], |r| Some(r.rate));
                let p = [0, 1, 2].map(|i| med_of(&rs[k], |r| r.lat.map(|l| l[i])));
                println!(
                    "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {}/{} |",
                    labels[k],
                    fmt_rate(rate),
                    p[0],
                    p[1],
                    p[2],
                    spread(&rs[k], |r| Some(r.rate)),
                    fmt_ratio(p[0], base),
                    failed(k),
                    rs[k].len()
                );
                rates.push(rate);
                p50s.push(p[0]);
                p99s.push(p[1]);
            }
            summary.push(("reqrep req/s".into(), rates));
            summary.push(("reqrep p50 µs (lower is better)".into(), p50s));
            summary.push(("reqrep p99 µs (lower is better)".into(), p99s));
        } else {
            println!(
                "| server | msgs/s | MB/s | publisher msgs/s | spread | vs first | failed runs |"
            );
            println!("|---|---|---|---|---|---|---|");
            let base = med_of(&rs[0], |r| Some(r.rate));
            let mut rates = Vec::new();
            for k in 0..servers.len() {
                let rate = med_of(&rs[k], |r| Some(r.rate));
                let mb = med_of(&rs[k], |r| Some(r.mbps));
                let pr = med_of(&rs[k], |r| Some(r.pub_rate));
                println!(
                    "| {} | {} | {:.1} | {} | {} | {} | {}/{} |",
                    labels[k],
                    fmt_rate(rate),
                    mb,
                    fmt_rate(pr),
                    spread(&rs[k], |r| Some(r.rate)),
                    fmt_ratio(rate, base),
                    failed(k),
                    rs[k].len()
                );
                rates.push(rate);
            }
            let unit = if let Kind::PubSub { payload: 1024, .. } = sc.kind {
                "msgs/s"
            } else if let Kind::PubSub {
                subs, queue: false, ..
            } = sc.kind
            {
                if subs > 1 {
                    "deliveries/s"
                } else {
                    "msgs/s"
                }
            } else {
                "msgs/s"
            };
            summary.push((format!("{} {}", sc.name, unit), rates.clone()));
            if let Kind::PubSub { payload, .. } = sc.kind {
                if payload >= 1024 {
                    summary.push((
                        format!("{} MB/s", sc.name),
                        rates.iter().map(|r| r * payload as f64 / 1e6).collect(),
                    ));
                }
            }
        }
        for k in 0..servers.len() {
            for (i, r) in rs[k].iter().enumerate() {
                for e in &r.errors {
                    println!("  note: {} run {}: {}", labels[k], i + 1, e);
                }
            }
        }
    }

    // Summary.
    println!(
        "\n### Summary (medians of {} rounds, {:.1} s per run)\n",
        rounds, dur
    );
    let mut hdr = String::from("| scenario |");
    let mut sep = String::from("|---|");
    for l in &labels {
        let _ = write!(hdr, " {l} |");
        sep.push_str("---|");
    }
    for l in labels.iter().skip(1) {
        let _ = write!(hdr, " {l}/{} |", labels[0]);
        sep.push_str("---|");
    }
    println!("{hdr}\n{sep}");
    for (name, vals) in &summary {
        let mut row = format!("| {name} |");
        for v in vals {
            if name.contains("µs") || name.ends_with("MB/s") {
                let _ = write!(row, " {v:.1} |");
            } else {
                let _ = write!(row, " {} |", fmt_rate(*v));
            }
        }
        for v in vals.iter().skip(1) {
            let _ = write!(row, " {} |", fmt_ratio(*v, vals[0]));
        }
        println!("{row}");
    }
}
