//! `natsd topology up [--timeout SECS] FILE [-- NODE_FLAGS...]`: every node of the file as a
//! child process of this binary on 127.0.0.1, each log line prefixed with the node's name;
//! ready when every node's `/routez` shows exactly one route to every other node of its
//! cluster (and, in a super-cluster, its `/gatewayz` a gateway to every other cluster, its
//! `gateway {}` block written to a config file in a temporary directory); then the URLs
//! and `cluster ready`, and the nodes run until SIGINT/SIGTERM/SIGHUP, when each gets SIGINT
//! (through the `kill` command, as `signal.rs`) and is waited for. A node that exits early, a
//! fixed port that is taken or a mesh not formed in time stops the others, exit 1.

use super::check::{inbound_problems, node_problems};
use super::file::{Ports, Topology, HOST};
use super::leaves::{self, LeafPorts};
use super::{usage_error, UP_USAGE};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
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
/// port is chosen, so no two nodes get the same one). Gateway ports only in a super-cluster,
/// leafnode ports only in a file with leaves. The nodes' ports, then the leaves'.
pub fn assign_ports(t: &Topology) -> Result<(Vec<Ports>, Vec<LeafPorts>), String> {
    let mut held = Vec::new();
    let fixed = t
        .nodes()
        .map(|(_, n)| (n.name.as_str(), n.fixed()))
        .chain(t.leaves.iter().map(|l| (l.name.as_str(), l.fixed())));
    for (name, ports) in fixed {
        for (what, p) in ports {
            match TcpListener::bind((HOST, p)) {
                Ok(l) => held.push(l),
                Err(e) => {
                    return Err(format!(
                        "port {p} (the {what} of node {name}) is not free on {HOST}: {e}"
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
    let mut pick = |p: Option<u16>| -> Result<u16, String> {
        match p {
            Some(p) => Ok(p),
            None => free(),
        }
    };
    let mut out = Vec::new();
    for (_, n) in t.nodes() {
        out.push(Ports {
            client: pick(n.port)?,
            http: pick(n.http)?,
            route: pick(n.route)?,
            gateway: if t.super_cluster {
                Some(pick(n.gateway)?)
            } else {
                None
            },
            leafnode: if t.leaves.is_empty() {
                None
            } else {
                Some(pick(n.leafnode)?)
            },
        });
    }
    let mut leaves = Vec::new();
    for l in &t.leaves {
        leaves.push(LeafPorts {
            client: pick(l.port)?,
            http: pick(l.http)?,
        });
    }
    Ok((out, leaves))
}

/// The `gateway {}` block of node `idx` in a super-cluster (None otherwise): its cluster's
/// name, its gateway port, and every other cluster with the gateway URLs of all its nodes.
pub fn gateway_conf(t: &Topology, ports: &[Ports], idx: usize) -> Option<String> {
    if !t.super_cluster {
        return None;
    }
    let (ci, node) = t.nodes().nth(idx)?;
    let me = ports.get(idx)?;
    let mut text = format!(
        "# written by `natsd topology up` for node {} of {}\ngateway {{\n  name: \"{}\"\n  \
         listen: \"{HOST}:{}\"\n  gateways: [\n",
        node.name,
        t.describe(),
        t.clusters[ci].name,
        me.gateway?
    );
    for (other, c) in t.clusters.iter().enumerate() {
        if other == ci {
            continue;
        }
        let urls: Vec<String> = t
            .nodes()
            .zip(ports)
            .filter(|((k, _), _)| *k == other)
            .filter_map(|(_, p)| p.gateway_url())
            .map(|u| format!("\"{u}\""))
            .collect();
        text.push_str(&format!(
            "    {{ name: \"{}\", urls: [{}] }}\n",
            c.name,
            urls.join(", ")
        ));
    }
    text.push_str("  ]\n}\n");
    Some(text)
}

/// The command line of node `idx` (`conf`: its config file, with the `gateway {}` block).
pub fn node_args(
    t: &Topology,
    ports: &[Ports],
    idx: usize,
    conf: Option<&Path>,
    extra: &[String],
) -> Vec<String> {
    let p = ports[idx];
    let (ci, node) = t.nodes().nth(idx).expect("node index within the topology");
    let mut a: Vec<String> = Vec::new();
    if let Some(conf) = conf {
        a.push("-c".into());
        a.push(conf.display().to_string());
    }
    a.extend(server_args(p.client, p.http, &node.name));
    a.extend([
        "--cluster".into(),
        p.route_url(),
        "--cluster_name".into(),
        t.clusters[ci].name.clone(),
    ]);
    // The seed: the first node of the same cluster.
    let seed = t.nodes().position(|(k, _)| k == ci).unwrap_or(0);
    if idx != seed {
        a.push("--routes".into());
        a.push(format!("nats-route://{HOST}:{}", ports[seed].route));
    }
    a.extend(extra.iter().cloned());
    a
}

/// Every server's first flags: the host, its client and monitoring ports, its name.
pub(super) fn server_args(client: u16, http: u16, name: &str) -> [String; 8] {
    [
        "-a".into(),
        HOST.into(),
        "-p".into(),
        client.to_string(),
        "-m".into(),
        http.to_string(),
        "-n".into(),
        name.into(),
    ]
}

/// The directory of the config files (super-clusters' `gateway {}` blocks, hubs'
/// `leafnodes {}` listeners, the leaves' remotes), removed when dropped.
struct ConfDir(Option<PathBuf>);

/// Each node's config file (None: flags only), then each leaf's.
type Confs = (Vec<Option<PathBuf>>, Vec<PathBuf>);

impl ConfDir {
    fn write(t: &Topology, ports: &[Ports]) -> Result<(ConfDir, Confs), String> {
        if !t.super_cluster && t.leaves.is_empty() {
            return Ok((ConfDir(None), (vec![None; t.node_count()], Vec::new())));
        }
        let dir = std::env::temp_dir().join(format!("natsd-topology-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let guard = ConfDir(Some(dir.clone()));
        let write = |name: &str, text: String| -> Result<PathBuf, String> {
            let f = dir.join(format!("{name}.conf"));
            std::fs::write(&f, text).map_err(|e| format!("cannot write {}: {e}", f.display()))?;
            Ok(f)
        };
        let mut files = Vec::new();
        for (i, (_, n)) in t.nodes().enumerate() {
            let mut text = gateway_conf(t, ports, i).unwrap_or_default();
            if let Some(p) = ports[i].leafnode {
                text.push_str(&leaves::hub_block(p));
            }
            files.push(if text.is_empty() {
                None
            } else {
                Some(write(&n.name, text)?)
            });
        }
        let mut leaf_files = Vec::new();
        for (i, l) in t.leaves.iter().enumerate() {
            let text = leaves::leaf_conf(t, ports, i).unwrap_or_default();
            leaf_files.push(write(&l.name, text)?);
        }
        Ok((guard, (files, leaf_files)))
    }
}

impl Drop for ConfDir {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
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

/// Every node's and leaf's name, in file order.
fn names(t: &Topology) -> Vec<&str> {
    t.nodes()
        .map(|(_, n)| n.name.as_str())
        .chain(t.leaves.iter().map(|l| l.name.as_str()))
        .collect()
}

fn spawn(
    t: &Topology,
    (ports, leaf_ports): (&[Ports], &[LeafPorts]),
    (confs, leaf_confs): &Confs,
    extra: &[String],
    signals: &Receiver<&'static str>,
) -> Result<Nodes, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the natsd binary: {e}"))?;
    let width = names(t).iter().map(|n| n.len()).max().unwrap_or(0);
    let mut nodes = Nodes {
        names: Vec::new(),
        children: Vec::new(),
        pumps: Vec::new(),
    };
    let count = t.node_count();
    for (i, name) in names(t).into_iter().enumerate() {
        if signals.try_recv().is_ok() {
            nodes.stop();
            return Err("interrupted while starting the nodes".into());
        }
        let mut cmd = Command::new(&exe);
        let args = match i.checked_sub(count) {
            None => node_args(t, ports, i, confs.get(i).and_then(|c| c.as_deref()), extra),
            Some(l) => leaves::leaf_args(t, leaf_ports, l, &leaf_confs[l], extra),
        };
        cmd.args(args)
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
                return Err(format!("cannot start node {name}: {e}"));
            }
        };
        let prefix = format!("[{name:width$}] ");
        if let Some(out) = child.stdout.take() {
            nodes.pumps.push(pump(out, prefix.clone(), false));
        }
        if let Some(err) = child.stderr.take() {
            nodes.pumps.push(pump(err, prefix, true));
        }
        nodes.names.push(name.to_string());
        nodes.children.push(child);
    }
    Ok(nodes)
}

/// Every node's mesh problems, and every leaf's (empty: ready).
fn mesh_problems(t: &Topology, ports: &[Ports], leaf_ports: &[LeafPorts]) -> Vec<String> {
    let mut out = Vec::new();
    if !t.leaves.is_empty() {
        let hubs: Vec<(String, u16)> = ports.iter().map(|p| (HOST.to_string(), p.http)).collect();
        let leaves: Vec<(String, u16)> = leaf_ports
            .iter()
            .map(|p| (HOST.to_string(), p.http))
            .collect();
        out.extend(leaves::problems(t, &hubs, &leaves));
    }
    let mut views = Vec::new();
    for (i, ((_, n), p)) in t.nodes().zip(ports).enumerate() {
        match node_problems(t, i, HOST, p.http) {
            Err(e) => {
                views.push(None);
                out.push(format!("{}: {e} at {}", n.name, p.monitor_url()));
            }
            Ok((_, gw, problems)) => {
                views.push(gw);
                for pr in problems {
                    out.push(format!("{}: {pr}", n.name));
                }
            }
        }
    }
    out.extend(inbound_problems(t, &views));
    out
}

fn up(t: &Topology, file: &str, timeout: Duration, extra: &[String]) -> Result<(), String> {
    let (ports, leaf_ports) = assign_ports(t)?;
    let signals = signals()?;
    let (_conf_dir, confs) = ConfDir::write(t, &ports)?;
    let mut nodes = spawn(t, (&ports, &leaf_ports), &confs, extra, &signals)?;
    let count = t.node_count();
    eprintln!(
        "natsd topology: started {count} node{} of {}{}, waiting for the full mesh{}{}",
        if count == 1 { "" } else { "s" },
        t.describe(),
        leaves_text(t),
        if t.super_cluster {
            "es and gateways"
        } else {
            ""
        },
        if t.leaves.is_empty() {
            ""
        } else {
            " and leafnodes"
        }
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
        let p = mesh_problems(t, &ports, &leaf_ports);
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
    let width = names(t).iter().map(|n| n.len()).max().unwrap_or(0);
    for ((ci, n), p) in t.nodes().zip(&ports) {
        let gw = match p.gateway_url() {
            Some(g) => format!("  gateway {g} ({})", t.clusters[ci].name),
            None => String::new(),
        };
        let leaf = match p.leafnode {
            Some(l) => format!("  leafnodes nats-leaf://{HOST}:{l}"),
            None => String::new(),
        };
        println!(
            "{:width$}  {}  monitoring {}  routes {}{gw}{leaf}",
            n.name,
            p.client_url(),
            p.monitor_url(),
            p.route_url()
        );
    }
    for (l, p) in t.leaves.iter().zip(&leaf_ports) {
        println!(
            "{:width$}  {}  monitoring {}  leaf of {}",
            l.name,
            p.client_url(),
            p.monitor_url(),
            t.clusters[l.hub].name
        );
    }
    let all_fixed =
        t.nodes().all(|(_, n)| n.http.is_some()) && t.leaves.iter().all(|l| l.http.is_some());
    // The binary's own path, so the line runs as printed (after `cargo run` natsd is not on
    // PATH).
    let me = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "natsd".into());
    let check = if all_fixed {
        format!("{me} topology check {file}")
    } else {
        let urls: Vec<String> = ports
            .iter()
            .map(Ports::monitor_url)
            .chain(leaf_ports.iter().map(LeafPorts::monitor_url))
            .collect();
        format!("{me} topology check {file} {}", urls.join(" "))
    };
    let clients: Vec<String> = ports
        .iter()
        .map(Ports::client_url)
        .chain(leaf_ports.iter().map(LeafPorts::client_url))
        .collect();
    println!("clients: {}", clients.join(","));
    println!("check:   {check}");
    println!(
        "cluster ready: {}, {count} nodes{}, {}{} (Ctrl-C stops every node)",
        t.describe(),
        leaves_text(t),
        if t.super_cluster {
            "full meshes and gateways"
        } else {
            "full mesh"
        },
        if t.leaves.is_empty() {
            ""
        } else {
            ", leaves attached"
        }
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

/// ` and N leaves` (nothing without leaves).
pub(super) fn leaves_text(t: &Topology) -> String {
    match t.leaves.len() {
        0 => String::new(),
        1 => " and 1 leaf".into(),
        n => format!(" and {n} leaves"),
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
                gateway: None,
                leafnode: None,
            },
            Ports {
                client: 4223,
                http: 8223,
                route: 6223,
                gateway: None,
                leafnode: None,
            },
        ];
        assert_eq!(gateway_conf(&t, &ports, 0), None);
        assert_eq!(
            node_args(&t, &ports, 0, None, &[]).join(" "),
            "-a 127.0.0.1 -p 4222 -m 8222 -n a --cluster nats://127.0.0.1:6222 --cluster_name C1"
        );
        assert_eq!(
            node_args(&t, &ports, 1, None, &["-D".into()]).join(" "),
            "-a 127.0.0.1 -p 4223 -m 8223 -n b --cluster nats://127.0.0.1:6223 --cluster_name C1 \
             --routes nats-route://127.0.0.1:6222 -D"
        );
    }

    #[test]
    fn super_cluster_command_lines_and_gateways() {
        let t = Topology::parse(
            "clusters { A { nodes { a1 {}, a2 {} } }, B { nodes { b1 {}, b2 {} } } }",
        )
        .expect("parses");
        let ports: Vec<Ports> = (0..4u16)
            .map(|i| Ports {
                client: 4222 + i,
                http: 8222 + i,
                route: 6222 + i,
                gateway: Some(7222 + i),
                leafnode: None,
            })
            .collect();
        // b2 is seeded to b1, the first node of its own cluster.
        assert_eq!(
            node_args(&t, &ports, 3, Some(Path::new("/t/b2.conf")), &[]).join(" "),
            "-c /t/b2.conf -a 127.0.0.1 -p 4225 -m 8225 -n b2 --cluster nats://127.0.0.1:6225 \
             --cluster_name B --routes nats-route://127.0.0.1:6224"
        );
        assert!(!node_args(&t, &ports, 2, None, &[]).contains(&"--routes".to_string()));
        let conf = gateway_conf(&t, &ports, 1).expect("a gateway block");
        assert!(conf.contains("name: \"A\""), "{conf}");
        assert!(conf.contains("listen: \"127.0.0.1:7223\""), "{conf}");
        assert!(
            conf.contains(
                "{ name: \"B\", urls: [\"nats://127.0.0.1:7224\", \"nats://127.0.0.1:7225\"] }"
            ),
            "{conf}"
        );
        // The block is one natsd reads.
        let o = crate::config::file::load_str(&conf);
        assert!(o.is_ok(), "{conf}: {:?}", o.err());
        let (all, _) = assign_ports(&t).expect("ports");
        assert!(all.iter().all(|p| p.gateway.is_some()));
    }

    #[test]
    fn free_ports_are_distinct() {
        let t = Topology::parse("cluster: C\nnodes { a {}, b {}, c {} }").expect("parses");
        let (ports, _) = assign_ports(&t).expect("ports");
        let mut all: Vec<u16> = ports
            .iter()
            .flat_map(|p| [p.client, p.http, p.route])
            .collect();
        assert!(ports.iter().all(|p| p.gateway.is_none()));
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 9);
    }
}
