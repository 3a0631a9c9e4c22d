//! CONNECT: its options, authentication, the account and permissions it binds the client to.

use super::*;
use crate::auth::nonempty;
use crate::config::AuthCallout;

impl Client {
    pub(super) fn on_connect(&mut self, json: &[u8]) -> Flow {
        // Bad JSON closes without an -ERR, as nats-server does; the reason goes to the log.
        let ci = match self.connect_info(json) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!("{} - {e}", self.conn.log_prefix());
                return Flow::Close(CloseReason::ProtocolViolation);
            }
        };
        if !(0..=1).contains(&ci.protocol) {
            self.send_err(errs::INVALID_PROTOCOL);
            tracing::error!("{} - invalid client protocol", self.conn.log_prefix());
            return Flow::Close(CloseReason::BadClientProtocolVersion);
        }
        if self.connected {
            // nats-server tolerates a second CONNECT; options are updated, identity is not.
            self.verbose = ci.verbose;
            self.pedantic = ci.pedantic;
            self.send_ok();
            return Flow::Continue;
        }
        let cert = self.conn.meta().peer_cert.clone();
        let creds = self.creds_of(&ci, cert.as_deref());
        let authed = self.srv.auth.authenticate(creds);
        // A JWT user's name for the callout is its key once its JWT checked out.
        let subject = authed.as_ref().filter(|_| creds.jwt.is_some());
        let raw = crate::auth::callout::raw_user(&creds, subject.map(|i| i.user.as_str()));
        // In operator mode the callout is the user JWT's account's, if its JWT has one.
        let callout = match (&self.opts.auth_callout, creds.jwt) {
            (Some(cfg), _) => Some(cfg.clone())
                .filter(|cfg| crate::auth::callout::wanted(cfg, authed.as_ref(), &raw)),
            (None, Some(token)) => self.srv.auth.jwt_callout(token, &raw),
            (None, None) => None,
        };
        if let Some(cfg) = callout.filter(|_| !self.wait.called_out) {
            // nats-server asks the auth service, then admits or refuses.
            self.wait.pending = Some((json.to_vec(), Pending::Callout(Box::new((cfg, raw)))));
            return Flow::Pause;
        }
        let Some(id) = authed else {
            if let Some(key) = self.fetchable(creds.jwt) {
                // nats-server fetches an account its resolver lacks, then authenticates.
                self.wait.pending = Some((json.to_vec(), Pending::Fetch(key)));
                return Flow::Pause;
            }
            return self.refuse(&ci);
        };
        self.admit(&ci, id, true)
    }

    /// The CONNECT's options; in operator mode, a client without a user JWT presents the
    /// `default_sentinel` (nats-server substitutes it before authenticating).
    fn connect_info(&self, json: &[u8]) -> Result<ConnectInfo, serde_json::Error> {
        let mut ci = ConnectInfo::from_json(json)?;
        if let Some(s) = self
            .opts
            .operator
            .as_ref()
            .and_then(|o| o.default_sentinel.as_ref())
        {
            if ci.jwt.is_empty() {
                ci.jwt = s.clone();
            }
        }
        Ok(ci)
    }

    /// The CONNECT's credentials, with this connection's nonce, address and certificate.
    fn creds_of<'a>(
        &'a self,
        ci: &'a ConnectInfo,
        cert: Option<&'a crate::tls::cert::PeerCert>,
    ) -> Credentials<'a> {
        Credentials {
            user: nonempty(&ci.user),
            pass: nonempty(&ci.pass),
            token: nonempty(&ci.auth_token),
            nkey: nonempty(&ci.nkey),
            sig: nonempty(&ci.sig),
            nonce: self.nonce.as_bytes(),
            jwt: nonempty(&ci.jwt),
            host: Some(self.conn.addr.ip()),
            leaf: false,
            cert,
        }
    }

    /// `-ERR 'Authorization Violation'` and close, logged as nats-server does.
    fn refuse(&mut self, ci: &ConnectInfo) -> Flow {
        let creds = self.creds_of(ci, None);
        // As nats-server 2.15: the failed connection keeps the user it claimed (an
        // nkey before a name), for `/connz?state=closed&auth=1`.
        let claimed = creds.nkey.or(creds.user);
        match (creds.nkey, creds.user) {
            (Some(k), _) => tracing::error!(
                "{} - authentication error - Nkey {k:?}",
                self.conn.log_prefix()
            ),
            (None, Some(u)) => tracing::error!(
                "{} - authentication error - User {u:?}",
                self.conn.log_prefix()
            ),
            (None, None) => {
                tracing::error!("{} - authentication error", self.conn.log_prefix())
            }
        }
        if let Some(u) = claimed {
            self.conn.meta().user = u.to_string();
        }
        self.send_err(errs::AUTH_VIOLATION);
        Flow::Close(CloseReason::AuthenticationViolation)
    }

    /// Bind the client to the account and permissions `id` gives. `recheck`: the
    /// credentials are kept so a config reload checks them again (not for a user the auth
    /// service admitted, whom the configuration does not know).
    fn admit(&mut self, ci: &ConnectInfo, mut id: crate::auth::Identity, recheck: bool) -> Flow {
        // Nobody in the callout account may publish requests to the service: the configured
        // one's, the one that admitted this client, or (operator mode) the client's own
        // account when its JWT enables a callout.
        let callout_account = match (&self.opts.auth_callout, &self.wait.callout_account) {
            (Some(cfg), _) => Some(cfg.account.as_str()),
            (None, Some(a)) => Some(a.as_str()),
            (None, None) => self
                .srv
                .auth
                .account_has_callout(&id.account)
                .then_some(id.account.as_str()),
        };
        if callout_account == Some(id.account.as_str()) {
            let p = id.perms.as_deref().cloned().unwrap_or_default();
            id.perms = Some(Arc::new(p.deny_publish(crate::auth::callout::SUBJECT)));
        }
        let Some(acc) = self.srv.accounts.get(&id.account) else {
            self.send_err(errs::AUTH_VIOLATION);
            return Flow::Close(CloseReason::AuthenticationViolation);
        };
        if ci.no_responders && !ci.headers {
            self.send_err(errs::NO_RESPONDERS_NEEDS_HEADERS);
            tracing::error!(
                "{} - {}",
                self.conn.log_prefix(),
                errs::NO_RESPONDERS_NEEDS_HEADERS
            );
            return Flow::Close(CloseReason::ProtocolViolation);
        }
        self.verbose = ci.verbose;
        self.pedantic = ci.pedantic;
        self.echo = ci.echo;
        self.headers = ci.headers;
        self.no_responders = ci.no_responders;
        self.conn.headers.store(ci.headers, Relaxed);
        self.conn.async_info.store(ci.protocol >= 1, Relaxed);
        if let Some(p) = &id.perms {
            if let Some(r) = p.responses() {
                let _ = self
                    .conn
                    .responses
                    .set(crate::auth::responses::Responses::new(r, p.clone()));
            }
        }
        self.perms = id.perms;
        self.expires_at = crate::util::time::expiry_instant(id.expires);
        self.jwt_limits = id.jwt_limits;
        let cert = self.conn.meta().peer_cert.clone();
        self.creds =
            recheck.then(|| StoredCreds::new(&self.creds_of(ci, cert.as_deref()), cert.clone()));
        // The account's `limits { max_connections }`, counted across the cluster: this
        // server's clients and what the others last said (`sys/conns.rs`).
        let max_conns = self
            .opts
            .account_limits
            .get(&acc.name)
            .map_or(-1, |l| l.max_connections);
        let before = acc.num_conns.fetch_add(1, Relaxed) + acc.remote_conns.load(Relaxed);
        if usize::try_from(max_conns).is_ok_and(|max| before >= max) {
            acc.num_conns.fetch_sub(1, Relaxed);
            self.send_err(errs::MAX_ACCOUNT_CONNECTIONS);
            tracing::error!(
                "{} - {}",
                self.conn.log_prefix(),
                errs::MAX_ACCOUNT_CONNECTIONS
            );
            return Flow::Close(CloseReason::MaxAccountConnectionsExceeded);
        }
        self.acc = acc;
        self.conns_changed();
        self.apply_limits();
        if self.max_subs == Some(0) {
            // At its subscription limit before any SUB (a JWT user without `subs`, a limit
            // of 0): nats-server says so and closes the client.
            self.acc.num_conns.fetch_sub(1, Relaxed);
            self.conns_changed();
            self.send_err(errs::MAX_SUBS);
            tracing::error!("{} - {}", self.conn.log_prefix(), errs::MAX_SUBS);
            return Flow::Close(CloseReason::MaxSubscriptionsExceeded);
        }
        {
            let mut m = self.conn.meta();
            m.name = ci.name.clone();
            m.lang = ci.lang.clone();
            m.version = ci.version.clone();
            m.user = id.user;
            m.account = self.acc.name.clone();
            m.permissions = self.perms.as_ref().map(|p| Arc::new(p.public_json()));
            m.expires = id.expires;
            m.name_tag = id.name_tag;
        }
        self.connected = true;
        // nats-server re-arms the ping timer at CONNECT to measure RTT soon.
        let first = self.opts.ping_interval.min(Duration::from_secs(2));
        let jitter = first.mul_f64(self.fan.rng.random_range(0.0..0.2));
        self.next_ping = Instant::now() + first + jitter;
        self.send_ok();
        Flow::Continue
    }

    /// Tell the other servers this account's client count changed (`sys/conns.rs`; never
    /// for `$G`, as nats-server).
    pub(super) fn conns_changed(&self) {
        crate::sys::conns::changed(&self.srv, &self.acc.name);
    }

    /// The account of user JWT `jwt`, when the full resolver lacks it and this CONNECT has
    /// not waited for a fetch yet.
    fn fetchable(&self, jwt: Option<&str>) -> Option<String> {
        if self.wait.fetched {
            return None;
        }
        let u = crate::jwt::decode(jwt?, crate::jwt::Kind::User).ok()?;
        let key = u.account().to_string();
        crate::sys::resolver::may_fetch(&self.srv, &key).then_some(key)
    }

    /// The CONNECT that paused: fetch its account and authenticate again, or take the auth
    /// service's answer.
    pub(super) async fn connect_resumed(&mut self) -> Flow {
        let Some((json, why)) = self.wait.pending.take() else {
            return Flow::Continue;
        };
        match why {
            Pending::Fetch(key) => {
                self.wait.fetched = true;
                crate::sys::resolver::fetch(&self.srv, &key).await;
                self.on_connect(&json)
            }
            Pending::Callout(c) => {
                self.wait.called_out = true;
                let (cfg, raw) = *c;
                self.called_out(&json, cfg, raw).await
            }
        }
    }

    /// Ask the auth service about this CONNECT; admit the user its answer names.
    async fn called_out(&mut self, json: &[u8], cfg: AuthCallout, user: String) -> Flow {
        let Ok(ci) = self.connect_info(json) else {
            return Flow::Close(CloseReason::ProtocolViolation);
        };
        let connect = crate::auth::callout::connect_opts(&ci);
        let tls = crate::auth::callout::tls_of(&self.conn, self.opts.tls.as_ref());
        let request = crate::auth::callout::Client {
            kind: crate::auth::callout::Kind::Client,
            tls,
            host: self.conn.addr.ip().to_string(),
            cid: self.conn.cid,
            user,
            name: ci.name.clone(),
            connect,
            nonce: self.nonce.clone(),
        };
        let timeout = self.opts.auth_timeout;
        match crate::auth::callout::call(&self.srv, &cfg, request, timeout).await {
            Ok(id) => {
                self.wait.callout_account = Some(cfg.account);
                self.admit(&ci, id, false)
            }
            Err(_) => self.refuse(&ci),
        }
    }

    /// CONNECT bound the client to an account with its own limits: the parser follows.
    pub(super) fn take_limits(&mut self, parser: &mut Parser) {
        if self.limits_changed {
            parser.set_limits(self.parser_limits());
            self.limits_changed = false;
        }
    }
}

/// A CONNECT that paused, and whether it already waited once for each reason.
#[derive(Default)]
pub(super) struct Waiting {
    pending: Option<(Vec<u8>, Pending)>,
    fetched: bool,
    called_out: bool,
    /// The account of the auth callout that admitted the client.
    callout_account: Option<String>,
}

/// What a paused CONNECT waits for.
enum Pending {
    /// Its account's JWT, fetched from the other servers.
    Fetch(String),
    /// The auth service's answer: the callout asked, and the client's raw user name.
    Callout(Box<(AuthCallout, String)>),
}

/// Credentials a client presented, owned (the signature and nonce too, so that a reload
/// re-checks an nkey user without asking it again).
pub(super) struct StoredCreds {
    pub(super) user: Option<String>,
    pass: Option<String>,
    token: Option<String>,
    nkey: Option<String>,
    sig: Option<String>,
    nonce: String,
    pub(super) jwt: Option<String>,
    host: Option<std::net::IpAddr>,
    cert: Option<Arc<crate::tls::cert::PeerCert>>,
}

impl StoredCreds {
    fn new(c: &Credentials<'_>, cert: Option<Arc<crate::tls::cert::PeerCert>>) -> Self {
        StoredCreds {
            user: c.user.map(str::to_string),
            pass: c.pass.map(str::to_string),
            token: c.token.map(str::to_string),
            nkey: c.nkey.map(str::to_string),
            sig: c.sig.map(str::to_string),
            nonce: String::from_utf8_lossy(c.nonce).into_owned(),
            jwt: c.jwt.map(str::to_string),
            host: c.host,
            cert,
        }
    }

    pub(super) fn as_creds(&self) -> Credentials<'_> {
        Credentials {
            user: self.user.as_deref(),
            pass: self.pass.as_deref(),
            token: self.token.as_deref(),
            nkey: self.nkey.as_deref(),
            sig: self.sig.as_deref(),
            nonce: self.nonce.as_bytes(),
            jwt: self.jwt.as_deref(),
            host: self.host,
            leaf: false,
            cert: self.cert.as_deref(),
        }
    }
}
