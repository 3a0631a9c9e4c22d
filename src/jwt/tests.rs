//! Decoding and verifying JWTs: v2 tokens made here with `encode`, v1 fixtures (nats.py's
//! test operator and account), and bad input of every kind refused with a reason.

use super::*;
use nkeys::KeyPair;
use serde_json::json;

fn account_claims(sub: &str) -> Value {
    json!({"sub": sub, "name": "A", "nats": {"type": "account", "version": 2,
        "limits": {"conn": 2, "subs": -1, "payload": 100}, "signing_keys": []}})
}

#[test]
fn v2_round_trip_and_fields() {
    let op = KeyPair::new_operator();
    let acc = KeyPair::new_account();
    let t = encode(&account_claims(&acc.public_key()), &op).expect("encode");
    let c = decode(&t, Kind::Account).expect("decode");
    assert_eq!(c.issuer, op.public_key());
    assert_eq!(c.subject, acc.public_key());
    assert_eq!(c.name, "A");
    assert_eq!(c.limit("conn"), Some(2));
    assert_eq!(c.limit("subs"), None);
    assert_eq!(c.limit("payload"), Some(100));
    assert!(c.unsupported().is_empty());
    assert_eq!(c.time_check(0), Ok(()));
}

#[test]
fn v1_fixture_from_nats_py() {
    // nats.py's tests/nkeys/op.jwt and the `foo` account of its resolver_preload.conf.
    let op = "eyJ0eXAiOiJqd3QiLCJhbGciOiJlZDI1NTE5In0.eyJqdGkiOiIyTVhXQ0VaRFo2S0g3NU5ZU1NaUFBTTElET1NEVzdMVVE0RVRUSjJMWEhKQlFGWTRTMkZBIiwiaWF0IjoxNTUzODQwMzM3LCJpc3MiOiJPRFdJSUU3SjdOT1M3M1dWQk5WWTdIQ1dYVTRXWFdEQlNDVjRWSUtNNVk0TFhUT1Q1U1FQT0xXTCIsIm5hbWUiOiJ0ZXN0X29wZXJhdG9yIiwic3ViIjoiT0RXSUlFN0o3Tk9TNzNXVkJOVlk3SENXWFU0V1hXREJTQ1Y0VklLTTVZNExYVE9UNVNRUE9MV0wiLCJ0eXBlIjoib3BlcmF0b3IifQ.V_v6k3aMOpyau83RaqNHW_YmZw8X0ZnJWLOas3YvQYIyXrHF0bL9inBaQw6zXzbN_ViQnNskhB7tM40qguitAg";
    let c = decode(op, Kind::Operator).expect("v1 operator");
    assert_eq!(c.subject, c.issuer);
    assert_eq!(c.name, "test_operator");
    assert!(decode(op, Kind::Account).is_err(), "wrong kind");
}

#[test]
fn bad_tokens_are_refused() {
    let op = KeyPair::new_operator();
    let acc = KeyPair::new_account();
    let good = encode(&account_claims(&acc.public_key()), &op).expect("encode");
    let parts: Vec<&str> = good.split('.').collect();
    let other = KeyPair::new_operator();
    let resigned = encode(&account_claims(&acc.public_key()), &other).expect("encode");
    let foreign_sig = resigned.rsplit('.').next().unwrap_or_default();
    let huge = "a".repeat(MAX_TOKEN_SIZE + 1);
    let bad_header = format!(
        "{}.{}.{}",
        data_encoding::BASE64URL_NOPAD.encode(br#"{"typ":"JWT","alg":"HS256"}"#),
        parts[1],
        parts[2]
    );
    let cases = [
        ("", "expected 3 chunks"),
        ("a.b", "expected 3 chunks"),
        ("!!.!!.!!", "not base64url"),
        (huge.as_str(), "exceeds maximum"),
        (bad_header.as_str(), "algorithm"),
        (
            &format!("{}.{}.{foreign_sig}", parts[0], parts[1]),
            "signature",
        ),
        (&format!("{}.{}.AAAA", parts[0], parts[1]), "signature"),
    ];
    for (t, want) in cases {
        let e = decode(t, Kind::Account).expect_err(t.get(..40).unwrap_or(t));
        assert!(e.contains(want), "{want}: {e}");
    }
    // decode_generic (the operator's delete requests) checks the header too, as the jwt
    // library's DecodeGeneric; and a v1 header (payload-only signature) on a token signed
    // as v2 fails verification in both.
    assert!(decode_generic(&good).is_ok());
    let hs256 = data_encoding::BASE64URL_NOPAD.encode(br#"{"typ":"JWT","alg":"HS256"}"#);
    let signed = format!("{hs256}.{}", parts[1]);
    let sig = op.sign(signed.as_bytes()).expect("sign");
    let resigned = format!("{signed}.{}", data_encoding::BASE64URL_NOPAD.encode(&sig));
    let e = decode_generic(&resigned).expect_err("bad alg, good signature");
    assert!(e.contains("algorithm"), "{e}");
    let v1_head = data_encoding::BASE64URL_NOPAD.encode(br#"{"typ":"JWT","alg":"ed25519"}"#);
    let relabelled = format!("{v1_head}.{}.{}", parts[1], parts[2]);
    assert!(decode(&relabelled, Kind::Account).is_err());
    assert!(decode_generic(&relabelled).is_err());
    // An account signed by an account key, a user token read as an account.
    let by_account = encode(&account_claims(&acc.public_key()), &acc).expect("encode");
    assert!(decode(&by_account, Kind::Account)
        .expect_err("issuer type")
        .contains("not an operator key"));
    let user = KeyPair::new_user();
    let u = json!({"sub": user.public_key(), "nats": {"type": "user", "version": 2}});
    let u = encode(&u, &acc).expect("encode");
    assert!(decode(&u, Kind::User).is_ok());
    assert!(decode(&u, Kind::Account).is_err());
}

#[test]
fn expiry_and_unsupported_claims() {
    let acc = KeyPair::new_account();
    let user = KeyPair::new_user();
    let u = json!({"sub": user.public_key(), "exp": 100, "nbf": 50,
        "nats": {"type": "user", "version": 2, "proxy_required": true,
        "times": [{"start": "01:00:00", "end": "02:00:00"}], "pub": {"allow": ["a.>"], "deny": ["a.b"]}}});
    let c = decode(&encode(&u, &acc).expect("encode"), Kind::User).expect("decode");
    assert_eq!(c.time_check(101), Err("claim is expired"));
    assert_eq!(c.time_check(10), Err("claim is not yet valid"));
    assert_eq!(c.time_check(60), Ok(()));
    // `times` is applied (jwt::times); `proxy_required` is not yet.
    assert_eq!(c.unsupported(), vec!["proxy_required"]);
    assert_eq!(
        c.permission("pub"),
        Some((vec!["a.>".to_string()], vec!["a.b".to_string()]))
    );
    assert_eq!(c.permission("sub"), None);
    // An account's default permissions (empty, as the jwt library writes them, or not)
    // are applied (to users without permissions of their own).
    let op = KeyPair::new_operator();
    let mut a = account_claims(&acc.public_key());
    a["nats"]["default_permissions"] = json!({"pub": {}, "sub": {}});
    let c = decode(&encode(&a, &op).expect("encode"), Kind::Account).expect("decode");
    assert!(c.unsupported().is_empty());
    a["nats"]["default_permissions"] = json!({"pub": {"deny": ["x"]}, "sub": {}});
    let c = decode(&encode(&a, &op).expect("encode"), Kind::Account).expect("decode");
    assert!(c.unsupported().is_empty());
}

#[test]
fn undecorated() {
    let creds = "-----BEGIN NATS USER JWT-----\neyJhbGc.x.y\n------END NATS USER JWT------\n";
    assert_eq!(undecorate(creds), "eyJhbGc.x.y");
    assert_eq!(undecorate("  eyJ.a.b \n"), "eyJ.a.b");
}

#[test]
fn creds_files() {
    let text = "-----BEGIN NATS USER JWT-----\neyJ0.a.b\n------END NATS USER JWT------\n\n\
                ************************* IMPORTANT *************************\n\
                NKEY Seed printed below can be used to sign and prove identity.\n\n\
                -----BEGIN USER NKEY SEED-----\nSUAXYZ\n------END USER NKEY SEED------\n";
    assert_eq!(
        parse_creds(text).expect("creds"),
        ("eyJ0.a.b".to_string(), "SUAXYZ".to_string())
    );
    let crlf = text.replace('\n', "\r\n");
    assert_eq!(parse_creds(&crlf).expect("creds").1, "SUAXYZ");
    for bad in [
        "",
        "eyJ0.a.b",
        "-----BEGIN NATS USER JWT-----\neyJ0.a.b\n------END------\n",
    ] {
        assert!(parse_creds(bad).is_err(), "{bad:?}");
    }
}

fn user_claims(nats: Value) -> Claims {
    let (acc, user) = (KeyPair::new_account(), KeyPair::new_user());
    let mut n = nats;
    n["type"] = "user".into();
    n["version"] = 2.into();
    let c = json!({"sub": user.public_key(), "name": "bob", "iat": 1000, "nats": n});
    decode(&encode(&c, &acc).expect("encode"), Kind::User).expect("decode")
}

#[test]
fn scope_templates_expand_as_nats_server() {
    let op = KeyPair::new_operator();
    let acc = KeyPair::new_account();
    let mut a = account_claims(&acc.public_key());
    a["nats"]["tags"] = json!(["region:eu"]);
    let account = decode(&encode(&a, &op).expect("encode"), Kind::Account).expect("decode");
    let mut u = user_claims(json!({"tags": ["d:x", "d:y"], "issuer_account": "ACC"}));
    assert!(user::has_empty_permissions(&u));
    let template = json!({"pub": {"allow": ["{{name()}}.{{tag(d)}}.{{account-tag(region)}}",
        "{{ account-name() }}.{{account-subject()}}", "{{tag(none)}}"]},
        "sub": {"allow": ["{{tag(none)}}"]}, "payload": 9});
    user::apply_scope(&mut u, &template, &account).expect("scope");
    let (allow, deny) = u.permission("pub").expect("pub");
    assert_eq!(allow, ["bob.x.eu", "bob.y.eu", "A.ACC"]);
    assert!(deny.is_empty());
    // An allow list that expanded to nothing denies everything.
    assert_eq!(u.permission("sub"), Some((vec![], vec![">".to_string()])));
    assert_eq!(user::own_limits(&u), (-1, 9));
    // Only permission and limit fields come from a template (the jwt library decodes it
    // into UserPermissionLimits): its `tags` or `issuer_account` change nothing.
    let mut u = user_claims(json!({"tags": ["d:x"], "issuer_account": "ACC"}));
    let template = json!({"tags": ["d:z"], "issuer_account": "OTHER",
        "pub": {"allow": ["{{tag(d)}}.{{account-subject()}}"]}});
    user::apply_scope(&mut u, &template, &account).expect("scope");
    assert_eq!(u.permission("pub").expect("pub").0, ["x.ACC"]);
    assert_eq!(u.str("issuer_account"), "ACC");
    // Unknown operations, a deny entry with no value, too many expansions: refused.
    let tags: Vec<String> = (0..100).map(|i| format!("t:{i}")).collect();
    for (tpl, want) in [
        (json!({"pub": {"allow": ["{{nope()}}"]}}), "is not defined"),
        (
            json!({"sub": {"deny": ["{{tag(none)}}"]}}),
            "is not defined",
        ),
        (
            json!({"pub": {"allow": ["{{tag(t)}}.{{tag(t)}}"]}}),
            "exceeds limit",
        ),
    ] {
        let mut u = user_claims(json!({"tags": tags}));
        let e = user::apply_scope(&mut u, &tpl, &account).expect_err(want);
        assert!(e.contains(want), "{e}");
    }
    // A scoped user may not carry its own limits (the jwt library writes -1 for none).
    assert!(!user::has_empty_permissions(&user_claims(
        json!({"subs": -1})
    )));
    assert!(!user::has_empty_permissions(&user_claims(
        json!({"pub": {"allow": []}})
    )));
    assert!(user::has_empty_permissions(&user_claims(
        json!({"pub": {}, "subs": 0})
    )));
}

#[test]
fn revocations_src_and_connection_types() {
    let op = KeyPair::new_operator();
    let acc = KeyPair::new_account();
    let u = user_claims(json!({}));
    let mut a = account_claims(&acc.public_key());
    a["nats"]["revocations"] = json!({u.subject.clone(): 1000});
    let account = decode(&encode(&a, &op).expect("encode"), Kind::Account).expect("decode");
    assert!(user::revoked(&account, &u.subject, 1000));
    assert!(!user::revoked(&account, &u.subject, 1001));
    assert!(!user::revoked(&account, "UOTHER", 1));
    a["nats"]["revocations"] = json!({"*": 5});
    let account = decode(&encode(&a, &op).expect("encode"), Kind::Account).expect("decode");
    assert!(user::revoked(&account, "UANY", 5));
    let ip = |s: &str| s.parse().ok();
    let src = |v: Value| user_claims(json!({ "src": v }));
    assert_eq!(user::src_allows(&user_claims(json!({})), None), Ok(true));
    let u = src(json!(["10.1.0.0/16", "::1/128"]));
    assert_eq!(user::src_allows(&u, ip("10.1.2.3")), Ok(true));
    assert_eq!(user::src_allows(&u, ip("10.2.0.1")), Ok(false));
    assert_eq!(user::src_allows(&u, ip("::1")), Ok(true));
    assert_eq!(user::src_allows(&u, ip("::ffff:10.1.0.9")), Ok(true));
    assert_eq!(user::src_allows(&u, None), Ok(false));
    assert_eq!(
        user::src_allows(&src(json!("0.0.0.0/0")), ip("1.2.3.4")),
        Ok(true)
    );
    for bad in [
        json!(["10.0.0.1"]),
        json!(["10.0.0.0/33"]),
        json!([5]),
        json!(7),
    ] {
        assert!(
            user::src_allows(&src(bad.clone()), ip("10.0.0.1")).is_err(),
            "{bad}"
        );
    }
    let types = |v: Value| user_claims(json!({ "allowed_connection_types": v }));
    assert!(user::connection_type_allowed(&types(json!([])), "STANDARD"));
    assert!(user::connection_type_allowed(
        &types(json!(["standard"])),
        "STANDARD"
    ));
    assert!(!user::connection_type_allowed(
        &types(json!(["MQTT"])),
        "STANDARD"
    ));
    assert!(!user::connection_type_allowed(
        &types(json!(["BOGUS"])),
        "STANDARD"
    ));
    // Malformed scopes make the account JWT invalid.
    for keys in [
        json!([{"kind": "other", "key": "A"}]),
        json!([{"kind": "user_scope"}]),
        json!(5),
    ] {
        a["nats"]["signing_keys"] = keys.clone();
        let t = encode(&a, &op).expect("encode");
        assert!(decode(&t, Kind::Account).is_err(), "{keys}");
    }
}
