//! Leafnodes under the server's own authorization (issue 18's credentials, issue 19 item 5),
//! as nats-server 2.15.1 does it (watched on loopback: docs/nats-server-behaviour.md §34).
//! A hub whose `leafnodes {}` has no `authorization` logs leaves in as clients: users,
//! nkeys, user JWTs in operator mode, each user's `allowed_connection_types` deciding
//! whether it may be a leaf (`LEAFNODE`). The leaf then gets the user's permissions from its
//! side — it receives what the user may subscribe to, sends what it may publish — told in the
//! INFO after CONNECT (`connect_info`, `import`, `export`) and enforced by the hub. A remote
//! logs in with the URL's user, a `credentials` file or an `nkey` seed (the hub's nonce
//! signed). natsd and nats-server 2.15.1 in either role, and raw leaves for each rule.

mod common;

use common::auth::{
    creds, jwt_leaf, logged_in, open_limits, operator_conf, sign, user_jwt, Target,
};
use common::leaf::{go_server, wait_links};
use common::natsserver::{self, NatsServer};
use common::{conf_opts, free_port, http_json, start, until_delivered, wait_for, Raw};
use natsd::Server;
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// `leaf` may publish `pub.>` and subscribe to `sub.>`; `std` may only be a client, `lo` only
/// a leaf; `c` is anyone's client.
const USERS: &str = "authorization { users [
  { user: leaf, password: pw, permissions: { publish: \"pub.>\", subscribe: \"sub.>\" } }
  { user: c, password: c }
  { user: std, password: pw, allowed_connection_types: [\"STANDARD\"] }
  { user: lo, password: pw, allowed_connection_types: [\"leafnode\"] }
] }\n";

/// A hub (natsd or nats-server 2.15.1) with `conf` and a leafnode listener on `port`.
async fn hub(go: bool, conf: &str, port: u16, name: &str) -> Target {
    let conf = format!("{conf}leafnodes {{ listen: \"127.0.0.1:{port}\" }}\n");
    if go {
        Target::go(&conf, name)
    } else {
        Target::natsd(&conf).await
    }
}

/// Wait until the hub has `n` leaves.
async fn hub_links(h: &Target, n: usize) {
    match h {
        Target::Natsd(s) => wait_links(s, n).await,
        Target::Go(_) => {
            wait_for(&format!("{n} leaves on the Go hub"), || async move {
                let v = http_json(h.http(), "/leafz").await;
                v["leafnodes"].as_u64() == Some(n as u64)
            })
            .await
        }
    }
}

/// A natsd leaf whose one remote is `remote` (the inside of its `{ … }`).
async fn natsd_leaf(remote: &str) -> Server {
    let conf = format!("leafnodes {{ reconnect: \"100ms\", remotes [ {{ {remote} }} ] }}\n");
    start(conf_opts(&conf)).await
}

/// A nats-server 2.15.1 leaf whose one remote is `remote`.
fn go_leaf(remote: &str, name: &str) -> NatsServer {
    let bin = natsserver::assert_installed_215();
    let conf =
        format!("listen: 127.0.0.1:-1\nleafnodes {{ reconnect: 1, remotes [ {{ {remote} }} ] }}\n");
    go_server(&bin, "leafnode_auth", name, &conf)
}

/// Every `(subject, payload)` `c` gets until the `fence` message on `last`.
async fn until_fence(c: &mut Raw, last: &str) -> BTreeSet<String> {
    let mut got = BTreeSet::new();
    loop {
        let (s, _, _, p) = c.msg().await;
        if s == last && p == b"fence" {
            return got;
        }
        got.insert(s);
    }
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// User `leaf`'s permissions end to end: `h` a client of the hub, `l` of the leaf.
async fn leaf_user_rules_hold(h: &mut Raw, l: &mut Raw) {
    l.send("SUB sub.> 1\r\nSUB other.> 2\r\n").await;
    h.send("SUB pub.> 11\r\nSUB x.> 12\r\n").await;
    until_delivered(h, l, "sub.ready").await;
    until_delivered(l, h, "pub.ready").await;
    // The leaf hears only what the user may subscribe to...
    h.send("PUB other.a 1\r\na\r\nPUB sub.a 1\r\na\r\nPUB sub.z 5\r\nfence\r\n")
        .await;
    assert_eq!(until_fence(l, "sub.z").await, set(&["sub.a"]));
    // ... and sends only what it may publish (without being cut off for trying).
    l.send("PUB x.b 1\r\nb\r\nPUB pub.b 1\r\nb\r\nPUB pub.z 5\r\nfence\r\n")
        .await;
    assert_eq!(until_fence(h, "pub.z").await, set(&["pub.b"]));
}

const LEAF_USER_URL: &str = "url: \"nats-leaf://leaf:pw@127.0.0.1:";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_natsd_leaf_logged_in_as_a_user_keeps_to_its_permissions_on_either_hub() {
    for go in [false, true] {
        let port = free_port();
        let h = hub(go, USERS, port, "perm-hub").await;
        let leaf = natsd_leaf(&format!("{LEAF_USER_URL}{port}\"")).await;
        wait_links(&leaf, 1).await;
        hub_links(&h, 1).await;
        let mut hc =
            Raw::connected_at(h.client(), r#"{"user":"c","pass":"c","verbose":false}"#).await;
        let mut lc = Raw::client(&leaf).await;
        let before = link_cids(&leaf);
        leaf_user_rules_hold(&mut hc, &mut lc).await;
        assert_eq!(
            link_cids(&leaf),
            before,
            "hub {}: the link stayed up",
            h.name()
        );
        leaf.shutdown().await;
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_server_215_leaf_logged_in_as_a_user_keeps_to_its_permissions_on_natsd() {
    let port = free_port();
    let h = hub(false, USERS, port, "").await;
    let go = go_leaf(&format!("{LEAF_USER_URL}{port}\""), "leaf215");
    hub_links(&h, 1).await;
    let mut hc = Raw::connected_at(h.client(), r#"{"user":"c","pass":"c","verbose":false}"#).await;
    let mut lc = Raw::client_at(go.client).await;
    let Target::Natsd(s) = &h else { unreachable!() };
    let before = link_cids(s);
    leaf_user_rules_hold(&mut hc, &mut lc).await;
    // The Go leaf was told its permissions: it asked for nothing it may not have (the hub
    // would have cut it off), and sent nothing it may not publish.
    assert_eq!(link_cids(s), before, "the link stayed up");
}

/// The connection ids of a natsd server's leaf links.
fn link_cids(s: &Server) -> Vec<u64> {
    let l = s.shared().leafnodes.as_ref().expect("leafnodes");
    l.links().iter().map(|k| k.conn.cid).collect()
}

/// A raw leaf logged in to `h` with `connect` (JSON): the hub's first INFO, and the lines up
/// to our PING's PONG (None: refused and closed).
async fn raw_login(h: &Target, port: u16, connect: &str) -> (Raw, Value, Option<Vec<String>>) {
    let mut r = Raw::at_any(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
    let first = r.line().await;
    let info: Value = serde_json::from_str(first.strip_prefix("INFO ").expect("INFO")).expect("J");
    let connect = connect.replace("NONCE", info["nonce"].as_str().unwrap_or_default());
    r.send(&format!("CONNECT {connect}\r\nPING\r\n")).await;
    let mut lines = Vec::new();
    loop {
        match r.try_line().await {
            Some(l) if l == "PONG" => return (r, info, Some(lines)),
            Some(l) if l.starts_with("-ERR") => {
                assert!(r.closed().await, "{}: closed after {l}", h.name());
                return (r, info, None);
            }
            Some(l) => lines.push(l),
            None => return (r, info, None),
        }
    }
}

/// The hub's INFO after CONNECT, among `lines`.
fn connect_info(lines: &[String]) -> Value {
    let l = lines
        .iter()
        .find(|l| l.starts_with("INFO ") && l.contains("\"connect_info\":true"))
        .unwrap_or_else(|| panic!("no connect_info INFO in {lines:?}"));
    serde_json::from_str(&l[5..]).expect("INFO JSON")
}

const LEAF_CONNECT: &str = r#"{"name":"raw","user":"leaf","pass":"pw","headers":true}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_leaf_is_told_its_permissions_and_cut_off_for_breaking_them_as_on_nats_server() {
    for go in [false, true] {
        let port = free_port();
        let h = hub(go, USERS, port, "raw-hub").await;
        let who = h.name();
        let (mut r, info, lines) = raw_login(&h, port, LEAF_CONNECT).await;
        assert!(
            !info["nonce"].as_str().unwrap_or_default().is_empty(),
            "{who}"
        );
        assert_eq!(info["info_on_connect"], true, "{who}");
        let ci = connect_info(&lines.expect("logged in"));
        assert_eq!(ci["remote_account"], "$G", "{who}");
        assert_eq!(ci["import"], json!({"allow": ["sub.>"]}), "{who}");
        assert_eq!(ci["export"], json!({"allow": ["pub.>"]}), "{who}");
        // A message the user may not publish.
        r.send("LMSG sub.y 1\r\ne\r\nPING\r\n").await;
        assert_eq!(
            r.next_non_ping().await,
            "-ERR 'Permissions Violation for Publish to \"sub.y\"'",
            "{who}"
        );
        assert!(r.closed().await, "{who}");
        // Interest in a subject the user may not subscribe to.
        let (mut r, _, lines) = raw_login(&h, port, LEAF_CONNECT).await;
        assert!(lines.is_some(), "{who}");
        r.send("LS+ pub.x\r\nPING\r\n").await;
        assert_eq!(
            r.next_non_ping().await,
            "-ERR 'Permissions Violation for Subscription to \"pub.x\"'",
            "{who}"
        );
        assert!(r.closed().await, "{who}");
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_types_and_passwords_decide_who_may_be_a_leaf_as_on_nats_server() {
    for go in [false, true] {
        let port = free_port();
        let h = hub(go, USERS, port, "types-hub").await;
        let who = h.name();
        let leaf_as = |u: &str, p: &str| format!(r#"{{"name":"raw","user":"{u}","pass":"{p}"}}"#);
        for (u, p, ok) in [
            ("std", "pw", false),
            ("lo", "pw", true),
            ("leaf", "nope", false),
            ("c", "c", true),
        ] {
            let (_r, _, lines) = raw_login(&h, port, &leaf_as(u, p)).await;
            assert_eq!(lines.is_some(), ok, "{who}: leaf as {u}:{p}");
        }
        // Without credentials a hub with users lets no leaf in.
        let (_r, _, lines) = raw_login(&h, port, r#"{"name":"raw"}"#).await;
        assert!(lines.is_none(), "{who}: anonymous leaf");
        // And a leaf-only user is no client.
        let mut c = Raw::at(h.client()).await;
        c.send("CONNECT {\"user\":\"lo\",\"pass\":\"pw\"}\r\nPING\r\n")
            .await;
        assert_eq!(c.line().await, "-ERR 'Authorization Violation'", "{who}");
        let _std =
            Raw::connected_at(h.client(), r#"{"user":"std","pass":"pw","verbose":false}"#).await;
        h.stop().await;
    }
}

/// An operator, its system account and account `A`, as a hub's config (MEMORY resolver).
struct Operator {
    a: KeyPair,
    conf: String,
}

impl Operator {
    fn new() -> Operator {
        let a = KeyPair::new_account();
        let conf = operator_conf(&a, open_limits());
        Operator { a, conf }
    }

    /// A `.creds` file for a new user of `A` with extra claims, and the user's key.
    fn creds_file(&self, dir: &std::path::Path, name: &str, extra: Value) -> String {
        let user = KeyPair::new_user();
        let jwt = user_jwt(&user, &self.a, extra);
        let path = dir.join(format!("{name}.creds"));
        std::fs::write(&path, creds(&jwt, &user)).expect("write creds");
        path.to_string_lossy().into_owned()
    }

    /// A client of `A` logged in to `h`.
    async fn client(&self, h: &Target) -> Raw {
        let user = KeyPair::new_user();
        logged_in(h, &user_jwt(&user, &self.a, json!({})), &user).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaves_log_in_with_credentials_files_in_operator_mode() {
    let w = Operator::new();
    let dir = common::binary::tmp_dir("leafnode_auth", "creds");
    let file = w.creds_file(&dir, "leaf", json!({}));
    let remote =
        |port: u16| format!("url: \"nats-leaf://127.0.0.1:{port}\", credentials: \"{file}\"");
    // natsd leaf, natsd and nats-server 2.15.1 hubs; a 2.15.1 leaf of a natsd hub.
    for (go_hub, go_leaf_too) in [(false, false), (true, false), (false, true)] {
        let port = free_port();
        let h = hub(go_hub, &w.conf, port, "op-hub").await;
        let mut hc = w.client(&h).await;
        let (natsd_l, go_l);
        let mut lc = if go_leaf_too {
            go_l = go_leaf(&remote(port), "op-leaf215");
            hub_links(&h, 1).await;
            Raw::client_at(go_l.client).await
        } else {
            natsd_l = natsd_leaf(&remote(port)).await;
            wait_links(&natsd_l, 1).await;
            Raw::client(&natsd_l).await
        };
        hub_links(&h, 1).await;
        hc.send("SUB to.hub 1\r\n").await;
        lc.send("SUB to.leaf 1\r\n").await;
        until_delivered(&mut lc, &mut hc, "to.hub").await;
        until_delivered(&mut hc, &mut lc, "to.leaf").await;
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_jwt_not_allowed_leafnode_connections_is_refused_as_a_leaf() {
    let w = Operator::new();
    for go in [false, true] {
        let port = free_port();
        let h = hub(go, &w.conf, port, "op-types").await;
        for (types, ok) in [(json!(["STANDARD"]), false), (json!(["LEAFNODE"]), true)] {
            let user = KeyPair::new_user();
            let jwt = user_jwt(&user, &w.a, json!({ "allowed_connection_types": types }));
            let mut raw = jwt_leaf(port, &jwt, &user).await;
            let mut got = String::new();
            while let Some(l) = raw.try_line().await {
                if l == "PONG" || l.starts_with("-ERR") {
                    got = l;
                    break;
                }
            }
            let want = if ok {
                "PONG"
            } else {
                "-ERR 'Authorization Violation'"
            };
            assert_eq!(got, want, "{}: {types}", h.name());
        }
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nkey_seed_remote_logs_in_as_an_nkey_user() {
    let user = KeyPair::new_user();
    let conf = format!(
        "authorization {{ users [ {{ nkey: {} }}, {{ user: c, password: c }} ] }}\n",
        user.public_key()
    );
    let seed = user.seed().expect("seed");
    for go in [false, true] {
        let port = free_port();
        let h = hub(go, &conf, port, "nkey-hub").await;
        let leaf = natsd_leaf(&format!(
            "url: \"nats-leaf://127.0.0.1:{port}\", nkey: {seed}"
        ))
        .await;
        wait_links(&leaf, 1).await;
        let mut hc =
            Raw::connected_at(h.client(), r#"{"user":"c","pass":"c","verbose":false}"#).await;
        let mut lc = Raw::client(&leaf).await;
        hc.send("SUB to.hub 1\r\n").await;
        until_delivered(&mut lc, &mut hc, "to.hub").await;
        leaf.shutdown().await;
        h.stop().await;
    }
}

/// `leafnodes { authorization { nkey } }`: the one key a leaf must sign the nonce with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leafnode_authorization_nkey_admits_only_its_key() {
    let (key, other) = (KeyPair::new_user(), KeyPair::new_user());
    for go in [false, true] {
        let port = free_port();
        let conf = format!(
            "authorization {{ users [ {{ user: c, password: c }} ] }}\n\
             leafnodes {{ listen: \"127.0.0.1:{port}\", authorization {{ nkey: {} }} }}\n",
            key.public_key()
        );
        let h = if go {
            Target::go(&conf, "leaf-nkey")
        } else {
            Target::natsd(&conf).await
        };
        let who = h.name();
        for (kp, ok) in [(&other, false), (&key, true)] {
            let mut r = Raw::at_any(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await;
            let info: Value = serde_json::from_str(&r.line().await[5..]).expect("INFO");
            let sig = sign(kp, info["nonce"].as_str().expect("nonce"));
            let c = json!({"name": "raw", "nkey": kp.public_key(), "sig": sig});
            r.send(&format!("CONNECT {c}\r\nPING\r\n")).await;
            let got = loop {
                let l = r.line().await;
                if l == "PONG" || l.starts_with("-ERR") {
                    break l;
                }
            };
            let want = if ok {
                "PONG"
            } else {
                "-ERR 'Authorization Violation'"
            };
            assert_eq!(got, want, "{who}");
        }
        let seed = key.seed().expect("seed");
        let leaf = natsd_leaf(&format!(
            "url: \"nats-leaf://127.0.0.1:{port}\", nkey: {seed}"
        ))
        .await;
        wait_links(&leaf, 1).await;
        leaf.shutdown().await;
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_whose_user_jwt_expires_is_cut_off_as_on_nats_server() {
    let w = Operator::new();
    for go in [false, true] {
        let port = free_port();
        let h = hub(go, &w.conf, port, "op-exp").await;
        let user = KeyPair::new_user();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let jwt = user_jwt(&user, &w.a, json!({ "exp": now + 2 }));
        let mut raw = jwt_leaf(port, &jwt, &user).await;
        let mut lines = Vec::new();
        // Logged in, then cut off when the JWT expires (the raw peer answers no PINGs, so
        // this also holds while the hub's first PING is unanswered).
        while let Some(l) = raw.try_line().await {
            if l.starts_with("-ERR") {
                lines.push(l);
                break;
            }
            lines.push(l);
        }
        assert!(lines.iter().any(|l| l == "PONG"), "{}: {lines:?}", h.name());
        assert_eq!(
            lines.last().map(String::as_str),
            Some("-ERR 'User Authentication Expired'"),
            "{}",
            h.name()
        );
        assert!(raw.closed().await, "{}", h.name());
        h.stop().await;
    }
}

/// natsd does not track a leaf's replies yet: a leaf logging in as a user with response
/// permissions is refused plainly (nats-server admits it), not cut off at its first reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_user_with_response_permissions_is_refused_by_natsd() {
    let conf = "authorization { users [ { user: r, password: r, permissions: { \
                subscribe: \"svc\", allow_responses: true } } ] }\n";
    let port = free_port();
    let h = hub(false, conf, port, "").await;
    let (_r, _, lines) = raw_login(&h, port, r#"{"name":"raw","user":"r","pass":"r"}"#).await;
    assert!(lines.is_none(), "refused");
    // As a client the same user works.
    let _c = Raw::connected_at(h.client(), r#"{"user":"r","pass":"r","verbose":false}"#).await;
    h.stop().await;
}
