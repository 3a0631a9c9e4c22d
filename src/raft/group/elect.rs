//! Elections with a pre-vote, driven from here: openraft 0.9's own election timer is off
//! (it has no pre-vote). A follower that has heard no leader for a random election timeout
//! first asks the other voters whether they would vote for it (`PREVOTE`, its last log id),
//! and only when a majority would does it stand (openraft's `elect`, a new term). So a
//! member cut off from the others, or one back from a partition or a slow restart, no longer
//! raises its term while a leader is alive: before, its higher term, answered to the
//! leader's next append, deposed that leader (openraft takes a higher vote from any answer),
//! about 2 s of refused writes each time (behaviour §56).
//!
//! A voter says yes when it is not leading, has accepted no append for half of
//! `election_timeout_min` (it has lost the leader too), and the asker's last log id is at
//! least its own, as its real vote would require. A leader's step-down asks its candidate
//! with `ELECT` (no pre-vote: the leader has stopped on purpose).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Weak;
use std::time::Duration;

use openraft::LogId;
use rand::Rng;

use super::super::network::RpcOp;
use super::super::{NodeId, Role};
use super::{Group, Inner};

/// A pre-vote's question: the asker's last log id (`term index`, `0 0` for none).
fn encode(last: Option<LogId<NodeId>>) -> String {
    last.map_or("0 0".to_string(), |l| {
        format!("{} {}", l.leader_id.term, l.index)
    })
}

fn decode(body: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(body).ok()?;
    let (t, i) = text.split_once(' ')?;
    Some((t.parse().ok()?, i.parse().ok()?))
}

impl Group {
    /// Notes an append (or snapshot) accepted from a leader: it is alive.
    pub(super) fn heard_leader(&self) {
        self.inner.heard.mark(&self.inner.heard_leader);
    }

    /// The leader openraft names, unless this member (not leading) has accepted nothing
    /// from it for longer than an election timeout and a heartbeat: then none is known.
    /// Without openraft's own elections a cut-off follower keeps its old leader's vote
    /// (it never stands, see the module), where before it stood and forgot it.
    pub(super) fn known_leader(&self, role: Role, leader: Option<NodeId>) -> Option<NodeId> {
        let fresh = self.inner.cfg.election_timeout_max + self.inner.cfg.heartbeat;
        match role {
            Role::Leader => leader,
            _ if self.heard_within(fresh) => leader,
            _ => None,
        }
    }

    /// Whether this member does not stand: it holds off for a preferred member's
    /// handover, or is on its way out (lame duck).
    pub(super) fn held_off(&self) -> bool {
        let held = self
            .inner
            .hold_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        held || self.inner.observer.load(Relaxed)
    }

    /// Whether an append was accepted from a leader within `d`.
    fn heard_within(&self, d: Duration) -> bool {
        let age = self.inner.heard.age(&self.inner.heard_leader);
        age.is_some_and(|a| a < d)
    }

    /// The answer to a `PREVOTE`: `"1"` would vote for the asker, `"0"` would not.
    pub(super) async fn prevote(&self, body: &[u8]) -> Result<Vec<u8>, String> {
        let (term, index) = decode(body).ok_or("bad PREVOTE request: want `term index`")?;
        let m = self.metrics();
        // Half the shortest timeout (the asker waited at least the whole, and a voter's
        // last append may have come a little after the asker's), but more than a
        // heartbeat and a half: a live leader's follower has heard from it within that.
        let cfg = &self.inner.cfg;
        let quiet = (cfg.election_timeout_min / 2).max(cfg.heartbeat * 3 / 2);
        let lost_leader = m.role != Role::Leader && !self.heard_within(quiet);
        let mine = self
            .inner
            .log
            .last_log_id()
            .map_or((0, 0), |l| (l.leader_id.term, l.index));
        let yes = lost_leader && (term, index) >= mine;
        Ok(if yes { b"1".to_vec() } else { b"0".to_vec() })
    }

    /// Whether this member may stand now: a voter that is neither leading nor held off
    /// (lame duck, a preferred member's handover, its own step-down), with no leader heard
    /// for `quiet`.
    fn may_stand(&self, quiet: Duration) -> bool {
        let m = self.metrics();
        matches!(m.role, Role::Follower | Role::Candidate)
            && m.voters.contains(&self.id())
            && !self.held_off()
            && !self.inner.handing_over.load(Relaxed)
            && !self.heard_within(quiet)
    }

    /// One election round: the pre-vote, then the election if a majority would vote.
    async fn try_election(&self) {
        let m = self.metrics();
        let me = self.id();
        let body = encode(self.inner.log.last_log_id());
        let t = self.inner.cfg.heartbeat * 2;
        let mut asks = tokio::task::JoinSet::new();
        for v in m.voters.iter().filter(|v| **v != me) {
            let call =
                self.inner
                    .transport
                    .call(self.name(), me, *v, RpcOp::PreVote, body.as_bytes());
            asks.spawn(async move {
                matches!(tokio::time::timeout(t, call).await, Ok(Ok(b)) if b == b"1")
            });
        }
        let mut yes = 0;
        while let Some(r) = asks.join_next().await {
            yes += usize::from(r.unwrap_or(false));
        }
        if yes + 1 < super::majority(m.voters.len()) {
            tracing::debug!(group = %self.name(), "pre-vote: {yes} of {} would vote: not standing", m.voters.len() - 1);
            return;
        }
        if let Err(e) = self.inner.raft.trigger().elect().await {
            tracing::debug!(group = %self.name(), "elect: {e}");
        }
    }
}

/// Runs the group's elections until it stops: a member that has accepted nothing from a
/// leader for a random election timeout (from `min` to `max`, drawn anew each time) and
/// may stand ([`Group::may_stand`]) tries ([`Group::try_election`]), then waits another
/// timeout before it tries again. While appends come, it wakes once per timeout.
pub(super) fn drive_elections(inner: Weak<Inner>, min: Duration, max: Duration) {
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        loop {
            let timeout = rand::rng().random_range(min..=max.max(min));
            let left = {
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                // Quiet since the last append accepted from a leader, or since the start.
                let up = start.elapsed();
                let quiet = inner
                    .heard
                    .age(&inner.heard_leader)
                    .map_or(up, |a| a.min(up));
                timeout.saturating_sub(quiet)
            };
            if !left.is_zero() {
                tokio::time::sleep(left).await;
                continue;
            }
            let Some(inner) = inner.upgrade() else {
                return;
            };
            let g = Group { inner };
            match g.metrics().role {
                Role::Stopped => return,
                _ if g.may_stand(timeout) => g.try_election().await,
                _ => {}
            }
            drop(g);
            tokio::time::sleep(timeout).await;
        }
    });
}

impl Group {
    /// An append's outcome: accepted (whatever its log matched) means a leader is alive.
    pub(super) fn note_append<E>(
        &self,
        res: &Result<openraft::raft::AppendEntriesResponse<NodeId>, E>,
    ) {
        use openraft::raft::AppendEntriesResponse as R;
        if matches!(res, Ok(R::Success | R::PartialSuccess(_) | R::Conflict)) {
            self.heard_leader();
        }
    }
}
