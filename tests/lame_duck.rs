//! Lame duck mode on an embedded 2-node cluster: the `ldm` INFO to clients (with the other
//! server's URL) and to the peer (which withdraws our URL from its clients), refused new
//! connections, `/healthz` 503, clients closed over the duration, then the server stops.

mod common;

use common::cluster::{self, route_port};
use common::{http_get, start, wait_for, Raw};
use natsd::{Options, Server};
use std::time::{Duration, Instant};

fn node_opts(name: &str, seed: Option<u16>) -> Options {
    Options {
        http_port: Some(0),
        lame_duck_duration: Duration::from_secs(2),
        lame_duck_grace_period: Duration::from_millis(500),
        ..cluster::node_opts(name, seed)
    }
}

fn url_of(s: &Server) -> String {
    s.client_addr().to_string()
}

/// Read lines until an `INFO` whose JSON satisfies `want`; returns that JSON.
async fn info_where(c: &mut Raw, want: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    loop {
        let l = c.line().await;
        if let Some(j) = l.strip_prefix("INFO ") {
            let v: serde_json::Value = serde_json::from_str(j).expect("INFO is JSON");
            if want(&v) {
                return v;
            }
        } else if l == "PING" {
            c.send("PONG\r\n").await;
        }
    }
}

fn urls(v: &serde_json::Value) -> Vec<String> {
    v["connect_urls"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn lame_duck_drains_a_node_of_a_cluster() {
    let a = start(node_opts("A", None)).await;
    let b = start(node_opts("B", Some(route_port(&a)))).await;
    let (a_url, b_url) = (url_of(&a), url_of(&b));

    // Clients that accept async INFO; wait until each knows both servers.
    let mut ca = Raw::client(&a).await;
    let mut ca2 = Raw::client(&a).await;
    let mut cb = Raw::client(&b).await;
    wait_for("the mesh", || {
        let ok = a.shared().connect_urls().len() == 2 && b.shared().connect_urls().len() == 2;
        async move { ok }
    })
    .await;
    // Whatever INFO announced the peer is behind us.
    for c in [&mut ca, &mut ca2, &mut cb] {
        c.sync().await;
    }
    let (st, _) = http_get(a.http_addr().expect("http"), "/healthz").await;
    assert_eq!(st, 200);

    let t0 = Instant::now();
    a.lame_duck();
    assert!(a.is_lame_duck());

    // A's clients: INFO with ldm and only the other server's URL.
    let info = info_where(&mut ca, |v| v["ldm"] == true).await;
    assert_eq!(urls(&info), vec![b_url.clone()], "{info}");
    info_where(&mut ca2, |v| v["ldm"] == true).await;

    // B's clients: A's URL is withdrawn.
    let info = info_where(&mut cb, |v| !urls(v).contains(&a_url)).await;
    assert!(urls(&info).contains(&b_url), "{info}");
    assert!(info.get("ldm").is_none_or(|l| l == false), "{info}");
    assert!(!b.shared().connect_urls().contains(&a_url));

    // New connections to A are refused; /healthz is 503.
    assert!(tokio::net::TcpStream::connect(a.client_addr())
        .await
        .is_err());
    let (st, body) = http_get(a.http_addr().expect("http"), "/healthz").await;
    assert_eq!(st, 503, "{body}");
    assert!(
        body.contains("failed to be ready for connections"),
        "{body}"
    );
    // Routes stay up until the end: B still routes to A.
    assert_eq!(b.shared().cluster.as_ref().expect("cl").num_peers(), 1);

    // After the grace period the clients are closed, within the duration, then A stops.
    assert!(ca.closed().await);
    assert!(ca2.closed().await);
    let closed_at = t0.elapsed();
    assert!(
        closed_at >= Duration::from_millis(450),
        "closed before the grace period: {closed_at:?}"
    );
    tokio::time::timeout(Duration::from_secs(5), a.wait_for_shutdown())
        .await
        .expect("A shuts down at the end of lame duck mode");
    assert!(
        t0.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t0.elapsed()
    );
    let closed = a.shared().closed_clients();
    assert_eq!(closed.len(), 2);
    for c in &closed {
        let v = serde_json::to_value(c).expect("json");
        assert_eq!(v["reason"], "Server Shutdown", "{v}");
    }
    a.shutdown().await;

    // B's client is unaffected.
    cb.flush().await;
    b.shutdown().await;
}

#[tokio::test]
async fn lame_duck_without_clients_stops_at_once() {
    // nats-server: with no client to drain, lame duck mode shuts down without the grace.
    let a = start(Options {
        lame_duck_duration: Duration::from_secs(30),
        lame_duck_grace_period: Duration::from_secs(10),
        ..Options::local()
    })
    .await;
    let t0 = Instant::now();
    a.lame_duck();
    tokio::time::timeout(Duration::from_secs(3), a.wait_for_shutdown())
        .await
        .expect("stops at once");
    assert!(t0.elapsed() < Duration::from_secs(3));
    // A second call is a no-op.
    a.lame_duck();
    a.shutdown().await;
}

#[tokio::test]
async fn clients_are_spread_over_the_duration() {
    // 5 clients, grace 200ms, duration 1.2s: the pause between closes is 1s/5 = 200ms at
    // most and half that at least, so the last close comes 0.4–0.8 s after the first.
    let a = start(Options {
        lame_duck_duration: Duration::from_millis(1200),
        lame_duck_grace_period: Duration::from_millis(200),
        ..Options::local()
    })
    .await;
    let mut cs = Vec::new();
    for _ in 0..5 {
        cs.push(Raw::client(&a).await);
    }
    let t0 = Instant::now();
    a.lame_duck();
    let mut at = Vec::new();
    for c in &mut cs {
        assert!(c.closed().await);
        at.push(t0.elapsed());
    }
    at.sort();
    let (first, last) = (at[0], at[4]);
    assert!(first >= Duration::from_millis(190), "{at:?}");
    assert!(
        last - first >= Duration::from_millis(350) && last < Duration::from_millis(1300),
        "{at:?}"
    );
    tokio::time::timeout(Duration::from_secs(3), a.wait_for_shutdown())
        .await
        .expect("stops");
    a.shutdown().await;
}

#[test]
fn grace_must_be_below_duration() {
    let o = Options {
        lame_duck_duration: Duration::from_secs(40),
        lame_duck_grace_period: Duration::from_secs(50),
        ..Options::local()
    };
    assert_eq!(
        o.validate().unwrap_err(),
        "lame duck grace period (50s) should be strictly lower than lame duck duration (40s)"
    );
    let d = Options::default();
    assert_eq!(d.lame_duck_duration, Duration::from_secs(120));
    assert_eq!(d.lame_duck_grace_period, Duration::from_secs(10));
}

/// A client connection accepted just before the listener stopped joins the server's
/// clients after shutdown has begun (and after its sweep): it is closed there, not kept.
/// `Server::shutdown` waits for every connection's task, and such a connection (async-nats
/// reconnecting to the next node of a cluster as it stopped) kept it waiting for ever.
#[tokio::test]
async fn a_client_that_joins_during_shutdown_is_closed() {
    use natsd::conn::{CloseReason, Conn, ConnKind};
    use std::sync::Arc;
    let a = start(Options::local()).await;
    let shared = a.shared().clone();
    shared.begin_shutdown();
    let late = Arc::new(Conn::new(
        shared.next_cid(),
        ConnKind::Client,
        "127.0.0.1:1".parse().expect("addr"),
        1 << 20,
    ));
    assert!(
        shared.register_client(&late),
        "not refused as over the limit"
    );
    assert_eq!(late.close_reason(), Some(CloseReason::ServerShutdown));
    assert_eq!(shared.num_clients(), 0, "not among the clients");
    tokio::time::timeout(Duration::from_secs(10), a.shutdown())
        .await
        .expect("shutdown ends");
}
