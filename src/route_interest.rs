//! Local interest counts per account, as advertised to routes (`cluster::interest` turns
//! their changes into RS+/RS-). Kept apart from `cluster` so the routing core (`account`)
//! does not reach the server through it.

use crate::util::small::SmallBytes;
use bytes::Bytes;
use std::hash::{BuildHasher, Hasher};

/// Local interest counts by (subject, queue): what this server advertises to routes — its
/// own (clients, internal subscriptions, leaves without a cluster name) and, apart, each
/// leaf cluster's (`LS+ <origin> …` to peers that take it, nats-server's `L` keys).
#[derive(Default)]
pub struct RouteInterest {
    own: Table,
    /// By origin cluster; a handful at most (one per leaf cluster attached here).
    leaf: Vec<(Bytes, Table)>,
}

impl RouteInterest {
    /// Add `delta` to the count of (`subject`, `queue`) of `origin` (a leaf cluster's, or
    /// this server's own), never below 0; a count of 0 is forgotten. Returns the count
    /// before and after.
    pub fn add(
        &mut self,
        origin: Option<&[u8]>,
        subject: &[u8],
        queue: Option<&[u8]>,
        delta: i32,
    ) -> (u32, u32) {
        let Some(o) = origin else {
            return self.own.add(subject, queue, delta);
        };
        let i = match self.leaf.iter().position(|(k, _)| k[..] == *o) {
            Some(i) => i,
            None if delta <= 0 => return (0, 0),
            None => {
                self.leaf
                    .push((Bytes::copy_from_slice(o), Table::default()));
                self.leaf.len() - 1
            }
        };
        let r = self.leaf[i].1.add(subject, queue, delta);
        if self.leaf[i].1.len() == 0 {
            self.leaf.swap_remove(i);
        }
        r
    }

    pub fn len(&self) -> usize {
        self.own.len() + self.leaf.iter().map(|(_, t)| t.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every (origin, subject, queue, count).
    pub fn iter(&self) -> impl Iterator<Item = Counted<'_>> {
        let own = self.own.iter().map(|(s, q, n)| (None, s, q, n));
        let leaf = self
            .leaf
            .iter()
            .flat_map(|(o, t)| t.iter().map(move |(s, q, n)| (Some(&o[..]), s, q, n)));
        own.chain(leaf)
    }
}

/// One count: (origin, subject, queue, count).
pub type Counted<'a> = (Option<&'a [u8]>, &'a [u8], Option<&'a [u8]>, u32);

/// Counts by (subject, queue). One 32-byte slot per key: `subject` or `subject queue` in a
/// [`SmallBytes`] (inline up to 22 bytes; subjects and queue names hold no space) and the
/// count.
#[derive(Default)]
struct Table {
    table: hashbrown::HashTable<(SmallBytes, u32)>,
    hasher: foldhash::fast::RandomState,
}

/// A key's subject and queue.
fn split_key(k: &[u8]) -> (&[u8], Option<&[u8]>) {
    match k.iter().position(|&b| b == b' ') {
        Some(i) => (&k[..i], Some(&k[i + 1..])),
        None => (k, None),
    }
}

/// The hash of a key (as stored, or as subject and queue).
fn key_hash(st: &foldhash::fast::RandomState, subject: &[u8], queue: Option<&[u8]>) -> u64 {
    let mut h = st.build_hasher();
    h.write(subject);
    if let Some(q) = queue {
        h.write_u8(b' ');
        h.write(q);
    }
    h.finish()
}

impl Table {
    /// Add `delta` to the count of (`subject`, `queue`), never below 0; a count of 0 is
    /// forgotten. Returns the count before and after.
    fn add(&mut self, subject: &[u8], queue: Option<&[u8]>, delta: i32) -> (u32, u32) {
        let apply = |before: u32| (i64::from(before) + i64::from(delta)).max(0) as u32;
        let st = &self.hasher;
        let h = key_hash(st, subject, queue);
        let eq = |e: &(SmallBytes, u32)| split_key(&e.0) == (subject, queue);
        let hasher = |e: &(SmallBytes, u32)| {
            let (s, q) = split_key(&e.0);
            key_hash(st, s, q)
        };
        let r = match self.table.entry(h, eq, hasher) {
            hashbrown::hash_table::Entry::Occupied(mut o) => {
                let before = o.get().1;
                let after = apply(before);
                if after == 0 {
                    o.remove();
                } else {
                    o.get_mut().1 = after;
                }
                (before, after)
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                let after = apply(0);
                if after > 0 {
                    let key = match queue {
                        None => SmallBytes::new(subject),
                        Some(q) => SmallBytes::new(&[subject, b" ", q].concat()),
                    };
                    v.insert((key, after));
                }
                (0, after)
            }
        };
        if self.table.capacity() > 4 * self.table.len() + 64 {
            self.table.shrink_to_fit(hasher);
        }
        r
    }

    fn len(&self) -> usize {
        self.table.len()
    }

    /// Every (subject, queue, count).
    fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>, u32)> {
        self.table.iter().map(|(k, n)| {
            let (s, q) = split_key(k);
            (s, q, *n)
        })
    }
}
