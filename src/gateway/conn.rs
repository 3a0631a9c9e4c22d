//! One gateway connection (spec §4.2, transcript §10.3). Inbound (accepted): we send INFO
//! first; the peer must send CONNECT (with `gateway`) then its INFO, which registers it; we
//! then send every account's interest (`gateway_cmd` 2, RS+…, `gateway_cmd` 3) and from then
//! on receive its messages. Outbound (dialled): the peer's INFO must name the gateway we
//! dialled; we answer CONNECT + INFO, register, and from then on receive interest and
//! gateway commands and send messages. Anything in the wrong direction is a protocol violation.
//!
//! The handshake (CONNECT, INFO, registration in either direction) is in `conn/handshake.rs`;
//! this file has the task, TLS, the read loop, the ping timer, op dispatch and messages.

mod handshake;

use super::dial::Solicit;
use super::interest::OutInterest;
use super::reply;
use super::{Gateway, Inbound, Outbound};
use crate::account::Account;
use crate::cluster::url::RouteUrl;
use crate::config::COMPAT_VERSION;
use crate::conn::driver::{self, AfterOp, Session};
use crate::conn::tls::{Side, TlsStream};
use crate::conn::{CloseReason, Conn, ConnKind};
use crate::deliver::{Fanout, Msg, Origin};
use crate::proto::encode;
use crate::proto::info::{b64_decode, RouteConnectInfo, ServerInfo};
use crate::proto::parser::{Kind, Limits, Op, ParseError, Parser, RoutedMsg};
use crate::server::ServerShared;
use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

const FIRST_PING: Duration = Duration::from_secs(1);
/// Remote interest one outbound keeps at most (bounded memory for a bad peer).
const MAX_REMOTE_SUBS: usize = 1 << 20;

/// Serve one gateway connection until it closes. Returns true when it had registered.
pub async fn run(
    srv: Arc<ServerShared>,
    gw: Arc<Gateway>,
    stream: TcpStream,
    addr: SocketAddr,
    solicit: Option<Solicit>,
) -> bool {
    let _ = stream.set_nodelay(true);
    let conn = Arc::new(Conn::new(
        srv.next_cid(),
        ConnKind::Gateway,
        addr,
        srv.opts.max_pending.max(64 * 1024 * 1024),
    ));
    let mut g = GwConn {
        fan: Fanout::new(srv.clone()),
        trace: crate::logging::trace_enabled(),
        srv,
        gw,
        conn: conn.clone(),
        solicit,
        remote_name: String::new(),
        out: None,
        inb: None,
        acc_cache: Default::default(),
        pings_out: 0,
        next_ping: Instant::now() + Duration::from_secs(3600),
        rtt_start: None,
        writer: None,
    };
    let tls = match &g.solicit {
        None => {
            g.gw.tls
                .accept
                .as_ref()
                .map(|(a, t)| (Some(a.clone()), None, *t))
        }
        Some(sol) => {
            g.gw.tls
                .dial_for(&sol.name)
                .map(|(c, t)| (None, Some(c.clone()), *t))
        }
    };
    match tls {
        None => {
            let (rd, wr) = stream.into_split();
            g.serve(rd, wr).await;
        }
        Some((acceptor, connector, timeout)) => {
            match g.tls_handshake(stream, acceptor, connector, timeout).await {
                Ok(s) => {
                    let (rd, wr) = tokio::io::split(s);
                    g.serve(rd, wr).await;
                }
                Err(e) => {
                    tracing::error!("{} - TLS gateway handshake error: {e}", conn.log_prefix());
                    conn.close(CloseReason::TlsHandshakeError);
                }
            }
        }
    }
    let registered = g.out.is_some() || g.inb.is_some();
    g.cleanup();
    if let Some(writer) = g.writer.take() {
        let _ = writer.await;
    }
    let reason = conn.close_reason().map_or("", |x| x.as_str());
    tracing::info!(
        "{} - Gateway connection closed: {reason}",
        conn.log_prefix()
    );
    registered
}

struct GwConn {
    srv: Arc<ServerShared>,
    gw: Arc<Gateway>,
    conn: Arc<Conn>,
    solicit: Option<Solicit>,
    /// Inbound: the remote gateway name from CONNECT (empty until then).
    remote_name: String,
    out: Option<Arc<Outbound>>,
    inb: Option<Arc<Inbound>>,
    fan: Fanout,
    acc_cache: crate::account::LastAccount,
    pings_out: u32,
    next_ping: Instant,
    rtt_start: Option<Instant>,
    trace: bool,
    /// The writer task, once serving.
    writer: Option<tokio::task::JoinHandle<()>>,
}

/// Our gateway INFO (spec §4.2).
pub fn gateway_info(srv: &ServerShared, gw: &Gateway) -> ServerInfo {
    let own = gw.own_url();
    let (host, port) = match own.rsplit_once(':') {
        Some((h, p)) => (
            h.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse().unwrap_or(0),
        ),
        None => (own.clone(), 0),
    };
    ServerInfo {
        server_id: srv.id.clone(),
        server_name: srv.name.clone(),
        version: COMPAT_VERSION.into(),
        proto: crate::trace::MSG_TRACE_PROTO,
        go: String::new(),
        host,
        port,
        headers: true,
        max_payload: srv.live_opts().max_payload as i64,
        auth_required: gw.opts.username.is_some() || gw.opts.token.is_some(),
        gateway: gw.name.clone(),
        gateway_urls: gw.cluster_urls(),
        gateway_url: own,
        gateway_nrp: true,
        gateway_iom: true,
        tls_required: gw.tls.accept.is_some(),
        tls_verify: gw.tls.verify,
        ..Default::default()
    }
}

fn info_bytes(info: &ServerInfo) -> Vec<u8> {
    let mut b = BytesMut::new();
    let _ = info.write_to(&mut b);
    b.to_vec()
}

impl GwConn {
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

    /// Writer task, our INFO (inbound), the read loop, on the driver.
    async fn serve<R, W>(&mut self, rd: R, wr: W)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let cfg = self
            .srv
            .write_cfg(ConnKind::Gateway, self.srv.opts.write_deadline);
        self.writer = Some(driver::serve(self, rd, wr, cfg).await);
    }

    /// Gateway TLS as nats-server 2.9 does it: the handshake first, on both sides, before
    /// INFO and CONNECT (which then travel inside TLS).
    async fn tls_handshake(
        &self,
        stream: TcpStream,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        connector: Option<tokio_rustls::TlsConnector>,
        timeout: Duration,
    ) -> Result<TlsStream, String> {
        let side = match (&self.solicit, &acceptor, &connector) {
            (None, Some(a), _) => Side::Accept(a),
            (Some(sol), _, Some(c)) => Side::Connect(c, &sol.url.host),
            _ => return Err("no TLS configuration for this side".into()),
        };
        // As they are now: a reload may change them.
        let pinned = crate::tls::live_pins(&self.srv.live_opts(), crate::conn::ConnKind::Gateway);
        let s = crate::conn::tls::handshake(stream, side, timeout, pinned.as_ref()).await?;
        self.conn.meta().peer_cert = s.peer_cert();
        Ok(s)
    }

    fn send_opening(&mut self) {
        if self.solicit.is_none() {
            let info = gateway_info(&self.srv, &self.gw);
            self.send(&info_bytes(&info));
        }
    }

    fn registered(&self) -> bool {
        self.out.is_some() || self.inb.is_some()
    }

    fn violation(&self, what: &str) -> Result<(), CloseReason> {
        tracing::error!("{} - {what}", self.conn.log_prefix());
        Err(CloseReason::ProtocolViolation)
    }

    fn handle(&mut self, op: Op<'_>) -> Result<(), CloseReason> {
        if self.trace {
            tracing::trace!(
                "{} - <<- [{}]",
                self.conn.log_prefix(),
                crate::proto::trace::op_text(&op, false)
            );
        }
        let inbound = self.solicit.is_none();
        if inbound && self.remote_name.is_empty() && !matches!(op, Op::Connect(_)) {
            // As nats-server: anything before CONNECT is an authentication failure.
            tracing::error!("{} - authentication error", self.conn.log_prefix());
            self.send_err("Authorization Violation");
            return Err(CloseReason::AuthenticationViolation);
        }
        if !inbound && self.out.is_none() && !matches!(op, Op::Info(_) | Op::Err(_)) {
            return self.violation("expected INFO first on an outbound gateway");
        }
        match op {
            Op::Connect(json) => self.on_connect(json),
            Op::Info(json) => self.on_info(json),
            Op::Ping => {
                self.send(b"PONG\r\n");
                Ok(())
            }
            Op::Pong => {
                let rtt = driver::peer_pong(&self.conn, &mut self.pings_out, &mut self.rtt_start);
                if rtt.is_some() && self.out.is_some() {
                    self.gw.sort_by_rtt();
                }
                Ok(())
            }
            Op::Err(text) => {
                tracing::error!(
                    "{} - Gateway received -ERR: {}",
                    self.conn.log_prefix(),
                    String::from_utf8_lossy(text)
                );
                Ok(())
            }
            Op::Ok => Ok(()),
            Op::RsPlus {
                account,
                subject,
                queue,
            } => {
                let Some(out) = self.out.clone() else {
                    return self.violation("Received RS+ from gateway on inbound connection");
                };
                let acc = acc_str(account)?;
                if out.interest.num_subs() >= MAX_REMOTE_SUBS {
                    return self.violation(&format!(
                        "Gateway {:?} sent more than {MAX_REMOTE_SUBS} subscriptions",
                        out.name
                    ));
                }
                if let Err(e) = out.interest.plus(acc, subject, queue.map(|(q, _)| q)) {
                    tracing::debug!("{} - {e}, ignored", self.conn.log_prefix());
                }
                Ok(())
            }
            Op::RsMinus {
                account,
                subject,
                queue,
            } => {
                let Some(out) = self.out.clone() else {
                    return self.violation("Received RS- from gateway on inbound connection");
                };
                out.interest.minus(acc_str(account)?, subject, queue);
                Ok(())
            }
            Op::AccPlus(account) => {
                let Some(out) = self.out.clone() else {
                    return self.violation("Received A+ from gateway on inbound connection");
                };
                out.interest.acc_plus(acc_str(account)?);
                Ok(())
            }
            Op::AccMinus(account) => {
                let Some(out) = self.out.clone() else {
                    return self.violation("Received A- from gateway on inbound connection");
                };
                out.interest.acc_minus(acc_str(account)?);
                Ok(())
            }
            Op::Rmsg(m) => {
                if self.inb.is_none() {
                    return self.violation(if self.solicit.is_some() {
                        "Received a message from gateway on outbound connection"
                    } else {
                        "Received a message from gateway before its INFO"
                    });
                }
                self.on_msg(&m);
                Ok(())
            }
            other => self.violation(&format!("unexpected op {other:?}")),
        }
    }

    fn account(&mut self, name: &[u8]) -> Option<Arc<Account>> {
        self.acc_cache.get(&self.srv.accounts, name)
    }

    /// A message from a remote cluster: to local clients and routes (never to a gateway).
    fn on_msg(&mut self, m: &RoutedMsg<'_>) {
        let Some(acc) = self.account(m.account) else {
            tracing::debug!(
                "{} - Message for unknown account {:?} dropped",
                self.conn.log_prefix(),
                String::from_utf8_lossy(m.account)
            );
            return;
        };
        let size = (m.payload.len() + m.header.map_or(0, <[u8]>::len)) as u64;
        self.fan.in_msgs += 1;
        self.fan.in_bytes += size;
        acc.kinds.gateways_in.add(1, size);
        let mut subject = m.subject;
        let mut origin = Origin::Gateway;
        if let Some((c, s, rest)) = reply::parse(m.subject) {
            if c != self.gw.cluster_hash {
                return;
            }
            if s != self.gw.server_hash {
                self.forward_to_server(&acc, s, m);
                return;
            }
            subject = rest;
            origin = Origin::Route;
        }
        let mut reply = m.reply;
        if let Some(r) = m.reply {
            if reply::parse(r).is_some() {
                let plain = &r[reply::GR_PREFIX.len() + 14..];
                self.gw.replies.remember(&acc.name, plain, r);
                self.fan.route_reply = Some(Bytes::copy_from_slice(r));
                reply = Some(plain);
            }
        }
        let msg = Msg {
            subject,
            reply,
            header: m.header,
            payload: m.payload,
        };
        let mut buf = Vec::new();
        let kind = crate::trace::KIND_GATEWAY;
        let Some(msg) =
            crate::trace::begin_remote(&mut self.fan, &self.conn, kind, &acc, msg, &mut buf)
        else {
            self.fan.route_reply = None;
            return;
        };
        self.fan.publish_remote(&acc, &msg, origin, Some(&m.queues));
        crate::trace::finish(&mut self.fan);
        self.fan.route_reply = None;
        // Shared with routes: this copy used to skip the import shadows (a leak).
        self.fan.retire_in(&acc, 0);
    }

    /// A `_GR_.` reply for another server of this cluster: over the route to it, as is.
    fn forward_to_server(&mut self, acc: &Account, server_hash: &[u8], m: &RoutedMsg<'_>) {
        let Some(cl) = &self.srv.cluster else { return };
        let Some(r) = cl.carrier_to(
            |id| reply::hash6(id.as_bytes())[..] == server_hash[..],
            &acc.name,
        ) else {
            return;
        };
        let header = m.header.filter(|_| r.conn.headers.load(Relaxed));
        // A pinned-account route names no account.
        let name: &[u8] = if r.account.is_some() {
            b""
        } else {
            acc.name.as_bytes()
        };
        let need = 64
            + name.len()
            + m.subject.len()
            + m.reply.map_or(0, <[u8]>::len)
            + header.map_or(0, <[u8]>::len)
            + m.payload.len();
        self.fan.push(&r.conn, need, |b| {
            encode::write_rmsg(b, name, m.subject, m.reply, &[], header, m.payload)
        });
    }

    fn cleanup(&mut self) {
        if let Some(o) = self.out.take() {
            self.gw.unregister_outbound(&o);
        }
        if let Some(i) = self.inb.take() {
            self.gw.unregister_inbound(&i);
        }
        self.fan.clear();
        self.acc_cache.clear();
    }
}

/// The gateway kind on the connection driver.
impl Session for GwConn {
    type Event = ();

    fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    fn start(&mut self) -> bool {
        self.send_opening();
        true
    }

    fn parser(&self) -> Parser {
        Parser::new(Kind::Route, Limits::route())
    }

    fn handshake_deadline(&self) -> Instant {
        Instant::now() + crate::auth::peer_auth_timeout(self.gw.opts.auth_timeout)
    }

    fn handshake_pending(&self) -> bool {
        !self.registered()
    }

    fn on_handshake_timeout(&mut self) -> CloseReason {
        tracing::error!("{} - Gateway handshake timeout", self.conn.log_prefix());
        if self.solicit.is_none() && self.remote_name.is_empty() {
            self.send_err("Authentication Timeout");
        }
        CloseReason::AuthenticationTimeout
    }

    fn next_tick(&self) -> Instant {
        self.next_ping
    }

    fn on_tick(&mut self, now: Instant) -> Result<(), CloseReason> {
        let o = &self.srv.opts;
        let (out, rtt) = (&mut self.pings_out, &mut self.rtt_start);
        self.next_ping =
            driver::peer_tick(&self.conn, out, rtt, (o.ping_interval, o.ping_max), now)?;
        self.send(b"PING\r\n");
        Ok(())
    }

    fn on_op(&mut self, op: Op<'_>, _parser: &mut Parser) -> Result<AfterOp, CloseReason> {
        self.handle(op).map(|()| AfterOp::Continue)
    }

    /// Garbage before the handshake is done counts as an authorization violation (as
    /// nats-server's); after it, as a protocol violation.
    fn on_parse_error(&mut self, e: ParseError, rest: &[u8]) -> CloseReason {
        tracing::error!(
            "{} - Gateway parser ERROR: {e}: proto: {:?}",
            self.conn.log_prefix(),
            driver::snippet(rest)
        );
        if self.solicit.is_none() && self.remote_name.is_empty() {
            self.send_err("Authorization Violation");
            CloseReason::AuthenticationViolation
        } else {
            CloseReason::ProtocolViolation
        }
    }

    async fn end_batch(&mut self) {
        self.fan.end_batch(&self.conn).await;
    }
}

fn acc_str(account: &[u8]) -> Result<&str, CloseReason> {
    std::str::from_utf8(account).map_err(|_| CloseReason::ProtocolViolation)
}

/// `host:port` of a URL (no scheme, credentials or path).
pub fn url_host(u: &str) -> String {
    match RouteUrl::parse(u) {
        Ok(r) if r.host.contains(':') => format!("[{}]:{}", r.host, r.port),
        Ok(r) => format!("{}:{}", r.host, r.port),
        Err(_) => u.to_string(),
    }
}
