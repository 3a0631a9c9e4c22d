//! The `$JS.API` requests about the server as a standalone nats-server 2.9.10 answers them
//! (docs/nats-server-behaviour.md §14 "Cluster-only requests, account purge"): stepdowns
//! and peer removal get 503 10010 in any account, meta stepdown / server remove / stream
//! move get no answer, and `ACCOUNT.PURGE.<account>` deletes every stream of the account
//! (from the system account or the account itself only: natsd's deliberate difference).

mod common;

use common::{conf_opts, js_api, js_dir, start, user};
use futures::StreamExt;
use natsd::Options;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// Accounts `A` and `B` with JetStream, `N` without, `SYS` the system account (users are
/// the account names in lower case, passwords the same).
fn opts(dir: &Path, js_extra: &str) -> Options {
    opts_a(dir, js_extra, "jetstream: enabled,")
}

/// As [`opts`], with `a_js` in account `A`'s block (`""`: no JetStream).
fn opts_a(dir: &Path, js_extra: &str, a_js: &str) -> Options {
    let conf = format!(
        "jetstream {{ store_dir: {:?} {js_extra} }}\naccounts {{\n  \
         A {{ {a_js} users [{{user: a, password: a}}] }}\n  \
         B {{ jetstream: enabled, users [{{user: b, password: b}}] }}\n  \
         N {{ users [{{user: n, password: n}}] }}\n  \
         SYS {{ users [{{user: sys, password: sys}}] }}\n}}\nsystem_account: SYS\n",
        dir.display().to_string()
    );
    conf_opts(&conf)
}

/// Create stream `name` on `subjects` (a JSON list) with `storage`; it must succeed.
async fn stream(nc: &async_nats::Client, name: &str, subjects: &str, storage: &str) {
    let body = format!(r#"{{"name":"{name}","subjects":{subjects},"storage":"{storage}"}}"#);
    let r = js_api(nc, &format!("$JS.API.STREAM.CREATE.{name}"), &body).await;
    assert!(r["error"].is_null(), "{r}");
}

/// Create durable pull consumer `name` on `stream`; it must succeed.
async fn durable(nc: &async_nats::Client, stream: &str, name: &str) {
    let body = format!(
        r#"{{"stream_name":"{stream}","config":{{"durable_name":"{name}","ack_policy":"explicit"}}}}"#
    );
    let subject = format!("$JS.API.CONSUMER.DURABLE.CREATE.{stream}.{name}");
    let r = js_api(nc, &subject, &body).await;
    assert!(r["error"].is_null(), "{r}");
}

/// Send `subject` and check that it gets no answer: a later request `marker`, which is
/// answered, comes back first (the JetStream task takes requests in order). A "no
/// responders" status (nothing subscribed, as in the system account) is no answer either.
async fn no_answer(nc: &async_nats::Client, subject: &str, marker: &str) {
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(subject.to_string(), inbox, "{}".into())
        .await
        .expect("publish");
    let _ = js_api(nc, marker, "").await;
    let got = tokio::time::timeout(Duration::from_millis(50), sub.next()).await;
    if let Ok(Some(m)) = got {
        if m.status == Some(async_nats::StatusCode::NO_RESPONDERS) {
            return;
        }
        panic!(
            "{subject}: unexpected answer {}",
            String::from_utf8_lossy(&m.payload)
        );
    }
}

fn cluster_required(op: &str) -> Value {
    json!({"type": format!("io.nats.jetstream.api.v1.{op}_response"),
        "error": {"code": 503, "err_code": 10010,
            "description": "JetStream clustering support required"}})
}

fn purged() -> Value {
    json!({"type": "io.nats.jetstream.api.v1.account_purge_response", "initiated": true})
}

async fn names(nc: &async_nats::Client) -> Value {
    js_api(nc, "$JS.API.STREAM.NAMES", "").await["streams"].clone()
}

#[tokio::test]
async fn cluster_only_requests_answer_clustering_required() {
    let dir = js_dir("admin-cluster");
    let srv = start(opts(&dir, ", domain: hub")).await;
    let a = user(&srv, "a").await;
    let n = user(&srv, "n").await;
    stream(&a, "X", r#"["x"]"#, "file").await;
    let asked = [
        (
            "$JS.API.STREAM.LEADER.STEPDOWN.X",
            "",
            "stream_leader_stepdown",
        ),
        (
            "$JS.API.STREAM.LEADER.STEPDOWN.NOPE",
            "",
            "stream_leader_stepdown",
        ),
        (
            "$JS.hub.API.STREAM.LEADER.STEPDOWN.X",
            "",
            "stream_leader_stepdown",
        ),
        ("$JS.API.STREAM.PEER.REMOVE.X", "{bad", "stream_remove_peer"),
        (
            "$JS.API.STREAM.PEER.REMOVE.NOPE",
            r#"{"peer":"x"}"#,
            "stream_remove_peer",
        ),
        (
            "$JS.API.CONSUMER.LEADER.STEPDOWN.X.C",
            "",
            "consumer_leader_stepdown",
        ),
        (
            "$JS.API.CONSUMER.LEADER.STEPDOWN.NOPE.C",
            "",
            "consumer_leader_stepdown",
        ),
    ];
    for (subject, body, op) in asked {
        assert_eq!(
            js_api(&a, subject, body).await,
            cluster_required(op),
            "{subject}"
        );
    }
    // Each answered one counts as a request and an error (the INFO itself not yet).
    let info = js_api(&a, "$JS.API.INFO", "").await;
    assert_eq!(info["api"], json!({"total": 8, "errors": 7}));
    for subject in [
        "$JS.API.STREAM.LEADER.STEPDOWN",
        "$JS.API.STREAM.PEER.REMOVE",
        "$JS.API.CONSUMER.LEADER.STEPDOWN.X",
        "$JS.API.META.LEADER.STEPDOWN",
        "$JS.API.SERVER.REMOVE",
        "$JS.API.ACCOUNT.STREAM.MOVE.X",
    ] {
        no_answer(&a, subject, "$JS.API.INFO").await;
    }
    // An account without JetStream gets the same answer (not 10039).
    for (subject, op) in [
        ("$JS.API.STREAM.LEADER.STEPDOWN.X", "stream_leader_stepdown"),
        ("$JS.API.STREAM.PEER.REMOVE.X", "stream_remove_peer"),
        (
            "$JS.API.CONSUMER.LEADER.STEPDOWN.X.C",
            "consumer_leader_stepdown",
        ),
    ] {
        assert_eq!(
            js_api(&n, subject, "").await,
            cluster_required(op),
            "{subject}"
        );
    }
    no_answer(&n, "$JS.API.META.LEADER.STEPDOWN", "$JS.API.INFO").await;
    drop((a, n));
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn account_purge_deletes_every_stream_of_the_account() {
    let dir = js_dir("admin-purge");
    let srv = start(opts(&dir, "")).await;
    let (a, b, sys) = (
        user(&srv, "a").await,
        user(&srv, "b").await,
        user(&srv, "sys").await,
    );
    stream(&a, "X", r#"["X.>"]"#, "file").await;
    stream(&a, "M", r#"["M.>"]"#, "memory").await;
    durable(&a, "X", "D").await;
    let r = js_api(&a, "X.one", "hello").await;
    assert_eq!(r["seq"], 1, "{r}");
    stream(&b, "Y", r#"["y"]"#, "file").await;
    let a_dir = dir.join("jetstream").join("A");
    assert!(a_dir.join("streams").join("X").is_dir());

    // Another account may not purge A (nats-server 2.9.10 would): no answer, nothing gone.
    no_answer(&b, "$JS.API.ACCOUNT.PURGE.A", "$JS.API.INFO").await;
    assert_eq!(names(&a).await, json!(["M", "X"]));

    // The account itself may.
    assert_eq!(js_api(&a, "$JS.API.ACCOUNT.PURGE.A", "").await, purged());
    assert_eq!(
        js_api(&a, "$JS.API.STREAM.NAMES", "").await,
        json!({"type": "io.nats.jetstream.api.v1.stream_names_response",
            "total": 0, "offset": 0, "limit": 1024, "streams": null})
    );
    assert!(!a_dir.exists(), "{} still there", a_dir.display());
    let info = js_api(&a, "$JS.API.INFO", "").await;
    assert_eq!(
        (info["streams"].clone(), info["consumers"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(names(&b).await, json!(["Y"]), "B untouched");

    // The system account may purge any account, also unknown ones; a bad body is ignored.
    assert_eq!(
        js_api(&sys, "$JS.API.ACCOUNT.PURGE.B", "{bad").await,
        purged()
    );
    assert_eq!(names(&b).await, Value::Null);
    assert_eq!(
        js_api(&sys, "$JS.API.ACCOUNT.PURGE.NOPE", "").await,
        purged()
    );
    assert_eq!(js_api(&sys, "$JS.API.ACCOUNT.PURGE.N", "").await, purged());
    no_answer(&sys, "$JS.API.ACCOUNT.PURGE", "$JS.API.ACCOUNT.PURGE.NOPE").await;
    no_answer(
        &sys,
        "$JS.API.ACCOUNT.PURGE.A.B",
        "$JS.API.ACCOUNT.PURGE.NOPE",
    )
    .await;

    // JetStream stays on: the account creates again, and a restart brings back nothing
    // purged.
    stream(&a, "Z", r#"["z"]"#, "file").await;
    drop((a, b, sys));
    srv.shutdown().await;
    let srv = start(opts(&dir, "")).await;
    let (a, b) = (user(&srv, "a").await, user(&srv, "b").await);
    assert_eq!(names(&a).await, json!(["Z"]));
    assert_eq!(names(&b).await, Value::Null);
    drop((a, b));
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn template_err(op: &str, code: u64, err_code: u64, d: &str) -> Value {
    json!({"type": format!("io.nats.jetstream.api.v1.stream_template_{op}_response"),
        "error": {"code": code, "err_code": err_code, "description": d}})
}

#[tokio::test]
async fn stream_template_requests_are_checked_as_nats_server_does() {
    let (srv, nc, dir) = common::start_js("admin-template-checks").await;
    let names = json!({"type": "io.nats.jetstream.api.v1.stream_template_names_response",
        "total": 0, "offset": 0, "limit": 1024, "streams": []});
    assert_eq!(
        js_api(&nc, "$JS.API.STREAM.TEMPLATE.NAMES", "").await,
        names
    );
    let t = r#"{"name":"T","config":{"subjects":["t.*"]},"max_streams":2}"#;
    let cases = [
        (
            "INFO.T",
            "",
            template_err("info", 404, 10068, "template not found"),
        ),
        (
            "DELETE.T",
            "",
            template_err("delete", 404, 10068, "template not found"),
        ),
        (
            "CREATE.T",
            "",
            template_err("create", 400, 10025, "invalid JSON"),
        ),
        (
            "CREATE.T",
            r#"{"name":"T","config":{"subjects":["t.*"]},"max_streams":-1}"#,
            template_err("create", 400, 10025, "invalid JSON"),
        ),
        (
            "CREATE.U",
            t,
            template_err(
                "create",
                400,
                10073,
                "template name in subject does not match request",
            ),
        ),
        (
            "CREATE.T",
            r#"{"name":"T","config":{"name":"x","subjects":["t.*"]},"max_streams":2}"#,
            template_err("create", 500, 10066, "template config name should be empty"),
        ),
        (
            "CREATE.T",
            r#"{"name":"T","config":{"subjects":["t.*"],"max_age":-5},"max_streams":2}"#,
            template_err(
                "create",
                500,
                10052,
                "duplicates window can not be negative",
            ),
        ),
        // 2.9.10 crashes on this one.
        (
            "CREATE.T",
            r#"{"name":"T","max_streams":2}"#,
            template_err("create", 500, 10066, "template config is required"),
        ),
    ];
    for (op, body, want) in cases {
        let subject = format!("$JS.API.STREAM.TEMPLATE.{op}");
        assert_eq!(js_api(&nc, &subject, body).await, want, "{subject} {body}");
    }
    let r = js_api(&nc, "$JS.API.STREAM.TEMPLATE.CREATE.T", t).await;
    assert_eq!(r["config"]["config"]["name"], "_", "{r}");
    assert_eq!(r["streams"], json!([]), "{r}");
    assert_eq!(
        js_api(&nc, "$JS.API.STREAM.TEMPLATE.CREATE.T", t).await,
        template_err(
            "create",
            500,
            10066,
            "template with name \"T\" already exists"
        )
    );
    no_answer(&nc, "$JS.API.STREAM.TEMPLATE.INFO.a.b", "$JS.API.INFO").await;
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn stream_templates_create_streams_on_demand_and_persist() {
    let (srv, nc, dir) = common::start_js("admin-templates").await;
    let create = |name: &str, subjects: &str, max: u32| {
        format!(
            r#"{{"name":"{name}","config":{{"subjects":{subjects},"max_msgs":5}},"max_streams":{max}}}"#
        )
    };
    let r = js_api(
        &nc,
        "$JS.API.STREAM.TEMPLATE.CREATE.T",
        &create("T", r#"["t.*"]"#, 2),
    )
    .await;
    assert_eq!(
        r["config"],
        json!({"name": "T", "config": {"name": "_", "subjects": ["t.*"],
            "retention": "limits", "max_consumers": -1, "max_msgs": 5, "max_bytes": -1,
            "max_age": 0, "max_msgs_per_subject": -1, "max_msg_size": -1, "discard": "old",
            "storage": "file", "num_replicas": 1, "duplicate_window": 120000000000u64,
            "allow_direct": false, "mirror_direct": false, "sealed": false,
            "deny_delete": false, "deny_purge": false, "allow_rollup_hdrs": false},
            "max_streams": 2}),
        "{r}"
    );
    let r = js_api(
        &nc,
        "$JS.API.STREAM.TEMPLATE.CREATE.G",
        &create("G", r#"["t.x"]"#, 1),
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let ack = |s: &str, seq: u64| json!({"stream": s, "seq": seq});
    assert_eq!(js_api(&nc, "t.a", "one").await, ack("t_a", 1));
    assert_eq!(js_api(&nc, "t.a", "two").await, ack("t_a", 2));
    // The template on the literal subject takes it over the one on `t.*`.
    assert_eq!(js_api(&nc, "t.x", "x").await, ack("t_x", 1));
    assert_eq!(js_api(&nc, "t.b", "b").await, ack("t_b", 1));
    // T is at its max_streams: no stream, no answer.
    no_answer(&nc, "t.c", "$JS.API.INFO").await;
    let info = js_api(&nc, "$JS.API.STREAM.INFO.t_a", "").await;
    assert_eq!(info["config"]["template_owner"], "T", "{info}");
    assert_eq!(info["config"]["subjects"], json!(["t.a"]), "{info}");
    assert_eq!(info["config"]["max_msgs"], 5, "{info}");
    assert_eq!(info["state"]["messages"], 2, "{info}");
    let t = js_api(&nc, "$JS.API.STREAM.TEMPLATE.INFO.T", "").await;
    assert_eq!(t["streams"], json!(["t_a", "t_b"]), "{t}");
    // A deleted template stream keeps its place: listed, counted, not made again.
    let r = js_api(&nc, "$JS.API.STREAM.DELETE.t_b", "").await;
    assert_eq!(r["success"], true, "{r}");
    no_answer(&nc, "t.b", "$JS.API.INFO").await;
    let t = js_api(&nc, "$JS.API.STREAM.TEMPLATE.INFO.T", "").await;
    assert_eq!(t["streams"], json!(["t_a", "t_b"]), "{t}");

    // A restart brings back the templates and their streams; each message is stored once.
    drop(nc);
    srv.shutdown().await;
    let (srv, nc) = common::start_js_in(&dir).await;
    let tn = js_api(&nc, "$JS.API.STREAM.TEMPLATE.NAMES", "").await;
    assert_eq!(
        (&tn["total"], &tn["streams"]),
        (&json!(2), &json!(["G", "T"]))
    );
    assert_eq!(js_api(&nc, "t.a", "three").await, ack("t_a", 3));
    let info = js_api(&nc, "$JS.API.STREAM.INFO.t_a", "").await;
    assert_eq!(info["state"]["messages"], 3, "{info}");

    // Deleting a template deletes its streams.
    assert_eq!(
        js_api(&nc, "$JS.API.STREAM.TEMPLATE.DELETE.T", "").await,
        json!({"type": "io.nats.jetstream.api.v1.stream_template_delete_response",
            "success": true})
    );
    assert_eq!(names(&nc).await, json!(["t_x"]));
    assert!(!dir.join("jetstream/$G/templates/T").exists());
    drop(nc);
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

fn not_enabled(op: &str, extra: Value) -> Value {
    let mut v = json!({"type": format!("io.nats.jetstream.api.v1.{op}_response"),
        "error": {"code": 503, "err_code": 10039,
            "description": "JetStream not enabled for account"}});
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}

#[tokio::test]
async fn reload_enables_and_disables_jetstream_for_one_account() {
    let dir = js_dir("admin-reload");
    let srv = start(opts_a(&dir, "", "")).await;
    let (a, b) = (user(&srv, "a").await, user(&srv, "b").await);
    let info_off = not_enabled("account_info", json!({}));
    assert_eq!(js_api(&a, "$JS.API.INFO", "").await, info_off);

    // Enabled by a reload: A's API answers and streams can be created.
    let changed = srv
        .reload(opts_a(&dir, "", "jetstream: enabled,"))
        .expect("reloaded");
    assert_eq!(changed, ["accounts"]);
    stream(&a, "X", r#"["x"]"#, "file").await;
    stream(&a, "M", r#"["m"]"#, "memory").await;
    durable(&a, "X", "D").await;
    assert_eq!(js_api(&a, "x", "one").await["seq"], 1);
    stream(&b, "Y", r#"["y"]"#, "file").await;
    let tpl = r#"{"name":"T","config":{"subjects":["t.*"]},"max_streams":5}"#;
    let r = js_api(&a, "$JS.API.STREAM.TEMPLATE.CREATE.T", tpl).await;
    assert!(r["error"].is_null(), "{r}");

    // Disabled: 10039 everywhere, nothing stored, the files stay; B is untouched.
    srv.reload(opts_a(&dir, "", "")).expect("reloaded");
    assert_eq!(js_api(&a, "$JS.API.INFO", "").await, info_off);
    assert_eq!(
        js_api(&a, "$JS.API.STREAM.NAMES", "").await,
        not_enabled(
            "stream_names",
            json!({"total": 0, "offset": 0, "limit": 0, "streams": null})
        )
    );
    assert_eq!(
        js_api(&a, "$JS.API.STREAM.TEMPLATE.NAMES", "").await,
        not_enabled(
            "stream_template_names",
            json!({"total": 0, "offset": 0, "limit": 0, "streams": null})
        )
    );
    for subject in ["x", "t.a"] {
        let pubd = a.request(subject, "two".into()).await;
        assert!(pubd.is_err(), "nothing takes {subject}: {pubd:?}");
    }
    assert!(dir.join("jetstream/A/streams/X/meta.json").is_file());
    assert_eq!(names(&b).await, json!(["Y"]));

    // Enabled again: the file stream and its consumer come back from disk (the memory
    // stream does not), the API counters start over.
    srv.reload(opts_a(&dir, "", "jetstream: enabled,"))
        .expect("reloaded");
    let info = js_api(&a, "$JS.API.INFO", "").await;
    assert_eq!(
        (&info["streams"], &info["consumers"], &info["api"]),
        (&json!(1), &json!(1), &json!({"total": 0, "errors": 0})),
        "{info}"
    );
    assert_eq!(js_api(&a, "x", "three").await["seq"], 2);
    assert_eq!(
        js_api(&a, "t.a", "t").await,
        json!({"stream": "t_a", "seq": 1})
    );
    let c = js_api(&a, "$JS.API.CONSUMER.INFO.X.D", "").await;
    assert_eq!(c["num_pending"], 2, "{c}");

    // Turning JetStream itself off is still refused.
    let mut off = opts_a(&dir, "", "jetstream: enabled,");
    off.jetstream = None;
    let e = srv.reload(off).expect_err("refused");
    assert!(e.contains("JetStream"), "{e}");
    drop((a, b));
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
