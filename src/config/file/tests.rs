//! Unit tests of the config file mapping (`config/file/`).

use super::*;

fn load(s: &str) -> Loaded {
    match load_str(s) {
        Ok(l) => l,
        Err(e) => panic!("load {s:?}: {e}"),
    }
}

fn err(s: &str) -> ConfigError {
    match load_str(s) {
        Ok(l) => panic!("expected an error for {s:?}, got {:?}", l.options),
        Err(e) => e,
    }
}

#[test]
fn durations() {
    assert_eq!(parse_go_duration("100ms"), Some(Duration::from_millis(100)));
    assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
    assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
    assert_eq!(parse_go_duration("5"), None);
    assert_eq!(parse_go_duration("-5s"), None);
    assert_eq!(parse_go_duration("5x"), None);
    assert_eq!(parse_go_duration("9999999999999999999999999h"), None);
    let l = load("ping_interval: \"1m30s\"\nwrite_deadline: 2s");
    assert_eq!(l.options.ping_interval, Duration::from_secs(90));
    assert_eq!(l.options.write_deadline, Duration::from_secs(2));
    assert!(l.warnings.is_empty());
    let l = load("ping_interval: 5");
    assert_eq!(l.options.ping_interval, Duration::from_secs(5));
    assert_eq!(l.warnings.len(), 1);
    assert!(l.warnings[0]
        .msg
        .contains("should be converted to a duration"));
    let e = err("ping_interval: 2m");
    assert!(e.msg.contains("not a duration"), "{e}");
    let e = err("write_deadline: \"soon\"");
    assert_eq!((e.line, e.col), (1, 17));
    let l = load("lame_duck_duration: \"2s\"\nlame_duck_grace_period: \"500ms\"");
    assert_eq!(l.options.lame_duck_duration, Duration::from_secs(2));
    assert_eq!(l.options.lame_duck_grace_period, Duration::from_millis(500));
    let l = load("port: 4222");
    assert_eq!(l.options.lame_duck_duration, Duration::from_secs(120));
    assert_eq!(l.options.lame_duck_grace_period, Duration::from_secs(10));
    let e = err("lame_duck_duration: \"40s\"\nlame_duck_grace_period: \"50s\"");
    assert_eq!(
        e.msg,
        "lame duck grace period (50s) should be strictly lower than lame duck duration (40s)"
    );
    let e = err("lame_duck_duration: \"0s\"");
    assert!(e.msg.contains("must be positive"), "{e}");
}

#[test]
fn ports_and_listen() {
    let o = load("listen: 127.0.0.1:4333").options;
    assert_eq!((o.host.as_str(), o.port), ("127.0.0.1", 4333));
    let o = load("listen: 4444").options;
    assert_eq!(o.port, 4444);
    assert_eq!(load("port: -1").options.port, 0);
    assert_eq!(load("port: 0").options.port, 4222);
    let o = load("host: 10.0.0.1\nport: 1234\nhttp: \"127.0.0.1:8222\"").options;
    assert_eq!((o.host.as_str(), o.port), ("10.0.0.1", 1234));
    assert_eq!(
        (o.http_host.as_deref(), o.http_port),
        (Some("127.0.0.1"), Some(8222))
    );
    assert_eq!(load("http_port: -1").options.http_port, Some(0));
    assert_eq!(load("http: 8222").options.http_port, Some(8222));
    // As nats-server: `host:-1` picks a free monitor port, `host:0` has no monitor.
    let o = load("http: \"127.0.0.1:-1\"").options;
    assert_eq!(
        (o.http_host.as_deref(), o.http_port),
        (Some("127.0.0.1"), Some(0))
    );
    assert_eq!(load("http: \"127.0.0.1:0\"").options.http_port, None);
    assert_eq!(load("http: -1").options.http_port, Some(0));
    let e = err("port: 70000");
    assert!(e.msg.contains("out of range"), "{e}");
    let e = err("listen: nonsense");
    assert!(e.msg.contains("not host:port"), "{e}");
}

#[test]
fn sizes() {
    let o = load("max_payload: 1kb\nmax_pending: 2MB\nmax_control_line: 1k").options;
    assert_eq!(
        (o.max_payload, o.max_pending, o.max_control_line),
        (1024, 2 << 20, 1000)
    );
    let e = err("\nmax_payload: 1kbb");
    assert_eq!((e.line, e.col), (2, 14));
    assert!(e.msg.contains("unknown unit \"kbb\""), "{e}");
    let e = err("max_payload: 2Ti");
    assert!(e.msg.contains("too big"), "{e}");
    let e = err("max_connections: -5");
    assert!(e.msg.contains("negative"), "{e}");
}

#[test]
fn keys_are_case_insensitive_and_unknown_keys_fail() {
    let o = load("PORT: 4333\nMax_Payload: 1000\nDebug: TRUE").options;
    assert_eq!((o.port, o.max_payload, o.debug), (4333, 1000, true));
    let e = err("port: 1\n  bogus_key: 1");
    assert_eq!((e.line, e.col), (2, 3));
    assert_eq!(e.msg, "unknown field \"bogus_key\"");
    // A variable is not an unknown field once used; an unused one is.
    let o = load("PORT_VAR = 4555\nport: $PORT_VAR").options;
    assert_eq!(o.port, 4555);
    let e = err("unused = 1");
    assert_eq!(e.msg, "unknown field \"unused\"");
}

#[test]
fn refused_capabilities_name_the_key() {
    for (src, key) in [
        ("websocket { port: 8080 }", "websocket"),
        ("mqtt { port: 1883 }", "mqtt"),
    ] {
        let e = err(src);
        assert!(
            e.msg.contains(&format!("{key:?} is not supported yet")),
            "{src}: {e}"
        );
    }
    // Off switches ask for nothing.
    load("jetstream: disabled\nsystem_account: \"$SYS\"");
    load("jetstream { enabled: false }");
}

#[test]
fn log_rotation_keys_as_nats_server() {
    for (src, want) in [
        ("logfile_size_limit: 1KB\nlogfile_max_num: 3", (1024, 3)),
        ("log_size_limit: 10MB\nlog_max_num: 0", (10 << 20, 0)),
        // nats-server takes any integer; 0 or less turns rotation (pruning) off.
        ("log_size_limit: -5\nlogfile_max_num: -1", (-5, -1)),
    ] {
        let o = load(src).options;
        assert_eq!((o.log_size_limit, o.log_max_num), want, "{src}");
    }
    // nats-server: "interface conversion: interface {} is string, not int64".
    let e = err("log_size_limit: \"1KB\"");
    assert!(e.msg.contains("log_size_limit"), "{e}");
}

#[test]
fn jetstream_block_and_switches() {
    let o = load("jetstream: enabled").options;
    assert!(o.jetstream.is_some());
    let o = load("jetstream { store_dir: /data, max_memory_store: 1GB, max_file_store: 10G, domain: hub, sync_interval: \"10s\" }").options;
    let js = o.jetstream.expect("on");
    assert_eq!(js.store_dir.as_deref(), Some(std::path::Path::new("/data")));
    assert_eq!(js.max_memory_store, Some(1 << 30));
    assert_eq!(js.max_file_store, Some(10 * 1000 * 1000 * 1000));
    assert_eq!(js.domain.as_deref(), Some("hub"));
    assert_eq!(js.sync_interval, Some(std::time::Duration::from_secs(10)));
    assert!(
        load("jetstream { sync_interval: always }")
            .options
            .jetstream
            .expect("on")
            .sync_always
    );
    assert!(load("jetstream { enabled: false, store_dir: /x }")
        .options
        .jetstream
        .is_none());
    let o = load("jetstream: enabled\naccounts { A { jetstream: enabled }, B { } }").options;
    assert_eq!(o.jetstream_accounts, vec!["A".to_string()]);
    let e = err("jetstream { bogus: 1 }");
    assert!(e.msg.contains("bogus"), "{e}");
    let e = err("jetstream: enabled\ncluster { port: 6222 }");
    assert!(e.msg.contains("requires `server_name`"), "{e}");
    let e = err("server_name: a\njetstream: enabled\ncluster { port: 6222 }");
    assert!(e.msg.contains("requires `cluster.name`"), "{e}");
    let o = load("server_name: a\njetstream: enabled\ncluster { name: c, port: 6222 }").options;
    assert!(o.jetstream.is_some() && o.cluster.is_some());
}

#[test]
fn account_jetstream_limits_as_nats_server() {
    let o = load(
        "jetstream: enabled\naccounts {\n A { jetstream { max_mem: 64MB, max_file: 1G, \
         max_streams: 3, consumers: 2, max_ack_pending: 50, mem_max_stream_bytes: 1K, \
         store_max_stream_bytes: 2KB, max_bytes_required: true } }\n B { jetstream: enabled }\n \
         C { jetstream: disabled }\n D { jetstream { disk: 5, memory: 6 } } }",
    )
    .options;
    assert_eq!(o.jetstream_accounts, ["A", "B", "D"]);
    let flat = |acc: &str| match &o.jetstream_limits[acc] {
        crate::config::JsLimits::Flat(l) => *l,
        t => panic!("{acc}: {t:?}"),
    };
    let a = flat("A");
    assert_eq!(a.max_memory, 64 << 20);
    assert_eq!(a.max_store, 1_000_000_000);
    assert_eq!(
        (a.max_streams, a.max_consumers, a.max_ack_pending),
        (3, 2, 50)
    );
    assert_eq!(a.memory_max_stream_bytes, 1000);
    assert_eq!(a.store_max_stream_bytes, 2048);
    assert!(a.max_bytes_required);
    assert_eq!(flat("B"), crate::config::JsAccountLimits::default());
    assert_eq!(flat("B").max_memory, -1);
    assert_eq!((flat("D").max_store, flat("D").max_memory), (5, 6));
    assert!(!o.jetstream_limits.contains_key("C"));
    let bad = |v: &str| err(&format!("accounts {{ A {{ jetstream {v} }} }}")).msg;
    assert_eq!(
        bad("{ max_mem: \"1GB\" }"),
        "Expected a parseable size for \"max_mem\", got 1GB"
    );
    assert_eq!(
        bad("{ max_streams: 1.5 }"),
        "Expected a parseable size for \"max_streams\", got 1.5"
    );
    assert_eq!(
        bad("{ max_bytes_required: \"yes\" }"),
        "Expected a parseable bool for \"max_bytes_required\", got yes"
    );
    assert_eq!(
        bad("{ max_bytes: 100 }"),
        "Expected a parseable bool for \"max_bytes\", got 100"
    );
    assert_eq!(bad("{ enabled: false }"), "unknown field \"enabled\"");
    assert_eq!(
        bad(": bogus"),
        "Expected 'enabled' or 'disabled' for string value, got 'bogus'"
    );
    assert_eq!(
        bad(": 5"),
        "Expected map, bool or string to define JetStream, got int64"
    );
}

#[test]
fn authorization_users_and_permissions() {
    let o = load(
        r#"
        authorization {
          timeout: 1.5
          default_permissions { publish: "_INBOX.>" }
          users = [
            { user: alice, password: $2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG
              permissions: { publish: "orders.>", subscribe: ["a", "b"] } }
            { user: bob, password: bob, permissions: { publish: { allow: ["x.*"], deny: "x.y" } } }
            { user: carol, password: c }
          ]
        }
        no_auth_user: carol
        "#,
    )
    .options;
    assert_eq!(o.auth_timeout, Duration::from_millis(1500));
    assert_eq!(o.users.len(), 3);
    assert!(o.users[0].password.starts_with("$2a$11$"));
    let p = o.users[0].permissions.clone().unwrap_or_default();
    assert_eq!(
        p.publish.map(|x| x.allow),
        Some(vec!["orders.>".to_string()])
    );
    assert_eq!(
        p.subscribe.map(|x| x.allow),
        Some(vec!["a".into(), "b".into()])
    );
    let p = o.users[1].permissions.clone().unwrap_or_default();
    let publish = p.publish.unwrap_or_default();
    assert_eq!(
        (publish.allow, publish.deny),
        (vec!["x.*".into()], vec!["x.y".into()])
    );
    let p = o.users[2].permissions.clone().unwrap_or_default();
    assert_eq!(
        p.publish.map(|x| x.allow),
        Some(vec!["_INBOX.>".to_string()])
    );
    assert_eq!(o.no_auth_user.as_deref(), Some("carol"));

    let o = load("authorization { user: a, password: b }");
    assert!(o.options.username.is_some());
    let e = err("authorization { token: t, users: [ {user: a} ] }");
    assert!(e.msg.contains("token"), "{e}");
    let e =
        err("authorization { users: [ {user: a, permissions: {publish: {allow: x, bogus: 1}}} ] }");
    assert!(e.msg.contains("only 'allow' or 'deny'"), "{e}");
    let e = err("authorization { users: [ {password: a} ] }");
    assert!(e.msg.contains("without a \"user\""), "{e}");
}

#[test]
fn accounts_and_cluster() {
    let o = load(
        r#"
        accounts {
          A: { users: [ {user: a, password: a} ] }
          B { users = [ {user: b, password: b, permissions { subscribe: ">" }} ] }
        }
        cluster {
          name: C1
          listen: 127.0.0.1:6333
          routes: [ nats-route://r:p@127.0.0.1:6334, "nats-route://127.0.0.1:6335" ]
          advertise: "10.0.0.1:6333"
          no_advertise: true
          connect_retries: 3
          authorization { user: r, password: p, timeout: 0.5 }
          ping_interval: "30s"
          ping_max: 4
        }
        "#,
    )
    .options;
    assert_eq!(o.accounts, vec!["A".to_string(), "B".to_string()]);
    assert_eq!(o.users[0].account.as_deref(), Some("A"));
    assert_eq!(o.users[1].account.as_deref(), Some("B"));
    let c = o.cluster.unwrap_or_default();
    assert_eq!(c.name.as_deref(), Some("C1"));
    assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 6333));
    assert_eq!(c.routes.len(), 2);
    assert_eq!(c.advertise.as_deref(), Some("10.0.0.1:6333"));
    assert!(c.no_advertise);
    assert_eq!(c.connect_retries, 3);
    assert_eq!(c.username.as_deref(), Some("r"));
    assert_eq!(c.auth_timeout, Duration::from_millis(500));
    assert_eq!(c.ping_interval, Some(Duration::from_secs(30)));
    assert_eq!(c.ping_max, Some(4));
    let c = load("cluster { port: -1 }")
        .options
        .cluster
        .unwrap_or_default();
    assert_eq!(c.port, 0);
    let e = err("authorization { users: [ {user: a, account: NOPE} ] }");
    assert!(e.msg.contains("unknown account"), "{e}");
}

#[test]
fn types_are_checked() {
    let e = err("debug: 1");
    assert!(e.msg.contains("expected a boolean"), "{e}");
    let e = err("server_name: 123");
    assert!(e.msg.contains("quote it"), "{e}");
    let e = err("max_payload: 1.5");
    assert!(e.msg.contains("expected an integer"), "{e}");
    let e = err("authorization: 5");
    assert!(e.msg.contains("expected a map"), "{e}");
}

#[test]
fn exports_and_imports() {
    use crate::config::links::{LinkKind, ResponseType};
    let o = load(
        r#"
accounts {
  A {
    users: [{user: a, password: a}]
    exports: [
      {stream: "x.>"}
      {service: "req.*", response_type: chunked, response_threshold: "5s", accounts: [B]}
    ]
  }
  B {
    imports: [
      {stream: {account: A, subject: "x.>"}, prefix: "p"}
      {stream: {account: A, subject: "x.1"}, to: "one"}
      {service: {account: A, subject: "req.x"}, to: "local.x"}
    ]
  }
}
"#,
    )
    .options;
    let a = &o.links["A"];
    assert_eq!(a.exports[1].kind, LinkKind::Service);
    assert_eq!(a.exports[1].response_type, ResponseType::Chunked);
    assert_eq!(
        a.exports[1].response_threshold,
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        a.exports[1].accounts.as_deref(),
        Some(&["B".to_string()][..])
    );
    let b = &o.links["B"];
    assert_eq!(b.imports[0].local_subject(), "p.x.>");
    assert_eq!(b.imports[1].local_subject(), "one");
    assert_eq!(b.imports[2].local_subject(), "local.x");

    let acc = |a: &str, b: &str| {
        format!(
            "accounts {{\n  A {{ exports: [{{stream: \"x.>\"}}, {{service: \"req.x\"}}, \
             {{service: \"priv\", accounts: [C]}}] {a} }}\n  B {{ {b} }}\n  C {{ }}\n}}"
        )
    };
    for (a, b, want, line) in [
        ("", r#"imports: [{stream: {account: Z, subject: "x.>"}}]"#,
         "\"Z\" account not defined for stream import", 3),
        ("", r#"imports: [{stream: {account: A, subject: "y"}}]"#,
         "Error adding stream import \"y\": stream import not authorized", 3),
        ("", r#"imports: [{service: {account: A, subject: "priv"}}]"#,
         "Error adding service import \"priv\": service import not authorized", 3),
        ("", r#"imports: [{stream: {account: A, subject: "req.x"}}]"#,
         "Error adding stream import \"req.x\": stream import not authorized", 3),
        ("", r#"imports: [{stream: {account: A, subject: "x..y"}}]"#,
         "Error adding stream import \"x..y\": stream import not authorized", 3),
        ("", r#"imports: [{stream: {account: A}}]"#, "Expect an account name and a subject", 3),
        ("", r#"imports: [{stream: {account: A, subject: "x.>"}, prefix: "p.*"}]"#,
         "Error adding stream import \"x.>\": stream import prefix can not contain wildcard tokens", 3),
        ("", r#"imports: [{stream: {account: A, subject: "x.>"}, prefix: "p", to: "q"}]"#,
         "Stream import can not have a 'prefix' and a 'to' property", 3),
        ("", r#"imports: [{stream: {account: A, subject: "x.>"}}, {stream: {account: A, subject: "x.>"}}]"#,
         "Error adding stream import \"x.>\": stream import already exists", 3),
        ("", r#"imports: [{service: {account: A, subject: "req.x"}, to: "t"}, {service: {account: A, subject: "req.x"}, to: "t"}]"#,
         "Duplicate service import subject \"t\", previously used in import for account \"A\", subject \"req.x\"", 3),
        ("", r#"imports: [{stream: {account: A, subject: "x.>"}, foo: 1}]"#, "unknown field \"foo\"", 3),
        ("", r#"imports: {service: {account: A, subject: "req.x"}}"#,
         "Imports should be an array, got map[string]interface {}", 3),
        (r#", exports: [{service: "s.*"}]"#, "", "", 0),
        (", exports: [{service: \"x\", response_type: foo}]", "", "Unknown response type: \"foo\"", 2),
        (", exports: [{stream: \"x\", response_type: stream}]", "", "Detected response directive on non-service", 2),
        (", exports: [{service: \"x\", response_threshold: \"abc\"}]", "",
         "Expected response threshold to be a parseable time duration, got \"abc\"", 2),
        (", exports: [{service: \"x\", stream: \"y\"}]", "", "Detected stream \"y\" but already saw a service", 2),
        (", exports: [{service: \"x\", accounts: [Z]}]", "", "\"Z\" account not defined for service export", 2),
        (", exports: [{stream: \"x..y\"}]", "", "Error adding stream export \"x..y\": invalid subject", 2),
        (", exports: [{stream: \"x\", allow_trace: true}]", "", "Detected allow_trace directive on non-service", 2),
        ("", r#"imports: [{service: {account: A, subject: "req.x"}, allow_trace: true}]"#,
         "Detected allow_trace directive on a non-stream", 3),
        ("", r#"imports: [{stream: {account: A, subject: "x.>"}, allow_trace: true}]"#, "", 0),
        (", exports: [{service: \"t.x\", allow_trace: true}]", "", "", 0),
    ] {
        let src = acc(a, b);
        if want.is_empty() {
            load(&src);
            continue;
        }
        let e = err(&src);
        assert_eq!(e.msg, want, "{src}");
        assert_eq!(e.line, line, "{src}: {e}");
        assert!(e.col > 0, "{src}: {e}");
    }

    // A service import cycle: refused at the import that closes it.
    let e = err(r#"accounts {
  A { exports: [{service: "req.x"}], imports: [{service: {account: B, subject: "req.y"}, to: "req.x"}] }
  B { exports: [{service: "req.y"}], imports: [{service: {account: A, subject: "req.x"}, to: "req.y"}] }
}"#);
    assert_eq!(
        e.msg,
        "Error adding service import \"req.x\": import forms a cycle"
    );
    assert_eq!(e.line, 3);
    // Streams may go both ways.
    load(
        r#"accounts {
  A { exports: [{stream: "x.>"}], imports: [{stream: {account: B, subject: "y.>"}}] }
  B { exports: [{stream: "y.>"}], imports: [{stream: {account: A, subject: "x.>"}}] }
}"#,
    );
}

#[test]
fn system_account_names_a_configured_account() {
    let o =
        load("accounts { SYS { users [{user: s, password: s}] } }\nsystem_account: SYS").options;
    assert_eq!(o.system_account, "SYS");
    assert!(!o.no_system_account);
    assert_eq!(load("").options.system_account, "$SYS");
    assert!(load("no_system_account: true").options.no_system_account);
    let e = err("system_account: NOPE");
    assert!(e.msg.contains("account missing"), "{e}");
}

#[test]
fn gateway_block() {
    let o = load(
        "gateway {\n name: C1\n listen: 127.0.0.1:7333\n advertise: \"10.0.0.1:7333\"\n \
         connect_retries: 3\n reject_unknown_cluster: true\n \
         authorization { user: gw, password: pw, timeout: 3 }\n \
         gateways: [ {name: C2, url: \"nats://u:p@127.0.0.1:7444\"}, \
         {name: C3, urls: [\"nats://h1:7555\", \"h2:7556\"]} ]\n}",
    )
    .options;
    let g = o.gateway.expect("gateway");
    assert_eq!(
        (g.name.as_str(), g.host.as_str(), g.port),
        ("C1", "127.0.0.1", 7333)
    );
    assert_eq!(g.advertise.as_deref(), Some("10.0.0.1:7333"));
    assert_eq!((g.connect_retries, g.reject_unknown), (3, true));
    assert_eq!(g.username.as_deref(), Some("gw"));
    assert_eq!(g.password.as_deref(), Some("pw"));
    assert_eq!(g.auth_timeout, Duration::from_secs(3));
    assert_eq!(g.gateways.len(), 2);
    assert_eq!(g.gateways[0].name, "C2");
    assert_eq!(
        g.gateways[0].urls,
        vec!["nats://u:p@127.0.0.1:7444".to_string()]
    );
    assert_eq!(g.gateways[1].urls.len(), 2);
    let o = load("gateway { name: C1, host: 127.0.0.1, port: -1 }").options;
    assert_eq!(o.gateway.map(|g| g.port), Some(0));
    // Positioned errors.
    let e = err("gateway {\n name: C1\n gateways: [ {name: C2} ]\n}");
    assert_eq!(e.line, 3, "{e}");
    assert!(e.msg.contains("has no URL"), "{e}");
    let e = err("gateway {\n name: C1\n bogus: 1\n}");
    assert_eq!((e.line, e.col), (3, 2));
    let e = err("gateway {\n name: C1\n gateways: [ {name: C2, url: \"ftp://x:1\"} ]\n}");
    assert!(e.msg.contains("unsupported scheme"), "{e}");
    // Whole-file checks: a name, and the same name as the cluster.
    let e = err("gateway { port: 7222 }");
    assert_eq!(e.msg, "gateway has no name");
    let e = err("cluster { name: A }\ngateway { name: B }");
    assert_eq!(
        e.msg,
        "cluster name conflicts between cluster and gateway definitions"
    );
    load("cluster { name: A }\ngateway { name: A }");
}

#[test]
fn syslog_keys() {
    let o = load("syslog: true\nremote_syslog: \"udp://127.0.0.1:514\"").options;
    assert!(o.syslog);
    assert_eq!(o.remote_syslog.as_deref(), Some("udp://127.0.0.1:514"));
    assert!(!load("").options.syslog);
}

#[test]
fn gateway_tls_blocks() {
    // The files are loaded at read time: write a real certificate and key.
    let dir = std::env::temp_dir().join(format!("natsd-gwtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&c, ck.cert.pem()).expect("cert file");
    std::fs::write(&k, ck.signing_key.serialize_pem()).expect("key file");
    let (c, k) = (c.display().to_string(), k.display().to_string());
    let o = load(&format!(
        "gateway {{\n name: A\n tls {{ cert_file: \"{c}\", key_file: \"{k}\", ca_file: \"{c}\", verify: true, timeout: 3 }}\n \
         gateways: [ {{ name: B, url: \"nats://127.0.0.1:7223\", tls {{ cert_file: \"{c}\", key_file: \"{k}\", ca_file: \"{c}\" }} }}, {{ name: C, url: \"nats://127.0.0.1:7224\" }} ]\n}}",
    ))
    .options;
    let _ = std::fs::remove_dir_all(&dir);
    let g = o.gateway.expect("gateway");
    let t = g.tls.expect("gateway tls");
    assert_eq!(t.cert_file, std::path::PathBuf::from(&c));
    assert_eq!(t.ca_file, Some(std::path::PathBuf::from(&c)));
    assert!(t.verify);
    assert_eq!(t.timeout, std::time::Duration::from_secs(3));
    let b = g.gateways[0].tls.as_ref().expect("B's tls");
    assert_eq!(b.key_file, std::path::PathBuf::from(&k));
    assert!(g.gateways[1].tls.is_none());
    let e = err("gateway { name: A, tls { cert_file: x } }");
    assert!(e.msg.contains("missing 'cert_file' or 'key_file'"), "{e}");
    // nats-server 2.9.10: "users.conf:4:2: Gateway authorization does not allow multiple users".
    let e = err(
        "gateway {\n name: A\n listen: 127.0.0.1:7222\n authorization { users: [ {user: a, password: b} ] }\n}",
    );
    assert_eq!((e.line, e.col), (4, 2), "{e}");
    assert_eq!(e.msg, "Gateway authorization does not allow multiple users");
}

/// `cluster { compression }`: accepted and refused as nats-server 2.15.1 accepts and refuses
/// (its `-t` or its startup: natsd reports the startup errors at `-t` already), compared on
/// loopback case by case (docs/nats-server-behaviour.md, "Route compression").
#[test]
fn cluster_compression() {
    use crate::compress::CompressionMode::*;
    let ms = Duration::from_millis;
    let of = |c: &str| {
        load(&format!("cluster {{ port: -1, compression: {c} }}"))
            .options
            .cluster
            .unwrap_or_default()
            .compression
    };
    let fail = |c: &str| err(&format!("cluster {{ port: -1, compression: {c} }}")).msg;
    assert_eq!(
        load("cluster { port: -1 }")
            .options
            .cluster
            .unwrap_or_default()
            .compression
            .mode,
        Accept
    );
    for (c, mode) in [
        ("s2_fast", S2Fast),
        ("fast", S2Fast),
        ("on", S2Fast),
        ("ON", S2Fast),
        ("true", S2Fast),
        ("yes", S2Fast),
        ("\"Enabled\"", S2Fast),
        ("off", Off),
        ("no", Off),
        ("false", Off),
        ("\"disabled\"", Off),
        ("accept", Accept),
        ("s2_better", S2Better),
        ("best", S2Best),
        ("not_supported", NotSupported),
        ("\"not supported\"", NotSupported),
        ("{}", Accept),
        ("{ rtt_thresholds: [10ms, 5ms] }", Accept),
        ("{ mode: fast, rtt_thresholds: [10ms, 5ms] }", S2Fast),
        ("{ Mode: s2_best, THRESHOLDS: [1ms] }", S2Best),
    ] {
        assert_eq!(of(c).mode, mode, "{c}");
    }
    assert_eq!(of("s2_auto").rtt_thresholds, vec![ms(10), ms(50), ms(100)]);
    assert_eq!(
        of("{ mode: auto, rtt: [] }").rtt_thresholds,
        vec![ms(10), ms(50), ms(100)]
    );
    assert_eq!(
        of("{ mode: s2_auto, rtt_thresholds: [0s, 20ms, 30ms, 40ms, 0s] }").rtt_thresholds,
        vec![ms(0), ms(20), ms(30), ms(40)]
    );
    assert_eq!(
        of("{ mode: auto, rtts: [-5ms, 20ms] }").rtt_thresholds,
        vec![ms(0), ms(20)]
    );
    assert_eq!(
        of("{ mode: auto, rtt: [\"1.5s\", \"1h2m\"] }").rtt_thresholds,
        vec![ms(1500), Duration::from_secs(3720)]
    );
    // nats-server's lexer reads `1m` as a string only as an array's last item.
    assert_eq!(
        of("{ mode: auto, rtt: [1m] }").rtt_thresholds,
        vec![Duration::from_secs(60)]
    );
    assert!(fail("{ mode: auto, rtt: [1m, 2m] }").contains("expected a duration"));
    assert_eq!(
        fail("{ mode: auto, rtt: [1k] }"),
        "time: unknown unit \"k\" in duration"
    );
    for (c, msg) in [
        ("bogus", "unsupported compression mode \"bogus\""),
        ("s2_uncompressed", "unsupported compression mode \"s2_uncompressed\""),
        ("5", "field \"compression\" should be a boolean or a structure, got int64"),
        ("[]", "field \"compression\" should be a boolean or a structure, got []interface {}"),
        (
            "{ mode: s2_auto, rtt_thresholds: [10ms, 5ms] }",
            "RTT threshold values [10ms 5ms] should be in ascending order",
        ),
        (
            "{ mode: auto, rtt_thresholds: [1ms, 2ms, 3ms, 4ms, 5ms] }",
            "compression mode \"auto\" should have no more than 4 RTT thresholds: [1ms 2ms 3ms 4ms 5ms]",
        ),
        (
            "{ mode: auto, rtt_thresholds: [\"0s\", \"-1s\"] }",
            "compression mode \"auto\" requires at least one RTT threshold",
        ),
        ("{ mode: auto, rtt_thresholds: [10xs] }", "time: invalid duration \"10xs\""),
        ("{ mode: auto, foo: 1 }", "unknown field \"foo\""),
    ] {
        assert_eq!(fail(c), msg, "{c}");
    }
    assert!(fail("{ mode: 5 }").contains("expected a string"));
    assert!(fail("{ mode: on }").contains("expected a string"));
    assert!(fail("{ mode: s2_auto, rtt_thresholds: 10ms }").contains("expected an array"));
}

/// What the `config_parser` fuzz target checks (its first seed stopped it when syntax errors
/// gained the `parse` mark): a file that does not parse does not load, with the parser's
/// error marked as a syntax error of the server's config file.
#[test]
fn a_syntax_error_loads_as_the_parsers_error_marked_parse() {
    let text = "PORT = 4333\nNAME: 'srv'\n{\n  port: $PORT\n}\n";
    let parsed = conf::parse_str(text).expect_err("a syntax error");
    assert!(!parsed.parse);
    let loaded = err(text);
    assert_eq!(loaded, parsed.clone().parse_error());
    assert!(loaded.parse);
    assert_eq!((loaded.line, loaded.col), (3, 1));
}

#[test]
fn account_msg_trace_as_nats_server_215() {
    let conf = |v: &str| format!("accounts {{\n  A {{ msg_trace: {v} }}\n}}\n");
    let o = load(&conf(r#"{dest: "t.a", sampling: "25%"}"#)).options;
    let t = &o.account_msg_trace["A"];
    assert_eq!((t.dest.as_str(), t.sampling), ("t.a", 25));
    let o = load("accounts { A { trace_dest: \"t\" } }").options;
    assert_eq!(o.account_msg_trace["A"].sampling, 100);
    let l = load(&conf("{sampling: 50}"));
    assert!(l.options.account_msg_trace.is_empty());
    assert_eq!(
        l.warnings[0].msg,
        "Trace destination sampling ignored since no destination was set"
    );
    // Texts and positions (the key's) checked against nats-server 2.15.1 `-t`.
    for (v, msg, col) in [
        (r#"{dest: "t", sampling: 0}"#, "Ttrace destination sampling value 0 is invalid, needs to be [1..100]", 30),
        (r#"{dest: "t", sampling: "abc"}"#, "Invalid trace destination sampling value \"abc\"", 30),
        (r#""x.*""#, "Trace destination \"x.*\" is not valid", 7),
        (r#"{dest: "t", foo: 1}"#, "Unknown field \"foo\" parsing account message trace map/struct \"msg_trace\"", 30),
        ("12", "Expected account message trace \"msg_trace\" to be a string or a map/struct, got int64", 7),
        ("{dest: 5}", "Field \"dest\" should be a string, got int64", 19),
        (r#"{dest: "t", sampling: true}"#, "Trace destination sampling field \"sampling\" should be an integer or a percentage, got bool", 30),
    ] {
        let e = err(&conf(v));
        assert_eq!((e.msg.as_str(), e.line, e.col), (msg, 2, col), "{v}");
    }
}

#[test]
fn nkey_users() {
    const K: &str = "UCK5N7N66OBOINFXAYC2ACJQYFSOD4VYNU6APEJTAVFZB2SVHLKGEW7L";
    let o = load(&format!(
        "accounts {{ A {{ users [ {{nkey: {K}, permissions {{ publish: x }} }} ] }} }}\n\
         authorization {{ users [ {{user: b, password: b}} ] }}"
    ))
    .options;
    assert_eq!(o.nkeys.len(), 1);
    assert_eq!(o.nkeys[0].nkey, K);
    assert_eq!(o.nkeys[0].account.as_deref(), Some("A"));
    assert!(o.nkeys[0].permissions.is_some());
    assert_eq!(o.users.len(), 1);
    assert!(o.auth_required());
    // nats-server's texts for a bad key, a key with a name, and a key configured twice.
    let bad = "authorization { users [ {nkey: UABC} ] }";
    assert!(err(bad).msg.contains("Not a valid public nkey for a user"));
    let seed_not_public = "authorization { users [ {nkey: SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU} ] }";
    assert!(err(seed_not_public).msg.contains("Not a valid public nkey"));
    let named = format!("authorization {{ users [ {{nkey: {K}, user: a}} ] }}");
    assert!(err(&named)
        .msg
        .contains("Nkey users do not take usernames or passwords"));
    let twice = format!(
        "accounts {{ A {{ users [ {{nkey: {K}}} ] }} }}\nauthorization {{ users [ {{nkey: {K}}} ] }}"
    );
    assert!(err(&twice)
        .msg
        .contains(&format!("Duplicate nkey {K:?} detected")));
    let token = format!("authorization {{ token: t, users [ {{nkey: {K}}} ] }}");
    assert!(err(&token).msg.contains("Can not have a token"));
    // `no_auth_user` may name an nkey user.
    let o = load(&format!(
        "authorization {{ users [ {{nkey: {K}}} ] }}\nno_auth_user: {K}"
    ))
    .options;
    assert_eq!(o.no_auth_user.as_deref(), Some(K));
}

#[test]
fn leafnode_remote_connection_options() {
    let o = load(
        r#"leafnodes {
  dial_timeout: "3s"
  remotes [
    { url: "nats://h:1", dont_randomize: true, dial_timeout: 5, first_info_timeout: "1.5s",
      disabled: true, ignore_discovered_servers: true, hub: true }
    { urls: ["nats://h:2", "nats://h:3"] }
  ]
}"#,
    )
    .options;
    let l = o.leafnodes.expect("leafnodes");
    assert_eq!(l.dial_timeout, Some(Duration::from_secs(3)));
    let (a, b) = (&l.remotes[0], &l.remotes[1]);
    assert!(a.no_randomize && a.disabled && a.ignore_discovered && a.hub);
    assert!(!b.hub);
    assert_eq!(a.dial_timeout, Some(Duration::from_secs(5)));
    assert_eq!(a.first_info_timeout, Some(Duration::from_millis(1500)));
    assert!(!b.no_randomize && !b.disabled && !b.ignore_discovered);
    assert_eq!((b.dial_timeout, b.first_info_timeout), (None, None));
    let e = err(r#"leafnodes { remotes [ { url: "nats://h:1", disabled: "yes" } ] }"#);
    assert!(e.msg.contains("disabled"), "{e}");
}
