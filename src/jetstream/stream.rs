//! One stream: its configuration (defaults and checks as nats-server 2.9), its message
//! store, duplicate tracking, and what a publish into it does (expected-header checks,
//! limits, rollups, the PubAck).

use super::consumer::Consumer;
use super::store::{Discard, MsgStore, StoreLimits, StoredMsg};
use super::types::*;
use crate::account::Subscription;
use crate::subject::{is_valid_subject, overlaps, subset_match};
use bytes::Bytes;
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
    /// `republish` messages waiting to be published (see `take_republished`).
    pub republished: Vec<Republished>,
    /// A PubAck's text up to its sequence, built at the first publish (engine `publish`).
    pub ack_prefix: String,
    /// A replicated stream's copy on this node (clustered JetStream): its group's view.
    pub replica: Option<super::engine::replica::ReplicaState>,
}

/// One message a stream's `republish` sends out.
pub struct Republished {
    pub subject: String,
    pub header: Vec<u8>,
    pub payload: Bytes,
}

/// A subject mapping as nats-server 2.9 builds one for `republish`: the destination may not
/// hold `*`; it holds a `>` exactly when the source does (the rest of the subject), and
/// `$N` / `{{wildcard(N)}}` tokens for the source's N-th `*`.
pub struct Transform {
    src: Vec<String>,
    dest: Vec<DestToken>,
}

enum DestToken {
    Literal(String),
    Wildcard(usize),
    Rest,
}

impl Transform {
    pub fn new(src: &str, dest: &str) -> Option<Transform> {
        if !is_valid_subject(src.as_bytes()) || !is_valid_subject(dest.as_bytes()) {
            return None;
        }
        let src: Vec<String> = src.split('.').map(str::to_string).collect();
        let pwcs = src.iter().filter(|t| *t == "*").count();
        let src_fwc = src.last().is_some_and(|t| t == ">");
        let mut out = Vec::new();
        for t in dest.split('.') {
            out.push(match t {
                "*" => return None,
                ">" => DestToken::Rest,
                _ => match wildcard_index(t) {
                    Some(n) if n >= 1 && n <= pwcs => DestToken::Wildcard(n),
                    Some(_) => return None,
                    None => DestToken::Literal(t.to_string()),
                },
            });
        }
        let dest_fwc = matches!(out.last(), Some(DestToken::Rest));
        if src_fwc != dest_fwc {
            return None;
        }
        Some(Transform { src, dest: out })
    }

    /// The mapped subject, or `None` when `subject` does not match the source.
    pub fn apply(&self, subject: &str) -> Option<String> {
        let toks: Vec<&str> = subject.split('.').collect();
        let mut wild = Vec::new();
        let mut rest: &[&str] = &[];
        for (i, s) in self.src.iter().enumerate() {
            match s.as_str() {
                ">" => {
                    rest = toks.get(i..).filter(|r| !r.is_empty())?;
                    break;
                }
                "*" => wild.push(*toks.get(i)?),
                lit => {
                    if toks.get(i) != Some(&lit) {
                        return None;
                    }
                }
            }
            if i + 1 == self.src.len() && toks.len() != self.src.len() {
                return None;
            }
        }
        let mut out: Vec<&str> = Vec::new();
        for d in &self.dest {
            match d {
                DestToken::Literal(l) => out.push(l),
                DestToken::Wildcard(n) => out.push(wild.get(n - 1)?),
                DestToken::Rest => out.extend_from_slice(rest),
            }
        }
        Some(out.join("."))
    }
}

/// `$N` or `{{wildcard(N)}}` (spaces allowed inside the braces) → N.
fn wildcard_index(t: &str) -> Option<usize> {
    if let Some(n) = t.strip_prefix('$') {
        return n.parse().ok();
    }
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?.trim();
    let args = inner.strip_prefix("wildcard(")?.strip_suffix(')')?;
    args.trim().parse().ok()
}

/// nats-server's `setStreamConfigDefaults`.
pub fn apply_defaults(c: &mut StreamConfig) {
    // Only a template makes a stream its own (engine/templates.rs), never a request.
    c.template_owner.clear();
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
    if let Some(rp) = c.republish.as_mut() {
        if rp.src.is_empty() {
            rp.src = ">".to_string();
        }
    }
}

/// The server's `jetstream { limits { duplicate_window } }` (ns, 0: none), as nats-server's
/// `checkStreamCfg` applies it: before [`apply_defaults`], an unset window becomes the
/// smaller of the default and the limit (or `max_age` when that is smaller still).
pub fn default_duplicates(c: &mut StreamConfig, limit: i64) {
    if c.duplicate_window == 0
        && c.mirror.as_ref().is_none_or(|m| m.is_null())
        && limit > 0
        && limit < DEFAULT_DUPLICATE_WINDOW
    {
        c.duplicate_window = if c.max_age != 0 && c.max_age < limit {
            c.max_age
        } else {
            limit
        };
    }
}

/// The server's `duplicate_window` limit, after [`check`]: nats-server's text (10052).
pub fn check_duplicates(c: &StreamConfig, limit: i64) -> Result<(), ApiError> {
    if limit > 0 && c.duplicate_window > limit {
        let d = std::time::Duration::from_nanos(limit as u64);
        return Err(ApiError::stream_config(format!(
            "duplicates window can not be larger then server limit of {}",
            crate::util::time::go_duration(d)
        )));
    }
    Ok(())
}

/// nats-server's `checkStreamCfg` (the parts natsd implements), after defaults.
pub fn check(c: &StreamConfig, max_payload: usize, clustered: bool) -> Result<(), ApiError> {
    if !valid_name(&c.name) {
        return Err(ApiError::new(
            400,
            10058,
            "stream name is required and can not contain '.', '*', '>'",
        ));
    }
    if c.description.as_ref().is_some_and(|d| d.len() > 4096) {
        return Err(ApiError::stream_config(
            "stream description is too long, maximum allowed is 4096",
        ));
    }
    // nats-server's order (2.9.10 and 2.15.1 alike): the bounds, then single-server mode.
    if c.num_replicas > 5 {
        return Err(ApiError::stream_config("maximum replicas is 5"));
    }
    if c.num_replicas < 0 {
        return Err(ApiError::new(
            400,
            10133,
            "replicas count cannot be negative",
        ));
    }
    if c.num_replicas > 1 && !clustered {
        return Err(ApiError::replicas());
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
    if c.mirror_direct && c.mirror.as_ref().is_none_or(|m| m.is_null()) {
        return Err(ApiError::stream_config(
            "stream has no mirror but does have mirror direct",
        ));
    }
    if c.discard_new_per_subject {
        if c.discard != DiscardPolicy::New {
            return Err(ApiError::stream_config(
                "discard new per subject requires discard new policy to be set",
            ));
        }
        if c.max_msgs_per_subject <= 0 {
            return Err(ApiError::stream_config(
                "discard new per subject requires max msgs per subject > 0",
            ));
        }
    }
    if let Some(rp) = &c.republish {
        if c.subjects
            .iter()
            .any(|s| overlaps(rp.dest.as_bytes(), s.as_bytes()))
        {
            return Err(ApiError::stream_config(
                "stream configuration for republish destination forms a cycle",
            ));
        }
        if Transform::new(&rp.src, &rp.dest).is_none() {
            return Err(ApiError::stream_config(
                "stream configuration for republish not valid",
            ));
        }
        let src = rp.src.as_bytes();
        if !c
            .subjects
            .iter()
            .any(|s| subset_match(src, s.as_bytes()) || subset_match(s.as_bytes(), src))
        {
            return Err(ApiError::stream_config(
                "stream configuration for republish source is not valid subset of subjects",
            ));
        }
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
    if new.max_consumers != old.max_consumers {
        return Err(ApiError::stream_config(
            "stream configuration update can not change MaxConsumers",
        ));
    }
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
    /// The consumers a listing shows: all but the direct ones (a mirror's or source's
    /// elsewhere), as nats-server.
    pub fn listed_consumers(&self) -> impl Iterator<Item = &super::consumer::Consumer> {
        self.consumers.values().filter(|c| !c.cfg.direct)
    }

    /// How many consumers info and limits count: the listed ones.
    pub fn consumer_count(&self) -> usize {
        self.listed_consumers().count()
    }

    /// A stream over `store`, without subscriptions, consumers or remembered message ids.
    pub fn new(
        cfg: StreamConfig,
        created: i64,
        store: Box<dyn MsgStore>,
        dir: Option<PathBuf>,
    ) -> Stream {
        Stream {
            cfg,
            created,
            store,
            subs: Vec::new(),
            dedupe: Default::default(),
            dedupe_order: Default::default(),
            last_msg_id: String::new(),
            consumers: BTreeMap::new(),
            dir,
            republished: Vec::new(),
            ack_prefix: String::new(),
            replica: None,
        }
    }

    /// Apply a publish; the PubAck's payload on success or the error (nats-server's PubAck
    /// error JSON is built by the caller).
    pub fn accept(
        &mut self,
        subject: &str,
        header_buf: Option<Bytes>,
        data_buf: Bytes,
        now: i64,
    ) -> Result<Stored, ApiError> {
        let hdr = header_buf.as_deref();
        let size = hdr.map_or(0, <[u8]>::len) + data_buf.len();
        if let Some(seq) = self.check(subject, hdr, size, now)? {
            return Ok(Stored::Duplicate(seq));
        }
        let rollup = header(hdr, "Nats-Rollup");
        self.accept_checked(subject, rollup, header_buf.clone(), data_buf, size, now)
    }

    /// The checks a publish passes before it is stored (nats-server's, up to its trace's
    /// `updateJetStreamEvent`): `Some(seq)` for a duplicate of message `seq`. A trace-only
    /// message stops here.
    pub fn check(
        &mut self,
        subject: &str,
        hdr: Option<&[u8]>,
        size: usize,
        now: i64,
    ) -> Result<Option<u64>, ApiError> {
        if self.cfg.sealed {
            return Err(ApiError::sealed());
        }
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
                return Ok(Some(seq));
            }
        }
        if let Some(s) = header(hdr, "Nats-Expected-Stream") {
            if s != self.cfg.name {
                return Err(ApiError::new(400, 10060, "expected stream does not match"));
            }
        }
        if let Some(v) = header(hdr, "Nats-Expected-Last-Sequence") {
            let last_seq = self.store.state().last_seq;
            if v.parse::<u64>().ok() != Some(last_seq) {
                return Err(ApiError::new(
                    400,
                    10071,
                    format!("wrong last sequence: {last_seq}"),
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
        Ok(None)
    }

    /// [`Stream::accept`] past [`Stream::check`]: the store's own limits, then the store.
    fn accept_checked(
        &mut self,
        subject: &str,
        rollup: Option<&str>,
        header_buf: Option<Bytes>,
        data_buf: Bytes,
        size: usize,
        now: i64,
    ) -> Result<Stored, ApiError> {
        let hdr = header_buf.as_deref();
        let msg_id = header(hdr, "Nats-Msg-Id").filter(|s| !s.is_empty());
        if self.cfg.discard_new_per_subject
            && self.cfg.discard == DiscardPolicy::New
            && self.cfg.max_msgs_per_subject > 0
        {
            let n = self.store.subjects(Some(subject)).get(subject).copied();
            if n.unwrap_or(0) as i64 >= self.cfg.max_msgs_per_subject {
                return Err(ApiError::new(
                    503,
                    10077,
                    "maximum messages per subject exceeded",
                ));
            }
        }
        // The subject's previous sequence, for a republish's Nats-Last-Sequence.
        let republish_to = self.cfg.republish.as_ref().and_then(|rp| {
            let to = Transform::new(&rp.src, &rp.dest)?.apply(subject)?;
            let last = self.store.load_last(Some(subject)).map_or(0, |m| m.seq);
            Some((to, last, rp.headers_only))
        });
        // The store keeps the payload; a republish shares it.
        let republish_payload = match &republish_to {
            Some((_, _, false)) => Some(data_buf.clone()),
            _ => None,
        };
        let seq = self
            .store
            .store_owned(subject, header_buf.clone(), data_buf, now)
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
        if let Some((to, last, headers_only)) = republish_to {
            let mut h = match hdr {
                Some(h) if h.ends_with(b"\r\n\r\n") => h[..h.len() - 2].to_vec(),
                _ => b"NATS/1.0\r\n".to_vec(),
            };
            let name = &self.cfg.name;
            h.extend_from_slice(
                format!(
                    "Nats-Stream: {name}\r\nNats-Subject: {subject}\r\nNats-Sequence: {seq}\r\nNats-Last-Sequence: {last}\r\n"
                )
                .as_bytes(),
            );
            if headers_only {
                h.extend_from_slice(
                    format!(
                        "Nats-Msg-Size: {size}\r\n",
                        size = size - hdr.map_or(0, <[u8]>::len)
                    )
                    .as_bytes(),
                );
            }
            h.extend_from_slice(b"\r\n");
            let payload = republish_payload.unwrap_or_default();
            self.republished.push(Republished {
                subject: to,
                header: h,
                payload,
            });
        }
        Ok(Stored::New(seq))
    }

    /// The republish messages of the publishes accepted since the last call, for the
    /// owner to publish.
    pub fn take_republished(&mut self) -> Vec<Republished> {
        std::mem::take(&mut self.republished)
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
    /// The `state` object; `subjects`: the per-subject counts to list (a STREAM.INFO
    /// `subjects_filter` page), left out when empty.
    pub fn state_json(&self, subjects: Option<&BTreeMap<String, u64>>, deleted: bool) -> String {
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
        if let Some(subs) = subjects.filter(|s| !s.is_empty()) {
            o.field("subjects", subs);
        }
        if st.num_deleted > 0 {
            o.field("num_deleted", &st.num_deleted);
            if deleted {
                o.field("deleted", &self.deleted_seqs(&st));
            }
        }
        o.field("consumer_count", &self.consumer_count());
        o.done()
    }

    /// The head record of a snapshot of this stream as it is now.
    pub fn snapshot_head(&self) -> super::snapshot::Head {
        let state = self.store.state();
        super::snapshot::Head {
            stream: self.cfg.name.clone(),
            config: self.cfg.clone(),
            created: self.created,
            first_seq: state.first_seq,
            last_seq: state.last_seq,
            last_ts: state.last_ts,
            messages: state.msgs,
        }
    }

    /// `{"config":…,"created":…,"state":…}` fields into `o`.
    pub fn info_fields(&self, o: &mut Obj, subjects: Option<&BTreeMap<String, u64>>) {
        self.info_fields_with(o, subjects, false);
    }

    /// [`Stream::info_fields`], with the sequences of deleted messages listed in the state
    /// when `deleted` (STREAM.INFO's `deleted_details`).
    pub fn info_fields_with(
        &self,
        o: &mut Obj,
        subjects: Option<&BTreeMap<String, u64>>,
        deleted: bool,
    ) {
        o.field("config", &self.cfg)
            .field("created", &time_str(self.created))
            .raw("state", &self.state_json(subjects, deleted));
        if let Some(r) = self.replica.as_ref().filter(|r| !r.cluster_json.is_empty()) {
            o.raw("cluster", &r.cluster_json);
        }
    }

    /// The missing sequences between the first and last message (at most `num_deleted`,
    /// found by walking the stored ones).
    fn deleted_seqs(&self, st: &super::store::StreamState) -> Vec<u64> {
        let mut out = Vec::new();
        let mut next = st.first_seq;
        while (out.len() as u64) < st.num_deleted && next <= st.last_seq {
            match self.store.load_next(None, next) {
                Ok(m) => {
                    out.extend(next..m.seq);
                    next = m.seq + 1;
                }
                Err(_) => {
                    out.extend(next..=st.last_seq);
                    break;
                }
            }
        }
        out.truncate(st.num_deleted as usize);
        out
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
