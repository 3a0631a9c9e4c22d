//! Remote interest (RS+/RS-/LS+/LS-) into the account sublists, and routed messages
//! (RMSG/HMSG) to local clients.

use super::*;
use crate::sublist::SublistError;
use crate::util::small::SmallBytes;

type FastSet<K> = hashbrown::HashSet<K, foldhash::fast::RandomState>;

/// The interest one route connection learned in one account.
pub(super) struct RemoteAcc {
    acc: Arc<Account>,
    /// The sublist entry of every plain interest of this connection in the account: delivery
    /// to a route needs only its connection, so one entry serves all its subjects (each trie
    /// leaf holds it at most once), and a subject costs its trie leaf and its place in `plain`.
    plain_sub: Arc<Subscription>,
    /// Subjects of plain interest.
    plain: FastSet<SmallBytes>,
    /// Queue interest by `subject queue`, each with its own entry (it carries the weight).
    queues: FastMap<Bytes, Arc<Subscription>>,
}

impl RemoteAcc {
    fn new(acc: Arc<Account>, conn: &Arc<Conn>) -> Self {
        RemoteAcc {
            acc,
            plain_sub: Arc::new(Subscription::remote(conn.clone(), Bytes::new(), None, 1)),
            plain: FastSet::default(),
            queues: FastMap::default(),
        }
    }

    /// RS+ without a queue: true if new.
    fn plus(&mut self, subject: &[u8]) -> Result<bool, SublistError> {
        if self.plain.contains(subject) {
            return Ok(false);
        }
        // The sublist validates the subject.
        let e = SubRef(self.plain_sub.clone());
        self.acc.sublist.insert(subject, None, e)?;
        self.plain.insert(SmallBytes::new(subject));
        Ok(true)
    }

    /// RS+ with a queue and weight: true if new (a known one with another weight is replaced).
    fn plus_queue(&mut self, subject: &[u8], q: &[u8], weight: u32) -> Result<bool, SublistError> {
        let key = queue_key(subject, q);
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
        // Subject and queue are slices of the key (`subj queue`): one allocation.
        let (subj, queue) = (key.slice(..subject.len()), key.slice(subject.len() + 1..));
        let sub = Arc::new(Subscription::remote(self.conn(), subj, Some(queue), weight));
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
        self.plain_sub.conn.clone()
    }

    /// RS-: true if it was known.
    fn minus(&mut self, subject: &[u8], queue: Option<&[u8]>) -> bool {
        match queue {
            None => {
                if !self.plain.remove(subject) {
                    return false;
                }
                if self.plain.capacity() > 4 * self.plain.len() + 64 {
                    self.plain.shrink_to_fit();
                }
                let e = SubRef(self.plain_sub.clone());
                let _ = self.acc.sublist.remove(subject, None, &e);
                true
            }
            Some(q) => {
                let Some(sub) = self.queues.remove(&queue_key(subject, q)) else {
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
        let n = self.plain.len() + self.queues.len();
        let e = SubRef(self.plain_sub.clone());
        for s in &self.plain {
            let _ = self.acc.sublist.remove(s, None, &e);
            gone(s, None);
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

/// `subject queue`: how queue interest is keyed.
fn queue_key(subject: &[u8], queue: &[u8]) -> Bytes {
    let mut k = BytesMut::with_capacity(subject.len() + 1 + queue.len());
    k.extend_from_slice(subject);
    k.extend_from_slice(b" ");
    k.extend_from_slice(queue);
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

    pub(super) fn remote_plus(
        &mut self,
        account: &[u8],
        subject: &[u8],
        queue: Option<(&[u8], u32)>,
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
            None => ra.plus(subject),
            Some((q, w)) => ra.plus_queue(subject, q, w.max(1)),
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

    pub(super) fn remote_minus(&mut self, account: &[u8], subject: &[u8], queue: Option<&[u8]>) {
        if let Some(ra) = self.remote.get_mut(account) {
            if ra.minus(subject, queue) {
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
        self.fan
            .publish_remote(&acc, &msg, Origin::Route, Some(&m.queues));
        crate::trace::finish(&mut self.fan);
        self.fan.retire_in(&acc, 0);
    }
}
