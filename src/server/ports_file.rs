//! nats-server's ports file (`--ports_file_dir DIR`): `DIR/<exe name>_<pid>.ports`, the
//! JSON of the bound listeners' URLs, written once they are all bound and removed on
//! shutdown. Tools that start the server with `-p -1` read it to find the ports.

use super::ServerShared;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

/// nats-server's `Ports`: empty lists are left out (Go's `omitempty`).
#[derive(Serialize, Default, Debug, PartialEq, Eq)]
pub struct Ports {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nats: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub monitoring: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster: Vec<String>,
}

/// `DIR/<base name of argv[0]>_<pid>.ports`, as nats-server names it (so a `nats-server`
/// symlink to natsd writes `nats-server_<pid>.ports`).
pub fn path(dir: &Path) -> PathBuf {
    let exe = std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "natsd".into());
    dir.join(format!("{exe}_{}.ports", std::process::id()))
}

/// The listeners' URLs. As nats-server: cluster URLs are `tls://` when routes use TLS.
pub fn ports(srv: &ServerShared) -> Ports {
    let mut p = Ports::default();
    if let Some(a) = srv.client_addr.get() {
        p.nats = urls("nats", *a);
    }
    if let Some(a) = srv.http_addr.get() {
        p.monitoring = urls("http", *a);
    }
    if let Some(cl) = &srv.cluster {
        if let Some(a) = cl.listen_addr.get() {
            let scheme = if cl.opts.tls.is_some() { "tls" } else { "nats" };
            p.cluster = urls(scheme, *a);
        }
    }
    p
}

/// `scheme://ip:port` for the address, or, when it is 0.0.0.0 / `::`, for every address
/// of the machine's interfaces (v4 and v6), as nats-server's `resolveHostPorts`.
pub fn urls(scheme: &str, a: SocketAddr) -> Vec<String> {
    let ips = if a.ip().is_unspecified() {
        let ips = interface_ips();
        if ips.is_empty() {
            vec![match a.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            }]
        } else {
            ips
        }
    } else {
        vec![a.ip()]
    };
    ips.into_iter()
        .map(|ip| format!("{scheme}://{}", SocketAddr::new(ip, a.port())))
        .collect()
}

/// The interfaces' addresses (Linux: /proc), loopback first: the IPv4 ones, then the IPv6
/// ones by interface and scope (global before link-local) — Go's order on a host with one
/// interface besides `lo`. Empty where /proc is not there.
fn interface_ips() -> Vec<IpAddr> {
    let mut v4: Vec<Ipv4Addr> = Vec::new();
    if let Ok(t) = std::fs::read_to_string("/proc/net/fib_trie") {
        let mut last: Option<Ipv4Addr> = None;
        for line in t.lines() {
            let l = line.trim();
            if let Some(ip) = l.strip_prefix("|-- ") {
                last = ip.parse().ok();
            } else if l == "/32 host LOCAL" {
                if let Some(ip) = last.take() {
                    if !v4.contains(&ip) {
                        v4.push(ip);
                    }
                }
            }
        }
    }
    let mut v6: Vec<(u32, u32, Ipv6Addr)> = Vec::new();
    if let Ok(t) = std::fs::read_to_string("/proc/net/if_inet6") {
        for line in t.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(hex), Some(idx), Some(scope)) = (f.first(), f.get(1), f.get(3)) else {
                continue;
            };
            let (Ok(bits), Ok(idx), Ok(scope)) = (
                u128::from_str_radix(hex, 16),
                u32::from_str_radix(idx, 16),
                u32::from_str_radix(scope, 16),
            ) else {
                continue;
            };
            v6.push((idx, scope, Ipv6Addr::from(bits)));
        }
    }
    v6.sort_by_key(|&(idx, scope, _)| (idx, scope));
    let (lo4, v4): (Vec<Ipv4Addr>, Vec<Ipv4Addr>) = v4.into_iter().partition(Ipv4Addr::is_loopback);
    let (lo6, v6): (Vec<Ipv6Addr>, Vec<Ipv6Addr>) =
        v6.into_iter().map(|x| x.2).partition(Ipv6Addr::is_loopback);
    let four = |l: Vec<Ipv4Addr>| l.into_iter().map(IpAddr::V4);
    let six = |l: Vec<Ipv6Addr>| l.into_iter().map(IpAddr::V6);
    four(lo4)
        .chain(six(lo6))
        .chain(four(v4))
        .chain(six(v6))
        .collect()
}

/// Write the file (errors are logged, the server goes on, as nats-server).
pub fn write(srv: &ServerShared, dir: &Path) {
    let file = path(dir);
    let json = match serde_json::to_vec(&ports(srv)) {
        Ok(j) => j,
        Err(e) => {
            tracing::error!("Error marshaling ports file: {e}");
            return;
        }
    };
    if let Err(e) = std::fs::write(&file, json) {
        tracing::error!("Error writing ports file ({}): {e}", file.display());
    }
}

/// Remove the file on shutdown.
pub fn remove(dir: &Path) {
    let file = path(dir);
    if let Err(e) = std::fs::remove_file(&file) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::error!("Error cleaning up ports file {}: {e}", file.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_a_bound_address_and_of_any() {
        let a: SocketAddr = "127.0.0.1:4222".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(urls("nats", a), vec!["nats://127.0.0.1:4222".to_string()]);
        let a: SocketAddr = "[::1]:8222".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(urls("http", a), vec!["http://[::1]:8222".to_string()]);
        let any: SocketAddr = "0.0.0.0:4222".parse().unwrap_or_else(|e| panic!("{e}"));
        let u = urls("nats", any);
        assert_eq!(u.first().map(String::as_str), Some("nats://127.0.0.1:4222"));
        assert!(u
            .iter()
            .all(|x| x.starts_with("nats://") && x.ends_with(":4222")));
        assert!(!u.iter().any(|x| x.contains("0.0.0.0")));
    }

    #[test]
    fn json_leaves_out_empty_lists() {
        let p = Ports {
            nats: vec!["nats://127.0.0.1:1".into()],
            ..Ports::default()
        };
        assert_eq!(
            serde_json::to_string(&p).unwrap_or_default(),
            r#"{"nats":["nats://127.0.0.1:1"]}"#
        );
    }
}
