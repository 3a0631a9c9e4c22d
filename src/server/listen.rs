//! Listening sockets as nats-server's (Go's `net.Listen("tcp", "0.0.0.0:port")`) are: the
//! IPv4 wildcard is one dual-stack socket on `[::]` with IPv6-only off, so a client that
//! resolves `localhost` to `::1` connects too. Any other host (`-a 127.0.0.1`) binds as given;
//! a host without IPv6 gets the IPv4 wildcard.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::net::TcpListener;

/// Listen on `host:port` (port 0: any free port).
pub async fn bind(host: &str, port: u16) -> io::Result<TcpListener> {
    if host == "0.0.0.0" {
        match dual_stack(Ipv6Addr::UNSPECIFIED, port) {
            Ok(l) => return Ok(l),
            Err(e) => tracing::debug!("no dual-stack listener on port {port} ({e}): IPv4 only"),
        }
    }
    crate::util::net::listen((host, port)).await
}

/// An IPv6 socket on `ip` that takes IPv4 clients too (on the wildcard: every IPv4 address).
fn dual_stack(ip: Ipv6Addr, port: u16) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    s.set_only_v6(false)?;
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&SocketAddr::from((ip, port)).into())?;
    s.listen(crate::util::net::LISTEN_BACKLOG as i32)?;
    TcpListener::from_std(s.into())
}

/// The listener's address as nats-server shows it: the dual-stack wildcard is `0.0.0.0`.
pub fn local_addr(l: &TcpListener) -> io::Result<SocketAddr> {
    l.local_addr().map(shown)
}

fn shown(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) if v6.ip().is_unspecified() => {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, v6.port()))
        }
        _ => a,
    }
}

/// A peer's address with IPv4 clients of a dual-stack socket (`::ffff:a.b.c.d`) as IPv4.
pub fn peer(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// nats-server's (Go's) words for a failed listen on `host:port`:
/// `listen tcp 127.0.0.1:4222: bind: address already in use`.
pub fn go_listen_error(host: &str, port: u16, e: &io::Error) -> String {
    let why = match e.kind() {
        io::ErrorKind::AddrInUse => "bind: address already in use".to_string(),
        io::ErrorKind::AddrNotAvailable => "bind: cannot assign requested address".to_string(),
        io::ErrorKind::PermissionDenied => "bind: permission denied".to_string(),
        _ => {
            let t = e.to_string();
            t.split(" (os error").next().unwrap_or(&t).to_lowercase()
        }
    };
    format!("listen tcp {host}:{port}: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpStream;

    // Tests listen on loopback only, never on the wildcard: the wildcard's dual-stack socket
    // is this one on `[::]` (checked by hand in a network namespace of its own,
    // docs/nats-server-behaviour.md §1).

    #[tokio::test]
    async fn a_dual_stack_socket_takes_ipv4_clients_as_ipv4() {
        let l = dual_stack(Ipv4Addr::LOCALHOST.to_ipv6_mapped(), 0).expect("bind");
        let port = l.local_addr().expect("addr").port();
        let c = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let (_, from) = l.accept().await.expect("accept");
        assert!(from.is_ipv6(), "{from}");
        assert_eq!(peer(from), c.local_addr().expect("local"));
    }

    #[tokio::test]
    async fn a_dual_stack_socket_takes_ipv6_clients() {
        // A host without IPv6 has no ::1 to listen on: nothing to check.
        let Ok(l) = dual_stack(Ipv6Addr::LOCALHOST, 0) else {
            return;
        };
        let port = l.local_addr().expect("addr").port();
        let c = TcpStream::connect(("::1", port))
            .await
            .expect("connect ::1");
        let (_, from) = l.accept().await.expect("accept");
        assert_eq!(peer(from), c.local_addr().expect("local"));
    }

    #[tokio::test]
    async fn a_port_in_use_is_worded_as_go_words_it() {
        let l = bind("127.0.0.1", 0).await.expect("bind");
        let port = l.local_addr().expect("addr").port();
        let e = bind("127.0.0.1", port).await.expect_err("in use");
        assert_eq!(
            go_listen_error("127.0.0.1", port, &e),
            format!("listen tcp 127.0.0.1:{port}: bind: address already in use")
        );
    }

    #[tokio::test]
    async fn the_wildcard_shows_as_ipv4_and_explicit_hosts_bind_as_given() {
        let any6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, 4222));
        assert_eq!(shown(any6), SocketAddr::from((Ipv4Addr::UNSPECIFIED, 4222)));
        let one6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 4222));
        assert_eq!(shown(one6), one6);
        let l = bind("127.0.0.1", 0).await.expect("bind");
        let a = local_addr(&l).expect("addr");
        assert_eq!(a.ip(), Ipv4Addr::LOCALHOST);
        assert!(TcpStream::connect(("::1", a.port())).await.is_err());
    }
}
