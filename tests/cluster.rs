//! Clusters of natsd nodes on 127.0.0.1 (port 0 everywhere), all seeded to one node: full
//! mesh by gossip, interest and messages across routes, queue groups exactly once.

mod common;

use common::cluster::{self, node_opts, route_port, routes};
use common::{start, wait_for, Raw};
use natsd::Server;
use std::time::Duration;

/// Start `n` nodes, all seeded to the first, and wait for a full mesh.
async fn mesh(n: usize) -> Vec<Server> {
    cluster::mesh_with(n, node_opts).await
}

/// Wait until `sub` on some node is visible to `on` (its interest reached the other node).
async fn wait_interest(on: &Server, subject: &str) {
    let acc = on.shared().accounts.global();
    let subject = subject.to_string();
    wait_for("interest to propagate", || {
        let ok = acc.sublist.has_interest(subject.as_bytes());
        async move { ok }
    })
    .await;
}

#[tokio::test]
async fn three_nodes_form_a_full_mesh_and_stay_stable() {
    let nodes = mesh(3).await;
    // Distinct peers, no duplicates, still so a moment later.
    for s in &nodes {
        let cl = s.shared().cluster.as_ref().expect("cluster");
        let mut ids: Vec<String> = cl.routes().iter().map(|r| r.remote_id.clone()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 2);
        assert!(!ids.contains(&s.id().to_string()));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(nodes.iter().all(|s| routes(s) == 2));
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn five_nodes_seeded_to_one_form_a_full_mesh() {
    let nodes = mesh(5).await;
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn messages_cross_routes_with_wildcards_headers_and_replies() {
    let nodes = mesh(3).await;
    let mut sub = Raw::client(&nodes[2]).await;
    sub.send("SUB orders.> 1\r\nSUB orders.* 2\r\n").await;
    sub.flush().await;
    wait_interest(&nodes[0], "orders.new").await;
    let mut publ = Raw::client(&nodes[0]).await;
    publ.send("PUB orders.new reply.x 5\r\nhello\r\n").await;
    publ.send("HPUB orders.h 22 24\r\nNATS/1.0\r\nX-Key: v\r\n\r\nhi\r\n")
        .await;
    let mut got = Vec::new();
    for _ in 0..2 {
        let (subj, sid, reply, p) = sub.msg().await;
        got.push((subj, sid, reply, p));
    }
    got.sort();
    assert_eq!(got[0].0, "orders.new");
    assert_eq!(got[0].2.as_deref(), Some("reply.x"));
    assert_eq!(got[0].3, b"hello");
    assert_eq!(got[1].0, "orders.new");
    assert_eq!(sub.line().await, "HMSG orders.h 1 22 24");
    assert_eq!(sub.payload(24).await, b"NATS/1.0\r\nX-Key: v\r\n\r\nhi");
    assert_eq!(sub.line().await, "HMSG orders.h 2 22 24");
    sub.payload(24).await;
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn request_reply_across_nodes_with_async_nats() {
    use futures::StreamExt;
    let nodes = mesh(3).await;
    let svc = async_nats::connect(nodes[1].client_url())
        .await
        .expect("connect");
    let mut reqs = svc.subscribe("svc.echo").await.expect("sub");
    svc.flush().await.expect("flush");
    let responder = svc.clone();
    tokio::spawn(async move {
        while let Some(m) = reqs.next().await {
            if let Some(r) = m.reply {
                let _ = responder.publish(r, m.payload).await;
            }
        }
    });
    wait_interest(&nodes[2], "svc.echo").await;
    let nc = async_nats::connect(nodes[2].client_url())
        .await
        .expect("connect");
    for i in 0..20 {
        let body = format!("ping-{i}");
        let resp = tokio::time::timeout(
            Duration::from_secs(5),
            nc.request("svc.echo", body.clone().into()),
        )
        .await
        .expect("timeout")
        .expect("request");
        assert_eq!(resp.payload, body.as_bytes());
    }
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn queue_group_across_nodes_delivers_each_message_once() {
    let nodes = mesh(3).await;
    let mut members = Vec::new();
    for s in &nodes {
        let mut m = Raw::client(s).await;
        m.send("SUB work grp 1\r\n").await;
        m.flush().await;
        members.push(m);
    }
    // Every node sees the group's members on the other nodes.
    for s in &nodes {
        let acc = s.shared().accounts.global();
        wait_for("queue weights", || {
            let r = acc.sublist.matches(b"work");
            let ok = r.qsubs.len() == 1 && r.qsubs[0].total_weight == 3;
            async move { ok }
        })
        .await;
    }
    let mut p = Raw::client(&nodes[0]).await;
    let n = 600;
    for i in 0..n {
        p.send(&format!("PUB work 4\r\n{i:04}\r\n")).await;
    }
    p.flush().await;
    let mut seen = std::collections::HashSet::new();
    let mut per = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while seen.len() < n && std::time::Instant::now() < deadline {
        for m in &mut members {
            let text = m.sync().await;
            for chunk in text.split("MSG work 1 4\r\n").skip(1) {
                assert!(seen.insert(chunk[..4].to_string()), "delivered twice");
            }
        }
    }
    for m in &mut members {
        per.push(m.buf.len());
    }
    assert_eq!(seen.len(), n, "every message once");
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn restarted_node_rejoins_and_interest_converges() {
    let mut nodes = mesh(3).await;
    let seed = route_port(&nodes[0]);
    let mut sub = Raw::client(&nodes[0]).await;
    sub.send("SUB back 1\r\n").await;
    sub.flush().await;
    let gone = nodes.pop().expect("node");
    gone.shutdown().await;
    wait_for("peers notice", || {
        let ok = routes(&nodes[0]) == 1 && routes(&nodes[1]) == 1;
        async move { ok }
    })
    .await;
    let again = start(node_opts("n2b", Some(seed))).await;
    nodes.push(again);
    wait_for("mesh again", || {
        let ok = nodes.iter().all(|s| routes(s) == 2);
        async move { ok }
    })
    .await;
    // The late joiner learned the existing interest from the dump.
    wait_interest(&nodes[2], "back").await;
    let mut p = Raw::client(&nodes[2]).await;
    p.send("PUB back 2\r\nhi\r\n").await;
    let (subj, _, _, payload) = sub.msg().await;
    assert_eq!((subj.as_str(), &payload[..]), ("back", &b"hi"[..]));
    // Interest that is gone is withdrawn everywhere.
    sub.send("UNSUB 1\r\n").await;
    sub.flush().await;
    let acc = nodes[2].shared().accounts.global();
    wait_for("interest withdrawn", || {
        let ok = !acc.sublist.has_interest(b"back");
        async move { ok }
    })
    .await;
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn ten_thousand_subscriptions_propagate_and_are_withdrawn() {
    let nodes = mesh(3).await;
    // What `$G` holds before: the system imports' internal subscriptions.
    let base = nodes[1].shared().accounts.global().sublist.count();
    let mut sub = Raw::client(&nodes[0]).await;
    let mut batch = String::new();
    for i in 0..10_000 {
        batch.push_str(&format!(
            "SUB many.{i} {i}\r\nSUB many.q.{} grp {}\r\n",
            i % 10,
            100_000 + i
        ));
    }
    sub.send(&batch).await;
    sub.flush().await;
    // 10,000 plain subjects plus 10 queue groups (weights aggregated) on every peer.
    for s in &nodes[1..] {
        let acc = s.shared().accounts.global();
        wait_for("10k remote subscriptions", || {
            let ok = acc.sublist.count() == base + 10_010
                && acc
                    .sublist
                    .matches(b"many.q.3")
                    .qsubs
                    .first()
                    .map(|g| g.total_weight)
                    == Some(1000);
            async move { ok }
        })
        .await;
    }
    let mut p = Raw::client(&nodes[2]).await;
    p.send("PUB many.9999 1\r\nz\r\n").await;
    let (subj, sid, _, _) = sub.msg().await;
    assert_eq!((subj.as_str(), sid.as_str()), ("many.9999", "9999"));
    drop(sub);
    for s in &nodes[1..] {
        let acc = s.shared().accounts.global();
        wait_for("remote subscriptions withdrawn", || {
            let ok = acc.sublist.count() == base;
            async move { ok }
        })
        .await;
    }
    for s in nodes {
        s.shutdown().await;
    }
}
