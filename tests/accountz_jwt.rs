//! `/accountz?acc=<key>` of an operator-mode account: what its JWT says (`jwt`,
//! `issuer_key`, `name_tag`, `tags`, `decoded_jwt`, `revoked_user`) and its subject
//! `mappings`, natsd beside nats-server 2.15.1 on the same config.

mod common;

use common::auth::{logged_in, open_limits, user_jwt, Target};
use common::http_get;
use natsd::jwt::encode;
use nkeys::KeyPair;
use serde_json::{json, Value};

#[tokio::test]
async fn an_accounts_jwt_details_and_mappings_as_nats_server_shows_them() {
    let (op, sys, a) = (
        KeyPair::new_operator(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let revoked = KeyPair::new_user();
    let account = |k: &KeyPair, name: &str, extra: Value| {
        let mut nats = json!({"type": "account", "version": 2, "limits": open_limits()});
        if let (Some(n), Value::Object(e)) = (nats.as_object_mut(), extra) {
            n.extend(e);
        }
        encode(
            &json!({"sub": k.public_key(), "name": name, "nats": nats}),
            &op,
        )
        .expect("JWT")
    };
    let token = account(
        &a,
        "Acme",
        json!({"tags": ["team:blue", "prod"],
            "revocations": {revoked.public_key(): 1_700_000_000},
            "mappings": {"orders.*": [{"subject": "shop.$1", "weight": 60},
                {"subject": "audit.$1", "weight": 40, "cluster": "east"}]}}),
    );
    let opc = json!({"sub": op.public_key(), "name": "O", "nats": {"type": "operator",
        "version": 2, "system_account": sys.public_key()}});
    let conf = format!(
        "operator: \"{}\"\nsystem_account: {s}\nresolver: MEMORY\n\
         resolver_preload {{\n  {s}: \"{}\"\n  {a}: \"{token}\"\n}}\n",
        encode(&opc, &op).expect("operator JWT"),
        account(&sys, "SYS", json!({})),
        s = sys.public_key(),
        a = a.public_key(),
    );
    let mut seen = Vec::new();
    for t in [
        Target::natsd(&conf).await,
        Target::go(&conf, "accountz-jwt"),
    ] {
        // (nats-server loads an account when it is first used.)
        let u = KeyPair::new_user();
        let _user = logged_in(&t, &user_jwt(&u, &a, json!({})), &u).await;
        let (code, body) = http_get(t.http(), &format!("/accountz?acc={}", a.public_key())).await;
        assert_eq!(code, 200, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        let d = v["account_detail"].clone();
        let mut tags: Vec<String> = d["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t.as_str().unwrap_or_default().to_string())
            .collect();
        tags.sort();
        let mut mappings = d["mappings"].clone();
        if let Some(l) = mappings["orders.*"].as_array_mut() {
            l.sort_by_key(|m| m["subject"].as_str().unwrap_or_default().to_string());
        }
        seen.push(json!({
            "jwt": d["jwt"], "issuer_key": d["issuer_key"], "name_tag": d["name_tag"],
            "tags": tags, "revoked_user": d["revoked_user"], "mappings": mappings,
            "decoded": [d["decoded_jwt"]["sub"], d["decoded_jwt"]["iss"],
                d["decoded_jwt"]["name"], d["decoded_jwt"]["nats"]["revocations"]],
        }));
        t.stop().await;
    }
    assert_eq!(seen[0], seen[1], "natsd, then nats-server 2.15.1");
    assert_eq!(seen[0]["jwt"], json!(token));
    assert_eq!(seen[0]["name_tag"], "Acme");
    assert_eq!(seen[0]["issuer_key"], json!(op.public_key()));
}
