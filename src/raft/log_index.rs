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
//! truncation removes a suffix, a purge a prefix, and eviction takes the oldest cached.

use std::collections::BTreeMap;
use std::ops::RangeBounds;

use openraft::{Entry, LogId};

use super::{NodeId, TypeConfig};

/// One entry of the log.
pub(crate) struct Slot {
    pub log_id: LogId<NodeId>,
    /// Offset of the entry's framed record in the log file.
    pub at: u64,
    /// Length of the record's payload (after the frame header).
    pub len: u32,
    /// The entry, while it is cached.
    pub entry: Option<Entry<TypeConfig>>,
}

/// The slots of a log, by index.
pub(crate) struct LogIndex {
    slots: BTreeMap<u64, Slot>,
    /// Record bytes of the cached entries.
    cached: usize,
    max_bytes: usize,
    /// No slot below this index is cached.
    cached_from: u64,
}

impl LogIndex {
    pub(crate) fn new(max_bytes: usize) -> LogIndex {
        LogIndex {
            slots: BTreeMap::new(),
            cached: 0,
            max_bytes,
            cached_from: 0,
        }
    }

    /// Adds the entry after the last one (a truncation makes room first), then drops the
    /// oldest cached entries over the bound.
    pub(crate) fn push(&mut self, slot: Slot) {
        let idx = slot.log_id.index;
        if slot.entry.is_some() {
            self.cached += slot.len as usize;
            self.cached_from = self.cached_from.min(idx);
        }
        if let Some(old) = self.slots.insert(idx, slot) {
            // Not expected (appends follow a truncation), but keep the count right.
            if old.entry.is_some() {
                self.cached -= old.len as usize;
            }
        }
        self.evict();
    }

    fn evict(&mut self) {
        if self.cached <= self.max_bytes {
            return;
        }
        for (&idx, s) in self.slots.range_mut(self.cached_from..) {
            if self.cached <= self.max_bytes {
                break;
            }
            if s.entry.take().is_some() {
                self.cached -= s.len as usize;
            }
            self.cached_from = idx + 1;
        }
    }

    /// Removes the entries at `since` and after.
    pub(crate) fn truncate(&mut self, since: u64) {
        let gone = self.slots.split_off(&since);
        self.forget(gone.values());
        self.cached_from = self.cached_from.min(since);
    }

    /// Removes the entries up to and including `upto`.
    pub(crate) fn purge(&mut self, upto: u64) {
        let kept = self.slots.split_off(&(upto + 1));
        let gone = std::mem::replace(&mut self.slots, kept);
        self.forget(gone.values());
    }

    fn forget<'a>(&mut self, gone: impl Iterator<Item = &'a Slot>) {
        for s in gone {
            if s.entry.is_some() {
                self.cached -= s.len as usize;
            }
        }
    }

    pub(crate) fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.slots.values().next_back().map(|s| s.log_id)
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn range(&self, r: impl RangeBounds<u64>) -> impl Iterator<Item = &Slot> {
        self.slots.range(r).map(|(_, s)| s)
    }

    pub(crate) fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.slots.values()
    }

    /// Moves every slot's record to the offset `at` gives for its index (a rewritten file).
    pub(crate) fn relocate(&mut self, at: impl Fn(u64) -> Option<u64>) {
        for (&idx, s) in self.slots.iter_mut() {
            if let Some(a) = at(idx) {
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

    fn slot(i: u64, len: u32) -> Slot {
        let log_id = LogId::new(CommittedLeaderId::new(1, 1), i);
        Slot {
            log_id,
            at: i * 100,
            len,
            entry: Some(Entry {
                log_id,
                payload: EntryPayload::Blank,
            }),
        }
    }

    fn cached(ix: &LogIndex) -> Vec<u64> {
        ix.slots()
            .filter(|s| s.entry.is_some())
            .map(|s| s.log_id.index)
            .collect()
    }

    /// Memory holds at most the bound, always the newest entries; every entry keeps its
    /// slot, through truncations and purges.
    #[test]
    fn only_the_newest_entries_within_the_bound_stay_cached() {
        let mut ix = LogIndex::new(250);
        for i in 1..=10 {
            ix.push(slot(i, 100));
            assert!(ix.cached_bytes() <= 250);
        }
        assert_eq!(cached(&ix), vec![9, 10]);
        assert_eq!(ix.len(), 10);
        assert_eq!(ix.last_log_id().map(|l| l.index), Some(10));
        // A truncation drops cached entries with their bytes; new ones are cached.
        ix.truncate(10);
        assert_eq!(ix.cached_bytes(), 100);
        ix.push(slot(10, 50));
        ix.push(slot(11, 50));
        assert_eq!(cached(&ix), vec![9, 10, 11]);
        assert_eq!(ix.cached_bytes(), 200);
        // A truncation below the cached ones: what comes after is cached again.
        ix.truncate(5);
        assert_eq!((cached(&ix), ix.cached_bytes()), (vec![], 0));
        ix.push(slot(5, 100));
        assert_eq!(cached(&ix), vec![5]);
        // A purge forgets its entries' bytes.
        ix.purge(5);
        assert_eq!((ix.len(), ix.cached_bytes()), (0, 0));
        // An entry bigger than the bound is not kept.
        ix.push(slot(6, 300));
        assert_eq!((cached(&ix), ix.cached_bytes()), (vec![], 0));
        assert_eq!(ix.range(6..).map(|s| s.at).collect::<Vec<_>>(), vec![600]);
    }
}
