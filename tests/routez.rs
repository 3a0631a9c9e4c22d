//! `/routez`, `/varz`'s cluster fields and `/topz` on clusters: a 3-node natsd mesh seeded to
//! one node (who dialled whom, what is configured, remote interest counts and lists), and a
//! mixed cluster where natsd's documents are compared key by key with the real nats-server
//! 2.9.10's (every field nats-server writes present with the same JSON type).

mod common;

use common::cluster::{self, route_port, routes};
use common::http_addr as http;
use common::natsserver::{self, NatsServer};
use common::{http_get, http_json, start, wait_for, Raw};
use natsd::{Options, Server};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;

fn node_opts(name: &str, seed: Option<u16>) -> Options {
    Options {
        http_port: Some(0),
        ..cluster::node_opts(name, seed)
    }
}

/// `n` natsd nodes seeded to the first, each with a monitor port; waits for the full mesh.
async fn mesh(n: usize) -> Vec<Server> {
    cluster::mesh_with(n, node_opts).await
}

/// The route in a `/routez` document whose remote is `id`.
fn route_to<'a>(routez: &'a Value, id: &str) -> &'a Value {
    routez["routes"]
        .as_array()
        .expect("routes array")
        .iter()
        .find(|r| r["remote_id"] == id)
        .unwrap_or_else(|| panic!("no route to {id} in {routez:#}"))
}

/// The connection to `id` that carries `subject` (with `?subs=`): the pool slot of its
/// account (a pool spreads accounts over its connections).
fn route_carrying<'a>(routez: &'a Value, id: &str, subject: &str) -> &'a Value {
    routez["routes"]
        .as_array()
        .expect("routes array")
        .iter()
        .filter(|r| r["remote_id"] == id)
        .find(|r| {
            let list = r["subscriptions_list"].as_array().into_iter().flatten();
            let detail = r["subscriptions_list_detail"]
                .as_array()
                .into_iter()
                .flatten();
            list.chain(detail.map(|d| &d["subject"]))
                .any(|s| s == subject)
        })
        .unwrap_or_else(|| panic!("no route to {id} carries {subject} in {routez:#}"))
}

/// `key` summed over the route connections to `id` (its pool).
fn sum_to(routez: &Value, id: &str, key: &str) -> u64 {
    routez["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["remote_id"] == id)
        .map(|r| r[key].as_u64().unwrap_or(0))
        .sum()
}

/// Remote subscriptions learned from `remote`, over all its route connections (a pool).
async fn subs_on_route(at: SocketAddr, remote: &str) -> u64 {
    let z = http_json(at, "/routez").await;
    route_to(&z, remote);
    z["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["remote_id"] == remote)
        .map(|r| r["subscriptions"].as_u64().unwrap_or(0))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routez_on_a_seeded_three_node_mesh() {
    let nodes = mesh(3).await;
    wait_for("every pool full", || async {
        nodes.iter().all(|s| {
            s.shared()
                .cluster
                .as_ref()
                .is_some_and(|c| c.num_routes() == 8)
        })
    })
    .await;
    let ids: Vec<String> = nodes.iter().map(|s| s.id().to_string()).collect();
    let rports: Vec<u16> = nodes.iter().map(route_port).collect();
    let mut docs = Vec::new();
    for (i, s) in nodes.iter().enumerate() {
        let z = http_json(http(s), "/routez").await;
        assert_eq!(z["server_id"], ids[i].as_str());
        assert_eq!(z["server_name"], format!("n{i}"));
        assert!(z["now"].as_str().is_some_and(|t| t.ends_with('Z')));
        // Pools by default (nats-server 2.10+): 3 connections per peer plus the system
        // account's pinned one, each listed (the pinned one with its `account`).
        assert_eq!(z["num_routes"], 8, "{z:#}");
        let routes = z["routes"].as_array().expect("routes");
        assert_eq!(routes.len(), 8);
        let mut remotes: Vec<&str> = routes
            .iter()
            .map(|r| r["remote_id"].as_str().unwrap())
            .collect();
        remotes.sort();
        remotes.dedup();
        for id in &remotes {
            let to: Vec<&Value> = routes.iter().filter(|r| r["remote_id"] == *id).collect();
            assert_eq!(to.len(), 4, "{z:#}");
            let pinned: Vec<&&Value> = to.iter().filter(|r| r.get("account").is_some()).collect();
            assert_eq!(pinned.len(), 1, "{z:#}");
            assert_eq!(pinned[0]["account"], "$SYS");
            // Both `accept` (the default): negotiated off, as nats-server shows it.
            assert!(to.iter().all(|r| r["compression"] == "off"), "{z:#}");
        }
        let mut want: Vec<&str> = ids
            .iter()
            .filter(|x| **x != ids[i])
            .map(String::as_str)
            .collect();
        want.sort();
        assert_eq!(remotes, want);
        for r in routes {
            assert!(r["rid"].as_u64().is_some());
            assert_eq!(r["ip"], "127.0.0.1");
            assert!(r["port"].as_u64().is_some_and(|p| p > 0));
            for k in ["start", "last_activity"] {
                assert!(r[k].as_str().is_some_and(|t| t.ends_with('Z')), "{k}: {r}");
            }
            for k in ["rtt", "uptime", "idle"] {
                assert!(r[k].as_str().is_some_and(|t| t.ends_with('s')), "{k}: {r}");
            }
            for k in [
                "pending_size",
                "in_msgs",
                "out_msgs",
                "in_bytes",
                "out_bytes",
                "subscriptions",
            ] {
                assert!(r[k].as_u64().is_some(), "{k}: {r}");
            }
            assert!(r.get("subscriptions_list").is_none());
            let remote_name = format!(
                "n{}",
                ids.iter().position(|x| *x == r["remote_id"]).unwrap()
            );
            assert_eq!(r["remote_name"], remote_name.as_str());
            // Configured implies dialled.
            if r["is_configured"] == true {
                assert_eq!(r["did_solicit"], true, "{r}");
            }
        }
        docs.push(z);
    }
    // The seed accepted both routes; each joiner dialled the seed because it was configured to.
    for j in 1..3 {
        let on_seed = route_to(&docs[0], &ids[j]);
        assert_eq!(on_seed["did_solicit"], false, "{on_seed}");
        assert_eq!(on_seed["is_configured"], false, "{on_seed}");
        let to_seed = route_to(&docs[j], &ids[0]);
        assert_eq!(to_seed["did_solicit"], true, "{to_seed}");
        assert_eq!(to_seed["is_configured"], true, "{to_seed}");
        // The dialler sees the seed's route port; the seed sees the joiner's ephemeral one.
        assert_eq!(to_seed["port"], rports[0]);
    }
    // Between the joiners (learned by gossip): not configured, exactly one side dialled.
    let (a, b) = (route_to(&docs[1], &ids[2]), route_to(&docs[2], &ids[1]));
    assert_eq!(a["is_configured"], false);
    assert_eq!(b["is_configured"], false);
    assert_ne!(a["did_solicit"], b["did_solicit"], "{a}\n{b}");
    let (dialler, dialled) = if a["did_solicit"] == true {
        (1, 2)
    } else {
        (2, 1)
    };
    assert_eq!(
        route_to(&docs[dialler], &ids[dialled])["port"],
        rports[dialled]
    );

    // Remote interest: a client on n2 subscribes; n0 and n1 count it on their route to n2.
    let before0 = subs_on_route(http(&nodes[0]), &ids[2]).await;
    let before1 = subs_on_route(http(&nodes[1]), &ids[2]).await;
    let mut c = Raw::client(&nodes[2]).await;
    c.send("SUB routez.probe 1\r\nSUB routez.queue workers 2\r\n")
        .await;
    c.flush().await;
    for (at, before) in [(http(&nodes[0]), before0), (http(&nodes[1]), before1)] {
        let remote = ids[2].clone();
        wait_for("the route's subscription count to move", || {
            let remote = remote.clone();
            async move { subs_on_route(at, &remote).await == before + 2 }
        })
        .await;
    }
    let z = http_json(http(&nodes[0]), "/routez?subs=1").await;
    let list: Vec<&str> = route_carrying(&z, &ids[2], "routez.probe")["subscriptions_list"]
        .as_array()
        .expect("subscriptions_list")
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(list.contains(&"routez.probe"), "{list:?}");
    assert!(list.contains(&"routez.queue"), "{list:?}");
    assert_eq!(
        Some(list.len() as u64),
        route_carrying(&z, &ids[2], "routez.probe")["subscriptions"].as_u64()
    );
    assert!(route_carrying(&z, &ids[2], "routez.probe")
        .get("subscriptions_list_detail")
        .is_none());
    let z = http_json(http(&nodes[0]), "/routez?subs=detail").await;
    let r = route_carrying(&z, &ids[2], "routez.probe");
    assert!(r.get("subscriptions_list").is_none());
    let detail = r["subscriptions_list_detail"].as_array().expect("detail");
    let q = detail
        .iter()
        .find(|d| d["subject"] == "routez.queue")
        .expect("queue sub in detail");
    assert_eq!(q["qgroup"], "workers");
    assert_eq!(q["account"], "$G");
    assert_eq!(q["cid"], r["rid"]);
    assert!(q["sid"].as_str().is_some());
    let p = detail
        .iter()
        .find(|d| d["subject"] == "routez.probe")
        .expect("plain sub in detail");
    assert!(p.get("qgroup").is_none());

    // Unsubscribing moves the count back.
    c.send("UNSUB 1\r\n").await;
    c.flush().await;
    let at = http(&nodes[0]);
    let remote = ids[2].clone();
    wait_for("the count to drop", || {
        let remote = remote.clone();
        async move { subs_on_route(at, &remote).await == before0 + 1 }
    })
    .await;

    // Messages over the route show in its counters.
    let mut p = Raw::client(&nodes[0]).await;
    p.send("PUB routez.probe.none 2\r\nhi\r\nPUB routez.queue 5\r\nhello\r\n")
        .await;
    p.flush().await;
    let at = http(&nodes[0]);
    let remote = ids[2].clone();
    wait_for("out_msgs on the route", || {
        let remote = remote.clone();
        async move {
            let z = http_json(at, "/routez").await;
            sum_to(&z, &remote, "out_msgs") >= 1 && sum_to(&z, &remote, "out_bytes") >= 5
        }
    })
    .await;
    let at2 = http(&nodes[2]);
    let remote0 = ids[0].clone();
    wait_for("in_msgs on the other end", || {
        let remote0 = remote0.clone();
        async move {
            let z = http_json(at2, "/routez").await;
            sum_to(&z, &remote0, "in_msgs") >= 1
        }
    })
    .await;

    // JSONP and a bad parameter.
    let (status, body) = http_get(http(&nodes[1]), "/routez?callback=cb").await;
    assert_eq!(status, 200);
    assert!(body.starts_with("cb(") && body.ends_with(')'), "{body}");
    let inner: Value = serde_json::from_str(&body[3..body.len() - 1]).expect("JSONP body");
    assert_eq!(inner["num_routes"], 8);
    let (status, _) = http_get(http(&nodes[1]), "/routez?subs=bogus").await;
    assert_eq!(status, 400);
    // Pretty-printed with two spaces, as nats-server writes it.
    let (_, body) = http_get(http(&nodes[1]), "/routez").await;
    assert!(body.starts_with("{\n  \"server_id\": "), "{body}");

    // /varz: route count and the cluster object.
    for (i, s) in nodes.iter().enumerate() {
        let v = http_json(http(s), "/varz").await;
        // Route connections, as nats-server 2.15 counts them: 2 peers × (3 + pinned $SYS).
        assert_eq!(v["routes"], 8);
        let cl = &v["cluster"];
        assert_eq!(cl["name"], "C1");
        assert_eq!(cl["addr"], "127.0.0.1");
        assert_eq!(cl["cluster_port"], rports[i]);
        assert_eq!(cl["auth_timeout"], 2);
        if i == 0 {
            assert!(cl.get("urls").is_none(), "{cl}");
        } else {
            assert_eq!(
                cl["urls"],
                serde_json::json!([format!("127.0.0.1:{}", rports[0])])
            );
        }
    }

    // /topz, gathered over $SYS: 3 nodes, 2 edges from each, a complete mesh.
    for (i, s) in nodes.iter().enumerate() {
        let t = http_json(http(s), "/topz").await;
        assert_eq!(t["scope"], "cluster");
        assert_eq!(t["server_id"], ids[i].as_str());
        let nodes_ = t["nodes"].as_array().expect("nodes");
        assert_eq!(nodes_.len(), 3, "{t:#}");
        assert!(nodes_
            .iter()
            .all(|n| n["reachable"] == true && n["cluster"] == "C1"));
        let edges = t["edges"].as_array().expect("edges");
        assert_eq!(edges.len(), 6, "{t:#}");
        assert!(edges.iter().all(|e| e["kind"] == "route"));
        assert_eq!(
            edges
                .iter()
                .filter(|e| e["from"] == ids[i].as_str())
                .count(),
            2
        );
        assert_eq!(t["missing"], serde_json::json!([]));
        assert_eq!(t["one_sided"], serde_json::json!([]));
        assert_eq!(t["partitions"].as_array().map(Vec::len), Some(1));
        assert_eq!(t["complete"], true);
    }
    let (status, dot) = http_get(http(&nodes[0]), "/topz?format=dot").await;
    assert_eq!(status, 200);
    assert!(dot.starts_with("digraph") && dot.contains(&ids[2]), "{dot}");
    let (status, m) = http_get(http(&nodes[0]), "/topz?format=mermaid").await;
    assert_eq!(status, 200);
    assert!(m.starts_with("graph LR"), "{m}");
    let (status, _) = http_get(http(&nodes[0]), "/topz?format=png").await;
    assert_eq!(status, 400);

    drop(c);
    drop(p);
    for s in nodes {
        s.shutdown().await;
    }
}

#[tokio::test]
async fn routez_without_a_cluster_is_empty() {
    let s = start(Options {
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let z = http_json(http(&s), "/routez").await;
    assert_eq!(z["num_routes"], 0);
    assert_eq!(z["routes"], serde_json::json!([]));
    let v = http_json(http(&s), "/varz").await;
    assert_eq!(v["cluster"], serde_json::json!({}));
    assert_eq!(v["routes"], 0);
    let t = http_json(http(&s), "/topz").await;
    assert_eq!(t["nodes"].as_array().map(Vec::len), Some(1));
    assert_eq!(t["complete"], true);
    s.shutdown().await;
}

/// A real nats-server in cluster C1, killed on drop.
type Go = NatsServer;

fn go_server(name: &str, seed: Option<u16>) -> Go {
    natsserver::clustered(name, seed, true)
}

/// Every field of `theirs` (nats-server) must be in `ours` (natsd) with the same JSON type,
/// recursively (arrays: element by element over the shorter one). Extra fields are fine.
fn same_shape(path: &str, theirs: &Value, ours: &Value, errs: &mut Vec<String>) {
    natsserver::same_shape(path, theirs, ours, &[], false, errs);
}

fn sub_key(d: &Value) -> String {
    match d {
        Value::String(s) => s.clone(),
        d => format!("{} {}", d["subject"], d["qgroup"]),
    }
}

/// Lists of remote interest come in any order: the same set of subjects must be on both
/// sides, and each nats-server detail entry must have the shape of natsd's for the same
/// subscription. Leaves one matching entry in each so `same_shape` still sees the keys.
fn match_subs(path: &str, theirs: &mut Value, ours: &mut Value, errs: &mut Vec<String>) {
    for k in ["subscriptions_list", "subscriptions_list_detail"] {
        let (Some(t), Some(o)) = (theirs.get(k).cloned(), ours.get(k).cloned()) else {
            continue;
        };
        let (t, o) = (
            t.as_array().cloned().unwrap_or_default(),
            o.as_array().cloned().unwrap_or_default(),
        );
        // The system account's interest names each server (ids, inbox hashes) and differs
        // between the implementations (natsd serves fewer $SYS subjects; its system imports'
        // responses come back on a random `_R_.<token>.>`, on the route that carries `$SYS`,
        // a pinned one between natsd nodes): compare the rest.
        let not_sys = |k: &String| {
            !["$SYS.", "\"$SYS.", "_R_.", "\"_R_."]
                .iter()
                .any(|p| k.starts_with(p))
        };
        let mut tk: Vec<String> = t.iter().map(sub_key).filter(not_sys).collect();
        let mut ok: Vec<String> = o.iter().map(sub_key).filter(not_sys).collect();
        tk.sort();
        ok.sort();
        if tk != ok {
            errs.push(format!(
                "{path} {k} of {}: nats-server {tk:?}, natsd {ok:?}",
                theirs["remote_id"]
            ));
        }
        for te in &t {
            if let Some(oe) = o.iter().find(|oe| sub_key(oe) == sub_key(te)) {
                same_shape(&format!("{path}.{k}[{}]", sub_key(te)), te, oe, errs);
            }
        }
        let first = t.iter().find_map(|te| {
            o.iter()
                .find(|oe| sub_key(oe) == sub_key(te))
                .map(|oe| (te.clone(), oe.clone()))
        });
        if let Some((te, oe)) = first {
            theirs[k] = Value::Array(vec![te]);
            ours[k] = Value::Array(vec![oe]);
        }
    }
}

/// The routes of a `/routez`, seed first, then the other one.
fn by_role<'a>(z: &'a Value, seed_id: &str) -> [&'a Value; 2] {
    let rs = z["routes"].as_array().expect("routes");
    assert_eq!(rs.len(), 2, "{z:#}");
    let seed = rs.iter().find(|r| r["remote_id"] == seed_id).expect("seed");
    let other = rs
        .iter()
        .find(|r| r["remote_id"] != seed_id)
        .expect("other");
    [seed, other]
}

/// A nats-server seed with two joiners, one natsd and one nats-server: the joiners' documents
/// play the same role, so natsd's must have every field of nats-server's with the same type
/// and the same values where the values are determined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routez_and_varz_match_nats_server_in_a_mixed_cluster() {
    let seed = go_server("go-seed", None);
    let rd = start(node_opts("rust-joiner", Some(seed.route_port))).await;
    let go = go_server("go-joiner", Some(seed.route_port));
    let go_routes =
        |g: SocketAddr| async move { http_json(g, "/routez").await["num_routes"].as_u64() };
    wait_for("mixed full mesh", || {
        let n = routes(&rd);
        let (s, g) = (seed.http, go.http);
        async move { n == 2 && go_routes(s).await == Some(2) && go_routes(g).await == Some(2) }
    })
    .await;
    let seed_id = http_json(seed.http, "/varz").await["server_id"]
        .as_str()
        .expect("id")
        .to_string();
    let go_id = http_json(go.http, "/varz").await["server_id"]
        .as_str()
        .expect("id")
        .to_string();
    let rd_id = rd.id().to_string();

    // Interest from a client on the seed, so subscription lists are non-empty on both joiners.
    let mut c = Raw {
        stream: tokio::net::TcpStream::connect(seed.client)
            .await
            .expect("connect"),
        buf: Vec::new(),
    };
    c.line().await;
    c.send("CONNECT {\"verbose\":false}\r\nSUB cmp.subject 1\r\nSUB cmp.queue q 2\r\nPING\r\n")
        .await;
    c.expect("PONG").await;
    for at in [go.http, http(&rd)] {
        let sid = seed_id.clone();
        wait_for("the seed's interest on the joiner", || {
            let sid = sid.clone();
            async move {
                let z = http_json(at, "/routez?subs=1").await;
                z["routes"].as_array().is_some_and(|rs| {
                    rs.iter().any(|r| {
                        r["remote_id"] == sid.as_str()
                            && r["subscriptions_list"]
                                .as_array()
                                .is_some_and(|l| l.iter().any(|s| s == "cmp.queue"))
                    })
                })
            }
        })
        .await;
    }

    let mut errs = Vec::new();
    for path in ["/routez", "/routez?subs=1", "/routez?subs=detail"] {
        let theirs = http_json(go.http, path).await;
        let ours = http_json(http(&rd), path).await;
        let mut t = theirs.clone();
        let mut o = ours.clone();
        // Compare routes by role (seed, other joiner), not by position.
        let [ts, tother] = by_role(&theirs, &seed_id);
        let [os, oother] = by_role(&ours, &seed_id);
        let mut pair = |r: &Value, o: &Value| {
            let (mut r, mut o) = (r.clone(), o.clone());
            match_subs(path, &mut r, &mut o, &mut errs);
            (r, o)
        };
        let (ts2, os2) = pair(ts, os);
        let (tother2, oother2) = pair(tother, oother);
        t["routes"] = Value::Array(vec![ts2, tother2]);
        o["routes"] = Value::Array(vec![os2, oother2]);
        same_shape(path, &t, &o, &mut errs);
        // Values that must agree.
        for (what, tv, ov) in [
            ("num_routes", &theirs["num_routes"], &ours["num_routes"]),
            ("seed did_solicit", &ts["did_solicit"], &os["did_solicit"]),
            (
                "seed is_configured",
                &ts["is_configured"],
                &os["is_configured"],
            ),
            ("seed ip", &ts["ip"], &os["ip"]),
            ("seed port", &ts["port"], &os["port"]),
            (
                "other is_configured",
                &tother["is_configured"],
                &oother["is_configured"],
            ),
            ("other ip", &tother["ip"], &oother["ip"]),
        ] {
            if tv != ov {
                errs.push(format!("{path} {what}: nats-server {tv}, natsd {ov}"));
            }
        }
        assert_eq!(ts["did_solicit"], true);
        assert_eq!(ts["is_configured"], true);
        assert_eq!(ts["port"], seed.route_port);
        assert_eq!(tother["remote_id"], rd_id.as_str());
        assert_eq!(oother["remote_id"], go_id.as_str());
        // The two joiners kept the same connection: exactly one of them dialled it.
        assert_ne!(
            tother["did_solicit"], oother["did_solicit"],
            "{tother}\n{oother}"
        );
    }

    // The seed's own view of the natsd joiner: accepted, not configured.
    let sz = http_json(seed.http, "/routez").await;
    let r = route_to(&sz, &rd_id);
    assert_eq!(r["did_solicit"], false);
    assert_eq!(r["is_configured"], false);
    let r = route_to(&http_json(http(&rd), "/routez").await, &seed_id).clone();
    assert_eq!(r["port"], seed.route_port);

    // /varz: same cluster object (urls name the seed as host:port) and route count.
    let tv = http_json(go.http, "/varz").await;
    let ov = http_json(http(&rd), "/varz").await;
    same_shape("/varz.cluster", &tv["cluster"], &ov["cluster"], &mut errs);
    same_shape("/varz.routes", &tv["routes"], &ov["routes"], &mut errs);
    for k in ["name", "addr", "auth_timeout", "urls", "tls_timeout"] {
        if tv["cluster"][k] != ov["cluster"][k] {
            errs.push(format!(
                "/varz cluster.{k}: nats-server {}, natsd {}",
                tv["cluster"][k], ov["cluster"][k]
            ));
        }
    }
    let tkeys: Vec<&String> = tv["cluster"].as_object().expect("cluster").keys().collect();
    // `pool_size` is nats-server 2.10+'s (natsd pools by default, as 2.15).
    let okeys: Vec<&String> = ov["cluster"]
        .as_object()
        .expect("cluster")
        .keys()
        .filter(|k| *k != "pool_size")
        .collect();
    if tkeys != okeys {
        errs.push(format!(
            "/varz cluster keys: nats-server {tkeys:?}, natsd {okeys:?}"
        ));
    }
    if tv["routes"] != ov["routes"] {
        errs.push(format!(
            "/varz routes: {} vs {}",
            tv["routes"], ov["routes"]
        ));
    }
    assert!(
        errs.is_empty(),
        "natsd differs from nats-server:\n{}",
        errs.join("\n")
    );

    // The mixed mesh as natsd gathers it (nats-server answers too): three servers, complete.
    let t = http_json(http(&rd), "/topz").await;
    assert_eq!(t["nodes"].as_array().map(Vec::len), Some(3), "{t:#}");
    assert_eq!(t["edges"].as_array().map(Vec::len), Some(6), "{t:#}");
    assert_eq!(t["complete"], true);
    let names: Vec<&str> = t["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["server_name"].as_str().unwrap_or(""))
        .collect();
    for n in ["go-seed", "go-joiner", "rust-joiner"] {
        assert!(names.contains(&n), "{names:?}");
    }

    drop(c);
    rd.shutdown().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
}
