//! The memory store's indexes: its messages in sequence order (`Msgs`) and one subject's
//! sequences (`SeqList`).

use crate::jetstream::store::StoredMsg;
use std::collections::VecDeque;

/// One subject's sequences, ascending. Sequences only grow, so storing appends and the usual
/// removals (limits, acks in order) take the front: both O(1), with no node per message as a
/// `BTreeSet` would allocate. A removal in the middle is a binary search and a shift.
#[derive(Default)]
pub(super) struct SeqList(VecDeque<u64>);

impl SeqList {
    pub(super) fn push(&mut self, seq: u64) {
        match self.0.back() {
            Some(&last) if last >= seq => {
                let i = self.0.partition_point(|&s| s < seq);
                if self.0.get(i) != Some(&seq) {
                    self.0.insert(i, seq);
                }
            }
            _ => self.0.push_back(seq),
        }
    }

    pub(super) fn remove(&mut self, seq: u64) {
        if self.0.front() == Some(&seq) {
            self.0.pop_front();
        } else if let Ok(i) = self.0.binary_search(&seq) {
            self.0.remove(i);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn last(&self) -> Option<u64> {
        self.0.back().copied()
    }

    /// The sequences from `start` on.
    pub(super) fn from(&self, start: u64) -> impl Iterator<Item = u64> + '_ {
        self.0
            .range(self.0.partition_point(|&s| s < start)..)
            .copied()
    }
}

/// The messages by sequence: `(seq, message)` ascending in a `VecDeque`, a removed one left as
/// `None` until it reaches an end or the dead outnumber the live (then they are dropped in
/// one pass, so at most twice the live entries are held). Storing appends and the usual
/// removals (limits, acks in order) take the front, both O(1) with no node per message; a
/// lookup is a binary search over contiguous entries. (A `BTreeMap` spent 8 % of the memory
/// publish path moving 112-byte values between nodes.)
#[derive(Default)]
pub(super) struct Msgs {
    v: VecDeque<(u64, Option<StoredMsg>)>,
    live: usize,
}

impl Msgs {
    pub(super) fn len(&self) -> usize {
        self.live
    }

    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub(super) fn insert(&mut self, seq: u64, m: StoredMsg) {
        match self.v.back() {
            Some(&(last, _)) if last >= seq => {
                let i = self.v.partition_point(|e| e.0 < seq);
                match self.v.get_mut(i) {
                    Some(e) if e.0 == seq => {
                        if e.1.replace(m).is_none() {
                            self.live += 1;
                        }
                        return;
                    }
                    _ => self.v.insert(i, (seq, Some(m))),
                }
            }
            _ => self.v.push_back((seq, Some(m))),
        }
        self.live += 1;
    }

    /// Where `seq` is (`Ok`) or would go (`Err`). Without gaps before it, its offset from
    /// the first sequence: no search.
    fn index(&self, seq: u64) -> Result<usize, usize> {
        match self.v.front() {
            None => return Err(0),
            Some(&(first, _)) if seq < first => return Err(0),
            Some(&(first, _)) => {
                let guess = usize::try_from(seq - first).unwrap_or(usize::MAX);
                if self.v.get(guess).is_some_and(|e| e.0 == seq) {
                    return Ok(guess);
                }
            }
        }
        self.v.binary_search_by_key(&seq, |e| e.0)
    }

    pub(super) fn get(&self, seq: u64) -> Option<&StoredMsg> {
        let i = self.index(seq).ok()?;
        self.v[i].1.as_ref()
    }

    pub(super) fn remove(&mut self, seq: u64) -> Option<StoredMsg> {
        let i = self.index(seq).ok()?;
        let m = self.v[i].1.take()?;
        self.live -= 1;
        while self.v.front().is_some_and(|e| e.1.is_none()) {
            self.v.pop_front();
        }
        while self.v.back().is_some_and(|e| e.1.is_none()) {
            self.v.pop_back();
        }
        if self.v.len() - self.live > self.live.max(32) {
            self.v.retain(|e| e.1.is_some());
        }
        Some(m)
    }

    /// The first message (the front entry is never a removed one).
    pub(super) fn first(&self) -> Option<&StoredMsg> {
        self.v.front().and_then(|e| e.1.as_ref())
    }

    pub(super) fn iter(&self) -> impl DoubleEndedIterator<Item = &StoredMsg> + '_ {
        self.v.iter().filter_map(|e| e.1.as_ref())
    }

    /// The messages from sequence `start` on.
    pub(super) fn from(&self, start: u64) -> impl Iterator<Item = &StoredMsg> + '_ {
        let (Ok(i) | Err(i)) = self.index(start);
        self.v.range(i..).filter_map(|e| e.1.as_ref())
    }

    /// How many messages are below sequence `start`.
    pub(super) fn count_below(&self, start: u64) -> usize {
        let (Ok(i) | Err(i)) = self.index(start);
        self.v.range(..i).filter(|e| e.1.is_some()).count()
    }

    pub(super) fn clear(&mut self) {
        self.v.clear();
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// `Msgs` against a `BTreeMap` model through random appends (with gaps), removals
    /// anywhere, reinsertions and lookups; the held entries stay within twice the live ones.
    #[test]
    fn msgs_behave_as_a_map_and_stay_compact() {
        let msg = |seq: u64| StoredMsg {
            subject: format!("s.{}", seq % 7),
            seq,
            ts: seq as i64,
            header: None,
            data: bytes::Bytes::new(),
        };
        let (mut m, mut model) = (Msgs::default(), BTreeMap::new());
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut next = 1;
        for _ in 0..20_000 {
            match rnd(10) {
                0..=4 => {
                    next += 1 + rnd(3) * rnd(2); // sometimes a gap
                    m.insert(next, msg(next));
                    model.insert(next, ());
                }
                5..=7 => {
                    let s = if rnd(2) == 0 {
                        model.keys().next().copied().unwrap_or(0)
                    } else {
                        rnd(next + 2)
                    };
                    assert_eq!(m.remove(s).map(|x| x.seq), model.remove(&s).map(|_| s));
                }
                8 => {
                    // A reinsertion below the last (never done by the store, kept working).
                    let s = rnd(next + 1);
                    if let std::collections::btree_map::Entry::Vacant(e) = model.entry(s) {
                        e.insert(());
                        m.insert(s, msg(s));
                    }
                }
                _ => {
                    let s = rnd(next + 2);
                    assert_eq!(m.get(s).map(|x| x.seq), model.get(&s).map(|_| s));
                    let from: Vec<u64> = m.from(s).map(|x| x.seq).collect();
                    let want: Vec<u64> = model.range(s..).map(|(k, _)| *k).collect();
                    assert_eq!(from, want);
                    assert_eq!(m.count_below(s), model.range(..s).count());
                }
            }
            assert_eq!(m.len(), model.len());
            assert_eq!(m.first().map(|x| x.seq), model.keys().next().copied());
            assert_eq!(
                m.iter().next_back().map(|x| x.seq),
                model.keys().next_back().copied()
            );
            assert!(
                m.v.len() <= 2 * m.len() + 33,
                "{} held for {}",
                m.v.len(),
                m.len()
            );
        }
        m.clear();
        assert!(m.is_empty() && m.first().is_none());
    }

    #[test]
    fn seq_list_keeps_order_through_any_push_and_remove() {
        let mut l = SeqList::default();
        for s in [3, 5, 9, 4, 1, 9] {
            l.push(s);
        }
        assert_eq!(l.from(0).collect::<Vec<_>>(), [1, 3, 4, 5, 9]);
        l.remove(4); // middle
        l.remove(1); // front
        l.remove(7); // absent
        assert_eq!(l.from(0).collect::<Vec<_>>(), [3, 5, 9]);
        assert_eq!(l.from(4).collect::<Vec<_>>(), [5, 9]);
        assert_eq!(l.from(10).count(), 0);
        assert_eq!((l.len(), l.last()), (3, Some(9)));
    }
}
