//! A network partition of a three-process natsd JetStream cluster: the R3 stream's leader is
//! cut off from the other two (every route runs through a link the test cuts). Its own
//! clients get no PubAck (a minority of one commits nothing), the majority elects a leader
//! and goes on, and once the partition heals the cut-off node drops what it took alone and
//! holds exactly what the majority acknowledged.

mod common;

use std::time::Duration;

use common::jsproc::{copies, create_ev, publish_acked, request, subject_at, three_linked, WAIT};
use serde_json::Value;

/// The server name of EV's leader, as the stream's leader answers STREAM.INFO.
async fn leader(nc: &async_nats::Client) -> Option<String> {
    let i = request(nc, "$JS.API.STREAM.INFO.EV", String::new()).await?;
    i["cluster"]["leader"].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_commits_nothing_and_rejoins_the_majority() {
    let (nodes, nc) = three_linked("jsc-part").await;
    create_ev(&nc, "file").await;
    for i in 1..=10 {
        assert_eq!(publish_acked(&nc, i).await, i);
    }
    let first = leader(&nc).await.expect("a leader");
    let k: usize = first[1..].parse().expect("n<i>");
    let url = |i: usize| format!("nats://127.0.0.1:{}", nodes.clients[i]);
    let lone = async_nats::connect(url(k))
        .await
        .expect("connect to the leader");
    let other = (k + 1) % 3;
    let majority = async_nats::connect(url(other))
        .await
        .expect("connect to the majority");

    nodes.isolate(k, true);
    let routez = std::net::SocketAddr::from(([127, 0, 0, 1], nodes.http[k]));
    common::wait_for("the cut-off node to lose its routes", || async move {
        let (_, body) = common::http_get(routez, "/routez").await;
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["num_routes"] == 0
    })
    .await;
    // The old leader's clients publish into the minority: no PubAck.
    for n in 0..3 {
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            lone.request(format!("ev.lone{n}"), "alone".into()),
        )
        .await;
        if let Ok(Ok(m)) = r {
            let v: Value = serde_json::from_slice(&m.payload).unwrap_or_default();
            assert!(
                v["seq"].as_u64().is_none(),
                "acknowledged in a minority: {v}"
            );
        }
    }
    // The majority elects a leader of its own and takes messages.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if leader(&majority).await.is_some_and(|l| l != first) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the majority elects no leader"
        );
    }
    for i in 11..=20 {
        assert_eq!(publish_acked(&majority, i).await, i);
    }

    nodes.isolate(k, false);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let c = copies(&nodes.http, "EV").await;
        if c.iter().all(|c| c.is_some_and(|c| c.0 == 20 && c.3 == 20))
            && c[0] == c[1]
            && c[1] == c[2]
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the copies do not agree on what the majority acknowledged: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Through the rejoined node: every message where its ack said, none of the lone ones.
    for seq in 1..=20 {
        assert_eq!(subject_at(&lone, "EV", seq).await, format!("ev.{seq}"));
    }
}
