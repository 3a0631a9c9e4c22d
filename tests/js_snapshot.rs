//! Stream snapshot and restore (`$JS.API.STREAM.SNAPSHOT` / `$JS.API.STREAM.RESTORE`), driven
//! as a client drives them with core NATS (async-nats has no snapshot API): chunks acked one
//! by one, an empty message at the end; restore chunks sent as requests, an empty one last.
//! The wire follows nats-server 2.9.10 (docs/nats-server-behaviour.md §14); the snapshot
//! data is natsd's own format (docs/jetstream-filestore.md).

mod common;

use bytes::Bytes;
use common::js_api as api;
use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// Snapshot `stream` to a fresh inbox, acking every chunk: (answer, data, chunks).
async fn snapshot(nc: &async_nats::Client, stream: &str, extra: &str) -> (Value, Vec<u8>, usize) {
    let deliver = nc.new_inbox();
    let mut sub = nc.subscribe(deliver.clone()).await.expect("subscribe");
    nc.flush().await.expect("flush");
    let body = format!(r#"{{"deliver_subject":"{deliver}"{extra}}}"#);
    let answer = api(nc, &format!("$JS.API.STREAM.SNAPSHOT.{stream}"), &body).await;
    assert!(answer.get("error").is_none(), "{answer}");
    let (mut data, mut chunks) = (Vec::new(), 0);
    loop {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("a chunk in time")
            .expect("subscription open");
        if m.payload.is_empty() {
            assert!(m.reply.is_none(), "the end has no reply subject");
            break;
        }
        let reply = m.reply.expect("chunks carry an ack subject");
        let t: Vec<&str> = reply.split('.').collect();
        assert_eq!(&t[..4], ["$JS", "SNAPSHOT", "ACK", stream], "{reply}");
        assert_eq!(t[5], m.payload.len().to_string(), "{reply}");
        chunks += 1;
        assert_eq!(t[6], chunks.to_string(), "{reply}");
        data.extend_from_slice(&m.payload);
        nc.publish(reply, Bytes::new()).await.expect("ack");
    }
    (answer, data, chunks)
}

/// Ask to restore `stream` with `cfg`: the subject to send the chunks to.
async fn start_restore(nc: &async_nats::Client, stream: &str, cfg: &Value) -> String {
    let body = serde_json::json!({ "config": cfg, "state": {} }).to_string();
    let r = api(nc, &format!("$JS.API.STREAM.RESTORE.{stream}"), &body).await;
    let t = "io.nats.jetstream.api.v1.stream_restore_response";
    assert_eq!(r["type"], t, "{r}");
    let ds = r["deliver_subject"].as_str().expect("deliver subject");
    let prefix = format!("$JS.SNAPSHOT.RESTORE.{stream}.");
    assert!(ds.starts_with(&prefix), "{r}");
    ds.to_string()
}

/// Restore `data` as `stream` with `cfg` in chunks of `chunk` bytes: the final answer.
async fn restore(
    nc: &async_nats::Client,
    stream: &str,
    cfg: &Value,
    data: &[u8],
    chunk: usize,
) -> Value {
    let ds = start_restore(nc, stream, cfg).await;
    for c in data.chunks(chunk) {
        let m = tokio::time::timeout(WAIT, nc.request(ds.clone(), Bytes::copy_from_slice(c)))
            .await
            .expect("chunk answered in time")
            .expect("chunk answered");
        assert!(m.payload.is_empty(), "a chunk's ack is empty");
    }
    let m = tokio::time::timeout(WAIT, nc.request(ds, Bytes::new()))
        .await
        .expect("final answer in time")
        .expect("final answer");
    serde_json::from_slice(&m.payload).expect("final answer is JSON")
}

/// A request's answer as text (to compare with nats-server's bytes).
async fn api_text(nc: &async_nats::Client, subject: &str, body: &str) -> String {
    let m = tokio::time::timeout(
        WAIT,
        nc.request(subject.to_string(), body.to_string().into()),
    )
    .await
    .expect("answer in time")
    .expect("answer");
    String::from_utf8(m.payload.to_vec()).expect("UTF-8 answer")
}

async fn create(nc: &async_nats::Client, cfg: &Value) {
    let name = cfg["name"].as_str().expect("name");
    let r = api(
        nc,
        &format!("$JS.API.STREAM.CREATE.{name}"),
        &cfg.to_string(),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
}

/// Ten messages on `<p>.<n>` (every third with a header), 3, 7 and 10 deleted, and a durable
/// pull consumer `D` that was given 1, 2, 4, 5 and acked 1, 2, 4.
async fn fill(nc: &async_nats::Client, stream: &str, p: &str) {
    for i in 1..=10 {
        let subject = format!("{p}.{}", i % 4);
        let ack = if i % 3 == 0 {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", format!("id{i}").as_str());
            h.insert("X-Test", "yes");
            nc.request_with_headers(subject, h, format!("m{i}").into())
                .await
        } else {
            nc.request(subject, format!("m{i}").into()).await
        };
        assert!(ack.is_ok(), "publish {i}");
    }
    for seq in [3, 7, 10] {
        let d = api(
            nc,
            &format!("$JS.API.STREAM.MSG.DELETE.{stream}"),
            &format!(r#"{{"seq":{seq},"no_erase":true}}"#),
        )
        .await;
        assert_eq!(d["success"], true, "{d}");
    }
    let c = api(
        nc,
        &format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.D"),
        &format!(
            r#"{{"stream_name":"{stream}","config":{{"durable_name":"D","ack_policy":"explicit"}}}}"#
        ),
    )
    .await;
    assert!(c.get("error").is_none(), "{c}");
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(
        format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.D"),
        inbox,
        r#"{"batch":4,"expires":5000000000}"#.into(),
    )
    .await
    .expect("pull");
    for i in 0..4 {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("pulled in time")
            .expect("open");
        if i < 3 {
            let reply = m.reply.expect("ack subject");
            nc.publish(reply, "+ACK".into()).await.expect("ack");
        }
    }
    let info_subject = format!("$JS.API.CONSUMER.INFO.{stream}.D");
    common::wait_for("acks applied", || async {
        api(nc, &info_subject, "").await["num_ack_pending"] == 1
    })
    .await;
}

/// What must survive a snapshot and restore: stream config, created, state, every message,
/// the consumer's config and progress.
async fn picture(nc: &async_nats::Client, stream: &str) -> Vec<Value> {
    let mut info = api(nc, &format!("$JS.API.STREAM.INFO.{stream}"), "").await;
    assert!(info.get("error").is_none(), "{info}");
    let mut out = vec![
        info["config"].take(),
        info["created"].take(),
        info["state"].take(),
    ];
    let last = out[2]["last_seq"].as_u64().expect("last_seq");
    for seq in 1..=last {
        let m = api(
            nc,
            &format!("$JS.API.STREAM.MSG.GET.{stream}"),
            &format!(r#"{{"seq":{seq}}}"#),
        )
        .await;
        out.push(m);
    }
    let mut c = api(nc, &format!("$JS.API.CONSUMER.INFO.{stream}.D"), "").await;
    assert!(c.get("error").is_none(), "{c}");
    for k in [
        "config",
        "created",
        "num_ack_pending",
        "num_pending",
        "num_redelivered",
    ] {
        out.push(c[k].take());
    }
    for k in ["delivered", "ack_floor"] {
        out.push(c[k]["consumer_seq"].take());
        out.push(c[k]["stream_seq"].take());
    }
    out
}

async fn round_trip(storage: &str) {
    let (srv, nc, dir) = common::start_js(&format!("snap-{storage}")).await;
    let stream = format!("R{storage}");
    let cfg = serde_json::json!({"name": stream, "subjects": [format!("{storage}.>")], "storage": storage});
    create(&nc, &cfg).await;
    fill(&nc, &stream, storage).await;
    let before = picture(&nc, &stream).await;
    assert_eq!(before[2]["num_deleted"], 3, "{}", before[2]);
    let (answer, data, chunks) = snapshot(&nc, &stream, r#","chunk_size":256"#).await;
    assert_eq!(
        answer["type"],
        "io.nats.jetstream.api.v1.stream_snapshot_response"
    );
    assert_eq!(answer["config"], before[0]);
    assert_eq!(answer["state"], before[2]);
    assert!(
        chunks > 1,
        "chunk_size 256 gives several chunks for {} bytes",
        data.len()
    );
    assert!(
        data.chunks(256).len() == chunks,
        "chunks of exactly chunk_size"
    );
    let d = api(&nc, &format!("$JS.API.STREAM.DELETE.{stream}"), "").await;
    assert_eq!(d["success"], true, "{d}");
    let done = restore(&nc, &stream, &cfg, &data, 100).await;
    assert_eq!(
        done["type"], "io.nats.jetstream.api.v1.stream_create_response",
        "{done}"
    );
    assert!(done.get("error").is_none(), "{done}");
    assert_eq!(done["state"], before[2], "{done}");
    assert_eq!(picture(&nc, &stream).await, before);
    // The restored stream takes new messages after its last sequence.
    let a = api(&nc, &format!("{storage}.new"), "x").await;
    assert_eq!(a["seq"], 11, "{a}");
    // Restoring over an existing stream is refused (nats-server 2.9.10's answer).
    let again = api_text(
        &nc,
        &format!("$JS.API.STREAM.RESTORE.{stream}"),
        &serde_json::json!({ "config": cfg }).to_string(),
    )
    .await;
    assert_eq!(
        again,
        r#"{"type":"io.nats.jetstream.api.v1.stream_restore_response","error":{"code":400,"err_code":10130,"description":"stream name already in use, cannot restore"},"deliver_subject":""}"#
    );
    if storage == "file" {
        let purge_new = api(
            &nc,
            &format!("$JS.API.STREAM.MSG.DELETE.{stream}"),
            r#"{"seq":11,"no_erase":true}"#,
        )
        .await;
        assert_eq!(purge_new["success"], true, "{purge_new}");
        let now = picture(&nc, &stream).await;
        drop(nc);
        srv.shutdown().await;
        let (srv, nc) = common::start_js_in(&dir).await;
        assert_eq!(picture(&nc, &stream).await, now, "after a restart");
        srv.shutdown().await;
    } else {
        srv.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn file_stream_round_trip_keeps_messages_gaps_and_consumer() {
    round_trip("file").await;
}

#[tokio::test]
async fn memory_stream_round_trip_keeps_messages_gaps_and_consumer() {
    round_trip("memory").await;
}

#[tokio::test]
async fn snapshot_errors_as_nats_server() {
    let (srv, nc, dir) = common::start_js("snap-errors").await;
    let t = "{\"type\":\"io.nats.jetstream.api.v1.stream_snapshot_response\",\"error\":";
    let err = |v: String| v.strip_prefix(t).unwrap_or(&v).to_string();
    let missing = api_text(
        &nc,
        "$JS.API.STREAM.SNAPSHOT.NOPE",
        r#"{"deliver_subject":"x"}"#,
    )
    .await;
    assert_eq!(
        missing,
        r#"{"type":"io.nats.jetstream.api.v1.stream_snapshot_response","error":{"code":404,"err_code":10059,"description":"stream not found"}}"#
    );
    create(&nc, &serde_json::json!({"name": "E", "subjects": ["e"]})).await;
    let empty = api_text(&nc, "$JS.API.STREAM.SNAPSHOT.E", "").await;
    assert_eq!(
        err(empty),
        r#"{"code":400,"err_code":10003,"description":"bad request"}}"#
    );
    for bad in ["{bad", "  "] {
        let bad = api(&nc, "$JS.API.STREAM.SNAPSHOT.E", bad).await;
        assert_eq!(bad["error"]["err_code"], 10025, "{bad}");
    }
    let no_deliver = api_text(&nc, "$JS.API.STREAM.SNAPSHOT.E", r#"{"no_consumers":true}"#).await;
    assert_eq!(
        err(no_deliver),
        r#"{"code":400,"err_code":10015,"description":"deliver subject not valid"}}"#
    );
    // Nobody listens on the deliver subject: the snapshot waits up to 2 s for interest, so a
    // second one meanwhile finds it in progress.
    let first = api(
        &nc,
        "$JS.API.STREAM.SNAPSHOT.E",
        r#"{"deliver_subject":"nobody.here"}"#,
    )
    .await;
    assert!(first.get("error").is_none(), "{first}");
    let second = api_text(
        &nc,
        "$JS.API.STREAM.SNAPSHOT.E",
        r#"{"deliver_subject":"other"}"#,
    )
    .await;
    assert_eq!(
        err(second),
        r#"{"code":500,"err_code":10064,"description":"snapshot failed: snapshot in progress"}}"#
    );
    let empty = api_text(&nc, "$JS.API.STREAM.RESTORE.X", "").await;
    assert_eq!(
        empty,
        r#"{"type":"io.nats.jetstream.api.v1.stream_restore_response","error":{"code":400,"err_code":10003,"description":"bad request"},"deliver_subject":""}"#
    );
    let bad = api(&nc, "$JS.API.STREAM.RESTORE.X", "{x").await;
    assert_eq!(bad["error"]["err_code"], 10025, "{bad}");
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A restore that fails leaves no stream and no staging files behind.
async fn assert_refused(
    nc: &async_nats::Client,
    dir: &std::path::Path,
    answer: &Value,
    text: &str,
) {
    assert_eq!(
        answer["type"], "io.nats.jetstream.api.v1.stream_create_response",
        "{answer}"
    );
    assert_eq!(answer["error"]["code"], 500, "{answer}");
    assert_eq!(answer["error"]["err_code"], 10062, "{answer}");
    let d = answer["error"]["description"].as_str().unwrap_or_default();
    assert!(
        d.starts_with("restore failed: ") && d.contains(text),
        "{answer}"
    );
    let info = api(nc, "$JS.API.STREAM.INFO.C", "").await;
    assert_eq!(info["error"]["err_code"], 10059, "{info}");
    let staging = dir.join("jetstream").join("$G").join("__restore__");
    let left = std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0);
    assert_eq!(left, 0, "staging files left in {}", staging.display());
}

#[tokio::test]
async fn corrupt_truncated_or_foreign_data_is_refused_and_nothing_is_left() {
    let (srv, nc, dir) = common::start_js("snap-corrupt").await;
    let cfg = serde_json::json!({"name": "C", "subjects": ["c.>"]});
    create(&nc, &cfg).await;
    for i in 0..50 {
        let a = api(&nc, &format!("c.{i}"), &"x".repeat(100)).await;
        assert!(a.get("seq").is_some(), "{a}");
    }
    let (_, data, _) = snapshot(&nc, "C", "").await;
    let d = api(&nc, "$JS.API.STREAM.DELETE.C", "").await;
    assert_eq!(d["success"], true, "{d}");

    let mut flipped = data.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x55;
    let a = restore(&nc, "C", &cfg, &flipped, 1000).await;
    assert_refused(&nc, &dir, &a, "snapshot corrupt").await;

    let a = restore(&nc, "C", &cfg, &data[..data.len() - 7], 1000).await;
    assert_refused(&nc, &dir, &a, "truncated").await;

    let a = restore(&nc, "C", &cfg, b"this is not a snapshot at all", 1000).await;
    assert_refused(&nc, &dir, &a, "bad magic").await;

    let a = restore(&nc, "C", &cfg, &[], 1000).await;
    assert_refused(&nc, &dir, &a, "truncated").await;

    // The snapshot's stream name must be the restored one (nats-server's check).
    let other = serde_json::json!({"name": "C2", "subjects": ["c2"]});
    let a = restore(&nc, "C2", &other, &data, 1000).await;
    assert_eq!(
        a["error"]["description"], "restore failed: stream names do not match",
        "{a}"
    );

    // The intact data still restores.
    let a = restore(&nc, "C", &cfg, &data, 4096).await;
    assert_eq!(a["state"]["messages"], 50, "{a}");
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stream `name` (subject: its name in lower case) with one message, snapshot without
/// consumers, then deleted: (its config, the snapshot).
async fn one_message_snapshot(nc: &async_nats::Client, name: &str) -> (Value, Vec<u8>) {
    let cfg = serde_json::json!({"name": name, "subjects": [name.to_lowercase()]});
    create(nc, &cfg).await;
    let a = api(nc, &name.to_lowercase(), "x").await;
    assert_eq!(a["seq"], 1, "{a}");
    let (_, data, _) = snapshot(nc, name, r#","no_consumers":true"#).await;
    let d = api(nc, &format!("$JS.API.STREAM.DELETE.{name}"), "").await;
    assert_eq!(d["success"], true, "{d}");
    (cfg, data)
}

#[tokio::test]
async fn restore_checks_the_config_at_the_end_and_a_chunk_without_reply_drops_it() {
    let (srv, nc, dir) = common::start_js("snap-config").await;
    let (cfg, data) = one_message_snapshot(&nc, "K").await;
    let bad = serde_json::json!({"name": "K", "subjects": ["k"], "num_replicas": 3});
    let a = restore(&nc, "K", &bad, &data, 1000).await;
    assert_eq!(a["error"]["err_code"], 10074, "{a}");
    create(&nc, &serde_json::json!({"name": "O", "subjects": ["k"]})).await;
    let a = restore(&nc, "K", &cfg, &data, 1000).await;
    assert_eq!(a["error"]["err_code"], 10065, "{a}");

    // A chunk without a reply subject ends the restore: the next chunk has no responder.
    let ds = start_restore(&nc, "K", &cfg).await;
    nc.publish(ds.clone(), Bytes::copy_from_slice(&data))
        .await
        .expect("publish");
    nc.flush().await.expect("flush");
    common::wait_for("the restore subscription withdrawn", || async {
        matches!(
            nc.request(ds.clone(), Bytes::new()).await,
            Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders
        )
    })
    .await;
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Count the messages of a snapshot with the library's decoder.
fn messages_in(data: &[u8]) -> usize {
    use natsd::jetstream::snapshot::{Decoder, Item};
    let mut d = Decoder::new();
    d.feed(data);
    let mut n = 0;
    while let Some(item) = d.next_item().expect("a valid snapshot") {
        n += usize::from(matches!(item, Item::Msg(_)));
    }
    d.finish().expect("a complete snapshot");
    n
}

#[tokio::test]
async fn unacked_snapshot_still_ends_and_a_reader_leaving_stops_it() {
    let (srv, nc, dir) = common::start_js("snap-window").await;
    create(&nc, &serde_json::json!({"name": "L", "subjects": ["l"]})).await;
    // 12 MB: more than the 8 MiB window.
    let payload = Bytes::from(vec![b'z'; 100_000]);
    for _ in 0..120 {
        let a = nc.request("l", payload.clone()).await.expect("stored");
        assert!(!a.payload.is_empty());
    }
    // A reader that never acks: past the window the chunks come one per tick, to the end.
    let deliver = nc.new_inbox();
    let mut sub = nc.subscribe(deliver.clone()).await.expect("subscribe");
    nc.flush().await.expect("flush");
    let body = format!(r#"{{"deliver_subject":"{deliver}"}}"#);
    let a = api(&nc, "$JS.API.STREAM.SNAPSHOT.L", &body).await;
    assert!(a.get("error").is_none(), "{a}");
    let mut data = Vec::new();
    loop {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .expect("chunk in time")
            .expect("open");
        if m.payload.is_empty() {
            break;
        }
        data.extend_from_slice(&m.payload);
    }
    assert_eq!(messages_in(&data), 120);
    drop(sub);

    // A reader that goes away: the snapshot ends, and the next one may start.
    let deliver = nc.new_inbox();
    let mut sub = nc.subscribe(deliver.clone()).await.expect("subscribe");
    nc.flush().await.expect("flush");
    let body = format!(r#"{{"deliver_subject":"{deliver}","chunk_size":65536}}"#);
    let a = api(&nc, "$JS.API.STREAM.SNAPSHOT.L", &body).await;
    assert!(a.get("error").is_none(), "{a}");
    let first = tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a chunk");
    assert!(first.is_some());
    sub.unsubscribe().await.expect("unsubscribe");
    drop(sub);
    nc.flush().await.expect("flush");
    let listener = nc.new_inbox();
    let _keep = nc.subscribe(listener.clone()).await.expect("subscribe");
    let body = format!(r#"{{"deliver_subject":"{listener}"}}"#);
    common::wait_for("the abandoned snapshot over", || async {
        api(&nc, "$JS.API.STREAM.SNAPSHOT.L", &body)
            .await
            .get("error")
            .is_none()
    })
    .await;
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn stalled_restore_is_dropped_with_its_staging_files() {
    let (srv, nc, dir) = common::start_js("snap-stall").await;
    let (cfg, data) = one_message_snapshot(&nc, "W").await;
    let ds = start_restore(&nc, "W", &cfg).await;
    // All but the end: the head is in, so the staging directory exists.
    let half = Bytes::copy_from_slice(&data[..data.len() - 5]);
    let ack = nc.request(ds.clone(), half).await.expect("chunk acked");
    assert!(ack.payload.is_empty());
    let staging = dir.join("jetstream").join("$G").join("__restore__");
    assert_eq!(
        std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0),
        1
    );
    // Nothing more for five seconds: the restore goes, without an answer.
    let started = std::time::Instant::now();
    common::wait_for("the stalled restore dropped", || async {
        std::fs::read_dir(&staging).map(|d| d.count()).unwrap_or(0) == 0
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let late = nc.request(ds, Bytes::new()).await;
    assert!(
        matches!(&late, Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders),
        "{late:?}"
    );
    let info = api(&nc, "$JS.API.STREAM.INFO.W", "").await;
    assert_eq!(info["error"]["err_code"], 10059, "{info}");
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_file_snapshot_restores_as_a_memory_stream_with_the_requests_config() {
    // nats-server 2.9.10 gives an empty memory stream here; natsd's snapshots do not depend
    // on the store, and the request's config is the restored stream's identity.
    let (srv, nc, dir) = common::start_js("snap-to-memory").await;
    let (mut cfg, data) = one_message_snapshot(&nc, "M").await;
    cfg["storage"] = "memory".into();
    cfg["max_msgs"] = 5.into();
    let a = restore(&nc, "M", &cfg, &data, 64).await;
    assert_eq!(a["config"]["storage"], "memory", "{a}");
    assert_eq!(a["config"]["max_msgs"], 5, "{a}");
    assert_eq!(a["state"]["messages"], 1, "{a}");
    let m = api(&nc, "$JS.API.STREAM.MSG.GET.M", r#"{"seq":1}"#).await;
    assert_eq!(m["message"]["subject"], "m", "{m}");
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_restored_mirror_goes_on_after_what_it_holds() {
    let (srv, nc, dir) = common::start_js("snap-mirror").await;
    create(
        &nc,
        &serde_json::json!({"name": "ORIG", "subjects": ["orig"]}),
    )
    .await;
    for _ in 0..3 {
        let a = api(&nc, "orig", "x").await;
        assert!(a.get("seq").is_some(), "{a}");
    }
    let cfg = serde_json::json!({"name": "MIR", "mirror": {"name": "ORIG"}});
    create(&nc, &cfg).await;
    let state = |nc: async_nats::Client| async move {
        api(&nc, "$JS.API.STREAM.INFO.MIR", "").await["state"].take()
    };
    common::wait_for("the mirror copied", || async {
        state(nc.clone()).await["messages"] == 3
    })
    .await;
    let (_, data, _) = snapshot(&nc, "MIR", "").await;
    let d = api(&nc, "$JS.API.STREAM.DELETE.MIR", "").await;
    assert_eq!(d["success"], true, "{d}");
    let a = restore(&nc, "MIR", &cfg, &data, 512).await;
    assert_eq!(a["state"]["messages"], 3, "{a}");
    let a = api(&nc, "orig", "y").await;
    assert_eq!(a["seq"], 4, "{a}");
    common::wait_for("the restored mirror copied the new one", || async {
        state(nc.clone()).await["last_seq"] == 4
    })
    .await;
    assert_eq!(state(nc.clone()).await["messages"], 4);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// natsd's limit (nats-server 2.9.10 restored 20 KB into `max_file_store: 8000`): the chunk
/// that passes the account's storage limit gets the final answer, 503 10023.
#[tokio::test]
async fn a_restore_over_the_storage_limit_is_refused_at_once() {
    let (srv, nc, dir) = common::start_js("snap-limit-src").await;
    let cfg = serde_json::json!({"name": "BIG", "subjects": ["big"]});
    create(&nc, &cfg).await;
    for _ in 0..20 {
        let a = api(&nc, "big", &"b".repeat(1000)).await;
        assert!(a.get("seq").is_some(), "{a}");
    }
    let (_, data, _) = snapshot(&nc, "BIG", "").await;
    srv.shutdown().await;
    let small = common::js_dir("snap-limit-dst");
    let limited = common::start(natsd::Options {
        jetstream: Some(natsd::config::JetStreamOpts {
            store_dir: Some(small.clone()),
            max_file_store: Some(8_000),
            ..Default::default()
        }),
        ..natsd::Options::local()
    })
    .await;
    let nc = async_nats::connect(limited.client_url())
        .await
        .expect("connect");
    let ds = start_restore(&nc, "BIG", &cfg).await;
    let mut answer = None;
    for c in data.chunks(1000) {
        let m = nc
            .request(ds.clone(), Bytes::copy_from_slice(c))
            .await
            .expect("chunk answered");
        if !m.payload.is_empty() {
            answer = Some(String::from_utf8_lossy(&m.payload).into_owned());
            break;
        }
    }
    assert_eq!(
        answer.as_deref(),
        Some(
            r#"{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":503,"err_code":10023,"description":"insufficient resources"}}"#
        )
    );
    let info = api(&nc, "$JS.API.STREAM.INFO.BIG", "").await;
    assert_eq!(info["error"]["err_code"], 10059, "{info}");
    limited.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&small);
}

/// natsd's rule: a restore counts against the account's limits as a stream create does —
/// at `max_streams` it is refused (10027) and nothing is installed; with room it goes in.
#[tokio::test]
async fn a_restore_counts_against_the_accounts_stream_limit() {
    let (srv, nc, dir) = common::start_js("snap-acct-src").await;
    let (cfg, data) = one_message_snapshot(&nc, "ONE").await;
    srv.shutdown().await;
    let dst = common::js_dir("snap-acct-dst");
    let conf = format!(
        "jetstream {{ store_dir: {:?} }}\naccounts {{ A {{ jetstream {{ max_streams: 1 }}\n  \
         users [{{user: a, password: a}}] }} }}\n",
        dst.display().to_string()
    );
    let mut o = natsd::config::file::load_str(&conf)
        .unwrap_or_else(|e| panic!("config loads: {e}"))
        .options;
    o.host = "127.0.0.1".into();
    o.port = 0;
    let limited = common::start(o).await;
    let nc = async_nats::ConnectOptions::with_user_and_password("a".into(), "a".into())
        .connect(limited.client_url())
        .await
        .expect("connect");
    create(
        &nc,
        &serde_json::json!({"name": "OTHER", "subjects": ["other"]}),
    )
    .await;
    let answer = restore(&nc, "ONE", &cfg, &data, 1000).await;
    assert_eq!(
        answer["error"],
        serde_json::json!({"code": 400, "err_code": 10027, "description": "maximum number of streams reached"}),
        "{answer}"
    );
    let info = api(&nc, "$JS.API.STREAM.INFO.ONE", "").await;
    assert_eq!(info["error"]["err_code"], 10059, "{info}");
    let d = api(&nc, "$JS.API.STREAM.DELETE.OTHER", "").await;
    assert_eq!(d["success"], true, "{d}");
    let answer = restore(&nc, "ONE", &cfg, &data, 1000).await;
    assert_eq!(answer["state"]["messages"], 1, "{answer}");
    drop(nc);
    limited.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dst);
}

/// nats-server 2.9's advisories around a snapshot and a restore: snapshot create (with the
/// stream's state) and complete, restore create, the restored stream's creation, and restore
/// complete with the bytes received; each names the client's account.
#[tokio::test]
async fn snapshot_and_restore_send_their_advisories() {
    let (srv, nc, dir) = common::start_js("snap-advisories").await;
    let mut adv = nc
        .subscribe("$JS.EVENT.ADVISORY.STREAM.>")
        .await
        .expect("subscribe");
    nc.flush().await.expect("flush");
    let (cfg, data) = one_message_snapshot(&nc, "V").await;
    let done = restore(&nc, "V", &cfg, &data, 64).await;
    assert!(done.get("error").is_none(), "{done}");
    let mut seen: Vec<(String, Value)> = Vec::new();
    while !seen
        .iter()
        .any(|(s, _)| s == "$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.V")
    {
        let m = tokio::time::timeout(WAIT, adv.next())
            .await
            .unwrap_or_else(|_| panic!("advisories so far: {seen:#?}"))
            .expect("subscription open");
        let v = serde_json::from_slice(&m.payload).expect("JSON advisory");
        seen.push((m.subject.to_string(), v));
    }
    let subjects: Vec<&str> = seen.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        subjects,
        [
            "$JS.EVENT.ADVISORY.STREAM.CREATED.V",
            "$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_CREATE.V",
            "$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE.V",
            "$JS.EVENT.ADVISORY.STREAM.DELETED.V",
            "$JS.EVENT.ADVISORY.STREAM.RESTORE_CREATE.V",
            "$JS.EVENT.ADVISORY.STREAM.CREATED.V",
            "$JS.EVENT.ADVISORY.STREAM.RESTORE_COMPLETE.V",
        ]
    );
    let v = |i: usize| &seen[i].1;
    let t = "io.nats.jetstream.advisory.v1";
    assert_eq!(v(1)["type"], format!("{t}.snapshot_create"));
    assert_eq!(v(1)["state"]["messages"], 1, "{}", v(1));
    assert_eq!(v(2)["type"], format!("{t}.snapshot_complete"));
    for k in ["start", "end"] {
        assert!(
            v(2)[k].as_str().is_some_and(|t| t.ends_with('Z')),
            "{}",
            v(2)
        );
    }
    assert_eq!(v(4)["type"], format!("{t}.restore_create"));
    assert_eq!(v(6)["type"], format!("{t}.restore_complete"));
    assert_eq!(v(6)["bytes"], data.len(), "{}", v(6));
    for i in [1, 2, 4, 6] {
        assert_eq!(v(i)["stream"], "V", "{}", v(i));
        assert_eq!(v(i)["client"]["acc"], "$G", "{}", v(i));
    }
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
