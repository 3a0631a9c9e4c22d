//! An account's `max_connections` counted across the cluster, as nats-server counts it
//! (`nrclients`, from the `$SYS.SERVER.ACCOUNT.<acc>.CONNS` updates servers publish): with a
//! limit of 2, one client of the account on each of two nodes fills it, and a third client
//! is refused on either node with `-ERR 'maximum account active connections exceeded'`;
//! when one leaves, a client is accepted again. Two natsd nodes, and natsd with nats-server
//! 2.15.1 (docs/nats-server-behaviour.md, "Account connections across a cluster").

mod common;

use common::mixed::{self, Node};
use common::natsserver;
use common::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Account A allows two connections; SYS is the system account (the updates travel in it).
const ACCOUNTS: &str = r#"accounts {
  A: { users: [ { user: a, password: a } ], limits { max_connections: 2 } }
  SYS: { users: [ { user: sys, password: sys } ] }
}
system_account: SYS"#;

async fn natsd(name: &str, seed: Option<u16>) -> Node {
    mixed::natsd_conf(&mixed::member_config(name, seed, ACCOUNTS, "")).await
}

fn go(name: &str, seed: Option<u16>) -> Node {
    let conf = mixed::member_config(name, seed, ACCOUNTS, "");
    mixed::go_conf(&natsserver::assert_installed_215(), name, &conf)
}

const CONNECT: &str = r#"{"verbose":false,"pedantic":false,"user":"a","pass":"a"}"#;

/// Connect as user `a`: `Ok(client)` when the server answers PONG, `Err(line)` otherwise.
async fn try_client(at: SocketAddr) -> Result<Raw, String> {
    let mut r = Raw::at(at).await;
    r.send(&format!("CONNECT {CONNECT}\r\nPING\r\n")).await;
    let line = r.next_non_ping().await;
    if line == "PONG" {
        Ok(r)
    } else {
        Err(line)
    }
}

/// Poll until a new client at `at` gets `want` (refused: the error line; accepted: PONG).
async fn until(step: &str, at: SocketAddr, refused: bool) -> Option<Raw> {
    let end = Instant::now() + DEADLINE;
    loop {
        match try_client(at).await {
            Err(e) if refused => {
                assert_eq!(e, "-ERR 'maximum account active connections exceeded'");
                return None;
            }
            Ok(c) if !refused => return Some(c),
            other => {
                // Probe refused or accepted too early: it closes (dropped), and we retry.
                drop(other);
                assert!(
                    Instant::now() < end,
                    "{step}: {at}: never {}",
                    if refused { "refused" } else { "accepted" }
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Wait until each node has, over its routes, the others' interest in the account
/// connection updates (an update sent before would reach nobody: nats-server and natsd
/// then rely on the next change or the 30 s heartbeat).
async fn wait_routed(nodes: &[&Node]) {
    for n in nodes {
        let addr = n.http();
        wait_for(
            "the peers' interest in account connection updates",
            || async move {
                let v = http_json(addr, "/routez?subs=1").await;
                v["num_routes"].as_u64() > Some(0)
                    && v.to_string().contains("$SYS.SERVER.ACCOUNT.*.CONNS")
            },
        )
        .await;
    }
}

/// Wait for the server to close `c` (EOF).
async fn closed(mut s: TcpStream) {
    let mut b = [0u8; 256];
    let end = Instant::now() + DEADLINE;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut b)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => continue,
            Err(_) => panic!("connection not closed"),
        }
    }
}

/// A system-account client of `at` listening to the account connection updates.
async fn updates(at: SocketAddr) -> Raw {
    let mut r = Raw::connected_at(
        at,
        r#"{"verbose":false,"pedantic":false,"user":"sys","pass":"sys"}"#,
    )
    .await;
    r.send("SUB $SYS.SERVER.ACCOUNT.A.CONNS 1\r\nPING\r\n")
        .await;
    r.expect("PONG").await;
    r
}

/// Wait until `u`'s node got an update from server `from` saying `conns`. A probe before
/// that would be accepted, and its own update would make the other node close its newest
/// client (nats-server's rebalancing): a race of the test, not of the servers.
async fn heard(u: &mut Raw, from: &str, conns: u64) {
    loop {
        let (_, _, _, payload) = u.msg().await;
        let v: serde_json::Value = serde_json::from_slice(&payload).expect("JSON");
        if v["server"]["id"] == from && v["conns"] == conns {
            return;
        }
    }
}

async fn scenario(n1: Node, n2: Node) {
    wait_routed(&[&n1, &n2]).await;
    let (a1, a2) = (n1.client(), n2.client());
    let (id1, id2) = (n1.id().await, n2.id().await);
    let (mut u1, mut u2) = (updates(a1).await, updates(a2).await);
    let c1 = try_client(a1).await.expect("first client on n1");
    let c2 = try_client(a2).await.expect("first client on n2");
    // Each node hears of the other's client: the account is full on both.
    heard(&mut u1, &id2, 1).await;
    heard(&mut u2, &id1, 1).await;
    until("n1 full", a1, true).await;
    until("n2 full", a2, true).await;
    // One leaves: a client is accepted again on the other node.
    drop(c2);
    heard(&mut u1, &id2, 0).await;
    let c3 = until("n1 after n2's left", a1, false)
        .await
        .expect("accepted");
    heard(&mut u2, &id1, 2).await;
    until("n2 full again", a2, true).await;
    drop((c1, c3));
    common::mixed::shutdown([n1, n2]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_natsd_nodes_count_an_accounts_connections_together() {
    let n1 = natsd("n1", None).await;
    let n2 = natsd("n2", Some(n1.route_port())).await;
    scenario(n1, n2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_and_nats_server_count_an_accounts_connections_together() {
    let n1 = natsd("n1", None).await;
    let n2 = go("n2", Some(n1.route_port()));
    scenario(n1, n2).await;
}

/// Two clients on n1 (limit 2) before n2 is routed, then one on n2: either n2 already heard
/// n1's count (natsd sends it when it first hears a server's STATSZ) and refuses it, or it
/// accepts it and its update puts n1 over the limit, and n1 closes its newest client, as
/// nats-server's `updateRemoteServer`. Either way the older client stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_limit_after_a_remote_update_the_newest_client_is_closed() {
    let n1 = natsd("n1", None).await;
    let a1 = n1.client();
    let mut c1 = try_client(a1).await.expect("first");
    let c2 = try_client(a1).await.expect("second");
    let n2 = natsd("n2", Some(n1.route_port())).await;
    wait_routed(&[&n1, &n2]).await;
    match try_client(n2.client()).await {
        Ok(_c3) => closed(c2.stream).await,
        Err(e) => assert_eq!(e, "-ERR 'maximum account active connections exceeded'"),
    }
    c1.send("PING\r\n").await;
    assert_eq!(c1.next_non_ping().await, "PONG", "the older client stays");
    common::mixed::shutdown([n1, n2]).await;
}
