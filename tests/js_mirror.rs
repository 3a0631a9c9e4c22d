//! Stream mirrors and sources (same account), as nats-server 2.9.10 answers them: a mirror
//! keeps its origin's sequences and timestamps from its start sequence, sources append with
//! `Nats-Stream-Source: <origin> <seq>`, stream info reports them, a mirror's configuration
//! cannot change, and after a restart nothing is copied twice.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use futures::StreamExt;
use serde_json::Value;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

use common::js_api as api;

/// Stream info once `messages` are there (copies are asynchronous).
async fn info_with(nc: &async_nats::Client, stream: &str, messages: u64) -> Value {
    let end = tokio::time::Instant::now() + T;
    loop {
        let v = api(nc, &format!("$JS.API.STREAM.INFO.{stream}"), "").await;
        if v["state"]["messages"] == messages {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{stream} never reached {messages} messages: {v}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn get(nc: &async_nats::Client, stream: &str, seq: u64) -> Value {
    api(
        nc,
        &format!("$JS.API.STREAM.MSG.GET.{stream}"),
        &format!("{{\"seq\":{seq}}}"),
    )
    .await
}

fn header_of(msg: &Value) -> String {
    msg["message"]["hdrs"]
        .as_str()
        .map(|h| String::from_utf8(base64_decode(h)).expect("utf-8 header"))
        .unwrap_or_default()
}

/// Standard base64 (what the API uses for `hdrs`), decoded without a crate.
fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= (val(c) as u32) << (18 - 6 * i);
        }
        let k = chunk.len() * 6 / 8;
        for i in 0..k {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[tokio::test]
async fn mirror_keeps_sequences_and_times_and_cannot_be_updated() {
    let (srv, nc, dir) = common::start_js("mirror").await;
    let js = jetstream::new(nc.clone());
    js.create_stream(stream::Config {
        name: "O".into(),
        subjects: vec!["o.>".into()],
        ..Default::default()
    })
    .await
    .expect("origin");
    for i in 0..3 {
        js.publish(format!("o.{i}"), format!("m{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    // nats-server's checks first.
    let e = api(
        &nc,
        "$JS.API.STREAM.CREATE.M1",
        r#"{"name":"M1","subjects":["m1"],"mirror":{"name":"O"}}"#,
    )
    .await;
    assert_eq!(e["error"]["err_code"], 10034, "{e}");
    let e = api(
        &nc,
        "$JS.API.STREAM.CREATE.M2",
        r#"{"name":"M2","mirror":{"name":"O"},"sources":[{"name":"O"}]}"#,
    )
    .await;
    assert_eq!(e["error"]["err_code"], 10031, "{e}");
    let e = api(
        &nc,
        "$JS.API.STREAM.CREATE.M3",
        r#"{"name":"M3","mirror":{"name":"M3"}}"#,
    )
    .await;
    assert_eq!(e["error"]["description"], "detected cycle", "{e}");

    let mut mirror = js
        .create_stream(stream::Config {
            name: "M".into(),
            mirror: Some(stream::Source {
                name: "O".into(),
                start_sequence: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("mirror");
    let info = info_with(&nc, "M", 2).await;
    assert_eq!(info["state"]["first_seq"], 2);
    assert_eq!(info["state"]["last_seq"], 3);
    assert_eq!(info["mirror"]["name"], "O");
    assert_eq!(info["mirror"]["lag"], 0);
    assert!(info["config"].get("duplicate_window").is_none(), "{info}");
    for seq in [2, 3] {
        let (o, m) = (get(&nc, "O", seq).await, get(&nc, "M", seq).await);
        assert_eq!(m["message"]["subject"], o["message"]["subject"]);
        assert_eq!(m["message"]["data"], o["message"]["data"]);
        assert_eq!(
            m["message"]["time"], o["message"]["time"],
            "origin's timestamp kept"
        );
    }
    assert_eq!(get(&nc, "M", 1).await["error"]["err_code"], 10037);

    // New messages follow, and a consumer on the mirror gets them.
    js.publish("o.new", "later".into())
        .await
        .expect("publish")
        .await
        .expect("ack");
    info_with(&nc, "M", 3).await;
    let mut msgs = mirror
        .create_consumer(consumer::pull::Config {
            durable_name: Some("c".into()),
            ..Default::default()
        })
        .await
        .expect("consumer")
        .messages()
        .await
        .expect("messages");
    let mut got = Vec::new();
    for _ in 0..3 {
        let m = tokio::time::timeout(T, msgs.next())
            .await
            .expect("in time")
            .expect("some")
            .expect("message");
        got.push(String::from_utf8_lossy(&m.payload).to_string());
        m.ack().await.expect("ack");
    }
    assert_eq!(got, ["m1", "m2", "later"]);
    let _ = mirror.info().await.expect("info");

    let e = api(
        &nc,
        "$JS.API.STREAM.UPDATE.M",
        r#"{"name":"M","mirror":{"name":"O","opt_start_seq":1}}"#,
    )
    .await;
    assert_eq!(e["error"]["err_code"], 10055, "{e}");
    assert_eq!(
        e["error"]["description"],
        "stream mirror configuration can not be updated"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sources_append_with_their_origin_header_and_resume_after_restart() {
    let (srv, nc, dir) = common::start_js("sources").await;
    let js = jetstream::new(nc.clone());
    for (name, subject) in [("A", "a"), ("B", "b")] {
        js.create_stream(stream::Config {
            name: name.into(),
            subjects: vec![subject.into()],
            ..Default::default()
        })
        .await
        .expect("origin");
    }
    for s in ["a", "a", "b", "b"] {
        js.publish(s, "data".into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    js.create_stream(stream::Config {
        name: "S".into(),
        subjects: vec!["s".into()],
        sources: Some(vec![
            stream::Source {
                name: "A".into(),
                start_sequence: Some(2),
                ..Default::default()
            },
            stream::Source {
                name: "B".into(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    })
    .await
    .expect("sourcing stream");
    let info = info_with(&nc, "S", 3).await;
    let names: Vec<&str> = info["sources"]
        .as_array()
        .expect("sources in info")
        .iter()
        .map(|s| s["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["A", "B"]);
    let mut headers = Vec::new();
    for seq in 1..=3 {
        headers.push(header_of(&get(&nc, "S", seq).await));
    }
    headers.sort();
    assert_eq!(
        headers,
        [
            "NATS/1.0\r\nNats-Stream-Source: A 2\r\n\r\n",
            "NATS/1.0\r\nNats-Stream-Source: B 1\r\n\r\n",
            "NATS/1.0\r\nNats-Stream-Source: B 2\r\n\r\n",
        ]
    );
    // Its own subjects still take publishes.
    let ack = js
        .publish("s", "own".into())
        .await
        .expect("publish")
        .await
        .expect("ack");
    assert_eq!(ack.sequence, 4);

    // Restart: the copy resumes where it was, nothing twice.
    drop(nc);
    drop(srv);
    let (srv, nc) = common::start_js_in(&dir).await;
    let js = jetstream::new(nc.clone());
    js.publish("a", "after".into())
        .await
        .expect("publish")
        .await
        .expect("ack");
    let info = info_with(&nc, "S", 5).await;
    assert_eq!(info["state"]["last_seq"], 5);
    let last = get(&nc, "S", 5).await;
    assert_eq!(
        header_of(&last),
        "NATS/1.0\r\nNats-Stream-Source: A 3\r\n\r\n"
    );
    // A fence through the other origin: copied in the same pass as any repeat of A's
    // messages would be, so exactly 6 means nothing was copied twice.
    js.publish("b", "fence".into())
        .await
        .expect("publish")
        .await
        .expect("ack");
    let info = info_with(&nc, "S", 6).await;
    assert_eq!(info["state"]["last_seq"], 6, "{info}");
    assert_eq!(
        header_of(&get(&nc, "S", 6).await),
        "NATS/1.0\r\nNats-Stream-Source: B 3\r\n\r\n"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
