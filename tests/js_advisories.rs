//! JetStream advisories and metrics (`$JS.EVENT.…`): the same scenario (a stream created and
//! updated, an API error, a sampled consumer whose messages are acked, terminated, naked and
//! run out of deliveries, then deleted) against natsd and the real nats-server 2.9.10, and
//! the same events from both: subjects, types, fields and their values. Also the `domain`
//! field and nats-server's answer to a `sample_freq` it cannot read. Never skipped.

mod common;

use bytes::Bytes;
use common::js_api as api;
use common::natsserver::{self, same_shape, Wait};
use futures::StreamExt;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const STREAM: &str = r#"{"name":"S","subjects":["s.>"],"storage":"memory"}"#;
const STREAM_UPDATE: &str = r#"{"name":"S","subjects":["s.>"],"storage":"memory","max_msgs":100}"#;
const CONSUMER: &str = r#"{"stream_name":"S","config":{"durable_name":"D","ack_policy":"explicit","ack_wait":300000000,"max_deliver":2,"sample_freq":"100%"}}"#;
const BAD_SAMPLING: &str = r#"{"stream_name":"S","config":{"durable_name":"B","ack_policy":"explicit","sample_freq":"5%%"}}"#;

/// Events received so far, in order: (subject, JSON body).
struct Events {
    sub: async_nats::Subscriber,
    seen: Vec<(String, Value)>,
}

impl Events {
    async fn new(nc: &async_nats::Client, subject: &str) -> Events {
        let sub = nc.subscribe(subject.to_string()).await.expect("subscribe");
        nc.flush().await.expect("flush");
        Events {
            sub,
            seen: Vec::new(),
        }
    }

    /// Take events until one on `subject` has arrived (or panic at the deadline).
    async fn until(&mut self, subject: &str) {
        self.until_key(subject).await;
    }

    /// Take events until one with `key` (see `key`) has arrived (or panic at the deadline).
    async fn until_key(&mut self, subject: &str) {
        let end = Instant::now() + common::DEADLINE;
        while !self.seen.iter().any(|(s, v)| key(s, v) == subject) {
            let left = end.saturating_duration_since(Instant::now());
            let Ok(Some(m)) = tokio::time::timeout(left, self.sub.next()).await else {
                panic!("no {subject} in time; seen: {:#?}", self.seen);
            };
            self.take(m);
        }
    }

    /// Take whatever arrives within `quiet`.
    async fn settle(&mut self, quiet: Duration) {
        while let Ok(Some(m)) = tokio::time::timeout(quiet, self.sub.next()).await {
            self.take(m);
        }
    }

    fn take(&mut self, m: async_nats::Message) {
        let v: Value = serde_json::from_slice(&m.payload)
            .unwrap_or_else(|e| panic!("{}: not JSON: {e}", m.subject));
        self.seen.push((m.subject.to_string(), v));
    }

    fn has(&self, subject: &str) -> bool {
        self.seen.iter().any(|(s, _)| s == subject)
    }
}

/// The next message of pull consumer D (waiting up to 5 s). On its own inbox: the message
/// arrives with its stream subject, which a request's shared inbox would not recognize.
async fn next(nc: &async_nats::Client) -> async_nats::Message {
    let inbox = nc.new_inbox();
    let mut sub = nc.subscribe(inbox.clone()).await.expect("subscribe");
    nc.publish_with_reply(
        "$JS.API.CONSUMER.MSG.NEXT.S.D",
        inbox,
        Bytes::from_static(br#"{"batch":1,"expires":5000000000}"#),
    )
    .await
    .expect("pull");
    tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await
        .expect("a message in time")
        .expect("a message")
}

/// The scenario on the server at `url`: every event it published, and the answer to the
/// consumer with an unreadable `sample_freq`.
async fn scenario(url: &str) -> (Vec<(String, Value)>, Value) {
    let nc = async_nats::connect(url).await.expect("connect");
    let mut ev = Events::new(&nc, "$JS.EVENT.>").await;
    let ok = |r: Value| assert!(r.get("error").is_none(), "{r}");
    ok(api(&nc, "$JS.API.STREAM.CREATE.S", STREAM).await);
    ok(api(&nc, "$JS.API.STREAM.UPDATE.S", STREAM_UPDATE).await);
    let missing = api(&nc, "$JS.API.STREAM.INFO.NOPE", "").await;
    assert_eq!(missing["error"]["err_code"], 10059, "{missing}");
    ok(api(&nc, "$JS.API.CONSUMER.DURABLE.CREATE.S.D", CONSUMER).await);
    let bad = api(&nc, "$JS.API.CONSUMER.DURABLE.CREATE.S.B", BAD_SAMPLING).await;
    for i in 1..=3 {
        ok(api(&nc, "s.x", &format!("m{i}")).await);
    }
    // Message 1 acked, 2 terminated, 3 naked.
    for (verb, event) in [
        ("+ACK", "$JS.EVENT.METRIC.CONSUMER.ACK.S.D"),
        ("+TERM", "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.D"),
        ("-NAK", "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.D"),
    ] {
        let m = next(&nc).await;
        let reply = m.reply.expect("ack subject").to_string();
        nc.publish(reply, Bytes::from_static(verb.as_bytes()))
            .await
            .expect("ack");
        ev.until(event).await;
    }
    // 3 comes back (its second delivery) and is left: past its ack wait, max_deliver 2
    // keeps it from a third, which the next pull request finds.
    let again = next(&nc).await;
    assert_eq!(&again.payload[..], b"m3");
    let max = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.D";
    let end = Instant::now() + common::DEADLINE;
    while !ev.has(max) {
        assert!(Instant::now() < end, "no {max}; seen: {:#?}", ev.seen);
        nc.publish_with_reply(
            "$JS.API.CONSUMER.MSG.NEXT.S.D",
            nc.new_inbox(),
            Bytes::from_static(br#"{"batch":1,"no_wait":true}"#),
        )
        .await
        .expect("pull");
        ev.settle(Duration::from_millis(100)).await;
    }
    ok(api(&nc, "$JS.API.CONSUMER.DELETE.S.D", "").await);
    ok(api(&nc, "$JS.API.STREAM.DELETE.S", "").await);
    // Every event the scenario makes (nats-server sends them from several queues: any
    // order), then a moment for any extra one to show.
    for k in EXPECTED {
        ev.until_key(k).await;
    }
    ev.settle(Duration::from_millis(200)).await;
    (ev.seen, bad)
}

/// The events of the scenario, by `key`.
const EXPECTED: &[&str] = &[
    "$JS.EVENT.ADVISORY.API $JS.API.CONSUMER.DELETE.S.D",
    "$JS.EVENT.ADVISORY.API $JS.API.CONSUMER.DURABLE.CREATE.S.B",
    "$JS.EVENT.ADVISORY.API $JS.API.CONSUMER.DURABLE.CREATE.S.D",
    "$JS.EVENT.ADVISORY.API $JS.API.STREAM.CREATE.S",
    "$JS.EVENT.ADVISORY.API $JS.API.STREAM.DELETE.S",
    "$JS.EVENT.ADVISORY.API $JS.API.STREAM.INFO.NOPE",
    "$JS.EVENT.ADVISORY.API $JS.API.STREAM.UPDATE.S",
    "$JS.EVENT.ADVISORY.CONSUMER.CREATED.S.D",
    "$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.D",
    "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.D",
    "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.S.D",
    "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.S.D",
    "$JS.EVENT.ADVISORY.STREAM.CREATED.S",
    "$JS.EVENT.ADVISORY.STREAM.DELETED.S",
    "$JS.EVENT.ADVISORY.STREAM.UPDATED.S",
    "$JS.EVENT.METRIC.CONSUMER.ACK.S.D",
];

/// An event's subject, and for an API audit the request's subject after it.
fn key(subject: &str, v: &Value) -> String {
    match v["subject"].as_str() {
        Some(api) if subject == "$JS.EVENT.ADVISORY.API" => format!("{subject} {api}"),
        _ => subject.to_string(),
    }
}

/// Events by `key`, in arrival order.
fn by_key(events: &[(String, Value)]) -> BTreeMap<String, Vec<Value>> {
    let mut m: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (s, v) in events {
        m.entry(key(s, v)).or_default().push(v.clone());
    }
    m
}

/// The fields whose values must be the same on both servers.
const SAME_VALUES: &[&str] = &[
    "type",
    "stream",
    "consumer",
    "action",
    "consumer_seq",
    "stream_seq",
    "deliveries",
    "subject",
    "request",
];

#[tokio::test]
async fn natsd_publishes_the_advisories_nats_server_publishes() {
    let dir = common::js_dir("advisories-ns");
    let go = natsserver::launch(
        &[
            "-js".into(),
            "-sd".into(),
            dir.to_string_lossy().into_owned(),
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            "-1".into(),
        ],
        Wait {
            client: true,
            ..Wait::READY
        },
    );
    let (theirs, their_bad) = scenario(&format!("nats://{}", go.client)).await;
    drop(go);
    let (srv, nc, our_dir) = common::start_js("advisories").await;
    drop(nc);
    let (ours, our_bad) = scenario(&srv.client_url()).await;

    // The consumer nats-server 2.9.10 cannot sample is refused alike.
    assert_eq!(our_bad["error"], their_bad["error"]);
    assert_eq!(
        our_bad["error"]["description"],
        "failed to parse consumer sampling configuration: strconv.Atoi: parsing \"5%\": invalid syntax"
    );

    let (t, o) = (by_key(&theirs), by_key(&ours));
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        EXPECTED,
        "nats-server: {theirs:#?}"
    );
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        o.keys().collect::<Vec<_>>(),
        "nats-server: {theirs:#?}\nnatsd: {ours:#?}"
    );
    let mut errs = Vec::new();
    for (key, tv) in &t {
        let ov = &o[key];
        assert_eq!(tv.len(), ov.len(), "{key}: {tv:#?} / {ov:#?}");
        for (a, b) in tv.iter().zip(ov) {
            // natsd does not know a client's RTT (nats-server leaves out a zero one).
            same_shape(key, a, b, &["rtt"], true, &mut errs);
            for f in SAME_VALUES {
                if a.get(*f) != b.get(*f) {
                    errs.push(format!(
                        "{key}: {f}: nats-server {}, natsd {}",
                        a[*f], b[*f]
                    ));
                }
            }
            if let (Some(ra), Some(rb)) = (a["response"].as_str(), b["response"].as_str()) {
                let (ra, rb): (Value, Value) = (
                    serde_json::from_str(ra).expect("JSON response"),
                    serde_json::from_str(rb).expect("JSON response"),
                );
                if ra["type"] != rb["type"] || ra.get("error") != rb.get("error") {
                    errs.push(format!("{key}: response {ra} / {rb}"));
                }
            }
        }
    }
    assert!(errs.is_empty(), "{errs:#?}");

    // natsd's own values, read directly.
    let one = |k: &str| o[k][0].clone();
    let created = one("$JS.EVENT.ADVISORY.STREAM.CREATED.S");
    assert_eq!(
        created["type"],
        "io.nats.jetstream.advisory.v1.stream_action"
    );
    assert_eq!(created["id"].as_str().map(str::len), Some(22));
    assert!(created["timestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert!(created.get("domain").is_none(), "{created}");
    assert_eq!(
        one("$JS.EVENT.ADVISORY.STREAM.UPDATED.S")["action"],
        "modify"
    );
    let audit = one("$JS.EVENT.ADVISORY.API $JS.API.STREAM.CREATE.S");
    assert_eq!(audit["request"], STREAM);
    assert_eq!(audit["client"]["acc"], "$G");
    let response: Value =
        serde_json::from_str(audit["response"].as_str().expect("response")).expect("JSON");
    assert_eq!(response["did_create"], true);
    // No request body, no `request`.
    let del = one("$JS.EVENT.ADVISORY.API $JS.API.STREAM.DELETE.S");
    assert!(del.get("request").is_none(), "{del}");
    let metric = one("$JS.EVENT.METRIC.CONSUMER.ACK.S.D");
    assert_eq!(
        (
            &metric["consumer_seq"],
            &metric["stream_seq"],
            &metric["deliveries"]
        ),
        (&1.into(), &1.into(), &1.into())
    );
    assert!(
        metric["ack_time"].as_i64().is_some_and(|t| t > 0),
        "{metric}"
    );
    let max = one("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.D");
    assert_eq!(
        (&max["stream_seq"], &max["deliveries"]),
        (&3.into(), &2.into())
    );
    srv.shutdown().await;
    for d in [dir, our_dir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[tokio::test]
async fn advisories_name_the_domain() {
    let dir = common::js_dir("advisories-domain");
    let srv = common::start(natsd::Options {
        jetstream: Some(natsd::config::JetStreamOpts {
            store_dir: Some(dir.clone()),
            domain: Some("hub".into()),
            ..Default::default()
        }),
        ..natsd::Options::local()
    })
    .await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let mut ev = Events::new(&nc, "$JS.EVENT.>").await;
    let r = api(&nc, "$JS.hub.API.STREAM.CREATE.S", STREAM).await;
    assert!(r.get("error").is_none(), "{r}");
    ev.until("$JS.EVENT.ADVISORY.STREAM.CREATED.S").await;
    // The audit names the request as `$JS.API.…`, as nats-server 2.9.10 does.
    ev.until_key("$JS.EVENT.ADVISORY.API $JS.API.STREAM.CREATE.S")
        .await;
    for (s, v) in &ev.seen {
        assert_eq!(v["domain"], "hub", "{s}: {v}");
    }
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn an_inactive_ephemeral_is_announced_deleted() {
    let (srv, nc, dir) = common::start_js("advisories-inactive").await;
    let mut ev = Events::new(&nc, "$JS.EVENT.ADVISORY.CONSUMER.>").await;
    let r = api(&nc, "$JS.API.STREAM.CREATE.S", STREAM).await;
    assert!(r.get("error").is_none(), "{r}");
    let c = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.S",
        r#"{"stream_name":"S","config":{"ack_policy":"explicit","inactive_threshold":200000000}}"#,
    )
    .await;
    let name = c["name"].as_str().expect("name").to_string();
    ev.until(&format!("$JS.EVENT.ADVISORY.CONSUMER.CREATED.S.{name}"))
        .await;
    ev.until(&format!("$JS.EVENT.ADVISORY.CONSUMER.DELETED.S.{name}"))
        .await;
    let (_, gone) = ev.seen.last().expect("the deletion");
    assert_eq!(
        (&gone["stream"], &gone["consumer"], &gone["action"]),
        (&"S".into(), &name.clone().into(), &"delete".into())
    );
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A stream a template makes is announced with the template's name, when created and when
/// deleted with the template (nats-server 2.9.10's `"template":"T"`).
#[tokio::test]
async fn template_streams_are_announced_with_their_template() {
    let (srv, nc, dir) = common::start_js("advisories-template").await;
    let mut ev = Events::new(&nc, "$JS.EVENT.ADVISORY.STREAM.>").await;
    let t = api(
        &nc,
        "$JS.API.STREAM.TEMPLATE.CREATE.T",
        r#"{"name":"T","config":{"subjects":["t.*"],"storage":"memory"},"max_streams":3}"#,
    )
    .await;
    assert!(t.get("error").is_none(), "{t}");
    let a = api(&nc, "t.a", "x").await;
    assert_eq!(a["stream"], "t_a", "{a}");
    let d = api(&nc, "$JS.API.STREAM.TEMPLATE.DELETE.T", "").await;
    assert_eq!(d["success"], true, "{d}");
    ev.until("$JS.EVENT.ADVISORY.STREAM.DELETED.t_a").await;
    let actions: Vec<(&str, &Value, &Value)> = ev
        .seen
        .iter()
        .map(|(s, v)| (s.as_str(), &v["action"], &v["template"]))
        .collect();
    assert_eq!(
        actions,
        [
            (
                "$JS.EVENT.ADVISORY.STREAM.CREATED.t_a",
                &"create".into(),
                &"T".into()
            ),
            (
                "$JS.EVENT.ADVISORY.STREAM.DELETED.t_a",
                &"delete".into(),
                &"T".into()
            ),
        ]
    );
    srv.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
