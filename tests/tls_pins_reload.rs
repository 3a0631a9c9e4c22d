//! A reload that changes `pinned_certs` in the cluster `tls` block, as nats-server's
//! `recheckPinnedCerts`: the connected peers whose certificate the new set does not list are
//! closed, new ones are checked against the new set, and a reload back lets them in again. The
//! leafnodes block's cannot change on a reload, as on nats-server 2.15.1
//! (docs/nats-server-behaviour.md §44).

mod common;

use common::cluster::{cluster_opts, node_opts, route_port};
use common::natsserver;
use common::pki::Pki;
use common::{start, wait_for};
use natsd::config::leaf::{LeafOpts, RemoteLeafOpts};
use natsd::{Options, Server};
use rcgen::DnType;
use std::collections::BTreeSet;
use std::time::Duration;

fn pins(key: &str) -> Option<BTreeSet<String>> {
    Some([key.to_string()].into_iter().collect())
}

/// `count` stays at 0 for a while: peers that keep retrying are refused each time.
async fn stays_refused(what: &str, count: impl Fn() -> usize) {
    let joined = tokio::time::timeout(Duration::from_millis(1500), async {
        while count() == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        joined.is_err(),
        "{what}: a peer the new pins do not list got in"
    );
}

/// `s` with the `pinned_certs` of its cluster `tls` block set to `set`, reloaded.
fn reload_pins(s: &Server, set: Option<BTreeSet<String>>) {
    let mut o = (*s.options()).clone();
    let tls = o.cluster.as_mut().and_then(|c| c.tls.as_mut());
    tls.expect("a tls block").pinned_certs = set;
    s.reload(o).expect("the reload is accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_the_new_pins_do_not_list_is_closed_and_kept_out() {
    let pki = Pki::new("pinreload-routes");
    let other = pki.issue("other", &[(DnType::CommonName, "other")], vec![]);
    let node = |name: &str, seed: Option<u16>, pin: Option<BTreeSet<String>>| {
        let mut tls = pki.opts();
        tls.pinned_certs = pin;
        Options {
            cluster: Some(natsd::config::ClusterOpts {
                tls: Some(tls),
                ..cluster_opts(seed)
            }),
            ..node_opts(name, seed)
        }
    };
    let a = start(node("a", None, pins(&pki.node_spki_sha256()))).await;
    let b = start(node("b", Some(route_port(&a)), None)).await;
    let routes = || a.shared().cluster.as_ref().map_or(0, |c| c.num_routes());
    // The whole pool (3 connections and the system account's) first: one still in its
    // handshake when the reload comes would register after the check.
    wait_for("the pinned routes", || {
        let ok = routes() == 4;
        async move { ok }
    })
    .await;
    reload_pins(&a, pins(&other.spki_sha256));
    wait_for("the route closed by the reload", || {
        let ok = routes() == 0;
        async move { ok }
    })
    .await;
    stays_refused("routes", routes).await;
    reload_pins(&a, pins(&pki.node_spki_sha256()));
    wait_for("the route back after the reload back", || {
        let ok = routes() > 0;
        async move { ok }
    })
    .await;
    b.shutdown().await;
    a.shutdown().await;
}

/// A natsd leaf presenting the node certificate, dialling `port` over TLS.
fn tls_leaf(pki: &Pki, port: u16) -> Options {
    Options {
        leafnodes: Some(LeafOpts {
            reconnect: Some(Duration::from_millis(100)),
            remotes: vec![RemoteLeafOpts {
                urls: vec![format!("nats-leaf://localhost:{port}")],
                tls: Some(pki.opts()),
                ..RemoteLeafOpts::default()
            }],
            ..LeafOpts::default()
        }),
        ..Options::local()
    }
}

fn links(s: &Server) -> usize {
    common::leaf::links(s)
}

/// The leafnodes block's `pinned_certs` cannot change on a reload: nats-server 2.15.1 refuses
/// it (`config reload not supported for LeafNode: field "TLSPinnedCerts"`), and natsd too;
/// the leaf stays connected on both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leafnodes_pins_reload_is_refused_as_by_nats_server_215() {
    let pki = Pki::new("pinreload-leaf");
    let other = pki.issue("other", &[(DnType::CommonName, "other")], vec![]);
    let mut tls = pki.opts();
    tls.pinned_certs = pins(&pki.node_spki_sha256());
    let hub = start(Options {
        leafnodes: Some(LeafOpts {
            tls: Some(tls),
            ..common::leaf::listener()
        }),
        ..Options::local()
    })
    .await;
    let leaf = start(tls_leaf(&pki, common::leaf::leaf_port(&hub))).await;
    common::leaf::wait_links(&hub, 1).await;
    let mut o = (*hub.options()).clone();
    if let Some(t) = o.leafnodes.as_mut().and_then(|l| l.tls.as_mut()) {
        t.pinned_certs = pins(&other.spki_sha256);
    }
    let e = hub.reload(o).expect_err("refused");
    assert!(
        e.contains("config reload not supported for LeafNode"),
        "{e}"
    );
    assert_eq!(links(&hub), 1);

    let bin = natsserver::assert_installed_215();
    let port = common::free_port();
    let conf = |pin: &str| {
        format!(
            "listen: 127.0.0.1:-1\nleafnodes {{ listen: \"127.0.0.1:{port}\", {} }}\n",
            pki.go_block()
                .replace(" }", &format!(", pinned_certs: [\"{pin}\"] }}"))
        )
    };
    let dir = common::binary::tmp_dir("tls_pins_reload", "hub215");
    let path = common::binary::write_conf(&dir, "s.conf", &conf(&pki.node_spki_sha256()));
    let go = natsserver::launch_bin(
        &bin,
        &["-c".to_string(), path.to_string_lossy().into_owned()],
        natsserver::Wait {
            client: true,
            ..natsserver::Wait::READY
        },
    );
    let leaf215 = start(tls_leaf(&pki, port)).await;
    common::leaf::wait_links(&leaf215, 1).await;
    common::binary::write_conf(&dir, "s.conf", &conf(&other.spki_sha256));
    let st = std::process::Command::new("kill")
        .args(["-HUP", &go.pid().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    let refused = "config reload not supported for LeafNode: field \"TLSPinnedCerts\"";
    wait_for("nats-server's refusal", || {
        let ok = !go.log_lines(refused).is_empty();
        async move { ok }
    })
    .await;
    assert_eq!(links(&leaf215), 1);
    leaf215.shutdown().await;
    leaf.shutdown().await;
    hub.shutdown().await;
}
