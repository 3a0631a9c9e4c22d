//! The state of JetStream on this server (every JetStream account's streams and consumers)
//! and what each event does to it: API requests, publishes into streams, acknowledgements,
//! flow control answers, and the timer.

mod admin;
mod consumers;
mod publish;
mod refusals;
pub mod replica;
pub mod replica_consumers;
pub mod replica_snap;
mod restores;
mod saving;
mod snapshots;
mod streams;
mod templates;

use saving::{save_consumer_meta, save_consumer_meta_in, save_states};

use super::advisory::{self, Action};
use super::consumer::{self, Consumer, Cx};
use super::persist::{self, ConsumerMeta, ConsumerState, StreamMeta};
use super::store::memory::MemStore;
use super::store::{MsgStore, Purge};
use super::stream::{self, Stored, Stream};
use super::types::*;
use super::{handler, subscribe, Event, EventKind, JsConfig, Queue};
use crate::account::{Account, Subscription};
use crate::server::ServerShared;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The API subjects (after `$JS.API.`) each JetStream account answers.
/// One subscription per account takes every API request (as nats-server's `$JS.API.>`):
/// unknown requests, and direct gets of streams without `allow_direct`, go unanswered.
const API_SUBJECTS: &[&str] = &[">"];
/// Consumer states are saved at most this often (and at shutdown).
const SAVE_EVERY: Duration = Duration::from_millis(100);
const NAMES_LIMIT: usize = 1024;
const LIST_LIMIT: usize = 256;

pub struct JsAccount {
    pub acc: Arc<Account>,
    pub streams: BTreeMap<String, Stream>,
    pub api_total: u64,
    pub api_errors: u64,
    subs: Vec<Arc<Subscription>>,
    /// Streams that mirror or source others (by name), with their copy cursors.
    pub follows: BTreeMap<String, super::mirror::Follows>,
    /// The account's JetStream limits (see `limits.rs`).
    pub limits: super::limits::AccountLimits,
    /// Snapshots being sent and restores being received.
    transfers: snapshots::Transfers,
    /// For the account's byte limits on publishes (`limits::room`).
    usage_bound: super::limits::UsageBound,
    /// Stream templates by name (see `engine/templates.rs`).
    pub templates: BTreeMap<String, templates::Template>,
    /// Set by a replicated consumer's creation: its answer is held (below).
    hold: Option<(String, String)>,
    /// Creations of replicated consumers waiting for their group's first leader.
    held: Vec<replica_consumers::Held>,
}

pub struct Engine {
    pub config: JsConfig,
    tx: Queue,
    pub accounts: BTreeMap<String, JsAccount>,
    /// The `$JS.API.>` subscriptions of accounts without JetStream.
    refused: Vec<(Arc<Account>, Arc<Subscription>)>,
    last_save: Instant,
    /// Acks of publishes stored in this batch of events, sent by [`Engine::finish_batch`]
    /// once their streams were flushed (one flush per stream per batch, not per message).
    pending_acks: Vec<PendingAck>,
    /// An upper bound of (memory, file) bytes stored, for the server-wide limits
    /// (`usage_for_publish`); `None`: count again.
    usage_bound: Option<(u64, u64)>,
    /// Clustered JetStream (a `cluster {}` block): decides which node answers what.
    pub cluster: Option<Arc<super::cluster::JsCluster>>,
    /// For the meta leader's answer to `$JS.API.INFO`: the account's streams assigned to
    /// other nodes (set by the cluster right before the engine answers).
    pub elsewhere: Vec<super::limits::Assigned>,
}

/// The server's `jetstream { limits {} }` (none when JetStream came from `-js`).
pub(crate) fn srv_js_limits(srv: &ServerShared) -> crate::config::JsServerLimits {
    srv.opts
        .jetstream
        .as_ref()
        .map(|j| j.limits)
        .unwrap_or_default()
}

/// A stored publish whose ack waits for its stream's flush.
pub struct PendingAck {
    account: Arc<str>,
    stream: Arc<str>,
    /// Where the ack goes (none: no reply, or `no_ack`; the flush is still due).
    reply: Option<String>,
    ack: String,
}

/// Totals for `/jsz` and `/varz`.
#[derive(Default, Debug, Clone)]
pub struct Totals {
    pub memory: u64,
    pub storage: u64,
    pub streams: usize,
    pub consumers: usize,
    pub messages: u64,
    pub bytes: u64,
    pub api_total: u64,
    pub api_errors: u64,
    /// The streams' `max_bytes` by storage (nats-server's reservations).
    pub reserved_memory: u64,
    pub reserved_storage: u64,
}

type Res = Result<String, (ApiError, &'static str)>;

pub(crate) fn err_json(t: &str, e: &ApiError, extra: &str) -> String {
    let mut o = Obj::typed(t);
    o.field("error", e);
    let mut s = o.done();
    if !extra.is_empty() {
        s.pop();
        s.push(',');
        s.push_str(extra);
        s.push('}');
    }
    s
}

pub(crate) fn random_name() -> String {
    crate::util::ids::alnum(8)
}

/// Parse a request body; an empty body is the type's default.
pub(crate) fn body<T: for<'de> Deserialize<'de> + Default>(p: &[u8]) -> Result<T, ApiError> {
    // Go decodes `null` into the zero value, as an empty body.
    if p.iter().all(u8::is_ascii_whitespace) || p.trim_ascii() == b"null" {
        return Ok(T::default());
    }
    from_json(p).map_err(|_| ApiError::invalid_json())
}

#[derive(Deserialize, Default)]
struct ListReq {
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    subject: Option<String>,
}

#[derive(Deserialize, Default)]
struct InfoReq {
    #[serde(default)]
    subjects_filter: Option<String>,
    /// List the deleted sequences in the state.
    #[serde(default)]
    deleted_details: bool,
    /// Where the `subjects` page starts (in subject order).
    #[serde(default)]
    offset: usize,
}

/// The most subjects one STREAM.INFO answer lists (nats-server's `JSMaxSubjectDetails`).
const MAX_SUBJECT_DETAILS: usize = 100_000;

#[derive(Deserialize, Default)]
struct PurgeReq {
    #[serde(default)]
    filter: Option<String>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    keep: Option<u64>,
}

#[derive(Deserialize, Default)]
struct GetReq {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    last_by_subj: Option<String>,
    #[serde(default)]
    next_by_subj: Option<String>,
}

#[derive(Deserialize, Default)]
struct DeleteReq {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    no_erase: bool,
}

#[derive(Deserialize, Default)]
struct CreateConsumerReq {
    #[serde(default)]
    stream_name: String,
    #[serde(default)]
    config: ConsumerConfig,
}

impl Engine {
    pub fn new(config: JsConfig, tx: Queue) -> Engine {
        Engine {
            config,
            tx,
            accounts: BTreeMap::new(),
            refused: Vec::new(),
            last_save: Instant::now(),
            pending_acks: Vec::new(),
            usage_bound: None,
            cluster: None,
            elsewhere: Vec::new(),
        }
    }

    /// Subscribe the API in `acc` and recover its streams and consumers from disk.
    pub fn enable_account(&mut self, srv: &Arc<ServerShared>, acc: Arc<Account>) {
        let name: Arc<str> = Arc::from(acc.name.as_str());
        let mut subs = Vec::new();
        let h = handler(
            self.tx.clone(),
            name.clone(),
            EventKind::Api,
            self.config.domain.clone(),
        );
        for s in API_SUBJECTS {
            subs.extend(subscribe(
                srv,
                &acc,
                &format!("$JS.API.{s}"),
                None,
                h.clone(),
            ));
            if let Some(d) = &self.config.domain {
                subs.extend(subscribe(
                    srv,
                    &acc,
                    &format!("$JS.{d}.API.{s}"),
                    None,
                    h.clone(),
                ));
            }
        }
        let h = handler(self.tx.clone(), name.clone(), EventKind::Ack, None);
        subs.extend(subscribe(srv, &acc, "$JS.ACK.>", None, h));
        let h = handler(self.tx.clone(), name.clone(), EventKind::FlowControl, None);
        subs.extend(subscribe(srv, &acc, "$JS.FC.>", None, h));
        let mut ja = JsAccount {
            acc: acc.clone(),
            streams: BTreeMap::new(),
            api_total: 0,
            api_errors: 0,
            subs,
            follows: BTreeMap::new(),
            limits: srv
                .opts
                .jetstream_limits
                .get(&acc.name)
                .cloned()
                .unwrap_or_default(),
            transfers: Default::default(),
            usage_bound: Default::default(),
            templates: BTreeMap::new(),
            hold: None,
            held: Vec::new(),
        };
        restores::clean_staging(&self.config.store_dir, &acc.name);
        let root = self.config.store_dir.join(&acc.name).join("streams");
        for sname in persist::subdirs(&root) {
            let dir = root.join(&sname);
            let meta: StreamMeta = match persist::read_json(&dir.join("meta.json")) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(
                        "JetStream: stream {sname:?} in account {:?} not restored: {e}",
                        acc.name
                    );
                    continue;
                }
            };
            let store = match super::store::open::open_file(
                &dir.join("msgs"),
                stream::limits_of(&meta.config),
                self.config.sync,
            ) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("JetStream: stream {sname:?} store not opened: {e}");
                    continue;
                }
            };
            let mut st = Stream::new(meta.config, meta.created, store, Some(dir.clone()));
            st.rebuild_dedupe(now_nanos());
            for cname in persist::subdirs(&dir.join("obs")) {
                let cdir = persist::consumer_dir(&dir, &cname);
                let cm: ConsumerMeta = match persist::read_json(&cdir.join("meta.json")) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!("JetStream: consumer {cname:?} not restored: {e}");
                        continue;
                    }
                };
                let state = persist::read_json::<ConsumerState>(&cdir.join("state.json"))
                    .inspect_err(|e| {
                        tracing::warn!("JetStream: consumer {cname:?} state not restored: {e}")
                    })
                    .ok();
                let mut c = consumers::revive_consumer(
                    &st,
                    srv,
                    cm.name.clone(),
                    cm.config,
                    cm.created,
                    state,
                );
                c.origin = cm.origin;
                st.consumers.insert(cm.name, c);
            }
            subscribe_stream(srv, &acc, &self.tx, &mut st);
            tracing::info!(
                "  Restored stream {:?} in account {:?}: {} messages, {} consumers",
                st.cfg.name,
                acc.name,
                st.store.state().msgs,
                st.consumers.len()
            );
            match super::mirror::parse(&st.cfg) {
                Ok(Some(mut f)) => {
                    f.recover(&st);
                    ja.follows.insert(sname.clone(), f);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    "JetStream: stream {sname:?}: mirror/sources not restored: {}",
                    e.description
                ),
            }
            ja.streams.insert(sname, st);
        }
        ja.load_templates(srv, &self.config, &self.tx);
        self.accounts.insert(acc.name.clone(), ja);
    }

    /// An account without JetStream: its `$JS.API` requests get nats-server's 10039 error.
    pub fn refuse_account(&mut self, srv: &Arc<ServerShared>, acc: Arc<Account>) {
        let name: Arc<str> = Arc::from(acc.name.as_str());
        let h = handler(
            self.tx.clone(),
            name,
            EventKind::NotEnabled,
            self.config.domain.clone(),
        );
        self.refused
            .extend(subscribe(srv, &acc, "$JS.API.>", None, h).map(|s| (acc, s)));
    }

    /// Handle one event and send the acks it owes (flushing first).
    pub fn handle(&mut self, srv: &Arc<ServerShared>, ev: Event) {
        self.handle_queued(srv, ev);
        self.finish_batch(srv);
    }

    /// Flush every stream that stored publishes since the last call, then send their acks
    /// in the order the publishes came. A PubAck is never sent before its message was
    /// flushed; a failed flush turns the acks of that stream into errors.
    /// A replicated copy's store is left to [`Engine::tick`]: its group's log keeps them.
    pub fn finish_batch(&mut self, srv: &Arc<ServerShared>) {
        if self.pending_acks.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut self.pending_acks);
        let mut failed: Vec<(&str, &str, String)> = Vec::new();
        let mut flushed: Vec<(&str, &str)> = Vec::new();
        for p in &pending {
            let key = (&*p.account, &*p.stream);
            if flushed.contains(&key) {
                continue;
            }
            flushed.push(key);
            let Some(st) = self
                .accounts
                .get(&*p.account)
                .and_then(|ja| ja.streams.get(&*p.stream))
                .filter(|st| st.replica.is_none())
            else {
                continue; // deleted in the same batch, or a replicated copy: no flush now
            };
            if let Err(e) = st.store.flush() {
                tracing::error!("JetStream: stream {:?} flush: {e}", p.stream);
                let mut o = Obj::new();
                o.field("error", &ApiError::new(503, 10077, e.to_string()))
                    .raw(
                        "stream",
                        &serde_json::to_string(&*p.stream).unwrap_or_default(),
                    )
                    .field("seq", &0);
                failed.push((key.0, key.1, o.done()));
            }
        }
        // One fan-out batch per account in a row: the publishers' writers wake once.
        let mut cx: Option<Cx<'_>> = None;
        for p in &pending {
            let Some(reply) = p.reply.as_deref() else {
                continue;
            };
            let Some(ja) = self.accounts.get(&*p.account) else {
                continue;
            };
            let ack = failed
                .iter()
                .find(|f| f.0 == &*p.account && f.1 == &*p.stream)
                .map_or(p.ack.as_str(), |f| f.2.as_str());
            if cx.as_ref().is_none_or(|c| !Arc::ptr_eq(c.acc, &ja.acc)) {
                cx = Some(Cx::new(srv, &ja.acc));
            }
            if let Some(cx) = &cx {
                cx.send(reply, None, None, ack.as_bytes());
            }
        }
    }

    /// Handle one event; acks of stored publishes wait for [`Engine::finish_batch`].
    pub fn handle_queued(&mut self, srv: &Arc<ServerShared>, mut ev: Event) {
        if ev.ts.is_none() && ev.kind == EventKind::Api && self.api_level_refused(srv, &ev) {
            return;
        }
        if ev.ts.is_none() {
            if let Some(c) = self.cluster.clone() {
                if c.intercept(self, srv, &mut ev) {
                    return;
                }
            }
        }
        if self.admin_request(srv, &ev) {
            return;
        }
        if ev.kind == EventKind::NotEnabled {
            Self::not_enabled(srv, &ev);
            return;
        }
        let usage = match ev.kind {
            EventKind::Publish(_) if self.config.limits_set => Some(self.usage_for_publish()),
            // Acks only take messages away: the bound stays an upper bound.
            EventKind::Ack | EventKind::FlowControl | EventKind::Sync(..) => None,
            // API requests (restores among them) count exactly and drop the bound.
            _ => {
                self.usage_bound = None;
                self.config.limits_set.then(|| self.usage())
            }
        };
        let publish_size = ev.msg_bytes();
        let reserved = match ev.kind {
            EventKind::Api => self.reserved(),
            _ => (0, 0),
        };
        let g = Globals {
            config: &self.config,
            tx: &self.tx,
            usage,
            reserved,
            elsewhere: &self.elsewhere,
        };
        let Some(ja) = self.accounts.get_mut(&*ev.acc) else {
            return;
        };
        match &ev.kind {
            EventKind::Api => {
                ja.usage_bound.reset();
                ja.api(&g, srv, &ev)
            }
            EventKind::Publish(s) => {
                let s = s.clone();
                if let Some(p) = ja.publish(&g, srv, &s, &mut ev) {
                    self.pending_acks.push(p);
                }
                // Whatever it stored, in either storage: still an upper bound after it.
                if let Some((mem, file)) = usage {
                    let pad = publish_size + super::limits::MSG_OVERHEAD;
                    self.usage_bound = Some((mem + pad, file + pad));
                }
            }
            EventKind::Ack => {
                ja.ack(srv, &ev);
                if let (Some(c), Some(_)) = (self.cluster.clone(), ev.reply.as_ref()) {
                    // A synchronous ack waits for its progress entry: send it now.
                    let mut t = ev.subject.split('.').skip(2);
                    if let (Some(stream), Some(consumer)) = (t.next(), t.next()) {
                        c.progress_now(&ev.acc, stream, consumer);
                    }
                }
            }
            EventKind::FlowControl => ja.flow_control(srv, &ev),
            EventKind::Sync(stream, key) => {
                let cx = Cx::new(srv, &ja.acc);
                let key = (&**stream, &**key);
                super::mirror::on_sync(&cx, &mut ja.streams, &mut ja.follows, &ja.limits, key, &ev);
            }
            EventKind::NotEnabled | EventKind::Template(_) => {}
        }
    }

    /// The usage a publish checks against the server's limits: the upper bound kept since
    /// the last exact count while that is within both limits (then so is the real usage),
    /// else counted again. The bound grows with every publish and is dropped by the timer
    /// (mirrors copy there) and by API requests; acks only lower the real usage.
    fn usage_for_publish(&mut self) -> (u64, u64) {
        let within = |(mem, file): (u64, u64)| {
            mem as i64 <= self.config.max_memory && file as i64 <= self.config.max_storage
        };
        match self.usage_bound {
            Some(b) if within(b) => b,
            _ => {
                let u = self.usage();
                self.usage_bound = Some(u);
                u
            }
        }
    }

    /// (memory bytes, file bytes) stored across accounts.
    fn usage(&self) -> (u64, u64) {
        let mut u = (0, 0);
        for ja in self.accounts.values() {
            for s in ja.streams.values() {
                let b = s.store.state().bytes;
                match s.cfg.storage {
                    Storage::Memory => u.0 += b,
                    Storage::File => u.1 += b,
                }
            }
        }
        u
    }

    pub fn tick(&mut self, srv: &Arc<ServerShared>) {
        self.usage_bound = None;
        let now = Instant::now();
        let now_ns = now_nanos();
        let save = now.duration_since(self.last_save) >= SAVE_EVERY;
        if save {
            self.last_save = now;
        }
        for ja in self.accounts.values_mut() {
            ja.usage_bound.reset();
            ja.tick_transfers(srv);
            let cx = Cx::new(srv, &ja.acc);
            // Mirrors and sources copy first: their consumers below get the copies now.
            super::mirror::pump(&cx, &self.tx, &mut ja.streams, &mut ja.follows, &ja.limits);
            for st in ja.streams.values_mut() {
                // What a replicated copy's applies left buffered (`finish_batch`).
                if let Some(Err(e)) = st.replica.as_ref().map(|_| st.store.flush()) {
                    tracing::error!("JetStream: stream {:?} flush: {e}", st.cfg.name);
                }
                if st.store.expire(now_ns) > 0 {
                    tracing::trace!("stream {:?}: aged messages removed", st.cfg.name);
                }
                st.expire_dedupe(now_ns);
                let mut acked = Vec::new();
                let mut gone = Vec::new();
                for c in st.consumers.values_mut() {
                    c.tick(&cx, st.store.as_ref(), now);
                    c.pump(&cx, st.store.as_ref(), &mut acked);
                    if c.inactive(now) {
                        gone.push(c.name.clone());
                    }
                }
                for n in gone {
                    // A replicated stream's ephemeral goes through the stream's log, so every
                    // copy drops it (and its group): its leader asks the stream's leader to
                    // delete it; the passive copies wait for that entry.
                    if st.replica.is_some() {
                        if let Some(c) = st.consumers.get_mut(&n) {
                            c.last_active = now;
                            if !c.passive {
                                let subject =
                                    format!("$JS.API.CONSUMER.DELETE.{}.{n}", st.cfg.name);
                                cx.send(&subject, None, None, b"");
                            }
                        }
                        continue;
                    }
                    if let Some(mut c) = st.consumers.remove(&n) {
                        tracing::debug!("JetStream: ephemeral consumer {n:?} inactive, removed");
                        c.deleted(&cx);
                        if let Some(d) = &st.dir {
                            persist::remove_dir(&persist::consumer_dir(d, &n));
                        }
                    }
                }
                retire(st, &acked);
                if save {
                    save_states(st, self.config.sync.always);
                }
            }
        }
    }

    /// Save every consumer, withdraw every subscription, sync the stores.
    pub fn shutdown(&mut self, srv: &Arc<ServerShared>) {
        for (acc, s) in self.refused.drain(..) {
            srv.unsubscribe_internal(&acc, &s);
        }
        for ja in self.accounts.values_mut() {
            ja.close(srv);
        }
    }

    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for ja in self.accounts.values() {
            t.api_total += ja.api_total;
            t.api_errors += ja.api_errors;
            for s in ja.streams.values() {
                let st = s.store.state();
                t.streams += 1;
                t.consumers += s.consumer_count();
                t.messages += st.msgs;
                t.bytes += st.bytes;
                let reserved = s.cfg.max_bytes.max(0) as u64;
                match s.cfg.storage {
                    Storage::Memory => {
                        t.memory += st.bytes;
                        t.reserved_memory += reserved;
                    }
                    Storage::File => {
                        t.storage += st.bytes;
                        t.reserved_storage += reserved;
                    }
                }
            }
        }
        t
    }
}

/// What every handler may need besides its account.
pub struct Globals<'a> {
    pub config: &'a JsConfig,
    pub tx: &'a Queue,
    /// (memory, file) bytes in use, when limits are configured.
    pub usage: Option<(u64, u64)>,
    /// (memory, file) reserved by every account's streams (API requests only).
    pub reserved: (i64, i64),
    /// See [`Engine::elsewhere`].
    pub elsewhere: &'a [super::limits::Assigned],
}

/// Interest and work-queue retention: remove the messages every interested consumer is
/// done with (a replicated stream only as its log says: `replica::sweep`).
fn retire(st: &mut Stream, seqs: &[u64]) {
    if st.cfg.retention == Retention::Limits || seqs.is_empty() || st.replica.is_some() {
        return;
    }
    for &seq in seqs {
        let Ok(m) = st.store.load(seq) else {
            continue;
        };
        if st.consumers.values().all(|c| c.done_with(seq, &m.subject)) {
            let _ = st.store.remove(seq, false);
        }
    }
}

/// Subscribe a stream's subjects.
fn subscribe_stream(srv: &ServerShared, acc: &Account, tx: &Queue, st: &mut Stream) {
    if !st.cfg.template_owner.is_empty() {
        return; // its template's subscription brings its messages (engine/templates.rs)
    }
    if st.replica.as_ref().is_some_and(|r| !r.leader) {
        return; // only a replicated stream's leader takes publishes (engine/replica.rs)
    }
    let name: Arc<str> = Arc::from(st.cfg.name.as_str());
    let accn: Arc<str> = Arc::from(acc.name.as_str());
    let h = handler(tx.clone(), accn, EventKind::Publish(name), None);
    for s in &st.cfg.subjects {
        st.subs
            .extend(super::subscribe_stream_subject(srv, acc, s, h.clone()));
    }
}

fn unsubscribe_stream(srv: &ServerShared, acc: &Account, st: &mut Stream) {
    for s in st.subs.drain(..) {
        srv.unsubscribe_internal(acc, &s);
    }
}

impl JsAccount {
    fn api(&mut self, g: &Globals<'_>, srv: &Arc<ServerShared>, ev: &Event) {
        if ev.subject.starts_with("$JS.SNAPSHOT.") {
            self.transfer_event(g, srv, ev);
            return;
        }
        // A request applied from a replicated stream's log has a reply only on the node
        // that proposed it; the others apply it silently.
        let replicated = ev.ts.is_some();
        let reply = match ev.reply.as_deref() {
            Some(r) => r,
            None if replicated => "",
            None => return,
        };
        let Some(rest) = ev.subject.strip_prefix("$JS.API.") else {
            return;
        };
        let t: Vec<&str> = rest.split('.').collect();
        let p = &ev.payload[..];
        let cx_acc = self.acc.clone();
        let cx = Cx::new(srv, &cx_acc);
        if let ["DIRECT", "GET", s, subj @ ..] = t.as_slice() {
            self.direct_get(&cx, reply, s, &subj.join("."), p);
            return;
        }
        if let ["CONSUMER", "MSG", "NEXT", s, c] = t.as_slice() {
            match self.streams.get_mut(*s) {
                Some(st) if st.consumers.contains_key(*c) => {
                    if let Some(con) = st.consumers.get_mut(*c) {
                        con.add_pull(&cx, reply, p, Instant::now());
                        let mut acked = Vec::new();
                        con.pump(&cx, st.store.as_ref(), &mut acked);
                        retire(st, &acked);
                    }
                }
                // nats-server 2.15.1 has no subscription for it: no responders.
                _ => no_responders(&cx, reply),
            }
            return;
        }
        let res: Res = match t.as_slice() {
            ["INFO"] => Ok(self.account_info(g)),
            ["STREAM", "CREATE", s] => self.stream_create(g, srv, s, p),
            ["STREAM", "UPDATE", s] => self.stream_update(g, srv, s, p),
            ["STREAM", "INFO", s] => self.stream_info(s, p),
            ["STREAM", "DELETE", s] => self.stream_delete(&cx, s),
            ["STREAM", "PURGE", s] => self.stream_purge(s, p),
            ["STREAM", "SNAPSHOT", s] => self.stream_snapshot(g, srv, s, p),
            ["STREAM", "RESTORE", s] => self.stream_restore(g, srv, s, p),
            ["STREAM", "NAMES"] => self.stream_list(p, true),
            ["STREAM", "LIST"] => self.stream_list(p, false),
            ["STREAM", "MSG", "GET", s] => self.msg_get(s, p),
            ["STREAM", "MSG", "DELETE", s] => self.msg_delete(s, p),
            ["CONSUMER", "CREATE", s] => self.consumer_create(&cx, s, None, "", false, p, ev.ts),
            ["CONSUMER", "CREATE", s, c, f @ ..] => {
                self.consumer_create(&cx, s, Some(c), &f.join("."), false, p, ev.ts)
            }
            ["CONSUMER", "DURABLE", "CREATE", s, c] => {
                self.consumer_create(&cx, s, Some(c), "", true, p, ev.ts)
            }
            ["CONSUMER", "INFO", s, c] => self.consumer_info(&cx, s, c),
            ["CONSUMER", "DELETE", s, c] => self.consumer_delete(&cx, s, c),
            ["CONSUMER", "NAMES", s] => self.consumer_list(&cx, s, p, true),
            ["CONSUMER", "LIST", s] => self.consumer_list(&cx, s, p, false),
            _ => return,
        };
        let out = match res {
            Ok(s) => s,
            Err((e, t)) => {
                self.api_errors += 1;
                let extra = match t {
                    "stream_info_response" => "\"total\":0,\"offset\":0,\"limit\":0",
                    "stream_purge_response" => "\"purged\":0",
                    "stream_restore_response" => "\"deliver_subject\":\"\"",
                    _ => "",
                };
                err_json(t, &e, extra)
            }
        };
        self.api_total += 1;
        // A new consumer of a replicated stream: answered once its group has a leader
        // (`engine/replica_consumers.rs`).
        if let Some((stream, consumer)) = self.hold.take() {
            if !reply.is_empty() {
                self.held
                    .push(replica_consumers::Held::new(stream, consumer, reply));
            }
            return;
        }
        if reply.is_empty() {
            return;
        }
        cx.send(reply, None, None, out.as_bytes());
        advisory::api_audit(&cx, &ev.subject, p, &out);
    }
}

/// What a requester gets where nats-server 2.15.1 has no subscription for the request (a
/// direct get of a stream that does not exist or does not allow it, a pull request for a
/// consumer that does not exist): the `503` status the server sends for no responders.
pub(crate) fn no_responders(cx: &Cx<'_>, reply: &str) {
    if !reply.is_empty() {
        cx.send(reply, None, Some(b"NATS/1.0 503\r\n\r\n"), b"");
    }
}
