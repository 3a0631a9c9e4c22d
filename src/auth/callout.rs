//! Auth callout (nats-server 2.10+, `auth_callout.go`): a client that is not one of the
//! service's own `auth_users` is authorized by a service that answers `$SYS.REQ.USER.AUTH`
//! in the callout account — the `authorization { auth_callout }` block's, or in operator
//! mode the account of the client's user JWT when that account's JWT enables external
//! authorization (the service's answers are then signed by the account or a signing key of
//! it, and the user JWT it issues places the user in its issuer's account, which must be the
//! callout account or one of its `allowed_accounts`). The server sends an authorization request
//! JWT it signs with its own nkey (the server id); the service answers with an
//! authorization response JWT carrying a user JWT (signed by the configured `issuer`), or an
//! error. With `xkey` both travel sealed with the server's and the service's curve keys.
//! Every refusal reason is logged as a warning with nats-server's text; the client only
//! ever sees `Authorization Violation`.

use super::{operator, Identity};
use crate::account::GLOBAL_ACCOUNT;
use crate::config::AuthCallout;
use crate::deliver::Msg;
use crate::jwt;
use crate::server::ServerShared;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the requests go, in the callout account.
pub const SUBJECT: &str = "$SYS.REQ.USER.AUTH";
/// The request's `aud`.
const AUDIENCE: &str = "nats-authorization-request";
/// The header naming the server's curve key on an encrypted request.
const XKEY_HEADER: &str = "Nats-Server-Xkey";

/// The user a CONNECT names for the `auth_users` check (nats-server's `getRawAuthUser`):
/// its nkey, else its user name, else the key of its user JWT when that JWT authenticated
/// (`jwt_subject`), else `[REDACTED]` for a token.
pub fn raw_user(c: &super::Credentials<'_>, jwt_subject: Option<&str>) -> String {
    match (c.nkey.or(c.user).or(jwt_subject), c.token) {
        (Some(u), _) => u.to_string(),
        (None, Some(_)) => "[REDACTED]".into(),
        _ => String::new(),
    }
}

/// Whether this CONNECT is decided by the service (nats-server's check after its own
/// authentication): every client but the `auth_users`, whether it authenticated or not —
/// except one authenticated into an account outside `allowed_accounts`, which keeps that.
pub fn wanted(c: &AuthCallout, authed: Option<&Identity>, raw_user: &str) -> bool {
    if let Some(id) = authed {
        let delegated = c.allowed_accounts.is_empty() || c.allowed_accounts.contains(&id.account);
        if id.account != GLOBAL_ACCOUNT && !delegated {
            return false;
        }
    }
    !c.auth_users.iter().any(|u| u == raw_user)
}

/// The kind of connection asking (`client_info.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Client,
    Leaf,
}

/// What the request says about the client (`client_info`, `connect_opts`).
pub struct Client {
    pub kind: Kind,
    pub host: String,
    pub cid: u64,
    pub user: String,
    pub name: String,
    /// The CONNECT's credentials and identification, as the jwt library's `ConnectOptions`.
    pub connect: Value,
    /// This connection's nonce (sent when the CONNECT signed it: `connect_opts` has `sig`).
    pub nonce: String,
    /// `client_tls` for a TLS client ([`client_tls`]).
    pub tls: Option<Value>,
}

/// `connect_opts` (the jwt library's `ConnectOptions`) from a CONNECT (a client's or a
/// leaf's): its credential and identification fields that are set, and `protocol` always.
pub fn connect_opts(connect: &impl serde::Serialize) -> Value {
    let c = serde_json::to_value(connect).unwrap_or_default();
    let mut v = json!({"protocol": c["protocol"].as_i64().unwrap_or(0)});
    let keys = [
        "jwt",
        "nkey",
        "sig",
        "auth_token",
        "user",
        "pass",
        "name",
        "lang",
        "version",
    ];
    for k in keys {
        if let Some(s) = c[k].as_str().filter(|s| !s.is_empty()) {
            v[k] = s.into();
        }
    }
    v
}

/// A TLS client's `client_tls` (the jwt library's `ClientTLS`): the version and cipher suite
/// as `/connz` names them, and the certificates it presented as PEM — as the chain they
/// were verified along when the port verifies them (`verified_chains`: the presented ones,
/// then the issuing CAs of `tls.ca_file`), else as presented (`certs`).
pub fn client_tls(
    version: &str,
    cipher: &str,
    chain: &[Vec<u8>],
    tls: Option<&crate::tls::TlsOpts>,
) -> Value {
    use crate::tls::cert::{pem, verified_chain};
    let mut v = json!({"version": version, "cipher": cipher});
    if chain.is_empty() {
        return v;
    }
    match tls.filter(|t| t.verify || t.verify_and_map) {
        Some(t) => {
            let cas = t
                .ca_file
                .as_ref()
                .and_then(|f| crate::tls::der_certs(f).ok());
            let full = verified_chain(chain, &cas.unwrap_or_default());
            let pems: Vec<String> = full.iter().map(|c| pem(c)).collect();
            v["verified_chains"] = json!([pems]);
        }
        None => {
            v["certs"] = chain.iter().map(|c| pem(c)).collect::<Vec<_>>().into();
        }
    }
    v
}

/// `client_tls` for connection `conn` when it is over TLS (its meta has the session: see
/// `TlsStream::record`), checked against its port's `tls` block.
pub fn tls_of(conn: &crate::conn::Conn, tls: Option<&crate::tls::TlsOpts>) -> Option<Value> {
    let (version, cipher, chain) = {
        let m = conn.meta();
        if m.tls_version.is_empty() {
            return None;
        }
        let chain = m.peer_chain.clone().unwrap_or_default();
        (m.tls_version.clone(), m.tls_cipher_suite.clone(), chain)
    };
    Some(client_tls(&version, &cipher, &chain, tls))
}

/// Ask the service and check its answer: the identity the user JWT in it gives, or the
/// reason (already logged) the client is refused.
pub async fn call(
    srv: &Arc<ServerShared>,
    cfg: &AuthCallout,
    client: Client,
    timeout: Duration,
) -> Result<Identity, String> {
    let result = ask(srv, cfg, client, timeout).await;
    match &result {
        Err(Refusal::Warn(e)) => tracing::warn!("{e}"),
        Err(Refusal::Debug(e)) => tracing::debug!("{e}"),
        Ok(_) => {}
    }
    result.map_err(|r| match r {
        Refusal::Warn(e) | Refusal::Debug(e) => e,
    })
}

enum Refusal {
    Warn(String),
    Debug(String),
}

async fn ask(
    srv: &Arc<ServerShared>,
    cfg: &AuthCallout,
    client: Client,
    timeout: Duration,
) -> Result<Identity, Refusal> {
    let Some(acc) = srv.accounts.get(&cfg.account) else {
        return Err(Refusal::Warn(format!(
            "No valid account {:?} for auth callout request: account not found",
            cfg.account
        )));
    };
    let service_xkey = match cfg.xkey.as_deref().map(nkeys::XKey::from_public_key) {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(e)) => return Err(Refusal::Warn(format!("Invalid auth callout xkey: {e}"))),
    };
    // The user the answer must be for: a fresh key each time, so no answer can be replayed.
    let user_nkey = nkeys::KeyPair::new_user().public_key();
    let token = request_jwt(srv, cfg, &client, &user_nkey, timeout).map_err(|e| {
        Refusal::Warn(format!(
            "Error encoding auth request claim on account {:?}: {e}",
            acc.name
        ))
    })?;
    let (payload, header) = match &service_xkey {
        Some(to) => {
            let sealed = srv.keys.xkp.seal(token.as_bytes(), to).map_err(|e| {
                Refusal::Warn(format!(
                    "Error encrypting auth request claim on account {:?}: {e}",
                    acc.name
                ))
            })?;
            let h = format!(
                "NATS/1.0\r\n{XKEY_HEADER}: {}\r\n\r\n",
                srv.keys.xkp.public_key()
            );
            (sealed, Some(h))
        }
        None => (token.into_bytes(), None),
    };
    let inbox = match srv.sys.get() {
        Some(sys) => sys.inbox_prefix.clone(),
        None => "$SYS._INBOX_.".to_string(),
    };
    let reply = format!("{inbox}{}", crate::util::ids::alnum(22));
    let (tx, rx) = tokio::sync::oneshot::channel::<bytes::Bytes>();
    let tx = Mutex::new(Some(tx));
    let handler: crate::account::Handler = Arc::new(move |_, m: &Msg<'_>| {
        let sender = tx.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(t) = sender {
            let _ = t.send(bytes::Bytes::copy_from_slice(m.payload));
        }
    });
    let sub = srv
        .subscribe_internal(&acc, &reply, None, handler)
        .map_err(|e| {
            Refusal::Warn(format!(
                "Error setting up reply subscription for auth request: {e}"
            ))
        })?;
    srv.publish_internal(
        &acc,
        &Msg {
            subject: SUBJECT.as_bytes(),
            reply: Some(reply.as_bytes()),
            header: header.as_deref().map(str::as_bytes),
            payload: &payload,
        },
    );
    let answer = tokio::time::timeout(timeout, rx).await;
    srv.unsubscribe_internal(&acc, &sub);
    let Ok(Ok(answer)) = answer else {
        return Err(Refusal::Debug(format!(
            "Authorization callout response not received in time on account {:?}",
            acc.name
        )));
    };
    let operator = srv.opts.operator.is_some();
    // In operator mode a plain answer is signed by the account or one of its signing keys.
    let known = |k: &str| !operator || k == acc.name || srv.auth.signs_for(&acc.name, k);
    let (user, aud) = response_user(
        srv,
        &acc.name,
        &answer,
        service_xkey.as_ref(),
        &user_nkey,
        known,
    )
    .map_err(|e| Refusal::Warn(title_case(&e)))?;
    if operator {
        // The account the user goes to may not be loaded yet: fetched as for a CONNECT.
        let target = user.account().to_string();
        if srv.accounts.get(&target).is_none() && crate::sys::resolver::may_fetch(srv, &target) {
            crate::sys::resolver::fetch(srv, &target).await;
        }
    }
    identity(srv, cfg, &acc.name, (user, aud), &client, &user_nkey).map_err(Refusal::Warn)
}

/// The authorization request JWT, signed by the server's key.
fn request_jwt(
    srv: &ServerShared,
    cfg: &AuthCallout,
    c: &Client,
    user_nkey: &str,
    timeout: Duration,
) -> Result<String, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut server = json!({
        "name": srv.name,
        "host": srv.opts.host,
        "id": srv.id,
        "version": crate::config::COMPAT_VERSION,
    });
    if let Some(cl) = &srv.cluster {
        server["cluster"] = cl.name().into();
    }
    if !srv.opts.server_tags.is_empty() {
        server["tags"] = json!(srv.opts.server_tags);
    }
    if cfg.xkey.is_some() {
        server["xkey"] = srv.keys.xkp.public_key().into();
    }
    // nats-server's `kindString` and, for clients only, `clientTypeString`.
    let mut info = match c.kind {
        Kind::Client => json!({"host": c.host, "id": c.cid, "kind": "Client", "type": "nats"}),
        Kind::Leaf => json!({"host": c.host, "id": c.cid, "kind": "Leafnode"}),
    };
    let signed = c.connect.get("sig").is_some();
    let nonce = if signed { c.nonce.as_str() } else { "" };
    for (k, v) in [
        ("user", c.user.as_str()),
        ("name", &c.name),
        ("nonce", nonce),
    ] {
        if !v.is_empty() {
            info[k] = v.into();
        }
    }
    let jti: [u8; 32] = rand::random();
    let mut nats = json!({
        "server_id": server,
        "user_nkey": user_nkey,
        "client_info": info,
        "connect_opts": c.connect,
        "type": "authorization_request",
        "version": 2,
    });
    if let Some(t) = &c.tls {
        nats["client_tls"] = t.clone();
    }
    let claims = json!({
        "jti": data_encoding::BASE32_NOPAD.encode(&jti),
        "iat": now,
        "exp": now + timeout.as_secs().max(1),
        "sub": cfg.issuer,
        "aud": AUDIENCE,
        "nats": nats,
    });
    jwt::encode(&claims, &srv.keys.kp)
}

/// The user JWT of the service's answer (nats-server's `decodeResponse`), decrypted when
/// the request was sealed and the answer is not a plain JWT; with the user JWT's `aud`.
fn response_user(
    srv: &ServerShared,
    account: &str,
    answer: &[u8],
    service_xkey: Option<&nkeys::XKey>,
    user_nkey: &str,
    known_signer: impl Fn(&str) -> bool,
) -> Result<(jwt::Claims, String), String> {
    if answer.is_empty() {
        return Err(format!(
            "auth callout violation: \"no reason supplied\" on account {account:?}"
        ));
    }
    let mut msg = answer.to_vec();
    let sealed = service_xkey.is_some() && !answer.starts_with(b"eyJ");
    if let Some(from) = service_xkey.filter(|_| sealed) {
        msg = srv.keys.xkp.open(answer, from).map_err(|e| {
            format!("error decrypting auth callout response on account {account:?}: {e}")
        })?;
    }
    let token = String::from_utf8_lossy(&msg).trim().to_string();
    let r = jwt::decode_generic(&token)?;
    if r["nats"]["type"].as_str() != Some("authorization_response") {
        return Err("not an authorization request claim".into());
    }
    let field = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let (sub, aud) = (field(&r, "sub"), field(&r, "aud"));
    let (user_jwt, error) = (field(&r["nats"], "jwt"), field(&r["nats"], "error"));
    let issuer_account = field(&r["nats"], "issuer_account");
    let is = |k: &str, t: nkeys::KeyPairType| jwt::key_type(k) == Some(t);
    let issue = if !is(&sub, nkeys::KeyPairType::User) {
        Some("Subject must be a user public key")
    } else if !is(&aud, nkeys::KeyPairType::Server) {
        Some("Audience must be a server public key")
    } else if error.is_empty() && user_jwt.is_empty() {
        Some("Error or Jwt is required")
    } else if !error.is_empty() && !user_jwt.is_empty() {
        Some("Only Error or Jwt can be set")
    } else if !issuer_account.is_empty() && !is(&issuer_account, nkeys::KeyPairType::Account) {
        Some("issuer_account is not an account public key")
    } else {
        time_issue(&r)
    };
    if let Some(i) = issue {
        return Err(format!("authorization response had validation errors: {i}"));
    }
    if sub != user_nkey {
        return Err(
            "auth callout violation: auth callout response is not for expected user".into(),
        );
    }
    if aud != srv.id {
        return Err("auth callout violation: auth callout response is not for server".into());
    }
    if !error.is_empty() {
        return Err(format!("auth callout service returned an error: {error}"));
    }
    let signer = match issuer_account.as_str() {
        "" => field(&r, "iss"),
        a => a.to_string(),
    };
    if !sealed && !known_signer(&signer) {
        return Err("auth callout signing key is unknown".into());
    }
    let user = jwt::decode(&user_jwt, jwt::Kind::User)?;
    // Checked by `decode`; read again for the claim it does not keep.
    let aud = jwt::unverified_claims(&user_jwt)?["aud"]
        .as_str()
        .unwrap_or("")
        .to_string();
    Ok((user, aud))
}

/// A claim's `exp`/`nbf` against now (the jwt library's `ClaimsData.Validate`).
fn time_issue(claims: &Value) -> Option<&'static str> {
    let field = |k: &str| claims[k].as_i64().unwrap_or(0);
    jwt::time_check(field("exp"), field("nbf"), jwt::now()).err()
}

/// The user the answer names, checked as nats-server's `processReply` in config mode.
fn identity(
    srv: &ServerShared,
    cfg: &AuthCallout,
    account: &str,
    (u, placement): (jwt::Claims, String),
    client: &Client,
    user_nkey: &str,
) -> Result<Identity, String> {
    if let Err(e) = u.time_check(jwt::now()) {
        return Err(format!("Error validating user JWT: {e}"));
    }
    if u.subject != user_nkey {
        return Err(format!(
            "Expected authorized user of {user_nkey:?} but got {:?} on account {account:?}",
            u.subject
        ));
    }
    let expires = match operator::connect_window(&u).map_err(|e| title_case(&e))? {
        jwt::times::Window::Outside => {
            tracing::error!("Outside connect times");
            return Err(format!(
                "Authorized user on account {account:?} outside of valid connect times"
            ));
        }
        jwt::times::Window::Until(end) if u.expires <= 0 || end < u.expires => end,
        _ => u.expires,
    };
    let conn_type = match client.kind {
        Kind::Client => "STANDARD",
        Kind::Leaf => "LEAFNODE",
    };
    if !jwt::user::connection_type_allowed(&u, conn_type) {
        return Err(format!(
            "Authorized user on account {account:?} using invalid connection type"
        ));
    }
    let operator = srv.opts.operator.is_some();
    if !operator && !u.str("issuer_account").is_empty() {
        return Err(format!(
            "Error non operator mode account {account:?}: attempted to use issuer_account"
        ));
    }
    let jwt_issuer = u.account().to_string();
    if jwt_issuer != cfg.issuer && !operator {
        return Err(format!(
            "Wrong issuer for auth callout response on account {account:?}, expected {:?} got {:?}",
            cfg.issuer, jwt_issuer
        ));
    }
    let any =
        matches!(cfg.allowed_accounts.as_slice(), [a] if a == jwt::authorization::ANY_ACCOUNT);
    if jwt_issuer != cfg.issuer && !any && !cfg.allowed_accounts.contains(&jwt_issuer) {
        return Err(format!(
            "Account {:?} not permitted as valid account option for auth callout for account {account:?}",
            u.issuer
        ));
    }
    // In operator mode the user's issuer places it in an account; else its audience does.
    let placement = if operator { jwt_issuer } else { placement };
    if srv.accounts.get(&placement).is_none() {
        return Err(format!(
            "No valid account {placement:?} for auth callout response on account {account:?}: account not found"
        ));
    }
    let mut u = u;
    if operator {
        srv.auth
            .place_callout_user(&placement, &mut u)
            .map_err(|e| title_case(&e))?;
    }
    Ok(Identity {
        user: if u.name.is_empty() {
            client.user.clone()
        } else {
            u.name.clone()
        },
        account: placement,
        perms: operator::perms_of(&u.nats).map(Arc::new),
        expires,
        jwt_limits: None,
        name_tag: String::new(),
    })
}

/// nats-server's `titleCase`: the first letter upper-cased.
fn title_case(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> AuthCallout {
        AuthCallout {
            issuer: nkeys::KeyPair::new_account().public_key(),
            auth_users: vec!["auth".into()],
            account: "AUTH".into(),
            xkey: None,
            allowed_accounts: Vec::new(),
        }
    }

    fn id(account: &str) -> Identity {
        Identity {
            user: "u".into(),
            account: account.into(),
            perms: None,
            expires: 0,
            jwt_limits: None,
            name_tag: String::new(),
        }
    }

    #[test]
    fn every_client_but_the_auth_users_is_called_out() {
        let c = cfg();
        assert!(wanted(&c, None, "bob"));
        assert!(wanted(&c, None, ""));
        assert!(!wanted(&c, None, "auth"));
        // Authenticated by the config is not enough: the service still decides.
        assert!(wanted(&c, Some(&id("AUTH")), "alice"));
        assert!(!wanted(&c, Some(&id("AUTH")), "auth"));
    }

    #[test]
    fn allowed_accounts_keep_other_accounts_users_out_of_the_callout() {
        let c = AuthCallout {
            allowed_accounts: vec!["APP".into()],
            ..cfg()
        };
        assert!(wanted(&c, Some(&id("APP")), "alice"));
        assert!(!wanted(&c, Some(&id("OTHER")), "carol"));
        // `$G` (a user without an account) and failures are always called out.
        assert!(wanted(&c, Some(&id(GLOBAL_ACCOUNT)), "dave"));
        assert!(wanted(&c, None, "eve"));
    }

    #[test]
    fn raw_user_is_nkey_then_name_then_redacted_token() {
        let c = |nkey, user, token| super::super::Credentials {
            user,
            pass: None,
            token,
            nkey,
            sig: None,
            nonce: b"",
            jwt: None,
            host: None,
            leaf: false,
            cert: None,
        };
        assert_eq!(raw_user(&c(Some("UK"), Some("n"), None), Some("UJ")), "UK");
        assert_eq!(raw_user(&c(None, Some("n"), Some("t")), None), "n");
        assert_eq!(raw_user(&c(None, None, Some("t")), Some("UJ")), "UJ");
        assert_eq!(raw_user(&c(None, None, Some("t")), None), "[REDACTED]");
        assert_eq!(raw_user(&c(None, None, None), None), "");
    }

    #[test]
    fn title_case_upper_cases_the_first_letter() {
        assert_eq!(title_case("auth callout"), "Auth callout");
        assert_eq!(title_case(""), "");
    }
}
