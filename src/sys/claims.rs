//! Account JWT updates in operator mode with the MEMORY resolver, as nats-server takes them
//! (`events.go` `accountClaimUpdate`, `respondToUpdate`): a JWT published on
//! `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` (or the older `$SYS.ACCOUNT.<key>.CLAIMS.UPDATE`)
//! replaces a preloaded account's JWT; connected clients then re-check themselves, and those
//! the new `revocations` cover are closed with `-ERR 'User Authentication Revoked'`
//! ("Credentials Revoked"). natsd applies only revocation changes live: an update that
//! changes anything else is answered with an error and not applied.

use super::Sys;
use crate::account::{Handler, Subscription};
use crate::deliver::Msg;
use crate::jwt::{self, Kind};
use crate::server::ServerShared;
use serde_json::{json, Value};
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
            tasks.spawn(async move { handle(&srv, &sys, &subject, reply, &token) });
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

/// The `nats` object without what natsd applies live.
fn fixed_part(c: &jwt::Claims) -> Value {
    let mut n = c.nats.clone();
    if let Some(o) = n.as_object_mut() {
        o.remove("revocations");
    }
    n
}

type Failure = (&'static str, String);

fn update(srv: &ServerShared, key: &str, token: &str) -> Result<&'static str, Failure> {
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
    let Some(old) = op.preload.iter().find(|(k, _)| k == key) else {
        return Ok("jwt update skipped");
    };
    let old = jwt::decode(&old.1, Kind::Account).map_err(|e| (ERR, e))?;
    let trusted = op
        .operators
        .iter()
        .filter_map(|t| jwt::decode(t, Kind::Operator).ok())
        .any(|o| o.subject == new.issuer || o.signing_keys().contains(&new.issuer));
    if !trusted {
        return Err((ERR, "account JWT not signed by a trusted operator".into()));
    }
    if fixed_part(&old) != fixed_part(&new) || old.expires != new.expires {
        return Err((
            ERR,
            "natsd applies only revocation changes to a running account yet".into(),
        ));
    }
    let mut opts = (*live).clone();
    if let Some(op) = opts.operator.as_mut() {
        for (k, t) in op.preload.iter_mut() {
            if k == key {
                *t = token.to_string();
            }
        }
    }
    srv.apply_account_update(opts);
    Ok("jwt updated")
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
