//! A lean client for the JetStream benchmark: one blocking socket, the NATS text protocol by
//! hand, no runtime. Its cost per message is a few hundred nanoseconds, so the figures measure
//! the server rather than the client library.

use std::io::{BufRead, BufReader, Read, Write};

use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::Res;

/// How long any single read may block before the run fails.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// One delivered message, its buffers reused from one message to the next (no allocation
/// per message once they have grown).
#[derive(Default)]
pub struct Delivered {
    /// The subject it was delivered on.
    pub subject: String,
    /// The reply subject (empty: none).
    pub reply: String,
    /// The status of a header-only status message (`404 No Messages`, …), if any.
    pub status: Option<String>,
    pub payload: Vec<u8>,
    buf: Vec<u8>,
}

pub struct Raw {
    r: BufReader<TcpStream>,
    w: TcpStream,
    out: Vec<u8>,
    line: String,
    /// Requests made (each gets its own reply subject).
    requests: u64,
}

impl Raw {
    pub fn connect(port: u16) -> Res<Raw> {
        let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
        s.set_read_timeout(Some(READ_TIMEOUT))
            .map_err(|e| format!("timeout: {e}"))?;
        let w = s.try_clone().map_err(|e| format!("clone: {e}"))?;
        let mut c = Raw {
            r: BufReader::with_capacity(256 << 10, s),
            w,
            out: Vec::with_capacity(256 << 10),
            line: String::new(),
            requests: 0,
        };
        c.read_line()?; // INFO
        if !c.line.starts_with("INFO ") {
            return Err(format!("expected INFO, got {:?}", c.line));
        }
        c.out.extend_from_slice(
            b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"no_responders\":true,\"protocol\":1,\"lang\":\"raw\",\"version\":\"0\"}\r\nSUB _I.* 1\r\nPING\r\n",
        );
        c.flush()?;
        loop {
            c.read_line()?;
            if c.line.starts_with("PONG") {
                return Ok(c);
            }
            if c.line.starts_with("-ERR") {
                return Err(format!("server: {}", c.line.trim_end()));
            }
        }
    }

    fn read_line(&mut self) -> Res<()> {
        self.line.clear();
        match self.r.read_line(&mut self.line) {
            Ok(0) => Err("connection closed".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("read: {e}")),
        }
    }

    /// Queue a PUB (sent at the next [`Raw::flush`]).
    pub fn publish(&mut self, subject: &str, reply: Option<&str>, payload: &[u8]) {
        self.out.extend_from_slice(b"PUB ");
        self.out.extend_from_slice(subject.as_bytes());
        if let Some(r) = reply {
            self.out.push(b' ');
            self.out.extend_from_slice(r.as_bytes());
        }
        // The length without a temporary string.
        let _ = write!(self.out, " {}\r\n", payload.len());
        self.out.extend_from_slice(payload);
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn flush(&mut self) -> Res<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.w
            .write_all(&self.out)
            .map_err(|e| format!("write: {e}"))?;
        self.out.clear();
        Ok(())
    }

    /// Whether a message is already buffered (no read would block).
    pub fn buffered(&self) -> bool {
        !self.r.buffer().is_empty()
    }

    /// The next MSG or HMSG into `d` (answering PINGs; failing on -ERR).
    pub fn next(&mut self, d: &mut Delivered) -> Res<()> {
        loop {
            self.read_line()?;
            let l = self.line.trim_end();
            if l == "PING" {
                self.out.extend_from_slice(b"PONG\r\n");
                self.flush()?;
                continue;
            }
            // An INFO after the first: a cluster's servers changed (`connect_urls`).
            if l.starts_with("PONG") || l.starts_with("+OK") || l.starts_with("INFO ") {
                continue;
            }
            if l.starts_with("-ERR") {
                return Err(format!("server: {l}"));
            }
            let mut t = [""; 6];
            let mut n = 0;
            for tok in l.split(' ') {
                if n == t.len() {
                    return Err(format!("unexpected line {l:?}"));
                }
                t[n] = tok;
                n += 1;
            }
            let (reply, hdr, total) = match (t[0], n) {
                ("MSG", 4) => ("", 0, t[3]),
                ("MSG", 5) => (t[3], 0, t[4]),
                ("HMSG", 5) => ("", parse(t[3])?, t[4]),
                ("HMSG", 6) => (t[3], parse(t[4])?, t[5]),
                _ => return Err(format!("unexpected line {l:?}")),
            };
            let total = parse(total)?;
            d.subject.clear();
            d.subject.push_str(t[1]);
            d.reply.clear();
            d.reply.push_str(reply);
            d.buf.resize(total + 2, 0);
            self.r
                .read_exact(&mut d.buf)
                .map_err(|e| format!("read payload: {e}"))?;
            d.status = (hdr > 0).then(|| {
                let h = String::from_utf8_lossy(&d.buf[..hdr]);
                h.lines()
                    .next()
                    .and_then(|l| l.strip_prefix("NATS/1.0"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            });
            d.status = d.status.take().filter(|s| !s.is_empty());
            d.payload.clear();
            d.payload.extend_from_slice(&d.buf[hdr..total]);
            return Ok(());
        }
    }

    /// A request and its answer (the API).
    /// A request answered on a reply subject of its own: an answer left over from an
    /// earlier request (a clustered server may answer a retried creation twice) is skipped.
    pub fn request(&mut self, subject: &str, body: &[u8]) -> Res<Vec<u8>> {
        self.requests += 1;
        let reply = format!("_I.req{}", self.requests);
        self.publish(subject, Some(&reply), body);
        self.flush()?;
        let mut m = Delivered::default();
        self.next(&mut m)?;
        while m.subject != reply {
            self.next(&mut m)?;
        }
        if let Some(s) = m.status {
            return Err(format!("{subject}: status {s}"));
        }
        Ok(m.payload)
    }
}

fn parse(s: &str) -> Res<usize> {
    s.parse().map_err(|_| format!("bad number {s:?}"))
}

fn check_ack(m: &Delivered) -> Res<()> {
    if m.status.is_some() || !m.payload.starts_with(b"{\"stream\"") {
        return Err(format!(
            "not a PubAck: status {:?} {:?}",
            m.status,
            String::from_utf8_lossy(&m.payload)
        ));
    }
    Ok(())
}

/// Create stream `B` (subjects `b.>`).
pub fn create_stream(c: &mut Raw, storage: &str, replicas: usize) -> Res<()> {
    let body = format!(
        "{{\"name\":\"B\",\"subjects\":[\"b.>\"],\"storage\":\"{storage}\",\"retention\":\"limits\",\"discard\":\"old\",\"max_consumers\":-1,\"max_msgs\":-1,\"max_bytes\":-1,\"max_age\":0,\"num_replicas\":{replicas}}}"
    );
    let r = c.request("$JS.API.STREAM.CREATE.B", body.as_bytes())?;
    if !r.windows(7).any(|w| w == b"\"config") {
        return Err(format!("stream create: {}", String::from_utf8_lossy(&r)));
    }
    Ok(())
}

/// Publish with up to `window` acks outstanding until `dur` passed or `max` were acked.
pub fn publish(
    c: &mut Raw,
    size: usize,
    window: usize,
    dur: Duration,
    max: u64,
) -> Res<(u64, f64, f64)> {
    let payload = vec![b'x'; size];
    let t0 = Instant::now();
    let c0 = super::server_cpu();
    let (mut sent, mut acked) = (0u64, 0u64);
    let mut m = Delivered::default();
    loop {
        let more = sent < max && t0.elapsed() < dur;
        while more && sent - acked < window as u64 && sent < max {
            c.publish("b.x", Some("_I.a"), &payload);
            sent += 1;
        }
        c.flush()?;
        if acked == sent {
            break;
        }
        // Read what has arrived (at least one ack), then top the window up again.
        loop {
            c.next(&mut m)?;
            if m.subject != "_I.a" {
                continue; // a late answer to an earlier request
            }
            check_ack(&m)?;
            acked += 1;
            if acked == sent || !c.buffered() {
                break;
            }
        }
    }
    Ok((acked, t0.elapsed().as_secs_f64(), super::server_cpu() - c0))
}

/// Store `n` messages of `size`, then consume them with a durable explicit-ack pull consumer
/// in batches of `batch`, acking every message (acks go out with the next write).
pub fn pull(c: &mut Raw, size: usize, n: u64, batch: usize) -> Res<(u64, f64, f64)> {
    publish(c, size, 256, Duration::from_secs(120), n)?;
    let r = c.request(
        "$JS.API.CONSUMER.DURABLE.CREATE.B.P",
        br#"{"stream_name":"B","config":{"durable_name":"P","ack_policy":"explicit","deliver_policy":"all","replay_policy":"instant"}}"#,
    )?;
    if !r.windows(7).any(|w| w == b"\"config") {
        return Err(format!("consumer create: {}", String::from_utf8_lossy(&r)));
    }
    let req = format!("{{\"batch\":{batch},\"expires\":10000000000}}");
    let t0 = Instant::now();
    let c0 = super::server_cpu();
    let mut got = 0u64;
    let mut m = Delivered::default();
    while got < n {
        c.publish(
            "$JS.API.CONSUMER.MSG.NEXT.B.P",
            Some("_I.p"),
            req.as_bytes(),
        );
        c.flush()?;
        let want = (n - got).min(batch as u64);
        let mut this = 0u64;
        while this < want {
            c.next(&mut m)?;
            if let Some(s) = &m.status {
                return Err(format!("pull status {s} at {got}"));
            }
            if m.reply.is_empty() {
                return Err("message without an ack subject".into());
            }
            c.publish(&m.reply, None, b"");
            this += 1;
            got += 1;
            if !c.buffered() {
                c.flush()?;
            }
        }
        c.flush()?;
    }
    Ok((got, t0.elapsed().as_secs_f64(), super::server_cpu() - c0))
}
