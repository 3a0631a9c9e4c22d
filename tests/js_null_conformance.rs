//! Every `$JS.API` request type replayed with its optional fields absent, `null`, and set,
//! against natsd, nats-server 2.15.1 and 2.9.10 (issue 15). Go's JSON decoder takes `null` as
//! "leave the field alone", so the new Python client's `{"subjects_filter": null, …}` works on
//! nats-server; natsd answered 10025 "invalid JSON". The answers' outcomes (ok, or the error
//! code; for pulls and direct gets the message or status) must match on all three, and the
//! answers' JSON must have 2.9.10's shape.

mod common;

use common::jsref::{self, Ref};
use common::natsserver::same_shape;
use futures::StreamExt;
use natsd::jetstream::types::ENUM_FIELDS;
use serde_json::{json, Map, Value};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Absent,
    Null,
    Present,
}

/// An optional field: its name and the value it gets when present (`None`: only absent or
/// null, because any value would change what the request means).
type Opt = (&'static str, Option<Value>);

fn body(required: Value, opts: &[Opt], v: Variant) -> Value {
    let mut m: Map<String, Value> = match required {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (k, val) in opts {
        match v {
            Variant::Absent => {}
            // nats-server's enum fields refuse null (`null_enums_are_invalid_json`).
            Variant::Null if ENUM_FIELDS.contains(k) => {}
            Variant::Null => {
                m.insert(k.to_string(), Value::Null);
            }
            Variant::Present => {
                if let Some(val) = val {
                    m.insert(k.to_string(), val.clone());
                }
            }
        }
    }
    Value::Object(m)
}

/// What one request got: its subject and outcome, and the JSON answer (if any).
struct Answer {
    what: String,
    outcome: String,
    json: Option<Value>,
}

fn outcome_of(v: &Value) -> String {
    match v.get("error") {
        Some(e) => format!("error {}", e["err_code"]),
        None => "ok".to_string(),
    }
}

async fn request(nc: &async_nats::Client, subject: &str, payload: String) -> Option<Value> {
    let fut = nc.request(subject.to_string(), payload.into());
    match tokio::time::timeout(Duration::from_secs(5), fut).await {
        Ok(Ok(m)) => serde_json::from_slice(&m.payload).ok(),
        _ => None,
    }
}

/// The first message on `inbox` after publishing `payload` to `subject`: the delivered
/// message's subject or the status code.
async fn first_reply(
    nc: &async_nats::Client,
    subject: &str,
    inbox: &str,
    payload: String,
) -> String {
    let mut sub = nc.subscribe(inbox.to_string()).await.expect("sub");
    nc.publish_with_reply(subject.to_string(), inbox.to_string(), payload.into())
        .await
        .expect("publish");
    let got = tokio::time::timeout(Duration::from_secs(5), sub.next()).await;
    match got {
        Ok(Some(m)) => match m.status {
            Some(s) => format!("status {}", s.as_u16()),
            None => {
                let h = m.headers.as_ref().and_then(|h| h.get("Nats-Subject"));
                format!("msg {}", h.map_or(m.subject.to_string(), |s| s.to_string()))
            }
        },
        _ => "nothing".to_string(),
    }
}

/// The whole API replayed with one variant on one server.
async fn replay(r: &Ref, v: Variant) -> Vec<Answer> {
    let nc = r.client(None).await;
    let n = format!("{v:?}").to_lowercase();
    let (s, c) = (format!("S{n}"), format!("C{n}"));
    let subj = format!("{n}.>");
    let mut out = Vec::new();
    macro_rules! api {
        ($subject:expr, $required:expr, $opts:expr) => {{
            let subject: String = $subject;
            let b = body($required, $opts, v);
            let json = request(&nc, &subject, b.to_string()).await;
            let outcome = json.as_ref().map_or("no answer".to_string(), outcome_of);
            out.push(Answer {
                what: subject.replace(&n, "X"),
                outcome,
                json,
            });
        }};
    }
    let stream_opts: Vec<Opt> = vec![
        ("description", Some(json!("d"))),
        ("retention", Some(json!("limits"))),
        ("max_consumers", Some(json!(-1))),
        ("max_msgs", Some(json!(-1))),
        ("max_bytes", Some(json!(-1))),
        ("max_age", Some(json!(0))),
        ("max_msgs_per_subject", Some(json!(-1))),
        ("max_msg_size", Some(json!(-1))),
        ("discard", Some(json!("old"))),
        // 2.9.10 cannot snapshot memory streams (2.15.1 and natsd can).
        ("storage", Some(json!("file"))),
        ("num_replicas", Some(json!(1))),
        ("no_ack", Some(json!(false))),
        ("duplicate_window", Some(json!(120_000_000_000i64))),
        ("placement", None),
        ("mirror", None),
        ("sources", None),
        (
            "republish",
            Some(json!({"src": format!("{n}.>"), "dest": format!("rp{n}.>")})),
        ),
        ("mirror_direct", Some(json!(false))),
        ("discard_new_per_subject", Some(json!(false))),
        ("sealed", Some(json!(false))),
        ("deny_delete", Some(json!(false))),
        ("deny_purge", Some(json!(false))),
        ("allow_rollup_hdrs", Some(json!(true))),
    ];
    let stream_req = json!({"name": s, "subjects": [subj], "allow_direct": true});
    api!(
        format!("$JS.API.STREAM.CREATE.{s}"),
        stream_req.clone(),
        &stream_opts
    );
    api!(
        format!("$JS.API.STREAM.UPDATE.{s}"),
        stream_req.clone(),
        &stream_opts
    );
    for i in 1..=4 {
        api!(format!("{n}.{i}"), json!({}), &[]);
    }
    api!("$JS.API.INFO".to_string(), json!({}), &[]);
    api!(
        format!("$JS.API.STREAM.INFO.{s}"),
        json!({}),
        &[
            ("subjects_filter", Some(json!(">"))),
            ("deleted_details", Some(json!(true))),
            ("offset", Some(json!(0))),
        ]
    );
    let list_opts: &[Opt] = &[("offset", Some(json!(0))), ("subject", Some(json!(subj)))];
    api!("$JS.API.STREAM.NAMES".to_string(), json!({}), list_opts);
    api!("$JS.API.STREAM.LIST".to_string(), json!({}), list_opts);
    api!(
        format!("$JS.API.STREAM.MSG.GET.{s}"),
        json!({"seq": 1}),
        &[("last_by_subj", None), ("next_by_subj", None)]
    );
    api!(
        format!("$JS.API.STREAM.MSG.GET.{s}"),
        json!({"last_by_subj": format!("{n}.2")}),
        &[("seq", None), ("next_by_subj", None)]
    );
    let consumer_opts: Vec<Opt> = vec![
        ("name", Some(json!(c))),
        ("description", Some(json!("d"))),
        ("deliver_policy", Some(json!("all"))),
        ("opt_start_seq", None),
        ("opt_start_time", None),
        ("ack_policy", Some(json!("explicit"))),
        ("ack_wait", Some(json!(30_000_000_000i64))),
        ("max_deliver", Some(json!(-1))),
        ("backoff", None),
        ("filter_subject", Some(json!(subj))),
        ("replay_policy", Some(json!("instant"))),
        ("rate_limit_bps", None),
        ("sample_freq", None),
        ("max_waiting", Some(json!(512))),
        ("max_ack_pending", Some(json!(1000))),
        ("flow_control", None),
        ("idle_heartbeat", None),
        ("headers_only", Some(json!(false))),
        ("max_batch", Some(json!(0))),
        ("max_expires", Some(json!(0))),
        ("max_bytes", Some(json!(0))),
        ("inactive_threshold", None),
        ("num_replicas", Some(json!(0))),
        ("mem_storage", Some(json!(false))),
        ("deliver_subject", None),
        ("deliver_group", None),
    ];
    let con = body(json!({"durable_name": c}), &consumer_opts, v);
    api!(
        format!("$JS.API.CONSUMER.CREATE.{s}.{c}"),
        json!({"stream_name": s, "config": con}),
        &[]
    );
    api!(
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{s}.{c}"),
        json!({"stream_name": s, "config": con}),
        &[]
    );
    let eph = body(json!({"ack_policy": "explicit"}), &consumer_opts[2..], v);
    api!(
        format!("$JS.API.CONSUMER.CREATE.{s}"),
        json!({"stream_name": s, "config": eph}),
        &[]
    );
    api!(format!("$JS.API.CONSUMER.INFO.{s}.{c}"), json!({}), &[]);
    let offset: &[Opt] = &[("offset", Some(json!(0)))];
    api!(format!("$JS.API.CONSUMER.NAMES.{s}"), json!({}), offset);
    api!(format!("$JS.API.CONSUMER.LIST.{s}"), json!({}), offset);
    let next = body(
        json!({}),
        &[
            ("batch", Some(json!(1))),
            ("expires", Some(json!(1_000_000_000))),
            ("no_wait", Some(json!(true))),
            ("max_bytes", Some(json!(100_000))),
            ("idle_heartbeat", None),
        ],
        v,
    );
    let got = first_reply(
        &nc,
        &format!("$JS.API.CONSUMER.MSG.NEXT.{s}.{c}"),
        &format!("in.{n}"),
        next.to_string(),
    )
    .await;
    out.push(Answer {
        what: "CONSUMER.MSG.NEXT".into(),
        outcome: got,
        json: None,
    });
    let get = body(
        json!({"seq": 2}),
        &[("last_by_subj", None), ("next_by_subj", None)],
        v,
    );
    let got = first_reply(
        &nc,
        &format!("$JS.API.DIRECT.GET.{s}"),
        &format!("dg.{n}"),
        get.to_string(),
    )
    .await;
    out.push(Answer {
        what: "DIRECT.GET".into(),
        outcome: got,
        json: None,
    });
    api!(
        format!("$JS.API.STREAM.MSG.DELETE.{s}"),
        json!({"seq": 1}),
        &[("no_erase", Some(json!(true)))]
    );
    api!(
        format!("$JS.API.STREAM.PURGE.{s}"),
        json!({}),
        &[
            ("filter", Some(json!(format!("{n}.2")))),
            ("seq", None),
            ("keep", Some(json!(0))),
        ]
    );
    api!(
        format!("$JS.API.STREAM.SNAPSHOT.{s}"),
        json!({"deliver_subject": format!("snap.{n}")}),
        &[
            ("no_consumers", Some(json!(true))),
            ("chunk_size", Some(json!(65536))),
            ("jsck", Some(json!(false))),
        ]
    );
    api!(format!("$JS.API.CONSUMER.DELETE.{s}.{c}"), json!({}), &[]);
    api!(format!("$JS.API.STREAM.DELETE.{s}"), json!({}), &[]);
    let restore_cfg = json!({"name": format!("R{n}"), "subjects": [format!("r{n}")]});
    api!(
        format!("$JS.API.STREAM.RESTORE.R{n}"),
        json!({"config": restore_cfg}),
        &[("state", None)]
    );
    out
}

#[tokio::test]
async fn every_request_takes_null_as_absent() {
    let refs = jsref::each("nulls", "").await;
    assert!(refs[0].is_natsd());
    let mut errs = Vec::new();
    let mut absent: Vec<String> = Vec::new();
    for v in [Variant::Absent, Variant::Null, Variant::Present] {
        let mut runs = Vec::new();
        for r in &refs {
            runs.push((r.name, replay(r, v).await));
        }
        let (ours, theirs) = runs.split_first().expect("natsd first");
        for (name, answers) in theirs {
            for (o, t) in ours.1.iter().zip(answers) {
                assert_eq!(o.what, t.what);
                if o.outcome != t.outcome {
                    errs.push(format!(
                        "{v:?} {}: natsd {}, {name} {} ({:?}; natsd {:?})",
                        o.what, o.outcome, t.outcome, t.json, o.json
                    ));
                }
                // natsd's JSON follows 2.9.10's; 2.15.1 adds fields. Lists come in another
                // order (an ephemeral's random name).
                let shaped = name.contains("2.9.10") && !o.what.contains("CONSUMER.LIST");
                if let (true, Some(oj), Some(tj)) = (shaped, &o.json, &t.json) {
                    same_shape(&format!("{v:?} {}", o.what), tj, oj, &[], false, &mut errs);
                }
            }
        }
        let n = format!("{v:?}").to_lowercase();
        let outcomes: Vec<String> = ours.1.iter().map(|a| a.outcome.replace(&n, "X")).collect();
        match v {
            Variant::Absent => absent = outcomes,
            // On natsd itself: null means absent.
            Variant::Null if outcomes != absent => {
                errs.push(format!("natsd: null {outcomes:?}, absent {absent:?}"));
            }
            _ => {}
        }
    }
    for r in refs {
        r.stop().await;
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// A `null` in a field of one of nats-server's enum types is invalid JSON (10025) there, in
/// stream and consumer configurations alike.
#[tokio::test]
async fn null_enums_are_invalid_json() {
    let refs = jsref::each("nullenum", "").await;
    for r in &refs {
        let nc = r.client(None).await;
        for field in ["retention", "discard", "storage"] {
            let mut cfg = json!({"name": "E", "subjects": ["e"]});
            cfg[field] = Value::Null;
            let v = request(&nc, "$JS.API.STREAM.CREATE.E", cfg.to_string()).await;
            let v = v.unwrap_or_else(|| panic!("{}: no answer", r.name));
            assert_eq!(v["error"]["err_code"], 10025, "{} {field}: {v}", r.name);
        }
        let cfg = json!({"name": "E", "subjects": ["e"], "storage": "memory"});
        request(&nc, "$JS.API.STREAM.CREATE.E", cfg.to_string()).await;
        for field in ["deliver_policy", "ack_policy", "replay_policy"] {
            let mut con = json!({"durable_name": "D"});
            con[field] = Value::Null;
            let req = json!({"stream_name": "E", "config": con});
            let v = request(&nc, "$JS.API.CONSUMER.CREATE.E.D", req.to_string()).await;
            let v = v.unwrap_or_else(|| panic!("{}: no answer", r.name));
            assert_eq!(v["error"]["err_code"], 10025, "{} {field}: {v}", r.name);
        }
    }
    for r in refs {
        r.stop().await;
    }
}
