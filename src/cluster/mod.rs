//! The routing core's network side: the route listener, the registry of routes by remote
//! server id (with duplicate and self-route resolution), gossip of new peers, and the cluster
//! name. `route.rs` runs one route connection, `discovery.rs` dials seeds and gossiped peers,
//! `interest.rs` turns local interest into RS+/RS-.

pub mod discovery;
pub mod interest;
pub mod route;
pub mod tls_stream;
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
use std::time::{Duration, SystemTime};

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
}

/// Outcome of registering a route.
pub enum Registered {
    /// The first route to that server, or to that slot of its pool.
    New,
    /// This connection replaces an older one to the same server (close the old one).
    Replaced(Arc<RouteEntry>),
    /// A route to that server (that slot) exists and wins: close this connection.
    Duplicate,
    /// Every slot of the peer's pool is taken: close this (dialled) connection.
    PoolFull,
    /// The peer's dialler named a pool slot outside the pool.
    BadPoolIdx,
    /// The server is shutting down (`close_all` ran): close this connection.
    ShuttingDown,
}

/// What a pooled peer still lacks: free pool slots and pinned accounts without a connection.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Missing {
    pub slots: usize,
    pub accounts: Vec<String>,
}

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
    /// Route connections by remote server id.
    routes: Mutex<HashMap<String, Peer>>,
    /// Accounts with a dedicated route (`accounts`, plus the system account with pools).
    pinned: HashSet<String>,
    /// Addresses that turned out to be this server: never dialled again.
    self_addrs: Mutex<HashSet<SocketAddr>>,
    /// Addresses with a dial or a solicited route in flight.
    dialing: Mutex<HashSet<SocketAddr>>,
    /// The server id last found behind an address we dialled.
    addr_ids: Mutex<HashMap<SocketAddr, String>>,
    /// Configured route URLs being dialled, each with the token that stops it (reload).
    configured: Mutex<HashMap<String, tokio_util::sync::CancellationToken>>,
    /// Set by `close_all` (under the routes lock): no route registers after it.
    closed: AtomicBool,
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
    pub fn new(opts: ClusterOpts) -> Result<Self, String> {
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
            pinned,
            opts,
            tls,
            name: RwLock::new(name),
            dynamic: AtomicBool::new(dynamic),
            listen_addr: OnceLock::new(),
            routes: Mutex::new(HashMap::new()),
            self_addrs: Mutex::new(HashSet::new()),
            dialing: Mutex::new(HashSet::new()),
            addr_ids: Mutex::new(HashMap::new()),
            configured: Mutex::new(HashMap::new()),
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
        self.opts.pool()
    }

    /// Whether `account` has a route connection of its own to pooled peers.
    pub fn is_pinned(&self, account: &str) -> bool {
        self.pinned.contains(account)
    }

    /// The accounts with routes of their own, sorted.
    pub fn pinned_accounts(&self) -> Vec<String> {
        let mut v: Vec<String> = self.pinned.iter().cloned().collect();
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

    /// True when the peer `id` pools and a slot of its pool (or a pinned account of ours) has
    /// no connection yet: the dialling side should open another.
    pub fn missing(&self, id: &str) -> Missing {
        let routes = lock(&self.routes);
        let Some(p) = routes.get(id) else {
            return Missing::default();
        };
        let Some(first) = p.primary() else {
            return Missing::default();
        };
        if first.no_pool {
            return Missing::default();
        }
        let slots = p
            .pool
            .iter()
            .filter(|e| e.as_ref().is_none_or(|e| e.conn.is_closed()))
            .count();
        let mut accounts: Vec<String> = self
            .pinned
            .iter()
            .filter(|a| p.pinned.get(a.as_str()).is_none_or(|e| e.conn.is_closed()))
            .cloned()
            .collect();
        accounts.sort();
        Missing { slots, accounts }
    }

    /// Register `r`. Duplicates are resolved deterministically so that both ends keep the same
    /// connection: the one dialled by the server with the smaller id survives (ties: the older).
    /// With pools this holds per slot: a dialled connection takes the first free slot (the
    /// dialler tells the peer which in its INFO, `route_pool_idx`), an accepted one the slot
    /// its dialler named; `remote_pool_size` is the peer's (0: it does not pool).
    pub fn register(
        &self,
        my_id: &str,
        r: &Arc<RouteEntry>,
        remote_pool_size: usize,
    ) -> Registered {
        let mut routes = lock(&self.routes);
        if self.closed.load(Relaxed) {
            return Registered::ShuttingDown;
        }
        let peer = routes.entry(r.remote_id.clone()).or_default();
        let preferred_dialer_is_me = my_id < r.remote_id.as_str();
        let wins = |new: &RouteEntry, old: &RouteEntry| {
            let new_pref = new.did_solicit == preferred_dialer_is_me;
            let old_pref = old.did_solicit == preferred_dialer_is_me;
            new_pref && !old_pref
        };
        // Replace `old` by `r` when it is closed, or when `r` wins.
        let resolve = |slot: &mut Option<Arc<RouteEntry>>| match slot.clone() {
            None => {
                *slot = Some(r.clone());
                Registered::New
            }
            Some(old) if old.conn.is_closed() => {
                *slot = Some(r.clone());
                Registered::New
            }
            Some(old) if wins(r, &old) => {
                *slot = Some(r.clone());
                Registered::Replaced(old)
            }
            Some(_) => Registered::Duplicate,
        };
        if let Some(acc) = &r.account {
            let mut slot = peer.pinned.get(acc).cloned();
            let out = resolve(&mut slot);
            if let Some(e) = slot {
                peer.pinned.insert(acc.clone(), e);
            }
            return out;
        }
        if r.no_pool {
            if peer.pool.is_empty() {
                peer.pool.push(None);
            }
            r.pool_idx.store(0, Relaxed);
            return resolve(&mut peer.pool[0]);
        }
        let effective = self.pool_size().unwrap_or(1).max(remote_pool_size).max(1);
        if peer.pool.len() < effective {
            peer.pool.resize(effective, None);
        }
        let idx = if r.did_solicit {
            match peer
                .pool
                .iter()
                .position(|e| e.as_ref().is_none_or(|e| e.conn.is_closed()))
            {
                Some(i) => i,
                None => return Registered::PoolFull,
            }
        } else {
            let i = r.pool_idx.load(Relaxed);
            if i >= peer.pool.len() {
                return Registered::BadPoolIdx;
            }
            i
        };
        r.pool_idx.store(idx, Relaxed);
        resolve(&mut peer.pool[idx])
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
    fn carrier<'a>(&self, peer: &'a Peer, account: &str) -> Option<&'a Arc<RouteEntry>> {
        let first = peer.pool.first().and_then(Option::as_ref);
        if let Some(f) = first.filter(|f| f.no_pool) {
            return Some(f);
        }
        if self.pinned.contains(account) {
            return peer.pinned.get(account);
        }
        let idx = pool_idx(self.pool_size().unwrap_or(1), account);
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
        self.carrier(p, account).cloned()
    }

    /// Whether `r` is the connection that carries `account` (the interest dump of a new route).
    pub fn carries(&self, r: &RouteEntry, account: &str) -> bool {
        if r.no_pool {
            return true;
        }
        match &r.account {
            Some(a) => &**a == account,
            None => {
                !self.pinned.contains(account)
                    && pool_idx(self.pool_size().unwrap_or(1), account) == r.pool_idx.load(Relaxed)
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
        f: impl Fn(&mut bytes::BytesMut, &[u8]),
    ) {
        for p in lock(&self.routes).values() {
            let Some(r) = self.carrier(p, account) else {
                continue;
            };
            let acc: &[u8] = if r.account.is_some() {
                b""
            } else {
                account.as_bytes()
            };
            if let crate::conn::Push::Ok { kick: true, .. } = r.conn.out.push(need, |b| f(b, acc)) {
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

    pub fn mark_self(&self, addr: SocketAddr) {
        if lock(&self.self_addrs).insert(addr) {
            tracing::debug!("Detected route to self, ignoring {addr} from now on");
        }
    }

    pub fn is_self(&self, addr: &SocketAddr) -> bool {
        lock(&self.self_addrs).contains(addr)
    }

    /// Claim `addr` for a dial; false if a dial or a route through it is in flight, if it is
    /// this server, or if it leads to a server we already have a route to.
    pub fn claim(&self, addr: SocketAddr) -> bool {
        if self.is_self(&addr) {
            return false;
        }
        if let Some(id) = lock(&self.addr_ids).get(&addr) {
            if self.has_route(id) {
                return false;
            }
        }
        lock(&self.dialing).insert(addr)
    }

    /// `addr` leads to a server we have a route to.
    pub fn routed_addr(&self, addr: &SocketAddr) -> bool {
        let id = lock(&self.addr_ids).get(addr).cloned();
        id.is_some_and(|id| self.has_route(&id))
    }

    pub fn release(&self, addr: SocketAddr) {
        lock(&self.dialing).remove(&addr);
    }

    pub fn learned(&self, addr: SocketAddr, id: &str) {
        lock(&self.addr_ids).insert(addr, id.to_string());
    }

    /// Remember a configured route URL and the token that stops dialling it; `None` when
    /// it is already configured.
    pub fn add_configured(&self, url: &str) -> Option<tokio_util::sync::CancellationToken> {
        let mut m = lock(&self.configured);
        if m.contains_key(url) {
            return None;
        }
        let t = tokio_util::sync::CancellationToken::new();
        m.insert(url.to_string(), t.clone());
        Some(t)
    }

    /// Forget a configured route URL: its dial loop and its routes stop (reload).
    pub fn remove_configured(&self, url: &str) -> bool {
        match lock(&self.configured).remove(url) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// The configured route URLs being dialled.
    pub fn configured_routes(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.configured).keys().cloned().collect();
        v.sort();
        v
    }

    /// Close the routes this server dialled to `addr` (a removed configured route).
    pub fn close_solicited_to(&self, addr: SocketAddr) -> usize {
        let mut n = 0;
        for r in self.routes() {
            if r.did_solicit && r.conn.addr == addr && !r.conn.is_closed() {
                tracing::debug!(
                    "{} - Route removed from the configuration, closing",
                    r.conn.log_prefix()
                );
                r.conn.close(CloseReason::ClientClosed);
                n += 1;
            }
        }
        n
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

    /// A peer's INFO update (on any of its connections): every connection to it takes it.
    /// True when its client URLs or lame duck state changed.
    pub fn update_peer_info(&self, info: &ServerInfo) -> bool {
        let routes = lock(&self.routes);
        let Some(p) = routes.get(&info.server_id) else {
            return false;
        };
        let mut changed = false;
        for e in p.entries() {
            let mut cur = e.info();
            changed |= cur.connect_urls != info.connect_urls || cur.ldm != info.ldm;
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
