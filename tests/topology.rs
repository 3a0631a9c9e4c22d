//! `natsd topology up|check`: the bundled files parse; `up` on a 3-node file (free fixed
//! ports) prints the client URLs and "cluster ready", clients on node 1 and node 3 exchange a
//! message, `check` agrees, and SIGINT stops the launcher and every node; a fixed port already
//! in use fails clearly; `check` against a cluster missing a node exits non-zero. A
//! super-cluster file (3 clusters × 2 nodes, gateways) comes up, `check` verifies routes and
//! gateways, a message crosses from cluster A to cluster C, and SIGINT stops all six nodes. A
//! hub cluster with two leaves: both attach, a message crosses leaf to leaf, `check` verifies
//! the leafnode connections on both ends.

mod common;

use common::binary::{self, line_channel, run_within, BIN};
use natsd::topology::Topology;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);

/// The launcher tests run one at a time: each picks free ports, releases them and has its
/// nodes bind them later, and the super-cluster test alone uses 24 ports plus the gateways'
/// outgoing connections; in parallel, one test's pick could be another's port by then.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn tmp_dir(name: &str) -> PathBuf {
    binary::tmp_dir("topology", name)
}

/// `n` distinct free ports (see `common::free_port`).
fn free_ports(n: usize) -> Vec<u16> {
    (0..n).map(|_| common::free_port()).collect()
}

/// (client, http, route) ports of one node.
type NodePorts = (u16, u16, u16);

fn write_topology(dir: &Path, file: &str, cluster: &str, nodes: &[NodePorts]) -> PathBuf {
    let mut text = format!("# test topology\ncluster: {cluster}\nnodes {{\n");
    for (i, (c, h, r)) in nodes.iter().enumerate() {
        text.push_str(&format!(
            "  n{} {{ port: {c}, http: {h}, route: {r} }}\n",
            i + 1
        ));
    }
    text.push_str("}\n");
    let p = dir.join(file);
    std::fs::write(&p, text).expect("write topology");
    p
}

fn node_ports(n: usize) -> Vec<NodePorts> {
    let p = free_ports(3 * n);
    (0..n)
        .map(|i| (p[3 * i], p[3 * i + 1], p[3 * i + 2]))
        .collect()
}

/// Run a natsd command to completion (with a deadline).
fn run(args: &[&str]) -> Output {
    run_within(BIN, args, DEADLINE, Duration::from_millis(20))
}

fn kill_int(pid: u32) {
    let st = Command::new("kill")
        .arg("-INT")
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(st.success(), "kill -INT {pid}");
}

/// A running `natsd topology up`: stdout lines on a channel, stderr collected. Dropping it
/// interrupts it (which stops its nodes) and, as a last resort, kills it.
struct Launcher {
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: Vec<String>,
    stderr: Arc<Mutex<String>>,
}

impl Launcher {
    fn start(file: &Path) -> Launcher {
        let mut child = Command::new(BIN)
            .arg("topology")
            .arg("up")
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn natsd topology up");
        let lines = line_channel(child.stdout.take().expect("stdout"));
        let mut err = child.stderr.take().expect("stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .expect("lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Launcher {
            child,
            lines,
            stdout: Vec::new(),
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("lock").clone()
    }

    /// Until the collected stderr contains `text` (its reader thread may still be catching up
    /// after the launcher exited).
    fn wait_stderr(&self, text: &str) {
        let end = Instant::now() + DEADLINE;
        while !self.stderr().contains(text) {
            assert!(
                Instant::now() < end,
                "no {text:?} on stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Read stdout until "cluster ready"; the lines so far.
    fn wait_ready(&mut self) -> Vec<String> {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let ready = l.starts_with("cluster ready");
                    self.stdout.push(l);
                    if ready {
                        return self.stdout.clone();
                    }
                }
                Err(_) => panic!(
                    "no \"cluster ready\" within {DEADLINE:?}\nstdout:\n{}\nstderr:\n{}",
                    self.stdout.join("\n"),
                    self.stderr()
                ),
            }
        }
    }

    /// SIGINT, then the exit status (within the deadline).
    fn interrupt(&mut self) -> std::process::ExitStatus {
        kill_int(self.child.id());
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                Instant::now() < end,
                "the launcher did not exit after SIGINT\nstderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(self.child.id().to_string())
                .status();
            let end = Instant::now() + Duration::from_secs(15);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A raw NATS client over std's TcpStream.
struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(200))).ok();
        let mut r = Raw { s, buf: Vec::new() };
        let info = r.line(DEADLINE).expect("INFO");
        assert!(info.starts_with("INFO "), "{info}");
        r.send("CONNECT {\"verbose\":false,\"pedantic\":false,\"protocol\":1}\r\nPING\r\n");
        assert_eq!(r.line(DEADLINE).as_deref(), Some("PONG"));
        r
    }

    fn send(&mut self, s: &str) {
        self.s.write_all(s.as_bytes()).expect("write");
    }

    /// The next line (without CRLF), or None when `wait` passes first.
    fn line(&mut self, wait: Duration) -> Option<String> {
        let end = Instant::now() + wait;
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).to_string();
                self.buf.drain(..i + 2);
                return Some(l);
            }
            if Instant::now() >= end {
                return None;
            }
            let mut b = [0u8; 4096];
            match self.s.read(&mut b) {
                Ok(0) => panic!("connection closed"),
                Ok(n) => self.buf.extend_from_slice(&b[..n]),
                Err(_) => {} // timeout: look again
            }
        }
    }
}

/// A message published at client port `from` reaches a subscriber at client port `to` (`what`
/// names the path for the failure message): until the interest has crossed routes, gateways
/// or leafnodes, messages are dropped, so it publishes again.
fn crosses(from: u16, to: u16, subject: &str, what: &str) {
    let mut sub = Raw::connect(to);
    sub.send(&format!("SUB {subject} 1\r\nPING\r\n"));
    assert_eq!(sub.line(DEADLINE).as_deref(), Some("PONG"));
    let mut publ = Raw::connect(from);
    let end = Instant::now() + DEADLINE;
    let got = loop {
        publ.send(&format!("PUB {subject} 5\r\nhello\r\nPING\r\n"));
        assert_eq!(publ.line(DEADLINE).as_deref(), Some("PONG"));
        if let Some(l) = sub.line(Duration::from_millis(200)) {
            break l;
        }
        assert!(Instant::now() < end, "no message crossed {what}");
    };
    assert_eq!(got, format!("MSG {subject} 1 5"));
    assert_eq!(sub.line(DEADLINE).as_deref(), Some("hello"));
}

/// `natsd topology check FILE`: its exit code and stdout.
fn check(file: &Path) -> (Option<i32>, String) {
    let out = run(&["topology", "check", file.to_str().expect("utf-8")]);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

impl Launcher {
    /// SIGINT: the launcher exits 0, none of `ports` accepts any more, every node stopped.
    fn stop_all(mut self, ports: &[u16]) {
        let st = self.interrupt();
        assert!(
            st.success(),
            "launcher exit {st}\nstderr:\n{}",
            self.stderr()
        );
        for port in ports {
            assert!(
                refuses(*port),
                "port {port} still accepts after the launcher exited"
            );
        }
        self.wait_stderr("all nodes stopped");
    }
}

fn refuses(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).is_err()
}

#[test]
fn bundled_files_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let t3 = Topology::load(&root.join("topology/cluster-3.conf")).expect("cluster-3.conf");
    assert_eq!(t3.clusters.len(), 1);
    assert_eq!(t3.clusters[0].name, "C1");
    let names: Vec<&str> = t3.nodes().map(|(_, n)| n.name.as_str()).collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert!(t3.nodes().all(|(_, n)| n.fixed_ports(false).is_some()));
    let n1 = &t3.clusters[0].nodes[0];
    assert_eq!(n1.port, Some(4222));
    assert_eq!(n1.http, Some(8222));
    assert_eq!(n1.route, Some(6222));
    let t5 = Topology::load(&root.join("topology/cluster-5.conf")).expect("cluster-5.conf");
    assert_eq!(t5.node_count(), 5);
    assert!(t5.nodes().all(|(_, n)| n.fixed_ports(false).is_some()));
    let s = Topology::load(&root.join("topology/super-3x2.conf")).expect("super-3x2.conf");
    assert!(s.super_cluster);
    let names: Vec<&str> = s.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["A", "B", "C"]);
    assert!(s.clusters.iter().all(|c| c.nodes.len() == 2));
    assert!(s.nodes().all(|(_, n)| n.fixed_ports(true).is_some()));
    let h = Topology::load(&root.join("topology/hub-3-leaves-2.conf")).expect("hub file");
    assert_eq!((h.node_count(), h.leaves.len()), (3, 2));
    assert!(h.nodes().all(|(_, n)| n.leafnode.is_some()));
    assert!(h
        .leaves
        .iter()
        .all(|l| l.port.is_some() && l.http.is_some()));
}

#[test]
fn up_serves_a_mesh_check_agrees_and_sigint_stops_every_node() {
    let _serial = serial();
    let dir = tmp_dir("up");
    let nodes = node_ports(3);
    let file = write_topology(&dir, "c3.conf", "T3", &nodes);
    let mut up = Launcher::start(&file);
    let out = up.wait_ready();
    for (c, _, _) in &nodes {
        let url = format!("nats://127.0.0.1:{c}");
        assert!(
            out.iter().any(|l| l.contains(&url)),
            "{url} not printed: {out:#?}"
        );
    }
    // The check line runs as printed: the binary's own path, not a bare `natsd`.
    let line = out
        .iter()
        .find_map(|l| l.strip_prefix("check:"))
        .unwrap_or_else(|| panic!("no check line: {out:#?}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let exe = std::fs::canonicalize(BIN).expect("natsd binary");
    assert_eq!(std::fs::canonicalize(words[0]).ok(), Some(exe), "{line}");
    let ran = run(&words[1..]);
    assert!(ran.status.success(), "{line}: {ran:?}");
    // Every node's log lines come out prefixed with its name.
    let end = Instant::now() + DEADLINE;
    while !["[n1] ", "[n2] ", "[n3] "]
        .iter()
        .all(|p| up.stderr().contains(p))
    {
        assert!(Instant::now() < end, "no prefixed logs: {}", up.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }

    // A subscriber on node 1, a publisher on node 3.
    crosses(nodes[2].0, nodes[0].0, "topo.test", "from node 3 to node 1");

    let (code, text) = check(&file);
    assert_eq!(code, Some(0), "check failed:\n{text}");
    assert!(text.contains("mesh matches"), "{text}");
    let ports: Vec<u16> = nodes.iter().flat_map(|(c, h, r)| [*c, *h, *r]).collect();
    up.stop_all(&ports);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A super-cluster file: per cluster, per node (client, http, route, gateway) ports.
fn write_super(dir: &Path, file: &str, clusters: &[(&str, Vec<[u16; 4]>)]) -> PathBuf {
    let mut text = "# test super-cluster\nclusters {\n".to_string();
    for (name, nodes) in clusters {
        text.push_str(&format!("  {name} {{\n    nodes {{\n"));
        for (i, [c, h, r, g]) in nodes.iter().enumerate() {
            text.push_str(&format!(
                "      {}{} {{ port: {c}, http: {h}, route: {r}, gateway: {g} }}\n",
                name.to_ascii_lowercase(),
                i + 1
            ));
        }
        text.push_str("    }\n  }\n");
    }
    text.push_str("}\n");
    let p = dir.join(file);
    std::fs::write(&p, text).expect("write topology");
    p
}

#[test]
fn up_serves_a_super_cluster_check_verifies_routes_and_gateways() {
    let _serial = serial();
    let dir = tmp_dir("super");
    let p = free_ports(24);
    let node = |i: usize| [p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]];
    let clusters = [
        ("A", vec![node(0), node(1)]),
        ("B", vec![node(2), node(3)]),
        ("C", vec![node(4), node(5)]),
    ];
    let file = write_super(&dir, "s3x2.conf", &clusters);
    // Only A and B: checked against the full file later, the missing cluster shows.
    let ab = write_super(&dir, "ab.conf", &clusters[..2]);
    let mut up = Launcher::start(&file);
    let out = up.wait_ready();
    for i in 0..6 {
        let url = format!("nats://127.0.0.1:{}", node(i)[0]);
        assert!(
            out.iter().any(|l| l.contains(&url)),
            "{url} not printed: {out:#?}"
        );
        let gw = format!("gateway nats://127.0.0.1:{}", node(i)[3]);
        assert!(out.iter().any(|l| l.contains(&gw)), "{gw}: {out:#?}");
    }
    assert!(
        out.iter()
            .any(|l| l.starts_with("cluster ready: super-cluster A, B, C, 6 nodes")),
        "{out:#?}"
    );

    // A subscriber in cluster C (second node), a publisher in cluster A (first node).
    crosses(node(0)[0], node(5)[0], "topo.gw", "from A to C");

    let (code, text) = check(&file);
    assert_eq!(code, Some(0), "check failed:\n{text}");
    assert!(text.contains("mesh matches"), "{text}");
    assert!(text.contains("gateway A to B, C"), "{text}");
    assert!(text.contains("gateway C to A, B"), "{text}");
    // The A+B file does not match: each node has gateways to C, which the file lacks.
    let (code, text) = check(&ab);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("extra outbound gateway to C"), "{text}");
    up.stop_all(&p);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fixed_port_in_use_fails_clearly() {
    let _serial = serial();
    let dir = tmp_dir("busy");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("addr").port();
    let mut nodes = node_ports(2);
    nodes[1].0 = busy;
    let file = write_topology(&dir, "busy.conf", "B", &nodes);
    let out = run(&["topology", "up", file.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(
        err.contains(&format!(
            "port {busy} (the client port of node n2) is not free"
        )),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("cluster ready"));
    // Nothing was started.
    assert!(refuses(nodes[0].0));
    drop(taken);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_fails_when_a_node_is_missing() {
    let _serial = serial();
    let dir = tmp_dir("missing");
    let nodes = node_ports(3);
    let three = write_topology(&dir, "three.conf", "M", &nodes);
    let two = write_topology(&dir, "two.conf", "M", &nodes[..2]);
    let mut up = Launcher::start(&two);
    up.wait_ready();

    let out = run(&["topology", "check", three.to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("missing route to n3"), "{text}");
    assert!(text.contains("unreachable"), "{text}");
    assert!(text.contains("mesh does not match"), "{text}");

    // The two-node file matches, also with the monitoring URLs given by hand.
    let urls: Vec<String> = nodes[..2]
        .iter()
        .map(|(_, h, _)| format!("http://127.0.0.1:{h}"))
        .collect();
    let out = run(&[
        "topology",
        "check",
        two.to_str().expect("utf-8"),
        &urls[0],
        &urls[1],
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    assert!(up.interrupt().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_node_that_dies_early_stops_the_others() {
    let _serial = serial();
    let dir = tmp_dir("dies");
    let nodes = node_ports(2);
    let file = write_topology(&dir, "dies.conf", "D", &nodes);
    // Every node refuses the flag and exits 1 at once.
    let out = run(&[
        "topology",
        "up",
        file.to_str().expect("utf-8"),
        "--",
        "--no_such_flag",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("exited early"), "{err}");
    // Whichever node dies first stops the other, which may not have printed anything yet.
    assert!(
        err.contains("[n1] ") || err.contains("[n2] "),
        "node output is prefixed: {err}"
    );
    for (c, h, r) in &nodes {
        for p in [c, h, r] {
            assert!(refuses(*p), "port {p} accepts");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A hub cluster of two with two leaves (one fixed to each port list): `up` waits until both
/// leaves are attached, a message goes from a leaf through the hub to the other leaf, `check`
/// agrees and names each leaf's hub, a file without one leaf does not match, and SIGINT stops
/// all four servers.
#[test]
fn up_attaches_leaves_to_their_hub_and_check_verifies_them() {
    let _serial = serial();
    let dir = tmp_dir("leaves");
    let p = free_ports(12);
    let text = |leaves: &str| {
        format!(
            "cluster: HUB\nnodes {{\n  h1 {{ port: {}, http: {}, route: {}, leafnode: {} }}\n  \
             h2 {{ port: {}, http: {}, route: {}, leafnode: {} }}\n}}\nleaves {{\n{leaves}}}\n",
            p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
        )
    };
    let both = format!(
        "  l1 {{ port: {}, http: {} }}\n  l2 {{ port: {}, http: {}, hub: HUB }}\n",
        p[8], p[9], p[10], p[11]
    );
    let file = dir.join("leaves.conf");
    std::fs::write(&file, text(&both)).expect("write topology");
    let one = dir.join("one-leaf.conf");
    let l1 = format!("  l1 {{ port: {}, http: {} }}\n", p[8], p[9]);
    std::fs::write(&one, text(&l1)).expect("write topology");
    let mut up = Launcher::start(&file);
    let out = up.wait_ready();
    assert!(
        out.iter()
            .any(|l| l.starts_with("cluster ready: cluster HUB, 2 nodes and 2 leaves")),
        "{out:#?}"
    );
    for (port, what) in [
        (p[3], "leafnodes nats-leaf://127.0.0.1"),
        (p[8], "leaf of HUB"),
    ] {
        assert!(
            out.iter()
                .any(|l| l.contains(&port.to_string()) && l.contains(what)),
            "{port} {what}: {out:#?}"
        );
    }
    // Leaf to leaf, through the hub.
    crosses(p[8], p[10], "topo.leaf", "from l1 to l2");
    let (code, text) = check(&file);
    assert_eq!(code, Some(0), "check failed:\n{text}");
    assert!(text.contains("ok: leaf of HUB"), "{text}");
    assert!(text.contains("2 nodes and 2 leaves"), "{text}");
    // The hub has a leaf the one-leaf file does not know.
    let (code, text) = check(&one);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("\"l2\" (not one of its leaves)"), "{text}");
    up.stop_all(&p);
    let _ = std::fs::remove_dir_all(&dir);
}
