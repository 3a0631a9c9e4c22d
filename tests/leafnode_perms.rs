//! A remote's `deny_imports` / `deny_exports`, as nats-server 2.15.1 applies them (watched on
//! loopback: docs/nats-server-behaviour.md §33): the leaf tells no interest its imports deny
//! and names them to the hub in CONNECT `deny_pub`; the hub sends none of those; the leaf
//! drops any that come anyway, sends nothing its exports deny and ignores the hub's interest
//! in them; a hub refuses a leaf's literal `LS+` for a subject it was told not to send.
//! natsd in both roles, with nats-server 2.15.1 in either role, and raw peers for each rule.

mod common;

use common::leaf::{has_interest, hub_opts, leaf_entries, leaf_opts, leaf_port, raw_leaf};
use common::leaf::{links, wait_links};
use common::natsserver::{self, NatsServer};
use common::{free_port, start, until_delivered, wait_for, Raw};
use natsd::{Options, Server};
use std::collections::BTreeSet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const IMPORTS: [&str; 2] = ["imp.deny", "imq.>"];
const EXPORTS: [&str; 1] = ["exp.deny"];

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A natsd leaf of the hub at `url` with the test's denies.
fn denied_leaf(url: &str) -> Options {
    let mut o = leaf_opts(Options::local(), url);
    if let Some(l) = o.leafnodes.as_mut() {
        l.remotes[0].deny_imports = strings(&IMPORTS);
        l.remotes[0].deny_exports = strings(&EXPORTS);
    }
    o
}

/// `(subject, sid)` of every message `c` gets until the `fence` message on `last`.
async fn until_fence(c: &mut Raw, last: &str) -> BTreeSet<(String, String)> {
    let mut got = BTreeSet::new();
    loop {
        let (s, sid, _, p) = c.msg().await;
        if s == last && p == b"fence" {
            return got;
        }
        got.insert((s, sid));
    }
}

fn set(v: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The rules end to end: `h` a client of the hub, `l` of the leaf (its remote has the denies).
async fn denies_hold(h: &mut Raw, l: &mut Raw) {
    l.send("SUB imp.deny 1\r\nSUB imp.ok 2\r\nSUB imq.x 3\r\nSUB imp.* 4\r\nSUB lready 5\r\n")
        .await;
    h.send("SUB exp.deny 11\r\nSUB exp.ok 12\r\nSUB exp.* 13\r\nSUB hready 14\r\n")
        .await;
    until_delivered(h, l, "lready").await;
    until_delivered(l, h, "hready").await;
    // From the hub only imp.ok arrives (its plain and its wildcard subscriber): imp.deny and
    // imq.x are denied imports, even to the leaf's `imp.*`.
    h.send(
        "PUB imp.deny 1\r\nx\r\nPUB imq.x 1\r\nx\r\nPUB imp.ok 1\r\nx\r\nPUB lready 5\r\nfence\r\n",
    )
    .await;
    assert_eq!(
        until_fence(l, "lready").await,
        set(&[("imp.ok", "2"), ("imp.ok", "4")])
    );
    // From the leaf only exp.ok leaves: exp.deny is a denied export, even to the hub's exp.*.
    l.send("PUB exp.deny 1\r\nx\r\nPUB exp.ok 1\r\nx\r\nPUB hready 5\r\nfence\r\n")
        .await;
    assert_eq!(
        until_fence(h, "hready").await,
        set(&[("exp.ok", "12"), ("exp.ok", "13")])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denies_between_natsd_leaf_and_natsd_hub() {
    let hub = start(hub_opts(Options::local())).await;
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf = start(denied_leaf(&url)).await;
    wait_links(&hub, 1).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    denies_hold(&mut h, &mut l).await;
    // What the hub was told: imp.ok and the wildcard imp.*, never imp.deny or imq.x.
    assert_eq!(leaf_entries(&hub, "$G", "imp.ok"), 2);
    assert_eq!(leaf_entries(&hub, "$G", "imp.deny"), 1, "imp.* only");
    assert_eq!(leaf_entries(&hub, "$G", "imq.x"), 0);
    // The leaf ignored the hub's interest in exp.deny (it matches exp.* only).
    assert_eq!(leaf_entries(&leaf, "$G", "exp.deny"), 1, "exp.* only");
    assert_eq!(leaf_entries(&leaf, "$G", "exp.ok"), 2);
}

fn go_server(bin: &str, test: &str, conf: &str) -> NatsServer {
    common::leaf::go_server(bin, "leafnode_perms", test, conf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denies_of_a_natsd_leaf_of_a_nats_server_215_hub() {
    let bin = natsserver::assert_installed_215();
    let port = free_port();
    let conf = format!(
        "listen: 127.0.0.1:-1\ndebug: true\nleafnodes {{ listen: \"127.0.0.1:{port}\" }}\n"
    );
    let go = go_server(&bin, "hub215", &conf);
    let leaf = start(denied_leaf(&format!("nats-leaf://127.0.0.1:{port}"))).await;
    wait_links(&leaf, 1).await;
    let mut h = Raw::client_at(go.client).await;
    let mut l = Raw::client(&leaf).await;
    denies_hold(&mut h, &mut l).await;
    // The Go hub read our deny_pub: it held back imp.deny itself (its debug log says so).
    wait_for("the Go hub holds back imp.deny", || {
        let ok = !go
            .log_lines("Not permitted to deliver to \"imp.deny\"")
            .is_empty();
        async move { ok }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denies_of_a_nats_server_215_leaf_of_a_natsd_hub() {
    let bin = natsserver::assert_installed_215();
    let hub = start(hub_opts(Options::local())).await;
    let conf = format!(
        "listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ {{ url: \
         \"nats-leaf://127.0.0.1:{}\", deny_imports: [\"imp.deny\", \"imq.>\"], \
         deny_exports: \"exp.deny\" }} ] }}\n",
        leaf_port(&hub)
    );
    let go = go_server(&bin, "leaf215", &conf);
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client_at(go.client).await;
    denies_hold(&mut h, &mut l).await;
    // The Go leaf told no interest its imports deny (imp.deny matches its imp.* only), and
    // took the hub's interest in exp.deny without a quarrel.
    assert_eq!(leaf_entries(&hub, "$G", "imq.x"), 0);
    assert_eq!(leaf_entries(&hub, "$G", "imp.deny"), 1);
    assert_eq!(links(&hub), 1);
}

/// A raw leaf of a natsd hub that says `deny_pub: ["imp.deny"]` and registers `LS+ imp.*`.
async fn raw_denying_leaf(hub: &Server) -> Raw {
    let (mut r, info) = raw_leaf(leaf_port(hub)).await;
    assert!(info.starts_with("INFO "), "{info}");
    r.send(
        "CONNECT {\"name\":\"raw\",\"headers\":false,\"deny_pub\":[\"imp.deny\"]}\r\nLS+ imp.*\r\n",
    )
    .await;
    wait_links(hub, 1).await;
    wait_for("the raw leaf's interest", || {
        let ok = has_interest(hub, "$G", "imp.x");
        async move { ok }
    })
    .await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_sends_no_message_its_leaf_denied_itself() {
    let hub = start(hub_opts(Options::local())).await;
    let mut r = raw_denying_leaf(&hub).await;
    let mut c = Raw::client(&hub).await;
    c.send("PUB imp.deny 1\r\nx\r\nPUB imp.ok 2\r\nok\r\n")
        .await;
    c.flush().await;
    let mut seen = Vec::new();
    loop {
        let l = r.next_non_ping().await;
        if l.starts_with("LMSG ") {
            seen.push(l.clone());
            if l.starts_with("LMSG imp.ok") {
                break;
            }
        }
    }
    assert_eq!(seen, ["LMSG imp.ok 2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leafs_interest_in_what_it_denied_is_a_violation() {
    let hub = start(hub_opts(Options::local())).await;
    let mut r = raw_denying_leaf(&hub).await;
    r.send("LS+ imp.deny\r\n").await;
    let mut text = String::new();
    while let Some(l) = r.try_line().await {
        text.push_str(&l);
        text.push('\n');
    }
    assert!(
        text.contains("-ERR 'Permissions Violation for Subscription to \"imp.deny\"'"),
        "{text}"
    );
    wait_links(&hub, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_drops_denied_imports_and_ignores_interest_in_denied_exports() {
    // A hub that honours nothing: it sends what the leaf denied.
    let ln = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = ln.local_addr().expect("addr").port();
    let leaf = start(denied_leaf(&format!("nats-leaf://127.0.0.1:{port}"))).await;
    let (mut s, _) = tokio::time::timeout(std::time::Duration::from_secs(10), ln.accept())
        .await
        .expect("natsd dials")
        .expect("accept");
    s.write_all(
        b"INFO {\"server_id\":\"RAWHUB\",\"server_name\":\"rawhub\",\"version\":\"2.15.1\",\
          \"proto\":3,\"headers\":true,\"max_payload\":1048576,\"client_id\":3,\
          \"leafnode_urls\":[]}\r\n",
    )
    .await
    .expect("write");
    let mut hub = Raw {
        stream: s,
        buf: Vec::new(),
    };
    let connect = hub.line().await;
    let json: serde_json::Value =
        serde_json::from_str(connect.strip_prefix("CONNECT ").expect("CONNECT")).expect("JSON");
    assert_eq!(json["deny_pub"], serde_json::json!(IMPORTS));
    wait_links(&leaf, 1).await;
    // The hub's interest: exp.deny is ignored, exp.ok taken.
    hub.send("LS+ exp.deny\r\nLS+ exp.ok\r\n").await;
    wait_for("the hub's exp.ok interest", || {
        let ok = has_interest(&leaf, "$G", "exp.ok");
        async move { ok }
    })
    .await;
    assert!(!has_interest(&leaf, "$G", "exp.deny"));
    // Messages on denied imports are dropped.
    let mut l = Raw::client(&leaf).await;
    l.send("SUB imp.* 1\r\n").await;
    l.flush().await;
    let mut told = String::new();
    while !told.contains("LS+ imp.*") {
        let mut b = [0u8; 4096];
        let n = hub.stream.read(&mut b).await.expect("read");
        assert!(n > 0, "leaf closed");
        told.push_str(&String::from_utf8_lossy(&b[..n]));
    }
    hub.send("LMSG imp.deny 1\r\nx\r\nLMSG imp.ok 2\r\nok\r\n")
        .await;
    let (s, sid, _, p) = l.msg().await;
    assert_eq!(
        (s.as_str(), sid.as_str(), &p[..]),
        ("imp.ok", "1", &b"ok"[..])
    );
    assert!(!l.sync().await.contains("MSG"));
}

#[test]
fn remote_denies_are_read_and_checked() {
    let o = common::conf_opts(
        "leafnodes { remotes [ { url: \"nats://127.0.0.1:7422\", deny_imports: \"a.>\", \
         deny_export: [\"b\", \"c.*\"] } ] }",
    );
    let r = &o.leafnodes.expect("leafnodes").remotes[0];
    assert_eq!(r.deny_imports, ["a.>"]);
    assert_eq!(r.deny_exports, ["b", "c.*"]);
    let bad = natsd::config::file::load_str(
        "leafnodes { remotes [ { url: \"nats://127.0.0.1:7422\", deny_imports: \"foo..bar\" } ] }",
    )
    .expect_err("an invalid subject");
    assert!(
        bad.to_string()
            .contains("subject \"foo..bar\" is not a valid subject"),
        "{bad}"
    );
}
