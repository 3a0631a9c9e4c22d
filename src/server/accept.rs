//! The client and route listeners' accept loops (on `conn::accept::run`).

use super::{listen, ServerShared};
use crate::cluster::Cluster;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

/// The route listener: each accepted connection is a route served until it closes.
pub(super) async fn route_accept_loop(srv: Arc<ServerShared>, cl: Arc<Cluster>, l: TcpListener) {
    crate::conn::accept::run(l, "Route", srv.shutdown.cancelled(), |stream, addr| {
        let run = crate::cluster::route::run(srv.clone(), cl.clone(), stream, addr, None);
        srv.tasks.spawn(run);
    })
    .await
}

/// The client listener; lame duck mode stops it (`stop_accept`: new connections are refused).
pub(super) async fn accept_loop(srv: Arc<ServerShared>, l: TcpListener, tasks: TaskTracker) {
    let stop = async {
        tokio::select! {
            _ = srv.shutdown.cancelled() => {}
            _ = srv.stop_accept.cancelled() => {}
        }
    };
    crate::conn::accept::run(l, "Client", stop, |stream, addr| {
        let addr = listen::peer(addr);
        tasks.spawn(crate::client::serve(srv.clone(), stream, addr));
    })
    .await
}
