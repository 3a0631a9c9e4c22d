//! `/raftz` (and `$SYS.REQ.SERVER.PING.RAFTZ`) as nats-server 2.15.1 answers it
//! (`Raftz` in its monitor.go): this node's Raft groups of one account (`?acc=`, the system
//! account by default), by group name — the meta group `_meta_` under the system account,
//! each replicated stream copy and consumer group held here under the stream's account
//! (their traffic still goes in the system account, as `traffic_account` says).
//!
//! Peers and the leader are named by nats-server's 8-character hash of the server name, as
//! there. natsd's groups are openraft's, so some of nats-server's fields have no
//! counterpart: `committed` is the applied index (openraft reports no commit index apart),
//! the `ipq_*` queue lengths are 0, `wal.bytes` is 0 and its times are Go's zero time;
//! `wal` counts the entries kept in the log (those behind a snapshot are purged);
//! `leader_since` and the peers' `last_seen` are left out. Filters that match nothing give
//! `{}` (HTTP 200), as there; only a node without clustered JetStream answers 404.

use serde_json::{json, Map, Value};

use super::{lock, server_hash, JsCluster, META_GROUP};
use crate::raft::{Group, Role};

/// Go's zero time, for the log's entry times natsd does not keep.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

impl JsCluster {
    /// The groups of `account` matching `group` (all when `None`), as `/raftz`'s map:
    /// the meta group is the system account's (`sys`), a stream's or consumer's group its
    /// account's, as nats-server 2.15.1 lists them; `{}` when none matches.
    pub fn raftz(&self, sys: &str, account: &str, group: Option<&str>) -> Value {
        let mut groups: Vec<(String, String, Group)> = Vec::new();
        if let Some(m) = self.meta() {
            groups.push((sys.to_string(), META_GROUP.to_string(), m.clone()));
        }
        groups.extend(
            lock(&self.replicas)
                .iter()
                .map(|(k, r)| (k.0.clone(), r.sa.group.clone(), r.group.clone())),
        );
        // A consumer's group where this node is a member (it has the copy elsewhere too).
        groups.extend(
            self.consumer_groups()
                .into_iter()
                .filter(|(_, g)| !g.members().is_empty())
                .map(|(acc, g)| (acc, g.name().to_string(), g)),
        );
        let mut out = Map::new();
        for (acc, name, g) in groups {
            if acc != account || group.is_some_and(|want| want != name) {
                continue;
            }
            out.insert(name, self.raftz_group(sys, &g));
        }
        let mut by_account = Map::new();
        if !out.is_empty() {
            by_account.insert(account.to_string(), Value::Object(out));
        }
        Value::Object(by_account)
    }

    fn raftz_group(&self, sys: &str, g: &Group) -> Value {
        let m = g.metrics();
        let hash = |id| server_hash(&self.name_of(id));
        let state = match m.role {
            Role::Leader => "LEADER",
            Role::Candidate => "CANDIDATE",
            Role::Stopped => "CLOSED",
            Role::Follower | Role::Learner => "FOLLOWER",
        };
        let size = m.voters.len();
        let applied = m.applied.unwrap_or(0);
        let last = m.last_log_index.unwrap_or(0);
        let first = m.purged.map_or(1, |p| p + 1);
        let mut peers = Map::new();
        for id in m.voters.iter().chain(&m.learners) {
            if *id == m.id {
                continue;
            }
            let mut p = json!({ "name": self.name_of(*id), "known": true });
            if let Some(r) = m.replicas.iter().find(|r| r.id == *id) {
                if let Some(i) = r.matched.filter(|i| *i > 0) {
                    p["last_replicated_index"] = i.into();
                }
            }
            peers.insert(hash(*id), p);
        }
        let mut v = json!({
            "id": server_hash(&self.name),
            "state": state,
            "size": size,
            "quorum_needed": size / 2 + 1,
            "committed": applied,
            "applied": applied,
            "ever_had_leader": m.leader.is_some() || applied > 0,
            "term": m.term,
            "pterm": m.applied_term.unwrap_or(0),
            "pindex": applied,
            "system_account": true,
            "traffic_account": sys,
            "ipq_proposal_len": 0,
            "ipq_entry_len": 0,
            "ipq_resp_len": 0,
            "ipq_apply_len": 0,
            "wal": {
                "messages": (last + 1).saturating_sub(first),
                "bytes": 0,
                "first_seq": first.min(last + 1),
                "first_ts": ZERO_TIME,
                "last_seq": last,
                "last_ts": ZERO_TIME,
                "consumer_count": 0,
            },
            "peers": peers,
        });
        if g.is_observer() {
            v["observer"] = true.into();
        }
        if let Some(l) = m.leader {
            v["leader"] = hash(l).into();
        }
        if let Some(id) = m.voted_for {
            v["voted_for"] = hash(id).into();
        }
        v
    }
}
