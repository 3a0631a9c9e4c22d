//! A push consumer's `rate_limit_bps`, as nats-server's limiter: `rate_limit_bps / 8` bytes
//! per second after a burst of the stream's `max_msg_size`. Only a lower bound on the time is
//! asserted (a slow machine can only make delivery slower).

mod common;

use futures::StreamExt;
use std::time::{Duration, Instant};

use common::js_api as api;

#[tokio::test]
async fn push_consumer_delivers_no_faster_than_its_rate_limit() {
    let (srv, nc, dir) = common::start_js("ratelimit").await;
    let c = api(
        &nc,
        "$JS.API.STREAM.CREATE.R",
        r#"{"name":"R","subjects":["r"],"storage":"memory","max_msg_size":2048}"#,
    )
    .await;
    assert!(c.get("error").is_none(), "{c}");
    // 25 messages of ~1 KiB: ~25.5 KB, 2 KB of which the burst lets through at once.
    let payload = "x".repeat(1000);
    for _ in 0..25 {
        let a = api(&nc, "r", &payload).await;
        assert!(a.get("seq").is_some(), "{a}");
    }
    let mut sub = nc.subscribe("rl.out").await.expect("subscribe");
    nc.flush().await.expect("flush");
    let t0 = Instant::now();
    // 80 000 bits/s = 10 000 bytes/s: at least ~2.3 s for what the burst does not cover.
    let c = api(
        &nc,
        "$JS.API.CONSUMER.DURABLE.CREATE.R.rl",
        r#"{"stream_name":"R","config":{"durable_name":"rl","deliver_subject":"rl.out","ack_policy":"none","rate_limit_bps":80000}}"#,
    )
    .await;
    assert_eq!(c["config"]["rate_limit_bps"], 80000, "{c}");
    for i in 0..25 {
        tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .unwrap_or_else(|_| panic!("message {i} never came"))
            .expect("subscription open");
    }
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(1500),
        "25 KB at 10 KB/s after a 2 KB burst came in {took:?}"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
