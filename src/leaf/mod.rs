//! Leafnodes (issue 18): the third server-to-server link. A leaf connection is bound to one
//! account on each side; interest travels as `LS+ subj [queue weight]` / `LS- subj [queue]`,
//! messages as `LMSG` / `HMSG` without an account. This server is the hub of the leaves that
//! dial its leafnode port, and a leaf (a "spoke") of the hubs in `leafnodes { remotes }`.
//!
//! This file: the shared state (listener address, the registry of leaf links by account,
//! loop detection subject), the hub's INFO with the cluster's `leafnode_urls` (its own
//! leafnode address and every route peer's, re-sent to its leaves when that set changes), the
//! accept loop and the remote dialers. The interest every link is told is `interest.rs`, TLS
//! and the INFO around it `open.rs`, the session `conn.rs`.

mod conn;
mod connect;
mod interest;
pub mod monitor;
mod open;
mod perms;
mod remote;

pub(crate) use connect::version;
pub use interest::Src;
pub use remote::RemoteUrl;

use crate::compress::CompressionMode;
use crate::config::leaf::LeafOpts;
use crate::config::COMPAT_VERSION;
use crate::proto::info::ServerInfo;
use crate::server::ServerShared;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// This server's JetStream domain, when its JetStream runs with one (JetStream starts before
/// the leafnode listener and remotes).
fn js_domain(srv: &ServerShared) -> Option<&str> {
    srv.jetstream.get()?.config.domain.as_deref()
}

/// Leafnode state of a server with a `leafnodes {}` block.
pub struct Leafnodes {
    pub opts: LeafOpts,
    pub listen_addr: OnceLock<SocketAddr>,
    /// Registered leaf connections (both roles).
    links: RwLock<Vec<Arc<interest::Link>>>,
    /// Our loop detection subject (`$LDS.<random>`), sent to every link: seeing it come back
    /// from a leaf means a loop.
    lds: String,
    /// The `leafnode_urls` our leaves were last told.
    urls_told: Mutex<Vec<String>>,
    /// The listener's TLS (set when it binds).
    hub_tls: OnceLock<open::HubTls>,
}

impl Leafnodes {
    pub fn new(opts: LeafOpts) -> Self {
        Leafnodes {
            opts,
            listen_addr: OnceLock::new(),
            links: RwLock::new(Vec::new()),
            lds: format!("$LDS.{}", crate::util::ids::alnum(22)),
            urls_told: Mutex::new(Vec::new()),
            hub_tls: OnceLock::new(),
        }
    }

    /// The registered links, for monitoring.
    pub fn links(&self) -> Vec<Arc<interest::Link>> {
        self.links.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `host:port` leaves are told to dial (INFO `leafnode_urls`).
    pub fn advertised_url(&self) -> Option<String> {
        if self.opts.no_advertise {
            return None;
        }
        if let Some(a) = &self.opts.advertise {
            return Some(a.clone());
        }
        let a = self.listen_addr.get()?;
        let host = if a.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            a.ip().to_string()
        };
        Some(format!("{host}:{}", a.port()))
    }

    /// INFO `leafnode_urls`: our advertised address (unless `no_advertise`) and those of our
    /// route peers (each peer's route INFO carries its own, unless it has `no_advertise`).
    pub fn leafnode_urls(&self, srv: &ServerShared) -> Vec<String> {
        let mut v: Vec<String> = self.advertised_url().into_iter().collect();
        if let Some(cl) = &srv.cluster {
            for u in cl.peer_leafnode_urls() {
                if !v.contains(&u) {
                    v.push(u);
                }
            }
        }
        v
    }

    /// Our INFO as a hub: to a new leaf (`cid` and a nonce), or an update to the registered
    /// ones (`None`).
    pub(crate) fn hub_info(&self, srv: &ServerShared, cid: Option<u64>) -> ServerInfo {
        let (host, port) = match self.listen_addr.get() {
            Some(a) => (a.ip().to_string(), a.port()),
            None => (String::new(), 0),
        };
        ServerInfo {
            server_id: srv.id.clone(),
            server_name: srv.name.clone(),
            version: COMPAT_VERSION.into(),
            proto: 1,
            host,
            port,
            headers: true,
            // As nats-server: a leaf always sends CONNECT.
            auth_required: true,
            tls_required: self.opts.tls.is_some(),
            tls_verify: self.opts.tls.as_ref().is_some_and(|t| t.verify),
            max_payload: srv.live_opts().max_payload as i64,
            client_id: cid,
            nonce: if cid.is_some() {
                crate::util::ids::nonce()
            } else {
                String::new()
            },
            leafnode_urls: self.leafnode_urls(srv),
            domain: js_domain(srv).unwrap_or_default().to_string(),
            // The leaf finishes connecting on the INFO that follows its CONNECT (with its
            // account and permissions), as nats-server's hubs do.
            info_on_connect: true,
            // A new leaf hears our mode (nats-server: not "not supported", never in updates).
            compression: match self.opts.compression.mode {
                m if cid.is_none() || m == CompressionMode::NotSupported => String::new(),
                m => m.as_str().to_string(),
            },
            ..Default::default()
        }
    }

    /// The cluster changed (a route peer came or went, or its INFO changed): when the set of
    /// `leafnode_urls` is not what our leaves were told, every leaf we are the hub of gets
    /// an INFO with the new set (as nats-server's async leafnode INFO).
    pub fn cluster_changed(&self, srv: &ServerShared) {
        // A server going down loses its routes first: telling its leaves that its peers are
        // gone would leave them nothing but this server to reconnect to (nats-server skips
        // it too).
        if srv.is_shutting_down() {
            return;
        }
        let urls = self.leafnode_urls(srv);
        {
            let mut told = self.urls_told.lock().unwrap_or_else(|e| e.into_inner());
            if *told == urls {
                return;
            }
            told.clone_from(&urls);
        }
        let info = ServerInfo {
            leafnode_urls: urls,
            ..self.hub_info(srv, None)
        };
        let mut line = bytes::BytesMut::new();
        if info.write_to(&mut line).is_err() {
            return;
        }
        for l in self.links().iter().filter(|l| !l.spoke) {
            tracing::debug!(
                "{} - Leafnode sending updated leafnode_urls",
                l.conn.log_prefix()
            );
            l.conn
                .out
                .push_now(line.len(), |b| b.extend_from_slice(&line));
        }
    }
}

/// Bind the leafnode port (when one is configured) and start dialling the remotes.
pub async fn start(srv: &Arc<ServerShared>, lf: &Arc<Leafnodes>) -> std::io::Result<()> {
    if let Some(port) = lf.opts.port {
        if let Some(t) = &lf.opts.tls {
            let t = open::HubTls::new(t)
                .map_err(|e| std::io::Error::other(format!("leafnode tls: {e}")))?;
            let _ = lf.hub_tls.set(t);
        }
        let host = lf.opts.host.as_str();
        let l = crate::util::net::listen((host, port)).await.map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("can't listen for leafnode connections on {host}:{port}: {e}"),
            )
        })?;
        let addr = l.local_addr()?;
        let _ = lf.listen_addr.set(addr);
        tracing::info!("Listening for leafnode connections on {addr}");
        if let Some(t) = lf.hub_tls.get() {
            let first = if t.first {
                " (TLS handshake first)"
            } else {
                ""
            };
            tracing::info!("TLS required for leafnode connections{first}");
        }
        let (s, f) = (srv.clone(), lf.clone());
        srv.tasks.spawn(async move {
            let stop = s.shutdown_signal();
            crate::conn::accept::run(l, "Leafnode", stop, |stream, addr| {
                tracing::info!("{addr} - lid:? - Leafnode connection accepted");
                let run = conn::run(s.clone(), f.clone(), stream, addr, None);
                s.tasks.spawn(run);
            })
            .await
        });
    }
    for (i, r) in lf.opts.remotes.iter().enumerate() {
        if r.disabled {
            tracing::info!("Leafnode remote {i} is disabled: not dialling it");
            continue;
        }
        srv.tasks
            .spawn(remote::dial_loop(srv.clone(), lf.clone(), i, r.clone()));
    }
    Ok(())
}
