//! The one connection driver: the writer task, the read loop with its parser, the handshake
//! and ping timers, S2 decompression once the peer compresses, batching, and the close. Client,
//! route and gateway connections are [`Session`]s plugged into it (leafnodes will be one more);
//! a session only decides what an op, a tick or a timeout means.

use super::{writer, CloseReason, Conn};
use crate::compress::Decoder;
use crate::proto::parser::{ParseError, Parser};
use crate::proto::Op;
use bytes::{Buf, BytesMut};
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::Instant;

/// Bytes asked of the socket per read.
pub const READ_CHUNK: usize = 64 * 1024;
/// Decoded bytes handed to the parser per round on a compressed connection (the decoder
/// overshoots by at most one 4 MiB block): a highly compressible burst never decodes at once.
const DECODE_BUDGET: usize = 256 * 1024;

/// What the driver does after an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterOp {
    Continue,
    /// The peer's bytes after this op are an S2 stream (its compression switch).
    Compressed,
    /// The session must wait for something before the next op ([`Session::resume`]).
    Pause,
}

/// One connection kind's protocol, driven by [`serve`].
pub trait Session {
    /// Something besides the socket the session waits on (a client: config reloads).
    type Event: Send;

    fn conn(&self) -> &Arc<Conn>;
    /// Our opening lines, once the writer runs. False: the connection is already closed
    /// (e.g. over a connection limit) and the read loop must not start.
    fn start(&mut self) -> bool;
    /// The parser for this kind, with its limits.
    fn parser(&self) -> Parser;
    /// When the handshake (CONNECT, auth, registration) must be done by; asked once, as the
    /// read loop starts.
    fn handshake_deadline(&self) -> Instant;
    /// Whether the handshake is still to be done (the deadline applies).
    fn handshake_pending(&self) -> bool;
    /// The handshake deadline passed: say so to the peer and tell why to close.
    fn on_handshake_timeout(&mut self) -> CloseReason;
    /// When the ping timer fires next.
    fn next_tick(&self) -> Instant;
    /// The ping timer fired; must move `next_tick` on.
    fn on_tick(&mut self, now: Instant) -> Result<(), CloseReason>;
    /// Bytes arrived (before they are parsed).
    fn on_read(&mut self, _now: Instant) {}
    /// One parsed op. The parser may be re-configured for the next op.
    fn on_op(&mut self, op: Op<'_>, parser: &mut Parser) -> Result<AfterOp, CloseReason>;
    /// Malformed input at `rest`: report it and tell why to close.
    fn on_parse_error(&mut self, e: ParseError, rest: &[u8]) -> CloseReason;
    /// After each batch of ops (a read's worth): publish what it delivered.
    fn end_batch(&mut self) -> impl Future<Output = ()> + Send;
    /// Whether the peer's first bytes are already an S2 stream (a leaf that switched on
    /// the hub's INFO it read before the read loop); asked once, as the read loop starts.
    fn starts_compressed(&mut self) -> bool {
        false
    }
    /// After an op that paused: the wait the session needs before its next op (a client's
    /// CONNECT whose account is being fetched). Never called by default.
    fn resume(
        &mut self,
        _parser: &mut Parser,
    ) -> impl Future<Output = Result<(), CloseReason>> + Send {
        async { Ok(()) }
    }
    /// The next event of the session's own source; never, by default.
    fn event(&mut self) -> impl Future<Output = Self::Event> + Send {
        std::future::pending()
    }
    /// One of the session's own events; the parser may be re-configured.
    fn on_event(&mut self, _ev: Self::Event, _parser: &mut Parser) -> Result<(), CloseReason> {
        Ok(())
    }
}

/// Serve a connection until it closes: spawn its writer, send the session's opening lines,
/// run the read loop. Returns the writer task, for the caller to await after its cleanup.
pub async fn serve<S, R, W>(
    s: &mut S,
    rd: R,
    wr: W,
    cfg: writer::WriteCfg,
) -> tokio::task::JoinHandle<()>
where
    S: Session,
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let writer = tokio::spawn(writer::run(s.conn().clone(), wr, cfg));
    if s.start() {
        read_loop(s, rd).await;
    }
    writer
}

/// Read, parse and hand ops to the session until the connection closes; every close goes
/// through `Conn::close` with its reason.
pub async fn read_loop<S: Session, R: AsyncRead + Unpin>(s: &mut S, mut rd: R) {
    let conn = s.conn().clone();
    let mut parser = s.parser();
    // Protocol bytes for the parser; on a compressed connection the decoder's output.
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    // Once the peer compresses: what the socket returns goes here first.
    let mut dec: Option<Decoder> = s.starts_compressed().then(Decoder::new);
    // Timers live across iterations (reset only when their deadline moves): creating and
    // dropping timer entries on every read would touch the runtime's timer wheel per message.
    let handshake = tokio::time::sleep_until(s.handshake_deadline());
    tokio::pin!(handshake);
    let mut armed = s.next_tick();
    let tick = tokio::time::sleep_until(armed);
    tokio::pin!(tick);
    loop {
        let into = match dec.as_mut() {
            Some(d) => d.input(),
            None => &mut buf,
        };
        if into.capacity() - into.len() < READ_CHUNK / 4 {
            into.reserve(READ_CHUNK);
        }
        if s.next_tick() != armed {
            armed = s.next_tick();
            tick.as_mut().reset(armed);
        }
        let pending = s.handshake_pending();
        let read = tokio::select! {
            biased;
            _ = conn.closed() => return,
            r = rd.read_buf(into) => r,
            ev = s.event() => {
                if let Err(r) = s.on_event(ev, &mut parser) {
                    conn.close(r);
                    return;
                }
                continue;
            }
            _ = &mut handshake, if pending => {
                let r = s.on_handshake_timeout();
                conn.close(r);
                return;
            }
            _ = &mut tick => {
                if let Err(r) = s.on_tick(Instant::now()) {
                    conn.close(r);
                    return;
                }
                continue;
            }
        };
        if !conn.read_ok(&read) {
            return;
        }
        conn.touch(SystemTime::now());
        s.on_read(Instant::now());
        let close = loop {
            // A compressed connection: decode a budget's worth, parse it, repeat while the
            // decoder has whole chunks left.
            let more = match dec.as_mut().map(|d| d.decode(&mut buf, DECODE_BUDGET)) {
                None => false,
                Some(Ok(more)) => more,
                Some(Err(e)) => {
                    tracing::error!(
                        "{} - {} compressed stream error, closing: {e}",
                        conn.log_prefix(),
                        conn.kind.label()
                    );
                    break Some(CloseReason::ReadError);
                }
            };
            let (consumed, step) = parse_batch(s, &mut parser, &buf);
            buf.advance(consumed);
            match step {
                Err(r) => break Some(r),
                Ok(AfterOp::Compressed) => {
                    // The rest of this read (if any) is already compressed.
                    let mut d = Decoder::new();
                    d.feed(&buf);
                    buf.clear();
                    dec = Some(d);
                    continue;
                }
                Ok(AfterOp::Pause) => {
                    if let Err(r) = s.resume(&mut parser).await {
                        break Some(r);
                    }
                    continue; // the rest of this read
                }
                Ok(AfterOp::Continue) => {}
            }
            if !more {
                break None;
            }
            s.end_batch().await;
        };
        s.end_batch().await;
        if let Some(r) = close {
            conn.close(r);
            return;
        }
    }
}

/// Parses and hands over the ops in `buf` op by op (the session may re-configure the parser
/// for the very next op, and a compression switch ends the plain bytes). Returns the bytes
/// consumed and how the batch ended.
fn parse_batch<S: Session>(
    s: &mut S,
    parser: &mut Parser,
    buf: &[u8],
) -> (usize, Result<AfterOp, CloseReason>) {
    let mut consumed = 0;
    while consumed < buf.len() {
        match parser.parse(&buf[consumed..]) {
            Ok(Some((op, n))) => {
                consumed += n;
                match s.on_op(op, parser) {
                    Ok(AfterOp::Continue) => {}
                    other => return (consumed, other),
                }
            }
            Ok(None) => break,
            Err(e) => {
                let r = s.on_parse_error(e, &buf[consumed..]);
                return (consumed, Err(r));
            }
        }
    }
    (consumed, Ok(AfterOp::Continue))
}

/// A server-to-server connection's ping tick (routes, gateways): with `max` PINGs unanswered
/// the connection is stale; otherwise one more goes out (the caller sends it), and the first
/// one outstanding starts the RTT measurement.
pub fn peer_ping(
    conn: &Conn,
    pings_out: &mut u32,
    rtt_start: &mut Option<Instant>,
    max: u32,
    now: Instant,
) -> Result<(), CloseReason> {
    if *pings_out >= max {
        tracing::debug!(
            "{} - Stale {} Connection - Closing",
            conn.log_prefix(),
            conn.kind.label()
        );
        return Err(CloseReason::StaleConnection);
    }
    *pings_out += 1;
    rtt_start.get_or_insert(now);
    Ok(())
}

/// A peer's PONG (route, gateway, leafnode): no PING outstanding any more, and the round
/// trip of the one [`peer_ping`] timed, if any, recorded for monitoring and returned.
pub fn peer_pong(
    conn: &Conn,
    pings_out: &mut u32,
    rtt_start: &mut Option<Instant>,
) -> Option<std::time::Duration> {
    *pings_out = 0;
    let rtt = rtt_start.take()?.elapsed();
    conn.meta().rtt = Some(rtt);
    Some(rtt)
}

/// [`peer_ping`] with the interval of a gateway or leafnode connection (`ping_interval`,
/// at most 15 s): returns when the next tick is due. The caller sends the PING.
pub fn peer_tick(
    conn: &Conn,
    pings_out: &mut u32,
    rtt_start: &mut Option<Instant>,
    (interval, max): (std::time::Duration, u32),
    now: Instant,
) -> Result<Instant, CloseReason> {
    let interval = interval.clamp(
        std::time::Duration::from_millis(10),
        std::time::Duration::from_secs(15),
    );
    peer_ping(conn, pings_out, rtt_start, max.max(1), now)?;
    Ok(now + interval)
}

/// The first bytes of malformed input, for a log line.
pub fn snippet(rest: &[u8]) -> String {
    String::from_utf8_lossy(&rest[..rest.len().min(32)]).into_owned()
}

#[cfg(test)]
mod tests;
