//! JetStream for accounts of the full resolver: an account JWT's JetStream limits
//! (`mem_storage`, `disk_storage`, `streams`, `consumer`, …) turn JetStream on for that
//! account with those limits, as nats-server 2.15.1 does — for an account pushed while the
//! server runs, on one server (beside nats-server) and in a three-node natsd cluster with
//! replicated streams, the official chart's operator-mode deployment.

mod common;

use common::binary::tmp_dir;
use common::jsc;
use common::resolver::{client, json_request, jwt_updated, Op};
use common::wait_for;
use nkeys::KeyPair;
use serde_json::{json, Value};

/// An account JWT's limits with JetStream: unlimited memory, 1 MiB of file storage, two
/// streams.
fn js_limits() -> Value {
    json!({"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
        "wildcards": true, "conn": -1, "leaf": -1,
        "mem_storage": -1, "disk_storage": 1048576, "streams": 2, "consumer": -1}})
}

fn stream(name: &str, replicas: u32) -> String {
    json!({"name": name, "subjects": [format!("{name}.>")], "storage": "file",
        "num_replicas": replicas})
    .to_string()
}

#[tokio::test]
async fn a_pushed_account_gets_jetstream_with_its_jwt_limits_as_nats_server() {
    let o = Op::new();
    let (a, plain) = (KeyPair::new_account(), KeyPair::new_account());
    for go in [false, true] {
        let tokens = [
            (&a, o.account(&a, "A", js_limits())),
            (&plain, o.account(&plain, "P", json!({}))),
        ];
        let (t, dir, admin) = o.start_js(go, "js", &tokens).await;
        let who = t.name();
        let nc = client(t.client(), &KeyPair::new_user(), &a)
            .await
            .expect("A");
        let info = json_request(&nc, "$JS.API.INFO", "").await;
        let l = &info["limits"];
        assert_eq!(
            (
                &l["max_memory"],
                &l["max_storage"],
                &l["max_streams"],
                &l["max_consumers"]
            ),
            (&json!(-1), &json!(1048576), &json!(2), &json!(-1)),
            "{who}: {info}"
        );
        for name in ["S1", "S2"] {
            let r = json_request(
                &nc,
                &format!("$JS.API.STREAM.CREATE.{name}"),
                &stream(name, 1),
            )
            .await;
            assert!(r["error"].is_null(), "{who}: {r}");
        }
        let third = json_request(&nc, "$JS.API.STREAM.CREATE.S3", &stream("S3", 1)).await;
        assert_eq!(third["error"]["err_code"], 10027, "{who}: {third}");
        let ack = json_request(&nc, "S1.x", "hello").await;
        assert_eq!(
            (&ack["stream"], &ack["seq"]),
            (&json!("S1"), &json!(1)),
            "{who}: {ack}"
        );
        // An account whose JWT has no JetStream limits has no JetStream.
        let pc = client(t.client(), &KeyPair::new_user(), &plain)
            .await
            .expect("P");
        let off = json_request(&pc, "$JS.API.INFO", "").await;
        assert_eq!(off["error"]["err_code"], 10039, "{who}: {off}");
        drop((nc, pc, admin));
        t.stop().await;
        common::resolver::remove_js(&dir);
    }
}

#[tokio::test]
async fn a_three_node_cluster_with_the_full_resolver_replicates_a_pushed_accounts_stream() {
    let o = Op::new();
    let a = KeyPair::new_account();
    let root = tmp_dir("resolver", "js-cluster");
    let js = o.js_cluster("resolver-js-cluster", &root).await;
    let admin = o.admin(js.servers[0].client_addr()).await;
    let answer = json_request(
        &admin,
        "$SYS.REQ.CLAIMS.UPDATE",
        &o.account(&a, "A", js_limits()),
    )
    .await;
    assert_eq!(answer["data"], jwt_updated(&a), "{answer}");
    // Every node stored it (the push reached them over the routes) and serves it.
    wait_for("every node to store A", || async {
        ["n0", "n1", "n2"]
            .iter()
            .all(|n| common::resolver::stored(&root.join(n), &a).is_some())
    })
    .await;
    // Stored comes just before applied: poll until n2 serves A's users.
    let nc = common::resolver::served(js.servers[2].client_addr(), &a).await;
    let created = jsc::api(&nc, "$JS.API.STREAM.CREATE.R", &stream("R", 3)).await;
    assert!(created["error"].is_null(), "{created}");
    assert_eq!(created["config"]["num_replicas"], 3, "{created}");
    let ctx = async_nats::jetstream::new(nc.clone());
    jsc::publish_acked(&ctx, "R", 1, 20).await;
    let key = a.public_key();
    wait_for("every node to hold the 20 messages", || async {
        jsc::copies_in(&js, &key, "R")
            .iter()
            .all(|c| c.is_some_and(|(msgs, _)| msgs == 20))
    })
    .await;
    let info = jsc::api(&nc, "$JS.API.STREAM.INFO.R", "").await;
    assert_eq!(
        info["cluster"]["replicas"].as_array().map(Vec::len),
        Some(2),
        "{info}"
    );
    drop((nc, admin));
    js.stop().await;
    let _ = std::fs::remove_dir_all(&root);
}
