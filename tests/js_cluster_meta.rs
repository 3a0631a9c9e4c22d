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
/// 2.11+: the stream's group hands over to the preferred member (three times in a row, to
/// different nodes, so that chance does not pass the test); a consumer's placement moves its
/// stream's group (natsd's consumers lead where their stream does); a preferred server that
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
    for round in 0..3 {
        // Each round the next node in name order after the leader: a different target
        // than a plain stepdown's winner at least half the time.
        let at = names.iter().position(|n| *n == now).expect("a node");
        let to = names[(at + 1 + round % 2) % names.len()].clone();
        let (subject, ty) = if round == 1 {
            (
                "$JS.API.CONSUMER.LEADER.STEPDOWN.P3.D",
                "consumer_leader_stepdown_response",
            )
        } else {
            (
                "$JS.API.STREAM.LEADER.STEPDOWN.P3",
                "stream_leader_stepdown_response",
            )
        };
        let r = placed(&nc, subject, &format!(r#"{{"preferred":"{to}"}}"#)).await;
        assert_eq!(r["type"], format!("io.nats.jetstream.api.v1.{ty}"), "{r}");
        assert_eq!(r["success"], true, "{r}");
        now = new_leader(&nc, "P3", &now).await;
        assert_eq!(now, to, "round {round}: {subject} to {to}");
        if round == 1 {
            let i = api(&nc, "$JS.API.CONSUMER.INFO.P3.D", "").await;
            assert_eq!(i["cluster"]["leader"], to.as_str(), "{i}");
        }
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
