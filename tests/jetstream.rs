//! JetStream on one node, driven by async-nats' `jetstream` API and raw `$JS.API` requests:
//! streams, publishes with acks, consumers push and pull, retention, restart recovery, and
//! nats-server's error JSON for bad input.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use async_nats::HeaderMap;
use bytes::Bytes;
use futures::StreamExt;
use natsd::config::JetStreamOpts;
use natsd::{Options, Server};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn tmp_dir(name: &str) -> PathBuf {
    common::js_dir(&format!("js-{name}"))
}

fn js_opts(dir: &Path) -> Options {
    Options {
        jetstream: Some(JetStreamOpts {
            store_dir: Some(dir.to_path_buf()),
            ..Default::default()
        }),
        http_port: Some(0),
        ..Options::local()
    }
}

async fn start(dir: &Path) -> (Server, async_nats::Client, jetstream::Context) {
    let srv = common::start(js_opts(dir)).await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let js = jetstream::new(nc.clone());
    (srv, nc, js)
}

use common::js_api as api;

fn err_of(v: &Value) -> (i64, i64, String) {
    let e = &v["error"];
    (
        e["code"].as_i64().unwrap_or(0),
        e["err_code"].as_i64().unwrap_or(0),
        e["description"].as_str().unwrap_or("").to_string(),
    )
}

async fn publish(js: &jetstream::Context, subject: &str, payload: &str) -> u64 {
    js.publish(subject.to_string(), Bytes::from(payload.to_string()))
        .await
        .expect("publish")
        .await
        .expect("ack")
        .sequence
}

/// A raw publish-request and the PubAck JSON.
async fn pub_raw(
    nc: &async_nats::Client,
    subject: &str,
    h: &[(&str, &str)],
    payload: &str,
) -> Value {
    let mut headers = HeaderMap::new();
    for (k, v) in h {
        headers.insert(*k, *v);
    }
    let m = tokio::time::timeout(
        T,
        nc.request_with_headers(
            subject.to_string(),
            headers,
            Bytes::from(payload.to_string()),
        ),
    )
    .await
    .expect("pub ack in time")
    .expect("pub ack");
    serde_json::from_slice(&m.payload).expect("PubAck JSON")
}

#[tokio::test]
async fn info_flags_stream_crud_and_api_errors() {
    let dir = tmp_dir("crud");
    let (srv, nc, js) = start(&dir).await;
    assert!(nc.server_info().jetstream, "INFO advertises JetStream");
    let info = api(&nc, "$JS.API.INFO", "").await;
    assert_eq!(
        info["type"],
        "io.nats.jetstream.api.v1.account_info_response"
    );
    assert_eq!(info["streams"], 0);

    let mut s = js
        .create_stream(stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            ..Default::default()
        })
        .await
        .expect("create");
    assert_eq!(s.cached_info().config.num_replicas, 1);
    for i in 0..5 {
        publish(&js, &format!("orders.{}", i % 2), "x").await;
    }
    let i = s.info().await.expect("info");
    assert_eq!((i.state.messages, i.state.last_sequence), (5, 5));
    // Update: a lower max_msgs applies at once.
    js.update_stream(stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        max_messages: 4,
        ..Default::default()
    })
    .await
    .expect("update");
    assert_eq!(s.info().await.expect("info").state.messages, 4);
    let names: Vec<String> = js.stream_names().map(|n| n.expect("name")).collect().await;
    assert_eq!(names, vec!["ORDERS".to_string()]);
    // Purge with filter and keep, then up to a sequence, then everything.
    let p = s.purge().filter("orders.0").keep(1).await.expect("purge");
    assert_eq!(p.purged, 1);
    let p = s.purge().sequence(5).await.expect("purge seq");
    assert_eq!(p.purged, 2);
    let p = s.purge().await.expect("purge all");
    assert_eq!(p.purged, 1);
    let i = s.info().await.expect("info");
    assert_eq!((i.state.messages, i.state.first_sequence), (0, 6));

    // nats-server's errors, byte for byte in code/err_code/description.
    let v = api(&nc, "$JS.API.STREAM.CREATE.X", "{bad").await;
    assert_eq!(err_of(&v), (400, 10025, "invalid JSON".into()));
    assert_eq!(v["type"], "io.nats.jetstream.api.v1.stream_create_response");
    let v = api(&nc, "$JS.API.STREAM.CREATE.X", "").await;
    assert_eq!(err_of(&v).1, 10025);
    let v = api(&nc, "$JS.API.STREAM.CREATE.X", r#"{"name":"Y"}"#).await;
    assert_eq!(
        err_of(&v),
        (
            400,
            10056,
            "stream name in subject does not match request".into()
        )
    );
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.R3",
        r#"{"name":"R3","num_replicas":3}"#,
    )
    .await;
    assert_eq!(
        err_of(&v),
        (
            500,
            10074,
            "replicas > 1 not supported in non-clustered mode".into()
        )
    );
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.O",
        r#"{"name":"O","subjects":["orders.1"]}"#,
    )
    .await;
    assert_eq!(
        err_of(&v),
        (
            400,
            10065,
            "subjects overlap with an existing stream".into()
        )
    );
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.>"],"max_msgs":7}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10058);
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","storage":"bogus"}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10025);
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","max_age":-5}"#,
    )
    .await;
    assert_eq!(
        err_of(&v),
        (500, 10052, "duplicates window can not be negative".into())
    );
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","subjects":["a","a"]}"#,
    )
    .await;
    assert_eq!(err_of(&v).2, "duplicate subjects detected");
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","subjects":["$JS.API.>"]}"#,
    )
    .await;
    assert_eq!(err_of(&v).2, "subjects overlap with jetstream api");
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","sealed":true}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10052);
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","max_msg_size":99999999999}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10025, "an int32 overflow is invalid JSON");
    let v = api(&nc, "$JS.API.STREAM.INFO.NOPE", "").await;
    assert_eq!(err_of(&v), (404, 10059, "stream not found".into()));
    assert_eq!(v["total"], 0, "{v}");
    let v = api(&nc, "$JS.API.STREAM.DELETE.NOPE", "").await;
    assert_eq!(err_of(&v).1, 10059);
    let v = api(&nc, "$JS.API.STREAM.PURGE.ORDERS", r#"{"seq":3,"keep":1}"#).await;
    assert_eq!(err_of(&v), (400, 10003, "bad request".into()));
    assert_eq!(v["purged"], 0);
    let v = api(
        &nc,
        "$JS.API.STREAM.UPDATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.>"],"storage":"memory"}"#,
    )
    .await;
    assert_eq!(
        err_of(&v).2,
        "stream configuration update can not change storage type"
    );
    // Unknown fields are ignored, as Go's decoder does.
    let v = api(&nc, "$JS.API.STREAM.CREATE.U", r#"{"name":"U","bogus":1}"#).await;
    assert_eq!(v["did_create"], true, "{v}");
    assert_eq!(v["config"]["subjects"], json!(["U"]));
    // Names with '.' cannot be addressed (the token count differs): no answer, no panic.
    let r = tokio::time::timeout(
        Duration::from_millis(300),
        nc.request(
            "$JS.API.STREAM.CREATE.a.b",
            Bytes::from(r#"{"name":"a.b"}"#),
        ),
    )
    .await;
    assert!(!matches!(r, Ok(Ok(_))), "no answer for a dotted name");

    js.delete_stream("ORDERS").await.expect("delete");
    let v = api(&nc, "$JS.API.STREAM.NAMES", "").await;
    assert_eq!(v["streams"], json!(["U"]));
    let info = api(&nc, "$JS.API.INFO", "").await;
    assert!(info["api"]["errors"].as_u64().unwrap_or(0) >= 10, "{info}");
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn publish_acks_dedupe_expectations_and_limits() {
    let dir = tmp_dir("pub");
    let (srv, nc, js) = start(&dir).await;
    js.create_stream(stream::Config {
        name: "P".into(),
        subjects: vec!["p.*".into()],
        allow_rollup: true,
        storage: stream::StorageType::Memory,
        ..Default::default()
    })
    .await
    .expect("create");
    let v = pub_raw(&nc, "p.a", &[], "1").await;
    assert_eq!(v, json!({"stream":"P","seq":1}));
    let v = pub_raw(&nc, "p.a", &[("Nats-Msg-Id", "m1")], "2").await;
    assert_eq!(v["seq"], 2);
    let v = pub_raw(&nc, "p.a", &[("Nats-Msg-Id", "m1")], "2").await;
    assert_eq!(v, json!({"stream":"P","seq":2,"duplicate":true}));
    // The expectation headers, each with nats-server's error.
    let v = pub_raw(&nc, "p.a", &[("Nats-Expected-Stream", "NO")], "").await;
    assert_eq!(
        err_of(&v),
        (400, 10060, "expected stream does not match".into())
    );
    assert_eq!(
        (v["stream"].clone(), v["seq"].clone()),
        (json!("P"), json!(0))
    );
    let v = pub_raw(&nc, "p.a", &[("Nats-Expected-Last-Sequence", "10")], "").await;
    assert_eq!(err_of(&v), (400, 10071, "wrong last sequence: 2".into()));
    let v = pub_raw(
        &nc,
        "p.b",
        &[("Nats-Expected-Last-Subject-Sequence", "1")],
        "",
    )
    .await;
    assert_eq!(err_of(&v), (400, 10071, "wrong last sequence: 0".into()));
    let v = pub_raw(&nc, "p.a", &[("Nats-Expected-Last-Msg-Id", "zz")], "").await;
    assert_eq!(err_of(&v), (400, 10070, "wrong last msg ID: m1".into()));
    let v = pub_raw(
        &nc,
        "p.a",
        &[
            ("Nats-Expected-Last-Sequence", "2"),
            ("Nats-Expected-Last-Msg-Id", "m1"),
        ],
        "3",
    )
    .await;
    assert_eq!(v["seq"], 3, "{v}");
    let v = pub_raw(
        &nc,
        "p.a",
        &[("Nats-Expected-Last-Subject-Sequence", "3")],
        "4",
    )
    .await;
    assert_eq!(v["seq"], 4, "{v}");
    // Rollup of one subject keeps only the new message of that subject.
    pub_raw(&nc, "p.b", &[], "b").await;
    let v = pub_raw(&nc, "p.a", &[("Nats-Rollup", "sub")], "r").await;
    assert_eq!(v["seq"], 6);
    let mut s = js.get_stream("P").await.expect("stream");
    assert_eq!(s.info().await.expect("info").state.messages, 2);
    let v = pub_raw(&nc, "p.a", &[("Nats-Rollup", "bad")], "r").await;
    assert_eq!(err_of(&v).1, 10111);
    let v = pub_raw(&nc, "p.c", &[("Nats-Rollup", "all")], "all").await;
    assert_eq!(v["seq"], 7);
    let i = s.info().await.expect("info");
    assert_eq!((i.state.messages, i.state.first_sequence), (1, 7));
    // Message get and delete.
    let v = api(&nc, "$JS.API.STREAM.MSG.GET.P", r#"{"seq":7}"#).await;
    assert_eq!(v["message"]["data"], "YWxs", "{v}");
    let v = api(&nc, "$JS.API.STREAM.MSG.GET.P", r#"{"last_by_subj":"p.c"}"#).await;
    assert_eq!(v["message"]["seq"], 7);
    let v = api(&nc, "$JS.API.STREAM.MSG.GET.P", r#"{"seq":1}"#).await;
    assert_eq!(err_of(&v), (404, 10037, "no message found".into()));
    let v = api(&nc, "$JS.API.STREAM.MSG.DELETE.P", r#"{"seq":7}"#).await;
    assert_eq!(v["success"], true);
    let v = api(&nc, "$JS.API.STREAM.MSG.DELETE.P", r#"{"seq":200}"#).await;
    assert_eq!(err_of(&v), (400, 10043, "sequence 200 not found".into()));

    // Limits: discard new refuses, per-subject keeps the newest, max_msg_size refuses.
    js.create_stream(stream::Config {
        name: "L".into(),
        subjects: vec!["l.*".into()],
        max_messages: 2,
        discard: stream::DiscardPolicy::New,
        max_message_size: 8,
        deny_delete: true,
        deny_purge: true,
        ..Default::default()
    })
    .await
    .expect("create L");
    pub_raw(&nc, "l.a", &[], "1").await;
    pub_raw(&nc, "l.a", &[], "2").await;
    let v = pub_raw(&nc, "l.a", &[], "3").await;
    assert_eq!(err_of(&v), (503, 10077, "maximum messages exceeded".into()));
    let v = pub_raw(&nc, "l.a", &[], "123456789").await;
    assert_eq!(
        err_of(&v),
        (400, 10054, "message size exceeds maximum allowed".into())
    );
    let v = api(&nc, "$JS.API.STREAM.PURGE.L", "").await;
    assert_eq!(
        err_of(&v),
        (500, 10110, "stream purge not permitted".into())
    );
    let v = api(&nc, "$JS.API.STREAM.MSG.DELETE.L", r#"{"seq":1}"#).await;
    assert_eq!(
        err_of(&v),
        (500, 10057, "message delete not permitted".into())
    );
    js.create_stream(stream::Config {
        name: "K".into(),
        subjects: vec!["k.*".into()],
        max_messages_per_subject: 2,
        max_age: Duration::from_millis(400),
        ..Default::default()
    })
    .await
    .expect("create K");
    for i in 0..3 {
        publish(&js, "k.a", &i.to_string()).await;
        publish(&js, "k.b", &i.to_string()).await;
    }
    let mut k = js.get_stream("K").await.expect("K");
    assert_eq!(k.info().await.expect("info").state.messages, 4);
    // max_age: the messages go by themselves.
    common::wait_for("messages aged out", || {
        let mut k = k.clone();
        async move {
            k.info()
                .await
                .map(|i| i.state.messages == 0)
                .unwrap_or(false)
        }
    })
    .await;
    // Sealing by update: no more publishes, no unsealing.
    let mut cfg = k.cached_info().config.clone();
    cfg.sealed = true;
    js.update_stream(cfg.clone()).await.expect("seal");
    let v = pub_raw(&nc, "k.a", &[], "x").await;
    assert_eq!(err_of(&v).1, 10109);
    cfg.sealed = false;
    assert!(js.update_stream(cfg).await.is_err());
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn pull_consumers_batch_ack_redelivery_nak_term_and_statuses() {
    let dir = tmp_dir("pull");
    let (srv, nc, js) = start(&dir).await;
    let s = js
        .create_stream(stream::Config {
            name: "W".into(),
            subjects: vec!["w.*".into()],
            ..Default::default()
        })
        .await
        .expect("create");
    for i in 1..=5 {
        publish(&js, "w.a", &format!("m{i}")).await;
    }
    let c = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("D".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_millis(300),
            max_deliver: 3,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut batch = c.fetch().max_messages(3).messages().await.expect("fetch");
    let mut got = Vec::new();
    while let Some(m) = batch.next().await {
        got.push(m.expect("msg"));
    }
    assert_eq!(got.len(), 3);
    let i = got[0].info().expect("info");
    assert_eq!(
        (
            i.stream_sequence,
            i.consumer_sequence,
            i.delivered,
            i.pending
        ),
        (1, 1, 1, 4)
    );
    got[0].double_ack().await.expect("ack 1");
    got[1]
        .ack_with(jetstream::AckKind::Term)
        .await
        .expect("term 2");
    // 3 is not acked: it comes back after ack_wait, delivery count 2.
    let mut c = c;
    let mut redelivered = None;
    for _ in 0..50 {
        let mut b = c
            .batch()
            .max_messages(1)
            .expires(Duration::from_millis(500))
            .messages()
            .await
            .expect("batch");
        if let Some(Ok(m)) = b.next().await {
            let i = m.info().expect("info");
            if i.stream_sequence == 3 {
                assert_eq!(i.delivered, 2);
                redelivered = Some(m);
                break;
            }
            m.double_ack().await.expect("ack other");
        }
    }
    let m3 = redelivered.expect("message 3 redelivered after ack_wait");
    // NAK with a delay: not before the delay, then delivery 3; max_deliver 3 ends it.
    m3.ack_with(jetstream::AckKind::Nak(Some(Duration::from_millis(200))))
        .await
        .expect("nak");
    let mut last = None;
    for _ in 0..50 {
        let mut b = c
            .batch()
            .max_messages(1)
            .expires(Duration::from_millis(500))
            .messages()
            .await
            .expect("batch");
        if let Some(Ok(m)) = b.next().await {
            let i = m.info().expect("info");
            if i.stream_sequence == 3 {
                last = Some(i.delivered);
                break;
            }
            m.double_ack().await.expect("ack other");
        }
    }
    assert_eq!(last, Some(3));
    let info = c.info().await.expect("consumer info");
    assert_eq!(info.ack_floor.stream_sequence, 2, "{info:?}");
    assert_eq!(info.num_pending, 0);

    // Raw MSG.NEXT: no_wait with nothing left is a 404; an expiring request a 408.
    let mut c2 = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("E".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            deliver_policy: consumer::DeliverPolicy::New,
            ..Default::default()
        })
        .await
        .expect("consumer E");
    let m = nc
        .request(
            "$JS.API.CONSUMER.MSG.NEXT.W.E",
            Bytes::from(r#"{"batch":1,"no_wait":true}"#),
        )
        .await
        .expect("404");
    assert_eq!(m.status.map(|s| s.as_u16()), Some(404));
    assert_eq!(m.description.as_deref(), Some("No Messages"));
    let m = nc
        .request(
            "$JS.API.CONSUMER.MSG.NEXT.W.E",
            Bytes::from(r#"{"batch":2,"expires":100000000}"#),
        )
        .await
        .expect("408");
    assert_eq!(m.status.map(|s| s.as_u16()), Some(408));
    let h = m.headers.expect("headers");
    assert_eq!(
        h.get("Nats-Pending-Messages").map(|v| v.as_str()),
        Some("2")
    );
    // max_bytes smaller than the next message: 409.
    publish(&js, "w.b", "a longer payload than ten bytes").await;
    let m = nc
        .request(
            "$JS.API.CONSUMER.MSG.NEXT.W.E",
            Bytes::from(r#"{"batch":1,"max_bytes":10,"expires":1000000000}"#),
        )
        .await
        .expect("409");
    assert_eq!(m.status.map(|s| s.as_u16()), Some(409));
    // A waiting request is served as soon as a message arrives.
    let mut b = c2
        .batch()
        .max_messages(1)
        .expires(Duration::from_secs(3))
        .messages()
        .await
        .expect("batch");
    let got = b.next().await.expect("message").expect("ok");
    assert_eq!(got.payload, Bytes::from("a longer payload than ten bytes"));
    got.double_ack().await.expect("ack");
    assert_eq!(c2.info().await.expect("info").num_ack_pending, 0);

    // Consumer API errors.
    let v = api(&nc, "$JS.API.CONSUMER.INFO.W.NOPE", "").await;
    assert_eq!(err_of(&v), (404, 10014, "consumer not found".into()));
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.W",
        r#"{"stream_name":"W","config":{"durable_name":"X"}}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10020);
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.W.A",
        r#"{"stream_name":"W","config":{"durable_name":"B"}}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10017);
    // A pull consumer with ack none on a limits stream is taken, as nats-server 2.9.10 does
    // (10084 is only for work-queue streams, below).
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.W.N0",
        r#"{"stream_name":"W","config":{"name":"N0","ack_policy":"none"}}"#,
    )
    .await;
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["config"]["ack_policy"], "none", "{v}");
    assert!(v["config"].get("ack_wait").is_none(), "{v}");
    let v = api(&nc, "$JS.API.CONSUMER.DELETE.W.N0", "").await;
    assert!(v.get("error").is_none(), "{v}");
    let v = api(&nc, "$JS.API.CONSUMER.CREATE.W.A", r#"{"stream_name":"W","config":{"name":"A","ack_policy":"explicit","filter_subject":"zz"}}"#).await;
    assert_eq!(err_of(&v).1, 10093);
    let v = api(&nc, "$JS.API.CONSUMER.CREATE.W.A", r#"{"stream_name":"W","config":{"name":"A","ack_policy":"explicit","deliver_policy":"by_start_sequence"}}"#).await;
    assert_eq!(err_of(&v).1, 10094);
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.W.A",
        r#"{"stream_name":"W","config":{"name":"A","num_replicas":3}}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10074);
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.W",
        r#"{"stream_name":"W","config":{"name":"a.b","ack_policy":"explicit"}}"#,
    )
    .await;
    assert_eq!(err_of(&v).0, 400);
    let v = api(&nc, "$JS.API.CONSUMER.CREATE.W.D", r#"{"stream_name":"W","config":{"durable_name":"D","ack_policy":"none","deliver_subject":"x"}}"#).await;
    assert_eq!(
        err_of(&v),
        (500, 10012, "ack policy can not be updated".into())
    );
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.NOPE",
        r#"{"stream_name":"NOPE","config":{}}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10059);
    let v = api(&nc, "$JS.API.CONSUMER.CREATE.W", "[1,2]").await;
    assert_eq!(err_of(&v).1, 10025);
    let v = api(&nc, "$JS.API.CONSUMER.NAMES.W", "").await;
    assert_eq!(v["consumers"], json!(["D", "E"]));
    let v = api(&nc, "$JS.API.CONSUMER.DELETE.W.D", "").await;
    assert_eq!(v["success"], true);
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn push_consumers_deliver_policies_flow_control_and_heartbeats() {
    let dir = tmp_dir("push");
    let (srv, nc, js) = start(&dir).await;
    let s = js
        .create_stream(stream::Config {
            name: "E".into(),
            subjects: vec!["e.>".into()],
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("create");
    for (i, subj) in ["e.a", "e.b", "e.a", "e.c", "e.b"].iter().enumerate() {
        publish(&js, subj, &i.to_string()).await;
    }
    // Which stream sequences each deliver policy yields first.
    async fn first_seqs(s: &stream::Stream, cfg: consumer::push::Config, n: usize) -> Vec<u64> {
        let c = s.create_consumer(cfg).await.expect("push consumer");
        let mut msgs = c.messages().await.expect("messages");
        let mut v = Vec::new();
        while v.len() < n {
            let m = tokio::time::timeout(T, msgs.next())
                .await
                .expect("in time")
                .expect("some")
                .expect("ok");
            v.push(m.info().expect("info").stream_sequence);
        }
        v
    }
    let push = |policy, filter: &str| consumer::push::Config {
        deliver_subject: nc.new_inbox(),
        deliver_policy: policy,
        filter_subject: filter.into(),
        ack_policy: consumer::AckPolicy::None,
        ..Default::default()
    };
    assert_eq!(
        first_seqs(&s, push(consumer::DeliverPolicy::All, ""), 5).await,
        vec![1, 2, 3, 4, 5]
    );
    assert_eq!(
        first_seqs(&s, push(consumer::DeliverPolicy::All, "e.a"), 2).await,
        vec![1, 3]
    );
    assert_eq!(
        first_seqs(&s, push(consumer::DeliverPolicy::Last, ""), 1).await,
        vec![5]
    );
    assert_eq!(
        first_seqs(
            &s,
            push(
                consumer::DeliverPolicy::ByStartSequence { start_sequence: 4 },
                ""
            ),
            2
        )
        .await,
        vec![4, 5]
    );
    assert_eq!(
        first_seqs(&s, push(consumer::DeliverPolicy::LastPerSubject, "e.*"), 3).await,
        vec![3, 4, 5]
    );
    // New: only what comes after.
    let c = s
        .create_consumer(push(consumer::DeliverPolicy::New, ""))
        .await
        .expect("new");
    let mut msgs = c.messages().await.expect("messages");
    let seq = publish(&js, "e.z", "later").await;
    let m = tokio::time::timeout(T, msgs.next())
        .await
        .expect("in time")
        .expect("some")
        .expect("ok");
    assert_eq!(m.info().expect("info").stream_sequence, seq);
    // By start time (raw: the deliver policy with a time in the future delivers nothing old).
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.E.T",
        r#"{"stream_name":"E","config":{"name":"T","deliver_policy":"by_start_time","opt_start_time":"2999-01-01T00:00:00Z","ack_policy":"explicit"}}"#,
    )
    .await;
    assert_eq!(v["num_pending"], 0, "{v}");
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.E.T0",
        r#"{"stream_name":"E","config":{"name":"T0","deliver_policy":"by_start_time","opt_start_time":"2000-01-01T00:00:00Z","ack_policy":"explicit"}}"#,
    )
    .await;
    assert_eq!(v["num_pending"], 6, "{v}");

    // Flow control and heartbeats, seen raw on the deliver subject.
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("sub");
    nc.flush().await.expect("flush");
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.E",
        &json!({"stream_name":"E","config":{"deliver_subject":inbox,"ack_policy":"none",
            "flow_control":true,"idle_heartbeat":100_000_000,"deliver_policy":"new"}})
        .to_string(),
    )
    .await;
    assert_eq!(v["config"]["flow_control"], true, "{v}");
    let hb = tokio::time::timeout(T, sub.next())
        .await
        .expect("heartbeat")
        .expect("msg");
    assert_eq!(hb.status.map(|s| s.as_u16()), Some(100));
    assert_eq!(hb.description.as_deref(), Some("Idle Heartbeat"));
    // Enough messages to need a flow control request; it is answered and delivery goes on.
    let n = 600;
    for i in 0..n {
        js.publish("e.fc", Bytes::from(i.to_string()))
            .await
            .expect("pub");
    }
    let (mut data, mut fcs) = (0, 0);
    while data < n {
        let m = tokio::time::timeout(T, sub.next())
            .await
            .expect("delivery")
            .expect("msg");
        match m.status.map(|s| s.as_u16()) {
            Some(100) if m.description.as_deref() == Some("FlowControl Request") => {
                fcs += 1;
                nc.publish(m.reply.expect("fc reply"), Bytes::new())
                    .await
                    .expect("answer");
            }
            Some(100) => {}
            _ => data += 1,
        }
    }
    assert!(fcs >= 1, "a flow control request was sent");
    // An ordered consumer (async-nats' own flow control and heartbeat handling).
    let oc = s
        .create_consumer(consumer::push::OrderedConfig {
            deliver_subject: nc.new_inbox(),
            filter_subject: "e.fc".into(),
            ..Default::default()
        })
        .await
        .expect("ordered");
    let mut om = oc.messages().await.expect("ordered messages");
    for i in 0..n {
        let m = tokio::time::timeout(T, om.next())
            .await
            .expect("in time")
            .expect("some")
            .expect("ok");
        assert_eq!(m.payload, Bytes::from(i.to_string()));
    }
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn interest_and_workqueue_retention() {
    let dir = tmp_dir("ret");
    let (srv, nc, js) = start(&dir).await;
    let mut wq = js
        .create_stream(stream::Config {
            name: "Q".into(),
            subjects: vec!["q.*".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .expect("wq");
    for i in 0..3 {
        publish(&js, "q.a", &i.to_string()).await;
    }
    let c = wq
        .create_consumer(consumer::pull::Config {
            durable_name: Some("W".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.Q.W2",
        r#"{"stream_name":"Q","config":{"durable_name":"W2","ack_policy":"explicit"}}"#,
    )
    .await;
    assert_eq!(
        err_of(&v),
        (
            400,
            10099,
            "multiple non-filtered consumers not allowed on workqueue stream".into()
        )
    );
    // Pull with ack none: the pull check answers before the work-queue one; push: 10098.
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.Q.N",
        r#"{"stream_name":"Q","config":{"name":"N","filter_subject":"q.b"}}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10084, "{v}");
    let v = api(&nc, "$JS.API.CONSUMER.CREATE.Q.N", r#"{"stream_name":"Q","config":{"name":"N","filter_subject":"q.b","deliver_subject":"dq"}}"#).await;
    assert_eq!(
        err_of(&v),
        (400, 10098, "workqueue stream requires explicit ack".into())
    );
    let mut b = c.fetch().max_messages(3).messages().await.expect("fetch");
    while let Some(m) = b.next().await {
        m.expect("msg").double_ack().await.expect("ack");
    }
    assert_eq!(wq.info().await.expect("info").state.messages, 0);

    let mut is = js
        .create_stream(stream::Config {
            name: "I".into(),
            subjects: vec!["i.*".into()],
            retention: stream::RetentionPolicy::Interest,
            ..Default::default()
        })
        .await
        .expect("interest");
    publish(&js, "i.a", "nobody").await;
    assert_eq!(is.info().await.expect("info").state.messages, 0);
    let ca = is
        .create_consumer(consumer::pull::Config {
            durable_name: Some("A".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("A");
    let cb = is
        .create_consumer(consumer::pull::Config {
            durable_name: Some("B".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("B");
    publish(&js, "i.a", "both").await;
    let m = common::fetch_one(&ca).await;
    m.double_ack().await.expect("ack A");
    assert_eq!(
        is.info().await.expect("info").state.messages,
        1,
        "B still wants it"
    );
    let m = common::fetch_one(&cb).await;
    m.double_ack().await.expect("ack B");
    assert_eq!(is.info().await.expect("info").state.messages, 0);
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn restart_keeps_streams_consumers_and_their_state() {
    let dir = tmp_dir("restart");
    {
        let (srv, nc, js) = start(&dir).await;
        let s = js
            .create_stream(stream::Config {
                name: "R".into(),
                subjects: vec!["r.*".into()],
                max_messages: 100,
                ..Default::default()
            })
            .await
            .expect("create");
        js.create_stream(stream::Config {
            name: "MEM".into(),
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("memory stream");
        for i in 0..4 {
            publish(&js, "r.a", &i.to_string()).await;
        }
        let c = s
            .create_consumer(consumer::pull::Config {
                durable_name: Some("D".into()),
                ack_policy: consumer::AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .expect("consumer");
        let mut b = c.fetch().max_messages(2).messages().await.expect("fetch");
        while let Some(m) = b.next().await {
            m.expect("msg").double_ack().await.expect("ack");
        }
        drop(nc);
        srv.shutdown().await;
    }
    let meta = dir.join("jetstream/$G/streams/R/meta.json");
    assert!(meta.exists(), "stream metadata at {}", meta.display());
    assert!(dir.join("jetstream/$G/streams/R/obs/D/state.json").exists());
    let (srv, nc, js) = start(&dir).await;
    let mut s = js.get_stream("R").await.expect("stream restored");
    assert_eq!(s.cached_info().config.max_messages, 100);
    assert!(
        js.get_stream("MEM").await.is_err(),
        "memory streams do not survive a restart"
    );
    let mut c: consumer::PullConsumer = s.get_consumer("D").await.expect("consumer restored");
    let info = c.info().await.expect("info");
    assert_eq!(info.delivered.consumer_sequence, 2, "{info:?}");
    // File streams keep their messages, the consumer its ack floor: the next fetch continues
    // after what was acknowledged.
    assert_eq!(s.info().await.expect("info").state.messages, 4);
    assert_eq!(info.ack_floor.stream_sequence, 2);
    let mut b = c.fetch().max_messages(2).messages().await.expect("fetch");
    let m = b.next().await.expect("m").expect("ok");
    assert_eq!(m.info().expect("info").stream_sequence, 3);
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn domain_prefix_and_monitoring() {
    let dir = tmp_dir("domain");
    let mut o = js_opts(&dir);
    if let Some(j) = o.jetstream.as_mut() {
        j.domain = Some("hub".into());
    }
    let srv = common::start(o).await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let js = jetstream::with_domain(nc.clone(), "hub");
    let info = api(&nc, "$JS.hub.API.INFO", "").await;
    assert_eq!(info["domain"], "hub", "{info}");
    js.create_stream(stream::Config {
        name: "D".into(),
        subjects: vec!["d".into()],
        ..Default::default()
    })
    .await
    .expect("create via domain");
    let v = pub_raw(&nc, "d", &[], "x").await;
    assert_eq!(v, json!({"stream":"D","domain":"hub","seq":1}));
    let http = common::http_addr(&srv);
    let jsz = common::http_json(http, "/jsz?accounts=1&streams=1&consumers=1&config=1").await;
    assert_eq!(jsz["streams"], 1, "{jsz}");
    assert_eq!(jsz["messages"], 1, "{jsz}");
    assert_eq!(jsz["config"]["domain"], "hub", "{jsz}");
    assert_eq!(
        jsz["account_details"][0]["stream_detail"][0]["name"], "D",
        "{jsz}"
    );
    let varz = common::http_json(http, "/varz").await;
    assert_eq!(varz["jetstream"]["config"]["domain"], "hub", "{varz}");
    assert_eq!(varz["jetstream"]["stats"]["api"]["errors"], 0, "{varz}");
    let acc = common::http_json(http, "/accountz?acc=$G").await;
    assert_eq!(acc["account_detail"]["jetstream_enabled"], true, "{acc}");
    let (code, body) = common::http_get(http, "/healthz?js-enabled-only=1").await;
    assert_eq!(code, 200, "{body}");
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn accounts_without_jetstream_get_nats_server_error() {
    let dir = tmp_dir("accounts");
    let user = |u: &str, a: &str| natsd::config::User {
        username: u.into(),
        password: u.into(),
        account: Some(a.into()),
        permissions: None,
        connection_types: Vec::new(),
    };
    let srv = common::start(Options {
        accounts: vec!["A".into(), "B".into()],
        users: vec![user("a", "A"), user("b", "B")],
        jetstream_accounts: vec!["A".into()],
        ..js_opts(&dir)
    })
    .await;
    let conn = |u: &'static str| {
        async_nats::ConnectOptions::with_user_and_password(u.into(), u.into())
            .connect(srv.client_url())
    };
    let a = conn("a").await.expect("a");
    let b = conn("b").await.expect("b");
    let v = api(&a, "$JS.API.STREAM.CREATE.S", r#"{"name":"S"}"#).await;
    assert_eq!(v["did_create"], true, "{v}");
    let v = api(&b, "$JS.API.INFO", "").await;
    assert_eq!(
        err_of(&v),
        (503, 10039, "JetStream not enabled for account".into())
    );
    let v = api(&b, "$JS.API.STREAM.NAMES", "").await;
    assert_eq!(err_of(&v).1, 10039);
    assert_eq!(v["streams"], Value::Null);
    // Each account has its own streams: B's subject `S` is not A's stream.
    let r = b.request("S", Bytes::from("x")).await;
    assert!(r.is_err(), "no stream listens in B");
    drop((a, b));
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn consumer_options_ack_all_max_ack_pending_progress_groups_backoff_inactive() {
    let dir = tmp_dir("opts");
    let (srv, nc, js) = start(&dir).await;
    let s = js
        .create_stream(stream::Config {
            name: "O".into(),
            subjects: vec!["o.*".into()],
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("create");
    for i in 0..6 {
        publish(&js, "o.a", &i.to_string()).await;
    }
    // max_ack_pending 2: a batch of 5 gets 2 until something is acked.
    let c = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("MAP".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            max_ack_pending: 2,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut b = c
        .batch()
        .max_messages(5)
        .expires(Duration::from_millis(300))
        .messages()
        .await
        .expect("batch");
    let mut got = Vec::new();
    while let Some(Ok(m)) = b.next().await {
        got.push(m);
    }
    assert_eq!(got.len(), 2);
    // Ack all: acking the second acknowledges the first too.
    let c_all = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("ALL".into()),
            ack_policy: consumer::AckPolicy::All,
            ..Default::default()
        })
        .await
        .expect("ack all");
    let mut b = c_all
        .fetch()
        .max_messages(3)
        .messages()
        .await
        .expect("fetch");
    let mut ms = Vec::new();
    while let Some(m) = b.next().await {
        ms.push(m.expect("msg"));
    }
    ms[1].double_ack().await.expect("ack 2");
    let mut c_all = c_all;
    let i = c_all.info().await.expect("info");
    assert_eq!(
        (i.num_ack_pending, i.ack_floor.stream_sequence),
        (1, 2),
        "{i:?}"
    );
    // Progress (+WPI) keeps a message from being redelivered past its first ack wait.
    let cw = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("WPI".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_millis(500),
            backoff: vec![Duration::from_millis(500), Duration::from_millis(100)],
            max_deliver: 5,
            ..Default::default()
        })
        .await
        .expect("wpi");
    let m = common::fetch_one(&cw).await;
    let first = m.info().expect("info").stream_sequence;
    // Longer in total than the ack wait, each step well within it (time must pass here).
    for _ in 0..4 {
        m.ack_with(jetstream::AckKind::Progress)
            .await
            .expect("progress");
        nc.flush().await.expect("flush");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    m.ack_with(jetstream::AckKind::Progress)
        .await
        .expect("progress");
    nc.flush().await.expect("flush");
    let mut cw = cw;
    let i = cw.info().await.expect("info");
    assert_eq!((i.num_ack_pending, i.num_redelivered), (1, 0), "{i:?}");
    // Then left alone it comes back (backoff), delivery count 2.
    let mut redelivered = 0;
    for _ in 0..20 {
        let mut b = cw
            .batch()
            .max_messages(1)
            .expires(Duration::from_millis(500))
            .messages()
            .await
            .expect("batch");
        if let Some(Ok(m)) = b.next().await {
            let i = m.info().expect("info");
            if i.stream_sequence == first {
                redelivered = i.delivered;
                break;
            }
            m.double_ack().await.expect("ack other");
        }
    }
    assert_eq!(redelivered, 2);

    // A push consumer with a deliver group: each message to one member.
    let inbox = nc.new_inbox();
    let mut q1 = nc
        .queue_subscribe(inbox.clone(), "g".into())
        .await
        .expect("q1");
    let mut q2 = nc
        .queue_subscribe(inbox.clone(), "g".into())
        .await
        .expect("q2");
    nc.flush().await.expect("flush");
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.O.G",
        &json!({"stream_name":"O","config":{"durable_name":"G","deliver_subject":inbox,
            "deliver_group":"g","ack_policy":"none"}})
        .to_string(),
    )
    .await;
    assert_eq!(v["config"]["deliver_group"], "g", "{v}");
    let mut n = 0;
    while n < 6 {
        tokio::select! {
            Some(_) = q1.next() => n += 1,
            Some(_) = q2.next() => n += 1,
            _ = tokio::time::sleep(T) => panic!("group got {n} of 6"),
        }
    }
    // Replay original: everything arrives, in order.
    let oc = s
        .create_consumer(consumer::push::Config {
            deliver_subject: nc.new_inbox(),
            replay_policy: consumer::ReplayPolicy::Original,
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("replay original");
    let mut om = oc.messages().await.expect("messages");
    for i in 1..=6 {
        let m = tokio::time::timeout(T, om.next())
            .await
            .expect("in time")
            .expect("some")
            .expect("ok");
        assert_eq!(m.info().expect("info").stream_sequence, i);
    }
    // An ephemeral consumer nobody uses goes after its inactive threshold.
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.O",
        r#"{"stream_name":"O","config":{"ack_policy":"explicit","inactive_threshold":200000000}}"#,
    )
    .await;
    let name = v["name"].as_str().expect("name").to_string();
    assert_eq!(v["config"]["inactive_threshold"], 200_000_000);
    common::wait_for("ephemeral consumer removed", || {
        let nc = nc.clone();
        let name = name.clone();
        async move {
            let v = api(&nc, &format!("$JS.API.CONSUMER.INFO.O.{name}"), "").await;
            v["error"]["err_code"] == 10014
        }
    })
    .await;
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn absurd_values_are_answered_never_panic() {
    let dir = tmp_dir("absurd");
    let (srv, nc, js) = start(&dir).await;
    js.create_stream(stream::Config {
        name: "X".into(),
        subjects: vec!["x".into()],
        ..Default::default()
    })
    .await
    .expect("create");
    publish(&js, "x", "1").await;
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.X.C",
        &json!({"stream_name":"X","config":{"name":"C","ack_policy":"explicit",
            "ack_wait": i64::MAX, "max_deliver": i64::MAX}})
        .to_string(),
    )
    .await;
    assert_eq!(v["config"]["ack_wait"], i64::MAX, "{v}");
    // A huge expiry and a NAK with a huge delay. (Pulled messages keep their stream
    // subject, so they are read from the inbox, not through the request helper.)
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("sub");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.X.C",
        inbox,
        Bytes::from(json!({"batch": i64::MAX, "expires": i64::MAX}).to_string()),
    )
    .await
    .expect("pull");
    let m = tokio::time::timeout(T, sub.next())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(m.subject.as_str(), "x");
    let reply = m.reply.expect("ack subject");
    assert_eq!(reply.split('.').count(), 9, "{reply}");
    nc.publish(
        reply.clone(),
        Bytes::from(format!("-NAK {{\"delay\":{}}}", i64::MAX)),
    )
    .await
    .expect("nak");
    for body in [
        "",
        "{",
        "[]",
        "null",
        "\"x\"",
        "{\"batch\":-5}",
        "{\"expires\":-1}",
    ] {
        let _ = tokio::time::timeout(
            Duration::from_millis(200),
            nc.request("$JS.API.CONSUMER.MSG.NEXT.X.C", Bytes::from(body)),
        )
        .await;
    }
    for (subj, body) in [
        (
            "$JS.API.STREAM.CREATE.Y",
            r#"{"name":"Y","max_age":9223372036854775807,"duplicate_window":1}"#,
        ),
        (
            "$JS.API.STREAM.CREATE.Z",
            r#"{"name":"Z","subjects":["z.>", "z.*"]}"#,
        ),
        (
            "$JS.API.STREAM.MSG.GET.X",
            r#"{"seq":18446744073709551615}"#,
        ),
        ("$JS.API.STREAM.MSG.GET.X", r#"{"last_by_subj":"*.>.x"}"#),
        ("$JS.API.STREAM.PURGE.X", r#"{"filter":"a..b"}"#),
        ("$JS.API.STREAM.PURGE.X", r#"{"keep":18446744073709551615}"#),
        ("$JS.API.STREAM.INFO.X", r#"{"subjects_filter":">"}"#),
        ("$JS.API.STREAM.NAMES", r#"{"offset":18446744073709551615}"#),
        (
            "$JS.API.CONSUMER.CREATE.X",
            r#"{"stream_name":"X","config":{"ack_policy":"explicit","opt_start_time":"nope","deliver_policy":"by_start_time"}}"#,
        ),
        (
            "$JS.API.CONSUMER.CREATE.X",
            r#"{"stream_name":"X","config":{"ack_policy":"explicit","backoff":[-1]}}"#,
        ),
        (
            "$JS.API.CONSUMER.CREATE.X",
            r#"{"stream_name":"X","config":{"deliver_subject":"a.*","ack_policy":"none"}}"#,
        ),
        (
            "$JS.API.CONSUMER.CREATE.X",
            r#"{"stream_name":"X","config":{"ack_policy":"explicit","max_ack_pending":-7}}"#,
        ),
    ] {
        let v = api(&nc, subj, body).await;
        assert!(v.is_object(), "{subj} {body}: {v}");
    }
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.Z",
        r#"{"name":"Z","subjects":["z.>", "z.*"]}"#,
    )
    .await;
    assert_eq!(err_of(&v).1, 10052, "{v}");
    // Still alive and answering.
    let info = api(&nc, "$JS.API.INFO", "").await;
    assert_eq!(info["streams"], 2, "{info}");
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn memory_and_storage_limits() {
    let dir = tmp_dir("limits");
    let mut o = js_opts(&dir);
    if let Some(j) = o.jetstream.as_mut() {
        j.max_memory_store = Some(2048);
    }
    let srv = common::start(o).await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.M1",
        r#"{"name":"M1","storage":"memory","max_bytes":4096}"#,
    )
    .await;
    assert_eq!(
        err_of(&v),
        (500, 10028, "insufficient memory resources available".into())
    );
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.M2",
        r#"{"name":"M2","storage":"memory"}"#,
    )
    .await;
    assert_eq!(v["did_create"], true, "{v}");
    let mut refused = None;
    for i in 0..40 {
        let v = pub_raw(&nc, "M2", &[], &"x".repeat(100)).await;
        if v.get("error").is_some() {
            refused = Some((i, v));
            break;
        }
    }
    let (i, v) = refused.expect("refused once over the limit");
    assert_eq!(err_of(&v), (503, 10023, "insufficient resources".into()));
    // nats-server 2.9.10 takes 18 messages of 118 bytes under a 2 KiB limit.
    assert_eq!(i, 18);
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn consumer_checks_come_in_nats_server_order() {
    let dir = tmp_dir("order");
    let (srv, nc, js) = start(&dir).await;
    js.create_stream(stream::Config {
        name: "P".into(),
        subjects: vec!["p.*".into()],
        ..Default::default()
    })
    .await
    .expect("create");
    // No ack policy given (none) on a pull consumer: the deliver policy and filter checks
    // answer first, as nats-server 2.9.10 does.
    for (cfg, code) in [
        (
            r#"{"durable_name":"D5","deliver_policy":"by_start_sequence"}"#,
            10094,
        ),
        (r#"{"durable_name":"D6","filter_subject":"zz"}"#, 10093),
        (
            r#"{"durable_name":"D12","deliver_policy":"by_start_time"}"#,
            10094,
        ),
        (
            r#"{"durable_name":"D13","deliver_policy":"last_per_subject"}"#,
            10094,
        ),
    ] {
        let name = serde_json::from_str::<Value>(cfg).expect("json")["durable_name"].clone();
        let name = name.as_str().expect("name");
        let v = api(
            &nc,
            &format!("$JS.API.CONSUMER.CREATE.P.{name}"),
            &format!(r#"{{"stream_name":"P","config":{cfg}}}"#),
        )
        .await;
        assert_eq!(err_of(&v).1, code, "{cfg}: {v}");
    }
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn purge_to_sequence_one_is_a_full_purge_as_nats_server() {
    let dir = tmp_dir("purge1");
    let (srv, nc, js) = start(&dir).await;
    for (name, storage) in [
        ("PF", stream::StorageType::File),
        ("PM", stream::StorageType::Memory),
    ] {
        let subj = format!("{}.x", name.to_lowercase());
        js.create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subj.clone()],
            storage,
            ..Default::default()
        })
        .await
        .expect("create");
        for i in 0..4 {
            pub_raw(&nc, &subj, &[], &i.to_string()).await;
        }
        // Below 3: two go.
        let v = api(&nc, &format!("$JS.API.STREAM.PURGE.{name}"), r#"{"seq":3}"#).await;
        assert_eq!(v["purged"], 2, "{v}");
        // nats-server 2.9's PurgeEx: sequence 1 without filter or keep purges everything.
        let v = api(&nc, &format!("$JS.API.STREAM.PURGE.{name}"), r#"{"seq":1}"#).await;
        assert_eq!(v["purged"], 2, "{v}");
        let v = api(&nc, &format!("$JS.API.STREAM.INFO.{name}"), "").await;
        assert_eq!(v["state"]["messages"], 0, "{v}");
        assert_eq!(v["state"]["first_seq"], 5, "{v}");
    }
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn ephemeral_consumers_survive_a_restart_and_their_files_go_when_inactive() {
    let dir = tmp_dir("ephemeral");
    let name;
    {
        let (srv, nc, js) = start(&dir).await;
        js.create_stream(stream::Config {
            name: "E".into(),
            subjects: vec!["e.*".into()],
            ..Default::default()
        })
        .await
        .expect("create");
        for i in 0..4 {
            publish(&js, "e.a", &i.to_string()).await;
        }
        let v = api(
            &nc,
            "$JS.API.CONSUMER.CREATE.E",
            r#"{"stream_name":"E","config":{"ack_policy":"explicit","inactive_threshold":60000000000}}"#,
        )
        .await;
        name = v["name"].as_str().expect("name").to_string();
        let mut c: consumer::PullConsumer = js
            .get_stream("E")
            .await
            .expect("stream")
            .get_consumer(&name)
            .await
            .expect("consumer");
        let mut b = c.fetch().max_messages(2).messages().await.expect("fetch");
        while let Some(m) = b.next().await {
            m.expect("msg").double_ack().await.expect("ack");
        }
        assert_eq!(c.info().await.expect("info").ack_floor.stream_sequence, 2);
        drop(nc);
        srv.shutdown().await;
    }
    let cdir = dir.join(format!("jetstream/$G/streams/E/obs/{name}"));
    assert!(cdir.join("meta.json").exists(), "{}", cdir.display());
    let (srv, nc, _js) = start(&dir).await;
    let v = api(&nc, &format!("$JS.API.CONSUMER.INFO.E.{name}"), "").await;
    assert_eq!(v["ack_floor"]["stream_seq"], 2, "{v}");
    assert_eq!(v["config"]["inactive_threshold"], 60_000_000_000u64, "{v}");
    assert!(
        v["config"].get("durable_name").is_none(),
        "still ephemeral: {v}"
    );
    // An inactive ephemeral is removed, files included.
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.E",
        r#"{"stream_name":"E","config":{"ack_policy":"explicit","inactive_threshold":200000000}}"#,
    )
    .await;
    let short = v["name"].as_str().expect("name").to_string();
    let sdir = dir.join(format!("jetstream/$G/streams/E/obs/{short}"));
    assert!(sdir.exists());
    common::wait_for("inactive ephemeral's files removed", || {
        let gone = !sdir.exists();
        async move { gone }
    })
    .await;
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Gaps the nats-py suite found (`docs/client-suites-nats-py.md`), as nats-server 2.9.10
/// answers them: consumer filters that cover the stream's subjects, `discard_new_per_subject`,
/// `mirror_direct` without a mirror, and `republish`.
#[tokio::test]
async fn filters_discard_new_per_subject_mirror_direct_and_republish() {
    let dir = tmp_dir("natspy");
    let (srv, nc, _js) = start(&dir).await;
    let create = |name: &str, cfg: Value| {
        let nc = nc.clone();
        let subject = format!("$JS.API.STREAM.CREATE.{name}");
        async move { api(&nc, &subject, &cfg.to_string()).await }
    };

    // A filter may lie within a stream subject or cover some of them.
    create("S", json!({"name":"S","subjects":["a","b","c.>"]})).await;
    for (filter, ok) in [
        (">", true),
        ("*", true),
        ("c.*", true),
        ("*.d", false),
        ("a.>", false),
        ("c", false),
    ] {
        let body = json!({"stream_name":"S","config":{"durable_name":"D","filter_subject":filter,"ack_policy":"explicit"}});
        let v = api(
            &nc,
            "$JS.API.CONSUMER.DURABLE.CREATE.S.D",
            &body.to_string(),
        )
        .await;
        if ok {
            assert_eq!(v["config"]["filter_subject"], filter, "{filter}: {v}");
            api(&nc, "$JS.API.CONSUMER.DELETE.S.D", "").await;
        } else {
            assert_eq!(err_of(&v).1, 10093, "{filter}: {v}");
        }
    }

    // discard_new_per_subject: echoed, checked, and a full subject refuses new messages.
    let v = create(
        "D1",
        json!({"name":"D1","subjects":["d.>"],"discard":"new","discard_new_per_subject":true,"max_msgs_per_subject":1}),
    )
    .await;
    assert_eq!(v["config"]["discard_new_per_subject"], true, "{v}");
    let v = create(
        "D4",
        json!({"name":"D4","discard":"new","max_msgs_per_subject":1}),
    )
    .await;
    assert!(v["config"].get("discard_new_per_subject").is_none(), "{v}");
    for (cfg, want) in [
        (
            json!({"name":"D2","discard":"new","discard_new_per_subject":true}),
            "discard new per subject requires max msgs per subject > 0",
        ),
        (
            json!({"name":"D3","discard_new_per_subject":true,"max_msgs_per_subject":5}),
            "discard new per subject requires discard new policy to be set",
        ),
        (
            json!({"name":"M1","mirror_direct":true}),
            "stream has no mirror but does have mirror direct",
        ),
        (
            json!({"name":"R4","subjects":["w.>"],"republish":{"src":">","dest":"w.x.>"}}),
            "stream configuration for republish destination forms a cycle",
        ),
        (
            json!({"name":"R6","subjects":["u.>"],"republish":{"src":"u.*","dest":"up.>"}}),
            "stream configuration for republish not valid",
        ),
        (
            json!({"name":"R7","subjects":["s.>"],"republish":{"src":"s.*.*","dest":"sp.*.*"}}),
            "stream configuration for republish not valid",
        ),
        (
            json!({"name":"R3","subjects":["z.>"],"republish":{"src":"y.>","dest":"zp.>"}}),
            "stream configuration for republish source is not valid subset of subjects",
        ),
    ] {
        let name = cfg["name"].as_str().unwrap_or_default().to_string();
        let v = create(&name, cfg).await;
        assert_eq!(err_of(&v), (500, 10052, want.to_string()), "{name}: {v}");
    }
    assert_eq!(pub_raw(&nc, "d.a", &[], "x").await["seq"], 1);
    let v = pub_raw(&nc, "d.a", &[], "x").await;
    assert_eq!(
        err_of(&v),
        (503, 10077, "maximum messages per subject exceeded".into()),
        "{v}"
    );
    assert_eq!(pub_raw(&nc, "d.b", &[], "x").await["seq"], 2);

    // republish: mapped subject, stream headers after the message's own, and the
    // subject's previous sequence; headers_only sends the size instead of the payload.
    let v = create(
        "R1",
        json!({"name":"R1","subjects":["r.>"],"republish":{"dest":"rp.>"}}),
    )
    .await;
    assert_eq!(
        v["config"]["republish"],
        json!({"src":">","dest":"rp.>"}),
        "{v}"
    );
    create(
        "R2",
        json!({"name":"R2","subjects":["q.*"],"republish":{"src":"q.*","dest":"qp.$1","headers_only":true}}),
    )
    .await;
    let mut sub = nc.subscribe("rp.>").await.expect("sub");
    let mut sub2 = nc.subscribe("qp.*").await.expect("sub");
    nc.flush().await.expect("flush");
    pub_raw(&nc, "r.x", &[], "one").await;
    pub_raw(&nc, "r.y", &[("Foo", "bar")], "two").await;
    pub_raw(&nc, "r.x", &[], "three").await;
    pub_raw(&nc, "q.k", &[("Foo", "bar")], "1234567").await;
    let m = next_of(&mut sub).await;
    assert_eq!(
        (m.subject.as_str(), &m.payload[..]),
        ("rp.r.x", &b"one"[..])
    );
    let h = m.headers.expect("headers");
    for (k, v) in [
        ("Nats-Stream", "R1"),
        ("Nats-Subject", "r.x"),
        ("Nats-Sequence", "1"),
        ("Nats-Last-Sequence", "0"),
    ] {
        assert_eq!(h.get(k).map(|v| v.as_str()), Some(v), "{k}");
    }
    let m = next_of(&mut sub).await;
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Foo").map(|v| v.as_str()), Some("bar"));
    assert_eq!(h.get("Nats-Sequence").map(|v| v.as_str()), Some("2"));
    let m = next_of(&mut sub).await;
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Nats-Sequence").map(|v| v.as_str()), Some("3"));
    assert_eq!(h.get("Nats-Last-Sequence").map(|v| v.as_str()), Some("1"));
    let m = next_of(&mut sub2).await;
    assert_eq!(m.subject.as_str(), "qp.k");
    assert!(m.payload.is_empty());
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Nats-Msg-Size").map(|v| v.as_str()), Some("7"));
    assert_eq!(h.get("Foo").map(|v| v.as_str()), Some("bar"));

    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

async fn next_of(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(T, sub.next())
        .await
        .expect("message in time")
        .expect("message")
}

/// A pull request whose inbox has no subscriber is dropped, not served: the message stays
/// pending for the next request (nats-server 2.9.10; nats-py `test_pull_subscribe_limits`).
#[tokio::test]
async fn pull_request_without_interest_is_not_served() {
    let dir = tmp_dir("pullint");
    let (srv, nc, _js) = start(&dir).await;
    api(
        &nc,
        "$JS.API.STREAM.CREATE.PI",
        r#"{"name":"PI","subjects":["pi"]}"#,
    )
    .await;
    api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.PI.C",
        r#"{"stream_name":"PI","config":{"durable_name":"C","ack_policy":"explicit"}}"#,
    )
    .await;
    assert_eq!(pub_raw(&nc, "pi", &[], "m").await["seq"], 1);
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.PI.C",
        "nobody.listens",
        Bytes::from_static(br#"{"batch":1,"expires":5000000000}"#),
    )
    .await
    .expect("pull");
    // Requests are applied in order: the info answers after the pull was handled.
    let v = api(&nc, "$JS.API.CONSUMER.INFO.PI.C", "").await;
    assert_eq!(
        (v["num_pending"].as_i64(), v["num_ack_pending"].as_i64()),
        (Some(1), Some(0)),
        "{v}"
    );
    assert_eq!(v["num_waiting"], 0, "{v}");
    // A request someone listens to gets it (on its stream subject, hence no muxed request).
    let mut inbox = nc.subscribe("my.inbox").await.expect("sub");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.PI.C",
        "my.inbox",
        Bytes::from_static(b"1"),
    )
    .await
    .expect("pull");
    let m = next_of(&mut inbox).await;
    assert_eq!((m.subject.as_str(), &m.payload[..]), ("pi", &b"m"[..]));
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stream `bytes` count messages as nats-server's stores do: the file store's record framing
/// (30 bytes, 34 with a header), the memory store's 16; the same after a restart.
#[tokio::test]
async fn stream_bytes_as_nats_server_stores_count_them() {
    let dir = tmp_dir("bytes");
    let (srv, nc, _js) = start(&dir).await;
    api(
        &nc,
        "$JS.API.STREAM.CREATE.F",
        r#"{"name":"F","subjects":["world","w2"]}"#,
    )
    .await;
    api(
        &nc,
        "$JS.API.STREAM.CREATE.M",
        r#"{"name":"M","subjects":["mem"],"storage":"memory"}"#,
    )
    .await;
    let bytes = |name: &'static str| {
        let nc = nc.clone();
        async move {
            let v = api(&nc, &format!("$JS.API.STREAM.INFO.{name}"), "").await;
            v["state"]["bytes"].as_u64()
        }
    };
    pub_raw(&nc, "world", &[], "Hello world!").await;
    assert_eq!(bytes("F").await, Some(47));
    pub_raw(&nc, "w2", &[("foo", "bar")], "Hello world!").await;
    assert_eq!(bytes("F").await, Some(117));
    pub_raw(&nc, "mem", &[("foo", "bar")], "Hello world!").await;
    assert_eq!(bytes("M").await, Some(53));
    drop(nc);
    srv.shutdown().await;
    let (srv, nc, _js) = start(&dir).await;
    let v = api(&nc, "$JS.API.STREAM.INFO.F", "").await;
    assert_eq!(v["state"]["bytes"].as_u64(), Some(117), "{v}");
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
