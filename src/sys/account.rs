//! The account-scoped system services, as nats-server 2.9-2.15 runs them: the system account
//! exports `$SYS.REQ.ACCOUNT.*.CONNZ` and `$SYS.REQ.ACCOUNT.*.STATZ` (streamed: every server
//! answers), and every other account imports them, so a user of account `A` who requests
//! `$SYS.REQ.SERVER.PING.CONNZ` or `$SYS.REQ.ACCOUNT.PING.CONNZ` gets `A`'s connections from
//! every server, and `$SYS.REQ.ACCOUNT.PING.STATZ` its `/accstatz`. The imports are ordinary
//! service imports (`imports.rs` relays them; `/accountz` lists them); this file builds them
//! and answers the requests that reach the system account:
//! `$SYS.REQ.ACCOUNT.<acc>.{CONNZ,STATZ,SUBSZ,LEAFZ,INFO}` and `$SYS.REQ.ACCOUNT.PING.STATZ`.
//!
//! Also the `$JS.API.>` import of a server without JetStream in a cluster (nats-server's mixed
//! mode, [`with_jetstream_links`]); a server running JetStream answers inside each account and
//! has no such import.
//!
//! Also 2.10's `$SYS.REQ.USER.INFO` import of every account (answered by `user_info.rs`).
//! Not here: `$SYS.REQ.ACCOUNT.<acc>.JSZ`; `CONNS` is `conns.rs`.

use super::{envelope, error_message, matches_filter, parse_options, query_params, Endpoint, Sys};
use crate::config::links::{Export, Import, LinkKind, Links, ResponseType};
use crate::monitor::{accountz, connz, misc, subsz};
use crate::server::ServerShared;
use serde_json::Value;

/// What a request to `$SYS.REQ.ACCOUNT.<acc>.<X>` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccService {
    Connz,
    Statz,
    Subsz,
    Leafz,
    Info,
}

impl AccService {
    pub const ALL: [AccService; 5] = [
        AccService::Connz,
        AccService::Statz,
        AccService::Subsz,
        AccService::Leafz,
        AccService::Info,
    ];

    pub fn token(self) -> &'static str {
        match self {
            AccService::Connz => "CONNZ",
            AccService::Statz => "STATZ",
            AccService::Subsz => "SUBSZ",
            AccService::Leafz => "LEAFZ",
            AccService::Info => "INFO",
        }
    }
}

/// Whom a request is about: one account (the subject's token), or every account
/// (`$SYS.REQ.ACCOUNT.PING.STATZ`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    One(String),
    All,
}

/// The account an `$SYS.REQ.ACCOUNT.<acc>.<X>` subject names.
pub fn account_token(subject: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(subject).ok()?;
    let rest = s.strip_prefix("$SYS.REQ.ACCOUNT.")?;
    let (acc, _) = rest.rsplit_once('.')?;
    Some(acc.to_string())
}

/// A name that fits in one subject token (`$SYS.REQ.ACCOUNT.<name>.CONNZ`).
pub fn is_token(name: &str) -> bool {
    !name.is_empty()
        && !name
            .bytes()
            .any(|b| b == b'.' || b == b'*' || b == b'>' || b.is_ascii_whitespace())
}

/// `links` plus the system account's two service exports and, for every other account whose
/// name is one subject token, nats-server's three imports of them (unless the account
/// already imports something on that local subject). `system` empty: no system account, none.
pub fn with_system_links(links: &Links, system: &str, accounts: &[String]) -> Links {
    let mut all = links.clone();
    if system.is_empty() {
        return all;
    }
    let sys = all.entry(system.to_string()).or_default();
    for x in ["CONNZ", "STATZ"] {
        let subject = format!("$SYS.REQ.ACCOUNT.*.{x}");
        if !sys.exports.iter().any(|e| e.subject == subject) {
            sys.exports.push(Export {
                kind: LinkKind::Service,
                subject,
                accounts: None,
                response_type: ResponseType::Stream,
                response_threshold: None,
                allow_trace: false,
            });
        }
    }
    if !sys.exports.iter().any(|e| e.subject == USER_INFO_ALL) {
        sys.exports.push(Export {
            kind: LinkKind::Service,
            subject: USER_INFO_ALL.into(),
            accounts: None,
            response_type: ResponseType::Singleton,
            response_threshold: None,
            allow_trace: false,
        });
    }
    // 2.10+: every account, the system account too, imports `$SYS.REQ.USER.INFO` (shared:
    // the request names the requester's connection, which `user_info.rs` answers about).
    for name in accounts.iter().filter(|a| is_token(a)) {
        let l = all.entry(name.clone()).or_default();
        if !l.imports.iter().any(|i| i.local_subject() == USER_INFO) {
            l.imports.push(Import {
                kind: LinkKind::Service,
                account: system.to_string(),
                subject: format!("$SYS.REQ.USER.{name}.INFO"),
                prefix: None,
                allow_trace: false,
                to: Some(USER_INFO.to_string()),
                share: true,
            });
        }
    }
    for name in accounts
        .iter()
        .filter(|a| a.as_str() != system && is_token(a))
    {
        let l = all.entry(name.clone()).or_default();
        for (local, x) in [
            ("$SYS.REQ.ACCOUNT.PING.CONNZ", "CONNZ"),
            ("$SYS.REQ.SERVER.PING.CONNZ", "CONNZ"),
            ("$SYS.REQ.ACCOUNT.PING.STATZ", "STATZ"),
        ] {
            if l.imports.iter().any(|i| i.local_subject() == local) {
                continue;
            }
            l.imports.push(Import {
                kind: LinkKind::Service,
                account: system.to_string(),
                subject: format!("$SYS.REQ.ACCOUNT.{name}.{x}"),
                prefix: None,
                allow_trace: false,
                to: Some(local.to_string()),
                share: false,
            });
        }
    }
    all
}

/// nats-server's "mixed mode": a server without JetStream that is not standalone (it has a
/// cluster or gateways) lets its JetStream accounts reach the JetStream servers beside it. The
/// system account exports `$JS.API.>` and each such account imports it with shared details, so
/// a client's `$JS.API` request travels in the system account (with `Nats-Request-Info` naming
/// the account) to the servers that answer it. The accounts: those whose config enables
/// JetStream or, when no account is configured, `$G` (nats-server's `enableJetStream` checks).
/// An account that already imports something on `$JS.API.>` keeps its own.
pub fn with_jetstream_links(mut all: Links, system: &str, js_accounts: &[String]) -> Links {
    if system.is_empty() || js_accounts.is_empty() {
        return all;
    }
    let sys = all.entry(system.to_string()).or_default();
    if !sys.exports.iter().any(|e| e.subject == JS_API_ALL) {
        sys.exports.push(Export {
            kind: LinkKind::Service,
            subject: JS_API_ALL.into(),
            accounts: None,
            response_type: ResponseType::Singleton,
            response_threshold: None,
            allow_trace: false,
        });
    }
    for name in js_accounts.iter().filter(|a| a.as_str() != system) {
        let l = all.entry(name.clone()).or_default();
        if l.imports.iter().any(|i| i.local_subject() == JS_API_ALL) {
            continue;
        }
        l.imports.push(Import {
            kind: LinkKind::Service,
            account: system.to_string(),
            subject: JS_API_ALL.into(),
            prefix: None,
            to: Some(JS_API_ALL.into()),
            share: true,
            allow_trace: false,
        });
    }
    all
}

/// What a user asks about itself (nats-server 2.10+), and where the system account
/// answers it for account `<acc>`: `$SYS.REQ.USER.<acc>.INFO`.
pub const USER_INFO: &str = "$SYS.REQ.USER.INFO";
pub const USER_INFO_ALL: &str = "$SYS.REQ.USER.*.INFO";

/// Every JetStream API subject.
pub const JS_API_ALL: &str = "$JS.API.>";

/// The answer to one account-scoped request, or `None` when this server does not answer
/// (the request's filter excludes it; STATZ for accounts without local connections unless
/// `include_unused`, as nats-server).
pub fn answer(
    srv: &ServerShared,
    sys: &Sys,
    svc: AccService,
    target: &Target,
    payload: &[u8],
) -> Option<Vec<u8>> {
    let opts = match parse_options(payload) {
        Ok(o) => o,
        Err(e) => return Some(error_message(srv, sys, e)),
    };
    if !matches_filter(srv, &opts) {
        return None;
    }
    let one = match target {
        Target::One(a) => Some(a.as_str()),
        Target::All => None,
    };
    let with_acc = |e: Endpoint| {
        query_params(e, &opts).map(|mut p| {
            if let Some(a) = one {
                p.insert("acc".into(), a.to_string());
            }
            p
        })
    };
    let out = match svc {
        AccService::Connz => with_acc(Endpoint::Connz)
            .and_then(|p| connz::ConnzQuery::parse(&p))
            .and_then(|q| envelope(srv, sys, connz::connz(srv, &q))),
        AccService::Subsz => with_acc(Endpoint::Subsz)
            .and_then(|mut p| {
                p.insert("subs".into(), "1".into());
                subsz::SubszQuery::parse(&p)
            })
            .and_then(|q| envelope(srv, sys, subsz::subsz(srv, &q))),
        AccService::Leafz => with_acc(Endpoint::Leafz)
            .and_then(|p| misc::leafz(srv, &p))
            .and_then(|z| envelope(srv, sys, z)),
        AccService::Info => {
            accountz::account_info(srv, one.unwrap_or_default()).and_then(|z| envelope(srv, sys, z))
        }
        AccService::Statz => {
            let mut only: Option<Vec<String>> = one.map(|a| vec![a.to_string()]);
            if only.is_none() {
                if let Some(Value::Array(a)) = opts.get("accounts") {
                    only = Some(
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect(),
                    );
                }
            }
            let unused = opts.get("include_unused").and_then(Value::as_bool) == Some(true);
            let z = accountz::account_statz(srv, only.as_deref(), unused);
            if z.account_statz.is_empty() && !unused {
                return None;
            }
            envelope(srv, sys, z)
        }
    };
    Some(out.unwrap_or_else(|e| error_message(srv, sys, e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_links_as_nats_server_registers_them() {
        let accounts = ["$G".to_string(), "$SYS".into(), "A".into(), "a.b".into()];
        let all = with_system_links(&Links::new(), "$SYS", &accounts);
        let sys = &all["$SYS"];
        assert_eq!(sys.exports.len(), 3);
        assert_eq!(sys.exports[0].subject, "$SYS.REQ.ACCOUNT.*.CONNZ");
        assert_eq!(sys.exports[1].response_type, ResponseType::Stream);
        assert_eq!(
            (
                sys.exports[2].subject.as_str(),
                sys.exports[2].response_type
            ),
            (USER_INFO_ALL, ResponseType::Singleton)
        );
        // The system account imports only its own user info (2.15.1).
        assert_eq!(sys.imports.len(), 1);
        assert_eq!(sys.imports[0].subject, "$SYS.REQ.USER.$SYS.INFO");
        let g = &all["$G"].imports;
        assert_eq!(g.len(), 4);
        assert_eq!(
            (
                g[0].subject.as_str(),
                g[0].local_subject().as_str(),
                g[0].share
            ),
            ("$SYS.REQ.USER.$G.INFO", USER_INFO, true)
        );
        assert_eq!(g[2].subject, "$SYS.REQ.ACCOUNT.$G.CONNZ");
        assert_eq!(g[2].local_subject(), "$SYS.REQ.SERVER.PING.CONNZ");
        assert_eq!(all["A"].imports[3].subject, "$SYS.REQ.ACCOUNT.A.STATZ");
        // Not one token: no import could reach it.
        assert!(!all.contains_key("a.b"));
        assert!(with_system_links(&Links::new(), "", &accounts).is_empty());
    }

    #[test]
    fn account_token_of_a_subject() {
        assert_eq!(
            account_token(b"$SYS.REQ.ACCOUNT.$G.CONNZ").as_deref(),
            Some("$G")
        );
        assert_eq!(account_token(b"$SYS.REQ.SERVER.PING.CONNZ"), None);
    }
}
