//! One stream: its configuration (defaults and checks as nats-server 2.9), its message
//! store, duplicate tracking, and what a publish into it does (expected-header checks,
//! limits, rollups, the PubAck).

use super::consumer::Consumer;
use super::store::{Discard, MsgStore, StoreLimits, StoredMsg};
use super::types::*;
use crate::account::Subscription;
use crate::subject::{is_valid_subject, overlaps, subset_match};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// nats-server's default duplicate window (2 minutes).
pub const DEFAULT_DUPLICATE_WINDOW: i64 = 120_000_000_000;
/// At most this many message ids are remembered per stream (oldest forgotten first).
const MAX_DEDUPE_IDS: usize = 1_000_000;

pub struct Stream {
    pub cfg: StreamConfig,
    pub created: i64,
    pub store: Box<dyn MsgStore>,
    /// The subscriptions on the stream's subjects (and its direct-get subjects).
    pub subs: Vec<Arc<Subscription>>,
    /// `Nats-Msg-Id` → (sequence, stored at) within the duplicate window.
    pub dedupe: HashMap<String, (u64, i64)>,
    pub dedupe_order: VecDeque<(i64, String)>,
    pub last_msg_id: String,
    pub consumers: BTreeMap<String, Consumer>,
    /// Where metadata lives (file streams); `None` for memory streams.
    pub dir: Option<PathBuf>,
}

/// nats-server's `setStreamConfigDefaults`.
pub fn apply_defaults(c: &mut StreamConfig) {
    if c.max_consumers == 0 {
        c.max_consumers = -1;
    }
    if c.max_msgs == 0 {
        c.max_msgs = -1;
    }
    if c.max_bytes == 0 {
        c.max_bytes = -1;
    }
    if c.max_msgs_per_subject == 0 {
        c.max_msgs_per_subject = -1;
    }
    if c.max_msg_size == 0 {
        c.max_msg_size = -1;
    }
    if c.num_replicas == 0 {
        c.num_replicas = 1;
    }
    // A mirror has no duplicate window (nats-server leaves it out).
    if c.duplicate_window == 0 && c.mirror.as_ref().is_none_or(|m| m.is_null()) {
        c.duplicate_window = if c.max_age != 0 && c.max_age < DEFAULT_DUPLICATE_WINDOW {
            c.max_age
        } else {
            DEFAULT_DUPLICATE_WINDOW
        };
    }
    super::mirror::normalize(c);
    if c.subjects.is_empty() && c.mirror.is_none() && c.sources.is_none() {
        c.subjects = vec![c.name.clone()];
    }
}

/// nats-server's `checkStreamCfg` (the parts natsd implements), after defaults.
pub fn check(c: &StreamConfig, max_payload: usize) -> Result<(), ApiError> {
    if !valid_name(&c.name) {
        return Err(ApiError::new(
            400,
            10058,
            "stream name is required and can not contain '.', '*', '>'",
        ));
    }
    if c.num_replicas > 1 {
        return Err(ApiError::replicas());
    }
    if c.num_replicas < 0 || c.num_replicas > 5 {
        return Err(ApiError::stream_config("replicas > 5 not supported"));
    }
    if c.max_msg_size > 0 && c.max_msg_size as usize > max_payload {
        return Err(ApiError::stream_config(
            "max message size larger than max payload",
        ));
    }
    if c.duplicate_window < 0 {
        return Err(ApiError::stream_config(
            "duplicates window can not be negative",
        ));
    }
    if c.max_age < 0 {
        return Err(ApiError::stream_config("max age can not be negative"));
    }
    if c.max_age != 0 && c.duplicate_window > c.max_age {
        return Err(ApiError::stream_config(
            "duplicates window can not be larger then max age",
        ));
    }
    if c.allow_rollup_hdrs && c.deny_purge {
        return Err(ApiError::stream_config(
            "roll-ups require the purge permission",
        ));
    }
    super::mirror::parse(c)?;
    if c.republish.as_ref().is_some_and(|r| !r.is_null()) {
        return Err(ApiError::stream_config(
            "stream republish is not supported by natsd yet",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for s in &c.subjects {
        if !seen.insert(s.as_str()) {
            return Err(ApiError::stream_config("duplicate subjects detected"));
        }
        if !is_valid_subject(s.as_bytes()) {
            return Err(ApiError::stream_config("invalid subject"));
        }
        if overlaps(s.as_bytes(), b"$JS.API.>") {
            return Err(ApiError::stream_config(
                "subjects overlap with jetstream api",
            ));
        }
    }
    // Subjects that overlap each other within one stream.
    for (i, a) in c.subjects.iter().enumerate() {
        for b in &c.subjects[i + 1..] {
            if subset_match(a.as_bytes(), b.as_bytes()) || subset_match(b.as_bytes(), a.as_bytes())
            {
                return Err(ApiError::stream_config("subjects overlap"));
            }
        }
    }
    Ok(())
}

/// nats-server's `stream update` rules beyond `check`.
pub fn check_update(old: &StreamConfig, new: &StreamConfig) -> Result<(), ApiError> {
    if new.storage != old.storage {
        return Err(ApiError::stream_config(
            "stream configuration update can not change storage type",
        ));
    }
    if new.retention != old.retention {
        return Err(ApiError::stream_config(
            "stream configuration update can not change retention policy",
        ));
    }
    if old.sealed && !new.sealed {
        return Err(ApiError::stream_config(
            "stream configuration update can not unseal a sealed stream",
        ));
    }
    if old.deny_delete && !new.deny_delete {
        return Err(ApiError::stream_config(
            "stream configuration update can not cancel deny message deletes",
        ));
    }
    if old.deny_purge && !new.deny_purge {
        return Err(ApiError::stream_config(
            "stream configuration update can not cancel deny purge",
        ));
    }
    Ok(())
}

pub fn limits_of(c: &StreamConfig) -> StoreLimits {
    StoreLimits {
        max_msgs: c.max_msgs,
        max_bytes: c.max_bytes,
        max_age: Duration::from_nanos(c.max_age.max(0) as u64),
        max_msgs_per_subject: c.max_msgs_per_subject,
        discard: match c.discard {
            DiscardPolicy::Old => Discard::Old,
            DiscardPolicy::New => Discard::New,
        },
    }
}

/// The outcome of a publish into a stream: the PubAck body to send.
pub enum Stored {
    New(u64),
    Duplicate(u64),
}

impl Stream {
    /// Apply a publish; the PubAck's payload on success or the error (nats-server's PubAck
    /// error JSON is built by the caller).
    pub fn accept(
        &mut self,
        subject: &str,
        hdr: Option<&[u8]>,
        data: &[u8],
        now: i64,
    ) -> Result<Stored, ApiError> {
        if self.cfg.sealed {
            return Err(ApiError::new(
                400,
                10109,
                "invalid operation on sealed stream",
            ));
        }
        let size = hdr.map_or(0, <[u8]>::len) + data.len();
        if self.cfg.max_msg_size > 0 && size > self.cfg.max_msg_size as usize {
            return Err(ApiError::new(
                400,
                10054,
                "message size exceeds maximum allowed",
            ));
        }
        self.expire_dedupe(now);
        let msg_id = header(hdr, "Nats-Msg-Id").filter(|s| !s.is_empty());
        if let Some(id) = msg_id {
            if let Some(&(seq, _)) = self.dedupe.get(id) {
                return Ok(Stored::Duplicate(seq));
            }
        }
        if let Some(s) = header(hdr, "Nats-Expected-Stream") {
            if s != self.cfg.name {
                return Err(ApiError::new(400, 10060, "expected stream does not match"));
            }
        }
        let state = self.store.state();
        if let Some(v) = header(hdr, "Nats-Expected-Last-Sequence") {
            if v.parse::<u64>().ok() != Some(state.last_seq) {
                return Err(ApiError::new(
                    400,
                    10071,
                    format!("wrong last sequence: {}", state.last_seq),
                ));
            }
        }
        if let Some(v) = header(hdr, "Nats-Expected-Last-Subject-Sequence") {
            let last = self.store.load_last(Some(subject)).map_or(0, |m| m.seq);
            if v.parse::<u64>().ok() != Some(last) {
                return Err(ApiError::new(
                    400,
                    10071,
                    format!("wrong last sequence: {last}"),
                ));
            }
        }
        if let Some(v) = header(hdr, "Nats-Expected-Last-Msg-Id") {
            if v != self.last_msg_id {
                return Err(ApiError::new(
                    400,
                    10070,
                    format!("wrong last msg ID: {}", self.last_msg_id),
                ));
            }
        }
        let rollup = header(hdr, "Nats-Rollup");
        if let Some(r) = rollup {
            if !self.cfg.allow_rollup_hdrs {
                return Err(ApiError::new(500, 10111, "rollup not permitted"));
            }
            if r != "sub" && r != "all" {
                return Err(ApiError::new(
                    500,
                    10111,
                    format!("rollup value invalid: {r}"),
                ));
            }
        }
        let seq = self
            .store
            .store(subject, hdr, data, now)
            .map_err(|e| match e {
                super::store::StoreError::MaxMsgs | super::store::StoreError::MaxBytes => {
                    ApiError::new(503, 10077, e.to_string())
                }
                other => ApiError::new(503, 10077, other.to_string()),
            })?;
        match rollup {
            Some("sub") => {
                let _ = self.store.purge(&super::store::Purge {
                    filter: Some(subject.to_string()),
                    seq: Some(seq),
                    keep: None,
                });
            }
            Some("all") => {
                let _ = self.store.purge(&super::store::Purge {
                    filter: None,
                    seq: Some(seq),
                    keep: None,
                });
            }
            _ => {}
        }
        if let Some(id) = msg_id {
            self.last_msg_id = id.to_string();
            if self.cfg.duplicate_window > 0 {
                self.dedupe.insert(id.to_string(), (seq, now));
                self.dedupe_order.push_back((now, id.to_string()));
                while self.dedupe_order.len() > MAX_DEDUPE_IDS {
                    if let Some((_, old)) = self.dedupe_order.pop_front() {
                        self.dedupe.remove(&old);
                    }
                }
            }
        }
        Ok(Stored::New(seq))
    }

    pub fn expire_dedupe(&mut self, now: i64) {
        let cutoff = now.saturating_sub(self.cfg.duplicate_window);
        while let Some((t, _)) = self.dedupe_order.front() {
            if *t > cutoff {
                break;
            }
            if let Some((_, id)) = self.dedupe_order.pop_front() {
                if self.dedupe.get(&id).is_some_and(|(_, at)| *at <= cutoff) {
                    self.dedupe.remove(&id);
                }
            }
        }
    }

    /// Rebuild the duplicate ids from the stored messages within the window (recovery).
    pub fn rebuild_dedupe(&mut self, now: i64) {
        if self.cfg.duplicate_window <= 0 {
            return;
        }
        let mut seq = self
            .store
            .seq_for_time(now.saturating_sub(self.cfg.duplicate_window));
        while let Ok(m) = self.store.load_next(None, seq) {
            if let Some(id) = header(m.header.as_deref(), "Nats-Msg-Id") {
                self.dedupe.insert(id.to_string(), (m.seq, m.ts));
                self.dedupe_order.push_back((m.ts, id.to_string()));
                self.last_msg_id = id.to_string();
            }
            seq = m.seq + 1;
        }
    }

    /// The stream's `state` JSON as nats-server writes it (`subjects` when asked for).
    pub fn state_json(&self, subjects_filter: Option<&str>) -> String {
        let st = self.store.state();
        let mut o = Obj::new();
        o.field("messages", &st.msgs)
            .field("bytes", &st.bytes)
            .field("first_seq", &st.first_seq)
            .field("first_ts", &time_str(st.first_ts))
            .field("last_seq", &st.last_seq)
            .field("last_ts", &time_str(st.last_ts));
        if st.num_subjects > 0 {
            o.field("num_subjects", &st.num_subjects);
        }
        if let Some(f) = subjects_filter.filter(|f| !f.is_empty()) {
            let subs = self.store.subjects(Some(f));
            if !subs.is_empty() {
                o.field("subjects", &subs);
            }
        }
        if st.num_deleted > 0 {
            o.field("num_deleted", &st.num_deleted);
        }
        o.field("consumer_count", &self.consumers.len());
        o.done()
    }

    /// `{"config":…,"created":…,"state":…}` fields into `o`.
    pub fn info_fields(&self, o: &mut Obj, subjects_filter: Option<&str>) {
        o.field("config", &self.cfg)
            .field("created", &time_str(self.created))
            .raw("state", &self.state_json(subjects_filter));
    }

    /// The message as a `$JS.API.STREAM.MSG.GET` answer's `message`.
    pub fn msg_json(m: &StoredMsg) -> String {
        use base64_lite::encode;
        let mut o = Obj::new();
        o.field("subject", &m.subject).field("seq", &m.seq);
        if let Some(h) = &m.header {
            if !h.is_empty() {
                o.field("hdrs", &encode(h));
            }
        }
        if !m.data.is_empty() {
            o.field("data", &encode(&m.data));
        }
        o.field("time", &time_str(m.ts));
        o.done()
    }
}

/// Standard base64 (with padding), as Go's json encodes `[]byte`.
pub mod base64_lite {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(b: &[u8]) -> String {
        let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
        for c in b.chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            s.push(T[(n >> 18) as usize & 63] as char);
            s.push(T[(n >> 12) as usize & 63] as char);
            s.push(if c.len() > 1 {
                T[(n >> 6) as usize & 63] as char
            } else {
                '='
            });
            s.push(if c.len() > 2 {
                T[n as usize & 63] as char
            } else {
                '='
            });
        }
        s
    }

    #[cfg(test)]
    #[test]
    fn encodes_like_go() {
        assert_eq!(encode(b"hello"), "aGVsbG8=");
        assert_eq!(encode(b""), "");
        assert_eq!(
            encode(b"NATS/1.0\r\nNats-Msg-Id: x1\r\n\r\n"),
            "TkFUUy8xLjANCk5hdHMtTXNnLUlkOiB4MQ0KDQo="
        );
    }
}
