//! A seeded, randomized fault run on a three-process natsd JetStream cluster: while a
//! client publishes into an R3 stream with acks (and `Nats-Msg-Id`, retrying what was not
//! acknowledged) and a durable consumer takes and acknowledges messages, one node at a
//! time is killed (`kill -9`) and restarted, frozen (SIGSTOP, then SIGCONT), rolled
//! through lame duck mode or cut off from the other two (every route runs through a link
//! the test cuts and heals: a partition, the isolated node a minority of one). Afterwards every acknowledged message is in the stream exactly
//! once at the sequence its ack named, no sequence is reused, every copy holds the same
//! messages, and the consumer reaches the end. `JS_FAULT_SEED=<n>` replays a schedule
//! (`random` draws one; the suite runs seed 17 so that CI is repeatable), `JS_FAULT_SECS=<s>`
//! sets how long faults go on (default 25).

mod common;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::jsproc::{
    copies, create_ev, publish_acked, request, start, subject_at, three_linked, WAIT,
};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// What the fault schedule does to one node.
#[derive(Debug, Clone, Copy)]
enum Fault {
    Kill,
    Freeze,
    LameDuck,
    Partition,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_faults_lose_no_acknowledged_message() {
    let seed: u64 = match std::env::var("JS_FAULT_SEED").ok().as_deref() {
        Some("random") => rand::random(),
        Some(s) => s.parse().expect("JS_FAULT_SEED: a number or `random`"),
        None => 17,
    };
    let secs: u64 = std::env::var("JS_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(25);
    eprintln!("fault run: JS_FAULT_SEED={seed} JS_FAULT_SECS={secs}");
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut nodes, nc) = three_linked("jsc-faults").await;
    create_ev(&nc, "file").await;
    let ctx = async_nats::jetstream::new(nc.clone());
    let deadline = tokio::time::Instant::now() + WAIT;
    let consumer = loop {
        let c = ctx.get_stream("EV").await.ok().map(|s| async move {
            s.create_consumer(async_nats::jetstream::consumer::pull::Config {
                durable_name: Some("D".into()),
                ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(2),
                ..Default::default()
            })
            .await
            .ok()
        });
        if let Some(f) = c {
            if let Some(c) = f.await {
                break c;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "no consumer");
    };

    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let publisher = tokio::spawn({
        let (nc, stop, acked) = (nc.clone(), stop.clone(), acked.clone());
        async move {
            let mut i = 0u64;
            while !stop.load(Relaxed) {
                i += 1;
                let seq = publish_acked(&nc, i).await;
                acked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((i, seq));
            }
        }
    });
    let taken = Arc::new(Mutex::new(Vec::<u64>::new()));
    let taker = tokio::spawn({
        let (consumer, stop, taken) = (consumer.clone(), stop.clone(), taken.clone());
        async move {
            while !stop.load(Relaxed) {
                take_some(&consumer, &taken).await;
            }
        }
    });

    // The schedule: one node at a time.
    let end = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < end {
        let k = rng.random_range(0..3usize);
        let fault = match rng.random_range(0..4) {
            0 => Fault::Kill,
            1 => Fault::Freeze,
            2 => Fault::LameDuck,
            _ => Fault::Partition,
        };
        let down = Duration::from_millis(rng.random_range(500..3000));
        eprintln!("fault: n{k} {fault:?} for {down:?}");
        match fault {
            Fault::Kill => {
                if let Some(p) = nodes.procs[k].take() {
                    p.signal("-9");
                }
                tokio::time::sleep(down).await;
                nodes.procs[k] = Some(start(&nodes.confs[k]));
            }
            Fault::Freeze => {
                if let Some(p) = &nodes.procs[k] {
                    p.signal("-STOP");
                    tokio::time::sleep(down).await;
                    p.signal("-CONT");
                }
            }
            Fault::LameDuck => {
                if let Some(mut p) = nodes.procs[k].take() {
                    p.signal("-USR2");
                    p.wait_exit(WAIT, Duration::from_millis(100));
                }
                nodes.procs[k] = Some(start(&nodes.confs[k]));
            }
            Fault::Partition => {
                nodes.isolate(k, true);
                tokio::time::sleep(down).await;
                nodes.isolate(k, false);
            }
        }
        let pause = Duration::from_millis(rng.random_range(1000..3000));
        tokio::time::sleep(pause).await;
    }
    stop.store(true, Relaxed);
    publisher.await.expect("publisher");
    taker.await.expect("taker");
    let acked = acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let n = acked.len() as u64;
    eprintln!("fault run: {n} messages acknowledged");
    assert!(n > 0, "nothing was acknowledged");

    // Every acknowledged message once, at the sequence its ack named.
    for (i, seq) in &acked {
        assert_eq!(seq, i, "message {i} acknowledged at {seq}");
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let states = copies(&nodes.http, "EV").await;
        let leader = request(&nc, "$JS.API.STREAM.INFO.EV", String::new()).await;
        let done = leader.as_ref().is_some_and(|v| v["state"]["last_seq"] == n)
            && states.iter().all(|s| s.is_some() && *s == states[0]);
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "copies differ or lack messages: {states:?} {leader:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for seq in [1, n / 2, n] {
        assert_eq!(subject_at(&nc, "EV", seq).await, format!("ev.{seq}"));
    }
    // The consumer reaches the end: everything acknowledged at least once. A backlog left
    // by the faults takes what it takes (one synchronous ack at a time, a commit each, in a
    // debug build); the consumer must not stall.
    let started = tokio::time::Instant::now();
    let mut deadline = started + WAIT;
    let mut floor = None;
    loop {
        take_some(&consumer, &taken).await;
        let d = request(&nc, "$JS.API.CONSUMER.INFO.EV.D", String::new()).await;
        let now_floor = d
            .as_ref()
            .and_then(|d| d["ack_floor"]["stream_seq"].as_u64());
        if floor.is_none() {
            eprintln!("fault run: the consumer's backlog: {:?} of {n}", now_floor);
        }
        if now_floor > floor {
            floor = now_floor;
            deadline = tokio::time::Instant::now() + WAIT;
        }
        if d.as_ref()
            .is_some_and(|d| d["ack_floor"]["stream_seq"] == n && d["num_pending"] == 0)
        {
            eprintln!(
                "fault run: the consumer caught up in {:?}",
                started.elapsed()
            );
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            for (k, port) in nodes.clients.iter().enumerate() {
                let Ok(c) = async_nats::connect(format!("nats://127.0.0.1:{port}")).await else {
                    continue;
                };
                for body in [
                    r#"{"batch":1,"no_wait":true}"#,
                    r#"{"batch":1,"expires":1000000000}"#,
                ] {
                    let inbox = c.new_inbox();
                    let mut sub = c.subscribe(inbox.clone()).await.expect("sub");
                    c.publish_with_reply("$JS.API.CONSUMER.MSG.NEXT.EV.D", inbox, body.into())
                        .await
                        .expect("pub");
                    while let Ok(Some(m)) = tokio::time::timeout(
                        Duration::from_millis(1500),
                        futures::StreamExt::next(&mut sub),
                    )
                    .await
                    {
                        eprintln!(
                            "TMP n{k} {body}: {} {:?} {:?} {:?}",
                            m.subject, m.status, m.headers, m.reply
                        );
                    }
                }
                let i = request(&c, "$JS.API.CONSUMER.INFO.EV.D", String::new()).await;
                eprintln!(
                    "TMP n{k} info: {:?}",
                    i.map(|i| (
                        i["delivered"].clone(),
                        i["num_waiting"].clone(),
                        i["cluster"]["leader"].clone()
                    ))
                );
            }
            panic!("consumer stuck: {d:?}");
        }
    }
    let mut got = taken.lock().unwrap_or_else(|p| p.into_inner()).clone();
    got.sort_unstable();
    got.dedup();
    assert_eq!(got.len() as u64, n, "every message delivered at least once");
    drop(nodes);
}

/// Fetches up to 50 messages, records their numbers and acknowledges each (synchronously).
async fn take_some(c: &async_nats::jetstream::consumer::PullConsumer, taken: &Mutex<Vec<u64>>) {
    use futures::StreamExt;
    let Ok(mut batch) = c
        .fetch()
        .max_messages(50)
        .expires(Duration::from_millis(500))
        .messages()
        .await
    else {
        tokio::time::sleep(Duration::from_millis(100)).await;
        return;
    };
    while let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(2), batch.next()).await {
        let i: Option<u64> = std::str::from_utf8(&m.payload)
            .ok()
            .and_then(|s| s.parse().ok());
        // Delivered is taken: an ack whose answer is lost with a leader may still have
        // counted (the consumer then does not deliver that message again).
        if let Some(i) = i {
            taken.lock().unwrap_or_else(|p| p.into_inner()).push(i);
        }
        let _ = m.double_ack().await;
    }
}
