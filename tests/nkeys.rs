//! Nkey users (issue 19 item 1): `users [ { nkey: U…, permissions } ]` in `authorization {}`
//! and in accounts; the per-connection `nonce` in INFO; the CONNECT `sig` (the nonce signed
//! with the user's seed) verified; bad or missing signatures refused with nats-server's
//! `-ERR 'Authorization Violation'` and close reason — checked side by side with nats-server
//! 2.15.1 on the same config — and the nkey shown in `/connz?auth=1`. Clients: async-nats
//! (`ConnectOptions::with_nkey`) and the raw protocol, signing with the `nkeys` crate.

mod common;

use common::auth::{hello, nonce_of, refused, sign, Attempt, Target};
use common::{conf_opts, wait_for};
use futures::StreamExt;
use nkeys::KeyPair;
use serde_json::Value;

/// An nkey user `key` in account `A` (publish and subscribe to `secret` denied), and a
/// password user `b` in `$G`.
fn conf(key: &str) -> String {
    format!(
        "accounts {{ A {{ users [ {{ nkey: {key}, permissions {{ publish {{ deny: secret }}, \
         subscribe {{ deny: secret }} }} }} ] }} }}\n\
         authorization {{ users [ {{ user: b, password: b }} ] }}\n"
    )
}

fn connect_line(nkey: &str, sig: Option<&str>) -> String {
    let mut c = serde_json::json!({
        "verbose": false, "pedantic": false, "protocol": 1, "headers": true, "nkey": nkey,
    });
    if let Some(s) = sig {
        c["sig"] = Value::String(s.to_string());
    }
    format!("CONNECT {c}\r\nPING\r\n")
}

#[tokio::test]
async fn nonce_only_with_nkey_users_and_shaped_as_nats_server() {
    let key = KeyPair::new_user().public_key();
    let text = conf(&key);
    for t in [Target::natsd(&text).await, Target::go(&text, "nonce")] {
        let (_a, info_a) = hello(t.client()).await;
        let (_b, info_b) = hello(t.client()).await;
        let (na, nb) = (nonce_of(&info_a), nonce_of(&info_b));
        // 11 random bytes as unpadded base64url: 15 characters, new for each connection.
        assert_eq!(na.len(), 15, "{}: {info_a}", t.name());
        assert!(data_encoding::BASE64URL_NOPAD
            .decode(na.as_bytes())
            .is_ok_and(|b| b.len() == 11));
        assert_ne!(na, nb, "{}", t.name());
        assert_eq!(info_a["auth_required"], true, "{}", t.name());
        t.stop().await;
    }
    // Password users only: no nonce.
    let t = Target::natsd("authorization { users [ { user: b, password: b } ] }").await;
    let (_r, info) = hello(t.client()).await;
    assert!(info.get("nonce").is_none(), "{info}");
    t.stop().await;
}

#[tokio::test]
async fn bad_signatures_are_refused_as_nats_server_does() {
    let kp = KeyPair::new_user();
    let key = kp.public_key();
    let text = conf(&key);
    let stranger = KeyPair::new_user();
    for t in [Target::natsd(&text).await, Target::go(&text, "refused")] {
        let who = t.name();
        // What each attempt sends, from the nonce it got.
        let cases: Vec<(&str, Attempt)> = vec![
            ("no sig", Box::new(|_: &str| connect_line(&key, None))),
            (
                "not base64",
                Box::new(|_: &str| connect_line(&key, Some("!!@@##"))),
            ),
            (
                "short sig",
                Box::new(|_: &str| connect_line(&key, Some("AAAA"))),
            ),
            (
                "another key's sig",
                Box::new(|n: &str| connect_line(&key, Some(&sign(&stranger, n)))),
            ),
            (
                "another nonce",
                Box::new(|_: &str| connect_line(&key, Some(&sign(&kp, "AAAAAAAAAAAAAAA")))),
            ),
            (
                "unknown nkey",
                Box::new(|n: &str| connect_line(&stranger.public_key(), Some(&sign(&stranger, n)))),
            ),
            (
                "malformed nkey",
                Box::new(|_: &str| connect_line("UABC", Some("AAAA"))),
            ),
            (
                "huge sig",
                Box::new(|_: &str| connect_line(&key, Some(&"A".repeat(3000)))),
            ),
        ];
        for (what, line) in &cases {
            let (mut r, info) = hello(t.client()).await;
            r.send(&line(&nonce_of(&info))).await;
            let got = refused(&mut r).await;
            assert_eq!(
                got.as_deref(),
                Some("-ERR 'Authorization Violation'"),
                "{who}: {what}"
            );
        }
        // Every one is closed as an authentication failure.
        wait_for("closed connections", || async {
            let c = t.connz("state=closed&auth=1").await;
            let reasons: Vec<&str> = c["connections"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| c["reason"].as_str()).collect())
                .unwrap_or_default();
            reasons.len() == cases.len() && reasons.iter().all(|r| *r == "Authentication Failure")
        })
        .await;
        // The right signature, in base64url or in standard base64, gets in.
        for std_b64 in [false, true] {
            let (mut r, info) = hello(t.client()).await;
            let raw = kp.sign(nonce_of(&info).as_bytes()).expect("sign");
            let sig = if std_b64 {
                data_encoding::BASE64.encode(&raw)
            } else {
                data_encoding::BASE64URL_NOPAD.encode(&raw)
            };
            r.send(&connect_line(&key, Some(&sig))).await;
            assert_eq!(r.line().await, "PONG", "{who}: std base64 {std_b64}");
        }
        t.stop().await;
    }
}

#[tokio::test]
async fn nkey_user_gets_its_account_and_permissions() {
    let kp = KeyPair::new_user();
    let key = kp.public_key();
    let t = Target::natsd(&conf(&key)).await;
    let url = format!("nats://{}", t.client());
    // async-nats signs the nonce itself.
    let seed = kp.seed().expect("seed");
    let nc = async_nats::ConnectOptions::with_nkey(seed)
        .connect(&url)
        .await
        .expect("nkey user connects");
    let mut sub = nc.subscribe("x").await.expect("sub");
    nc.publish("x", "hi".into()).await.expect("pub");
    let m = tokio::time::timeout(common::DEADLINE, sub.next())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(&m.payload[..], b"hi");
    // A password user of `$G` does not see account A's messages.
    let other = async_nats::ConnectOptions::with_user_and_password("b".into(), "b".into())
        .connect(&url)
        .await
        .expect("password user connects");
    let mut other_sub = other.subscribe("x").await.expect("sub");
    other.flush().await.expect("flush");
    nc.publish("x", "only A".into()).await.expect("pub");
    nc.flush().await.expect("flush");
    sub.next().await.expect("A still gets it");
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(200), other_sub.next())
            .await
            .is_err(),
        "$G must not see account A's message"
    );
    // The user's permissions, on the raw protocol.
    let (mut r, info) = hello(t.client()).await;
    r.send(&connect_line(&key, Some(&sign(&kp, &nonce_of(&info)))))
        .await;
    assert_eq!(r.line().await, "PONG");
    r.send("PUB secret 1\r\nx\r\nSUB secret 1\r\nPING\r\n")
        .await;
    assert_eq!(
        r.line().await,
        "-ERR 'Permissions Violation for Publish to \"secret\"'"
    );
    assert_eq!(
        r.line().await,
        "-ERR 'Permissions Violation for Subscription to \"secret\"'"
    );
    assert_eq!(r.line().await, "PONG");
    // `/connz?auth=1` names the nkey and its account, as nats-server.
    let c = t.connz("auth=1").await;
    let users: Vec<(&str, &str)> = c["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| {
            (
                c["authorized_user"].as_str().unwrap_or(""),
                c["account"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        users.iter().filter(|u| **u == (key.as_str(), "A")).count(),
        2
    );
    assert!(users.contains(&("b", "")), "{users:?}");
    t.stop().await;
}

#[tokio::test]
async fn no_auth_user_may_be_an_nkey_user() {
    let kp = KeyPair::new_user();
    let key = kp.public_key();
    let text = format!("{}no_auth_user: {key}\n", conf(&key));
    let t = Target::natsd(&text).await;
    let (mut r, _) = hello(t.client()).await;
    r.send("CONNECT {\"verbose\":false}\r\nPUB secret 1\r\nx\r\nPING\r\n")
        .await;
    assert_eq!(
        r.line().await,
        "-ERR 'Permissions Violation for Publish to \"secret\"'"
    );
    assert_eq!(r.line().await, "PONG");
    t.stop().await;
}

#[tokio::test]
async fn reload_keeps_nkey_users_that_remain_and_closes_the_removed() {
    let (kp, gone) = (KeyPair::new_user(), KeyPair::new_user());
    let (key, gone_key) = (kp.public_key(), gone.public_key());
    let both =
        format!("accounts {{ A {{ users [ {{ nkey: {key} }}, {{ nkey: {gone_key} }} ] }} }}\n");
    let Target::Natsd(srv) = Target::natsd(&both).await else {
        unreachable!("natsd")
    };
    let mut clients = Vec::new();
    for k in [&kp, &gone] {
        let (mut r, info) = hello(srv.client_addr()).await;
        r.send(&connect_line(
            &k.public_key(),
            Some(&sign(k, &nonce_of(&info))),
        ))
        .await;
        assert_eq!(r.line().await, "PONG");
        clients.push(r);
    }
    let mut opts = conf_opts(&format!(
        "accounts {{ A {{ users [ {{ nkey: {key}, permissions {{ publish {{ deny: secret }} }} }} ] }} }}\n"
    ));
    opts.http_port = Some(0);
    let changed = srv.reload(opts).expect("reload");
    assert!(
        changed.iter().any(|c| c.contains("authorization users")),
        "{changed:?}"
    );
    let mut kept = clients.remove(0);
    let mut removed = clients.remove(0);
    assert!(removed.closed().await, "the removed nkey user is closed");
    // The one that stays is re-checked (its signature of its own nonce still holds) and
    // takes the new permissions.
    kept.send("PUB secret 1\r\nx\r\nPING\r\n").await;
    assert_eq!(
        kept.line().await,
        "-ERR 'Permissions Violation for Publish to \"secret\"'"
    );
    assert_eq!(kept.line().await, "PONG");
    srv.shutdown().await;
}
