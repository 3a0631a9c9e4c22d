//! Gateway interest, both directions (spec §4.3).
//!
//! - `OutInterest` (outbound side): what one remote cluster wants, per account, as nats-server
//!   2.9's `outsie`: Optimistic (send unless told `RS-`/`A-`), Transitioning (between
//!   `gateway_cmd` 2 and 3), Interest-Only (send only what `RS+` asked for). Queue interest is
//!   always explicit. A peer whose INFO has `gateway_iom` starts every account Interest-Only.
//! - `Tally` (inbound side): this cluster's interest — local subscriptions plus those learned
//!   from routes — counted per (account, subject, queue); 0↔1 changes become `RS+`/`RS-` on
//!   every inbound gateway (queue interest with weight 1), and a new inbound gets
//!   `gateway_cmd` 2, the dump, `gateway_cmd` 3 for every account (2.9 switches all accounts to
//!   Interest-Only at once).

use super::{lock, Gateway, Inbound};
use crate::proto::encode;
use crate::proto::info::{b64_encode, ServerInfo};
use crate::sublist::{SubEntry, Sublist, SublistResult};
use crate::util::FastMap;
use bytes::{Bytes, BytesMut};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, Mutex};

/// nats-server's `gatewayMaxRUnsubBeforeSwitch`: at most this many no-interest subjects are
/// remembered per account (beyond that we assume interest: bounded memory, correct delivery).
const MAX_NO_INTEREST: usize = 1000;
/// Accounts one outbound keeps state for at most (bounded memory for a bad peer); beyond,
/// new account names are ignored.
const MAX_ACCOUNTS: usize = 65536;

fn full(m: &HashMap<String, Option<AccInterest>>, acc: &str) -> bool {
    m.len() >= MAX_ACCOUNTS && !m.contains_key(acc)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Optimistic,
    Transitioning,
    InterestOnly,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Optimistic => "Optimistic",
            Mode::Transitioning => "Transitioning",
            Mode::InterestOnly => "Interest-Only",
        }
    }
}

/// One remote subscription in an outbound's per-account sublist (identity = allocation).
#[derive(Clone)]
pub struct GwSub(Arc<()>);

impl SubEntry for GwSub {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

pub struct AccInterest {
    pub mode: Mode,
    /// Optimistic: subjects the remote said it has no interest in.
    ni: HashSet<Bytes>,
    sl: Sublist<GwSub>,
    subs: FastMap<(Bytes, Option<Bytes>), GwSub>,
}

impl AccInterest {
    fn new(mode: Mode) -> Self {
        AccInterest {
            mode,
            ni: HashSet::new(),
            sl: Sublist::new(),
            subs: FastMap::default(),
        }
    }
}

/// Per-account figures for `/gatewayz?accs=1`.
pub struct AccSummary {
    pub name: String,
    pub mode: Mode,
    pub no_interest_count: usize,
    pub num_subs: usize,
    pub num_queue_subs: usize,
}

pub struct OutInterest {
    /// The remote announced `gateway_iom`: accounts it never mentioned have no interest.
    iom: bool,
    /// Remote subscriptions held, over all accounts.
    total: std::sync::atomic::AtomicUsize,
    /// `None`: the remote has no interest in the account at all (`A-`).
    accs: Mutex<HashMap<String, Option<AccInterest>>>,
    /// This interest's version, unique across all `OutInterest`s of the process: changed
    /// (under the `accs` lock) by every mutation, so a cached `check` answer stays valid while
    /// it is unchanged (`check_cached`).
    gen: AtomicU64,
}

/// Source of `OutInterest::gen` values (never reused, so a cache entry can never be mistaken
/// for one of another outbound that happens to live at the same address).
static GEN: AtomicU64 = AtomicU64::new(1);

fn next_gen() -> u64 {
    GEN.fetch_add(1, Relaxed) + 1
}

/// One remembered `check` answer.
struct Cached {
    gen: u64,
    acc: String,
    subject: Vec<u8>,
    plain: bool,
    res: Option<Arc<SublistResult<GwSub>>>,
}

/// Per-thread `check` answers, one slot per outbound position (the send loop's index): a
/// publisher sending the same subject again (the common case) costs an atomic load and two
/// comparisons instead of the lock, the account lookup and the match.
const CACHE_SLOTS: usize = 16;

thread_local! {
    static CHECK_CACHE: RefCell<Vec<Option<Cached>>> = const { RefCell::new(Vec::new()) };
}

impl OutInterest {
    pub fn new(iom: bool) -> Self {
        OutInterest {
            iom,
            total: std::sync::atomic::AtomicUsize::new(0),
            accs: Mutex::new(HashMap::new()),
            gen: AtomicU64::new(next_gen()),
        }
    }

    /// A new version (called with the `accs` lock held, before mutating).
    fn bump(&self) {
        self.gen.store(next_gen(), Release);
    }

    /// `check`, answered from this thread's cache slot `slot` while this interest is
    /// unchanged and the account and subject are the same as last time.
    pub fn check_cached(
        &self,
        slot: usize,
        acc: &str,
        subject: &[u8],
    ) -> (bool, Option<Arc<SublistResult<GwSub>>>) {
        if slot >= CACHE_SLOTS {
            return self.check(acc, subject);
        }
        // Read before computing: a mutation racing with the computation leaves a version
        // that no longer matches, so the entry is recomputed next time (never served stale).
        let gen = self.gen.load(Acquire);
        let hit = CHECK_CACHE.with(|c| {
            let c = c.borrow();
            c.get(slot)
                .and_then(Option::as_ref)
                .filter(|e| e.gen == gen && e.subject == subject && e.acc == acc)
                .map(|e| (e.plain, e.res.clone()))
        });
        if let Some(h) = hit {
            return h;
        }
        let (plain, res) = self.check(acc, subject);
        CHECK_CACHE.with(|c| {
            let mut c = c.borrow_mut();
            if c.len() <= slot {
                c.resize_with(slot + 1, || None);
            }
            match &mut c[slot] {
                Some(e) => {
                    e.gen = gen;
                    e.acc.clear();
                    e.acc.push_str(acc);
                    e.subject.clear();
                    e.subject.extend_from_slice(subject);
                    e.plain = plain;
                    e.res = res.clone();
                }
                empty => {
                    *empty = Some(Cached {
                        gen,
                        acc: acc.to_string(),
                        subject: subject.to_vec(),
                        plain,
                        res: res.clone(),
                    })
                }
            }
        });
        (plain, res)
    }

    fn default_mode(&self) -> Mode {
        if self.iom {
            Mode::InterestOnly
        } else {
            Mode::Optimistic
        }
    }

    /// Plain interest in `subject`, and the match holding the remote's queue groups (and its
    /// plain subscriptions in Interest-Only mode). As nats-server's `gatewayInterest`.
    pub fn check(&self, acc: &str, subject: &[u8]) -> (bool, Option<Arc<SublistResult<GwSub>>>) {
        let m = lock(&self.accs);
        match m.get(acc) {
            None => (!self.iom, None),
            Some(None) => (false, None),
            Some(Some(e)) => {
                let mut plain = e.mode != Mode::InterestOnly && !e.ni.contains(subject);
                let r = if e.subs.is_empty() {
                    None
                } else {
                    let r = e.sl.matches(subject);
                    if !r.psubs.is_empty() {
                        plain = true;
                    }
                    Some(r)
                };
                (plain, r)
            }
        }
    }

    /// `RS+ acc subject [queue weight]` from the remote. Err: an invalid subject or queue.
    pub fn plus(&self, acc: &str, subject: &[u8], queue: Option<&[u8]>) -> Result<(), String> {
        let default_mode = self.default_mode();
        let mut m = lock(&self.accs);
        self.bump();
        if full(&m, acc) {
            return Err(format!("too many accounts, {acc:?} ignored"));
        }
        let slot = m.entry(acc.to_string()).or_insert(None);
        if slot.is_none() {
            if queue.is_none() && default_mode == Mode::Optimistic {
                // Interest again in an account that had none: back to optimistic.
                *slot = Some(AccInterest::new(Mode::Optimistic));
                return Ok(());
            }
            *slot = Some(AccInterest::new(default_mode));
        }
        let Some(e) = slot.as_mut() else {
            return Ok(());
        };
        if queue.is_none() && e.mode == Mode::Optimistic {
            e.ni.remove(subject);
            return Ok(());
        }
        let key = (
            Bytes::copy_from_slice(subject),
            queue.map(Bytes::copy_from_slice),
        );
        if e.subs.contains_key(&key) {
            return Ok(());
        }
        let s = GwSub(Arc::new(()));
        e.sl.insert(subject, queue, s.clone()).map_err(|err| {
            format!(
                "invalid interest {:?}: {err}",
                String::from_utf8_lossy(subject)
            )
        })?;
        e.subs.insert(key, s);
        self.total.fetch_add(1, Relaxed);
        Ok(())
    }

    /// `RS- acc subject [queue]` from the remote.
    pub fn minus(&self, acc: &str, subject: &[u8], queue: Option<&[u8]>) {
        let default_mode = self.default_mode();
        let mut m = lock(&self.accs);
        self.bump();
        if full(&m, acc) {
            return;
        }
        if queue.is_none() {
            let slot = m
                .entry(acc.to_string())
                .or_insert_with(|| Some(AccInterest::new(default_mode)));
            let Some(e) = slot.as_mut() else { return };
            if e.mode == Mode::Optimistic {
                if e.ni.len() < MAX_NO_INTEREST {
                    e.ni.insert(Bytes::copy_from_slice(subject));
                }
                return;
            }
        }
        let Some(Some(e)) = m.get_mut(acc) else {
            return;
        };
        let key = (
            Bytes::copy_from_slice(subject),
            queue.map(Bytes::copy_from_slice),
        );
        if let Some(s) = e.subs.remove(&key) {
            let _ = e.sl.remove(subject, queue, &s);
            self.total.fetch_sub(1, Relaxed);
        }
    }

    /// `A+ acc`: interest in the account again (optimistic).
    pub fn acc_plus(&self, acc: &str) {
        let mut m = lock(&self.accs);
        self.bump();
        if let Some(None) = m.get(acc) {
            m.remove(acc);
        }
    }

    /// `A- acc`: no interest at all in the account (meaningful in optimistic mode only).
    pub fn acc_minus(&self, acc: &str) {
        let mut m = lock(&self.accs);
        self.bump();
        if full(&m, acc) {
            return;
        }
        match m.get(acc) {
            Some(Some(e)) if e.mode != Mode::Optimistic || !e.subs.is_empty() => {}
            _ => {
                m.insert(acc.to_string(), None);
            }
        }
    }

    /// `gateway_cmd` 2 (start) / 3 (complete) for `acc`.
    pub fn switch(&self, acc: &str, complete: bool) {
        let mut m = lock(&self.accs);
        self.bump();
        if full(&m, acc) {
            return;
        }
        let slot = m.entry(acc.to_string()).or_insert(None);
        let e = slot.get_or_insert_with(|| AccInterest::new(Mode::Transitioning));
        e.ni.clear();
        e.mode = if complete {
            Mode::InterestOnly
        } else {
            Mode::Transitioning
        };
    }

    pub fn summary(&self) -> Vec<AccSummary> {
        let m = lock(&self.accs);
        let mut v: Vec<AccSummary> = m
            .iter()
            .map(|(name, e)| match e {
                None => AccSummary {
                    name: name.clone(),
                    mode: Mode::Optimistic,
                    no_interest_count: 0,
                    num_subs: 0,
                    num_queue_subs: 0,
                },
                Some(e) => AccSummary {
                    name: name.clone(),
                    mode: e.mode,
                    no_interest_count: e.ni.len(),
                    num_subs: e.subs.len(),
                    num_queue_subs: e.subs.keys().filter(|(_, q)| q.is_some()).count(),
                },
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Total remote subscriptions known (for `/gatewayz` `subscriptions`).
    pub fn num_subs(&self) -> usize {
        self.total.load(Relaxed)
    }
}

/// This cluster's interest by account, then (subject, queue) → count of local subscriptions
/// and routes that have it.
pub type Tally = HashMap<String, FastMap<(Bytes, Option<Bytes>), u32>>;

/// `INFO {…,"gateway":<name>,"gateway_cmd":cmd,"gateway_cmd_payload":<b64 acc>}`.
pub fn cmd_info(gw_name: &str, cmd: u8, acc: &str) -> Vec<u8> {
    let info = ServerInfo {
        gateway: gw_name.to_string(),
        gateway_cmd: cmd,
        gateway_cmd_payload: b64_encode(acc.as_bytes()),
        ..Default::default()
    };
    let mut b = BytesMut::new();
    let _ = info.write_to(&mut b);
    b.to_vec()
}

fn plus_line(b: &mut BytesMut, acc: &[u8], subject: &[u8], queue: Option<&[u8]>) {
    encode::write_rs_plus(b, acc, subject, queue.map(|q| (q, 1)));
}

impl Gateway {
    /// One local subscription or one route's interest appeared (+1) or went (-1).
    pub fn interest_changed(&self, acc: &str, subject: &Bytes, queue: Option<&Bytes>, delta: i32) {
        let mut t = lock(&self.tally);
        let per = t.entry(acc.to_string()).or_default();
        let key = (subject.clone(), queue.cloned());
        let before = per.get(&key).copied().unwrap_or(0);
        let after = (i64::from(before) + i64::from(delta)).max(0) as u32;
        if after == 0 {
            per.remove(&key);
        } else {
            per.insert(key, after);
        }
        let mut line = BytesMut::new();
        match (before, after) {
            (0, a) if a > 0 => plus_line(&mut line, acc.as_bytes(), subject, queue.map(|q| &q[..])),
            (b, 0) if b > 0 => {
                encode::write_rs_minus(&mut line, acc.as_bytes(), subject, queue.map(|q| &q[..]))
            }
            _ => return,
        }
        for i in lock(&self.inbound).iter() {
            i.conn
                .out
                .push_now(line.len(), |b| b.extend_from_slice(&line));
        }
    }

    /// Register `inb` and queue, for every account, `gateway_cmd` 2, this cluster's interest,
    /// `gateway_cmd` 3 — under the tally lock, so later changes follow the dump.
    pub fn register_inbound(&self, inb: &Arc<Inbound>, accounts: &[String]) -> bool {
        let t = lock(&self.tally);
        if self.is_closed() {
            return false;
        }
        let mut b = BytesMut::new();
        for acc in accounts {
            b.extend_from_slice(&cmd_info(&self.name, 2, acc));
            if let Some(per) = t.get(acc) {
                for (subject, queue) in per.keys() {
                    plus_line(&mut b, acc.as_bytes(), subject, queue.as_deref());
                }
            }
            b.extend_from_slice(&cmd_info(&self.name, 3, acc));
        }
        inb.conn.out.push_now(b.len(), |o| o.extend_from_slice(&b));
        lock(&self.inbound).push(inb.clone());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_checks_follow_every_change() {
        let a = OutInterest::new(true);
        let b = OutInterest::new(true);
        let plain = |o: &OutInterest, slot: usize, subj: &str| {
            o.check_cached(slot, "$G", subj.as_bytes()).0
        };
        assert!(!plain(&a, 0, "x"));
        a.plus("$G", b"x", None).expect("plus");
        assert!(plain(&a, 0, "x"));
        assert!(plain(&a, 0, "x"), "a hit gives the same answer");
        // Same slot, another interest (another outbound at that position): its own answer.
        assert!(!plain(&b, 0, "x"));
        assert!(plain(&a, 0, "x"));
        a.minus("$G", b"x", None);
        assert!(!plain(&a, 0, "x"));
        // Queue interest shows in the cached match too, and goes with RS-.
        a.plus("$G", b"q", Some(b"g")).expect("plus");
        let (_, r) = a.check_cached(1, "$G", b"q");
        assert_eq!(r.map(|r| r.qsubs.len()), Some(1));
        a.minus("$G", b"q", Some(b"g"));
        let (_, r) = a.check_cached(1, "$G", b"q");
        assert!(r.is_none_or(|r| r.qsubs.is_empty()));
        // Another account or subject in the same slot is not confused with the cached one.
        a.plus("$G", b"y", None).expect("plus");
        assert!(plain(&a, 2, "y"));
        assert!(!a.check_cached(2, "ACC", b"y").0);
        assert!(!plain(&a, 2, "z"));
        // Slots beyond the cache fall back to the plain check.
        assert!(plain(&a, CACHE_SLOTS + 3, "y"));
    }

    #[test]
    fn optimistic_then_interest_only() {
        let o = OutInterest::new(false);
        assert!(
            o.check("$G", b"foo").0,
            "optimistic: unknown account means interest"
        );
        o.minus("$G", b"foo", None);
        assert!(!o.check("$G", b"foo").0);
        assert!(o.check("$G", b"bar").0);
        o.plus("$G", b"foo", None).expect("plus");
        assert!(o.check("$G", b"foo").0);
        o.acc_minus("$G");
        assert!(!o.check("$G", b"bar").0);
        o.acc_plus("$G");
        assert!(o.check("$G", b"bar").0);
        o.switch("$G", false);
        assert!(o.check("$G", b"bar").0, "transitioning still sends");
        o.plus("$G", b"svc.>", None).expect("plus");
        o.switch("$G", true);
        assert!(!o.check("$G", b"bar").0);
        assert!(o.check("$G", b"svc.x").0);
        o.minus("$G", b"svc.>", None);
        assert!(!o.check("$G", b"svc.x").0);
    }

    #[test]
    fn iom_and_queues() {
        let o = OutInterest::new(true);
        assert!(!o.check("$G", b"foo").0);
        o.plus("$G", b"foo", Some(b"q1")).expect("plus");
        let (plain, r) = o.check("$G", b"foo");
        assert!(!plain);
        let r = r.expect("match");
        assert_eq!(r.qsubs.len(), 1);
        assert_eq!(&r.qsubs[0].name[..], b"q1");
        o.minus("$G", b"foo", Some(b"q1"));
        assert!(o.check("$G", b"foo").1.is_none_or(|r| r.qsubs.is_empty()));
        assert!(o.plus("$G", b"foo..bar", None).is_err());
        let s = o.summary();
        assert_eq!(s[0].mode, Mode::InterestOnly);
    }

    #[test]
    fn cmd_info_as_captured() {
        let b = cmd_info("C1", 2, "$G");
        assert_eq!(
            String::from_utf8_lossy(&b),
            "INFO {\"server_id\":\"\",\"server_name\":\"\",\"version\":\"\",\"proto\":0,\"go\":\"\",\"host\":\"\",\"port\":0,\"headers\":false,\"max_payload\":0,\"gateway\":\"C1\",\"gateway_cmd\":2,\"gateway_cmd_payload\":\"JEc=\"} \r\n"
        );
    }
}
