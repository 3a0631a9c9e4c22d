//! Operator (JWT) mode in a config file: `operator` (a JWT file, or an inline JWT; one or
//! several), `resolver: MEMORY` and `resolver_preload { <account key>: <account JWT> }`,
//! with nats-server's texts. Once the whole file is read, `settle` checks them together and
//! makes the preloaded accounts real accounts (named by public key, with their JWT limits,
//! exports and imports: `operator_links.rs`).
//! What natsd does not build yet (other resolvers, account claims it cannot apply) is
//! refused by name.

use super::*;
use crate::config::{AccountLimits, FullResolver, OperatorMode, Resolver};
use crate::jwt::{self, Kind as JwtKind};

/// Handle an operator-mode key; false when `k` is not one.
pub(super) fn key(k: &str, e: &Entry, opts: &mut Options) -> Result<bool, ConfigError> {
    let v = &e.value;
    match k {
        "operator" | "operators" | "roots" | "root" | "root_operators" | "root_operator" => {
            let mut list = Vec::new();
            for name in strings(k, v)? {
                let token = operator_jwt(&name).map_err(|m| {
                    ConfigError::at(&e.key_pos, format!("error parsing operator JWT: {m}"))
                })?;
                list.push(token);
            }
            mode(opts).operators.extend(list);
        }
        "resolver" | "account_resolver" | "accounts_resolver" => match &v.kind {
            Kind::String(s)
                if matches!(s.trim().to_ascii_uppercase().as_str(), "MEM" | "MEMORY") =>
            {
                mode(opts).resolver = Some(Resolver::Memory);
            }
            Kind::Map(m) => {
                mode(opts).resolver = Some(resolver_block(e, m)?);
            }
            Kind::String(s) if s.trim().to_ascii_uppercase().starts_with("URL") => {
                let url = url_resolver(s).map_err(|m| ConfigError::at(&e.key_pos, m))?;
                mode(opts).resolver = Some(Resolver::Url(url));
            }
            _ => {
                return Err(ConfigError::at(
                    &e.key_pos,
                    "error parsing account resolver, should be MEM or  URL(\"url\") or a map \
                     containing dir and type state=[FULL|CACHE])",
                ))
            }
        },
        "default_sentinel" => mode(opts).default_sentinel = Some(string(k, v)?),
        "resolver_preload" => {
            let Kind::Map(m) = &v.kind else {
                return Err(ConfigError::at(
                    &e.key_pos,
                    "preload should be a map of account_public_key:account_jwt",
                ));
            };
            let mut preload = Vec::new();
            for (_, pe) in options(m) {
                let Kind::String(token) = &pe.value.kind else {
                    return Err(ConfigError::at(
                        &pe.key_pos,
                        "preload map value should be a string JWT",
                    ));
                };
                if jwt::decode(token, JwtKind::Account).is_err() {
                    return Err(ConfigError::at(&pe.key_pos, "invalid account JWT"));
                }
                // Keys keep their case (account keys are upper case).
                preload.push((pe.key.clone(), token.clone()));
            }
            mode(opts).preload.extend(preload);
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// `resolver { type: full | cache, dir, allow_delete, hard_delete, limit, ttl, interval,
/// timeout }` with nats-server's checks and texts (`opts.go`). The directory is created
/// here, as nats-server creates it when it reads the option.
fn resolver_block(e: &Entry, m: &Map) -> Result<Resolver, ConfigError> {
    let at = |msg: &str| ConfigError::at(&e.key_pos, msg);
    let mut r = FullResolver {
        dir: std::path::PathBuf::new(),
        allow_delete: false,
        hard_delete: false,
        limit: 0,
        interval: std::time::Duration::from_secs(60),
        timeout: std::time::Duration::from_millis(1900),
        cache: None,
    };
    let (mut kind, mut hard_set, mut ttl) = (String::new(), false, None);
    let mut sync = false;
    let dur = |k: &str, v: &Value| match &v.kind {
        Kind::String(s) => parse_go_duration(s)
            .ok_or_else(|| ConfigError::at(&v.pos, format!("time: invalid duration {s:?}"))),
        _ => Err(wrong_type(k, v, "a duration such as \"2m\"")),
    };
    for (k, pe) in options(m) {
        let v = &pe.value;
        match k.as_str() {
            "dir" => r.dir = string(&k, v)?.into(),
            "type" => kind = string(&k, v)?.to_ascii_uppercase(),
            "allow_delete" => r.allow_delete = boolean(&k, v)?,
            "hard_delete" => {
                hard_set = true;
                r.hard_delete = boolean(&k, v)?;
            }
            "limit" => r.limit = usize_of(&k, v, u32::MAX as u64)?,
            "ttl" => ttl = Some(dur(&k, v)?),
            "interval" => {
                let d = dur(&k, v)?;
                if !d.is_zero() {
                    r.interval = d;
                    sync = true;
                }
            }
            "timeout" => {
                let d = dur(&k, v)?;
                if d.is_zero() {
                    return Err(ConfigError::at(
                        &v.pos,
                        "Fetch timeout 0s is too smal".to_string(),
                    ));
                }
                r.timeout = d;
            }
            _ => return Err(unknown(pe)),
        }
    }
    match kind.as_str() {
        "FULL" => {
            if r.dir.as_os_str().is_empty() {
                return Err(at("dir has no value and needs to point to a directory"));
            }
            if ttl.is_some_and(|t| !t.is_zero()) {
                return Err(at("FULL does not accept ttl"));
            }
            if hard_set && !r.allow_delete {
                return Err(at("hard_delete has no effect without delete"));
            }
            Ok(Resolver::Full(r))
        }
        "MEM" | "MEMORY" => Ok(Resolver::Memory),
        "CACHE" => {
            if r.dir.as_os_str().is_empty() {
                return Err(at("dir has no value and needs to point to a directory"));
            }
            if sync {
                return Err(at("CACHE does not accept sync"));
            }
            if r.allow_delete {
                return Err(at("CACHE does not accept allow_delete"));
            }
            if hard_set {
                return Err(at("CACHE does not accept hard_delete"));
            }
            if r.limit == 0 {
                r.limit = 1_000;
            }
            r.cache = Some(ttl.unwrap_or_default());
            Ok(Resolver::Full(r))
        }
        _ => Err(at(
            "error parsing account resolver, should be MEM or  URL(\"url\") or a map containing dir \
             and type state=[FULL|CACHE])",
        )),
    }
}

/// `URL("http://host:port/path/")` or `URL("https://…")` (quotes optional, as nats-server's
/// pattern): the base URL, ending in `/`. An `https` base is fetched with `resolver_tls`.
fn url_resolver(s: &str) -> Result<String, String> {
    let inner = s.trim()[3..].trim();
    let url = inner
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .map(|u| u.trim().trim_matches('"').trim())
        .unwrap_or("");
    if crate::util::http_get::Target::parse(url).is_none() {
        return Err(format!("error parsing account resolver url [{url:?}]"));
    }
    Ok(if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    })
}

fn mode(opts: &mut Options) -> &mut OperatorMode {
    opts.operator.get_or_insert_with(OperatorMode::default)
}

/// nats-server's `readOperatorJWT`: a file holding the (possibly decorated) JWT, or the JWT
/// itself when no such file exists and the text starts as a JWT does.
fn operator_jwt(name: &str) -> Result<String, String> {
    let text = match std::fs::read_to_string(name) {
        Ok(t) => t,
        Err(_) if name.starts_with("eyJ") => name.to_string(),
        Err(e) => return Err(format!("open {name}: {e}")),
    };
    let token = jwt::undecorate(&text);
    jwt::decode(&token, JwtKind::Operator)?;
    Ok(token)
}

/// After the whole file: nats-server's operator-mode checks and texts, then each preloaded
/// account becomes an account with its JWT's limits.
pub(super) fn settle(opts: &mut Options) -> Result<(), ConfigError> {
    let Some(op) = opts.operator.clone() else {
        return Ok(());
    };
    let whole = |m: String| ConfigError::at(&Pos::default(), m);
    if let Some(sentinel) = &op.default_sentinel {
        sentinel_check(&op.operators, sentinel).map_err(whole)?;
    }
    if op.operators.is_empty() {
        return Err(not_supported(
            "resolver",
            &Pos::default(),
            "an account resolver without an operator (trusted keys)",
        ));
    }
    let Some(resolver) = &op.resolver else {
        return Err(whole(
            "operators require an account resolver to be configured".into(),
        ));
    };
    if matches!(resolver, Resolver::Url(_)) && !op.preload.is_empty() {
        return Err(whole(
            "resolver preloads only available for writeable resolver types MEM/DIR/CACHE_DIR"
                .into(),
        ));
    }
    if !opts.accounts.is_empty() {
        return Err(whole(
            "operators do not allow Accounts to be configured directly".into(),
        ));
    }
    if !opts.users.is_empty() || !opts.nkeys.is_empty() {
        return Err(whole(
            "operators do not allow users to be configured directly".into(),
        ));
    }
    let claims: Vec<jwt::Claims> = op
        .operators
        .iter()
        .filter_map(|t| jwt::decode(t, JwtKind::Operator).ok())
        .collect();
    let sys: Vec<&str> = claims.iter().map(|c| c.str("system_account")).collect();
    if opts.system_account == crate::account::SYSTEM_ACCOUNT {
        // Not set in the file: the first operator's, as nats-server.
        if let Some(s) = sys.first().filter(|s| !s.is_empty()) {
            opts.system_account = s.to_string();
        }
    } else if sys.iter().any(|s| !s.is_empty()) && !sys.contains(&opts.system_account.as_str()) {
        return Err(whole(
            "system_account in config and operator JWT must be identical".into(),
        ));
    }
    if opts.auth_callout.is_some() {
        return Err(whole(
            "operators do not allow authorization callouts to be configured directly".into(),
        ));
    }
    let mut jwts = op.preload.clone();
    if let Resolver::Full(r) = resolver {
        // The directory's JWTs, and the preloads where they are newer (nats-server stores
        // those in the directory when it starts: `sys/resolver.rs`).
        let delete = crate::jwt::store::Delete::No;
        let store = crate::jwt::store::DirStore::open(&r.dir, delete, 0).map_err(whole)?;
        let mut all = store.all().clone();
        for (k, t) in &op.preload {
            if all
                .get(k)
                .is_none_or(|old| crate::jwt::store::newer(old, t))
            {
                all.insert(k.clone(), t.clone());
            }
        }
        jwts = all.into_iter().collect();
    }
    if let Some(o) = opts.operator.as_mut() {
        o.preload = jwts.clone();
    }
    if matches!(resolver, Resolver::Url(_))
        && opts.system_account != crate::account::SYSTEM_ACCOUNT
        && !opts.accounts.contains(&opts.system_account)
    {
        // Its JWT comes from the URL too (fetched at startup, `sys/url_resolver.rs`).
        opts.accounts.push(opts.system_account.clone());
    }
    let strict = op.resolver == Some(Resolver::Memory);
    derive(opts, &jwts, strict)
}

/// nats-server's checks of `default_sentinel` (`validateTrustedOperators`): operators are
/// configured and it is a bearer user JWT (or, unchecked until used, one that looks scoped:
/// an `issuer_account` and no permissions).
fn sentinel_check(operators: &[String], sentinel: &str) -> Result<(), String> {
    if operators.is_empty() {
        return Err("default sentinel requires operators and accounts".into());
    }
    let u = jwt::decode(sentinel, JwtKind::User)
        .map_err(|_| "default sentinel JWT not valid".to_string())?;
    let bearer = u.nats["bearer_token"].as_bool() == Some(true);
    let scoped = !u.str("issuer_account").is_empty() && jwt::user::has_empty_permissions(&u);
    if !bearer && !scoped {
        return Err("default sentinel must be a bearer token".into());
    }
    Ok(())
}

/// Make each account JWT an account of `opts` with its limits, subject mappings, exports
/// and imports. `strict` (preloads of the MEMORY resolver): an account natsd cannot serve
/// stops the server; otherwise (the full resolver's directory) it is logged and left out.
pub(crate) fn derive(
    opts: &mut Options,
    jwts: &[(String, String)],
    strict: bool,
) -> Result<(), ConfigError> {
    let mut claims = Vec::new();
    for (key, token) in jwts {
        match account(opts, key, token) {
            Ok(Some(c)) => claims.push((key.clone(), c)),
            Ok(None) => {}
            Err(e) if strict => return Err(e),
            Err(e) => tracing::error!("Account [{key}] cannot be served: {}", e.msg),
        }
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    opts.links = super::operator_links::links(&claims, now)?;
    Ok(())
}

/// One account JWT into `opts`; `None` when nats-server would start but not serve it.
fn account(
    opts: &mut Options,
    key: &String,
    token: &str,
) -> Result<Option<jwt::Claims>, ConfigError> {
    let whole = |m: String| ConfigError::at(&Pos::default(), m);
    {
        let c = jwt::decode(token, JwtKind::Account)
            .map_err(|_| whole("invalid account JWT".into()))?;
        if &c.subject != key {
            return Err(whole(format!(
                "resolver_preload: the JWT under {key:?} is account {:?}",
                c.subject
            )));
        }
        if let Some(why) = c.validation_issues() {
            // nats-server starts, but the account cannot be used.
            tracing::warn!("Account [{key}] has validation issues: {why}");
            return Ok(None);
        }
        if let Some(field) = c.unsupported().first() {
            return Err(not_supported(
                &format!("{field} (account {key})"),
                &Pos::default(),
                "this account JWT claim",
            ));
        }
        if let Some(field) = ["data", "imports", "exports"]
            .into_iter()
            .find(|f| c.limit(f).is_some())
        {
            return Err(not_supported(
                &format!("limits.{field} (account {key})"),
                &Pos::default(),
                "this account JWT limit",
            ));
        }
        let n = |f: &str| c.limit(f).unwrap_or(-1);
        opts.account_limits.insert(
            key.clone(),
            AccountLimits {
                max_connections: n("conn"),
                max_subscriptions: n("subs"),
                max_payload: n("payload"),
                max_leafnodes: n("leaf"),
            },
        );
        if let Some(js) = jwt_jetstream(&c) {
            if !opts.jetstream_accounts.contains(key) {
                opts.jetstream_accounts.push(key.clone());
            }
            opts.jetstream_limits.insert(key.clone(), js);
        }
        let mappings = jwt_mappings(&c.nats["mappings"]);
        if !mappings.is_empty() {
            if let Err(e) = crate::mapping::Mappings::build(&mappings) {
                // nats-server logs it and leaves the account without that mapping.
                tracing::error!("Account [{key}]: subject mappings: {e}");
            } else {
                opts.account_mappings.insert(key.clone(), mappings);
            }
        }
        if !opts.accounts.contains(key) {
            opts.accounts.push(key.clone());
        }
        Ok(Some(c))
    }
}

/// An account JWT's JetStream limits, as nats-server reads them (`accounts.go`
/// `updateAccountClaimsWithRefresh`, the jwt library's `IsJSEnabled`): JetStream is on when
/// `mem_storage` or `disk_storage` is not 0 (-1: unlimited) — those of the flat limits, or
/// with `tiered_limits`, of any tier; flat limits that are set win over tiers. `streams`/
/// `consumer` as given; the per-stream byte limits and `max_ack_pending` unlimited unless
/// positive.
fn jwt_jetstream(c: &jwt::Claims) -> Option<crate::config::JsLimits> {
    use crate::config::JsLimits;
    let l = &c.nats["limits"];
    let on = |l: &serde_json::Value| {
        let n = |f: &str| l[f].as_i64().unwrap_or(0);
        n("mem_storage") != 0 || n("disk_storage") != 0
    };
    let tiers = l["tiered_limits"].as_object().filter(|t| !t.is_empty());
    let enabled = match tiers {
        Some(t) => t.values().any(on),
        None => on(l),
    };
    if !enabled {
        return None;
    }
    if on(l) {
        return Some(JsLimits::Flat(jwt_limits(l)));
    }
    let tiers = tiers.into_iter().flatten();
    Some(JsLimits::Tiered(
        tiers.map(|(k, v)| (k.clone(), jwt_limits(v))).collect(),
    ))
}

/// One set of an account JWT's JetStream limits (the flat ones, or a tier's).
fn jwt_limits(l: &serde_json::Value) -> crate::config::JsAccountLimits {
    let n = |f: &str| l[f].as_i64().unwrap_or(0);
    let unlimited = |v: i64| if v > 0 { v } else { -1 };
    crate::config::JsAccountLimits {
        max_memory: n("mem_storage"),
        max_store: n("disk_storage"),
        max_streams: n("streams"),
        max_consumers: n("consumer"),
        max_ack_pending: unlimited(n("max_ack_pending")),
        memory_max_stream_bytes: unlimited(n("mem_max_stream_bytes")),
        store_max_stream_bytes: unlimited(n("disk_max_stream_bytes")),
        max_bytes_required: l["max_bytes_required"].as_bool() == Some(true),
    }
}

/// An account JWT's `mappings`: `{ "src": [ { "subject", "weight", "cluster" } ] }`.
fn jwt_mappings(v: &serde_json::Value) -> Vec<crate::mapping::MappingConfig> {
    use crate::mapping::{MapDest, MappingConfig};
    let Some(m) = v.as_object() else {
        return Vec::new();
    };
    m.iter()
        .map(|(src, dests)| MappingConfig {
            src: src.clone(),
            dests: dests
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| MapDest {
                    subject: d["subject"].as_str().unwrap_or_default().to_string(),
                    // The jwt library's `GetWeight`: none (or 0) is the whole traffic.
                    weight: d["weight"]
                        .as_u64()
                        .filter(|w| *w > 0)
                        .map_or(100, |w| u8::try_from(w).unwrap_or(u8::MAX)),
                    cluster: d["cluster"]
                        .as_str()
                        .filter(|c| !c.is_empty())
                        .map(str::to_string),
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::load_str;

    /// Operator mode with `resolver` set to `r` (and `extra` lines).
    fn conf(r: &str, extra: &str) -> String {
        let op = nkeys::KeyPair::new_operator();
        let c = serde_json::json!({"sub": op.public_key(), "name": "O",
            "nats": {"type": "operator", "version": 2}});
        let token = crate::jwt::encode(&c, &op).expect("operator JWT");
        format!("operator: \"{token}\"\nresolver: {r}\n{extra}\n")
    }

    fn url_of(r: &str) -> Result<String, String> {
        match load_str(&conf(r, "")) {
            Ok(l) => match l.options.operator.and_then(|o| o.resolver) {
                Some(super::Resolver::Url(u)) => Ok(u),
                other => Err(format!("{other:?}")),
            },
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn url_resolvers_are_read_as_nats_server_reads_them() {
        let want = "http://127.0.0.1:9090/jwt/v1/accounts/";
        for r in [
            "\"URL(http://127.0.0.1:9090/jwt/v1/accounts/)\"",
            "'URL(\"http://127.0.0.1:9090/jwt/v1/accounts\")'",
            "\"url( http://127.0.0.1:9090/jwt/v1/accounts/ )\"",
        ] {
            assert_eq!(url_of(r).as_deref(), Ok(want), "{r}");
        }
        let https = url_of("\"URL(https://h/jwt/v1/accounts)\"");
        assert_eq!(https.as_deref(), Ok("https://h/jwt/v1/accounts/"));
        let e = url_of("\"URL(ftp://h/)\"").unwrap_err();
        assert!(e.contains("error parsing account resolver url"), "{e}");
    }

    #[test]
    fn a_url_resolver_takes_no_preloads() {
        let acc = nkeys::KeyPair::new_account().public_key();
        let claims = serde_json::json!({"sub": acc, "nats": {"type": "account", "version": 2}});
        let token = crate::jwt::encode(&claims, &nkeys::KeyPair::new_operator()).expect("JWT");
        let c = conf(
            "\"URL(http://127.0.0.1:9090/)\"",
            &format!("resolver_preload {{ {acc}: \"{token}\" }}"),
        );
        let e = load_str(&c).map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("resolver preloads only available for writeable resolver types"),
            "{e}"
        );
    }

    #[test]
    fn cache_resolvers_are_checked_as_nats_server_checks_them() {
        let block = |b: &str| {
            load_str(&conf(
                &format!("{{ type: cache, dir: \"/tmp/c\" {b} }}"),
                "",
            ))
        };
        let r = block("")
            .expect("a cache")
            .options
            .operator
            .and_then(|o| o.resolver);
        match r {
            Some(super::Resolver::Full(f)) => {
                assert_eq!(f.cache, Some(std::time::Duration::ZERO));
                assert_eq!(f.limit, 1_000, "nats-server's default limit");
            }
            other => panic!("{other:?}"),
        }
        let ttl = block(", ttl: \"2m\", limit: 5").expect("ttl");
        match ttl.options.operator.and_then(|o| o.resolver) {
            Some(super::Resolver::Full(f)) => {
                assert_eq!(
                    (f.cache, f.limit),
                    (Some(std::time::Duration::from_secs(120)), 5)
                )
            }
            other => panic!("{other:?}"),
        }
        for (b, want) in [
            (", interval: \"1m\"", "CACHE does not accept sync"),
            (", allow_delete: true", "CACHE does not accept allow_delete"),
            (", hard_delete: false", "CACHE does not accept hard_delete"),
        ] {
            let e = block(b).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(want), "{b}: {e}");
        }
    }

    #[test]
    fn resolver_tls_blocks_are_checked_as_nats_server_checks_them() {
        let dir = std::env::temp_dir().join(format!("natsd-resolver-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["localhost".into()]).expect("params");
        let cert = params.self_signed(&key).expect("cert");
        let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&c, cert.pem()).expect("write");
        std::fs::write(&k, key.serialize_pem()).expect("write");
        let (c, k) = (c.display().to_string(), k.display().to_string());
        let with = |b: &str| load_str(&conf("\"URL(https://h/)\"", &format!("resolver_tls {b}")));
        let ok = with(&format!(
            "{{ cert_file: \"{c}\", key_file: \"{k}\", ca_file: \"{c}\", verify: true, \
             timeout: 5, pinned_certs: [], handshake_first: true }}"
        ))
        .expect("a full block");
        let t = ok.options.resolver_tls.expect("resolver_tls");
        assert_eq!((t.ca_file, t.insecure), (Some(c.clone().into()), false));
        let none = with("{ }").expect("an empty block").options.resolver_tls;
        assert_eq!(none, Some(crate::tls::TlsOpts::default()));
        assert!(
            with("{ insecure: true }")
                .expect("insecure")
                .options
                .resolver_tls
                .expect("tls")
                .insecure
        );
        for (b, want) in [
            (
                format!("{{ cert_file: \"{c}\" }}"),
                "missing 'key_file' in TLS configuration",
            ),
            (
                format!("{{ key_file: \"{k}\" }}"),
                "missing 'cert_file' in TLS configuration",
            ),
            (
                "{ verify_cert_and_check_known_urls: true }".to_string(),
                "verify_cert_and_check_known_urls not supported in this context",
            ),
            (
                "{ ca_file: \"/nonexistent/ca.pem\" }".to_string(),
                "/nonexistent/ca.pem",
            ),
            (
                "{ insecure: 1 }".to_string(),
                "error parsing tls config, expected 'insecure' to be a boolean",
            ),
            (format!("{{ ca_file: \"{k}\" }}"), "no certificate found"),
        ] {
            let e = with(&b).map(|_| ()).unwrap_err().to_string();
            assert!(e.contains(want), "{b}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
