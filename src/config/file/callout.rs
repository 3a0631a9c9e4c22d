//! `authorization { auth_callout { … } }` (nats-server 2.10+'s `parseAuthCallout`, its
//! checks and texts).

use super::*;
use crate::config::AuthCallout;

pub(super) fn auth_callout(m: &Map, at: &Pos) -> Result<AuthCallout, ConfigError> {
    let mut c = AuthCallout::default();
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "issuer" => {
                c.issuer = string(k, v)?;
                if !crate::jwt::store::is_account_key(&c.issuer) {
                    return Err(ConfigError::at(
                        &v.pos,
                        format!(
                            "Expected callout user to be a valid public account nkey, got {:?}",
                            c.issuer
                        ),
                    ));
                }
            }
            "account" | "acc" => c.account = string(k, v)?,
            "auth_users" | "users" => c.auth_users = strings(k, v)?,
            "xkey" | "key" => {
                let x = string(k, v)?;
                if !x.starts_with('X') || nkeys::from_public_key(&x).is_err() {
                    return Err(ConfigError::at(
                        &v.pos,
                        format!("Expected callout xkey to be a valid public xkey, got {x:?}"),
                    ));
                }
                c.xkey = Some(x);
            }
            "allowed_accounts" => c.allowed_accounts = strings(k, v)?,
            _ => {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("Unknown field {:?} parsing authorization callout", e.key),
                ))
            }
        }
    }
    if c.account.is_empty() {
        c.account = crate::account::GLOBAL_ACCOUNT.to_string();
    }
    if c.issuer.is_empty() {
        return Err(ConfigError::at(
            at,
            "Authorization callouts require an issuer to be specified",
        ));
    }
    if c.auth_users.is_empty() {
        return Err(ConfigError::at(
            at,
            "Authorization callouts require authorized users to be specified",
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::super::load_str;

    fn conf(callout: &str) -> String {
        format!(
            "accounts {{ AUTH {{ users: [ {{ user: auth, password: pwd }} ] }}, APP {{}} }}\n\
             authorization {{ auth_callout {{ {callout} }} }}\n"
        )
    }

    fn err(callout: &str) -> String {
        match load_str(&conf(callout)) {
            Ok(_) => panic!("accepted: {callout}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_callout_block_is_read_with_nats_servers_defaults() {
        let issuer = nkeys::KeyPair::new_account().public_key();
        let xkey = nkeys::XKey::new().public_key();
        let o = load_str(&conf(&format!(
            "issuer: {issuer}, users: [auth], xkey: {xkey}, allowed_accounts: [APP]"
        )))
        .expect("valid")
        .options;
        let c = o.auth_callout.expect("callout");
        assert_eq!(c.issuer, issuer);
        assert_eq!(c.auth_users, vec!["auth".to_string()]);
        assert_eq!(c.account, "$G", "no account: the global one");
        assert_eq!(c.xkey.as_deref(), Some(xkey.as_str()));
        assert_eq!(c.allowed_accounts, vec!["APP".to_string()]);
    }

    #[test]
    fn bad_callout_blocks_get_nats_servers_errors() {
        let issuer = nkeys::KeyPair::new_account().public_key();
        let user = nkeys::KeyPair::new_user().public_key();
        for (callout, want) in [
            (
                format!("issuer: {user}, auth_users: [auth]"),
                "Expected callout user to be a valid public account nkey",
            ),
            (
                format!("issuer: {issuer}, auth_users: [auth], xkey: {user}"),
                "Expected callout xkey to be a valid public xkey",
            ),
            (
                "auth_users: [auth]".to_string(),
                "Authorization callouts require an issuer to be specified",
            ),
            (
                format!("issuer: {issuer}"),
                "Authorization callouts require authorized users to be specified",
            ),
            (
                format!("issuer: {issuer}, auth_users: [auth], hook: x"),
                "Unknown field \"hook\" parsing authorization callout",
            ),
            (
                format!("issuer: {issuer}, auth_users: [auth], allowed_accounts: [NOPE]"),
                "auth_callout allowed account \"NOPE\" not found in configured accounts",
            ),
        ] {
            let e = err(&callout);
            assert!(e.contains(want), "{callout}: {e}");
        }
    }
}
