//! The meta group on three embedded natsd nodes: `$JS.API.META.LEADER.STEPDOWN` from the
//! system account only, to any node or to a preferred one (`placement`), and nats-server's
//! refusals.

mod common;

use common::jsc::*;

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

/// `$JS.API.META.LEADER.STEPDOWN` from the system account: the meta leader answers, steps
/// down, and another node leads the meta group. From any other account it gets no answer
/// (nats-server 2.15.1 logs a warning and answers nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_system_account_steps_the_meta_leader_down() {
    let dir = common::js_dir("jsc-meta");
    let conf = "accounts {\n  APP { jetstream: enabled, users [{user: app, password: app}] }\n  \
                SYS { users [{user: sys, password: sys}] }\n}\nsystem_account: SYS\n";
    let servers = common::cluster::mesh_with(3, |name, seed| {
        let base = common::cluster::node_opts(name, seed);
        let mut o = common::conf_opts(conf);
        o.server_name = base.server_name;
        o.cluster = base.cluster;
        o.http_port = Some(0);
        o.jetstream = Some(natsd::config::JetStreamOpts {
            store_dir: Some(dir.join(name)),
            ..Default::default()
        });
        o
    })
    .await;
    let mut js = Js { servers, dir };
    let url = js.servers[0].client_url();
    let sys = async_nats::ConnectOptions::with_user_and_password("sys".into(), "sys".into())
        .connect(url.as_str())
        .await
        .expect("connect sys");
    let app = async_nats::ConnectOptions::with_user_and_password("app".into(), "app".into())
        .connect(url.as_str())
        .await
        .expect("connect app");
    // `$SYS.REQ.SERVER.<id>.RAFTZ` answers `/raftz`'s data, filtered by the request's
    // `group` (`{}` for a filter nothing matches, as nats-server).
    let id = js.servers[0].shared().id.clone();
    let subject = format!("$SYS.REQ.SERVER.{id}.RAFTZ");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let z = ask(&sys, &subject, r#"{"group":"_meta_"}"#.into()).await;
        if z["data"]["SYS"]["_meta_"]["leader"].is_string() {
            assert_eq!(z["data"]["SYS"]["_meta_"]["size"], 3, "{z}");
            assert_eq!(
                z["data"]["SYS"].as_object().map(|m| m.len()),
                Some(1),
                "{z}"
            );
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no meta leader in {z}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let z = ask(&sys, &subject, r#"{"group":"nope"}"#.into()).await;
    assert_eq!(z["data"], serde_json::json!({}), "{z}");
    assert_eq!(z["server"]["id"], id.as_str(), "{z}");
    // natsd nodes send each other Raft appends in the binary form (their hellos say they
    // take it), not the JSON kept for older peers.
    let mut binary = sys
        .subscribe("$NATSD.RAFT.*.AEB.*")
        .await
        .expect("subscribe");
    let mut json = sys
        .subscribe("$NATSD.RAFT.*.AE.*")
        .await
        .expect("subscribe");
    for _ in 0..5 {
        let m = tokio::time::timeout(WAIT, binary.next())
            .await
            .expect("binary appends between the nodes")
            .expect("subscription open");
        assert!(m.payload.first() != Some(&b'{'), "{m:?}");
    }
    assert!(
        futures::FutureExt::now_or_never(json.next()).is_none(),
        "JSON appends between natsd nodes"
    );
    // The meta leader, once there is one, from `/jsz`.
    let meta_leader = |js: &Js| {
        let http = js.servers[0].http_addr().expect("monitoring port");
        async move {
            let (_, body) = common::http_get(http, "/jsz").await;
            let v: Value = serde_json::from_str(&body).expect("json");
            v["meta_cluster"]["leader"].as_str().map(str::to_string)
        }
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let first = loop {
        if let Some(l) = meta_leader(&js).await {
            break l;
        }
        assert!(tokio::time::Instant::now() < deadline, "no meta leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let r = tokio::time::timeout(
        Duration::from_secs(2),
        app.request("$JS.API.META.LEADER.STEPDOWN", "".into()),
    )
    .await;
    assert!(
        !matches!(r, Ok(Ok(_))),
        "an application account got an answer: {r:?}"
    );

    let r = once(&sys, "$JS.API.META.LEADER.STEPDOWN").await;
    assert_eq!(
        r["type"], "io.nats.jetstream.api.v1.meta_leader_stepdown_response",
        "{r}"
    );
    assert_eq!(r["success"], true, "{r}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match meta_leader(&js).await {
            Some(l) if l != first => break,
            _ => assert!(tokio::time::Instant::now() < deadline, "no new meta leader"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A preferred leader by name: the meta group hands over to it (twice, to two different
    // nodes, so that chance does not pass the test), as nats-server 2.11+ does.
    let names: Vec<String> = js.servers.iter().map(|s| s.shared().name.clone()).collect();
    for _ in 0..2 {
        let now = wait_meta_leader(&js, &meta_leader).await;
        let to = names
            .iter()
            .find(|n| **n != now)
            .expect("another node")
            .clone();
        let body = format!(r#"{{"placement":{{"preferred":"{to}"}}}}"#);
        let r = request(&sys, &body).await;
        assert_eq!(r["success"], true, "{r}");
        let deadline = tokio::time::Instant::now() + WAIT;
        while meta_leader(&js).await.as_deref() != Some(to.as_str()) {
            assert!(tokio::time::Instant::now() < deadline, "{to} never led");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    // nats-server's refusals (400 10005), and nothing changes.
    let now = wait_meta_leader(&js, &meta_leader).await;
    for (placement, why) in [
        (
            format!(r#"{{"preferred":"{now}"}}"#),
            format!("preferred server \"{now}\" is already leader"),
        ),
        (
            r#"{"preferred":"nobody"}"#.to_string(),
            "preferred server \"nobody\" not known".to_string(),
        ),
        (
            r#"{"cluster":"C9"}"#.to_string(),
            "no replacement peer connected".to_string(),
        ),
    ] {
        let r = request(&sys, &format!(r#"{{"placement":{placement}}}"#)).await;
        assert_eq!(r["error"]["err_code"], 10005, "{r}");
        assert_eq!(r["error"]["code"], 400, "{r}");
        assert_eq!(r["error"]["description"], why.as_str(), "{r}");
    }
    // A placement by cluster picks another member of it.
    let r = request(&sys, r#"{"placement":{"cluster":"C1"}}"#).await;
    assert_eq!(r["success"], true, "{r}");
    let deadline = tokio::time::Instant::now() + WAIT;
    while meta_leader(&js).await.is_none_or(|l| l == now) {
        assert!(tokio::time::Instant::now() < deadline, "no new meta leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&js.dir);
}

/// A META.LEADER.STEPDOWN with `body`, sent once, answered within the deadline.
async fn request(sys: &async_nats::Client, body: &str) -> Value {
    ask(sys, "$JS.API.META.LEADER.STEPDOWN", body.to_string()).await
}

/// A request to `subject` with `body`, sent once, answered within the deadline.
async fn ask(nc: &async_nats::Client, subject: &str, body: String) -> Value {
    let m = tokio::time::timeout(WAIT, nc.request(subject.to_string(), body.into()))
        .await
        .expect("an answer in time")
        .expect("an answer");
    serde_json::from_slice(&m.payload).expect("JSON answer")
}

/// The meta leader once there is one.
async fn wait_meta_leader<F, Fut>(js: &Js, meta_leader: &F) -> String
where
    F: Fn(&Js) -> Fut,
    Fut: std::future::Future<Output = Option<String>>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(l) = meta_leader(js).await {
            return l;
        }
        assert!(tokio::time::Instant::now() < deadline, "no meta leader");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// STREAM.LEADER.STEPDOWN and CONSUMER.LEADER.STEPDOWN with a `placement`, as nats-server
/// 2.11+: the stream's group hands over to the preferred member (twice in a row, to
/// different nodes, so that chance does not pass the test); a consumer's placement moves its
/// own group (twice) and leaves the stream's leader where it is; a preferred server that
/// is not a member of the group is "not known", and the current leader is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stream_and_consumer_stepdowns_go_to_the_preferred_member() {
    let js = cluster("jsc-prefer", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let names: Vec<String> = js.servers.iter().map(|s| s.shared().name.clone()).collect();
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.P3",
        r#"{"name":"P3","subjects":["p3.>"],"num_replicas":3}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.P2",
        r#"{"name":"P2","subjects":["p2.>"],"num_replicas":2}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let r = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.P3.D",
        r#"{"stream_name":"P3","config":{"durable_name":"D","ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");

    let leader = |stream: &'static str| {
        let nc = nc.clone();
        async move { new_leader(&nc, stream, "").await }
    };
    let mut now = leader("P3").await;
    for round in 0..2 {
        // Each round the next node in name order after the leader: a different target
        // than a plain stepdown's winner at least half the time.
        let at = names.iter().position(|n| *n == now).expect("a node");
        let to = names[(at + 1 + round % 2) % names.len()].clone();
        let r = placed(
            &nc,
            "$JS.API.STREAM.LEADER.STEPDOWN.P3",
            &format!(r#"{{"preferred":"{to}"}}"#),
        )
        .await;
        let ty = "stream_leader_stepdown_response";
        assert_eq!(r["type"], format!("io.nats.jetstream.api.v1.{ty}"), "{r}");
        assert_eq!(r["success"], true, "{r}");
        now = new_leader(&nc, "P3", &now).await;
        assert_eq!(now, to, "round {round}: to {to}");
    }
    // The consumer has a group of its own (`C-…`): its placement moves it alone.
    let mut c_now = consumer_leader(&nc, "P3", "D", "").await;
    for round in 0..2 {
        let at = names.iter().position(|n| *n == c_now).expect("a node");
        let to = names[(at + 1 + round % 2) % names.len()].clone();
        let r = placed(
            &nc,
            "$JS.API.CONSUMER.LEADER.STEPDOWN.P3.D",
            &format!(r#"{{"preferred":"{to}"}}"#),
        )
        .await;
        let ty = "consumer_leader_stepdown_response";
        assert_eq!(r["type"], format!("io.nats.jetstream.api.v1.{ty}"), "{r}");
        assert_eq!(r["success"], true, "{r}");
        c_now = consumer_leader(&nc, "P3", "D", &c_now).await;
        assert_eq!(c_now, to, "consumer round {round}: to {to}");
        let i = api(&nc, "$JS.API.STREAM.INFO.P3", "").await;
        assert_eq!(i["cluster"]["leader"], now.as_str(), "{i}");
        let i = api(&nc, "$JS.API.CONSUMER.INFO.P3.D", "").await;
        let g = i["cluster"]["raft_group"].as_str().unwrap_or_default();
        assert!(
            g.starts_with("C-") && i["cluster"]["replicas"].as_array().map(Vec::len) == Some(2),
            "{i}"
        );
    }

    // Refusals, 400 10005 in nats-server's words, and the leader stays.
    let r = placed(
        &nc,
        "$JS.API.STREAM.LEADER.STEPDOWN.P3",
        &format!(r#"{{"preferred":"{now}"}}"#),
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10005, "{r}");
    assert_eq!(
        r["error"]["description"],
        format!("preferred server \"{now}\" is already leader"),
        "{r}"
    );
    let p2 = leader("P2").await;
    let i = api(&nc, "$JS.API.STREAM.INFO.P2", "").await;
    let member = |n: &str| {
        n == p2
            || i["cluster"]["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x["name"] == n))
    };
    let outside = names
        .iter()
        .find(|n| !member(n))
        .expect("a node outside the R2 group")
        .clone();
    let r = placed(
        &nc,
        "$JS.API.STREAM.LEADER.STEPDOWN.P2",
        &format!(r#"{{"preferred":"{outside}"}}"#),
    )
    .await;
    assert_eq!(r["error"]["code"], 400, "{r}");
    assert_eq!(
        r["error"]["description"],
        format!("preferred server \"{outside}\" not known"),
        "{r}"
    );
    let r = placed(
        &nc,
        "$JS.API.STREAM.LEADER.STEPDOWN.P3",
        r#"{"tags":["nowhere"]}"#,
    )
    .await;
    assert_eq!(
        r["error"]["description"], "no replacement peer connected",
        "{r}"
    );
    assert_eq!(new_leader(&nc, "P3", "").await, now);
    assert_eq!(new_leader(&nc, "P2", "").await, p2);
    js.stop().await;
}

/// A stepdown request with `{"placement": placement}`, sent once.
async fn placed(nc: &async_nats::Client, subject: &str, placement: &str) -> Value {
    ask(nc, subject, format!(r#"{{"placement":{placement}}}"#)).await
}

/// Every node's `/raftz` as an object: `{ account: { group: info } }`.
async fn raftz(s: &natsd::Server, query: &str) -> (u16, String) {
    common::http_get(common::http_addr(s), &format!("/raftz{query}")).await
}

/// `/raftz` as nats-server 2.15.1 serves it: on every node the meta group `_meta_` under the
/// system account and the R3 stream's group under its account (`?acc=`), each with one leader that every member names
/// (by nats-server's 8-character server hash), its size, quorum and peers, the same applied
/// index on every member once they are current; `group` and `acc` filters (`{}` when they
/// match nothing), and the 404 of a server without clustered JetStream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raftz_shows_each_nodes_groups() {
    let js = cluster("jsc-raftz", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let created = api(
        &nc,
        "$JS.API.STREAM.CREATE.RZ",
        r#"{"name":"RZ","subjects":["rz.>"],"num_replicas":3}"#,
    )
    .await;
    assert_eq!(created["config"]["num_replicas"], 3, "{created}");
    let ctx = async_nats::jetstream::new(nc.clone());
    for i in 0..5 {
        ctx.publish(format!("rz.{i}"), "x".into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    let names: Vec<String> = js.servers.iter().map(|s| s.shared().name.clone()).collect();

    // Polled until every member agrees: one leader per group, the same applied index.
    let deadline = tokio::time::Instant::now() + WAIT;
    let views = loop {
        let mut views: Vec<Value> = Vec::new();
        for s in &js.servers {
            // The system account's groups (the default) are the meta group alone; the
            // stream's is its account's (`?acc=`), as 2.15.1 lists them. Both in one map.
            let (code, body) = raftz(s, "").await;
            assert_eq!(code, 200, "{body}");
            let sys: Value = serde_json::from_str(&body).expect("raftz JSON");
            let (code, body) = raftz(s, "?acc=$G").await;
            assert_eq!(code, 200, "{body}");
            let acc: Value = serde_json::from_str(&body).expect("raftz JSON");
            let mut all = sys["$SYS"].as_object().cloned().unwrap_or_default();
            assert!(all.keys().all(|k| k == "_meta_"), "{sys}");
            assert_eq!(acc.as_object().map(|m| m.len()), Some(1), "{acc}");
            all.extend(acc["$G"].as_object().cloned().unwrap_or_default());
            views.push(serde_json::json!({ "$SYS": all }));
        }
        if agree(&views) {
            break views;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the nodes' /raftz never agreed: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for (i, v) in views.iter().enumerate() {
        let groups = v["$SYS"].as_object().expect("system account");
        assert!(groups.contains_key("_meta_"), "{v}");
        for (name, g) in groups {
            assert_eq!(g["size"], 3, "{name}: {g}");
            assert_eq!(g["quorum_needed"], 2, "{name}: {g}");
            assert_eq!(g["system_account"], true, "{name}: {g}");
            assert_eq!(g["id"].as_str().map(str::len), Some(8), "{name}: {g}");
            let peers = g["peers"].as_object().expect("peers");
            let mut peer_names: Vec<&str> =
                peers.values().filter_map(|p| p["name"].as_str()).collect();
            peer_names.sort_unstable();
            let mut others: Vec<&str> = names
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, n)| n.as_str())
                .collect();
            others.sort_unstable();
            assert_eq!(peer_names, others, "{name} on {}: {g}", names[i]);
        }
        // The leader is named by the id it gives itself.
        let stream_group = groups
            .keys()
            .find(|k| *k != "_meta_")
            .expect("stream group");
        let led = views
            .iter()
            .find(|v| v["$SYS"][stream_group]["state"] == "LEADER");
        let leader_id = led.map(|v| v["$SYS"][stream_group]["id"].clone());
        assert_eq!(Some(groups[stream_group]["leader"].clone()), leader_id);
        // Five messages and the stream's creation at least.
        assert!(groups[stream_group]["applied"].as_u64() >= Some(5), "{v}");
    }

    // Filters: one group; unknown groups and other accounts are nats-server's 404.
    let (code, body) = raftz(&js.servers[1], "?group=_meta_").await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("raftz JSON");
    assert_eq!(v["$SYS"].as_object().map(|m| m.len()), Some(1), "{v}");
    assert!(v["$SYS"]["_meta_"].is_object(), "{v}");
    for q in ["?group=nope", "?acc=OTHER"] {
        let (code, body) = raftz(&js.servers[1], q).await;
        assert_eq!(code, 200, "{q}: {body}");
        assert_eq!(
            serde_json::from_str::<Value>(&body).ok(),
            Some(serde_json::json!({})),
            "{q}"
        );
    }

    // A server without clustered JetStream has no Raft groups.
    let lone = common::start_monitored().await;
    let (code, body) = raftz(&lone, "").await;
    assert_eq!((code, body.as_str()), (404, "No Raft nodes registered"));
}

/// Every node shows the same two groups, each with one leader that all name, and the same
/// applied index.
fn agree(views: &[Value]) -> bool {
    let groups = |v: &Value| v["$SYS"].as_object().map(|m| m.len());
    if views.iter().any(|v| groups(v) != Some(2)) {
        return false;
    }
    views[0]["$SYS"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(g, _)| {
            let of = |v: &Value| v["$SYS"][g.as_str()].clone();
            let leaders = views.iter().filter(|v| of(v)["state"] == "LEADER").count();
            let led_by = of(&views[0])["leader"].clone();
            leaders == 1
                && views.iter().all(|v| of(v)["leader"] == led_by)
                && views
                    .iter()
                    .all(|v| of(v)["applied"] == of(&views[0])["applied"])
        })
}

/// The leader CONSUMER INFO names once it is not `old` (polled: a new leader is elected
/// within a few election timeouts).
async fn consumer_leader(
    nc: &async_nats::Client,
    stream: &str,
    consumer: &str,
    old: &str,
) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = nc
            .request(
                format!("$JS.API.CONSUMER.INFO.{stream}.{consumer}"),
                "".into(),
            )
            .await;
        if let Ok(m) = r {
            if let Ok(v) = serde_json::from_slice::<Value>(&m.payload) {
                if let Some(l) = v["cluster"]["leader"].as_str().filter(|l| *l != old) {
                    return l.to_string();
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no consumer leader but {old:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
