//! Embedded cluster nodes: `Options` for a node of cluster `C1` on 127.0.0.1 (route port 0),
//! and what a running node's cluster looks like (its route port, its route count).

use natsd::config::ClusterOpts;
use natsd::{Options, Server};

/// `nats-route://127.0.0.1:<seed>`, or no routes at all.
pub fn seed_routes(seed: Option<u16>) -> Vec<String> {
    seed.map(|p| vec![format!("nats-route://127.0.0.1:{p}")])
        .unwrap_or_default()
}

/// Cluster `C1` listening on 127.0.0.1, port 0, with `routes`.
pub fn cluster_with_routes(routes: Vec<String>) -> ClusterOpts {
    ClusterOpts {
        name: Some("C1".into()),
        host: "127.0.0.1".into(),
        port: 0,
        routes,
        ..ClusterOpts::default()
    }
}

/// Cluster `C1` on 127.0.0.1, port 0, seeded to `seed` if any.
pub fn cluster_opts(seed: Option<u16>) -> ClusterOpts {
    cluster_with_routes(seed_routes(seed))
}

/// A local node named `name` in cluster `C1` with `routes`.
pub fn node_with_routes(name: &str, routes: Vec<String>) -> Options {
    Options {
        server_name: Some(name.into()),
        cluster: Some(cluster_with_routes(routes)),
        ..Options::local()
    }
}

/// A local node named `name` in cluster `C1`, seeded to `seed` if any.
pub fn node_opts(name: &str, seed: Option<u16>) -> Options {
    node_with_routes(name, seed_routes(seed))
}

/// The port a node's route listener is bound to.
pub fn route_port(s: &Server) -> u16 {
    s.shared()
        .cluster
        .as_ref()
        .and_then(|c| c.listen_addr.get())
        .map(|a| a.port())
        .expect("route listener")
}

/// How many servers a node has routes to (0 without a cluster): with pools (the default)
/// each has several route connections.
pub fn routes(s: &Server) -> usize {
    s.shared().cluster.as_ref().map_or(0, |c| c.num_peers())
}

/// Start `n` nodes with `opts(name, seed)`, all seeded to the first (`n0`), and wait for a
/// full mesh.
pub async fn mesh_with(n: usize, opts: impl Fn(&str, Option<u16>) -> Options) -> Vec<Server> {
    let first = super::start(opts("n0", None)).await;
    let seed = route_port(&first);
    let mut nodes = vec![first];
    for i in 1..n {
        nodes.push(super::start(opts(&format!("n{i}"), Some(seed))).await);
    }
    super::wait_for("full mesh", || {
        let ok = nodes.iter().all(|s| routes(s) == n - 1);
        async move { ok }
    })
    .await;
    nodes
}
