//! Leafnodes between natsd servers (issue 18): a hub and a leaf of it, embedded on port 0.
//! Pub/sub both ways, request/reply, headers, queue groups (local members first, each
//! message once), unsubscribe, account binding, auth failure, bad input on the leaf port,
//! a hub cluster of two carrying a leaf's interest, and its `leafnode_urls` gossip (INFO
//! updates, `no_advertise`, a leaf failing over to a node it only learned of).

mod common;

use common::cluster::{mesh_with, node_opts, route_port, routes};
use common::leaf::{
    has_interest, hub_opts, leaf_entries, leaf_opts, leaf_port, natsd_pair, raw_leaf, wait_links,
};
use common::{start, until_delivered, wait_for, Raw};
use natsd::config::leaf::LeafUser;
use natsd::Options;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_sub_request_reply_and_headers_both_ways() {
    let (hub, leaf) = natsd_pair().await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    // Hub → leaf.
    l.send("SUB foo 1\r\n").await;
    until_delivered(&mut h, &mut l, "foo").await;
    // Leaf → hub.
    h.send("SUB bar 1\r\n").await;
    until_delivered(&mut l, &mut h, "bar").await;
    // Headers cross as HMSG.
    h.send("HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n").await;
    assert_eq!(l.next_non_ping().await, "HMSG foo 1 12 14");
    assert_eq!(l.payload(14).await, b"NATS/1.0\r\n\r\nhi");
    // Request on the hub, service on the leaf, reply back to the hub.
    l.send("SUB svc 2\r\n").await;
    until_delivered(&mut h, &mut l, "svc").await;
    h.send("SUB _INBOX.h.> 3\r\n").await;
    until_delivered(&mut l, &mut h, "_INBOX.h.probe").await;
    h.send("PUB svc _INBOX.h.1 4\r\nping\r\n").await;
    let (s, _, reply, p) = l.msg().await;
    assert_eq!(
        (s.as_str(), reply.as_deref(), &p[..]),
        ("svc", Some("_INBOX.h.1"), &b"ping"[..])
    );
    l.send("PUB _INBOX.h.1 4\r\npong\r\n").await;
    let (s, sid, _, p) = h.msg().await;
    assert_eq!(
        (s.as_str(), sid.as_str(), &p[..]),
        ("_INBOX.h.1", "3", &b"pong"[..])
    );
    // A message from the leaf is not sent back to it (its own subscriber gets it once).
    l.send("SUB echo 9\r\n").await;
    until_delivered(&mut h, &mut l, "echo").await;
    l.send("PUB echo 1\r\nx\r\n").await;
    let (s, _, _, _) = l.msg().await;
    assert_eq!(s, "echo");
    let rest = l.sync().await;
    assert!(!rest.contains("MSG"), "echoed twice: {rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_propagates() {
    let (hub, leaf) = natsd_pair().await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    l.send("SUB gone 1\r\nSUB gq grp 2\r\n").await;
    until_delivered(&mut h, &mut l, "gone").await;
    wait_for("queue interest on the hub", || {
        let ok = has_interest(&hub, "$G", "gq");
        async move { ok }
    })
    .await;
    l.send("UNSUB 1\r\nUNSUB 2\r\n").await;
    l.sync().await;
    wait_for("interest gone from the hub", || {
        let ok = !has_interest(&hub, "$G", "gone") && !has_interest(&hub, "$G", "gq");
        async move { ok }
    })
    .await;
    // And the other way: the hub's client unsubscribes, the leaf forgets.
    h.send("SUB back 1\r\n").await;
    until_delivered(&mut l, &mut h, "back").await;
    h.send("UNSUB 1\r\n").await;
    h.sync().await;
    wait_for("interest gone from the leaf", || {
        let ok = !has_interest(&leaf, "$G", "back");
        async move { ok }
    })
    .await;
}

/// Read `n` messages off `c` (ignoring probes), returning how many each sid got.
async fn count_by_sid(c: &mut Raw, n: usize) -> std::collections::HashMap<String, usize> {
    let mut by = std::collections::HashMap::new();
    for _ in 0..n {
        let (_, sid, _, _) = c.msg().await;
        *by.entry(sid).or_insert(0) += 1;
    }
    by
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_groups_prefer_local_members_and_deliver_once() {
    let (hub, leaf) = natsd_pair().await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    // Two members on the hub (one connection, two sids), one on the leaf.
    h.send("SUB work g 1\r\nSUB work g 2\r\nSUB ready 3\r\n")
        .await;
    l.send("SUB work g 7\r\n").await;
    // `ready` crossed after `work g`: the leaf knows the hub's queue interest.
    until_delivered(&mut l, &mut h, "ready").await;
    wait_for("leaf queue interest on the hub", || {
        let ok = leaf_entries(&hub, "$G", "work") == 1;
        async move { ok }
    })
    .await;
    // From the hub: only the hub's members.
    for _ in 0..50 {
        h.send("PUB work 1\r\nx\r\n").await;
    }
    let by = count_by_sid(&mut h, 50).await;
    assert_eq!(by.values().sum::<usize>(), 50);
    assert!(by.len() == 2, "both local members serve: {by:?}");
    let rest = l.sync().await;
    assert!(
        !rest.contains("MSG"),
        "the leaf's member got some: {rest:?}"
    );
    // From the leaf: only the leaf's member.
    for _ in 0..50 {
        l.send("PUB work 1\r\nx\r\n").await;
    }
    assert_eq!(count_by_sid(&mut l, 50).await.get("7"), Some(&50));
    let rest = h.sync().await;
    assert!(
        !rest.contains("MSG"),
        "the hub's members got some: {rest:?}"
    );
    // The leaf's member leaves: the hub's members serve the leaf's publishes, once each.
    l.send("UNSUB 7\r\n").await;
    l.sync().await;
    wait_for("leaf member gone from the hub", || {
        let ok = leaf_entries(&hub, "$G", "work") == 0;
        async move { ok }
    })
    .await;
    for _ in 0..50 {
        l.send("PUB work 1\r\nx\r\n").await;
    }
    let by = count_by_sid(&mut h, 50).await;
    assert_eq!(by.values().sum::<usize>(), 50, "{by:?}");
    let rest = h.sync().await;
    assert!(!rest.contains("MSG"), "a message twice: {rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaf_user_binds_its_account_and_bad_credentials_are_refused() {
    let mut opts = hub_opts(Options {
        accounts: vec!["A".into()],
        ..Options::local()
    });
    if let Some(l) = opts.leafnodes.as_mut() {
        l.users = vec![LeafUser {
            user: "lu".into(),
            password: "lp".into(),
            account: Some("A".into()),
        }];
    }
    let hub = start(opts).await;
    let port = leaf_port(&hub);
    // Wrong password: -ERR and closed, as nats-server.
    let (mut raw, info) = raw_leaf(port).await;
    assert!(
        info.starts_with("INFO {") && info.contains("\"auth_required\":true"),
        "{info}"
    );
    raw.send("CONNECT {\"user\":\"lu\",\"pass\":\"nope\",\"headers\":true}\r\n")
        .await;
    assert_eq!(raw.line().await, "-ERR 'Authorization Violation'");
    assert!(raw.closed().await);
    // Right credentials: the leaf's $G is the hub's A.
    let url = format!("nats-leaf://lu:lp@127.0.0.1:{port}");
    let leaf = start(leaf_opts(Options::local(), &url)).await;
    wait_links(&hub, 1).await;
    let mut l = Raw::client(&leaf).await;
    l.send("SUB inA 1\r\n").await;
    wait_for("leaf interest in account A", || {
        let ok = has_interest(&hub, "A", "inA") && !has_interest(&hub, "$G", "inA");
        async move { ok }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_the_leaf_port_closes_only_that_connection() {
    let (hub, leaf) = natsd_pair().await;
    let port = leaf_port(&hub);
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    l.send("SUB ok 1\r\n").await;
    until_delivered(&mut h, &mut l, "ok").await;
    let connect = "CONNECT {\"headers\":true,\"name\":\"bad\"}\r\n";
    for (what, bytes) in [
        (
            "bad CONNECT JSON",
            "CONNECT {\"headers\":tru\r\n".to_string(),
        ),
        ("LS+ without subject", format!("{connect}LS+ \r\n")),
        ("LS+ with a bad weight", format!("{connect}LS+ foo q x\r\n")),
        ("LMSG with a bad size", format!("{connect}LMSG foo abc\r\n")),
        (
            "LMSG shorter than said",
            format!("{connect}LMSG foo 2\r\nabcdef\r\n"),
        ),
        (
            "HMSG header larger than the total",
            format!("{connect}HMSG foo 9 3\r\nabc\r\n"),
        ),
        (
            "RMSG on a leaf port",
            format!("{connect}RMSG $G foo 1\r\nx\r\n"),
        ),
        ("LS+ before CONNECT", "LS+ foo\r\n".to_string()),
    ] {
        let (mut raw, _) = raw_leaf(port).await;
        raw.send(&bytes).await;
        assert!(raw.closed().await, "{what}: not closed");
    }
    // The good leaf still works.
    h.send("PUB ok 2\r\nok\r\n").await;
    let (s, _, _, p) = l.msg().await;
    assert_eq!((s.as_str(), &p[..]), ("ok", &b"ok"[..]));
    assert_eq!(common::leaf::links(&hub), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_cluster_carries_leaf_interest_both_ways() {
    let nodes = mesh_with(2, |name, seed| hub_opts(node_opts(name, seed))).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(a));
    let leaf = start(leaf_opts(Options::local(), &url)).await;
    wait_links(a, 1).await;
    let mut l = Raw::client(&leaf).await;
    let mut cb = Raw::client(b).await;
    // A subscriber on the leaf gets what B's client publishes (leaf → A → route → B).
    l.send("SUB onleaf 1\r\n").await;
    until_delivered(&mut cb, &mut l, "onleaf").await;
    // B's subscriber gets what the leaf's client publishes (B's interest reached the leaf).
    cb.send("SUB onb 1\r\n").await;
    until_delivered(&mut l, &mut cb, "onb").await;
    // Queue: a member on B only; the leaf's publishes reach it once each.
    cb.send("SUB qb g 2\r\n").await;
    wait_for("B's queue interest on the leaf", || {
        let ok = has_interest(&leaf, "$G", "qb");
        async move { ok }
    })
    .await;
    for _ in 0..20 {
        l.send("PUB qb 1\r\nx\r\n").await;
    }
    let mut n = 0;
    for _ in 0..20 {
        let (s, _, _, _) = cb.msg().await;
        n += usize::from(s == "qb");
    }
    assert_eq!(n, 20);
    let rest = cb.sync().await;
    assert!(!rest.contains("MSG qb"), "a message twice: {rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_sending_back_our_loop_subject_is_closed() {
    let hub = start(hub_opts(Options::local())).await;
    let (mut raw, _) = raw_leaf(leaf_port(&hub)).await;
    raw.send("CONNECT {\"headers\":true}\r\n").await;
    // The hub's interest dump carries its loop detection subject.
    let lds = loop {
        let l = raw.line().await;
        if let Some(s) = l.strip_prefix("LS+ $LDS.") {
            break format!("$LDS.{s}");
        }
    };
    raw.send(&format!("LS+ {lds}\r\n")).await;
    let err = loop {
        let l = raw.line().await;
        if !l.starts_with("LS+ ") && l != "PING" {
            break l;
        }
    };
    assert_eq!(
        err,
        "-ERR 'Loop detected for leafnode account=\"$G\". Delaying attempt to reconnect for 30s'"
    );
    assert!(raw.closed().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leafz_and_varz_show_the_link() {
    let hub = start(hub_opts(Options {
        http_port: Some(0),
        ..Options::local()
    }))
    .await;
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&hub));
    let leaf = start(leaf_opts(Options::local(), &url)).await;
    wait_links(&hub, 1).await;
    let mut l = Raw::client(&leaf).await;
    l.send("SUB seen 1\r\n").await;
    l.sync().await;
    let http = common::http_addr(&hub);
    wait_for("/leafz lists the leaf's subject", || async move {
        let v = common::http_json(http, "/leafz?subs=1").await;
        v["leafs"][0]["subscriptions_list"]
            .as_array()
            .is_some_and(|a| a.iter().any(|s| s == "seen"))
    })
    .await;
    let v = common::http_json(http, "/leafz").await;
    assert_eq!(v["leafnodes"], 1);
    let e = &v["leafs"][0];
    assert_eq!(e["is_spoke"], false);
    assert_eq!(e["account"], "$G");
    assert_eq!(e["name"], leaf.shared().name.as_str());
    assert_eq!(e["ip"], "127.0.0.1");
    assert!(e.get("subscriptions_list").is_none());
    let v = common::http_json(http, "/varz").await;
    assert_eq!(v["leafnodes"], 1);
    assert_eq!(v["leaf"]["port"], leaf_port(&hub));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaf_reconnects_when_its_hub_comes_back() {
    let port = common::free_port();
    let hub_at = |port: u16| {
        let mut o = hub_opts(Options::local());
        if let Some(l) = o.leafnodes.as_mut() {
            l.port = Some(port);
        }
        o
    };
    let hub = start(hub_at(port)).await;
    let url = format!("nats-leaf://localhost:{port}");
    let leaf = start(leaf_opts(Options::local(), &url)).await;
    wait_links(&hub, 1).await;
    hub.shutdown().await;
    wait_links(&leaf, 0).await;
    // A new hub on the same port: the leaf dials again (resolving `localhost` again) and
    // its interest is there.
    let hub = start(hub_at(port)).await;
    wait_links(&hub, 1).await;
    let mut h = Raw::client(&hub).await;
    let mut l = Raw::client(&leaf).await;
    l.send("SUB again 1\r\n").await;
    until_delivered(&mut h, &mut l, "again").await;
}

/// The `leafnode_urls` of an INFO line.
fn info_urls(line: &str) -> Vec<String> {
    let json = line.strip_prefix("INFO ").unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    v["leafnode_urls"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn leaf_url(s: &natsd::Server) -> String {
    format!("127.0.0.1:{}", leaf_port(s))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_fails_over_to_a_hub_node_it_only_learned_of() {
    let nodes = mesh_with(2, |name, seed| hub_opts(node_opts(name, seed))).await;
    let mut nodes = nodes.into_iter();
    let (Some(a), Some(b)) = (nodes.next(), nodes.next()) else {
        panic!("two nodes");
    };
    // A's INFO to a leaf lists both nodes' leafnode listeners.
    let (_raw, info) = raw_leaf(leaf_port(&a)).await;
    let mut urls = info_urls(&info);
    urls.sort();
    let mut want = vec![leaf_url(&a), leaf_url(&b)];
    want.sort();
    assert_eq!(urls, want, "{info}");
    // The leaf is configured with A only. It retries after nats-server's default 1 s: sooner,
    // B may not have dropped its route to A yet and could hand the leaf back its own loop
    // detection subject (learned through A): a loop, as nats-server would see it too.
    let url = format!("nats-leaf://127.0.0.1:{}", leaf_port(&a));
    let mut lo = leaf_opts(Options::local(), &url);
    if let Some(l) = lo.leafnodes.as_mut() {
        l.reconnect = Some(std::time::Duration::from_secs(1));
    }
    let leaf = start(lo).await;
    wait_links(&a, 1).await;
    a.shutdown().await;
    // It reconnects to B, whose address it learned from A.
    wait_links(&b, 1).await;
    let mut l = Raw::client(&leaf).await;
    let mut cb = Raw::client(&b).await;
    l.send("SUB via.b 1\r\n").await;
    until_delivered(&mut cb, &mut l, "via.b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_tells_its_leaves_of_new_nodes_but_not_of_no_advertise_ones() {
    let a = start(hub_opts(node_opts("A", None))).await;
    let (mut raw, info) = raw_leaf(leaf_port(&a)).await;
    assert_eq!(info_urls(&info), vec![leaf_url(&a)]);
    raw.send("CONNECT {\"headers\":true}\r\n").await;
    // C joins with `no_advertise`: not listed.
    let mut co = hub_opts(node_opts("C", Some(route_port(&a))));
    if let Some(l) = co.leafnodes.as_mut() {
        l.no_advertise = true;
    }
    let c = start(co).await;
    wait_for("A routed to C", || {
        let ok = routes(&a) == 1;
        async move { ok }
    })
    .await;
    // B joins: the registered leaf gets an INFO with B's address.
    let b = start(hub_opts(node_opts("B", Some(route_port(&a))))).await;
    let update = loop {
        let l = raw.line().await;
        if l.starts_with("INFO ") && info_urls(&l).contains(&leaf_url(&b)) {
            break l;
        }
    };
    let urls = info_urls(&update);
    assert!(urls.contains(&leaf_url(&a)), "{update}");
    assert!(!urls.contains(&leaf_url(&c)), "{update}");
    // A node with `no_advertise` leaves itself out of its own INFO too (nats-server 2.15.1).
    let (_r, info) = raw_leaf(leaf_port(&c)).await;
    assert!(!info_urls(&info).contains(&leaf_url(&c)), "{info}");
}
