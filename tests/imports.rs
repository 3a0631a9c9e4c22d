//! Account exports and imports end to end: stream imports (prefix, `to`), service imports
//! (request/reply, singleton and streamed responses), isolation of what is not exported,
//! shadow subscriptions' lifetime, `/accountz`, the same across a natsd cluster and a mixed
//! cluster with the real nats-server 2.9.

mod common;

use async_nats::{ConnectOptions, HeaderMap, Message, Subscriber};
use common::cluster::{mesh_with, node_opts, route_port};
use common::{http_json, wait_for, DEADLINE};
use futures::StreamExt;
use natsd::conn::ConnKind;
use natsd::{Options, Server};
use std::time::Duration;

const ACCOUNTS: &str = r#"
accounts {
  A {
    users: [{user: a, password: a}]
    exports: [
      {stream: "x.>"}
      {stream: "y.>"}
      {service: "req.>"}
      {service: "multi", response_type: stream, response_threshold: "10s"}
      {service: "only.c", accounts: [C]}
    ]
    imports: [
      {service: {account: B, subject: "back"}}
    ]
  }
  B {
    users: [
      {user: b, password: b}
      {user: b2, password: b2, permissions: {publish: {deny: ["local.x"]}, subscribe: {deny: ["p.x.secret"]}}}
    ]
    exports: [{service: "back"}]
    imports: [
      {stream: {account: A, subject: "x.>"}, prefix: "p"}
      {stream: {account: A, subject: "y.>"}, to: "m.>"}
      {service: {account: A, subject: "req.x"}, to: "local.x"}
      {service: {account: A, subject: "multi"}}
    ]
  }
  C { users: [{user: c, password: c}] }
}
"#;

fn opts() -> Options {
    let mut o = natsd::config::file::load_str(ACCOUNTS)
        .expect("accounts config loads")
        .options;
    o.host = "127.0.0.1".into();
    o.port = 0;
    o.http_port = Some(0);
    o
}

fn node(name: &str, seed: Option<u16>) -> Options {
    let n = node_opts(name, seed);
    Options {
        server_name: n.server_name,
        cluster: n.cluster,
        ..opts()
    }
}

async fn user(url: &str, u: &str) -> async_nats::Client {
    ConnectOptions::with_user_and_password(u.into(), u.into())
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect as {u}: {e}"))
}

async fn next(sub: &mut Subscriber) -> Message {
    tokio::time::timeout(DEADLINE, sub.next())
        .await
        .expect("message in time")
        .expect("subscription open")
}

/// Reply to every request on `subject` in `nc`'s account with `answers` messages
/// (`<prefix>:<payload>:<i>`).
/// Each request, once answered and flushed, is reported on the returned channel.
async fn responder(
    nc: &async_nats::Client,
    subject: &str,
    prefix: &'static str,
    answers: usize,
) -> tokio::sync::mpsc::UnboundedReceiver<()> {
    let mut sub = nc.subscribe(subject.to_string()).await.expect("subscribe");
    nc.flush().await.expect("flush");
    let nc = nc.clone();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            let Some(reply) = m.reply.clone() else {
                continue;
            };
            let info = m
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Request-Info").map(|v| v.to_string()))
                .unwrap_or_default();
            for i in 0..answers {
                let body = format!(
                    "{prefix}:{}:{i}:{info}",
                    String::from_utf8_lossy(&m.payload)
                );
                if nc.publish(reply.clone(), body.into()).await.is_err() {
                    return;
                }
            }
            let _ = nc.flush().await;
            let _ = tx.send(());
        }
    });
    rx
}

/// True when `srv` has interest from a route for `subject` in `acc`.
fn route_interest(srv: &Server, acc: &str, subject: &str) -> bool {
    srv.shared().accounts.get(acc).is_some_and(|a| {
        let r = a.sublist.matches(subject.as_bytes());
        r.psubs.iter().any(|s| s.conn.kind == ConnKind::Route)
            || r.qsubs
                .iter()
                .any(|g| g.members.iter().any(|s| s.conn.kind == ConnKind::Route))
    })
}

async fn wait_route_interest(srv: &Server, acc: &str, subject: &str) {
    wait_for(&format!("route interest in {acc} on {subject}"), || {
        let ok = route_interest(srv, acc, subject);
        async move { ok }
    })
    .await;
}

/// Wait until `n` client subscriptions of `acc` on `srv` match `subject` (async-nats' `flush`
/// does not wait for the server, so a SUB from one connection and a PUB from another race).
async fn wait_subs(srv: &Server, acc: &str, subject: &str, n: usize) {
    wait_for(
        &format!("{n} subscriptions in {acc} matching {subject}"),
        || {
            let have = srv.shared().accounts.get(acc).map_or(0, |a| {
                let r = a.sublist.matches(subject.as_bytes());
                r.psubs
                    .iter()
                    .filter(|s| s.conn.kind == ConnKind::Client)
                    .count()
            });
            async move { have >= n }
        },
    )
    .await;
}

async fn wait_shadows(srv: &Server, acc: &str, n: usize) {
    wait_for(&format!("{n} shadow subscriptions for {acc}"), || {
        let have = shadows(srv, acc);
        async move { have == n }
    })
    .await;
}

fn shadows(srv: &Server, acc: &str) -> usize {
    srv.shared()
        .accounts
        .get(acc)
        .map_or(0, |a| natsd::imports::shadow_count(&a))
}

#[tokio::test]
async fn stream_import_with_prefix_and_to_and_nothing_else_leaks() {
    let srv = common::start(opts()).await;
    let url = srv.client_url();
    let a = user(&url, "a").await;
    let b = user(&url, "b").await;
    let mut all = b.subscribe(">").await.expect("sub >");
    let mut pref = b.subscribe("p.x.*").await.expect("sub p.x.*");
    b.flush().await.expect("flush");
    wait_subs(&srv, "B", "p.x.1", 2).await;
    // Not exported: z.*; exported but not under the subscriber's mapping: x.1.2 for p.x.*.
    a.publish("z.1", "secret".into()).await.expect("pub");
    a.publish("x.1.2", "deep".into()).await.expect("pub");
    a.publish("x.1", "one".into()).await.expect("pub");
    a.publish("y.2", "two".into()).await.expect("pub");
    a.flush().await.expect("flush");
    let m = next(&mut all).await;
    assert_eq!(
        (m.subject.as_str(), &m.payload[..]),
        ("p.x.1.2", &b"deep"[..])
    );
    let m = next(&mut all).await;
    assert_eq!((m.subject.as_str(), &m.payload[..]), ("p.x.1", &b"one"[..]));
    let m = next(&mut all).await;
    assert_eq!((m.subject.as_str(), &m.payload[..]), ("m.2", &b"two"[..]));
    let m = next(&mut pref).await;
    assert_eq!((m.subject.as_str(), &m.payload[..]), ("p.x.1", &b"one"[..]));
    // B's own namespace is separate: a B publish on x.1 does not reach A.
    let mut a_all = a.subscribe(">").await.expect("sub");
    a.flush().await.expect("flush");
    wait_subs(&srv, "A", "req.x", 1).await;
    b.publish("x.1", "b-local".into()).await.expect("pub");
    b.publish("local.x", "via-import".into())
        .await
        .expect("pub");
    b.flush().await.expect("flush");
    let m = next(&mut a_all).await;
    assert_eq!(
        (m.subject.as_str(), &m.payload[..]),
        ("req.x", &b"via-import"[..])
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn shadows_follow_unsubscribe_auto_unsubscribe_and_close() {
    let srv = common::start(opts()).await;
    let url = srv.client_url();
    let a = user(&url, "a").await;
    let b = user(&url, "b").await;
    let mut once = b.subscribe("p.x.>").await.expect("sub");
    once.unsubscribe_after(1).await.expect("unsub after");
    let mut other = b.subscribe("m.>").await.expect("sub");
    b.flush().await.expect("flush");
    wait_shadows(&srv, "B", 2).await;
    wait_subs(&srv, "B", "p.x.1", 1).await;
    a.publish("x.1", "1".into()).await.expect("pub");
    a.publish("x.2", "2".into()).await.expect("pub");
    a.flush().await.expect("flush");
    let m = next(&mut once).await;
    assert_eq!(m.subject.as_str(), "p.x.1");
    wait_shadows(&srv, "B", 1).await;
    let acc_a = srv.shared().accounts.get("A").expect("A");
    assert!(acc_a.sublist.matches(b"x.3").psubs.is_empty());
    other.unsubscribe().await.expect("unsubscribe");
    wait_shadows(&srv, "B", 0).await;
    // A connection that goes away takes its shadows with it.
    let mut raw = common::Raw::connected(
        &srv,
        r#"{"verbose":false,"user":"b","pass":"b","protocol":1}"#,
    )
    .await;
    raw.send("SUB p.> 1\r\nSUB m.x 2\r\nPING\r\n").await;
    raw.expect("PONG").await;
    assert_eq!(shadows(&srv, "B"), 2);
    drop(raw);
    wait_shadows(&srv, "B", 0).await;
    assert!(acc_a.sublist.matches(b"x.3").psubs.is_empty());
    srv.shutdown().await;
}

#[tokio::test]
async fn permissions_apply_to_the_subjects_the_client_uses() {
    let srv = common::start(opts()).await;
    let url = srv.client_url();
    let a = user(&url, "a").await;
    let b2 = user(&url, "b2").await;
    let mut a_all = a.subscribe(">").await.expect("sub");
    a.flush().await.expect("flush");
    wait_subs(&srv, "A", "req.x", 1).await;
    // Publishing to the import's local subject is denied: nothing reaches A.
    b2.publish("local.x", "denied".into()).await.expect("pub");
    b2.publish("multi", "allowed".into()).await.expect("pub");
    b2.flush().await.expect("flush");
    let m = next(&mut a_all).await;
    assert_eq!(
        (m.subject.as_str(), &m.payload[..]),
        ("multi", &b"allowed"[..])
    );
    // A subscribe deny inside a wildcard holds for imported messages too.
    let mut s = b2.subscribe("p.x.>").await.expect("sub");
    b2.flush().await.expect("flush");
    wait_shadows(&srv, "B", 1).await;
    a.publish("x.secret", "no".into()).await.expect("pub");
    a.publish("x.ok", "yes".into()).await.expect("pub");
    a.flush().await.expect("flush");
    let m = next(&mut s).await;
    assert_eq!(m.subject.as_str(), "p.x.ok");
    srv.shutdown().await;
}

#[tokio::test]
async fn queue_subscribers_share_an_imported_stream() {
    let srv = common::start(opts()).await;
    let url = srv.client_url();
    let a = user(&url, "a").await;
    let b = user(&url, "b").await;
    let q1 = b
        .queue_subscribe("p.x.>", "workers".into())
        .await
        .expect("sub");
    let q2 = b
        .queue_subscribe("p.x.>", "workers".into())
        .await
        .expect("sub");
    b.flush().await.expect("flush");
    wait_shadows(&srv, "B", 2).await;
    let mut both = futures::stream::select(q1, q2);
    for i in 0..20 {
        a.publish(format!("x.{i}"), "w".into()).await.expect("pub");
    }
    a.publish("x.end", "end".into()).await.expect("pub");
    a.flush().await.expect("flush");
    // Each message reaches one member: 21 deliveries, all different, all of them.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..21 {
        let m = tokio::time::timeout(DEADLINE, both.next())
            .await
            .expect("in time")
            .expect("open");
        assert!(seen.insert(m.subject.to_string()), "twice: {}", m.subject);
    }
    assert!(seen.contains("p.x.end") && seen.contains("p.x.19"));
    srv.shutdown().await;
}

#[tokio::test]
async fn auto_unsubscribed_requester_and_responder_are_retired_in_their_own_accounts() {
    let srv = common::start(opts()).await;
    let connect =
        |u: &str| format!(r#"{{"verbose":false,"user":"{u}","pass":"{u}","protocol":1}}"#);
    let mut a = common::Raw::connected(&srv, &connect("a")).await;
    a.send("SUB req.x 1\r\nUNSUB 1 1\r\nPING\r\n").await;
    a.expect("PONG").await;
    let mut b = common::Raw::connected(&srv, &connect("b")).await;
    b.send("SUB _INBOX.r 9\r\nUNSUB 9 1\r\nPUB local.x _INBOX.r 1\r\nq\r\n")
        .await;
    let (subject, _, reply, _) = a.msg().await;
    assert_eq!(subject, "req.x");
    let reply = reply.expect("reply");
    a.send(&format!("PUB {reply} 2\r\nok\r\nPING\r\n")).await;
    a.expect("PONG").await;
    let (subject, _, _, payload) = b.msg().await;
    assert_eq!((subject.as_str(), &payload[..]), ("_INBOX.r", &b"ok"[..]));
    // Both reached their max in a fan-out that started in the other account.
    let count = |acc: &str, subject: &str| {
        srv.shared().accounts.get(acc).map_or(usize::MAX, |a| {
            a.sublist
                .matches(subject.as_bytes())
                .psubs
                .iter()
                .filter(|s| s.conn.kind == ConnKind::Client)
                .count()
        })
    };
    assert_eq!(count("A", "req.x"), 0);
    assert_eq!(count("B", "_INBOX.r"), 0);
    srv.shutdown().await;
}

#[tokio::test]
async fn service_import_request_reply_with_headers() {
    let srv = common::start(opts()).await;
    let url = srv.client_url();
    let a = user(&url, "a").await;
    let b = user(&url, "b").await;
    responder(&a, "req.x", "A", 1).await;
    wait_subs(&srv, "A", "req.x", 1).await;
    let resp = b.request("local.x", "hello".into()).await.expect("request");
    let body = String::from_utf8_lossy(&resp.payload).into_owned();
    assert_eq!(body, "A:hello:0:{\"acc\":\"B\"}");
    // Headers pass through to the responder (and the request info is added).
    let mut sub = a.subscribe("req.>").await.expect("sub");
    a.flush().await.expect("flush");
    wait_subs(&srv, "A", "req.x", 2).await;
    let mut h = HeaderMap::new();
    h.insert("K", "v");
    b.publish_with_reply_and_headers("local.x", "_INBOX.hdr", h, "x".into())
        .await
        .expect("pub");
    let m = loop {
        let m = next(&mut sub).await;
        if m.payload.as_ref() == b"x" {
            break m;
        }
    };
    let h = m.headers.expect("headers");
    assert_eq!(h.get("K").map(|v| v.to_string()), Some("v".into()));
    assert_eq!(
        h.get("Nats-Request-Info").map(|v| v.to_string()),
        Some("{\"acc\":\"B\"}".into())
    );
    let reply = m.reply.expect("reply").to_string();
    assert!(reply.starts_with("_R_."), "{reply}");
    // The other direction: A imports B's "back".
    responder(&b, "back", "B", 1).await;
    wait_subs(&srv, "B", "back", 1).await;
    let resp = a.request("back", "hi".into()).await.expect("request back");
    assert_eq!(&resp.payload[..], b"B:hi:0:{\"acc\":\"A\"}");
    srv.shutdown().await;
}

#[tokio::test]
async fn singleton_gets_one_response_streamed_gets_all_and_mappings_end() {
    let srv = common::start(opts()).await;
    let url = srv.client_url();
    let a = user(&url, "a").await;
    let b = user(&url, "b").await;
    let mut answered = responder(&a, "req.x", "S", 3).await;
    responder(&a, "multi", "M", 3).await;
    wait_subs(&srv, "A", "req.x", 1).await;
    wait_subs(&srv, "A", "multi", 1).await;
    let mut inbox = b.subscribe("_INBOX.t.>").await.expect("sub");
    b.flush().await.expect("flush");
    b.publish_with_reply("local.x", "_INBOX.t.1", "s".into())
        .await
        .expect("pub");
    b.flush().await.expect("flush");
    let m = next(&mut inbox).await;
    assert_eq!(&m.payload[..], b"S:s:0:{\"acc\":\"B\"}");
    // All three answers reached the server (flushed); the mapping ended with the first.
    tokio::time::timeout(DEADLINE, answered.recv())
        .await
        .expect("answered in time")
        .expect("responder running");
    let acc_a = srv.shared().accounts.get("A").expect("A");
    assert_eq!(natsd::imports::pending_responses(&acc_a), 0);
    b.publish_with_reply("multi", "_INBOX.t.2", "m".into())
        .await
        .expect("pub");
    b.flush().await.expect("flush");
    for i in 0..3 {
        let m = next(&mut inbox).await;
        assert_eq!(
            String::from_utf8_lossy(&m.payload),
            format!("M:m:{i}:{{\"acc\":\"B\"}}"),
            "the singleton's extra answers must not arrive"
        );
    }
    // Streamed mappings wait for their threshold.
    assert_eq!(natsd::imports::pending_responses(&acc_a), 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn export_limited_to_other_accounts_is_refused_at_load() {
    let bad = ACCOUNTS.replace(
        r#"{service: {account: A, subject: "multi"}}"#,
        r#"{service: {account: A, subject: "only.c"}}"#,
    );
    let e = natsd::config::file::load_str(&bad).expect_err("not authorized");
    assert!(
        e.to_string()
            .contains("Error adding service import \"only.c\": service import not authorized"),
        "{e}"
    );
}

#[tokio::test]
async fn accountz_lists_imports_and_exports() {
    let srv = common::start(opts()).await;
    let http = common::http_addr(&srv);
    let a = http_json(http, "/accountz?acc=A").await;
    let ex = &a["account_detail"]["exports"];
    assert_eq!(ex[0]["subject"], "req.>");
    assert_eq!(ex[0]["type"], "service");
    assert_eq!(ex[0]["response_type"], "Singleton");
    assert_eq!(ex[1]["response_type"], "Streamed");
    assert_eq!(ex[2]["approved_accounts"][0], "C");
    assert_eq!(ex[3]["subject"], "x.>");
    assert_eq!(ex[3]["type"], "stream");
    assert!(ex[3].get("response_type").is_none());
    let b = http_json(http, "/accountz?acc=B").await;
    let im = &b["account_detail"]["imports"];
    assert_eq!(im[0]["subject"], "x.>");
    assert_eq!(im[0]["account"], "A");
    assert_eq!(im[0]["local_subject"], "p.x.>");
    assert_eq!(im[0]["type"], "stream");
    assert_eq!(im[0]["invalid"], false);
    // A service import as nats-server 2.10+ lists it: the exporter's subject, then the local
    // one as `to` and `local_subject`.
    assert_eq!(im[2]["subject"], "req.x");
    assert_eq!(im[2]["to"], "local.x");
    assert_eq!(im[2]["local_subject"], "local.x");
    assert_eq!(im[2]["type"], "service");
    // C imports nothing but the system account's services, as every account does (with
    // 2.15's `$SYS.REQ.USER.INFO`).
    let c = http_json(http, "/accountz?acc=C").await;
    let im = c["account_detail"]["imports"].as_array().expect("imports");
    assert_eq!(im.len(), 4, "{c}");
    assert!(
        im.iter()
            .any(|i| i["local_subject"] == "$SYS.REQ.USER.INFO"),
        "{c}"
    );
    assert!(im.iter().all(|i| i["account"] == "$SYS"), "{c}");
    srv.shutdown().await;
}

#[tokio::test]
async fn reload_refuses_changed_imports() {
    let srv = common::start(opts()).await;
    let mut new = (*srv.options()).clone();
    new.links.get_mut("B").expect("B").imports.pop();
    let e = srv.reload(new).expect_err("refused");
    assert!(e.contains("exports/imports"), "{e}");
    srv.shutdown().await;
}

#[tokio::test]
async fn cluster_service_import_and_stream_import_across_nodes_without_duplicates() {
    let nodes = mesh_with(3, node).await;
    let urls: Vec<String> = nodes.iter().map(|n| n.client_url()).collect();
    // Requester (B) on n0, responder (A) on n1.
    let a1 = user(&urls[1], "a").await;
    responder(&a1, "req.x", "n1", 1).await;
    wait_route_interest(&nodes[0], "A", "req.x").await;
    let b0 = user(&urls[0], "b").await;
    let resp = b0.request("local.x", "q".into()).await.expect("request");
    assert_eq!(&resp.payload[..], b"n1:q:0:{\"acc\":\"B\"}");
    // Requester A on n2 → B's service "back" answered on n0.
    responder(&b0, "back", "b0", 1).await;
    wait_route_interest(&nodes[2], "B", "back").await;
    let a2 = user(&urls[2], "a").await;
    let resp = a2.request("back", "r".into()).await.expect("request back");
    assert_eq!(&resp.payload[..], b"b0:r:0:{\"acc\":\"A\"}");

    // Stream: subscribers in B on n0 and n1, publisher in A on n2; each gets each message once.
    let mut s0 = b0.subscribe("p.x.>").await.expect("sub");
    let b1 = user(&urls[1], "b").await;
    let mut s1 = b1.subscribe("p.>").await.expect("sub");
    b0.flush().await.expect("flush");
    b1.flush().await.expect("flush");
    wait_route_interest(&nodes[2], "A", "x.1").await;
    wait_for("both shadows visible on n2", || {
        let n = nodes[2]
            .shared()
            .accounts
            .get("A")
            .map_or(0, |a| a.sublist.matches(b"x.1").psubs.len());
        async move { n >= 2 }
    })
    .await;
    for i in 0..3 {
        a2.publish(format!("x.{i}"), format!("m{i}").into())
            .await
            .expect("pub");
    }
    a2.flush().await.expect("flush");
    for s in [&mut s0, &mut s1] {
        for i in 0..3 {
            let m = next(s).await;
            assert_eq!(
                m.subject.as_str(),
                format!("p.x.{i}"),
                "once each, in order"
            );
        }
    }
    for n in nodes {
        n.shutdown().await;
    }
}

// ----- with the real nats-server -----

fn nats_server_conf(dir: &std::path::Path, seed: Option<u16>) -> std::path::PathBuf {
    let routes = seed
        .map(|p| format!("routes: [\"nats-route://127.0.0.1:{p}\"]"))
        .unwrap_or_default();
    let text = format!(
        "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nserver_name: go1\n\
         cluster {{ name: C1, listen: 127.0.0.1:-1, {routes} }}\n{ACCOUNTS}"
    );
    common::binary::write_conf(dir, "go.conf", &text)
}

#[tokio::test]
async fn mixed_cluster_with_nats_server_cross_account_requests_both_ways() {
    common::natsserver::assert_installed();
    let n0 = common::start(node("n0", None)).await;
    let dir = common::binary::tmp_dir("imports", "mixed");
    let conf = nats_server_conf(&dir, Some(route_port(&n0)));
    let go = common::natsserver::launch(
        &["-c".to_string(), conf.to_string_lossy().into_owned()],
        common::natsserver::Wait {
            client: true,
            route: true,
            gateway: false,
            ready: true,
        },
    );
    wait_for("route to nats-server", || {
        let n = common::cluster::routes(&n0);
        async move { n == 1 }
    })
    .await;
    let go_url = format!("nats://{}", go.client);
    let nd_url = n0.client_url();

    // Requester in B on nats-server, responder in A on natsd.
    let a_nd = user(&nd_url, "a").await;
    responder(&a_nd, "req.x", "natsd", 1).await;
    let b_go = user(&go_url, "b").await;
    let resp = retry_request(&b_go, "local.x").await;
    assert!(resp.starts_with("natsd:q:0:"), "{resp}");

    // Requester in B on natsd, responder in A on nats-server.
    a_nd.drain().await.expect("drain natsd responder");
    let a_go = user(&go_url, "a").await;
    responder(&a_go, "req.x", "go", 1).await;
    wait_for("nats-server responder's interest", || {
        let ok = route_interest(&n0, "A", "req.x")
            && n0.shared().accounts.get("A").is_some_and(|a| {
                a.sublist
                    .matches(b"req.x")
                    .psubs
                    .iter()
                    .all(|s| s.conn.kind != ConnKind::Client)
            });
        async move { ok }
    })
    .await;
    let b_nd = user(&nd_url, "b").await;
    let resp = retry_request(&b_nd, "local.x").await;
    assert!(resp.starts_with("go:q:0:"), "{resp}");

    // The other direction of import: A requests B's "back", across both kinds.
    responder(&b_go, "back", "goB", 1).await;
    let a_nd2 = user(&nd_url, "a").await;
    let resp = retry_request(&a_nd2, "back").await;
    assert!(resp.starts_with("goB:q:0:"), "{resp}");

    // Stream import: subscriber in B on natsd, publisher in A on nats-server.
    let mut s = b_nd.subscribe("p.x.>").await.expect("sub");
    b_nd.flush().await.expect("flush");
    let mut got = None;
    let end = std::time::Instant::now() + DEADLINE;
    while got.is_none() && std::time::Instant::now() < end {
        a_go.publish("x.probe", "p".into()).await.expect("pub");
        a_go.flush().await.expect("flush");
        got = tokio::time::timeout(Duration::from_millis(200), s.next())
            .await
            .ok()
            .flatten();
    }
    assert_eq!(
        got.expect("stream across kinds").subject.as_str(),
        "p.x.probe"
    );
    // … and subscriber in B on nats-server, publisher in A on natsd.
    let mut s = b_go.subscribe("m.>").await.expect("sub");
    b_go.flush().await.expect("flush");
    let mut got = None;
    let end = std::time::Instant::now() + DEADLINE;
    while got.is_none() && std::time::Instant::now() < end {
        a_nd2.publish("y.probe", "p".into()).await.expect("pub");
        a_nd2.flush().await.expect("flush");
        got = tokio::time::timeout(Duration::from_millis(200), s.next())
            .await
            .ok()
            .flatten();
    }
    assert_eq!(
        got.expect("stream across kinds").subject.as_str(),
        "m.probe"
    );
    drop(go);
    n0.shutdown().await;
}

/// Request until answered (interest crosses the route asynchronously), within the deadline.
async fn retry_request(nc: &async_nats::Client, subject: &str) -> String {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let r = tokio::time::timeout(
            Duration::from_millis(500),
            nc.request(subject.to_string(), "q".into()),
        )
        .await;
        if let Ok(Ok(m)) = r {
            return String::from_utf8_lossy(&m.payload).into_owned();
        }
        assert!(
            std::time::Instant::now() < end,
            "no answer on {subject}: {r:?}"
        );
    }
}

/// A client in B with an auto-unsubscribe max on an imported subject, whose last message comes
/// from another cluster through a gateway: its shadow subscription in the exporting account A
/// goes with it (the gateway's retire path used to skip the import shadows, leaving A with
/// interest nobody served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_retired_by_a_gateway_message_drops_its_shadow() {
    use common::gw::{outbound_names, remotes};
    let (pa, pb) = (common::free_port(), common::free_port());
    let gw_node = |name: &str, cluster: &str, port: u16, remote: (&str, u16)| {
        let g = common::gw::node(name, cluster, port, None, remotes(&[remote]));
        Options {
            server_name: g.server_name,
            gateway: g.gateway,
            ..opts()
        }
    };
    let a = common::start(gw_node("ga", "C1", pa, ("C2", pb))).await;
    let b = common::start(gw_node("gb", "C2", pb, ("C1", pa))).await;
    wait_for("gateways both ways", || {
        let ok = outbound_names(&a) == ["C2"] && outbound_names(&b) == ["C1"];
        async move { ok }
    })
    .await;
    let acc_a = a.shared().accounts.get("A").expect("account A");
    let base = acc_a.sublist.count();
    let login = r#"{"verbose":false,"pedantic":false,"user":"b","pass":"b","headers":true}"#;
    let mut sub = common::Raw::connected(&a, login).await;
    sub.send("SUB p.x.1 1\r\nUNSUB 1 1\r\n").await;
    sub.flush().await;
    wait_for("the shadow in A", || {
        let n = acc_a.sublist.count();
        async move { n == base + 1 }
    })
    .await;
    // Published in B on the other cluster: it crosses the gateway once B's interest has.
    let mut publ = common::Raw::connected(&b, login).await;
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        publ.send("PUB p.x.1 2\r\nhi\r\n").await;
        publ.flush().await;
        if sub.sync().await.contains("MSG p.x.1 1 2") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no message crossed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for(
        "the shadow in A removed with the client's subscription",
        || {
            let n = acc_a.sublist.count();
            async move { n == base }
        },
    )
    .await;
    a.shutdown().await;
    b.shutdown().await;
}
