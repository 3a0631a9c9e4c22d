//! Config reload (SIGHUP, `--signal reload`, `Server::reload`): which options differ between
//! the running configuration and a re-read one, and whether all of them can change without a
//! restart. Pure: no server state. The server applies a `Plan` all at once or not at all.
//!
//! Reloadable (nats-server 2.9's set, plus a few nats-server 2.9.10 refuses but natsd applies
//! safely: `max_subscriptions`, `max_pending`, `no_auth_user`, `lame_duck_*`): logging
//! (`debug`, `trace`, `logtime`, `log_file`), authorization (single user, token, users and
//! their permissions, accounts' users, `no_auth_user`, `auth_timeout`), limits (also accounts'
//! JetStream limits), ping settings, `write_deadline`, and the cluster's `routes`,
//! `pool_size`, `accounts` and `compression` (`reload/cluster.rs`; nats-server 2.10+ applies
//! these to live routes). Anything else is refused with nats-server's message:
//! `config reload not supported for <Option>: old=…, new=…`.

mod cluster;

use super::{Options, User};
use crate::util::time::go_duration;
use cluster::{cluster_diff, cluster_settings_diff};
pub use cluster::{effective_pinned, ClusterChange, PinsChange};
use std::path::PathBuf;
use std::time::Duration;

/// What a reload changes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The changed options as the `Reloaded: …` log lines name them, in nats-server's order.
    pub changed: Vec<String>,
    /// `Some(new)` when the log destination changes (`None` inside: back to stderr).
    pub log_file: Option<Option<PathBuf>>,
    /// Users, passwords, tokens, permissions or accounts changed.
    pub auth: bool,
    /// Configured route URLs to dial from now on / to close and stop dialling.
    pub routes_added: Vec<String>,
    pub routes_removed: Vec<String>,
    /// The client `tls {}` block changed: the server rebuilds its acceptor (new connections).
    pub tls: bool,
    /// Accounts' JetStream limits changed.
    pub js_limits: bool,
    /// Which accounts have JetStream changed (`jetstream: enabled` added or removed).
    pub js_accounts: bool,
    /// Route pool size, pinned accounts or route compression changed (`Reloaded: cluster`).
    pub cluster: Option<ClusterChange>,
    /// The `pinned_certs` of the cluster or gateway `tls` block changed: their connected
    /// peers are checked again.
    pub pins: PinsChange,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }
}

fn refuse(name: &str, old: impl std::fmt::Display, new: impl std::fmt::Display) -> String {
    format!("config reload not supported for {name}: old={old}, new={new}")
}

fn opt_str(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("")
}

/// Users compared without regard to their order in the file.
fn sorted_users(u: &[User]) -> Vec<&User> {
    let mut v: Vec<&User> = u.iter().collect();
    v.sort_by(|a, b| a.username.cmp(&b.username));
    v
}

/// Go's `%v` of a float64 number of seconds (`3`, `0.5`).
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

/// The reload plan from `old` (running) to `new` (re-read), or the error that refuses it: the
/// first non-reloadable option that differs, in nats-server's field order.
pub fn diff(old: &Options, new: &Options) -> Result<Plan, String> {
    // Destructured without `..`: a new field must be classified here before this compiles.
    let Options {
        host,
        port,
        server_name,
        http_port,
        http_host,
        http_base_path,
        log_file,
        log_size_limit,
        log_max_num,
        pid_file,
        ports_file_dir,
        server_tags,
        debug,
        trace,
        logtime,
        logtime_utc,
        syslog,
        remote_syslog,
        max_traced_msg_len,
        username,
        password,
        auth_token,
        users,
        nkeys,
        operator,
        accounts,
        links,
        no_auth_user,
        auth_callout,
        max_payload,
        max_control_line,
        max_pending,
        max_connections,
        max_subscriptions,
        max_sub_tokens,
        account_limits,
        connect_error_reports,
        reconnect_error_reports,
        auth_timeout,
        ping_interval,
        ping_max,
        write_deadline,
        write_timeout,
        no_fast_producer_stall,
        max_closed_clients,
        client_advertise,
        cluster,
        gateway,
        leafnodes,
        lame_duck_duration,
        lame_duck_grace_period,
        system_account,
        no_system_account,
        tls,
        resolver_tls,
        allow_non_tls,
        https_port,
        jetstream,
        jetstream_accounts,
        jetstream_limits,
        account_msg_trace,
        account_mappings,
    } = new;

    // Refusals, in the order of nats-server's Options struct.
    if server_name != &old.server_name {
        return Err(refuse(
            "ServerName",
            opt_str(&old.server_name),
            opt_str(server_name),
        ));
    }
    if host != &old.host {
        return Err(refuse("Host", &old.host, host));
    }
    if port != &old.port {
        return Err(refuse("Port", old.port, port));
    }
    if client_advertise != &old.client_advertise {
        return Err(refuse(
            "ClientAdvertise",
            opt_str(&old.client_advertise),
            opt_str(client_advertise),
        ));
    }
    if let Some(added) = accounts.iter().find(|a| !old.accounts.contains(a)) {
        return Err(format!(
            "config reload not supported for Accounts: account {added:?} is new \
             (natsd adds accounts only at startup)"
        ));
    }
    if operator != &old.operator {
        return Err(
            "config reload not supported for operator mode: the operators, resolver and \
             preloaded account JWTs are read at startup (restart the server to change them)"
                .into(),
        );
    }
    if resolver_tls != &old.resolver_tls {
        // nats-server swaps its resolver's TLS client on a reload; natsd builds it once.
        return Err(
            "config reload not supported for resolver_tls: the URL resolver's TLS client is \
             built at startup (restart the server to change it)"
                .into(),
        );
    }
    if links != &old.links {
        return Err(
            "config reload not supported for account exports/imports: they are set \
                    at startup (restart the server to change them)"
                .into(),
        );
    }
    if system_account != &old.system_account {
        return Err(refuse("SystemAccount", &old.system_account, system_account));
    }
    if no_system_account != &old.no_system_account {
        return Err(refuse(
            "NoSystemAccount",
            old.no_system_account,
            no_system_account,
        ));
    }
    if http_host != &old.http_host {
        return Err(refuse(
            "HTTPHost",
            opt_str(&old.http_host),
            opt_str(http_host),
        ));
    }
    if http_port != &old.http_port {
        return Err(refuse(
            "HTTPPort",
            old.http_port.unwrap_or(0),
            http_port.unwrap_or(0),
        ));
    }
    if http_base_path != &old.http_base_path {
        return Err(refuse(
            "HTTPBasePath",
            opt_str(&old.http_base_path),
            opt_str(http_base_path),
        ));
    }
    // The gateway block reloads only its `pinned_certs` (as nats-server: the peers connected
    // are checked against the new set).
    let gw_unpinned = |g: &Option<crate::config::GatewayOpts>| {
        g.clone().map(|mut g| {
            g.tls = g.tls.map(|mut t| {
                t.pinned_certs = None;
                t
            });
            g
        })
    };
    if gw_unpinned(gateway) != gw_unpinned(&old.gateway) {
        return Err("config reload not supported for Gateway".into());
    }
    // nats-server 2.15.1 refuses even a `pinned_certs` change here (`config reload not
    // supported for LeafNode: field "TLSPinnedCerts"`), though its re-check covers leaves.
    if leafnodes != &old.leafnodes {
        return Err("config reload not supported for LeafNode".into());
    }
    if https_port != &old.https_port {
        return Err(refuse(
            "HTTPSPort",
            old.https_port.unwrap_or(0),
            https_port.unwrap_or(0),
        ));
    }
    if allow_non_tls != &old.allow_non_tls {
        return Err(refuse("AllowNonTLS", old.allow_non_tls, allow_non_tls));
    }
    let (routes_added, routes_removed) = cluster_diff(old.cluster.as_ref(), cluster.as_ref())?;
    let cluster_change = match (old.cluster.as_ref(), cluster.as_ref()) {
        (Some(o), Some(n)) => {
            let sys = (system_account.as_str(), *no_system_account);
            let old_sys = (old.system_account.as_str(), old.no_system_account);
            cluster_settings_diff(o, n, old_sys, sys)
        }
        _ => None,
    };
    if max_closed_clients != &old.max_closed_clients {
        return Err(refuse(
            "MaxClosedClients",
            old.max_closed_clients,
            max_closed_clients,
        ));
    }
    if pid_file != &old.pid_file {
        let show = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        return Err(refuse(
            "PidFile",
            show(&old.pid_file).unwrap_or_default(),
            show(pid_file).unwrap_or_default(),
        ));
    }

    // nats-server 2.9 moves the ports file to the new directory; natsd refuses the change.
    if ports_file_dir != &old.ports_file_dir {
        let show = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        return Err(refuse(
            "PortsFileDir",
            show(&old.ports_file_dir).unwrap_or_default(),
            show(ports_file_dir).unwrap_or_default(),
        ));
    }

    // JetStream itself is not reloadable in natsd (nats-server can toggle it; natsd
    // refuses). Which accounts have it, and their limits, are (below).
    if jetstream != &old.jetstream {
        return Err(refuse(
            "JetStream",
            old.jetstream.is_some(),
            jetstream.is_some(),
        ));
    }

    // Not reloadable in nats-server either (its reload has no case for them).
    if log_size_limit != &old.log_size_limit {
        return Err(refuse("LogSizeLimit", old.log_size_limit, log_size_limit));
    }
    if log_max_num != &old.log_max_num {
        return Err(refuse("LogMaxFiles", old.log_max_num, log_max_num));
    }
    if syslog != &old.syslog {
        return Err(refuse("Syslog", old.syslog, syslog));
    }
    if remote_syslog != &old.remote_syslog {
        return Err(refuse(
            "RemoteSyslog",
            opt_str(&old.remote_syslog),
            opt_str(remote_syslog),
        ));
    }

    // Everything left is reloadable; name it as nats-server's `Reloaded: …` lines do.
    let mut plan = Plan::default();
    let ch = &mut plan.changed;
    if trace != &old.trace {
        ch.push(format!("trace = {trace}"));
    }
    if debug != &old.debug {
        ch.push(format!("debug = {debug}"));
    }
    if logtime != &old.logtime {
        ch.push(format!("logtime = {logtime}"));
    }
    if logtime_utc != &old.logtime_utc {
        // Nothing to apply: natsd's stamps are UTC either way.
        ch.push(format!("logtime_utc = {logtime_utc}"));
    }
    if max_traced_msg_len != &old.max_traced_msg_len {
        ch.push(format!("max_traced_msg_len = {max_traced_msg_len}"));
    }
    if max_connections != &old.max_connections {
        ch.push(format!("max_connections = {max_connections}"));
    }
    if max_subscriptions != &old.max_subscriptions {
        ch.push(format!("max_subscriptions = {max_subscriptions}"));
    }
    if connect_error_reports != &old.connect_error_reports {
        ch.push(format!("connect_error_reports = {connect_error_reports}"));
    }
    if reconnect_error_reports != &old.reconnect_error_reports {
        ch.push(format!(
            "reconnect_error_reports = {reconnect_error_reports}"
        ));
    }
    if max_sub_tokens != &old.max_sub_tokens {
        ch.push(format!("max_sub_tokens = {max_sub_tokens}"));
    }
    let mut keys: Vec<_> = nkeys.iter().collect();
    let mut old_keys: Vec<_> = old.nkeys.iter().collect();
    keys.sort_by(|a, b| a.nkey.cmp(&b.nkey));
    old_keys.sort_by(|a, b| a.nkey.cmp(&b.nkey));
    let users_changed = sorted_users(users) != sorted_users(&old.users) || keys != old_keys;
    if users_changed || accounts != &old.accounts {
        ch.push("authorization users".into());
        ch.push("accounts".into());
    }
    // An account's JetStream limits, and JetStream enabled or disabled for an account,
    // apply at once (nats-server logs it as `accounts`).
    let js_limits = jetstream_limits != &old.jetstream_limits;
    let js_accounts = jetstream_accounts != &old.jetstream_accounts;
    // Accounts' client limits apply to connections from now on and, re-checked, to the
    // connected ones (`client/reload.rs`).
    let client_limits = account_limits != &old.account_limits;
    // Accounts' trace destinations: read from the live options by each traced message.
    let msg_trace = account_msg_trace != &old.account_msg_trace;
    // Subject mappings: the server installs the new ones on its accounts.
    let mappings = account_mappings != &old.account_mappings;
    if (js_limits || js_accounts || client_limits || msg_trace || mappings)
        && !ch.iter().any(|c| c == "accounts")
    {
        ch.push("accounts".into());
    }
    if server_tags != &old.server_tags {
        ch.push("tags".into());
    }
    if username != &old.username {
        ch.push("authorization username".into());
    }
    if password != &old.password {
        ch.push("authorization password".into());
    }
    if auth_token != &old.auth_token {
        ch.push("authorization token".into());
    }
    if auth_timeout != &old.auth_timeout {
        ch.push(format!("authorization timeout = {}", secs(*auth_timeout)));
    }
    if no_auth_user != &old.no_auth_user {
        ch.push(format!("no_auth_user = {}", opt_str(no_auth_user)));
    }
    // Read at each CONNECT: new clients follow it, connected ones stay.
    if auth_callout != &old.auth_callout {
        ch.push("authorization callout".into());
    }
    plan.js_limits = js_limits;
    plan.js_accounts = js_accounts;
    plan.auth = users_changed
        || accounts != &old.accounts
        || username != &old.username
        || password != &old.password
        || auth_token != &old.auth_token
        || no_auth_user != &old.no_auth_user;
    plan.pins = PinsChange::of(old, new);
    let ch = &mut plan.changed;
    // nats-server names a change of the cluster's pins `cluster` too.
    if cluster_change.is_some() || plan.pins.routes {
        ch.push("cluster".into());
    }
    if plan.pins.gateways {
        ch.push("gateway tls pinned_certs".into());
    }
    if !routes_added.is_empty() || !routes_removed.is_empty() {
        ch.push("cluster routes".into());
    }
    if ping_interval != &old.ping_interval {
        ch.push(format!("ping_interval = {}", go_duration(*ping_interval)));
    }
    if ping_max != &old.ping_max {
        ch.push(format!("ping_max = {ping_max}"));
    }
    if max_control_line != &old.max_control_line {
        ch.push(format!("max_control_line = {max_control_line}"));
    }
    if max_payload != &old.max_payload {
        ch.push(format!("max_payload = {max_payload}"));
    }
    if max_pending != &old.max_pending {
        ch.push(format!("max_pending = {max_pending}"));
    }
    if write_timeout != &old.write_timeout {
        ch.push(format!("write_timeout = {write_timeout:?}"));
    }
    if no_fast_producer_stall != &old.no_fast_producer_stall {
        ch.push(format!("no_fast_producer_stall = {no_fast_producer_stall}"));
    }
    if write_deadline != &old.write_deadline {
        ch.push(format!("write_deadline = {}", go_duration(*write_deadline)));
    }
    if lame_duck_duration != &old.lame_duck_duration {
        ch.push(format!(
            "lame_duck_duration = {}",
            go_duration(*lame_duck_duration)
        ));
    }
    if lame_duck_grace_period != &old.lame_duck_grace_period {
        ch.push(format!(
            "lame_duck_grace_period = {}",
            go_duration(*lame_duck_grace_period)
        ));
    }
    if tls != &old.tls {
        // As nats-server: new client connections use the new settings; established ones
        // keep their session. File names only (no secrets) in the log line.
        ch.push(format!(
            "tls = {}",
            if tls.is_some() { "enabled" } else { "disabled" }
        ));
    }
    if log_file != &old.log_file {
        ch.push(format!(
            "log_file = {}",
            log_file
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ));
        plan.log_file = Some(log_file.clone());
    }
    plan.routes_added = routes_added;
    plan.routes_removed = routes_removed;
    plan.cluster = cluster_change;
    plan.tls = tls != &old.tls;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Permissions, SubjectPermission};

    fn user(name: &str, pass: &str) -> User {
        User {
            username: name.into(),
            password: pass.into(),
            ..User::default()
        }
    }

    #[test]
    fn nothing_changed() {
        let o = Options::default();
        let p = diff(&o, &o.clone()).expect("plan");
        assert!(p.is_empty());
        assert!(!p.auth);
        assert_eq!(p.log_file, None);
    }

    #[test]
    fn account_jetstream_limits_and_accounts_with_jetstream_reload() {
        let old = Options {
            jetstream_accounts: vec!["A".into()],
            ..Options::default()
        };
        let mut new = old.clone();
        new.jetstream_limits.insert(
            "A".into(),
            crate::config::JsLimits::Flat(crate::config::JsAccountLimits {
                max_streams: 2,
                ..Default::default()
            }),
        );
        let p = diff(&old, &new).expect("plan");
        assert!(p.js_limits);
        assert_eq!(p.changed, ["accounts"]);
        assert!(!p.js_accounts);
        new.jetstream_accounts.push("B".into());
        let p = diff(&old, &new).expect("plan");
        assert!(p.js_accounts);
        assert_eq!(p.changed, ["accounts"]);
        new.jetstream = Some(Default::default());
        let e = diff(&old, &new).expect_err("refused");
        assert!(e.contains("JetStream"), "{e}");
    }

    #[test]
    fn tags_reload_and_ports_file_dir_does_not() {
        let old = Options::default();
        let tags = Options {
            server_tags: vec!["az:1".into()],
            ..Options::default()
        };
        let p = diff(&old, &tags).expect("plan");
        assert_eq!(p.changed, ["tags"]);
        assert!(!p.auth);
        let moved = Options {
            ports_file_dir: Some("/tmp/p".into()),
            ..Options::default()
        };
        assert_eq!(
            diff(&old, &moved),
            Err("config reload not supported for PortsFileDir: old=, new=/tmp/p".into())
        );
    }

    #[test]
    fn reloadable_fields_are_named_like_nats_server() {
        let old = Options::default();
        let new = Options {
            trace: true,
            debug: true,
            logtime: false,
            max_connections: 50,
            max_payload: 1000,
            ping_interval: Duration::from_secs(5),
            ping_max: 5,
            max_control_line: 2048,
            write_deadline: Duration::from_secs(3),
            auth_timeout: Duration::from_secs(3),
            log_file: Some("/tmp/x.log".into()),
            ..Options::default()
        };
        let p = diff(&old, &new).expect("plan");
        assert_eq!(
            p.changed,
            [
                "trace = true",
                "debug = true",
                "logtime = false",
                "max_connections = 50",
                "authorization timeout = 3",
                "ping_interval = 5s",
                "ping_max = 5",
                "max_control_line = 2048",
                "max_payload = 1000",
                "write_deadline = 3s",
                "log_file = /tmp/x.log",
            ]
        );
        assert!(!p.auth);
        assert_eq!(p.log_file, Some(Some(PathBuf::from("/tmp/x.log"))));
    }

    #[test]
    fn auth_changes() {
        let old = Options {
            users: vec![user("a", "pa"), user("b", "pb")],
            ..Options::default()
        };
        // Same users in another order: no change.
        let same = Options {
            users: vec![user("b", "pb"), user("a", "pa")],
            ..Options::default()
        };
        assert!(diff(&old, &same).expect("plan").is_empty());
        let mut narrowed = same.clone();
        narrowed.users[0].permissions = Some(Permissions {
            allow_responses: None,
            publish: Some(SubjectPermission {
                allow: vec!["foo".into()],
                deny: vec![],
            }),
            subscribe: None,
        });
        let p = diff(&old, &narrowed).expect("plan");
        assert!(p.auth);
        assert_eq!(p.changed, ["authorization users", "accounts"]);
        let token = Options {
            auth_token: Some("t".into()),
            ..Options::default()
        };
        let p = diff(&Options::default(), &token).expect("plan");
        assert!(p.auth);
        assert_eq!(p.changed, ["authorization token"]);
    }

    #[test]
    fn refused_fields() {
        let old = Options::default();
        let e = diff(
            &old,
            &Options {
                log_size_limit: 1024,
                ..Options::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "config reload not supported for LogSizeLimit: old=0, new=1024"
        );
        let e = diff(
            &old,
            &Options {
                port: 1,
                ..Options::default()
            },
        )
        .unwrap_err();
        assert_eq!(e, "config reload not supported for Port: old=4222, new=1");
        let e = diff(
            &old,
            &Options {
                resolver_tls: Some(crate::tls::TlsOpts::default()),
                ..Options::default()
            },
        );
        assert!(e.is_err_and(|e| e.contains("not supported for resolver_tls")));
        // The first refused field in nats-server's order wins (ServerName before Port).
        let e = diff(
            &old,
            &Options {
                port: 1,
                server_name: Some("X".into()),
                debug: true,
                ..Options::default()
            },
        )
        .unwrap_err();
        assert_eq!(e, "config reload not supported for ServerName: old=, new=X");
        let e = diff(
            &old,
            &Options {
                http_port: Some(8333),
                ..Options::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "config reload not supported for HTTPPort: old=0, new=8333"
        );
        let e = diff(
            &old,
            &Options {
                host: "127.0.0.1".into(),
                ..Options::default()
            },
        )
        .unwrap_err();
        assert_eq!(
            e,
            "config reload not supported for Host: old=0.0.0.0, new=127.0.0.1"
        );
        let e = diff(
            &old,
            &Options {
                accounts: vec!["A".into()],
                ..Options::default()
            },
        )
        .unwrap_err();
        assert!(e.contains("Accounts"), "{e}");
        // Removing an account is fine.
        let with_a = Options {
            accounts: vec!["A".into()],
            ..Options::default()
        };
        assert!(diff(&with_a, &old).expect("plan").auth);
    }
}
