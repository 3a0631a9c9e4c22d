//! The trie nodes of a [`super::Sublist`], laid out for memory: a node is 32 bytes (its plain
//! entries, one kept inline, and a pointer to the rest), and only a node with children or queue
//! entries allocates the rest. A literal child lives in its parent's table under a
//! [`SmallBytes`] token (inline up to 22 bytes). So a leaf with one subscriber, the common
//! case, costs one 56-byte table slot and no allocation of its own.

use super::{QueueGroup, SubEntry, SublistResult};
use crate::subject::{self, FWC, PWC, SEP};
use crate::util::small::SmallBytes;
use bytes::Bytes;
use hashbrown::hash_map::EntryRef;

/// The plain entries of a node: none or one without allocating, more in a vector.
pub(super) enum Plain<T> {
    Zero,
    One(T),
    Many(Vec<T>),
}

impl<T: SubEntry> Plain<T> {
    fn as_slice(&self) -> &[T] {
        match self {
            Plain::Zero => &[],
            Plain::One(e) => std::slice::from_ref(e),
            Plain::Many(v) => v,
        }
    }

    fn push(&mut self, entry: T) {
        match std::mem::replace(self, Plain::Zero) {
            Plain::Zero => *self = Plain::One(entry),
            Plain::One(first) => *self = Plain::Many(vec![first, entry]),
            Plain::Many(mut v) => {
                v.push(entry);
                *self = Plain::Many(v);
            }
        }
    }

    /// Take out one entry [`SubEntry::same`] as `entry`.
    fn remove(&mut self, entry: &T) -> bool {
        match self {
            Plain::Zero => false,
            Plain::One(e) => {
                if e.same(entry) {
                    *self = Plain::Zero;
                    true
                } else {
                    false
                }
            }
            Plain::Many(v) => match v.iter().position(|e| e.same(entry)) {
                Some(j) => {
                    v.swap_remove(j);
                    match v.len() {
                        0 => *self = Plain::Zero,
                        1 => *self = Plain::One(v.swap_remove(0)),
                        _ => {}
                    }
                    true
                }
                None => false,
            },
        }
    }
}

/// What only inner nodes and queue nodes have.
struct More<T> {
    qsubs: Vec<(Bytes, Vec<T>)>,
    /// hashbrown for `entry_ref`: one lookup per token on insert.
    literal: hashbrown::HashMap<SmallBytes, Node<T>, foldhash::fast::RandomState>,
    pwc: Option<Box<Node<T>>>,
    fwc: Option<Box<Node<T>>>,
}

impl<T> Default for More<T> {
    fn default() -> Self {
        More {
            qsubs: Vec::new(),
            literal: hashbrown::HashMap::default(),
            pwc: None,
            fwc: None,
        }
    }
}

impl<T> More<T> {
    fn is_empty(&self) -> bool {
        self.qsubs.is_empty() && self.literal.is_empty() && self.pwc.is_none() && self.fwc.is_none()
    }
}

/// One trie node: the entries whose pattern ends here, and the next token level.
pub(super) struct Node<T> {
    psubs: Plain<T>,
    more: Option<Box<More<T>>>,
}

impl<T> Default for Node<T> {
    fn default() -> Self {
        Node {
            psubs: Plain::Zero,
            more: None,
        }
    }
}

/// Split off the first token: `(token, rest)`, `rest` is `None` after the last token.
fn split_token(s: &[u8]) -> (&[u8], Option<&[u8]>) {
    match s.iter().position(|&b| b == SEP) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    }
}

impl<T: SubEntry> Node<T> {
    pub(super) fn is_empty(&self) -> bool {
        matches!(self.psubs, Plain::Zero) && self.more.is_none()
    }

    fn more_mut(&mut self) -> &mut More<T> {
        self.more.get_or_insert_with(Box::default)
    }

    /// Drop the rest of this node once it holds nothing.
    fn compact(&mut self) {
        if self.more.as_ref().is_some_and(|m| m.is_empty()) {
            self.more = None;
        }
    }

    /// Add `entry` under `subject` (already validated) below this node.
    pub(super) fn insert(&mut self, subject: &[u8], queue: Option<&[u8]>, entry: T) {
        let mut node = self;
        for tok in subject::tokens(subject) {
            let m = node.more_mut();
            node = if tok == PWC {
                m.pwc.get_or_insert_with(Box::default)
            } else if tok == FWC {
                m.fwc.get_or_insert_with(Box::default)
            } else {
                match m.literal.entry_ref(tok) {
                    EntryRef::Occupied(o) => o.into_mut(),
                    EntryRef::Vacant(v) => v.insert_with_key(SmallBytes::new(tok), Node::default()),
                }
            };
        }
        match queue {
            None => node.psubs.push(entry),
            Some(q) => {
                let qsubs = &mut node.more_mut().qsubs;
                match qsubs.iter_mut().find(|(n, _)| n == q) {
                    Some((_, members)) => members.push(entry),
                    None => qsubs.push((Bytes::copy_from_slice(q), vec![entry])),
                }
            }
        }
    }

    /// Take one entry equal to `entry` out of this node's plain or queue list.
    fn remove_entry(&mut self, queue: Option<&[u8]>, entry: &T) -> bool {
        let Some(q) = queue else {
            return self.psubs.remove(entry);
        };
        let Some(m) = self.more.as_deref_mut() else {
            return false;
        };
        let Some(i) = m.qsubs.iter().position(|(n, _)| n == q) else {
            return false;
        };
        let members = &mut m.qsubs[i].1;
        let Some(j) = members.iter().position(|e| e.same(entry)) else {
            return false;
        };
        members.swap_remove(j);
        if members.is_empty() {
            m.qsubs.swap_remove(i);
        }
        self.compact();
        true
    }

    /// Remove `entry` under the remaining subject `rest` below this node, pruning children
    /// left empty. Returns whether it was found.
    pub(super) fn remove_below(&mut self, rest: &[u8], queue: Option<&[u8]>, entry: &T) -> bool {
        let Some(m) = self.more.as_deref_mut() else {
            return false;
        };
        let (tok, more) = split_token(rest);
        let child = if tok == PWC {
            m.pwc.as_deref_mut()
        } else if tok == FWC {
            m.fwc.as_deref_mut()
        } else {
            m.literal.get_mut(tok)
        };
        let Some(child) = child else {
            return false;
        };
        let found = match more {
            None => child.remove_entry(queue, entry),
            Some(r) => child.remove_below(r, queue, entry),
        };
        if found && child.is_empty() {
            if tok == PWC {
                m.pwc = None;
            } else if tok == FWC {
                m.fwc = None;
            } else {
                m.literal.remove(tok);
                if m.literal.is_empty() {
                    m.literal = hashbrown::HashMap::default();
                } else if m.literal.capacity() > 4 * m.literal.len() {
                    m.literal.shrink_to_fit();
                }
            }
            self.compact();
        }
        found
    }

    /// The entries stored under exactly `subject` (wildcard tokens taken literally) and
    /// `queue`: no matching, just the node that pattern ends at.
    pub(super) fn exact(&self, subject: &[u8], queue: Option<&[u8]>) -> &[T] {
        let mut node = self;
        for tok in subject::tokens(subject) {
            let Some(m) = node.more.as_deref() else {
                return &[];
            };
            let child = if tok == PWC {
                m.pwc.as_deref()
            } else if tok == FWC {
                m.fwc.as_deref()
            } else {
                m.literal.get(tok)
            };
            let Some(child) = child else {
                return &[];
            };
            node = child;
        }
        match queue {
            None => node.psubs.as_slice(),
            Some(q) => node
                .more
                .as_deref()
                .and_then(|m| m.qsubs.iter().find(|(n, _)| n == q))
                .map_or(&[], |(_, members)| members.as_slice()),
        }
    }

    /// Add this node's entries (a pattern ending here matches) to `res`.
    fn collect_into(&self, res: &mut SublistResult<T>) {
        res.psubs.extend(self.psubs.as_slice().iter().cloned());
        let Some(m) = &self.more else {
            return;
        };
        for (name, members) in &m.qsubs {
            let weight: u64 = members.iter().map(|m| u64::from(m.weight())).sum();
            match res.qsubs.iter_mut().find(|g| g.name == name) {
                Some(g) => {
                    g.members.extend(members.iter().cloned());
                    g.total_weight += weight;
                }
                None => res.qsubs.push(QueueGroup {
                    name: name.clone(),
                    members: members.clone(),
                    total_weight: weight,
                }),
            }
        }
    }

    fn has_entries(&self) -> bool {
        !matches!(self.psubs, Plain::Zero)
            || self.more.as_ref().is_some_and(|m| !m.qsubs.is_empty())
    }

    /// Collect every entry whose pattern, continuing below this node, matches `rest`.
    pub(super) fn match_below(&self, rest: &[u8], res: &mut SublistResult<T>) {
        let Some(m) = &self.more else {
            return;
        };
        let (tok, more) = split_token(rest);
        if let Some(f) = &m.fwc {
            f.collect_into(res); // `>` takes `tok` and everything after it.
        }
        for child in [m.pwc.as_deref(), m.literal.get(tok)].into_iter().flatten() {
            match more {
                None => child.collect_into(res),
                Some(r) => child.match_below(r, res),
            }
        }
    }

    /// True if any pattern below this node matches `rest`.
    pub(super) fn interest_below(&self, rest: &[u8]) -> bool {
        let Some(m) = &self.more else {
            return false;
        };
        let (tok, more) = split_token(rest);
        if m.fwc.as_deref().is_some_and(Node::has_entries) {
            return true;
        }
        [m.pwc.as_deref(), m.literal.get(tok)]
            .into_iter()
            .flatten()
            .any(|child| match more {
                None => child.has_entries(),
                Some(r) => child.interest_below(r),
            })
    }

    /// Append `(subject, queue, entry)` for every entry at or below this node; `path` holds
    /// this node's subject.
    pub(super) fn snapshot(&self, path: &mut Vec<u8>, out: &mut Vec<(Bytes, Option<Bytes>, T)>) {
        let subj = if self.has_entries() {
            Bytes::copy_from_slice(path)
        } else {
            Bytes::new()
        };
        out.extend(
            self.psubs
                .as_slice()
                .iter()
                .map(|e| (subj.clone(), None, e.clone())),
        );
        let Some(m) = &self.more else {
            return;
        };
        for (q, members) in &m.qsubs {
            out.extend(
                members
                    .iter()
                    .map(|e| (subj.clone(), Some(q.clone()), e.clone())),
            );
        }
        let children = m
            .literal
            .iter()
            .map(|(t, n)| (t.as_bytes(), n))
            .chain(m.pwc.as_deref().map(|n| (PWC, n)))
            .chain(m.fwc.as_deref().map(|n| (FWC, n)));
        for (tok, child) in children {
            let len = path.len();
            if len > 0 {
                path.push(SEP);
            }
            path.extend_from_slice(tok);
            child.snapshot(path, out);
            path.truncate(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone)]
    struct P(std::sync::Arc<u8>);
    impl SubEntry for P {
        fn same(&self, other: &Self) -> bool {
            std::sync::Arc::ptr_eq(&self.0, &other.0)
        }
    }

    #[test]
    fn a_leaf_is_small() {
        // One table slot per leaf: the token and the node.
        assert_eq!(std::mem::size_of::<Node<P>>(), 32);
        assert_eq!(std::mem::size_of::<(SmallBytes, Node<P>)>(), 56);
    }

    #[test]
    fn plain_entries_collapse_back_to_one() {
        let (a, b) = (P(Default::default()), P(Default::default()));
        let mut p = Plain::Zero;
        p.push(a.clone());
        p.push(b.clone());
        assert_eq!(p.as_slice().len(), 2);
        assert!(p.remove(&a));
        assert!(matches!(p, Plain::One(_)));
        assert!(!p.remove(&a));
        assert!(p.remove(&b));
        assert!(matches!(p, Plain::Zero));
    }
}
