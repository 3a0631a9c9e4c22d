//! A user JWT as the server applies it, after the checks of [`super::decode`]: the template
//! of a scoped signing key put in place of the user's own permissions and limits (with its
//! `{{name()}}`, `{{subject()}}`, `{{account-name()}}`, `{{account-subject()}}`,
//! `{{tag(x)}}`, `{{account-tag(x)}}` substitutions), the account's `revocations`, the
//! `src` CIDRs, `allowed_connection_types`, and the user's own `subs` and `payload` limits —
//! as nats-server (`auth.go`, `accounts.go`, `client.go`) and the jwt v2 library read them.
//! Pure: the caller passes the client's address and the clock.

use super::Claims;
use serde_json::{Map, Value};
use std::net::IpAddr;

/// The most subjects one template entry may expand to (nats-server's limit).
const MAX_EXPANSIONS: usize = 4096;

/// The connection types the jwt library and nats-server know (`allowed_connection_types`).
pub const CONNECTION_TYPES: [&str; 7] = [
    "STANDARD",
    "WEBSOCKET",
    "LEAFNODE",
    "LEAFNODE_WS",
    "MQTT",
    "MQTT_WS",
    "IN_PROCESS",
];

/// The user fields a scope's template replaces (the jwt library's `UserPermissionLimits`).
const TEMPLATE_FIELDS: [&str; 12] = [
    "pub",
    "sub",
    "resp",
    "src",
    "times",
    "times_location",
    "subs",
    "data",
    "payload",
    "bearer_token",
    "proxy_required",
    "allowed_connection_types",
];

/// An account's `signing_keys` as the jwt library reads it: a list of keys, each a string or
/// a `{"kind":"user_scope","key":…}` object; anything else makes the account JWT invalid.
pub(super) fn check_signing_keys(v: &Value) -> Result<(), String> {
    let list = match v {
        Value::Null => return Ok(()),
        Value::Array(a) => a,
        _ => return Err("signing_keys is not a list".into()),
    };
    for k in list {
        match k {
            Value::String(_) => {}
            Value::Object(o) => {
                let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
                if kind != "user_scope" {
                    return Err(format!("unknown signing key scope {kind:?}"));
                }
                if !o.get("key").is_some_and(Value::is_string) {
                    return Err("a scoped signing key without a key".into());
                }
                if !matches!(
                    o.get("template"),
                    None | Some(Value::Null | Value::Object(_))
                ) {
                    return Err("a scoped signing key's template is not an object".into());
                }
            }
            _ => return Err("a signing key is neither a key nor a scope".into()),
        }
    }
    Ok(())
}

/// The jwt library's `HasEmptyPermissions`: a user signed by a scoped key may set no
/// permission, limit, bearer flag or connection type of its own (a limit of 0 is "none
/// set": the library omits zero values).
pub fn has_empty_permissions(u: &Claims) -> bool {
    TEMPLATE_FIELDS.iter().all(|k| match &u.nats[*k] {
        Value::Null | Value::Bool(false) => true,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        // `"pub":{}` is the zero permission; any list in it (even empty) is not.
        Value::Object(o) => o.is_empty(),
        Value::Array(_) => false,
        Value::Bool(true) => false,
    })
}

/// Put a scope's `template` in place of the user's own permissions and limits, substituting
/// its templates, as nats-server's `processUserPermissionsTemplate`. `account` is the
/// account's claims (its name and tags). An absent template limit is "no limit" (-1).
pub fn apply_scope(u: &mut Claims, template: &Value, account: &Claims) -> Result<(), String> {
    let mut nats = match std::mem::take(&mut u.nats) {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    for k in TEMPLATE_FIELDS {
        nats.remove(k);
    }
    for k in ["subs", "data", "payload"] {
        nats.insert(k.into(), (-1).into());
    }
    if let Value::Object(t) = template {
        let fields = t
            .iter()
            .filter(|(k, _)| TEMPLATE_FIELDS.contains(&k.as_str()));
        nats.extend(fields.map(|(k, v)| (k.clone(), v.clone())));
    }
    u.nats = Value::Object(nats);
    let tags = |c: &Claims| -> Vec<String> {
        c.nats["tags"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let ctx = Ctx {
        name: u.name.clone(),
        subject: u.subject.clone(),
        account_name: account.name.clone(),
        account_subject: u.str("issuer_account").to_string(),
        tags: tags(u),
        account_tags: tags(account),
    };
    for p in ["pub", "sub"] {
        let had_allow = list(&u.nats[p]["allow"]).is_some_and(|a| !a.is_empty());
        let mut allow = None;
        let mut deny = None;
        for (field, strict) in [("allow", false), ("deny", true)] {
            if let Some(l) = list(&u.nats[p][field]) {
                let done = ctx.expand(&l, strict)?;
                if field == "allow" {
                    allow = Some(done);
                } else {
                    deny = Some(done);
                }
            }
        }
        // An allow list that expanded to nothing denies everything.
        if had_allow && allow.as_ref().is_none_or(Vec::is_empty) {
            deny.get_or_insert_with(Vec::new).push(">".into());
        }
        let Some(perm) = u.nats.get_mut(p).and_then(Value::as_object_mut) else {
            continue;
        };
        for (field, v) in [("allow", allow), ("deny", deny)] {
            if let Some(v) = v {
                perm.insert(field.into(), v.into());
            }
        }
    }
    Ok(())
}

fn list(v: &Value) -> Option<Vec<String>> {
    v.as_array().map(|a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    })
}

/// What template operations expand to.
struct Ctx {
    name: String,
    subject: String,
    account_name: String,
    account_subject: String,
    tags: Vec<String>,
    account_tags: Vec<String>,
}

/// The `{{…}}` spans of `s`, as nats-server's pattern finds them: `{{`, one or more
/// characters that are not `}`, `}}`.
fn templates(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = s[i..].find("{{") {
        let start = i + at;
        let body = start + 2;
        match s[body..].find('}') {
            Some(n) if n > 0 && s[body + n..].starts_with("}}") => {
                out.push(&s[start..body + n + 2]);
                i = body + n + 2;
            }
            _ => i = start + 1,
        }
    }
    out
}

impl Ctx {
    /// The values one operation stands for; tags may give several (or none).
    fn values(&self, op: &str, entry: &str, strict: bool) -> Result<(Vec<String>, bool), String> {
        let lower = op.to_ascii_lowercase();
        let one = |v: &str| Ok((vec![v.to_string()], false));
        match lower.as_str() {
            "name()" => return one(&self.name),
            "subject()" => return one(&self.subject),
            "account-name()" => return one(&self.account_name),
            "account-subject()" => return one(&self.account_subject),
            _ => {}
        }
        let tag = |prefix: &str| {
            (lower.starts_with(prefix) && op.ends_with(')'))
                .then(|| &op[prefix.len()..op.len() - 1])
        };
        let (name, tags) = if let Some(n) = tag("tag(") {
            (n, &self.tags)
        } else if let Some(n) = tag("account-tag(") {
            (n, &self.account_tags)
        } else {
            return Err(format!(
                "template operation in {entry:?}: {op:?} is not defined"
            ));
        };
        let prefix = format!("{}:", name.to_lowercase());
        let found: Vec<String> = tags
            .iter()
            .filter_map(|t| t.strip_prefix(&prefix).map(str::to_string))
            .collect();
        if !found.is_empty() {
            Ok((found, true))
        } else if strict {
            Err(format!(
                "generated invalid subject {entry:?}: {name:?} is not defined"
            ))
        } else {
            // A subject that is never valid, so the entry is dropped.
            Ok((vec![" ".into()], true))
        }
    }

    /// Expand every entry of a list; an entry that comes out as no valid subject is dropped
    /// (`strict`: refused).
    fn expand(&self, list: &[String], strict: bool) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for entry in list {
            let spans = templates(entry);
            if spans.is_empty() {
                out.push(entry.clone());
                continue;
            }
            let mut values = Vec::new();
            let mut several = false;
            for span in &spans {
                let op = span[2..span.len() - 2].trim();
                let (v, tagged) = self.values(op, entry, strict)?;
                several |= tagged;
                values.push(v);
            }
            if !several {
                // One value each: substitute in turn.
                let mut s = entry.clone();
                for (span, v) in spans.iter().zip(&values) {
                    s = s.replace(span, &v[0]);
                }
                push_valid(&mut out, s, strict)?;
                continue;
            }
            let total = values.iter().try_fold(1usize, |n, v| {
                n.checked_mul(v.len()).filter(|n| *n <= MAX_EXPANSIONS)
            });
            let total = total.ok_or("template expansion exceeds limit: 4096")?;
            if out.len() + total > MAX_EXPANSIONS {
                return Err("template expansion exceeds limit: 4096".into());
            }
            // Every combination, the last operation varying fastest.
            let mut idx = vec![0usize; values.len()];
            for _ in 0..total {
                let mut s = entry.clone();
                for (j, span) in spans.iter().enumerate() {
                    s = s.replace(span, &values[j][idx[j]]);
                }
                push_valid(&mut out, s, strict)?;
                for j in (0..idx.len()).rev() {
                    idx[j] += 1;
                    if idx[j] < values[j].len() {
                        break;
                    }
                    idx[j] = 0;
                }
            }
        }
        Ok(out)
    }
}

fn push_valid(out: &mut Vec<String>, s: String, strict: bool) -> Result<(), String> {
    if crate::subject::is_valid_subject(s.as_bytes()) {
        out.push(s);
        Ok(())
    } else if strict {
        Err("generated invalid subject".into())
    } else {
        Ok(())
    }
}

/// The account's `revocations` cover a user issued at `issued_at`: its own entry, or `*`,
/// is at or after that time.
pub fn revoked(account: &Claims, user: &str, issued_at: i64) -> bool {
    let r = &account.nats["revocations"];
    [user, "*"]
        .iter()
        .any(|k| r[*k].as_i64().is_some_and(|t| t >= issued_at))
}

/// The user's `src` list (a JSON list, or one comma-separated string), parsed; an entry
/// that is no CIDR makes the JWT invalid.
fn src_list(u: &Claims) -> Result<Vec<(IpAddr, u8)>, String> {
    let entries: Vec<String> = match &u.nats["src"] {
        Value::Null => Vec::new(),
        Value::String(s) => s
            .to_lowercase()
            .split(',')
            .map(|e| e.trim().to_string())
            .filter(|e| !e.is_empty())
            .collect(),
        Value::Array(a) => a
            .iter()
            .map(|e| e.as_str().unwrap_or("").to_string())
            .collect(),
        _ => return Err("src is not a list".into()),
    };
    entries
        .iter()
        .map(|e| {
            let bad = || format!("invalid cidr {e:?} in user src limits");
            let (ip, bits) = e.split_once('/').ok_or_else(bad)?;
            let ip: IpAddr = ip.parse().map_err(|_| bad())?;
            let bits: u8 = bits.parse().map_err(|_| bad())?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            if bits > max {
                return Err(bad());
            }
            Ok((ip, bits))
        })
        .collect()
}

fn contains((net, bits): (IpAddr, u8), ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    let prefix = |a: u128, b: u128, width: u32| {
        let shift = width - u32::from(bits);
        shift >= width || (a >> shift) == (b >> shift)
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => prefix(u32::from(n).into(), u32::from(i).into(), 32),
        (IpAddr::V6(n), IpAddr::V6(i)) => prefix(u128::from(n), u128::from(i), 128),
        _ => false,
    }
}

/// nats-server's `validateSrc`: no `src`, or the client's address in one of its CIDRs.
pub fn src_allows(u: &Claims, ip: Option<IpAddr>) -> Result<bool, String> {
    let nets = src_list(u)?;
    if nets.is_empty() {
        return Ok(true);
    }
    Ok(ip.is_some_and(|ip| nets.iter().any(|n| contains(*n, ip))))
}

/// `allowed_connection_types` against a connection of type `kind` (`STANDARD` for natsd's
/// clients): an empty list allows all; unknown names are skipped, but a list of nothing
/// else allows none (nats-server's `convertAllowedConnectionTypes`).
pub fn connection_type_allowed(u: &Claims, kind: &str) -> bool {
    let Some(list) = list(&u.nats["allowed_connection_types"]) else {
        return true;
    };
    if list.is_empty() {
        return true;
    }
    let known: Vec<String> = list
        .iter()
        .map(|t| t.to_ascii_uppercase())
        .filter(|t| CONNECTION_TYPES.contains(&t.as_str()))
        .collect();
    known.iter().any(|t| t == kind)
}

/// The user's own `subs` and `payload` limits as nats-server applies them: the JSON value
/// (absent is 0 — nothing allowed — as the jwt library decodes it), -1 or below for none.
pub fn own_limits(u: &Claims) -> (i64, i64) {
    let n = |k: &str| u.nats[k].as_i64().unwrap_or(0);
    (n("subs"), n("payload"))
}
