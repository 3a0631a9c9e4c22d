//! Exports and imports that change while running (an account JWT update): which accounts
//! a change touches, and replacing theirs — nats-server's `updateAccountClaimsWithRefresh`
//! with `processSubsOnConfigReload` for the clients' subscriptions.

use super::{client_subscribed, drop_shadows, install_for, Linked};
use crate::account::Account;
use crate::config::links::{AccountLinks, Links};
use crate::fabric::Fabric;

/// (Re)link accounts while running (`names`, each named in `all`, which holds every
/// account's exports and imports): each account's old imports are removed — their
/// subscriptions, the response subscriptions made for them, the shadows of its clients'
/// subscriptions — and the new ones installed, with their own response subscriptions in
/// the accounts whose services they import; then its clients' subscriptions get the
/// shadows the new stream imports call for (nats-server's `processSubsOnConfigReload`).
/// Accounts not named keep theirs. Err: the first account that could not be linked (the
/// others still are).
pub fn relink(fabric: &dyn Fabric, all: &Links, names: &[String]) -> Result<(), String> {
    let mut first_err = None;
    for name in names {
        let Some(acc) = fabric.accounts().get(name) else {
            continue;
        };
        let old = acc.links.replace(None);
        if let Some(old) = &old {
            unlink(fabric, &acc, old);
        }
        let carried = old.as_ref().and_then(|o| o.responses.clone());
        if let Err(e) = install_for(fabric, all, Some(std::slice::from_ref(name)), carried) {
            tracing::error!("account {name}: exports and imports not installed: {e}");
            first_err.get_or_insert(format!("account {name:?}: {e}"));
            continue;
        }
        // Its clients' subscriptions meet the new stream imports.
        let mut subs = Vec::new();
        acc.sublist.for_each(|_, _, s| {
            if s.0.conn.kind == crate::conn::ConnKind::Client {
                subs.push(s.0.clone());
            }
        });
        for sub in subs {
            client_subscribed(fabric, &acc, &sub);
        }
        tracing::debug!("account {name}: exports and imports relinked");
    }
    first_err.map_or(Ok(()), Err)
}

/// Remove what `old`, `acc`'s replaced exports and imports, subscribed to.
fn unlink(fabric: &dyn Fabric, acc: &Account, old: &Linked) {
    for sub in &old.local {
        acc.retire(sub); // never advertised
    }
    for (exporter, sub) in &old.in_exporters {
        if let Some(e) = exporter.upgrade() {
            crate::internal::unsubscribe(fabric, &e, sub);
        }
    }
    let shadows = std::mem::take(&mut *old.shadows.lock().unwrap_or_else(|e| e.into_inner()));
    for s in shadows.into_values().flatten() {
        drop_shadows(fabric, s);
    }
}

/// The accounts a change of exports and imports from `old` to `new` touches: those whose
/// own changed (added and emptied ones included), and those importing from an account
/// whose exports changed (an import may have lost, or gained, its export).
pub fn changed_accounts(old: &Links, new: &Links) -> Vec<String> {
    let empty = AccountLinks::default();
    let mut names: Vec<String> = old.keys().chain(new.keys()).cloned().collect();
    names.sort();
    names.dedup();
    let get = |l: &'_ Links, n: &str| l.get(n).cloned().unwrap_or_else(|| empty.clone());
    let mut out: Vec<String> = names
        .iter()
        .filter(|n| get(old, n) != get(new, n))
        .cloned()
        .collect();
    let exporters: Vec<&String> = names
        .iter()
        .filter(|n| get(old, n).exports != get(new, n).exports)
        .collect();
    for (name, l) in new {
        if l.imports.iter().any(|i| exporters.contains(&&i.account)) {
            out.push(name.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::links::{Export, Import, LinkKind, ResponseType};

    fn export(subject: &str) -> Export {
        Export {
            kind: LinkKind::Service,
            subject: subject.into(),
            accounts: None,
            response_type: ResponseType::Singleton,
            response_threshold: None,
            allow_trace: false,
        }
    }

    fn import(from: &str, subject: &str) -> Import {
        Import {
            kind: LinkKind::Service,
            account: from.into(),
            subject: subject.into(),
            prefix: None,
            to: None,
            allow_trace: false,
            share: false,
        }
    }

    fn links(list: &[(&str, Vec<Export>, Vec<Import>)]) -> Links {
        list.iter()
            .map(|(n, e, i)| {
                let l = AccountLinks {
                    exports: e.clone(),
                    imports: i.clone(),
                };
                (n.to_string(), l)
            })
            .collect()
    }

    #[test]
    fn a_change_touches_the_account_and_the_importers_of_changed_exports() {
        let old = links(&[
            ("X", vec![export("help")], vec![]),
            ("Y", vec![], vec![import("X", "help")]),
            ("Z", vec![], vec![import("W", "other")]),
            ("W", vec![export("other")], vec![]),
        ]);
        assert!(changed_accounts(&old, &old).is_empty());
        // X's exports change: X and its importer Y; Z and W are untouched.
        let mut new = old.clone();
        new.get_mut("X").expect("X").exports.push(export("more"));
        assert_eq!(changed_accounts(&old, &new), vec!["X", "Y"]);
        // Y's own imports change (emptied, so it leaves the map): Y alone.
        let mut new = old.clone();
        new.remove("Y");
        assert_eq!(changed_accounts(&old, &new), vec!["Y"]);
        // A new account with imports.
        let mut new = old.clone();
        new.insert(
            "V".into(),
            AccountLinks {
                exports: vec![],
                imports: vec![import("W", "other")],
            },
        );
        assert_eq!(changed_accounts(&old, &new), vec!["V"]);
    }
}
