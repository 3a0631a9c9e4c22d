//! JetStream benchmark: natsd against nats-server side by side, through async-nats.
//!
//! ```text
//! cargo run --release --example js_bench -- \
//!     --server target/release/natsd --server /usr/sbin/nats-server --rounds 3
//! ```
//!
//! For every round, scenario and server it starts a fresh server (`PATH -a 127.0.0.1 -p <free
//! port> -js -sd <fresh temp dir>`), creates stream `B` (subjects `b.>`, file or memory
//! storage), runs the scenario and kills the server (and removes the directory). The server
//! order alternates between rounds (A B, B A, …). Per scenario it prints the median msgs/s over
//! rounds and each server's ratio to the first one.
//!
//! Scenarios (`--scenario` repeatable or comma-separated; all by default), each for file and
//! memory storage:
//! * `pub16_async`, `pub1k_async`: publish with up to 256 acks outstanding, for `--duration`.
//! * `pub16_sync`, `pub1k_sync`: publish and await each ack before the next.
//! * `pull16`: 100 000 messages of 16 B stored first, then a durable pull consumer
//!   (explicit ack) fetches batches of 500 and acks every message; msgs/s of the consume.
//!
//! * `raw_…`: the same five through a lean blocking client (`raw.rs`, the protocol by hand on
//!   one socket), so that the client library does not dominate the figure.
//!
//! `--replicas 3` runs each server as a cluster of three processes on loopback (`server_name`,
//! `cluster { name, routes }`, `jetstream { store_dir }` in a config file each) with stream
//! `B` created with `num_replicas: 3` (retried for up to 60 s while the cluster forms); the
//! clients connect to the first node, and the CPU figures add up the three processes.
//! `--leader local` (or `remote`) steps the stream's leader down until it is (or is not) that
//! first node, the same for every server, so that rounds compare like with like.
//!
//! Every wait is bounded (a run fails with an error, never hangs).

mod raw;

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures::StreamExt;
use std::collections::VecDeque;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

const WINDOW: usize = 256;
const PULL_MSGS: u64 = 100_000;
const PULL_BATCH: usize = 500;
const T: Duration = Duration::from_secs(10);

/// The running server's process ids (for [`server_cpu`]).
static SERVER_PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// `--replicas`: 1 (one server) or the size of the cluster each server runs as.
static REPLICAS: AtomicUsize = AtomicUsize::new(1);
/// `--leader`: where stream `B`'s leader is put before a clustered run (see [`Leader`]).
static LEADER: AtomicUsize = AtomicUsize::new(Leader::Any as usize);

/// Where a clustered run wants stream `B`'s leader: the servers place it as they like, so
/// without this a run measures the client's node as leader in about one round of three and
/// as a follower in the others (a synchronous publish takes four hops in the first case,
/// six in the second).
#[derive(Clone, Copy, PartialEq)]
enum Leader {
    /// Wherever the cluster elected it.
    Any = 0,
    /// On the client's node (`b0`).
    Local = 1,
    /// On another node.
    Remote = 2,
}

/// CPU seconds (user + system) the running server (all its processes) has used so far, from
/// /proc (0 where that cannot be read). Insensitive to how busy the rest of the machine is,
/// unlike msgs/s.
fn server_cpu() -> f64 {
    let pids = SERVER_PIDS.lock().map(|p| p.clone()).unwrap_or_default();
    pids.into_iter().map(proc_cpu).sum()
}

fn proc_cpu(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) end with ')'.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

struct Server {
    children: Vec<Child>,
    /// The (first) node's client port.
    port: u16,
    dir: PathBuf,
}

fn free_port() -> Res<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("free port: {e}"))?
        .port())
}

impl Server {
    fn start(path: &str, n: usize) -> Res<Server> {
        let replicas = REPLICAS.load(Relaxed);
        let dir = std::env::temp_dir().join(format!("natsd-jsbench-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let sd = dir.to_str().ok_or("non-utf-8 temp dir")?.to_string();
        let ports: Vec<u16> = (0..replicas).map(|_| free_port()).collect::<Res<_>>()?;
        let routes: Vec<u16> = (0..replicas).map(|_| free_port()).collect::<Res<_>>()?;
        let mut s = Server {
            children: Vec::new(),
            port: ports[0],
            dir,
        };
        for (i, port) in ports.iter().enumerate() {
            let mut cmd = Command::new(path);
            if replicas == 1 {
                cmd.args([
                    "-a",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                    "-js",
                    "-sd",
                    &sd,
                ]);
            } else {
                let peers: Vec<String> = (0..replicas)
                    .filter(|j| *j != i)
                    .map(|j| format!("\"nats-route://127.0.0.1:{}\"", routes[j]))
                    .collect();
                let conf = format!(
                    "server_name: b{i}\nlisten: 127.0.0.1:{port}\n\
                     jetstream {{ store_dir: \"{sd}/b{i}\" }}\n\
                     cluster {{ name: B, listen: 127.0.0.1:{}, routes: [{}] }}\n",
                    routes[i],
                    peers.join(", ")
                );
                let file = s.dir.join(format!("b{i}.conf"));
                std::fs::write(&file, conf).map_err(|e| format!("{}: {e}", file.display()))?;
                cmd.arg("-c").arg(&file);
            }
            let child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {path}: {e}"))?;
            s.children.push(child);
        }
        let end = Instant::now() + T;
        for (i, port) in ports.iter().enumerate() {
            let addr = SocketAddr::from(([127, 0, 0, 1], *port));
            loop {
                if let Ok(Some(st)) = s.children[i].try_wait() {
                    return Err(format!("{path} exited during start-up: {st}"));
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if Instant::now() > end {
                    return Err(format!("{path} did not accept connections"));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(s)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[derive(Clone)]
enum Kind {
    PubAsync(usize),
    PubSync(usize),
    Pull(usize),
    /// Streams, durables and ephemerals created one after another (API latency).
    Create,
    /// 200 streams with a durable each, then the servers left idle (the cost of holding
    /// them: heartbeats, timers).
    Idle,
    Raw(Box<Kind>),
}

struct Scenario {
    name: String,
    kind: Kind,
    storage: stream::StorageType,
}

fn scenarios() -> Vec<Scenario> {
    let mut v = Vec::new();
    for (sname, storage) in [
        ("file", stream::StorageType::File),
        ("mem", stream::StorageType::Memory),
    ] {
        for (n, kind) in [
            ("pub16_async", Kind::PubAsync(16)),
            ("pub1k_async", Kind::PubAsync(1024)),
            ("pub16_sync", Kind::PubSync(16)),
            ("pub1k_sync", Kind::PubSync(1024)),
            ("pull16", Kind::Pull(16)),
        ] {
            v.push(Scenario {
                name: format!("{n}_{sname}"),
                kind: kind.clone(),
                storage,
            });
            v.push(Scenario {
                name: format!("raw_{n}_{sname}"),
                kind: Kind::Raw(Box::new(kind)),
                storage,
            });
        }
        v.push(Scenario {
            name: format!("create_{sname}"),
            kind: Kind::Create,
            storage,
        });
        v.push(Scenario {
            name: format!("idle_{sname}"),
            kind: Kind::Idle,
            storage,
        });
    }
    v
}

async fn setup(
    srv: &Server,
    storage: stream::StorageType,
) -> Res<(async_nats::Client, jetstream::Context)> {
    let nc = async_nats::connect(format!("127.0.0.1:{}", srv.port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let js = jetstream::new(nc.clone());
    // A cluster answers once its meta group has formed (a request before may get no answer
    // at all: async-nats gives up on it after 5 s).
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let r = js
            .create_stream(stream::Config {
                name: "B".into(),
                subjects: vec!["b.>".into()],
                storage,
                num_replicas: REPLICAS.load(Relaxed),
                ..Default::default()
            })
            .await;
        match r {
            Ok(_) => {
                place_leader(&nc, &js).await?;
                return Ok((nc, js));
            }
            Err(e) if Instant::now() > end => return Err(format!("create stream: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Steps stream `B`'s leader down until it sits where `--leader` asks (bounded: 30 s).
async fn place_leader(nc: &async_nats::Client, js: &jetstream::Context) -> Res<()> {
    let want = match LEADER.load(Relaxed) {
        1 => Leader::Local,
        2 => Leader::Remote,
        _ => Leader::Any,
    };
    if want == Leader::Any || REPLICAS.load(Relaxed) < 2 {
        return Ok(());
    }
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if Instant::now() > end {
            return Err("could not place the stream's leader".into());
        }
        let leader = match js.get_stream("B").await {
            Ok(mut s) => s
                .info()
                .await
                .ok()
                .and_then(|i| i.cluster.clone())
                .and_then(|c| c.leader),
            Err(_) => None,
        };
        let Some(leader) = leader else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if (leader == "b0") == (want == Leader::Local) {
            return Ok(());
        }
        let _ = tokio::time::timeout(
            T,
            nc.request("$JS.API.STREAM.LEADER.STEPDOWN.B", Bytes::new()),
        )
        .await;
        // Until the new leader is elected, the info names none (or the old one).
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Publish with up to `window` acks outstanding until `dur` passed or `max` were sent;
/// returns (acked, seconds).
async fn publish(
    js: &jetstream::Context,
    size: usize,
    window: usize,
    dur: Duration,
    max: u64,
) -> Res<(u64, f64, f64)> {
    let payload = Bytes::from(vec![b'x'; size]);
    let mut pending = VecDeque::with_capacity(window);
    let t0 = Instant::now();
    let c0 = server_cpu();
    let mut sent = 0u64;
    let mut acked = 0u64;
    loop {
        let more = sent < max && t0.elapsed() < dur;
        if more && pending.len() < window {
            let f = js
                .publish("b.x", payload.clone())
                .await
                .map_err(|e| format!("publish: {e}"))?;
            pending.push_back(f);
            sent += 1;
            continue;
        }
        let Some(f) = pending.pop_front() else { break };
        tokio::time::timeout(T, f)
            .await
            .map_err(|_| "ack timed out".to_string())?
            .map_err(|e| format!("ack: {e}"))?;
        acked += 1;
    }
    Ok((acked, t0.elapsed().as_secs_f64(), server_cpu() - c0))
}

/// For `dur`: a stream, a durable pull consumer of it and an ephemeral one, each awaited
/// before the next (a client creating KV buckets or ordered consumers waits the same way);
/// returns (creations, seconds, server CPU).
async fn create(
    js: &jetstream::Context,
    storage: stream::StorageType,
    dur: Duration,
) -> Res<(u64, f64, f64)> {
    create_until(js, storage, |t0, _| t0.elapsed() < dur, true).await
}

/// Streams and durables created while `more(start, made)` says so (and ephemerals when
/// `ephemerals`); returns (creations, seconds, server CPU).
async fn create_until(
    js: &jetstream::Context,
    storage: stream::StorageType,
    more: impl Fn(Instant, u64) -> bool,
    ephemerals: bool,
) -> Res<(u64, f64, f64)> {
    let t0 = Instant::now();
    let c0 = server_cpu();
    let mut made = 0u64;
    while more(t0, made) {
        let s = js
            .create_stream(stream::Config {
                name: format!("C{made}"),
                subjects: vec![format!("c{made}.>")],
                storage,
                num_replicas: REPLICAS.load(Relaxed),
                ..Default::default()
            })
            .await
            .map_err(|e| format!("create stream: {e}"))?;
        s.create_consumer(consumer::pull::Config {
            durable_name: Some("D".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("durable: {e}"))?;
        made += 2;
        if ephemerals {
            s.create_consumer(consumer::pull::Config {
                ack_policy: consumer::AckPolicy::None,
                inactive_threshold: Duration::from_secs(60),
                ..Default::default()
            })
            .await
            .map_err(|e| format!("ephemeral: {e}"))?;
            made += 1;
        }
    }
    Ok((made, t0.elapsed().as_secs_f64(), server_cpu() - c0))
}

/// 200 streams with a durable each, 3 s to settle, then the servers' CPU over `dur` doing
/// nothing; returns (creations per second, server CPU µs per idle second).
async fn idle(
    js: &jetstream::Context,
    storage: stream::StorageType,
    dur: Duration,
) -> Res<(f64, f64)> {
    let (made, secs, _) = create_until(js, storage, |_, made| made < 400, false).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let c0 = server_cpu();
    tokio::time::sleep(dur).await;
    Ok((
        made as f64 / secs,
        (server_cpu() - c0) * 1e6 / dur.as_secs_f64(),
    ))
}

async fn pull(js: &jetstream::Context, size: usize) -> Res<(u64, f64, f64)> {
    publish(js, size, WINDOW, Duration::from_secs(120), PULL_MSGS).await?;
    let s = js
        .get_stream("B")
        .await
        .map_err(|e| format!("stream: {e}"))?;
    let c: consumer::PullConsumer = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("P".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    let t0 = Instant::now();
    let c0 = server_cpu();
    let mut got = 0u64;
    while got < PULL_MSGS {
        let mut b = c
            .fetch()
            .max_messages(PULL_BATCH)
            .expires(T)
            .messages()
            .await
            .map_err(|e| format!("fetch: {e}"))?;
        let before = got;
        while let Some(m) = tokio::time::timeout(T, b.next())
            .await
            .map_err(|_| "fetch stalled".to_string())?
        {
            let m = m.map_err(|e| format!("message: {e}"))?;
            m.ack().await.map_err(|e| format!("ack: {e}"))?;
            got += 1;
        }
        if got == before {
            return Err(format!("fetch returned nothing at {got}"));
        }
    }
    Ok((got, t0.elapsed().as_secs_f64(), server_cpu() - c0))
}

/// One run: (msgs/s, server CPU µs per message).
async fn run(path: &str, sc: &Scenario, dur: Duration, n: usize) -> Res<(f64, f64)> {
    let srv = Server::start(path, n)?;
    if let Ok(mut p) = SERVER_PIDS.lock() {
        *p = srv.children.iter().map(Child::id).collect();
    }
    if let Kind::Raw(k) = &sc.kind {
        if REPLICAS.load(Relaxed) > 1 {
            // The stream first through async-nats, which retries while the cluster forms
            // (the raw client's answers would arrive late and out of turn); the raw create
            // below then finds it as it is.
            drop(setup(&srv, sc.storage).await?);
        }
        let (k, port) = ((**k).clone(), srv.port);
        let storage = match sc.storage {
            stream::StorageType::File => "file",
            stream::StorageType::Memory => "memory",
        };
        let (msgs, secs, cpu) = tokio::task::spawn_blocking(move || -> Res<(u64, f64, f64)> {
            let mut c = raw::Raw::connect(port)?;
            raw::create_stream(&mut c, storage, REPLICAS.load(Relaxed))?;
            match k {
                Kind::PubAsync(size) => raw::publish(&mut c, size, WINDOW, dur, u64::MAX),
                Kind::PubSync(size) => raw::publish(&mut c, size, 1, dur, u64::MAX),
                Kind::Pull(size) => raw::pull(&mut c, size, PULL_MSGS, PULL_BATCH),
                Kind::Create | Kind::Idle | Kind::Raw(_) => Err("not a raw scenario".into()),
            }
        })
        .await
        .map_err(|e| format!("raw client: {e}"))??;
        drop(srv);
        return Ok((msgs as f64 / secs, cpu * 1e6 / msgs as f64));
    }
    let (nc, js) = setup(&srv, sc.storage).await?;
    let (msgs, secs, cpu) = match sc.kind {
        Kind::PubAsync(size) => publish(&js, size, WINDOW, dur, u64::MAX).await?,
        Kind::PubSync(size) => publish(&js, size, 1, dur, u64::MAX).await?,
        Kind::Pull(size) => pull(&js, size).await?,
        Kind::Create => create(&js, sc.storage, dur).await?,
        Kind::Idle => {
            let r = idle(&js, sc.storage, dur).await;
            drop(nc);
            drop(srv);
            return r;
        }
        Kind::Raw(_) => return Err("raw scenarios are run above".into()),
    };
    drop(nc);
    drop(srv);
    Ok((msgs as f64 / secs, cpu * 1e6 / msgs as f64))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[tokio::main]
async fn main() {
    let mut servers: Vec<String> = Vec::new();
    let mut rounds = 3usize;
    let mut dur = Duration::from_secs(3);
    let mut only: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--server" => servers.push(v),
            "--rounds" => rounds = v.parse().unwrap_or(3),
            "--duration" => dur = Duration::from_secs_f64(v.parse().unwrap_or(3.0)),
            "--scenario" => only.extend(v.split(',').map(str::to_string)),
            "--replicas" => REPLICAS.store(v.parse().unwrap_or(1).max(1), Relaxed),
            "--leader" if v == "local" => LEADER.store(Leader::Local as usize, Relaxed),
            "--leader" if v == "remote" => LEADER.store(Leader::Remote as usize, Relaxed),
            "--leader" if v == "any" => LEADER.store(Leader::Any as usize, Relaxed),
            _ => {
                eprintln!("usage: js_bench --server PATH [--server PATH] [--rounds N] [--duration SECS] [--scenario NAME] [--replicas N] [--leader any|local|remote]");
                std::process::exit(2);
            }
        }
    }
    if servers.is_empty() {
        eprintln!("at least one --server");
        std::process::exit(2);
    }
    let scs: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|o| s.name.starts_with(o.as_str())))
        .collect();
    let mut n = 0;
    println!(
        "{:<20} {}",
        "scenario",
        servers
            .iter()
            .map(|s| format!("{:>16}", short(s)))
            .collect::<String>()
            + "   ratios to first"
    );
    for sc in &scs {
        let mut res: Vec<Vec<f64>> = vec![Vec::new(); servers.len()];
        let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); servers.len()];
        for r in 0..rounds {
            let mut order: Vec<usize> = (0..servers.len()).collect();
            if r % 2 == 1 {
                order.reverse();
            }
            for i in order {
                n += 1;
                match run(&servers[i], sc, dur, n).await {
                    Ok((x, c)) => {
                        res[i].push(x);
                        cpu[i].push(c);
                    }
                    Err(e) => eprintln!("ERROR {} {}: {e}", sc.name, servers[i]),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let meds: Vec<f64> = res.iter_mut().map(|v| median(v)).collect();
        let mut line = format!("{:<20}", sc.name);
        for m in &meds {
            line.push_str(&format!(" {:>15.0}", m));
        }
        line.push_str("  ");
        for m in &meds {
            line.push_str(&format!(" {:.2}x", m / meds[0]));
        }
        for (i, v) in res.iter().enumerate() {
            line.push_str(&format!("  [{}: {}]", i, fmt_runs(v)));
        }
        println!("{line}");
        // The server's CPU per message: lower is better; unlike msgs/s it hardly depends
        // on what else the machine is doing.
        let cmeds: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
        let mut line = format!("{:<20}", "  cpu µs/msg");
        for m in &cmeds {
            line.push_str(&format!(" {:>15.2}", m));
        }
        line.push_str("  ");
        for m in &cmeds {
            line.push_str(&format!(" {:.2}x", m / cmeds[0]));
        }
        println!("{line}");
    }
}

fn short(p: &str) -> String {
    p.rsplit('/').next().unwrap_or(p).to_string()
}

fn fmt_runs(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}
