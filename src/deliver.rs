//! Fan-out: one message into the outbound buffers of every destination — local subscribers as
//! `MSG`/`HMSG`, routes as one `RMSG`/`HMSG` each with the queue groups they serve. Batches the
//! writer wake-ups and producer stalls of one read batch. Used by every connection kind that
//! receives messages (clients, routes); knows nothing of their protocols beyond the encoders.

use crate::account::{Account, SubRef, Subscription};
use crate::conn::{CloseReason, Conn, ConnKind, Push};
use crate::fabric::Fabric;
use crate::proto::encode;
use crate::sublist::SublistResult;
use bytes::{Bytes, BytesMut};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long a client producer waits, per read batch in all, for destinations past their stall
/// mark to drain (nats-server's `stallTotalAllowed`)...
const STALL_TOTAL: Duration = Duration::from_millis(10);
/// ... and for one destination (nats-server's `stallClientMaxDuration`).
const STALL_ONE: Duration = Duration::from_millis(5);

/// One message as it arrived.
#[derive(Clone, Copy)]
pub struct Msg<'a> {
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    pub header: Option<&'a [u8]>,
    pub payload: &'a [u8],
}

impl Msg<'_> {
    pub fn size(&self) -> usize {
        self.header.map_or(0, <[u8]>::len) + self.payload.len()
    }
}

/// Where a message may go, by where it came from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// From a local client (cid, echo): everywhere, routes included.
    Client { cid: u64, echo: bool },
    /// From a route: local clients only (one hop), and queue groups only when listed.
    Route,
    /// From a gateway: local clients and routes (the whole cluster), never another gateway;
    /// queue groups only when listed.
    Gateway,
    /// From a leafnode connection `cid`: everywhere but back to it, queue groups only when
    /// listed. From a hub we dialled (`spoke`): never to routes (the hub reaches the rest of
    /// our cluster itself).
    Leaf { cid: u64, spoke: bool },
}

pub struct Fanout {
    /// The rest of the server, as far as the fan-out needs it.
    fabric: Arc<dyn Fabric>,
    /// `fabric.has_gateways()`, asked once.
    gateways: bool,
    to_kick: Vec<Arc<Conn>>,
    stalled: Vec<Arc<Conn>>,
    /// The producer is a client (only clients stall, or with `no_fast_producer_stall` drop
    /// messages for destinations past their stall mark).
    client_producer: bool,
    /// `client_producer` and `no_fast_producer_stall`, refreshed each batch (reloadable).
    drop_stalled: bool,
    /// Routes that get this message, and the queue groups each one serves.
    routes: Vec<(Arc<Conn>, Vec<Bytes>)>,
    /// Subscriptions that reached their auto-unsubscribe max.
    pub retired: Vec<Arc<Subscription>>,
    pub rng: LazyRng,
    /// Set by a service-import relay: what its republish reached (the handler counts as one
    /// delivery otherwise).
    pub relayed: Option<u64>,
    /// The reply routes get instead of the message's (a gateway's `_GR_.` reply, which local
    /// clients get stripped).
    pub route_reply: Option<Bytes>,
    /// The subject routes, leaves and gateways get instead of the message's: a JetStream
    /// delivery's deliver subject or pull request inbox (see `matched.rs`).
    route_subject: Option<Bytes>,
    /// The leaf cluster the next published message comes from (a leaf connection's, or an
    /// `LMSG <origin>` from a route): it never goes to a leaf of that cluster, and goes to
    /// routes as `LMSG <origin>`. Taken by [`Fanout::publish`].
    pub leaf_origin: Option<crate::util::small::SmallBytes>,
    /// This batch's inbound and outbound counts, published once per batch.
    pub in_msgs: u64,
    pub in_bytes: u64,
    pub out_msgs: u64,
    pub out_bytes: u64,
    /// The part of `out_*` that went to clients.
    out_client_msgs: u64,
    out_client_bytes: u64,
    trace: bool,
    /// Internal subscriptions matched by the current publish: run after it (handlers may
    /// publish again, up to `MAX_INTERNAL_DEPTH` levels, so relay loops end).
    internal: Vec<SubRef>,
    depth: u8,
    /// Where the message an internal handler is running for came from.
    handler_origin: Origin,
    /// Deliver to this server's own subscribers only (no routes, no gateways): a message
    /// whose wire subject is not the one it was matched for.
    local_only: bool,
    /// The subject the current local-only publish was matched for when the wire subject
    /// differs (a JetStream delivery: matched on the deliver subject or pull request inbox,
    /// sent with the stream subject); see [`Fanout::publish_local_to`].
    matched: Option<Vec<u8>>,
    /// `matched` as the internal handler now running sees it.
    handler_matched: Option<Vec<u8>>,
    /// Work an internal handler left for the end of the batch, once per key (JetStream's
    /// flush and PubAcks after a burst of publishes handled in place).
    hooks: Vec<(usize, BatchHook)>,
    /// The trace of the message being delivered (`Nats-Trace-Dest`): set by the receiving
    /// connection, reported by `trace::finish`. `None` for every untraced message.
    pub msg_trace: Option<Box<crate::trace::MsgTrace>>,
}

/// See [`Fanout::defer_once`].
pub type BatchHook = Box<dyn FnOnce(&mut Fanout) + Send + Sync>;

impl Drop for Fanout {
    /// A batch dropped without its end (an error path) still runs its deferred work.
    fn drop(&mut self) {
        self.run_hooks();
    }
}

/// A fast RNG seeded on first use: most fan-outs (one per JetStream step, for one) never
/// pick a queue member, and seeding costs more than the rest of creating one.
pub struct LazyRng(Option<SmallRng>);

impl LazyRng {
    fn get(&mut self) -> &mut SmallRng {
        self.0
            .get_or_insert_with(|| SmallRng::from_rng(&mut rand::rng()))
    }
}

impl RngCore for LazyRng {
    fn next_u32(&mut self) -> u32 {
        self.get().next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.get().next_u64()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.get().fill_bytes(dst)
    }
}

/// How many internal hops (relay → relay …) one message may take.
const MAX_INTERNAL_DEPTH: u8 = 4;

impl Fanout {
    pub fn new(fabric: Arc<dyn Fabric>) -> Self {
        Fanout {
            gateways: fabric.has_gateways(),
            fabric,
            to_kick: Vec::new(),
            stalled: Vec::new(),
            client_producer: false,
            drop_stalled: false,
            routes: Vec::new(),
            retired: Vec::new(),
            rng: LazyRng(None),
            route_reply: None,
            route_subject: None,
            leaf_origin: None,
            in_msgs: 0,
            in_bytes: 0,
            out_msgs: 0,
            out_bytes: 0,
            out_client_msgs: 0,
            out_client_bytes: 0,
            trace: crate::logging::trace_enabled(),
            internal: Vec::new(),
            depth: 0,
            handler_origin: Origin::Route,
            relayed: None,
            local_only: false,
            matched: None,
            handler_matched: None,
            hooks: Vec::new(),
            msg_trace: None,
        }
    }

    /// This fan-out delivers for a client's read loop: its producer stalls for destinations
    /// past their stall mark, or with `no_fast_producer_stall` drops messages for them.
    pub fn for_client(mut self) -> Self {
        self.client_producer = true;
        self.drop_stalled = self.fabric.no_fast_producer_stall();
        self
    }

    /// The server this fan-out delivers for.
    pub fn fabric(&self) -> &Arc<dyn Fabric> {
        &self.fabric
    }

    /// Run `f` when this batch ends (before writers are woken), unless a hook with the same
    /// `key` is already waiting (then `f` is dropped unboxed: no allocation per message).
    pub fn defer_once(&mut self, key: usize, f: impl FnOnce(&mut Fanout) + Send + Sync + 'static) {
        if !self.hooks.iter().any(|(k, _)| *k == key) {
            self.hooks.push((key, Box::new(f)));
        }
    }

    /// Run the deferred hooks (they may publish through this fan-out, and defer again).
    pub fn run_hooks(&mut self) {
        while !self.hooks.is_empty() {
            for (_, h) in std::mem::take(&mut self.hooks) {
                h(self);
            }
        }
    }

    /// Append `need` bytes to `dest`, with the batch's kick/stall/slow-consumer bookkeeping.
    #[inline]
    pub fn push(&mut self, dest: &Arc<Conn>, need: usize, f: impl FnOnce(&mut BytesMut)) -> bool {
        let r = if self.drop_stalled {
            dest.out.push_unless_stalled(need, f)
        } else {
            dest.out.push(need, f)
        };
        match r {
            Push::Ok { kick, stall } => {
                if kick {
                    self.to_kick.push(dest.clone());
                }
                if stall {
                    self.stalled.push(dest.clone());
                }
                true
            }
            Push::Overflow => {
                self.slow_consumer(dest);
                false
            }
            // Dropped: a message trace reports it as nats-server does, "Not delivered
            // because fast producer not stalled and consumer is slow" (`trace::ERR_SLOW`).
            Push::Closed | Push::Dropped => false,
        }
    }

    /// A destination past its `max_pending`. A client is closed (counted, logged). A route
    /// or gateway is never closed for it (as nats-server, which bounds only clients): the
    /// message is dropped for it, and the episode counted and logged once until its writer
    /// catches up.
    fn slow_consumer(&self, dest: &Arc<Conn>) {
        if dest.is_closed() {
            return;
        }
        let keep = matches!(
            dest.kind,
            ConnKind::Route | ConnKind::Gateway | ConnKind::Leaf
        );
        if keep && dest.out.set_slow(true) {
            return;
        }
        self.fabric.stats().slow.count(dest.kind);
        tracing::info!(
            "{} - Slow Consumer Detected: MaxPending of {} Exceeded{}",
            dest.log_prefix(),
            dest.out.max_pending(),
            if keep {
                ", dropping messages until it drains"
            } else {
                ""
            }
        );
        if !keep {
            dest.close(CloseReason::SlowConsumerPendingBytes);
        }
    }

    /// Deliver to one local subscriber. False when nothing was delivered.
    #[inline]
    pub fn to_sub(&mut self, sub: &SubRef, m: &Msg<'_>) -> bool {
        if self.msg_trace.is_some() {
            return crate::trace::egress::to_sub(self, sub, m);
        }
        self.deliver_untraced(sub, m)
    }

    /// [`Fanout::to_sub`] without the trace bookkeeping.
    #[inline]
    pub(crate) fn deliver_untraced(&mut self, sub: &SubRef, m: &Msg<'_>) -> bool {
        if sub.denies(m.subject) {
            return false;
        }
        let (ok, last) = sub.count_delivery();
        if !ok {
            return false;
        }
        let dest = &sub.conn;
        let header = m.header.filter(|_| dest.headers.load(Relaxed));
        let need = encode::msg_len(m.subject, &sub.sid, m.reply, header, m.payload);
        let pushed = self.push(dest, need, |b| {
            encode::write_msg_or_hmsg(b, m.subject, &sub.sid, m.reply, header, m.payload)
        });
        if !pushed {
            return false;
        }
        if let (Some(reply), Some(r)) = (m.reply, dest.responses.get()) {
            r.track(reply);
        }
        let size = (header.map_or(0, <[u8]>::len) + m.payload.len()) as u64;
        dest.counters.out_msgs.fetch_add(1, Relaxed);
        dest.counters.out_bytes.fetch_add(size, Relaxed);
        self.out_msgs += 1;
        self.out_bytes += size;
        if dest.kind == ConnKind::Client {
            self.out_client_msgs += 1;
            self.out_client_bytes += size;
        }
        if self.trace {
            tracing::trace!(
                "{} - ->> [MSG {} {} {}]",
                dest.log_prefix(),
                String::from_utf8_lossy(m.subject),
                String::from_utf8_lossy(&sub.sid),
                size
            );
        }
        if last {
            self.retired.push(sub.0.clone());
        }
        true
    }

    fn route_target(&mut self, conn: &Arc<Conn>) -> usize {
        match self.routes.iter().position(|(c, _)| c.cid == conn.cid) {
            Some(i) => i,
            None => {
                self.routes.push((conn.clone(), Vec::new()));
                self.routes.len() - 1
            }
        }
    }

    /// Deliver a message matched in `acc` to everything `r` holds that `origin` may reach.
    /// Returns the number of deliveries (routes count once each).
    pub fn publish(
        &mut self,
        acc: &Account,
        r: &SublistResult<SubRef>,
        m: &Msg<'_>,
        origin: Origin,
        listed_queues: Option<&crate::proto::parser::Queues<'_>>,
    ) -> u64 {
        let mut delivered = 0u64;
        // What goes beyond this server (taken here: a handler's nested publish starts clean).
        let remote_subject = self.route_subject.take();
        let remote_reply = self.route_reply.take();
        let leaf_origin = self.leaf_origin.take();
        let lo = leaf_origin.as_deref();
        let from_route = origin == Origin::Route;
        let (own_cid, echo) = match origin {
            Origin::Client { cid, echo } => (cid, echo),
            Origin::Route | Origin::Gateway | Origin::Leaf { .. } => (u64::MAX, true),
        };
        // The publisher's own subscription, which a publish without echo skips (a client's,
        // or the server's internal one for its own publish without echo).
        let own = |c: &Conn| !echo && c.cid == own_cid;
        // Leafnode rules (nats-server's): never back to the leaf it came from; from a hub we
        // dialled, not to routes; from a route, only to leaves we are the hub of.
        let (from_leaf, from_spoke) = match origin {
            Origin::Leaf { cid, spoke } => (cid, spoke),
            _ => (u64::MAX, false),
        };
        for s in &r.psubs {
            match s.conn.kind {
                ConnKind::Client => {
                    if own(&s.conn) {
                        if self.msg_trace.is_some() {
                            crate::trace::egress::no_echo(self, s);
                        }
                        continue;
                    }
                    if self.to_sub(s, m) {
                        delivered += 1;
                    }
                }
                ConnKind::Route => {
                    if !from_route && !from_spoke && !self.local_only && !s.conn.is_closed() {
                        self.route_target(&s.conn);
                    }
                }
                ConnKind::Leaf => {
                    if self.leaf_ok(&s.conn, m.subject, (from_route, from_leaf, lo)) {
                        self.route_target(&s.conn);
                    }
                }
                // This server's own handlers, unless the publish is its own without echo
                // (nats-server's system client has none).
                ConnKind::Internal => {
                    if !own(&s.conn) {
                        self.internal.push(s.clone());
                    }
                }
                // Gateway interest lives in the gateway's own sublists, never here.
                ConnKind::Gateway => {}
            }
        }
        for g in &r.qsubs {
            let n = g.members.len();
            if n == 0 {
                continue;
            }
            if (from_route || listed_queues.is_some())
                && !listed_queues.is_some_and(|q| q.iter().any(|x| x == &g.name[..]))
            {
                continue;
            }
            let start = match g.pick(&mut self.rng) {
                Some(first) => g
                    .members
                    .iter()
                    .position(|mb| Arc::ptr_eq(&mb.0, &first.0))
                    .unwrap_or(0),
                None => self.rng.random_range(0..n),
            };
            // A leaf member serves only when no other member can (local ones preferred).
            let mut leaf: Option<&Arc<Conn>> = None;
            let mut done = false;
            for i in 0..n {
                let s = &g.members[(start + i) % n];
                if s.conn.is_closed() {
                    continue;
                }
                match s.conn.kind {
                    ConnKind::Client => {
                        if own(&s.conn) {
                            if self.msg_trace.is_some() {
                                crate::trace::egress::no_echo(self, s);
                            }
                            continue;
                        }
                        if self.to_sub(s, m) {
                            delivered += 1;
                            done = true;
                            break;
                        }
                    }
                    ConnKind::Route => {
                        if from_route || from_spoke || self.local_only {
                            continue;
                        }
                        let t = self.route_target(&s.conn);
                        self.routes[t].1.push(g.name.clone());
                        done = true;
                        break;
                    }
                    ConnKind::Leaf => {
                        if leaf.is_none()
                            && self.leaf_ok(&s.conn, m.subject, (from_route, from_leaf, lo))
                        {
                            leaf = Some(&s.conn);
                        }
                    }
                    ConnKind::Internal => {
                        if own(&s.conn) {
                            continue;
                        }
                        self.internal.push(s.clone());
                        done = true;
                        break;
                    }
                    ConnKind::Gateway => {}
                }
            }
            if let (false, Some(conn)) = (done, leaf) {
                let t = self.route_target(conn);
                self.routes[t].1.push(g.name.clone());
            }
        }
        let rm = Msg {
            subject: remote_subject.as_deref().unwrap_or(m.subject),
            reply: remote_reply.as_deref().or(m.reply),
            ..*m
        };
        if !self.routes.is_empty() {
            // A leaf's message keeps its cluster to routes that take it.
            let lo = lo.filter(|_| from_leaf != u64::MAX);
            let n = self.send_to_routes(acc.name.as_bytes(), &rm, lo);
            if n > 0 {
                acc.kinds.routes_out.add(n, n * m.size() as u64);
            }
            delivered += n;
        }
        if !self.internal.is_empty() {
            delivered += self.run_internal(m, origin);
        }
        let to_gateways = matches!(
            origin,
            Origin::Client { .. } | Origin::Leaf { spoke: false, .. }
        );
        if to_gateways && !self.local_only && self.gateways {
            let fabric = self.fabric.clone();
            let n = fabric.to_gateways(self, acc, r, &rm);
            if n > 0 {
                acc.kinds.gateways_out.add(n, n * m.size() as u64);
            }
            delivered += n;
        }
        delivered
    }

    /// May a message on `subject` go to leaf connection `conn`: not back where it came from
    /// (the leaf `from_leaf`, or any leaf of its origin cluster `lo`), not from a route to
    /// our hub, not on a subject its permissions deny.
    fn leaf_ok(
        &self,
        conn: &Conn,
        subject: &[u8],
        (from_route, from_leaf, lo): (bool, u64, Option<&[u8]>),
    ) -> bool {
        let back = conn.cid == from_leaf
            || (from_route && conn.spoke.load(Relaxed))
            || lo.is_some_and(|o| conn.leaf_cluster().is_some_and(|c| c[..] == *o));
        !self.local_only && !back && !conn.is_closed() && conn.leaf_may_send(subject)
    }

    /// Inside an internal handler: the subject the message was matched for, when it differs
    /// from its wire subject (see [`Fanout::publish_local_to`]).
    pub fn matched_subject(&self) -> Option<&[u8]> {
        self.handler_matched.as_deref()
    }

    /// Run the handlers of the internal subscriptions the last match found.
    fn run_internal(&mut self, m: &Msg<'_>, origin: Origin) -> u64 {
        let subs = std::mem::take(&mut self.internal);
        let matched = self.matched.take();
        if self.depth >= MAX_INTERNAL_DEPTH {
            tracing::debug!(
                "internal delivery of {:?} dropped: more than {MAX_INTERNAL_DEPTH} relay hops",
                String::from_utf8_lossy(m.subject)
            );
            return 0;
        }
        // A traced message: only the handlers that take part in the trace (import relays,
        // JetStream: `Subscription::traced`) see it; the others (services) run untraced, and
        // not at all for trace-only (nothing is delivered, but it counts as delivered).
        let mut trace = self.msg_trace.take();
        let only = trace.as_ref().is_some_and(|t| t.trace_only);
        self.depth += 1;
        let mut n = 0;
        for s in &subs {
            if let Some(h) = &s.handler {
                if only && !s.traced {
                    n += 1;
                    continue;
                }
                let (ok, last) = s.count_delivery();
                if !ok {
                    continue;
                }
                self.handler_origin = origin;
                self.handler_matched.clone_from(&matched);
                self.relayed = None;
                if s.traced && trace.is_some() {
                    self.msg_trace = trace.take();
                    h(self, m);
                    trace = self.msg_trace.take();
                } else {
                    h(self, m);
                }
                n += self.relayed.take().unwrap_or(1);
                if last {
                    self.retired.push(s.0.clone());
                }
            }
        }
        self.depth -= 1;
        self.handler_matched = None;
        self.matched = matched;
        self.msg_trace = trace;
        n
    }

    /// Inside an internal handler: where the message it runs for came from.
    pub fn origin(&self) -> Origin {
        self.handler_origin
    }

    /// One RMSG/HMSG per target route, with the queue groups it was chosen for.
    fn send_to_routes(&mut self, account: &[u8], m: &Msg<'_>, origin: Option<&[u8]>) -> u64 {
        let mut routes = std::mem::take(&mut self.routes);
        let mut sent = 0;
        let reply = m.reply;
        for (conn, queues) in routes.drain(..) {
            let traced;
            let mut header = m.header;
            if self.msg_trace.is_some() {
                match crate::trace::egress::remote(self, &conn, m.header) {
                    crate::trace::egress::Remote::Untraced => {}
                    crate::trace::egress::Remote::Skip => continue,
                    crate::trace::egress::Remote::Header(h) => {
                        traced = h;
                        header = Some(&traced);
                    }
                }
            }
            let header = header.filter(|_| conn.headers.load(Relaxed));
            let leaf = conn.kind == ConnKind::Leaf;
            // To a route peer that takes it: `LMSG <origin> …` (nats-server's lnoc form).
            let origin = origin.filter(|_| !leaf && conn.lnoc.load(Relaxed));
            let account: &[u8] = if leaf || conn.no_account.load(Relaxed) {
                b""
            } else {
                account
            };
            let qrefs: Vec<&[u8]> = queues.iter().map(|q| &q[..]).collect();
            let need = 64
                + origin.map_or(0, <[u8]>::len)
                + account.len()
                + m.subject.len()
                + reply.map_or(0, <[u8]>::len)
                + qrefs.iter().map(|q| q.len() + 1).sum::<usize>()
                + header.map_or(0, <[u8]>::len)
                + m.payload.len();
            let ok = self.push(&conn, need, |b| match origin {
                _ if leaf => encode::write_lmsg(b, m.subject, reply, &qrefs, header, m.payload),
                Some(o) => {
                    let (s, p) = (m.subject, m.payload);
                    encode::write_rmsg_from_leaf(b, o, account, s, reply, &qrefs, header, p)
                }
                None => encode::write_rmsg(b, account, m.subject, reply, &qrefs, header, m.payload),
            });
            if ok {
                let size = (header.map_or(0, <[u8]>::len) + m.payload.len()) as u64;
                conn.counters.out_msgs.fetch_add(1, Relaxed);
                conn.counters.out_bytes.fetch_add(size, Relaxed);
                self.out_msgs += 1;
                self.out_bytes += size;
                sent += 1;
            }
        }
        self.routes = routes;
        sent
    }

    /// After a batch: publish the counters (server-wide and `own`'s), wake destinations once
    /// each, and, for a client producer, slow down for destinations past their stall mark
    /// (at most [`STALL_TOTAL`] per batch; a destination that did not drain in one wait is
    /// not waited for again until it writes: see `Outbound::wait_drained`). Clients wait
    /// unless `no_fast_producer_stall`, which drops their messages for such destinations
    /// instead (see [`Fanout::push`]). A route's, gateway's or leaf's reader waits the same
    /// way for local clients only (never for another link): nats-server's readers write to
    /// such clients themselves (`flushClients`), so a client slower than the link that
    /// feeds it slows that link, and the producer behind it, rather than being cut.
    pub async fn end_batch(&mut self, own: &Arc<Conn>) {
        self.run_hooks();
        let client = own.kind == ConnKind::Client;
        if self.in_msgs > 0 {
            own.counters.in_msgs.fetch_add(self.in_msgs, Relaxed);
            own.counters.in_bytes.fetch_add(self.in_bytes, Relaxed);
            if client {
                let s = self.fabric.stats();
                s.in_client_msgs.fetch_add(self.in_msgs, Relaxed);
                s.in_client_bytes.fetch_add(self.in_bytes, Relaxed);
            }
            self.flush_counters();
        }
        for d in self.to_kick.drain(..) {
            d.out.kick();
        }
        if self.client_producer {
            self.drop_stalled = self.fabric.no_fast_producer_stall();
        }
        if !self.stalled.is_empty() {
            // With `no_fast_producer_stall` nobody waits, and nothing is counted (nats-server
            // counts `stalled_clients` in its wait).
            let link = matches!(
                own.kind,
                ConnKind::Route | ConnKind::Gateway | ConnKind::Leaf
            );
            let wait = (client || link) && !self.fabric.no_fast_producer_stall();
            if wait && client {
                self.fabric.stats().stalled_clients.fetch_add(1, Relaxed);
            }
            let stalled = std::mem::take(&mut self.stalled);
            let deadline = Instant::now() + STALL_TOTAL;
            let waits_for = |d: &Arc<Conn>| client || d.kind == ConnKind::Client;
            for d in stalled.iter().filter(|d| wait && waits_for(d)) {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                if !Arc::ptr_eq(d, own) {
                    // Only a client waiting for a client marks it stuck (one bounded wait
                    // per producer); a link's reader, like a producer behind a link, waits
                    // on every batch, as nats-server's readers block on such writes.
                    let again = link || d.kind != ConnKind::Client;
                    d.out.wait_drained(left.min(STALL_ONE), again).await;
                }
            }
            self.stalled = stalled;
            self.stalled.clear();
        }
    }

    /// Add this batch's counts to the server-wide ones and reset them.
    pub fn flush_counters(&mut self) {
        let s = self.fabric.stats();
        s.in_msgs.fetch_add(self.in_msgs, Relaxed);
        s.in_bytes.fetch_add(self.in_bytes, Relaxed);
        s.out_msgs.fetch_add(self.out_msgs, Relaxed);
        s.out_bytes.fetch_add(self.out_bytes, Relaxed);
        if self.out_client_msgs > 0 {
            s.out_client_msgs.fetch_add(self.out_client_msgs, Relaxed);
            s.out_client_bytes.fetch_add(self.out_client_bytes, Relaxed);
            self.out_client_msgs = 0;
            self.out_client_bytes = 0;
        }
        self.in_msgs = 0;
        self.in_bytes = 0;
        self.out_msgs = 0;
        self.out_bytes = 0;
    }

    /// Connections whose writers are woken at the end of the batch.
    pub fn kicks(&mut self) -> &mut Vec<Arc<Conn>> {
        &mut self.to_kick
    }

    /// Retire, in `acc`, the subscriptions from the `from`-th on that reached their
    /// auto-unsubscribe max during this batch: out of the sublist, routes and gateways told,
    /// and their import shadows in exporting accounts removed. The one retire path of every
    /// connection kind that delivers into an account it knows (routes, gateways, relays).
    pub fn retire_in(&mut self, acc: &Account, from: usize) {
        if self.retired.len() <= from {
            return;
        }
        let done: Vec<Arc<Subscription>> = self.retired.drain(from..).collect();
        for sub in done {
            if acc.retire(&sub) {
                self.fabric.interest_changed_deferred(
                    acc,
                    &sub.subject,
                    sub.queue.as_ref(),
                    -1,
                    &mut self.to_kick,
                );
                crate::imports::client_unsubscribed(&*self.fabric, acc, &sub);
            }
        }
    }

    /// Drop references held for the batch (on close).
    pub fn clear(&mut self) {
        self.run_hooks();
        self.to_kick.clear();
        self.stalled.clear();
        self.routes.clear();
        self.retired.clear();
        self.internal.clear();
    }
}

mod matched;

#[cfg(test)]
#[path = "deliver_tests.rs"]
mod tests;
