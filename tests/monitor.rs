//! Monitoring endpoints, black-box: natsd's `/varz`, `/connz`, `/healthz` next to the real
//! nats-server 2.9.10's, field by field, after the same traffic; plus JSONP, status codes and
//! counters. Tools (Prometheus exporters, `nats-top`, dashboards) parse these documents, so
//! every field nats-server writes must be there with the same JSON type.

mod common;

use common::natsserver::{self, same_values, standalone as start_nats_server, NatsServer};
use common::{http_addr, http_get, http_json, start_monitored as start_natsd, wait_for, Raw};
use natsd::Server;
use serde_json::Value;
use std::net::SocketAddr;

/// The traffic both servers get: a named client, two subscriptions (one queue), one message it
/// receives itself. Returns the open connection.
async fn traffic(addr: SocketAddr) -> Raw {
    let mut c = Raw::at(addr).await;
    c.send(concat!(
        r#"CONNECT {"verbose":false,"pedantic":false,"name":"monclient","lang":"rust","version":"1.2.3"}"#,
        "\r\nSUB foo 1\r\nSUB bar q 2\r\nPUB foo 5\r\nhello\r\n"
    ))
    .await;
    let (subject, sid, _, payload) = c.msg().await;
    assert_eq!((subject.as_str(), sid.as_str()), ("foo", "1"));
    assert_eq!(payload, b"hello");
    c.flush().await;
    c
}

/// Every field of `theirs` (nats-server) must be in `ours` (natsd) with the same JSON type,
/// recursively, arrays of the same length. nats-server writes whole floats as integers
/// (`"auth_timeout": 2`), so an integer there must be an integer here too: a client decoding
/// into an integer type would choke on `2.0`. Extra fields in `ours` are fine.
fn same_shape(path: &str, theirs: &Value, ours: &Value, errs: &mut Vec<String>) {
    natsserver::same_shape(path, theirs, ours, &[], true, errs);
}

fn check(what: &str, theirs: &Value, ours: &Value, values: &[&str], errs: &mut Vec<String>) {
    same_shape(what, theirs, ours, errs);
    same_values(what, theirs, ours, values, errs);
}

/// GET `path` on both; returns (nats-server, natsd) JSON.
async fn both(ns: &NatsServer, nd: &Server, path: &str) -> (Value, Value) {
    (
        http_json(ns.http, path).await,
        http_json(http_addr(nd), path).await,
    )
}

const CONN_VALUES: &[&str] = &[
    "/num_connections",
    "/total",
    "/offset",
    "/limit",
    "/connections/0/kind",
    "/connections/0/type",
    "/connections/0/ip",
    "/connections/0/name",
    "/connections/0/lang",
    "/connections/0/version",
    "/connections/0/in_msgs",
    "/connections/0/out_msgs",
    "/connections/0/in_bytes",
    "/connections/0/out_bytes",
    "/connections/0/subscriptions",
    "/connections/0/pending_bytes",
];

#[tokio::test]
async fn monitoring_matches_nats_server_field_by_field() {
    let ns = start_nats_server();
    let nd = start_natsd().await;
    let mut errs = Vec::new();

    // Before any traffic.
    let (ns_varz0, nd_varz0) = both(&ns, &nd, "/varz").await;
    let (ns_empty, nd_empty) = both(&ns, &nd, "/connz").await;
    check(
        "connz(empty)",
        &ns_empty,
        &nd_empty,
        &["/num_connections", "/total", "/offset", "/limit"],
        &mut errs,
    );

    let ns_client = traffic(ns.client).await;
    let nd_client = traffic(nd.client_addr()).await;

    let (ns_varz, nd_varz) = both(&ns, &nd, "/varz").await;
    check(
        "varz",
        &ns_varz,
        &nd_varz,
        &[
            "/version",
            "/proto",
            "/go",
            "/host",
            "/max_connections",
            "/ping_interval",
            "/ping_max",
            "/http_host",
            "/http_base_path",
            "/https_port",
            "/auth_timeout",
            "/max_control_line",
            "/max_payload",
            "/max_pending",
            "/tls_timeout",
            "/write_deadline",
            "/connections",
            "/total_connections",
            "/routes",
            "/remotes",
            "/leafnodes",
            "/in_msgs",
            "/out_msgs",
            "/in_bytes",
            "/out_bytes",
            "/slow_consumers",
            "/http_req_stats",
            "/system_account",
        ],
        &mut errs,
    );
    // Both listen where they say they do.
    assert_eq!(nd_varz["port"], nd.client_addr().port());
    assert_eq!(nd_varz["http_port"], http_addr(&nd).port());
    assert_eq!(ns_varz["port"], ns.client.port());
    // nats-server counts its ~45 internal $SYS subscriptions, natsd none: compare the change.
    let delta = |v0: &Value, v: &Value| {
        v["subscriptions"].as_i64().unwrap_or(-1000) - v0["subscriptions"].as_i64().unwrap_or(0)
    };
    assert_eq!(delta(&ns_varz0, &ns_varz), 2, "nats-server subscriptions");
    assert_eq!(delta(&nd_varz0, &nd_varz), 2, "natsd subscriptions");

    let (ns_connz, nd_connz) = both(&ns, &nd, "/connz").await;
    check("connz", &ns_connz, &nd_connz, CONN_VALUES, &mut errs);
    assert_eq!(nd_connz["connections"][0]["name"], "monclient");

    let (ns_subs, nd_subs) = both(&ns, &nd, "/connz?subs=1").await;
    check("connz?subs=1", &ns_subs, &nd_subs, CONN_VALUES, &mut errs);
    let sorted = |v: &Value| {
        let mut s: Vec<String> = v["connections"][0]["subscriptions_list"]
            .as_array()
            .map(|a| a.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        s.sort();
        s
    };
    assert_eq!(sorted(&nd_subs), ["\"bar\"", "\"foo\""]);
    assert_eq!(sorted(&ns_subs), sorted(&nd_subs), "subscriptions_list");

    let (ns_health, nd_health) = both(&ns, &nd, "/healthz").await;
    check("healthz", &ns_health, &nd_health, &["/status"], &mut errs);

    // The client leaves; both remember it as closed with the same reason.
    drop(ns_client);
    drop(nd_client);
    for addr in [ns.http, http_addr(&nd)] {
        wait_for(
            "the closed connection in /connz?state=closed",
            || async move { http_json(addr, "/connz?state=closed").await["num_connections"] == 1 },
        )
        .await;
    }
    let (ns_closed, nd_closed) = both(&ns, &nd, "/connz?state=closed").await;
    // A closed connection keeps its subscription count (2 here) on both servers.
    let mut closed_values: Vec<&str> = CONN_VALUES.to_vec();
    closed_values.push("/connections/0/reason");
    check(
        "connz?state=closed",
        &ns_closed,
        &nd_closed,
        &closed_values,
        &mut errs,
    );
    assert_eq!(nd_closed["connections"][0]["reason"], "Client Closed");
    assert!(nd_closed["connections"][0]["stop"].is_string());

    let (ns_varz2, nd_varz2) = both(&ns, &nd, "/varz").await;
    check(
        "varz(after close)",
        &ns_varz2,
        &nd_varz2,
        // (http_req_stats differ here: the wait above polled each a different number of times)
        &["/connections", "/total_connections"],
        &mut errs,
    );

    assert!(
        errs.is_empty(),
        "natsd's monitoring differs from nats-server's:\n  {}",
        errs.join("\n  ")
    );
    nd.shutdown().await;
}

#[tokio::test]
async fn varz_counters_move_with_traffic() {
    let nd = start_natsd().await;
    let http = http_addr(&nd);
    let v0 = http_json(http, "/varz").await;
    // The server's own ($SYS services') subscriptions are there from the start.
    let base = v0["subscriptions"].as_u64().expect("subscriptions");
    assert!(base > 0, "{v0}");
    for k in [
        "connections",
        "total_connections",
        "in_msgs",
        "out_msgs",
        "in_bytes",
        "out_bytes",
    ] {
        assert_eq!(v0[k], 0, "{k} before any client");
    }

    let mut sub = Raw::client(&nd).await;
    sub.send("SUB news 1\r\nSUB news.> 2\r\n").await;
    sub.flush().await;
    let mut publ = Raw::client(&nd).await;
    publ.send("PUB news 3\r\nabc\r\nPUB news.eu 4\r\nabcd\r\n")
        .await;
    publ.flush().await;
    assert_eq!(sub.msg().await.3, b"abc");
    assert_eq!(sub.msg().await.3, b"abcd");

    let v = http_json(http, "/varz").await;
    assert_eq!(v["connections"], 2);
    assert_eq!(v["total_connections"], 2);
    assert_eq!(v["subscriptions"], base + 2);
    assert_eq!(v["in_msgs"], 2);
    assert_eq!(v["in_bytes"], 7);
    assert_eq!(v["out_msgs"], 2);
    assert_eq!(v["out_bytes"], 7);

    // A connection that leaves: current count drops, the total does not, its subs go.
    drop(sub);
    wait_for("connections to drop to 1", || async move {
        http_json(http, "/varz").await["connections"] == 1
    })
    .await;
    let v = http_json(http, "/varz").await;
    assert_eq!(v["total_connections"], 2);
    assert_eq!(v["subscriptions"], base);
    assert_eq!(
        v["http_req_stats"]["/varz"].as_u64().map(|n| n >= 3),
        Some(true)
    );
    nd.shutdown().await;
}

#[tokio::test]
async fn healthz_jsonp_and_status_codes() {
    let nd = start_natsd().await;
    let http = http_addr(&nd);

    // nats-server writes /healthz compact, not indented: probes compare the body literally.
    assert_eq!(
        http_get(http, "/healthz").await,
        (200, r#"{"status":"ok"}"#.to_string())
    );
    assert_eq!(
        http_get(http, "/healthz?callback=cb").await,
        (200, r#"cb({"status":"ok"})"#.to_string())
    );

    // JSONP wraps the whole (indented) document.
    let (status, body) = http_get(http, "/varz?callback=cb").await;
    assert_eq!(status, 200);
    let inner = body
        .strip_prefix("cb(")
        .and_then(|b| b.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not JSONP: {body}"));
    let v: Value = serde_json::from_str(inner).expect("JSON inside the callback");
    assert_eq!(v["server_id"], nd.id());
    let (status, body) = http_get(http, "/connz?callback=cb").await;
    assert_eq!(status, 200);
    assert!(body.starts_with("cb({\n  \"server_id\""), "{body}");

    // Plain JSON: pretty-printed with 2 spaces, no trailing newline, like nats-server.
    let (_, body) = http_get(http, "/varz").await;
    assert!(body.starts_with("{\n  \"server_id\": \""), "{body}");
    assert!(body.ends_with("\n}"), "{body}");

    // Unknown paths are 404 with Go's body.
    assert_eq!(
        http_get(http, "/nonexistent").await,
        (404, "404 page not found\n".to_string())
    );

    // Bad query values are 400 with a reason, not a silently different answer (as nats-server).
    for q in [
        "/connz?sort=bogus",
        "/connz?limit=abc",
        "/connz?cid=abc",
        "/connz?subs=bogus",
        "/connz?state=bogus",
        "/connz?sort=stop",
        "/connz?state=all&sort=stop",
    ] {
        let (status, body) = http_get(http, q).await;
        assert_eq!(status, 400, "{q}: {body}");
        assert!(!body.is_empty(), "{q}: 400 without a reason");
    }
    // Good ones still work; nats-server clamps a negative offset or limit instead of failing.
    for q in [
        "/connz?sort=start",
        "/connz?limit=1&offset=0",
        "/connz?offset=-1&limit=-5",
        "/connz?subs=detail",
        "/connz?state=closed&sort=stop",
        "/connz?state=any",
    ] {
        assert_eq!(http_get(http, q).await.0, 200, "{q}");
    }
    nd.shutdown().await;
}

#[tokio::test]
async fn connz_paging_and_cid_filter() {
    let nd = start_natsd().await;
    let http = http_addr(&nd);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Raw::client(&nd).await);
    }
    let all = http_json(http, "/connz").await;
    assert_eq!(all["num_connections"], 3);
    assert_eq!(all["total"], 3);
    let cids: Vec<u64> = all["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .filter_map(|c| c["cid"].as_u64())
        .collect();
    assert!(
        cids.windows(2).all(|w| w[0] < w[1]),
        "sorted by cid: {cids:?}"
    );

    let page = http_json(http, "/connz?offset=1&limit=1").await;
    assert_eq!(page["num_connections"], 1);
    assert_eq!(page["total"], 3);
    assert_eq!(page["offset"], 1);
    assert_eq!(page["limit"], 1);
    assert_eq!(page["connections"][0]["cid"], cids[1]);

    let one = http_json(http, &format!("/connz?cid={}", cids[2])).await;
    assert_eq!(one["num_connections"], 1);
    assert_eq!(one["connections"][0]["cid"], cids[2]);
    nd.shutdown().await;
}
