//! Mixed clusters of natsd and Debian's real nats-server (installed by `.ci/run`): they form
//! one full mesh through gossip and pass pub/sub, queues (exactly once), headers and
//! request/reply in every direction. Never skipped: a missing nats-server is a failure.

mod common;

use common::cluster::{node_opts as natsd_opts, route_port, routes};
use common::natsserver::{self, NatsServer};
use common::{http_json, start, wait_for, Raw};
use std::net::SocketAddr;
use std::time::Duration;

/// A real nats-server child process, killed on drop.
type Go = NatsServer;

fn go_server(name: &str, seed: Option<u16>) -> Go {
    natsserver::clustered(name, seed, false)
}

async fn go_routes(g: &Go) -> u64 {
    http_json(g.http, "/routez").await["num_routes"]
        .as_u64()
        .unwrap_or(0)
}
/// Every node's client pair: pub/sub, headers and queue groups across all directions.
async fn check_traffic(addrs: &[SocketAddr]) {
    // Plain and header messages from every node to a subscriber on every other node.
    for (i, to) in addrs.iter().enumerate() {
        let mut sub = Raw::client_at(*to).await;
        sub.send(&format!("SUB x.{i}.> 1\r\n")).await;
        sub.flush().await;
        for (j, from) in addrs.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut p = Raw::client_at(*from).await;
            common::until_delivered(&mut p, &mut sub, &format!("x.{i}.probe{j}")).await;
            p.send(&format!(
                "HPUB x.{i}.h{j} rep.{j} 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
            ))
            .await;
            p.flush().await;
            assert_eq!(
                sub.next_non_ping().await,
                format!("HMSG x.{i}.h{j} 1 rep.{j} 12 14")
            );
            assert_eq!(sub.payload(14).await, b"NATS/1.0\r\n\r\nhi");
        }
    }
    // One queue group with a member on every node: each message exactly once.
    let mut members = Vec::new();
    for a in addrs {
        let mut m = Raw::client_at(*a).await;
        m.send("SUB jobs workers 1\r\n").await;
        m.flush().await;
        members.push(m);
    }
    for (k, a) in addrs.iter().enumerate() {
        let mut p = Raw::client_at(*a).await;
        // Wait until every member's interest is visible here: a plain probe sub per member.
        let mut probes = Vec::new();
        for b in addrs {
            let mut s = Raw::client_at(*b).await;
            s.send("SUB jobs.probe 1\r\n").await;
            s.flush().await;
            probes.push(s);
        }
        for s in &mut probes {
            common::until_delivered(&mut p, s, "jobs.probe").await;
        }
        let n = 300;
        for i in 0..n {
            p.send(&format!("PUB jobs 6\r\n{k}-{i:04}\r\n")).await;
        }
        p.flush().await;
        let mut seen = std::collections::HashSet::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while seen.len() < n && std::time::Instant::now() < deadline {
            for m in &mut members {
                let text = m.sync().await;
                for chunk in text.split("MSG jobs 1 6\r\n").skip(1) {
                    assert!(
                        seen.insert(chunk[..6].to_string()),
                        "delivered twice: {}",
                        &chunk[..6]
                    );
                }
            }
        }
        assert_eq!(
            seen.len(),
            n,
            "queue messages from node {k}: each exactly once"
        );
    }
}

/// Request/reply through async-nats in every direction.
async fn check_requests(addrs: &[SocketAddr]) {
    use futures::StreamExt;
    for (i, svc_addr) in addrs.iter().enumerate() {
        let svc = async_nats::connect(format!("nats://{svc_addr}"))
            .await
            .expect("connect");
        let subject = format!("svc.{i}");
        let mut reqs = svc.subscribe(subject.clone()).await.expect("sub");
        svc.flush().await.expect("flush");
        let responder = svc.clone();
        let task = tokio::spawn(async move {
            while let Some(m) = reqs.next().await {
                if let Some(r) = m.reply {
                    let _ = responder.publish(r, m.payload).await;
                    let _ = responder.flush().await;
                }
            }
        });
        for (j, req_addr) in addrs.iter().enumerate() {
            if i == j {
                continue;
            }
            let nc = async_nats::connect(format!("nats://{req_addr}"))
                .await
                .expect("connect");
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                match tokio::time::timeout(
                    Duration::from_secs(2),
                    nc.request(subject.clone(), "ping".into()),
                )
                .await
                {
                    Ok(Ok(m)) => {
                        assert_eq!(&m.payload[..], b"ping");
                        break;
                    }
                    other => {
                        // Interest may still be crossing (no responders): retry until the deadline.
                        assert!(
                            std::time::Instant::now() < deadline,
                            "request {j}->{i}: {other:?}"
                        );
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }
        task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_natsd_and_one_nats_server_form_one_cluster() {
    let a = start(natsd_opts("rust-a", None)).await;
    let seed = route_port(&a);
    let g = go_server("go-b", Some(seed));
    let c = start(natsd_opts("rust-c", Some(seed))).await;
    wait_for("full mesh", || {
        let g = &g;
        let (ra, rc) = (routes(&a), routes(&c));
        async move { ra == 2 && rc == 2 && go_routes(g).await == 2 }
    })
    .await;
    let addrs = [a.client_addr(), g.client, c.client_addr()];
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    a.shutdown().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_natsd_and_two_nats_servers_form_one_cluster() {
    let g1 = go_server("go-a", None);
    let r = start(natsd_opts("rust-b", Some(g1.route_port))).await;
    let g2 = go_server("go-c", Some(g1.route_port));
    wait_for("full mesh", || {
        let (g1, g2) = (&g1, &g2);
        let rr = routes(&r);
        async move { rr == 2 && go_routes(g1).await == 2 && go_routes(g2).await == 2 }
    })
    .await;
    let addrs = [g1.client, r.client_addr(), g2.client];
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    r.shutdown().await;
}
