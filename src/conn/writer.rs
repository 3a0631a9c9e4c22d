//! The writer task of a connection: waits for a kick, swaps the outbound buffer out and writes
//! it under the write deadline. On close it flushes what is queued and shuts the socket down.
//!
//! A write that misses its deadline is a slow consumer, counted by connection kind. What
//! follows is the connection's [`WriteTimeoutPolicy`], as nats-server's `write_timeout`:
//! clients are closed; routes and gateways keep going (counted once per episode) as long as
//! the late write moved some bytes, and are closed only when it moved none.

use super::{CloseReason, Conn, ConnKind, Switch};
use crate::compress::Encoder;
use bytes::BytesMut;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// How long a closing connection may take to flush its last bytes.
const FINAL_FLUSH: Duration = Duration::from_secs(1);

/// What a write past its deadline does (nats-server's `write_timeout`: `close` / `retry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteTimeoutPolicy {
    /// Close for clients, retry for routes, gateways and leafnodes.
    #[default]
    Default,
    Close,
    Retry,
}

impl WriteTimeoutPolicy {
    /// The value of a `write_timeout` key.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "default" => Some(Self::Default),
            "close" => Some(Self::Close),
            "retry" => Some(Self::Retry),
            _ => None,
        }
    }

    /// Whether a late write that moved some bytes closes a connection of `kind`.
    pub fn closes(self, kind: ConnKind) -> bool {
        match self {
            Self::Close => true,
            Self::Retry => false,
            Self::Default => !matches!(kind, ConnKind::Route | ConnKind::Gateway | ConnKind::Leaf),
        }
    }
}

/// Slow-consumer events by connection kind (`/varz` `slow_consumers` and
/// `slow_consumer_stats`).
#[derive(Default, Debug)]
pub struct SlowConsumerStats {
    pub total: AtomicU64,
    pub clients: AtomicU64,
    pub routes: AtomicU64,
    pub gateways: AtomicU64,
    pub leafs: AtomicU64,
}

impl SlowConsumerStats {
    /// A missed write deadline of a `kind` connection, as nats-server's `handleWriteTimeout`
    /// counts it: the total every time, a route by kind once per episode (`again`: the
    /// episode had already begun), other kinds every time.
    pub fn count_missed_deadline(&self, kind: ConnKind, again: bool) {
        if again && kind == ConnKind::Route {
            self.total.fetch_add(1, Relaxed);
        } else {
            self.count(kind);
        }
    }

    /// One slow-consumer event of a `kind` connection.
    pub fn count(&self, kind: ConnKind) {
        self.total.fetch_add(1, Relaxed);
        match kind {
            ConnKind::Client => &self.clients,
            ConnKind::Route => &self.routes,
            ConnKind::Gateway => &self.gateways,
            ConnKind::Leaf => &self.leafs,
            ConnKind::Internal => return,
        }
        .fetch_add(1, Relaxed);
    }
}

/// How a connection's writer treats a late write.
#[derive(Clone)]
pub struct WriteCfg {
    pub deadline: Duration,
    pub policy: WriteTimeoutPolicy,
    pub stats: Arc<SlowConsumerStats>,
}

/// Write `buf` whole, each partial write under `deadline` (shortened to [`FINAL_FLUSH`] once
/// the connection starts closing). Err(written) when a write missed it.
async fn write_within<W: AsyncWrite + Unpin>(
    conn: &Conn,
    w: &mut W,
    buf: &[u8],
    deadline: Duration,
) -> Result<std::io::Result<()>, usize> {
    let mut at = 0;
    let mut until = tokio::time::Instant::now() + deadline;
    let mut closing = conn.is_closed();
    while at < buf.len() {
        let wrote = tokio::select! {
            r = tokio::time::timeout_at(until, w.write(&buf[at..])) => r,
            _ = conn.closed(), if !closing => {
                closing = true;
                until = until.min(tokio::time::Instant::now() + FINAL_FLUSH);
                continue;
            }
        };
        match wrote {
            Ok(Ok(0)) => return Ok(Err(std::io::ErrorKind::WriteZero.into())),
            Ok(Ok(n)) => at += n,
            Ok(Err(e)) => return Ok(Err(e)),
            Err(_) => return Err(at),
        }
    }
    Ok(Ok(()))
}

/// A route's outbound compression (nats-server's `c.out.cw`): once switched on, every batch
/// the writer takes goes out as one complete S2 stream (as Go's `s2.Writer` `Reset` + `Write`
/// + `Close` per flush), built in a buffer kept across batches.
#[derive(Default)]
struct Compress {
    enc: Option<Encoder>,
    out: BytesMut,
}

/// A compressed batch buffer past this size is given back when a batch uses under a quarter.
const MAX_KEPT_COMPRESSED: usize = 4 * 1024 * 1024;

impl Compress {
    /// The bytes to write for `batch`: `batch` itself while nothing compresses, else the
    /// plain part before `switch` (if any) followed by the compressed rest.
    fn batch<'a>(&'a mut self, batch: &'a [u8], switch: Option<Switch>) -> &'a [u8] {
        if self.enc.is_none() && switch.is_none() {
            return batch;
        }
        if self.out.capacity() > MAX_KEPT_COMPRESSED && batch.len() < self.out.capacity() / 4 {
            self.out = BytesMut::new();
        }
        self.out.clear();
        let at = switch.map_or(batch.len(), |s| s.at.min(batch.len()));
        let (head, tail) = batch.split_at(at);
        match &mut self.enc {
            Some(enc) => enc.encode(head, &mut self.out),
            None => self.out.extend_from_slice(head),
        }
        if let Some(s) = switch {
            let enc = self.enc.get_or_insert_with(|| Encoder::new(s.level));
            enc.set_level(s.level);
            enc.encode(tail, &mut self.out);
        }
        &self.out
    }
}

pub async fn run<W: AsyncWrite + Unpin>(conn: Arc<Conn>, mut w: W, cfg: WriteCfg) {
    let mut spare = BytesMut::new();
    let mut compress = Compress::default();
    loop {
        let (closed, switch) = conn.out.take_switch(&mut spare);
        let data = compress.batch(&spare, switch);
        let mut at = 0;
        let mut late = false;
        while at < data.len() {
            let deadline = if closed { FINAL_FLUSH } else { cfg.deadline };
            match write_within(&conn, &mut w, &data[at..], deadline).await {
                Ok(Ok(())) => {
                    at = data.len();
                    conn.out.signal_drained();
                }
                Ok(Err(e)) => {
                    tracing::debug!("{} - write error: {e}", conn.log_prefix());
                    conn.close(CloseReason::WriteError);
                    return finish(&conn, w).await;
                }
                Err(written) => {
                    if closed || conn.is_closed() {
                        return finish(&conn, w).await;
                    }
                    let again = conn.out.set_slow(true);
                    cfg.stats.count_missed_deadline(conn.kind, again);
                    tracing::info!(
                        "{} - Slow Consumer {}: WriteDeadline of {:?} exceeded with {} chunks of {} total bytes.",
                        conn.log_prefix(),
                        if again { "State" } else { "Detected" },
                        cfg.deadline,
                        1,
                        data.len() - at
                    );
                    if written == 0 || cfg.policy.closes(conn.kind) {
                        conn.close(CloseReason::SlowConsumerWriteDeadline);
                        return finish(&conn, w).await;
                    }
                    at += written;
                    late = true;
                }
            }
        }
        if at > 0 && !late {
            conn.out.set_slow(false);
        }
        if closed {
            break;
        }
        tokio::select! {
            _ = conn.out.wait() => {}
            _ = conn.closed() => {}
        }
    }
    finish(&conn, w).await
}

async fn finish<W: AsyncWrite + Unpin>(conn: &Conn, mut w: W) {
    conn.out.release();
    let _ = tokio::time::timeout(FINAL_FLUSH, w.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Push;
    use tokio::io::AsyncReadExt;

    fn cfg(stats: &Arc<SlowConsumerStats>) -> WriteCfg {
        WriteCfg {
            deadline: Duration::from_millis(200),
            policy: WriteTimeoutPolicy::Default,
            stats: stats.clone(),
        }
    }

    fn conn(kind: ConnKind) -> Arc<Conn> {
        let addr = "127.0.0.1:1".parse().expect("addr");
        Arc::new(Conn::new(1, kind, addr, 1 << 20))
    }

    fn push(c: &Conn, n: usize) {
        let r = c.out.push_now(n, |b| b.extend_from_slice(&vec![b'x'; n]));
        assert!(matches!(r, Push::Ok { .. }));
    }

    /// A peer that reads 32 bytes every 20 ms: the whole write misses the 200 ms deadline over
    /// and over, but each deadline's worth of it moves bytes. A route keeps going (one slow-consumer event per episode) and delivers all; a
    /// client is closed.
    #[tokio::test]
    async fn a_late_write_that_moves_bytes_keeps_a_route_and_closes_a_client() {
        for kind in [ConnKind::Route, ConnKind::Client] {
            let stats = Arc::new(SlowConsumerStats::default());
            let c = conn(kind);
            let (w, mut r) = tokio::io::duplex(64);
            let task = tokio::spawn(run(c.clone(), w, cfg(&stats)));
            push(&c, 1000);
            let mut got = 0;
            let mut buf = [0u8; 32];
            while got < 1000 && !c.is_closed() {
                tokio::time::sleep(Duration::from_millis(20)).await;
                got += r.read(&mut buf).await.expect("read");
            }
            if kind == ConnKind::Route {
                assert_eq!(got, 1000, "everything delivered");
                assert!(!c.is_closed());
                assert_eq!(stats.routes.load(Relaxed), 1, "one episode, counted once");
                // As nats-server 2.15.1 (`slow_consumers` 3, `routes` 1 for one stalled
                // route): the total counts every missed deadline.
                assert!(stats.total.load(Relaxed) > 1, "every miss in the total");
                c.close(CloseReason::ServerShutdown);
            } else {
                assert_eq!(
                    c.close_reason(),
                    Some(CloseReason::SlowConsumerWriteDeadline)
                );
                assert_eq!(stats.clients.load(Relaxed), 1);
                assert_eq!(stats.total.load(Relaxed), 1);
            }
            drop(r);
            let _ = task.await;
        }
    }

    /// A route whose peer reads nothing at all within the deadline is closed (nothing moved).
    #[tokio::test]
    async fn a_route_that_moves_nothing_is_closed() {
        let stats = Arc::new(SlowConsumerStats::default());
        let c = conn(ConnKind::Route);
        let (w, _r) = tokio::io::duplex(64);
        let task = tokio::spawn(run(c.clone(), w, cfg(&stats)));
        push(&c, 64);
        push(&c, 1000);
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert_eq!(
            c.close_reason(),
            Some(CloseReason::SlowConsumerWriteDeadline)
        );
        assert_eq!(stats.routes.load(Relaxed), 1);
    }

    /// Bytes queued before `compress_from_now` go out as they are; from that point on every
    /// batch is one S2 stream, and the level can change between batches.
    #[tokio::test]
    async fn a_switch_compresses_everything_after_it() {
        use crate::compress::{Decoder, Level};
        let stats = Arc::new(SlowConsumerStats::default());
        let c = conn(ConnKind::Route);
        let (w, mut r) = tokio::io::duplex(1 << 20);
        c.out.push(6, |b| b.extend_from_slice(b"PLAIN\n"));
        c.out.compress_from_now(Level::Fast);
        let body = "RMSG $G a 10\r\n0123456789\r\n".repeat(100);
        c.out
            .push(body.len(), |b| b.extend_from_slice(body.as_bytes()));
        let task = tokio::spawn(run(c.clone(), w, cfg(&stats)));
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while got.len() < 6 + 10 {
            let n = r.read(&mut buf).await.expect("read");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(&got[..6], b"PLAIN\n");
        let mut dec = Decoder::new();
        dec.feed(&got[6..]);
        let mut out = BytesMut::new();
        let want = format!("{body}PING\r\n");
        let mut level_changed = false;
        let mut wire = got.len();
        while out.len() < want.len() {
            while dec.decode(&mut out, usize::MAX).expect("decodes") {}
            if out.len() >= body.len() && !level_changed {
                level_changed = true;
                c.out.compress_from_now(Level::Best);
                c.out.push_now(6, |b| b.extend_from_slice(b"PING\r\n"));
            }
            if out.len() < want.len() {
                let n = r.read(&mut buf).await.expect("read");
                assert!(n > 0, "writer ended");
                wire += n;
                dec.feed(&buf[..n]);
            }
        }
        assert_eq!(&out[..], want.as_bytes());
        assert!(
            wire < body.len() / 4,
            "compressed: {wire} bytes on the wire"
        );
        c.close(CloseReason::ServerShutdown);
        let _ = task.await;
    }
}
