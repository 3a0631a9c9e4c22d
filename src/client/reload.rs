//! What a connected client does when the configuration is reloaded: re-check its
//! credentials, take the new permissions, drop subscriptions it may no longer hold.

use super::*;

impl Client {
    /// A config reload was applied: take the new limits, and re-check this client as
    /// nats-server does — a client whose user is gone (or now in another account) is closed
    /// silently ("Client Closed"); one whose credentials no longer pass gets
    /// `-ERR 'Authorization Violation'` ("Authentication Failure"); the others get the new
    /// permissions (cached publish decisions dropped, subscriptions no longer allowed removed).
    pub(super) fn on_reload(&mut self) -> Flow {
        self.opts = self.srv.live_opts();
        self.trace = crate::logging::trace_enabled();
        self.apply_limits();
        if !self.connected {
            return Flow::Continue;
        }
        let Some(creds) = &self.creds else {
            return Flow::Continue;
        };
        let user = self.conn.meta().user.clone();
        if !user.is_empty() {
            if let Some(acc) = self.srv.auth.user_account(&user) {
                if acc.as_deref() != Some(self.acc.name.as_str()) {
                    tracing::debug!(
                        "{} - User {user:?} removed or moved to another account by a \
                         config reload, closing",
                        self.conn.log_prefix()
                    );
                    return Flow::Close(CloseReason::ClientClosed);
                }
            }
        }
        if creds.jwt.is_some()
            && self
                .opts
                .operator
                .as_ref()
                .is_some_and(|o| !o.preload.iter().any(|(k, _)| *k == self.acc.name))
        {
            // The full resolver deleted this account (nats-server's `accountAuthExpired`).
            self.send_err("Account Authentication Expired");
            tracing::debug!(
                "{} - Account Authentication Expired",
                self.conn.log_prefix()
            );
            return Flow::Close(CloseReason::AuthenticationExpired);
        }
        if creds
            .jwt
            .as_deref()
            .is_some_and(|t| self.srv.auth.jwt_revoked(t))
        {
            // An account update revoked this user (nats-server's text and reason).
            self.send_err("User Authentication Revoked");
            tracing::debug!("{} - User Authentication Revoked", self.conn.log_prefix());
            return Flow::Close(CloseReason::Revocation);
        }
        let Some(id) = self.srv.auth.authenticate(creds.as_creds()) else {
            tracing::error!(
                "{} - authentication error - User {:?}",
                self.conn.log_prefix(),
                creds.user.as_deref().unwrap_or("")
            );
            self.send_err(errs::AUTH_VIOLATION);
            return Flow::Close(CloseReason::AuthenticationViolation);
        };
        if id.account != self.acc.name {
            return Flow::Close(CloseReason::ClientClosed);
        }
        self.perms = id.perms;
        self.conn.meta().permissions = self.perms.as_ref().map(|p| Arc::new(p.public_json()));
        self.pub_ok.clear();
        self.drop_forbidden_subs(&user);
        Flow::Continue
    }

    /// After a permissions change: remove the subscriptions the client may no longer have,
    /// telling it as nats-server does.
    fn drop_forbidden_subs(&mut self, user: &str) {
        let Some(p) = self.perms.clone() else { return };
        let subs: Vec<Arc<Subscription>> = self.conn.subs().values().cloned().collect();
        for s in subs {
            if p.can_subscribe(&s.subject) {
                continue;
            }
            self.unsubscribe(&s);
            let (subj, sid) = (
                String::from_utf8_lossy(&s.subject),
                String::from_utf8_lossy(&s.sid),
            );
            self.send_err(&format!(
                "Permissions Violation for Subscription to \"{subj}\" (sid \"{sid}\")"
            ));
            tracing::info!("Removed sub {subj:?} (sid {sid:?}) for User {user:?} - not authorized");
        }
        for c in self.fan.kicks().drain(..) {
            c.out.kick();
        }
    }
}
