//! Where each entry of a group's Raft log is in the log file, and the newest entries
//! themselves.
//!
//! Every entry has a [`Slot`]: its id and the place of its record in the file. Only the
//! newest entries are kept in memory, at most `max_bytes` of records (the ones the leader
//! is about to send and every member is about to apply); older ones are read back from the
//! file when asked for (a follower catching up). Without the bound a busy group held every
//! entry since its last snapshot: a stream's group snapshots every 50,000 entries, and an
//! entry batches up to 256 KiB of messages, so a node's memory grew with everything
//! published (about 50 MB/s under 1 KiB asynchronous publishes).
//!
//! The cached entries are always the newest ones: entries are added at the end, a
//! truncation removes a suffix, a purge a prefix, and eviction takes the oldest cached. So
//! the slots are a queue by index and the cache a queue of the last slots' entries: 40
//! bytes a slot (a map of slots holding their entries cost over 120 bytes an entry).

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use openraft::{Entry, LogId};

use super::{NodeId, TypeConfig};

/// Where one entry of the log is (40 bytes: a busy stream group holds up to 50,000).
pub(crate) struct Slot {
    pub log_id: LogId<NodeId>,
    /// Offset of the entry's framed record in the log file.
    pub at: u64,
    /// Length of the record's payload (after the frame header).
    pub len: u32,
}

/// The slots of a log, by index (a Raft log's indexes follow each other: entries are
/// added at the end, a truncation removes a suffix and a purge a prefix), and the newest
/// entries themselves.
pub(crate) struct LogIndex {
    /// The slots of indexes `first..`.
    slots: VecDeque<Slot>,
    first: u64,
    /// The entries of the last `cache.len()` slots.
    cache: VecDeque<Entry<TypeConfig>>,
    /// Record bytes of the cached entries.
    cached: usize,
    max_bytes: usize,
}

impl LogIndex {
    pub(crate) fn new(max_bytes: usize) -> LogIndex {
        LogIndex {
            slots: VecDeque::new(),
            first: 0,
            cache: VecDeque::new(),
            cached: 0,
            max_bytes,
        }
    }

    /// One past the last index.
    fn end(&self) -> u64 {
        self.first + self.slots.len() as u64
    }

    /// The index of the first cached entry.
    fn cache_start(&self) -> u64 {
        self.end() - self.cache.len() as u64
    }

    fn len_at(&self, idx: u64) -> usize {
        self.slots
            .get((idx - self.first) as usize)
            .map_or(0, |s| s.len as usize)
    }

    /// Adds the entry after the last one (a truncation makes room first), with the entry
    /// itself to cache (`None`: not cached), then drops the oldest cached entries over the
    /// bound.
    pub(crate) fn push(&mut self, slot: Slot, entry: Option<Entry<TypeConfig>>) {
        let idx = slot.log_id.index;
        if self.slots.is_empty() {
            self.first = idx;
        } else if idx < self.end() {
            // Not expected (appends follow a truncation), but keep the index right.
            self.truncate(idx);
        } else if idx > self.end() {
            tracing::error!(
                "raft log: entry {idx} after {}: the log before it is forgotten",
                self.end() - 1
            );
            self.purge(idx - 1);
            self.first = idx;
        }
        let len = slot.len as usize;
        self.slots.push_back(slot);
        match entry {
            Some(e) => {
                self.cache.push_back(e);
                self.cached += len;
            }
            // Only the newest entries are cached: none before an uncached one.
            None => {
                self.cache.clear();
                self.cached = 0;
            }
        }
        while self.cached > self.max_bytes && !self.cache.is_empty() {
            let oldest = self.cache_start();
            self.cache.pop_front();
            self.cached -= self.len_at(oldest);
        }
    }

    /// Removes the entries at `since` and after.
    pub(crate) fn truncate(&mut self, since: u64) {
        let since = since.max(self.first);
        let cache_start = self.cache_start();
        for idx in since.max(cache_start)..self.end() {
            self.cached -= self.len_at(idx);
        }
        self.cache
            .truncate(since.saturating_sub(cache_start) as usize);
        self.slots.truncate((since - self.first) as usize);
    }

    /// Removes the entries up to and including `upto`.
    pub(crate) fn purge(&mut self, upto: u64) {
        if upto < self.first {
            return;
        }
        let cache_start = self.cache_start();
        let gone = (upto + 1).min(self.end());
        for idx in cache_start..gone {
            self.cached -= self.len_at(idx);
            self.cache.pop_front();
        }
        let n = ((upto + 1 - self.first) as usize).min(self.slots.len());
        self.slots.drain(..n);
        self.first = upto + 1;
    }

    pub(crate) fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.slots.back().map(|s| s.log_id)
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slots of the indexes in `r`, each with its entry when cached.
    pub(crate) fn range(
        &self,
        r: impl RangeBounds<u64>,
    ) -> impl Iterator<Item = (&Slot, Option<&Entry<TypeConfig>>)> {
        let from = match r.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let to = match r.end_bound() {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        };
        let (from, to) = (from.max(self.first), to.min(self.end()));
        let cache_start = self.cache_start();
        let (a, b) = if from < to {
            ((from - self.first) as usize, (to - self.first) as usize)
        } else {
            (0, 0)
        };
        self.slots.range(a..b).map(move |s| {
            let i = s.log_id.index;
            let e = (i >= cache_start)
                .then(|| self.cache.get((i - cache_start) as usize))
                .flatten();
            (s, e)
        })
    }

    pub(crate) fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.slots.iter()
    }

    /// Moves every slot's record to the offset `at` gives for its index (a rewritten file).
    pub(crate) fn relocate(&mut self, at: impl Fn(u64) -> Option<u64>) {
        for s in self.slots.iter_mut() {
            if let Some(a) = at(s.log_id.index) {
                s.at = a;
            }
        }
    }

    /// Record bytes held in memory.
    #[cfg(test)]
    pub(crate) fn cached_bytes(&self) -> usize {
        self.cached
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn push(ix: &mut LogIndex, i: u64, len: u32) {
        let log_id = LogId::new(CommittedLeaderId::new(1, 1), i);
        let entry = Entry {
            log_id,
            payload: EntryPayload::Blank,
        };
        let slot = Slot {
            log_id,
            at: i * 100,
            len,
        };
        ix.push(slot, Some(entry));
    }

    fn cached(ix: &LogIndex) -> Vec<u64> {
        ix.range(..)
            .filter_map(|(s, e)| {
                assert!(
                    e.is_none_or(|e| e.log_id == s.log_id),
                    "slot and entry agree"
                );
                e.map(|_| s.log_id.index)
            })
            .collect()
    }

    /// Memory holds at most the bound, always the newest entries; every entry keeps its
    /// slot, through truncations and purges.
    #[test]
    fn only_the_newest_entries_within_the_bound_stay_cached() {
        let mut ix = LogIndex::new(250);
        for i in 1..=10 {
            push(&mut ix, i, 100);
            assert!(ix.cached_bytes() <= 250);
        }
        assert_eq!(cached(&ix), vec![9, 10]);
        assert_eq!(ix.len(), 10);
        assert_eq!(ix.last_log_id().map(|l| l.index), Some(10));
        // A truncation drops cached entries with their bytes; new ones are cached.
        ix.truncate(10);
        assert_eq!(ix.cached_bytes(), 100);
        push(&mut ix, 10, 50);
        push(&mut ix, 11, 50);
        assert_eq!(cached(&ix), vec![9, 10, 11]);
        assert_eq!(ix.cached_bytes(), 200);
        // A truncation below the cached ones: what comes after is cached again.
        ix.truncate(5);
        assert_eq!((cached(&ix), ix.cached_bytes()), (vec![], 0));
        push(&mut ix, 5, 100);
        assert_eq!(cached(&ix), vec![5]);
        // A purge forgets its entries' bytes.
        ix.purge(5);
        assert_eq!((ix.len(), ix.cached_bytes()), (0, 0));
        // An entry bigger than the bound is not kept.
        push(&mut ix, 6, 300);
        assert_eq!((cached(&ix), ix.cached_bytes()), (vec![], 0));
        assert_eq!(
            ix.range(6..).map(|(s, _)| s.at).collect::<Vec<_>>(),
            vec![600]
        );
    }

    /// Ranges by index over a log whose first entries are purged, a purge past the last
    /// entry (a snapshot installed), and what a slot costs.
    #[test]
    fn ranges_follow_indexes_through_purges() {
        let mut ix = LogIndex::new(10_000);
        for i in 1..=10 {
            push(&mut ix, i, 10);
        }
        let idx = |ix: &LogIndex, r: std::ops::Range<u64>| {
            ix.range(r).map(|(s, _)| s.log_id.index).collect::<Vec<_>>()
        };
        assert_eq!(idx(&ix, 3..6), vec![3, 4, 5]);
        assert_eq!(idx(&ix, 0..3), vec![1, 2]);
        assert_eq!(idx(&ix, 9..20), vec![9, 10]);
        assert!(idx(&ix, 11..20).is_empty() && idx(&ix, 5..5).is_empty());
        assert_eq!(ix.range(..=2).count() + ix.range(3..).count(), 10);
        ix.purge(4);
        assert_eq!(idx(&ix, 0..7), vec![5, 6]);
        assert_eq!((ix.len(), ix.cached_bytes()), (6, 60));
        // Past the last entry: the log is empty and goes on after the purged index.
        ix.purge(20);
        assert_eq!(
            (ix.len(), ix.cached_bytes(), ix.last_log_id()),
            (0, 0, None)
        );
        push(&mut ix, 21, 10);
        assert_eq!(idx(&ix, 0..100), vec![21]);
        assert_eq!(cached(&ix), vec![21]);
        assert!(std::mem::size_of::<Slot>() <= 40);
    }
}
