//! Gateways between natsd clusters on 127.0.0.1: handshake (configured one way, implicit
//! back), interest-only propagation (local and route-learned interest), pub/sub with
//! wildcards, request/reply across clusters (async-nats, `_GR_.` replies), queue groups that
//! prefer the local cluster (and fail over to a remote one when the local members unsubscribe
//! or disconnect, and back), no message crossing two gateways, monitoring, a restarted remote
//! server converging with no stale interest, and malformed gateway input closing only that
//! connection.

mod common;

use common::gw::{gw_port, inbound_count, node, outbound_names, remote_interest, remotes};
use common::{http_json, start, wait_for, Raw};
use natsd::Server;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn route_port(s: &Server) -> u16 {
    common::cluster::route_port(s)
}

/// Wait until `s` has outbound gateways to exactly `names` and `inbound` inbound ones.
async fn wait_gateways(s: &Server, names: &[&str], inbound: usize) {
    let want: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    wait_for("gateway connections", || {
        let ok = outbound_names(s) == want && inbound_count(s) == inbound;
        async move { ok }
    })
    .await;
}

/// Every server of `a` has an outbound to `b_name` and vice versa, and each cluster has as
/// many inbounds as the other has servers.
async fn wait_super_cluster(a: &[Server], b_name: &str, b: &[Server], a_name: &str) {
    wait_for("super-cluster connections", || {
        let ok = a.iter().all(|s| outbound_names(s) == [b_name])
            && b.iter().all(|s| outbound_names(s) == [a_name])
            && a.iter().map(inbound_count).sum::<usize>() == b.len()
            && b.iter().map(inbound_count).sum::<usize>() == a.len();
        async move { ok }
    })
    .await;
}

async fn wait_remote_interest(s: &Server, cluster: &str, subject: &str) {
    wait_for(&format!("interest in {subject} from {cluster}"), || {
        let ok = remote_interest(s, cluster, subject);
        async move { ok }
    })
    .await;
}

async fn wait_no_remote_interest(s: &Server, cluster: &str, subject: &str) {
    wait_for(&format!("no interest in {subject} from {cluster}"), || {
        let ok = !remote_interest(s, cluster, subject);
        async move { ok }
    })
    .await;
}

/// C1 = two routed nodes (a1 dials C2), C2 = two routed nodes (they dial C1 back, implicit).
async fn two_by_two() -> (Vec<Server>, Vec<Server>) {
    let b1 = start(node("b1", "C2", 0, None, vec![])).await;
    let b2 = start(node("b2", "C2", 0, Some(route_port(&b1)), vec![])).await;
    let c2 = remotes(&[("C2", gw_port(&b1))]);
    let a1 = start(node("a1", "C1", 0, None, c2.clone())).await;
    let a2 = start(node("a2", "C1", 0, Some(route_port(&a1)), c2)).await;
    let (a, b) = (vec![a1, a2], vec![b1, b2]);
    wait_super_cluster(&a, "C2", &b, "C1").await;
    (a, b)
}

async fn shutdown(servers: Vec<Server>) {
    for s in servers {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn pub_sub_and_wildcards_cross_clusters_exactly_once() {
    let (a, b) = two_by_two().await;
    // A subscriber on b2: its interest reaches a1 and a2 through b1's and b2's inbounds
    // (b1 learned it over the route).
    let mut sub = Raw::client(&b[1]).await;
    sub.send("SUB orders.> 1\r\nSUB orders.*.new 2\r\n").await;
    sub.flush().await;
    let mut local = Raw::client(&a[0]).await;
    local.send("SUB orders.> 9\r\n").await;
    local.flush().await;
    for s in &a {
        wait_remote_interest(s, "C2", "orders.eu.new").await;
    }
    let mut p = Raw::client(&a[1]).await;
    p.send("PUB orders.eu.new r.1 5\r\nhello\r\nHPUB orders.x 12 14\r\nNATS/1.0\r\n\r\nhi\r\n")
        .await;
    p.flush().await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let l = sub.next_non_ping().await;
        let n: usize = l
            .rsplit(' ')
            .next()
            .and_then(|x| x.parse().ok())
            .expect("size");
        sub.payload(n).await;
        got.push(l);
    }
    got.sort();
    assert_eq!(
        got,
        [
            "HMSG orders.x 1 12 14",
            "MSG orders.eu.new 1 r.1 5",
            "MSG orders.eu.new 2 r.1 5"
        ]
    );
    // Nothing more (no duplicate through b1's route or a second gateway).
    assert_eq!(sub.sync().await, "");
    // The local subscriber on a1 got both once (via the route, not back through C2).
    let l1 = local.next_non_ping().await;
    local.payload(5).await;
    let l2 = local.next_non_ping().await;
    local.payload(14).await;
    assert_eq!(l1, "MSG orders.eu.new 9 r.1 5");
    assert_eq!(l2, "HMSG orders.x 9 12 14");
    assert_eq!(local.sync().await, "");
    // Unsubscribe: interest goes away on the other cluster.
    sub.send("UNSUB 1\r\nUNSUB 2\r\n").await;
    sub.flush().await;
    for s in &a {
        wait_no_remote_interest(s, "C2", "orders.eu.new").await;
    }
    shutdown(a).await;
    shutdown(b).await;
}

#[tokio::test]
async fn request_reply_across_clusters_with_async_nats() {
    use futures::StreamExt;
    let (a, b) = two_by_two().await;
    let ca = async_nats::connect(a[1].client_url())
        .await
        .expect("connect a2");
    let cb = async_nats::connect(b[0].client_url())
        .await
        .expect("connect b1");
    // Responders on both sides.
    for (c, name) in [(&cb, "svc.b"), (&ca, "svc.a")] {
        let mut subscription = c.subscribe(name.to_string()).await.expect("subscribe");
        let c2 = c.clone();
        tokio::spawn(async move {
            while let Some(m) = subscription.next().await {
                if let Some(r) = m.reply {
                    let mut body = b"re:".to_vec();
                    body.extend_from_slice(&m.payload);
                    let _ = c2.publish(r, body.into()).await;
                }
            }
        });
        c.flush().await.expect("flush");
    }
    for s in &a {
        wait_remote_interest(s, "C2", "svc.b").await;
    }
    for s in &b {
        wait_remote_interest(s, "C1", "svc.a").await;
    }
    // The requester's inbox subscription is brand new: the reply must come back through
    // `_GR_.` mapping (the remote does not know the inbox yet).
    let r = tokio::time::timeout(Duration::from_secs(10), ca.request("svc.b", "x".into()))
        .await
        .expect("in time")
        .expect("reply from C2");
    assert_eq!(&r.payload[..], b"re:x");
    let r = tokio::time::timeout(Duration::from_secs(10), cb.request("svc.a", "y".into()))
        .await
        .expect("in time")
        .expect("reply from C1");
    assert_eq!(&r.payload[..], b"re:y");
    // Many in a row, both ways.
    for i in 0..20 {
        let r = ca
            .request("svc.b", format!("{i}").into())
            .await
            .expect("reply");
        assert_eq!(r.payload, format!("re:{i}"));
    }
    drop(ca);
    drop(cb);
    shutdown(a).await;
    shutdown(b).await;
}

#[tokio::test]
async fn raw_request_reply_maps_and_unmaps_gr_replies() {
    let (a, b) = two_by_two().await;
    let mut responder = Raw::client(&b[1]).await;
    responder.send("SUB svc.echo 1\r\n").await;
    responder.flush().await;
    for s in &a {
        wait_remote_interest(s, "C2", "svc.echo").await;
    }
    // A fresh inbox on a1, request from a1: b2 sees the plain reply subject.
    let mut req = Raw::client(&a[0]).await;
    req.send("SUB _INBOX.t.* 5\r\nPUB svc.echo _INBOX.t.1 4\r\nping\r\n")
        .await;
    req.flush().await;
    let (subj, _, reply, payload) = responder.msg().await;
    assert_eq!(subj, "svc.echo");
    assert_eq!(reply.as_deref(), Some("_INBOX.t.1"));
    assert_eq!(payload, b"ping");
    responder.send("PUB _INBOX.t.1 4\r\npong\r\n").await;
    responder.flush().await;
    let (subj, sid, _, payload) = req.msg().await;
    assert_eq!((subj.as_str(), sid.as_str()), ("_INBOX.t.1", "5"));
    assert_eq!(payload, b"pong");
    assert_eq!(req.sync().await, "");
    shutdown(a).await;
    shutdown(b).await;
}

#[tokio::test]
async fn queue_groups_prefer_the_local_cluster() {
    let (a, b) = two_by_two().await;
    let mut qa = Raw::client(&a[0]).await;
    qa.send("SUB work g 1\r\n").await;
    qa.flush().await;
    let mut qb = Raw::client(&b[0]).await;
    qb.send("SUB work g 1\r\n").await;
    qb.flush().await;
    for s in &a {
        wait_remote_interest(s, "C2", "work").await;
    }
    for s in &b {
        wait_remote_interest(s, "C1", "work").await;
    }
    wait_for("a1's queue member known to a2", || {
        let ok = a[1]
            .shared()
            .accounts
            .global()
            .sublist
            .has_interest(b"work");
        async move { ok }
    })
    .await;
    // From a2 (no member there): always a1's member, never C2's.
    let mut p = Raw::client(&a[1]).await;
    for _ in 0..20 {
        p.send("PUB work 1\r\nx\r\n").await;
    }
    p.flush().await;
    for _ in 0..20 {
        let (s, _, _, _) = qa.msg().await;
        assert_eq!(s, "work");
    }
    assert_eq!(qa.sync().await, "");
    assert_eq!(qb.sync().await, "");
    // Without a member in C1 the group is served by C2, exactly once per message.
    qa.send("UNSUB 1\r\n").await;
    qa.flush().await;
    wait_for("C1 queue interest gone on a2", || {
        let ok = !a[1]
            .shared()
            .accounts
            .global()
            .sublist
            .has_interest(b"work");
        async move { ok }
    })
    .await;
    for _ in 0..10 {
        p.send("PUB work 1\r\ny\r\n").await;
    }
    p.flush().await;
    for _ in 0..10 {
        let (s, _, _, payload) = qb.msg().await;
        assert_eq!((s.as_str(), &payload[..]), ("work", &b"y"[..]));
    }
    assert_eq!(qb.sync().await, "");
    shutdown(a).await;
    shutdown(b).await;
}

#[tokio::test]
async fn three_clusters_no_message_crosses_two_gateways() {
    // Ports chosen up front so every cluster can name the others.
    let ports: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let names = ["C1", "C2", "C3"];
    let mut servers = Vec::new();
    for i in 0..3 {
        let others: Vec<(&str, u16)> = (0..3)
            .filter(|j| *j != i)
            .map(|j| (names[j], ports[j]))
            .collect();
        servers.push(
            start(node(
                &format!("s{i}"),
                names[i],
                ports[i],
                None,
                remotes(&others),
            ))
            .await,
        );
    }
    for (i, s) in servers.iter().enumerate() {
        let others: Vec<&str> = names.iter().copied().filter(|n| *n != names[i]).collect();
        wait_gateways(s, &others, 2).await;
    }
    let mut subs = Vec::new();
    for s in &servers {
        let mut c = Raw::client(s).await;
        c.send("SUB fan.> 1\r\n").await;
        c.flush().await;
        subs.push(c);
    }
    for (i, s) in servers.iter().enumerate() {
        for (j, n) in names.iter().enumerate() {
            if i != j {
                wait_remote_interest(s, n, "fan.x").await;
            }
        }
    }
    for (i, s) in servers.iter().enumerate() {
        let mut p = Raw::client(s).await;
        p.send(&format!("PUB fan.{i} 2\r\nhi\r\n")).await;
        p.flush().await;
    }
    // Every subscriber gets each of the three messages exactly once.
    for c in &mut subs {
        let mut got = Vec::new();
        for _ in 0..3 {
            let (s, _, _, _) = c.msg().await;
            got.push(s);
        }
        got.sort();
        assert_eq!(got, ["fan.0", "fan.1", "fan.2"]);
        assert_eq!(c.sync().await, "");
    }
    shutdown(servers).await;
}

#[tokio::test]
async fn gatewayz_and_varz() {
    let (a, b) = two_by_two().await;
    let mut sub = Raw::client(&b[0]).await;
    sub.send("SUB foo 1\r\nSUB bar q1 2\r\n").await;
    sub.flush().await;
    wait_remote_interest(&a[0], "C2", "bar").await;
    wait_remote_interest(&a[0], "C2", "foo").await;
    let http = a[0].http_addr().expect("monitor");
    let z = http_json(http, "/gatewayz").await;
    assert_eq!(z["name"], "C1");
    assert_eq!(z["host"], "127.0.0.1");
    assert_eq!(z["port"].as_u64(), Some(u64::from(gw_port(&a[0]))));
    let out = &z["outbound_gateways"]["C2"];
    assert_eq!(out["configured"], true);
    assert_eq!(out["connection"]["kind"], "Gateway");
    assert!(out["connection"].get("type").is_none());
    assert!(out.get("accounts").is_none());
    // Inbounds: on whichever C1 server the C2 servers dialled.
    let ids: Vec<&str> = b.iter().map(|s| s.id()).collect();
    let mut seen = 0;
    for s in &a {
        let z = http_json(s.http_addr().expect("monitor"), "/gatewayz").await;
        if let Some(inb) = z["inbound_gateways"]["C2"].as_array() {
            for i in inb {
                assert_eq!(i["connection"]["kind"], "Gateway");
                assert!(ids.contains(&i["connection"]["name"].as_str().unwrap_or("")));
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 2);
    let z = http_json(http, "/gatewayz?accs=1").await;
    let accs = z["outbound_gateways"]["C2"]["accounts"]
        .as_array()
        .expect("accounts");
    let g = accs.iter().find(|a| a["name"] == "$G").expect("$G");
    assert_eq!(g["interest_mode"], "Interest-Only");
    assert_eq!(g["interest_only_threshold"], 1000);
    assert_eq!(g["num_subs"], 2);
    assert_eq!(g["num_queue_subs"], 1);
    let z = http_json(http, "/gatewayz?acc_name=$SYS").await;
    let accs = z["outbound_gateways"]["C2"]["accounts"]
        .as_array()
        .expect("accounts");
    assert_eq!(accs.len(), 1);
    let z = http_json(http, "/gatewayz?gw_name=C9").await;
    assert_eq!(z["outbound_gateways"], serde_json::json!({}));
    assert_eq!(z["inbound_gateways"], serde_json::json!({}));
    let v = http_json(http, "/varz").await;
    let gv = &v["gateway"];
    assert_eq!(gv["name"], "C1");
    assert_eq!(gv["auth_timeout"], 2);
    assert_eq!(gv["gateways"][0]["name"], "C2");
    assert_eq!(
        gv["gateways"][0]["urls"][0],
        format!("127.0.0.1:{}", gw_port(&b[0]))
    );
    assert!(gv.get("reject_unknown").is_none());
    // /topz gathers the super-cluster: every server of both clusters, and gateway edges
    // only between C1 and C2 servers, from each server's own account of its connections.
    let a_ids: Vec<&str> = a.iter().map(|s| s.id()).collect();
    let t = http_json(http, "/topz").await;
    let edges = t["edges"].as_array().expect("edges");
    let gw_edges: Vec<&serde_json::Value> =
        edges.iter().filter(|e| e["kind"] == "gateway").collect();
    assert!(!gw_edges.is_empty(), "{t}");
    let crosses = |e: &serde_json::Value| {
        let (f, to) = (
            e["from"].as_str().unwrap_or(""),
            e["to"].as_str().unwrap_or(""),
        );
        (a_ids.contains(&f) && ids.contains(&to)) || (ids.contains(&f) && a_ids.contains(&to))
    };
    assert!(gw_edges.iter().all(|e| crosses(e)), "{t}");
    for id in a_ids.iter().chain(ids.iter()) {
        assert!(
            gw_edges.iter().any(|e| e["from"] == *id),
            "no gateway edge from {id}: {t}"
        );
    }
    let nodes = t["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 4, "{t}");
    assert!(nodes.iter().all(|n| n["reachable"] == true), "{t}");
    assert_eq!(
        nodes.iter().filter(|n| n["cluster"] == "C2").count(),
        2,
        "{t}"
    );
    assert_eq!(t["complete"], true, "{t}");
    shutdown(a).await;
    shutdown(b).await;
}

/// A raw TCP peer on a natsd gateway port: reads natsd's INFO.
async fn raw_gateway_peer(s: &Server) -> Raw {
    raw_gateway_peer_named(s, "C1").await
}

async fn raw_gateway_peer_named(s: &Server, name: &str) -> Raw {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], gw_port(s)));
    let stream = TcpStream::connect(addr).await.expect("connect");
    let mut r = Raw {
        stream,
        buf: Vec::new(),
    };
    let info = r.line().await;
    assert!(info.starts_with("INFO {"), "{info}");
    let v: serde_json::Value =
        serde_json::from_str(info.trim_start_matches("INFO ").trim()).expect("json");
    assert_eq!(v["gateway"], name);
    assert_eq!(v["gateway_nrp"], true);
    assert_eq!(v["gateway_iom"], true);
    r
}

const FAKE_CONNECT: &str = "CONNECT {\"echo\":false,\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"headers\":false,\"name\":\"NFAKEGW\",\"cluster\":\"\",\"gateway\":\"CX\"}\r\n";

fn fake_info(port: u16) -> String {
    format!(
        "INFO {{\"server_id\":\"NFAKEGW\",\"server_name\":\"fake\",\"version\":\"2.9.10\",\"proto\":0,\"go\":\"\",\"host\":\"127.0.0.1\",\"port\":{port},\"headers\":true,\"max_payload\":1048576,\"gateway\":\"CX\",\"gateway_urls\":[\"127.0.0.1:{port}\"],\"gateway_url\":\"127.0.0.1:{port}\",\"gateway_nrp\":true,\"gateway_iom\":true}}\r\n"
    )
}

/// The next line that is not a PING and not about the system account (whose services'
/// interest and mode switch may interleave with `$G`'s).
async fn next_g_line(g: &mut Raw) -> String {
    loop {
        let l = g.next_non_ping().await;
        if !l.contains(" $SYS ") && !l.contains("JFNZUw==") {
            return l;
        }
    }
}

#[tokio::test]
async fn inbound_gateway_dump_and_malformed_input() {
    let a = start(node("a1", "C1", 0, None, vec![])).await;
    let mut c = Raw::client(&a).await;
    c.send("SUB foo 1\r\nSUB bar q1 2\r\n").await;
    c.flush().await;

    // A well-behaved fake inbound: cmd 2, the interest, cmd 3 for every account.
    let dead = common::free_port();
    let mut g = raw_gateway_peer(&a).await;
    g.send(&format!("{FAKE_CONNECT}{}", fake_info(dead))).await;
    let mut lines = Vec::new();
    loop {
        let l = g.line().await;
        let done = l.contains("\"gateway_cmd\":3") && l.contains("\"JEc=\"");
        lines.push(l);
        if done {
            break;
        }
    }
    assert!(lines
        .iter()
        .any(|l| l.contains("\"gateway_cmd\":2,\"gateway_cmd_payload\":\"JEc=\"")));
    assert!(lines.iter().any(|l| l == "RS+ $G foo"));
    assert!(lines.iter().any(|l| l == "RS+ $G bar q1 1"));
    // Later changes follow.
    c.send("SUB baz 3\r\nUNSUB 1\r\n").await;
    c.flush().await;
    assert_eq!(next_g_line(&mut g).await, "RS+ $G baz");
    assert_eq!(next_g_line(&mut g).await, "RS- $G foo");
    // It may send us messages: local clients get them.
    g.send("RMSG $G baz 2\r\nok\r\n").await;
    let (s, sid, _, p) = c.msg().await;
    assert_eq!((s.as_str(), sid.as_str(), &p[..]), ("baz", "3", &b"ok"[..]));
    // Interest in the wrong direction (RS+ on an inbound) closes it.
    g.send("RS+ $G nope\r\n").await;
    assert!(g.closed().await);

    // Garbage before CONNECT: an authentication failure, as nats-server.
    let mut g = raw_gateway_peer(&a).await;
    g.send("HELLO THERE\r\n").await;
    assert_eq!(g.line().await, "-ERR 'Authorization Violation'");
    assert!(g.closed().await);
    // Garbage after the handshake: closed.
    let mut g = raw_gateway_peer(&a).await;
    g.send(&format!("{FAKE_CONNECT}{}", fake_info(dead))).await;
    g.send("XYZZY\r\n").await;
    assert!(g.closed().await);
    // A client on the gateway port: -ERR and close.
    let mut g = raw_gateway_peer(&a).await;
    g.send("CONNECT {\"verbose\":false,\"lang\":\"rust\"}\r\n")
        .await;
    assert_eq!(
        g.line().await,
        "-ERR 'attempted to connect to gateway port'"
    );
    assert!(g.closed().await);
    // Our own gateway name: refused.
    let mut g = raw_gateway_peer(&a).await;
    g.send(&FAKE_CONNECT.replace("CX", "C1")).await;
    let l = g.line().await;
    assert!(l.starts_with("-ERR"), "{l}");
    assert!(g.closed().await);
    // Binary junk and an oversized line do not bring the server down.
    let mut g = raw_gateway_peer(&a).await;
    g.send_bytes(&[0u8, 159, 146, 150, b'\r', b'\n']).await;
    assert!(g.closed().await);

    // The server is still fine.
    c.send("PUB baz 2\r\nhi\r\n").await;
    let (s, _, _, _) = c.msg().await;
    assert_eq!(s, "baz");
    a.shutdown().await;
}

/// A fake remote gateway natsd dials: after the handshake, `bad` is what it sends.
async fn outbound_gets(bad: &str) -> bool {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let a = start(node("a1", "C1", 0, None, remotes(&[("CX", port)]))).await;
    let (mut s, _) = tokio::time::timeout(Duration::from_secs(10), l.accept())
        .await
        .expect("natsd dials")
        .expect("accept");
    s.write_all(fake_info(port).as_bytes())
        .await
        .expect("write");
    let mut r = Raw {
        stream: s,
        buf: Vec::new(),
    };
    let connect = r.line().await;
    assert!(connect.starts_with("CONNECT {"), "{connect}");
    assert!(connect.contains("\"gateway\":\"C1\""), "{connect}");
    let info = r.line().await;
    assert!(info.starts_with("INFO {"), "{info}");
    wait_gateways(&a, &["CX"], 0).await;
    r.send(bad).await;
    let closed = r.closed().await;
    a.shutdown().await;
    closed
}

#[tokio::test]
async fn outbound_closes_on_bad_gateway_commands() {
    // Not base64.
    assert!(
        outbound_gets(
            "INFO {\"server_id\":\"\",\"gateway\":\"CX\",\"gateway_cmd\":2,\"gateway_cmd_payload\":\"!!!\"}\r\n"
        )
        .await
    );
    // A message on an outbound connection.
    assert!(outbound_gets("RMSG $G foo 2\r\nhi\r\n").await);
    // Garbage.
    assert!(outbound_gets("RS+\r\n").await);
}

#[tokio::test]
async fn outbound_accepts_optimistic_peer_and_wrong_name_is_refused() {
    // Optimistic peer (no gateway_iom): everything goes until it says RS-/A-.
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let a = start(node("a1", "C1", 0, None, remotes(&[("CX", port)]))).await;
    let (s, _) = tokio::time::timeout(Duration::from_secs(10), l.accept())
        .await
        .expect("natsd dials")
        .expect("accept");
    let mut r = Raw {
        stream: s,
        buf: Vec::new(),
    };
    r.send(&fake_info(port).replace(",\"gateway_iom\":true", ""))
        .await;
    r.line().await;
    r.line().await;
    wait_gateways(&a, &["CX"], 0).await;
    let mut p = Raw::client(&a).await;
    p.send("PUB x.1 1\r\na\r\n").await;
    p.flush().await;
    assert_eq!(r.next_non_ping().await, "RMSG $G x.1 1");
    r.payload(1).await;
    r.send("RS- $G x.1\r\n").await;
    wait_no_remote_interest(&a, "CX", "x.1").await;
    p.send("PUB x.1 1\r\nb\r\nPUB x.2 1\r\nc\r\n").await;
    p.flush().await;
    assert_eq!(r.next_non_ping().await, "RMSG $G x.2 1");
    r.payload(1).await;
    r.send("A- $G\r\n").await;
    wait_no_remote_interest(&a, "CX", "x.3").await;
    r.send("A+ $G\r\n").await;
    wait_remote_interest(&a, "CX", "x.3").await;
    drop(r);
    a.shutdown().await;

    // The dialled server is another gateway than configured: -ERR, closed.
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let a = start(node("a1", "C1", 0, None, remotes(&[("CY", port)]))).await;
    let (mut s, _) = tokio::time::timeout(Duration::from_secs(10), l.accept())
        .await
        .expect("natsd dials")
        .expect("accept");
    s.write_all(fake_info(port).as_bytes())
        .await
        .expect("write");
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("-ERR"), "{text}");
    assert!(outbound_names(&a).is_empty());
    a.shutdown().await;
}

#[tokio::test]
async fn third_cluster_learned_by_gossip_full_mesh_and_exactly_once() {
    // C1 configures nothing; C2 and C3 only know C1. C1 tells C3 about C2 (gateway_cmd 1);
    // the rest are implicit dials back. C2 has two nodes: the second learns every remote
    // through its route.
    // s1 has no cluster block: its gateway name is its cluster name (/varz shows it).
    let mut o1 = node("s1", "C1", 0, None, vec![]);
    o1.cluster = None;
    let c1 = start(o1).await;
    let v = http_json(c1.http_addr().expect("monitor"), "/varz").await;
    assert_eq!(v["cluster"], serde_json::json!({"name": "C1"}));
    let to_c1 = remotes(&[("C1", gw_port(&c1))]);
    let c2a = start(node("s2a", "C2", 0, None, to_c1.clone())).await;
    let c2b = start(node("s2b", "C2", 0, Some(route_port(&c2a)), vec![])).await;
    wait_for("C2 connected to C1", || {
        let ok = outbound_names(&c2a) == ["C1"] && outbound_names(&c2b) == ["C1"];
        async move { ok }
    })
    .await;
    let c3 = start(node("s3", "C3", 0, None, to_c1)).await;
    let all = [&c1, &c2a, &c2b, &c3];
    let want: [&[&str]; 4] = [&["C2", "C3"], &["C1", "C3"], &["C1", "C3"], &["C1", "C2"]];
    wait_for("full gateway mesh", || {
        let ok = all
            .iter()
            .zip(want.iter())
            .all(|(s, w)| outbound_names(s) == *w);
        async move { ok }
    })
    .await;
    let mut subs = Vec::new();
    for s in all {
        let mut c = Raw::client(s).await;
        c.send("SUB g.> 1\r\n").await;
        c.flush().await;
        subs.push(c);
    }
    for (s, w) in all.iter().zip(want.iter()) {
        for n in w.iter() {
            wait_remote_interest(s, n, "g.x").await;
        }
    }
    for (i, s) in all.iter().enumerate() {
        let mut p = Raw::client(s).await;
        p.send(&format!("PUB g.{i} 1\r\nx\r\n")).await;
        p.flush().await;
    }
    for c in &mut subs {
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(c.msg().await.0);
        }
        got.sort();
        assert_eq!(got, ["g.0", "g.1", "g.2", "g.3"]);
        assert_eq!(c.sync().await, "");
    }
    shutdown(vec![c1, c2a, c2b, c3]).await;
}

#[tokio::test]
async fn gateway_authorization_and_reject_unknown() {
    let p1 = common::free_port();
    let mut o1 = node("s1", "C1", p1, None, vec![]);
    if let Some(g) = o1.gateway.as_mut() {
        g.username = Some("gw".into());
        g.password = Some("secret".into());
        g.reject_unknown = true;
        // C2 is known (configured), even though C1 never reaches it at that URL first.
        g.gateways = remotes(&[("C2", common::free_port())]);
    }
    let c1 = start(o1).await;
    let with_creds = |user: &str, pass: &str| {
        vec![natsd::config::RemoteGatewayOpts {
            name: "C1".into(),
            urls: vec![format!("nats://{user}:{pass}@127.0.0.1:{p1}")],
            tls: None,
        }]
    };
    // Wrong password, and an unknown cluster with the right credentials: refused.
    for (gateway, pass, err) in [
        ("C2", "nope", "-ERR 'Authorization Violation'"),
        (
            "C4",
            "secret",
            "-ERR 'Connection to gateway \"C1\" rejected'",
        ),
    ] {
        let mut g = raw_gateway_peer_named(&c1, "C1").await;
        g.send(&format!(
            "CONNECT {{\"echo\":false,\"user\":\"gw\",\"pass\":\"{pass}\",\"headers\":false,\"name\":\"NX\",\"cluster\":\"\",\"gateway\":\"{gateway}\"}}\r\n"
        ))
        .await;
        assert_eq!(g.line().await, err);
        assert!(g.closed().await);
    }
    // Right credentials, known cluster: connected (natsd dialling with them in its URL).
    let good = start(node("s2", "C2", 0, None, with_creds("gw", "secret"))).await;
    wait_for("C2's outbound to C1", || {
        let ok = outbound_names(&good) == ["C1"];
        async move { ok }
    })
    .await;
    wait_for("C1's inbound from C2", || {
        let ok = inbound_count(&c1) == 1;
        async move { ok }
    })
    .await;
    shutdown(vec![c1, good]).await;
}

#[tokio::test]
async fn inbound_gateways_learn_new_cluster_urls() {
    let a1 = start(node("a1", "C1", 0, None, vec![])).await;
    let dead = common::free_port();
    let mut g = raw_gateway_peer(&a1).await;
    g.send(&format!("{FAKE_CONNECT}{}", fake_info(dead))).await;
    loop {
        let l = g.line().await;
        if l.contains("\"gateway_cmd\":3") && l.contains("\"JFNZUw==\"") {
            break;
        }
    }
    // A second server joins C1: its gateway URL reaches a1 in the route INFO, and a1 sends
    // its gateway INFO again with both URLs.
    let a2 = start(node("a2", "C1", 0, Some(route_port(&a1)), vec![])).await;
    let want = format!("127.0.0.1:{}", gw_port(&a2));
    loop {
        let l = g.line().await;
        if l == "PING" {
            g.send("PONG\r\n").await;
            continue;
        }
        let Some(json) = l.strip_prefix("INFO ") else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
        let urls: Vec<&str> = v["gateway_urls"]
            .as_array()
            .map(|a| a.iter().filter_map(|u| u.as_str()).collect())
            .unwrap_or_default();
        if urls.contains(&want.as_str()) {
            assert_eq!(urls.len(), 2, "{l}");
            assert_eq!(v["gateway"], "C1");
            break;
        }
    }
    shutdown(vec![a1, a2]).await;
}

#[tokio::test]
async fn outbound_fails_over_to_another_server_of_the_remote_cluster() {
    let b1 = start(node("b1", "C2", 0, None, vec![])).await;
    let b2 = start(node("b2", "C2", 0, Some(route_port(&b1)), vec![])).await;
    wait_for("C2 routed", || {
        let ok = common::cluster::routes(&b1) == 1;
        async move { ok }
    })
    .await;
    // a1 only knows b1; b1's INFO lists b2's gateway URL too.
    let a1 = start(node("a1", "C1", 0, None, remotes(&[("C2", gw_port(&b1))]))).await;
    let outbound_id = |s: &Server| {
        s.shared()
            .gateway
            .as_ref()
            .and_then(|g| g.outbound_to("C2"))
            .map(|o| o.remote_id.clone())
    };
    wait_for("a1's outbound to b1", || {
        let ok = outbound_id(&a1).as_deref() == Some(b1.id());
        async move { ok }
    })
    .await;
    let b2_id = b2.id().to_string();
    b1.shutdown().await;
    wait_for("a1's outbound to b2", || {
        let ok = outbound_id(&a1).as_deref() == Some(b2_id.as_str());
        async move { ok }
    })
    .await;
    let mut sub = Raw::client(&b2).await;
    sub.send("SUB after.failover 1\r\n").await;
    sub.flush().await;
    wait_remote_interest(&a1, "C2", "after.failover").await;
    let mut p = Raw::client(&a1).await;
    p.send("PUB after.failover 2\r\nok\r\n").await;
    p.flush().await;
    let (s, _, _, payload) = sub.msg().await;
    assert_eq!((s.as_str(), &payload[..]), ("after.failover", &b"ok"[..]));
    shutdown(vec![a1, b2]).await;
}

#[tokio::test]
async fn reload_keeps_gateway_and_refuses_gateway_changes() {
    // A cluster block without a name takes the gateway's; reloading the same options is fine.
    let mut o = node("a1", "C1", 0, None, vec![]);
    if let Some(c) = o.cluster.as_mut() {
        c.name = None;
    }
    let s = start(o.clone()).await;
    assert_eq!(
        s.shared().cluster.as_ref().map(|c| c.name()).as_deref(),
        Some("C1")
    );
    assert!(s.reload(o.clone()).is_ok());
    let mut changed = o.clone();
    if let Some(g) = changed.gateway.as_mut() {
        g.connect_retries = 5;
    }
    let e = s.reload(changed).expect_err("refused");
    assert!(e.contains("Gateway"), "{e}");
    s.shutdown().await;
}

#[tokio::test]
async fn silent_inbound_gets_authentication_timeout() {
    let mut o = node("a1", "C1", 0, None, vec![]);
    if let Some(g) = o.gateway.as_mut() {
        g.auth_timeout = Duration::from_millis(200);
    }
    let a = start(o).await;
    let mut g = raw_gateway_peer(&a).await;
    assert_eq!(g.line().await, "-ERR 'Authentication Timeout'");
    assert!(g.closed().await);
    a.shutdown().await;
}

#[tokio::test]
async fn gateway_message_relayed_over_the_route_to_a_queue_member() {
    let b1 = start(node("b1", "C2", 0, None, vec![])).await;
    let b2 = start(node("b2", "C2", 0, Some(route_port(&b1)), vec![])).await;
    // a1 dials b1 (its only configured URL): messages enter C2 at b1.
    let a1 = start(node("a1", "C1", 0, None, remotes(&[("C2", gw_port(&b1))]))).await;
    wait_for("a1's outbound to b1", || {
        let ok = a1
            .shared()
            .gateway
            .as_ref()
            .and_then(|g| g.outbound_to("C2"))
            .is_some_and(|o| o.remote_id == b1.id());
        async move { ok }
    })
    .await;
    // Members only on b2: a queue member and a plain subscriber.
    let mut m = Raw::client(&b2).await;
    m.send("SUB jobs g 1\r\nSUB jobs 2\r\n").await;
    m.flush().await;
    wait_for("a1 knows C2's plain and queue interest", || {
        let ok = a1
            .shared()
            .gateway
            .as_ref()
            .and_then(|g| g.outbound_to("C2"))
            .is_some_and(|o| {
                let (plain, r) = o.interest.check("$G", b"jobs");
                plain && r.is_some_and(|r| !r.qsubs.is_empty())
            });
        async move { ok }
    })
    .await;
    wait_for("b1 knows b2's members", || {
        let ok = b1.shared().accounts.global().sublist.has_interest(b"jobs");
        async move { ok }
    })
    .await;
    let mut p = Raw::client(&a1).await;
    for i in 0..5 {
        p.send(&format!("PUB jobs 1\r\n{i}\r\n")).await;
    }
    p.flush().await;
    // Each message once to the queue member (sid 1) and once to the plain one (sid 2).
    let mut sids = Vec::new();
    for _ in 0..10 {
        let (_, sid, _, _) = m.msg().await;
        sids.push(sid);
    }
    sids.sort();
    assert_eq!(sids, ["1", "1", "1", "1", "1", "2", "2", "2", "2", "2"]);
    assert_eq!(m.sync().await, "");
    shutdown(vec![a1, b1, b2]).await;
}

#[tokio::test]
async fn queue_group_fails_over_to_the_remote_cluster_when_local_members_disconnect() {
    let (a, b) = two_by_two().await;
    // Two local members (a1 and a2), one remote member (b2).
    let mut qa1 = Raw::client(&a[0]).await;
    qa1.send("SUB jobs g 1\r\n").await;
    qa1.flush().await;
    let mut qa2 = Raw::client(&a[1]).await;
    qa2.send("SUB jobs g 1\r\n").await;
    qa2.flush().await;
    let mut qb = Raw::client(&b[1]).await;
    qb.send("SUB jobs g 7\r\n").await;
    qb.flush().await;
    for s in &a {
        wait_remote_interest(s, "C2", "jobs").await;
    }
    wait_for("a1's member known to a2 and a2's to a1", || {
        let ok = a.iter().all(|s| {
            s.shared()
                .accounts
                .global()
                .sublist
                .matches(b"jobs")
                .qsubs
                .iter()
                .map(|g| g.total_weight)
                .sum::<u64>()
                == 2
        });
        async move { ok }
    })
    .await;
    let mut p = Raw::client(&a[0]).await;
    for _ in 0..20 {
        p.send("PUB jobs 1\r\nl\r\n").await;
    }
    p.flush().await;
    // Every message to exactly one member, all of them in C1 (a2's share crosses a route:
    // gather until all 20 are in).
    let mut local = 0;
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while local < 20 {
        assert!(
            std::time::Instant::now() < end,
            "{local} of 20 reached C1's members"
        );
        for q in [&mut qa1, &mut qa2] {
            local += q.sync().await.matches("MSG jobs 1 1").count();
        }
    }
    assert_eq!(local, 20);
    assert_eq!(qa1.sync().await, "");
    assert_eq!(qa2.sync().await, "");
    assert_eq!(qb.sync().await, "");
    // Both local members disconnect (no UNSUB): the group is served by C2, once per message.
    drop(qa1);
    drop(qa2);
    wait_for("C1 queue members gone", || {
        let ok = a.iter().all(|s| {
            s.shared()
                .accounts
                .global()
                .sublist
                .matches(b"jobs")
                .qsubs
                .is_empty()
        });
        async move { ok }
    })
    .await;
    for _ in 0..10 {
        p.send("PUB jobs 1\r\nr\r\n").await;
    }
    p.flush().await;
    for _ in 0..10 {
        let (s, sid, _, payload) = qb.msg().await;
        assert_eq!(
            (s.as_str(), sid.as_str(), &payload[..]),
            ("jobs", "7", &b"r"[..])
        );
    }
    assert_eq!(qb.sync().await, "");
    // A member back in C1: the local cluster is preferred again.
    let mut back = Raw::client(&a[1]).await;
    back.send("SUB jobs g 3\r\n").await;
    back.flush().await;
    wait_for("the new C1 member known to a1", || {
        let ok = !a[0]
            .shared()
            .accounts
            .global()
            .sublist
            .matches(b"jobs")
            .qsubs
            .is_empty();
        async move { ok }
    })
    .await;
    for _ in 0..10 {
        p.send("PUB jobs 1\r\nb\r\n").await;
    }
    p.flush().await;
    for _ in 0..10 {
        let (s, sid, _, payload) = back.msg().await;
        assert_eq!(
            (s.as_str(), sid.as_str(), &payload[..]),
            ("jobs", "3", &b"b"[..])
        );
    }
    assert_eq!(back.sync().await, "");
    assert_eq!(qb.sync().await, "");
    shutdown(a).await;
    shutdown(b).await;
}

/// `/gatewayz?accs=1&acc_name=$G`: `num_subs` of `s`'s outbound to `cluster`.
async fn outbound_num_subs(s: &Server, cluster: &str) -> Option<u64> {
    let z = http_json(
        s.http_addr().expect("monitor"),
        "/gatewayz?accs=1&acc_name=$G",
    )
    .await;
    z["outbound_gateways"][cluster]["accounts"]
        .as_array()?
        .iter()
        .find(|a| a["name"] == "$G")?["num_subs"]
        .as_u64()
}

/// Two distinct free ports (see `common::free_port`).
fn two_free_ports() -> (u16, u16) {
    (common::free_port(), common::free_port())
}

#[tokio::test]
async fn gateway_restart_converges_with_no_stale_interest() {
    // C2 = b1 (fixed gateway and route ports, so it comes back at the same address) + b2.
    let (b1_gw, b1_route) = two_free_ports();
    let b1_opts = || {
        let mut o = node("b1", "C2", b1_gw, None, vec![]);
        if let Some(c) = o.cluster.as_mut() {
            c.port = b1_route;
        }
        o
    };
    let b1 = start(b1_opts()).await;
    let b2 = start(node("b2", "C2", 0, Some(b1_route), vec![])).await;
    // C1 = a1, configured with b1's gateway only.
    let a1 = start(node("a1", "C1", 0, None, remotes(&[("C2", b1_gw)]))).await;
    let (a, b) = (vec![a1], vec![b1, b2]);
    wait_super_cluster(&a, "C2", &b, "C1").await;
    let [b1, b2]: [Server; 2] = b.try_into().ok().expect("two servers");
    let a1 = a.into_iter().next().expect("a1");

    // Interest on both sides before the restart.
    let mut a_stay = Raw::client(&a1).await;
    a_stay.send("SUB x.stay 1\r\n").await;
    a_stay.flush().await;
    let mut a_leave = Raw::client(&a1).await;
    a_leave.send("SUB x.leave 1\r\n").await;
    a_leave.flush().await;
    let mut a_gone = Raw::client(&a1).await;
    a_gone.send("SUB x.gone 1\r\n").await;
    a_gone.flush().await;
    let mut b_keep = Raw::client(&b2).await;
    b_keep.send("SUB y.keep 1\r\nSUB y.leave 2\r\n").await;
    b_keep.flush().await;
    let mut b1_sub = Raw::client(&b1).await;
    b1_sub.send("SUB y.b1 1\r\n").await;
    b1_sub.flush().await;
    for subj in ["y.keep", "y.leave", "y.b1"] {
        wait_remote_interest(&a1, "C2", subj).await;
    }
    for s in [&b1, &b2] {
        for subj in ["x.stay", "x.leave", "x.gone"] {
            wait_remote_interest(s, "C1", subj).await;
        }
    }

    // b1 stops; while it is down C1's interest changes and one C2 subscription leaves.
    drop(b1_sub);
    b1.shutdown().await;
    a_leave.send("UNSUB 1\r\n").await;
    a_leave.flush().await;
    drop(a_gone);
    let mut a_new = Raw::client(&a1).await;
    a_new.send("SUB x.new 1\r\n").await;
    a_new.flush().await;
    b_keep.send("UNSUB 2\r\n").await;
    b_keep.flush().await;
    // (a1's outbound may fail over to b2 meanwhile: either way the interest must be right.)

    // b1 restarts at the same addresses: it rejoins C2 and gateways converge again.
    let b1 = start(b1_opts()).await;
    wait_for("b1 back in C2", || {
        let ok = common::cluster::routes(&b1) == 1 && common::cluster::routes(&b2) == 1;
        async move { ok }
    })
    .await;
    let (a, b) = (vec![a1], vec![b1, b2]);
    wait_super_cluster(&a, "C2", &b, "C1").await;
    let mut b1_new = Raw::client(&b[0]).await;
    b1_new.send("SUB y.after 1\r\n").await;
    b1_new.flush().await;

    // C1's interest as seen by both C2 servers' outbounds: x.stay and x.new only.
    for s in &b {
        wait_remote_interest(s, "C1", "x.stay").await;
        wait_remote_interest(s, "C1", "x.new").await;
        wait_no_remote_interest(s, "C1", "x.leave").await;
        wait_no_remote_interest(s, "C1", "x.gone").await;
        wait_for("C1 num_subs 2 on a C2 outbound", || async {
            outbound_num_subs(s, "C1").await == Some(2)
        })
        .await;
    }
    // C2's interest as seen by a1: y.keep and y.after only (y.b1 left with b1, y.leave
    // unsubscribed while b1 was down).
    wait_remote_interest(&a[0], "C2", "y.keep").await;
    wait_remote_interest(&a[0], "C2", "y.after").await;
    wait_no_remote_interest(&a[0], "C2", "y.leave").await;
    wait_no_remote_interest(&a[0], "C2", "y.b1").await;
    wait_for("C2 num_subs 2 on a1's outbound", || async {
        outbound_num_subs(&a[0], "C2").await == Some(2)
    })
    .await;

    // Delivery: each message reaches exactly its current subscribers, once.
    let mut pa = Raw::client(&a[0]).await;
    pa.send("PUB y.keep 1\r\nk\r\nPUB y.after 1\r\nn\r\nPUB y.leave 1\r\nl\r\nPUB y.b1 1\r\no\r\n")
        .await;
    pa.flush().await;
    for pb in [Raw::client(&b[0]).await, Raw::client(&b[1]).await] {
        let mut pb = pb;
        pb.send(
            "PUB x.stay 1\r\ns\r\nPUB x.new 1\r\nn\r\nPUB x.leave 1\r\nl\r\nPUB x.gone 1\r\ng\r\n",
        )
        .await;
        pb.flush().await;
    }
    let (s, _, _, p) = b_keep.msg().await;
    assert_eq!((s.as_str(), &p[..]), ("y.keep", &b"k"[..]));
    let (s, _, _, p) = b1_new.msg().await;
    assert_eq!((s.as_str(), &p[..]), ("y.after", &b"n"[..]));
    for _ in 0..2 {
        let (s, _, _, p) = a_stay.msg().await;
        assert_eq!((s.as_str(), &p[..]), ("x.stay", &b"s"[..]));
        let (s, _, _, p) = a_new.msg().await;
        assert_eq!((s.as_str(), &p[..]), ("x.new", &b"n"[..]));
    }
    assert_eq!(b_keep.sync().await, "");
    assert_eq!(b1_new.sync().await, "");
    assert_eq!(a_stay.sync().await, "");
    assert_eq!(a_new.sync().await, "");
    assert_eq!(a_leave.sync().await, "");
    shutdown(a).await;
    shutdown(b).await;
}

/// The value of the `/metrics` sample whose line starts with `prefix` (name and first labels).
async fn metric(s: &Server, prefix: &str) -> Option<f64> {
    let (status, body) = common::http_get(s.http_addr().expect("monitor"), "/metrics").await;
    assert_eq!(status, 200);
    body.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The sum of one sample over `servers` (0 where absent).
async fn in_total(servers: &[Server], prefix: &str) -> f64 {
    let mut got = 0.0;
    for s in servers {
        got += metric(s, prefix).await.unwrap_or(0.0);
    }
    got
}

#[tokio::test]
async fn metrics_count_gateway_connections_and_traffic() {
    let (a, b) = two_by_two().await;
    let mut sub = Raw::client(&b[0]).await;
    sub.send("SUB metered 1\r\n").await;
    sub.flush().await;
    wait_remote_interest(&a[0], "C2", "metered").await;
    // ($SYS traffic crosses too: compare with the values before publishing.)
    let out = "natsd_gateway_out_msgs_total{gateway=\"C2\",direction=\"outbound\"";
    let out_bytes = "natsd_gateway_out_bytes_total{gateway=\"C2\",direction=\"outbound\"";
    let a1_id = a[0].id().to_string();
    let inb = format!(
        "natsd_gateway_in_msgs_total{{gateway=\"C1\",direction=\"inbound\",remote_id=\"{a1_id}\"}}"
    );
    let out0 = metric(&a[0], out).await.expect("out msgs sample");
    let bytes0 = metric(&a[0], out_bytes).await.expect("out bytes sample");
    let in0 = in_total(&b, &inb).await;
    let mut p = Raw::client(&a[0]).await;
    p.send("PUB metered 5\r\nhello\r\nPUB metered 5\r\nworld\r\nPUB metered 5\r\nagain\r\n")
        .await;
    p.flush().await;
    for _ in 0..3 {
        sub.msg().await;
    }
    assert_eq!(
        metric(&a[0], "natsd_gateway_connections{direction=\"outbound\"}").await,
        Some(1.0)
    );
    let mut inbound = 0.0;
    for s in &a {
        inbound += metric(s, "natsd_gateway_connections{direction=\"inbound\"}")
            .await
            .expect("inbound sample");
    }
    assert_eq!(inbound, 2.0);
    let out1 = metric(&a[0], out).await.expect("out msgs sample");
    let bytes1 = metric(&a[0], out_bytes).await.expect("out bytes sample");
    assert!(out1 - out0 >= 3.0, "out msgs {out0} -> {out1}");
    assert!(bytes1 - bytes0 >= 15.0, "out bytes {bytes0} -> {bytes1}");
    // b1 or b2 received them on its inbound from a1.
    let in1 = in_total(&b, &inb).await;
    assert!(in1 - in0 >= 3.0, "in msgs {in0} -> {in1}");
    shutdown(a).await;
    shutdown(b).await;
}
