//! `natsd topology up [--timeout SECS] FILE [-- NODE_FLAGS...]`: every node of the file as a
//! child process of this binary on 127.0.0.1, each log line prefixed with the node's name;
//! ready when every node's `/routez` shows exactly one route to every other node; then the URLs
//! and `cluster ready`, and the nodes run until SIGINT/SIGTERM/SIGHUP, when each gets SIGINT
//! (through the `kill` command, as `signal.rs`) and is waited for. A node that exits early, a
//! fixed port that is taken or a mesh not formed in time stops the others, exit 1.

use super::check::{fetch_routez, problems};
use super::file::{Ports, Topology, HOST};
use super::{usage_error, UP_USAGE};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long `up` waits for the full mesh unless `--timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long stopped nodes get to exit after SIGINT before they are killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(100);

/// `natsd topology up ARGS...`.
pub fn main(args: &[String]) -> ExitCode {
    let mut timeout = DEFAULT_TIMEOUT;
    let mut file = None;
    let mut node_flags = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        match a {
            "-h" | "--help" => {
                println!("{UP_USAGE}");
                return ExitCode::SUCCESS;
            }
            "--" => {
                node_flags = args[i..].to_vec();
                break;
            }
            "--timeout" | "-timeout" => {
                let Some(v) = args.get(i) else {
                    return usage_error(UP_USAGE, "--timeout needs a number of seconds");
                };
                i += 1;
                match v.parse::<f64>() {
                    Ok(s) if s > 0.0 && s < 1e6 => timeout = Duration::from_secs_f64(s),
                    _ => return usage_error(UP_USAGE, &format!("bad --timeout {v:?}")),
                }
            }
            s if s.starts_with('-') => return usage_error(UP_USAGE, &format!("unknown flag {s}")),
            s if file.is_none() => file = Some(s.to_string()),
            s => return usage_error(UP_USAGE, &format!("unexpected argument {s:?}")),
        }
    }
    let Some(file) = file else {
        return usage_error(UP_USAGE, "no topology file");
    };
    let t = match Topology::load(Path::new(&file)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("natsd topology: {e}");
            return ExitCode::from(2);
        }
    };
    match up(&t, &file, timeout, &node_flags) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("natsd topology: {e}");
            ExitCode::from(1)
        }
    }
}

/// Fixed ports must be free now; the others are picked free (all listeners held until every
/// port is chosen, so no two nodes get the same one).
pub fn assign_ports(t: &Topology) -> Result<Vec<Ports>, String> {
    let mut held = Vec::new();
    for n in &t.nodes {
        for (what, p) in n.fixed() {
            match TcpListener::bind((HOST, p)) {
                Ok(l) => held.push(l),
                Err(e) => {
                    return Err(format!(
                        "port {p} (the {what} of node {}) is not free on {HOST}: {e}",
                        n.name
                    ))
                }
            }
        }
    }
    let mut free = || -> Result<u16, String> {
        let l = TcpListener::bind((HOST, 0)).map_err(|e| format!("no free port: {e}"))?;
        let p = l.local_addr().map_err(|e| e.to_string())?.port();
        held.push(l);
        Ok(p)
    };
    let mut out = Vec::new();
    for n in &t.nodes {
        out.push(Ports {
            client: match n.port {
                Some(p) => p,
                None => free()?,
            },
            http: match n.http {
                Some(p) => p,
                None => free()?,
            },
            route: match n.route {
                Some(p) => p,
                None => free()?,
            },
        });
    }
    Ok(out)
}

/// The command line of node `idx`.
pub fn node_args(t: &Topology, ports: &[Ports], idx: usize, extra: &[String]) -> Vec<String> {
    let p = ports[idx];
    let mut a: Vec<String> = vec![
        "-a".into(),
        HOST.into(),
        "-p".into(),
        p.client.to_string(),
        "-m".into(),
        p.http.to_string(),
        "-n".into(),
        t.nodes[idx].name.clone(),
        "--cluster".into(),
        p.route_url(),
        "--cluster_name".into(),
        t.cluster.clone(),
    ];
    if idx > 0 {
        a.push("--routes".into());
        a.push(format!("nats-route://{HOST}:{}", ports[0].route));
    }
    a.extend(extra.iter().cloned());
    a
}

/// The running nodes. Dropping it kills whatever is still running (a safety net; `stop` is
/// the orderly way).
struct Nodes {
    names: Vec<String>,
    children: Vec<Child>,
    pumps: Vec<JoinHandle<()>>,
}

impl Nodes {
    /// The first node (by file order) that has exited, with its status.
    fn exited(&mut self) -> Option<(String, ExitStatus)> {
        for (name, c) in self.names.iter().zip(self.children.iter_mut()) {
            if let Ok(Some(st)) = c.try_wait() {
                return Some((name.clone(), st));
            }
        }
        None
    }

    /// SIGINT to every node still running, wait for all of them (SIGKILL after the grace).
    fn stop(&mut self) {
        let running: Vec<usize> = (0..self.children.len())
            .filter(|&i| matches!(self.children[i].try_wait(), Ok(None)))
            .collect();
        if !running.is_empty() {
            let names: Vec<&str> = running.iter().map(|&i| self.names[i].as_str()).collect();
            eprintln!("natsd topology: stopping {}", names.join(", "));
        }
        for i in running {
            let c = &mut self.children[i];
            if let Err(e) = interrupt(c.id()) {
                eprintln!("natsd topology: {e}; killing {}", self.names[i]);
                let _ = c.kill();
            }
        }
        let end = Instant::now() + STOP_GRACE;
        for (name, c) in self.names.iter().zip(self.children.iter_mut()) {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= end => {
                        eprintln!("natsd topology: {name} did not stop in time; killing it");
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        // The pipes close when the nodes have exited: their last lines are printed first.
        for p in self.pumps.drain(..) {
            let _ = p.join();
        }
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// SIGINT through the `kill` command (no libc binding in natsd).
fn interrupt(pid: u32) -> Result<(), String> {
    let out = Command::new("kill")
        .arg("-INT")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the kill command to stop {pid}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "kill -INT {pid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Copy `from` line by line to stdout or stderr, each line prefixed.
fn pump(from: impl Read + Send + 'static, prefix: String, to_stderr: bool) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut r = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if line.last() != Some(&b'\n') {
                        line.push(b'\n');
                    }
                    let _ = if to_stderr {
                        let mut e = std::io::stderr().lock();
                        e.write_all(prefix.as_bytes())
                            .and_then(|_| e.write_all(&line))
                    } else {
                        let mut o = std::io::stdout().lock();
                        o.write_all(prefix.as_bytes())
                            .and_then(|_| o.write_all(&line))
                    };
                }
            }
        }
    })
}

fn spawn(
    t: &Topology,
    ports: &[Ports],
    extra: &[String],
    signals: &Receiver<&'static str>,
) -> Result<Nodes, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the natsd binary: {e}"))?;
    let width = t.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    let mut nodes = Nodes {
        names: Vec::new(),
        children: Vec::new(),
        pumps: Vec::new(),
    };
    for (i, n) in t.nodes.iter().enumerate() {
        if signals.try_recv().is_ok() {
            nodes.stop();
            return Err("interrupted while starting the nodes".into());
        }
        let mut cmd = Command::new(&exe);
        cmd.args(node_args(t, ports, i, extra))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Own process group: a terminal's Ctrl-C reaches the launcher only, which stops the
        // nodes in order.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                nodes.stop();
                return Err(format!("cannot start node {}: {e}", n.name));
            }
        };
        let prefix = format!("[{:width$}] ", n.name);
        if let Some(out) = child.stdout.take() {
            nodes.pumps.push(pump(out, prefix.clone(), false));
        }
        if let Some(err) = child.stderr.take() {
            nodes.pumps.push(pump(err, prefix, true));
        }
        nodes.names.push(n.name.clone());
        nodes.children.push(child);
    }
    Ok(nodes)
}

/// Every node's mesh problems (empty: ready).
fn mesh_problems(t: &Topology, ports: &[Ports]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, (n, p)) in t.nodes.iter().zip(ports).enumerate() {
        match fetch_routez(HOST, p.http) {
            Err(e) => out.push(format!("{}: /routez at {}: {e}", n.name, p.monitor_url())),
            Ok(seen) => {
                for pr in problems(t, i, &seen) {
                    out.push(format!("{}: {pr}", n.name));
                }
            }
        }
    }
    out
}

fn up(t: &Topology, file: &str, timeout: Duration, extra: &[String]) -> Result<(), String> {
    let ports = assign_ports(t)?;
    let signals = signals()?;
    let mut nodes = spawn(t, &ports, extra, &signals)?;
    eprintln!(
        "natsd topology: started {} node{} of cluster {}, waiting for the full mesh",
        t.nodes.len(),
        if t.nodes.len() == 1 { "" } else { "s" },
        t.cluster
    );
    // Wait for the mesh.
    let end = Instant::now() + timeout;
    loop {
        if let Some(sig) = received(&signals) {
            nodes.stop();
            return Err(format!("{sig} before the cluster was ready"));
        }
        if let Some((name, st)) = nodes.exited() {
            nodes.stop();
            return Err(format!(
                "node {name} exited early ({st}); stopped the other nodes"
            ));
        }
        let p = mesh_problems(t, &ports);
        if p.is_empty() {
            break;
        }
        if Instant::now() >= end {
            nodes.stop();
            return Err(format!(
                "the mesh did not match {file} within {:?}:\n  {}",
                timeout,
                p.join("\n  ")
            ));
        }
        std::thread::sleep(POLL);
    }
    let width = t.nodes.iter().map(|n| n.name.len()).max().unwrap_or(0);
    for (n, p) in t.nodes.iter().zip(&ports) {
        println!(
            "{:width$}  {}  monitoring {}  routes {}",
            n.name,
            p.client_url(),
            p.monitor_url(),
            p.route_url()
        );
    }
    let all_fixed = t.nodes.iter().all(|n| n.http.is_some());
    let check = if all_fixed {
        format!("natsd topology check {file}")
    } else {
        let urls: Vec<String> = ports.iter().map(Ports::monitor_url).collect();
        format!("natsd topology check {file} {}", urls.join(" "))
    };
    let clients: Vec<String> = ports.iter().map(Ports::client_url).collect();
    println!("clients: {}", clients.join(","));
    println!("check:   {check}");
    println!(
        "cluster ready: {}, {} nodes, full mesh (Ctrl-C stops every node)",
        t.cluster,
        t.nodes.len()
    );
    loop {
        if let Some(sig) = received(&signals) {
            eprintln!("natsd topology: {sig}");
            nodes.stop();
            eprintln!("natsd topology: all nodes stopped");
            return Ok(());
        }
        if let Some((name, st)) = nodes.exited() {
            nodes.stop();
            return Err(format!(
                "node {name} exited ({st}); stopped the other nodes"
            ));
        }
        std::thread::sleep(POLL);
    }
}

fn received(rx: &Receiver<&'static str>) -> Option<&'static str> {
    match rx.try_recv() {
        Ok(s) => Some(s),
        Err(TryRecvError::Empty) => None,
        // The signal thread is gone: nothing will stop us but our own nodes' exits.
        Err(TryRecvError::Disconnected) => None,
    }
}

/// SIGINT, SIGTERM and SIGHUP, as they arrive (installed before any node starts, so an early
/// signal is never the default action that would orphan the nodes).
#[cfg(unix)]
fn signals() -> Result<Receiver<&'static str>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (mut int, mut term, mut hup) = {
        let _g = rt.enter();
        let f = |k| signal(k).map_err(|e| format!("cannot install signal handlers: {e}"));
        (
            f(SignalKind::interrupt())?,
            f(SignalKind::terminate())?,
            f(SignalKind::hangup())?,
        )
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        rt.block_on(async move {
            loop {
                let s = tokio::select! {
                    _ = int.recv() => "interrupted",
                    _ = term.recv() => "terminated",
                    _ = hup.recv() => "hung up",
                };
                if tx.send(s).is_err() {
                    return;
                }
            }
        })
    });
    Ok(rx)
}

#[cfg(not(unix))]
fn signals() -> Result<Receiver<&'static str>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        rt.block_on(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if tx.send("interrupted").is_err() {
                    return;
                }
            }
        })
    });
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_command_lines() {
        let t = Topology::parse("cluster: C1\nnodes { a {}, b {} }").expect("parses");
        let ports = [
            Ports {
                client: 4222,
                http: 8222,
                route: 6222,
            },
            Ports {
                client: 4223,
                http: 8223,
                route: 6223,
            },
        ];
        assert_eq!(
            node_args(&t, &ports, 0, &[]).join(" "),
            "-a 127.0.0.1 -p 4222 -m 8222 -n a --cluster nats://127.0.0.1:6222 --cluster_name C1"
        );
        assert_eq!(
            node_args(&t, &ports, 1, &["-D".into()]).join(" "),
            "-a 127.0.0.1 -p 4223 -m 8223 -n b --cluster nats://127.0.0.1:6223 --cluster_name C1 \
             --routes nats-route://127.0.0.1:6222 -D"
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let t = Topology::parse("cluster: C\nnodes { a {}, b {}, c {} }").expect("parses");
        let ports = assign_ports(&t).expect("ports");
        let mut all: Vec<u16> = ports
            .iter()
            .flat_map(|p| [p.client, p.http, p.route])
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 9);
    }
}
