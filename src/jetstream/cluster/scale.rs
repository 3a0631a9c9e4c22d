//! Moving a stream's copies, decided by the meta leader: placement of a new stream, a new
//! replica count (STREAM.UPDATE with another `num_replicas`) and STREAM.PEER.REMOVE. Each
//! change is one `StreamPeers` meta entry naming the new peers; the stream's leader then
//! applies the configuration through its own log (and answers the update) and moves its
//! group's membership one step at a time (`replicas.rs`, `placement::membership_step`).

use std::sync::Arc;

use super::meta::{MetaEntry, MetaState, StreamAssignment};
use super::placement::{self, Candidate, PlaceError, Spec};
use super::requests::{send, unavailable};
use super::{lock, JsCluster};
use crate::jetstream::engine::{body, err_json, srv_js_limits, Engine};
use crate::jetstream::stream;
use crate::jetstream::types::{now_nanos, ApiError, Obj, StreamConfig};
use crate::jetstream::Event;
use crate::raft::NodeId;
use crate::server::ServerShared;

/// A peer or server removal's body: `peer` (a server name) and `peer_id` (its hash).
#[derive(serde::Deserialize, Default)]
struct PeerReq {
    #[serde(default)]
    peer: Option<String>,
    #[serde(default)]
    peer_id: Option<String>,
}

/// An empty body is a bad request (400 10003), as nats-server answers.
fn peer_request(payload: &[u8]) -> Result<PeerReq, ApiError> {
    if payload.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request());
    }
    body::<PeerReq>(payload)
}

impl JsCluster {
    /// The meta members as placement candidates: their cluster and tags (from their
    /// hellos), whether they are heard from, how many streams they hold.
    pub(super) fn candidates(&self, ms: &MetaState) -> Vec<Candidate> {
        let Some(meta) = self.meta() else {
            return Vec::new();
        };
        let loads = placement::loads(
            ms.streams
                .values()
                .flat_map(|m| m.values())
                .map(|sa| sa.peers.as_slice()),
        );
        let now = tokio::time::Instant::now();
        let my_tags = self
            .srv
            .upgrade()
            .map(|s| s.opts.server_tags.clone())
            .unwrap_or_default();
        let peers = lock(&self.peers);
        meta.members()
            .into_iter()
            .map(|id| {
                let load = loads.get(&id).copied().unwrap_or(0);
                if id == self.me {
                    return Candidate {
                        id,
                        name: self.name.clone(),
                        cluster: self.cluster_name.clone(),
                        tags: my_tags.clone(),
                        online: true,
                        load,
                    };
                }
                let p = peers.get(&id);
                Candidate {
                    id,
                    name: p.map(|p| p.name.clone()).unwrap_or_default(),
                    // A peer from before hellos carried it: this cluster.
                    cluster: p
                        .map(|p| p.cluster.clone())
                        .filter(|c| !c.is_empty())
                        .unwrap_or_else(|| self.cluster_name.clone()),
                    tags: p.map(|p| p.tags.clone()).unwrap_or_default(),
                    online: p.is_some_and(|p| now.duration_since(p.seen) < super::hello::GONE),
                    load,
                }
            })
            .collect()
    }

    /// `n` peers for a stream with configuration `cfg`, `existing` kept.
    pub(super) fn place(
        &self,
        cfg: &StreamConfig,
        n: usize,
        existing: &[(NodeId, String)],
    ) -> Result<Vec<(NodeId, String)>, PlaceError> {
        let cands = self.candidates(&lock(&self.meta_state));
        let unique = self
            .srv
            .upgrade()
            .and_then(|s| s.opts.jetstream.as_ref().and_then(|j| j.unique_tag.clone()));
        placement::select(
            &cfg.name,
            n,
            &Spec::of(cfg.placement.as_ref()),
            &self.cluster_name,
            unique.as_deref(),
            &cands,
            existing,
        )
    }

    /// STREAM.UPDATE with a new replica count, on the meta leader: the single-server
    /// checks against the assigned configuration, the new peers (a scale-up keeps the
    /// current ones and places more; a scale-down keeps the leader), the proposal. The
    /// stream's leader answers once its log has the new configuration.
    pub(super) fn update_peers(
        &self,
        engine: &Engine,
        srv: &Arc<ServerShared>,
        ev: &Event,
        sa: &StreamAssignment,
    ) {
        const T: &str = "stream_update_response";
        let Some(reply) = ev.reply.clone() else {
            return;
        };
        let acc = sa.account.clone();
        let fail = |e: ApiError| send(srv, &acc, &reply, &err_json(T, &e, ""));
        let mut cfg: StreamConfig = match body(&ev.payload) {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        if cfg.name != sa.name {
            return fail(ApiError::stream_mismatch());
        }
        let dw = srv_js_limits(srv).duplicate_window;
        stream::default_duplicates(&mut cfg, dw);
        stream::apply_defaults(&mut cfg);
        let old: Result<StreamConfig, _> = serde_json::from_value(sa.config.clone());
        let checked = stream::check(&cfg, srv.opts.max_payload, true)
            .and_then(|()| stream::check_duplicates(&cfg, dw))
            .and_then(|()| match &old {
                Ok(old) => stream::check_update(old, &cfg),
                Err(_) => Ok(()),
            });
        if let Err(e) = checked {
            return fail(e);
        }
        let n = cfg.num_replicas.max(1) as usize;
        // Growing reserves more; with tiers, any new replica count moves to another tier.
        let tiered = engine.accounts.get(&sa.account).is_some_and(|ja| {
            matches!(
                ja.limits,
                crate::jetstream::limits::AccountLimits::Tiered(_)
            )
        });
        if n > sa.peers.len() || tiered {
            let limited = engine.accounts.get(&sa.account).map(|ja| {
                let others = lock(&self.meta_state).limit_view(&sa.account, &sa.name);
                crate::jetstream::limits::check_clustered(&ja.limits, &others, &cfg, false)
            });
            if let Some(Err(e)) = limited {
                return fail(e);
            }
        }
        let peers = if n > sa.peers.len() {
            match self.place(&cfg, n, &sa.peers) {
                Ok(p) => p,
                Err(e) => return fail(ApiError::new(400, 10005, e.to_string())),
            }
        } else {
            let leader = self
                .replica_group(&sa.account, &sa.name)
                .and_then(|g| g.leader());
            placement::shrink(&sa.peers, n, leader)
        };
        let config = match serde_json::to_value(&cfg) {
            Ok(v) => v,
            Err(e) => return fail(ApiError::new(500, 10049, e.to_string())),
        };
        let entry = MetaEntry::StreamPeers {
            account: sa.account.clone(),
            name: sa.name.clone(),
            group: sa.group.clone(),
            peers,
            config,
            reply: reply.clone(),
            at: now_nanos(),
        };
        self.propose_peers(srv, entry, acc.clone(), reply.clone(), T, None);
    }

    /// STREAM.PEER.REMOVE on the meta leader, as nats-server: `{"peer": <server name or its
    /// hash>}`; the peer is replaced by another node (the stream keeps its replica count),
    /// or the request is refused when none can take its place.
    pub(super) fn peer_remove(&self, srv: &Arc<ServerShared>, ev: &Event, sa: &StreamAssignment) {
        const T: &str = "stream_remove_peer_response";
        let Some(reply) = ev.reply.clone() else {
            return;
        };
        let acc = sa.account.clone();
        let fail = |e: ApiError| send(srv, &acc, &reply, &err_json(T, &e, ""));
        let peer = match peer_request(&ev.payload) {
            Ok(r) => r.peer.unwrap_or_default(),
            Err(e) => return fail(e),
        };
        if peer.is_empty() {
            return fail(ApiError::bad_request());
        }
        let Some(gone) = sa
            .peers
            .iter()
            .find(|(_, name)| *name == peer || super::server_hash(name) == peer)
            .cloned()
        else {
            return fail(ApiError::new(400, 10040, "peer not a member"));
        };
        let placed = {
            let ms = lock(&self.meta_state);
            self.replace_peer(&ms, sa, gone.0)
        };
        let Ok(peers) = placed else {
            tracing::warn!(
                "JetStream cluster rejected peer removal, no replacement available for stream '{} > {}'",
                sa.account,
                sa.name
            );
            return fail(ApiError::new(503, 10075, "peer remap failed"));
        };
        let entry = moved(sa, peers);
        let mut ok = Obj::typed(T);
        ok.field("success", &true);
        self.propose_peers(srv, entry, acc.clone(), reply.clone(), T, Some(ok.done()));
    }

    /// `$JS.API.SERVER.REMOVE` (`{"peer": server name}` or `{"peer_id": its hash}`), as
    /// nats-server 2.15: from the system account only, answered by the meta leader once the
    /// server has left the meta group; its streams then get another node in its place where
    /// one fits (fewer copies otherwise). A removed server that is still running says hello
    /// again and is added back: remove servers that are gone.
    pub(super) fn server_remove(&self, srv: &Arc<ServerShared>, ev: &Event) {
        const T: &str = "meta_server_remove_response";
        let (Some(meta), Some(reply)) = (self.meta().cloned(), ev.reply.clone()) else {
            return;
        };
        if !self.is_meta_leader() || &*ev.acc != srv.system_account_name() {
            return;
        }
        let acc = ev.acc.to_string();
        let fail = |e: ApiError| send(srv, &acc, &reply, &err_json(T, &e, ""));
        let req = match peer_request(&ev.payload) {
            Ok(r) => r,
            Err(e) => return fail(e),
        };
        let named = |id: NodeId| {
            let name = self.name_of(id);
            match (&req.peer_id, &req.peer) {
                (Some(p), _) if !p.is_empty() => super::server_hash(&name) == *p,
                (_, Some(n)) => !n.is_empty() && name == *n,
                _ => false,
            }
        };
        let Some(id) = meta.members().into_iter().find(|id| named(*id)) else {
            return fail(ApiError::new(
                400,
                10044,
                "server is not a member of the cluster",
            ));
        };
        // Its last hello is forgotten: one from before the removal (it may be a second
        // old, a server just stopped) must not add it back; only a new one does.
        lock(&self.peers).remove(&id);
        let moves = self.moves_without(id);
        let srv2 = srv.clone();
        srv.tasks.spawn(async move {
            if let Err(e) = meta.remove_member(id).await {
                let e = ApiError::new(500, 10041, e.to_string());
                send(&srv2, &acc, &reply, &err_json(T, &e, ""));
                return;
            }
            tracing::info!("JetStream cluster: server {id} removed from the meta group");
            let mut ok = Obj::typed(T);
            ok.field("success", &true);
            send(&srv2, &acc, &reply, &ok.done());
            for entry in moves {
                let data = serde_json::to_vec(&entry).unwrap_or_default();
                if let Err(e) = meta.propose(data).await {
                    tracing::warn!("JetStream cluster: moving a stream off a removed server: {e}");
                }
            }
        });
    }

    /// The `StreamPeers` entries that move every stream off node `gone`: another node in
    /// its place where one fits, the others alone otherwise (a stream only there stays).
    fn moves_without(&self, gone: NodeId) -> Vec<MetaEntry> {
        let ms = lock(&self.meta_state);
        ms.streams
            .values()
            .flat_map(|m| m.values())
            .filter(|sa| sa.peers.iter().any(|p| p.0 == gone) && sa.peers.len() > 1)
            .map(|sa| {
                let peers = self
                    .replace_peer(&ms, sa, gone)
                    .unwrap_or_else(|_| sa.peers.iter().filter(|p| p.0 != gone).cloned().collect());
                moved(sa, peers)
            })
            .collect()
    }

    /// `sa`'s peers with `gone` replaced by another node that fits the stream's placement
    /// (the removed node is no candidate).
    fn replace_peer(
        &self,
        ms: &MetaState,
        sa: &StreamAssignment,
        gone: NodeId,
    ) -> Result<Vec<(NodeId, String)>, PlaceError> {
        let mut cands = self.candidates(ms);
        cands.retain(|c| c.id != gone);
        let kept: Vec<(NodeId, String)> =
            sa.peers.iter().filter(|p| p.0 != gone).cloned().collect();
        let unique = self
            .srv
            .upgrade()
            .and_then(|s| s.opts.jetstream.as_ref().and_then(|j| j.unique_tag.clone()));
        placement::select(
            &sa.name,
            sa.peers.len(),
            &Spec::of(sa.config.get("placement")),
            &self.cluster_name,
            unique.as_deref(),
            &cands,
            &kept,
        )
    }

    /// Proposes a `StreamPeers` entry; answers `done` once committed (when given) or the
    /// failure.
    fn propose_peers(
        &self,
        srv: &Arc<ServerShared>,
        entry: MetaEntry,
        acc: String,
        reply: String,
        ty: &'static str,
        done: Option<String>,
    ) {
        let Some(meta) = self.meta().cloned() else {
            return send(srv, &acc, &reply, &err_json(ty, &unavailable(), ""));
        };
        let srv2 = srv.clone();
        srv.tasks.spawn(async move {
            let data = serde_json::to_vec(&entry).unwrap_or_default();
            let out = match meta.propose(data).await {
                Ok(r) if r.first() == Some(&b'+') => done,
                Ok(_) => Some(err_json(ty, &ApiError::stream_not_found(), "")),
                Err(e) => {
                    tracing::debug!("JetStream: stream peers proposal: {e}");
                    Some(err_json(ty, &unavailable(), ""))
                }
            };
            if let Some(out) = out {
                send(&srv2, &acc, &reply, &out);
            }
        });
    }
}

/// The `StreamPeers` entry that gives `sa` the peers `peers`, its configuration unchanged.
fn moved(sa: &StreamAssignment, peers: Vec<(NodeId, String)>) -> MetaEntry {
    MetaEntry::StreamPeers {
        account: sa.account.clone(),
        name: sa.name.clone(),
        group: sa.group.clone(),
        peers,
        config: sa.config.clone(),
        reply: String::new(),
        at: now_nanos(),
    }
}
