//! A logging TCP proxy for route connections that decodes S2 streams with natsd's own
//! decoder (what tests/route_compression*.rs watch the wire with), and nodes (nats-server or
//! natsd, by binary) started from a small config.

use super::natsserver::{launch_bin, NatsServer, Wait};
use super::DEADLINE;
use bytes::BytesMut;
use natsd::compress::stream::STREAM_IDENTIFIER;
use natsd::compress::Decoder;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One thing seen on a proxied route connection.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Duration,
    pub conn: usize,
    /// `>` dialler to acceptor, `<` acceptor to dialler.
    pub dir: char,
    /// A protocol line (payload lines included), or `[S2 stream]` where a compressed stream
    /// starts.
    pub line: String,
    pub compressed: bool,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

/// Reads one direction of a proxied connection: plain lines until the first S2 stream
/// identifier, then everything through the decoder.
pub fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    conn: usize,
    dir: char,
    start: Instant,
    log: Log,
) {
    let mut plain = BytesMut::new();
    let mut dec: Option<Decoder> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let push = |line: String, compressed: bool| {
        log.lock().expect("log").push(Seen {
            at: start.elapsed(),
            conn,
            dir,
            line,
            compressed,
        })
    };
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        match &mut dec {
            None => {
                plain.extend_from_slice(&buf[..n]);
                if let Some(at) = plain
                    .windows(STREAM_IDENTIFIER.len())
                    .position(|w| w == STREAM_IDENTIFIER)
                {
                    let rest = plain.split_off(at);
                    lines(&mut plain, &mut |l| push(l, false));
                    push("[S2 stream]".into(), true);
                    let mut d = Decoder::new();
                    d.feed(&rest);
                    dec = Some(d);
                    plain.clear();
                } else {
                    lines(&mut plain, &mut |l| push(l, false));
                    continue;
                }
            }
            Some(d) => d.feed(&buf[..n]),
        }
        if let Some(d) = &mut dec {
            match d.decode(&mut plain, usize::MAX) {
                Ok(_) => lines(&mut plain, &mut |l| push(l, true)),
                Err(e) => {
                    push(format!("[decode error: {e}]"), true);
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// Takes the complete lines off the front of `buf`.
pub fn lines(buf: &mut BytesMut, f: &mut dyn FnMut(String)) {
    while let Some(i) = buf.windows(2).position(|w| w == b"\r\n") {
        let l = buf.split_to(i + 2);
        f(String::from_utf8_lossy(&l[..i]).into_owned());
    }
}

/// A proxy on 127.0.0.1 forwarding every connection to `target`, logging both directions.
pub fn proxy(target: SocketAddr, log: Log) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let port = l.local_addr().expect("addr").port();
    let start = Instant::now();
    std::thread::spawn(move || {
        for (conn, c) in l.incoming().enumerate() {
            let Ok(c) = c else { break };
            let Ok(t) = TcpStream::connect(target) else {
                break;
            };
            let (c2, t2) = (c.try_clone().expect("clone"), t.try_clone().expect("clone"));
            let (l1, l2) = (log.clone(), log.clone());
            std::thread::spawn(move || pump(c, t, conn, '>', start, l1));
            std::thread::spawn(move || pump(t2, c2, conn, '<', start, l2));
        }
    });
    port
}

pub fn node(
    bin: &str,
    name: &str,
    cluster_extra: &str,
    seed: Option<u16>,
) -> (NatsServer, tempfile_path::Path) {
    node_with(bin, name, "", cluster_extra, seed)
}

/// [`node`] with more top-level config (`top_extra`, e.g. `http: "127.0.0.1:-1"`).
pub fn node_with(
    bin: &str,
    name: &str,
    top_extra: &str,
    cluster_extra: &str,
    seed: Option<u16>,
) -> (NatsServer, tempfile_path::Path) {
    let routes = seed.map_or(String::new(), |p| {
        format!("routes: [\"nats-route://127.0.0.1:{p}\"]")
    });
    let conf = format!(
        "server_name: {name}\nlisten: \"127.0.0.1:-1\"\n{top_extra}\ncluster {{\n name: C\n listen: \"127.0.0.1:-1\"\n {cluster_extra}\n {routes}\n}}\n"
    );
    let path = tempfile_path::write(name, &conf);
    let s = launch_bin(
        bin,
        &["-c".to_string(), path.0.to_string_lossy().into_owned()],
        Wait {
            client: true,
            route: true,
            gateway: false,
            ready: true,
        },
    );
    (s, path)
}

/// A config file removed on drop.
pub mod tempfile_path {
    pub struct Path(pub std::path::PathBuf);
    impl Drop for Path {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    pub fn write(name: &str, body: &str) -> Path {
        let p = std::env::temp_dir().join(format!(
            "natsd-s2-{}-{name}-{}.conf",
            std::process::id(),
            super::super::free_port()
        ));
        std::fs::write(&p, body).expect("write config");
        Path(p)
    }
}

pub fn wait_log(log: &Log, what: &str, f: impl Fn(&[Seen]) -> bool) {
    let end = Instant::now() + DEADLINE;
    while !f(&log.lock().expect("log")) {
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}: {:#?}",
            log.lock().expect("log")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn transcript(log: &Log) -> String {
    log.lock()
        .expect("log")
        .iter()
        .map(|s| {
            let full = s.line.starts_with("INFO") || s.line.starts_with("CONNECT");
            let l = if s.line.len() > 160 && !full {
                format!("{}…", &s.line[..160])
            } else {
                s.line.clone()
            };
            format!(
                "{:>6.1}ms c{} {} {}{}\n",
                s.at.as_secs_f64() * 1000.0,
                s.conn,
                s.dir,
                if s.compressed { "[z] " } else { "" },
                l
            )
        })
        .collect()
}

/// The lines of connection `conn` in one direction, in order.
pub fn lines_of(log: &Log, conn: usize, dir: char) -> Vec<Seen> {
    log.lock()
        .expect("log")
        .iter()
        .filter(|s| s.conn == conn && s.dir == dir)
        .cloned()
        .collect()
}

pub fn info_field(line: &str, field: &str) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(line.strip_prefix("INFO ")?.trim()).ok()?;
    v.get(field).cloned()
}
