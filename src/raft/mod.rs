//! Consensus for clustered JetStream: replicated groups on the `openraft` crate, behind
//! an API of our own so the rest of natsd never names an openraft type.
//!
//! - [`Group`] (group.rs): one Raft group on this node — `propose`, leadership,
//!   membership, step-down, metrics, and `handle_rpc` for RPCs that arrive for it.
//! - [`StateMachine`]: what a group replicates into (the meta layer, a stream, a
//!   consumer); our code implements it, openraft never sees it.
//! - Storage (log_store.rs, sm_store.rs, frame.rs): the log, the vote and the latest
//!   snapshot as crc-framed files under the group's directory, fsynced where Raft needs it.
//! - [`Transport`] (network.rs): how one node's RPC reaches another node's group, as
//!   opaque bytes; [`NatsTransport`] (nats.rs) carries them as internal request/reply in
//!   the system account over the routes; [`mem_transport::MemNet`] is the in-memory one
//!   for tests, with partitions and drops.
//!
//! docs/architecture.md ("Replication groups") has the design and what comes next.

mod codec;
mod frame;
mod group;
mod log_index;
mod log_store;
pub mod mem_transport;
mod nats;
mod network;
mod sm_store;

use std::fmt;
use std::io::{self, Read, Write};

pub use group::{Group, GroupConfig, StepDown};
pub use nats::NatsTransport;
pub use network::{RpcOp, Transport, TransportError, TransportFuture};

/// A member of a group: a JetStream node. Its name travels beside it (the server name).
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft's type configuration for every natsd group: opaque byte payloads.
    pub(crate) TypeConfig:
        D = Bin,
        R = Vec<u8>,
        SnapshotData = tokio::fs::File,
);

/// An entry's opaque bytes, shared (a clone for each follower's append costs no copy).
/// Log records and append RPCs carry them raw (codec.rs); where openraft's serde is used
/// (JSON: snapshots' metadata, older peers' appends, older log records) they are base64
/// text, as a plain byte array would be a JSON array of numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bin(pub bytes::Bytes);

impl serde::Serialize for Bin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&data_encoding::BASE64.encode(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for Bin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Bin, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        data_encoding::BASE64
            .decode(s.as_bytes())
            .map(|v| Bin(v.into()))
            .map_err(serde::de::Error::custom)
    }
}

/// `#[serde(with = "crate::raft::bin")]` for `Vec<u8>` fields stored as base64 text.
pub(crate) mod bin {
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&data_encoding::BASE64.encode(v))
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        use serde::Deserialize;
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        data_encoding::BASE64
            .decode(s.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

/// What a group replicates into. Every member applies the same entries in the same
/// order; `apply` must be deterministic.
///
/// A member that restarts is rebuilt from its latest snapshot (`restore`) and then the
/// log entries after it (`apply`). A state machine that also keeps its own durable
/// state must therefore skip indexes it has already applied.
pub trait StateMachine: Send + 'static {
    /// Applies the committed entry at `index`; the returned bytes go back to the
    /// proposer (on the leader) and are dropped elsewhere.
    fn apply(&mut self, index: u64, data: &[u8]) -> Vec<u8>;
    /// As `apply`, told which member led the group when the entry was appended: a fact of
    /// the log, the same on every member and at every replay.
    fn apply_from(&mut self, index: u64, leader: NodeId, data: &[u8]) -> Vec<u8> {
        let _ = leader;
        self.apply(index, data)
    }
    /// The whole state, for compaction and for members too far behind to catch up
    /// from the log.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces the whole state with a snapshot taken by `snapshot` (possibly on
    /// another member). Bad bytes are an error, never a panic.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), String>;
    /// As `snapshot`, written to `out` (a file under the group's directory). A state
    /// machine whose state is large (a stream's) writes it piece by piece instead of
    /// building it in memory; a snapshot has no size limit of its own.
    fn snapshot_to(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(&self.snapshot())
    }
    /// As `restore`, reading the snapshot from `input` (the file `snapshot_to` wrote, or
    /// the one received from the leader).
    fn restore_from(&mut self, input: &mut dyn Read) -> Result<(), String> {
        let mut data = Vec::new();
        input
            .read_to_end(&mut data)
            .map_err(|e| format!("snapshot read: {e}"))?;
        self.restore(&data)
    }
}

/// Why a proposal (or a membership change) was not committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposeError {
    /// This member is not the leader; `leader` is the one it knows of, if any.
    NotLeader { leader: Option<NodeId> },
    /// This member leads but has not heard from a majority within an election timeout
    /// (it is on the minority side of a partition): nothing is proposed.
    NoQuorum,
    /// Proposed but not committed within the propose timeout. The outcome is unknown:
    /// the entry may still commit later, or be dropped by a new leader.
    Timeout,
    /// A membership change is already in progress, or the change is not allowed.
    Membership(String),
    /// The group is shut down, or failed (a storage error stops it).
    Stopped(String),
    /// A step-down ended with no other member leading.
    NoHandover,
    /// A step-down is already under way (a second one is not begun).
    HandingOver,
}

impl fmt::Display for ProposeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProposeError::NotLeader { leader: Some(l) } => write!(f, "not leader (leader is {l})"),
            ProposeError::NotLeader { leader: None } => write!(f, "not leader (no leader known)"),
            ProposeError::NoQuorum => write!(f, "leader has no quorum"),
            ProposeError::Timeout => write!(f, "proposal not committed in time (outcome unknown)"),
            ProposeError::Membership(why) => write!(f, "membership change refused: {why}"),
            ProposeError::Stopped(why) => write!(f, "group stopped: {why}"),
            ProposeError::NoHandover => write!(f, "no other member took over in time"),
            ProposeError::HandingOver => write!(f, "a step-down is already under way"),
        }
    }
}

impl std::error::Error for ProposeError {}

/// The role of this member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Candidate,
    Follower,
    Learner,
    Stopped,
}

/// A replica's progress as the leader sees it (for `cluster.replicas` in STREAM INFO).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaProgress {
    pub id: NodeId,
    /// Highest log index known to be on that replica.
    pub matched: Option<u64>,
    /// Entries the replica is behind the leader's last log index.
    pub lag: u64,
}

/// A snapshot of a group's state on this member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetrics {
    pub id: NodeId,
    pub role: Role,
    pub term: u64,
    pub leader: Option<NodeId>,
    pub last_log_index: Option<u64>,
    pub applied: Option<u64>,
    pub snapshot: Option<u64>,
    pub purged: Option<u64>,
    pub voters: Vec<NodeId>,
    pub learners: Vec<NodeId>,
    /// On the leader only: how long since a majority last acknowledged it.
    pub millis_since_quorum_ack: Option<u64>,
    /// Whom this member voted for in its current term.
    pub voted_for: Option<NodeId>,
    /// The term of the last applied entry.
    pub applied_term: Option<u64>,
    /// On the leader only: every other member's progress.
    pub replicas: Vec<ReplicaProgress>,
}
