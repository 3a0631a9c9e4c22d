//! Account JWT updates in operator mode with the MEMORY resolver, as nats-server takes them
//! (`events.go` `accountClaimUpdate`, `respondToUpdate`): a JWT published on
//! `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` (or the older `$SYS.ACCOUNT.<key>.CLAIMS.UPDATE`)
//! replaces a preloaded account's JWT; connected clients then re-check themselves, and those
//! the new `revocations` cover are closed with `-ERR 'User Authentication Revoked'`
//! ("Credentials Revoked"); limits, exports and imports, JetStream change live as well. The
//! URL resolver takes updates the same way (`url_resolver.rs`).

use super::Sys;
use crate::account::{Handler, Subscription};
use crate::deliver::Msg;
use crate::jwt::{self, Kind};
use crate::server::ServerShared;
use serde_json::json;
use std::sync::Arc;

const SUBJECTS: [&str; 2] = [
    "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE",
    "$SYS.ACCOUNT.*.CLAIMS.UPDATE",
];

/// Subscribe to account JWT updates (operator mode with the MEMORY resolver; the full
/// resolver has its own: `resolver.rs`).
pub fn start(srv: &Arc<ServerShared>, sys: &Arc<Sys>, subs: &mut Vec<Arc<Subscription>>) {
    let resolver = srv.opts.operator.as_ref().and_then(|o| o.resolver.as_ref());
    match resolver {
        Some(crate::config::Resolver::Memory) => {}
        // Built (and its server asked) as the server started.
        Some(crate::config::Resolver::Url(_)) => {
            // The system account's JWT, as nats-server looks it up when it starts.
            let (srv2, key) = (srv.clone(), srv.opts.system_account.clone());
            srv.tasks.spawn(async move {
                if super::url_resolver::may_fetch(&srv2, &key) {
                    super::url_resolver::fetch(&srv2, &key).await;
                }
            });
        }
        Some(crate::config::Resolver::Full(_)) => return super::resolver::start(srv, sys, subs),
        None => return,
    }
    for subject in SUBJECTS {
        let (wsrv, wsys) = (Arc::downgrade(srv), Arc::downgrade(sys));
        let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
            let (Some(srv), Some(sys)) = (wsrv.upgrade(), wsys.upgrade()) else {
                return;
            };
            let subject = String::from_utf8_lossy(m.subject).into_owned();
            let reply = m.reply.map(|r| String::from_utf8_lossy(r).into_owned());
            let token = String::from_utf8_lossy(m.payload).trim().to_string();
            let tasks = srv.tasks.clone();
            tasks.spawn(async move {
                // One change of the known accounts at a time (a URL fetch is another).
                let res = srv.url_resolver.get().cloned();
                let _one = match &res {
                    Some(r) => Some(r.busy.lock().await),
                    None => None,
                };
                // Applying verifies every account JWT: off the async workers.
                let _ = tokio::task::spawn_blocking(move || {
                    handle(&srv, &sys, &subject, reply, &token)
                })
                .await;
            });
        });
        match srv.subscribe_internal(&sys.acc, subject, None, h) {
            Ok(s) => subs.push(s),
            Err(e) => tracing::error!("$SYS claim updates: {e}"),
        }
    }
}

/// The account key a claims-update subject names.
fn account_of(subject: &str) -> Option<&str> {
    let t: Vec<&str> = subject.split('.').collect();
    match t[..] {
        ["$SYS", "REQ", "ACCOUNT", key, "CLAIMS", "UPDATE"] => Some(key),
        ["$SYS", "ACCOUNT", key, "CLAIMS", "UPDATE"] => Some(key),
        _ => None,
    }
}

fn handle(srv: &Arc<ServerShared>, sys: &Sys, subject: &str, reply: Option<String>, token: &str) {
    let Some(key) = account_of(subject) else {
        return;
    };
    let outcome = update(srv, key, token);
    let mut body = json!({"server": sys.server_info(srv)});
    match &outcome {
        Ok(msg) => {
            tracing::debug!("{msg} - {key}");
            body["data"] = json!({"account": key, "code": 200, "message": msg});
        }
        Err((msg, err)) => {
            tracing::error!("{msg} - {key}: {err}");
            body["error"] = json!({"account": key, "code": 500,
                "description": format!("{msg} - {err}")});
        }
    }
    if let Some(r) = reply {
        sys.publish(srv, &r, None, body.to_string().as_bytes());
    }
}

type Failure = (&'static str, String);

fn update(srv: &Arc<ServerShared>, key: &str, token: &str) -> Result<&'static str, Failure> {
    const ERR: &str = "jwt update resulted in error";
    if token.is_empty() {
        return Err(("jwt update error", "request body is empty".into()));
    }
    let new = jwt::decode(token, Kind::Account).map_err(|e| (ERR, e))?;
    if new.subject != key {
        return Err((ERR, "subject does not match jwt content".into()));
    }
    let live = srv.live_opts();
    let Some(op) = live.operator.as_ref() else {
        return Err((ERR, "not in operator mode".into()));
    };
    if !op.preload.iter().any(|(k, _)| k == key) {
        return Ok("jwt update skipped");
    }
    let trusted = op
        .operators
        .iter()
        .filter_map(|t| jwt::decode(t, Kind::Operator).ok())
        .any(|o| o.subject == new.issuer || o.signing_keys().contains(&new.issuer));
    if !trusted {
        return Err((ERR, "account JWT not signed by a trusted operator".into()));
    }
    if let Some(why) = new.validation_issues() {
        return Err((ERR, format!("validation errors: [{why}]")));
    }
    // The whole account follows the new JWT, live: limits, exports and imports, JetStream,
    // revocations (connected clients re-check themselves), as nats-server's
    // `updateAccountWithClaimJWT`.
    let mut all: std::collections::BTreeMap<String, String> = op.preload.iter().cloned().collect();
    all.insert(key.to_string(), token.to_string());
    srv.apply_account_jwts(&all);
    let now = srv.live_opts();
    let applied = now
        .operator
        .as_ref()
        .is_some_and(|o| o.preload.iter().any(|(k, t)| k == key && t == token));
    if applied {
        Ok("jwt updated")
    } else {
        Err((ERR, "the account JWT could not be applied".into()))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn update_subjects() {
        assert_eq!(
            super::account_of("$SYS.REQ.ACCOUNT.AB.CLAIMS.UPDATE"),
            Some("AB")
        );
        assert_eq!(
            super::account_of("$SYS.ACCOUNT.AB.CLAIMS.UPDATE"),
            Some("AB")
        );
        assert_eq!(super::account_of("$SYS.ACCOUNT.AB.CLAIMS"), None);
    }
}
