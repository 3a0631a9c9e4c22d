//! A preferred leader: `$JS.API.META.LEADER.STEPDOWN`, `STREAM.LEADER.STEPDOWN` and
//! `CONSUMER.LEADER.STEPDOWN` with `{"placement": {"preferred": name} | {"cluster", "tags"}}`,
//! as nats-server 2.11+ takes them.
//!
//! The choice is nats-server's `getStepDownPreferredPlacement` among the group's members: a
//! preferred server by name (400 10005 `preferred server "x" is already leader` / `… not
//! known`, also for a server that is not a member), otherwise any other online member in the
//! cluster and with every tag asked for (`no replacement peer connected` when none is; natsd
//! takes the first by name where nats-server takes a random one). A consumer's placement
//! moves its own group (`cgroups.rs`). openraft 0.9 has no leadership transfer, so the
//! leader publishes a hold
//! (`$NATSD.JS.HOLD` in the system account: group, target, duration) that keeps every other
//! member from standing for election for a while, then steps down: only the chosen member's
//! election timer can fire, and the others vote for it.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::placement::Candidate;
use super::JsCluster;
use crate::deliver::Msg;
use crate::raft::NodeId;
use crate::server::ServerShared;

pub const HOLD: &str = "$NATSD.JS.HOLD";

use crate::jetstream::types::ApiError;
use crate::raft::Group;

#[derive(Serialize, Deserialize)]
struct Hold {
    group: String,
    to: NodeId,
    millis: u64,
}

/// The member to hand the leadership to (`None`: no placement, any member will do), or
/// nats-server's reason why there is none.
pub fn choose(
    me: NodeId,
    members: &[Candidate],
    placement: &serde_json::Value,
) -> Result<Option<NodeId>, String> {
    if !placement.is_object() {
        return Ok(None);
    }
    if let Some(p) = placement["preferred"].as_str().filter(|p| !p.is_empty()) {
        return match members.iter().find(|c| c.name == p) {
            Some(c) if c.id == me => Err(format!("preferred server {p:?} is already leader")),
            Some(c) => Ok(Some(c.id)),
            None => Err(format!("preferred server {p:?} not known")),
        };
    }
    let spec = super::placement::Spec::of(Some(placement));
    let mut fit: Vec<&Candidate> = members
        .iter()
        .filter(|c| c.online && c.id != me)
        .filter(|c| spec.cluster.as_ref().is_none_or(|w| *w == c.cluster))
        .filter(|c| {
            spec.tags
                .iter()
                .all(|t| c.tags.iter().any(|h| h.eq_ignore_ascii_case(t)))
        })
        .collect();
    fit.sort_by(|a, b| a.name.cmp(&b.name));
    match fit.first() {
        Some(c) => Ok(Some(c.id)),
        None => Err("no replacement peer connected".into()),
    }
}

/// Every member takes holds addressed to others, for the meta group or a stream's group
/// it is a member of.
pub fn subscribe(c: &Arc<JsCluster>, srv: &Arc<ServerShared>) -> Result<(), String> {
    super::hello::on_system(c, srv, HOLD, |c, payload| {
        let Ok(h) = serde_json::from_slice::<Hold>(payload) else {
            tracing::debug!("JetStream cluster: bad hold ignored");
            return;
        };
        if h.to == c.me {
            return;
        }
        let group = c
            .meta()
            .filter(|g| g.name() == h.group)
            .cloned()
            .or_else(|| c.group_named(&h.group))
            .or_else(|| {
                c.consumer_groups()
                    .into_iter()
                    .map(|(_, g)| g)
                    .find(|g| g.name() == h.group)
            });
        if let Some(g) = group.filter(|g| !g.is_leader()) {
            g.hold_elections(Duration::from_millis(h.millis.min(60_000)));
        }
    })
}

impl JsCluster {
    /// The member a stepdown request's body asks for: `None` for no body or no placement;
    /// an error (as nats-server answers it) for bad JSON or a placement no member fits.
    /// `members`: the group's members (the meta group: every candidate).
    pub(super) fn stepdown_target(
        &self,
        payload: &[u8],
        members: Option<&[NodeId]>,
    ) -> Result<Option<NodeId>, ApiError> {
        let body = std::str::from_utf8(payload).unwrap_or("").trim();
        if !body.starts_with('{') {
            return Ok(None);
        }
        let v = serde_json::from_str::<serde_json::Value>(body)
            .map_err(|e| ApiError::new(400, 10025, format!("invalid JSON: {e}")))?;
        let mut cands = self.candidates(&super::lock(&self.meta_state));
        if let Some(m) = members {
            cands.retain(|c| m.contains(&c.id));
        }
        choose(self.me, &cands, &v["placement"]).map_err(|e| ApiError::new(400, 10005, e))
    }

    /// Asks every other member of `group` to hold its elections while `to` takes over.
    pub(super) fn hold_elections(&self, srv: &Arc<ServerShared>, group: &Group, to: NodeId) {
        let hold = Hold {
            group: group.name().to_string(),
            to,
            millis: (group.election_timeout_max() * 4).as_millis() as u64,
        };
        if let (Ok(body), Some(acc)) = (
            serde_json::to_vec(&hold),
            srv.accounts.get(srv.system_account_name()),
        ) {
            srv.publish_internal(
                &acc,
                &Msg {
                    subject: HOLD.as_bytes(),
                    reply: None,
                    header: None,
                    payload: &body,
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn members() -> Vec<Candidate> {
        let c = |id, name: &str, cluster: &str, tags: &[&str], online| Candidate {
            id,
            name: name.into(),
            cluster: cluster.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            online,
            load: 0,
        };
        vec![
            c(1, "n1", "C1", &["az:1"], true),
            c(2, "n2", "C1", &["az:2", "ssd"], true),
            c(3, "n3", "C2", &["az:2"], true),
            c(4, "n4", "C1", &["az:2", "ssd"], false),
        ]
    }

    #[test]
    fn choices_and_refusals_as_nats_server() {
        let m = members();
        assert_eq!(choose(1, &m, &json!(null)), Ok(None));
        assert_eq!(choose(1, &m, &json!({"preferred": "n3"})), Ok(Some(3)));
        assert_eq!(
            choose(1, &m, &json!({"preferred": "n1"})),
            Err("preferred server \"n1\" is already leader".into())
        );
        assert_eq!(
            choose(1, &m, &json!({"preferred": "n9"})),
            Err("preferred server \"n9\" not known".into())
        );
        assert_eq!(choose(1, &m, &json!({"cluster": "C2"})), Ok(Some(3)));
        assert_eq!(choose(1, &m, &json!({"tags": ["SSD"]})), Ok(Some(2)));
        assert_eq!(
            choose(2, &m, &json!({"tags": ["ssd"]})),
            Err("no replacement peer connected".into())
        );
        assert_eq!(
            choose(1, &m, &json!({"cluster": "C9"})),
            Err("no replacement peer connected".into())
        );
        assert_eq!(choose(3, &m, &json!({})), Ok(Some(1)));
    }
}
