//! `/metrics`: the server's counters in Prometheus' text exposition format (0.0.4), so no
//! separate exporter is needed. Names and meanings: `docs/metrics.md`. Reads the same state as
//! `/varz`, `/routez`, `/gatewayz` and `/topz`; nothing on the message path.

use crate::config::{COMPAT_VERSION, NATSD_VERSION};
use crate::server::ServerShared;
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{SystemTime, UNIX_EPOCH};

/// The Content-Type Prometheus expects for the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Counter,
    Gauge,
}

/// Writes metric families: HELP and TYPE once per family, then its samples.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family (every family gets HELP and TYPE, even with no samples).
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&format_value(value));
        self.out.push('\n');
    }

    /// A family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// HELP text: backslash and newline escaped.
fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Label values: backslash, double quote and newline escaped.
fn escape_label(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)` spirit: whole numbers without a fraction,
/// `NaN`, `+Inf`, `-Inf` as the format spells them.
fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The whole `/metrics` body.
pub fn render(srv: &std::sync::Arc<ServerShared>) -> String {
    use Kind::{Counter, Gauge};
    let mut e = Exposition::default();
    let now = SystemTime::now();
    let cluster = srv.cluster.as_ref().map(|c| c.name()).unwrap_or_default();

    e.family(
        "natsd_info",
        Gauge,
        "Server identity: always 1, the facts are in the labels.",
    );
    e.sample(
        "natsd_info",
        &[
            ("server_id", &srv.id),
            ("server_name", &srv.name),
            ("version", COMPAT_VERSION),
            ("natsd_version", NATSD_VERSION),
            ("cluster", &cluster),
        ],
        1.0,
    );

    let start = srv
        .start
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    e.single(
        "natsd_start_time_seconds",
        Gauge,
        "Start time of the server since the Unix epoch, in seconds.",
        start,
    );
    e.single(
        "natsd_uptime_seconds",
        Gauge,
        "Seconds since the server started.",
        now.duration_since(srv.start)
            .unwrap_or_default()
            .as_secs_f64(),
    );
    e.single(
        "natsd_resident_memory_bytes",
        Gauge,
        "Resident set size of the server process, in bytes (0 where /proc is unavailable).",
        super::varz::rss_bytes() as f64,
    );

    let st = &srv.stats;
    e.single(
        "natsd_connections",
        Gauge,
        "Client connections currently open.",
        srv.num_clients() as f64,
    );
    e.single(
        "natsd_connections_total",
        Counter,
        "Client connections accepted since the server started.",
        st.total_connections.load(Relaxed) as f64,
    );
    let subs: usize = srv.accounts.all().iter().map(|a| a.sublist.count()).sum();
    e.single(
        "natsd_subscriptions",
        Gauge,
        "Subscriptions in every account's interest graph, including interest learned from routes.",
        subs as f64,
    );
    e.single(
        "natsd_in_msgs_total",
        Counter,
        "Messages received from clients and routes.",
        st.in_msgs.load(Relaxed) as f64,
    );
    e.single(
        "natsd_out_msgs_total",
        Counter,
        "Messages sent to clients and routes.",
        st.out_msgs.load(Relaxed) as f64,
    );
    e.single(
        "natsd_in_bytes_total",
        Counter,
        "Payload bytes received from clients and routes.",
        st.in_bytes.load(Relaxed) as f64,
    );
    e.single(
        "natsd_out_bytes_total",
        Counter,
        "Payload bytes sent to clients and routes.",
        st.out_bytes.load(Relaxed) as f64,
    );
    e.single(
        "natsd_slow_consumers_total",
        Counter,
        "Slow-consumer events (pending output past max_pending, or a write past write_deadline).",
        st.slow.total.load(Relaxed) as f64,
    );
    e.family(
        "natsd_slow_consumers_by_kind_total",
        Counter,
        "Slow-consumer events by connection kind (client, route, gateway, leaf).",
    );
    for (kind, n) in [
        ("client", &st.slow.clients),
        ("route", &st.slow.routes),
        ("gateway", &st.slow.gateways),
        ("leaf", &st.slow.leafs),
    ] {
        e.sample(
            "natsd_slow_consumers_by_kind_total",
            &[("kind", kind)],
            n.load(Relaxed) as f64,
        );
    }

    let routes = srv.cluster.as_ref().map(|c| c.routes()).unwrap_or_default();
    e.single(
        "natsd_routes",
        Gauge,
        "Route connections currently registered (every pool slot and pinned account).",
        routes.len() as f64,
    );
    type RouteValue = fn(&crate::cluster::RouteEntry) -> Option<f64>;
    let per_route: [(&str, Kind, &str, RouteValue); 7] = [
        (
            "natsd_route_in_msgs_total",
            Counter,
            "Messages received over this route.",
            |r| Some(r.conn.counters.in_msgs.load(Relaxed) as f64),
        ),
        (
            "natsd_route_out_msgs_total",
            Counter,
            "Messages sent over this route.",
            |r| Some(r.conn.counters.out_msgs.load(Relaxed) as f64),
        ),
        (
            "natsd_route_in_bytes_total",
            Counter,
            "Payload bytes received over this route.",
            |r| Some(r.conn.counters.in_bytes.load(Relaxed) as f64),
        ),
        (
            "natsd_route_out_bytes_total",
            Counter,
            "Payload bytes sent over this route.",
            |r| Some(r.conn.counters.out_bytes.load(Relaxed) as f64),
        ),
        (
            "natsd_route_rtt_seconds",
            Gauge,
            "Latest PING/PONG round trip on this route, in seconds (absent until measured).",
            |r| r.conn.meta().rtt.map(|d| d.as_secs_f64()),
        ),
        (
            "natsd_route_subscriptions",
            Gauge,
            "Subscriptions learned from this route.",
            |r| Some(r.num_subs.load(Relaxed) as f64),
        ),
        (
            "natsd_route_pending_bytes",
            Gauge,
            "Bytes queued for this route and not yet written.",
            |r| Some(r.conn.out.pending() as f64),
        ),
    ];
    for (name, kind, help, value) in per_route {
        e.family(name, kind, help);
        for r in &routes {
            if let Some(v) = value(r) {
                // A pooled peer has several connections: its pool slot, or its pinned account.
                let idx = r.pool_idx.load(Relaxed).to_string();
                e.sample(
                    name,
                    &[
                        ("remote_id", &r.remote_id),
                        ("remote_name", &r.remote_name),
                        ("pool_idx", &idx),
                        ("account", r.account.as_deref().unwrap_or_default()),
                    ],
                    v,
                );
            }
        }
    }

    // Gateways: connections by direction, and traffic per gateway connection.
    let (outbound, inbound) = srv
        .gateway
        .as_ref()
        .map(|g| (g.outbounds(), g.inbounds()))
        .unwrap_or_default();
    e.family(
        "natsd_gateway_connections",
        Gauge,
        "Gateway connections currently registered, by direction.",
    );
    if srv.gateway.is_some() {
        e.sample(
            "natsd_gateway_connections",
            &[("direction", "outbound")],
            outbound.len() as f64,
        );
        e.sample(
            "natsd_gateway_connections",
            &[("direction", "inbound")],
            inbound.len() as f64,
        );
    }
    // (remote cluster, direction, remote server id, connection)
    let gw_conns: Vec<(&str, &str, &str, &crate::conn::Conn)> = outbound
        .iter()
        .map(|o| (o.name.as_str(), "outbound", o.remote_id.as_str(), &*o.conn))
        .chain(
            inbound
                .iter()
                .map(|i| (i.name.as_str(), "inbound", i.remote_id.as_str(), &*i.conn)),
        )
        .collect();
    type GwValue = fn(&crate::conn::Conn) -> f64;
    let per_gateway: [(&str, &str, GwValue); 4] = [
        (
            "natsd_gateway_in_msgs_total",
            "Messages received over this gateway connection.",
            |c| c.counters.in_msgs.load(Relaxed) as f64,
        ),
        (
            "natsd_gateway_out_msgs_total",
            "Messages sent over this gateway connection.",
            |c| c.counters.out_msgs.load(Relaxed) as f64,
        ),
        (
            "natsd_gateway_in_bytes_total",
            "Payload bytes received over this gateway connection.",
            |c| c.counters.in_bytes.load(Relaxed) as f64,
        ),
        (
            "natsd_gateway_out_bytes_total",
            "Payload bytes sent over this gateway connection.",
            |c| c.counters.out_bytes.load(Relaxed) as f64,
        ),
    ];
    for (name, help, value) in per_gateway {
        e.family(name, Counter, help);
        for (gateway, direction, remote_id, conn) in &gw_conns {
            e.sample(
                name,
                &[
                    ("gateway", gateway),
                    ("direction", direction),
                    ("remote_id", remote_id),
                ],
                value(conn),
            );
        }
    }

    // The last cluster-wide gather (refreshed in the background; never waits).
    let complete = crate::sys::topz::mesh_complete(srv);
    e.single(
        "natsd_cluster_mesh_complete",
        Gauge,
        "1 when /topz finds no missing route and a single partition, else 0.",
        if complete { 1.0 } else { 0.0 },
    );

    let reqs = srv
        .http_req_stats
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    e.family(
        "natsd_http_requests_total",
        Counter,
        "Monitoring requests served, by endpoint (as /varz's http_req_stats).",
    );
    for (path, n) in &reqs {
        e.sample("natsd_http_requests_total", &[("path", path)], *n as f64);
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_as_prometheus_spells_them() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.000125), "0.000125");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(1e20), "100000000000000000000");
    }

    #[test]
    fn families_and_escaped_labels() {
        let mut e = Exposition::default();
        e.family("x_total", Kind::Counter, "a\\b\nc");
        e.sample("x_total", &[("a", "q\"\\\n"), ("b", "")], 2.5);
        e.single("y", Kind::Gauge, "y", 1.0);
        assert_eq!(
            e.finish(),
            "# HELP x_total a\\\\b\\nc\n# TYPE x_total counter\n\
             x_total{a=\"q\\\"\\\\\\n\",b=\"\"} 2.5\n\
             # HELP y y\n# TYPE y gauge\ny 1\n"
        );
    }
}
