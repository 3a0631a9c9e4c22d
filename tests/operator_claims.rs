//! Operator (JWT) mode, the claims beyond plain permissions and account limits: scoped
//! signing keys (a `user_scope` key's template replaces its users' permissions and limits,
//! with its `{{…}}` substitutions), account `revocations`, and the user claims `src`,
//! `allowed_connection_types`, `resp` and the user's own `subs`/`payload` limits; account
//! `exports`/`imports` with activation tokens; a revoking claims update through `$SYS`. natsd and
//! nats-server 2.15.1 run the same config side by side; JWTs are made with the `nkeys`
//! crate (`tests/common/auth.rs`).

mod common;

use common::auth::{
    answers, bare_user_jwt, connect_jwt, hello, logged_in, nonce_of, open_limits, pub_denied,
    refused, sign, user_jwt, Target,
};
use common::wait_for;
use natsd::jwt::encode;
use nkeys::KeyPair;
use serde_json::{json, Value};

/// An operator and its system account.
struct Op {
    op: KeyPair,
    sys: KeyPair,
}

impl Op {
    fn new() -> Op {
        Op {
            op: KeyPair::new_operator(),
            sys: KeyPair::new_account(),
        }
    }

    /// An account JWT named `acme` with open limits and the `extra` fields in `nats`.
    fn account(&self, acc: &KeyPair, extra: Value) -> String {
        let mut nats = json!({"type": "account", "version": 2, "limits": open_limits()});
        if let (Some(n), Value::Object(e)) = (nats.as_object_mut(), extra) {
            n.extend(e);
        }
        let c = json!({"sub": acc.public_key(), "name": "acme", "nats": nats});
        encode(&c, &self.op).expect("account JWT")
    }

    fn conf(&self, accounts: &[(&KeyPair, String)]) -> String {
        self.conf_with_sys(json!({}), accounts)
    }

    /// [`Op::conf`] with the `extra` fields in the system account's claims.
    fn conf_with_sys(&self, extra: Value, accounts: &[(&KeyPair, String)]) -> String {
        let opc = json!({"sub": self.op.public_key(), "name": "O", "nats": {"type": "operator",
            "version": 2, "system_account": self.sys.public_key()}});
        let op_jwt = encode(&opc, &self.op).expect("operator JWT");
        let sys_jwt = self.account(&self.sys, extra);
        let preload: String = accounts
            .iter()
            .map(|(k, t)| format!("  {}: \"{t}\"\n", k.public_key()))
            .collect();
        format!(
            "operator: \"{op_jwt}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
             resolver_preload {{\n  {sys}: \"{sys_jwt}\"\n{preload}}}\n",
            sys = self.sys.public_key()
        )
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Whether a CONNECT with `jwt` signed by `user` gets in (`PONG`) or is refused with
/// `Authorization Violation`; anything else fails the test.
async fn admitted(t: &Target, jwt: &str, user: &KeyPair, what: &str) -> bool {
    let (mut r, info) = hello(t.client()).await;
    r.send(&connect_jwt(jwt, Some(&sign(user, &nonce_of(&info)))))
        .await;
    let first = r.line().await;
    match first.as_str() {
        "PONG" => true,
        "-ERR 'Authorization Violation'" => {
            assert!(r.closed().await, "{}: {what}: closed", t.name());
            false
        }
        other => panic!("{}: {what}: {other}", t.name()),
    }
}

fn sub_denied(s: &str) -> String {
    format!("-ERR 'Permissions Violation for Subscription to \"{s}\"'")
}

#[tokio::test]
async fn a_scoped_signing_keys_template_replaces_its_users_permissions_as_nats_server() {
    let o = Op::new();
    let (a, scoped, bad_op, bad_deny) = (
        KeyPair::new_account(),
        KeyPair::new_account(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let scope = |key: &KeyPair, template: Value| {
        json!({"kind": "user_scope", "key": key.public_key(), "role": "r",
            "template": template})
    };
    let template = json!({
        "pub": {"allow": ["{{account-name()}}.{{name()}}.>", "t.{{tag(dept)}}",
            "acc.{{account-subject()}}"]},
        "sub": {"allow": ["_INBOX.>", "{{subject()}}.>", "x.{{tag(missing)}}"]},
        "subs": 2, "payload": 8});
    let acc = o.account(
        &a,
        json!({"tags": ["team:blue"], "signing_keys": [
            scope(&scoped, template),
            scope(&bad_op, json!({"pub": {"allow": ["{{nope()}}"]}})),
            scope(&bad_deny, json!({"pub": {"deny": ["d.{{tag(missing)}}"]}})),
        ]}),
    );
    let conf = o.conf(&[(&a, acc)]);
    let issuer_account = json!({"issuer_account": a.public_key()});
    let with = |extra: Value| {
        let mut n = issuer_account.clone();
        if let (Some(n), Value::Object(e)) = (n.as_object_mut(), extra) {
            n.extend(e);
        }
        n
    };
    for t in [Target::natsd(&conf).await, Target::go(&conf, "scoped")] {
        let who = t.name();
        let u = KeyPair::new_user();
        let jwt = bare_user_jwt(
            &u,
            &scoped,
            with(json!({"tags": ["dept:sales", "dept:ops"]})),
        );
        let mut r = logged_in(&t, &jwt, &u).await;
        let (acc_subj, me) = (format!("acc.{}", a.public_key()), u.public_key());
        let cmds = format!(
            "PUB acme.u.x 1\r\nx\r\nPUB t.sales 1\r\nx\r\nPUB t.ops 1\r\nx\r\n\
             PUB {acc_subj} 1\r\nx\r\nPUB other 1\r\nx\r\n\
             SUB {me}.x 1\r\nSUB x.y 2\r\nSUB _INBOX.a 3\r\nSUB _INBOX.b 4\r\n"
        );
        assert_eq!(
            answers(&mut r, &cmds).await,
            vec![
                pub_denied("other"),
                sub_denied("x.y"),
                "-ERR 'maximum subscriptions exceeded'".to_string(),
            ],
            "{who}"
        );
        // The template's payload limit (8), not the user's.
        r.send("PUB acme.u.x 9\r\n123456789\r\n").await;
        assert_eq!(
            refused(&mut r).await.as_deref(),
            Some("-ERR 'Maximum Payload Violation'"),
            "{who}"
        );
        // Scoped users may set no permissions or limits of their own.
        for (what, nats) in [
            ("own permissions", with(json!({"pub": {"deny": ["x"]}}))),
            (
                "own limits",
                with(json!({"subs": -1, "data": -1, "payload": -1})),
            ),
            ("an empty allow list", with(json!({"pub": {"allow": []}}))),
        ] {
            let u = KeyPair::new_user();
            let jwt = bare_user_jwt(&u, &scoped, nats);
            assert!(!admitted(&t, &jwt, &u, what).await, "{who}: {what}");
        }
        // A zero permission object is no permission.
        let u = KeyPair::new_user();
        let jwt = bare_user_jwt(&u, &scoped, with(json!({"pub": {}, "sub": {}})));
        assert!(admitted(&t, &jwt, &u, "empty objects").await, "{who}");
        // Templates that name an unknown operation, or leave a deny entry empty: refused.
        for (what, key) in [("unknown op", &bad_op), ("deny tag", &bad_deny)] {
            let u = KeyPair::new_user();
            let jwt = bare_user_jwt(&u, key, issuer_account.clone());
            assert!(!admitted(&t, &jwt, &u, what).await, "{who}: {what}");
        }
        // A scoped key signing without naming its account is not the account's issuer.
        let u = KeyPair::new_user();
        let jwt = bare_user_jwt(&u, &scoped, json!({}));
        assert!(!admitted(&t, &jwt, &u, "no issuer_account").await, "{who}");
        t.stop().await;
    }
}

#[tokio::test]
async fn revoked_users_are_refused_at_connect_as_nats_server() {
    let o = Op::new();
    let a = KeyPair::new_account();
    let (u1, u2, u3, u4) = (
        KeyPair::new_user(),
        KeyPair::new_user(),
        KeyPair::new_user(),
        KeyPair::new_user(),
    );
    let t0 = now();
    // u1 revoked as of its issue time; u2 as of before it; everyone issued before t0 - 1000.
    let acc = o.account(
        &a,
        json!({"revocations": {
            u1.public_key(): t0 - 100,
            u2.public_key(): t0 - 200,
            "*": t0 - 1000,
        }}),
    );
    let conf = o.conf(&[(&a, acc)]);
    let issued = |u: &KeyPair, iat: i64| user_jwt(u, &a, json!({"iat": iat}));
    let cases = [
        ("revoked at its iat", issued(&u1, t0 - 100), &u1, false),
        (
            "issued after its revocation",
            issued(&u2, t0 - 100),
            &u2,
            true,
        ),
        (
            "issued before the * revocation",
            issued(&u3, t0 - 2000),
            &u3,
            false,
        ),
        (
            "issued after the * revocation",
            issued(&u4, t0 - 10),
            &u4,
            true,
        ),
    ];
    for t in [Target::natsd(&conf).await, Target::go(&conf, "revoked")] {
        for (what, jwt, u, ok) in &cases {
            assert_eq!(
                admitted(&t, jwt, u, what).await,
                *ok,
                "{}: {what}",
                t.name()
            );
        }
        wait_for("the refused among the closed connections", || async {
            let c = t.connz("state=closed").await;
            let n = c["connections"].as_array().map_or(0, |a| {
                a.iter()
                    .filter(|c| c["reason"] == "Authentication Failure")
                    .count()
            });
            n == 2
        })
        .await;
        t.stop().await;
    }
}

#[tokio::test]
async fn src_and_connection_types_as_nats_server() {
    let o = Op::new();
    let a = KeyPair::new_account();
    let conf = o.conf(&[(&a, o.account(&a, json!({})))]);
    let cases = [
        ("src elsewhere", json!({"src": ["10.0.0.0/8"]}), false),
        (
            "src loopback",
            json!({"src": ["10.0.0.0/8", "127.0.0.0/8"]}),
            true,
        ),
        (
            "src as one string",
            json!({"src": "10.0.0.0/8,127.0.0.1/32"}),
            true,
        ),
        ("src a host /32", json!({"src": ["127.0.0.2/32"]}), false),
        ("src not a cidr", json!({"src": ["127.0.0.1"]}), false),
        (
            "types standard",
            json!({"allowed_connection_types": ["STANDARD"]}),
            true,
        ),
        (
            "types lower case",
            json!({"allowed_connection_types": ["standard"]}),
            true,
        ),
        (
            "types websocket",
            json!({"allowed_connection_types": ["WEBSOCKET"]}),
            false,
        ),
        (
            "types unknown",
            json!({"allowed_connection_types": ["FOO"]}),
            false,
        ),
        (
            "types unknown and standard",
            json!({"allowed_connection_types": ["FOO", "STANDARD"]}),
            true,
        ),
        (
            "types leaf and mqtt",
            json!({"allowed_connection_types": ["LEAFNODE", "MQTT"]}),
            false,
        ),
    ];
    for t in [Target::natsd(&conf).await, Target::go(&conf, "src")] {
        for (what, extra, ok) in &cases {
            let u = KeyPair::new_user();
            let jwt = user_jwt(&u, &a, extra.clone());
            assert_eq!(
                admitted(&t, &jwt, &u, what).await,
                *ok,
                "{}: {what}",
                t.name()
            );
        }
        t.stop().await;
    }
}

#[tokio::test]
async fn a_users_own_limits_as_nats_server() {
    let o = Op::new();
    let (a, small) = (KeyPair::new_account(), KeyPair::new_account());
    let mut limits = open_limits();
    limits["subs"] = 1.into();
    let small_jwt = o.account(&small, json!({"limits": limits}));
    let conf = o.conf(&[(&a, o.account(&a, json!({}))), (&small, small_jwt)]);
    for t in [Target::natsd(&conf).await, Target::go(&conf, "ulimits")] {
        let who = t.name();
        // `subs: 1`, `payload: 4`, and `data` (which nats-server does not enforce).
        let u = KeyPair::new_user();
        let jwt = user_jwt(&u, &a, json!({"subs": 1, "payload": 4, "data": 10}));
        let mut r = logged_in(&t, &jwt, &u).await;
        assert_eq!(
            answers(&mut r, "SUB a 1\r\nSUB b 2\r\nPUB z 4\r\n1234\r\n").await,
            vec!["-ERR 'maximum subscriptions exceeded'".to_string()],
            "{who}"
        );
        r.send("PUB z 5\r\n12345\r\n").await;
        assert_eq!(
            refused(&mut r).await.as_deref(),
            Some("-ERR 'Maximum Payload Violation'"),
            "{who}"
        );
        // The lower of the user's and the account's.
        let jwt = user_jwt(&u, &small, json!({"subs": 5}));
        let mut r = logged_in(&t, &jwt, &u).await;
        assert_eq!(
            answers(&mut r, "SUB a 1\r\nSUB b 2\r\n").await,
            vec!["-ERR 'maximum subscriptions exceeded'".to_string()],
            "{who}"
        );
        // A v2 user JWT without a `payload` has 0: any payload is too big.
        let jwt = bare_user_jwt(&u, &a, json!({"subs": -1}));
        let mut r = logged_in(&t, &jwt, &u).await;
        assert_eq!(
            answers(&mut r, "PUB z 0\r\n\r\n").await,
            Vec::<String>::new()
        );
        r.send("PUB z 1\r\nx\r\n").await;
        assert_eq!(
            refused(&mut r).await.as_deref(),
            Some("-ERR 'Maximum Payload Violation'"),
            "{who}"
        );
        // Without `subs` it has 0 subscriptions, at its limit from the start: nats-server
        // says so and closes it at once.
        let jwt = bare_user_jwt(&u, &a, json!({}));
        let (mut r, info) = hello(t.client()).await;
        r.send(&connect_jwt(&jwt, Some(&sign(&u, &nonce_of(&info)))))
            .await;
        let said = refused(&mut r).await.unwrap_or_default();
        assert!(
            said.contains("-ERR 'maximum subscriptions exceeded'"),
            "{who}: {said}"
        );
        wait_for("the closed reason", || async {
            let c = t.connz("state=closed").await;
            c["connections"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|c| c["reason"] == "Maximum Subscriptions Exceeded")
            })
        })
        .await;
        t.stop().await;
    }
}

/// A user JWT's `resp { max }`: its publish permissions shut (no allow list means none), it
/// may still answer the reply subject of each request it gets, `max` times.
#[tokio::test]
async fn response_permissions_as_nats_server() {
    let o = Op::new();
    let a = KeyPair::new_account();
    let conf = o.conf(&[(&a, o.account(&a, json!({})))]);
    for t in [Target::natsd(&conf).await, Target::go(&conf, "resp")] {
        let who = t.name();
        let (q, s, s2) = (
            KeyPair::new_user(),
            KeyPair::new_user(),
            KeyPair::new_user(),
        );
        let mut requester = logged_in(&t, &user_jwt(&q, &a, json!({})), &q).await;
        let once = user_jwt(&s, &a, json!({"resp": {"max": 1, "ttl": 0}}));
        let mut svc = logged_in(&t, &once, &s).await;
        let twice = json!({"resp": {"max": 2}, "pub": {"allow": ["log"]}});
        let mut svc2 = logged_in(&t, &user_jwt(&s2, &a, twice), &s2).await;
        assert!(answers(&mut svc, "SUB svc 1\r\n").await.is_empty(), "{who}");
        assert!(
            answers(&mut svc2, "SUB svc2 1\r\n").await.is_empty(),
            "{who}"
        );
        let req = "SUB _INBOX.q 9\r\nPUB svc _INBOX.q 1\r\nq\r\nPUB svc2 _INBOX.r 1\r\nq\r\n";
        assert!(answers(&mut requester, req).await.is_empty(), "{who}");
        assert_eq!(svc.next_non_ping().await, "MSG svc 1 _INBOX.q 1", "{who}");
        assert_eq!(svc.line().await, "q");
        // One answer; the second, and anything else, is a violation.
        let cmds = "PUB _INBOX.q 1\r\na\r\nPUB _INBOX.q 1\r\nb\r\nPUB other 1\r\nc\r\n";
        assert_eq!(
            answers(&mut svc, cmds).await,
            vec![pub_denied("_INBOX.q"), pub_denied("other")],
            "{who}"
        );
        // With an allow list and `max: 2` (a reply never delivered to it stays denied).
        assert_eq!(svc2.next_non_ping().await, "MSG svc2 1 _INBOX.r 1", "{who}");
        assert_eq!(svc2.line().await, "q");
        let cmds = "PUB log 0\r\n\r\nPUB _INBOX.r 0\r\n\r\nPUB _INBOX.r 0\r\n\r\n\
                    PUB _INBOX.r 0\r\n\r\nPUB _INBOX.q 0\r\n\r\n";
        assert_eq!(
            answers(&mut svc2, cmds).await,
            vec![pub_denied("_INBOX.r"), pub_denied("_INBOX.q")],
            "{who}"
        );
        // The requester got the one answer of the first.
        assert_eq!(requester.next_non_ping().await, "MSG _INBOX.q 9 1", "{who}");
        assert_eq!(requester.line().await, "a");
        t.stop().await;
    }
}

/// An activation token: `exporter` grants `importer` the `kind` export `subject`.
fn activation(exporter: &KeyPair, importer: &KeyPair, subject: &str, kind: &str) -> String {
    let c = json!({"sub": importer.public_key(), "name": "grant", "nats": {
        "type": "activation", "version": 2, "subject": subject, "kind": kind}});
    encode(&c, exporter).expect("activation JWT")
}

/// Account JWT `exports` and `imports`: public streams and services, private ones opened
/// by activation tokens; imports without a token are dropped (the rest still load), and a
/// token for another account invalidates the importing account altogether.
#[tokio::test]
async fn account_jwt_exports_and_imports_as_nats_server() {
    let o = Op::new();
    let (x, y, z) = (
        KeyPair::new_account(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let xk = x.public_key();
    let x_jwt = o.account(
        &x,
        json!({"exports": [
            {"name": "news", "subject": "news.>", "type": "stream"},
            {"name": "help", "subject": "help", "type": "service"},
            {"name": "priv", "subject": "priv", "type": "service", "token_req": true},
            {"name": "secret", "subject": "secret.>", "type": "stream", "token_req": true},
        ]}),
    );
    let y_jwt = o.account(
        &y,
        json!({"imports": [
            {"name": "n", "subject": "news.>", "account": xk, "type": "stream"},
            {"name": "h", "subject": "help", "account": xk, "type": "service",
                "local_subject": "ask"},
            {"name": "p", "subject": "priv", "account": xk, "type": "service",
                "token": activation(&x, &y, "priv", "service")},
            {"name": "s", "subject": "secret.>", "account": xk, "type": "stream", "to": "x",
                "token": activation(&x, &y, "secret.>", "stream")},
        ]}),
    );
    let z_jwt = o.account(
        &z,
        json!({"imports": [
            {"name": "n", "subject": "news.>", "account": xk, "type": "stream"},
            {"name": "h", "subject": "help", "account": xk, "type": "service"},
            {"name": "p", "subject": "priv", "account": xk, "type": "service"},
            {"name": "s", "subject": "secret.>", "account": xk, "type": "stream"},
        ]}),
    );
    // A token made out to another account makes the whole account JWT invalid.
    let w = KeyPair::new_account();
    let w_jwt = o.account(
        &w,
        json!({"imports": [
            {"name": "s", "subject": "secret.>", "account": xk, "type": "stream",
                "token": activation(&x, &y, "secret.>", "stream")},
        ]}),
    );
    let conf = o.conf(&[(&x, x_jwt), (&y, y_jwt), (&z, z_jwt), (&w, w_jwt)]);
    for t in [Target::natsd(&conf).await, Target::go(&conf, "links")] {
        let who = t.name();
        let user = |acc: &KeyPair| {
            let u = KeyPair::new_user();
            (user_jwt(&u, acc, json!({})), u)
        };
        let ((xj, xu), (yj, yu), (zj, zu)) = (user(&x), user(&y), user(&z));
        let mut xc = logged_in(&t, &xj, &xu).await;
        let mut yc = logged_in(&t, &yj, &yu).await;
        let mut zc = logged_in(&t, &zj, &zu).await;
        let (wj, wu) = user(&w);
        assert!(!admitted(&t, &wj, &wu, "W").await, "{who}: invalid account");
        assert!(answers(&mut xc, "SUB help 1\r\nSUB priv 2\r\n")
            .await
            .is_empty());
        let ysubs = "SUB news.> 1\r\nSUB x.secret.> 2\r\nSUB _INBOX.y 3\r\n";
        assert!(answers(&mut yc, ysubs).await.is_empty());
        let zsubs = "SUB news.> 1\r\nSUB secret.> 2\r\nSUB _INBOX.z 3\r\n";
        assert!(answers(&mut zc, zsubs).await.is_empty());
        // Streams.
        xc.send("PUB secret.1 1\r\ns\r\nPUB news.a 1\r\nn\r\n")
            .await;
        assert_eq!(yc.next_non_ping().await, "MSG x.secret.1 2 1", "{who}");
        assert_eq!(yc.line().await, "s");
        assert_eq!(yc.next_non_ping().await, "MSG news.a 1 1", "{who}");
        assert_eq!(yc.line().await, "n");
        // Z has no valid token for secret.>: news.a is the first it gets.
        assert_eq!(zc.next_non_ping().await, "MSG news.a 1 1", "{who}");
        assert_eq!(zc.line().await, "n");
        // Services: Y's `ask` (local_subject) and the private `priv` reach X; Z's `priv`
        // (no token) does not, its public `help` does.
        yc.send("PUB ask _INBOX.y 1\r\n1\r\nPUB priv _INBOX.y 1\r\n2\r\n")
            .await;
        zc.send("PUB priv _INBOX.z 1\r\n3\r\nPUB help _INBOX.z 1\r\n4\r\n")
            .await;
        let mut got = Vec::new();
        while got.len() < 3 {
            // Requests through a service import carry a header (`Nats-Request-Info` on
            // 2.15.1): HMSG, the payload last.
            let l = xc.next_non_ping().await;
            let parts: Vec<&str> = l.split(' ').collect();
            if let ["MSG" | "HMSG", subject, .., total] = parts[..] {
                let total: usize = total.parse().expect("size");
                let body = xc.payload(total).await;
                let last = body.last().map(|b| char::from(*b).to_string());
                got.push((subject.to_string(), last.unwrap_or_default()));
            }
        }
        got.sort();
        let want = [("help", "1"), ("help", "4"), ("priv", "2")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want, "{who}");
        t.stop().await;
    }
}

/// Exports with `account_token_position`: open to every account, each only for the
/// subjects that carry its own key at that token (an import of another account's subjects
/// is not added). The system account has the two such exports nsc writes for it (both
/// servers start with them).
#[tokio::test]
async fn exports_keyed_by_the_importing_account_as_nats_server() {
    let o = Op::new();
    let (x, y, z) = (
        KeyPair::new_account(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let (xk, yk, zk) = (x.public_key(), y.public_key(), z.public_key());
    let x_jwt = o.account(
        &x,
        json!({"exports": [
            {"name": "ev", "subject": "events.*.>", "type": "stream", "account_token_position": 2},
            {"name": "ask", "subject": "svc.*.ask", "type": "service", "account_token_position": 2},
        ]}),
    );
    let import = |subject: String, kind: &str| json!({"name": subject.clone(), "subject": subject, "account": xk.clone(), "type": kind});
    let y_jwt = o.account(
        &y,
        json!({"imports": [
            import(format!("events.{yk}.>"), "stream"),
            import(format!("events.{zk}.>"), "stream"),
            import(format!("svc.{yk}.ask"), "service"),
        ]}),
    );
    let z_jwt = o.account(
        &z,
        json!({"imports": [import(format!("svc.{yk}.ask"), "service")]}),
    );
    // nsc's system account exports.
    let sys = json!({"exports": [
        {"name": "account-monitoring-streams", "subject": "$SYS.ACCOUNT.*.>",
            "type": "stream", "account_token_position": 3},
        {"name": "account-monitoring-services", "subject": "$SYS.REQ.ACCOUNT.*.*",
            "type": "service", "response_type": "Stream", "account_token_position": 4},
    ]});
    // A position that is not a `*` token makes the account invalid: its users are refused.
    let w = KeyPair::new_account();
    let w_jwt = o.account(
        &w,
        json!({"exports": [{"name": "bad", "subject": "open.>", "type": "stream",
            "account_token_position": 1}]}),
    );
    let accounts = [(&x, x_jwt), (&y, y_jwt), (&z, z_jwt), (&w, w_jwt)];
    let conf = o.conf_with_sys(sys, &accounts);
    for t in [Target::natsd(&conf).await, Target::go(&conf, "keyed")] {
        let who = t.name();
        let user = |acc: &KeyPair| {
            let u = KeyPair::new_user();
            (user_jwt(&u, acc, json!({})), u)
        };
        let ((xj, xu), (yj, yu), (zj, zu)) = (user(&x), user(&y), user(&z));
        let (wj, wu) = user(&w);
        assert!(!admitted(&t, &wj, &wu, "W").await, "{who}: invalid account");
        let mut xc = logged_in(&t, &xj, &xu).await;
        let mut yc = logged_in(&t, &yj, &yu).await;
        let mut zc = logged_in(&t, &zj, &zu).await;
        assert!(answers(&mut xc, "SUB svc.*.ask 1\r\n").await.is_empty());
        let ysubs = "SUB events.> 1\r\nSUB _INBOX.y 3\r\n";
        assert!(answers(&mut yc, ysubs).await.is_empty());
        assert!(answers(&mut zc, "SUB _INBOX.z 1\r\n").await.is_empty());
        // Y gets its own events, not Z's.
        xc.send(&format!(
            "PUB events.{zk}.1 1\r\nz\r\nPUB events.{yk}.1 1\r\ny\r\n"
        ))
        .await;
        assert_eq!(
            yc.next_non_ping().await,
            format!("MSG events.{yk}.1 1 1"),
            "{who}"
        );
        assert_eq!(yc.line().await, "y");
        // Z's import of Y's service subject was not added: only Y's requests reach X.
        zc.send(&format!("PUB svc.{yk}.ask _INBOX.z 1\r\nz\r\n"))
            .await;
        yc.send(&format!("PUB svc.{yk}.ask _INBOX.y 1\r\ny\r\n"))
            .await;
        let l = xc.next_non_ping().await;
        let parts: Vec<&str> = l.split(' ').collect();
        let ["MSG" | "HMSG", subject, .., total] = parts[..] else {
            panic!("{who}: {l}");
        };
        assert_eq!(subject, format!("svc.{yk}.ask"), "{who}");
        let body = xc.payload(total.parse().expect("size")).await;
        assert_eq!(body.last(), Some(&b'y'), "{who}: {l}");
        t.stop().await;
    }
}

/// An account JWT update on `$SYS.REQ.ACCOUNT.<key>.CLAIMS.UPDATE` (MEMORY resolver) that
/// revokes a connected user: the update is answered `jwt updated`, the user gets `-ERR 'User
/// Authentication Revoked'` and is closed as "Credentials Revoked"; the others stay.
#[tokio::test]
async fn a_claims_update_revokes_connected_users_as_nats_server() {
    let o = Op::new();
    let a = KeyPair::new_account();
    let conf = o.conf(&[(&a, o.account(&a, json!({})))]);
    let t0 = now();
    for t in [Target::natsd(&conf).await, Target::go(&conf, "update")] {
        let who = t.name();
        let (u, v, s) = (
            KeyPair::new_user(),
            KeyPair::new_user(),
            KeyPair::new_user(),
        );
        let mut uc = logged_in(&t, &user_jwt(&u, &a, json!({"iat": t0 - 10})), &u).await;
        let mut vc = logged_in(&t, &user_jwt(&v, &a, json!({})), &v).await;
        let mut sc = logged_in(&t, &user_jwt(&s, &o.sys, json!({})), &s).await;
        assert!(answers(&mut uc, "").await.is_empty(), "{who}");
        let revoking = o.account(&a, json!({"revocations": {u.public_key(): t0 - 5}}));
        let subject = format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.UPDATE", a.public_key());
        let cmds = format!(
            "SUB _INBOX.s 1\r\nPUB {subject} _INBOX.s {}\r\n{revoking}\r\n",
            revoking.len()
        );
        sc.send(&cmds).await;
        let head = sc.next_non_ping().await;
        assert!(head.starts_with("MSG _INBOX.s 1 "), "{who}: {head}");
        let answer: Value = serde_json::from_str(&sc.line().await).expect("JSON answer");
        assert_eq!(
            answer["data"],
            json!({"account": a.public_key(), "code": 200, "message": "jwt updated"}),
            "{who}"
        );
        assert_eq!(
            refused(&mut uc).await.as_deref(),
            Some("-ERR 'User Authentication Revoked'"),
            "{who}"
        );
        wait_for("the revoked client's close reason", || async {
            let c = t.connz("state=closed").await;
            c["connections"]
                .as_array()
                .is_some_and(|a| a.iter().any(|c| c["reason"] == "Credentials Revoked"))
        })
        .await;
        assert!(answers(&mut vc, "").await.is_empty(), "{who}: others stay");
        // And it stays revoked for new connections.
        let again = user_jwt(&u, &a, json!({"iat": t0 - 10}));
        assert!(!admitted(&t, &again, &u, "revoked").await, "{who}");
        t.stop().await;
    }
}

/// An account's `default_permissions` apply to its users that have none of their own.
#[tokio::test]
async fn account_default_permissions_as_nats_server() {
    let o = Op::new();
    let a = KeyPair::new_account();
    let acc = o.account(
        &a,
        json!({"default_permissions": {"pub": {"deny": ["secret"]}, "sub": {}}}),
    );
    let conf = o.conf(&[(&a, acc)]);
    for t in [Target::natsd(&conf).await, Target::go(&conf, "defperms")] {
        let who = t.name();
        let (u, v) = (KeyPair::new_user(), KeyPair::new_user());
        let mut plain = logged_in(&t, &user_jwt(&u, &a, json!({})), &u).await;
        let own = json!({"sub": {"deny": ["x"]}});
        let mut with_own = logged_in(&t, &user_jwt(&v, &a, own), &v).await;
        let cmds = "PUB secret 0\r\n\r\nSUB x 1\r\n";
        assert_eq!(
            answers(&mut plain, cmds).await,
            vec![pub_denied("secret")],
            "{who}"
        );
        assert_eq!(
            answers(&mut with_own, cmds).await,
            vec![sub_denied("x")],
            "{who}"
        );
        t.stop().await;
    }
}
