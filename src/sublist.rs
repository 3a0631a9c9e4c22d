//! The interest trie: which subscriptions want a published subject.
//!
//! A [`Sublist`] stores entries (local subscriptions, a route's interest, ...) under subject
//! patterns in a trie with one level per token: literal children keyed by token, a `*` child
//! and a `>` child. Each node holds plain entries and queue entries grouped by queue name.
//! [`Sublist::matches`] returns every plain entry whose pattern matches a literal subject and
//! the queue groups, merged by name across trie nodes, from which the caller picks one member
//! per group ([`QueueGroup::pick`], weighted). Results are cached per subject; the cache is
//! kept exact by dropping only the entries an insert/remove could change. This module knows
//! nothing about connections, routes or accounts: entries are an opaque [`SubEntry`].

use crate::util::FastMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;

use crate::subject::{self, FWC, PWC};
use node::Node;

/// The match cache is split into `1 << SHARD_BITS` independently locked shards, so that
/// publishers on different subjects do not contend on one lock or one counter.
const SHARD_BITS: u32 = 4;
const SHARDS: usize = 1 << SHARD_BITS;
/// Most results one cache shard holds (4096 in all) before it is swept ...
const SHARD_MAX: usize = 256;
/// ... down to this many, dropping arbitrary entries.
const SHARD_LOW: usize = 192;

/// What a sublist stores: a handle on one subscription or one piece of remote interest.
pub trait SubEntry: Clone + Send + Sync + 'static {
    /// Identity: two entries are the same subscription (used by remove).
    fn same(&self, other: &Self) -> bool;
    /// Queue weight: 1 for a local queue subscriber; a route's queue interest carries the
    /// peer's member count.
    fn weight(&self) -> u32 {
        1
    }
}

/// The members of one queue group that match a subject, gathered from every trie node.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueGroup<T> {
    pub name: Bytes,
    pub members: Vec<T>,
    /// Sum of the members' weights.
    pub total_weight: u64,
}

impl<T: SubEntry> QueueGroup<T> {
    /// A member chosen at random with probability `weight / total_weight`; members of weight
    /// 0 are never chosen. `None` if the group's total weight is 0.
    pub fn pick(&self, rng: &mut impl rand::Rng) -> Option<&T> {
        if self.total_weight == 0 {
            return None;
        }
        let mut r = rng.random_range(0..self.total_weight);
        for m in &self.members {
            let w = u64::from(m.weight());
            if r < w {
                return Some(m);
            }
            r -= w;
        }
        None
    }
}

/// Everything that wants one subject: plain entries get a copy each, each queue group one.
#[derive(Debug, Clone, PartialEq)]
pub struct SublistResult<T> {
    pub psubs: Vec<T>,
    pub qsubs: Vec<QueueGroup<T>>,
}

impl<T> Default for SublistResult<T> {
    fn default() -> Self {
        SublistResult {
            psubs: Vec::new(),
            qsubs: Vec::new(),
        }
    }
}

impl<T> SublistResult<T> {
    /// True if nothing is interested.
    pub fn is_empty(&self) -> bool {
        self.psubs.is_empty() && self.qsubs.is_empty()
    }

    /// Fan-out: number of plain entries plus number of queue groups (one delivery each).
    pub fn len(&self) -> usize {
        self.psubs.len() + self.qsubs.len()
    }
}

/// Why an insert or remove was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SublistError {
    InvalidSubject,
    InvalidQueue,
    NotFound,
}

impl fmt::Display for SublistError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SublistError::InvalidSubject => "invalid subject",
            SublistError::InvalidQueue => "invalid queue name",
            SublistError::NotFound => "subscription not found",
        })
    }
}

impl std::error::Error for SublistError {}

/// Counters in the shape of nats-server's `/subsz`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SublistStats {
    pub num_subscriptions: u64,
    pub num_cache: u64,
    pub num_inserts: u64,
    pub num_removes: u64,
    pub num_matches: u64,
    /// Fraction of `matches` calls answered from the cache, 0.0..=1.0.
    pub cache_hit_rate: f64,
    /// Largest fan-out ([`SublistResult::len`]) among cached results.
    pub max_fanout: u64,
    /// Mean fan-out among cached results.
    pub avg_fanout: f64,
}

type CacheMap<T> = FastMap<Box<[u8]>, Arc<SublistResult<T>>>;

/// One slice of the match cache with its own counters, on its own cache lines.
#[repr(align(128))]
struct CacheShard<T> {
    /// Match results by literal subject, at most [`SHARD_MAX`] of them.
    map: RwLock<CacheMap<T>>,
    matches: AtomicU64,
    hits: AtomicU64,
}

impl<T> CacheShard<T> {
    fn read(&self) -> RwLockReadGuard<'_, CacheMap<T>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, CacheMap<T>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Which cache shard holds `subject`: a cheap multiplicative hash of its bytes. Only spreads
/// load; a skewed (even adversarial) spread costs contention, never correctness.
fn shard_of(subject: &[u8]) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = subject.len() as u64;
    for chunk in subject.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    (h >> (64 - SHARD_BITS)) as usize
}

/// Subject interest for one account, shared as `Arc<Sublist<T>>` between connection tasks.
///
/// Lock order is always trie, then cache shard. `matches` on a cache hit takes only one
/// shard's read lock; a miss computes under the trie read lock and fills the cache before
/// releasing it, and insert/remove invalidate the cache under the trie write lock, so a
/// stale result can never be cached after the change that made it stale.
pub struct Sublist<T> {
    /// The trie root (holds no entries itself: subjects are never empty).
    trie: RwLock<Node<T>>,
    cache: [CacheShard<T>; SHARDS],
    generation: AtomicU64,
    count: AtomicUsize,
    inserts: AtomicU64,
    removes: AtomicU64,
}

impl<T> fmt::Debug for Sublist<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sublist")
            .field("count", &self.count.load(Ordering::Relaxed))
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<T: SubEntry> Default for Sublist<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: SubEntry> Sublist<T> {
    pub fn new() -> Self {
        Sublist {
            trie: RwLock::new(Node::default()),
            cache: std::array::from_fn(|_| CacheShard {
                map: RwLock::new(FastMap::default()),
                matches: AtomicU64::new(0),
                hits: AtomicU64::new(0),
            }),
            generation: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            inserts: AtomicU64::new(0),
            removes: AtomicU64::new(0),
        }
    }

    fn trie_read(&self) -> RwLockReadGuard<'_, Node<T>> {
        self.trie.read().unwrap_or_else(|e| e.into_inner())
    }

    fn trie_write(&self) -> RwLockWriteGuard<'_, Node<T>> {
        self.trie.write().unwrap_or_else(|e| e.into_inner())
    }

    fn shard(&self, subject: &[u8]) -> &CacheShard<T> {
        &self.cache[shard_of(subject)]
    }

    /// Add `entry` under `subject` (wildcards allowed), in queue group `queue` if given.
    /// Inserting the same entry twice stores it twice.
    pub fn insert(
        &self,
        subject: &[u8],
        queue: Option<&[u8]>,
        entry: T,
    ) -> Result<(), SublistError> {
        validate(subject, queue)?;
        let mut root = self.trie_write();
        root.insert(subject, queue, entry);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.changed(subject);
        drop(root);
        Ok(())
    }

    /// Remove one entry that is [`SubEntry::same`] as `entry` from `subject` / `queue`,
    /// pruning trie nodes left empty. `NotFound` if there is none.
    pub fn remove(
        &self,
        subject: &[u8],
        queue: Option<&[u8]>,
        entry: &T,
    ) -> Result<(), SublistError> {
        validate(subject, queue)?;
        let mut root = self.trie_write();
        if !root.remove_below(subject, queue, entry) {
            return Err(SublistError::NotFound);
        }
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.removes.fetch_add(1, Ordering::Relaxed);
        self.changed(subject);
        drop(root);
        Ok(())
    }

    /// After a change under `pattern` (caller holds the trie write lock): drop the cached
    /// results it could affect, then bump the generation so that a caller who reads the new
    /// generation is sure to see the change.
    fn changed(&self, pattern: &[u8]) {
        if let Some(prefix) = literal_prefix(pattern) {
            for shard in &self.cache {
                shard.write().retain(|subj, _| {
                    !(subj.starts_with(prefix) && subject::pattern_matches(pattern, subj))
                });
            }
        } else {
            self.shard(pattern).write().remove(pattern);
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Everything interested in the literal publish subject `subject`. A subject with an
    /// empty token matches nothing. Wildcard tokens in `subject` are compared literally.
    pub fn matches(&self, subject: &[u8]) -> Arc<SublistResult<T>> {
        let shard = self.shard(subject);
        shard.matches.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = shard.read().get(subject) {
            shard.hits.fetch_add(1, Ordering::Relaxed);
            return Arc::clone(r);
        }
        if subject.is_empty() || subject::tokens(subject).any(<[u8]>::is_empty) {
            return Arc::new(SublistResult::default());
        }
        let root = self.trie_read();
        let mut res = SublistResult::default();
        root.match_below(subject, &mut res);
        let res = Arc::new(res);
        let mut cache = shard.write();
        if cache.len() >= SHARD_MAX {
            let mut excess = cache.len() - SHARD_LOW;
            cache.retain(|_, _| {
                let keep = excess == 0;
                excess = excess.saturating_sub(1);
                keep
            });
        }
        cache.insert(Box::from(subject), Arc::clone(&res));
        drop(cache);
        drop(root);
        res
    }

    /// True if anything is interested in the literal subject `subject` (no allocation, and
    /// the cache is consulted but not filled).
    pub fn has_interest(&self, subject: &[u8]) -> bool {
        if let Some(r) = self.shard(subject).read().get(subject) {
            return !r.is_empty();
        }
        if subject.is_empty() || subject::tokens(subject).any(<[u8]>::is_empty) {
            return false;
        }
        self.trie_read().interest_below(subject)
    }

    /// Changes on every successful insert and remove (never on a refused one). A caller that
    /// keeps results keyed by generation must read it *before* calling [`Sublist::matches`]:
    /// the result then reflects at least that generation, so the key is never too new.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Number of entries stored.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    pub fn stats(&self) -> SublistStats {
        let (mut num_cache, mut max_fanout, mut total_fanout) = (0usize, 0usize, 0usize);
        let (mut matches, mut hits) = (0u64, 0u64);
        for shard in &self.cache {
            matches += shard.matches.load(Ordering::Relaxed);
            hits += shard.hits.load(Ordering::Relaxed);
            let map = shard.read();
            num_cache += map.len();
            for r in map.values() {
                max_fanout = max_fanout.max(r.len());
                total_fanout += r.len();
            }
        }
        SublistStats {
            num_subscriptions: self.count() as u64,
            num_cache: num_cache as u64,
            num_inserts: self.inserts.load(Ordering::Relaxed),
            num_removes: self.removes.load(Ordering::Relaxed),
            num_matches: matches,
            cache_hit_rate: if matches == 0 {
                0.0
            } else {
                hits as f64 / matches as f64
            },
            max_fanout: max_fanout as u64,
            avg_fanout: if num_cache == 0 {
                0.0
            } else {
                total_fanout as f64 / num_cache as f64
            },
        }
    }

    /// Fold the entries stored under exactly `subject` / `queue` (a pattern, its wildcards
    /// taken literally; no matching). `f` runs under the read lock: it must not use this
    /// sublist.
    pub fn fold_exact<A>(
        &self,
        subject: &[u8],
        queue: Option<&[u8]>,
        init: A,
        f: impl FnMut(A, &T) -> A,
    ) -> A {
        self.trie_read().exact(subject, queue).iter().fold(init, f)
    }

    /// Visit every entry with its subject and queue. The visit runs over a snapshot taken
    /// under the read lock and released before `f` is called, so `f` may use this sublist.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Option<&[u8]>, &T)) {
        let mut all = Vec::with_capacity(self.count());
        self.trie_read().snapshot(&mut Vec::new(), &mut all);
        for (subj, queue, entry) in &all {
            f(subj, queue.as_deref(), entry);
        }
    }
}

/// The bytes of `pattern` before its first wildcard token (with the trailing `.`), or `None`
/// if it has no wildcard. Every subject the pattern matches starts with it.
fn literal_prefix(pattern: &[u8]) -> Option<&[u8]> {
    let mut start = 0;
    for tok in subject::tokens(pattern) {
        if tok == PWC || tok == FWC {
            return Some(&pattern[..start]);
        }
        start += tok.len() + 1;
    }
    None
}

fn validate(subject: &[u8], queue: Option<&[u8]>) -> Result<(), SublistError> {
    if !subject::is_valid_subject(subject) {
        return Err(SublistError::InvalidSubject);
    }
    if queue.is_some_and(|q| !subject::is_valid_queue_name(q)) {
        return Err(SublistError::InvalidQueue);
    }
    Ok(())
}

mod node;
#[cfg(test)]
mod tests;
