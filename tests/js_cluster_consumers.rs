//! Replicated consumers on three embedded natsd nodes: each consumer of a replicated stream
//! runs in a Raft group of its own (`C-…`), as nats-server 2.15.1 keeps them.

mod common;

use common::jsc::*;

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

/// Every answer to `subject` within a short while (to count who answers).
async fn answers(nc: &async_nats::Client, subject: &str) -> Vec<Value> {
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("sub");
    nc.publish_with_reply(subject.to_string(), inbox, "".into())
        .await
        .expect("pub");
    let mut out = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(700), sub.next()).await {
        out.push(serde_json::from_slice(&m.payload).expect("json"));
    }
    out
}

/// The next message of consumer `CG > D`.
async fn next(nc: &async_nats::Client) -> async_nats::Message {
    next_of(nc, "CG", "D").await
}

/// The next message of consumer `stream > consumer` (a pull of one; deliveries keep the
/// stream's subject, so not through a request's reply matching).
async fn next_of(nc: &async_nats::Client, stream: &str, consumer: &str) -> async_nats::Message {
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("sub");
    let subject = format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}");
    nc.publish_with_reply(subject, inbox, "".into())
        .await
        .expect("pull");
    tokio::time::timeout(WAIT, sub.next())
        .await
        .expect("a message in time")
        .expect("a message")
}

/// The stream sequence of a delivered message (from its ack subject).
fn stream_seq(m: &async_nats::Message) -> u64 {
    m.reply
        .as_deref()
        .and_then(|r| r.split('.').nth(5))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("an ack subject: {:?}", m.reply))
}

/// Pulls the next message of `stream > consumer`, asserts it is `want`, and acks it
/// synchronously.
async fn take(nc: &async_nats::Client, stream: &str, consumer: &str, want: u64) {
    let m = next_of(nc, stream, consumer).await;
    assert_eq!(stream_seq(&m), want, "{:?}", m.reply);
    let ack = m.reply.clone().expect("ack subject");
    let r = tokio::time::timeout(WAIT, nc.request(ack, "+ACK".into()))
        .await
        .expect("ack answered in time")
        .expect("ack");
    assert!(r.payload.is_empty());
}

/// Polls CONSUMER INFO until `ok` holds of it; that answer.
async fn consumer_info_until(
    nc: &async_nats::Client,
    stream: &str,
    consumer: &str,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let i = api(
            nc,
            &format!("$JS.API.CONSUMER.INFO.{stream}.{consumer}"),
            "",
        )
        .await;
        if ok(&i) {
            return i;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: {i}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An R3 durable of an R3 stream: its creation is answered once its own group has a leader
/// (`cluster.raft_group` `C-…`, not the stream's), INFO is answered once (by that leader),
/// a pull right after the creation is served, and acks survive a stepdown of the consumer
/// alone. An ephemeral of a limits stream is R1 (`{name, leader}` only), its stepdown says
/// success, and once idle it goes from every copy; too many replicas, or fewer on an
/// interest stream, are nats-server's errors; a deleted consumer's group goes everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_consumer_has_a_group_of_its_own() {
    let mut js = cluster("jsc-cgroups", 3).await;
    let nc = async_nats::connect(js.servers[1].client_url())
        .await
        .expect("connect");
    let urls: Vec<_> = js.servers.iter().map(common::http_addr).collect();
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.CG",
        r#"{"name":"CG","subjects":["cg.>"],"num_replicas":3}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let stream_group = r["cluster"]["raft_group"]
        .as_str()
        .expect("group")
        .to_string();
    for i in 1..=20 {
        let a = api(&nc, &format!("cg.{i}"), "x").await;
        assert_eq!(a["seq"], i, "{a}");
    }

    let c = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.CG.D",
        r#"{"stream_name":"CG","config":{"durable_name":"D","ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(c["error"].is_null(), "{c}");
    let group = c["cluster"]["raft_group"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(group.starts_with("C-") && group != stream_group, "{c}");
    assert!(
        c["cluster"]["leader"].is_string(),
        "created with a leader: {c}"
    );
    // A pull straight after the creation is served (by the consumer's leader).
    let m = next(&nc).await;
    assert_eq!(&m.payload[..], b"x");
    let ack = m.reply.clone().expect("ack subject");
    let r = nc.request(ack, "+ACK".into()).await.expect("ack sync");
    assert!(r.payload.is_empty());

    let all = answers(&nc, "$JS.API.CONSUMER.INFO.CG.D").await;
    assert_eq!(
        all.len(),
        1,
        "one answer, from the consumer's leader: {all:?}"
    );
    let info = &all[0];
    assert_eq!(info["ack_floor"]["stream_seq"], 1, "{info}");
    let leader = info["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    assert_eq!(
        info["cluster"]["replicas"].as_array().map(Vec::len),
        Some(2),
        "{info}"
    );

    // Its stepdown moves the consumer; what was acknowledged stays acknowledged.
    let stream_leader = api(&nc, "$JS.API.STREAM.INFO.CG", "").await["cluster"]["leader"].clone();
    let sd = once(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.CG.D").await;
    assert_eq!(sd["success"], true, "{sd}");
    let deadline = tokio::time::Instant::now() + WAIT;
    let info = loop {
        let i = api(&nc, "$JS.API.CONSUMER.INFO.CG.D", "").await;
        if i["cluster"]["leader"].as_str().is_some_and(|l| l != leader) {
            break i;
        }
        assert!(tokio::time::Instant::now() < deadline, "no new leader: {i}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(info["ack_floor"]["stream_seq"], 1, "{info}");
    assert_eq!(info["num_pending"], 19, "{info}");
    let now = api(&nc, "$JS.API.STREAM.INFO.CG", "").await["cluster"]["leader"].clone();
    assert_eq!(now, stream_leader);
    let m = next(&nc).await;
    assert_eq!(
        stream_seq(&m),
        2,
        "the new leader goes on from 2: {:?}",
        m.reply
    );

    let ack = m.reply.clone().expect("ack subject");
    let r = nc.request(ack, "+ACK".into()).await.expect("ack sync");
    assert!(r.payload.is_empty());

    // Its replica count updated, its group follows, as nats-server moves it: R1 keeps the
    // current leader, R3 again has the stream's three peers, current; what was acknowledged
    // stays acknowledged throughout.
    let upd = |n: u64| {
        format!(
            r#"{{"stream_name":"CG","config":{{"durable_name":"D","ack_policy":"explicit","num_replicas":{n}}}}}"#
        )
    };
    let cleader = info["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let r = api(&nc, "$JS.API.CONSUMER.DURABLE.CREATE.CG.D", &upd(1)).await;
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["config"]["num_replicas"], 1, "{r}");
    let i = consumer_info_until(&nc, "CG", "D", "an R1 consumer", |i| {
        i["cluster"]["leader"].is_string() && i["cluster"].get("replicas").is_none()
    })
    .await;
    assert_eq!(i["cluster"]["leader"], cleader.as_str(), "{i}");
    assert_eq!(i["ack_floor"]["stream_seq"], 2, "{i}");
    take(&nc, "CG", "D", 3).await;
    let r = api(&nc, "$JS.API.CONSUMER.DURABLE.CREATE.CG.D", &upd(3)).await;
    assert!(r["error"].is_null(), "{r}");
    assert_eq!(r["config"]["num_replicas"], 3, "{r}");
    let i = consumer_info_until(&nc, "CG", "D", "a group of three again", |i| {
        members(i).len() == 3
            && i["cluster"]["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().all(|r| r["current"] == true))
    })
    .await;
    assert_eq!(i["ack_floor"]["stream_seq"], 3, "{i}");
    take(&nc, "CG", "D", 4).await;
    let r = api(&nc, "$JS.API.CONSUMER.DURABLE.CREATE.CG.D", &upd(5)).await;
    assert_eq!(r["error"]["err_code"], 10126, "{r}");

    // An ephemeral of a limits stream without a replica count: R1.
    let e = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.CG",
        r#"{"stream_name":"CG","config":{"ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(e["error"].is_null(), "{e}");
    let cl = e["cluster"].as_object().expect("cluster");
    assert!(
        cl.contains_key("leader") && !cl.contains_key("replicas"),
        "{e}"
    );
    let name = e["name"].as_str().expect("name");
    let sd = once(&nc, &format!("$JS.API.CONSUMER.LEADER.STEPDOWN.CG.{name}")).await;
    assert_eq!(sd["success"], true, "{sd}");
    // Idle past its inactive threshold (5 s by default), it goes from every copy of the
    // stream (its leader asks for its deletion through the stream's log).
    let jsz = "/jsz?accounts=true&streams=true&consumers=true";
    let (_, body) = common::http_get(urls[0], jsz).await;
    assert!(body.contains(name), "{body}");
    common::wait_for("the idle ephemeral gone from every node", || {
        let urls = urls.clone();
        let name = name.to_string();
        async move {
            for u in urls {
                if common::http_get(u, jsz).await.1.contains(&name) {
                    return false;
                }
            }
            true
        }
    })
    .await;

    // nats-server's refusals.
    let r = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.CG.R5",
        r#"{"stream_name":"CG","config":{"durable_name":"R5","num_replicas":5}}"#,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10126, "{r}");
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.ONE",
        r#"{"name":"ONE","subjects":["one.>"],"num_replicas":1}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let r = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.ONE.R3",
        r#"{"stream_name":"ONE","config":{"durable_name":"R3","num_replicas":3}}"#,
    )
    .await;
    assert_eq!(
        r["error"]["err_code"], 10126,
        "an R3 consumer of an R1 stream: {r}"
    );
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.IN",
        r#"{"name":"IN","subjects":["in.>"],"num_replicas":3,"retention":"interest"}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    let r = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.IN.R1",
        r#"{"stream_name":"IN","config":{"durable_name":"R1","num_replicas":1}}"#,
    )
    .await;
    assert_eq!(r["error"]["err_code"], 10134, "{r}");

    // Listed by /raftz on its members, under its account (the default, the system
    // account's, is the meta group alone); deleted, it goes from /raftz everywhere.
    let (_, body) = common::http_get(urls[0], "/raftz?acc=$G").await;
    assert!(body.contains(&group), "{body}");
    let (_, body) = common::http_get(urls[0], "/raftz").await;
    assert!(body.contains("_meta_") && !body.contains(&group), "{body}");
    let d = once(&nc, "$JS.API.CONSUMER.DELETE.CG.D").await;
    assert_eq!(d["success"], true, "{d}");
    common::wait_for("the group gone from every /raftz", || {
        let urls = urls.clone();
        let group = group.clone();
        async move {
            for u in urls {
                let (_, body) = common::http_get(u, "/raftz?acc=$G").await;
                if body.contains(&group) {
                    return false;
                }
            }
            true
        }
    })
    .await;

    // A member that knows no leader of its consumer's group says so: one 503, as 2.15.1
    // (before, no node answered). E is led elsewhere, and the other two nodes go.
    let e = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.CG.E",
        r#"{"stream_name":"CG","config":{"durable_name":"E","ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(e["error"].is_null(), "{e}");
    let here = js.servers[1].shared().name.clone();
    if e["cluster"]["leader"] == here.as_str() {
        let other = &js.servers[0].shared().name;
        let body = format!(r#"{{"placement":{{"preferred":"{other}"}}}}"#);
        let sd = once_with(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.CG.E", &body).await;
        assert_eq!(sd["success"], true, "{sd}");
        consumer_info_until(&nc, "CG", "E", "E led elsewhere", |i| {
            i["cluster"]["leader"].as_str().is_some_and(|l| l != here)
        })
        .await;
    }
    let survivor = js.servers.remove(1);
    for s in js.servers.drain(..) {
        s.shutdown().await;
    }
    js.servers.push(survivor);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let all = answers(&nc, "$JS.API.CONSUMER.INFO.CG.E").await;
        if !all.is_empty() {
            assert_eq!(all.len(), 1, "{all:?}");
            assert_eq!(all[0]["error"]["code"], 503, "{all:?}");
            assert_eq!(all[0]["error"]["err_code"], 10008, "{all:?}");
            assert_eq!(
                all[0]["type"], "io.nats.jetstream.api.v1.consumer_info_response",
                "{all:?}"
            );
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no answer");
    }
    js.stop().await;
}

/// The members of a consumer's group, from its INFO (`cluster.leader` and `replicas`).
fn members(info: &Value) -> Vec<String> {
    let mut v: Vec<String> = info["cluster"]["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(String::from))
        .chain(info["cluster"]["leader"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

/// A durable follows its stream's copies: scaled R1→R3 it gets a group of three, led
/// anywhere it goes on from its ack floor; a peer removed from the stream is replaced in the
/// consumer's group as in the stream's; scaled back to R1 it is an R1 consumer on the
/// remaining copy. Nothing acknowledged is delivered again at any step.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_follows_its_stream_through_scaling_and_peer_removal() {
    let js = cluster("jsc-cscale", 4).await;
    let nc = async_nats::connect(js.servers[0].client_url())
        .await
        .expect("connect");
    let ctx = async_nats::jetstream::new(nc.clone());
    let r = api(
        &nc,
        "$JS.API.STREAM.CREATE.SCC",
        r#"{"name":"SCC","subjects":["scc.>"],"storage":"file"}"#,
    )
    .await;
    assert!(r["error"].is_null(), "{r}");
    publish_acked(&ctx, "scc", 1, 30).await;
    let c = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.SCC.D",
        r#"{"stream_name":"SCC","config":{"durable_name":"D","ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(c["error"].is_null(), "{c}");
    for seq in 1..=5 {
        take(&nc, "SCC", "D", seq).await;
    }

    // R1 → R3: the consumer's group has the stream's three peers, current.
    let up = scale_to(&nc, "SCC", 3).await;
    assert_eq!(up["config"]["num_replicas"], 3, "{up}");
    let stream_peers = |js: &Js| -> Vec<String> {
        let mut v: Vec<String> = js
            .servers
            .iter()
            .zip(copies(js, "SCC"))
            .filter(|(_, c)| c.is_some())
            .map(|(s, _)| s.shared().name.clone())
            .collect();
        v.sort();
        v
    };
    common::wait_for("three copies", || {
        let n = stream_peers(&js).len();
        async move { n == 3 }
    })
    .await;
    let three = stream_peers(&js);
    let i = consumer_info_until(&nc, "SCC", "D", "a group of the stream's three", |i| {
        members(i) == three
            && i["cluster"]["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().all(|r| r["current"] == true))
    })
    .await;
    assert_eq!(i["ack_floor"]["stream_seq"], 5, "{i}");
    // Led by another member, it goes on from 6.
    let leader = i["cluster"]["leader"].as_str().expect("leader").to_string();
    let sd = once(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.SCC.D").await;
    assert_eq!(sd["success"], true, "{sd}");
    consumer_info_until(&nc, "SCC", "D", "another consumer leader", |i| {
        i["cluster"]["leader"].as_str().is_some_and(|l| l != leader)
    })
    .await;
    for seq in 6..=10 {
        take(&nc, "SCC", "D", seq).await;
    }

    // A stream peer that does not lead the consumer is removed: the fourth node replaces it
    // in the stream and in the consumer's group.
    let i = api(&nc, "$JS.API.CONSUMER.INFO.SCC.D", "").await;
    let cleader = i["cluster"]["leader"].as_str().expect("leader").to_string();
    let gone = three
        .iter()
        .find(|p| **p != cleader)
        .expect("a follower")
        .clone();
    let r = once_with(
        &nc,
        "$JS.API.STREAM.PEER.REMOVE.SCC",
        &format!(r#"{{"peer":"{gone}"}}"#),
    )
    .await;
    assert_eq!(r["success"], true, "{r}");
    common::wait_for("the stream moved off the removed peer", || {
        let p = stream_peers(&js);
        let gone = gone.clone();
        async move { p.len() == 3 && !p.contains(&gone) }
    })
    .await;
    let now = stream_peers(&js);
    let i = consumer_info_until(&nc, "SCC", "D", "the group on the stream's peers", |i| {
        members(i) == now
            && i["cluster"]["replicas"]
                .as_array()
                .is_some_and(|r| r.iter().all(|r| r["current"] == true))
    })
    .await;
    assert_eq!(i["ack_floor"]["stream_seq"], 10, "{i}");
    for seq in 11..=15 {
        take(&nc, "SCC", "D", seq).await;
    }

    // R3 → R1: one copy stays, and the consumer with it, as an R1 consumer.
    let down = scale_to(&nc, "SCC", 1).await;
    assert_eq!(down["config"]["num_replicas"], 1, "{down}");
    common::wait_for("one copy left", || {
        let n = stream_peers(&js).len();
        async move { n == 1 }
    })
    .await;
    let i = consumer_info_until(&nc, "SCC", "D", "an R1 consumer", |i| {
        i["cluster"]["leader"].is_string() && i["cluster"].get("replicas").is_none()
    })
    .await;
    assert_eq!(i["ack_floor"]["stream_seq"], 15, "{i}");
    assert_eq!(i["num_pending"], 15, "{i}");
    for seq in 16..=20 {
        take(&nc, "SCC", "D", seq).await;
    }
    js.stop().await;
}
