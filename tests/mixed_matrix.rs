//! The mixed-cluster matrix of issue 14: natsd with nats-server 2.15.1 and 2.9.10 (both
//! installed by `.ci/run`), 2 natsd + 1 nats-server and 1 natsd + 2 nats-server, each seeded
//! in a chain (node 1 dials node 0, node 2 dials node 1) so that either kind dials the other,
//! and (default pools, pinned account) in a star at a natsd node so that two nodes meet only
//! through gossip,
//! in every route mode: default pools, `pool_size: -1`, a pinned account, and each compression
//! mode on either side. In every cluster: the right connections per pair (count, pinned
//! accounts, the compression both ends report), pub/sub with headers between every pair, a
//! queue group served exactly once, request/reply, 10,000 subscriptions in a second account
//! propagated and withdrawn, traffic in that account — and no route connection replaced for
//! at least 60 s after the cluster formed, while the others run their checks.

mod common;

use common::http_json;
use common::mixed::{
    check_account_a, go_bin, natsd, pools, rids, shutdown, ten_thousand_cross, user_client,
    wait_pools_within, Node,
};
use common::natsserver::{assert_installed, assert_installed_215, NATS_SERVER};
use common::traffic::{check_requests, check_traffic};
use futures::StreamExt;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// How long every cluster must keep its route connections.
const STABLE_FOR: Duration = Duration::from_secs(60);
/// Clusters formed and checked at the same time (each is 3 nodes).
const PARALLEL: usize = 3;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Natsd,
    Go29,
    Go215,
}

/// A `compression` setting as written in the cluster block (`None`: not written, so `accept`
/// where the server knows compression).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Comp {
    Default,
    Off,
    Auto,
    Fast,
    Better,
    Best,
}

impl Comp {
    fn config(self) -> &'static str {
        match self {
            Comp::Default => "",
            Comp::Off => "compression: off",
            // Thresholds far above a loopback RTT: the uncompressed level, even on a loaded
            // machine.
            Comp::Auto => r#"compression: { mode: s2_auto, rtt_thresholds: ["1h", "2h", "3h"] }"#,
            Comp::Fast => "compression: s2_fast",
            Comp::Better => "compression: s2_better",
            Comp::Best => "compression: s2_best",
        }
    }
}

/// One node's settings.
#[derive(Clone, Copy, Debug)]
struct Cfg {
    kind: Kind,
    pool: bool,
    pin_a: bool,
    comp: Comp,
}

impl Cfg {
    fn extra(&self) -> String {
        let mut e = Vec::new();
        if self.kind == Kind::Natsd && !self.pool {
            e.push("pool_size: -1".to_string());
        }
        if self.pin_a {
            e.push("accounts: [A]".to_string());
        }
        e.push(self.comp.config().to_string());
        e.join("\n  ")
    }
    /// Speaks 2.10+'s pools (2.9.10 does not; natsd with `pool_size: -1` neither).
    fn pooled(&self) -> bool {
        self.kind != Kind::Go29 && self.pool
    }
}

/// The `/routez` `compression` a node configured `l` shows for a route to a node configured
/// `r` (nats-server 2.15.1's selection, docs/nats-server-behaviour.md §18); `None` for a
/// 2.9.10 node, whose `/routez` has no such field.
fn compression(l: &Cfg, r: &Cfg) -> Option<&'static str> {
    if l.kind == Kind::Go29 {
        return None;
    }
    if r.kind == Kind::Go29 {
        return Some("not supported");
    }
    Some(match (l.comp, r.comp) {
        (Comp::Off, _) | (_, Comp::Off) => "off",
        (Comp::Default, Comp::Default) => "off",
        (Comp::Default, Comp::Auto) => "s2_fast",
        (Comp::Default, Comp::Fast) | (Comp::Fast, _) => "s2_fast",
        (Comp::Default, Comp::Better) | (Comp::Better, _) => "s2_better",
        (Comp::Default, Comp::Best) | (Comp::Best, _) => "s2_best",
        (Comp::Auto, _) => "s2_uncompressed",
    })
}

struct Case {
    name: String,
    cfgs: [Cfg; 3],
    /// Nodes 1 and 2 both seeded at node 0 (so they meet through gossip), instead of a chain.
    star: bool,
}

/// Every case: for each reference version, each mode, both shapes.
fn cases() -> Vec<Case> {
    let node = |kind| Cfg {
        kind,
        pool: true,
        pin_a: false,
        comp: Comp::Default,
    };
    let mut out = Vec::new();
    for go in [Kind::Go215, Kind::Go29] {
        // (mode name, what natsd nodes get, what nats-server nodes get)
        let mut modes: Vec<(String, Cfg, Cfg)> = vec![
            ("default".into(), node(Kind::Natsd), node(go)),
            (
                "natsd pool_size -1".into(),
                Cfg {
                    pool: false,
                    ..node(Kind::Natsd)
                },
                node(go),
            ),
            (
                "pinned A".into(),
                Cfg {
                    pin_a: true,
                    ..node(Kind::Natsd)
                },
                Cfg {
                    // 2.9.10 has no `cluster { accounts }`.
                    pin_a: go == Kind::Go215,
                    ..node(go)
                },
            ),
        ];
        let comps: &[Comp] = if go == Kind::Go215 {
            &[Comp::Off, Comp::Auto, Comp::Fast, Comp::Better, Comp::Best]
        } else {
            // 2.9.10 knows no compression: natsd's setting must leave its routes plain.
            &[Comp::Fast]
        };
        for &c in comps {
            modes.push((
                format!("natsd {c:?}"),
                Cfg {
                    comp: c,
                    ..node(Kind::Natsd)
                },
                node(go),
            ));
            if go == Kind::Go215 {
                modes.push((
                    format!("nats-server {c:?}"),
                    node(Kind::Natsd),
                    Cfg {
                        comp: c,
                        ..node(go)
                    },
                ));
            }
        }
        for (mode, n, g) in modes {
            out.push(Case {
                name: format!("{go:?} {mode}: natsd, nats-server, natsd"),
                cfgs: [n, g, n],
                star: false,
            });
            out.push(Case {
                name: format!("{go:?} {mode}: nats-server, natsd, nats-server"),
                cfgs: [g, n, g],
                star: false,
            });
            // Seeded at one natsd node: a natsd and a nats-server node (or two nats-server
            // nodes) meet through natsd's gossip, either may dial first.
            if go == Kind::Go215 && (mode == "default" || mode == "pinned A") {
                out.push(Case {
                    name: format!("{go:?} {mode}, star: natsd, natsd, nats-server"),
                    cfgs: [n, n, g],
                    star: true,
                });
                out.push(Case {
                    name: format!("{go:?} {mode}, star: natsd, nats-server, nats-server"),
                    cfgs: [n, g, g],
                    star: true,
                });
            }
        }
    }
    out
}

/// A formed cluster, its connection ids when it formed, and when that was.
struct Formed {
    name: String,
    nodes: Vec<Node>,
    rids: Vec<BTreeSet<u64>>,
    at: Instant,
}

async fn start_node(i: usize, cfg: &Cfg, seed: Option<u16>, tag: &str) -> Node {
    let name = format!("{tag}-{i}");
    let extra = cfg.extra();
    match cfg.kind {
        Kind::Natsd => natsd(&name, seed, &extra).await,
        Kind::Go29 => go_bin(NATS_SERVER, &name, seed, &extra),
        Kind::Go215 => go_bin(&assert_installed_215(), &name, seed, &extra),
    }
}

/// Every route of node `i` shows the compression expected toward the node it goes to.
async fn check_compression(case: &Case, nodes: &[Node], ids: &HashMap<String, usize>) {
    for (i, n) in nodes.iter().enumerate() {
        let z = http_json(n.http(), "/routez").await;
        for r in z["routes"].as_array().into_iter().flatten() {
            let id = r["remote_id"].as_str().unwrap_or_default();
            let j = *ids
                .get(id)
                .unwrap_or_else(|| panic!("{}: unknown peer {r}", case.name));
            let want = compression(&case.cfgs[i], &case.cfgs[j]);
            assert_eq!(
                r.get("compression").and_then(|c| c.as_str()),
                want,
                "{}: node {i} toward node {j}: {r}",
                case.name
            );
        }
    }
}

async fn run(n: usize, case: Case) -> Formed {
    let tag = format!("mx{n}");
    let mut nodes: Vec<Node> = Vec::new();
    for (i, cfg) in case.cfgs.iter().enumerate() {
        let seed = if case.star {
            nodes.first()
        } else {
            nodes.last()
        }
        .map(Node::route_port);
        nodes.push(start_node(i, cfg, seed, &tag).await);
    }
    let cfgs = case.cfgs;
    let pair_pooled = |i: usize, j: usize| cfgs[i].pooled() && cfgs[j].pooled();
    let plain = |i: usize, j: usize| if pair_pooled(i, j) { 3 } else { 1 };
    let accounts = |i: usize, j: usize| {
        let mut a = BTreeSet::new();
        if pair_pooled(i, j) {
            a.insert("$SYS".to_string());
            if cfgs[i].pin_a && cfgs[j].pin_a {
                a.insert("A".to_string());
            }
        }
        a
    };
    // Forming competes with the other clusters' checks for 2 cores.
    wait_pools_within(&nodes, &plain, &accounts, Duration::from_secs(30)).await;
    let at = Instant::now();
    let before = rids(&nodes).await;
    let mut ids = Vec::new();
    for n in &nodes {
        ids.push(n.id().await);
    }
    let by_id: HashMap<String, usize> = ids.iter().cloned().zip(0..).collect();
    check_compression(&case, &nodes, &by_id).await;
    let addrs: Vec<SocketAddr> = nodes.iter().map(Node::client).collect();
    check_traffic(&addrs).await;
    check_requests(&addrs).await;
    check_account_a(&nodes).await;
    // 10,000 subscriptions in account A on node 1 reach nodes 0 and 2, then go.
    let mut c = user_client(nodes[1].client(), "a").await;
    let others = [nodes[0].http(), nodes[2].http()];
    ten_thousand_cross(&case.name, &mut c, &ids[1], &others).await;
    // The pools are still the same shape after all of that.
    for (i, n) in nodes.iter().enumerate() {
        assert_eq!(pools(n).await.len(), 2, "{}: node {i}", case.name);
    }
    Formed {
        name: case.name,
        nodes,
        rids: before,
        at,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_with_nats_server_215_and_29_forms_carries_traffic_and_holds() {
    assert_installed();
    assert_installed_215();
    let all = cases();
    assert!(all.len() >= 30, "{} cases", all.len());
    let formed: Vec<Formed> = futures::stream::iter(all.into_iter().enumerate())
        .map(|(n, c)| run(n, c))
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    // No connection replaced: polled until every cluster has been watched for STABLE_FOR.
    let last = formed.iter().map(|f| f.at).max().expect("clusters");
    loop {
        for f in &formed {
            assert_eq!(
                rids(&f.nodes).await,
                f.rids,
                "{}: a route connection was replaced {:?} after forming",
                f.name,
                f.at.elapsed()
            );
        }
        if last.elapsed() >= STABLE_FOR {
            break;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    for f in formed {
        shutdown(f.nodes).await;
    }
}
