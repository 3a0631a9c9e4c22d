//! Traffic checks for a cluster, given one client address per node: pub/sub with headers
//! between every pair, a queue group served exactly once, request/reply in every direction.

use super::Raw;
use std::net::SocketAddr;
use std::time::Duration;

/// Every node's client pair: pub/sub, headers and queue groups across all directions.
pub async fn check_traffic(addrs: &[SocketAddr]) {
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
            super::until_delivered(&mut p, &mut sub, &format!("x.{i}.probe{j}")).await;
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
            super::until_delivered(&mut p, s, "jobs.probe").await;
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
pub async fn check_requests(addrs: &[SocketAddr]) {
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
