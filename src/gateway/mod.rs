//! Gateways (super-clusters), as nats-server 2.9 speaks them (spec §4): the registry of
//! outbound connections (one per remote cluster; messages go out on them) and inbound ones
//! (from every remote server; interest goes out on them), the cluster-wide interest this
//! cluster advertises (`interest.rs`), the per-message send hook the fan-out calls, and the
//! `_GR_.` reply routing (`reply.rs`). `conn.rs` runs one gateway connection, `dial.rs` dials
//! configured and implicit remotes.

pub mod conn;
pub mod dial;
pub mod interest;
pub mod reply;

use crate::account::{Account, SubRef};
use crate::config::GatewayOpts;
use crate::conn::{CloseReason, Conn};
use crate::deliver::{Fanout, Msg};
use crate::proto::encode;
use crate::server::ServerShared;
use crate::sublist::SublistResult;
use bytes::Bytes;
use interest::OutInterest;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, SystemTime};

/// Remote clusters and URLs per remote kept at most (bounded memory against gossip floods).
const MAX_REMOTES: usize = 1024;
const MAX_URLS: usize = 64;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A registered outbound gateway connection: where this server sends messages for one
/// remote cluster.
pub struct Outbound {
    pub conn: Arc<Conn>,
    /// The remote cluster's gateway name.
    pub name: String,
    pub remote_id: String,
    pub remote_server_name: String,
    pub configured: bool,
    /// hash6 of the remote gateway name (direct `_GR_.` replies).
    pub cluster_hash: [u8; 6],
    /// Per-account interest of the remote cluster, as its RS+/RS-/A+/A-/cmd INFO told us.
    pub interest: OutInterest,
    pub start: SystemTime,
}

/// A registered inbound gateway connection: a remote server that sends us messages and to
/// which we advertise this cluster's interest.
pub struct Inbound {
    pub conn: Arc<Conn>,
    pub name: String,
    pub remote_id: String,
    pub remote_server_name: String,
    pub configured: bool,
    pub start: SystemTime,
}

/// What we know about one remote cluster: its gateway URLs, and whether it is configured.
#[derive(Clone, Debug, Default)]
pub struct Remote {
    pub urls: Vec<String>,
    pub configured: bool,
    /// A dial loop for it is running.
    pub dialing: bool,
}

pub struct Gateway {
    pub opts: GatewayOpts,
    pub name: String,
    pub cluster_hash: [u8; 6],
    pub server_hash: [u8; 6],
    pub listen_addr: OnceLock<SocketAddr>,
    outbound: RwLock<Vec<Arc<Outbound>>>,
    /// Quick check for the per-message hook: any registered outbound?
    num_outbound: AtomicUsize,
    inbound: Mutex<Vec<Arc<Inbound>>>,
    remotes: Mutex<BTreeMap<String, Remote>>,
    /// Cluster-wide interest tally (see `interest.rs`).
    pub(crate) tally: Mutex<interest::Tally>,
    /// `_GR_.` reply state (see `reply.rs`).
    pub(crate) replies: reply::Replies,
    /// Gateway URLs of the other servers of this cluster (learned from route INFO).
    peer_urls: Mutex<BTreeMap<String, String>>,
    closed: AtomicBool,
    pub tls: GatewayTls,
}

/// Gateway TLS, ready to use (`gateway { tls {} }` and per-remote `tls {}`): the handshake
/// comes first on both sides, before INFO, as nats-server 2.9 does it.
#[derive(Default)]
pub struct GatewayTls {
    /// Inbound connections (the gateway's own `tls {}`), with its handshake timeout.
    pub accept: Option<(tokio_rustls::TlsAcceptor, Duration)>,
    /// Outbound connections to clusters without their own `tls {}` (the gateway's).
    pub dial: Option<(tokio_rustls::TlsConnector, Duration)>,
    /// Outbound connections to the clusters with their own `tls {}` in `gateways`.
    pub dial_remote: HashMap<String, (tokio_rustls::TlsConnector, Duration)>,
    /// `verify` on inbound connections (shown as `tls_verify` in our INFO).
    pub verify: bool,
}

impl GatewayTls {
    pub fn build(opts: &GatewayOpts) -> Result<GatewayTls, String> {
        let mut t = GatewayTls::default();
        if let Some(o) = &opts.tls {
            let server = crate::tls::server_config(o).map_err(|e| format!("gateway tls: {e}"))?;
            let client = crate::tls::client_config(o).map_err(|e| format!("gateway tls: {e}"))?;
            t.accept = Some((tokio_rustls::TlsAcceptor::from(server), o.timeout));
            t.dial = Some((tokio_rustls::TlsConnector::from(client), o.timeout));
            t.verify = o.verify;
        }
        for r in &opts.gateways {
            if let Some(o) = &r.tls {
                let client = crate::tls::client_config(o)
                    .map_err(|e| format!("gateway {:?} tls: {e}", r.name))?;
                t.dial_remote.insert(
                    r.name.clone(),
                    (tokio_rustls::TlsConnector::from(client), o.timeout),
                );
            }
        }
        Ok(t)
    }

    /// The connector (and timeout) for dialling cluster `name`, if TLS applies.
    pub fn dial_for(&self, name: &str) -> Option<&(tokio_rustls::TlsConnector, Duration)> {
        self.dial_remote.get(name).or(self.dial.as_ref())
    }
}

impl Gateway {
    /// `new` with the TLS configurations built (an unreadable certificate fails here).
    pub fn with_tls(opts: GatewayOpts, server_id: &str) -> Result<Self, String> {
        let tls = GatewayTls::build(&opts)?;
        let mut g = Gateway::new(opts, server_id);
        g.tls = tls;
        Ok(g)
    }

    pub fn new(opts: GatewayOpts, server_id: &str) -> Self {
        let mut remotes = BTreeMap::new();
        for r in &opts.gateways {
            remotes.insert(
                r.name.clone(),
                Remote {
                    urls: r.urls.clone(),
                    configured: true,
                    dialing: false,
                },
            );
        }
        Gateway {
            name: opts.name.clone(),
            cluster_hash: reply::hash6(opts.name.as_bytes()),
            server_hash: reply::hash6(server_id.as_bytes()),
            opts,
            listen_addr: OnceLock::new(),
            outbound: RwLock::new(Vec::new()),
            num_outbound: AtomicUsize::new(0),
            inbound: Mutex::new(Vec::new()),
            remotes: Mutex::new(remotes),
            tally: Mutex::new(Default::default()),
            replies: Default::default(),
            peer_urls: Mutex::new(BTreeMap::new()),
            closed: AtomicBool::new(false),
            tls: GatewayTls::default(),
        }
    }

    /// `host:port` remote servers dial to reach this one.
    pub fn own_url(&self) -> String {
        if let Some(a) = &self.opts.advertise {
            return a.clone();
        }
        let port = self.listen_addr.get().map_or(self.opts.port, |a| a.port());
        let host = match self.opts.host.as_str() {
            "" | "0.0.0.0" | "::" => "127.0.0.1".to_string(),
            h => h.to_string(),
        };
        if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        }
    }

    /// This cluster's gateway URLs (`gateway_urls`): ours, then our route peers'.
    pub fn cluster_urls(&self) -> Vec<String> {
        let mut v = vec![self.own_url()];
        for u in lock(&self.peer_urls).values() {
            if !v.contains(u) {
                v.push(u.clone());
            }
        }
        v
    }

    /// A route peer's gateway URL (route INFO `gateway_url`); empty removes it. True when
    /// this cluster's URL set changed.
    pub fn set_peer_url(&self, server_id: &str, url: &str) -> bool {
        let before = self.cluster_urls();
        {
            let mut m = lock(&self.peer_urls);
            if url.is_empty() {
                m.remove(server_id);
            } else {
                m.insert(server_id.to_string(), url.to_string());
            }
        }
        self.cluster_urls() != before
    }

    pub fn is_configured(&self, name: &str) -> bool {
        lock(&self.remotes).get(name).is_some_and(|r| r.configured)
    }

    pub fn remotes(&self) -> BTreeMap<String, Remote> {
        lock(&self.remotes).clone()
    }

    /// Learn URLs of a remote cluster. Returns true when a dial loop must be started for it
    /// (a new implicit gateway) — the caller starts it.
    pub fn learn_remote(&self, name: &str, urls: &[String]) -> bool {
        if name == self.name || name.is_empty() {
            return false;
        }
        let mut m = lock(&self.remotes);
        if self.opts.reject_unknown && !m.get(name).is_some_and(|r| r.configured) {
            return false;
        }
        if m.len() >= MAX_REMOTES && !m.contains_key(name) {
            tracing::warn!("Too many remote gateways known, ignoring {name:?}");
            return false;
        }
        let r = m.entry(name.to_string()).or_default();
        for u in urls {
            if !u.is_empty() && !r.urls.contains(u) && r.urls.len() < MAX_URLS {
                r.urls.push(u.clone());
            }
        }
        if r.dialing || r.urls.is_empty() || self.closed.load(Relaxed) {
            return false;
        }
        r.dialing = true;
        true
    }

    /// A dial loop ended (implicit gateway gave up).
    pub fn dial_ended(&self, name: &str) {
        if let Some(r) = lock(&self.remotes).get_mut(name) {
            r.dialing = false;
        }
    }

    pub fn outbounds(&self) -> Vec<Arc<Outbound>> {
        self.outbound
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn outbound_to(&self, name: &str) -> Option<Arc<Outbound>> {
        self.outbounds().into_iter().find(|o| o.name == name)
    }

    pub fn inbounds(&self) -> Vec<Arc<Inbound>> {
        lock(&self.inbound).clone()
    }

    /// Register an outbound; false when one to that cluster exists already (or shutdown).
    pub fn register_outbound(&self, o: &Arc<Outbound>) -> bool {
        let mut v = self.outbound.write().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Relaxed) || v.iter().any(|x| x.name == o.name && !x.conn.is_closed()) {
            return false;
        }
        v.retain(|x| x.name != o.name);
        v.push(o.clone());
        self.num_outbound.store(v.len(), Relaxed);
        true
    }

    /// Keep outbounds ordered by RTT (nats-server picks the lowest-RTT cluster for a queue
    /// group); called when an RTT is measured.
    pub fn sort_by_rtt(&self) {
        let mut v = self.outbound.write().unwrap_or_else(|e| e.into_inner());
        v.sort_by_key(|o| o.conn.meta().rtt.unwrap_or(std::time::Duration::MAX));
    }

    pub fn unregister_outbound(&self, o: &Outbound) {
        let mut v = self.outbound.write().unwrap_or_else(|e| e.into_inner());
        v.retain(|x| x.conn.cid != o.conn.cid);
        self.num_outbound.store(v.len(), Relaxed);
    }

    pub fn unregister_inbound(&self, i: &Inbound) {
        lock(&self.inbound).retain(|x| x.conn.cid != i.conn.cid);
    }

    /// Close every gateway connection (shutdown); nothing registers afterwards.
    pub fn close_all(&self) {
        // Under the locks the registrations take: a connection registered after this is
        // refused there; one registered before is in the lists below.
        {
            let _out = self.outbound.write().unwrap_or_else(|e| e.into_inner());
            let _tally = lock(&self.tally);
            self.closed.store(true, Relaxed);
        }
        for o in self.outbounds() {
            o.conn.close(CloseReason::ServerShutdown);
        }
        for i in self.inbounds() {
            i.conn.close(CloseReason::ServerShutdown);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// A local subscription (+1/-1) changed: the cluster-wide tally, and the recent
    /// subscriptions `_GR_.` reply mapping looks at.
    pub fn local_interest_changed(
        &self,
        acc: &str,
        subject: &Bytes,
        queue: Option<&Bytes>,
        delta: i32,
    ) {
        if delta > 0 && queue.is_none() {
            self.replies.sub_created(acc, subject);
        }
        self.interest_changed(acc, subject, queue, delta);
    }

    /// A message from a route: a `_GR_.` subject for this server loses its prefix (other
    /// servers' are dropped), a `_GR_.` reply is remembered and stripped. Returns the subject
    /// and reply local clients get, or `None` to drop the message.
    pub fn from_route<'a>(
        &self,
        acc: &str,
        subject: &'a [u8],
        reply: Option<&'a [u8]>,
    ) -> Option<(&'a [u8], Option<&'a [u8]>)> {
        let mut subject = subject;
        if let Some((c, s, rest)) = reply::parse(subject) {
            if c != self.cluster_hash || s != self.server_hash {
                return None;
            }
            subject = rest;
        }
        let mut reply_out = reply;
        if let Some(r) = reply {
            if reply::parse(r).is_some() {
                let plain = &r[reply::GR_PREFIX.len() + 14..];
                self.replies.remember(acc, plain, r);
                reply_out = Some(plain);
            }
        }
        Some((subject, reply_out))
    }

    /// The fan-out hook for a message published by a local client (or the server itself):
    /// one RMSG/HMSG per outbound gateway whose cluster has interest, with the queue groups
    /// not served in this cluster (`r` is this cluster's match). Returns the number sent.
    pub fn send(
        &self,
        fan: &mut Fanout,
        acc: &Account,
        r: &SublistResult<SubRef>,
        m: &Msg<'_>,
    ) -> u64 {
        if self.num_outbound.load(Relaxed) == 0 {
            return 0;
        }
        // Read-locked for the whole send (no await, no other lock but the destinations'
        // buffers): no copy of the list per message.
        let outs = self.outbound.read().unwrap_or_else(|e| e.into_inner());
        let acc_name = acc.name.as_bytes();
        // A reply to a request that came through a gateway: back to that cluster only.
        if let Some(routed) = self.replies.routed_for(&acc.name, m.subject) {
            return self.send_direct(fan, &outs, acc_name, &routed, m);
        }
        if m.subject.starts_with(reply::GR_PREFIX) {
            let subject = Bytes::copy_from_slice(m.subject);
            return self.send_direct(fan, &outs, acc_name, &subject, m);
        }
        // Decided once, and only when something is sent: is the reply a recent inbox?
        let mut mapped_reply: Option<Option<Bytes>> = None;
        let mut taken: Vec<Bytes> = Vec::new();
        let mut sent = 0;
        // Ordered by RTT: for a queue group the closest remote cluster wins.
        for (slot, o) in outs.iter().enumerate() {
            if o.conn.is_closed() {
                continue;
            }
            let (plain, res) = o.interest.check_cached(slot, &acc.name, m.subject);
            let mut queues: Vec<Bytes> = Vec::new();
            if let Some(res) = &res {
                for g in &res.qsubs {
                    if g.members.is_empty() {
                        continue;
                    }
                    let local = r
                        .qsubs
                        .iter()
                        .any(|l| l.name == g.name && !l.members.is_empty());
                    if local || taken.contains(&g.name) {
                        continue;
                    }
                    taken.push(g.name.clone());
                    queues.push(g.name.clone());
                }
            }
            if !plain && queues.is_empty() {
                continue;
            }
            let qrefs: Vec<&[u8]> = queues.iter().map(|q| &q[..]).collect();
            let mapped = mapped_reply.get_or_insert_with(|| {
                m.reply
                    .filter(|rp| self.replies.has_recent_sub(&acc.name, rp))
                    .map(|rp| reply::routed_reply(&self.cluster_hash, &self.server_hash, rp))
            });
            let reply = mapped.as_deref().or(m.reply);
            if push_rmsg(fan, &o.conn, acc_name, m.subject, reply, &qrefs, m) {
                sent += 1;
            }
        }
        sent
    }

    /// Send `subject` (a `_GR_.<cluster>.<server>.…` subject) to the outbound whose cluster
    /// hash it names.
    fn send_direct(
        &self,
        fan: &mut Fanout,
        outs: &[Arc<Outbound>],
        acc: &[u8],
        subject: &[u8],
        m: &Msg<'_>,
    ) -> u64 {
        let Some((ch, _, _)) = reply::parse(subject) else {
            return 0;
        };
        for o in outs {
            if o.cluster_hash[..] == ch[..] && !o.conn.is_closed() {
                return u64::from(push_rmsg(fan, &o.conn, acc, subject, m.reply, &[], m));
            }
        }
        0
    }
}

/// One RMSG/HMSG into `conn` through the fan-out's batch bookkeeping.
fn push_rmsg(
    fan: &mut Fanout,
    conn: &Arc<Conn>,
    account: &[u8],
    subject: &[u8],
    reply: Option<&[u8]>,
    queues: &[&[u8]],
    m: &Msg<'_>,
) -> bool {
    let traced;
    let mut header = m.header;
    if fan.msg_trace.is_some() {
        match crate::trace::egress::remote(fan, conn, m.header) {
            crate::trace::egress::Remote::Untraced => {}
            crate::trace::egress::Remote::Skip => return false,
            crate::trace::egress::Remote::Header(h) => {
                traced = h;
                header = Some(&traced);
            }
        }
    }
    let header = header.filter(|_| conn.headers.load(Relaxed));
    let need = 64
        + account.len()
        + subject.len()
        + reply.map_or(0, <[u8]>::len)
        + queues.iter().map(|q| q.len() + 1).sum::<usize>()
        + header.map_or(0, <[u8]>::len)
        + m.payload.len();
    let ok = fan.push(conn, need, |b| {
        encode::write_rmsg(b, account, subject, reply, queues, header, m.payload)
    });
    if ok {
        let size = (header.map_or(0, <[u8]>::len) + m.payload.len()) as u64;
        if crate::logging::trace_enabled() {
            tracing::trace!(
                "{} - ->> [RMSG {} {}{} {size}]",
                conn.log_prefix(),
                String::from_utf8_lossy(account),
                String::from_utf8_lossy(subject),
                reply
                    .map(|r| format!(" {}", String::from_utf8_lossy(r)))
                    .unwrap_or_default()
            );
        }
        conn.counters.out_msgs.fetch_add(1, Relaxed);
        conn.counters.out_bytes.fetch_add(size, Relaxed);
        fan.out_msgs += 1;
        fan.out_bytes += size;
    }
    ok
}

/// A remote cluster became known (implicit gateway): dial it, and tell the route peers so
/// every server of this cluster dials it too (route INFO `server_id` "GW"+our id,
/// `gateway_cmd` 1, as nats-server's `forwardNewGatewayToLocalCluster`).
pub fn new_remote(srv: &Arc<ServerShared>, gw: &Arc<Gateway>, name: &str) {
    dial::spawn(srv, gw, name, false);
    if let Some(cl) = &srv.cluster {
        if let Some(line) = gossip_line(srv, gw, name) {
            cl.broadcast(&line);
        }
    }
}

/// The route INFO that tells a route peer about remote cluster `name`.
pub fn gossip_line(srv: &ServerShared, gw: &Gateway, name: &str) -> Option<Vec<u8>> {
    let r = gw.remotes().get(name).cloned()?;
    if r.urls.is_empty() {
        return None;
    }
    let info = crate::proto::info::ServerInfo {
        server_id: format!("GW{}", srv.id),
        server_name: srv.name.clone(),
        version: crate::config::COMPAT_VERSION.into(),
        proto: 2,
        headers: true,
        gateway: name.to_string(),
        gateway_urls: r.urls.iter().map(|u| conn::url_host(u)).collect(),
        gateway_cmd: 1,
        ..Default::default()
    };
    let mut b = bytes::BytesMut::new();
    info.write_to(&mut b).ok()?;
    Some(b.to_vec())
}

/// Route side: a peer told us about a remote cluster (`gateway_cmd` 1 on a route).
pub fn from_route_gossip(srv: &Arc<ServerShared>, info: &crate::proto::info::ServerInfo) {
    let Some(gw) = &srv.gateway else { return };
    if info.gateway_cmd != 1 || info.gateway.is_empty() {
        return;
    }
    if gw.learn_remote(&info.gateway, &info.gateway_urls) {
        dial::spawn(srv, gw, &info.gateway, false);
    }
}

/// Route side: a route registered; tell it about every remote cluster we know.
pub fn to_new_route(srv: &ServerShared, conn: &Conn) {
    let Some(gw) = &srv.gateway else { return };
    for name in gw.remotes().keys() {
        if let Some(line) = gossip_line(srv, gw, name) {
            conn.out
                .push_now(line.len(), |b| b.extend_from_slice(&line));
        }
    }
}

/// Route side: a route peer's gateway URL appeared (or went, `url` empty). When this
/// cluster's URL set changes, inbound gateways get our INFO again (new `gateway_urls`), as
/// nats-server does, so remote servers can reach any of our servers.
pub fn peer_url(srv: &ServerShared, server_id: &str, url: &str) {
    let Some(gw) = &srv.gateway else { return };
    if !gw.set_peer_url(server_id, url) {
        return;
    }
    let mut b = bytes::BytesMut::new();
    if conn::gateway_info(srv, gw).write_to(&mut b).is_err() {
        return;
    }
    for i in gw.inbounds() {
        i.conn.out.push_now(b.len(), |o| o.extend_from_slice(&b));
    }
}

/// Per-remote-cluster summary for monitoring.
pub fn inbound_by_name(gw: &Gateway) -> HashMap<String, Vec<Arc<Inbound>>> {
    let mut m: HashMap<String, Vec<Arc<Inbound>>> = HashMap::new();
    for i in gw.inbounds() {
        m.entry(i.name.clone()).or_default().push(i);
    }
    m
}

/// Bind the gateway listener, start accepting and dialling the configured gateways.
pub async fn listen(srv: &Arc<ServerShared>, gw: &Arc<Gateway>) -> std::io::Result<()> {
    let o = &gw.opts;
    let l = crate::util::net::listen((o.host.as_str(), o.port))
        .await
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("can't listen for gateways on {}:{}: {e}", o.host, o.port),
            )
        })?;
    let addr = l.local_addr()?;
    let _ = gw.listen_addr.set(addr);
    tracing::info!("Gateway name is {}", gw.name);
    tracing::info!("Listening for gateways connections on {addr}");
    if let Some(a) = &o.advertise {
        tracing::info!("Advertise address for gateway {:?} is set to {a}", gw.name);
    }
    srv.tasks.spawn(accept_loop(srv.clone(), gw.clone(), l));
    dial::start(srv, gw);
    Ok(())
}

async fn accept_loop(srv: Arc<ServerShared>, gw: Arc<Gateway>, l: tokio::net::TcpListener) {
    crate::conn::accept::run(l, "Gateway", srv.shutdown_signal(), |stream, addr| {
        tracing::info!("Processing inbound gateway connection from {addr}");
        let run = conn::run(srv.clone(), gw.clone(), stream, addr, None);
        srv.tasks.spawn(run);
    })
    .await
}

/// This server's gateway connections as topology edges (`/topz` local view).
pub fn topology_edges(srv: &ServerShared) -> Vec<crate::cluster::topology::ViewEdge> {
    use crate::cluster::topology::{EdgeKind, ViewEdge};
    let Some(gw) = &srv.gateway else {
        return Vec::new();
    };
    let mut v: Vec<ViewEdge> = gw
        .outbounds()
        .iter()
        .map(|o| ViewEdge {
            from: srv.id.clone(),
            to: o.remote_id.clone(),
            to_name: o.remote_server_name.clone(),
            to_cluster: o.name.clone(),
            kind: EdgeKind::Gateway,
            did_solicit: true,
            is_configured: o.configured,
            rtt: o.conn.meta().rtt,
            connections: 1,
            accounts: Vec::new(),
        })
        .collect();
    v.extend(gw.inbounds().iter().map(|i| ViewEdge {
        from: srv.id.clone(),
        to: i.remote_id.clone(),
        to_name: i.remote_server_name.clone(),
        to_cluster: i.name.clone(),
        kind: EdgeKind::Gateway,
        did_solicit: false,
        is_configured: i.configured,
        rtt: i.conn.meta().rtt,
        connections: 1,
        accounts: Vec::new(),
    }));
    v
}
