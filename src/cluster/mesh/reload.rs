//! A config reload of the pool size or the pinned accounts (nats-server 2.10+ `reload.go`
//! `reloadClusterPoolAndAccounts`; docs/nats-server-behaviour.md section 24): a new pool size
//! closes every pool connection, a pinned account no longer pinned closes its connections
//! (not dialled again), a newly pinned one is dialled; what is lost is dialled again as after
//! any loss (the peer's last connection: by whoever dialled one of them; a missing slot: by
//! whoever dialled the lowest one).

use super::*;

impl Mesh {
    pub(super) fn reconfigure(
        &mut self,
        pool_size: i32,
        pinned: Vec<Arc<str>>,
        out: &mut Vec<Action>,
    ) {
        let pinned = if pool_size > 0 { pinned } else { Vec::new() };
        let pool_changed = pool_size != self.cfg.pool_size;
        let removed: Vec<Arc<str>> = self
            .cfg
            .pinned
            .iter()
            .filter(|a| !pinned.contains(a))
            .cloned()
            .collect();
        self.cfg.pool_size = pool_size;
        self.cfg.pinned = pinned;
        let goes = |slot: &Slot| match slot {
            Slot::Pool(_) => pool_changed,
            Slot::Account(a) => removed.contains(a),
        };
        // Slot dials in flight for such slots: closed as soon as they are made.
        let mut stale: Vec<DialId> = self
            .dials
            .iter()
            .filter(|(_, d)| matches!(d.origin, Origin::Slot(_)) && goes(&d.slot))
            .map(|(id, _)| *id)
            .collect();
        stale.sort_unstable();
        self.cancelled.extend(stale);
        if pool_changed {
            self.close_handshakes(out);
        }
        let ids: Vec<Arc<str>> = self.peers.keys().cloned().collect();
        for id in ids {
            let Some(p) = self.peers.get_mut(&id) else {
                continue;
            };
            // A peer that refused an account may take it now (it may have reloaded too).
            p.refused.clear();
            p.dialing.retain(|s| !goes(s));
            let victims: Vec<Slot> = p.slots.keys().filter(|s| goes(s)).cloned().collect();
            let mut conns = Vec::new();
            for s in &victims {
                conns.extend(p.slots.remove(s).unwrap_or_default());
            }
            let empty = p.slots.is_empty();
            for c in conns {
                self.close(c, CloseWhy::Reload, out);
            }
            if !empty {
                self.fill_slots(&id, out);
                continue;
            }
            // Every connection to it closes: dial it again as after a loss.
            let Some(p) = self.peers.remove(&id) else {
                continue;
            };
            if let (true, Some(addr)) = (p.dialled, p.addr) {
                let pend = Pending {
                    url: p.url,
                    addrs: vec![addr],
                    attempts_left: self.cfg.connect_retries + 1,
                    mode: GossipMode::Default,
                    deferred_from: None,
                    told_alone: p.told_alone,
                };
                self.pending.insert(id.clone(), pend);
                let at = self.now + self.jitter();
                self.arm(at, Timer::Pending(id));
            }
        }
    }

    /// Connections still in their handshake opened with the old pool size (our INFO on them
    /// said so, or the slot was chosen by it): closed, to be made again with the new one.
    fn close_handshakes(&mut self, out: &mut Vec<Action>) {
        let mut open: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.at.is_none() && !c.closing)
            .map(|(id, _)| *id)
            .collect();
        open.sort_unstable();
        for conn in open {
            // A gossiped peer being dialled is tried again.
            let gossiped = match self.conns.get(&conn).and_then(|c| c.dial.as_ref()) {
                Some(Dial {
                    origin: Origin::Gossip(id),
                    ..
                }) => Some(id.clone()),
                _ => None,
            };
            self.close(conn, CloseWhy::Reload, out);
            if let Some(id) = gossiped.filter(|id| self.pending.contains_key(id)) {
                self.arm(self.now + RETRY, Timer::Pending(id));
            }
        }
    }

    /// Peer `id` pins an account now (its announcement, or its answer to ours): accounts it
    /// refused may be dialled again.
    pub(super) fn peer_pins(&mut self, id: &Arc<str>, out: &mut Vec<Action>) {
        if let Some(p) = self.peers.get_mut(id) {
            p.refused.clear();
            p.backoff = RETRY;
        }
        self.fill_slots(id, out);
        // The end that dialled the peer's lowest slot fills the pool; when that is the peer
        // and the peer is nats-server — which dials a newly pinned account only on its
        // configured routes, after waiting up to 2 s for its peers' answers — nobody would.
        // So we dial what is still missing ourselves, `MAX_DEFER` later (a natsd peer has
        // filled it by then, and a nats-server peer dialled it if it was going to: sooner, our
        // dial crossed its and one of the two was closed).
        if !self.dialled_lowest(id) {
            let at = self.now + MAX_DEFER + self.jitter();
            self.arm(at, Timer::Pinned(id.clone()));
        }
    }

    /// `Timer::Pinned`: dial the pinned-account slots of peer `id` still missing, at the
    /// address its INFO gave; and its pool too when it is nats-server and holds no pool
    /// connection — it dials the pool only from a pool connection it dialled itself, never
    /// from a pinned account's (after a reload that pooled the routes, that was all it
    /// dialled).
    pub(super) fn dial_missing_pinned(&mut self, id: &Arc<str>, out: &mut Vec<Action>) {
        let Some(p) = self.peers.get(id) else {
            return;
        };
        let Some(addr) = p.addr else {
            return;
        };
        let url = p.url.clone();
        let pooled = |s: &Slot| matches!(s, Slot::Pool(_));
        let no_pool = !p.natsd && !p.slots.keys().any(pooled) && !p.dialing.iter().any(pooled);
        let missing: Vec<Slot> = self
            .expected_slots(p)
            .into_iter()
            .filter(|s| no_pool || matches!(s, Slot::Account(_)))
            .filter(|s| !p.slots.contains_key(s) && !p.dialing.contains(s))
            .collect();
        self.dial_slots(id, addr, &url, missing, out);
    }
}
