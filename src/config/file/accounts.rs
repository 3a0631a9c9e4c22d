//! `authorization {}` and `accounts {}`: users, permissions, and accounts with their
//! exports and imports (nats-server's checks and texts; see `docs/config.md`).

use super::*;
use crate::auth::responses::ResponsePerm;

pub(super) fn authorization(m: &Map, opts: &mut Options) -> Result<(), ConfigError> {
    let mut default_perms = None;
    let mut users = UserList::default();
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "user" | "username" => opts.username = Some(string(k, v)?),
            "pass" | "password" => opts.password = Some(string(k, v)?),
            "token" => opts.auth_token = Some(string(k, v)?),
            "timeout" => opts.auth_timeout = seconds(k, v)?,
            "users" => users = user_list(k, v, None)?,
            "default_permissions" => default_perms = Some(permissions(map(k, v)?)?),
            "auth_callout" | "auth_hook" => {
                opts.auth_callout = Some(super::callout::auth_callout(map(k, v)?, &v.pos)?)
            }
            _ => return Err(refuse(e, k)),
        }
    }
    users.add_to(opts, &default_perms)
}

/// A `users` array: the users with a name and password, and the nkey users.
#[derive(Default)]
struct UserList {
    users: Vec<User>,
    nkeys: Vec<NkeyUser>,
    /// Where the array is, for the duplicate errors.
    at: Pos,
}

impl UserList {
    /// Give users without permissions the block's `default_permissions`, then add them to
    /// `opts`, refusing a name or nkey configured twice (nats-server's texts).
    fn add_to(
        mut self,
        opts: &mut Options,
        default: &Option<Permissions>,
    ) -> Result<(), ConfigError> {
        let perms = self.users.iter_mut().map(|u| &mut u.permissions);
        for p in perms.chain(self.nkeys.iter_mut().map(|u| &mut u.permissions)) {
            if p.is_none() {
                p.clone_from(default);
            }
        }
        let mut seen: std::collections::HashSet<String> =
            opts.users.iter().map(|u| u.username.clone()).collect();
        seen.extend(opts.nkeys.iter().map(|u| u.nkey.clone()));
        for u in &self.users {
            if !seen.insert(u.username.clone()) {
                return Err(ConfigError::at(
                    &self.at,
                    format!("Duplicate user {:?} detected", u.username),
                ));
            }
        }
        for u in &self.nkeys {
            if !seen.insert(u.nkey.clone()) {
                return Err(ConfigError::at(
                    &self.at,
                    format!("Duplicate nkey {:?} detected", u.nkey),
                ));
            }
        }
        opts.users.extend(self.users);
        opts.nkeys.extend(self.nkeys);
        Ok(())
    }
}

fn user_list(key: &str, v: &Value, account: Option<&str>) -> Result<UserList, ConfigError> {
    let mut list = UserList {
        at: v.pos.clone(),
        ..UserList::default()
    };
    for u in array(key, v)? {
        match user(map("users", u)?, &u.pos, account)? {
            UserEntry::User(u) => list.users.push(u),
            UserEntry::Nkey(n) => list.nkeys.push(n),
        }
    }
    Ok(list)
}

/// One entry of a `users` array.
enum UserEntry {
    User(User),
    Nkey(NkeyUser),
}

fn user(m: &Map, at: &Pos, account: Option<&str>) -> Result<UserEntry, ConfigError> {
    let mut u = User {
        account: account.map(str::to_string),
        ..User::default()
    };
    let (mut named, mut nkey) = (false, None);
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "user" | "username" => {
                u.username = string(k, v)?;
                named = true;
            }
            "pass" | "password" => u.password = string(k, v)?,
            "nkey" => nkey = Some((string(k, v)?, e.key_pos.clone())),
            "permissions" | "permission" => u.permissions = Some(permissions(map(k, v)?)?),
            "account" if account.is_none() => u.account = Some(string(k, v)?),
            "allowed_connection_types" | "connection_types" | "clients" => {
                u.connection_types = connection_types(k, v)?
            }
            _ => return Err(refuse(e, k)),
        }
    }
    if let Some((key, key_at)) = nkey {
        if !crate::auth::is_user_nkey(&key) {
            return Err(ConfigError::at(
                &key_at,
                "Not a valid public nkey for a user",
            ));
        }
        if named || !u.password.is_empty() {
            return Err(ConfigError::at(
                at,
                "Nkey users do not take usernames or passwords",
            ));
        }
        return Ok(UserEntry::Nkey(NkeyUser {
            nkey: key,
            account: u.account,
            permissions: u.permissions,
            connection_types: u.connection_types,
        }));
    }
    if !named {
        return Err(ConfigError::at(at, "user entry without a \"user\""));
    }
    Ok(UserEntry::User(u))
}

fn permissions(m: &Map) -> Result<Permissions, ConfigError> {
    let mut p = Permissions::default();
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "publish" | "pub" => p.publish = Some(subject_permission(k, v)?),
            "subscribe" | "sub" => p.subscribe = Some(subject_permission(k, v)?),
            "allow_responses" | "publish_allow_responses" => {
                p.allow_responses = allow_responses(v)?
            }
            _ if not_yet(k).is_some() => return Err(refuse(e, k)),
            _ => {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("Unknown field {:?} parsing permissions", e.key),
                ))
            }
        }
    }
    Ok(p)
}

/// `allowed_connection_types`: nats-server's names in any case, kept upper case; an
/// unknown one is an error (nats-server's `invalid connection types`).
fn connection_types(key: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    let mut out: Vec<String> = Vec::new();
    let mut unknown = Vec::new();
    for t in strings(key, v)? {
        let t = t.to_ascii_uppercase();
        if !crate::jwt::user::CONNECTION_TYPES.contains(&t.as_str()) {
            unknown.push(t);
        } else if !out.contains(&t) {
            out.push(t);
        }
    }
    if !unknown.is_empty() {
        return Err(ConfigError::at(
            &v.pos,
            format!("invalid connection types {unknown:?}"),
        ));
    }
    Ok(out)
}

/// `allow_responses`: `true` (one reply within 2 minutes), `false`, or `{ max, expires }`
/// (0 keeps the default; a negative `max` or `expires` means no limit), as nats-server.
fn allow_responses(v: &Value) -> Result<Option<ResponsePerm>, ConfigError> {
    use crate::auth::responses::{DEFAULT_MAX, DEFAULT_TTL};
    let mut r = ResponsePerm {
        max: DEFAULT_MAX,
        ttl: Some(DEFAULT_TTL),
    };
    let m = match &v.kind {
        Kind::Bool(b) => return Ok(b.then_some(r)),
        Kind::Map(m) => m,
        _ => {
            return Err(ConfigError::at(
                &v.pos,
                "error parsing response permissions, expected a boolean or a map",
            ))
        }
    };
    for (k, e) in options(m) {
        let v = &e.value;
        match k.as_str() {
            "max" | "max_msgs" | "max_messages" | "max_responses" => match &v.kind {
                Kind::Integer { value: 0, .. } => {}
                Kind::Integer { value, .. } => r.max = *value,
                _ => return Err(wrong_type(&k, v, "an integer")),
            },
            "expires" | "expiration" | "ttl" => {
                let Kind::String(s) = &v.kind else {
                    return Err(ConfigError::at(
                        &v.pos,
                        "error parsing expires, not a duration string",
                    ));
                };
                let (neg, text) = match s.strip_prefix('-') {
                    Some(t) => (true, t),
                    None => (false, s.as_str()),
                };
                let d = parse_go_duration(text).ok_or_else(|| {
                    ConfigError::at(
                        &v.pos,
                        format!("error parsing expires: invalid duration {s:?}"),
                    )
                })?;
                if neg {
                    r.ttl = None;
                } else if !d.is_zero() {
                    r.ttl = Some(d);
                }
            }
            _ => {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("Unknown field {:?} parsing permissions", e.key),
                ))
            }
        }
    }
    Ok(Some(r))
}

/// `"subj"`, `["a", "b"]` (both: allow) or `{ allow: …, deny: … }`.
fn subject_permission(key: &str, v: &Value) -> Result<SubjectPermission, ConfigError> {
    match &v.kind {
        Kind::Map(m) => {
            let mut sp = SubjectPermission::default();
            for (k, e) in options(m) {
                match k.as_str() {
                    "allow" => sp.allow = strings(&k, &e.value)?,
                    "deny" => sp.deny = strings(&k, &e.value)?,
                    _ => {
                        return Err(ConfigError::at(
                            &e.key_pos,
                            format!(
                                "Unknown field name {:?} parsing subject permissions, only 'allow' \
                                 or 'deny' are permitted",
                                e.key
                            ),
                        ))
                    }
                }
            }
            Ok(sp)
        }
        _ => Ok(SubjectPermission {
            allow: strings(key, v)?,
            deny: Vec::new(),
        }),
    }
}

pub(super) fn accounts(
    m: &Map,
    opts: &mut Options,
    warnings: &mut Vec<ConfigError>,
) -> Result<(), ConfigError> {
    // Where each export and import was written, for the cross-account checks at the end.
    let mut at: Vec<(String, bool, usize, Pos)> = Vec::new();
    for e in m.entries.iter().filter(|e| !e.used_as_variable) {
        let name = e.key.clone();
        let acc = map(&name, &e.value)?;
        let mut users = UserList::default();
        let mut default_perms = None;
        let mut links = AccountLinks::default();
        for (key, ae) in options(acc) {
            let k = key.as_str();
            match k {
                "users" => users = user_list(k, &ae.value, Some(&name))?,
                "jetstream" => {
                    if let Some(l) = account_jetstream(&ae.value)? {
                        opts.jetstream_accounts.push(name.clone());
                        let l = crate::config::JsLimits::Flat(l);
                        opts.jetstream_limits.insert(name.clone(), l);
                    }
                }
                "default_permissions" => default_perms = Some(permissions(map(k, &ae.value)?)?),
                "msg_trace" | "trace_dest" => {
                    if let Some(t) = msg_trace(k, &ae.key_pos, &ae.value, warnings)? {
                        opts.account_msg_trace.insert(name.clone(), t);
                    }
                }
                "mappings" | "maps" => {
                    let m = super::mapping::mappings(&ae.value)?;
                    opts.account_mappings
                        .entry(name.clone())
                        .or_default()
                        .extend(m);
                }
                "limits" => {
                    opts.account_limits
                        .insert(name.clone(), account_limits(&ae.value)?);
                }
                "exports" | "imports" => {
                    let Kind::Array(items) = &ae.value.kind else {
                        let what = if k == "exports" { "Exports" } else { "Imports" };
                        return Err(ConfigError::at(
                            &ae.key_pos,
                            format!("{what} should be an array, got {}", go_type(&ae.value.kind)),
                        ));
                    };
                    for item in items {
                        let im = map(k, item)?;
                        if k == "exports" {
                            at.push((name.clone(), false, links.exports.len(), item.pos.clone()));
                            links.exports.push(export(im, &item.pos)?);
                        } else {
                            at.push((name.clone(), true, links.imports.len(), item.pos.clone()));
                            links.imports.push(import(im, &item.pos)?);
                        }
                    }
                }
                _ => return Err(refuse(ae, k)),
            }
        }
        if !links.exports.is_empty() || !links.imports.is_empty() {
            opts.links.insert(name.clone(), links);
        }
        if !opts.accounts.contains(&name) {
            opts.accounts.push(name);
        }
        users.add_to(opts, &default_perms)?;
    }
    if let Err(e) = crate::config::links::validate(&opts.accounts, &opts.links) {
        let pos = at.iter().find(|(a, is_import, i, _)| {
            *a == e.account
                && if *is_import {
                    e.import == Some(*i)
                } else {
                    e.export == Some(*i)
                }
        });
        return Err(match pos {
            Some((.., p)) => ConfigError::at(p, e.msg),
            None => ConfigError::at(&Pos::default(), e.msg),
        });
    }
    Ok(())
}

/// A value's type as nats-server's messages name it (Go's `%T`).
fn go_type(k: &Kind) -> &'static str {
    match k {
        Kind::Map(_) => "map[string]interface {}",
        Kind::String(_) => "string",
        Kind::Integer { .. } => "int64",
        Kind::Float(_) => "float64",
        Kind::Bool(_) => "bool",
        _ => k.type_name(),
    }
}

/// One entry of an account's `exports`: `{stream: "subj"}` or `{service: "subj"}`, with
/// optional `accounts`, `response_type` and `response_threshold` (services).
fn export(m: &Map, at: &Pos) -> Result<Export, ConfigError> {
    let mut kind: Option<(LinkKind, String)> = None;
    let mut ex = Export {
        kind: LinkKind::Stream,
        subject: String::new(),
        accounts: None,
        response_type: ResponseType::Singleton,
        response_threshold: None,
        allow_trace: false,
    };
    let mut response_at: Option<Pos> = None;
    let mut allow_trace_at: Option<Pos> = None;
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "stream" | "service" => {
                let subject = string(k, v)?;
                let this = if k == "stream" {
                    LinkKind::Stream
                } else {
                    LinkKind::Service
                };
                if let Some((seen, _)) = &kind {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!(
                            "Detected {k} {subject:?} but already saw a {}",
                            seen.as_str()
                        ),
                    ));
                }
                kind = Some((this, subject));
            }
            "accounts" => ex.accounts = Some(strings(k, v)?),
            "response" | "response_type" => {
                response_at.get_or_insert(e.key_pos.clone());
                let t = string(k, v)?;
                ex.response_type = match t.to_ascii_lowercase().as_str() {
                    "single" | "singleton" => ResponseType::Singleton,
                    "stream" => ResponseType::Stream,
                    "chunk" | "chunked" => ResponseType::Chunked,
                    _ => {
                        return Err(ConfigError::at(
                            &e.key_pos,
                            format!("Unknown response type: {t:?}"),
                        ))
                    }
                };
            }
            "threshold" | "response_threshold" | "response_max_time" | "response_time" => {
                response_at.get_or_insert(e.key_pos.clone());
                let d = match &v.kind {
                    Kind::String(s) => parse_go_duration(s).ok_or_else(|| {
                        ConfigError::at(
                            &e.key_pos,
                            format!(
                                "Expected response threshold to be a parseable time duration, \
                                 got {s:?}"
                            ),
                        )
                    })?,
                    _ => {
                        return Err(ConfigError::at(
                            &e.key_pos,
                            "Expected response threshold to be a parseable time duration, got \
                             int64",
                        ))
                    }
                };
                ex.response_threshold = Some(d);
            }
            "allow_trace" => {
                allow_trace_at = Some(e.key_pos.clone());
                ex.allow_trace = boolean(k, v)?;
            }
            _ => return Err(unknown(e)),
        }
    }
    let Some((k, subject)) = kind else {
        return Err(ConfigError::at(at, "Expect a stream or a service subject"));
    };
    if k == LinkKind::Stream {
        if let Some(p) = response_at {
            return Err(ConfigError::at(
                &p,
                "Detected response directive on non-service",
            ));
        }
        if let Some(p) = allow_trace_at {
            return Err(ConfigError::at(
                &p,
                "Detected allow_trace directive on non-service",
            ));
        }
    }
    ex.kind = k;
    ex.subject = subject;
    Ok(ex)
}

/// One entry of an account's `imports`: `{stream: {account: A, subject: "x.>"}, prefix: "p"}`
/// or `to: "mapped"`; `{service: {account: A, subject: "req"}, to: "local"}`.
fn import(m: &Map, at: &Pos) -> Result<Import, ConfigError> {
    let mut im = Import {
        kind: LinkKind::Stream,
        account: String::new(),
        subject: String::new(),
        prefix: None,
        to: None,
        allow_trace: false,
        share: false,
    };
    let mut seen = false;
    let mut allow_trace_at: Option<Pos> = None;
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "stream" | "service" => {
                if seen {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        format!("Detected {k} but already saw a {}", im.kind.as_str()),
                    ));
                }
                seen = true;
                im.kind = if k == "stream" {
                    LinkKind::Stream
                } else {
                    LinkKind::Service
                };
                for (sk, se) in options(map(k, v)?) {
                    match sk.as_str() {
                        "account" => im.account = string(&sk, &se.value)?,
                        "subject" => im.subject = string(&sk, &se.value)?,
                        _ => return Err(unknown(se)),
                    }
                }
                if im.account.is_empty() || im.subject.is_empty() {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        "Expect an account name and a subject",
                    ));
                }
            }
            "prefix" => im.prefix = Some(string(k, v)?),
            "to" => im.to = Some(string(k, v)?),
            "allow_trace" => {
                im.allow_trace = boolean(k, v)?;
                allow_trace_at = Some(e.key_pos.clone());
            }
            _ => return Err(unknown(e)),
        }
    }
    if !seen {
        return Err(ConfigError::at(at, "Expect a stream or a service import"));
    }
    if let (LinkKind::Service, Some(p)) = (im.kind, &allow_trace_at) {
        return Err(ConfigError::at(
            p,
            "Detected allow_trace directive on a non-stream",
        ));
    }
    if im.kind == LinkKind::Service {
        // nats-server accepts and ignores a service import's prefix.
        im.prefix = None;
    }
    Ok(im)
}

/// An account's `limits { max_connections/max_conn, max_subscriptions/max_subs,
/// max_payload/max_pay, max_leafnodes/max_leafs }` with nats-server's texts.
fn account_limits(v: &Value) -> Result<crate::config::AccountLimits, ConfigError> {
    let Kind::Map(m) = &v.kind else {
        return Err(ConfigError::at(
            &v.pos,
            format!(
                "Expected account limits to be a map/struct, got {}",
                match &v.kind {
                    Kind::String(s) => s.clone(),
                    Kind::Integer { value, .. } => value.to_string(),
                    Kind::Float(f) => f.to_string(),
                    Kind::Bool(b) => b.to_string(),
                    k => go_type(k).to_string(),
                }
            ),
        ));
    };
    let mut l = crate::config::AccountLimits::default();
    for (key, e) in options(m) {
        let n = integer(&key, &e.value)?;
        match key.as_str() {
            "max_connections" | "max_conn" => l.max_connections = n,
            "max_subscriptions" | "max_subs" => l.max_subscriptions = n,
            "max_payload" | "max_pay" => l.max_payload = n,
            "max_leafnodes" | "max_leafs" => l.max_leafnodes = n,
            _ => {
                return Err(ConfigError::at(
                    &e.key_pos,
                    format!("Unknown field {key:?} parsing account limits"),
                ))
            }
        }
    }
    Ok(l)
}

/// An account's `msg_trace`/`trace_dest` (nats-server's `parseAccountMsgTrace`, its texts):
/// a destination subject, or `{ dest, sampling }` (sampling 1..100, an integer or `"n%"`,
/// default 100). Sampling without a destination is a warning and means nothing.
fn msg_trace(
    key: &str,
    key_pos: &Pos,
    v: &Value,
    warnings: &mut Vec<ConfigError>,
) -> Result<Option<crate::config::AccountMsgTrace>, ConfigError> {
    // Errors point at the key (`msg_trace`, or the field's), as nats-server's.
    let dest = |k: &str, at: &Pos, v: &Value| match &v.kind {
        Kind::String(s) if crate::subject::is_valid_literal_subject(s.as_bytes()) => Ok(s.clone()),
        Kind::String(s) => Err(ConfigError::at(
            at,
            format!("Trace destination {s:?} is not valid"),
        )),
        other => Err(ConfigError::at(
            at,
            format!("Field {k:?} should be a string, got {}", go_type(other)),
        )),
    };
    let sampling_range = |n: i64, at: &Pos| {
        if n <= 0 || n > 100 {
            Err(ConfigError::at(
                at,
                format!("Ttrace destination sampling value {n} is invalid, needs to be [1..100]"),
            ))
        } else {
            Ok(n as u8)
        }
    };
    let (mut d, mut sampling) = (None, 0u8);
    match &v.kind {
        Kind::String(_) => d = Some(dest(key, key_pos, v)?),
        Kind::Map(m) => {
            for (k, e) in options(m) {
                let ev = &e.value;
                match k.as_str() {
                    "dest" => d = Some(dest(&e.key, &e.key_pos, ev)?),
                    "sampling" => {
                        sampling = match &ev.kind {
                            Kind::Integer { value, .. } => sampling_range(*value, &e.key_pos)?,
                            Kind::String(s) => {
                                let n = s.trim_end_matches('%').parse::<i64>().map_err(|_| {
                                    ConfigError::at(
                                        &e.key_pos,
                                        format!("Invalid trace destination sampling value {s:?}"),
                                    )
                                })?;
                                sampling_range(n, &e.key_pos)?
                            }
                            other => {
                                return Err(ConfigError::at(
                                    &e.key_pos,
                                    format!(
                                        "Trace destination sampling field {:?} should be an \
                                         integer or a percentage, got {}",
                                        e.key,
                                        go_type(other)
                                    ),
                                ))
                            }
                        }
                    }
                    _ => {
                        return Err(ConfigError::at(
                            &e.key_pos,
                            format!(
                                "Unknown field {:?} parsing account message trace map/struct \
                                 {key:?}",
                                e.key
                            ),
                        ))
                    }
                }
            }
        }
        other => {
            return Err(ConfigError::at(
                key_pos,
                format!(
                    "Expected account message trace {key:?} to be a string or a map/struct, got {}",
                    go_type(other)
                ),
            ))
        }
    }
    match d {
        Some(dest) => Ok(Some(crate::config::AccountMsgTrace {
            dest,
            sampling: if sampling == 0 { 100 } else { sampling },
        })),
        None => {
            if sampling > 0 {
                warnings.push(ConfigError::at(
                    key_pos,
                    "Trace destination sampling ignored since no destination was set",
                ));
            }
            Ok(None)
        }
    }
}
