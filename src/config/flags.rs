//! The command line, spelled as nats-server spells it: `-flag` and `--flag`, with the value
//! after `=` or as the next argument. Produces `Options`; knows nothing about servers.

use super::{Options, COMPAT_VERSION, NATSD_VERSION};
use std::path::PathBuf;

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    Run(Box<Options>),
    Version,
    Help,
    /// `--help_tls`.
    HelpTls,
    /// `-t`: check this config file (`None`: no `-c` was given) and exit.
    Check(Option<PathBuf>),
    /// `-sl/--signal CMD[=PID|PIDFILE]`: signal a running server and exit.
    Signal {
        command: String,
        /// A pid or a pid file; `None`: the single running natsd/nats-server.
        pid: Option<String>,
    },
}

/// Why the command line cannot run.
#[derive(Debug)]
pub enum CliError {
    /// A flag is wrong: the usage helps.
    Flag(String),
    /// The config file (or the options together, or the `--signal` value) is wrong: the
    /// message says where; no usage.
    Config(String),
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Flag(m) | CliError::Config(m) => f.write_str(m),
        }
    }
}

pub const USAGE: &str = "\
Usage: natsd [options]
       natsd topology up|check <file>   (a local cluster from a topology file: topology/README.md)

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222, -1 = random)
    -n, --name
        --server_name <server_name>  Server name (default: server id)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring
    -ms,--https_port <port>          Use port for https monitoring (with the TLS certificate)
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to natsd (or nats-server) process
                                     (ldm, stop, quit, term, reopen, reload); <pid> can be a
                                     PID or the path to a PID file
        --client_advertise <string>  Client URL to advertise to other servers
        --ports_file_dir <dir>       Creates a ports file in the specified directory
                                     (<executable_name>_<pid>.ports)

Logging Options:
    -l, --log <file>                 File to redirect log output
        --log_size_limit <limit>     Logfile size limit in bytes (default: 0, no rotation)
    -T, --logtime                    Timestamp log entries (default: true)
        --logtime_utc                Timestamps in UTC (natsd's are always UTC)
    -s, --syslog                     Log to the local syslog daemon
    -r, --remote_syslog <addr>       Syslog server addr (udp://host:514, tcp://…, unix://…)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (as -V)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (as -DV)
        --max_traced_msg_len <len>   Maximum printable length for traced messages (0 = all)

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries
        --cluster_listen <url>       Cluster url from which members can solicit routes

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
        --help_tls                   TLS help

Not supported yet (refused with a message): --profile (profiling).
";

/// `--help_tls`: what the `tls {}` block and the TLS flags take in natsd.
pub const TLS_HELP: &str = "\
TLS configuration is specified in the tls section of a configuration file:

e.g.

    tls {
        cert_file:      \"./certs/server-cert.pem\"
        key_file:       \"./certs/server-key.pem\"
        ca_file:        \"./certs/ca.pem\"
        verify:         true
        timeout:        2

        cipher_suites: [
            \"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384\",
            \"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\"
        ]
        curve_preferences: [
            \"X25519\",
            \"CurveP256\"
        ]
    }

Available cipher suites include (TLS 1.2; TLS 1.3 suites are always on):
    TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
    TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305

Available curve preferences include:
    X25519
    CurveP256
    CurveP384

handshake_first: true (or a fallback delay such as \"300ms\") starts TLS before INFO.
docs/config.md lists every TLS key natsd takes.
";

/// Flags of capabilities that are not built yet: accepted by nats-server, refused here clearly.
const NOT_YET: &[(&str, &str)] = &[("profile", "profiling")];

/// `-m`/`-ms`: -1 picks a free port (`Some(0)`), 0 turns the listener off.
fn monitor_port(flag: &str, v: &str, what: &str) -> Result<Option<u16>, String> {
    let p: i32 = v
        .parse()
        .map_err(|_| format!("invalid value {v:?} for flag -{flag}: parse error"))?;
    match p {
        -1 => Ok(Some(0)),
        0 => Ok(None),
        1..=65535 => Ok(Some(p as u16)),
        _ => Err(format!("invalid {what} port {p}")),
    }
}

fn parse_bool(flag: &str, v: Option<&str>) -> Result<bool, String> {
    match v {
        None => Ok(true),
        Some("true" | "1" | "t" | "T" | "TRUE" | "True") => Ok(true),
        Some("false" | "0" | "f" | "F" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(format!("invalid boolean value {other:?} for flag -{flag}")),
    }
}

/// Parse the arguments after the program name (errors as text).
pub fn parse<I, S>(args: I) -> Result<Command, String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    parse_command(args).map_err(|e| e.to_string())
}

/// Parse the arguments after the program name, telling flag errors from config errors.
pub fn parse_command<I, S>(args: I) -> Result<Command, CliError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    // The config file first; the flags then override what it says.
    let pre = config_args(&args).map_err(CliError::Flag)?;
    let o = match &pre.config {
        // A signal goes out before any file is read, as nats-server does; `-t` checks the
        // file itself.
        Some(path) if pre.signal.is_none() && !pre.check => {
            super::file::load(std::path::Path::new(path))
                .map_err(|e| CliError::Config(e.to_string()))?
        }
        _ => Options::default(),
    };
    let o = match flags(&args, o).map_err(CliError::Flag)? {
        Flags::Options(o) => o,
        Flags::Version => return Ok(Command::Version),
        Flags::Help => return Ok(Command::Help),
        Flags::HelpTls => return Ok(Command::HelpTls),
    };
    if let Some(sig) = pre.signal {
        let mut parts = sig.split('=');
        let command = parts.next().unwrap_or_default().to_string();
        let pid = parts.next().map(str::to_string);
        let rest: Vec<&str> = parts.collect();
        if !rest.is_empty() {
            return Err(CliError::Config(format!(
                "invalid signal parameters: [{}]",
                rest.join(" ")
            )));
        }
        return Ok(Command::Signal { command, pid });
    }
    if pre.check {
        return Ok(Command::Check(pre.config.map(PathBuf::from)));
    }
    o.validate().map_err(CliError::Config)?;
    Ok(Command::Run(o))
}

/// What the flags ask for once applied.
enum Flags {
    Options(Box<Options>),
    Version,
    Help,
    HelpTls,
}

/// Apply the flags over `o` (the config file's options or the defaults).
fn flags(args: &[String], mut o: Options) -> Result<Flags, String> {
    let mut tls = TlsFlags::default();
    let mut i = 0;
    let mut pending_store_dir: Option<PathBuf> = None;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(stripped) = arg.strip_prefix('-') else {
            return Err(format!("unexpected argument {arg:?}"));
        };
        let stripped = stripped.strip_prefix('-').unwrap_or(stripped);
        let (name, inline) = match stripped.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (stripped, None),
        };
        // Boolean flags take no separate value.
        match name {
            "D" | "debug" => {
                o.debug = parse_bool(name, inline.as_deref())?;
                continue;
            }
            "V" | "trace" | "VV" => {
                o.trace = parse_bool(name, inline.as_deref())?;
                continue;
            }
            "DV" | "DVV" => {
                let on = parse_bool(name, inline.as_deref())?;
                o.debug = on;
                o.trace = on;
                continue;
            }
            "T" | "logtime" => {
                o.logtime = parse_bool(name, inline.as_deref())?;
                continue;
            }
            "logtime_utc" => {
                o.logtime_utc = parse_bool(name, inline.as_deref())?;
                continue;
            }
            "s" | "syslog" => {
                o.syslog = parse_bool(name, inline.as_deref())?;
                continue;
            }
            "no_advertise" => {
                o.cluster.get_or_insert_with(Default::default).no_advertise =
                    parse_bool(name, inline.as_deref())?;
                continue;
            }
            "tls" => {
                tls.tls = Some(parse_bool(name, inline.as_deref())?);
                continue;
            }
            "tlsverify" => {
                tls.verify = Some(parse_bool(name, inline.as_deref())?);
                continue;
            }
            "js" | "jetstream" => {
                if parse_bool(name, inline.as_deref())? {
                    o.jetstream.get_or_insert_with(Default::default);
                } else {
                    o.jetstream = None;
                }
                continue;
            }
            "t" => continue, // handled by `config_args`
            "v" | "version" => return Ok(Flags::Version),
            "h" | "help" => return Ok(Flags::Help),
            "help_tls" => return Ok(Flags::HelpTls),
            _ => {}
        }
        if let Some((_, what)) = NOT_YET.iter().find(|(n, _)| *n == name) {
            return Err(format!(
                "flag -{name} is not supported yet: natsd {NATSD_VERSION} does not build {what} yet"
            ));
        }
        let mut value = || -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args
                .get(i)
                .cloned()
                .ok_or_else(|| format!("flag needs an argument: -{name}"))?;
            i += 1;
            Ok(v)
        };
        match name {
            "c" | "config" | "sl" | "signal" => {
                value()?; // handled by `config_args`
            }
            "a" | "addr" | "net" => o.host = value()?,
            "p" | "port" => {
                let v = value()?;
                let p: i32 = v
                    .parse()
                    .map_err(|_| format!("invalid value {v:?} for flag -{name}: parse error"))?;
                // As nats-server: -1 picks a random port, 0 means the default port.
                o.port = match p {
                    -1 => 0,
                    0 => super::DEFAULT_PORT,
                    1..=65535 => p as u16,
                    _ => return Err(format!("invalid port {p}")),
                };
            }
            "n" | "name" | "server_name" => o.server_name = Some(value()?),
            // As nats-server: a store directory alone does not enable JetStream.
            "sd" | "store_dir" => {
                let d = PathBuf::from(value()?);
                match o.jetstream.as_mut() {
                    Some(js) => js.store_dir = Some(d),
                    None => pending_store_dir = Some(d),
                }
            }
            "m" | "http_port" => o.http_port = monitor_port(name, &value()?, "http")?,
            "ms" | "https_port" => o.https_port = monitor_port(name, &value()?, "https")?,
            "tlscert" => tls.cert = Some(PathBuf::from(value()?)),
            "tlskey" => tls.key = Some(PathBuf::from(value()?)),
            "tlscacert" => tls.ca = Some(PathBuf::from(value()?)),
            "l" | "log" | "log_file" => o.log_file = Some(PathBuf::from(value()?)),
            "log_size_limit" => {
                let v = value()?;
                o.log_size_limit = v
                    .parse()
                    .map_err(|_| format!("invalid value {v:?} for flag -{name}: parse error"))?;
            }
            "r" | "remote_syslog" => o.remote_syslog = Some(value()?),
            "max_traced_msg_len" => {
                let v = value()?;
                o.max_traced_msg_len = v
                    .parse()
                    .map_err(|_| format!("invalid value {v:?} for flag -{name}: parse error"))?;
            }
            "P" | "pid" => o.pid_file = Some(PathBuf::from(value()?)),
            "ports_file_dir" => o.ports_file_dir = Some(PathBuf::from(value()?)),
            "user" => o.username = Some(value()?),
            "pass" => o.password = Some(value()?),
            "auth" => o.auth_token = Some(value()?),
            "client_advertise" => o.client_advertise = Some(value()?),
            "cluster" | "cluster_listen" => {
                // nats-server: port -1 picks a free one.
                let v = value()?.replace(":-1", ":0");
                let u = crate::cluster::url::RouteUrl::parse(&v)
                    .map_err(|e| format!("invalid value for -{name}: {e}"))?;
                let c = o.cluster.get_or_insert_with(Default::default);
                c.host = u.host;
                c.port = u.port;
                if u.user.is_some() {
                    c.username = u.user;
                    c.password = u.pass;
                }
            }
            "cluster_name" => o.cluster.get_or_insert_with(Default::default).name = Some(value()?),
            "routes" => {
                let v = value()?;
                let routes: Vec<String> = v
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                for r in &routes {
                    crate::cluster::url::RouteUrl::parse(r)
                        .map_err(|e| format!("invalid value for -{name}: {e}"))?;
                }
                o.cluster.get_or_insert_with(Default::default).routes = routes;
            }
            "cluster_advertise" => {
                o.cluster.get_or_insert_with(Default::default).advertise = Some(value()?)
            }
            "connect_retries" => {
                let v = value()?;
                o.cluster
                    .get_or_insert_with(Default::default)
                    .connect_retries = v
                    .parse()
                    .map_err(|_| format!("invalid value {v:?} for flag -{name}: parse error"))?;
            }
            _ => return Err(format!("flag provided but not defined: -{name}")),
        }
    }
    if o.password.is_some() && o.username.is_none() {
        return Err("--pass needs --user".into());
    }
    tls.apply(&mut o)?;
    if let (Some(d), Some(js)) = (pending_store_dir, o.jetstream.as_mut()) {
        js.store_dir = Some(d);
    }
    Ok(Flags::Options(Box::new(o)))
}

/// `--tls`, `--tlsverify`, `--tlscert`, `--tlskey`, `--tlscacert`.
#[derive(Default)]
struct TlsFlags {
    tls: Option<bool>,
    verify: Option<bool>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    ca: Option<PathBuf>,
}

impl TlsFlags {
    /// As nats-server: any TLS flag replaces the config file's `tls {}` with one built from the
    /// flags (keeping its `timeout`); certificate and key are then required. The files are
    /// read when the server starts.
    fn apply(self, o: &mut Options) -> Result<(), String> {
        let any = self.tls == Some(true)
            || self.verify == Some(true)
            || self.cert.is_some()
            || self.key.is_some()
            || self.ca.is_some();
        if !any {
            return Ok(());
        }
        let cert_file = self
            .cert
            .ok_or("TLS Server certificate must be present and valid")?;
        let key_file = self
            .key
            .ok_or("TLS Server private key must be present and valid")?;
        let timeout = o.tls.as_ref().map(|t| t.timeout).unwrap_or_default();
        if o.tls.is_none() && o.auth_timeout == super::DEFAULT_AUTH_TIMEOUT {
            // nats-server's default auth timeout with TLS: the TLS timeout plus one second.
            o.auth_timeout =
                crate::tls::TlsOpts::default().timeout + std::time::Duration::from_secs(1);
        }
        o.tls = Some(crate::tls::TlsOpts {
            cert_file,
            key_file,
            ca_file: self.ca,
            verify: self.verify == Some(true),
            timeout: if timeout.is_zero() {
                crate::tls::TlsOpts::default().timeout
            } else {
                timeout
            },
            ..Default::default()
        });
        Ok(())
    }
}

/// What is read before the other flags.
struct Pre {
    config: Option<String>,
    check: bool,
    signal: Option<String>,
}

/// The options a config reload applies: the `-c` file read again, with the same command
/// line flags over it, exactly as at startup. Errors: no `-c` file (nats-server's message),
/// or the file's error (file:line:col).
pub fn reload_options(args: &[String]) -> Result<Options, String> {
    let pre = config_args(args)?;
    if pre.config.is_none() {
        return Err("can only reload config when a file is provided using -c or --config".into());
    }
    match parse_command(args.iter().cloned()) {
        Ok(Command::Run(o)) => Ok(*o),
        Ok(_) => Err("the command line does not run a server".into()),
        Err(CliError::Config(e)) | Err(CliError::Flag(e)) => Err(e),
    }
}

/// `-c/--config FILE`, `-t` and `-sl/--signal` wherever they are on the command line.
fn config_args(args: &[String]) -> Result<Pre, String> {
    let (mut config, mut check, mut signal) = (None, false, None);
    let mut i = 0;
    while i < args.len() {
        // Only flags: a value such as `c` (after `--tlscert`) is not `-c`.
        let Some(stripped) = args[i].strip_prefix('-') else {
            i += 1;
            continue;
        };
        let stripped = stripped.trim_start_matches('-');
        i += 1;
        let (name, inline) = match stripped.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (stripped, None),
        };
        match name {
            "c" | "config" | "sl" | "signal" => {
                let v = match inline {
                    Some(v) => v.to_string(),
                    None => {
                        i += 1;
                        args.get(i - 1)
                            .cloned()
                            .ok_or_else(|| format!("flag needs an argument: -{name}"))?
                    }
                };
                if name.starts_with('s') {
                    signal = Some(v);
                } else {
                    config = Some(v);
                }
            }
            "t" => check = parse_bool(name, inline)?,
            _ => {}
        }
    }
    Ok(Pre {
        config,
        check,
        signal,
    })
}

/// `-t`: check the config file as nats-server does (warnings count as errors). `Ok` is the
/// verdict to print when the file is valid; `Err` the message for an invalid one.
pub fn check(config: Option<&std::path::Path>) -> Result<String, String> {
    let Some(path) = config else {
        return Err("must specify [-c, --config] option to check configuration file syntax".into());
    };
    super::file::check(path).map_err(|e| e.to_string())?;
    Ok(format!("configuration file {} is valid", path.display()))
}

/// The `-v` line.
pub fn version_line() -> String {
    format!("natsd: v{NATSD_VERSION} (nats-server v{COMPAT_VERSION} compatible)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Options {
        match parse(args.iter().copied()) {
            Ok(Command::Run(o)) => *o,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn jetstream_flags() {
        assert!(run(&[]).jetstream.is_none());
        let o = run(&["-js", "-sd", "/data"]);
        assert_eq!(
            o.jetstream.expect("on").store_dir,
            Some(PathBuf::from("/data"))
        );
        // The store directory may come first; alone it does not enable JetStream.
        let o = run(&["--store_dir=/x", "--jetstream"]);
        assert_eq!(
            o.jetstream.expect("on").store_dir,
            Some(PathBuf::from("/x"))
        );
        assert!(run(&["-sd", "/x"]).jetstream.is_none());
        assert!(run(&["-js=false"]).jetstream.is_none());
    }

    #[test]
    fn both_spellings_and_values() {
        let o = run(&[
            "-a",
            "127.0.0.1",
            "--port=-1",
            "-n",
            "x",
            "--http_port",
            "8222",
        ]);
        assert_eq!(o.host, "127.0.0.1");
        assert_eq!(o.port, 0);
        assert_eq!(o.server_name.as_deref(), Some("x"));
        assert_eq!(o.http_port, Some(8222));
        let o = run(&[
            "--addr=0.0.0.0",
            "-p",
            "4333",
            "-DV",
            "--user",
            "a",
            "--pass",
            "b",
        ]);
        assert_eq!(o.port, 4333);
        assert!(o.debug && o.trace);
        assert!(o.auth_required());
        assert_eq!(run(&["-p", "0"]).port, 4222);
        let o = run(&["-V", "-P", "/tmp/x.pid", "-l", "/tmp/x.log"]);
        assert!(o.trace && !o.debug);
        assert!(o.pid_file.is_some() && o.log_file.is_some());
    }

    #[test]
    fn cluster_flags() {
        let o = run(&[
            "--cluster",
            "nats://u:p@127.0.0.1:-1",
            "--cluster_name=C1",
            "--routes",
            "nats-route://a:6222, nats://b:7222",
            "--no_advertise",
            "--connect_retries",
            "3",
            "--cluster_advertise",
            "10.0.0.1:6222",
        ]);
        let c = o.cluster.expect("cluster");
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 0));
        assert_eq!(c.username.as_deref(), Some("u"));
        assert_eq!(c.name.as_deref(), Some("C1"));
        assert_eq!(c.routes, ["nats-route://a:6222", "nats://b:7222"]);
        assert!(c.no_advertise);
        assert_eq!(c.connect_retries, 3);
        assert_eq!(c.advertise.as_deref(), Some("10.0.0.1:6222"));
    }

    #[test]
    fn tls_flags_both_spellings() {
        let o = run(&[
            "--tls",
            "--tlscert",
            "c.pem",
            "--tlskey=k.pem",
            "--https_port",
            "8443",
        ]);
        let t = o.tls.expect("tls");
        assert_eq!(t.cert_file, PathBuf::from("c.pem"));
        assert_eq!(t.key_file, PathBuf::from("k.pem"));
        assert!(!t.verify && t.ca_file.is_none());
        assert_eq!(o.https_port, Some(8443));
        let o = run(&[
            "-tlsverify",
            "-tlscert=c.pem",
            "-tlskey",
            "k.pem",
            "-tlscacert",
            "ca.pem",
            "-ms",
            "-1",
        ]);
        let t = o.tls.expect("tls");
        assert!(t.verify);
        assert_eq!(t.ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(o.https_port, Some(0));
        // Certificate and key alone enable TLS, as in nats-server.
        assert!(run(&["--tlscert", "c", "--tlskey", "k"]).tls.is_some());
        assert!(run(&["--tls=false"]).tls.is_none());
    }

    #[test]
    fn log_size_limit_flag() {
        assert_eq!(run(&["--log_size_limit", "1024"]).log_size_limit, 1024);
        assert_eq!(run(&["-log_size_limit=0"]).log_size_limit, 0);
        // As nats-server: `invalid value "1KB" for flag -log_size_limit: parse error`.
        let e = parse(["--log_size_limit", "1KB"]).expect_err("refused");
        assert!(
            e.contains("invalid value \"1KB\" for flag -log_size_limit"),
            "{e}"
        );
    }

    #[test]
    fn max_traced_msg_len_flag() {
        assert_eq!(run(&["--max_traced_msg_len", "3"]).max_traced_msg_len, 3);
        assert_eq!(run(&["-max_traced_msg_len=0"]).max_traced_msg_len, 0);
        assert!(parse(["--max_traced_msg_len", "x"]).is_err());
    }

    #[test]
    fn syslog_flags() {
        assert!(run(&["-s"]).syslog);
        assert!(!run(&["--syslog=false"]).syslog);
        assert_eq!(
            run(&["--remote_syslog=udp://h:514"])
                .remote_syslog
                .as_deref(),
            Some("udp://h:514")
        );
        assert_eq!(
            run(&["-r", "udp://h"]).remote_syslog.as_deref(),
            Some("udp://h")
        );
    }

    #[test]
    fn errors_are_clear() {
        assert!(parse(["-p"]).unwrap_err().contains("needs an argument"));
        assert!(parse(["-p", "x"]).unwrap_err().contains("invalid value"));
        assert!(parse(["--bogus"]).unwrap_err().contains("not defined"));
        assert_eq!(
            parse(["--tls", "--tlscert", "c.pem"]).unwrap_err(),
            "TLS Server private key must be present and valid"
        );
        assert_eq!(
            parse(["-tlsverify"]).unwrap_err(),
            "TLS Server certificate must be present and valid"
        );
        assert_eq!(
            parse(["-ms", "8443"]).unwrap_err(),
            "TLS cert and key required for HTTPS"
        );
        assert!(parse(["--routes", "http://x:6222"])
            .unwrap_err()
            .contains("unsupported scheme"));
        assert!(matches!(parse(["-v"]), Ok(Command::Version)));
        assert!(matches!(parse(["--help"]), Ok(Command::Help)));
    }
}
