//! `/metrics` (Prometheus text format) on a 2-node natsd cluster, checked by a strict parser of
//! the 0.0.4 text format; and `http_base_path`, served the way nats-server 2.9.10 serves it
//! (compared with the real one on the same config file).

mod common;

use common::cluster::{self, route_port};
use common::http_addr as http;
use common::natsserver;
use common::{http_get, http_json, start, wait_for, Raw, DEADLINE};
use natsd::config::{file, ClusterOpts};
use natsd::{Options, Server};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn node_opts(name: &str, seed: Option<u16>) -> Options {
    Options {
        http_port: Some(0),
        cluster: Some(ClusterOpts {
            // Route PINGs often, so the RTT is measured within the test.
            ping_interval: Some(Duration::from_millis(100)),
            ..cluster::cluster_opts(seed)
        }),
        ..cluster::node_opts(name, seed)
    }
}

/// GET returning (status, headers lower-cased, body), de-chunking the body if needed.
async fn get_with_headers(addr: SocketAddr, path: &str) -> (u16, HashMap<String, String>, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut resp = Vec::new();
    tokio::time::timeout(DEADLINE, s.read_to_end(&mut resp))
        .await
        .expect("timeout")
        .expect("read");
    let text = String::from_utf8_lossy(&resp).into_owned();
    let (head, raw) = text.split_once("\r\n\r\n").expect("header end");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status");
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = if headers.get("transfer-encoding").map(String::as_str) == Some("chunked") {
        let mut out = String::new();
        let mut rest = raw;
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).expect("chunk size");
            if n == 0 {
                break;
            }
            out.push_str(&tail[..n]);
            rest = tail[n..].strip_prefix("\r\n").expect("chunk end");
        }
        out
    } else {
        raw.to_string()
    };
    (status, headers, body)
}

/// One sample: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: samples and each family's TYPE.
#[derive(Debug, Default)]
struct Parsed {
    samples: Vec<Sample>,
    types: HashMap<String, String>,
}

impl Parsed {
    fn get(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }

    fn one(&self, name: &str) -> f64 {
        let v = self.get(name);
        assert_eq!(v.len(), 1, "{name}: {v:?}");
        v[0].value
    }

    /// The sum over a peer's route connections (its pool), `None` when it has no sample.
    fn route(&self, name: &str, remote_id: &str) -> Option<f64> {
        let v: Vec<f64> = self
            .get(name)
            .into_iter()
            .filter(|s| s.labels.get("remote_id").map(String::as_str) == Some(remote_id))
            .map(|s| s.value)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    }
}

fn valid_name(s: &str, colon: bool) -> bool {
    let mut cs = s.chars();
    let first_ok = |c: char| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':');
    matches!(cs.next(), Some(c) if first_ok(c))
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
}

/// A strict reader of the text format 0.0.4: every line is a HELP, a TYPE, another comment,
/// blank, or `name{label="value",…} value [timestamp]`; every sample's family has HELP and TYPE
/// before its first sample; a family's samples are contiguous; no sample is repeated.
fn parse(text: &str) -> Parsed {
    let mut p = Parsed::default();
    let mut help: HashSet<String> = HashSet::new();
    let mut done: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut seen: HashSet<String> = HashSet::new();
    assert!(text.ends_with('\n'), "exposition must end with a newline");
    for (n, line) in text.lines().enumerate() {
        let ctx = || format!("line {}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("HELP"), Some(name), _) => {
                    assert!(valid_name(name, true), "{}", ctx());
                    assert!(help.insert(name.to_string()), "second HELP: {}", ctx());
                }
                (Some("TYPE"), Some(name), Some(t)) => {
                    assert!(valid_name(name, true), "{}", ctx());
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                        "{}",
                        ctx()
                    );
                    assert!(
                        p.types.insert(name.to_string(), t.to_string()).is_none(),
                        "second TYPE: {}",
                        ctx()
                    );
                    assert!(!done.contains(name), "TYPE after samples: {}", ctx());
                }
                _ => {}
            }
            continue;
        }
        assert!(!line.starts_with('#'), "{}", ctx());
        // name
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("{}", ctx()));
        let name = &line[..name_end];
        assert!(valid_name(name, true), "bad name: {}", ctx());
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut r = r;
            loop {
                if let Some(after) = r.strip_prefix('}') {
                    r = after;
                    break;
                }
                let eq = r.find('=').unwrap_or_else(|| panic!("{}", ctx()));
                let lname = &r[..eq];
                assert!(valid_name(lname, false), "bad label name: {}", ctx());
                r = r[eq + 1..]
                    .strip_prefix('"')
                    .unwrap_or_else(|| panic!("unquoted label value: {}", ctx()));
                let mut val = String::new();
                let mut chars = r.char_indices();
                let end = loop {
                    match chars.next() {
                        Some((_, '\\')) => match chars.next() {
                            Some((_, '\\')) => val.push('\\'),
                            Some((_, '"')) => val.push('"'),
                            Some((_, 'n')) => val.push('\n'),
                            _ => panic!("bad escape: {}", ctx()),
                        },
                        Some((i, '"')) => break i,
                        Some((_, c)) => val.push(c),
                        None => panic!("unterminated label value: {}", ctx()),
                    }
                };
                assert!(
                    labels.insert(lname.to_string(), val).is_none(),
                    "repeated label: {}",
                    ctx()
                );
                r = &r[end + 1..];
                if let Some(after) = r.strip_prefix(',') {
                    r = after;
                }
            }
            rest = r;
        }
        let rest = rest
            .strip_prefix(' ')
            .unwrap_or_else(|| panic!("no space before value: {}", ctx()));
        let mut fields = rest.split(' ');
        let v = fields.next().unwrap_or_else(|| panic!("{}", ctx()));
        let value: f64 = match v {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("bad value: {}", ctx())),
        };
        if let Some(ts) = fields.next() {
            ts.parse::<i64>()
                .unwrap_or_else(|_| panic!("bad timestamp: {}", ctx()));
        }
        assert!(fields.next().is_none(), "trailing fields: {}", ctx());
        // Family bookkeeping: (no histograms or summaries here, so family == name).
        assert!(help.contains(name), "no HELP for {name}");
        assert!(p.types.contains_key(name), "no TYPE for {name}");
        if current.as_deref() != Some(name) {
            assert!(
                !done.contains(name),
                "samples of {name} not contiguous: {}",
                ctx()
            );
            if let Some(c) = current.take() {
                done.insert(c);
            }
            current = Some(name.to_string());
        }
        assert!(
            seen.insert(format!("{name}{labels:?}")),
            "duplicate sample: {}",
            ctx()
        );
        p.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    for (name, t) in &p.types {
        assert!(help.contains(name), "TYPE without HELP: {name}");
        if t == "counter" {
            assert!(name.ends_with("_total"), "counter {name} lacks _total");
        }
    }
    p
}

async fn metrics(s: &Server) -> Parsed {
    let (status, headers, body) = get_with_headers(http(s), "/metrics").await;
    assert_eq!(status, 200, "{body}");
    let ct = headers.get("content-type").cloned().unwrap_or_default();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    parse(&body)
}

#[tokio::test]
async fn metrics_on_a_two_node_cluster() {
    // Without the $SYS services: the route counters below count exactly the test's traffic
    // (no cluster-wide /topz gathers), and the mesh is this server's view (tests/topz.rs
    // covers the gathered one).
    let no_sys = |o: Options| Options {
        no_system_account: true,
        ..o
    };
    let a = start(no_sys(node_opts("a", None))).await;
    let b = start(no_sys(node_opts("b", Some(route_port(&a))))).await;
    let (ida, idb) = (a.shared().id.clone(), b.shared().id.clone());
    let has_route = |s: &Server| s.shared().cluster.as_ref().map_or(0, |c| c.num_routes()) == 3;
    wait_for("route a-b", || async { has_route(&a) && has_route(&b) }).await;

    let before_a = metrics(&a).await;
    let before_b = metrics(&b).await;

    // Info, route count, mesh completeness.
    let info = before_a.get("natsd_info");
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].value, 1.0);
    assert_eq!(info[0].labels["server_id"], ida);
    assert_eq!(info[0].labels["server_name"], "a");
    assert_eq!(info[0].labels["cluster"], "C1");
    assert_eq!(info[0].labels["version"], "2.9.10");
    assert!(!info[0].labels["natsd_version"].is_empty());
    for m in [&before_a, &before_b] {
        // Pools of 3 (no system account here, so nothing pinned).
        assert_eq!(m.one("natsd_routes"), 3.0);
        assert_eq!(m.one("natsd_cluster_mesh_complete"), 1.0);
        assert!(m.one("natsd_uptime_seconds") >= 0.0);
        assert!(m.one("natsd_start_time_seconds") > 1.6e9);
        assert_eq!(m.types["natsd_in_msgs_total"], "counter");
        assert_eq!(m.types["natsd_connections"], "gauge");
        assert_eq!(m.types["natsd_route_rtt_seconds"], "gauge");
    }
    #[cfg(target_os = "linux")]
    assert!(before_a.one("natsd_resident_memory_bytes") > 0.0);

    // Traffic: a subscriber on b, a publisher on a; the messages cross the route a→b.
    let mut sub = Raw::client(&b).await;
    sub.send("SUB foo 1\r\n").await;
    sub.flush().await;
    let mut publ = Raw::client(&a).await;
    wait_for("interest on a", || async {
        let m = metrics(&a).await;
        m.route("natsd_route_subscriptions", &idb) == Some(1.0)
    })
    .await;
    for _ in 0..10 {
        publ.send("PUB foo 5\r\nhello\r\n").await;
    }
    publ.flush().await;
    for _ in 0..10 {
        let (subject, _, _, payload) = sub.msg().await;
        assert_eq!(
            (subject.as_str(), payload.as_slice()),
            ("foo", &b"hello"[..])
        );
    }

    // RTT measured on both sides (route PINGs every 100 ms).
    wait_for("route rtt", || async {
        metrics(&a)
            .await
            .route("natsd_route_rtt_seconds", &idb)
            .is_some()
            && metrics(&b)
                .await
                .route("natsd_route_rtt_seconds", &ida)
                .is_some()
    })
    .await;

    let after_a = metrics(&a).await;
    let after_b = metrics(&b).await;
    for (before, after) in [(&before_a, &after_a), (&before_b, &after_b)] {
        for c in [
            "natsd_in_msgs_total",
            "natsd_out_msgs_total",
            "natsd_in_bytes_total",
            "natsd_out_bytes_total",
        ] {
            assert!(
                after.one(c) >= before.one(c) + 10.0,
                "{c}: {} then {}",
                before.one(c),
                after.one(c)
            );
        }
        assert!(after.one("natsd_connections_total") >= 1.0);
        assert_eq!(after.one("natsd_connections"), 1.0);
        assert_eq!(after.one("natsd_slow_consumers_total"), 0.0);
        assert_eq!(after.one("natsd_cluster_mesh_complete"), 1.0);
    }
    // Per route, labelled with the peer.
    let r = |m: &Parsed, name: &str, peer: &str| {
        m.route(name, peer)
            .unwrap_or_else(|| panic!("{name} for {peer} missing"))
    };
    assert_eq!(r(&after_a, "natsd_route_out_msgs_total", &idb), 10.0);
    assert_eq!(r(&after_a, "natsd_route_out_bytes_total", &idb), 50.0);
    assert_eq!(r(&after_b, "natsd_route_in_msgs_total", &ida), 10.0);
    assert_eq!(r(&after_b, "natsd_route_in_bytes_total", &ida), 50.0);
    assert_eq!(r(&after_a, "natsd_route_in_msgs_total", &idb), 0.0);
    assert!(r(&after_a, "natsd_route_rtt_seconds", &idb) > 0.0);
    assert!(r(&after_b, "natsd_route_rtt_seconds", &ida) > 0.0);
    assert!(r(&after_b, "natsd_route_pending_bytes", &ida) >= 0.0);
    // One sample per route connection: the pool of 3 to b, slots 0-2.
    let mut names: Vec<(&str, &str)> = after_a
        .get("natsd_route_in_msgs_total")
        .iter()
        .map(|s| {
            (
                s.labels["remote_name"].as_str(),
                s.labels["pool_idx"].as_str(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(names, vec![("b", "0"), ("b", "1"), ("b", "2")]);
    assert_eq!(after_a.one("natsd_subscriptions"), 1.0);
    // The monitor counts its own requests.
    assert!(after_a
        .get("natsd_http_requests_total")
        .iter()
        .any(|s| s.labels["path"] == "/metrics" && s.value >= 2.0));

    // When b goes, a reports no routes (and a single-node mesh is complete).
    b.shutdown().await;
    wait_for("route gone", || async {
        metrics(&a).await.one("natsd_routes") == 0.0
    })
    .await;
    let m = metrics(&a).await;
    assert!(m.get("natsd_route_in_msgs_total").is_empty());
    assert_eq!(m.one("natsd_cluster_mesh_complete"), 1.0);
    a.shutdown().await;
}

#[tokio::test]
async fn metrics_without_cluster() {
    let s = start(Options {
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let m = metrics(&s).await;
    assert_eq!(m.one("natsd_routes"), 0.0);
    assert_eq!(m.get("natsd_info")[0].labels["cluster"], "");
    assert_eq!(m.one("natsd_cluster_mesh_complete"), 1.0);
    s.shutdown().await;
}

/// Every listener on a random port (`-1`; natsd reads it as nats-server does).
fn conf(base: &str) -> String {
    format!("host: 127.0.0.1\nport: -1\nhttp: \"127.0.0.1:-1\"\nhttp_base_path: \"{base}\"\n")
}

/// What each path answers with `http_base_path: /nats` (nats-server 2.9.10's observed answers).
const BASE_PATH_CASES: &[(&str, u16)] = &[
    ("/nats/varz", 200),
    ("/nats/healthz", 200),
    ("/nats/connz", 200),
    ("/nats", 200),
    ("/varz", 404),
    ("/", 404),
    ("/nats/", 404),
    ("/nats/varz/", 404),
    ("/natsvarz", 404),
];

#[tokio::test]
async fn http_base_path_prefixes_every_endpoint() {
    let o = file::load_str(&conf("/nats"))
        .expect("config loads")
        .options;
    assert_eq!(o.http_base_path.as_deref(), Some("/nats"));
    let s = start(o).await;
    let addr = http(&s);
    for (path, want) in BASE_PATH_CASES {
        let (status, body) = http_get(addr, path).await;
        assert_eq!(status, *want, "GET {path}: {body}");
    }
    for p in [
        "metrics", "routez", "subsz", "accountz", "accstatz", "leafz", "gatewayz", "jsz", "topz",
    ] {
        let (status, body) = http_get(addr, &format!("/nats/{p}")).await;
        assert_eq!(status, 200, "GET /nats/{p}: {body}");
        assert_eq!(http_get(addr, &format!("/{p}")).await.0, 404, "/{p}");
    }
    let (_, index) = http_get(addr, "/nats").await;
    // nats-server writes `./nats/varz`: the same URL relative to `/nats`.
    assert!(index.contains("href=\"nats/varz\""), "{index}");
    let v = http_json(addr, "/nats/varz").await;
    assert_eq!(v["http_base_path"], "/nats");
    // Requests are counted by endpoint, without the prefix (as nats-server does).
    assert!(v["http_req_stats"]["/varz"].as_u64() >= Some(1));
    let (_, _, body) = get_with_headers(addr, "/nats/metrics").await;
    parse(&body);
    s.shutdown().await;

    // A base path written without the leading slash, or with a trailing one, means the same.
    for base in ["nats", "/nats/"] {
        let s = start(file::load_str(&conf(base)).expect("loads").options).await;
        assert_eq!(http_get(http(&s), "/nats/varz").await.0, 200, "{base}");
        assert_eq!(http_get(http(&s), "/varz").await.0, 404, "{base}");
        s.shutdown().await;
    }
}

/// The same config file given to nats-server 2.9.10: the same status for every case.
#[tokio::test]
async fn http_base_path_as_nats_server() {
    natsserver::assert_installed();
    let dir = std::env::temp_dir().join(format!("natsd-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("base.conf");
    std::fs::write(&path, conf("/nats")).expect("write conf");
    let child = natsserver::with_config(&path, natsserver::Wait::READY);
    let go = child.http;
    let ours = start(file::load_str(&conf("/nats")).expect("loads").options).await;
    let mut diffs = Vec::new();
    for (p, _) in BASE_PATH_CASES {
        let (theirs, mine) = (http_get(go, p).await.0, http_get(http(&ours), p).await.0);
        if theirs != mine {
            diffs.push(format!("{p}: nats-server {theirs}, natsd {mine}"));
        }
    }
    let theirs = http_json(go, "/nats/varz").await;
    let mine = http_json(http(&ours), "/nats/varz").await;
    assert_eq!(theirs["http_base_path"], mine["http_base_path"]);
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
    ours.shutdown().await;
    assert!(diffs.is_empty(), "{diffs:#?}");
}
