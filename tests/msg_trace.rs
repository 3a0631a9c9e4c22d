//! Distributed message tracing (`Nats-Trace-Dest`, nats-server 2.11+): every server a traced
//! message passes publishes one event to the trace destination; `Nats-Trace-Only` traces
//! without delivering; forwarded copies carry `Nats-Trace-Hop`. Observed wire and JSON:
//! docs/nats-server-behaviour.md, section "Message tracing".

mod common;

use common::cluster::{mesh_with, node_opts, route_port};
use common::gw::{gw_port, node, remotes};
use common::natsserver::{self, launch_bin, Wait};
use common::{conf_opts, free_port, start, start_default, until_delivered, wait_for, Raw};
use serde_json::Value;
use std::collections::BTreeSet;

const NO_SUPPORT: &str = "Message delivered but remote does not support message tracing so no trace event generated from there";
const ONLY_NO_SUPPORT: &str = "Not delivered because remote does not support message tracing";

/// `HPUB subject` with `headers` and payload `hello`.
async fn hpub(c: &mut Raw, subject: &str, headers: &[(&str, &str)]) {
    let mut h = String::from("NATS/1.0\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    c.send(&format!(
        "HPUB {subject} {} {}\r\n{h}hello\r\n",
        h.len(),
        h.len() + 5
    ))
    .await;
}

/// The next `n` trace events `tracer` receives, by server name.
async fn events(tracer: &mut Raw, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for _ in 0..n {
        let (_, _, _, p) = tracer.msg().await;
        out.push(serde_json::from_slice::<Value>(&p).expect("event is JSON"));
    }
    out.sort_by_key(|e| e["server"]["name"].as_str().unwrap_or_default().to_string());
    out
}

/// The next `HMSG` (line and body, as text).
async fn hmsg(c: &mut Raw) -> String {
    let l = c.next_non_ping().await;
    assert!(l.starts_with("HMSG "), "{l}");
    let n: usize = l
        .rsplit(' ')
        .next()
        .and_then(|x| x.parse().ok())
        .expect("size");
    let body = c.payload(n).await;
    format!("{l}\r\n{}", String::from_utf8_lossy(&body))
}

fn evs(e: &Value) -> &Vec<Value> {
    e["events"].as_array().expect("events")
}

/// The events of type `t`.
fn of(e: &Value, t: &str) -> Vec<Value> {
    evs(e).iter().filter(|x| x["type"] == t).cloned().collect()
}

/// A client with a name (the events' `name`).
async fn named(addr: std::net::SocketAddr, name: &str, echo: bool) -> Raw {
    Raw::connected_at(
        addr,
        &format!(r#"{{"verbose":false,"headers":true,"no_responders":true,"protocol":1,"name":"{name}","echo":{echo}}}"#),
    )
    .await
}

#[tokio::test]
async fn single_server_reports_ingress_and_every_delivery() {
    let s = start_default().await;
    let mut tracer = Raw::client(&s).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut sub = named(s.client_addr(), "subA", true).await;
    sub.send("SUB foo 1\r\nSUB foo q1 2\r\n").await;
    sub.flush().await;
    // The publisher, echo off, also subscribes: nats-server reports that one as not delivered.
    let mut p = named(s.client_addr(), "pub", false).await;
    p.send("SUB foo 9\r\n").await;
    hpub(&mut p, "foo", &[("Nats-Trace-Dest", "trace.a")]).await;
    p.flush().await;
    let got = sub.sync().await;
    assert_eq!(got.matches("HMSG foo ").count(), 2, "{got}");
    let e = &events(&mut tracer, 1).await[0];
    assert_eq!(e["server"]["id"], s.id());
    assert_eq!(
        e["request"],
        serde_json::json!({"header": {"Nats-Trace-Dest": ["trace.a"]}, "msgsize": 43})
    );
    assert!(e.get("hops").is_none(), "{e}");
    let ev = evs(e);
    assert_eq!(ev[0]["type"], "in");
    assert_eq!(
        (
            &ev[0]["kind"],
            &ev[0]["name"],
            &ev[0]["acc"],
            &ev[0]["subj"]
        ),
        (
            &Value::from(0),
            &Value::from("pub"),
            &Value::from("$G"),
            &Value::from("foo")
        )
    );
    let eg = of(e, "eg");
    assert_eq!(eg.len(), 3, "{e}");
    let plain: Vec<_> = eg.iter().filter(|x| x.get("error").is_none()).collect();
    assert_eq!(plain.len(), 2, "{e}");
    assert!(plain
        .iter()
        .all(|x| x["name"] == "subA" && x["sub"] == "foo"));
    assert!(plain.iter().any(|x| x["queue"] == "q1"));
    let no_echo = eg
        .iter()
        .find(|x| x.get("error").is_some())
        .expect("no echo");
    assert_eq!(no_echo["error"], "Not delivered because of no echo");
    assert_eq!(no_echo["name"], "pub");
    s.shutdown().await;
}

#[tokio::test]
async fn trace_only_delivers_nothing_but_reports_who_would_get_it() {
    let s = start_default().await;
    let mut tracer = Raw::client(&s).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut sub = Raw::client(&s).await;
    sub.send("SUB foo 1\r\n").await;
    sub.flush().await;
    let mut p = Raw::client(&s).await;
    // A request: trace-only counts as delivered, so no "no responders" status comes back.
    p.send("SUB inbox 5\r\n").await;
    let h = "NATS/1.0\r\nNats-Trace-Dest: trace.a\r\nNats-Trace-Only: true\r\n\r\n";
    p.send(&format!(
        "HPUB foo inbox {} {}\r\n{h}hello\r\n",
        h.len(),
        h.len() + 5
    ))
    .await;
    let e = &events(&mut tracer, 1).await[0];
    assert_eq!(of(e, "eg").len(), 1, "{e}");
    assert_eq!(of(e, "eg")[0]["sub"], "foo");
    assert_eq!(sub.sync().await, "");
    assert_eq!(p.sync().await, "");
    s.shutdown().await;
}

#[tokio::test]
async fn messages_without_a_trace_header_send_no_event() {
    let s = start_default().await;
    let mut tracer = Raw::client(&s).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut p = Raw::client(&s).await;
    p.send("PUB foo 5\r\nhello\r\n").await;
    hpub(&mut p, "foo", &[("X-Other", "trace.a")]).await;
    // A lower-case key is not the trace header (nats-server matches it case-sensitively).
    hpub(&mut p, "foo", &[("nats-trace-dest", "trace.a")]).await;
    // Then a traced one: the first event the tracer gets must be this one's.
    hpub(&mut p, "last", &[("Nats-Trace-Dest", "trace.b")]).await;
    let (subject, _, _, payload) = tracer.msg().await;
    assert_eq!(subject, "trace.b");
    let e: Value = serde_json::from_slice(&payload).expect("json");
    assert_eq!(evs(&e)[0]["subj"], "last");
    assert_eq!(tracer.sync().await, "");
    s.shutdown().await;
}

#[tokio::test]
async fn bad_trace_headers_are_handled_as_nats_server_does() {
    let s = start(conf_opts(
        "accounts { A { users [ {user: a, password: a}, \
         {user: r, password: r, permissions: {publish: {deny: [\"secret.>\", \"tdeny\"]}}} ] } }",
    ))
    .await;
    let login = |u: &str| {
        format!(r#"{{"verbose":false,"headers":true,"protocol":1,"user":"{u}","pass":"{u}"}}"#)
    };
    let mut tracer = Raw::connected(&s, &login("a")).await;
    tracer.send("SUB trace.> 1\r\nSUB tdeny 2\r\n").await;
    tracer.flush().await;
    let mut sub = Raw::connected(&s, &login("a")).await;
    sub.send("SUB foo 1\r\n").await;
    sub.flush().await;
    let mut p = Raw::connected(&s, &login("r")).await;

    // An invalid destination: delivered untraced, or dropped when trace-only.
    hpub(&mut p, "foo", &[("Nats-Trace-Dest", "trace.*")]).await;
    p.flush().await;
    assert!(sub.sync().await.contains("HMSG foo 1 "));
    hpub(
        &mut p,
        "foo",
        &[("Nats-Trace-Dest", "trace.*"), ("Nats-Trace-Only", "true")],
    )
    .await;
    p.flush().await;
    assert_eq!(sub.sync().await, "");
    // Only 1/true/on (any case) mean trace-only.
    hpub(
        &mut p,
        "foo",
        &[
            ("Nats-Trace-Dest", "trace disabled"),
            ("Nats-Trace-Only", "yes"),
        ],
    )
    .await;
    p.flush().await;
    assert!(sub.sync().await.contains("HMSG foo 1 "));
    // The pre-2.11 origin-account header turns tracing off downstream: delivered with the
    // destination rewritten.
    hpub(
        &mut p,
        "foo",
        &[
            ("Nats-Trace-Dest", "trace.a"),
            ("Nats-Trace-Origin-Account", "X"),
        ],
    )
    .await;
    p.flush().await;
    let got = sub.sync().await;
    assert!(
        got.contains("Nats-Trace-Origin-Account: X\r\nNats-Trace-Dest: trace disabled\r\n\r\n"),
        "{got:?}"
    );
    // A destination the publisher may not publish to: -ERR, nothing delivered.
    hpub(&mut p, "foo", &[("Nats-Trace-Dest", "tdeny")]).await;
    assert_eq!(
        p.sync().await,
        "-ERR 'Permissions Violation for Publish to \"tdeny\"'\r\n"
    );
    assert_eq!(sub.sync().await, "");
    // A subject the publisher may not publish to: the event says so in the ingress.
    hpub(&mut p, "secret.x", &[("Nats-Trace-Dest", "trace.a")]).await;
    let e = &events(&mut tracer, 1).await[0];
    assert_eq!(evs(e).len(), 1, "{e}");
    assert_eq!(
        evs(e)[0]["error"],
        "Permissions Violation for Publish to \"secret.x\""
    );
    assert_eq!(evs(e)[0]["acc"], "A");
    // Nothing else reached the tracer (no event for any of the untraced cases above).
    assert_eq!(tracer.sync().await, "");
    s.shutdown().await;
}

/// The keys of every event entry of type `t` in `e`, sorted.
fn keys(e: &Value, t: &str) -> BTreeSet<String> {
    of(e, t)
        .iter()
        .flat_map(|x| {
            x.as_object()
                .expect("obj")
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        })
        .filter(|k| k != "error")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_hop_reports_from_both_servers() {
    let nodes = mesh_with(2, node_opts).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let mut tracer = Raw::client(a).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut sub = named(b.client_addr(), "subB", true).await;
    sub.send("SUB foo 1\r\n").await;
    sub.flush().await;
    let mut p = Raw::client(a).await;
    until_delivered(&mut p, &mut sub, "foo").await;
    let mut pb = Raw::client(b).await;
    until_delivered(&mut pb, &mut tracer, "trace.probe").await;

    hpub(&mut p, "foo", &[("Nats-Trace-Dest", "trace.a")]).await;
    let got = hmsg(&mut sub).await;
    assert!(got.contains("Nats-Trace-Hop: 1\r\n"), "{got:?}");
    let e = events(&mut tracer, 2).await;
    let (ea, eb) = (&e[0], &e[1]);
    assert_eq!(ea["hops"], 1);
    let eg = of(ea, "eg");
    assert_eq!(eg.len(), 1, "{ea}");
    assert_eq!(
        (&eg[0]["kind"], &eg[0]["name"], &eg[0]["hop"]),
        (&Value::from(1), &Value::from("n1"), &Value::from("1"))
    );
    assert_eq!(
        eb["request"]["header"]["Nats-Trace-Hop"],
        serde_json::json!(["1"])
    );
    assert_eq!(
        (&evs(eb)[0]["kind"], &evs(eb)[0]["name"]),
        (&Value::from(1), &Value::from("n0"))
    );
    assert_eq!(of(eb, "eg")[0]["name"], "subB");

    // Trace-only crosses the route (the peer speaks proto 3) and is delivered nowhere.
    hpub(
        &mut p,
        "foo",
        &[("Nats-Trace-Dest", "trace.a"), ("Nats-Trace-Only", "on")],
    )
    .await;
    let e = events(&mut tracer, 2).await;
    assert_eq!(of(&e[1], "eg")[0]["name"], "subB");
    assert_eq!(sub.sync().await, "");
    for n in nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_cluster_with_nats_server_215_traces_across_both() {
    let bin = natsserver::assert_installed_215();
    let a = start(node_opts("natsd", None)).await;
    let seed = route_port(&a);
    let go = launch_bin(
        &bin,
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-n",
            "go",
            "--cluster",
            "nats://127.0.0.1:-1",
            "--cluster_name",
            "C1",
            "--routes",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("nats-route://127.0.0.1:{seed}")])
        .collect::<Vec<_>>(),
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready: true,
        },
    );
    let mut tracer = Raw::client(&a).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut sub_go = named(go.client, "subGo", true).await;
    sub_go.send("SUB foo 1\r\n").await;
    sub_go.flush().await;
    let mut sub_a = named(a.client_addr(), "subNatsd", true).await;
    sub_a.send("SUB bar 1\r\n").await;
    sub_a.flush().await;
    let mut pa = Raw::client(&a).await;
    let mut pgo = Raw::client_at(go.client).await;
    until_delivered(&mut pa, &mut sub_go, "foo").await;
    until_delivered(&mut pgo, &mut sub_a, "bar").await;
    until_delivered(&mut pgo, &mut tracer, "trace.probe").await;

    // natsd → nats-server: trace-only is forwarded (natsd reads proto 3 in its INFO) and
    // both report; the two servers' events agree in shape.
    hpub(
        &mut pa,
        "foo",
        &[("Nats-Trace-Dest", "trace.a"), ("Nats-Trace-Only", "1")],
    )
    .await;
    let e = events(&mut tracer, 2).await;
    let (ego, ed) = (&e[0], &e[1]);
    assert_eq!(ed["server"]["name"], "natsd");
    assert_eq!(ego["server"]["name"], "go");
    assert_eq!(of(ed, "eg")[0]["hop"], "1");
    assert!(of(ed, "eg")[0].get("error").is_none(), "{ed}");
    assert_eq!(evs(ego)[0]["name"], "natsd");
    assert_eq!(of(ego, "eg")[0]["name"], "subGo");
    // nats-server 2.15.1 delivered nothing: the route told it trace-only.
    assert_eq!(sub_go.sync().await, "");

    // nats-server → natsd: natsd reports its ingress from the route and the delivery.
    hpub(&mut pgo, "bar", &[("Nats-Trace-Dest", "trace.b")]).await;
    let e = events(&mut tracer, 2).await;
    let (ego2, ed2) = (&e[0], &e[1]);
    assert_eq!(of(ego2, "eg")[0]["name"], "natsd");
    assert!(
        of(ego2, "eg")[0].get("error").is_none(),
        "2.15.1 sees natsd trace: {ego2}"
    );
    assert_eq!(
        (&evs(ed2)[0]["kind"], &evs(ed2)[0]["name"]),
        (&Value::from(1), &Value::from("go"))
    );
    assert_eq!(of(ed2, "eg")[0]["name"], "subNatsd");
    // Same shape: the same keys in the same kinds of entries, from either implementation.
    for t in ["in", "eg"] {
        assert_eq!(
            keys(ed, t),
            keys(ego2, t),
            "{t} from natsd vs nats-server (origin)"
        );
        assert_eq!(
            keys(ed2, t),
            keys(ego, t),
            "{t} from natsd vs nats-server (hop)"
        );
    }
    let top = |v: &Value| {
        v.as_object()
            .expect("o")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(top(ed), top(ego2));
    assert_eq!(top(&ed["request"]), top(&ego2["request"]));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_29_peer_gets_no_trace_only_messages() {
    natsserver::assert_installed();
    let a = start(node_opts("natsd", None)).await;
    let old = natsserver::clustered("old", Some(route_port(&a)), true);
    let mut tracer = Raw::client(&a).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut sub = Raw::client_at(old.client).await;
    sub.send("SUB foo 1\r\n").await;
    sub.flush().await;
    let mut p = Raw::client(&a).await;
    until_delivered(&mut p, &mut sub, "foo").await;

    hpub(
        &mut p,
        "foo",
        &[("Nats-Trace-Dest", "trace.a"), ("Nats-Trace-Only", "true")],
    )
    .await;
    let e = &events(&mut tracer, 1).await[0];
    assert_eq!(of(e, "eg")[0]["error"], ONLY_NO_SUPPORT);
    assert_eq!(of(e, "eg")[0]["hop"], "1");
    hpub(&mut p, "foo", &[("Nats-Trace-Dest", "trace.a")]).await;
    let e = &events(&mut tracer, 1).await[0];
    assert_eq!(of(e, "eg")[0]["error"], NO_SUPPORT);
    // Only the second one reached the 2.9.10 subscriber (with the hop header).
    let body = hmsg(&mut sub).await;
    assert!(!body.contains("Nats-Trace-Only"), "{body}");
    assert!(body.contains("Nats-Trace-Hop: 1\r\n"), "{body}");
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_hop_reports_from_both_clusters() {
    let (p1, p2) = (free_port(), free_port());
    let c1 = start(node("g1", "C1", p1, None, remotes(&[("C2", p2)]))).await;
    let c2 = start(node("g2", "C2", p2, None, remotes(&[("C1", p1)]))).await;
    assert_eq!(gw_port(&c1), p1);
    wait_for("gateways both ways", || {
        let ok =
            common::gw::outbound_names(&c1) == ["C2"] && common::gw::outbound_names(&c2) == ["C1"];
        async move { ok }
    })
    .await;
    let mut tracer = Raw::client(&c1).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut sub = named(c2.client_addr(), "far", true).await;
    sub.send("SUB foo 1\r\n").await;
    sub.flush().await;
    let mut p = Raw::client(&c1).await;
    until_delivered(&mut p, &mut sub, "foo").await;
    let mut p2c = Raw::client(&c2).await;
    until_delivered(&mut p2c, &mut tracer, "trace.probe").await;

    hpub(
        &mut p,
        "foo",
        &[("Nats-Trace-Dest", "trace.a"), ("Nats-Trace-Only", "true")],
    )
    .await;
    let e = events(&mut tracer, 2).await;
    let (e1, e2) = (&e[0], &e[1]);
    let eg = of(e1, "eg");
    assert_eq!(
        (&eg[0]["kind"], &eg[0]["name"], &eg[0]["hop"]),
        (&Value::from(2), &Value::from("g2"), &Value::from("1"))
    );
    assert_eq!(
        (&evs(e2)[0]["kind"], &evs(e2)[0]["name"]),
        (&Value::from(2), &Value::from("g1"))
    );
    assert_eq!(of(e2, "eg")[0]["name"], "far");
    assert_eq!(sub.sync().await, "");
    c1.shutdown().await;
    c2.shutdown().await;
}
