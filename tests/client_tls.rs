//! Client port TLS and HTTPS monitoring, as nats-server 2.9.10 does them: INFO in the clear
//! with `tls_required`, then the client's handshake; plaintext clients, garbage and slow
//! handshakes are closed with `TLS Handshake Failure`; `verify` needs a client certificate
//! signed by the CA; `/connz` shows the TLS version and suite; the monitor over HTTPS; the
//! `--tls*` and `-ms` flags; `-t` errors; reload of the `tls {}` block; and the same client
//! behaviour against the real nats-server.

mod common;

use common::binary::{run, tmp_dir, write_conf, Proc};
use common::{free_port, http_json, start, Raw, DEADLINE};
use futures::StreamExt;
use natsd::tls::TlsOpts;
use natsd::{Options, Server};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;

/// A CA, a server certificate for localhost/127.0.0.1, a client certificate from the same CA,
/// and a client certificate from another CA: PEM files in a fresh directory.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir = tmp_dir("client-tls", tag);
        let ca = ca();
        let other = ca_named("other");
        let server = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params");
        let key = KeyPair::generate().expect("key");
        let cert = server.signed_by(&key, &ca).expect("cert");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write");
        std::fs::write(dir.join("cert.pem"), cert.pem()).expect("write");
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("write");
        for (name, issuer) in [("client", &ca), ("stranger", &other)] {
            let params = CertificateParams::new(vec!["client".to_string()]).expect("params");
            let key = KeyPair::generate().expect("key");
            let cert = params.signed_by(&key, issuer).expect("cert");
            std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).expect("write");
            std::fs::write(dir.join(format!("{name}-key.pem")), key.serialize_pem())
                .expect("write");
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    fn tls(&self, verify: bool) -> TlsOpts {
        TlsOpts {
            cert_file: self.path("cert.pem"),
            key_file: self.path("key.pem"),
            ca_file: Some(self.path("ca.pem")),
            verify,
            ..TlsOpts::default()
        }
    }

    /// async-nats options trusting the CA, TLS required.
    fn client(&self) -> async_nats::ConnectOptions {
        async_nats::ConnectOptions::new()
            .add_root_certificates(self.path("ca.pem"))
            .require_tls(true)
            .connection_timeout(DEADLINE)
    }

    fn client_with_cert(&self, name: &str) -> async_nats::ConnectOptions {
        self.client().add_client_certificate(
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}-key.pem")),
        )
    }

    /// A rustls client trusting the CA, presenting the client certificate when `cert`.
    fn connector(&self, cert: bool) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        let pem = std::fs::read(self.path("ca.pem")).expect("ca");
        use rustls::pki_types::pem::PemObject;
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            roots.add(c.expect("pem")).expect("root");
        }
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
        let cfg = if cert {
            let c = std::fs::read(self.path("client.pem")).expect("cert");
            let k = std::fs::read(self.path("client-key.pem")).expect("key");
            let chain: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(&c)
                .map(|c| c.expect("pem"))
                .collect();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&k).expect("key");
            cfg.with_client_auth_cert(chain, key).expect("client auth")
        } else {
            cfg.with_no_client_auth()
        };
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A temp directory removed on drop (also when the test fails).
struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ca() -> CertifiedIssuer<'static, KeyPair> {
    ca_named("test-ca")
}

fn ca_named(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("ca")
}

async fn tls_server(pki: &Pki, verify: bool) -> Server {
    start(Options {
        tls: Some(pki.tls(verify)),
        http_port: Some(0),
        ..Options::local()
    })
    .await
}

fn url(addr: SocketAddr) -> String {
    format!("nats://127.0.0.1:{}", addr.port())
}

/// The connection with `cid` in `/connz<query>`, polled until it is there.
async fn find_conn(http: SocketAddr, query: &str, cid: u64) -> serde_json::Value {
    let end = std::time::Instant::now() + DEADLINE;
    loop {
        let v = http_json(http, &format!("/connz{query}")).await;
        if let Some(c) = v["connections"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["cid"] == cid))
        {
            return c.clone();
        }
        assert!(
            std::time::Instant::now() < end,
            "cid {cid} never in /connz{query}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn closed_conn(http: SocketAddr, cid: u64) -> serde_json::Value {
    find_conn(http, "?state=closed", cid).await
}

/// pub/sub and request/reply through async-nats over TLS against `addr`.
async fn exercise(opts: async_nats::ConnectOptions, addr: SocketAddr) {
    let nc = opts.connect(url(addr)).await.expect("TLS connect");
    let mut sub = nc.subscribe("tls.x").await.expect("sub");
    nc.publish("tls.x", "hello".into()).await.expect("pub");
    nc.flush().await.expect("flush");
    let m = tokio::time::timeout(DEADLINE, sub.next())
        .await
        .expect("message in time")
        .expect("message");
    assert_eq!(&m.payload[..], b"hello");
    let mut svc = nc.subscribe("tls.svc").await.expect("sub");
    let responder = nc.clone();
    tokio::spawn(async move {
        while let Some(m) = svc.next().await {
            if let Some(r) = m.reply {
                let _ = responder.publish(r, "pong".into()).await;
            }
        }
    });
    nc.flush().await.expect("flush");
    let r = tokio::time::timeout(DEADLINE, nc.request("tls.svc", "ping".into()))
        .await
        .expect("reply in time")
        .expect("reply");
    assert_eq!(&r.payload[..], b"pong");
}

#[tokio::test]
async fn async_nats_over_tls_pubsub_request_and_monitoring() {
    let pki = Pki::new("basic");
    let srv = tls_server(&pki, false).await;
    let http = srv.http_addr().expect("monitor");
    // INFO in the clear says TLS is required.
    let (_raw, info) = Raw::connect(&srv).await;
    assert_eq!(info["tls_required"], true);
    assert!(info.get("tls_verify").is_none() && info.get("tls_available").is_none());

    exercise(pki.client(), srv.client_addr()).await;

    let nc = pki
        .client()
        .connect(srv.client_url())
        .await
        .expect("connect");
    nc.flush().await.expect("flush");
    let cid = nc.server_info().client_id;
    let conn = find_conn(http, "", cid).await;
    // nats-server's strings; its (and our) preference picks AES-128-GCM.
    assert_eq!(conn["tls_version"], "1.3");
    assert_eq!(conn["tls_cipher_suite"], "TLS_AES_128_GCM_SHA256");
    let varz = http_json(http, "/varz").await;
    assert_eq!(varz["tls_required"], true);
    assert!(varz.get("tls_verify").is_none());
    assert_eq!(varz["tls_timeout"], 2);
    // nats-server: with TLS the default auth timeout is the TLS timeout plus one second
    // (from the config file; `Options` given directly keep theirs).
    assert_eq!(varz["https_port"], 0);
    drop(nc);
    srv.shutdown().await;
}

#[tokio::test]
async fn plaintext_client_is_closed_without_an_error_line() {
    let pki = Pki::new("plain");
    let srv = tls_server(&pki, false).await;
    let http = srv.http_addr().expect("monitor");
    let (mut raw, info) = Raw::connect(&srv).await;
    raw.send("CONNECT {\"verbose\":false}\r\nPING\r\n").await;
    // nats-server 2.9.10 sends nothing more (no -ERR, no TLS alert) and closes.
    assert_eq!(raw.try_line().await, None);
    assert!(raw.buf.is_empty(), "{:?}", raw.buf);
    let cid = info["client_id"].as_u64().expect("cid");
    let c = closed_conn(http, cid).await;
    assert_eq!(c["reason"], "TLS Handshake Failure");
    srv.shutdown().await;
}

#[tokio::test]
async fn garbage_hello_and_silence_close_cleanly() {
    let pki = Pki::new("garbage");
    let srv = start(Options {
        tls: Some(TlsOpts {
            // Short, to keep the test quick; long enough for a handshake on a loaded machine.
            timeout: Duration::from_millis(500),
            ..pki.tls(false)
        }),
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let http = srv.http_addr().expect("monitor");
    // A TLS record header announcing a huge handshake message, then junk.
    let (mut raw, info) = Raw::connect(&srv).await;
    raw.send_bytes(b"\x16\x03\x01\xff\xffhello garbage\x00\x01\x02")
        .await;
    while raw.try_line().await.is_some() {}
    let c = closed_conn(http, info["client_id"].as_u64().expect("cid")).await;
    assert_eq!(c["reason"], "TLS Handshake Failure");
    // A client that never starts the handshake is closed at the TLS timeout.
    let (mut silent, info) = Raw::connect(&srv).await;
    assert_eq!(silent.try_line().await, None);
    let c = closed_conn(http, info["client_id"].as_u64().expect("cid")).await;
    assert_eq!(c["reason"], "TLS Handshake Failure");
    let varz = http_json(http, "/varz").await;
    assert_eq!(varz["tls_timeout"], 0.5);
    // The server still serves TLS clients.
    exercise(pki.client(), srv.client_addr()).await;
    srv.shutdown().await;
}

#[tokio::test]
async fn verify_wants_a_certificate_from_the_ca() {
    let pki = Pki::new("verify");
    let srv = tls_server(&pki, true).await;
    let http = srv.http_addr().expect("monitor");
    let (_raw, info) = Raw::connect(&srv).await;
    assert_eq!(info["tls_required"], true);
    assert_eq!(info["tls_verify"], true);
    let varz = http_json(http, "/varz").await;
    assert_eq!(varz["tls_verify"], true);

    // No certificate, or one from another CA: refused.
    assert!(pki.client().connect(srv.client_url()).await.is_err());
    assert!(pki
        .client_with_cert("stranger")
        .connect(srv.client_url())
        .await
        .is_err());
    // Signed by the CA: served.
    exercise(pki.client_with_cert("client"), srv.client_addr()).await;
    let closed = http_json(http, "/connz?state=closed").await;
    let reasons: Vec<&str> = closed["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(
        reasons.contains(&"TLS Handshake Failure"),
        "closed: {reasons:?}"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn allow_non_tls_serves_both() {
    let pki = Pki::new("mixed");
    let srv = start(Options {
        tls: Some(pki.tls(false)),
        allow_non_tls: true,
        ..Options::local()
    })
    .await;
    let (mut raw, info) = Raw::connect(&srv).await;
    assert_eq!(info["tls_available"], true);
    assert!(info.get("tls_required").is_none());
    raw.send("CONNECT {\"verbose\":false}\r\nPING\r\n").await;
    raw.expect("PONG").await;
    exercise(pki.client(), srv.client_addr()).await;
    srv.shutdown().await;
}

/// GET `path` over HTTPS (HTTP/1.1, `Connection: close`): (status line, body).
async fn https_get(pki: &Pki, addr: SocketAddr, path: &str) -> (String, String) {
    https_get_as(pki, false, addr, path).await
}

/// `https_get`, presenting the client certificate when `cert` (the monitor shares the client
/// port's `verify`, as in nats-server).
async fn https_get_as(pki: &Pki, cert: bool, addr: SocketAddr, path: &str) -> (String, String) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let mut s = tokio::time::timeout(DEADLINE, pki.connector(cert).connect(name, tcp))
        .await
        .expect("handshake in time")
        .expect("handshake");
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    // rustls reports a peer that closes without close_notify as an error: keep what came.
    let _ = tokio::time::timeout(DEADLINE, s.read_to_end(&mut out))
        .await
        .expect("response in time");
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

#[tokio::test]
async fn https_monitor_serves_varz() {
    let pki = Pki::new("https");
    let srv = start(Options {
        tls: Some(pki.tls(false)),
        https_port: Some(0),
        ..Options::local()
    })
    .await;
    assert!(srv.http_addr().is_none());
    let addr = *srv.shared().https_addr.get().expect("https port");
    let (status, body) = https_get(&pki, addr, "/varz").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let varz: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(varz["https_port"], addr.port());
    assert_eq!(varz["http_port"], 0);
    assert_eq!(varz["tls_required"], true);
    let (status, _) = https_get(&pki, addr, "/connz").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Plain HTTP on the HTTPS port gets Go's answer.
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(b"GET /varz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(DEADLINE, tcp.read_to_end(&mut out))
        .await
        .expect("answer in time");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn reload_applies_tls_to_new_connections() {
    let pki = Pki::new("reload");
    let srv = tls_server(&pki, false).await;
    // A certificate that cannot be loaded: refused, nothing applied.
    let mut bad = (*srv.options()).clone();
    bad.tls = Some(TlsOpts {
        cert_file: pki.path("missing.pem"),
        ..pki.tls(false)
    });
    let e = srv.reload(bad).expect_err("bad certificate refused");
    assert!(e.contains("missing.pem"), "{e}");
    exercise(pki.client(), srv.client_addr()).await;
    // A new CA and certificate: new clients must trust the new CA.
    let next = Pki::new("reload-next");
    let mut o = (*srv.options()).clone();
    o.tls = Some(next.tls(false));
    let changed = srv.reload(o).expect("reload");
    assert!(
        changed.contains(&"tls = enabled".to_string()),
        "{changed:?}"
    );
    exercise(next.client(), srv.client_addr()).await;
    assert!(pki.client().connect(srv.client_url()).await.is_err());
    // TLS off: plaintext clients again.
    let mut o = (*srv.options()).clone();
    o.tls = None;
    srv.reload(o).expect("reload");
    let (mut raw, info) = Raw::connect(&srv).await;
    assert!(info.get("tls_required").is_none());
    raw.send("CONNECT {\"verbose\":false}\r\nPING\r\n").await;
    raw.expect("PONG").await;
    srv.shutdown().await;
}

#[tokio::test]
async fn max_connections_error_comes_in_the_clear_before_the_handshake() {
    let pki = Pki::new("maxconn");
    let srv = start(Options {
        tls: Some(pki.tls(false)),
        max_connections: 1,
        ..Options::local()
    })
    .await;
    let (_first, _) = Raw::connect(&srv).await;
    // As nats-server 2.9.10: INFO, then the -ERR in plaintext, then the close.
    let (mut second, info) = Raw::connect(&srv).await;
    assert_eq!(info["tls_required"], true);
    assert_eq!(
        second.try_line().await.as_deref(),
        Some("-ERR 'maximum connections exceeded'")
    );
    assert_eq!(second.try_line().await, None);
    srv.shutdown().await;
}

// ----- the binary: flags, config file, -t -----

fn ready(args: &[&str]) -> Proc {
    Proc::ready(args, Stdio::piped(), "[INF] Server is ready")
}

async fn info_at(addr: SocketAddr) -> serde_json::Value {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(b"\r\n") {
        let n = tokio::time::timeout(DEADLINE, s.read(&mut chunk))
            .await
            .expect("INFO in time")
            .expect("read");
        assert!(n > 0, "closed before INFO");
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = String::from_utf8_lossy(&buf);
    serde_json::from_str(
        line.trim_end()
            .strip_prefix("INFO ")
            .expect("INFO")
            .trim_end(),
    )
    .expect("JSON")
}

#[tokio::test]
async fn tls_flags_in_both_spellings() {
    let pki = Pki::new("flags");
    let (cert, key, ca) = (pki.p("cert.pem"), pki.p("key.pem"), pki.p("ca.pem"));
    let mut n = ready(&[
        "-a",
        "127.0.0.1",
        "-p",
        "-1",
        "--tls",
        "--tlscert",
        &cert,
        "--tlskey",
        &key,
    ]);
    n.find_line(|l| l.contains("[INF] TLS required for client connections"));
    let info = info_at(n.client_addr()).await;
    assert_eq!(info["tls_required"], true);
    assert!(info.get("tls_verify").is_none());
    exercise(pki.client(), n.client_addr()).await;
    drop(n);

    let n = ready(&[
        "-a",
        "127.0.0.1",
        "-p",
        "-1",
        "-tlsverify",
        &format!("-tlscert={cert}"),
        "-tlskey",
        &key,
        "-tlscacert",
        &ca,
        "-ms",
        "-1",
    ]);
    let https = n.addr_after("Starting https monitor on ");
    let info = info_at(n.client_addr()).await;
    assert_eq!(info["tls_verify"], true);
    exercise(pki.client_with_cert("client"), n.client_addr()).await;
    // nats-server's monitor asks for no client certificate, even with verify; one is fine.
    let (status, _) = https_get_as(&pki, true, https, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let (status, body) = https_get(&pki, https, "/varz").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let varz: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(varz["https_port"], https.port());
    assert_eq!(varz["tls_verify"], true);
    // nats-server's default auth timeout with TLS: TLS timeout + 1 s.
    assert_eq!(varz["auth_timeout"], 3);
    drop(n);

    // Certificate without key; -ms without TLS.
    let out = run(&["--tls", "--tlscert", &cert]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("TLS Server private key must be present and valid"));
    let out = run(&["-p", "-1", "-ms", "-1"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("TLS cert and key required for HTTPS"));
}

#[tokio::test]
async fn config_file_tls_https_and_dash_t_errors() {
    let pki = Pki::new("conf");
    let tmp = TmpDir(tmp_dir("client-tls", "conf-files"));
    let dir = tmp.0.clone();
    let https = free_port();
    let good = write_conf(
        &dir,
        "good.conf",
        &format!(
            "listen: 127.0.0.1:-1\nhttps: 127.0.0.1:{https}\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  timeout: 0.5\n  cipher_suites: [\"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\", \"TLS_AES_128_GCM_SHA256\"]\n  curve_preferences: [\"X25519\", \"CurveP256\"]\n}}\n",
            pki.p("cert.pem"),
            pki.p("key.pem")
        ),
    );
    let good_s = good.display().to_string();
    let out = run(&["-t", "-c", &good_s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut n = ready(&["-c", &good_s]);
    n.find_line(|l| l.contains(&format!("Starting https monitor on 127.0.0.1:{https}")));
    exercise(pki.client(), n.client_addr()).await;
    let (_, body) = https_get(&pki, SocketAddr::from(([127, 0, 0, 1], https)), "/varz").await;
    let varz: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(varz["tls_timeout"], 0.5);
    assert_eq!(varz["auth_timeout"], 1.5);
    drop(n);

    // -t: errors at file:line:col.
    let cases = [
        (
            format!(
                "port: 4222\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n",
                pki.p("nope.pem"),
                pki.p("key.pem")
            ),
            ":2:1: ",
            "nope.pem",
        ),
        (
            format!(
                "port: 4222\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n}}\n",
                good_s,
                pki.p("key.pem")
            ),
            ":2:1: ",
            "no certificate found",
        ),
        (
            format!(
                "port: 4222\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  cipher_suites: [\"TLS_AES_128_GCM_SHA256\", \"BOGUS\"]\n}}\n",
                pki.p("cert.pem"),
                pki.p("key.pem")
            ),
            ":5:45: ",
            "unrecognized cipher BOGUS",
        ),
        (
            format!(
                "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  verify_and_map: true\n}}\n",
                pki.p("cert.pem"),
                pki.p("key.pem")
            ),
            // verify_and_map needs a CA, as verify does.
            ":1:1: ",
            "tls verify needs a ca_file",
        ),
        (
            format!(
                "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  insecure: true\n}}\n",
                pki.p("cert.pem"),
                pki.p("key.pem")
            ),
            ":4:3: ",
            "\"insecure\" has no meaning",
        ),
        ("https_port: 8443\n".to_string(), "", "TLS cert and key required for HTTPS"),
    ];
    for (i, (text, at, msg)) in cases.iter().enumerate() {
        let f = write_conf(&dir, &format!("bad{i}.conf"), text);
        let out = run(&["-t", "-c", &f.display().to_string()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "case {i} passed: {text}");
        assert!(
            err.contains(&format!("bad{i}.conf{at}")) && err.contains(msg),
            "case {i}: {err}"
        );
    }
}

// ----- the same client against nats-server 2.9.10 -----

#[tokio::test]
async fn same_client_behaviour_against_nats_server() {
    use common::natsserver;
    natsserver::assert_installed();
    let pki = Pki::new("interop");
    let tmp = TmpDir(tmp_dir("client-tls", "interop-confs"));
    let dir = tmp.0.clone();
    for verify in [false, true] {
        let conf = write_conf(
            &dir,
            &format!("ns-{verify}.conf"),
            &format!(
                "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\ntls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  verify: {verify}\n}}\n",
                pki.p("cert.pem"),
                pki.p("key.pem"),
                pki.p("ca.pem")
            ),
        );
        let ns = natsserver::with_config(&conf, natsserver::Wait::READY);
        let ns_addr = http_json(ns.http, "/varz").await["port"]
            .as_u64()
            .expect("port");
        let ns_addr = SocketAddr::from(([127, 0, 0, 1], ns_addr as u16));
        // natsd from the same file (its own monitor port).
        let mut o = natsd::config::file::load(&conf).expect("natsd loads the file");
        o.http_port = Some(0);
        let ours = start(o).await;
        for addr in [ns_addr, ours.client_addr()] {
            let info = info_at(addr).await;
            assert_eq!(info["tls_required"], true, "{addr}");
            assert_eq!(info.get("tls_verify").is_some(), verify, "{addr}");
            // A plaintext client: nothing but INFO, then the close.
            let mut s = TcpStream::connect(addr).await.expect("connect");
            s.write_all(b"CONNECT {}\r\nPING\r\n").await.expect("write");
            let mut out = Vec::new();
            let _ = tokio::time::timeout(DEADLINE, s.read_to_end(&mut out))
                .await
                .expect("closed in time");
            let text = String::from_utf8_lossy(&out);
            assert!(
                text.starts_with("INFO {") && text.ends_with("} \r\n"),
                "{addr}: {text:?}"
            );
            if verify {
                assert!(pki.client().connect(url(addr)).await.is_err(), "{addr}");
                exercise(pki.client_with_cert("client"), addr).await;
            } else {
                exercise(pki.client(), addr).await;
            }
        }
        // The same TLS fields in /varz.
        let a = http_json(ns.http, "/varz").await;
        let b = http_json(ours.http_addr().expect("monitor"), "/varz").await;
        for k in ["tls_required", "tls_verify", "tls_timeout", "auth_timeout"] {
            assert_eq!(a.get(k), b.get(k), "/varz {k}");
        }
        // The same strings in /connz for the same client.
        let mut suites = Vec::new();
        for (addr, http) in [
            (ns_addr, ns.http),
            (ours.client_addr(), ours.http_addr().expect("monitor")),
        ] {
            let opts = if verify {
                pki.client_with_cert("client")
            } else {
                pki.client()
            };
            let nc = opts.connect(url(addr)).await.expect("connect");
            nc.flush().await.expect("flush");
            let cid = nc.server_info().client_id;
            let v = http_json(http, "/connz").await;
            let c = v["connections"]
                .as_array()
                .and_then(|a| a.iter().find(|c| c["cid"] == cid).cloned())
                .expect("client listed");
            suites.push((c["tls_version"].clone(), c["tls_cipher_suite"].clone()));
        }
        assert_eq!(suites[0], suites[1], "nats-server vs natsd");
        ours.shutdown().await;
    }
}

/// What a client that waits for INFO in the clear gets within `within`: the bytes before the
/// server went quiet or closed.
async fn clear_bytes(addr: SocketAddr, within: Duration) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(within, s.read(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        _ => String::new(),
    }
}

/// `tls { handshake_first: … }` (nats-server 2.10+): a client that starts TLS at once gets
/// INFO (`tls_required`, even with `allow_non_tls`) inside TLS (a raw rustls client, then
/// async-nats `tls_first`); with `true` a client waiting for INFO in the clear gets nothing
/// (`allow_non_tls` or not), with a fallback delay it gets the usual INFO in the clear after
/// the delay and goes on with the upgrade (or, with `allow_non_tls`, in plaintext). natsd and
/// nats-server 2.15.1 alike.
#[tokio::test]
async fn handshake_first_as_nats_server_2_15() {
    use common::natsserver;
    let bin = natsserver::assert_installed_215();
    let pki = Pki::new("hsfirst");
    let tmp = TmpDir(tmp_dir("client-tls", "hsfirst-confs"));
    let cases = [
        ("true", false, false),
        ("\"300ms\"", true, false),
        ("auto", true, false),
        ("true", false, true),
        ("\"300ms\"", true, true),
    ];
    for (i, (mode, fallback, allow_non_tls)) in cases.into_iter().enumerate() {
        let conf = write_conf(
            &tmp.0,
            &format!("hf-{i}.conf"),
            &format!(
                "listen: 127.0.0.1:-1\nallow_non_tls: {allow_non_tls}\ntls {{\n  cert_file: \
                 \"{}\"\n  key_file: \"{}\"\n  timeout: 1\n  handshake_first: {mode}\n}}\n",
                pki.p("cert.pem"),
                pki.p("key.pem"),
            ),
        );
        let ns = natsserver::launch_bin(
            &bin,
            &["-c".to_string(), conf.display().to_string()],
            natsserver::Wait {
                client: true,
                ..natsserver::Wait::READY
            },
        );
        let ours = start(natsd::config::file::load(&conf).expect("natsd loads it")).await;
        for addr in [ns.client, ours.client_addr()] {
            let what = format!("{mode} allow_non_tls={allow_non_tls} {addr}");
            // TLS first: INFO is the first thing inside TLS.
            let tcp = TcpStream::connect(addr).await.expect("connect");
            let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
            let mut tls = tokio::time::timeout(DEADLINE, pki.connector(false).connect(name, tcp))
                .await
                .expect("handshake in time")
                .unwrap_or_else(|e| panic!("{what}: handshake: {e}"));
            let mut buf = vec![0u8; 4096];
            let n = tokio::time::timeout(DEADLINE, tls.read(&mut buf))
                .await
                .expect("INFO in time")
                .expect("read");
            let line = String::from_utf8_lossy(&buf[..n]);
            let info: serde_json::Value = serde_json::from_str(
                line.strip_prefix("INFO ")
                    .unwrap_or_else(|| panic!("{what}: {line:?}"))
                    .trim_end(),
            )
            .expect("INFO JSON");
            assert_eq!(info["tls_required"], true, "{what}: {info}");
            exercise(pki.client().tls_first(), addr).await;
            // A client waiting for INFO in the clear.
            let clear = clear_bytes(addr, Duration::from_secs(3)).await;
            if !fallback {
                assert_eq!(clear, "", "{what}");
                continue;
            }
            let info: serde_json::Value = serde_json::from_str(
                clear
                    .strip_prefix("INFO ")
                    .unwrap_or_else(|| panic!("{what}: {clear:?}"))
                    .trim_end(),
            )
            .expect("INFO JSON");
            if allow_non_tls {
                assert!(info.get("tls_required").is_none(), "{what}: {info}");
                assert_eq!(info["tls_available"], true, "{what}: {info}");
                exercise(
                    async_nats::ConnectOptions::new().connection_timeout(DEADLINE),
                    addr,
                )
                .await;
            } else {
                assert_eq!(info["tls_required"], true, "{what}: {info}");
            }
            exercise(pki.client(), addr).await;
        }
        drop(ns);
        ours.shutdown().await;
    }
}

/// `handshake_first`'s values as nats-server 2.15.1 checks them (`-t`): booleans, `on`/`off`,
/// `auto`, any Go duration (negative too), the `first` and `immediate` spellings, also in a
/// route's tls block (parsed there, unused); anything else in nats-server's words.
#[test]
fn handshake_first_values_as_nats_server_2_15() {
    use common::natsserver;
    let bin = natsserver::assert_installed_215();
    let pki = Pki::new("hsfirst-pki");
    let tmp = TmpDir(tmp_dir("client-tls", "hsfirst-values"));
    let tls = |key: &str, v: &str| {
        format!(
            "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  {key}: {v}\n}}\n",
            pki.p("cert.pem"),
            pki.p("key.pem"),
        )
    };
    let mut confs = Vec::new();
    for v in [
        "true",
        "false",
        "\"on\"",
        "\"OFF\"",
        "\"auto\"",
        "\"300ms\"",
        "\"0s\"",
        "\"-1s\"",
        "\"yes\"",
        "\"xyz\"",
        "\"5\"",
        "5",
        "1.5",
        "{a: 1}",
    ] {
        confs.push(format!(
            "listen: 127.0.0.1:-1\n{}",
            tls("handshake_first", v)
        ));
    }
    confs.push(format!("listen: 127.0.0.1:-1\n{}", tls("first", "\"1s\"")));
    confs.push(format!(
        "listen: 127.0.0.1:-1\n{}",
        tls("immediate", "\"no\"")
    ));
    confs.push(format!(
        "listen: 127.0.0.1:-1\ncluster {{\n listen: 127.0.0.1:-1\n {}}}\n",
        tls("handshake_first", "true")
    ));
    for (i, text) in confs.iter().enumerate() {
        let conf = write_conf(&tmp.0, &format!("v{i}.conf"), text);
        let conf = conf.display().to_string();
        let theirs = std::process::Command::new(&bin)
            .args(["-t", "-c", &conf])
            .output()
            .expect("nats-server -t");
        let ours = run(&["-t", "-c", &conf]);
        assert_eq!(
            ours.status.success(),
            theirs.status.success(),
            "{text}\nnatsd: {}\nnats-server: {}",
            String::from_utf8_lossy(&ours.stderr),
            String::from_utf8_lossy(&theirs.stderr),
        );
        if !theirs.status.success() {
            // nats-server: `file:line:col: message`, natsd the same line.
            let want = String::from_utf8_lossy(&theirs.stderr)
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("nats-server: ")
                .to_string();
            let got = String::from_utf8_lossy(&ours.stderr);
            assert!(got.contains(&want), "{text}\nwant {want:?}\ngot {got:?}");
        }
    }
}
