//! Exports and imports as `/accountz?acc=` shows them (nats-server's `ExtExport` and
//! `ExtImport`).

use crate::account::Account;
use crate::config::links::{self, LinkKind};

/// An export as `/accountz?acc=` shows it (nats-server's `ExtExport`).
#[derive(serde::Serialize, Debug)]
pub struct ExtExport {
    pub subject: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approved_accounts: Vec<String>,
}

/// An import as `/accountz?acc=` shows it (nats-server 2.10+'s `ExtImport`; 2.9 wrote a
/// service's local subject as `subject` and the exporter's as `to`).
#[derive(serde::Serialize, Debug)]
pub struct ExtImport {
    /// The exporter's subject.
    pub subject: String,
    pub account: String,
    /// Services: the local subject (deprecated in nats-server, which repeats it as
    /// `local_subject`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Services: the local subject; streams: where the messages appear, when mapped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_subject: Option<String>,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub invalid: bool,
    pub share: bool,
    pub tracking: bool,
}

/// `acc`'s exports, services first (nats-server's order), then streams.
pub fn ext_exports(acc: &Account) -> Vec<ExtExport> {
    let Some(l) = acc.links.get() else {
        return Vec::new();
    };
    let mut v: Vec<&links::Export> = l.config.exports.iter().collect();
    v.sort_by_key(|e| e.kind == LinkKind::Stream);
    v.into_iter()
        .map(|e| ExtExport {
            subject: e.subject.clone(),
            kind: e.kind.as_str(),
            response_type: (e.kind == LinkKind::Service).then(|| e.response_type.jwt_name()),
            approved_accounts: e.accounts.clone().unwrap_or_default(),
        })
        .collect()
}

/// `acc`'s imports in config order.
pub fn ext_imports(acc: &Account) -> Vec<ExtImport> {
    let Some(l) = acc.links.get() else {
        return Vec::new();
    };
    l.config
        .imports
        .iter()
        .map(|im| {
            let local = im.local_subject();
            let (subject, to, local_subject) = match im.kind {
                LinkKind::Stream => {
                    let ls = (local != im.subject).then_some(local);
                    (im.subject.clone(), None, ls)
                }
                LinkKind::Service => (im.subject.clone(), Some(local.clone()), Some(local)),
            };
            ExtImport {
                subject,
                account: im.account.clone(),
                to,
                local_subject,
                kind: im.kind.as_str(),
                invalid: false,
                share: im.share,
                tracking: false,
            }
        })
        .collect()
}
