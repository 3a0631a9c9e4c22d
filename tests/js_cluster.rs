//! Clustered JetStream on natsd alone: three embedded nodes with `jetstream {}` and
//! `cluster {}` form a meta group, place replicated streams, ack a publish once a quorum
//! has it, answer each request once (from the right node), and keep every acknowledged
//! message when a stream's leader goes away.

mod common;

use common::jsc::*;

use std::time::Duration;

use async_nats::jetstream;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn r3_stream_acks_on_quorum_and_survives_its_leader() {
    let mut js = cluster("jsc-r3", 3).await;
    let nc = async_nats::connect(js.servers[1].client_url())
        .await
        .expect("connect");
    let created = api(
        &nc,
        "$JS.API.STREAM.CREATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.>"],"num_replicas":3,"storage":"file"}"#,
    )
    .await;
    assert_eq!(
        created["type"],
        "io.nats.jetstream.api.v1.stream_create_response"
    );
    assert_eq!(created["config"]["num_replicas"], 3, "{created}");
    assert_eq!(created["cluster"]["name"], "C1", "{created}");
    let leader = created["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    assert_eq!(
        created["cluster"]["replicas"].as_array().map(Vec::len),
        Some(2),
        "{created}"
    );

    // Acked publishes from a client of any node; each ack names the next sequence.
    let ctx = jetstream::new(nc.clone());
    for i in 1..=50u64 {
        let ack = ctx
            .publish(format!("orders.{i}"), format!("m{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
        assert_eq!(ack.sequence, i);
    }
    // A quorum had each before its ack; all three have them soon after.
    common::wait_for("every replica has 50", || {
        let c = copies(&js, "ORDERS");
        async move { c.iter().all(|c| *c == Some((50, 50))) }
    })
    .await;
    // Each copy's applies leave its store's buffer to the engine's timer (the group's log
    // already holds them): the messages still reach every node's segment files.
    common::wait_for("every node's segments hold the last message", || {
        let n = nodes_whose_segments_hold(&js.dir, b"m50");
        async move { n == 3 }
    })
    .await;

    // One answer per request: a second reply would show as a second message.
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("sub");
    nc.publish_with_reply("$JS.API.STREAM.INFO.ORDERS", inbox, "".into())
        .await
        .expect("pub");
    let first = tokio::time::timeout(WAIT, futures::StreamExt::next(&mut sub))
        .await
        .expect("an answer")
        .expect("message");
    let info: Value = serde_json::from_slice(&first.payload).expect("json");
    assert_eq!(info["state"]["messages"], 50, "{info}");
    assert_eq!(info["cluster"]["leader"], leader.as_str(), "{info}");
    let second = tokio::time::timeout(
        Duration::from_millis(500),
        futures::StreamExt::next(&mut sub),
    )
    .await;
    assert!(second.is_err(), "a second answer: {second:?}");
    assert!(
        info["cluster"]["raft_group"]
            .as_str()
            .is_some_and(|g| g.starts_with("S-R3-ORDERS-")),
        "{info}"
    );
    // As nats-server 2.15.1: since when the leader leads, the group's traffic in the
    // system account, each replica with its server hash.
    let c = &info["cluster"];
    assert_eq!(c["system_account"], true, "{info}");
    assert_eq!(c["traffic_account"], "$SYS", "{info}");
    let since = c["leader_since"].as_str().unwrap_or_default();
    assert!(since.starts_with("20") && since.ends_with('Z'), "{info}");
    let replicas = c["replicas"].as_array().cloned().unwrap_or_default();
    assert!(
        replicas.len() == 2
            && replicas
                .iter()
                .all(|r| r["peer"].as_str().map(str::len) == Some(8)),
        "{info}"
    );

    // A leader stepdown hands the stream to another replica.
    let sd = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.ORDERS").await;
    assert_eq!(sd["success"], true, "{sd}");
    let leader = new_leader(&nc, "ORDERS", &leader).await;

    // The leader goes away; another takes over and nothing acknowledged is lost.
    let li = js
        .servers
        .iter()
        .position(|s| s.shared().name == leader)
        .expect("leader is a node");
    let gone = js.servers.remove(li);
    gone.shutdown().await;
    let alive = js.servers[0].client_url();
    let nc2 = async_nats::connect(alive).await.expect("connect");
    let ctx2 = jetstream::new(nc2.clone());
    publish_acked(&ctx2, "orders", 51, 60).await;
    let info = api(&nc2, "$JS.API.STREAM.INFO.ORDERS", "").await;
    assert_eq!(info["state"]["messages"], 60, "{info}");
    assert_ne!(info["cluster"]["leader"], leader.as_str(), "{info}");
    for seq in [1u64, 50, 60] {
        let m = api(
            &nc2,
            "$JS.API.STREAM.MSG.GET.ORDERS",
            &format!(r#"{{"seq":{seq}}}"#),
        )
        .await;
        assert_eq!(m["message"]["subject"], format!("orders.{seq}"), "{m}");
    }

    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&js.dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn placement_errors_and_delete_answer_once() {
    let mut js = cluster("jsc-bad", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    // More replicas than nodes; more than 5; negative.
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.BIG",
        r#"{"name":"BIG","subjects":["big"],"num_replicas":4}"#,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10005, "{r}");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.BIG",
        r#"{"name":"BIG","subjects":["big"],"num_replicas":6}"#,
    )
    .await;
    assert_eq!(r["error"]["description"], "maximum replicas is 5", "{r}");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.BIG",
        r#"{"name":"BIG","subjects":["big"],"num_replicas":-1}"#,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10133, "{r}");

    // An R1 stream lives on one node; overlapping subjects are refused cluster-wide.
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.ONE",
        r#"{"name":"ONE","subjects":["one.>"],"storage":"memory"}"#,
    )
    .await;
    assert_eq!(r["config"]["name"], "ONE", "{r}");
    // Its `cluster` names the cluster and the leader only, as nats-server 2.15.1's.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let i = api(&nc, "$JS.API.STREAM.INFO.ONE", "").await;
        let c = i["cluster"].as_object().cloned().unwrap_or_default();
        if c.contains_key("leader") {
            let keys: Vec<&str> = c.keys().map(String::as_str).collect(); // sorted
            assert_eq!(keys, ["leader", "name"], "{i}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader: {i}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    common::wait_for("one copy of ONE", || {
        let n = copies(&js, "ONE").iter().flatten().count();
        async move { n == 1 }
    })
    .await;
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.TWO",
        r#"{"name":"TWO","subjects":["one.x"],"num_replicas":3}"#,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10065, "{r}");
    let names = api(&nc, "$JS.API.STREAM.NAMES", "").await;
    assert_eq!(names["streams"], serde_json::json!(["ONE"]), "{names}");

    // `/jsz` `meta_cluster`, as nats-server 2.15.1: every node names the same leader (and
    // its 8-character peer hash); the leader lists the two others.
    // (Polled: a node may not know a new leader yet.)
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut leaders = Vec::new();
        for s in &js.servers {
            let http = s.http_addr().expect("monitoring port");
            let (code, body) = common::http_get(http, "/jsz").await;
            assert_eq!(code, 200, "{body}");
            let v: Value = serde_json::from_str(&body).expect("json");
            let m = &v["meta_cluster"];
            assert_eq!(m["name"], "C1", "{v}");
            assert_eq!(m["cluster_size"], 3, "{v}");
            assert_eq!(m["quorum_needed"], 2, "{v}");
            let leads = m["leader"] == s.shared().name.as_str();
            let replicas = m["replicas"].as_array().map(Vec::len);
            let ok = m["peer"].as_str().map(str::len) == Some(8) && replicas == leads.then_some(2);
            leaders.push(ok.then(|| (m["leader"].clone(), m["peer"].clone())));
        }
        if leaders.iter().all(Option::is_some) {
            leaders.dedup();
            if leaders.len() == 1 {
                break;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "{leaders:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let r = api(&nc, "$JS.API.STREAM.DELETE.ONE", "").await;
    assert_eq!(r["success"], true, "{r}");
    common::wait_for("ONE gone everywhere", || {
        let n = copies(&js, "ONE").iter().flatten().count();
        async move { n == 0 }
    })
    .await;
    let r = api(&nc, "$JS.API.STREAM.INFO.ONE", "").await;
    assert_eq!(r["error"]["err_code"], 10059, "{r}");

    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&js.dir);
}

/// What applications do on an R3 cluster through an unchanged client (async-nats): a KV
/// bucket with three replicas (create, put, get through DIRECT.GET, update with the
/// revision, history, delete) and a durable pull consumer with explicit acks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kv_bucket_and_pull_consumer_on_r3() {
    use async_nats::jetstream::{consumer, kv};
    use futures::StreamExt;
    let mut js = cluster("jsc-kv", 3).await;
    let nc = async_nats::connect(js.servers[2].client_url())
        .await
        .expect("connect");
    // The meta group forms in the background: the first request may come before it.
    api(&nc, "$JS.API.STREAM.NAMES", "").await;
    let ctx = jetstream::new(nc.clone());
    let kv = ctx
        .create_key_value(kv::Config {
            bucket: "cfg".into(),
            history: 3,
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .expect("bucket");
    let r1 = kv.put("a", "1".into()).await.expect("put");
    let r2 = kv.put("a", "2".into()).await.expect("put");
    assert!(r2 > r1);
    assert_eq!(kv.get("a").await.expect("get"), Some("2".into()));
    assert!(kv.update("a", "no".into(), r1).await.is_err());
    kv.update("a", "3".into(), r2).await.expect("update");
    let h: Vec<kv::Entry> = kv
        .history("a")
        .await
        .expect("history")
        .map(|e| e.expect("entry"))
        .collect()
        .await;
    let vals: Vec<&[u8]> = h.iter().map(|e| &e.value[..]).collect();
    assert_eq!(vals, vec![&b"1"[..], b"2", b"3"]);
    kv.delete("a").await.expect("delete");
    assert_eq!(kv.get("a").await.expect("get"), None);
    common::wait_for("the bucket on every node", || {
        let c = copies(&js, "KV_cfg");
        async move { c.iter().all(|c| c.map(|c| c.1) == Some(4)) }
    })
    .await;

    ctx.create_stream(jetstream::stream::Config {
        name: "WORK".into(),
        subjects: vec!["w.>".into()],
        num_replicas: 3,
        ..Default::default()
    })
    .await
    .expect("stream");
    for i in 1..=5 {
        ctx.publish("w.a", format!("m{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    // The consumer lives with the stream's leader; the client fetches through another node,
    // so the messages cross a route to its inbox (as `reply@subject`, nats-server's form)
    // and arrive with their stream subject.
    let leader = api(&nc, "$JS.API.STREAM.INFO.WORK", "").await["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let far = js
        .servers
        .iter()
        .find(|s| s.shared().name != leader)
        .expect("a node that does not lead WORK");
    let far = async_nats::connect(far.client_url())
        .await
        .expect("connect");
    let far_ctx = jetstream::new(far);
    let s = far_ctx.get_stream("WORK").await.expect("stream");
    let c = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("D".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut batch = c.fetch().max_messages(5).messages().await.expect("fetch");
    let mut got = Vec::new();
    while let Some(m) = tokio::time::timeout(WAIT, batch.next())
        .await
        .expect("the batch ends")
    {
        let m = m.expect("msg");
        assert_eq!(m.subject.as_str(), "w.a");
        m.double_ack().await.expect("ack");
        got.push(String::from_utf8_lossy(&m.payload).to_string());
    }
    assert_eq!(got, vec!["m1", "m2", "m3", "m4", "m5"]);
    let mut c = c;
    let info = c.info().await.expect("consumer info");
    assert_eq!(info.ack_floor.stream_sequence, 5);

    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&js.dir);
}

/// Every replica holds every consumer; only the stream's leader delivers. The leader's
/// progress goes through the stream's log, so after a leader change the durable consumer
/// is still there and goes on from what was acknowledged (nothing acked comes again,
/// nothing unacked is skipped).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_durable_consumer_goes_on_after_a_leader_change() {
    use async_nats::jetstream::consumer;
    use futures::StreamExt;
    let mut js = cluster("jsc-con", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let created = api(
        &nc,
        "$JS.API.STREAM.CREATE.Q",
        r#"{"name":"Q","subjects":["q.>"],"num_replicas":3}"#,
    )
    .await;
    let leader = created["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let ctx = jetstream::new(nc.clone());
    for i in 1..=6 {
        ctx.publish("q.a", format!("m{i}").into())
            .await
            .expect("publish")
            .await
            .expect("ack");
    }
    let s = ctx.get_stream("Q").await.expect("stream");
    let c = s
        .create_consumer(consumer::pull::Config {
            durable_name: Some("D".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let fetch = |n: usize| {
        let c = c.clone();
        async move {
            let mut got = Vec::new();
            let mut batch = c.fetch().max_messages(n).messages().await.expect("fetch");
            while let Some(m) = tokio::time::timeout(WAIT, batch.next())
                .await
                .expect("the batch ends")
            {
                let m = m.expect("msg");
                m.double_ack().await.expect("ack");
                got.push(String::from_utf8_lossy(&m.payload).to_string());
            }
            got
        }
    };
    assert_eq!(fetch(3).await, vec!["m1", "m2", "m3"]);
    // Every copy learns that 1-3 are done (next to deliver: 4, nothing pending).
    common::wait_for("the progress on every replica", || {
        let states: Vec<_> = js
            .servers
            .iter()
            .map(|s| {
                let j = s.shared().jetstream.get()?.clone();
                let e = j.engine();
                let st = e.accounts.get("$G")?.streams.get("Q")?;
                let c = st.consumers.get("D")?.state();
                Some((c.sseq, c.pending.len()))
            })
            .collect();
        async move { states.iter().all(|s| *s == Some((4, 0))) }
    })
    .await;

    let sd = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.Q").await;
    assert_eq!(sd["success"], true, "{sd}");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let i = api(&nc, "$JS.API.STREAM.INFO.Q", "").await;
        match i["cluster"]["leader"].as_str() {
            Some(l) if l != leader => break,
            _ => assert!(tokio::time::Instant::now() < deadline, "no new leader: {i}"),
        }
    }
    // The new leader answers for D and delivers from 4 on.
    let info = api(&nc, "$JS.API.CONSUMER.INFO.Q.D", "").await;
    assert_eq!(info["ack_floor"]["stream_seq"], 3, "{info}");
    assert_eq!(info["num_pending"], 3, "{info}");
    assert_eq!(fetch(3).await, vec!["m4", "m5", "m6"]);
    let info = api(&nc, "$JS.API.CONSUMER.INFO.Q.D", "").await;
    assert_eq!(info["ack_floor"]["stream_seq"], 6, "{info}");

    // `/jsz` names the stream's leader as its STREAM INFO does (not the node asked), once
    // the node asked has heard of the change.
    let leader = api(&nc, "$JS.API.STREAM.INFO.Q", "").await["cluster"]["leader"].clone();
    let http = js.servers[0].http_addr().expect("monitoring port");
    common::wait_for("/jsz to name the stream's leader", || async {
        let (_, body) = common::http_get(http, "/jsz?accounts=true&streams=true").await;
        let v: Value = serde_json::from_str(&body).expect("json");
        let q = &v["account_details"][0]["stream_detail"][0];
        assert_eq!(q["name"], "Q", "{v}");
        assert_eq!(q["cluster"]["name"], "C1", "{v}");
        q["cluster"]["leader"] == leader
    })
    .await;

    // A consumer leads where its stream does: its stepdown moves both.
    let r = once(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.Q.NOPE").await;
    assert_eq!(r["error"]["err_code"], 10014, "{r}");
    let r = once(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.Q.D").await;
    assert_eq!(
        r["type"], "io.nats.jetstream.api.v1.consumer_leader_stepdown_response",
        "{r}"
    );
    assert_eq!(r["success"], true, "{r}");

    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&js.dir);
}

/// Five nodes: an R3 stream lives on three of them and an R5 one on all; a client of a node
/// that holds no copy of the R3 stream publishes and reads through it; when the R5 stream's
/// leader goes away the four others elect one and keep every acknowledged message.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_nodes_place_r3_and_r5_streams() {
    let mut js = cluster("jsc-five", 5).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    // `cluster` names the whole group (leader and replicas) in the first answer and in a
    // repeated creation's, whichever node gives it (a slow first answer makes `api` repeat).
    let members = |v: &serde_json::Value| {
        let mut names: Vec<String> = v["cluster"]["replicas"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(v["cluster"].get("leader"))
            .map(|p| {
                p.get("name")
                    .unwrap_or(p)
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        names.sort();
        names.dedup();
        names.len()
    };
    for (name, r) in [("THREE", 3), ("FIVE", 5)] {
        let subject = format!("$JS.API.STREAM.CREATE.{name}");
        let body = format!(r#"{{"name":"{name}","subjects":["{name}.>"],"num_replicas":{r}}}"#);
        for _ in 0..2 {
            let created = api(&nc, &subject, &body).await;
            assert_eq!(created["config"]["name"], name, "{created}");
            assert_eq!(members(&created), r, "{created}");
        }
    }
    common::wait_for("three copies of THREE, five of FIVE", || {
        let (three, five) = (copies(&js, "THREE"), copies(&js, "FIVE"));
        async move { three.iter().flatten().count() == 3 && five.iter().flatten().count() == 5 }
    })
    .await;
    // Through a node without a copy of THREE.
    let outside = copies(&js, "THREE")
        .iter()
        .position(Option::is_none)
        .expect("a node without THREE");
    let far = async_nats::connect(js.servers[outside].client_url())
        .await
        .expect("connect");
    // Retried while the new streams' leaders take up their subjects (until then a publish
    // has no responders, as with nats-server during an election).
    publish_acked(&jetstream::new(far.clone()), "THREE", 1, 10).await;
    let m = api(&far, "$JS.API.STREAM.MSG.GET.THREE", r#"{"seq":10}"#).await;
    assert_eq!(m["message"]["subject"], "THREE.10", "{m}");

    let ctx = jetstream::new(nc.clone());
    publish_acked(&ctx, "FIVE", 1, 10).await;
    let info = api(&nc, "$JS.API.STREAM.INFO.FIVE", "").await;
    let leader = info["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let li = js
        .servers
        .iter()
        .position(|s| s.shared().name == leader)
        .expect("leader is a node");
    js.servers.remove(li).shutdown().await;
    let client = js.servers[0].client_url();
    let nc = async_nats::connect(client).await.expect("connect");
    let ctx = jetstream::new(nc.clone());
    publish_acked(&ctx, "FIVE", 11, 20).await;
    let info = api(&nc, "$JS.API.STREAM.INFO.FIVE", "").await;
    assert_eq!(info["state"]["messages"], 20, "{info}");
    assert_ne!(info["cluster"]["leader"], leader.as_str(), "{info}");

    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    let _ = std::fs::remove_dir_all(&js.dir);
}

/// Work-queue and interest retention on R3 streams: an acknowledged message leaves every
/// copy (the copies remove it at the same point of the stream's log), one still wanted by
/// another consumer stays, and after a leader change nothing acknowledged comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn work_queue_and_interest_retention_on_r3() {
    use async_nats::jetstream::consumer;
    use futures::StreamExt;
    let js = cluster("jsc-wq", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let ctx = jetstream::new(nc.clone());
    for (name, retention) in [("WQ", "workqueue"), ("IN", "interest")] {
        let r = api(
            &nc,
            &format!("$JS.API.STREAM.CREATE.{name}"),
            &format!(
                r#"{{"name":"{name}","subjects":["{name}.>"],"num_replicas":3,"retention":"{retention}"}}"#
            ),
        )
        .await;
        assert_eq!(r["config"]["retention"], retention, "{r}");
    }
    let pull = |name: &str| consumer::pull::Config {
        durable_name: Some(name.into()),
        ack_policy: consumer::AckPolicy::Explicit,
        ..Default::default()
    };
    let wq = ctx.get_stream("WQ").await.expect("WQ");
    let worker = wq.create_consumer(pull("W")).await.expect("consumer");
    let interest = ctx.get_stream("IN").await.expect("IN");
    let a = interest.create_consumer(pull("A")).await.expect("A");
    let b = interest.create_consumer(pull("B")).await.expect("B");
    publish_acked(&ctx, "WQ", 1, 20).await;
    publish_acked(&ctx, "IN", 1, 10).await;

    // Acknowledges (synchronously) the next `n` messages of `c`; their sequences.
    async fn take(c: &consumer::Consumer<consumer::pull::Config>, n: usize) -> Vec<u64> {
        let mut batch = c.fetch().max_messages(n).messages().await.expect("fetch");
        let mut seqs = Vec::new();
        while let Some(m) = tokio::time::timeout(WAIT, batch.next())
            .await
            .expect("the batch ends")
        {
            let m = m.expect("msg");
            seqs.push(m.info().expect("info").stream_sequence);
            m.double_ack().await.expect("ack");
        }
        seqs
    }
    assert_eq!(take(&worker, 10).await, (1..=10).collect::<Vec<_>>());
    common::wait_for("10 left on every WQ copy", || {
        let c = copies(&js, "WQ");
        async move { c.iter().all(|c| *c == Some((10, 20))) }
    })
    .await;
    // Interest: only A has acknowledged: B still wants them, so they stay; once B has too,
    // they are gone everywhere.
    assert_eq!(take(&a, 10).await.len(), 10);
    assert_eq!(take(&b, 4).await.len(), 4);
    common::wait_for("6 left on every IN copy", || {
        let c = copies(&js, "IN");
        async move { c.iter().all(|c| *c == Some((6, 10))) }
    })
    .await;

    // Another node leads WQ: the worker goes on from message 11.
    let leader = api(&nc, "$JS.API.STREAM.INFO.WQ", "").await["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    // The new leader says so, for the stream and its consumer (nats-server 2.15's
    // clustered advisories).
    let mut elected = nc
        .subscribe("$JS.EVENT.ADVISORY.*.LEADER_ELECTED.WQ.>")
        .await
        .expect("sub");
    let mut stream_elected = nc
        .subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.WQ")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let sd = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.WQ").await;
    assert_eq!(sd["success"], true, "{sd}");
    let next = new_leader(&nc, "WQ", &leader).await;
    let advisory = |m: Option<async_nats::Message>| -> Value {
        serde_json::from_slice(&m.expect("advisory").payload).expect("json")
    };
    let a = advisory(
        tokio::time::timeout(WAIT, stream_elected.next())
            .await
            .expect("in time"),
    );
    assert_eq!(
        a["type"], "io.nats.jetstream.advisory.v1.stream_leader_elected",
        "{a}"
    );
    assert_eq!(a["stream"], "WQ", "{a}");
    assert_eq!(a["leader"], next.as_str(), "{a}");
    assert!(
        a["replicas"].is_array() && a.get("account").is_none(),
        "{a}"
    );
    // The consumer has a group of its own: its stepdown elects another consumer leader
    // (and says so) while the stream's leader stays.
    let c_leader = api(&nc, "$JS.API.CONSUMER.INFO.WQ.W", "").await["cluster"]["leader"]
        .as_str()
        .expect("consumer leader")
        .to_string();
    let sd = once(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.WQ.W").await;
    assert_eq!(sd["success"], true, "{sd}");
    let a = loop {
        let a = advisory(
            tokio::time::timeout(WAIT, elected.next())
                .await
                .expect("in time"),
        );
        if a["type"] == "io.nats.jetstream.advisory.v1.consumer_leader_elected" {
            break a;
        }
    };
    assert_ne!(a["leader"], c_leader.as_str(), "{a}");
    let still = api(&nc, "$JS.API.STREAM.INFO.WQ", "").await["cluster"]["leader"].clone();
    assert_eq!(still, next.as_str());
    assert_eq!(
        (&a["stream"], &a["consumer"]),
        (&"WQ".into(), &"W".into()),
        "{a}"
    );
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut rest = Vec::new();
    while rest.len() < 10 {
        rest.extend(take(&worker, 10 - rest.len()).await);
        assert!(tokio::time::Instant::now() < deadline, "{rest:?}");
    }
    assert_eq!(rest, (11..=20).collect::<Vec<_>>());
    common::wait_for("WQ empty everywhere", || {
        let c = copies(&js, "WQ");
        async move { c.iter().all(|c| *c == Some((0, 20))) }
    })
    .await;
    js.stop().await;
}

/// STREAM.LEADER.STEPDOWN while a client keeps publishing: the leader proposes nothing new
/// while it steps down (its appends would keep the followers from ever timing out), so
/// another node takes over and the request succeeds. Before, under steady traffic, it
/// answered 10009 after 8 s with the leader unchanged (found by lame duck in the simulated
/// StatefulSet, which steps down the same way).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stepdown_under_steady_publishing_hands_over() {
    let js = cluster("jsc-stepdown", 3).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let created = api(
        &nc,
        "$JS.API.STREAM.CREATE.S",
        r#"{"name":"S","subjects":["s.>"],"num_replicas":3}"#,
    )
    .await;
    let old = created["cluster"]["leader"]
        .as_str()
        .unwrap_or_else(|| panic!("no leader: {created}"))
        .to_string();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = tokio::spawn({
        let (nc, stop) = (nc.clone(), stop.clone());
        async move {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let _ = nc.publish(format!("s.{i}"), "x".into()).await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            i
        }
    });
    common::wait_for("publishing under way", || {
        let c = copies(&js, "S");
        async move { c.iter().flatten().any(|(msgs, _)| *msgs >= 20) }
    })
    .await;
    let r = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.S").await;
    assert_eq!(r["success"], true, "{r}");
    let new = new_leader(&nc, "S", &old).await;
    assert_ne!(new, old);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = publisher.await.expect("publisher");
    assert!(sent > 20);
    js.stop().await;
}

/// STREAM.LEADER.STEPDOWN is answered as soon as the leader has begun to step down, as
/// nats-server answers it, not once the handover is over: a leader elected moments ago
/// keeps leading until its lease is over (about 2 s), and before, the answer waited for
/// that. A second request meanwhile is answered the same and starts no second handover;
/// one naming a preferred member is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stepdown_is_answered_before_the_handover_ends() {
    let js = cluster("jsc-stepdown-answer", 3).await;
    let nc = connect(&js.servers[0]).await;
    let created = create_stream(&nc, r#"{"name":"Y","subjects":["y.>"],"num_replicas":3}"#).await;
    let old = created["cluster"]["leader"]
        .as_str()
        .unwrap_or_else(|| panic!("no leader: {created}"))
        .to_string();
    let r = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.Y").await;
    assert_eq!(r["success"], true, "{r}");
    // Still the young leader's lease: the old leader answers, and names itself.
    let info = once(&nc, "$JS.API.STREAM.INFO.Y").await;
    assert_eq!(info["cluster"]["leader"], old.as_str(), "{info}");
    let again = once(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.Y").await;
    assert_eq!(again["success"], true, "{again}");
    // One naming a preferred member would not be honoured: refused.
    let other = info["cluster"]["replicas"][0]["name"]
        .as_str()
        .expect("a replica");
    let body = format!(r#"{{"placement":{{"preferred":"{other}"}}}}"#);
    let placed = once_with(&nc, "$JS.API.STREAM.LEADER.STEPDOWN.Y", &body).await;
    assert_eq!(placed["error"]["err_code"], 10009, "{placed}");
    let new = new_leader(&nc, "Y", &old).await;
    assert_ne!(new, old);
    js.stop().await;
}

/// Each new R3 stream elects one leader and keeps it: exactly one leader-elected advisory
/// per stream, for the leader its creation's answer names. (With every member campaigning
/// at once, a leader could give way to a later candidate moments after its election, and
/// the stream had no leader for a second or more: a restore's chunk then went unanswered.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_new_r3_stream_elects_one_leader_and_keeps_it() {
    const N: usize = 12;
    let js = cluster("jsc-one-leader", 3).await;
    let nc = connect(&js.servers[0]).await;
    let mut elected = nc
        .subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.>")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    let mut leaders = std::collections::BTreeMap::new();
    for i in 0..N {
        let cfg = format!(r#"{{"name":"L{i}","subjects":["l{i}.>"],"num_replicas":3}}"#);
        let r = create_stream(&nc, &cfg).await;
        let leader = r["cluster"]["leader"]
            .as_str()
            .expect("a leader")
            .to_string();
        leaders.insert(format!("L{i}"), leader);
    }
    // Every stream takes a publish, so each has had its leader a while.
    let ctx = jetstream::new(nc.clone());
    for i in 0..N {
        publish_acked(&ctx, &format!("l{i}"), 1, 1).await;
    }
    let mut seen: Vec<(String, String)> = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let every = leaders.keys().all(|s| seen.iter().any(|(n, _)| n == s));
        // Once each has one, whatever else is on its way (a second election takes an
        // election timeout, and every stream has been led longer than that by now).
        let wait = if every {
            Duration::from_millis(500)
        } else {
            deadline.saturating_duration_since(tokio::time::Instant::now())
        };
        let Ok(m) = tokio::time::timeout(wait, futures::StreamExt::next(&mut elected)).await else {
            assert!(every, "advisories for every stream: {seen:?}");
            break;
        };
        let a: Value = serde_json::from_slice(&m.expect("open").payload).expect("json");
        let name = a["stream"].as_str().expect("stream").to_string();
        seen.push((name, a["leader"].as_str().expect("leader").to_string()));
    }
    seen.sort();
    let want: Vec<(String, String)> = leaders.into_iter().collect();
    assert_eq!(
        seen, want,
        "one election per stream, of the leader first named"
    );
    js.stop().await;
}

/// How many nodes' stores (the directories under `dir`) have a stream segment (`*.blk`)
/// holding `needle`.
fn nodes_whose_segments_hold(dir: &std::path::Path, needle: &[u8]) -> usize {
    fn holds(p: &std::path::Path, needle: &[u8]) -> bool {
        let Ok(rd) = std::fs::read_dir(p) else {
            return false;
        };
        rd.flatten().any(|e| {
            let path = e.path();
            if path.is_dir() {
                holds(&path, needle)
            } else {
                path.extension().is_some_and(|x| x == "blk")
                    && std::fs::read(&path)
                        .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
            }
        })
    }
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter(|e| holds(&e.path(), needle)).count())
        .unwrap_or(0)
}
