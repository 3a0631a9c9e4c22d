//! An account JWT update changes a running account's exports and imports at once, natsd
//! beside nats-server 2.15.1 with the full resolver: a connected client's existing
//! subscription starts (and stops) getting an imported stream, its requests start (and stop)
//! reaching an imported service, and an exporter that withdraws its export cuts its
//! importers off — all without reconnecting.

mod common;

use common::resolver::{client, json_request, jwt_updated, serve_help, Op};
use futures::StreamExt;
use nkeys::KeyPair;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(10);

async fn push(o: &Op, admin: &async_nats::Client, acc: &KeyPair, name: &str, claims: Value) {
    let token = o.account(acc, name, claims);
    let answer = json_request(admin, "$SYS.REQ.CLAIMS.UPDATE", &token).await;
    assert_eq!(answer["data"], jwt_updated(acc), "{answer}");
}

/// Whether `nc`'s request to `help` is answered (polled until it is, or is not, as `want`).
async fn help_answered(nc: &async_nats::Client, want: bool) -> bool {
    let end = Instant::now() + DEADLINE;
    loop {
        let got = tokio::time::timeout(Duration::from_secs(2), nc.request("help", "?".into()))
            .await
            .ok()
            .and_then(Result::ok)
            .is_some_and(|m| &m.payload[..] == b"helped");
        if got == want || Instant::now() > end {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether a message `from` publishes on `x.<n>` reaches `sub` (polled until it does, or for
/// a short while when it should not).
async fn streamed(from: &async_nats::Client, sub: &mut async_nats::Subscriber, want: bool) -> bool {
    let end = Instant::now()
        + if want {
            DEADLINE
        } else {
            Duration::from_millis(600)
        };
    let mut n = 0u32;
    loop {
        n += 1;
        from.publish(format!("x.{n}"), "streamed".into())
            .await
            .expect("publish");
        from.flush().await.expect("flush");
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(150), sub.next()).await {
            assert_eq!(&m.payload[..], b"streamed");
            return true;
        }
        if Instant::now() > end {
            return false;
        }
    }
}

#[tokio::test]
async fn an_update_changes_a_running_accounts_imports_as_nats_server() {
    let o = Op::new();
    let (x, y) = (KeyPair::new_account(), KeyPair::new_account());
    let exports = json!({"exports": [
        {"name": "x", "subject": "x.>", "type": "stream"},
        {"name": "help", "subject": "help", "type": "service"}]});
    let stream_only = json!({"exports": [{"name": "x", "subject": "x.>", "type": "stream"}]});
    let imports = json!({"imports": [
        {"name": "x", "subject": "x.>", "account": x.public_key(), "type": "stream"},
        {"name": "help", "subject": "help", "account": x.public_key(), "type": "service"}]});
    for go in [false, true] {
        let (t, dir, admin) = o.start(go, "relink", "").await;
        let who = t.name();
        push(&o, &admin, &x, "X", exports.clone()).await;
        push(&o, &admin, &y, "Y", json!({})).await;
        let xc = client(t.client(), &KeyPair::new_user(), &x)
            .await
            .expect("X");
        let yc = client(t.client(), &KeyPair::new_user(), &y)
            .await
            .expect("Y");
        serve_help(&xc).await;
        let mut sub = yc.subscribe("x.>").await.expect("subscribe");
        yc.flush().await.expect("flush");
        assert!(!help_answered(&yc, false).await, "{who}: no import yet");
        assert!(
            !streamed(&xc, &mut sub, false).await,
            "{who}: no import yet"
        );

        // Y imports both: its running subscription and its requests are served.
        push(&o, &admin, &y, "Y", imports.clone()).await;
        assert!(
            help_answered(&yc, true).await,
            "{who}: service imported live"
        );
        assert!(
            streamed(&xc, &mut sub, true).await,
            "{who}: stream imported live"
        );

        // Y drops them.
        push(&o, &admin, &y, "Y", json!({})).await;
        assert!(
            !help_answered(&yc, false).await,
            "{who}: service import removed"
        );
        assert!(
            !streamed(&xc, &mut sub, false).await,
            "{who}: stream import removed"
        );

        // Y imports again; then X withdraws the service export: Y's import of it ends.
        push(&o, &admin, &y, "Y", imports.clone()).await;
        assert!(
            help_answered(&yc, true).await,
            "{who}: service imported again"
        );
        push(&o, &admin, &x, "X", stream_only.clone()).await;
        assert!(
            !help_answered(&yc, false).await,
            "{who}: the export was withdrawn"
        );
        assert!(
            streamed(&xc, &mut sub, true).await,
            "{who}: the stream stays"
        );

        drop((xc, yc, admin));
        t.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
