//! Authentication (user/password, token, several users, bcrypt hashes, nkey users signing
//! the INFO nonce, user JWTs in operator mode) and authorization (publish/subscribe allow and deny lists). Pure
//! decisions: no I/O, no connection state.

use crate::config::{Options, Permissions, SubjectPermission};
use crate::subject::{has_wildcard, pattern_matches, subset_match};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::Arc;

pub mod callout;
mod certmap;
mod operator;
pub mod responses;
use operator::{jwt_user, operator_accounts, JwtAccount};

/// Credentials a client presented in CONNECT.
#[derive(Default, Debug, Clone, Copy)]
pub struct Credentials<'a> {
    pub user: Option<&'a str>,
    pub pass: Option<&'a str>,
    pub token: Option<&'a str>,
    /// The public nkey (`U…`) the client claims.
    pub nkey: Option<&'a str>,
    /// Its signature of `nonce` (base64url, or standard base64).
    pub sig: Option<&'a str>,
    /// The nonce this connection's INFO carried (empty when none was sent).
    pub nonce: &'a [u8],
    /// A user JWT (operator mode).
    pub jwt: Option<&'a str>,
    /// The client's address (a user JWT's `src` CIDRs are checked against it).
    pub host: Option<std::net::IpAddr>,
    /// A leafnode connection (connection type `LEAFNODE`), else a client (`STANDARD`).
    pub leaf: bool,
    /// The certificate the client presented over TLS (`verify_and_map` finds the user in it).
    pub cert: Option<&'a crate::tls::cert::PeerCert>,
}

impl Credentials<'_> {
    /// The connection type a user's `allowed_connection_types` is checked against.
    pub fn connection_type(&self) -> &'static str {
        if self.leaf {
            "LEAFNODE"
        } else {
            "STANDARD"
        }
    }
}

/// A CONNECT field as a credential: `None` when empty.
pub fn nonempty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// Whether `key` is a valid public user nkey (`U…`, checksum included).
pub fn is_user_nkey(key: &str) -> bool {
    nkeys::KeyPair::from_public_key(key)
        .is_ok_and(|k| matches!(k.key_pair_type(), nkeys::KeyPairType::User))
}

/// A signature as a client sends it: base64url without padding, or else standard base64
/// (nats-server accepts both).
pub fn decode_sig(sig: &str) -> Option<Vec<u8>> {
    data_encoding::BASE64URL_NOPAD
        .decode(sig.as_bytes())
        .or_else(|_| data_encoding::BASE64.decode(sig.as_bytes()))
        .ok()
}

/// Whether `sig` is `public_key`'s ed25519 signature of `nonce`. Any malformed part (key,
/// encoding, length) is a plain "no".
pub fn nonce_signed(public_key: &str, nonce: &[u8], sig: Option<&str>) -> bool {
    let Some(sig) = sig.and_then(decode_sig) else {
        return false;
    };
    nkeys::KeyPair::from_public_key(public_key).is_ok_and(|k| k.verify(nonce, &sig).is_ok())
}

/// Who a connection turned out to be.
#[derive(Debug, Clone)]
pub struct Identity {
    pub user: String,
    pub account: String,
    pub perms: Option<Arc<CompiledPerms>>,
    /// When its user JWT expires (unix seconds; 0: never): the connection is closed then.
    pub expires: i64,
    /// A JWT user's own `subs` and `payload` limits (-1: none), which the account's and
    /// the server's further lower; `None` for other users.
    pub jwt_limits: Option<(i64, i64)>,
    /// A JWT user's `name` (nats-server's name tag); empty for other users.
    pub name_tag: String,
}

#[derive(Debug, Clone, Default)]
struct Rules {
    allow: Option<Vec<Bytes>>,
    deny: Vec<Bytes>,
}

impl Rules {
    fn compile(p: &Option<SubjectPermission>) -> Rules {
        match p {
            None => Rules::default(),
            Some(sp) => Rules {
                allow: if sp.allow.is_empty() {
                    None
                } else {
                    Some(sp.allow.iter().map(|s| Bytes::from(s.clone())).collect())
                },
                deny: sp.deny.iter().map(|s| Bytes::from(s.clone())).collect(),
            },
        }
    }

    /// nats-server's rule: allowed if the allow list (when there is one) matches, and the
    /// deny list does not. Wildcard tokens in `subject` are compared literally.
    fn permits(&self, subject: &[u8]) -> bool {
        let allowed = match &self.allow {
            None => true,
            Some(a) => a.iter().any(|p| pattern_matches(p, subject)),
        };
        allowed && !self.deny.iter().any(|p| pattern_matches(p, subject))
    }
}

/// Permissions compiled for fast checks.
#[derive(Debug, Clone, Default)]
pub struct CompiledPerms {
    publish: Rules,
    subscribe: Rules,
    /// Response permissions: replies to received messages may be published.
    resp: Option<responses::ResponsePerm>,
}

impl CompiledPerms {
    pub fn new(p: &Permissions) -> Self {
        CompiledPerms {
            publish: Rules::compile(&p.publish),
            subscribe: Rules::compile(&p.subscribe),
            resp: None,
        }
    }

    /// A configured user's permissions, `allow_responses` included.
    pub fn from_config(p: &Permissions) -> Self {
        let c = CompiledPerms::new(p);
        match p.allow_responses {
            Some(r) => c.with_responses(r),
            None => c,
        }
    }

    /// The publish rules as (allow, deny) lists (`None`: no allow list).
    pub fn publish_lists(&self) -> (Option<&[Bytes]>, &[Bytes]) {
        (self.publish.allow.as_deref(), &self.publish.deny)
    }

    /// The subscribe rules as (allow, deny) lists (`None`: no allow list).
    pub fn subscribe_lists(&self) -> (Option<&[Bytes]>, &[Bytes]) {
        (self.subscribe.allow.as_deref(), &self.subscribe.deny)
    }

    /// With response permissions: as nats-server, publishing without an allow list then
    /// allows nothing but the replies.
    pub fn with_responses(mut self, r: responses::ResponsePerm) -> Self {
        self.publish.allow.get_or_insert_with(Vec::new);
        self.resp = Some(r);
        self
    }

    pub fn responses(&self) -> Option<responses::ResponsePerm> {
        self.resp
    }

    /// `subject` added to the publish deny list (nats-server's `mergeDenyPermissions`).
    pub fn deny_publish(mut self, subject: &str) -> Self {
        let s = Bytes::copy_from_slice(subject.as_bytes());
        if !self.publish.deny.contains(&s) {
            self.publish.deny.push(s);
        }
        self
    }

    /// The permissions as nats-server's `publicPermissions` shows them (`$SYS.REQ.USER.INFO`):
    /// `publish` and `subscribe` with their `allow`/`deny` lists (each left out when empty),
    /// and `responses` `{max, ttl}` (nanoseconds) when replies are allowed.
    pub fn public_json(&self) -> serde_json::Value {
        let rules = |r: &Rules| {
            let list = |v: &[Bytes]| -> Vec<String> {
                v.iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect()
            };
            let mut o = serde_json::Map::new();
            if let Some(a) = r.allow.as_deref().filter(|a| !a.is_empty()) {
                o.insert("allow".into(), list(a).into());
            }
            if !r.deny.is_empty() {
                o.insert("deny".into(), list(&r.deny).into());
            }
            serde_json::Value::Object(o)
        };
        let mut p = serde_json::json!({
            "publish": rules(&self.publish),
            "subscribe": rules(&self.subscribe),
        });
        if let Some(r) = self.resp {
            let ttl = r.ttl.map_or(0, |d| d.as_nanos() as u64);
            p["responses"] = serde_json::json!({"max": r.max, "ttl": ttl});
        }
        p
    }

    pub fn can_publish(&self, subject: &[u8]) -> bool {
        self.publish.permits(subject)
    }

    pub fn can_subscribe(&self, subject: &[u8]) -> bool {
        self.subscribe.permits(subject)
    }

    /// For an allowed wildcard subscription: the deny patterns it overlaps, which must be
    /// filtered out at delivery (nats-server's message deny filter).
    pub fn deny_filter(&self, subject: &[u8]) -> Option<Arc<Vec<Bytes>>> {
        if !has_wildcard(subject) || self.subscribe.deny.is_empty() {
            return None;
        }
        let hits: Vec<Bytes> = self
            .subscribe
            .deny
            .iter()
            .filter(|d| subset_match(d, subject) || crate::subject::overlaps(d, subject))
            .cloned()
            .collect();
        (!hits.is_empty()).then(|| Arc::new(hits))
    }
}

struct UserEntry {
    password: String,
    account: String,
    perms: Option<Arc<CompiledPerms>>,
    /// `allowed_connection_types` (upper case; empty: all).
    types: Vec<String>,
}

impl UserEntry {
    /// The identity of this user, named `name`.
    fn identity(&self, name: &str) -> Identity {
        Identity {
            user: name.to_string(),
            account: self.account.clone(),
            perms: self.perms.clone(),
            expires: 0,
            jwt_limits: None,
            name_tag: String::new(),
        }
    }

    fn allows(&self, c: &Credentials<'_>) -> bool {
        self.types.is_empty() || self.types.iter().any(|t| t == c.connection_type())
    }
}

enum Mode {
    Open,
    Token(String),
    /// Users by name, and nkey users by public key.
    Users(HashMap<String, UserEntry>, HashMap<String, UserEntry>),
    /// Operator mode: the accounts of the JWT resolver, by public key.
    Operator(HashMap<String, JwtAccount>),
}

/// One set of rules, swapped whole on a config reload.
struct Rulebook {
    mode: Mode,
    no_auth_user: Option<String>,
    /// The client port's `verify_and_map` with `users` configured: clients are the user
    /// their certificate names.
    map_clients: bool,
    /// The same for leafnodes (`leafnodes { tls { verify_and_map } }`, the leafnodes block
    /// without credentials of its own).
    map_leafs: bool,
}

/// Decides whether CONNECT credentials are good and which account they open. The rules can be
/// replaced at run time (config reload); each decision reads them once.
pub struct Authenticator {
    rules: std::sync::RwLock<Arc<Rulebook>>,
}

/// Compare a presented secret with a configured one that may be a bcrypt hash.
fn secret_matches(configured: &str, presented: &str) -> bool {
    if configured.starts_with("$2a$")
        || configured.starts_with("$2b$")
        || configured.starts_with("$2y$")
    {
        return bcrypt::verify(presented, configured).unwrap_or(false);
    }
    // Constant-time over the presented length.
    let (a, b) = (configured.as_bytes(), presented.as_bytes());
    let mut diff = (a.len() != b.len()) as u8;
    for (i, x) in b.iter().enumerate() {
        diff |= x ^ a.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

/// A route's or gateway's CONNECT credentials (`user`, `pass`) against its block's
/// `authorization` (`token`, or `user` and `password`; nothing configured: anyone), every
/// secret compared in constant time (or with bcrypt) as client credentials are.
pub fn peer_credentials_ok(
    token: Option<&str>,
    user: Option<&str>,
    password: Option<&str>,
    presented_user: &str,
    presented_pass: &str,
) -> bool {
    if let Some(t) = token {
        return secret_matches(t, presented_pass) | secret_matches(t, presented_user);
    }
    match user {
        None => true,
        Some(u) => {
            secret_matches(u, presented_user)
                & password.is_some_and(|p| secret_matches(p, presented_pass))
        }
    }
}

/// How long a route or gateway may take to send CONNECT: its `authorization { timeout }`
/// (nats-server's default when 0).
pub fn peer_auth_timeout(configured: std::time::Duration) -> std::time::Duration {
    if configured.is_zero() {
        crate::config::DEFAULT_AUTH_TIMEOUT
    } else {
        configured
    }
}

impl Authenticator {
    pub fn new(o: &Options) -> Self {
        Authenticator {
            rules: std::sync::RwLock::new(Arc::new(Rulebook::new(o))),
        }
    }

    fn rules(&self) -> Arc<Rulebook> {
        self.rules.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replace the rules with those of `o` (config reload): new connections use them at once;
    /// connected clients re-check themselves with `authenticate` and `user_account`.
    pub fn replace(&self, o: &Options) {
        let r = Arc::new(Rulebook::new(o));
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = r;
    }

    pub fn required(&self) -> bool {
        self.rules().required()
    }

    /// Whether clients get a `nonce` in INFO (nkey users are configured, or operator mode),
    /// as nats-server.
    pub fn nonce_required(&self) -> bool {
        match &self.rules().mode {
            Mode::Users(_, keys) => !keys.is_empty(),
            Mode::Operator(_) => true,
            _ => false,
        }
    }

    /// Operator mode: whether the account of user JWT `token` now revokes it.
    pub fn jwt_revoked(&self, token: &str) -> bool {
        match &self.rules().mode {
            Mode::Operator(accounts) => operator::revoked(accounts, token),
            _ => false,
        }
    }

    /// Operator mode: the auth callout of user JWT `token`'s account, unless `raw` is one
    /// of its `auth_users` (`operator::callout`).
    pub fn jwt_callout(&self, token: &str, raw: &str) -> Option<crate::config::AuthCallout> {
        match &self.rules().mode {
            Mode::Operator(accounts) => operator::callout(accounts, token, raw),
            _ => None,
        }
    }

    /// Operator mode: whether `account`'s JWT enables an auth callout.
    pub fn account_has_callout(&self, account: &str) -> bool {
        match &self.rules().mode {
            Mode::Operator(accounts) => operator::has_callout(accounts, account),
            _ => false,
        }
    }

    /// Operator mode: whether `key` is `account` or one of its signing keys.
    pub fn signs_for(&self, account: &str, key: &str) -> bool {
        match &self.rules().mode {
            Mode::Operator(accounts) => operator::is_issuer(accounts, account, key),
            _ => false,
        }
    }

    /// Operator mode: place a user JWT the auth service issued in `account`
    /// (`operator::place`).
    pub fn place_callout_user(
        &self,
        account: &str,
        u: &mut crate::jwt::Claims,
    ) -> Result<(), String> {
        match &self.rules().mode {
            Mode::Operator(accounts) => operator::place(accounts, account, u),
            _ => Err(format!(
                "no valid account {account:?}: not in operator mode"
            )),
        }
    }

    /// The identity for these credentials, or `None` for an authorization violation.
    pub fn authenticate(&self, c: Credentials<'_>) -> Option<Identity> {
        self.rules().authenticate(c)
    }

    /// With users configured: `Some(Some(account))` for a known user (a name, or an nkey
    /// user's public key), `Some(None)` for a user that does not exist. `None` when the rules
    /// are not users-based.
    pub fn user_account(&self, name: &str) -> Option<Option<String>> {
        match &self.rules().mode {
            Mode::Users(users, keys) => Some(
                users
                    .get(name)
                    .or_else(|| keys.get(name))
                    .map(|e| e.account.clone()),
            ),
            _ => None,
        }
    }
}

impl Rulebook {
    fn new(o: &Options) -> Self {
        let mode = if let Some(op) = &o.operator {
            Mode::Operator(operator_accounts(op))
        } else if let Some(t) = &o.auth_token {
            Mode::Token(t.clone())
        } else if let Some(u) = &o.username {
            let mut m = HashMap::new();
            m.insert(
                u.clone(),
                UserEntry {
                    password: o.password.clone().unwrap_or_default(),
                    account: crate::account::GLOBAL_ACCOUNT.into(),
                    perms: None,
                    types: Vec::new(),
                },
            );
            Mode::Users(m, HashMap::new())
        } else if !o.users.is_empty() || !o.nkeys.is_empty() {
            let entry = |password: &str,
                         account: &Option<String>,
                         p: &Option<Permissions>,
                         types: &[String]| UserEntry {
                password: password.to_string(),
                account: account
                    .clone()
                    .unwrap_or_else(|| crate::account::GLOBAL_ACCOUNT.into()),
                perms: p.as_ref().map(|p| Arc::new(CompiledPerms::from_config(p))),
                types: types.to_vec(),
            };
            Mode::Users(
                o.users
                    .iter()
                    .map(|u| {
                        let e = entry(&u.password, &u.account, &u.permissions, &u.connection_types);
                        (u.username.clone(), e)
                    })
                    .collect(),
                o.nkeys
                    .iter()
                    .map(|u| {
                        let e = entry("", &u.account, &u.permissions, &u.connection_types);
                        (u.nkey.clone(), e)
                    })
                    .collect(),
            )
        } else {
            Mode::Open
        };
        // As nats-server: mapping looks in the `users` list (not a lone `user`).
        let users = o.operator.is_none()
            && o.auth_token.is_none()
            && o.username.is_none()
            && !o.users.is_empty();
        let leaf_maps = o.leafnodes.as_ref().is_some_and(|l| {
            l.port.is_some()
                && l.tls.as_ref().is_some_and(|t| t.verify_and_map)
                && l.username.is_none()
                && l.nkey.is_none()
                && l.token.is_none()
                && l.users.is_empty()
        });
        Rulebook {
            mode,
            no_auth_user: o.no_auth_user.clone(),
            map_clients: users && o.tls.as_ref().is_some_and(|t| t.verify_and_map),
            map_leafs: users && leaf_maps,
        }
    }

    fn required(&self) -> bool {
        !matches!(self.mode, Mode::Open)
    }

    /// nats-server 2.15: a user without a password that a port's `verify_and_map` could
    /// select is a certificate identity; a port that does not map (`leaf`: the leafnode
    /// port, else the client port) does not let it in by name (the `no_auth_user` excepted).
    fn cert_only(&self, name: &str, e: &UserEntry, leaf: bool) -> bool {
        let allowed = |t: &str| e.types.is_empty() || e.types.iter().any(|x| x == t);
        let mapped_elsewhere = (leaf && self.map_clients && allowed("STANDARD"))
            || (!leaf && self.map_leafs && allowed("LEAFNODE"));
        mapped_elsewhere && e.password.is_empty() && self.no_auth_user.as_deref() != Some(name)
    }

    fn authenticate(&self, c: Credentials<'_>) -> Option<Identity> {
        let open = |user: &str| Identity {
            user: user.to_string(),
            account: crate::account::GLOBAL_ACCOUNT.into(),
            perms: None,
            expires: 0,
            jwt_limits: None,
            name_tag: String::new(),
        };
        match &self.mode {
            Mode::Operator(accounts) => match jwt_user(accounts, &c) {
                Ok(id) => Some(id),
                Err(why) => {
                    tracing::debug!("operator mode: {why}");
                    None
                }
            },
            Mode::Open => Some(open(c.user.unwrap_or(""))),
            Mode::Token(t) => {
                let presented = c.token.or(c.pass)?;
                secret_matches(t, presented).then(|| open(""))
            }
            Mode::Users(users, keys) => {
                // nats-server's order: a presented nkey (or `no_auth_user` naming an nkey
                // user, for a client that presents nothing) is looked up among the nkey
                // users first, and must have signed the nonce.
                let nothing = c.user.is_none() && c.pass.is_none() && c.token.is_none();
                let nkey = c.nkey.or_else(|| {
                    let n = self.no_auth_user.as_deref()?;
                    (nothing && keys.contains_key(n)).then_some(n)
                });
                if let Some(key) = nkey.filter(|_| !keys.is_empty()) {
                    let e = keys.get(key).filter(|e| e.allows(&c))?;
                    let by_no_auth = c.nkey.is_none();
                    if !by_no_auth && !nonce_signed(key, c.nonce, c.sig) {
                        return None;
                    }
                    return Some(e.identity(key));
                }
                if (self.map_clients && !c.leaf) || (self.map_leafs && c.leaf) {
                    let Some(cert) = c.cert else {
                        tracing::debug!("User required in cert, no TLS connection state");
                        return None;
                    };
                    let (name, e) = certmap::mapped_user(cert, users, &c)?;
                    if let Some(u) = c.user {
                        tracing::warn!(
                            "User {u:?} found in connect proto, but user required from cert"
                        );
                    }
                    return Some(e.identity(name));
                }
                let (name, pass) = match (c.user, c.token) {
                    (Some(u), _) if !u.is_empty() => (u, c.pass.unwrap_or("")),
                    (_, None) if c.pass.is_none() => (self.no_auth_user.as_deref()?, ""),
                    _ => return None,
                };
                let e = users.get(name).filter(|e| e.allows(&c))?;
                let by_no_auth = c.user.is_none_or(str::is_empty);
                if self.cert_only(name, e, c.leaf) {
                    tracing::debug!("User {name:?} requires a client certificate");
                    return None;
                }
                if !by_no_auth && !secret_matches(&e.password, pass) {
                    return None;
                }
                Some(e.identity(name))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_credentials() {
        let ok = peer_credentials_ok;
        // Nothing configured: anyone.
        assert!(ok(None, None, None, "", ""));
        // A token: in pass or user.
        assert!(ok(Some("tok"), None, None, "", "tok"));
        assert!(ok(Some("tok"), None, None, "tok", ""));
        assert!(!ok(Some("tok"), None, None, "to", "tokk"));
        // User and password, plain or bcrypt.
        assert!(ok(None, Some("r"), Some("pw"), "r", "pw"));
        assert!(!ok(None, Some("r"), Some("pw"), "r", "pW"));
        assert!(!ok(None, Some("r"), Some("pw"), "x", "pw"));
        assert!(!ok(None, Some("r"), None, "r", ""));
        let hash = bcrypt::hash("pw", 4).expect("hash");
        assert!(ok(None, Some("r"), Some(&hash), "r", "pw"));
        assert!(!ok(None, Some("r"), Some(&hash), "r", "px"));
    }
    use crate::config::User;

    fn creds<'a>(u: Option<&'a str>, p: Option<&'a str>, t: Option<&'a str>) -> Credentials<'a> {
        Credentials {
            user: u,
            pass: p,
            token: t,
            ..Credentials::default()
        }
    }

    #[test]
    fn token_and_single_user() {
        let a = Authenticator::new(&Options {
            auth_token: Some("s3cr3t".into()),
            ..Options::default()
        });
        assert!(a.authenticate(creds(None, None, Some("s3cr3t"))).is_some());
        assert!(a.authenticate(creds(None, None, Some("nope"))).is_none());
        assert!(a.authenticate(creds(None, None, None)).is_none());
        let a = Authenticator::new(&Options {
            username: Some("u".into()),
            password: Some("p".into()),
            ..Options::default()
        });
        assert!(a.authenticate(creds(Some("u"), Some("p"), None)).is_some());
        assert!(a.authenticate(creds(Some("u"), Some("x"), None)).is_none());
        assert!(a.authenticate(creds(Some("x"), Some("p"), None)).is_none());
    }

    #[test]
    fn bcrypt_and_accounts() {
        let hash = bcrypt::hash("pw", 4).expect("hash");
        let o = Options {
            accounts: vec!["A".into()],
            users: vec![User {
                username: "a".into(),
                password: hash,
                account: Some("A".into()),
                permissions: None,
                connection_types: Vec::new(),
            }],
            ..Options::default()
        };
        let a = Authenticator::new(&o);
        let id = a
            .authenticate(creds(Some("a"), Some("pw"), None))
            .expect("auth");
        assert_eq!(id.account, "A");
        assert!(a
            .authenticate(creds(Some("a"), Some("pw2"), None))
            .is_none());
    }

    #[test]
    fn replace_rules() {
        let a = Authenticator::new(&Options::default());
        assert!(!a.required());
        assert_eq!(a.user_account("x"), None);
        a.replace(&Options {
            users: vec![User {
                username: "x".into(),
                password: "y".into(),
                ..User::default()
            }],
            ..Options::default()
        });
        assert!(a.required());
        assert_eq!(a.user_account("x"), Some(Some("$G".into())));
        assert_eq!(a.user_account("z"), Some(None));
        assert!(a.authenticate(creds(None, None, None)).is_none());
        assert!(a.authenticate(creds(Some("x"), Some("y"), None)).is_some());
    }

    #[test]
    fn nkey_users_sign_the_nonce() {
        let kp = nkeys::KeyPair::new_user();
        let key = kp.public_key();
        let o = Options {
            accounts: vec!["A".into()],
            nkeys: vec![crate::config::NkeyUser {
                nkey: key.clone(),
                account: Some("A".into()),
                permissions: None,
                connection_types: Vec::new(),
            }],
            users: vec![User {
                username: "u".into(),
                password: "p".into(),
                ..User::default()
            }],
            ..Options::default()
        };
        let a = Authenticator::new(&o);
        assert!(a.required() && a.nonce_required());
        let nonce = b"abcdefghijklmno";
        let raw = kp.sign(nonce).expect("sign");
        let url = data_encoding::BASE64URL_NOPAD.encode(&raw);
        let std = data_encoding::BASE64.encode(&raw);
        let with = |nkey: Option<&'static str>, sig: Option<&str>| -> Option<Identity> {
            let nkey = nkey.map(|_| key.as_str());
            a.authenticate(Credentials {
                nkey,
                sig,
                nonce,
                ..Credentials::default()
            })
        };
        let id = with(Some(""), Some(&url)).expect("base64url signature");
        assert_eq!((id.user.as_str(), id.account.as_str()), (key.as_str(), "A"));
        assert!(with(Some(""), Some(&std)).is_some(), "standard base64 too");
        // Missing, malformed, truncated, or another key's signature; another nonce.
        assert!(with(Some(""), None).is_none());
        assert!(with(Some(""), Some("!!not base64!!")).is_none());
        assert!(with(Some(""), Some(&url[..20])).is_none());
        let other = nkeys::KeyPair::new_user().sign(nonce).expect("sign");
        let other = data_encoding::BASE64URL_NOPAD.encode(&other);
        assert!(with(Some(""), Some(&other)).is_none());
        assert!(a
            .authenticate(Credentials {
                nkey: Some(&key),
                sig: Some(&url),
                nonce: b"another-nonce-x",
                ..Credentials::default()
            })
            .is_none());
        // An unknown or malformed nkey; users still log in by name.
        for k in [nkeys::KeyPair::new_user().public_key(), "UABC".into()] {
            let c = Credentials {
                nkey: Some(&k),
                sig: Some(&url),
                nonce,
                ..Credentials::default()
            };
            assert!(a.authenticate(c).is_none());
        }
        assert!(a.authenticate(creds(Some("u"), Some("p"), None)).is_some());
        assert_eq!(a.user_account(&key), Some(Some("A".into())));
        // Without nkey users there is no nonce, and a presented nkey is ignored.
        let plain = Authenticator::new(&Options {
            users: o.users.clone(),
            ..Options::default()
        });
        assert!(!plain.nonce_required());
    }

    #[test]
    fn permissions() {
        let p = CompiledPerms::new(&Permissions {
            allow_responses: None,
            publish: Some(SubjectPermission {
                allow: vec!["foo.*".into(), "bar".into()],
                deny: vec!["foo.secret".into()],
            }),
            subscribe: Some(SubjectPermission {
                allow: vec![],
                deny: vec!["private.>".into()],
            }),
        });
        assert!(p.can_publish(b"foo.x"));
        assert!(p.can_publish(b"bar"));
        assert!(!p.can_publish(b"foo.secret"));
        assert!(!p.can_publish(b"baz"));
        assert!(p.can_subscribe(b"public"));
        assert!(!p.can_subscribe(b"private.x"));
        assert!(p.can_subscribe(b">"));
        assert!(p.deny_filter(b">").is_some());
        assert!(p.deny_filter(b"public.*").is_none());
    }
}
