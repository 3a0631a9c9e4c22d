//! The routing core's network side: the route listener, the registry of routes by remote
//! server id (with duplicate and self-route resolution), gossip of new peers, and the cluster
//! name. `route.rs` runs one route connection, `discovery.rs` dials seeds and gossiped peers,
//! `interest.rs` turns local interest into RS+/RS-.

pub mod discovery;
mod driver;
pub mod interest;
pub mod mesh;
mod reload;
pub mod route;
pub mod topology;
pub mod url;

use crate::config::ClusterOpts;
use crate::conn::{CloseReason, Conn};
use crate::proto::info::ServerInfo;
use crate::server::ServerShared;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// A registered route: one connection to one remote server. With pools (nats-server 2.10+) a
/// peer has several: one per pool slot, plus one per pinned account.
pub struct RouteEntry {
    pub conn: Arc<Conn>,
    pub remote_id: String,
    pub remote_name: String,
    pub did_solicit: bool,
    pub is_configured: bool,
    /// The pinned account this connection is dedicated to (INFO `route_account`).
    pub account: Option<Arc<str>>,
    /// The pool slot (0 for a pinned connection and for a peer without pools).
    pub pool_idx: AtomicUsize,
    /// One route carries every account: the peer or this server does not pool.
    pub no_pool: bool,
    /// The URL other servers should dial to reach the peer (`nats-route://ip:port/`).
    pub gossip_url: String,
    /// The negotiated compression mode (`/routez` `compression`): `off`, `not supported` (the
    /// peer or this server does not know compression) or the `s2_*` level in force (s2_auto's
    /// follows the RTT).
    pub compression: Mutex<crate::compress::CompressionMode>,
    /// The peer's latest INFO.
    pub info: Mutex<ServerInfo>,
    /// Remote subscriptions learned from this route.
    pub num_subs: AtomicUsize,
    pub start: SystemTime,
}

impl RouteEntry {
    pub fn info(&self) -> MutexGuard<'_, ServerInfo> {
        self.info.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn compression(&self) -> crate::compress::CompressionMode {
        *self.compression.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_compression(&self, mode: crate::compress::CompressionMode) {
        *self.compression.lock().unwrap_or_else(|e| e.into_inner()) = mode;
    }
}

pub use driver::{resolve, Verdict};

/// Route TLS, ready to use: rustls configurations for both directions.
pub struct RouteTls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    pub connector: tokio_rustls::TlsConnector,
    pub timeout: Duration,
}

pub struct Cluster {
    pub opts: ClusterOpts,
    pub tls: Option<RouteTls>,
    name: RwLock<String>,
    dynamic: AtomicBool,
    pub listen_addr: OnceLock<SocketAddr>,
    /// Route connections by remote server id, with the pool size and pinned accounts they
    /// follow (one lock: the fan-out reads all three per message).
    routes: Mutex<Registry>,
    /// `cluster { compression }` for new connections (a reload changes it).
    compression: RwLock<crate::compress::CompressionOpts>,
    /// Bumped by a reload that changes which accounts a connection carries or compression:
    /// every route task re-checks its own connection.
    reconf: tokio::sync::watch::Sender<u64>,
    /// Request ids of our announcements of newly pinned accounts (`route_acc_add_reqid`).
    acc_add_reqs: Mutex<HashSet<String>>,
    /// Accounts the latest reload unpinned (their interest moves to the pool routes).
    unpinned: Mutex<Vec<String>>,
    /// Which seed or gossiped peer to dial, which duplicate survives, which pool slots to
    /// open, whom to tell what (`mesh/`, driven by `driver.rs`).
    mesh: Mutex<mesh::Mesh>,
    /// The mesh's clock starts here.
    epoch: Instant,
    /// Wakes the mesh timer task when a deadline may have moved.
    wake: tokio::sync::Notify,
    /// Every route connection by cid (the mesh closes and gossips by cid).
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Duplicates dialled by the peer, kept until it closes one of them.
    spares: Mutex<HashMap<u64, Arc<RouteEntry>>>,
    /// Configured route URLs being dialled (reload adds and removes them).
    configured: Mutex<HashSet<String>>,
    /// Consecutive resolution failures per seed (to keep the log readable).
    resolve_failures: Mutex<HashMap<String, u64>>,
    /// Per dialled address: failed dials since it last connected, and whether it ever did
    /// (`connect_error_reports` / `reconnect_error_reports`).
    dial_failures: Mutex<HashMap<SocketAddr, (u64, bool)>>,
    /// Set by `close_all` (under the routes lock): no route registers after it.
    closed: AtomicBool,
}

/// The registered routes and the settings that say which of them carries an account.
struct Registry {
    peers: HashMap<String, Peer>,
    /// Route connections per pooled peer (`None`: one route per peer, as nats-server 2.9).
    pool: Option<usize>,
    /// Accounts with a dedicated route: `accounts`, plus the system account with pools, plus
    /// those a peer announced it pins (nats-server's `accRoutes`, until our next reload).
    pinned: HashSet<String>,
}

impl std::ops::Deref for Registry {
    type Target = HashMap<String, Peer>;
    fn deref(&self) -> &Self::Target {
        &self.peers
    }
}

impl std::ops::DerefMut for Registry {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.peers
    }
}

/// The route connections to one remote server.
#[derive(Default)]
struct Peer {
    /// Pool slots (one slot when either side does not pool).
    pool: Vec<Option<Arc<RouteEntry>>>,
    /// Pinned-account connections.
    pinned: HashMap<Arc<str>, Arc<RouteEntry>>,
}

impl Peer {
    fn entries(&self) -> impl Iterator<Item = &Arc<RouteEntry>> {
        self.pool.iter().flatten().chain(self.pinned.values())
    }

    fn is_empty(&self) -> bool {
        self.pool.iter().all(Option::is_none) && self.pinned.is_empty()
    }

    /// The first open connection: the one that speaks for the peer (gossip, INFO updates).
    fn primary(&self) -> Option<&Arc<RouteEntry>> {
        self.entries().find(|e| !e.conn.is_closed())
    }
}

/// nats-server's `computeRoutePoolIdx`: FNV-1a (32 bit) of the account name modulo the pool
/// size, so every server puts an account on the same slot.
pub fn pool_idx(pool_size: usize, account: &str) -> usize {
    if pool_size <= 1 {
        return 0;
    }
    let mut h: u32 = 0x811c_9dc5;
    for b in account.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h % pool_size as u32) as usize
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Cluster {
    /// Fails when the route TLS files cannot be loaded.
    pub fn new(opts: ClusterOpts, server_id: &str) -> Result<Self, String> {
        let (name, dynamic) = match &opts.name {
            Some(n) => (n.clone(), false),
            None => (crate::util::ids::cluster_name(), true),
        };
        let tls = match &opts.tls {
            None => None,
            Some(t) => Some(RouteTls {
                acceptor: tokio_rustls::TlsAcceptor::from(crate::tls::server_config(t)?),
                connector: tokio_rustls::TlsConnector::from(crate::tls::client_config(t)?),
                timeout: t.timeout,
            }),
        };
        let pinned = match opts.pool() {
            Some(_) => opts.pinned_accounts.iter().cloned().collect(),
            None => HashSet::new(),
        };
        Ok(Cluster {
            mesh: Mutex::new(driver::new_mesh(&opts, server_id)),
            compression: RwLock::new(opts.compression.clone()),
            reconf: tokio::sync::watch::channel(0).0,
            acc_add_reqs: Mutex::new(HashSet::new()),
            unpinned: Mutex::new(Vec::new()),
            epoch: Instant::now(),
            wake: tokio::sync::Notify::new(),
            live: Mutex::new(HashMap::new()),
            spares: Mutex::new(HashMap::new()),
            resolve_failures: Mutex::new(HashMap::new()),
            dial_failures: Mutex::new(HashMap::new()),
            routes: Mutex::new(Registry {
                peers: HashMap::new(),
                pool: opts.pool(),
                pinned,
            }),
            opts,
            tls,
            name: RwLock::new(name),
            dynamic: AtomicBool::new(dynamic),
            listen_addr: OnceLock::new(),
            configured: Mutex::new(HashSet::new()),
            closed: AtomicBool::new(false),
        })
    }

    pub fn name(&self) -> String {
        self.name.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn is_dynamic(&self) -> bool {
        self.dynamic.load(Relaxed)
    }

    /// Cluster name negotiation (spec §1.6). Ok when the names agree or we adopted theirs.
    pub fn reconcile_name(&self, remote: &str, remote_dynamic: bool) -> Result<(), String> {
        let mut name = self.name.write().unwrap_or_else(|e| e.into_inner());
        if remote.is_empty() || *name == remote {
            if !remote_dynamic && self.dynamic.load(Relaxed) {
                self.dynamic.store(false, Relaxed);
            }
            return Ok(());
        }
        let dynamic = self.dynamic.load(Relaxed);
        if dynamic && (!remote_dynamic || remote > name.as_str()) {
            tracing::info!("Cluster name updated to {remote}");
            *name = remote.to_string();
            if !remote_dynamic {
                self.dynamic.store(false, Relaxed);
            }
            return Ok(());
        }
        Err(format!(
            "Rejecting connection, cluster name {remote:?} does not match {:?}",
            *name
        ))
    }

    /// Route connections per pooled peer (`None`: one route per peer, as nats-server 2.9).
    pub fn pool_size(&self) -> Option<usize> {
        lock(&self.routes).pool
    }

    /// Whether `account` has a route connection of its own to pooled peers.
    pub fn is_pinned(&self, account: &str) -> bool {
        lock(&self.routes).pinned.contains(account)
    }

    /// The compression settings new route connections negotiate with.
    pub fn compression_opts(&self) -> crate::compress::CompressionOpts {
        self.compression
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes whenever a reload changed compression or which accounts are pinned.
    pub fn reconf_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reconf.subscribe()
    }

    /// The accounts with routes of their own, sorted.
    pub fn pinned_accounts(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.routes).pinned.iter().cloned().collect();
        v.sort();
        v
    }

    /// Every route connection (all pool slots and pinned accounts of every peer), oldest first.
    pub fn routes(&self) -> Vec<Arc<RouteEntry>> {
        let mut v: Vec<_> = lock(&self.routes)
            .values()
            .flat_map(|p| p.entries().cloned())
            .collect();
        v.sort_by_key(|r| r.conn.cid);
        v
    }

    /// One connection per peer (the first open one): for gossip and topology views.
    pub fn peers(&self) -> Vec<Arc<RouteEntry>> {
        let mut v: Vec<_> = lock(&self.routes)
            .values()
            .filter_map(|p| p.primary().cloned())
            .collect();
        v.sort_by_key(|r| r.conn.cid);
        v
    }

    /// Route connections (as nats-server counts them: every pool slot and pinned account).
    /// We have a route connection to the server with this id.
    pub fn has_peer(&self, id: &str) -> bool {
        lock(&self.routes).get(id).is_some_and(|p| !p.is_empty())
    }

    pub fn num_routes(&self) -> usize {
        lock(&self.routes)
            .values()
            .map(|p| p.entries().count())
            .sum()
    }

    /// Servers this one has at least one route to.
    pub fn num_peers(&self) -> usize {
        lock(&self.routes).len()
    }

    pub fn has_route(&self, id: &str) -> bool {
        lock(&self.routes).contains_key(id)
    }

    /// Put `r` in the slot the mesh gave it (it decided which duplicate survives). False when
    /// the server is shutting down (`close_all` ran): close it.
    pub(crate) fn store(&self, r: &Arc<RouteEntry>) -> bool {
        let mut routes = lock(&self.routes);
        if self.closed.load(Relaxed) {
            return false;
        }
        let peer = routes.entry(r.remote_id.clone()).or_default();
        match &r.account {
            Some(acc) => {
                peer.pinned.insert(acc.clone(), r.clone());
            }
            None => {
                let idx = if r.no_pool {
                    0
                } else {
                    r.pool_idx.load(Relaxed)
                };
                if peer.pool.len() <= idx {
                    peer.pool.resize(idx + 1, None);
                }
                peer.pool[idx] = Some(r.clone());
            }
        }
        true
    }

    /// Forget `r` if it is still registered in its slot. True when it was the peer's last
    /// connection (the peer is gone).
    pub fn unregister(&self, r: &RouteEntry) -> bool {
        let mut routes = lock(&self.routes);
        let Some(peer) = routes.get_mut(&r.remote_id) else {
            return false;
        };
        let same = |e: &Arc<RouteEntry>| e.conn.cid == r.conn.cid;
        let mut removed = false;
        match &r.account {
            Some(acc) => {
                if peer.pinned.get(acc).is_some_and(same) {
                    peer.pinned.remove(acc);
                    removed = true;
                }
            }
            None => {
                for slot in peer.pool.iter_mut() {
                    if slot.as_ref().is_some_and(same) {
                        *slot = None;
                        removed = true;
                    }
                }
            }
        }
        if removed && peer.is_empty() {
            routes.remove(&r.remote_id);
            return true;
        }
        false
    }

    /// The connection that carries `account`'s interest and messages to `peer`: its only
    /// route when either side does not pool, the account's pinned route, or the pool slot of
    /// the account (`None` while that connection is not up: its dump will carry it).
    fn carrier<'a>(reg: &Registry, peer: &'a Peer, account: &str) -> Option<&'a Arc<RouteEntry>> {
        let first = peer.pool.first().and_then(Option::as_ref);
        if let Some(f) = first.filter(|f| f.no_pool) {
            return Some(f);
        }
        if reg.pinned.contains(account) {
            return peer.pinned.get(account);
        }
        let idx = pool_idx(reg.pool.unwrap_or(1), account);
        peer.pool.get(idx).and_then(Option::as_ref)
    }

    /// The connection that carries `account` to the first peer whose id `pick` accepts.
    pub fn carrier_to(
        &self,
        pick: impl Fn(&str) -> bool,
        account: &str,
    ) -> Option<Arc<RouteEntry>> {
        let routes = lock(&self.routes);
        let (_, p) = routes.iter().find(|(id, _)| pick(id))?;
        Self::carrier(&routes, p, account).cloned()
    }

    /// Whether `r` is the connection that carries `account` (the interest dump of a new route).
    pub fn carries(&self, r: &RouteEntry, account: &str) -> bool {
        if r.no_pool {
            return true;
        }
        match &r.account {
            Some(a) => &**a == account,
            None => {
                let reg = lock(&self.routes);
                !reg.pinned.contains(account)
                    && pool_idx(reg.pool.unwrap_or(1), account) == r.pool_idx.load(Relaxed)
            }
        }
    }

    /// Queue `bytes` on one route per peer (INFO updates).
    pub fn broadcast(&self, bytes: &[u8]) {
        for p in lock(&self.routes).values() {
            if let Some(r) = p.primary() {
                r.conn
                    .out
                    .push_now(bytes.len(), |b| b.extend_from_slice(bytes));
            }
        }
    }

    /// Encode a line of `account`'s with `f` straight into the buffer of the route that
    /// carries that account to each peer (`need` bytes at most; `f` gets the account as it
    /// goes on that connection: empty on a pinned-account route); routes whose buffer was
    /// empty go to `kicks`.
    pub fn broadcast_account_with(
        &self,
        account: &str,
        need: usize,
        kicks: &mut Vec<Arc<Conn>>,
        f: impl Fn(&mut bytes::BytesMut, &[u8], &Conn),
    ) {
        let reg = lock(&self.routes);
        for p in reg.values() {
            let Some(r) = Self::carrier(&reg, p, account) else {
                continue;
            };
            let acc: &[u8] = if r.account.is_some() {
                b""
            } else {
                account.as_bytes()
            };
            let conn = &r.conn;
            if let crate::conn::Push::Ok { kick: true, .. } =
                conn.out.push(need, |b| f(b, acc, conn))
            {
                kicks.push(r.conn.clone());
            }
        }
    }

    /// Queue `bytes` on one route to every peer except `except_id`, with `pick` choosing which
    /// of a peer's connections (`None` skips that peer).
    pub fn broadcast_except(
        &self,
        except_id: &str,
        bytes: impl Fn(&RouteEntry) -> Option<Vec<u8>>,
    ) {
        for (id, p) in lock(&self.routes).iter() {
            if id == except_id {
                continue;
            }
            if let Some(r) = p.primary() {
                if let Some(line) = bytes(r) {
                    r.conn
                        .out
                        .push_now(line.len(), |b| b.extend_from_slice(&line));
                }
            }
        }
    }

    /// Remember a configured route URL; false when it is already configured.
    pub fn add_configured(&self, url: &str) -> bool {
        lock(&self.configured).insert(url.to_string())
    }

    /// Forget a configured route URL (reload).
    pub fn remove_configured(&self, url: &str) -> bool {
        lock(&self.configured).remove(url)
    }

    /// The configured route URLs being dialled.
    pub fn configured_routes(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.configured).iter().cloned().collect();
        v.sort();
        v
    }

    /// Client URLs of the peers (for clients' `connect_urls`), unless `no_advertise`.
    pub fn peer_client_urls(&self) -> Vec<String> {
        if self.opts.no_advertise {
            return Vec::new();
        }
        let mut v = Vec::new();
        for p in lock(&self.routes).values() {
            let Some(r) = p.primary() else { continue };
            let info = r.info();
            if info.ldm {
                continue;
            }
            v.extend(info.connect_urls.iter().cloned());
        }
        v
    }

    /// Leafnode URLs of the peers (each peer's route INFO carries its own).
    pub fn peer_leafnode_urls(&self) -> Vec<String> {
        let mut v = Vec::new();
        for p in lock(&self.routes).values() {
            let Some(r) = p.primary() else { continue };
            v.extend(r.info().leafnode_urls.iter().cloned());
        }
        v
    }

    /// A peer's INFO update (on any of its connections): every connection to it takes it.
    /// True when its client URLs, leafnode URLs or lame duck state changed.
    pub fn update_peer_info(&self, info: &ServerInfo) -> bool {
        let routes = lock(&self.routes);
        let Some(p) = routes.get(&info.server_id) else {
            return false;
        };
        let mut changed = false;
        for e in p.entries() {
            let mut cur = e.info();
            changed |= cur.connect_urls != info.connect_urls
                || cur.leafnode_urls != info.leafnode_urls
                || cur.ldm != info.ldm;
            *cur = info.clone();
        }
        changed
    }

    /// How often routes are pinged, and how many unanswered PINGs make one stale.
    pub fn ping_settings(&self, srv: &ServerShared) -> (Duration, u32) {
        let interval = self
            .opts
            .ping_interval
            .unwrap_or_else(|| srv.opts.ping_interval.min(Duration::from_secs(30)));
        let max = self.opts.ping_max.unwrap_or(srv.opts.ping_max);
        (interval.max(Duration::from_millis(10)), max.max(1))
    }

    /// Close every route (shutdown).
    pub fn close_all(&self) {
        // A dial or handshake still in flight must not register a route afterwards (it would
        // keep the process alive after shutdown).
        {
            let _routes = lock(&self.routes);
            self.closed.store(true, Relaxed);
        }
        for r in self.routes() {
            r.conn.close(CloseReason::ServerShutdown);
        }
    }
}
