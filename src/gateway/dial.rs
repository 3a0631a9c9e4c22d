//! Dialling remote gateways: one loop per remote cluster, over its known URLs in turn.
//! Configured gateways retry forever, every second; implicit ones (learned from an inbound
//! gateway or gossip) `gateway.connect_retries` more times, then are forgotten until learned
//! again. Log lines as nats-server's.

use super::Gateway;
use crate::cluster::url::RouteUrl;
use crate::server::ServerShared;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

const DIAL_TIMEOUT: Duration = Duration::from_secs(2);

/// How an outbound gateway came about.
#[derive(Clone, Debug)]
pub struct Solicit {
    /// The remote gateway name we expect behind the URL.
    pub name: String,
    pub url: RouteUrl,
    pub configured: bool,
}

/// Start the dial loops of the configured gateways.
pub fn start(srv: &Arc<ServerShared>, gw: &Arc<Gateway>) {
    for r in &gw.opts.gateways {
        if r.name != gw.name && gw.learn_remote(&r.name, &[]) {
            spawn(srv, gw, &r.name, true);
        }
    }
}

/// Start a dial loop for `name` (the caller won `learn_remote`).
pub fn spawn(srv: &Arc<ServerShared>, gw: &Arc<Gateway>, name: &str, configured: bool) {
    srv.tasks.spawn(dial_loop(
        srv.clone(),
        gw.clone(),
        name.to_string(),
        configured,
    ));
}

async fn dial_loop(srv: Arc<ServerShared>, gw: Arc<Gateway>, name: String, configured: bool) {
    let kind = if configured { "explicit" } else { "implicit" };
    let mut attempts: u32 = 0;
    // `connect_error_reports` until the first connection, `reconnect_error_reports` after.
    let mut connected_before = false;
    let mut next_url = 0usize;
    // As nats-server: the first solicit after a short delay (listeners up, routes formed).
    let mut delay = Duration::from_millis(if configured { 100 } else { 50 });
    let mut backoff = crate::util::backoff::Backoff::new(gw.opts.connect_backoff);
    loop {
        tokio::select! {
            _ = srv.shutdown_signal() => break,
            _ = tokio::time::sleep(delay) => {}
        }
        // Until this attempt connects, the next waits as `connect_backoff` says.
        delay = backoff.failed();
        if gw.is_closed() {
            break;
        }
        let urls = gw
            .remotes()
            .get(&name)
            .map(|r| r.urls.clone())
            .unwrap_or_default();
        if urls.is_empty() {
            break;
        }
        let raw = &urls[next_url % urls.len()];
        next_url += 1;
        attempts += 1;
        let url = match RouteUrl::parse(raw) {
            Ok(u) => u,
            Err(e) => {
                tracing::error!("Gateway {name:?}: {e}");
                if !configured && attempts > gw.opts.connect_retries {
                    break;
                }
                continue;
            }
        };
        let shown = format!("{}:{}", url.host, url.port);
        let report = srv
            .live_opts()
            .report_connect_err(!connected_before, u64::from(attempts));
        let connecting = format!(
            "Connecting to {kind} gateway {name:?} ({shown}) at {shown} (attempt {attempts})"
        );
        if report {
            tracing::info!("{connecting}");
        } else {
            tracing::debug!("{connecting}");
        }
        let addrs = match crate::cluster::discovery::resolve(&url.host, url.port).await {
            Ok(a) => a,
            Err(e) => {
                dial_error(report, &format!(
                    "Error connecting to {kind} gateway {name:?} ({shown}) at {shown} (attempt {attempts}): {e}"
                ));
                if !configured && attempts > gw.opts.connect_retries {
                    break;
                }
                continue;
            }
        };
        let mut stream = None;
        let mut last_err = String::new();
        for a in &addrs {
            match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(a)).await {
                Ok(Ok(s)) => {
                    stream = Some((s, *a));
                    break;
                }
                Ok(Err(e)) => last_err = format!("dial tcp {a}: {e}"),
                Err(_) => last_err = format!("dial tcp {a}: i/o timeout"),
            }
        }
        let Some((s, addr)) = stream else {
            dial_error(report, &format!(
                "Error connecting to {kind} gateway {name:?} ({shown}) at {shown} (attempt {attempts}): {last_err}"
            ));
            if !configured && attempts > gw.opts.connect_retries {
                break;
            }
            continue;
        };
        let sol = Solicit {
            name: name.clone(),
            url,
            configured,
        };
        connected_before = true;
        if super::conn::run(srv.clone(), gw.clone(), s, addr, Some(sol)).await {
            attempts = 0;
            delay = backoff.reset();
        } else if !configured && attempts > gw.opts.connect_retries {
            break;
        }
        if srv.is_shutting_down() {
            break;
        }
    }
    gw.dial_ended(&name);
}

/// A failed gateway dial: an error when `report` (nats-server's `shouldReportConnectErr`),
/// else at debug level.
fn dial_error(report: bool, line: &str) {
    if report {
        tracing::error!("{line}");
    } else {
        tracing::debug!("{line}");
    }
}
