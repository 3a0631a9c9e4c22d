//! `MemStore`: a stream's messages in memory (streams with `storage: memory`, and — until the
//! integrator swaps `open::open_file` to the file store — file streams too).

use super::{Discard, MsgStore, Purge, StoreError, StoreLimits, StoredMsg, StreamState};
use crate::subject::{has_wildcard, pattern_matches};
use crate::util::FastMap;
use index::{Msgs, SeqList};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

mod index;

#[derive(Default)]
struct Inner {
    msgs: Msgs,
    /// Subject → the sequences of its messages.
    by_subject: FastMap<String, SeqList>,
    bytes: u64,
    /// First sequence (0 before any message; last + 1 when emptied).
    first: u64,
    last: u64,
    last_ts: i64,
    limits: StoreLimits,
    closed: bool,
}

/// A stream's messages in memory.
pub struct MemStore {
    inner: Mutex<Inner>,
}

impl MemStore {
    pub fn new(limits: StoreLimits) -> MemStore {
        MemStore {
            inner: Mutex::new(Inner {
                limits,
                ..Default::default()
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn matches(filter: Option<&str>, subject: &str) -> bool {
    match filter {
        None => true,
        Some(f) if f.is_empty() || f == ">" => true,
        Some(f) => pattern_matches(f.as_bytes(), subject.as_bytes()),
    }
}

/// A filter naming exactly one subject (no wildcard).
fn literal(filter: Option<&str>) -> Option<&str> {
    filter.filter(|f| !f.is_empty() && !has_wildcard(f.as_bytes()))
}

impl Inner {
    fn remove_seq(&mut self, seq: u64) -> bool {
        let Some(m) = self.msgs.remove(seq) else {
            return false;
        };
        self.bytes = self.bytes.saturating_sub(m.size());
        if let Some(set) = self.by_subject.get_mut(&m.subject) {
            set.remove(seq);
            if set.is_empty() {
                self.by_subject.remove(&m.subject);
            }
        }
        self.fix_first();
        true
    }

    fn fix_first(&mut self) {
        self.first = match self.msgs.first() {
            Some(m) => m.seq,
            None => self.last + 1,
        };
    }

    fn remove_first(&mut self) -> bool {
        match self.msgs.first().map(|m| m.seq) {
            Some(s) => self.remove_seq(s),
            None => false,
        }
    }

    /// Apply the limits: to every subject (`None`, limits changed) or to the one just
    /// stored (`Some`: only its count can have grown).
    fn enforce(&mut self, stored: Option<&str>) {
        let l = self.limits.clone();
        if l.max_msgs_per_subject > 0 {
            let over_of = |s: &SeqList| {
                let n = s.len().saturating_sub(l.max_msgs_per_subject as usize);
                s.from(0).take(n).collect::<Vec<_>>()
            };
            let over: Vec<u64> = match stored {
                Some(subject) => self
                    .by_subject
                    .get(subject)
                    .map(over_of)
                    .unwrap_or_default(),
                None => self.by_subject.values().flat_map(over_of).collect(),
            };
            for s in over {
                self.remove_seq(s);
            }
        }
        if l.max_msgs > 0 {
            while self.msgs.len() as i64 > l.max_msgs && self.remove_first() {}
        }
        if l.max_bytes > 0 {
            while self.bytes as i64 > l.max_bytes && self.remove_first() {}
        }
    }

    /// Store one message (`size` as [`super::msg_size`] counts it); `bufs` gives its header
    /// and payload once it is certain to be kept.
    fn append(
        &mut self,
        subject: &str,
        size: u64,
        ts: i64,
        bufs: impl FnOnce() -> (Option<bytes::Bytes>, bytes::Bytes),
    ) -> Result<u64, StoreError> {
        if self.closed {
            return Err(StoreError::Closed);
        }
        if self.limits.discard == Discard::New {
            if self.limits.max_msgs > 0 && self.msgs.len() as i64 >= self.limits.max_msgs {
                return Err(StoreError::MaxMsgs);
            }
            if self.limits.max_bytes > 0 && (self.bytes + size) as i64 > self.limits.max_bytes {
                return Err(StoreError::MaxBytes);
            }
        }
        let seq = self.last + 1;
        let (header, data) = bufs();
        let m = StoredMsg {
            subject: subject.to_string(),
            seq,
            ts,
            header,
            data,
        };
        self.msgs.insert(seq, m);
        match self.by_subject.get_mut(subject) {
            Some(set) => set.push(seq),
            None => {
                let mut set = SeqList::default();
                set.push(seq);
                self.by_subject.insert(subject.to_string(), set);
            }
        }
        self.bytes += size;
        self.last = seq;
        self.last_ts = ts;
        if self.first == 0 || self.msgs.len() == 1 {
            self.first = seq;
        }
        self.enforce(Some(subject));
        Ok(seq)
    }

    fn seqs_matching(&self, filter: Option<&str>, from: u64) -> Vec<u64> {
        if let Some(s) = literal(filter) {
            return self
                .by_subject
                .get(s)
                .map(|set| set.from(from).collect())
                .unwrap_or_default();
        }
        self.msgs
            .from(from)
            .filter(|m| matches(filter, &m.subject))
            .map(|m| m.seq)
            .collect()
    }
}

impl MsgStore for MemStore {
    fn store(
        &self,
        subject: &str,
        header: Option<&[u8]>,
        data: &[u8],
        ts: i64,
    ) -> Result<u64, StoreError> {
        let size = super::msg_size(subject, header, data);
        self.lock().append(subject, size, ts, || {
            (
                header.map(bytes::Bytes::copy_from_slice),
                bytes::Bytes::copy_from_slice(data),
            )
        })
    }

    fn store_owned(
        &self,
        subject: &str,
        header: Option<bytes::Bytes>,
        data: bytes::Bytes,
        ts: i64,
    ) -> Result<u64, StoreError> {
        let size = super::msg_size(subject, header.as_deref(), &data);
        self.lock().append(subject, size, ts, || (header, data))
    }

    fn load(&self, seq: u64) -> Result<StoredMsg, StoreError> {
        let g = self.lock();
        if g.closed {
            return Err(StoreError::Closed);
        }
        g.msgs.get(seq).cloned().ok_or(StoreError::NotFound)
    }

    fn load_next(&self, filter: Option<&str>, start: u64) -> Result<StoredMsg, StoreError> {
        let g = self.lock();
        if let Some(s) = literal(filter) {
            let seq = g
                .by_subject
                .get(s)
                .and_then(|set| set.from(start).next())
                .ok_or(StoreError::NotFound)?;
            return g.msgs.get(seq).cloned().ok_or(StoreError::NotFound);
        }
        let found = g
            .msgs
            .from(start)
            .find(|m| matches(filter, &m.subject))
            .cloned();
        found.ok_or(StoreError::NotFound)
    }

    fn load_last(&self, filter: Option<&str>) -> Result<StoredMsg, StoreError> {
        let g = self.lock();
        if let Some(s) = literal(filter) {
            let seq = g
                .by_subject
                .get(s)
                .and_then(SeqList::last)
                .ok_or(StoreError::NotFound)?;
            return g.msgs.get(seq).cloned().ok_or(StoreError::NotFound);
        }
        let found = g
            .msgs
            .iter()
            .rev()
            .find(|m| matches(filter, &m.subject))
            .cloned();
        found.ok_or(StoreError::NotFound)
    }

    fn remove(&self, seq: u64, _erase: bool) -> Result<bool, StoreError> {
        let mut g = self.lock();
        if g.closed {
            return Err(StoreError::Closed);
        }
        Ok(g.remove_seq(seq))
    }

    fn purge(&self, p: &Purge) -> Result<u64, StoreError> {
        let mut g = self.lock();
        if g.closed {
            return Err(StoreError::Closed);
        }
        let filter = p.filter.as_deref().filter(|f| !f.is_empty() && *f != ">");
        if filter.is_none() && p.seq.is_none() && p.keep.is_none() {
            let n = g.msgs.len() as u64;
            g.msgs.clear();
            g.by_subject.clear();
            g.bytes = 0;
            g.first = g.last + 1;
            return Ok(n);
        }
        let mut seqs = g.seqs_matching(filter, 0);
        if let Some(upto) = p.seq {
            seqs.retain(|&s| s < upto);
        }
        if let Some(keep) = p.keep {
            let keep = keep as usize;
            let n = seqs.len().saturating_sub(keep);
            seqs.truncate(n);
        }
        let mut n = 0;
        for s in seqs {
            if g.remove_seq(s) {
                n += 1;
            }
        }
        // Compaction without a filter moves the first sequence up even over a gap.
        if filter.is_none() {
            if let Some(upto) = p.seq {
                if g.msgs.is_empty() && upto > g.last {
                    g.last = upto - 1;
                    g.first = upto;
                }
            }
        }
        Ok(n)
    }

    fn state(&self) -> StreamState {
        let g = self.lock();
        let first_ts = g.msgs.first().map_or(0, |m| m.ts);
        let span = if g.msgs.is_empty() {
            0
        } else {
            g.last - g.first + 1
        };
        StreamState {
            msgs: g.msgs.len() as u64,
            bytes: g.bytes,
            first_seq: g.first,
            first_ts,
            last_seq: g.last,
            last_ts: g.last_ts,
            num_deleted: span.saturating_sub(g.msgs.len() as u64),
            num_subjects: g.by_subject.len() as u64,
        }
    }

    fn subjects(&self, filter: Option<&str>) -> BTreeMap<String, u64> {
        let g = self.lock();
        g.by_subject
            .iter()
            .filter(|(s, _)| matches(filter, s))
            .map(|(s, set)| (s.clone(), set.len() as u64))
            .collect()
    }

    fn num_pending(&self, filter: Option<&str>, start: u64, last_per_subject: bool) -> u64 {
        let g = self.lock();
        if last_per_subject {
            return g
                .by_subject
                .iter()
                .filter(|(s, set)| matches(filter, s) && set.last().is_some_and(|l| l >= start))
                .count() as u64;
        }
        if filter.is_none() || filter == Some(">") || filter == Some("") {
            let (n, first, last) = (g.msgs.len() as u64, g.first, g.last);
            if n == 0 || start > last {
                return 0;
            }
            if start <= first {
                return n;
            }
            // No gaps: the count is arithmetic (the common case of a consumer walking on).
            if n == last - first + 1 {
                return last - start + 1;
            }
            if start - first < last - start {
                return n - g.msgs.count_below(start) as u64;
            }
            return g.msgs.from(start).count() as u64;
        }
        g.seqs_matching(filter, start).len() as u64
    }

    fn seq_for_time(&self, ts: i64) -> u64 {
        let g = self.lock();
        let found = g.msgs.iter().find(|m| m.ts >= ts).map(|m| m.seq);
        found.unwrap_or(g.last + 1)
    }

    fn update_limits(&self, limits: StoreLimits) -> Result<(), StoreError> {
        let mut g = self.lock();
        g.limits = limits;
        g.enforce(None);
        Ok(())
    }

    fn expire(&self, now: i64) -> u64 {
        let mut g = self.lock();
        let age = g.limits.max_age;
        if age.is_zero() {
            return 0;
        }
        let cutoff = now.saturating_sub(age.as_nanos().min(i64::MAX as u128) as i64);
        let mut n = 0;
        while let Some(m) = g.msgs.first() {
            if m.ts > cutoff {
                break;
            }
            let s = m.seq;
            g.remove_seq(s);
            n += 1;
        }
        n
    }

    /// Nothing to write; a deleted store answers `Closed`, as the file store does.
    fn flush(&self) -> Result<(), StoreError> {
        if self.lock().closed {
            return Err(StoreError::Closed);
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.flush()
    }

    fn delete(&self) -> Result<(), StoreError> {
        let mut g = self.lock();
        g.msgs.clear();
        g.by_subject.clear();
        g.bytes = 0;
        g.closed = true;
        Ok(())
    }

    fn skip_to(&self, next: u64, last_ts: i64) -> Result<(), StoreError> {
        let mut g = self.lock();
        if g.closed {
            return Err(StoreError::Closed);
        }
        if next > g.last + 1 {
            g.last = next - 1;
            g.last_ts = last_ts;
            if g.msgs.is_empty() {
                g.first = next;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn st(l: StoreLimits) -> MemStore {
        MemStore::new(l)
    }

    #[test]
    fn per_subject_limit_after_interior_deletes() {
        let s = st(StoreLimits {
            max_msgs_per_subject: 2,
            ..Default::default()
        });
        for i in 0..6 {
            s.store(if i % 2 == 0 { "k.a" } else { "k.b" }, None, b"v", i)
                .unwrap();
        }
        // k.a holds 3 and 5, k.b holds 4 and 6; delete 5 then add k.a twice more.
        assert!(s.remove(5, false).unwrap());
        s.store("k.a", None, b"v", 7).unwrap();
        s.store("k.a", None, b"v", 8).unwrap();
        assert_eq!(s.subjects(Some("k.a")).get("k.a"), Some(&2));
        assert_eq!(s.load_next(Some("k.a"), 0).unwrap().seq, 7);
        assert_eq!(s.load_last(Some("k.b")).unwrap().seq, 6);
        assert_eq!(s.num_pending(Some("k.a"), 8, false), 1);
    }

    #[test]
    fn append_load_and_state() {
        let s = st(StoreLimits::default());
        assert_eq!(s.state().first_seq, 0);
        assert_eq!(s.store("a.1", None, b"x", 10).unwrap(), 1);
        assert_eq!(
            s.store("a.2", Some(b"NATS/1.0\r\n\r\n"), b"y", 20).unwrap(),
            2
        );
        assert_eq!(s.store("b", None, b"z", 30).unwrap(), 3);
        let st = s.state();
        assert_eq!(
            (st.msgs, st.first_seq, st.last_seq, st.num_subjects),
            (3, 1, 3, 3)
        );
        assert_eq!(s.load(2).unwrap().data, &b"y"[..]);
        assert_eq!(s.load_next(Some("a.*"), 2).unwrap().seq, 2);
        assert_eq!(s.load_next(Some("b"), 1).unwrap().seq, 3);
        assert_eq!(s.load_last(Some("a.>")).unwrap().seq, 2);
        assert_eq!(s.load_next(Some("c"), 1), Err(StoreError::NotFound));
        assert_eq!(s.num_pending(Some("a.*"), 1, false), 2);
        assert_eq!(s.num_pending(None, 2, false), 2);
        assert_eq!(s.seq_for_time(15), 2);
        assert_eq!(s.seq_for_time(99), 4);
        assert!(s.remove(2, false).unwrap());
        assert!(!s.remove(2, false).unwrap());
        assert_eq!(s.state().num_deleted, 1);
        assert!(s.remove(1, false).unwrap());
        assert_eq!(s.state().first_seq, 3);
    }

    #[test]
    fn limits_and_discard() {
        let s = st(StoreLimits {
            max_msgs: 2,
            ..Default::default()
        });
        for i in 0..5 {
            s.store("a", None, b"x", i).unwrap();
        }
        assert_eq!((s.state().msgs, s.state().first_seq), (2, 4));
        let s = st(StoreLimits {
            max_msgs: 1,
            discard: Discard::New,
            ..Default::default()
        });
        s.store("a", None, b"x", 0).unwrap();
        assert_eq!(s.store("a", None, b"x", 0), Err(StoreError::MaxMsgs));
        let s = st(StoreLimits {
            max_bytes: 40,
            discard: Discard::New,
            ..Default::default()
        });
        s.store("a", None, b"x", 0).unwrap();
        assert_eq!(s.store("a", None, &[0; 30], 0), Err(StoreError::MaxBytes));
        let s = st(StoreLimits {
            max_msgs_per_subject: 2,
            ..Default::default()
        });
        for i in 0..4 {
            s.store("k.1", None, b"x", i).unwrap();
            s.store("k.2", None, b"x", i).unwrap();
        }
        assert_eq!(s.subjects(None).values().sum::<u64>(), 4);
        assert_eq!(s.num_pending(Some("k.*"), 0, true), 2);
        s.update_limits(StoreLimits {
            max_msgs_per_subject: 1,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(s.state().msgs, 2);
    }

    #[test]
    fn purge_variants_and_expiry() {
        let s = st(StoreLimits {
            max_age: Duration::from_nanos(100),
            ..Default::default()
        });
        for i in 0..10 {
            s.store(if i % 2 == 0 { "e" } else { "o" }, None, b"x", i * 10)
                .unwrap();
        }
        assert_eq!(
            s.purge(&Purge {
                filter: Some("e".into()),
                keep: Some(2),
                ..Default::default()
            })
            .unwrap(),
            3
        );
        assert_eq!(
            s.purge(&Purge {
                seq: Some(4),
                ..Default::default()
            })
            .unwrap(),
            1
        );
        assert_eq!(s.expire(150), 2);
        assert_eq!(s.purge(&Purge::default()).unwrap(), 4);
        let st = s.state();
        assert_eq!((st.msgs, st.first_seq, st.last_seq), (0, 11, 10));
        s.delete().unwrap();
        assert_eq!(s.store("a", None, b"", 0), Err(StoreError::Closed));
    }
}
