//! The config language and its mapping onto `Options`, black-box: files on disk (includes,
//! variables, units, durations, errors with file:line:col), realistic nats-server config files,
//! bad input (huge, binary, self-including, self-referring), and the binary's `-c` and `-t`.

mod common;

use common::binary::{run, write_conf as write, Proc};
use common::{free_port, DEADLINE};
use natsd::config::conf::{self, Kind};
use natsd::config::file;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A fresh directory under the system temp dir, unique per process and call.
fn tmp_dir(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "natsd-config-{}-{}-{name}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

fn load(path: &Path) -> natsd::Options {
    match file::load_with_warnings(path) {
        Ok(l) => l.options,
        Err(e) => panic!("load {}: {e}", path.display()),
    }
}

fn load_err(path: &Path) -> file::ConfigError {
    match file::load_with_warnings(path) {
        Ok(l) => panic!(
            "expected an error from {}, got {:?}",
            path.display(),
            l.options
        ),
        Err(e) => e,
    }
}

/// Asserts an error's file (by name), line, column and a piece of its message.
fn assert_at(e: &file::ConfigError, file: &str, line: u32, col: u32, msg: &str) {
    let name = e
        .file
        .as_ref()
        .and_then(|f| f.file_name())
        .map(|n| n.to_string_lossy().into_owned());
    assert_eq!(
        (name.as_deref(), e.line, e.col),
        (Some(file), line, col),
        "{e}"
    );
    assert!(e.msg.contains(msg), "{e:?} should mention {msg:?}");
    let shown = e.to_string();
    // Syntax errors in nats-server's words, the position after them.
    let at = if e.parse {
        format!("Parse error on line {line}: '")
    } else {
        format!("{file}:{line}:{col}: ")
    };
    assert!(shown.contains(&at), "{shown}");
    assert!(shown.contains(&format!("{file}:{line}:{col}")), "{shown}");
}

#[test]
fn every_syntax_form_from_a_file() {
    let d = tmp_dir("syntax");
    let p = write(
        &d,
        "all.conf",
        r#"
# hash comment
// slash comment
colon: 1
equals = 2
space 3
semi: 4; comma: 5,
"quoted key": "dq \"esc\" \t\x41"
'sq key': 'raw \n'
bare: nats://user:pass@127.0.0.1:4222
block: (
  any text: { [ "
)
map { a: 1, b { c: [1, 2, 3] } }
map2: {
  x = yes
  y: off
}
arr: [
  a, "b"   # comment inside
  'c'
  { d: 4 },
]
size: 2kib
float: 1.25
neg: -7
when: 2023-06-01T12:00:00Z
ip: 10.0.0.1
"#,
    );
    let m = conf::parse_file(&p).expect("parse");
    let get = |k: &str| m.get(k).map(|e| e.value.kind.clone());
    let int = |v| Kind::Integer {
        value: v,
        unit: None,
    };
    assert_eq!(get("colon"), Some(int(1)));
    assert_eq!(get("equals"), Some(int(2)));
    assert_eq!(get("space"), Some(int(3)));
    assert_eq!(get("semi"), Some(int(4)));
    assert_eq!(get("comma"), Some(int(5)));
    assert_eq!(
        get("quoted key"),
        Some(Kind::String("dq \"esc\" \tA".into()))
    );
    assert_eq!(get("sq key"), Some(Kind::String("raw \\n".into())));
    assert_eq!(
        get("bare"),
        Some(Kind::String("nats://user:pass@127.0.0.1:4222".into()))
    );
    assert_eq!(
        get("block"),
        Some(Kind::String("\n  any text: { [ \"\n".into()))
    );
    let Some(Kind::Map(map)) = get("map") else {
        panic!("map")
    };
    assert!(
        matches!(&map.get("b").map(|e| &e.value.kind), Some(Kind::Map(b)) if b.get("c").is_some())
    );
    let Some(Kind::Map(map2)) = get("map2") else {
        panic!("map2")
    };
    assert_eq!(
        map2.get("x").map(|e| &e.value.kind),
        Some(&Kind::Bool(true))
    );
    assert_eq!(
        map2.get("y").map(|e| &e.value.kind),
        Some(&Kind::Bool(false))
    );
    let Some(Kind::Array(arr)) = get("arr") else {
        panic!("arr")
    };
    assert_eq!(arr.len(), 4);
    assert_eq!(arr[2].kind, Kind::String("c".into()));
    assert_eq!((arr[2].pos.line, arr[2].pos.col), (21, 3));
    assert_eq!(
        get("size"),
        Some(Kind::Integer {
            value: 2048,
            unit: Some("kib".into())
        })
    );
    assert_eq!(get("float"), Some(Kind::Float(1.25)));
    assert_eq!(get("neg"), Some(int(-7)));
    assert_eq!(
        get("when"),
        Some(Kind::DateTime("2023-06-01T12:00:00Z".into()))
    );
    assert_eq!(get("ip"), Some(Kind::String("10.0.0.1".into())));
    // Every value knows its file.
    let e = m.get("colon").expect("colon");
    assert_eq!((e.key_pos.line, e.key_pos.col), (4, 1));
    assert_eq!(e.key_pos.file.as_deref(), Some(p.as_path()));
}

#[test]
fn includes_are_relative_nested_and_cycle_free() {
    let d = tmp_dir("include");
    write(
        &d,
        "sub/auth.conf",
        "include ../users/list.conf\nauthorization { users: $USERS }\n",
    );
    write(
        &d,
        "users/list.conf",
        "USERS = [ {user: a, password: a}, {user: b, password: b} ]\n",
    );
    write(&d, "sub/limits.conf", "max_payload: 2kb\n");
    let main = write(
        &d,
        "main.conf",
        "port: 4555\ninclude sub/auth.conf\ncluster {\n  include \"../cluster_name.conf\"\n}\ninclude 'sub/limits.conf'\n",
    );
    // `include` inside a block is relative to the including file, not the block.
    write(&d, "cluster_name.conf", "name: from_include\n");
    let main2 = write(
        &d,
        "main2.conf",
        "port: 4555\ninclude sub/auth.conf\ncluster {\n  include cluster_name.conf\n}\ninclude 'sub/limits.conf'\n",
    );
    let e = load_err(&main);
    assert_at(&e, "main.conf", 4, 11, "cannot include");
    let o = load(&main2);
    assert_eq!(o.port, 4555);
    assert_eq!(o.max_payload, 2048);
    assert_eq!(o.users.len(), 2);
    assert_eq!(
        o.cluster.and_then(|c| c.name).as_deref(),
        Some("from_include")
    );

    // A cycle: a -> b -> a, reported at the include that closes it.
    write(&d, "a.conf", "port: 1\ninclude b.conf\n");
    write(&d, "b.conf", "\n  include ./a.conf\n");
    let e = load_err(&d.join("a.conf"));
    assert_at(&e, "b.conf", 2, 11, "include cycle");
    // A file including itself.
    let s = write(&d, "self.conf", "include self.conf\n");
    let e = load_err(&s);
    assert_at(&e, "self.conf", 1, 9, "include cycle");
    // A missing file.
    let m = write(&d, "missing.conf", "port: 1\ninclude nope.conf\n");
    let e = load_err(&m);
    assert_at(&e, "missing.conf", 2, 9, "cannot include \"nope.conf\"");
    // Errors inside an included file name that file.
    write(&d, "broken.conf", "a {\n  b: \"x\n}\n");
    let m = write(&d, "includes_broken.conf", "include broken.conf\n");
    let e = load_err(&m);
    assert_at(&e, "broken.conf", 2, 6, "unterminated string");
}

#[test]
fn variables_scope_environment_and_bcrypt() {
    let d = tmp_dir("vars");
    std::env::set_var("NATSD_CONFIG_TEST_PORT", "4777");
    std::env::set_var("NATSD_CONFIG_TEST_PASS", "s3cret");
    let p = write(
        &d,
        "vars.conf",
        r#"
TIMEOUT = "3s"
user_pass = outer
authorization {
  user_pass = inner
  users = [
    { user: a, password: $user_pass }
    { user: b, password: $NATSD_CONFIG_TEST_PASS }
    { user: c, password: $2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG }
  ]
  timeout: $TIMEOUT
}
port: $NATSD_CONFIG_TEST_PORT
server_name: $user_pass
"#,
    );
    let m = conf::parse_file(&p).expect("parse");
    // The inner scope's definition wins inside the block; the outer one outside it.
    assert_eq!(
        m.get("server_name").map(|e| &e.value.kind),
        Some(&Kind::String("outer".into()))
    );
    let o = load(&p);
    assert_eq!(o.port, 4777);
    assert_eq!(o.server_name.as_deref(), Some("outer"));
    assert_eq!(o.auth_timeout, Duration::from_secs(3));
    let pw: Vec<&str> = o.users.iter().map(|u| u.password.as_str()).collect();
    assert_eq!(pw[0], "inner");
    assert_eq!(pw[1], "s3cret");
    assert!(pw[2].starts_with("$2a$11$W2zko"));
    // A variable nobody refers to is an unknown field of its block (as in nats-server 2.9).
    let p = write(
        &d,
        "unused.conf",
        "authorization {\n  user_pass = inner\n  users = [ {user: a, password: b} ]\n}\n",
    );
    assert_at(
        &load_err(&p),
        "unused.conf",
        2,
        3,
        "unknown field \"user_pass\"",
    );

    // Undefined: an error at the reference.
    let p = write(
        &d,
        "undef.conf",
        "port: 4222\nserver_name: $NATSD_CONFIG_TEST_UNDEFINED\n",
    );
    let e = load_err(&p);
    assert_at(&e, "undef.conf", 2, 14, "can not be found");
    // Refers to itself: not defined yet, so not found; through the environment: refused.
    let p = write(&d, "selfvar.conf", "natsd_cfg_x = $natsd_cfg_x\n");
    let e = load_err(&p);
    assert_at(&e, "selfvar.conf", 1, 15, "can not be found");
    std::env::set_var("NATSD_CONFIG_TEST_LOOP", "$NATSD_CONFIG_TEST_LOOP");
    let p = write(&d, "envloop.conf", "server_name: $NATSD_CONFIG_TEST_LOOP\n");
    let e = load_err(&p);
    assert_at(&e, "envloop.conf", 1, 14, "refers to itself");
}

#[test]
fn units_and_durations() {
    let d = tmp_dir("units");
    let p = write(
        &d,
        "u.conf",
        "max_payload: 1MB\nmax_pending: 1gib\nmax_control_line: 4k\nping_interval: \"100ms\"\nwrite_deadline: 1m30s\n",
    );
    let o = load(&p);
    assert_eq!(o.max_payload, 1 << 20);
    assert_eq!(o.max_pending, 1 << 30);
    assert_eq!(o.max_control_line, 4000);
    assert_eq!(o.ping_interval, Duration::from_millis(100));
    assert_eq!(o.write_deadline, Duration::from_secs(90));
    // A bare integer is seconds, with a warning (an error for -t, as nats-server).
    let p = write(&d, "w.conf", "ping_interval: 30\n");
    let l = file::load_with_warnings(&p).expect("load");
    assert_eq!(l.options.ping_interval, Duration::from_secs(30));
    assert_eq!(l.warnings.len(), 1);
    let e = file::check(&p).expect_err("-t refuses warnings");
    assert_at(&e, "w.conf", 1, 16, "should be converted to a duration");
    // Bad unit, bad duration.
    let p = write(&d, "bu.conf", "port: 4222\nmax_payload: 10kbb\n");
    assert_at(&load_err(&p), "bu.conf", 2, 14, "unknown unit \"kbb\"");
    let p = write(&d, "bd.conf", "write_deadline: \"10 parsecs\"\n");
    assert_at(&load_err(&p), "bd.conf", 1, 17, "is not a duration");
}

#[test]
fn malformed_files_report_positions() {
    let d = tmp_dir("errors");
    let cases: &[(&str, &str, u32, u32, &str)] = &[
        (
            "unterminated.conf",
            "port: 4222\nserver_name: \"abc\n",
            2,
            14,
            "unterminated string",
        ),
        ("badunit.conf", "max_payload: 5zb\n", 1, 14, "unknown unit"),
        (
            "unknownvar.conf",
            "\n\nport: $NOPE_NATSD_X\n",
            3,
            7,
            "can not be found",
        ),
        (
            "unclosed.conf",
            "cluster {\n  port: 1\n",
            3,
            1,
            "not closed with '}'",
        ),
        (
            "twovalues.conf",
            "port: 4222 4223\n",
            1,
            12,
            "after the value of \"port\"",
        ),
        ("badescape.conf", "a: \"\\q\"\n", 1, 5, "invalid escape"),
        (
            "unknown.conf",
            "port: 1\nnot_a_key: 2\n",
            2,
            1,
            "unknown field \"not_a_key\"",
        ),
        (
            "gateway.conf",
            "gateway {\n name: A\n tls {\n  pinned_certs: [ \"abc\" ]\n }\n}\n",
            4,
            19,
            "'pinned_certs' key abc does not look like hex-encoded sha256",
        ),
    ];
    for (name, text, line, col, msg) in cases {
        let p = write(&d, name, text);
        assert_at(&load_err(&p), name, *line, *col, msg);
    }
    // The file's own map is the first level, so the 128th '[' (column 3 + 128) is one too many.
    let p = write(&d, "nested.conf", &format!("a: {}\n", "[".repeat(10_000)));
    assert_at(&load_err(&p), "nested.conf", 1, 131, "nested too deeply");
}

#[test]
fn bad_input_is_an_error_not_a_hang_or_panic() {
    let d = tmp_dir("bad");
    // Binary garbage.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let garbage: Vec<u8> = (0..64 * 1024)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect();
    let p = d.join("garbage.conf");
    std::fs::write(&p, &garbage).expect("write");
    let e = load_err(&p);
    assert!(e.line >= 1, "{e}");
    // Valid UTF-8 garbage.
    let text: String = garbage.iter().map(|b| char::from(b' ' + b % 95)).collect();
    let p = write(&d, "ascii-garbage.conf", &text);
    let _ = file::load_with_warnings(&p).expect_err("garbage is not a config");
    // A big file (~100 MB): one comment line and a long array; a positioned error, no hang.
    let mut big = String::with_capacity(100 << 20);
    big.push_str("# ");
    big.push_str(&"x".repeat(60 << 20));
    big.push_str("\nbig_var = [");
    for i in 0..4_000_000u32 {
        big.push_str(&i.to_string());
        big.push_str(", ");
    }
    big.push_str("]\nport: 4888\n");
    let p = write(&d, "big.conf", &big);
    drop(big);
    let e = load_err(&p);
    assert_at(&e, "big.conf", 2, 1, "unknown field \"big_var\"");
    let _ = std::fs::remove_file(&p);
}

/// A realistic file in the style of nats-server's documentation.
const REALISTIC: &str = r#"
# Client port of 4222 on all interfaces
listen: 127.0.0.1:4242
server_name: "n1-c1"

# HTTP monitoring port
http: 127.0.0.1:8282
http_base_path: /nats

debug:   false
trace:   false
logtime: true
log_file: "/tmp/natsd-config-test.log"
pid_file: "/tmp/natsd-config-test.pid"

# Some system overides
max_connections: 100
max_payload: 65536
max_pending: 64MB
max_control_line: 2kb
max_subscriptions: 1000
ping_interval: "20s"
ping_max: 3
write_deadline: "5s"
max_closed_clients: 500

# Define the permissions for a user
REQUESTOR = {
  publish  = ["req.foo", "req.bar"]
  subscribe = "_INBOX.>"
}
RESPONDER = {
  subscribe = ["req.foo", "req.bar"]
  publish = "_INBOX.>"
}
DEFAULT_PERMISSIONS = {
  publish = "SANDBOX.*"
  subscribe = ["PUBLIC.>", "_INBOX.>"]
}

authorization {
  timeout: 2.5
  PASS: abcdefghijklmnopqrstuvwxyz0123456789
  users = [
    {user: joe,     password: foo,   permissions: $REQUESTOR}
    {user: alice,   password: bar,   permissions: $RESPONDER}
    {user: bob,     password: $PASS, permissions: $DEFAULT_PERMISSIONS}
    {user: deny_me, password: x, permissions: { publish: { deny: ">" }, subscribe: { allow: "a.>", deny: ["a.b", "a.c"] } } }
  ]
}

accounts: {
  TEAM_A: {
    users: [
      {user: a1, password: a1}
      {user: a2, password: a2, permissions: { publish: "a.>" }}
    ]
  }
  TEAM_B: {
    users: [ {user: b1, password: b1} ]
  }
}

no_auth_user: joe

cluster {
  name: C1
  listen: 127.0.0.1:6242
  authorization {
    user: route_user
    password: T0pS3cr3T
    timeout: 0.75
  }
  routes = [
    nats-route://route_user:T0pS3cr3T@127.0.0.1:6243
    nats-route://route_user:T0pS3cr3T@127.0.0.1:6244
  ]
  cluster_advertise: 127.0.0.1:6242
  connect_retries: 10
}
"#;

#[test]
fn a_realistic_config_maps_onto_options() {
    let d = tmp_dir("realistic");
    let p = write(&d, "server.conf", REALISTIC);
    let o = load(&p);
    assert_eq!((o.host.as_str(), o.port), ("127.0.0.1", 4242));
    assert_eq!(o.server_name.as_deref(), Some("n1-c1"));
    assert_eq!(
        (o.http_host.as_deref(), o.http_port),
        (Some("127.0.0.1"), Some(8282))
    );
    assert_eq!(o.http_base_path.as_deref(), Some("/nats"));
    assert!(!o.debug && !o.trace && o.logtime);
    assert_eq!(
        o.log_file.as_deref(),
        Some(Path::new("/tmp/natsd-config-test.log"))
    );
    assert_eq!(
        o.pid_file.as_deref(),
        Some(Path::new("/tmp/natsd-config-test.pid"))
    );
    assert_eq!(o.max_connections, 100);
    assert_eq!(o.max_payload, 65536);
    assert_eq!(o.max_pending, 64 << 20);
    assert_eq!(o.max_control_line, 2048);
    assert_eq!(o.max_subscriptions, 1000);
    assert_eq!(o.ping_interval, Duration::from_secs(20));
    assert_eq!(o.ping_max, 3);
    assert_eq!(o.write_deadline, Duration::from_secs(5));
    assert_eq!(o.max_closed_clients, 500);
    assert_eq!(o.auth_timeout, Duration::from_millis(2500));
    assert_eq!(o.no_auth_user.as_deref(), Some("joe"));

    let names: Vec<&str> = o.users.iter().map(|u| u.username.as_str()).collect();
    assert_eq!(names, ["joe", "alice", "bob", "deny_me", "a1", "a2", "b1"]);
    let joe = &o.users[0];
    let perms = joe.permissions.clone().unwrap_or_default();
    assert_eq!(
        perms.publish.map(|p| p.allow),
        Some(vec!["req.foo".to_string(), "req.bar".to_string()])
    );
    assert_eq!(
        perms.subscribe.map(|p| p.allow),
        Some(vec!["_INBOX.>".to_string()])
    );
    assert_eq!(joe.account, None);
    let deny = o.users[3].permissions.clone().unwrap_or_default();
    let sub = deny.subscribe.unwrap_or_default();
    assert_eq!(sub.allow, vec!["a.>".to_string()]);
    assert_eq!(sub.deny, vec!["a.b".to_string(), "a.c".to_string()]);
    assert_eq!(deny.publish.map(|p| p.deny), Some(vec![">".to_string()]));
    assert_eq!(o.users[2].password, "abcdefghijklmnopqrstuvwxyz0123456789");
    assert_eq!(o.users[4].account.as_deref(), Some("TEAM_A"));
    assert_eq!(o.users[6].account.as_deref(), Some("TEAM_B"));
    assert_eq!(o.accounts, ["TEAM_A", "TEAM_B"]);

    let c = o.cluster.expect("cluster");
    assert_eq!(c.name.as_deref(), Some("C1"));
    assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 6242));
    assert_eq!(c.username.as_deref(), Some("route_user"));
    assert_eq!(c.password.as_deref(), Some("T0pS3cr3T"));
    assert_eq!(c.auth_timeout, Duration::from_millis(750));
    assert_eq!(c.routes.len(), 2);
    assert_eq!(
        c.routes[1],
        "nats-route://route_user:T0pS3cr3T@127.0.0.1:6244"
    );
    assert_eq!(c.advertise.as_deref(), Some("127.0.0.1:6242"));
    assert_eq!(c.connect_retries, 10);
}

// ---- the binary ----

#[test]
fn dash_t_checks_a_file() {
    let d = tmp_dir("dash-t");
    let good = write(
        &d,
        "good.conf",
        "port: 4222\nauthorization { user: a, password: b }\n",
    );
    let good_s = good.to_string_lossy().into_owned();
    let out = run(&["-t", "-c", &good_s]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("natsd: configuration file {good_s} is valid")),
        "{err}"
    );
    // Both spellings.
    let out = run(&[&format!("--config={good_s}"), "--t"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let bad = write(
        &d,
        "bad.conf",
        "port: 4222\n\nauthorization {\n    user = \"a\n}\n",
    );
    let out = run(&["-t", "-c", &bad.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Parse error on line 4: 'unterminated string"),
        "{err}"
    );
    assert!(err.contains("bad.conf:4:12)"), "{err}");

    let out = run(&["-t"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("must specify [-c, --config]"),
        "{:?}",
        out
    );
    let out = run(&["-c", &d.join("nope.conf").to_string_lossy()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read config file"));
}

/// A running natsd, killed on drop, once it is ready.
fn ready(args: &[&str]) -> Proc {
    Proc::ready(args, Stdio::null(), "Server is ready")
}

/// Connect, read INFO, send CONNECT and PING; returns INFO and the reply line.
fn hello(addr: SocketAddr, connect: &str) -> (serde_json::Value, String) {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).ok();
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let mut line = String::new();
    r.read_line(&mut line).expect("INFO");
    let info: serde_json::Value = serde_json::from_str(
        line.strip_prefix("INFO ")
            .unwrap_or_else(|| panic!("{line:?}"))
            .trim(),
    )
    .expect("INFO JSON");
    let mut w = s;
    std::io::Write::write_all(&mut w, format!("CONNECT {connect}\r\nPING\r\n").as_bytes())
        .expect("send");
    let mut reply = String::new();
    r.read_line(&mut reply).expect("reply");
    if reply.starts_with("-ERR") {
        // Read to the close so the server's side is done.
        let _ = r.read_to_string(&mut String::new());
    }
    (info, reply)
}

#[test]
fn a_server_started_with_dash_c_uses_the_file_and_flags_override_it() {
    let d = tmp_dir("dash-c");
    let port = free_port();
    let conf = write(
        &d,
        "server.conf",
        &format!(
            "listen: 127.0.0.1:{port}\nserver_name: from_file\nauthorization {{\n  users: [ {{user: u, password: p}} ]\n}}\n"
        ),
    );
    let conf_s = conf.to_string_lossy().into_owned();
    let n = ready(&["-c", &conf_s]);
    let addr = n.client_addr();
    assert_eq!(addr.port(), port);
    let (info, reply) = hello(addr, r#"{"user":"u","pass":"p","verbose":false}"#);
    assert_eq!(info["auth_required"], true);
    assert_eq!(info["server_name"], "from_file");
    assert_eq!(reply.trim_end(), "PONG");
    let (_, reply) = hello(addr, r#"{"user":"u","pass":"wrong","verbose":false}"#);
    assert!(
        reply.starts_with("-ERR 'Authorization Violation'"),
        "{reply}"
    );
    drop(n);

    // Flags win over the file, whichever order they come in.
    let other = free_port();
    let n = ready(&[
        "-p",
        &other.to_string(),
        "--config",
        &conf_s,
        "-n",
        "from_flag",
    ]);
    let addr = n.client_addr();
    assert_eq!(addr.port(), other);
    let (info, _) = hello(addr, r#"{"user":"u","pass":"p","verbose":false}"#);
    assert_eq!(info["server_name"], "from_flag");
    assert_eq!(info["auth_required"], true);
}
