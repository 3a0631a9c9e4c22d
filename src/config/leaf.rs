//! Leafnode options: `leafnodes { host, port, advertise, no_advertise, authorization { … },
//! remotes [ … ] }`, as nats-server reads them (the subset natsd builds; the rest is refused
//! by the config file loader).

use crate::compress::CompressionOpts;
use std::time::Duration;

/// The `leafnodes {}` block.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafOpts {
    pub host: String,
    /// Leafnode port; 0 picks a free one. `None`: no listener (remotes only).
    pub port: Option<u16>,
    /// `host:port` leaves should dial to reach this one (INFO `leafnode_urls`).
    pub advertise: Option<String>,
    pub no_advertise: bool,
    pub username: Option<String>,
    pub password: Option<String>,
    pub token: Option<String>,
    /// `authorization { nkey }`: the one user nkey a leaf must sign the nonce with.
    pub nkey: Option<String>,
    /// The account a leaf authenticated by the single user/token (or by nothing) binds to.
    pub account: Option<String>,
    /// `authorization { users [ { user, password, account } ] }`.
    pub users: Vec<LeafUser>,
    pub auth_timeout: Duration,
    /// `tls {}` on the listener: the INFO says `tls_required` and the leaf upgrades after it
    /// (or, with `handshake_first`, before any INFO).
    pub tls: Option<crate::tls::TlsOpts>,
    /// Delay between attempts to reach a remote (`reconnect`; default 1 s).
    pub reconnect: Option<Duration>,
    /// `dial_timeout` of every remote without its own (default 2 s).
    pub dial_timeout: Option<Duration>,
    /// `compression` of the listener (nats-server 2.10+; default `s2_auto`).
    pub compression: CompressionOpts,
    /// `min_version`: leaves older than this are refused (at least 2.8.0).
    pub min_version: Option<String>,
    pub remotes: Vec<RemoteLeafOpts>,
}

impl Default for LeafOpts {
    fn default() -> Self {
        LeafOpts {
            host: "0.0.0.0".into(),
            port: None,
            advertise: None,
            no_advertise: false,
            username: None,
            password: None,
            token: None,
            nkey: None,
            account: None,
            users: Vec::new(),
            auth_timeout: super::DEFAULT_AUTH_TIMEOUT,
            tls: None,
            reconnect: None,
            dial_timeout: None,
            compression: CompressionOpts::leaf_default(),
            min_version: None,
            remotes: Vec::new(),
        }
    }
}

/// One user of `leafnodes { authorization { users [ … ] } }`.
#[derive(Debug, Clone, PartialEq)]
pub struct LeafUser {
    pub user: String,
    pub password: String,
    /// The account its leaf connection binds to (`$G` when unset).
    pub account: Option<String>,
}

/// One of `leafnodes { remotes [ … ] }`: a hub this server dials as a leaf.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RemoteLeafOpts {
    /// `nats-leaf://`/`nats://` URLs, tried in turn (user/password or token in the URL).
    pub urls: Vec<String>,
    /// The local account the connection binds to (`$G` when unset).
    pub account: Option<String>,
    /// Credentials of the block (the URL's win, as nats-server).
    pub username: Option<String>,
    pub password: Option<String>,
    /// `tls {}`: upgrade after the hub's INFO (or first, with `handshake_first`).
    pub tls: Option<crate::tls::TlsOpts>,
    /// `deny_imports`: subjects this server never takes from the hub (no interest sent for
    /// them, the hub told in CONNECT `deny_pub`, messages on them dropped).
    pub deny_imports: Vec<String>,
    /// `deny_exports`: subjects this server never sends to the hub.
    pub deny_exports: Vec<String>,
    /// `compression` (`None`: the default, `s2_auto`).
    pub compression: Option<CompressionOpts>,
    /// `credentials` (a `.creds` file) or `nkey` (a user seed): how it proves itself.
    pub creds: RemoteCreds,
    /// `no_randomize` / `dont_randomize`: try the URLs in the written order (by default they
    /// are shuffled once, as nats-server does).
    pub no_randomize: bool,
    /// `dial_timeout`: how long a TCP connect may take (default: the block's, else 2 s).
    pub dial_timeout: Option<Duration>,
    /// `first_info_timeout`: how long to wait for the hub's first INFO (default 2 s).
    pub first_info_timeout: Option<Duration>,
    /// `disabled`: configured but never dialled.
    pub disabled: bool,
    /// `ignore_discovered_servers`: never dial the hub cluster's `leafnode_urls`, only ours.
    pub ignore_discovered: bool,
    /// `hub: true`: we dial, but act as the hub of this connection (the server we dial is
    /// our spoke; CONNECT says `"hub": true`).
    pub hub: bool,
}

/// A remote's own credentials, beyond the URL's user and password.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RemoteCreds {
    #[default]
    None,
    /// A `.creds` file: a user JWT and its nkey seed, read at every dial.
    File(std::path::PathBuf),
    /// An nkey user seed (`SU…`).
    Seed(String),
}
