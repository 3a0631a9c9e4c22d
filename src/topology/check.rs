//! `natsd topology check FILE [MONITOR_URL...]`: each node's `/routez` (and in a super-cluster
//! its `/gatewayz`) against the file. Also the mesh comparison `up` waits on, and the small HTTP GET both use (std `TcpStream`, no
//! client crate).

use super::file::{Topology, HOST};
use super::{usage_error, CHECK_USAGE};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// What one node's `/routez` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub server_name: String,
    /// `routes[].remote_name`, one per route.
    pub remotes: Vec<String>,
}

/// What one node's `/gatewayz` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewaysSeen {
    /// `name`: this node's gateway (cluster) name; empty without gateways.
    pub name: String,
    /// The keys of `outbound_gateways`.
    pub outbound: Vec<String>,
    /// `inbound_gateways`: per remote cluster, how many inbound connections.
    pub inbound: Vec<(String, usize)>,
}

/// `http://host:port`, `host:port` or a bare port → (host, port).
pub fn parse_monitor_url(url: &str) -> Result<(String, u16), String> {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or(url)
        .split('/')
        .next()
        .unwrap_or("");
    if let Ok(p) = rest.parse::<u16>() {
        return Ok((HOST.to_string(), p));
    }
    let (host, port) = rest
        .rsplit_once(':')
        .ok_or_else(|| format!("bad monitoring URL {url:?} (want http://HOST:PORT)"))?;
    let port = port
        .parse::<u16>()
        .map_err(|_| format!("bad port in monitoring URL {url:?}"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host.to_string(), port))
}

/// GET `path` from `host:port` over HTTP/1.0: the body of a 200 response.
pub fn http_get(host: &str, port: u16, path: &str) -> Result<String, String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {host}"))?;
    let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(IO_TIMEOUT)).ok();
    s.set_write_timeout(Some(IO_TIMEOUT)).ok();
    let host_header = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {host_header}\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "malformed HTTP response".to_string())?;
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("GET {path}: {status}"));
    }
    Ok(body.to_string())
}

/// One node's `/routez`.
pub fn fetch_routez(host: &str, port: u16) -> Result<Observed, String> {
    let body = http_get(host, port, "/routez")?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/routez is not JSON: {e}"))?;
    let server_name = v["server_name"].as_str().unwrap_or("").to_string();
    // A pooled peer shows once per route connection (pool slots, pinned accounts): one
    // route in the topology's sense.
    let mut remotes: Vec<String> = Vec::new();
    for r in v["routes"].as_array().into_iter().flatten() {
        let name = r["remote_name"].as_str().unwrap_or("").to_string();
        let pooled = r.get("account").is_some()
            || v["routes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|o| o["remote_id"] == r["remote_id"])
                .count()
                > 1;
        if !(pooled && remotes.contains(&name)) {
            remotes.push(name);
        }
    }
    Ok(Observed {
        server_name,
        remotes,
    })
}

/// One node's `/gatewayz`.
pub fn fetch_gatewayz(host: &str, port: u16) -> Result<GatewaysSeen, String> {
    let body = http_get(host, port, "/gatewayz")?;
    let v: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| format!("/gatewayz is not JSON: {e}"))?;
    let mut g = GatewaysSeen {
        name: v["name"].as_str().unwrap_or("").to_string(),
        ..GatewaysSeen::default()
    };
    if let Some(o) = v["outbound_gateways"].as_object() {
        g.outbound = o.keys().cloned().collect();
    }
    if let Some(i) = v["inbound_gateways"].as_object() {
        g.inbound = i
            .iter()
            .map(|(k, v)| (k.clone(), v.as_array().map_or(0, Vec::len)))
            .collect();
    }
    Ok(g)
}

/// What is wrong with node `idx`'s (file order across clusters) routes against the file: empty
/// when it answers under its own name with exactly one route to every other node of its
/// cluster.
pub fn problems(t: &Topology, idx: usize, seen: &Observed) -> Vec<String> {
    let Some((ci, node)) = t.nodes().nth(idx) else {
        return vec![format!("no node {idx} in the file")];
    };
    let nodes = &t.clusters[ci].nodes;
    let me = &node.name;
    let mut out = Vec::new();
    if &seen.server_name != me {
        out.push(format!(
            "answers as server {:?}, not {me:?}",
            seen.server_name
        ));
    }
    for n in nodes {
        if &n.name != me && !seen.remotes.contains(&n.name) {
            out.push(format!("missing route to {}", n.name));
        }
    }
    let mut counted: Vec<&String> = Vec::new();
    for r in &seen.remotes {
        if counted.contains(&r) {
            continue;
        }
        counted.push(r);
        let count = seen.remotes.iter().filter(|x| *x == r).count();
        let known = nodes.iter().any(|n| &n.name == r);
        if r == me {
            out.push("extra route to itself".to_string());
        } else if !known && t.nodes().any(|(_, n)| &n.name == r) {
            out.push(format!("extra route to {r} (another cluster)"));
        } else if !known {
            let name = if r.is_empty() { "(unnamed)" } else { r };
            out.push(format!("extra route to {name} (not in the file)"));
        } else if count > 1 {
            out.push(format!("extra route to {r} ({count} routes, want 1)"));
        }
    }
    out
}

/// What is wrong with node `idx`'s gateways in a super-cluster: empty when its gateway is its
/// cluster's name and it has one outbound gateway to every other cluster and none elsewhere.
/// (Which server of a cluster an outbound reaches is the dialer's choice: inbound connections
/// are counted per cluster, `inbound_problems`.)
pub fn gateway_problems(t: &Topology, idx: usize, seen: &GatewaysSeen) -> Vec<String> {
    let Some((ci, _)) = t.nodes().nth(idx) else {
        return vec![format!("no node {idx} in the file")];
    };
    let mine = &t.clusters[ci].name;
    let mut out = Vec::new();
    if seen.name.is_empty() {
        out.push("no gateway".to_string());
        return out;
    }
    if &seen.name != mine {
        out.push(format!("gateway {:?}, not {mine:?}", seen.name));
    }
    for c in &t.clusters {
        if &c.name != mine && !seen.outbound.contains(&c.name) {
            out.push(format!("missing outbound gateway to {}", c.name));
        }
    }
    let foreign = |n: &String| n == mine || !t.clusters.iter().any(|c| &c.name == n);
    for o in seen.outbound.iter().filter(|o| foreign(o)) {
        out.push(format!(
            "extra outbound gateway to {o} (not another cluster of the file)"
        ));
    }
    for (i, k) in seen.inbound.iter().filter(|(i, _)| foreign(i)) {
        out.push(format!(
            "extra inbound gateways from {i} ({k}, not another cluster of the file)"
        ));
    }
    out
}

/// Per cluster X and other cluster Y: the nodes of X together have one inbound gateway from
/// every node of Y (each node of Y has one outbound to X). `seen[i]`: node i's `/gatewayz`
/// (file order), None when unknown (then its cluster is not judged).
pub fn inbound_problems(t: &Topology, seen: &[Option<GatewaysSeen>]) -> Vec<String> {
    let mut out = Vec::new();
    let cluster_of: Vec<usize> = t.nodes().map(|(ci, _)| ci).collect();
    for (ci, c) in t.clusters.iter().enumerate() {
        let views: Vec<&GatewaysSeen> = (0..cluster_of.len())
            .filter(|&i| cluster_of[i] == ci)
            .filter_map(|i| seen.get(i).and_then(Option::as_ref))
            .collect();
        if views.len() != c.nodes.len() {
            continue;
        }
        for other in &t.clusters {
            if other.name == c.name {
                continue;
            }
            let n: usize = views
                .iter()
                .flat_map(|v| v.inbound.iter())
                .filter(|(name, _)| name == &other.name)
                .map(|(_, k)| k)
                .sum();
            if n != other.nodes.len() {
                out.push(format!(
                    "cluster {}: {n} inbound gateways from {}, want {} (one per node of {})",
                    c.name,
                    other.name,
                    other.nodes.len(),
                    other.name
                ));
            }
        }
    }
    out
}

/// Every problem of node `idx` reached at `host:port` (routes, then gateways in a
/// super-cluster); `Err` when it does not answer.
pub fn node_problems(
    t: &Topology,
    idx: usize,
    host: &str,
    port: u16,
) -> Result<(Observed, Option<GatewaysSeen>, Vec<String>), String> {
    let seen = fetch_routez(host, port).map_err(|e| format!("/routez: {e}"))?;
    let mut p = problems(t, idx, &seen);
    let gw = if t.super_cluster {
        let g = fetch_gatewayz(host, port).map_err(|e| format!("/gatewayz: {e}"))?;
        p.extend(gateway_problems(t, idx, &g));
        Some(g)
    } else {
        None
    };
    Ok((seen, gw, p))
}

/// `natsd topology check FILE [MONITOR_URL...]`.
pub fn main(args: &[String]) -> ExitCode {
    let mut file = None;
    let mut urls = Vec::new();
    for a in args {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{CHECK_USAGE}");
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') => {
                return usage_error(CHECK_USAGE, &format!("unknown flag {s}"))
            }
            s if file.is_none() => file = Some(s.to_string()),
            s => urls.push(s.to_string()),
        }
    }
    let Some(file) = file else {
        return usage_error(CHECK_USAGE, "no topology file");
    };
    let t = match Topology::load(Path::new(&file)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("natsd topology: {e}");
            return ExitCode::from(2);
        }
    };
    let mut targets = Vec::new();
    let servers = t.node_count() + t.leaves.len();
    if urls.is_empty() {
        let fixed = t
            .nodes()
            .map(|(_, n)| (&n.name, n.http))
            .chain(t.leaves.iter().map(|l| (&l.name, l.http)));
        for (name, http) in fixed {
            let Some(http) = http else {
                eprintln!(
                    "natsd topology: node {name} has no fixed `http` port in {file}; give every \
                     node's monitoring URL: natsd topology check {file} URL…"
                );
                return ExitCode::from(2);
            };
            targets.push((HOST.to_string(), http));
        }
    } else {
        if urls.len() != servers {
            return usage_error(
                CHECK_USAGE,
                &format!(
                    "{} monitoring URLs for {servers} nodes (one per node, then one per leaf, \
                     in the file's order)",
                    urls.len(),
                ),
            );
        }
        for u in &urls {
            match parse_monitor_url(u) {
                Ok(hp) => targets.push(hp),
                Err(e) => return usage_error(CHECK_USAGE, &e),
            }
        }
    }
    let width = t
        .nodes()
        .map(|(_, n)| n.name.len())
        .chain(t.leaves.iter().map(|l| l.name.len()))
        .max()
        .unwrap_or(0);
    let mut bad = 0;
    let mut views = Vec::new();
    for (i, ((_, n), (host, port))) in t.nodes().zip(&targets).enumerate() {
        let url = format!("http://{host}:{port}");
        let name = &n.name;
        match node_problems(&t, i, host, *port) {
            Err(e) => {
                bad += 1;
                views.push(None);
                println!("{name:width$}  {url}  unreachable: {e}");
            }
            Ok((seen, gw, p)) => {
                views.push(gw.clone());
                if p.is_empty() {
                    let mut peers: Vec<&str> = seen.remotes.iter().map(String::as_str).collect();
                    peers.sort();
                    let mut what = if peers.is_empty() {
                        "no routes (a single node)".to_string()
                    } else {
                        format!("routes to {}", peers.join(", "))
                    };
                    if let Some(g) = gw {
                        let mut out = g.outbound.clone();
                        out.sort();
                        what.push_str(&format!("; gateway {} to {}", g.name, out.join(", ")));
                    }
                    println!("{name:width$}  {url}  ok: {what}");
                } else {
                    bad += 1;
                    for line in p {
                        println!("{name:width$}  {url}  {line}");
                    }
                }
            }
        }
    }
    let shape = if t.super_cluster {
        "full meshes and gateways"
    } else {
        "full mesh"
    };
    let mut inbound = inbound_problems(&t, &views);
    if !t.leaves.is_empty() {
        let (hubs, leaves) = targets.split_at(t.node_count());
        let leafy = super::leaves::problems(&t, hubs, leaves);
        for (l, (host, port)) in t.leaves.iter().zip(leaves) {
            let name = &l.name;
            let url = format!("http://{host}:{port}");
            let mine: Vec<&String> = leafy
                .iter()
                .filter(|p| p.starts_with(&format!("{name}: ")))
                .collect();
            if mine.is_empty() {
                let hub = &t.clusters[l.hub].name;
                println!("{name:width$}  {url}  ok: leaf of {hub}");
            } else {
                bad += 1;
                for p in mine {
                    println!("{name:width$}  {url}  {}", &p[name.len() + 2..]);
                }
            }
        }
        let cluster_wide = leafy.into_iter().filter(|p| p.starts_with("cluster "));
        inbound.extend(cluster_wide);
    }
    for line in &inbound {
        println!("{line}");
    }
    if !inbound.is_empty() && bad == 0 {
        bad = 1;
    }
    if bad == 0 {
        println!(
            "mesh matches {file}: {}, {} nodes{}, {shape}",
            t.describe(),
            t.node_count(),
            super::launch::leaves_text(&t)
        );
        ExitCode::SUCCESS
    } else {
        println!("mesh does not match {file}: {bad} of {servers} nodes differ");
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(name: &str, remotes: &[&str]) -> Observed {
        Observed {
            server_name: name.into(),
            remotes: remotes.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn diffs_views() {
        let t = Topology::parse("cluster: C\nnodes { a {}, b {}, c {} }").expect("parses");
        assert!(problems(&t, 0, &obs("a", &["b", "c"])).is_empty());
        assert_eq!(problems(&t, 0, &obs("a", &["b"])), ["missing route to c"]);
        assert_eq!(
            problems(&t, 1, &obs("b", &["a", "c", "c", "x"])),
            [
                "extra route to c (2 routes, want 1)",
                "extra route to x (not in the file)"
            ]
        );
        assert_eq!(
            problems(&t, 2, &obs("z", &["a", "b"])),
            ["answers as server \"z\", not \"c\""]
        );
    }

    #[test]
    fn diffs_gateways() {
        let t = Topology::parse(
            "clusters { A { nodes { a1 {}, a2 {} } }, B { nodes { b1 {}, b2 {} } }, C { nodes { c1 {} } } }",
        )
        .expect("parses");
        let gw = |name: &str, out: &[&str], inb: &[(&str, usize)]| GatewaysSeen {
            name: name.into(),
            outbound: out.iter().map(|s| s.to_string()).collect(),
            inbound: inb.iter().map(|(n, k)| (n.to_string(), *k)).collect(),
        };
        assert!(gateway_problems(&t, 0, &gw("A", &["B", "C"], &[("B", 2), ("C", 1)])).is_empty());
        assert!(gateway_problems(&t, 4, &gw("C", &["A", "B"], &[("A", 2), ("B", 2)])).is_empty());
        assert_eq!(
            gateway_problems(&t, 2, &gw("B", &["A", "X"], &[("A", 1), ("B", 1)])),
            [
                "missing outbound gateway to C",
                "extra outbound gateway to X (not another cluster of the file)",
                "extra inbound gateways from B (1, not another cluster of the file)"
            ]
        );
        assert_eq!(
            gateway_problems(&t, 0, &GatewaysSeen::default()),
            ["no gateway"]
        );
        // Inbound connections are counted per cluster: B's two nodes reach A somewhere.
        let views = [
            Some(gw("A", &["B", "C"], &[("B", 2), ("C", 1)])),
            Some(gw("A", &["B", "C"], &[])),
            Some(gw("B", &["A", "C"], &[("A", 1), ("C", 1)])),
            Some(gw("B", &["A", "C"], &[("A", 1)])),
            Some(gw("C", &["A", "B"], &[("A", 1), ("B", 2)])),
        ];
        assert_eq!(
            inbound_problems(&t, &views),
            ["cluster C: 1 inbound gateways from A, want 2 (one per node of A)"]
        );
        let mut partial = views.clone();
        partial[4] = None;
        assert!(inbound_problems(&t, &partial).is_empty());
        // Routes are checked within the node's own cluster.
        assert!(problems(&t, 3, &obs("b2", &["b1"])).is_empty());
        assert_eq!(
            problems(&t, 3, &obs("b2", &["b1", "a1"])),
            ["extra route to a1 (another cluster)"]
        );
    }

    #[test]
    fn monitor_urls() {
        assert_eq!(parse_monitor_url("8222"), Ok(("127.0.0.1".into(), 8222)));
        assert_eq!(
            parse_monitor_url("http://localhost:8223/routez"),
            Ok(("localhost".into(), 8223))
        );
        assert_eq!(parse_monitor_url("h:9"), Ok(("h".into(), 9)));
        assert!(parse_monitor_url("http://h").is_err());
    }
}
