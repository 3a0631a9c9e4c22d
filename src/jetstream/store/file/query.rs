//! Queries over the index: stream state, per-subject counts, pending counts, the first
//! sequence at or after a time.

use super::{norm, Inner};
use crate::jetstream::store::StreamState;
use crate::subject::pattern_matches;
use std::collections::BTreeMap;

impl Inner {
    pub(super) fn state(&self) -> StreamState {
        if self.closed {
            return StreamState::default();
        }
        let first_seq = self.first_seq();
        let first_ts = self.index.first_key_value().map_or(0, |(_, s)| s.ts);
        let num_deleted = if self.msgs > 0 {
            (self.last_seq - first_seq + 1).saturating_sub(self.msgs)
        } else {
            0
        };
        StreamState {
            msgs: self.msgs,
            bytes: self.bytes,
            first_seq,
            first_ts,
            last_seq: self.last_seq,
            last_ts: self.last_ts,
            num_deleted,
            num_subjects: self.subjects.len() as u64,
        }
    }

    pub(super) fn subjects(&self, filter: Option<&str>) -> BTreeMap<String, u64> {
        let f = norm(filter);
        self.subjects
            .infos
            .iter()
            .flatten()
            .filter(|i| f.is_none_or(|f| pattern_matches(f.as_bytes(), i.name.as_bytes())))
            .map(|i| (i.name.to_string(), i.count))
            .collect()
    }

    pub(super) fn num_pending(
        &mut self,
        filter: Option<&str>,
        start: u64,
        last_per_subject: bool,
    ) -> u64 {
        if self.closed || self.msgs == 0 {
            return 0;
        }
        let first = self.first_seq();
        if norm(filter).is_none() && !last_per_subject {
            // No gaps: the count is arithmetic (the common case of a consumer walking on).
            if start > self.last_seq {
                return 0;
            }
            if start <= first {
                return self.msgs;
            }
            if self.msgs == self.last_seq - first + 1 {
                return self.last_seq - start + 1;
            }
        }
        let (mask, n) = match norm(filter) {
            None => (vec![true; self.subjects.infos.len()], usize::MAX),
            Some(f) => self.subjects.mask(f),
        };
        if n == 0 {
            return 0;
        }
        if last_per_subject {
            let mut count = 0;
            for (id, m) in mask.iter().enumerate() {
                if *m && self.last_of(id as u32).is_some_and(|l| l >= start) {
                    count += 1;
                }
            }
            return count;
        }
        if start <= first {
            if n == usize::MAX {
                return self.msgs;
            }
            return mask
                .iter()
                .enumerate()
                .filter(|(_, m)| **m)
                .filter_map(|(id, _)| self.subjects.get(id as u32))
                .map(|i| i.count)
                .sum();
        }
        if n == usize::MAX {
            // Count whichever side of `start` is shorter.
            if start - first < self.last_seq.saturating_sub(start) {
                return self.msgs - self.index.range(..start).count() as u64;
            }
            return self.index.range(start..).count() as u64;
        }
        if n == 1 {
            // One subject: only its own span of sequences.
            if let Some(id) = mask.iter().position(|m| *m) {
                let id = id as u32;
                let (Some(f), Some(l)) = (self.first_of(id), self.last_of(id)) else {
                    return 0;
                };
                if start > l {
                    return 0;
                }
                return self
                    .index
                    .range(start.max(f)..=l)
                    .filter(|(_, s)| s.subj == id)
                    .count() as u64;
            }
        }
        self.index
            .range(start..)
            .filter(|(_, s)| mask[s.subj as usize])
            .count() as u64
    }

    pub(super) fn seq_for_time(&self, ts: i64) -> u64 {
        let from = self
            .segs
            .values()
            .find(|s| s.first_seq > 0 && s.max_ts >= ts)
            .map(|s| s.first_seq);
        from.and_then(|f| {
            self.index
                .range(f..)
                .find(|(_, s)| s.ts >= ts)
                .map(|(k, _)| *k)
        })
        .unwrap_or(self.last_seq + 1)
    }
}
