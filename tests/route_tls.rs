//! Route TLS (`cluster { tls { … } }`): natsd nodes mesh over TLS with mutual verification,
//! a node without TLS cannot join a TLS cluster, and natsd and nats-server mesh over TLS.

mod common;

use common::cluster::{cluster_opts, node_opts, route_port, routes};
use common::pki::Pki;
use common::{start, wait_for, Raw};
use natsd::config::ClusterOpts;
use natsd::tls::TlsOpts;
use natsd::{Options, Server};
use std::time::Duration;

fn node(name: &str, seed: Option<u16>, tls: Option<TlsOpts>) -> Options {
    Options {
        cluster: Some(ClusterOpts {
            tls,
            ..cluster_opts(seed)
        }),
        ..node_opts(name, seed)
    }
}

async fn cross(from: &Server, to: &Server) {
    let mut sub = Raw::client(to).await;
    sub.send("SUB secure.> 1\r\n").await;
    sub.flush().await;
    let acc = from.shared().accounts.global();
    wait_for("interest over TLS", || {
        let ok = acc.sublist.has_interest(b"secure.x");
        async move { ok }
    })
    .await;
    let mut p = Raw::client(from).await;
    p.send("PUB secure.x 6\r\nsecret\r\n").await;
    let (subj, _, _, payload) = sub.msg().await;
    assert_eq!((subj.as_str(), &payload[..]), ("secure.x", &b"secret"[..]));
}

#[tokio::test]
async fn natsd_nodes_mesh_over_mutual_tls() {
    let pki = Pki::new("mesh");
    let a = start(node("a", None, Some(pki.opts()))).await;
    let b = start(node("b", Some(route_port(&a)), Some(pki.opts()))).await;
    let c = start(node("c", Some(route_port(&a)), Some(pki.opts()))).await;
    wait_for("TLS mesh", || {
        let ok = routes(&a) == 2 && routes(&b) == 2 && routes(&c) == 2;
        async move { ok }
    })
    .await;
    cross(&b, &c).await;
    cross(&c, &a).await;
    for s in [a, b, c] {
        s.shutdown().await;
    }
}

/// Compression inside TLS: the S2 streams travel as TLS application data, every route
/// connection (the pool and the pinned `$SYS` one) negotiates `s2_fast`, traffic crosses.
#[tokio::test]
async fn natsd_nodes_compress_routes_over_tls() {
    let pki = Pki::new("s2tls");
    let compressed = |name: &str, seed: Option<u16>| {
        let mut o = node(name, seed, Some(pki.opts()));
        if let Some(c) = o.cluster.as_mut() {
            c.compression =
                natsd::compress::CompressionOpts::new(natsd::compress::CompressionMode::S2Fast);
        }
        o
    };
    let a = start(compressed("a", None)).await;
    let b = start(compressed("b", Some(route_port(&a)))).await;
    let modes = |s: &Server| -> Vec<&'static str> {
        s.shared()
            .cluster
            .as_ref()
            .map(|c| {
                c.routes()
                    .iter()
                    .map(|r| r.compression().as_str())
                    .collect()
            })
            .unwrap_or_default()
    };
    wait_for("4 compressed TLS routes each way", || {
        let ok = [&a, &b].iter().all(|s| {
            let m = modes(s);
            m.len() == 4 && m.iter().all(|x| *x == "s2_fast")
        });
        async move { ok }
    })
    .await;
    cross(&a, &b).await;
    cross(&b, &a).await;
    for s in [a, b] {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn a_node_without_tls_or_with_a_foreign_ca_cannot_join() {
    let pki = Pki::new("strict");
    let other = Pki::new("foreign");
    let a = start(node("a", None, Some(pki.opts()))).await;
    let plain = start(node("plain", Some(route_port(&a)), None)).await;
    let foreign = start(node("foreign", Some(route_port(&a)), Some(other.opts()))).await;
    let good = start(node("good", Some(route_port(&a)), Some(pki.opts()))).await;
    wait_for("the good node joins", || {
        let ok = routes(&good) == 1;
        async move { ok }
    })
    .await;
    // Configured seeds retry every second: give the others two attempts.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(routes(&plain), 0, "a plain node joined a TLS cluster");
    assert_eq!(routes(&foreign), 0, "a node with another CA joined");
    assert_eq!(routes(&a), 1);
    for s in [a, plain, foreign, good] {
        s.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_and_nats_server_mesh_over_tls() {
    use std::io::{BufRead, BufReader};
    let pki = Pki::new("interop");
    let a = start(node("rust-a", None, Some(pki.opts()))).await;
    let conf = pki.dir.join("go.conf");
    std::fs::write(
        &conf,
        format!(
            "cluster {{\n  name: C1\n  listen: \"127.0.0.1:-1\"\n  routes: [\"nats-route://127.0.0.1:{}\"]\n  tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true, timeout: 3 }}\n}}\n",
            route_port(&a),
            pki.dir.join("cert.pem").display(),
            pki.dir.join("key.pem").display(),
            pki.dir.join("ca.pem").display(),
        ),
    )
    .expect("conf");
    let mut child = std::process::Command::new("/usr/sbin/nats-server")
        .args(["-c"])
        .arg(&conf)
        .args(["-a", "127.0.0.1", "-p", "-1", "-n", "go-b"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("nats-server is required (apt-get install -y nats-server)");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut client = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while client.is_none() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let l = rx.recv_timeout(left).expect("nats-server did not start");
        if let Some(a) = l.split("Listening for client connections on ").nth(1) {
            client = a.trim().parse::<std::net::SocketAddr>().ok();
        }
    }
    std::thread::spawn(move || for _ in rx {});
    let go_client = client.expect("client addr");
    wait_for("TLS route to nats-server", || {
        let ok = routes(&a) == 1;
        async move { ok }
    })
    .await;
    // natsd -> nats-server
    let stream = tokio::net::TcpStream::connect(go_client)
        .await
        .expect("connect");
    let mut sub = Raw {
        stream,
        buf: Vec::new(),
    };
    sub.line().await;
    sub.send("CONNECT {\"verbose\":false}\r\nSUB tls.x 1\r\nPING\r\n")
        .await;
    sub.expect("PONG").await;
    let acc = a.shared().accounts.global();
    wait_for("nats-server interest over TLS", || {
        let ok = acc.sublist.has_interest(b"tls.x");
        async move { ok }
    })
    .await;
    let mut p = Raw::client(&a).await;
    p.send("PUB tls.x 2\r\nok\r\n").await;
    let (subj, _, _, payload) = sub.msg().await;
    assert_eq!((subj.as_str(), &payload[..]), ("tls.x", &b"ok"[..]));
    let _ = child.kill();
    let _ = child.wait();
    a.shutdown().await;
}
