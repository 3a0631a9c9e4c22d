//! The handshake of a leaf connection: a hub authenticates the leaf's CONNECT and tells it
//! its permissions (the INFO with `connect_info`); a leaf answers the hub's INFO with its
//! CONNECT (credentials signed over the hub's nonce) and registers once the hub has
//! accepted it. Compression is negotiated on the way.

use super::*;
use crate::auth::Identity;
use crate::config::AuthCallout;
use crate::proto::info::SubjectPermission as InfoPerm;

/// One direction's permissions: the allow list (None: anything) and the deny list.
type Side<'a> = (Option<&'a [String]>, &'a [String]);

/// A leaf's CONNECT waiting for the auth callout: the callout, and the leaf's raw user.
pub(super) struct Callout {
    ci: LeafConnect,
    cfg: AuthCallout,
    raw: String,
}

/// A leaf that sent its CONNECT and waits for the hub's `connect_info` INFO.
pub(super) struct Pending {
    acc: Arc<Account>,
    id: String,
    name: String,
    version: String,
    domain: String,
}

/// Compiled rules as configuration strings.
fn lists((allow, deny): (Option<&[Bytes]>, &[Bytes])) -> (Option<Vec<String>>, Vec<String>) {
    let s = |v: &[Bytes]| -> Vec<String> {
        v.iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    };
    (allow.map(s), s(deny))
}

/// Compiled rules as an INFO `import`/`export` (None when they restrict nothing).
fn permission(rules: (Option<&[Bytes]>, &[Bytes])) -> Option<InfoPerm> {
    let (allow, deny) = lists(rules);
    let p = InfoPerm {
        allow: allow.unwrap_or_default(),
        deny,
    };
    (!p.allow.is_empty() || !p.deny.is_empty()).then_some(p)
}

impl LeafConn {
    /// Hub side: authenticate, bind the account, register.
    pub(super) fn on_connect(&mut self, json: &[u8]) -> Result<(), CloseReason> {
        if self.solicited() {
            return self.violation("CONNECT on a leafnode connection we dialled");
        }
        if self.link.is_some() {
            return self.violation("second CONNECT");
        }
        let ci: LeafConnect = match serde_json::from_slice(json) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(
                    "{} - Leafnode bad CONNECT JSON, closing: {e}",
                    self.conn.log_prefix()
                );
                self.send_err("Authorization Violation");
                return Err(CloseReason::AuthenticationViolation);
            }
        };
        let host = self.conn.addr.ip();
        let auth = &self.srv.auth;
        let nonce = self.nonce.as_bytes();
        let cert = self.conn.meta().peer_cert.clone();
        let o = &self.lf.opts;
        let who = connect::authenticate(auth, o, &ci, nonce, host, cert.as_deref());
        if let Some((cfg, raw)) = self.callout_for(&ci, who.as_ref()) {
            // nats-server asks the auth service (the read loop waits: `resume`).
            self.callout = Some(Box::new(Callout { ci, cfg, raw }));
            return Ok(());
        }
        let Some(who) = who else {
            return self.refuse(&ci);
        };
        self.connected(ci, who)
    }

    fn refuse(&self, ci: &LeafConnect) -> Result<(), CloseReason> {
        tracing::error!(
            "{} - Leafnode authentication error (user {:?})",
            self.conn.log_prefix(),
            ci.user
        );
        self.send_err("Authorization Violation");
        Err(CloseReason::AuthenticationViolation)
    }

    /// The auth callout this leaf's CONNECT goes to (nats-server: a leaf that logs in as a
    /// client does — the `leafnodes` block has no credentials of its own): the configured
    /// one's, for every leaf but its `auth_users` (`allowed_accounts` does not apply to
    /// leaves); in operator mode its user JWT's account's.
    fn callout_for(
        &self,
        ci: &LeafConnect,
        who: Option<&Identity>,
    ) -> Option<(AuthCallout, String)> {
        let o = &self.lf.opts;
        let own =
            !o.users.is_empty() || o.nkey.is_some() || o.token.is_some() || o.username.is_some();
        if own || !self.srv.auth.required() {
            return None;
        }
        let creds = ci.creds(self.nonce.as_bytes(), self.conn.addr.ip(), None);
        let subject = who.filter(|_| creds.jwt.is_some()).map(|i| i.user.as_str());
        let raw = crate::auth::callout::raw_user(&creds, subject);
        let cfg = match (&self.srv.live_opts().auth_callout, creds.jwt) {
            (Some(cfg), _) => Some(cfg.clone()).filter(|c| !c.auth_users.contains(&raw)),
            (None, Some(token)) => self.srv.auth.jwt_callout(token, &raw),
            (None, None) => None,
        }?;
        Some((cfg, raw))
    }

    /// Ask the auth service about the paused CONNECT; bind the leaf as its answer says.
    pub(super) async fn called_out(&mut self, c: Callout) -> Result<(), CloseReason> {
        let ci = c.ci;
        let connect = crate::auth::callout::connect_opts(&ci);
        let request = crate::auth::callout::Client {
            kind: crate::auth::callout::Kind::Leaf,
            host: self.conn.addr.ip().to_string(),
            cid: self.conn.cid,
            user: c.raw,
            name: ci.name.clone(),
            connect,
            nonce: self.nonce.clone(),
            tls: crate::auth::callout::tls_of(&self.conn, self.lf.opts.tls.as_ref()),
        };
        let timeout = self.srv.live_opts().auth_timeout;
        match crate::auth::callout::call(&self.srv, &c.cfg, request, timeout).await {
            Ok(who) => self.connected(ci, who),
            Err(_) => self.refuse(&ci),
        }
    }

    /// The leaf's credentials are good: bind it to `who`'s account and register.
    fn connected(&mut self, ci: LeafConnect, mut who: Identity) -> Result<(), CloseReason> {
        // Nothing in an auth callout's account may publish requests to the service.
        let in_callout = match &self.srv.live_opts().auth_callout {
            Some(cfg) => cfg.account == who.account,
            None => self.srv.auth.account_has_callout(&who.account),
        };
        if in_callout {
            let p = who.perms.as_deref().cloned().unwrap_or_default();
            who.perms = Some(Arc::new(p.deny_publish(crate::auth::callout::SUBJECT)));
        }
        if who.perms.as_ref().is_some_and(|p| p.responses().is_some()) {
            // nats-server tracks the replies a leaf may send; natsd does not on leaf
            // connections yet: refused plainly rather than cut off at the first reply.
            tracing::error!(
                "{} - Leafnode user {:?} has response permissions (allow_responses / resp), \
                 which natsd does not support on leaf connections yet",
                self.conn.log_prefix(),
                ci.user
            );
            self.send_err("Authorization Violation");
            return Err(CloseReason::AuthenticationViolation);
        }
        let acc_name = who.account.clone();
        let Some(acc) = self.srv.accounts.get(&acc_name) else {
            tracing::error!(
                "{} - Leafnode bound to unknown account {acc_name:?}",
                self.conn.log_prefix()
            );
            self.send_err("Authorization Violation");
            return Err(CloseReason::AuthenticationViolation);
        };
        if let Some(min) = &self.lf.opts.min_version {
            if !connect::version_at_least(&ci.version, min) {
                let text = format!("{} {min:?}", connect::MIN_VERSION_REJECTED);
                tracing::error!(
                    "{} - {text} (leaf version {:?})",
                    self.conn.log_prefix(),
                    ci.version
                );
                self.send_err(&text);
                return Err(CloseReason::MinimumVersionRequired);
            }
        }
        self.conn.headers.store(ci.headers, Relaxed);
        // The user's permissions, from the leaf's side: it may receive what it may
        // subscribe to, and send what it may publish (checked on every message it sends).
        let user = who.perms.as_deref();
        let (allow, mut deny) = user.map_or((None, Vec::new()), |p| lists(p.subscribe_lists()));
        deny.extend(ci.deny_pub.iter().cloned());
        self.set_perms(&acc, (allow.as_deref(), &deny), (None, &[]), &ci.domain);
        self.inbound = who.perms.clone();
        self.expires = crate::util::time::expiry_instant(who.expires);
        if self.negotiated.is_none() {
            // No INFO came: the leaf does not compress; its CONNECT says why.
            self.negotiated = Some(
                CompressionMode::from_info(&ci.compress_mode)
                    .unwrap_or(CompressionMode::NotSupported),
            );
        }
        self.set_meta(&ci.name, &ci.version, &ci.user, &acc);
        // A leaf that declares itself the hub of this connection: we are its spoke.
        self.conn.spoke.store(ci.hub, Relaxed);
        let _ = self
            .conn
            .leaf_cluster
            .set(bytes::Bytes::from(ci.cluster.clone()));
        tracing::info!(
            "{} - Leafnode connection created for account: {} (server {:?})",
            self.conn.log_prefix(),
            acc.name,
            ci.name
        );
        // nats-server's sendPermsAndAccountInfo: the leaf learns its account and permissions
        // before any interest, and finishes connecting on this INFO.
        let mut info = self.lf.hub_info(&self.srv, Some(self.conn.cid));
        info.nonce.clear();
        info.compression.clear();
        info.connect_info = true;
        info.remote_account = acc.name.to_string();
        if let Some(p) = user {
            info.import = permission(p.subscribe_lists());
            info.export = permission(p.publish_lists());
        }
        let mut b = BytesMut::new();
        let _ = info.write_to(&mut b);
        self.send(&b);
        self.register(acc, &ci.server_id, &ci.name)
    }

    /// Leaf side: the hub's first INFO is answered with our CONNECT, then we register; its
    /// `leafnode_urls` (in that INFO and later ones) join the remote's addresses.
    pub(super) fn on_info(&mut self, json: &[u8]) -> Result<(), CloseReason> {
        let info: ServerInfo = match serde_json::from_slice(json) {
            Ok(i) => i,
            Err(e) => {
                tracing::error!(
                    "{} - Leafnode bad INFO JSON, closing: {e}",
                    self.conn.log_prefix()
                );
                return Err(CloseReason::ProtocolViolation);
            }
        };
        let Some(sol) = self.solicit.clone() else {
            // A hub hears one INFO from a leaf, before its CONNECT, and only when the leaf
            // compresses (nats-server 2.10+); any other is ignored.
            if self.negotiated.is_none() && self.link.is_none() {
                self.negotiate(&info)?;
            }
            return Ok(());
        };
        // The first INFO and every update: the hub cluster's addresses to try next time.
        if !info.leafnode_urls.is_empty() {
            sol.discovered.learn(&info.leafnode_urls);
        }
        if self.link.is_some() {
            return Ok(());
        }
        if let Some(p) = self.pending.take() {
            if info.connect_info {
                return self.finish_spoke(p, &info);
            }
            self.pending = Some(p);
            return Ok(());
        }
        if self.nonce.is_empty() {
            self.nonce.clone_from(&info.nonce);
        }
        // The hub's first INFO settles compression; after a switch the hub sends its INFO
        // again (compressed), and that one is answered with CONNECT.
        if self.negotiate(&info)? {
            return Ok(());
        }
        let Some(acc) = self.srv.accounts.get(&sol.account) else {
            tracing::error!(
                "{} - Leafnode remote bound to unknown local account {:?}",
                self.conn.log_prefix(),
                sol.account
            );
            return Err(CloseReason::ProtocolViolation);
        };
        let (user, pass) = (sol.url.user.clone(), sol.url.pass.clone());
        let ci = LeafConnect {
            version: COMPAT_VERSION.into(),
            server_id: self.srv.id.clone(),
            name: self.srv.name.clone(),
            headers: true,
            // As nats-server: a user without a password is a token (sent as both).
            auth_token: match (&user, &pass) {
                (Some(u), None) => u.clone(),
                _ => String::new(),
            },
            user: user.unwrap_or_default(),
            pass: pass.unwrap_or_default(),
            remote_account: acc.name.to_string(),
            deny_pub: sol.deny_imports.clone(),
            domain: super::super::js_domain(&self.srv)
                .unwrap_or_default()
                .to_string(),
            compress_mode: self
                .negotiated
                .unwrap_or(CompressionMode::NotSupported)
                .as_str()
                .to_string(),
            cluster: self
                .srv
                .cluster
                .as_ref()
                .map(|c| c.name().to_string())
                .unwrap_or_default(),
            hub: sol.hub,
            ..Default::default()
        };
        let mut ci = ci;
        if let Err(e) = connect::sign(&sol.creds, self.nonce.as_bytes(), &mut ci) {
            tracing::error!("{} - Leafnode credentials: {e}", self.conn.log_prefix());
            return Err(CloseReason::AuthenticationViolation);
        }
        let body = serde_json::to_vec(&ci).map_err(|_| CloseReason::ProtocolViolation)?;
        let mut line = b"CONNECT ".to_vec();
        line.extend_from_slice(&body);
        line.extend_from_slice(b"\r\n");
        self.send(&line);
        self.conn.headers.store(info.headers, Relaxed);
        let p = Pending {
            acc,
            id: info.server_id.clone(),
            name: info.server_name.clone(),
            version: info.version.clone(),
            domain: info.domain.clone(),
        };
        if info.info_on_connect {
            // The hub tells us our permissions once it has accepted us.
            self.pending = Some(p);
            return Ok(());
        }
        self.finish_spoke(p, &info)
    }

    /// Leaf side, accepted: the hub's permissions for us (INFO `import`, `export`) joined to
    /// our remote's denies, then registered (our interest goes out).
    pub(super) fn finish_spoke(
        &mut self,
        p: Pending,
        info: &ServerInfo,
    ) -> Result<(), CloseReason> {
        let Some(sol) = self.solicit.clone() else {
            return Ok(());
        };
        let side = |perm: &Option<InfoPerm>, own: &[String]| {
            let allow = perm
                .as_ref()
                .map(|p| p.allow.clone())
                .filter(|a| !a.is_empty());
            let mut deny = perm.as_ref().map(|p| p.deny.clone()).unwrap_or_default();
            deny.extend(own.iter().cloned());
            (allow, deny)
        };
        let (pub_allow, pub_deny) = side(&info.export, &sol.deny_exports);
        let (sub_allow, sub_deny) = side(&info.import, &sol.deny_imports);
        self.set_perms(
            &p.acc,
            (pub_allow.as_deref(), &pub_deny),
            (sub_allow.as_deref(), &sub_deny),
            &p.domain,
        );
        self.set_meta(&p.name, &p.version, "", &p.acc);
        let _ = self
            .conn
            .leaf_cluster
            .set(bytes::Bytes::from(info.cluster.clone()));
        tracing::info!(
            "{} - Leafnode connection created for account: {} (hub {:?})",
            self.conn.log_prefix(),
            p.acc.name,
            p.name
        );
        self.register(p.acc, &p.id, &p.name)
    }

    /// Compression, from the peer's INFO (nats-server's `negotiateLeafCompression`). True when
    /// both sides now compress: our INFO went out (a leaf's in clear before its writer
    /// switched, a hub's as the first compressed bytes) and the peer's next bytes are S2.
    pub(super) fn negotiate(&mut self, info: &ServerInfo) -> Result<bool, CloseReason> {
        let remote = (!info.compression.is_empty()).then_some(info.compression.as_str());
        let step = match self.comp.on_info(remote, self.started.elapsed()) {
            Ok(s) => s,
            Err(text) => {
                tracing::error!("{} - Leafnode {text}", self.conn.log_prefix());
                self.send_err(&text);
                return Err(CloseReason::ProtocolViolation);
            }
        };
        match step {
            InfoStep::Switch {
                mode,
                level,
                info_mode,
                info_in_clear,
            } => {
                tracing::debug!(
                    "{} - Leafnode compression negotiated: {mode}",
                    self.conn.log_prefix()
                );
                self.negotiated = Some(mode);
                let mut ours = self.lf.hub_info(&self.srv, Some(self.conn.cid));
                ours.compression = info_mode.as_str().to_string();
                ours.nonce.clone_from(&self.nonce);
                if self.solicited() {
                    ours.nonce.clear();
                }
                let mut b = BytesMut::new();
                let _ = ours.write_to(&mut b);
                self.conn
                    .out
                    .switch_around(level, info_in_clear, || self.send(&b));
                self.switch_reader = true;
                Ok(true)
            }
            InfoStep::Plain { mode, .. } => {
                self.negotiated = Some(mode);
                Ok(false)
            }
            InfoStep::AfterSwitch { .. } | InfoStep::Later => Ok(false),
        }
    }

    /// The link's permissions (`perms.rs`), before it registers.
    pub(super) fn set_perms(
        &self,
        acc: &Account,
        publish: Side<'_>,
        subscribe: Side<'_>,
        remote: &str,
    ) {
        let p = perms::LinkPerms {
            allow_pub: publish.0,
            deny_pub: publish.1,
            allow_sub: subscribe.0,
            deny_sub: subscribe.1,
            system: *acc.name == *self.srv.system_account_name(),
            domain: super::super::js_domain(&self.srv),
            remote_domain: remote,
        };
        let _ = self.conn.leaf_perms.set(p.compile());
    }

    pub(super) fn set_meta(&self, name: &str, version: &str, user: &str, acc: &Account) {
        let mut m = self.conn.meta();
        m.name = name.to_string();
        m.version = version.to_string();
        m.user = user.to_string();
        m.account = acc.name.to_string();
    }

    /// Count the link in its account (refused past the account's `max_leafnodes`, counted
    /// across the cluster as nats-server's `MaxTotalLeafNodesReached`), then register it.
    pub(super) fn register(
        &mut self,
        acc: Arc<Account>,
        id: &str,
        name: &str,
    ) -> Result<(), CloseReason> {
        let max = self
            .srv
            .live_opts()
            .account_limits
            .get(&acc.name)
            .map_or(-1, |l| l.max_leafnodes);
        let before = acc.num_leafs.fetch_add(1, Relaxed) + acc.remote_leafs.load(Relaxed);
        if usize::try_from(max).is_ok_and(|max| before >= max) {
            acc.num_leafs.fetch_sub(1, Relaxed);
            let text = crate::client::errs::MAX_ACCOUNT_CONNECTIONS;
            tracing::error!("{} - {text}", self.conn.log_prefix());
            self.send_err(text);
            return Err(CloseReason::MaxAccountConnectionsExceeded);
        }
        crate::sys::conns::changed(&self.srv, &acc.name);
        let link = Arc::new(Link::new(self.conn.clone(), acc, self.spoke(), id, name));
        *link.compression.lock().unwrap_or_else(|e| e.into_inner()) =
            self.negotiated.unwrap_or(CompressionMode::NotSupported);
        self.lf.register(&link);
        self.link = Some(link);
        self.next_ping = Instant::now() + Duration::from_secs(1);
        Ok(())
    }
}
