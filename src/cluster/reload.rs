//! Config reload of the route pool size, pinned accounts and compression (nats-server 2.10+
//! `reload.go` `clusterOption` / `reloadClusterPoolAndAccounts`; docs/nats-server-behaviour.md
//! section 24). The mesh decides which connections close and what is dialled again
//! (`Event::Reconfigure`); each route task re-checks its own connection (compression level or
//! close, interest of accounts it no longer or newly carries) when `reconf` moves.
//!
//! A newly pinned account is announced to every pooled peer first, as nats-server does:
//! `INFO {"route_pool_size":N,"route_account":"A","route_acc_add_reqid":"…"}` on a route to
//! it. The peer pins the account from then on (it accepts and dials its dedicated routes),
//! drops the interest it learned for it on pool routes and answers with the same INFO without
//! `route_account`; the answer lets us dial a peer that refused the account before.

use super::mesh::Event;
use super::{lock, Cluster, RouteEntry};
use crate::config::reload::ClusterChange;
use crate::proto::info::ServerInfo;
use crate::server::ServerShared;
use std::sync::Arc;

impl Cluster {
    /// Apply a reload's cluster change.
    pub fn reconfigure(self: &Arc<Self>, srv: &Arc<ServerShared>, ch: &ClusterChange) {
        if let Some(c) = &ch.compression {
            *self.compression.write().unwrap_or_else(|e| e.into_inner()) = c.clone();
        }
        let accounts = !ch.accounts_added.is_empty() || !ch.accounts_removed.is_empty();
        if ch.pool_changed || accounts {
            let pool = usize::try_from(ch.pool_size).ok().filter(|n| *n > 0);
            let pinned = {
                let mut reg = lock(&self.routes);
                let was: Vec<String> = reg.pinned.iter().cloned().collect();
                reg.pool = pool;
                // Accounts a peer announced stay pinned (nats-server keeps them in its
                // `accRoutes`), unless this reload removes them or pooling stops.
                reg.pinned
                    .retain(|a| pool.is_some() && !ch.accounts_removed.contains(a));
                reg.pinned.extend(ch.pinned.iter().cloned());
                *lock(&self.unpinned) = was
                    .into_iter()
                    .filter(|a| !reg.pinned.contains(a))
                    .collect();
                let mut v: Vec<Arc<str>> =
                    reg.pinned.iter().map(|a| Arc::from(a.as_str())).collect();
                v.sort();
                v
            };
            if let Some(n) = pool {
                for a in &ch.accounts_added {
                    self.announce_pinned(n, a);
                }
            }
            let ev = Event::Reconfigure {
                pool_size: pool.map_or(-1, |n| n as i32),
                pinned,
            };
            self.feed(srv, ev, None);
        }
        self.reconf.send_modify(|g| *g += 1);
    }

    /// Tell every pooled peer that `account` has routes of its own from now on.
    fn announce_pinned(&self, pool: usize, account: &str) {
        let reqid = crate::util::ids::nonce();
        lock(&self.acc_add_reqs).insert(reqid.clone());
        let info = ServerInfo {
            route_pool_size: pool as u32,
            route_account: account.to_string(),
            route_acc_add_reqid: reqid,
            ..Default::default()
        };
        let line = info_line(&info);
        for p in lock(&self.routes).values() {
            if let Some(r) = p.primary().filter(|r| !r.no_pool) {
                r.conn
                    .out
                    .push_now(line.len(), |b| b.extend_from_slice(&line));
            }
        }
    }

    /// An INFO with `route_acc_add_reqid` on `from`: a peer's announcement that it pins an
    /// account now (answered on the same connection), or its answer to ours.
    pub(crate) fn on_pinned_note(
        self: &Arc<Self>,
        srv: &Arc<ServerShared>,
        from: &RouteEntry,
        mut info: ServerInfo,
    ) {
        let peer: Arc<str> = Arc::from(from.remote_id.as_str());
        if info.route_account.is_empty() {
            if lock(&self.acc_add_reqs).contains(&info.route_acc_add_reqid) {
                self.feed(srv, Event::PeerPins { id: peer }, None);
            }
            return;
        }
        let account = std::mem::take(&mut info.route_account);
        if srv.accounts.lookup(account.as_bytes()).is_none() {
            tracing::error!("Error looking up account {account:?}: account not found");
            return;
        }
        let (pool, pinned, added) = {
            let mut reg = lock(&self.routes);
            let added = reg.pool.is_some() && reg.pinned.insert(account.clone());
            let mut v: Vec<Arc<str>> = reg.pinned.iter().map(|a| Arc::from(a.as_str())).collect();
            v.sort();
            (reg.pool, v, added)
        };
        tracing::debug!(
            "{} - Account {account:?} now has dedicated routes",
            from.conn.log_prefix()
        );
        // The answer: the same INFO without the account.
        let line = info_line(&info);
        from.conn
            .out
            .push_now(line.len(), |b| b.extend_from_slice(&line));
        if added {
            let ev = Event::Reconfigure {
                pool_size: pool.map_or(-1, |n| n as i32),
                pinned,
            };
            self.feed(srv, ev, None);
            // Pool routes drop the interest they learned for it.
            self.reconf.send_modify(|g| *g += 1);
        }
        self.feed(srv, Event::PeerPins { id: peer }, None);
    }

    /// Accounts the latest reload unpinned: pool routes that carry them now send their
    /// interest (nats-server `sendSubsToRoute`).
    pub(crate) fn unpinned(&self) -> Vec<String> {
        lock(&self.unpinned).clone()
    }
}

fn info_line(info: &ServerInfo) -> Vec<u8> {
    let json = serde_json::to_vec(info).unwrap_or_default();
    let mut line = Vec::with_capacity(json.len() + 8);
    line.extend_from_slice(b"INFO ");
    line.extend_from_slice(&json);
    line.extend_from_slice(b"\r\n");
    line
}
