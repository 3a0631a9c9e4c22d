//! A stand-in for the `nats-server` helper crate that async-nats' tests use as a dev-dependency.
//!
//! Every server is the `nats-server` binary found on PATH (natsd linked under that name, or the
//! Go server), bound to 127.0.0.1, with its own log file, pid file and JetStream store directory
//! in the temp dir. The client address is read back from the log line
//! "Listening for client connections on HOST:PORT", so `-p -1` (a random port) works.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use std::{env, fs, thread};

const BINARY: &str = "nats-server";
const HOST: &str = "127.0.0.1";

fn unique_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A free TCP port on 127.0.0.1 (bound then released).
fn free_port() -> u16 {
    TcpListener::bind((HOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port on 127.0.0.1")
}

pub struct Server {
    child: Child,
    args: Vec<String>,
    logfile: PathBuf,
    pidfile: PathBuf,
    store_dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.store_dir);
        let _ = fs::remove_file(&self.logfile);
        let _ = fs::remove_file(&self.pidfile);
    }
}

impl Server {
    fn spawn(args: &[String]) -> Child {
        Command::new(BINARY)
            .args(args)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BINARY} from PATH: {e}"))
    }

    /// Kills the server and starts it again with the same arguments (same port when it was
    /// fixed, same store directory, so JetStream state survives).
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The new process appends to the same log; forget the old address line.
        let _ = fs::remove_file(&self.logfile);
        self.child = Self::spawn(&self.args);
        // Wait until it listens again.
        let _ = self.client_addr();
    }

    /// "host:port" of the client listener, from the server's log (waits up to 10s for it).
    fn client_addr(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(log) = fs::read_to_string(&self.logfile) {
                for line in log.lines() {
                    if let Some(pos) = line.find("client connections on ") {
                        let addr = line[pos + "client connections on ".len()..]
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .replace("0.0.0.0", HOST);
                        if TcpStream::connect(&addr).is_ok() {
                            return addr;
                        }
                    }
                }
            }
            if Instant::now() > deadline {
                panic!("no client address in {}", self.logfile.display());
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn info(&self) -> serde_json::Value {
        let stream = TcpStream::connect(self.client_addr()).expect("connect to server");
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).expect("did not receive INFO");
        let json = line.trim_end().strip_prefix("INFO").unwrap_or(&line).trim();
        serde_json::from_str(json).expect("INFO is not JSON")
    }

    pub fn client_port(&self) -> u16 {
        self.info()["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .expect("INFO has no port")
    }

    pub fn client_url(&self) -> String {
        let info = self.info();
        let port = info["port"].as_u64().expect("INFO has no port");
        let scheme = if info["tls_required"].as_bool().unwrap_or(false) {
            "tls"
        } else {
            "nats"
        };
        format!("{scheme}://{HOST}:{port}")
    }

    pub fn client_url_with(&self, user: &str, pass: &str) -> String {
        let mut url = url::Url::parse(&self.client_url()).expect("client url");
        let _ = url.set_username(user);
        let _ = url.set_password(Some(pass));
        url.to_string()
    }

    pub fn client_url_with_token(&self, token: &str) -> String {
        let mut url = url::Url::parse(&self.client_url()).expect("client url");
        let _ = url.set_username(token);
        url.to_string()
    }

    pub fn client_pid(&self) -> usize {
        fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(self.child.id() as usize)
    }
}

pub fn set_lame_duck_mode(s: &Server) {
    let _ = Command::new(BINARY)
        .arg("--signal")
        .arg(format!("ldm={}", s.client_pid()))
        .status();
}

pub fn run_basic_server() -> Server {
    run_server("")
}

pub fn run_server(cfg: &str) -> Server {
    run_server_with_port(cfg, None)
}

pub fn run_server_with_port(cfg: &str, port: Option<&str>) -> Server {
    run_with_args(cfg, port, &[])
}

fn run_with_args(cfg: &str, port: Option<&str>, extra: &[String]) -> Server {
    let id = unique_id();
    let tmp = env::temp_dir();
    let logfile = tmp.join(format!("nats-server-{id}.log"));
    let pidfile = tmp.join(format!("nats-server-{id}.pid"));
    let store_dir = tmp.join(format!("store-dir-{id}"));
    let mut args: Vec<String> = vec![
        "-a".into(),
        HOST.into(),
        "-p".into(),
        port.unwrap_or("-1").into(),
        "--store_dir".into(),
        store_dir.display().to_string(),
        "-l".into(),
        logfile.display().to_string(),
        "-P".into(),
        pidfile.display().to_string(),
    ];
    if !cfg.is_empty() {
        args.push("-c".into());
        args.push(cfg.into());
    }
    args.extend(extra.iter().cloned());
    let child = Server::spawn(&args);
    Server {
        child,
        args,
        logfile,
        pidfile,
        store_dir,
    }
}

/// Three servers routed to each other (cluster name "test-cluster").
pub struct Cluster {
    pub servers: Vec<Server>,
}

impl Cluster {
    pub fn client_url(&self) -> String {
        self.servers[0].client_url()
    }
}

pub fn run_cluster(cfg: &str) -> Cluster {
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let routes = ports
        .iter()
        .map(|p| format!("nats://{HOST}:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let servers = ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let extra = vec![
                "-n".to_string(),
                format!("n{}", i + 1),
                "--cluster_name".to_string(),
                "test-cluster".to_string(),
                "--cluster".to_string(),
                format!("nats://{HOST}:{p}"),
                "--routes".to_string(),
                routes.clone(),
            ];
            run_with_args(cfg, None, &extra)
        })
        .collect();
    Cluster { servers }
}
