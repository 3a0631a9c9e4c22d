//! The `leafnodes {}` block: listener, authorization, TLS and remotes (with their TLS).
//! A remote's `credentials` or `nkey` seed sign the hub's nonce; the rest of nats-server's
//! leafnode keys natsd does not build are refused by name.

use super::{
    array, boolean, host_port, integer, map, options, port, refuse, seconds, string, strings,
    tls_block_for, ConfigError, Map, Pos, Value,
};
use crate::compress::CompressionOpts;
use crate::config::leaf::{LeafOpts, LeafUser, RemoteCreds, RemoteLeafOpts};

const DEFAULT_LEAF_PORT: u16 = 7422;

/// Leafnode keys natsd knows of but does not build yet, with what to say.
fn leaf_not_yet(key: &str) -> Option<&'static str> {
    Some(match key {
        "nkey" => {
            "an nkey in leafnodes { authorization } (users, tokens, nkeys and JWTs of \
                   the server's own authorization work)"
        }
        "ws_compress"
        | "ws_compression"
        | "websocket_compress"
        | "websocket_compression"
        | "ws_no_masking"
        | "websocket_no_masking" => "WebSocket leafnode remotes",
        "isolate_leafnode_interest" | "isolate" | "request_isolation" => {
            "leafnode interest isolation"
        }
        "jetstream_cluster_migrate" | "js_cluster_migrate" => "JetStream across leafnodes",
        "proxy" | "proxy_required" => "leafnode proxies",
        "write_deadline" | "write_timeout" => "this leafnode option",
        _ => return None,
    })
}

fn refuse_leaf(e: &super::Entry, key: &str) -> ConfigError {
    match leaf_not_yet(key) {
        Some(what) => super::not_supported(key, &e.key_pos, what),
        None => refuse(e, key),
    }
}

pub(super) fn leafnodes(m: &Map) -> Result<LeafOpts, ConfigError> {
    let mut l = LeafOpts::default();
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "listen" => {
                let (host, p) = host_port(k, v, DEFAULT_LEAF_PORT)?;
                if let Some(h) = host {
                    l.host = h;
                }
                l.port = Some(p);
            }
            "host" | "net" => l.host = string(k, v)?,
            "port" => l.port = Some(port(k, integer(k, v)?, DEFAULT_LEAF_PORT, &v.pos)?),
            "advertise" | "leafnode_advertise" => l.advertise = Some(string(k, v)?),
            "no_advertise" => l.no_advertise = boolean(k, v)?,
            "reconnect" | "reconnect_delay" | "reconnect_interval" => {
                l.reconnect = Some(seconds(k, v)?)
            }
            "dial_timeout" => l.dial_timeout = Some(seconds(k, v)?),
            "authorization" => authorization(map(k, v)?, &mut l)?,
            "min_version" | "minimum_version" => {
                let mv = string(k, v)?;
                // nats-server's checkLeafMinVersionConfig.
                match crate::leaf::version(&mv) {
                    None => {
                        return Err(ConfigError::at(
                            &v.pos,
                            "invalid leafnode's minimum version: invalid semver",
                        ))
                    }
                    Some(x) if x < (2, 8, 0) => {
                        return Err(ConfigError::at(
                            &v.pos,
                            "the minimum version should be at least 2.8.0",
                        ))
                    }
                    Some(_) => l.min_version = Some(mv),
                }
            }
            "compression" => {
                l.compression = super::blocks::compression(k, v, CompressionOpts::leaf_default())?
            }
            "tls" => l.tls = Some(tls_block_for(e, super::blocks::TlsCtx::Leaf)?),
            "remotes" => {
                for item in array(k, v)? {
                    l.remotes.push(remote(map(k, item)?, &item.pos)?);
                }
            }
            _ => return Err(refuse_leaf(e, k)),
        }
    }
    Ok(l)
}

fn authorization(m: &Map, l: &mut LeafOpts) -> Result<(), ConfigError> {
    let mut users_at = None;
    for (ak, ae) in options(m) {
        let av = &ae.value;
        let ak = ak.as_str();
        match ak {
            "user" | "username" => l.username = Some(string(ak, av)?),
            "pass" | "password" => l.password = Some(string(ak, av)?),
            "token" => l.token = Some(string(ak, av)?),
            "nkey" => {
                let nk = string(ak, av)?;
                if !crate::auth::is_user_nkey(&nk) {
                    return Err(ConfigError::at(
                        &av.pos,
                        "Not a valid public nkey for leafnode authorization",
                    ));
                }
                l.nkey = Some(nk);
            }
            "timeout" => l.auth_timeout = seconds(ak, av)?,
            "account" => l.account = Some(string(ak, av)?),
            "users" => {
                for u in array(ak, av)? {
                    let u = user(map(ak, u)?, &u.pos)?;
                    if l.users.iter().any(|x| x.user == u.user) {
                        let text = format!(
                            "duplicate user {:?} detected in leafnode authorization",
                            u.user
                        );
                        return Err(ConfigError::at(&av.pos, text));
                    }
                    l.users.push(u);
                }
                users_at = Some(ae.key_pos.clone());
            }
            _ => return Err(refuse_leaf(ae, ak)),
        }
    }
    // nats-server's validateLeafNodeAuthOptions.
    if let Some(at) = users_at {
        if l.username.is_some() {
            return Err(ConfigError::at(
                &at,
                "can not have a single user/pass and a users array",
            ));
        }
        if l.nkey.is_some() {
            return Err(ConfigError::at(
                &at,
                "can not have a single nkey and a users array",
            ));
        }
    }
    Ok(())
}

fn user(m: &Map, at: &Pos) -> Result<LeafUser, ConfigError> {
    let mut u = LeafUser {
        user: String::new(),
        password: String::new(),
        account: None,
    };
    for (k, e) in options(m) {
        let v: &Value = &e.value;
        match k.as_str() {
            "user" | "username" => u.user = string(&k, v)?,
            "pass" | "password" => u.password = string(&k, v)?,
            "account" => u.account = Some(string(&k, v)?),
            other => return Err(refuse_leaf(e, other)),
        }
    }
    if u.user.is_empty() {
        return Err(ConfigError::at(at, "leafnode user has no name"));
    }
    Ok(u)
}

/// A remote's `deny_imports` / `deny_exports`: a subject or an array of them, each valid
/// (nats-server's `checkPermSubjectArray`, its message).
fn deny_subjects(k: &str, v: &Value) -> Result<Vec<String>, ConfigError> {
    let subjects = strings(k, v)?;
    if let Some(bad) = subjects
        .iter()
        .find(|s| !crate::subject::is_valid_subject(s.as_bytes()))
    {
        return Err(ConfigError::at(
            &v.pos,
            format!("subject {bad:?} is not a valid subject"),
        ));
    }
    Ok(subjects)
}

/// A path with a leading `~` made absolute (nats-server's `expandPath`).
fn expand_home(p: &str) -> std::path::PathBuf {
    match (p.strip_prefix('~'), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            let mut h = std::path::PathBuf::from(home);
            h.push(rest.trim_start_matches('/'));
            h
        }
        _ => p.into(),
    }
}

fn remote(m: &Map, at: &Pos) -> Result<RemoteLeafOpts, ConfigError> {
    let mut r = RemoteLeafOpts::default();
    for (key, e) in options(m) {
        let v = &e.value;
        let k = key.as_str();
        match k {
            "url" | "urls" => {
                for u in strings(k, v)? {
                    crate::leaf::RemoteUrl::parse(&u).map_err(|e| {
                        ConfigError::at(&v.pos, format!("invalid value for {k:?}: {e}"))
                    })?;
                    r.urls.push(u);
                }
            }
            "account" | "local" => r.account = Some(string(k, v)?),
            "deny_imports" | "deny_import" => r.deny_imports = deny_subjects(k, v)?,
            "compression" => {
                r.compression = Some(super::blocks::compression(
                    k,
                    v,
                    CompressionOpts::leaf_default(),
                )?)
            }
            "deny_exports" | "deny_export" => r.deny_exports = deny_subjects(k, v)?,
            "no_randomize" | "dont_randomize" => r.no_randomize = boolean(k, v)?,
            "dial_timeout" => r.dial_timeout = Some(seconds(k, v)?),
            "first_info_timeout" => r.first_info_timeout = Some(seconds(k, v)?),
            "disabled" => r.disabled = boolean(k, v)?,
            "ignore_discovered_servers" => r.ignore_discovered = boolean(k, v)?,
            "hub" => r.hub = boolean(k, v)?,
            "username" => r.username = Some(string(k, v)?),
            "password" => r.password = Some(string(k, v)?),
            "creds" | "credentials" | "nkey" | "seed" => {
                if r.creds != RemoteCreds::None {
                    return Err(ConfigError::at(
                        &e.key_pos,
                        "Remote leafnode can not have both creds and nkey defined",
                    ));
                }
                let text = string(k, v)?;
                r.creds = if k.starts_with('c') {
                    RemoteCreds::File(expand_home(&text))
                } else {
                    let user = nkeys::KeyPair::from_seed(&text)
                        .is_ok_and(|kp| matches!(kp.key_pair_type(), nkeys::KeyPairType::User));
                    if !user {
                        return Err(ConfigError::at(
                            &v.pos,
                            format!("Remote leafnode nkey is not a valid seed: {text:?}"),
                        ));
                    }
                    RemoteCreds::Seed(text)
                };
            }
            "tls" => {
                let t = tls_block_for(e, super::blocks::TlsCtx::LeafRemote)?;
                // Dialling needs a CA to verify the hub against (or `insecure`).
                crate::tls::client_config(&t).map_err(|m| ConfigError::at(&e.key_pos, m))?;
                r.tls = Some(t);
            }
            _ => return Err(refuse_leaf(e, k)),
        }
    }
    if r.urls.is_empty() {
        return Err(ConfigError::at(at, "leafnode remote has no URL"));
    }
    let tls_url = |u: &String| crate::leaf::RemoteUrl::parse(u).is_ok_and(|u| u.tls);
    if r.tls.is_none() && r.urls.iter().any(tls_url) {
        return Err(ConfigError::at(
            at,
            "leafnode remote with a tls:// URL needs a tls {} block (natsd does not use the \
             system's CA store)",
        ));
    }
    Ok(r)
}
