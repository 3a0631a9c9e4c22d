//! Crash safety of file streams at the server level: the `natsd` binary with `-js -sd <dir>`
//! is killed with SIGKILL in the middle of a stream of acknowledged publishes, restarted on
//! the same store directory, and must still hold every acknowledged message, in order and
//! intact. A store file cut short or with a flipped byte loses only the damaged messages,
//! with a log line naming the file, never a panic, and never hands out a sequence again.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use common::binary::Proc;
use futures::StreamExt;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// A store directory, removed on drop.
struct TmpDir(PathBuf);

impl TmpDir {
    fn new(name: &str) -> TmpDir {
        TmpDir(common::binary::tmp_dir("js-crash", name))
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `natsd -js -sd <dir>` on a random local port, ready.
fn natsd(dir: &Path) -> Proc {
    let sd = dir.to_str().expect("utf-8 dir");
    Proc::ready(
        &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", sd],
        Stdio::null(),
        "Server is ready",
    )
}

async fn connect(n: &Proc) -> (async_nats::Client, jetstream::Context) {
    let nc = async_nats::connect(n.client_addr().to_string())
        .await
        .expect("connect");
    let js = jetstream::new(nc.clone());
    (nc, js)
}

/// SIGKILL (what `Child::kill` sends on Unix) and reap.
fn kill9(n: &mut Proc) {
    n.child.kill().expect("kill");
    n.child.wait().expect("wait");
}

/// The payload of the message published as sequence `seq`: the sequence, then filler, so a
/// payload names its sequence and damage anywhere in it shows.
fn payload(seq: u64) -> Bytes {
    let mut s = format!("seq={seq:010};");
    while s.len() < 100 {
        s.push_str(&format!("{:x}", seq % 16));
    }
    Bytes::from(s)
}

async fn create(js: &jetstream::Context) -> stream::Stream {
    js.create_stream(stream::Config {
        name: "C".into(),
        subjects: vec!["c.>".into()],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .expect("create stream")
}

async fn state(js: &jetstream::Context) -> stream::State {
    let mut s = js.get_stream("C").await.expect("stream restored");
    s.info().await.expect("info").state.clone()
}

/// Read the whole stream with a pull consumer and check it is 1..=last without gaps, each
/// payload the one published as that sequence. Returns how many were read.
async fn check_all(js: &jetstream::Context, want: u64) -> u64 {
    let s = js.get_stream("C").await.expect("stream");
    let c: consumer::PullConsumer = s
        .create_consumer(consumer::pull::Config {
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let (mut next, mut got) = (1u64, 0u64);
    while got < want {
        let mut b = c
            .fetch()
            .max_messages(500)
            .expires(T)
            .messages()
            .await
            .expect("fetch");
        let before = next;
        while let Some(m) = tokio::time::timeout(T, b.next()).await.expect("message") {
            let m = m.expect("message");
            let seq = m.info().expect("info").stream_sequence;
            assert!(seq >= next, "messages in order");
            assert_eq!(m.payload, payload(seq), "payload of {seq} intact");
            assert_eq!(m.subject.as_str(), "c.x");
            m.ack().await.expect("ack");
            next = seq + 1;
            got += 1;
            if got == want {
                break;
            }
        }
        assert!(
            next > before,
            "a fetch returned nothing at {next} ({got} of {want})"
        );
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_acked_publishes_loses_nothing_acknowledged() {
    const ACKS: u64 = 2000;
    const WINDOW: usize = 64;
    let dir = TmpDir::new("kill");
    let mut n = natsd(&dir.0);
    let (nc, js) = connect(&n).await;
    create(&js).await;
    // Publish with a window of outstanding acks; every ack is recorded. The server is killed
    // with the window still full, so some publishes are in flight at the crash.
    let mut pending = VecDeque::new();
    let mut acked: Vec<u64> = Vec::new();
    let mut sent = 0u64;
    while (acked.len() as u64) < ACKS {
        while pending.len() < WINDOW {
            sent += 1;
            let f = js
                .publish("c.x", payload(sent))
                .await
                .expect("publish sent");
            pending.push_back((sent, f));
        }
        let (i, f) = pending.pop_front().expect("pending");
        let ack = tokio::time::timeout(T, f)
            .await
            .expect("ack in time")
            .expect("ack");
        assert_eq!(
            ack.sequence, i,
            "the stream was empty: publish i is sequence i"
        );
        acked.push(ack.sequence);
    }
    kill9(&mut n);
    drop(pending);
    drop(nc);
    let last_acked = *acked.last().expect("acks");
    assert!(acked.windows(2).all(|w| w[1] == w[0] + 1));

    let mut n = natsd(&dir.0);
    let (_nc, js) = connect(&n).await;
    let st = state(&js).await;
    assert!(
        st.messages >= ACKS,
        "{} messages after restart, {ACKS} were acknowledged",
        st.messages
    );
    assert_eq!(st.first_sequence, 1);
    assert!(st.last_sequence >= last_acked && st.last_sequence <= sent);
    assert_eq!(st.messages, st.last_sequence, "no holes");
    // Every stored message (acknowledged or in flight at the crash) is intact and in order.
    assert_eq!(check_all(&js, st.messages).await, st.messages);
    // Publishing continues with the next sequence.
    let next = st.last_sequence + 1;
    let ack = js
        .publish("c.x", payload(next))
        .await
        .expect("publish")
        .await
        .expect("ack");
    assert_eq!(ack.sequence, next);
    assert!(
        !n.seen.iter().any(|l| l.contains("panicked")),
        "{:#?}",
        n.seen
    );
    kill9(&mut n);
}

/// Publish `count` messages one ack at a time, then SIGKILL; returns the segment file.
async fn fill_and_kill(dir: &Path, count: u64) -> PathBuf {
    let mut n = natsd(dir);
    let (nc, js) = connect(&n).await;
    create(&js).await;
    for i in 1..=count {
        let ack = js
            .publish("c.x", payload(i))
            .await
            .expect("publish")
            .await
            .expect("ack");
        assert_eq!(ack.sequence, i);
    }
    drop(nc);
    kill9(&mut n);
    let msgs = dir.join("jetstream/$G/streams/C/msgs");
    let mut segs: Vec<PathBuf> = std::fs::read_dir(&msgs)
        .expect("msgs dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "blk"))
        .collect();
    segs.sort();
    segs.pop().expect("a segment file")
}

/// Restart on a damaged store of 100 messages: the server comes up (no panic), logs a line
/// naming the segment file, and the stream holds k of them intact for some k in `range`, its
/// last sequence still 100 (the lost ones are deleted messages); the next publish gets 101,
/// never a sequence already acknowledged. Returns k.
async fn restart_damaged(dir: &Path, seg: &Path, range: std::ops::RangeInclusive<u64>) -> u64 {
    let mut n = natsd(dir);
    let name = seg
        .file_name()
        .and_then(|f| f.to_str())
        .expect("file name")
        .to_string();
    let line = n.find_line(|l| l.contains(&name));
    assert!(
        line.contains("WARN") || line.contains("[WRN]"),
        "a warning: {line}"
    );
    assert!(line.contains("offset"), "the line says where: {line}");
    let (_nc, js) = connect(&n).await;
    let st = state(&js).await;
    let k = st.messages;
    assert!(range.contains(&k), "{k} messages recovered: {st:?}");
    assert_eq!(st.last_sequence, 100, "{st:?}");
    assert_eq!(st.deleted_count, Some(100 - k), "{st:?}");
    assert_eq!(check_all(&js, k).await, k);
    let ack = js
        .publish("c.x", payload(101))
        .await
        .expect("publish")
        .await
        .expect("ack");
    assert_eq!(ack.sequence, 101);
    assert_eq!(check_all(&js, k + 1).await, k + 1);
    assert!(n.child.try_wait().expect("try_wait").is_none(), "still up");
    assert!(
        !n.seen.iter().any(|l| l.contains("panicked")),
        "{:#?}",
        n.seen
    );
    kill9(&mut n);
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_segment_keeps_the_last_sequence() {
    let dir = TmpDir::new("trunc");
    let seg = fill_and_kill(&dir.0, 100).await;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .expect("open segment");
    let len = f.metadata().expect("stat").len();
    f.set_len(len - 5).expect("truncate");
    drop(f);
    // Only the last message was cut.
    restart_damaged(&dir.0, &seg, 99..=99).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_byte_loses_only_the_damaged_message() {
    let dir = TmpDir::new("flip");
    let seg = fill_and_kill(&dir.0, 100).await;
    let mut bytes = std::fs::read(&seg).expect("read segment");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&seg, &bytes).expect("write segment");
    // Only the damaged record goes; the ones before and after it stay.
    restart_damaged(&dir.0, &seg, 99..=99).await;
}
