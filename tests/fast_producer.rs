//! `no_fast_producer_stall`, as nats-server 2.15.1 behaves (docs/nats-server-behaviour.md,
//! "no_fast_producer_stall"): a fast publisher, a subscriber that reads and one that never
//! does, with a small `max_pending`. By default the publisher waits for the stuck one (counted
//! in `/varz` `stalled_clients`) and the stuck one is cut at `max_pending` (`Slow Consumer
//! (Pending Bytes)`); with the option the publisher never waits, messages for a destination
//! past 3/4 of its `max_pending` are dropped, so the stuck one never reaches `max_pending` and
//! is cut by its write deadline instead. Counts and close reasons only, polls with deadlines.

mod common;

use common::*;
use natsd::Options;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PAYLOAD: usize = 1024;
/// 20 MB: far past what the kernel buffers of the stuck client and `MAX_PENDING` absorb.
const N: usize = 20_000;
const MAX_PENDING: usize = 2 * 1024 * 1024;
/// How many messages the publisher may run ahead of the healthy subscriber (0.5 MB).
const CHUNK: usize = 500;

/// What one run saw.
struct Outcome {
    /// Messages the healthy subscriber got (counted up to the PONG it asked for after the
    /// publisher's PONG: every message for it was queued or dropped by then).
    healthy: usize,
    /// The stuck subscriber's close reason.
    stuck_reason: String,
    varz: serde_json::Value,
}

async fn run(no_fast_producer_stall: bool) -> Outcome {
    let srv = start(Options {
        http_port: Some(0),
        max_pending: MAX_PENDING,
        max_payload: 64 * 1024,
        // With the option the write deadline is what cuts the stuck one; without it,
        // `max_pending` must, long before any deadline.
        write_deadline: Duration::from_secs(if no_fast_producer_stall { 2 } else { 60 }),
        no_fast_producer_stall,
        ..Options::local()
    })
    .await;
    let (_stuck, stuck_cid) = stuck_subscriber(&srv, "flood").await;
    let mut healthy = Raw::client(&srv).await;
    healthy.send("SUB flood 1\r\nPING\r\n").await;
    healthy.expect("PONG").await;
    let (mut rd, mut wr) = healthy.stream.into_split();
    // Counts bytes until the stream ends in the PONG asked for below.
    let got = Arc::new(AtomicUsize::new(0));
    let seen = got.clone();
    let reader = tokio::spawn(async move {
        let mut tmp = vec![0u8; 256 * 1024];
        let mut tail: Vec<u8> = Vec::new();
        let mut total = 0usize;
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let k = match tokio::time::timeout(left, rd.read(&mut tmp)).await {
                Ok(Ok(k)) if k > 0 => k,
                other => panic!("healthy subscriber: {other:?} after {total} bytes"),
            };
            total += k;
            seen.store(total, Relaxed);
            tail.extend_from_slice(&tmp[..k]);
            let keep = tail.len().saturating_sub(6);
            tail.drain(..keep);
            if tail == b"PONG\r\n" {
                return total - 6;
            }
        }
    });
    let mut p = Raw::client(&srv).await;
    let frame = format!("PUB flood {PAYLOAD}\r\n{}\r\n", "x".repeat(PAYLOAD));
    let batch = frame.repeat(100);
    let msg = format!("MSG flood 1 {PAYLOAD}\r\n").len() + PAYLOAD + 2;
    // The publisher runs at most CHUNK messages (well under 3/4 of `MAX_PENDING`) ahead of
    // the healthy subscriber, so only the stuck one falls behind, however loaded the machine.
    for chunk in 1..=N / CHUNK {
        for _ in 0..CHUNK / 100 {
            p.send(&batch).await;
        }
        let want = chunk * CHUNK * msg;
        wait_for("the healthy subscriber to keep up", || {
            let got = got.clone();
            async move { got.load(Relaxed) >= want }
        })
        .await;
    }
    p.send("PING\r\n").await;
    assert_eq!(p.next_non_ping().await, "PONG", "the publisher is served");
    wr.write_all(b"PING\r\n").await.expect("healthy PING");
    let bytes = reader.await.expect("reader");
    assert_eq!(bytes % msg, 0, "whole messages only");
    // The stuck subscriber is cut, one way or the other.
    let addr = http_addr(&srv);
    let mut stuck_reason = String::new();
    let end = Instant::now() + DEADLINE;
    while stuck_reason.is_empty() {
        assert!(Instant::now() < end, "the stuck subscriber was never cut");
        let c = http_json(addr, "/connz?state=closed").await;
        if let Some(x) = c["connections"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["cid"] == stuck_cid))
        {
            stuck_reason = x["reason"].as_str().unwrap_or_default().to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let varz = http_json(addr, "/varz").await;
    // The healthy subscriber and the publisher are still there.
    let open = http_json(addr, "/connz").await;
    assert_eq!(open["num_connections"], 2, "{open}");
    srv.shutdown().await;
    Outcome {
        healthy: bytes / msg,
        stuck_reason,
        varz,
    }
}

/// Default: the publisher stalls on the stuck subscriber (counted), every message reaches the
/// healthy one, and the stuck one is cut at `max_pending`, counted as a client slow consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_publisher_stalls_and_the_stuck_one_is_cut_at_max_pending() {
    let o = run(false).await;
    assert_eq!(o.stuck_reason, "Slow Consumer (Pending Bytes)");
    assert_eq!(o.healthy, N, "the healthy subscriber lost messages");
    let v = &o.varz;
    assert!(v["stalled_clients"].as_u64() > Some(0), "{v}");
    assert!(v["slow_consumers"].as_u64() >= Some(1), "{v}");
    assert_eq!(
        v["slow_consumer_stats"]["clients"], v["slow_consumers"],
        "{v}"
    );
    assert_eq!(v["in_msgs"], N as u64, "{v}");
}

/// `no_fast_producer_stall: true`: the publisher never waits (`stalled_clients` stays 0);
/// messages for the stuck subscriber past 3/4 of its `max_pending` are dropped, so it never
/// reaches `max_pending` and its write deadline cuts it (`Slow Consumer (Write Deadline)`).
/// Fails on natsd before this test: it kept queueing and cut it at `max_pending`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_stall_messages_for_a_stuck_subscriber_are_dropped() {
    let o = run(true).await;
    assert_eq!(o.stuck_reason, "Slow Consumer (Write Deadline)");
    let v = &o.varz;
    assert_eq!(v["stalled_clients"], 0, "{v}");
    assert_eq!(v["slow_consumers"], 1, "{v}");
    assert_eq!(v["slow_consumer_stats"]["clients"], 1, "{v}");
    assert_eq!(v["in_msgs"], N as u64, "{v}");
    // Dropped messages are not counted as sent: the stuck one got only part of the N.
    let out = v["out_msgs"].as_u64().unwrap_or(0);
    assert!(out < 2 * N as u64, "nothing was dropped: {v}");
    // The healthy one, never 3/4 behind here, gets every message. (One that falls 3/4 behind
    // loses messages too: the option trades those losses for a publisher that never waits.)
    assert_eq!(o.healthy, N, "the healthy subscriber lost messages");
    assert!(out > N as u64, "{v}");
}
