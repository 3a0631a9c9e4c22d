//! Config reload: `Server::reload` on embedded servers (users removed or changed, permissions
//! narrowed, logging, limits, routes added and removed, refused changes applying nothing), and
//! the binary: `natsd -c file`, edit the file, `natsd --signal reload=<pidfile>`.

mod common;

use common::cluster::{node_with_routes as node, route_port, routes};
use common::{http_json, start, wait_for, Raw};
use natsd::config::{Permissions, SubjectPermission, User};
use natsd::{Options, Server};
use std::time::Duration;

fn user(name: &str, pass: &str) -> User {
    User {
        username: name.into(),
        password: pass.into(),
        ..User::default()
    }
}

fn allow(publish: &[&str], subscribe: &[&str]) -> Option<Permissions> {
    let sp = |v: &[&str]| {
        Some(SubjectPermission {
            allow: v.iter().map(|s| s.to_string()).collect(),
            deny: vec![],
        })
    };
    Some(Permissions {
        allow_responses: None,
        publish: sp(publish),
        subscribe: sp(subscribe),
    })
}

fn login(u: &str, p: &str) -> String {
    format!(r#"{{"verbose":false,"pedantic":false,"protocol":1,"user":"{u}","pass":"{p}"}}"#)
}

/// Connect with credentials; Ok(client) or Err(what the server said before closing).
async fn try_login(srv: &Server, u: &str, p: &str) -> Result<Raw, String> {
    let (mut r, _) = Raw::connect(srv).await;
    r.send(&format!("CONNECT {}\r\nPING\r\n", login(u, p)))
        .await;
    match r.try_line().await {
        Some(l) if l == "PONG" => Ok(r),
        Some(l) => Err(l),
        None => Err(String::new()),
    }
}

#[tokio::test]
async fn users_removed_or_changed_are_closed_and_permissions_narrow() {
    let b = User {
        permissions: allow(&["foo.>"], &["foo.>", "bar"]),
        ..user("b", "pb")
    };
    let opts = Options {
        users: vec![user("a", "pa"), b.clone(), user("c", "pc")],
        http_port: Some(0),
        ..Options::local()
    };
    let srv = start(opts.clone()).await;
    let mut ca = Raw::connected(&srv, &login("a", "pa")).await;
    let mut cb = Raw::connected(&srv, &login("b", "pb")).await;
    let mut cc = Raw::connected(&srv, &login("c", "pc")).await;
    cb.send("SUB bar 1\r\nSUB foo.y 2\r\nPUB foo.y 1\r\nx\r\n")
        .await;
    assert_eq!(cb.sync().await, "MSG foo.y 2 1\r\nx\r\n");

    // a removed, c's password changed, b narrowed.
    let new = Options {
        users: vec![
            User {
                permissions: allow(&["foo.x"], &["foo.>"]),
                ..b
            },
            user("c", "pc2"),
        ],
        ..opts.clone()
    };
    let changed = srv.reload(new).expect("reload");
    assert_eq!(changed, ["authorization users", "accounts"]);

    // As nats-server 2.9.10: the removed user's connection is closed without a word...
    assert!(ca.closed().await);
    assert_eq!(String::from_utf8_lossy(&ca.buf), "");
    // ...the one whose password changed gets an Authorization Violation.
    assert_eq!(
        cc.try_line().await.as_deref(),
        Some("-ERR 'Authorization Violation'")
    );
    assert!(cc.closed().await);
    // b stays, loses its `bar` subscription, and may publish to foo.x only.
    assert_eq!(
        cb.line().await,
        "-ERR 'Permissions Violation for Subscription to \"bar\" (sid \"1\")'"
    );
    cb.send("PUB foo.y 1\r\nx\r\nPUB foo.x 1\r\ny\r\n").await;
    assert_eq!(
        cb.sync().await,
        "-ERR 'Permissions Violation for Publish to \"foo.y\"'\r\n"
    );
    let http = srv.http_addr().expect("http");
    let closed = http_json(http, "/connz?state=closed&auth=1").await;
    let reasons: Vec<(String, String)> = closed["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| {
            (
                c["authorized_user"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        reasons.contains(&("a".into(), "Client Closed".into())),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&("c".into(), "Authentication Failure".into())),
        "{reasons:?}"
    );
    let open = http_json(http, "/connz?subs=1").await;
    assert_eq!(open["num_connections"], 1);
    assert_eq!(open["connections"][0]["subscriptions_list"][0], "foo.y");

    // New connections use the new rules at once.
    assert_eq!(
        try_login(&srv, "a", "pa").await.err().as_deref(),
        Some("-ERR 'Authorization Violation'")
    );
    assert!(try_login(&srv, "c", "pc").await.is_err());
    assert!(try_login(&srv, "c", "pc2").await.is_ok());
    srv.shutdown().await;
}

#[tokio::test]
async fn logging_and_limits_reload() {
    let opts = Options::local();
    let srv = start(opts.clone()).await;
    let mut old = Raw::client(&srv).await;
    let changed = srv
        .reload(Options {
            trace: true,
            max_payload: 1000,
            max_connections: 2,
            max_subscriptions: 1,
            ping_interval: Duration::from_secs(5),
            ..opts.clone()
        })
        .expect("reload");
    assert_eq!(
        changed,
        [
            "trace = true",
            "max_connections = 2",
            "max_subscriptions = 1",
            "ping_interval = 5s",
            "max_payload = 1000",
        ]
    );
    assert!(natsd::logging::trace_enabled());
    assert_eq!(srv.options().max_payload, 1000);
    // New connections' INFO shows the new max_payload.
    let (mut second, info) = Raw::connect(&srv).await;
    assert_eq!(info["max_payload"], 1000);
    second
        .send("CONNECT {\"verbose\":false,\"protocol\":1}\r\n")
        .await;
    second.flush().await;
    // max_connections = 2: a third is refused.
    let (mut third, _) = Raw::connect(&srv).await;
    assert_eq!(third.line().await, "-ERR 'maximum connections exceeded'");
    // Existing connections get the new limits too.
    old.send("SUB a 1\r\nSUB b 2\r\n").await;
    assert_eq!(
        old.sync().await,
        "-ERR 'maximum subscriptions exceeded'\r\n"
    );
    old.send(&format!("PUB a 1001\r\n{}\r\n", "x".repeat(1001)))
        .await;
    assert_eq!(
        old.try_line().await.as_deref(),
        Some("-ERR 'Maximum Payload Violation'")
    );
    assert!(old.closed().await);

    // Back: trace off, debug on.
    let changed = srv
        .reload(Options {
            debug: true,
            ..opts.clone()
        })
        .expect("reload");
    assert!(changed.contains(&"debug = true".to_string()), "{changed:?}");
    assert!(!natsd::logging::trace_enabled());
    natsd::logging::set_levels(false, false);
    // Nothing changed: nothing to report.
    let srv_opts = (*srv.options()).clone();
    assert_eq!(srv.reload(srv_opts), Ok(vec![]));
    srv.shutdown().await;
}

#[tokio::test]
async fn a_refused_change_applies_nothing() {
    let opts = Options {
        users: vec![user("a", "pa")],
        ..Options::local()
    };
    let srv = start(opts.clone()).await;
    let mut ca = Raw::connected(&srv, &login("a", "pa")).await;
    let e = srv
        .reload(Options {
            port: 5,
            users: vec![user("b", "pb")],
            debug: true,
            max_payload: 1000,
            ..opts.clone()
        })
        .unwrap_err();
    assert_eq!(e, "config reload not supported for Port: old=0, new=5");
    let e = srv
        .reload(Options {
            server_name: Some("X".into()),
            users: vec![user("b", "pb")],
            ..opts.clone()
        })
        .unwrap_err();
    assert_eq!(e, "config reload not supported for ServerName: old=, new=X");
    // Invalid options are refused too (validation as at startup).
    let e = srv
        .reload(Options {
            no_auth_user: Some("zz".into()),
            ..opts.clone()
        })
        .unwrap_err();
    assert!(e.contains("no_auth_user"), "{e}");
    assert_eq!(srv.options().max_payload, opts.max_payload);
    assert!(!srv.options().debug);
    // a is still connected and still accepted; b is not.
    ca.send("PUB x 1\r\nx\r\n").await;
    assert_eq!(ca.sync().await, "");
    assert!(try_login(&srv, "a", "pa").await.is_ok());
    assert!(try_login(&srv, "b", "pb").await.is_err());
    let (_, info) = Raw::connect(&srv).await;
    assert_eq!(info["max_payload"], opts.max_payload);
    srv.shutdown().await;
}

#[tokio::test]
async fn routes_added_are_dialled_and_removed_ones_closed_for_good() {
    let b = start(node("B", vec![])).await;
    let url = format!("nats-route://127.0.0.1:{}", route_port(&b));
    let a_opts = node("A", vec![]);
    let a = start(a_opts.clone()).await;
    assert_eq!(routes(&a), 0);

    let with_b = node("A", vec![url.clone()]);
    assert_eq!(
        a.reload(with_b.clone()).expect("reload"),
        ["cluster routes"]
    );
    wait_for("route A-B", || {
        let ok = routes(&a) == 1 && routes(&b) == 1;
        async move { ok }
    })
    .await;

    assert_eq!(a.reload(a_opts).expect("reload"), ["cluster routes"]);
    wait_for("route closed", || {
        let ok = routes(&a) == 0 && routes(&b) == 0;
        async move { ok }
    })
    .await;
    // Configured routes are redialled every second: the removed one is not.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(routes(&a), 0);
    assert_eq!(routes(&b), 0);
    assert!(a
        .shared()
        .cluster
        .as_ref()
        .expect("cluster")
        .configured_routes()
        .is_empty());

    // A cluster listen change is refused.
    let mut moved = with_b.clone();
    if let Some(c) = moved.cluster.as_mut() {
        c.port = 1;
    }
    assert_eq!(
        a.reload(moved).unwrap_err(),
        "config reload not supported for cluster port: old=0, new=1"
    );
    a.shutdown().await;
    b.shutdown().await;
}

// ----- the binary -----

mod binary {
    use crate::common::binary::{self, wait_file, Killed as Natsd, BIN};
    use crate::common::DEADLINE;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpStream;
    use std::path::PathBuf;
    use std::process::Command;

    fn tmp_dir(name: &str) -> PathBuf {
        binary::tmp_dir("reload", name)
    }

    fn signal(args: &str) {
        let out = Command::new(BIN)
            .args(["--signal", args])
            .output()
            .expect("natsd --signal");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Connect and log in; returns the INFO line and the stream, or the server's answer.
    fn login(port: u16, user: &str, pass: &str) -> (String, Result<TcpStream, String>) {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let mut r = BufReader::new(s.try_clone().expect("clone"));
        let mut info = String::new();
        r.read_line(&mut info).expect("info");
        let mut w = s.try_clone().expect("clone");
        w.write_all(
            format!(
                "CONNECT {{\"verbose\":false,\"user\":\"{user}\",\"pass\":\"{pass}\"}}\r\nPING\r\n"
            )
            .as_bytes(),
        )
        .expect("write");
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        if line == "PONG\r\n" {
            (info, Ok(s))
        } else {
            (info, Err(line))
        }
    }

    fn read_to_close(s: &mut TcpStream) -> String {
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        String::from_utf8_lossy(&got).into_owned()
    }

    const CONF: &str = "authorization {\n  users = [\n    {user: a, password: pa}\n    {user: b, password: pb}\n  ]\n}\n";

    #[test]
    fn sighup_reloads_the_file_and_keeps_the_old_config_on_errors() {
        let d = tmp_dir("hup");
        let conf = d.join("natsd.conf");
        let pid = d.join("natsd.pid");
        let log = d.join("natsd.log");
        std::fs::write(&conf, CONF).expect("write");
        let (conf_s, pid_s, log_s) = (
            conf.to_string_lossy().into_owned(),
            pid.to_string_lossy().into_owned(),
            log.to_string_lossy().into_owned(),
        );
        // Flags override the file, at startup and at every reload (the port stays random).
        let _n = Natsd::natsd_quiet(&[
            "-c",
            &conf_s,
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-P",
            &pid_s,
            "-l",
            &log_s,
        ]);
        let text = wait_file(&log, "Server is ready");
        let port: u16 = text
            .lines()
            .find(|l| l.contains("Listening for client connections on"))
            .and_then(|l| l.rsplit(':').next())
            .and_then(|p| p.trim().parse().ok())
            .expect("port");
        let (_, a) = login(port, "a", "pa");
        let mut a = a.expect("a logs in");
        let (_, b) = login(port, "b", "pb");
        let mut b = b.expect("b logs in");

        // Remove a, turn debug on, lower max_payload.
        std::fs::write(
            &conf,
            "debug: true\nmax_payload: 1000\nauthorization {\n  users = [\n    {user: b, password: pb}\n  ]\n}\n",
        )
        .expect("write");
        signal(&format!("reload={pid_s}"));
        let text = wait_file(&log, "[INF] Reloaded server configuration");
        for want in [
            "[INF] Reloaded: debug = true",
            "[INF] Reloaded: authorization users",
            "[INF] Reloaded: accounts",
            "[INF] Reloaded: max_payload = 1000",
        ] {
            assert!(text.contains(want), "no {want:?} in {text}");
        }
        assert_eq!(read_to_close(&mut a), "");
        let (info, again) = login(port, "a", "pa");
        assert!(info.contains("\"max_payload\":1000"), "{info}");
        assert_eq!(
            again.err().as_deref(),
            Some("-ERR 'Authorization Violation'\r\n")
        );
        // debug is on: a new connection is logged at [DBG].
        wait_file(&log, "[DBG]");

        // A syntax error: the reload fails with the position; the old config stays.
        std::fs::write(
            &conf,
            "debug: false\nmax_payload: 2000\nauthorization {\n  users = [\n",
        )
        .expect("write");
        signal(&format!("reload={pid_s}"));
        let text = wait_file(&log, "[ERR] Failed to reload server configuration: ");
        let line = text
            .lines()
            .find(|l| l.contains("Failed to reload"))
            .expect("line");
        assert!(line.contains(&format!("{conf_s}:")), "{line}");
        let (info, _) = login(port, "b", "pb");
        assert!(info.contains("\"max_payload\":1000"), "{info}");

        // A change that needs a restart: refused, nothing applied.
        std::fs::write(&conf, format!("server_name: X\nmax_payload: 3000\n{CONF}")).expect("write");
        signal(&format!("reload={pid_s}"));
        wait_file(
            &log,
            "[ERR] Failed to reload server configuration: config reload not supported for ServerName: old=, new=X",
        );
        let (info, a2) = login(port, "a", "pa");
        assert!(info.contains("\"max_payload\":1000"), "{info}");
        assert!(a2.is_err());
        // b was never disturbed.
        b.write_all(b"PING\r\n").expect("write");
        let mut buf = [0u8; 6];
        b.read_exact(&mut buf).expect("pong");
        assert_eq!(&buf, b"PONG\r\n");
    }

    #[test]
    fn log_file_and_logtime_reload() {
        let d = tmp_dir("logfile");
        let conf = d.join("natsd.conf");
        let (one, two) = (d.join("one.log"), d.join("two.log"));
        let pid = d.join("natsd.pid");
        let pid_s = pid.to_string_lossy().into_owned();
        std::fs::write(&conf, format!("log_file: {:?}\n", one.to_string_lossy())).expect("write");
        let _n = Natsd::natsd_quiet(&[
            "-c",
            &conf.to_string_lossy(),
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-P",
            &pid_s,
        ]);
        wait_file(&one, "Server is ready");
        let conf_two = format!("log_file: {:?}\nlogtime: false\n", two.to_string_lossy());
        std::fs::write(&conf, &conf_two).expect("write");
        signal(&format!("reload={pid_s}"));
        // Reported in the old file, as nats-server does; what follows goes to the new one.
        let text = wait_file(&one, "[INF] Reloaded server configuration");
        assert!(text.contains("[INF] Reloaded: logtime = false"), "{text}");
        assert!(
            text.contains(&format!("[INF] Reloaded: log_file = {}", two.display())),
            "{text}"
        );
        std::fs::write(&conf, format!("{conf_two}trace: true\n")).expect("write");
        signal(&format!("reload={pid_s}"));
        let text = wait_file(&two, "[INF] Reloaded server configuration");
        let line = text
            .lines()
            .find(|l| l.contains("Reloaded: trace = true"))
            .expect("trace line");
        // No timestamp any more: `[pid] [INF] …`.
        let (_, rest) = line.split_once("] ").expect("pid");
        assert_eq!(rest, "[INF] Reloaded: trace = true");
    }
}
