//! The listener blocks: `tls {}` (client port, routes, gateways), `cluster {}`, `gateway {}`
//! and `jetstream {}`.

use super::*;

/// `jetstream: enabled` / `true` / `{ store_dir, max_memory_store, max_file_store, domain,
/// sync_interval, enabled }` (nats-server 2.9's keys; `store` and `max_mem` are its aliases).
pub(super) fn jetstream(
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
                    // Lowercased, as nats-server keeps server tags.
                    "unique_tag" => {
                        js.unique_tag = Some(string(kk, &e.value)?.trim().to_lowercase())
                            .filter(|t| !t.is_empty())
                    }
                    "sync_interval" | "sync" => match &e.value.kind {
                        Kind::String(s) if s.eq_ignore_ascii_case("always") => {
                            js.sync_always = true
                        }
                        _ => js.sync_interval = Some(duration(kk, &e.value, warnings)?),
                    },
                    "limits" => js.limits = jetstream_limits(&e.value)?,
                    "disabled" | "disable" => enabled = !boolean(kk, &e.value)?,
                    // natsd's API is not strict (unknown fields are ignored): 2.11+'s default
                    // `true` is taken with a warning, `false` is what natsd does.
                    "strict" => {
                        if boolean(kk, &e.value)? {
                            warnings.push(ConfigError::at(
                                &e.key_pos,
                                "\"strict\": natsd's JetStream API ignores unknown fields \
                                 (nats-server 2.11+ refuses them)",
                            ));
                        }
                    }
                    _ => match js_not_yet(kk) {
                        Some(what) => return Err(not_supported(&e.key, &e.key_pos, what)),
                        None => return Err(refuse(e, kk)),
                    },
                }
            }
            return Ok(enabled.then_some(js));
        }
        _ => {}
    }
    Err(wrong_type(k, v, "a boolean, \"enabled\" or a map"))
}

/// The `jetstream {}` keys of nats-server 2.15 that natsd does not build yet.
fn js_not_yet(key: &str) -> Option<&'static str> {
    Some(match key {
        "max_outstanding_catchup" | "meta_compact" | "meta_compact_size" | "meta_compact_sync" => {
            "JetStream clustering"
        }
        "key"
        | "ek"
        | "encryption_key"
        | "prev_key"
        | "prev_ek"
        | "prev_encryption_key"
        | "cipher"
        | "tpm" => "encryption at rest",
        "max_buffered_size"
        | "max_buffered_msgs"
        | "request_queue_limit"
        | "info_queue_limit"
        | "max_concurrent_io" => "this queue limit (docs/limits.md)",
        "extension_hint" => "this option",
        _ => return None,
    })
}

/// `jetstream { limits { max_ack_pending, max_request_batch, duplicate_window, max_ha_assets } }`
/// with nats-server's keys and texts (`duplicate_window` is a Go duration string). Its 2.12
/// `batch {}` (atomic batch publish) is refused: natsd does not build batches.
fn jetstream_limits(v: &Value) -> Result<crate::config::JsServerLimits, ConfigError> {
    let Kind::Map(m) = &v.kind else {
        return Err(ConfigError::at(
            &v.pos,
            format!(
                "Expected a map to define JetStreamLimits, got {}",
                go_type_name(&v.kind)
            ),
        ));
    };
    let mut l = crate::config::JsServerLimits::default();
    for (key, e) in options(m) {
        let k = key.as_str();
        match k {
            "max_ack_pending" => l.max_ack_pending = integer(k, &e.value)?,
            "max_ha_assets" => l.max_ha_assets = integer(k, &e.value)?,
            "max_request_batch" => l.max_request_batch = integer(k, &e.value)?,
            "duplicate_window" => {
                let text = string(k, &e.value)?;
                let d = parse_go_duration(&text).ok_or_else(|| {
                    ConfigError::at(&e.value.pos, format!("time: invalid duration {text:?}"))
                })?;
                l.duplicate_window = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
            }
            "batch" => return Err(refuse(e, k)),
            _ => return Err(ConfigError::at(&e.key_pos, format!("unknown field {k:?}"))),
        }
    }
    Ok(l)
}

/// An account's `jetstream`: `true`/`enabled` (no limits), `false`/`disabled` (`None`), or a
/// map of limits with nats-server 2.9's keys and aliases and its error texts (sizes are
/// integers, units like `1GB` allowed, quoted strings refused; `max_bytes_required` a boolean).
pub(super) fn account_jetstream(
    v: &Value,
) -> Result<Option<crate::config::JsAccountLimits>, ConfigError> {
    let mut l = crate::config::JsAccountLimits::default();
    match &v.kind {
        Kind::Bool(b) => Ok(b.then_some(l)),
        Kind::String(s) => match s.to_ascii_lowercase().as_str() {
            "enabled" | "enable" => Ok(Some(l)),
            "disabled" | "disable" => Ok(None),
            _ => Err(ConfigError::at(
                &v.pos,
                format!("Expected 'enabled' or 'disabled' for string value, got '{s}'"),
            )),
        },
        Kind::Map(m) => {
            for (key, e) in options(m) {
                let size = || match &e.value.kind {
                    Kind::Integer { value, .. } => Ok(*value),
                    other => Err(ConfigError::at(
                        &e.value.pos,
                        format!(
                            "Expected a parseable size for {:?}, got {}",
                            e.key,
                            go_value(other)
                        ),
                    )),
                };
                match key.as_str() {
                    "max_memory" | "max_mem" | "mem" | "memory" => l.max_memory = size()?,
                    "max_store" | "max_file" | "max_disk" | "store" | "disk" => {
                        l.max_store = size()?
                    }
                    "max_streams" | "streams" => l.max_streams = size()?,
                    "max_consumers" | "consumers" => l.max_consumers = size()?,
                    "max_ack_pending" => l.max_ack_pending = size()?,
                    "mem_max_stream_bytes" | "memory_max_stream_bytes" => {
                        l.memory_max_stream_bytes = size()?
                    }
                    "disk_max_stream_bytes" | "store_max_stream_bytes" => {
                        l.store_max_stream_bytes = size()?
                    }
                    "max_bytes_required" | "max_stream_bytes" | "max_bytes" => {
                        l.max_bytes_required = match &e.value.kind {
                            Kind::Bool(b) => *b,
                            other => {
                                return Err(ConfigError::at(
                                    &e.value.pos,
                                    format!(
                                        "Expected a parseable bool for {:?}, got {}",
                                        e.key,
                                        go_value(other)
                                    ),
                                ))
                            }
                        }
                    }
                    _ => return Err(unknown(e)),
                }
            }
            Ok(Some(l))
        }
        other => Err(ConfigError::at(
            &v.pos,
            format!(
                "Expected map, bool or string to define JetStream, got {}",
                match other {
                    Kind::Integer { .. } => "int64",
                    Kind::Float(_) => "float64",
                    Kind::Array(_) => "[]interface {}",
                    _ => other.type_name(),
                }
            ),
        )),
    }
}

/// A scalar as Go's `%v` prints it.
fn go_value(k: &Kind) -> String {
    match k {
        Kind::String(s) | Kind::DateTime(s) => s.clone(),
        Kind::Integer { value, .. } => value.to_string(),
        Kind::Float(f) => f.to_string(),
        Kind::Bool(b) => b.to_string(),
        _ => k.type_name().to_string(),
    }
}

/// `jetstream: false` / `disabled` / `{ enabled: false }` asks for nothing natsd lacks.
pub(super) fn jetstream_off(v: &Value) -> bool {
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

/// Which `tls {}` block: the options it takes differ.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TlsCtx {
    /// The client port's.
    Client,
    Cluster,
    Gateway,
    /// A `gateways [ { tls {} } ]` entry's.
    GatewayRemote,
    /// `leafnodes { tls {} }`.
    Leaf,
    /// A leafnode remote's.
    LeafRemote,
    /// `resolver_tls {}`: the URL resolver's HTTPS client (Go's `tls.Config` as a client:
    /// no certificate needed, no `ca_file` means the system's roots).
    Resolver,
}

/// A `tls {}` block. The certificate, key and CA files are loaded here, so `-t` reports a
/// missing file or bad PEM at the block.
pub(super) fn tls_block(e: &Entry, ctx: TlsCtx) -> Result<crate::tls::TlsOpts, ConfigError> {
    tls_block_for(e, ctx)
}

/// A `tls {}` block; on the client port `insecure` is refused; `handshake_first` is kept for
/// the client port and leafnodes.
pub(super) fn tls_block_for(e: &Entry, ctx: TlsCtx) -> Result<crate::tls::TlsOpts, ConfigError> {
    let client_port = ctx == TlsCtx::Client;
    let first = matches!(ctx, TlsCtx::Client | TlsCtx::Leaf | TlsCtx::LeafRemote);
    let client = client_port;
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
            "verify" => t.verify = tls_bool(tk, te)?,
            // On the client port nats-server accepts and ignores it (it only matters when
            // dialling); natsd says so rather than pretend.
            "insecure" if client => {
                return Err(ConfigError::at(
                    &te.key_pos,
                    "\"insecure\" has no meaning for the client port's tls block (natsd refuses \
                     it; it only skips verification when dialling routes)",
                ))
            }
            "insecure" => t.insecure = tls_bool(tk, te)?,
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
            // nats-server parses it in every tls block, uses it on the client port (and
            // leafnodes); routes and gateways ignore it.
            "handshake_first" | "first" | "immediate" => {
                let v = handshake_first(tk, &te.key_pos, tv)?;
                if first {
                    t.handshake_first = v;
                }
            }
            // On a connection we dial there is no client certificate to map: nats-server
            // parses it there and it changes nothing (its `verify` only matters to a server).
            "verify_and_map"
                if matches!(
                    ctx,
                    TlsCtx::LeafRemote | TlsCtx::GatewayRemote | TlsCtx::Resolver
                ) =>
            {
                tls_bool(tk, te)?;
            }
            "verify_and_map" => {
                t.verify_and_map = tls_bool(tk, te)?;
                t.verify |= t.verify_and_map;
            }
            "verify_cert_and_check_known_urls" => {
                let on = tls_bool(tk, te)?;
                let peers = matches!(
                    ctx,
                    TlsCtx::Cluster | TlsCtx::Gateway | TlsCtx::GatewayRemote
                );
                if on && !peers {
                    // nats-server's words for the client port and leafnodes.
                    return Err(ConfigError::at(
                        &te.key_pos,
                        "verify_cert_and_check_known_urls not supported in this context",
                    ));
                }
                t.check_known_urls = on;
                t.verify |= on;
            }
            "pinned_certs" => {
                let Kind::Array(list) = &tv.kind else {
                    return Err(ConfigError::at(
                        &te.key_pos,
                        "error parsing tls config, expected 'pinned_certs' to be a list of \
                         hex-encoded sha256 of DER encoded SubjectPublicKeyInfo",
                    ));
                };
                let mut set = std::collections::BTreeSet::new();
                for c in list {
                    let entry = string(tk, c)?;
                    let key = crate::tls::pinned_cert_key(&entry)
                        .map_err(|m| ConfigError::at(&c.pos, m))?;
                    set.insert(key);
                }
                t.pinned_certs = (!set.is_empty()).then_some(set);
            }
            _ => return Err(not_supported(&te.key, &te.key_pos, "this TLS option")),
        }
    }
    if ctx == TlsCtx::Resolver {
        return resolver_tls(e, t, have_cert, have_key);
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

/// A boolean of a `tls {}` block; nats-server's text, at the key, for anything else.
fn tls_bool(key: &str, e: &Entry) -> Result<bool, ConfigError> {
    match e.value.kind {
        Kind::Bool(b) => Ok(b),
        _ => Err(ConfigError::at(
            &e.key_pos,
            format!("error parsing tls config, expected '{key}' to be a boolean"),
        )),
    }
}

/// The end of a `resolver_tls {}` block, as nats-server's `GenTLSConfig` checks it: a
/// certificate needs its key and the other way round (its texts, at the block); the files
/// are loaded now. The system's roots (no `ca_file`) are read when the server starts.
fn resolver_tls(
    e: &Entry,
    t: crate::tls::TlsOpts,
    have_cert: bool,
    have_key: bool,
) -> Result<crate::tls::TlsOpts, ConfigError> {
    let missing = match (have_cert, have_key) {
        (true, false) => Some("key_file"),
        (false, true) => Some("cert_file"),
        _ => None,
    };
    if let Some(m) = missing {
        let text = format!("missing '{m}' in TLS configuration");
        return Err(ConfigError::at(&e.key_pos, text));
    }
    // Load the certificate, key and CA files only (`insecure` skips the system's roots).
    let files = crate::tls::TlsOpts {
        insecure: t.insecure || t.ca_file.is_none(),
        ..t.clone()
    };
    crate::tls::dial_config(&files).map_err(|m| ConfigError::at(&e.key_pos, m))?;
    Ok(t)
}

/// `handshake_first` (or `first`, `immediate`) as nats-server 2.10+ takes it: `true`/`false`
/// (or the strings `true`/`on`/`false`/`off`), `"auto"` (a 50 ms fallback delay), or a Go
/// duration (the fallback delay: INFO in the clear when the client is silent that long; zero
/// or negative means no fallback, as `true`). nats-server's words for a bad value.
fn handshake_first(key: &str, pos: &Pos, v: &Value) -> Result<Option<Duration>, ConfigError> {
    match &v.kind {
        Kind::Bool(true) => Ok(Some(Duration::ZERO)),
        Kind::Bool(false) => Ok(None),
        Kind::String(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "on" => Ok(Some(Duration::ZERO)),
            "false" | "off" => Ok(None),
            "auto" | "auto_fallback" => Ok(Some(Duration::from_millis(50))),
            _ => {
                // Go's time.ParseDuration; a negative delay is no fallback.
                let d = match s.trim().strip_prefix('-') {
                    Some(neg) => super::parse_go_duration(neg).map(|_| Duration::ZERO),
                    None => super::parse_go_duration(s),
                };
                d.map(Some).ok_or_else(|| {
                    ConfigError::at(pos, format!("field {key:?}'s value {s:?} is invalid"))
                })
            }
        },
        other => Err(ConfigError::at(
            pos,
            format!(
                "field {key:?} should be a boolean or a string, got {}",
                match other {
                    Kind::Integer { .. } => "int64",
                    Kind::Float(_) => "float64",
                    Kind::Array(_) => "[]interface {}",
                    Kind::Map(_) => "map[string]interface {}",
                    _ => other.type_name(),
                }
            ),
        )),
    }
}

pub(super) fn cluster(
    m: &Map,
    warnings: &mut Vec<ConfigError>,
) -> Result<ClusterOpts, ConfigError> {
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
            "write_deadline" => c.write_deadline = Some(duration(k, v, warnings)?),
            "write_timeout" => c.write_timeout = write_timeout(k, v)?,
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
            "tls" => c.tls = Some(tls_block(e, TlsCtx::Cluster)?),
            "compression" => c.compression = compression(k, v, CompressionOpts::route_default())?,
            "permissions" => return Err(not_supported(&e.key, &e.key_pos, "route permissions")),
            "pool_size" => {
                let n = integer(k, v)?;
                c.pool_size = i32::try_from(n).map_err(|_| {
                    ConfigError::at(
                        &v.pos,
                        format!("invalid value for {k:?}: {n} is out of range"),
                    )
                })?;
            }
            "accounts" => c.pinned_accounts = strings(k, v)?,
            "connect_backoff" => c.connect_backoff = boolean(k, v)?,
            _ => return Err(refuse(e, k)),
        }
    }
    c.auth_timeout = tls_auth_default(m, c.auth_timeout, c.tls.as_ref());
    Ok(c)
}

/// nats-server's default `authorization { timeout }` of a cluster or gateway block with TLS
/// and no timeout of its own: the TLS timeout plus one second.
fn tls_auth_default(m: &Map, t: Duration, tls: Option<&crate::tls::TlsOpts>) -> Duration {
    let explicit = options(m).any(|(k, e)| {
        k == "authorization"
            && matches!(&e.value.kind, Kind::Map(a) if options(a).any(|(k, _)| k == "timeout"))
    });
    match tls {
        Some(tls) if !explicit => tls.timeout + Duration::from_secs(1),
        _ => t,
    }
}

pub(super) fn gateway(
    m: &Map,
    warnings: &mut Vec<ConfigError>,
) -> Result<GatewayOpts, ConfigError> {
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
            "connect_backoff" => g.connect_backoff = boolean(k, v)?,
            "write_deadline" => g.write_deadline = Some(duration(k, v, warnings)?),
            "write_timeout" => g.write_timeout = write_timeout(k, v)?,
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
            "tls" => g.tls = Some(tls_block(e, TlsCtx::Gateway)?),
            _ => return Err(refuse(e, k)),
        }
    }
    g.auth_timeout = tls_auth_default(m, g.auth_timeout, g.tls.as_ref());
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
            "tls" => r.tls = Some(tls_block(e, TlsCtx::GatewayRemote)?),
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

/// `compression: <mode> | <boolean> | { mode: <mode>, rtt_thresholds: [<duration>, ...] }`, as
/// nats-server 2.10+ reads it in `cluster {}` (and in `leafnodes {}` and its remotes, with
/// their own default). `true` means `default`'s "on" mode (s2_fast for routes, s2_auto for
/// leafnodes), `false` means off; a map without `mode` leaves the default (nats-server ignores
/// its thresholds then). The mode is validated here, with nats-server's texts, where
/// nats-server only does it at startup (its `-t` lets `compression: bogus` pass).
pub(super) fn compression(
    key: &str,
    v: &Value,
    default: CompressionOpts,
) -> Result<CompressionOpts, ConfigError> {
    let on_mode = if default.mode == CompressionMode::S2Auto {
        CompressionMode::S2Auto
    } else {
        CompressionMode::S2Fast
    };
    let mut mode = None;
    let mut rtts = Vec::new();
    match &v.kind {
        Kind::String(s) => mode = Some(s.clone()),
        Kind::Bool(b) => mode = Some(if *b { on_mode } else { CompressionMode::Off }.to_string()),
        Kind::Map(m) => {
            for (mk, e) in options(m) {
                let mk = mk.as_str();
                match mk {
                    "mode" => mode = Some(string(mk, &e.value)?),
                    "rtt_thresholds" | "thresholds" | "rtts" | "rtt" => match &e.value.kind {
                        Kind::Array(items) => {
                            for (i, item) in items.iter().enumerate() {
                                rtts.push(threshold_nanos(mk, item, i + 1 == items.len())?);
                            }
                        }
                        _ => return Err(wrong_type(mk, &e.value, "an array of durations")),
                    },
                    _ => return Err(unknown(e)),
                }
            }
        }
        other => {
            return Err(ConfigError::at(
                &v.pos,
                format!(
                    "field {key:?} should be a boolean or a structure, got {}",
                    go_type_name(other)
                ),
            ))
        }
    }
    let Some(mode) = mode else {
        return Ok(default);
    };
    CompressionOpts::from_config(&mode, &rtts, on_mode).map_err(|e| ConfigError::at(&v.pos, e))
}

/// An RTT threshold: a duration string as Go's `time.ParseDuration` reads it, negative ones
/// included, in nanoseconds.
fn threshold_nanos(key: &str, v: &Value, last: bool) -> Result<i64, ConfigError> {
    let s = match &v.kind {
        Kind::String(s) => s,
        // nats-server's lexer reads the last item of an array, `[1m]`, as the string "1m" (one
        // minute), where ours reads a number with a size suffix; other items are numbers to
        // both, and refused.
        Kind::Integer {
            value,
            unit: Some(u),
        } if last && u == "m" => return Ok(value.saturating_mul(60_000)),
        Kind::Integer { unit: Some(u), .. } if last => {
            return Err(ConfigError::at(
                &v.pos,
                format!("time: unknown unit {u:?} in duration"),
            ))
        }
        _ => return Err(wrong_type(key, v, "a duration such as \"10ms\"")),
    };
    let t = s.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    let nanos = parse_go_duration(body)
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        .ok_or_else(|| ConfigError::at(&v.pos, format!("time: invalid duration {s:?}")))?;
    Ok(if neg { -nanos } else { nanos })
}

/// The Go type nats-server names in its "should be a boolean or a structure" errors.
fn go_type_name(k: &Kind) -> &'static str {
    match k {
        Kind::String(_) => "string",
        Kind::Integer { .. } => "int64",
        Kind::Float(_) => "float64",
        Kind::Bool(_) => "bool",
        Kind::DateTime(_) => "time.Time",
        Kind::Array(_) => "[]interface {}",
        Kind::Map(_) => "map[string]interface {}",
    }
}
