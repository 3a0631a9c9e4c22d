//! A config file's meaning: the `conf` tree mapped onto `Options`, key by key, as
//! nats-server 2.9 reads its files. Keys of options are case-insensitive; a key natsd knows
//! from nats-server but does not build yet is refused with a message naming it; any other key
//! is `unknown field "x"` (an error, as in nats-server 2.9) unless it is a variable some value
//! referred to. Values of the wrong type, bad units and durations are errors at their position;
//! a bare integer where a duration is expected means seconds and is a warning (nats-server's
//! `-t` treats warnings as errors, and so does `check`).
//!
//! Knows nothing of servers or the command line: `flags.rs` loads the file, then applies flags.

use super::conf::{self, Entry, Kind, Map, Pos, Value};
use super::links::{AccountLinks, Export, Import, LinkKind, ResponseType};
use super::{
    ClusterOpts, GatewayOpts, Options, Permissions, RemoteGatewayOpts, SubjectPermission, User,
    NATSD_VERSION,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use super::conf::ConfigError;

/// Options read from a file, and the warnings found on the way.
#[derive(Debug)]
pub struct Loaded {
    pub options: Options,
    pub warnings: Vec<ConfigError>,
}

/// Load a config file onto nats-server's defaults and validate the result. Warnings are logged
/// (`tracing::warn!`, or printed to stderr as nats-server does while logging is not set up).
pub fn load(path: &Path) -> Result<Options, ConfigError> {
    let loaded = load_with_warnings(path)?;
    for w in &loaded.warnings {
        if tracing::dispatcher::has_been_set() {
            tracing::warn!("{w}");
        } else {
            eprintln!("natsd: {w}");
        }
    }
    Ok(loaded.options)
}

/// Load a config file; the caller decides what to do with the warnings.
pub fn load_with_warnings(path: &Path) -> Result<Loaded, ConfigError> {
    let map = conf::parse_file(path)?;
    finish(&map, Some(path))
}

/// What `natsd -t -c FILE` does: the file must load without errors and without warnings.
pub fn check(path: &Path) -> Result<(), ConfigError> {
    let loaded = load_with_warnings(path)?;
    match loaded.warnings.into_iter().next() {
        Some(w) => Err(w),
        None => Ok(()),
    }
}

/// Load config text (includes are relative to the current directory).
pub fn load_str(src: &str) -> Result<Loaded, ConfigError> {
    let map = conf::parse_str(src)?;
    finish(&map, None)
}

fn finish(map: &Map, file: Option<&Path>) -> Result<Loaded, ConfigError> {
    let mut options = Options::default();
    let mut warnings = Vec::new();
    apply(map, &mut options, &mut warnings)?;
    options
        .validate()
        .map_err(|e| ConfigError::whole(file, e))?;
    Ok(Loaded { options, warnings })
}

/// What natsd does not build yet, by key: the text after "does not build … yet".
fn not_yet(key: &str) -> Option<&'static str> {
    Some(match key {
        "store_dir" | "default_js_domain" => "JetStream",
        "leaf" | "leafnodes" => "leaf nodes",
        "ocsp" => "OCSP stapling",
        "websocket" => "WebSocket",
        "mqtt" => "MQTT",
        "operator" | "operators" | "resolver" | "resolver_tls" | "resolver_preload" | "trusted"
        | "trusted_keys" => "decentralized (JWT) auth",
        "log_size_limit" | "log_max_num" | "logtime_utc" | "trace_verbose" => "this logging option",
        "prof_port" => "profiling",
        "mappings" | "map" => "subject mappings",
        "no_sublist_cache" | "max_sub_tokens" | "no_header_support" => "this option",
        "connect_error_reports" | "reconnect_error_reports" => "route error reports",
        "nkey" | "nkeys" => "nkey auth",
        "allowed_connection_types" => "connection types",
        "allow_responses" | "allow_resp" => "response permissions",
        "pool_size" | "compression" => "route pooling/compression",
        "auth_callout" => "auth callout",
        _ => return None,
    })
}

fn not_supported(key: &str, at: &Pos, what: &str) -> ConfigError {
    ConfigError::at(
        at,
        format!("{key:?} is not supported yet: natsd {NATSD_VERSION} does not build {what} yet"),
    )
}

fn unknown(e: &Entry) -> ConfigError {
    ConfigError::at(&e.key_pos, format!("unknown field {:?}", e.key))
}

/// The error for a key natsd refuses: not built yet, or unknown.
fn refuse(e: &Entry, key: &str) -> ConfigError {
    match not_yet(key) {
        Some(what) => not_supported(&e.key, &e.key_pos, what),
        None => unknown(e),
    }
}

/// Entries that are options (variables that were referenced are skipped), lowercased keys.
fn options(map: &Map) -> impl Iterator<Item = (String, &Entry)> {
    map.entries
        .iter()
        .filter(|e| !e.used_as_variable)
        .map(|e| (e.key.to_ascii_lowercase(), e))
}

fn wrong_type(key: &str, v: &Value, want: &str) -> ConfigError {
    let hint = match &v.kind {
        Kind::Integer { .. } | Kind::Float(_) | Kind::Bool(_) if want == "a string" => {
            " (quote it to make it a string)"
        }
        _ => "",
    };
    ConfigError::at(
        &v.pos,
        format!(
            "invalid value for {key:?}: expected {want}, got {}{hint}",
            v.kind.type_name()
        ),
    )
}

fn string(key: &str, v: &Value) -> Result<String, ConfigError> {
    match &v.kind {
        Kind::String(s) => Ok(s.clone()),
        _ => Err(wrong_type(key, v, "a string")),
    }
}

fn boolean(key: &str, v: &Value) -> Result<bool, ConfigError> {
    match &v.kind {
        Kind::Bool(b) => Ok(*b),
        _ => Err(wrong_type(key, v, "a boolean (true/false, yes/no, on/off)")),
    }
}

/// An integer (sizes may carry units). A word like `1kbb` is reported as a bad unit.
fn integer(key: &str, v: &Value) -> Result<i64, ConfigError> {
    match &v.kind {
        Kind::Integer { value, .. } => Ok(*value),
        Kind::String(s) => {
            let digits = s
                .strip_prefix('-')
                .unwrap_or(s)
                .bytes()
                .take_while(u8::is_ascii_digit)
                .count();
            if digits > 0 {
                let unit = s.trim_start_matches('-')[digits..].to_string();
                Err(ConfigError::at(
                    &v.pos,
                    format!(
                        "invalid value for {key:?}: {s:?} has an unknown unit {unit:?} (units: k, kb, \
                         ki, kib, m, mb, mi, mib, g, gb, gi, gib, t…, p…, e…)"
                    ),
                ))
            } else {
                Err(wrong_type(key, v, "an integer"))
            }
        }
        _ => Err(wrong_type(key, v, "an integer")),
    }
}

/// A non-negative integer that fits `max`.
fn count(key: &str, v: &Value, max: u64) -> Result<u64, ConfigError> {
    let n = integer(key, v)?;
    if n < 0 {
        return Err(ConfigError::at(
            &v.pos,
            format!("invalid value for {key:?}: {n} must not be negative"),
        ));
    }
    if n as u64 > max {
        return Err(ConfigError::at(&v.pos, format!("{key} value is too big")));
    }
    Ok(n as u64)
}

fn usize_of(key: &str, v: &Value, max: u64) -> Result<usize, ConfigError> {
    let n = count(key, v, max.min(usize::MAX as u64))?;
    usize::try_from(n).map_err(|_| ConfigError::at(&v.pos, format!("{key} value is too big")))
}

/// Go's `time.ParseDuration` for non-negative durations: `300ms`, `1.5h`, `2h45m`.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let mult = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * mult;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// A duration: a string in Go's syntax; a bare integer means seconds, with a warning.
fn duration(
    key: &str,
    v: &Value,
    warnings: &mut Vec<ConfigError>,
) -> Result<Duration, ConfigError> {
    match &v.kind {
        Kind::String(s) => parse_go_duration(s).ok_or_else(|| {
            ConfigError::at(
                &v.pos,
                format!(
                    "invalid value for {key:?}: {s:?} is not a duration (examples: \"100ms\", \
                     \"2s\", \"1m30s\", \"1h\")"
                ),
            )
        }),
        Kind::Integer { value, unit: None } if *value >= 0 => {
            warnings.push(ConfigError::at(
                &v.pos,
                format!(
                    "invalid use of field {key:?}: {key} should be converted to a duration \
                     (a bare integer means seconds: write \"{value}s\")"
                ),
            ));
            Ok(Duration::from_secs(*value as u64))
        }
        Kind::Integer {
            value,
            unit: Some(u),
        } => Err(ConfigError::at(
            &v.pos,
            format!(
                "invalid value for {key:?}: the size unit {u:?} makes it the number {value}, not a \
                 duration; write the duration in quotes (\"2m\" is two minutes)"
            ),
        )),
        _ => Err(wrong_type(key, v, "a duration such as \"2s\"")),
    }
}

/// An auth timeout: seconds as an integer or a float, or a duration string.
fn seconds(key: &str, v: &Value) -> Result<Duration, ConfigError> {
    let bad = || {
        ConfigError::at(
            &v.pos,
            format!("invalid value for {key:?}: expected seconds or a duration such as \"2s\""),
        )
    };
    match &v.kind {
        Kind::Integer { value, unit: None } if *value >= 0 => {
            Ok(Duration::from_secs(*value as u64))
        }
        Kind::Float(f) => Duration::try_from_secs_f64(*f).map_err(|_| bad()),
        Kind::String(s) => parse_go_duration(s).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// nats-server's port rules: -1 picks a free port (0 here), 0 means the default.
fn port(key: &str, n: i64, default: u16, at: &Pos) -> Result<u16, ConfigError> {
    match n {
        -1 => Ok(0),
        0 => Ok(default),
        1..=65535 => Ok(n as u16),
        _ => Err(ConfigError::at(
            at,
            format!("invalid value for {key:?}: port {n} is out of range"),
        )),
    }
}

/// `host:port` (`[::1]:4222` too), or a bare port.
fn host_port(
    key: &str,
    v: &Value,
    default_port: u16,
) -> Result<(Option<String>, u16), ConfigError> {
    match &v.kind {
        Kind::Integer { value, .. } => Ok((None, port(key, *value, default_port, &v.pos)?)),
        Kind::String(s) => {
            let bad = || {
                ConfigError::at(
                    &v.pos,
                    format!("invalid value for {key:?}: {s:?} is not host:port"),
                )
            };
            let (h, p) = s.rsplit_once(':').ok_or_else(bad)?;
            let n: i64 = p.parse().map_err(|_| bad())?;
            let h = h.trim_start_matches('[').trim_end_matches(']');
            let host = (!h.is_empty()).then(|| h.to_string());
            Ok((host, port(key, n, default_port, &v.pos)?))
        }
        _ => Err(wrong_type(key, v, "host:port or a port")),
    }
}

fn map<'v>(key: &str, v: &'v Value) -> Result<&'v Map, ConfigError> {
    match &v.kind {
        Kind::Map(m) => Ok(m),
        _ => Err(wrong_type(key, v, "a map { … }")),
    }
}

fn array<'v>(key: &str, v: &'v Value) -> Result<&'v [Value], ConfigError> {
    match &v.kind {
        Kind::Array(a) => Ok(a),
        _ => Err(wrong_type(key, v, "an array [ … ]")),
    }
}

/// A string or an array of strings.
fn strings(key: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    match &v.kind {
        Kind::String(s) => Ok(vec![s.clone()]),
        Kind::Array(a) => a.iter().map(|x| string(key, x)).collect(),
        _ => Err(wrong_type(key, v, "a string or an array of strings")),
    }
}

/// Map the top level of a parsed file onto `opts`.
pub fn apply(
    root: &Map,
    opts: &mut Options,
    warnings: &mut Vec<ConfigError>,
) -> Result<(), ConfigError> {
    for (key, e) in options(root) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "listen" => {
                let (host, p) = host_port(k, v, super::DEFAULT_PORT)?;
                if let Some(h) = host {
                    opts.host = h;
                }
                opts.port = p;
            }
            "port" => opts.port = port(k, integer(k, v)?, super::DEFAULT_PORT, &v.pos)?,
            "host" | "net" => opts.host = string(k, v)?,
            "server_name" => {
                let name = string(k, v)?;
                if name.contains(' ') {
                    return Err(ConfigError::at(&v.pos, "server_name cannot contain spaces"));
                }
                opts.server_name = Some(name);
            }
            "client_advertise" => opts.client_advertise = Some(string(k, v)?),
            "debug" => opts.debug = boolean(k, v)?,
            "trace" => opts.trace = boolean(k, v)?,
            "logtime" => opts.logtime = boolean(k, v)?,
            "syslog" => opts.syslog = boolean(k, v)?,
            "max_traced_msg_len" => {
                opts.max_traced_msg_len = usize::try_from(integer(k, v)?.max(0)).unwrap_or(0)
            }
            "remote_syslog" => opts.remote_syslog = Some(string(k, v)?),
            "logfile" | "log_file" => opts.log_file = Some(PathBuf::from(string(k, v)?)),
            "pidfile" | "pid_file" => opts.pid_file = Some(PathBuf::from(string(k, v)?)),
            "ports_file_dir" => opts.ports_file_dir = Some(PathBuf::from(string(k, v)?)),
            "server_tags" => {
                // As nats-server (jwt `TagList.Add`): a string is one tag (no comma split),
                // tags are trimmed and lowercased, empty and repeated ones dropped.
                let mut tags: Vec<String> = Vec::new();
                for t in strings(k, v)? {
                    let t = t.trim().to_lowercase();
                    if !t.is_empty() && !tags.contains(&t) {
                        tags.push(t);
                    }
                }
                opts.server_tags = tags;
            }
            "http" => {
                let (host, p) = host_port(k, v, 0)?;
                if host.is_some() {
                    opts.http_host = host;
                }
                opts.http_port =
                    (p != 0 || matches!(&v.kind, Kind::Integer { value: -1, .. })).then_some(p);
            }
            "http_port" => {
                let n = integer(k, v)?;
                opts.http_port = match n {
                    -1 => Some(0),
                    0 => None,
                    _ => Some(port(k, n, 0, &v.pos)?),
                };
            }
            "http_base_path" => opts.http_base_path = Some(string(k, v)?),
            "max_payload" => opts.max_payload = usize_of(k, v, i32::MAX as u64)?,
            "max_control_line" => opts.max_control_line = usize_of(k, v, i32::MAX as u64)?,
            "max_pending" => opts.max_pending = usize_of(k, v, i64::MAX as u64)?,
            "max_connections" | "max_conn" => {
                opts.max_connections = usize_of(k, v, i64::MAX as u64)?
            }
            "max_subscriptions" | "max_subs" => {
                opts.max_subscriptions = usize_of(k, v, i64::MAX as u64)?
            }
            "max_closed_clients" => opts.max_closed_clients = usize_of(k, v, i64::MAX as u64)?,
            "ping_interval" => opts.ping_interval = duration(k, v, warnings)?,
            "ping_max" => opts.ping_max = count(k, v, u32::MAX as u64)? as u32,
            "write_deadline" => opts.write_deadline = duration(k, v, warnings)?,
            // nats-server 2.9 refuses a duration under 30 s; natsd accepts any positive one
            // (short drains are handy in tests and small deployments).
            "lame_duck_duration" => {
                let d = duration(k, v, warnings)?;
                if d.is_zero() {
                    return Err(ConfigError::at(
                        &v.pos,
                        format!(
                            "invalid lame_duck_duration of {}, it must be positive",
                            crate::util::time::go_duration(d)
                        ),
                    ));
                }
                opts.lame_duck_duration = d;
            }
            "lame_duck_grace_period" => opts.lame_duck_grace_period = duration(k, v, warnings)?,
            "no_auth_user" => opts.no_auth_user = Some(string(k, v)?),
            "authorization" => authorization(map(k, v)?, opts)?,
            "accounts" => accounts(map(k, v)?, opts)?,
            "cluster" => opts.cluster = Some(cluster(map(k, v)?, warnings)?),
            "gateway" => opts.gateway = Some(gateway(map(k, v)?)?),
            "jetstream" if jetstream_off(v) => opts.jetstream = None,
            "jetstream" => opts.jetstream = jetstream(k, v, warnings)?,
            "system_account" => opts.system_account = string(k, v)?,
            "no_system_account" => opts.no_system_account = boolean(k, v)?,
            "tls" => opts.tls = Some(tls_block(e, true)?),
            "allow_non_tls" => opts.allow_non_tls = boolean(k, v)?,
            "https" => {
                let (host, p) = host_port(k, v, 0)?;
                if host.is_some() {
                    opts.http_host = host;
                }
                opts.https_port =
                    (p != 0 || matches!(&v.kind, Kind::Integer { value: -1, .. })).then_some(p);
            }
            "https_port" => {
                let n = integer(k, v)?;
                opts.https_port = match n {
                    -1 => Some(0),
                    0 => None,
                    _ => Some(port(k, n, 0, &v.pos)?),
                };
            }
            _ => return Err(refuse(e, k)),
        }
    }
    tls_auth_timeout(root, opts);
    Ok(())
}

/// nats-server: without an `authorization { timeout }`, a TLS server's auth timeout is the
/// TLS timeout plus one second (the handshake comes first).
fn tls_auth_timeout(root: &Map, opts: &mut Options) {
    let Some(t) = &opts.tls else { return };
    let given = options(root).any(|(k, e)| {
        k == "authorization"
            && matches!(&e.value.kind, Kind::Map(m) if options(m).any(|(k, _)| k == "timeout"))
    });
    if !given {
        opts.auth_timeout = t.timeout + Duration::from_secs(1);
    }
}

/// `jetstream: enabled` / `true` / `{ store_dir, max_memory_store, max_file_store, domain,
/// sync_interval, enabled }` (nats-server 2.9's keys; `store` and `max_mem` are its aliases).
fn jetstream(
    k: &str,
    v: &Value,
    warnings: &mut Vec<ConfigError>,
) -> Result<Option<crate::config::JetStreamOpts>, ConfigError> {
    let mut js = crate::config::JetStreamOpts::default();
    let mut enabled = true;
    match &v.kind {
        Kind::Bool(true) => return Ok(Some(js)),
        Kind::String(s) if matches!(s.to_ascii_lowercase().as_str(), "enabled" | "enable") => {
            return Ok(Some(js))
        }
        Kind::Map(m) => {
            for (key, e) in options(m) {
                let kk = key.as_str();
                match kk {
                    "enabled" | "enable" => enabled = boolean(kk, &e.value)?,
                    "store_dir" | "store" | "storedir" => {
                        js.store_dir = Some(string(kk, &e.value)?.into())
                    }
                    "max_memory_store" | "max_mem_store" | "max_mem" => {
                        // 0: the default (75% of memory), as nats-server.
                        js.max_memory_store = Some(integer(kk, &e.value)?).filter(|v| *v > 0)
                    }
                    "max_file_store" | "max_file" => {
                        js.max_file_store = Some(integer(kk, &e.value)?).filter(|v| *v > 0)
                    }
                    "domain" => js.domain = Some(string(kk, &e.value)?),
                    "sync_interval" | "sync" => match &e.value.kind {
                        Kind::String(s) if s.eq_ignore_ascii_case("always") => {
                            js.sync_always = true
                        }
                        _ => js.sync_interval = Some(duration(kk, &e.value, warnings)?),
                    },
                    _ => return Err(refuse(e, kk)),
                }
            }
            return Ok(enabled.then_some(js));
        }
        _ => {}
    }
    Err(wrong_type(k, v, "a boolean, \"enabled\" or a map"))
}

/// `jetstream: false` / `disabled` / `{ enabled: false }` asks for nothing natsd lacks.
fn jetstream_off(v: &Value) -> bool {
    match &v.kind {
        Kind::Bool(b) => !b,
        Kind::String(s) => matches!(s.to_ascii_lowercase().as_str(), "disabled" | "disable"),
        Kind::Map(m) => {
            m.len() == 1
                && options(m)
                    .all(|(k, e)| k == "enabled" && matches!(e.value.kind, Kind::Bool(false)))
        }
        _ => false,
    }
}

fn authorization(m: &Map, opts: &mut Options) -> Result<(), ConfigError> {
    let mut default_perms = None;
    let mut users = Vec::new();
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
            _ => return Err(refuse(e, k)),
        }
    }
    for u in &mut users {
        if u.permissions.is_none() {
            u.permissions.clone_from(&default_perms);
        }
    }
    opts.users.extend(users);
    Ok(())
}

fn user_list(key: &str, v: &Value, account: Option<&str>) -> Result<Vec<User>, ConfigError> {
    array(key, v)?
        .iter()
        .map(|u| user(map("users", u)?, &u.pos, account))
        .collect()
}

fn user(m: &Map, at: &Pos, account: Option<&str>) -> Result<User, ConfigError> {
    let mut u = User {
        account: account.map(str::to_string),
        ..User::default()
    };
    let mut named = false;
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "user" | "username" => {
                u.username = string(k, v)?;
                named = true;
            }
            "pass" | "password" => u.password = string(k, v)?,
            "permissions" | "permission" => u.permissions = Some(permissions(map(k, v)?)?),
            "account" if account.is_none() => u.account = Some(string(k, v)?),
            _ => return Err(refuse(e, k)),
        }
    }
    if !named {
        return Err(ConfigError::at(at, "user entry without a \"user\""));
    }
    Ok(u)
}

fn permissions(m: &Map) -> Result<Permissions, ConfigError> {
    let mut p = Permissions::default();
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "publish" | "pub" => p.publish = Some(subject_permission(k, v)?),
            "subscribe" | "sub" => p.subscribe = Some(subject_permission(k, v)?),
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

fn accounts(m: &Map, opts: &mut Options) -> Result<(), ConfigError> {
    // Where each export and import was written, for the cross-account checks at the end.
    let mut at: Vec<(String, bool, usize, Pos)> = Vec::new();
    for e in m.entries.iter().filter(|e| !e.used_as_variable) {
        let name = e.key.clone();
        let acc = map(&name, &e.value)?;
        let mut users = Vec::new();
        let mut default_perms = None;
        let mut links = AccountLinks::default();
        for (key, ae) in options(acc) {
            let k = key.as_str();
            match k {
                "users" => users = user_list(k, &ae.value, Some(&name))?,
                "jetstream" if jetstream_off(&ae.value) => {}
                "jetstream" => opts.jetstream_accounts.push(name.clone()),
                "default_permissions" => default_perms = Some(permissions(map(k, &ae.value)?)?),
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
        for u in &mut users {
            if u.permissions.is_none() {
                u.permissions.clone_from(&default_perms);
            }
        }
        if !opts.accounts.contains(&name) {
            opts.accounts.push(name);
        }
        opts.users.extend(users);
    }
    if let Err(e) = super::links::validate(&opts.accounts, &opts.links) {
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
    };
    let mut response_at: Option<Pos> = None;
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
    };
    let mut seen = false;
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
            _ => return Err(unknown(e)),
        }
    }
    if !seen {
        return Err(ConfigError::at(at, "Expect a stream or a service import"));
    }
    if im.kind == LinkKind::Service {
        // nats-server accepts and ignores a service import's prefix.
        im.prefix = None;
    }
    Ok(im)
}

/// A `tls {}` block: the client port's (`client`), the routes' or the gateways'. The certificate, key and CA
/// files are loaded here, so `-t` reports a missing file or bad PEM at the block.
fn tls_block(e: &Entry, client: bool) -> Result<crate::tls::TlsOpts, ConfigError> {
    let v = &e.value;
    let mut t = crate::tls::TlsOpts::default();
    let mut have_cert = false;
    let mut have_key = false;
    for (tk, te) in options(map(&e.key, v)?) {
        let tv = &te.value;
        let tk = tk.as_str();
        match tk {
            "cert_file" => {
                t.cert_file = string(tk, tv)?.into();
                have_cert = true;
            }
            "key_file" => {
                t.key_file = string(tk, tv)?.into();
                have_key = true;
            }
            "ca_file" => t.ca_file = Some(string(tk, tv)?.into()),
            "verify" => t.verify = boolean(tk, tv)?,
            // On the client port nats-server accepts and ignores it (it only matters when
            // dialling); natsd says so rather than pretend.
            "insecure" if client => {
                return Err(ConfigError::at(
                    &te.key_pos,
                    "\"insecure\" has no meaning for the client port's tls block (natsd refuses \
                     it; it only skips verification when dialling routes)",
                ))
            }
            "insecure" => t.insecure = boolean(tk, tv)?,
            "timeout" => t.timeout = seconds(tk, tv)?,
            "cipher_suites" => {
                for c in array(tk, tv)? {
                    let name = string(tk, c)?;
                    crate::tls::cipher_suite(&name).map_err(|m| ConfigError::at(&c.pos, m))?;
                    t.cipher_suites.push(name);
                }
            }
            "curve_preferences" => {
                for c in array(tk, tv)? {
                    let name = string(tk, c)?;
                    crate::tls::curve(&name).map_err(|m| ConfigError::at(&c.pos, m))?;
                    t.curve_preferences.push(name);
                }
            }
            "verify_and_map" | "verify_cert_and_check_known_urls" => {
                return Err(not_supported(
                    &te.key,
                    &te.key_pos,
                    "certificate-to-user mapping",
                ))
            }
            _ => return Err(not_supported(&te.key, &te.key_pos, "this TLS option")),
        }
    }
    if !have_cert || !have_key {
        return Err(ConfigError::at(
            &v.pos,
            "missing 'cert_file' or 'key_file' in TLS configuration",
        ));
    }
    // Load the files now: a missing file or bad PEM is an error at the block (nats-server:
    // `file:2:1: error parsing X509 certificate/key pair: …`).
    crate::tls::server_config(&t).map_err(|m| ConfigError::at(&e.key_pos, m))?;
    Ok(t)
}

fn cluster(m: &Map, warnings: &mut Vec<ConfigError>) -> Result<ClusterOpts, ConfigError> {
    let mut c = ClusterOpts::default();
    const DEFAULT_ROUTE_PORT: u16 = 6222;
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "name" => {
                let name = string(k, v)?;
                if name.contains(' ') {
                    return Err(ConfigError::at(
                        &v.pos,
                        "cluster name cannot contain spaces",
                    ));
                }
                c.name = Some(name);
            }
            "listen" => {
                let (host, p) = host_port(k, v, DEFAULT_ROUTE_PORT)?;
                if let Some(h) = host {
                    c.host = h;
                }
                c.port = p;
            }
            "host" | "net" => c.host = string(k, v)?,
            "port" => c.port = port(k, integer(k, v)?, DEFAULT_ROUTE_PORT, &v.pos)?,
            "routes" => {
                c.routes = strings(k, v)?;
                for r in &c.routes {
                    crate::cluster::url::RouteUrl::parse(r).map_err(|e| {
                        ConfigError::at(&v.pos, format!("invalid value for \"routes\": {e}"))
                    })?;
                }
            }
            "advertise" | "cluster_advertise" => c.advertise = Some(string(k, v)?),
            "no_advertise" => c.no_advertise = boolean(k, v)?,
            "connect_retries" => c.connect_retries = count(k, v, u32::MAX as u64)? as u32,
            "ping_interval" => c.ping_interval = Some(duration(k, v, warnings)?),
            "ping_max" => c.ping_max = Some(count(k, v, u32::MAX as u64)? as u32),
            "authorization" => {
                for (ak, ae) in options(map(k, v)?) {
                    let av = &ae.value;
                    let ak = ak.as_str();
                    match ak {
                        "user" | "username" => c.username = Some(string(ak, av)?),
                        "pass" | "password" => c.password = Some(string(ak, av)?),
                        "token" => c.token = Some(string(ak, av)?),
                        "timeout" => c.auth_timeout = seconds(ak, av)?,
                        "users" => {
                            return Err(not_supported(&ae.key, &ae.key_pos, "several route users"))
                        }
                        _ => return Err(refuse(ae, ak)),
                    }
                }
            }
            "tls" => c.tls = Some(tls_block(e, false)?),
            "permissions" => return Err(not_supported(&e.key, &e.key_pos, "route permissions")),
            "accounts" => return Err(not_supported(&e.key, &e.key_pos, "pinned accounts")),
            _ => return Err(refuse(e, k)),
        }
    }
    Ok(c)
}

fn gateway(m: &Map) -> Result<GatewayOpts, ConfigError> {
    let mut g = GatewayOpts::default();
    const DEFAULT_GATEWAY_PORT: u16 = 7222;
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "name" => {
                let name = string(k, v)?;
                if name.contains(' ') {
                    return Err(ConfigError::at(
                        &v.pos,
                        "gateway name cannot contain spaces",
                    ));
                }
                g.name = name;
            }
            "listen" => {
                let (host, p) = host_port(k, v, DEFAULT_GATEWAY_PORT)?;
                if let Some(h) = host {
                    g.host = h;
                }
                g.port = p;
            }
            "host" | "net" => g.host = string(k, v)?,
            "port" => g.port = port(k, integer(k, v)?, DEFAULT_GATEWAY_PORT, &v.pos)?,
            "advertise" | "gateway_advertise" => g.advertise = Some(string(k, v)?),
            "connect_retries" => g.connect_retries = count(k, v, u32::MAX as u64)? as u32,
            "reject_unknown" | "reject_unknown_cluster" => g.reject_unknown = boolean(k, v)?,
            "authorization" => {
                for (ak, ae) in options(map(k, v)?) {
                    let av = &ae.value;
                    let ak = ak.as_str();
                    match ak {
                        "user" | "username" => g.username = Some(string(ak, av)?),
                        "pass" | "password" => g.password = Some(string(ak, av)?),
                        "token" => g.token = Some(string(ak, av)?),
                        "timeout" => g.auth_timeout = seconds(ak, av)?,
                        // As nats-server 2.9.10 (same text, at the `authorization` key).
                        "users" => {
                            return Err(ConfigError::at(
                                &e.key_pos,
                                "Gateway authorization does not allow multiple users",
                            ))
                        }
                        _ => return Err(refuse(ae, ak)),
                    }
                }
            }
            "gateways" => {
                for item in array(k, v)? {
                    g.gateways.push(remote_gateway(map(k, item)?, &item.pos)?);
                }
            }
            "tls" => g.tls = Some(tls_block(e, false)?),
            _ => return Err(refuse(e, k)),
        }
    }
    Ok(g)
}

fn gateway_url(key: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    let urls = strings(key, v)?;
    for u in &urls {
        crate::cluster::url::RouteUrl::parse(u)
            .map_err(|e| ConfigError::at(&v.pos, format!("invalid value for {key:?}: {e}")))?;
    }
    Ok(urls)
}

fn remote_gateway(m: &Map, at: &Pos) -> Result<RemoteGatewayOpts, ConfigError> {
    let mut r = RemoteGatewayOpts {
        name: String::new(),
        urls: Vec::new(),
        tls: None,
    };
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "name" => r.name = string(k, v)?,
            "url" => r.urls.extend(gateway_url(k, v)?),
            "urls" => r.urls.extend(gateway_url(k, v)?),
            "tls" => r.tls = Some(tls_block(e, false)?),
            _ => return Err(refuse(e, k)),
        }
    }
    if r.name.is_empty() {
        return Err(ConfigError::at(
            at,
            "gateway in the gateways list has no name",
        ));
    }
    if r.urls.is_empty() {
        return Err(ConfigError::at(
            at,
            format!("gateway {:?} has no URL", r.name),
        ));
    }
    Ok(r)
}

#[cfg(test)]
#[path = "file_tests.rs"]
mod tests;
