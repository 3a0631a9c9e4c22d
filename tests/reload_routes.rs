//! Config reload of `cluster { pool_size, accounts, compression }` (issue 14), natsd-only and
//! mixed with nats-server 2.15.1 (docs/nats-server-behaviour.md section 24): after each
//! reload, every node's `/routez` shows the new pool, pinned accounts and compression, traffic
//! in two accounts (G: pub/sub, headers, a queue group; A: pub/sub) flows between every pair,
//! and the route ids stay the same over a polling window (no flapping). A reload that keeps
//! these settings closes no route.

mod common;

use common::binary::{tmp_dir, write_conf};
use common::natsserver::{self, NatsServer, Wait};
use common::traffic::check_traffic;
use common::{conf_opts, http_json, start, Raw, DEADLINE};
use natsd::Server;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

enum Node {
    Rust(Server, String),
    Go(NatsServer, PathBuf),
}

impl Node {
    fn client(&self) -> SocketAddr {
        match self {
            Node::Rust(s, _) => s.client_addr(),
            Node::Go(g, _) => g.client,
        }
    }
    fn http(&self) -> SocketAddr {
        match self {
            Node::Rust(s, _) => s.http_addr().expect("natsd monitor"),
            Node::Go(g, _) => g.http,
        }
    }
    fn route_port(&self) -> u16 {
        match self {
            Node::Rust(s, _) => common::cluster::route_port(s),
            Node::Go(g, _) => g.route_port,
        }
    }

    /// Rewrite the node's config with cluster settings `extra` and reload it (SIGHUP for
    /// nats-server, which re-reads its file).
    fn reload(&self, extra: &str) {
        match self {
            Node::Rust(s, base) => {
                let text = base.replace("{extra}", extra);
                s.reload(conf_opts(&text)).expect("natsd reload");
            }
            Node::Go(g, path) => {
                let text = std::fs::read_to_string(path.with_extension("tmpl")).expect("tmpl");
                std::fs::write(path, text.replace("{extra}", extra)).expect("write conf");
                let ok = std::process::Command::new("kill")
                    .args(["-HUP", &g.pid().to_string()])
                    .status()
                    .expect("kill")
                    .success();
                assert!(ok, "SIGHUP to nats-server");
            }
        }
    }
}

/// The mixed-cluster config (accounts G and A, cluster C1 seeded at `seed`) with the cluster
/// settings under test left as `{extra}`.
fn template(name: &str, seed: Option<u16>) -> String {
    common::mixed::config(name, seed, "{extra}")
}

async fn natsd(name: &str, seed: Option<u16>, extra: &str) -> Node {
    let base = template(name, seed);
    let s = start(conf_opts(&base.replace("{extra}", extra))).await;
    Node::Rust(s, base)
}

fn go(name: &str, seed: Option<u16>, extra: &str) -> Node {
    let bin = natsserver::assert_installed_215();
    let dir = tmp_dir("reload-routes", name);
    let base = template(name, seed);
    let path = write_conf(&dir, "server.conf", &base.replace("{extra}", extra));
    std::fs::write(path.with_extension("tmpl"), &base).expect("write template");
    let g = natsserver::launch_bin(
        &bin,
        // Debug log: kept in memory, printed by `explain` when traffic does not cross.
        &[
            "-D".to_string(),
            "-c".to_string(),
            path.to_string_lossy().into_owned(),
        ],
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready: true,
        },
    );
    Node::Go(g, path)
}

/// What one node's `/routez` shows per peer: (pinned accounts, plain connections, the set of
/// compression modes of its routes).
type Shape = (BTreeSet<String>, usize, BTreeSet<String>);

async fn shapes(n: &Node) -> BTreeMap<String, Shape> {
    let z = http_json(n.http(), "/routez").await;
    let mut m: BTreeMap<String, Shape> = BTreeMap::new();
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
        e.2.insert(r["compression"].as_str().unwrap_or_default().to_string());
    }
    m
}

/// Wait until every node has, to each other node, exactly `plain` plain routes, the pinned
/// `accounts` and every route at compression `comp`.
async fn wait_shape(nodes: &[Node], plain: usize, accounts: &[&str], comp: &str) {
    let want: Shape = (
        accounts.iter().map(|s| s.to_string()).collect(),
        plain,
        [comp.to_string()].into(),
    );
    let end = Instant::now() + DEADLINE * 2;
    loop {
        let mut seen = Vec::new();
        let mut ok = true;
        for n in nodes {
            let s = shapes(n).await;
            ok &= s.len() == nodes.len() - 1 && s.values().all(|v| *v == want);
            seen.push(s);
        }
        if ok {
            return;
        }
        if Instant::now() >= end {
            panic!(
                "want {want:?} everywhere, got {seen:#?}\n{}",
                explain(nodes).await
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn rids(nodes: &[Node]) -> Vec<BTreeSet<u64>> {
    let mut out = Vec::new();
    for n in nodes {
        let z = http_json(n.http(), "/routez").await;
        let ids = z["routes"].as_array().into_iter().flatten();
        out.push(ids.filter_map(|r| r["rid"].as_u64()).collect());
    }
    out
}

/// The route ids stay the same while `/routez` is read for a while (a flapping route would
/// get a new id).
async fn stable(nodes: &[Node], before: &[BTreeSet<u64>]) {
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        assert_eq!(rids(nodes).await, before, "a route was replaced");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn user_client(at: SocketAddr, user: &str) -> Raw {
    let connect = format!(
        r#"{{"verbose":false,"pedantic":false,"user":"{user}","pass":"{user}","headers":true}}"#
    );
    Raw::connected_at(at, &connect).await
}

/// Account A: a message from every node to a subscriber on every other node.
async fn check_account_a(nodes: &[Node]) {
    for (i, to) in nodes.iter().enumerate() {
        let mut sub = user_client(to.client(), "a").await;
        sub.send(&format!("SUB a.{i} 1\r\n")).await;
        sub.flush().await;
        for (j, from) in nodes.iter().enumerate() {
            if i != j {
                let mut p = user_client(from.client(), "a").await;
                let subject = format!("a.{i}");
                let within = Duration::from_secs(10);
                if !common::delivered_within(&mut p, &mut sub, &subject, within).await {
                    panic!(
                        "interest for {subject} never crossed from node {j} to node {i}\n{}",
                        explain(nodes).await
                    );
                }
            }
        }
    }
}

/// What each node knows of its routes (with the interest learned on each) and the end of
/// each nats-server's debug log: printed when traffic does not cross, so a failure in CI
/// says which connection lacks what.
async fn explain(nodes: &[Node]) -> String {
    let mut out = String::new();
    for (k, n) in nodes.iter().enumerate() {
        let z = http_json(n.http(), "/routez?subs=1").await;
        out.push_str(&format!("node {k} /routez?subs=1:\n"));
        for r in z["routes"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  rid {} remote {} account {} solicit {} compression {} port {} subs {}\n",
                r["rid"],
                r["remote_name"],
                r["account"],
                r["did_solicit"],
                r["compression"],
                r["port"],
                r["subscriptions_list"]
            ));
        }
        if let Node::Go(g, _) = n {
            let log = g.log_lines("");
            let from = log.len().saturating_sub(150);
            out.push_str(&format!("node {k} log (last {}):\n", log.len() - from));
            for l in &log[from..] {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    out
}

/// Reload every node to `extra`, wait for the shape, check traffic and that nothing flaps.
async fn step(nodes: &[Node], extra: &str, plain: usize, accounts: &[&str], comp: &str) {
    // The time, to line up with the nats-server log that `explain` prints.
    let now = natsd::util::time::rfc3339_nano(std::time::SystemTime::now());
    eprintln!("{now} reload to {extra:?}");
    for n in nodes {
        n.reload(extra);
    }
    wait_shape(nodes, plain, accounts, comp).await;
    let before = rids(nodes).await;
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::client).collect();
    check_traffic(&addrs).await;
    check_account_a(nodes).await;
    stable(nodes, &before).await;
}

/// Every change in turn on a cluster, each applied to all nodes: pool sizes, then (`accounts`)
/// a pinned account added and removed, then (`compression`) compression modes.
async fn walk(nodes: &[Node], accounts: bool, compression: bool) {
    wait_shape(nodes, 3, &["$SYS"], "off").await;
    // Unchanged settings (another option changes): no route closes.
    let before = rids(nodes).await;
    for n in nodes {
        n.reload("compression: off\n  pool_size: 3");
    }
    stable(nodes, &before).await;
    step(
        nodes,
        "compression: off\n  pool_size: 5",
        5,
        &["$SYS"],
        "off",
    )
    .await;
    step(nodes, "compression: off\n  pool_size: -1", 1, &[], "off").await;
    step(
        nodes,
        "compression: off\n  pool_size: 3",
        3,
        &["$SYS"],
        "off",
    )
    .await;
    if accounts {
        step(
            nodes,
            "compression: off\n  accounts: [A]",
            3,
            &["$SYS", "A"],
            "off",
        )
        .await;
        step(nodes, "compression: off", 3, &["$SYS"], "off").await;
    }
    if !compression {
        return;
    }
    step(nodes, "compression: s2_fast", 3, &["$SYS"], "s2_fast").await;
    // Between levels: in place, no route closes.
    let before = rids(nodes).await;
    for n in nodes {
        n.reload("compression: s2_best");
    }
    wait_shape(nodes, 3, &["$SYS"], "s2_best").await;
    assert_eq!(rids(nodes).await, before, "a level change closed a route");
    step(nodes, "compression: off", 3, &["$SYS"], "off").await;
}

async fn shutdown(nodes: impl IntoIterator<Item = Node>) {
    for n in nodes {
        if let Node::Rust(s, _) = n {
            s.shutdown().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_cluster_reloads_pool_accounts_and_compression() {
    let first = "compression: off";
    let r0 = natsd("r0", None, first).await;
    let r1 = natsd("r1", Some(r0.route_port()), first).await;
    let r2 = natsd("r2", Some(r0.route_port()), first).await;
    let nodes = [r0, r1, r2];
    walk(&nodes, true, true).await;
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_cluster_with_nats_server_215_reloads_pool_accounts_and_compression() {
    let first = "compression: off";
    let r0 = natsd("r0", None, first).await;
    let g1 = go("g1", Some(r0.route_port()), first);
    let r2 = natsd("r2", Some(g1.route_port()), first).await;
    let nodes = [r0, g1, r2];
    // Pool sizes, a pinned account (nats-server dials a newly pinned account only on its
    // configured routes: natsd dials it toward a nats-server peer it did not dial first) and
    // compression. A change that closes every route at once can make a natsd and a
    // nats-server node dial each other together: natsd keeps both until nats-server has
    // closed the one it registered last (before, natsd closed the other by its own rule and
    // the pair was left with none, for seconds).
    walk(&nodes, true, true).await;
    shutdown(nodes).await;
}

/// A natsd node and a nats-server node that know each other only through gossip (both seeded
/// at r0): whichever of them dialled the pair's first connection, the pair gets its pinned
/// `$SYS` connection (this failed every run before natsd dialled it) and the account pinned
/// by a reload (nats-server dials it only on configured routes; natsd dials both toward a
/// peer that dialled the pair itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gossip_joined_natsd_and_nats_server_pair_gets_its_pinned_routes() {
    let first = "compression: off";
    let r0 = natsd("p0", None, first).await;
    let r1 = natsd("p1", Some(r0.route_port()), first).await;
    let g2 = go("p2", Some(r0.route_port()), first);
    let nodes = [r0, r1, g2];
    wait_shape(&nodes, 3, &["$SYS"], "off").await;
    step(
        &nodes,
        "compression: off\n  accounts: [A]",
        3,
        &["$SYS", "A"],
        "off",
    )
    .await;
    shutdown(nodes).await;
}

/// A route whose handshake a `compression` reload interrupts negotiates with the settings
/// its end's INFO announced (`off` here), so it is checked against the new ones once it is
/// registered: `off` under `s2_fast` is closed to negotiate anew, as the reload closed every
/// `off` route that was up. Before, it kept `off` for good (neither end closed it: the
/// reload had passed); it may be what once left the mixed walk above with an `off` route.
#[tokio::test]
async fn a_route_whose_handshake_spans_a_compression_reload_is_checked_once_registered() {
    let node = natsd("hs0", None, "compression: off").await;
    let route = SocketAddr::from(([127, 0, 0, 1], node.route_port()));
    let mut peer = Raw::at_any(route).await;
    let info = peer.line().await;
    assert!(info.contains(r#""compression":"off""#), "{info}");
    node.reload("compression: s2_fast");
    // The peer's side of the handshake, as a pooled nats-server configured for `s2_fast`
    // sends it: `off` is what natsd's INFO asked for, so the route comes up plain.
    let extra = r#","route_pool_size":3,"compression":"s2_fast""#;
    peer.send(&common::mixed::route_hello("FAKEHS", extra))
        .await;
    assert!(
        peer.closed().await,
        "the plain route stayed up under s2_fast"
    );
    let seen = String::from_utf8_lossy(&peer.buf).into_owned();
    assert!(!seen.contains("-ERR"), "refused rather than closed: {seen}");
    shutdown([node]).await;
}
