//! Clustered JetStream test helpers: embedded JetStream nodes in one cluster, `$JS.API`
//! requests retried while the cluster forms, each node's copy of a stream, a new leader,
//! acknowledged publishing through a leader change.

use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use natsd::{Options, Server};
use serde_json::Value;

pub const WAIT: Duration = Duration::from_secs(20);

pub fn js_node(dir: &std::path::Path) -> impl Fn(&str, Option<u16>) -> Options + '_ {
    move |name, seed| {
        let mut o = super::cluster::node_opts(name, seed);
        o.http_port = Some(0);
        o.jetstream = Some(natsd::config::JetStreamOpts {
            store_dir: Some(dir.join(name)),
            ..Default::default()
        });
        o
    }
}

pub struct Js {
    pub servers: Vec<Server>,
    pub dir: PathBuf,
}

pub async fn cluster(name: &str, n: usize) -> Js {
    let dir = super::js_dir(name);
    let servers = super::cluster::mesh_with(n, js_node(&dir)).await;
    Js { servers, dir }
}

/// A client of `s`.
pub async fn connect(s: &Server) -> async_nats::Client {
    async_nats::connect(s.client_url()).await.expect("connect")
}

/// STREAM.CREATE of `config` (a JSON stream configuration; its `name` names the request),
/// answered without an error: the `stream_create_response`.
pub async fn create_stream(nc: &async_nats::Client, config: &str) -> Value {
    let cfg: Value = serde_json::from_str(config).expect("a JSON stream configuration");
    let name = cfg["name"].as_str().expect("the stream's name");
    let r = api(nc, &format!("$JS.API.STREAM.CREATE.{name}"), config).await;
    assert!(r["error"].is_null(), "{r}");
    r
}

/// A `$JS.API` request answered within the deadline, retried while the cluster forms
/// (no answer yet, or 503 "temporarily unavailable").
pub async fn api(nc: &async_nats::Client, subject: &str, body: &str) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            nc.request(subject.to_string(), body.to_string().into()),
        )
        .await;
        if let Ok(Ok(m)) = r {
            let v: Value = serde_json::from_slice(&m.payload).expect("JSON answer");
            if v["error"]["err_code"] != 10008 {
                return v;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{subject}: no answer from the cluster"
        );
    }
}

/// A request sent once (a stepdown must not be repeated), answered within the deadline.
pub async fn once(nc: &async_nats::Client, subject: &str) -> Value {
    once_with(nc, subject, "").await
}

/// [`once`] with a body.
pub async fn once_with(nc: &async_nats::Client, subject: &str, body: &str) -> Value {
    let m = tokio::time::timeout(
        WAIT,
        nc.request(subject.to_string(), body.to_string().into()),
    )
    .await
    .unwrap_or_else(|_| panic!("{subject}: no answer"))
    .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&m.payload).expect("JSON answer")
}

/// Every node's engine copy of `stream`: its (messages, last sequence), if it has one.
pub fn copies(js: &Js, stream: &str) -> Vec<Option<(u64, u64)>> {
    copies_in(js, "$G", stream)
}

/// [`copies`] of a stream of `account`.
pub fn copies_in(js: &Js, account: &str, stream: &str) -> Vec<Option<(u64, u64)>> {
    js.servers
        .iter()
        .map(|s| {
            let j = s.shared().jetstream.get()?.clone();
            let e = j.engine();
            let st = e.accounts.get(account)?.streams.get(stream)?;
            let state = st.store.state();
            Some((state.msgs, state.last_seq))
        })
        .collect()
}

/// [`cluster`] with each node's options changed by `tweak(name, options)`.
pub async fn cluster_with(name: &str, n: usize, tweak: impl Fn(&str, &mut Options)) -> Js {
    let dir = super::js_dir(name);
    let servers = {
        let base = js_node(&dir);
        super::cluster::mesh_with(n, |node, seed| {
            let mut o = base(node, seed);
            tweak(node, &mut o);
            o
        })
        .await
    };
    Js { servers, dir }
}

/// Polls STREAM INFO until its `cluster.leader` is another node than `old`; the new one.
pub async fn new_leader(nc: &async_nats::Client, stream: &str, old: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let i = api(nc, &format!("$JS.API.STREAM.INFO.{stream}"), "").await;
        match i["cluster"]["leader"].as_str() {
            Some(l) if l != old => return l.to_string(),
            _ => assert!(tokio::time::Instant::now() < deadline, "no new leader: {i}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Publishes `subject.<seq>` for sequences `from..=to`, each retried until acknowledged
/// (while a new leader is elected), and asserts each ack names the expected sequence: none
/// reused, none skipped.
pub async fn publish_acked(ctx: &jetstream::Context, subject: &str, from: u64, to: u64) {
    publish_acked_then(ctx, subject, from, to, String::new).await
}

/// As [`publish_acked`], but a step that fails panics with [`explain`]'s account of every
/// node's Raft groups in `account` and the meta group.
#[allow(dead_code)]
pub async fn publish_acked_or_explain(
    ctx: &jetstream::Context,
    js: &Js,
    account: &str,
    subject: &str,
    from: u64,
    to: u64,
) {
    publish_acked_then(ctx, subject, from, to, || explain(js, account)).await
}

async fn publish_acked_then(
    ctx: &jetstream::Context,
    subject: &str,
    from: u64,
    to: u64,
    why: impl Fn() -> String,
) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut next = from;
    while next <= to {
        let r = async {
            ctx.publish(format!("{subject}.{next}"), format!("m{next}").into())
                .await
                .ok()?
                .await
                .ok()
        }
        .await;
        match r {
            Some(ack) => {
                assert_eq!(ack.sequence, next, "no sequence reused or skipped");
                next += 1;
            }
            None if tokio::time::Instant::now() < deadline => {}
            None => panic!("no leader takes {next}\n{}", why()),
        }
    }
}

/// Every node's `/raftz` for `account` and the system account (role, term, leader,
/// applied and log indexes of each group), for a failing step to say where it stands.
#[allow(dead_code)]
pub fn explain(js: &Js, account: &str) -> String {
    let mut out = String::new();
    for s in &js.servers {
        let sh = s.shared();
        let cluster = sh.jetstream.get().and_then(|j| j.engine().cluster.clone());
        let Some(c) = cluster else {
            out.push_str(&format!("{}: no clustered JetStream\n", sh.name));
            continue;
        };
        let sys = sh.system_account_name();
        out.push_str(&format!(
            "{}: {}\n{}: {}\n",
            sh.name,
            c.raftz(sys, account, None),
            sh.name,
            c.raftz(sys, sys, None)
        ));
    }
    out
}

/// STREAM.UPDATE of `stream` with its configuration from STREAM INFO and `num_replicas`
/// `n`: the answer.
pub async fn scale_to(nc: &async_nats::Client, stream: &str, n: u64) -> Value {
    let info = api(nc, &format!("$JS.API.STREAM.INFO.{stream}"), "").await;
    let mut cfg = info["config"].clone();
    cfg["num_replicas"] = n.into();
    api(
        nc,
        &format!("$JS.API.STREAM.UPDATE.{stream}"),
        &cfg.to_string(),
    )
    .await
}

/// The index in `js.servers` of the node named `name`.
pub fn node(js: &Js, name: &str) -> usize {
    js.servers
        .iter()
        .position(|s| s.shared().name == name)
        .unwrap_or_else(|| panic!("{name} is not a node"))
}

impl Js {
    pub async fn stop(mut self) {
        for s in self.servers.drain(..) {
            s.shutdown().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A [`cluster_with`] tweak: each node's options from config `text` (accounts, system
/// account), keeping its name, cluster, monitoring port and JetStream store.
pub fn with_conf(text: &'static str) -> impl Fn(&str, &mut Options) {
    move |_, o| {
        let base = o.clone();
        *o = super::conf_opts(text);
        o.server_name = base.server_name;
        o.cluster = base.cluster;
        o.http_port = base.http_port;
        o.jetstream = base.jetstream;
    }
}

/// Snapshots every 16 entries (and at most 16 entries kept behind one), so a follower
/// that misses more than that must be sent the stream's snapshot.
pub const SNAPSHOT_EVERY: u64 = 16;

/// A node's options with stream snapshots every [`SNAPSHOT_EVERY`] entries.
pub fn snapshot_often(_: &str, o: &mut Options) {
    if let Some(j) = o.jetstream.as_mut() {
        j.stream_snapshot_every = Some(SNAPSHOT_EVERY);
    }
}

/// Every file and directory under `dir`.
pub fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            out.extend(walk(&p));
            out.push(p);
        }
    }
    out
}
