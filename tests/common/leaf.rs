//! Leafnode test helpers: natsd hubs and leaves (embedded, port 0), their leaf ports and
//! links, and a raw connection to a leafnode port.

use natsd::config::leaf::{LeafOpts, RemoteLeafOpts};
use natsd::{Options, Server};

/// A leafnode listener on 127.0.0.1, port 0.
pub fn listener() -> LeafOpts {
    LeafOpts {
        host: "127.0.0.1".into(),
        port: Some(0),
        ..LeafOpts::default()
    }
}

/// `base` with a leafnode listener.
pub fn hub_opts(base: Options) -> Options {
    Options {
        leafnodes: Some(listener()),
        ..base
    }
}

/// `base` as a leaf of the hub at `url` (one remote, bound to `$G`), retrying fast.
pub fn leaf_opts(base: Options, url: &str) -> Options {
    Options {
        leafnodes: Some(LeafOpts {
            reconnect: Some(std::time::Duration::from_millis(100)),
            remotes: vec![RemoteLeafOpts {
                urls: vec![url.to_string()],
                ..RemoteLeafOpts::default()
            }],
            ..LeafOpts::default()
        }),
        ..base
    }
}

/// The port a natsd hub's leafnode listener is bound to.
pub fn leaf_port(s: &Server) -> u16 {
    s.shared()
        .leafnodes
        .as_ref()
        .and_then(|l| l.listen_addr.get())
        .map(|a| a.port())
        .expect("leafnode listener")
}

/// How many leaf connections a natsd server has registered (both roles).
pub fn links(s: &Server) -> usize {
    s.shared().leafnodes.as_ref().map_or(0, |l| l.links().len())
}

/// Wait until `s` has `n` registered leaf connections.
pub async fn wait_links(s: &Server, n: usize) {
    super::wait_for(&format!("{n} leaf connections"), || {
        let ok = links(s) == n;
        async move { ok }
    })
    .await;
}

/// A natsd hub and a natsd leaf of it, linked.
pub async fn natsd_pair() -> (Server, Server) {
    let hub = super::start(hub_opts(Options::local())).await;
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf = super::start(leaf_opts(Options::local(), &url)).await;
    wait_links(&hub, 1).await;
    wait_links(&leaf, 1).await;
    (hub, leaf)
}

/// Whether account `acc` of `s` has interest in `subject`.
pub fn has_interest(s: &Server, acc: &str, subject: &str) -> bool {
    s.shared()
        .accounts
        .get(acc)
        .is_some_and(|a| a.sublist.has_interest(subject.as_bytes()))
}

/// How many entries of leaf connections match `subject` in account `acc` of `s` (plain and
/// queue members).
pub fn leaf_entries(s: &Server, acc: &str, subject: &str) -> usize {
    let Some(a) = s.shared().accounts.get(acc) else {
        return 0;
    };
    let r = a.sublist.matches(subject.as_bytes());
    let leaf = |e: &&natsd::account::SubRef| e.conn.kind == natsd::conn::ConnKind::Leaf;
    r.psubs.iter().filter(leaf).count()
        + r.qsubs
            .iter()
            .map(|g| g.members.iter().filter(leaf).count())
            .sum::<usize>()
}

/// A raw connection to a leafnode port: its INFO read and returned.
pub async fn raw_leaf(port: u16) -> (super::Raw, String) {
    let mut r = super::Raw::at_any(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
    let info = r.line().await;
    (r, info)
}

/// nats-server `bin` with `conf` (written under the temp dir of `suite`/`test`), its client
/// listener on a random port.
pub fn go_server(bin: &str, suite: &str, test: &str, conf: &str) -> super::natsserver::NatsServer {
    let dir = super::binary::tmp_dir(suite, test);
    let path = super::binary::write_conf(&dir, "s.conf", conf);
    super::natsserver::launch_bin(
        bin,
        &["-c".to_string(), path.to_string_lossy().into_owned()],
        super::natsserver::Wait {
            client: true,
            ..super::natsserver::Wait::READY
        },
    )
}

/// `o` with JetStream in domain `domain`, stored in a fresh directory named after `suite`
/// and `test`.
#[allow(dead_code)]
pub fn with_js(suite: &str, o: Options, test: &str, domain: &str) -> Options {
    Options {
        jetstream: Some(natsd::config::JetStreamOpts {
            store_dir: Some(super::js_dir(&format!("{suite}-{test}-{domain}"))),
            domain: Some(domain.to_string()),
            ..Default::default()
        }),
        ..o
    }
}

/// nats-server `bin` with JetStream in domain `domain` and the `leafnodes` block `leaf`.
#[allow(dead_code)]
pub fn go_js(
    bin: &str,
    suite: &str,
    test: &str,
    domain: &str,
    leaf: &str,
) -> super::natsserver::NatsServer {
    let dir = super::js_dir(&format!("{suite}-go-{test}"));
    let conf = format!(
        "listen: 127.0.0.1:-1\njetstream {{ store_dir: \"{}\", domain: {domain} }}\n{leaf}\n",
        dir.display()
    );
    go_server(bin, suite, test, &conf)
}

/// A nats-server `bin` hub (JetStream domain `hub`) and a natsd leaf of it (domain `leaf`),
/// linked.
#[allow(dead_code)]
pub async fn go_hub_natsd_leaf(
    bin: &str,
    suite: &str,
    test: &str,
) -> (super::natsserver::NatsServer, Server) {
    let port = super::free_port();
    let listen = format!("leafnodes {{ listen: \"127.0.0.1:{port}\" }}");
    let go = go_js(bin, suite, test, "hub", &listen);
    let url = format!("nats-leaf://127.0.0.1:{port}");
    let leaf = super::start(with_js(
        suite,
        leaf_opts(Options::local(), &url),
        test,
        "leaf",
    ))
    .await;
    wait_links(&leaf, 1).await;
    (go, leaf)
}

/// A natsd hub (JetStream domain `hub`) and a nats-server `bin` leaf of it (domain `leaf`),
/// linked.
#[allow(dead_code)]
pub async fn natsd_hub_go_leaf(
    bin: &str,
    suite: &str,
    test: &str,
) -> (Server, super::natsserver::NatsServer) {
    let hub = super::start(with_js(suite, hub_opts(Options::local()), test, "hub")).await;
    let remote = format!(
        "leafnodes {{ reconnect: 1, remotes [ {{ url: \"nats-leaf://127.0.0.1:{}\" }} ] }}",
        leaf_port(&hub)
    );
    let go = go_js(bin, suite, test, "leaf", &remote);
    wait_links(&hub, 1).await;
    (hub, go)
}

/// A natsd hub (JetStream domain `hub`) and a natsd leaf of it (domain `leaf`), linked; the
/// leaf's options come back too (a restart on the same store).
#[allow(dead_code)]
pub async fn natsd_js_pair(suite: &str, test: &str) -> (Server, Server, Options) {
    let hub = super::start(with_js(suite, hub_opts(Options::local()), test, "hub")).await;
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf_o = with_js(suite, leaf_opts(Options::local(), &url), test, "leaf");
    let leaf = super::start(leaf_o.clone()).await;
    wait_links(&hub, 1).await;
    wait_links(&leaf, 1).await;
    (hub, leaf, leaf_o)
}
