//! One consumer: its cursor over the stream, unacknowledged deliveries and redeliveries,
//! waiting pull requests, flow control, heartbeats and rate limit. Its configuration
//! (defaults and checks as nats-server 2.9) is in `config.rs`; `cx.rs` is where the engine
//! publishes from; `pull.rs` takes pull requests in; `acks.rs` takes acknowledgements.

mod acks;
mod config;
mod cx;
mod pull;

pub use config::{
    apply_defaults, apply_server_limits, check, check_replicated, check_server_limits, check_update,
};
pub use cx::Cx;
pub use pull::PullReq;

use super::advisory::{self, Action, Delivery};
use super::persist::ConsumerState;
use super::store::{MsgStore, StoredMsg};
use super::types::*;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;
use tokio::time::Instant;

/// nats-server's defaults.
pub const DEFAULT_ACK_WAIT: i64 = 30_000_000_000;
pub const DEFAULT_MAX_WAITING: i64 = 512;
pub const DEFAULT_MAX_ACK_PENDING: i64 = 1000;
pub const DEFAULT_INACTIVE: i64 = 5_000_000_000;
/// Flow control: a request after this many messages or bytes since the last one; delivery
/// stalls when a second window has gone out without an answer.
const FC_MSGS: u64 = 512;
const FC_BYTES: u64 = 2 * 1024 * 1024;
/// Messages delivered per consumer in one go (the timer continues).
const PUMP_BUDGET: usize = 4096;

#[derive(Clone, Debug)]
pub struct Pending {
    pub dseq: u64,
    /// Unix nanos of the last delivery.
    pub ts: i64,
    pub deadline: Instant,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Source {
    Redeliver,
    LastPerSubject,
    Stream,
}

pub struct Consumer {
    pub name: String,
    pub stream: String,
    pub cfg: ConsumerConfig,
    pub created: i64,
    pub durable: bool,
    /// Next stream sequence to look at, next consumer (delivery) sequence.
    pub sseq: u64,
    pub dseq: u64,
    pub pending: BTreeMap<u64, Pending>,
    /// Delivery counts above 1, by stream sequence.
    pub rdc: HashMap<u64, u64>,
    redeliver: VecDeque<u64>,
    in_redeliver: HashSet<u64>,
    lps: VecDeque<u64>,
    pub waiting: VecDeque<PullReq>,
    fc_reply: Option<String>,
    fc_msgs: u64,
    fc_bytes: u64,
    fc_sent: Instant,
    fc_n: u64,
    last_send: Instant,
    pub last_active: Instant,
    /// When a message was last delivered / an ack last moved something: consumer info's
    /// `delivered.last_active` / `ack_floor.last_active` (absent until then, as nats-server).
    delivered_at: Option<Instant>,
    acked_at: Option<Instant>,
    replay: Option<(Instant, i64)>,
    /// State changed since it was last saved.
    pub dirty: bool,
    /// `rate_limit_bps` of a push consumer, once its burst is known.
    rate: Option<RateLimit>,
    /// A copy on a member that does not lead the consumer's group: it delivers nothing,
    /// takes no acks and runs no timers; its progress comes from the group's log
    /// (`engine/replica_consumers.rs`). It takes over when this node comes to lead.
    pub passive: bool,
    /// The state last sent to the replicas (on the leader).
    pub replicated: Option<ConsumerState>,
    /// The progress last applied from a replicated stream's log (its creation's state
    /// until then), on every replica alike: interest and work-queue retention are decided
    /// by it, never by the leader's live state, so every copy removes the same messages at
    /// the same point of the log (`engine/replica.rs`).
    pub applied: Option<ConsumerState>,
    /// Replies owed to synchronous acks (`AckSync`, double ack) on a replicated
    /// consumer's leader: answered once the progress that holds them is committed.
    pub ack_replies: Vec<String>,
    /// The progress last applied from the consumer's own group (`cluster/cgroups.rs`),
    /// on every member alike.
    pub group_applied: Option<ConsumerState>,
    /// On the stream's leader: the group-applied progress last relayed to the stream's
    /// log (interest and work-queue retention sweep by it).
    pub relayed: Option<ConsumerState>,
    /// CONSUMER INFO's `cluster`, as this node sees the consumer's group (empty until the
    /// group has reported).
    pub cluster_json: String,
    /// Another member leads the consumer's group, as the cluster's last tick saw it.
    pub led_elsewhere: bool,
    /// Created by a live entry of its stream's log (not revived from a snapshot): its
    /// group may be bootstrapped at once.
    pub born_live: bool,
    /// A replicated stream's consumer: how it was created (none before natsd recorded it).
    pub origin: Option<super::persist::Origin>,
}

/// A token bucket in bytes: nats-server's consumer rate limiter (`rate_limit_bps` / 8 bytes
/// per second, a burst of the stream's `max_msg_size` or else the server's `max_payload`).
struct RateLimit {
    per_sec: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimit {
    /// Take `size` bytes now if the bucket holds them (a message bigger than the burst goes
    /// when the bucket is full).
    fn take(&mut self, size: f64, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.per_sec).min(self.burst);
        self.last = now;
        if self.tokens >= size || self.tokens >= self.burst {
            self.tokens -= size;
            true
        } else {
            false
        }
    }
}

fn nanos(n: i64) -> Duration {
    Duration::from_nanos(n.max(0) as u64)
}

/// `at + d` without overflow: absurd durations (a 200-year ack wait) mean "never" — a
/// century from now.
fn later(at: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 86_400);
    at.checked_add(d.min(CENTURY)).unwrap_or(at)
}

impl Consumer {
    pub fn new(
        name: String,
        stream: String,
        cfg: ConsumerConfig,
        created: i64,
        durable: bool,
        store: &dyn MsgStore,
    ) -> Consumer {
        let now = Instant::now();
        let filter = (!cfg.filter_subject.is_empty()).then_some(cfg.filter_subject.as_str());
        let st = store.state();
        let first = st.first_seq.max(1);
        let mut lps = VecDeque::new();
        let sseq = match cfg.deliver_policy {
            DeliverPolicy::All => first,
            DeliverPolicy::Last => store.load_last(filter).map_or(st.last_seq + 1, |m| m.seq),
            DeliverPolicy::New => st.last_seq + 1,
            DeliverPolicy::ByStartSequence => cfg.opt_start_seq.max(1),
            DeliverPolicy::ByStartTime => cfg
                .opt_start_time
                .as_deref()
                .and_then(parse_time)
                .map_or(st.last_seq + 1, |t| store.seq_for_time(t)),
            DeliverPolicy::LastPerSubject => {
                let mut seqs: Vec<u64> = store
                    .subjects(filter)
                    .keys()
                    .filter_map(|s| store.load_last(Some(s)).ok().map(|m| m.seq))
                    .collect();
                seqs.sort_unstable();
                lps = seqs.into();
                st.last_seq + 1
            }
        };
        Consumer {
            name,
            stream,
            cfg,
            created,
            durable,
            sseq,
            dseq: 1,
            pending: BTreeMap::new(),
            rdc: HashMap::new(),
            redeliver: VecDeque::new(),
            in_redeliver: HashSet::new(),
            lps,
            waiting: VecDeque::new(),
            fc_reply: None,
            fc_msgs: 0,
            fc_bytes: 0,
            fc_sent: now,
            fc_n: 0,
            last_send: now,
            last_active: now,
            delivered_at: None,
            acked_at: None,
            replay: None,
            dirty: true,
            rate: None,
            passive: false,
            replicated: None,
            applied: None,
            ack_replies: Vec::new(),
            group_applied: None,
            relayed: None,
            cluster_json: String::new(),
            led_elsewhere: false,
            born_live: false,
            origin: None,
        }
    }

    /// Start the `rate_limit_bps` limiter of a push consumer with `burst` bytes (the
    /// stream's `max_msg_size` if set, else the server's `max_payload`).
    pub fn set_rate_burst(&mut self, burst: u64) {
        self.rate = (self.is_push() && self.cfg.rate_limit_bps > 0).then(|| RateLimit {
            per_sec: self.cfg.rate_limit_bps as f64 / 8.0,
            burst: burst.max(1) as f64,
            tokens: burst.max(1) as f64,
            last: Instant::now(),
        });
    }

    pub fn is_push(&self) -> bool {
        !self.cfg.deliver_subject.is_empty()
    }

    pub fn filter(&self) -> Option<&str> {
        (!self.cfg.filter_subject.is_empty()).then_some(self.cfg.filter_subject.as_str())
    }

    /// Does this consumer see messages on `subject`?
    pub fn wants(&self, subject: &str) -> bool {
        self.filter()
            .is_none_or(|f| crate::subject::pattern_matches(f.as_bytes(), subject.as_bytes()))
    }

    /// Has this consumer finished with stream sequence `seq` (interest/workqueue retention)?
    pub fn done_with(&self, seq: u64, subject: &str) -> bool {
        !self.wants(subject)
            || (seq < self.sseq && !self.pending.contains_key(&seq) && !self.lps.contains(&seq))
    }

    /// [`Consumer::done_with`] as of the progress last applied from the log.
    pub fn applied_done_with(&self, seq: u64, subject: &str) -> bool {
        let Some(a) = &self.applied else {
            return self.done_with(seq, subject);
        };
        !self.wants(subject) || (seq < a.sseq && !a.pending.iter().any(|p| p.0 == seq))
    }

    pub fn num_pending(&self, store: &dyn MsgStore) -> u64 {
        self.lps.len() as u64 + store.num_pending(self.filter(), self.sseq, false)
    }

    fn ack_wait_for(&self, dc: u64) -> Duration {
        if !self.cfg.backoff.is_empty() {
            let i = (dc.saturating_sub(1) as usize).min(self.cfg.backoff.len() - 1);
            return nanos(self.cfg.backoff[i]);
        }
        nanos(self.cfg.ack_wait)
    }

    /// (consumer seq, stream seq) below which everything is acknowledged.
    pub fn ack_floor(&self) -> (u64, u64) {
        match self.pending.iter().next() {
            Some((s, p)) if self.cfg.ack_policy != AckPolicy::None => {
                (p.dseq.saturating_sub(1), s.saturating_sub(1))
            }
            _ => (self.dseq - 1, self.sseq.saturating_sub(1)),
        }
    }

    /// CONSUMER.INFO's body; in a cluster with the stream's `cluster` (a consumer leads
    /// where its stream does).
    pub fn info_json(
        &self,
        st: &crate::jetstream::stream::Stream,
        type_: Option<&str>,
        cx: Option<&Cx<'_>>,
    ) -> String {
        let store = st.store.as_ref();
        let mut o = match type_ {
            Some(t) => Obj::typed(t),
            None => Obj::new(),
        };
        let (fc, fs) = self.ack_floor();
        let (wall, mono) = (now_nanos(), Instant::now());
        let seqs = |c: u64, s: u64, at: Option<Instant>| {
            let mut x = Obj::new();
            x.field("consumer_seq", &c).field("stream_seq", &s);
            if let Some(at) = at {
                let ago = mono.saturating_duration_since(at).as_nanos() as i64;
                x.field("last_active", &time_str(wall - ago));
            }
            x.done()
        };
        let last_stream = match self.lps.front() {
            Some(_) => 0,
            None => self.sseq.saturating_sub(1),
        };
        o.field("stream_name", &self.stream)
            .field("name", &self.name)
            .field("created", &time_str(self.created))
            .field("config", &self.cfg)
            .raw(
                "delivered",
                &seqs(self.dseq - 1, last_stream, self.delivered_at),
            )
            .raw("ack_floor", &seqs(fc, fs, self.acked_at))
            .field("num_ack_pending", &self.pending.len())
            .field(
                "num_redelivered",
                &self
                    .rdc
                    .keys()
                    .filter(|s| self.pending.contains_key(s))
                    .count(),
            )
            .field("num_waiting", &self.waiting.len())
            .field("num_pending", &self.num_pending(store));
        if self.is_push() && cx.is_some_and(|cx| cx.has_interest(&self.cfg.deliver_subject)) {
            o.field("push_bound", &true);
        }
        if !self.cluster_json.is_empty() {
            o.raw("cluster", &self.cluster_json);
        } else if let Some(r) = st.replica.as_ref().filter(|r| !r.cluster_json.is_empty()) {
            o.raw("cluster", &r.cluster_json);
        }
        o.done()
    }

    pub fn state(&self) -> ConsumerState {
        ConsumerState {
            sseq: self.sseq,
            dseq: self.dseq,
            pending: self
                .pending
                .iter()
                .map(|(s, p)| (*s, p.dseq, p.ts, self.rdc.get(s).copied().unwrap_or(1)))
                .collect(),
            redelivered: self.rdc.iter().map(|(s, n)| (*s, *n)).collect(),
        }
    }

    /// Restore saved progress; unacknowledged messages are redelivered after their ack wait
    /// from now. A cursor beyond the stream's end (the store lost messages) is pulled back.
    pub fn restore(&mut self, st: &ConsumerState, store: &dyn MsgStore) {
        self.pending.clear();
        self.rdc.clear();
        self.redeliver.clear();
        self.in_redeliver.clear();
        let last = store.state().last_seq;
        self.sseq = st.sseq.clamp(1, last + 1);
        self.dseq = st.dseq.max(1);
        self.lps.clear();
        let now = Instant::now();
        for &(s, d, ts, dc) in &st.pending {
            if s > last {
                continue;
            }
            self.pending.insert(
                s,
                Pending {
                    dseq: d,
                    ts,
                    deadline: later(now, self.ack_wait_for(dc)),
                },
            );
        }
        for &(s, n) in &st.redelivered {
            if self.pending.contains_key(&s) {
                self.rdc.insert(s, n);
            }
        }
        self.dirty = false;
    }

    /// The next message to deliver and where it comes from (not consumed yet).
    fn peek(&mut self, store: &dyn MsgStore) -> Option<(StoredMsg, Source)> {
        while let Some(&s) = self.redeliver.front() {
            if self.pending.contains_key(&s) {
                if let Ok(m) = store.load(s) {
                    return Some((m, Source::Redeliver));
                }
                self.pending.remove(&s);
                self.rdc.remove(&s);
            }
            self.redeliver.pop_front();
            self.in_redeliver.remove(&s);
        }
        while let Some(&s) = self.lps.front() {
            if let Ok(m) = store.load(s) {
                return Some((m, Source::LastPerSubject));
            }
            self.lps.pop_front();
        }
        store
            .load_next(self.filter(), self.sseq)
            .ok()
            .map(|m| (m, Source::Stream))
    }

    fn consume(&mut self, src: Source, seq: u64) {
        match src {
            Source::Redeliver => {
                self.redeliver.pop_front();
                self.in_redeliver.remove(&seq);
            }
            Source::LastPerSubject => {
                self.lps.pop_front();
            }
            Source::Stream => self.sseq = seq + 1,
        }
    }

    /// Deliver what can go now. Stream sequences delivered under ack none are pushed to
    /// `acked` (they count as acknowledged for interest retention).
    pub fn pump(&mut self, cx: &Cx<'_>, store: &dyn MsgStore, acked: &mut Vec<u64>) {
        if self.passive {
            return;
        }
        let now = Instant::now();
        let mut remaining: Option<u64> = None;
        for _ in 0..PUMP_BUDGET {
            if self.is_push() {
                if !cx.has_interest(&self.cfg.deliver_subject) {
                    break;
                }
                if self.fc_reply.is_some() && self.fc_msgs >= FC_MSGS {
                    break;
                }
            } else if self.waiting.is_empty() {
                break;
            }
            let Some((m, src)) = self.peek(store) else {
                break;
            };
            let ack_none = self.cfg.ack_policy == AckPolicy::None;
            if src != Source::Redeliver
                && !ack_none
                && self.cfg.max_ack_pending > 0
                && self.pending.len() as i64 >= self.cfg.max_ack_pending
            {
                break;
            }
            if src == Source::Stream && self.cfg.replay_policy == ReplayPolicy::Original {
                match self.replay {
                    None => self.replay = Some((now, m.ts)),
                    Some((at, ts)) => {
                        if later(at, nanos(m.ts.saturating_sub(ts))) > now {
                            break;
                        }
                    }
                }
            }
            let dc = if src == Source::Redeliver {
                let n = self.rdc.get(&m.seq).copied().unwrap_or(1) + 1;
                if self.cfg.max_deliver > 0 && n as i64 > self.cfg.max_deliver {
                    // Out of deliveries: it stays unacknowledged but is not sent again.
                    advisory::max_deliveries(cx, self.delivery(m.seq, 0, n - 1));
                    self.consume(src, m.seq);
                    self.pending.remove(&m.seq);
                    self.rdc.remove(&m.seq);
                    self.dirty = true;
                    continue;
                }
                n
            } else {
                1
            };
            let size = m.size() as i64;
            // Over the rate limit: the timer pumps again.
            if let Some(rl) = self.rate.as_mut() {
                if !rl.take(size as f64, now) {
                    break;
                }
            }
            let (hdr, payload): (Option<Vec<u8>>, &[u8]) = if self.cfg.headers_only {
                (
                    Some(with_headers(
                        m.header.as_deref(),
                        &[("Nats-Msg-Size", &m.data.len().to_string())],
                    )),
                    &[],
                )
            } else {
                (m.header.as_ref().map(|h| h.to_vec()), &m.data)
            };
            // Pull: the request's byte budget counts what goes on the wire (subject, ack
            // reply, headers, payload), as nats-server; the ack's pending count is estimated.
            let wire = match self.waiting.front() {
                Some(r) if r.max_bytes > 0 && !self.is_push() => {
                    let rem = match (src, remaining) {
                        (Source::Stream, Some(r)) => r.saturating_sub(1),
                        (Source::Stream, None) => self.num_pending(store).saturating_sub(1),
                        _ => self.num_pending(store),
                    };
                    let ack = format!(
                        "$JS.ACK.{}.{}.{}.{}.{}.{}.{}",
                        self.stream, self.name, dc, m.seq, self.dseq, m.ts, rem
                    );
                    let h = hdr.as_ref().map_or(0, Vec::len);
                    (m.subject.len() + ack.len() + h + payload.len()) as i64
                }
                _ => 0,
            };
            let to = if self.is_push() {
                self.cfg.deliver_subject.clone()
            } else {
                let Some(req) = self.waiting.front_mut() else {
                    break;
                };
                // An expired request is answered 408 here too, not served until the timer
                // gets to it: a client that timed out must not get messages for it.
                if req.expires.is_some_and(|e| e <= now) {
                    let h = req.timeout_header();
                    let reply = req.reply.clone();
                    cx.send(&reply, None, Some(&h), b"");
                    self.waiting.pop_front();
                    continue;
                }
                // As nats-server: a request whose inbox nobody listens to (any more) is
                // dropped rather than served into the void. Checked once per request.
                if req.delivered == 0 && !cx.has_interest(&req.reply) {
                    self.waiting.pop_front();
                    continue;
                }
                // The next message does not fit in what is left of the request's bytes: it
                // ends with a 409 saying what it still wanted, delivered some or not.
                if req.max_bytes > 0 && wire > req.max_bytes {
                    let h = req.pending_header("409 Message Size Exceeds MaxBytes");
                    let reply = req.reply.clone();
                    cx.send(&reply, None, Some(&h), b"");
                    self.waiting.pop_front();
                    continue;
                }
                req.reply.clone()
            };
            self.consume(src, m.seq);
            let rem = match (src, remaining) {
                (Source::Stream, Some(r)) => r.saturating_sub(1),
                _ => self.num_pending(store),
            };
            remaining = Some(rem);
            let d = self.dseq;
            self.dseq += 1;
            let ack = format!(
                "$JS.ACK.{}.{}.{}.{}.{}.{}.{}",
                self.stream, self.name, dc, m.seq, d, m.ts, rem
            );
            cx.deliver(&to, &m.subject, Some(&ack), hdr.as_deref(), payload);
            self.last_send = now;
            self.last_active = now;
            self.delivered_at = Some(now);
            if ack_none {
                acked.push(m.seq);
            } else {
                self.pending.insert(
                    m.seq,
                    Pending {
                        dseq: d,
                        ts: now_nanos(),
                        deadline: later(now, self.ack_wait_for(dc)),
                    },
                );
                if dc > 1 {
                    self.rdc.insert(m.seq, dc);
                }
            }
            self.dirty = true;
            if let Some(req) = self.waiting.front_mut() {
                if !self.cfg.deliver_subject.is_empty() {
                    // push consumers have no requests
                } else {
                    req.batch -= 1;
                    req.delivered += 1;
                    req.last = now;
                    if req.max_bytes > 0 {
                        // What went on the wire, as nats-server counts it: subject, ack reply,
                        // headers and payload.
                        let sent = m.subject.len()
                            + ack.len()
                            + hdr.as_ref().map_or(0, Vec::len)
                            + payload.len();
                        req.max_bytes -= sent as i64;
                        if req.max_bytes <= 0 {
                            // Used up exactly: done, without a status (nats-server).
                            req.batch = 0;
                        }
                    }
                    if req.batch <= 0 {
                        self.waiting.pop_front();
                    }
                }
            }
            if self.cfg.flow_control {
                self.fc_msgs += 1;
                self.fc_bytes += size as u64;
                if self.fc_reply.is_none() && (self.fc_msgs >= FC_MSGS || self.fc_bytes >= FC_BYTES)
                {
                    self.send_fc(cx, now);
                }
            }
        }
        // No-wait requests end when nothing more is there; one with an expiry waits for its
        // first message first (nats-server's "one-shot": it ends after delivering some).
        if !self.is_push() && self.waiting.iter().any(|r| r.no_wait) {
            let empty = self.peek(store).is_none();
            let mut keep = VecDeque::new();
            while let Some(r) = self.waiting.pop_front() {
                if r.no_wait && (r.delivered > 0 || (empty && r.expires.is_none())) {
                    // 2.9.10: a 408 with what it still wanted after some were delivered
                    // (2.15.1 says 404 there; clients take either as the end of the fetch).
                    let h = if r.delivered == 0 {
                        status_header("404 No Messages", &[])
                    } else {
                        r.timeout_header()
                    };
                    cx.send(&r.reply, None, Some(&h), b"");
                } else {
                    keep.push_back(r);
                }
            }
            self.waiting = keep;
        }
    }

    fn send_fc(&mut self, cx: &Cx<'_>, now: Instant) {
        self.fc_n += 1;
        let reply = format!("$JS.FC.{}.{}.{}", self.stream, self.name, self.fc_n);
        let h = status_header("100 FlowControl Request", &[]);
        cx.deliver(
            &self.cfg.deliver_subject,
            &self.cfg.deliver_subject,
            Some(&reply),
            Some(&h),
            b"",
        );
        self.fc_reply = Some(reply);
        self.fc_msgs = 0;
        self.fc_bytes = 0;
        self.fc_sent = now;
        self.last_send = now;
    }

    /// A flow control answer arrived on `subject`.
    pub fn flow_control_reply(&mut self, subject: &str) {
        if self.fc_reply.as_deref() == Some(subject) {
            self.fc_reply = None;
        }
    }

    /// Timer work: redeliveries due, expired pull requests, heartbeats, stalled flow control.
    pub fn tick(&mut self, cx: &Cx<'_>, store: &dyn MsgStore, now: Instant) {
        if self.passive {
            return;
        }
        if self.cfg.ack_policy != AckPolicy::None {
            let due: Vec<u64> = self
                .pending
                .iter()
                .filter(|(s, p)| p.deadline <= now && !self.in_redeliver.contains(s))
                .map(|(s, _)| *s)
                .collect();
            for s in due {
                self.in_redeliver.insert(s);
                self.redeliver.push_back(s);
            }
        }
        if !self.is_push() {
            let mut keep = VecDeque::new();
            while let Some(mut r) = self.waiting.pop_front() {
                if r.expires.is_some_and(|e| e <= now) {
                    cx.send(&r.reply, None, Some(&r.timeout_header()), b"");
                    continue;
                }
                if let Some(hb) = r.hb {
                    if now.duration_since(r.last) >= hb {
                        let lc = (self.dseq - 1).to_string();
                        let ls = self.sseq.saturating_sub(1).to_string();
                        let h = status_header(
                            "100 Idle Heartbeat",
                            &[("Nats-Last-Consumer", &lc), ("Nats-Last-Stream", &ls)],
                        );
                        cx.send(&r.reply, None, Some(&h), b"");
                        r.last = now;
                    }
                }
                keep.push_back(r);
            }
            self.waiting = keep;
            if !self.waiting.is_empty() {
                self.last_active = now;
            }
        } else {
            let bound = cx.has_interest(&self.cfg.deliver_subject);
            if bound {
                self.last_active = now;
            }
            if let Some(reply) = self.fc_reply.clone() {
                if self.fc_msgs >= FC_MSGS
                    && now.duration_since(self.fc_sent) >= Duration::from_secs(2)
                    && bound
                {
                    // Ask again: the answer may have been lost.
                    self.fc_n = self.fc_n.wrapping_add(0);
                    let h = status_header("100 FlowControl Request", &[]);
                    cx.deliver(
                        &self.cfg.deliver_subject,
                        &self.cfg.deliver_subject,
                        Some(&reply),
                        Some(&h),
                        b"",
                    );
                    self.fc_sent = now;
                }
            }
            if self.cfg.idle_heartbeat > 0
                && bound
                && now.duration_since(self.last_send) >= nanos(self.cfg.idle_heartbeat)
            {
                let lc = (self.dseq - 1).to_string();
                let ls = self.sseq.saturating_sub(1).to_string();
                let mut extra = vec![
                    ("Nats-Last-Consumer", lc.as_str()),
                    ("Nats-Last-Stream", ls.as_str()),
                ];
                let stalled = self.fc_reply.clone();
                if let Some(s) = &stalled {
                    extra.push(("Nats-Consumer-Stalled", s.as_str()));
                }
                let h = status_header("100 Idle Heartbeat", &extra);
                cx.deliver(
                    &self.cfg.deliver_subject,
                    &self.cfg.deliver_subject,
                    None,
                    Some(&h),
                    b"",
                );
                self.last_send = now;
            }
        }
        let _ = store;
    }

    /// Tell waiting pull requests, and the consumer advisory's listeners, the consumer is
    /// gone.
    pub fn deleted(&mut self, cx: &Cx<'_>) {
        if self.passive {
            return; // the leader's copy tells
        }
        for r in self.waiting.drain(..) {
            let h = status_header("409 Consumer Deleted", &[]);
            cx.send(&r.reply, None, Some(&h), b"");
        }
        advisory::consumer_action(cx, &self.stream, &self.name, Action::Delete);
    }

    /// Stream sequence `sseq`, delivered `deliveries` times, as the advisories describe it.
    fn delivery(&self, sseq: u64, cseq: u64, deliveries: u64) -> Delivery<'_> {
        Delivery {
            stream: &self.stream,
            consumer: &self.name,
            cseq,
            sseq,
            deliveries,
        }
    }

    /// An ephemeral consumer unused for its inactive threshold.
    pub fn inactive(&self, now: Instant) -> bool {
        !self.durable
            && self.cfg.inactive_threshold > 0
            && now.duration_since(self.last_active) >= nanos(self.cfg.inactive_threshold)
    }

    pub fn has_work(&self) -> bool {
        !self.redeliver.is_empty() || !self.lps.is_empty()
    }
}
