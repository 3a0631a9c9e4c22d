//! A Kubernetes StatefulSet + headless Service, simulated without Kubernetes (recipe:
//! ../shared/spec/k8s-simulation.md): one network namespace per pod on a bridge that lives in a
//! switch namespace of its own, dnsmasq in the switch namespace as the cluster DNS (per-pod names
//! and the headless name with one A record per pod, from a hostsdir file it re-reads), and each
//! pod's resolv.conf with the kubelet's search path. Every pod runs natsd with a config like the
//! Helm chart renders: the single cluster seed is the headless Service name.
//!
//! `statefulset_with_headless_seed_meshes_survives_rolling_restart_and_ip_change` checks (a)
//! the three pods started at once form a full mesh; (b) a rolling restart,
//! highest ordinal first, each pod through lame duck (`natsd --signal ldm=<pidfile>`), restarted
//! on the same IP and waited for (`/healthz` 200, full mesh), while a publisher in one pod and a
//! subscriber in another keep going — the subscriber must keep receiving (it may move to
//! another pod); (c) a pod that comes back with a new IP rejoins and no route to its old IP
//! remains anywhere. `three_and_five_pods_always_form_a_full_mesh` starts 3 and then 5 pods at
//! once, 30 times each (fresh natsd processes every run), and fails on any start that does not
//! reach a full mesh (nats-server splits into islands about 1 start in 15);
//! `pod_whose_dns_record_appears_late_joins` publishes nats-2's records 5 s after the start and
//! wants the full mesh within 2 s of that.
//!
//! `jetstream_r3_stream_across_pods_survives_a_pod_restart` (in `k8s_sim/jetstream.rs`) runs
//! the chart's JetStream cluster config: an R3 stream across the pods, its leader's pod rolled.
//! `jetstream_r3_stream_survives_a_rolling_restart_under_publishing` (`k8s_sim/js_rolling.rs`)
//! rolls all three pods as a StatefulSet RollingUpdate does while a publisher keeps publishing
//! with acks: no acknowledged message lost, duplicated or reordered, every pod's copy whole.
//! `helm_test_pods_pass_against_the_jetstream_statefulset` (`k8s_sim/helm_test.rs`) runs the
//! chart's `helm test` pods (deploy/helm-test/pods.json, busybox `sh` and `nc`) through the
//! client Service name against the JetStream cluster.
//!
//! All traffic stays in namespaces this test creates (the root namespace gets no address, route
//! or bridge); names derive from the pid and a per-test tag so parallel runs and the tests of
//! this binary (parallel threads) do not clash; a Drop guard kills every
//! child and removes the namespaces, /etc/netns dirs and the temp dir even when an assertion
//! fails. Needs root, iproute2, python3 and dnsmasq (Debian `dnsmasq-base`), and for the helm
//! test Debian's `busybox`: without them the test fails, it never skips.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const PODS: usize = 3;
/// Parallel starts per cluster size in `three_and_five_pods_always_form_a_full_mesh` (at least
/// this many; `NATSD_K8S_SIM_RUNS` may ask for more).
const MESH_RUNS: usize = 30;
/// A start that has not meshed by then is a split (natsd re-dials its seed every second, so a
/// healthy start meshes in about a second at worst).
const MESH_DEADLINE: Duration = Duration::from_secs(5);
const HEADLESS: &str = "nats-headless.default.svc.cluster.local";
const SUBJECT: &str = "k8s.sim";

/// Progress and measurements, written straight to stderr so they show in CI logs even when
/// the test passes (libtest captures only `print!`/`eprint!`).
macro_rules! report {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stderr(), "[k8s_sim] {}", format!($($t)*));
    }};
}

/// Route connections between two pods: natsd's default pool of 3 and the pinned `$SYS` one.
const ROUTES_PER_PEER: usize = 4;

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd} {args:?}: {e}"))
}

/// Run a command that must succeed.
fn must(cmd: &str, args: &[&str]) {
    let out = run(cmd, args);
    assert!(
        out.status.success(),
        "`{cmd} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn ns_exec_args<'a>(ns: &'a str, args: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["netns", "exec", ns];
    v.extend_from_slice(args);
    v
}

/// The test cannot run without these; say so loudly instead of skipping.
fn require_environment() -> String {
    let uid = run("id", &["-u"]);
    let uid = String::from_utf8_lossy(&uid.stdout).trim().to_string();
    assert_eq!(
        uid, "0",
        "tests/k8s_sim.rs must run as root (it creates network namespaces); uid is {uid}"
    );
    let ip = Command::new("ip").arg("-V").output();
    assert!(
        ip.map(|o| o.status.success()).unwrap_or(false),
        "tests/k8s_sim.rs needs `ip` from iproute2 (apt-get install iproute2)"
    );
    let py = Command::new("python3").arg("-V").output();
    assert!(
        py.map(|o| o.status.success()).unwrap_or(false),
        "tests/k8s_sim.rs needs python3 (its probes and NATS clients are python3 scripts)"
    );
    for cand in ["dnsmasq", "/usr/sbin/dnsmasq", "/usr/local/sbin/dnsmasq"] {
        if Command::new(cand)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
        {
            return cand.to_string();
        }
    }
    panic!(
        "tests/k8s_sim.rs needs dnsmasq as the simulated cluster DNS: apt-get install dnsmasq-base"
    );
}

fn wait_until<T>(
    what: &str,
    timeout: Duration,
    f: impl FnMut() -> Result<T, String>,
) -> (T, Duration) {
    wait_until_every(what, timeout, Duration::from_millis(100), f)
}

fn wait_until_every<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut f: impl FnMut() -> Result<T, String>,
) -> (T, Duration) {
    let start = Instant::now();
    loop {
        match f() {
            Ok(v) => return (v, start.elapsed()),
            Err(last) => {
                assert!(
                    start.elapsed() < timeout,
                    "timed out after {timeout:?} waiting for {what}; last state: {last}"
                );
            }
        }
        std::thread::sleep(every);
    }
}

/// min / median / max of some durations, for the reports.
fn stats(v: &[Duration]) -> String {
    let mut v = v.to_vec();
    v.sort();
    if v.is_empty() {
        return "no samples".into();
    }
    format!(
        "min {:?} / median {:?} / max {:?} over {} runs",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1],
        v.len()
    )
}

struct Pod {
    /// `nats-<ordinal>`: server_name and per-pod DNS name.
    name: String,
    ns: String,
    ip: String,
    natsd: Option<Child>,
    conf: PathBuf,
    pid_file: PathBuf,
    log: PathBuf,
}

/// Everything the test created; dropped (even on panic) it kills every child and removes
/// every namespace, /etc/netns dir and the temp dir.
struct Sim {
    tag: String,
    net: String,
    dir: PathBuf,
    sw: String,
    bridge: String,
    namespaces: Vec<String>,
    veths: usize,
    pods: Vec<Pod>,
    dnsmasq: Option<Child>,
    clients: Vec<(String, Child, PathBuf)>,
    bin: String,
    scripts: PathBuf,
}

impl Sim {
    /// A switch namespace with its bridge and dnsmasq, no pods yet. `test` tells apart the
    /// tests of this binary (they run in parallel threads of one process, so one pid): names
    /// are `k<pid><test>...`, and interface names stay within 15 characters for `test` up to
    /// 3 characters.
    fn new(dnsmasq: &str, test: &str) -> Sim {
        assert!(
            test.len() <= 3,
            "test tag {test:?} too long for interface names"
        );
        let pid = std::process::id();
        let tag = format!("k{pid}{test}");
        let dir = std::env::temp_dir().join(format!("natsd-k8s-sim-{pid}-{test}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("hosts.d")).expect("temp dir");
        let mut sim = Sim {
            sw: format!("{tag}sw"),
            bridge: format!("{tag}br"),
            net: format!("10.99.{}", 1 + pid % 250),
            tag,
            dir,
            namespaces: Vec::new(),
            veths: 0,
            pods: Vec::new(),
            dnsmasq: None,
            clients: Vec::new(),
            bin: env!("CARGO_BIN_EXE_natsd").to_string(),
            scripts: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/k8s_sim"),
        };
        // The switch: a bridge in its own namespace, so no host interface joins the subnet.
        let sw = sim.sw.clone();
        sim.add_netns(&sw);
        must(
            "ip",
            &["-n", &sw, "link", "add", &sim.bridge, "type", "bridge"],
        );
        // A fixed MAC: a bridge otherwise takes its lowest port's MAC and changes it when that
        // port goes (a pod deleted), leaving every pod's ARP entry for the DNS server stale.
        must(
            "ip",
            &[
                "-n",
                &sw,
                "link",
                "set",
                &sim.bridge,
                "address",
                "02:99:00:00:00:01",
            ],
        );
        let gw = format!("{}.1/24", sim.net);
        must("ip", &["-n", &sw, "addr", "add", &gw, "dev", &sim.bridge]);
        must("ip", &["-n", &sw, "link", "set", &sim.bridge, "up"]);
        // The cluster DNS. Unknown names are NXDOMAIN (as CoreDNS), nothing is forwarded,
        // the hostsdir is re-read on change, TTL 5 s like CoreDNS' cache.
        sim.write_dns(&[]);
        let log = std::fs::File::create(sim.dir.join("dnsmasq.out")).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &sw, dnsmasq])
            .args([
                "--keep-in-foreground",
                "--no-resolv",
                "--no-hosts",
                "--no-poll",
                &format!("--listen-address={}.1", sim.net),
                "--bind-interfaces",
                "--port=53",
                "--user=root",
                "--local=/#/",
                "--domain-needed",
                "--bogus-priv",
                &format!("--hostsdir={}", sim.dir.join("hosts.d").display()),
                "--local-ttl=5",
                "--no-negcache",
                "--log-queries",
                &format!("--log-facility={}", sim.dir.join("dnsmasq.log").display()),
                &format!("--pid-file={}", sim.dir.join("dnsmasq.pid").display()),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start dnsmasq");
        sim.dnsmasq = Some(child);
        sim
    }

    fn add_netns(&mut self, ns: &str) {
        // A namespace left by a crashed run with the same pid can only be ours.
        let _ = run("ip", &["netns", "del", ns]);
        must("ip", &["netns", "add", ns]);
        self.namespaces.push(ns.to_string());
        must("ip", &["-n", ns, "link", "set", "lo", "up"]);
    }

    /// A namespace `<tag><kind>n<k>` with `eth0` at `ip` on the bridge.
    fn add_veth_netns(&mut self, kind: &str, ip: &str) -> String {
        self.veths += 1;
        let ns = format!("{}{kind}n{}", self.tag, self.veths);
        let veth = format!("{}v{}", self.tag, self.veths);
        self.add_netns(&ns);
        must(
            "ip",
            &[
                "-n", &ns, "link", "add", "eth0", "type", "veth", "peer", "name", &veth,
            ],
        );
        must("ip", &["-n", &ns, "link", "set", &veth, "netns", &self.sw]);
        must(
            "ip",
            &["-n", &self.sw, "link", "set", &veth, "master", &self.bridge],
        );
        must("ip", &["-n", &self.sw, "link", "set", &veth, "up"]);
        must(
            "ip",
            &["-n", &ns, "addr", "add", &format!("{ip}/24"), "dev", "eth0"],
        );
        must("ip", &["-n", &ns, "link", "set", "eth0", "up"]);
        ns
    }

    /// The resolv.conf and hosts a kubelet writes for a pod (`ip netns exec` bind-mounts
    /// /etc/netns/<ns>/*): `search` is `subdomain` (a StatefulSet pod's headless Service) if
    /// any, then the namespace's names.
    fn write_pod_files(&self, ns: &str, subdomain: Option<&str>, hosts: &str) {
        let etc = format!("/etc/netns/{ns}");
        std::fs::create_dir_all(&etc).expect("/etc/netns dir");
        let sub = subdomain.map(|s| format!("{s} ")).unwrap_or_default();
        std::fs::write(
            format!("{etc}/resolv.conf"),
            format!(
                "nameserver {}.1\nsearch {sub}default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
                self.net
            ),
        )
        .expect("resolv.conf");
        std::fs::write(
            format!("{etc}/hosts"),
            format!("127.0.0.1 localhost\n{hosts}"),
        )
        .expect("hosts");
    }

    /// A pod namespace with `eth0` at `ip` on the bridge, and the resolv.conf/hosts a kubelet
    /// writes for a StatefulSet pod.
    fn add_pod_netns(&mut self, ordinal: usize, ip: &str) -> String {
        let ns = self.add_veth_netns(&format!("p{ordinal}"), ip);
        self.write_pod_files(
            &ns,
            Some(HEADLESS),
            &format!("{ip} nats-{ordinal}.{HEADLESS} nats-{ordinal}\n"),
        );
        ns
    }

    /// A pod of namespace `default` that is not one of the StatefulSet's (a client, a `helm
    /// test` pod): its namespace at `.<host>` and its kubelet files.
    fn add_client_netns(&mut self, name: &str, host: u32) -> String {
        let ip = self.pod_ip(host);
        let ns = self.add_veth_netns("c", &ip);
        self.write_pod_files(&ns, None, &format!("{ip} {name}\n"));
        ns
    }

    /// The client Service `fqdn` (`<service>.default.svc.cluster.local`): a ClusterIP Service
    /// sends each connection to one of its ready endpoints; here its DNS name answers the
    /// ready pods' addresses (`ips`), and the test rewrites them as pods leave and become
    /// ready again (the endpoints controller).
    fn write_service(&self, fqdn: &str, ips: &[String]) {
        let s: String = ips.iter().map(|ip| format!("{ip} {fqdn}\n")).collect();
        let tmp = self.dir.join("service.tmp");
        std::fs::write(&tmp, s).expect("hosts file");
        std::fs::rename(&tmp, self.dir.join("hosts.d/service")).expect("hosts file");
    }

    fn pod_ip(&self, host: u32) -> String {
        format!("{}.{host}", self.net)
    }

    /// The headless Service's records: `nats-i.<headless>` per pod and the headless name with
    /// one A record per pod. Written elsewhere and renamed in, so dnsmasq reads it whole.
    fn write_dns(&self, pods: &[(String, String)]) {
        let mut s = String::new();
        for (name, ip) in pods {
            s.push_str(&format!("{ip} {name}.{HEADLESS}\n"));
        }
        for (_, ip) in pods {
            s.push_str(&format!("{ip} {HEADLESS}\n"));
        }
        let tmp = self.dir.join("pods.tmp");
        std::fs::write(&tmp, s).expect("hosts file");
        std::fs::rename(&tmp, self.dir.join("hosts.d/pods")).expect("hosts file");
    }

    fn publish_dns(&self) {
        let recs: Vec<(String, String)> = self
            .pods
            .iter()
            .map(|p| (p.name.clone(), p.ip.clone()))
            .collect();
        self.write_dns(&recs);
    }

    /// What a pod resolves the headless name to, through its resolv.conf and dnsmasq.
    fn resolve_in(&self, ns: &str, name: &str) -> BTreeSet<String> {
        let out = run("ip", &ns_exec_args(ns, &["getent", "ahostsv4", name]));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    }

    fn wait_dns(&self, ns: &str) {
        let want: BTreeSet<String> = self.pods.iter().map(|p| p.ip.clone()).collect();
        self.wait_resolves(ns, &want);
    }

    /// `n` pods `nats-0..n` at `.10`, `.11`, ... (namespaces and configs; nothing started,
    /// no DNS published).
    fn with_pods(dnsmasq: &str, test: &str, n: usize) -> Sim {
        let mut sim = Sim::new(dnsmasq, test);
        for i in 0..n {
            let ip = sim.pod_ip(10 + i as u32);
            let pod = sim.new_pod(i, ip);
            sim.pods.push(pod);
        }
        sim
    }

    /// Wait until, from `ns`, the headless name resolves to exactly `want`.
    fn wait_resolves(&self, ns: &str, want: &BTreeSet<String>) {
        self.wait_name_resolves(ns, HEADLESS, want);
    }

    /// Wait until, from `ns` (through its resolv.conf), `name` resolves to exactly `want`.
    fn wait_name_resolves(&self, ns: &str, name: &str, want: &BTreeSet<String>) {
        wait_until(
            &format!("{name} to resolve to {want:?}"),
            Duration::from_secs(10),
            || {
                let got = self.resolve_in(ns, name);
                if got == *want {
                    Ok(())
                } else {
                    Err(format!("{got:?}, want {want:?}"))
                }
            },
        );
    }

    fn new_pod(&mut self, ordinal: usize, ip: String) -> Pod {
        let ns = self.add_pod_netns(ordinal, &ip);
        let name = format!("nats-{ordinal}");
        let conf = self.dir.join(format!("{name}.conf"));
        let pid_file = self.dir.join(format!("{name}.pid"));
        // As the Helm chart renders it (config.cluster.seed: headless).
        std::fs::write(
            &conf,
            format!(
                "server_name: \"{name}\"\nport: 4222\nhttp: 8222\npid_file: \"{}\"\n\
                 lame_duck_duration: \"3s\"\nlame_duck_grace_period: \"1s\"\n\
                 cluster {{\n  name: nats\n  listen: 0.0.0.0:6222\n  routes: [\n    \
                 nats-route://{HEADLESS}:6222\n  ]\n}}\n",
                pid_file.display()
            ),
        )
        .expect("config");
        Pod {
            log: self.dir.join(format!("{name}.log")),
            name,
            ns,
            ip,
            natsd: None,
            conf,
            pid_file,
        }
    }

    fn start(&mut self, i: usize) {
        let pod = &mut self.pods[i];
        let _ = std::fs::remove_file(&pod.pid_file);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&pod.log)
            .expect("log");
        let _ = writeln!(&log, "===== start in {} at {} =====", pod.ns, pod.ip);
        let child = Command::new("ip")
            .args(["netns", "exec", &pod.ns, &self.bin, "-D", "-c"])
            .arg(&pod.conf)
            // As the StatefulSet sets it (the rendered config names it `$SERVER_NAME`).
            .env("SERVER_NAME", &pod.name)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start natsd");
        pod.natsd = Some(child);
    }

    /// Every pod at once (Parallel pod management).
    fn start_all(&mut self) {
        for i in 0..self.pods.len() {
            self.start(i);
        }
    }

    /// Kill every natsd (SIGKILL) and reap it, so the next start is a fresh process.
    fn stop_all(&mut self) {
        for p in &mut self.pods {
            if let Some(mut c) = p.natsd.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    fn start_client(&mut self, mode: &str, pod: usize) -> PathBuf {
        let status = self.dir.join(format!("{mode}.json"));
        let p = &self.pods[pod];
        let script = self.scripts.join("client.py");
        let log = std::fs::File::create(self.dir.join(format!("{mode}.out"))).expect("log");
        let child = Command::new("ip")
            .args(["netns", "exec", &p.ns, "python3"])
            .arg(&script)
            .args([
                mode,
                &status.display().to_string(),
                &p.name,
                HEADLESS,
                SUBJECT,
                "170",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start client");
        self.clients.push((mode.to_string(), child, status.clone()));
        status
    }

    /// GET each path on each pod's monitoring port, from inside the switch namespace.
    fn probe(&self, urls: &[String]) -> Vec<(u16, Value)> {
        let script = self.scripts.join("probe.py");
        let script = script.display().to_string();
        let mut args = vec!["netns", "exec", &self.sw, "python3", &script];
        args.extend(urls.iter().map(String::as_str));
        let out = run("ip", &args);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "probe output: {e}: {} {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        v.as_array()
            .expect("array")
            .iter()
            .map(|r| (r["status"].as_u64().unwrap_or(0) as u16, r["body"].clone()))
            .collect()
    }

    fn healthz(&self, i: usize) -> u16 {
        self.probe(&[format!("http://{}:8222/healthz", self.pods[i].ip)])[0].0
    }

    /// Ok when every pod answers /healthz 200 and its /routez has exactly one route to each
    /// other pod, by name, at that pod's current IP. Err describes what is off.
    fn full_mesh(&self) -> Result<Vec<Value>, String> {
        self.check_full_mesh(&self.snapshot())
    }

    /// Every pod's /healthz and /routez, in pod order: `2*i` is pod i's /healthz, `2*i + 1`
    /// its /routez.
    fn snapshot(&self) -> Vec<(u16, Value)> {
        let mut urls = Vec::new();
        for p in &self.pods {
            urls.push(format!("http://{}:8222/healthz", p.ip));
            urls.push(format!("http://{}:8222/routez", p.ip));
        }
        self.probe(&urls)
    }

    /// `full_mesh` on a snapshot taken earlier.
    fn check_full_mesh(&self, res: &[(u16, Value)]) -> Result<Vec<Value>, String> {
        let mut problems = Vec::new();
        let mut routez = Vec::new();
        for (i, p) in self.pods.iter().enumerate() {
            let (hz, _) = &res[2 * i];
            let (rz, body) = &res[2 * i + 1];
            if *hz != 200 {
                problems.push(format!("{}: /healthz {hz}", p.name));
            }
            if *rz != 200 {
                problems.push(format!("{}: /routez {rz}", p.name));
                continue;
            }
            let got: Vec<(String, String)> = body["routes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|r| {
                            (
                                r["remote_name"].as_str().unwrap_or("?").to_string(),
                                r["ip"].as_str().unwrap_or("?").to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            // Every other pod, once per route connection: the default pool of 3 plus the
            // system account's pinned route (nats-server 2.10+'s defaults).
            let mut want: Vec<(String, String)> = self
                .pods
                .iter()
                .filter(|o| o.name != p.name)
                .flat_map(|o| std::iter::repeat_n((o.name.clone(), o.ip.clone()), ROUTES_PER_PEER))
                .collect();
            let mut sorted = got.clone();
            sorted.sort();
            want.sort();
            let n = self.pods.len() as u64;
            if sorted != want
                || body["num_routes"].as_u64() != Some((n - 1) * ROUTES_PER_PEER as u64)
            {
                problems.push(format!(
                    "{}: num_routes {} routes (remote_name, ip) {got:?}, want {want:?}",
                    p.name, body["num_routes"]
                ));
            }
            routez.push(body.clone());
        }
        if problems.is_empty() {
            Ok(routez)
        } else {
            Err(problems.join("; "))
        }
    }

    /// The /routez evidence of a snapshot, one line per pod: healthz, num_routes and each
    /// route's remote_name@ip (solicited or not, configured or gossiped).
    fn evidence(&self, res: &[(u16, Value)]) -> String {
        let mut s = String::new();
        for (i, p) in self.pods.iter().enumerate() {
            let (hz, _) = &res[2 * i];
            let (rz, body) = &res[2 * i + 1];
            let routes: Vec<String> = body["routes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    format!(
                        "{}@{}:{}{}{}",
                        r["remote_name"].as_str().unwrap_or("?"),
                        r["ip"].as_str().unwrap_or("?"),
                        r["port"],
                        if r["did_solicit"] == true {
                            " out"
                        } else {
                            " in"
                        },
                        if r["is_configured"] == true {
                            " cfg"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            s.push_str(&format!(
                "\n  {} {}: /healthz {hz}, /routez {rz} num_routes {} routes {routes:?}",
                p.name, p.ip, body["num_routes"]
            ));
        }
        s
    }

    /// Islands: every pod up with at least one route, yet the route graph is not connected
    /// (nats-server's split). `None` when the snapshot is not in that state.
    fn islands(&self, res: &[(u16, Value)]) -> Option<Vec<BTreeSet<String>>> {
        let n = self.pods.len();
        let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        for i in 0..n {
            let (rz, body) = &res[2 * i + 1];
            let routes = body["routes"].as_array()?;
            if *rz != 200 || routes.is_empty() {
                return None;
            }
            for r in routes {
                if let Some(j) = self
                    .pods
                    .iter()
                    .position(|p| Some(p.name.as_str()) == r["remote_name"].as_str())
                {
                    adj[i].insert(j);
                    adj[j].insert(i);
                }
            }
        }
        let mut seen = vec![false; n];
        let mut parts = Vec::new();
        for s in 0..n {
            if seen[s] {
                continue;
            }
            let mut part = BTreeSet::new();
            let mut stack = vec![s];
            seen[s] = true;
            while let Some(i) = stack.pop() {
                part.insert(self.pods[i].name.clone());
                for &j in &adj[i] {
                    if !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
            parts.push(part);
        }
        (parts.len() > 1).then_some(parts)
    }

    fn wait_full_mesh(&self, what: &str) -> Duration {
        wait_until(what, Duration::from_secs(20), || self.full_mesh()).1
    }

    fn lame_duck(&self, i: usize) {
        let p = &self.pods[i];
        let arg = format!("ldm={}", p.pid_file.display());
        let out = run(
            "ip",
            &ns_exec_args(&p.ns, &[self.bin.as_str(), "--signal", &arg]),
        );
        assert!(
            out.status.success(),
            "natsd --signal {arg} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Lame duck, then wait for the process to exit on its own; returns (saw /healthz 503
    /// while draining, time from the signal to the exit).
    fn drain(&mut self, i: usize) -> (bool, Duration) {
        wait_until(
            &format!("{}'s pid file", self.pods[i].name),
            Duration::from_secs(5),
            || {
                std::fs::read_to_string(&self.pods[i].pid_file)
                    .map_err(|e| e.to_string())
                    .map(|_| ())
            },
        );
        let t0 = Instant::now();
        self.lame_duck(i);
        let mut unready = false;
        let name = self.pods[i].name.clone();
        let status = loop {
            if let Some(st) = self.pods[i]
                .natsd
                .as_mut()
                .expect("running")
                .try_wait()
                .expect("wait")
            {
                break st;
            }
            if t0.elapsed() > Duration::from_secs(15) {
                let ip = &self.pods[i].ip;
                let state = self.probe(&[
                    format!("http://{ip}:8222/healthz"),
                    format!("http://{ip}:8222/connz"),
                    format!("http://{ip}:8222/routez"),
                ]);
                panic!(
                    "{name} did not exit within 15 s of lame duck (duration 3 s); its \
                     /healthz, /connz, /routez: {state:?}"
                );
            }
            if !unready && self.healthz(i) == 503 {
                unready = true;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let took = t0.elapsed();
        self.pods[i].natsd = None;
        assert!(
            status.success(),
            "{name} exited with {status} after lame duck (want 0)"
        );
        (unready, took)
    }

    fn client_status(path: &Path) -> Value {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null)
    }

    /// Wait until the subscriber has received at least `more` new messages and the last one
    /// is fresh.
    fn wait_receiving(&self, sub: &Path, more: u64, what: &str) -> u64 {
        let base = Self::client_status(sub)["count"].as_u64().unwrap_or(0);
        wait_until(what, Duration::from_secs(15), || {
            let s = Self::client_status(sub);
            let n = s["count"].as_u64().unwrap_or(0);
            let fresh = s["since_last_rx"].as_f64().is_some_and(|t| t < 0.5);
            if n >= base + more && fresh {
                Ok(n)
            } else {
                Err(format!("received {} (from {base}); status {s}", n))
            }
        })
        .0
    }

    fn tail(path: &Path, lines: usize) -> String {
        let s = std::fs::read_to_string(path).unwrap_or_default();
        let v: Vec<&str> = s.lines().collect();
        v[v.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        for (_, c, _) in &mut self.clients {
            let _ = c.kill();
            let _ = c.wait();
        }
        for p in &mut self.pods {
            if let Some(c) = &mut p.natsd {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(c) = &mut self.dnsmasq {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            for p in &self.pods {
                report!(
                    "--- {} ({} at {}) log tail:\n{}",
                    p.name,
                    p.ns,
                    p.ip,
                    Self::tail(&p.log, 60)
                );
            }
            for (mode, _, status) in &self.clients {
                report!(
                    "--- {mode} client status: {}\n{}",
                    Self::client_status(status),
                    Self::tail(&self.dir.join(format!("{mode}.out")), 20)
                );
            }
            report!(
                "--- dnsmasq: {}\n{}",
                Self::tail(&self.dir.join("dnsmasq.out"), 10),
                Self::tail(&self.dir.join("dnsmasq.log"), 20)
            );
        }
        for ns in self.namespaces.iter().rev() {
            let _ = run("ip", &["netns", "del", ns]);
            let _ = std::fs::remove_dir_all(format!("/etc/netns/{ns}"));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn statefulset_with_headless_seed_meshes_survives_rolling_restart_and_ip_change() {
    let dnsmasq = require_environment();
    let t_start = Instant::now();
    let mut sim = Sim::with_pods(&dnsmasq, "a", PODS);
    sim.publish_dns();
    let ns0 = sim.pods[0].ns.clone();
    sim.wait_dns(&ns0);
    let short = sim.resolve_in(&ns0, "nats-2.nats-headless");
    assert_eq!(
        short,
        BTreeSet::from([sim.pods[2].ip.clone()]),
        "the search path must resolve nats-2.nats-headless"
    );

    // (a) Parallel pod management: all pods at once; a full mesh through the one seed name.
    sim.start_all();
    let took = sim.wait_full_mesh("a full mesh after a parallel start");
    report!("(a) full mesh of {PODS} pods {took:?} after starting them");

    // Traffic: a publisher in nats-0's namespace, a subscriber in nats-1's.
    let sub = sim.start_client("sub", 1);
    let publ = sim.start_client("pub", 0);
    sim.wait_receiving(&sub, 100, "the subscriber to receive");

    // (b) Rolling restart, highest ordinal first.
    for i in (0..PODS).rev() {
        let name = sim.pods[i].name.clone();
        let before = Sim::client_status(&sub)["count"].as_u64().unwrap_or(0);
        let (unready, drained) = sim.drain(i);
        // A pod without clients exits at once (as nats-server); one with clients waits out the
        // 1 s grace period, and meanwhile must report not ready.
        let had_clients = drained > Duration::from_millis(900);
        assert!(
            unready || !had_clients,
            "{name}: /healthz never answered 503 during a {drained:?} lame duck"
        );
        let during = Sim::client_status(&sub)["count"].as_u64().unwrap_or(0);
        sim.start(i);
        let t = Instant::now();
        wait_until(
            &format!("{name} /healthz 200 after restart"),
            Duration::from_secs(10),
            || match sim.healthz(i) {
                200 => Ok(()),
                s => Err(format!("/healthz {s}")),
            },
        );
        let healthy = t.elapsed();
        sim.wait_full_mesh(&format!("the full mesh after restarting {name}"));
        let meshed = t.elapsed();
        let after = sim.wait_receiving(&sub, 50, &format!("messages after restarting {name}"));
        report!(
            "(b) {name}: lame duck -> exit 0 in {drained:?} (/healthz 503 seen: {unready}); \
             subscriber +{} while draining; /healthz 200 {healthy:?} and full mesh {meshed:?} \
             after restart; received {after}",
            during - before
        );
        assert!(
            during > before || !had_clients,
            "{name}: the subscriber received nothing during {name}'s {drained:?} lame duck"
        );
    }

    // (c) nats-2 deleted and rescheduled with a new IP (a new pod network namespace).
    let old_ip = sim.pods[2].ip.clone();
    let (_, drained) = sim.drain(2);
    // The survivors drop their routes to it and keep theirs to each other.
    let survivors = [sim.pods[0].ip.clone(), sim.pods[1].ip.clone()];
    wait_until(
        "nats-0 and nats-1 to drop their routes to the departed nats-2",
        Duration::from_secs(10),
        || {
            let urls: Vec<String> = survivors
                .iter()
                .map(|ip| format!("http://{ip}:8222/routez"))
                .collect();
            let res = sim.probe(&urls);
            let names: Vec<Vec<String>> = res
                .iter()
                .map(|(_, b)| {
                    b["routes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|r| r["remote_name"].as_str().unwrap_or("?").to_string())
                        .collect()
                })
                .collect();
            let pool = |n: &str| vec![n.to_string(); ROUTES_PER_PEER];
            if names == [pool("nats-1"), pool("nats-0")] {
                Ok(())
            } else {
                Err(format!("routes by remote_name: {names:?}"))
            }
        },
    );
    let old_ns = sim.pods[2].ns.clone();
    must("ip", &["netns", "del", &old_ns]);
    let _ = std::fs::remove_dir_all(format!("/etc/netns/{old_ns}"));
    sim.namespaces.retain(|n| *n != old_ns);
    let new_ip = sim.pod_ip(22);
    let log = sim.pods[2].log.clone();
    let mut pod = sim.new_pod(2, new_ip.clone());
    pod.log = log;
    sim.pods[2] = pod;
    sim.publish_dns();
    sim.wait_dns(&ns0);
    let t = Instant::now();
    sim.start(2);
    sim.wait_full_mesh("the full mesh after nats-2 came back with a new IP");
    let rejoined = t.elapsed();
    // Still exactly that a moment later: nothing stale, no churn.
    std::thread::sleep(Duration::from_secs(2));
    let routez = sim
        .full_mesh()
        .unwrap_or_else(|e| panic!("mesh not stable after the IP change: {e}"));
    for (i, rz) in routez.iter().enumerate() {
        let ips: Vec<&str> = rz["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["ip"].as_str())
            .collect();
        assert!(
            !ips.contains(&old_ip.as_str()),
            "{}: a route to nats-2's old IP {old_ip} remains: {rz}",
            sim.pods[i].name
        );
    }
    report!(
        "(c) nats-2 {old_ip} -> {new_ip}: drained in {drained:?}, full mesh {rejoined:?} after \
         start, no route to {old_ip} anywhere"
    );
    sim.wait_receiving(&sub, 50, "messages after the IP change");

    let s = Sim::client_status(&sub);
    let p = Sim::client_status(&publ);
    report!(
        "subscriber: received {} (publisher: ~{} sent), missing {}, dups {}, connects {}, \
         ldm moves {}; LONGEST GAP {:.3} s (at t={:.1} s); gaps > 100 ms: {}",
        s["count"],
        p["sent"],
        s["missing"],
        s["dups"],
        s["reconnects"],
        s["ldm_moves"],
        s["max_gap"].as_f64().unwrap_or(-1.0),
        s["max_gap_at"].as_f64().unwrap_or(-1.0),
        s["gaps"]
    );
    report!(
        "publisher: sent {}, connects {}, ldm moves {}; events {}",
        p["sent"],
        p["reconnects"],
        p["ldm_moves"],
        p["events"]
    );
    report!("subscriber events {}", s["events"]);
    report!("total {:?}", t_start.elapsed());
    let gap = s["max_gap"].as_f64().unwrap_or(f64::MAX);
    assert!(
        gap < 1.0,
        "the subscriber stopped receiving for {gap:.3} s (limit 1 s): {s}"
    );
}

/// Parallel pod management with the single headless seed, many times over: 3 and 5 pods must
/// form a full mesh on every start (nats-server 2.9 splits into islands about 1 start in 15).
/// The namespaces, bridge and dnsmasq stay for all runs of one size; each run starts fresh
/// natsd processes and kills them afterwards.
#[test]
fn three_and_five_pods_always_form_a_full_mesh() {
    let dnsmasq = require_environment();
    let t_start = Instant::now();
    let runs = std::env::var("NATSD_K8S_SIM_RUNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(MESH_RUNS)
        .max(MESH_RUNS);
    for n in [3usize, 5] {
        let t_size = Instant::now();
        let mut sim = Sim::with_pods(&dnsmasq, &format!("m{n}"), n);
        sim.publish_dns();
        let ns0 = sim.pods[0].ns.clone();
        sim.wait_dns(&ns0);
        let mut times = Vec::new();
        let mut transient_islands = Vec::new();
        let mut first_probe = 0;
        for run in 1..=runs {
            sim.start_all();
            let t0 = Instant::now();
            let mut islands_seen = None;
            let mut probes = 0;
            let took = loop {
                probes += 1;
                let snap = sim.snapshot();
                let check = sim.check_full_mesh(&snap);
                if check.is_ok() {
                    break t0.elapsed();
                }
                if islands_seen.is_none() {
                    islands_seen = sim.islands(&snap).map(|p| (t0.elapsed(), p));
                }
                if t0.elapsed() > MESH_DEADLINE {
                    panic!(
                        "SPLIT: {n} pods started at once with the single seed \
                         nats-route://{HEADLESS}:6222, run {run}/{runs}: no full mesh \
                         {MESH_DEADLINE:?} after the start; islands now: {:?}; islands first \
                         seen: {islands_seen:?}; problems: {}; /routez:{}",
                        sim.islands(&snap),
                        check.unwrap_err(),
                        sim.evidence(&snap)
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            if let Some((at, parts)) = islands_seen {
                transient_islands.push(format!("run {run}: {parts:?} at {at:?}"));
            }
            if probes == 1 {
                first_probe += 1;
            }
            times.push(took);
            sim.stop_all();
        }
        report!(
            "{n} pods, {runs} parallel starts, all full mesh; time to full mesh: {} (already \
             full at the first /routez probe in {first_probe} runs: each probe of every pod \
             takes ~0.15 s); transient islands (healed before the deadline): {} {:?}; {:?} for this size",
            stats(&times),
            transient_islands.len(),
            transient_islands,
            t_size.elapsed()
        );
    }
    report!("mesh runs total {:?}", t_start.elapsed());
}

/// nats-2's records (its own name and its A record under the headless name) are published
/// only 5 s after all three pods started, like an endpoints update that lags; it must be in
/// the full mesh within 2 s of the records appearing.
#[test]
fn pod_whose_dns_record_appears_late_joins() {
    const DELAY: Duration = Duration::from_secs(5);
    const JOIN: Duration = Duration::from_secs(2);
    let dnsmasq = require_environment();
    let t_start = Instant::now();
    let mut sim = Sim::with_pods(&dnsmasq, "l", 3);
    let early: Vec<(String, String)> = sim.pods[..2]
        .iter()
        .map(|p| (p.name.clone(), p.ip.clone()))
        .collect();
    sim.write_dns(&early);
    let ns0 = sim.pods[0].ns.clone();
    sim.wait_resolves(&ns0, &early.iter().map(|(_, ip)| ip.clone()).collect());
    let late = sim.resolve_in(&ns0, "nats-2.nats-headless");
    assert!(
        late.is_empty(),
        "nats-2.nats-headless must not resolve before its record is published: {late:?}"
    );

    sim.start_all();
    let started = Instant::now();
    // Watch the cluster while nats-2 has no record (for the report only).
    let mut first_full: Option<Duration> = None;
    let mut last = None;
    while started.elapsed() + Duration::from_millis(300) < DELAY {
        let snap = sim.snapshot();
        if first_full.is_none() && sim.check_full_mesh(&snap).is_ok() {
            first_full = Some(started.elapsed());
        }
        last = Some(snap);
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = last.map(|s| sim.evidence(&s)).unwrap_or_default();
    std::thread::sleep(DELAY.saturating_sub(started.elapsed()));
    sim.publish_dns();
    let appeared = Instant::now();
    report!(
        "(late) nats-2's records published {:?} after the start; before that: full mesh first \
         seen at {first_full:?}; /routez just before:{before}",
        appeared - started
    );
    let (joined, probe_began) = loop {
        let probe_began = appeared.elapsed();
        let snap = sim.snapshot();
        let check = sim.check_full_mesh(&snap);
        if check.is_ok() {
            break (appeared.elapsed(), probe_began);
        }
        report!(
            "(late) {:?} after the records appeared: not a full mesh: {}; /routez:{}",
            appeared.elapsed(),
            check.as_ref().unwrap_err(),
            sim.evidence(&snap)
        );
        if appeared.elapsed() > JOIN {
            panic!(
                "nats-2 did not join within {JOIN:?} of its DNS records appearing ({:?} now); \
                 problems: {}; /routez:{}",
                appeared.elapsed(),
                check.unwrap_err(),
                sim.evidence(&snap)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let resolved = sim.resolve_in(&ns0, "nats-2.nats-headless");
    assert_eq!(
        resolved,
        BTreeSet::from([sim.pods[2].ip.clone()]),
        "nats-2.nats-headless must resolve once published"
    );
    report!(
        "(late) full mesh {joined:?} after nats-2's records appeared (limit {JOIN:?}; seen by \
         the probe begun at {probe_began:?}; {:?} after the start)",
        started.elapsed()
    );
    // Still exactly the full mesh a moment later: no duplicate routes from the new address.
    std::thread::sleep(Duration::from_secs(2));
    let snap = sim.snapshot();
    if let Err(e) = sim.check_full_mesh(&snap) {
        panic!(
            "the mesh did not stay full after nats-2 joined: {e}; /routez:{}",
            sim.evidence(&snap)
        );
    }
    report!("(late) total {:?}", t_start.elapsed());
}

/// A partition and its heal (issue 16): three pods meshed, then pod 2's link goes down. The
/// other two drop their routes to it (route PINGs every second, two unanswered) and keep their
/// own pool whole; the link comes back; the full mesh returns with exactly the pool per pair
/// (no duplicate left), stays so, and interest converges: each side's count of the other's
/// subscriptions on its routes is what it was before the partition.
#[test]
fn a_partitioned_pod_rejoins_after_heal_without_duplicates_and_interest_converges() {
    let dnsmasq = require_environment();
    let mut sim = Sim::with_pods(&dnsmasq, "pt", 3);
    for p in &sim.pods {
        let conf = std::fs::read_to_string(&p.conf).expect("conf");
        let conf = conf.replace(
            "cluster {\n",
            "cluster {\n  ping_interval: \"1s\"\n  ping_max: 2\n",
        );
        std::fs::write(&p.conf, conf).expect("conf");
    }
    sim.publish_dns();
    let ns0 = sim.pods[0].ns.clone();
    sim.wait_dns(&ns0);
    sim.start_all();
    wait_until("a full mesh of 3", Duration::from_secs(20), || {
        sim.full_mesh()
    });
    // What each of pod 0 and pod 2 sees of the other's interest (its $SYS services and
    // internal subscriptions), summed over the pair's connections.
    let interest = |snap: &[(u16, Value)], at: usize, of: &str| -> u64 {
        snap[2 * at + 1].1["routes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["remote_name"] == of)
            .map(|r| r["subscriptions"].as_u64().unwrap_or(0))
            .sum()
    };
    // Interest settles after the mesh forms (dumps and $SYS subscriptions): take it once two
    // snapshots agree.
    let (before, _) = wait_until("interest to settle", Duration::from_secs(20), || {
        let a = sim.snapshot();
        std::thread::sleep(Duration::from_millis(300));
        let b = sim.snapshot();
        let x = (interest(&a, 0, "nats-2"), interest(&a, 2, "nats-0"));
        let y = (interest(&b, 0, "nats-2"), interest(&b, 2, "nats-0"));
        if x == y && x.0 > 0 && x.1 > 0 {
            Ok(x)
        } else {
            Err(format!("{x:?} then {y:?}"))
        }
    });

    let ns2 = sim.pods[2].ns.clone();
    must("ip", &["-n", &ns2, "link", "set", "eth0", "down"]);
    let (_, dropped) = wait_until(
        "pods 0 and 1 to drop their routes to the partitioned pod",
        Duration::from_secs(20),
        || {
            let snap = sim.snapshot();
            for i in 0..2 {
                let other = sim.pods[1 - i].name.clone();
                let names: Vec<String> = snap[2 * i + 1].1["routes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| r["remote_name"].as_str().unwrap_or("?").to_string())
                    .collect();
                if names.len() != ROUTES_PER_PEER || names.iter().any(|n| *n != other) {
                    return Err(format!("{}: {names:?}", sim.pods[i].name));
                }
            }
            Ok(())
        },
    );
    report!("partition: pods 0 and 1 dropped pod 2 after {dropped:?}");

    must("ip", &["-n", &ns2, "link", "set", "eth0", "up"]);
    let (_, healed) = wait_until(
        "the full mesh after the heal",
        Duration::from_secs(30),
        || sim.full_mesh(),
    );
    let (_, converged) = wait_until(
        "interest to converge after the heal",
        Duration::from_secs(20),
        || {
            let snap = sim.snapshot();
            let now = (interest(&snap, 0, "nats-2"), interest(&snap, 2, "nats-0"));
            if now == before {
                Ok(())
            } else {
                Err(format!("{now:?}, before the partition {before:?}"))
            }
        },
    );
    report!("heal: full mesh after {healed:?}, interest as before {converged:?} later");
    // No duplicate churn afterwards: still exactly the pools a moment later.
    std::thread::sleep(Duration::from_secs(2));
    if let Err(e) = sim.full_mesh() {
        panic!("the mesh did not stay whole after the heal: {e}");
    }
}

// After `report!` and the helpers it uses (macros are in scope from their definition on).
#[path = "k8s_sim/jetstream.rs"]
mod jetstream;

#[path = "k8s_sim/helm_test.rs"]
mod helm_test;

#[path = "k8s_sim/js_rolling.rs"]
mod js_rolling;
