//! Leafnode TLS (`leafnodes { tls {…} }` on the listener, `tls {…}` in a remote), with
//! certificates made for the test: the hub's INFO goes out in the clear saying
//! `tls_required` and the leaf upgrades after it; with `handshake_first` on both ends TLS
//! comes first. natsd on both ends, then nats-server 2.15.1 as the leaf of a natsd hub and
//! as the hub of a natsd leaf; a leaf without TLS is refused by a TLS hub.

mod common;

use common::binary::{tmp_dir, write_conf};
use common::leaf::{hub_opts, leaf_opts, leaf_port, raw_leaf, wait_links};
use common::natsserver::{self, NatsServer, Wait};
use common::pki::Pki;
use common::{free_port, start, until_delivered, wait_for, Raw};
use natsd::tls::TlsOpts;
use natsd::{Options, Server};
use std::time::Duration;

/// A natsd hub whose leafnode listener has `tls`.
async fn tls_hub(tls: TlsOpts) -> Server {
    let mut o = hub_opts(Options {
        http_port: Some(0),
        ..Options::local()
    });
    if let Some(l) = o.leafnodes.as_mut() {
        l.tls = Some(tls);
    }
    start(o).await
}

/// A natsd leaf of `url` whose remote has `tls`.
async fn tls_leaf(url: &str, tls: Option<TlsOpts>) -> Server {
    let mut o = leaf_opts(Options::local(), url);
    if let Some(l) = o.leafnodes.as_mut() {
        l.remotes[0].tls = tls;
    }
    start(o).await
}

/// Pub/sub both ways between clients `a` and `b` on either side of a link.
async fn both_ways(a: &mut Raw, b: &mut Raw) {
    b.send("SUB over.tls 1\r\n").await;
    until_delivered(a, b, "over.tls").await;
    a.send("SUB back.tls 1\r\n").await;
    until_delivered(b, a, "back.tls").await;
}

fn json_of(info: &str) -> serde_json::Value {
    serde_json::from_str(info.strip_prefix("INFO ").unwrap_or_default()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_and_hub_over_tls_with_verification() {
    let pki = Pki::new("leaf-tls");
    let hub = tls_hub(pki.opts()).await;
    // The INFO comes in the clear and asks for TLS.
    let (_raw, info) = raw_leaf(leaf_port(&hub)).await;
    let v = json_of(&info);
    assert_eq!(v["tls_required"], true, "{info}");
    assert_eq!(v["tls_verify"], true, "{info}");
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf = tls_leaf(&url, Some(pki.opts())).await;
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut h, &mut l).await;
    // /varz says so, as nats-server's `leaf` section.
    let v = common::http_json(common::http_addr(&hub), "/varz").await;
    assert_eq!(v["leaf"]["tls_required"], true, "{v}");
    assert_eq!(v["leaf"]["tls_verify"], true, "{v}");
    assert_eq!(v["leaf"]["tls_timeout"], 2, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_and_hub_with_tls_handshake_first() {
    let pki = Pki::new("leaf-tls-first");
    let first = TlsOpts {
        handshake_first: Some(Duration::ZERO),
        ..pki.opts()
    };
    let hub = tls_hub(first.clone()).await;
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf = tls_leaf(&url, Some(first)).await;
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut l, &mut h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_without_tls_is_not_linked_to_a_tls_hub() {
    let pki = Pki::new("leaf-tls-none");
    let hub = tls_hub(pki.opts()).await;
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf = tls_leaf(&url, None).await;
    // A leaf with TLS links; the plain one never does (it gives up on the INFO each time).
    let ok = tls_leaf(&url, Some(pki.opts())).await;
    wait_links(&ok, 1).await;
    wait_links(&hub, 1).await;
    assert_eq!(common::leaf::links(&leaf), 0);
}

/// nats-server 2.15.1 with `conf`.
fn go_server(test: &str, conf: &str) -> NatsServer {
    let bin = natsserver::assert_installed_215();
    let dir = tmp_dir("leafnode_tls", test);
    let path = write_conf(&dir, "s.conf", conf);
    let wait = Wait {
        client: true,
        ..Wait::READY
    };
    natsserver::launch_bin(
        &bin,
        &["-c".to_string(), path.to_string_lossy().into_owned()],
        wait,
    )
}

/// A `tls {}` block for a nats-server remote (no `verify`: it is the hub that verifies).
fn go_remote_tls(pki: &Pki) -> String {
    format!(
        "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", timeout: 3 }}",
        pki.dir.join("cert.pem").display(),
        pki.dir.join("key.pem").display(),
        pki.dir.join("ca.pem").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_server_215_leaf_of_a_natsd_tls_hub() {
    let pki = Pki::new("leaf-tls-go-leaf");
    let hub = tls_hub(pki.opts()).await;
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ {{ url: \
         \"nats-leaf://127.0.0.1:{}\", {} }} ] }}\n",
        leaf_port(&hub),
        go_remote_tls(&pki)
    );
    let go = go_server("goleaf", &conf);
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    both_ways(&mut h, &mut l).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_of_a_nats_server_215_tls_hub() {
    let pki = Pki::new("leaf-tls-go-hub");
    let port = free_port();
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ listen: \"127.0.0.1:{port}\", {} }}\n",
        pki.go_block()
    );
    let go = go_server("gohub", &conf);
    let leaf = tls_leaf(&format!("nats-leaf://127.0.0.1:{port}"), Some(pki.opts())).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut l, &mut h).await;
    // The Go hub's INFO, as a leaf sees it before upgrading.
    let (_raw, info) = raw_leaf(port).await;
    assert_eq!(json_of(&info)["tls_required"], true, "{info}");
    wait_for("still linked", || {
        let ok = common::leaf::links(&leaf) == 1;
        async move { ok }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_first_with_nats_server_215_both_roles() {
    let pki = Pki::new("leaf-tls-go-first");
    let first = TlsOpts {
        handshake_first: Some(Duration::ZERO),
        ..pki.opts()
    };
    // A Go leaf of a natsd hub.
    let hub = tls_hub(first.clone()).await;
    let tls = go_remote_tls(&pki).replace(" }", ", handshake_first: true }");
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ {{ url: \
         \"nats-leaf://127.0.0.1:{}\", {tls} }} ] }}\n",
        leaf_port(&hub)
    );
    let go_leaf = go_server("goleaf-first", &conf);
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go_leaf.client).await;
    both_ways(&mut h, &mut l).await;
    // A natsd leaf of a Go hub.
    let port = free_port();
    let block = pki.go_block().replace(" }", ", handshake_first: true }");
    let conf =
        format!("listen: 127.0.0.1:-1\nleafnodes {{ listen: \"127.0.0.1:{port}\", {block} }}\n");
    let go_hub = go_server("gohub-first", &conf);
    let leaf = tls_leaf(&format!("nats-leaf://127.0.0.1:{port}"), Some(first)).await;
    wait_links(&leaf, 1).await;
    let mut g = Raw::client_at(go_hub.client).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut l, &mut g).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_blocks_from_config_files() {
    let pki = Pki::new("leaf-tls-conf");
    let hub_conf = format!(
        "leafnodes {{ listen: \"127.0.0.1:0\", tls {{ cert_file: \"{0}/cert.pem\", key_file: \
         \"{0}/key.pem\", ca_file: \"{0}/ca.pem\", verify: true, timeout: 2, \
         handshake_first: true }} }}\n",
        pki.dir.display()
    );
    let hub = start(common::conf_opts(&hub_conf)).await;
    let leaf_conf = format!(
        "leafnodes {{ reconnect: 1, remotes [ {{ url: \"tls://127.0.0.1:{1}\", tls {{ \
         cert_file: \"{0}/cert.pem\", key_file: \"{0}/key.pem\", ca_file: \"{0}/ca.pem\", \
         handshake_first: true }} }} ] }}\n",
        pki.dir.display(),
        leaf_port(&hub)
    );
    let leaf = start(common::conf_opts(&leaf_conf)).await;
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut h, &mut l).await;
    // A remote's tls block needs something to verify the hub with.
    let bad = format!(
        "leafnodes {{ remotes [ {{ url: \"nats-leaf://127.0.0.1:1\", tls {{ cert_file: \
         \"{0}/cert.pem\", key_file: \"{0}/key.pem\" }} }} ] }}\n",
        pki.dir.display()
    );
    let e = natsd::config::file::load_str(&bad)
        .err()
        .map(|e| e.to_string());
    assert!(e.as_deref().is_some_and(|e| e.contains("ca_file")), "{e:?}");
}
