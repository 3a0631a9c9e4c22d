//! One leafnode connection on the connection driver, in either role. Accepted (we are the
//! hub): our INFO first, the leaf's CONNECT authenticates it and binds it to an account, then
//! both sides send their interest. Dialled (we are the leaf, a "spoke"): the hub's INFO
//! first, our CONNECT, then interest both ways. From then on `LS+`/`LS-` change the interest
//! the peer has in the bound account (entries of this connection in its sublist) and
//! `LMSG`/`HMSG` are published into it.

use super::connect::LeafConnect;
use super::interest::{Link, Src};
use super::open::Io;
use super::remote::Solicit;
use super::Leafnodes;
use crate::account::{Account, SubRef, Subscription};
use crate::compress::{CompressionMode, InfoStep, RouteCompression};
use crate::config::COMPAT_VERSION;
use crate::conn::driver::{self, AfterOp, Session};
use crate::conn::{CloseReason, Conn, ConnKind};
use crate::deliver::{Fanout, Msg, Origin};
use crate::proto::info::ServerInfo;
use crate::proto::parser::{Kind, Limits, Op, ParseError, Parser, RoutedMsg};
use crate::server::ServerShared;
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

mod handshake;
use super::{connect, perms};
use handshake::Pending;

/// Interest one leaf connection may hold (bounded memory for a bad peer).
const MAX_LEAF_SUBS: usize = 1 << 20;

/// Serve one leaf connection until it closes. Returns how long to wait before dialling again
/// when the peer asked for a wait (a loop, a version under its `min_version`).
pub async fn run(
    srv: Arc<ServerShared>,
    lf: Arc<Leafnodes>,
    stream: TcpStream,
    addr: SocketAddr,
    solicit: Option<Solicit>,
) -> Option<Duration> {
    let _ = stream.set_nodelay(true);
    let conn = Arc::new(Conn::new(
        srv.next_cid(),
        ConnKind::Leaf,
        addr,
        srv.opts.max_pending.max(64 * 1024 * 1024),
    ));
    // Our role: a leaf (spoke) of what we dial unless the remote says `hub: true`; a hub of
    // what dials us unless its CONNECT says it is the hub (set then).
    conn.spoke
        .store(solicit.as_ref().is_some_and(|s| !s.hub), Relaxed);
    let comp = match &solicit {
        Some(sol) => RouteCompression::new(sol.compression.clone(), true),
        None => RouteCompression::new(lf.opts.compression.clone(), false),
    };
    let mut c = LeafConn {
        comp,
        negotiated: None,
        switch_reader: false,
        started: Instant::now(),
        fan: Fanout::new(srv.clone()),
        trace: crate::logging::trace_enabled(),
        srv,
        lf,
        conn: conn.clone(),
        solicit,
        link: None,
        subs: HashMap::new(),
        pings_out: 0,
        next_ping: Instant::now() + Duration::from_secs(3600),
        rtt_start: None,
        back_off: None,
        info_sent: false,
        pending_info: None,
        nonce: String::new(),
        expires: None,
        inbound: None,
        callout: None,
        pending: None,
    };
    if c.solicit.is_none() {
        c.nonce = crate::util::ids::nonce();
    }
    // TLS (and the INFO that goes before it) ahead of the driver.
    // The leafnodes block's `pinned_certs` as they are now (a reload may change them).
    let pinned = crate::tls::live_pins(&c.srv.live_opts(), ConnKind::Leaf);
    let opened = match &c.solicit {
        None => {
            let info = c.hub_info();
            super::open::accept(stream, c.lf.hub_tls.get(), &info, pinned.as_ref()).await
        }
        Some(sol) => {
            let to = (sol.url.host.as_str(), pinned.as_ref());
            super::open::dial(stream, sol.tls.as_deref(), to, sol.first_info).await
        }
    };
    let opened = match opened {
        Ok(o) => o,
        Err(e) => {
            tracing::error!("{} - Leafnode connection error: {e}", conn.log_prefix());
            conn.close(if e.starts_with("TLS") {
                CloseReason::TlsHandshakeError
            } else {
                CloseReason::ProtocolViolation
            });
            return None;
        }
    };
    if let Io::Tls(s) = &opened.io {
        s.record(&conn);
    }
    c.info_sent = opened.info_sent;
    c.pending_info = opened.hub_info;
    let cfg = c.srv.write_cfg(ConnKind::Leaf, c.srv.opts.write_deadline);
    let writer = match opened.io {
        Io::Plain(s) => {
            let (rd, wr) = s.into_split();
            driver::serve(&mut c, rd, wr, cfg).await
        }
        Io::Tls(s) => {
            let (rd, wr) = tokio::io::split(s);
            driver::serve(&mut c, rd, wr, cfg).await
        }
    };
    c.cleanup();
    let _ = writer.await;
    let reason = conn.close_reason().map_or("", |x| x.as_str());
    tracing::info!(
        "{} - Leafnode connection closed: {reason}",
        conn.log_prefix()
    );
    c.back_off
}

struct LeafConn {
    /// The compression handshake (nats-server 2.10+ `negotiateLeafCompression`: the leaf
    /// answers the hub's INFO with one of its own when both compress, then both switch).
    comp: RouteCompression,
    /// The mode the handshake settled on (None: no INFO came to negotiate with).
    negotiated: Option<CompressionMode>,
    /// The peer's bytes after the current op are an S2 stream.
    switch_reader: bool,
    started: Instant,
    srv: Arc<ServerShared>,
    lf: Arc<Leafnodes>,
    conn: Arc<Conn>,
    solicit: Option<Solicit>,
    /// Set once registered (the account is bound).
    link: Option<Arc<Link>>,
    /// The peer's interest, by `subject` or `subject queue`, as entries in the account.
    subs: HashMap<Bytes, Arc<Subscription>>,
    fan: Fanout,
    pings_out: u32,
    next_ping: Instant,
    rtt_start: Option<Instant>,
    trace: bool,
    /// A dialled connection's peer asked us to wait before dialling again (a loop, a
    /// version under its `min_version`).
    back_off: Option<Duration>,
    /// Hub: our INFO already went out in the clear, before TLS.
    info_sent: bool,
    /// Leaf: the hub's INFO, read before TLS, for the session to handle first.
    pending_info: Option<Vec<u8>>,
    /// Hub: the nonce of our INFO; leaf: the hub's (our credentials sign it).
    nonce: String,
    /// Hub: when the leaf's user JWT expires (the connection is closed then).
    expires: Option<Instant>,
    /// Hub: the permissions of the user the leaf logged in as; what it sends is checked
    /// against their publish rules.
    inbound: Option<Arc<crate::auth::CompiledPerms>>,
    /// Leaf: CONNECT sent, waiting for the hub's `connect_info` INFO to register.
    pending: Option<Pending>,
    /// Hub: a CONNECT the auth callout decides (`handshake::Callout`); the read loop waits.
    callout: Option<Box<handshake::Callout>>,
}

fn sub_key(subject: &[u8], queue: Option<&[u8]>) -> Bytes {
    match queue {
        None => Bytes::copy_from_slice(subject),
        Some(q) => Bytes::from([subject, b" ", q].concat()),
    }
}

impl LeafConn {
    fn send(&self, bytes: &[u8]) {
        if self.trace {
            let text = String::from_utf8_lossy(bytes);
            for l in text.split("\r\n").filter(|l| !l.trim().is_empty()) {
                tracing::trace!("{} - ->> [{}]", self.conn.log_prefix(), l.trim_end());
            }
        }
        self.conn
            .out
            .push_now(bytes.len(), |b| b.extend_from_slice(bytes));
    }

    fn send_err(&self, text: &str) {
        self.send(format!("-ERR '{text}'\r\n").as_bytes());
    }

    /// Our role on this connection: the hub's leaf (usually: we dialled it).
    fn spoke(&self) -> bool {
        self.conn.spoke.load(Relaxed)
    }

    /// We dialled it (the handshake's direction, whatever the roles).
    fn solicited(&self) -> bool {
        self.solicit.is_some()
    }

    fn src(&self) -> Src {
        Src::Leaf {
            cid: self.conn.cid,
            spoke: self.spoke(),
        }
    }

    fn violation(&self, what: &str) -> Result<(), CloseReason> {
        tracing::error!(
            "{} - Leafnode protocol violation: {what}",
            self.conn.log_prefix()
        );
        Err(CloseReason::ProtocolViolation)
    }

    /// Our INFO as a hub (its `leafnode_urls` are what this leaf is told from now on).
    fn hub_info(&self) -> Vec<u8> {
        let mut info = self.lf.hub_info(&self.srv, Some(self.conn.cid));
        info.nonce.clone_from(&self.nonce);
        let mut b = BytesMut::new();
        let _ = info.write_to(&mut b);
        b.to_vec()
    }

    fn handle(&mut self, op: Op<'_>) -> Result<(), CloseReason> {
        if self.trace {
            tracing::trace!(
                "{} - <<- [{}]",
                self.conn.log_prefix(),
                crate::proto::trace::op_text(&op, true)
            );
        }
        let registered = self.link.is_some();
        match op {
            Op::Connect(json) => self.on_connect(json),
            Op::Info(json) => self.on_info(json),
            Op::Ping => {
                self.send(b"PONG\r\n");
                Ok(())
            }
            Op::Pong => {
                let rtt = driver::peer_pong(&self.conn, &mut self.pings_out, &mut self.rtt_start);
                // s2_auto: the level follows the RTT, from the writer's next batch on.
                if let Some(level) = rtt.and_then(|rtt| self.comp.on_pong(rtt)) {
                    self.conn.out.compress_from_now(level);
                    if let Some(l) = &self.link {
                        *l.compression.lock().unwrap_or_else(|e| e.into_inner()) = self.comp.mode();
                    }
                }
                Ok(())
            }
            Op::Ok => Ok(()),
            Op::Err(text) => {
                let text = String::from_utf8_lossy(text).into_owned();
                tracing::error!(
                    "{} - Leafnode received -ERR: {text}",
                    self.conn.log_prefix()
                );
                if text.contains("Loop detected") {
                    self.back_off = Some(super::remote::LOOP_DELAY);
                } else if text.contains(super::connect::MIN_VERSION_REJECTED) {
                    self.back_off = Some(super::remote::MIN_VERSION_DELAY);
                }
                Err(CloseReason::ProtocolViolation)
            }
            _ if !registered => {
                // As nats-server: interest or messages before CONNECT.
                if !self.solicited() {
                    self.send_err("Authorization Violation");
                }
                self.violation("interest or message before the handshake")
            }
            Op::LsPlus { subject, queue, .. } => self.ls_plus(subject, queue),
            Op::LsMinus { subject, queue, .. } => {
                self.ls_minus(subject, queue);
                Ok(())
            }
            Op::Rmsg(m) => self.on_msg(&m),
            other => self.violation(&format!("unexpected op {other:?}")),
        }
    }

    fn ls_plus(&mut self, subject: &[u8], queue: Option<(&[u8], u32)>) -> Result<(), CloseReason> {
        let Some(link) = self.link.clone() else {
            return Ok(());
        };
        if subject == self.lf.lds().as_bytes() {
            let text = format!(
                "Loop detected for leafnode account={:?}. Delaying attempt to reconnect for 30s",
                link.acc.name.to_string()
            );
            tracing::error!("{} - {text}", self.conn.log_prefix());
            self.send_err(&text);
            self.back_off = Some(super::remote::LOOP_DELAY);
            return Err(CloseReason::ProtocolViolation);
        }
        if super::perms::refuses_interest(&self.conn, subject) {
            let subject = String::from_utf8_lossy(subject);
            if self.solicited() {
                // Our own deny_exports: never sent, so the hub's interest is moot.
                tracing::debug!(
                    "{} - Permissions Violation for Subscription to {subject:?}",
                    self.conn.log_prefix()
                );
                return Ok(());
            }
            self.send_err(&format!(
                "Permissions Violation for Subscription to {subject:?}"
            ));
            tracing::error!(
                "{} - Subscription Violation on {subject:?} - Check other side configuration",
                self.conn.log_prefix()
            );
            return Err(CloseReason::ProtocolViolation);
        }
        let q = queue.map(|(q, _)| q);
        let weight = queue.map_or(1, |(_, w)| w.max(1));
        let key = sub_key(subject, q);
        let delta = match self.subs.get(&key) {
            Some(old) if q.is_none() || old.weight == weight => return Ok(()),
            Some(old) => {
                let old = old.clone();
                let _ = link.acc.sublist.remove(subject, q, &SubRef(old.clone()));
                weight as i32 - old.weight as i32
            }
            None => {
                if self.subs.len() >= MAX_LEAF_SUBS {
                    return self.violation(&format!("more than {MAX_LEAF_SUBS} subscriptions"));
                }
                weight as i32
            }
        };
        let (subj, queue_b) = match q {
            None => (key.clone(), None),
            Some(_) => (
                key.slice(..subject.len()),
                Some(key.slice(subject.len() + 1..)),
            ),
        };
        let sub = Arc::new(Subscription::remote(
            self.conn.clone(),
            subj,
            queue_b,
            weight,
        ));
        if let Err(e) = link.acc.sublist.insert(subject, q, SubRef(sub.clone())) {
            tracing::debug!(
                "{} - Leafnode interest {:?} ignored: {e}",
                self.conn.log_prefix(),
                String::from_utf8_lossy(subject)
            );
            self.subs.remove(&key);
            return Ok(());
        }
        self.subs.insert(key, sub);
        self.propagate(&link.acc, subject, q, delta);
        Ok(())
    }

    fn ls_minus(&mut self, subject: &[u8], queue: Option<&[u8]>) {
        let Some(link) = self.link.clone() else {
            return;
        };
        let Some(sub) = self.subs.remove(&sub_key(subject, queue)[..]) else {
            return;
        };
        let _ = link
            .acc
            .sublist
            .remove(subject, queue, &SubRef(sub.clone()));
        let delta = if queue.is_some() {
            sub.weight as i32
        } else {
            1
        };
        self.propagate(&link.acc, subject, queue, -delta);
    }

    /// The peer's interest changed by `delta`: routes and gateways hear it unless we are
    /// the peer's leaf (a hub's interest stays on this server), the other leaves as their
    /// role allows.
    fn propagate(&self, acc: &Account, subject: &[u8], queue: Option<&[u8]>, delta: i32) {
        if !self.spoke() {
            let s = Bytes::copy_from_slice(subject);
            let q = queue.map(Bytes::copy_from_slice);
            let mut kicks = Vec::new();
            // A leaf that named its cluster: that cluster's interest (`LS+ <origin>`).
            let origin = self.conn.leaf_cluster().map(|c| &c[..]);
            self.srv
                .interest_to_routes_from(acc, (&s, q.as_ref()), delta, origin, &mut kicks);
            for c in kicks {
                c.out.kick();
            }
        }
        self.lf
            .interest_changed(acc, subject, queue, delta, self.src());
    }

    fn on_msg(&mut self, m: &RoutedMsg<'_>) -> Result<(), CloseReason> {
        let Some(link) = self.link.clone() else {
            return Ok(());
        };
        // Subject mappings of the account, as for clients (nats-server maps what leaves send).
        let srv = &self.srv;
        let mapped = link
            .acc
            .mappings
            .map(m.subject, &|| srv.cluster_name_or_empty());
        let subject: &[u8] = mapped.as_deref().unwrap_or(m.subject);
        if let Some(p) = &self.inbound {
            if !perms::exempt(subject) && !p.can_publish(subject) {
                // nats-server's leafPermViolation.
                let subject = String::from_utf8_lossy(subject);
                tracing::error!(
                    "{} - Publish Violation on {subject:?} - Check other side configuration",
                    self.conn.log_prefix()
                );
                self.send_err(&format!("Permissions Violation for Publish to {subject:?}"));
                return Err(CloseReason::ProtocolViolation);
            }
        }
        let acc = &link.acc;
        let msg = Msg {
            subject,
            reply: m.reply,
            header: m.header,
            payload: m.payload,
        };
        self.fan.in_msgs += 1;
        self.fan.in_bytes += msg.size() as u64;
        if self.solicited() && !perms::may_receive(&self.conn, subject) {
            // Our deny_imports (the hub was told, but an older one may not honour it).
            tracing::debug!(
                "{} - Not permitted to receive {:?} from the hub",
                self.conn.log_prefix(),
                String::from_utf8_lossy(subject)
            );
            return Ok(());
        }
        let mut buf = Vec::new();
        let kind = crate::trace::KIND_LEAF;
        let Some(msg) =
            crate::trace::begin_remote(&mut self.fan, &self.conn, kind, acc, msg, &mut buf)
        else {
            return Ok(());
        };
        let origin = Origin::Leaf {
            cid: self.conn.cid,
            spoke: self.spoke(),
        };
        self.fan.leaf_origin = self
            .conn
            .leaf_cluster()
            .map(|c| crate::util::small::SmallBytes::new(c));
        self.fan.publish_remote(acc, &msg, origin, Some(&m.queues));
        crate::trace::finish(&mut self.fan);
        self.fan.retire_in(acc, 0);
        Ok(())
    }

    /// Out of the registry, the peer's interest out of the account (and of what routes,
    /// gateways and other leaves were told).
    fn cleanup(&mut self) {
        if let Some(link) = self.link.take() {
            self.lf.unregister(&link);
            link.acc.num_leafs.fetch_sub(1, Relaxed);
            crate::sys::conns::changed(&self.srv, &link.acc.name);
            for (_, sub) in std::mem::take(&mut self.subs) {
                let q = sub.queue.as_deref();
                let _ = link
                    .acc
                    .sublist
                    .remove(&sub.subject, q, &SubRef(sub.clone()));
                let delta = if q.is_some() { sub.weight as i32 } else { 1 };
                self.propagate(&link.acc, &sub.subject, q, -delta);
            }
        }
        self.fan.clear();
    }
}

/// The leafnode kind on the connection driver.
impl Session for LeafConn {
    type Event = ();

    fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    fn start(&mut self) -> bool {
        if !self.solicited() && !self.info_sent {
            let info = self.hub_info();
            self.send(&info);
        }
        if let Some(json) = self.pending_info.take() {
            if let Err(reason) = self.handle(Op::Info(&json)) {
                self.conn.close(reason);
                return false;
            }
        }
        true
    }

    fn parser(&self) -> Parser {
        Parser::new(Kind::Leaf, Limits::route())
    }

    /// A leaf whose hub's INFO (read before the loop) switched it to compression.
    fn starts_compressed(&mut self) -> bool {
        std::mem::take(&mut self.switch_reader)
    }

    fn handshake_deadline(&self) -> Instant {
        Instant::now() + crate::auth::peer_auth_timeout(self.lf.opts.auth_timeout)
    }

    fn handshake_pending(&self) -> bool {
        self.link.is_none()
    }

    fn on_handshake_timeout(&mut self) -> CloseReason {
        tracing::error!("{} - Leafnode handshake timeout", self.conn.log_prefix());
        if !self.solicited() {
            self.send_err("Authentication Timeout");
        }
        CloseReason::AuthenticationTimeout
    }

    fn next_tick(&self) -> Instant {
        self.expires
            .map_or(self.next_ping, |e| e.min(self.next_ping))
    }

    fn on_tick(&mut self, now: Instant) -> Result<(), CloseReason> {
        if self.expires.is_some_and(|e| e <= now) {
            tracing::info!("{} - Leafnode user JWT expired", self.conn.log_prefix());
            self.send_err("User Authentication Expired");
            return Err(CloseReason::AuthenticationExpired);
        }
        if now < self.next_ping {
            return Ok(());
        }
        let o = &self.srv.opts;
        let (out, rtt) = (&mut self.pings_out, &mut self.rtt_start);
        self.next_ping =
            driver::peer_tick(&self.conn, out, rtt, (o.ping_interval, o.ping_max), now)?;
        self.send(b"PING\r\n");
        Ok(())
    }

    fn on_op(&mut self, op: Op<'_>, _parser: &mut Parser) -> Result<AfterOp, CloseReason> {
        self.handle(op)?;
        if self.callout.is_some() {
            return Ok(AfterOp::Pause);
        }
        Ok(if std::mem::take(&mut self.switch_reader) {
            AfterOp::Compressed
        } else {
            AfterOp::Continue
        })
    }

    fn on_parse_error(&mut self, e: ParseError, rest: &[u8]) -> CloseReason {
        tracing::error!(
            "{} - Leafnode parser ERROR: {e}: proto: {:?}",
            self.conn.log_prefix(),
            driver::snippet(rest)
        );
        if self.link.is_none() && !self.solicited() {
            self.send_err("Authorization Violation");
            CloseReason::AuthenticationViolation
        } else {
            CloseReason::ProtocolViolation
        }
    }

    async fn end_batch(&mut self) {
        self.fan.end_batch(&self.conn).await;
    }

    async fn resume(&mut self, _parser: &mut Parser) -> Result<(), CloseReason> {
        match self.callout.take() {
            Some(c) => self.called_out(*c).await,
            None => Ok(()),
        }
    }

    /// Server shutdown: every leaf connection closes (the shutdown waits for its task).
    async fn event(&mut self) {
        self.srv.shutdown_signal().await
    }

    fn on_event(&mut self, _: (), _parser: &mut Parser) -> Result<(), CloseReason> {
        Err(CloseReason::ServerShutdown)
    }
}
