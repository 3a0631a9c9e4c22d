//! JetStream: streams, consumers and the `$JS.API` on one node — a module beside the routing
//! core that reaches the rest of the server only through internal subscriptions and
//! publishes (`crate::internal`).
//!
//! Shape: every internal subscription (the API subjects, each stream's subjects, `$JS.ACK.>`,
//! `$JS.FC.>`) has a handler that copies the message into one bounded channel; one task
//! (`run`) takes events in order and applies them to the [`Engine`] (all streams and
//! consumers of all accounts) under a mutex that is never held across an `.await`. The same
//! task runs a timer (redeliveries, pull expiries, heartbeats, age limits, state saves).
//! Monitoring reads the engine under the same mutex.

pub mod advisory;
pub mod cluster;
pub mod consumer;
pub mod engine;
pub mod limits;
pub mod mirror;
pub mod monitor;
pub mod persist;
pub mod snapshot;
pub mod store;
pub mod stream;
pub mod types;

use crate::account::{Account, Handler, Subscription};
use crate::deliver::{Fanout, Msg};
use crate::server::ServerShared;
use bytes::Bytes;
use engine::Engine;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;
use store::SyncPolicy;
use tokio::sync::mpsc;

/// Events waiting for the JetStream task, by count and by bytes; more are dropped (logged),
/// so a flood of publishes cannot grow memory without bound (the publisher gets no ack and
/// retries).
const QUEUE: usize = 65_536;
const QUEUE_BYTES: usize = 256 << 20;
/// How often the timer work runs.
const TICK: Duration = Duration::from_millis(25);

/// JetStream's settings once defaults are applied (what `/varz` and `/jsz` report).
#[derive(Clone, Debug)]
pub struct JsConfig {
    /// `<store_dir>/jetstream` (nats-server's layout).
    pub store_dir: PathBuf,
    pub max_memory: i64,
    pub max_storage: i64,
    /// Whether the limits were configured (they are enforced only then).
    pub limits_set: bool,
    pub domain: Option<String>,
    pub sync: SyncPolicy,
    /// Log entries between two snapshots of a replicated stream's group.
    pub stream_snapshot_every: u64,
}

impl JsConfig {
    pub fn from_opts(o: &crate::config::JetStreamOpts) -> JsConfig {
        let base = o
            .store_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("nats"));
        let store_dir = if base.file_name().is_some_and(|n| n == "jetstream") {
            base
        } else {
            base.join("jetstream")
        };
        JsConfig {
            store_dir,
            max_memory: o.max_memory_store.unwrap_or_else(default_max_memory),
            max_storage: o.max_file_store.unwrap_or(1 << 40),
            limits_set: o.max_memory_store.is_some() || o.max_file_store.is_some(),
            domain: o.domain.clone().filter(|d| !d.is_empty()),
            sync: SyncPolicy {
                interval: o.sync_interval.unwrap_or(Duration::from_secs(120)),
                always: o.sync_always,
            },
            stream_snapshot_every: o.stream_snapshot_every.unwrap_or(50_000).max(1),
        }
    }
}

/// nats-server's default `max_memory_store`: 75% of the machine's memory.
fn default_max_memory() -> i64 {
    let kb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(1 << 20);
    kb * 1024 / 4 * 3
}

/// One message copied out of the fan-out.
pub struct Event {
    pub acc: Arc<str>,
    pub kind: EventKind,
    pub subject: String,
    pub reply: Option<String>,
    pub header: Option<Bytes>,
    pub payload: Bytes,
    /// A traced message for a stream: where the stream reports what it did (`trace::js`).
    pub trace: Option<Arc<crate::trace::js::JsSlot>>,
    /// Set on an event applied from a replicated stream's log (clustered JetStream): the
    /// time its leader gave it, which every replica stores.
    pub ts: Option<i64>,
}

impl Event {
    /// Subject, header and payload bytes: what a store counts for the message, less its
    /// per-message overhead (see `limits::MSG_OVERHEAD`).
    pub fn msg_bytes(&self) -> u64 {
        (self.subject.len() + self.header.as_ref().map_or(0, Bytes::len) + self.payload.len())
            as u64
    }

    /// What it holds in memory, roughly.
    pub fn size(&self) -> usize {
        64 + self.subject.len()
            + self.reply.as_ref().map_or(0, String::len)
            + self.header.as_ref().map_or(0, Bytes::len)
            + self.payload.len()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A `$JS.API.…` request (subject normalized to `$JS.API.…` when a domain prefix was used).
    Api,
    /// A message for stream `.0`.
    Publish(Arc<str>),
    Ack,
    FlowControl,
    /// A `$JS.API` request in an account without JetStream.
    NotEnabled,
    /// A message on the subjects of stream template `.0`.
    Template(Arc<str>),
    /// For stream `.0` from an external origin, on its subscription to `.1` (a deliver
    /// subject or a create answer's inbox): `mirror::remote`.
    Sync(Arc<str>, Arc<str>),
}

/// The bounded way into the JetStream task, and the way around it: a publish or an ack
/// that finds the engine idle (nothing queued, lock free) is handled in place, on the
/// publisher's task, without the hop to the JetStream task. Order is kept: in place only
/// when no earlier event waits.
#[derive(Clone)]
pub struct Queue {
    tx: mpsc::Sender<Event>,
    bytes: Arc<AtomicUsize>,
    /// Events queued and not yet handled (taken off the channel is not enough: the task
    /// may not have applied it yet).
    pending: Arc<AtomicUsize>,
    js: Arc<OnceLock<Weak<JetStream>>>,
    /// The server, for events handled in place (the fan-out knows only its `Fabric`).
    srv: Weak<ServerShared>,
}

impl Queue {
    fn new(srv: &Arc<ServerShared>) -> (Queue, mpsc::Receiver<Event>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let q = Queue {
            tx,
            bytes: Arc::new(AtomicUsize::new(0)),
            pending: Arc::new(AtomicUsize::new(0)),
            js: Arc::new(OnceLock::new()),
            srv: Arc::downgrade(srv),
        };
        (q, rx)
    }

    /// Queue `ev` unless the queue is full (by count or bytes); never blocks.
    pub fn push(&self, ev: Event) {
        let n = ev.size();
        if self.bytes.fetch_add(n, Relaxed) + n > QUEUE_BYTES {
            self.bytes.fetch_sub(n, Relaxed);
            tracing::warn!("JetStream event dropped: {QUEUE_BYTES} bytes already queued");
            return;
        }
        self.pending.fetch_add(1, AcqRel);
        if self.tx.try_send(ev).is_err() {
            self.bytes.fetch_sub(n, Relaxed);
            self.pending.fetch_sub(1, AcqRel);
            tracing::warn!("JetStream event dropped: queue full or JetStream stopped");
        }
    }

    /// Handle `ev` in place when nothing is queued and the engine is free; otherwise queue
    /// it. A stored publish's flush and PubAck wait for the end of `fan`'s batch, so a
    /// burst of publishes costs one write and wakes its publisher once.
    fn handle_or_push(&self, fan: &mut Fanout, ev: Event) {
        let (Some(js), Some(srv)) = (self.js.get().and_then(Weak::upgrade), self.srv.upgrade())
        else {
            return self.push(ev);
        };
        if self.pending.load(Acquire) != 0 {
            return self.push(ev);
        }
        let Ok(mut e) = js.engine.try_lock() else {
            return self.push(ev);
        };
        // Re-checked under the lock: the task decrements only after applying an event
        // while it holds the lock, so zero here means nothing earlier is unapplied.
        if self.pending.load(Acquire) != 0 {
            drop(e);
            return self.push(ev);
        }
        let publish = matches!(ev.kind, EventKind::Publish(_));
        e.handle_queued(&srv, ev);
        drop(e);
        if publish {
            let key = Arc::as_ptr(&js) as usize;
            fan.defer_once(key, move |_: &mut Fanout| js.engine().finish_batch(&srv));
        }
    }

    /// The task took `ev` off the queue.
    fn taken(&self, ev: &Event) {
        self.bytes.fetch_sub(ev.size(), Relaxed);
    }

    /// The task applied a queued event (called with the engine locked).
    fn handled(&self) {
        self.pending.fetch_sub(1, AcqRel);
    }
}

/// JetStream of one server.
pub struct JetStream {
    pub config: JsConfig,
    engine: Mutex<Engine>,
    queue: Queue,
}

impl JetStream {
    /// Recover streams from the store directory, subscribe the API in every JetStream
    /// account and start the task. `None` when JetStream is off.
    pub fn start(srv: &Arc<ServerShared>) -> Result<Option<Arc<JetStream>>, String> {
        let Some(o) = &srv.opts.jetstream else {
            return Ok(None);
        };
        let config = JsConfig::from_opts(o);
        // nats-server's words for a store directory (or its `jetstream` directory) that is a
        // file.
        let configured = config.store_dir.parent().unwrap_or(&config.store_dir);
        if [configured, &config.store_dir]
            .iter()
            .any(|d| d.exists() && !d.is_dir())
        {
            return Err("Can't start JetStream: storage directory is not a directory".into());
        }
        std::fs::create_dir_all(&config.store_dir).map_err(|e| {
            format!(
                "could not create JetStream storage directory {}: {e}",
                config.store_dir.display()
            )
        })?;
        let (queue, rx) = Queue::new(srv);
        let js = Arc::new(JetStream {
            config: config.clone(),
            engine: Mutex::new(Engine::new(config.clone(), queue.clone())),
            queue,
        });
        let _ = js.queue.js.set(Arc::downgrade(&js));
        tracing::info!("Starting JetStream");
        tracing::info!("  Store Directory: \"{}\"", config.store_dir.display());
        tracing::info!("  Max Memory:      {}", config.max_memory);
        tracing::info!("  Max Storage:     {}", config.max_storage);
        if let Some(d) = &config.domain {
            tracing::info!("  Domain:          {d}");
        }
        let accounts = js_accounts(srv);
        let limits = accounts
            .iter()
            .filter_map(|a| srv.opts.jetstream_limits.get(&a.name))
            .flat_map(crate::config::JsLimits::each);
        limits::check_sufficient(&config, limits).map_err(|e| {
            format!(
                "Can't start JetStream: Error enabling jetstream on configured accounts: {} ({})",
                e.description, e.err_code
            )
        })?;
        {
            let mut e = js.engine();
            for acc in srv.accounts.all() {
                if accounts.iter().any(|a| a.name == acc.name) {
                    e.enable_account(srv, acc);
                } else if acc.name != srv.system_account_name() {
                    e.refuse_account(srv, acc);
                } else {
                    e.serve_system(srv, acc);
                }
            }
        }
        if let Some(c) = cluster::JsCluster::start(srv, &js) {
            js.engine().cluster = Some(c);
        }
        srv.tasks.spawn(run(srv.clone(), js.clone(), rx));
        Ok(Some(js))
    }

    pub fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn queue(&self) -> &Queue {
        &self.queue
    }
}

/// The accounts with JetStream: those configured with `jetstream: enabled`, or (none
/// configured) the global account when it is the only one besides the system account, as
/// nats-server (with other accounts configured and none enabled, none has JetStream).
fn js_accounts(srv: &ServerShared) -> Vec<Arc<Account>> {
    let sys = srv.system_account_name();
    srv.accounts
        .all()
        .into_iter()
        .filter(|a| has_jetstream(&srv.opts, sys, &a.name))
        .collect()
}

/// Whether account `name` has JetStream under options `o` (`sys`: the system account).
pub(crate) fn has_jetstream(o: &crate::config::Options, sys: &str, name: &str) -> bool {
    if o.jetstream_accounts.is_empty() {
        name == crate::account::GLOBAL_ACCOUNT && o.accounts.iter().all(|a| a == sys)
    } else {
        o.jetstream_accounts.iter().any(|n| n == name)
    }
}

/// A handler that copies each message into the channel as `kind`.
pub fn handler(tx: Queue, acc: Arc<str>, kind: EventKind, domain: Option<String>) -> Handler {
    Arc::new(move |fan: &mut Fanout, m: &Msg<'_>| {
        let Ok(subject) = std::str::from_utf8(m.subject) else {
            return;
        };
        let subject = match (&kind, &domain) {
            (EventKind::Api, Some(d)) => {
                let p = format!("$JS.{d}.API.");
                match subject.strip_prefix(p.as_str()) {
                    Some(rest) => format!("$JS.API.{rest}"),
                    None => subject.to_string(),
                }
            }
            _ => subject.to_string(),
        };
        // A traced message a stream takes: its `js` entry; a stored copy has its trace
        // destination disabled (its deliveries are not traced), as nats-server stores it.
        let trace = match (&kind, fan.msg_trace.is_some()) {
            (EventKind::Publish(stream), true) => crate::trace::js::begin(fan, stream),
            _ => None,
        };
        let header = match (&trace, m.header) {
            (Some(t), Some(h)) if !t.trace_only() => Some(Bytes::from(crate::trace::set_header(
                h,
                crate::trace::TRACE_DEST,
                crate::trace::TRACE_DEST_DISABLED,
            ))),
            (_, h) => h.map(Bytes::copy_from_slice),
        };
        let ev = Event {
            acc: acc.clone(),
            kind: kind.clone(),
            subject,
            reply: m
                .reply
                .and_then(|r| std::str::from_utf8(r).ok())
                .map(str::to_string),
            header,
            payload: Bytes::copy_from_slice(m.payload),
            trace,
            ts: None,
        };
        match ev.kind {
            EventKind::Publish(_) | EventKind::Ack => tx.handle_or_push(fan, ev),
            _ => tx.push(ev),
        }
    })
}

/// Subscribe internally, logging failures.
pub fn subscribe(
    srv: &ServerShared,
    acc: &Account,
    subject: &str,
    queue: Option<&str>,
    h: Handler,
) -> Option<Arc<Subscription>> {
    match srv.subscribe_internal(acc, subject, queue, h) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!("JetStream: {e}");
            None
        }
    }
}

/// [`subscribe`] for a stream's subjects: the handler takes part in message tracing.
pub fn subscribe_stream_subject(
    srv: &ServerShared,
    acc: &Account,
    subject: &str,
    h: Handler,
) -> Option<Arc<Subscription>> {
    match crate::internal::subscribe_traced(srv, acc, subject, None, h) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::error!("JetStream: {e}");
            None
        }
    }
}

/// The JetStream task: events in order, the timer, shutdown.
async fn run(srv: Arc<ServerShared>, js: Arc<JetStream>, mut rx: mpsc::Receiver<Event>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = srv.shutdown_signal() => break,
            _ = tick.tick() => {
                let mut e = js.engine();
                e.tick(&srv);
                // Acks of publishes handled in place are sent at their batch's end; this
                // is only a backstop.
                e.finish_batch(&srv);
            }
            ev = rx.recv() => match ev {
                Some(ev) => {
                    js.queue.taken(&ev);
                    let mut e = js.engine();
                    e.handle_queued(&srv, ev);
                    js.queue.handled();
                    // Take what else is queued under the same lock (bounded), then flush the
                    // streams written to once and send their acks.
                    for _ in 0..256 {
                        match rx.try_recv() {
                            Ok(ev) => {
                                js.queue.taken(&ev);
                                e.handle_queued(&srv, ev);
                                js.queue.handled();
                            }
                            Err(_) => break,
                        }
                    }
                    e.finish_batch(&srv);
                }
                None => break,
            }
        }
    }
    js.engine().shutdown(&srv);
}
