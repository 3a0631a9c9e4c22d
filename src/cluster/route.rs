//! One route connection, either accepted or dialled: the handshake (the acceptor sends INFO
//! first; the dialler sends CONNECT and INFO together), registration with the cluster, the
//! interest dump and gossip, remote interest (RS+/RS-/LS+/LS-) into the account sublists,
//! routed messages (RMSG/HMSG) to local clients only, and PING/PONG liveness.
//!
//! Files: this one has the task, TLS, the handshake and registration; `route/remote.rs` remote
//! interest and routed messages; `route/session.rs` the `Session` the connection driver runs.

mod reload;
mod remote;
mod session;

use super::discovery;
use super::mesh::{self, CloseWhy, Slot};
use super::url::RouteUrl;
use super::{Cluster, RouteEntry, Verdict};
use crate::account::{Account, SubRef, Subscription};
use crate::compress::{CompressionMode, InfoStep, RouteCompression};
use crate::conn::driver::{self, AfterOp, Session};
use crate::conn::tls::{Side, TlsStream};
use crate::conn::{CloseReason, Conn, ConnKind};
use crate::deliver::{Fanout, Msg, Origin};
use crate::proto::info::{RouteConnectInfo, ServerInfo};
use crate::proto::parser::{Kind, Limits, Op, ParseError, Parser, RoutedMsg};
use crate::server::ServerShared;
use crate::util::FastMap;
use bytes::{Bytes, BytesMut};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How a dialled route came about.
#[derive(Clone, Debug)]
pub struct Solicit {
    pub url: RouteUrl,
    /// From the `routes` setting (true) or learned by gossip (false).
    pub configured: bool,
    /// The mesh's number for the dial.
    pub dial: u64,
    /// The connection the mesh dialled this for: a pool slot (`route_pool_idx`) or a pinned
    /// account (`route_account`), as our INFO names it.
    pub slot: Slot,
    /// The gossip mode the mesh dialled with (2.11 `gossip_mode`, in our INFO).
    pub gossip_mode: u8,
}

/// The first PING on a new route, as nats-server does.
const FIRST_PING: Duration = Duration::from_secs(1);
/// The bound on a route handshake when the cluster requires no auth (nats-server: none).
const NO_AUTH_HANDSHAKE: Duration = Duration::from_secs(10);

/// Serve one route connection until it closes.
pub async fn run(
    srv: Arc<ServerShared>,
    cl: Arc<Cluster>,
    stream: TcpStream,
    addr: SocketAddr,
    solicit: Option<Solicit>,
) {
    let _ = stream.set_nodelay(true);
    let conn = Arc::new(Conn::new(
        srv.next_cid(),
        ConnKind::Route,
        addr,
        srv.opts.max_pending.max(64 * 1024 * 1024),
    ));
    cl.conn_started(&srv, &conn, solicit.as_ref().map(|s| s.dial));
    let mut r = Route::new(srv.clone(), cl.clone(), conn.clone(), solicit);
    match &cl.tls {
        None => {
            conn.out.set_direct(&stream);
            let (rd, wr) = stream.into_split();
            r.serve(rd, wr).await;
        }
        Some(tls) => match r.tls_handshake(stream, tls).await {
            Ok(stream) => {
                let (rd, wr) = tokio::io::split(stream);
                r.serve(rd, wr).await;
            }
            Err(e) => {
                tracing::error!("{} - TLS route handshake error: {e}", conn.log_prefix());
                conn.close(CloseReason::TlsHandshakeError);
            }
        },
    }
    let reason = conn.close_reason().map_or("", |x| x.as_str());
    tracing::info!("{} - Router connection closed: {reason}", conn.log_prefix());
    cl.conn_ended(&srv, &conn);
}

struct Route {
    srv: Arc<ServerShared>,
    cl: Arc<Cluster>,
    conn: Arc<Conn>,
    solicit: Option<Solicit>,
    /// Accept side: CONNECT seen (must come first).
    connect_seen: bool,
    entry: Option<Arc<RouteEntry>>,
    /// Remote interest by account (as the wire names it).
    remote: FastMap<Bytes, remote::RemoteAcc>,
    /// Number of interest entries in `remote`.
    remote_count: usize,
    fan: Fanout,
    /// Last account a routed message named (most routes carry one or two).
    acc_cache: crate::account::LastAccount,
    pings_out: u32,
    next_ping: Instant,
    rtt_start: Option<Instant>,
    trace: bool,
    /// The pinned account of this connection (RS+/RMSG then carry no account).
    pinned: Option<Arc<Account>>,
    /// The parser must switch to account-less route ops (set by registration).
    parser_no_account: bool,
    /// The parser must expect `LS- <origin> …` (the peer understands `lnocu`).
    parser_lnocu: bool,
    /// This connection's compression handshake and negotiated mode.
    comp: RouteCompression,
    /// A dialler that held its INFO (compression configured) still owes it.
    info_held: bool,
    /// The `compression` that INFO carries: the negotiated mode (`s2_auto` when so
    /// configured).
    held_info_mode: CompressionMode,
    /// The peer's bytes after the current op are an S2 stream: the reader must switch.
    switch_reader: bool,
    /// When the connection started (s2_auto's RTT before any PONG, as nats-server).
    started: Instant,
    /// Moves when a reload changed compression or pinned accounts (`route/reload.rs`).
    reconf: Option<tokio::sync::watch::Receiver<u64>>,
    /// A reload came during the handshake: re-checked once registered.
    reconf_missed: bool,
}

impl Route {
    fn new(
        srv: Arc<ServerShared>,
        cl: Arc<Cluster>,
        conn: Arc<Conn>,
        solicit: Option<Solicit>,
    ) -> Self {
        let comp = RouteCompression::new(cl.compression_opts(), solicit.is_some());
        let reconf = Some(cl.reconf_watch());
        Route {
            fan: Fanout::new(srv.clone()),
            trace: crate::logging::trace_enabled(),
            srv,
            cl,
            conn,
            solicit,
            connect_seen: false,
            entry: None,
            remote: FastMap::default(),
            remote_count: 0,
            acc_cache: Default::default(),
            pings_out: 0,
            next_ping: Instant::now() + Duration::from_secs(3600),
            rtt_start: None,
            pinned: None,
            parser_no_account: false,
            parser_lnocu: false,
            comp,
            info_held: false,
            held_info_mode: CompressionMode::NotSupported,
            switch_reader: false,
            started: Instant::now(),
            reconf,
            reconf_missed: false,
        }
    }

    fn send(&self, bytes: &[u8]) {
        if self.trace {
            let text = String::from_utf8_lossy(bytes);
            for l in text.split("\r\n").filter(|l| !l.is_empty()) {
                tracing::trace!("{} - ->> [{l}]", self.conn.log_prefix());
            }
        }
        self.conn
            .out
            .push_now(bytes.len(), |b| b.extend_from_slice(bytes));
    }

    fn send_err(&self, text: &str) {
        self.send(format!("-ERR '{text}'\r\n").as_bytes());
    }

    /// Run the connection on the driver, then clean up.
    async fn serve<R, W>(&mut self, rd: R, wr: W)
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let cfg = self
            .srv
            .write_cfg(ConnKind::Route, self.srv.opts.write_deadline);
        let writer = driver::serve(self, rd, wr, cfg).await;
        self.cleanup();
        let _ = writer.await;
    }

    /// Route TLS as nats-server 2.9 does it: the handshake comes first, on both sides, before
    /// any protocol line (INFO and CONNECT then travel inside TLS).
    async fn tls_handshake(
        &mut self,
        stream: TcpStream,
        tls: &super::RouteTls,
    ) -> Result<TlsStream, String> {
        let side = match &self.solicit {
            None => Side::Accept(&tls.acceptor),
            Some(sol) => Side::Connect(&tls.connector, &sol.url.host),
        };
        // As they are now: a reload may change them.
        let pinned = crate::tls::live_pins(&self.srv.live_opts(), crate::conn::ConnKind::Route);
        let s = crate::conn::tls::handshake(stream, side, tls.timeout, pinned.as_ref()).await?;
        self.conn.meta().peer_cert = s.peer_cert();
        Ok(s)
    }

    /// Our INFO line, with `compression` (nats-server 2.10+ writes every mode, `"not
    /// supported"` included): the pool slot or pinned account the mesh dialled this for, and
    /// its gossip mode — or, for a dialler's compression negotiation INFO (`negotiation`), only
    /// the pinned account, as nats-server's (no pool index, default gossip mode).
    fn info_line(&self, compression: CompressionMode, negotiation: bool) -> Vec<u8> {
        let mut info = self.srv.route_info(&self.cl, true, None);
        info.compression = compression.as_str().to_string();
        if let Some(s) = &self.solicit {
            match &s.slot {
                Slot::Pool(i) if !negotiation => info.route_pool_idx = u32::from(*i),
                Slot::Pool(_) => {}
                Slot::Account(a) => info.route_account = a.to_string(),
            }
            if !negotiation {
                info.gossip_mode = s.gossip_mode;
            }
        }
        let json = serde_json::to_vec(&info).unwrap_or_default();
        let mut line = Vec::with_capacity(json.len() + 8);
        line.extend_from_slice(b"INFO ");
        line.extend_from_slice(&json);
        line.extend_from_slice(b"\r\n");
        line
    }

    /// The dialler sends CONNECT and INFO together (the mesh chose the slot before dialling:
    /// a pool's slots 1.. and pinned routes only once the peer's first INFO said it pools),
    /// except that with compression configured (`accept`, the default, included) it holds its
    /// INFO until the peer's INFO has come, as nats-server 2.10+ does: that INFO then names
    /// the negotiated mode.
    fn send_opening(&mut self) {
        self.info_held = self.comp.hold_info();
        let info = if self.info_held {
            Vec::new()
        } else {
            self.info_line(self.comp.initial_info_mode(), false)
        };
        match &self.solicit {
            Some(s) => {
                tracing::debug!(
                    "{} - Route connect msg sent ({})",
                    self.conn.log_prefix(),
                    s.url
                );
                let ci = RouteConnectInfo {
                    echo: true,
                    verbose: false,
                    pedantic: false,
                    user: s.url.user.clone().unwrap_or_default(),
                    pass: s.url.pass.clone().unwrap_or_default(),
                    tls_required: false,
                    headers: true,
                    name: self.srv.id.clone(),
                    cluster: self.cl.name(),
                    cluster_dynamic: self.cl.is_dynamic(),
                    lnoc: true,
                    ..Default::default()
                };
                let connect = serde_json::to_vec(&ci).unwrap_or_default();
                let mut line = Vec::with_capacity(connect.len() + info.len() + 16);
                line.extend_from_slice(b"CONNECT ");
                line.extend_from_slice(&connect);
                line.extend_from_slice(b"\r\n");
                line.extend_from_slice(&info);
                self.send(&line);
            }
            None => self.send(&info),
        }
    }

    fn route_auth_required(&self) -> bool {
        self.cl.opts.username.is_some() || self.cl.opts.token.is_some()
    }

    fn handle(&mut self, op: Op<'_>) -> Result<(), CloseReason> {
        if self.trace {
            tracing::trace!(
                "{} - <<- [{}]",
                self.conn.log_prefix(),
                crate::proto::trace::op_text(&op, false)
            );
        }
        if self.solicit.is_none() && !self.connect_seen && !matches!(op, Op::Connect(_)) {
            tracing::error!(
                "{} - Route did not start with CONNECT",
                self.conn.log_prefix()
            );
            return Err(CloseReason::ProtocolViolation);
        }
        match op {
            Op::Connect(json) => self.on_connect(json),
            Op::Info(json) => self.on_info(json),
            Op::Ping => {
                self.send(b"PONG\r\n");
                Ok(())
            }
            Op::Pong => {
                if let Some(rtt) =
                    driver::peer_pong(&self.conn, &mut self.pings_out, &mut self.rtt_start)
                {
                    // s2_auto: the level follows the RTT (client.go
                    // updateS2AutoCompressionLevel); the writer takes it from the next batch.
                    if let Some(level) = self.comp.on_pong(rtt) {
                        tracing::debug!(
                            "{} - Route compression level now {} (RTT {rtt:?})",
                            self.conn.log_prefix(),
                            self.comp.mode()
                        );
                        self.conn.out.compress_from_now(level);
                        if let Some(e) = &self.entry {
                            e.set_compression(self.comp.mode());
                        }
                    }
                }
                Ok(())
            }
            Op::RsPlus {
                account,
                subject,
                queue,
            } => {
                self.remote_plus(account, subject, queue, None);
                Ok(())
            }
            Op::LsPlus {
                origin,
                account,
                subject,
                queue,
            } => {
                let origin = Some(origin).filter(|o| !o.is_empty());
                self.remote_plus(account, subject, queue, origin);
                Ok(())
            }
            Op::RsMinus {
                account,
                subject,
                queue,
            } => {
                self.remote_minus(account, subject, queue, None);
                Ok(())
            }
            Op::LsMinus {
                origin,
                account,
                subject,
                queue,
            } => {
                let origin = origin.filter(|o| !o.is_empty());
                self.remote_minus(account, subject, queue, Some(origin));
                Ok(())
            }
            Op::Rmsg(m) => {
                self.on_rmsg(&m);
                Ok(())
            }
            Op::Err(text) => {
                tracing::error!(
                    "{} - Route received -ERR: {}",
                    self.conn.log_prefix(),
                    String::from_utf8_lossy(text)
                );
                Ok(())
            }
            Op::Ok | Op::AccPlus(_) | Op::AccMinus(_) => Ok(()),
            other => {
                tracing::error!(
                    "{} - Unexpected op on a route: {other:?}",
                    self.conn.log_prefix()
                );
                Err(CloseReason::ProtocolViolation)
            }
        }
    }

    fn on_connect(&mut self, json: &[u8]) -> Result<(), CloseReason> {
        if self.solicit.is_some() || self.connect_seen {
            return Ok(());
        }
        let ci: RouteConnectInfo = match serde_json::from_slice(json) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{} - bad route CONNECT: {e}", self.conn.log_prefix());
                return Err(CloseReason::ProtocolViolation);
            }
        };
        if !ci.lang.is_empty() {
            tracing::error!(
                "{} - Client connected to the route port, closing",
                self.conn.log_prefix()
            );
            // nats-server's ErrClientConnectedToRoutePort text.
            self.send_err("attempted to connect to route port");
            return Err(CloseReason::ProtocolViolation);
        }
        if !ci.gateway.is_empty() {
            tracing::error!(
                "{} - Gateway connected to the route port, closing",
                self.conn.log_prefix()
            );
            self.send_err(&format!(
                "Rejecting connection from gateway {:?} on the Route port",
                ci.gateway
            ));
            return Err(CloseReason::ProtocolViolation);
        }
        if !self.route_auth_ok(&ci) {
            tracing::error!("{} - Route authentication error", self.conn.log_prefix());
            self.send_err("Authorization Violation");
            return Err(CloseReason::AuthenticationViolation);
        }
        if let Err(e) = self.cl.reconcile_name(&ci.cluster, ci.cluster_dynamic) {
            tracing::error!("{} - {e}", self.conn.log_prefix());
            self.send_err(&e);
            return Err(CloseReason::ClusterNameConflict);
        }
        self.conn.headers.store(ci.headers, Relaxed);
        self.connect_seen = true;
        if !ci.name.is_empty() {
            let ev = mesh::Event::Connecting {
                conn: self.conn.cid,
                id: Arc::from(ci.name.as_str()),
            };
            self.cl.feed(&self.srv, ev, Some(self.conn.cid));
        }
        Ok(())
    }

    fn route_auth_ok(&self, ci: &RouteConnectInfo) -> bool {
        let o = &self.cl.opts;
        // nats-server: with mapping or known URLs, the certificate decides; CONNECT
        // credentials are not looked at.
        let cert = self.conn.meta().peer_cert.clone();
        let user = o.username.as_deref();
        if let Some(ok) =
            crate::tls::peer_cert_authorized(o.tls.as_ref(), cert.as_deref(), user, &o.routes)
        {
            return ok;
        }
        let (t, u, p) = (
            o.token.as_deref(),
            o.username.as_deref(),
            o.password.as_deref(),
        );
        crate::auth::peer_credentials_ok(t, u, p, &ci.user, &ci.pass)
    }

    fn on_info(&mut self, json: &[u8]) -> Result<(), CloseReason> {
        if self.known_gossip(json) {
            return Ok(());
        }
        let info: ServerInfo = match serde_json::from_slice(json) {
            Ok(i) => i,
            Err(e) => {
                tracing::error!("{} - bad route INFO: {e}", self.conn.log_prefix());
                return Err(CloseReason::ProtocolViolation);
            }
        };
        if let Some(entry) = self.entry.clone() {
            // A peer pins an account from now on, or answers our announcement of one.
            if !info.route_acc_add_reqid.is_empty() {
                self.cl.on_pinned_note(&self.srv, &entry, info);
                return Ok(());
            }
            if info.server_id != entry.remote_id {
                // Gossip about another server.
                if !info.gateway.is_empty() {
                    crate::gateway::from_route_gossip(&self.srv, &info);
                    return Ok(());
                }
                if info.server_id.is_empty() {
                    return Ok(());
                }
                discovery::consider_gossip(&self.srv, &self.cl, &self.conn, &info);
            } else if self.cl.update_peer_info(&info) {
                self.srv.cluster_changed();
            }
            return Ok(());
        }
        // The peer's first INFO: compression is negotiated before anything else
        // (route.go processRouteInfo / negotiateRouteCompression).
        let since_start = self.started.elapsed();
        let step = match self
            .comp
            .on_info(Some(info.compression.as_str()), since_start)
        {
            Ok(step) => step,
            Err(text) => return self.refuse(&text),
        };
        match step {
            InfoStep::Switch {
                mode,
                level,
                info_mode,
                info_in_clear,
            } => {
                tracing::debug!(
                    "{} - Route compression negotiated: {mode}",
                    self.conn.log_prefix()
                );
                let line = self.info_line(info_mode, true);
                self.conn
                    .out
                    .switch_around(level, info_in_clear, || self.send(&line));
                // The peer's next bytes are compressed; it sends its INFO again.
                self.switch_reader = true;
                Ok(())
            }
            InfoStep::Plain { info_mode, .. } | InfoStep::AfterSwitch { info_mode } => {
                self.held_info_mode = info_mode;
                self.register(info)
            }
            InfoStep::Later => self.register(info),
        }
    }

    /// Gossip (on a registered route) about a server we already have routes to changes
    /// nothing: told only its id, skip parsing the whole INFO (a starting cluster sends each
    /// node many of these).
    fn known_gossip(&self, json: &[u8]) -> bool {
        #[derive(serde::Deserialize)]
        struct Peek<'a> {
            #[serde(default, borrow)]
            server_id: Option<std::borrow::Cow<'a, str>>,
            #[serde(default, borrow)]
            gateway: Option<std::borrow::Cow<'a, str>>,
        }
        let Some(entry) = &self.entry else {
            return false;
        };
        let Ok(p) = serde_json::from_slice::<Peek<'_>>(json) else {
            return false;
        };
        match (p.server_id, p.gateway) {
            (Some(id), None) => id != *entry.remote_id && self.cl.has_peer(&id),
            (Some(id), Some(g)) if g.is_empty() => id != *entry.remote_id && self.cl.has_peer(&id),
            _ => false,
        }
    }

    /// Refuse this connection with `text` (sent as `-ERR` and logged).
    fn refuse(&self, text: &str) -> Result<(), CloseReason> {
        tracing::error!("{} - {text}", self.conn.log_prefix());
        self.send_err(text);
        Err(CloseReason::ProtocolViolation)
    }

    fn register(&mut self, info: ServerInfo) -> Result<(), CloseReason> {
        if info.server_id.is_empty() {
            return Err(CloseReason::ProtocolViolation);
        }
        let mut hello = mesh::Hello {
            id: Arc::from(info.server_id.as_str()),
            pool_size: info.route_pool_size as i32,
            pool_idx: u16::try_from(info.route_pool_idx).unwrap_or(u16::MAX),
            account: (!info.route_account.is_empty())
                .then(|| Arc::from(info.route_account.as_str())),
            gossip_mode: mesh::GossipMode::from_wire(info.gossip_mode),
            natsd: !info.natsd.is_empty(),
            ..Default::default()
        };
        if info.server_id == self.srv.id {
            // The mesh remembers the address (never dialled again).
            self.cl.hello(&self.srv, &self.conn, hello, None);
            tracing::debug!(
                "{} - Detected route to self, closing",
                self.conn.log_prefix()
            );
            return Err(CloseReason::DuplicateRoute);
        }
        if self.solicit.is_some() {
            if let Err(e) = self.cl.reconcile_name(&info.cluster, info.cluster_dynamic) {
                tracing::error!("{} - {e}", self.conn.log_prefix());
                self.send_err(&e);
                return Err(CloseReason::ClusterNameConflict);
            }
        }
        // A dialler that held its INFO for compression sends it now, before registering (and
        // so before our interest), naming the negotiated mode; after a switch it is the first
        // thing in our compressed stream.
        if self.info_held {
            self.info_held = false;
            self.send(&self.info_line(self.held_info_mode, false));
        }
        // What this connection is for: the slot we dialled it for, or the one the dialler's
        // INFO names (nats-server 2.10+ route.go addRoute). A peer without `route_pool_size`
        // (2.9), or this server with `pool_size: -1`, means one route for every account.
        let remote_pool = info.route_pool_size as usize;
        let no_pool = remote_pool == 0 || self.cl.pool_size().is_none();
        let (account, pool_idx) = match &self.solicit {
            Some(s) => match &s.slot {
                Slot::Account(a) => (Some(a.clone()), 0),
                Slot::Pool(i) => (None, usize::from(*i)),
            },
            None => (hello.account.clone(), info.route_pool_idx as usize),
        };
        if let Some(acc) = &account {
            if self.cl.is_pinned(acc) {
                self.pinned = self.srv.accounts.lookup(acc.as_bytes());
            }
        }
        self.conn.headers.store(info.headers, Relaxed);
        let gossip_url = if info.ip.is_empty() {
            let ip = self.conn.addr.ip();
            if ip.is_ipv6() {
                format!("nats-route://[{ip}]:{}/", info.port)
            } else {
                format!("nats-route://{ip}:{}/", info.port)
            }
        } else {
            info.ip.clone()
        };
        hello.addr = super::driver::addr_of(&gossip_url);
        hello.url = Arc::from(gossip_url.as_str());
        {
            let mut m = self.conn.meta();
            m.name = info.server_name.clone();
        }
        crate::trace::set_peer(&self.conn, &info.server_name, info.proto);
        let peer_lnocu = info.lnocu;
        self.conn.lnoc.store(info.lnoc, Relaxed);
        self.conn.lnocu.store(info.lnoc && info.lnocu, Relaxed);
        let entry = Arc::new(RouteEntry {
            conn: self.conn.clone(),
            remote_id: info.server_id.clone(),
            remote_name: info.server_name.clone(),
            did_solicit: self.solicit.is_some(),
            is_configured: self.solicit.as_ref().is_some_and(|s| s.configured),
            account: account.clone(),
            pool_idx: std::sync::atomic::AtomicUsize::new(if no_pool { 0 } else { pool_idx }),
            no_pool,
            gossip_url,
            compression: std::sync::Mutex::new(self.comp.mode()),
            info: std::sync::Mutex::new(info),
            num_subs: Default::default(),
            start: SystemTime::now(),
        });
        // A pinned account's connection speaks the account-less forms from the peer's next op
        // on, whatever the mesh decides (a spare that is kept for a while gets them too).
        if account.is_some() {
            self.conn.no_account.store(true, Relaxed);
            self.parser_no_account = true;
        }
        self.parser_lnocu = peer_lnocu;
        // Which duplicate survives, which slots to open and whom to tell about whom is the
        // mesh's decision (both ends agree without talking).
        let first = match self.cl.hello(&self.srv, &self.conn, hello, Some(&entry)) {
            Verdict::Refused(why) => {
                let acc = account.as_deref().unwrap_or_default();
                let text = match why {
                    CloseWhy::NoPool => format!(
                        "Not possible to have a dedicated route for account {acc:?} between those servers"
                    ),
                    CloseWhy::UnknownAccount => format!("No route for account {acc:?}"),
                    _ => format!(
                        "Invalid route pool index: {pool_idx} - pool size is {remote_pool}"
                    ),
                };
                return self.refuse(&text);
            }
            Verdict::Close(reason) => {
                tracing::debug!(
                    "{} - Duplicate route to {}, closing",
                    self.conn.log_prefix(),
                    entry.remote_id
                );
                return Err(reason);
            }
            Verdict::Spare => {
                // The peer dialled this one and another for one slot: it closes one.
                self.entry = Some(entry);
                self.next_ping = Instant::now() + FIRST_PING;
                return self.after_handshake();
            }
            Verdict::Registered { first } => first,
        };
        match &account {
            Some(a) => tracing::info!(
                "{} - Route connection created to {} ({}) for account {a:?}",
                self.conn.log_prefix(),
                entry.remote_name,
                entry.remote_id
            ),
            None if no_pool => tracing::info!(
                "{} - Route connection created to {} ({})",
                self.conn.log_prefix(),
                entry.remote_name,
                entry.remote_id
            ),
            None => tracing::info!(
                "{} - Route connection created to {} ({}), pool slot {pool_idx}",
                self.conn.log_prefix(),
                entry.remote_name,
                entry.remote_id
            ),
        }
        self.entry = Some(entry.clone());
        self.cl.on_registered(&self.srv, &entry, first);
        self.next_ping = Instant::now() + FIRST_PING;
        self.after_handshake()
    }

    fn cleanup(&mut self) {
        self.drop_remote(|_| true);
        if let Some(e) = self.entry.take() {
            e.num_subs.store(0, Relaxed);
            // The peer is gone only with its last connection (a pool has several).
            if self.cl.unregister(&e) {
                crate::gateway::peer_url(&self.srv, &e.remote_id, "");
                self.srv.cluster_changed();
            }
        }
        self.fan.clear();
        self.acc_cache.clear();
    }
}

/// `INFO` about a registered peer, as forwarded to other routes: only the fields of the
/// route protocol (nothing of the peer's we do not understand is relayed), no nonce, `ip`
/// set, `route_account` for a pinned-account route, the gossip mode for the receiver.
pub(super) fn gossip_json(r: &RouteEntry, gossip_mode: u8) -> Vec<u8> {
    let info = gossip_info(r, gossip_mode);
    let json = serde_json::to_vec(&info).unwrap_or_default();
    let mut line = Vec::with_capacity(json.len() + 8);
    line.extend_from_slice(b"INFO ");
    line.extend_from_slice(&json);
    line.extend_from_slice(b"\r\n");
    line
}

fn gossip_info(r: &RouteEntry, gossip_mode: u8) -> ServerInfo {
    let p = r.info();
    ServerInfo {
        server_id: p.server_id.clone(),
        server_name: p.server_name.clone(),
        version: p.version.clone(),
        proto: p.proto,
        go: p.go.clone(),
        host: p.host.clone(),
        port: p.port,
        headers: p.headers,
        auth_required: p.auth_required,
        tls_required: p.tls_required,
        tls_verify: p.tls_verify,
        max_payload: p.max_payload,
        jetstream: p.jetstream,
        ip: r.gossip_url.clone(),
        cluster: p.cluster.clone(),
        cluster_dynamic: p.cluster_dynamic,
        domain: p.domain.clone(),
        connect_urls: p.connect_urls.clone(),
        ws_connect_urls: p.ws_connect_urls.clone(),
        import: p.import.clone(),
        export: p.export.clone(),
        lnoc: p.lnoc,
        lnocu: p.lnocu,
        route_pool_size: if r.no_pool { 0 } else { p.route_pool_size },
        route_account: r.account.as_deref().unwrap_or_default().to_string(),
        gossip_mode,
        gateway_url: p.gateway_url.clone(),
        leafnode_urls: p.leafnode_urls.clone(),
        ..Default::default()
    }
}
