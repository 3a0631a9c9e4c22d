//! `nats stream backup` and `nats stream restore` on a cluster of three embedded natsd
//! nodes: the snapshot comes from the stream's leader; a restore creates a replicated
//! stream whose every copy holds the snapshot's messages at their sequences, with its
//! consumers and their progress, and which goes on after a leader change; a restore over an
//! existing stream or of bad data is refused and leaves nothing behind.

mod common;

use common::jsc::*;

use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;

/// STREAM.SNAPSHOT of `stream` through `nc` in chunks of `chunk` bytes, each acked: the
/// answer and the data.
async fn snapshot_data(nc: &async_nats::Client, stream: &str, chunk: usize) -> (Value, Vec<u8>) {
    let deliver = nc.new_inbox();
    let mut sub = nc.subscribe(deliver.clone()).await.expect("sub");
    nc.flush().await.expect("flush");
    let body = format!(r#"{{"deliver_subject":"{deliver}","chunk_size":{chunk}}}"#);
    let a = once_with(nc, &format!("$JS.API.STREAM.SNAPSHOT.{stream}"), &body).await;
    assert!(a["error"].is_null(), "{a}");
    let mut data = Vec::new();
    loop {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("a chunk in time")
            .expect("open");
        if m.payload.is_empty() {
            break;
        }
        data.extend_from_slice(&m.payload);
        nc.publish(m.reply.expect("an ack subject"), "".into())
            .await
            .expect("ack");
    }
    (a, data)
}

/// STREAM.RESTORE of `data` as `stream` with `cfg` through `nc` in chunks of `chunk` bytes:
/// the first answer, and the final one (`None` when the first was an error).
async fn restore(
    nc: &async_nats::Client,
    stream: &str,
    cfg: &Value,
    data: &[u8],
    chunk: usize,
) -> (Value, Option<Value>) {
    let body = serde_json::json!({ "config": cfg, "state": {} }).to_string();
    let first = once_with(nc, &format!("$JS.API.STREAM.RESTORE.{stream}"), &body).await;
    assert_eq!(
        first["type"], "io.nats.jetstream.api.v1.stream_restore_response",
        "{first}"
    );
    let Some(ds) = first["deliver_subject"].as_str().map(str::to_string) else {
        return (first, None);
    };
    assert!(
        ds.starts_with(&format!("$JS.SNAPSHOT.RESTORE.{stream}.")),
        "{first}"
    );
    for c in data.chunks(chunk) {
        let m = tokio::time::timeout(WAIT, nc.request(ds.clone(), Bytes::copy_from_slice(c)))
            .await
            .expect("a chunk answered in time")
            .expect("a chunk answered");
        assert!(m.payload.is_empty(), "a chunk's ack is empty");
    }
    let m = tokio::time::timeout(WAIT, nc.request(ds, Bytes::new()))
        .await
        .expect("the final answer in time")
        .expect("the final answer");
    let last = serde_json::from_slice(&m.payload).expect("JSON final answer");
    (first, Some(last))
}

/// Creates an R3 stream `name` on `subject`: the answer.
async fn create_r3(nc: &async_nats::Client, name: &str, subject: &str) -> Value {
    let body = serde_json::json!({"name": name, "subjects": [subject], "num_replicas": 3});
    let r = api(
        nc,
        &format!("$JS.API.STREAM.CREATE.{name}"),
        &body.to_string(),
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    r
}

/// Polls until every node's copy of `stream` is `want` (messages, last sequence).
async fn copies_are(js: &Js, stream: &str, want: (u64, u64)) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let c = copies(js, stream);
        if c.iter().all(|c| *c == Some(want)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "copies of {stream}: {c:?}, want {want:?} on every node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The subject of the next message consumer `SN > name` delivers (a fetch of one).
async fn next_subject(ctx: &jetstream::Context, name: &str) -> String {
    let consumer: jetstream::consumer::PullConsumer = ctx
        .get_stream("SN")
        .await
        .expect("stream")
        .get_consumer(name)
        .await
        .expect("consumer");
    let m = common::fetch_one(&consumer).await;
    m.subject.to_string()
}

/// A backup of an R3 stream with a gap and a consumer with progress, restored (through a
/// client of a node that does not lead it) as a new R3 stream: every node's copy holds the
/// same messages at the same sequences, the consumer goes on where it was, publishing goes
/// on after the last sequence, and all of it survives a leader change.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_restores_as_a_replicated_stream() {
    let js = cluster("jsc-restore", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let r = create_r3(&nc, "SN", "sn.>").await;
    let leader = r["cluster"]["leader"].as_str().expect("leader").to_string();
    let ctx = jetstream::new(nc.clone());
    publish_acked(&ctx, "sn", 1, 40).await;
    let r = api(&nc, "$JS.API.STREAM.MSG.DELETE.SN", r#"{"seq":7}"#).await;
    assert_eq!(r["success"], true, "{r}");
    let r = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.SN.D",
        r#"{"stream_name":"SN","config":{"durable_name":"D","ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let consumer: jetstream::consumer::PullConsumer = ctx
        .get_stream("SN")
        .await
        .expect("stream")
        .get_consumer("D")
        .await
        .expect("consumer");
    let mut batch = consumer
        .fetch()
        .max_messages(5)
        .messages()
        .await
        .expect("fetch");
    let mut acked = 0;
    while let Some(m) = batch.next().await {
        m.expect("message").double_ack().await.expect("ack");
        acked += 1;
    }
    assert_eq!(acked, 5);
    // An R1 durable beside it, with progress of its own.
    let r = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.SN.ONE",
        r#"{"stream_name":"SN","config":{"durable_name":"ONE","ack_policy":"explicit","num_replicas":1}}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let one: jetstream::consumer::PullConsumer = ctx
        .get_stream("SN")
        .await
        .expect("stream")
        .get_consumer("ONE")
        .await
        .expect("consumer");
    let mut batch = one.fetch().max_messages(2).messages().await.expect("fetch");
    while let Some(m) = batch.next().await {
        m.expect("message").double_ack().await.expect("ack");
    }
    // The stream's leader reads the backup's consumer progress from its copy, which follows
    // the consumer's own group: the last commit reaches it a moment after the ack's answer
    // (nats-server's snapshot reads its consumers' stores the same way).
    let at_leader = js
        .servers
        .iter()
        .find(|s| s.shared().name == leader)
        .map(common::http_addr)
        .expect("the leader");
    common::wait_for("the stream leader's copy of D at 5", || async move {
        let jsz = "/jsz?accounts=true&streams=true&consumers=true";
        let (_, body) = common::http_get(at_leader, jsz).await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["account_details"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default())
            .filter(|s| s["name"] == "SN")
            .flat_map(|s| s["consumer_detail"].as_array().cloned().unwrap_or_default())
            .filter(|c| {
                (c["name"] == "D" && c["ack_floor"]["stream_seq"] == 5)
                    || (c["name"] == "ONE" && c["ack_floor"]["stream_seq"] == 2)
            })
            .count()
            == 2
    })
    .await;

    // The backup, from a client of a node that does not lead SN.
    let far = js
        .servers
        .iter()
        .find(|s| s.shared().name != leader)
        .expect("a follower");
    let far = async_nats::connect(far.client_url())
        .await
        .expect("connect");
    let (a, data) = snapshot_data(&far, "SN", 1024).await;
    assert_eq!(a["state"]["messages"], 39, "{a}");
    let cfg = a["config"].clone();

    let r = api(&nc, "$JS.API.STREAM.DELETE.SN", "").await;
    assert_eq!(r["success"], true, "{r}");
    copies_are_gone(&js, "SN").await;

    let (_, last) = restore(&far, "SN", &cfg, &data, 700).await;
    let last = last.expect("a deliver subject");
    assert!(last["error"].is_null(), "{last}");
    assert_eq!(
        last["type"], "io.nats.jetstream.api.v1.stream_create_response",
        "{last}"
    );
    assert_eq!(last["state"]["messages"], 39, "{last}");
    assert_eq!(last["state"]["last_seq"], 40, "{last}");
    assert_eq!(last["config"]["num_replicas"], 3, "{last}");
    copies_are(&js, "SN", (39, 40)).await;
    let c = api(&nc, "$JS.API.CONSUMER.INFO.SN.D", "").await;
    assert_eq!(c["ack_floor"]["stream_seq"], 5, "{c}");
    assert_eq!(c["num_pending"], 34, "{c}");
    // The R1 durable too: its group of one is formed on one of the new copies.
    let c = api(&nc, "$JS.API.CONSUMER.INFO.SN.ONE", "").await;
    assert!(c["cluster"]["leader"].is_string(), "{c}");
    assert!(c["cluster"].get("replicas").is_none(), "R1: {c}");
    assert_eq!(c["ack_floor"]["stream_seq"], 2, "{c}");
    let m = api(&nc, "$JS.API.STREAM.MSG.GET.SN", r#"{"seq":7}"#).await;
    assert_eq!(m["error"]["err_code"], 10037, "the gap stays: {m}");
    let m = api(&nc, "$JS.API.STREAM.MSG.GET.SN", r#"{"seq":8}"#).await;
    assert_eq!(m["message"]["subject"], "sn.8", "{m}");

    // Publishing goes on after the last sequence; the consumer delivers the next one.
    publish_acked(&ctx, "sn", 41, 42).await;
    copies_are(&js, "SN", (41, 42)).await;
    let now = new_leader(&nc, "SN", "").await;
    let r = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.SN").await;
    assert_eq!(r["success"], true, "{r}");
    new_leader(&nc, "SN", &now).await;
    assert_eq!(
        next_subject(&ctx, "D").await,
        "sn.6",
        "D goes on where it was"
    );
    assert_eq!(
        next_subject(&ctx, "ONE").await,
        "sn.3",
        "ONE goes on where it was"
    );

    // Over an existing stream: refused at once, as nats-server; a bad configuration is
    // refused first (nats-server checks it before the name).
    let (first, last) = restore(&nc, "SN", &cfg, &data, 700).await;
    assert!(last.is_none());
    assert_eq!(first["error"]["err_code"], 10130, "{first}");
    let mut bad = cfg.clone();
    bad["max_age"] = (-1).into();
    let (first, last) = restore(&nc, "SN", &bad, &data, 700).await;
    assert!(last.is_none());
    assert_eq!(
        first["error"]["description"], "max age can not be negative",
        "{first}"
    );
    js.stop().await;
}

/// Data that is not a snapshot (or not of this stream) is answered with the error at the
/// end, and the half-made stream is dropped, as is one whose data never comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bad_restore_leaves_nothing_behind() {
    let js = cluster("jsc-restore-bad", 3).await;
    let nc = async_nats::connect(js.servers[1].client_url())
        .await
        .expect("connect");
    // (Created first: the cluster is ready once it answers.)
    create_r3(&nc, "OTHER", "o.>").await;
    let cfg = serde_json::json!({"name": "RB", "subjects": ["rb.>"], "num_replicas": 3});
    let (_, last) = restore(&nc, "RB", &cfg, b"not a natsd snapshot at all", 8).await;
    let last = last.expect("a deliver subject");
    assert_eq!(last["error"]["err_code"], 10062, "{last}");
    copies_are_gone(&js, "RB").await;

    // A good snapshot of another stream is refused by name; restored under its own name
    // (after that stream's deletion) it works.
    let ctx = jetstream::new(nc.clone());
    publish_acked(&ctx, "o", 1, 3).await;
    let (_, other) = snapshot_data(&nc, "OTHER", 4096).await;
    let (_, last) = restore(&nc, "RB", &cfg, &other, 4096).await;
    let last = last.expect("a deliver subject");
    assert_eq!(last["error"]["err_code"], 10062, "{last}");
    assert!(
        last["error"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("stream names do not match")),
        "{last}"
    );
    copies_are_gone(&js, "RB").await;
    let r = api(&nc, "$JS.API.STREAM.DELETE.OTHER", "").await;
    assert_eq!(r["success"], true, "{r}");
    let (_, last) = restore(&nc, "OTHER", &cfg_with_name(&cfg, "OTHER"), &other, 64).await;
    let last = last.expect("a deliver subject");
    assert_eq!(last["state"]["messages"], 3, "{last}");
    copies_are(&js, "OTHER", (3, 3)).await;

    // A restore that gets no data is dropped after 5 s, as nats-server drops it.
    let body = serde_json::json!({ "config": cfg, "state": {} }).to_string();
    let first = once_with(&nc, "$JS.API.STREAM.RESTORE.RB", &body).await;
    assert!(first["deliver_subject"].is_string(), "{first}");
    assert!(copies(&js, "RB").iter().any(Option::is_some), "RB is made");
    copies_are_gone(&js, "RB").await;
    js.stop().await;
}

fn cfg_with_name(cfg: &Value, name: &str) -> Value {
    let mut c = cfg.clone();
    c["name"] = name.into();
    c["subjects"] = serde_json::json!(["o.>"]);
    c
}

/// Polls until no node holds a copy of `stream`.
async fn copies_are_gone(js: &Js, stream: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while copies(js, stream).iter().any(Option::is_some) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{stream} still has copies"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
