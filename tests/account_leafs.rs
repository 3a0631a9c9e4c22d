//! An account's leafnode connection limit (`limits { max_leafnodes }`, an account JWT's
//! `leaf`), as nats-server 2.15.1 enforces it (docs/nats-server-behaviour.md §35): a leaf
//! past it is refused with `-ERR 'maximum account active connections exceeded'` and closed;
//! when one leaves, another is let in. Counted across a cluster as nats-server's `nrleafs`,
//! from the `leafnodes` of the `$SYS.SERVER.ACCOUNT.<acc>.CONNS` updates: two natsd nodes,
//! and natsd with nats-server 2.15.1.

mod common;

use common::auth::{jwt_leaf, open_limits, operator_conf, Target};
use common::mixed::{self, Node};
use common::natsserver;
use common::*;
use nkeys::KeyPair;
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const FULL: &str = "-ERR 'maximum account active connections exceeded'";

/// A raw leaf at `port` logged in as `l`/`l`: `Ok` once its PING is answered, `Err` with the
/// hub's `-ERR` (or "closed").
async fn try_leaf(port: u16) -> Result<Raw, String> {
    let mut r = Raw::at_any(SocketAddr::from(([127, 0, 0, 1], port))).await;
    let info = r.line().await;
    assert!(info.starts_with("INFO "), "{info}");
    r.send("CONNECT {\"name\":\"raw\",\"user\":\"l\",\"pass\":\"l\"}\r\nPING\r\n")
        .await;
    loop {
        match r.try_line().await {
            Some(l) if l == "PONG" => return Ok(r),
            Some(l) if l.starts_with("-ERR") => return Err(l),
            Some(_) => continue,
            None => return Err("closed".into()),
        }
    }
}

/// Poll until a new leaf at `port` is accepted (a refused probe changes no count).
async fn until_accepted(step: &str, port: u16) -> Raw {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Ok(c) = try_leaf(port).await {
            return c;
        }
        assert!(Instant::now() < end, "{step}: never accepted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One server, the limit in its config: natsd and nats-server 2.15.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_past_its_accounts_limit_is_refused_as_on_nats_server() {
    for go in [false, true] {
        let port = free_port();
        let conf = format!(
            "accounts {{ L: {{ users [ {{ user: l, password: l }} ], limits {{ max_leafnodes: 1 }} }} }}\n\
             leafnodes {{ listen: \"127.0.0.1:{port}\" }}\n"
        );
        let t = if go {
            Target::go(&conf, "max-leafs")
        } else {
            Target::natsd(&conf).await
        };
        let first = try_leaf(port).await.expect("the first leaf");
        assert_eq!(
            try_leaf(port).await.err().as_deref(),
            Some(FULL),
            "{}",
            t.name()
        );
        drop(first);
        let _again = until_accepted("after the first left", port).await;
        let (code, body) = http_get(t.http(), "/accountz?acc=L").await;
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(
            v["account_detail"]["leafnode_connections"],
            1,
            "{}",
            t.name()
        );
        t.stop().await;
    }
}

/// The limit in an account JWT (`leaf`): natsd and nats-server 2.15.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_jwts_leaf_limit_holds_as_on_nats_server() {
    let a = KeyPair::new_account();
    let mut limits = open_limits();
    limits["leaf"] = 1.into();
    let base = operator_conf(&a, limits);
    let conf = |port: u16| format!("{base}leafnodes {{ listen: \"127.0.0.1:{port}\" }}\n");
    for go in [false, true] {
        let port = free_port();
        let t = if go {
            Target::go(&conf(port), "jwt-leafs")
        } else {
            Target::natsd(&conf(port)).await
        };
        let mut leaves = Vec::new();
        for (i, want) in [(0, "PONG"), (1, FULL)] {
            let user = KeyPair::new_user();
            let jwt = common::auth::user_jwt(&user, &a, json!({}));
            let mut r = jwt_leaf(port, &jwt, &user).await;
            let got = loop {
                let l = r.line().await;
                if l == "PONG" || l.starts_with("-ERR") {
                    break l;
                }
            };
            assert_eq!(got, want, "{}: leaf {i}", t.name());
            leaves.push(r);
        }
        t.stop().await;
    }
}

/// Account L allows one leaf; SYS is the system account (the updates travel in it).
fn top(leaf_port: u16) -> String {
    format!(
        "accounts {{\n  L: {{ users: [ {{ user: l, password: l }} ], limits {{ max_leafnodes: 1 }} }}\n  \
         SYS: {{ users: [ {{ user: sys, password: sys }} ] }}\n}}\nsystem_account: SYS\n\
         leafnodes {{ listen: \"127.0.0.1:{leaf_port}\" }}\n"
    )
}

/// A system-account client of `at` listening to L's connection updates.
async fn updates(at: SocketAddr) -> Raw {
    let c = r#"{"verbose":false,"pedantic":false,"user":"sys","pass":"sys"}"#;
    let mut r = Raw::connected_at(at, c).await;
    r.send("SUB $SYS.SERVER.ACCOUNT.L.CONNS 1\r\nPING\r\n")
        .await;
    r.expect("PONG").await;
    r
}

/// Wait until `u`'s node got an update from server `from` saying `leafnodes`.
async fn heard(u: &mut Raw, from: &str, leafnodes: u64) {
    loop {
        let (_, _, _, payload) = u.msg().await;
        let v: serde_json::Value = serde_json::from_slice(&payload).expect("JSON");
        if v["server"]["id"] == from && v["leafnodes"] == leafnodes {
            return;
        }
    }
}

/// Wait until each node has the others' interest in the account connection updates.
async fn wait_routed(nodes: &[&Node]) {
    for n in nodes {
        let addr = n.http();
        wait_for("the peers' interest in account updates", || async move {
            let v = http_json(addr, "/routez?subs=1").await;
            v["num_routes"].as_u64() > Some(0)
                && v.to_string().contains("$SYS.SERVER.ACCOUNT.*.CONNS")
        })
        .await;
    }
}

/// A leaf probe at `port` once the node heard the other's count: `Ok` when refused as full,
/// `Err` when accepted because the node had not applied the count yet (the subscriber
/// hears an update before the server's own handler applies it). Such a probe's own update
/// makes the other node close its newest leaf, as nats-server's rebalancing does, and the
/// scenario must start over: a race of the test, not of the servers.
async fn full(port: u16) -> Result<(), ()> {
    match try_leaf(port).await {
        Err(e) => {
            assert_eq!(e, FULL);
            Ok(())
        }
        Ok(_) => Err(()),
    }
}

async fn across_the_cluster(n1: &Node, p1: u16, n2: &Node, p2: u16) -> Result<(), ()> {
    wait_routed(&[n1, n2]).await;
    let (id1, id2) = (n1.id().await, n2.id().await);
    let (mut u1, mut u2) = (updates(n1.client()).await, updates(n2.client()).await);
    let first = try_leaf(p1).await.expect("a leaf on n1");
    heard(&mut u2, &id1, 1).await;
    full(p2).await?;
    drop(first);
    heard(&mut u2, &id1, 0).await;
    let second = until_accepted("n2 after n1's left", p2).await;
    heard(&mut u1, &id2, 1).await;
    full(p1).await?;
    drop(second);
    Ok(())
}

/// The scenario on fresh nodes made by `make`, started over (at most three times) when a
/// probe raced an update; a node that never counts the other's leaves fails every time.
async fn counted_together<F, Fut>(make: F)
where
    F: Fn(u16, u16) -> Fut,
    Fut: std::future::Future<Output = (Node, Node)>,
{
    for _ in 0..3 {
        let (p1, p2) = (free_port(), free_port());
        let (n1, n2) = make(p1, p2).await;
        let ok = across_the_cluster(&n1, p1, &n2, p2).await;
        mixed::shutdown([n1, n2]).await;
        if ok.is_ok() {
            return;
        }
    }
    panic!("a node took a leaf past the account's limit in three runs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_natsd_nodes_count_an_accounts_leaves_together() {
    counted_together(|p1, p2| async move {
        let n1 = mixed::natsd_conf(&mixed::member_config("n1", None, &top(p1), "")).await;
        let seed = Some(n1.route_port());
        let n2 = mixed::natsd_conf(&mixed::member_config("n2", seed, &top(p2), "")).await;
        (n1, n2)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn natsd_and_nats_server_count_an_accounts_leaves_together() {
    counted_together(|p1, p2| async move {
        let n1 = mixed::natsd_conf(&mixed::member_config("n1", None, &top(p1), "")).await;
        let conf = mixed::member_config("n2", Some(n1.route_port()), &top(p2), "");
        let n2 = mixed::go_conf(&natsserver::assert_installed_215(), "n2", &conf);
        (n1, n2)
    })
    .await;
}
