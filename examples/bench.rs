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
//! (`PATH -a 127.0.0.1 -p <free port>`), runs the scenario and kills the server. The cluster
//! scenarios (`route16`, `route1k`, `route_reqrep`, `subs100k`, `mesh20`) start 2 or 20 servers of
//! the same binary with `-m <port> --cluster nats://127.0.0.1:<port> --cluster_name benchc
//! [--routes nats-route://127.0.0.1:<seed port>]`. The gateway scenarios (`gw16`, `gw1k`,
//! `gw_reqrep`) start two 1-node clusters of the same binary joined by a gateway: `-c <file>`
//! with a `gateway {}` block each (names `benchga`/`benchgb`, each dialling the other), and
//! wait until each server's `/gatewayz` shows an outbound and an inbound gateway to the other.
//! The order of the
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
    /// Monitoring (HTTP) port, 0 if none.
    http: u16,
    /// Cluster (route) port, 0 if none.
    route: u16,
}

/// Name of the cluster in the multi-server scenarios.
const CLUSTER_NAME: &str = "benchc";

impl Server {
    /// Single server: `PATH -a 127.0.0.1 -p <port>`, waits until it accepts clients.
    fn start(path: &str) -> Res<Server> {
        let port = free_ports(1)?[0];
        let mut srv = Self::spawn(
            path,
            &["-a", "127.0.0.1", "-p", &port.to_string()],
            port,
            0,
            0,
        )?;
        srv.wait_port(port, path)?;
        Ok(srv)
    }

    /// Cluster member: `PATH -a 127.0.0.1 -p P -m H --cluster nats://127.0.0.1:R
    /// --cluster_name benchc [--routes nats-route://127.0.0.1:SEED]`. Does not wait.
    /// `ports` = [client, http, route].
    fn spawn_cluster(path: &str, ports: [u16; 3], seed: Option<u16>) -> Res<Server> {
        let [p, h, r] = ports;
        let (ps, hs) = (p.to_string(), h.to_string());
        let cl = format!("nats://127.0.0.1:{r}");
        let mut args: Vec<&str> = vec![
            "-a",
            "127.0.0.1",
            "-p",
            &ps,
            "-m",
            &hs,
            "--cluster",
            &cl,
            "--cluster_name",
            CLUSTER_NAME,
        ];
        let seed_url = seed.map(|s| format!("nats-route://127.0.0.1:{s}"));
        if let Some(u) = &seed_url {
            args.push("--routes");
            args.push(u);
        }
        Self::spawn(path, &args, p, h, r)
    }

    fn spawn(path: &str, args: &[&str], port: u16, http: u16, route: u16) -> Res<Server> {
        let child = Command::new(path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ioe(&format!("cannot start {path}"), e))?;
        Ok(Server {
            child,
            port,
            http,
            route,
        })
    }

    /// Waits until `port` accepts TCP connections (SERVER_START_DEADLINE).
    fn wait_port(&mut self, port: u16, path: &str) -> Res<()> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + SERVER_START_DEADLINE;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("{path} exited during start-up: {status}"));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{path} did not accept connections on port {port} within {:?}",
                    SERVER_START_DEADLINE
                ));
            }
            thread::sleep(Duration::from_millis(5));
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

/// `n` distinct free ports (all listeners are held until every port is chosen).
fn free_ports(n: usize) -> Res<Vec<u16>> {
    let mut ls = Vec::with_capacity(n);
    let mut ports = Vec::with_capacity(n);
    for _ in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| ioe("bind 127.0.0.1:0", e))?;
        ports.push(l.local_addr().map_err(|e| ioe("local_addr", e))?.port());
        ls.push(l);
    }
    drop(ls);
    Ok(ports)
}

/// Tiny HTTP/1.0 GET on 127.0.0.1:`port`; returns the body of a 200 response.
fn http_get(port: u16, path: &str, timeout: Duration) -> Res<String> {
    let deadline = Instant::now() + timeout;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| ioe("http connect", e))?;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| ioe("read timeout", e))?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| ioe("write timeout", e))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .map_err(|e| ioe("http write", e))?;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut tmp = [0u8; 16 * 1024];
    // Bounded by `deadline`; stops at EOF or when Content-Length bytes of body are in.
    loop {
        match s.read(&mut tmp) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::TimedOut
                    || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ioe("http read", e)),
        }
        if let Some(h) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..h]).to_ascii_lowercase();
            if let Some(cl) = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
            {
                if buf.len() >= h + 4 + cl {
                    break;
                }
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "GET {path} on port {port}: no complete response within {timeout:?}"
            ));
        }
    }
    let h = find(&buf, b"\r\n\r\n").ok_or_else(|| format!("GET {path}: bad HTTP response"))?;
    let status =
        String::from_utf8_lossy(&buf[..buf[..h].iter().position(|&b| b == b'\r').unwrap_or(h)])
            .into_owned();
    if !status.contains(" 200") {
        return Err(format!("GET {path} on port {port}: {status}"));
    }
    Ok(String::from_utf8_lossy(&buf[h + 4..]).into_owned())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The first numeric value of `"key"` in a JSON text (whitespace-tolerant, no full parser).
fn json_num(body: &str, key: &str) -> Option<f64> {
    let pat = format!("\"{key}\"");
    let mut from = 0;
    while let Some(i) = body[from..].find(&pat) {
        let rest = body[from + i + pat.len()..].trim_start();
        from += i + pat.len();
        if let Some(v) = rest.strip_prefix(':') {
            let v = v.trim_start();
            let end = v
                .find(|c: char| {
                    !(c.is_ascii_digit()
                        || c == '.'
                        || c == '-'
                        || c == 'e'
                        || c == 'E'
                        || c == '+')
                })
                .unwrap_or(v.len());
            if let Ok(x) = v[..end].parse::<f64>() {
                return Some(x);
            }
        }
    }
    None
}

/// How many servers the server with monitoring port `http` has routes to: the distinct
/// `remote_id`s of its `/routez` (with route pooling, nats-server 2.10+ and natsd keep
/// several routes to each peer, and `/varz` `routes` counts them all).
fn route_peers(http: u16) -> Res<f64> {
    let body = http_get(http, "/routez", Duration::from_secs(2))?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/routez is not JSON: {e}"))?;
    let peers: std::collections::HashSet<&str> = v["routes"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["remote_id"].as_str()).collect())
        .unwrap_or_default();
    Ok(peers.len() as f64)
}

/// `/varz` field `key` of the server with monitoring port `http`.
fn varz_num(http: u16, key: &str) -> Res<f64> {
    let body = http_get(http, "/varz", Duration::from_secs(2))?;
    json_num(&body, key).ok_or_else(|| format!("/varz has no numeric field {key:?}"))
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
    /// Two clustered servers (B seeded to A): publisher on A -> subscriber on B.
    RoutePubSub {
        payload: usize,
    },
    /// Two clustered servers: requester on A, responder on B.
    RouteReqRep,
    /// Two 1-node clusters joined by a gateway: publisher on A -> subscriber on B.
    GwPubSub {
        payload: usize,
    },
    /// Two 1-node clusters joined by a gateway: requester on A, responder on B.
    GwReqRep,
    /// A hub (A) and its leaf (B): publisher on A -> subscriber on B.
    LeafPubSub {
        payload: usize,
    },
    /// Two clustered servers: 100,000 SUBs on A until B delivers to the last one.
    Subs100k,
    /// `n` servers all seeded to the first: time until every /routez has routes to n-1 peers.
    Mesh {
        n: usize,
    },
}

impl Kind {
    fn payload(self) -> usize {
        match self {
            Kind::PubSub { payload, .. }
            | Kind::RoutePubSub { payload }
            | Kind::GwPubSub { payload }
            | Kind::LeafPubSub { payload } => payload,
            _ => 16,
        }
    }
    fn is_reqrep(self) -> bool {
        matches!(self, Kind::ReqRep | Kind::RouteReqRep | Kind::GwReqRep)
    }
    fn is_timed(self) -> bool {
        matches!(self, Kind::Subs100k | Kind::Mesh { .. })
    }
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
    Scenario {
        name: "route16",
        desc: "2 clustered servers: publisher on A -> subscriber on B, 16 B payload",
        kind: Kind::RoutePubSub { payload: 16 },
    },
    Scenario {
        name: "route1k",
        desc: "2 clustered servers: publisher on A -> subscriber on B, 1 KiB payload",
        kind: Kind::RoutePubSub { payload: 1024 },
    },
    Scenario {
        name: "route_reqrep",
        desc: "2 clustered servers: requester on A, responder on B, sequential, 16 B",
        kind: Kind::RouteReqRep,
    },
    Scenario {
        name: "gw16",
        desc: "2 one-node clusters joined by a gateway: publisher on A -> subscriber on B, 16 B",
        kind: Kind::GwPubSub { payload: 16 },
    },
    Scenario {
        name: "gw1k",
        desc: "2 one-node clusters joined by a gateway: publisher on A -> subscriber on B, 1 KiB",
        kind: Kind::GwPubSub { payload: 1024 },
    },
    Scenario {
        name: "gw_reqrep",
        desc: "2 one-node clusters joined by a gateway: requester on A, responder on B, 16 B",
        kind: Kind::GwReqRep,
    },
    Scenario {
        name: "leaf16",
        desc: "a hub and its leaf: publisher on the hub -> subscriber on the leaf, 16 B",
        kind: Kind::LeafPubSub { payload: 16 },
    },
    Scenario {
        name: "leaf1k",
        desc: "a hub and its leaf: publisher on the hub -> subscriber on the leaf, 1 KiB",
        kind: Kind::LeafPubSub { payload: 1024 },
    },
    Scenario {
        name: "subs100k",
        desc: "2 clustered servers: 100,000 SUBs on A until B delivers to the last one",
        kind: Kind::Subs100k,
    },
    Scenario {
        name: "mesh20",
        desc: "20 servers seeded to server 1 until every /routez has routes to 19 peers",
        kind: Kind::Mesh { n: 20 },
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
    /// subs100k / mesh20: the measured time in ms (None if it failed)
    ms: Option<f64>,
    /// subs100k: RSS in MB from /varz `mem` after: [A, B, A delta, B delta]
    rss: Option<[f64; 4]>,
    /// free-form details for the progress line
    info: String,
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

/// Waits until interest of `sub` in `subject` is visible where `probe` publishes: publishes
/// probes (each confirmed by PING/PONG) until `sub` receives one, then publishes a marker and
/// reads `sub` until the marker arrives, so that no probe is left in flight. Bounded: 15 s.
fn wait_interest(sub: &mut Conn, probe: &mut Conn, subject: &str) -> Res<Duration> {
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(15);
    let probe_msg = format!("PUB {subject} 5\r\nprobe\r\nPING\r\n");
    let mut probes = 0u64;
    loop {
        probe.write(probe_msg.as_bytes())?;
        probe.wait_pongs(1, Instant::now() + PONG_DEADLINE)?;
        probes += 1;
        let mut got = false;
        let mut err = None;
        // One read: returns after data or READ_POLL (50 ms).
        sub.pump(&mut |ev| match ev {
            Ev::Msg { .. } => got = true,
            Ev::Err(e) => err = Some(String::from_utf8_lossy(e).into_owned()),
            Ev::Pong => {}
        })?;
        if let Some(e) = err {
            return Err(format!("subscriber got {e} while waiting for interest"));
        }
        if got {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "interest in {subject} never crossed the route: {probes} probes published in 15 s, none delivered"
            ));
        }
    }
    let crossed = t0.elapsed();
    probe.write(format!("PUB {subject} 6\r\nmarker\r\nPING\r\n").as_bytes())?;
    probe.wait_pongs(1, Instant::now() + PONG_DEADLINE)?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = false;
    while !got {
        sub.pump(&mut |ev| {
            if let Ev::Msg { payload, .. } = ev {
                if payload == b"marker" {
                    got = true;
                }
            }
        })?;
        if !got && Instant::now() > deadline {
            return Err("marker after the interest probes was not delivered within 5 s".into());
        }
    }
    Ok(crossed)
}

/// Pub/sub on one server (`pub_addr == sub_addr`) or across a route (`cross`: subscriber
/// interest must first become visible at the publisher's server, see `wait_interest`).
#[allow(clippy::too_many_arguments)]
fn run_pubsub(
    srvs: &mut [Server],
    pub_addr: SocketAddr,
    sub_addr: SocketAddr,
    cross: bool,
    payload: usize,
    nsubs: usize,
    queue: bool,
    dur: Duration,
) -> Res<RunResult> {
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

    let mut probe = if cross {
        Some(Conn::open(pub_addr)?)
    } else {
        None
    };
    let mut cross_ms = Vec::new();
    for i in 0..nsubs {
        let mut c = Conn::open(sub_addr)?;
        let sub = if queue {
            format!("SUB {subject} benchq {}\r\nPING\r\n", i + 1)
        } else {
            format!("SUB {subject} {}\r\nPING\r\n", i + 1)
        };
        c.write(sub.as_bytes())?;
        c.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
        if let Some(pc) = probe.as_mut() {
            cross_ms.push(wait_interest(&mut c, pc, subject)?.as_secs_f64() * 1e3);
        }
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

    drop(probe);
    // Publisher: pre-built 64 KiB of whole PUB frames, written again and again.
    let mut p = Conn::open(pub_addr)?;
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
    if !cross_ms.is_empty() {
        res.info = format!(
            "interest crossed after {} ms",
            cross_ms
                .iter()
                .map(|m| format!("{m:.0}"))
                .collect::<Vec<_>>()
                .join("/")
        );
    }
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
    for srv in srvs.iter_mut() {
        if let Err(e) = srv.check_alive() {
            res.errors.push(e);
        }
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

/// Request/reply on one server (`req_addr == resp_addr`) or across a route (`cross`: the
/// requester first sends probe requests until one is answered, then a marker request whose reply
/// it waits for, so that both interests have crossed and no probe reply is in flight).
fn run_reqrep(
    srvs: &mut [Server],
    req_addr: SocketAddr,
    resp_addr: SocketAddr,
    cross: bool,
    dur: Duration,
) -> Res<RunResult> {
    let stop = Arc::new(AtomicBool::new(false));
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _guard = StopOnDrop(stop.clone());

    // Responder: replies to every request, one write per read batch.
    let mut resp = Conn::open(resp_addr)?;
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

    let mut req = Conn::open(req_addr)?;
    req.write(b"SUB _INBOX.bench.1 1\r\nPING\r\n")?;
    req.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
    let mut info = String::new();
    if cross {
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_secs(15);
        let mut probes = 0u64;
        let mut got = false;
        // Probe requests, each waited for up to ~100 ms, until one is answered.
        while !got {
            req.write(b"PUB bench.req _INBOX.bench.1 5\r\nprobe\r\n")?;
            probes += 1;
            let t = Instant::now();
            while !got && t.elapsed() < Duration::from_millis(100) {
                req.pump(&mut |ev| {
                    if let Ev::Msg { .. } = ev {
                        got = true
                    }
                })?;
            }
            if !got && Instant::now() > deadline {
                return Err(format!(
                    "request/reply interest never crossed the route: {probes} probe requests in 15 s, no reply"
                ));
            }
        }
        let crossed = t0.elapsed();
        req.write(b"PUB bench.req _INBOX.bench.1 6\r\nmarker\r\n")?;
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = false;
        while !got {
            req.pump(&mut |ev| {
                if let Ev::Msg { payload, .. } = ev {
                    if payload == b"marker" {
                        got = true;
                    }
                }
            })?;
            if !got && Instant::now() > deadline {
                return Err(
                    "reply to the marker request after the probes not received within 5 s".into(),
                );
            }
        }
        info = format!(
            "interest crossed after {:.0} ms",
            crossed.as_secs_f64() * 1e3
        );
    }
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
    for srv in srvs.iter_mut() {
        if let Err(e) = srv.check_alive() {
            errors.push(e);
        }
    }
    let mut res = RunResult {
        errors,
        info,
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

/// Starts two clustered servers of `path`: A, then (once A's route port accepts) B seeded to A.
/// Returns when both accept client connections. Interest crossing is checked by the scenario.
fn start_pair(path: &str) -> Res<Vec<Server>> {
    let p = free_ports(6)?;
    let mut a = Server::spawn_cluster(path, [p[0], p[1], p[2]], None)?;
    a.wait_port(a.port, path)?;
    a.wait_port(a.route, path)?;
    let mut b = Server::spawn_cluster(path, [p[3], p[4], p[5]], Some(a.route))?;
    b.wait_port(b.port, path)?;
    Ok(vec![a, b])
}

/// Deadline for the gateway pair to connect both ways.
const GW_DEADLINE: Duration = Duration::from_secs(20);

/// Starts two 1-node clusters of `path` joined by a gateway (A = `benchga`, B = `benchgb`,
/// each configured with the other): `PATH -c <file> -a 127.0.0.1 -p P -m H`. Returns when
/// each `/gatewayz` shows an outbound and an inbound gateway to the other.
/// `path -c <file with body> -a 127.0.0.1 -p client -m http`, once it accepts clients (the
/// file, named after `tag`, is removed then).
fn spawn_with_conf(path: &str, body: &str, tag: u16, client: u16, http: u16) -> Res<Server> {
    let conf = std::env::temp_dir().join(format!("natsd-bench-{}-{tag}.conf", std::process::id()));
    std::fs::write(&conf, body).map_err(|e| ioe(&format!("write {}", conf.display()), e))?;
    let conf_s = conf.to_string_lossy().into_owned();
    let (ps, hs) = (client.to_string(), http.to_string());
    let srv = Server::spawn(
        path,
        &["-c", &conf_s, "-a", "127.0.0.1", "-p", &ps, "-m", &hs],
        client,
        http,
        0,
    );
    let mut srv = match srv {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&conf);
            return Err(e);
        }
    };
    let up = srv.wait_port(client, path);
    let _ = std::fs::remove_file(&conf);
    up?;
    Ok(srv)
}

/// A hub (A, `leafnodes { listen }`) and a leaf of it (B, one remote, the defaults: s2_auto
/// compression, which picks S2 framing without compression on loopback for both servers);
/// returns once A's `/leafz` lists it.
fn start_leaf_pair(path: &str) -> Res<Vec<Server>> {
    let p = free_ports(5)?;
    let (leaf_port, mut srvs) = (p[4], Vec::new());
    let hub = format!("leafnodes {{\n  listen: \"127.0.0.1:{leaf_port}\"\n}}\n");
    srvs.push(spawn_with_conf(path, &hub, leaf_port, p[0], p[1])?);
    let leaf =
        format!("leafnodes {{\n  remotes: [ {{ url: \"nats://127.0.0.1:{leaf_port}\" }} ]\n}}\n");
    srvs.push(spawn_with_conf(path, &leaf, p[2], p[2], p[3])?);
    let deadline = Instant::now() + GW_DEADLINE;
    loop {
        let body = http_get(srvs[0].http, "/leafz", Duration::from_secs(2)).unwrap_or_default();
        let flat: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        if flat.contains("\"leafnodes\":1") {
            return Ok(srvs);
        }
        srvs[0].check_alive()?;
        srvs[1].check_alive()?;
        if Instant::now() > deadline {
            return Err(format!(
                "{path}: the leaf did not connect within {GW_DEADLINE:?}: {flat}"
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

fn start_gw_pair(path: &str) -> Res<Vec<Server>> {
    let p = free_ports(6)?;
    let names = ["benchga", "benchgb"];
    let mut srvs = Vec::new();
    for i in 0..2 {
        let (client, http, gw, other_gw) =
            (p[3 * i], p[3 * i + 1], p[3 * i + 2], p[3 * (1 - i) + 2]);
        let body = format!(
            "gateway {{\n  name: {}\n  listen: \"127.0.0.1:{gw}\"\n  gateways: [ {{ name: {}, url: \"nats://127.0.0.1:{other_gw}\" }} ]\n}}\n",
            names[i],
            names[1 - i]
        );
        srvs.push(spawn_with_conf(path, &body, gw, client, http)?);
    }
    let deadline = Instant::now() + GW_DEADLINE;
    for i in 0..2 {
        let want_out = format!("\"outbound_gateways\":{{\"{}\"", names[1 - i]);
        let want_in = format!("\"inbound_gateways\":{{\"{}\"", names[1 - i]);
        loop {
            let body =
                http_get(srvs[i].http, "/gatewayz", Duration::from_secs(2)).unwrap_or_default();
            let flat: String = body.chars().filter(|c| !c.is_whitespace()).collect();
            if flat.contains(&want_out) && flat.contains(&want_in) {
                break;
            }
            srvs[i].check_alive()?;
            if Instant::now() > deadline {
                return Err(format!(
                    "{path}: gateway {} not connected both ways within {GW_DEADLINE:?}: {flat}",
                    names[i]
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(srvs)
}

/// Number of subscriptions in `subs100k`.
const SUBS_N: usize = 100_000;
/// Deadline for `subs100k` (from the first SUB until B delivers to the last one).
const SUBS_DEADLINE: Duration = Duration::from_secs(60);
/// Deadline for `mesh20` (from launching the first server until every one has all routes).
const MESH_DEADLINE: Duration = Duration::from_secs(60);

fn run_subs100k(path: &str) -> Res<RunResult> {
    let mut srvs = start_pair(path)?;
    let (a_addr, b_addr) = (srvs[0].addr(), srvs[1].addr());
    let (a_http, b_http) = (srvs[0].http, srvs[1].http);
    let mut res = RunResult::default();
    let stop = Arc::new(AtomicBool::new(false));
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _guard = StopOnDrop(stop.clone());

    // Cluster is up when a subscription on A is visible on B.
    let mut ca = Conn::open(a_addr)?;
    ca.write(b"SUB probe.a 200000\r\nPING\r\n")?;
    ca.wait_pongs(1, Instant::now() + Duration::from_secs(5))?;
    let mut cb = Conn::open(b_addr)?;
    wait_interest(&mut ca, &mut cb, "probe.a")?;
    let mem0 = [varz_num(a_http, "mem")?, varz_num(b_http, "mem")?];

    let mut subs: Vec<u8> = Vec::with_capacity(SUBS_N * 24);
    for i in 0..SUBS_N {
        let _ = write!(DirectFmt(&mut subs), "SUB s.{i} {}\r\n", i + 1);
    }
    let t0 = Instant::now();
    // Publisher on B: `PUB s.99999` about every 1 ms until stopped (bounded by SUBS_DEADLINE).
    let st = stop.clone();
    let last_subj = format!("PUB s.{} 4\r\nlast\r\n", SUBS_N - 1);
    let publisher = thread::Builder::new()
        .name("subs-pub".into())
        .spawn(move || -> Res<u64> {
            let mut n = 0u64;
            while !st.load(Ordering::Relaxed)
                && t0.elapsed() < SUBS_DEADLINE + Duration::from_secs(1)
            {
                cb.write(last_subj.as_bytes())?;
                n += 1;
                thread::sleep(Duration::from_millis(1));
            }
            // Confirm B is still fine with this connection.
            cb.write(b"PING\r\n")?;
            cb.wait_pongs(1, Instant::now() + PONG_DEADLINE)?;
            Ok(n)
        })
        .map_err(|e| ioe("spawn", e))?;

    let r: Res<(f64, f64)> = (|| {
        for chunk in subs.chunks(256 * 1024) {
            ca.write(chunk)?;
        }
        ca.write(b"PING\r\n")?;
        let mut local = None;
        let mut got = false;
        let mut err = None;
        // Bounded by SUBS_DEADLINE.
        while !got {
            ca.pump(&mut |ev| match ev {
                Ev::Pong => {
                    if local.is_none() {
                        local = Some(t0.elapsed())
                    }
                }
                Ev::Msg { payload, .. } => {
                    if payload == b"last" {
                        got = true
                    }
                }
                Ev::Err(e) => err = Some(String::from_utf8_lossy(e).into_owned()),
            })?;
            if let Some(e) = err.take() {
                return Err(format!("subscribing client on A got {e}"));
            }
            if !got && t0.elapsed() > SUBS_DEADLINE {
                return Err(format!(
                    "B never delivered to s.{} within {SUBS_DEADLINE:?} (A answered the PING after the SUBs: {})",
                    SUBS_N - 1,
                    match local {
                        Some(d) => format!("yes, after {:.0} ms", d.as_secs_f64() * 1e3),
                        None => "no".into(),
                    }
                ));
            }
        }
        let total = t0.elapsed();
        let local = local.unwrap_or(total);
        Ok((total.as_secs_f64() * 1e3, local.as_secs_f64() * 1e3))
    })();
    stop.store(true, Ordering::Relaxed);
    let pubs = match publisher.join() {
        Ok(Ok(n)) => n,
        Ok(Err(e)) => {
            res.errors.push(format!("publisher on B: {e}"));
            0
        }
        Err(_) => {
            res.errors.push("publisher thread panicked".into());
            0
        }
    };
    match r {
        Ok((total, local)) => {
            res.ms = Some(total);
            res.info = format!(
                "{total:.0} ms until B delivers to s.{} (A's PONG after the SUBs: {local:.0} ms; {pubs} publishes on B)",
                SUBS_N - 1
            );
        }
        Err(e) => res.errors.push(e),
    }
    // RSS after (and the B-side subscription count, for information).
    match (varz_num(a_http, "mem"), varz_num(b_http, "mem")) {
        (Ok(ma), Ok(mb)) => {
            let m = 1e6;
            res.rss = Some([ma / m, mb / m, (ma - mem0[0]) / m, (mb - mem0[1]) / m]);
        }
        (Err(e), _) | (_, Err(e)) => res.errors.push(format!("RSS after: {e}")),
    }
    if let Ok(n) = varz_num(b_http, "subscriptions") {
        let _ = write!(res.info, "; B /varz subscriptions {n:.0}");
    }
    for srv in srvs.iter_mut() {
        if let Err(e) = srv.check_alive() {
            res.errors.push(e);
        }
    }
    Ok(res)
}

fn run_mesh(path: &str, n: usize) -> Res<RunResult> {
    let p = free_ports(3 * n)?;
    let ports = |k: usize| [p[3 * k], p[3 * k + 1], p[3 * k + 2]];
    let want = (n - 1) as f64;
    let t0 = Instant::now();
    let mut srvs: Vec<Server> = Vec::with_capacity(n);
    srvs.push(Server::spawn_cluster(path, ports(0), None)?);
    let seed = srvs[0].route;
    srvs[0].wait_port(seed, path)?;
    let t_seed = t0.elapsed();
    for k in 1..n {
        srvs.push(Server::spawn_cluster(path, ports(k), Some(seed))?);
    }
    let mut done: Vec<Option<Duration>> = vec![None; n];
    let mut last: Vec<String> = vec!["no answer yet".into(); n];
    let mut over: Vec<String> = Vec::new();
    // Poll every server's /varz every ~20 ms; bounded by MESH_DEADLINE.
    loop {
        for k in 0..n {
            if done[k].is_some() {
                continue;
            }
            if let Err(e) = srvs[k].check_alive() {
                return Err(format!("server {} of {n}: {e}", k + 1));
            }
            match route_peers(srvs[k].http) {
                Ok(r) => {
                    last[k] = format!("{r}");
                    if r == want {
                        done[k] = Some(t0.elapsed());
                    } else if r > want && over.len() < 5 {
                        over.push(format!("server {} reported {r} route peers", k + 1));
                    }
                }
                Err(e) => last[k] = e,
            }
        }
        if done.iter().all(|d| d.is_some()) {
            break;
        }
        if t0.elapsed() > MESH_DEADLINE {
            let missing: Vec<String> = (0..n)
                .filter(|&k| done[k].is_none())
                .map(|k| format!("#{}: {}", k + 1, last[k]))
                .collect();
            // Diagnostic only: what /routez says (may not exist).
            let rz: Vec<String> = (0..n)
                .map(
                    |k| match http_get(srvs[k].http, "/routez", Duration::from_secs(1)) {
                        Ok(b) => json_num(&b, "num_routes").map_or("?".into(), |x| format!("{x}")),
                        Err(e) if e.contains("404") => "404".into(),
                        Err(_) => "err".into(),
                    },
                )
                .collect();
            return Err(format!(
                "no full mesh within {MESH_DEADLINE:?}: {} of {n} servers never reported routes to {} peers in /routez; last values: {}; (for information, /routez num_routes per server: {})",
                missing.len(),
                n - 1,
                missing.join(", "),
                rz.join(" ")
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
    let total = done.iter().flatten().max().copied().unwrap_or_default();
    let mut res = RunResult {
        ms: Some(total.as_secs_f64() * 1e3),
        ..Default::default()
    };
    res.info = format!(
        "{:.0} ms until all {n} servers have routes to {} peers (seed route port up after {:.0} ms)",
        total.as_secs_f64() * 1e3,
        n - 1,
        t_seed.as_secs_f64() * 1e3
    );
    // Still a full mesh (no route dropped or duplicated) a moment later?
    thread::sleep(Duration::from_millis(200));
    for (k, srv) in srvs.iter_mut().enumerate().take(n) {
        match route_peers(srv.http) {
            Ok(r) if r == want => {}
            Ok(r) => res.errors.push(format!(
                "server {} reported {r} route peers 200 ms after the mesh was complete",
                k + 1
            )),
            Err(e) => res.errors.push(format!("server {}: {e}", k + 1)),
        }
        if let Err(e) = srv.check_alive() {
            res.errors.push(format!("server {}: {e}", k + 1));
        }
    }
    for o in over {
        res.errors
            .push(format!("{o} (more than {}) while meshing", n - 1));
    }
    Ok(res)
}

fn run_one(path: &str, sc: &Scenario, dur: Duration) -> RunResult {
    let r = match sc.kind {
        Kind::PubSub {
            payload,
            subs,
            queue,
        } => Server::start(path).and_then(|srv| {
            let addr = srv.addr();
            let mut srvs = vec![srv];
            run_pubsub(&mut srvs, addr, addr, false, payload, subs, queue, dur)
        }),
        Kind::ReqRep => Server::start(path).and_then(|srv| {
            let addr = srv.addr();
            let mut srvs = vec![srv];
            run_reqrep(&mut srvs, addr, addr, false, dur)
        }),
        Kind::RoutePubSub { payload } => start_pair(path).and_then(|mut srvs| {
            let (a, b) = (srvs[0].addr(), srvs[1].addr());
            run_pubsub(&mut srvs, a, b, true, payload, 1, false, dur)
        }),
        Kind::RouteReqRep => start_pair(path).and_then(|mut srvs| {
            let (a, b) = (srvs[0].addr(), srvs[1].addr());
            run_reqrep(&mut srvs, a, b, true, dur)
        }),
        Kind::GwPubSub { payload } => start_gw_pair(path).and_then(|mut srvs| {
            let (a, b) = (srvs[0].addr(), srvs[1].addr());
            run_pubsub(&mut srvs, a, b, true, payload, 1, false, dur)
        }),
        Kind::GwReqRep => start_gw_pair(path).and_then(|mut srvs| {
            let (a, b) = (srvs[0].addr(), srvs[1].addr());
            run_reqrep(&mut srvs, a, b, true, dur)
        }),
        Kind::LeafPubSub { payload } => start_leaf_pair(path).and_then(|mut srvs| {
            let (a, b) = (srvs[0].addr(), srvs[1].addr());
            run_pubsub(&mut srvs, a, b, true, payload, 1, false, dur)
        }),
        Kind::Subs100k => run_subs100k(path),
        Kind::Mesh { n } => run_mesh(path, n),
    };
    // (servers are killed when their `Server` values drop inside the calls above)
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

/// Fixed-point number, or `n/a` when there is no figure (every run failed).
fn fmt_num(x: f64, prec: usize) -> String {
    if x.is_finite() {
        format!("{x:.prec$}")
    } else {
        "n/a".into()
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
         Each server is started as `PATH -a 127.0.0.1 -p <free port>` (cluster scenarios add\n\
         `-m <port> --cluster nats://127.0.0.1:<port> --cluster_name benchc [--routes nats-route://127.0.0.1:<seed>]`);\n\
         ratios are relative to the first --server.",
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
                if sc.kind.is_timed() {
                    match r.ms {
                        None => line.push_str("FAILED"),
                        Some(ms) => {
                            let _ = write!(line, "{ms:>8.0} ms  ({})", r.info);
                            if let Some([a, b, da, db]) = r.rss {
                                let _ = write!(
                                    line,
                                    "  RSS A {a:.1} MB ({da:+.1}), B {b:.1} MB ({db:+.1})"
                                );
                            }
                        }
                    }
                } else if r.rate == 0.0 && !r.errors.is_empty() {
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
                    if !r.info.is_empty() {
                        let _ = write!(line, "  ({})", r.info);
                    }
                } else {
                    let _ = write!(line, "{:>10} msgs/s {:>8.1} MB/s  (pub {} msgs/s, sent {}, received {}/{} in {:.2} s)",
                        fmt_rate(r.rate), r.mbps, fmt_rate(r.pub_rate), r.sent, r.received, r.expected, r.secs);
                    if !r.info.is_empty() {
                        let _ = write!(line, "  ({})", r.info);
                    }
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
    // (row name, medians per server, plain number format)
    let mut summary: Vec<(String, Vec<f64>, bool)> = Vec::new();
    for (si, sc) in scenarios.iter().enumerate() {
        println!(
            "\n### {} — {} (median of {} rounds)\n",
            sc.name, sc.desc, rounds
        );
        let rs = &results[si];
        let failed = |k: usize| rs[k].iter().filter(|r| !r.errors.is_empty()).count();
        if sc.kind.is_timed() {
            let subs = sc.kind == Kind::Subs100k;
            if subs {
                println!("| server | ms (lower is better) | spread | vs first (lower is better) | RSS A MB after | RSS B MB after | A RSS growth MB | B RSS growth MB | failed runs |");
                println!("|---|---|---|---|---|---|---|---|---|");
            } else {
                println!("| server | ms (lower is better) | spread | vs first (lower is better) | failed runs |");
                println!("|---|---|---|---|---|");
            }
            let base = med_of(&rs[0], |r| r.ms);
            let mut mss = Vec::new();
            let mut rss_a = Vec::new();
            let mut rss_b = Vec::new();
            let mut grow_a = Vec::new();
            let mut grow_b = Vec::new();
            for k in 0..servers.len() {
                let ms = med_of(&rs[k], |r| r.ms);
                let mut row = format!(
                    "| {} | {} | {} | {} |",
                    labels[k],
                    fmt_num(ms, 0),
                    spread(&rs[k], |r| r.ms),
                    fmt_ratio(ms, base)
                );
                if subs {
                    let m = [0, 1, 2, 3].map(|i| med_of(&rs[k], |r| r.ms.and(r.rss).map(|x| x[i])));
                    let _ = write!(
                        row,
                        " {} | {} | {} | {} |",
                        fmt_num(m[0], 1),
                        fmt_num(m[1], 1),
                        fmt_num(m[2], 1),
                        fmt_num(m[3], 1)
                    );
                    rss_a.push(m[0]);
                    rss_b.push(m[1]);
                    grow_a.push(m[2]);
                    grow_b.push(m[3]);
                }
                let _ = write!(row, " {}/{} |", failed(k), rs[k].len());
                println!("{row}");
                mss.push(ms);
            }
            summary.push((format!("{} ms (lower is better)", sc.name), mss, true));
            if subs {
                summary.push((
                    format!("{} RSS A MB after (lower is better)", sc.name),
                    rss_a,
                    true,
                ));
                summary.push((
                    format!("{} RSS B MB after (lower is better)", sc.name),
                    rss_b,
                    true,
                ));
                summary.push((
                    format!("{} RSS A growth MB (lower is better)", sc.name),
                    grow_a,
                    true,
                ));
                summary.push((
                    format!("{} RSS B growth MB (lower is better)", sc.name),
                    grow_b,
                    true,
                ));
            }
        } else if sc.kind.is_reqrep() {
            println!("| server | req/s | p50 µs | p99 µs | p99.9 µs | req/s spread | p50 vs first | failed runs |");
            println!("|---|---|---|---|---|---|---|---|");
            let base = med_of(&rs[0], |r| r.lat.map(|l| l[0]));
            let mut rates = Vec::new();
            let mut p50s = Vec::new();
            let mut p99s = Vec::new();
            let mut p999s = Vec::new();
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
                p999s.push(p[2]);
            }
            summary.push((format!("{} req/s", sc.name), rates, false));
            summary.push((format!("{} p50 µs (lower is better)", sc.name), p50s, true));
            summary.push((format!("{} p99 µs (lower is better)", sc.name), p99s, true));
            summary.push((
                format!("{} p99.9 µs (lower is better)", sc.name),
                p999s,
                true,
            ));
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
            let unit = if let Kind::PubSub {
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
            summary.push((format!("{} {}", sc.name, unit), rates.clone(), false));
            let payload = sc.kind.payload();
            if payload >= 1024 {
                summary.push((
                    format!("{} MB/s", sc.name),
                    rates.iter().map(|r| r * payload as f64 / 1e6).collect(),
                    true,
                ));
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
    for (name, vals, plain) in &summary {
        let mut row = format!("| {name} |");
        for v in vals {
            if *plain {
                let _ = write!(row, " {} |", fmt_num(*v, 1));
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
