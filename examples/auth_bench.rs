//! Connect rate with authentication, server binaries side by side (docs/benchmarks.md,
//! *Connect rate with authentication*; issue 19's cost check).
//!
//! Each scenario runs every server afresh on one config and has `--workers` clients connect
//! over and over for `--duration` seconds: TCP connect, INFO (its `nonce`), CONNECT with the
//! scenario's credentials and PING, PONG, close. Reported: completed logins per second and
//! the server's CPU time per login (user + system from /proc, which depends little on how busy
//! the shared machine is).
//!
//! * `none`: no authentication;
//! * `user`: a user and a plain password;
//! * `nkey`: an nkey user (the nonce signed with ed25519);
//! * `jwt`: operator mode (MEMORY resolver): a user JWT issued by its account, the nonce
//!   signed with the user's key.
//!
//! ```sh
//! cargo build --release --bin natsd --example auth_bench
//! target/release/examples/auth_bench --server target/release/natsd \
//!     --server /tmp/natsd-py-venv/bin/nats-server --rounds 3 --duration 3
//! ```

use nkeys::KeyPair;
use serde_json::json;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// One scenario: its config (without `listen`) and how a client logs in.
struct Scenario {
    name: &'static str,
    conf: String,
    login: Login,
}

#[derive(Clone)]
enum Login {
    None,
    User,
    Nkey(Arc<KeyPair>),
    Jwt(Arc<KeyPair>, String),
}

fn scenarios() -> Res<Vec<Scenario>> {
    let nkey = Arc::new(KeyPair::new_user());
    let (op, sys, acc, user) = (
        KeyPair::new_operator(),
        KeyPair::new_account(),
        KeyPair::new_account(),
        Arc::new(KeyPair::new_user()),
    );
    let account = |k: &KeyPair| {
        let c = json!({"sub": k.public_key(), "name": "A", "nats": {"type": "account",
            "version": 2, "limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1,
            "exports": -1, "wildcards": true, "conn": -1, "leaf": -1}}});
        natsd::jwt::encode(&c, &op)
    };
    let opc = json!({"sub": op.public_key(), "name": "O", "nats": {"type": "operator",
        "version": 2, "system_account": sys.public_key()}});
    let user_jwt = natsd::jwt::encode(
        &json!({"sub": user.public_key(), "name": "u", "nats": {"type": "user", "version": 2,
            "subs": -1, "data": -1, "payload": -1, "pub": {}, "sub": {}}}),
        &acc,
    )?;
    let jwt_conf = format!(
        "operator: \"{}\"\nsystem_account: {s}\nresolver: MEMORY\n\
         resolver_preload {{\n  {s}: \"{}\"\n  {a}: \"{}\"\n}}\n",
        natsd::jwt::encode(&opc, &op)?,
        account(&sys)?,
        account(&acc)?,
        s = sys.public_key(),
        a = acc.public_key(),
    );
    Ok(vec![
        Scenario {
            name: "none",
            conf: String::new(),
            login: Login::None,
        },
        Scenario {
            name: "user",
            conf: "authorization { users [ { user: u, password: secret } ] }\n".into(),
            login: Login::User,
        },
        Scenario {
            name: "nkey",
            conf: format!(
                "authorization {{ users [ {{ nkey: {} }} ] }}\n",
                nkey.public_key()
            ),
            login: Login::Nkey(nkey),
        },
        Scenario {
            name: "jwt",
            conf: jwt_conf,
            login: Login::Jwt(user, user_jwt),
        },
    ])
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(path: &str, conf: &str, dir: &std::path::Path) -> Res<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let file = dir.join(format!("auth-{port}.conf"));
        std::fs::write(&file, format!("listen: 127.0.0.1:{port}\n{conf}"))?;
        let child = Command::new(path)
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > end {
                return Err(format!("{path} did not listen").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server { child, port })
    }

    /// CPU seconds (user + system) used so far.
    fn cpu(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())) else {
            return 0.0;
        };
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return 0.0;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / 100.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One login: connect, INFO, CONNECT + PING, PONG.
async fn login(port: u16, how: &Login) -> Res<()> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.set_nodelay(true)?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).await?;
    let info: serde_json::Value =
        serde_json::from_str(line.trim_end().trim_start_matches("INFO "))?;
    let nonce = info["nonce"].as_str().unwrap_or_default();
    let sign = |k: &KeyPair| -> Res<String> {
        let sig = k.sign(nonce.as_bytes())?;
        Ok(data_encoding::BASE64URL_NOPAD.encode(&sig))
    };
    let mut c = json!({"verbose": false, "pedantic": false, "protocol": 1});
    match how {
        Login::None => {}
        Login::User => {
            c["user"] = "u".into();
            c["pass"] = "secret".into();
        }
        Login::Nkey(k) => {
            c["nkey"] = k.public_key().into();
            c["sig"] = sign(k)?.into();
        }
        Login::Jwt(k, jwt) => {
            c["jwt"] = jwt.clone().into();
            c["sig"] = sign(k)?.into();
        }
    }
    r.get_mut()
        .write_all(format!("CONNECT {c}\r\nPING\r\n").as_bytes())
        .await?;
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Err("closed".into());
        }
        match line.trim_end() {
            "PONG" => return Ok(()),
            l if l.starts_with("-ERR") => return Err(l.to_string().into()),
            _ => {}
        }
    }
}

/// Logins per second and server CPU µs per login over `secs` seconds with `workers` clients.
async fn run(s: &Server, how: &Login, workers: usize, secs: f64) -> Res<(f64, f64)> {
    login(s.port, how).await?;
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    let cpu0 = s.cpu();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (how, done, failed, port) = (how.clone(), done.clone(), failed.clone(), s.port);
        tasks.push(tokio::spawn(async move {
            while Instant::now() < end {
                match login(port, &how).await {
                    Ok(()) => done.fetch_add(1, Relaxed),
                    Err(_) => failed.fetch_add(1, Relaxed),
                };
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = s.cpu() - cpu0;
    let n = done.load(Relaxed);
    if failed.load(Relaxed) > 0 {
        eprintln!("  ({} logins failed)", failed.load(Relaxed));
    }
    Ok((n as f64 / elapsed, cpu * 1e6 / (n.max(1) as f64)))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[tokio::main]
async fn main() -> Res<()> {
    let mut servers = Vec::new();
    let (mut rounds, mut secs, mut workers) = (3usize, 3.0f64, 8usize);
    let mut only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--server" => servers.push(val()?),
            "--rounds" => rounds = val()?.parse()?,
            "--duration" => secs = val()?.parse()?,
            "--workers" => workers = val()?.parse()?,
            "--scenario" => only = Some(val()?.split(',').map(str::to_string).collect()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if servers.is_empty() {
        return Err("name at least one --server".into());
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("natsd-auth-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    println!("| scenario | {} |", servers.join(" | "));
    println!("|---|{}", "---:|".repeat(servers.len()));
    for sc in scenarios()? {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == sc.name))
        {
            continue;
        }
        let mut cells = Vec::new();
        for path in &servers {
            let (mut rates, mut cpus) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                let s = Server::start(path, &sc.conf, &dir)?;
                let (rate, cpu) = run(&s, &sc.login, workers, secs).await?;
                rates.push(rate);
                cpus.push(cpu);
            }
            cells.push(format!(
                "{:.0}/s, {:.0} µs",
                median(&mut rates),
                median(&mut cpus)
            ));
        }
        println!("| `{}` | {} |", sc.name, cells.join(" | "));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
