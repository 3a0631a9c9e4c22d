//! A peer's first INFO on a connection: self-routes, refusals, the slot it takes, which of
//! two duplicates survives, and what registering it sets off.

use super::*;

impl Mesh {
    pub(super) fn hello(&mut self, conn: ConnId, h: Hello, out: &mut Vec<Action>) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if c.closing || c.at.is_some() {
            return;
        }
        if h.id == self.cfg.server_id {
            if c.dial.is_some() {
                let addr = c.addr;
                self.self_addrs.insert(addr);
            }
            self.close(conn, CloseWhy::SelfRoute, out);
            return;
        }
        let dial = c.dial.clone();
        if let Some(d) = &dial {
            self.addr_ids.insert(d.addr, h.id.clone());
            if let Origin::Slot(want) = &d.origin {
                if *want != h.id {
                    self.close(conn, CloseWhy::WrongPeer, out);
                    return;
                }
            }
        }
        if let Some(d) = &dial {
            if self.handshakes.len() == HANDSHAKE_SAMPLES {
                self.handshakes.pop_front();
            }
            self.handshakes
                .push_back(self.now.saturating_sub(d.started));
        }
        let both = self.both_pool(h.pool_size);
        let eff = if both {
            self.cfg.pool_size.max(h.pool_size)
        } else {
            1
        };
        let slot = match &dial {
            Some(d) => d.slot.clone(),
            None => match &h.account {
                Some(a) => Slot::Account(a.clone()),
                None if both => Slot::Pool(h.pool_idx),
                None => Slot::Pool(0),
            },
        };
        let refuse = match &slot {
            Slot::Account(_) if !both => Some(CloseWhy::NoPool),
            Slot::Account(a) if !self.cfg.pinned.contains(a) => Some(CloseWhy::UnknownAccount),
            Slot::Pool(i) if i32::from(*i) >= eff => Some(CloseWhy::BadPoolIdx),
            _ => None,
        };
        if let Some(why) = refuse {
            if let (Slot::Account(a), Some(p)) = (&slot, self.peers.get_mut(&h.id)) {
                p.refused.insert(a.clone());
            }
            self.close(conn, why, out);
            return;
        }
        let first = !self.peers.contains_key(&h.id);
        if first {
            let (url, addr) = match &dial {
                Some(d) => (d.url.clone(), Some(d.addr)),
                None => (h.url.clone(), h.addr),
            };
            let p = Peer {
                url,
                addr,
                pool: h.pool_size,
                slots: BTreeMap::new(),
                dialing: BTreeSet::new(),
                dialled: false,
                refused: BTreeSet::new(),
                backoff: RETRY,
                announced: false,
                natsd: h.natsd,
                told_alone: self.pending.get(&h.id).is_some_and(|p| p.told_alone),
            };
            self.peers.insert(h.id.clone(), p);
            self.pending.remove(&h.id);
        }
        let new_pref = self
            .conns
            .get(&conn)
            .is_some_and(|c| self.preferred(c, &h.id));
        let by_me = dial.is_some();
        let held: Vec<ConnId> = self
            .peers
            .get(&h.id)
            .and_then(|p| p.slots.get(&slot))
            .cloned()
            .unwrap_or_default();
        let old_pref = held
            .first()
            .map(|c| self.conns.get(c).is_some_and(|c| self.preferred(c, &h.id)));
        let mut keep = held.clone();
        match old_pref {
            None => keep = vec![conn],
            // nats-server closes one of two duplicates itself (the one it registered last,
            // `handleDuplicateRoute`), by its own order of events, which ours need not match:
            // closing one here too could leave neither. Keep both until it does.
            Some(_) if !h.natsd => {
                keep.push(conn);
                self.arm(self.now + PEER_CLOSES, Timer::Spare(conn));
            }
            Some(old) if new_pref && !old => {
                for c in held {
                    self.close(c, CloseWhy::Duplicate, out);
                }
                keep = vec![conn];
            }
            Some(old) if old && !new_pref => {
                self.close(conn, CloseWhy::Duplicate, out);
                return;
            }
            // Same kind: whoever dialled both closes the newer one.
            Some(_) if by_me => {
                self.close(conn, CloseWhy::Duplicate, out);
                return;
            }
            Some(_) => {
                keep.push(conn);
                self.arm(self.now + RETRY, Timer::Spare(conn));
            }
        }
        let active = keep[0] == conn;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.at = Some((h.id.clone(), slot.clone()));
            c.since = self.now;
        }
        if let Some(p) = self.peers.get_mut(&h.id) {
            p.pool = h.pool_size;
            p.dialled |= by_me;
            p.slots.insert(slot.clone(), keep);
            p.backoff = RETRY;
            // An address we reached it at beats one its INFO implies.
            match &dial {
                Some(d) => {
                    p.addr = Some(d.addr);
                    p.url = d.url.clone();
                }
                None if p.addr.is_none() => p.addr = h.addr,
                None => {}
            }
        }
        if !active {
            return;
        }
        let gossip_moved = !first && slot == self.lowest_slot(&h.id);
        self.stats.registered += 1;
        out.push(Action::Register {
            conn,
            peer: h.id.clone(),
            slot: slot.clone(),
            first,
        });
        // The newcomer learns our other peers at once when it came to us on its own (a seed,
        // a redial) or our gossip connection to it moved. A connection made because of gossip
        // usually does not need it — the gossip that caused it reached the others too — but
        // when two parts of a cluster merge it may be the only link between them: those are
        // told `TELL_LATER`, after a starting cluster's storm (telling each at once made every
        // node parse n² INFOs while it formed).
        let by_gossip = match &dial {
            Some(d) => matches!(d.origin, Origin::Gossip(_)),
            None => h.gossip_mode == GossipMode::Disabled,
        };
        // A nats-server newcomer is not told about the nats-server peers our announcement
        // reaches: they dial it, as in a cluster of nats-server alone (which never tells a
        // newcomer); two of them told about each other at once cross their dials.
        let announced = first && self.announce(&h, &dial, out);
        if (first && !by_gossip) || gossip_moved {
            let skip_nats_server = announced && !h.natsd;
            self.tell_about_others(&h.id, conn, skip_nats_server, out);
        } else if first {
            let at = self.now + TELL_LATER + self.jitter();
            self.arm(at, Timer::Tell(conn));
        }
        // A pinned account's connection of an announced peer is announced too, the ones we
        // dialled included (nats-server forwards those of its explicit routes): a nats-server
        // peer opens its own pinned connection to that peer only when told of one.
        if let Slot::Account(account) = &slot {
            if self.peers.get(&h.id).is_some_and(|p| p.announced) {
                out.push(Action::AnnouncePinned {
                    peer: h.id.clone(),
                    account: account.clone(),
                });
            }
        }
        self.fill_slots(&h.id, out);
        // The peer dialled us: it opens the rest of the pool. nats-server opens a pinned
        // account's connection on an implicit route only when it hears of that connection
        // (an INFO with `route_account`), which may never come; what is still missing
        // `defer()` later we dial ourselves.
        if first && !by_me && self.both_pool(h.pool_size) && !self.cfg.pinned.is_empty() {
            let at = self.now + self.defer() + self.jitter();
            self.arm(at, Timer::Pinned(h.id.clone()));
        }
    }

    /// Is `c` dialled by the server with the smaller id (given the peer's id)?
    pub(super) fn preferred(&self, c: &Conn, peer: &str) -> bool {
        c.dial.is_some() == (&*self.cfg.server_id < peer)
    }

    pub(super) fn both_pool(&self, remote_pool: i32) -> bool {
        self.cfg.pool_size > 0 && remote_pool > 0
    }
}
