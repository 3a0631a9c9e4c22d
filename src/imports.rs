//! Account exports and imports at run time, as nats-server 2.9 routes them.
//!
//! - Stream import (B imports `x.>` from A, mapped to `p.x.>`): when a client of B subscribes
//!   to a subject overlapping the mapped one, a *shadow* internal subscription is added in A's
//!   sublist (so its interest goes to routes as RS+ in A and a publisher on another server
//!   sends the message here in A). Its handler maps the subject into B's namespace and delivers
//!   to that one client subscription. Shadows go with the client's subscription (UNSUB,
//!   auto-unsubscribe, close). A message is delivered once: only the server holding the
//!   subscriber relays it.
//! - Service import (B imports `req.x` from A as `local.x`): an internal subscription in B on
//!   `local.x`, local to this server (not advertised, and not run for messages from routes, so
//!   only the requester's server relays). It republishes the request in A on `req.x` with the
//!   reply rewritten to `_R_.<prefix>.<token>`; an internal subscription in A on
//!   `_R_.<prefix>.>` (advertised, so responders anywhere reach it) relays responses to the
//!   original reply in B. Mappings end with the first response (singleton) or after the
//!   export's response threshold (stream, chunked); at most [`MAX_PENDING_RESPONSES`] wait.

use crate::account::{Account, Handler, SubRef, Subscription};
use crate::config::links::{
    self, map_subject, AccountLinks, LinkKind, Links, ResponseType, DEFAULT_RESPONSE_THRESHOLD,
};
use crate::deliver::{Fanout, Msg, Origin};
use crate::fabric::Fabric;
use crate::trace;
use bytes::Bytes;
use rand::Rng;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Response mappings waiting per exporting account and server.
pub const MAX_PENDING_RESPONSES: usize = 100_000;

/// One account's exports and imports, as the server runs them.
pub struct Linked {
    /// As configured (for `/accountz`).
    pub config: AccountLinks,
    streams: Vec<StreamImport>,
    /// Shadow subscriptions by the client connection (cid) whose subscription they serve.
    shadows: Mutex<HashMap<u64, Vec<Shadow>>>,
    /// Set when some account imports a service of this one: where responses come back.
    responses: Option<Arc<Responses>>,
    /// What this account's imports subscribed to, removed when they are replaced: its
    /// service imports' subscriptions (local, not advertised) and, when it was linked on its
    /// own (a JWT update), the response subscriptions made for it in the exporters.
    local: Vec<Arc<Subscription>>,
    in_exporters: Vec<(Weak<Account>, Arc<Subscription>)>,
}

/// Where an account keeps its running exports and imports: unset for most accounts,
/// replaced whole when a JWT update changes them. SUB, UNSUB and close read it (an
/// uncontended read lock and an `Arc` clone); the message path never does (relays and
/// shadows hold what they need).
#[derive(Default)]
pub struct LinkSlot(std::sync::RwLock<Option<Arc<Linked>>>);

impl LinkSlot {
    pub fn get(&self) -> Option<Arc<Linked>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn replace(&self, l: Option<Arc<Linked>>) -> Option<Arc<Linked>> {
        std::mem::replace(&mut *self.0.write().unwrap_or_else(|e| e.into_inner()), l)
    }
}

struct StreamImport {
    from: Weak<Account>,
    /// In the exporting account.
    subject: String,
    /// In this account.
    local: String,
    /// A traced message stays traced in this account (`allow_trace`).
    allow_trace: bool,
}

struct Shadow {
    client: Arc<Subscription>,
    subs: Vec<(Weak<Account>, Arc<Subscription>)>,
}

/// The response side of one exporting account's services on this server.
pub struct Responses {
    /// `_R_.<random>.`
    prefix: String,
    pending: Mutex<Pending>,
    /// The origin relayed responses carry (the server's own).
    origin: Origin,
}

/// Response mappings: token → where the response goes. Bounded; expired entries go on the way.
pub struct Pending {
    map: HashMap<String, Waiting>,
    order: VecDeque<(String, Instant)>,
    cap: usize,
}

struct Waiting {
    acc: Weak<Account>,
    reply: Bytes,
    singleton: bool,
    expires: Instant,
}

impl Pending {
    pub fn new(cap: usize) -> Self {
        Pending {
            map: HashMap::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    fn sweep(&mut self, now: Instant) {
        while let Some((t, exp)) = self.order.front() {
            if *exp > now {
                break;
            }
            if self.map.get(t).is_some_and(|w| w.expires <= now) {
                self.map.remove(t);
            }
            self.order.pop_front();
        }
    }

    fn insert(&mut self, token: String, w: Waiting, now: Instant) {
        self.sweep(now);
        while self.map.len() >= self.cap {
            let Some((t, _)) = self.order.pop_front() else {
                break;
            };
            if self.map.remove(&t).is_some() {
                tracing::debug!("service response mapping {t} dropped: {} pending", self.cap);
            }
        }
        if self.order.len() > 2 * self.cap {
            let map = &self.map;
            self.order
                .retain(|(t, e)| map.get(t).is_some_and(|w| w.expires == *e));
        }
        self.order.push_back((token.clone(), w.expires));
        self.map.insert(token, w);
    }

    /// Where the response for `token` goes (the mapping ends if it was a singleton).
    fn take(&mut self, token: &str, now: Instant) -> Option<(Weak<Account>, Bytes)> {
        let w = self.map.get(token)?;
        if w.expires <= now {
            self.map.remove(token);
            return None;
        }
        let out = (w.acc.clone(), w.reply.clone());
        if w.singleton {
            self.map.remove(token);
        }
        Some(out)
    }
}

/// Set up every account's exports and imports (`all`: checked, the system account's
/// included): called once at startup.
pub fn install(fabric: &dyn Fabric, all: &Links) -> Result<(), String> {
    install_for(fabric, all, None, None)
}

/// Install the exports and imports of `only` (all accounts: None); `carried`: the response
/// side an account being relinked already had as an exporter (its mappings stay valid).
fn install_for(
    fabric: &dyn Fabric,
    all: &Links,
    only: Option<&[String]>,
    carried: Option<Arc<Responses>>,
) -> Result<(), String> {
    if all.is_empty() {
        return Ok(());
    }
    let wanted = |name: &str| only.is_none_or(|o| o.iter().any(|n| n == name));
    let account = |name: &str| {
        fabric
            .accounts()
            .get(name)
            .ok_or_else(|| format!("account {name:?} does not exist"))
    };
    // Exporting accounts whose services are imported get a response subscription.
    let mut responses: HashMap<String, Arc<Responses>> = HashMap::new();
    let mut made = Vec::new();
    for (_, l) in all.iter().filter(|(n, _)| wanted(n)) {
        for im in l.imports.iter().filter(|i| i.kind == LinkKind::Service) {
            if responses.contains_key(&im.account) {
                continue;
            }
            let token: String = rand::rng()
                .sample_iter(rand::distr::Alphanumeric)
                .take(8)
                .map(char::from)
                .collect();
            let r = Arc::new(Responses {
                prefix: format!("_R_.{token}."),
                pending: Mutex::new(Pending::new(MAX_PENDING_RESPONSES)),
                origin: crate::internal::origin(fabric),
            });
            let exporter = account(&im.account)?;
            let relay = r.clone();
            let handler: Handler = Arc::new(move |fan, m| relay_response(&relay, fan, m));
            let sub = crate::internal::subscribe(
                fabric,
                &exporter,
                &format!("{}>", r.prefix),
                None,
                handler,
            )?;
            made.push((Arc::downgrade(&exporter), sub));
            responses.insert(im.account.clone(), r);
        }
    }
    let mut names: Vec<&String> = all.keys().filter(|n| wanted(n)).collect();
    for name in responses.keys() {
        if !all.contains_key(name) && wanted(name) {
            names.push(name);
        }
    }
    // Linked on its own, an account owns the response subscriptions made for it.
    let mut made = (only.map_or(0, <[String]>::len) == 1).then_some(made);
    for name in names {
        let acc = account(name)?;
        if acc.links.get().is_some() {
            return Err(format!("account {name:?}: exports/imports set twice"));
        }
        let config = all.get(name).cloned().unwrap_or_default();
        let mut streams = Vec::new();
        let mut local = Vec::new();
        for im in &config.imports {
            let from = account(&im.account)?;
            match im.kind {
                LinkKind::Stream => streams.push(StreamImport {
                    from: Arc::downgrade(&from),
                    subject: im.subject.clone(),
                    local: im.local_subject(),
                    allow_trace: im.allow_trace,
                }),
                LinkKind::Service => {
                    let export = links::export_for(all, name, im)
                        .ok_or_else(|| format!("service import {:?} not authorized", im.subject))?;
                    let resp = responses
                        .get(&im.account)
                        .cloned()
                        .ok_or("service import without a response subscription")?;
                    let relay = ServiceRelay {
                        to: Arc::downgrade(&from),
                        importer: acc.name.clone(),
                        local: im.local_subject(),
                        remote: im.subject.clone(),
                        singleton: export.response_type == ResponseType::Singleton,
                        allow_trace: export.allow_trace,
                        threshold: export
                            .response_threshold
                            .unwrap_or(DEFAULT_RESPONSE_THRESHOLD),
                        responses: resp,
                        origin: crate::internal::origin(fabric),
                        importer_acc: Arc::downgrade(&acc),
                        share: im.share,
                        details: std::sync::OnceLock::new(),
                    };
                    let handler: Handler = Arc::new(move |fan, m| relay.request(fan, m));
                    local.push(subscribe_local(fabric, &acc, &im.local_subject(), handler)?);
                }
            }
        }
        let linked = Linked {
            config,
            streams,
            shadows: Mutex::new(HashMap::new()),
            responses: responses.get(name).cloned().or_else(|| carried.clone()),
            local,
            in_exporters: made.take().unwrap_or_default(),
        };
        acc.links.replace(Some(Arc::new(linked)));
        tracing::debug!("account {name}: exports and imports installed");
    }
    Ok(())
}

/// An internal subscription only this server knows of (not advertised to routes).
pub fn subscribe_local(
    fabric: &dyn Fabric,
    acc: &Account,
    subject: &str,
    handler: Handler,
) -> Result<Arc<Subscription>, String> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let sid = Bytes::from(format!("si{}", NEXT.fetch_add(1, Relaxed)));
    let sub = Arc::new(Subscription {
        conn: fabric.internal_conn().clone(),
        subject: Bytes::copy_from_slice(subject.as_bytes()),
        queue: None,
        sid: sid.clone(),
        max: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
        deny: None,
        weight: 1,
        handler: Some(handler),
        traced: true,
    });
    acc.sublist
        .insert(subject.as_bytes(), None, SubRef(sub.clone()))
        .map_err(|e| format!("service import subscription to {subject:?}: {e}"))?;
    fabric.internal_conn().subs().insert(sub.clone());
    Ok(sub)
}

/// The request side of one service import.
struct ServiceRelay {
    to: Weak<Account>,
    importer: String,
    importer_acc: Weak<Account>,
    local: String,
    remote: String,
    singleton: bool,
    /// A traced request stays traced in the exporting account (`allow_trace`).
    allow_trace: bool,
    threshold: Duration,
    responses: Arc<Responses>,
    origin: Origin,
    /// nats-server's `share`: the request names the requester's server too.
    share: bool,
    /// The `Nats-Request-Info` fields naming this server, once known (see [`shared_details`]).
    details: std::sync::OnceLock<serde_json::Map<String, serde_json::Value>>,
}

/// What a shared import adds to the requester's account in `Nats-Request-Info`: this server's
/// name and cluster, the connection kind (nats-server's `getClientInfo(true)` with
/// `addServerAndClusterInfo`; JetStream in a cluster places a new stream in the requester's
/// cluster by it).
fn shared_details(fabric: &dyn Fabric) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    if let Some(info) = fabric.trace_server_info() {
        for (from, to) in [("name", "server"), ("cluster", "cluster")] {
            if let Some(v) = info
                .get(from)
                .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            {
                m.insert(to.into(), v.clone());
            }
        }
    }
    m.insert("kind".into(), "Client".into());
    m.insert("client_type".into(), "nats".into());
    m
}

impl ServiceRelay {
    fn request(&self, fan: &mut Fanout, m: &Msg<'_>) {
        // Only the server the requester is connected to relays its request (not one that
        // got it over a route or a gateway).
        if !matches!(fan.origin(), Origin::Client { .. }) {
            return;
        }
        let Some(to) = self.to.upgrade() else { return };
        let Ok(subject) = std::str::from_utf8(m.subject) else {
            return;
        };
        let subject = map_subject(&self.local, &self.remote, subject);
        let mut info = serde_json::Map::new();
        if self.share {
            if let Origin::Client { cid, .. } = fan.origin() {
                info.insert("id".into(), cid.into());
            }
        }
        info.insert("acc".into(), self.importer.clone().into());
        if self.share {
            let fabric = fan.fabric().clone();
            info.extend(
                self.details
                    .get_or_init(|| shared_details(&*fabric))
                    .clone(),
            );
        }
        let mut header =
            request_info_header(m.header, &serde_json::Value::Object(info).to_string());
        // A traced request (nats-server's `processServiceImport`): an `si` entry; without
        // `allow_trace` the trace stops here (trace-only: nothing more happens; otherwise the
        // request goes on untraced, its destination disabled for the servers downstream).
        // With it, the trace goes on in the exporting account, and the servers downstream
        // send their events to a response mapping back to the destination.
        let mut parked = None;
        if let Some(t) = fan.msg_trace.as_deref_mut() {
            t.add_service_import(&to.name, m.subject, &subject);
            if !self.allow_trace {
                if t.trace_only {
                    return;
                }
                header = trace::set_header(&header, trace::TRACE_DEST, trace::TRACE_DEST_DISABLED);
                parked = fan.msg_trace.take();
            } else {
                let acc = Arc::downgrade(t.account());
                let dest = Bytes::copy_from_slice(t.dest().as_bytes());
                let dest = self.respond_to(fan, acc, dest, false);
                header = trace::set_header(&header, trace::TRACE_DEST, &dest);
            }
        }
        let only = fan.msg_trace.as_deref().is_some_and(|t| t.trace_only);
        let reply = m.reply.filter(|_| !only).map(|r| {
            let acc = self.importer_acc.clone();
            self.respond_to(fan, acc, Bytes::copy_from_slice(r), self.singleton)
        });
        let out = Msg {
            subject: subject.as_bytes(),
            reply: reply.as_deref().map(str::as_bytes),
            header: Some(&header),
            payload: m.payload,
        };
        // What reached a responder decides the requester's "no responders" (nats-server's
        // `processServiceImport` result).
        fan.relayed = Some(publish_across(fan, &to, &out, self.origin));
        if parked.is_some() {
            fan.msg_trace = parked;
        }
    }

    /// A new response mapping: what reaches the returned `_R_.` subject in the exporting
    /// account goes to `reply` in `acc`.
    fn respond_to(
        &self,
        fan: &mut Fanout,
        acc: Weak<Account>,
        reply: Bytes,
        singleton: bool,
    ) -> String {
        let token = new_token(fan);
        let now = Instant::now();
        self.responses
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                token.clone(),
                Waiting {
                    acc,
                    reply,
                    singleton,
                    expires: now + self.threshold,
                },
                now,
            );
        format!("{}{token}", self.responses.prefix)
    }
}

/// Publish into another account than the one the fan-out started in. Subscriptions that reach
/// their auto-unsubscribe max here belong to `acc`: retire them there (the publisher would
/// look for them in its own account).
fn publish_across(fan: &mut Fanout, acc: &Arc<Account>, m: &Msg<'_>, origin: Origin) -> u64 {
    let before = fan.retired.len();
    let n = fan.publish_in(acc, m, origin);
    fan.retire_in(acc, before);
    n
}

fn new_token(fan: &mut Fanout) -> String {
    (&mut fan.rng)
        .sample_iter(rand::distr::Alphanumeric)
        .take(10)
        .map(char::from)
        .collect()
}

/// The request's header plus `Nats-Request-Info: <info>` (JSON naming at least the
/// importing account), as nats-server adds to requests crossing a service import.
fn request_info_header(h: Option<&[u8]>, info: &str) -> Vec<u8> {
    let mut out = match h {
        Some(h) if h.ends_with(b"\r\n\r\n") => h[..h.len() - 2].to_vec(),
        _ => b"NATS/1.0\r\n".to_vec(),
    };
    out.extend_from_slice(b"Nats-Request-Info: ");
    out.extend_from_slice(info.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out
}

/// A response reached `_R_.<prefix>.<token>` in the exporting account: send it to the
/// requester's reply subject in its account.
fn relay_response(r: &Responses, fan: &mut Fanout, m: &Msg<'_>) {
    // A JetStream delivery to a pull request's reply: matched on `_R_…`, the stream
    // subject on the wire, which the requester sees too (nats-server's `pa.deliver`).
    let matched = fan.matched_subject().map(<[u8]>::to_vec);
    let Some(token) = matched
        .as_deref()
        .unwrap_or(m.subject)
        .strip_prefix(r.prefix.as_bytes())
        .and_then(|t| std::str::from_utf8(t).ok())
    else {
        return;
    };
    let target = r
        .pending
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take(token, Instant::now());
    let Some((acc, reply)) = target else {
        tracing::trace!("service response on {token}: no mapping (expired or answered)");
        return;
    };
    let Some(acc) = acc.upgrade() else { return };
    if matched.is_some() {
        // The ack reply stays: an importer that also imports `$JS.ACK.>` acks with it.
        let before = fan.retired.len();
        fan.publish_local_to(&acc, &reply, m, r.origin);
        fan.retire_in(&acc, before);
        return;
    }
    let out = Msg {
        subject: &reply,
        reply: None,
        header: m.header,
        payload: m.payload,
    };
    publish_across(fan, &acc, &out, r.origin);
}

/// Pending response mappings of `acc` (as an exporter) on this server.
pub fn pending_responses(acc: &Account) -> usize {
    acc.links
        .get()
        .and_then(|l| l.responses.clone())
        .map_or(0, |r| {
            r.pending.lock().unwrap_or_else(|e| e.into_inner()).len()
        })
}

mod accountz;
mod relink;
pub use accountz::{ext_exports, ext_imports, ExtExport, ExtImport};
pub use relink::{changed_accounts, relink};

// ----- stream imports: shadow subscriptions -----

/// A client of `acc` subscribed: add shadows for the stream imports its subject overlaps.
pub fn client_subscribed(fabric: &dyn Fabric, acc: &Arc<Account>, sub: &Arc<Subscription>) {
    let Some(l) = acc.links.get() else { return };
    if l.streams.is_empty() {
        return;
    }
    let Ok(subject) = std::str::from_utf8(&sub.subject) else {
        return;
    };
    let mut subs = Vec::new();
    for si in &l.streams {
        if !crate::subject::overlaps(subject.as_bytes(), si.local.as_bytes()) {
            continue;
        }
        let Some(from) = si.from.upgrade() else {
            continue;
        };
        let shadow_subject =
            if crate::subject::subset_match(subject.as_bytes(), si.local.as_bytes()) {
                map_subject(&si.local, &si.subject, subject)
            } else {
                si.subject.clone()
            };
        let handler = shadow_handler(acc, sub, si, &shadow_subject);
        let queue = sub.queue.as_ref().and_then(|q| std::str::from_utf8(q).ok());
        match crate::internal::subscribe_traced(fabric, &from, &shadow_subject, queue, handler) {
            Ok(s) => subs.push((Arc::downgrade(&from), s)),
            Err(e) => tracing::warn!("stream import shadow for {subject:?}: {e}"),
        }
    }
    if !subs.is_empty() {
        l.shadows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(sub.conn.cid)
            .or_default()
            .push(Shadow {
                client: sub.clone(),
                subs,
            });
    }
}

fn shadow_handler(
    acc: &Arc<Account>,
    client: &Arc<Subscription>,
    si: &StreamImport,
    shadow_subject: &str,
) -> Handler {
    let client = SubRef(client.clone());
    let from = si.subject.clone();
    let to = si.local.clone();
    let acc_name = acc.name.clone();
    let acc = Arc::downgrade(acc);
    let allow_trace = si.allow_trace;
    let shown = Bytes::copy_from_slice(shadow_subject.as_bytes());
    Arc::new(move |fan, m| {
        // A JetStream delivery is matched on its deliver subject and keeps the stream's
        // subject on the wire: nats-server maps the deliver subject, and shows the stream
        // subject unless the import renames (`usePub`).
        let matched = fan.matched_subject().map(<[u8]>::to_vec);
        let Ok(subject) = std::str::from_utf8(matched.as_deref().unwrap_or(m.subject)) else {
            return;
        };
        let mapped = map_subject(&from, &to, subject);
        if !crate::subject::pattern_matches(&client.subject, mapped.as_bytes()) {
            return;
        }
        let wire = if matched.is_some() && from == to {
            m.subject
        } else {
            mapped.as_bytes()
        };
        let out = Msg {
            subject: wire,
            ..*m
        };
        // A traced message (nats-server's `processMsgResults` on a shadow subscription): an
        // `se` entry; without `allow_trace` the delivery is not traced (trace-only: none).
        match fan.msg_trace.as_deref_mut() {
            None => {
                fan.to_sub(&client, &out);
            }
            Some(t) => {
                t.add_stream_export(&acc_name, mapped.as_bytes());
                if allow_trace {
                    trace::egress::to_sub_shown(fan, &client, &out, Some(&shown));
                } else if !t.trace_only {
                    let parked = fan.msg_trace.take();
                    fan.to_sub(&client, &out);
                    fan.msg_trace = parked;
                }
            }
        }
        // The client's auto-unsubscribe max: retire it in its own account (not the
        // publisher's, where the fan-out would), with its shadows.
        if fan
            .retired
            .last()
            .is_some_and(|s| Arc::ptr_eq(s, &client.0))
        {
            fan.retired.pop();
            if let Some(acc) = acc.upgrade() {
                let fabric = fan.fabric().clone();
                if acc.retire(&client.0) {
                    fabric.interest_changed_deferred(
                        &acc,
                        &client.subject,
                        client.queue.as_ref(),
                        -1,
                        fan.kicks(),
                    );
                }
                client_unsubscribed(&*fabric, &acc, &client.0);
            }
        }
    })
}

/// A client subscription of `acc` ended: remove its shadows.
pub fn client_unsubscribed(fabric: &dyn Fabric, acc: &Account, sub: &Arc<Subscription>) {
    let Some(l) = acc.links.get() else { return };
    if l.streams.is_empty() {
        return;
    }
    let removed = {
        let mut map = l.shadows.lock().unwrap_or_else(|e| e.into_inner());
        let Some(list) = map.get_mut(&sub.conn.cid) else {
            return;
        };
        let Some(i) = list.iter().position(|s| Arc::ptr_eq(&s.client, sub)) else {
            return;
        };
        let s = list.swap_remove(i);
        if list.is_empty() {
            map.remove(&sub.conn.cid);
        }
        s
    };
    drop_shadows(fabric, removed);
}

/// A client of `acc` closed: remove every shadow of its subscriptions.
pub fn client_closed(fabric: &dyn Fabric, acc: &Account, cid: u64) {
    let Some(l) = acc.links.get() else { return };
    if l.streams.is_empty() {
        return;
    }
    let removed = l
        .shadows
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&cid);
    for s in removed.into_iter().flatten() {
        drop_shadows(fabric, s);
    }
}

fn drop_shadows(fabric: &dyn Fabric, s: Shadow) {
    for (acc, sub) in s.subs {
        if let Some(acc) = acc.upgrade() {
            crate::internal::unsubscribe(fabric, &acc, &sub);
        }
    }
}

/// Shadow subscriptions serving clients of `acc` (for tests and monitoring).
pub fn shadow_count(acc: &Account) -> usize {
    acc.links.get().map_or(0, |l| {
        l.shadows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .flatten()
            .map(|s| s.subs.len())
            .sum()
    })
}

#[cfg(test)]
mod tests;
