//! An in-memory [`Transport`] for tests: every member of every group registered in one
//! [`MemNet`], with faults injected by the test — nodes cut off from each other
//! (partitions), a seeded per-mille drop rate for requests and replies, and a delay for
//! snapshot chunks (a slow or busy link).
//!
//! RPC bodies are the real JSON wire format (network.rs), so tests over `MemNet` also
//! exercise encoding and `Group::handle_rpc`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::group::Group;
use super::network::{RpcOp, Transport, TransportError, TransportFuture};
use super::NodeId;

struct Inner {
    groups: HashMap<(String, NodeId), Group>,
    /// Ordered pairs (from, to) whose messages are lost.
    cut: HashSet<(NodeId, NodeId)>,
    drop_per_mille: u32,
    rng: StdRng,
    /// AppendEntries RPCs (either form) sent to each node.
    appends: HashMap<NodeId, u64>,
    /// How long a snapshot chunk takes to reach its member.
    snapshot_delay: Duration,
}

/// The in-memory network; share it (`Arc`) as every member's transport.
pub struct MemNet {
    inner: Mutex<Inner>,
    me: Weak<MemNet>,
}

impl MemNet {
    /// A network whose random drops follow `seed`.
    pub fn new(seed: u64) -> Arc<MemNet> {
        Arc::new_cyclic(|me| MemNet {
            inner: Mutex::new(Inner {
                groups: HashMap::new(),
                cut: HashSet::new(),
                drop_per_mille: 0,
                rng: StdRng::seed_from_u64(seed),
                appends: HashMap::new(),
                snapshot_delay: Duration::ZERO,
            }),
            me: me.clone(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Delivers RPCs for `group.name()` on node `group.id()` to `group`.
    pub fn register(&self, group: &Group) {
        self.lock()
            .groups
            .insert((group.name().to_string(), group.id()), group.clone());
    }

    /// The node no longer answers for `name` (it is down).
    pub fn unregister(&self, name: &str, id: NodeId) {
        self.lock().groups.remove(&(name.to_string(), id));
    }

    /// Cuts every link between a node of `a` and a node of `b`, both ways.
    pub fn partition(&self, a: &[NodeId], b: &[NodeId]) {
        let mut inner = self.lock();
        for x in a {
            for y in b {
                inner.cut.insert((*x, *y));
                inner.cut.insert((*y, *x));
            }
        }
    }

    /// Cuts `node` off from every node in `others`.
    pub fn isolate(&self, node: NodeId, others: &[NodeId]) {
        self.partition(&[node], others);
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.lock().cut.clear();
    }

    /// Loses this many requests (and as many replies) per thousand.
    pub fn set_drop_rate(&self, per_mille: u32) {
        self.lock().drop_per_mille = per_mille.min(1000);
    }

    /// Every snapshot chunk sent from now on takes `delay` to reach its member.
    pub fn set_snapshot_delay(&self, delay: Duration) {
        self.lock().snapshot_delay = delay;
    }

    /// How many AppendEntries RPCs (with entries or without) were sent to `node` so far.
    pub fn appends_to(&self, node: NodeId) -> u64 {
        self.lock().appends.get(&node).copied().unwrap_or(0)
    }

    /// Whether a message from `from` to `to` gets through now.
    fn passes(&self, from: NodeId, to: NodeId) -> Result<(), TransportError> {
        let mut inner = self.lock();
        if inner.cut.contains(&(from, to)) {
            return Err(TransportError::Unreachable(format!(
                "{from} -> {to} is cut"
            )));
        }
        let p = inner.drop_per_mille;
        if p > 0 && inner.rng.random_range(0..1000) < p {
            return Err(TransportError::Failed(format!("{from} -> {to} dropped")));
        }
        Ok(())
    }
}

impl Transport for MemNet {
    fn call(
        &self,
        group: &str,
        from: NodeId,
        target: NodeId,
        op: RpcOp,
        body: &[u8],
    ) -> TransportFuture {
        // Copied here, as a real network copies it out of the sender's buffer.
        let body = bytes::Bytes::copy_from_slice(body);
        if matches!(op, RpcOp::Append | RpcOp::AppendBin) {
            *self.lock().appends.entry(target).or_default() += 1;
        }
        let pass = self.passes(from, target);
        let dest = self
            .lock()
            .groups
            .get(&(group.to_string(), target))
            .cloned();
        let delay = match op {
            RpcOp::Snapshot => self.lock().snapshot_delay,
            _ => Duration::ZERO,
        };
        let net = self.me.clone();
        Box::pin(async move {
            pass?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let Some(dest) = dest else {
                return Err(TransportError::Unreachable(format!(
                    "node {target} is not serving this group"
                )));
            };
            let reply = dest
                .handle_rpc(op, body)
                .await
                .map_err(TransportError::Failed)?;
            // The reply crosses the network as it is when it comes back.
            if let Some(net) = net.upgrade() {
                net.passes(target, from)?;
            }
            Ok(reply)
        })
    }

    /// Odd nodes take appends in the binary form, even ones JSON only (as an older natsd):
    /// every group of two or more members carries both.
    fn binary_append(&self, target: NodeId) -> bool {
        target % 2 == 1
    }
}
