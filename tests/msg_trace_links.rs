//! Message tracing through account imports (`si`, `se` entries, `allow_trace`), JetStream
//! (`js`), compressed events (`Accept-Encoding`) and W3C `traceparent` with an account's
//! `msg_trace` destination: the same scenarios run against natsd and nats-server 2.15.1 side by
//! side. Observed wire and JSON: docs/nats-server-behaviour.md, section "Message tracing".

mod common;

use common::cluster::{node_opts, route_port};
use common::natsserver;
use common::{start, until_delivered, Raw};
use serde_json::Value;
use std::net::SocketAddr;

/// Account A exports services (one with `allow_trace`) and streams; B imports them (one
/// stream import with `allow_trace`).
const ACCOUNTS: &str = r#"
accounts {
  A { users [{user: a, password: a}],
      exports [ {service: "req.>"}, {service: "atr.>", allow_trace: true},
                {stream: "ev.>"}, {stream: "tev.>"} ] }
  B { users [{user: b, password: b}],
      imports [ {service: {account: A, subject: "req.x"}, to: "local.x"},
                {service: {account: A, subject: "atr.x"}, to: "alocal.x"},
                {stream: {account: A, subject: "ev.>"}, prefix: "p"},
                {stream: {account: A, subject: "tev.>"}, prefix: "t", allow_trace: true} ] }
}
"#;

/// `HPUB subject [reply]` with `headers` and payload `hello`.
async fn hpub(c: &mut Raw, subject: &str, reply: Option<&str>, headers: &[(&str, &str)]) {
    let mut h = String::from("NATS/1.0\r\n");
    for (k, v) in headers {
        h.push_str(&format!("{k}: {v}\r\n"));
    }
    h.push_str("\r\n");
    let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
    c.send(&format!(
        "HPUB {subject}{reply} {} {}\r\n{h}hello\r\n",
        h.len(),
        h.len() + 5
    ))
    .await;
}

/// A client logged in as `user` (password the same) named `name`.
async fn login(addr: SocketAddr, user: &str, name: &str) -> Raw {
    Raw::connected_at(
        addr,
        &format!(
            r#"{{"verbose":false,"headers":true,"no_responders":true,"protocol":1,"name":"{name}","user":"{user}","pass":"{user}"}}"#
        ),
    )
    .await
}

/// The next trace event on `tracer` (a plain `MSG`).
async fn event(tracer: &mut Raw) -> Value {
    let (_, _, _, p) = tracer.msg().await;
    serde_json::from_slice(&p).expect("event is JSON")
}

/// What an event says, without timestamps, cids and the server: each entry's type and the
/// fields that do not change from run to run.
fn summary(e: &Value) -> Vec<String> {
    e["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|x| {
            let mut o = x.as_object().expect("entry").clone();
            o.remove("ts");
            o.remove("cid");
            serde_json::to_string(&o).unwrap_or_default()
        })
        .collect()
}

/// The trace-import scenarios on the server at `addr` (loaded with [`ACCOUNTS`]): for each,
/// the event's summary and what the subscriber in the other account received (as text).
async fn import_scenarios(addr: SocketAddr) -> Vec<(Vec<String>, Vec<String>)> {
    let mut ta = login(addr, "a", "tracerA").await;
    ta.send("SUB trace.> 1\r\n").await;
    ta.flush().await;
    let mut tb = login(addr, "b", "tracerB").await;
    tb.send("SUB trace.> 1\r\n").await;
    tb.flush().await;
    let mut svc = login(addr, "a", "svcA").await;
    svc.send("SUB req.x 1\r\nSUB atr.x 2\r\n").await;
    svc.flush().await;
    let mut sub = login(addr, "b", "subB").await;
    sub.send("SUB p.ev.> 1\r\nSUB t.tev.> 2\r\n").await;
    sub.flush().await;
    let mut pa = login(addr, "a", "pubA").await;
    let mut pb = login(addr, "b", "pubB").await;
    let only = ("Nats-Trace-Only", "true");
    let mut out = Vec::new();
    for (subject, trace_only) in [
        ("local.x", false),
        ("local.x", true),
        ("alocal.x", false),
        ("alocal.x", true),
        ("ev.1", false),
        ("ev.1", true),
        ("tev.1", false),
        ("tev.1", true),
    ] {
        let (p, tracer, got) = if subject.contains("local") {
            (&mut pb, &mut tb, &mut svc)
        } else {
            (&mut pa, &mut ta, &mut sub)
        };
        let mut h = vec![("Nats-Trace-Dest", "trace.x")];
        if trace_only {
            h.push(only);
        }
        hpub(p, subject, Some("inbox"), &h).await;
        let e = event(tracer).await;
        out.push((summary(&e), delivered(&got.sync().await)));
    }
    out
}

/// What a subscriber received, comparable across servers: each `HMSG` line's subject and sid,
/// and its header lines but `Nats-Request-Info` (natsd's has no `rtt`), random `_R_.`
/// subjects written as `_R_`.
fn delivered(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in text.split("\r\n") {
        if l.starts_with("HMSG ") {
            out.push(l.split(' ').take(3).collect::<Vec<_>>().join(" "));
        } else if l.contains(": ") && !l.starts_with("Nats-Request-Info") {
            match l.split_once(": _R_.") {
                Some((k, _)) => out.push(format!("{k}: _R_")),
                None => out.push(l.to_string()),
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_trace_as_nats_server_215_does() {
    let s = start(common::conf_opts(ACCOUNTS)).await;
    let go = natsserver::standalone_conf_215("msg_trace_links", "imports", ACCOUNTS);
    let ours = import_scenarios(s.client_addr()).await;
    let theirs = import_scenarios(go.client).await;
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(o.0, t.0, "scenario {i}: entries");
    }
    // The entries as nats-server 2.15.1 writes them.
    let si = r#"{"acc":"A","from":"local.x","to":"req.x","type":"si"}"#;
    assert_eq!(ours[0].0[1], si);
    assert_eq!(ours[0].0.len(), 2, "no eg without allow_trace");
    assert_eq!(ours[1].0.len(), 2);
    let eg = r#"{"acc":"A","kind":0,"name":"svcA","sub":"atr.x","type":"eg"}"#;
    assert_eq!(ours[2].0[2], eg, "allow_trace: traced on into A");
    assert_eq!(ours[3].0[2], eg);
    let se = r#"{"acc":"B","to":"p.ev.1","type":"se"}"#;
    assert_eq!((ours[4].0[1].as_str(), ours[4].0.len()), (se, 2));
    let eg = r#"{"acc":"B","kind":0,"name":"subB","sub":"tev.>","type":"eg"}"#;
    assert_eq!(ours[6].0[2], eg);
    assert_eq!(ours[7].0[2], eg);
    // What the service and the stream subscriber got: nothing for trace-only; the request
    // with its trace destination disabled, or (allow_trace) a response mapping to it.
    for i in 0..8 {
        assert_eq!(ours[i].1, theirs[i].1, "scenario {i}: delivered");
    }
    for i in [1, 3, 5, 7] {
        assert!(ours[i].1.is_empty(), "trace-only delivered: {:?}", ours[i]);
    }
    assert_eq!(
        ours[0].1,
        ["HMSG req.x 1", "Nats-Trace-Dest: trace disabled"]
    );
    assert_eq!(ours[2].1, ["HMSG atr.x 2", "Nats-Trace-Dest: _R_"]);
    assert_eq!(ours[4].1, ["HMSG p.ev.1 1", "Nats-Trace-Dest: trace.x"]);
    s.shutdown().await;
}

/// A natsd node with [`ACCOUNTS`] in cluster `C1`.
fn linked_node(name: &str, seed: Option<u16>) -> natsd::Options {
    let n = node_opts(name, seed);
    natsd::Options {
        server_name: n.server_name,
        cluster: n.cluster,
        ..common::conf_opts(ACCOUNTS)
    }
}

/// With `allow_trace`, a request traced across a service import goes on traced in the
/// exporting account: the server of the service (natsd, or nats-server 2.15.1) reports to a
/// response mapping that brings its event back to the destination in the importing account.
async fn remote_service_reports_back(svc_addr: SocketAddr, n0: &natsd::Server, name: &str) {
    let mut tb = login(n0.client_addr(), "b", "tracerB").await;
    tb.send("SUB trace.> 1\r\n").await;
    tb.flush().await;
    let mut svc = login(svc_addr, "a", "svcA").await;
    svc.send("SUB atr.x 2\r\n").await;
    svc.flush().await;
    let mut pa = login(n0.client_addr(), "a", "pubA").await;
    until_delivered(&mut pa, &mut svc, "atr.x").await;
    let mut pb = login(n0.client_addr(), "b", "pubB").await;
    hpub(&mut pb, "alocal.x", None, &[("Nats-Trace-Dest", "trace.b")]).await;
    let mut e = [event(&mut tb).await, event(&mut tb).await];
    e.sort_by_key(|e| e["server"]["name"] != "n0");
    let (here, there) = (&e[0], &e[1]);
    let s = summary(here);
    assert_eq!(
        s[1],
        r#"{"acc":"A","from":"alocal.x","to":"atr.x","type":"si"}"#
    );
    assert_eq!(
        s[2],
        format!(r#"{{"hop":"1","kind":1,"name":"{name}","type":"eg"}}"#)
    );
    assert_eq!(there["server"]["name"], name);
    let s = summary(there);
    assert_eq!(
        s[0],
        r#"{"acc":"A","kind":1,"name":"n0","subj":"atr.x","type":"in"}"#
    );
    assert_eq!(
        s[1],
        r#"{"kind":0,"name":"svcA","sub":"atr.x","type":"eg"}"#
    );
    let got = svc.sync().await;
    assert!(got.contains("Nats-Trace-Dest: _R_."), "{got}");
    assert!(got.contains("Nats-Trace-Hop: 1\r\n"), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_trace_service_on_another_node_reports_back() {
    let n0 = start(linked_node("n0", None)).await;
    let n1 = start(linked_node("n1", Some(route_port(&n0)))).await;
    remote_service_reports_back(n1.client_addr(), &n0, "n1").await;
    n1.shutdown().await;
    n0.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_trace_service_on_nats_server_215_reports_back() {
    let bin = natsserver::assert_installed_215();
    let n0 = start(linked_node("n0", None)).await;
    let conf = common::mixed::member_config("go", Some(route_port(&n0)), ACCOUNTS, "");
    let go = common::mixed::go_conf(&bin, "go", &conf);
    remote_service_reports_back(go.client(), &n0, "go").await;
    n0.shutdown().await;
}

/// The JetStream scenarios on the server at `addr`: each traced publish's entries, the
/// messages stream `S` holds after them, and the trace header of its first message.
async fn js_scenarios(addr: SocketAddr) -> (Vec<Vec<String>>, u64, String) {
    use async_nats::jetstream::stream::{Config, DiscardPolicy, RetentionPolicy};
    let nc = async_nats::connect(format!("nats://{addr}"))
        .await
        .expect("connect");
    let js = async_nats::jetstream::new(nc.clone());
    for cfg in [
        Config {
            name: "S".into(),
            subjects: vec!["js.>".into()],
            ..Default::default()
        },
        Config {
            name: "W".into(),
            subjects: vec!["wq.>".into()],
            retention: RetentionPolicy::Interest,
            ..Default::default()
        },
        Config {
            name: "M".into(),
            subjects: vec!["mx.>".into()],
            max_messages_per_subject: 1,
            discard: DiscardPolicy::New,
            discard_new_per_subject: true,
            ..Default::default()
        },
    ] {
        js.create_stream(cfg).await.expect("stream");
    }
    let mut tracer = Raw::client_at(addr).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut p = Raw::client_at(addr).await;
    p.send("SUB inbox 1\r\n").await;
    let dest = ("Nats-Trace-Dest", "trace.a");
    let mut out = Vec::new();
    for (subject, extra) in [
        ("js.1", None),
        ("js.2", Some(("Nats-Trace-Only", "true"))),
        ("wq.1", None),
        ("mx.1", None),
        ("mx.1", None),
        ("js.3", Some(("Nats-Expected-Last-Sequence", "99"))),
        ("js.4", Some(("Nats-Msg-Id", "x"))),
        ("js.4", Some(("Nats-Msg-Id", "x"))),
        ("js.5", Some(("Nats-Expected-Last-Msg-Id", "y"))),
    ] {
        let h: Vec<_> = [dest].into_iter().chain(extra).collect();
        hpub(&mut p, subject, Some("inbox"), &h).await;
        out.push(summary(&event(&mut tracer).await));
    }
    let mut s = js.get_stream("S").await.expect("S");
    let n = s.info().await.expect("info").state.messages;
    let first = s.get_raw_message(1).await.expect("seq 1");
    let h = first
        .headers
        .get("Nats-Trace-Dest")
        .map(|v| v.to_string())
        .unwrap_or_default();
    (out, n, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_adds_the_js_entry_as_nats_server_215_does() {
    let (s, _nc, js_dir) = common::start_js("msg_trace_js").await;
    let dir = common::binary::tmp_dir("msg_trace_links", "js");
    let sd = dir.to_string_lossy();
    let go = natsserver::standalone_215(&["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", &sd]);
    let ours = js_scenarios(s.client_addr()).await;
    let theirs = js_scenarios(go.client).await;
    assert_eq!(ours, theirs);
    let js = |i: usize| ours.0[i][1].clone();
    assert_eq!(js(0), r#"{"stream":"S","subject":"js.1","type":"js"}"#);
    // Trace-only: checked, not stored (S holds js.1 and js.4 only).
    assert_eq!(js(1), r#"{"stream":"S","subject":"js.2","type":"js"}"#);
    assert_eq!(ours.1, 2);
    assert_eq!(
        js(2),
        r#"{"nointerest":true,"stream":"W","subject":"wq.1","type":"js"}"#
    );
    assert_eq!(
        js(4),
        r#"{"error":"maximum messages per subject exceeded","stream":"M","subject":"mx.1","type":"js"}"#
    );
    assert_eq!(
        js(5),
        r#"{"error":"last sequence mismatch: 99 vs 1","stream":"S","type":"js"}"#
    );
    assert_eq!(
        js(7),
        r#"{"error":"msgid is duplicate","stream":"S","type":"js"}"#
    );
    // A stored traced message's deliveries are not traced.
    assert_eq!(ours.2, "trace disabled");
    s.shutdown().await;
    drop(go);
    let _ = std::fs::remove_dir_all(js_dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// The next `HMSG` on `c`: its header and body.
async fn hmsg(c: &mut Raw) -> (String, Vec<u8>) {
    let l = c.next_non_ping().await;
    let parts: Vec<&str> = l.split(' ').collect();
    assert_eq!(parts[0], "HMSG", "{l}");
    let n = |i: usize| parts[parts.len() - i].parse::<usize>().expect("size");
    let (hlen, total) = (n(2), n(1));
    let body = c.payload(total).await;
    (
        String::from_utf8_lossy(&body[..hlen]).into_owned(),
        body[hlen..].to_vec(),
    )
}

/// Events for each `Accept-Encoding` on the server at `addr`: the header and the decoded
/// event's entries.
async fn encoded_events(addr: SocketAddr) -> Vec<(String, Vec<String>)> {
    let mut tracer = Raw::client_at(addr).await;
    tracer.send("SUB trace.> 1\r\n").await;
    tracer.flush().await;
    let mut p = Raw::client_at(addr).await;
    let mut out = Vec::new();
    for enc in ["gzip", "snappy", "s2", "br", "GZIP, deflate", "identity"] {
        let h = [("Nats-Trace-Dest", "trace.a"), ("Accept-Encoding", enc)];
        hpub(&mut p, "foo", None, &h).await;
        let (header, body) = hmsg(&mut tracer).await;
        let json = if header.contains("gzip") {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut v)
                .expect("gunzip");
            v
        } else if header.contains("snappy") {
            let mut d = natsd::compress::Decoder::new();
            d.feed(&body);
            let mut v = bytes::BytesMut::new();
            while d.decode(&mut v, usize::MAX).expect("snappy") {}
            v.to_vec()
        } else {
            body
        };
        let e: Value = serde_json::from_slice(&json).expect("event is JSON");
        out.push((header, summary(&e)));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_encoding_compresses_the_event_as_nats_server_215_does() {
    let s = common::start_default().await;
    let go = natsserver::standalone_215(&["-a", "127.0.0.1", "-p", "-1"]);
    let ours = encoded_events(s.client_addr()).await;
    let theirs = encoded_events(go.client).await;
    assert_eq!(ours, theirs);
    let names: Vec<&str> = ours
        .iter()
        .map(|(h, _)| h.trim_end().rsplit(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        ["gzip", "snappy", "snappy", "identity", "gzip", "identity"]
    );
    s.shutdown().await;
}

/// A has a trace destination for `traceparent` messages, B none, C samples 1%.
const TRACEPARENT_ACCOUNTS: &str = r#"
accounts {
  A { users [{user: a, password: a}], msg_trace: { dest: "trace.a", sampling: "100%" } }
  B { users [{user: b, password: b}] }
  C { users [{user: c, password: c}], msg_trace: { dest: "trace.c", sampling: 1 } }
}
"#;

/// For each account and `traceparent`, what the subscriber got and the trace event's entries
/// (none: not traced). Account C's messages are each either traced or delivered with tracing
/// disabled; the outcome is written as `sampled`/`not sampled`.
async fn traceparent_scenarios(addr: SocketAddr) -> Vec<(Vec<String>, Vec<String>)> {
    let id = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331";
    let mut out = Vec::new();
    for u in ["a", "b", "c"] {
        let mut tracer = login(addr, u, "tracer").await;
        tracer.send("SUB trace.> 1\r\n").await;
        tracer.flush().await;
        let mut sub = login(addr, u, "sub").await;
        sub.send("SUB foo 1\r\n").await;
        sub.flush().await;
        let mut p = login(addr, u, "pub").await;
        for (k, flags) in [
            ("traceparent", "01"),
            ("TraceParent", "03"),
            ("traceparent", "00"),
            ("traceparent", "ff"),
        ] {
            let v = format!("{id}-{flags}");
            // Trace-only means nothing to an external trace: delivered.
            hpub(&mut p, "foo", None, &[(k, &v), ("Nats-Trace-Only", "true")]).await;
            // A traced fence: its event comes after this one's, if any (nats-server sends
            // events in order, from one queue).
            hpub(&mut p, "fence", None, &[("Nats-Trace-Dest", "trace.fence")]).await;
            p.flush().await;
            let got = delivered(&sub.sync().await);
            let mut events = Vec::new();
            loop {
                let (subject, _, _, body) = tracer.msg().await;
                if subject == "trace.fence" {
                    break;
                }
                let e: Value = serde_json::from_slice(&body).expect("event");
                events = summary(&e);
            }
            if u == "c" && (flags == "01" || flags == "03") {
                // Traced, or delivered with tracing disabled for the servers downstream.
                let disabled = got.iter().any(|h| h == "Nats-Trace-Dest: trace disabled");
                assert_ne!(disabled, !events.is_empty(), "{got:?} {events:?}");
                let s = if events.is_empty() {
                    "not sampled"
                } else {
                    "sampled"
                };
                out.push((vec![s.to_string()], Vec::new()));
                continue;
            }
            out.push((got, events));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traceparent_is_traced_to_the_account_destination_as_nats_server_215_does() {
    let s = start(common::conf_opts(TRACEPARENT_ACCOUNTS)).await;
    let go =
        natsserver::standalone_conf_215("msg_trace_links", "traceparent", TRACEPARENT_ACCOUNTS);
    let mut ours = traceparent_scenarios(s.client_addr()).await;
    let mut theirs = traceparent_scenarios(go.client).await;
    // Account C samples: which way each went may differ between the two runs.
    for v in [&mut ours, &mut theirs] {
        v.retain(|(got, _)| got.first().is_none_or(|g| !g.contains("sampled")));
    }
    assert_eq!(ours, theirs);
    // A: the sampled ones (01, 03 in any key case) traced to trace.a, and delivered.
    assert_eq!(
        ours[0].1[0],
        r#"{"acc":"A","kind":0,"name":"pub","subj":"foo","type":"in"}"#
    );
    assert_eq!(ours[1].1.len(), 2);
    assert!(ours[2].1.is_empty() && ours[3].1.is_empty());
    assert!(ours.iter().all(|(got, _)| got[0] == "HMSG foo 1"));
    // B has no destination: nothing traced.
    assert!(ours[4..8].iter().all(|(_, e)| e.is_empty()));
    s.shutdown().await;
}
