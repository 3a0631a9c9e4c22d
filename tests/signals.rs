//! The binary and its signals: `--signal ldm=<pidfile>` drains and exits 0 (SIGTERM ignored
//! meanwhile), `--signal reopen` reopens a moved log file, `--signal quit` exits 0,
//! `--signal reload` without `-c` says there is nothing to reload, bad pids fail clearly (with
//! nats-server's texts), and config file errors are reported without the usage.

mod common;

use common::binary::{run_within, wait_file, Proc, BIN};
use common::natsserver::NATS_SERVER;
use common::{binary, DEADLINE};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

fn tmp_dir(name: &str) -> PathBuf {
    binary::tmp_dir("signals", name)
}

fn run(bin: &str, args: &[&str]) -> Output {
    run_within(bin, args, DEADLINE, Duration::from_millis(10))
}

fn signal(args: &str) -> Output {
    run(BIN, &["--signal", args])
}

/// A running natsd whose stderr lines are collected; killed on drop.
fn start(args: &[&str]) -> Proc {
    Proc::spawn(BIN, args, Stdio::null())
}

fn client_port(n: &mut Proc) -> u16 {
    let l = n.find_line(|l| l.contains("Listening for client connections on"));
    l.rsplit(':').next().expect("port").parse().expect("port")
}

/// Wait for the exit (within `within`) and collect the rest of stderr.
fn wait_exit(n: &mut Proc, within: Duration) -> ExitStatus {
    n.wait_exit(within, Duration::from_millis(200))
}

/// A raw client with `protocol: 1` (it accepts async INFO).
fn client(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).expect("timeout");
    s.write_all(b"CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\n")
        .expect("write");
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while !got.contains("PONG\r\n") {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "closed early: {got:?}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    s
}

/// Everything until EOF (the server closed the connection).
fn read_to_close(s: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn signal_ldm_by_pid_file_drains_and_exits_0() {
    let d = tmp_dir("ldm");
    let conf = d.join("ldm.conf");
    std::fs::write(
        &conf,
        "lame_duck_duration: \"2s\"\nlame_duck_grace_period: \"500ms\"\n",
    )
    .expect("conf");
    let pid_file = d.join("natsd.pid");
    let (conf_s, pid_s) = (
        conf.to_string_lossy().into_owned(),
        pid_file.to_string_lossy().into_owned(),
    );
    let mut n = start(&[
        "-c",
        &conf_s,
        "-a",
        "127.0.0.1",
        "-p",
        "-1",
        "-P",
        &pid_s,
        "-D",
    ]);
    let port = client_port(&mut n);
    n.find_line(|l| l.ends_with("Server is ready"));
    let mut c = client(port);

    let t0 = Instant::now();
    let out = signal(&format!("ldm={pid_s}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    n.find_line(|l| l.ends_with("[INF] Entering lame duck mode, stop accepting new clients"));
    // SIGTERM does not cut a lame duck drain short (nats-server).
    let out = signal(&format!("term={}", n.pid()));
    assert!(out.status.success());
    n.find_line(|l| l.contains("Trapped \"terminated\" signal"));
    // New clients are refused at once.
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());

    let got = read_to_close(&mut c);
    assert!(got.contains("\"ldm\":true"), "{got}");
    let st = wait_exit(&mut n, Duration::from_secs(5));
    assert_eq!(st.code(), Some(0), "{:#?}", n.seen);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(4),
        "{took:?}"
    );
    for want in [
        "[INF] Closing existing clients",
        "Client connection closed: Server Shutdown",
        "[INF] Initiating Shutdown...",
        "[INF] Server Exiting..",
    ] {
        assert!(
            n.seen.iter().any(|l| l.contains(want)),
            "no {want:?}: {:#?}",
            n.seen
        );
    }
}

#[test]
fn signal_reopen_reopens_a_moved_log_file_and_quit_exits_0() {
    let d = tmp_dir("reopen");
    let log = d.join("natsd.log");
    let log_s = log.to_string_lossy().into_owned();
    let mut n = start(&["-a", "127.0.0.1", "-p", "-1", "-l", &log_s]);
    wait_file(&log, "Server is ready");
    let moved = d.join("natsd.log.1");
    std::fs::rename(&log, &moved).expect("rename");

    let out = signal(&format!("reopen={}", n.pid()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = wait_file(&log, "[INF] File log re-opened");
    assert!(!text.contains("Server is ready"), "{text}");
    assert!(!std::fs::read_to_string(&moved)
        .expect("old")
        .contains("re-opened"));

    // SIGHUP without -c: nothing to reload; the server says so (as nats-server) and keeps
    // running.
    let out = signal(&format!("reload={}", n.pid()));
    assert!(out.status.success());
    wait_file(
        &log,
        "[ERR] Failed to reload server configuration: can only reload config when a file is \
         provided using -c or --config",
    );

    let out = signal(&format!("quit={}", n.pid()));
    assert!(out.status.success());
    let st = wait_exit(&mut n, DEADLINE);
    assert_eq!(st.code(), Some(0));
    wait_file(&log, "[INF] Server Exiting..");
}

#[test]
fn signal_term_exits_1_and_stop_kills() {
    let mut n = start(&["-a", "127.0.0.1", "-p", "-1"]);
    n.find_line(|l| l.ends_with("Server is ready"));
    assert!(signal(&format!("term={}", n.pid())).status.success());
    assert_eq!(wait_exit(&mut n, DEADLINE).code(), Some(1));

    let mut n = start(&["-a", "127.0.0.1", "-p", "-1"]);
    n.find_line(|l| l.ends_with("Server is ready"));
    assert!(signal(&format!("stop={}", n.pid())).status.success());
    let st = wait_exit(&mut n, DEADLINE);
    assert_eq!(st.code(), None, "killed by SIGKILL");
}

#[test]
fn bad_signal_arguments_fail_clearly_like_nats_server() {
    let d = tmp_dir("bad");
    let bad_pid = d.join("bad.pid");
    std::fs::write(&bad_pid, "abc").expect("write");
    let bad_pid = bad_pid.to_string_lossy().into_owned();
    for (arg, want) in [
        ("ldm=999999999".to_string(), "no such process"),
        (
            "ldm=/nonexistent/natsd.pid".to_string(),
            "invalid pid: /nonexistent/natsd.pid",
        ),
        (format!("ldm={bad_pid}"), "invalid pid: abc"),
        ("bogus=1".to_string(), "unknown signal \"bogus\""),
        ("ldm=1=2".to_string(), "invalid signal parameters: [2]"),
    ] {
        let out = signal(&arg);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{arg}: {err}");
        assert_eq!(err.trim_end(), format!("natsd: {want}"), "{arg}");
        // The same text from nats-server (prefixed with its own name).
        if Path::new(NATS_SERVER).exists() && arg != "ldm=999999999" {
            let out = run(NATS_SERVER, &["--signal", &arg]);
            let theirs = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(1), "nats-server {arg}");
            assert_eq!(theirs.trim_end(), format!("nats-server: {want}"), "{arg}");
        }
    }
    // -sl spelling.
    let out = run(BIN, &["-sl=ldm=999999999"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_config_error_is_reported_without_usage() {
    let d = tmp_dir("conf");
    let bad = d.join("bad.conf");
    std::fs::write(&bad, "port: 4222\nlame_duck_duration: \"soon\"\n").expect("write");
    let out = run(BIN, &["-c", &bad.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1));
    assert!(err.starts_with("natsd: "), "{err}");
    assert!(err.contains("bad.conf:2:"), "{err}");
    assert!(!err.contains("Usage:"), "{err}");

    let bad = d.join("grace.conf");
    std::fs::write(
        &bad,
        "lame_duck_duration: \"40s\"\nlame_duck_grace_period: \"50s\"\n",
    )
    .expect("write");
    let out = run(BIN, &["-c", &bad.to_string_lossy()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains(
            "lame duck grace period (50s) should be strictly lower than lame duck duration (40s)"
        ),
        "{err}"
    );
    assert!(!err.contains("Usage:"), "{err}");
    // -t names the same problem.
    let out = run(BIN, &["-t", "-c", &bad.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
}
