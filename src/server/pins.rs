//! A reload that changes the `pinned_certs` of the cluster or gateway `tls` block: the peers
//! connected there are checked against the new set and those that no longer match are
//! closed (nats-server's `recheckPinnedCerts`). New connections take the live set at their
//! handshake (`tls::live_pins`). Client connections are not re-checked: nats-server compares
//! them with the set they were admitted under, so it never closes one either; and it refuses
//! to reload the leafnodes block's.

use super::ServerShared;
use crate::config::reload::PinsChange;
use crate::conn::{CloseReason, Conn, ConnKind};
use std::sync::Arc;

/// Whether `conn`'s peer certificate is one of `set`'s (a peer without one is not).
fn pinned(conn: &Conn, set: &std::collections::BTreeSet<String>) -> bool {
    conn.meta()
        .peer_cert
        .as_ref()
        .is_some_and(|c| set.contains(&c.spki_sha256))
}

impl ServerShared {
    /// Close the route and gateway connections whose peer the new `pinned_certs` of their
    /// block (in `new`) no longer lists; returns how many.
    pub(super) fn recheck_pins(&self, pins: PinsChange, new: &crate::config::Options) -> usize {
        let mut conns: Vec<(Arc<Conn>, ConnKind)> = Vec::new();
        if pins.routes {
            if let Some(cl) = &self.cluster {
                conns.extend(
                    cl.routes()
                        .iter()
                        .map(|r| (r.conn.clone(), ConnKind::Route)),
                );
            }
        }
        if pins.gateways {
            if let Some(gw) = &self.gateway {
                conns.extend(
                    gw.outbounds()
                        .iter()
                        .map(|o| (o.conn.clone(), ConnKind::Gateway)),
                );
                conns.extend(
                    gw.inbounds()
                        .iter()
                        .map(|i| (i.conn.clone(), ConnKind::Gateway)),
                );
            }
        }
        let mut closed = 0;
        for (conn, kind) in conns {
            let Some(set) = crate::tls::live_pins(new, kind) else {
                continue; // no pins any more: everyone may stay
            };
            if !pinned(&conn, &set) {
                tracing::debug!(
                    "{} - Failed pinned cert test after reload",
                    conn.log_prefix()
                );
                conn.close(CloseReason::TlsHandshakeError);
                closed += 1;
            }
        }
        if closed > 0 {
            tracing::info!("Disconnect {closed} clients due to pinned certs reload");
        }
        closed
    }
}
