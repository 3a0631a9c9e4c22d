//! `$JS.API.STREAM.SNAPSHOT`: a stream sent as chunks of natsd's snapshot format
//! (`jetstream::snapshot`) to the request's `deliver_subject`, as nats-server 2.9 sends its
//! own: the answer first, then chunks each with the reply subject
//! `$JS.SNAPSHOT.ACK.<stream>.<id>.<chunk len>.<chunk index>`, then an empty message.
//!
//! The engine is never held for the whole snapshot: a snapshot is a cursor over the stream,
//! read a few chunks at a time, when an ack frees room in the window or on the timer. The
//! head and the consumers are taken when the request comes; messages up to the last
//! sequence of that moment are read as the chunks go (one removed meanwhile is left out).
//! Also this file: the per-account list of transfers (snapshots out, restores in,
//! `engine/restores.rs`) and the dispatch of their events.

use super::restores::Restore;
use super::*;
use crate::jetstream::snapshot::{self as fmt, ConsumerRec};

/// nats-server's default chunk size.
const DEFAULT_CHUNK: usize = 256 * 1024;
/// Bytes sent and not yet acknowledged before the sender slows down to one chunk per tick
/// (nats-server: 32 MiB, then one chunk per 10 ms without acks).
const WINDOW: usize = 8 << 20;
/// At most this much is read and sent per engine step (an event or a tick).
const STEP_BYTES: usize = 2 << 20;
const STEP_CHUNKS: usize = 64;
/// How long a snapshot waits for interest in its deliver subject before sending anyway.
const INTEREST_WAIT: Duration = Duration::from_secs(2);

/// The snapshots and restores under way in one account.
#[derive(Default)]
pub struct Transfers {
    out: Vec<SnapOut>,
    pub(super) restores: Vec<Restore>,
}

/// One snapshot being sent.
struct SnapOut {
    id: String,
    stream: String,
    deliver: String,
    ack_sub: Option<Arc<Subscription>>,
    chunk: usize,
    /// Encoded and not yet sent.
    buf: Vec<u8>,
    next_seq: u64,
    last_seq: u64,
    messages: u64,
    consumers: u32,
    ended: bool,
    index: u64,
    /// Bytes sent and not acknowledged.
    outstanding: usize,
    sent: u64,
    started: Instant,
    /// When it started, for the completion advisory.
    started_at: std::time::SystemTime,
    /// Someone listened on the deliver subject at some point (losing them ends it).
    interest: bool,
}

#[derive(Deserialize, Default)]
struct SnapshotReq {
    #[serde(default)]
    deliver_subject: String,
    #[serde(default)]
    no_consumers: bool,
    #[serde(default)]
    chunk_size: i64,
}

/// Go's `isEmptyRequest`: no bytes, or a JSON object without fields.
pub(super) fn is_empty_request(p: &[u8]) -> bool {
    p.is_empty()
        || serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(p)
            .is_ok_and(|m| m.is_empty())
}

/// A request body as Go decodes it after `isEmptyRequest`: `null` is the zero value, only
/// whitespace is invalid JSON.
pub(super) fn go_body<T: for<'de> Deserialize<'de> + Default>(p: &[u8]) -> Result<T, ApiError> {
    if p.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid_json());
    }
    body(p)
}

impl SnapOut {
    /// Encode until a chunk's worth is buffered or everything is.
    fn fill(&mut self, store: &dyn MsgStore) {
        while self.buf.len() < self.chunk && !self.ended {
            let next = (self.next_seq <= self.last_seq)
                .then(|| store.load_next(None, self.next_seq).ok())
                .flatten()
                .filter(|m| m.seq <= self.last_seq);
            match next {
                Some(m) => {
                    fmt::encode_msg(&mut self.buf, &m);
                    self.messages += 1;
                    self.next_seq = m.seq + 1;
                }
                None => {
                    fmt::encode_end(&mut self.buf, self.messages, self.consumers);
                    self.ended = true;
                }
            }
        }
    }

    /// Send what the window allows (`tick`: at least one chunk, as nats-server sends on
    /// after a short wait for acks). True when the snapshot is over (EOF sent).
    fn pump(&mut self, cx: &Cx<'_>, st: Option<&Stream>, tick: bool) -> bool {
        let Some(st) = st else {
            tracing::warn!(
                "JetStream: stream {:?} gone during its snapshot",
                self.stream
            );
            cx.send(&self.deliver, None, None, b"");
            return true;
        };
        let listening = cx.has_interest(&self.deliver);
        if !self.interest {
            if listening {
                self.interest = true;
            } else if self.started.elapsed() < INTEREST_WAIT {
                return false;
            }
        } else if !listening {
            tracing::warn!(
                "JetStream: snapshot of stream {:?}: interest in {:?} lost",
                self.stream,
                self.deliver
            );
            cx.send(&self.deliver, None, None, b"");
            return true;
        }
        let (mut bytes, mut n) = (0, 0);
        while n < STEP_CHUNKS && bytes < STEP_BYTES {
            if self.outstanding >= WINDOW && !(tick && n == 0) {
                return false;
            }
            self.fill(st.store.as_ref());
            if self.buf.is_empty() {
                cx.send(&self.deliver, None, None, b"");
                return true;
            }
            let take = self.chunk.min(self.buf.len());
            self.index += 1;
            let reply = format!(
                "$JS.SNAPSHOT.ACK.{}.{}.{take}.{}",
                self.stream, self.id, self.index
            );
            cx.send(&self.deliver, Some(&reply), None, &self.buf[..take]);
            self.buf.drain(..take);
            self.outstanding += take;
            self.sent += take as u64;
            bytes += take;
            n += 1;
        }
        false
    }
}

impl JsAccount {
    pub(super) fn stream_snapshot(
        &mut self,
        g: &Globals<'_>,
        srv: &Arc<ServerShared>,
        name: &str,
        p: &[u8],
    ) -> Res {
        const T: &str = "stream_snapshot_response";
        if is_empty_request(p) {
            return Err((ApiError::bad_request(), T));
        }
        let st = self
            .streams
            .get(name)
            .ok_or((ApiError::stream_not_found(), T))?;
        let req: SnapshotReq = go_body(p).map_err(|e| (e, T))?;
        if !crate::subject::is_valid_subject(req.deliver_subject.as_bytes()) {
            return Err((ApiError::new(400, 10015, "deliver subject not valid"), T));
        }
        if self.transfers.out.iter().any(|o| o.stream == name) {
            return Err((
                ApiError::new(500, 10064, "snapshot failed: snapshot in progress"),
                T,
            ));
        }
        let head = st.snapshot_head();
        let mut buf = Vec::new();
        fmt::encode_magic(&mut buf);
        let snap_err = |e: String| {
            (
                ApiError::new(500, 10064, format!("snapshot failed: {e}")),
                T,
            )
        };
        fmt::encode_head(&mut buf, &head).map_err(snap_err)?;
        let mut consumers = 0;
        if !req.no_consumers {
            for c in st.consumers.values() {
                let rec = ConsumerRec {
                    name: c.name.clone(),
                    config: c.cfg.clone(),
                    created: c.created,
                    state: c.state(),
                    origin: None,
                };
                fmt::encode_consumer(&mut buf, &rec).map_err(snap_err)?;
                consumers += 1;
            }
        }
        let id = format!("{}{}", random_name(), random_name());
        let h = handler(
            g.tx.clone(),
            Arc::from(self.acc.name.as_str()),
            EventKind::Api,
            None,
        );
        let ack_sub = subscribe(
            srv,
            &self.acc,
            &format!("$JS.SNAPSHOT.ACK.{name}.{id}.>"),
            None,
            h,
        );
        let max = srv.opts.max_payload.max(1);
        let chunk = match usize::try_from(req.chunk_size) {
            Ok(0) | Err(_) => DEFAULT_CHUNK,
            Ok(n) => n,
        }
        .min(max);
        tracing::info!("Starting snapshot for stream '{} > {name}'", self.acc.name);
        let state_json = st.state_json(None, false);
        let mut o = Obj::typed(T);
        o.field("config", &st.cfg).raw("state", &state_json);
        self.transfers.out.push(SnapOut {
            id,
            stream: name.to_string(),
            deliver: req.deliver_subject,
            ack_sub,
            chunk,
            buf,
            next_seq: head.first_seq.max(1),
            last_seq: head.last_seq,
            messages: 0,
            consumers,
            ended: false,
            index: 0,
            outstanding: 0,
            sent: 0,
            started: Instant::now(),
            started_at: std::time::SystemTime::now(),
            interest: false,
        });
        crate::jetstream::advisory::snapshot_create(&Cx::new(srv, &self.acc), name, &state_json);
        Ok(o.done())
    }

    /// A `$JS.SNAPSHOT.…` message: a snapshot chunk's ack or a restore chunk.
    pub(super) fn transfer_event(&mut self, g: &Globals<'_>, srv: &Arc<ServerShared>, ev: &Event) {
        let t: Vec<&str> = ev.subject.split('.').collect();
        match t.as_slice() {
            ["$JS", "SNAPSHOT", "ACK", _, id, len, ..] => {
                let len: usize = len.parse().unwrap_or(0);
                if let Some(i) = self.transfers.out.iter().position(|o| o.id == *id) {
                    let o = &mut self.transfers.out[i];
                    o.outstanding = o.outstanding.saturating_sub(len);
                    self.pump_snapshot(srv, i, false);
                }
            }
            ["$JS", "SNAPSHOT", "RESTORE", _, id] => self.restore_chunk(g, srv, id, ev),
            _ => {}
        }
    }

    /// Send on snapshot `i`; forget it once it is over.
    fn pump_snapshot(&mut self, srv: &Arc<ServerShared>, i: usize, tick: bool) {
        let acc = self.acc.clone();
        let cx = Cx::new(srv, &acc);
        let o = &mut self.transfers.out[i];
        if !o.pump(&cx, self.streams.get(&o.stream), tick) {
            return;
        }
        let o = self.transfers.out.swap_remove(i);
        if let Some(s) = &o.ack_sub {
            srv.unsubscribe_internal(&acc, s);
        }
        tracing::info!(
            "Completed snapshot of {} bytes ({} messages) for stream '{} > {}' in {:?}",
            o.sent,
            o.messages,
            acc.name,
            o.stream,
            o.started.elapsed()
        );
        crate::jetstream::advisory::snapshot_complete(&cx, &o.stream, o.started_at);
    }

    /// The timer: snapshots send on (one chunk even past the window), stalled restores go.
    pub(super) fn tick_transfers(&mut self, srv: &Arc<ServerShared>) {
        for i in (0..self.transfers.out.len()).rev() {
            self.pump_snapshot(srv, i, true);
        }
        self.expire_restores(srv);
    }

    /// Shutdown (or JetStream disabled for the account): withdraw every transfer's
    /// subscription, drop unfinished restores.
    pub(super) fn end_transfers(&mut self, srv: &ServerShared) {
        for o in self.transfers.out.drain(..) {
            if let Some(s) = &o.ack_sub {
                srv.unsubscribe_internal(&self.acc, s);
            }
        }
        for r in std::mem::take(&mut self.transfers.restores) {
            r.abort(srv, &self.acc);
        }
    }
}
