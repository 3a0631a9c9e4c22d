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
    ClusterOpts, GatewayOpts, NkeyUser, Options, Permissions, RemoteGatewayOpts, SubjectPermission,
    User, NATSD_VERSION,
};
use crate::compress::{CompressionMode, CompressionOpts};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use super::conf::ConfigError;

mod accounts;
mod blocks;
mod callout;
mod leaf;
mod mapping;
mod operator;
mod operator_links;
pub(crate) use operator::derive as derive_jwt_accounts;

use accounts::{accounts, authorization};
use blocks::{
    account_jetstream, cluster, gateway, jetstream, jetstream_off, tls_block, tls_block_for,
};

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
    // Syntax errors as nats-server words them (tools match on "Parse error on line").
    let map = conf::parse_file(path).map_err(ConfigError::parse_error)?;
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
    let map = conf::parse_str(src).map_err(ConfigError::parse_error)?;
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
        "default_js_domain" => "JetStream domain mappings",
        "ocsp" | "ocsp_cache" => "OCSP stapling",
        "websocket" | "ws" => "WebSocket",
        "mqtt" => "MQTT",
        "resolver_pinned_accounts" | "trusted" | "trusted_keys" => {
            "this part of decentralized (JWT) auth"
        }
        "trace_verbose" | "trace_headers" => "this logging option",
        "prof_port" | "prof_block_rate" => "profiling",
        "no_sublist_cache" | "disable_sublist_cache" | "no_header_support" => "this option",
        "nkey" | "nkeys" => "nkey auth outside a users list",
        "allowed_connection_types" => "connection types",
        "allow_responses" | "allow_resp" => "response permissions",
        "compression" => "route compression",
        "auth_callout" => "auth callout",
        "proxy_protocol" => "the PROXY protocol",
        "proxies" => "trusted proxies",
        "server_metadata" => "server metadata",
        "feature_flags" => "feature flags",
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

/// A `write_timeout` value, with nats-server's error text.
fn write_timeout(
    key: &str,
    v: &Value,
) -> Result<crate::conn::writer::WriteTimeoutPolicy, ConfigError> {
    crate::conn::writer::WriteTimeoutPolicy::parse(&string(key, v)?).ok_or_else(|| {
        ConfigError::at(
            &v.pos,
            "write_timeout must be 'default', 'close' or 'retry'",
        )
    })
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
    let mut store_dir: Option<PathBuf> = None;
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
                    return Err(ConfigError::at(&v.pos, "server name cannot contain spaces"));
                }
                opts.server_name = Some(name);
            }
            "client_advertise" => opts.client_advertise = Some(string(k, v)?),
            "debug" => opts.debug = boolean(k, v)?,
            "trace" => opts.trace = boolean(k, v)?,
            "logtime" => opts.logtime = boolean(k, v)?,
            // natsd's log stamps are always UTC (see `util::time::log_stamp`).
            "logtime_utc" => opts.logtime_utc = boolean(k, v)?,
            "syslog" => opts.syslog = boolean(k, v)?,
            "max_traced_msg_len" => {
                opts.max_traced_msg_len = usize::try_from(integer(k, v)?.max(0)).unwrap_or(0)
            }
            "remote_syslog" => opts.remote_syslog = Some(string(k, v)?),
            "logfile" | "log_file" => opts.log_file = Some(PathBuf::from(string(k, v)?)),
            // As nats-server: any integer (sizes like 10MB too); 0 or less turns it off.
            "logfile_size_limit" | "log_size_limit" => opts.log_size_limit = integer(k, v)?,
            "logfile_max_num" | "log_max_num" => opts.log_max_num = integer(k, v)?,
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
            "http" => opts.http_port = monitor_listen(k, v, &mut opts.http_host)?,
            "http_port" | "monitor_port" => opts.http_port = monitor_port(k, v)?,
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
            // 0 is the default, as nats-server's `setBaselineOptions` has it.
            "connect_error_reports" => {
                opts.connect_error_reports = match count(k, v, u32::MAX as u64)? as u32 {
                    0 => crate::config::DEFAULT_CONNECT_ERROR_REPORTS,
                    n => n,
                }
            }
            "reconnect_error_reports" => {
                opts.reconnect_error_reports = match count(k, v, u32::MAX as u64)? as u32 {
                    0 => crate::config::DEFAULT_RECONNECT_ERROR_REPORTS,
                    n => n,
                }
            }
            "max_sub_tokens" | "max_subscription_tokens" => {
                // nats-server's checks and texts (at most 255; 0 and below are refused).
                let n = integer(k, v)?;
                if n > i64::from(u8::MAX) {
                    return Err(ConfigError::at(&v.pos, format!("{k} value is too big")));
                }
                if n <= 0 {
                    return Err(ConfigError::at(
                        &v.pos,
                        format!("{k} value can not be negative"),
                    ));
                }
                opts.max_sub_tokens = n as u8;
            }
            "max_closed_clients" => opts.max_closed_clients = usize_of(k, v, i64::MAX as u64)?,
            "ping_interval" => opts.ping_interval = duration(k, v, warnings)?,
            "ping_max" => opts.ping_max = count(k, v, u32::MAX as u64)? as u32,
            "write_deadline" => opts.write_deadline = duration(k, v, warnings)?,
            "write_timeout" => opts.write_timeout = write_timeout(k, v)?,
            "no_fast_producer_stall" => opts.no_fast_producer_stall = boolean(k, v)?,
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
            "accounts" => accounts(map(k, v)?, opts, warnings)?,
            "mappings" | "maps" => {
                let m = mapping::mappings(v)?;
                opts.account_mappings
                    .entry(crate::account::GLOBAL_ACCOUNT.to_string())
                    .or_default()
                    .extend(m);
            }
            "cluster" => opts.cluster = Some(cluster(map(k, v)?, warnings)?),
            "gateway" => opts.gateway = Some(gateway(map(k, v)?, warnings)?),
            "leafnodes" | "leaf" => opts.leafnodes = Some(leaf::leafnodes(map(k, v)?)?),
            "jetstream" if jetstream_off(v) => opts.jetstream = None,
            "jetstream" => opts.jetstream = jetstream(k, v, warnings)?,
            "system_account" | "system" => opts.system_account = string(k, v)?,
            "no_system_account" | "no_system" | "no_sys_acc" => {
                opts.no_system_account = boolean(k, v)?
            }
            // nats-server's top-level JetStream store directory: used by a `jetstream` block
            // or `-js` that names none.
            "store_dir" | "storedir" => store_dir = Some(PathBuf::from(string(k, v)?)),
            "tls" => opts.tls = Some(tls_block(e, blocks::TlsCtx::Client)?),
            "resolver_tls" => opts.resolver_tls = Some(tls_block(e, blocks::TlsCtx::Resolver)?),
            "allow_non_tls" => opts.allow_non_tls = boolean(k, v)?,
            "https" => opts.https_port = monitor_listen(k, v, &mut opts.http_host)?,
            "https_port" => opts.https_port = monitor_port(k, v)?,
            _ if operator::key(k, e, opts)? => {}
            _ => return Err(refuse(e, k)),
        }
    }
    operator::settle(opts)?;
    if let (Some(d), Some(js)) = (store_dir, opts.jetstream.as_mut()) {
        js.store_dir.get_or_insert(d);
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

/// `http`/`https: host:port` (or a port): sets the monitor host when given; the port as
/// `monitor_port` reads it (-1 stays "a free port").
fn monitor_listen(
    k: &str,
    v: &Value,
    host: &mut Option<String>,
) -> Result<Option<u16>, ConfigError> {
    let (h, p) = host_port(k, v, 0)?;
    if h.is_some() {
        *host = h;
    }
    // Port -1 (`http: -1` or `http: "127.0.0.1:-1"`) picks a free port; 0 means no monitor.
    let random = match &v.kind {
        Kind::Integer { value, .. } => *value == -1,
        Kind::String(s) => s.rsplit_once(':').is_some_and(|(_, p)| p.trim() == "-1"),
        _ => false,
    };
    Ok((p != 0 || random).then_some(p))
}

/// `http_port`/`https_port`: -1 picks a free port (`Some(0)`), 0 turns the listener off.
fn monitor_port(k: &str, v: &Value) -> Result<Option<u16>, ConfigError> {
    match integer(k, v)? {
        -1 => Ok(Some(0)),
        0 => Ok(None),
        n => Ok(Some(port(k, n, 0, &v.pos)?)),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_tls;
#[cfg(test)]
mod tests_users;
