//! Rolling config reloads of the pool size and pinned accounts in the simulation: every node
//! reloads once, in random order, to one new configuration. A node that pins new accounts
//! announces them as the cluster layer does (`cluster/reload.rs`): every pooled peer pins them
//! too and both ends learn `PeerPins`. The run must end in the full mesh of the new
//! configuration, with no close once converged.

use super::*;

/// Schedule the reloads once the first configuration had time to converge; the time of the
/// last one.
pub(super) fn schedule(sim: &mut Sim, rng: &mut SmallRng) -> Duration {
    let pool = [-1, 2, 3, 4][rng.random_range(0..4)];
    let pinned: Vec<Arc<str>> = match rng.random_range(0..3) {
        0 => vec![Arc::from("$SYS")],
        1 => vec![Arc::from("$SYS"), Arc::from("A")],
        _ => vec![Arc::from("$SYS"), Arc::from("B")],
    };
    let mut last = Duration::ZERO;
    for n in 0..sim.nodes.len() {
        // Some reloads land together, most spread over seconds.
        let at = ms(rng.random_range(8_000..12_000));
        last = last.max(at);
        sim.push(at, n, 0, Kind::Reload(pool, pinned.clone()));
    }
    last
}

impl Sim {
    pub(super) fn reload(&mut self, n: usize, pool: i32, pinned: Vec<Arc<str>>) {
        if self.nodes[n].mesh.is_none() {
            return;
        }
        let pinned = if pool > 0 { pinned } else { Vec::new() };
        if let Some(log) = &mut self.log {
            let _ = writeln!(
                log,
                "{:?} n{n} RELOAD pool {pool} pinned {pinned:?}",
                self.now
            );
        }
        let added: Vec<Arc<str>> = pinned
            .iter()
            .filter(|a| !self.nodes[n].cfg.pinned.contains(a))
            .cloned()
            .collect();
        self.nodes[n].cfg.pool = pool;
        self.nodes[n].cfg.pinned = pinned.clone();
        self.deliver(
            n,
            Event::Reconfigure {
                pool_size: pool,
                pinned,
            },
        );
        if added.is_empty() || pool <= 0 {
            return;
        }
        // The announcement reaches the pooled peers it is connected to; they pin the
        // accounts too and answer.
        let me = self.nodes[n].id.clone();
        let peers: Vec<Arc<str>> = self.nodes[n]
            .mesh
            .as_ref()
            .map(|m| m.routes().into_iter().map(|(p, _, _)| p).collect())
            .unwrap_or_default();
        let mut told = BTreeSet::new();
        for peer in peers {
            let Some(&m) = self.ids.get(&peer) else {
                continue;
            };
            if !told.insert(m) || self.nodes[m].cfg.pool <= 0 || self.nodes[m].id != peer {
                continue;
            }
            let cfg = &mut self.nodes[m].cfg;
            for a in &added {
                if !cfg.pinned.contains(a) {
                    cfg.pinned.push(a.clone());
                }
            }
            cfg.pinned.sort();
            let ev = Event::Reconfigure {
                pool_size: cfg.pool,
                pinned: cfg.pinned.clone(),
            };
            self.deliver(m, ev);
            self.deliver(m, Event::PeerPins { id: me.clone() });
            self.deliver(n, Event::PeerPins { id: peer.clone() });
        }
    }
}

/// 300 seeds of 6 nodes, each reloading once (`MESH_SEEDS_RELOAD` to change).
#[test]
fn mesh_converges_after_rolling_reloads() {
    sweep_with(env("MESH_SEEDS_RELOAD", 300), 6, true);
}
