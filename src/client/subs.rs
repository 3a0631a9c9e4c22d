//! SUB/UNSUB: adding and removing this client's subscriptions (account sublist, interest
//! to routes and gateways, imports), auto-unsubscribe, and cleanup at close.

use super::*;

impl Client {
    /// Remove a local subscription from the account and tell the routes.
    pub(super) fn unsubscribe(&mut self, sub: &Arc<Subscription>) {
        if self.acc.retire(sub) {
            self.srv.interest_changed_deferred(
                &self.acc,
                &sub.subject,
                sub.queue.as_ref(),
                -1,
                self.fan.kicks(),
            );
            if self.acc.links.get().is_some() {
                crate::imports::client_unsubscribed(&*self.srv, &self.acc, sub);
            }
        }
    }

    /// Retire subscriptions that reached their auto-unsubscribe max during delivery.
    pub(super) fn retire_finished(&mut self) {
        if self.fan.retired.is_empty() {
            return;
        }
        for sub in std::mem::take(&mut self.fan.retired) {
            // Local subscribers live in this account's sublist: that is where we found them.
            self.unsubscribe(&sub);
        }
    }

    pub(super) fn on_sub(&mut self, subject: &[u8], queue: Option<&[u8]>, sid: &[u8]) -> Flow {
        if !subject::is_valid_subject(subject)
            || queue.is_some_and(|q| !subject::is_valid_queue_name(q))
        {
            self.send_err(errs::INVALID_SUBJECT);
            return Flow::Continue;
        }
        let deny = match &self.perms {
            Some(p) => {
                if !p.can_subscribe(subject) {
                    let s = String::from_utf8_lossy(subject);
                    let text = match queue {
                        Some(q) => format!(
                            "Permissions Violation for Subscription to \"{s}\" using queue \"{}\"",
                            String::from_utf8_lossy(q)
                        ),
                        None => format!("Permissions Violation for Subscription to \"{s}\""),
                    };
                    tracing::error!(
                        "{} - Subscription Violation - User {:?}, Subject {s:?}, SID {}",
                        self.conn.log_prefix(),
                        self.conn.meta().user,
                        String::from_utf8_lossy(sid)
                    );
                    self.send_err(&text);
                    return Flow::Continue;
                }
                p.deny_filter(subject)
            }
            None => None,
        };
        let max_tokens = usize::from(self.opts.max_sub_tokens);
        if max_tokens > 0 && subject.split(|b| *b == b'.').count() > max_tokens {
            let s = String::from_utf8_lossy(subject);
            self.send_err(&format!(
                "Permissions Violation for Subscription to \"{s}\", too many tokens"
            ));
            tracing::error!(
                "{} - Subscription Violation Too Many Tokens - Subject {s:?}, SID {}",
                self.conn.log_prefix(),
                String::from_utf8_lossy(sid)
            );
            return Flow::Continue;
        }
        let max_subs = self.max_subs;
        let sub = {
            let mut subs = self.conn.subs();
            if subs.contains_key(sid) {
                // nats-server keeps the first subscription for a sid.
                drop(subs);
                self.send_ok();
                return Flow::Continue;
            }
            if let Some(max) = max_subs.filter(|max| subs.len() >= *max) {
                drop(subs);
                tracing::error!(
                    "{} - Maximum Subscriptions Exceeded (max {max})",
                    self.conn.log_prefix()
                );
                self.send_err(errs::MAX_SUBS);
                return Flow::Continue;
            }
            // Subject, sid and queue share one allocation.
            let q = queue.unwrap_or_default();
            let mut k = BytesMut::with_capacity(subject.len() + sid.len() + q.len());
            k.extend_from_slice(subject);
            k.extend_from_slice(sid);
            k.extend_from_slice(q);
            let k = k.freeze();
            let (ns, nsid) = (subject.len(), subject.len() + sid.len());
            let sub = Arc::new(Subscription {
                conn: self.conn.clone(),
                subject: k.slice(..ns),
                queue: queue.map(|_| k.slice(nsid..)),
                sid: k.slice(ns..nsid),
                max: AtomicU64::new(0),
                delivered: AtomicU64::new(0),
                deny,
                weight: 1,
                handler: None,
                traced: false,
            });
            subs.insert(sub.clone());
            sub
        };
        if self
            .acc
            .sublist
            .insert(subject, queue, SubRef(sub.clone()))
            .is_err()
        {
            self.conn.subs().remove(sid);
            self.send_err(errs::INVALID_SUBJECT);
            return Flow::Continue;
        }
        self.srv.interest_changed_deferred(
            &self.acc,
            &sub.subject,
            sub.queue.as_ref(),
            1,
            self.fan.kicks(),
        );
        if self.acc.links.get().is_some() {
            crate::imports::client_subscribed(&*self.srv, &self.acc, &sub);
        }
        self.send_ok();
        Flow::Continue
    }

    pub(super) fn on_unsub(&mut self, sid: &[u8], max: Option<u64>) -> Flow {
        let sub = self.conn.subs().get(sid).cloned();
        if let Some(sub) = sub {
            match max {
                Some(m) if m > 0 && sub.delivered.load(Relaxed) < m => {
                    sub.max.store(m, Relaxed);
                }
                _ => {
                    self.unsubscribe(&sub);
                }
            }
        }
        self.send_ok();
        Flow::Continue
    }

    /// Remove every subscription of this connection from its account.
    pub(super) fn cleanup(&mut self) {
        let subs: Vec<_> = self.conn.subs().drain().collect();
        for s in subs {
            let removed = self
                .acc
                .sublist
                .remove(&s.subject, s.queue.as_deref(), &SubRef(s.clone()))
                .is_ok();
            if removed {
                self.srv.interest_changed_deferred(
                    &self.acc,
                    &s.subject,
                    s.queue.as_ref(),
                    -1,
                    self.fan.kicks(),
                );
            }
        }
        if self.acc.links.get().is_some() {
            crate::imports::client_closed(&*self.srv, &self.acc, self.conn.cid);
        }
        // Wake the routes that got RS- lines (there is no batch end after this).
        for c in self.fan.kicks().drain(..) {
            c.out.kick();
        }
        if self.connected {
            self.acc.num_conns.fetch_sub(1, Relaxed);
            self.conns_changed();
        }
        self.l1.clear();
        self.fan.clear();
    }
}
