//! The routing core's network side: the route listener, the registry of routes by remote
//! server id (with duplicate and self-route resolution), gossip of new peers, and the cluster
//! name. `route.rs` runs one route connection, `discovery.rs` dials seeds and gossiped peers,
//! `interest.rs` turns local interest into RS+/RS-.

pub mod discovery;
pub mod interest;
pub mod mesh;
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

/// A registered route: one connection to one remote server.
pub struct RouteEntry {
    pub conn: Arc<Conn>,
    pub remote_id: String,
    pub remote_name: String,
    pub did_solicit: bool,
    pub is_configured: bool,
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
    /// The first route to that server.
    New,
    /// This connection replaces an older one to the same server (close the old one).
    Replaced(Arc<RouteEntry>),
    /// A route to that server exists and wins: close this connection.
    Duplicate,
    /// The server is shutting down (`close_all` ran): close this connection.
    ShuttingDown,
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
    routes: Mutex<HashMap<String, Arc<RouteEntry>>>,
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
        Ok(Cluster {
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

    pub fn routes(&self) -> Vec<Arc<RouteEntry>> {
        let mut v: Vec<_> = lock(&self.routes).values().cloned().collect();
        v.sort_by_key(|r| r.conn.cid);
        v
    }

    pub fn num_routes(&self) -> usize {
        lock(&self.routes).len()
    }

    pub fn has_route(&self, id: &str) -> bool {
        lock(&self.routes).contains_key(id)
    }

    /// Register `r`. Duplicates are resolved deterministically so that both ends keep the same
    /// connection: the one dialled by the server with the smaller id survives (ties: the older).
    pub fn register(&self, my_id: &str, r: &Arc<RouteEntry>) -> Registered {
        let mut routes = lock(&self.routes);
        if self.closed.load(Relaxed) {
            return Registered::ShuttingDown;
        }
        let Some(old) = routes.get(&r.remote_id).cloned() else {
            routes.insert(r.remote_id.clone(), r.clone());
            return Registered::New;
        };
        let preferred_dialer_is_me = my_id < r.remote_id.as_str();
        let new_pref = r.did_solicit == preferred_dialer_is_me;
        let old_pref = old.did_solicit == preferred_dialer_is_me;
        if new_pref && !old_pref && !old.conn.is_closed() {
            routes.insert(r.remote_id.clone(), r.clone());
            Registered::Replaced(old)
        } else if old.conn.is_closed() {
            routes.insert(r.remote_id.clone(), r.clone());
            Registered::New
        } else {
            Registered::Duplicate
        }
    }

    /// Forget `r` if it is still the registered route to its server. True when it was.
    pub fn unregister(&self, r: &RouteEntry) -> bool {
        let mut routes = lock(&self.routes);
        if routes
            .get(&r.remote_id)
            .is_some_and(|x| x.conn.cid == r.conn.cid)
        {
            routes.remove(&r.remote_id);
            return true;
        }
        false
    }

    /// Queue `bytes` on every registered route.
    pub fn broadcast(&self, bytes: &[u8]) {
        for r in lock(&self.routes).values() {
            r.conn
                .out
                .push_now(bytes.len(), |b| b.extend_from_slice(bytes));
        }
    }

    /// Encode a line with `f` straight into every registered route's buffer (`need` bytes at
    /// most); routes whose buffer was empty go to `kicks`.
    pub fn broadcast_deferred_with(
        &self,
        need: usize,
        kicks: &mut Vec<Arc<Conn>>,
        f: impl Fn(&mut bytes::BytesMut),
    ) {
        for r in lock(&self.routes).values() {
            if let crate::conn::Push::Ok { kick: true, .. } = r.conn.out.push(need, &f) {
                kicks.push(r.conn.clone());
            }
        }
    }

    /// Queue `bytes` on every registered route except the one to `except_id`.
    pub fn broadcast_except(&self, except_id: &str, bytes: &[u8]) {
        for (id, r) in lock(&self.routes).iter() {
            if id != except_id {
                r.conn
                    .out
                    .push_now(bytes.len(), |b| b.extend_from_slice(bytes));
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
        for r in lock(&self.routes).values() {
            let info = r.info();
            if info.ldm {
                continue;
            }
            v.extend(info.connect_urls.iter().cloned());
        }
        v
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
