//! The routing core's network side: the route listener, the registry of routes by remote
//! server id (with duplicate and self-route resolution), gossip of new peers, and the cluster
//! name. `route.rs` runs one route connection, `discovery.rs` dials seeds and gossiped peers,
//! `interest.rs` turns local interest into RS+/RS-.

pub mod discovery;
mod driver;
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
use std::time::{Duration, Instant, SystemTime};

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

pub use driver::Verdict;

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
    /// Which seed or gossiped peer to dial, which duplicate survives, whom to tell what
    /// (`mesh.rs`, driven by `driver.rs`).
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
    /// Set by `close_all` (under the routes lock): no route registers after it.
    closed: AtomicBool,
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
        Ok(Cluster {
            mesh: Mutex::new(driver::new_mesh(&opts, server_id)),
            epoch: Instant::now(),
            wake: tokio::sync::Notify::new(),
            live: Mutex::new(HashMap::new()),
            spares: Mutex::new(HashMap::new()),
            resolve_failures: Mutex::new(HashMap::new()),
            opts,
            tls,
            name: RwLock::new(name),
            dynamic: AtomicBool::new(dynamic),
            listen_addr: OnceLock::new(),
            routes: Mutex::new(HashMap::new()),
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
