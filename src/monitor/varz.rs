//! `/varz`: general server information and counters, field for field as nats-server 2.9.

use crate::config::{COMPAT_VERSION, NATSD_VERSION};
use crate::server::ServerShared;
use crate::util::time::{rfc3339_nano, uptime};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

#[derive(Serialize, Default)]
pub struct Empty {}

/// `/varz` `jetstream`: `{}` when off, `{config, stats}` when on.
#[derive(Serialize)]
#[serde(untagged)]
pub enum JetStreamVarz {
    Disabled(Empty),
    Enabled(crate::jetstream::monitor::Varz),
}

/// Go's `encoding/json` writes a whole float64 without a fraction (`"auth_timeout": 2`);
/// serde would write `2.0`, which clients decoding into an integer type reject.
fn go_float<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every whole f64 below is an exact i64
    if v.fract() == 0.0 && v.abs() < EXACT {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// `cluster` in `/varz`: nats-server omits every empty field (`{}` when not clustered).
#[derive(Serialize, Default, Debug)]
pub struct ClusterVarz {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "addr", skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(rename = "cluster_port", skip_serializing_if = "is_zero_u16")]
    pub port: u16,
    #[serde(serialize_with = "go_float", skip_serializing_if = "is_zero_f64")]
    pub auth_timeout: f64,
    /// Configured routes as `host:port`, as nats-server lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub urls: Vec<String>,
    #[serde(serialize_with = "go_float", skip_serializing_if = "is_zero_f64")]
    pub tls_timeout: f64,
    /// The configured route pool size (nats-server 2.10+; `-1` without pools).
    #[serde(skip_serializing_if = "is_zero_i32")]
    pub pool_size: i32,
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

fn is_zero_u16(v: &u16) -> bool {
    *v == 0
}

/// The `host[:port]` of a URL, as Go's `url.URL.Host` (no scheme, credentials or path).
fn url_host(u: &str) -> String {
    let rest = u.trim().split_once("://").map_or(u.trim(), |(_, r)| r);
    let rest = rest.split('/').next().unwrap_or(rest);
    rest.rsplit_once('@').map_or(rest, |(_, h)| h).to_string()
}

impl ClusterVarz {
    fn of(srv: &ServerShared) -> ClusterVarz {
        let Some(cl) = &srv.cluster else {
            // Without a cluster block, a gateway's name is the cluster name (as nats-server).
            return ClusterVarz {
                name: srv
                    .gateway
                    .as_ref()
                    .map(|g| g.name.clone())
                    .unwrap_or_default(),
                ..ClusterVarz::default()
            };
        };
        let urls = cl.opts.routes.iter().map(|u| url_host(u)).collect();
        ClusterVarz {
            name: cl.name(),
            host: cl.opts.host.clone(),
            port: cl
                .listen_addr
                .get()
                .map(|a| a.port())
                .unwrap_or(cl.opts.port),
            auth_timeout: cl.opts.auth_timeout.as_secs_f64(),
            urls,
            tls_timeout: 2.0,
            // What is in force (a reload may have changed it).
            pool_size: match cl.pool_size() {
                Some(n) => n as i32,
                None => cl.opts.pool_size.min(-1),
            },
        }
    }
}

/// `gateway` in `/varz`: every empty field omitted (`{}` without gateways).
#[derive(Serialize, Default, Debug)]
pub struct GatewayVarz {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(skip_serializing_if = "is_zero_u16")]
    pub port: u16,
    #[serde(serialize_with = "go_float", skip_serializing_if = "is_zero_f64")]
    pub auth_timeout: f64,
    #[serde(serialize_with = "go_float", skip_serializing_if = "is_zero_f64")]
    pub tls_timeout: f64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub advertise: String,
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub connect_retries: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<RemoteGatewayVarz>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reject_unknown: bool,
}

#[derive(Serialize, Debug)]
pub struct RemoteGatewayVarz {
    pub name: String,
    pub urls: Vec<String>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

impl GatewayVarz {
    fn of(srv: &ServerShared) -> GatewayVarz {
        let Some(gw) = &srv.gateway else {
            return GatewayVarz::default();
        };
        let o = &gw.opts;
        GatewayVarz {
            name: gw.name.clone(),
            host: o.host.clone(),
            port: gw.listen_addr.get().map_or(o.port, |a| a.port()),
            auth_timeout: o.auth_timeout.as_secs_f64(),
            tls_timeout: o.tls.as_ref().map_or(2.0, |t| t.timeout.as_secs_f64()),
            advertise: o.advertise.clone().unwrap_or_default(),
            connect_retries: o.connect_retries,
            gateways: o
                .gateways
                .iter()
                .map(|r| RemoteGatewayVarz {
                    name: r.name.clone(),
                    urls: r.urls.iter().map(|u| url_host(u)).collect(),
                })
                .collect(),
            reject_unknown: o.reject_unknown,
        }
    }
}

#[derive(Serialize)]
pub struct Varz {
    pub server_id: String,
    pub server_name: String,
    pub version: String,
    pub proto: u32,
    pub go: String,
    pub host: String,
    pub port: u16,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub auth_required: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls_required: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tls_verify: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub connect_urls: Vec<String>,
    pub max_connections: usize,
    pub ping_interval: u128,
    pub ping_max: u32,
    pub http_host: String,
    pub http_port: u16,
    pub http_base_path: String,
    pub https_port: u16,
    #[serde(serialize_with = "go_float")]
    pub auth_timeout: f64,
    pub max_control_line: usize,
    pub max_payload: usize,
    pub max_pending: usize,
    pub cluster: ClusterVarz,
    pub gateway: GatewayVarz,
    /// `{}`, or the leafnode listener's `host`, `port`, `auth_timeout`, `tls_timeout`.
    pub leaf: serde_json::Value,
    pub mqtt: Empty,
    pub websocket: Empty,
    pub jetstream: JetStreamVarz,
    #[serde(serialize_with = "go_float")]
    pub tls_timeout: f64,
    pub write_deadline: u128,
    pub start: String,
    pub now: String,
    pub uptime: String,
    pub mem: u64,
    pub cores: usize,
    pub gomaxprocs: usize,
    #[serde(serialize_with = "go_float")]
    pub cpu: f64,
    pub connections: usize,
    pub total_connections: u64,
    pub routes: usize,
    pub remotes: usize,
    pub leafnodes: usize,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    /// Messages and bytes from and to clients only (2.10+; routes and gateways left out).
    pub in_client_msgs: u64,
    pub in_client_bytes: u64,
    pub out_client_msgs: u64,
    pub out_client_bytes: u64,
    pub slow_consumers: u64,
    /// Connections closed as stale (no PONG in time), all kinds (2.10+).
    pub stale_connections: u64,
    /// Times a client publisher waited for a destination's buffer to drain (2.10+).
    pub stalled_clients: u64,
    pub subscriptions: usize,
    pub http_req_stats: BTreeMap<String, u64>,
    pub config_load_time: String,
    /// `server_tags`; nats-server omits the field when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system_account: String,
    pub stale_connection_stats: KindCounts,
    pub slow_consumer_stats: KindCounts,
    /// natsd's own version (not in nats-server's `/varz`).
    pub natsd_version: String,
}

/// A count by connection kind, as 2.10+'s `stale_connection_stats` and `slow_consumer_stats`.
#[derive(Serialize, Clone, Default, Debug)]
pub struct KindCounts {
    pub clients: u64,
    pub routes: u64,
    pub gateways: u64,
    pub leafs: u64,
}

impl KindCounts {
    fn slow(s: &crate::conn::writer::SlowConsumerStats) -> Self {
        KindCounts {
            clients: s.clients.load(Relaxed),
            routes: s.routes.load(Relaxed),
            gateways: s.gateways.load(Relaxed),
            leafs: s.leafs.load(Relaxed),
        }
    }
}

/// Resident set size in bytes, from /proc (0 where unavailable).
pub(crate) fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

impl Varz {
    pub fn of(srv: &ServerShared) -> Varz {
        let live = srv.live_opts();
        let o = &*live;
        let now = SystemTime::now();
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let subscriptions = srv.accounts.all().iter().map(|a| a.sublist.count()).sum();
        let http = srv.http_addr.get();
        let host_of = http.or(srv.https_addr.get());
        Varz {
            server_id: srv.id.clone(),
            server_name: srv.name.clone(),
            version: COMPAT_VERSION.into(),
            proto: 1,
            go: "go1.19.8".into(),
            host: o.host.clone(),
            port: srv.client_addr.get().map(|a| a.port()).unwrap_or(o.port),
            auth_required: srv.auth.required(),
            // As nats-server: with `allow_non_tls` TLS is available, not required.
            tls_required: o.tls.is_some() && !o.allow_non_tls,
            tls_verify: o.tls.as_ref().is_some_and(|t| t.verify),
            connect_urls: srv.connect_urls(),
            max_connections: o.max_connections,
            ping_interval: o.ping_interval.as_nanos(),
            ping_max: o.ping_max,
            http_host: host_of.map(|a| a.ip().to_string()).unwrap_or_default(),
            http_port: http.map(|a| a.port()).unwrap_or(0),
            http_base_path: o.http_base_path.clone().unwrap_or_default(),
            https_port: srv.https_addr.get().map_or(0, |a| a.port()),
            auth_timeout: o.auth_timeout.as_secs_f64(),
            max_control_line: o.max_control_line,
            max_payload: o.max_payload,
            max_pending: o.max_pending,
            cluster: ClusterVarz::of(srv),
            gateway: GatewayVarz::of(srv),
            leaf: srv
                .leafnodes
                .as_ref()
                .map_or_else(|| serde_json::json!({}), |l| l.varz()),
            mqtt: Empty {},
            websocket: Empty {},
            jetstream: match srv.jetstream.get() {
                Some(js) => JetStreamVarz::Enabled(crate::jetstream::monitor::varz(js)),
                None => JetStreamVarz::Disabled(Empty {}),
            },
            tls_timeout: o.tls.as_ref().map_or(2.0, |t| t.timeout.as_secs_f64()),
            write_deadline: o.write_deadline.as_nanos(),
            start: rfc3339_nano(srv.start),
            now: rfc3339_nano(now),
            uptime: uptime(now.duration_since(srv.start).unwrap_or_default()),
            mem: rss_bytes(),
            cores,
            gomaxprocs: cores,
            cpu: 0.0,
            connections: srv.num_clients(),
            total_connections: srv.stats.total_connections.load(Relaxed),
            routes: srv.cluster.as_ref().map_or(0, |c| c.num_routes()),
            remotes: 0,
            leafnodes: srv.leafnodes.as_ref().map_or(0, |l| l.links().len()),
            in_msgs: srv.stats.in_msgs.load(Relaxed),
            out_msgs: srv.stats.out_msgs.load(Relaxed),
            in_bytes: srv.stats.in_bytes.load(Relaxed),
            out_bytes: srv.stats.out_bytes.load(Relaxed),
            in_client_msgs: srv.stats.in_client_msgs.load(Relaxed),
            in_client_bytes: srv.stats.in_client_bytes.load(Relaxed),
            out_client_msgs: srv.stats.out_client_msgs.load(Relaxed),
            out_client_bytes: srv.stats.out_client_bytes.load(Relaxed),
            slow_consumers: srv.stats.slow.total.load(Relaxed),
            slow_consumer_stats: KindCounts::slow(&srv.stats.slow),
            stale_connections: srv.stats.stale_clients.load(Relaxed),
            stalled_clients: srv.stats.stalled_clients.load(Relaxed),
            subscriptions,
            http_req_stats: srv
                .http_req_stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            config_load_time: rfc3339_nano(srv.start),
            tags: o.server_tags.clone(),
            system_account: srv.system_account_name().into(),
            // Routes and gateways close stale connections in their own modules, uncounted.
            stale_connection_stats: KindCounts {
                clients: srv.stats.stale_clients.load(Relaxed),
                ..Default::default()
            },
            natsd_version: NATSD_VERSION.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_urls_as_go_url_host() {
        assert_eq!(url_host("nats-route://u:p@10.0.0.1:6222/"), "10.0.0.1:6222");
        assert_eq!(url_host("nats://[::1]:7000"), "[::1]:7000");
        assert_eq!(url_host("nats://seed"), "seed");
        assert_eq!(url_host("seed:6222"), "seed:6222");
    }

    #[test]
    fn cluster_object_omits_empty_fields() {
        let v = serde_json::to_value(ClusterVarz::default()).unwrap();
        assert_eq!(v, serde_json::json!({}));
        let v = serde_json::to_string(&ClusterVarz {
            name: "C1".into(),
            host: "127.0.0.1".into(),
            port: 6222,
            auth_timeout: 2.0,
            urls: vec![],
            tls_timeout: 2.0,
            pool_size: 3,
        })
        .unwrap();
        assert_eq!(
            v,
            r#"{"name":"C1","addr":"127.0.0.1","cluster_port":6222,"auth_timeout":2,"tls_timeout":2,"pool_size":3}"#
        );
    }
}
