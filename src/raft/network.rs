//! How Raft RPCs travel between members: the [`Transport`] trait (opaque request bytes
//! to a named group on a target node, reply bytes back) and openraft's network traits
//! implemented on top of it, with JSON bodies.
//!
//! The receiving side decodes in `Group::handle_rpc` (group.rs) with [`decode_request`]
//! and [`encode_reply`] from here, so both directions share one wire format.
//! InstallSnapshot travels in chunks (openraft's `Chunked`), each chunk one RPC, so no
//! single message is larger than the snapshot chunk size.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{NodeId, TypeConfig};

/// The three Raft RPCs. `as_str` is the token used in subjects
/// (`$NATSD.RAFT.<group>.<op>.<target>` for the NATS transport).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RpcOp {
    Append,
    /// AppendEntries in its binary form (codec.rs), to peers that take it.
    AppendBin,
    Vote,
    Snapshot,
    /// From a leader stepping down to a caught-up follower: campaign now (Raft's
    /// `TimeoutNow`). A node that does not know it ignores it; the step-down then waits for
    /// an election timeout.
    Elect,
    /// From a leader about to step down in a group of more than three: do not stand for
    /// election for the milliseconds in the body (decimal), while the leader stops sending
    /// to this member so its lease runs out (see `Group::step_down`).
    Hold,
    /// Would the receiver vote for the sender (its last log id in the body)? Asked before
    /// a member stands for election (`group/elect.rs`).
    PreVote,
}

impl RpcOp {
    pub fn as_str(self) -> &'static str {
        match self {
            RpcOp::Append => "AE",
            RpcOp::AppendBin => "AEB",
            RpcOp::Vote => "VOTE",
            RpcOp::Snapshot => "SNAP",
            RpcOp::Elect => "ELECT",
            RpcOp::Hold => "HOLD",
            RpcOp::PreVote => "PREVOTE",
        }
    }

    pub fn parse(s: &str) -> Option<RpcOp> {
        match s {
            "AE" => Some(RpcOp::Append),
            "AEB" => Some(RpcOp::AppendBin),
            "VOTE" => Some(RpcOp::Vote),
            "SNAP" => Some(RpcOp::Snapshot),
            "ELECT" => Some(RpcOp::Elect),
            "HOLD" => Some(RpcOp::Hold),
            "PREVOTE" => Some(RpcOp::PreVote),
            _ => None,
        }
    }
}

/// Why an RPC got no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The target cannot be reached (down, partitioned, no route): openraft backs off.
    Unreachable(String),
    /// The message or its reply was lost or garbled: openraft retries at once.
    Failed(String),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Unreachable(w) => write!(f, "unreachable: {w}"),
            TransportError::Failed(w) => write!(f, "rpc failed: {w}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// The reply to one RPC, or why there is none.
pub type TransportFuture =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>> + Send + 'static>>;

/// Carries one RPC of `group` from node `from` to node `target` and returns the reply.
/// Implementations deliver `body` to the target's `Group::handle_rpc(op, body)` and
/// bring its result back; they need not understand either.
pub trait Transport: Send + Sync + 'static {
    fn call(
        &self,
        group: &str,
        from: NodeId,
        target: NodeId,
        op: RpcOp,
        body: &[u8],
    ) -> TransportFuture;

    /// Whether node `target` takes appends in their binary form (`AEB`); older nodes
    /// take JSON only.
    fn binary_append(&self, _target: NodeId) -> bool {
        false
    }
}

/// Builds one [`NetClient`] per target for openraft.
pub(crate) struct NetFactory {
    pub group: Arc<str>,
    pub me: NodeId,
    pub transport: Arc<dyn Transport>,
    pub backoff: Duration,
    /// [`Deferred`] heartbeats wait this long; `None`: none is deferred.
    pub defer: Option<Duration>,
    /// The member nothing is sent to for now (0: none), see [`Link::send`].
    pub muted: Arc<AtomicU64>,
    /// When each peer last accepted an append or heartbeat.
    pub heard: Arc<Heard>,
}

/// When each peer last accepted an append or heartbeat from this member: milliseconds
/// after `epoch` (0: never), one atomic per peer so the append path takes no lock.
pub(crate) struct Heard {
    epoch: Instant,
    peers: Mutex<std::collections::BTreeMap<NodeId, Arc<AtomicU64>>>,
}

impl Default for Heard {
    fn default() -> Self {
        Heard {
            epoch: Instant::now(),
            peers: Default::default(),
        }
    }
}

impl Heard {
    fn slot(&self, peer: NodeId) -> Arc<AtomicU64> {
        let mut g = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(peer).or_default().clone()
    }

    fn now(&self) -> u64 {
        (self.epoch.elapsed().as_millis() as u64).max(1)
    }

    /// Stamps `slot` with now (on this clock: any stamp, not only a peer's).
    pub(crate) fn mark(&self, slot: &AtomicU64) {
        slot.store(self.now(), Relaxed);
    }

    /// How long ago `slot` was stamped; `None`: never.
    pub(crate) fn age(&self, slot: &AtomicU64) -> Option<Duration> {
        let at = slot.load(Relaxed);
        (at > 0).then(|| Duration::from_millis(self.now().saturating_sub(at)))
    }

    /// How long ago `peer` last accepted something; `None`: never.
    pub(crate) fn since(&self, peer: NodeId) -> Option<Duration> {
        self.age(&self.slot(peer))
    }
}

impl RaftNetworkFactory<TypeConfig> for NetFactory {
    type Network = NetClient;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> NetClient {
        NetClient {
            link: Link {
                group: self.group.clone(),
                me: self.me,
                target,
                transport: self.transport.clone(),
                muted: self.muted.clone(),
            },
            backoff: self.backoff,
            defer: self.defer,
            deferred: Arc::new(Mutex::new(Deferred::default())),
            heard: (self.heard.clone(), self.heard.slot(target)),
        }
    }
}

/// How recently a follower must have really accepted an append for a heartbeat to it to be
/// answered on its behalf (and sent a little later, unless an append carries it first).
const FRESH: Duration = Duration::from_millis(50);

/// openraft's view of one peer.
pub(crate) struct NetClient {
    link: Link,
    backoff: Duration,
    defer: Option<Duration>,
    deferred: Arc<Mutex<Deferred>>,
    /// The group's [`Heard`] and this peer's slot in it.
    heard: (Arc<Heard>, Arc<AtomicU64>),
}

/// Where one peer's RPCs go.
#[derive(Clone)]
struct Link {
    group: Arc<str>,
    me: NodeId,
    target: NodeId,
    transport: Arc<dyn Transport>,
    muted: Arc<AtomicU64>,
}

/// Heartbeats to one peer that wait for a chance to go along with an append.
///
/// openraft 0.9 follows every commit with a heartbeat to each follower (to tell it the new
/// commit index), and sends the next append only once that is answered: two round trips
/// per proposal where one carries the same news, since every append names the leader's
/// commit index. A heartbeat to a follower that accepted an append under [`FRESH`] ago,
/// under the same vote, is answered here at once and kept; an append sent within the
/// group's `defer_heartbeat` takes its place (its commit index is as new or newer), and
/// otherwise it is sent as it was. A follower that stops answering is noticed at most
/// [`FRESH`] later.
#[derive(Default)]
struct Deferred {
    /// When the peer last accepted a real append or heartbeat, and under which vote.
    last_ok: Option<(Instant, Vote<NodeId>)>,
    /// The newest heartbeat answered here and not sent yet.
    pending: Option<AppendEntriesRequest<TypeConfig>>,
    /// A task is waiting to send `pending`.
    armed: bool,
}

fn lock(d: &Mutex<Deferred>) -> MutexGuard<'_, Deferred> {
    d.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug)]
struct WireError(String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

thread_local! {
    /// Where this thread encodes binary appends. Reused, so a batch of large entries is not
    /// copied into freshly mapped pages every time (the transport copies the body out
    /// before [`Transport::call`] returns).
    static APPEND_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// [`APPEND_BUF`] keeps at most this much between appends.
const APPEND_BUF_KEEP: usize = 1 << 20;

impl Link {
    async fn rpc<Req, Resp, E>(
        &self,
        op: RpcOp,
        req: &Req,
        ttl: Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body =
            serde_json::to_vec(req).map_err(|e| net_err(format!("encode {}: {e}", op.as_str())))?;
        let call = self.send(op, &body);
        self.reply(op, call, ttl).await
    }

    /// Hands the encoded request to the transport; to a muted member (a step-down lets its
    /// lease run out) nothing goes: it is unreachable, and openraft backs off.
    fn send(&self, op: RpcOp, body: &[u8]) -> TransportFuture {
        if self.muted.load(Relaxed) == self.target {
            let why = format!("{} muted while the leader hands over", self.target);
            return Box::pin(std::future::ready(Err(TransportError::Unreachable(why))));
        }
        self.transport
            .call(&self.group, self.me, self.target, op, body)
    }

    /// Waits up to `ttl` for the reply to a request [`Link::send`] sent and decodes it.
    async fn reply<Resp, E>(
        &self,
        op: RpcOp,
        call: TransportFuture,
        ttl: Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let net = net_err;
        let reply = match tokio::time::timeout(ttl, call).await {
            Err(_) => {
                return Err(net(format!(
                    "{} to {} timed out after {ttl:?}",
                    op.as_str(),
                    self.target
                )))
            }
            Ok(Err(TransportError::Unreachable(w))) => {
                return Err(RPCError::Unreachable(Unreachable::new(&WireError(w))))
            }
            Ok(Err(TransportError::Failed(w))) => return Err(net(w)),
            Ok(Ok(b)) => b,
        };
        let res: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&reply)
            .map_err(|e| net(format!("decode {} reply: {e}", op.as_str())))?;
        res.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

fn net_err<E: std::error::Error>(why: String) -> RPCError<NodeId, BasicNode, E> {
    RPCError::Network(NetworkError::new(&WireError(why)))
}

impl RaftNetwork<TypeConfig> for NetClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        {
            let mut d = lock(&self.deferred);
            let fresh = |(t, v): &(Instant, Vote<NodeId>)| *v == rpc.vote && t.elapsed() < FRESH;
            if let Some(wait) = self.defer {
                if rpc.entries.is_empty() && d.last_ok.as_ref().is_some_and(fresh) {
                    d.pending = Some(rpc);
                    if !d.armed {
                        d.armed = true;
                        tokio::spawn(send_deferred(
                            self.link.clone(),
                            self.deferred.clone(),
                            wait,
                            option.hard_ttl(),
                        ));
                    }
                    return Ok(AppendEntriesResponse::Success);
                }
            }
            // This one carries a commit index as new as any heartbeat waiting.
            d.pending = None;
        }
        let vote = rpc.vote;
        let res = self.link.append(&rpc, option.hard_ttl()).await;
        lock(&self.deferred).last_ok = match &res {
            Ok(AppendEntriesResponse::Success) => {
                self.heard.0.mark(&self.heard.1);
                Some((Instant::now(), vote))
            }
            _ => None,
        };
        res
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.link
            .rpc(RpcOp::Snapshot, &rpc, option.hard_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.link.rpc(RpcOp::Vote, &rpc, option.hard_ttl()).await
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.backoff))
    }
}

impl Link {
    /// Sends an AppendEntries in the form the peer takes.
    async fn append(
        &self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        ttl: Duration,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        if self.transport.binary_append(self.target) {
            let call = APPEND_BUF.with(|b| {
                let mut buf = b.borrow_mut();
                buf.clear();
                let sent = super::codec::encode_append_into(&mut buf, rpc)
                    .map(|()| self.send(RpcOp::AppendBin, &buf));
                if buf.capacity() > APPEND_BUF_KEEP {
                    *buf = Vec::new();
                }
                sent
            });
            return self
                .reply(RpcOp::AppendBin, call.map_err(net_err)?, ttl)
                .await;
        }
        self.rpc(RpcOp::Append, rpc, ttl).await
    }
}

/// Sends the heartbeat [`Deferred`] holds after `wait`, unless an append took its place.
/// Anything but success makes the next heartbeat go out for real, so the replication task
/// hears of it.
async fn send_deferred(link: Link, deferred: Arc<Mutex<Deferred>>, wait: Duration, ttl: Duration) {
    tokio::time::sleep(wait).await;
    let rpc = {
        let mut d = lock(&deferred);
        d.armed = false;
        d.pending.take()
    };
    let Some(rpc) = rpc else { return };
    let res = link.append(&rpc, ttl).await;
    if !matches!(res, Ok(AppendEntriesResponse::Success)) {
        tracing::debug!(
            "raft group {}: deferred heartbeat to {}: {res:?}",
            link.group,
            link.target
        );
        lock(&deferred).last_ok = None;
    }
}

/// Decodes an RPC body on the receiving side.
pub(crate) fn decode_request<T: DeserializeOwned>(op: RpcOp, body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("bad {} request: {e}", op.as_str()))
}

/// Encodes the receiving side's result as the reply body.
pub(crate) fn encode_reply<T: Serialize, E: Serialize>(
    op: RpcOp,
    res: &Result<T, E>,
) -> Result<Vec<u8>, String> {
    serde_json::to_vec(res).map_err(|e| format!("encode {} reply: {e}", op.as_str()))
}
