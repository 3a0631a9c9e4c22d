//! Lame duck mode: stop accepting clients, tell routes and clients, close the clients spread
//! over `lame_duck_duration` after `lame_duck_grace_period`, then shut down.

use super::{info_line, ServerShared};
use crate::conn::CloseReason;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

impl ServerShared {
    /// Enter lame duck mode (SIGUSR2, `--signal ldm`), as nats-server does: stop accepting
    /// clients, tell routes (`ldm:true` route INFO, so peers withdraw our client URLs) and
    /// clients (`ldm:true` INFO with the other servers' URLs), then after
    /// `lame_duck_grace_period` close the clients spread over the rest of
    /// `lame_duck_duration` and shut down. Returns at once; does nothing when already in lame
    /// duck mode or shutting down.
    pub fn lame_duck(self: &Arc<Self>) {
        if self.is_shutting_down() || self.ldm.swap(true, Relaxed) {
            return;
        }
        tracing::info!("Entering lame duck mode, stop accepting new clients");
        self.stop_accept.cancel();
        self.tasks.spawn(self.clone().lame_duck_run());
    }

    async fn lame_duck_run(self: Arc<Self>) {
        use std::time::Duration;
        // No new client once the accept loop is gone.
        tokio::select! {
            _ = self.accept_done.cancelled() => {}
            _ = self.shutdown.cancelled() => return,
        }
        // JetStream leadership moves to the other nodes first (nats-server waits a second
        // after its transfers, as here).
        let js = self
            .jetstream
            .get()
            .and_then(|j| j.engine().cluster.clone());
        if let Some(c) = js {
            let handed = tokio::time::timeout(Duration::from_secs(10), c.lame_duck())
                .await
                .unwrap_or(Some(false));
            if let Some(all) = handed {
                if all {
                    tracing::info!("JetStream: leadership handed over before lame duck shutdown");
                } else {
                    tracing::warn!(
                        "JetStream: leadership not handed over before lame duck shutdown (the other members elect once this node is gone)"
                    );
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = self.shutdown.cancelled() => return,
                }
            }
        }
        let clients = self.clients();
        if clients.is_empty() {
            // Nothing to drain (nats-server shuts down at once, without the grace period).
            self.begin_shutdown();
            return;
        }
        let opts = self.live_opts();
        let grace = opts.lame_duck_grace_period;
        let mut dur = opts.lame_duck_duration.saturating_sub(grace);
        if dur.is_zero() {
            dur = Duration::from_secs(1);
        }
        // The pause between two closes: at most 1 s; with more clients than nanoseconds,
        // close them in batches.
        let n = clients.len() as u128;
        let (mut si, mut batch) = (dur.as_nanos() / n, 1usize);
        if si < 1 {
            si = 1;
            batch = (n / dur.as_nanos().max(1)) as usize;
        } else if si > 1_000_000_000 {
            si = 1_000_000_000;
        }
        self.send_ldm_to_routes();
        self.send_ldm_to_clients();
        tokio::select! {
            _ = tokio::time::sleep(grace) => tracing::info!("Closing existing clients"),
            _ = self.shutdown.cancelled() => return,
        }
        let last = clients.len() - 1;
        for (i, c) in clients.iter().enumerate() {
            c.close(CloseReason::ServerShutdown);
            if i == last {
                break;
            }
            if batch <= 1 || i % batch == 0 {
                // A random pause of at least half the interval, as nats-server.
                let v = rand::random_range(si / 2..si.max(1) + 1).max(si / 2);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_nanos(v as u64)) => {}
                    _ = self.shutdown.cancelled() => return,
                }
            }
        }
        self.begin_shutdown();
    }

    /// Our route INFO with `ldm:true`, once, to every route.
    fn send_ldm_to_routes(&self) {
        let Some(cl) = &self.cluster else { return };
        let mut info = self.route_info(cl, false, None);
        info.ldm = true;
        let json = serde_json::to_vec(&info).unwrap_or_default();
        cl.broadcast(&info_line(&json));
    }

    /// An INFO with `ldm:true` and the other servers' URLs to every client that accepts
    /// async INFO.
    fn send_ldm_to_clients(&self) {
        for c in self.clients() {
            if c.async_info.load(Relaxed) && !c.is_closed() {
                let mut info = self.client_info(&c);
                info.ldm = true;
                let json = serde_json::to_vec(&info).unwrap_or_default();
                let line = info_line(&json);
                c.out.push_now(line.len(), |b| b.extend_from_slice(&line));
            }
        }
    }
}
