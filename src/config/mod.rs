//! `Options`: every setting the server runs with, and nats-server's defaults. Flags
//! (`flags.rs`) and, later, the config language fill it; the server only reads it.

pub mod flags;

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
pub const DEFAULT_MAX_CLOSED_CLIENTS: usize = 10_000;

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
}

/// One configured user. `password` may be a bcrypt hash (`$2a$…`, `$2b$…`, `$2y$…`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub password: String,
    /// The account this user's connections join; `None` means the global account `$G`.
    pub account: Option<String>,
    pub permissions: Option<Permissions>,
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
    pub log_file: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    pub debug: bool,
    pub trace: bool,
    pub logtime: bool,

    /// Single-user auth (`--user`/`--pass`).
    pub username: Option<String>,
    pub password: Option<String>,
    /// Token auth (`--auth`).
    pub auth_token: Option<String>,
    /// Several users, each with an account and permissions.
    pub users: Vec<User>,
    /// Accounts that exist besides `$G` and `$SYS`.
    pub accounts: Vec<String>,
    /// Users without credentials join as this user (nats-server's `no_auth_user`).
    pub no_auth_user: Option<String>,

    pub max_payload: usize,
    pub max_control_line: usize,
    pub max_pending: usize,
    pub max_connections: usize,
    /// 0 = unlimited.
    pub max_subscriptions: usize,
    pub auth_timeout: Duration,
    pub ping_interval: Duration,
    pub ping_max: u32,
    pub write_deadline: Duration,
    pub max_closed_clients: usize,
    /// Clients' `connect_urls` extra entries (filled by the cluster later).
    pub client_advertise: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            host: "0.0.0.0".into(),
            port: DEFAULT_PORT,
            server_name: None,
            http_port: None,
            http_host: None,
            log_file: None,
            pid_file: None,
            debug: false,
            trace: false,
            logtime: true,
            username: None,
            password: None,
            auth_token: None,
            users: Vec::new(),
            accounts: Vec::new(),
            no_auth_user: None,
            max_payload: DEFAULT_MAX_PAYLOAD,
            max_control_line: DEFAULT_MAX_CONTROL_LINE,
            max_pending: DEFAULT_MAX_PENDING,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_subscriptions: 0,
            auth_timeout: DEFAULT_AUTH_TIMEOUT,
            ping_interval: DEFAULT_PING_INTERVAL,
            ping_max: DEFAULT_PING_MAX,
            write_deadline: DEFAULT_WRITE_DEADLINE,
            max_closed_clients: DEFAULT_MAX_CLOSED_CLIENTS,
            client_advertise: None,
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

    /// True when clients must authenticate.
    pub fn auth_required(&self) -> bool {
        !self.users.is_empty() || self.username.is_some() || self.auth_token.is_some()
    }

    /// Checks that the options make sense together; the message says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.auth_token.is_some() && (!self.users.is_empty() || self.username.is_some()) {
            return Err("Can not have a token and a users array or single user".into());
        }
        if self.username.is_some() && !self.users.is_empty() {
            return Err("Can not have a single user/pass and a users array".into());
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
        for u in &self.users {
            if let Some(acc) = &u.account {
                if acc != "$G" && acc != "$SYS" && !self.accounts.iter().any(|a| a == acc) {
                    return Err(format!(
                        "user {:?} names unknown account {:?}",
                        u.username, acc
                    ));
                }
            }
        }
        if let Some(n) = &self.no_auth_user {
            if !self.users.iter().any(|u| &u.username == n) {
                return Err(format!("no_auth_user {n:?} not present as user"));
            }
        }
        Ok(())
    }
}
