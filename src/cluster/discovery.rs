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
    let sol = Solicit {
        configured: stop.is_some(),
        ..Solicit::seed(url)
    };
    let ok = dial_route(srv, cl.clone(), addr, sol, stop).await;
    cl.release(addr);
    ok
}

/// Another connection to peer `id` we have a route to: the next slot of its pool, or a pinned
/// account's route (`sol.account`). Not claimed: a pool fills one connection at a time. A dial
/// that does not end registered is tried again (every second, a few times) while the peer
/// still lacks that connection.
pub fn dial_more(
    srv: &Arc<ServerShared>,
    cl: &Arc<Cluster>,
    addr: SocketAddr,
    sol: Solicit,
    id: String,
) {
    const TRIES: u32 = 5;
    let (srv, cl) = (srv.clone(), cl.clone());
    srv.clone().tasks.spawn(async move {
        for attempt in 0..TRIES {
            let missing = cl.missing(&id);
            let wanted = match &sol.account {
                Some(a) => missing.accounts.iter().any(|m| m.as_str() == &**a),
                None => missing.slots > 0,
            };
            if !wanted || srv.is_shutting_down() {
                return;
            }
            if attempt > 0 {
                tokio::select! {
                    _ = tokio::time::sleep(RETRY + jitter(100)) => {}
                    _ = srv.shutdown_signal() => return,
                }
            }
            if dial_route(srv.clone(), cl.clone(), addr, sol.clone(), None).await {
                return;
            }
        }
    });
}

async fn dial_route(
    srv: Arc<ServerShared>,
    cl: Arc<Cluster>,
    addr: SocketAddr,
    sol: Solicit,
    stop: Option<CancellationToken>,
) -> bool {
    if srv.is_shutting_down() {
        return false;
    }
    let url = &sol.url;
    match &sol.account {
        Some(a) => {
            tracing::debug!("Trying to connect to route on {addr} ({url}) for account {a:?}")
        }
        None => tracing::debug!("Trying to connect to route on {addr} ({url})"),
    }
    let r = tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr)).await;
    match r {
        Ok(Ok(stream)) => {
            // When the configured URL is removed (reload) the route is closed, whenever it
            // registers; the route task itself always runs to its end (its cleanup matters).
            let done = CancellationToken::new();
            if let Some(stop) = stop {
                srv.tasks
                    .spawn(close_when_removed(cl.clone(), addr, stop, done.clone()));
            }
            let registered = route::run(srv, cl.clone(), stream, addr, Some(sol)).await;
            done.cancel();
            registered
        }
        Ok(Err(e)) => {
            tracing::debug!("Error trying to connect to route {addr}: {e}");
            false
        }
        Err(_) => {
            tracing::debug!("Error trying to connect to route {addr}: timeout");
            false
        }
    }
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
    let mut backoff = crate::util::backoff::Backoff::new(cl.opts.connect_backoff);
    loop {
        if srv.is_shutting_down() || stop.is_cancelled() {
            return;
        }
        let resolved = resolve(&url.host, url.port).await;
        // Shutdown may have begun (and closed every route) while resolving.
        if srv.is_shutting_down() || stop.is_cancelled() {
            return;
        }
        // Connected through this seed (or nothing left to dial): the next wait is the
        // first delay; otherwise it grows with `connect_backoff`.
        let delay = match &resolved {
            Ok(addrs) if addrs.iter().any(|a| cl.is_self(a) || cl.routed_addr(a)) => {
                backoff.reset()
            }
            _ => backoff.failed(),
        };
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
            _ = tokio::time::sleep(delay + jitter(100)) => {}
            _ = srv.shutdown_signal() => return,
            _ = stop.cancelled() => return,
        }
    }
}

/// An INFO about another server arrived on a route: dial it if it is new to us, as nats-server's `processImplicitRoute` — a pinned
/// account's route when the INFO names one (`route_account`) and we pool and pin it too.
pub fn consider_gossip(srv: &Arc<ServerShared>, cl: &Arc<Cluster>, info: &ServerInfo) {
    if info.server_id == srv.id || info.ip.is_empty() {
        return;
    }
    let account = (!info.route_account.is_empty()).then(|| Arc::from(info.route_account.as_str()));
    if let Some(acc) = &account {
        // Pinned: only between pooled servers that both pin it, and only if still missing.
        if cl.pool_size().is_none()
            || !cl.is_pinned(acc)
            || !cl.has_route(&info.server_id)
            || !cl
                .missing(&info.server_id)
                .accounts
                .iter()
                .any(|a| a.as_str() == &**acc)
        {
            return;
        }
    } else if cl.has_route(&info.server_id) {
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
    let sol = Solicit {
        url,
        configured: false,
        account,
        gossip_mode: info.gossip_mode,
    };
    srv.tasks.spawn(implicit(
        srv.clone(),
        cl.clone(),
        sol,
        info.server_id.clone(),
    ));
}

async fn implicit(srv: Arc<ServerShared>, cl: Arc<Cluster>, sol: Solicit, id: String) {
    tokio::time::sleep(jitter(100)).await;
    let url = sol.url.clone();
    for attempt in 0..=cl.opts.connect_retries {
        if srv.is_shutting_down() {
            return;
        }
        match &sol.account {
            Some(acc) => {
                if !cl
                    .missing(&id)
                    .accounts
                    .iter()
                    .any(|a| a.as_str() == &**acc)
                {
                    return;
                }
            }
            None => {
                if cl.has_route(&id) {
                    return;
                }
            }
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
        if sol.account.is_some() {
            // A pinned account's route to a peer we already have: not claimed (the address
            // is taken by that peer's routes).
            if let Some(a) = addrs.first() {
                if dial_route(srv.clone(), cl.clone(), *a, sol.clone(), None).await {
                    return;
                }
            }
            continue;
        }
        let mut any = false;
        for a in addrs {
            if cl.claim(a) {
                any = true;
                let ok = dial_route(srv.clone(), cl.clone(), a, sol.clone(), None).await;
                cl.release(a);
                if ok {
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
