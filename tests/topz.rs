//! The cluster-wide `/topz`: every node gathers every reachable node's routes over `$SYS`, so
//! any node reports the whole mesh; a stopped node shows as unreachable with missing routes
//! until it comes back (under a new id, same name). `/metrics` follows the gathered view.

mod common;

use common::cluster::{mesh_with, node_opts, route_port, routes};
use common::{http_get, http_json, start, wait_for};
use natsd::{Options, Server};
use serde_json::Value;
use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

fn monitored(name: &str, seed: Option<u16>) -> Options {
    Options {
        http_port: Some(0),
        ..node_opts(name, seed)
    }
}

async fn topz(s: &Server) -> Value {
    http_json(s.http_addr().expect("http"), "/topz").await
}

/// Poll `f` until true, failing after `within` (the bound for noticing a change).
async fn within<F, Fut>(what: &str, within: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let end = Instant::now() + within;
    while !f().await {
        assert!(Instant::now() < end, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Route pairs (unordered) among the edges.
fn pairs(t: &Value) -> BTreeSet<(String, String)> {
    t["edges"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["kind"] == "route")
        .map(|e| {
            let (a, b) = (
                e["from"].as_str().unwrap_or("").to_string(),
                e["to"].as_str().unwrap_or("").to_string(),
            );
            if a < b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect()
}

fn complete_with(t: &Value, n: usize) -> bool {
    t["complete"] == true
        && t["nodes"].as_array().map(Vec::len) == Some(n)
        && t["nodes"]
            .as_array()
            .is_some_and(|ns| ns.iter().all(|x| x["reachable"] == true))
        && pairs(t).len() == n * (n - 1) / 2
        && t["missing"] == serde_json::json!([])
        && t["partitions"].as_array().map(Vec::len) == Some(1)
}

async fn mesh_gauge(s: &Server) -> Option<f64> {
    let (_, body) = http_get(s.http_addr().expect("http"), "/metrics").await;
    body.lines()
        .find_map(|l| l.strip_prefix("natsd_cluster_mesh_complete "))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn topz_sees_the_whole_mesh_a_stopped_node_and_its_return() {
    let mut nodes = mesh_with(5, monitored).await;
    let seed = route_port(&nodes[0]);

    // Any node: 5 nodes, 10 route pairs (20 edges, each reported by both ends), complete.
    for s in &nodes {
        within(
            "a complete 5-node /topz",
            Duration::from_secs(5),
            || async { complete_with(&topz(s).await, 5) },
        )
        .await;
        let t = topz(s).await;
        assert_eq!(t["scope"], "cluster");
        assert_eq!(t["server_id"], s.id());
        assert_eq!(t["edges"].as_array().map(Vec::len), Some(20), "{t:#}");
        assert_eq!(t["one_sided"], serde_json::json!([]));
        for e in t["edges"].as_array().into_iter().flatten() {
            for k in ["from", "to", "kind", "did_solicit", "is_configured", "rtt"] {
                assert!(e.get(k).is_some(), "{k}: {e}");
            }
            // One edge per pair, with its pool: 3 connections and the pinned $SYS one.
            assert_eq!(e["connections"], 4, "{e}");
            assert_eq!(e["pinned_accounts"], serde_json::json!(["$SYS"]), "{e}");
        }
        for n in t["nodes"].as_array().into_iter().flatten() {
            for k in ["server_id", "server_name", "cluster", "reachable"] {
                assert!(n.get(k).is_some(), "{k}: {n}");
            }
            assert_eq!(n["cluster"], "C1");
        }
    }
    // The drawings show the same graph.
    let http = nodes[1].http_addr().expect("http");
    let (status, dot) = http_get(http, "/topz?format=dot").await;
    assert_eq!(status, 200);
    assert_eq!(dot.matches(" -> ").count(), 20, "{dot}");
    let (status, mermaid) = http_get(http, "/topz?format=mermaid").await;
    assert_eq!(status, 200);
    assert_eq!(
        mermaid.matches("-->").count() + mermaid.matches("-.->").count(),
        20
    );
    wait_for("the mesh gauge at 1", || async {
        mesh_gauge(&nodes[1]).await == Some(1.0)
    })
    .await;

    // Stop n3: within 5 s another node reports it unreachable, its routes missing.
    let gone = nodes.remove(3);
    let gone_id = gone.id().to_string();
    gone.shutdown().await;
    let watcher = &nodes[1];
    within("n3 seen as gone", Duration::from_secs(5), || async {
        let t = topz(watcher).await;
        let n3 = t["nodes"].as_array().and_then(|ns| {
            ns.iter()
                .find(|n| n["server_id"] == gone_id.as_str())
                .cloned()
        });
        t["complete"] == false
            && n3.is_some_and(|n| n["reachable"] == false && n["server_name"] == "n3")
            && t["missing"].as_array().map(Vec::len) == Some(4)
    })
    .await;
    let t = topz(watcher).await;
    assert!(t["missing"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|p| p[0] == gone_id.as_str() || p[1] == gone_id.as_str()));
    assert_eq!(
        pairs(&t).len(),
        6,
        "the 4 others still form a full mesh: {t:#}"
    );
    let (_, dot) = http_get(watcher.http_addr().expect("http"), "/topz?format=dot").await;
    assert_eq!(dot.matches("label=\"missing\"").count(), 4, "{dot}");
    wait_for("the mesh gauge at 0", || async {
        mesh_gauge(watcher).await == Some(0.0)
    })
    .await;

    // n3 comes back (a new server id, the same name): complete again, 5 nodes.
    let back = start(monitored("n3", Some(seed))).await;
    wait_for("routes back", || async {
        routes(&back) == 4 && nodes.iter().all(|s| routes(s) == 4)
    })
    .await;
    within("complete again", Duration::from_secs(5), || async {
        complete_with(&topz(watcher).await, 5)
    })
    .await;
    let t = topz(watcher).await;
    assert!(
        t["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|n| n["server_id"] != gone_id.as_str()),
        "the old id is forgotten: {t:#}"
    );
    wait_for("the mesh gauge back at 1", || async {
        mesh_gauge(watcher).await == Some(1.0)
    })
    .await;
    back.shutdown().await;
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn a_peer_without_system_services_is_seen_but_not_judged() {
    let a = start(monitored("a", None)).await;
    let b = start(Options {
        no_system_account: true,
        ..monitored("b", Some(route_port(&a)))
    })
    .await;
    wait_for("route a-b", || async { routes(&a) == 1 && routes(&b) == 1 }).await;
    // b never answers: the gather ends at its time bound with a's view only.
    let t = topz(&a).await;
    assert_eq!(t["scope"], "cluster");
    let nodes = t["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 2, "{t:#}");
    assert!(nodes.iter().all(|n| n["reachable"] == true), "{t:#}");
    assert_eq!(t["edges"].as_array().map(Vec::len), Some(1), "{t:#}");
    assert_eq!(t["edges"][0]["from"], a.id());
    assert_eq!(t["one_sided"], serde_json::json!([]));
    assert_eq!(t["complete"], true);
    // b, without the services, shows its own view.
    let t = topz(&b).await;
    assert_eq!(t["scope"], "local");
    assert_eq!(t["complete"], true);
    wait_for("a's gauge", || async { mesh_gauge(&a).await == Some(1.0) }).await;
    a.shutdown().await;
    b.shutdown().await;
}
