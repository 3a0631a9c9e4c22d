//! Pool slots: which slots a pair should have, who dials the missing ones and when, spares
//! the peer has not closed, and what a closed connection leaves to do.

use super::*;

impl Mesh {
    pub(super) fn lowest_slot(&self, id: &str) -> Slot {
        self.peers
            .get(id)
            .and_then(|p| p.slots.keys().next().cloned())
            .unwrap_or(Slot::Pool(0))
    }

    /// A peer that dialled two connections for one slot closes one of them; one that does
    /// not (another implementation) loses the newer after a second, as nats-server does.
    pub(super) fn spare_expired(&mut self, conn: ConnId, out: &mut Vec<Action>) {
        let Some((id, slot)) = self.conns.get(&conn).and_then(|c| c.at.clone()) else {
            return;
        };
        let spare = self
            .peers
            .get(&id)
            .and_then(|p| p.slots.get(&slot))
            .is_some_and(|l| l.iter().skip(1).any(|c| *c == conn));
        if spare {
            if let Some(l) = self.peers.get_mut(&id).and_then(|p| p.slots.get_mut(&slot)) {
                l.retain(|c| *c != conn);
            }
            self.close(conn, CloseWhy::Duplicate, out);
        }
    }

    /// Whether we dialled the connection in peer `id`'s lowest registered slot (that end
    /// fills the pool).
    pub(super) fn dialled_lowest(&self, id: &str) -> bool {
        self.peers
            .get(id)
            .and_then(|p| p.slots.values().next())
            .and_then(|l| l.first())
            .and_then(|c| self.conns.get(c))
            .is_some_and(|c| c.dial.is_some())
    }

    /// The slots we owe peer `id`: all of them when both ends pool.
    pub(super) fn expected_slots(&self, p: &Peer) -> Vec<Slot> {
        if !self.both_pool(p.pool) {
            return vec![Slot::Pool(0)];
        }
        let n = self.cfg.pool_size.max(p.pool).min(i32::from(u16::MAX));
        let mut v: Vec<Slot> = (0..n).map(|i| Slot::Pool(i as u16)).collect();
        for a in &self.cfg.pinned {
            if !p.refused.contains(a) {
                v.push(Slot::Account(a.clone()));
            }
        }
        v
    }

    /// Dial the missing slots of `id` if we dialled its lowest registered slot.
    pub(super) fn fill_slots(&mut self, id: &Arc<str>, out: &mut Vec<Action>) {
        let Some(p) = self.peers.get(id) else {
            return;
        };
        // The rest of the pool goes where our dial for it went: the address a peer's INFO
        // implies (its `ip`, or an accepted connection's source) may not be one it listens on.
        let Some(lowest) = p
            .slots
            .values()
            .next()
            .and_then(|c| c.first())
            .and_then(|c| self.conns.get(c))
            .filter(|c| !c.closing)
        else {
            return;
        };
        let Some((addr, url)) = lowest.dial.as_ref().map(|d| (d.addr, d.url.clone())) else {
            return;
        };
        // A gossiped peer was told about us too: if its dial (which wins) is on its way, a
        // pool filled from our losing connection would be closed slot by slot. The larger id
        // fills only once its connection has held the slot for `DEFER_TO_SMALLER` (not when
        // nats-server told us alone: no dial of the peer's will come).
        let gossiped = !p.told_alone
            && matches!(
                lowest.dial.as_ref().map(|d| &d.origin),
                Some(Origin::Gossip(_))
            );
        let settled = lowest.since + self.defer();
        if gossiped && !self.preferred(lowest, id) && self.now < settled {
            self.arm(settled, Timer::Slots(id.clone()));
            return;
        }
        let missing: Vec<Slot> = self
            .expected_slots(p)
            .into_iter()
            .filter(|s| !p.slots.contains_key(s) && !p.dialing.contains(s))
            .collect();
        self.dial_slots(id, addr, &url, missing, out);
    }

    /// Dial `slots` of peer `id` at `addr` (marked in flight).
    pub(super) fn dial_slots(
        &mut self,
        id: &Arc<str>,
        addr: SocketAddr,
        url: &Arc<str>,
        slots: Vec<Slot>,
        out: &mut Vec<Action>,
    ) {
        for slot in slots {
            if let Some(p) = self.peers.get_mut(id) {
                p.dialing.insert(slot.clone());
            }
            let d = Dial {
                addr,
                url: url.clone(),
                slot,
                origin: Origin::Slot(id.clone()),
                mode: GossipMode::Default,
                started: Duration::ZERO,
            };
            self.dial(d, out);
        }
    }

    pub(super) fn slot_retry(&mut self, id: &Arc<str>) {
        let now = self.now;
        let Some(p) = self.peers.get_mut(id) else {
            return;
        };
        let at = now + p.backoff;
        p.backoff = (p.backoff * 2).min(MAX_BACKOFF);
        self.arm(at, Timer::Slots(id.clone()));
    }

    /// A connection is gone: the next of its slot takes over (a spare the peer kept), or the
    /// slot is dialled again, or, the last one to that peer, the peer is redialled.
    pub(super) fn closed(&mut self, conn: ConnId, out: &mut Vec<Action>) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if let Some(d) = c.dial.as_ref().filter(|_| !c.released) {
            self.dial_over(d);
        }
        let Some((id, slot)) = c.at else {
            // A pool or pinned dial that connected but never got through the handshake (a
            // handshake timeout in a storm, a peer that closed it): try that slot again.
            if let Some(Dial {
                origin: Origin::Slot(id),
                ..
            }) = &c.dial
            {
                if !matches!(c.why, Some(CloseWhy::Removed | CloseWhy::Reload)) {
                    self.slot_retry(&id.clone());
                }
            }
            return;
        };
        let Some(p) = self.peers.get_mut(&id) else {
            return;
        };
        let Some(list) = p.slots.get_mut(&slot) else {
            return;
        };
        let Some(pos) = list.iter().position(|x| *x == conn) else {
            return;
        };
        list.remove(pos);
        if list.is_empty() {
            p.slots.remove(&slot);
        } else if pos == 0 {
            let next = list[0];
            self.stats.registered += 1;
            out.push(Action::Register {
                conn: next,
                peer: id.clone(),
                slot,
                first: false,
            });
            return;
        }
        if !p.slots.is_empty() {
            // A pinned account's connection lost while the peer holds the lowest slot: the
            // peer fills the pool, but a nats-server peer redials a pinned account only on
            // its configured routes (or one it dialled itself). So, as when such a peer
            // first dials us, what is still missing `defer()` later we dial ourselves.
            // (After a reload that closed every route to a nats-server peer, its new pool
            // could register before our old `$SYS` connection's end was reported; the pair
            // was then left without `$SYS` for good.)
            if matches!(slot, Slot::Account(_)) && !self.dialled_lowest(&id) {
                let at = self.now + self.defer() + self.jitter();
                self.arm(at, Timer::Pinned(id.clone()));
            }
            self.slot_retry(&id);
            return;
        }
        // The last connection to that peer: redial it (connect_retries times) if we dialled
        // one of its connections (the ends may see them close in another order), unless we
        // closed it because its seed was removed; configured seeds are redialled anyway.
        let Some(p) = self.peers.remove(&id) else {
            return;
        };
        if c.why == Some(CloseWhy::Removed) {
            return;
        }
        let mode = c.dial.map_or(GossipMode::Default, |d| d.mode);
        if let (true, Some(addr)) = (p.dialled, p.addr) {
            let pend = Pending {
                url: p.url,
                addrs: vec![addr],
                attempts_left: self.cfg.connect_retries + 1,
                mode,
                deferred_from: None,
                told_alone: p.told_alone,
            };
            self.pending.insert(id.clone(), pend);
            let at = self.now + self.jitter();
            self.arm(at, Timer::Pending(id));
        }
    }
}
