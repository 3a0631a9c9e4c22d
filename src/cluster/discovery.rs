//! Finding peers: configured seeds (resolved at every attempt, a DNS name may stand for many
//! nodes, every address dialled) and gossiped peers. What to dial and when is the mesh's
//! decision (`mesh.rs`); this module feeds it the configuration (startup and reload).

use super::mesh::Event;
use super::url::RouteUrl;
use super::Cluster;
use crate::proto::info::ServerInfo;
use crate::server::ServerShared;
use std::sync::Arc;

pub use super::driver::resolve;

/// Start the mesh timer and dial every configured seed.
pub fn start(srv: &Arc<ServerShared>, cl: &Arc<Cluster>) {
    srv.tasks
        .spawn(super::driver::timer(srv.clone(), cl.clone()));
    for raw in &cl.opts.routes {
        add_configured(srv, cl, raw);
    }
}

/// Start dialling one configured seed (at startup, or added by a config reload).
pub fn add_configured(srv: &Arc<ServerShared>, cl: &Arc<Cluster>, raw: &str) {
    match RouteUrl::parse(raw) {
        Ok(_) => {
            if cl.add_configured(raw) {
                cl.feed(
                    srv,
                    Event::AddSeed {
                        seed: Arc::from(raw),
                    },
                    None,
                );
            }
        }
        Err(e) => tracing::error!("{e}"),
    }
}

/// A configured seed removed by a config reload: stop dialling it and close the routes it
/// dialled (they are not redialled).
pub fn remove_configured(srv: &Arc<ServerShared>, cl: &Arc<Cluster>, raw: &str) {
    if cl.remove_configured(raw) {
        cl.feed(
            srv,
            Event::RemoveSeed {
                seed: Arc::from(raw),
            },
            None,
        );
    }
}

/// An INFO about another server arrived on a route: the mesh decides whether to dial it.
pub fn consider_gossip(
    srv: &Arc<ServerShared>,
    cl: &Arc<Cluster>,
    conn: &crate::conn::Conn,
    info: &ServerInfo,
) {
    super::driver::gossip(srv, cl, conn, info);
}
