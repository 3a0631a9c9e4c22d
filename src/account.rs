//! Accounts: the unit of isolation. Each owns a sublist of its subscriptions; connections in
//! one account never see another's messages. `$G` is the default account, `$SYS` the system
//! account. Also the `Subscription` type the sublist holds.

use crate::conn::Conn;
use crate::sublist::{SubEntry, Sublist};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

pub const GLOBAL_ACCOUNT: &str = "$G";
pub const SYSTEM_ACCOUNT: &str = "$SYS";

/// Subject patterns a subscription must not receive even though its (wildcard) subject matches
/// them: the subscriber's `subscribe.deny` list, kept when the wildcard overlaps it.
pub type DenyFilter = Arc<Vec<Bytes>>;

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
}

impl Subscription {
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
}

impl std::ops::Deref for SubRef {
    type Target = Subscription;
    fn deref(&self) -> &Subscription {
        &self.0
    }
}

pub struct Account {
    pub name: String,
    pub sublist: Sublist<SubRef>,
    pub num_conns: AtomicUsize,
    pub in_msgs: AtomicU64,
    pub out_msgs: AtomicU64,
}

impl Account {
    pub fn new(name: &str) -> Self {
        Account {
            name: name.to_string(),
            sublist: Sublist::new(),
            num_conns: AtomicUsize::new(0),
            in_msgs: AtomicU64::new(0),
            out_msgs: AtomicU64::new(0),
        }
    }

    /// Remove `sub` from the sublist and from its connection's sid map (if it is still the
    /// one registered under its sid). Idempotent.
    pub fn retire(&self, sub: &Arc<Subscription>) {
        let _ = self
            .sublist
            .remove(&sub.subject, sub.queue.as_deref(), &SubRef(sub.clone()));
        let mut subs = sub.conn.subs();
        if subs.get(&sub.sid).is_some_and(|s| Arc::ptr_eq(s, sub)) {
            subs.remove(&sub.sid);
        }
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

    pub fn global(&self) -> Arc<Account> {
        self.get(GLOBAL_ACCOUNT)
            .unwrap_or_else(|| Arc::new(Account::new(GLOBAL_ACCOUNT)))
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
