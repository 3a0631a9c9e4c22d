//! Real-client tests: the `async-nats` crate, unchanged, against an embedded natsd.

mod common;

use async_nats::{ConnectOptions, Event};
use common::start;
use futures::StreamExt;
use natsd::config::{Permissions, SubjectPermission, User};
use natsd::Options;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

async fn next(sub: &mut async_nats::Subscriber) -> async_nats::Message {
    tokio::time::timeout(T, sub.next())
        .await
        .expect("timed out waiting for a message")
        .expect("subscription ended")
}

#[tokio::test]
async fn pub_sub_wildcards_and_headers() {
    let srv = start(Options::local()).await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let mut star = nc.subscribe("orders.*").await.expect("sub");
    let mut gt = nc.subscribe("orders.>").await.expect("sub");
    nc.flush().await.expect("flush");
    nc.publish("orders.new", "one".into()).await.expect("pub");
    nc.publish("orders.eu.new", "two".into())
        .await
        .expect("pub");
    let m = next(&mut star).await;
    assert_eq!(
        (m.subject.as_str(), &m.payload[..]),
        ("orders.new", &b"one"[..])
    );
    let a = next(&mut gt).await;
    let b = next(&mut gt).await;
    assert_eq!(a.subject.as_str(), "orders.new");
    assert_eq!(b.subject.as_str(), "orders.eu.new");

    let mut h = async_nats::HeaderMap::new();
    h.insert("X-Trace", "abc");
    nc.publish_with_headers("orders.hdr", h, "with".into())
        .await
        .expect("pub");
    let m = next(&mut star).await;
    assert_eq!(
        m.headers
            .as_ref()
            .and_then(|h| h.get("X-Trace"))
            .map(|v| v.as_str()),
        Some("abc")
    );
    assert_eq!(&m.payload[..], b"with");
    srv.shutdown().await;
}

#[tokio::test]
async fn queue_groups_share_work() {
    let srv = start(Options::local()).await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let mut subs = Vec::new();
    for _ in 0..4 {
        subs.push(
            nc.queue_subscribe("jobs", "workers".into())
                .await
                .expect("qsub"),
        );
    }
    nc.flush().await.expect("flush");
    for i in 0..400u32 {
        nc.publish("jobs", i.to_string().into()).await.expect("pub");
    }
    nc.flush().await.expect("flush");
    let mut got = std::collections::HashSet::new();
    let mut per = vec![0; subs.len()];
    // Drain every member in turn until all 400 are in (or the deadline), then once more so a
    // duplicate still in flight is seen.
    let end = std::time::Instant::now() + common::DEADLINE;
    let mut last_round = false;
    while !last_round {
        last_round = got.len() == 400 || std::time::Instant::now() > end;
        for (n, s) in per.iter_mut().zip(&mut subs) {
            while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(50), s.next()).await
            {
                assert!(got.insert(m.payload.clone()), "delivered twice");
                *n += 1;
            }
        }
    }
    assert_eq!(got.len(), 400, "per member: {per:?}");
    assert!(per.iter().all(|n| *n > 0), "per member: {per:?}");
    srv.shutdown().await;
}

#[tokio::test]
async fn request_reply_and_no_responders() {
    let srv = start(Options::local()).await;
    let nc = async_nats::connect(srv.client_url())
        .await
        .expect("connect");
    let mut svc = nc.subscribe("echo").await.expect("sub");
    let responder = nc.clone();
    tokio::spawn(async move {
        while let Some(m) = svc.next().await {
            if let Some(r) = m.reply {
                let _ = responder.publish(r, m.payload).await;
            }
        }
    });
    nc.flush().await.expect("flush");
    for i in 0..20 {
        let body = format!("req-{i}");
        let resp = tokio::time::timeout(T, nc.request("echo", body.clone().into()))
            .await
            .expect("timeout")
            .expect("request");
        assert_eq!(resp.payload, body.as_bytes());
    }
    let err = tokio::time::timeout(T, nc.request("nobody.home", "x".into()))
        .await
        .expect("timeout")
        .expect_err("no responders");
    assert_eq!(err.kind(), async_nats::RequestErrorKind::NoResponders);
    srv.shutdown().await;
}

#[tokio::test]
async fn user_password_and_token_auth() {
    let hash = bcrypt::hash("secret", 4).expect("hash");
    let srv = start(Options {
        users: vec![User {
            username: "alice".into(),
            password: hash,
            account: None,
            permissions: None,
            connection_types: Vec::new(),
        }],
        ..Options::local()
    })
    .await;
    let ok = ConnectOptions::with_user_and_password("alice".into(), "secret".into())
        .connect(srv.client_url())
        .await;
    assert!(ok.is_ok(), "{ok:?}");
    let bad = ConnectOptions::with_user_and_password("alice".into(), "wrong".into())
        .retry_on_initial_connect()
        .max_reconnects(1)
        .connect(srv.client_url())
        .await;
    if let Ok(c) = bad {
        // With retries the connect call may return; the connection must never come up.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_ne!(
            c.connection_state(),
            async_nats::connection::State::Connected
        );
    }
    srv.shutdown().await;

    let srv = start(Options {
        auth_token: Some("tok".into()),
        ..Options::local()
    })
    .await;
    let nc = ConnectOptions::with_token("tok".into())
        .connect(srv.client_url())
        .await
        .expect("token connect");
    nc.flush().await.expect("flush");
    let bad = ConnectOptions::with_token("nope".into())
        .connect(srv.client_url())
        .await;
    assert!(bad.is_err());
    srv.shutdown().await;
}

#[tokio::test]
async fn permissions_violations_are_reported() {
    let srv = start(Options {
        users: vec![User {
            username: "limited".into(),
            password: "pw".into(),
            account: None,
            permissions: Some(Permissions {
                allow_responses: None,
                publish: Some(SubjectPermission {
                    allow: vec!["allowed.>".into()],
                    deny: vec![],
                }),
                subscribe: Some(SubjectPermission {
                    allow: vec!["allowed.>".into()],
                    deny: vec![],
                }),
            }),
            connection_types: Vec::new(),
        }],
        ..Options::local()
    })
    .await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let nc = ConnectOptions::with_user_and_password("limited".into(), "pw".into())
        .event_callback(move |e| {
            let tx = tx.clone();
            async move {
                if let Event::ServerError(err) = e {
                    let _ = tx.send(err.to_string());
                }
            }
        })
        .connect(srv.client_url())
        .await
        .expect("connect");
    let mut sub = nc.subscribe("allowed.x").await.expect("sub");
    nc.publish("forbidden", "x".into()).await.expect("pub");
    nc.flush().await.expect("flush");
    let e = tokio::time::timeout(T, rx.recv())
        .await
        .expect("timeout")
        .expect("event");
    assert!(e.contains("Permissions Violation for Publish"), "{e}");
    // The connection still works.
    nc.publish("allowed.x", "ok".into()).await.expect("pub");
    assert_eq!(&next(&mut sub).await.payload[..], b"ok");
    srv.shutdown().await;
}

#[tokio::test]
async fn accounts_are_isolated() {
    let user = |name: &str, acc: &str| User {
        username: name.into(),
        password: "pw".into(),
        account: Some(acc.into()),
        permissions: None,
        connection_types: Vec::new(),
    };
    let srv = start(Options {
        accounts: vec!["A".into(), "B".into()],
        users: vec![user("a1", "A"), user("a2", "A"), user("b1", "B")],
        ..Options::local()
    })
    .await;
    let conn = |u: &'static str| {
        let url = srv.client_url();
        async move {
            ConnectOptions::with_user_and_password(u.into(), "pw".into())
                .connect(url)
                .await
                .expect("connect")
        }
    };
    let a1 = conn("a1").await;
    let a2 = conn("a2").await;
    let b1 = conn("b1").await;
    let mut sa = a2.subscribe("shared").await.expect("sub");
    let mut sb = b1.subscribe("shared").await.expect("sub");
    a2.flush().await.expect("flush");
    b1.flush().await.expect("flush");
    a1.publish("shared", "for-A".into()).await.expect("pub");
    a1.flush().await.expect("flush");
    assert_eq!(&next(&mut sa).await.payload[..], b"for-A");
    b1.publish("shared", "for-B".into()).await.expect("pub");
    b1.flush().await.expect("flush");
    // B's subscriber sees only B's message.
    assert_eq!(&next(&mut sb).await.payload[..], b"for-B");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), sa.next())
            .await
            .is_err(),
        "account A received account B's message"
    );
    srv.shutdown().await;
}
