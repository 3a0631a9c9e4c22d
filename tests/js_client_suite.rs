//! JetStream behaviour that async-nats 0.51.0's own test suite relies on and nats-server 2.9.10
//! shows (scripts/client-suites/async-nats.sh, docs/client-suites.md); each test names the
//! suite test(s) it stands for.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures::StreamExt;
use natsd::Server;
use std::path::{Path, PathBuf};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn tmp_dir(name: &str) -> PathBuf {
    common::js_dir(&format!("jscs-{name}"))
}

async fn start(dir: &Path) -> (Server, async_nats::Client, jetstream::Context) {
    let (srv, nc) = common::start_js_in(dir).await;
    let js = jetstream::new(nc.clone());
    (srv, nc, js)
}

async fn stop(srv: Server, nc: async_nats::Client, dir: &Path) {
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

use common::js_api as api;

async fn next_msg(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(T, sub.next())
        .await
        .expect("message in time")
        .expect("a message")
}

async fn publish(js: &jetstream::Context, subject: &str) -> u64 {
    js.publish(subject.to_string(), Bytes::from_static(b"data"))
        .await
        .expect("publish")
        .await
        .expect("ack")
        .sequence
}

/// Stream `events` (subject `events`), file storage.
async fn events_stream(js: &jetstream::Context) -> stream::Stream {
    js.create_stream(stream::Config {
        name: "events".into(),
        ..Default::default()
    })
    .await
    .expect("create")
}

/// jetstream::discard_new_per_subject: a subject at `max_msgs_per_subject` refuses more with
/// 503 10077, other subjects still take messages; the flag needs discard new and a per-subject
/// limit (500 10052), and is echoed in the config.
#[tokio::test]
async fn discard_new_per_subject_refuses_a_full_subject() {
    for storage in [stream::StorageType::File, stream::StorageType::Memory] {
        let dir = tmp_dir("dnps");
        let (srv, nc, js) = start(&dir).await;
        let v = api(
            &nc,
            "$JS.API.STREAM.CREATE.X",
            r#"{"name":"X","discard_new_per_subject":true}"#,
        )
        .await;
        assert_eq!(
            v["error"]["description"],
            "discard new per subject requires discard new policy to be set",
            "{v}"
        );
        let v = api(
            &nc,
            "$JS.API.STREAM.CREATE.X",
            r#"{"name":"X","discard":"new","discard_new_per_subject":true}"#,
        )
        .await;
        assert_eq!(v["error"]["err_code"], 10052, "{v}");
        assert_eq!(
            v["error"]["description"], "discard new per subject requires max msgs per subject > 0",
            "{v}"
        );
        let s = js
            .create_stream(stream::Config {
                name: "source".into(),
                subjects: vec!["events.>".into()],
                max_messages: 10,
                max_messages_per_subject: 2,
                discard: stream::DiscardPolicy::New,
                discard_new_per_subject: true,
                storage,
                ..Default::default()
            })
            .await
            .expect("create");
        assert!(s.cached_info().config.discard_new_per_subject);
        assert_eq!(publish(&js, "events.1").await, 1);
        assert_eq!(publish(&js, "events.1").await, 2);
        let err = js
            .publish("events.1", Bytes::from_static(b"data"))
            .await
            .expect("publish")
            .await
            .expect_err("a third message to events.1 is refused");
        let text = err.to_string();
        assert!(
            text.contains("maximum messages per subject exceeded"),
            "{text}"
        );
        assert_eq!(publish(&js, "events.2").await, 3);
        stop(srv, nc, &dir).await;
    }
}

/// jetstream::consumer_configs_sample_frequency, pull_ordered,
/// pull_ordered_recreate_deletes_previous_consumer: nats-server 2.9.10 takes a pull consumer
/// with ack none (an ordered pull consumer is one) unless the stream is a work queue.
#[tokio::test]
async fn pull_consumer_with_ack_none_outside_work_queues() {
    let dir = tmp_dir("acknone");
    let (srv, nc, js) = start(&dir).await;
    let s = events_stream(&js).await;
    for _ in 0..3 {
        publish(&js, "events").await;
    }
    // A raw config without ack_policy (ack none), as the suite sends it.
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.events",
        r#"{"stream_name":"events","config":{"name":"c","sample_freq":"10%"}}"#,
    )
    .await;
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["config"]["ack_policy"], "none", "{v}");
    assert_eq!(v["config"]["sample_freq"], "10%", "{v}");
    // The ordered pull consumer of the client: ack none, delivers everything in order.
    let mut msgs = s
        .create_consumer(consumer::pull::OrderedConfig::default())
        .await
        .expect("ordered pull consumer")
        .messages()
        .await
        .expect("messages");
    for want in 1..=3u64 {
        let m = tokio::time::timeout(T, msgs.next())
            .await
            .expect("message in time")
            .expect("a message")
            .expect("not an error");
        assert_eq!(m.info().expect("info").stream_sequence, want);
    }
    // A work-queue stream still refuses it.
    js.create_stream(stream::Config {
        name: "wq".into(),
        retention: stream::RetentionPolicy::WorkQueue,
        ..Default::default()
    })
    .await
    .expect("create wq");
    let v = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.wq",
        r#"{"stream_name":"wq","config":{"ack_policy":"none"}}"#,
    )
    .await;
    assert_eq!(v["error"]["err_code"], 10084, "{v}");
    stop(srv, nc, &dir).await;
}

/// jetstream::pull_by_bytes, pull_stream_default: consumer info has `delivered.last_active`
/// once something was delivered and `ack_floor.last_active` once an ack moved it, absent
/// before (as nats-server 2.9.10).
#[tokio::test]
async fn consumer_info_last_active_times() {
    let dir = tmp_dir("lastactive");
    let (srv, nc, js) = start(&dir).await;
    let s = events_stream(&js).await;
    publish(&js, "events").await;
    let mut c: consumer::PullConsumer = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("d".into()),
            ..Default::default()
        })
        .await
        .expect("consumer");
    let info = c.info().await.expect("info");
    assert!(info.delivered.last_active.is_none());
    assert!(info.ack_floor.last_active.is_none());
    let m = common::fetch_one(&c).await;
    let info = c.info().await.expect("info");
    assert!(info.delivered.last_active.is_some());
    assert!(info.ack_floor.last_active.is_none());
    m.double_ack().await.expect("ack");
    let info = c.info().await.expect("info");
    assert_eq!(info.ack_floor.stream_sequence, 1);
    assert!(info.ack_floor.last_active.is_some());
    stop(srv, nc, &dir).await;
}

/// jetstream::pull_stream_error: a pull request with a heartbeat but no expiry is answered
/// `400 Bad Request - heartbeat value too large`, before any message (nats-server 2.9.10).
#[tokio::test]
async fn pull_heartbeat_without_expiry_is_refused() {
    let dir = tmp_dir("hbnoexp");
    let (srv, nc, js) = start(&dir).await;
    let s = events_stream(&js).await;
    publish(&js, "events").await;
    s.create_consumer(consumer::pull::Config {
        durable_name: Some("pull".into()),
        ..Default::default()
    })
    .await
    .expect("consumer");
    for body in [
        r#"{"batch":25,"idle_heartbeat":100000000}"#,
        r#"{"batch":1,"no_wait":true,"idle_heartbeat":100000000}"#,
        r#"{"batch":1,"expires":100000000,"idle_heartbeat":100000000}"#,
    ] {
        let m = tokio::time::timeout(
            T,
            nc.request("$JS.API.CONSUMER.MSG.NEXT.events.pull", body.into()),
        )
        .await
        .expect("answer in time")
        .expect("answer");
        assert_eq!(
            m.status.map(|s| s.as_u16()),
            Some(400),
            "{body}: {:?}",
            m.description
        );
        assert_eq!(
            m.description.as_deref(),
            Some("Bad Request - heartbeat value too large"),
            "{body}"
        );
    }
    // Twice the heartbeat fits in the expiry: the message comes (on its own subject, so not
    // through the client's request multiplexer).
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.events.pull",
        inbox,
        r#"{"batch":1,"expires":1000000000,"idle_heartbeat":500000000}"#.into(),
    )
    .await
    .expect("pull request");
    let m = tokio::time::timeout(T, sub.next())
        .await
        .expect("message in time")
        .expect("a message");
    assert_eq!(m.subject.as_str(), "events");
    stop(srv, nc, &dir).await;
}

/// nats-py PullSubscribeTest::test_fetch_heartbeats: a pull request past its expiry is never
/// served, even before the timer gets to it — the message published just after goes to no
/// one: the request gets its `408 Request Timeout` and the message waits for the next request
/// (a client that timed out would otherwise find it in its queue later).
#[tokio::test]
async fn an_expired_pull_request_is_not_served() {
    let dir = tmp_dir("expired");
    let (srv, nc, js) = start(&dir).await;
    let s = events_stream(&js).await;
    s.create_consumer(consumer::pull::Config {
        durable_name: Some("pull".into()),
        ..Default::default()
    })
    .await
    .expect("consumer");
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.events.pull",
        inbox.clone(),
        r#"{"batch":1,"expires":2000000}"#.into(),
    )
    .await
    .expect("pull request");
    nc.flush().await.expect("flush");
    // Past the request's 2 ms, well within the engine's 25 ms timer period.
    tokio::time::sleep(Duration::from_millis(5)).await;
    publish(&js, "events").await;
    let m = next_msg(&mut sub).await;
    assert_eq!(
        m.status.map(|s| s.as_u16()),
        Some(408),
        "got {:?} {:?}",
        m.subject,
        m.payload
    );
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.events.pull",
        inbox,
        r#"{"batch":1,"expires":1000000000}"#.into(),
    )
    .await
    .expect("pull request");
    let m = next_msg(&mut sub).await;
    assert_eq!(m.subject.as_str(), "events");
    stop(srv, nc, &dir).await;
}

/// jetstream::stream_subjects: STREAM.INFO with `subjects_filter` pages the subjects by
/// 100 000 in subject order from `offset`, with `total`/`offset`/`limit`.
#[tokio::test]
async fn stream_info_pages_subjects() {
    let dir = tmp_dir("subjpages");
    let (srv, nc, js) = start(&dir).await;
    let s = js
        .create_stream(stream::Config {
            name: "events".into(),
            subjects: vec!["events.>".into()],
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .expect("create");
    // More subjects than one page, published without waiting for each ack.
    const SUBJECTS: usize = 100_005;
    let mut acks = Vec::with_capacity(1000);
    for i in 0..SUBJECTS {
        acks.push(
            js.publish(format!("events.{i:06}"), Bytes::new())
                .await
                .expect("publish"),
        );
        if acks.len() == 1000 {
            for a in acks.drain(..) {
                a.await.expect("ack");
            }
        }
    }
    for a in acks.drain(..) {
        a.await.expect("ack");
    }
    let v = api(
        &nc,
        "$JS.API.STREAM.INFO.events",
        r#"{"subjects_filter":"events.>"}"#,
    )
    .await;
    assert_eq!(v["total"], SUBJECTS, "{}", v["state"]["messages"]);
    assert_eq!(v["offset"], 0);
    assert_eq!(v["limit"], 100_000);
    let page = v["state"]["subjects"].as_object().expect("subjects");
    assert_eq!(page.len(), 100_000);
    assert!(page.contains_key("events.000000"));
    assert!(!page.contains_key("events.100000"));
    let v = api(
        &nc,
        "$JS.API.STREAM.INFO.events",
        r#"{"subjects_filter":"events.>","offset":100000}"#,
    )
    .await;
    assert_eq!(v["offset"], 100_000);
    let page = v["state"]["subjects"].as_object().expect("subjects");
    let keys: Vec<&String> = page.keys().collect();
    assert_eq!(keys.len(), 5);
    assert_eq!(keys[0], "events.100000");
    // The client walks the pages.
    let info = s
        .info_with_subjects("events.>")
        .await
        .expect("info with subjects");
    assert_eq!(info.count().await, SUBJECTS);
    // No match: zeros and no subjects.
    let v = api(
        &nc,
        "$JS.API.STREAM.INFO.events",
        r#"{"subjects_filter":"other"}"#,
    )
    .await;
    assert_eq!(
        (v["total"].clone(), v["limit"].clone()),
        (0.into(), 0.into())
    );
    assert!(v["state"].get("subjects").is_none());
    stop(srv, nc, &dir).await;
}

/// jetstream::republish, kv::republish, kv::republish_headers_handling: a stream's
/// `republish` sends each stored message matching `src` to `dest` (wildcards mapped) with
/// Nats-Stream/Subject/Sequence/Last-Sequence (the subject's previous sequence) headers after
/// its own, before the PubAck; with
/// `headers_only` the payload goes and Nats-Msg-Size says its length. The config checks and
/// the echoed config are nats-server 2.9.10's.
#[tokio::test]
async fn republish_sends_stored_messages_on() {
    let dir = tmp_dir("republish");
    let (srv, nc, js) = start(&dir).await;
    for (cfg, err) in [
        (
            r#"{"name":"X","subjects":["x.>"],"republish":{"src":"x.*","dest":"y.>"}}"#,
            "stream configuration for republish not valid",
        ),
        (
            r#"{"name":"X","subjects":["x.>"],"republish":{"src":">","dest":"x.y.>"}}"#,
            "stream configuration for republish destination forms a cycle",
        ),
        (
            r#"{"name":"X","subjects":["x.>"],"republish":{"src":"zz.>","dest":"y.>"}}"#,
            "stream configuration for republish source is not valid subset of subjects",
        ),
    ] {
        let v = api(&nc, "$JS.API.STREAM.CREATE.X", cfg).await;
        assert_eq!(v["error"]["err_code"], 10052, "{cfg}: {v}");
        assert_eq!(v["error"]["description"], err, "{cfg}");
    }
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.R",
        r#"{"name":"R","subjects":["r.>"],"republish":{"dest":"rp.>"}}"#,
    )
    .await;
    assert_eq!(
        v["config"]["republish"],
        serde_json::json!({"src": ">", "dest": "rp.>"}),
        "{v}"
    );
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.H",
        r#"{"name":"H","subjects":["h.>"],"republish":{"src":"h.>","dest":"hp.>","headers_only":true}}"#,
    )
    .await;
    assert!(v.get("error").is_none(), "{v}");
    let mut sub = nc.subscribe("rp.>").await.expect("subscribe");
    let mut hsub = nc.subscribe("hp.>").await.expect("subscribe");
    nc.flush().await.expect("flush");
    publish(&js, "r.a").await;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Foo", "bar");
    js.publish_with_headers("r.b", headers, Bytes::from_static(b"two"))
        .await
        .expect("publish")
        .await
        .expect("ack");
    publish(&js, "h.x").await;
    let m = next_msg(&mut sub).await;
    assert_eq!(m.subject.as_str(), "rp.r.a");
    assert_eq!(&m.payload[..], b"data");
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Nats-Stream").map(|v| v.as_str()), Some("R"));
    assert_eq!(h.get("Nats-Subject").map(|v| v.as_str()), Some("r.a"));
    assert_eq!(h.get("Nats-Sequence").map(|v| v.as_str()), Some("1"));
    assert_eq!(h.get("Nats-Last-Sequence").map(|v| v.as_str()), Some("0"));
    let m = next_msg(&mut sub).await;
    assert_eq!(m.subject.as_str(), "rp.r.b");
    assert_eq!(&m.payload[..], b"two");
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Foo").map(|v| v.as_str()), Some("bar"));
    assert_eq!(h.get("Nats-Sequence").map(|v| v.as_str()), Some("2"));
    // The subject's previous sequence (r.b had none), not the stream's.
    assert_eq!(h.get("Nats-Last-Sequence").map(|v| v.as_str()), Some("0"));
    let m = next_msg(&mut hsub).await;
    assert_eq!(m.subject.as_str(), "hp.x");
    assert!(m.payload.is_empty());
    let h = m.headers.expect("headers");
    assert_eq!(h.get("Nats-Msg-Size").map(|v| v.as_str()), Some("4"));
    // Republished into another stream, as a KV bucket fed by republish is.
    js.create_stream(stream::Config {
        name: "KV_test".into(),
        subjects: vec!["$KV.test.>".into()],
        max_messages_per_subject: 10,
        ..Default::default()
    })
    .await
    .expect("kv stream");
    let v = api(
        &nc,
        "$JS.API.STREAM.CREATE.A",
        r#"{"name":"A","subjects":["A.>"],"republish":{"src":"A.>","dest":"$KV.test.>"}}"#,
    )
    .await;
    assert!(v.get("error").is_none(), "{v}");
    publish(&js, "A.orange").await;
    let kv = js.get_key_value("test").await.expect("kv");
    common::wait_for("the republished key", || {
        let kv = kv.clone();
        async move { kv.entry("orange").await.ok().flatten().is_some() }
    })
    .await;
    let e = kv.entry("orange").await.expect("entry").expect("some");
    assert_eq!(e.revision, 1);
    assert_eq!(&e.value[..], b"data");
    stop(srv, nc, &dir).await;
}
