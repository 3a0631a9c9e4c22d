//! KV through JetStream, driven by async-nats' `kv` API: buckets are streams `KV_<bucket>`
//! on `$KV.<bucket>.>` with direct gets, rollups and per-subject history.

mod common;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures::StreamExt;
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

async fn start(name: &str) -> (natsd::Server, jetstream::Context, std::path::PathBuf) {
    let (srv, nc, dir) = common::start_js(&format!("kv-{name}")).await;
    (srv, jetstream::new(nc), dir)
}

#[tokio::test]
async fn put_get_delete_purge_history_keys() {
    let (srv, js, dir) = start("basic").await;
    let kv = js
        .create_key_value(kv::Config {
            bucket: "cfg".into(),
            history: 3,
            ..Default::default()
        })
        .await
        .expect("bucket");
    let info = js
        .get_stream("KV_cfg")
        .await
        .expect("stream")
        .cached_info()
        .clone();
    assert_eq!(info.config.subjects, vec!["$KV.cfg.>".to_string()]);
    assert!(info.config.allow_direct && info.config.allow_rollup && info.config.deny_delete);
    assert_eq!(info.config.max_messages_per_subject, 3);

    let r1 = kv.put("a", Bytes::from("1")).await.expect("put");
    let r2 = kv.put("a", Bytes::from("2")).await.expect("put");
    assert!(r2 > r1);
    kv.put("b", Bytes::from("x")).await.expect("put b");
    assert_eq!(kv.get("a").await.expect("get"), Some(Bytes::from("2")));
    assert_eq!(kv.get("nope").await.expect("get missing"), None);
    let e = kv.entry("a").await.expect("entry").expect("some");
    assert_eq!((e.revision, e.operation), (r2, kv::Operation::Put));
    // Optimistic concurrency: create fails on an existing key, update needs the revision.
    assert!(kv.create("a", Bytes::from("no")).await.is_err());
    assert!(kv.update("a", Bytes::from("no"), r1).await.is_err());
    let r3 = kv.update("a", Bytes::from("3"), r2).await.expect("update");
    kv.put("a", Bytes::from("4")).await.expect("put 4");
    // History keeps 3 revisions.
    let h: Vec<kv::Entry> = kv
        .history("a")
        .await
        .expect("history")
        .map(|e| e.expect("entry"))
        .collect()
        .await;
    let vals: Vec<Bytes> = h.iter().map(|e| e.value.clone()).collect();
    assert_eq!(
        vals,
        vec![Bytes::from("2"), Bytes::from("3"), Bytes::from("4")]
    );
    assert_eq!(h[1].revision, r3);
    let mut keys: Vec<String> = kv
        .keys()
        .await
        .expect("keys")
        .map(|k| k.expect("key"))
        .collect()
        .await;
    keys.sort();
    assert_eq!(keys, vec!["a".to_string(), "b".to_string()]);

    kv.delete("b").await.expect("delete");
    assert_eq!(kv.get("b").await.expect("get deleted"), None);
    let e = kv.entry("b").await.expect("entry");
    assert!(e.is_none_or(|e| e.operation == kv::Operation::Delete));
    kv.purge("a").await.expect("purge");
    assert_eq!(kv.get("a").await.expect("get purged"), None);
    // Purge rolled the key's history up into one marker.
    let h: Vec<kv::Entry> = kv
        .history("a")
        .await
        .expect("history")
        .map(|e| e.expect("entry"))
        .collect()
        .await;
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].operation, kv::Operation::Purge);
    let keys: Vec<String> = kv
        .keys()
        .await
        .expect("keys")
        .map(|k| k.expect("key"))
        .collect()
        .await;
    assert!(keys.is_empty(), "{keys:?}");
    let st = kv.status().await.expect("status");
    assert_eq!(st.bucket(), "cfg");
    js.delete_key_value("cfg").await.expect("delete bucket");
    assert!(js.get_key_value("cfg").await.is_err());
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn watch_sees_current_values_then_changes() {
    let (srv, js, dir) = start("watch").await;
    let kv = js
        .create_key_value(kv::Config {
            bucket: "w".into(),
            storage: jetstream::stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("bucket");
    kv.put("k1", Bytes::from("old")).await.expect("put");
    kv.put("k1", Bytes::from("v1")).await.expect("put");
    let mut all = kv.watch_all().await.expect("watch all");
    let mut one = kv.watch("k2").await.expect("watch k2");
    let mut hist = kv
        .watch_with_history("k1")
        .await
        .expect("watch with history");
    let e = tokio::time::timeout(T, hist.next())
        .await
        .expect("in time")
        .expect("some")
        .expect("ok");
    assert_eq!((e.key.as_str(), e.value.clone()), ("k1", Bytes::from("v1")));
    kv.put("k2", Bytes::from("v2")).await.expect("put k2");
    kv.delete("k1").await.expect("delete k1");
    let e = tokio::time::timeout(T, one.next())
        .await
        .expect("in time")
        .expect("some")
        .expect("ok");
    assert_eq!((e.key.as_str(), e.value.clone()), ("k2", Bytes::from("v2")));
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let e = tokio::time::timeout(T, all.next())
            .await
            .expect("in time")
            .expect("some")
            .expect("ok");
        seen.push((e.key.clone(), e.operation));
    }
    assert_eq!(
        seen,
        vec![
            ("k2".to_string(), kv::Operation::Put),
            ("k1".to_string(), kv::Operation::Delete)
        ]
    );
    let e = tokio::time::timeout(T, hist.next())
        .await
        .expect("in time")
        .expect("some")
        .expect("ok");
    assert_eq!(e.operation, kv::Operation::Delete);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn direct_get_is_answered_once() {
    let (srv, js, dir) = start("direct").await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let kv = js
        .create_key_value(kv::Config {
            bucket: "d".into(),
            ..Default::default()
        })
        .await
        .expect("bucket");
    kv.put("k", Bytes::from("v")).await.expect("put");
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("sub");
    nc.publish_with_reply("$JS.API.DIRECT.GET.KV_d.$KV.d.k", inbox, Bytes::new())
        .await
        .expect("request");
    let m = tokio::time::timeout(T, sub.next())
        .await
        .expect("answer")
        .expect("msg");
    assert_eq!(m.payload, Bytes::from("v"));
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Nats-Sequence").map(|v| v.as_str()), Some("1"));
    assert_eq!(h.get("Nats-Subject").map(|v| v.as_str()), Some("$KV.d.k"));
    // A later request's answer comes after any duplicate of the first would have.
    nc.request("$JS.API.INFO", Bytes::new())
        .await
        .expect("info");
    let more = tokio::time::timeout(Duration::from_millis(50), sub.next()).await;
    assert!(more.is_err(), "a second answer: {more:?}");
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
