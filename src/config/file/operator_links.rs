//! Account JWTs' `exports` and `imports` (streams and services) as natsd's account links
//! (`config/links.rs`), as nats-server's `UpdateAccountClaims` adds them: a `token_req`
//! export is open only to the accounts whose import carries a valid activation token (an
//! `activation` JWT issued by the exporter, or by one of its signing keys naming it, for the
//! importing account, of the import's type and covering its subject, not expired, not
//! revoked by the export's `revocations`). An export with `account_token_position` N (its
//! subject's token N is `*`; nsc writes two on every system account) is open to each account
//! only for subjects whose token N is that account's key. An import nats-server would not add (unknown
//! account, not authorized, bad subjects) is dropped, as nats-server only logs it. What
//! natsd does not build yet is refused by name.

use super::*;
use crate::config::links::{self, Export, Import, LinkKind, Links, ResponseType};
use crate::jwt::{self, Claims, Kind as JwtKind};
use serde_json::Value as Json;
use std::time::Duration;

fn refuse(what: &str, account: &str) -> ConfigError {
    not_supported(
        &format!("{what} (account {account})"),
        &Pos::default(),
        "this account JWT claim",
    )
}

fn kind(v: &Json) -> Option<LinkKind> {
    match v.as_str() {
        Some("stream") => Some(LinkKind::Stream),
        Some("service") => Some(LinkKind::Service),
        _ => None,
    }
}

fn s<'a>(v: &'a Json, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

/// One JWT export, and what decides who may import it.
struct JwtExport {
    export: Export,
    token_req: bool,
    revocations: Json,
    /// `account_token_position`: the subject token (from 1) an importer's key must fill.
    token_pos: usize,
}

fn export(e: &Json, account: &str) -> Result<Option<JwtExport>, ConfigError> {
    if !matches!(e["service_latency"], Json::Null | Json::Bool(false)) {
        return Err(refuse("exports[].service_latency", account));
    }
    let Some(k) = kind(&e["type"]) else {
        return Ok(None);
    };
    let token_pos = e["account_token_position"]
        .as_u64()
        .and_then(|p| usize::try_from(p).ok())
        .unwrap_or(0);
    // nats-server's `setExportAuth`: the position must hold a `*`, else the export is
    // not added (logged).
    if token_pos > 0 && s(e, "subject").split('.').nth(token_pos - 1) != Some("*") {
        tracing::debug!(
            "account {account}: export {:?}: account_token_position {token_pos} is not a `*` (dropped)",
            s(e, "subject")
        );
        return Ok(None);
    }
    let response_type = match s(e, "response_type") {
        "Stream" => ResponseType::Stream,
        "Chunked" => ResponseType::Chunked,
        _ => ResponseType::Singleton,
    };
    let threshold = e["response_threshold"].as_i64().unwrap_or(0);
    Ok(Some(JwtExport {
        export: Export {
            kind: k,
            subject: s(e, "subject").to_string(),
            accounts: None,
            response_type,
            response_threshold: u64::try_from(threshold)
                .ok()
                .filter(|n| *n > 0)
                .map(Duration::from_nanos),
            allow_trace: e["allow_trace"].as_bool() == Some(true),
        },
        token_req: e["token_req"].as_bool() == Some(true),
        revocations: e["revocations"].clone(),
        token_pos,
    }))
}

/// The import as natsd's link (nats-server's `from`/`to` of a JWT import), or `None` when
/// nats-server would not add it.
fn import(i: &Json, account: &str) -> Result<Option<Import>, ConfigError> {
    let Some(k) = kind(&i["type"]) else {
        return Ok(None);
    };
    let (subject, to, local) = (s(i, "subject"), s(i, "to"), s(i, "local_subject"));
    if local.contains('$') {
        return Err(refuse("imports[].local_subject with $ references", account));
    }
    if !local.is_empty() && !to.is_empty() {
        return Ok(None);
    }
    let opt = |x: &str| (!x.is_empty()).then(|| x.to_string());
    let (subject, prefix, to) = match k {
        LinkKind::Stream if !local.is_empty() => (subject, None, opt(local)),
        // The deprecated `to` of a stream import is a prefix.
        LinkKind::Stream => (subject, opt(to.trim_end_matches('.')), None),
        LinkKind::Service if !local.is_empty() => (subject, None, opt(local)),
        // `to` names the exporter's subject; `subject` is then the local one.
        LinkKind::Service if !to.is_empty() => (to, None, opt(subject)),
        LinkKind::Service => (subject, None, None),
    };
    Ok(Some(Import {
        kind: k,
        account: s(i, "account").to_string(),
        subject: subject.to_string(),
        prefix,
        to,
        allow_trace: k == LinkKind::Stream && i["allow_trace"].as_bool() == Some(true),
        share: k == LinkKind::Service && i["share"].as_bool() == Some(true),
    }))
}

/// Whether `token` lets `importer` import `im` from `exporter` (nats-server's
/// `checkActivation` and the jwt library's import validation).
fn activation_ok(
    token: &str,
    im: &Import,
    importer: &str,
    exporter: &Claims,
    export: &JwtExport,
    now: i64,
) -> Result<bool, ConfigError> {
    let Ok(act) = jwt::decode(token, JwtKind::Activation) else {
        return Ok(false);
    };
    if act.expires > 0 {
        // nats-server drops the import when the token expires; natsd has no timer for it.
        if act.expires <= now {
            return Ok(false);
        }
        return Err(refuse("an activation token with an expiry", importer));
    }
    if act.not_before > now || act.subject != importer {
        return Ok(false);
    }
    let issuer_account = act.str("issuer_account");
    let issuer_ok = if issuer_account.is_empty() {
        act.issuer == exporter.subject
    } else {
        issuer_account == exporter.subject
            && (exporter.signing_keys().contains(&act.issuer)
                || exporter.scoped_keys().iter().any(|(k, _)| *k == act.issuer))
    };
    if !issuer_ok || kind(&act.nats["kind"]) != Some(im.kind) {
        return Ok(false);
    }
    // The token's subject must cover the import's subject in the exporter.
    let granted = act.str("subject");
    if !crate::subject::subset_match(im.subject.as_bytes(), granted.as_bytes()) {
        return Ok(false);
    }
    let revoked = [importer, "*"].iter().any(|k| {
        export.revocations[*k]
            .as_i64()
            .is_some_and(|t| t >= act.issued_at)
    });
    Ok(!revoked)
}

/// The links of the preloaded accounts (`claims`: each account's key and claims).
pub(super) fn links(claims: &[(String, Claims)], now: i64) -> Result<Links, ConfigError> {
    let mut exports: Vec<(String, Vec<JwtExport>)> = Vec::new();
    for (name, c) in claims {
        let mut list = Vec::new();
        for e in c.nats["exports"].as_array().map_or(&[][..], Vec::as_slice) {
            list.extend(export(e, name)?);
        }
        exports.push((name.clone(), list));
    }
    let mut out = Links::new();
    for (name, c) in claims {
        let mut imports = Vec::new();
        for i in c.nats["imports"].as_array().map_or(&[][..], Vec::as_slice) {
            let Some(im) = import(i, name)? else {
                continue;
            };
            let Some((exporter, list)) = exports.iter_mut().find(|(n, _)| *n == im.account) else {
                continue;
            };
            let Some(ec) = claims.iter().find(|(n, _)| n == exporter).map(|(_, c)| c) else {
                continue;
            };
            // An export keyed by the importer's account (`account_token_position`): open
            // to it for its own subjects; an import of someone else's is not added.
            let keyed: Vec<&mut JwtExport> = list
                .iter_mut()
                .filter(|e| e.token_pos > 0 && e.export.kind == im.kind)
                .filter(|e| {
                    crate::subject::subset_match(im.subject.as_bytes(), e.export.subject.as_bytes())
                })
                .collect();
            if !keyed.is_empty() {
                let own = |e: &JwtExport| im.subject.split('.').nth(e.token_pos - 1) == Some(name);
                if !keyed.iter().all(|e| own(e)) {
                    continue;
                }
                for e in keyed {
                    e.export
                        .accounts
                        .get_or_insert_with(Vec::new)
                        .push(name.clone());
                }
            }
            // A private export this import holds a valid token for opens to it.
            let token = s(i, "token");
            for e in list
                .iter_mut()
                .filter(|e| e.token_req && e.export.kind == im.kind)
            {
                let covers = crate::subject::subset_match(
                    im.subject.as_bytes(),
                    e.export.subject.as_bytes(),
                );
                if covers && !token.is_empty() && activation_ok(token, &im, name, ec, e, now)? {
                    e.export
                        .accounts
                        .get_or_insert_with(Vec::new)
                        .push(name.clone());
                }
            }
            imports.push(im);
        }
        if !imports.is_empty() {
            out.entry(name.clone()).or_default().imports = imports;
        }
    }
    for (name, list) in exports {
        let list: Vec<Export> = list
            .into_iter()
            .map(|mut e| {
                if e.token_req || e.token_pos > 0 {
                    // Nobody with a token (or with its key in place): open to no one.
                    e.export.accounts.get_or_insert_with(Vec::new);
                }
                e.export
            })
            .collect();
        if !list.is_empty() {
            out.entry(name).or_default().exports = list;
        }
    }
    prune(claims, &mut out);
    Ok(out)
}

/// Drop what natsd's cross-account checks refuse, one at a time, as nats-server skips an
/// export or import it cannot add and loads the rest.
fn prune(claims: &[(String, Claims)], out: &mut Links) {
    let names: Vec<String> = claims.iter().map(|(n, _)| n.clone()).collect();
    while let Err(e) = links::validate(&names, out) {
        let Some(l) = out.get_mut(&e.account) else {
            return;
        };
        tracing::debug!("account {}: {} (dropped)", e.account, e.msg);
        match (e.import, e.export) {
            (Some(i), _) if i < l.imports.len() => {
                l.imports.remove(i);
            }
            (_, Some(x)) if x < l.exports.len() => {
                l.exports.remove(x);
            }
            _ => return,
        }
    }
}
