//! The `$JS.API` requests about the server rather than one account's streams, as a
//! standalone nats-server 2.9.10 answers them: the cluster-only requests (stream and
//! consumer leader stepdown, stream peer removal: 503 10010 "JetStream clustering support
//! required", in any account), and `ACCOUNT.PURGE.<account>` (every stream of the account
//! deleted, its store directory removed). Unlike nats-server, a purge is taken only from the
//! system account or the account itself; a request from any other account goes unanswered
//! (logged), as nats-server does with its system-account-only requests. Also: JetStream
//! enabled or disabled for one account by a reload, and the dispatch of the stream template
//! requests and messages (`templates.rs`).
//!
//! Knows the engine's accounts and the event; nothing about stores beyond deleting them.

use super::{err_json, persist, save_states, Engine, JsAccount};
use crate::account::Account;
use crate::config::Options;
use crate::jetstream::consumer::Cx;
use crate::jetstream::types::{ApiError, Obj};
use crate::jetstream::{handler, subscribe, Event, EventKind};
use crate::server::ServerShared;
use std::path::{Component, Path};
use std::sync::Arc;

/// The response type of a request only a JetStream cluster serves (`rest`: the subject's
/// tokens after `$JS.API.`).
fn cluster_only(rest: &[&str]) -> Option<&'static str> {
    match rest {
        ["STREAM", "LEADER", "STEPDOWN", _] => Some("stream_leader_stepdown_response"),
        ["STREAM", "PEER", "REMOVE", _] => Some("stream_remove_peer_response"),
        ["CONSUMER", "LEADER", "STEPDOWN", _, _] => Some("consumer_leader_stepdown_response"),
        _ => None,
    }
}

/// Whether `name` can name a directory under the store (one plain path component), so
/// that a purge of `/` or `..` never leaves the account's own directory.
fn plain_dir_name(name: &str) -> bool {
    let mut c = Path::new(name).components();
    matches!((c.next(), c.next()), (Some(Component::Normal(_)), None))
}

impl Engine {
    /// The system account has no JetStream (its other requests get 10039, as nats-server)
    /// but may purge any account: `$JS.API.ACCOUNT.PURGE.*` (and with the domain prefix).
    pub fn serve_system(&mut self, srv: &Arc<ServerShared>, acc: Arc<Account>) {
        self.refuse_account(srv, acc.clone());
        let Some(domain) = self.config.domain.clone() else {
            return;
        };
        let name: Arc<str> = Arc::from(acc.name.as_str());
        let h = handler(self.tx.clone(), name, EventKind::Api, Some(domain.clone()));
        let s = format!("$JS.{domain}.API.ACCOUNT.PURGE.*");
        if let Some(sub) = subscribe(srv, &acc, &s, None, h) {
            self.refused.push((acc, sub));
        }
    }

    /// Answer `ev` when it is one of this module's requests (API requests of JetStream
    /// accounts, and those of other accounts, which otherwise get 10039). `true`: handled.
    pub(super) fn admin_request(&mut self, srv: &Arc<ServerShared>, ev: &Event) -> bool {
        if let EventKind::Template(t) = &ev.kind {
            self.template_publish(srv, ev, &t.clone());
            return true;
        }
        if !matches!(ev.kind, EventKind::Api | EventKind::NotEnabled) {
            return false;
        }
        let Some(rest) = ev.subject.strip_prefix("$JS.API.") else {
            return false;
        };
        let t: Vec<&str> = rest.split('.').collect();
        if let Some(ty) = cluster_only(&t) {
            let e = ApiError::new(503, 10010, "JetStream clustering support required");
            if let Some(ja) = self.accounts.get_mut(&*ev.acc) {
                ja.api_total += 1;
                ja.api_errors += 1;
            }
            reply(srv, ev, &err_json(ty, &e, ""));
            return true;
        }
        if let ["ACCOUNT", "PURGE", target] = t.as_slice() {
            self.account_purge(srv, ev, target);
            return true;
        }
        if let (["STREAM", "TEMPLATE", rest @ ..], EventKind::Api) = (t.as_slice(), &ev.kind) {
            self.template_request(srv, ev, rest);
            return true;
        }
        false
    }

    /// A reload changed which accounts have JetStream (`o`: the new options). An account
    /// that gains it recovers its streams from disk, as at startup; one that loses it is
    /// closed (consumers saved, files kept) and answers 10039 from now on, as nats-server
    /// 2.9.10. Its memory streams are gone.
    pub fn reload_accounts(&mut self, srv: &Arc<ServerShared>, o: &Options) {
        let sys = srv.system_account_name().to_string();
        for acc in srv.accounts.all() {
            let wanted = crate::jetstream::has_jetstream(o, &sys, &acc.name);
            let has = self.accounts.contains_key(&acc.name);
            if wanted && !has {
                let (gone, kept) = std::mem::take(&mut self.refused)
                    .into_iter()
                    .partition(|(a, _)| a.name == acc.name);
                self.refused = kept;
                for (a, s) in gone {
                    srv.unsubscribe_internal(&a, &s);
                }
                tracing::info!("JetStream enabled for account {:?}", acc.name);
                self.enable_account(srv, acc);
            } else if !wanted && has {
                if let Some(mut ja) = self.accounts.remove(&acc.name) {
                    ja.close(srv);
                }
                tracing::info!("JetStream disabled for account {:?}", acc.name);
                if acc.name != sys {
                    self.refuse_account(srv, acc);
                } else {
                    self.serve_system(srv, acc);
                }
            } else if !wanted
                && !has
                && acc.name != sys
                && !self.refused.iter().any(|(a, _)| a.name == acc.name)
            {
                // An account added while running (the full resolver): answered "not enabled".
                self.refuse_account(srv, acc);
            }
        }
    }

    /// `$JS.API.ACCOUNT.PURGE.<target>`: delete every stream of `target` and its store
    /// directory; `initiated` also for an account that is unknown or has nothing.
    fn account_purge(&mut self, srv: &Arc<ServerShared>, ev: &Event, target: &str) {
        let from = &*ev.acc;
        if from != target && from != srv.system_account_name() {
            tracing::warn!(
                "JetStream API account purge request for {target:?} from non-system account: {from:?}"
            );
            return;
        }
        let has_account = srv.accounts.get(target).is_some();
        let streams = self.accounts.get(target).map_or(0, |ja| ja.streams.len());
        tracing::info!(
            "Purge request for account {target} (streams: {streams}, hasAccount: {has_account})"
        );
        if let Some(ja) = self.accounts.get_mut(target) {
            let acc = ja.acc.clone();
            let cx = Cx::new(srv, &acc);
            ja.delete_all_streams(&cx);
        }
        if plain_dir_name(target) {
            let dir = self.config.store_dir.join(target);
            if dir.exists() {
                persist::remove_dir(&dir);
            }
        } else {
            tracing::warn!("JetStream: account purge: {target:?} is not a directory name");
        }
        if let Some(ja) = self.accounts.get_mut(from) {
            ja.api_total += 1;
        }
        let mut o = Obj::typed("account_purge_response");
        o.field("initiated", &true);
        reply(srv, ev, &o.done());
    }
}

impl JsAccount {
    /// Save every consumer, withdraw every subscription, sync the stores (shutdown, or
    /// JetStream disabled for the account: its files stay).
    pub(super) fn close(&mut self, srv: &ServerShared) {
        self.end_transfers(srv);
        for st in self.streams.values_mut() {
            for c in st.consumers.values_mut() {
                c.dirty = true;
            }
            save_states(st, true);
            for s in st.subs.drain(..) {
                srv.unsubscribe_internal(&self.acc, &s);
            }
            if let Err(e) = st.store.sync() {
                tracing::error!("JetStream: stream {:?} not synced: {e}", st.cfg.name);
            }
        }
        for s in self.subs.drain(..) {
            srv.unsubscribe_internal(&self.acc, &s);
        }
        self.unsubscribe_templates(srv);
    }

    /// Delete every stream and template of the account (subscriptions, consumers, stores,
    /// directories).
    fn delete_all_streams(&mut self, cx: &Cx<'_>) {
        self.unsubscribe_templates(cx.srv);
        self.templates.clear();
        let names: Vec<String> = self.streams.keys().cloned().collect();
        for name in names {
            if let Err((e, _)) = self.stream_delete(cx, &name) {
                tracing::warn!(
                    "JetStream: account purge: stream {name:?} not deleted: {}",
                    e.description
                );
            }
        }
    }
}

/// Send `json` to the event's reply subject, in the requesting account.
pub(super) fn reply(srv: &Arc<ServerShared>, ev: &Event, json: &str) {
    let (Some(to), Some(acc)) = (ev.reply.as_deref(), srv.accounts.get(&ev.acc)) else {
        return;
    };
    let cx = Cx::new(srv, &acc);
    cx.send(to, None, None, json.as_bytes());
    crate::jetstream::advisory::api_audit(&cx, &ev.subject, &ev.payload, json);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_are_directories() {
        assert!(plain_dir_name("A"));
        assert!(plain_dir_name("$G"));
        assert!(!plain_dir_name("/"));
        assert!(!plain_dir_name(".."));
        assert!(!plain_dir_name("a/b"));
        assert!(!plain_dir_name(""));
    }

    #[test]
    fn cluster_only_subjects() {
        assert_eq!(
            cluster_only(&["STREAM", "LEADER", "STEPDOWN", "S"]),
            Some("stream_leader_stepdown_response")
        );
        assert_eq!(cluster_only(&["STREAM", "LEADER", "STEPDOWN"]), None);
        assert_eq!(cluster_only(&["CONSUMER", "LEADER", "STEPDOWN", "S"]), None);
        assert_eq!(cluster_only(&["META", "LEADER", "STEPDOWN"]), None);
    }
}
