//! The writer task of a connection: waits for a kick, swaps the outbound buffer out and writes
//! it under the write deadline. On close it flushes what is queued and shuts the socket down.
//!
//! A write that misses its deadline is a slow consumer, counted by connection kind. What
//! follows is the connection's [`WriteTimeoutPolicy`], as nats-server's `write_timeout`:
//! clients are closed; routes and gateways keep going (counted once per episode) as long as
//! the late write moved some bytes, and are closed only when it moved none.

use super::{CloseReason, Conn, ConnKind};
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
            Self::Default => !matches!(kind, ConnKind::Route | ConnKind::Gateway),
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
    /// One slow-consumer event of a `kind` connection.
    pub fn count(&self, kind: ConnKind) {
        self.total.fetch_add(1, Relaxed);
        match kind {
            ConnKind::Client => &self.clients,
            ConnKind::Route => &self.routes,
            ConnKind::Gateway => &self.gateways,
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

pub async fn run<W: AsyncWrite + Unpin>(conn: Arc<Conn>, mut w: W, cfg: WriteCfg) {
    let mut spare = BytesMut::new();
    loop {
        let closed = conn.out.take(&mut spare);
        let mut at = 0;
        let mut late = false;
        while at < spare.len() {
            let deadline = if closed { FINAL_FLUSH } else { cfg.deadline };
            match write_within(&conn, &mut w, &spare[at..], deadline).await {
                Ok(Ok(())) => {
                    at = spare.len();
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
                    if !(again && conn.kind == ConnKind::Route) {
                        cfg.stats.count(conn.kind);
                    }
                    tracing::info!(
                        "{} - Slow Consumer {}: WriteDeadline of {:?} exceeded with {} chunks of {} total bytes.",
                        conn.log_prefix(),
                        if again { "State" } else { "Detected" },
                        cfg.deadline,
                        1,
                        spare.len() - at
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
                c.close(CloseReason::ServerShutdown);
            } else {
                assert_eq!(
                    c.close_reason(),
                    Some(CloseReason::SlowConsumerWriteDeadline)
                );
                assert_eq!(stats.clients.load(Relaxed), 1);
            }
            assert_eq!(stats.total.load(Relaxed), 1);
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
}
