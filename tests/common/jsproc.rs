//! Clustered JetStream across natsd processes: their configuration, start, a request with
//! a deadline, and publishing with `Nats-Msg-Id` until acknowledged.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::binary::{write_conf, Proc};
use super::cutlink::Link;
use serde_json::Value;

pub const WAIT: Duration = Duration::from_secs(30);

/// Node `i` of a cluster: client port `client`, monitoring port `http`, route ports `routes`.
pub fn conf(dir: &Path, i: usize, client: u16, http: u16, routes: &[u16]) -> String {
    let peers: Vec<u16> = routes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, p)| *p)
        .collect();
    conf_with(dir, i, client, http, routes[i], &peers, "")
}

/// Node `i` listening for routes on `route`, dialing `peers`; `cluster_extra` goes into
/// its `cluster {}` block.
pub fn conf_with(
    dir: &Path,
    i: usize,
    client: u16,
    http: u16,
    route: u16,
    peers: &[u16],
    cluster_extra: &str,
) -> String {
    let peers: Vec<String> = peers
        .iter()
        .map(|p| format!("\"nats-route://127.0.0.1:{p}\""))
        .collect();
    let debug = if std::env::var_os("NATSD_TEST_DEBUG").is_some() {
        "debug: true\n"
    } else {
        ""
    };
    format!(
        "{debug}server_name: n{i}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{http}\n\
         lame_duck_duration: \"4s\"\nlame_duck_grace_period: \"1s\"\n\
         jetstream {{ store_dir: \"{}\" }}\n\
         cluster {{ name: C1, listen: 127.0.0.1:{route}, routes: [{}]\n{cluster_extra} }}\n",
        dir.join(format!("n{i}")).display(),
        peers.join(", ")
    )
}

/// How many of each node's last log lines a failing test shows.
const LOG_TAIL: usize = 400;

pub fn start(p: &Path) -> Proc {
    let p = p.to_string_lossy().to_string();
    Proc::ready(&["-c", &p], Stdio::null(), "Server is ready")
}

pub async fn request(nc: &async_nats::Client, subject: &str, body: String) -> Option<Value> {
    let r = tokio::time::timeout(
        Duration::from_secs(2),
        nc.request(subject.to_string(), body.into()),
    )
    .await;
    let m = r.ok()?.ok()?;
    serde_json::from_slice(&m.payload).ok()
}

/// Creates the R3 stream `EV` on `ev.>` with `storage` (retrying while the cluster forms);
/// the creation's answer.
pub async fn create_ev(nc: &async_nats::Client, storage: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    let body =
        format!(r#"{{"name":"EV","subjects":["ev.>"],"num_replicas":3,"storage":"{storage}"}}"#);
    loop {
        let r = request(nc, "$JS.API.STREAM.CREATE.EV", body.clone()).await;
        if let Some(v) = r.clone().filter(|v| v["config"]["name"] == "EV") {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "no stream: {r:?}");
    }
}

/// Publishes message `i` (id `m<i>`) until it is acknowledged; its sequence.
pub async fn publish_acked(nc: &async_nats::Client, i: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("m{i}").as_str());
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            nc.request_with_headers(format!("ev.{i}"), h, format!("{i}").into()),
        )
        .await;
        if let Ok(Ok(m)) = r {
            if let Ok(v) = serde_json::from_slice::<Value>(&m.payload) {
                if let Some(seq) = v["seq"].as_u64().filter(|s| *s > 0) {
                    return seq;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "message {i} never acknowledged"
        );
    }
}

/// Three natsd processes in one JetStream cluster, and a client that may use any of them.
pub struct Nodes {
    pub dir: std::path::PathBuf,
    pub confs: Vec<std::path::PathBuf>,
    pub procs: Vec<Option<Proc>>,
    pub clients: Vec<u16>,
    pub http: Vec<u16>,
    /// With [`three_linked`]: node i's routes to node j go through `links[(i, j)]`.
    pub links: std::collections::HashMap<(usize, usize), Link>,
}

impl Nodes {
    /// Cuts node `k` off from the others (every route link from or to it), or heals it.
    pub fn isolate(&self, k: usize, cut: bool) {
        for ((i, j), l) in &self.links {
            if *i == k || *j == k {
                if cut {
                    l.cut();
                } else {
                    l.heal();
                }
            }
        }
    }
}

/// Starts [`Nodes`] under a fresh directory named after `name`; a client of all three.
pub async fn three(name: &str) -> (Nodes, async_nats::Client) {
    start_three(name, false).await
}

/// [`three`] with every route through a [`Link`] the test can cut: each node dials each
/// other one through its own link and advertises an address nobody listens on, so that no
/// route can form around a cut link.
pub async fn three_linked(name: &str) -> (Nodes, async_nats::Client) {
    start_three(name, true).await
}

async fn start_three(name: &str, linked: bool) -> (Nodes, async_nats::Client) {
    let dir = super::js_dir(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let clients: Vec<u16> = (0..3).map(|_| super::free_port()).collect();
    let routes: Vec<u16> = (0..3).map(|_| super::free_port()).collect();
    let http: Vec<u16> = (0..3).map(|_| super::free_port()).collect();
    let mut links = std::collections::HashMap::new();
    if linked {
        for i in 0..3 {
            for j in (0..3).filter(|j| *j != i) {
                links.insert((i, j), Link::start(routes[j]).await);
            }
        }
    }
    let confs: Vec<_> = (0..3)
        .map(|i| {
            let body = if linked {
                let peers: Vec<u16> = (0..3)
                    .filter(|j| *j != i)
                    .map(|j| links[&(i, j)].port)
                    .collect();
                let nowhere = super::free_port();
                let extra = format!("advertise: \"127.0.0.1:{nowhere}\"");
                conf_with(&dir, i, clients[i], http[i], routes[i], &peers, &extra)
            } else {
                conf(&dir, i, clients[i], http[i], &routes)
            };
            write_conf(&dir, &format!("n{i}.conf"), &body)
        })
        .collect();
    let procs = confs.iter().map(|c| Some(start(c))).collect();
    let urls: Vec<async_nats::ServerAddr> = clients
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}").parse().expect("url"))
        .collect();
    let nc = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(urls)
        .await
        .expect("connect");
    let nodes = Nodes {
        dir,
        confs,
        procs,
        clients,
        http,
        links,
    };
    (nodes, nc)
}

impl Drop for Nodes {
    /// A failing test shows the last lines each live node logged (with `NATSD_TEST_DEBUG`
    /// set, its debug log: the nodes run with `debug: true`).
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (i, p) in self.procs.iter_mut().enumerate() {
                let Some(p) = p else { continue };
                while let Ok(l) = p.lines.try_recv() {
                    p.seen.push(l);
                }
                let from = p.seen.len().saturating_sub(LOG_TAIL);
                eprintln!("--- n{i}: last {} log lines", p.seen.len() - from);
                for l in &p.seen[from..] {
                    eprintln!("n{i} {l}");
                }
            }
        }
        self.procs.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The subject stored at `seq` in `stream` (MSG.GET), `Null` when none answers.
pub async fn subject_at(nc: &async_nats::Client, stream: &str, seq: u64) -> Value {
    let m = request(
        nc,
        &format!("$JS.API.STREAM.MSG.GET.{stream}"),
        format!(r#"{{"seq":{seq}}}"#),
    )
    .await
    .unwrap_or_default();
    m["message"]["subject"].clone()
}

/// Each node's own copy of `stream` (`/jsz`): messages, bytes, first and last sequence;
/// `None` for a node that does not answer or has no copy.
pub async fn copies(http: &[u16], stream: &str) -> Vec<Option<(u64, u64, u64, u64)>> {
    let mut out = Vec::new();
    for port in http {
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let ok = tokio::net::TcpStream::connect(addr).await.is_ok();
        let v: Value = if ok {
            let (_, body) = super::http_get(addr, "/jsz?accounts=true&streams=true").await;
            serde_json::from_str(&body).unwrap_or_default()
        } else {
            Value::Null
        };
        let st = v["account_details"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default())
            .find(|s| s["name"] == stream);
        out.push(st.map(|s| {
            let q = |k: &str| s["state"][k].as_u64().unwrap_or(0);
            (q("messages"), q("bytes"), q("first_seq"), q("last_seq"))
        }));
    }
    out
}
