//! JetStream under concurrent load: publishes and acks are handled in place on the
//! publisher's task when the engine is idle and queued to the JetStream task otherwise.
//! Whatever mix happens, every publisher's acks come back in its publish order with
//! increasing sequences, no sequence is given twice, and a consumer gets every message once.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use futures::StreamExt;
use std::collections::HashSet;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);
const PUBLISHERS: usize = 4;
const PER_PUBLISHER: usize = 1500;

async fn publisher(url: String, id: usize) -> Vec<u64> {
    let nc = async_nats::connect(url).await.expect("connect");
    let js = jetstream::new(nc);
    let mut acks = Vec::with_capacity(PER_PUBLISHER);
    for i in 0..PER_PUBLISHER {
        let f = js
            .publish(format!("c.{id}"), Bytes::from(format!("{id}-{i}")))
            .await
            .expect("publish");
        acks.push(f);
        // Up to 64 in flight, so the server sees bursts and single messages both.
        if acks.len() % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let mut seqs = Vec::with_capacity(PER_PUBLISHER);
    for f in acks {
        let a = tokio::time::timeout(T, f)
            .await
            .expect("ack in time")
            .expect("ack");
        seqs.push(a.sequence);
    }
    seqs
}

async fn run(storage: stream::StorageType, name: &str) {
    let (srv, nc, dir) = common::start_js(&format!("jsconc-{name}")).await;
    let js = jetstream::new(nc.clone());
    let st = js
        .create_stream(stream::Config {
            name: "C".into(),
            subjects: vec!["c.>".into()],
            storage,
            ..Default::default()
        })
        .await
        .expect("create stream");
    let c: consumer::PullConsumer = st
        .create_consumer(consumer::pull::Config {
            durable_name: Some("D".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            max_ack_pending: -1,
            ..Default::default()
        })
        .await
        .expect("create consumer");
    let total = PUBLISHERS * PER_PUBLISHER;

    // A consumer acking as messages arrive, and API requests, while the publishers run: the
    // engine is busy from several directions at once.
    let consume = tokio::spawn(async move {
        let mut seen = HashSet::new();
        let mut msgs = c
            .stream()
            .max_messages_per_batch(200)
            .messages()
            .await
            .expect("pull stream");
        while seen.len() < total {
            let m = tokio::time::timeout(T, msgs.next())
                .await
                .expect("consumer stalled")
                .expect("stream ended")
                .expect("message");
            let info = m.info().expect("ack subject");
            assert!(
                seen.insert(info.stream_sequence),
                "stream sequence {} delivered twice",
                info.stream_sequence
            );
            m.ack().await.expect("ack");
        }
        seen
    });
    let info_js = js.clone();
    let infos = tokio::spawn(async move {
        for _ in 0..200 {
            let mut s = info_js.get_stream("C").await.expect("get stream");
            s.info().await.expect("stream info");
        }
    });

    let pubs: Vec<_> = (0..PUBLISHERS)
        .map(|id| tokio::spawn(publisher(srv.client_url(), id)))
        .collect();
    let mut all = HashSet::new();
    for p in pubs {
        let seqs = tokio::time::timeout(Duration::from_secs(60), p)
            .await
            .expect("publisher in time")
            .expect("publisher task");
        assert_eq!(seqs.len(), PER_PUBLISHER);
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "acks of one publisher out of publish order"
        );
        for s in seqs {
            assert!(all.insert(s), "sequence {s} acknowledged twice");
        }
    }
    assert_eq!(all.len(), total);
    assert_eq!(all.iter().copied().max(), Some(total as u64));
    infos.await.expect("info task");
    let seen = tokio::time::timeout(Duration::from_secs(60), consume)
        .await
        .expect("consumer in time")
        .expect("consumer task");
    assert_eq!(
        seen, all,
        "the consumer got exactly the acknowledged messages"
    );

    let mut s = js.get_stream("C").await.expect("get stream");
    let info = s.info().await.expect("info");
    assert_eq!(info.state.messages, total as u64);
    assert_eq!(info.state.last_sequence, total as u64);
    // Every ack was applied: nothing is left pending on the consumer.
    let end = tokio::time::Instant::now() + T;
    loop {
        let mut c: consumer::PullConsumer = s.get_consumer("D").await.expect("consumer");
        let ci = c.info().await.expect("consumer info");
        if ci.num_ack_pending == 0 && ci.num_pending == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "acks not applied: {} pending acks, {} pending",
            ci.num_ack_pending,
            ci.num_pending
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishers_and_acks_memory() {
    run(stream::StorageType::Memory, "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishers_and_acks_file() {
    run(stream::StorageType::File, "file").await;
}
