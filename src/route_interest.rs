//! Local interest counts per account, as advertised to routes (`cluster::interest` turns
//! their changes into RS+/RS-). Kept apart from `cluster` so the routing core (`account`)
//! does not reach the server through it.

use crate::util::small::SmallBytes;
use std::hash::{BuildHasher, Hasher};

/// Local interest counts by (subject, queue): what this server advertises to routes. One
/// 32-byte slot per key: `subject` or `subject queue` in a [`SmallBytes`] (inline up to 22
/// bytes; subjects and queue names hold no space) and the count.
#[derive(Default)]
pub struct RouteInterest {
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

impl RouteInterest {
    /// Add `delta` to the count of (`subject`, `queue`), never below 0; a count of 0 is
    /// forgotten. Returns the count before and after.
    pub fn add(&mut self, subject: &[u8], queue: Option<&[u8]>, delta: i32) -> (u32, u32) {
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

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Every (subject, queue, count).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>, u32)> {
        self.table.iter().map(|(k, n)| {
            let (s, q) = split_key(k);
            (s, q, *n)
        })
    }
}
