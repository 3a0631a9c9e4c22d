//! Per-subject state: subject interning with counts and first/last sequences (`Subjects`),
//! and the exact first/last sequence of a subject when its bounds went stale.

use super::Inner;
use crate::subject::{has_wildcard, pattern_matches};
use std::collections::HashMap;
use std::sync::Arc;

pub(super) struct SubjInfo {
    pub(super) name: Arc<str>,
    pub(super) count: u64,
    /// Lower bound of the first sequence when `first_stale`, exact otherwise.
    first: u64,
    /// Upper bound of the last sequence when `last_stale`, exact otherwise.
    last: u64,
    first_stale: bool,
    last_stale: bool,
}

/// Subject interning with per-subject counts.
#[derive(Default)]
pub(super) struct Subjects {
    ids: HashMap<Arc<str>, u32>,
    pub(super) infos: Vec<Option<SubjInfo>>,
    free: Vec<u32>,
}

impl Subjects {
    pub(super) fn add(&mut self, subject: &str, seq: u64) -> u32 {
        if let Some(&id) = self.ids.get(subject) {
            if let Some(Some(i)) = self.infos.get_mut(id as usize) {
                i.count += 1;
                i.last = seq;
                i.last_stale = false;
                return id;
            }
        }
        let name: Arc<str> = Arc::from(subject);
        let info = SubjInfo {
            name: name.clone(),
            count: 1,
            first: seq,
            last: seq,
            first_stale: false,
            last_stale: false,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.infos[id as usize] = Some(info);
                id
            }
            None => {
                self.infos.push(Some(info));
                (self.infos.len() - 1) as u32
            }
        };
        self.ids.insert(name, id);
        id
    }

    pub(super) fn remove(&mut self, id: u32, seq: u64) {
        let Some(slot) = self.infos.get_mut(id as usize) else {
            return;
        };
        let Some(info) = slot.as_mut() else {
            return;
        };
        info.count = info.count.saturating_sub(1);
        if info.count == 0 {
            self.ids.remove(&info.name);
            *slot = None;
            self.free.push(id);
            return;
        }
        if seq == info.first {
            info.first = seq + 1;
            info.first_stale = true;
        }
        if seq == info.last {
            info.last = seq - 1;
            info.last_stale = true;
        }
    }

    pub(super) fn get(&self, id: u32) -> Option<&SubjInfo> {
        self.infos.get(id as usize).and_then(Option::as_ref)
    }

    pub(super) fn id(&self, subject: &str) -> Option<u32> {
        self.ids.get(subject).copied()
    }

    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Subject ids matching a (normalised, non-`None`) filter, as a mask by id.
    pub(super) fn mask(&self, filter: &str) -> (Vec<bool>, usize) {
        let mut mask = vec![false; self.infos.len()];
        let mut n = 0;
        if !has_wildcard(filter.as_bytes()) {
            if let Some(id) = self.id(filter) {
                mask[id as usize] = true;
                n = 1;
            }
            return (mask, n);
        }
        for (id, info) in self.infos.iter().enumerate() {
            if let Some(info) = info {
                if pattern_matches(filter.as_bytes(), info.name.as_bytes()) {
                    mask[id] = true;
                    n += 1;
                }
            }
        }
        (mask, n)
    }

    pub(super) fn clear(&mut self) {
        *self = Subjects::default();
    }
}

impl Inner {
    /// The exact first sequence of subject `id`.
    pub(super) fn first_of(&mut self, id: u32) -> Option<u64> {
        let info = self.subjects.get(id)?;
        if !info.first_stale {
            return Some(info.first);
        }
        let (from, to) = (info.first, info.last);
        if from > to {
            return None;
        }
        let seq = self
            .index
            .range(from..=to)
            .find(|(_, s)| s.subj == id)
            .map(|(k, _)| *k)?;
        if let Some(Some(i)) = self.subjects.infos.get_mut(id as usize) {
            i.first = seq;
            i.first_stale = false;
        }
        Some(seq)
    }

    /// The exact last sequence of subject `id`.
    pub(super) fn last_of(&mut self, id: u32) -> Option<u64> {
        let info = self.subjects.get(id)?;
        if !info.last_stale {
            return Some(info.last);
        }
        let (from, to) = (info.first, info.last);
        if from > to {
            return None;
        }
        let seq = self
            .index
            .range(from..=to)
            .rev()
            .find(|(_, s)| s.subj == id)
            .map(|(k, _)| *k)?;
        if let Some(Some(i)) = self.subjects.infos.get_mut(id as usize) {
            i.last = seq;
            i.last_stale = false;
        }
        Some(seq)
    }
}
