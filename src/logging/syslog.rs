//! Log lines to syslog, as nats-server's `-s/--syslog` (the local daemon, facility daemon) and
//! `-r/--remote_syslog URL` (`udp://host[:514]`, `tcp://host[:514]`, `unix:///path`) write
//! them. Observed on 2.9.10 (remote, UDP): `<5>2026-11-29T13:00:53Z vm nats-server[22877]:
//! Server is ready` — severity only (notice 5 for INF and TRC, 7 DBG, 4 WRN, 3 ERR, 2 FTL),
//! RFC 3339 seconds, host name, the program name and pid; no `[INF]` tag. Local lines carry
//! facility daemon (`<29>`) and Go's `Jan _2 15:04:05` stamp without a host name.

use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, SystemTime};

enum Conn {
    Udp(UdpSocket),
    Tcp(TcpStream),
    Unix(UnixDatagram),
}

pub struct Syslog {
    conn: Conn,
    /// Remote lines carry the host name and an RFC 3339 stamp; local ones neither.
    remote: bool,
    facility: u8,
    host: String,
    tag: String,
    pid: u32,
}

/// The unix sockets a local syslog daemon listens on (Go's `log/syslog` order).
const LOCAL_SOCKETS: [&str; 3] = ["/dev/log", "/var/run/syslog", "/var/run/log"];

const DEFAULT_PORT: u16 = 514;

impl Syslog {
    /// The local syslog daemon (`-s`).
    pub fn local(tag: &str) -> Result<Syslog, String> {
        let mut tried = Vec::new();
        for path in LOCAL_SOCKETS {
            let sock = UnixDatagram::unbound().map_err(|e| format!("syslog socket: {e}"))?;
            match sock.connect(path) {
                Ok(()) => return Ok(Syslog::new(Conn::Unix(sock), false, 3, tag)),
                Err(e) => tried.push(format!("{path}: {e}")),
            }
        }
        Err(format!("error connecting to syslog: {}", tried.join("; ")))
    }

    /// A remote syslog at `url` (`-r`).
    pub fn remote(url: &str, tag: &str) -> Result<Syslog, String> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("udp", url));
        let with_port = |hostport: &str| -> String {
            if hostport
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                hostport.to_string()
            } else {
                format!("{hostport}:{DEFAULT_PORT}")
            }
        };
        let bad = |e: std::io::Error| format!("error connecting to remote syslog {url:?}: {e}");
        let conn = match scheme {
            "udp" => {
                let addr = with_port(rest.trim_end_matches('/'));
                let target = addr
                    .to_socket_addrs()
                    .map_err(bad)?
                    .next()
                    .ok_or_else(|| format!("remote syslog {url:?}: no address"))?;
                let bind: std::net::SocketAddr = if target.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
                };
                let s = UdpSocket::bind(bind).map_err(bad)?;
                s.connect(target).map_err(bad)?;
                Conn::Udp(s)
            }
            "tcp" => {
                let addr = with_port(rest.trim_end_matches('/'));
                let target = addr
                    .to_socket_addrs()
                    .map_err(bad)?
                    .next()
                    .ok_or_else(|| format!("remote syslog {url:?}: no address"))?;
                let s = TcpStream::connect_timeout(&target, Duration::from_secs(5)).map_err(bad)?;
                let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                Conn::Tcp(s)
            }
            "unix" | "unixgram" => {
                let s = UnixDatagram::unbound().map_err(bad)?;
                s.connect(rest).map_err(bad)?;
                Conn::Unix(s)
            }
            other => {
                return Err(format!(
                    "remote syslog {url:?}: unsupported scheme {other:?} (udp, tcp or unix)"
                ))
            }
        };
        Ok(Syslog::new(conn, true, 0, tag))
    }

    fn new(conn: Conn, remote: bool, facility: u8, tag: &str) -> Syslog {
        Syslog {
            conn,
            remote,
            facility,
            host: hostname(),
            tag: tag.to_string(),
            pid: std::process::id(),
        }
    }

    /// Send one line; `level` is natsd's tag (`[INF]`, …). Failures are dropped: logging
    /// must never stop the server.
    pub fn send(&mut self, level: &str, msg: &str) {
        let line = self.format(level, msg, SystemTime::now());
        let _ = match &mut self.conn {
            Conn::Udp(s) => s.send(line.as_bytes()).map(|_| ()),
            Conn::Unix(s) => s.send(line.as_bytes()).map(|_| ()),
            Conn::Tcp(s) => s.write_all(line.as_bytes()),
        };
    }

    fn format(&self, level: &str, msg: &str, now: SystemTime) -> String {
        let pri = self.facility * 8 + severity(level);
        if self.remote {
            format!(
                "<{pri}>{} {} {}[{}]: {msg}\n",
                crate::util::time::rfc3339_secs(now),
                self.host,
                self.tag,
                self.pid
            )
        } else {
            format!(
                "<{pri}>{} {}[{}]: {msg}\n",
                crate::util::time::syslog_stamp(now),
                self.tag,
                self.pid
            )
        }
    }
}

/// Syslog severity of a natsd level tag, as nats-server maps its levels.
fn severity(level: &str) -> u8 {
    match level {
        "[FTL]" => 2,
        "[ERR]" => 3,
        "[WRN]" => 4,
        "[DBG]" => 7,
        _ => 5,
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The program name syslog lines carry: the executable's file name (so a `nats-server`
/// symlink logs as nats-server, as the Go server names itself after `argv[0]`).
pub fn program_tag() -> String {
    std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "natsd".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_udp_lines_look_like_nats_servers() {
        let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let port = rx.local_addr().expect("addr").port();
        let mut s = Syslog::remote(&format!("udp://127.0.0.1:{port}"), "natsd").expect("dial");
        s.send("[INF]", "Server is ready");
        s.send("[ERR]", "boom");
        s.send("[DBG]", "detail");
        let mut buf = [0u8; 512];
        let mut got = Vec::new();
        for _ in 0..3 {
            let n = rx.recv(&mut buf).expect("recv");
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        let pid = std::process::id();
        assert!(got[0].starts_with("<5>20"), "{}", got[0]);
        assert!(
            got[0].ends_with(&format!(" natsd[{pid}]: Server is ready\n")),
            "{}",
            got[0]
        );
        assert!(got[1].starts_with("<3>"), "{}", got[1]);
        assert!(got[2].starts_with("<7>"), "{}", got[2]);
    }

    #[test]
    fn local_lines_carry_facility_daemon_and_no_host() {
        let s = Syslog {
            conn: Conn::Udp(UdpSocket::bind("127.0.0.1:0").expect("bind")),
            remote: false,
            facility: 3,
            host: "h".into(),
            tag: "nats-server".into(),
            pid: 7,
        };
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_795_957_253);
        assert_eq!(
            s.format("[INF]", "hi", t),
            "<29>Nov 29 13:00:53 nats-server[7]: hi\n"
        );
        assert_eq!(s.format("[WRN]", "w", t).get(..4), Some("<28>"));
    }

    #[test]
    fn remote_unix_socket() {
        let dir = std::env::temp_dir().join(format!("natsd-syslog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("log.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).expect("bind");
        let url = format!("unix://{}", path.display());
        let mut s = Syslog::remote(&url, "natsd").expect("dial");
        s.send("[WRN]", "careful");
        let mut buf = [0u8; 256];
        let n = rx.recv(&mut buf).expect("recv");
        let l = String::from_utf8_lossy(&buf[..n]).into_owned();
        assert!(l.starts_with("<4>") && l.ends_with(": careful\n"), "{l}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_urls_are_refused_clearly() {
        let e = Syslog::remote("ftp://x", "natsd").err().expect("refused");
        assert!(e.contains("unsupported scheme"), "{e}");
        let e = Syslog::remote("unix:///nonexistent/sock", "natsd")
            .err()
            .expect("refused");
        assert!(e.contains("remote syslog"), "{e}");
    }
}
