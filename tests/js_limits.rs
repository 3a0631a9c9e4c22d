//! Per-account JetStream limits from the config file (`accounts { A { jetstream { … } } }`),
//! black-box: what `$JS.API.INFO` and `/jsz` report, and every limit refused with
//! nats-server 2.9.10's exact error (observed on Debian's nats-server, see
//! docs/nats-server-behaviour.md §14 "Account limits"): streams, consumers per stream,
//! reservations of `max_bytes` on create and update, per-stream byte caps, `max_bytes_required`,
//! `max_ack_pending`, and publishes over the memory/storage limit — with usage that goes back
//! down after purge, message delete and stream delete, and survives a restart.

mod common;

use async_nats::ConnectOptions;
use common::{http_json, js_api, js_dir};
use natsd::{Options, Server};
use serde_json::Value;

/// A config with JetStream storing in `dir`, and accounts `A` (user `a`, the given
/// `jetstream` value) and `U` (user `u`, JetStream without limits).
fn opts(dir: &std::path::Path, a_jetstream: &str) -> Options {
    let conf = format!(
        "jetstream {{ store_dir: {:?} }}\naccounts {{\n  A {{ jetstream {a_jetstream}\n    \
         users [{{user: a, password: a}}] }}\n  U {{ jetstream: enabled\n    \
         users [{{user: u, password: u}}] }}\n}}\n",
        dir.display().to_string()
    );
    let mut o = natsd::config::file::load_str(&conf)
        .unwrap_or_else(|e| panic!("config loads: {e}\n{conf}"))
        .options;
    o.host = "127.0.0.1".into();
    o.port = 0;
    o.http_port = Some(0);
    o
}

async fn start(o: Options) -> Server {
    Server::start(o).await.expect("natsd starts")
}

async fn user(srv: &Server, u: &str) -> async_nats::Client {
    ConnectOptions::with_user_and_password(u.into(), u.into())
        .connect(srv.client_url())
        .await
        .unwrap_or_else(|e| panic!("connect as {u}: {e}"))
}

/// A server with `A`'s `jetstream` set to `a_jetstream`, a client as `a`, the store directory.
async fn setup(name: &str, a_jetstream: &str) -> (Server, async_nats::Client, std::path::PathBuf) {
    let dir = js_dir(name);
    let srv = start(opts(&dir, a_jetstream)).await;
    let a = user(&srv, "a").await;
    (srv, a, dir)
}

async fn finish(srv: Server, a: async_nats::Client, dir: &std::path::Path) {
    drop(a);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// `(code, err_code, description)` of an API error answer.
fn err_of(v: &Value) -> (u64, u64, String) {
    let e = &v["error"];
    assert!(e.is_object(), "expected an error, got {v}");
    (
        e["code"].as_u64().unwrap_or(0),
        e["err_code"].as_u64().unwrap_or(0),
        e["description"].as_str().unwrap_or("").to_string(),
    )
}

fn err(code: u64, err_code: u64, d: &str) -> (u64, u64, String) {
    (code, err_code, d.to_string())
}

/// A stream on subjects `<name lowercased>.>` with extra config fields (`"k":v,…`).
async fn create(nc: &async_nats::Client, name: &str, extra: &str) -> Value {
    let body = format!(
        r#"{{"name":"{name}","subjects":["{}.>"]{}{extra}}}"#,
        name.to_lowercase(),
        if extra.is_empty() { "" } else { "," }
    );
    js_api(nc, &format!("$JS.API.STREAM.CREATE.{name}"), &body).await
}

async fn update(nc: &async_nats::Client, name: &str, extra: &str) -> Value {
    let body = format!(
        r#"{{"name":"{name}","subjects":["{}.>"],{extra}}}"#,
        name.to_lowercase()
    );
    js_api(nc, &format!("$JS.API.STREAM.UPDATE.{name}"), &body).await
}

/// `$JS.API.INFO` as sent (field order kept).
async fn raw_info(nc: &async_nats::Client) -> String {
    let m = tokio::time::timeout(
        common::DEADLINE,
        nc.request("$JS.API.INFO", bytes::Bytes::new()),
    )
    .await
    .expect("INFO answered in time")
    .expect("INFO answered");
    String::from_utf8_lossy(&m.payload).into_owned()
}

async fn info(nc: &async_nats::Client) -> Value {
    js_api(nc, "$JS.API.INFO", "").await
}

/// Publish 100-byte payloads on `subject` until one is refused; the stored count and the
/// refusal.
async fn fill(nc: &async_nats::Client, subject: &str) -> (usize, Value) {
    for i in 0..1000 {
        let v = js_api(nc, subject, &"x".repeat(100)).await;
        if v.get("error").is_some() {
            return (i, v);
        }
    }
    panic!("{subject}: 1000 publishes and none refused");
}

const LIMITS: &str = "{ max_mem: 10KB, max_file: 20KB, max_streams: 3, max_consumers: 2, \
                      memory_max_stream_bytes: 6KB, store_max_stream_bytes: 12KB }";

#[tokio::test]
async fn account_info_reports_limits_and_max_streams_is_10027() {
    let (srv, a, dir) = setup(
        "lim-info",
        "{ max_mem: 64MB, max_file: 128MB, max_streams: 2, max_consumers: 3 }",
    )
    .await;
    let js = async_nats::jetstream::new(a.clone());
    // As nats-py's test_account_limits: the client sees the configured limits.
    let acc = js.query_account().await.expect("account info");
    assert_eq!(acc.limits.max_memory, Some(64 << 20));
    assert_eq!(acc.limits.max_storage, Some(128 << 20));
    assert_eq!(acc.limits.max_streams, Some(2));
    assert_eq!(acc.limits.max_consumers, Some(3));
    // nats-server's exact object, in its order: -1 for what is not limited.
    let v = raw_info(&a).await;
    assert!(
        v.contains(
            r#","limits":{"max_memory":67108864,"max_storage":134217728,"max_streams":2,"max_consumers":3,"max_ack_pending":-1,"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,"max_bytes_required":false},"api":{"total":"#
        ),
        "{v}"
    );
    let u = user(&srv, "u").await;
    let v = raw_info(&u).await;
    assert!(
        v.contains(
            r#","limits":{"max_memory":-1,"max_storage":-1,"max_streams":-1,"max_consumers":-1,"max_ack_pending":-1,"memory_max_stream_bytes":-1,"storage_max_stream_bytes":-1,"max_bytes_required":false},"#
        ),
        "{v}"
    );
    for s in ["S1", "S2"] {
        assert_eq!(create(&a, s, "").await["did_create"], true);
    }
    let max = err(400, 10027, "maximum number of streams reached");
    assert_eq!(err_of(&create(&a, "S3", "").await), max);
    // Checked before the configuration and before "already exists" (nats-server 2.9.10).
    assert_eq!(err_of(&create(&a, "S1", "").await), max);
    assert_eq!(err_of(&create(&a, "S3", r#""max_age":-5"#).await), max);
    // The client sees the same error code.
    let e = js
        .create_stream(async_nats::jetstream::stream::Config {
            name: "S4".into(),
            ..Default::default()
        })
        .await
        .expect_err("over max_streams");
    assert!(e.to_string().contains("10027"), "{e}");
    let v = info(&a).await;
    assert_eq!(
        (v["streams"].as_u64(), v["api"]["errors"].as_u64()),
        (Some(2), Some(4))
    );
    // A deleted stream makes room.
    let v = js_api(&a, "$JS.API.STREAM.DELETE.S2", "").await;
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(create(&a, "S3", "").await["did_create"], true);
    drop(u);
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn max_consumers_applies_per_stream_to_ephemerals_and_durables() {
    let (srv, a, dir) = setup("lim-cons", LIMITS).await;
    for s in ["M1", "M2"] {
        let v = create(&a, s, r#""storage":"memory","max_bytes":1000"#).await;
        assert_eq!(v["did_create"], true, "{v}");
    }
    let eph = |s: &str| {
        (
            format!("$JS.API.CONSUMER.CREATE.{s}"),
            format!(r#"{{"stream_name":"{s}","config":{{"ack_policy":"explicit"}}}}"#),
        )
    };
    let dur = |s: &str, d: &str| {
        (
            format!("$JS.API.CONSUMER.DURABLE.CREATE.{s}.{d}"),
            format!(
                r#"{{"stream_name":"{s}","config":{{"durable_name":"{d}","ack_policy":"explicit"}}}}"#
            ),
        )
    };
    let (s, b) = eph("M1");
    assert!(js_api(&a, &s, &b).await["name"].is_string());
    let (s, b) = dur("M1", "d1");
    assert_eq!(js_api(&a, &s, &b).await["name"], "d1");
    let max = err(400, 10026, "maximum consumers limit reached");
    let (s, b) = dur("M1", "d2");
    assert_eq!(err_of(&js_api(&a, &s, &b).await), max);
    let (s, b) = eph("M1");
    assert_eq!(err_of(&js_api(&a, &s, &b).await), max);
    // An existing durable may be created again; another stream has its own allowance.
    let (s, b) = dur("M1", "d1");
    assert_eq!(js_api(&a, &s, &b).await["name"], "d1");
    for d in ["d1", "d2"] {
        let (s, b) = dur("M2", d);
        assert_eq!(js_api(&a, &s, &b).await["name"], d);
    }
    let (s, b) = dur("M2", "d3");
    assert_eq!(err_of(&js_api(&a, &s, &b).await), max);
    assert_eq!(info(&a).await["consumers"], 4);
    // A stream may not allow more consumers than the account.
    assert_eq!(
        err_of(
            &create(
                &a,
                "M3",
                r#""storage":"memory","max_bytes":10,"max_consumers":5"#
            )
            .await
        ),
        max
    );
    // Deleting one makes room again.
    let v = js_api(&a, "$JS.API.CONSUMER.DELETE.M2.d1", "").await;
    assert_eq!(v["success"], true, "{v}");
    let (s, b) = dur("M2", "d3");
    assert_eq!(js_api(&a, &s, &b).await["name"], "d3");
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn stream_max_bytes_against_reservations_on_create_and_update() {
    let (srv, a, dir) = setup("lim-reserve", LIMITS).await;
    let mem = |b: i64| format!(r#""storage":"memory","max_bytes":{b}"#);
    let per_stream = err(
        400,
        10122,
        "stream max bytes exceeds account limit max stream bytes",
    );
    let no_memory = err(500, 10028, "insufficient memory resources available");
    assert_eq!(err_of(&create(&a, "M1", &mem(7000)).await), per_stream);
    assert_eq!(create(&a, "M1", &mem(6144)).await["did_create"], true);
    assert_eq!(err_of(&create(&a, "M2", &mem(5000)).await), no_memory);
    // Reservations are checked before the configuration (nats-server 2.9.10).
    assert_eq!(
        err_of(&create(&a, "M2", &format!("{},\"max_age\":-5", mem(5000))).await),
        no_memory
    );
    assert_eq!(create(&a, "M2", &mem(4096)).await["did_create"], true);
    // The limit is reached exactly: a stream without max_bytes asks for one byte.
    assert_eq!(
        err_of(&create(&a, "M3", r#""storage":"memory""#).await),
        no_memory
    );
    // Updates: only growth asks for more; shrinking and going unlimited are fine.
    assert_eq!(err_of(&update(&a, "M2", &mem(5000)).await), no_memory);
    assert_eq!(err_of(&update(&a, "M2", &mem(7000)).await), per_stream);
    assert_eq!(
        update(&a, "M2", &mem(2000)).await["config"]["max_bytes"],
        2000
    );
    assert_eq!(update(&a, "M2", &mem(-1)).await["config"]["max_bytes"], -1);
    assert_eq!(
        update(&a, "M2", &mem(4096)).await["config"]["max_bytes"],
        4096
    );
    // max_consumers may not change in an update (nats-server 2.9.10).
    assert_eq!(
        err_of(&update(&a, "M2", &format!("{},\"max_consumers\":1", mem(4096))).await),
        err(
            500,
            10052,
            "stream configuration update can not change MaxConsumers"
        )
    );
    // File streams: their own limits and error.
    let no_storage = err(500, 10047, "insufficient storage resources available");
    assert_eq!(
        err_of(&create(&a, "F1", r#""max_bytes":13000"#).await),
        per_stream
    );
    let v = js_api(&a, "$JS.API.STREAM.DELETE.M2", "").await;
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(
        create(&a, "F1", r#""max_bytes":12288"#).await["did_create"],
        true
    );
    assert_eq!(
        err_of(&create(&a, "F2", r#""max_bytes":8193"#).await),
        no_storage
    );
    assert_eq!(
        create(&a, "F2", r#""max_bytes":8192"#).await["did_create"],
        true
    );
    // Deleting a stream gives its reservation back.
    let v = js_api(&a, "$JS.API.STREAM.DELETE.F1", "").await;
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(
        create(&a, "F3", r#""max_bytes":12288"#).await["did_create"],
        true
    );
    // /jsz: the server's reservations (streams' max_bytes) and the account's limits.
    let j = http_json(common::http_addr(&srv), "/jsz?accounts=true").await;
    assert_eq!(j["reserved_memory"], 6144, "{j}");
    assert_eq!(j["reserved_storage"], 8192 + 12288, "{j}");
    let acc: Vec<&Value> = j["account_details"]
        .as_array()
        .map(|v| v.iter().filter(|d| d["name"] == "A").collect())
        .unwrap_or_default();
    assert_eq!(acc.len(), 1, "{j}");
    assert_eq!(acc[0]["reserved_memory"], 10240, "{j}");
    assert_eq!(acc[0]["reserved_storage"], 20480, "{j}");
    let u: Vec<&Value> = j["account_details"]
        .as_array()
        .map(|v| v.iter().filter(|d| d["name"] == "U").collect())
        .unwrap_or_default();
    assert_eq!(u[0]["reserved_memory"], u64::MAX, "{j}");
    let v = http_json(common::http_addr(&srv), "/varz").await;
    assert_eq!(v["jetstream"]["stats"]["reserved_memory"], 6144, "{v}");
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn max_bytes_required_and_max_ack_pending() {
    let (srv, a, dir) = setup(
        "lim-required",
        "{ max_bytes_required: true, max_ack_pending: 50 }",
    )
    .await;
    let required = err(
        400,
        10113,
        "account requires a stream config to have max bytes set",
    );
    assert_eq!(err_of(&create(&a, "S", "").await), required);
    assert_eq!(err_of(&create(&a, "S", r#""max_bytes":0"#).await), required);
    assert_eq!(
        create(&a, "S", r#""max_bytes":1000"#).await["did_create"],
        true
    );
    assert_eq!(
        err_of(&update(&a, "S", r#""max_bytes":-1"#).await),
        required
    );
    let c =
        |cfg: &str| format!(r#"{{"stream_name":"S","config":{{"ack_policy":"explicit"{cfg}}}}}"#);
    let excess = err(
        400,
        10121,
        "consumer max ack pending exceeds system limit of 50",
    );
    let v = js_api(
        &a,
        "$JS.API.CONSUMER.CREATE.S",
        &c(r#","max_ack_pending":51"#),
    )
    .await;
    assert_eq!(err_of(&v), excess);
    // Checked before the delivery policy (nats-server 2.9.10).
    let v = js_api(
        &a,
        "$JS.API.CONSUMER.CREATE.S",
        &c(r#","max_ack_pending":51,"deliver_policy":"by_start_sequence""#),
    )
    .await;
    assert_eq!(err_of(&v), excess);
    // Without one, the account's is the default; -1 stays -1 as in nats-server 2.9.10.
    let v = js_api(&a, "$JS.API.CONSUMER.CREATE.S", &c("")).await;
    assert_eq!(v["config"]["max_ack_pending"], 50, "{v}");
    let v = js_api(
        &a,
        "$JS.API.CONSUMER.CREATE.S",
        &c(r#","max_ack_pending":-1"#),
    )
    .await;
    assert_eq!(v["config"]["max_ack_pending"], -1, "{v}");
    let v = info(&a).await;
    assert_eq!(v["limits"]["max_ack_pending"], 50, "{v}");
    assert_eq!(v["limits"]["max_bytes_required"], true, "{v}");
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn publishes_over_the_account_limit_are_refused_until_usage_goes_down() {
    let (srv, a, dir) = setup("lim-publish", "{ max_mem: 2KB, max_file: 3KB }").await;
    let exceeded = err(400, 10002, "resource limits exceeded for account");
    assert_eq!(
        create(&a, "M", r#""storage":"memory""#).await["did_create"],
        true
    );
    assert_eq!(create(&a, "F", "").await["did_create"], true);
    // Memory: 100 bytes on `m.x` are 119 stored bytes; the 18th would make 2142 > 2048.
    let (n, v) = fill(&a, "m.x").await;
    assert_eq!(n, 17);
    assert_eq!(err_of(&v), exceeded);
    assert_eq!(v["stream"], "M", "{v}");
    assert_eq!(v["seq"], 0, "{v}");
    assert_eq!(info(&a).await["memory"], 17 * 119);
    // The refused message's sequence stays used, as nats-server's.
    let st = js_api(&a, "$JS.API.STREAM.INFO.M", "").await;
    assert_eq!(st["state"]["messages"], 17, "{st}");
    assert_eq!(st["state"]["last_seq"], 18, "{st}");
    assert_eq!(st["state"]["num_deleted"], 1, "{st}");
    // A refused message's id is not remembered: once there is room it is stored.
    let hdr = |id: &str| {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", id);
        h
    };
    let send = |id: &'static str| {
        let a = a.clone();
        async move {
            let m = a
                .request_with_headers("m.x", hdr(id), "x".repeat(100).into())
                .await
                .expect("ack");
            serde_json::from_slice::<Value>(&m.payload).expect("json ack")
        }
    };
    assert_eq!(err_of(&send("id-1").await), exceeded);
    // A purge brings the usage down; the same id is then stored, once.
    let v = js_api(&a, "$JS.API.STREAM.PURGE.M", "").await;
    assert_eq!(v["purged"], 17, "{v}");
    assert_eq!(info(&a).await["memory"], 0);
    let v = send("id-1").await;
    assert_eq!(v["seq"], 20, "{v}");
    assert_eq!(send("id-1").await["duplicate"], true);
    // File: 100 bytes on `f.x` are 133 bytes; 23 fit in 3072.
    let (n, v) = fill(&a, "f.x").await;
    assert_eq!(n, 23);
    assert_eq!(err_of(&v), exceeded);
    assert_eq!(info(&a).await["storage"], 23 * 133);
    // Deleting one message makes room for one more.
    let v = js_api(&a, "$JS.API.STREAM.MSG.DELETE.F", r#"{"seq":1}"#).await;
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(info(&a).await["storage"], 22 * 133);
    assert!(js_api(&a, "f.x", "y").await["seq"].is_u64());
    assert_eq!(err_of(&js_api(&a, "f.x", &"x".repeat(100)).await), exceeded);
    // Another account is not limited by A's usage.
    let u = user(&srv, "u").await;
    assert_eq!(create(&u, "F", "").await["did_create"], true);
    let (n, _) = fill_some(&u, "f.x", 40).await;
    assert_eq!(n, 40);
    // A stream bounded by its own max_bytes keeps taking messages (discarding its oldest,
    // checked once stored) while the rest of the account's memory is full.
    let v = create(&a, "B", r#""storage":"memory","max_bytes":1000"#).await;
    assert_eq!(v["did_create"], true, "{v}");
    let (n, _) = fill_some(&a, "b.x", 10).await;
    assert_eq!(n, 10);
    // M holds `id-1` with its 31-byte header (150 bytes): 7 more fit.
    let (n, v) = fill(&a, "m.x").await;
    assert_eq!((n, err_of(&v)), (7, exceeded.clone()));
    assert_eq!(info(&a).await["memory"], 952 + 150 + 7 * 119);
    let (n, _) = fill_some(&a, "b.x", 30).await;
    assert_eq!(n, 30);
    // Deleting the file stream gives all of it back.
    let v = js_api(&a, "$JS.API.STREAM.DELETE.F", "").await;
    assert_eq!(v["success"], true, "{v}");
    assert_eq!(info(&a).await["storage"], 0);
    drop(u);
    finish(srv, a, &dir).await;
}

/// Publish `n` 100-byte payloads; how many were stored, and the last answer.
async fn fill_some(nc: &async_nats::Client, subject: &str, n: usize) -> (usize, Value) {
    let mut last = Value::Null;
    for i in 0..n {
        last = js_api(nc, subject, &"x".repeat(100)).await;
        if last.get("error").is_some() {
            return (i, last);
        }
    }
    (n, last)
}

#[tokio::test]
async fn per_stream_byte_caps_also_cap_the_account_total_as_in_2_9_10() {
    let (srv, a, dir) = setup("lim-cap", "{ memory_max_stream_bytes: 1KB }").await;
    for s in ["M", "N"] {
        let v = create(&a, s, r#""storage":"memory","max_bytes":1000"#).await;
        assert_eq!(v["did_create"], true, "{v}");
    }
    // M fills up to its own 1000 bytes (8 messages, 952 bytes) and keeps going …
    let (n, _) = fill_some(&a, "m.x", 10).await;
    assert_eq!(n, 10);
    // … but N's first message takes the account's memory over 1024.
    let v = js_api(&a, "n.x", &"x".repeat(100)).await;
    assert_eq!(
        err_of(&v),
        err(400, 10002, "resource limits exceeded for account")
    );
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn limits_and_usage_survive_a_restart() {
    let dir = js_dir("lim-restart");
    let conf = "{ max_file: 3KB, max_streams: 1 }";
    let srv = start(opts(&dir, conf)).await;
    let a = user(&srv, "a").await;
    assert_eq!(create(&a, "F", "").await["did_create"], true);
    let (n, _) = fill(&a, "f.x").await;
    assert_eq!(n, 23);
    drop(a);
    srv.shutdown().await;

    let srv = start(opts(&dir, conf)).await;
    let a = user(&srv, "a").await;
    let v = info(&a).await;
    assert_eq!(v["storage"], 23 * 133, "{v}");
    assert_eq!(v["limits"]["max_storage"], 3072, "{v}");
    assert_eq!(err_of(&js_api(&a, "f.x", &"x".repeat(100)).await).1, 10002);
    assert_eq!(err_of(&create(&a, "G", "").await).1, 10027);
    let v = js_api(&a, "$JS.API.STREAM.PURGE.F", "").await;
    assert_eq!(v["success"], true, "{v}");
    assert!(js_api(&a, "f.x", &"x".repeat(100)).await["seq"].is_u64());
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn account_limits_over_the_server_refuse_to_start() {
    let dir = js_dir("lim-start");
    let mut o = opts(&dir, "{ max_mem: 60KB }");
    if let Some(js) = o.jetstream.as_mut() {
        js.max_memory_store = Some(100 * 1024);
    }
    let mut two = o.clone();
    two.jetstream_limits.insert(
        "U".into(),
        natsd::config::JsLimits::Flat(natsd::config::JsAccountLimits {
            max_memory: 60 * 1024,
            ..Default::default()
        }),
    );
    let e = Server::start(two).await.err().expect("refused");
    assert!(
        e.to_string().contains(
            "Error enabling jetstream on configured accounts: insufficient memory resources \
             available (10028)"
        ),
        "{e}"
    );
    // One account alone fits.
    let srv = start(o).await;
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn reload_applies_new_account_limits() {
    let (srv, a, dir) = setup("lim-reload", "{ max_streams: 1 }").await;
    assert_eq!(create(&a, "S1", "").await["did_create"], true);
    assert_eq!(err_of(&create(&a, "S2", "").await).1, 10027);
    let new = opts(&dir, "{ max_streams: 2, max_mem: 1KB }");
    let changed = srv.reload(new).expect("reloaded");
    assert!(changed.iter().any(|c| c == "accounts"), "{changed:?}");
    assert_eq!(create(&a, "S2", "").await["did_create"], true);
    assert_eq!(info(&a).await["limits"]["max_memory"], 1024);
    // Limits over the server's are refused, and nothing changes.
    let over = opts(&dir, "{ max_streams: 5, max_mem: 1EB }");
    let e = srv.reload(over).expect_err("refused");
    assert!(e.contains("insufficient memory resources available"), "{e}");
    assert_eq!(info(&a).await["limits"]["max_streams"], 2);
    finish(srv, a, &dir).await;
}

/// Create a mirror or source stream from its JSON config.
async fn follower(nc: &async_nats::Client, cfg: &str) {
    let name = serde_json::from_str::<Value>(cfg).expect("config JSON")["name"].clone();
    let subject = format!("$JS.API.STREAM.CREATE.{}", name.as_str().unwrap_or(""));
    let v = js_api(nc, &subject, cfg).await;
    assert_eq!(v["did_create"], true, "{v}");
}

#[tokio::test]
async fn mirrors_and_sources_wait_for_room_and_lose_nothing() {
    let (srv, a, dir) = setup("lim-mirror", "{ max_mem: 2KB }").await;
    assert_eq!(create(&a, "O", "").await["did_create"], true);
    for _ in 0..30 {
        assert!(js_api(&a, "o.x", &"x".repeat(100)).await["seq"].is_u64());
    }
    follower(
        &a,
        r#"{"name":"M","storage":"memory","mirror":{"name":"O"}}"#,
    )
    .await;
    let state = |s: &'static str| {
        let a = a.clone();
        async move { js_api(&a, &format!("$JS.API.STREAM.INFO.{s}"), "").await["state"].clone() }
    };
    // 17 copies of 119 bytes fit in 2048; the mirror stops there, without gaps.
    common::wait_for("the mirror to fill the account", || async {
        state("M").await["messages"] == 17
    })
    .await;
    let v = info(&a).await;
    assert_eq!(v["memory"], 17 * 119, "{v}");
    assert_eq!(state("M").await["last_seq"], 17);
    // More room (a reload): the mirror catches up with everything.
    let changed = srv
        .reload(opts(&dir, "{ max_mem: 8KB }"))
        .expect("reloaded");
    assert!(changed.iter().any(|c| c == "accounts"), "{changed:?}");
    common::wait_for("the mirror to catch up", || async {
        state("M").await["messages"] == 30
    })
    .await;
    // A source waits the same way once the account is full.
    follower(
        &a,
        r#"{"name":"S","storage":"memory","sources":[{"name":"O"}]}"#,
    )
    .await;
    common::wait_for("the source to fill the account", || async {
        let n = state("S").await["messages"].as_u64().unwrap_or(0);
        let m = info(&a).await["memory"].as_u64().unwrap_or(0);
        n > 0 && m + 200 > 8192
    })
    .await;
    let v = info(&a).await;
    assert!(v["memory"].as_u64() <= Some(8192), "{v}");
    let s = state("S").await;
    assert!(s["messages"].as_u64() < Some(30), "{s}");
    assert_eq!(
        s["num_deleted"],
        Value::Null,
        "no sequence used up by waiting: {s}"
    );
    // Room again (the mirror goes): the source takes the rest, in order, none lost.
    let v = js_api(&a, "$JS.API.STREAM.DELETE.M", "").await;
    assert_eq!(v["success"], true, "{v}");
    common::wait_for("the source to catch up", || async {
        state("S").await["messages"] == 30
    })
    .await;
    assert_eq!(state("S").await["last_seq"], 30);
    finish(srv, a, &dir).await;
}

#[tokio::test]
async fn the_servers_limit_counts_every_accounts_reservations() {
    let dir = js_dir("lim-server");
    let mut o = opts(&dir, ": enabled");
    if let Some(js) = o.jetstream.as_mut() {
        js.max_memory_store = Some(2048);
    }
    let srv = start(o).await;
    let (a, u) = (user(&srv, "a").await, user(&srv, "u").await);
    let mem = |b: i64| format!(r#""storage":"memory","max_bytes":{b}"#);
    let no_memory = err(500, 10028, "insufficient memory resources available");
    assert_eq!(create(&a, "M1", &mem(1500)).await["did_create"], true);
    // Reserved, not used: nothing is stored yet and another account is refused.
    assert_eq!(err_of(&create(&u, "M2", &mem(1000)).await), no_memory);
    assert_eq!(create(&u, "M2", &mem(500)).await["did_create"], true);
    assert_eq!(err_of(&update(&a, "M1", &mem(1600)).await), no_memory);
    assert_eq!(
        update(&a, "M1", &mem(1548)).await["config"]["max_bytes"],
        1548
    );
    // Full: even a stream without max_bytes (one byte) does not fit.
    assert_eq!(
        err_of(&create(&u, "M3", r#""storage":"memory""#).await),
        no_memory
    );
    drop(u);
    finish(srv, a, &dir).await;
}
