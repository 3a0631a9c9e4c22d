//! `ServerShared` as the routing core sees it (`crate::fabric::Fabric`), and the startup step
//! that hands the core the account links it runs.

use super::ServerShared;
use crate::account::{Account, Accounts, Handler, SubRef, Subscription};
use crate::conn::Conn;
use crate::deliver::{Fanout, Msg, Origin};
use crate::fabric::{Fabric, Stats};
use crate::sublist::SublistResult;
use bytes::Bytes;
use std::sync::Arc;

impl Fabric for ServerShared {
    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn no_fast_producer_stall(&self) -> bool {
        self.no_fast_producer_stall
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    fn internal_conn(&self) -> &Arc<Conn> {
        &self.internal
    }

    #[inline]
    fn interest_changed_deferred(
        &self,
        acc: &Account,
        subject: &Bytes,
        queue: Option<&Bytes>,
        delta: i32,
        kicks: &mut Vec<Arc<Conn>>,
    ) {
        ServerShared::interest_changed_deferred(self, acc, subject, queue, delta, kicks);
    }

    fn has_gateways(&self) -> bool {
        self.gateway.is_some()
    }

    fn account_msg_trace(&self, acc: &str) -> Option<crate::config::AccountMsgTrace> {
        self.live_opts().account_msg_trace.get(acc).cloned()
    }

    #[inline]
    fn external_trace(&self) -> bool {
        self.external_trace
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn trace_server_info(&self) -> Option<serde_json::Value> {
        let sys = self.sys.get()?;
        serde_json::to_value(sys.server_info(self)).ok()
    }

    #[inline]
    fn to_gateways(
        &self,
        fan: &mut Fanout,
        acc: &Account,
        r: &SublistResult<SubRef>,
        m: &Msg<'_>,
    ) -> u64 {
        match &self.gateway {
            Some(gw) => gw.send(fan, acc, r, m),
            None => 0,
        }
    }
}

/// The server's own subscriptions and publishes (`crate::internal`), as methods.
impl ServerShared {
    /// The cluster's name, empty without a cluster (cluster-scoped subject mappings).
    pub fn cluster_name_or_empty(&self) -> String {
        self.cluster.as_ref().map(|c| c.name()).unwrap_or_default()
    }

    /// See [`crate::internal::subscribe`].
    pub fn subscribe_internal(
        &self,
        acc: &Account,
        subject: &str,
        queue: Option<&str>,
        handler: Handler,
    ) -> Result<Arc<Subscription>, String> {
        crate::internal::subscribe(self, acc, subject, queue, handler)
    }

    /// See [`crate::internal::unsubscribe`].
    pub fn unsubscribe_internal(&self, acc: &Account, sub: &Arc<Subscription>) {
        crate::internal::unsubscribe(self, acc, sub)
    }

    /// See [`crate::internal::publish`].
    pub fn publish_internal(self: &Arc<Self>, acc: &Account, m: &Msg<'_>) -> u64 {
        crate::internal::publish(self.clone(), acc, m)
    }

    /// See [`crate::internal::publish_to_others`].
    pub fn publish_internal_to_others(self: &Arc<Self>, acc: &Account, m: &Msg<'_>) -> u64 {
        crate::internal::publish_to_others(self.clone(), acc, m)
    }

    /// See [`crate::internal::origin`].
    pub fn internal_origin(&self) -> Origin {
        crate::internal::origin(self)
    }
}

impl ServerShared {
    /// Install the mappings of `o` in every account (a reload, an account JWT update), and
    /// tell the leaves which mapping sources came and went.
    pub fn install_mappings(&self, o: &crate::config::Options) {
        let before: Vec<(Arc<Account>, Vec<String>)> = match &self.leafnodes {
            Some(_) => self
                .accounts
                .all()
                .into_iter()
                .map(|a| {
                    let s = a.mappings.sources();
                    (a, s)
                })
                .collect(),
            None => Vec::new(),
        };
        crate::mapping::install(&self.accounts, o);
        let Some(lf) = &self.leafnodes else {
            return;
        };
        for (acc, mut subjects) in before {
            subjects.extend(acc.mappings.sources());
            subjects.sort();
            subjects.dedup();
            if !subjects.is_empty() {
                lf.mappings_changed(&acc, &subjects);
            }
        }
    }
}

/// Set up every account's exports and imports at startup: the configured ones (checked
/// first) plus the system account's services every account imports (`sys/account.rs`).
pub(super) fn install_links(srv: &Arc<ServerShared>) -> Result<(), String> {
    let all = all_links(srv, &srv.opts)?;
    crate::imports::install(&**srv, &all)
}

/// Every account's exports and imports under `o`: the configured ones (checked) plus the
/// system account's services every account imports.
pub(super) fn all_links(
    srv: &ServerShared,
    o: &crate::config::Options,
) -> Result<crate::config::links::Links, String> {
    if !o.links.is_empty() {
        crate::config::links::validate(&o.accounts, &o.links)
            .map_err(|e| format!("account {:?}: {}", e.account, e.msg))?;
    }
    let names: Vec<String> = srv.accounts.all().iter().map(|a| a.name.clone()).collect();
    let sys = srv.system_account_name();
    let mut all = crate::sys::account::with_system_links(&o.links, sys, &names);
    if o.jetstream.is_none() && (o.cluster.is_some() || o.gateway.is_some()) {
        let js: Vec<String> = if !o.jetstream_accounts.is_empty() {
            o.jetstream_accounts.clone()
        } else if o.accounts.is_empty() {
            vec![crate::account::GLOBAL_ACCOUNT.to_string()]
        } else {
            Vec::new()
        };
        all = crate::sys::account::with_jetstream_links(all, sys, &js);
    }
    Ok(all)
}
