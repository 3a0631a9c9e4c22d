//! The URL account resolver (`resolver: URL("http://host:port/jwt/v1/accounts/")`), as
//! nats-server's `URLAccResolver`: an account JWT is fetched over HTTP (or HTTPS: the server
//! verified as `resolver_tls` says, else against the system's trust store, and our
//! certificate presented when it names one) from the base URL +
//! the account key when a user of an unknown account connects (a 200's body is the JWT;
//! anything else, or nothing within the fetch timeout, refuses the user). A fetched account
//! joins the preloaded ones; the accounts it imports from are fetched with it, as
//! nats-server looks them up. Updates pushed on `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` apply
//! to accounts already known (`claims.rs`).

use crate::jwt::{self, Kind};
use crate::server::ServerShared;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// nats-server's `DEFAULT_ACCOUNT_FETCH_TIMEOUT`.
pub const TIMEOUT: Duration = Duration::from_millis(1900);
/// Accounts one fetch may bring (the account and those it imports from, transitively).
const MAX_FETCHED: usize = 64;

/// The running URL resolver.
pub struct UrlResolver {
    base: String,
    /// For an `https` base: the client side of `resolver_tls` (Go's HTTP client with
    /// nats-server's `AccountResolverTLSConfig`).
    tls: Option<tokio_rustls::TlsConnector>,
    /// One fetch at a time: each applies every known account JWT plus what it fetched.
    pub(crate) busy: tokio::sync::Mutex<()>,
}

impl UrlResolver {
    /// The resolver for `base`; an `https` base gets its TLS client from `tls` (the
    /// `resolver_tls` block; none: the system's roots, no client certificate).
    pub fn new(base: &str, tls: Option<&crate::tls::TlsOpts>) -> Result<Self, String> {
        let tls = match crate::util::http_get::Target::parse(base) {
            Some(t) if t.tls => {
                let o = tls.cloned().unwrap_or_default();
                let cfg = crate::tls::dial_config(&o)?;
                Some(tokio_rustls::TlsConnector::from(cfg))
            }
            _ => None,
        };
        Ok(UrlResolver {
            base: base.to_string(),
            tls,
            busy: tokio::sync::Mutex::new(()),
        })
    }

    /// GET `url`: the body of a 200, or the error after nats-server's `could not fetch`.
    async fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        crate::util::http_get::get(url, self.tls.as_ref(), TIMEOUT)
            .await
            .map_err(|e| format!("could not fetch <{url:?}>: {e}"))
    }
}

/// The URL resolver `opts` configure, after nats-server's check at startup that its server
/// answers: the base URL itself must get a 200, or the server does not start.
pub async fn start(opts: &crate::config::Options) -> Result<Option<Arc<UrlResolver>>, String> {
    let base = match opts.operator.as_ref().and_then(|o| o.resolver.as_ref()) {
        Some(crate::config::Resolver::Url(b)) => b,
        _ => return Ok(None),
    };
    let res = UrlResolver::new(base, opts.resolver_tls.as_ref())
        .map_err(|e| format!("could not fetch <{base:?}>: {e}"))?;
    res.get(base).await?;
    Ok(Some(Arc::new(res)))
}

/// The account JWTs the server runs now, by key.
fn known(srv: &ServerShared) -> BTreeMap<String, String> {
    let live = srv.live_opts();
    live.operator
        .as_ref()
        .map(|o| o.preload.iter().cloned().collect())
        .unwrap_or_default()
}

/// Whether a user of account `key` should wait for a fetch.
pub fn may_fetch(srv: &ServerShared, key: &str) -> bool {
    srv.url_resolver.get().is_some()
        && crate::jwt::store::is_account_key(key)
        && !known(srv).contains_key(key)
}

/// Fetch account `key` (and the accounts it imports from) and apply them. True: served.
pub async fn fetch(srv: &Arc<ServerShared>, key: &str) -> bool {
    let Some(res) = srv.url_resolver.get().cloned() else {
        return false;
    };
    let _one = res.busy.lock().await;
    let mut all = known(srv);
    if all.contains_key(key) {
        return true; // fetched meanwhile
    }
    let mut wanted = vec![key.to_string()];
    let mut got = 0;
    while let Some(k) = wanted.pop() {
        if got >= MAX_FETCHED || all.contains_key(&k) {
            continue;
        }
        let url = format!("{}{k}", res.base);
        let token = match res.get(&url).await {
            Ok(body) => String::from_utf8_lossy(&body).trim().to_string(),
            Err(e) => {
                tracing::error!("{e}");
                if k == key {
                    return false;
                }
                continue;
            }
        };
        let claims = match jwt::decode(&token, Kind::Account) {
            Ok(c) if c.subject == k => c,
            Ok(c) => {
                tracing::error!("account JWT fetched for {k} is for {}", c.subject);
                continue;
            }
            Err(e) => {
                tracing::error!("account JWT fetched for {k} not valid: {e}");
                continue;
            }
        };
        for i in claims.nats["imports"].as_array().into_iter().flatten() {
            if let Some(a) = i["account"].as_str().filter(|a| !all.contains_key(*a)) {
                wanted.push(a.to_string());
            }
        }
        tracing::debug!("URL resolver - fetched account {k}");
        all.insert(k, token);
        got += 1;
    }
    if !all.contains_key(key) {
        return false;
    }
    let srv2 = srv.clone();
    let applied = tokio::task::spawn_blocking(move || srv2.apply_account_jwts(&all)).await;
    applied.is_ok() && known(srv).contains_key(key)
}
