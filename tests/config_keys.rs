//! Every config key nats-server 2.15 accepts (its `opts.go` `processConfigFileLine` and
//! `parseJetStream`, at the source the 2.15.1 binary was built from) either works in natsd or
//! is refused with "not supported yet" naming it — never a bare "unknown field" (issue 20
//! item 4); and the aliases that work do what their main key does.

use natsd::config::file::load_str;
use std::path::PathBuf;

/// nats-server's top-level keys (aliases included).
const TOP: &[&str] = &[
    "listen",
    "client_advertise",
    "port",
    "server_name",
    "host",
    "net",
    "debug",
    "trace",
    "trace_verbose",
    "trace_headers",
    "logtime",
    "logtime_utc",
    "mappings",
    "maps",
    "disable_sublist_cache",
    "no_sublist_cache",
    "accounts",
    "default_sentinel",
    "authorization",
    "http",
    "https",
    "http_port",
    "monitor_port",
    "https_port",
    "http_base_path",
    "cluster",
    "gateway",
    "leaf",
    "leafnodes",
    "store_dir",
    "storedir",
    "jetstream",
    "logfile",
    "log_file",
    "logfile_size_limit",
    "log_size_limit",
    "logfile_max_num",
    "log_max_num",
    "syslog",
    "remote_syslog",
    "pidfile",
    "pid_file",
    "ports_file_dir",
    "prof_port",
    "prof_block_rate",
    "max_control_line",
    "max_payload",
    "max_pending",
    "proxy_protocol",
    "max_connections",
    "max_conn",
    "max_traced_msg_len",
    "max_subscriptions",
    "max_subs",
    "max_sub_tokens",
    "max_subscription_tokens",
    "ping_interval",
    "ping_max",
    "tls",
    "ocsp",
    "allow_non_tls",
    "write_deadline",
    "write_timeout",
    "lame_duck_duration",
    "lame_duck_grace_period",
    "operator",
    "operators",
    "roots",
    "root",
    "root_operators",
    "root_operator",
    "resolver",
    "account_resolver",
    "accounts_resolver",
    "resolver_tls",
    "resolver_preload",
    "resolver_pinned_accounts",
    "no_auth_user",
    "system_account",
    "system",
    "no_system_account",
    "no_system",
    "no_sys_acc",
    "no_header_support",
    "trusted",
    "trusted_keys",
    "connect_error_reports",
    "reconnect_error_reports",
    "websocket",
    "ws",
    "mqtt",
    "server_tags",
    "server_metadata",
    "feature_flags",
    "default_js_domain",
    "ocsp_cache",
    "no_fast_producer_stall",
    "max_closed_clients",
    "proxies",
];

/// nats-server's `jetstream {}` keys.
const JETSTREAM: &[&str] = &[
    "enabled",
    "enable",
    "disabled",
    "disable",
    "strict",
    "store",
    "store_dir",
    "storedir",
    "sync",
    "sync_interval",
    "max_memory_store",
    "max_mem_store",
    "max_mem",
    "max_file_store",
    "max_file",
    "domain",
    "key",
    "ek",
    "encryption_key",
    "prev_key",
    "prev_ek",
    "prev_encryption_key",
    "cipher",
    "extension_hint",
    "limits",
    "tpm",
    "unique_tag",
    "max_outstanding_catchup",
    "max_buffered_size",
    "max_buffered_msgs",
    "request_queue_limit",
    "info_queue_limit",
    "meta_compact",
    "meta_compact_size",
    "meta_compact_sync",
    "max_concurrent_io",
];

/// `text` loads, or fails with anything but "unknown field".
fn known(text: &str) -> Result<(), String> {
    match load_str(text) {
        Ok(_) => Ok(()),
        Err(e) if e.to_string().contains("unknown field") => Err(e.to_string()),
        Err(_) => Ok(()),
    }
}

#[test]
fn every_nats_server_key_works_or_is_refused_by_name() {
    let mut unknown = Vec::new();
    for k in TOP {
        // Values of several types: whichever the key takes, one of them is its type.
        for v in ["true", "1", "\"x\"", "{}"] {
            if let Err(e) = known(&format!("{k}: {v}\n")) {
                unknown.push(e);
                break;
            }
        }
    }
    for k in JETSTREAM {
        for v in ["true", "1", "\"x\"", "{}"] {
            if let Err(e) = known(&format!("jetstream {{ {k}: {v} }}\n")) {
                unknown.push(e);
                break;
            }
        }
    }
    assert!(unknown.is_empty(), "{unknown:#?}");
    // A key natsd does not build names itself and what is missing.
    let e = load_str("jetstream { max_outstanding_catchup: 1 }\n").expect_err("refused");
    assert!(
        e.to_string()
            .contains("\"max_outstanding_catchup\" is not supported yet")
            && e.to_string().contains("JetStream clustering"),
        "{e}"
    );
    // `unique_tag` is taken, lowercased as server tags are.
    let o = load_str("jetstream { unique_tag: \"AZ:\" }\n").expect("unique_tag");
    assert_eq!(
        o.options.jetstream.and_then(|j| j.unique_tag).as_deref(),
        Some("az:")
    );
    let e = load_str("disable_sublist_cache: true\n").expect_err("refused");
    assert!(
        e.to_string()
            .contains("\"disable_sublist_cache\" is not supported yet"),
        "{e}"
    );
}

/// nats-server's `leafnodes {}` keys (its `parseLeafNodes`, `parseLeafAuthorization`,
/// `parseRemoteLeafNodes`): each works or is refused by name.
#[test]
fn every_leafnodes_key_works_or_is_refused_by_name() {
    const LEAF: &[&str] = &[
        "listen",
        "port",
        "host",
        "net",
        "authorization",
        "remotes",
        "reconnect",
        "reconnect_delay",
        "reconnect_interval",
        "dial_timeout",
        "tls",
        "leafnode_advertise",
        "advertise",
        "no_advertise",
        "min_version",
        "minimum_version",
        "compression",
        "isolate_leafnode_interest",
        "isolate",
        "write_deadline",
        "write_timeout",
    ];
    const AUTH: &[&str] = &[
        "user",
        "username",
        "pass",
        "password",
        "nkey",
        "timeout",
        "users",
        "account",
        "proxy_required",
    ];
    const REMOTE: &[&str] = &[
        "no_randomize",
        "dont_randomize",
        "url",
        "urls",
        "account",
        "local",
        "creds",
        "credentials",
        "nkey",
        "seed",
        "tls",
        "hub",
        "deny_imports",
        "deny_import",
        "deny_exports",
        "deny_export",
        "ws_compress",
        "ws_compression",
        "websocket_compress",
        "websocket_compression",
        "ws_no_masking",
        "websocket_no_masking",
        "jetstream_cluster_migrate",
        "js_cluster_migrate",
        "isolate_leafnode_interest",
        "isolate",
        "request_isolation",
        "compression",
        "first_info_timeout",
        "dial_timeout",
        "disabled",
        "proxy",
        "username",
        "password",
        "ignore_discovered_servers",
    ];
    let mut unknown = Vec::new();
    type Wrap = fn(&str) -> String;
    let wrap: [(&[&str], Wrap); 3] = [
        (LEAF, |kv| format!("leafnodes {{ {kv} }}")),
        (AUTH, |kv| {
            format!("leafnodes {{ authorization {{ {kv} }} }}")
        }),
        (REMOTE, |kv| {
            format!("leafnodes {{ remotes [ {{ url: \"nats://h:1\", {kv} }} ] }}")
        }),
    ];
    for (keys, f) in wrap {
        for k in keys {
            for v in ["true", "1", "\"x\"", "{}"] {
                if let Err(e) = known(&f(&format!("{k}: {v}"))) {
                    unknown.push(e);
                    break;
                }
            }
        }
    }
    assert!(unknown.is_empty(), "{unknown:#?}");
    // Hub-role remotes are taken (tests/leafnode_hub_role.rs).
    let o = load_str("leafnodes { remotes [ { url: \"nats://h:1\", hub: true } ] }\n")
        .expect("hub-role remote")
        .options;
    assert!(o.leafnodes.is_some_and(|l| l.remotes[0].hub));
    let o = load_str(
        "leafnodes { listen: \"127.0.0.1:-1\", authorization { users [ {user: a, password: b, \
         account: A} ] }, remotes [ { urls: [\"nats-leaf://u:p@h:7\"], account: A } ] }\n\
         accounts { A {} }\n",
    )
    .expect("loads")
    .options;
    let l = o.leafnodes.expect("leafnodes");
    assert_eq!((l.host.as_str(), l.port), ("127.0.0.1", Some(0)));
    assert_eq!(l.users[0].account.as_deref(), Some("A"));
    assert_eq!(l.remotes[0].urls, vec!["nats-leaf://u:p@h:7".to_string()]);
}

#[test]
fn aliases_do_what_their_key_does() {
    let o = load_str("monitor_port: 8333\nsystem: SYS\naccounts { SYS {} }\n")
        .expect("loads")
        .options;
    assert_eq!(o.http_port, Some(8333));
    assert_eq!(o.system_account, "SYS");
    let o = load_str("no_sys_acc: true\n").expect("loads").options;
    assert!(o.no_system_account);
    // The top-level store directory, before or after the jetstream block.
    for text in [
        "storedir: \"/tmp/js-a\"\njetstream: enabled\n",
        "jetstream {}\nstore_dir: \"/tmp/js-a\"\n",
    ] {
        let o = load_str(text).expect("loads").options;
        let js = o.jetstream.expect("jetstream");
        assert_eq!(js.store_dir, Some(PathBuf::from("/tmp/js-a")), "{text}");
    }
    // The block's own wins; without a jetstream block it enables nothing.
    let o = load_str("store_dir: \"/a\"\njetstream { store_dir: \"/b\" }\n")
        .expect("loads")
        .options;
    assert_eq!(
        o.jetstream.and_then(|j| j.store_dir),
        Some(PathBuf::from("/b"))
    );
    assert!(load_str("store_dir: \"/a\"\n")
        .expect("loads")
        .options
        .jetstream
        .is_none());
    let o = load_str("jetstream { disabled: true }\n")
        .expect("loads")
        .options;
    assert!(o.jetstream.is_none());
    let l = load_str("jetstream { strict: true }\n").expect("loads");
    assert!(l.options.jetstream.is_some());
    assert!(
        l.warnings.iter().any(|w| w.to_string().contains("strict")),
        "a warning says natsd is not strict"
    );
    assert!(
        load_str("logtime_utc: true\n")
            .expect("loads")
            .options
            .logtime_utc
    );
}
