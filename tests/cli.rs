//! The `natsd` binary, black-box: flags in nats-server's spellings, the log lines tools wait
//! for (in nats-server's format), log and pid files, signals and exit codes, and errors for
//! flags that are wrong or not built yet.

mod common;

use common::binary::{addr_after, run, Proc, BIN};
use common::DEADLINE;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Spawn `natsd args…` with stderr piped (stdout too, so nothing leaks into test output).
fn spawn(args: &[&str]) -> Proc {
    Proc::spawn(BIN, args, Stdio::piped())
}

/// Spawn and wait for `Server is ready`.
fn ready(args: &[&str]) -> Proc {
    Proc::ready(args, Stdio::piped(), "[INF] Server is ready")
}

/// Wait for exit (with a deadline); returns the status and all of stderr.
fn wait_exit(n: &mut Proc) -> (ExitStatus, Vec<String>) {
    // The reader thread ends at EOF; collect what it still has.
    let status = n.wait_exit(DEADLINE, DEADLINE);
    (status, n.seen.clone())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `[pid] YYYY/MM/DD HH:MM:SS.micro [LVL] msg` → (pid, level, msg); panics on any other shape.
fn parse_log_line(l: &str) -> (u32, String, String) {
    try_parse_log_line(l).unwrap_or_else(|| panic!("not a nats-server log line: {l:?}"))
}

fn try_parse_log_line(l: &str) -> Option<(u32, String, String)> {
    let (pid, rest) = l.strip_prefix('[')?.split_once("] ")?;
    let pid: u32 = pid.parse().ok()?;
    // "2026/11/29 09:08:24.347463" is 26 bytes: local time, microseconds.
    let stamp = rest.get(..26)?;
    let shape = stamp.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'/',
        10 => b == b' ',
        13 | 16 => b == b':',
        19 => b == b'.',
        _ => b.is_ascii_digit(),
    });
    if !shape {
        return None;
    }
    let (lvl, msg) = rest[26..].strip_prefix(" [")?.split_once("] ")?;
    Some((pid, lvl.to_string(), msg.to_string()))
}

/// A raw protocol client: connect and read INFO (returned as JSON).
fn raw(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>, serde_json::Value) {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).ok();
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let mut line = String::new();
    r.read_line(&mut line).expect("INFO");
    let json = line
        .strip_prefix("INFO ")
        .unwrap_or_else(|| panic!("expected INFO, got {line:?}"));
    (s, r, serde_json::from_str(json.trim()).expect("INFO JSON"))
}

fn read_line(r: &mut BufReader<TcpStream>) -> String {
    let mut l = String::new();
    r.read_line(&mut l).expect("read");
    l
}

/// A fresh path under the target dir's tmp (unique per test and process).
fn tmp_path(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    dir.join(format!("cli-{}-{name}", std::process::id()))
}

#[test]
fn startup_lines_random_port_and_a_client_connects() {
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1"]);
    let msgs: Vec<String> = n
        .seen
        .iter()
        .map(|l| {
            let (pid, lvl, msg) = parse_log_line(l);
            assert_eq!(pid, n.pid(), "{l}");
            assert_eq!(lvl, "INF", "no debug lines without -D: {l}");
            msg
        })
        .collect();
    let at = |m: &str| {
        msgs.iter()
            .position(|x| x.starts_with(m))
            .unwrap_or_else(|| panic!("no {m:?} in {msgs:#?}"))
    };
    assert_eq!(at("Starting nats-server"), 0);
    assert!(at("  Version:  2.9.10") < at("Listening for client connections on 127.0.0.1:"));
    assert!(at("Listening for client connections") < at("Server is ready"));
    assert!(!msgs.iter().any(|m| m.starts_with("Starting http monitor")));

    let addr = n.client_addr();
    assert_ne!(addr.port(), 0);
    assert_ne!(addr.port(), 4222, "-p -1 picks a random port");
    let (mut s, mut r, info) = raw(addr);
    assert_eq!(info["port"], addr.port());
    assert_eq!(info["version"], "2.9.10");
    assert!(info.get("auth_required").is_none_or(|v| v == false));
    s.write_all(b"CONNECT {\"verbose\":false}\r\nPING\r\n")
        .expect("write");
    assert_eq!(read_line(&mut r), "PONG\r\n");

    // Nothing on stdout, ever: nats-server logs to stderr only.
    n.signal("-INT");
    let (st, _) = wait_exit(&mut n);
    assert!(st.success());
    let mut out = String::new();
    n.child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read stdout");
    assert_eq!(out, "");
}

#[test]
fn monitor_line_comes_before_listening_and_serves() {
    // Long spellings with `=`: `--addr=`, `--port=`, `--http_port=`.
    let n = ready(&["--addr=127.0.0.1", "--port=-1", "--http_port=-1"]);
    let http = n
        .seen
        .iter()
        .position(|l| l.contains("[INF] Starting http monitor on 127.0.0.1:"))
        .unwrap_or_else(|| panic!("no monitor line: {:#?}", n.seen));
    let listen = n
        .seen
        .iter()
        .position(|l| l.contains("Listening for client connections"))
        .expect("listening");
    assert!(http < listen, "{:#?}", n.seen);

    let addr = addr_after(&n.seen, "Starting http monitor on ");
    let mut s = TcpStream::connect(addr).expect("connect monitor");
    s.set_read_timeout(Some(DEADLINE)).ok();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut resp = String::new();
    s.read_to_string(&mut resp).expect("read");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with(r#"{"status":"ok"}"#), "{resp}");
}

#[test]
fn single_dash_long_flags_and_separate_values() {
    // `-port -1`, `-addr 127.0.0.1`, `-name x` as Go's flag package allows; `--name` also.
    for args in [
        ["-addr", "127.0.0.1", "-port", "-1", "-name", "n1"],
        ["--net", "127.0.0.1", "--port", "-1", "--name", "n1"],
        [
            "-a=127.0.0.1",
            "-p=-1",
            "-n=n1",
            "-D=false",
            "-V=false",
            "-T",
        ],
    ] {
        let n = ready(&args);
        assert!(
            n.seen.iter().any(|l| l.ends_with("[INF]   Name:     n1")),
            "{args:?}: {:#?}",
            n.seen
        );
        let (_s, _r, info) = raw(n.client_addr());
        assert_eq!(info["server_name"], "n1", "{args:?}");
    }
}

#[test]
fn log_file_gets_the_lines_and_stderr_stays_empty() {
    let log = tmp_path("natsd.log");
    let pid = tmp_path("natsd.pid");
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&pid);
    let (log_s, pid_s) = (log.to_string_lossy(), pid.to_string_lossy());
    let mut n = spawn(&["-a", "127.0.0.1", "-p", "-1", "-l", &log_s, "-P", &pid_s]);

    let end = Instant::now() + DEADLINE;
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    while !read(&log).contains("Server is ready") {
        assert!(Instant::now() < end, "log file: {:?}", read(&log));
        std::thread::sleep(Duration::from_millis(10));
    }
    let lines = read(&log);
    for l in lines.lines() {
        assert_eq!(parse_log_line(l).0, n.pid());
    }
    assert!(lines.contains("[INF] Starting nats-server\n"), "{lines}");
    let addr = addr_after(
        &lines.lines().map(String::from).collect::<Vec<_>>(),
        "Listening for client connections on ",
    );
    raw(addr);

    // The pid file: the decimal pid, no newline (as nats-server writes it).
    assert_eq!(
        std::fs::read_to_string(&pid).expect("pid file"),
        n.pid().to_string()
    );

    n.signal("-INT");
    let (st, stderr) = wait_exit(&mut n);
    assert!(st.success());
    assert!(stderr.is_empty(), "stderr with -l: {stderr:#?}");
    assert!(
        read(&log).ends_with("[INF] Server Exiting..\n"),
        "{}",
        read(&log)
    );
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&pid);
}

#[test]
fn debug_and_trace_flags() {
    let ping = |n: &mut Proc| {
        let (mut s, mut r, _) = raw(n.client_addr());
        s.write_all(b"CONNECT {\"verbose\":false}\r\nPING\r\n")
            .expect("write");
        assert_eq!(read_line(&mut r), "PONG\r\n");
        (s, r)
    };

    // -D: debug lines (a connection is logged), no trace.
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1", "-D"]);
    let _c = ping(&mut n);
    n.wait_line(|l| l.contains("[DBG] 127.0.0.1:") && l.ends_with("Client connection created"));
    n.signal("-INT");
    let (_, lines) = wait_exit(&mut n);
    assert!(!lines.iter().any(|l| l.contains("[TRC]")), "{lines:#?}");
    assert!(
        lines
            .iter()
            .any(|l| l.ends_with("[DBG] Trapped \"interrupt\" signal")),
        "{lines:#?}"
    );

    // -V: the ops, both ways, in nats-server's trace form.
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1", "-V"]);
    let _c = ping(&mut n);
    let l = n.wait_line(|l| l.contains("[TRC]") && l.ends_with("<<- [PING]"));
    let (_, lvl, msg) = parse_log_line(&l);
    assert_eq!(lvl, "TRC");
    assert!(
        msg.starts_with("127.0.0.1:") && msg.contains(" - cid:"),
        "{msg}"
    );
    n.wait_line(|l| l.contains("[TRC]") && l.ends_with("->> [PONG]"));

    // Payloads are traced Go-quoted, cut at --max_traced_msg_len.
    let mut n = ready(&[
        "-a",
        "127.0.0.1",
        "-p",
        "-1",
        "-V",
        "--max_traced_msg_len",
        "3",
    ]);
    let (mut s, mut r) = ping(&mut n);
    s.write_all(b"PUB foo 11\r\nhello world\r\nPING\r\n")
        .expect("write");
    assert_eq!(read_line(&mut r), "PONG\r\n");
    n.wait_line(|l| l.contains("[TRC]") && l.ends_with("<<- [PUB foo 11]"));
    n.wait_line(|l| l.contains("[TRC]") && l.ends_with("<<- MSG_PAYLOAD: [\"hel...\"]"));

    // -DV: both.
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1", "-DV"]);
    let _c = ping(&mut n);
    n.wait_line(|l| l.ends_with("->> [PONG]"));
    assert!(n.seen.iter().any(|l| l.contains("[DBG]")), "{:#?}", n.seen);
}

#[test]
fn version_and_help() {
    for flag in ["-v", "--version"] {
        let out = run(&[flag]);
        assert!(out.status.success(), "{flag}");
        let s = text(&out.stdout);
        assert!(s.contains("v2.9.10"), "{flag}: {s}");
        assert!(s.ends_with('\n') && s.lines().count() == 1, "{flag}: {s:?}");
    }
    for flag in ["-h", "--help"] {
        let out = run(&[flag]);
        assert!(out.status.success(), "{flag}");
        let s = text(&out.stdout);
        assert!(s.contains("Usage: natsd [options]"), "{flag}: {s}");
        for f in [
            "-p, --port",
            "-m, --http_port",
            "-l, --log",
            "--user",
            "-DV",
        ] {
            assert!(s.contains(f), "{flag}: usage lacks {f}");
        }
    }
}

#[test]
fn bad_flags_fail_clearly() {
    for (args, want) in [
        (&["--bogus"][..], "flag provided but not defined: -bogus"),
        (&["-p", "abc"][..], "invalid value \"abc\" for flag -p"),
        (&["--port=x1"][..], "invalid value \"x1\" for flag -port"),
        (&["-m", "http"][..], "invalid value \"http\" for flag -m"),
        (&["-p"][..], "flag needs an argument: -p"),
        (&["--pass", "x"][..], "--pass needs --user"),
        (&["stray"][..], "unexpected argument"),
        (
            &["--routes", "http://127.0.0.1:1"][..],
            "unsupported scheme",
        ),
        (
            &["--connect_retries", "x"][..],
            "invalid value \"x\" for flag -connect_retries",
        ),
        (&["-r", "ftp://127.0.0.1:1"][..], "unsupported scheme"),
        (
            &["-c", "/nonexistent/nats.conf"][..],
            "cannot read config file",
        ),
    ] {
        let out = run(args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} must fail");
        assert!(err.contains(want), "{args:?}: stderr {err:?}");
        assert!(
            !err.contains("Server is ready"),
            "{args:?} started anyway: {err}"
        );
    }
    // A remote syslog that cannot be reached is a clear fatal error.
    let out = run(&["-p", "-1", "-r", "ftp://127.0.0.1:1"]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("[FTL]") && err.contains("unsupported scheme"),
        "{err}"
    );
}

#[test]
fn remote_syslog_gets_the_log_lines_in_nats_servers_format() {
    for flag in ["-r", "--remote_syslog"] {
        // A fresh receiver per run: nothing of the previous run can arrive on it.
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        rx.set_read_timeout(Some(DEADLINE)).expect("timeout");
        let url = format!("udp://127.0.0.1:{}", rx.local_addr().expect("addr").port());
        let mut n = spawn(&["-a", "127.0.0.1", "-p", "-1", flag, &url]);
        let mut buf = [0u8; 2048];
        let end = Instant::now() + DEADLINE;
        let ready = loop {
            assert!(Instant::now() < end, "no ready line over syslog");
            let len = rx.recv(&mut buf).expect("a syslog datagram");
            let l = text(&buf[..len]);
            if l.contains("Server is ready") {
                break l;
            }
        };
        // `<5>2026-11-29T13:00:53Z host natsd[pid]: Server is ready`: notice, no [INF] tag.
        let pid = n.child.id();
        assert!(ready.starts_with("<5>"), "{ready:?}");
        assert!(
            ready.ends_with(&format!(" natsd[{pid}]: Server is ready\n")),
            "{ready:?}"
        );
        // Nothing goes to stderr while syslog is on.
        assert!(
            n.seen.iter().all(|l| !l.contains("Server is ready")),
            "{:?}",
            n.seen
        );
        let _ = n.child.kill();
    }
}

#[test]
fn port_in_use_exits_non_zero() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = run(&["-a", "127.0.0.1", "-p", &port]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(!err.contains("Server is ready"), "{err}");
}

#[test]
fn sigint_exits_0_and_sigterm_exits_1() {
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1"]);
    let (_s, _r, _) = raw(n.client_addr()); // a connected client does not block shutdown
    n.signal("-INT");
    let (st, lines) = wait_exit(&mut n);
    assert_eq!(st.code(), Some(0), "{lines:#?}");
    let last = lines.last().expect("lines");
    assert!(last.ends_with("[INF] Server Exiting.."), "{lines:#?}");
    assert!(lines
        .iter()
        .any(|l| l.ends_with("[INF] Initiating Shutdown...")));
    // Like nats-server, the trapped signal is a debug line: without -D only INF lines.
    assert!(
        lines.iter().all(|l| parse_log_line(l).1 == "INF"),
        "{lines:#?}"
    );

    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1"]);
    n.signal("-TERM");
    let (st, lines) = wait_exit(&mut n);
    assert_eq!(st.code(), Some(1), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.ends_with("[INF] Server Exiting..")),
        "{lines:#?}"
    );
}

#[test]
fn user_pass_and_token_require_auth() {
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1", "--user", "a", "--pass", "b"]);
    let (mut s, mut r, info) = raw(n.client_addr());
    assert_eq!(info["auth_required"], true);
    s.write_all(b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"b\"}\r\nPING\r\n")
        .expect("write");
    assert_eq!(read_line(&mut r), "PONG\r\n");
    let (mut s, mut r, _) = raw(n.client_addr());
    s.write_all(b"CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"x\"}\r\n")
        .expect("write");
    assert_eq!(read_line(&mut r), "-ERR 'Authorization Violation'\r\n");
    n.wait_line(|l| l.contains("[ERR]") && l.contains("authentication error"));

    let n = ready(&["-a", "127.0.0.1", "-p", "-1", "--auth=s3cret"]);
    let (mut s, mut r, info) = raw(n.client_addr());
    assert_eq!(info["auth_required"], true);
    s.write_all(b"CONNECT {\"verbose\":false,\"auth_token\":\"s3cret\"}\r\nPING\r\n")
        .expect("write");
    assert_eq!(read_line(&mut r), "PONG\r\n");
}

#[test]
fn js_and_sd_flags_start_jetstream() {
    let dir = common::binary::tmp_dir("cli", "js");
    let sd = dir.display().to_string();
    let mut n = ready(&["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", &sd]);
    n.find_line(|l| l.ends_with("[INF] Starting JetStream"));
    let want = format!("Store Directory: \"{}\"", dir.join("jetstream").display());
    n.find_line(|l| l.contains(&want));
    let s = TcpStream::connect(n.client_addr()).expect("connect");
    s.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let mut info = String::new();
    BufReader::new(s).read_line(&mut info).expect("INFO");
    assert!(info.contains("\"jetstream\":true"), "{info}");
    assert!(dir.join("jetstream").is_dir());
    drop(n);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a server that cannot start says: stderr without log prefixes (pid, time, `[FTL]`) and
/// without the program name (`natsd: ` / `nats-server: `), and the exit code.
fn startup_failure(bin: &str, args: &[&str]) -> (Option<i32>, Vec<String>) {
    let out = common::binary::run_within(bin, args, DEADLINE, Duration::from_millis(10));
    let lines = text(&out.stderr)
        .lines()
        .filter_map(|l| match try_parse_log_line(l) {
            Some((_, lvl, msg)) => (lvl != "INF").then_some(msg),
            None => Some(
                l.trim_start_matches("natsd: ")
                    .trim_start_matches("nats-server: ")
                    .to_string(),
            ),
        })
        .filter(|l| !l.is_empty())
        .collect();
    (out.status.code(), lines)
}

/// Startup errors in nats-server's words (2.9.10 and 2.15.1 say the same), which tools and
/// test harnesses match on: a client port in use, a syntax error in the config file, a
/// JetStream store directory that is a file. All exit 1.
#[test]
fn startup_errors_say_what_nats_server_says() {
    common::natsserver::assert_installed();
    let v215 = common::natsserver::assert_installed_215();
    let dir = tmp_path("startup-errors");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").expect("file");
    let file = file.to_string_lossy().into_owned();
    let bad = common::binary::write_conf(&dir, "bad.conf", "listen: 127.0.0.1:-1\nport = \n");
    let bad = bad.to_string_lossy().into_owned();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let cases: [(&[&str], String); 3] = [
        (
            &["-a", "127.0.0.1", "-p", &port],
            format!(
                "Error listening on port: 127.0.0.1:{port}, \
                 \"listen tcp 127.0.0.1:{port}: bind: address already in use\""
            ),
        ),
        (
            &["-c", &bad],
            // The line and wording after it are natsd's own (Go counts this one as line 3).
            "Parse error on line ".to_string(),
        ),
        (
            &["-a", "127.0.0.1", "-p", "-1", "-js", "-sd", &file],
            "Can't start JetStream: storage directory is not a directory".to_string(),
        ),
    ];
    for (args, want) in cases {
        for bin in [BIN, common::natsserver::NATS_SERVER, v215.as_str()] {
            let (code, lines) = startup_failure(bin, args);
            assert_eq!(code, Some(1), "{bin} {args:?}: {lines:?}");
            assert!(
                lines.iter().any(|l| l.starts_with(&want)),
                "{bin} {args:?}: want {want:?}, got {lines:?}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The flags a `--help` text lists (its option column), e.g. `-a`, `--addr`, `-sl`.
fn help_flags(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in help.lines() {
        let col: String = line.chars().take(37).collect();
        if !col.trim_start().starts_with('-') {
            continue;
        }
        for tok in col.split([' ', ',']) {
            let name = tok.trim_start_matches('-');
            if tok.starts_with('-')
                && !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                out.push(tok.to_string());
            }
        }
    }
    out
}

/// `natsd --help` names every flag natsd parses, and every flag of nats-server 2.15.1's
/// `--help` is either in it or refused with "not supported yet" (issue 20 item 4).
#[test]
fn help_lists_what_natsd_parses_and_nats_server_215s_flags() {
    use natsd::config::flags::{parse_command, USAGE};
    let ours = help_flags(USAGE);
    assert!(ours.len() > 40, "{ours:?}");
    for f in [
        "--routes",
        "--cluster",
        "--cluster_name",
        "--logtime_utc",
        "--help_tls",
    ] {
        assert!(ours.iter().any(|o| o == f), "{f} missing from --help");
    }
    for f in &ours {
        if let Err(e) = parse_command([f.as_str(), "1"]) {
            assert!(
                !e.to_string().contains("not defined"),
                "{f} is in --help but not parsed: {e}"
            );
        }
    }
    let go = common::natsserver::assert_installed_215();
    let out = std::process::Command::new(go)
        .arg("--help")
        .output()
        .expect("nats-server --help");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let theirs = help_flags(&text);
    assert!(theirs.len() > 40, "{text}");
    for f in &theirs {
        if ours.contains(f) {
            continue;
        }
        let e = parse_command([f.as_str(), "1"]).expect_err(f);
        assert!(
            e.to_string().contains("not supported yet"),
            "nats-server's {f}: neither in natsd's --help nor refused by name: {e}"
        );
    }
}
