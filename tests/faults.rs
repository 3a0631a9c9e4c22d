//! Faults and overload, as users meet them: a subscriber that never reads next to healthy
//! ones, slow-consumer accounting. Every test is bounded in time (deadlines, no sleeps).

mod common;

use common::*;
use natsd::Options;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

const PAYLOAD: usize = 512;

/// A subscriber on `subject` that never reads, with a tiny receive buffer so the server's
/// pending bytes for it grow almost at once.
async fn stuck_subscriber(srv: &natsd::Server, subject: &str) -> Raw {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let stream = sock.connect(srv.client_addr()).await.expect("connect");
    let mut r = Raw {
        stream,
        buf: Vec::new(),
    };
    let info = r.line().await;
    assert!(info.starts_with("INFO "), "{info}");
    r.send(&format!(
        "CONNECT {CLIENT_CONNECT}\r\nSUB {subject} 9\r\nPING\r\n"
    ))
    .await;
    r.expect("PONG").await;
    r
}

/// A healthy subscriber: counts the bytes of `n` messages of `subject` (sid one digit),
/// returns when all arrived or `until` passed (false).
async fn healthy_subscriber(srv: &natsd::Server, subject: &str, sid: u8) -> Raw {
    let mut r = Raw::client(srv).await;
    r.send(&format!("SUB {subject} {sid}\r\n")).await;
    r.flush().await;
    r
}

async fn receive_all(mut r: Raw, subject: &str, n: usize, until: Instant) -> bool {
    // "MSG <subject> <sid> 512\r\n" + payload + "\r\n", sid one digit.
    let frame = format!("MSG {subject} 1 {PAYLOAD}\r\n").len() + PAYLOAD + 2;
    let want = frame * n;
    let mut got = r.buf.len();
    let mut tmp = vec![0u8; 256 * 1024];
    let mut stream: TcpStream = r.stream;
    while got < want {
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut tmp)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return false,
            Ok(Ok(k)) => got += k,
        }
    }
    r.buf.clear();
    true
}

/// Publish `n` messages of `PAYLOAD` bytes to `subject`, then PING/PONG.
async fn publish(p: &mut Raw, subject: &str, n: usize) {
    let frame = format!("PUB {subject} {PAYLOAD}\r\n{}\r\n", "x".repeat(PAYLOAD));
    let batch = frame.repeat(100);
    for _ in 0..n / 100 {
        p.send(&batch).await;
    }
    p.flush().await;
}

async fn varz(srv: &natsd::Server) -> serde_json::Value {
    http_json(http_addr(srv), "/varz").await
}

/// 1 publisher, 4 subscribers that read and 1 that never does: the healthy ones get every
/// message long before the stuck one's write deadline (the default 10 s) could cut it — a
/// destination whose buffer fills never holds the publisher back. On main before this test
/// the publisher waited for the stuck one until its write deadline closed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_subscriber_does_not_stall_healthy_ones() {
    let srv = start(Options {
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let n = 60_000; // 30 MB: far past what the kernel buffers of the stuck client absorb.
    let _stuck = stuck_subscriber(&srv, "flood").await;
    let mut healthy = Vec::new();
    for sid in 1..=4 {
        healthy.push(healthy_subscriber(&srv, "flood", sid).await);
    }
    let start = Instant::now();
    // Bounded by the write deadline: that is when the stuck client would be cut.
    let until = start + srv_write_deadline();
    let readers: Vec<_> = healthy
        .into_iter()
        .map(|r| tokio::spawn(receive_all(r, "flood", n, until)))
        .collect();
    let mut p = Raw::client(&srv).await;
    publish(&mut p, "flood", n).await;
    for r in readers {
        assert!(
            r.await.expect("reader"),
            "a healthy subscriber did not get all {n} messages before the stuck one's write deadline"
        );
    }
    // The stuck client is still there (nothing cut it yet): the healthy ones did not wait for it.
    let v = varz(&srv).await;
    assert_eq!(v["slow_consumers"], 0, "{v}");
    // The stuck subscriber and the publisher (the healthy readers are done and gone).
    assert_eq!(v["connections"], 2, "{v}");
    srv.shutdown().await;
}

fn srv_write_deadline() -> Duration {
    Options::local().write_deadline
}

/// A client whose write misses the write deadline is a slow consumer: closed with nats-server's
/// reason, and counted in `/varz` `slow_consumers` and `slow_consumer_stats.clients` and in
/// `/metrics`. On main before this test the write-deadline path counted nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_deadline_slow_consumer_is_counted() {
    let srv = start(Options {
        http_port: Some(0),
        write_deadline: Duration::from_millis(500),
        ..Options::local()
    })
    .await;
    let _stuck = stuck_subscriber(&srv, "flood").await;
    let mut p = Raw::client(&srv).await;
    let end = Instant::now() + DEADLINE;
    loop {
        publish(&mut p, "flood", 2_000).await;
        if varz(&srv).await["slow_consumers"] != 0 {
            break;
        }
        assert!(Instant::now() < end, "the stuck client was never cut");
    }
    let v = varz(&srv).await;
    assert_eq!(v["slow_consumers"], 1, "{v}");
    assert_eq!(
        v["slow_consumer_stats"],
        serde_json::json!({"clients": 1, "routes": 0, "gateways": 0, "leafs": 0})
    );
    wait_for("the stuck client in closed connections", || {
        let srv = &srv;
        async move {
            let c = http_json(http_addr(srv), "/connz?state=closed").await;
            c["connections"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|c| c["reason"] == "Slow Consumer (Write Deadline)")
            })
        }
    })
    .await;
    let (_, metrics) = http_get(http_addr(&srv), "/metrics").await;
    assert!(
        metrics.contains("natsd_slow_consumers_by_kind_total{kind=\"client\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("natsd_slow_consumers_total 1\n"),
        "{metrics}"
    );
    // The publisher is unaffected.
    p.send("PING\r\n").await;
    p.expect("PONG").await;
    srv.shutdown().await;
}

/// One client of a storm: connect, INFO, CONNECT + PING, PONG.
async fn storm_client(addr: std::net::SocketAddr) -> std::io::Result<TcpStream> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let s = TcpStream::connect(addr).await?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).await?;
    if !line.starts_with("INFO ") {
        return Err(std::io::Error::other(format!("not INFO: {line}")));
    }
    r.get_mut()
        .write_all(format!("CONNECT {CLIENT_CONNECT}\r\nPING\r\n").as_bytes())
        .await?;
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == "PONG\r\n" {
            return Ok(r.into_inner());
        }
    }
}

/// 2,000 clients connecting at once (a restarted server's clients all reconnecting): every
/// one gets its PONG, and the server counts them all. Bounded by a generous deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_storm_is_absorbed() {
    let srv = start(Options {
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let n = 2000;
    let addr = srv.client_addr();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        tasks.spawn(tokio::time::timeout(
            Duration::from_secs(30),
            storm_client(addr),
        ));
    }
    let mut conns = Vec::new();
    while let Some(r) = tasks.join_next().await {
        match r.expect("task") {
            Ok(Ok(s)) => conns.push(s),
            Ok(Err(e)) => panic!("a client of the storm failed: {e}"),
            Err(_) => panic!("a client of the storm got no PONG within 30 s"),
        }
    }
    assert_eq!(conns.len(), n);
    assert_eq!(
        varz(&srv).await["connections"],
        n,
        "every client is registered"
    );
    drop(conns);
    srv.shutdown().await;
}

/// A connection to the route port that never sends CONNECT is closed after the cluster's own
/// `authorization { timeout }` (here 0.5 s), not after a 2 s floor (main before this test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_route_connection_is_closed_at_the_cluster_auth_timeout() {
    let mut opts = common::cluster::node_opts("a", None);
    if let Some(c) = opts.cluster.as_mut() {
        c.username = Some("r".into());
        c.password = Some("s3cret".into());
        c.auth_timeout = Duration::from_millis(500);
    }
    let srv = start(opts).await;
    let port = common::cluster::route_port(&srv);
    let started = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let mut buf = vec![0u8; 4096];
    // INFO, then nothing until the server closes.
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "never closed");
    // Well under the 2 s the old floor imposed (1 s of slack over the configured 0.5 s).
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "closed after {:?}",
        started.elapsed()
    );
    srv.shutdown().await;
}
