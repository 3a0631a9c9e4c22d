//! What a stream's group tells the outside: STREAM INFO's `cluster` object, and the
//! leader-elected and quorum-lost advisories nats-server 2.15 sends for replicated streams
//! and their consumers (`advisory::leadership`), with its log line for a stalled stream.

use std::sync::Arc;

use super::meta::StreamAssignment;
use super::{JsCluster, Replica};
use crate::jetstream::advisory::{self, Leadership};
use crate::jetstream::consumer::Cx;
use crate::jetstream::types::Obj;
use crate::raft::{GroupMetrics, NodeId, Role};
use crate::server::ServerShared;

/// A leader without a majority says so at most this often.
const LOST_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// How often a group's `cluster` is built again when nothing in it but its figures moved.
const JSON_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// When a group's `cluster` (STREAM/CONSUMER INFO) is built again: at once when who leads,
/// the term, the members, the leadership's start or which replicas are caught up changed;
/// otherwise once a second, so its `active` and `lag` figures age that much at most.
/// (Building it for every group at every tick was a fifth of an idle node's CPU with a few
/// hundred groups.)
#[derive(Default)]
pub(super) struct JsonPace {
    last: Option<(tokio::time::Instant, u64)>,
}

impl JsonPace {
    pub(super) fn due(&mut self, m: &GroupMetrics, since: Option<i64>) -> bool {
        self.due_at(m, since, tokio::time::Instant::now())
    }

    fn due_at(&mut self, m: &GroupMetrics, since: Option<i64>, now: tokio::time::Instant) -> bool {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (
            m.leader,
            m.term,
            super::leads(m),
            &m.voters,
            &m.learners,
            since,
        )
            .hash(&mut h);
        for r in &m.replicas {
            (r.id, r.lag == 0).hash(&mut h);
        }
        let key = h.finish();
        match self.last {
            Some((at, k)) if k == key && now.duration_since(at) < JSON_EVERY => false,
            _ => {
                self.last = Some((now, key));
                true
            }
        }
    }
}

/// An advisory to send once the locks are released.
pub(super) struct Pending {
    account: String,
    stream: String,
    leader: Option<String>,
    replicas: String,
    lost: bool,
}

impl JsCluster {
    fn peer_name(&self, peers: &[(NodeId, String)], id: NodeId) -> String {
        peers
            .iter()
            .find(|p| p.0 == id)
            .map(|p| p.1.clone())
            .unwrap_or_else(|| self.name_of(id))
    }

    /// Every member but the leader (nats-server's `PeerInfo`: `name`, `current`, `active`,
    /// and `lag` when behind): with their progress on the leader; elsewhere, and for members
    /// the leader has not heard from yet, as not current. With `leader` they name the whole
    /// group, whichever node answers (a follower or the meta leader can answer a repeated
    /// STREAM.CREATE).
    fn replica_infos(&self, m: &GroupMetrics, sa: &StreamAssignment) -> Vec<serde_json::Value> {
        self.replica_infos_of(m, &sa.peers)
    }

    /// [`JsCluster::replica_infos`] of a group of `peers` (a consumer's).
    pub(super) fn replica_infos_of(
        &self,
        m: &GroupMetrics,
        peers: &[(NodeId, String)],
    ) -> Vec<serde_json::Value> {
        let leads = m.role == Role::Leader;
        let mut out: Vec<serde_json::Value> = Vec::new();
        let mut listed = Vec::new();
        if leads {
            listed.push(self.me);
            for r in &m.replicas {
                let name = self.peer_name(peers, r.id);
                let mut v = serde_json::json!({
                    "name": name,
                    "current": r.lag == 0,
                    "active": 0,
                });
                if r.lag > 0 {
                    v["lag"] = r.lag.into();
                }
                v["peer"] = super::server_hash(&name).into();
                out.push(v);
                listed.push(r.id);
            }
        } else if let Some(l) = m.leader {
            listed.push(l);
        }
        for (id, name) in peers {
            if !listed.contains(id) {
                out.push(serde_json::json!({"name": name, "current": false, "active": 0, "peer": super::server_hash(name)}));
            }
        }
        out
    }

    /// `{"name","raft_group","leader","leader_since","system_account","traffic_account",
    /// "replicas":[…]}` as this member sees its group, in nats-server 2.15.1's order
    /// (`leader_since` on the leader, `since`; `replicas` left out when there are none, as
    /// nats-server's `omitempty`). The group's traffic goes in the system account. An R1
    /// stream's is `{"name","leader"}`, as there.
    pub(super) fn cluster_json(
        &self,
        m: &GroupMetrics,
        sa: &StreamAssignment,
        since: Option<i64>,
    ) -> String {
        if sa.peers.len() <= 1 {
            let leader = m.leader.map(|l| self.peer_name(&sa.peers, l));
            return self.r1_cluster_json(leader.as_deref());
        }
        self.cluster_json_of(m, &sa.group, &sa.peers, since)
    }

    /// An R1 stream's or consumer's `cluster`: nats-server 2.15.1 names the cluster and
    /// the leader only.
    pub(super) fn r1_cluster_json(&self, leader: Option<&str>) -> String {
        let mut o = Obj::new();
        o.field("name", &self.cluster_name);
        if let Some(l) = leader {
            o.field("leader", l);
        }
        o.done()
    }

    /// [`JsCluster::cluster_json`] of group `group` with members `peers` (a consumer's).
    pub(super) fn cluster_json_of(
        &self,
        m: &GroupMetrics,
        group: &str,
        peers: &[(NodeId, String)],
        since: Option<i64>,
    ) -> String {
        let mut o = Obj::new();
        o.field("name", &self.cluster_name);
        o.field("raft_group", group);
        if let Some(l) = m.leader {
            o.field("leader", &self.peer_name(peers, l));
        }
        if let Some(t) = since {
            o.field("leader_since", &crate::jetstream::types::time_str(t));
        }
        if let Some(srv) = self.srv.upgrade() {
            let sys = srv.system_account_name();
            if !sys.is_empty() {
                o.field("system_account", &true)
                    .field("traffic_account", sys);
            }
        }
        let replicas = self.replica_infos_of(m, peers);
        if !replicas.is_empty() {
            o.field("replicas", &replicas);
        }
        o.done()
    }

    /// `cluster` as a node outside the group answers (the meta leader, for a repeated
    /// STREAM.CREATE): every member, none known to be current, the leader unknown.
    pub(super) fn outside_cluster_json(&self, sa: &StreamAssignment) -> String {
        let replicas: Vec<serde_json::Value> = sa
            .peers
            .iter()
            .map(|(_, name)| serde_json::json!({"name": name, "current": false, "active": 0, "peer": super::server_hash(name)}))
            .collect();
        let mut o = Obj::new();
        o.field("name", &self.cluster_name)
            .field("raft_group", &sa.group);
        if !replicas.is_empty() {
            o.field("replicas", &replicas);
        }
        o.done()
    }

    /// Notes a change of leadership of a replicated stream: this node came to lead it
    /// (leader elected, for the stream and each consumer), or leads without a majority
    /// (quorum lost, logged as nats-server does, at most every [`LOST_EVERY`]).
    pub(super) fn leadership(
        &self,
        r: &mut Replica,
        m: &GroupMetrics,
        leads: bool,
        out: &mut Vec<Pending>,
    ) {
        let replicated = r.sa.peers.len() > 1;
        let elected = leads && !r.led;
        r.led = leads;
        if !replicated {
            return;
        }
        let stalled = m.role == Role::Leader && !leads;
        let now = tokio::time::Instant::now();
        let lost = stalled
            && r.lost_sent
                .is_none_or(|t| now.duration_since(t) >= LOST_EVERY);
        if !stalled {
            r.lost_sent = None;
        }
        if !elected && !lost {
            return;
        }
        if lost {
            r.lost_sent = Some(now);
            tracing::warn!(
                "JetStream cluster stream '{} > {}' has NO quorum, stalled",
                r.sa.account,
                r.sa.name
            );
        }
        let replicas =
            serde_json::to_string(&self.replica_infos(m, &r.sa)).unwrap_or_else(|_| "[]".into());
        out.push(Pending {
            account: r.sa.account.clone(),
            stream: r.sa.name.clone(),
            leader: elected.then(|| self.name.clone()),
            replicas,
            lost,
        });
    }
}

/// Sends the advisories noted by [`JsCluster::leadership`].
pub(super) fn send(srv: &Arc<ServerShared>, events: Vec<Pending>) {
    let sys = srv.accounts.get(srv.system_account_name());
    for p in events {
        let Some(acc) = srv.accounts.get(&p.account) else {
            continue;
        };
        let cx = Cx::new(srv, &acc);
        let sys_cx = sys.as_ref().map(|s| Cx::new(srv, s));
        let l = Leadership {
            stream: &p.stream,
            consumer: None,
            leader: p.leader.as_deref(),
            replicas: &p.replicas,
        };
        advisory::leadership(&cx, sys_cx.as_ref(), &l, p.lost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::ReplicaProgress;
    use std::time::Duration;

    fn metrics(leader: u64, lag: u64) -> GroupMetrics {
        GroupMetrics {
            id: 1,
            role: if leader == 1 {
                Role::Leader
            } else {
                Role::Follower
            },
            term: 3,
            leader: Some(leader),
            last_log_index: Some(10),
            applied: Some(10),
            snapshot: None,
            purged: None,
            voters: vec![1, 2, 3],
            learners: Vec::new(),
            millis_since_quorum_ack: Some(5),
            voted_for: Some(leader),
            applied_term: Some(3),
            replicas: vec![
                ReplicaProgress {
                    id: 2,
                    matched: Some(10 - lag),
                    lag,
                },
                ReplicaProgress {
                    id: 3,
                    matched: Some(10),
                    lag: 0,
                },
            ],
        }
    }

    /// A group's `cluster` is built again at once when what it says changes (the leader,
    /// a replica catching up), else once a second.
    #[test]
    fn cluster_json_is_built_again_on_a_change_or_once_a_second() {
        let t0 = tokio::time::Instant::now();
        let mut p = JsonPace::default();
        assert!(p.due_at(&metrics(1, 0), None, t0), "the first time");
        let soon = t0 + Duration::from_millis(300);
        assert!(!p.due_at(&metrics(1, 0), None, soon), "nothing changed");
        assert!(
            p.due_at(&metrics(1, 4), None, soon),
            "a replica fell behind"
        );
        assert!(p.due_at(&metrics(2, 4), None, soon), "another leader");
        assert!(p.due_at(&metrics(2, 4), Some(7), soon), "leading since");
        assert!(!p.due_at(&metrics(2, 4), Some(7), soon + Duration::from_millis(900)));
        assert!(
            p.due_at(&metrics(2, 4), Some(7), soon + JSON_EVERY),
            "a second later"
        );
    }
}
