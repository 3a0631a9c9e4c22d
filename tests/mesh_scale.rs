//! A large cluster on loopback: N natsd processes all seeded to node 0, default pools (3 plus
//! the pinned `$SYS` route per pair). N is 100 in an optimized build
//! (`cargo test --release --test mesh_scale`) and 30 in a debug one (a hundred debug builds
//! are too slow for a 2-core CI machine); `NATSD_MESH_NODES` sets it, `NATSD_BIN` runs another
//! natsd binary (e.g. `target/release/natsd` from the debug test).
//! Checked: every node reaches every other with exactly the expected connections, the mesh
//! forms without duplicate-route churn (no more route closes in all than nodes — nats-server
//! 2.10.16 floods duplicates here, its issue #5483), and it stays whole. Reported (stderr):
//! the time to a full mesh and each node's RSS (an optimized build must stay within 40 MiB
//! per node, checked when the test binary is built without debug assertions).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}

fn varz(http: u16) -> Option<serde_json::Value> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", http)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /varz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let body = text.split_once("\r\n\r\n")?.1;
    serde_json::from_str(body).ok()
}

/// CPU seconds (user + system) a process has used so far, from `/proc/<pid>/stat` (0 when
/// unreadable).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may hold spaces) in parentheses: utime and stime are
    // the 14th and 15th fields of the line, the 12th and 13th after it.
    let Some((_, rest)) = stat.rsplit_once(") ") else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

#[test]
fn many_nodes_seeded_to_one_form_a_full_pooled_mesh_without_churn() {
    let n: usize = std::env::var("NATSD_MESH_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 30 } else { 100 });
    let per_peer = 4; // pool of 3 + pinned $SYS
    let want = (n - 1) * per_peer;
    let bin = std::env::var("NATSD_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_natsd").into());
    let ports: Vec<(u16, u16, u16)> = (0..n)
        .map(|_| {
            (
                common::free_port(),
                common::free_port(),
                common::free_port(),
            )
        })
        .collect();
    let seed = format!("nats-route://127.0.0.1:{}", ports[0].1);
    let closes = Arc::new(AtomicUsize::new(0));
    let why: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let mut procs = Procs(Vec::new());
    let started = Instant::now();
    for (i, (c, r, h)) in ports.iter().enumerate() {
        let mut child = Command::new(&bin)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &c.to_string(),
                "-m",
                &h.to_string(),
            ])
            .args(["-n", &format!("n{i}"), "--cluster_name", "BIG"])
            .args(["--cluster", &format!("nats://127.0.0.1:{r}")])
            .args(["--routes", &seed])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn natsd");
        let err = child.stderr.take().expect("stderr");
        let (closes, why) = (closes.clone(), why.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Some((_, reason)) = line.split_once("Router connection closed: ") {
                    closes.fetch_add(1, Relaxed);
                    if let Ok(mut w) = why.lock() {
                        *w.entry(reason.to_string()).or_default() += 1;
                    }
                }
            }
        });
        procs.0.push(child);
    }
    let routes = |h: u16| varz(h).and_then(|v| v["routes"].as_u64());
    let deadline = started + Duration::from_secs(120);
    let formed = loop {
        let counts: Vec<Option<u64>> = ports.iter().map(|p| routes(p.2)).collect();
        if counts.iter().all(|c| *c == Some(want as u64)) {
            break started.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "no full mesh of {n} nodes in 120 s: {} nodes complete, route counts {:?}",
            counts.iter().filter(|c| **c == Some(want as u64)).count(),
            counts
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let closes_at_mesh = closes.load(Relaxed);
    let cpu_at_mesh: f64 = procs.0.iter().map(|c| cpu_seconds(c.id())).sum();
    // Still whole a moment later, and the churn did not go on.
    std::thread::sleep(Duration::from_secs(2));
    let mut rss = Vec::new();
    for p in &ports {
        let v = varz(p.2).expect("varz");
        assert_eq!(v["routes"].as_u64(), Some(want as u64), "mesh not stable");
        rss.push(v["mem"].as_u64().unwrap_or(0));
    }
    let closes_total = closes.load(Relaxed);
    let max_rss = rss.iter().copied().max().unwrap_or(0);
    let mean_rss = rss.iter().sum::<u64>() / rss.len() as u64;
    eprintln!(
        "{n} nodes, {want} route connections each: full mesh after {:.2} s (from the first \
         spawn); route closes {closes_at_mesh} at mesh, {closes_total} after 2 s more; RSS per \
         node mean {:.1} MiB, max {:.1} MiB",
        formed.as_secs_f64(),
        mean_rss as f64 / 1048576.0,
        max_rss as f64 / 1048576.0
    );
    let reasons = why.lock().map(|w| w.clone()).unwrap_or_default();
    eprintln!("route closes by reason: {reasons:?}");
    // CPU spent by all nodes until the mesh was whole: with more than the machine's cores'
    // worth of it in that time, forming is CPU-bound.
    eprintln!(
        "CPU (user + system) of all nodes until the full mesh: {cpu_at_mesh:.1} s ({:.2} s \
         per node)",
        cpu_at_mesh / n as f64
    );
    assert!(
        closes_total <= n,
        "{closes_total} route closes for {n} nodes: duplicate-route churn ({reasons:?})"
    );
    if !cfg!(debug_assertions) && std::env::var("NATSD_BIN").is_err() {
        assert!(
            max_rss <= 40 * 1024 * 1024,
            "a node uses {max_rss} bytes (over 40 MiB)"
        );
    }
}
