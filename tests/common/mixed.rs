//! Mixed clusters of natsd (embedded) and the real nats-server (2.9.10 or 2.15.1, child
//! processes) reading one config shape: accounts G (anonymous clients land there) and A, a
//! cluster `C1` on 127.0.0.1 seeded to one other node. What their `/routez` say (connections
//! per peer, pinned accounts, compression, connection ids) and traffic in account A.

use super::binary::{tmp_dir, write_conf};
use super::natsserver::{self, NatsServer, Wait};
use super::{conf_opts, http_json, start, Raw, DEADLINE};
use natsd::Server;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

/// One node of a mixed cluster.
pub enum Node {
    Rust(Server),
    Go(NatsServer),
}

impl Node {
    pub fn client(&self) -> SocketAddr {
        match self {
            Node::Rust(s) => s.client_addr(),
            Node::Go(g) => g.client,
        }
    }
    pub fn http(&self) -> SocketAddr {
        match self {
            Node::Rust(s) => s.http_addr().expect("natsd monitor"),
            Node::Go(g) => g.http,
        }
    }
    pub fn route_port(&self) -> u16 {
        match self {
            Node::Rust(s) => super::cluster::route_port(s),
            Node::Go(g) => g.route_port,
        }
    }
    pub fn name(&self) -> String {
        match self {
            Node::Rust(s) => s.shared().name.clone(),
            Node::Go(_) => "go".into(),
        }
    }
    /// The server id, from `/varz`.
    pub async fn id(&self) -> String {
        let v = http_json(self.http(), "/varz").await;
        v["server_id"].as_str().expect("server_id").to_string()
    }
}

/// The accounts every node of the mixed-cluster tests has (`g` is the no-auth user).
const ACCOUNTS: &str = r#"accounts {
  G: { users: [ { user: g, password: g } ] }
  A: { users: [ { user: a, password: a } ] }
}
no_auth_user: g"#;

/// The config every node reads, with `extra` in the cluster block.
pub fn config(name: &str, seed: Option<u16>, extra: &str) -> String {
    member_config(name, seed, ACCOUNTS, extra)
}

/// A member of cluster C1 on free loopback ports: `top` at the top level (accounts and the
/// like), `extra` in the cluster block, a route to `seed`'s route port if given.
pub fn member_config(name: &str, seed: Option<u16>, top: &str, extra: &str) -> String {
    let routes = seed
        .map(|p| format!("routes: [\"nats-route://127.0.0.1:{p}\"]"))
        .unwrap_or_default();
    format!(
        r#"
server_name: {name}
listen: "127.0.0.1:-1"
http: "127.0.0.1:-1"
{top}
cluster {{
  name: C1
  listen: "127.0.0.1:-1"
  {routes}
  {extra}
}}
"#
    )
}

/// What a raw route peer of the mixed cluster (`C1`) sends once it has read natsd's INFO: its
/// CONNECT and INFO lines, as nats-server 2.15.1 with id and name `id` writes them
/// (`info_extra`: more INFO fields, each with its leading comma).
pub fn route_hello(id: &str, info_extra: &str) -> String {
    let connect = format!(
        r#"CONNECT {{"echo":true,"verbose":false,"pedantic":false,"tls_required":false,"headers":true,"name":"{id}","cluster":"C1"}}"#
    );
    let info = format!(
        r#"INFO {{"server_id":"{id}","server_name":"{id}","version":"2.15.1","proto":3,"host":"127.0.0.1","port":1,"headers":true,"max_payload":1048576,"cluster":"C1"{info_extra}}}"#
    );
    format!("{connect}\r\n{info}\r\n")
}

pub async fn natsd(name: &str, seed: Option<u16>, extra: &str) -> Node {
    natsd_conf(&config(name, seed, extra)).await
}

/// A natsd node reading `conf`.
pub async fn natsd_conf(conf: &str) -> Node {
    Node::Rust(start(conf_opts(conf)).await)
}

/// nats-server 2.15.1.
pub fn go(name: &str, seed: Option<u16>, extra: &str) -> Node {
    go_bin(&natsserver::assert_installed_215(), name, seed, extra)
}

/// The nats-server binary `bin` (2.9.10 at `natsserver::NATS_SERVER`, or 2.15.1).
pub fn go_bin(bin: &str, name: &str, seed: Option<u16>, extra: &str) -> Node {
    go_conf(bin, name, &config(name, seed, extra))
}

/// The nats-server binary `bin` reading `conf` (written to a fresh directory named after `name`).
pub fn go_conf(bin: &str, name: &str, conf: &str) -> Node {
    let dir = tmp_dir("mixed", name);
    let path = write_conf(&dir, "server.conf", conf);
    Node::Go(natsserver::launch_bin(
        bin,
        &["-c".to_string(), path.to_string_lossy().into_owned()],
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready: true,
        },
    ))
}

/// A node's route connections, per remote server id: (pinned accounts, plain connections).
pub async fn pools(n: &Node) -> BTreeMap<String, (BTreeSet<String>, usize)> {
    let z = http_json(n.http(), "/routez").await;
    let mut m: BTreeMap<String, (BTreeSet<String>, usize)> = BTreeMap::new();
    for r in z["routes"].as_array().into_iter().flatten() {
        let e = m
            .entry(r["remote_id"].as_str().unwrap_or_default().to_string())
            .or_default();
        match r.get("account").and_then(Value::as_str) {
            Some(a) => {
                e.0.insert(a.to_string());
            }
            None => e.1 += 1,
        }
    }
    m
}

/// The route connection ids of every node (to see that none was replaced).
pub async fn rids(nodes: &[Node]) -> Vec<BTreeSet<u64>> {
    let mut out = Vec::new();
    for n in nodes {
        let z = http_json(n.http(), "/routez").await;
        out.push(
            z["routes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["rid"].as_u64())
                .collect(),
        );
    }
    out
}

/// Wait until every node has `plain(i, j)` plain connections and exactly the pinned
/// `accounts(i, j)` to each other node `j`.
pub async fn wait_pools(
    nodes: &[Node],
    plain: &dyn Fn(usize, usize) -> usize,
    accounts: &dyn Fn(usize, usize) -> BTreeSet<String>,
) {
    wait_pools_within(nodes, plain, accounts, DEADLINE).await
}

/// `wait_pools` with its own deadline.
pub async fn wait_pools_within(
    nodes: &[Node],
    plain: &dyn Fn(usize, usize) -> usize,
    accounts: &dyn Fn(usize, usize) -> BTreeSet<String>,
    within: Duration,
) {
    let end = std::time::Instant::now() + within;
    let mut ids = Vec::new();
    for n in nodes {
        ids.push(n.id().await);
    }
    loop {
        let mut ok = true;
        let mut seen = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let p = pools(n).await;
            ok &= p.len() == nodes.len() - 1;
            for (j, id) in ids.iter().enumerate() {
                if i != j {
                    ok &= p.get(id) == Some(&(accounts(i, j), plain(i, j)));
                }
            }
            seen.push((n.name(), p));
        }
        if ok {
            return;
        }
        if std::time::Instant::now() >= end {
            // What the nats-server nodes logged about their routes, to tell why.
            let logs: Vec<Vec<String>> = nodes
                .iter()
                .map(|n| match n {
                    Node::Go(g) => g.log_lines("oute"),
                    Node::Rust(_) => Vec::new(),
                })
                .collect();
            panic!("pools did not form (ids {ids:?}): {seen:#?}\nroute logs: {logs:#?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Stop the natsd nodes (nats-server ones are killed when dropped).
pub async fn shutdown(nodes: impl IntoIterator<Item = Node>) {
    for n in nodes {
        if let Node::Rust(s) = n {
            s.shutdown().await;
        }
    }
}

pub fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A raw client logged in as `user` (password = user name).
pub async fn user_client(at: SocketAddr, user: &str) -> Raw {
    Raw::connected_at(
        at,
        &format!(
            r#"{{"verbose":false,"pedantic":false,"user":"{user}","pass":"{user}","headers":true}}"#
        ),
    )
    .await
}

/// Messages with headers and a reply in account A between every pair of nodes.
pub async fn check_account_a(nodes: &[Node]) {
    for (i, to) in nodes.iter().enumerate() {
        let mut sub = user_client(to.client(), "a").await;
        sub.send(&format!("SUB pinned.{i} 1\r\n")).await;
        sub.flush().await;
        for (j, from) in nodes.iter().enumerate() {
            if i == j {
                continue;
            }
            let mut p = user_client(from.client(), "a").await;
            super::until_delivered(&mut p, &mut sub, &format!("pinned.{i}")).await;
            p.send(&format!(
                "HPUB pinned.{i} rep.{j} 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
            ))
            .await;
            p.flush().await;
            assert_eq!(
                sub.next_non_ping().await,
                format!("HMSG pinned.{i} 1 rep.{j} 12 14")
            );
            assert_eq!(sub.payload(14).await, b"NATS/1.0\r\n\r\nhi");
        }
    }
}

/// How many `many.…` subscriptions `routez` (from `/routez?subs=1`) lists on the routes
/// from the server with id `id`, over all its connections.
fn many_from(routez: &Value, id: &str) -> u64 {
    routez["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["remote_id"] == id)
        .flat_map(|r| r["subscriptions_list"].as_array().into_iter().flatten())
        .filter(|s| s.as_str().is_some_and(|s| s.starts_with("many.")))
        .count() as u64
}

/// Wait until the node monitored at `http` lists `want` `many.…` subscriptions from `id`.
async fn wait_many_from(what: &str, http: SocketAddr, id: &str, want: u64) {
    super::wait_for(what, || async move {
        many_from(&http_json(http, "/routez?subs=1").await, id) == want
    })
    .await;
}

/// 10,000 subscriptions (`many.0` … `many.9999`) made by `c`, a client of the server with id
/// `id`, appear on its routes at every node monitored at `at` (spread over a pool), then are
/// withdrawn with UNSUB and go from every one of them.
pub async fn ten_thousand_cross(what: &str, c: &mut Raw, id: &str, at: &[SocketAddr]) {
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("SUB many.{i} {i}\r\n"));
    }
    c.send(&text).await;
    c.flush().await;
    for (n, http) in at.iter().enumerate() {
        wait_many_from(
            &format!("{what}: 10,000 subscriptions at {n}"),
            *http,
            id,
            10_000,
        )
        .await;
    }
    let mut text = String::new();
    for i in 0..10_000 {
        text.push_str(&format!("UNSUB {i}\r\n"));
    }
    c.send(&text).await;
    c.flush().await;
    for (n, http) in at.iter().enumerate() {
        wait_many_from(&format!("{what}: withdrawn at {n}"), *http, id, 0).await;
    }
}
