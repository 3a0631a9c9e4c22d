//! Raft groups (src/raft) over the NATS transport: three embedded natsd servers in one
//! cluster carry a group's RPCs as internal requests in the system account over their
//! routes (`$NATSD.RAFT.<group>.<op>.<target>`): election, ordered apply, and a new
//! leader after the old one stops.

mod common;
mod raft_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use natsd::raft::{Group, NatsTransport, NodeId};
use raft_support::{msg, propose_among, test_config, tmp_dir, Recorder, WAIT};

struct Node {
    transport: Arc<NatsTransport>,
    group: Group,
    log: Arc<Mutex<Vec<Vec<u8>>>>,
}

async fn leader_of(nodes: &[&Node]) -> NodeId {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(n) = nodes.iter().find(|n| n.group.is_leader()) {
            return n.group.id();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader over the routes"
        );
        let _ = nodes[0]
            .group
            .wait_for(Duration::from_millis(50), |m| m.leader.is_some())
            .await;
    }
}

async fn wait_logs(nodes: &[&Node], want: &[Vec<u8>]) {
    for n in nodes {
        let got = n
            .group
            .wait_for(WAIT, |_| {
                *n.log.lock().unwrap_or_else(|p| p.into_inner()) == want
            })
            .await;
        assert!(
            got.is_ok(),
            "node {} did not apply {} entries",
            n.group.id(),
            want.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_replicate_a_group_over_their_routes() {
    let servers = common::cluster::mesh_with(3, common::cluster::node_opts).await;
    let dir = tmp_dir("nats-transport");
    let mut nodes = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        let id = i as NodeId + 1;
        let transport = NatsTransport::start(s.shared(), id).expect("transport");
        let log = Arc::new(Mutex::new(Vec::new()));
        let group = Group::open(
            test_config("G1", id, &dir),
            Box::new(Recorder::new(log.clone())),
            transport.clone(),
        )
        .await
        .expect("open group");
        transport.register(&group);
        nodes.push(Node {
            transport,
            group,
            log,
        });
    }
    let members: Vec<(NodeId, String)> = (1..=3).map(|i| (i, format!("n{}", i - 1))).collect();
    for n in &nodes {
        n.group.bootstrap(&members).await.expect("bootstrap");
    }
    let all: Vec<&Node> = nodes.iter().collect();
    let groups: Vec<&Group> = nodes.iter().map(|n| &n.group).collect();
    let mut acked = Vec::new();
    // Proposals follow the leader: on a loaded machine the first election may be
    // followed by another before the first proposal arrives.
    for i in 0..20 {
        propose_among(&groups, &msg(i), WAIT)
            .await
            .unwrap_or_else(|e| panic!("propose {i}: {e}"));
        acked.push(msg(i));
    }
    wait_logs(&all, &acked).await;
    let leader = leader_of(&all).await;

    // The leader's group stops (its server stays up, answering "not served here").
    let old = &nodes[leader as usize - 1];
    old.transport.unregister("G1");
    old.group.shutdown().await;
    let rest: Vec<&Node> = nodes.iter().filter(|n| n.group.id() != leader).collect();
    let new = leader_of(&rest).await;
    assert_ne!(new, leader);
    let rest_groups: Vec<&Group> = rest.iter().map(|n| &n.group).collect();
    for i in 20..30 {
        propose_among(&rest_groups, &msg(i), WAIT)
            .await
            .unwrap_or_else(|e| panic!("propose {i}: {e}"));
        acked.push(msg(i));
    }
    wait_logs(&rest, &acked).await;

    for n in &nodes {
        n.group.shutdown().await;
        n.transport.stop();
    }
    for s in servers {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
