//! Limits an operator sets as in nats-server (docs/limits.md has the audit): `max_sub_tokens`
//! and accounts' `limits { max_connections, max_subscriptions, max_payload, max_leafnodes }`,
//! each parsed with nats-server's keys, aliases and texts and enforced as nats-server 2.9.10
//! and 2.15.1 do (observed side by side; the texts below are theirs).

mod common;

use common::*;
use natsd::config::file::load_str;

fn refused(conf: &str) -> String {
    match load_str(conf) {
        Ok(_) => panic!("expected {conf:?} to be refused"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn max_sub_tokens_is_parsed_as_nats_server() {
    assert_eq!(conf_opts("max_sub_tokens: 3").max_sub_tokens, 3);
    assert_eq!(
        conf_opts("max_subscription_tokens: 255").max_sub_tokens,
        255
    );
    assert_eq!(conf_opts("").max_sub_tokens, 0, "default: unlimited");
    let e = refused("max_sub_tokens: 256");
    assert!(e.contains("max_sub_tokens value is too big"), "{e}");
    let e = refused("max_sub_tokens: 0");
    assert!(
        e.contains("max_sub_tokens value can not be negative"),
        "{e}"
    );
}

#[tokio::test]
async fn a_subscription_with_too_many_tokens_is_refused() {
    let srv = start(conf_opts("max_sub_tokens: 3")).await;
    let mut c = Raw::client(&srv).await;
    c.send("SUB a.b.c 1\r\nSUB a.b.c.d 2\r\nSUB a.*.> 3\r\nPING\r\n")
        .await;
    assert_eq!(
        c.line().await,
        r#"-ERR 'Permissions Violation for Subscription to "a.b.c.d", too many tokens'"#
    );
    assert_eq!(c.line().await, "PONG", "the connection stays");
    // The allowed ones work.
    c.send("PUB a.b.c 2\r\nhi\r\n").await;
    let mut sids = vec![c.msg().await.1, c.msg().await.1];
    sids.sort();
    assert_eq!(sids, ["1", "3"]);
    srv.shutdown().await;
}

const ACCOUNTS: &str = r#"
accounts {
  A {
    users [{user: a, password: a}]
    limits { max_connections: 1, max_subscriptions: 2, max_payload: 100, max_leafnodes: 0 }
  }
  B { users [{user: b, password: b}] }
}
"#;

fn login(u: &str) -> String {
    format!(
        r#"{{"verbose":false,"pedantic":false,"user":"{u}","pass":"{u}","protocol":1,"headers":true}}"#
    )
}

#[test]
fn account_limits_are_parsed_as_nats_server() {
    let o = conf_opts(ACCOUNTS);
    let a = o.account_limits.get("A").copied().expect("A's limits");
    assert_eq!(
        (
            a.max_connections,
            a.max_subscriptions,
            a.max_payload,
            a.max_leafnodes
        ),
        (1, 2, 100, 0)
    );
    assert!(!o.account_limits.contains_key("B"));
    let o = conf_opts(
        "accounts { A { limits { max_conn: 5, max_subs: 6, max_pay: 7, max_leafs: 8 } } }",
    );
    let a = o.account_limits.get("A").copied().expect("aliases");
    assert_eq!(
        (
            a.max_connections,
            a.max_subscriptions,
            a.max_payload,
            a.max_leafnodes
        ),
        (5, 6, 7, 8)
    );
    let e = refused("accounts { A { limits { max_bytes: 1 } } }");
    assert!(
        e.contains(r#"Unknown field "max_bytes" parsing account limits"#),
        "{e}"
    );
    let e = refused("accounts { A { limits: 5 } }");
    assert!(
        e.contains("Expected account limits to be a map/struct, got 5"),
        "{e}"
    );
}

#[tokio::test]
async fn an_accounts_connection_limit_refuses_the_next_client() {
    let srv = start(Options {
        http_port: Some(0),
        ..conf_opts(ACCOUNTS)
    })
    .await;
    let first = Raw::connected(&srv, &login("a")).await;
    let (mut second, _) = Raw::connect(&srv).await;
    second
        .send(&format!("CONNECT {}\r\nPING\r\n", login("a")))
        .await;
    assert_eq!(
        second.line().await,
        "-ERR 'maximum account active connections exceeded'"
    );
    assert!(second.closed().await);
    // Another account is not limited by A's limit.
    let _b1 = Raw::connected(&srv, &login("b")).await;
    let _b2 = Raw::connected(&srv, &login("b")).await;
    wait_for("the refused client in closed connections", || {
        let srv = &srv;
        async move {
            let c = http_json(http_addr(srv), "/connz?state=closed").await;
            c["connections"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|c| c["reason"] == "Maximum Account Connections Exceeded")
            })
        }
    })
    .await;
    // Once the first one leaves, the account has room again.
    drop(first);
    wait_for("A's slot freed", || {
        let srv = &srv;
        async move {
            let (mut c, _) = Raw::connect(srv).await;
            c.send(&format!("CONNECT {}\r\nPING\r\n", login("a"))).await;
            c.line().await == "PONG"
        }
    })
    .await;
    srv.shutdown().await;
}

#[tokio::test]
async fn an_accounts_subscription_limit_applies_to_its_clients() {
    let srv = start(conf_opts(ACCOUNTS)).await;
    let mut a = Raw::connected(&srv, &login("a")).await;
    // The INFO with A's max_payload that follows the first PONG.
    assert!(a.line().await.starts_with("INFO {"));
    a.send("SUB x 1\r\nSUB y 2\r\nSUB z 3\r\nPING\r\n").await;
    assert_eq!(a.line().await, "-ERR 'maximum subscriptions exceeded'");
    assert_eq!(a.line().await, "PONG", "the connection stays");
    let mut b = Raw::connected(&srv, &login("b")).await;
    b.send("SUB x 1\r\nSUB y 2\r\nSUB z 3\r\nPING\r\n").await;
    assert_eq!(b.line().await, "PONG", "B has no limit");
    srv.shutdown().await;
}

#[tokio::test]
async fn an_accounts_payload_limit_is_announced_and_enforced() {
    let srv = start(conf_opts(ACCOUNTS)).await;
    let (mut a, info) = Raw::connect(&srv).await;
    assert_eq!(
        info["max_payload"],
        1024 * 1024,
        "before CONNECT: the server's"
    );
    a.send(&format!("CONNECT {}\r\nPING\r\n", login("a"))).await;
    // As nats-server: the PONG, then an INFO with the account's max_payload.
    assert_eq!(a.line().await, "PONG");
    let line = a.line().await;
    let json: serde_json::Value =
        serde_json::from_str(line.strip_prefix("INFO ").expect("an INFO")).expect("JSON");
    assert_eq!(json["max_payload"], 100, "{line}");
    // A client of another account gets no such INFO.
    let mut b = Raw::connected(&srv, &login("b")).await;
    b.send("PING\r\n").await;
    assert_eq!(b.line().await, "PONG");
    // 100 bytes pass, 101 close the connection as nats-server does.
    a.send(&format!("SUB p 1\r\nPUB p 100\r\n{}\r\n", "x".repeat(100)))
        .await;
    let (_, _, _, payload) = a.msg().await;
    assert_eq!(payload.len(), 100);
    a.send(&format!("PUB p 101\r\n{}\r\n", "x".repeat(101)))
        .await;
    assert_eq!(a.line().await, "-ERR 'Maximum Payload Violation'");
    assert!(a.closed().await);
    srv.shutdown().await;
}

use natsd::Options;

#[test]
fn error_report_intervals_are_parsed_as_nats_server() {
    let o = conf_opts("");
    assert_eq!(
        (o.connect_error_reports, o.reconnect_error_reports),
        (3600, 1)
    );
    let o = conf_opts("connect_error_reports: 2\nreconnect_error_reports: 5");
    assert_eq!((o.connect_error_reports, o.reconnect_error_reports), (2, 5));
    let o = conf_opts("connect_error_reports: 0\nreconnect_error_reports: 0");
    assert_eq!(
        (o.connect_error_reports, o.reconnect_error_reports),
        (3600, 1),
        "0: the default"
    );
    let e = refused("connect_error_reports: -1");
    assert!(e.contains("must not be negative"), "{e}");
}

/// A seed that never answers: its failed dials are errors at attempts 1, 2, 4, …
/// (`connect_error_reports: 2`), the others only at debug level, with nats-server's line.
#[test]
fn failed_route_dials_are_reported_every_connect_error_reports() {
    use common::binary::{tmp_dir, write_conf, Proc};
    let dir = tmp_dir("limits", "error-reports");
    let dead = free_port();
    let conf = write_conf(
        &dir,
        "n.conf",
        &format!(
            "listen: 127.0.0.1:-1\nconnect_error_reports: 2\n\
             cluster {{ name: C, listen: 127.0.0.1:-1, routes: [nats-route://127.0.0.1:{dead}] }}\n"
        ),
    );
    let mut n = Proc::ready(
        &["-c", conf.to_str().expect("path")],
        std::process::Stdio::null(),
        "Server is ready",
    );
    let want = format!("Error trying to connect to route (attempt 4): dial tcp 127.0.0.1:{dead}: ");
    n.wait_line(|l| l.contains(&want));
    let reported: Vec<&String> = n
        .seen
        .iter()
        .filter(|l| l.contains("Error trying to connect to route"))
        .collect();
    assert_eq!(reported.len(), 3, "{reported:#?}");
    for (line, attempt) in reported.iter().zip([1, 2, 4]) {
        assert!(line.contains("[ERR]"), "{line}");
        assert!(line.contains(&format!("(attempt {attempt})")), "{line}");
    }
    drop(n);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The overload keys of nats-server 2.11+ (`write_timeout` everywhere, `cluster`/`gateway
/// { write_deadline }`, `no_fast_producer_stall`), parsed with nats-server's values.
#[test]
fn overload_keys_are_parsed_as_nats_server() {
    use natsd::conn::writer::WriteTimeoutPolicy;
    let o = conf_opts(
        "write_deadline: \"3s\"\nwrite_timeout: retry\nno_fast_producer_stall: true\n\
         cluster { name: C, listen: 127.0.0.1:-1, write_deadline: \"2s\", write_timeout: close }\n\
         gateway { name: C, listen: 127.0.0.1:-1, write_deadline: \"4s\", write_timeout: default }",
    );
    assert_eq!(o.write_deadline, std::time::Duration::from_secs(3));
    assert_eq!(o.write_timeout, WriteTimeoutPolicy::Retry);
    assert!(o.no_fast_producer_stall);
    let c = o.cluster.expect("cluster");
    assert_eq!(c.write_deadline, Some(std::time::Duration::from_secs(2)));
    assert_eq!(c.write_timeout, WriteTimeoutPolicy::Close);
    let g = o.gateway.expect("gateway");
    assert_eq!(g.write_deadline, Some(std::time::Duration::from_secs(4)));
    assert_eq!(g.write_timeout, WriteTimeoutPolicy::Default);
    let d = conf_opts("");
    assert_eq!(d.write_deadline, std::time::Duration::from_secs(10));
    assert!(!d.no_fast_producer_stall);
    let e = refused("write_timeout: sometimes");
    assert!(e.contains("write_timeout"), "{e}");
}

#[test]
fn jetstream_server_limits_are_parsed_as_nats_server() {
    let o = conf_opts(
        "jetstream { limits { max_ack_pending: 100, max_request_batch: 10, \
         duplicate_window: \"30s\", max_ha_assets: 3 } }",
    );
    let l = o.jetstream.expect("jetstream").limits;
    assert_eq!(
        (
            l.max_ack_pending,
            l.max_request_batch,
            l.duplicate_window,
            l.max_ha_assets
        ),
        (100, 10, 30_000_000_000, 3)
    );
    assert_eq!(
        conf_opts("jetstream: enabled")
            .jetstream
            .expect("js")
            .limits,
        Default::default()
    );
    let e = refused("jetstream { limits { max_msgs: 1 } }");
    assert!(e.contains(r#"unknown field "max_msgs""#), "{e}");
    let e = refused("jetstream { limits { duplicate_window: \"soon\" } }");
    assert!(e.contains("invalid duration"), "{e}");
    let e = refused("jetstream { limits { batch { max_msgs: 5 } } }");
    assert!(e.contains("batch"), "{e}");
}

/// A `$JS.API` answer that is nats-server's error `code` with `description`.
fn refused_with(r: &serde_json::Value, code: u64, description: &str) {
    assert_eq!(r["error"]["err_code"], code, "{r}");
    assert_eq!(r["error"]["description"], description, "{r}");
}

/// `jetstream { limits {} }` as nats-server applies it: defaults lowered to the limits, larger
/// asks refused with its codes and texts (10052, 10121, 10125), pulls over the batch limit 409.
#[tokio::test]
async fn jetstream_server_limits_cap_streams_and_consumers() {
    let dir = js_dir("limits-js");
    let srv = start(conf_opts(&format!(
        "jetstream {{ store_dir: {:?}, limits {{ max_ack_pending: 100, max_request_batch: 10, \
         duplicate_window: \"30s\" }} }}",
        dir.display().to_string()
    )))
    .await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    // Streams: the default window is the limit; more is refused.
    let stream = |name: &str, extra: &str| {
        let subject = format!("$JS.API.STREAM.CREATE.{name}");
        let body = format!(r#"{{"name":"{name}","subjects":["{name}.>"]{extra}}}"#);
        let nc = nc.clone();
        async move { js_api(&nc, &subject, &body).await }
    };
    let r = stream("S", "").await;
    assert_eq!(r["config"]["duplicate_window"], 30_000_000_000u64, "{r}");
    let r = stream("T", r#","duplicate_window":60000000000"#).await;
    refused_with(
        &r,
        10052,
        "duplicates window can not be larger then server limit of 30s",
    );
    // Consumers: defaults lowered, larger asks refused.
    let consumer = |name: &str, extra: &str| {
        let body = format!(
            r#"{{"stream_name":"S","config":{{"durable_name":"{name}","ack_policy":"explicit"{extra}}}}}"#
        );
        let subject = format!("$JS.API.CONSUMER.DURABLE.CREATE.S.{name}");
        let nc = nc.clone();
        async move { js_api(&nc, &subject, &body).await }
    };
    let r = consumer("P", "").await;
    assert_eq!(r["config"]["max_ack_pending"], 100, "{r}");
    assert_eq!(r["config"]["max_batch"], 10, "{r}");
    let r = consumer("Q", r#","max_ack_pending":101"#).await;
    refused_with(
        &r,
        10121,
        "consumer max ack pending exceeds system limit of 100",
    );
    let r = consumer("R", r#","max_batch":11"#).await;
    refused_with(
        &r,
        10125,
        "consumer max request batch exceeds server limit of 10",
    );
    // A pull asking for more than the (defaulted) max_batch gets nats-server's 409.
    let mut inbox = nc.subscribe("pull.inbox").await.expect("sub");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.S.P",
        "pull.inbox",
        r#"{"batch":11,"no_wait":true}"#.into(),
    )
    .await
    .expect("pull");
    use futures::StreamExt;
    let m = tokio::time::timeout(DEADLINE, inbox.next())
        .await
        .expect("an answer")
        .expect("a message");
    let status = m.status.map(|s| s.as_u16());
    assert_eq!(status, Some(409), "{:?}", m.description);
    assert_eq!(
        m.description.as_deref(),
        Some("Exceeded MaxRequestBatch of 10")
    );
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
