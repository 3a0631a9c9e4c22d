//! `$JS.API.STREAM.RESTORE` in a cluster (`nats stream restore`), as nats-server does it:
//! the meta leader checks the request as a creation and places a new stream group
//! (assignment with `restore`); the group's first leader answers with the subject to send
//! the data to and takes the chunks. It reads them with the snapshot decoder as they come
//! and proposes what it read to the stream's log as fragments — each a whole small
//! snapshot (`engine/replica_snap.rs`) — so every replica stores the same messages at the
//! same sequences, through the log like any write. A chunk is answered once its fragment
//! is committed (the client's flow control); the empty chunk that ends the data is answered
//! with the stream's info once the last fragment (the stream's last sequence and its
//! consumers) is, as a single server answers it.
//!
//! A restore that fails (bad data, a stall of [`STALL`] without a chunk, which is also what
//! a leader that lost its place mid-restore comes to) drops the half-made stream (a
//! STREAM.DELETE to the meta leader), so the client can try again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::{lock, Item, JsCluster, Replica};
use crate::account::{Account, Handler, Subscription};
use crate::jetstream::consumer::Cx;
use crate::jetstream::engine::replica_snap::{RESTORE, RESTORE_END};
use crate::jetstream::engine::{body, Engine};
use crate::jetstream::snapshot::{self as snap, ConsumerRec, Decoder, Head, Item as Rec};
use crate::jetstream::store::StoredMsg;
use crate::jetstream::types::{ApiError, Obj, StreamConfig};
use crate::jetstream::Event;
use crate::server::ServerShared;

/// A restore that gets no chunk for this long is dropped (nats-server: 5 s).
const STALL: Duration = Duration::from_secs(5);

#[derive(Deserialize, Default)]
struct RestoreReq {
    #[serde(default)]
    config: StreamConfig,
}

/// Asks the meta leader to delete `name` (a restore that failed leaves nothing behind).
pub fn drop_stream(cx: &Cx<'_>, name: &str) {
    let reply = format!("_INBOX.natsd-restore.{:016x}", rand::random::<u64>());
    cx.send(
        &format!("$JS.API.STREAM.DELETE.{name}"),
        Some(&reply),
        None,
        b"",
    );
}

/// A restore's data arriving at the stream's leader. Dropped (the restore is over, or the
/// copy closed), it unsubscribes.
pub(super) struct Receiving {
    srv: std::sync::Weak<ServerShared>,
    sub: Arc<Subscription>,
    acc: Arc<Account>,
    state: Arc<Mutex<Recv>>,
}

impl Drop for Receiving {
    fn drop(&mut self) {
        if let Some(srv) = self.srv.upgrade() {
            srv.unsubscribe_internal(&self.acc, &self.sub);
        }
    }
}

struct Recv {
    stream: String,
    dec: Decoder,
    head: Option<Head>,
    consumers: Vec<ConsumerRec>,
    failed: Option<String>,
    last_active: Instant,
    started: std::time::SystemTime,
    bytes: u64,
    done: bool,
}

impl JsCluster {
    /// STREAM.RESTORE on the meta leader: nats-server's checks, then placed as a creation.
    pub(super) fn restore_stream(
        &self,
        engine: &Engine,
        srv: &Arc<ServerShared>,
        ev: &Event,
        name: &str,
    ) {
        const T: &str = "stream_restore_response";
        let Some(reply) = ev.reply.clone() else {
            return;
        };
        let fail = |e: ApiError| {
            super::requests::send(
                srv,
                &ev.acc,
                &reply,
                &crate::jetstream::engine::err_json(T, &e, ""),
            )
        };
        if ev.payload.iter().all(u8::is_ascii_whitespace) {
            return fail(ApiError::bad_request());
        }
        let mut cfg = match body::<RestoreReq>(&ev.payload) {
            Ok(r) => r.config,
            Err(e) => return fail(e),
        };
        if cfg.name.is_empty() {
            cfg.name = name.to_string();
        }
        if cfg.name != name {
            return fail(ApiError::stream_mismatch());
        }
        // The configuration, the limits, then a name in use (10130), as nats-server checks.
        self.create_stream(engine, srv, ev, name, Some(cfg));
    }

    /// On the first leader of a restored stream's group: subscribes to the data's subject
    /// and answers the request with it.
    pub(super) fn start_receiving(&self, srv: &Arc<ServerShared>, r: &mut Replica, reply: &str) {
        let Some(acc) = srv.accounts.get(&r.sa.account) else {
            return;
        };
        let name = r.sa.name.clone();
        let subject = format!(
            "$JS.SNAPSHOT.RESTORE.{name}.{:016x}{:016x}",
            rand::random::<u64>(),
            rand::random::<u64>()
        );
        let state = Arc::new(Mutex::new(Recv {
            stream: name.clone(),
            dec: Decoder::new(),
            head: None,
            consumers: Vec::new(),
            failed: None,
            last_active: Instant::now(),
            started: std::time::SystemTime::now(),
            bytes: 0,
            done: false,
        }));
        // Weak: the subscription must not keep the stream's proposer alive.
        let (st, tx, weak) = (state.clone(), r.tx.downgrade(), Arc::downgrade(srv));
        let account = r.sa.account.clone();
        let h: Handler = Arc::new(move |_, m| {
            let Some(srv) = weak.upgrade() else {
                return;
            };
            let Some(acc) = srv.accounts.get(&account) else {
                return;
            };
            let Some(tx) = tx.upgrade() else {
                return;
            };
            let reply = m.reply.map(|r| String::from_utf8_lossy(r).into_owned());
            chunk(&srv, &acc, &st, &tx, m.payload, reply);
        });
        let sub = match srv.subscribe_internal(&acc, &subject, None, h) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("JetStream: restore of {name:?}: {e}");
                return;
            }
        };
        tracing::info!("Starting restore for stream '{} > {name}'", acc.name);
        {
            let cx = Cx::new(srv, &acc);
            crate::jetstream::advisory::restore_create(&cx, &name);
            let mut o = Obj::typed("stream_restore_response");
            o.field("deliver_subject", &subject);
            cx.send(reply, None, None, o.done().as_bytes());
        }
        r.receiving = Some(Receiving {
            srv: Arc::downgrade(srv),
            sub,
            acc,
            state,
        });
    }

    /// At each tick: a restore whose data all came is over; one without a chunk for
    /// [`STALL`] is dropped with its stream. (A leader that loses its place mid-restore
    /// answers no more chunks, because its proposals fail, so the client stops and the
    /// restore stalls: a passing blip in leadership does not cost the stream.)
    pub(super) fn check_receiving(&self, srv: &Arc<ServerShared>, r: &mut Replica) {
        let Some(rc) = &r.receiving else {
            return;
        };
        let (done, stalled) = {
            let s = lock(&rc.state);
            (s.done, s.last_active.elapsed() >= STALL)
        };
        if !done && !stalled {
            return;
        }
        let Some(rc) = r.receiving.take() else {
            return;
        };
        if !done {
            let mut s = lock(&rc.state);
            s.done = true;
            tracing::warn!(
                "restore for stream '{} > {}' is stalled",
                rc.acc.name,
                s.stream
            );
            drop_stream(&Cx::new(srv, &rc.acc), &s.stream);
        }
    }
}

/// One chunk of the data (an empty one ends it).
fn chunk(
    srv: &Arc<ServerShared>,
    acc: &Arc<Account>,
    st: &Arc<Mutex<Recv>>,
    tx: &mpsc::UnboundedSender<Item>,
    payload: &[u8],
    reply: Option<String>,
) {
    let cx = Cx::new(srv, acc);
    let mut s = lock(st);
    if s.done {
        return;
    }
    s.last_active = Instant::now();
    let Some(reply) = reply else {
        tracing::warn!(
            "restore for stream '{} > {}' requires reply subject for each chunk",
            acc.name,
            s.stream
        );
        return;
    };
    if payload.is_empty() {
        s.done = true;
        let checked = match s.failed.take() {
            Some(e) => Err(e),
            None => s.dec.finish(),
        };
        let last = checked.and_then(|()| last_fragment(&s));
        crate::jetstream::advisory::restore_complete(&cx, &s.stream, s.started, s.bytes);
        match last {
            Ok(data) => propose(tx, RESTORE_END, reply, data),
            Err(e) => {
                tracing::warn!(
                    "Restore failed for stream '{} > {}': {e}",
                    acc.name,
                    s.stream
                );
                let e = ApiError::new(500, 10062, format!("restore failed: {e}"));
                let mut o = Obj::typed("stream_create_response");
                o.field("error", &e);
                cx.send(&reply, None, None, o.done().as_bytes());
                drop_stream(&cx, &s.stream);
            }
        }
        return;
    }
    s.bytes += payload.len() as u64;
    let mut msgs: Vec<StoredMsg> = Vec::new();
    if s.failed.is_none() {
        s.dec.feed(payload);
        loop {
            match s.dec.next_item() {
                Ok(None) => break,
                Ok(Some(Rec::Head(h))) if h.stream != s.stream => {
                    s.failed = Some("stream names do not match".into());
                    break;
                }
                Ok(Some(Rec::Head(h))) => s.head = Some(*h),
                Ok(Some(Rec::Consumer(c))) => s.consumers.push(*c),
                Ok(Some(Rec::Msg(m))) => msgs.push(m),
                Ok(Some(Rec::End)) => {}
                Err(e) => {
                    s.failed = Some(format!("snapshot corrupt: {e}"));
                    break;
                }
            }
        }
    }
    match (&s.failed, &s.head, msgs.is_empty()) {
        (None, Some(h), false) => {
            let data = fragment(h, &msgs, &[]);
            match data {
                Ok(d) => propose(tx, RESTORE, reply, d),
                Err(e) => {
                    s.failed = Some(e);
                    cx.send(&reply, None, None, b"");
                }
            }
        }
        // Nothing to add yet (or a failure, answered at the end as nats-server does).
        _ => {
            cx.send(&reply, None, None, b"");
        }
    }
}

fn propose(tx: &mpsc::UnboundedSender<Item>, subject: &str, reply: String, data: Vec<u8>) {
    let _ = tx.send(Item::Api {
        subject: subject.to_string(),
        reply,
        payload: Bytes::from(data),
    });
}

/// A fragment: `msgs` (in order) under a head that spans just them.
fn fragment(h: &Head, msgs: &[StoredMsg], consumers: &[ConsumerRec]) -> Result<Vec<u8>, String> {
    let mut head = h.clone();
    if let (Some(first), Some(last)) = (msgs.first(), msgs.last()) {
        head.first_seq = first.seq;
        head.last_seq = last.seq;
        head.last_ts = last.ts;
    }
    head.messages = msgs.len() as u64;
    let mut out = Vec::new();
    snap::encode_magic(&mut out);
    snap::encode_head(&mut out, &head)?;
    for c in consumers {
        snap::encode_consumer(&mut out, c)?;
    }
    for m in msgs {
        snap::encode_msg(&mut out, m);
    }
    snap::encode_end(&mut out, msgs.len() as u64, consumers.len() as u32);
    Ok(out)
}

/// The last fragment: the stream's last sequence (past the last message, where messages
/// were removed at the end) and its consumers.
fn last_fragment(s: &Recv) -> Result<Vec<u8>, String> {
    let h = s.head.as_ref().ok_or("snapshot without a head record")?;
    let mut head = h.clone();
    head.first_seq = h.last_seq + 1;
    fragment(&head, &[], &s.consumers)
}
