//! CONNECT: its options, authentication, the account and permissions it binds the client to.

use super::*;

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
        fn nonempty(s: &str) -> Option<&str> {
            (!s.is_empty()).then_some(s)
        }
        let creds = Credentials {
            user: nonempty(&ci.user),
            pass: nonempty(&ci.pass),
            token: nonempty(&ci.auth_token),
        };
        let Some(id) = self.srv.auth.authenticate(creds) else {
            if ci.user.is_empty() {
                tracing::error!("{} - authentication error", self.conn.log_prefix());
            } else {
                tracing::error!(
                    "{} - authentication error - User {:?}",
                    self.conn.log_prefix(),
                    ci.user
                );
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
        self.perms = id.perms;
        self.creds = Some(StoredCreds {
            user: creds.user.map(str::to_string),
            pass: creds.pass.map(str::to_string),
            token: creds.token.map(str::to_string),
        });
        // The account's `limits { max_connections }`, counted on this server.
        let max_conns = self
            .opts
            .account_limits
            .get(&acc.name)
            .map_or(-1, |l| l.max_connections);
        let before = acc.num_conns.fetch_add(1, Relaxed);
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
        self.apply_limits();
        {
            let mut m = self.conn.meta();
            m.name = ci.name;
            m.lang = ci.lang;
            m.version = ci.version;
            m.user = id.user;
            m.account = self.acc.name.clone();
        }
        self.connected = true;
        // nats-server re-arms the ping timer at CONNECT to measure RTT soon.
        let first = self.opts.ping_interval.min(Duration::from_secs(2));
        let jitter = first.mul_f64(self.fan.rng.random_range(0.0..0.2));
        self.next_ping = Instant::now() + first + jitter;
        self.send_ok();
        Flow::Continue
    }
}
