//! Users' `allowed_connection_types` and `allow_responses`, and a leafnode remote's
//! `credentials` / `nkey`, as nats-server parses them.

use super::*;
use crate::auth::responses::{ResponsePerm, DEFAULT_MAX, DEFAULT_TTL};
use crate::config::leaf::RemoteCreds;

fn load(s: &str) -> Options {
    match load_str(s) {
        Ok(l) => l.options,
        Err(e) => panic!("load {s:?}: {e}"),
    }
}

fn err(s: &str) -> String {
    match load_str(s) {
        Ok(l) => panic!("expected an error for {s:?}, got {:?}", l.options),
        Err(e) => e.msg,
    }
}

#[test]
fn connection_types_are_nats_servers_names_in_any_case() {
    let o = load(
        "authorization { users [ { user: a, password: b, allowed_connection_types: \
         [\"standard\", \"LeafNode\", \"STANDARD\"] } ] }",
    );
    assert_eq!(o.users[0].connection_types, ["STANDARD", "LEAFNODE"]);
    let nkey = nkeys::KeyPair::new_user().public_key();
    let o = load(&format!(
        "authorization {{ users [ {{ nkey: {nkey}, connection_types: MQTT }} ] }}"
    ));
    assert_eq!(o.nkeys[0].connection_types, ["MQTT"]);
    let e = err(
        "authorization { users [ { user: a, password: b, allowed_connection_types: \
         [\"STANDARD\", \"bogus\"] } ] }",
    );
    assert_eq!(e, "invalid connection types [\"BOGUS\"]");
}

#[test]
fn allow_responses_forms() {
    let resp = |v: &str| {
        let o = load(&format!(
            "authorization {{ users [ {{ user: a, password: b, permissions: {{ \
             allow_responses: {v} }} }} ] }}"
        ));
        o.users[0]
            .permissions
            .clone()
            .and_then(|p| p.allow_responses)
    };
    let default = ResponsePerm {
        max: DEFAULT_MAX,
        ttl: Some(DEFAULT_TTL),
    };
    assert_eq!(resp("true"), Some(default));
    assert_eq!(resp("false"), None);
    assert_eq!(resp("{ max: 0, expires: \"0s\" }"), Some(default));
    assert_eq!(
        resp("{ max: 5, expires: \"1m\" }"),
        Some(ResponsePerm {
            max: 5,
            ttl: Some(Duration::from_secs(60))
        })
    );
    assert_eq!(
        resp("{ max_msgs: -1, ttl: \"-1s\" }"),
        Some(ResponsePerm { max: -1, ttl: None })
    );
    for (v, want) in [
        ("1", "expected a boolean or a map"),
        ("{ expires: 5 }", "not a duration string"),
        ("{ expires: \"soon\" }", "error parsing expires"),
        (
            "{ bogus: 1 }",
            "Unknown field \"bogus\" parsing permissions",
        ),
    ] {
        let e = err(&format!(
            "authorization {{ users [ {{ user: a, password: b, permissions: {{ \
             allow_responses: {v} }} }} ] }}"
        ));
        assert!(e.contains(want), "{v}: {e}");
    }
}

#[test]
fn a_remote_takes_a_credentials_file_or_an_nkey_seed_not_both() {
    let remote = |body: &str| {
        let o = load(&format!(
            "leafnodes {{ remotes [ {{ url: \"nats://h:1\", {body} }} ] }}"
        ));
        o.leafnodes.expect("leafnodes").remotes[0].creds.clone()
    };
    assert_eq!(
        remote("credentials: \"/x/u.creds\""),
        RemoteCreds::File("/x/u.creds".into())
    );
    let seed =
        String::from_utf8(nkeys::KeyPair::new_user().seed().expect("seed").into()).expect("utf8");
    assert_eq!(
        remote(&format!("seed: {seed}")),
        RemoteCreds::Seed(seed.clone())
    );
    let account_seed = nkeys::KeyPair::new_account().seed().expect("seed");
    for (body, want) in [
        (
            format!("nkey: {account_seed}"),
            "Remote leafnode nkey is not a valid seed",
        ),
        ("nkey: SUNOTASEED".to_string(), "not a valid seed"),
        (
            format!("creds: x.creds, nkey: {seed}"),
            "can not have both creds and nkey defined",
        ),
    ] {
        let e = err(&format!(
            "leafnodes {{ remotes [ {{ url: \"nats://h:1\", {body} }} ] }}"
        ));
        assert!(e.contains(want), "{body}: {e}");
    }
}

#[test]
fn leafnode_authorization_nkey_as_nats_server() {
    let key = nkeys::KeyPair::new_user().public_key();
    let o = load(&format!(
        "leafnodes {{ authorization {{ nkey: {key}, account: A }} }}\naccounts {{ A {{}} }}"
    ));
    assert_eq!(o.leafnodes.expect("leafnodes").nkey, Some(key.clone()));
    let acc = nkeys::KeyPair::new_account().public_key();
    for (body, want) in [
        (
            format!("nkey: {acc}"),
            "Not a valid public nkey for leafnode authorization",
        ),
        (
            format!("nkey: {key}, users [ {{ user: a, password: b }} ]"),
            "can not have a single nkey and a users array",
        ),
        (
            "user: x, password: y, users [ { user: a, password: b } ]".into(),
            "can not have a single user/pass and a users array",
        ),
        (
            "users [ { user: a, password: b }, { user: a, password: c } ]".into(),
            "duplicate user \"a\" detected in leafnode authorization",
        ),
    ] {
        let e = err(&format!("leafnodes {{ authorization {{ {body} }} }}"));
        assert!(e.contains(want), "{body}: {e}");
    }
}
