//! Leaf nodes in a topology file: standalone servers attached to a cluster of the file (its
//! hub) over leafnode connections.
//!
//! ```text
//! cluster: HUB
//! nodes { h1 { leafnode: 7422 }, h2 {}, h3 {} }   # `leafnode`: the hub's leafnode port
//! leaves {
//!   l1 { port: 4230, http: 8230 }                 # a leaf: client and monitoring ports
//!   l2 { hub: HUB }                               # `hub`: the cluster it attaches to
//! }
//! ```
//!
//! Every node of a file with leaves listens for leafnodes (`leafnodes { listen }`, a free port
//! unless `leafnode` fixes it); each leaf gets one remote whose `urls` are the leafnode URLs
//! of every node of its hub cluster (the first cluster unless `hub` names another), so it
//! attaches to one of them and moves to another when that one goes. Ready (and `check` ok)
//! when every leaf has exactly one leafnode connection, to a node of its hub, and the nodes
//! of each cluster together have one leafnode connection from each of its leaves and no other.

use super::check::http_get;
use super::file::{Cluster, Ports, Topology, HOST};
use crate::config::conf::{ConfigError, Entry, Kind};
use std::collections::HashMap;

/// A leaf: its server name, ports (`None`: any free port) and hub cluster (an index into
/// `Topology::clusters`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub name: String,
    pub port: Option<u16>,
    pub http: Option<u16>,
    pub hub: usize,
}

/// A leaf's ports once known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafPorts {
    pub client: u16,
    pub http: u16,
}

impl LeafPorts {
    pub fn client_url(&self) -> String {
        format!("nats://{HOST}:{}", self.client)
    }

    pub fn monitor_url(&self) -> String {
        format!("http://{HOST}:{}", self.http)
    }
}

impl Leaf {
    /// The fixed ports that are set: (what, port).
    pub fn fixed(&self) -> Vec<(&'static str, u16)> {
        [("client port", self.port), ("monitoring port", self.http)]
            .into_iter()
            .filter_map(|(what, p)| p.map(|p| (what, p)))
            .collect()
    }
}

/// The `leaves { … }` map: names unique and fixed ports distinct across the file.
pub(super) fn parse(
    e: &Entry,
    clusters: &[Cluster],
    ports_seen: &mut HashMap<u16, String>,
    names_seen: &mut Vec<String>,
) -> Result<Vec<Leaf>, ConfigError> {
    let Kind::Map(m) = &e.value.kind else {
        return Err(ConfigError::at(
            &e.value.pos,
            format!(
                "`leaves` must be a map of leaf name to {{ port, http, hub }}, not {}",
                e.value.kind.type_name()
            ),
        ));
    };
    let mut out = Vec::new();
    for le in &m.entries {
        if le.used_as_variable {
            continue;
        }
        let leaf = leaf(le, clusters)?;
        if names_seen.contains(&leaf.name) {
            return Err(ConfigError::at(
                &le.key_pos,
                format!("node {:?} is named twice", leaf.name),
            ));
        }
        names_seen.push(leaf.name.clone());
        for (what, p) in leaf.fixed() {
            let me = format!("the {what} of leaf {}", leaf.name);
            if let Some(other) = ports_seen.insert(p, me.clone()) {
                return Err(ConfigError::at(
                    &le.key_pos,
                    format!("port {p} is both {other} and {me}"),
                ));
            }
        }
        out.push(leaf);
    }
    if out.is_empty() {
        return Err(ConfigError::at(&e.key_pos, "`leaves` is empty"));
    }
    Ok(out)
}

fn leaf(e: &Entry, clusters: &[Cluster]) -> Result<Leaf, ConfigError> {
    let mut leaf = Leaf {
        name: super::file::node_name(e)?,
        port: None,
        http: None,
        hub: 0,
    };
    let Kind::Map(fields) = &e.value.kind else {
        return Err(ConfigError::at(
            &e.value.pos,
            format!(
                "leaf {:?} must be a map ({{ port: …, http: …, hub: … }}), not {}",
                e.key,
                e.value.kind.type_name()
            ),
        ));
    };
    for f in fields.entries.iter().filter(|f| !f.used_as_variable) {
        match f.key.to_ascii_lowercase().as_str() {
            "port" | "client" => leaf.port = super::file::port(f)?,
            "http" | "monitor" => leaf.http = super::file::port(f)?,
            "hub" => {
                let Kind::String(name) = &f.value.kind else {
                    return Err(ConfigError::at(
                        &f.value.pos,
                        format!("leaf {:?}: `hub` must be a cluster name", e.key),
                    ));
                };
                leaf.hub = clusters
                    .iter()
                    .position(|c| &c.name == name)
                    .ok_or_else(|| {
                        ConfigError::at(
                            &f.value.pos,
                            format!("leaf {:?}: no cluster {name:?} in the file", e.key),
                        )
                    })?;
            }
            _ => {
                return Err(ConfigError::at(
                    &f.key_pos,
                    format!(
                        "leaf {:?}: unknown field {:?} (a leaf has `port`, `http`, `hub`)",
                        e.key, f.key
                    ),
                ))
            }
        }
    }
    Ok(leaf)
}

/// A hub node's `leafnodes {}` block.
pub fn hub_block(leafnode_port: u16) -> String {
    format!("leafnodes {{\n  listen: \"{HOST}:{leafnode_port}\"\n}}\n")
}

/// Leaf `i`'s config: one remote to every node of its hub cluster.
pub fn leaf_conf(t: &Topology, ports: &[Ports], i: usize) -> Option<String> {
    let leaf = t.leaves.get(i)?;
    let urls: Vec<String> = t
        .nodes()
        .zip(ports)
        .filter(|((ci, _), _)| *ci == leaf.hub)
        .filter_map(|(_, p)| p.leafnode)
        .map(|p| format!("\"nats-leaf://{HOST}:{p}\""))
        .collect();
    Some(format!(
        "# written by `natsd topology up` for leaf {} of cluster {}\nleafnodes {{\n  \
         remotes: [\n    {{ urls: [{}] }}\n  ]\n}}\n",
        leaf.name,
        t.clusters[leaf.hub].name,
        urls.join(", ")
    ))
}

/// Leaf `i`'s command line.
pub fn leaf_args(
    t: &Topology,
    ports: &[LeafPorts],
    i: usize,
    conf: &std::path::Path,
    extra: &[String],
) -> Vec<String> {
    let p = ports[i];
    let mut a: Vec<String> = vec!["-c".into(), conf.display().to_string()];
    a.extend(super::launch::server_args(
        p.client,
        p.http,
        &t.leaves[i].name,
    ));
    a.extend(extra.iter().cloned());
    a
}

/// One server's `/leafz`: each leafnode connection's remote server name and `is_spoke`
/// (nats-server's sense: this server is the spoke on it — it dialled the remote as a leaf).
pub fn fetch_leafz(host: &str, port: u16) -> Result<Vec<(String, bool)>, String> {
    let body = http_get(host, port, "/leafz")?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/leafz is not JSON: {e}"))?;
    Ok(v["leafs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            let name = l["name"].as_str().unwrap_or("").to_string();
            (name, l["is_spoke"].as_bool() == Some(true))
        })
        .collect())
}

/// What is wrong with leaf `i`'s `/leafz`: empty when it has exactly one leafnode
/// connection, to a node of its hub cluster.
pub fn leaf_problems(t: &Topology, i: usize, seen: &[(String, bool)]) -> Vec<String> {
    let Some(leaf) = t.leaves.get(i) else {
        return vec![format!("no leaf {i} in the file")];
    };
    let hub = &t.clusters[leaf.hub];
    match seen {
        [] => vec![format!("no leafnode connection to cluster {}", hub.name)],
        [(name, true)] if hub.nodes.iter().any(|n| &n.name == name) => Vec::new(),
        [(name, _)] => vec![format!(
            "leafnode connection to {name:?}, not to a node of cluster {}",
            hub.name
        )],
        more => vec![format!(
            "{} leafnode connections, want 1 (to cluster {})",
            more.len(),
            hub.name
        )],
    }
}

/// Per cluster: the leafnode connections its nodes accepted (`seen[i]`: node i's `/leafz`,
/// file order; `None` when unknown, then that cluster is not judged) come one from each of
/// its leaves.
pub fn hub_problems(t: &Topology, seen: &[Option<Vec<(String, bool)>>]) -> Vec<String> {
    let mut out = Vec::new();
    for (ci, c) in t.clusters.iter().enumerate() {
        let views: Vec<&Vec<(String, bool)>> = t
            .nodes()
            .enumerate()
            .filter(|(_, (k, _))| *k == ci)
            .filter_map(|(i, _)| seen.get(i).and_then(Option::as_ref))
            .collect();
        if views.len() != c.nodes.len() {
            continue;
        }
        let spokes: Vec<&str> = views
            .iter()
            .flat_map(|v| v.iter())
            .filter(|(_, spoke)| !*spoke)
            .map(|(n, _)| n.as_str())
            .collect();
        for l in t.leaves.iter().filter(|l| l.hub == ci) {
            let k = spokes.iter().filter(|s| **s == l.name).count();
            if k != 1 {
                out.push(format!(
                    "cluster {}: {k} leafnode connections from leaf {}, want 1",
                    c.name, l.name
                ));
            }
        }
        for s in spokes {
            if !t.leaves.iter().any(|l| l.hub == ci && l.name == s) {
                out.push(format!(
                    "cluster {}: a leafnode connection from {s:?} (not one of its leaves)",
                    c.name
                ));
            }
        }
    }
    out
}

/// Every leafnode problem of the running servers: each leaf's `/leafz` (`leaves[i]`: its
/// monitoring host and port) and its hub's (`hubs[i]`: node i's, file order). Each line
/// starts with the server it is about (or the cluster).
pub fn problems(t: &Topology, hubs: &[(String, u16)], leaves: &[(String, u16)]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (l, (host, port))) in t.leaves.iter().zip(leaves).enumerate() {
        match fetch_leafz(host, *port) {
            Ok(seen) => out.extend(
                leaf_problems(t, i, &seen)
                    .into_iter()
                    .map(|p| format!("{}: {p}", l.name)),
            ),
            Err(e) => out.push(format!("{}: /leafz: {e} at http://{host}:{port}", l.name)),
        }
    }
    let views: Vec<Option<Vec<(String, bool)>>> = hubs
        .iter()
        .map(|(host, port)| fetch_leafz(host, *port).ok())
        .collect();
    out.extend(hub_problems(t, &views));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Topology {
        Topology::parse(
            "cluster: H\nnodes { h1 { leafnode: 7422 }, h2 {} }\nleaves { l1 { port: 4230 }, l2 {} }",
        )
        .expect("parses")
    }

    #[test]
    fn leaves_parse_with_their_hub_and_ports() {
        let t = file();
        assert_eq!(t.leaves.len(), 2);
        assert_eq!(
            (t.leaves[0].name.as_str(), t.leaves[0].port, t.leaves[0].hub),
            ("l1", Some(4230), 0)
        );
        assert_eq!(t.clusters[0].nodes[0].leafnode, Some(7422));
        let s = Topology::parse(
            "clusters { A { nodes { a {} } }, B { nodes { b {} } } }\nleaves { x { hub: B } }",
        )
        .expect("parses");
        assert_eq!(s.leaves[0].hub, 1);
        let err = |s: &str| Topology::parse(s).unwrap_err().to_string();
        assert!(err("cluster: H\nnodes { h {} }\nleaves { h {} }").contains("named twice"));
        assert!(err("cluster: H\nnodes { h {} }\nleaves { l { hub: X } }").contains("no cluster"));
        assert!(err("cluster: H\nnodes { h {} }\nleaves { l { route: 1 } }")
            .contains("unknown field \"route\""));
        assert!(
            err("cluster: H\nnodes { h { port: 5 } }\nleaves { l { http: 5 } }")
                .contains("port 5 is both")
        );
        assert!(err("cluster: H\nnodes { h { leafnode: 9 } }").contains("needs `leaves"));
        assert!(err("cluster: H\nnodes { h {} }\nleaves {}").contains("empty"));
    }

    #[test]
    fn a_leaf_gets_a_remote_to_every_node_of_its_hub() {
        let t = file();
        let ports: Vec<Ports> = (0..2u16)
            .map(|i| Ports {
                client: 4222 + i,
                http: 8222 + i,
                route: 6222 + i,
                gateway: None,
                leafnode: Some(7422 + i),
            })
            .collect();
        let conf = leaf_conf(&t, &ports, 1).expect("a leaf");
        assert!(
            conf.contains("urls: [\"nats-leaf://127.0.0.1:7422\", \"nats-leaf://127.0.0.1:7423\"]"),
            "{conf}"
        );
        let o = crate::config::file::load_str(&conf).expect("natsd reads it");
        assert_eq!(o.options.leafnodes.map(|l| l.remotes.len()), Some(1));
        let hub = crate::config::file::load_str(&hub_block(7422)).expect("natsd reads it");
        assert_eq!(hub.options.leafnodes.and_then(|l| l.port), Some(7422));
        let lp = [LeafPorts {
            client: 4230,
            http: 8230,
        }];
        assert_eq!(
            leaf_args(
                &t,
                &lp,
                0,
                std::path::Path::new("/t/l1.conf"),
                &["-D".into()]
            )
            .join(" "),
            "-c /t/l1.conf -a 127.0.0.1 -p 4230 -m 8230 -n l1 -D"
        );
    }

    #[test]
    fn leaf_views_are_judged_on_both_ends() {
        let t = file();
        let c = |n: &str, spoke: bool| (n.to_string(), spoke);
        assert!(leaf_problems(&t, 0, &[c("h2", true)]).is_empty());
        assert_eq!(
            leaf_problems(&t, 0, &[c("h2", false)]),
            ["leafnode connection to \"h2\", not to a node of cluster H"]
        );
        assert_eq!(
            leaf_problems(&t, 0, &[]),
            ["no leafnode connection to cluster H"]
        );
        assert_eq!(
            leaf_problems(&t, 1, &[c("h1", true), c("h2", true)]),
            ["2 leafnode connections, want 1 (to cluster H)"]
        );
        assert_eq!(
            leaf_problems(&t, 1, &[c("zz", true)]),
            ["leafnode connection to \"zz\", not to a node of cluster H"]
        );
        let ok = [Some(vec![c("l1", false)]), Some(vec![c("l2", false)])];
        assert!(hub_problems(&t, &ok).is_empty());
        let bad = [
            Some(vec![c("l1", false), c("l1", false)]),
            Some(vec![c("q", false), c("h9", true)]),
        ];
        assert_eq!(
            hub_problems(&t, &bad),
            [
                "cluster H: 2 leafnode connections from leaf l1, want 1",
                "cluster H: 0 leafnode connections from leaf l2, want 1",
                "cluster H: a leafnode connection from \"q\" (not one of its leaves)"
            ]
        );
        assert!(hub_problems(&t, &[None, Some(Vec::new())]).is_empty());
    }
}
