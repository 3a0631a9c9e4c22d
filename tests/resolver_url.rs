//! The URL account resolver (`resolver: URL("http://…/jwt/v1/accounts/")`), on natsd and
//! nats-server 2.15.1 alike, against an account server written here: a user of an account
//! the server does not know is served once its JWT is fetched (with the accounts it imports
//! from), an account the server answers 404 for is refused, and an update pushed through
//! `$SYS` changes a fetched account live.

mod common;

use common::accounts_web::AccountServer;
use common::auth::Target;
use common::resolver::{client, json_request, Op};
use futures::StreamExt;
use nkeys::KeyPair;
use serde_json::json;

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
        // The URL resolver is read-only: no preloads (nats-server refuses them), the
        // system account comes from the URL too.
        let conf = o.url_conf(&web.url(), "");
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
    }
}

/// Nobody home at the URL: the server does not start (nats-server fetches the base URL
/// first and stops with `could not fetch <url>: …`).
#[tokio::test]
async fn a_url_nobody_answers_stops_the_server_at_startup() {
    let o = Op::new();
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}/jwt/v1/accounts/");
    let conf = o.url_conf(&url, "");
    let e = natsd::Server::start(common::conf_opts(&conf))
        .await
        .err()
        .expect("refused");
    assert!(
        e.to_string().starts_with(&format!(
            "could not fetch <{url:?}>: Get {url:?}: dial tcp "
        )),
        "{e}"
    );
}
