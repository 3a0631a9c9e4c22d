//! Listening sockets with nats-server's accept backlog.

use std::io;
use tokio::net::{TcpListener, TcpSocket, ToSocketAddrs};

/// The accept backlog of every listener (nats-server's Go runtime uses the kernel's
/// `somaxconn`, 4096 on current Linux; tokio's `TcpListener::bind` asks for 1024). The kernel
/// caps it at `net.core.somaxconn`. A reconnect storm (every client of a restarted server at
/// once) then waits in the queue instead of having its SYNs dropped and retried a second later.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Bind `addr` (the first of its addresses that binds) and listen with [`LISTEN_BACKLOG`];
/// `SO_REUSEADDR` as tokio's `bind`.
pub async fn listen(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let sock = if a.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        }?;
        let bound = sock
            .set_reuseaddr(true)
            .and_then(|_| sock.bind(a))
            .and_then(|_| sock.listen(LISTEN_BACKLOG));
        match bound {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A listener that is not accepting (a busy accept loop, a storm) still completes the
    /// handshakes of up to its backlog of clients: none waits for a SYN retry. With tokio's
    /// default backlog (1024) the clients past it time out here.
    #[tokio::test]
    async fn the_backlog_holds_a_storm_of_connects() {
        let somaxconn = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(128);
        let n = 2000.min(somaxconn.saturating_sub(16));
        let l = listen("127.0.0.1:0").await.expect("listen");
        let addr = l.local_addr().expect("addr");
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..n {
            tasks.spawn(async move {
                tokio::time::timeout(
                    Duration::from_millis(800),
                    tokio::net::TcpStream::connect(addr),
                )
                .await
            });
        }
        let mut ok = 0;
        let mut streams = Vec::new();
        while let Some(r) = tasks.join_next().await {
            if let Ok(Ok(Ok(s))) = r {
                ok += 1;
                streams.push(s);
            }
        }
        assert_eq!(ok, n, "connects completed without an accept (backlog)");
        drop(l);
    }
}
