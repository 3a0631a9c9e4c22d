//! The programs in `examples/` work as their headers say: run the built example binaries
//! against an embedded server (`NATS_URL`), as a user who copied them would.

mod common;

/// Kills the child on drop.
use common::binary::Killed as Guard;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `target/<profile>/examples/<name>`, next to this test's `deps/` directory. `cargo test`
/// builds the examples; when only this test was built, build them first.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = profile_dir.join("examples").join(name);
    if !path.exists() {
        // `cargo test --all-targets` builds examples only as test harnesses: build the programs.
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => "dev",
            Some(p) => p,
        };
        let st = Command::new(env!("CARGO"))
            .args(["build", "--examples", "--quiet", "--profile", profile])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build --examples");
        assert!(st.success(), "cargo build --examples failed");
    }
    assert!(path.exists(), "{} not built", path.display());
    path
}

/// Spawn a long-running example and wait for its first stdout line (it says it is ready).
fn spawn_ready(
    url: &str,
    name: &str,
    args: &[&str],
    ready: &str,
) -> (Guard, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(example(name))
        .args(args)
        .env("NATS_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn example");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let guard = Guard(child);
    let mut line = String::new();
    out.read_line(&mut line).expect("first line");
    assert!(line.starts_with(ready), "{name}: {line:?}");
    (guard, out)
}

/// Run an example to completion, with a deadline.
fn run(url: &str, name: &str, args: &[&str]) -> Output {
    let mut child = Command::new(example(name))
        .args(args)
        .env("NATS_URL", url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn example");
    let end = Instant::now() + common::DEADLINE;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{name} {args:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

/// Wait (with a deadline) for a spawned example to exit on its own.
fn wait_exit(g: &mut Guard) -> bool {
    let end = Instant::now() + common::DEADLINE;
    loop {
        if let Some(st) = g.0.try_wait().expect("try_wait") {
            return st.success();
        }
        assert!(Instant::now() < end, "example did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_and_pub_sub_examples() {
    let srv = common::start_default().await;
    let url = srv.client_url();
    tokio::task::spawn_blocking(move || {
        // reply + request
        let (mut replier, _) = spawn_ready(&url, "reply", &["echo", "re: ", "1"], "replying on");
        let out = run(&url, "request", &["echo", "hi"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "re: hi\n");
        assert!(wait_exit(&mut replier), "reply exits after its 1 request");

        // nobody listening: the server's no-responders answer, exit code 1
        let out = run(&url, "request", &["nobody.home", "x"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("no responders"));

        // sub + pub
        let (mut sub, mut lines) =
            spawn_ready(&url, "sub", &["greetings.*", "", "2"], "listening on");
        let out = run(&url, "pub", &["greetings.en", "hello", "2"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for _ in 0..2 {
            let mut l = String::new();
            lines.read_line(&mut l).expect("sub output");
            assert_eq!(l, "[greetings.en] hello\n");
        }
        assert!(wait_exit(&mut sub), "sub exits after 2 messages");
    })
    .await
    .expect("example runs");
    srv.shutdown().await;
}
