//! The full resolver fetches an account its directory lacks when a user of it connects
//! (nats-server's `DirAccResolver.Fetch`): it asks every server
//! (`$SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP`), stores the JWT an answer carries and serves the
//! user on that same CONNECT; an account no server has is refused after the lookup's
//! `timeout`.

mod common;

use common::resolver::{client, stored, Op};
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
