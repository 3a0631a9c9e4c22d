//! HTTP monitoring (nats-server's `-m` port): `/`, `/varz`, `/connz`, `/routez`, `/subsz`,
//! `/accountz`, `/accstatz`, `/leafz`, `/gatewayz`, `/jsz`, `/healthz` (and natsd's `/topz`),
//! with nats-server's JSON field names and `?callback=` JSONP, and natsd's `/metrics`
//! (Prometheus text), all under `http_base_path`. Reads server state; changes nothing.

pub mod accountz;
pub mod connz;
pub mod healthz;
pub mod metrics;
pub mod misc;
pub mod routez;
pub mod subsz;
pub mod varz;

use crate::server::ServerShared;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

type Params = Query<HashMap<String, String>>;

pub async fn serve(srv: Arc<ServerShared>, l: TcpListener, stop: CancellationToken) {
    let app = router(srv);
    let r = axum::serve(l, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(e) = r {
        tracing::error!("http monitor stopped: {e}");
    }
}

/// The HTTPS monitor (`https_port`): the same routes over TLS with the client port's
/// certificate (`tls {}`; a reload's new certificate is used for new connections). As in
/// nats-server, no client certificate is asked for, even with `verify`.
/// Handshakes run in their own tasks under the TLS timeout, so a slow client does not hold up
/// the others; finished ones are handed to axum through `TlsListener`.
pub async fn serve_https(srv: Arc<ServerShared>, l: TcpListener, stop: CancellationToken) {
    let app = router(srv.clone());
    let addr = match l.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!("https monitor stopped: {e}");
            return;
        }
    };
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    srv.tasks
        .spawn(https_accept_loop(srv.clone(), l, tx, stop.clone()));
    let r = axum::serve(TlsListener { rx, addr }, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(e) = r {
        tracing::error!("https monitor stopped: {e}");
    }
}

type HttpsConn = (
    tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    std::net::SocketAddr,
);

async fn https_accept_loop(
    srv: Arc<ServerShared>,
    l: TcpListener,
    tx: tokio::sync::mpsc::Sender<HttpsConn>,
    stop: CancellationToken,
) {
    loop {
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            r = l.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::error!("Temporary HTTPS Accept Error ({e}), sleeping 10ms");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let Some(acceptor) = srv.https_tls() else {
            continue; // TLS was turned off by a reload: nothing to serve with.
        };
        let timeout = srv
            .live_opts()
            .tls
            .as_ref()
            .map_or(std::time::Duration::from_secs(2), |t| t.timeout);
        let tx = tx.clone();
        srv.tasks.spawn(async move {
            match https_handshake(acceptor, stream, timeout).await {
                Ok(s) => {
                    let _ = tx.send((s, peer)).await;
                }
                Err(e) => tracing::debug!("http: TLS handshake error from {peer}: {e}"),
            }
        });
    }
}

/// The TLS handshake of one HTTPS connection. A plain HTTP request gets Go's answer
/// (`400 Bad Request` … `Client sent an HTTP request to an HTTPS server.`).
async fn https_handshake(
    acceptor: tokio_rustls::TlsAcceptor,
    stream: tokio::net::TcpStream,
    timeout: std::time::Duration,
) -> Result<tokio_rustls::server::TlsStream<tokio::net::TcpStream>, String> {
    use tokio::io::AsyncWriteExt;
    let work = async move {
        let mut head = [0u8; 5];
        let n = stream.peek(&mut head).await.map_err(|e| e.to_string())?;
        if n > 0 && head[0] != 0x16 && head[..n].iter().all(|b| b.is_ascii_graphic() || *b == b' ')
        {
            let mut stream = stream;
            let _ = stream
                .write_all(
                    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n",
                )
                .await;
            let _ = stream.shutdown().await;
            return Err("client sent an HTTP request to an HTTPS server".to_string());
        }
        acceptor.accept(stream).await.map_err(|e| e.to_string())
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| "i/o timeout".to_string())?
}

/// Finished TLS connections, as axum's `Listener`.
struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<HttpsConn>,
    addr: std::net::SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop ended (shutdown): axum's graceful shutdown ends the serve.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// Every endpoint, under `http_base_path` as nats-server 2.9.10 serves it: with
/// `http_base_path: /nats` the index is `/nats` (not `/nats/`), `/nats/varz` answers and `/varz`
/// is a 404.
pub fn router(srv: Arc<ServerShared>) -> Router {
    let base = base_path(srv.opts.http_base_path.as_deref().unwrap_or(""));
    let lit = literal(&base);
    let at = |p: &str| format!("{lit}{p}");
    let index_path = if lit.is_empty() {
        "/".to_string()
    } else {
        lit.clone()
    };
    Router::new()
        .without_v07_checks()
        .route(&index_path, get(index))
        .route(&at("/varz"), get(varz_h))
        .route(&at("/connz"), get(connz_h))
        .route(&at("/routez"), get(routez_h))
        .route(&at("/subsz"), get(subsz_h))
        .route(&at("/subscriptionsz"), get(subsz_h))
        .route(&at("/accountz"), get(accountz_h))
        .route(&at("/accstatz"), get(accstatz_h))
        .route(&at("/leafz"), get(leafz_h))
        .route(&at("/gatewayz"), get(gatewayz_h))
        .route(&at("/jsz"), get(jsz_h))
        .route(&at("/raftz"), get(raftz_h))
        .route(&at("/topz"), get(topz_h))
        .route(&at("/healthz"), get(healthz_h))
        .route(&at("/ipqueuesz"), get(ipqueuesz_h))
        .route(&at("/stacksz"), get(stacksz_h))
        .route(&at("/metrics"), get(metrics_h))
        .fallback(not_found)
        .with_state(srv)
}

/// A path as an axum route that matches it literally: braces (axum's capture syntax) doubled;
/// with `without_v07_checks`, a segment may start with `:` or `*`.
fn literal(p: &str) -> String {
    p.replace('{', "{{").replace('}', "}}")
}

/// `http_base_path` as a route prefix: a leading `/`, no trailing one, `.`, `..` and empty
/// segments resolved (Go's `path.Clean`); `""` for none or `/`.
pub fn base_path(p: &str) -> String {
    let mut segs: Vec<&str> = Vec::new();
    for s in p.split('/') {
        match s {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s),
        }
    }
    segs.iter().map(|s| format!("/{s}")).collect()
}

fn count(srv: &ServerShared, path: &str) {
    let mut m = srv.http_req_stats.lock().unwrap_or_else(|e| e.into_inner());
    *m.entry(path.to_string()).or_insert(0) += 1;
}

/// JSON (indented like nats-server's) or JSONP when `callback` is given.
pub fn json_response<T: Serialize>(
    status: StatusCode,
    v: &T,
    params: &HashMap<String, String>,
) -> Response {
    match serde_json::to_string_pretty(v) {
        Ok(body) => body_response(status, body, params),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("error: {e}")).into_response(),
    }
}

/// Compact JSON, as nats-server writes `/healthz` (`{"status":"ok"}`), or JSONP.
fn compact_json_response<T: Serialize>(
    status: StatusCode,
    v: &T,
    params: &HashMap<String, String>,
) -> Response {
    match serde_json::to_string(v) {
        Ok(body) => body_response(status, body, params),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("error: {e}")).into_response(),
    }
}

fn body_response(status: StatusCode, body: String, params: &HashMap<String, String>) -> Response {
    match params.get("callback").filter(|c| !c.is_empty()) {
        Some(cb) => (
            status,
            [(header::CONTENT_TYPE, "application/javascript")],
            format!("{cb}({body})"),
        )
            .into_response(),
        None => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
    }
}

/// Unknown paths: Go's `http.NotFound`, which nats-server's mux answers with.
async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        "404 page not found\n",
    )
        .into_response()
}

fn bad_request(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, msg).into_response()
}

async fn index(State(srv): State<Arc<ServerShared>>) -> Response {
    count(&srv, "/");
    // Links relative to the index: `varz` at `/`, `nats/varz` at `/nats` (the URLs of
    // nats-server's `./varz` and `./nats/varz`), `b/varz` at `/a/b` (where nats-server's
    // `./a/b/varz` would lead to `/a/a/b/varz`).
    let base = base_path(srv.opts.http_base_path.as_deref().unwrap_or(""));
    let base = base
        .rsplit_once('/')
        .map(|(_, last)| format!("{last}/"))
        .unwrap_or_default();
    let mut body = String::from("<html><body><h1>natsd</h1><ul>");
    for p in [
        "varz", "jsz", "raftz", "connz", "accountz", "accstatz", "subsz", "routez", "leafz",
        "gatewayz", "topz", "metrics", "healthz",
    ] {
        body.push_str(&format!("<li><a href=\"{base}{p}\">{p}</a></li>"));
    }
    body.push_str("</ul></body></html>");
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

/// natsd's own: Prometheus text format (`docs/metrics.md`).
async fn metrics_h(State(srv): State<Arc<ServerShared>>) -> Response {
    count(&srv, "/metrics");
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(&srv),
    )
        .into_response()
}

async fn varz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/varz");
    json_response(StatusCode::OK, &varz::Varz::of(&srv), &p)
}

async fn connz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/connz");
    match connz::ConnzQuery::parse(&p) {
        Ok(q) => json_response(StatusCode::OK, &connz::connz(&srv, &q), &p),
        Err(e) => bad_request(e),
    }
}

async fn routez_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/routez");
    match routez::parse_subs(&p) {
        Ok(subs) => json_response(StatusCode::OK, &routez::routez(&srv, subs), &p),
        Err(e) => bad_request(e),
    }
}

/// `/subsz` and its alias `/subscriptionsz` (counted as `/subsz`, as nats-server does).
async fn subsz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/subsz");
    match subsz::SubszQuery::parse(&p) {
        Ok(q) => json_response(StatusCode::OK, &subsz::subsz(&srv, &q), &p),
        Err(e) => bad_request(e),
    }
}

/// A JSON endpoint that either answers or refuses its parameters with a 400.
fn answer<T: Serialize>(r: Result<T, String>, p: &HashMap<String, String>) -> Response {
    match r {
        Ok(v) => json_response(StatusCode::OK, &v, p),
        Err(e) => bad_request(e),
    }
}

async fn accountz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/accountz");
    answer(accountz::accountz(&srv, &p), &p)
}

async fn accstatz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/accstatz");
    answer(accountz::accstatz(&srv, &p), &p)
}

async fn leafz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/leafz");
    answer(misc::leafz(&srv, &p), &p)
}

async fn gatewayz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/gatewayz");
    answer(misc::gatewayz(&srv, &p), &p)
}

async fn jsz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/jsz");
    answer(misc::jsz(&srv, &p), &p)
}

/// The Raft groups of clustered JetStream on this node (`jetstream/cluster/raftz.rs`).
async fn raftz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/raftz");
    match misc::raftz(&srv, &p) {
        Ok(v) => json_response(StatusCode::OK, &v, &p),
        Err(text) => (StatusCode::NOT_FOUND, text).into_response(),
    }
}

/// natsd's own: the cluster graph, gathered from every reachable server over `$SYS`
/// (`sys::topz`). `format=dot|mermaid` draws it; default JSON.
async fn topz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/topz");
    let text = |body: String| {
        ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
    };
    let format = p.get("format").map(String::as_str).unwrap_or("");
    if !matches!(format, "" | "json" | "dot" | "mermaid") {
        return bad_request(format!("invalid format {format:?}: json, dot or mermaid"));
    }
    let (topz, t) = crate::sys::topz::topz(&srv).await;
    match format {
        "dot" => text(t.to_dot()),
        "mermaid" => text(t.to_mermaid()),
        _ => json_response(StatusCode::OK, &topz, &p),
    }
}

pub use healthz::Health;

/// `/healthz`'s plain answer (also `$SYS.REQ.SERVER.PING.HEALTHZ`'s data) and its HTTP status.
pub fn health(srv: &ServerShared) -> (Health, StatusCode) {
    healthz::health(srv, &healthz::HealthOpts::default())
}

async fn healthz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/healthz");
    let o = match healthz::HealthOpts::parse(&p) {
        Ok(o) => o,
        // Go's `http.Error`: the text and a newline, as plain text.
        Err(e) => {
            let body = format!("{e}\n");
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                body,
            )
                .into_response();
        }
    };
    let (h, status) = healthz::health(&srv, &o);
    if let Some(e) = &h.error {
        tracing::warn!("Healthcheck failed: {e:?}");
    } else if !h.errors.is_empty() {
        tracing::warn!("Healthcheck failed: {} errors", h.errors.len());
    }
    compact_json_response(status, &h, &p)
}

/// nats-server's internal queues with messages waiting: natsd has none of its kind (its
/// connections write their own buffers), so `{}` — what nats-server says when none wait.
async fn ipqueuesz_h(State(srv): State<Arc<ServerShared>>, Query(p): Params) -> Response {
    count(&srv, "/ipqueuesz");
    compact_json_response(StatusCode::OK, &varz::Empty {}, &p)
}

/// nats-server dumps its goroutines' stacks; natsd lists its threads (id, name, state) from
/// `/proc/self/task`, as text.
async fn stacksz_h(State(srv): State<Arc<ServerShared>>) -> Response {
    count(&srv, "/stacksz");
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        misc::threads(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::base_path;

    #[test]
    fn base_path_is_cleaned() {
        assert_eq!(base_path(""), "");
        assert_eq!(base_path("/"), "");
        assert_eq!(base_path("nats"), "/nats");
        assert_eq!(base_path("/nats/"), "/nats");
        assert_eq!(base_path("//a/./b/../c//"), "/a/c");
    }

    #[test]
    fn odd_base_paths_build_a_router() {
        for b in ["/:x", "/*y", "/{z}", "/a}b{"] {
            let lit = super::literal(&base_path(b));
            let _ = axum::Router::<()>::new()
                .without_v07_checks()
                .route(&lit, axum::routing::get(|| async { "" }))
                .route(&format!("{lit}/varz"), axum::routing::get(|| async { "" }));
        }
    }
}
