//! [`SidMap`]: a connection's subscriptions by sid, one pointer a slot (the key is the
//! subscription's own `sid`, so it is not stored twice).

use crate::account::Subscription;
use std::hash::BuildHasher;
use std::sync::Arc;

#[derive(Default)]
pub struct SidMap {
    table: hashbrown::HashTable<Arc<Subscription>>,
    hasher: foldhash::fast::RandomState,
}

impl SidMap {
    fn hash(&self, sid: &[u8]) -> u64 {
        self.hasher.hash_one(sid)
    }

    pub fn get(&self, sid: &[u8]) -> Option<&Arc<Subscription>> {
        self.table.find(self.hash(sid), |s| &s.sid[..] == sid)
    }

    pub fn contains_key(&self, sid: &[u8]) -> bool {
        self.get(sid).is_some()
    }

    /// Add `sub` under its sid; returns the one it replaced.
    pub fn insert(&mut self, sub: Arc<Subscription>) -> Option<Arc<Subscription>> {
        let st = &self.hasher;
        let h = st.hash_one(&sub.sid[..]);
        match self
            .table
            .entry(h, |s| s.sid == sub.sid, |s| st.hash_one(&s.sid[..]))
        {
            hashbrown::hash_table::Entry::Occupied(mut o) => {
                Some(std::mem::replace(o.get_mut(), sub))
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(sub);
                None
            }
        }
    }

    pub fn remove(&mut self, sid: &[u8]) -> Option<Arc<Subscription>> {
        let h = self.hash(sid);
        let r = match self.table.find_entry(h, |s| &s.sid[..] == sid) {
            Ok(o) => Some(o.remove().0),
            Err(_) => None,
        };
        if self.table.capacity() > 4 * self.table.len() + 64 {
            let st = &self.hasher;
            self.table.shrink_to_fit(|s| st.hash_one(&s.sid[..]));
        }
        r
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn values(&self) -> impl Iterator<Item = &Arc<Subscription>> {
        self.table.iter()
    }

    /// Take every subscription out.
    pub fn drain(&mut self) -> impl Iterator<Item = Arc<Subscription>> + '_ {
        self.table.drain()
    }
}
