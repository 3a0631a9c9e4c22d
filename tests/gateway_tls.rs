//! Gateway TLS (`gateway { tls { … } }`, per remote `gateways: [{ name, url, tls }]`): two
//! natsd clusters gatewayed over mutual TLS exchange traffic both ways (the implicit dial-back
//! uses the gateway's TLS, an explicit remote its own `tls {}`), a cluster without TLS or
//! with a foreign CA never registers a gateway with a TLS cluster, and natsd and the real
//! nats-server 2.9 gateway over TLS (the handshake comes first, before INFO, on both sides).

mod common;

use common::gw::{gw_port, inbound_count, node, outbound_names, remote_interest, remotes};
use common::natsserver::{self, NatsServer};
use common::pki::Pki;
use common::{http_json, start, wait_for, Raw};
use natsd::tls::TlsOpts;
use natsd::{Options, Server};
use std::net::SocketAddr;
use std::time::Duration;

/// A one-node natsd cluster with gateway TLS `tls`, dialling `gateways`.
fn tls_node(
    name: &str,
    cluster: &str,
    tls: Option<TlsOpts>,
    gateways: Vec<natsd::config::RemoteGatewayOpts>,
) -> Options {
    let mut o = node(name, cluster, 0, None, gateways);
    if let Some(g) = o.gateway.as_mut() {
        g.tls = tls;
    }
    o
}

/// A subscriber on `to`, a publisher on `from`: one message crosses once.
async fn crosses(from: &Server, from_cluster_sees: &str, to: &Server, subject: &str) {
    let mut sub = Raw::client(to).await;
    sub.send(&format!("SUB {subject} 1\r\n")).await;
    sub.flush().await;
    wait_for(&format!("interest in {subject}"), || {
        let ok = remote_interest(from, from_cluster_sees, subject);
        async move { ok }
    })
    .await;
    let mut p = Raw::client(from).await;
    p.send(&format!("PUB {subject} 6\r\nsecret\r\n")).await;
    p.flush().await;
    let (s, _, _, payload) = sub.msg().await;
    assert_eq!((s.as_str(), &payload[..]), (subject, &b"secret"[..]));
    assert_eq!(sub.sync().await, "");
}

#[tokio::test]
async fn natsd_clusters_gateway_over_mutual_tls() {
    let pki = Pki::new("mesh");
    let b = start(tls_node("b1", "C2", Some(pki.opts()), vec![])).await;
    // C1 dials C2 with the remote's own tls {} (the same PKI here); C2 dials back implicitly
    // with its gateway tls {}.
    let mut to_c2 = remotes(&[("C2", gw_port(&b))]);
    to_c2[0].tls = Some(pki.opts());
    let a = start(tls_node("a1", "C1", Some(pki.opts()), to_c2)).await;
    wait_for("TLS gateways both ways", || {
        let ok = outbound_names(&a) == ["C2"]
            && outbound_names(&b) == ["C1"]
            && inbound_count(&a) == 1
            && inbound_count(&b) == 1;
        async move { ok }
    })
    .await;
    crosses(&a, "C2", &b, "secure.ab").await;
    crosses(&b, "C1", &a, "secure.ba").await;
    // Monitoring sees ordinary gateway connections.
    let z = http_json(a.http_addr().expect("monitor"), "/gatewayz").await;
    assert_eq!(
        z["outbound_gateways"]["C2"]["connection"]["kind"],
        "Gateway"
    );
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_cluster_without_tls_or_with_a_foreign_ca_is_not_gatewayed() {
    let pki = Pki::new("strict");
    let foreign = Pki::new("foreign");
    let secure = start(tls_node("s1", "SEC", Some(pki.opts()), vec![])).await;
    let to_secure = remotes(&[("SEC", gw_port(&secure))]);
    let plain = start(tls_node("p1", "PLAIN", None, to_secure.clone())).await;
    let other = start(tls_node(
        "f1",
        "FOREIGN",
        Some(foreign.opts()),
        to_secure.clone(),
    ))
    .await;
    let good = start(tls_node("g1", "GOOD", Some(pki.opts()), to_secure)).await;
    wait_for("the good cluster's gateway", || {
        let ok = outbound_names(&good) == ["SEC"] && outbound_names(&secure) == ["GOOD"];
        async move { ok }
    })
    .await;
    // Configured gateways retry: give the others two more attempts.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(outbound_names(&plain).is_empty(), "a plain cluster got in");
    assert!(outbound_names(&other).is_empty(), "a foreign CA got in");
    assert_eq!(outbound_names(&secure), ["GOOD"]);
    assert_eq!(inbound_count(&secure), 1);
    for s in [secure, plain, other, good] {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn unreadable_gateway_certificates_fail_startup_clearly() {
    let mut o = tls_node("x1", "X", None, vec![]);
    if let Some(g) = o.gateway.as_mut() {
        g.tls = Some(TlsOpts {
            cert_file: "/nonexistent/cert.pem".into(),
            key_file: "/nonexistent/key.pem".into(),
            ..TlsOpts::default()
        });
    }
    let err = Server::start(o).await.err().expect("refused");
    let text = err.to_string();
    assert!(text.contains("gateway tls"), "{text}");
    assert!(text.contains("/nonexistent/cert.pem"), "{text}");
}

struct Go {
    _child: NatsServer,
    client: SocketAddr,
    http: SocketAddr,
    gw_port: u16,
}

/// nats-server `name` of cluster `cluster` with gateway TLS, dialling nothing.
fn go_tls_node(pki: &Pki, name: &str, cluster: &str) -> Go {
    let conf = format!(
        "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nserver_name: {name}\n\
         cluster {{ name: {cluster}, listen: 127.0.0.1:-1 }}\n\
         gateway {{ name: {cluster}, listen: 127.0.0.1:-1\n {} }}\n",
        pki.go_block()
    );
    let path = pki.dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).expect("write conf");
    let child = natsserver::with_config(&path, natsserver::ALL_LISTENERS);
    Go {
        client: child.client,
        http: child.http,
        gw_port: child.gateway_port,
        _child: child,
    }
}

/// A plain client (no headers) on any server's client port.
async fn raw_plain_at(addr: SocketAddr) -> Raw {
    Raw::connected_at(addr, r#"{"verbose":false,"pedantic":false,"protocol":1}"#).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_and_nats_server_gateway_over_tls() {
    natsserver::assert_installed();
    let pki = Pki::new("interop");
    let go = go_tls_node(&pki, "G1", "C2");
    // natsd dials nats-server explicitly; nats-server dials back implicitly (over TLS too).
    let a = start(tls_node(
        "a1",
        "C1",
        Some(pki.opts()),
        remotes(&[("C2", go.gw_port)]),
    ))
    .await;
    wait_for("natsd's TLS gateways with nats-server", || {
        let ok = outbound_names(&a) == ["C2"] && inbound_count(&a) == 1;
        async move { ok }
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let z = http_json(go.http, "/gatewayz").await;
        let ins = z["inbound_gateways"]["C1"].as_array().map_or(0, Vec::len);
        if z["outbound_gateways"].get("C1").is_some() && ins == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nats-server's gateways: {z}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // natsd -> nats-server.
    let mut go_sub = raw_plain_at(go.client).await;
    go_sub.send("SUB tls.to.go 1\r\nPING\r\n").await;
    go_sub.expect("PONG").await;
    wait_for("nats-server's interest over TLS", || {
        let ok = remote_interest(&a, "C2", "tls.to.go");
        async move { ok }
    })
    .await;
    let mut p = Raw::client(&a).await;
    p.send("PUB tls.to.go 2\r\nok\r\n").await;
    p.flush().await;
    let (s, _, _, payload) = go_sub.msg().await;
    assert_eq!((s.as_str(), &payload[..]), ("tls.to.go", &b"ok"[..]));
    // nats-server -> natsd: publish until the interest has crossed (nats-server's outbound
    // interest is not visible from here).
    let mut sub = Raw::client(&a).await;
    sub.send("SUB tls.to.rust 1\r\n").await;
    sub.flush().await;
    let mut go_pub = raw_plain_at(go.client).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        go_pub.send("PUB tls.to.rust 2\r\nhi\r\nPING\r\n").await;
        go_pub.expect("PONG").await;
        if sub.sync().await.contains("MSG tls.to.rust 1 2") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing crossed from nats-server to natsd over TLS"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.shutdown().await;
}
