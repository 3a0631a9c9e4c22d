//! The topology file: natsd's own config language (`config::conf`), read into a `Topology`.
//!
//! ```text
//! cluster: C1                 # the cluster name (--cluster_name)
//! nodes {                     # in order; every node is seeded to the first one
//!   n1 { port: 4222, http: 8222, route: 6222 }
//!   n2 { port: 4223 }         # a port left out (or 0) is a free port picked by `up`
//!   n3 {}
//! }
//! ```
//!
//! `port` is the client port (`-p`), `http` the monitoring port (`-m`), `route` the cluster
//! port (`--cluster`). A super-cluster is several such clusters, each node with a `gateway`
//! port too; every node gets a gateway to every other cluster:
//!
//! ```text
//! clusters {
//!   A { nodes { a1 { port: 4222, http: 8222, route: 6222, gateway: 7222 }, a2 {} } }
//!   B { nodes { b1 {}, b2 {} } }
//! }
//! ```

use crate::config::conf::{self, ConfigError, Entry, Kind, Map};
use std::collections::HashMap;
use std::path::Path;

/// The host every node listens on.
pub const HOST: &str = "127.0.0.1";

/// What a topology file describes: one cluster, or several joined by gateways.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// The clusters in file order (one for the `cluster` + `nodes` form).
    pub clusters: Vec<Cluster>,
    /// Written with `clusters { … }`: every node also gets a gateway to every other cluster.
    pub super_cluster: bool,
    /// Servers attached to a cluster of the file over leafnode connections (`leaves.rs`).
    pub leaves: Vec<super::leaves::Leaf>,
}

/// One cluster: its name and nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster name (`--cluster_name`, and the gateway name in a super-cluster).
    pub name: String,
    /// The nodes in file order; the first is the seed of the others.
    pub nodes: Vec<Node>,
}

/// One node: its server name and its ports (`None`: any free port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub port: Option<u16>,
    pub http: Option<u16>,
    pub route: Option<u16>,
    /// The gateway port (super-clusters only).
    pub gateway: Option<u16>,
    /// The leafnode port (files with leaves only).
    pub leafnode: Option<u16>,
}

/// A node's ports once every one is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub client: u16,
    pub http: u16,
    pub route: u16,
    /// The gateway port (super-clusters only).
    pub gateway: Option<u16>,
    /// The leafnode port (files with leaves only).
    pub leafnode: Option<u16>,
}

impl Ports {
    pub fn client_url(&self) -> String {
        format!("nats://{HOST}:{}", self.client)
    }

    pub fn monitor_url(&self) -> String {
        format!("http://{HOST}:{}", self.http)
    }

    pub fn route_url(&self) -> String {
        format!("nats://{HOST}:{}", self.route)
    }

    pub fn gateway_url(&self) -> Option<String> {
        self.gateway.map(|g| format!("nats://{HOST}:{g}"))
    }
}

impl Node {
    /// The ports when all of them are fixed in the file (the gateway port only counts in a
    /// super-cluster, `gateway`).
    pub fn fixed_ports(&self, gateway: bool) -> Option<Ports> {
        Some(Ports {
            client: self.port?,
            http: self.http?,
            route: self.route?,
            gateway: if gateway { Some(self.gateway?) } else { None },
            leafnode: self.leafnode,
        })
    }

    /// The fixed ports that are set: (what, port).
    pub fn fixed(&self) -> Vec<(&'static str, u16)> {
        [
            ("client port", self.port),
            ("monitoring port", self.http),
            ("route port", self.route),
            ("gateway port", self.gateway),
            ("leafnode port", self.leafnode),
        ]
        .into_iter()
        .filter_map(|(what, p)| p.map(|p| (what, p)))
        .collect()
    }
}

impl Topology {
    /// Read and check a topology file.
    pub fn load(path: &Path) -> Result<Topology, ConfigError> {
        let map = conf::parse_file(path)?;
        Topology::from_map(&map, Some(path))
    }

    /// Read and check topology text (tests, embedded use).
    pub fn parse(text: &str) -> Result<Topology, ConfigError> {
        let map = conf::parse_str(text)?;
        Topology::from_map(&map, None)
    }

    /// Every node in file order with the index of its cluster.
    pub fn nodes(&self) -> impl Iterator<Item = (usize, &Node)> {
        self.clusters
            .iter()
            .enumerate()
            .flat_map(|(ci, c)| c.nodes.iter().map(move |n| (ci, n)))
    }

    /// How many nodes in all.
    pub fn node_count(&self) -> usize {
        self.clusters.iter().map(|c| c.nodes.len()).sum()
    }

    /// "cluster C1" or "super-cluster A, B, C".
    pub fn describe(&self) -> String {
        if self.super_cluster {
            let names: Vec<&str> = self.clusters.iter().map(|c| c.name.as_str()).collect();
            format!("super-cluster {}", names.join(", "))
        } else {
            let names: Vec<&str> = self.clusters.iter().map(|c| c.name.as_str()).collect();
            format!("cluster {}", names.join(", "))
        }
    }

    fn from_map(map: &Map, file: Option<&Path>) -> Result<Topology, ConfigError> {
        let mut cluster = None;
        let mut nodes_entry = None;
        let mut clusters_entry = None;
        let mut leaves_entry = None;
        for e in &map.entries {
            if e.used_as_variable {
                continue;
            }
            match e.key.to_ascii_lowercase().as_str() {
                "cluster" | "cluster_name" => cluster = Some((string(e)?, e)),
                "nodes" => nodes_entry = Some(e),
                "clusters" => clusters_entry = Some(e),
                "leaves" | "leafs" => leaves_entry = Some(e),
                "gateways" | "gateway" => {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!(
                        "{:?}: a super-cluster is written as `clusters {{ A {{ nodes {{ … }} }} \
                             B {{ … }} }}`; every node gets a gateway to every other cluster",
                        e.key
                    ),
                    ))
                }
                _ => {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!(
                            "unknown field {:?} (a topology file has `cluster` and `nodes`, or \
                             `clusters`; and `leaves`)",
                            e.key
                        ),
                    ))
                }
            }
        }
        let mut ports_seen: HashMap<u16, String> = HashMap::new();
        let mut names_seen: Vec<String> = Vec::new();
        if let Some(ce) = clusters_entry {
            if let Some((_, e)) = cluster {
                return Err(ConfigError::at(
                    &e.key_pos,
                    "`cluster` and `clusters` together: a super-cluster names its clusters \
                     inside `clusters { NAME { nodes { … } } }`",
                ));
            }
            if let Some(e) = nodes_entry {
                return Err(ConfigError::at(
                    &e.key_pos,
                    "`nodes` beside `clusters`: in a super-cluster the nodes go inside each \
                     cluster, `clusters { NAME { nodes { … } } }`",
                ));
            }
            let Kind::Map(cm) = &ce.value.kind else {
                return Err(ConfigError::at(
                    &ce.value.pos,
                    format!(
                        "`clusters` must be a map of cluster name to {{ nodes {{ … }} }}, not {}",
                        ce.value.kind.type_name()
                    ),
                ));
            };
            let mut clusters: Vec<Cluster> = Vec::new();
            for e in &cm.entries {
                if e.used_as_variable {
                    continue;
                }
                check_cluster_name(&e.key, &e.key_pos)?;
                if clusters.iter().any(|c| c.name == e.key) {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!("cluster {:?} is named twice", e.key),
                    ));
                }
                let Kind::Map(body) = &e.value.kind else {
                    return Err(ConfigError::at(
                        &e.value.pos,
                        format!(
                            "cluster {:?} must be a map {{ nodes {{ … }} }}, not {}",
                            e.key,
                            e.value.kind.type_name()
                        ),
                    ));
                };
                let mut nodes = None;
                for f in &body.entries {
                    if f.used_as_variable {
                        continue;
                    }
                    if f.key.eq_ignore_ascii_case("nodes") {
                        nodes = Some(nodes_of(f, true, &mut ports_seen, &mut names_seen)?);
                    } else {
                        return Err(ConfigError::at(
                            &f.key_pos,
                            format!(
                                "cluster {:?}: unknown field {:?} (a cluster has `nodes`)",
                                e.key, f.key
                            ),
                        ));
                    }
                }
                let Some(nodes) = nodes else {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!("cluster {:?} has no nodes: add `nodes {{ … }}`", e.key),
                    ));
                };
                clusters.push(Cluster {
                    name: e.key.clone(),
                    nodes,
                });
            }
            if clusters.len() < 2 {
                return Err(ConfigError::at(
                    &ce.key_pos,
                    "`clusters` needs at least two clusters (one cluster is written \
                     `cluster: NAME` and `nodes { … }`)",
                ));
            }
            return with_leaves(clusters, true, leaves_entry, ports_seen, names_seen, file);
        }
        let Some((cluster, ce)) = cluster else {
            return Err(ConfigError::whole(
                file,
                "no cluster name: add `cluster: NAME`",
            ));
        };
        check_cluster_name(&cluster, &ce.value.pos)?;
        let Some(nodes_entry) = nodes_entry else {
            return Err(ConfigError::whole(
                file,
                "no nodes: add `nodes { n1 {} n2 {} … }`",
            ));
        };
        let nodes = nodes_of(nodes_entry, false, &mut ports_seen, &mut names_seen)?;
        let clusters = vec![Cluster {
            name: cluster,
            nodes,
        }];
        with_leaves(clusters, false, leaves_entry, ports_seen, names_seen, file)
    }
}

/// The topology with its `leaves` (if any); a `leafnode` port without leaves is refused.
fn with_leaves(
    clusters: Vec<Cluster>,
    super_cluster: bool,
    leaves_entry: Option<&Entry>,
    mut ports_seen: HashMap<u16, String>,
    mut names_seen: Vec<String>,
    file: Option<&Path>,
) -> Result<Topology, ConfigError> {
    let leaves = match leaves_entry {
        Some(e) => super::leaves::parse(e, &clusters, &mut ports_seen, &mut names_seen)?,
        None => Vec::new(),
    };
    let stray = clusters
        .iter()
        .flat_map(|c| &c.nodes)
        .find(|n| n.leafnode.is_some());
    if let (Some(n), true) = (stray, leaves.is_empty()) {
        return Err(ConfigError::whole(
            file,
            format!(
                "node {:?} has a leafnode port: it needs `leaves {{ … }}` to attach",
                n.name
            ),
        ));
    }
    Ok(Topology {
        clusters,
        super_cluster,
        leaves,
    })
}

fn check_cluster_name(name: &str, pos: &conf::Pos) -> Result<(), ConfigError> {
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(ConfigError::at(
            pos,
            format!("bad cluster name {name:?} (no spaces, not empty)"),
        ));
    }
    Ok(())
}

/// A `nodes { … }` map: node names unique across the file, fixed ports distinct across it.
fn nodes_of(
    nodes_entry: &Entry,
    gateway: bool,
    ports_seen: &mut HashMap<u16, String>,
    names_seen: &mut Vec<String>,
) -> Result<Vec<Node>, ConfigError> {
    let Kind::Map(nodes_map) = &nodes_entry.value.kind else {
        return Err(ConfigError::at(
            &nodes_entry.value.pos,
            format!(
                "`nodes` must be a map of node name to ports, not {}",
                nodes_entry.value.kind.type_name()
            ),
        ));
    };
    let mut nodes = Vec::new();
    for e in &nodes_map.entries {
        if e.used_as_variable {
            continue;
        }
        let node = node(e, gateway)?;
        if names_seen.contains(&node.name) {
            return Err(ConfigError::at(
                &e.key_pos,
                format!("node {:?} is named twice", node.name),
            ));
        }
        names_seen.push(node.name.clone());
        for (what, p) in node.fixed() {
            let me = format!("the {what} of {}", node.name);
            if let Some(other) = ports_seen.insert(p, me.clone()) {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("port {p} is both {other} and {me}"),
                ));
            }
        }
        nodes.push(node);
    }
    if nodes.is_empty() {
        return Err(ConfigError::at(&nodes_entry.key_pos, "`nodes` is empty"));
    }
    Ok(nodes)
}

fn string(e: &Entry) -> Result<String, ConfigError> {
    match &e.value.kind {
        Kind::String(s) => Ok(s.clone()),
        other => Err(ConfigError::at(
            &e.value.pos,
            format!("{:?} must be a string, not {}", e.key, other.type_name()),
        )),
    }
}

pub(super) fn port(e: &Entry) -> Result<Option<u16>, ConfigError> {
    match &e.value.kind {
        Kind::Integer { value: 0, .. } => Ok(None),
        Kind::Integer { value, .. } if (1..=65535).contains(value) => Ok(Some(*value as u16)),
        Kind::Integer { value, .. } => Err(ConfigError::at(
            &e.value.pos,
            format!(
                "{:?}: port {value} is out of range (1-65535, or 0 for any)",
                e.key
            ),
        )),
        other => Err(ConfigError::at(
            &e.value.pos,
            format!(
                "{:?} must be a port number, not {}",
                e.key,
                other.type_name()
            ),
        )),
    }
}

/// A node's (or leaf's) name: letters, digits, `-`, `_`, `.` (it is the server name).
pub(super) fn node_name(e: &Entry) -> Result<String, ConfigError> {
    let name = e.key.clone();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(ConfigError::at(
            &e.key_pos,
            format!("bad node name {name:?} (letters, digits, '-', '_', '.')"),
        ));
    }
    Ok(name)
}

fn node(e: &Entry, gateway: bool) -> Result<Node, ConfigError> {
    let mut n = Node {
        name: node_name(e)?,
        port: None,
        http: None,
        route: None,
        gateway: None,
        leafnode: None,
    };
    let fields: &Map = match &e.value.kind {
        Kind::Map(m) => m,
        other => {
            return Err(ConfigError::at(
                &e.value.pos,
                format!(
                    "node {:?} must be a map of ports ({{ port: …, http: …, route: … }}), not {}",
                    e.key,
                    other.type_name()
                ),
            ))
        }
    };
    for f in &fields.entries {
        if f.used_as_variable {
            continue;
        }
        match f.key.to_ascii_lowercase().as_str() {
            "port" | "client" => n.port = port(f)?,
            "http" | "monitor" => n.http = port(f)?,
            "route" | "cluster" => n.route = port(f)?,
            "gateway" if gateway => n.gateway = port(f)?,
            "leafnode" | "leafnodes" | "leaf" => n.leafnode = port(f)?,
            "gateway" => {
                return Err(ConfigError::at(
                    &f.key_pos,
                    format!(
                        "node {:?}: a gateway port needs a super-cluster (`clusters {{ … }}`)",
                        e.key
                    ),
                ))
            }
            _ => {
                return Err(ConfigError::at(
                    &f.key_pos,
                    format!(
                        "node {:?}: unknown field {:?} (a node has `port`, `http`, `route`, \
                         `leafnode`{})",
                        e.key,
                        f.key,
                        if gateway { ", `gateway`" } else { "" }
                    ),
                ))
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nodes_in_order() {
        let t = Topology::parse(
            "cluster: C1\nnodes {\n  n1 { port: 4222, http: 8222, route: 6222 }\n  n2 { port: 0 }\n  n3 {}\n}\n",
        )
        .expect("parses");
        assert!(!t.super_cluster);
        assert_eq!(t.clusters.len(), 1);
        assert_eq!(t.clusters[0].name, "C1");
        let names: Vec<&str> = t.nodes().map(|(_, n)| n.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2", "n3"]);
        let nodes = &t.clusters[0].nodes;
        assert_eq!(
            nodes[0].fixed_ports(false),
            Some(Ports {
                client: 4222,
                http: 8222,
                route: 6222,
                gateway: None,
                leafnode: None,
            })
        );
        assert_eq!(nodes[1].port, None);
        assert_eq!(nodes[2].fixed_ports(false), None);
    }

    #[test]
    fn parses_a_super_cluster() {
        let t = Topology::parse(
            "clusters {\n A { nodes { a1 { port: 1, http: 2, route: 3, gateway: 4 }, a2 {} } }\n \
             B { nodes { b1 {} } }\n}\n",
        )
        .expect("parses");
        assert!(t.super_cluster);
        let names: Vec<&str> = t.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["A", "B"]);
        let nodes: Vec<(usize, &str)> = t.nodes().map(|(c, n)| (c, n.name.as_str())).collect();
        assert_eq!(nodes, [(0, "a1"), (0, "a2"), (1, "b1")]);
        assert_eq!(t.node_count(), 3);
        assert_eq!(t.clusters[0].nodes[0].gateway, Some(4));
        assert_eq!(
            t.clusters[0].nodes[0].fixed_ports(true).map(|p| p.gateway),
            Some(Some(4))
        );
        assert_eq!(t.describe(), "super-cluster A, B");
    }

    #[test]
    fn refuses_clearly() {
        let err = |s: &str| Topology::parse(s).unwrap_err().to_string();
        assert!(err("nodes { n1 {} }").contains("no cluster name"));
        assert!(err("cluster: C\n").contains("no nodes"));
        assert!(err("cluster: C\nnodes {}").contains("empty"));
        assert!(
            err("cluster: C\nnodes { a { port: 1 }\n b { http: 1 } }").contains("port 1 is both")
        );
        assert!(err("cluster: C\nnodes { a { prt: 1 } }").contains("unknown field \"prt\""));
        assert!(err("cluster: C\nnodes { a { port: 70000 } }").contains("out of range"));
        assert!(err("cluster: C\nnodes { a {} }\ngateways {}").contains("clusters"));
        assert!(err("cluster: C\nbogus: 1\nnodes { a {} }").contains("unknown field"));
        assert!(err("cluster: C\nnodes { a { gateway: 5 } }").contains("needs a super-cluster"));
        assert!(err("clusters { A { nodes { a {} } } }").contains("at least two"));
        assert!(
            err("clusters { A { nodes { a {} } }, B { nodes { a {} } } }").contains("named twice")
        );
        assert!(err("clusters { A { nodes { a {} } }, B {} }").contains("has no nodes"));
        assert!(err(
            "clusters { A { nodes { a { gateway: 9 } } }, B { nodes { b { route: 9 } } } }"
        )
        .contains("port 9 is both"));
        assert!(
            err("cluster: A\nclusters { A { nodes { a {} } }, B { nodes { b {} } } }")
                .contains("together")
        );
        assert!(
            err("clusters { A { nodes { a {} }, x: 1 }, B { nodes { b {} } } }")
                .contains("unknown field \"x\"")
        );
    }
}
