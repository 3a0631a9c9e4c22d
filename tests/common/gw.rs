//! Gateway helpers: natsd nodes of a named cluster with a `gateway {}` block on 127.0.0.1,
//! and waits on what a server's gateways know.

use natsd::config::{ClusterOpts, GatewayOpts, RemoteGatewayOpts};
use natsd::{Options, Server};

/// `(name, "nats://127.0.0.1:port")` pairs → the `gateways` list.
pub fn remotes(list: &[(&str, u16)]) -> Vec<RemoteGatewayOpts> {
    list.iter()
        .map(|(n, p)| RemoteGatewayOpts {
            name: n.to_string(),
            urls: vec![format!("nats://127.0.0.1:{p}")],
            tls: None,
        })
        .collect()
}

/// A node `name` of cluster `cluster`: gateway on `gw_port` (0: any), routes seeded to
/// `seed` (a route port) when given, dialling `gateways`.
pub fn node(
    name: &str,
    cluster: &str,
    gw_port: u16,
    seed: Option<u16>,
    gateways: Vec<RemoteGatewayOpts>,
) -> Options {
    Options {
        server_name: Some(name.into()),
        http_port: Some(0),
        cluster: Some(ClusterOpts {
            name: Some(cluster.into()),
            host: "127.0.0.1".into(),
            port: 0,
            routes: seed
                .map(|p| vec![format!("nats-route://127.0.0.1:{p}")])
                .unwrap_or_default(),
            ..ClusterOpts::default()
        }),
        gateway: Some(GatewayOpts {
            name: cluster.into(),
            host: "127.0.0.1".into(),
            port: gw_port,
            gateways,
            ..GatewayOpts::default()
        }),
        ..Options::local()
    }
}

pub fn gw_port(s: &Server) -> u16 {
    s.shared()
        .gateway
        .as_ref()
        .and_then(|g| g.listen_addr.get())
        .map(|a| a.port())
        .expect("gateway listener")
}

/// Names of the clusters `s` has an outbound gateway to.
pub fn outbound_names(s: &Server) -> Vec<String> {
    let mut v: Vec<String> = s
        .shared()
        .gateway
        .as_ref()
        .map(|g| g.outbounds().iter().map(|o| o.name.clone()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Number of inbound gateway connections of `s`.
pub fn inbound_count(s: &Server) -> usize {
    s.shared()
        .gateway
        .as_ref()
        .map_or(0, |g| g.inbounds().len())
}

/// Does `s`'s outbound to `cluster` see interest (plain, or a queue group) in `subject`?
pub fn remote_interest(s: &Server, cluster: &str, subject: &str) -> bool {
    let Some(o) = s
        .shared()
        .gateway
        .as_ref()
        .and_then(|g| g.outbound_to(cluster))
    else {
        return false;
    };
    let (plain, r) = o.interest.check("$G", subject.as_bytes());
    plain || r.is_some_and(|r| !r.qsubs.is_empty())
}
