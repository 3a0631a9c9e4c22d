//! A leader's step-down ([`Group::step_down`]): openraft 0.9 has no leadership transfer,
//! so the leader stops feeding the followers' leases and asks a caught-up member to
//! campaign (Raft's `TimeoutNow`, natsd's `ELECT` RPC).

use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::Duration;

use openraft::{Raft, ServerState};

use super::super::network::RpcOp;
use super::super::{GroupMetrics, NodeId, ProposeError, Role, TypeConfig};
use super::Group;

impl Group {
    /// On the leader: stops leading so another member takes over. openraft 0.9 has no
    /// leadership transfer, so this pauses heartbeats and this member's own elections,
    /// asks a caught-up member to campaign, and resumes both once another leader is seen.
    /// Nothing new is proposed meanwhile (what was under way is waited for first): the
    /// candidate must hold all of this log, and under steady traffic appends would keep
    /// followers from ever timing out.
    ///
    /// openraft refuses a vote while the voter's lease runs (`election_timeout_max` since
    /// its vote changed or an append renewed it; a leader's own since its election). So
    /// that the candidate wins at once, the leader first makes sure enough votes are free
    /// while it still leads: in a group of up to three its own is enough, once it has led
    /// that long ([`Group::settle_before_handover`]); in a larger one it also tells one
    /// live follower to hold its elections and sends it nothing until its lease is over
    /// ([`Group::lapse_one`]), the others still a majority. Failing that, the ask waits
    /// for the followers' leases with proposals paused (about 2 s).
    pub async fn step_down(&self) -> Result<NodeId, ProposeError> {
        self.step_down_to(None).await
    }

    /// [`Group::step_down`] to `prefer` if given: only that member is asked to campaign
    /// (the others were told to hold their elections, and a hold may arrive after an ask).
    pub async fn step_down_to(&self, prefer: Option<NodeId>) -> Result<NodeId, ProposeError> {
        self.begin_step_down(prefer)?.run().await
    }

    /// Starts a step-down to `prefer` (see [`Group::step_down_to`]) and gives it back to be
    /// driven: a `STEPDOWN` request is answered at once, as nats-server answers it, while
    /// the handover goes on. Refused when this member does not lead, or with
    /// [`ProposeError::HandingOver`] when a step-down is already under way.
    pub fn begin_step_down(&self, prefer: Option<NodeId>) -> Result<StepDown, ProposeError> {
        let flag = &self.inner.handing_over;
        if flag.compare_exchange(false, true, SeqCst, SeqCst).is_err() {
            // Checked first: once proposals are refused, this member no longer passes
            // for a leader, though it is still handing over.
            return Err(ProposeError::HandingOver);
        }
        let step = StepDown {
            group: self.clone(),
            prefer,
        };
        self.check_leader()?;
        Ok(step)
    }

    async fn hand_over(&self, prefer: Option<NodeId>) -> Result<NodeId, ProposeError> {
        let mut lapsed = self.lapse_one(prefer).await;
        let mut quick = self.metrics().voters.len() <= 3 || lapsed.is_some();
        if quick {
            match self
                .settle_before_handover(lapsed.as_ref().map(|l| l.since))
                .await
            {
                Settle::Gone(Some(other)) => return Ok(other),
                Settle::Gone(None) => {}
                Settle::Ready => {}
                Settle::QuorumLost => {
                    // The muted member was needed after all: send to it again, and hand
                    // over the slow way.
                    lapsed = None;
                    quick = false;
                }
            }
        }
        self.check_leader()?;
        self.inner.stepping_down.store(true, SeqCst);
        let started = tokio::time::Instant::now();
        self.drain_proposals().await;
        let rc = self.inner.raft.runtime_config();
        rc.heartbeat(false);
        let me = self.id();
        self.ask_to_campaign(started, prefer, quick).await;
        let res = self.another_leads().await;
        drop(lapsed);
        let rc = self.inner.raft.runtime_config();
        rc.heartbeat(true);
        self.inner.stepping_down.store(false, Relaxed);
        res.map(|m| m.leader.unwrap_or(me))
    }

    /// Waits (up to four election timeouts) for a member other than this one to lead: a
    /// handover's end, this one's or one already under way.
    pub(super) async fn another_leads(&self) -> Result<GroupMetrics, ProposeError> {
        let me = self.id();
        let wait = self.inner.cfg.election_timeout_max * 4;
        self.wait_for(wait, |m| m.leader.is_some_and(|l| l != me))
            .await
            .map_err(|_| ProposeError::NoHandover)
    }

    /// In a group of more than three, the candidate needs a follower's vote besides this
    /// leader's, and every follower's lease is renewed by each append. So one live
    /// follower (not `prefer`; the one furthest behind) is told to hold its elections
    /// (`HOLD`), then sent nothing: its lease runs out while the others, still a majority
    /// with this member, go on committing. `None` when no follower can be spared (too few
    /// live ones) or the hold is not taken; the member is sent to again once the result is
    /// dropped.
    async fn lapse_one(&self, prefer: Option<NodeId>) -> Option<Lapsed> {
        let m = self.metrics();
        if m.voters.len() <= 3 {
            return None;
        }
        let me = self.id();
        let mut live: Vec<(u64, NodeId)> = m
            .replicas
            .iter()
            .filter(|r| r.id != me && m.voters.contains(&r.id) && self.is_live(r.id))
            .map(|r| (r.lag, r.id))
            .collect();
        // Without the muted one: this member and the live others must be a majority.
        if live.len() < super::majority(m.voters.len()) {
            return None;
        }
        live.sort_unstable();
        let (_, muted) = *live.iter().rev().find(|(_, id)| Some(*id) != prefer)?;
        let hold = self.inner.cfg.election_timeout_max * 4;
        let body = hold.as_millis().to_string();
        let call = self
            .inner
            .transport
            .call(self.name(), me, muted, RpcOp::Hold, body.as_bytes());
        match tokio::time::timeout(self.inner.cfg.heartbeat * 2, call).await {
            Ok(Ok(_)) => {}
            other => {
                tracing::debug!(group = %self.name(), "step down: {muted} does not hold: {other:?}");
                return None;
            }
        }
        self.inner.muted.store(muted, SeqCst);
        Some(Lapsed {
            muted: self.inner.muted.clone(),
            since: tokio::time::Instant::now(),
        })
    }

    /// Whether `peer` accepted an append or heartbeat from this leader within two
    /// heartbeats (and a little): it follows.
    fn is_live(&self, peer: NodeId) -> bool {
        let within = self.inner.cfg.heartbeat * 2 + Duration::from_millis(100);
        self.inner.heard.since(peer).is_some_and(|t| t < within)
    }

    /// Leads on until the candidate's vote can be granted at once: this leader's own lease
    /// over (`election_timeout_max` after it was first seen leading; a leader stepped down
    /// moments after its election would otherwise have its followers' leases waited for
    /// with proposals refused, about 2 s of `503`s) and, if a follower was muted
    /// (`muted_since`), that one's too. A quorum lost meanwhile ends it early.
    async fn settle_before_handover(&self, muted_since: Option<tokio::time::Instant>) -> Settle {
        let me = self.id();
        let m = self.metrics();
        let since = *self
            .inner
            .led_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let since = match since {
            Some((term, t)) if term == m.term => t,
            // Not seen leading in this term yet: it has just been elected.
            _ => tokio::time::Instant::now(),
        };
        let since = muted_since.map_or(since, |t| t.max(since));
        let settled = since + self.inner.cfg.election_timeout_max + Duration::from_millis(50);
        let left = settled.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Settle::Ready;
        }
        tracing::debug!(group = %self.name(), "step down: leading {left:?} more, until the leases are over");
        let majority = super::majority(m.voters.len());
        let deadline = tokio::time::Instant::now() + left;
        let gone = |m: &GroupMetrics| m.role != Role::Leader;
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Settle::Ready;
            }
            let step = (deadline - now).min(self.inner.cfg.heartbeat);
            if let Ok(m) = self.wait_for(step, gone).await {
                return Settle::Gone(m.leader.filter(|l| *l != me));
            }
            if muted_since.is_some() {
                let muted = self.inner.muted.load(Relaxed);
                let live = m
                    .voters
                    .iter()
                    .filter(|v| **v != me && **v != muted && self.is_live(**v))
                    .count();
                if live + 1 < majority {
                    return Settle::QuorumLost;
                }
            }
        }
    }

    /// The voters that have all of this leader's log (within a heartbeat interval) are asked
    /// in turn to campaign, until one takes it on. openraft 0.9 refuses votes while the
    /// voter's lease (`election_timeout_max` since its vote last changed or an append renewed
    /// it) runs. A follower's runs until `election_timeout_max` after the step-down `started`,
    /// so they are asked again right after it: the handover then ends there, not up to an
    /// election timeout later. A leader's own lease ends that long after its election, so in
    /// a group of up to three a settled leader's vote and the candidate's are a majority at
    /// once. A member holding off (another is preferred) or on its way out says no; with
    /// none caught up or willing, nothing happens.
    async fn ask_to_campaign(
        &self,
        started: tokio::time::Instant,
        prefer: Option<NodeId>,
        quick: bool,
    ) {
        let me = self.id();
        let muted = self.inner.muted.load(Relaxed);
        let caught_up = |m: &GroupMetrics| -> Vec<NodeId> {
            let last = m.last_log_index.unwrap_or(0);
            m.replicas
                .iter()
                .filter(|r| r.matched == Some(last) && m.voters.contains(&r.id) && r.id != me)
                .filter(|r| r.id != muted)
                .filter(|r| prefer.is_none_or(|p| p == r.id))
                .map(|r| r.id)
                .collect()
        };
        let Ok(m) = self
            .wait_for(self.inner.cfg.heartbeat, |m| !caught_up(m).is_empty())
            .await
        else {
            return;
        };
        // The votes the candidate needs are free (see `settle_before_handover`): ask at
        // once. If one is refused after all, the ask below, after the followers' leases,
        // decides.
        if quick {
            self.ask_each(&caught_up(&m)).await;
        }
        let lease_over = started + self.inner.cfg.election_timeout_max + Duration::from_millis(50);
        let other_leader = |m: &GroupMetrics| m.leader.is_some_and(|l| l != me);
        let left = lease_over.saturating_duration_since(tokio::time::Instant::now());
        if self.wait_for(left, other_leader).await.is_ok() {
            return;
        }
        let mut targets = caught_up(&self.metrics());
        if targets.is_empty() {
            targets = caught_up(&m);
        }
        self.ask_each(&targets).await;
    }

    /// Waits (up to the propose timeout) for the proposals that passed the leader check
    /// before a step-down began to be in the log: a member is asked to campaign only once
    /// it has all of it. One appended after it looked caught up would make this leader
    /// refuse its vote, and its higher term depose this leader with nobody able to win.
    async fn drain_proposals(&self) {
        let deadline = tokio::time::Instant::now() + self.inner.cfg.propose_timeout;
        loop {
            let drained = self.inner.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.inner.inflight.load(SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return;
            }
        }
    }

    /// Asks `targets` in turn to campaign, until one agrees to.
    async fn ask_each(&self, targets: &[NodeId]) {
        let me = self.id();
        for &target in targets {
            let call = self
                .inner
                .transport
                .call(self.name(), me, target, RpcOp::Elect, &[]);
            match tokio::time::timeout(self.inner.cfg.heartbeat * 2, call).await {
                Ok(Ok(_)) => return,
                Ok(Err(e)) => tracing::debug!(group = %self.name(), "step down: {target}: {e}"),
                Err(_) => {
                    tracing::debug!(group = %self.name(), "step down: {target} did not answer")
                }
            }
        }
    }
}

/// A step-down begun by [`Group::begin_step_down`]; another may begin once it has run or
/// been dropped.
pub struct StepDown {
    group: Group,
    prefer: Option<NodeId>,
}

impl StepDown {
    /// Hands over: the member now leading (not this one), or why none took over.
    pub async fn run(self) -> Result<NodeId, ProposeError> {
        self.group.hand_over(self.prefer).await
    }
}

impl Drop for StepDown {
    fn drop(&mut self) {
        self.group.inner.handing_over.store(false, SeqCst);
    }
}

/// What [`Group::settle_before_handover`] ended with.
enum Settle {
    /// This member no longer leads; who does, if known.
    Gone(Option<NodeId>),
    /// The candidate's votes are free.
    Ready,
    /// Without the muted member, too few live ones are left for a majority.
    QuorumLost,
}

/// A member muted for a handover ([`Group::lapse_one`]); sent to again when dropped.
struct Lapsed {
    muted: Arc<std::sync::atomic::AtomicU64>,
    since: tokio::time::Instant,
}

impl Drop for Lapsed {
    fn drop(&mut self) {
        self.muted.store(0, SeqCst);
    }
}

/// Keeps `led_since` as the term this member leads in and when it was first seen leading
/// in it (`None` while it does not lead), from openraft's server metrics, which change with
/// the vote and role only (not per entry). Ends when the group stops.
pub(super) fn watch_leading(
    raft: &Raft<TypeConfig>,
    me: NodeId,
    led_since: Arc<std::sync::Mutex<Option<(u64, tokio::time::Instant)>>>,
) {
    let mut rx = raft.server_metrics();
    tokio::spawn(async move {
        loop {
            let now = {
                let m = rx.borrow_and_update();
                let leading = m.state == ServerState::Leader && m.current_leader == Some(me);
                leading.then(|| m.vote.leader_id().get_term())
            };
            {
                let mut g = led_since.lock().unwrap_or_else(|p| p.into_inner());
                *g = match (now, *g) {
                    (Some(term), Some((t, at))) if t == term => Some((t, at)),
                    (Some(term), _) => Some((term, tokio::time::Instant::now())),
                    (None, _) => None,
                };
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    });
}
