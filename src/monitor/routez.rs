//! `/routez`: the routes of this server, field for field as nats-server 2.9 (plus 2.10's
//! `server_name` / `remote_name`), with `subs=1|detail` listing the interest learned from each
//! route; and `/topz`, the cluster graph (`cluster::topology`) as this server sees it.

use super::connz::{SubDetail, SubsMode};
use crate::cluster::topology::{ServerView, Topology, Topz};
use crate::server::ServerShared;
use crate::util::time::{go_duration, rfc3339_nano, uptime};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Serialize, Debug)]
pub struct RouteInfo {
    pub rid: u64,
    pub remote_id: String,
    pub remote_name: String,
    pub did_solicit: bool,
    pub is_configured: bool,
    pub ip: String,
    pub port: u16,
    pub start: String,
    pub last_activity: String,
    pub rtt: String,
    pub uptime: String,
    pub idle: String,
    pub pending_size: usize,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub subscriptions: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscriptions_list_detail: Vec<SubDetail>,
    /// The pinned account of this connection (nats-server 2.10+).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub account: String,
    /// nats-server 2.10+'s negotiated route compression mode: `off`, `not supported` (a peer
    /// without compression) or the `s2_*` level in force.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub compression: String,
}

#[derive(Serialize, Debug)]
pub struct Routez {
    pub server_id: String,
    pub server_name: String,
    pub now: String,
    pub num_routes: usize,
    pub routes: Vec<RouteInfo>,
}

/// `subs`: absent/false, `1`/true (subjects), `detail`.
pub fn parse_subs(p: &HashMap<String, String>) -> Result<SubsMode, String> {
    match p.get("subs").map(String::as_str) {
        None | Some("" | "0" | "false" | "f" | "F" | "FALSE" | "False") => Ok(SubsMode::None),
        Some("detail") => Ok(SubsMode::Detail),
        Some("1" | "true" | "t" | "T" | "TRUE" | "True") => Ok(SubsMode::List),
        Some(v) => Err(format!("Error decoding subs: invalid boolean {v:?}")),
    }
}

/// Interest learned from routes, by route cid: one pass over every account's sublist (only
/// when `subs` is asked for; nothing on the message path).
fn remote_subs(srv: &ServerShared, rids: &[u64]) -> HashMap<u64, Vec<SubDetail>> {
    let mut by_rid: HashMap<u64, Vec<SubDetail>> = rids.iter().map(|r| (*r, Vec::new())).collect();
    for acc in srv.accounts.all() {
        acc.sublist.for_each(|subject, queue, e| {
            if let Some(v) = by_rid.get_mut(&e.conn.cid) {
                // A route's plain interest shares one entry per account: the subject and the
                // queue are the trie's; the sid is the route's key, `acc subject[ queue]`.
                let mut d = SubDetail::of(&acc.name, e);
                d.subject = String::from_utf8_lossy(subject).into_owned();
                d.qgroup =
                    queue.map_or_else(String::new, |q| String::from_utf8_lossy(q).into_owned());
                d.sid = match queue {
                    Some(_) => format!("{} {} {}", acc.name, d.subject, d.qgroup),
                    None => format!("{} {}", acc.name, d.subject),
                };
                v.push(d);
            }
        });
    }
    for v in by_rid.values_mut() {
        v.sort_by(|a, b| {
            (&a.account, &a.subject, &a.qgroup).cmp(&(&b.account, &b.subject, &b.qgroup))
        });
    }
    by_rid
}

pub fn routez(srv: &ServerShared, subs: SubsMode) -> Routez {
    let now = SystemTime::now();
    let routes = srv.cluster.as_ref().map(|c| c.routes()).unwrap_or_default();
    let mut details = if subs == SubsMode::None {
        HashMap::new()
    } else {
        let rids: Vec<u64> = routes.iter().map(|r| r.conn.cid).collect();
        remote_subs(srv, &rids)
    };
    let infos: Vec<RouteInfo> = routes
        .iter()
        .map(|r| {
            let c = &r.conn;
            let last = UNIX_EPOCH + Duration::from_nanos(c.last_activity.load(Relaxed));
            let start = c.start;
            let mut detail = details.remove(&c.cid).unwrap_or_default();
            let list = if subs == SubsMode::List {
                detail.drain(..).map(|s| s.subject).collect()
            } else {
                Vec::new()
            };
            RouteInfo {
                rid: c.cid,
                remote_id: r.remote_id.clone(),
                remote_name: r.remote_name.clone(),
                did_solicit: r.did_solicit,
                is_configured: r.is_configured,
                ip: c.addr.ip().to_string(),
                port: c.addr.port(),
                start: rfc3339_nano(start),
                last_activity: rfc3339_nano(last),
                rtt: go_duration(c.meta().rtt.unwrap_or_default()),
                uptime: uptime(now.duration_since(start).unwrap_or_default()),
                idle: uptime(now.duration_since(last).unwrap_or_default()),
                pending_size: c.out.pending(),
                in_msgs: c.counters.in_msgs.load(Relaxed),
                out_msgs: c.counters.out_msgs.load(Relaxed),
                in_bytes: c.counters.in_bytes.load(Relaxed),
                out_bytes: c.counters.out_bytes.load(Relaxed),
                subscriptions: r.num_subs.load(Relaxed),
                subscriptions_list: list,
                subscriptions_list_detail: detail,
                account: r.account.as_deref().unwrap_or_default().to_string(),
                compression: r.compression().as_str().to_string(),
            }
        })
        .collect();
    Routez {
        server_id: srv.id.clone(),
        server_name: srv.name.clone(),
        now: rfc3339_nano(now),
        num_routes: infos.len(),
        routes: infos,
    }
}

/// This server's own view: itself, its routes and its gateways.
pub fn local_view(srv: &ServerShared) -> ServerView {
    let mut view = match &srv.cluster {
        Some(cl) => ServerView::local(&srv.id, &srv.name, &cl.name(), &cl.routes()),
        None => ServerView {
            server_id: srv.id.clone(),
            server_name: srv.name.clone(),
            ..ServerView::default()
        },
    };
    view.edges.extend(crate::gateway::topology_edges(srv));
    if view.cluster.is_empty() {
        if let Some(gw) = &srv.gateway {
            view.cluster = gw.name.clone();
        }
    }
    view
}

/// The topology as this server alone sees it: itself and its routes (`/topz` without system
/// services; the cluster-wide one is `sys::topz`).
pub fn local_topology(srv: &ServerShared) -> Topology {
    Topology::merge(&[local_view(srv)], &[])
}

/// `/topz` with the local view only (`scope: "local"`).
pub fn topz(srv: &ServerShared) -> Topz {
    let t = local_topology(srv);
    Topz::of(&srv.id, rfc3339_nano(SystemTime::now()), "local", &t)
}
