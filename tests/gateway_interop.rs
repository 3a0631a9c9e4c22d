//! A natsd cluster (C1, two nodes) gatewayed with a real nats-server 2.9.10 cluster (C2, two
//! nodes): handshake both ways (natsd dials C2 explicitly; C2 dials back implicitly, and
//! learns the second natsd through gossip), interest-only propagation, pub/sub and headers in
//! both directions, queue groups preferring the local cluster, and request/reply (fresh
//! inboxes: `_GR_.` replies) in both directions with async-nats. Never skipped.

mod common;

use common::gw::{gw_port, inbound_count, node, outbound_names, remote_interest, remotes};
use common::natsserver::{self, NatsServer, ALL_LISTENERS};
use common::{http_json, start, wait_for, Raw};
use natsd::Server;
use std::net::SocketAddr;
use std::time::Duration;

struct Go {
    child: NatsServer,
    client: SocketAddr,
    gw_port: u16,
}

/// nats-server `name` of cluster C2 with a gateway listener (no remote gateways), its route
/// seeded to `seed` when given.
fn go_node(dir: &std::path::Path, name: &str, seed: Option<u16>) -> (Go, u16) {
    go_node_in(dir, name, "C2", seed)
}

/// nats-server `name` of cluster `cluster` (same name for its gateway), as `go_node`.
fn go_node_in(dir: &std::path::Path, name: &str, cluster: &str, seed: Option<u16>) -> (Go, u16) {
    let routes = seed
        .map(|p| format!("routes: [\"nats-route://127.0.0.1:{p}\"]"))
        .unwrap_or_default();
    let conf = format!(
        "listen: 127.0.0.1:-1\nhttp: 127.0.0.1:-1\nserver_name: {name}\n\
         cluster {{ name: {cluster}, listen: 127.0.0.1:-1\n {routes} }}\n\
         gateway {{ name: {cluster}, listen: 127.0.0.1:-1 }}\n"
    );
    let path = dir.join(format!("{name}.conf"));
    std::fs::write(&path, conf).expect("write conf");
    let child = natsserver::with_config(&path, ALL_LISTENERS);
    let (client, gw_port, route) = (child.client, child.gateway_port, child.route_port);
    (
        Go {
            child,
            client,
            gw_port,
        },
        route,
    )
}

async fn go_gatewayz(g: &Go) -> serde_json::Value {
    http_json(g.child.http, "/gatewayz").await
}
async fn setup(tag: &str) -> (Vec<Go>, Vec<Server>, std::path::PathBuf) {
    natsserver::assert_installed();
    let dir = std::env::temp_dir().join(format!("natsd-gw-interop-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (g1, r1) = go_node(&dir, "G1", None);
    let (g2, _) = go_node(&dir, "G2", Some(r1));
    let c2 = remotes(&[("C2", g1.gw_port)]);
    let a1 = start(node("a1", "C1", 0, None, c2.clone())).await;
    let a2 = start(node(
        "a2",
        "C1",
        0,
        Some(common::cluster::route_port(&a1)),
        c2,
    ))
    .await;
    let a = vec![a1, a2];
    let g = vec![g1, g2];
    // natsd: both have an outbound to C2; between them, two inbounds (G1 and G2).
    wait_for("natsd gateways", || {
        let ok = a.iter().all(|s| outbound_names(s) == ["C2"])
            && a.iter().map(inbound_count).sum::<usize>() == 2;
        async move { ok }
    })
    .await;
    // nats-server: both have an outbound to C1, two inbounds between them.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut outs = 0;
        let mut ins = 0;
        for x in &g {
            let z = go_gatewayz(x).await;
            if z["outbound_gateways"].get("C1").is_some() {
                outs += 1;
            }
            ins += z["inbound_gateways"]["C1"]
                .as_array()
                .map_or(0, |v| v.len());
        }
        if outs == 2 && ins == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nats-server gateways: {outs} outbound, {ins} inbound"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (g, a, dir)
}

#[tokio::test]
async fn natsd_and_nats_server_clusters_exchange_traffic() {
    let (g, a, dir) = setup("traffic").await;
    // nats-server → natsd: subscriber on a2 (its interest reaches G1/G2 through whichever
    // natsd server each dialled).
    let mut sub_a = Raw::client(&a[1]).await;
    sub_a.send("SUB from.go.> 1\r\n").await;
    sub_a.flush().await;
    for (i, x) in g.iter().enumerate() {
        let mut p = Raw::client_at(x.client).await;
        common::until_delivered(&mut p, &mut sub_a, &format!("from.go.probe{i}")).await;
        p.send(&format!(
            "HPUB from.go.h{i} rep.{i} 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPUB from.go.p{i} 2\r\nok\r\n"
        ))
        .await;
        p.flush().await;
        assert_eq!(
            sub_a.next_non_ping().await,
            format!("HMSG from.go.h{i} 1 rep.{i} 12 14")
        );
        assert_eq!(sub_a.payload(14).await, b"NATS/1.0\r\n\r\nhi");
        assert_eq!(sub_a.next_non_ping().await, format!("MSG from.go.p{i} 1 2"));
        sub_a.payload(2).await;
        assert_eq!(sub_a.sync().await, "");
    }
    // natsd → nats-server: subscriber on G2.
    let mut sub_g = Raw::client_at(g[1].client).await;
    sub_g.send("SUB from.natsd.* 1\r\n").await;
    sub_g.flush().await;
    for s in &a {
        wait_for("C2 interest", || {
            let ok = remote_interest(s, "C2", "from.natsd.x");
            async move { ok }
        })
        .await;
    }
    for (i, s) in a.iter().enumerate() {
        let mut p = Raw::client(s).await;
        p.send(&format!(
            "HPUB from.natsd.h{i} 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPUB from.natsd.p{i} r.{i} 2\r\nok\r\n"
        ))
        .await;
        p.flush().await;
        assert_eq!(
            sub_g.next_non_ping().await,
            format!("HMSG from.natsd.h{i} 1 12 14")
        );
        assert_eq!(sub_g.payload(14).await, b"NATS/1.0\r\n\r\nhi");
        assert_eq!(
            sub_g.next_non_ping().await,
            format!("MSG from.natsd.p{i} 1 r.{i} 2")
        );
        sub_g.payload(2).await;
        assert_eq!(sub_g.sync().await, "");
    }
    // Queue groups: a member on a1 and on G1. Messages from either cluster stay local.
    // A plain probe subscription after each member: once the other server of the same
    // cluster delivers to the probe, it knows the member too (route interest is in order).
    let mut qa = Raw::client(&a[0]).await;
    qa.send("SUB jobs workers 1\r\nSUB jobs.probe.a 2\r\n")
        .await;
    qa.flush().await;
    let mut qg = Raw::client_at(g[0].client).await;
    qg.send("SUB jobs workers 1\r\nSUB jobs.probe.g 2\r\n")
        .await;
    qg.flush().await;
    let mut pa = Raw::client(&a[1]).await;
    let mut pg = Raw::client_at(g[1].client).await;
    common::until_delivered(&mut pa, &mut qa, "jobs.probe.a").await;
    common::until_delivered(&mut pg, &mut qg, "jobs.probe.g").await;
    for s in &a {
        wait_for("C2 queue interest", || {
            let ok = remote_interest(s, "C2", "jobs");
            async move { ok }
        })
        .await;
    }
    for _ in 0..20 {
        pa.send("PUB jobs 1\r\na\r\n").await;
        pg.send("PUB jobs 1\r\ng\r\n").await;
    }
    pa.flush().await;
    pg.flush().await;
    for _ in 0..20 {
        let (_, _, _, p) = qa.msg().await;
        assert_eq!(p, b"a");
        let (_, _, _, p) = qg.msg().await;
        assert_eq!(p, b"g");
    }
    assert_eq!(qa.sync().await, "");
    assert_eq!(qg.sync().await, "");
    // Without the natsd member, natsd's publishes go to C2's member.
    qa.send("UNSUB 1\r\n").await;
    qa.flush().await;
    wait_for("local queue interest gone on a2", || {
        let ok = !a[1]
            .shared()
            .accounts
            .global()
            .sublist
            .has_interest(b"jobs");
        async move { ok }
    })
    .await;
    for _ in 0..10 {
        pa.send("PUB jobs 1\r\nb\r\n").await;
    }
    pa.flush().await;
    for _ in 0..10 {
        let (_, _, _, p) = qg.msg().await;
        assert_eq!(p, b"b");
    }
    assert_eq!(qg.sync().await, "");
    for s in a {
        s.shutdown().await;
    }
    drop(g);
    let _ = std::fs::remove_dir_all(dir);
}

/// Every `accounts` array sorted by name (nats-server lists them in Go map order).
fn sort_accounts(mut v: serde_json::Value) -> serde_json::Value {
    match &mut v {
        serde_json::Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "accounts" {
                    if let Some(a) = x.as_array_mut() {
                        a.sort_by(|p, q| p["name"].as_str().cmp(&q["name"].as_str()));
                    }
                } else {
                    *x = sort_accounts(x.take());
                }
            }
        }
        serde_json::Value::Array(a) => {
            for x in a.iter_mut() {
                *x = sort_accounts(x.take());
            }
        }
        _ => {}
    }
    v
}

/// `/gatewayz` (plain, `accs=1`, `acc_name`) and `/varz` `gateway` of natsd have every field
/// nats-server's have, with the same JSON types, with the same interest on both sides.
#[tokio::test]
async fn gatewayz_and_varz_shapes_match_nats_server() {
    let (g, a, dir) = setup("shapes").await;
    // The same interest in both clusters: a plain and a queue subscription.
    let mut sa = Raw::client(&a[0]).await;
    sa.send("SUB shape.a 1\r\nSUB shape.q grp 2\r\n").await;
    sa.flush().await;
    let mut sg = Raw::client_at(g[0].client).await;
    sg.send("SUB shape.g 1\r\nSUB shape.q grp 2\r\n").await;
    sg.flush().await;
    for s in &a {
        wait_for("C2 interest", || {
            let ok = remote_interest(s, "C2", "shape.g") && remote_interest(s, "C2", "shape.q");
            async move { ok }
        })
        .await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let z = http_json(g[0].child.http, "/gatewayz?accs=1").await;
        let n = z["outbound_gateways"]["C1"]["accounts"]
            .as_array()
            .and_then(|v| v.iter().find(|x| x["name"] == "$G"))
            .and_then(|x| x["num_subs"].as_u64())
            .unwrap_or(0);
        if n >= 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "C1 interest on G1: {z}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Compare a server of each side that has both an outbound and an inbound.
    let mut ours = None;
    for s in &a {
        if inbound_count(s) > 0 {
            ours = Some(s.http_addr().expect("monitor"));
        }
    }
    let ours = ours.expect("a natsd server with an inbound gateway");
    let mut theirs = None;
    for x in &g {
        let z = go_gatewayz(x).await;
        if z["inbound_gateways"].get("C1").is_some() {
            theirs = Some(x.child.http);
        }
    }
    let theirs = theirs.expect("a nats-server with an inbound gateway");
    let mut errs = Vec::new();
    for path in ["/gatewayz", "/gatewayz?accs=1", "/gatewayz?acc_name=$G"] {
        let t = http_json(theirs, path).await;
        let o = http_json(ours, path).await;
        // Keyed by the remote cluster's name: compare C1's view of C2 with C2's of C1.
        let swap = |v: &serde_json::Value, from: &str, to: &str| {
            let mut v = v.clone();
            for k in ["outbound_gateways", "inbound_gateways"] {
                if let Some(m) = v[k].as_object_mut() {
                    if let Some(x) = m.remove(from) {
                        m.insert(to.to_string(), x);
                    }
                }
            }
            v
        };
        let t = sort_accounts(swap(&t, "C1", "REMOTE"));
        let o = sort_accounts(swap(&o, "C2", "REMOTE"));
        natsserver::same_shape(path, &t, &o, &[], false, &mut errs);
    }
    let tv = http_json(theirs, "/varz").await;
    let ov = http_json(ours, "/varz").await;
    natsserver::same_shape(
        "/varz.gateway",
        &tv["gateway"],
        &ov["gateway"],
        &[],
        true,
        &mut errs,
    );
    assert!(errs.is_empty(), "{errs:#?}");
    for s in a {
        s.shutdown().await;
    }
    drop(g);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn request_reply_both_ways_with_nats_server() {
    use futures::StreamExt;
    let (g, a, dir) = setup("requests").await;
    let on_a = async_nats::connect(a[1].client_url())
        .await
        .expect("connect natsd");
    let on_g = async_nats::connect(format!("nats://{}", g[1].client))
        .await
        .expect("connect nats-server");
    for (c, name) in [(&on_a, "svc.natsd"), (&on_g, "svc.go")] {
        let mut subscription = c.subscribe(name.to_string()).await.expect("subscribe");
        let c2 = c.clone();
        tokio::spawn(async move {
            while let Some(m) = subscription.next().await {
                if let Some(r) = m.reply {
                    let mut body = b"re:".to_vec();
                    body.extend_from_slice(&m.payload);
                    let _ = c2.publish(r, body.into()).await;
                }
            }
        });
        c.flush().await.expect("flush");
    }
    for s in &a {
        wait_for("svc.go interest", || {
            let ok = remote_interest(s, "C2", "svc.go");
            async move { ok }
        })
        .await;
    }
    // nats-server sees natsd's service: poll with requests until one answers.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout(
            Duration::from_millis(500),
            on_g.request("svc.natsd", "p".into()),
        )
        .await
        {
            Ok(Ok(r)) => {
                assert_eq!(&r.payload[..], b"re:p");
                break;
            }
            _ => assert!(
                std::time::Instant::now() < deadline,
                "svc.natsd never answered nats-server's client"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..10 {
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            on_a.request("svc.go", format!("a{i}").into()),
        )
        .await
        .expect("in time")
        .expect("reply from nats-server's cluster");
        assert_eq!(r.payload, format!("re:a{i}"));
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            on_g.request("svc.natsd", format!("g{i}").into()),
        )
        .await
        .expect("in time")
        .expect("reply from natsd's cluster");
        assert_eq!(r.payload, format!("re:g{i}"));
    }
    // Fresh clients (brand-new inboxes: replies must travel as `_GR_.` ones).
    let fresh_a = async_nats::connect(a[0].client_url())
        .await
        .expect("connect");
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        fresh_a.request("svc.go", "f".into()),
    )
    .await
    .expect("in time")
    .expect("reply");
    assert_eq!(&r.payload[..], b"re:f");
    let fresh_g = async_nats::connect(format!("nats://{}", g[0].client))
        .await
        .expect("connect");
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        fresh_g.request("svc.natsd", "h".into()),
    )
    .await
    .expect("in time")
    .expect("reply");
    assert_eq!(&r.payload[..], b"re:h");
    let _ = gw_port(&a[0]);
    for s in a {
        s.shutdown().await;
    }
    drop(g);
    let _ = std::fs::remove_dir_all(dir);
}

/// A mixed cluster C1 (nats-server A1 + natsd N1, routed) and a natsd cluster C2 (M) that only
/// knows A1's gateway: N1 learns C2 from A1's route gossip (`"GW"+id` INFO, `gateway_cmd` 1)
/// and dials it; A1 learns N1's gateway URL from its route INFO. Traffic flows both ways.
#[tokio::test]
async fn mixed_cluster_learns_gateways_through_nats_server_routes() {
    natsserver::assert_installed();
    let dir = std::env::temp_dir().join(format!("natsd-gw-interop-{}-mixed", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (g, _route) = go_node_in(&dir, "A1", "C1", None);
    let n1 = start(node("n1", "C1", 0, Some(_route), vec![])).await;
    wait_for("n1 routed to A1", || {
        let ok = common::cluster::routes(&n1) == 1;
        async move { ok }
    })
    .await;
    let m = start(node("m", "C2", 0, None, remotes(&[("C1", g.gw_port)]))).await;
    wait_for("C1 and C2 gatewayed", || {
        let ok =
            outbound_names(&m) == ["C1"] && outbound_names(&n1) == ["C2"] && inbound_count(&m) == 2;
        async move { ok }
    })
    .await;
    // A1's gateway INFO lists N1's gateway URL (learned from N1's route INFO).
    let z = http_json(g.child.http, "/varz").await;
    assert_eq!(z["gateway"]["name"], "C1");
    let mut sub_m = Raw::client(&m).await;
    sub_m.send("SUB mixed.> 1\r\n").await;
    sub_m.flush().await;
    let mut sub_n = Raw::client(&n1).await;
    sub_n.send("SUB back.> 1\r\n").await;
    sub_n.flush().await;
    let mut pn = Raw::client(&n1).await;
    common::until_delivered(&mut pn, &mut sub_m, "mixed.from.n1").await;
    let mut pa = Raw::client_at(g.client).await;
    common::until_delivered(&mut pa, &mut sub_m, "mixed.from.a1").await;
    let mut pm = Raw::client(&m).await;
    common::until_delivered(&mut pm, &mut sub_n, "back.from.m").await;
    // Exactly once each.
    pn.send("PUB mixed.x 1\r\n1\r\n").await;
    pn.flush().await;
    pa.send("PUB mixed.x 1\r\n2\r\n").await;
    pa.flush().await;
    pm.send("PUB back.x 1\r\n3\r\n").await;
    pm.flush().await;
    let mut got = vec![sub_m.msg().await.3, sub_m.msg().await.3];
    got.sort();
    assert_eq!(got, [b"1".to_vec(), b"2".to_vec()]);
    assert_eq!(sub_n.msg().await.3, b"3");
    assert_eq!(sub_m.sync().await, "");
    assert_eq!(sub_n.sync().await, "");
    n1.shutdown().await;
    m.shutdown().await;
    drop(g);
    let _ = std::fs::remove_dir_all(dir);
}
