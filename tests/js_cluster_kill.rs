//! Clustered JetStream across three natsd processes: a stream leader killed with
//! `kill -9` while a client publishes with acks (and `Nats-Msg-Id`, retrying what was not
//! acknowledged): afterwards every acknowledged message is in the stream exactly once and
//! in order, the restarted node catches up with the new leader, and no request is answered
//! twice (a restarted node re-applies its log without acking again what it proposed in its
//! earlier life: the reply subjects may belong to other requests by now).

mod common;

use std::time::Duration;

use common::jsproc::{create_ev, publish_acked, request, start, subject_at, three, WAIT};

/// Fetches and acknowledges `n` messages of `c` (retrying while a leader is elected); their
/// payloads (each message's number).
async fn take(c: &async_nats::jetstream::consumer::PullConsumer, n: usize) -> Vec<u64> {
    use futures::StreamExt;
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(tokio::time::Instant::now() < deadline, "took only {got:?}");
        let Ok(mut batch) = c
            .fetch()
            .max_messages(n - got.len())
            .expires(Duration::from_secs(1))
            .messages()
            .await
        else {
            continue;
        };
        while let Ok(Some(Ok(m))) = tokio::time::timeout(WAIT, batch.next()).await {
            if m.double_ack().await.is_ok() {
                got.push(
                    String::from_utf8_lossy(&m.payload)
                        .parse()
                        .expect("a number"),
                );
            }
        }
    }
    got
}

/// The durable pull consumer `D` of `EV`, acking explicitly.
async fn durable_d(nc: &async_nats::Client) -> async_nats::jetstream::consumer::PullConsumer {
    async_nats::jetstream::new(nc.clone())
        .get_stream("EV")
        .await
        .expect("stream")
        .create_consumer(async_nats::jetstream::consumer::pull::Config {
            durable_name: Some("D".into()),
            ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_leader_killed_loses_no_acknowledged_message() {
    let (mut nodes, nc) = three("jsc-kill").await;

    // Every answer any publisher gets, by reply subject.
    let watcher = async_nats::connect(format!("nats://127.0.0.1:{}", nodes.clients[0]))
        .await
        .expect("watcher");
    let mut answers = watcher.subscribe("_INBOX.>").await.expect("sub");
    watcher.flush().await.expect("flush");
    let counts = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        usize,
    >::new()));
    let counting = counts.clone();
    tokio::spawn(async move {
        while let Some(m) = futures::StreamExt::next(&mut answers).await {
            let mut c = counting.lock().unwrap_or_else(|p| p.into_inner());
            *c.entry(m.subject.to_string()).or_default() += 1;
        }
    });
    let created = create_ev(&nc, "file").await;
    let leader = created["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();

    let mut acked = Vec::new();
    for i in 1..=100u64 {
        acked.push((i, publish_acked(&nc, i).await));
    }
    // A durable consumer takes and acknowledges the first 50.
    let consumer = durable_d(&nc).await;
    assert_eq!(take(&consumer, 50).await, (1..=50).collect::<Vec<u64>>());
    // kill -9 the stream's leader and keep publishing through the others.
    let li: usize = leader[1..].parse().expect("nK");
    if let Some(p) = &nodes.procs[li] {
        p.signal("-9");
    }
    nodes.procs[li] = None;
    let stalled = tokio::time::Instant::now();
    acked.push((101, publish_acked(&nc, 101).await));
    eprintln!(
        "first ack after the kill: {:?} (natsd's election timeout is 1-2 s)",
        stalled.elapsed()
    );
    for i in 102..=200u64 {
        acked.push((i, publish_acked(&nc, i).await));
    }
    // The killed node comes back and catches up.
    nodes.procs[li] = Some(start(&nodes.confs[li]));
    let info = caught_up(&nc).await;
    assert_ne!(info["cluster"]["leader"], leader.as_str(), "{info}");
    assert_eq!(info["state"]["messages"], 200, "{info}");
    assert_eq!(info["state"]["last_seq"], 200, "{info}");
    // Each acknowledged message exactly once, at the sequence its ack named, in order.
    for (i, seq) in &acked {
        assert_eq!(*seq, *i, "ack of message {i}");
        assert_eq!(subject_at(&nc, "EV", *seq).await, format!("ev.{i}"));
    }
    let twice: Vec<(String, usize)> = counts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(s, n)| (s.clone(), *n))
        .collect();
    assert!(twice.is_empty(), "answered more than once: {twice:?}");

    // The consumer's progress outlived its leader; then the leader of now goes too, so the
    // restarted node (its copy rebuilt from its log) or the other one leads: D goes on at 51.
    // (Asked until answered: under a loaded disk one answer may take over `request`'s 2 s.)
    let deadline = tokio::time::Instant::now() + WAIT;
    let d = loop {
        if let Some(d) = request(&nc, "$JS.API.CONSUMER.INFO.EV.D", String::new()).await {
            break d;
        }
        assert!(tokio::time::Instant::now() < deadline, "no consumer info");
    };
    assert_eq!(d["ack_floor"]["stream_seq"], 50, "{d}");
    assert_eq!(d["num_pending"], 150, "{d}");
    let now: usize = info["cluster"]["leader"].as_str().expect("leader")[1..]
        .parse()
        .expect("nK");
    if let Some(p) = &nodes.procs[now] {
        p.signal("-9");
    }
    nodes.procs[now] = None;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let d = request(&nc, "$JS.API.CONSUMER.INFO.EV.D", String::new()).await;
        if d.as_ref()
            .is_some_and(|d| d["ack_floor"]["stream_seq"] == 50)
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no consumer: {d:?}");
    }
    assert_eq!(take(&consumer, 10).await, (51..=60).collect::<Vec<u64>>());
    drop(nodes);
}

/// The consumer leader of now, as CONSUMER INFO names it, once it is not `old`.
async fn consumer_leader(nc: &async_nats::Client, old: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let d = request(nc, "$JS.API.CONSUMER.INFO.EV.D", String::new()).await;
        if let Some(l) = d
            .as_ref()
            .and_then(|d| d["cluster"]["leader"].as_str())
            .filter(|l| *l != old)
        {
            return l.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader but {old}: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A replicated consumer's own leader killed with `kill -9`: another member takes over from
/// the acknowledged progress; the killed node comes back (its copy rebuilt from its logs),
/// is handed the consumer (a preferred stepdown) and serves it from where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_leader_killed_comes_back_and_leads_again() {
    let (mut nodes, nc) = three("jsc-ckill").await;
    create_ev(&nc, "file").await;
    for i in 1..=100u64 {
        publish_acked(&nc, i).await;
    }
    let consumer = durable_d(&nc).await;
    assert_eq!(take(&consumer, 30).await, (1..=30).collect::<Vec<u64>>());
    let first = consumer_leader(&nc, "").await;
    let k: usize = first[1..].parse().expect("nK");
    if let Some(p) = &nodes.procs[k] {
        p.signal("-9");
    }
    nodes.procs[k] = None;
    let second = consumer_leader(&nc, &first).await;
    assert_eq!(take(&consumer, 30).await, (31..=60).collect::<Vec<u64>>());

    nodes.procs[k] = Some(start(&nodes.confs[k]));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let body = format!(r#"{{"placement":{{"preferred":"{first}"}}}}"#);
        let r = request(&nc, "$JS.API.CONSUMER.LEADER.STEPDOWN.EV.D", body).await;
        // A request that timed out may have handed it over all the same.
        let already = |r: &serde_json::Value| {
            r["error"]["err_code"] == 10005
                && r["error"]["description"]
                    .as_str()
                    .is_some_and(|d| d.ends_with("is already leader"))
        };
        if r.as_ref()
            .is_some_and(|r| r["success"] == true || already(r))
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not handed back: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(consumer_leader(&nc, &second).await, first);
    assert_eq!(take(&consumer, 40).await, (61..=100).collect::<Vec<u64>>());
    drop(nodes);
}

/// Group `group` in node `http`'s `/raftz` (`Null` before the node has it open).
async fn raftz_of(http: u16, group: &str) -> serde_json::Value {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], http));
    let (_, body) = common::http_get(addr, &format!("/raftz?acc=$G&group={group}")).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["$G"][group].clone()
}

/// STREAM INFO of EV once both followers are current (the restarted node caught up).
async fn caught_up(nc: &async_nats::Client) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let info = request(nc, "$JS.API.STREAM.INFO.EV", String::new()).await;
        if let Some(v) = info.as_ref().filter(|v| {
            let reps = v["cluster"]["replicas"].as_array();
            reps.is_some_and(|r| r.len() == 2 && r.iter().all(|r| r["current"] == true))
        }) {
            return v.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "replicas never current: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The member that created an R3 stream's group (its first leader, which bootstraps it)
/// restarts while another member leads: it rejoins as a follower and leaves the leader be —
/// no election, the group's term unchanged (a restarted member that bootstrapped and
/// campaigned again would depose a leader it had not heard from yet).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_first_member_leaves_the_leader_be() {
    use futures::StreamExt;
    let (mut nodes, nc) = three("jsc-first").await;
    let created = create_ev(&nc, "file").await;
    let first = created["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let group = created["cluster"]["raft_group"]
        .as_str()
        .expect("raft_group")
        .to_string();
    for i in 1..=10u64 {
        publish_acked(&nc, i).await;
    }
    let mut elected = nc
        .subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.EV")
        .await
        .expect("sub");
    nc.flush().await.expect("flush");
    // One step-down (it takes openraft's leader lease, about 2 s, longer than `request`
    // waits; asking again would step the next leader down too).
    let r = tokio::time::timeout(
        WAIT,
        nc.request("$JS.API.STREAM.LEADER.STEPDOWN.EV", "".into()),
    )
    .await
    .expect("a stepdown answer")
    .expect("a stepdown answer");
    let r: serde_json::Value = serde_json::from_slice(&r.payload).expect("json");
    assert_eq!(r["success"], true, "{r}");
    let deadline = tokio::time::Instant::now() + WAIT;
    // The step-down's own election, announced by the new leader.
    let next = loop {
        let m = tokio::time::timeout_at(deadline, elected.next())
            .await
            .expect("an advisory of the new leader")
            .expect("open");
        let a: serde_json::Value = serde_json::from_slice(&m.payload).expect("json");
        let l = a["leader"].as_str().unwrap_or_default().to_string();
        if !l.is_empty() && l != first {
            break l;
        }
    };
    let ni: usize = next[1..].parse().expect("nK");
    let term = raftz_of(nodes.http[ni], &group).await["term"].clone();
    assert!(term.as_u64().is_some_and(|t| t > 0), "{term}");

    // Restart the first member (kill -9: no lame duck, no handover) and let it catch up.
    let fi: usize = first[1..].parse().expect("nK");
    if let Some(p) = &nodes.procs[fi] {
        p.signal("-9");
    }
    nodes.procs[fi] = None;
    nodes.procs[fi] = Some(start(&nodes.confs[fi]));
    for i in 11..=20u64 {
        assert_eq!(publish_acked(&nc, i).await, i);
    }
    // The restarted member has applied all the leader has (STREAM INFO's `current` may
    // still be the leader's view from before the kill).
    let applied = raftz_of(nodes.http[ni], &group).await["applied"].clone();
    common::wait_for("the restarted member caught up", || {
        let (http, group, applied) = (nodes.http[fi], group.clone(), applied.clone());
        async move {
            let g = raftz_of(http, &group).await;
            g["applied"].as_u64() >= applied.as_u64() && g["leader"].is_string()
        }
    })
    .await;
    let info = caught_up(&nc).await;
    assert_eq!(info["cluster"]["leader"], next.as_str(), "{info}");
    for k in [ni, fi] {
        let g = raftz_of(nodes.http[k], &group).await;
        assert_eq!(g["term"], term, "n{k}: {g}");
    }
    // No election announced since the step-down's.
    if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), elected.next()).await {
        panic!("an election: {}", String::from_utf8_lossy(&m.payload));
    }
    drop(nodes);
}
