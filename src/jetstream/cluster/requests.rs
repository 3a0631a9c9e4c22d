//! Which node answers a `$JS.API` request in a JetStream cluster, and the requests only a
//! cluster has: every node gets each request; exactly one answers.
//!
//! - The meta leader: account INFO, STREAM.NAMES/LIST, STREAM.CREATE (placed and proposed
//!   to the meta group; the stream's first leader answers), STREAM.DELETE (answered once
//!   committed), and anything about a stream that does not exist.
//! - A stream's leader: everything else about it. PURGE, MSG.DELETE and UPDATE go through
//!   the stream's log (every replica applies them; the leader answers), as do consumer
//!   creations and deletions; the rest (INFO, MSG.GET, DIRECT.GET, consumer lists) is
//!   answered from its copy.
//! - A consumer's own leader (`cgroups.rs`): its INFO, MSG.NEXT and LEADER.STEPDOWN.

use std::sync::Arc;

use super::meta::{MetaEntry, StreamAssignment};
use super::JsCluster;
use crate::jetstream::consumer::Cx;
use crate::jetstream::engine::{body, err_json, Engine};
use crate::jetstream::stream;
use crate::jetstream::types::{now_nanos, ApiError, Obj, StreamConfig};
use crate::jetstream::Event;
use crate::server::ServerShared;

/// A CONSUMER.CREATE body without a consumer name gets one here, so that every replica
/// creates the same consumer (each would draw its own name). Anything unreadable is left
/// as it is: every replica refuses it alike.
fn named_ephemeral(payload: &bytes::Bytes) -> bytes::Bytes {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return payload.clone();
    };
    let Some(cfg) = v.get_mut("config").and_then(|c| c.as_object_mut()) else {
        return payload.clone();
    };
    let named = |k: &str| {
        cfg.get(k)
            .and_then(|n| n.as_str())
            .is_some_and(|n| !n.is_empty())
    };
    if named("name") || named("durable_name") {
        return payload.clone();
    }
    cfg.insert(
        "name".into(),
        crate::jetstream::engine::random_name().into(),
    );
    serde_json::to_vec(&v).map_or_else(|_| payload.clone(), bytes::Bytes::from)
}

/// The stream a request is about, from its subject's tokens after `$JS.API.`.
fn stream_of<'a>(t: &[&'a str]) -> Option<&'a str> {
    match t {
        ["STREAM", "MSG", _, s] => Some(s),
        ["STREAM", "LEADER", "STEPDOWN", s] | ["STREAM", "PEER", "REMOVE", s] => Some(s),
        ["STREAM", _, s] => Some(s),
        ["CONSUMER", "DURABLE", "CREATE", s, ..] => Some(s),
        ["CONSUMER", "MSG", "NEXT", s, ..] => Some(s),
        ["CONSUMER", "LEADER", "STEPDOWN", s, ..] => Some(s),
        ["CONSUMER", _, s, ..] => Some(s),
        ["DIRECT", "GET", s, ..] => Some(s),
        _ => None,
    }
}

pub(super) fn send(srv: &Arc<ServerShared>, account: &str, reply: &str, body: &str) {
    if let Some(acc) = srv.accounts.get(account) {
        Cx::new(srv, &acc).send(reply, None, None, body.as_bytes());
    }
}

pub(super) fn unavailable() -> ApiError {
    ApiError::new(503, 10008, "JetStream system temporarily unavailable")
}

impl JsCluster {
    /// See the module's text. `true`: handled here (or not ours).
    pub(super) fn api(&self, engine: &mut Engine, srv: &Arc<ServerShared>, ev: &Event) -> bool {
        let Some(rest) = ev.subject.strip_prefix("$JS.API.") else {
            // `$JS.SNAPSHOT.ACK.…`: a snapshot's flow control, to the node sending it (the
            // stream's leader; the others have no such transfer and ignore it).
            return false;
        };
        let t: Vec<&str> = rest.split('.').collect();
        let meta_leader = self.is_meta_leader();
        let acc = &*ev.acc;
        match t.as_slice() {
            // The meta leader's engine answers, counting the streams assigned elsewhere too.
            ["INFO"] if meta_leader => {
                let ms = crate::jetstream::cluster::lock(&self.meta_state);
                let held = engine.accounts.get(acc).map(|ja| &ja.streams);
                // `limit_view` with no name left out walks `account_streams` in its order.
                engine.elsewhere = ms
                    .limit_view(acc, "")
                    .into_iter()
                    .zip(ms.account_streams(acc))
                    .filter(|(_, sa)| held.is_none_or(|h| !h.contains_key(&sa.name)))
                    .map(
                        |((storage, max_bytes, replicas), _)| crate::jetstream::limits::Assigned {
                            storage,
                            max_bytes,
                            replicas,
                        },
                    )
                    .collect();
                return false;
            }
            ["STREAM", "CREATE", s] => {
                if meta_leader {
                    self.create_stream(engine, srv, ev, s, None);
                }
                return true;
            }
            ["STREAM", "NAMES"] | ["STREAM", "LIST"] => {
                if meta_leader {
                    self.list_streams(engine, srv, ev, t[1] == "NAMES");
                }
                return true;
            }
            // A snapshot is read from the stream leader's copy (below); a restore places a
            // new stream whose leader takes the data (restore.rs).
            ["STREAM", "RESTORE", s] => {
                if meta_leader {
                    self.restore_stream(engine, srv, ev, s);
                }
                return true;
            }
            _ => {}
        }
        let Some(s) = stream_of(&t) else {
            // INFO, STREAM.NAMES, STREAM.LIST, account purge, templates: the meta leader.
            return !meta_leader;
        };
        let assigned = crate::jetstream::cluster::lock(&self.meta_state)
            .stream(acc, s)
            .cloned();
        let Some(sa) = assigned else {
            // No such stream: the meta leader says so (its engine has no copy either).
            return !meta_leader;
        };
        match t.as_slice() {
            ["STREAM", "DELETE", _] => {
                if meta_leader {
                    self.delete_stream(srv, ev, &sa);
                }
                return true;
            }
            // A new replica count moves the stream's peers: the meta group decides
            // (`scale.rs`); the stream's leader then applies the configuration.
            ["STREAM", "UPDATE", _] if replicas_change(&sa, &ev.payload) => {
                if meta_leader {
                    self.update_peers(engine, srv, ev, &sa);
                }
                return true;
            }
            ["STREAM", "PEER", "REMOVE", _] => {
                if meta_leader {
                    self.peer_remove(srv, ev, &sa);
                }
                return true;
            }
            _ => {}
        }
        // About one consumer: its own group's leader answers (`cgroups.rs`). A consumer
        // this node's copy of the stream does not know is the stream leader's to refuse.
        if let ["CONSUMER", "INFO", _, c]
        | ["CONSUMER", "MSG", "NEXT", _, c]
        | ["CONSUMER", "LEADER", "STEPDOWN", _, c] = t.as_slice()
        {
            let known = engine
                .accounts
                .get(acc)
                .and_then(|ja| ja.streams.get(s))
                .is_some_and(|st| st.consumers.contains_key(*c));
            if known {
                // A consumer just created, whose group has had no leader yet: the stream's
                // leader, which bootstraps that group, answers INFO from its copy (as
                // nats-server's preferred member does), so a client that reads the
                // consumer right after creating it gets an answer.
                if t[1] == "INFO"
                    && self.consumer_unled_yet(acc, s, c)
                    && self
                        .replica_group(acc, s)
                        .is_some_and(|g| super::group_leads(&g))
                {
                    return false;
                }
                let Some(cg) = self.consumer_group(acc, s, c) else {
                    return true; // its group is not open here yet
                };
                if !super::group_leads(&cg) {
                    // A member that knows no leader says so (nats-server 2.15.1's 503
                    // between a stepdown and the next leader); the others leave it to
                    // the leader.
                    if t[1] == "INFO" && self.consumer_leaderless(acc, s, c) {
                        if let Some(reply) = &ev.reply {
                            let ty = "consumer_info_response";
                            send(srv, acc, reply, &err_json(ty, &unavailable(), ""));
                        }
                    }
                    return true;
                }
                if t[1] == "LEADER" {
                    let ids = cg.members();
                    let ty = "consumer_leader_stepdown_response";
                    if ids.len() <= 1 {
                        // An R1 consumer: nats-server 2.15.1 says success; nothing moves.
                        if let Some(reply) = &ev.reply {
                            send(srv, acc, reply, &success(ty));
                        }
                        return true;
                    }
                    self.placed_stepdown(srv, ev, cg, Some(&ids), ty);
                    return true;
                }
                return false;
            }
        }
        let Some(group) = self.replica_group(acc, s) else {
            return true; // held elsewhere
        };
        match t.as_slice() {
            _ if !super::group_leads(&group) => true,
            ["STREAM", "LEADER", "STEPDOWN", _] => {
                let ids: Vec<_> = sa.peers.iter().map(|p| p.0).collect();
                self.placed_stepdown(
                    srv,
                    ev,
                    group,
                    Some(&ids),
                    "stream_leader_stepdown_response",
                );
                true
            }
            // Not a consumer this copy knows (above): nats-server's 404.
            ["CONSUMER", "LEADER", "STEPDOWN", _, _] => {
                const T: &str = "consumer_leader_stepdown_response";
                if let Some(reply) = &ev.reply {
                    send(
                        srv,
                        acc,
                        reply,
                        &err_json(T, &ApiError::consumer_not_found(), ""),
                    );
                }
                true
            }
            ["STREAM", "UPDATE", _] | ["STREAM", "PURGE", _] | ["STREAM", "MSG", "DELETE", _] => {
                self.propose_api(acc, s, ev);
                true
            }
            // Every replica holds every consumer (`engine/replica.rs`): created and deleted
            // through the log, in order with the messages.
            ["CONSUMER", "CREATE", _] => {
                self.propose_api_with(acc, s, ev, named_ephemeral(&ev.payload));
                true
            }
            ["CONSUMER", "CREATE", ..]
            | ["CONSUMER", "DURABLE", "CREATE", ..]
            | ["CONSUMER", "DELETE", ..] => {
                self.propose_api(acc, s, ev);
                true
            }
            _ => false,
        }
    }

    /// STREAM.CREATE on the meta leader: nats-server's checks, placement, the proposal.
    /// `restore`: the configuration of a STREAM.RESTORE (restore.rs), placed the same way.
    pub(super) fn create_stream(
        &self,
        engine: &Engine,
        srv: &Arc<ServerShared>,
        ev: &Event,
        name: &str,
        restore: Option<StreamConfig>,
    ) {
        let is_restore = restore.is_some();
        let t = if is_restore {
            "stream_restore_response"
        } else {
            "stream_create_response"
        };
        let Some(reply) = ev.reply.clone() else {
            return;
        };
        let acc = ev.acc.to_string();
        let fail = |e: ApiError| send(srv, &acc, &reply, &err_json(t, &e, ""));
        if !engine.accounts.contains_key(&acc) {
            return fail(ApiError::new(
                503,
                10039,
                "JetStream not enabled for account",
            ));
        }
        let mut cfg: StreamConfig = match restore {
            Some(c) => c,
            None if ev.payload.iter().all(u8::is_ascii_whitespace) => {
                return fail(ApiError::invalid_json())
            }
            None => match body(&ev.payload) {
                Ok(c) => c,
                Err(e) => return fail(e),
            },
        };
        if cfg.name != name {
            return fail(ApiError::stream_mismatch());
        }
        let dw = crate::jetstream::engine::srv_js_limits(srv).duplicate_window;
        stream::default_duplicates(&mut cfg, dw);
        stream::apply_defaults(&mut cfg);
        if let Err(e) = stream::check(&cfg, srv.opts.max_payload, true)
            .and_then(|()| stream::check_duplicates(&cfg, dw))
        {
            return fail(e);
        }
        let replicas = cfg.num_replicas.max(1) as usize;
        // Mirrors and sources copy through the log (copier.rs); a start time needs a
        // lookup by time in the origin, which MSG.GET does not offer.
        match crate::jetstream::mirror::parse(&cfg) {
            Err(e) => return fail(e),
            Ok(Some(f)) if f.list.iter().any(|f| f.origin.start_time.is_some()) => {
                return fail(ApiError::stream_config(
                    "opt_start_time on mirrors and sources is not supported in a natsd JetStream cluster yet",
                ))
            }
            Ok(_) => {}
        }
        let config = match serde_json::to_value(&cfg) {
            Ok(v) => v,
            Err(e) => return fail(ApiError::new(500, 10049, e.to_string())),
        };
        {
            let ms = crate::jetstream::cluster::lock(&self.meta_state);
            if let Some(ja) = engine.accounts.get(&acc) {
                let others = ms.limit_view(&acc, name);
                if let Err(e) = crate::jetstream::limits::check_clustered(
                    &ja.limits,
                    &others,
                    &cfg,
                    ms.stream(&acc, name).is_none(),
                ) {
                    return fail(e);
                }
            }
            if let Some(old) = ms.stream(&acc, name) {
                if is_restore {
                    return fail(ApiError::new(
                        400,
                        10130,
                        "stream name already in use, cannot restore",
                    ));
                }
                if old.config == config {
                    let mut o = Obj::typed(t);
                    let st = engine
                        .accounts
                        .get(&acc)
                        .and_then(|ja| ja.streams.get(name));
                    match st {
                        Some(st) => {
                            st.info_fields(&mut o, None);
                            // A copy whose group has not reported yet has no cluster info
                            // (the repeat came right after the first create): name the
                            // group as a node outside it would.
                            let known = st
                                .replica
                                .as_ref()
                                .is_some_and(|r| !r.cluster_json.is_empty());
                            if !known {
                                o.raw("cluster", &self.outside_cluster_json(old));
                            }
                        }
                        None => {
                            o.raw("config", &config.to_string())
                                .raw("cluster", &self.outside_cluster_json(old));
                        }
                    }
                    send(srv, &acc, &reply, &o.done());
                    return;
                }
                return fail(ApiError::new(
                    400,
                    10058,
                    "stream name already in use with a different configuration",
                ));
            }
            let overlap = ms.account_streams(&acc).any(|o| {
                let subjects = |v: &serde_json::Value| -> Vec<String> {
                    v.get("subjects")
                        .and_then(|s| serde_json::from_value(s.clone()).ok())
                        .unwrap_or_default()
                };
                subjects(&o.config).iter().any(|a| {
                    cfg.subjects
                        .iter()
                        .any(|b| crate::subject::overlaps(a.as_bytes(), b.as_bytes()))
                })
            });
            if overlap {
                return fail(ApiError::new(
                    400,
                    10065,
                    "subjects overlap with an existing stream",
                ));
            }
        }
        let peers = match self.place(&cfg, replicas, &[]) {
            Ok(p) => p,
            Err(e) => return fail(ApiError::new(400, 10005, e.to_string())),
        };
        let sa = StreamAssignment {
            account: acc.clone(),
            name: name.to_string(),
            config,
            peers,
            group: group_name(name, replicas),
            reply: reply.clone(),
            created: now_nanos(),
            initial: None,
            update: None,
            updated: 0,
            restore: is_restore,
        };
        let Some(meta) = self.meta().cloned() else {
            return fail(unavailable());
        };
        let srv = srv.clone();
        srv.tasks.spawn({
            let srv = srv.clone();
            async move {
                let entry = serde_json::to_vec(&MetaEntry::StreamAdd(sa)).unwrap_or_default();
                match meta.propose(entry).await {
                    Ok(r) if r.first() == Some(&b'+') => {} // the stream's leader answers
                    Ok(_) => send(
                        &srv,
                        &acc,
                        &reply,
                        &err_json(
                            t,
                            &if is_restore {
                                ApiError::new(
                                    400,
                                    10130,
                                    "stream name already in use, cannot restore",
                                )
                            } else {
                                ApiError::new(
                                    400,
                                    10058,
                                    "stream name already in use with a different configuration",
                                )
                            },
                            "",
                        ),
                    ),
                    Err(e) => {
                        tracing::debug!("JetStream: stream create proposal: {e}");
                        send(&srv, &acc, &reply, &err_json(t, &unavailable(), ""));
                    }
                }
            }
        });
    }

    /// STREAM.NAMES / STREAM.LIST on the meta leader, from the assignments (a stream this
    /// node holds no copy of is listed with its configuration and an empty state).
    fn list_streams(&self, engine: &Engine, srv: &Arc<ServerShared>, ev: &Event, names: bool) {
        #[derive(serde::Deserialize, Default)]
        struct ListReq {
            #[serde(default)]
            offset: usize,
            #[serde(default)]
            subject: Option<String>,
        }
        let t = if names {
            "stream_names_response"
        } else {
            "stream_list_response"
        };
        let Some(reply) = ev.reply.as_deref() else {
            return;
        };
        let acc = &*ev.acc;
        let req: ListReq = match body(&ev.payload) {
            Ok(r) => r,
            Err(e) => return send(srv, acc, reply, &err_json(t, &e, "")),
        };
        let ms = crate::jetstream::cluster::lock(&self.meta_state);
        let matching: Vec<&StreamAssignment> = ms
            .account_streams(acc)
            .filter(
                |sa| match req.subject.as_deref().filter(|x| !x.is_empty()) {
                    None => true,
                    Some(f) => sa
                        .config
                        .get("subjects")
                        .and_then(|v| v.as_array())
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str())
                        .any(|x| crate::subject::overlaps(x.as_bytes(), f.as_bytes())),
                },
            )
            .collect();
        let limit = if names { 1024 } else { 256 };
        let page = matching.iter().skip(req.offset).take(limit);
        let mut o = Obj::typed(t);
        o.field("total", &matching.len())
            .field("offset", &req.offset)
            .field("limit", &limit);
        if names {
            let v: Vec<&str> = page.map(|sa| sa.name.as_str()).collect();
            o.field("streams", &(!v.is_empty()).then_some(v));
        } else {
            let local = engine.accounts.get(acc);
            let v: Vec<String> = page
                .map(|sa| {
                    let mut x = Obj::new();
                    match local.and_then(|ja| ja.streams.get(&sa.name)) {
                        Some(st) => st.info_fields(&mut x, None),
                        None => {
                            x.raw("config", &sa.config.to_string()).raw(
                                "state",
                                r#"{"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z","last_seq":0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0}"#,
                            );
                        }
                    }
                    x.done()
                })
                .collect();
            o.raw("streams", &format!("[{}]", v.join(",")));
        }
        send(srv, acc, reply, &o.done());
    }

    /// STREAM.DELETE on the meta leader: answered once the meta group has it.
    fn delete_stream(&self, srv: &Arc<ServerShared>, ev: &Event, sa: &StreamAssignment) {
        const T: &str = "stream_delete_response";
        let (Some(meta), Some(reply)) = (self.meta().cloned(), ev.reply.clone()) else {
            return;
        };
        let entry = MetaEntry::StreamDel {
            account: sa.account.clone(),
            name: sa.name.clone(),
        };
        let acc = sa.account.clone();
        let srv2 = srv.clone();
        srv.tasks.spawn(async move {
            let entry = serde_json::to_vec(&entry).unwrap_or_default();
            let out = match meta.propose(entry).await {
                Ok(_) => success(T),
                Err(e) => {
                    tracing::debug!("JetStream: stream delete proposal: {e}");
                    err_json(T, &unavailable(), "")
                }
            };
            send(&srv2, &acc, &reply, &out);
        });
    }

    /// `$JS.API.META.LEADER.STEPDOWN`, as nats-server 2.15.1: from the system account only
    /// (any other gets no answer, and a warning is logged), answered by the meta leader once
    /// it has stepped down; with a `placement`, to the member it names or fits
    /// (transfer.rs).
    pub(super) fn meta_stepdown(&self, srv: &Arc<ServerShared>, ev: &Event) {
        const T: &str = "meta_leader_stepdown_response";
        if !self.is_meta_leader() {
            return;
        }
        if &*ev.acc != srv.system_account_name() {
            tracing::warn!(
                "JetStream API stepdown request from non-system account: {:?}",
                &*ev.acc
            );
            return;
        }
        if ev.reply.is_none() {
            return;
        }
        let Some(meta) = self.meta().cloned() else {
            return;
        };
        self.placed_stepdown(srv, ev, meta, None, T);
    }

    /// A stepdown, to the member the request's placement names or fits among `members`
    /// (`None`: the meta group's), answered with response type `ty`.
    fn placed_stepdown(
        &self,
        srv: &Arc<ServerShared>,
        ev: &Event,
        group: crate::raft::Group,
        members: Option<&[crate::raft::NodeId]>,
        ty: &'static str,
    ) {
        match self.stepdown_target(&ev.payload, members) {
            Err(e) => {
                if let Some(reply) = &ev.reply {
                    send(srv, &ev.acc, reply, &err_json(ty, &e, ""));
                }
            }
            Ok(to) => self.stepdown(srv, ev, group, ty, to),
        }
    }

    /// Steps `group`'s leader down, answering with response type `ty` as soon as the
    /// step-down has begun (nats-server answers once its leader has stepped down, before
    /// the next one is elected; natsd's handover goes on in the background). A request
    /// while one is under way is answered the same, the leader being on its way out, unless
    /// it names a preferred member: that one is not honoured, so it is refused. With
    /// `prefer`, the other members are told to hold their elections first.
    fn stepdown(
        &self,
        srv: &Arc<ServerShared>,
        ev: &Event,
        group: crate::raft::Group,
        ty: &'static str,
        prefer: Option<crate::raft::NodeId>,
    ) {
        let begun = group.begin_step_down(prefer);
        let out = match (&begun, prefer) {
            (Ok(_), Some(to)) => {
                self.hold_elections(srv, &group, to);
                success(ty)
            }
            (Ok(_) | Err(crate::raft::ProposeError::HandingOver), None) => success(ty),
            (Err(e), _) => err_json(ty, &ApiError::new(400, 10009, e.to_string()), ""),
        };
        if let Some(reply) = &ev.reply {
            send(srv, &ev.acc, reply, &out);
        }
        if let Ok(step) = begun {
            srv.tasks.spawn(async move {
                if let Err(e) = step.run().await {
                    tracing::warn!(group = %group.name(), "leader stepdown: {e}");
                }
            });
        }
    }
}

/// `{"type": ty, "success": true}`.
fn success(ty: &str) -> String {
    let mut o = Obj::typed(ty);
    o.field("success", &true);
    o.done()
}

/// A stream group's name: the stream's, cut to a subject token, with its replica count and
/// a random suffix (a stream created again after a delete gets a new group).
fn group_name(stream: &str, replicas: usize) -> String {
    let clean: String = stream
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(32)
        .collect();
    format!("S-R{replicas}-{clean}-{:08x}", rand::random::<u32>())
}

/// Whether an update asks for another replica count than the stream has (an unreadable
/// body does not: the stream's leader refuses it as a single server would).
fn replicas_change(sa: &StreamAssignment, payload: &[u8]) -> bool {
    body::<StreamConfig>(payload).is_ok_and(|c| c.num_replicas.max(1) as usize != sa.replicas())
}
