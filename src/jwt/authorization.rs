//! An account JWT's `authorization` claim (the jwt library's `ExternalAuthorization`): the
//! account's users are authorized by an auth callout service, except its `auth_users`; the
//! service may place users in the `allowed_accounts` (`*`: any); with `xkey` the requests
//! are sealed to that curve key.

use super::{key_type, string_list, Claims};
use nkeys::KeyPairType;

/// The account's external authorization, when enabled (it has `auth_users`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalAuth {
    pub auth_users: Vec<String>,
    pub allowed_accounts: Vec<String>,
    pub xkey: Option<String>,
}

/// `allowed_accounts: ["*"]`: the service may place users in any account.
pub const ANY_ACCOUNT: &str = "*";

impl ExternalAuth {
    /// Whether the service may place a user in `account` (besides its own).
    pub fn allows(&self, account: &str) -> bool {
        match self.allowed_accounts.as_slice() {
            [only] if only == ANY_ACCOUNT => true,
            list => list.iter().any(|a| a == account),
        }
    }
}

impl Claims {
    /// The `authorization` claim, as the jwt library validates it (`ExternalAuthorization.
    /// Validate`); an issue makes nats-server refuse the whole account.
    pub fn external_auth(&self) -> Result<Option<ExternalAuth>, String> {
        let a = &self.nats["authorization"];
        let (users, allowed) = (
            string_list(&a["auth_users"]),
            string_list(&a["allowed_accounts"]),
        );
        let xkey = a["xkey"].as_str().filter(|x| !x.is_empty());
        if !allowed.is_empty() && users.is_empty() {
            return Err(
                "External authorization cannot have accounts without users specified".into(),
            );
        }
        if let Some(u) = users
            .iter()
            .find(|u| key_type(u) != Some(KeyPairType::User))
        {
            return Err(format!("AuthUser {u:?} is not a valid user public key"));
        }
        for acc in &allowed {
            if acc == ANY_ACCOUNT {
                if allowed.len() > 1 {
                    return Err(format!(
                        "AllowedAccounts can only be a list of accounts or {ANY_ACCOUNT:?}"
                    ));
                }
            } else if key_type(acc) != Some(KeyPairType::Account) {
                return Err(format!("Account {acc:?} is not a valid account public key"));
            }
        }
        if let Some(x) = xkey.filter(|x| nkeys::XKey::from_public_key(x).is_err()) {
            return Err(format!("XKey {x:?} is not a valid public xkey"));
        }
        Ok((!users.is_empty()).then(|| ExternalAuth {
            auth_users: users,
            allowed_accounts: allowed,
            xkey: xkey.map(str::to_string),
        }))
    }

    /// What makes nats-server refuse an account JWT although it decodes: its imports'
    /// issues, its exports', or its `authorization` claim's.
    pub fn validation_issues(&self) -> Option<String> {
        self.import_issues()
            .or_else(|| self.export_issues())
            .or_else(|| self.external_auth().err())
    }

    /// An export's `account_token_position` as the jwt library validates it
    /// (`Export.Validate`): only on a wildcard subject, within it, and on a `*` token.
    fn export_issues(&self) -> Option<String> {
        let exports = self.nats["exports"].as_array()?;
        exports.iter().find_map(|e| {
            let pos = e["account_token_position"].as_u64().filter(|p| *p > 0)?;
            let subject = e["subject"].as_str().unwrap_or("");
            let tokens: Vec<&str> = subject.split('.').collect();
            let at = usize::try_from(pos - 1).ok().and_then(|i| tokens.get(i));
            if !tokens.iter().any(|t| *t == "*" || *t == ">") {
                Some(format!(
                    "Account Token Position can only be used with wildcard subjects: {subject}"
                ))
            } else if at.is_none() {
                Some(format!(
                    "Account Token Position {pos} exceeds length of subject '{subject}'"
                ))
            } else if at != Some(&"*") {
                Some(format!(
                    "Account Token Position {pos} matches '{}' but must match a * in: {subject}",
                    at.unwrap_or(&"")
                ))
            } else {
                None
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(authorization: serde_json::Value) -> Claims {
        Claims::bare(
            super::super::Kind::Account,
            json!({"type": "account", "authorization": authorization}),
        )
    }

    #[test]
    fn authorization_is_enabled_by_auth_users_and_validated_as_the_jwt_library() {
        let user = nkeys::KeyPair::new_user().public_key();
        let acc = nkeys::KeyPair::new_account().public_key();
        let x = nkeys::XKey::new().public_key();
        assert_eq!(claims(json!({})).external_auth(), Ok(None));
        let ok = claims(json!({"auth_users": [user], "allowed_accounts": [acc], "xkey": x}));
        let ext = ok.external_auth().expect("valid").expect("enabled");
        assert!(ext.allows(&acc) && !ext.allows(&user));
        assert_eq!(ext.xkey.as_deref(), Some(x.as_str()));
        let any = claims(json!({"auth_users": [user], "allowed_accounts": ["*"]}));
        assert!(any
            .external_auth()
            .expect("valid")
            .expect("on")
            .allows(&acc));
        for bad in [
            json!({"allowed_accounts": [acc]}),
            json!({"auth_users": [acc]}),
            json!({"auth_users": [user], "allowed_accounts": ["*", acc]}),
            json!({"auth_users": [user], "allowed_accounts": [user]}),
            json!({"auth_users": [user], "xkey": acc}),
        ] {
            let c = claims(bad.clone());
            assert!(c.external_auth().is_err(), "{bad}");
            assert!(c.validation_issues().is_some(), "{bad}");
        }
    }
}
