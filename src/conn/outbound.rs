//! The outbound buffer of one connection: producers append encoded frames under a short lock;
//! the writer task is woken only when the buffer goes from empty to non-empty, then takes the
//! whole buffer in one swap and writes it in one call. The pending-bytes bound lives here.

use crate::compress::Level;
use bytes::BytesMut;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const INITIAL_CAPACITY: usize = 32 * 1024;
/// [`Outbound::flush_or_kick`] writes from the caller's thread at most this much.
const IN_PLACE_MAX: usize = 16 * 1024;
/// A spare up to this size is always kept; a larger one only while writes fill it.
const MAX_KEPT_CAPACITY: usize = 4 * 1024 * 1024;
/// A write of at least this much keeps a large spare for [`KEEP_LARGE_FOR`] more.
const BUSY_WRITE: usize = MAX_KEPT_CAPACITY / 4;
/// How long a large spare outlives the last busy write. Batch sizes swing widely on a busy
/// connection (megabytes while the peer is slow to read, a few messages once the writer has
/// caught up): giving the buffer back on the first small write made producers grow a new one
/// from scratch (a copy at every doubling, fresh pages faulted in) many times a second.
const KEEP_LARGE_FOR: Duration = Duration::from_secs(2);

/// Outcome of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Appended. `kick`: the buffer was empty, so the caller must `kick` the writer (now or
    /// after its batch). `stall`: the buffer is past the stall mark, so the producer should
    /// wait for it to drain (`wait_drained`) before producing more.
    Ok { kick: bool, stall: bool },
    /// Appending would pass `max_pending`: nothing was appended (slow consumer).
    Overflow,
    /// The connection is closing: nothing was appended.
    Closed,
    /// Past the stall mark, and the producer does not stall (`no_fast_producer_stall`):
    /// nothing was appended, the message is dropped for this destination.
    Dropped,
}

struct State {
    buf: BytesMut,
    closed: bool,
    /// Compression starts (or changes level) at this offset of `buf`: bytes before it are
    /// written as before, bytes from it on through an S2 encoder at that level.
    compress: Option<Switch>,
    /// Bytes the writer took and has not finished writing: with `buf`, what is pending
    /// (nats-server's `pb`), which the stall mark is checked against.
    in_flight: usize,
    /// When the writer last wrote a batch of [`BUSY_WRITE`] or more.
    busy_at: Option<Instant>,
    /// The connection's plain TCP socket (a duplicate of its descriptor), for
    /// [`Outbound::flush_or_kick`]; dropped with `release`, so the socket closes with
    /// the connection. `None` for TLS connections, gateways and leafnodes.
    direct: Option<std::net::TcpStream>,
    /// Compression was switched on once (set with `compress`, which the writer takes; its
    /// encoder lives on in the writer): bytes go out through that encoder only.
    compressing: bool,
}

impl State {
    fn pending(&self) -> usize {
        self.buf.len() + self.in_flight
    }
}

/// Where in a taken batch the writer starts compressing (or changes level), and at what level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Switch {
    pub at: usize,
    pub level: Level,
}

pub struct Outbound {
    state: Mutex<State>,
    notify: Notify,
    drained: Notify,
    max_pending: usize,
    stall_at: usize,
    /// A producer waited for this destination to drain and it did not: producers stop
    /// waiting for it until its writer completes a write.
    stuck: AtomicBool,
    /// In a slow-consumer episode (a late write, or a route/gateway past its bound): such
    /// episodes are counted once.
    slow: AtomicBool,
}

impl Outbound {
    pub fn new(max_pending: usize) -> Self {
        Outbound {
            state: Mutex::new(State {
                buf: BytesMut::new(),
                closed: false,
                compress: None,
                in_flight: 0,
                busy_at: None,
                direct: None,
                compressing: false,
            }),
            notify: Notify::new(),
            drained: Notify::new(),
            max_pending,
            // As nats-server: producers wait when a destination is 3/4 full.
            stall_at: max_pending / 4 * 3,
            stuck: AtomicBool::new(false),
            slow: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append `need` bytes written by `f`.
    #[inline]
    pub fn push(&self, need: usize, f: impl FnOnce(&mut BytesMut)) -> Push {
        self.push_inner(need, f, false)
    }

    /// [`Outbound::push`] for a producer that does not stall (`no_fast_producer_stall`):
    /// while the buffer is past the stall mark nothing is appended ([`Push::Dropped`]), as
    /// nats-server drops the message for a destination whose stall gate is up.
    #[inline]
    pub fn push_unless_stalled(&self, need: usize, f: impl FnOnce(&mut BytesMut)) -> Push {
        self.push_inner(need, f, true)
    }

    #[inline]
    fn push_inner(&self, need: usize, f: impl FnOnce(&mut BytesMut), no_stall: bool) -> Push {
        let mut st = self.lock();
        if st.closed {
            return Push::Closed;
        }
        if no_stall && st.pending() > self.stall_at {
            return Push::Dropped;
        }
        let was_empty = st.buf.is_empty();
        if st.buf.len() + need > self.max_pending {
            return Push::Overflow;
        }
        if st.buf.capacity() == 0 {
            st.buf.reserve(INITIAL_CAPACITY.max(need));
        }
        f(&mut st.buf);
        Push::Ok {
            kick: was_empty,
            stall: st.pending() > self.stall_at && !self.stuck.load(Relaxed),
        }
    }

    /// Append and wake the writer at once if needed (for control replies outside a batch).
    pub fn push_now(&self, need: usize, f: impl FnOnce(&mut BytesMut)) -> Push {
        let r = self.push(need, f);
        if let Push::Ok { kick: true, .. } = r {
            self.kick();
        }
        r
    }

    /// Wake the writer.
    #[inline]
    pub fn kick(&self) {
        self.notify.notify_one();
    }

    /// Lets [`Outbound::flush_or_kick`] write to `sock` (a plain TCP connection's socket,
    /// before it is split for the read loop and the writer). Without a duplicate of its
    /// descriptor the connection only has its writer.
    pub fn set_direct(&self, sock: &tokio::net::TcpStream) {
        use std::os::fd::AsFd;
        match sock.as_fd().try_clone_to_owned() {
            Ok(fd) => self.lock().direct = Some(std::net::TcpStream::from(fd)),
            Err(e) => tracing::debug!("no direct writes: cannot duplicate the socket: {e}"),
        }
    }

    /// Write what is queued from the caller's thread when that is quick and keeps the byte
    /// order, else wake the writer. Quick: a plain TCP socket, at most [`IN_PLACE_MAX`]
    /// bytes queued, the writer not in the middle of a write, no compression, and the
    /// socket takes it all without blocking (what it does not take stays for the writer,
    /// ahead of anything appended later). It saves a server-originated message (a
    /// JetStream PubAck, a Raft append and its answer) the hand-off to the writer task,
    /// often a wake of another runtime thread, on the path of every synchronous publish.
    pub fn flush_or_kick(&self) {
        if !self.write_here() {
            self.kick();
        }
    }

    /// The whole buffer went to the socket from here.
    fn write_here(&self) -> bool {
        use std::io::Write;
        let mut st = self.lock();
        let st = &mut *st;
        let Some(sock) = st.direct.as_ref() else {
            return false;
        };
        let n = st.buf.len();
        if n == 0 || n > IN_PLACE_MAX || st.closed || st.in_flight > 0 || st.compressing {
            return false;
        }
        match (&*sock).write(&st.buf) {
            Ok(w) if w == n => {
                st.buf.clear();
                self.stuck.store(false, Relaxed);
                self.slow.store(false, Relaxed);
                true
            }
            Ok(w) => {
                let _ = st.buf.split_to(w);
                false
            }
            // Would block, or an error the writer's own write meets and handles.
            Err(_) => false,
        }
    }

    pub fn max_pending(&self) -> usize {
        self.max_pending
    }

    /// Bytes waiting to be written.
    pub fn pending(&self) -> usize {
        self.lock().buf.len()
    }

    /// Refuse further appends; what is queued still gets written.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_one();
        self.drained.notify_waiters();
    }

    /// Everything appended from now on goes out compressed at `level` (S2 stream format), or,
    /// when already compressing, at the new level; what is queued before stays as it was.
    /// The writer applies it to the batch that holds this point. Two calls before the
    /// writer takes the batch keep the first offset and the last level (any level reads the
    /// same; where compression starts is what matters).
    pub fn compress_from_now(&self, level: Level) {
        let mut st = self.lock();
        let at = st.compress.map_or(st.buf.len(), |prev| prev.at);
        st.compress = Some(Switch { at, level });
        st.compressing = true;
    }

    /// A compression switch with the INFO that goes with it (`send` queues it), as nats-server
    /// negotiates routes and leafnodes: a dialler's INFO goes out in clear, then its writer
    /// compresses; an acceptor's writer compresses first, its INFO opens the stream.
    pub fn switch_around(&self, level: Level, info_in_clear: bool, send: impl FnOnce()) {
        if info_in_clear {
            send();
            self.compress_from_now(level);
        } else {
            self.compress_from_now(level);
            send();
        }
    }

    /// Swap the pending bytes out for `spare` (the writer's emptied buffer). Returns the
    /// bytes to write (maybe empty) and whether the buffer is closed.
    ///
    /// A spare past [`MAX_KEPT_CAPACITY`] is kept while writes fill a good part of it, so a
    /// connection busy enough to need it does not grow a buffer from scratch every time
    /// (growing copies it: the allocator has no in-place remap for large blocks);
    /// a write under a quarter of it, [`KEEP_LARGE_FOR`] after the last busy write, gives the
    /// burst's memory back.
    pub fn take(&self, spare: &mut BytesMut) -> bool {
        self.take_switch(spare).0
    }

    /// [`Outbound::take`], and the compression switch that falls in the taken bytes (its
    /// offset is into `spare`).
    pub fn take_switch(&self, spare: &mut BytesMut) -> (bool, Option<Switch>) {
        self.take_at(spare, Instant::now())
    }

    /// [`Outbound::take_switch`] at `now`.
    fn take_at(&self, spare: &mut BytesMut, now: Instant) -> (bool, Option<Switch>) {
        let written = spare.len();
        spare.clear();
        let cap = spare.capacity();
        let mut st = self.lock();
        if written >= BUSY_WRITE {
            st.busy_at = Some(now);
        }
        let idle = st
            .busy_at
            .is_none_or(|t| now.saturating_duration_since(t) >= KEEP_LARGE_FOR);
        // The burst's buffer is freed after the lock is let go (producers take it per
        // message); the producers' next append sizes a new one (`push_inner`).
        let given_back =
            (cap > MAX_KEPT_CAPACITY && written < cap / 4 && idle).then(|| std::mem::take(spare));
        std::mem::swap(&mut st.buf, spare);
        st.in_flight = spare.len();
        let out = (st.closed, st.compress.take());
        drop(st);
        drop(given_back);
        out
    }

    /// Drop whatever is still queued and the buffer's memory: the connection is gone. (Stale
    /// match results elsewhere may keep the `Conn` alive a while; its buffer must not be.)
    pub fn release(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.buf = BytesMut::new();
        let direct = st.direct.take();
        drop(st);
        drop(direct);
        self.drained.notify_waiters();
    }

    /// Wait for a kick.
    pub async fn wait(&self) {
        self.notify.notified().await;
    }

    /// Called by the writer after each write.
    pub fn signal_drained(&self) {
        self.lock().in_flight = 0;
        self.stuck.store(false, Relaxed);
        self.drained.notify_waiters();
    }

    /// Enter (true) or leave a slow-consumer episode; returns whether one was under way.
    pub fn set_slow(&self, slow: bool) -> bool {
        self.slow.swap(slow, Relaxed)
    }

    /// Wait (at most `limit`) until the buffer is below the stall mark or closed. When it is
    /// not, producers stop waiting for this destination until its next completed write: a
    /// consumer that does not read costs each producer one bounded wait, not one per batch.
    /// `again`: never mark it so (the producer waits on every batch): for a route, gateway
    /// or leaf destination (a server behind a link is slow, not stuck; what it does not
    /// drain is dropped past `max_pending`), and for a link's reader waiting for a client.
    pub async fn wait_drained(&self, limit: std::time::Duration, again: bool) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let st = self.lock();
                if st.closed || st.pending() <= self.stall_at {
                    return;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                if !again {
                    self.stuck.store(true, Relaxed);
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_to_nonempty_once_and_bound() {
        let o = Outbound::new(10);
        let ok = |kick, stall| Push::Ok { kick, stall };
        assert_eq!(o.push(4, |b| b.extend_from_slice(b"abcd")), ok(true, false));
        assert_eq!(o.push(4, |b| b.extend_from_slice(b"efgh")), ok(false, true));
        assert_eq!(o.push(4, |b| b.extend_from_slice(b"ijkl")), Push::Overflow);
        assert_eq!(o.pending(), 8);
        let mut spare = BytesMut::new();
        assert!(!o.take(&mut spare));
        assert_eq!(&spare[..], b"abcdefgh");
        // Taken but not yet written: still pending, so still past the stall mark.
        assert_eq!(o.push(1, |b| b.extend_from_slice(b"x")), ok(true, true));
        o.signal_drained();
        assert_eq!(o.push(1, |b| b.extend_from_slice(b"z")), ok(false, false));
        o.close();
        assert_eq!(o.push(1, |b| b.extend_from_slice(b"y")), Push::Closed);
        assert!(o.take(&mut spare));
        assert_eq!(&spare[..], b"xz");
    }

    #[tokio::test]
    async fn a_destination_that_does_not_drain_is_not_waited_for_again_until_it_writes() {
        let o = Outbound::new(8);
        let stall = |p| matches!(p, Push::Ok { stall: true, .. });
        assert!(!stall(o.push(6, |b| b.extend_from_slice(b"abcdef"))));
        assert!(stall(o.push(1, |b| b.extend_from_slice(b"g"))));
        // A producer waits once, in vain: the next pushes do not ask it to wait again.
        o.wait_drained(std::time::Duration::from_millis(1), false)
            .await;
        assert!(!stall(o.push(1, |b| b.extend_from_slice(b"h"))));
        // The writer wrote something: producers wait for it again.
        o.signal_drained();
        o.lock().buf.truncate(7);
        assert!(stall(o.push(1, |b| b.extend_from_slice(b"h"))));
    }

    #[test]
    fn a_producer_that_does_not_stall_drops_past_the_stall_mark() {
        // Stall mark 6 of 8: appends go in up to it and past it once, then are dropped
        // (never reaching max_pending) until the writer takes the buffer.
        let o = Outbound::new(8);
        let push = |n: usize| o.push_unless_stalled(n, |b| b.extend_from_slice(&b"abcdefgh"[..n]));
        assert_eq!(
            push(6),
            Push::Ok {
                kick: true,
                stall: false
            }
        );
        assert_eq!(
            push(1),
            Push::Ok {
                kick: false,
                stall: true
            }
        );
        assert_eq!(push(1), Push::Dropped);
        let mut spare = BytesMut::new();
        o.take(&mut spare);
        // Taken, not yet written: still dropped; written: appended again.
        assert_eq!(push(1), Push::Dropped);
        o.signal_drained();
        assert_eq!(
            push(1),
            Push::Ok {
                kick: true,
                stall: false
            }
        );
    }

    #[test]
    fn a_large_spare_is_kept_while_busy_and_given_back_after() {
        let o = Outbound::new(64 * 1024 * 1024);
        let big = MAX_KEPT_CAPACITY * 2;
        let t0 = Instant::now();
        // The writer's buffer (what it wrote last) and the producers' swap at every take.
        let mut spare = BytesMut::new();
        let mut round = |n: usize, at: Duration| {
            let pushed = o.push(n, |b| b.extend_from_slice(&vec![0u8; n]));
            assert!(matches!(pushed, Push::Ok { .. }));
            o.take_at(&mut spare, t0 + at);
            o.signal_drained();
            (spare.capacity(), o.lock().buf.capacity())
        };
        let ms = Duration::from_millis;
        // Two large batches: both buffers large.
        round(big * 3 / 4, ms(0));
        let (a, b) = round(big * 3 / 4, ms(1));
        assert!(a >= big * 3 / 4 && b >= big * 3 / 4, "{a} {b}");
        // Many small batches between large ones (batch sizes swing on a busy connection):
        // both kept, no buffer grown from scratch again.
        let mut at = ms(1);
        for _ in 0..3 {
            for _ in 0..100 {
                at += ms(10);
                let (a, b) = round(4, at);
                assert!(a > MAX_KEPT_CAPACITY && b > MAX_KEPT_CAPACITY, "{a} {b}");
            }
            round(big / 2, at);
        }
        // Small batches only: both kept for KEEP_LARGE_FOR after the last busy write (the
        // writer tells its size at its next take), then given back.
        let busy = at + ms(10);
        for after in [ms(0), KEEP_LARGE_FOR - ms(1)] {
            let (a, b) = round(4, busy + after);
            assert!(a > MAX_KEPT_CAPACITY && b > MAX_KEPT_CAPACITY, "{a} {b}");
        }
        round(4, busy + KEEP_LARGE_FOR);
        let (a, b) = round(4, busy + KEEP_LARGE_FOR + ms(1));
        assert!(a < MAX_KEPT_CAPACITY && b < MAX_KEPT_CAPACITY, "{a} {b}");
    }

    /// A connected pair on loopback: the server side's socket and the peer.
    async fn pair() -> (tokio::net::TcpStream, tokio::net::TcpStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let (a, b) = tokio::join!(l.accept(), tokio::net::TcpStream::connect(addr));
        (a.expect("accept").0, b.expect("connect"))
    }

    async fn read_exactly(peer: &mut tokio::net::TcpStream, n: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut got = vec![0u8; n];
        tokio::time::timeout(Duration::from_secs(5), peer.read_exact(&mut got))
            .await
            .expect("bytes within 5 s")
            .expect("read");
        got
    }

    #[tokio::test]
    async fn a_small_batch_goes_out_from_the_callers_thread_without_a_writer() {
        let (sock, mut peer) = pair().await;
        let o = Outbound::new(1 << 20);
        o.set_direct(&sock);
        // No writer task exists: only an in-place write can deliver these.
        assert_eq!(
            o.push(6, |b| b.extend_from_slice(b"PONG\r\n")),
            Push::Ok {
                kick: true,
                stall: false
            }
        );
        o.flush_or_kick();
        assert_eq!(o.pending(), 0);
        assert_eq!(read_exactly(&mut peer, 6).await, b"PONG\r\n");
        // The buffer is empty again: the next append asks for a kick, and goes out too.
        assert_eq!(
            o.push(3, |b| b.extend_from_slice(b"+OK")),
            Push::Ok {
                kick: true,
                stall: false
            }
        );
        o.flush_or_kick();
        assert_eq!(read_exactly(&mut peer, 3).await, b"+OK");
    }

    #[tokio::test]
    async fn bytes_stay_for_the_writer_while_it_writes_or_when_large_or_compressed() {
        let (sock, mut peer) = pair().await;
        let o = Outbound::new(1 << 20);
        o.set_direct(&sock);
        // The writer took a batch and is still writing it: what comes after must wait for
        // it, or the peer would see the later bytes first.
        o.push(5, |b| b.extend_from_slice(b"first"));
        let mut spare = BytesMut::new();
        o.take(&mut spare);
        o.push(6, |b| b.extend_from_slice(b"second"));
        o.flush_or_kick();
        assert_eq!(
            o.pending(),
            6,
            "written while the writer's batch was in flight"
        );
        // Its write done, the next kick sends what waited, after the writer's batch.
        sock.try_write(&spare).expect("the writer's batch");
        o.signal_drained();
        o.flush_or_kick();
        assert_eq!(o.pending(), 0);
        assert_eq!(read_exactly(&mut peer, 11).await, b"firstsecond");

        // More than IN_PLACE_MAX queued: the writer's job.
        o.push(IN_PLACE_MAX + 1, |b| b.resize(IN_PLACE_MAX + 1, b'x'));
        o.flush_or_kick();
        assert_eq!(o.pending(), IN_PLACE_MAX + 1);
        o.take(&mut spare);
        o.signal_drained();

        // Once compression is on, bytes only go out through the writer's encoder.
        o.compress_from_now(crate::compress::Level::Fast);
        o.push(4, |b| b.extend_from_slice(b"zzzz"));
        o.flush_or_kick();
        assert_eq!(o.pending(), 4);
    }

    #[tokio::test]
    async fn the_socket_closes_with_the_connection_not_with_the_buffer() {
        let (sock, mut peer) = pair().await;
        let o = Outbound::new(1 << 20);
        o.set_direct(&sock);
        // The connection ends (its writer releases the buffer, its halves drop): the peer
        // sees the end, though the `Outbound` itself lives on (stale match results).
        o.release();
        drop(sock);
        use tokio::io::AsyncReadExt;
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), peer.read(&mut b))
            .await
            .expect("EOF within 5 s")
            .expect("read");
        assert_eq!(n, 0);
        // Nothing goes anywhere after a release.
        assert_eq!(o.push(1, |b| b.extend_from_slice(b"x")), Push::Closed);
        o.flush_or_kick();
    }
}
