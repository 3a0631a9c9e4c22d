//! A config reload as one route connection sees it (`Cluster::reconfigure` moved `reconf`):
//! compression re-applied to the live connection as nats-server does (a level change in place,
//! or a close that makes it negotiate anew), the interest learned for accounts this connection
//! no longer carries dropped (they moved to routes of their own), and our interest for
//! accounts it carries again (unpinned) sent.

use super::*;
use crate::compress::negotiate::ReloadStep;

impl Route {
    pub(super) fn on_reconfigure(&mut self) -> Result<(), CloseReason> {
        let Some(entry) = self.entry.clone() else {
            // Still in its handshake: it negotiates with the settings of its start (our INFO
            // said them), so its compression is re-checked once it is registered
            // (`after_handshake`); the mesh decides about its slot once its INFO comes.
            self.reconf_missed = true;
            return Ok(());
        };
        self.recheck_compression(&entry)?;
        if self.pinned.is_some() || entry.no_pool {
            return Ok(());
        }
        // Interest this pool connection learned for accounts it no longer carries.
        let cl = self.cl.clone();
        self.drop_remote(|acc| !cl.carries(&entry, &acc.name));
        entry.num_subs.store(self.remote_count, Relaxed);
        // Our interest for accounts it carries again.
        let unpinned: Vec<Arc<Account>> = self
            .cl
            .unpinned()
            .iter()
            .filter(|a| self.cl.carries(&entry, a))
            .filter_map(|a| self.srv.accounts.lookup(a.as_bytes()))
            .collect();
        if !unpinned.is_empty() {
            self.cl.dump(&unpinned, &entry);
        }
        Ok(())
    }

    /// The connection's compression against the configured one (after a reload): kept, a
    /// level changed in place, or closed to negotiate anew (nats-server's rules).
    fn recheck_compression(&mut self, entry: &RouteEntry) -> Result<(), CloseReason> {
        let rtt = self
            .conn
            .meta()
            .rtt
            .unwrap_or_else(|| self.started.elapsed());
        match self.comp.reload(self.cl.compression_opts(), rtt) {
            ReloadStep::Keep => {}
            ReloadStep::Close => {
                tracing::debug!(
                    "{} - Route compression changed by reload, closing",
                    self.conn.log_prefix()
                );
                return Err(CloseReason::ClientClosed);
            }
            ReloadStep::Level(level) => {
                self.conn.out.compress_from_now(level);
                entry.set_compression(self.comp.mode());
            }
        }
        Ok(())
    }

    /// The handshake is over and the connection has its place: a reload that came during
    /// the handshake changed nothing of what it negotiated, so its compression is checked
    /// now. (Without this, a route dialled just before a reload to `s2_fast` kept `off` for
    /// good: neither end closes it, as the reload had passed.) Its interest needs nothing:
    /// what it was sent on registration follows the registry as it is now.
    pub(super) fn after_handshake(&mut self) -> Result<(), CloseReason> {
        if !std::mem::take(&mut self.reconf_missed) {
            return Ok(());
        }
        match self.entry.clone() {
            Some(entry) => self.recheck_compression(&entry),
            None => Ok(()),
        }
    }
}
