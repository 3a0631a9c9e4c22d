//! How JetStream nodes find each other and form the meta group.
//!
//! Every node publishes `{"id","name","init"}` on `$NATSD.JS.HELLO` in the system account
//! every [`EVERY`] (over the routes like any `$SYS` message; our own subject, which
//! nats-server nodes never see as theirs). `init`: the node is already a member of a meta
//! group. A node that is not:
//! - waits when any node it hears from is (the meta leader adds it);
//! - otherwise, once the nodes it hears from have not changed for [`SETTLE`], and when it
//!   has the lowest id among them, bootstraps the meta group with all of them. A node with
//!   configured routes waits for at least one other node first, so a node that starts
//!   before its peers does not form a group of one.
//!
//! The meta leader adds every node it hears from that is not a member yet.
//!
//! **Beside nats-server's JetStream:** a route peer that says `jetstream: true` in its INFO
//! but has not said hello within [`FOREIGN_AFTER`] of its route forming runs nats-server's
//! JetStream (another meta layer, `$NRG` Raft). Two layers would split clients' answers, so
//! while such a peer is there this node's JetStream stands by: it answers no `$JS.API`
//! request and forms no group (logged as a warning naming the peers); the cluster's clients,
//! this node's included, are answered by nats-server's JetStream.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{lock, JsCluster};
use crate::account::Handler;
use crate::deliver::Msg;
use crate::raft::NodeId;
use crate::server::ServerShared;

pub const SUBJECT: &str = "$NATSD.JS.HELLO";
pub const EVERY: Duration = Duration::from_millis(500);
/// The set of nodes must be this stable before a bootstrap.
const SETTLE: Duration = Duration::from_secs(2);
/// A node not heard from for this long is not counted.
pub const GONE: Duration = Duration::from_secs(3);
/// A JetStream route peer that has not said hello this long after its route formed is
/// nats-server's JetStream.
const FOREIGN_AFTER: Duration = Duration::from_secs(4);

#[derive(Serialize, Deserialize)]
struct Hello {
    id: NodeId,
    name: String,
    init: bool,
    /// `server_tags` and the cluster's name (placement).
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    cluster: String,
    /// The node takes Raft appends in their binary form (`AEB`, raft/codec.rs); a node
    /// from before it says nothing and gets JSON.
    #[serde(default)]
    raft_bin: bool,
}

pub struct Peer {
    pub name: String,
    pub init: bool,
    pub seen: Instant,
    pub tags: Vec<String>,
    pub cluster: String,
}

/// Bootstrap bookkeeping: the set last seen and since when; and when each JetStream route
/// peer (by server name) was first seen.
#[derive(Default)]
pub struct Settle {
    set: Vec<NodeId>,
    since: Option<Instant>,
    routes: std::collections::BTreeMap<String, Instant>,
    /// The nats-server JetStream peers of the last round.
    foreign: Vec<String>,
}

pub fn subscribe(c: &Arc<JsCluster>, srv: &Arc<ServerShared>) -> Result<(), String> {
    on_system(c, srv, SUBJECT, |c, payload| {
        let Ok(h) = serde_json::from_slice::<Hello>(payload) else {
            tracing::debug!("JetStream cluster: bad hello ignored");
            return;
        };
        if h.id == c.me {
            return;
        }
        if let Some(r) = c.ready.get() {
            r.transport.set_binary_append(h.id, h.raft_bin);
        }
        lock(&c.peers).insert(
            h.id,
            Peer {
                name: h.name,
                init: h.init,
                seen: Instant::now(),
                tags: h.tags,
                cluster: h.cluster,
            },
        );
    })
}

/// Subscribes `subject` in the system account for the cluster's own traffic: `f` gets each
/// message's payload while the cluster is alive.
pub fn on_system(
    c: &Arc<JsCluster>,
    srv: &Arc<ServerShared>,
    subject: &str,
    f: impl Fn(&Arc<JsCluster>, &[u8]) + Send + Sync + 'static,
) -> Result<(), String> {
    let acc = srv
        .accounts
        .get(srv.system_account_name())
        .ok_or("clustered JetStream needs the system account")?;
    let weak = Arc::downgrade(c);
    let h: Handler = Arc::new(move |_, m: &Msg<'_>| {
        if let Some(c) = weak.upgrade() {
            f(&c, m.payload);
        }
    });
    srv.subscribe_internal(&acc, subject, None, h)?;
    Ok(())
}

impl JsCluster {
    /// One round: announce, then bootstrap or grow the meta group as the rules above say.
    pub(super) async fn hello_round(&self) {
        let (Some(srv), Some(meta)) = (self.srv.upgrade(), self.meta()) else {
            return;
        };
        let m = meta.metrics();
        let init = !m.voters.is_empty();
        let hello = Hello {
            id: self.me,
            name: self.name.clone(),
            init,
            tags: srv.opts.server_tags.clone(),
            cluster: self.cluster_name.clone(),
            raft_bin: true,
        };
        if let (Ok(body), Some(acc)) = (
            serde_json::to_vec(&hello),
            srv.accounts.get(srv.system_account_name()),
        ) {
            srv.publish_internal(
                &acc,
                &Msg {
                    subject: SUBJECT.as_bytes(),
                    reply: None,
                    header: None,
                    payload: &body,
                },
            );
        }
        let now = Instant::now();
        if self.foreign_jetstream(&srv, now) {
            return;
        }
        let live: Vec<(NodeId, String, bool)> = lock(&self.peers)
            .iter()
            .filter(|(_, p)| now.duration_since(p.seen) < GONE)
            .map(|(id, p)| (*id, p.name.clone(), p.init))
            .collect();
        if !init {
            self.maybe_bootstrap(&srv, &live, now).await;
            return;
        }
        if !meta.is_leader() {
            return;
        }
        // Grow: one new member per round (a membership change at a time).
        let known = |id: &NodeId| m.voters.contains(id) || m.learners.contains(id);
        if let Some((id, name, _)) = live.iter().find(|(id, _, _)| !known(id)) {
            tracing::info!("JetStream cluster: adding {name} to the meta group");
            if let Err(e) = meta.add_member(*id, name).await {
                tracing::debug!("JetStream cluster: adding {name}: {e}");
            }
        }
    }

    /// Whether nats-server's JetStream runs beside us (see the module's text); logs changes.
    fn foreign_jetstream(&self, srv: &ServerShared, now: Instant) -> bool {
        let hello: Vec<String> = lock(&self.peers).values().map(|p| p.name.clone()).collect();
        let js_routes: Vec<String> = srv
            .cluster
            .as_ref()
            .map(|c| c.peers())
            .unwrap_or_default()
            .iter()
            .map(|r| r.info())
            .filter(|i| i.jetstream)
            .map(|i| i.server_name.clone())
            .collect();
        let mut s = lock(&self.settle);
        s.routes.retain(|n, _| js_routes.contains(n));
        for n in &js_routes {
            s.routes.entry(n.clone()).or_insert(now);
        }
        let mut foreign: Vec<String> = s
            .routes
            .iter()
            .filter(|(n, t)| !hello.contains(n) && now.duration_since(**t) >= FOREIGN_AFTER)
            .map(|(n, _)| n.clone())
            .collect();
        foreign.sort();
        foreign.dedup();
        if foreign != s.foreign {
            if foreign.is_empty() {
                tracing::info!("JetStream cluster: no nats-server JetStream peer any more");
            } else {
                tracing::warn!(
                    "JetStream cluster: nats-server peers {foreign:?} run JetStream in this \
                     cluster; this node's JetStream stands by (one JetStream layer per cluster: \
                     its clients are answered by theirs)"
                );
            }
            s.foreign = foreign.clone();
        }
        let standby = !foreign.is_empty();
        self.standby
            .store(standby, std::sync::atomic::Ordering::Relaxed);
        standby
    }

    async fn maybe_bootstrap(
        &self,
        srv: &ServerShared,
        live: &[(NodeId, String, bool)],
        now: Instant,
    ) {
        if live.iter().any(|p| p.2) {
            return; // a meta group exists: its leader adds us
        }
        let routes = srv
            .opts
            .cluster
            .as_ref()
            .is_some_and(|c| !c.routes.is_empty());
        if routes && live.is_empty() {
            return;
        }
        let mut set: Vec<NodeId> = live.iter().map(|p| p.0).collect();
        set.push(self.me);
        set.sort_unstable();
        let since = {
            let mut s = lock(&self.settle);
            if s.set != set {
                s.set = set.clone();
                s.since = Some(now);
            }
            s.since.unwrap_or(now)
        };
        if now.duration_since(since) < SETTLE || set.first() != Some(&self.me) {
            return;
        }
        let mut members: Vec<(NodeId, String)> = live.iter().map(|p| (p.0, p.1.clone())).collect();
        members.push((self.me, self.name.clone()));
        let names: Vec<&str> = members.iter().map(|m| m.1.as_str()).collect();
        tracing::info!("JetStream cluster: forming the meta group with {names:?}");
        if let Some(meta) = self.meta() {
            if let Err(e) = meta.bootstrap(&members).await {
                tracing::warn!("JetStream cluster: meta group bootstrap: {e}");
            }
        }
    }
}
