//! `natsd topology check FILE [MONITOR_URL...]`: each node's `/routez` against the file. Also
//! the mesh comparison `up` waits on, and the small HTTP GET both use (std `TcpStream`, no
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
    let remotes = v["routes"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| r["remote_name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok(Observed {
        server_name,
        remotes,
    })
}

/// What is wrong with node `idx`'s view against the file: empty when it answers under its own
/// name with exactly one route to every other node.
pub fn problems(t: &Topology, idx: usize, seen: &Observed) -> Vec<String> {
    let me = &t.nodes[idx].name;
    let mut out = Vec::new();
    if &seen.server_name != me {
        out.push(format!(
            "answers as server {:?}, not {me:?}",
            seen.server_name
        ));
    }
    for n in &t.nodes {
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
        let known = t.nodes.iter().any(|n| &n.name == r);
        if r == me {
            out.push("extra route to itself".to_string());
        } else if !known {
            let name = if r.is_empty() { "(unnamed)" } else { r };
            out.push(format!("extra route to {name} (not in the file)"));
        } else if count > 1 {
            out.push(format!("extra route to {r} ({count} routes, want 1)"));
        }
    }
    out
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
    if urls.is_empty() {
        for n in &t.nodes {
            let Some(http) = n.http else {
                eprintln!(
                    "natsd topology: node {} has no fixed `http` port in {file}; give every \
                     node's monitoring URL: natsd topology check {file} URL…",
                    n.name
                );
                return ExitCode::from(2);
            };
            targets.push((HOST.to_string(), http));
        }
    } else {
        if urls.len() != t.nodes.len() {
            return usage_error(
                CHECK_USAGE,
                &format!(
                    "{} monitoring URLs for {} nodes (one per node, in the file's order)",
                    urls.len(),
                    t.nodes.len()
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
    let width = t.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    let mut bad = 0;
    for (i, (n, (host, port))) in t.nodes.iter().zip(&targets).enumerate() {
        let url = format!("http://{host}:{port}");
        let name = &n.name;
        match fetch_routez(host, *port) {
            Err(e) => {
                bad += 1;
                println!("{name:width$}  {url}  unreachable: {e}");
            }
            Ok(seen) => {
                let p = problems(&t, i, &seen);
                if p.is_empty() {
                    let mut peers: Vec<&str> = seen.remotes.iter().map(String::as_str).collect();
                    peers.sort();
                    let peers = if peers.is_empty() {
                        "no routes (a single node)".to_string()
                    } else {
                        format!("routes to {}", peers.join(", "))
                    };
                    println!("{name:width$}  {url}  ok: {peers}");
                } else {
                    bad += 1;
                    for line in p {
                        println!("{name:width$}  {url}  {line}");
                    }
                }
            }
        }
    }
    if bad == 0 {
        println!(
            "mesh matches {file}: cluster {}, {} nodes, full mesh",
            t.cluster,
            t.nodes.len()
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "mesh does not match {file}: {bad} of {} nodes differ",
            t.nodes.len()
        );
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
