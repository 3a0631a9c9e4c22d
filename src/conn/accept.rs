//! The one accept loop of every listener (client, route, gateway): accept until told to stop,
//! hand each connection on, and ride out temporary errors (out of descriptors and the like) as
//! nats-server does: log, breathe 10 ms, go on.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Accept on `l` until `stop` completes; `what` names the listener in the error log line
/// ("Client", "Route", "Gateway").
pub async fn run<F>(
    l: TcpListener,
    what: &'static str,
    stop: impl Future<Output = ()>,
    mut on_conn: F,
) where
    F: FnMut(TcpStream, SocketAddr),
{
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            r = l.accept() => match r {
                Ok((stream, addr)) => on_conn(stream, addr),
                Err(e) => {
                    tracing::error!("Temporary {what} Accept Error ({e}), sleeping 10ms");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
}
