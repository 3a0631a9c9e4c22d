//! Auth callout in operator mode, on natsd and nats-server 2.15.1 alike: account AUTH's JWT
//! enables external authorization (`authorization { auth_users, allowed_accounts, xkey }`).
//! Its service user (one of `auth_users`) logs in with its own JWT; every other user of AUTH
//! — a bearer "sentinel" JWT, or the `default_sentinel` for a client without one — is sent
//! to the service, which answers with a user JWT that places the client in its issuer's
//! account: AUTH's allowed account TEST (signed by TEST, its signing key, or its scoped
//! signing key, whose template then gives the permissions), never an account not allowed.

mod common;

use common::auth::{
    account_jwt, answers, bare_user_jwt, creds, logged_in, open_limits, pub_denied, Target,
};
use common::Raw;
use futures::StreamExt;
use natsd::jwt::{decode_generic, encode};
use nkeys::{KeyPair, XKey};
use serde_json::{json, Value};

/// The operator, its accounts and keys.
struct World {
    op: KeyPair,
    sys: KeyPair,
    /// The callout account and its service user.
    auth: KeyPair,
    service: KeyPair,
    /// The account the service places users in, its signing key and scoped signing key.
    test: KeyPair,
    test_signer: KeyPair,
    test_scoped: KeyPair,
    /// A key of an account AUTH does not allow.
    stranger: KeyPair,
    xkey: XKey,
}

impl World {
    fn new() -> World {
        World {
            op: KeyPair::new_operator(),
            sys: KeyPair::new_account(),
            auth: KeyPair::new_account(),
            service: KeyPair::new_user(),
            test: KeyPair::new_account(),
            test_signer: KeyPair::new_account(),
            test_scoped: KeyPair::new_account(),
            stranger: KeyPair::new_account(),
            xkey: XKey::new(),
        }
    }

    /// A bearer user JWT of AUTH that may do nothing by itself.
    fn sentinel(&self) -> String {
        let user = KeyPair::new_user();
        bare_user_jwt(
            &user,
            &self.auth,
            json!({"bearer_token": true, "pub": {"deny": [">"]}, "sub": {"deny": [">"]},
                "subs": -1, "data": -1, "payload": -1}),
        )
    }

    fn conf(&self, xkey: bool) -> String {
        let opc = json!({"sub": self.op.public_key(), "name": "O", "nats": {"type": "operator",
            "version": 2, "system_account": self.sys.public_key()}});
        let op_jwt = encode(&opc, &self.op).expect("operator JWT");
        let mut authorization = json!({"auth_users": [self.service.public_key()],
            "allowed_accounts": [self.test.public_key()]});
        if xkey {
            authorization["xkey"] = self.xkey.public_key().into();
        }
        let auth = json!({"sub": self.auth.public_key(), "name": "AUTH", "nats": {
            "type": "account", "version": 2, "limits": open_limits(),
            "authorization": authorization}});
        let template = json!({"pub": {"allow": ["foo.>", "$SYS.REQ.USER.INFO"]},
            "sub": {"allow": ["foo.>", "_INBOX.>"]}, "subs": -1, "data": -1, "payload": -1});
        let test = json!({"sub": self.test.public_key(), "name": "TEST", "nats": {
            "type": "account", "version": 2, "limits": open_limits(),
            "signing_keys": [self.test_signer.public_key(), {"kind": "user_scope",
                "key": self.test_scoped.public_key(), "role": "foo", "template": template}]}});
        format!(
            "operator: \"{op_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
             resolver_preload {{\n  {sys}: \"{}\"\n  {a}: \"{}\"\n  {t}: \"{}\"\n}}\n\
             default_sentinel: \"{}\"\n",
            account_jwt(&self.sys, &self.op, open_limits(), &[]),
            encode(&auth, &self.op).expect("AUTH JWT"),
            encode(&test, &self.op).expect("TEST JWT"),
            self.sentinel(),
            sys = self.sys.public_key(),
            a = self.auth.public_key(),
            t = self.test.public_key(),
        )
    }

    /// The service's answer to request `req` (a decoded request JWT): by the CONNECT's
    /// token, a user JWT for the requested user key, or an error.
    fn answer(&self, req: &Value) -> String {
        let n = &req["nats"];
        assert_eq!(req["sub"], self.auth.public_key().as_str(), "{req}");
        let user_nkey = n["user_nkey"].as_str().expect("user_nkey");
        let server_id = n["server_id"]["id"].as_str().expect("server id");
        let test = self.test.public_key();
        let user = |name: &str, issuer: &KeyPair, issuer_account: Option<&str>, nats: Value| {
            let mut nats = nats;
            nats["type"] = "user".into();
            nats["version"] = 2.into();
            if let Some(a) = issuer_account {
                nats["issuer_account"] = a.into();
            }
            let c = json!({"sub": user_nkey, "name": name, "nats": nats});
            encode(&c, issuer).expect("user JWT")
        };
        let plain = json!({"subs": -1, "data": -1, "payload": -1});
        let mut signer = &self.auth;
        let stranger_signer = KeyPair::new_account();
        let jwt = match n["connect_opts"]["auth_token"].as_str().unwrap_or("") {
            "secret" => Some(user("dlc", &self.test, None, plain)),
            "default" => Some(user("default", &self.test, None, plain)),
            "signer" => Some(user("sk", &self.test_signer, Some(&test), plain)),
            "scoped" => Some(user("scoped", &self.test_scoped, Some(&test), json!({}))),
            "badscoped" => Some(user("bad", &self.test_scoped, Some(&test), plain)),
            "stranger" => Some(user("x", &self.stranger, None, plain)),
            "forged" => {
                signer = &stranger_signer;
                Some(user("dlc", &self.test, None, plain))
            }
            _ => None,
        };
        let mut resp = json!({"sub": user_nkey, "aud": server_id,
            "nats": {"type": "authorization_response", "version": 2}});
        match jwt {
            Some(j) => resp["nats"]["jwt"] = j.into(),
            None => resp["nats"]["error"] = "who are you".into(),
        }
        encode(&resp, signer).expect("response JWT")
    }

    /// The service, logged in as AUTH's service user, answering until the connection closes.
    async fn serve(self: std::sync::Arc<Self>, t: &Target) -> async_nats::Client {
        let jwt = bare_user_jwt(
            &self.service,
            &self.auth,
            json!({"subs": -1, "data": -1, "payload": -1}),
        );
        let nc = async_nats::ConnectOptions::with_credentials(&creds(&jwt, &self.service))
            .expect("creds")
            .max_reconnects(Some(0))
            .connect(format!("nats://{}", t.client()))
            .await
            .expect("the service user logs in without a callout");
        let xkey = self.xkey.clone();
        let answer = move |t: &str| self.answer(&decode_generic(t).expect("a signed request"));
        common::callout::serve(nc.clone(), xkey, answer).await;
        nc
    }
}

/// A raw client's CONNECT (`jwt`, if any, and `token`), and the first line it gets.
async fn connect(t: &Target, jwt: Option<&str>, token: &str) -> (Raw, String) {
    let mut r = Raw::at(t.client()).await;
    let mut c = json!({"verbose": false, "pedantic": false, "protocol": 1, "headers": true,
        "auth_token": token});
    if let Some(j) = jwt {
        c["jwt"] = j.into();
    }
    r.send(&format!("CONNECT {c}\r\nPING\r\n")).await;
    let first = r.next_non_ping().await;
    (r, first)
}

/// `$SYS.REQ.USER.INFO` as the client sees itself: its `data`.
async fn user_info(r: &mut Raw) -> Value {
    // Its own inbox: the clients share account TEST.
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let inbox = format!(
        "_INBOX.me{}",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    r.send(&format!(
        "SUB {inbox} 9\r\nPUB $SYS.REQ.USER.INFO {inbox} 0\r\n\r\n"
    ))
    .await;
    let head = r.next_non_ping().await;
    assert!(head.starts_with(&format!("MSG {inbox} 9")), "{head}");
    let body: Value = serde_json::from_str(&r.line().await).expect("JSON");
    body["data"].clone()
}

#[tokio::test]
async fn the_accounts_service_places_users_in_allowed_accounts_as_nats_server() {
    for xkey in [false, true] {
        for go in [false, true] {
            let w = std::sync::Arc::new(World::new());
            let conf = w.conf(xkey);
            let t = if go {
                Target::go(&conf, &format!("callout-op-{xkey}"))
            } else {
                Target::natsd(&conf).await
            };
            let who = format!("{} (xkey: {xkey})", t.name());
            let nc = w.clone().serve(&t).await;
            let sentinel = w.sentinel();
            let test = w.test.public_key();
            // Switched to TEST by a user TEST signed, named as the service said.
            let (mut dlc, first) = connect(&t, Some(&sentinel), "secret").await;
            assert_eq!(first, "PONG", "{who}");
            let me = user_info(&mut dlc).await;
            assert_eq!(
                (me["account"].as_str(), me["user"].as_str()),
                (Some(test.as_str()), Some("dlc")),
                "{who}: {me}"
            );
            // By TEST's signing key (`issuer_account`), and by its scoped key with the
            // template's permissions.
            let (mut sk, first) = connect(&t, Some(&sentinel), "signer").await;
            assert_eq!(first, "PONG", "{who}");
            assert_eq!(user_info(&mut sk).await["account"], test.as_str(), "{who}");
            let (mut scoped, first) = connect(&t, Some(&sentinel), "scoped").await;
            assert_eq!(first, "PONG", "{who}");
            let me = user_info(&mut scoped).await;
            assert_eq!(me["account"], test.as_str(), "{who}");
            let allowed = &me["permissions"]["publish"]["allow"];
            assert!(
                allowed
                    .as_array()
                    .is_some_and(|a| a.contains(&json!("foo.>"))),
                "{who}: {me}"
            );
            scoped.send("PUB bar 0\r\n\r\nPING\r\n").await;
            assert_eq!(
                scoped.next_non_ping().await,
                "-ERR 'Permissions Violation for Publish to \"bar\"'",
                "{who}"
            );
            // Users in TEST reach each other, not AUTH's service.
            let mut in_auth = nc.subscribe("foo.x").await.expect("subscribe");
            nc.flush().await.expect("flush");
            dlc.send("SUB foo.x 1\r\nPING\r\n").await;
            assert_eq!(dlc.next_non_ping().await, "PONG", "{who}");
            sk.send("PUB foo.x 2\r\nhi\r\nPING\r\n").await;
            assert_eq!(sk.next_non_ping().await, "PONG", "{who}");
            assert_eq!(dlc.next_non_ping().await, "MSG foo.x 1 2", "{who}");
            let stray =
                tokio::time::timeout(std::time::Duration::from_millis(200), in_auth.next()).await;
            assert!(stray.is_err(), "{who}: a message crossed into AUTH");
            // No JWT at all: the default sentinel goes to the service.
            let (mut dflt, first) = connect(&t, None, "default").await;
            assert_eq!(first, "PONG", "{who}");
            let me = user_info(&mut dflt).await;
            assert_eq!(
                (me["account"].as_str(), me["user"].as_str()),
                (Some(test.as_str()), Some("default")),
                "{who}: {me}"
            );
            // Refused: an account AUTH does not allow, a scoped user with its own
            // permissions, the service's error, and (not sealed) an answer signed by a key
            // that is not AUTH's.
            let mut refusals = vec!["stranger", "badscoped", "nobody"];
            if !xkey {
                refusals.push("forged");
            }
            for token in refusals {
                let (_, first) = connect(&t, Some(&sentinel), token).await;
                assert_eq!(first, "-ERR 'Authorization Violation'", "{who}: {token}");
            }
            // The service user may not publish to the callout subject.
            let jwt = bare_user_jwt(
                &w.service,
                &w.auth,
                json!({"subs": -1, "data": -1, "payload": -1}),
            );
            let mut svc = logged_in(&t, &jwt, &w.service).await;
            let said = answers(&mut svc, "PUB $SYS.REQ.USER.AUTH 0\r\n\r\n").await;
            assert_eq!(said, vec![pub_denied("$SYS.REQ.USER.AUTH")], "{who}");
            drop(nc);
            t.stop().await;
        }
    }
}
