//! A StatefulSet RollingUpdate of the JetStream cluster under publishing (issue 20): an R3 file
//! stream; a publisher (`js_pub.py pub`, in a client pod's namespace, through the client
//! Service name) publishes continuously, each message with an ack and `Nats-Msg-Id`, sending an
//! unacknowledged one again with the same id until acked; meanwhile the pods are rolled as the
//! StatefulSet controller does, highest ordinal first: the pod leaves the Service's endpoints,
//! preStop puts it in lame duck (`natsd --signal ldm=<pidfile>`), it exits, it is started again
//! on the same IP and store (its PVC), and the next pod waits until it is Ready (startup probe
//! `/healthz` 200, then readiness `/healthz?js-server-only=true` 200; liveness
//! `/healthz?js-enabled-only=true` 200 too), when it is back among the endpoints.
//!
//! Afterwards: every acknowledged message was acked once with sequence = its number (so
//! sequences are never reused and follow the publish order), the stream holds exactly those
//! messages, in order, each once (read back by sequence, payload and `Nats-Msg-Id`; the next
//! sequence does not exist), and every pod's copy (its `/jsz`: the stream's state on that
//! pod) holds them all. The longest publish stall (the most time between two acks) is
//! reported, with the roll step it fell in.

use super::jetstream::{LIVENESS_PROBE, READINESS_PROBE, STARTUP_PROBE};
use super::*;

const STREAM: &str = "ROLL";
const SUBJECT_JS: &str = "js.roll";
const SERVICE: &str = "natsd.default.svc";
const SERVICE_FQDN: &str = "natsd.default.svc.cluster.local";
/// Acks wanted before the roll and after it.
const WARMUP_ACKS: u64 = 200;
const AFTER_ACKS: u64 = 200;
/// The publisher's own safety net (it exits after this whatever happens).
const PUB_LIFETIME_S: &str = "150";
/// The longest stall this test accepts: a roll step may stop publishing while a stream
/// leader is elected, not for long.
const MAX_STALL: f64 = 10.0;

fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

#[test]
fn jetstream_r3_stream_survives_a_rolling_restart_under_publishing() {
    let dnsmasq = require_environment();
    let t_start = Instant::now();
    let mut sim = Sim::with_pods(&dnsmasq, "jr", PODS);
    sim.add_jetstream();
    sim.publish_dns();
    let ns0 = sim.pods[0].ns.clone();
    sim.wait_dns(&ns0);
    let client = sim.add_client_netns("js-pub", 30);
    sim.start_all();
    for i in 0..PODS {
        sim.wait_pod_ready(i);
    }
    let all_ips: Vec<String> = sim.pods.iter().map(|p| p.ip.clone()).collect();
    sim.write_service(SERVICE_FQDN, &all_ips);
    sim.wait_name_resolves(&client, SERVICE, &all_ips.iter().cloned().collect());

    let created = sim.js_in(
        &client,
        "js.py",
        &["create", SERVICE, STREAM, SUBJECT_JS, "3"],
    );
    assert!(created.get("error").is_none(), "stream create: {created}");
    assert_eq!(created["config"]["num_replicas"], 3, "{created}");
    let info = sim.js_in(&client, "js.py", &["info", SERVICE, STREAM]);
    report!(
        "stream {STREAM} (R3, file): leader {}, replicas {}",
        info["cluster"]["leader"],
        info["cluster"]["replicas"]
    );

    // The publisher, through the Service name.
    let status = sim.dir.join("js-pub.json");
    let stop = sim.dir.join("js-pub.stop");
    let script = sim.scripts.join("js_pub.py");
    let log = std::fs::File::create(sim.dir.join("js-pub.out")).expect("log");
    let child = Command::new("ip")
        .args(["netns", "exec", &client, "python3"])
        .arg(&script)
        .arg("pub")
        .arg(&status)
        .arg(&stop)
        .args([SERVICE, SUBJECT_JS, PUB_LIFETIME_S])
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start js_pub.py");
    sim.clients
        .push(("js-pub".to_string(), child, status.clone()));
    let acked = |s: &Value| s["acked"].as_u64().unwrap_or(0);
    let wait_acks = |more: u64, what: &str| -> u64 {
        let base = acked(&Sim::client_status(&status));
        wait_until(what, Duration::from_secs(30), || {
            let s = Sim::client_status(&status);
            if acked(&s) >= base + more {
                Ok(acked(&s))
            } else {
                Err(format!("acked {} (from {base}); status {s}", acked(&s)))
            }
        })
        .0
    };
    wait_acks(WARMUP_ACKS, "the publisher's first acks");

    // The roll, highest ordinal first. Phases (name, start, end) in Unix seconds, to place
    // the publisher's stalls.
    let mut phases: Vec<(String, f64, f64)> = Vec::new();
    let t_roll = Instant::now();
    for i in (0..PODS).rev() {
        let name = sim.pods[i].name.clone();
        let before = acked(&Sim::client_status(&status));
        // A terminating pod leaves the endpoints at once; preStop: lame duck.
        let others: Vec<String> = all_ips
            .iter()
            .filter(|ip| **ip != sim.pods[i].ip)
            .cloned()
            .collect();
        sim.write_service(SERVICE_FQDN, &others);
        let t0 = now_unix();
        let (unready, drained) = sim.drain(i);
        let t1 = now_unix();
        phases.push((format!("{name} lame duck until exit"), t0, t1));
        sim.start(i);
        let [started, ready, live] = sim.wait_pod_ready(i);
        let t2 = now_unix();
        phases.push((format!("{name} restart until Ready"), t1, t2));
        sim.write_service(SERVICE_FQDN, &all_ips);
        let after = acked(&Sim::client_status(&status));
        report!(
            "{name}: lame duck -> exit 0 in {drained:?} (/healthz 503 seen: {unready}); \
             restarted: {STARTUP_PROBE} 200 {started:?}, {READINESS_PROBE} {ready:?}, \
             {LIVENESS_PROBE} {live:?}; {} messages acked during the step",
            after - before
        );
    }
    let rolled = t_roll.elapsed();
    phases.push(("after the roll".to_string(), now_unix(), f64::MAX));
    let n_after = wait_acks(AFTER_ACKS, "acks after the roll");
    report!("roll of {PODS} pods took {rolled:?}; {n_after} messages acked so far");

    // Stop the publisher (after the message in flight is acked) and take its record.
    std::fs::write(&stop, "").expect("stop file");
    let (st, _) = wait_until("the publisher to stop", Duration::from_secs(30), || {
        let s = Sim::client_status(&status);
        if s["done"] == true || s["unacked"].is_u64() {
            Ok(s)
        } else {
            Err(format!("status {s}"))
        }
    });
    assert!(
        st["done"] == true && st["unacked"].is_null(),
        "the publisher did not finish with every message acked: {st}"
    );
    let acks = st["acks"].as_array().expect("acks");
    let n = acks.len() as u64;
    assert!(n >= WARMUP_ACKS + AFTER_ACKS, "{n} acks");
    assert_eq!(
        st["streams"],
        serde_json::json!([STREAM]),
        "acks name the stream"
    );
    for (k, a) in acks.iter().enumerate() {
        let (i, seq) = (a[0].as_u64().expect("i"), a[1].as_u64().expect("seq"));
        assert!(
            i == k as u64 + 1 && seq == i,
            "ack {k}: msg-{i} acked with seq {seq} (want msg-{} at seq {}): a sequence \
             reused or skipped, or a message stored twice; publisher: {}",
            k + 1,
            k + 1,
            st["events"]
        );
    }

    // Every acknowledged message in the stream exactly once, in order; nothing after them.
    let got = sim.js_in(
        &client,
        "js_pub.py",
        &["read", SERVICE, STREAM, &n.to_string()],
    );
    let msgs = got["messages"].as_array().expect("messages");
    let mut bad = Vec::new();
    for (k, m) in msgs.iter().enumerate() {
        let seq = k as u64 + 1;
        let want = if seq <= n {
            serde_json::json!([seq, format!("msg-{seq}"), format!("roll-{seq}")])
        } else {
            serde_json::json!([seq, null, 10037])
        };
        if *m != want {
            bad.push(format!("seq {seq}: {m}, want {want}"));
        }
    }
    assert!(
        bad.is_empty(),
        "read back by sequence differs at {} places: {:?}; unanswered {}",
        bad.len(),
        &bad[..bad.len().min(20)],
        got["unanswered"]
    );

    // Every pod's copy holds them all.
    let (_, current) = wait_until(
        &format!("every pod's copy of {STREAM} to hold sequences 1..={n}"),
        Duration::from_secs(30),
        || {
            let urls: Vec<String> = sim
                .pods
                .iter()
                .map(|p| format!("http://{}:8222/jsz?streams=true", p.ip))
                .collect();
            let res = sim.probe(&urls);
            let mut off = Vec::new();
            for (i, (code, v)) in res.iter().enumerate() {
                let state = v["account_details"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten())
                    .find(|s| s["name"] == STREAM)
                    .map(|s| s["state"].clone())
                    .unwrap_or(Value::Null);
                let ok = *code == 200
                    && state["messages"] == n
                    && state["first_seq"] == 1
                    && state["last_seq"] == n
                    && state["num_deleted"].as_u64().unwrap_or(0) == 0;
                if !ok {
                    off.push(format!("{}: /jsz {code} state {state}", sim.pods[i].name));
                }
            }
            if off.is_empty() {
                Ok(())
            } else {
                Err(off.join("; "))
            }
        },
    );

    // The stalls, placed in the roll's steps.
    let place = |at: f64| -> String {
        phases
            .iter()
            .find(|(_, a, b)| at >= *a - 0.5 && at < *b)
            .map(|(p, _, _)| p.clone())
            .unwrap_or_else(|| "before the roll".into())
    };
    let max_stall = st["max_stall"].as_f64().unwrap_or(f64::MAX);
    let stalls: Vec<String> = st["stalls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            format!(
                "{:.3} s at msg-{} on {} ({})",
                s[1].as_f64().unwrap_or(0.0),
                s[2],
                s[3],
                place(s[0].as_f64().unwrap_or(0.0))
            )
        })
        .collect();
    report!(
        "publisher: {n} messages acked, each once, in order, seq = number; {} resent \
         ({} timeouts, {} no responders, errors {}, {} closed connections), {} duplicate \
         acks; {} connects, {} lame-duck moves; every pod's copy current {current:?} after \
         the read",
        st["retries"],
        st["timeouts"],
        st["no_responders"],
        st["errors"],
        st["closed"],
        st["duplicates"],
        st["connects"],
        st["ldm_moves"]
    );
    report!(
        "LONGEST PUBLISH STALL {max_stall:.3} s ({}); stalls > 0.25 s: {stalls:?}",
        place(st["max_stall_at"].as_f64().unwrap_or(0.0))
    );
    report!("test took {:?}", t_start.elapsed());
    assert!(
        max_stall < MAX_STALL,
        "publishing stalled for {max_stall:.3} s (limit {MAX_STALL} s); publisher events {}",
        st["events"]
    );
}
