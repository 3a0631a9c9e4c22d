//! Clustered JetStream across natsd processes: their configuration, start, a request with
//! a deadline, and publishing with `Nats-Msg-Id` until acknowledged.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::binary::{write_conf, Proc};
use serde_json::Value;

pub const WAIT: Duration = Duration::from_secs(30);

/// Node `i` of a cluster: client port `client`, monitoring port `http`, route ports `routes`.
pub fn conf(dir: &Path, i: usize, client: u16, http: u16, routes: &[u16]) -> String {
    let peers: Vec<String> = routes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, p)| format!("\"nats-route://127.0.0.1:{p}\""))
        .collect();
    format!(
        "server_name: n{i}\nlisten: 127.0.0.1:{client}\nhttp: 127.0.0.1:{http}\n\
         lame_duck_duration: \"4s\"\nlame_duck_grace_period: \"1s\"\n\
         jetstream {{ store_dir: \"{}\" }}\n\
         cluster {{ name: C1, listen: 127.0.0.1:{}, routes: [{}] }}\n",
        dir.join(format!("n{i}")).display(),
        routes[i],
        peers.join(", ")
    )
}

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
}

/// Starts [`Nodes`] under a fresh directory named after `name`; a client of all three.
pub async fn three(name: &str) -> (Nodes, async_nats::Client) {
    let dir = super::js_dir(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let clients: Vec<u16> = (0..3).map(|_| super::free_port()).collect();
    let routes: Vec<u16> = (0..3).map(|_| super::free_port()).collect();
    let http: Vec<u16> = (0..3).map(|_| super::free_port()).collect();
    let confs: Vec<_> = (0..3)
        .map(|i| {
            write_conf(
                &dir,
                &format!("n{i}.conf"),
                &conf(&dir, i, clients[i], http[i], &routes),
            )
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
    };
    (nodes, nc)
}

impl Drop for Nodes {
    fn drop(&mut self) {
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
