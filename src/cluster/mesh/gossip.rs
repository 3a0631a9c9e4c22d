//! Gossip: whom a newcomer is told about and who is told about it, and when a gossiped
//! server is dialled (the larger id's wait, scaled by recent handshakes).

use super::*;

/// `Mesh::defer` from the recent handshake times.
fn defer(handshakes: &std::collections::VecDeque<Duration>) -> Duration {
    let slowest = handshakes.iter().max().copied().unwrap_or_default();
    (slowest * 3).clamp(DEFER_TO_SMALLER, MAX_DEFER)
}

impl Mesh {
    /// Tell the other peers about a newcomer, as nats-server does (its 2.11 gossip modes:
    /// override for explicit routes, disabled when we accepted it, else default; one dialled
    /// because of gossip is announced only under override). True when it was announced.
    pub(super) fn announce(
        &mut self,
        h: &Hello,
        dial: &Option<Dial>,
        out: &mut Vec<Action>,
    ) -> bool {
        let did_solicit = dial.is_some();
        let explicit = matches!(
            dial,
            Some(Dial {
                origin: Origin::Seed(_),
                ..
            })
        );
        let local_mode = dial.as_ref().map_or(GossipMode::Default, |d| d.mode);
        if (did_solicit && !explicit && local_mode != GossipMode::Override)
            || h.gossip_mode == GossipMode::Disabled
        {
            return false;
        }
        if let Some(p) = self.peers.get_mut(&h.id) {
            p.announced = true;
        }
        for (id, p) in &self.peers {
            if *id == h.id {
                continue;
            }
            let mode = if explicit {
                GossipMode::Override
            } else if !did_solicit {
                GossipMode::Disabled
            } else {
                GossipMode::Default
            };
            if let Some(to) = p.slots.values().next().and_then(|c| c.first().copied()) {
                out.push(Action::SendGossip {
                    to,
                    about: vec![h.id.clone()],
                    mode,
                });
            }
        }
        true
    }

    /// Tell a newcomer about every other peer (again when the connection gossip goes out on
    /// changed: earlier gossip may have been lost with a duplicate). In gossip mode
    /// "disabled": its connections to them must not be announced again (they know it from
    /// our announcement). `skip_nats_server`: leave out the peers that are not natsd.
    pub(super) fn tell_about_others(
        &mut self,
        id: &Arc<str>,
        to: ConnId,
        skip_nats_server: bool,
        out: &mut Vec<Action>,
    ) {
        let about: Vec<Arc<str>> = self
            .peers
            .iter()
            .filter(|(p, peer)| *p != id && (peer.natsd || !skip_nats_server))
            .map(|(p, _)| p.clone())
            .collect();
        if !about.is_empty() {
            out.push(Action::SendGossip {
                to,
                about,
                mode: GossipMode::Disabled,
            });
        }
    }

    /// `TELL_LATER` after a gossip-made first connection: if it still carries our gossip to
    /// that peer, tell it about our other peers.
    pub(super) fn tell_later(&mut self, conn: ConnId, out: &mut Vec<Action>) {
        let Some(id) = self
            .conns
            .get(&conn)
            .filter(|c| !c.closing)
            .and_then(|c| c.at.as_ref().map(|(id, _)| id.clone()))
        else {
            return;
        };
        let carries = self
            .peers
            .get(&id)
            .and_then(|p| p.slots.values().next())
            .and_then(|l| l.first())
            == Some(&conn);
        if carries {
            self.tell_about_others(&id, conn, false, out);
        }
    }

    pub(super) fn gossip(&mut self, conn: ConnId, g: Gossip) {
        match self.conns.get(&conn) {
            Some(c) if !c.closing && c.at.is_some() => {}
            _ => return,
        }
        if let Some(p) = self.pending.get_mut(&g.id) {
            // Fresh news of a server we are trying to reach: its attempts start over.
            p.attempts_left = self.cfg.connect_retries + 1;
            return;
        }
        if g.id == self.cfg.server_id
            || self.peers.contains_key(&g.id)
            || g.addrs.is_empty()
            || (g.account.is_some() && self.cfg.pool_size <= 0)
        {
            return;
        }
        let p = Pending {
            url: g.url,
            addrs: g.addrs,
            attempts_left: self.cfg.connect_retries + 1,
            mode: g.gossip_mode,
            deferred_from: None,
            told_alone: false,
        };
        // Both ends of a missing pair are often told about each other: the one with the
        // smaller id (whose connection would win) dials first, the other `DEFER_TO_SMALLER` later
        // if still needed. Told by nats-server, we are the only end told (it tells the servers
        // it knows about a newcomer, never the newcomer about them): dial now.
        let informer_natsd = self
            .conns
            .get(&conn)
            .and_then(|c| c.at.as_ref())
            .and_then(|(id, _)| self.peers.get(id))
            .is_none_or(|p| p.natsd);
        let (wait, deferred_from) = if !informer_natsd || *self.cfg.server_id < *g.id {
            (Duration::ZERO, None)
        } else {
            (self.defer(), Some(self.now))
        };
        let p = Pending {
            deferred_from,
            told_alone: !informer_natsd,
            ..p
        };
        self.pending.insert(g.id.clone(), p);
        let at = self.now + wait + self.jitter();
        self.arm(at, Timer::Pending(g.id));
    }

    pub(super) fn try_pending(&mut self, id: Arc<str>, out: &mut Vec<Action>) {
        if self.peers.contains_key(&id) {
            self.pending.remove(&id);
            return;
        }
        let Some(p) = self.pending.get_mut(&id) else {
            return;
        };
        if p.attempts_left == 0 {
            self.pending.remove(&id);
            return;
        }
        // Handshakes got slower since we were told (a storm of starting nodes): wait longer;
        // and while its dial to us is in its handshake, do not cross it with ours.
        if let Some(from) = p.deferred_from {
            let until = from + defer(&self.handshakes);
            if self.now < until {
                self.arm(until, Timer::Pending(id));
                return;
            }
            let inbound = self
                .conns
                .values()
                .any(|c| !c.closing && c.at.is_none() && c.connecting.as_deref() == Some(&*id));
            if inbound {
                let again = self.now + defer(&self.handshakes);
                self.arm(again, Timer::Pending(id));
                return;
            }
            p.deferred_from = None;
        }
        p.attempts_left -= 1;
        let (addrs, url, mode) = (p.addrs.clone(), p.url.clone(), p.mode);
        let mut any = false;
        for addr in addrs {
            if self.claim(addr) {
                any = true;
                let d = Dial {
                    addr,
                    url: url.clone(),
                    slot: Slot::Pool(0),
                    origin: Origin::Gossip(id.clone()),
                    mode,
                    started: Duration::ZERO,
                };
                self.dial(d, out);
                break;
            }
        }
        if !any {
            // Someone else is dialling it, or it is us.
            self.pending.remove(&id);
        }
    }

    /// How long the larger id of a pair waits for the smaller one's dial: `DEFER_TO_SMALLER`,
    /// or three times the slowest of our recent handshakes when the machine is that slow (a
    /// storm of starting nodes), at most `MAX_DEFER`.
    pub(super) fn defer(&self) -> Duration {
        defer(&self.handshakes)
    }
}
