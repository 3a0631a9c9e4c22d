//! The full resolver fetches an account its directory lacks when a user of it connects
//! (nats-server's `DirAccResolver.Fetch`): it asks every server
//! (`$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`), stores the JWT an answer carries and serves the
//! user on that same CONNECT; an account no server has is refused after the lookup's
//! `timeout`.

mod common;

use common::resolver::{client, json_request, jwt_updated, stored, Op};
use futures::StreamExt;
use nkeys::KeyPair;
use serde_json::json;

/// `admin` answers lookups of `acc` with `token` (as another server holding it would).
async fn answer_lookups(admin: &async_nats::Client, acc: &KeyPair, token: String) {
    let subject = format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.LOOKUP", acc.public_key());
    let mut sub = admin.subscribe(subject).await.expect("subscribe");
    admin.flush().await.expect("flush");
    let nc = admin.clone();
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            if let Some(r) = m.reply {
                let _ = nc.publish(r, token.clone().into()).await;
                let _ = nc.flush().await;
            }
        }
    });
}

#[tokio::test]
async fn a_user_of_an_account_the_directory_lacks_is_served_after_a_fetch() {
    let o = Op::new();
    for go in [false, true] {
        let (x, z) = (KeyPair::new_account(), KeyPair::new_account());
        let (t, dir, admin) = o.start(go, "fetch", "").await;
        let who = t.name();
        let token = o.account(&x, "X", json!({}));
        answer_lookups(&admin, &x, token.clone()).await;
        // The first CONNECT succeeds: the account is fetched while it waits.
        let nc = client(t.client(), &KeyPair::new_user(), &x).await;
        assert!(
            nc.is_ok(),
            "{who}: a user of a fetched account: {:?}",
            nc.err()
        );
        assert_eq!(stored(&dir, &x).as_deref(), Some(token.as_str()), "{who}");
        // Its users are served like any other's: a second one, messages between them.
        common::resolver::reaches(t.client(), t.client(), &x).await;
        // No server has Z: refused once the lookup times out (1.9 s by default).
        assert!(
            client(t.client(), &KeyPair::new_user(), &z).await.is_err(),
            "{who}"
        );
        assert!(stored(&dir, &z).is_none(), "{who}");
        drop((nc, admin));
        t.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A peer's client subscribes in an account this node has not loaded yet (its JWT pushed
/// elsewhere first, or fetched later): the peer's `RS+` is kept, so once the account arrives
/// its messages reach the peer — as nats-server keeps an incomplete account for it. Dropping
/// it lost every reply to that client (a JetStream API answer, here any message) for good.
#[tokio::test]
async fn a_peers_interest_that_comes_before_the_account_is_kept() {
    let o = Op::new();
    let x = KeyPair::new_account();
    let cluster = "cluster { name: C1, listen: \"127.0.0.1:-1\" }";
    let (t, dir, admin) = o.start(false, "early-interest", cluster).await;
    let common::auth::Target::Natsd(srv) = &t else {
        unreachable!("natsd")
    };
    let route = *srv
        .shared()
        .cluster
        .as_ref()
        .and_then(|c| c.listen_addr.get())
        .expect("route listener");
    // A 2.9-style peer (one route, no pool) whose client subscribed to `early` in X.
    let id = format!("NEARLYINTEREST{}", "A".repeat(42));
    let mut peer = common::Raw::at(route).await;
    peer.send(&format!(
        "CONNECT {{\"echo\":true,\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\
         \"headers\":true,\"name\":\"{id}\",\"cluster\":\"C1\"}}\r\n\
         INFO {{\"server_id\":\"{id}\",\"server_name\":\"early\",\"version\":\"2.9.10\",\
         \"proto\":2,\"host\":\"127.0.0.1\",\"port\":0,\"headers\":true,\
         \"max_payload\":1048576,\"cluster\":\"C1\"}}\r\n\
         RS+ {} early\r\n",
        x.public_key()
    ))
    .await;
    peer.sync().await;
    // Now X is pushed (importing a stream of Y's), and a user of it publishes.
    let y = KeyPair::new_account();
    let exports = json!({"exports": [{"name": "y", "subject": "y.>", "type": "stream"}]});
    let imports = json!({"imports": [
        {"name": "y", "subject": "y.>", "account": y.public_key(), "type": "stream"}]});
    for (acc, token) in [
        (&y, o.account(&y, "Y", exports)),
        (&x, o.account(&x, "X", imports)),
    ] {
        let answer = json_request(&admin, "$SYS.REQ.CLAIMS.UPDATE", &token).await;
        assert_eq!(answer["data"], jwt_updated(acc), "{answer}");
    }
    let nc = common::resolver::served(t.client(), &x).await;
    nc.publish("early", "hi".into()).await.expect("publish");
    nc.flush().await.expect("flush");
    // X came in as a new account, imports and all, though the peer's interest made it first.
    let mut ys = nc.subscribe("y.>").await.expect("subscribe");
    nc.flush().await.expect("flush");
    let yc = client(t.client(), &KeyPair::new_user(), &y)
        .await
        .expect("Y");
    yc.publish("y.1", "imported".into()).await.expect("publish");
    yc.flush().await.expect("flush");
    let m = tokio::time::timeout(std::time::Duration::from_secs(10), ys.next())
        .await
        .expect("X's import of Y's stream delivers")
        .expect("message");
    assert_eq!(&m.payload[..], b"imported");
    let want = format!("RMSG {} early 2", x.public_key());
    loop {
        let line = (peer.try_line().await)
            .unwrap_or_else(|| panic!("no {want:?} before the deadline (the RS+ was dropped)"));
        if line == "PING" {
            peer.send("PONG\r\n").await;
        }
        if line == want {
            assert_eq!(peer.line().await, "hi");
            break;
        }
    }
    drop((nc, yc, admin));
    t.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
