//! Overload figures, server binaries side by side (docs/benchmarks.md, *Overload*):
//!
//! * `stuck`: 1 publisher, 4 subscribers that read and (second run) 1 that never reads; the
//!   time until the 4 readers got every message, without and with the stuck one.
//! * `storm`: N clients connecting at once (connect, INFO, CONNECT + PING, PONG); the time
//!   until the last one has its PONG.
//!
//! Each run starts the server afresh (`PATH -a 127.0.0.1 -p PORT`) and reports its peak RSS
//! (`VmHWM`). The clients of a storm are spread over child processes of at most 5,000 each
//! (this program again, `--storm-child ADDR N`: they connect at the same moment), so the
//! client side needs no raised `ulimit -n`; the server needs one descriptor per client.
//!
//! ```sh
//! cargo build --release --bin natsd --example overload_bench
//! ulimit -n 65536; target/release/examples/overload_bench \
//!     --server target/release/natsd --server /tmp/natsd-py-venv/bin/nats-server \
//!     --clients 2000,20000 --rounds 3
//! ```

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const PAYLOAD: usize = 512;
const CONNECT: &str = "CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\n";

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(path: &str) -> Res<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(path)
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            if Instant::now() > end {
                return Err(format!("{path} did not listen").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server { child, addr })
    }

    /// Peak resident set size in MiB.
    fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Connect, INFO, CONNECT + `extra` + PING, PONG.
async fn client(addr: SocketAddr, extra: &str) -> Res<BufReader<TcpStream>> {
    let s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).await?;
    if !line.starts_with("INFO") {
        return Err(format!("expected INFO, got {line:?}").into());
    }
    r.get_mut()
        .write_all(format!("{CONNECT}{extra}PING\r\n").as_bytes())
        .await?;
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Err("closed before PONG".into());
        }
        if line == "PONG\r\n" {
            return Ok(r);
        }
    }
}

/// Seconds until 4 readers got `n` messages, with or without a stuck subscriber; peak RSS.
async fn stuck_run(path: &str, n: usize, stuck: bool) -> Res<(f64, f64)> {
    let srv = Server::start(path)?;
    let _stuck = if stuck {
        Some(client(srv.addr, "SUB s 9\r\n").await?)
    } else {
        None
    };
    let frame = format!("MSG s 1 {PAYLOAD}\r\n").len() + PAYLOAD + 2;
    let mut readers = Vec::new();
    for sid in 1..=4 {
        let mut r = client(srv.addr, &format!("SUB s {sid}\r\n")).await?;
        readers.push(tokio::spawn(async move {
            let want = frame * n;
            let mut got = r.buffer().len();
            let mut buf = vec![0u8; 256 * 1024];
            while got < want {
                let k = r.get_mut().read(&mut buf).await?;
                if k == 0 {
                    return Err::<(), std::io::Error>(std::io::ErrorKind::UnexpectedEof.into());
                }
                got += k;
            }
            Ok(())
        }));
    }
    let mut p = client(srv.addr, "").await?;
    let one = format!("PUB s {PAYLOAD}\r\n{}\r\n", "x".repeat(PAYLOAD));
    let batch = one.repeat(200);
    let start = Instant::now();
    for _ in 0..n / 200 {
        p.get_mut().write_all(batch.as_bytes()).await?;
    }
    for r in readers {
        tokio::time::timeout(Duration::from_secs(120), r).await???;
    }
    Ok((start.elapsed().as_secs_f64(), srv.peak_rss_mib()))
}

/// Clients per child process of a storm.
const PER_CHILD: usize = 5000;

/// Seconds until `n` clients connecting at once all have their PONG; peak RSS.
async fn storm_run(path: &str, n: usize) -> Res<(f64, f64)> {
    use std::io::{BufRead, Write};
    let srv = Server::start(path)?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(PER_CHILD);
        left -= k;
        let mut c = Command::new(&exe)
            .args(["--storm-child", &srv.addr.to_string(), &k.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let out = std::io::BufReader::new(c.stdout.take().ok_or("stdout")?);
        children.push((c, out));
    }
    // Each child prints "ready" when its runtime is up, then connects on a "go" line.
    let mut line = String::new();
    for (_, out) in &mut children {
        line.clear();
        out.read_line(&mut line)?;
    }
    let start = Instant::now();
    for (c, _) in &mut children {
        c.stdin.as_mut().ok_or("stdin")?.write_all(b"go\n")?;
    }
    for (_, out) in &mut children {
        line.clear();
        out.read_line(&mut line)?;
        if line.trim() != "done" {
            return Err(format!("a storm child failed: {line:?}").into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let rss = srv.peak_rss_mib();
    for (mut c, _) in children {
        drop(c.stdin.take());
        let _ = c.wait();
    }
    Ok((secs, rss))
}

/// A storm child: `n` clients of `addr` connect on "go"; "done" once all have their PONG,
/// then they stay connected until stdin closes.
async fn storm_child(addr: SocketAddr, n: usize) -> Res<()> {
    let read_line = || {
        tokio::task::spawn_blocking(|| {
            let mut l = String::new();
            std::io::stdin().read_line(&mut l).map(|_| l)
        })
    };
    println!("ready");
    read_line().await??;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        tasks.spawn(async move { client(addr, "").await });
    }
    let mut conns = Vec::with_capacity(n);
    while let Some(r) = tasks.join_next().await {
        match r? {
            Ok(c) => conns.push(c),
            Err(e) => {
                println!("error: {e}");
                return Ok(());
            }
        }
    }
    println!("done");
    let _ = read_line().await;
    Ok(())
}

fn median(mut v: Vec<(f64, f64)>) -> (f64, f64) {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let rss = v.iter().map(|x| x.1).fold(0.0, f64::max);
    (v[v.len() / 2].0, rss)
}

#[tokio::main]
async fn main() -> Res<()> {
    let mut servers = Vec::new();
    let mut clients = vec![2000usize];
    let mut rounds = 3;
    let mut msgs = 200_000usize;
    let mut scenarios = vec!["stuck".to_string(), "storm".to_string()];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--storm-child" {
            let addr = args.next().ok_or("addr")?.parse()?;
            let n = args.next().ok_or("count")?.parse()?;
            return storm_child(addr, n).await;
        }
        let v = args.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--server" => servers.push(v),
            "--clients" => clients = v.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--rounds" => rounds = v.parse()?,
            "--msgs" => msgs = v.parse()?,
            "--scenario" => scenarios = v.split(',').map(String::from).collect(),
            _ => return Err(format!("unknown option {a}").into()),
        }
    }
    if servers.is_empty() {
        return Err("give at least one --server".into());
    }
    for sc in &scenarios {
        for path in &servers {
            match sc.as_str() {
                "stuck" => {
                    for stuck in [false, true] {
                        let mut v = Vec::new();
                        for _ in 0..rounds {
                            v.push(stuck_run(path, msgs, stuck).await?);
                        }
                        let (s, rss) = median(v);
                        println!(
                            "stuck {path} msgs={msgs} stuck_subscriber={stuck}: {s:.3} s, peak RSS {rss:.0} MiB"
                        );
                    }
                }
                "storm" => {
                    for &n in &clients {
                        let mut v = Vec::new();
                        for _ in 0..rounds {
                            v.push(storm_run(path, n).await?);
                        }
                        let (s, rss) = median(v);
                        println!("storm {path} clients={n}: {s:.3} s, peak RSS {rss:.0} MiB");
                    }
                }
                _ => return Err(format!("unknown scenario {sc}").into()),
            }
        }
    }
    Ok(())
}
