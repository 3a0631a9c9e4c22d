//! Fuzz the JWT decoder (`natsd::jwt`), what the server runs on operator, account, user and
//! activation tokens from its config, its resolver and clients' CONNECTs, and the claim
//! helpers it then runs on them. The first input byte `m` picks the mode, the second `x` is a
//! parameter, the rest is the material:
//!
//! - `m & 0x80` set, *raw*: the rest (its valid UTF-8 prefix) is the token, for the
//!   token-splitting, base64 and header layers. `m == 0xFF`: the rest repeated past
//!   `MAX_TOKEN_SIZE`.
//! - otherwise *signed*: the rest is a JSON payload, signed with one of four fixed nkeys so
//!   that claim parsing is reached. `m & 3` picks the header (v2 `ed25519-nkey`, v1
//!   `ed25519`, the same in other letter cases, or the input's own: the bytes before its
//!   first NUL, the payload after); `m >> 2 & 3` the signer (operator `@OP`, operator
//!   signing key `@OK`, account `@AC`, account signing key `@AK`); `m >> 4 & 7` the variant:
//!   0-4 signed as a v1 (payload with a top-level `"type"` string) or v2 token is signed,
//!   5 the other way, 6 with bit `x` of the signature flipped; `m == 0x7F`: the payload
//!   padded with spaces past `MAX_TOKEN_SIZE`, validly signed. In the payload `@OP`, `@OK`,
//!   `@AC`, `@AK`, `@AX` (a second, exporting account), `@US` (a user) stand for those
//!   keys' public keys and `@TS` / `@TV` for activation tokens from `@AX` to `@AC` for a
//!   stream `foo.>` / a service `svc.*`.
//!
//! Asserts, for `decode` with every `Kind` and `decode_generic`: no panic; deterministic (the
//! same token twice gives the same claims or error); bounded (a token over `MAX_TOKEN_SIZE`
//! is refused for its size, even validly signed); at most one kind decodes; a token that
//! decodes has the kind asked for, an issuer and a subject that are nkeys of the kind's
//! types, and (signed mode) the signer as issuer; `decode_generic` accepts it too with the
//! same `iss` and `sub`; a token signed over the wrong bytes or with a flipped signature bit
//! never decodes; and a v2 payload with an `iat` re-encoded (`jwt::encode`) decodes to the
//! same claims (floats, which natsd never reads, to within a few ulps: serde_json parses
//! them best-effort). On a token that decodes, the helpers the server runs on untrusted claims:
//! `time_check` agrees with `exp`/`nbf`; `unsupported` names only fields of its kind's
//! list; an account's `signing_keys` + `scoped_keys` account for its whole list;
//! `import_issues` is deterministic and, when it finds nothing, every import has a known
//! type and an account; `revoked` never covers a later `iat` than an earlier one;
//! `apply_scope` (an account's scoped-key templates on a fixed user, a user's claims as a
//! template, and a fixed template on the user) is deterministic, keeps the user's identity,
//! sets `subs`/`data`/`payload` from the template or to -1, and an allow list that expands to
//! nothing denies `>`; `src_allows` errs for every address or none, allows all when there
//! is no `src`, and treats `10.1.2.3` and `::ffff:10.1.2.3` alike; `connection_type_allowed`
//! allows an unknown type only when it allows all; `has_empty_permissions` implies no own
//! limits and every connection type. (`jwt::times` is not on main yet: not reached.)
//!
//! Run (from the repository root):
//! `mkdir -p fuzz/corpus/jwt_decoder && cargo +nightly fuzz run jwt_decoder
//! fuzz/corpus/jwt_decoder fuzz/seeds/jwt_decoder -- -dict=fuzz/jwt_decoder.dict`
#![no_main]

use libfuzzer_sys::fuzz_target;
use natsd::jwt::{self, user, Claims, Kind, MAX_TOKEN_SIZE};
use nkeys::{KeyPair, KeyPairType};
use serde_json::{json, Value};
use std::net::IpAddr;
use std::sync::OnceLock;

const KINDS: [Kind; 4] = [Kind::Operator, Kind::Account, Kind::User, Kind::Activation];

/// The headers of modes 0-2 (mode 3 takes the input's).
const HEADERS: [&[u8]; 3] = [
    br#"{"typ":"JWT","alg":"ed25519-nkey"}"#,
    br#"{"typ":"JWT","alg":"ed25519"}"#,
    br#"{"typ":"jwt","alg":"ED25519-NKEY"}"#,
];

/// At most this many scoped-key templates of one account are applied (each may expand to
/// 4,096 subjects per list).
const MAX_SCOPES: usize = 4;

struct Fixture {
    /// The signers of signed mode: operator, operator signing key, account, account
    /// signing key.
    signers: [KeyPair; 4],
    /// Placeholder → its text.
    subst: Vec<(&'static [u8], String)>,
    /// `alice`, signed by `@AK` for `@AC`, with tags: what fuzzed templates are applied to.
    user: Claims,
    /// `ACME` (`@AC`), with tags and revocations: fuzzed users' account.
    account: Claims,
    /// A scope template using every operation, applied to fuzzed users.
    template: Value,
}

fn key(t: KeyPairType, n: u8) -> KeyPair {
    KeyPair::new_from_raw(t, [n; 32]).expect("fixed key")
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let op = key(KeyPairType::Operator, 1);
        let ok = key(KeyPairType::Operator, 2);
        let ac = key(KeyPairType::Account, 3);
        let ak = key(KeyPairType::Account, 4);
        let ax = key(KeyPairType::Account, 5);
        let us = key(KeyPairType::User, 6);
        let activation = |kind: &str, subject: &str| {
            let c = json!({"sub": ac.public_key(), "name": kind, "iat": 1,
                "nats": {"type": "activation", "version": 2, "kind": kind, "subject": subject}});
            jwt::encode(&c, &ax).expect("activation")
        };
        let subst = vec![
            (&b"@OP"[..], op.public_key()),
            (&b"@OK"[..], ok.public_key()),
            (&b"@AC"[..], ac.public_key()),
            (&b"@AK"[..], ak.public_key()),
            (&b"@AX"[..], ax.public_key()),
            (&b"@US"[..], us.public_key()),
            (&b"@TS"[..], activation("stream", "foo.>")),
            (&b"@TV"[..], activation("service", "svc.*")),
        ];
        let account = json!({"sub": ac.public_key(), "name": "ACME", "iat": 1,
            "nats": {"type": "account", "version": 2, "tags": ["team:a", "team:b"],
                "signing_keys": [ak.public_key()],
                "revocations": {us.public_key(): 1000, "*": 5}}});
        let account = jwt::decode(&jwt::encode(&account, &op).expect("account"), Kind::Account)
            .expect("fixed account decodes");
        let alice = json!({"sub": us.public_key(), "name": "alice", "iat": 2000,
            "nats": {"type": "user", "version": 2, "issuer_account": ac.public_key(),
                "tags": ["dept:eng", "dept:ops", "region:eu"]}});
        let user = jwt::decode(&jwt::encode(&alice, &ak).expect("user"), Kind::User)
            .expect("fixed user decodes");
        let template = json!({
            "pub": {"allow": ["{{name()}}.>", "{{tag(dept)}}.{{account-tag(team)}}"],
                "deny": ["x.{{subject()}}"]},
            "sub": {"allow": ["_INBOX.>", "{{account-name()}}.{{account-subject()}}"]},
            "subs": 10, "payload": 1024, "src": ["10.0.0.0/8"],
            "allowed_connection_types": ["STANDARD"]});
        Fixture {
            signers: [op, ok, ac, ak],
            subst,
            user,
            account,
            template,
        }
    })
}

fn b64(b: &[u8]) -> String {
    data_encoding::BASE64URL_NOPAD.encode(b)
}

/// `payload` with its placeholders replaced.
fn substitute(f: &Fixture, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len());
    let mut i = 0;
    'outer: while i < payload.len() {
        if payload[i] == b'@' {
            for (p, v) in &f.subst {
                if payload[i..].starts_with(p) {
                    out.extend_from_slice(v.as_bytes());
                    i += p.len();
                    continue 'outer;
                }
            }
        }
        out.push(payload[i]);
        i += 1;
    }
    out
}

/// Whether the decoder reads `payload` as a v1 token (signed over the payload alone): a
/// top-level `"type"` string.
fn is_v1(payload: &[u8]) -> bool {
    serde_json::from_slice::<Value>(payload)
        .ok()
        .is_some_and(|v| v.get("type").and_then(Value::as_str).is_some())
}

/// `decode` for every kind and `decode_generic`, each twice (deterministic).
fn decode_all(token: &str) -> (Vec<Result<Claims, String>>, Result<Value, String>) {
    let results: Vec<_> = KINDS
        .iter()
        .map(|k| {
            let first = jwt::decode(token, *k);
            assert_eq!(
                first,
                jwt::decode(token, *k),
                "decode({k:?}) not deterministic"
            );
            first
        })
        .collect();
    let generic = jwt::decode_generic(token);
    assert_eq!(
        generic,
        jwt::decode_generic(token),
        "decode_generic not deterministic"
    );
    if token.len() > MAX_TOKEN_SIZE {
        for r in &results {
            let e = r.as_ref().expect_err("an oversized token decoded");
            assert!(e.contains("exceeds maximum"), "oversized refused for {e:?}");
        }
        let e = generic
            .as_ref()
            .expect_err("an oversized token decoded (generic)");
        assert!(e.contains("too large"), "oversized refused for {e:?}");
    }
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert!(ok <= 1, "{ok} kinds decode the same token");
    (results, generic)
}

/// The nkey prefix letters of `kind`'s issuer and subject.
fn key_letters(kind: Kind) -> (char, char) {
    match kind {
        Kind::Operator => ('O', 'O'),
        Kind::Account => ('O', 'A'),
        Kind::User => ('A', 'U'),
        Kind::Activation => ('A', 'A'),
    }
}

fn assert_nkey(k: &str, letter: char, what: &str) {
    assert!(
        k.len() == 56 && k.starts_with(letter) && KeyPair::from_public_key(k).is_ok(),
        "{what} {k:?} is not a public {letter} nkey"
    );
}

/// Every check on a token's decode results; `signer` in signed mode.
fn check(token: &str, signer: Option<&KeyPair>) {
    let (results, generic) = decode_all(token);
    for (kind, r) in KINDS.iter().zip(&results) {
        let Ok(c) = r else { continue };
        assert_eq!(c.kind, *kind);
        let (iss, sub) = key_letters(*kind);
        assert_nkey(&c.issuer, iss, "issuer");
        assert_nkey(&c.subject, sub, "subject");
        let p = generic
            .as_ref()
            .expect("decode_generic refuses a token decode accepts");
        assert_eq!(p["iss"].as_str(), Some(c.issuer.as_str()));
        assert_eq!(p["sub"].as_str(), Some(c.subject.as_str()));
        if let Some(s) = signer {
            assert_eq!(c.issuer, s.public_key(), "issuer is not the signer");
            // Re-encoded (v2, `iat` kept), the payload decodes to the same claims.
            if p.get("type").and_then(Value::as_str).is_none() && p.get("iat").is_some() {
                let again = jwt::encode(p, s).expect("encode");
                let again = jwt::decode(&again, *kind).expect("re-encoded refused");
                let fields = |c: &Claims| {
                    let c = c.clone();
                    (
                        c.kind,
                        c.issuer,
                        c.subject,
                        c.name,
                        c.expires,
                        c.not_before,
                        c.issued_at,
                    )
                };
                assert_eq!(fields(&again), fields(c), "re-encoded differs");
                assert!(
                    same_json(&again.nats, &c.nats),
                    "re-encoded nats differs: {} vs {}",
                    again.nats,
                    c.nats
                );
            }
        }
        helpers(c);
    }
}

/// Equal JSON, except that two non-integer numbers may differ in their last bits: serde_json
/// parses floats best-effort (without its `float_roundtrip` feature), so a float written back
/// may read as its neighbour (`-4444…441`, 70 digits, reads as -4.4444444444444454e69, which
/// reads back as -4.444444444444445e69). natsd reads only integers from claims.
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() && y.is_f64() => {
            // Within 4 ulps: the bit patterns of same-signed floats are ordered.
            let bits = |n: &serde_json::Number| n.as_f64().unwrap_or(0.0).to_bits() as i64;
            (bits(x) ^ bits(y)) >= 0 && bits(x).abs_diff(bits(y)) <= 4
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

fn helpers(c: &Claims) {
    let f = fixture();
    for now in [i64::MIN, -1, 0, 1, c.expires, c.not_before, i64::MAX]
        .into_iter()
        .chain([c.expires.saturating_add(1), c.not_before.saturating_sub(1)])
    {
        let ok = (c.expires <= 0 || now <= c.expires) && (c.not_before <= 0 || c.not_before <= now);
        assert_eq!(c.time_check(now).is_ok(), ok, "time_check({now}) of {c:?}");
    }
    let allowed: &[&str] = match c.kind {
        Kind::Operator | Kind::Activation => &[],
        Kind::Account => &["authorization", "trace"],
        Kind::User => &["times", "times_location", "proxy_required"],
    };
    for u in c.unsupported() {
        assert!(allowed.contains(&u), "unsupported {u:?} for {:?}", c.kind);
    }
    let _ = (
        c.str("kind"),
        c.str("subject"),
        c.limit("conn"),
        c.permission("pub"),
    );
    match c.kind {
        Kind::Account => account(f, c),
        Kind::User => {
            user_checks(c);
            revocations(&f.account, &c.subject);
            let _ = user::revoked(&f.account, &c.subject, c.issued_at);
            // The fixed template on this user (its name, subject and tags).
            scope(c, &f.template, &f.account);
            // This user's claims as a template on the fixed user.
            scope(&f.user, &c.nats, &f.account);
        }
        Kind::Operator | Kind::Activation => {
            let _ = c.signing_keys();
        }
    }
}

fn account(f: &Fixture, c: &Claims) {
    let listed = c.nats["signing_keys"].as_array().map_or(0, Vec::len);
    let scoped = c.scoped_keys();
    assert_eq!(
        c.signing_keys().len() + scoped.len(),
        listed,
        "signing keys neither plain nor scoped"
    );
    let issues = c.import_issues();
    assert_eq!(issues, c.import_issues(), "import_issues not deterministic");
    if issues.is_none() {
        for i in c.nats["imports"].as_array().map_or(&[][..], Vec::as_slice) {
            assert!(
                matches!(i["type"].as_str(), Some("stream" | "service")),
                "{i}"
            );
            assert!(i["account"].as_str().is_some_and(|a| !a.is_empty()), "{i}");
        }
    }
    revocations(c, &f.user.subject);
    for (_, template) in scoped.iter().take(MAX_SCOPES) {
        scope(&f.user, template, c);
    }
}

/// `revoked` covers every `iat` up to some point and none after.
fn revocations(account: &Claims, user: &str) {
    let mut covered = true;
    for t in [i64::MIN, -1, 0, 1, 5, 1000, 1001, i64::MAX] {
        let r = user::revoked(account, user, t);
        assert!(
            covered || !r,
            "revoked at iat {t} but not at an earlier one"
        );
        covered = r;
    }
}

/// `apply_scope` of `template` on `u` with `account`, twice, and what it must keep.
fn scope(u: &Claims, template: &Value, account: &Claims) {
    let mut a = u.clone();
    let ra = user::apply_scope(&mut a, template, account);
    let mut b = u.clone();
    let rb = user::apply_scope(&mut b, template, account);
    assert_eq!((&ra, &a), (&rb, &b), "apply_scope not deterministic");
    if ra.is_err() {
        return;
    }
    assert_eq!(
        (&a.kind, &a.issuer, &a.subject, &a.name),
        (&u.kind, &u.issuer, &u.subject, &u.name)
    );
    assert_eq!(
        (a.expires, a.not_before, a.issued_at),
        (u.expires, u.not_before, u.issued_at)
    );
    for k in ["subs", "data", "payload"] {
        let want = match template {
            Value::Object(t) => t.get(k).cloned().unwrap_or((-1).into()),
            _ => (-1).into(),
        };
        assert_eq!(a.nats[k], want, "{k} after the scope");
    }
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    for p in ["pub", "sub"] {
        if !strings(&template[p]["allow"]).is_empty() && strings(&a.nats[p]["allow"]).is_empty() {
            assert!(
                strings(&a.nats[p]["deny"]).iter().any(|d| d == ">"),
                "{p}: an allow list that expanded to nothing does not deny >: {}",
                a.nats[p]
            );
        }
    }
    user_checks(&a);
}

fn user_checks(u: &Claims) {
    let none = user::src_allows(u, None);
    let ips: [IpAddr; 6] = [
        [127, 0, 0, 1].into(),
        [10, 1, 2, 3].into(),
        "::1".parse().expect("ip"),
        "::ffff:10.1.2.3".parse().expect("ip"),
        "2001:db8::1".parse().expect("ip"),
        [0, 0, 0, 0].into(),
    ];
    let each: Vec<_> = ips
        .iter()
        .map(|ip| user::src_allows(u, Some(*ip)))
        .collect();
    for r in &each {
        assert_eq!(
            r.is_err(),
            none.is_err(),
            "src errs for some addresses only"
        );
        if none == Ok(true) {
            assert_eq!(r, &Ok(true), "no src, yet an address refused");
        }
    }
    assert_eq!(each[1], each[3], "10.1.2.3 and ::ffff:10.1.2.3 differ");

    let all = user::connection_type_allowed(u, "BOGUS");
    let types: Vec<bool> = user::CONNECTION_TYPES
        .iter()
        .map(|t| user::connection_type_allowed(u, t))
        .collect();
    if all {
        assert!(
            types.iter().all(|t| *t),
            "an unknown type allowed, a known one not"
        );
    }
    let limits = user::own_limits(u);
    if user::has_empty_permissions(u) {
        assert_eq!(limits, (0, 0), "empty permissions with limits");
        assert!(
            types.iter().all(|t| *t),
            "empty permissions with connection types"
        );
    }
}

/// A token of `len` bytes or more from `text` (or `A`s).
fn oversized(text: &str) -> String {
    let unit = if text.is_empty() { "A" } else { text };
    unit.repeat(MAX_TOKEN_SIZE / unit.len() + 1)
}

fn signed(f: &Fixture, m: u8, x: u8, rest: &[u8]) {
    let (head, payload): (&[u8], &[u8]) = match m & 3 {
        3 => match rest.iter().position(|b| *b == 0) {
            Some(n) => (&rest[..n], &rest[n + 1..]),
            None => (&[], rest),
        },
        h => (HEADERS[usize::from(h)], rest),
    };
    let signer = &f.signers[usize::from(m >> 2 & 3)];
    let mut payload = substitute(f, payload);
    let big = m == 0x7F;
    if big {
        payload.resize(MAX_TOKEN_SIZE / 4 * 3 + 1, b' ');
    }
    let variant = m >> 4 & 7;
    let head = b64(head);
    let body = b64(&payload);
    let signed_part = format!("{head}.{body}");
    let v1 = is_v1(&payload) != (variant == 5);
    let mut sig = signer
        .sign(if v1 {
            body.as_bytes()
        } else {
            signed_part.as_bytes()
        })
        .expect("sign");
    if variant == 6 {
        let n = sig.len();
        sig[usize::from(x) % n] ^= 1 << (x >> 5);
    }
    let token = format!("{signed_part}.{}", b64(&sig));
    if big {
        assert!(token.len() > MAX_TOKEN_SIZE);
    }
    if variant == 5 || variant == 6 {
        let (results, generic) = decode_all(&token);
        assert!(
            results.iter().all(Result::is_err),
            "a badly signed token decoded"
        );
        assert!(generic.is_err(), "a badly signed token decoded (generic)");
        return;
    }
    check(&token, Some(signer));
}

fuzz_target!(|data: &[u8]| {
    let [m, x, rest @ ..] = data else {
        return;
    };
    let f = fixture();
    if m & 0x80 == 0 {
        signed(f, *m, *x, rest);
        return;
    }
    let text = match std::str::from_utf8(rest) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
    };
    if *m == 0xFF {
        check(&oversized(text), None);
    } else {
        check(text, None);
    }
});
