//! The cluster-wide `/topz`: ask every reachable server for its routes
//! (`$SYS.REQ.SERVER.PING.ROUTEZ`, answered by natsd and nats-server nodes alike), turn each
//! answer into a `ServerView`, and merge them (`cluster::topology`). Servers seen before and
//! silent now stay in the graph as unreachable, so a stopped node shows as missing routes —
//! until a server with the same name answers under a new id (a restart) or `FORGET_AFTER`.

use super::Sys;
use crate::cluster::topology::{EdgeKind, Node, ServerView, Topology, Topz, ViewEdge};
use crate::server::ServerShared;
use crate::util::time::rfc3339_nano;
use bytes::Bytes;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// How long one gather waits for answers (it ends sooner once every server it has heard
/// of has answered).
pub const GATHER_WITHIN: Duration = Duration::from_millis(500);
/// `/metrics` refreshes the gathered view in the background when it is older than this.
pub const REFRESH_AFTER: Duration = Duration::from_secs(3);
/// A silent server is dropped from the graph after this long.
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

/// The last gathered graph and the servers seen so far.
#[derive(Default)]
pub struct Cache {
    inner: Mutex<CacheInner>,
    in_flight: AtomicBool,
}

#[derive(Default)]
struct CacheInner {
    last: Option<(Instant, Topology)>,
    /// Every server seen, with when it was last reachable.
    known: HashMap<String, (Node, Instant)>,
}

impl Cache {
    fn lock(&self) -> MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last gathered graph, if any, and its age.
    pub fn last(&self) -> Option<(Duration, Topology)> {
        self.lock()
            .last
            .as_ref()
            .map(|(at, t)| (at.elapsed(), t.clone()))
    }
}

/// One ROUTEZ answer (`{"server":{…},"data":{…routez…}}`) as a view.
pub fn view_of(answer: &[u8]) -> Option<ServerView> {
    let v: Value = serde_json::from_slice(answer).ok()?;
    let s = v.get("server")?;
    let d = v.get("data")?;
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let id = str_of(s, "id");
    if id.is_empty() {
        return None;
    }
    let cluster = str_of(s, "cluster");
    // A pooled peer has several route connections (pool slots, pinned accounts): one edge
    // with their count and the pinned accounts among them.
    let mut edges: Vec<ViewEdge> = Vec::new();
    for r in d
        .get("routes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let to = str_of(r, "remote_id");
        if to.is_empty() {
            continue;
        }
        let account = r
            .get("account")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            .map(str::to_string);
        if let Some(e) = edges.iter_mut().find(|e| e.to == to) {
            e.connections += 1;
            e.accounts.extend(account);
            continue;
        }
        edges.push(ViewEdge {
            from: id.clone(),
            to,
            to_name: str_of(r, "remote_name"),
            to_cluster: cluster.clone(),
            kind: EdgeKind::Route,
            did_solicit: r
                .get("did_solicit")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            is_configured: r
                .get("is_configured")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            rtt: r
                .get("rtt")
                .and_then(Value::as_str)
                .and_then(crate::config::file::parse_go_duration),
            connections: 1,
            accounts: account.into_iter().collect(),
        });
    }
    for e in &mut edges {
        e.accounts.sort();
    }
    Some(ServerView {
        server_id: id,
        server_name: str_of(s, "name"),
        cluster,
        edges,
    })
}

/// One GATEWAYZ answer as (server id, its gateway edges): outbound connections are dialled
/// by it, inbound ones accepted; `connection.name` is the remote server's id.
pub fn gateway_edges_of(answer: &[u8]) -> Option<(String, Vec<ViewEdge>)> {
    let v: Value = serde_json::from_slice(answer).ok()?;
    let id = v.get("server")?.get("id")?.as_str()?.to_string();
    let d = v.get("data")?;
    let edge = |cluster: &str, g: &Value, did_solicit: bool| -> Option<ViewEdge> {
        let c = g.get("connection")?;
        let to = c.get("name")?.as_str()?.to_string();
        if to.is_empty() {
            return None;
        }
        Some(ViewEdge {
            from: id.clone(),
            to,
            to_name: String::new(),
            to_cluster: cluster.to_string(),
            kind: EdgeKind::Gateway,
            did_solicit,
            is_configured: g
                .get("configured")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            rtt: c
                .get("rtt")
                .and_then(Value::as_str)
                .and_then(crate::config::file::parse_go_duration),
            connections: 1,
            accounts: Vec::new(),
        })
    };
    let mut edges = Vec::new();
    if let Some(out) = d.get("outbound_gateways").and_then(Value::as_object) {
        for (cluster, g) in out {
            edges.extend(edge(cluster, g, true));
        }
    }
    if let Some(inb) = d.get("inbound_gateways").and_then(Value::as_object) {
        for (cluster, list) in inb {
            for g in list.as_array().into_iter().flatten() {
                edges.extend(edge(cluster, g, false));
            }
        }
    }
    Some((id, edges))
}

/// True once every server named by the answers so far (and this one) has answered.
fn everyone_answered(own_id: &str, answers: &[Bytes]) -> bool {
    let views: Vec<ServerView> = answers.iter().filter_map(|a| view_of(a)).collect();
    let answered: BTreeSet<&str> = views.iter().map(|v| v.server_id.as_str()).collect();
    answered.contains(own_id)
        && views
            .iter()
            .flat_map(|v| v.edges.iter())
            .all(|e| answered.contains(e.to.as_str()))
}

/// Ask every server for its routes and merge the answers with the servers known before.
pub async fn gather(srv: &Arc<ServerShared>, sys: &Sys) -> Topology {
    let own = srv.id.clone();
    // In a super-cluster the servers of other clusters answer too: wait for every one this
    // server has a gateway connection with (inbound ones come from every remote server).
    let remote: BTreeSet<String> = crate::gateway::topology_edges(srv)
        .into_iter()
        .map(|e| e.to)
        .collect();
    let answers = sys
        .gather(
            srv,
            "$SYS.REQ.SERVER.PING.ROUTEZ",
            b"",
            GATHER_WITHIN,
            |a| {
                everyone_answered(&own, a) && {
                    let ids: BTreeSet<String> = a
                        .iter()
                        .filter_map(|x| view_of(x))
                        .map(|v| v.server_id)
                        .collect();
                    remote.iter().all(|r| ids.contains(r))
                }
            },
        )
        .await;
    let mut views: Vec<ServerView> = answers.iter().filter_map(|a| view_of(a)).collect();
    let mut seen = BTreeSet::new();
    views.retain(|v| seen.insert(v.server_id.clone()));
    if srv.gateway.is_some() {
        // A super-cluster: the same servers' gateway connections become gateway edges.
        let want: BTreeSet<String> = seen.clone();
        let gw_answers = sys
            .gather(
                srv,
                "$SYS.REQ.SERVER.PING.GATEWAYZ",
                b"",
                GATHER_WITHIN,
                |a| {
                    let got: BTreeSet<String> = a
                        .iter()
                        .filter_map(|x| gateway_edges_of(x))
                        .map(|g| g.0)
                        .collect();
                    want.iter().all(|id| got.contains(id))
                },
            )
            .await;
        let mut done = BTreeSet::new();
        for (id, edges) in gw_answers.iter().filter_map(|a| gateway_edges_of(a)) {
            if !done.insert(id.clone()) {
                continue;
            }
            if let Some(v) = views.iter_mut().find(|v| v.server_id == id) {
                v.edges.extend(edges);
            }
        }
    }
    if !views.iter().any(|v| v.server_id == srv.id) {
        // Our own answer always comes (echo), unless the service task is stalled: use the
        // local view rather than reporting ourselves missing.
        views.push(crate::monitor::routez::local_view(srv));
    }
    let now = Instant::now();
    let mut c = sys.topz.lock();
    let t = merge_with_known(&views, &mut c.known, now);
    c.last = Some((now, t.clone()));
    t
}

/// Merge `views` with the servers in `known` that did not answer, then remember every
/// reachable server. A known server is forgotten when another id answers under its name or
/// after `FORGET_AFTER` of silence.
fn merge_with_known(
    views: &[ServerView],
    known: &mut HashMap<String, (Node, Instant)>,
    now: Instant,
) -> Topology {
    let first = Topology::merge(views, &[]);
    let reachable: Vec<Node> = first.nodes().into_iter().filter(|n| n.reachable).collect();
    let names: HashMap<&str, &str> = reachable
        .iter()
        .filter(|n| !n.server_name.is_empty() && n.server_name != n.server_id)
        .map(|n| (n.server_name.as_str(), n.server_id.as_str()))
        .collect();
    known.retain(|id, (n, at)| {
        let renamed = names
            .get(n.server_name.as_str())
            .is_some_and(|other| *other != id.as_str());
        !renamed && now.duration_since(*at) < FORGET_AFTER
    });
    for n in &reachable {
        known.insert(n.server_id.clone(), (n.clone(), now));
    }
    let silent: Vec<Node> = known
        .values()
        .filter(|(n, _)| !reachable.iter().any(|r| r.server_id == n.server_id))
        .map(|(n, _)| Node {
            reachable: false,
            reported: false,
            ..n.clone()
        })
        .collect();
    if silent.is_empty() {
        first
    } else {
        Topology::merge(views, &silent)
    }
}

/// `/topz`: a fresh gather, or the local view when there are no system services.
pub async fn topz(srv: &Arc<ServerShared>) -> (Topz, Topology) {
    let now = rfc3339_nano(SystemTime::now());
    match srv.sys.get() {
        Some(sys) => {
            let t = gather(srv, sys).await;
            (Topz::of(&srv.id, now, "cluster", &t), t)
        }
        None => {
            let t = crate::monitor::routez::local_topology(srv);
            (Topz::of(&srv.id, now, "local", &t), t)
        }
    }
}

/// Whether the mesh is complete as last gathered, for `/metrics`: never waits. A view older
/// than `REFRESH_AFTER` (or none yet) starts one background gather; until one exists, the
/// local view answers.
pub fn mesh_complete(srv: &Arc<ServerShared>) -> bool {
    let Some(sys) = srv.sys.get() else {
        return crate::monitor::routez::local_topology(srv).complete();
    };
    let last = sys.topz.last();
    let stale = last.as_ref().is_none_or(|(age, _)| *age > REFRESH_AFTER);
    if stale && !srv.is_shutting_down() && !sys.topz.in_flight.swap(true, SeqCst) {
        let srv2 = srv.clone();
        srv.tasks.spawn(async move {
            if let Some(sys) = srv2.sys.get() {
                // Cleared however the gather ends (even cancelled at shutdown).
                struct Done<'a>(&'a AtomicBool);
                impl Drop for Done<'_> {
                    fn drop(&mut self) {
                        self.0.store(false, SeqCst);
                    }
                }
                let _done = Done(&sys.topz.in_flight);
                gather(&srv2, sys).await;
            }
        });
    }
    match last {
        Some((_, t)) => t.complete(),
        None => crate::monitor::routez::local_topology(srv).complete(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str, name: &str, peers: &[&str]) -> Vec<u8> {
        let routes: Vec<Value> = peers
            .iter()
            .map(|p| {
                serde_json::json!({"rid":1,"remote_id":p,"did_solicit":id < *p,
                    "is_configured":false,"rtt":"1.5ms"})
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "server":{"name":name,"host":"0.0.0.0","id":id,"cluster":"C1","ver":"2.9.10",
                "seq":1,"jetstream":false,"time":"t"},
            "data":{"server_id":id,"now":"t","num_routes":routes.len(),"routes":routes}
        }))
        .unwrap()
    }

    #[test]
    fn a_routez_answer_is_a_view() {
        let v = view_of(&answer("A", "a", &["B"])).unwrap();
        assert_eq!((v.server_id.as_str(), v.server_name.as_str()), ("A", "a"));
        assert_eq!(v.cluster, "C1");
        assert_eq!(v.edges.len(), 1);
        assert_eq!(v.edges[0].to, "B");
        assert!(v.edges[0].did_solicit);
        assert_eq!(v.edges[0].rtt, Some(Duration::from_micros(1500)));
        assert!(view_of(b"{}").is_none());
        assert!(view_of(b"not json").is_none());
    }

    #[test]
    fn gathering_ends_when_every_named_server_answered() {
        let a = Bytes::from(answer("A", "a", &["B"]));
        let b = Bytes::from(answer("B", "b", &["A", "C"]));
        let c = Bytes::from(answer("C", "c", &["B"]));
        assert!(!everyone_answered("A", std::slice::from_ref(&a)));
        assert!(!everyone_answered("A", &[a.clone(), b.clone()]));
        assert!(everyone_answered("A", &[a, b, c]));
    }

    #[test]
    fn silent_servers_stay_until_replaced_by_name() {
        let views = |xs: &[(&str, &str, &[&str])]| -> Vec<ServerView> {
            xs.iter()
                .map(|(id, n, p)| view_of(&answer(id, n, p)).unwrap())
                .collect()
        };
        let mut known = HashMap::new();
        let t0 = Instant::now();
        let full = views(&[
            ("A", "a", &["B", "C"]),
            ("B", "b", &["A", "C"]),
            ("C", "c", &["A", "B"]),
        ]);
        assert!(merge_with_known(&full, &mut known, t0).complete());
        assert_eq!(known.len(), 3);
        // C stops: A and B lose their routes to it, C does not answer.
        let t1 = t0 + Duration::from_secs(1);
        let two = views(&[("A", "a", &["B"]), ("B", "b", &["A"])]);
        let t = merge_with_known(&two, &mut known, t1);
        assert!(!t.complete());
        assert_eq!(t.missing.len(), 2);
        let c = t.nodes().into_iter().find(|n| n.server_id == "C").unwrap();
        assert!(!c.reachable);
        // C restarts as D (same name): the old id is forgotten.
        let t2 = t1 + Duration::from_secs(1);
        let back = views(&[
            ("A", "a", &["B", "D"]),
            ("B", "b", &["A", "D"]),
            ("D", "c", &["A", "B"]),
        ]);
        let t = merge_with_known(&back, &mut known, t2);
        assert!(t.complete(), "{:?}", t.missing);
        assert_eq!(t.nodes().len(), 3);
        // Long silence forgets too.
        let t3 = t2 + FORGET_AFTER + Duration::from_secs(1);
        let t = merge_with_known(&views(&[("A", "a", &[])]), &mut known, t3);
        assert!(t.complete());
        assert_eq!(t.nodes().len(), 1);
    }
}
