//! Remote interest (RS+/RS-/LS+/LS-) into the account sublists, and routed messages
//! (RMSG/HMSG) to local clients.

use super::*;

impl Route {
    pub(super) fn account(&mut self, name: &[u8]) -> Option<Arc<Account>> {
        if let Some(a) = &self.pinned {
            // A pinned-account route names no account: it is the connection's.
            return Some(a.clone());
        }
        self.acc_cache.get(&self.srv.accounts, name)
    }

    pub(super) fn remote_key(account: &[u8], subject: &[u8], queue: Option<&[u8]>) -> Bytes {
        let mut k = BytesMut::with_capacity(account.len() + subject.len() + 32);
        k.extend_from_slice(account);
        k.extend_from_slice(b" ");
        k.extend_from_slice(subject);
        if let Some(q) = queue {
            k.extend_from_slice(b" ");
            k.extend_from_slice(q);
        }
        k.freeze()
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
        let Some(acc) = self.account(account) else {
            tracing::debug!(
                "{} - Unknown account {:?} for remote interest, ignored",
                self.conn.log_prefix(),
                String::from_utf8_lossy(account)
            );
            return;
        };
        let qname = queue.map(|(q, _)| q);
        let weight = queue.map_or(1, |(_, w)| w.max(1));
        let key = Self::remote_key(account, subject, qname);
        let mut is_new = true;
        if let Some((_, old)) = self.remote.get(&key) {
            if queue.is_none() || old.weight == weight {
                return;
            }
            let old = old.clone();
            let _ = acc.sublist.remove(subject, qname, &SubRef(old));
            self.remote.remove(&key);
            is_new = false;
        }
        // Subject and queue are slices of the key (`acc subj[ queue]`): one allocation.
        let subj_at = account.len() + 1;
        let sub = Arc::new(Subscription {
            conn: self.conn.clone(),
            subject: key.slice(subj_at..subj_at + subject.len()),
            queue: qname.map(|q| key.slice(key.len() - q.len()..)),
            sid: key.clone(),
            max: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            deny: None,
            weight,
            handler: None,
        });
        // The sublist validates the subject: an invalid one is ignored (debug line).
        match acc.sublist.insert(subject, qname, SubRef(sub.clone())) {
            Ok(()) => {
                if let Some(gw) = &self.srv.gateway {
                    if is_new {
                        gw.interest_changed(&acc.name, &sub.subject, sub.queue.as_ref(), 1);
                    }
                }
                self.remote.insert(key, (acc, sub));
            }
            Err(e) => tracing::debug!(
                "{} - Remote interest {:?} ignored: {e}",
                self.conn.log_prefix(),
                String::from_utf8_lossy(subject)
            ),
        }
        entry.num_subs.store(self.remote.len(), Relaxed);
    }

    pub(super) fn remote_minus(&mut self, account: &[u8], subject: &[u8], queue: Option<&[u8]>) {
        let key = Self::remote_key(account, subject, queue);
        if let Some((acc, sub)) = self.remote.remove(&key) {
            let _ = acc.sublist.remove(subject, queue, &SubRef(sub.clone()));
            if let Some(gw) = &self.srv.gateway {
                gw.interest_changed(&acc.name, &sub.subject, sub.queue.as_ref(), -1);
            }
        }
        if let Some(e) = &self.entry {
            e.num_subs.store(self.remote.len(), Relaxed);
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
        let r = acc.sublist.matches(subject);
        self.fan
            .publish(&acc, &r, &msg, Origin::Route, Some(&m.queues));
        crate::trace::finish(&mut self.fan);
        self.fan.retire_in(&acc, 0);
    }
}
