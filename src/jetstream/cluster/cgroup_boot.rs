//! Who bootstraps a replicated consumer's Raft group, and with which members: a pure
//! decision, fed what one node sees at one tick (`cgroups.rs` carries it out).
//!
//! Safety rests on one rule: every node that ever bootstraps a given group writes the same
//! first entry (the same members). openraft allows several members to initialize a group
//! with the same membership; two different ones would be two histories of one log.
//!
//! - The members follow from the consumer's origin (`persist::Origin`: the stream's leader
//!   that appended the creation, and the replica count then) and the stream's peers, which
//!   are the creation's when they never changed. With both known, any member computes the
//!   same set, so any member may bootstrap: the stream's leader at once, the others once
//!   the group has stayed without members a while (the first bootstrap was lost with the
//!   node that made it).
//! - Otherwise (a consumer created before origins were recorded, or a stream whose peers
//!   changed) only a fresh creation is bootstrapped, by the stream's leader alone; a group
//!   of every peer of a never-changed stream is the same whoever chooses it.

use std::time::Duration;

use super::cgroups::target;
use crate::jetstream::persist::Origin;
use crate::raft::NodeId;

/// A member of a known group bootstraps it after it stayed this long without members
/// (a leader would have reached it within a heartbeat).
pub const ORPHAN_AFTER: Duration = Duration::from_secs(5);

/// What one node sees of a consumer's group that has no members here yet.
pub struct Seen<'a> {
    pub me: NodeId,
    /// The group's name (members are ranked by a hash of it).
    pub group: &'a str,
    /// The stream's peers now.
    pub peers: &'a [(NodeId, String)],
    /// The consumer's replica count now (0: the stream's).
    pub replicas: usize,
    pub origin: Option<Origin>,
    /// The stream's peers never changed and this node is one of them.
    pub initial: bool,
    /// Created by a live log entry moments ago, on a copy that had the consumer from the
    /// start.
    pub fresh: bool,
    /// This node leads the stream.
    pub stream_leads: bool,
    /// How long the group has been open here without members.
    pub memberless_for: Duration,
}

/// The members this node bootstraps the group with (it campaigns at once), if it should.
pub fn bootstrap(s: &Seen<'_>) -> Option<Vec<(NodeId, String)>> {
    let (first, size) = s
        .origin
        .map_or((s.me, s.replicas), |o| (o.leader, o.replicas));
    let members = target(s.group, size, s.peers, &[first]);
    if !members.iter().any(|m| m.0 == s.me) {
        return None;
    }
    // The same members on every node: the peers are the creation's, and the origin (or a
    // group of every peer) fixes the choice among them.
    let known = s.initial && (s.origin.is_some() || size == 0 || size >= s.peers.len());
    let now = s.stream_leads && (s.fresh || known);
    let orphan = known && s.memberless_for >= ORPHAN_AFTER;
    (now || orphan).then_some(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    const TICK: Duration = Duration::from_millis(100);

    fn peers(n: u64) -> Vec<(NodeId, String)> {
        (1..=n).map(|i| (i * 7919, format!("n{i}"))).collect()
    }

    /// One node of the simulation.
    struct Node {
        up: bool,
        /// The group's members as this node knows them (empty: none yet).
        voters: Vec<NodeId>,
        /// Since when its group has been open without members.
        open_since: Duration,
        /// Restarted after the creation: the creation is not fresh for it.
        restarted: bool,
    }

    /// A consumer created on a stream whose peers never change, with nodes dying and
    /// coming back and the stream's leadership moving, over many seeds:
    /// - every bootstrap of the group writes the same members (one history);
    /// - when the first bootstrap is lost with its node, the group still forms once a
    ///   majority of its members is up.
    #[test]
    fn every_bootstrap_writes_the_same_members_and_a_lost_one_is_made_again() {
        for seed in 0..1000u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let n = rng.random_range(3..=5u64);
            let peers = peers(n);
            let replicas = rng.random_range(0..=n as usize);
            let group = format!("C-F-{seed}");
            let origin_leader = peers[rng.random_range(0..peers.len())].0;
            let origin = Origin {
                leader: origin_leader,
                replicas,
            };
            let mut nodes: BTreeMap<NodeId, Node> = peers
                .iter()
                .map(|p| {
                    let node = Node {
                        up: true,
                        voters: Vec::new(),
                        open_since: Duration::ZERO,
                        restarted: false,
                    };
                    (p.0, node)
                })
                .collect();
            // Half the runs lose the first bootstrap: its node dies before its tick.
            let lost = rng.random_bool(0.5);
            if lost {
                if let Some(x) = nodes.get_mut(&origin_leader) {
                    x.up = false;
                }
            }
            let mut stream_leader = Some(origin_leader).filter(|_| !lost);
            let mut written: Option<Vec<NodeId>> = None;
            let mut now = Duration::ZERO;
            let end = Duration::from_secs(40);
            let members: Vec<NodeId> = target(&group, replicas, &peers, &[origin_leader])
                .iter()
                .map(|m| m.0)
                .collect();
            let majority = members.len() / 2 + 1;
            // The last moment the set of nodes up changed.
            let mut steady_since = Duration::ZERO;
            while now < end {
                // Faults during the first 20 s only; then things settle.
                if now < Duration::from_secs(20) && rng.random_bool(0.05) {
                    let id = peers[rng.random_range(0..peers.len())].0;
                    if let Some(x) = nodes.get_mut(&id) {
                        x.up = !x.up;
                        if x.up {
                            x.restarted = true;
                            x.open_since = now;
                        }
                        steady_since = now;
                    }
                }
                if stream_leader.is_none_or(|l| !nodes[&l].up) {
                    let up: Vec<NodeId> = peers
                        .iter()
                        .map(|p| p.0)
                        .filter(|id| nodes[id].up)
                        .collect();
                    // A stream leader needs a majority of the stream's peers.
                    stream_leader =
                        (up.len() > peers.len() / 2).then(|| up[rng.random_range(0..up.len())]);
                }
                // A group with members reaches every member that is up (its leader's
                // heartbeats), when a majority of them is up.
                let formed: Option<Vec<NodeId>> = nodes
                    .values()
                    .find(|x| x.up && !x.voters.is_empty())
                    .map(|x| x.voters.clone());
                if let Some(v) = &formed {
                    let up = v.iter().filter(|id| nodes[id].up).count();
                    if up > v.len() / 2 {
                        for id in v {
                            if let Some(x) = nodes.get_mut(id).filter(|x| x.up) {
                                x.voters = v.clone();
                            }
                        }
                    }
                }
                for p in &peers {
                    let x = &nodes[&p.0];
                    if !x.up || !x.voters.is_empty() {
                        continue;
                    }
                    let seen = Seen {
                        me: p.0,
                        group: &group,
                        peers: &peers,
                        replicas,
                        origin: Some(origin),
                        initial: true,
                        fresh: !x.restarted && now < Duration::from_secs(30),
                        stream_leads: stream_leader == Some(p.0),
                        memberless_for: now.saturating_sub(x.open_since),
                    };
                    if let Some(m) = bootstrap(&seen) {
                        let m: Vec<NodeId> = m.iter().map(|m| m.0).collect();
                        assert!(m.contains(&p.0), "seed {seed}: a non-member bootstrapped");
                        match &written {
                            Some(w) => assert_eq!(w, &m, "seed {seed}: two histories"),
                            None => written = Some(m.clone()),
                        }
                        if let Some(x) = nodes.get_mut(&p.0) {
                            x.voters = m;
                        }
                    }
                }
                now += TICK;
            }
            let up = members.iter().filter(|id| nodes[id].up).count();
            let settled = end.saturating_sub(steady_since) > ORPHAN_AFTER + TICK * 2;
            if up >= majority && settled {
                let formed = members
                    .iter()
                    .filter(|id| nodes[id].up && !nodes[id].voters.is_empty())
                    .count();
                assert!(
                    formed >= majority,
                    "seed {seed}: never formed (n {n}, R{replicas}, lost {lost})"
                );
            }
        }
    }

    #[test]
    fn a_non_member_or_a_changed_stream_never_bootstraps_late() {
        let peers = peers(5);
        let origin = Origin {
            leader: peers[0].0,
            replicas: 3,
        };
        let members = target("C-F-x", 3, &peers, &[peers[0].0]);
        let outsider = peers
            .iter()
            .find(|p| !members.contains(p))
            .map(|p| p.0)
            .unwrap_or_default();
        let mut seen = Seen {
            me: outsider,
            group: "C-F-x",
            peers: &peers,
            replicas: 3,
            origin: Some(origin),
            initial: true,
            fresh: true,
            stream_leads: true,
            memberless_for: ORPHAN_AFTER * 2,
        };
        assert_eq!(bootstrap(&seen), None, "not a member");
        seen.me = members[1].0;
        assert_eq!(bootstrap(&seen), Some(members.clone()));
        // Its replica count updated since: the origin's members still.
        seen.replicas = 5;
        assert_eq!(bootstrap(&seen), Some(members.clone()));
        seen.initial = false;
        seen.fresh = false;
        assert_eq!(bootstrap(&seen), None, "peers changed: the leader adds it");
        // Without an origin only the stream's leader bootstraps a fresh creation.
        seen.origin = None;
        seen.initial = true;
        seen.replicas = 3;
        seen.stream_leads = false;
        assert_eq!(bootstrap(&seen), None);
        seen.stream_leads = true;
        seen.fresh = true;
        assert!(bootstrap(&seen).is_some_and(|m| m[0].0 == members[1].0));
    }
}
