//! Clustered JetStream in the simulated StatefulSet (issue 17 item 7): the pods run the
//! config the Helm chart renders with `config.jetstream.enabled` and `config.cluster.enabled`
//! (`helm/ci/jetstream-cluster.yaml`, see [`Sim::add_jetstream`]) with a store dir per pod
//! (the pod's PVC). Clients are `js.py` (raw protocol) inside a pod's
//! namespace.
//!
//! `jetstream_r3_stream_across_pods_survives_a_pod_restart`: every pod's `/healthz` (the
//! chart's startup probe) reaches 200 (a meta leader is known); an R3 file stream is created;
//! messages are published with acks (sequences 1..n in order); the stream leader's pod is
//! stopped through lame duck (the chart's preStop) and, while it is down, the other two pods
//! (a new leader) ack more messages; it starts again on the same IP and store; after its
//! `/healthz` is 200 again, more messages are acked, every message is read back by sequence
//! with its payload, and the restarted pod's own copy holds them all (its `/jsz`).
//!
//! This test found two clustered-JetStream bugs, both fixed (jetstream/cluster): the
//! restarted pod, re-applying the entries it had proposed before, acked them again (a
//! publish here got `seq: 1`, its reply subject reused), and for a moment after its restart
//! it acted as the leader of its old term with its copy not rebuilt. Entries now carry a
//! per-process proposer token, and only a leader a majority follows answers.

use super::*;

/// The chart's probes (helm/templates/_statefulset.tpl, values `container.*Probe.path`;
/// deploy/validate.sh checks the render has exactly these).
pub(super) const STARTUP_PROBE: &str = "/healthz";
pub(super) const READINESS_PROBE: &str = "/healthz?js-server-only=true";
pub(super) const LIVENESS_PROBE: &str = "/healthz?js-enabled-only=true";

const STREAM: &str = "K8S";
const JS_SUBJECT: &str = "js.k8s";
/// Messages published before the restart, while the pod is down, and after it.
const BEFORE: usize = 40;
const DOWN: usize = 20;
const AFTER: usize = 20;

impl Sim {
    /// Each pod runs the nats.conf the chart renders with JetStream and a cluster
    /// (`helm/ci/jetstream-cluster.yaml`, committed as `deploy/helm-test/pods.json`'s
    /// `config`; deploy/validate.sh checks it is the render), `$SERVER_NAME` from the
    /// environment as the StatefulSet sets it. What a pod's mounts and names make different
    /// here is replaced, and nothing else: the headless Service's name (the simulation's
    /// DNS serves `nats-headless`), the store on the pod's PVC (`/data`: a directory per
    /// pod that outlives the process, as the PVC outlives the container), the pid file, and
    /// the lame-duck timings (30 s / 10 s rendered; 3 s / 1 s keep the tests short).
    pub(super) fn add_jetstream(&self) {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/helm-test/pods.json");
        let doc: Value = serde_json::from_slice(
            &std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let rendered = doc["config"].as_str().expect("rendered nats.conf");
        for p in &self.pods {
            let store = self.dir.join(format!("{}-data", p.name));
            let mut conf = rendered.to_string();
            for (from, to) in [
                (
                    "natsd-headless.default.svc.cluster.local",
                    HEADLESS.to_string(),
                ),
                ("\"/data\"", format!("{:?}", store.display().to_string())),
                (
                    "\"/var/run/nats/nats.pid\"",
                    format!("{:?}", p.pid_file.display().to_string()),
                ),
                (
                    "\"lame_duck_duration\": \"30s\"",
                    "\"lame_duck_duration\": \"3s\"".into(),
                ),
                (
                    "\"lame_duck_grace_period\": \"10s\"",
                    "\"lame_duck_grace_period\": \"1s\"".into(),
                ),
            ] {
                assert!(
                    conf.contains(from),
                    "the rendered config has no {from}: {conf}"
                );
                conf = conf.replace(from, &to);
            }
            std::fs::write(&p.conf, conf).expect("conf");
        }
    }

    /// `js.py ARGS` inside pod `pod`'s namespace; its JSON answer.
    pub(super) fn js(&self, pod: usize, args: &[&str]) -> Value {
        self.js_in(&self.pods[pod].ns, "js.py", args)
    }

    /// `python3 tests/k8s_sim/SCRIPT ARGS` inside namespace `ns`; its JSON answer (it must
    /// exit 0).
    pub(super) fn js_in(&self, ns: &str, script: &str, args: &[&str]) -> Value {
        let path = self.scripts.join(script).display().to_string();
        let mut a = vec!["python3", path.as_str()];
        a.extend_from_slice(args);
        let out = run("ip", &ns_exec_args(ns, &a));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{script} {args:?} in {ns}: {}: {stdout} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{script} {args:?}: {e}: {stdout}"))
    }

    pub(super) fn wait_healthz_200(&self, i: usize, what: &str) -> Duration {
        self.wait_probe_200(i, STARTUP_PROBE, what)
    }

    /// Wait (30 s at most) until pod `i` answers `path` on its monitoring port with 200.
    pub(super) fn wait_probe_200(&self, i: usize, path: &str, what: &str) -> Duration {
        wait_until(what, Duration::from_secs(30), || {
            let url = format!("http://{}:8222{path}", self.pods[i].ip);
            match &self.probe(&[url])[0] {
                (200, _) => Ok(()),
                (s, b) => Err(format!("{path} {s} {b}")),
            }
        })
        .1
    }

    /// What the kubelet waits for before it calls a started pod Ready (and a StatefulSet
    /// RollingUpdate moves on): the startup probe, then the readiness probe; the liveness probe
    /// must pass too (else the pod would be restarted). Time from the call to each.
    pub(super) fn wait_pod_ready(&self, i: usize) -> [Duration; 3] {
        let name = &self.pods[i].name;
        let t = Instant::now();
        let mut took = [Duration::ZERO; 3];
        for (k, path) in [STARTUP_PROBE, READINESS_PROBE, LIVENESS_PROBE]
            .into_iter()
            .enumerate()
        {
            self.wait_probe_200(i, path, &format!("{name}: {path} 200"));
            took[k] = t.elapsed();
        }
        took
    }

    /// Publish `first..first+count` from pod `pod` (to its own server); the acks' sequences.
    fn publish_acked(&self, pod: usize, first: usize, count: usize) -> Vec<u64> {
        let ip = self.pods[pod].ip.clone();
        let v = self.js(
            pod,
            &[
                "pub",
                &ip,
                JS_SUBJECT,
                &first.to_string(),
                &count.to_string(),
            ],
        );
        v["acks"]
            .as_array()
            .expect("acks")
            .iter()
            .map(|a| {
                assert_eq!(a["stream"], STREAM, "ack {a}");
                a["seq"].as_u64().expect("seq")
            })
            .collect()
    }
}

#[test]
fn jetstream_r3_stream_across_pods_survives_a_pod_restart() {
    let dnsmasq = require_environment();
    let t_start = Instant::now();
    let mut sim = Sim::with_pods(&dnsmasq, "js", PODS);
    sim.add_jetstream();
    sim.publish_dns();
    let ns0 = sim.pods[0].ns.clone();
    sim.wait_dns(&ns0);
    sim.start_all();
    for i in 0..PODS {
        let took = sim.wait_healthz_200(i, &format!("nats-{i} /healthz 200 (a meta leader)"));
        report!("nats-{i}: /healthz 200 {took:?} after the wait began");
    }

    // An R3 file stream, created through pod 0's server.
    let ip0 = sim.pods[0].ip.clone();
    let created = sim.js(0, &["create", &ip0, STREAM, JS_SUBJECT, "3"]);
    assert!(created.get("error").is_none(), "stream create: {created}");
    assert_eq!(created["config"]["num_replicas"], 3, "{created}");
    let info = sim.js(0, &["info", &ip0, STREAM]);
    let leader = info["cluster"]["leader"]
        .as_str()
        .unwrap_or_else(|| panic!("no stream leader in {info}"))
        .to_string();
    let replicas: BTreeSet<String> = info["cluster"]["replicas"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str().map(String::from))
        .collect();
    let all: BTreeSet<String> = sim.pods.iter().map(|p| p.name.clone()).collect();
    let mut peers = replicas.clone();
    peers.insert(leader.clone());
    assert_eq!(peers, all, "the R3 stream is not on every pod: {info}");
    let li = sim
        .pods
        .iter()
        .position(|p| p.name == leader)
        .expect("leader is a pod");
    // The publisher lives in a pod that stays up.
    let client = (li + 1) % PODS;
    report!("stream {STREAM}: leader {leader}, replicas {replicas:?}; client in nats-{client}");

    let acks = sim.publish_acked(client, 1, BEFORE);
    assert_eq!(
        acks,
        (1..=BEFORE as u64).collect::<Vec<_>>(),
        "acked sequences"
    );

    // The leader's pod is rolled: lame duck (preStop), exit; the two others go on (a new
    // leader among them); then it starts again on the same store.
    let (unready, drained) = sim.drain(li);
    let t = Instant::now();
    let acks = sim.publish_acked(client, BEFORE + 1, DOWN);
    assert_eq!(
        acks,
        (BEFORE as u64 + 1..=(BEFORE + DOWN) as u64).collect::<Vec<_>>(),
        "acked sequences while {leader} is down"
    );
    report!(
        "{DOWN} messages acked by the two other pods in {:?}",
        t.elapsed()
    );
    sim.start(li);
    let healthy = sim.wait_healthz_200(li, &format!("{leader} /healthz 200 after its restart"));
    report!(
        "{leader}: lame duck -> exit 0 in {drained:?} (/healthz 503 seen: {unready}); \
         /healthz 200 {healthy:?} after its start"
    );

    let acks = sim.publish_acked(client, BEFORE + DOWN + 1, AFTER);
    let total = BEFORE + DOWN + AFTER;
    assert_eq!(
        acks,
        ((BEFORE + DOWN) as u64 + 1..=total as u64).collect::<Vec<_>>(),
        "acked sequences after the restart"
    );

    // Every message back, through the restarted pod's server.
    let ip = sim.pods[li].ip.clone();
    let got = sim.js(li, &["get", &ip, STREAM, &total.to_string()]);
    let want: Vec<Value> = (1..=total)
        .map(|i| Value::from(format!("msg-{i}")))
        .collect();
    let got = got["messages"].as_array().expect("messages");
    if got != &want {
        // Which sequences differ, and what each pod says of the stream.
        let off: Vec<String> = (0..total)
            .filter(|&i| got.get(i) != want.get(i))
            .map(|i| format!("seq {}: {:?}", i + 1, got.get(i)))
            .collect();
        let infos: Vec<Value> = (0..PODS)
            .map(|i| {
                let url = format!("http://{}:8222/jsz?streams=true", sim.pods[i].ip);
                sim.probe(&[url])[0].1.clone()
            })
            .collect();
        panic!("read back through {leader} differs at {off:?}; each pod's /jsz: {infos:?}");
    }

    // The restarted pod's own copy is current again.
    let (_, caught_up) = wait_until(
        &format!("{leader}'s copy to hold {total} messages"),
        Duration::from_secs(20),
        || {
            let url = format!("http://{ip}:8222/jsz");
            let (s, v) = &sim.probe(&[url])[0];
            match v["messages"].as_u64() {
                Some(n) if *s == 200 && n == total as u64 => Ok(()),
                _ => Err(format!("/jsz {s} {v}")),
            }
        },
    );
    let info = sim.js(client, &["info", &sim.pods[client].ip, STREAM]);
    assert_eq!(info["state"]["messages"], total as u64, "{info}");
    report!(
        "all {total} messages read back; {leader} current {caught_up:?} later; new leader {}; \
         test took {:?}",
        info["cluster"]["leader"],
        t_start.elapsed()
    );
}
