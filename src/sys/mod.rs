//! The `$SYS` services, as nats-server 2.9 runs them in its system account: answers to
//! `$SYS.REQ.SERVER.PING[.<X>Z]` and `$SYS.REQ.SERVER.<id>.<X>Z` (the monitoring JSON in
//! nats-server's envelope), the periodic `$SYS.SERVER.<id>.STATSZ`, and a request inbox the
//! server uses to ask every node at once (`topz.rs`: the cluster-wide `/topz`).
//!
//! The subscriptions are internal (`internal.rs`): their interest goes to routes, so a request
//! published on any node reaches every node, nats-server nodes included. Handlers only copy the
//! message into a channel; one task per server does the work and publishes the answers.

pub mod account;
pub mod claims;
pub mod conns;
pub mod resolver;
pub mod topz;
pub mod url_resolver;
pub mod user_info;

use crate::account::{Account, Handler, Subscription};
use crate::deliver::Msg;
use crate::monitor::{accountz, connz, misc, routez, subsz, varz};
use crate::server::ServerShared;
use crate::util::time::rfc3339_nano;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;

/// The endpoints every server answers, by the last token of the request subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Statsz,
    Varz,
    Connz,
    Routez,
    Subsz,
    Healthz,
    Idz,
    Gatewayz,
    Leafz,
    Accountz,
    Jsz,
    Raftz,
}

impl Endpoint {
    pub const ALL: [Endpoint; 12] = [
        Endpoint::Statsz,
        Endpoint::Varz,
        Endpoint::Connz,
        Endpoint::Routez,
        Endpoint::Subsz,
        Endpoint::Healthz,
        Endpoint::Idz,
        Endpoint::Gatewayz,
        Endpoint::Leafz,
        Endpoint::Accountz,
        Endpoint::Jsz,
        Endpoint::Raftz,
    ];

    pub fn token(self) -> &'static str {
        match self {
            Endpoint::Statsz => "STATSZ",
            Endpoint::Varz => "VARZ",
            Endpoint::Connz => "CONNZ",
            Endpoint::Routez => "ROUTEZ",
            Endpoint::Subsz => "SUBSZ",
            Endpoint::Healthz => "HEALTHZ",
            Endpoint::Idz => "IDZ",
            Endpoint::Gatewayz => "GATEWAYZ",
            Endpoint::Leafz => "LEAFZ",
            Endpoint::Accountz => "ACCOUNTZ",
            Endpoint::Jsz => "JSZ",
            Endpoint::Raftz => "RAFTZ",
        }
    }

    /// Request JSON option names (nats-server's `*Options` json tags) → `/…z` query names.
    fn query_name(self, key: &str) -> Option<&'static str> {
        Some(match (self, key) {
            (Endpoint::Connz, "sort") => "sort",
            (Endpoint::Connz, "auth") => "auth",
            (Endpoint::Connz, "cid") => "cid",
            (Endpoint::Connz, "user") => "user",
            (Endpoint::Connz | Endpoint::Leafz, "acc") => "acc",
            (Endpoint::Connz, "mqtt_client") => "mqtt_client",
            (Endpoint::Connz | Endpoint::Subsz | Endpoint::Jsz, "offset") => "offset",
            (Endpoint::Connz | Endpoint::Subsz | Endpoint::Jsz, "limit") => "limit",
            (Endpoint::Subsz | Endpoint::Leafz | Endpoint::Accountz | Endpoint::Jsz, "account") => {
                "acc"
            }
            (Endpoint::Subsz, "test") => "test",
            (Endpoint::Accountz, "include_unused") => "unused",
            (Endpoint::Gatewayz, "name") => "gw_name",
            (Endpoint::Gatewayz, "accounts") => "accs",
            (Endpoint::Gatewayz, "account_name") => "acc_name",
            (Endpoint::Jsz, "accounts") => "accounts",
            (Endpoint::Jsz, "streams") => "streams",
            (Endpoint::Jsz, "consumers") => "consumers",
            (Endpoint::Jsz, "config") => "config",
            (Endpoint::Jsz, "leader_only") => "leader-only",
            (Endpoint::Raftz, "account") => "acc",
            (Endpoint::Raftz, "group") => "group",
            _ => return None,
        })
    }
}

/// The request subjects this server subscribes to, each with what it asks for.
pub fn request_subjects(server_id: &str) -> Vec<(String, Endpoint)> {
    let mut v = vec![("$SYS.REQ.SERVER.PING".to_string(), Endpoint::Statsz)];
    for e in Endpoint::ALL {
        v.push((format!("$SYS.REQ.SERVER.PING.{}", e.token()), e));
        v.push((format!("$SYS.REQ.SERVER.{server_id}.{}", e.token()), e));
    }
    v
}

/// What one request asks for: a server endpoint, or an account-scoped service.
#[derive(Clone, Debug)]
enum What {
    Server(Endpoint),
    Account(account::AccService, account::Target),
}

/// What a request on a subscription's subject asks for (`None`: not for this service).
type WhatOf = Box<dyn Fn(&[u8]) -> Option<What> + Send + Sync>;

/// One request, copied out of the fan-out.
struct Request {
    what: What,
    reply: Bytes,
    payload: Bytes,
}

/// nats-server's `ServerInfo`: who answers (the envelope's `server`).
#[derive(Serialize, Debug, Clone)]
pub struct ServerInfo {
    pub name: String,
    pub host: String,
    pub id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    pub ver: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub seq: u64,
    pub jetstream: bool,
    pub time: String,
}

#[derive(Serialize, Debug, Default, Clone, Copy)]
pub struct DataStats {
    pub msgs: u64,
    pub bytes: u64,
}

#[derive(Serialize, Debug)]
pub struct RouteStat {
    pub rid: u64,
    pub name: String,
    pub sent: DataStats,
    pub received: DataStats,
    pub pending: usize,
}

/// nats-server's `ServerStats` (`statsz`).
#[derive(Serialize, Debug)]
pub struct Statsz {
    pub start: String,
    pub mem: u64,
    pub cores: usize,
    #[serde(serialize_with = "go_float")]
    pub cpu: f64,
    pub connections: usize,
    pub total_connections: u64,
    pub active_accounts: usize,
    pub subscriptions: usize,
    pub sent: DataStats,
    pub received: DataStats,
    pub slow_consumers: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteStat>,
    pub active_servers: usize,
}

#[derive(Serialize, Debug)]
struct ApiError {
    code: u16,
    description: String,
}

#[derive(Serialize, Debug)]
struct Idz {
    name: String,
    host: String,
    id: String,
}

/// The system services of one server.
pub struct Sys {
    pub acc: Arc<Account>,
    /// The server (weak: the server owns the services).
    srv: Weak<ServerShared>,
    subs: Mutex<Vec<Arc<Subscription>>>,
    /// nats-server's `seq`: one per message the system services send.
    seq: AtomicU64,
    /// `$SYS._INBOX.<8 chars of this server>.`: where answers to this server's own requests go.
    pub inbox_prefix: String,
    /// Open requests of this server: the last inbox token → where the answers go.
    waiters: Mutex<HashMap<u64, mpsc::UnboundedSender<Bytes>>>,
    next_req: AtomicU64,
    pub topz: topz::Cache,
    /// Account connection counts of the other servers (`conns.rs`).
    pub conns: conns::Tracker,
}

/// The first period of `$SYS.SERVER.<id>.STATSZ` after start; it doubles up to `STATSZ_EVERY`
/// (nats-server 2.9.10: 0.5 s, 1 s, 2 s … 16 s, then every 30 s).
const STATSZ_FIRST: Duration = Duration::from_millis(500);
const STATSZ_EVERY: Duration = Duration::from_secs(30);
/// Requests waiting for the service task; more are dropped (logged at debug).
const QUEUE: usize = 4096;

/// A message without headers.
fn plain<'a>(subject: &'a str, reply: Option<&'a str>, payload: &'a [u8]) -> Msg<'a> {
    Msg {
        subject: subject.as_bytes(),
        reply: reply.map(str::as_bytes),
        header: None,
        payload,
    }
}

impl Sys {
    /// Subscribe the services in the system account and start their task. `None` with
    /// `no_system_account` (or when the account is missing, which validation prevents).
    pub fn start(srv: &Arc<ServerShared>) -> Option<Arc<Sys>> {
        let o = &srv.opts;
        if o.no_system_account {
            return None;
        }
        let Some(acc) = srv.accounts.get(&o.system_account) else {
            tracing::error!(
                "system account {:?} does not exist: no $SYS services",
                o.system_account
            );
            return None;
        };
        let sys = Arc::new(Sys {
            acc,
            srv: Arc::downgrade(srv),
            subs: Mutex::new(Vec::new()),
            seq: AtomicU64::new(0),
            inbox_prefix: format!("$SYS._INBOX.{}.", short_hash(&srv.id)),
            waiters: Mutex::new(HashMap::new()),
            next_req: AtomicU64::new(1),
            topz: topz::Cache::default(),
            conns: conns::Tracker::default(),
        });
        let (tx, rx) = mpsc::channel::<Request>(QUEUE);
        let mut subs = Vec::new();
        let mut services: Vec<(String, WhatOf)> = Vec::new();
        for (subject, endpoint) in request_subjects(&srv.id) {
            services.push((subject, Box::new(move |_| Some(What::Server(endpoint)))));
        }
        for svc in account::AccService::ALL {
            let subject = format!("$SYS.REQ.ACCOUNT.*.{}", svc.token());
            services.push((
                subject,
                Box::new(move |subject: &[u8]| {
                    let acc = account::account_token(subject)?;
                    // `PING.STATZ` has its own subscription (every account), as in nats-server.
                    if svc == account::AccService::Statz && acc == "PING" {
                        return None;
                    }
                    Some(What::Account(svc, account::Target::One(acc)))
                }),
            ));
        }
        services.push((
            "$SYS.REQ.ACCOUNT.PING.STATZ".into(),
            Box::new(|_| {
                Some(What::Account(
                    account::AccService::Statz,
                    account::Target::All,
                ))
            }),
        ));
        for (subject, what) in services {
            let tx = tx.clone();
            let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
                // No reply subject, no answer (nats-server ignores such requests too).
                let Some(reply) = m.reply else { return };
                let Some(what) = what(m.subject) else { return };
                let r = Request {
                    what,
                    reply: Bytes::copy_from_slice(reply),
                    payload: Bytes::copy_from_slice(m.payload),
                };
                if tx.try_send(r).is_err() {
                    tracing::debug!("$SYS request dropped: service queue full or stopped");
                }
            });
            match srv.subscribe_internal(&sys.acc, &subject, None, h) {
                Ok(s) => subs.push(s),
                Err(e) => tracing::error!("$SYS services: {e}"),
            }
        }
        // Answers to this server's own requests.
        let weak = Arc::downgrade(&sys);
        let prefix = sys.inbox_prefix.clone();
        let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
            let Some(sys) = weak.upgrade() else { return };
            let n = std::str::from_utf8(m.subject)
                .ok()
                .and_then(|s| s.strip_prefix(prefix.as_str()))
                .and_then(|t| t.parse::<u64>().ok());
            if let Some(n) = n {
                if let Some(w) = sys.waiters().get(&n) {
                    let _ = w.send(Bytes::copy_from_slice(m.payload));
                }
            }
        });
        match srv.subscribe_internal(&sys.acc, &format!("{}*", sys.inbox_prefix), None, h) {
            Ok(s) => subs.push(s),
            Err(e) => tracing::error!("$SYS services: {e}"),
        }
        let conns_rx = conns::start(srv, &sys, &mut subs);
        claims::start(srv, &sys, &mut subs);
        user_info::start(srv, &sys, &mut subs);
        *sys.subs_lock() = subs;
        srv.tasks.spawn(run(srv.clone(), sys.clone(), rx, conns_rx));
        Some(sys)
    }

    fn subs_lock(&self) -> MutexGuard<'_, Vec<Arc<Subscription>>> {
        self.subs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn waiters(&self) -> MutexGuard<'_, HashMap<u64, mpsc::UnboundedSender<Bytes>>> {
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remove every subscription of the services (their interest is withdrawn from routes).
    pub fn stop(&self, srv: &ServerShared) {
        let subs = std::mem::take(&mut *self.subs_lock());
        for s in &subs {
            srv.unsubscribe_internal(&self.acc, s);
        }
    }

    /// `$SYS.SERVER.<id>.SHUTDOWN` with this server's `ServerInfo` (bare, as nats-server
    /// sends it), so peers drop it from their server lists. Called before routes close.
    pub fn announce_shutdown(&self) {
        let Some(srv) = self.srv.upgrade() else {
            return;
        };
        let body = to_json(&self.server_info(&srv));
        self.publish(
            &srv,
            &format!("$SYS.SERVER.{}.SHUTDOWN", srv.id),
            None,
            &body,
        );
    }

    /// The envelope's `server` for the next message sent.
    pub fn server_info(&self, srv: &ServerShared) -> ServerInfo {
        ServerInfo {
            name: srv.name.clone(),
            host: srv.opts.host.clone(),
            id: srv.id.clone(),
            cluster: srv.cluster.as_ref().map(|c| c.name()).unwrap_or_default(),
            ver: crate::config::COMPAT_VERSION.into(),
            tags: srv.opts.server_tags.clone(),
            seq: self.seq.fetch_add(1, Relaxed) + 1,
            jetstream: srv.jetstream.get().is_some(),
            time: rfc3339_nano(SystemTime::now()),
        }
    }

    /// Publish `payload` on `subject` in the system account (with an optional reply).
    pub fn publish(
        &self,
        srv: &Arc<ServerShared>,
        subject: &str,
        reply: Option<&str>,
        payload: &[u8],
    ) {
        srv.publish_internal(&self.acc, &plain(subject, reply, payload));
    }

    /// [`Sys::publish`] to the other servers only (not this one's own handlers): a request
    /// only another server can answer.
    pub fn publish_to_others(
        &self,
        srv: &Arc<ServerShared>,
        subject: &str,
        reply: Option<&str>,
        payload: &[u8],
    ) {
        srv.publish_internal_to_others(&self.acc, &plain(subject, reply, payload));
    }

    /// Send a request to every server (this one included) and collect the answers until
    /// `done` says enough or `within` has passed. Never holds a lock across an await.
    pub async fn gather(
        &self,
        srv: &Arc<ServerShared>,
        subject: &str,
        payload: &[u8],
        within: Duration,
        mut done: impl FnMut(&[Bytes]) -> bool,
    ) -> Vec<Bytes> {
        let n = self.next_req.fetch_add(1, Relaxed);
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.waiters().insert(n, tx);
        let reply = format!("{}{n}", self.inbox_prefix);
        self.publish(srv, subject, Some(&reply), payload);
        let deadline = tokio::time::Instant::now() + within;
        let mut got = Vec::new();
        while let Ok(Some(b)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            got.push(b);
            if done(&got) {
                break;
            }
        }
        self.waiters().remove(&n);
        got
    }
}

/// 8 characters naming this server in inbox subjects (nats-server: a hash of its name).
fn short_hash(s: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = h.finish();
    (0..8)
        .map(|_| {
            let c = ALNUM[(x % ALNUM.len() as u64) as usize] as char;
            x /= ALNUM.len() as u64;
            c
        })
        .collect()
}

/// The service task: answer requests, send STATSZ on schedule, stop with the server.
async fn run(
    srv: Arc<ServerShared>,
    sys: Arc<Sys>,
    mut rx: mpsc::Receiver<Request>,
    mut conns_rx: mpsc::UnboundedReceiver<conns::Event>,
) {
    let statsz_subject = format!("$SYS.SERVER.{}.STATSZ", srv.id);
    let mut period = STATSZ_FIRST;
    let mut next = tokio::time::Instant::now();
    let mut heartbeat = tokio::time::interval_at(
        tokio::time::Instant::now() + conns::HEARTBEAT,
        conns::HEARTBEAT,
    );
    loop {
        tokio::select! {
            _ = srv.shutdown_signal() => break,
            _ = heartbeat.tick() => conns::heartbeat(&srv, &sys),
            Some(e) = conns_rx.recv() => conns::handle(&srv, &sys, e),
            _ = tokio::time::sleep_until(next) => {
                let body = statsz_message(&srv, &sys);
                sys.publish(&srv, &statsz_subject, None, &body);
                next += period;
                period = (period * 2).min(STATSZ_EVERY);
            }
            r = rx.recv() => match r {
                Some(r) => {
                    let body = match &r.what {
                        What::Server(e) => answer(&srv, &sys, *e, &r.payload),
                        What::Account(svc, t) => account::answer(&srv, &sys, *svc, t, &r.payload),
                    };
                    if let Some(body) = body {
                        match std::str::from_utf8(&r.reply) {
                            Ok(reply) => sys.publish(&srv, reply, None, &body),
                            Err(_) => tracing::debug!("$SYS request with a non-UTF-8 reply subject"),
                        }
                    }
                }
                None => break,
            }
        }
    }
    sys.stop(&srv);
}

/// `{"server":…,"statsz":…}`.
pub fn statsz_message(srv: &ServerShared, sys: &Sys) -> Vec<u8> {
    #[derive(Serialize)]
    struct Out<'a> {
        server: ServerInfo,
        statsz: &'a Statsz,
    }
    let st = statsz(srv);
    to_json(&Out {
        server: sys.server_info(srv),
        statsz: &st,
    })
}

/// A float as Go's encoding/json writes it: no `.0` on whole numbers.
fn go_float<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

fn to_json<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|e| {
        tracing::error!("$SYS answer not encoded: {e}");
        Vec::new()
    })
}

pub fn statsz(srv: &ServerShared) -> Statsz {
    let v = varz::Varz::of(srv);
    let routes: Vec<RouteStat> = srv
        .cluster
        .as_ref()
        .map(|c| c.routes())
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let c = &r.conn.counters;
            RouteStat {
                rid: r.conn.cid,
                name: r.remote_name.clone(),
                sent: DataStats {
                    msgs: c.out_msgs.load(Relaxed),
                    bytes: c.out_bytes.load(Relaxed),
                },
                received: DataStats {
                    msgs: c.in_msgs.load(Relaxed),
                    bytes: c.in_bytes.load(Relaxed),
                },
                pending: r.conn.out.pending(),
            }
        })
        .collect();
    let sys_name = &srv.opts.system_account;
    let active_accounts = srv
        .accounts
        .all()
        .iter()
        .filter(|a| a.num_conns.load(Relaxed) > 0 || (&a.name == sys_name))
        .count();
    Statsz {
        start: v.start,
        mem: v.mem,
        cores: v.cores,
        cpu: v.cpu,
        connections: v.connections,
        total_connections: v.total_connections,
        active_accounts,
        subscriptions: v.subscriptions,
        sent: DataStats {
            msgs: v.out_msgs,
            bytes: v.out_bytes,
        },
        received: DataStats {
            msgs: v.in_msgs,
            bytes: v.in_bytes,
        },
        slow_consumers: v.slow_consumers,
        // Servers, not route connections (a pooled peer has several).
        active_servers: srv.cluster.as_ref().map_or(0, |c| c.num_peers()) + 1,
        routes,
    }
}

/// The answer to one request, or `None` when the request's filter excludes this server.
pub fn answer(srv: &ServerShared, sys: &Sys, e: Endpoint, payload: &[u8]) -> Option<Vec<u8>> {
    let error = |description: String| error_message(srv, sys, description);
    let opts = match parse_options(payload) {
        Ok(o) => o,
        Err(e) => return Some(error(e)),
    };
    if !matches_filter(srv, &opts) {
        return None;
    }
    let params = match query_params(e, &opts) {
        Ok(p) => p,
        Err(e) => return Some(error(e)),
    };
    let out = match e {
        // Not under `data`: `{"server":…,"statsz":…}`.
        Endpoint::Statsz => Ok(statsz_message(srv, sys)),
        Endpoint::Varz => envelope(srv, sys, varz::Varz::of(srv)),
        Endpoint::Connz => connz::ConnzQuery::parse(&params)
            .and_then(|q| envelope(srv, sys, connz::connz(srv, &q))),
        Endpoint::Routez => {
            routez::parse_subs(&params).and_then(|m| envelope(srv, sys, routez::routez(srv, m)))
        }
        Endpoint::Subsz => subsz::SubszQuery::parse(&params)
            .and_then(|q| envelope(srv, sys, subsz::subsz(srv, &q))),
        Endpoint::Healthz => envelope(srv, sys, crate::monitor::health(srv).0),
        Endpoint::Idz => envelope(
            srv,
            sys,
            Idz {
                name: srv.name.clone(),
                host: srv.opts.host.clone(),
                id: srv.id.clone(),
            },
        ),
        Endpoint::Gatewayz => misc::gatewayz(srv, &params).and_then(|z| envelope(srv, sys, z)),
        Endpoint::Leafz => misc::leafz(srv, &params).and_then(|z| envelope(srv, sys, z)),
        Endpoint::Accountz => accountz::accountz(srv, &params).and_then(|z| envelope(srv, sys, z)),
        Endpoint::Jsz => misc::jsz(srv, &params).and_then(|z| envelope(srv, sys, z)),
        // Without clustered JetStream nats-server answers `"data": {}` (HTTP: 404).
        Endpoint::Raftz => envelope(
            srv,
            sys,
            misc::raftz(srv, &params).unwrap_or_else(|_| serde_json::json!({})),
        ),
    };
    Some(out.unwrap_or_else(error))
}

/// `{"server":…,"error":{"code":400,"description":…}}`.
fn error_message(srv: &ServerShared, sys: &Sys, description: String) -> Vec<u8> {
    #[derive(Serialize)]
    struct Error {
        server: ServerInfo,
        error: ApiError,
    }
    to_json(&Error {
        server: sys.server_info(srv),
        error: ApiError {
            code: 400,
            description,
        },
    })
}

/// `{"server":…,"data":…}`: each endpoint's own type, serialized in its field order (as
/// nats-server writes it).
fn envelope<T: Serialize>(srv: &ServerShared, sys: &Sys, data: T) -> Result<Vec<u8>, String> {
    #[derive(Serialize)]
    struct Data<T: Serialize> {
        server: ServerInfo,
        data: T,
    }
    serde_json::to_vec(&Data {
        server: sys.server_info(srv),
        data,
    })
    .map_err(|e| format!("encoding the answer: {e}"))
}

/// The request's JSON options: empty (or blank) is none; anything but an object is an error.
fn parse_options(payload: &[u8]) -> Result<Map<String, Value>, String> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(payload) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!(
            "json: cannot unmarshal {} into the request options (an object)",
            json_kind(&other)
        )),
        Err(e) => Err(format!("invalid request options: {e}")),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// nats-server's `EventFilterOptions`: `server_name`, `cluster`, `host` match as substrings,
/// every one of `tags` must be a tag of this server, `domain` must be this server's (natsd has
/// none). A server that does not match does not answer.
fn matches_filter(srv: &ServerShared, o: &Map<String, Value>) -> bool {
    let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
    let cluster = srv.cluster.as_ref().map(|c| c.name()).unwrap_or_default();
    if !s("server_name").is_empty() && !srv.name.contains(s("server_name")) {
        return false;
    }
    if !s("cluster").is_empty() && !cluster.contains(s("cluster")) {
        return false;
    }
    if !s("host").is_empty() && !srv.opts.host.contains(s("host")) {
        return false;
    }
    if !s("domain").is_empty() {
        return false;
    }
    if let Some(Value::Array(tags)) = o.get("tags") {
        for t in tags {
            let t = t.as_str().unwrap_or("").trim().to_lowercase();
            if !t.is_empty() && !srv.opts.server_tags.contains(&t) {
                return false;
            }
        }
    }
    true
}

/// The request's options as the HTTP endpoint's query parameters. Options the endpoint does
/// not take (the filters, unknown keys) are ignored whatever their type, as Go's decoder does.
fn query_params(e: Endpoint, o: &Map<String, Value>) -> Result<HashMap<String, String>, String> {
    let mut p = HashMap::new();
    for (k, v) in o {
        let subs_opt = matches!(
            e,
            Endpoint::Connz | Endpoint::Routez | Endpoint::Leafz | Endpoint::Subsz
        );
        let target = match k.as_str() {
            "subscriptions" if subs_opt => "subs",
            "subscriptions_detail" if matches!(e, Endpoint::Connz | Endpoint::Routez) => {
                "subs_detail"
            }
            "state" if e == Endpoint::Connz => "state",
            k => match e.query_name(k) {
                Some(q) => q,
                None => continue,
            },
        };
        let text = match v {
            Value::Null => continue,
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            other => return Err(format!("option {k:?}: unexpected {}", json_kind(other))),
        };
        match target {
            "subs" => {
                if v.as_bool() == Some(true) {
                    p.entry("subs".to_string()).or_insert_with(|| "1".into());
                }
            }
            "subs_detail" => {
                if v.as_bool() == Some(true) {
                    p.insert("subs".into(), "detail".into());
                }
            }
            // nats-server's ConnState as a number: 0 open, 1 closed, 2 all.
            "state" => {
                let s = match text.as_str() {
                    "0" => "open",
                    "1" => "closed",
                    "2" => "all",
                    other => other,
                };
                p.insert("state".into(), s.to_string());
            }
            q => {
                p.insert(q.to_string(), text);
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests;
