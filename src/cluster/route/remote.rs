//! Remote interest (RS+/RS-/LS+/LS-) into the account sublists, and routed messages
//! (RMSG/HMSG) to local clients.

use super::*;
use crate::sublist::SublistError;
use crate::util::small::SmallBytes;

type FastSet<K> = hashbrown::HashSet<K, foldhash::fast::RandomState>;

/// The interest one route connection learned in one account.
pub(super) struct RemoteAcc {
    acc: Arc<Account>,
    /// The peer's own plain interest (`RS+`).
    own: PlainSet,
    /// Plain interest on behalf of each leaf cluster (`LS+ <origin>`), kept apart as
    /// nats-server keys it apart: the same subject may come both ways.
    leaf: Vec<(Bytes, PlainSet)>,
    /// Queue interest by `subject queue` (or `subject queue origin`), each with its own
    /// entry (it carries the weight).
    queues: FastMap<Bytes, Arc<Subscription>>,
    /// The leaf clusters queue interest came for (an `LS-` without its origin is looked up
    /// under each).
    queue_origins: Vec<Bytes>,
}

/// Plain interest of one origin: the sublist entry that stands for every subject of it
/// (delivery to a route needs only its connection, so one entry serves all its subjects,
/// each trie leaf holding it at most once), and the subjects.
struct PlainSet {
    sub: Arc<Subscription>,
    subjects: FastSet<SmallBytes>,
}

impl PlainSet {
    fn new(sub: Subscription) -> Self {
        PlainSet {
            sub: Arc::new(sub),
            subjects: FastSet::default(),
        }
    }

    /// True if new.
    fn plus(&mut self, acc: &Account, subject: &[u8]) -> Result<bool, SublistError> {
        if self.subjects.contains(subject) {
            return Ok(false);
        }
        // The sublist validates the subject.
        acc.sublist
            .insert(subject, None, SubRef(self.sub.clone()))?;
        self.subjects.insert(SmallBytes::new(subject));
        Ok(true)
    }

    /// True if it was known.
    fn minus(&mut self, acc: &Account, subject: &[u8]) -> bool {
        if !self.subjects.remove(subject) {
            return false;
        }
        if self.subjects.capacity() > 4 * self.subjects.len() + 64 {
            self.subjects.shrink_to_fit();
        }
        let _ = acc.sublist.remove(subject, None, &SubRef(self.sub.clone()));
        true
    }
}

impl RemoteAcc {
    fn new(acc: Arc<Account>, conn: &Arc<Conn>) -> Self {
        RemoteAcc {
            acc,
            own: PlainSet::new(Subscription::remote(conn.clone(), Bytes::new(), None, 1)),
            leaf: Vec::new(),
            queues: FastMap::default(),
            queue_origins: Vec::new(),
        }
    }

    /// RS+ / LS+ without a queue: true if new.
    fn plus(&mut self, origin: Option<&[u8]>, subject: &[u8]) -> Result<bool, SublistError> {
        let Some(o) = origin else {
            return self.own.plus(&self.acc, subject);
        };
        let i = match self.leaf.iter().position(|(k, _)| k[..] == *o) {
            Some(i) => i,
            None => {
                let o = Bytes::copy_from_slice(o);
                let sub = Subscription::remote_from(self.conn(), Bytes::new(), None, 1, o.clone());
                self.leaf.push((o, PlainSet::new(sub)));
                self.leaf.len() - 1
            }
        };
        self.leaf[i].1.plus(&self.acc, subject)
    }

    /// RS+ / LS+ with a queue and weight: true if new (a known one with another weight is
    /// replaced).
    fn plus_queue(
        &mut self,
        origin: Option<&[u8]>,
        subject: &[u8],
        q: &[u8],
        weight: u32,
    ) -> Result<bool, SublistError> {
        let key = queue_key(subject, q, origin);
        let mut is_new = true;
        if let Some(old) = self.queues.get(&key) {
            if old.weight == weight {
                return Ok(false);
            }
            let _ = self
                .acc
                .sublist
                .remove(subject, Some(q), &SubRef(old.clone()));
            self.queues.remove(&key);
            is_new = false;
        }
        // Subject and queue are slices of the key (`subj queue [origin]`): one allocation.
        let (subj, queue) = (
            key.slice(..subject.len()),
            key.slice(subject.len() + 1..subject.len() + 1 + q.len()),
        );
        let sub = match origin {
            None => Subscription::remote(self.conn(), subj, Some(queue), weight),
            Some(o) => {
                if !self.queue_origins.iter().any(|k| k[..] == *o) {
                    self.queue_origins.push(Bytes::copy_from_slice(o));
                }
                let o = key.slice(subject.len() + q.len() + 2..);
                Subscription::remote_from(self.conn(), subj, Some(queue), weight, o)
            }
        };
        let sub = Arc::new(sub);
        match self
            .acc
            .sublist
            .insert(subject, Some(q), SubRef(sub.clone()))
        {
            Ok(()) => {
                self.queues.insert(key, sub);
                Ok(is_new)
            }
            Err(e) => Err(e),
        }
    }

    fn conn(&self) -> Arc<Conn> {
        self.own.sub.conn.clone()
    }

    /// RS- / LS-: true if it was known. `origin`: `LS- <origin>` (`Some(None)`: an `LS-`
    /// without one, from a peer without `lnocu`: whichever leaf cluster had it).
    fn minus(
        &mut self,
        origin: Option<Option<&[u8]>>,
        subject: &[u8],
        queue: Option<&[u8]>,
    ) -> bool {
        let origin = match origin {
            None => None,
            Some(Some(o)) => Some(o.to_vec()),
            Some(None) => match queue {
                None => self
                    .leaf
                    .iter()
                    .find(|(_, p)| p.subjects.contains(subject))
                    .map(|(o, _)| o.to_vec()),
                Some(q) => self
                    .queue_origins
                    .iter()
                    .find(|o| self.queues.contains_key(&queue_key(subject, q, Some(o))))
                    .map(|o| o.to_vec()),
            },
        };
        match queue {
            None => match origin {
                None => self.own.minus(&self.acc, subject),
                Some(o) => {
                    let Some(i) = self.leaf.iter().position(|(k, _)| k[..] == o[..]) else {
                        return false;
                    };
                    let known = self.leaf[i].1.minus(&self.acc, subject);
                    if self.leaf[i].1.subjects.is_empty() {
                        self.leaf.swap_remove(i);
                    }
                    known
                }
            },
            Some(q) => {
                let key = queue_key(subject, q, origin.as_deref());
                let Some(sub) = self.queues.remove(&key) else {
                    return false;
                };
                let _ = self.acc.sublist.remove(subject, Some(q), &SubRef(sub));
                true
            }
        }
    }

    /// Remove everything from the sublist, calling `gone(subject, queue)` for each; returns
    /// how many.
    fn clear(self, mut gone: impl FnMut(&[u8], Option<&[u8]>)) -> usize {
        let mut n = self.queues.len();
        for p in std::iter::once(&self.own).chain(self.leaf.iter().map(|(_, p)| p)) {
            n += p.subjects.len();
            let e = SubRef(p.sub.clone());
            for s in &p.subjects {
                let _ = self.acc.sublist.remove(s, None, &e);
                gone(s, None);
            }
        }
        for sub in self.queues.values() {
            let q = sub.queue.as_deref();
            let _ = self
                .acc
                .sublist
                .remove(&sub.subject, q, &SubRef(sub.clone()));
            gone(&sub.subject, q);
        }
        n
    }
}

/// `subject queue`, or `subject queue origin` for a leaf cluster's: how queue interest is
/// keyed.
fn queue_key(subject: &[u8], queue: &[u8], origin: Option<&[u8]>) -> Bytes {
    let o = origin.map_or(0, |o| o.len() + 1);
    let mut k = BytesMut::with_capacity(subject.len() + 1 + queue.len() + o);
    k.extend_from_slice(subject);
    k.extend_from_slice(b" ");
    k.extend_from_slice(queue);
    if let Some(o) = origin {
        k.extend_from_slice(b" ");
        k.extend_from_slice(o);
    }
    k.freeze()
}

impl Route {
    pub(super) fn account(&mut self, name: &[u8]) -> Option<Arc<Account>> {
        if let Some(a) = &self.pinned {
            // A pinned-account route names no account: it is the connection's.
            return Some(a.clone());
        }
        self.acc_cache.get(&self.srv.accounts, name)
    }

    /// An account this server does not serve yet, which the full resolver may still bring
    /// (its JWT pushed or fetched after the peer's client subscribed): registered now, empty,
    /// so the peer's interest is kept for when it arrives, as nats-server registers an
    /// incomplete account for a remote subscription when its resolver is not the memory one.
    /// Only names that are account public keys; other servers drop the interest.
    fn awaited(&mut self, name: &[u8]) -> Option<Arc<Account>> {
        if self.srv.resolver.get().is_none() && self.srv.url_resolver.get().is_none() {
            return None;
        }
        let name = std::str::from_utf8(name).ok()?;
        if !crate::jwt::store::is_account_key(name) {
            return None;
        }
        tracing::debug!(
            "{} - Unknown account {name:?} for remote interest, kept until its JWT arrives",
            self.conn.log_prefix()
        );
        Some(self.srv.accounts.add(name))
    }

    /// `origin`: the leaf cluster of an `LS+` (`None`: `RS+`, the peer's own).
    pub(super) fn remote_plus(
        &mut self,
        account: &[u8],
        subject: &[u8],
        queue: Option<(&[u8], u32)>,
        origin: Option<&[u8]>,
    ) {
        let Some(entry) = self.entry.clone() else {
            return;
        };
        if !self.remote.contains_key(account) {
            let Some(acc) = self.account(account).or_else(|| self.awaited(account)) else {
                tracing::debug!(
                    "{} - Unknown account {:?} for remote interest, ignored",
                    self.conn.log_prefix(),
                    String::from_utf8_lossy(account)
                );
                return;
            };
            let ra = RemoteAcc::new(acc, &self.conn);
            self.remote.insert(Bytes::copy_from_slice(account), ra);
        }
        let Some(ra) = self.remote.get_mut(account) else {
            return;
        };
        let added = match queue {
            None => ra.plus(origin, subject),
            Some((q, w)) => ra.plus_queue(origin, subject, q, w.max(1)),
        };
        match added {
            Ok(true) => {
                self.remote_count += 1;
                if let Some(lf) = &self.srv.leafnodes {
                    let q = queue.map(|(q, _)| q);
                    lf.interest_changed(&ra.acc, subject, q, 1, crate::leaf::Src::Route);
                }
                if let Some(gw) = &self.srv.gateway {
                    let (s, q) = (Bytes::copy_from_slice(subject), queue.map(|(q, _)| q));
                    let q = q.map(Bytes::copy_from_slice);
                    gw.interest_changed(&ra.acc.name, &s, q.as_ref(), 1);
                }
            }
            Ok(false) => {}
            Err(e) => tracing::debug!(
                "{} - Remote interest {:?} ignored: {e}",
                self.conn.log_prefix(),
                String::from_utf8_lossy(subject)
            ),
        }
        entry.num_subs.store(self.remote_count, Relaxed);
    }

    /// `origin`: `None` for `RS-`, `Some` for `LS-` (with its origin when the peer sends it).
    pub(super) fn remote_minus(
        &mut self,
        account: &[u8],
        subject: &[u8],
        queue: Option<&[u8]>,
        origin: Option<Option<&[u8]>>,
    ) {
        if let Some(ra) = self.remote.get_mut(account) {
            if ra.minus(origin, subject, queue) {
                self.remote_count -= 1;
                if let Some(lf) = &self.srv.leafnodes {
                    lf.interest_changed(&ra.acc, subject, queue, -1, crate::leaf::Src::Route);
                }
                if let Some(gw) = &self.srv.gateway {
                    let s = Bytes::copy_from_slice(subject);
                    let q = queue.map(Bytes::copy_from_slice);
                    gw.interest_changed(&ra.acc.name, &s, q.as_ref(), -1);
                }
            }
        }
        if let Some(e) = &self.entry {
            e.num_subs.store(self.remote_count, Relaxed);
        }
    }

    /// Forget everything learned in the accounts `drop` selects (all of them on close):
    /// out of their sublists, and gateways told.
    pub(super) fn drop_remote(&mut self, drop: impl Fn(&Account) -> bool) {
        let names: Vec<Bytes> = self
            .remote
            .iter()
            .filter(|(_, ra)| drop(&ra.acc))
            .map(|(k, _)| k.clone())
            .collect();
        for name in names {
            let Some(ra) = self.remote.remove(&name) else {
                continue;
            };
            let gw = self.srv.gateway.as_ref();
            let lf = self.srv.leafnodes.as_ref();
            let acc = ra.acc.clone();
            self.remote_count -= ra.clear(|s, q| {
                if let Some(lf) = lf {
                    lf.interest_changed(&acc, s, q, -1, crate::leaf::Src::Route);
                }
                if let Some(gw) = gw {
                    let s = Bytes::copy_from_slice(s);
                    let q = q.map(Bytes::copy_from_slice);
                    gw.interest_changed(&acc.name, &s, q.as_ref(), -1);
                }
            });
        }
    }

    pub(super) fn on_rmsg(&mut self, m: &RoutedMsg<'_>) {
        if self.entry.is_none() {
            return;
        }
        let Some(acc) = self.account(m.account) else {
            tracing::debug!(
                "{} - Message for unknown account {:?} dropped",
                self.conn.log_prefix(),
                String::from_utf8_lossy(m.account)
            );
            return;
        };
        let (subject, reply) = match &self.srv.gateway {
            None => (m.subject, m.reply),
            Some(gw) => match gw.from_route(&acc.name, m.subject, m.reply) {
                Some(x) => x,
                None => return,
            },
        };
        let msg = Msg {
            subject,
            reply,
            header: m.header,
            payload: m.payload,
        };
        self.fan.in_msgs += 1;
        self.fan.in_bytes += msg.size() as u64;
        acc.kinds.routes_in.add(1, msg.size() as u64);
        let mut buf = Vec::new();
        let kind = crate::trace::KIND_ROUTER;
        let Some(msg) =
            crate::trace::begin_remote(&mut self.fan, &self.conn, kind, &acc, msg, &mut buf)
        else {
            return;
        };
        // A leaf's message the peer forwards (`LMSG <origin>`): not back to that cluster.
        self.fan.leaf_origin = m.origin.filter(|o| !o.is_empty()).map(SmallBytes::new);
        self.fan
            .publish_remote(&acc, &msg, Origin::Route, Some(&m.queues));
        crate::trace::finish(&mut self.fan);
        self.fan.retire_in(&acc, 0);
    }
}
