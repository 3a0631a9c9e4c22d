//! Leafnode remotes: the hubs this server dials as a leaf. Each remote's URLs are tried in
//! turn, the host resolved again at every attempt (every address, as routes do); a failed or
//! lost connection is retried after [`RECONNECT_DELAY`] (nats-server's default), after
//! [`LOOP_DELAY`] when the hub reported a loop. The `leafnode_urls` of the hub's INFO (its
//! cluster's leafnode addresses) are tried too, before the configured ones, as nats-server.

use super::Leafnodes;
use crate::config::leaf::RemoteLeafOpts;
use crate::server::ServerShared;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// After `-ERR 'Loop detected …'` (nats-server's `leafNodeReconnectDelayAfterLoopDetected`).
pub const LOOP_DELAY: Duration = Duration::from_secs(30);
/// How long a remote waits after a hub refused its version (nats-server's
/// `leafNodeMinVersionReconnectDelay`).
pub const MIN_VERSION_DELAY: Duration = Duration::from_secs(5);
const DEFAULT_LEAF_PORT: u16 = 7422;
const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// `nats-leaf://[user[:pass]@]host[:port]`, `nats://…`, `tls://…` or bare `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteUrl {
    pub user: Option<String>,
    pub pass: Option<String>,
    pub host: String,
    pub port: u16,
    /// `tls://`: this remote must use TLS (its `tls {}` block says how).
    pub tls: bool,
}

impl RemoteUrl {
    pub fn parse(s: &str) -> Result<RemoteUrl, String> {
        let t = s.trim();
        let mut tls = false;
        let rest = match t.split_once("://") {
            Some((scheme, rest)) => match scheme.to_ascii_lowercase().as_str() {
                "nats-leaf" | "nats" | "leaf" => rest,
                "tls" => {
                    tls = true;
                    rest
                }
                "wss" | "ws" => {
                    return Err(format!(
                        "leafnode URL {s:?}: scheme {scheme:?} is not supported yet (no \
                         WebSocket leafnode remotes in natsd yet)"
                    ))
                }
                other => return Err(format!("leafnode URL {s:?}: unsupported scheme {other:?}")),
            },
            None => t,
        };
        let rest = rest.trim_end_matches('/');
        let has_port = match rest.rsplit_once(']') {
            Some((_, p)) => p.starts_with(':'),
            None => rest.rsplit_once('@').map_or(rest, |x| x.1).contains(':'),
        };
        let full = if has_port {
            format!("nats://{rest}")
        } else {
            format!("nats://{rest}:{DEFAULT_LEAF_PORT}")
        };
        let u = crate::cluster::url::RouteUrl::parse(&full)
            .map_err(|e| e.replace("route URL", "leafnode URL"))?;
        Ok(RemoteUrl {
            user: u.user,
            pass: u.pass,
            host: u.host,
            port: u.port,
            tls,
        })
    }
}

/// What a dialled connection knows of its remote.
#[derive(Clone, Debug)]
pub struct Solicit {
    pub url: RemoteUrl,
    pub account: String,
    /// The remote's addresses learned from its hub (shared by its successive connections).
    pub discovered: Discovered,
    /// The remote's `tls {}`.
    pub tls: Option<Arc<super::open::RemoteTls>>,
    /// The remote's `deny_imports` (also sent as CONNECT `deny_pub`) and `deny_exports`.
    pub deny_imports: Vec<String>,
    pub deny_exports: Vec<String>,
    /// The remote's `compression`.
    pub compression: crate::compress::CompressionOpts,
    /// The remote's `credentials` or `nkey`.
    pub creds: crate::config::leaf::RemoteCreds,
    /// How long to wait for the hub's first INFO (`first_info_timeout`).
    pub first_info: Duration,
    /// `hub: true`: we act as the hub of the connection we dial.
    pub hub: bool,
}

/// `host:port` addresses a remote learned from its hub's INFO `leafnode_urls`.
#[derive(Clone, Debug, Default)]
pub struct Discovered {
    urls: Arc<Mutex<Vec<String>>>,
    configured: Arc<Vec<(String, u16)>>,
    /// `ignore_discovered_servers`: learn nothing.
    ignore: bool,
}

impl Discovered {
    fn new(configured: &[String], ignore: bool) -> Self {
        let configured = configured
            .iter()
            .filter_map(|u| RemoteUrl::parse(u).ok())
            .map(|u| (u.host, u.port))
            .collect();
        Discovered {
            urls: Arc::default(),
            configured: Arc::new(configured),
            ignore,
        }
    }

    /// The hub's latest list replaces what we knew (nats-server treats each INFO as the
    /// cluster's current list); addresses we are configured with are not repeated.
    pub fn learn(&self, urls: &[String]) {
        if self.ignore {
            return;
        }
        let mut v = Vec::new();
        for u in urls {
            match RemoteUrl::parse(u) {
                Ok(p) if self.configured.contains(&(p.host.clone(), p.port)) => {}
                Ok(_) if !v.contains(u) => v.push(u.clone()),
                Ok(_) => {}
                Err(e) => tracing::warn!("Leafnode hub sent a bad leafnode URL: {e}"),
            }
        }
        let mut cur = self.urls.lock().unwrap_or_else(|e| e.into_inner());
        if *cur != v {
            tracing::debug!("Leafnode remote: discovered hub URLs {v:?}");
            *cur = v;
        }
    }

    /// What to try, in turn: the discovered addresses, then the configured URLs.
    fn candidates(&self, configured: &[String]) -> Vec<String> {
        let mut v = self.urls.lock().unwrap_or_else(|e| e.into_inner()).clone();
        v.extend(configured.iter().cloned());
        v
    }
}

/// Dial remote `index` until shutdown: one connection at a time, retried after it ends.
pub async fn dial_loop(
    srv: Arc<ServerShared>,
    lf: Arc<Leafnodes>,
    index: usize,
    opts: RemoteLeafOpts,
) {
    let account = opts
        .account
        .clone()
        .unwrap_or_else(|| crate::account::GLOBAL_ACCOUNT.to_string());
    let retry = lf.opts.reconnect.unwrap_or(RECONNECT_DELAY);
    let tls = match opts
        .tls
        .as_ref()
        .map(super::open::RemoteTls::new)
        .transpose()
    {
        Ok(t) => t.map(Arc::new),
        Err(e) => {
            tracing::error!("Leafnode remote {index}: tls: {e}; not dialling it");
            return;
        }
    };
    if tls.is_none()
        && opts
            .urls
            .iter()
            .any(|u| RemoteUrl::parse(u).is_ok_and(|u| u.tls))
    {
        tracing::error!(
            "Leafnode remote {index}: a tls:// URL needs a tls {{}} block (natsd does not use \
             the system's CA store); not dialling it"
        );
        return;
    }
    let discovered = Discovered::new(&opts.urls, opts.ignore_discovered);
    // nats-server shuffles a remote's URLs once, unless told not to.
    let mut urls = opts.urls.clone();
    if !opts.no_randomize {
        use rand::seq::SliceRandom;
        urls.shuffle(&mut rand::rng());
    }
    let dial_timeout = nonzero(opts.dial_timeout)
        .or(nonzero(lf.opts.dial_timeout))
        .unwrap_or(DIAL_TIMEOUT);
    let first_info = nonzero(opts.first_info_timeout).unwrap_or(super::open::FIRST_INFO_TIMEOUT);
    // A discovered URL has no credentials: the block's, or the first configured URL's.
    let creds = match (&opts.username, &opts.password) {
        (None, None) => opts
            .urls
            .iter()
            .filter_map(|u| RemoteUrl::parse(u).ok())
            .find(|u| u.user.is_some())
            .map_or((None, None), |u| (u.user, u.pass)),
        (u, p) => (u.clone(), p.clone()),
    };
    let mut next = 0usize;
    loop {
        let candidates = discovered.candidates(&urls);
        let Some(raw) = candidates.get(next % candidates.len().max(1)) else {
            tracing::error!("Leafnode remote {index} has no URL");
            return;
        };
        next += 1;
        let delay = match RemoteUrl::parse(raw) {
            Err(e) => {
                tracing::error!("Leafnode remote {index}: {e}");
                retry
            }
            Ok(mut url) => {
                if url.user.is_none() {
                    url.user.clone_from(&creds.0);
                    url.pass.clone_from(&creds.1);
                }
                let sol = Solicit {
                    url,
                    account: account.clone(),
                    discovered: discovered.clone(),
                    tls: tls.clone(),
                    deny_imports: opts.deny_imports.clone(),
                    deny_exports: opts.deny_exports.clone(),
                    creds: opts.creds.clone(),
                    compression: opts
                        .compression
                        .clone()
                        .unwrap_or_else(crate::compress::CompressionOpts::leaf_default),
                    first_info,
                    hub: opts.hub,
                };
                match attempt(&srv, &lf, sol, dial_timeout).await {
                    Outcome::Wait(d) => d,
                    Outcome::Retry => retry,
                }
            }
        };
        tokio::select! {
            _ = srv.shutdown_signal() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// A configured timeout, where 0 means the default (as nats-server).
fn nonzero(d: Option<Duration>) -> Option<Duration> {
    d.filter(|d| !d.is_zero())
}

enum Outcome {
    Retry,
    /// Wait this long first: the hub (or we) detected a loop, or it wants a newer version.
    Wait(Duration),
}

/// One attempt: resolve, connect to the first address that answers, serve until closed.
async fn attempt(
    srv: &Arc<ServerShared>,
    lf: &Arc<Leafnodes>,
    sol: Solicit,
    dial_timeout: Duration,
) -> Outcome {
    let addrs = match crate::cluster::resolve(&sol.url.host, sol.url.port).await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("Error trying to connect to leafnode remote: {e}");
            return Outcome::Retry;
        }
    };
    for addr in addrs {
        let dial = tokio::time::timeout(dial_timeout, tokio::net::TcpStream::connect(addr));
        let stream = tokio::select! {
            _ = srv.shutdown_signal() => return Outcome::Retry,
            r = dial => r,
        };
        match stream {
            Ok(Ok(s)) => {
                tracing::info!("Connected leafnode to {addr}");
                let wait = super::conn::run(srv.clone(), lf.clone(), s, addr, Some(sol)).await;
                return wait.map_or(Outcome::Retry, Outcome::Wait);
            }
            Ok(Err(e)) => {
                tracing::debug!("Error trying to connect to leafnode remote {addr}: {e}")
            }
            Err(_) => tracing::debug!("Timeout connecting to leafnode remote {addr}"),
        }
    }
    Outcome::Retry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let u = RemoteUrl::parse("nats-leaf://a:b@h:1").unwrap();
        assert_eq!(
            (u.user.as_deref(), u.pass.as_deref()),
            (Some("a"), Some("b"))
        );
        assert_eq!((u.host.as_str(), u.port), ("h", 1));
        assert_eq!(RemoteUrl::parse("nats://h").unwrap().port, 7422);
        assert_eq!(RemoteUrl::parse("tok@h").unwrap().port, 7422);
        assert_eq!(RemoteUrl::parse("[::1]:5").unwrap().port, 5);
        assert!(RemoteUrl::parse("tls://h:1").unwrap().tls);
        assert!(!RemoteUrl::parse("nats-leaf://h:1").unwrap().tls);
        assert!(RemoteUrl::parse("wss://h:1").is_err());
        assert!(RemoteUrl::parse("http://h:1").is_err());
    }
}
