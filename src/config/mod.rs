//! `Options`: every setting the server runs with, and nats-server's defaults. Flags
//! (`flags.rs`) and, later, the config language fill it; the server only reads it.

pub mod conf;
pub mod file;
pub mod flags;
pub mod leaf;
pub mod links;
pub mod reload;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The nats-server version whose client-visible features natsd implements. Clients gate
/// features on the INFO `version`, so this is what INFO and `/varz` report as `version`.
pub const COMPAT_VERSION: &str = "2.9.10";
/// natsd's own version (`-v`, and the extra `/varz` field `natsd_version`).
pub const NATSD_VERSION: &str = env!("CARGO_PKG_VERSION");

pub const DEFAULT_PORT: u16 = 4222;
pub const DEFAULT_MAX_PAYLOAD: usize = 1024 * 1024;
pub const DEFAULT_MAX_CONTROL_LINE: usize = 4096;
pub const DEFAULT_MAX_PENDING: usize = 64 * 1024 * 1024;
pub const DEFAULT_MAX_CONNECTIONS: usize = 64 * 1024;
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(120);
pub const DEFAULT_PING_MAX: u32 = 2;
pub const DEFAULT_AUTH_TIMEOUT: Duration = Duration::from_secs(2);
pub const DEFAULT_WRITE_DEADLINE: Duration = Duration::from_secs(10);
pub const DEFAULT_CONNECT_ERROR_REPORTS: u32 = 3600;
pub const DEFAULT_RECONNECT_ERROR_REPORTS: u32 = 1;
pub const DEFAULT_MAX_CLOSED_CLIENTS: usize = 10_000;
pub const DEFAULT_LAME_DUCK_DURATION: Duration = Duration::from_secs(120);
pub const DEFAULT_LAME_DUCK_GRACE_PERIOD: Duration = Duration::from_secs(10);

/// Allow/deny subject lists for one direction (publish or subscribe).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectPermission {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
}

/// A user's publish and subscribe permissions; `None` means unrestricted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Option<SubjectPermission>,
    pub subscribe: Option<SubjectPermission>,
    /// `allow_responses`: replies to received requests may be published.
    pub allow_responses: Option<crate::auth::responses::ResponsePerm>,
}

/// One configured user. `password` may be a bcrypt hash (`$2a$…`, `$2b$…`, `$2y$…`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub password: String,
    /// The account this user's connections join; `None` means the global account `$G`.
    pub account: Option<String>,
    pub permissions: Option<Permissions>,
    /// `allowed_connection_types` (upper case; empty: all).
    pub connection_types: Vec<String>,
}

/// One configured nkey user (`users [ { nkey: U… } ]`): it proves itself by signing the
/// INFO `nonce` with the key's seed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NkeyUser {
    /// The user's public nkey (`U…`).
    pub nkey: String,
    /// The account this user's connections join; `None` means the global account `$G`.
    pub account: Option<String>,
    pub permissions: Option<Permissions>,
    /// `allowed_connection_types` (upper case; empty: all).
    pub connection_types: Vec<String>,
}

/// Operator (JWT) mode: the trusted operators, the `MEMORY` resolver and its preloaded
/// account JWTs (`operator`, `resolver`, `resolver_preload`; see `src/jwt.rs`). The accounts
/// are also in `Options::accounts` (named by public key) with their JWT limits in
/// `Options::account_limits`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorMode {
    /// The trusted operators' JWTs.
    pub operators: Vec<String>,
    /// `resolver`: `None` until one is configured (operators require one).
    pub resolver: Option<Resolver>,
    /// `resolver_preload`: account public key and its JWT. With the full resolver, the
    /// directory's JWTs are merged in at startup (the newer of the two wins).
    pub preload: Vec<(String, String)>,
    /// `default_sentinel`: the user JWT of a client that presents none (a bearer token,
    /// typically of an account whose JWT enables an auth callout).
    pub default_sentinel: Option<String>,
}

/// An account resolver: `MEMORY`, the NATS-based `full` one with its directory, or
/// `URL(base)`: account JWTs fetched over HTTP from `base` + the account key (ends in `/`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolver {
    Memory,
    Full(FullResolver),
    Url(String),
}

/// `resolver { type: full | cache, dir, allow_delete, hard_delete, limit, ttl, interval,
/// timeout }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FullResolver {
    pub dir: std::path::PathBuf,
    pub allow_delete: bool,
    pub hard_delete: bool,
    /// At most this many JWTs (0: no limit).
    pub limit: usize,
    /// How often the store's hash is compared with the other servers' (default 1 min).
    pub interval: std::time::Duration,
    /// How long a lookup waits for other servers (default 1.9 s).
    pub timeout: std::time::Duration,
    /// `type: cache`: `Some(ttl)` (zero: JWTs do not expire). A cache keeps the accounts
    /// its users need (fetched from the other servers), evicts the least recently stored
    /// beyond `limit` (default 1000), answers no lookups and syncs no packs.
    pub cache: Option<std::time::Duration>,
}

/// The `cluster {}` block and the cluster flags: the route listener and how to find peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterOpts {
    /// Cluster name; `None` makes the name dynamic (negotiated with peers).
    pub name: Option<String>,
    pub host: String,
    /// Route port; 0 picks a free one.
    pub port: u16,
    /// `host:port` other servers should dial to reach this one (gossiped as INFO `ip`).
    pub advertise: Option<String>,
    /// Do not advertise peers' client URLs to clients.
    pub no_advertise: bool,
    /// Seed URLs (`nats-route://[user:pass@]host:port`, `nats://…`); a host may be a DNS name
    /// standing for many nodes.
    pub routes: Vec<String>,
    /// Attempts for routes learned by gossip (configured routes retry forever).
    pub connect_retries: u32,
    /// Route authorization (`cluster { authorization { user, password, token, timeout } }`).
    pub username: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub auth_timeout: Duration,
    /// Overrides of the server-wide ping settings for routes.
    pub ping_interval: Option<Duration>,
    pub ping_max: Option<u32>,
    /// `write_deadline` of route connections (None: the top-level one).
    pub write_deadline: Option<Duration>,
    /// `write_timeout` of route connections (default: retry).
    pub write_timeout: crate::conn::writer::WriteTimeoutPolicy,
    /// Route TLS (`cluster { tls { … } }`).
    pub tls: Option<crate::tls::TlsOpts>,
    /// Route connections per peer (`pool_size`, nats-server 2.10+, default 3); each account's
    /// traffic rides one of them. `-1` (or 0) is nats-server 2.9's single route per peer.
    pub pool_size: i32,
    /// Accounts with a route connection of their own to every pooled peer (`accounts`); the
    /// system account is added automatically while pooling is on.
    pub pinned_accounts: Vec<String>,
    /// Seeds are retried after 1 s, doubling to 30 s while they fail (`connect_backoff`).
    pub connect_backoff: bool,
    /// `cluster { compression: … }`, validated; default `accept` as nats-server 2.10+. Each
    /// route connection negotiates it with its peer (`compress::RouteCompression`); a reload
    /// cannot change it (refused, where nats-server re-applies it to live routes).
    pub compression: crate::compress::CompressionOpts,
}

/// nats-server 2.10+'s default route pool size.
pub const DEFAULT_ROUTE_POOL_SIZE: i32 = 3;

impl ClusterOpts {
    /// Route connections per pooled peer, or `None` without pooling (`pool_size` negative,
    /// nats-server 2.9's one route per peer). 0 means the default, as nats-server.
    pub fn pool(&self) -> Option<usize> {
        match self.pool_size {
            n if n < 0 => None,
            0 => Some(DEFAULT_ROUTE_POOL_SIZE as usize),
            n => Some(n as usize),
        }
    }
}

impl Default for ClusterOpts {
    fn default() -> Self {
        ClusterOpts {
            name: None,
            host: "0.0.0.0".into(),
            port: 6222,
            advertise: None,
            no_advertise: false,
            routes: Vec::new(),
            connect_retries: 0,
            username: None,
            password: None,
            token: None,
            auth_timeout: DEFAULT_AUTH_TIMEOUT,
            ping_interval: None,
            ping_max: None,
            write_deadline: None,
            write_timeout: Default::default(),
            tls: None,
            pool_size: DEFAULT_ROUTE_POOL_SIZE,
            pinned_accounts: Vec::new(),
            connect_backoff: false,
            compression: crate::compress::CompressionOpts::route_default(),
        }
    }
}

/// One remote gateway (cluster) of the `gateway { gateways: [...] }` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteGatewayOpts {
    /// The remote cluster's gateway name.
    pub name: String,
    /// URLs to dial (`nats://[user:pass@]host:port`), tried in turn.
    pub urls: Vec<String>,
    /// TLS when dialling this cluster (`tls {}` in its entry; else the gateway's).
    pub tls: Option<crate::tls::TlsOpts>,
}

/// The `gateway {}` block: this cluster's gateway listener and the remote clusters to dial.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayOpts {
    /// This cluster's gateway name (must equal the cluster name).
    pub name: String,
    pub host: String,
    /// Gateway port; 0 picks a free one.
    pub port: u16,
    /// `host:port` remote servers should dial to reach this one.
    pub advertise: Option<String>,
    /// Attempts for implicit gateways (configured ones retry forever).
    pub connect_retries: u32,
    /// Refuse inbound gateways from clusters that are not configured (and no implicit ones).
    pub reject_unknown: bool,
    pub username: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    pub auth_timeout: Duration,
    pub gateways: Vec<RemoteGatewayOpts>,
    /// Failed dials back off from 1 s to 30 s (`connect_backoff`, nats-server 2.12+).
    pub connect_backoff: bool,
    /// `write_deadline` of gateway connections (None: the top-level one).
    pub write_deadline: Option<Duration>,
    /// `write_timeout` of gateway connections (default: retry).
    pub write_timeout: crate::conn::writer::WriteTimeoutPolicy,
    /// Gateway TLS (`gateway { tls { … } }`): inbound and outbound connections.
    pub tls: Option<crate::tls::TlsOpts>,
}

impl Default for GatewayOpts {
    fn default() -> Self {
        GatewayOpts {
            name: String::new(),
            host: "0.0.0.0".into(),
            port: 7222,
            advertise: None,
            connect_retries: 0,
            reject_unknown: false,
            username: None,
            password: None,
            token: None,
            auth_timeout: DEFAULT_AUTH_TIMEOUT,
            gateways: Vec::new(),
            connect_backoff: false,
            write_deadline: None,
            write_timeout: Default::default(),
            tls: None,
        }
    }
}

/// `authorization { auth_callout { issuer, auth_users, account, xkey, allowed_accounts } }`
/// (nats-server 2.10+): a client that is not one of `auth_users` is authorized by the
/// service answering `$SYS.REQ.USER.AUTH` in `account`, with a user JWT `issuer` signed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthCallout {
    /// The account public key that signs the service's answers and the users in them.
    pub issuer: String,
    /// Users the service itself connects as: never called out.
    pub auth_users: Vec<String>,
    /// Where the requests go (`$G` when not set).
    pub account: String,
    /// The service's curve public key: requests and answers are then encrypted.
    pub xkey: Option<String>,
    /// Only users of these accounts are called out (empty: any).
    pub allowed_accounts: Vec<String>,
}

/// Everything the server runs with.
#[derive(Clone, Debug)]
pub struct Options {
    pub host: String,
    /// Client port; 0 picks a free one (nats-server's `-p -1`).
    pub port: u16,
    pub server_name: Option<String>,
    /// Monitoring HTTP port: `None` disables it, `Some(0)` picks a free one.
    pub http_port: Option<u16>,
    pub http_host: Option<String>,
    /// Path prefix of the monitoring endpoints (`http_base_path`); stored, not served yet.
    pub http_base_path: Option<String>,
    pub log_file: Option<PathBuf>,
    /// `logfile_size_limit` (`--log_size_limit`): rotate the log file past this many bytes
    /// (0 or less: never).
    pub log_size_limit: i64,
    /// `logfile_max_num`: with rotation, keep at most this many log files (0 or less: all).
    pub log_max_num: i64,
    pub pid_file: Option<PathBuf>,
    /// Directory for the ports file `<exe>_<pid>.ports` (`--ports_file_dir`, `ports_file_dir`):
    /// written once the listeners are bound, removed on shutdown, as nats-server.
    pub ports_file_dir: Option<PathBuf>,
    /// `server_tags`: trimmed, lowercased, without duplicates or empty tags (`/varz` `tags`).
    pub server_tags: Vec<String>,
    pub debug: bool,
    pub trace: bool,
    pub logtime: bool,
    /// `logtime_utc` / `--logtime_utc` (nats-server 2.10+): natsd stamps log lines in UTC
    /// whatever this says (nats-server uses the local zone when false).
    pub logtime_utc: bool,
    /// `-V` traces at most this many bytes of a message payload (0: all), with `...`.
    pub max_traced_msg_len: usize,
    /// Log to the local syslog daemon (`-s`, `syslog: true`).
    pub syslog: bool,
    /// Log to a remote syslog (`-r URL`, `remote_syslog: URL`; udp://, tcp://, unix://).
    pub remote_syslog: Option<String>,

    /// Single-user auth (`--user`/`--pass`).
    pub username: Option<String>,
    pub password: Option<String>,
    /// Token auth (`--auth`).
    pub auth_token: Option<String>,
    /// Several users, each with an account and permissions.
    pub users: Vec<User>,
    /// Nkey users, each with an account and permissions.
    pub nkeys: Vec<NkeyUser>,
    /// Operator (JWT) mode, when `operator` is configured.
    pub operator: Option<OperatorMode>,
    /// Accounts that exist besides `$G` and `$SYS`.
    pub accounts: Vec<String>,
    /// Accounts' `exports` and `imports` (`links.rs`), by account name.
    pub links: links::Links,
    /// Users without credentials join as this user (nats-server's `no_auth_user`).
    pub no_auth_user: Option<String>,
    /// `authorization { auth_callout {} }`: users are authorized by an external service.
    pub auth_callout: Option<AuthCallout>,

    pub max_payload: usize,
    pub max_control_line: usize,
    pub max_pending: usize,
    pub max_connections: usize,
    /// 0 = unlimited.
    pub max_subscriptions: usize,
    /// `connect_error_reports`: a route or gateway that never connected logs its failed
    /// dials as errors at the first attempt and every this many (others at debug level).
    pub connect_error_reports: u32,
    /// `reconnect_error_reports`: the same once it has been connected.
    pub reconnect_error_reports: u32,
    /// `max_sub_tokens`: most tokens a subscription's subject may have; 0 = unlimited.
    pub max_sub_tokens: u8,
    /// Accounts' `limits { max_connections, max_subscriptions, max_payload, max_leafnodes }`,
    /// by account name.
    pub account_limits: BTreeMap<String, AccountLimits>,
    pub auth_timeout: Duration,
    pub ping_interval: Duration,
    pub ping_max: u32,
    pub write_deadline: Duration,
    /// `write_timeout`: what a client write past `write_deadline` does (default: close).
    pub write_timeout: crate::conn::writer::WriteTimeoutPolicy,
    /// `no_fast_producer_stall`: a publisher never waits for a destination past 3/4 of its
    /// `max_pending` (its messages to it are dropped when it is full instead).
    pub no_fast_producer_stall: bool,
    pub max_closed_clients: usize,
    /// Client URL (`host:port`) to advertise instead of the listen address.
    pub client_advertise: Option<String>,
    /// Route listener and peers; `None` runs a single node.
    pub cluster: Option<ClusterOpts>,
    /// Gateway listener and remote clusters (super-cluster); `None` without `gateway {}`.
    pub gateway: Option<GatewayOpts>,
    /// Leafnodes, with a `leafnodes {}` block.
    pub leafnodes: Option<leaf::LeafOpts>,
    /// Lame duck mode: clients are closed over this time (after the grace period), then
    /// the server exits.
    pub lame_duck_duration: Duration,
    /// Lame duck mode: the wait before the first client is closed.
    pub lame_duck_grace_period: Duration,
    /// The account whose users may use the `$SYS` services (`system_account`; `$SYS` or a
    /// configured account).
    pub system_account: String,
    /// `no_system_account`: no system account, no `$SYS` services.
    pub no_system_account: bool,
    /// Client port TLS (top-level `tls {}`, `--tls*` flags): INFO in the clear, then the
    /// client's handshake, as nats-server 2.9.
    pub tls: Option<crate::tls::TlsOpts>,
    /// `resolver_tls {}`: how the URL resolver's HTTPS client verifies the account server
    /// (`ca_file`, or the system's roots; `insecure`) and the certificate it presents.
    pub resolver_tls: Option<crate::tls::TlsOpts>,
    /// `allow_non_tls`: with `tls`, clients may also stay in plaintext (INFO `tls_available`).
    pub allow_non_tls: bool,
    /// HTTPS monitoring port (`https_port`, `https: host:port`, `-ms`): `Some(0)` picks a free
    /// one. Serves with the `tls {}` certificate.
    pub https_port: Option<u16>,
    /// JetStream (`-js`, `-sd`, `jetstream {}`); `None`: off.
    pub jetstream: Option<JetStreamOpts>,
    /// Accounts with `jetstream: enabled`; empty: the global account alone, when no other
    /// account but the system account is configured (nats-server).
    pub jetstream_accounts: Vec<String>,
    /// The limits of the accounts in `jetstream_accounts` (from their `jetstream { … }` map;
    /// an account missing here is unlimited).
    pub jetstream_limits: BTreeMap<String, JsLimits>,
    /// Accounts' message trace destinations (`msg_trace`/`trace_dest`, nats-server 2.11+):
    /// where a message with a sampled W3C `traceparent` is traced.
    pub account_msg_trace: BTreeMap<String, AccountMsgTrace>,
    /// Subject mappings (`mappings {}`; the top-level block is the global account's), by
    /// account name, in the order written.
    pub account_mappings: BTreeMap<String, Vec<crate::mapping::MappingConfig>>,
}

/// An account's `msg_trace: { dest, sampling }` (or `msg_trace: "dest"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountMsgTrace {
    pub dest: String,
    /// Percent of `traceparent` messages traced at their origin server, 1..=100.
    pub sampling: u8,
}

/// An account's `limits { max_connections, max_subscriptions, max_payload, max_leafnodes }`
/// (nats-server's `parseAccountLimits`): -1 (the default) is no limit. Clients of the account
/// get the smaller of the account's and the server's `max_subscriptions` and `max_payload`;
/// `max_connections` counts the account's clients on this server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountLimits {
    pub max_connections: i64,
    pub max_subscriptions: i64,
    pub max_payload: i64,
    /// Accepted and kept (natsd has no leaf nodes yet).
    pub max_leafnodes: i64,
}

impl Default for AccountLimits {
    fn default() -> Self {
        AccountLimits {
            max_connections: -1,
            max_subscriptions: -1,
            max_payload: -1,
            max_leafnodes: -1,
        }
    }
}

impl AccountLimits {
    /// nats-server's `minLimit` of a server limit (0 = none) and this account's (-1 = none):
    /// `None` when neither limits.
    pub fn min_with(server: usize, account: i64) -> Option<usize> {
        let server = (server > 0).then_some(server);
        let account = usize::try_from(account).ok();
        match (server, account) {
            (Some(s), Some(a)) => Some(s.min(a)),
            (s, a) => s.or(a),
        }
    }
}

/// An account's `jetstream { max_mem, max_file, max_streams, max_consumers, max_ack_pending,
/// memory_max_stream_bytes, store_max_stream_bytes, max_bytes_required }` (nats-server's
/// `JetStreamAccountLimits`): -1 is unlimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsAccountLimits {
    pub max_memory: i64,
    pub max_store: i64,
    pub max_streams: i64,
    pub max_consumers: i64,
    pub max_ack_pending: i64,
    pub memory_max_stream_bytes: i64,
    pub store_max_stream_bytes: i64,
    pub max_bytes_required: bool,
}

impl Default for JsAccountLimits {
    fn default() -> Self {
        JsAccountLimits {
            max_memory: -1,
            max_store: -1,
            max_streams: -1,
            max_consumers: -1,
            max_ack_pending: -1,
            memory_max_stream_bytes: -1,
            store_max_stream_bytes: -1,
            max_bytes_required: false,
        }
    }
}

/// An account's JetStream limits: one set for all its streams (an account's `jetstream {}`,
/// an account JWT's flat limits), or an account JWT's `tiered_limits`, one set per tier
/// ("R1", "R3", …: the streams and consumers of that many replicas). With tiers, an asset
/// whose tier is missing is refused (10120). See `jetstream/limits.rs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsLimits {
    Flat(JsAccountLimits),
    Tiered(BTreeMap<String, JsAccountLimits>),
}

impl Default for JsLimits {
    fn default() -> Self {
        JsLimits::Flat(JsAccountLimits::default())
    }
}

/// The `jetstream {}` block (nats-server's `JetStreamConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JetStreamOpts {
    /// `store_dir` as given; data lives under `<store_dir>/jetstream/` (nats-server's layout).
    /// `None`: `<tmp>/nats/jetstream`.
    pub store_dir: Option<PathBuf>,
    /// Bytes; `None`: 75% of the machine's memory (as nats-server).
    pub max_memory_store: Option<i64>,
    /// Bytes; `None`: 1 TB (nats-server's default).
    pub max_file_store: Option<i64>,
    pub domain: Option<String>,
    /// `unique_tag`: a server-tag prefix; a replicated stream's copies go to nodes with
    /// distinct tags of that prefix (e.g. `az:` for one copy per zone).
    pub unique_tag: Option<String>,
    /// `sync_interval` (default 2 min); `sync_always` (`sync_interval: always`).
    pub sync_interval: Option<Duration>,
    pub sync_always: bool,
    /// `jetstream { limits { … } }`: server-wide caps on what streams and consumers ask for.
    pub limits: JsServerLimits,
    /// Not a config key (nats-server has none): log entries between two snapshots of a
    /// replicated stream's group, each a copy of the whole stream. `None`: 50,000. Tests
    /// lower it to make followers catch up from a stream snapshot.
    pub stream_snapshot_every: Option<u64>,
}

/// `jetstream { limits { max_ack_pending, max_request_batch, duplicate_window, max_ha_assets } }`
/// (nats-server's `JSLimitOpts`): 0 is no limit. `max_ha_assets` is kept (natsd has no
/// replicated assets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsServerLimits {
    pub max_ack_pending: i64,
    pub max_request_batch: i64,
    /// Nanoseconds.
    pub duplicate_window: i64,
    pub max_ha_assets: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            host: "0.0.0.0".into(),
            port: DEFAULT_PORT,
            server_name: None,
            http_port: None,
            http_host: None,
            http_base_path: None,
            log_file: None,
            log_size_limit: 0,
            log_max_num: 0,
            pid_file: None,
            ports_file_dir: None,
            server_tags: Vec::new(),
            debug: false,
            trace: false,
            logtime: true,
            logtime_utc: false,
            max_traced_msg_len: 0,
            syslog: false,
            remote_syslog: None,
            username: None,
            password: None,
            auth_token: None,
            users: Vec::new(),
            nkeys: Vec::new(),
            operator: None,
            auth_callout: None,
            accounts: Vec::new(),
            links: Default::default(),
            no_auth_user: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_control_line: DEFAULT_MAX_CONTROL_LINE,
            max_pending: DEFAULT_MAX_PENDING,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_subscriptions: 0,
            max_sub_tokens: 0,
            connect_error_reports: DEFAULT_CONNECT_ERROR_REPORTS,
            reconnect_error_reports: DEFAULT_RECONNECT_ERROR_REPORTS,
            account_limits: BTreeMap::new(),
            auth_timeout: DEFAULT_AUTH_TIMEOUT,
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_max: DEFAULT_PING_MAX,
            write_deadline: DEFAULT_WRITE_DEADLINE,
            write_timeout: Default::default(),
            no_fast_producer_stall: false,
            max_closed_clients: DEFAULT_MAX_CLOSED_CLIENTS,
            client_advertise: None,
            cluster: None,
            gateway: None,
            leafnodes: None,
            lame_duck_duration: DEFAULT_LAME_DUCK_DURATION,
            lame_duck_grace_period: DEFAULT_LAME_DUCK_GRACE_PERIOD,
            system_account: crate::account::SYSTEM_ACCOUNT.into(),
            no_system_account: false,
            tls: None,
            resolver_tls: None,
            allow_non_tls: false,
            https_port: None,
            jetstream: None,
            jetstream_accounts: Vec::new(),
            jetstream_limits: BTreeMap::new(),
            account_msg_trace: BTreeMap::new(),
            account_mappings: BTreeMap::new(),
        }
    }
}

impl Options {
    /// Options for an embedded server on 127.0.0.1 with a free port: what tests and examples use.
    pub fn local() -> Self {
        Options {
            host: "127.0.0.1".into(),
            port: 0,
            ..Options::default()
        }
    }

    /// nats-server's `shouldReportConnectErr`: whether failed dial number `attempts` (from 1)
    /// of a route or gateway is logged as an error (else at debug level).
    pub fn report_connect_err(&self, first_connect: bool, attempts: u64) -> bool {
        let every = if first_connect {
            self.connect_error_reports
        } else {
            self.reconnect_error_reports
        };
        attempts == 1 || attempts % u64::from(every.max(1)) == 0
    }

    /// True when clients must authenticate.
    pub fn auth_required(&self) -> bool {
        !self.users.is_empty()
            || !self.nkeys.is_empty()
            || self.operator.is_some()
            || self.username.is_some()
            || self.auth_token.is_some()
    }

    /// Checks that the options make sense together; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if !self.lame_duck_duration.is_zero()
            && self.lame_duck_grace_period >= self.lame_duck_duration
        {
            use crate::util::time::go_duration;
            return Err(format!(
                "lame duck grace period ({}) should be strictly lower than lame duck duration ({})",
                go_duration(self.lame_duck_grace_period),
                go_duration(self.lame_duck_duration)
            ));
        }
        let users_array = !self.users.is_empty() || !self.nkeys.is_empty();
        if self.auth_token.is_some() && (users_array || self.username.is_some()) {
            return Err("Can not have a token and a users array or single user".into());
        }
        if self.username.is_some() && users_array {
            return Err("Can not have a single user/pass and a users array".into());
        }
        if let Some(c) = &self.auth_callout {
            for a in &c.allowed_accounts {
                if !self.accounts.contains(a) {
                    return Err(format!(
                        "auth_callout allowed account {a:?} not found in configured accounts"
                    ));
                }
            }
        }
        if self.max_payload == 0 {
            return Err("max_payload must be positive".into());
        }
        if self.max_payload > self.max_pending {
            return Err(format!(
                "max_payload ({}) cannot be higher than max_pending ({})",
                self.max_payload, self.max_pending
            ));
        }
        if self.max_control_line < 32 {
            return Err("max_control_line is too small".into());
        }
        if let Some(c) = &self.cluster {
            // nats-server 2.10+'s checks and texts (server.go validateCluster).
            if !c.pinned_accounts.is_empty() && c.pool_size < 0 {
                return Err("pool_size cannot be negative if pinned accounts are specified".into());
            }
            let mut seen = std::collections::HashSet::new();
            for a in &c.pinned_accounts {
                if !seen.insert(a) {
                    return Err(format!(
                        "found duplicate account name {a:?} in pinned accounts list {:?}",
                        c.pinned_accounts
                    ));
                }
            }
        }
        if !self.no_system_account
            && self.system_account != crate::account::SYSTEM_ACCOUNT
            && !self.accounts.contains(&self.system_account)
        {
            return Err("error resolving system account: account missing".into());
        }
        let named = self.users.iter().map(|u| (&u.username, &u.account));
        let keyed = self.nkeys.iter().map(|u| (&u.nkey, &u.account));
        for (name, acc) in named.chain(keyed) {
            if let Some(acc) = acc {
                if acc != "$G" && acc != "$SYS" && !self.accounts.iter().any(|a| a == acc) {
                    return Err(format!("user {name:?} names unknown account {acc:?}"));
                }
            }
        }
        if let Err(e) = links::validate(&self.accounts, &self.links) {
            return Err(format!("account {:?}: {}", e.account, e.msg));
        }
        if let Some(g) = &self.gateway {
            if g.name.is_empty() {
                return Err("gateway has no name".into());
            }
            if g.name.contains(' ') {
                return Err(format!("gateway name {:?} cannot contain spaces", g.name));
            }
            if let Some(Some(cn)) = self.cluster.as_ref().map(|c| c.name.as_ref()) {
                if cn != &g.name {
                    return Err(
                        "cluster name conflicts between cluster and gateway definitions".into(),
                    );
                }
            }
            for r in &g.gateways {
                if r.name.is_empty() {
                    return Err("gateway in the gateways list has no name".into());
                }
                if r.urls.is_empty() {
                    return Err(format!("gateway {:?} has no URL", r.name));
                }
            }
        }
        if self.https_port.is_some() && self.tls.is_none() {
            // nats-server 2.9.10 says it at startup: "Can't start monitoring: …".
            return Err("TLS cert and key required for HTTPS".into());
        }
        if let (Some(h), Some(hs)) = (self.http_port, self.https_port) {
            return Err(format!(
                "can't specify both HTTP ({h}) and HTTPs ({hs}) ports"
            ));
        }
        if let (Some(_), Some(c)) = (&self.jetstream, &self.cluster) {
            // nats-server's words (jetstream.go `validateJetStreamOptions`).
            if self.server_name.as_deref().is_none_or(str::is_empty) {
                return Err("jetstream cluster requires `server_name` to be set".into());
            }
            if c.name.as_deref().is_none_or(str::is_empty) {
                return Err("jetstream cluster requires `cluster.name` to be set".into());
            }
        }
        if let Some(d) = self.jetstream.as_ref().and_then(|j| j.domain.as_deref()) {
            if !crate::jetstream::types::valid_name(d) {
                return Err(format!("invalid domain name: {d:?}"));
            }
        }
        if let Some(n) = &self.no_auth_user {
            if !self.users.iter().any(|u| &u.username == n)
                && !self.nkeys.iter().any(|u| &u.nkey == n)
            {
                return Err(format!("no_auth_user {n:?} not present as user"));
            }
        }
        Ok(())
    }
}
