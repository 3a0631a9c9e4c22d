//! Finding peers: every configured seed is resolved at every attempt (a DNS name may stand for
//! many nodes) and EVERY address that is not this server is dialled — so nodes that all seed
//! the same name can never stay split — retrying each second forever; gossiped peers (INFO
//! `ip`) are dialled after a small jitter, `connect_retries` more times if that fails.
//! Which addresses to skip (self, in flight, already routed) is decided by `Cluster::claim`.

use super::route::{self, Solicit};
use super::url::RouteUrl;
use super::Cluster;
use crate::proto::info::ServerInfo;
use crate::server::ServerShared;
use rand::Rng;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Between attempts for configured routes (nats-server's DEFAULT_ROUTE_CONNECT).
const RETRY: Duration = Duration::from_secs(1);
const DIAL_TIMEOUT: Duration = Duration::from_secs(1);

fn jitter(max_ms: u64) -> Duration {
    Duration::from_millis(rand::rng().random_range(0..=max_ms))
}

/// Resolve `host` (an IP literal, or a name through hickory-resolver with resolv.conf and
/// /etc/hosts) to socket addresses.
pub async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let resolver = hickory_resolver::TokioResolver::builder_tokio()
        .map_err(|e| format!("resolver: {e}"))?
        .build();
    let ips = resolver
        .lookup_ip(host)
        .await
        .map_err(|e| format!("lookup {host}: {e}"))?;
    let mut v: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(ip, port)).collect();
    v.sort();
    v.dedup();
    if v.is_empty() {
        return Err(format!("lookup {host}: no addresses"));
    }
    Ok(v)
}

/// Start dialling every configured seed.
pub fn start(srv: &Arc<ServerShared>, cl: &Arc<Cluster>) {
    for raw in &cl.opts.routes {
        add_configured(srv, cl, raw);
    }
}

/// Start dialling one configured seed (at startup, or added by a config reload).
pub fn add_configured(srv: &Arc<ServerShared>, cl: &Arc<Cluster>, raw: &str) {
    match RouteUrl::parse(raw) {
        Ok(url) => {
            if let Some(stop) = cl.add_configured(raw) {
                srv.tasks
                    .spawn(configured(srv.clone(), cl.clone(), url, stop));
            }
        }
        Err(e) => tracing::error!("{e}"),
    }
}

/// A configured seed removed by a config reload: stop dialling it and close the routes it
/// dialled (they are not redialled).
pub fn remove_configured(cl: &Arc<Cluster>, raw: &str) {
    cl.remove_configured(raw);
}

/// Dial one address and run the route to its end. The caller has claimed `addr`.
async fn dial(
    srv: Arc<ServerShared>,
    cl: Arc<Cluster>,
    addr: SocketAddr,
    url: RouteUrl,
    stop: Option<CancellationToken>,
) -> bool {
    if srv.is_shutting_down() {
        cl.release(addr);
        return false;
    }
    tracing::debug!("Trying to connect to route on {addr} ({url})");
    let r = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr)).await;
    let configured = stop.is_some();
    let ok = match r {
        Ok(Ok(stream)) => {
            // When the configured URL is removed (reload) the route is closed, whenever it
            // registers; the route task itself always runs to its end (its cleanup matters).
            let done = CancellationToken::new();
            if let Some(stop) = stop {
                srv.tasks
                    .spawn(close_when_removed(cl.clone(), addr, stop, done.clone()));
            }
            route::run(
                srv,
                cl.clone(),
                stream,
                addr,
                Some(Solicit { url, configured }),
            )
            .await;
            done.cancel();
            true
        }
        Ok(Err(e)) => {
            tracing::debug!("Error trying to connect to route {addr}: {e}");
            false
        }
        Err(_) => {
            tracing::debug!("Error trying to connect to route {addr}: timeout");
            false
        }
    };
    cl.release(addr);
    ok
}

/// Until the route dialled to `addr` ends (`done`): once `stop` fires, close it.
async fn close_when_removed(
    cl: Arc<Cluster>,
    addr: SocketAddr,
    stop: CancellationToken,
    done: CancellationToken,
) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = done.cancelled() => return,
    }
    // The route may not be registered yet: look again until it has ended.
    loop {
        cl.close_solicited_to(addr);
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = done.cancelled() => return,
        }
    }
}

/// A configured seed: until removed (`stop`), resolve and dial every address not already
/// taken care of.
async fn configured(
    srv: Arc<ServerShared>,
    cl: Arc<Cluster>,
    url: RouteUrl,
    stop: CancellationToken,
) {
    let mut failures: u64 = 0;
    loop {
        if srv.is_shutting_down() || stop.is_cancelled() {
            return;
        }
        let resolved = resolve(&url.host, url.port).await;
        // Shutdown may have begun (and closed every route) while resolving.
        if srv.is_shutting_down() || stop.is_cancelled() {
            return;
        }
        match resolved {
            Ok(addrs) => {
                failures = 0;
                for a in addrs {
                    if cl.claim(a) {
                        srv.tasks.spawn(dial(
                            srv.clone(),
                            cl.clone(),
                            a,
                            url.clone(),
                            Some(stop.clone()),
                        ));
                    }
                }
            }
            Err(e) => {
                failures += 1;
                // First failures and then every minute, to keep the log readable.
                if failures <= 3 || failures % 60 == 0 {
                    tracing::error!("Error resolving route {url}: {e} (attempt {failures})");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RETRY + jitter(100)) => {}
            _ = srv.shutdown_signal() => return,
            _ = stop.cancelled() => return,
        }
    }
}

/// An INFO about another server arrived on a route: dial it if it is new to us.
pub fn consider_gossip(srv: &Arc<ServerShared>, cl: &Arc<Cluster>, info: &ServerInfo) {
    if info.server_id == srv.id || cl.has_route(&info.server_id) || info.ip.is_empty() {
        return;
    }
    let mut url = match RouteUrl::parse(&info.ip) {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!("Ignoring gossiped route: {e}");
            return;
        }
    };
    if info.auth_required && url.user.is_none() {
        url.user = cl.opts.username.clone();
        url.pass = cl.opts.password.clone().or_else(|| cl.opts.token.clone());
    }
    srv.tasks.spawn(implicit(
        srv.clone(),
        cl.clone(),
        url,
        info.server_id.clone(),
    ));
}

async fn implicit(srv: Arc<ServerShared>, cl: Arc<Cluster>, url: RouteUrl, id: String) {
    tokio::time::sleep(jitter(100)).await;
    for attempt in 0..=cl.opts.connect_retries {
        if srv.is_shutting_down() || cl.has_route(&id) {
            return;
        }
        if attempt > 0 {
            tokio::time::sleep(RETRY).await;
        }
        let addrs = match resolve(&url.host, url.port).await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!("Error resolving implicit route {url}: {e}");
                continue;
            }
        };
        let mut any = false;
        for a in addrs {
            if cl.claim(a) {
                any = true;
                if dial(srv.clone(), cl.clone(), a, url.clone(), None).await {
                    return;
                }
            }
        }
        if !any {
            // Someone else is dialling it (or it is us): nothing to do.
            return;
        }
    }
}
