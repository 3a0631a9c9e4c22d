//! CONNECT: its options, authentication, the account and permissions it binds the client to.

use super::*;
use crate::auth::nonempty;

impl Client {
    pub(super) fn on_connect(&mut self, json: &[u8]) -> Flow {
        // Bad JSON closes without an -ERR, as nats-server does; the reason goes to the log.
        let ci = match ConnectInfo::from_json(json) {
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
        let creds = Credentials {
            user: nonempty(&ci.user),
            pass: nonempty(&ci.pass),
            token: nonempty(&ci.auth_token),
            nkey: nonempty(&ci.nkey),
            sig: nonempty(&ci.sig),
            nonce: self.nonce.as_bytes(),
            jwt: nonempty(&ci.jwt),
            host: Some(self.conn.addr.ip()),
            leaf: false,
            cert: cert.as_deref(),
        };
        let Some(id) = self.srv.auth.authenticate(creds) else {
            if let Some(key) = self.fetchable(creds.jwt) {
                // nats-server fetches an account its resolver lacks, then authenticates.
                self.fetch.0 = Some((json.to_vec(), key));
                return Flow::Pause;
            }
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
            return Flow::Close(CloseReason::AuthenticationViolation);
        };
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
        self.creds = Some(StoredCreds::new(&creds, cert.clone()));
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
            m.name = ci.name;
            m.lang = ci.lang;
            m.version = ci.version;
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
        if self.fetch.1 {
            return None;
        }
        let u = crate::jwt::decode(jwt?, crate::jwt::Kind::User).ok()?;
        let key = match u.str("issuer_account") {
            "" => u.issuer.clone(),
            a => a.to_string(),
        };
        crate::sys::resolver::may_fetch(&self.srv, &key).then_some(key)
    }

    /// The CONNECT that paused for its account: fetch the account, then authenticate again.
    pub(super) async fn connect_fetched(&mut self) -> Flow {
        let Some((json, key)) = self.fetch.0.take() else {
            return Flow::Continue;
        };
        self.fetch.1 = true;
        crate::sys::resolver::fetch(&self.srv, &key).await;
        self.on_connect(&json)
    }

    /// CONNECT bound the client to an account with its own limits: the parser follows.
    pub(super) fn take_limits(&mut self, parser: &mut Parser) {
        if self.limits_changed {
            parser.set_limits(self.parser_limits());
            self.limits_changed = false;
        }
    }
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
