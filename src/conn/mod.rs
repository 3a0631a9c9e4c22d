//! What every connection kind shares: identity, counters, the outbound buffer with its writer
//! task, and the close signal with its reason. Knows nothing of client or route semantics.

pub mod accept;
pub mod driver;
pub mod outbound;
pub mod sids;
pub mod tls;
pub mod writer;

use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;

pub use outbound::{Outbound, Push, Switch};

/// Which kind of peer a connection serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnKind {
    Client,
    Route,
    /// A gateway connection (super-cluster), inbound or outbound.
    Gateway,
    /// A leafnode connection, accepted (we are its hub) or dialled (we are its leaf).
    Leaf,
    /// The server itself: internal subscriptions ($SYS services, import relays).
    Internal,
}

impl ConnKind {
    /// The kind as log lines name it ("Route compressed stream error").
    pub fn label(self) -> &'static str {
        match self {
            ConnKind::Client => "Client",
            ConnKind::Route => "Route",
            ConnKind::Gateway => "Gateway",
            ConnKind::Leaf => "Leafnode",
            ConnKind::Internal => "Internal",
        }
    }
}

/// Why a connection closed; the texts are nats-server's `/connz` `reason` strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    ClientClosed,
    AuthenticationTimeout,
    AuthenticationViolation,
    /// A user JWT's expiry came while connected.
    AuthenticationExpired,
    TlsHandshakeError,
    SlowConsumerPendingBytes,
    SlowConsumerWriteDeadline,
    WriteError,
    ReadError,
    ParseError,
    StaleConnection,
    ProtocolViolation,
    BadClientProtocolVersion,
    MaxPayloadExceeded,
    MaxControlLineExceeded,
    MaxConnectionsExceeded,
    MaxAccountConnectionsExceeded,
    /// The client's subscription limit was 0 from the start.
    MaxSubscriptionsExceeded,
    /// An account JWT update revoked the client's user JWT.
    Revocation,
    ServerShutdown,
    DuplicateRoute,
    /// A reload dropped the route (a new pool size, an account no longer pinned).
    RouteRemoved,
    ClusterNameConflict,
    WrongPort,
    WrongGateway,
    /// A leaf older than the hub's `min_version`.
    MinimumVersionRequired,
}

impl CloseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::ClientClosed => "Client Closed",
            CloseReason::AuthenticationTimeout => "Authentication Timeout",
            CloseReason::AuthenticationViolation => "Authentication Failure",
            CloseReason::AuthenticationExpired => "Authentication Expired",
            CloseReason::TlsHandshakeError => "TLS Handshake Failure",
            CloseReason::SlowConsumerPendingBytes => "Slow Consumer (Pending Bytes)",
            CloseReason::SlowConsumerWriteDeadline => "Slow Consumer (Write Deadline)",
            CloseReason::WriteError => "Write Error",
            CloseReason::ReadError => "Read Error",
            CloseReason::ParseError => "Parse Error",
            CloseReason::StaleConnection => "Stale Connection",
            CloseReason::ProtocolViolation => "Protocol Violation",
            CloseReason::BadClientProtocolVersion => "Bad Client Protocol Version",
            CloseReason::MaxPayloadExceeded => "Maximum Message Payload Exceeded",
            CloseReason::MaxControlLineExceeded => "Maximum Control Line Exceeded",
            CloseReason::MaxConnectionsExceeded => "Maximum Connections Exceeded",
            CloseReason::MaxAccountConnectionsExceeded => "Maximum Account Connections Exceeded",
            CloseReason::MaxSubscriptionsExceeded => "Maximum Subscriptions Exceeded",
            CloseReason::Revocation => "Credentials Revoked",
            CloseReason::ServerShutdown => "Server Shutdown",
            CloseReason::DuplicateRoute => "Duplicate Route",
            CloseReason::RouteRemoved => "Route Removed",
            CloseReason::ClusterNameConflict => "Cluster Name Conflict",
            CloseReason::WrongPort => "Incorrect Port",
            CloseReason::WrongGateway => "Wrong Gateway",
            CloseReason::MinimumVersionRequired => "Minimum Version Required",
        }
    }

    pub fn is_slow_consumer(self) -> bool {
        matches!(
            self,
            CloseReason::SlowConsumerPendingBytes | CloseReason::SlowConsumerWriteDeadline
        )
    }
}

/// Message and byte counters of one connection (relaxed atomics: monitoring only).
#[derive(Default, Debug)]
pub struct Counters {
    pub in_msgs: AtomicU64,
    pub in_bytes: AtomicU64,
    pub out_msgs: AtomicU64,
    pub out_bytes: AtomicU64,
}

/// What monitoring shows about a connection, filled from CONNECT and auth.
#[derive(Default, Debug, Clone)]
pub struct ConnMeta {
    pub name: String,
    pub lang: String,
    pub version: String,
    pub user: String,
    pub account: String,
    pub rtt: Option<Duration>,
    /// TLS clients: nats-server's `tls_version` ("1.3") and `tls_cipher_suite` (Go's name).
    pub tls_version: String,
    pub tls_cipher_suite: String,
    /// TLS clients: what their certificate says (`verify_and_map`).
    pub peer_cert: Option<std::sync::Arc<crate::tls::cert::PeerCert>>,
    /// TLS clients: the DER certificates they presented, their own first (for the auth
    /// callout's `client_tls`).
    pub peer_chain: Option<std::sync::Arc<Vec<Vec<u8>>>>,
    /// A client's permissions as `$SYS.REQ.USER.INFO` shows them (`None`: unrestricted).
    pub permissions: Option<std::sync::Arc<serde_json::Value>>,
    /// When its user JWT expires (unix seconds; 0: never).
    pub expires: i64,
    /// A JWT user's `name`.
    pub name_tag: String,
}

/// The shared half of a connection: everything other tasks may touch.
pub struct Conn {
    pub cid: u64,
    pub kind: ConnKind,
    pub addr: SocketAddr,
    pub start: SystemTime,
    pub out: Outbound,
    pub counters: Counters,
    /// The peer understands HMSG (client CONNECT `headers:true`).
    pub headers: AtomicBool,
    /// The client accepts asynchronous INFO (CONNECT `protocol` >= 1).
    pub async_info: AtomicBool,
    /// A pinned-account route: RMSG/HMSG go without the account (nats-server 2.10+).
    pub no_account: AtomicBool,
    /// A leafnode connection we dialled to a hub (nats-server's "spoke"): messages from
    /// routes are not sent over it, and what it brings in does not go to routes.
    pub spoke: AtomicBool,
    /// Unix nanos of the last inbound activity.
    pub last_activity: AtomicU64,
    pub meta: Mutex<ConnMeta>,
    /// Subscriptions by sid (clients) — shared so a publisher can retire an auto-unsubscribed one.
    pub subs: Mutex<sids::SidMap>,
    /// A route's or gateway's peer as message tracing needs it (set from its first INFO).
    pub trace_peer: OnceLock<crate::trace::Peer>,
    /// A client with response permissions: the reply subjects it may answer (set at
    /// CONNECT; deliveries record them).
    pub responses: OnceLock<crate::auth::responses::Responses>,
    /// A leafnode connection's permissions (set before it registers): `publish` denies what
    /// is never sent over it (a remote's `deny_exports`, a leaf's CONNECT `deny_pub`),
    /// `subscribe` denies interest never told to it (a remote's `deny_imports`).
    pub leaf_perms: OnceLock<Arc<crate::auth::CompiledPerms>>,
    /// A leafnode connection's remote cluster (the leaf's CONNECT `cluster`; a hub's INFO
    /// `cluster` when we dialled it), set before it registers: interest and messages that
    /// came from that cluster are never handed back to it (nats-server's `remoteCluster`).
    pub leaf_cluster: OnceLock<Bytes>,
    /// A route peer that takes a leaf's origin cluster (INFO `lnoc`: `LS+ <origin> …`,
    /// `LMSG <origin> …`) and, with `lnocu`, in `LS-` too. Set before it registers.
    pub lnoc: AtomicBool,
    pub lnocu: AtomicBool,
    close_reason: OnceLock<CloseReason>,
    closing: CancellationToken,
}

pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Conn {
    /// A leafnode connection's remote cluster, when it named one.
    #[inline]
    pub fn leaf_cluster(&self) -> Option<&Bytes> {
        self.leaf_cluster.get().filter(|c| !c.is_empty())
    }

    /// A leaf connection's publish permission: may a message on `subject` go over it?
    pub fn leaf_may_send(&self, subject: &[u8]) -> bool {
        self.leaf_perms.get().is_none_or(|p| p.can_publish(subject))
    }

    pub fn new(cid: u64, kind: ConnKind, addr: SocketAddr, max_pending: usize) -> Self {
        let start = SystemTime::now();
        Conn {
            cid,
            kind,
            addr,
            start,
            out: Outbound::new(max_pending),
            counters: Counters::default(),
            headers: AtomicBool::new(false),
            async_info: AtomicBool::new(false),
            no_account: AtomicBool::new(false),
            spoke: AtomicBool::new(false),
            last_activity: AtomicU64::new(unix_nanos(start)),
            meta: Mutex::new(ConnMeta::default()),
            subs: Mutex::new(sids::SidMap::default()),
            trace_peer: OnceLock::new(),
            responses: OnceLock::new(),
            leaf_perms: OnceLock::new(),
            leaf_cluster: OnceLock::new(),
            lnoc: AtomicBool::new(false),
            lnocu: AtomicBool::new(false),
            close_reason: OnceLock::new(),
            closing: CancellationToken::new(),
        }
    }

    /// Start closing with `reason` (the first reason wins). The writer flushes what is
    /// queued (e.g. a final `-ERR`) and shuts the socket; the reader stops.
    pub fn close(&self, reason: CloseReason) {
        if self.close_reason.set(reason).is_ok() {
            self.out.close();
            self.closing.cancel();
        }
    }

    /// What a read returned: false (and the connection closing) on EOF or an error.
    pub fn read_ok(&self, r: &std::io::Result<usize>) -> bool {
        match r {
            Ok(0) => self.close(CloseReason::ClientClosed),
            // A TLS peer that closes the socket without close_notify (as Go sees it: EOF).
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                self.close(CloseReason::ClientClosed)
            }
            Err(e) => {
                tracing::debug!("{} - read error: {e}", self.log_prefix());
                self.close(CloseReason::ReadError);
            }
            Ok(_) => return true,
        }
        false
    }

    pub fn close_reason(&self) -> Option<CloseReason> {
        self.close_reason.get().copied()
    }

    pub fn is_closed(&self) -> bool {
        self.close_reason.get().is_some()
    }

    /// Resolves when the connection starts closing.
    pub fn closed(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.closing.cancelled()
    }

    pub fn touch(&self, now: SystemTime) {
        self.last_activity.store(unix_nanos(now), Relaxed);
    }

    pub fn meta(&self) -> std::sync::MutexGuard<'_, ConnMeta> {
        self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn subs(&self) -> std::sync::MutexGuard<'_, sids::SidMap> {
        self.subs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ip:port - cid:N` as nats-server prefixes per-connection log lines.
    pub fn log_prefix(&self) -> String {
        let kind = match self.kind {
            ConnKind::Client | ConnKind::Internal => "cid",
            ConnKind::Route => "rid",
            ConnKind::Gateway => "gid",
            ConnKind::Leaf => "lid",
        };
        format!("{} - {}:{}", self.addr, kind, self.cid)
    }
}
