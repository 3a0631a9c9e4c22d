//! A rolling restart of a three-node natsd JetStream cluster, as the Helm chart does it
//! (each pod in turn: lame duck first — the chart's preStop — then a restart, waiting for
//! the pod to be current again) while a client publishes with acks into an R3 stream: no
//! acknowledged message is lost or stored twice, sequences stay in order, and the longest
//! publish stall is reported. A node in lame duck mode hands its JetStream leadership to
//! the others before it goes (nats-server's `transferRaftLeaders`).

mod common;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::jsproc::{create_ev, publish_acked, request, start, subject_at, three, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_under_load_loses_nothing() {
    let (mut nodes, nc) = three("jsc-roll").await;
    create_ev(&nc, "file").await;

    // Steady publishing, one message at a time, each retried (same Nats-Msg-Id) until
    // acknowledged; the longest wait for one ack is the stall.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<(u64, u64)>::new()));
    let publisher = tokio::spawn({
        let (nc, stop, acked) = (nc.clone(), stop.clone(), acked.clone());
        async move {
            let mut longest = Duration::ZERO;
            let mut i = 0u64;
            while !stop.load(Relaxed) {
                i += 1;
                let t = tokio::time::Instant::now();
                let seq = publish_acked(&nc, i).await;
                longest = longest.max(t.elapsed());
                acked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((i, seq));
            }
            longest
        }
    });
    let count = || acked.lock().unwrap_or_else(|p| p.into_inner()).len();
    common::wait_for("publishing under way", || {
        let n = count();
        async move { n >= 50 }
    })
    .await;

    for k in 0..3 {
        // Lame duck (SIGUSR2): the node hands over what it leads, drains its clients
        // and exits; then it comes back and catches up.
        let mut p = nodes.procs[k].take().expect("running");
        p.signal("-USR2");
        let status = p.wait_exit(WAIT, Duration::from_millis(100));
        assert!(status.success(), "n{k} exited with {status:?}");
        nodes.procs[k] = Some(start(&nodes.confs[k]));
        let before = count();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let info = request(&nc, "$JS.API.STREAM.INFO.EV", String::new()).await;
            let current = info.as_ref().is_some_and(|v| {
                let reps = v["cluster"]["replicas"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                reps.len() == 2 && reps.iter().all(|r| r["current"] == true)
            });
            if current && count() > before + 20 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "n{k} never current again: {info:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    stop.store(true, Relaxed);
    let longest = publisher.await.expect("publisher");
    let acked = acked.lock().unwrap_or_else(|p| p.into_inner()).clone();
    eprintln!(
        "rolling restart: {} messages acknowledged, longest publish stall {longest:?}",
        acked.len()
    );

    // Each acknowledged message once, at the sequence its ack named, in order.
    let n = acked.len() as u64;
    for (i, seq) in &acked {
        assert_eq!(seq, i, "message {i} acknowledged at {seq}");
    }
    let info = request(&nc, "$JS.API.STREAM.INFO.EV", String::new())
        .await
        .unwrap_or_default();
    assert_eq!(info["state"]["messages"], n, "{info}");
    assert_eq!(info["state"]["last_seq"], n, "{info}");
    for seq in [1, n / 2, n] {
        assert_eq!(subject_at(&nc, "EV", seq).await, format!("ev.{seq}"));
    }
    drop(nodes);
}
