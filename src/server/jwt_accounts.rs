//! Operator mode with the full resolver: the set of account JWTs changed while running (an
//! update pushed through `$SYS`, a pack merged from another server, a delete), so the
//! server's accounts follow it as nats-server's do (`accounts.go` `updateAccountClaims`):
//! a new account is served at once (its limits, subject mappings, exports and imports); an
//! updated one takes its new limits, mappings, signing keys, revocations, exports and
//! imports (`imports::relink`: its clients' subscriptions and requests follow at once, and
//! so do the importers of an export that changed), and its users are checked again; a
//! deleted one's users are refused and closed.

use super::ServerShared;
use std::collections::BTreeMap;
use std::sync::Arc;

impl ServerShared {
    /// Make the accounts follow `jwts` (account key → JWT: the whole store).
    pub fn apply_account_jwts(self: &Arc<Self>, jwts: &BTreeMap<String, String>) {
        let live = self.live_opts();
        let Some(op) = live.operator.as_ref() else {
            return;
        };
        let mut opts = (*live).clone();
        // What the old JWTs made starts over.
        for (key, _) in &op.preload {
            opts.accounts.retain(|a| a != key);
            opts.account_limits.remove(key);
            opts.account_mappings.remove(key);
            opts.links.remove(key);
            opts.jetstream_accounts.retain(|a| a != key);
            opts.jetstream_limits.remove(key);
        }
        let list: Vec<(String, String)> =
            jwts.iter().map(|(k, t)| (k.clone(), t.clone())).collect();
        if let Some(o) = opts.operator.as_mut() {
            o.preload = list.clone();
        }
        if let Err(e) = crate::config::file::derive_jwt_accounts(&mut opts, &list, false) {
            tracing::error!("DirResolver - account JWTs not applied: {}", e.msg);
            return;
        }
        // Every account's exports and imports as they run now (before any is added).
        let before = super::fabric::all_links(self, &live).unwrap_or_default();
        let added: Vec<String> = opts
            .accounts
            .iter()
            .filter(|a| self.accounts.get(a).is_none())
            .cloned()
            .collect();
        for name in &added {
            self.accounts.add(name);
            tracing::debug!("DirResolver - account {name} added");
        }
        // New accounts get their exports and imports, changed ones new ones (and so do the
        // accounts importing from one whose exports changed), live.
        match super::fabric::all_links(self, &opts) {
            Ok(all) => {
                let mut names = crate::imports::changed_accounts(&before, &all);
                names.extend(added.iter().cloned());
                names.sort();
                names.dedup();
                if let Err(e) = crate::imports::relink(&**self, &all, &names) {
                    tracing::error!("DirResolver - exports and imports: {e}");
                }
            }
            Err(e) => tracing::error!("DirResolver - exports and imports not applied: {e}"),
        }
        let mappings = opts.account_mappings != live.account_mappings;
        let js_accounts = opts.jetstream_accounts != live.jetstream_accounts;
        let js_limits = opts.jetstream_limits != live.jetstream_limits;
        if let Some(js) = self.jetstream.get().filter(|_| js_accounts || js_limits) {
            let limits = opts
                .jetstream_limits
                .values()
                .flat_map(crate::config::JsLimits::each);
            if let Err(e) = crate::jetstream::limits::check_sufficient(&js.config, limits) {
                // nats-server logs it and leaves the account without JetStream.
                tracing::error!(
                    "DirResolver - JetStream limits not applied: {} ({})",
                    e.description,
                    e.err_code
                );
                opts.jetstream_accounts = live.jetstream_accounts.clone();
                opts.jetstream_limits = live.jetstream_limits.clone();
            }
        }
        self.apply_account_update(opts);
        let new = self.live_opts();
        if mappings {
            self.install_mappings(&new);
        }
        let js_changed = js_accounts || js_limits || !added.is_empty();
        if let Some(js) = self.jetstream.get().filter(|_| js_changed) {
            let mut e = js.engine();
            e.reload_accounts(self, &new);
            e.set_limits(&new.jetstream_limits);
        }
    }
}

/// A config reload with the full resolver keeps the accounts the directory made: they
/// follow the store while running (nats-server reloads the directory only on request), so
/// the re-read file's copy of them neither refuses the reload nor replaces them.
pub(super) fn keep_jwt_accounts(old: &crate::config::Options, new: &mut crate::config::Options) {
    use crate::config::Resolver;
    let full = |o: &crate::config::Options| {
        matches!(
            o.operator.as_ref().and_then(|o| o.resolver.as_ref()),
            Some(Resolver::Full(_) | Resolver::Url(_))
        )
    };
    if !full(old) || !full(new) {
        return;
    }
    let (Some(o), Some(n)) = (old.operator.as_ref(), new.operator.as_mut()) else {
        return;
    };
    n.preload = o.preload.clone();
    new.accounts = old.accounts.clone();
    new.account_limits = old.account_limits.clone();
    new.links = old.links.clone();
    new.jetstream_accounts = old.jetstream_accounts.clone();
    new.jetstream_limits = old.jetstream_limits.clone();
    for (key, _) in &o.preload {
        match old.account_mappings.get(key) {
            Some(m) => new.account_mappings.insert(key.clone(), m.clone()),
            None => new.account_mappings.remove(key),
        };
    }
}
