//! Accounts: the unit of isolation. Each owns a sublist of its subscriptions; connections in
//! one account never see another's messages. `$G` is the default account, `$SYS` the system
//! account. Also the `Subscription` type the sublist holds.

use crate::conn::{Conn, ConnKind};
use crate::sublist::{SubEntry, Sublist};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};

pub const GLOBAL_ACCOUNT: &str = "$G";
pub const SYSTEM_ACCOUNT: &str = "$SYS";

/// Subject patterns a subscription must not receive even though its (wildcard) subject matches
/// them: the subscriber's `subscribe.deny` list, kept when the wildcard overlaps it.
pub type DenyFilter = Arc<Vec<Bytes>>;

/// What an internal subscription runs for each message it matches, synchronously inside the
/// fan-out of the publisher (it may publish further through the `Fanout` it is given). Keep it
/// short: hand heavy work to a task.
pub type Handler = Arc<dyn Fn(&mut crate::deliver::Fanout, &crate::deliver::Msg<'_>) + Send + Sync>;

/// One subscription of one connection.
pub struct Subscription {
    pub conn: Arc<Conn>,
    pub subject: Bytes,
    pub queue: Option<Bytes>,
    pub sid: Bytes,
    /// Auto-unsubscribe after this many messages (0 = never).
    pub max: AtomicU64,
    pub delivered: AtomicU64,
    pub deny: Option<DenyFilter>,
    /// Queue weight: 1 for a local member; a route's queue interest carries the peer's count.
    pub weight: u32,
    /// Set for the server's own subscriptions (`conn.kind == ConnKind::Internal`).
    pub handler: Option<Handler>,
    /// An internal subscription whose handler takes part in message tracing (import relays,
    /// JetStream): it runs with the trace in the fan-out, trace-only messages included.
    pub traced: bool,
}

impl Subscription {
    /// Interest a route learned (no sid, no max).
    pub fn remote(conn: Arc<Conn>, subject: Bytes, queue: Option<Bytes>, weight: u32) -> Self {
        Subscription {
            conn,
            subject,
            queue,
            sid: Bytes::new(),
            max: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            deny: None,
            weight,
            handler: None,
            traced: false,
        }
    }

    /// Interest a route learned on behalf of leaf cluster `origin` (`LS+ <origin> …`): the
    /// origin is kept in `sid`, which a route's interest has no other use for.
    pub fn remote_from(
        conn: Arc<Conn>,
        subject: Bytes,
        queue: Option<Bytes>,
        weight: u32,
        origin: Bytes,
    ) -> Self {
        Subscription {
            sid: origin,
            ..Subscription::remote(conn, subject, queue, weight)
        }
    }

    /// The leaf cluster a route's interest is on behalf of (see [`Subscription::remote_from`]).
    #[inline]
    pub fn leaf_origin(&self) -> Option<&[u8]> {
        (self.conn.kind == ConnKind::Route && !self.sid.is_empty()).then_some(&self.sid[..])
    }

    /// Count one delivery. Returns (deliver?, last?): `last` means the max was just reached
    /// and the subscription must be retired.
    #[inline]
    pub fn count_delivery(&self) -> (bool, bool) {
        let n = self.delivered.fetch_add(1, Relaxed) + 1;
        let max = self.max.load(Relaxed);
        if max == 0 {
            (true, false)
        } else {
            (n <= max, n == max)
        }
    }

    /// True when the deny filter forbids delivering `subject`.
    #[inline]
    pub fn denies(&self, subject: &[u8]) -> bool {
        match &self.deny {
            None => false,
            Some(d) => d
                .iter()
                .any(|p| crate::subject::pattern_matches(p, subject)),
        }
    }
}

/// Sublist entries are shared subscriptions; identity is the allocation.
#[derive(Clone)]
pub struct SubRef(pub Arc<Subscription>);

impl SubEntry for SubRef {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
    fn weight(&self) -> u32 {
        self.0.weight
    }
}

impl std::ops::Deref for SubRef {
    type Target = Subscription;
    fn deref(&self) -> &Subscription {
        &self.0
    }
}

/// Local interest counts by (subject, queue): what this server advertises to routes.
pub use crate::route_interest::RouteInterest;

/// A count of messages and their bytes (header and payload).
#[derive(Default, Debug)]
pub struct MsgBytes {
    pub msgs: AtomicU64,
    pub bytes: AtomicU64,
}

impl MsgBytes {
    #[inline]
    pub fn add(&self, msgs: u64, bytes: u64) {
        self.msgs.fetch_add(msgs, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }

    pub fn get(&self) -> (u64, u64) {
        (self.msgs.load(Relaxed), self.bytes.load(Relaxed))
    }
}

/// An account's messages that came from or went to routes and gateways (`/accstatz`'s
/// per-kind `sent`/`received`, nats-server 2.10+). Clients' counts live on their connections.
#[derive(Default, Debug)]
pub struct KindStats {
    pub routes_in: MsgBytes,
    pub routes_out: MsgBytes,
    pub gateways_in: MsgBytes,
    pub gateways_out: MsgBytes,
}

pub struct Account {
    pub name: String,
    pub sublist: Sublist<SubRef>,
    /// Local (client) interest, aggregated for RS+/RS- (see `cluster::interest`).
    pub route_interest: Mutex<RouteInterest>,
    pub num_conns: AtomicUsize,
    /// Its clients on the other servers of the cluster, as they last said (`sys/conns.rs`).
    pub remote_conns: AtomicUsize,
    /// Its leafnode connections on this server (either role), and on the others.
    pub num_leafs: AtomicUsize,
    pub remote_leafs: AtomicUsize,
    pub in_msgs: AtomicU64,
    pub out_msgs: AtomicU64,
    pub kinds: KindStats,
    /// Exports and imports (`imports.rs`), set at startup and replaced by JWT updates.
    pub links: crate::imports::LinkSlot,
    /// Subject mappings (`mapping.rs`): what clients and leaves publish is mapped first.
    pub mappings: crate::mapping::AccountMappings,
}

impl Account {
    pub fn new(name: &str) -> Self {
        Account {
            name: name.to_string(),
            sublist: Sublist::new(),
            route_interest: Mutex::new(Default::default()),
            num_conns: AtomicUsize::new(0),
            remote_conns: AtomicUsize::new(0),
            num_leafs: AtomicUsize::new(0),
            remote_leafs: AtomicUsize::new(0),
            in_msgs: AtomicU64::new(0),
            out_msgs: AtomicU64::new(0),
            kinds: KindStats::default(),
            links: Default::default(),
            mappings: Default::default(),
        }
    }

    /// Remove `sub` from the sublist and from its connection's sid map (if it is still the
    /// one registered under its sid). Idempotent: true only for the call that removed it.
    pub fn retire(&self, sub: &Arc<Subscription>) -> bool {
        let removed = self
            .sublist
            .remove(&sub.subject, sub.queue.as_deref(), &SubRef(sub.clone()))
            .is_ok();
        let mut subs = sub.conn.subs();
        if subs.get(&sub.sid).is_some_and(|s| Arc::ptr_eq(s, sub)) {
            subs.remove(&sub.sid);
        }
        removed
    }
}

/// The last account a server-to-server connection's ops named (most carry one or two), so
/// a routed message does not look its account up by name.
#[derive(Default)]
pub struct LastAccount(Option<(bytes::Bytes, Arc<Account>)>);

impl LastAccount {
    pub fn get(&mut self, accounts: &Accounts, name: &[u8]) -> Option<Arc<Account>> {
        if let Some((n, a)) = &self.0 {
            if &n[..] == name {
                return Some(a.clone());
            }
        }
        let a = accounts.lookup(name)?;
        self.0 = Some((bytes::Bytes::copy_from_slice(name), a.clone()));
        Some(a)
    }

    pub fn clear(&mut self) {
        self.0 = None;
    }
}

/// All accounts of a server by name.
pub struct Accounts {
    map: RwLock<HashMap<String, Arc<Account>>>,
}

impl Accounts {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut map = HashMap::new();
        for n in [GLOBAL_ACCOUNT, SYSTEM_ACCOUNT].into_iter().chain(names) {
            map.entry(n.to_string())
                .or_insert_with(|| Arc::new(Account::new(n)));
        }
        Accounts {
            map: RwLock::new(map),
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<Account>> {
        self.map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// The account `name`, created if this server did not have it (an account JWT that
    /// arrived while running).
    pub fn add(&self, name: &str) -> Arc<Account> {
        self.map
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Account::new(name)))
            .clone()
    }

    pub fn global(&self) -> Arc<Account> {
        self.get(GLOBAL_ACCOUNT)
            .unwrap_or_else(|| Arc::new(Account::new(GLOBAL_ACCOUNT)))
    }

    /// The account for a name from the wire; `None` for accounts this server does not serve.
    pub fn lookup(&self, name: &[u8]) -> Option<Arc<Account>> {
        std::str::from_utf8(name).ok().and_then(|n| self.get(n))
    }

    pub fn all(&self) -> Vec<Arc<Account>> {
        let mut v: Vec<_> = self
            .map
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}
