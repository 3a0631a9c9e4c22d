//! A replicated stream's follower that was down while its group snapshotted and compacted
//! its log catches up from the stream's snapshot (the whole stream, sent in chunks): it
//! then holds every message at its own sequence with its subject, headers and payload, the
//! gaps of deleted messages and the durable consumer, and is needed for the quorum after;
//! a copy restarted after its group's snapshots is rebuilt from them.

mod common;

use std::time::Duration;

use async_nats::jetstream;
use common::jsc::{
    api, cluster_with, connect, create_stream, js_node, new_leader, node, publish_acked,
    publish_acked_or_explain, snapshot_often, walk, WAIT,
};
use natsd::Server;

/// A stored message: sequence, subject, header, payload.
type Msg = (u64, String, Option<Vec<u8>>, Vec<u8>);

/// This node's copy of `LOG`, every message.
fn copy_of(s: &Server) -> Option<Vec<Msg>> {
    let j = s.shared().jetstream.get()?.clone();
    let e = j.engine();
    let st = e.accounts.get("$G")?.streams.get("LOG")?;
    let mut out = Vec::new();
    let mut seq = 1;
    while let Ok(m) = st.store.load_next(None, seq) {
        seq = m.seq + 1;
        let header = m.header.as_ref().map(|h| h.to_vec());
        out.push((m.seq, m.subject.to_string(), header, m.data.to_vec()));
    }
    Some(out)
}

/// A snapshot's bytes, read a bit at a time; halfway through, another thread must be able
/// to take the engine.
struct EngineFree<'a> {
    data: &'a [u8],
    pos: usize,
    js: std::sync::Arc<natsd::jetstream::JetStream>,
    checked: bool,
}

impl std::io::Read for EngineFree<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if !self.checked && self.pos > self.data.len() / 2 {
            let js = self.js.clone();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _engine = js.engine();
                let _ = tx.send(());
            });
            assert!(
                rx.recv_timeout(WAIT).is_ok(),
                "the engine is held while the snapshot is read"
            );
            self.checked = true;
        }
        let n = out.len().min(16 << 10).min(self.data.len() - self.pos);
        out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Node `name` started again with its store dir, routed to the first node.
async fn start_again(js: &common::jsc::Js, name: &str) -> Server {
    let seed = common::cluster::route_port(&js.servers[0]);
    let mut o = js_node(&js.dir)(name, Some(seed));
    snapshot_often(name, &mut o);
    common::start(o).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_behind_a_compacted_log_catches_up_from_the_stream_snapshot() {
    catch_up("jsc-snap", "file").await;
}

/// The same for a memory stream: its copies' messages are in memory, their Raft logs and
/// snapshots on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_memory_stream_follower_catches_up_from_the_stream_snapshot() {
    catch_up("jsc-snap-mem", "memory").await;
}

async fn catch_up(prefix: &str, storage: &str) {
    let mut js = cluster_with(prefix, 3, snapshot_often).await;
    let nc = connect(&js.servers[0]).await;
    let config =
        format!(r#"{{"name":"LOG","subjects":["log.>"],"num_replicas":3,"storage":"{storage}"}}"#);
    let created = create_stream(&nc, &config).await;
    let leader = created["cluster"]["leader"]
        .as_str()
        .expect("leader")
        .to_string();
    let ctx = jetstream::new(nc.clone());
    publish_acked(&ctx, "log", 1, 10).await;
    let durable = api(
        &nc,
        "$JS.API.CONSUMER.CREATE.LOG.D",
        r#"{"stream_name":"LOG","config":{"durable_name":"D","ack_policy":"explicit"}}"#,
    )
    .await;
    assert!(durable["error"].is_null(), "{durable}");

    // A follower other than the seed (`n0`) goes away.
    let gone = js
        .servers
        .iter()
        .skip(1)
        .position(|s| s.shared().name != leader)
        .map(|i| i + 1)
        .expect("a follower");
    let name = js.servers[gone].shared().name.clone();
    js.servers.remove(gone).shutdown().await;

    // Meanwhile: many more entries than the log keeps, one message deleted, messages with
    // headers and of many sizes, and the durable's progress.
    publish_acked(&ctx, "log", 11, 60).await;
    for i in 61..=120u64 {
        let mut h = async_nats::HeaderMap::new();
        h.insert("Nats-Msg-Id", format!("id-{i}").as_str());
        let body = vec![b'a' + (i % 26) as u8; (i as usize * 997) % 70_000];
        let ack = ctx
            .publish_with_headers(format!("log.{i}"), h, body.into())
            .await
            .expect("publish")
            .await
            .expect("ack");
        assert_eq!(ack.sequence, i);
    }
    let del = api(&nc, "$JS.API.STREAM.MSG.DELETE.LOG", r#"{"seq":7}"#).await;
    assert_eq!(del["success"], true, "{del}");
    let consumer = ctx
        .get_stream("LOG")
        .await
        .expect("stream")
        .get_consumer::<jetstream::consumer::pull::Config>("D")
        .await
        .expect("consumer");
    let mut taken = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while taken < 5 {
        assert!(tokio::time::Instant::now() < deadline, "took {taken}");
        let Ok(mut batch) = consumer
            .fetch()
            .max_messages(5 - taken)
            .expires(Duration::from_secs(1))
            .messages()
            .await
        else {
            continue;
        };
        while let Ok(Some(Ok(m))) =
            tokio::time::timeout(WAIT, futures::StreamExt::next(&mut batch)).await
        {
            if m.double_ack().await.is_ok() {
                taken += 1;
            }
        }
    }

    // Back, with its store dir: it is sent the stream's snapshot and the log after it.
    js.servers.push(start_again(&js, &name).await);
    // (The first node may be a follower a moment behind.)
    common::wait_for("the first node's copy of 120 messages, one deleted", || {
        let n = copy_of(&js.servers[0]).map_or(0, |c| c.len());
        async move { n == 119 }
    })
    .await;
    let want = copy_of(&js.servers[0]).expect("the first node's copy");
    let back = js.servers.len() - 1;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = copy_of(&js.servers[back]);
        if got.as_ref() == Some(&want) {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            let got = got.unwrap_or_default();
            let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
            panic!(
                "the returning follower holds {} messages (want {}), last {:?}, first difference at {first_diff:?}",
                got.len(),
                want.len(),
                got.last().map(|m| m.0)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    {
        let j = js.servers[back]
            .shared()
            .jetstream
            .get()
            .cloned()
            .expect("js");
        let e = j.engine();
        let st = e.accounts.get("$G").and_then(|a| a.streams.get("LOG"));
        assert!(
            st.is_some_and(|st| st.consumers.contains_key("D")),
            "D is in the copy"
        );
    }

    // A snapshot is written a piece at a time, the engine taken for each piece only; the
    // pieces make the whole stream.
    {
        use natsd::jetstream::engine::replica_snap::{SnapCursor, SNAP_PIECE};
        use natsd::jetstream::snapshot::{Decoder, Item};
        let j = js.servers[0].shared().jetstream.get().cloned().expect("js");
        let (mut cur, mut buf, mut pieces) = (SnapCursor::default(), Vec::new(), 0);
        let mut dec = Decoder::new();
        let (mut msgs, mut consumers, mut whole) = (Vec::new(), 0, Vec::new());
        loop {
            let done = j
                .engine()
                .replica_snapshot_piece("$G", "LOG", &mut cur, &mut buf)
                .expect("piece");
            assert!(buf.len() < SNAP_PIECE + 80_000, "a piece of {}", buf.len());
            pieces += 1;
            dec.feed(&buf);
            whole.extend_from_slice(&buf);
            buf.clear();
            while let Some(item) = dec.next_item().expect("decodes") {
                match item {
                    Item::Msg(m) => msgs.push(m.seq),
                    Item::Consumer(_) => consumers += 1,
                    _ => {}
                }
            }
            if done {
                break;
            }
        }
        dec.finish().expect("ends with its end record");
        // A stream that is not here has no snapshot (an empty one would stand for it).
        let mut cur = SnapCursor::default();
        let none = j
            .engine()
            .replica_snapshot_piece("$G", "NOPE", &mut cur, &mut buf);
        assert!(none.is_err() && buf.is_empty(), "{none:?}");
        assert!(pieces > 1, "{pieces} pieces");
        assert_eq!(msgs, want.iter().map(|m| m.0).collect::<Vec<_>>());
        assert_eq!(consumers, 1);

        // Restoring a copy from it reads it into a store of its own while the engine is
        // free (the node's other streams go on), then leaves the same copy.
        let srv = js.servers[0].shared().clone();
        let mut input = EngineFree {
            data: &whole,
            pos: 0,
            js: j.clone(),
            checked: false,
        };
        natsd::jetstream::engine::replica_snap::restore_replica(&j, &srv, "$G", "LOG", &mut input)
            .expect("restored");
        assert!(input.checked);
        assert_eq!(copy_of(&js.servers[0]).as_ref(), Some(&want));
        let dir = js.dir.join(&js.servers[0].shared().name);
        let left: Vec<_> = walk(&dir)
            .into_iter()
            .filter(|p| p.to_string_lossy().contains("restoring"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    // The leader of now goes: the two left need the returned copy for a quorum, and the
    // next message takes the next sequence.
    // (The returning member may have called an election: whoever leads once one does.)
    let leader = new_leader(&nc, "LOG", "").await;
    let li = node(&js, &leader);
    js.servers.remove(li).shutdown().await;
    let nc = connect(&js.servers[0]).await;
    let ctx = jetstream::new(nc.clone());
    publish_acked_or_explain(&ctx, &js, "$G", "log", 121, 121).await;
    let info = api(&nc, "$JS.API.STREAM.INFO.LOG", "").await;
    assert_eq!(info["state"]["messages"], 120, "{info}");
    assert_eq!(info["state"]["last_seq"], 121, "{info}");
    let d = api(&nc, "$JS.API.CONSUMER.INFO.LOG.D", "").await;
    assert_eq!(d["ack_floor"]["stream_seq"], 5, "{d}");
    common::wait_for("both copies hold the same messages", || {
        let a = copy_of(&js.servers[0]);
        let same = a.as_ref().is_some_and(|a| a.len() == 120) && a == copy_of(&js.servers[1]);
        async move { same }
    })
    .await;

    // One of them restarts: its copy is rebuilt from its own snapshot and log.
    let name = js.servers[1].shared().name.clone();
    js.servers.remove(1).shutdown().await;
    js.servers.push(start_again(&js, &name).await);
    common::wait_for("the restarted copy holds every message", || {
        let a = copy_of(&js.servers[0]);
        let same = a.as_ref().is_some_and(|a| a.len() == 120) && a == copy_of(&js.servers[1]);
        async move { same }
    })
    .await;
    js.stop().await;
}
