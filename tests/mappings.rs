//! Subject mappings (`mappings {}`), as nats-server has them: every mapping function gives
//! the subjects nats-server 2.15.1 gives for the same config (partitions included), publish
//! permissions are checked against the mapped subject, weighted destinations share the
//! traffic (the rest stays on the original subject), an account's mappings stay in that
//! account, a cluster-scoped destination wins on its cluster, and a reload swaps them.

mod common;

use common::leaf::go_server;
use common::natsserver::assert_installed_215;
use common::{conf_opts, start, Raw};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Mappings with every function nats-server 2.15 knows.
const MAPPINGS: &str = r#"mappings {
  foo: bar
  "orders.*.*": "o.$2.$1"
  "p.*": "p.{{partition(5,1)}}.{{wildcard(1)}}"
  "pp.*.*": "pp.{{ Partition(7, 2, 1) }}.$1.$2"
  "sp.*": "sp.{{split(1,-)}}"
  "sl.*": "sl.{{splitfromleft(1,3)}}"
  "sr.*": "sr.{{SplitFromRight(1,2)}}"
  "cl.*": "cl.{{slicefromleft(1,2)}}"
  "cr.*": "cr.{{slicefromright(1,2)}}"
  "lt.*": "lt.{{left(1,2)}}"
  "rt.*": "rt.{{right(1,2)}}"
  "gt.>": "moved.>"
}"#;

/// What a subscriber on `>` sees, in order, for each of `subjects` published once.
async fn delivered(addr: SocketAddr, subjects: &[String]) -> Vec<String> {
    let mut sub = Raw::client_at(addr).await;
    sub.send("SUB > 1\r\n").await;
    sub.flush().await;
    let mut publ = Raw::client_at(addr).await;
    for s in subjects {
        publ.send(&format!("PUB {s} 1\r\nx\r\n")).await;
    }
    publ.flush().await;
    let mut out = Vec::new();
    for _ in subjects {
        out.push(sub.msg().await.0);
    }
    out
}

fn subjects() -> Vec<String> {
    let mut v: Vec<String> = ["foo", "orders.a.b", "untouched", "gt.x.y", "orders.a"]
        .into_iter()
        .map(String::from)
        .collect();
    for i in 0..25 {
        v.push(format!("p.key{i}"));
        v.push(format!("pp.k{i}.v{}", i * 7));
    }
    for s in ["a-b-c", "-x--y-", "abcdefgh", "ab", "a", "nodash"] {
        for f in ["sp", "sl", "sr", "cl", "cr", "lt", "rt"] {
            v.push(format!("{f}.{s}"));
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mapping_function_maps_as_nats_server_215() {
    let go = go_server(
        &assert_installed_215(),
        "mappings",
        "functions",
        &format!("listen: \"127.0.0.1:-1\"\n{MAPPINGS}"),
    );
    let natsd = start(conf_opts(MAPPINGS)).await;
    let subjects = subjects();
    let want = delivered(go.client, &subjects).await;
    let got = delivered(natsd.client_addr(), &subjects).await;
    // A few by hand, so that a server that maps nothing cannot agree with itself.
    assert_eq!(
        &want[..5],
        ["bar", "o.b.a", "untouched", "moved.x.y", "orders.a"]
    );
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g, w, "{:?}", subjects[i]);
    }
    natsd.shutdown().await;
}

#[tokio::test]
async fn publish_permissions_apply_to_the_mapped_subject() {
    let conf = r#"
mappings { foo: bar, baz: secret }
authorization {
  users [ { user: u, password: p, permissions { publish: { allow: ["bar", "baz"] } } } ]
}"#;
    let srv = start(conf_opts(conf)).await;
    let connect = r#"{"verbose":false,"user":"u","pass":"p"}"#;
    let mut sub = Raw::connected(&srv, connect).await;
    sub.send("SUB bar 1\r\n").await;
    sub.flush().await;
    let mut c = Raw::connected(&srv, connect).await;
    // `foo` itself is not allowed, `bar` is: it goes.
    c.send("PUB foo 2\r\nhi\r\n").await;
    assert_eq!(c.sync().await, "");
    assert_eq!(sub.msg().await.0, "bar");
    // `baz` is allowed but maps to `secret`, which is not.
    c.send("PUB baz 2\r\nhi\r\n").await;
    assert_eq!(
        c.sync().await,
        "-ERR 'Permissions Violation for Publish to \"secret\"'\r\n"
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn weighted_destinations_share_the_traffic_and_the_rest_stays() {
    let conf = r#"
mappings {
  w: [ { destination: wa, weight: 50% }, { destination: wb, weight: "50" } ]
  r: { destination: ra, weight: 40% }
}"#;
    let srv = start(conf_opts(conf)).await;
    let mut sub = Raw::client(&srv).await;
    sub.send("SUB > 1\r\n").await;
    sub.flush().await;
    let mut c = Raw::client(&srv).await;
    for _ in 0..400 {
        c.send("PUB w 0\r\n\r\nPUB r 0\r\n\r\n").await;
    }
    c.flush().await;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for _ in 0..800 {
        *seen.entry(sub.msg().await.0).or_default() += 1;
    }
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["r", "ra", "wa", "wb"]);
    // Each share is far from none and from all (400 draws).
    for (k, n) in &seen {
        assert!((60..340).contains(n), "{k}: {n} of 400 ({seen:?})");
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn an_accounts_mappings_stay_in_that_account() {
    let conf = r#"
accounts {
  A: { users: [ { user: a, password: a } ], mappings: { foo: "a.foo" } }
  B: { users: [ { user: b, password: b } ] }
}"#;
    let srv = start(conf_opts(conf)).await;
    for (user, want) in [("a", "a.foo"), ("b", "foo")] {
        let connect = format!(r#"{{"verbose":false,"user":"{user}","pass":"{user}"}}"#);
        let mut c = Raw::connected(&srv, &connect).await;
        c.send("SUB > 1\r\n").await;
        c.flush().await;
        c.send("PUB foo 0\r\n\r\n").await;
        assert_eq!(c.msg().await.0, want, "account of {user}");
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn a_cluster_scoped_destination_wins_on_its_cluster() {
    let conf = |cluster: &str| {
        format!(
            r#"
mappings {{ c: [ {{ destination: all, weight: 100% }}, {{ destination: east, weight: 100%, cluster: E }} ] }}
cluster {{ name: {cluster}, listen: "127.0.0.1:-1" }}"#
        )
    };
    for (cluster, want) in [("E", "east"), ("W", "all")] {
        let srv = start(conf_opts(&conf(cluster))).await;
        let mut c = Raw::client(&srv).await;
        c.send("SUB > 1\r\n").await;
        c.flush().await;
        c.send("PUB c 0\r\n\r\n").await;
        assert_eq!(c.msg().await.0, want, "on cluster {cluster}");
        srv.shutdown().await;
    }
}

#[tokio::test]
async fn a_reload_swaps_the_mappings() {
    let srv = start(conf_opts("mappings { foo: bar }")).await;
    let mut c = Raw::client(&srv).await;
    c.send("SUB > 1\r\n").await;
    c.flush().await;
    c.send("PUB foo 0\r\n\r\n").await;
    assert_eq!(c.msg().await.0, "bar");
    let mut new = (*srv.options()).clone();
    new.account_mappings = conf_opts("mappings { foo: baz }").account_mappings;
    srv.reload(new.clone()).expect("reloaded");
    c.send("PUB foo 0\r\n\r\n").await;
    assert_eq!(c.msg().await.0, "baz");
    new.account_mappings.clear();
    srv.reload(new).expect("reloaded");
    c.send("PUB foo 0\r\n\r\n").await;
    assert_eq!(c.msg().await.0, "foo");
    srv.shutdown().await;
}

/// An account JWT's `mappings` (a weight left out is the whole traffic, as the jwt library's
/// `GetWeight`), on natsd and on nats-server 2.15.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_jwts_mappings_apply_as_on_nats_server_215() {
    use common::auth::{logged_in, open_limits, user_jwt, Target};
    use nkeys::KeyPair;
    use serde_json::json;
    let (op, sys, a) = (
        KeyPair::new_operator(),
        KeyPair::new_account(),
        KeyPair::new_account(),
    );
    let opc = json!({"sub": op.public_key(), "name": "O", "nats": {"type": "operator",
        "version": 2, "system_account": sys.public_key()}});
    let account = |kp: &KeyPair, mappings: serde_json::Value| {
        let c = json!({"sub": kp.public_key(), "name": "acc", "nats": {"type": "account",
            "version": 2, "limits": open_limits(), "mappings": mappings}});
        natsd::jwt::encode(&c, &op).expect("account JWT")
    };
    let mappings = json!({
        "foo": [{"subject": "bar", "weight": 100}],
        "orders.*": [{"subject": "o.$1"}],
    });
    let conf = format!(
        "operator: \"{}\"\nsystem_account: {sys}\nresolver: MEMORY\n\
         resolver_preload {{\n  {sys}: \"{}\"\n  {a}: \"{}\"\n}}\n",
        natsd::jwt::encode(&opc, &op).expect("operator JWT"),
        account(&sys, json!({})),
        account(&a, mappings),
        sys = sys.public_key(),
        a = a.public_key(),
    );
    let user = KeyPair::new_user();
    let jwt = user_jwt(&user, &a, json!({}));
    for t in [
        Target::natsd(&conf).await,
        Target::go(&conf, "mappings_jwt"),
    ] {
        let mut c = logged_in(&t, &jwt, &user).await;
        c.send("SUB > 1\r\n").await;
        c.flush().await;
        c.send("PUB foo 0\r\n\r\nPUB orders.7 0\r\n\r\nPUB other 0\r\n\r\n")
            .await;
        let got = [c.msg().await.0, c.msg().await.0, c.msg().await.0];
        assert_eq!(got, ["bar", "o.7", "other"], "{}", t.name());
        t.stop().await;
    }
}

/// A leaf's client publishes `foo` until the hub's subscriber on `bar` (the hub maps `foo` to
/// `bar`) gets it: the hub told its leaf of the mapping source, which nothing subscribes to
/// (nats-server's `forceAddToSmap`).
async fn a_leaf_publish_on_a_hub_mapping_source_is_mapped(hub: SocketAddr, leaf: SocketAddr) {
    let mut sub = Raw::client_at(hub).await;
    sub.send("SUB bar 1\r\n").await;
    sub.flush().await;
    let mut publ = Raw::client_at(leaf).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        publ.send("PUB foo 2\r\nhi\r\n").await;
        publ.flush().await;
        if sub.sync().await.contains("MSG bar 1 2") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the leaf never sent the hub's mapping source"
        );
    }
}

const HUB_MAPPING: &str = "mappings { foo: bar }\nleafnodes { listen: \"127.0.0.1:-1\" }";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_sends_what_the_natsd_hub_maps() {
    let hub = start(conf_opts(HUB_MAPPING)).await;
    let url = format!("nats-leaf://127.0.0.1:{}", common::leaf::leaf_port(&hub));
    let leaf = start(common::leaf::leaf_opts(natsd::Options::local(), &url)).await;
    common::leaf::wait_links(&leaf, 1).await;
    a_leaf_publish_on_a_hub_mapping_source_is_mapped(hub.client_addr(), leaf.client_addr()).await;
    // A nats-server 2.15.1 leaf of the natsd hub likewise.
    let bin = assert_installed_215();
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ {{ url: \"{url}\" }} ] }}\n"
    );
    let go = go_server(&bin, "mappings", "leaf215", &conf);
    common::leaf::wait_links(&hub, 2).await;
    a_leaf_publish_on_a_hub_mapping_source_is_mapped(hub.client_addr(), go.client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_tells_the_leaves_of_new_and_gone_mapping_sources() {
    let hub = start(conf_opts("leafnodes { listen: \"127.0.0.1:-1\" }")).await;
    let url = format!("nats-leaf://127.0.0.1:{}", common::leaf::leaf_port(&hub));
    let leaf = start(common::leaf::leaf_opts(natsd::Options::local(), &url)).await;
    common::leaf::wait_links(&leaf, 1).await;
    let told = |yes: bool| {
        let ok = common::leaf::leaf_entries(&leaf, "$G", "foo") == usize::from(yes);
        async move { ok }
    };
    assert!(told(false).await, "no mapping yet: nothing told");
    let mut new = (*hub.options()).clone();
    new.account_mappings = conf_opts("mappings { foo: bar }").account_mappings;
    hub.reload(new.clone()).expect("reloaded");
    common::wait_for("the new mapping source told to the leaf", || told(true)).await;
    a_leaf_publish_on_a_hub_mapping_source_is_mapped(hub.client_addr(), leaf.client_addr()).await;
    new.account_mappings.clear();
    hub.reload(new).expect("reloaded");
    common::wait_for("the gone mapping source taken back", || told(false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_sends_what_a_nats_server_215_hub_maps() {
    let bin = assert_installed_215();
    let port = common::free_port();
    let conf = format!("listen: 127.0.0.1:-1\nmappings {{ foo: bar }}\nleafnodes {{ listen: \"127.0.0.1:{port}\" }}\n");
    let go = go_server(&bin, "mappings", "hub215", &conf);
    let url = format!("nats-leaf://127.0.0.1:{port}");
    let leaf = start(common::leaf::leaf_opts(natsd::Options::local(), &url)).await;
    common::leaf::wait_links(&leaf, 1).await;
    a_leaf_publish_on_a_hub_mapping_source_is_mapped(go.client, leaf.client_addr()).await;
}
