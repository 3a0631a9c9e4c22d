//! The cache account resolver (`resolver { type: cache, dir, limit, ttl }`), on natsd and
//! nats-server 2.15.1 alike: beside a full-resolver node, a cache node fetches an account
//! as its user connects, keeps it in its directory and takes updates pushed for it; an
//! update for an account it does not hold is skipped, in nats-server's words.

mod common;

use common::auth::Target;
use common::binary::tmp_dir;
use common::resolver::{client, cluster_conf as cluster, jwt_updated, stored, Op};
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::path::Path;

/// `conf` (the full resolver of `Op::conf`) as a cache in `dir`.
fn as_cache(conf: &str, dir: &Path) -> String {
    let full = format!(
        "resolver {{ type: full, dir: \"{}\", allow_delete: true, interval: \"1s\" }}",
        dir.display()
    );
    assert!(conf.contains(&full), "{conf}");
    conf.replace(
        &full,
        &format!("resolver {{ type: cache, dir: \"{}\" }}", dir.display()),
    )
}

/// The answer of the server named `name` to a request every server answers.
async fn answer_of(nc: &async_nats::Client, subject: &str, body: &str, name: &str) -> Value {
    use futures::StreamExt;
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(subject.to_string(), inbox, body.to_string().into())
        .await
        .expect("publish");
    nc.flush().await.expect("flush");
    loop {
        let m = tokio::time::timeout(std::time::Duration::from_secs(5), sub.next())
            .await
            .unwrap_or_else(|_| panic!("no answer from {name}"))
            .expect("answer");
        let v: Value = serde_json::from_slice(&m.payload).expect("JSON");
        if v["server"]["name"] == name {
            return v;
        }
    }
}

async fn start(go: bool, conf: &str, tag: &str) -> Target {
    if go {
        Target::go(conf, tag)
    } else {
        Target::natsd(conf).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_node_fetches_keeps_and_updates_accounts_as_nats_server() {
    let o = Op::new();
    // (full node, cache node): natsd with natsd, nats-server with nats-server, and a natsd
    // cache beside a nats-server full node.
    for (full_go, cache_go) in [(false, false), (true, true), (true, false)] {
        let a = KeyPair::new_account();
        let tag = format!("{full_go}-{cache_go}");
        let (fd, cd) = (
            tmp_dir("resolver", &format!("cache-full-{tag}")),
            tmp_dir("resolver", &format!("cache-cache-{tag}")),
        );
        let (fp, cp) = (common::free_port(), common::free_port());
        let full = start(full_go, &o.conf(&fd, &cluster(fp, &[])), "cache-full").await;
        let cache_conf = as_cache(&o.conf(&cd, &cluster(cp, &[fp])), &cd);
        let cache = start(cache_go, &cache_conf, "cache-cache").await;
        let who = format!("full {}, cache {}", full.name(), cache.name());
        let admin = o.admin(full.client()).await;
        let cadmin = o.admin(cache.client()).await;
        // Routes up: a push at the full node reaches the cache (which skips it: not held).
        let token = o.account(&a, "A", json!({}));
        let subject = format!("$SYS.REQ.ACCOUNT.{}.CLAIMS.UPDATE", a.public_key());
        let name = format!("s{cp}");
        let skipped = answer_of(&cadmin, &subject, &token, &name).await;
        assert_eq!(
            skipped["data"],
            json!({"account": a.public_key(), "code": 200, "message": "jwt update cache skipped"}),
            "{who}: {skipped}"
        );
        assert!(stored(&cd, &a).is_none(), "{who}");
        // The cache node answers this push too ("skipped"): the full node's answer is read.
        let full_name = format!("s{fp}");
        let answer = answer_of(&admin, "$SYS.REQ.CLAIMS.UPDATE", &token, &full_name).await;
        assert_eq!(answer["data"], jwt_updated(&a), "{who}: {answer}");
        // A user of A at the cache: fetched from the full node, then kept.
        let user = common::resolver::served(cache.client(), &a).await;
        assert_eq!(stored(&cd, &a).as_deref(), Some(token.as_str()), "{who}");
        // Now the cache holds A: an update is taken.
        let newer = o.account(&a, "A2", json!({}));
        let taken = answer_of(&cadmin, &subject, &newer, &name).await;
        assert_eq!(
            taken["data"],
            json!({"account": a.public_key(), "code": 200, "message": "jwt updated cache"}),
            "{who}: {taken}"
        );
        assert_eq!(stored(&cd, &a).as_deref(), Some(newer.as_str()), "{who}");
        // Nobody asks a cache for an account it would not know (no lookups answered).
        let b = KeyPair::new_account();
        assert!(
            client(cache.client(), &KeyPair::new_user(), &b)
                .await
                .is_err(),
            "{who}: an account no server has"
        );
        drop((user, admin, cadmin));
        cache.stop().await;
        full.stop().await;
        for d in [fd, cd] {
            let _ = std::fs::remove_dir_all(&d);
        }
    }
}
