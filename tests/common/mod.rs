//! Shared helpers for black-box tests: embedded servers on free ports, a raw-protocol client
//! with deadlines, a tiny HTTP GET, and `wait_for` instead of sleeps.
#![allow(dead_code)]

pub mod accounts_web;
pub mod auth;
pub mod binary;
pub mod callout;
pub mod cluster;
pub mod cutlink;
pub mod gw;
pub mod jsc;
pub mod jsproc;
pub mod jsref;
pub mod leaf;
pub mod mixed;
pub mod natsserver;
pub mod pki;
pub mod resolver;
pub mod s2proxy;
pub mod tlsclient;
pub mod traffic;

use natsd::{Options, Server};
use std::future::Future;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The CONNECT real clients send: not verbose, headers and no_responders on, protocol 1.
pub const CLIENT_CONNECT: &str =
    r#"{"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"protocol":1}"#;

pub const DEADLINE: Duration = Duration::from_secs(10);

pub async fn start(opts: Options) -> Server {
    Server::start(opts).await.expect("server starts")
}

pub async fn start_default() -> Server {
    start(Options::local()).await
}

/// A request (a `$JS.API` call, or a publish into a stream) and its JSON answer, within 10 s.
#[allow(dead_code)]
pub async fn js_api(nc: &async_nats::Client, subject: &str, body: &str) -> serde_json::Value {
    let m = tokio::time::timeout(
        Duration::from_secs(10),
        nc.request(subject.to_string(), bytes::Bytes::from(body.to_string())),
    )
    .await
    .unwrap_or_else(|_| panic!("{subject}: no answer in time"))
    .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&m.payload).unwrap_or_else(|e| panic!("{subject}: not JSON: {e}"))
}

/// Options from config-file text, listening on a free port of 127.0.0.1.
#[allow(dead_code)]
pub fn conf_opts(conf: &str) -> Options {
    let mut o = natsd::config::file::load_str(conf)
        .unwrap_or_else(|e| panic!("config loads: {e}\n{conf}"))
        .options;
    o.host = "127.0.0.1".into();
    o.port = 0;
    o
}

/// A client of `srv` logged in as user `u` with password `u`.
#[allow(dead_code)]
pub async fn user(srv: &Server, u: &str) -> async_nats::Client {
    async_nats::ConnectOptions::with_user_and_password(u.into(), u.into())
        .connect(srv.client_url())
        .await
        .unwrap_or_else(|e| panic!("connect as {u}: {e}"))
}

/// A fresh, empty JetStream store directory named after `name`, unique in this test process.
#[allow(dead_code)]
pub fn js_dir(name: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("natsd-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A local server with JetStream storing in `dir` (restarts reuse it), and a client.
#[allow(dead_code)]
pub async fn start_js_in(dir: &std::path::Path) -> (Server, async_nats::Client) {
    let srv = start(Options {
        jetstream: Some(natsd::config::JetStreamOpts {
            store_dir: Some(dir.to_path_buf()),
            ..Default::default()
        }),
        ..Options::local()
    })
    .await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    (srv, nc)
}

/// A local server with JetStream in a fresh directory named after `name`, and a client:
/// (server, client, store directory to remove at the end).
#[allow(dead_code)]
pub async fn start_js(name: &str) -> (Server, async_nats::Client, std::path::PathBuf) {
    let dir = js_dir(name);
    let (srv, nc) = start_js_in(&dir).await;
    (srv, nc, dir)
}

/// A port that was free a moment ago (the probe listener is closed before returning), for
/// the few tests that must name a port before the server using it starts (a restart at the
/// same address, peers that name each other). Prefer port 0 / `-1` everywhere else.
///
/// The port is taken outside the kernel's ephemeral range (below it, or above it when that gap
/// is the larger): a listener bound to port 0, and the local end of every outgoing connection,
/// get their port from that range, so no other test running in parallel takes this one before
/// its user binds it. Ports are handed out in turn from a per-process random start, so two calls
/// in one run never return the same port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = port_gap(
        &std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default(),
    );
    let bind = |p: u16| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok();
    if high < low + 1_000 {
        // No room outside the ephemeral range: fall back to the kernel's choice.
        return std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
    }
    let span = high - low;
    static START: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        std::process::id().wrapping_mul(2_654_435_761)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
    }) % span;
    for _ in 0..span {
        let p = low + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        if bind(p as u16) {
            return p as u16;
        }
    }
    panic!("no free port in {low}..{high}")
}

/// The larger run of ports `[low, high)` outside the ephemeral range that
/// `/proc/sys/net/ipv4/ip_local_port_range` (`"first last"`) names, above the well-known and
/// common fixed ports (10000). Without a readable range, Linux's default (32768–60999).
pub fn port_gap(range: &str) -> (u32, u32) {
    const FLOOR: u32 = 10_000;
    let mut it = range.split_whitespace().map(str::parse::<u32>);
    let (first, last) = match (it.next(), it.next()) {
        (Some(Ok(f)), Some(Ok(l))) if f <= l => (f, l),
        _ => (32_768, 60_999),
    };
    let below = (FLOOR, first.max(FLOOR));
    let above: (u32, u32) = ((last + 1).max(FLOOR), 65_536);
    if below.1 - below.0 >= above.1.saturating_sub(above.0) {
        below
    } else {
        above
    }
}

/// A local server with a monitor port (on a random port).
pub async fn start_monitored() -> Server {
    Server::start(Options {
        http_port: Some(0),
        ..Options::local()
    })
    .await
    .expect("natsd starts")
}

/// A server's monitor address.
pub fn http_addr(s: &Server) -> std::net::SocketAddr {
    s.http_addr().expect("monitor port")
}

/// Poll `f` until it returns true or the deadline passes.
pub async fn wait_for<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = Instant::now() + DEADLINE;
    loop {
        if f().await {
            return;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A subscriber on `subject` (sid 9) that never reads, with a tiny receive buffer so the
/// server's pending bytes for it grow almost at once. Returns it with its cid.
pub async fn stuck_subscriber(srv: &Server, subject: &str) -> (Raw, u64) {
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let stream = sock.connect(srv.client_addr()).await.expect("connect");
    let mut r = Raw {
        stream,
        buf: Vec::new(),
    };
    let info = r.line().await;
    assert!(info.starts_with("INFO "), "{info}");
    let cid = serde_json::from_str::<serde_json::Value>(&info[5..]).expect("INFO")["client_id"]
        .as_u64()
        .expect("client_id");
    r.send(&format!(
        "CONNECT {CLIENT_CONNECT}\r\nSUB {subject} 9\r\nPING\r\n"
    ))
    .await;
    r.expect("PONG").await;
    (r, cid)
}

/// A raw NATS protocol connection.
pub struct Raw {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

impl Raw {
    /// Connect and read the INFO line (returned as JSON).
    pub async fn connect(srv: &Server) -> (Raw, serde_json::Value) {
        let stream = TcpStream::connect(srv.client_addr())
            .await
            .expect("connect");
        stream.set_nodelay(true).ok();
        let mut r = Raw {
            stream,
            buf: Vec::new(),
        };
        let line = r.line().await;
        let json = line
            .strip_prefix("INFO ")
            .unwrap_or_else(|| panic!("expected INFO, got {line:?}"));
        let v = serde_json::from_str(json).expect("INFO is JSON");
        (r, v)
    }

    /// A raw client at `addr`: INFO read (it must be `INFO {…`), nothing sent.
    pub async fn at(addr: std::net::SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).ok();
        let mut r = Raw {
            stream,
            buf: Vec::new(),
        };
        let info = r.line().await;
        assert!(info.starts_with("INFO {"), "{info}");
        r
    }

    /// A raw connection to `addr`, nothing read or sent.
    pub async fn at_any(addr: std::net::SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).ok();
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    /// Connect, send CONNECT with `connect` JSON, and PING/PONG to be sure it was processed.
    pub async fn connected(srv: &Server, connect: &str) -> Raw {
        let (mut r, _) = Raw::connect(srv).await;
        r.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
        // In a cluster an async INFO (connect_urls) may come first.
        let l = r.next_non_ping().await;
        assert_eq!(l, "PONG");
        r
    }

    /// `connected` for any server's client address (nats-server's too).
    pub async fn connected_at(addr: std::net::SocketAddr, connect: &str) -> Raw {
        let mut r = Raw::at(addr).await;
        r.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
        let l = r.next_non_ping().await;
        assert_eq!(l, "PONG");
        r
    }

    /// `client` for any server's client address (nats-server's too).
    pub async fn client_at(addr: std::net::SocketAddr) -> Raw {
        Raw::connected_at(addr, CLIENT_CONNECT).await
    }

    /// CONNECT with the settings real clients use (not verbose, headers and no_responders on).
    pub async fn client(srv: &Server) -> Raw {
        Raw::connected(srv, CLIENT_CONNECT).await
    }

    pub async fn send(&mut self, s: &str) {
        self.send_bytes(s.as_bytes()).await;
    }

    pub async fn send_bytes(&mut self, b: &[u8]) {
        self.stream.write_all(b).await.expect("write");
    }

    /// Fill the buffer with more bytes; false on EOF or error.
    async fn fill(&mut self, until: Instant) -> bool {
        let mut tmp = vec![0u8; 65536];
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, self.stream.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) => false,
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
            Err(_) => panic!(
                "timed out; buffered: {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// Next line without CRLF (panics on timeout or EOF).
    pub async fn line(&mut self) -> String {
        self.try_line().await.expect("connection closed")
    }

    /// Next line, or None when the server closed the connection first.
    pub async fn try_line(&mut self) -> Option<String> {
        let until = Instant::now() + DEADLINE;
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..p]).into_owned();
                self.buf.drain(..p + 2);
                return Some(line);
            }
            if !self.fill(until).await {
                return None;
            }
        }
    }

    /// Exactly `n` bytes followed by CRLF (a message payload).
    pub async fn payload(&mut self, n: usize) -> Vec<u8> {
        let until = Instant::now() + DEADLINE;
        while self.buf.len() < n + 2 {
            assert!(self.fill(until).await, "closed while reading payload");
        }
        let p = self.buf[..n].to_vec();
        assert_eq!(&self.buf[n..n + 2], b"\r\n", "payload not followed by CRLF");
        self.buf.drain(..n + 2);
        p
    }

    /// The next line must equal `want`.
    pub async fn expect(&mut self, want: &str) {
        let got = self.line().await;
        assert_eq!(got, want);
    }

    /// Next line that is not a server PING (answered) or an async INFO (cluster changes).
    pub async fn next_non_ping(&mut self) -> String {
        loop {
            let l = self.line().await;
            if l == "PING" {
                self.send("PONG\r\n").await;
                continue;
            }
            if l.starts_with("INFO ") {
                continue;
            }
            return l;
        }
    }

    /// Read one `MSG` and its payload: (subject, sid, reply, payload).
    pub async fn msg(&mut self) -> (String, String, Option<String>, Vec<u8>) {
        let l = self.next_non_ping().await;
        let parts: Vec<&str> = l.split(' ').collect();
        assert_eq!(parts[0], "MSG", "expected MSG, got {l:?}");
        let (reply, size) = match parts.len() {
            4 => (None, parts[3]),
            5 => (Some(parts[3].to_string()), parts[4]),
            _ => panic!("bad MSG line {l:?}"),
        };
        let n: usize = size.parse().expect("size");
        let p = self.payload(n).await;
        (parts[1].to_string(), parts[2].to_string(), reply, p)
    }

    /// True once the server has closed the connection (reads and drops everything first).
    pub async fn closed(&mut self) -> bool {
        let until = Instant::now() + DEADLINE;
        loop {
            let mut tmp = vec![0u8; 65536];
            let left = until.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.stream.read(&mut tmp)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(n)) => self.buf.extend_from_slice(&tmp[..n]),
                Err(_) => return false,
            }
        }
    }

    /// PING and wait for the PONG, returning everything received before it (as text) and
    /// keeping what follows: a round trip that shows what our earlier ops produced.
    pub async fn sync(&mut self) -> String {
        self.send("PING\r\n").await;
        let until = Instant::now() + DEADLINE;
        loop {
            let at = if self.buf.starts_with(b"PONG\r\n") {
                Some(0)
            } else {
                self.buf
                    .windows(8)
                    .position(|w| w == b"\r\nPONG\r\n")
                    .map(|p| p + 2)
            };
            if let Some(p) = at {
                let before = String::from_utf8_lossy(&self.buf[..p]).into_owned();
                self.buf.drain(..p + 6);
                // The server's own PINGs (its ping timer, e.g. the first one that measures
                // RTT) are not what a test looks for: answer them and leave them out.
                let (before, pings) = strip_server_pings(&before);
                for _ in 0..pings {
                    self.send("PONG\r\n").await;
                }
                return before;
            }
            assert!(self.fill(until).await, "closed while waiting for PONG");
        }
    }

    /// PING and wait for PONG: everything sent before has been processed.
    pub async fn flush(&mut self) {
        self.send("PING\r\n").await;
        loop {
            let l = self.line().await;
            if l == "PONG" {
                return;
            }
        }
    }
}

/// GET a monitoring path; returns (status, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.expect("http connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("http write");
    let mut resp = Vec::new();
    tokio::time::timeout(DEADLINE, s.read_to_end(&mut resp))
        .await
        .expect("http timeout")
        .expect("http read");
    let text = String::from_utf8_lossy(&resp).into_owned();
    let status: u16 = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    let body = if text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(&body)
    } else {
        body
    };
    (status, body)
}

fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

pub async fn http_json(addr: std::net::SocketAddr, path: &str) -> serde_json::Value {
    let (status, body) = http_get(addr, path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Publish probes on `from` until `to` (subscribed to `subject`) gets one — interest has
/// crossed — then a fence, read up to by `to`, so no stray probe is left behind.
pub async fn until_delivered(from: &mut Raw, to: &mut Raw, subject: &str) {
    assert!(
        delivered_within(from, to, subject, Duration::from_secs(10)).await,
        "interest for {subject} never crossed"
    );
}

/// [`until_delivered`], false when no probe got through within `within` (the caller explains).
pub async fn delivered_within(
    from: &mut Raw,
    to: &mut Raw,
    subject: &str,
    within: Duration,
) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        from.send(&format!("PUB {subject} 5\r\nprobe\r\n")).await;
        from.flush().await;
        let got = to.sync().await;
        if got.contains(&format!("MSG {subject} ")) {
            // Probes still in flight travel the same path as a last "fence" message: read
            // up to the fence, and nothing stray is left behind.
            from.send(&format!("PUB {subject} 5\r\nfence\r\n")).await;
            from.flush().await;
            loop {
                let (s, _, _, p) = to.msg().await;
                if s == subject && p == b"fence" {
                    return true;
                }
            }
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `text` (whole protocol lines) without the server's `PING` lines, and how many there were;
/// a payload line after `MSG`/`HMSG` is kept whatever it says.
fn strip_server_pings(text: &str) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut pings = 0;
    let mut payload = false;
    for line in text.split_inclusive("\r\n") {
        if !payload && line == "PING\r\n" {
            pings += 1;
            continue;
        }
        payload = !payload && (line.starts_with("MSG ") || line.starts_with("HMSG "));
        out.push_str(line);
    }
    (out, pings)
}

/// The next message of a pull consumer: a fetch of one, which must bring one.
pub async fn fetch_one(
    c: &async_nats::jetstream::consumer::PullConsumer,
) -> async_nats::jetstream::Message {
    use futures::StreamExt;
    c.fetch()
        .max_messages(1)
        .messages()
        .await
        .expect("fetch")
        .next()
        .await
        .expect("a message")
        .expect("not an error")
}
