//! The client kind: INFO/CONNECT handshake, authentication, PUB/HPUB/SUB/UNSUB/PING/PONG and
//! delivery into subscribers' outbound buffers. Runs one task per connection (the read loop);
//! the writer task lives in `conn`. Talks to the rest of the server only through the account
//! (sublist) and `ServerShared`.
//!
//! Files: this one has `serve`, the read loop, op dispatch, PUB and delivery, the ping timer;
//! `tls.rs` the client port TLS handshake, `connect.rs` CONNECT and authentication, `subs.rs`
//! SUB/UNSUB and cleanup, `reload.rs` re-checks after a config reload, `trace.rs` `-V` tracing.

use crate::account::{Account, SubRef, Subscription};
use crate::auth::{CompiledPerms, Credentials};
use crate::conn::driver::{self, AfterOp, Session};
use crate::conn::{writer, CloseReason, Conn, ConnKind};
use crate::deliver::{Fanout, Msg, Origin};
use crate::proto::info::ConnectInfo;
use crate::proto::parser::{Kind, Limits, Op, ParseError, Parser};
use crate::server::ServerShared;
use crate::subject;
use crate::sublist::SublistResult;
use crate::util::FastMap;
use bytes::BytesMut;
use rand::Rng;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::Instant;

mod connect;
mod reload;
mod subs;
mod tls;
mod trace;

use tls::serve_tls;

/// nats-server's `-ERR` texts for clients.
pub mod errs {
    pub const UNKNOWN_OP: &str = "Unknown Protocol Operation";
    pub const INVALID_SUBJECT: &str = "Invalid Subject";
    pub const INVALID_PUB_SUBJECT: &str = "Invalid Publish Subject";
    pub const AUTH_VIOLATION: &str = "Authorization Violation";
    pub const AUTH_TIMEOUT: &str = "Authentication Timeout";
    pub const USER_AUTH_EXPIRED: &str = "User Authentication Expired";
    pub const STALE: &str = "Stale Connection";
    pub const MAX_CONNECTIONS: &str = "maximum connections exceeded";
    pub const MAX_SUBS: &str = "maximum subscriptions exceeded";
    pub const MAX_ACCOUNT_CONNECTIONS: &str = "maximum account active connections exceeded";
    pub const NO_RESPONDERS_NEEDS_HEADERS: &str = "no responders requires headers support";
    pub const INVALID_PROTOCOL: &str = "invalid client protocol";
}

/// Entries of the per-connection match cache.
const L1_SIZE: usize = 64;

/// Accept one client connection and serve it until it closes.
pub async fn serve(srv: Arc<ServerShared>, stream: TcpStream, addr: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let cid = srv.next_cid();
    // The options in force when the connection starts; a reload updates them (`on_reload`).
    let opts = srv.live_opts();
    let conn = Arc::new(Conn::new(cid, ConnKind::Client, addr, opts.max_pending));
    if let Some(acceptor) = srv.client_tls() {
        return serve_tls(srv, conn, opts, stream, acceptor).await;
    }
    // Plaintext: the socket's own halves, no extra layer.
    conn.out.set_direct(&stream);
    let (rd, wr) = stream.into_split();
    let cfg = srv.write_cfg(ConnKind::Client, opts.write_deadline);
    let mut c = Client::new(srv, conn.clone(), opts);
    tracing::debug!("{} - Client connection created", conn.log_prefix());
    let writer = driver::serve(&mut c, rd, wr, cfg).await;
    c.finish();
    let _ = writer.await;
}

/// Task-local state of one client connection.
struct Client {
    srv: Arc<ServerShared>,
    /// The options in force for this connection (refreshed by a config reload).
    opts: Arc<crate::config::Options>,
    /// The CONNECT credentials, kept to re-check them when the config is reloaded.
    creds: Option<connect::StoredCreds>,
    conn: Arc<Conn>,
    acc: Arc<Account>,
    perms: Option<Arc<CompiledPerms>>,
    connected: bool,
    verbose: bool,
    pedantic: bool,
    echo: bool,
    headers: bool,
    no_responders: bool,
    pings_out: u32,
    last_in: Instant,
    /// When the ping timer fires next (re-armed early at CONNECT, to measure RTT).
    next_ping: Instant,
    /// When the user JWT this client connected with expires: it is closed then.
    expires_at: Option<Instant>,
    /// The ping timer's interval (refreshed by a config reload).
    ping_interval: Duration,
    /// Whether clients must authenticate (refreshed by a config reload).
    auth_required: bool,
    /// Config reloads, until the server drops the sender.
    reloads: Option<tokio::sync::watch::Receiver<u64>>,
    /// When the PING whose PONG measures RTT was sent.
    rtt_start: Option<Instant>,
    rtt_known: bool,
    /// Match results by subject, valid while the account sublist's generation is unchanged.
    l1: FastMap<Vec<u8>, (u64, Arc<SublistResult<SubRef>>)>,
    /// Publish permission decisions by subject.
    pub_ok: FastMap<Vec<u8>, bool>,
    /// Delivery into destinations' buffers, batched per read.
    fan: Fanout,
    trace: bool,
    /// Limits from the server's options and the account's `limits {}` (set at CONNECT and
    /// at a reload): subscriptions (`None`: unlimited) and payload bytes.
    max_subs: Option<usize>,
    max_payload: usize,
    /// A JWT user's own `subs` and `payload` limits (-1: none), lowered further by the
    /// account's and the server's.
    jwt_limits: Option<(i64, i64)>,
    /// The parser's payload limit must follow `max_payload` (changed by CONNECT or reload).
    limits_changed: bool,
    /// A CONNECT waiting for its account to be fetched or for the auth service.
    wait: connect::Waiting,
    /// The first PING after CONNECT was answered (nats-server then sends an INFO when the
    /// client's `max_payload` is not the server's).
    first_pong_sent: bool,
    /// The `nonce` this client's INFO carried (empty: none was sent), which an nkey user
    /// signs in CONNECT.
    nonce: String,
}

enum Flow {
    Continue,
    Close(CloseReason),
    /// Wait before the next op: a CONNECT's account is being fetched (`connect.rs`).
    Pause,
}

impl Client {
    fn new(srv: Arc<ServerShared>, conn: Arc<Conn>, opts: Arc<crate::config::Options>) -> Self {
        let acc = srv.accounts.global();
        let srv_ping_interval = opts.ping_interval;
        let fan_srv = srv.clone();
        // A fresh nonce per connection when nkey users exist (nats-server: 11 random bytes,
        // base64url).
        let nonce = if srv.auth.nonce_required() {
            crate::util::ids::nonce()
        } else {
            String::new()
        };
        Client {
            trace: crate::logging::trace_enabled(),
            ping_interval: opts.ping_interval.max(Duration::from_millis(10)),
            auth_required: srv.auth.required(),
            reloads: Some(srv.reload_watch()),
            srv,
            opts,
            creds: None,
            conn,
            acc,
            perms: None,
            connected: false,
            // nats-server's defaults before (or without) CONNECT.
            verbose: true,
            pedantic: true,
            echo: true,
            headers: false,
            no_responders: false,
            pings_out: 0,
            last_in: Instant::now(),
            next_ping: Instant::now() + srv_ping_interval,
            expires_at: None,
            rtt_start: None,
            rtt_known: false,
            l1: FastMap::default(),
            pub_ok: FastMap::default(),
            fan: Fanout::new(fan_srv).for_client(),
            max_subs: None,
            jwt_limits: None,
            max_payload: 0,
            limits_changed: false,
            wait: Default::default(),
            first_pong_sent: false,
            nonce,
        }
        .with_limits()
    }

    /// Take the limits of the options in force and of this client's account.
    fn with_limits(mut self) -> Self {
        self.apply_limits();
        self
    }

    /// nats-server's `applyAccountLimits`: the smaller of the server's and the account's.
    fn apply_limits(&mut self) {
        let acc = self
            .opts
            .account_limits
            .get(&self.acc.name)
            .copied()
            .unwrap_or_default();
        // nats-server's `minLimit`: the user's own (JWT) limit, then the account's, then
        // the server's; -1 is none.
        let (user_subs, user_payload) = self.jwt_limits.unwrap_or((-1, -1));
        let lower = |user: i64, account: i64| match (user < 0, account < 0) {
            (true, _) => account,
            (false, true) => user,
            (false, false) => user.min(account),
        };
        let subs = crate::config::AccountLimits::min_with(
            self.opts.max_subscriptions,
            lower(user_subs, acc.max_subscriptions),
        );
        let payload = crate::config::AccountLimits::min_with(
            self.opts.max_payload,
            lower(user_payload, acc.max_payload),
        )
        .unwrap_or(self.opts.max_payload);
        self.max_subs = subs;
        if payload != self.max_payload {
            self.max_payload = payload;
            self.limits_changed = true;
        }
    }

    /// The parser limits for this client.
    fn parser_limits(&self) -> Limits {
        Limits {
            max_control_line: self.opts.max_control_line,
            max_payload: self.max_payload,
        }
    }

    // ----- sending control lines to this client -----

    /// `-V`: the `->> [...]` line for what goes out.
    fn trace_out(&self, bytes: &[u8]) {
        if self.trace {
            let line = String::from_utf8_lossy(bytes.strip_suffix(b"\r\n").unwrap_or(bytes))
                .trim_end()
                .replace("-ERR '", "-ERR ")
                .replace("+OK", "OK");
            let line = line.strip_suffix('\'').unwrap_or(&line);
            tracing::trace!("{} - ->> [{line}]", self.conn.log_prefix());
        }
    }

    fn send_raw(&self, bytes: &[u8]) {
        self.trace_out(bytes);
        self.conn
            .out
            .push_now(bytes.len(), |b| b.extend_from_slice(bytes));
    }

    fn send_err(&self, text: &str) {
        let line = format!("-ERR '{text}'\r\n");
        self.send_raw(line.as_bytes());
    }

    fn send_ok(&self) {
        if self.verbose {
            self.send_raw(b"+OK\r\n");
        }
    }

    /// `INFO {…} \r\n` for this client (nats-server writes a space before the CRLF).
    fn info_line(&self) -> Vec<u8> {
        crate::server::info_line(&self.srv.client_hello_json(&self.conn, &self.nonce, false))
    }

    fn send_info(&self) {
        let line = self.info_line();
        self.send_raw(&line);
    }

    // ----- lifecycle -----

    /// Join the server's clients; false (with the `-ERR` queued and the connection closing)
    /// when `max_connections` is reached.
    fn register(&mut self) -> bool {
        if self.register_quietly() {
            return true;
        }
        self.send_err(errs::MAX_CONNECTIONS);
        self.max_connections_exceeded();
        false
    }

    fn register_quietly(&self) -> bool {
        self.srv.register_client(&self.conn)
    }

    fn max_connections_exceeded(&self) {
        tracing::error!(
            "{} - Maximum connections exceeded ({})",
            self.conn.log_prefix(),
            self.opts.max_connections
        );
        self.conn.close(CloseReason::MaxConnectionsExceeded);
    }

    /// After the read loop (or a failed handshake): leave the server's clients for the closed
    /// ring and drop this connection's subscriptions.
    fn finish(&mut self) {
        // The closed-connection snapshot (`/connz?state=closed`) keeps the subscriptions, as
        // nats-server's does: take it before `cleanup` drains them.
        self.srv.unregister_client(&self.conn);
        self.cleanup();
        if let Some(r) = self.conn.close_reason() {
            tracing::debug!(
                "{} - Client connection closed: {}",
                self.conn.log_prefix(),
                r.as_str()
            );
        }
    }

    /// Report a protocol error the way nats-server does (an -ERR only for some kinds; bad
    /// sizes and argument counts close silently) and pick the close reason.
    fn parse_error(&self, e: ParseError, rest: &[u8]) -> CloseReason {
        let snippet = String::from_utf8_lossy(&rest[..rest.len().min(32)]).into_owned();
        let reason = match e {
            ParseError::MaxControlLine => CloseReason::MaxControlLineExceeded,
            ParseError::MaxPayload { .. } => CloseReason::MaxPayloadExceeded,
            _ => CloseReason::ProtocolViolation,
        };
        if let Some(text) = e.err_text() {
            self.send_err(text);
        }
        tracing::error!(
            "{} - Client parser ERROR: {e}: proto: {snippet:?}",
            self.conn.log_prefix()
        );
        reason
    }

    /// nats-server's ping timer: a PING per interval unless the client was active within it
    /// (the first one always goes out, to measure RTT); `ping_max` unanswered PINGs and the
    /// next tick closes the connection as stale.
    fn ping_timer(&mut self) -> Flow {
        let interval = self.ping_interval;
        tracing::debug!("{} - Client Ping Timer", self.conn.log_prefix());
        let idle = self.last_in.elapsed();
        if self.rtt_known && idle < interval {
            tracing::debug!(
                "{} - Delaying PING due to client activity {}s ago",
                self.conn.log_prefix(),
                idle.as_secs()
            );
            return Flow::Continue;
        }
        if self.pings_out + 1 > self.opts.ping_max {
            tracing::debug!(
                "{} - Stale Client Connection - Closing",
                self.conn.log_prefix()
            );
            self.send_err(errs::STALE);
            self.srv.stats.stale_clients.fetch_add(1, Relaxed);
            return Flow::Close(CloseReason::StaleConnection);
        }
        self.pings_out += 1;
        if self.rtt_start.is_none() && !self.rtt_known {
            self.rtt_start = Some(Instant::now());
        }
        self.send_raw(b"PING\r\n");
        Flow::Continue
    }

    // ----- ops -----

    fn handle(&mut self, op: Op<'_>) -> Flow {
        if self.trace {
            self.trace_op(&op);
        }
        if !self.connected && !matches!(op, Op::Connect(_)) && self.srv.auth.required() {
            self.send_err(errs::AUTH_VIOLATION);
            return Flow::Close(CloseReason::AuthenticationViolation);
        }
        match op {
            Op::Connect(json) => self.on_connect(json),
            Op::Ping => {
                self.send_raw(b"PONG\r\n");
                if self.connected && !self.first_pong_sent {
                    self.first_pong_sent = true;
                    // nats-server 2.9: an INFO with this client's own max_payload (its
                    // account's) after the first PONG, for clients that take async INFO.
                    if self.max_payload != self.opts.max_payload
                        && self.conn.async_info.load(Relaxed)
                    {
                        let json = self.srv.client_info_json_with(&self.conn, self.max_payload);
                        self.send_raw(&crate::server::info_line(&json));
                    }
                }
                Flow::Continue
            }
            Op::Pong => {
                self.pings_out = 0;
                if let Some(t) = self.rtt_start.take() {
                    self.rtt_known = true;
                    self.conn.meta().rtt = Some(t.elapsed());
                }
                Flow::Continue
            }
            Op::Pub {
                subject,
                reply,
                payload,
            } => self.on_pub(subject, reply, None, payload),
            Op::Hpub {
                subject,
                reply,
                header,
                payload,
            } => {
                if !self.headers {
                    // nats-server closes without an -ERR.
                    tracing::error!("{} - message headers not supported", self.conn.log_prefix());
                    return Flow::Close(CloseReason::ProtocolViolation);
                }
                self.on_pub(subject, reply, Some(header), payload)
            }
            Op::Sub {
                subject,
                queue,
                sid,
            } => self.on_sub(subject, queue, sid),
            Op::Unsub { sid, max } => self.on_unsub(sid, max),
            Op::Ok | Op::Err(_) | Op::Info(_) => Flow::Continue,
            _ => {
                self.send_err(errs::UNKNOWN_OP);
                Flow::Close(CloseReason::ProtocolViolation)
            }
        }
    }

    fn lookup(&mut self, subject: &[u8]) -> Arc<SublistResult<SubRef>> {
        let gen = self.acc.sublist.generation();
        if let Some((g, r)) = self.l1.get(subject) {
            if *g == gen {
                return r.clone();
            }
        }
        let r = self.acc.sublist.matches(subject);
        if self.l1.len() >= L1_SIZE && !self.l1.contains_key(subject) {
            self.l1.clear();
        }
        self.l1.insert(subject.to_vec(), (gen, r.clone()));
        r
    }

    fn can_publish(&mut self, subject: &[u8]) -> bool {
        let Some(p) = &self.perms else { return true };
        if let Some(ok) = self.pub_ok.get(subject) {
            return *ok;
        }
        let ok = p.can_publish(subject);
        if !ok {
            // A reply it may answer (never cached: each answer counts).
            if let Some(r) = self.conn.responses.get() {
                return r.allow(subject);
            }
        }
        if self.pub_ok.len() >= 128 {
            self.pub_ok.clear();
        }
        self.pub_ok.insert(subject.to_vec(), ok);
        ok
    }

    fn on_pub(
        &mut self,
        subject: &[u8],
        reply: Option<&[u8]>,
        header: Option<&[u8]>,
        payload: &[u8],
    ) -> Flow {
        // nats-server: a malformed subject is never delivered; a wildcard one is delivered
        // literally. Pedantic clients get an -ERR for either (and the wildcard one still goes).
        let well_formed = subject::is_valid_subject(subject);
        if self.pedantic && (!well_formed || subject::has_wildcard(subject)) {
            self.send_err(errs::INVALID_PUB_SUBJECT);
        }
        if !well_formed {
            return Flow::Continue;
        }
        // Subject mappings come first: permissions and delivery see the mapped subject.
        let mapped;
        let mut subject = subject;
        let srv = &self.srv;
        if let Some(m) = self
            .acc
            .mappings
            .map(subject, &|| srv.cluster_name_or_empty())
        {
            mapped = m;
            subject = &mapped;
        }
        // Message tracing: one scan of a header for `Nats-Trace-Dest` (and `traceparent` when
        // an account has a trace destination), nothing without a header.
        let rewritten;
        let mut header = header;
        let traced = header.is_some_and(|h| crate::trace::may_trace(&**self.fan.fabric(), h));
        if traced {
            match self.trace_begin(subject, reply, header, payload) {
                Some(None) => {}
                Some(Some(h)) => {
                    rewritten = h;
                    header = Some(&rewritten);
                }
                None => return Flow::Continue,
            }
        }
        if !self.can_publish(subject) {
            let s = String::from_utf8_lossy(subject);
            tracing::error!(
                "{} - Publish Violation - User {:?}, Subject {s:?}",
                self.conn.log_prefix(),
                self.conn.meta().user
            );
            let text = format!("Permissions Violation for Publish to \"{s}\"");
            self.send_err(&text);
            if let Some(t) = self.fan.msg_trace.as_deref_mut() {
                t.set_ingress_error(text);
                crate::trace::finish(&mut self.fan);
            }
            return Flow::Continue;
        }
        self.send_ok();
        let size = header.map_or(0, <[u8]>::len) + payload.len();
        self.fan.in_msgs += 1;
        self.fan.in_bytes += size as u64;
        self.acc.in_msgs.fetch_add(1, Relaxed);
        let r = self.lookup(subject);
        let m = Msg {
            subject,
            reply,
            header,
            payload,
        };
        let origin = Origin::Client {
            cid: self.conn.cid,
            echo: self.echo,
        };
        let delivered = self.fan.publish(&self.acc, &r, &m, origin, None);
        if traced {
            crate::trace::finish(&mut self.fan);
        }
        self.retire_finished();
        if delivered == 0 && self.no_responders {
            if let Some(reply) = reply {
                self.send_no_responders(reply);
            }
        }
        Flow::Continue
    }

    /// Start tracing a message with a trace header (see `trace::begin`): `None` drops it,
    /// `Some(Some(h))` delivers it untraced with header `h`, `Some(None)` goes on (traced or
    /// not, as `self.fan.msg_trace` says).
    fn trace_begin(
        &mut self,
        subject: &[u8],
        reply: Option<&[u8]>,
        header: Option<&[u8]>,
        payload: &[u8],
    ) -> Option<Option<Vec<u8>>> {
        use crate::trace::{begin, Begin, From, KIND_CLIENT};
        let m = Msg {
            subject,
            reply,
            header,
            payload,
        };
        let perms = self.perms.clone();
        let allowed = |d: &[u8]| perms.as_ref().is_none_or(|p| p.can_publish(d));
        let from = From {
            conn: &self.conn,
            kind: KIND_CLIENT,
        };
        match begin(&mut self.fan, from, &self.acc, &m, &allowed) {
            Begin::Plain | Begin::Traced => Some(None),
            Begin::Rewrite(h) => Some(Some(h)),
            Begin::Skip => None,
            Begin::DestDenied(dest) => {
                tracing::error!(
                    "{} - Publish Violation - User {:?}, Subject {dest:?}",
                    self.conn.log_prefix(),
                    self.conn.meta().user
                );
                self.send_err(&format!("Permissions Violation for Publish to \"{dest}\""));
                None
            }
        }
    }

    /// `HMSG <reply> <sid> 16 16` + `NATS/1.0 503` to this client's own subscription on the
    /// reply subject.
    fn send_no_responders(&mut self, reply: &[u8]) {
        let r = self.lookup(reply);
        let own = r
            .psubs
            .iter()
            .find(|s| s.conn.cid == self.conn.cid)
            .cloned();
        if let Some(s) = own {
            let m = Msg {
                subject: reply,
                reply: None,
                header: Some(b"NATS/1.0 503\r\n\r\n"),
                payload: b"",
            };
            self.fan.to_sub(&s, &m);
            self.retire_finished();
        }
    }
}

/// The client kind on the connection driver.
impl Session for Client {
    /// A config reload (false: the server dropped the sender; no more will come).
    type Event = bool;

    fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    /// INFO, then joining the server's clients (false over `max_connections`).
    fn start(&mut self) -> bool {
        self.send_info();
        self.register()
    }

    fn parser(&self) -> Parser {
        Parser::new(Kind::Client, self.parser_limits())
    }

    fn handshake_deadline(&self) -> Instant {
        Instant::now() + self.opts.auth_timeout
    }

    fn handshake_pending(&self) -> bool {
        self.auth_required && !self.connected
    }

    fn on_handshake_timeout(&mut self) -> CloseReason {
        self.send_err(errs::AUTH_TIMEOUT);
        tracing::error!("{} - Authentication Timeout", self.conn.log_prefix());
        CloseReason::AuthenticationTimeout
    }

    fn next_tick(&self) -> Instant {
        match self.expires_at {
            Some(at) if at < self.next_ping => at,
            _ => self.next_ping,
        }
    }

    fn on_tick(&mut self, now: Instant) -> Result<(), CloseReason> {
        if self.expires_at.is_some_and(|at| now >= at) {
            // As nats-server's `authExpired`.
            self.send_err(errs::USER_AUTH_EXPIRED);
            tracing::debug!("{} - {}", self.conn.log_prefix(), errs::USER_AUTH_EXPIRED);
            return Err(CloseReason::AuthenticationExpired);
        }
        if now < self.next_ping {
            return Ok(()); // the tick was for the expiry, which moved (not yet)
        }
        self.next_ping = now + self.ping_interval;
        match self.ping_timer() {
            Flow::Close(r) => Err(r),
            Flow::Continue | Flow::Pause => Ok(()),
        }
    }

    fn on_read(&mut self, now: Instant) {
        self.last_in = now;
    }

    fn on_op(&mut self, op: Op<'_>, parser: &mut Parser) -> Result<AfterOp, CloseReason> {
        let paused = match self.handle(op) {
            Flow::Close(r) => return Err(r),
            Flow::Pause => true,
            Flow::Continue => false,
        };
        self.take_limits(parser);
        Ok(if paused {
            AfterOp::Pause
        } else {
            AfterOp::Continue
        })
    }

    async fn resume(&mut self, parser: &mut Parser) -> Result<(), CloseReason> {
        let flow = self.connect_resumed().await;
        self.take_limits(parser);
        match flow {
            Flow::Close(r) => Err(r),
            Flow::Continue | Flow::Pause => Ok(()),
        }
    }

    fn on_parse_error(&mut self, e: ParseError, rest: &[u8]) -> CloseReason {
        self.parse_error(e, rest)
    }

    /// After a batch of ops: publish counters, wake destinations, slow down for stalled ones.
    async fn end_batch(&mut self) {
        self.fan.end_batch(&self.conn).await;
    }

    async fn event(&mut self) -> bool {
        match self.reloads.as_mut() {
            Some(r) => r.changed().await.is_ok(),
            None => std::future::pending().await,
        }
    }

    /// A reload: re-check this connection against the new options and take up its limits.
    fn on_event(&mut self, reloaded: bool, parser: &mut Parser) -> Result<(), CloseReason> {
        if !reloaded {
            self.reloads = None;
            return Ok(());
        }
        if let Flow::Close(r) = self.on_reload() {
            return Err(r);
        }
        parser.set_limits(self.parser_limits());
        self.limits_changed = false;
        self.auth_required = self.srv.auth.required();
        self.ping_interval = self.opts.ping_interval.max(Duration::from_millis(10));
        Ok(())
    }
}
