//! The URL account resolver (`resolver: URL("http://…/jwt/v1/accounts/")`), on natsd and
//! nats-server 2.15.1 alike, against an account server written here: a user of an account
//! the server does not know is served once its JWT is fetched (with the accounts it imports
//! from), an account the server answers 404 for is refused, and an update pushed through
//! `$SYS` changes a fetched account live.

mod common;

use common::auth::Target;
use common::resolver::{client, json_request, Op};
use futures::StreamExt;
use nkeys::KeyPair;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An HTTP account server: `GET <path><key>` answers the JWT, or 404.
struct AccountServer {
    addr: std::net::SocketAddr,
    jwts: Arc<Mutex<HashMap<String, String>>>,
    gets: Arc<Mutex<Vec<String>>>,
}

impl AccountServer {
    async fn start() -> AccountServer {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let jwts: Arc<Mutex<HashMap<String, String>>> = Arc::default();
        let gets: Arc<Mutex<Vec<String>>> = Arc::default();
        let (j, g) = (jwts.clone(), gets.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let (j, g) = (j.clone(), g.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let key = path.rsplit('/').next().unwrap_or("").to_string();
                    g.lock().expect("gets").push(path);
                    let jwt = j.lock().expect("jwts").get(&key).cloned();
                    let resp = match jwt {
                        // The base URL itself (nats-server asks it when it starts).
                        None if key.is_empty() => {
                            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string()
                        }
                        Some(t) => format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/jwt\r\n\
                             Content-Length: {}\r\n\r\n{t}",
                            t.len()
                        ),
                        None => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".into(),
                    };
                    let _ = s.write_all(resp.as_bytes()).await;
                });
            }
        });
        AccountServer { addr, jwts, gets }
    }

    fn serve(&self, acc: &KeyPair, jwt: &str) {
        let mut j = self.jwts.lock().expect("jwts");
        j.insert(acc.public_key(), jwt.to_string());
    }

    fn fetched(&self, acc: &KeyPair) -> bool {
        let key = acc.public_key();
        self.gets
            .lock()
            .expect("gets")
            .iter()
            .any(|p| p.ends_with(&key))
    }
}

// Multi-threaded: the account server keeps answering while nats-server starts (it fetches
// the base URL and the system account before it is ready).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_are_fetched_from_the_url_as_nats_server_does() {
    let o = Op::new();
    let (a, b, c) = (
        KeyPair::new_account(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let exports = json!({"exports": [{"name": "a", "subject": "a.>", "type": "stream"}]});
    let imports = json!({"imports": [
        {"name": "a", "subject": "a.>", "account": a.public_key(), "type": "stream"}]});
    for go in [false, true] {
        let web = AccountServer::start().await;
        web.serve(&o.sys, &o.account(&o.sys, "SYS", json!({})));
        web.serve(&a, &o.account(&a, "A", exports.clone()));
        web.serve(&b, &o.account(&b, "B", imports.clone()));
        let dir = common::binary::tmp_dir("resolver", if go { "url-go" } else { "url-natsd" });
        let conf = o.conf(&dir, "").replace(
            &format!(
                "resolver {{ type: full, dir: \"{}\", allow_delete: true, interval: \"1s\" }}",
                dir.display()
            ),
            &format!("resolver: URL(\"http://{}/jwt/v1/accounts/\")", web.addr),
        );
        // The URL resolver is read-only: no preloads (nats-server refuses them), the
        // system account comes from the URL too.
        let conf: String = conf
            .lines()
            .filter(|l| !l.starts_with("resolver_preload"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(conf.contains("URL(") && !conf.contains("preload"), "{conf}");
        let t = if go {
            Target::go(&conf, "resolver-url")
        } else {
            Target::natsd(&conf).await
        };
        let who = t.name();
        // B is fetched as its user connects, and A with it (B imports A's stream).
        let bc = client(t.client(), &KeyPair::new_user(), &b)
            .await
            .unwrap_or_else(|e| panic!("{who}: a user of B: {e}"));
        assert!(web.fetched(&b) && web.fetched(&a), "{who}");
        let mut from_a = bc.subscribe("a.>").await.expect("subscribe");
        bc.flush().await.expect("flush");
        let ac = client(t.client(), &KeyPair::new_user(), &a)
            .await
            .unwrap_or_else(|e| panic!("{who}: a user of A: {e}"));
        ac.publish("a.1", "imported".into()).await.expect("publish");
        ac.flush().await.expect("flush");
        let m = tokio::time::timeout(std::time::Duration::from_secs(10), from_a.next())
            .await
            .unwrap_or_else(|_| panic!("{who}: B's import of A's stream delivers"))
            .expect("message");
        assert_eq!(&m.payload[..], b"imported", "{who}");
        // The account server does not know C: its users are refused.
        assert!(
            client(t.client(), &KeyPair::new_user(), &c).await.is_err(),
            "{who}: a user of an account the URL does not have"
        );
        assert!(web.fetched(&c), "{who}");
        // An update of A pushed through $SYS applies live: at most one connection now.
        let second = client(t.client(), &KeyPair::new_user(), &a).await;
        assert!(second.is_ok(), "{who}: two users of A before the update");
        drop(second);
        let admin = o.admin(t.client()).await;
        let limited = o.account(
            &a,
            "A",
            json!({"exports": exports["exports"].clone(),
            "limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                "wildcards": true, "conn": 1, "leaf": -1}}),
        );
        let subject = format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.UPDATE", a.public_key());
        let answer = json_request(&admin, &subject, &limited).await;
        assert_eq!(answer["data"]["message"], "jwt updated", "{who}: {answer}");
        common::wait_for("the second user of A to be refused", || async {
            client(t.client(), &KeyPair::new_user(), &a).await.is_err()
        })
        .await;
        drop((ac, bc, admin));
        t.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Nobody home at the URL: the server does not start (nats-server fetches the base URL
/// first and stops with `could not fetch <url>: …`).
#[tokio::test]
async fn a_url_nobody_answers_stops_the_server_at_startup() {
    let o = Op::new();
    let dir = common::binary::tmp_dir("resolver", "url-nobody");
    let port = common::free_port();
    let conf: String = o
        .conf(&dir, "")
        .lines()
        .filter(|l| !l.starts_with("resolver"))
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        + &format!("resolver: URL(\"http://127.0.0.1:{port}/jwt/v1/accounts/\")\n");
    let e = natsd::Server::start(common::conf_opts(&conf))
        .await
        .err()
        .expect("refused");
    assert!(
        e.to_string().starts_with(&format!(
            "could not fetch <\"http://127.0.0.1:{port}/jwt/v1/accounts/\">: "
        )),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
