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
//! port (`--cluster`). Super-clusters (`clusters`, `gateways`) are refused until gateways exist.

use crate::config::conf::{self, ConfigError, Entry, Kind, Map};
use std::collections::HashMap;
use std::path::Path;

/// The host every node listens on.
pub const HOST: &str = "127.0.0.1";

/// One cluster as the file describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// The cluster name.
    pub cluster: String,
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
}

/// A node's ports once every one is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub client: u16,
    pub http: u16,
    pub route: u16,
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
}

impl Node {
    /// The ports when all three are fixed in the file.
    pub fn fixed_ports(&self) -> Option<Ports> {
        Some(Ports {
            client: self.port?,
            http: self.http?,
            route: self.route?,
        })
    }

    /// The fixed ports that are set: (what, port).
    pub fn fixed(&self) -> Vec<(&'static str, u16)> {
        [
            ("client port", self.port),
            ("monitoring port", self.http),
            ("route port", self.route),
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

    fn from_map(map: &Map, file: Option<&Path>) -> Result<Topology, ConfigError> {
        let mut cluster = None;
        let mut nodes_entry = None;
        for e in &map.entries {
            if e.used_as_variable {
                continue;
            }
            match e.key.to_ascii_lowercase().as_str() {
                "cluster" | "cluster_name" => cluster = Some(string(e)?),
                "nodes" => nodes_entry = Some(e),
                "clusters" | "gateways" | "gateway" => {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!(
                            "{:?}: super-clusters need gateways, which natsd does not have yet; \
                             a topology file describes one cluster",
                            e.key
                        ),
                    ))
                }
                _ => {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!(
                            "unknown field {:?} (a topology file has `cluster` and `nodes`)",
                            e.key
                        ),
                    ))
                }
            }
        }
        let Some(cluster) = cluster else {
            return Err(ConfigError::whole(
                file,
                "no cluster name: add `cluster: NAME`",
            ));
        };
        if cluster.is_empty() || cluster.contains(char::is_whitespace) {
            return Err(ConfigError::whole(
                file,
                format!("bad cluster name {cluster:?} (no spaces, not empty)"),
            ));
        }
        let Some(nodes_entry) = nodes_entry else {
            return Err(ConfigError::whole(
                file,
                "no nodes: add `nodes { n1 {} n2 {} … }`",
            ));
        };
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
        let mut ports_seen: HashMap<u16, String> = HashMap::new();
        for e in &nodes_map.entries {
            let node = node(e)?;
            if nodes.iter().any(|n: &Node| n.name == node.name) {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("node {:?} is named twice", node.name),
                ));
            }
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
        Ok(Topology { cluster, nodes })
    }
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

fn port(e: &Entry) -> Result<Option<u16>, ConfigError> {
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

fn node(e: &Entry) -> Result<Node, ConfigError> {
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
    let mut n = Node {
        name,
        port: None,
        http: None,
        route: None,
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
            _ => {
                return Err(ConfigError::at(
                    &f.key_pos,
                    format!(
                        "node {:?}: unknown field {:?} (a node has `port`, `http`, `route`)",
                        e.key, f.key
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
        assert_eq!(t.cluster, "C1");
        let names: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["n1", "n2", "n3"]);
        assert_eq!(
            t.nodes[0].fixed_ports(),
            Some(Ports {
                client: 4222,
                http: 8222,
                route: 6222
            })
        );
        assert_eq!(t.nodes[1].port, None);
        assert_eq!(t.nodes[2].fixed_ports(), None);
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
        assert!(err("cluster: C\nnodes { a {} }\ngateways {}").contains("gateways"));
        assert!(err("cluster: C\nbogus: 1\nnodes { a {} }").contains("unknown field"));
    }
}
