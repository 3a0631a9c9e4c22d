//! Auth callout in server-config mode (`authorization { auth_callout { issuer, auth_users,
//! account, xkey } }`), on natsd and nats-server 2.15.1 alike: a service written here with
//! the `nkeys` crate answers `$SYS.REQ.USER.AUTH` — it checks the server-signed request,
//! then admits alice into account APP with permissions, or refuses with an error — and the
//! server admits or refuses the client accordingly, encrypted with xkeys or not.

mod common;

use common::auth::Target;
use common::Raw;
use futures::StreamExt;
use natsd::jwt::{decode_generic, encode};
use nkeys::{KeyPair, XKey};
use serde_json::{json, Value};

/// The service's keys: the issuer account that signs users and answers, and its xkey.
struct Service {
    issuer: KeyPair,
    xkey: XKey,
}

impl Service {
    fn new() -> Service {
        Service {
            issuer: KeyPair::new_account(),
            xkey: XKey::new(),
        }
    }

    /// The server config: the service's account AUTH (user `auth`), the users' account APP.
    fn conf(&self, xkey: bool) -> String {
        let x = if xkey {
            format!(", xkey: {}", self.xkey.public_key())
        } else {
            String::new()
        };
        format!(
            "accounts {{ AUTH {{ users: [ {{ user: auth, password: pwd }} ] }}, APP {{}} }}\n\
             authorization {{ timeout: 1, auth_callout {{ issuer: {}, auth_users: [ auth ], \
             account: AUTH{x} }} }}\n",
            self.issuer.public_key()
        )
    }

    /// The answer to one request: alice with password `secret` into APP (may publish and
    /// subscribe under `app.>` and get replies), anyone else refused.
    fn answer(&self, token: &str, server_id: &str) -> String {
        let req = decode_generic(token).expect("a request signed by the server's key");
        assert_eq!(
            req["iss"], server_id,
            "the request is signed with the server id's key"
        );
        let n = &req["nats"];
        assert_eq!(n["type"], "authorization_request", "{req}");
        assert_eq!(n["server_id"]["id"], server_id, "{req}");
        assert_eq!(req["aud"], "nats-authorization-request", "{req}");
        assert_eq!(req["sub"], self.issuer.public_key().as_str(), "{req}");
        let user_nkey = n["user_nkey"].as_str().expect("user_nkey");
        let opts = &n["connect_opts"];
        let mut resp = json!({"sub": user_nkey, "aud": server_id,
            "nats": {"type": "authorization_response", "version": 2}});
        if opts["user"] == "alice" && opts["pass"] == "secret" {
            let user = json!({"sub": user_nkey, "aud": "APP", "name": "alice",
                "nats": {"type": "user", "version": 2,
                    "pub": {"allow": ["app.>", "_INBOX.>"]},
                    "sub": {"allow": ["app.>", "_INBOX.>"]}}});
            resp["nats"]["jwt"] = encode(&user, &self.issuer).expect("user JWT").into();
        } else {
            resp["nats"]["error"] = "bad credentials".into();
        }
        encode(&resp, &self.issuer).expect("response JWT")
    }

    /// Serve requests on `nc` (a user of AUTH) until it closes.
    async fn serve(self, nc: async_nats::Client, server_id: String) {
        let xkey = self.xkey.clone();
        common::callout::serve(nc, xkey, move |t| self.answer(t, &server_id)).await;
    }
}

/// A raw client's CONNECT with user and password, and the first line the server answers.
async fn connect(t: &Target, user: &str, pass: &str) -> (Raw, String) {
    let mut r = Raw::at(t.client()).await;
    let c = json!({"verbose": false, "pedantic": false, "protocol": 1, "headers": true,
        "user": user, "pass": pass});
    r.send(&format!("CONNECT {c}\r\nPING\r\n")).await;
    let first = r.next_non_ping().await;
    (r, first)
}

async fn service_user(t: &Target) -> (async_nats::Client, String) {
    let nc = async_nats::ConnectOptions::with_user_and_password("auth".into(), "pwd".into())
        .max_reconnects(Some(0))
        .connect(format!("nats://{}", t.client()))
        .await
        .expect("the auth user connects without a callout");
    let id = nc.server_info().server_id;
    (nc, id)
}

#[tokio::test]
async fn the_service_admits_and_refuses_users_as_on_nats_server() {
    for xkey in [false, true] {
        for go in [false, true] {
            let svc = Service::new();
            let conf = svc.conf(xkey);
            let t = if go {
                Target::go(&conf, &format!("callout-{xkey}"))
            } else {
                Target::natsd(&conf).await
            };
            let who = format!("{} (xkey: {xkey})", t.name());
            let (nc, id) = service_user(&t).await;
            let server_key = KeyPair::from_public_key(&id);
            assert!(
                server_key.is_ok_and(|k| k.key_pair_type() == nkeys::KeyPairType::Server),
                "{who}: the server id is a server public nkey: {id}"
            );
            svc.serve(nc.clone(), id).await;
            // Alice is admitted into APP, with the permissions the service gave her.
            let (mut alice, first) = connect(&t, "alice", "secret").await;
            assert_eq!(first, "PONG", "{who}");
            let (mut other, first) = connect(&t, "alice", "secret").await;
            assert_eq!(first, "PONG", "{who}");
            other.send("SUB app.x 1\r\n").await;
            other.flush().await;
            alice.send("PUB app.x 2\r\nhi\r\nPING\r\n").await;
            assert_eq!(alice.next_non_ping().await, "PONG", "{who}");
            assert_eq!(other.next_non_ping().await, "MSG app.x 1 2", "{who}");
            assert_eq!(other.line().await, "hi", "{who}");
            alice.send("SUB other.x 2\r\nPING\r\n").await;
            assert_eq!(
                alice.next_non_ping().await,
                "-ERR 'Permissions Violation for Subscription to \"other.x\"'",
                "{who}"
            );
            // The service's own account (AUTH) is not where she is: nothing reaches it.
            let mut in_auth = nc.subscribe("app.x").await.expect("subscribe");
            nc.flush().await.expect("flush");
            alice.send("PUB app.x 5\r\nhello\r\nPING\r\n").await;
            assert_eq!(alice.next_non_ping().await, "PONG", "{who}");
            assert_eq!(other.next_non_ping().await, "MSG app.x 1 5", "{who}");
            let stray =
                tokio::time::timeout(std::time::Duration::from_millis(200), in_auth.next()).await;
            assert!(stray.is_err(), "{who}: a message crossed into AUTH");
            // Bob is refused: the service said no.
            let (mut bob, first) = connect(&t, "bob", "secret").await;
            assert_eq!(first, "-ERR 'Authorization Violation'", "{who}");
            assert!(bob.closed().await, "{who}");
            // The auth user may not publish requests to the service itself.
            let (mut auth, first) = connect(&t, "auth", "pwd").await;
            assert_eq!(first, "PONG", "{who}");
            auth.send("PUB $SYS.REQ.USER.AUTH 2\r\nhi\r\nPING\r\n")
                .await;
            assert_eq!(
                auth.next_non_ping().await,
                "-ERR 'Permissions Violation for Publish to \"$SYS.REQ.USER.AUTH\"'",
                "{who}"
            );
            drop(nc);
            t.stop().await;
        }
    }
}

/// No service answers: after the authorization timeout the client is refused.
#[tokio::test]
async fn without_an_answer_the_client_is_refused_after_the_timeout() {
    for go in [false, true] {
        let svc = Service::new();
        let conf = svc.conf(false);
        let t = if go {
            Target::go(&conf, "callout-silent")
        } else {
            Target::natsd(&conf).await
        };
        let who = t.name();
        let (_, first) = connect(&t, "alice", "secret").await;
        assert_eq!(first, "-ERR 'Authorization Violation'", "{who}");
        t.stop().await;
    }
}

/// Answers that must not admit anyone: for another user key, for another server, a user
/// JWT signed by a key that is not the issuer.
#[tokio::test]
async fn forged_answers_are_refused() {
    // (answer for another user key, answer for another server, user signed by a stranger)
    let kinds = [
        (true, false, false),
        (false, true, false),
        (false, false, true),
    ];
    for go in [false, true] {
        let svc = Service::new();
        let t = if go {
            Target::go(&svc.conf(false), "callout-forged")
        } else {
            Target::natsd(&svc.conf(false)).await
        };
        let who = t.name();
        let (nc, _) = service_user(&t).await;
        let mut sub = nc.subscribe("$SYS.REQ.USER.AUTH").await.expect("sub");
        nc.flush().await.expect("flush");
        for (i, forge) in kinds.iter().enumerate() {
            let client = tokio::spawn({
                let addr = t.client();
                async move {
                    let mut r = Raw::at(addr).await;
                    r.send("CONNECT {\"user\":\"alice\",\"pass\":\"secret\",\"protocol\":1}\r\nPING\r\n")
                        .await;
                    r.next_non_ping().await
                }
            });
            let m = sub.next().await.expect("a request");
            let req =
                decode_generic(std::str::from_utf8(&m.payload).expect("UTF-8")).expect("request");
            let reply = m.reply.expect("reply subject");
            nc.publish(reply, forged(&req, &svc.issuer, *forge).into())
                .await
                .expect("publish");
            nc.flush().await.expect("flush");
            let first = client.await.expect("client task");
            assert_eq!(
                first, "-ERR 'Authorization Violation'",
                "{who}: forgery {i}"
            );
        }
        drop(nc);
        t.stop().await;
    }
}

/// An answer to `req` that is wrong in the ways `(user, server, signer)` say.
fn forged(req: &Value, issuer: &KeyPair, (user, server, signer): (bool, bool, bool)) -> String {
    let n = &req["nats"];
    let u: Value = match user {
        true => KeyPair::new_user().public_key().into(),
        false => n["user_nkey"].clone(),
    };
    let aud: Value = match server {
        true => KeyPair::new_server().public_key().into(),
        false => n["server_id"]["id"].clone(),
    };
    let stranger = KeyPair::new_account();
    let user_jwt = json!({"sub": u, "aud": "APP", "nats": {"type": "user", "version": 2}});
    let user_jwt = encode(&user_jwt, if signer { &stranger } else { issuer }).expect("jwt");
    let resp = json!({"sub": u, "aud": aud,
        "nats": {"type": "authorization_response", "version": 2, "jwt": user_jwt}});
    encode(&resp, issuer).expect("jwt")
}

/// In operator mode the callout is an account JWT's (`tests/auth_callout_operator.rs`):
/// an `authorization { auth_callout }` block beside `operator` is refused at startup, with
/// nats-server's text.
#[test]
fn operator_mode_refuses_a_configured_callout() {
    let o = common::resolver::Op::new();
    let dir = common::binary::tmp_dir("callout", "operator");
    let svc = Service::new();
    let conf = o.conf(
        &dir,
        &format!(
            "authorization {{ auth_callout {{ issuer: {}, auth_users: [ auth ] }} }}",
            svc.issuer.public_key()
        ),
    );
    let want = "operators do not allow authorization callouts to be configured directly";
    let e = natsd::config::file::load_str(&conf).expect_err("refused");
    assert!(e.to_string().contains(want), "natsd: {e}");
    let go = format!("listen: 127.0.0.1:-1\n{conf}");
    let path = common::binary::write_conf(&dir, "go.conf", &go);
    let out = std::process::Command::new(common::natsserver::assert_installed_215())
        .arg("-c")
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run nats-server");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains(want),
        "nats-server: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The next request's `client_tls` from `rx`, checked: TLS 1.3 and the chain `cert` was
/// verified along (it, then the test CA), as PEM.
fn verified_tls(
    rx: &std::sync::mpsc::Receiver<serde_json::Value>,
    pki: &common::pki::Pki,
    cert: &common::pki::Issued,
    who: &str,
) -> serde_json::Value {
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
    let tls = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("a request");
    let der = |path: &std::path::Path| {
        let pem = std::fs::read(path).expect("pem");
        CertificateDer::from_pem_slice(&pem).expect("cert").to_vec()
    };
    let chain = [der(&cert.cert), der(&pki.dir.join("ca.pem"))];
    let pems: Vec<String> = chain.iter().map(|d| natsd::tls::cert::pem(d)).collect();
    assert_eq!(tls["version"], "1.3", "{who}: {tls}");
    assert_eq!(tls["verified_chains"], json!([pems]), "{who}: {tls}");
    tls
}

/// A TLS client on a port that verifies certificates: the request's `client_tls` carries the
/// TLS version, the cipher suite and the chain the client's certificate was verified along
/// (its certificate, then the CA), as PEM — the same on natsd as on nats-server.
#[tokio::test]
async fn the_request_carries_the_clients_tls_state_as_nats_server() {
    use common::pki::Pki;
    use std::sync::mpsc;
    let mut seen = Vec::new();
    for go in [false, true] {
        let pki = Pki::new("callout-tls");
        let alice = pki.issue("alice", &[(rcgen::DnType::CommonName, "alice")], vec![]);
        let svc = Service::new();
        let conf = format!("{}\n{}\n", svc.conf(false), pki.go_block());
        let t = if go {
            Target::go(&conf, "callout-tls")
        } else {
            Target::natsd(&conf).await
        };
        let who = t.name();
        let auth = pki.issue("auth", &[(rcgen::DnType::CommonName, "auth")], vec![]);
        let nc = async_nats::ConnectOptions::with_user_and_password("auth".into(), "pwd".into())
            .add_root_certificates(pki.dir.join("ca.pem"))
            .add_client_certificate(auth.cert.clone(), auth.key.clone())
            .require_tls(true)
            .max_reconnects(Some(0))
            .connect(format!("tls://localhost:{}", t.client().port()))
            .await
            .expect("the auth user connects over TLS");
        let id = nc.server_info().server_id;
        let (tx, rx) = mpsc::channel();
        let tx = std::sync::Mutex::new(tx);
        let xkey = svc.xkey.clone();
        let answer = move |token: &str| {
            let req = decode_generic(token).expect("request");
            let _ = tx.lock().map(|t| t.send(req["nats"]["client_tls"].clone()));
            svc.answer(token, &id)
        };
        common::callout::serve(nc.clone(), xkey, answer).await;
        let mut c = common::tlsclient::tls_to(t.client(), &pki, Some(&alice), true)
            .await
            .expect("handshake");
        c.send("CONNECT {\"verbose\":false,\"user\":\"alice\",\"pass\":\"secret\",\"protocol\":1}\r\nPING\r\n")
            .await;
        assert_eq!(c.answer().await.as_deref(), Some("PONG"), "{who}");
        let tls = verified_tls(&rx, &pki, &alice, who);
        assert!(tls.get("certs").is_none(), "{who}: {tls}");
        seen.push(tls["cipher"].clone());
        drop(nc);
        t.stop().await;
    }
    assert_eq!(seen[0], seen[1], "the same cipher suite name");
}

/// Serve `svc`'s answers on `nc` (of server `id`), sending what `pick` takes from each
/// request's `nats` object to the receiver returned.
async fn serve_and_watch(
    svc: Service,
    nc: &async_nats::Client,
    id: String,
    pick: fn(&serde_json::Value) -> serde_json::Value,
) -> std::sync::mpsc::Receiver<serde_json::Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let xkey = svc.xkey.clone();
    let answer = move |token: &str| {
        let req = decode_generic(token).expect("request");
        let _ = tx.lock().map(|t| t.send(pick(&req["nats"])));
        svc.answer(token, &id)
    };
    common::callout::serve(nc.clone(), xkey, answer).await;
    rx
}

/// A leaf over TLS on a leafnode port that verifies certificates: the request's `client_tls`
/// carries the session as for a client (version, cipher suite, the verified chain) — the
/// same on natsd as on nats-server.
#[tokio::test]
async fn a_tls_leafs_request_carries_its_tls_state_as_nats_server() {
    use common::pki::Pki;
    let mut seen = Vec::new();
    for go in [false, true] {
        let pki = Pki::new("callout-leaf-tls");
        let alice = pki.issue("alice", &[(rcgen::DnType::CommonName, "alice")], vec![]);
        let svc = Service::new();
        let port = common::free_port();
        let conf = format!(
            "{}\nleafnodes {{ listen: \"127.0.0.1:{port}\", {} }}\n",
            svc.conf(false),
            pki.go_block()
        );
        let t = if go {
            Target::go(&conf, "callout-leaf-tls")
        } else {
            Target::natsd(&conf).await
        };
        let who = t.name();
        let (nc, id) = service_user(&t).await;
        let rx = serve_and_watch(svc, &nc, id, |n| n["client_tls"].clone()).await;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let mut c = common::tlsclient::tls_to(addr, &pki, Some(&alice), true)
            .await
            .expect("handshake");
        c.send(
            "CONNECT {\"name\":\"leaf-alice\",\"user\":\"alice\",\"pass\":\"secret\"}\r\nPING\r\n",
        )
        .await;
        let mut got = String::new();
        while let Some(l) = c.line().await {
            if l == "PONG" || l.starts_with("-ERR") {
                got = l;
                break;
            }
        }
        assert_eq!(got, "PONG", "{who}");
        let tls = verified_tls(&rx, &pki, &alice, who);
        seen.push(tls["cipher"].clone());
        drop(nc);
        t.stop().await;
    }
    assert_eq!(seen[0], seen[1], "the same cipher suite name");
}

/// A leaf logging in on the leafnode port (no credentials of the `leafnodes` block's own) is
/// sent to the service too (`client_info.kind`: `Leafnode`): alice's leaf is bound to the
/// account the service names, bob's is refused.
#[tokio::test]
async fn leaves_are_admitted_and_refused_by_the_service_as_on_nats_server() {
    for go in [false, true] {
        let svc = Service::new();
        let port = common::free_port();
        let conf = format!(
            "{}\nleafnodes {{ listen: \"127.0.0.1:{port}\" }}\n",
            svc.conf(false)
        );
        let t = if go {
            Target::go(&conf, "callout-leaf")
        } else {
            Target::natsd(&conf).await
        };
        let who = t.name();
        let (nc, id) = service_user(&t).await;
        let rx = serve_and_watch(svc, &nc, id, |n| n["client_info"]["kind"].clone()).await;
        let mut kept = Vec::new();
        for (user, want) in [("alice", "PONG"), ("bob", "-ERR 'Authorization Violation'")] {
            let mut raw = Raw::at_any(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
            let info = raw.line().await;
            assert!(info.starts_with("INFO "), "{who}: {info}");
            let c = json!({"name": format!("leaf-{user}"), "user": user, "pass": "secret"});
            raw.send(&format!("CONNECT {c}\r\nPING\r\n")).await;
            let mut got = String::new();
            while let Some(l) = raw.try_line().await {
                if l == "PONG" || l.starts_with("-ERR") {
                    got = l;
                    break;
                }
            }
            assert_eq!(got, want, "{who}: {user}");
            let kind = rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .expect("a request");
            assert_eq!(kind, "Leafnode", "{who}");
            kept.push(raw);
        }
        let leafz = common::http_json(t.http(), "/leafz").await;
        let accounts: Vec<&str> = leafz["leafs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l["account"].as_str())
            .collect();
        assert_eq!(accounts, ["APP"], "{who}: {leafz}");
        drop(nc);
        t.stop().await;
    }
}
