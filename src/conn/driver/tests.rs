//! The driver with a scripted session over an in-memory pipe: ops reach the session in order,
//! batches end, the handshake timer fires only while the handshake is pending, ticks run and
//! may close, parse errors close with the session's reason, and the peer's EOF ends the loop.

use super::*;
use crate::conn::ConnKind;
use crate::proto::parser::{Kind, Limits};
use tokio::io::AsyncWriteExt;

#[derive(Default)]
struct Script {
    ops: Vec<String>,
    batches: usize,
    ticks: u32,
    /// Ticks allowed before the session calls the connection stale.
    max_ticks: u32,
    tick_every: Duration,
    handshake_done_after: Option<usize>,
    handshake_in: Duration,
    timeouts: usize,
    parse_errors: usize,
}

struct Fake {
    conn: Arc<Conn>,
    s: Script,
    next: Instant,
}

use std::time::Duration;

impl Session for Fake {
    type Event = ();
    fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }
    fn start(&mut self) -> bool {
        true
    }
    fn parser(&self) -> Parser {
        Parser::new(Kind::Client, Limits::route())
    }
    fn handshake_deadline(&self) -> Instant {
        Instant::now() + self.s.handshake_in
    }
    fn handshake_pending(&self) -> bool {
        self.s
            .handshake_done_after
            .is_none_or(|n| self.s.ops.len() < n)
    }
    fn on_handshake_timeout(&mut self) -> CloseReason {
        self.s.timeouts += 1;
        CloseReason::AuthenticationTimeout
    }
    fn next_tick(&self) -> Instant {
        self.next
    }
    fn on_tick(&mut self, now: Instant) -> Result<(), CloseReason> {
        self.next = now + self.s.tick_every;
        self.s.ticks += 1;
        if self.s.ticks > self.s.max_ticks {
            return Err(CloseReason::StaleConnection);
        }
        Ok(())
    }
    fn on_op(&mut self, op: Op<'_>, _parser: &mut Parser) -> Result<AfterOp, CloseReason> {
        self.s.ops.push(format!("{op:?}"));
        Ok(AfterOp::Continue)
    }
    fn on_parse_error(&mut self, _e: ParseError, _rest: &[u8]) -> CloseReason {
        self.s.parse_errors += 1;
        CloseReason::ProtocolViolation
    }
    async fn end_batch(&mut self) {
        self.s.batches += 1;
    }
}

fn fake(s: Script) -> Fake {
    let addr = "127.0.0.1:1".parse().expect("addr");
    Fake {
        conn: Arc::new(Conn::new(1, ConnKind::Client, addr, 1 << 20)),
        next: Instant::now() + s.tick_every,
        s,
    }
}

const LONG: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn ops_reach_the_session_in_order_and_eof_closes() {
    let (mut peer, ours) = tokio::io::duplex(1024);
    let mut f = fake(Script {
        tick_every: LONG,
        handshake_in: LONG,
        max_ticks: 10,
        ..Default::default()
    });
    let task = tokio::spawn(async move {
        read_loop(&mut f, ours).await;
        f
    });
    peer.write_all(b"PING\r\nPONG\r\nPI").await.expect("write");
    peer.write_all(b"NG\r\n").await.expect("write");
    drop(peer);
    let f = task.await.expect("join");
    assert_eq!(f.s.ops, ["Ping", "Pong", "Ping"]);
    assert!(f.s.batches >= 1);
    assert_eq!(f.conn.close_reason(), Some(CloseReason::ClientClosed));
    assert_eq!(f.s.timeouts, 0, "no handshake deadline passed");
}

#[tokio::test]
async fn the_handshake_timer_fires_while_pending() {
    let (_peer, ours) = tokio::io::duplex(1024);
    let mut f = fake(Script {
        tick_every: LONG,
        handshake_in: Duration::from_millis(20),
        ..Default::default()
    });
    read_loop(&mut f, ours).await;
    assert_eq!(f.s.timeouts, 1);
    assert_eq!(
        f.conn.close_reason(),
        Some(CloseReason::AuthenticationTimeout)
    );
}

#[tokio::test]
async fn a_finished_handshake_disarms_its_timer() {
    let (mut peer, ours) = tokio::io::duplex(1024);
    let mut f = fake(Script {
        tick_every: Duration::from_millis(30),
        max_ticks: 3,
        handshake_in: Duration::from_millis(20),
        handshake_done_after: Some(1),
        ..Default::default()
    });
    peer.write_all(b"PING\r\n").await.expect("write");
    // The handshake is done with the first op; the loop then ends only by the ticks.
    read_loop(&mut f, ours).await;
    assert_eq!(f.s.timeouts, 0);
    assert_eq!(f.s.ticks, 4);
    assert_eq!(f.conn.close_reason(), Some(CloseReason::StaleConnection));
}

#[tokio::test]
async fn a_parse_error_closes_with_the_sessions_reason() {
    let (mut peer, ours) = tokio::io::duplex(1024);
    let mut f = fake(Script {
        tick_every: LONG,
        handshake_in: LONG,
        ..Default::default()
    });
    peer.write_all(b"PING\r\nBOGUS\r\nPING\r\n")
        .await
        .expect("write");
    read_loop(&mut f, ours).await;
    assert_eq!(f.s.ops, ["Ping"], "nothing after the bad op is handled");
    assert_eq!(f.s.parse_errors, 1);
    assert_eq!(f.conn.close_reason(), Some(CloseReason::ProtocolViolation));
}
