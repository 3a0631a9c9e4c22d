//! The URL account resolver over HTTPS (`resolver: URL("https://…")` and `resolver_tls {}`),
//! natsd and nats-server 2.15.1 given the same config, both run as child processes (the
//! system's trust store comes from their environment, `SSL_CERT_FILE`), against an account
//! server written here with certificates made with rcgen:
//! - `resolver_tls { ca_file }` trusts the account server; a user of a fetched account
//!   connects. Once the account server presents a certificate of another CA, the fetch
//!   fails and a user of an account not fetched yet gets `Authorization Violation`.
//! - An account server the resolver does not trust: the server does not start (the base URL
//!   is fetched first), with the same words on both; `insecure: true` skips the check.
//! - An account server that requires client certificates: without `cert_file`/`key_file`
//!   the server does not start; with them (mutual TLS) users are served.
//! - No `resolver_tls`: the account server is verified against the system's roots.

mod common;

use common::accounts_web::AccountServer;
use common::binary::{run_within_env, tmp_dir, write_conf, BIN};
use common::natsserver::{assert_installed_215, launch_bin_env, NatsServer, Wait};
use common::pki::Pki;
use common::resolver::{client, Op};
use nkeys::KeyPair;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls::ServerConfig;

type Env<'a> = [(&'a str, Option<&'a str>)];

/// natsd and nats-server 2.15.1: name and binary.
fn servers() -> [(&'static str, String); 2] {
    [
        ("natsd", BIN.to_string()),
        ("nats-server 2.15.1", assert_installed_215()),
    ]
}

/// `conf` (on a free client port) in a file of a fresh directory: the directory, the path.
fn conf_file(conf: &str) -> (PathBuf, String) {
    let dir = tmp_dir("resolver-tls", "server");
    let text = format!("listen: 127.0.0.1:-1\n{conf}");
    let path = write_conf(&dir, "nats.conf", &text);
    (dir, path.display().to_string())
}

/// `bin -c conf`, started (its client port known and ready).
fn run(bin: &str, conf: &str, env: &Env<'_>) -> NatsServer {
    let (dir, path) = conf_file(conf);
    let wait = Wait {
        client: true,
        ..Wait::READY
    };
    let srv = launch_bin_env(bin, &["-c".to_string(), path], env, wait);
    let _ = std::fs::remove_dir_all(dir);
    srv
}

/// `bin -c conf` must not start: it exits with an error and says the account server could
/// not be fetched, for `why` (Go's words).
fn assert_refused(who: &str, bin: &str, conf: &str, env: &Env<'_>, web: &AccountServer, why: &str) {
    let (dir, path) = conf_file(conf);
    let poll = Duration::from_millis(20);
    let out = run_within_env(bin, &["-c", &path], env, common::DEADLINE, poll);
    let _ = std::fs::remove_dir_all(dir);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{who} started: {said}");
    let url = web.url();
    let want = format!("could not fetch <{url:?}>: Get {url:?}: {why}");
    // Go's HTTP client may report a TLS alert that comes after its own handshake finished
    // (TLS 1.3: the server checks the client's certificate then) from its read loop, as
    // `readLoopPeekFailLocked: <why>`; nats-server 2.15.1 printed either form in CI.
    let from_read_loop = format!("Get {url:?}: readLoopPeekFailLocked: {why}");
    assert!(
        said.contains(&want) || (!who.contains("natsd") && said.contains(&from_read_loop)),
        "{who}: {said}"
    );
}

/// `bin -c conf` starts, and a user of `acc` connects to it.
async fn assert_serves(
    who: &str,
    bin: &str,
    conf: &str,
    env: &Env<'_>,
    acc: &KeyPair,
) -> NatsServer {
    let srv = run(bin, conf, env);
    let nc = client(srv.client, &KeyPair::new_user(), acc).await;
    assert!(nc.is_ok(), "{who}: a user of the account: {:?}", nc.err());
    srv
}

/// The account server's TLS: `pki`'s node certificate (127.0.0.1), client certificates
/// required (signed by `pki`'s CA) when `verify`.
fn web_tls(pki: &Pki, verify: bool) -> Arc<ServerConfig> {
    let o = natsd::tls::TlsOpts {
        verify,
        ..pki.opts()
    };
    natsd::tls::server_config(&o).expect("account server TLS")
}

fn ca_file(pki: &Pki) -> String {
    pki.dir.join("ca.pem").display().to_string()
}

/// An account server serving `o`'s system account and `acc` (its key and JWT).
async fn web(o: &Op, tls: Arc<ServerConfig>, acc: &KeyPair) -> AccountServer {
    let web = AccountServer::start_tls(tls).await;
    web.serve(&o.sys, &o.account(&o.sys, "SYS", json!({})));
    web.serve(acc, &o.account(acc, "A", json!({})));
    web
}

/// Go's words for a server certificate no trusted CA signed.
const UNTRUSTED: &str =
    "tls: failed to verify certificate: x509: certificate signed by unknown authority";

// Multi-threaded: the account server keeps answering while a server starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolver_tls_ca_file_trusts_the_account_server_as_nats_server_does() {
    let (pki, other) = (Pki::new("resolver-ca"), Pki::new("resolver-other"));
    let o = Op::new();
    let (a, b) = (KeyPair::new_account(), KeyPair::new_account());
    for (who, bin) in servers() {
        let web = web(&o, web_tls(&pki, false), &a).await;
        web.serve(&b, &o.account(&b, "B", json!({})));
        let tls = format!("resolver_tls {{ ca_file: \"{}\" }}", ca_file(&pki));
        let srv = assert_serves(who, &bin, &o.url_conf(&web.url(), &tls), &[], &a).await;
        assert!(web.fetched(&a), "{who}");
        // The account server now presents a certificate of a CA the resolver does not
        // trust: B cannot be fetched, its user is refused.
        web.set_tls(web_tls(&other, false));
        let failed = web.failed_handshakes();
        let e = client(srv.client, &KeyPair::new_user(), &b).await.err();
        let kind = e.as_ref().map(|e| e.kind());
        let violation = async_nats::ConnectErrorKind::AuthorizationViolation;
        assert_eq!(kind, Some(violation), "{who}: a user of B: {e:?}");
        let handshakes = || async { web.failed_handshakes() > failed };
        common::wait_for("the account server to see the failed handshake", handshakes).await;
        assert!(!web.fetched(&b), "{who}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_account_server_stops_the_server_at_startup_unless_insecure() {
    let (pki, other) = (Pki::new("resolver-trusted"), Pki::new("resolver-untrusted"));
    let o = Op::new();
    let a = KeyPair::new_account();
    for (who, bin) in servers() {
        let web = web(&o, web_tls(&other, false), &a).await;
        let tls = format!("resolver_tls {{ ca_file: \"{}\" }}", ca_file(&pki));
        assert_refused(
            who,
            &bin,
            &o.url_conf(&web.url(), &tls),
            &[],
            &web,
            UNTRUSTED,
        );
        assert!(!web.fetched(&a), "{who}");
        // `insecure: true`: any certificate is accepted.
        let insecure = o.url_conf(&web.url(), "resolver_tls { insecure: true }");
        assert_serves(who, &bin, &insecure, &[], &a).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resolver_tls_certificates_make_mutual_tls_as_nats_server_does() {
    let pki = Pki::new("resolver-mtls");
    let me = pki.issue(
        "resolver",
        &[(rcgen::DnType::CommonName, "resolver")],
        vec![],
    );
    let o = Op::new();
    let a = KeyPair::new_account();
    for (who, bin) in servers() {
        let web = web(&o, web_tls(&pki, true), &a).await;
        // No certificate to present: the account server refuses the handshake.
        let tls = format!("resolver_tls {{ ca_file: \"{}\" }}", ca_file(&pki));
        let why = "remote error: tls: certificate required";
        assert_refused(who, &bin, &o.url_conf(&web.url(), &tls), &[], &web, why);
        let tls = format!(
            "resolver_tls {{ ca_file: \"{}\", cert_file: \"{}\", key_file: \"{}\" }}",
            ca_file(&pki),
            me.cert.display(),
            me.key.display()
        );
        assert_serves(who, &bin, &o.url_conf(&web.url(), &tls), &[], &a).await;
        assert!(web.fetched(&a), "{who}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_resolver_tls_the_system_trust_store_decides() {
    let pki = Pki::new("resolver-system");
    let o = Op::new();
    let a = KeyPair::new_account();
    let ca = ca_file(&pki);
    for (who, bin) in servers() {
        let web = web(&o, web_tls(&pki, false), &a).await;
        let conf = o.url_conf(&web.url(), "");
        // The machine's own store does not know the test CA.
        let system = [("SSL_CERT_FILE", None), ("SSL_CERT_DIR", None)];
        assert_refused(who, &bin, &conf, &system, &web, UNTRUSTED);
        // Go's `SSL_CERT_FILE` names the system's bundle: now it is trusted.
        assert_serves(who, &bin, &conf, &[("SSL_CERT_FILE", Some(&ca))], &a).await;
    }
}
