//! Operator (JWT) mode with the MEMORY resolver (issue 19 item 2): an operator, its accounts
//! and users built here with the `nkeys` crate (no Go tooling), `operator` + `resolver:
//! MEMORY` + `resolver_preload` in the config, users connecting with a `.creds` (async-nats
//! `with_credentials`) or a raw CONNECT `jwt` + `sig`. natsd and nats-server 2.15.1 run the
//! same config side by side: what connects, what is refused (`-ERR 'Authorization
//! Violation'`, `Authentication Failure`), the user JWT's permissions, and the account
//! JWT's limits (connections, subscriptions, payload) with nats-server's texts.

mod common;

use std::time::Duration;

use common::auth::{
    account_jwt, connect_jwt, creds, hello, logged_in, nonce_of, open_limits, refused, sign,
    user_jwt, Target,
};
use common::wait_for;
use futures::StreamExt;
use natsd::jwt::encode;
use nkeys::KeyPair;
use serde_json::{json, Value};

/// An operator, a system account, and accounts `A` (limits open; a signing key) and `L`
/// (`conn` 1, `subs` 1, `payload` 16).
struct World {
    op: KeyPair,
    a: KeyPair,
    a_signer: KeyPair,
    l: KeyPair,
    conf: String,
}

impl World {
    fn new() -> World {
        let (op, sys, a, a_signer, l) = (
            KeyPair::new_operator(),
            KeyPair::new_account(),
            KeyPair::new_account(),
            KeyPair::new_account(),
            KeyPair::new_account(),
        );
        let opc = json!({"sub": op.public_key(), "name": "O", "nats": {"type": "operator",
            "version": 2, "system_account": sys.public_key()}});
        let op_jwt = encode(&opc, &op).expect("operator JWT");
        let mut small = open_limits();
        small["conn"] = 1.into();
        small["subs"] = 1.into();
        small["payload"] = 16.into();
        let preload = [
            (&sys, account_jwt(&sys, &op, open_limits(), &[])),
            (
                &a,
                account_jwt(&a, &op, open_limits(), &[a_signer.public_key()]),
            ),
            (&l, account_jwt(&l, &op, small, &[])),
        ]
        .iter()
        .map(|(k, t)| format!("  {}: \"{t}\"\n", k.public_key()))
        .collect::<String>();
        let conf = format!(
            "operator: \"{op_jwt}\"\nsystem_account: {}\nresolver: MEMORY\n\
             resolver_preload {{\n{preload}}}\n",
            sys.public_key()
        );
        World {
            op,
            a,
            a_signer,
            l,
            conf,
        }
    }
}

#[tokio::test]
async fn creds_users_connect_with_their_permissions_as_on_nats_server() {
    let w = World::new();
    for t in [Target::natsd(&w.conf).await, Target::go(&w.conf, "op-ok")] {
        let who = t.name();
        let user = KeyPair::new_user();
        let perms = json!({"pub": {"deny": ["secret"]}, "sub": {"deny": ["secret"]}});
        let jwt = user_jwt(&user, &w.a, perms);
        let nc = async_nats::ConnectOptions::with_credentials(&creds(&jwt, &user))
            .expect("creds parse")
            .connect(format!("nats://{}", t.client()))
            .await
            .unwrap_or_else(|e| panic!("{who}: creds user connects: {e}"));
        let mut sub = nc.subscribe("x").await.expect("sub");
        nc.publish("x", "hi".into()).await.expect("pub");
        let m = tokio::time::timeout(common::DEADLINE, sub.next()).await;
        assert!(matches!(m, Ok(Some(_))), "{who}: message");
        // The user JWT's permissions, with nats-server's texts.
        let mut r = logged_in(&t, &jwt, &user).await;
        r.send("PUB secret 1\r\nx\r\nSUB secret 1\r\nPING\r\n")
            .await;
        // (nats-server 2.15 sends an INFO with `connect_info` after the first PONG.)
        assert_eq!(
            r.next_non_ping().await,
            "-ERR 'Permissions Violation for Publish to \"secret\"'",
            "{who}"
        );
        assert_eq!(
            r.next_non_ping().await,
            "-ERR 'Permissions Violation for Subscription to \"secret\"'",
            "{who}"
        );
        // A user signed by the account's signing key (naming its account) gets in too.
        let signed = KeyPair::new_user();
        let by_signer = user_jwt(
            &signed,
            &w.a_signer,
            json!({"issuer_account": w.a.public_key()}),
        );
        logged_in(&t, &by_signer, &signed).await;
        // A bearer token user needs no signature.
        let bearer = user_jwt(&KeyPair::new_user(), &w.a, json!({"bearer_token": true}));
        let (mut b, _) = hello(t.client()).await;
        b.send(&connect_jwt(&bearer, None)).await;
        assert_eq!(b.next_non_ping().await, "PONG", "{who}: bearer");
        // `/connz?auth=1`: the user's public key, in the account named by its key.
        let c = t.connz("auth=1").await;
        let rows: Vec<(String, String)> = c["connections"]
            .as_array()
            .expect("connections")
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
                (s("authorized_user"), s("account"))
            })
            .collect();
        assert!(
            rows.contains(&(user.public_key(), w.a.public_key())),
            "{who}: {rows:?}"
        );
        t.stop().await;
    }
}

#[tokio::test]
async fn bad_user_jwts_are_refused_as_nats_server_does() {
    let w = World::new();
    let user = KeyPair::new_user();
    let good = user_jwt(&user, &w.a, json!({}));
    let stranger_acc = KeyPair::new_account();
    let cases: Vec<(&str, String, Option<&KeyPair>)> = vec![
        ("no jwt", String::new(), Some(&user)),
        ("garbage jwt", "eyJhbGciOi.x.y".into(), Some(&user)),
        ("no sig", good.clone(), None),
        ("signed by another user", good.clone(), Some(&w.a_signer)),
        (
            "unknown account",
            user_jwt(&user, &stranger_acc, json!({})),
            Some(&user),
        ),
        (
            "expired",
            user_jwt(&user, &w.a, json!({"exp": 1_000_000})),
            Some(&user),
        ),
        (
            "signing key without issuer_account",
            user_jwt(&user, &w.a_signer, json!({})),
            Some(&user),
        ),
        (
            "an account JWT",
            account_jwt(&w.a, &w.op, open_limits(), &[]),
            Some(&user),
        ),
    ];
    for t in [Target::natsd(&w.conf).await, Target::go(&w.conf, "op-bad")] {
        let who = t.name();
        for (what, jwt, signer) in &cases {
            let (mut r, info) = hello(t.client()).await;
            let sig = signer.map(|k| sign(k, &nonce_of(&info)));
            r.send(&connect_jwt(jwt, sig.as_deref())).await;
            assert_eq!(
                refused(&mut r).await.as_deref(),
                Some("-ERR 'Authorization Violation'"),
                "{who}: {what}"
            );
        }
        wait_for("closed connections", || async {
            let c = t.connz("state=closed").await;
            let reasons: Vec<String> = c["connections"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c["reason"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            reasons.len() == cases.len() && reasons.iter().all(|r| r == "Authentication Failure")
        })
        .await;
        t.stop().await;
    }
}

/// A user JWT that expires while its client is connected: nats-server sends `-ERR 'User
/// Authentication Expired'` and closes it as "Authentication Expired"; natsd does the same
/// (before, it only logged a warning at CONNECT and kept the client).
#[tokio::test]
async fn a_user_jwt_expiring_while_connected_closes_the_client_as_nats_server() {
    let w = World::new();
    for t in [Target::natsd(&w.conf).await, Target::go(&w.conf, "op-exp")] {
        let who = t.name();
        let user = KeyPair::new_user();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let jwt = user_jwt(&user, &w.a, json!({"exp": now + 2}));
        let mut r = logged_in(&t, &jwt, &user).await;
        assert_eq!(
            r.next_non_ping().await,
            "-ERR 'User Authentication Expired'",
            "{who}"
        );
        wait_for(
            "the expired client among the closed connections",
            || async {
                let c = t.connz("state=closed").await;
                c["connections"][0]["reason"] == "Authentication Expired"
            },
        )
        .await;
        t.stop().await;
    }
}

#[tokio::test]
async fn account_jwt_limits_as_nats_server() {
    let w = World::new();
    for t in [
        Target::natsd(&w.conf).await,
        Target::go(&w.conf, "op-limits"),
    ] {
        let who = t.name();
        let user = KeyPair::new_user();
        let jwt = user_jwt(&user, &w.l, json!({}));
        let mut r = logged_in(&t, &jwt, &user).await;
        // `subs: 1`.
        r.send("SUB a 1\r\nSUB b 2\r\nPING\r\n").await;
        assert_eq!(
            r.next_non_ping().await,
            "-ERR 'maximum subscriptions exceeded'",
            "{who}"
        );
        assert_eq!(r.next_non_ping().await, "PONG", "{who}");
        // `payload: 16`.
        r.send(&format!("PUB a 17\r\n{}\r\n", "x".repeat(17))).await;
        assert_eq!(
            refused(&mut r).await.as_deref(),
            Some("-ERR 'Maximum Payload Violation'"),
            "{who}"
        );
        // `conn: 1`.
        let _first = logged_in(&t, &jwt, &user).await;
        let (mut second, info) = hello(t.client()).await;
        second
            .send(&connect_jwt(&jwt, Some(&sign(&user, &nonce_of(&info)))))
            .await;
        assert_eq!(
            refused(&mut second).await.as_deref(),
            Some("-ERR 'maximum account active connections exceeded'"),
            "{who}"
        );
        t.stop().await;
    }
}

#[test]
fn operator_config_is_checked_as_nats_server() {
    let w = World::new();
    let load = |extra: &str| natsd::config::file::load_str(&format!("{}{extra}", w.conf));
    let o = load("").expect("loads").options;
    assert!(o.accounts.contains(&w.a.public_key()));
    assert_eq!(
        o.account_limits.get(&w.l.public_key()).map(|l| (
            l.max_connections,
            l.max_subscriptions,
            l.max_payload
        )),
        Some((1, 1, 16))
    );
    // `operator:` may name a file holding the JWT as nsc writes it (decorated).
    let dir = common::binary::tmp_dir("operator", "file");
    let op_jwt = w
        .conf
        .split('"')
        .nth(1)
        .expect("inline operator JWT")
        .to_string();
    let decorated =
        format!("-----BEGIN NATS OPERATOR JWT-----\n{op_jwt}\n------END NATS OPERATOR JWT------\n");
    let file = common::binary::write_conf(&dir, "op.jwt", &decorated);
    let by_file = w
        .conf
        .replace(&format!("\"{op_jwt}\""), &format!("\"{}\"", file.display()));
    let o = natsd::config::file::load_str(&by_file).expect("operator from a file");
    assert_eq!(
        o.options.operator.map(|m| m.operators),
        Some(vec![op_jwt.clone()])
    );
    let missing = w
        .conf
        .replace(&format!("\"{op_jwt}\""), "\"/nonexistent/op.jwt\"");
    let e = natsd::config::file::load_str(&missing).expect_err("missing file");
    assert!(e.to_string().contains("error parsing operator JWT"), "{e}");
    let err = |extra: &str| load(extra).expect_err(extra).to_string();
    assert!(err("authorization { users [ {user: a, password: b} ] }\n")
        .contains("operators do not allow users to be configured directly"));
    assert!(err("accounts { X {} }\n")
        .contains("operators do not allow Accounts to be configured directly"));
    // `default_sentinel` (tests/auth_callout_operator.rs uses one): a bearer user JWT, and
    // only with operators.
    let user = KeyPair::new_user();
    let bearer = user_jwt(&user, &w.a, json!({"bearer_token": true}));
    assert!(load(&format!("default_sentinel: \"{bearer}\"\n")).is_ok());
    let plain = user_jwt(&user, &w.a, json!({}));
    assert!(err(&format!("default_sentinel: \"{plain}\"\n"))
        .contains("default sentinel must be a bearer token"));
    assert!(err("default_sentinel: \"not a jwt\"\n").contains("default sentinel JWT not valid"));
    let alone = natsd::config::file::load_str(&format!("default_sentinel: \"{bearer}\"\n"))
        .expect_err("no operator");
    assert!(
        alone
            .to_string()
            .contains("default sentinel requires operators and accounts"),
        "{alone}"
    );
    // The URL resolver is read-only (tests/resolver_url.rs runs it).
    assert!(err("resolver: URL(http://127.0.0.1:1/jwt)\n")
        .contains("resolver preloads only available for writeable resolver types"));
    // Over https too (tests/resolver_url_tls.rs runs it).
    assert!(err("resolver: URL(https://127.0.0.1:1/jwt)\n")
        .contains("resolver preloads only available for writeable resolver types"));
    // The directory resolvers' block, with nats-server's texts (`opts.go`).
    let block = |b: &str| {
        let conf = w
            .conf
            .replace("resolver: MEMORY\n", &format!("resolver {{ {b} }}\n"));
        natsd::config::file::load_str(&conf).map(|l| l.options)
    };
    let rdir = common::binary::tmp_dir("operator", "resolver-dir");
    let full = block(&format!(
        "type: full, dir: \"{}\", interval: \"2m\"",
        rdir.display()
    ))
    .expect("full resolver");
    match full.operator.and_then(|o| o.resolver) {
        Some(natsd::config::Resolver::Full(r)) => {
            assert_eq!(
                (r.interval, r.allow_delete),
                (Duration::from_secs(120), false)
            );
        }
        other => panic!("{other:?}"),
    }
    for (b, want) in [
        (
            "type: full",
            "dir has no value and needs to point to a directory",
        ),
        (
            "type: full, dir: x, ttl: \"1m\"",
            "FULL does not accept ttl",
        ),
        (
            "type: full, dir: x, hard_delete: true",
            "hard_delete has no effect without delete",
        ),
        (
            "type: full, dir: x, timeout: \"0s\"",
            "Fetch timeout 0s is too smal",
        ),
        ("type: nope, dir: x", "error parsing account resolver"),
        (
            "type: cache, dir: x, allow_delete: true",
            "CACHE does not accept allow_delete",
        ),
    ] {
        let e = block(b).expect_err(b).to_string();
        assert!(e.contains(want), "{b}: {e}");
    }
    let file = rdir.join("a-file");
    std::fs::write(&file, "x").expect("write");
    let e = block(&format!("type: full, dir: \"{}\"", file.display()))
        .expect_err("a file")
        .to_string();
    assert!(
        e.contains("dir needs to point to an accessible directory"),
        "{e}"
    );
    let bad = "resolver_preload { AAAA: \"eyJ0.x.y\" }\n";
    assert!(err(bad).contains("invalid account JWT"));
    let no_resolver = w.conf.replace("resolver: MEMORY\n", "");
    let e = natsd::config::file::load_str(&no_resolver).expect_err("no resolver");
    assert!(e
        .to_string()
        .contains("operators require an account resolver to be configured"));
    // Account claims natsd does not apply yet are refused by name, never ignored.
    let x = KeyPair::new_account();
    for (nats, name) in [
        (
            json!({"exports": [{"subject": "s", "type": "service",
                "service_latency": {"sampling": 100, "results": "lat"}}]}),
            "service_latency",
        ),
        (
            json!({"imports": [{"subject": "s", "account": w.a.public_key(),
                "type": "stream", "local_subject": "x.$1"}]}),
            "local_subject",
        ),
    ] {
        let mut c = json!({"sub": x.public_key(), "nats": {"type": "account", "version": 2}});
        if let (Some(n), Value::Object(e)) = (c["nats"].as_object_mut(), nats) {
            n.extend(e);
        }
        let token = encode(&c, &w.op).expect("encode");
        let e = err(&format!(
            "resolver_preload {{ {}: \"{token}\" }}\n",
            x.public_key()
        ));
        assert!(
            e.contains(name) && e.contains("is not supported yet"),
            "{e}"
        );
    }
}
