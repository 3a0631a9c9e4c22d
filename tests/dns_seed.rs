//! A DNS name that stands for many nodes, as a Kubernetes headless Service does: every node
//! seeds the same name, which resolves (through /etc/hosts inside a network namespace this
//! test creates) to all five nodes' addresses. natsd dials every address, so the cluster must
//! form one full mesh on every start — nats-server, dialling one address at random, sometimes
//! stays split. Needs root and iproute2 (CI runs as root).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODES: usize = 5;
const ROUNDS: usize = 5;

/// A network namespace with loopback up and its own /etc/hosts; removed on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn new(tag: usize) -> Netns {
        let name = format!("natsd-dns-{}-{tag}", std::process::id());
        let ok = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "cannot create a network namespace (needs root and iproute2)"
        );
        let ns = Netns { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        let dir = format!("/etc/netns/{}", ns.name);
        std::fs::create_dir_all(&dir).expect("netns dir");
        let hosts: String = (0..NODES)
            .map(|i| format!("127.0.0.{} seed.natsd.test\n", i + 2))
            .collect();
        std::fs::write(format!("{dir}/hosts"), hosts).expect("hosts");
        ns
    }

    fn exec(&self, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .expect("ip netns exec");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn spawn(&self, args: &[String]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn in netns")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.name));
    }
}

struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `routes` from each node's /varz, fetched inside the namespace.
fn route_counts(ns: &Netns) -> Vec<Option<u64>> {
    let script = format!(
        "import json,urllib.request\nfor i in range({NODES}):\n  try:\n    v=json.load(urllib.request.urlopen('http://127.0.0.%d:8222/varz'%(i+2),timeout=1))\n    print(v['routes'])\n  except Exception:\n    print(-1)\n"
    );
    ns.exec(&["python3", "-c", &script])
        .lines()
        .map(|l| {
            l.trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .map(|n| n as u64)
        })
        .collect()
}

#[test]
fn every_node_seeding_one_multi_address_name_forms_a_full_mesh() {
    let bin = env!("CARGO_BIN_EXE_natsd");
    for round in 0..ROUNDS {
        let ns = Netns::new(round);
        let nodes = Nodes(
            (0..NODES)
                .map(|i| {
                    let ip = format!("127.0.0.{}", i + 2);
                    ns.spawn(&[
                        bin.to_string(),
                        "-a".into(),
                        ip.clone(),
                        "-p".into(),
                        "4222".into(),
                        "-m".into(),
                        "8222".into(),
                        "-n".into(),
                        format!("n{i}"),
                        "--cluster".into(),
                        format!("nats://{ip}:6222"),
                        "--cluster_name".into(),
                        "C1".into(),
                        "--routes".into(),
                        "nats-route://seed.natsd.test:6222".into(),
                    ])
                })
                .collect(),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut counts;
        loop {
            counts = route_counts(&ns);
            // Each peer once per route connection: the pool of 3 and the pinned $SYS route.
            if counts.len() == NODES && counts.iter().all(|c| *c == Some(4 * (NODES as u64 - 1))) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no full mesh, routes per node: {counts:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still a full mesh a moment later: no duplicate churn.
        std::thread::sleep(Duration::from_millis(1500));
        let again = route_counts(&ns);
        assert!(
            again.iter().all(|c| *c == Some(4 * (NODES as u64 - 1))),
            "round {round}: mesh not stable: {again:?}"
        );
        drop(nodes);
    }
}
