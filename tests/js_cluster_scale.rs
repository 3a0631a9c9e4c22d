//! Moving a replicated stream's copies in a natsd JetStream cluster, as nats-server 2.15
//! users do it: STREAM.UPDATE with another `num_replicas` (R1→R3→R1), STREAM.PEER.REMOVE,
//! and placement by `placement { cluster, tags }` and `jetstream { unique_tag }` — each
//! acknowledged message kept, each answer nats-server's.

mod common;

use common::jsc::*;

use async_nats::jetstream;
use serde_json::Value;

/// Every node's copy of `stream` that has `(msgs, last)`: how many.
fn holding(js: &Js, stream: &str, want: (u64, u64)) -> usize {
    copies(js, stream)
        .iter()
        .filter(|c| **c == Some(want))
        .count()
}

/// The stream's configuration from STREAM INFO with `num_replicas` set to `n`.
async fn with_replicas(nc: &async_nats::Client, stream: &str, n: u64) -> String {
    let info = api(nc, &format!("$JS.API.STREAM.INFO.{stream}"), "").await;
    let mut cfg = info["config"].clone();
    cfg["num_replicas"] = n.into();
    cfg.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stream_scales_from_r1_to_r3_and_back() {
    let js = cluster("jsc-scale", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let ctx = jetstream::new(nc.clone());
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.SC",
        r#"{"name":"SC","subjects":["sc.>"],"storage":"file"}"#,
    )
    .await;
    assert_eq!(r["config"]["num_replicas"], 1, "{r}");
    publish_acked(&ctx, "sc", 1, 20).await;

    // R1 → R3: the update is answered with the new configuration; the two new copies
    // catch up with what the first one had.
    let up = api(
        &nc,
        "$JS.API.STREAM.UPDATE.SC",
        &with_replicas(&nc, "SC", 3).await,
    )
    .await;
    assert_eq!(
        up["type"],
        "io.nats.jetstream.api.v1.stream_update_response"
    );
    assert_eq!(up["config"]["num_replicas"], 3, "{up}");
    common::wait_for("three copies of 20", || {
        let n = holding(&js, "SC", (20, 20));
        async move { n == 3 }
    })
    .await;
    publish_acked(&ctx, "sc", 21, 30).await;
    // Once both are in, STREAM INFO lists them, current.
    let deadline = tokio::time::Instant::now() + WAIT;
    let info = loop {
        let info = api(&nc, "$JS.API.STREAM.INFO.SC", "").await;
        let reps = info["cluster"]["replicas"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if reps.len() == 2 && reps.iter().all(|r| r["current"] == true) {
            break info;
        }
        assert!(tokio::time::Instant::now() < deadline, "{info}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(info["config"]["num_replicas"], 3, "{info}");
    // The new copies are voters: with the leader stepped down another one leads and
    // takes acknowledged publishes.
    let leader = info["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let sd = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.SC").await;
    assert_eq!(sd["success"], true, "{sd}");
    new_leader(&nc, "SC", &leader).await;
    publish_acked(&ctx, "sc", 31, 40).await;
    common::wait_for("three copies of 40", || {
        let n = holding(&js, "SC", (40, 40));
        async move { n == 3 }
    })
    .await;

    // R3 → R1: one copy stays (the leader's), the others are dropped.
    let down = api(
        &nc,
        "$JS.API.STREAM.UPDATE.SC",
        &with_replicas(&nc, "SC", 1).await,
    )
    .await;
    assert_eq!(down["config"]["num_replicas"], 1, "{down}");
    common::wait_for("one copy left", || {
        let c = copies(&js, "SC");
        async move { c.iter().flatten().count() == 1 && c.contains(&Some((40, 40))) }
    })
    .await;
    publish_acked(&ctx, "sc", 41, 45).await;
    let info = api(&nc, "$JS.API.STREAM.INFO.SC", "").await;
    assert_eq!(info["state"]["messages"], 45, "{info}");
    assert_eq!(info["config"]["num_replicas"], 1, "{info}");
    // More replicas than nodes: nats-server's placement error, nothing changes.
    let r = api(
        &nc,
        "$JS.API.STREAM.UPDATE.SC",
        &with_replicas(&nc, "SC", 4).await,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10005, "{r}");
    js.stop().await;
}

/// Five nodes in three zones (`az:1` ×2, `az:2` ×2, `az:3`) with `unique_tag: "az:"`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn placement_by_tags_and_peer_removal() {
    let zone = |node: &str| match node {
        "n0" | "n1" => "az:1",
        "n2" | "n3" => "az:2",
        _ => "az:3",
    };
    let js = cluster_with("jsc-tags", 5, |node, o| {
        o.server_tags = vec![zone(node).to_string(), "ssd".into()];
        if let Some(j) = o.jetstream.as_mut() {
            j.unique_tag = Some("az:".into());
        }
    })
    .await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let create = |name: &str, extra: &str| {
        let body = format!(r#"{{"name":"{name}","subjects":["{name}.>"],{extra}}}"#);
        let subject = format!("$JS.API.STREAM.CREATE.{name}");
        let nc = nc.clone();
        async move { api(&nc, &subject, &body).await }
    };
    let peers = |js: &Js, stream: &str| -> Vec<String> {
        let c = copies(js, stream);
        let mut v: Vec<String> = js
            .servers
            .iter()
            .zip(c)
            .filter(|(_, c)| c.is_some())
            .map(|(s, _)| s.shared().name.clone())
            .collect();
        v.sort();
        v
    };

    // Tags: the only az:3 node; both az:1 nodes (a tag with the unique prefix named in the
    // placement lifts the uniqueness); unknown tags and clusters refused in nats-server's
    // words.
    let r = create("Z3", r#""placement":{"tags":["az:3"]}"#).await;
    assert!(r["error"].is_null(), "{r}");
    common::wait_for("Z3 on n4", || {
        let p = peers(&js, "Z3");
        async move { p == ["n4"] }
    })
    .await;
    let r = create("Z1", r#""num_replicas":2,"placement":{"tags":["az:1"]}"#).await;
    assert!(r["error"].is_null(), "{r}");
    common::wait_for("Z1 on n0 and n1", || {
        let p = peers(&js, "Z1");
        async move { p == ["n0", "n1"] }
    })
    .await;
    let r = create("NO", r#""placement":{"tags":["az:9"]}"#).await;
    assert_eq!(r["error"]["code"], 400, "{r}");
    assert_eq!(r["error"]["err_code"], 10005, "{r}");
    assert_eq!(
        r["error"]["description"], "no suitable peers for placement, tags not matched ['az:9']",
        "{r}"
    );
    let r = create("NO", r#""placement":{"cluster":"elsewhere"}"#).await;
    assert_eq!(
        r["error"]["description"], "no suitable peers for placement",
        "{r}"
    );
    // Unique zones: three copies in three zones; a fourth has no zone left.
    let r = create("U4", r#""num_replicas":4"#).await;
    assert_eq!(
        r["error"]["description"], "no suitable peers for placement, server tag not unique",
        "{r}"
    );
    let r = create("U3", r#""num_replicas":3"#).await;
    assert!(r["error"].is_null(), "{r}");
    let ctx = jetstream::new(nc.clone());
    publish_acked(&ctx, "U3", 1, 10).await;
    common::wait_for("U3 in three zones", || {
        let p = peers(&js, "U3");
        async move {
            let mut z: Vec<&str> = p.iter().map(|n| zone(n)).collect();
            z.sort();
            z == ["az:1", "az:2", "az:3"]
        }
    })
    .await;

    // Peer removal: the az:1 copy moves to the other az:1 node, with every message.
    let before = peers(&js, "U3");
    let gone = before
        .iter()
        .find(|n| zone(n) == "az:1")
        .expect("an az:1 copy")
        .clone();
    let other = if gone == "n0" { "n1" } else { "n0" };
    let r = once_with(
        &nc,
        "$JS.API.STREAM.PEER.REMOVE.U3",
        &format!(r#"{{"peer":"{gone}"}}"#),
    )
    .await;
    assert_eq!(
        r["type"], "io.nats.jetstream.api.v1.stream_remove_peer_response",
        "{r}"
    );
    assert_eq!(r["success"], true, "{r}");
    common::wait_for("U3 moved off the removed peer", || {
        let p = peers(&js, "U3");
        let n = holding(&js, "U3", (10, 10));
        let (gone, other) = (gone.clone(), other.to_string());
        async move { n == 3 && !p.contains(&gone) && p.contains(&other) }
    })
    .await;
    publish_acked(&ctx, "U3", 11, 15).await;

    // No replacement left (both az:1 nodes hold Z1): refused, as nats-server.
    let r = once_with(&nc, "$JS.API.STREAM.PEER.REMOVE.Z1", r#"{"peer":"n0"}"#).await;
    assert_eq!(r["error"]["code"], 503, "{r}");
    assert_eq!(r["error"]["err_code"], 10075, "{r}");
    let r = once_with(&nc, "$JS.API.STREAM.PEER.REMOVE.Z1", r#"{"peer":"n4"}"#).await;
    assert_eq!(r["error"]["err_code"], 10040, "{r}");
    assert_eq!(r["error"]["description"], "peer not a member", "{r}");
    let r = once_with(&nc, "$JS.API.STREAM.PEER.REMOVE.Z1", "").await;
    assert_eq!(r["error"]["err_code"], 10003, "{r}");
    js.stop().await;
}

/// A stream's leader left without a majority stalls and says so, as nats-server 2.15: a
/// QUORUM_LOST advisory and its log line; publishing gets no ack.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_without_a_majority_reports_lost_quorum() {
    use futures::StreamExt;
    let mut js = cluster("jsc-quorum", 3).await;
    let r = api(
        &async_nats::connect(js.servers[0].client_url())
            .await
            .expect("connect"),
        "$JS.API.STREAM.CREATE.Q",
        r#"{"name":"Q","subjects":["q.>"],"num_replicas":3,"storage":"memory"}"#,
    )
    .await;
    let leader = r["cluster"]["leader"].as_str().expect("leader").to_string();
    let keep = node(&js, &leader);
    let nc = async_nats::connect(js.servers[keep].client_url())
        .await
        .expect("connect");
    let mut lost = nc
        .subscribe("$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.Q")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let leader_node = js.servers.remove(keep);
    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let m = tokio::time::timeout(WAIT, lost.next())
        .await
        .expect("a quorum-lost advisory in time")
        .expect("message");
    let a: Value = serde_json::from_slice(&m.payload).expect("json");
    assert_eq!(
        a["type"], "io.nats.jetstream.advisory.v1.stream_quorum_lost",
        "{a}"
    );
    assert_eq!(a["stream"], "Q", "{a}");
    let ctx = jetstream::new(nc.clone());
    let ack = tokio::time::timeout(std::time::Duration::from_secs(3), async {
        ctx.publish("q.x", "x".into()).await.ok()?.await.ok()
    })
    .await;
    assert!(
        !matches!(ack, Ok(Some(_))),
        "a minority acknowledged: {ack:?}"
    );
    js.servers.push(leader_node);
    js.stop().await;
}

/// Lame duck mode hands a node's JetStream leadership over before the node goes (nats-server's
/// `transferRaftLeaders`): the stream has a new leader while the old one is still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lame_duck_hands_leadership_over_first() {
    let mut js = cluster("jsc-ldm", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.LD",
        r#"{"name":"LD","subjects":["ld.>"],"num_replicas":3,"storage":"memory"}"#,
    )
    .await;
    let leader = r["cluster"]["leader"].as_str().expect("leader").to_string();
    let old = js.servers.remove(node(&js, &leader));
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    old.lame_duck();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let r = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            nc.request("$JS.API.STREAM.INFO.LD", "".into()),
        )
        .await;
        let now: Option<String> = match r {
            Ok(Ok(m)) => serde_json::from_slice::<Value>(&m.payload)
                .ok()
                .and_then(|v| v["cluster"]["leader"].as_str().map(str::to_string)),
            _ => None,
        };
        if now.as_ref().is_some_and(|l| *l != leader) {
            break;
        }
        assert!(
            !old.shared().is_shutting_down(),
            "{leader} shut down before handing the stream over"
        );
        assert!(tokio::time::Instant::now() < deadline, "no new leader");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    old.shutdown().await;
    js.stop().await;
}

/// A replicated mirror and a replicated source of streams that may live on other nodes:
/// every copy holds the same messages (a mirror at the origin's sequences), a source's
/// copies carry `Nats-Stream-Source`, and after the mirror's leader changes copying goes on
/// without a message copied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicated_mirrors_and_sources_follow_their_origins() {
    let js = cluster("jsc-mirror", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let ctx = jetstream::new(nc.clone());
    for body in [
        r#"{"name":"ORIG","subjects":["orig.>"],"num_replicas":1}"#,
        r#"{"name":"OTHER","subjects":["other.>"],"num_replicas":3}"#,
        r#"{"name":"MIR","mirror":{"name":"ORIG"},"num_replicas":3}"#,
        r#"{"name":"SRC","sources":[{"name":"ORIG","filter_subject":"orig.a.>"},{"name":"OTHER"}],"num_replicas":3}"#,
    ] {
        let name = serde_json::from_str::<Value>(body).expect("json")["name"]
            .as_str()
            .expect("name")
            .to_string();
        let r = api(&nc, &format!("$JS.API.STREAM.CREATE.{name}"), body).await;
        assert!(r["error"].is_null(), "{name}: {r}");
    }
    publish_acked(&ctx, "orig.a", 1, 10).await;
    publish_acked(&ctx, "orig.b", 11, 20).await;
    publish_acked(&ctx, "other", 1, 5).await;
    common::wait_for("MIR has 20 on every copy", || {
        let n = holding(&js, "MIR", (20, 20));
        async move { n == 3 }
    })
    .await;
    common::wait_for("SRC has 15 on every copy", || {
        let n = holding(&js, "SRC", (15, 15));
        async move { n == 3 }
    })
    .await;
    let m = api(&nc, "$JS.API.STREAM.MSG.GET.MIR", r#"{"seq":12}"#).await;
    assert_eq!(m["message"]["subject"], "orig.b.12", "{m}");
    let m = api(
        &nc,
        "$JS.API.STREAM.MSG.GET.SRC",
        r#"{"last_by_subj":"other.5"}"#,
    )
    .await;
    let hdrs = m["message"]["hdrs"].as_str().expect("headers");
    let hdrs = data_encoding::BASE64
        .decode(hdrs.as_bytes())
        .expect("base64");
    assert!(
        String::from_utf8_lossy(&hdrs).contains("Nats-Stream-Source: OTHER 5"),
        "{m}"
    );

    // Another node leads the mirror; it goes on from where the log left off.
    let leader = api(&nc, "$JS.API.STREAM.INFO.MIR", "").await["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let sd = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.MIR").await;
    assert_eq!(sd["success"], true, "{sd}");
    new_leader(&nc, "MIR", &leader).await;
    publish_acked(&ctx, "orig.b", 21, 30).await;
    common::wait_for("MIR has 30 on every copy", || {
        let n = holding(&js, "MIR", (30, 30));
        async move { n == 3 }
    })
    .await;
    // A mirror starting at a time is refused in a cluster (MSG.GET has no lookup by time).
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.LATE",
        r#"{"name":"LATE","mirror":{"name":"ORIG","opt_start_time":"2026-01-01T00:00:00Z"},"num_replicas":3}"#,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10052, "{r}");
    js.stop().await;
}

/// `$JS.API.SERVER.REMOVE` from the system account, for a server that is gone: the meta
/// group drops it, and a stream it held gets another node in its place that catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_removed_server_is_replaced_in_its_streams() {
    let conf = "accounts {\n  APP { jetstream: enabled, users [{user: app, password: app}] }\n  \
                SYS { users [{user: sys, password: sys}] }\n}\nsystem_account: SYS\n";
    let mut js = cluster_with("jsc-srvrm", 4, with_conf(conf)).await;
    let url = js.servers[0].client_url();
    let connect = |user: &str| {
        let (url, user) = (url.clone(), user.to_string());
        async move {
            async_nats::ConnectOptions::with_user_and_password(user.clone(), user)
                .connect(url.as_str())
                .await
                .expect("connect")
        }
    };
    let app = connect("app").await;
    let r = api(
        &app,
        "$JS.API.STREAM.CREATE.RM",
        r#"{"name":"RM","subjects":["rm.>"],"num_replicas":3}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let ctx = jetstream::new(app.clone());
    publish_acked(&ctx, "rm", 1, 10).await;
    // A peer of RM that does not lead it goes away for good.
    let leader = r["cluster"]["leader"].as_str().expect("leader").to_string();
    let holders: Vec<String> = js
        .servers
        .iter()
        .filter(|s| {
            let j = s.shared().jetstream.get().cloned();
            j.is_some_and(|j| {
                j.engine()
                    .accounts
                    .get("APP")
                    .is_some_and(|a| a.streams.contains_key("RM"))
            })
        })
        .map(|s| s.shared().name.clone())
        .collect();
    assert_eq!(holders.len(), 3, "{holders:?}");
    let gone = holders
        .iter()
        .find(|n| **n != leader && *n != "n0")
        .expect("a follower that is not n0")
        .clone();
    let spare = js
        .servers
        .iter()
        .map(|s| s.shared().name.clone())
        .find(|n| !holders.contains(n))
        .expect("the fourth node");
    js.servers.remove(node(&js, &gone)).shutdown().await;

    let sys = connect("sys").await;
    let r = api(&sys, "$JS.API.SERVER.REMOVE", r#"{"peer":"nope"}"#).await;
    assert_eq!(r["error"]["err_code"], 10044, "{r}");
    let r = api(
        &sys,
        "$JS.API.SERVER.REMOVE",
        &format!(r#"{{"peer":"{gone}"}}"#),
    )
    .await;
    assert_eq!(
        r["type"], "io.nats.jetstream.api.v1.meta_server_remove_response",
        "{r}"
    );
    assert_eq!(r["success"], true, "{r}");
    // The fourth node takes the removed one's place in RM, with every message.
    common::wait_for("RM on the spare node", || {
        let has = js.servers[node(&js, &spare)]
            .shared()
            .jetstream
            .get()
            .and_then(|j| {
                let e = j.engine();
                let st = e.accounts.get("APP")?.streams.get("RM")?;
                Some(st.store.state().msgs)
            });
        async move { has == Some(10) }
    })
    .await;
    publish_acked(&ctx, "rm", 11, 15).await;
    let http = js.servers[0].http_addr().expect("monitoring port");
    common::wait_for("a meta group of three", || async move {
        let (_, body) = common::http_get(http, "/jsz").await;
        let v: Value = serde_json::from_str(&body).unwrap_or_default();
        v["meta_cluster"]["cluster_size"] == 3
    })
    .await;
    js.stop().await;
}

/// Account limits in a cluster, as nats-server 2.15 counts them (untiered): a replicated
/// stream reserves its `max_bytes` once per replica; the stream count is cluster-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn account_limits_count_every_replica() {
    let conf = "accounts {\n  APP { jetstream: { max_file: 1000, max_streams: 2 }, \
                users [{user: app, password: app}] }\n}\n";
    let js = cluster_with("jsc-limits", 3, with_conf(conf)).await;
    let nc = async_nats::ConnectOptions::with_user_and_password("app".into(), "app".into())
        .connect(js.servers[0].client_url().as_str())
        .await
        .expect("connect");
    let create = |name: &str, replicas: u32, max_bytes: u32| {
        let body = format!(
            r#"{{"name":"{name}","subjects":["{name}"],"num_replicas":{replicas},"max_bytes":{max_bytes}}}"#
        );
        let (nc, subject) = (nc.clone(), format!("$JS.API.STREAM.CREATE.{name}"));
        async move { api(&nc, &subject, &body).await }
    };
    // 3 × 300 reserved; 200 more do not fit into 1000, 100 do.
    let r = create("S1", 3, 300).await;
    assert!(r["error"].is_null(), "{r}");
    let r = create("S2", 1, 200).await;
    assert_eq!(r["error"]["err_code"], 10047, "{r}");
    let r = create("S2", 1, 100).await;
    assert!(r["error"].is_null(), "{r}");
    let r = create("S3", 1, 1).await;
    assert_eq!(r["error"]["err_code"], 10027, "{r}");
    // Scaling S2 to three replicas would reserve 300 more.
    let info = api(&nc, "$JS.API.STREAM.INFO.S2", "").await;
    let mut cfg = info["config"].clone();
    cfg["num_replicas"] = 3.into();
    let r = api(&nc, "$JS.API.STREAM.UPDATE.S2", &cfg.to_string()).await;
    assert_eq!(r["error"]["err_code"], 10047, "{r}");
    js.stop().await;
}

/// A publish past the account's limits is refused before it is proposed (nats-server's
/// `processClusteredInboundMsg`): the publisher of an acknowledged stream gets the error, the
/// publisher of a `no_ack` stream gets nothing at all (`canRespond`), and neither message is
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_no_ack_streams_refused_publish_is_not_answered() {
    let conf = "accounts {\n  APP { jetstream: { max_file: 1000 }, \
                users [{user: app, password: app}] }\n}\n";
    let js = cluster_with("jsc-noack", 3, with_conf(conf)).await;
    let app = |i: usize| {
        let url = js.servers[i].client_url();
        async move {
            async_nats::ConnectOptions::with_user_and_password("app".into(), "app".into())
                .connect(url.as_str())
                .await
                .expect("connect")
        }
    };
    let nc = app(0).await;
    for (name, no_ack) in [("ACK", false), ("NA", true)] {
        let cfg = format!(
            r#"{{"name":"{name}","subjects":["{name}"],"num_replicas":3,"no_ack":{no_ack}}}"#
        );
        let r = api(&nc, &format!("$JS.API.STREAM.CREATE.{name}"), &cfg).await;
        assert!(r["error"].is_null(), "{r}");
    }
    let big = vec![b'x'; 2000];
    // Each publisher is a client of its stream's leader: the refusal happens there, before
    // the next request of the same connection is read.
    let at_leader = |name: &'static str| {
        let nc = nc.clone();
        async move {
            let info = api(&nc, &format!("$JS.API.STREAM.INFO.{name}"), "").await;
            info["cluster"]["leader"]
                .as_str()
                .expect("a leader")
                .to_string()
        }
    };
    let ack = app(node(&js, &at_leader("ACK").await)).await;
    let r = once_with(&ack, "ACK", std::str::from_utf8(&big).expect("ascii")).await;
    assert_eq!(r["error"]["err_code"], 10002, "{r}");

    let na = app(node(&js, &at_leader("NA").await)).await;
    let mut inbox = na.subscribe("answers").await.expect("subscribe");
    na.publish_with_reply("NA", "answers", big.into())
        .await
        .expect("publish");
    // A request after it on the same connection, to the same node: answered after the
    // publish was refused.
    let info = once(&na, "$JS.API.STREAM.INFO.NA").await;
    assert_eq!(info["state"]["messages"], 0, "{info}");
    use futures::{FutureExt, StreamExt};
    let early = inbox.next().now_or_never();
    assert!(
        early.is_none(),
        "the no_ack publisher was answered: {early:?}"
    );
    let info = once(&nc, "$JS.API.STREAM.INFO.ACK").await;
    assert_eq!(info["state"]["messages"], 0, "{info}");
    js.stop().await;
}
