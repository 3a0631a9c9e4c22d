//! The gateway handshake: CONNECT (inbound, with its credentials) and INFO in both
//! directions, which register the connection as outbound or inbound (and, inbound, send the
//! interest dump); gateway URLs learned from INFO.

use super::*;

impl GwConn {
    pub(super) fn auth_ok(&self, ci: &RouteConnectInfo) -> bool {
        let o = &self.gw.opts;
        // nats-server: with mapping or known URLs, the certificate decides; CONNECT
        // credentials are not looked at.
        let cert = self.conn.meta().peer_cert.clone();
        let urls = o.gateways.iter().flat_map(|g| &g.urls);
        let user = o.username.as_deref();
        if let Some(ok) =
            crate::tls::peer_cert_authorized(o.tls.as_ref(), cert.as_deref(), user, urls)
        {
            return ok;
        }
        let (t, u, p) = (
            o.token.as_deref(),
            o.username.as_deref(),
            o.password.as_deref(),
        );
        crate::auth::peer_credentials_ok(t, u, p, &ci.user, &ci.pass)
    }

    pub(super) fn on_connect(&mut self, json: &[u8]) -> Result<(), CloseReason> {
        if self.solicit.is_some() {
            return self.violation("CONNECT received on an outbound gateway");
        }
        if !self.remote_name.is_empty() {
            return self.violation("second CONNECT");
        }
        let ci: RouteConnectInfo = match serde_json::from_slice(json) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{} - bad gateway CONNECT: {e}", self.conn.log_prefix());
                return Err(CloseReason::ProtocolViolation);
            }
        };
        if ci.gateway.is_empty() {
            tracing::error!(
                "{} - Client or route connected to the gateway port, closing",
                self.conn.log_prefix()
            );
            // nats-server's ErrClientOrRouteConnectedToGatewayPort.
            self.send_err("attempted to connect to gateway port");
            return Err(CloseReason::WrongPort);
        }
        if !self.auth_ok(&ci) {
            tracing::error!("{} - Gateway authentication error", self.conn.log_prefix());
            self.send_err("Authorization Violation");
            return Err(CloseReason::AuthenticationViolation);
        }
        if ci.gateway == self.gw.name {
            tracing::error!(
                "{} - Gateway {:?} has our own name, closing",
                self.conn.log_prefix(),
                ci.gateway
            );
            self.send_err("Wrong Gateway");
            return Err(CloseReason::WrongGateway);
        }
        if self.gw.opts.reject_unknown && !self.gw.is_configured(&ci.gateway) {
            tracing::error!(
                "{} - Rejecting connection from unknown gateway {:?}",
                self.conn.log_prefix(),
                ci.gateway
            );
            self.send_err(&format!(
                "Connection to gateway {:?} rejected",
                self.gw.name
            ));
            return Err(CloseReason::WrongGateway);
        }
        self.remote_name = ci.gateway;
        Ok(())
    }

    pub(super) fn on_info(&mut self, json: &[u8]) -> Result<(), CloseReason> {
        let info: ServerInfo = match serde_json::from_slice(json) {
            Ok(i) => i,
            Err(e) => {
                tracing::error!("{} - bad gateway INFO: {e}", self.conn.log_prefix());
                return Err(CloseReason::ProtocolViolation);
            }
        };
        if let Some(out) = self.out.clone() {
            return self.outbound_info(&out, info);
        }
        if self.inb.is_some() {
            // Updates of the peer's cluster URLs: remember them for implicit dials.
            if info.gateway == self.remote_name {
                self.learn(&info);
            }
            return Ok(());
        }
        match self.solicit.clone() {
            Some(s) => self.register_outbound(&s, info),
            None => self.register_inbound(info),
        }
    }

    pub(super) fn learn(&self, info: &ServerInfo) {
        let mut urls: Vec<String> = info.gateway_urls.clone();
        if !info.gateway_url.is_empty() && !urls.contains(&info.gateway_url) {
            urls.push(info.gateway_url.clone());
        }
        if self.gw.learn_remote(&info.gateway, &urls) {
            super::super::new_remote(&self.srv, &self.gw, &info.gateway);
        }
    }

    pub(super) fn register_outbound(
        &mut self,
        s: &Solicit,
        info: ServerInfo,
    ) -> Result<(), CloseReason> {
        if info.gateway.is_empty() {
            tracing::error!(
                "{} - Attempted to connect to a non-gateway port ({})",
                self.conn.log_prefix(),
                s.url
            );
            return Err(CloseReason::WrongPort);
        }
        if info.gateway != s.name {
            tracing::error!(
                "{} - Connecting to {:?} but found gateway {:?}, closing",
                self.conn.log_prefix(),
                s.name,
                info.gateway
            );
            self.send_err(&format!(
                "Wrong Gateway: expected {:?}, got {:?}",
                s.name, info.gateway
            ));
            return Err(CloseReason::WrongGateway);
        }
        if info.server_id.is_empty() || info.server_id == self.srv.id {
            return self.violation("gateway INFO without a usable server_id");
        }
        let ci = RouteConnectInfo {
            echo: false,
            verbose: false,
            pedantic: false,
            user: s.url.user.clone().unwrap_or_default(),
            pass: s.url.pass.clone().unwrap_or_default(),
            tls_required: self.gw.tls.dial_for(&s.name).is_some(),
            headers: false,
            name: self.srv.id.clone(),
            cluster: String::new(),
            gateway: self.gw.name.clone(),
            ..Default::default()
        };
        let connect = serde_json::to_vec(&ci).unwrap_or_default();
        let mut line = BytesMut::with_capacity(connect.len() + 512);
        encode::write_connect(&mut line, &connect);
        let _ = gateway_info(&self.srv, &self.gw).write_to(&mut line);
        self.send(&line);
        self.conn.headers.store(info.headers, Relaxed);
        self.conn.meta().name = info.server_id.clone();
        crate::trace::set_peer(&self.conn, &info.server_name, info.proto);
        let out = Arc::new(Outbound {
            conn: self.conn.clone(),
            name: info.gateway.clone(),
            remote_id: info.server_id.clone(),
            remote_server_name: info.server_name.clone(),
            configured: s.configured,
            cluster_hash: reply::hash6(info.gateway.as_bytes()),
            interest: OutInterest::new(info.gateway_iom),
            start: SystemTime::now(),
        });
        if !self.gw.register_outbound(&out) {
            tracing::debug!(
                "{} - Outbound gateway to {:?} exists already, closing",
                self.conn.log_prefix(),
                out.name
            );
            return Err(CloseReason::ClientClosed);
        }
        self.learn(&info);
        tracing::info!(
            "{} - Outbound gateway connection to {:?} ({}) registered",
            self.conn.log_prefix(),
            out.name,
            out.remote_id
        );
        self.out = Some(out);
        self.next_ping = Instant::now() + FIRST_PING;
        Ok(())
    }

    /// INFO on a registered outbound: gossip of another gateway (cmd 1), interest mode
    /// switches (cmd 2/3), or an update of the peer's URLs.
    pub(super) fn outbound_info(
        &mut self,
        out: &Outbound,
        info: ServerInfo,
    ) -> Result<(), CloseReason> {
        match info.gateway_cmd {
            0 => {
                if info.gateway == out.name {
                    self.learn(&info);
                }
                Ok(())
            }
            1 => {
                if info.gateway != self.gw.name {
                    self.learn(&info);
                }
                Ok(())
            }
            2 | 3 => {
                let Some(acc) = b64_decode(&info.gateway_cmd_payload)
                    .and_then(|b| String::from_utf8(b).ok())
                    .filter(|a| !a.is_empty() && !a.contains(char::is_whitespace))
                else {
                    return self.violation(&format!(
                        "bad gateway_cmd_payload {:?}",
                        info.gateway_cmd_payload
                    ));
                };
                out.interest.switch(&acc, info.gateway_cmd == 3);
                if info.gateway_cmd == 3 {
                    tracing::debug!(
                        "{} - Gateway {:?} switched account {acc:?} to Interest-Only",
                        self.conn.log_prefix(),
                        out.name
                    );
                }
                Ok(())
            }
            n => {
                tracing::debug!(
                    "{} - Unknown gateway_cmd {n}, ignored",
                    self.conn.log_prefix()
                );
                Ok(())
            }
        }
    }

    pub(super) fn register_inbound(&mut self, info: ServerInfo) -> Result<(), CloseReason> {
        if info.gateway != self.remote_name {
            tracing::error!(
                "{} - Gateway INFO names {:?} but CONNECT said {:?}, closing",
                self.conn.log_prefix(),
                info.gateway,
                self.remote_name
            );
            return Err(CloseReason::WrongGateway);
        }
        if info.server_id.is_empty() {
            return self.violation("gateway INFO without server_id");
        }
        self.conn.headers.store(info.headers, Relaxed);
        self.conn.meta().name = info.server_id.clone();
        crate::trace::set_peer(&self.conn, &info.server_name, info.proto);
        let inb = Arc::new(Inbound {
            conn: self.conn.clone(),
            name: info.gateway.clone(),
            remote_id: info.server_id.clone(),
            remote_server_name: info.server_name.clone(),
            configured: self.gw.is_configured(&info.gateway),
            start: SystemTime::now(),
        });
        let accounts: Vec<String> = self
            .srv
            .accounts
            .all()
            .iter()
            .map(|a| a.name.clone())
            .collect();
        if !self.gw.register_inbound(&inb, &accounts) {
            return Err(CloseReason::ServerShutdown);
        }
        tracing::info!(
            "{} - Inbound gateway connection from {:?} ({}) registered",
            self.conn.log_prefix(),
            inb.name,
            inb.remote_id
        );
        // Tell it about the other gateways we know (it may dial them: implicit gateways):
        // neither its own cluster nor ours (a gossip naming the receiver's outbound peer is
        // an "unknown command 1" to nats-server).
        for (name, r) in self.gw.remotes() {
            if name == inb.name || name == self.gw.name || r.urls.is_empty() {
                continue;
            }
            let g = ServerInfo {
                server_id: self.srv.id.clone(),
                gateway: name,
                gateway_urls: r.urls.iter().map(|u| url_host(u)).collect(),
                gateway_cmd: 1,
                ..Default::default()
            };
            self.send(&info_bytes(&g));
        }
        self.learn(&info);
        self.inb = Some(inb);
        self.next_ping = Instant::now() + FIRST_PING;
        Ok(())
    }
}
