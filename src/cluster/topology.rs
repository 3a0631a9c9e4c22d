//! The cluster as a graph: servers are nodes, routes (and later gateways) are edges carrying
//! did_solicit / is_configured / RTT. `ServerView::local` is what this server sees (its own
//! routes); `Topology::merge` combines several servers' views into one graph and reports what
//! a full mesh would have and this one lacks: `missing` pairs, `one_sided` edges, `partitions`.
//! Pure data in, data out: `/topz` serves it, tests feed it synthetic views.

use super::RouteEntry;
use crate::util::time::go_duration;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::unionfind::UnionFind;
use petgraph::visit::EdgeRef;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// What connects two servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeKind {
    Route,
    Gateway,
}

/// One connection as its owner (`from`) reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewEdge {
    pub from: String,
    pub to: String,
    /// The peer's server name, when known (names the node if no view of it arrives).
    pub to_name: String,
    /// The peer's cluster name, when known.
    pub to_cluster: String,
    pub kind: EdgeKind,
    pub did_solicit: bool,
    pub is_configured: bool,
    pub rtt: Option<Duration>,
    /// Route connections to that peer (pool slots and pinned accounts; 1 without pools).
    pub connections: usize,
    /// The pinned accounts among them (their own connection each).
    pub accounts: Vec<String>,
}

/// One server's own account of itself and its connections.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerView {
    pub server_id: String,
    pub server_name: String,
    pub cluster: String,
    pub edges: Vec<ViewEdge>,
}

impl ServerView {
    /// This server's view from its registered routes.
    pub fn local(
        server_id: &str,
        server_name: &str,
        cluster: &str,
        routes: &[Arc<RouteEntry>],
    ) -> ServerView {
        // One edge per peer, however many connections its pool has.
        let mut edges: Vec<ViewEdge> = Vec::new();
        for r in routes {
            if let Some(e) = edges.iter_mut().find(|e| e.to == r.remote_id) {
                e.connections += 1;
                e.accounts.extend(r.account.as_deref().map(str::to_string));
                continue;
            }
            edges.push(ViewEdge {
                from: server_id.to_string(),
                to: r.remote_id.clone(),
                to_name: r.remote_name.clone(),
                to_cluster: {
                    let c = r.info().cluster.clone();
                    if c.is_empty() {
                        cluster.to_string()
                    } else {
                        c
                    }
                },
                kind: EdgeKind::Route,
                did_solicit: r.did_solicit,
                is_configured: r.is_configured,
                rtt: r.conn.meta().rtt,
                connections: 1,
                accounts: r
                    .account
                    .as_deref()
                    .map(str::to_string)
                    .into_iter()
                    .collect(),
            });
        }
        for e in &mut edges {
            e.accounts.sort();
        }
        ServerView {
            server_id: server_id.to_string(),
            server_name: server_name.to_string(),
            cluster: cluster.to_string(),
            edges,
        }
    }
}

/// A server in the merged graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    pub server_id: String,
    pub server_name: String,
    pub cluster: String,
    /// It reported a view, or a server that did has a live connection to it.
    pub reachable: bool,
    /// It reported its own view (only then can its silence about a peer mean something).
    #[serde(skip)]
    pub reported: bool,
}

/// A connection in the merged graph, as `from` reported it.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    pub kind: EdgeKind,
    pub did_solicit: bool,
    pub is_configured: bool,
    pub rtt: Option<Duration>,
    pub connections: usize,
    pub accounts: Vec<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct EdgeJson {
    pub from: String,
    pub to: String,
    pub kind: EdgeKind,
    pub did_solicit: bool,
    pub is_configured: bool,
    pub rtt: String,
    /// Route connections in the pair as `from` reports them (a pool of 3 and the pinned
    /// `$SYS` route: 4; one without pools).
    pub connections: usize,
    /// Pinned accounts with a connection of their own in the pair.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned_accounts: Vec<String>,
}

/// The merged graph and what it lacks.
#[derive(Debug, Clone)]
pub struct Topology {
    pub graph: DiGraph<Node, Edge>,
    index: HashMap<String, NodeIndex>,
    /// Pairs of servers (sorted, `a < b`) in the same cluster with no route either way,
    /// where at least one of the two reported a view (else nobody could know).
    pub missing: Vec<[String; 2]>,
    /// `[a, b]`: a lists b, b reported a view and does not list a.
    pub one_sided: Vec<[String; 2]>,
    /// Connected components (ignoring direction), each sorted; sorted by first id.
    pub partitions: Vec<Vec<String>>,
}

impl Topology {
    /// Merge `views` (each server's own connections) with `known` servers that may not have
    /// answered (e.g. remembered from earlier rounds): such a server is a node, and every
    /// reporting server in its cluster that does not list it makes a `missing` pair.
    pub fn merge(views: &[ServerView], known: &[Node]) -> Topology {
        let mut t = Topology {
            graph: DiGraph::new(),
            index: HashMap::new(),
            missing: Vec::new(),
            one_sided: Vec::new(),
            partitions: Vec::new(),
        };
        // Nodes: reporters first (their own account of name and cluster wins), then peers
        // they name, then the known rest.
        for v in views {
            let i = t.node(&v.server_id);
            let n = &mut t.graph[i];
            n.reported = true;
            n.reachable = true;
            n.server_name.clone_from(&v.server_name);
            n.cluster.clone_from(&v.cluster);
        }
        for v in views {
            for e in &v.edges {
                if e.to == v.server_id {
                    continue;
                }
                let i = t.node(&e.to);
                let n = &mut t.graph[i];
                n.reachable = true;
                if !n.reported {
                    if n.server_name.is_empty() {
                        n.server_name.clone_from(&e.to_name);
                    }
                    if n.cluster.is_empty() {
                        n.cluster.clone_from(&e.to_cluster);
                    }
                }
            }
        }
        for k in known {
            let i = t.node(&k.server_id);
            let n = &mut t.graph[i];
            if n.server_name.is_empty() {
                n.server_name.clone_from(&k.server_name);
            }
            if n.cluster.is_empty() {
                n.cluster.clone_from(&k.cluster);
            }
        }
        // Edges, one per (from, to, kind).
        let mut seen = BTreeSet::new();
        for v in views {
            for e in &v.edges {
                if e.to == v.server_id || !seen.insert((v.server_id.clone(), e.to.clone(), e.kind))
                {
                    continue;
                }
                let (a, b) = (t.index[&v.server_id], t.index[&e.to]);
                t.graph.add_edge(
                    a,
                    b,
                    Edge {
                        kind: e.kind,
                        did_solicit: e.did_solicit,
                        is_configured: e.is_configured,
                        rtt: e.rtt,
                        connections: e.connections,
                        accounts: e.accounts.clone(),
                    },
                );
            }
        }
        t.analyse();
        t
    }

    fn node(&mut self, id: &str) -> NodeIndex {
        if let Some(i) = self.index.get(id) {
            return *i;
        }
        let i = self.graph.add_node(Node {
            server_id: id.to_string(),
            server_name: String::new(),
            cluster: String::new(),
            reachable: false,
            reported: false,
        });
        self.index.insert(id.to_string(), i);
        i
    }

    fn has_edge(&self, a: NodeIndex, b: NodeIndex, kind: EdgeKind) -> bool {
        self.graph
            .edges_connecting(a, b)
            .any(|e| e.weight().kind == kind)
    }

    fn analyse(&mut self) {
        let g = &self.graph;
        let mut ids: Vec<(&str, NodeIndex)> =
            self.index.iter().map(|(id, i)| (id.as_str(), *i)).collect();
        ids.sort();
        // Missing routes: same cluster (or unknown), no route either way, someone could tell.
        let mut missing = Vec::new();
        for (x, &(ida, a)) in ids.iter().enumerate() {
            for &(idb, b) in &ids[x + 1..] {
                let (na, nb) = (&g[a], &g[b]);
                if !(na.reported || nb.reported) {
                    continue;
                }
                if !na.cluster.is_empty() && !nb.cluster.is_empty() && na.cluster != nb.cluster {
                    continue;
                }
                if !self.has_edge(a, b, EdgeKind::Route) && !self.has_edge(b, a, EdgeKind::Route) {
                    missing.push([ida.to_string(), idb.to_string()]);
                }
            }
        }
        // One-sided: a lists b, b reported and does not list a.
        let mut one_sided: Vec<[String; 2]> = g
            .edge_references()
            .filter(|e| {
                g[e.target()].reported && !self.has_edge(e.target(), e.source(), e.weight().kind)
            })
            .map(|e| {
                [
                    g[e.source()].server_id.clone(),
                    g[e.target()].server_id.clone(),
                ]
            })
            .collect();
        one_sided.sort();
        one_sided.dedup();
        // Partitions: connected components regardless of direction.
        let mut uf = UnionFind::<usize>::new(g.node_count());
        for e in g.edge_references() {
            uf.union(e.source().index(), e.target().index());
        }
        let mut comps: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for i in g.node_indices() {
            comps
                .entry(uf.find(i.index()))
                .or_default()
                .push(g[i].server_id.clone());
        }
        let mut partitions: Vec<Vec<String>> = comps
            .into_values()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        partitions.sort();
        self.missing = missing;
        self.one_sided = one_sided;
        self.partitions = partitions;
    }

    /// No missing route and a single partition.
    pub fn complete(&self) -> bool {
        self.missing.is_empty() && self.partitions.len() <= 1
    }

    /// Nodes sorted by server id.
    pub fn nodes(&self) -> Vec<Node> {
        let mut v: Vec<Node> = self.graph.node_weights().cloned().collect();
        v.sort_by(|a, b| a.server_id.cmp(&b.server_id));
        v
    }

    /// Edges sorted by (from, to, kind), with RTTs as Go durations.
    pub fn edges(&self) -> Vec<EdgeJson> {
        let g = &self.graph;
        let mut v: Vec<EdgeJson> = g
            .edge_references()
            .map(|e| {
                let w = e.weight();
                EdgeJson {
                    from: g[e.source()].server_id.clone(),
                    to: g[e.target()].server_id.clone(),
                    kind: w.kind,
                    did_solicit: w.did_solicit,
                    is_configured: w.is_configured,
                    rtt: go_duration(w.rtt.unwrap_or_default()),
                    connections: w.connections,
                    pinned_accounts: w.accounts.clone(),
                }
            })
            .collect();
        v.sort_by(|a, b| (&a.from, &a.to, a.kind).cmp(&(&b.from, &b.to, b.kind)));
        v
    }

    fn label(n: &Node) -> String {
        if n.server_name.is_empty() || n.server_name == n.server_id {
            n.server_id.clone()
        } else {
            format!("{} ({})", n.server_name, n.server_id)
        }
    }

    /// Graphviz: solid edges were dialled by their source, bold ones configured.
    pub fn to_dot(&self) -> String {
        let mut s = String::from("digraph cluster {\n");
        for n in self.nodes() {
            let style = if n.reachable { "" } else { ", style=dashed" };
            s.push_str(&format!(
                "  {:?} [label={:?}{style}];\n",
                n.server_id,
                Self::label(&n)
            ));
        }
        for e in self.edges() {
            let mut attrs = vec![format!("label={:?}", e.rtt)];
            if !e.did_solicit {
                attrs.push("style=dotted".into());
            } else if e.is_configured {
                attrs.push("style=bold".into());
            }
            if e.kind == EdgeKind::Gateway {
                attrs.push("color=blue".into());
            }
            s.push_str(&format!(
                "  {:?} -> {:?} [{}];\n",
                e.from,
                e.to,
                attrs.join(", ")
            ));
        }
        for [a, b] in &self.missing {
            s.push_str(&format!(
                "  {a:?} -> {b:?} [dir=none, color=red, style=dashed, label=\"missing\"];\n"
            ));
        }
        s.push_str("}\n");
        s
    }

    /// Mermaid flowchart: `-->` dialled by the source, `-.->` accepted; missing pairs in red.
    pub fn to_mermaid(&self) -> String {
        let nodes = self.nodes();
        let short: HashMap<&str, String> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.server_id.as_str(), format!("n{i}")))
            .collect();
        let mut s = String::from("graph LR\n");
        for n in &nodes {
            s.push_str(&format!(
                "  {}[\"{}\"]\n",
                short[n.server_id.as_str()],
                Self::label(n).replace('"', "'")
            ));
        }
        for e in self.edges() {
            let arrow = if e.did_solicit { "-->" } else { "-.->" };
            s.push_str(&format!(
                "  {} {arrow}|{}| {}\n",
                short[e.from.as_str()],
                e.rtt,
                short[e.to.as_str()]
            ));
        }
        for [a, b] in &self.missing {
            s.push_str(&format!(
                "  {} x--x|missing| {}\n",
                short[a.as_str()],
                short[b.as_str()]
            ));
        }
        s
    }
}

/// `/topz`'s body (issue 5): the graph, its gaps and whether the mesh is complete.
#[derive(Serialize, Debug)]
pub struct Topz {
    pub server_id: String,
    pub now: String,
    /// `local`: only this server's own routes; `cluster`: every server's view, gathered.
    pub scope: &'static str,
    pub nodes: Vec<Node>,
    pub edges: Vec<EdgeJson>,
    pub missing: Vec<[String; 2]>,
    pub one_sided: Vec<[String; 2]>,
    pub partitions: Vec<Vec<String>>,
    pub complete: bool,
}

impl Topz {
    pub fn of(server_id: &str, now: String, scope: &'static str, t: &Topology) -> Topz {
        Topz {
            server_id: server_id.to_string(),
            now,
            scope,
            nodes: t.nodes(),
            edges: t.edges(),
            missing: t.missing.clone(),
            one_sided: t.one_sided.clone(),
            partitions: t.partitions.clone(),
            complete: t.complete(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(from: &str, to: &str, solicit: bool) -> ViewEdge {
        ViewEdge {
            from: from.into(),
            to: to.into(),
            to_name: String::new(),
            to_cluster: String::new(),
            kind: EdgeKind::Route,
            did_solicit: solicit,
            is_configured: false,
            rtt: Some(Duration::from_micros(500)),
            connections: 1,
            accounts: Vec::new(),
        }
    }

    fn view(id: &str, peers: &[&str]) -> ServerView {
        ServerView {
            server_id: id.into(),
            server_name: id.to_lowercase(),
            cluster: "C1".into(),
            // The smaller id dials, as duplicate resolution leaves it.
            edges: peers.iter().map(|p| edge(id, p, id < *p)).collect(),
        }
    }

    fn pair(a: &str, b: &str) -> [String; 2] {
        [a.into(), b.into()]
    }

    fn full_mesh(ids: &[&str]) -> Vec<ServerView> {
        ids.iter()
            .map(|id| {
                let peers: Vec<&str> = ids.iter().copied().filter(|p| p != id).collect();
                view(id, &peers)
            })
            .collect()
    }

    #[test]
    fn full_mesh_is_complete() {
        let t = Topology::merge(&full_mesh(&["A", "B", "C", "D"]), &[]);
        assert_eq!(t.graph.node_count(), 4);
        assert_eq!(t.graph.edge_count(), 12);
        assert!(t.missing.is_empty());
        assert!(t.one_sided.is_empty());
        assert_eq!(t.partitions, vec![vec!["A", "B", "C", "D"]]);
        assert!(t.complete());
        let nodes = t.nodes();
        assert!(nodes.iter().all(|n| n.reachable && n.reported));
        assert_eq!(nodes[1].server_name, "b");
        let e = &t.edges()[0];
        assert_eq!((e.from.as_str(), e.to.as_str()), ("A", "B"));
        assert!(e.did_solicit);
        assert_eq!(e.rtt, "500µs");
    }

    #[test]
    fn single_server_is_complete() {
        let t = Topology::merge(&[view("A", &[])], &[]);
        assert_eq!(t.partitions, vec![vec!["A"]]);
        assert!(t.complete());
        assert!(Topology::merge(&[], &[]).complete());
    }

    #[test]
    fn a_missing_link_is_reported() {
        // A-B, A-C, but no B-C: one partition through A, yet not a full mesh.
        let views = vec![view("A", &["B", "C"]), view("B", &["A"]), view("C", &["A"])];
        let t = Topology::merge(&views, &[]);
        assert_eq!(t.missing, vec![pair("B", "C")]);
        assert!(t.one_sided.is_empty());
        assert_eq!(t.partitions.len(), 1);
        assert!(!t.complete());
    }

    #[test]
    fn a_one_sided_link_is_reported_but_not_missing() {
        // A lists B; B (reporting) does not list A (e.g. it has not registered it yet).
        let views = vec![
            view("A", &["B", "C"]),
            view("B", &["C"]),
            view("C", &["A", "B"]),
        ];
        let t = Topology::merge(&views, &[]);
        assert_eq!(t.one_sided, vec![pair("A", "B")]);
        assert!(t.missing.is_empty());
        assert_eq!(t.partitions.len(), 1);
        assert!(
            t.complete(),
            "a route known to one side still connects the pair"
        );
    }

    #[test]
    fn two_partitions() {
        let views = vec![
            view("A", &["B"]),
            view("B", &["A"]),
            view("C", &["D"]),
            view("D", &["C"]),
        ];
        let t = Topology::merge(&views, &[]);
        assert_eq!(t.partitions, vec![vec!["A", "B"], vec!["C", "D"]]);
        assert_eq!(
            t.missing,
            vec![
                pair("A", "C"),
                pair("A", "D"),
                pair("B", "C"),
                pair("B", "D")
            ]
        );
        assert!(t.one_sided.is_empty());
        assert!(!t.complete());
    }

    #[test]
    fn a_silent_known_server_is_missing_and_unreachable() {
        // C stopped: nobody lists it, it does not answer, but it was known.
        let views = full_mesh(&["A", "B"]);
        let known = Node {
            server_id: "C".into(),
            server_name: "c".into(),
            cluster: "C1".into(),
            reachable: false,
            reported: false,
        };
        let t = Topology::merge(&views, &[known]);
        let c = t.nodes().into_iter().find(|n| n.server_id == "C").unwrap();
        assert!(!c.reachable);
        assert_eq!(c.server_name, "c");
        assert_eq!(t.missing, vec![pair("A", "C"), pair("B", "C")]);
        assert_eq!(t.partitions, vec![vec!["A", "B"], vec!["C"]]);
        assert!(!t.complete());
    }

    #[test]
    fn peers_that_did_not_report_are_not_judged() {
        // The local view: only A reports. B-C unknown, not missing; A-B not one-sided.
        let mut a = view("A", &["B", "C"]);
        a.edges[0].to_name = "bee".into();
        a.edges[0].to_cluster = "C1".into();
        let t = Topology::merge(&[a], &[]);
        assert!(t.missing.is_empty());
        assert!(t.one_sided.is_empty());
        assert!(t.complete());
        let nodes = t.nodes();
        assert_eq!(nodes.len(), 3);
        assert!(nodes.iter().all(|n| n.reachable));
        assert_eq!(nodes[1].server_name, "bee");
        assert_eq!(nodes[1].cluster, "C1");
        assert!(!nodes[1].reported);
    }

    #[test]
    fn other_clusters_need_no_routes_and_duplicates_collapse() {
        let mut a = view("A", &["B", "B"]);
        a.edges.push(ViewEdge {
            kind: EdgeKind::Gateway,
            ..edge("A", "G", true)
        });
        let b = view("B", &["A"]);
        let g = ServerView {
            server_id: "G".into(),
            server_name: "g".into(),
            cluster: "C2".into(),
            edges: vec![ViewEdge {
                kind: EdgeKind::Gateway,
                ..edge("G", "A", false)
            }],
        };
        let t = Topology::merge(&[a, b, g], &[]);
        assert_eq!(t.graph.edge_count(), 4);
        assert!(t.missing.is_empty(), "{:?}", t.missing);
        assert!(t.one_sided.is_empty());
        assert_eq!(t.partitions.len(), 1);
        assert!(t.complete());
        // A self-edge is ignored.
        let t = Topology::merge(&[view("A", &["A"])], &[]);
        assert_eq!(t.graph.edge_count(), 0);
    }

    #[test]
    fn drawings_name_every_node_and_gap() {
        let views = vec![view("A", &["B", "C"]), view("B", &["A"]), view("C", &["A"])];
        let t = Topology::merge(&views, &[]);
        let dot = t.to_dot();
        assert!(dot.starts_with("digraph"));
        assert!(dot.contains("\"A\" -> \"B\""));
        assert!(dot.contains("\"B\" -> \"C\" [dir=none, color=red"));
        let m = t.to_mermaid();
        assert!(m.starts_with("graph LR"));
        assert!(m.contains("n0 -->|500µs| n1"));
        assert!(m.contains("n1 x--x|missing| n2"));
    }

    #[test]
    fn topz_json_shape() {
        let t = Topology::merge(&full_mesh(&["A", "B"]), &[]);
        let v = serde_json::to_value(Topz::of("A", "now".into(), "local", &t)).unwrap();
        assert_eq!(v["scope"], "local");
        assert_eq!(v["complete"], true);
        assert_eq!(v["nodes"][0]["server_id"], "A");
        assert_eq!(v["nodes"][0]["reachable"], true);
        assert!(v["nodes"][0].get("reported").is_none());
        assert_eq!(v["edges"][0]["kind"], "route");
        assert_eq!(v["missing"], serde_json::json!([]));
        assert_eq!(v["partitions"], serde_json::json!([["A", "B"]]));
    }
}
