//! Mirrors and sources of a stream in another JetStream domain (`external: { api, deliver }`),
//! the edge pattern: a leaf (domain `leaf`) keeps a copy of a hub stream (domain `hub`)
//! through the hub's `$JS.hub.API` (docs/nats-server-behaviour.md §48). natsd both ends, and
//! with nats-server 2.15.1 as the hub (natsd asks it for the consumer) and as the leaf
//! (nats-server asks natsd).

mod common;

use common::leaf::{go_hub_natsd_leaf, natsd_hub_go_leaf, natsd_js_pair, wait_links, with_js};

const SUITE: &str = "js_external";
use common::natsserver;
use common::{js_api, start};
use natsd::Options;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A `$JS.API` answer, or `None` when none came within a second (not there yet).
async fn try_api(nc: &async_nats::Client, subject: &str, body: &str) -> Option<Value> {
    let m = tokio::time::timeout(
        Duration::from_secs(1),
        nc.request(subject.to_string(), body.to_string().into()),
    )
    .await
    .ok()?
    .ok()?;
    serde_json::from_slice(&m.payload).ok()
}

/// Poll stream `name`'s info through `nc` until `ok` holds for it (20 s).
async fn info_until(nc: &async_nats::Client, name: &str, what: &str, ok: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Some(v) = try_api(nc, &format!("$JS.API.STREAM.INFO.{name}"), "").await {
            if ok(&v) {
                return;
            }
            last = v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("stream {name}: {what} never came; last info: {last}");
}

fn messages(v: &Value) -> u64 {
    v["state"]["messages"].as_u64().unwrap_or(0)
}

async fn publish(nc: &async_nats::Client, subject: &str, body: &str) {
    let ack = js_api(nc, subject, body).await;
    assert!(ack["seq"].as_u64().is_some(), "{subject}: {ack}");
}

async fn get(nc: &async_nats::Client, stream: &str, seq: u64) -> Value {
    let v = js_api(
        nc,
        &format!("$JS.API.STREAM.MSG.GET.{stream}"),
        &format!("{{\"seq\":{seq}}}"),
    )
    .await;
    v["message"].clone()
}

fn decoded(m: &Value, field: &str) -> String {
    let raw = m[field].as_str().unwrap_or("");
    let b = data_encoding::BASE64
        .decode(raw.as_bytes())
        .unwrap_or_default();
    String::from_utf8_lossy(&b).into_owned()
}

/// `hub` and `leaf` are clients of the hub (domain `hub`) and of its leaf (domain `leaf`).
/// `natsd_leaf`: the leaf is natsd (its source header is checked to the byte).
async fn mirror_and_source_through_the_hub_domain(
    hub: &async_nats::Client,
    leaf: &async_nats::Client,
    natsd_leaf: bool,
) {
    // The hub's domain API reaches the leaf once its interest has crossed.
    let deadline = Instant::now() + Duration::from_secs(10);
    while try_api(leaf, "$JS.hub.API.INFO", "").await.is_none() {
        assert!(
            Instant::now() < deadline,
            "the hub's domain API never reached the leaf"
        );
    }
    let v = js_api(
        hub,
        "$JS.API.STREAM.CREATE.O",
        r#"{"name":"O","subjects":["o.>"]}"#,
    )
    .await;
    assert!(v["error"].is_null(), "{v}");
    for i in 1..=3 {
        publish(hub, &format!("o.{i}"), &format!("m{i}")).await;
    }
    let v = js_api(
        leaf,
        "$JS.API.STREAM.CREATE.M",
        r#"{"name":"M","mirror":{"name":"O","external":{"api":"$JS.hub.API"}}}"#,
    )
    .await;
    assert!(v["error"].is_null(), "{v}");
    let ext = &v["config"]["mirror"]["external"];
    assert_eq!(
        (&ext["api"], &ext["deliver"]),
        (&Value::from("$JS.hub.API"), &Value::from("")),
        "{v}"
    );
    let v = js_api(
        leaf,
        "$JS.API.STREAM.CREATE.S",
        r#"{"name":"S","subjects":["s.>"],"sources":[{"name":"O","external":{"api":"$JS.hub.API","deliver":"dp"}}]}"#,
    )
    .await;
    assert!(v["error"].is_null(), "{v}");
    info_until(leaf, "M", "3 mirrored messages", |v| messages(v) == 3).await;
    info_until(leaf, "S", "3 sourced messages", |v| messages(v) == 3).await;
    // Live: what the hub stores later follows.
    for i in 4..=5 {
        publish(hub, &format!("o.{i}"), &format!("m{i}")).await;
    }
    info_until(leaf, "M", "5 mirrored messages, lag 0", |v| {
        messages(v) == 5
            && v["mirror"]["lag"] == 0
            && v["mirror"]["external"]["api"] == "$JS.hub.API"
    })
    .await;
    info_until(leaf, "S", "5 sourced messages", |v| messages(v) == 5).await;
    // The hub's consumers for the copies are direct ones: not listed, not counted.
    let v = js_api(hub, "$JS.API.STREAM.INFO.O", "").await;
    assert_eq!(v["state"]["consumer_count"], 0, "{v}");
    let v = js_api(hub, "$JS.API.CONSUMER.NAMES.O", "").await;
    assert_eq!(v["total"], 0, "{v}");
    // The mirror keeps the origin's sequences, subjects and timestamps.
    let (o, m) = (get(hub, "O", 4).await, get(leaf, "M", 4).await);
    assert_eq!(
        (&m["subject"], &m["seq"]),
        (&Value::from("o.4"), &Value::from(4)),
        "{m}"
    );
    assert_eq!(decoded(&m, "data"), "m4");
    assert_eq!(m["time"], o["time"], "the mirror keeps the origin's time");
    // A source appends with its own sequences and names the origin in a header.
    let s = get(leaf, "S", 2).await;
    assert_eq!(s["subject"], "o.2", "{s}");
    assert_eq!(decoded(&s, "data"), "m2");
    let hdr = decoded(&s, "hdrs");
    // nats-server's `iname`: the name and a hash of the API prefix (2.15.1 adds more fields).
    let want = if natsd_leaf {
        "Nats-Stream-Source: O:bTMUkJQk 2\r\n"
    } else {
        "Nats-Stream-Source: O:bTMUkJQk 2 "
    };
    assert!(hdr.contains(want), "{hdr:?}");
    // The source's own subjects still take publishes.
    publish(leaf, "s.own", "x").await;
    info_until(leaf, "S", "its own message too", |v| messages(v) == 6).await;
}

async fn connect(url: String) -> async_nats::Client {
    async_nats::connect(url).await.expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_mirrors_and_sources_a_natsd_hub_stream() {
    let (hub, leaf, _) = natsd_js_pair(SUITE, "natsd").await;
    let (h, l) = (
        connect(hub.client_url()).await,
        connect(leaf.client_url()).await,
    );
    mirror_and_source_through_the_hub_domain(&h, &l, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_leaf_resumes_its_copies_without_doubles() {
    let (hub, leaf, leaf_o) = natsd_js_pair(SUITE, "restart").await;
    let h = connect(hub.client_url()).await;
    let l = connect(leaf.client_url()).await;
    mirror_and_source_through_the_hub_domain(&h, &l, true).await;
    drop(l);
    drop(leaf);
    // While the leaf is down the hub takes two more; the leaf comes back on its store.
    for i in 6..=7 {
        publish(&h, &format!("o.{i}"), &format!("m{i}")).await;
    }
    let leaf = start(leaf_o).await;
    wait_links(&leaf, 1).await;
    let l = connect(leaf.client_url()).await;
    info_until(&l, "M", "7 mirrored messages", |v| {
        messages(v) == 7 && v["state"]["last_seq"] == 7
    })
    .await;
    // S held 5 copies and its own message; it gets exactly the two it missed.
    info_until(&l, "S", "8 messages", |v| messages(v) == 8).await;
    let s = get(&l, "S", 8).await;
    assert!(decoded(&s, "hdrs").contains("O:bTMUkJQk 7\r\n"), "{s}");
    // Nothing more comes: a second look a moment later finds the same count.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v = js_api(&l, "$JS.API.STREAM.INFO.S", "").await;
    assert_eq!(messages(&v), 8, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_mirrors_and_sources_a_nats_server_215_hub_stream() {
    let bin = natsserver::assert_installed_215();
    let (go, leaf) = go_hub_natsd_leaf(&bin, SUITE, "hub215").await;
    let h = connect(format!("nats://{}", go.client)).await;
    let l = connect(leaf.client_url()).await;
    mirror_and_source_through_the_hub_domain(&h, &l, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_mirrors_and_sources_a_nats_server_29_hub_stream() {
    natsserver::assert_installed();
    let (go, leaf) = go_hub_natsd_leaf(natsserver::NATS_SERVER, SUITE, "hub29").await;
    let h = connect(format!("nats://{}", go.client)).await;
    let l = connect(leaf.client_url()).await;
    mirror_and_source_through_the_hub_domain(&h, &l, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_215_leaf_mirrors_and_sources_a_natsd_hub_stream() {
    let bin = natsserver::assert_installed_215();
    let (hub, go) = natsd_hub_go_leaf(&bin, SUITE, "leaf215").await;
    let h = connect(hub.client_url()).await;
    let l = connect(format!("nats://{}", go.client)).await;
    mirror_and_source_through_the_hub_domain(&h, &l, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_prefixes_are_checked_as_nats_server_checks_them() {
    let hub = start(with_js(SUITE, Options::local(), "checks", "hub")).await;
    let nc = connect(hub.client_url()).await;
    for (body, code) in [
        (
            r#"{"name":"M","mirror":{"name":"O","external":{"api":"$JS.API"}}}"#,
            10021,
        ),
        (
            r#"{"name":"M","mirror":{"name":"O","external":{"api":"$JS.*.API"}}}"#,
            10052,
        ),
        (
            r#"{"name":"M","mirror":{"name":"O","external":{"api":"$JS.h.API","deliver":"d.>"}}}"#,
            10024,
        ),
        (
            r#"{"name":"M","subjects":[">"],"sources":[{"name":"O","external":{"api":"$JS.h.API","deliver":"d"}}]}"#,
            10022,
        ),
    ] {
        let v = js_api(&nc, "$JS.API.STREAM.CREATE.M", body).await;
        assert_eq!(v["error"]["err_code"], code, "{body}: {v}");
    }
    // A request that needs a newer API level than natsd's is refused as nats-server refuses
    // it (a 2.11+ mirror then asks again without it).
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Required-Api-Level", "4");
    let m = nc
        .request_with_headers("$JS.API.INFO".to_string(), h, "".into())
        .await
        .expect("answer");
    let v: Value = serde_json::from_slice(&m.payload).expect("json");
    assert_eq!(
        (&v["error"]["code"], &v["error"]["err_code"]),
        (&Value::from(412), &Value::from(10185)),
        "{v}"
    );
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Required-Api-Level", "0");
    let m = nc
        .request_with_headers("$JS.API.INFO".to_string(), h, "".into())
        .await
        .expect("answer");
    let v: Value = serde_json::from_slice(&m.payload).expect("json");
    assert!(v["error"].is_null(), "level 0 is natsd's own: {v}");
}
