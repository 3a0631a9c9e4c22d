//! Stream mirrors and sources on one server: nats-server 2.9's `mirror` and `sources`.
//! Origins in the same account and server are copied directly (below); `external` origins
//! (another domain or account) through the origin's API, in [`remote`].
//!
//! A following stream copies its origins' messages on the engine's timer, up to [`BUDGET`]
//! per origin per tick (nats-server's copies are asynchronous too). A mirror keeps the
//! origin's sequences and timestamps: a gap in the origin (deleted messages) stays a gap.
//! A source appends through the stream's own publish checks (limits, dedupe, rollups) with
//! the header `Nats-Stream-Source: <origin> <origin sequence>`, as nats-server 2.9.10 writes
//! it. After a restart the cursors come back from the stored messages: a mirror's last
//! sequence, a source's newest `Nats-Stream-Source` header.

use super::consumer::Cx;
use super::stream::Stream;
use super::types::{header, now_nanos, parse_time, with_headers, ApiError, Obj, StreamConfig};
use serde_json::Value;
use std::collections::BTreeMap;
use tokio::time::Instant;

pub mod remote;

/// Messages copied per origin per tick.
const BUDGET: usize = 10_000;
/// How far back a restart looks for a source's newest copied message.
const RECOVER_SCAN: u64 = 100_000;
/// The header a source's copies carry.
pub const SOURCE_HEADER: &str = "Nats-Stream-Source";

/// Where a following stream copies from.
#[derive(Clone, Debug, PartialEq)]
pub struct Origin {
    pub name: String,
    pub start_seq: u64,
    pub start_time: Option<i64>,
    pub filter: Option<String>,
    /// Another domain's or account's API (`None`: this server's stream of that name).
    pub external: Option<remote::External>,
}

impl Origin {
    /// The name its copies carry in `Nats-Stream-Source` (with a hash of the API prefix
    /// for an external one, as nats-server's `iname`).
    pub fn label(&self) -> String {
        match &self.external {
            Some(e) => remote::label(&self.name, e),
            None => self.name.clone(),
        }
    }
}

/// One origin and how far the copy got.
pub struct Follow {
    pub origin: Origin,
    /// The next origin sequence to copy; 0 until the first copy picks the start.
    pub next: u64,
    /// When a message was last copied (the info's `active`).
    pub active: Option<Instant>,
    pub since: Instant,
    /// An external origin's consumer, once asked for.
    pub remote: Option<remote::Remote>,
    /// An external origin: no new consumer is asked for before this.
    pub retry_at: Option<Instant>,
    /// An external origin: attempts that failed in a row (error answers, silence).
    pub fails: u32,
}

/// What one stream follows: its mirror, or its sources.
pub struct Follows {
    pub mirror: bool,
    pub list: Vec<Follow>,
    /// External copies the store has not flushed yet (the timer flushes them).
    pub unflushed: bool,
}

fn set(v: &Option<Value>) -> Option<&Value> {
    v.as_ref().filter(|v| !v.is_null())
}

fn origin(v: &Value, cfg: &StreamConfig) -> Result<Origin, ApiError> {
    let bad = || ApiError::stream_config("stream mirror and source entries must be objects");
    let o = v.as_object().ok_or_else(bad)?;
    let external = remote::External::parse(o);
    if let Some(e) = &external {
        remote::check(e, &cfg.subjects)?;
        if cfg.num_replicas > 1 {
            return Err(ApiError::stream_config(
                "replicated mirrors and sources of another domain or account (external) are not supported by natsd yet",
            ));
        }
    }
    let name = o.get("name").and_then(Value::as_str).unwrap_or("");
    let start_time = match o.get("opt_start_time").and_then(Value::as_str) {
        Some(t) => Some(
            parse_time(t)
                .ok_or_else(|| ApiError::stream_config(format!("invalid opt_start_time {t:?}")))?,
        ),
        None => None,
    };
    Ok(Origin {
        name: name.to_string(),
        start_seq: o.get("opt_start_seq").and_then(Value::as_u64).unwrap_or(0),
        start_time,
        filter: o
            .get("filter_subject")
            .and_then(Value::as_str)
            .filter(|f| !f.is_empty() && *f != ">")
            .map(str::to_string),
        external,
    })
}

/// The origins `cfg` names (none: not a following stream), with nats-server's checks.
pub fn parse(cfg: &StreamConfig) -> Result<Option<Follows>, ApiError> {
    let mirror = set(&cfg.mirror);
    let sources = set(&cfg.sources);
    if let Some(m) = mirror {
        if !cfg.subjects.is_empty() {
            return Err(ApiError::new(
                400,
                10034,
                "stream mirrors can not contain subjects",
            ));
        }
        if sources
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty())
        {
            return Err(ApiError::new(
                400,
                10031,
                "stream mirrors can not also contain other sources",
            ));
        }
        let o = origin(m, cfg)?;
        if o.name == cfg.name && o.external.is_none() {
            return Err(ApiError::stream_config("detected cycle"));
        }
        return Ok(Some(Follows::new(true, vec![o])));
    }
    let Some(s) = sources else {
        return Ok(None);
    };
    let list = s
        .as_array()
        .ok_or_else(|| ApiError::stream_config("stream sources must be a list"))?;
    let mut origins = Vec::with_capacity(list.len());
    for v in list {
        let o = origin(v, cfg)?;
        if o.name == cfg.name && o.external.is_none() {
            return Err(ApiError::stream_config("detected cycle"));
        }
        origins.push(o);
    }
    if origins.is_empty() {
        return Ok(None);
    }
    Ok(Some(Follows::new(false, origins)))
}

/// A stream update may change sources but never a mirror (nats-server 2.9: 10055).
pub fn check_update(old: &StreamConfig, new: &StreamConfig) -> Result<(), ApiError> {
    if set(&old.mirror) != set(&new.mirror) {
        return Err(ApiError::new(
            400,
            10055,
            "stream mirror configuration can not be updated",
        ));
    }
    Ok(())
}

impl Follows {
    fn new(mirror: bool, origins: Vec<Origin>) -> Follows {
        let now = Instant::now();
        Follows {
            mirror,
            unflushed: false,
            list: origins
                .into_iter()
                .map(|origin| Follow {
                    origin,
                    next: 0,
                    active: None,
                    since: now,
                    remote: None,
                    retry_at: None,
                    fails: 0,
                })
                .collect(),
        }
    }

    /// Keep the cursors of origins that stay (a sources update).
    pub fn carry_over(&mut self, mut old: Follows) {
        for f in &mut self.list {
            if let Some(o) = old.list.iter_mut().find(|o| o.origin == f.origin) {
                f.next = o.next;
                f.active = o.active;
                f.since = o.since;
                f.remote = o.remote.take();
                f.retry_at = o.retry_at;
                f.fails = o.fails;
            }
        }
    }

    /// Pick the cursors up from what `st` (the following stream) already holds.
    pub fn recover(&mut self, st: &Stream) {
        let s = st.store.state();
        if self.mirror {
            if s.last_seq > 0 {
                self.list[0].next = s.last_seq + 1;
            }
            return;
        }
        if s.msgs == 0 {
            return;
        }
        let floor = s.first_seq.max(s.last_seq.saturating_sub(RECOVER_SCAN));
        let labels: Vec<String> = self.list.iter().map(|f| f.origin.label()).collect();
        let mut seq = s.last_seq;
        while seq >= floor && self.list.iter().any(|f| f.next == 0) {
            if let Ok(m) = st.store.load(seq) {
                let from = header(m.header.as_deref(), SOURCE_HEADER)
                    .and_then(|v| v.rsplit_once(' '))
                    .and_then(|(n, q)| q.parse::<u64>().ok().map(|q| (n, q)));
                if let Some((name, q)) = from {
                    let at = self
                        .list
                        .iter()
                        .zip(&labels)
                        .position(|(f, l)| f.next == 0 && l == name);
                    if let Some(f) = at.map(|i| &mut self.list[i]) {
                        f.next = q + 1;
                    }
                }
            }
            if seq == 0 {
                break;
            }
            seq -= 1;
        }
    }

    /// The info's `mirror` or `sources` field.
    pub fn info_fields<'a>(&'a self, o: &mut Obj, streams: &BTreeMap<String, Stream>) {
        let now = Instant::now();
        let entry = |f: &'a Follow| -> SourceInfo<'a> {
            let lag = match (&f.origin.external, &f.remote) {
                (Some(_), r) => r.as_ref().map_or(0, |r| r.lag),
                (None, _) => streams.get(&f.origin.name).map_or(0, |s| {
                    let last = s.store.state().last_seq;
                    last.saturating_sub(f.next.max(1) - 1)
                }),
            };
            let active = now
                .duration_since(f.active.unwrap_or(f.since))
                .as_nanos()
                .min(i64::MAX as u128) as i64;
            SourceInfo {
                name: &f.origin.name,
                external: f.origin.external.as_ref(),
                lag,
                active,
            }
        };
        if self.mirror {
            if let Some(f) = self.list.first() {
                o.field("mirror", &entry(f));
            }
        } else {
            let v: Vec<SourceInfo<'_>> = self.list.iter().map(entry).collect();
            o.field("sources", &v);
        }
    }
}

/// One origin in stream info, in nats-server's field order.
#[derive(serde::Serialize)]
struct SourceInfo<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    external: Option<&'a remote::External>,
    lag: u64,
    /// Nanoseconds since the last copy (or since the stream was set up).
    active: i64,
}

/// nats-server echoes every mirror and source entry with its `name`, even an empty one,
/// and an `external` with both its prefixes.
pub fn normalize(cfg: &mut StreamConfig) {
    let named = |v: &mut Value| {
        if let Some(o) = v.as_object_mut() {
            o.entry("name")
                .or_insert_with(|| Value::String(String::new()));
            if let Some(e) = o.get_mut("external").and_then(Value::as_object_mut) {
                e.entry("deliver")
                    .or_insert_with(|| Value::String(String::new()));
            }
        }
    };
    if let Some(m) = cfg.mirror.as_mut() {
        named(m);
    }
    if let Some(Value::Array(list)) = cfg.sources.as_mut() {
        list.iter_mut().for_each(named);
    }
}

/// Copy what the following streams of one account are missing from their origins. Returns
/// whether anything was copied (their consumers then have work).
pub fn pump(
    cx: &Cx<'_>,
    tx: &super::Queue,
    streams: &mut BTreeMap<String, Stream>,
    follows: &mut BTreeMap<String, Follows>,
    limits: &super::limits::AccountLimits,
) -> bool {
    let mut copied = false;
    for (name, fl) in follows.iter_mut() {
        // A replicated stream copies through its log (cluster/copier.rs).
        if streams.get(name).is_some_and(|s| s.replica.is_some()) {
            continue;
        }
        if std::mem::take(&mut fl.unflushed) {
            if let Some(Err(e)) = streams.get_mut(name).map(|st| st.store.flush()) {
                tracing::error!("JetStream: stream {name:?} flush: {e}");
            }
            copied = true;
        }
        for f in &mut fl.list {
            if f.origin.external.is_some() {
                remote::tick(cx, tx, name, fl.mirror, f);
                continue;
            }
            let Some(origin) = streams.get(&f.origin.name) else {
                continue; // not there (yet): nats-server waits for it too
            };
            if f.next == 0 {
                f.next = if f.origin.start_seq > 0 {
                    f.origin.start_seq
                } else if let Some(t) = f.origin.start_time {
                    origin.store.seq_for_time(t)
                } else {
                    1
                };
            }
            let mut batch = Vec::new();
            while batch.len() < BUDGET {
                match origin.store.load_next(f.origin.filter.as_deref(), f.next) {
                    Ok(m) => {
                        f.next = m.seq + 1;
                        batch.push(m);
                    }
                    Err(_) => break,
                }
            }
            if batch.is_empty() {
                continue;
            }
            // No limits for the stream's tier (any more): it waits as one over its limit.
            let room = super::limits::room(limits, streams, name, 0, &mut Default::default())
                .unwrap_or(Some(0));
            let Some(st) = streams.get_mut(name) else {
                break;
            };
            let now = now_nanos();
            for m in batch {
                // Over the account's limit: copying stops here and resumes once there is
                // room (nothing is dropped).
                let seq = m.seq;
                if !copy(st, fl.mirror, &f.origin.name, m, now, room) {
                    tracing::debug!("JetStream: stream {name:?} waits: account over its limit");
                    f.next = seq;
                    break;
                }
            }
            // A sourcing stream's own republish applies to what it takes in.
            for r in st.take_republished() {
                cx.send(&r.subject, None, Some(&r.header), &r.payload);
            }
            if let Err(e) = st.store.flush() {
                tracing::error!("JetStream: stream {name:?} flush: {e}");
            }
            f.active = Some(Instant::now());
            copied = true;
        }
    }
    copied
}

/// A message for one of stream `name`'s external origins ([`remote::on_event`]): whether
/// it was copied (the stream's consumers then have work).
pub fn on_sync(
    cx: &Cx<'_>,
    streams: &mut BTreeMap<String, Stream>,
    follows: &mut BTreeMap<String, Follows>,
    limits: &super::limits::AccountLimits,
    (name, key): (&str, &str),
    ev: &super::Event,
) -> bool {
    // No limits for the stream's tier (any more): it waits as one over its limit.
    let room =
        super::limits::room(limits, streams, name, 0, &mut Default::default()).unwrap_or(Some(0));
    let (Some(fl), Some(st)) = (follows.get_mut(name), streams.get_mut(name)) else {
        return false;
    };
    for f in &mut fl.list {
        match remote::on_event(cx, st, fl.mirror, f, key, ev, room) {
            remote::Outcome::NotOurs => continue,
            remote::Outcome::Nothing => return false,
            remote::Outcome::Copied => {
                for r in st.take_republished() {
                    cx.send(&r.subject, None, Some(&r.header), &r.payload);
                }
                fl.unflushed = true;
                return true;
            }
        }
    }
    false
}

/// Copies one origin message into `st`: a mirror keeps its sequence and timestamp, a
/// source appends it through the stream's own publish checks (limits, dedupe, rollups; a
/// refusal drops the copy, as a refused publish would be) with `Nats-Stream-Source`.
/// `false` (nothing copied): it does not fit the account's `room`.
pub fn copy(
    st: &mut Stream,
    mirror: bool,
    origin: &str,
    m: super::store::StoredMsg,
    now: i64,
    room: Option<i64>,
) -> bool {
    let hdr = (!mirror).then(|| {
        with_headers(
            m.header.as_deref(),
            &[(SOURCE_HEADER, &format!("{origin} {}", m.seq))],
        )
    });
    let h = if mirror {
        m.header.as_deref()
    } else {
        hdr.as_deref()
    };
    if !super::limits::copy_fits(st, room, &m.subject, h, &m.data) {
        return false;
    }
    if mirror {
        skip_to(st, m.seq);
        if let Err(e) = st.store.store(&m.subject, h, &m.data, m.ts) {
            tracing::warn!("JetStream: mirror {:?} of {origin:?}: {e}", st.cfg.name);
        }
    } else {
        let _ = st.accept(&m.subject, hdr.map(Into::into), m.data, now);
    }
    true
}

/// Make the mirror's next sequence `seq` (the origin has a gap before it).
fn skip_to(st: &mut Stream, seq: u64) {
    let s = st.store.state();
    if s.last_seq + 1 >= seq {
        return;
    }
    if s.msgs == 0 {
        let _ = st.store.purge(&super::store::Purge {
            filter: None,
            seq: Some(seq),
            keep: None,
        });
        return;
    }
    // Mid-stream: a placeholder per missing sequence, removed at once.
    for _ in s.last_seq + 1..seq {
        match st.store.store("_", None, b"", now_nanos()) {
            Ok(q) => {
                let _ = st.store.remove(q, false);
            }
            Err(_) => break,
        }
    }
}
