//! A leaf *cluster* (two nodes in cluster `LC`, each a leaf of a different node of a hub
//! cluster `C1`): a message published in the leaf cluster reaches a subscriber in the leaf
//! cluster exactly once — over the leaf cluster's own route, never again through the hub.
//! nats-server keeps it so by the origin cluster that leaf interest and leaf messages carry
//! over routes (`LS+ <origin> …`, `LMSG <origin> …`): a hub node never hands a leaf
//! connection interest or messages that came from that leaf's own cluster
//! (docs/nats-server-behaviour.md §49). natsd alone, hub clusters that mix natsd and
//! nats-server 2.15.1 both ways, and a nats-server leaf cluster of a natsd hub.

mod common;

use common::cluster::{node_opts, route_port, routes, seed_routes};
use common::leaf::{go_server, hub_opts, leaf_port, wait_links};
use common::natsserver::{self, NatsServer};
use common::{free_port, start, until_delivered, wait_for, Raw};
use natsd::config::leaf::{LeafOpts, RemoteLeafOpts};
use natsd::config::ClusterOpts;
use natsd::{Options, Server};
use std::net::SocketAddr;

const SUITE: &str = "leaf_clusters";

/// A node of either server, as the test reaches it.
enum Node {
    Natsd(Server),
    Go {
        s: NatsServer,
        route: u16,
        leaf: u16,
    },
}

impl Node {
    fn client(&self) -> SocketAddr {
        match self {
            Node::Natsd(s) => s.client_addr(),
            Node::Go { s, .. } => s.client,
        }
    }
    fn route(&self) -> u16 {
        match self {
            Node::Natsd(s) => route_port(s),
            Node::Go { route, .. } => *route,
        }
    }
    fn leaf(&self) -> u16 {
        match self {
            Node::Natsd(s) => leaf_port(s),
            Node::Go { leaf, .. } => *leaf,
        }
    }
    async fn raw(&self) -> Raw {
        Raw::client_at(self.client()).await
    }
}

/// A node of leaf cluster `LC` named `name`, a leaf of the hub node at `hub_leaf_port`,
/// routed to `seed` if any.
fn natsd_leaf(name: &str, hub_leaf_port: u16, seed: Option<u16>) -> Options {
    Options {
        server_name: Some(name.into()),
        cluster: Some(ClusterOpts {
            name: Some("LC".into()),
            host: "127.0.0.1".into(),
            port: 0,
            routes: seed_routes(seed),
            ..ClusterOpts::default()
        }),
        leafnodes: Some(LeafOpts {
            reconnect: Some(std::time::Duration::from_millis(100)),
            remotes: vec![RemoteLeafOpts {
                urls: vec![format!("nats-leaf://127.0.0.1:{hub_leaf_port}")],
                ..RemoteLeafOpts::default()
            }],
            ..LeafOpts::default()
        }),
        ..Options::local()
    }
}

/// nats-server `bin` as node `name` of cluster `cluster`, routed to `seed` if any, with
/// `leaf` (a `leafnodes` block body).
fn go_node(
    bin: &str,
    name: &str,
    cluster: &str,
    seed: Option<u16>,
    leaf: &str,
) -> (NatsServer, u16) {
    let route = free_port();
    let routes = seed.map_or(String::new(), |p| {
        format!("routes: [\"nats-route://127.0.0.1:{p}\"]")
    });
    let conf = format!(
        "listen: 127.0.0.1:-1\nserver_name: {name}\n\
         cluster {{ name: {cluster}, listen: \"127.0.0.1:{route}\", {routes} }}\n\
         leafnodes {{ {leaf} }}\n"
    );
    (go_server(bin, SUITE, name, &conf), route)
}

/// Hub node `name` of cluster `C1`: natsd, or nats-server `bin`.
async fn hub(bin: Option<&str>, name: &str, seed: Option<u16>) -> Node {
    match bin {
        None => Node::Natsd(start(hub_opts(node_opts(name, seed))).await),
        Some(bin) => {
            let leaf = free_port();
            let listen = format!("listen: \"127.0.0.1:{leaf}\"");
            let (s, route) = go_node(bin, name, "C1", seed, &listen);
            Node::Go { s, route, leaf }
        }
    }
}

/// Leaf node `name` of cluster `LC`, a leaf of `hub`: natsd, or nats-server `bin`.
async fn leaf(bin: Option<&str>, name: &str, hub: &Node, seed: Option<u16>) -> Node {
    match bin {
        None => Node::Natsd(start(natsd_leaf(name, hub.leaf(), seed)).await),
        Some(bin) => {
            let remote = format!(
                "reconnect: 1, remotes [ {{ url: \"nats-leaf://127.0.0.1:{}\" }} ]",
                hub.leaf()
            );
            let (s, route) = go_node(bin, name, "LC", seed, &remote);
            Node::Go { s, route, leaf: 0 }
        }
    }
}

/// Hubs H0, H1 (cluster C1) and leaves L0 (of H0), L1 (of H1) (cluster LC); each `None` is
/// natsd, `Some(bin)` nats-server.
async fn topology(h: [Option<&str>; 2], l: [Option<&str>; 2]) -> ([Node; 2], [Node; 2]) {
    let h0 = hub(h[0], "h0", None).await;
    let h1 = hub(h[1], "h1", Some(h0.route())).await;
    let l0 = leaf(l[0], "l0", &h0, None).await;
    let l1 = leaf(l[1], "l1", &h1, Some(l0.route())).await;
    let (hubs, leaves) = ([h0, h1], [l0, l1]);
    for n in hubs.iter().chain(leaves.iter()) {
        if let Node::Natsd(s) = n {
            let peers = usize::from(s.shared().cluster.is_some());
            wait_for("the node's route", || {
                let ok = routes(s) == peers;
                async move { ok }
            })
            .await;
            if s.shared().leafnodes.is_some() {
                wait_links(s, 1).await;
            }
        }
    }
    (hubs, leaves)
}

/// `n` messages published on `from` (a client of L1) reach `to` (a client of L0) exactly
/// once each. `fence` (a client of H0, the hub node of L0) answers a request `from` sends
/// after them: its answer reaches `to` over H0's leaf connection after any copy that went
/// round through the hub (L1 → H1 → H0 → L0).
async fn exactly_once(from: &mut Raw, to: &mut Raw, fence: &mut Raw, tag: &str, n: usize) {
    for i in 0..n {
        let body = format!("{tag}{i}");
        from.send(&format!("PUB foo {}\r\n{body}\r\n", body.len()))
            .await;
    }
    from.send("PUB fence fenced 0\r\n\r\n").await;
    from.flush().await;
    loop {
        let (s, _, r, _) = fence.msg().await;
        if s == "fence" && r.as_deref() == Some("fenced") {
            fence.send("PUB fenced 4\r\ndone\r\n").await;
            break;
        }
    }
    // Copies through the hub come before the fence's answer; the direct ones (over the
    // leaf cluster's route) may come after it: read until both are in.
    let mut got = vec![0u32; n];
    let mut fenced = false;
    while !fenced || got.contains(&0) {
        let (s, _, _, p) = to.msg().await;
        if s == "fenced" && p == b"done" {
            fenced = true;
            continue;
        }
        let i = String::from_utf8_lossy(&p)
            .strip_prefix(tag)
            .and_then(|i| i.parse::<usize>().ok());
        if let Some(i) = i.filter(|i| *i < n) {
            got[i] += 1;
        }
    }
    let wrong: Vec<(usize, u32)> = got
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != 1)
        .map(|(i, c)| (i, *c))
        .collect();
    assert!(
        wrong.is_empty(),
        "(message, copies) not exactly once: {wrong:?}"
    );
}

async fn a_leaf_cluster_gets_its_own_messages_once(h: [Option<&str>; 2], l: [Option<&str>; 2]) {
    let (hubs, leaves) = topology(h, l).await;
    let mut sub = leaves[0].raw().await;
    let mut publ = leaves[1].raw().await;
    sub.send("SUB foo 1\r\nSUB fenced 2\r\n").await;
    // L0's interest reaches L1 over their route, and H1 through H0 (a hub client of H1
    // reaches L0 through H0).
    until_delivered(&mut publ, &mut sub, "foo").await;
    let mut h1 = hubs[1].raw().await;
    until_delivered(&mut h1, &mut sub, "foo").await;
    let mut fence = hubs[0].raw().await;
    fence.send("SUB fence 1\r\n").await;
    until_delivered(&mut publ, &mut fence, "fence").await;
    until_delivered(&mut fence, &mut sub, "fenced").await;
    exactly_once(&mut publ, &mut sub, &mut fence, "a", 50).await;
    // A hub client of H1 subscribes too: H1 now tells L1 of `foo`, so L1's publishes also
    // go up its leaf (to that client), and from H1 over the route to H0 — which must not
    // hand them down to L0, of the cluster they came from.
    h1.send("SUB foo 9\r\n").await;
    until_delivered(&mut publ, &mut h1, "foo").await;
    exactly_once(&mut publ, &mut sub, &mut fence, "b", 50).await;
    let mut n = 0;
    while n < 50 {
        let (_, _, _, p) = h1.msg().await;
        n += usize::from(p.starts_with(b"b"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_cluster_of_a_natsd_hub_cluster() {
    a_leaf_cluster_gets_its_own_messages_once([None, None], [None, None]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_cluster_of_a_hub_cluster_natsd_then_nats_server_215() {
    let bin = natsserver::assert_installed_215();
    a_leaf_cluster_gets_its_own_messages_once([None, Some(&bin)], [None, None]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_cluster_of_a_hub_cluster_nats_server_215_then_natsd() {
    let bin = natsserver::assert_installed_215();
    a_leaf_cluster_gets_its_own_messages_once([Some(&bin), None], [None, None]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_215_leaf_cluster_of_a_natsd_hub_cluster() {
    let bin = natsserver::assert_installed_215();
    a_leaf_cluster_gets_its_own_messages_once([None, None], [Some(&bin), Some(&bin)]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_cluster_of_a_nats_server_215_hub_cluster() {
    let bin = natsserver::assert_installed_215();
    a_leaf_cluster_gets_its_own_messages_once([Some(&bin), Some(&bin)], [None, None]).await;
}

/// The reference: nats-server 2.15.1 everywhere passes the same checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_server_215_everywhere() {
    let bin = natsserver::assert_installed_215();
    let b = Some(bin.as_str());
    a_leaf_cluster_gets_its_own_messages_once([b, b], [b, b]).await;
}
