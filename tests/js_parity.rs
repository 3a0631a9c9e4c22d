//! JetStream answers that client libraries' own suites (nats-py and its v2 packages, nats.c,
//! async-nats) rely on, compared on natsd, nats-server 2.15.1 and 2.9.10 running the same
//! configuration (issue 15): accounts without JetStream, message deletes of missing sequences,
//! description limits, pull requests cut by `max_bytes` or ended by `no_wait`, and a pull
//! request left behind by a client that gave up.

mod common;

use common::jsref::{self, Ref};
use futures::StreamExt;
use serde_json::{json, Value};
use std::time::Duration;

async fn api(nc: &async_nats::Client, subject: &str, body: &str) -> Value {
    common::js_api(nc, subject, body).await
}

/// `{code, err_code, description}` of an error answer, or `"ok"`.
fn outcome(v: &Value) -> Value {
    match v.get("error") {
        Some(e) => e.clone(),
        None => json!("ok"),
    }
}

async fn stop(refs: Vec<Ref>) {
    for r in refs {
        r.stop().await;
    }
}

/// `$JS.API.INFO` (and another request) from an account without JetStream: 503 10039 in every
/// case nats-server has it — an account not enabled when another is, every account when
/// accounts are configured and none enables JetStream (also the global account), and the
/// system account (natsd answered it with no responders).
#[tokio::test]
async fn accounts_without_jetstream_get_10039() {
    let e10039 =
        json!({"code": 503, "err_code": 10039, "description": "JetStream not enabled for account"});
    let cases = [
        (
            "some-enabled",
            "accounts { A { jetstream: enabled, users: [{user: a, password: a}] }
                        B { users: [{user: b, password: b}] } }",
            vec![("a", json!("ok")), ("b", e10039.clone())],
        ),
        (
            "none-enabled",
            "authorization { users: [{user: g, password: g}] }
             accounts { A { users: [{user: a, password: a}] }
                        SYS { users: [{user: s, password: s}] } }
             system_account: SYS",
            vec![
                ("g", e10039.clone()),
                ("a", e10039.clone()),
                ("s", e10039.clone()),
            ],
        ),
        (
            "global-only",
            "authorization { users: [{user: g, password: g}] }
             accounts { SYS { users: [{user: s, password: s}] } }
             system_account: SYS",
            vec![("g", json!("ok")), ("s", e10039.clone())],
        ),
    ];
    for (tag, conf, want) in cases {
        let refs = jsref::each(tag, conf).await;
        for r in &refs {
            for (user, expected) in &want {
                let nc = r.client(Some(user)).await;
                // 2.9.10 answers only INFO in the system account (below).
                let subjects: &[&str] = if *user == "s" {
                    &["$JS.API.INFO"]
                } else {
                    &["$JS.API.INFO", "$JS.API.STREAM.NAMES"]
                };
                for subject in subjects {
                    let v = api(&nc, subject, "").await;
                    assert_eq!(
                        &outcome(&v),
                        expected,
                        "{} ({tag}), user {user}, {subject}: {v}",
                        r.name
                    );
                }
                if *user == "s" && !r.name.contains("2.9.10") {
                    let v = api(&nc, "$JS.API.STREAM.NAMES", "").await;
                    assert_eq!(v["type"], "io.nats.jetstream.api.v1.system_response", "{v}");
                    assert_eq!(&outcome(&v), expected, "{}: {v}", r.name);
                }
            }
        }
        stop(refs).await;
    }
}

/// `STREAM.MSG.DELETE` of a sequence that is not there: 400 10043 "sequence N not found" (the
/// file store reports 0 and past-the-end as store errors); an empty request is 10003.
#[tokio::test]
async fn deleting_a_missing_sequence() {
    let refs = jsref::each("msgdel", "").await;
    for r in &refs {
        let nc = r.client(None).await;
        for storage in ["memory", "file"] {
            let cfg = json!({"name": "D", "subjects": ["d.>"], "storage": storage});
            let v = api(&nc, "$JS.API.STREAM.CREATE.D", &cfg.to_string()).await;
            assert_eq!(outcome(&v), json!("ok"), "{}: {v}", r.name);
            let del = |b: &'static str| {
                let nc = nc.clone();
                async move { outcome(&api(&nc, "$JS.API.STREAM.MSG.DELETE.D", b).await) }
            };
            let nf = |n: u64| {
                json!({"code": 400, "err_code": 10043,
                       "description": format!("sequence {n} not found")})
            };
            let eof = json!({"code": 500, "err_code": 10057, "description": "stream store EOF"});
            let empty_want = if storage == "memory" {
                nf(1)
            } else {
                eof.clone()
            };
            assert_eq!(
                del(r#"{"seq":1}"#).await,
                empty_want,
                "{} {storage}",
                r.name
            );
            for i in 0..3 {
                api(&nc, &format!("d.{i}"), "x").await;
            }
            assert_eq!(del(r#"{"seq":2}"#).await, json!("ok"), "{}", r.name);
            assert_eq!(del(r#"{"seq":2}"#).await, nf(2), "{} {storage}", r.name);
            assert_eq!(
                del("{}").await,
                json!({"code": 400, "err_code": 10003, "description": "bad request"}),
                "{} {storage}",
                r.name
            );
            let (zero, past) = if storage == "memory" {
                (nf(0), nf(99))
            } else {
                (
                    json!({"code": 500, "err_code": 10057, "description": "no message found"}),
                    eof.clone(),
                )
            };
            assert_eq!(del(r#"{"seq":0}"#).await, zero, "{} {storage}", r.name);
            assert_eq!(
                del(r#"{"seq":99,"no_erase":true}"#).await,
                past,
                "{} {storage}",
                r.name
            );
            api(&nc, "$JS.API.STREAM.DELETE.D", "").await;
        }
    }
    stop(refs).await;
}

/// Descriptions over 4,096 bytes: a consumer's is refused with 10107, a stream's with 10052;
/// exactly 4,096 is fine.
#[tokio::test]
async fn descriptions_are_limited_to_4096_bytes() {
    let refs = jsref::each("desc", "").await;
    for r in &refs {
        let nc = r.client(None).await;
        let long = "x".repeat(4097);
        let cfg = json!({"name": "L", "subjects": ["l"], "storage": "memory", "description": long});
        let v = api(&nc, "$JS.API.STREAM.CREATE.L", &cfg.to_string()).await;
        assert_eq!(
            outcome(&v),
            json!({"code": 500, "err_code": 10052,
                   "description": "stream description is too long, maximum allowed is 4096"}),
            "{}",
            r.name
        );
        let cfg = json!({"name": "L", "subjects": ["l"], "storage": "memory"});
        api(&nc, "$JS.API.STREAM.CREATE.L", &cfg.to_string()).await;
        let con = |d: &str| {
            json!({"stream_name": "L",
                   "config": {"durable_name": "C", "ack_policy": "explicit", "description": d}})
            .to_string()
        };
        let v = api(&nc, "$JS.API.CONSUMER.CREATE.L.C", &con(&long)).await;
        assert_eq!(
            outcome(&v),
            json!({"code": 400, "err_code": 10107,
                   "description": "consumer description is too long, maximum allowed is 4096"}),
            "{}",
            r.name
        );
        let v = api(&nc, "$JS.API.CONSUMER.CREATE.L.C", &con(&long[..4096])).await;
        assert_eq!(outcome(&v), json!("ok"), "{}: {v}", r.name);
    }
    stop(refs).await;
}

/// `num_replicas` on a single server: the bounds first (more than 5: 10052 "maximum replicas
/// is 5"; negative: 400 10133), then 10074 for 2-5; 0 and 1 store as 1 (natsd said 10074 for 6
/// and "replicas > 5 not supported" for -1, and took a consumer's -1).
#[tokio::test]
async fn stream_replicas_are_checked_as_nats_server_checks_them() {
    let refs = jsref::each("replicas", "").await;
    let e = |code: u16, err: u16, d: &str| json!({"code": code, "err_code": err, "description": d});
    let single = e(
        500,
        10074,
        "replicas > 1 not supported in non-clustered mode",
    );
    let cases = [
        (0, json!("ok")),
        (1, json!("ok")),
        (3, single.clone()),
        (5, single.clone()),
        (6, e(500, 10052, "maximum replicas is 5")),
        (-1, e(400, 10133, "replicas count cannot be negative")),
    ];
    for r in &refs {
        let nc = r.client(None).await;
        for (i, (n, want)) in cases.iter().enumerate() {
            let cfg = json!({"name": format!("R{i}"), "subjects": [format!("r{i}")],
                             "storage": "memory", "num_replicas": n});
            let v = api(
                &nc,
                &format!("$JS.API.STREAM.CREATE.R{i}"),
                &cfg.to_string(),
            )
            .await;
            assert_eq!(&outcome(&v), want, "{} num_replicas {n}", r.name);
            if v.get("error").is_none() {
                assert_eq!(v["config"]["num_replicas"], 1, "{}: {v}", r.name);
            }
        }
        // A consumer: single-server mode first (6 is 10074 too), then negative; 0 stays 0.
        let cases = [
            (0, json!("ok")),
            (1, json!("ok")),
            (3, single.clone()),
            (6, single.clone()),
            (-1, e(400, 10133, "replicas count cannot be negative")),
        ];
        for (i, (n, want)) in cases.iter().enumerate() {
            let cfg = json!({"stream_name": "R0",
                             "config": {"durable_name": format!("c{i}"), "ack_policy": "explicit",
                                        "num_replicas": n}});
            let v = api(
                &nc,
                &format!("$JS.API.CONSUMER.CREATE.R0.c{i}"),
                &cfg.to_string(),
            )
            .await;
            assert_eq!(&outcome(&v), want, "{} consumer num_replicas {n}", r.name);
            if v.get("error").is_none() {
                assert_eq!(v["config"]["num_replicas"], *n, "{}: {v}", r.name);
            }
        }
    }
    stop(refs).await;
}

/// What a pull request's inbox receives until its end: `p.N` for messages, the status line
/// with the pending counts for the closing status, `-` when nothing came for a while.
async fn replies(sub: &mut async_nats::Subscriber, quiet: Duration) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let Ok(Some(m)) = tokio::time::timeout(quiet, sub.next()).await else {
            out.push("-".to_string());
            return out;
        };
        match m.status {
            None => out.push(m.subject.to_string()),
            Some(s) => {
                let h = |k: &str| {
                    m.headers
                        .as_ref()
                        .and_then(|h| h.get(k))
                        .map_or(String::new(), |v| v.to_string())
                };
                out.push(format!(
                    "{} {} [{}] [{}]",
                    s.as_u16(),
                    m.description.as_deref().unwrap_or(""),
                    h("Nats-Pending-Messages"),
                    h("Nats-Pending-Bytes")
                ));
                return out;
            }
        }
    }
}

/// A pull consumer `C` on stream `P` (`p.>`) holding `n` messages of 100 bytes `p.0`….
async fn pull_setup(nc: &async_nats::Client, n: usize) {
    let cfg = json!({"name": "P", "subjects": ["p.>"], "storage": "memory"});
    api(nc, "$JS.API.STREAM.CREATE.P", &cfg.to_string()).await;
    let con =
        json!({"stream_name": "P", "config": {"durable_name": "C", "ack_policy": "explicit"}});
    api(nc, "$JS.API.CONSUMER.CREATE.P.C", &con.to_string()).await;
    for i in 0..n {
        api(nc, &format!("p.{i}"), &"x".repeat(100)).await;
    }
}

async fn pull(nc: &async_nats::Client, inbox: &str, req: &str) {
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.P.C",
        inbox.to_string(),
        req.to_string().into(),
    )
    .await
    .expect("publish");
}

/// A pull request with `max_bytes` gets what fits, then (mid-batch too) a 409 with what it
/// still wanted; bytes count the subject, ack reply, headers and payload (142 here); a
/// request whose bytes are used up exactly ends without a status.
#[tokio::test]
async fn max_bytes_cuts_a_pull_request() {
    let refs = jsref::each("maxbytes", "").await;
    let q = Duration::from_millis(300);
    for r in &refs {
        let nc = r.client(None).await;
        pull_setup(&nc, 3).await;
        let mut sub = nc.subscribe("in.1").await.expect("sub");
        pull(
            &nc,
            "in.1",
            r#"{"batch":10,"max_bytes":50,"expires":5000000000}"#,
        )
        .await;
        assert_eq!(
            replies(&mut sub, q).await,
            ["409 Message Size Exceeds MaxBytes [10] [50]"],
            "{}",
            r.name
        );
        pull(
            &nc,
            "in.1",
            r#"{"batch":10,"max_bytes":273,"expires":5000000000}"#,
        )
        .await;
        assert_eq!(
            replies(&mut sub, q).await,
            ["p.0", "409 Message Size Exceeds MaxBytes [9] [131]"],
            "{}",
            r.name
        );
        pull(
            &nc,
            "in.1",
            r#"{"batch":10,"max_bytes":284,"expires":5000000000}"#,
        )
        .await;
        assert_eq!(
            replies(&mut sub, q).await,
            ["p.1", "p.2", "-"],
            "{}",
            r.name
        );
    }
    stop(refs).await;
}

/// A `no_wait` fetch of 13 with 2 messages there gets the 2 and then its end: 408 with what it
/// still wanted on natsd and 2.9.10 (2.15.1 ends it with 404 No Messages); with none there,
/// 404 at once — unless it has an `expires`: then it waits for a message and ends right after
/// it (nats-py 2.16's fetch sends such a probe: natsd answered 404 at once and the message went
/// to the client's follow-up request, which waited out its expiry for the rest of the batch).
#[tokio::test]
async fn no_wait_delivers_what_is_there_then_ends() {
    let refs = jsref::each("nowait", "").await;
    let q = Duration::from_millis(500);
    for r in &refs {
        let nc = r.client(None).await;
        pull_setup(&nc, 2).await;
        let mut sub = nc.subscribe("in.1").await.expect("sub");
        pull(&nc, "in.1", r#"{"batch":13,"no_wait":true}"#).await;
        let got = replies(&mut sub, q).await;
        let end = if r.name.contains("2.15") {
            "404 No Messages [] []"
        } else {
            "408 Request Timeout [11] [0]"
        };
        assert_eq!(got, ["p.0", "p.1", end], "{}", r.name);
        pull(&nc, "in.1", r#"{"batch":13,"no_wait":true}"#).await;
        let got = replies(&mut sub, q).await;
        assert_eq!(got, ["404 No Messages [] []"], "{}", r.name);
        // Nothing there, with an expiry: it waits, takes the next message and ends.
        let mut sub = nc.subscribe("in.2").await.expect("sub");
        let one_shot = r#"{"batch":100,"no_wait":true,"expires":5000000000}"#;
        pull(&nc, "in.2", one_shot).await;
        nc.flush().await.expect("flush");
        assert_eq!(
            replies(&mut sub, Duration::from_millis(200)).await,
            ["-"],
            "{}",
            r.name
        );
        api(&nc, "p.9", "x").await;
        let end = if r.name.contains("2.15") {
            "404 No Messages [] []"
        } else {
            "408 Request Timeout [99] [0]"
        };
        // Well before the 5 s expiry.
        assert_eq!(replies(&mut sub, q).await, ["p.9", end], "{}", r.name);
    }
    stop(refs).await;
}

/// A fetch that timed out in the client (its inbox gone, or its expiry passed) leaves no
/// request behind that takes the next message: the next fetch gets it at once.
#[tokio::test]
async fn a_timed_out_fetch_does_not_capture_the_next_message() {
    let refs = jsref::each("orphan", "").await;
    for r in &refs {
        let nc = r.client(None).await;
        pull_setup(&nc, 0).await;
        // The client gave up and unsubscribed; the request would wait 30 s more.
        let sub = nc.subscribe("in.gone").await.expect("sub");
        pull(&nc, "in.gone", r#"{"batch":1,"expires":30000000000}"#).await;
        nc.flush().await.expect("flush");
        drop(sub);
        nc.flush().await.expect("flush");
        // Expired on the server's clock, whether or not its timer got to it yet.
        let mut stale = nc.subscribe("in.stale").await.expect("sub");
        pull(&nc, "in.stale", r#"{"batch":1,"expires":1000000}"#).await;
        let first = tokio::time::timeout(Duration::from_secs(5), stale.next()).await;
        let first = first
            .expect("the expired request is answered")
            .expect("msg");
        assert_eq!(first.status.map(|s| s.as_u16()), Some(408), "{}", r.name);
        api(&nc, "p.0", "x").await;
        let mut sub = nc.subscribe("in.next").await.expect("sub");
        pull(&nc, "in.next", r#"{"batch":1,"expires":10000000000}"#).await;
        // Well before the 10 s the request may wait: the message is there.
        let m = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
        let m = m.expect("delivered at once").expect("msg");
        assert_eq!((m.subject.as_str(), m.status), ("p.0", None), "{}", r.name);
    }
    stop(refs).await;
}

/// Ten clients binding one durable push consumer at once, each with its own deliver subject
/// it already listens on (what nats.go, nats.c and nats-py do for `js.subscribe(durable=…)`):
/// the first create wins, the others are refused while the winner's deliver subject has
/// interest (10013, `consumer name already in use`: the clients then read `push_bound` and
/// say "consumer is already bound to a subscription"); consumer info says `push_bound` while
/// bound and not after; once the winner has gone, another client may take the consumer over
/// and gets what the winner left unacknowledged at once.
#[tokio::test]
async fn one_of_ten_binds_a_durable_push_consumer() {
    let refs = jsref::each("pushbound", "").await;
    for r in &refs {
        let admin = r.client(None).await;
        let v = api(
            &admin,
            "$JS.API.STREAM.CREATE.PB",
            r#"{"name":"PB","subjects":["pb.>"],"storage":"memory"}"#,
        )
        .await;
        assert_eq!(outcome(&v), json!("ok"), "{}: {v}", r.name);
        let mut clients = Vec::new();
        for i in 0..10 {
            let nc = r.client(None).await;
            let sub = nc.subscribe(format!("dlv.{i}")).await.expect("sub");
            nc.flush().await.expect("flush");
            clients.push((nc, sub));
        }
        let creates = clients.iter().enumerate().map(|(i, (nc, _))| {
            let body = format!(
                r#"{{"stream_name":"PB","config":{{"durable_name":"D","deliver_subject":"dlv.{i}","ack_policy":"explicit"}}}}"#
            );
            async move { api(nc, "$JS.API.CONSUMER.DURABLE.CREATE.PB.D", &body).await }
        });
        let answers = futures::future::join_all(creates).await;
        let winners: Vec<usize> = (0..10)
            .filter(|&i| answers[i].get("error").is_none())
            .collect();
        assert_eq!(winners.len(), 1, "{}: {answers:?}", r.name);
        let w = winners[0];
        for (i, a) in answers.iter().enumerate() {
            if i != w {
                assert_eq!(
                    outcome(a),
                    json!({"code": 400, "err_code": 10013, "description": "consumer name already in use"}),
                    "{}",
                    r.name
                );
            }
        }
        let info = api(&admin, "$JS.API.CONSUMER.INFO.PB.D", "").await;
        assert_eq!(info["push_bound"], true, "{}: {info}", r.name);
        assert_eq!(
            info["config"]["deliver_subject"],
            format!("dlv.{w}"),
            "{}",
            r.name
        );
        // Only the winner gets messages.
        admin.publish("pb.x", "1".into()).await.expect("publish");
        let m = tokio::time::timeout(Duration::from_secs(5), clients[w].1.next())
            .await
            .expect("delivered in time")
            .expect("msg");
        assert_eq!(m.subject.as_str(), "pb.x", "{}", r.name);
        // The winner leaves: not bound any more, and a newcomer takes the consumer over.
        let (nc, sub) = clients.remove(w);
        drop(sub);
        nc.flush().await.expect("flush");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let info = api(&admin, "$JS.API.CONSUMER.INFO.PB.D", "").await;
            if info.get("push_bound").is_none() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: still bound: {info}",
                r.name
            );
        }
        let nc2 = &clients[0].0;
        let mut newcomer = nc2.subscribe("dlv.new").await.expect("sub");
        nc2.flush().await.expect("flush");
        let again = api(
            nc2,
            "$JS.API.CONSUMER.DURABLE.CREATE.PB.D",
            r#"{"stream_name":"PB","config":{"durable_name":"D","deliver_subject":"dlv.new","ack_policy":"explicit"}}"#,
        )
        .await;
        assert_eq!(outcome(&again), json!("ok"), "{}: {again}", r.name);
        // What the winner left unacknowledged goes to the newcomer at once, not after ack_wait.
        let m = tokio::time::timeout(Duration::from_secs(5), newcomer.next())
            .await
            .expect("redelivered at once")
            .expect("msg");
        assert_eq!(m.subject.as_str(), "pb.x", "{}", r.name);
    }
    stop(refs).await;
}

/// A KV bucket in account A used from account I through imports, as nats.go's
/// `TestKeyValueCrossAccounts` configures it: I imports A's `$JS.API.>` as `fromA.>`, `$KV.>` as
/// `fromA.$KV.>`, and the stream `accI.>` (its inbox prefix), so a watcher in I gets its
/// consumer's deliveries through the stream import. Both sides see each other's puts, the
/// watcher in I gets the live updates, deletes too, and a pull consumer used from I gets its
/// messages (natsd had both matched on the stream subject instead of the deliver subject or
/// the `_R_` reply, and dropped them). 2.9.10 is left out: async-nats 0.51 cannot create a
/// bucket there.
#[tokio::test]
async fn kv_watcher_across_accounts_gets_live_updates() {
    use async_nats::jetstream;
    let conf = r#"
accounts: {
  A: {
    users: [ {user: a, password: a} ]
    jetstream: enabled
    exports: [
      {service: "$JS.API.>"}
      {service: "$KV.>"}
      {stream: "accI.>"}
    ]
  }
  I: {
    users: [ {user: i, password: i} ]
    imports: [
      {service: {account: A, subject: "$JS.API.>"}, to: "fromA.>"}
      {service: {account: A, subject: "$KV.>"}, to: "fromA.$KV.>"}
      {stream: {subject: "accI.>", account: A}}
    ]
  }
}
"#;
    let refs = jsref::each("kvcross", conf).await;
    // 2.9.10 answers async-nats 0.51's bucket creation in a shape it cannot read.
    for r in refs.iter().filter(|r| !r.name.contains("2.9")) {
        let nc_a = r.client(Some("a")).await;
        let js_a = jetstream::new(nc_a);
        let kv_a = js_a
            .create_key_value(jetstream::kv::Config {
                bucket: "Map".into(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{}: create bucket: {e}", r.name));
        let nc_i = async_nats::ConnectOptions::with_user_and_password("i".into(), "i".into())
            .custom_inbox_prefix("accI")
            .connect(r.url.as_str())
            .await
            .unwrap_or_else(|e| panic!("{}: connect: {e}", r.name));
        let js_i = jetstream::with_prefix(nc_i, "fromA");
        let kv_i = js_i
            .get_key_value("Map")
            .await
            .unwrap_or_else(|e| panic!("{}: bucket from I: {e}", r.name));
        let mut watch = kv_i
            .watch_all()
            .await
            .unwrap_or_else(|e| panic!("{}: watch from I: {e}", r.name));
        kv_a.put("a1", "from A".into()).await.expect("put from A");
        kv_i.put("i1", "from I".into()).await.expect("put from I");
        kv_a.delete("a1").await.expect("delete from A");
        let mut seen = Vec::new();
        while seen.len() < 3 {
            let e = tokio::time::timeout(Duration::from_secs(5), watch.next())
                .await
                .unwrap_or_else(|_| panic!("{}: live updates in time, got {seen:?}", r.name))
                .expect("entry")
                .expect("entry ok");
            seen.push(format!(
                "{} {:?} {}",
                e.key,
                e.operation,
                String::from_utf8_lossy(&e.value)
            ));
        }
        assert_eq!(
            seen,
            ["a1 Put from A", "i1 Put from I", "a1 Delete "],
            "{}",
            r.name
        );
        let got = kv_a.get("i1").await.expect("get from A");
        assert_eq!(got.as_deref(), Some(&b"from I"[..]), "{}", r.name);
        // A pull consumer used from I: its message comes back through the response relay,
        // with the stream's subject. (Only the first of a batch: `$JS.API.>` is exported
        // with singleton responses, and nats-server ends the mapping at the first one too.)
        let stream = js_i.get_stream("KV_Map").await.expect("stream from I");
        let pull = stream
            .create_consumer(jetstream::consumer::pull::Config {
                ack_policy: jetstream::consumer::AckPolicy::None,
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{}: pull consumer from I: {e}", r.name));
        let mut batch = pull
            .fetch()
            .max_messages(1)
            .expires(Duration::from_secs(2))
            .messages()
            .await
            .expect("fetch");
        let mut subjects = Vec::new();
        while let Some(m) = tokio::time::timeout(Duration::from_secs(5), batch.next())
            .await
            .unwrap_or_else(|_| panic!("{}: fetch in time, got {subjects:?}", r.name))
        {
            subjects.push(m.expect("message").subject.to_string());
        }
        assert_eq!(subjects, ["$KV.Map.i1"], "{}", r.name);
    }
    stop(refs).await;
}

/// Where nats-server 2.15.1 has no subscription for a request — a direct get of a stream
/// that does not exist or does not allow direct gets, a pull request for a consumer that does
/// not exist (or no longer does) — the requester gets no responders at once instead of
/// waiting out its timeout. (2.9.10 leaves some of them unanswered; natsd follows 2.15.1.)
#[tokio::test]
async fn requests_nobody_serves_get_no_responders() {
    let refs = jsref::each("noresp", "").await;
    for r in refs.iter().filter(|r| !r.name.contains("2.9")) {
        let nc = r.client(None).await;
        for (name, direct) in [("ND", false), ("DD", true)] {
            let cfg = json!({"name": name, "subjects": [format!("{}.>", name.to_lowercase())],
                             "allow_direct": direct});
            let v = api(
                &nc,
                &format!("$JS.API.STREAM.CREATE.{name}"),
                &cfg.to_string(),
            )
            .await;
            assert_eq!(outcome(&v), json!("ok"), "{}: {v}", r.name);
            api(&nc, &format!("{}.1", name.to_lowercase()), "x").await;
        }
        let c =
            json!({"stream_name": "ND", "config": {"durable_name": "C", "ack_policy": "explicit"}});
        let v = api(&nc, "$JS.API.CONSUMER.CREATE.ND.C", &c.to_string()).await;
        assert_eq!(outcome(&v), json!("ok"), "{}: {v}", r.name);
        let v = api(&nc, "$JS.API.CONSUMER.DELETE.ND.C", "").await;
        assert_eq!(outcome(&v), json!("ok"), "{}: {v}", r.name);

        let pull = r#"{"batch":1,"expires":2000000000}"#;
        for (subject, body) in [
            ("$JS.API.DIRECT.GET.MISSING", r#"{"seq":1}"#),
            ("$JS.API.DIRECT.GET.ND", r#"{"seq":1}"#),
            ("$JS.API.CONSUMER.MSG.NEXT.ND.C", pull),
            ("$JS.API.CONSUMER.MSG.NEXT.MISSING.C", pull),
        ] {
            let got = tokio::time::timeout(
                Duration::from_secs(5),
                nc.request(subject.to_string(), body.to_string().into()),
            )
            .await;
            let kind = match &got {
                Ok(Err(e)) => Some(e.kind()),
                _ => None,
            };
            assert_eq!(
                kind,
                Some(async_nats::RequestErrorKind::NoResponders),
                "{}: {subject}: {got:?}",
                r.name
            );
        }
        // A stream that allows it answers the direct get.
        let m = nc
            .request("$JS.API.DIRECT.GET.DD".to_string(), r#"{"seq":1}"#.into())
            .await
            .unwrap_or_else(|e| panic!("{}: direct get: {e}", r.name));
        assert_eq!(&m.payload[..], b"x", "{}", r.name);
    }
    stop(refs).await;
}
