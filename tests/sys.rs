//! The `$SYS` services: requests from a system-account user answered in nats-server 2.9's
//! envelope, filters, bad options, users of other accounts, and requests that reach every node
//! of a cluster — natsd nodes and real nats-server nodes alike.

mod common;

use common::binary::{tmp_dir, write_conf};
use common::cluster::{node_opts, route_port, routes};
use common::natsserver::{self, same_shape};
use common::{http_json, start, wait_for, Raw};
use natsd::config::User;
use natsd::conn::ConnKind;
use natsd::{Options, Server};
use serde_json::Value;
use std::collections::BTreeSet;

/// Accounts `SYS` (the system account, user sys/sys) and `APP` (user app/app).
fn with_sys(o: Options) -> Options {
    let user = |u: &str, acc: &str| User {
        username: u.into(),
        password: u.into(),
        account: Some(acc.into()),
        permissions: None,
        connection_types: Vec::new(),
    };
    Options {
        users: vec![user("sys", "SYS"), user("app", "APP")],
        accounts: vec!["SYS".into(), "APP".into()],
        system_account: "SYS".into(),
        ..o
    }
}

async fn login(s: &Server, user: &str) -> Raw {
    Raw::connected(
        s,
        &format!(r#"{{"verbose":false,"pedantic":false,"user":"{user}","pass":"{user}"}}"#),
    )
    .await
}

async fn login_at(addr: std::net::SocketAddr, user: &str) -> Raw {
    let mut r = Raw::at(addr).await;
    r.send(&format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"user\":\"{user}\",\"pass\":\"{user}\"}}\r\nPING\r\n"
    ))
    .await;
    r.expect("PONG").await;
    r
}

/// Publish a request with reply `inbox` (subscribed first as sid 99) and read `n` answers.
async fn request(c: &mut Raw, subject: &str, payload: &str, inbox: &str, n: usize) -> Vec<Value> {
    c.send(&format!(
        "SUB {inbox} 99\r\nPUB {subject} {inbox} {}\r\n{payload}\r\n",
        payload.len()
    ))
    .await;
    let mut out = Vec::new();
    for _ in 0..n {
        let (subj, sid, _, body) = c.msg().await;
        assert_eq!((subj.as_str(), sid.as_str()), (inbox, "99"));
        out.push(serde_json::from_slice(&body).expect("answer is JSON"));
    }
    c.send("UNSUB 99\r\n").await;
    out
}

/// Nothing more arrived on `c` than its PONG.
async fn nothing_more(c: &mut Raw) {
    assert_eq!(c.sync().await, "");
}

/// How many routes `s` knows to be interested in `$SYS.REQ.SERVER.PING` (in account `acc`).
fn ping_interest(s: &Server, acc: &str) -> usize {
    route_interest(s, acc, "$SYS.REQ.SERVER.PING")
}

/// How many routes `s` knows to be interested in `subject` (in account `acc`).
fn route_interest(s: &Server, acc: &str, subject: &str) -> usize {
    let Some(a) = s.shared().accounts.get(acc) else {
        return 0;
    };
    a.sublist
        .matches(subject.as_bytes())
        .psubs
        .iter()
        .filter(|e| e.conn.kind == ConnKind::Route)
        .count()
}

/// The `data` of one answer, asked on a new connection of a system user.
async fn data(s: &Server, subject: &str, payload: &str) -> Value {
    let mut c = login(s, "sys").await;
    let a = request(&mut c, subject, payload, "r.3", 1).await;
    a[0]["data"].clone()
}

fn server_of(v: &Value) -> (&str, &str) {
    (
        v["server"]["id"].as_str().unwrap_or(""),
        v["server"]["name"].as_str().unwrap_or(""),
    )
}

#[tokio::test]
async fn a_single_server_answers_its_system_users() {
    let s = start(with_sys(Options {
        http_port: Some(0),
        server_tags: vec!["az:1".into()],
        ..Options::local()
    }))
    .await;
    let id = s.id().to_string();
    let mut c = login(&s, "sys").await;

    // PING: STATSZ in nats-server's envelope.
    let a = request(&mut c, "$SYS.REQ.SERVER.PING", "", "r.1", 1).await;
    let v = &a[0];
    let srv = &v["server"];
    assert_eq!(srv["id"], id.as_str());
    assert_eq!(srv["name"], id.as_str());
    assert_eq!(srv["host"], "127.0.0.1");
    assert_eq!(srv["ver"], "2.9.10");
    assert_eq!(srv["jetstream"], false);
    assert!(srv["seq"].as_u64().is_some_and(|n| n > 0), "{v}");
    assert!(srv["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert!(srv.get("cluster").is_none(), "omitted when empty: {v}");
    let st = &v["statsz"];
    for k in [
        "start",
        "mem",
        "cores",
        "cpu",
        "connections",
        "total_connections",
        "active_accounts",
        "subscriptions",
        "sent",
        "received",
        "slow_consumers",
        "active_servers",
    ] {
        assert!(st.get(k).is_some(), "{k}: {v}");
    }
    assert_eq!(st["connections"], 1);
    assert_eq!(st["cpu"], 0, "whole floats are written as integers: {v}");
    assert!(st.get("routes").is_none(), "omitted without routes: {v}");
    assert!(v.get("data").is_none());

    // Every endpoint on PING.<X>Z and on <id>.<X>Z.
    for (x, key) in [
        ("STATSZ", "statsz"),
        ("VARZ", "data"),
        ("CONNZ", "data"),
        ("ROUTEZ", "data"),
        ("SUBSZ", "data"),
        ("HEALTHZ", "data"),
        ("IDZ", "data"),
        ("GATEWAYZ", "data"),
        ("LEAFZ", "data"),
        ("ACCOUNTZ", "data"),
        ("JSZ", "data"),
    ] {
        for subject in [
            format!("$SYS.REQ.SERVER.PING.{x}"),
            format!("$SYS.REQ.SERVER.{id}.{x}"),
        ] {
            let a = request(&mut c, &subject, "", "r.2", 1).await;
            assert!(a[0].get(key).is_some(), "{subject}: {}", a[0]);
            assert_eq!(a[0]["server"]["id"], id.as_str());
        }
    }
    let idz = data(&s, "$SYS.REQ.SERVER.PING.IDZ", "").await;
    assert_eq!(
        idz,
        serde_json::json!({"name": id, "host": "127.0.0.1", "id": id})
    );
    assert_eq!(
        data(&s, "$SYS.REQ.SERVER.PING.HEALTHZ", "").await,
        serde_json::json!({"status": "ok"})
    );
    let varz = data(&s, "$SYS.REQ.SERVER.PING.VARZ", "").await;
    assert_eq!(varz["server_id"], id.as_str());
    assert_eq!(varz["system_account"], "SYS");
    let accz = data(&s, "$SYS.REQ.SERVER.PING.ACCOUNTZ", "").await;
    assert_eq!(accz["system_account"], "SYS");
    // CONNZ with options: our connection, its subscription listed.
    let connz = data(
        &s,
        "$SYS.REQ.SERVER.PING.CONNZ",
        r#"{"subscriptions":true}"#,
    )
    .await;
    assert_eq!(connz["num_connections"], 2, "{connz}");
    let conns = connz["connections"].as_array().expect("connections");
    assert!(
        conns
            .iter()
            .any(|c| c["subscriptions_list"] == serde_json::json!(["r.3"])),
        "{connz}"
    );
    // SUBSZ lists the services' own subscriptions (cid 1, account SYS), as nats-server.
    let subsz = data(
        &s,
        "$SYS.REQ.SERVER.PING.SUBSZ",
        r#"{"subscriptions":true,"account":"SYS","test":"$SYS.REQ.SERVER.PING"}"#,
    )
    .await;
    let list = subsz["subscriptions_list"].as_array().expect("list");
    assert!(
        list.iter().any(|d| d["subject"] == "$SYS.REQ.SERVER.PING"
            && d["cid"] == 1
            && d["account"] == "SYS"),
        "{subsz}"
    );
    let http = s.http_addr().expect("http");
    let v = http_json(http, "/subsz?subs=1&acc=SYS").await;
    assert!(v["total"].as_u64().is_some_and(|n| n >= 24), "{v}");
    assert!(http_json(http, "/varz").await["subscriptions"].as_u64() >= Some(24));

    // Bad options: an error answer, not silence and not a crash.
    for bad in ["{bad", "[]", "\"x\"", r#"{"sort":[1]}"#] {
        let a = request(&mut c, "$SYS.REQ.SERVER.PING.CONNZ", bad, "r.4", 1).await;
        assert_eq!(a[0]["error"]["code"], 400, "{bad}: {}", a[0]);
        assert!(a[0]["error"]["description"].as_str().is_some());
        assert_eq!(a[0]["server"]["id"], id.as_str());
    }
    let a = request(
        &mut c,
        "$SYS.REQ.SERVER.PING.CONNZ",
        r#"{"limit":"x"}"#,
        "r.4",
        1,
    )
    .await;
    assert_eq!(a[0]["error"]["code"], 400, "{}", a[0]);

    // Filters: nats-server's keys (server_name, cluster, host, tags), substring matches.
    // A server that does not match stays silent; the next request shows nothing came.
    for (filter, answers) in [
        (format!(r#"{{"server_name":"{}"}}"#, &id[..10]), true),
        (r#"{"server_name":"nope"}"#.to_string(), false),
        (r#"{"host":"127.0"}"#.to_string(), true),
        (r#"{"host":"10.9.9.9"}"#.to_string(), false),
        (r#"{"cluster":"C9"}"#.to_string(), false),
        (r#"{"tags":["AZ:1"]}"#.to_string(), true),
        (r#"{"tags":["az:2"]}"#.to_string(), false),
        (r#"{"name":"other"}"#.to_string(), true),
    ] {
        c.send("SUB r.5 5\r\n").await;
        c.send(&format!(
            "PUB $SYS.REQ.SERVER.PING r.5 {}\r\n{filter}\r\n",
            filter.len()
        ))
        .await;
        // A second, unfiltered request: answered after the first (one task, in order).
        c.send("PUB $SYS.REQ.SERVER.PING.IDZ r.5 0\r\n\r\n").await;
        let (_, _, _, first) = c.msg().await;
        let first: Value = serde_json::from_slice(&first).expect("json");
        if answers {
            assert!(first.get("statsz").is_some(), "{filter}: {first}");
            let (_, _, _, second) = c.msg().await;
            let second: Value = serde_json::from_slice(&second).expect("json");
            assert!(second["data"].get("id").is_some(), "{filter}: {second}");
        } else {
            assert!(first["data"].get("id").is_some(), "{filter}: {first}");
        }
        c.send("UNSUB 5\r\n").await;
    }

    // A filter on an endpoint with options of its own: both apply.
    let a = request(
        &mut c,
        "$SYS.REQ.SERVER.PING.CONNZ",
        r#"{"tags":["az:1"],"limit":1}"#,
        "r.8",
        1,
    )
    .await;
    assert_eq!(a[0]["data"]["limit"], 1, "{}", a[0]);

    // A user of another account publishes on the same subjects in its own account: no
    // answer (the services live in the system account only).
    let mut app = login(&s, "app").await;
    app.send("SUB r.6 6\r\nPUB $SYS.REQ.SERVER.PING r.6 0\r\n\r\n")
        .await;
    app.flush().await;
    // The service handles requests in order: a later one answered means the earlier would
    // have been too.
    request(&mut c, "$SYS.REQ.SERVER.PING.IDZ", "", "r.7", 1).await;
    nothing_more(&mut app).await;
    nothing_more(&mut c).await;
    s.shutdown().await;
}

#[tokio::test]
async fn periodic_statsz_and_no_system_account() {
    let s = start(with_sys(Options::local())).await;
    let mut c = login(&s, "sys").await;
    let subject = format!("$SYS.SERVER.{}.STATSZ", s.id());
    c.send(&format!("SUB {subject} 1\r\n")).await;
    // Sent 0.5 s, 1 s, 2 s … after start: the next one comes without asking.
    let (subj, _, reply, body) = c.msg().await;
    assert_eq!(subj, subject);
    assert_eq!(reply, None);
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["server"]["id"], s.id());
    assert!(v["statsz"]["mem"].as_u64().is_some(), "{v}");
    s.shutdown().await;

    // no_system_account: no services, no system account in /varz and /accountz.
    let s = start(Options {
        no_system_account: true,
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let http = s.http_addr().expect("http");
    let v = http_json(http, "/varz").await;
    assert_eq!(v["subscriptions"], 0, "{v}");
    assert!(v.get("system_account").is_none(), "{v}");
    assert!(http_json(http, "/accountz")
        .await
        .get("system_account")
        .is_none());
    let t = http_json(http, "/topz").await;
    assert_eq!(t["scope"], "local");
    assert_eq!(t["complete"], true);
    s.shutdown().await;

    // A system account that is not configured is refused, as nats-server does.
    let e = Server::start(Options {
        system_account: "NOPE".into(),
        ..Options::local()
    })
    .await
    .err()
    .expect("refused");
    assert!(e.to_string().contains("account missing"), "{e}");
}

#[tokio::test]
async fn a_ping_reaches_every_node_of_a_natsd_cluster() {
    let a = start(with_sys(node_opts("n1", None))).await;
    let seed = Some(route_port(&a));
    let b = start(with_sys(node_opts("n2", seed))).await;
    let c = start(with_sys(node_opts("n3", seed))).await;
    let nodes = [&a, &b, &c];
    wait_for("full mesh and $SYS interest", || async {
        nodes.iter().all(|s| {
            routes(s) == 2
                && s.shared()
                    .cluster
                    .as_ref()
                    .is_some_and(|c| c.num_routes() == 8)
                && ping_interest(s, "SYS") == 2
        })
    })
    .await;
    let mut cl = login(&a, "sys").await;
    let answers = request(&mut cl, "$SYS.REQ.SERVER.PING", "", "_INBOX.ping", 3).await;
    let got: BTreeSet<(&str, &str)> = answers.iter().map(server_of).collect();
    let want: BTreeSet<(&str, &str)> = [(a.id(), "n1"), (b.id(), "n2"), (c.id(), "n3")]
        .into_iter()
        .collect();
    assert_eq!(got, want);
    for v in &answers {
        assert_eq!(v["server"]["cluster"], "C1");
        let st = &v["statsz"];
        // Every route connection (pools of 3 plus the pinned $SYS one per peer), as 2.15.
        assert_eq!(st["routes"].as_array().map(Vec::len), Some(8), "{v}");
        assert_eq!(st["active_servers"], 3);
        for r in st["routes"].as_array().into_iter().flatten() {
            for k in ["rid", "name", "sent", "received", "pending"] {
                assert!(r.get(k).is_some(), "{k}: {r}");
            }
        }
    }
    // One server by id, asked from another node.
    let a2 = request(
        &mut cl,
        &format!("$SYS.REQ.SERVER.{}.IDZ", c.id()),
        "",
        "_INBOX.idz",
        1,
    )
    .await;
    assert_eq!(a2[0]["data"]["name"], "n3");
    // A filter picks one node cluster-wide; the others stay silent.
    let a3 = request(
        &mut cl,
        "$SYS.REQ.SERVER.PING.VARZ",
        r#"{"server_name":"n2"}"#,
        "_INBOX.f",
        1,
    )
    .await;
    assert_eq!(a3[0]["data"]["server_name"], "n2");

    // A server that shuts down says so first ($SYS.SERVER.<id>.SHUTDOWN, its bare ServerInfo).
    cl.send("SUB $SYS.SERVER.*.SHUTDOWN 7\r\n").await;
    cl.flush().await;
    let c_id = c.id().to_string();
    wait_for("interest in SHUTDOWN on n3", || async {
        c.shared().accounts.get("SYS").is_some_and(|acc| {
            !acc.sublist
                .matches(b"$SYS.SERVER.X.SHUTDOWN")
                .psubs
                .is_empty()
        })
    })
    .await;
    c.shutdown().await;
    let (subject, sid, _, body) = cl.msg().await;
    assert_eq!(subject, format!("$SYS.SERVER.{c_id}.SHUTDOWN"));
    assert_eq!(sid, "7");
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["id"], c_id.as_str());
    assert_eq!(v["name"], "n3");
    for s in [a, b] {
        s.shutdown().await;
    }
}

/// A natsd node (`rust1`, monitored) and a nats-server 2.9.10 node (`go1`) in one cluster,
/// both with accounts `SYS` (the system account) and `APP`, once the route is up and each
/// knows the other's `$SYS` service interest: (natsd, nats-server, its client address, its id).
async fn mixed_pair(dir: &str) -> (Server, natsserver::NatsServer, std::net::SocketAddr, String) {
    natsserver::assert_installed();
    let rd = start(with_sys(Options {
        http_port: Some(0),
        ..node_opts("rust1", None)
    }))
    .await;
    let dir = tmp_dir("sys", dir);
    let conf = write_conf(
        &dir,
        "go.conf",
        &format!(
            "host: 127.0.0.1\nport: -1\nserver_name: go1\nhttp: \"127.0.0.1:-1\"\n\
             accounts {{ SYS {{ users [{{user: sys, password: sys}}] }}, APP {{ users [{{user: app, password: app}}] }} }}\n\
             system_account: SYS\n\
             cluster {{ name: C1, host: 127.0.0.1, port: -1, routes: [\"nats-route://127.0.0.1:{}\"] }}\n",
            route_port(&rd)
        ),
    );
    let go = natsserver::with_config(&conf, natsserver::Wait::READY);
    let go_client = {
        let v = http_json(go.http, "/varz").await;
        let port = v["port"].as_u64().expect("port") as u16;
        std::net::SocketAddr::from(([127, 0, 0, 1], port))
    };
    let go_id = http_json(go.http, "/varz").await["server_id"]
        .as_str()
        .expect("id")
        .to_string();
    wait_for("route and $SYS interest both ways", || async {
        if routes(&rd) != 1 || ping_interest(&rd, "SYS") != 1 {
            return false;
        }
        let z = http_json(go.http, "/routez?subs=1").await;
        z["routes"].as_array().is_some_and(|rs| {
            rs.iter().any(|r| {
                r["subscriptions_list"].as_array().is_some_and(|l| {
                    ["$SYS.REQ.SERVER.PING", "$SYS.REQ.ACCOUNT.*.CONNZ"]
                        .iter()
                        .all(|x| l.iter().any(|s| s == x))
                })
            })
        })
    })
    .await;
    (rd, go, go_client, go_id)
}

#[tokio::test]
async fn a_ping_reaches_natsd_and_nats_server_nodes_alike() {
    let (rd, go, go_client, go_id) = mixed_pair("mixed").await;

    // From natsd's side and from nats-server's side: both answer.
    let want: BTreeSet<(&str, &str)> = [(rd.id(), "rust1"), (go_id.as_str(), "go1")]
        .into_iter()
        .collect();
    let mut on_rust = login(&rd, "sys").await;
    let from_rust = request(&mut on_rust, "$SYS.REQ.SERVER.PING", "", "_INBOX.a", 2).await;
    let got: BTreeSet<(&str, &str)> = from_rust.iter().map(server_of).collect();
    assert_eq!(got, want);
    let mut on_go = login_at(go_client, "sys").await;
    let from_go = request(&mut on_go, "$SYS.REQ.SERVER.PING", "", "_INBOX.b", 2).await;
    let got: BTreeSet<(&str, &str)> = from_go.iter().map(server_of).collect();
    assert_eq!(got, want);

    // The same shape: every field nats-server writes, natsd writes with the same JSON type.
    let theirs = from_go
        .iter()
        .find(|v| server_of(v).1 == "go1")
        .expect("go");
    let ours = from_go
        .iter()
        .find(|v| server_of(v).1 == "rust1")
        .expect("rust");
    let mut errs = Vec::new();
    same_shape("PING", theirs, ours, &[], false, &mut errs);
    for x in [
        "VARZ", "ROUTEZ", "HEALTHZ", "CONNZ", "ACCOUNTZ", "JSZ", "LEAFZ",
    ] {
        let a = request(
            &mut on_go,
            &format!("$SYS.REQ.SERVER.PING.{x}"),
            "",
            "_INBOX.c",
            2,
        )
        .await;
        let t = a.iter().find(|v| server_of(v).1 == "go1").expect("go");
        let o = a.iter().find(|v| server_of(v).1 == "rust1").expect("rust");
        same_shape(x, &t["server"], &o["server"], &[], false, &mut errs);
        same_shape(
            x,
            &t["data"],
            &o["data"],
            // Lists that differ by role (nats-server dials natsd: only it has route `urls`).
            &[
                "routes",
                "connections",
                "leafs",
                "http_req_stats",
                "config",
                "urls",
            ],
            false,
            &mut errs,
        );
    }
    assert!(errs.is_empty(), "natsd differs:\n{}", errs.join("\n"));

    // natsd's /topz, gathered over $SYS, includes the nats-server node's own view.
    let t = http_json(rd.http_addr().expect("http"), "/topz").await;
    assert_eq!(t["nodes"].as_array().map(Vec::len), Some(2), "{t:#}");
    assert_eq!(t["edges"].as_array().map(Vec::len), Some(2), "{t:#}");
    assert_eq!(t["complete"], true, "{t:#}");
    drop(go);
    rd.shutdown().await;
}

#[tokio::test]
async fn a_client_library_request_gets_the_answer() {
    let s = start(with_sys(Options::local())).await;
    let nc = async_nats::ConnectOptions::with_user_and_password("sys".into(), "sys".into())
        .connect(s.client_url())
        .await
        .expect("connect");
    let m = nc
        .request("$SYS.REQ.SERVER.PING.IDZ", "".into())
        .await
        .expect("answer");
    let v: Value = serde_json::from_slice(&m.payload).expect("json");
    assert_eq!(v["data"]["id"], s.id());
    let m = nc
        .request("$SYS.REQ.SERVER.PING", r#"{"cluster":""}"#.into())
        .await
        .expect("answer");
    let v: Value = serde_json::from_slice(&m.payload).expect("json");
    assert!(v["statsz"]["connections"].as_u64() >= Some(1), "{v}");
    drop(nc);
    s.shutdown().await;
}

/// nats-server's system imports (issue 15): a user of `APP` asks `$SYS.REQ.SERVER.PING.CONNZ`,
/// `$SYS.REQ.ACCOUNT.PING.CONNZ` and `$SYS.REQ.ACCOUNT.PING.STATZ` in its own account and gets
/// `APP`'s connections and counters from every node — from natsd and nats-server 2.9.10 nodes
/// alike, whichever the user is connected to — and `/accountz` lists those imports.
#[tokio::test]
async fn account_users_get_their_own_account_from_every_node() {
    let (rd, go, go_client, go_id) = mixed_pair("accsvc").await;
    wait_for("nats-server's account services known to natsd", || async {
        route_interest(&rd, "SYS", "$SYS.REQ.ACCOUNT.APP.CONNZ") == 1
            && route_interest(&rd, "SYS", "$SYS.REQ.ACCOUNT.APP.STATZ") == 1
    })
    .await;
    // On each node: one APP and one SYS user (the SYS ones must not be listed).
    let mut app_rd = login(&rd, "app").await;
    let mut app_go = login_at(go_client, "app").await;
    let _sys_rd = login(&rd, "sys").await;
    let _sys_go = login_at(go_client, "sys").await;
    let want: BTreeSet<(&str, &str)> = [(rd.id(), "rust1"), (go_id.as_str(), "go1")]
        .into_iter()
        .collect();
    for (c, inbox) in [(&mut app_rd, "_INBOX.r"), (&mut app_go, "_INBOX.g")] {
        for subject in ["$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ"] {
            let a = request(c, subject, "", inbox, 2).await;
            let got: BTreeSet<(&str, &str)> = a.iter().map(server_of).collect();
            assert_eq!(got, want, "{subject}");
            for v in &a {
                assert_eq!(v["data"]["num_connections"], 1, "{subject}: {v}");
            }
        }
        let a = request(c, "$SYS.REQ.ACCOUNT.PING.STATZ", "", inbox, 2).await;
        let got: BTreeSet<(&str, &str)> = a.iter().map(server_of).collect();
        assert_eq!(got, want);
        for v in &a {
            let st = &v["data"]["account_statz"];
            assert_eq!(st.as_array().map(Vec::len), Some(1), "{v}");
            assert_eq!((&st[0]["acc"], &st[0]["conns"]), (&"APP".into(), &1.into()));
        }
    }
    // A system user asks for one account directly, as nats-server answers it.
    let mut sys = login(&rd, "sys").await;
    let a = request(&mut sys, "$SYS.REQ.ACCOUNT.APP.CONNZ", "", "_INBOX.s", 2).await;
    assert!(a.iter().all(|v| v["data"]["num_connections"] == 1), "{a:?}");
    let a = request(&mut sys, "$SYS.REQ.ACCOUNT.APP.INFO", "", "_INBOX.s", 2).await;
    assert!(
        a.iter().all(|v| v["data"]["account_name"] == "APP"),
        "{a:?}"
    );
    // /accountz: the same imports (2.9.10 writes a service import's local subject as
    // `subject`; natsd writes 2.10+'s form, with `local_subject`).
    let local = |v: &Value, key: &str| -> BTreeSet<String> {
        v["account_detail"]["imports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|i| i["account"] == "SYS" && i["type"] == "service")
            .filter_map(|i| i[key].as_str().map(str::to_string))
            .collect()
    };
    let t = http_json(go.http, "/accountz?acc=APP").await;
    let o = http_json(rd.http_addr().expect("http"), "/accountz?acc=APP").await;
    // natsd also has 2.15's `$SYS.REQ.USER.INFO`, which 2.9.10 does not.
    let mut ours = local(&o, "local_subject");
    assert!(ours.remove("$SYS.REQ.USER.INFO"), "{o}");
    assert_eq!(local(&t, "subject"), ours, "{t}\n{o}");
    assert_eq!(ours.len(), 3, "{o}");
    drop(go);
    rd.shutdown().await;
}
