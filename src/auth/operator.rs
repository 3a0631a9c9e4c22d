//! Operator (JWT) mode's user check: a CONNECT's user JWT against its account's JWT, in
//! nats-server's order (`auth.go` `processClientOrLeafAuthentication`): the issuer (the
//! account, a signing key, or a scoped signing key whose template replaces the user's own
//! permissions and limits), the account's expiry, bearer tokens, allowed connection types,
//! the nonce signature, revocations, the `src` CIDRs, the `times` windows; then its permissions (with `resp`). Every refusal has a reason for the
//! debug log; the client only ever sees `Authorization Violation`.

use super::{nonce_signed, CompiledPerms, Credentials, Identity};
use crate::config::{Permissions, SubjectPermission};
use crate::jwt::{self, user as juser, Claims};
use std::collections::HashMap;
use std::sync::Arc;

/// What a user JWT is checked against: its account's JWT.
pub(super) struct JwtAccount {
    /// Signed by a trusted operator (or one of its signing keys).
    trusted: bool,
    /// Keys that may sign users besides the account's own (plain ones).
    signing_keys: Vec<String>,
    /// Scoped signing keys and their templates.
    scoped_keys: Vec<(String, serde_json::Value)>,
    disallow_bearer: bool,
    /// Its users are authorized by an auth callout service (the `authorization` claim).
    ext: Option<jwt::authorization::ExternalAuth>,
    /// The account's claims (name, tags, revocations, expiry).
    claims: Claims,
}

impl JwtAccount {
    fn new(c: Claims, trusted_keys: &[String]) -> Self {
        JwtAccount {
            trusted: trusted_keys.contains(&c.issuer),
            signing_keys: c.signing_keys(),
            scoped_keys: c.scoped_keys(),
            disallow_bearer: c.nats["limits"]["disallow_bearer"].as_bool() == Some(true),
            ext: c.external_auth().ok().flatten(),
            claims: c,
        }
    }
}

/// Operator mode's accounts: each preloaded account JWT, and whether an operator we trust
/// (its own key or one of its signing keys) issued it.
pub(super) fn operator_accounts(op: &crate::config::OperatorMode) -> HashMap<String, JwtAccount> {
    use crate::jwt::{decode, Kind};
    let mut trusted = Vec::new();
    for c in op
        .operators
        .iter()
        .filter_map(|t| decode(t, Kind::Operator).ok())
    {
        trusted.extend(c.signing_keys());
        trusted.push(c.subject);
    }
    op.preload
        .iter()
        .filter_map(|(k, t)| {
            let c = decode(t, Kind::Account).ok()?;
            if c.validation_issues().is_some() {
                return None;
            }
            Some((k.clone(), JwtAccount::new(c, &trusted)))
        })
        .collect()
}

/// Whether user JWT `token`'s account revokes it (a connected client after an update).
pub(super) fn revoked(accounts: &HashMap<String, JwtAccount>, token: &str) -> bool {
    let Ok(u) = jwt::decode(token, jwt::Kind::User) else {
        return false;
    };
    accounts
        .get(u.account())
        .is_some_and(|a| juser::revoked(&a.claims, &u.subject, u.issued_at))
}

/// nats-server's checks of a user JWT, in its order; the reason for a refusal (logged at
/// debug level, as nats-server does).
pub(super) fn jwt_user(
    accounts: &HashMap<String, JwtAccount>,
    c: &Credentials<'_>,
) -> Result<Identity, String> {
    let token = c.jwt.ok_or("Authentication requires a user JWT")?;
    let mut u =
        jwt::decode(token, jwt::Kind::User).map_err(|e| format!("User JWT not valid: {e}"))?;
    let now = jwt::now();
    u.time_check(now)
        .map_err(|e| format!("User JWT no longer valid: {e}"))?;
    let name = u.account().to_string();
    let acc = accounts
        .get(&name)
        .ok_or_else(|| format!("Account JWT lookup error: {name} not found"))?;
    if !acc.trusted {
        return Err("Account JWT not signed by trusted operator".into());
    }
    signed_for(acc, &name, &mut u).map_err(|e| match e {
        Unsigned::Issuer => "User JWT issuer is not known".to_string(),
        Unsigned::Scope(why) => format!("User JWT {why}"),
    })?;
    let acc_exp = acc.claims.expires;
    if acc_exp > 0 && now > acc_exp {
        return Err("Account JWT has expired".into());
    }
    // What natsd does not apply (checked on the user as it stands after a scope).
    if let Some(field) = u.unsupported().first() {
        return Err(format!("User JWT claim {field:?} is not supported yet"));
    }
    let bearer = u.nats["bearer_token"].as_bool() == Some(true);
    if bearer && acc.disallow_bearer {
        return Err("Account does not allow bearer tokens".into());
    }
    if !juser::connection_type_allowed(&u, c.connection_type()) {
        return Err("Connection type not allowed".into());
    }
    if !bearer && !nonce_signed(&u.subject, c.nonce, c.sig) {
        return Err(if c.sig.is_none() {
            "Signature missing".into()
        } else {
            "Signature not verified".into()
        });
    }
    if juser::revoked(&acc.claims, &u.subject, u.issued_at) {
        return Err("User authentication revoked".into());
    }
    if !juser::src_allows(&u, c.host).map_err(|e| format!("User JWT no longer valid: {e}"))? {
        let host = c.host.map(|h| h.to_string()).unwrap_or_default();
        tracing::error!("Bad src Ip {host}");
        return Err(format!("Bad src Ip {host}"));
    }
    let expires = match connect_window(&u)? {
        jwt::times::Window::Outside => {
            tracing::error!("Outside connect times");
            return Err("Outside connect times".into());
        }
        jwt::times::Window::Until(end) if u.expires <= 0 || end < u.expires => end,
        _ => u.expires,
    };
    // The user's own permissions, else the account's `default_permissions`.
    let perms = perms_of(&u.nats).or_else(|| perms_of(&acc.claims.nats["default_permissions"]));
    Ok(Identity {
        user: u.subject.clone(),
        account: name,
        perms: perms.map(Arc::new),
        expires,
        jwt_limits: Some(juser::own_limits(&u)),
        name_tag: u.name.clone(),
    })
}

/// The auth callout a CONNECT goes to in operator mode (nats-server's deferred check in
/// `processClientOrLeafAuthentication`): its user JWT decodes, is current, and names an
/// account whose JWT enables external authorization, and the user is not one of that
/// account's `auth_users` (`raw`: nats-server's `getRawAuthUser`). Whether the JWT's own
/// checks passed does not matter: the service decides.
pub(super) fn callout(
    accounts: &HashMap<String, JwtAccount>,
    token: &str,
    raw: &str,
) -> Option<crate::config::AuthCallout> {
    let u = jwt::decode(token, jwt::Kind::User).ok()?;
    u.time_check(jwt::now()).ok()?;
    let name = u.account();
    let ext = accounts.get(name)?.ext.as_ref()?;
    if ext.auth_users.iter().any(|a| a == raw) {
        return None;
    }
    Some(crate::config::AuthCallout {
        issuer: name.to_string(),
        auth_users: ext.auth_users.clone(),
        account: name.to_string(),
        xkey: ext.xkey.clone(),
        allowed_accounts: ext.allowed_accounts.clone(),
    })
}

/// Whether `account` enables external authorization (its own users then may not publish
/// to the callout subject).
pub(super) fn has_callout(accounts: &HashMap<String, JwtAccount>, account: &str) -> bool {
    accounts.get(account).is_some_and(|a| a.ext.is_some())
}

/// Whether `key` is `account` itself or one of its signing keys (nats-server's `hasIssuer`).
pub(super) fn is_issuer(accounts: &HashMap<String, JwtAccount>, account: &str, key: &str) -> bool {
    accounts.get(account).is_some_and(|a| {
        key == account
            || a.signing_keys.iter().any(|k| k == key)
            || a.scoped_keys.iter().any(|(k, _)| k == key)
    })
}

/// A user JWT the auth service issued, placed in account `target` (nats-server's
/// `assignAccountAndPermissions` in operator mode): its issuer must be the account or one
/// of its signing keys; a scoped key's template replaces the user's permissions.
pub(super) fn place(
    accounts: &HashMap<String, JwtAccount>,
    target: &str,
    u: &mut Claims,
) -> Result<(), String> {
    let Some(acc) = accounts.get(target) else {
        return Err(format!("no valid account {target:?}: account missing"));
    };
    signed_for(acc, target, u).map_err(|e| match e {
        Unsigned::Issuer => format!("user JWT issuer {:?} is not known", u.issuer),
        Unsigned::Scope(why) => format!("user JWT {why}"),
    })
}

/// Why a user JWT's issuer may not sign for an account.
enum Unsigned {
    /// Neither the account nor one of its signing keys.
    Issuer,
    /// A scoped key whose user is not valid (the reason, after "User JWT ").
    Scope(String),
}

/// The user JWT's issuer is account `name` (`acc`) or one of its signing keys (nats-server's
/// `hasIssuer`); a scoped key's user must carry no permissions or limits, and gets the
/// template's.
fn signed_for(acc: &JwtAccount, name: &str, u: &mut Claims) -> Result<(), Unsigned> {
    let scope = acc.scoped_keys.iter().find(|(k, _)| *k == u.issuer);
    if u.issuer != name && scope.is_none() && !acc.signing_keys.contains(&u.issuer) {
        return Err(Unsigned::Issuer);
    }
    if let Some((_, template)) = scope {
        if !juser::has_empty_permissions(u) {
            return Err(Unsigned::Scope(
                "is not valid: scoped users require no permissions or limits set".into(),
            ));
        }
        juser::apply_scope(u, template, &acc.claims)
            .map_err(|e| Unsigned::Scope(format!("generated invalid permissions: {e}")))?;
    }
    Ok(())
}

/// The user's `times` now, in its `times_location` (nats-server's `validateTimes`): the
/// connection then closes when its window ends, or at the JWT's expiry if that is sooner.
pub(super) fn connect_window(u: &jwt::Claims) -> Result<jwt::times::Window, String> {
    use jwt::times;
    if !times::restricted(u) {
        return Ok(times::Window::Always);
    }
    let zone = crate::util::tz::Zone::load(times::location(u))
        .map_err(|e| format!("User JWT not valid: could not parse time zone: {e}"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    times::window(u, &zone, now).map_err(|e| format!("User JWT not valid: {e}"))
}

/// The permissions of a JWT `{pub, sub, resp}` object (a user's `nats`, an account's
/// `default_permissions`): `None` when it has no allow or deny list and no `resp`, as
/// nats-server's `buildPermissionsFromJwt`.
pub(super) fn perms_of(v: &serde_json::Value) -> Option<CompiledPerms> {
    let list = |p: &str, l: &str| -> Vec<String> {
        v[p][l]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let side = |p: &str| {
        let (allow, deny) = (list(p, "allow"), list(p, "deny"));
        (!allow.is_empty() || !deny.is_empty()).then_some(SubjectPermission { allow, deny })
    };
    let p = Permissions {
        allow_responses: None,
        publish: side("pub"),
        subscribe: side("sub"),
    };
    let resp = super::responses::ResponsePerm::from_jwt(&v["resp"]);
    if p.publish.is_none() && p.subscribe.is_none() && resp.is_none() {
        return None;
    }
    let c = CompiledPerms::new(&p);
    Some(match resp {
        Some(r) => c.with_responses(r),
        None => c,
    })
}
