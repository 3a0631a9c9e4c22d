//! Real-world config files, round trip: each is written to disk, loaded into `Options` with
//! its values checked, and run through `natsd -t -c FILE` for the exit code — the official
//! Helm chart's rendered `nats.conf` (JSON; with JetStream, which natsd refuses by name, and
//! without), accounts with users and permissions, a cluster with routes and authorization,
//! includes with `$VARS`. Also: the ports file (`--ports_file_dir`, `ports_file_dir`), `/varz`
//! `tags` from `server_tags`, and the binary run through a symlink named `nats-server`.

mod common;

use common::binary::{write_conf as write, Proc, BIN};
use common::DEADLINE;
use natsd::config::file::{self, Loaded};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Once;
use std::time::Duration;

/// A fresh directory under the target dir's tmp (unique per test and process).
fn tmp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("config-real-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create tmp dir");
    d
}

/// The environment the chart's pod gives the server (`SERVER_NAME=$(POD_NAME)`). Set once,
/// before any test of this binary reads it, and never changed.
fn pod_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::env::set_var("SERVER_NAME", "nats-0");
        std::env::set_var("TOKEN", "s3cr3t-token");
    });
}

fn load(p: &Path) -> Loaded {
    match file::load_with_warnings(p) {
        Ok(l) => {
            assert!(l.warnings.is_empty(), "{}: {:?}", p.display(), l.warnings);
            l
        }
        Err(e) => panic!("{}: {e}", p.display()),
    }
}

/// `natsd -t -c FILE`: (exit code, stderr).
fn check(p: &Path) -> (i32, String) {
    let out = Command::new(BIN)
        .args(["-t", "-c"])
        .arg(p)
        .env("SERVER_NAME", "nats-0")
        .env("TOKEN", "s3cr3t-token")
        .stdin(Stdio::null())
        .output()
        .expect("run natsd -t");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_ok(p: &Path) {
    let (code, err) = check(p);
    assert_eq!(code, 0, "natsd -t -c {}: {err}", p.display());
    assert!(
        err.contains(&format!("configuration file {} is valid", p.display())),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------
// The official chart (nats-io/k8s `helm/charts/nats`), rendered with `helm template`: the
// config map holds the map of `files/config/*.yaml` as pretty JSON with sorted keys; values
// written `<< X >>` in the chart come out unquoted (`$SERVER_NAME`, `10Gi`).

/// `config.cluster.enabled=true` (3 replicas) and `config.jetstream.enabled=true`.
const CHART_JS: &str = r#"{
  "cluster": {
    "name": "nats",
    "no_advertise": true,
    "port": 6222,
    "routes": [
      "nats://nats-0.nats-headless:6222",
      "nats://nats-1.nats-headless:6222",
      "nats://nats-2.nats-headless:6222"
    ]
  },
  "http_port": 8222,
  "jetstream": {
    "max_file_store": 10Gi,
    "max_memory_store": 0,
    "store_dir": "/data"
  },
  "lame_duck_duration": "30s",
  "lame_duck_grace_period": "10s",
  "pid_file": "/var/run/nats/nats.pid",
  "port": 4222,
  "server_name": $SERVER_NAME
}
"#;

/// The same without JetStream, and with `config.cluster.routeURLs.{user,password}`: the
/// credentials go into every route URL and a matching cluster `authorization`.
const CHART_CLUSTER: &str = r#"{
  "cluster": {
    "authorization": {
      "password": "routepw",
      "user": "router"
    },
    "name": "nats",
    "no_advertise": true,
    "port": 6222,
    "routes": [
      "nats://router:routepw@nats-0.nats-headless:6222",
      "nats://router:routepw@nats-1.nats-headless:6222",
      "nats://router:routepw@nats-2.nats-headless:6222"
    ]
  },
  "http_port": 8222,
  "lame_duck_duration": "30s",
  "lame_duck_grace_period": "10s",
  "pid_file": "/var/run/nats/nats.pid",
  "port": 4222,
  "server_name": $SERVER_NAME
}
"#;

/// The chart's defaults (one pod, monitoring on) plus client auth the way its README shows:
/// `config.merge.authorization.token: << $TOKEN >>` with `TOKEN` from a Secret in the
/// container's environment.
const CHART_DEFAULT: &str = r#"{
  "authorization": {
    "token": $TOKEN
  },
  "http_port": 8222,
  "lame_duck_duration": "30s",
  "lame_duck_grace_period": "10s",
  "pid_file": "/var/run/nats/nats.pid",
  "port": 4222,
  "server_name": $SERVER_NAME
}
"#;

#[test]
fn helm_chart_with_clustered_jetstream_loads() {
    pod_env();
    let dir = tmp_dir("chart-js");
    let p = write(&dir, "nats.conf", CHART_JS);
    let o = file::load_with_warnings(&p)
        .expect("clustered JetStream")
        .options;
    assert!(o.jetstream.is_some() && o.cluster.is_some());
    check_ok(&p);
    // Without a server name there is no JetStream cluster (nats-server's words).
    let p = write(
        &dir,
        "noname.conf",
        &CHART_JS.replace("\"server_name\": $SERVER_NAME", "\"port\": 4222"),
    );
    let e = file::load_with_warnings(&p).expect_err("no server_name");
    assert!(
        e.msg
            .contains("jetstream cluster requires `server_name` to be set"),
        "{e}"
    );
}

#[test]
fn helm_chart_cluster_without_jetstream_loads() {
    pod_env();
    let dir = tmp_dir("chart-cluster");
    let p = write(&dir, "nats.conf", CHART_CLUSTER);
    let o = load(&p).options;
    assert_eq!(o.server_name.as_deref(), Some("nats-0"));
    assert_eq!((o.host.as_str(), o.port), ("0.0.0.0", 4222));
    assert_eq!(o.http_port, Some(8222));
    assert_eq!(
        o.pid_file.as_deref(),
        Some(Path::new("/var/run/nats/nats.pid"))
    );
    assert_eq!(o.lame_duck_duration, Duration::from_secs(30));
    assert_eq!(o.lame_duck_grace_period, Duration::from_secs(10));
    assert!(!o.auth_required());
    let c = o.cluster.expect("cluster");
    assert_eq!(c.name.as_deref(), Some("nats"));
    assert_eq!((c.host.as_str(), c.port), ("0.0.0.0", 6222));
    assert!(c.no_advertise);
    assert_eq!(
        c.routes,
        (0..3)
            .map(|i| format!("nats://router:routepw@nats-{i}.nats-headless:6222"))
            .collect::<Vec<_>>()
    );
    assert_eq!(c.username.as_deref(), Some("router"));
    assert_eq!(c.password.as_deref(), Some("routepw"));
    check_ok(&p);
}

#[test]
fn helm_chart_defaults_with_a_token_load() {
    pod_env();
    let dir = tmp_dir("chart-default");
    let p = write(&dir, "nats.conf", CHART_DEFAULT);
    let o = load(&p).options;
    assert_eq!(o.server_name.as_deref(), Some("nats-0"));
    assert_eq!(o.auth_token.as_deref(), Some("s3cr3t-token"));
    assert!(o.auth_required());
    assert!(o.cluster.is_none());
    assert_eq!(o.http_port, Some(8222));
    check_ok(&p);
}

// ---------------------------------------------------------------------------------------

const ACCOUNTS: &str = r#"
# A hub with one account per team, as users write them by hand.
server_name: hub-1
listen: 0.0.0.0:4333
http: 127.0.0.1:8333
server_tags: ["region:eu-west", "AZ:1", "az:1"]
ports_file_dir: /tmp
max_connections: 10k
max_subscriptions: 1000
max_payload: 2MB
max_pending: 64MB

authorization {
  timeout: 5
}

accounts: {
  ORDERS: {
    users: [
      {
        user: order-svc
        password: $2a$11$W2zko751KUvVy59mUTWmpOdWjpEm5qhcCZRd05GjI/sSOT.xtiHyG
        permissions: {
          publish: { allow: ["orders.>", "_INBOX.>"] }
          subscribe: { allow: ["orders.>", "_INBOX.>"], deny: ["orders.secret.>"] }
        }
      }
      { user: order-ro, password: ro, permissions: { publish: { deny: ">" }, subscribe: "orders.>" } }
    ]
  }
  BILLING {
    default_permissions = {
      publish = "billing.>"
      subscribe = ["billing.>", "_INBOX.>"]
    }
    users = [
      {user: billing, pass: "b1ll1ng"}
      {user: auditor, pass: "aud", permissions: {subscribe: ">"}}
    ]
  }
}

no_auth_user: order-ro
"#;

#[test]
fn accounts_users_and_permissions() {
    let dir = tmp_dir("accounts");
    let p = write(&dir, "accounts.conf", ACCOUNTS);
    let o = load(&p).options;
    assert_eq!(o.server_name.as_deref(), Some("hub-1"));
    assert_eq!((o.host.as_str(), o.port), ("0.0.0.0", 4333));
    assert_eq!(
        (o.http_host.as_deref(), o.http_port),
        (Some("127.0.0.1"), Some(8333))
    );
    assert_eq!(o.server_tags, vec!["region:eu-west", "az:1"]);
    assert_eq!(o.ports_file_dir.as_deref(), Some(Path::new("/tmp")));
    assert_eq!(o.max_connections, 10_000);
    assert_eq!(o.max_subscriptions, 1000);
    assert_eq!(o.max_payload, 2 << 20);
    assert_eq!(o.max_pending, 64 << 20);
    assert_eq!(o.auth_timeout, Duration::from_secs(5));
    assert_eq!(o.accounts, vec!["ORDERS", "BILLING"]);
    let names: Vec<(&str, Option<&str>)> = o
        .users
        .iter()
        .map(|u| (u.username.as_str(), u.account.as_deref()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("order-svc", Some("ORDERS")),
            ("order-ro", Some("ORDERS")),
            ("billing", Some("BILLING")),
            ("auditor", Some("BILLING")),
        ]
    );
    assert!(o.users[0].password.starts_with("$2a$11$"));
    let perms = |i: usize| o.users[i].permissions.clone().expect("permissions");
    let svc = perms(0);
    let sub = svc.subscribe.expect("subscribe");
    assert_eq!(sub.allow, vec!["orders.>", "_INBOX.>"]);
    assert_eq!(sub.deny, vec!["orders.secret.>"]);
    assert_eq!(
        svc.publish.expect("publish").allow,
        vec!["orders.>", "_INBOX.>"]
    );
    let ro = perms(1);
    assert_eq!(ro.publish.expect("publish").deny, vec![">"]);
    assert_eq!(ro.subscribe.expect("subscribe").allow, vec!["orders.>"]);
    // Default permissions go to the users without their own.
    let billing = perms(2);
    assert_eq!(billing.publish.expect("publish").allow, vec!["billing.>"]);
    assert_eq!(
        billing.subscribe.expect("subscribe").allow,
        vec!["billing.>", "_INBOX.>"]
    );
    let auditor = perms(3);
    assert!(auditor.publish.is_none());
    assert_eq!(auditor.subscribe.expect("subscribe").allow, vec![">"]);
    assert_eq!(o.no_auth_user.as_deref(), Some("order-ro"));
    assert!(o.auth_required());
    check_ok(&p);

    // The same file with an export and an import of it: accepted, as nats-server does.
    let with_exports = ACCOUNTS.replace(
        "  BILLING {\n",
        "  BILLING {\n    exports: [ {stream: \"billing.events\"} ]\n",
    );
    let p = write(&dir, "exports.conf", &with_exports);
    check_ok(&p);
}

// ---------------------------------------------------------------------------------------

const CLUSTER: &str = r#"
server_name: n1
port: 4222
http_port: 8222

authorization {
  user: client
  password: clientpw
  timeout: 3
}

cluster {
  name: prod
  listen: 0.0.0.0:6222
  advertise: "10.0.0.1:6222"
  authorization {
    user: route_user
    password: T0pS3cr3t
    timeout: 2
  }
  routes = [
    nats-route://route_user:T0pS3cr3t@10.0.0.2:6222
    nats-route://route_user:T0pS3cr3t@10.0.0.3:6222
    nats://n4.example.internal:6222
  ]
  connect_retries: 10
}

ping_interval: "1m"
ping_max: 3
write_deadline: "5s"
lame_duck_duration: "1m"
lame_duck_grace_period: "15s"
debug: false
trace: false
logtime: true
"#;

#[test]
fn cluster_with_routes_and_authorization() {
    let dir = tmp_dir("cluster");
    let p = write(&dir, "cluster.conf", CLUSTER);
    let o = load(&p).options;
    assert_eq!(o.server_name.as_deref(), Some("n1"));
    assert_eq!(
        (o.username.as_deref(), o.password.as_deref()),
        (Some("client"), Some("clientpw"))
    );
    assert_eq!(o.auth_timeout, Duration::from_secs(3));
    assert_eq!(o.ping_interval, Duration::from_secs(60));
    assert_eq!(o.ping_max, 3);
    assert_eq!(o.write_deadline, Duration::from_secs(5));
    assert_eq!(o.lame_duck_duration, Duration::from_secs(60));
    assert_eq!(o.lame_duck_grace_period, Duration::from_secs(15));
    assert!(!o.debug && !o.trace && o.logtime);
    let c = o.cluster.expect("cluster");
    assert_eq!(c.name.as_deref(), Some("prod"));
    assert_eq!((c.host.as_str(), c.port), ("0.0.0.0", 6222));
    assert_eq!(c.advertise.as_deref(), Some("10.0.0.1:6222"));
    assert!(!c.no_advertise);
    assert_eq!(
        (c.username.as_deref(), c.password.as_deref()),
        (Some("route_user"), Some("T0pS3cr3t"))
    );
    assert_eq!(c.auth_timeout, Duration::from_secs(2));
    assert_eq!(c.routes.len(), 3);
    assert_eq!(
        c.routes[0],
        "nats-route://route_user:T0pS3cr3t@10.0.0.2:6222"
    );
    assert_eq!(c.routes[2], "nats://n4.example.internal:6222");
    assert_eq!(c.connect_retries, 10);
    assert_eq!((c.ping_interval, c.ping_max), (None, None));
    check_ok(&p);

    // A route URL that is not one is an error at its line.
    let bad = CLUSTER.replace("nats://n4.example.internal:6222", "http://x:y:z");
    let p = write(&dir, "bad.conf", &bad);
    let (code, err) = check(&p);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("routes"), "{err}");
}

// ---------------------------------------------------------------------------------------

#[test]
fn includes_and_variables() {
    static ENV: Once = Once::new();
    ENV.call_once(|| std::env::set_var("NATSD_REAL_EDGE_NAME", "edge-7"));
    let dir = tmp_dir("includes");
    let main = write(
        &dir,
        "main.conf",
        r#"
# Variables first, then the options that use them.
CLIENT_PORT = 4555
PAYLOAD: 512kb
CLUSTER_NAME: "edge"

server_name: $NATSD_REAL_EDGE_NAME
port: $CLIENT_PORT
max_payload: $PAYLOAD
include ./auth.conf

cluster {
  name: $CLUSTER_NAME
  ROUTE_PORT = 6555
  port: $ROUTE_PORT
  include "cluster/routes.conf"
}
"#,
    );
    write(
        &dir,
        "auth.conf",
        r#"
# Included files do not see the includer's variables: this one has its own.
APP_PASS = "app-secret"
authorization {
  users = [
    { user: app, password: $APP_PASS }
    { user: admin, password: $APP_PASS, permissions: { publish: ">", subscribe: ">" } }
  ]
}
"#,
    );
    write(
        &dir,
        "cluster/routes.conf",
        "routes: [ nats://edge-a:6555, nats://edge-b:6555 ]\nno_advertise: on\n",
    );
    let o = load(&main).options;
    assert_eq!(o.server_name.as_deref(), Some("edge-7"));
    assert_eq!(o.port, 4555);
    assert_eq!(o.max_payload, 512 * 1024);
    let users: Vec<(&str, &str)> = o
        .users
        .iter()
        .map(|u| (u.username.as_str(), u.password.as_str()))
        .collect();
    assert_eq!(users, vec![("app", "app-secret"), ("admin", "app-secret")]);
    let c = o.cluster.expect("cluster");
    assert_eq!(c.name.as_deref(), Some("edge"));
    assert_eq!(c.port, 6555);
    assert_eq!(c.routes, vec!["nats://edge-a:6555", "nats://edge-b:6555"]);
    assert!(c.no_advertise);
    check_ok(&main);

    // A variable the included file does not define is an error in that file, at the `$`.
    let inc = write(
        &dir,
        "auth.conf",
        "authorization { user: a, password: $CLIENT_PORT }\n",
    );
    let e = file::load_with_warnings(&main).expect_err("undefined variable");
    assert!(e.msg.contains("CLIENT_PORT"), "{e}");
    let (code, err) = check(&main);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("auth.conf:1:36)"), "{err} ({})", inc.display());
}

// ---------------------------------------------------------------------------------------
// The binary: a `nats-server` symlink, the ports file, `/varz` tags.

/// A running binary, killed on drop; its stderr lines arrive on `lines`.
fn spawn(exe: &Path, args: &[&str]) -> Proc {
    Proc::spawn(exe, args, Stdio::piped())
}

/// SIGINT, then the exit status (within the deadline).
fn interrupt_and_wait(n: &mut Proc) -> ExitStatus {
    n.signal("-INT");
    n.wait_exit(DEADLINE, Duration::ZERO)
}

fn read_ports(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("ports file {}: {e}", path.display()));
    assert!(
        !text.ends_with('\n'),
        "nats-server writes no new line: {text:?}"
    );
    serde_json::from_str(&text).expect("ports JSON")
}

fn url_list(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key:?} in {v}"))
        .iter()
        .map(|u| u.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn a_symlink_named_nats_server_runs_the_server() {
    let dir = tmp_dir("symlink");
    let link = dir.join("nats-server");
    std::os::unix::fs::symlink(BIN, &link).expect("symlink");

    let out = Command::new(&link).arg("-v").output().expect("run -v");
    assert!(out.status.success());
    let v = String::from_utf8_lossy(&out.stdout);
    assert!(v.contains("v2.9.10") && v.lines().count() == 1, "{v:?}");

    let ports_dir = dir.join("ports");
    std::fs::create_dir_all(&ports_dir).expect("ports dir");
    let pd = ports_dir.to_str().expect("utf-8 path");
    let mut n = spawn(
        &link,
        &["-a", "127.0.0.1", "-p", "-1", "--ports_file_dir", pd],
    );
    n.wait_line(|l| l.ends_with("[INF] Server is ready"));
    let addr = n.addr_after("Listening for client connections on ");

    // A client gets nats-server's INFO.
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).ok();
    let mut info = String::new();
    BufReader::new(&s).read_line(&mut info).expect("INFO");
    assert!(
        info.starts_with("INFO {") && info.contains("\"version\":\"2.9.10\""),
        "{info}"
    );

    // The ports file is named after the name the binary was run as.
    let pf = ports_dir.join(format!("nats-server_{}.ports", n.child.id()));
    let ports = read_ports(&pf);
    assert_eq!(url_list(&ports, "nats"), vec![format!("nats://{addr}")]);
    assert!(ports.get("monitoring").is_none() && ports.get("cluster").is_none());

    let st = interrupt_and_wait(&mut n);
    assert_eq!(st.code(), Some(0));
    assert!(!pf.exists(), "the ports file is removed on shutdown");
}

/// A tiny HTTP GET: the body.
fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect monitor");
    s.set_read_timeout(Some(DEADLINE)).ok();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read");
    resp.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

#[test]
fn ports_file_from_the_config_and_varz_tags() {
    let dir = tmp_dir("ports");
    let ports_dir = dir.join("out");
    std::fs::create_dir_all(&ports_dir).expect("ports dir");
    let conf = write(
        &dir,
        "n.conf",
        &format!(
            "ports_file_dir: {:?}\nport: -1\nhttp_port: -1\nserver_tags: [\"Region:EU\", \
             \"disk:ssd\"]\ncluster {{ listen: 127.0.0.1:-1 }}\n",
            ports_dir.to_str().expect("utf-8 path")
        ),
    );
    check_ok(&conf);
    let mut n = spawn(Path::new(BIN), &["-c", conf.to_str().expect("utf-8")]);
    n.wait_line(|l| l.ends_with("[INF] Server is ready"));
    let client = n.addr_after("Listening for client connections on ");
    let http = n.addr_after("Starting http monitor on ");
    let route = n.addr_after("Listening for route connections on ");

    let pf = ports_dir.join(format!("natsd_{}.ports", n.child.id()));
    let ports = read_ports(&pf);
    let keys: Vec<&String> = ports.as_object().expect("an object").keys().collect();
    assert_eq!(keys.len(), 3, "{ports}");
    // Listening on 0.0.0.0: every interface address, loopback first (as nats-server).
    let nats = url_list(&ports, "nats");
    assert_eq!(nats[0], format!("nats://127.0.0.1:{}", client.port()));
    assert!(nats
        .iter()
        .all(|u| u.starts_with("nats://") && u.ends_with(&format!(":{}", client.port()))));
    let mon = url_list(&ports, "monitoring");
    assert_eq!(mon[0], format!("http://127.0.0.1:{}", http.port()));
    assert_eq!(url_list(&ports, "cluster"), vec![format!("nats://{route}")]);

    // /varz shows the tags as nats-server does: trimmed, lowercased, after config_load_time.
    let local = SocketAddr::from(([127, 0, 0, 1], http.port()));
    let body = http_get(local, "/varz");
    let varz: serde_json::Value = serde_json::from_str(&body).expect("varz JSON");
    assert_eq!(varz["tags"], serde_json::json!(["region:eu", "disk:ssd"]));
    let pos = |k: &str| body.find(&format!("\"{k}\"")).unwrap_or(usize::MAX);
    assert!(pos("config_load_time") < pos("tags") && pos("tags") < pos("system_account"));

    let st = interrupt_and_wait(&mut n);
    assert_eq!(st.code(), Some(0));
    assert!(!pf.exists(), "the ports file is removed on shutdown");
}

#[test]
fn ports_file_dir_that_does_not_exist_is_logged_and_the_server_runs() {
    let dir = tmp_dir("ports-missing");
    let missing = dir.join("nope");
    let mut n = spawn(
        Path::new(BIN),
        &[
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "--ports_file_dir",
            missing.to_str().expect("utf-8"),
        ],
    );
    let l = n.wait_line(|l| l.contains("[ERR] Error writing ports file ("));
    assert!(l.contains(&format!("natsd_{}.ports", n.child.id())), "{l}");
    n.wait_line(|l| l.ends_with("[INF] Server is ready"));
}

#[test]
fn server_tags_forms() {
    let l = |s: &str| file::load_str(s).map(|l| l.options.server_tags);
    // A string is one tag (no comma split), as nats-server.
    assert_eq!(
        l("server_tags: \"A:1, b:2\"").ok(),
        Some(vec!["a:1, b:2".into()])
    );
    assert_eq!(
        l("server_tags: [\" X:1 \", \"x:1\", \"Y\", \"\"]").ok(),
        Some(vec!["x:1".to_string(), "y".into()])
    );
    assert_eq!(l("server_tags: []").ok(), Some(vec![]));
    let e = l("server_tags: [1, \"a\"]").expect_err("an integer tag");
    assert_eq!((e.line, e.col), (1, 15), "{e}");
    assert!(l("server_tags: 5").is_err());
}
