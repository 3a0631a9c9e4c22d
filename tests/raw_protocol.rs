//! Black-box tests that speak the raw client protocol: INFO shape, +OK/-ERR texts, frames split
//! anywhere, delivery details, and every limit.

mod common;

use common::{http_json, start, start_default, wait_for, Raw};
use natsd::config::User;
use natsd::Options;
use std::time::Duration;

#[tokio::test]
async fn info_has_nats_server_shape() {
    let srv = start(Options {
        server_name: Some("n1".into()),
        ..Options::local()
    })
    .await;
    let (_r, info) = Raw::connect(&srv).await;
    let id = info["server_id"].as_str().expect("server_id");
    assert_eq!(id.len(), 56);
    assert!(id.starts_with('N'));
    assert_eq!(info["server_name"], "n1");
    assert_eq!(info["version"], "2.9.10");
    assert_eq!(info["proto"], 1);
    assert_eq!(info["headers"], true);
    assert_eq!(info["max_payload"], 1048576);
    assert_eq!(info["port"], srv.client_addr().port());
    assert_eq!(info["host"], "127.0.0.1");
    assert!(info["client_id"].as_u64().is_some());
    assert_eq!(info["client_ip"], "127.0.0.1");
    assert!(info.get("auth_required").is_none());
    srv.shutdown().await;
}

#[tokio::test]
async fn verbose_ok_ping_pong_and_case_insensitive_ops() {
    let srv = start_default().await;
    let (mut r, _) = Raw::connect(&srv).await;
    r.send("CONNECT {\"verbose\":true}\r\n").await;
    r.expect("+OK").await;
    r.send("ping\r\n").await;
    r.expect("PONG").await;
    r.send("sub\tfoo   1\r\n").await;
    r.expect("+OK").await;
    r.send("Pub  foo\t5\r\nhello\r\n").await;
    r.expect("+OK").await;
    let (subj, sid, reply, p) = r.msg().await;
    assert_eq!((subj.as_str(), sid.as_str(), reply), ("foo", "1", None));
    assert_eq!(p, b"hello");
    srv.shutdown().await;
}

#[tokio::test]
async fn frames_split_at_every_byte() {
    let srv = start_default().await;
    let mut r = Raw::client(&srv).await;
    let stream =
        b"SUB a.b 7\r\nPUB a.b r.1 3\r\nabc\r\nHPUB a.b 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n";
    for b in stream.iter() {
        r.send_bytes(&[*b]).await;
    }
    let (subj, sid, reply, p) = r.msg().await;
    assert_eq!(subj, "a.b");
    assert_eq!(sid, "7");
    assert_eq!(reply.as_deref(), Some("r.1"));
    assert_eq!(p, b"abc");
    assert_eq!(r.line().await, "HMSG a.b 7 12 14");
    assert_eq!(r.payload(14).await, b"NATS/1.0\r\n\r\nhi");
    r.expect("PONG").await;
    srv.shutdown().await;
}

#[tokio::test]
async fn wildcards_queues_reply_and_echo() {
    let srv = start_default().await;
    let mut r = Raw::client(&srv).await;
    r.send("SUB foo.* 1\r\nSUB foo.> 2\r\nSUB > 3\r\nSUB foo.bar.baz 4\r\n")
        .await;
    r.send("PUB foo.bar reply 2\r\nhi\r\n").await;
    let mut sids = Vec::new();
    for _ in 0..3 {
        let (subj, sid, reply, p) = r.msg().await;
        assert_eq!(subj, "foo.bar");
        assert_eq!(reply.as_deref(), Some("reply"));
        assert_eq!(p, b"hi");
        sids.push(sid);
    }
    sids.sort();
    assert_eq!(sids, ["1", "2", "3"]);
    r.flush().await;

    // echo:false: a client does not receive its own messages.
    let mut quiet = Raw::connected(&srv, r#"{"verbose":false,"echo":false}"#).await;
    quiet.send("SUB e 1\r\nPUB e 1\r\nx\r\n").await;
    assert_eq!(quiet.sync().await, "", "echo:false delivered to self");
    srv.shutdown().await;
}

#[tokio::test]
async fn queue_group_delivers_each_message_once() {
    let srv = start_default().await;
    let mut members = Vec::new();
    for _ in 0..3 {
        let mut m = Raw::client(&srv).await;
        m.send("SUB work grp 1\r\n").await;
        m.flush().await;
        members.push(m);
    }
    let mut p = Raw::client(&srv).await;
    for i in 0..300 {
        p.send(&format!("PUB work {}\r\n{i:03}\r\n", 3)).await;
    }
    p.flush().await;
    let mut total = 0;
    let mut seen = std::collections::HashSet::new();
    for m in &mut members {
        // Everything before our PONG was delivered; count MSG frames in it.
        let text = m.sync().await;
        let n = text.matches("MSG work 1 3").count();
        for chunk in text.split("MSG work 1 3\r\n").skip(1) {
            seen.insert(chunk[..3].to_string());
        }
        assert!(n > 0, "a member got nothing out of 300 messages");
        total += n;
    }
    assert_eq!(total, 300);
    assert_eq!(seen.len(), 300);
    srv.shutdown().await;
}

#[tokio::test]
async fn unsub_with_max_and_duplicate_sid() {
    let srv = start_default().await;
    let mut r = Raw::client(&srv).await;
    r.send("SUB s 1\r\nSUB other 1\r\nUNSUB 1 2\r\n").await;
    for _ in 0..5 {
        r.send("PUB s 1\r\nx\r\n").await;
    }
    r.send("PUB other 1\r\ny\r\n").await;
    let text = r.sync().await;
    assert_eq!(text.matches("MSG s 1 1").count(), 2, "{text}");
    assert_eq!(text.matches("MSG other").count(), 0, "{text}");
    // A max that is not a number removes at once (nats-server).
    r.send("SUB t 5\r\nUNSUB 5 abc\r\nPUB t 1\r\nx\r\n").await;
    assert_eq!(r.sync().await, "");
    // Unknown sid: ignored.
    r.send("UNSUB 99\r\n").await;
    assert_eq!(r.sync().await, "");
    srv.shutdown().await;
}

#[tokio::test]
async fn no_responders_and_headers() {
    let srv = start_default().await;
    let mut r = Raw::client(&srv).await;
    r.send("SUB _INBOX.x 9\r\nPUB nobody _INBOX.x 2\r\nhi\r\n")
        .await;
    assert_eq!(r.line().await, "HMSG _INBOX.x 9 16 16");
    assert_eq!(r.payload(16).await, b"NATS/1.0 503\r\n\r\n");

    // A client without headers support receives only the payload of a message with headers.
    let mut plain = Raw::connected(&srv, r#"{"verbose":false}"#).await;
    plain.send("SUB h 1\r\n").await;
    plain.flush().await;
    r.send("HPUB h 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n")
        .await;
    r.flush().await;
    let (_, _, _, p) = plain.msg().await;
    assert_eq!(p, b"hi");

    // HPUB from a client that did not announce headers: closed (without -ERR, as nats-server).
    plain.send("HPUB h 12 14\r\nNATS/1.0\r\n\r\nhi\r\n").await;
    assert!(plain.closed().await);
    assert!(!String::from_utf8_lossy(&plain.buf).contains("MSG"));

    // no_responders without headers is refused.
    let (mut bad, _) = Raw::connect(&srv).await;
    bad.send("CONNECT {\"verbose\":false,\"no_responders\":true}\r\n")
        .await;
    assert_eq!(
        bad.line().await,
        "-ERR 'no responders requires headers support'"
    );
    assert!(bad.closed().await);
    srv.shutdown().await;
}

async fn expect_err_and_close(srv: &natsd::Server, send: &[u8], err: &str) {
    let mut r = Raw::client(srv).await;
    r.send_bytes(send).await;
    assert_eq!(r.line().await, format!("-ERR '{err}'"));
    assert!(r.closed().await, "connection not closed after {err}");
}

/// nats-server closes on bad sizes and argument counts without an -ERR.
async fn expect_silent_close(srv: &natsd::Server, send: &[u8]) {
    let mut r = Raw::client(srv).await;
    r.send_bytes(send).await;
    assert!(r.closed().await, "connection not closed after {send:?}");
    assert!(
        r.buf.is_empty(),
        "unexpected reply {:?}",
        String::from_utf8_lossy(&r.buf)
    );
}

#[tokio::test]
async fn protocol_errors_close_with_the_right_err() {
    let srv = start_default().await;
    expect_err_and_close(&srv, b"FOO bar\r\n", "Unknown Protocol Operation").await;
    expect_err_and_close(&srv, b"\x00\xff\xfe\r\n", "Unknown Protocol Operation").await;
    expect_silent_close(&srv, b"PUB foo -1\r\n").await;
    expect_silent_close(&srv, b"PUB foo abc\r\n").await;
    expect_silent_close(&srv, b"PUB foo 99999999999999999999999\r\n").await;
    expect_silent_close(&srv, b"PUB foo bar baz 2\r\n").await;
    expect_silent_close(&srv, b"SUB foo\r\n").await;
    expect_silent_close(&srv, b"HPUB foo 14 12\r\n").await;
    expect_err_and_close(&srv, b"PUB foo 2000000\r\n", "Maximum Payload Violation").await;
    expect_err_and_close(
        &srv,
        b"PUB foo 3\r\nhello world\r\n",
        "Unknown Protocol Operation",
    )
    .await;
    // 10 MB control line: refused as soon as it passes the limit, never buffered whole.
    let mut r = Raw::client(&srv).await;
    let mut big = b"PUB ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 10 * 1024 * 1024));
    let _ = tokio::io::AsyncWriteExt::write_all(&mut r.stream, &big).await;
    assert_eq!(r.line().await, "-ERR 'maximum control line exceeded'");
    assert!(r.closed().await);
    // The server keeps serving everyone else.
    let mut ok = Raw::client(&srv).await;
    ok.flush().await;
    srv.shutdown().await;
}

#[tokio::test]
async fn invalid_subjects_get_err_without_close() {
    let srv = start_default().await;
    let mut r = Raw::connected(&srv, r#"{"verbose":false,"pedantic":true}"#).await;
    r.send("SUB foo..bar 1\r\n").await;
    assert_eq!(r.line().await, "-ERR 'Invalid Subject'");
    r.send("PUB foo.* 1\r\nx\r\n").await;
    assert_eq!(r.line().await, "-ERR 'Invalid Publish Subject'");
    r.flush().await;
    srv.shutdown().await;
}

#[tokio::test]
async fn max_subscriptions_and_connections() {
    let srv = start(Options {
        max_subscriptions: 2,
        max_connections: 2,
        ..Options::local()
    })
    .await;
    let mut r = Raw::client(&srv).await;
    r.send("SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n").await;
    assert_eq!(r.line().await, "-ERR 'maximum subscriptions exceeded'");
    r.flush().await;
    let _second = Raw::client(&srv).await;
    let (mut third, _) = Raw::connect(&srv).await;
    assert_eq!(third.line().await, "-ERR 'maximum connections exceeded'");
    assert!(third.closed().await);
    srv.shutdown().await;
}

#[tokio::test]
async fn auth_timeout_and_violation() {
    let srv = start(Options {
        username: Some("u".into()),
        password: Some("p".into()),
        auth_timeout: Duration::from_millis(300),
        ..Options::local()
    })
    .await;
    let (mut r, info) = Raw::connect(&srv).await;
    assert_eq!(info["auth_required"], true);
    assert_eq!(r.line().await, "-ERR 'Authentication Timeout'");
    assert!(r.closed().await);

    let (mut r, _) = Raw::connect(&srv).await;
    r.send("CONNECT {\"user\":\"u\",\"pass\":\"bad\"}\r\n")
        .await;
    assert_eq!(r.line().await, "-ERR 'Authorization Violation'");
    assert!(r.closed().await);

    let (mut r, _) = Raw::connect(&srv).await;
    r.send("PUB foo 1\r\nx\r\n").await;
    assert_eq!(r.line().await, "-ERR 'Authorization Violation'");
    assert!(r.closed().await);

    let mut ok = Raw::connected(&srv, r#"{"verbose":false,"user":"u","pass":"p"}"#).await;
    ok.flush().await;
    srv.shutdown().await;
}

#[tokio::test]
async fn stale_connection_is_closed() {
    let srv = start(Options {
        ping_interval: Duration::from_millis(100),
        ping_max: 2,
        ..Options::local()
    })
    .await;
    let mut r = Raw::connected(&srv, r#"{"verbose":false}"#).await;
    // Never answer: PING, PING, then the stale error.
    assert_eq!(r.line().await, "PING");
    assert_eq!(r.line().await, "PING");
    assert_eq!(r.line().await, "-ERR 'Stale Connection'");
    assert!(r.closed().await);
    // A client that answers stays.
    let mut good = Raw::connected(&srv, r#"{"verbose":false}"#).await;
    for _ in 0..4 {
        assert_eq!(good.line().await, "PING");
        good.send("PONG\r\n").await;
    }
    srv.shutdown().await;
}

#[tokio::test]
async fn slow_consumer_is_cut_off_and_others_unaffected() {
    let srv = start(Options {
        max_pending: 256 * 1024,
        max_payload: 64 * 1024,
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    // A subscriber that never reads.
    let mut slow = Raw::client(&srv).await;
    slow.send("SUB flood 1\r\n").await;
    slow.flush().await;
    let mut healthy = Raw::client(&srv).await;
    healthy.send("SUB other 1\r\n").await;
    healthy.flush().await;

    let mut p = Raw::client(&srv).await;
    let payload = "x".repeat(1024);
    let frame = format!("PUB flood 1024\r\n{payload}\r\n");
    let batch = frame.repeat(64);
    let http = srv.http_addr().expect("http");
    let mut cut = false;
    for _ in 0..2000 {
        p.send(&batch).await;
        let v = http_json(http, "/varz").await;
        if v["slow_consumers"].as_u64().unwrap_or(0) >= 1 {
            cut = true;
            break;
        }
    }
    assert!(cut, "slow consumer never detected");
    // The publisher and the healthy subscriber are unaffected.
    p.send("PUB other 2\r\nok\r\n").await;
    p.flush().await;
    let (_, _, _, msg) = healthy.msg().await;
    assert_eq!(msg, b"ok");
    wait_for("slow consumer closed", || {
        let srv = &srv;
        async move {
            let v = http_json(srv.http_addr().expect("http"), "/connz?state=closed").await;
            v["connections"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|c| c["reason"] == "Slow Consumer (Pending Bytes)")
            })
        }
    })
    .await;
    srv.shutdown().await;
}

#[tokio::test]
async fn many_subscriptions_from_one_client_are_bounded_and_released() {
    let srv = start(Options {
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let http = srv.http_addr().expect("http");
    // The server's own ($SYS services') subscriptions.
    let base = http_json(http, "/varz").await["subscriptions"]
        .as_u64()
        .expect("subscriptions");
    let mut r = Raw::client(&srv).await;
    let mut batch = String::new();
    for i in 0..100_000 {
        batch.push_str(&format!("SUB s.{i} {i}\r\n"));
        if batch.len() > 64 * 1024 {
            r.send(&batch).await;
            batch.clear();
        }
    }
    r.send(&batch).await;
    r.flush().await;
    let v = http_json(http, "/varz").await;
    assert_eq!(v["subscriptions"], 100_000 + base);
    r.send("PUB s.99999 1\r\nz\r\n").await;
    let (subj, sid, _, _) = r.msg().await;
    assert_eq!((subj.as_str(), sid.as_str()), ("s.99999", "99999"));
    drop(r);
    wait_for("subscriptions released", || async move {
        http_json(http, "/varz").await["subscriptions"] == base
    })
    .await;
    srv.shutdown().await;
}

#[tokio::test]
async fn permissions_violations_keep_connection() {
    use natsd::config::{Permissions, SubjectPermission};
    let srv = start(Options {
        users: vec![
            User {
                username: "admin".into(),
                password: "pw".into(),
                account: None,
                permissions: None,
                connection_types: Vec::new(),
            },
            User {
                username: "a".into(),
                password: "b".into(),
                account: None,
                permissions: Some(Permissions {
                    allow_responses: None,
                    publish: Some(SubjectPermission {
                        allow: vec!["foo".into(), "_INBOX.>".into()],
                        deny: vec![],
                    }),
                    subscribe: Some(SubjectPermission {
                        allow: vec![],
                        deny: vec!["bar".into()],
                    }),
                }),
                connection_types: Vec::new(),
            },
        ],
        ..Options::local()
    })
    .await;
    let mut r = Raw::connected(&srv, r#"{"verbose":false,"user":"a","pass":"b"}"#).await;
    r.send("PUB baz 1\r\nx\r\n").await;
    assert_eq!(
        r.line().await,
        "-ERR 'Permissions Violation for Publish to \"baz\"'"
    );
    r.send("SUB bar 1\r\n").await;
    assert_eq!(
        r.line().await,
        "-ERR 'Permissions Violation for Subscription to \"bar\"'"
    );
    // A wildcard subscription is allowed but never receives denied subjects.
    r.send("SUB * 2\r\n").await;
    r.flush().await;
    let mut admin = Raw::connected(&srv, r#"{"verbose":false,"user":"admin","pass":"pw"}"#).await;
    admin.send("PUB bar 1\r\nb\r\nPUB foo 1\r\nf\r\n").await;
    admin.flush().await;
    let (subj, _, _, p) = r.msg().await;
    assert_eq!((subj.as_str(), &p[..]), ("foo", &b"f"[..]));
    srv.shutdown().await;
}

#[tokio::test]
async fn write_deadline_cuts_off_a_consumer_whose_socket_stays_full() {
    // A pending limit far above what the test sends: only the write deadline can trigger.
    let srv = start(Options {
        write_deadline: Duration::from_millis(300),
        max_pending: 512 * 1024 * 1024,
        http_port: Some(0),
        ..Options::local()
    })
    .await;
    let mut slow = Raw::client(&srv).await;
    slow.send("SUB wd 1\r\n").await;
    slow.flush().await;
    let mut p = Raw::client(&srv).await;
    let payload = "y".repeat(16 * 1024);
    let batch = format!("PUB wd {}\r\n{payload}\r\n", payload.len()).repeat(64);
    let http = srv.http_addr().expect("http");
    let mut cut = false;
    for _ in 0..400 {
        p.send(&batch).await;
        p.flush().await;
        let v = http_json(http, "/connz?state=closed").await;
        if v["connections"].as_array().is_some_and(|a| {
            a.iter()
                .any(|c| c["reason"] == "Slow Consumer (Write Deadline)")
        }) {
            cut = true;
            break;
        }
    }
    assert!(cut, "write deadline never fired");
    // The publisher is unaffected.
    p.flush().await;
    srv.shutdown().await;
}
