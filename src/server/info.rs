//! The INFO this server sends: to clients (`connect_urls`, the nonce, TLS first) and on
//! routes, and the async INFO clients get when the cluster's membership changes.

use super::{info_line, ServerShared};
use crate::cluster::Cluster;
use crate::config::COMPAT_VERSION;
use crate::conn::Conn;
use std::sync::atomic::Ordering::Relaxed;

impl ServerShared {
    /// This server's client URL (`host:port`) as advertised to clients and peers.
    pub fn own_client_url(&self) -> Option<String> {
        if let Some(a) = &self.opts.client_advertise {
            return Some(a.clone());
        }
        let a = self.client_addr.get()?;
        if a.ip().is_unspecified() {
            return None;
        }
        Some(a.to_string())
    }

    /// Client URLs advertised in INFO `connect_urls`: this server's and its peers' (none
    /// when not clustered, as nats-server).
    pub fn connect_urls(&self) -> Vec<String> {
        let Some(cl) = &self.cluster else {
            return Vec::new();
        };
        if cl.opts.no_advertise {
            return Vec::new();
        }
        // In lame duck mode clients are sent to the other servers only.
        let own = self.own_client_url().filter(|_| !self.is_lame_duck());
        let mut v: Vec<String> = own.into_iter().collect();
        for u in cl.peer_client_urls() {
            if !v.contains(&u) {
                v.push(u);
            }
        }
        v
    }

    /// The set of servers changed: clients that accept async INFO get the new `connect_urls`.
    pub fn cluster_changed(&self) {
        let Some(cl) = &self.cluster else { return };
        if let Some(lf) = &self.leafnodes {
            lf.cluster_changed(self);
        }
        if cl.opts.no_advertise {
            return;
        }
        for c in self.clients() {
            if c.async_info.load(Relaxed) && !c.is_closed() {
                let line = info_line(&self.client_info_json(&c));
                c.out.push_now(line.len(), |b| b.extend_from_slice(&line));
            }
        }
    }

    /// The INFO JSON sent on routes (`nonce` only on the first one).
    pub fn route_info_json(&self, cl: &Cluster, nonce: bool, ip: Option<String>) -> Vec<u8> {
        serde_json::to_vec(&self.route_info(cl, nonce, ip)).unwrap_or_default()
    }

    pub(crate) fn route_info(
        &self,
        cl: &Cluster,
        nonce: bool,
        ip: Option<String>,
    ) -> crate::proto::info::ServerInfo {
        let listen = cl.listen_addr.get().copied();
        let (host, port) = match &cl.opts.advertise {
            Some(a) => match a.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().unwrap_or(0)),
                None => (a.clone(), listen.map_or(0, |l| l.port())),
            },
            None => (cl.opts.host.clone(), listen.map_or(0, |l| l.port())),
        };
        let ip = ip.or_else(|| {
            cl.opts
                .advertise
                .as_ref()
                .map(|_| format!("nats-route://{host}:{port}/"))
        });
        crate::proto::info::ServerInfo {
            server_id: self.id.clone(),
            server_name: self.name.clone(),
            version: COMPAT_VERSION.into(),
            // 3: message tracing (nats-server 2.11+'s `MsgTraceProto`).
            proto: crate::trace::MSG_TRACE_PROTO,
            go: "go1.19.8".into(),
            natsd: crate::config::NATSD_VERSION.into(),
            host,
            port,
            headers: true,
            max_payload: self.live_opts().max_payload as i64,
            nonce: if nonce {
                crate::util::ids::nonce()
            } else {
                String::new()
            },
            cluster: cl.name(),
            cluster_dynamic: cl.is_dynamic(),
            connect_urls: self.own_client_url().into_iter().collect(),
            auth_required: cl.opts.username.is_some() || cl.opts.token.is_some(),
            tls_required: cl.tls.is_some(),
            tls_verify: cl.opts.tls.as_ref().is_some_and(|t| t.verify),
            ip: ip.unwrap_or_default(),
            // nats-server 2.10+: our pool size (pools on), and we read `LS-` with its origin.
            route_pool_size: cl.pool_size().map_or(0, |n| n as u32),
            lnoc: true,
            lnocu: true,
            gateway_url: self
                .gateway
                .as_ref()
                .map(|g| g.own_url())
                .unwrap_or_default(),
            // Our leafnode address for the peers' leaves (nats-server: one URL, none with
            // `leafnodes { no_advertise }`).
            leafnode_urls: self
                .leafnodes
                .as_ref()
                .and_then(|l| l.advertised_url())
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    /// The INFO JSON sent to one client.
    pub fn client_info_json(&self, c: &Conn) -> Vec<u8> {
        serde_json::to_vec(&self.client_info(c)).unwrap_or_default()
    }

    /// The INFO JSON for one client whose `max_payload` is its account's (`limits {}`).
    pub fn client_info_json_with(&self, c: &Conn, max_payload: usize) -> Vec<u8> {
        let mut info = self.client_info(c);
        info.max_payload = max_payload as i64;
        serde_json::to_vec(&info).unwrap_or_default()
    }

    /// The first INFO JSON a client gets, with its `nonce` (when not empty). Sent inside TLS
    /// to a client that started with the handshake (`tls_first`, `handshake_first`):
    /// `tls_required` even with `allow_non_tls`, as nats-server 2.10+.
    pub fn client_hello_json(&self, c: &Conn, nonce: &str, tls_first: bool) -> Vec<u8> {
        let mut info = self.client_info(c);
        info.tls_required |= tls_first;
        info.nonce = nonce.to_string();
        serde_json::to_vec(&info).unwrap_or_default()
    }

    pub(super) fn client_info(&self, c: &Conn) -> crate::proto::info::ServerInfo {
        let port = self.client_addr.get().map(|a| a.port()).unwrap_or(0);
        let live = self.live_opts();
        let tls = live.tls.as_ref();
        crate::proto::info::ServerInfo {
            server_id: self.id.clone(),
            server_name: self.name.clone(),
            version: COMPAT_VERSION.into(),
            proto: 1,
            go: "go1.19.8".into(),
            host: self.opts.host.clone(),
            port,
            headers: true,
            auth_required: self.auth.required(),
            // nats-server 2.9: `tls_required` (and `tls_verify`), or with `allow_non_tls`
            // only `tls_available`.
            tls_required: tls.is_some() && !live.allow_non_tls,
            tls_verify: tls.is_some_and(|t| t.verify) && !live.allow_non_tls,
            tls_available: tls.is_some() && live.allow_non_tls,
            max_payload: live.max_payload as i64,
            client_id: Some(c.cid),
            client_ip: Some(c.addr.ip().to_string()),
            connect_urls: self.connect_urls(),
            jetstream: self.jetstream.get().is_some(),
            xkey: self.keys.xkp.public_key(),
            ..Default::default()
        }
    }
}
