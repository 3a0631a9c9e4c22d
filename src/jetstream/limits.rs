//! Per-account JetStream limits (an account's `jetstream { max_mem, max_file, max_streams,
//! max_consumers, max_ack_pending, memory_max_stream_bytes, store_max_stream_bytes,
//! max_bytes_required }`): the checks of stream creates and updates, consumer creates and
//! publishes, each with nats-server 2.9.10's error and at its place in the order of checks;
//! the account info that reports them; the start-up check that the accounts' limits fit the
//! server's. See docs/nats-server-behaviour.md §14 "Account limits".
//!
//! Two measures, as nats-server: stream creates and updates are checked against the
//! account's *reservations* (the `max_bytes` of its streams of that storage; a stream
//! without `max_bytes` asks for 1 byte) and then every account's against the server's
//! `max_memory_store`/`max_file_store`; publishes against the account's *usage* (the bytes
//! its stores hold). Usage is never counted apart: it is the sum of the stores' own byte
//! counts, so purges, deletes, age limits and restarts are followed by construction.
//! Tiered limits (an account JWT's `tiered_limits`, nats-server 2.7+): an asset of R
//! replicas is held to tier "R<R>" alone — its streams counted, reserved and used apart
//! from the other tiers', with the tier's bytes meaning one replica's worth (flat limits
//! count every replica) — and refused (10120) when the account has no such tier.
//! Does not know about subscriptions, the event queue or the wire.

use super::engine::{Engine, Globals, JsAccount};
use super::stream::Stream;
use super::types::*;
use super::JsConfig;
pub use crate::config::JsAccountLimits as Limits;
pub use crate::config::JsLimits as AccountLimits;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

mod info;
pub use info::Assigned;

/// How often the "limits exceeded" warning may repeat for one account.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// The answer to a publish that took the account over its memory or storage limit.
pub fn account_exceeded() -> ApiError {
    ApiError::new(400, 10002, "resource limits exceeded for account")
}

fn insufficient(storage: Storage) -> ApiError {
    match storage {
        Storage::Memory => ApiError::new(500, 10028, "insufficient memory resources available"),
        Storage::File => ApiError::new(500, 10047, "insufficient storage resources available"),
    }
}

fn too_many_consumers() -> ApiError {
    ApiError::new(400, 10026, "maximum consumers limit reached")
}

/// The answer when an account with tiered limits has none for an asset's replica count.
pub fn no_limits() -> ApiError {
    ApiError::new(
        400,
        10120,
        "no JetStream default or applicable tiered limit present",
    )
}

/// The limits that hold an asset (nats-server's `selectLimits`).
#[derive(Clone, Copy, Debug)]
pub struct Selected<'a> {
    pub limits: &'a Limits,
    /// With tiered limits, the tier: the replica count whose assets share these limits.
    pub tier: Option<i64>,
}

impl Selected<'_> {
    /// Whether an asset of `replicas` counts against these limits.
    fn holds(&self, replicas: i64) -> bool {
        self.tier.is_none_or(|t| t == replicas.max(1))
    }

    /// How many times an asset of `replicas` counts its bytes: flat limits count every
    /// replica, a tier's limits one.
    fn scale(&self, replicas: i64) -> i64 {
        if self.tier.is_some() {
            1
        } else {
            replicas.max(1)
        }
    }
}

/// A tier's replica count: "R3" is 3 (as nats-server's `tierName` writes it).
fn tier_replicas(name: &str) -> Option<i64> {
    let digits = name.strip_prefix('R')?;
    if digits.starts_with(['0', '+', '-']) {
        return None;
    }
    digits.parse().ok()
}

impl AccountLimits {
    /// The limits for an asset of `replicas` (0 is 1): the flat ones, or its tier's.
    pub fn select(&self, replicas: i64) -> Result<Selected<'_>, ApiError> {
        match self {
            AccountLimits::Flat(limits) => Ok(Selected { limits, tier: None }),
            AccountLimits::Tiered(tiers) => {
                let r = replicas.max(1);
                tiers
                    .iter()
                    .find(|(name, _)| tier_replicas(name) == Some(r))
                    .map(|(_, limits)| Selected {
                        limits,
                        tier: Some(r),
                    })
                    .ok_or_else(no_limits)
            }
        }
    }

    /// Every set of limits (one, or one per tier).
    pub fn each(&self) -> impl Iterator<Item = &Limits> {
        let (flat, tiers) = match self {
            AccountLimits::Flat(l) => (Some(l), None),
            AccountLimits::Tiered(t) => (None, Some(t.values())),
        };
        flat.into_iter().chain(tiers.into_iter().flatten())
    }
}

/// The account's byte limit for a storage type (-1: none).
fn max_bytes(l: &Limits, storage: Storage) -> i64 {
    match storage {
        Storage::Memory => l.max_memory,
        Storage::File => l.max_store,
    }
}

/// The largest `max_bytes` one stream of a storage type may have (-1 or 0: any).
fn max_stream_bytes(l: &Limits, storage: Storage) -> i64 {
    match storage {
        Storage::Memory => l.memory_max_stream_bytes,
        Storage::File => l.store_max_stream_bytes,
    }
}

/// What the account's streams of `storage` other than `name` (within `sel`'s tier)
/// reserve: their `max_bytes`.
fn reserved(
    sel: Selected<'_>,
    streams: &BTreeMap<String, Stream>,
    storage: Storage,
    name: &str,
) -> i64 {
    streams
        .values()
        .filter(|s| s.cfg.storage == storage && s.cfg.name != name && s.cfg.max_bytes > 0)
        .filter(|s| sel.holds(s.cfg.num_replicas))
        .map(|s| s.cfg.max_bytes)
        .sum()
}

/// nats-server's `checkBytesLimits`: `add` more bytes (below 0: 1) over the account's
/// `reserved`, then over every account's reservations within the server's limit (`server`:
/// reserved, limit; see [`Globals::server_bytes`]).
fn check_bytes(
    l: &Limits,
    storage: Storage,
    reserved: i64,
    add: i64,
    server: (i64, i64),
) -> Result<(), ApiError> {
    let add = if add < 0 { 1 } else { add };
    let max = max_bytes(l, storage);
    if max >= 0 && reserved.saturating_add(add) > max {
        return Err(insufficient(storage));
    }
    if server.0.saturating_add(add) > server.1 {
        return Err(insufficient(storage));
    }
    Ok(())
}

/// The account's stream count (`existing` streams, when creating one) and its
/// `max_consumers` against what a stream asks for.
fn count_and_consumers(
    l: &Limits,
    existing: Option<usize>,
    cfg: &StreamConfig,
) -> Result<(), ApiError> {
    if existing.is_some_and(|n| l.max_streams > 0 && n as i64 >= l.max_streams) {
        return Err(ApiError::new(
            400,
            10027,
            "maximum number of streams reached",
        ));
    }
    if cfg.max_consumers > 0 && l.max_consumers > 0 && cfg.max_consumers > l.max_consumers {
        return Err(too_many_consumers());
    }
    Ok(())
}

/// A stream create, right after the request is read (before the configuration checks, as
/// nats-server): the number of streams (an identical re-create counts too), the stream's
/// `max_consumers` against the account's, and its `max_bytes` against what is left.
pub fn check_create(
    sel: Selected<'_>,
    streams: &BTreeMap<String, Stream>,
    cfg: &StreamConfig,
    server: (i64, i64),
) -> Result<(), ApiError> {
    let count = streams
        .values()
        .filter(|s| sel.holds(s.cfg.num_replicas))
        .count();
    count_and_consumers(sel.limits, Some(count), cfg)?;
    let r = reserved(sel, streams, cfg.storage, &cfg.name);
    check_bytes(sel.limits, cfg.storage, r, cfg.max_bytes, server)
}

/// A stream create or scale in a JetStream cluster, on the meta leader (nats-server's
/// `jsClusteredStreamLimitsCheck`): `others` are the account's other assigned streams as
/// (storage, `max_bytes`, replicas). Under flat limits a replicated stream reserves its
/// `max_bytes` once per replica, as in 2.15; a tier counts only its own streams, once.
pub fn check_clustered(
    limits: &AccountLimits,
    others: &[(Storage, i64, i64)],
    cfg: &StreamConfig,
    creating: bool,
) -> Result<(), ApiError> {
    let sel = limits.select(cfg.num_replicas)?;
    let tier: Vec<_> = others.iter().filter(|(_, _, r)| sel.holds(*r)).collect();
    count_and_consumers(sel.limits, creating.then_some(tier.len()), cfg)?;
    let reserved = tier
        .iter()
        .filter(|(s, mb, _)| *s == cfg.storage && *mb > 0)
        .fold(0i64, |a, (_, mb, r)| {
            a.saturating_add(mb.saturating_mul(sel.scale(*r)))
        });
    let add = cfg
        .max_bytes
        .max(1)
        .saturating_mul(sel.scale(cfg.num_replicas));
    check_bytes(sel.limits, cfg.storage, reserved, add, (0, i64::MAX))?;
    check_config(sel.limits, cfg)
}

/// With the configuration checks (create and update): `max_bytes_required` and the largest
/// `max_bytes` one stream may have.
pub fn check_config(l: &Limits, cfg: &StreamConfig) -> Result<(), ApiError> {
    let most = max_stream_bytes(l, cfg.storage);
    if l.max_bytes_required && cfg.max_bytes <= 0 {
        return Err(ApiError::new(
            400,
            10113,
            "account requires a stream config to have max bytes set",
        ));
    }
    if most > 0 && cfg.max_bytes > most {
        return Err(ApiError::new(
            400,
            10122,
            "stream max bytes exceeds account limit max stream bytes",
        ));
    }
    Ok(())
}

/// A stream update (after the update checks): only growth of `max_bytes` asks for more, on
/// top of what the others and the stream's old `max_bytes` reserve (nats-server's
/// `configUpdateCheck`).
pub fn check_update(
    sel: Selected<'_>,
    streams: &BTreeMap<String, Stream>,
    old: &StreamConfig,
    new: &StreamConfig,
    server: (i64, i64),
) -> Result<(), ApiError> {
    let l = sel.limits;
    if new.max_consumers > 0 && l.max_consumers > 0 && new.max_consumers > l.max_consumers {
        return Err(too_many_consumers());
    }
    let grow = new.max_bytes.saturating_sub(old.max_bytes).max(0);
    let r = reserved(sel, streams, new.storage, &new.name).saturating_add(old.max_bytes);
    check_bytes(l, new.storage, r, grow, server)
}

/// The limits of a stream update: its new replica count's, else its old one's (as
/// nats-server's `update`).
pub fn select_update<'a>(
    limits: &'a AccountLimits,
    old: &StreamConfig,
    new: &StreamConfig,
) -> Result<Selected<'a>, ApiError> {
    limits
        .select(new.num_replicas)
        .or_else(|_| limits.select(old.num_replicas))
}

/// The limits of a consumer: its own replica count's, else its stream's.
pub fn select_consumer<'a>(
    limits: &'a AccountLimits,
    cfg: &ConsumerConfig,
    stream: &StreamConfig,
) -> Result<Selected<'a>, ApiError> {
    let replicas = if cfg.num_replicas > 0 {
        cfg.num_replicas
    } else {
        stream.num_replicas
    };
    limits.select(replicas)
}

/// A consumer without `max_ack_pending` (acked) gets the account's when it is below the
/// default 1000.
pub fn default_ack_pending(l: &Limits, server: i64, cfg: &mut ConsumerConfig) {
    if cfg.ack_policy == AckPolicy::None || cfg.max_ack_pending != 0 {
        return;
    }
    // nats-server's `setConsumerConfigDefaults`: the default, lowered to the server's
    // `jetstream { limits { max_ack_pending } }`, then to the account's.
    let mut pending = super::consumer::DEFAULT_MAX_ACK_PENDING;
    for lim in [server, l.max_ack_pending] {
        if lim > 0 && lim < pending {
            pending = lim;
        }
    }
    if pending != super::consumer::DEFAULT_MAX_ACK_PENDING {
        cfg.max_ack_pending = pending;
    }
}

/// How many consumers one stream may have: its own `max_consumers`, or the account's when
/// that is lower or the stream has none (as nats-server 2.9, per stream); 0 or less: any.
pub fn consumers_per_stream(l: &Limits, stream_max: i64) -> i64 {
    if stream_max <= 0 || (l.max_consumers > 0 && l.max_consumers < stream_max) {
        l.max_consumers
    } else {
        stream_max
    }
}

/// Room for a publish into stream `name`: the bytes it may hold before the account is over
/// its limit for the stream's storage (the account's memory/storage limit and, as
/// nats-server 2.9.10 also compares the account's total with it, `*_max_stream_bytes`),
/// given what the account's other streams hold. Flat limits count every replica of a
/// stream (nats-server sums the usage its replicas report); a tier counts its own streams,
/// one replica each. `Ok(None)`: no check needed — no such limit (an account without byte
/// limits pays one check per publish, nothing summed), or `bound` (an upper bound of what
/// the account holds in that storage, see [`UsageBound`]) shows that `size` more bytes stay
/// within it. An error: the stream's tier has no limits (any more).
pub fn room(
    limits: &AccountLimits,
    streams: &BTreeMap<String, Stream>,
    name: &str,
    size: u64,
    bound: &mut UsageBound,
) -> Result<Option<i64>, ApiError> {
    if let AccountLimits::Flat(l) = limits {
        if l.max_memory < 0
            && l.max_store < 0
            && l.memory_max_stream_bytes <= 0
            && l.store_max_stream_bytes <= 0
        {
            return Ok(None);
        }
    }
    let Some(st) = streams.get(name) else {
        return Ok(None);
    };
    let sel = limits.select(st.cfg.num_replicas)?;
    let l = sel.limits;
    let storage = st.cfg.storage;
    let per_stream = max_stream_bytes(l, storage);
    let max = max_bytes(l, storage);
    let limit = match (max >= 0, per_stream > 0) {
        (false, false) => return Ok(None),
        (true, false) => max,
        (false, true) => per_stream,
        (true, true) => max.min(per_stream),
    };
    let scale = |s: &Stream| sel.scale(s.cfg.num_replicas).unsigned_abs();
    let own_scale = scale(st);
    let size = (size + MSG_OVERHEAD) * own_scale;
    // The bound covers every tier: an upper bound of any one's usage too.
    let slot = &mut bound.0[storage as usize];
    if let Some(b) = *slot {
        if i64::try_from(b + size).is_ok_and(|after| after <= limit) {
            *slot = Some(b + size);
            return Ok(None);
        }
    }
    let (mut total, mut tier, mut own) = (0u64, 0u64, 0u64);
    for s in streams.values().filter(|s| s.cfg.storage == storage) {
        let b = s.store.state().bytes * scale(s);
        total += b;
        if sel.holds(s.cfg.num_replicas) {
            tier += b;
        }
        if s.cfg.name == name {
            own = b;
        }
    }
    *slot = Some(total + size);
    let others = i64::try_from(tier - own).unwrap_or(i64::MAX);
    // In one replica's bytes, as the stream's store counts them.
    Ok(Some(
        limit.saturating_sub(others) / i64::try_from(own_scale).unwrap_or(1),
    ))
}

/// A publish into a replicated stream, checked by the stream's leader before it is proposed
/// (nats-server's `processClusteredInboundMsg`): the error when the stream's tier has no
/// limits, or when storing it would take the account over them.
pub fn refuse_replicated(ja: &JsAccount, stream: &str, ev: &super::Event) -> Option<ApiError> {
    let room = match room(
        &ja.limits,
        &ja.streams,
        stream,
        0,
        &mut UsageBound::default(),
    ) {
        Ok(None) => return None,
        Ok(Some(room)) => room,
        Err(e) => return Some(e),
    };
    let st = ja.streams.get(stream)?;
    let hdr = ev.header.as_deref().filter(|h| !h.is_empty());
    if copy_fits(st, Some(room), &ev.subject, hdr, &ev.payload) {
        return None;
    }
    warn_exceeded(&ja.acc.name);
    Some(account_exceeded())
}

/// What a store counts for a message beyond its subject, header and payload is less than this
/// (docs/nats-server-behaviour.md §14 "Monitoring"); the usage bounds add it per publish.
pub const MSG_OVERHEAD: u64 = 64;

/// An upper bound of the bytes an account's streams hold, per storage type: the last exact
/// count plus every publish since. Removals only lower the real figure; whatever adds bytes
/// outside publishes (mirror and source copies on the timer, restores and other API
/// requests) drops it with [`UsageBound::reset`].
#[derive(Default)]
pub struct UsageBound([Option<u64>; 2]);

impl UsageBound {
    pub fn reset(&mut self) {
        self.0 = [None; 2];
    }
}

/// After a publish stored `seq`: when the stream now holds more than `room`, take the
/// message back as nats-server 2.9.10 does (its sequence stays used, a gap), with its
/// duplicate id and republish, and return the error for the PubAck.
pub fn take_back_if_over(
    account: &str,
    st: &mut Stream,
    room: i64,
    seq: u64,
    hdr: Option<&[u8]>,
    prev_msg_id: String,
) -> Result<(), ApiError> {
    let held = i64::try_from(st.store.state().bytes).unwrap_or(i64::MAX);
    if held <= room {
        return Ok(());
    }
    warn_exceeded(account);
    if let Err(e) = st.store.remove(seq, false) {
        tracing::error!(
            "JetStream: stream {:?}: message {seq} over the account limit not removed: {e}",
            st.cfg.name
        );
    }
    if let Some(id) = header(hdr, "Nats-Msg-Id") {
        if st.dedupe.get(id).is_some_and(|(s, _)| *s == seq) {
            st.dedupe.remove(id);
        }
    }
    st.last_msg_id = prev_msg_id;
    st.republished.clear();
    Err(account_exceeded())
}

/// nats-server's rate-limited `JetStream resource limits exceeded for account: "A"`: at most
/// once per account every [`WARN_EVERY`].
fn warn_exceeded(account: &str) {
    static LAST: OnceLock<Mutex<HashMap<String, Instant>>> = OnceLock::new();
    let now = Instant::now();
    let mut last = LAST
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if last
        .get(account)
        .is_some_and(|t| now.duration_since(*t) < WARN_EVERY)
    {
        return;
    }
    last.insert(account.to_string(), now);
    drop(last);
    tracing::warn!("JetStream resource limits exceeded for account: {account:?}");
}

/// Whether a copy (a mirror's or a source's, headers as they will be stored) fits next to
/// what `st` holds in `room` (see [`room`]). Checked before storing: a refused copy is
/// retried later, so it must not use up a sequence each time.
pub fn copy_fits(
    st: &Stream,
    room: Option<i64>,
    subject: &str,
    hdr: Option<&[u8]>,
    data: &[u8],
) -> bool {
    let Some(room) = room else {
        return true;
    };
    let body = subject.len() + data.len();
    // As the stores count a message (docs/nats-server-behaviour.md §14 "Monitoring").
    let size = match (st.cfg.storage, hdr.map_or(0, <[u8]>::len)) {
        (Storage::Memory, h) => body + h + 16,
        (Storage::File, 0) => body + 30,
        (Storage::File, h) => body + h + 34,
    };
    let held = st.store.state().bytes.saturating_add(size as u64);
    i64::try_from(held).is_ok_and(|h| h <= room)
}

/// nats-server's `sufficientResources` (start-up, and natsd's reload): the accounts'
/// memory (storage) limits together must fit the server's.
pub fn check_sufficient<'a>(
    config: &JsConfig,
    limits: impl Iterator<Item = &'a Limits>,
) -> Result<(), ApiError> {
    let (mut mem, mut file) = (0i64, 0i64);
    for l in limits {
        mem = mem.saturating_add(l.max_memory.max(0));
        file = file.saturating_add(l.max_store.max(0));
    }
    if mem > config.max_memory {
        return Err(insufficient(Storage::Memory));
    }
    if file > config.max_storage {
        return Err(insufficient(Storage::File));
    }
    Ok(())
}

/// What a limit reports in `/jsz`'s `reserved_memory`/`reserved_storage` of an account (Go
/// prints -1 as an unsigned 64-bit number).
pub fn as_reserved(limit: i64) -> u64 {
    u64::try_from(limit).unwrap_or(u64::MAX)
}

impl Globals<'_> {
    /// (what every account's streams of `storage` reserve, the server's limit for it).
    pub fn server_bytes(&self, storage: Storage) -> (i64, i64) {
        match storage {
            Storage::Memory => (self.reserved.0, self.config.max_memory),
            Storage::File => (self.reserved.1, self.config.max_storage),
        }
    }
}

impl Engine {
    /// Every account's reservations (its streams' `max_bytes`): (memory, file).
    pub(super) fn reserved(&self) -> (i64, i64) {
        let mut r = (0i64, 0i64);
        for s in self.accounts.values().flat_map(|ja| ja.streams.values()) {
            let b = s.cfg.max_bytes.max(0);
            match s.cfg.storage {
                Storage::Memory => r.0 = r.0.saturating_add(b),
                Storage::File => r.1 = r.1.saturating_add(b),
            }
        }
        r
    }

    /// New limits for the JetStream accounts (a config reload); an account missing from
    /// `by_account` is unlimited.
    pub fn set_limits(&mut self, by_account: &BTreeMap<String, AccountLimits>) {
        for (name, ja) in &mut self.accounts {
            ja.limits = by_account.get(name).cloned().unwrap_or_default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits {
            max_memory: 10_240,
            max_store: 20_480,
            max_streams: 3,
            max_consumers: 2,
            memory_max_stream_bytes: 6_144,
            ..Limits::default()
        }
    }

    const FREE: (i64, i64) = (0, i64::MAX);

    #[test]
    fn bytes_against_reservations() {
        let l = lim();
        assert!(check_bytes(&l, Storage::Memory, 6_144, 4_096, FREE).is_ok());
        let e = check_bytes(&l, Storage::Memory, 6_144, 4_097, FREE).expect_err("over");
        assert_eq!((e.code, e.err_code), (500, 10028));
        // No max_bytes asks for one byte.
        assert!(check_bytes(&l, Storage::Memory, 10_240, -1, FREE).is_err());
        assert!(check_bytes(&l, Storage::Memory, 10_239, -1, FREE).is_ok());
        let e = check_bytes(&l, Storage::File, 20_480, 1, FREE).expect_err("over");
        assert_eq!((e.code, e.err_code), (500, 10047));
        assert!(check_bytes(&Limits::default(), Storage::File, i64::MAX, 5, FREE).is_ok());
        // The server's own limit against every account's reservations.
        let none = Limits::default();
        assert!(check_bytes(&none, Storage::Memory, 0, 1000, (1048, 2048)).is_ok());
        let e = check_bytes(&none, Storage::Memory, 0, 1000, (1049, 2048)).expect_err("over");
        assert_eq!((e.code, e.err_code), (500, 10028));
    }

    #[test]
    fn per_stream_bytes_and_required() {
        let mut cfg = StreamConfig {
            storage: Storage::Memory,
            max_bytes: 7_000,
            ..Default::default()
        };
        assert_eq!(
            check_config(&lim(), &cfg).map_err(|e| e.err_code),
            Err(10122)
        );
        cfg.max_bytes = 6_144;
        assert!(check_config(&lim(), &cfg).is_ok());
        let req = Limits {
            max_bytes_required: true,
            ..Limits::default()
        };
        cfg.max_bytes = -1;
        assert_eq!(check_config(&req, &cfg).map_err(|e| e.err_code), Err(10113));
    }

    #[test]
    fn consumers_and_ack_pending() {
        assert_eq!(consumers_per_stream(&lim(), -1), 2);
        assert_eq!(consumers_per_stream(&lim(), 1), 1);
        assert_eq!(consumers_per_stream(&lim(), 5), 2);
        assert_eq!(consumers_per_stream(&Limits::default(), 5), 5);
        let l = Limits {
            max_ack_pending: 50,
            ..Limits::default()
        };
        let mut c = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        };
        default_ack_pending(&l, 0, &mut c);
        assert_eq!(c.max_ack_pending, 50);
        let mut c = ConsumerConfig {
            ack_policy: AckPolicy::None,
            ..Default::default()
        };
        default_ack_pending(&l, 0, &mut c);
        assert_eq!(c.max_ack_pending, 0);
    }

    #[test]
    fn tiers_by_replica_count() {
        assert_eq!(tier_replicas("R3"), Some(3));
        assert_eq!(tier_replicas("R12"), Some(12));
        for bad in ["R03", "R", "R+3", "3", "r3", "R3x"] {
            assert_eq!(tier_replicas(bad), None, "{bad}");
        }
        let tiered = AccountLimits::Tiered(BTreeMap::from([("R1".to_string(), lim())]));
        let r1 = tiered.select(0).expect("R0 is R1");
        assert_eq!((r1.tier, r1.limits.max_streams), (Some(1), 3));
        assert!(r1.holds(1) && !r1.holds(3));
        assert_eq!(r1.scale(3), 1);
        let e = tiered.select(3).expect_err("no R3 tier");
        assert_eq!((e.code, e.err_code), (400, 10120));
        let flat = AccountLimits::Flat(lim());
        let any = flat.select(5).expect("flat");
        assert!(any.tier.is_none() && any.holds(5));
        assert_eq!(any.scale(3), 3);
        assert_eq!(tiered.each().count() + flat.each().count(), 2);
    }

    #[test]
    fn start_up_fits_the_server() {
        let config = JsConfig {
            store_dir: std::path::PathBuf::from("/nonexistent"),
            max_memory: 100,
            max_storage: 1000,
            limits_set: true,
            domain: None,
            sync: crate::jetstream::store::SyncPolicy {
                interval: std::time::Duration::from_secs(120),
                always: false,
            },
            stream_snapshot_every: 50_000,
        };
        let a = Limits {
            max_memory: 60,
            ..Limits::default()
        };
        assert!(check_sufficient(&config, [a].iter()).is_ok());
        let e = check_sufficient(&config, [a, a].iter()).expect_err("over");
        assert_eq!((e.code, e.err_code), (500, 10028));
        assert_eq!(as_reserved(-1), u64::MAX);
        assert_eq!(as_reserved(2048), 2048);
    }
}
