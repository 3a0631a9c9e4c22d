//! The server: shared state (accounts, clients, counters), the client listener and its accept
//! loop, the monitoring listener, and the lifecycle (start, ready, shutdown). Connection kinds
//! live in their own modules and are handed sockets from here.

mod accept;
mod fabric;
mod info;
mod jwt_accounts;
mod lame_duck;
pub mod listen;
mod pins;
pub mod ports_file;

use crate::account::Accounts;
use crate::auth::Authenticator;
use crate::cluster::Cluster;
use crate::config::{Options, COMPAT_VERSION};
use crate::conn::{CloseReason, Conn};
pub use crate::fabric::Stats;
use crate::monitor::connz::ConnInfo;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::SystemTime;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// State every connection and the monitor share.
pub struct ServerShared {
    /// The options the server started with. Reloadable fields may have changed since: read
    /// them through `live_opts` (non-reloadable ones are the same in both).
    pub opts: Options,
    /// The options in force (replaced whole by a config reload).
    live: RwLock<Arc<Options>>,
    /// Some account has a message trace destination (`live`'s `account_msg_trace`).
    external_trace: AtomicBool,
    /// Bumped after each applied reload; connections watch it to re-check themselves.
    reloads: tokio::sync::watch::Sender<u64>,
    pub id: String,
    /// The key pair whose public key is `id` (signs auth callout requests), and the curve
    /// key pair whose public key INFO carries as `xkey` (encrypts them), as nats-server's.
    pub keys: ServerKeys,
    pub name: String,
    pub accounts: Accounts,
    pub auth: Authenticator,
    pub stats: Stats,
    pub start: SystemTime,
    pub client_addr: OnceLock<SocketAddr>,
    pub http_addr: OnceLock<SocketAddr>,
    /// The HTTPS monitor's address (`https_port`).
    pub https_addr: OnceLock<SocketAddr>,
    /// Client port and HTTPS monitor TLS (`tls {}`): replaced by a config reload, read once
    /// per new connection.
    client_tls: RwLock<Option<TlsAcceptors>>,
    pub http_req_stats: Mutex<BTreeMap<String, u64>>,
    clients: Mutex<HashMap<u64, Arc<Conn>>>,
    closed: Mutex<VecDeque<ConnInfo>>,
    next_cid: AtomicU64,
    shutdown: CancellationToken,
    /// Every task the server spawns, so shutdown can wait for them.
    pub tasks: TaskTracker,
    /// Routes, when clustering is on.
    pub cluster: Option<Arc<Cluster>>,
    /// Gateways, with a `gateway {}` block.
    pub gateway: Option<Arc<crate::gateway::Gateway>>,
    /// Leafnodes, with a `leafnodes {}` block.
    pub leafnodes: Option<Arc<crate::leaf::Leafnodes>>,
    /// The server's own connection: owner of internal subscriptions (cid 1, as nats-server's
    /// system client). Never registered as a client, never written to.
    pub internal: Arc<Conn>,
    /// Lame duck mode: entered once, never left.
    ldm: AtomicBool,
    /// `no_fast_producer_stall` in force (reloadable; read per read batch).
    no_fast_producer_stall: AtomicBool,
    /// Cancelled when lame duck mode starts: the client accept loop stops and drops its listener.
    stop_accept: CancellationToken,
    /// Cancelled by the client accept loop when it has ended (its listener is closed).
    accept_done: CancellationToken,
    /// "Initiating Shutdown..." is logged once.
    shutdown_started: AtomicBool,
    /// The `$SYS` services (none with `no_system_account`).
    pub sys: OnceLock<Arc<crate::sys::Sys>>,
    /// The full account resolver, when operator mode runs one (`sys/resolver.rs`).
    pub resolver: OnceLock<Arc<crate::sys::resolver::DirResolver>>,
    /// The URL account resolver, when operator mode runs one (`sys/url_resolver.rs`).
    pub url_resolver: OnceLock<Arc<crate::sys::url_resolver::UrlResolver>>,
    /// JetStream (none unless enabled).
    pub jetstream: OnceLock<Arc<crate::jetstream::JetStream>>,
}

impl ServerShared {
    /// The system account's name (`system_account`), `""` with `no_system_account`.
    pub fn system_account_name(&self) -> &str {
        if self.opts.no_system_account {
            ""
        } else {
            &self.opts.system_account
        }
    }

    /// The options in force now. Read once per connection or event, never per message.
    /// The writer settings of a `kind` connection: its write deadline (`deadline`, or the
    /// route's / gateway's own) and `write_timeout` policy, and where slow consumers count.
    pub fn write_cfg(
        &self,
        kind: crate::conn::ConnKind,
        deadline: std::time::Duration,
    ) -> crate::conn::writer::WriteCfg {
        use crate::conn::ConnKind::{Gateway, Route};
        let o = &self.opts;
        let (deadline, policy) = match (kind, &o.cluster, &o.gateway) {
            (Route, Some(c), _) => (c.write_deadline.unwrap_or(deadline), c.write_timeout),
            (Gateway, _, Some(g)) => (g.write_deadline.unwrap_or(deadline), g.write_timeout),
            _ => (deadline, self.live_opts().write_timeout),
        };
        crate::conn::writer::WriteCfg {
            deadline,
            policy,
            stats: self.stats.slow.clone(),
        }
    }

    pub fn live_opts(&self) -> Arc<Options> {
        self.live.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Operator mode: `new` (the live options with an account JWT replaced,
    /// `sys/claims.rs`) takes effect for authentication, and connected clients re-check.
    pub fn apply_account_update(&self, new: Options) {
        let new = Arc::new(new);
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = new.clone();
        self.auth.replace(&new);
        self.reloads.send_modify(|g| *g += 1);
    }

    /// Changes whenever a reload has been applied (see `reload`).
    pub fn reload_watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.reloads.subscribe()
    }

    /// Apply re-read options (config reload) all at once or not at all. Ok: the `Reloaded: …`
    /// names of what changed (logged, with `Reloaded server configuration`); Err: why
    /// nothing was applied (`config reload not supported for Port: old=…, new=…`).
    pub fn reload(self: &Arc<Self>, mut new: Options) -> Result<Vec<String>, String> {
        new.validate()?;
        let old = self.live_opts();
        jwt_accounts::keep_jwt_accounts(&old, &mut new);
        let plan = crate::config::reload::diff(&old, &new)?;
        // Steps that can fail come first: the new TLS files must load…
        let tls = if plan.tls {
            Some(client_tls_acceptor(&new)?)
        } else {
            None
        };
        // … and the new log file must open.
        if let Some(Some(f)) = &plan.log_file {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
                .map_err(|e| format!("error opening log file {}: {e}", f.display()))?;
        }
        // … and accounts' new JetStream limits must fit the server's.
        let js = self
            .jetstream
            .get()
            .filter(|_| plan.js_limits || plan.js_accounts);
        if let Some(js) = js {
            let limits = new
                .jetstream_limits
                .values()
                .flat_map(crate::config::JsLimits::each);
            crate::jetstream::limits::check_sufficient(&js.config, limits).map_err(|e| {
                format!(
                    "config reload not supported for JetStream account limits: {} ({})",
                    e.description, e.err_code
                )
            })?;
        }
        if new.debug != old.debug || new.trace != old.trace {
            crate::logging::set_levels(new.debug, new.trace);
        }
        if new.logtime != old.logtime {
            crate::logging::set_logtime(new.logtime);
        }
        self.no_fast_producer_stall
            .store(new.no_fast_producer_stall, Relaxed);
        let new = Arc::new(new);
        *self.live.write().unwrap_or_else(|e| e.into_inner()) = new.clone();
        self.external_trace.store(
            !new.account_msg_trace.is_empty(),
            std::sync::atomic::Ordering::Relaxed,
        );
        if plan.auth {
            self.auth.replace(&new);
        }
        if new.account_mappings != old.account_mappings {
            self.install_mappings(&new);
        }
        if plan.pins.any() {
            self.recheck_pins(plan.pins, &new);
        }
        if let Some(js) = js {
            let mut e = js.engine();
            if plan.js_accounts {
                e.reload_accounts(self, &new);
            }
            e.set_limits(&new.jetstream_limits);
        }
        if let Some(t) = tls {
            *self.client_tls.write().unwrap_or_else(|e| e.into_inner()) = t;
        }
        if let Some(cl) = &self.cluster {
            for r in &plan.routes_removed {
                crate::cluster::discovery::remove_configured(self, cl, r);
            }
            for r in &plan.routes_added {
                crate::cluster::discovery::add_configured(self, cl, r);
            }
            // Pool size, pinned accounts, compression: closes, announcements and dials as
            // nats-server's (the mesh decides which connections go).
            if let Some(ch) = &plan.cluster {
                cl.reconfigure(self, ch);
            }
        }
        for c in &plan.changed {
            tracing::info!("Reloaded: {c}");
        }
        // Connected clients re-check their credentials, permissions and limits.
        self.reloads.send_modify(|g| *g += 1);
        tracing::info!("Reloaded server configuration");
        // As nats-server, the reload is reported where the log went so far; then it moves.
        if let Some(f) = &plan.log_file {
            if let Err(e) = crate::logging::set_file(f.as_deref()) {
                tracing::error!("{e}");
            }
        }
        Ok(plan.changed)
    }

    /// The client port's TLS acceptor, if TLS is on (read once per new connection).
    pub fn client_tls(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.client_tls
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|t| t.client.clone())
    }

    /// The HTTPS monitor's TLS acceptor: the client port's certificate, never asking for a
    /// client certificate (nats-server clears `ClientAuth` for monitoring).
    pub fn https_tls(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.client_tls
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|t| t.https.clone())
    }

    pub fn next_cid(&self) -> u64 {
        self.next_cid.fetch_add(1, Relaxed)
    }

    fn clients_lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a new client; false when `max_connections` is reached.
    ///
    /// A connection that registers once shutdown has begun is closed at once (and `true`
    /// returned): `begin_shutdown` cancels first and then sweeps the clients under this
    /// lock, so a connection accepted just before the listener stopped is either swept or
    /// sees the cancellation here. Before, it lived on and `Server::shutdown` waited for it
    /// for ever (tests/js_cluster.rs hung in CI: async-nats reconnected to the next node
    /// as that node shut down).
    pub fn register_client(&self, c: &Arc<Conn>) -> bool {
        let mut m = self.clients_lock();
        if self.shutdown.is_cancelled() {
            c.close(CloseReason::ServerShutdown);
            return true;
        }
        if m.len() >= self.live_opts().max_connections {
            return false;
        }
        m.insert(c.cid, c.clone());
        self.stats.total_connections.fetch_add(1, Relaxed);
        true
    }

    /// Forget a finished client and remember it in the closed-connections ring.
    pub fn unregister_client(&self, c: &Arc<Conn>) {
        let was = self.clients_lock().remove(&c.cid).is_some();
        if !was || self.opts.max_closed_clients == 0 {
            return;
        }
        let info = ConnInfo::of(c, SystemTime::now(), true);
        let mut ring = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        while ring.len() >= self.opts.max_closed_clients {
            ring.pop_front();
        }
        ring.push_back(info);
    }

    pub fn clients(&self) -> Vec<Arc<Conn>> {
        let mut v: Vec<_> = self.clients_lock().values().cloned().collect();
        v.sort_by_key(|c| c.cid);
        v
    }

    /// The client connection `cid`, while it is open.
    pub fn client(&self, cid: u64) -> Option<Arc<Conn>> {
        self.clients_lock().get(&cid).cloned()
    }

    pub fn num_clients(&self) -> usize {
        self.clients_lock().len()
    }

    pub fn closed_clients(&self) -> Vec<ConnInfo> {
        self.closed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// True once lame duck mode has started (`/healthz` answers 503 from then on).
    pub fn is_lame_duck(&self) -> bool {
        self.ldm.load(Relaxed)
    }

    /// Start shutting down: stop the listeners, close every client and route. Idempotent;
    /// `Server::shutdown` then waits for the tasks to end.
    pub fn begin_shutdown(&self) {
        if !self.shutdown_started.swap(true, Relaxed) {
            tracing::info!("Initiating Shutdown...");
            // While the routes are still up: peers learn this server is going.
            if let Some(sys) = self.sys.get() {
                sys.announce_shutdown();
            }
        }
        self.shutdown.cancel();
        for c in self.clients() {
            c.close(CloseReason::ServerShutdown);
        }
        if let Some(cl) = &self.cluster {
            cl.close_all();
        }
        if let Some(gw) = &self.gateway {
            gw.close_all();
        }
    }

    pub fn shutdown_signal(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.shutdown.cancelled()
    }
}

/// TLS acceptors built from the top-level `tls {}`.
#[derive(Clone)]
struct TlsAcceptors {
    client: tokio_rustls::TlsAcceptor,
    https: tokio_rustls::TlsAcceptor,
}

/// The acceptors for `o.tls` (`None`: TLS off).
fn client_tls_acceptor(o: &Options) -> Result<Option<TlsAcceptors>, String> {
    let Some(t) = &o.tls else { return Ok(None) };
    let client = crate::tls::server_config(t)?;
    let https = if t.verify {
        crate::tls::server_config(&crate::tls::TlsOpts {
            verify: false,
            ..t.clone()
        })?
    } else {
        client.clone()
    };
    Ok(Some(TlsAcceptors {
        client: client.into(),
        https: https.into(),
    }))
}

/// `INFO <json> \r\n`.
pub(crate) fn info_line(json: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(json.len() + 8);
    line.extend_from_slice(b"INFO ");
    line.extend_from_slice(json);
    line.extend_from_slice(b" \r\n");
    line
}

/// A running server. Dropping it does not stop it: call `shutdown`.
pub struct Server {
    shared: Arc<ServerShared>,
    tasks: TaskTracker,
}

impl Server {
    /// Bind the listeners and start serving. Port 0 (client or monitor) picks a free port;
    /// the bound addresses are reported by `client_addr` / `http_addr`.
    pub async fn start(opts: Options) -> io::Result<Server> {
        opts.validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let url_resolver = crate::sys::url_resolver::start(&opts)
            .await
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // With gateways, the cluster name is the gateway name (the options keep what the
        // config said, so that a reload compares like with like).
        let cluster_opts = opts.cluster.clone().map(|mut c| {
            if let Some(g) = &opts.gateway {
                c.name.get_or_insert_with(|| g.name.clone());
            }
            // With pools, the system account gets a route of its own (nats-server 2.10+).
            c.pinned_accounts = crate::config::reload::effective_pinned(
                &c,
                &opts.system_account,
                opts.no_system_account,
            );
            c
        });
        let keys = ServerKeys::new();
        let id = keys.kp.public_key();
        let cluster = match cluster_opts.map(|c| Cluster::new(c, &id)).transpose() {
            Ok(c) => c.map(Arc::new),
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
        };
        let client_tls = client_tls_acceptor(&opts)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let name = opts.server_name.clone().unwrap_or_else(|| id.clone());
        let gateway = match opts
            .gateway
            .clone()
            .map(|g| crate::gateway::Gateway::with_tls(g, &id))
            .transpose()
        {
            Ok(g) => g.map(Arc::new),
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
        };
        let shared = Arc::new(ServerShared {
            accounts: Accounts::new(opts.accounts.iter().map(String::as_str)),
            auth: Authenticator::new(&opts),
            stats: Stats::default(),
            start: SystemTime::now(),
            client_addr: OnceLock::new(),
            http_addr: OnceLock::new(),
            https_addr: OnceLock::new(),
            client_tls: RwLock::new(client_tls),
            http_req_stats: Mutex::new(BTreeMap::new()),
            clients: Mutex::new(HashMap::new()),
            closed: Mutex::new(VecDeque::new()),
            next_cid: AtomicU64::new(2),
            internal: Arc::new(Conn::new(
                1,
                crate::conn::ConnKind::Internal,
                SocketAddr::from(([0, 0, 0, 0], 0)),
                0,
            )),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            cluster,
            gateway,
            leafnodes: opts
                .leafnodes
                .clone()
                .map(|l| Arc::new(crate::leaf::Leafnodes::new(l))),
            ldm: AtomicBool::new(false),
            no_fast_producer_stall: AtomicBool::new(opts.no_fast_producer_stall),
            stop_accept: CancellationToken::new(),
            accept_done: CancellationToken::new(),
            shutdown_started: AtomicBool::new(false),
            sys: OnceLock::new(),
            resolver: OnceLock::new(),
            url_resolver: url_resolver.map(OnceLock::from).unwrap_or_default(),
            jetstream: OnceLock::new(),
            id,
            keys,
            name,
            live: RwLock::new(Arc::new(opts.clone())),
            external_trace: AtomicBool::new(!opts.account_msg_trace.is_empty()),
            reloads: tokio::sync::watch::Sender::new(0),
            opts,
        });
        fabric::install_links(&shared)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        crate::mapping::install(&shared.accounts, &shared.opts);
        let o = &shared.opts;
        tracing::info!("Starting nats-server");
        tracing::info!("  Version:  {}", COMPAT_VERSION);
        tracing::info!("  natsd:    {}", crate::config::NATSD_VERSION);
        tracing::info!("  Git:      [not set]");
        tracing::info!("  Name:     {}", shared.name);
        tracing::info!("  ID:       {}", shared.id);
        if let Some(p) = &o.pid_file {
            std::fs::write(p, std::process::id().to_string()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("could not write pid file {}: {e}", p.display()),
                )
            })?;
        }
        let tasks = shared.tasks.clone();
        if let Some(sys) = crate::sys::Sys::start(&shared) {
            let _ = shared.sys.set(sys);
        }
        match crate::jetstream::JetStream::start(&shared) {
            Ok(Some(js)) => {
                let _ = shared.jetstream.set(js);
            }
            Ok(None) => {}
            Err(e) => return Err(io::Error::other(e)),
        }
        if let Some(hp) = o.http_port {
            let host = o.http_host.clone().unwrap_or_else(|| o.host.clone());
            let l = listen::bind(&host, hp).await.map_err(|e| {
                let go = listen::go_listen_error(&host, hp, &e);
                let m = format!("Can't start monitoring: can't listen to the monitor port: {go}");
                io::Error::new(e.kind(), m)
            })?;
            let addr = listen::local_addr(&l)?;
            let _ = shared.http_addr.set(addr);
            tracing::info!("Starting http monitor on {}", addr);
            tasks.spawn(crate::monitor::serve(
                shared.clone(),
                l,
                shared.shutdown.clone(),
            ));
        }
        if let Some(hp) = o.https_port {
            let host = o.http_host.clone().unwrap_or_else(|| o.host.clone());
            let l = listen::bind(&host, hp).await.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("can't listen on https monitor {host}:{hp}: {e}"),
                )
            })?;
            let addr = listen::local_addr(&l)?;
            let _ = shared.https_addr.set(addr);
            tracing::info!("Starting https monitor on {}", addr);
            tasks.spawn(crate::monitor::serve_https(
                shared.clone(),
                l,
                shared.shutdown.clone(),
            ));
        }
        let l = listen::bind(&o.host, o.port).await.map_err(|e| {
            let go = listen::go_listen_error(&o.host, o.port, &e);
            let m = format!("Error listening on port: {}:{}, {go:?}", o.host, o.port);
            io::Error::new(e.kind(), m)
        })?;
        let addr = listen::local_addr(&l)?;
        let _ = shared.client_addr.set(addr);
        tracing::info!("Listening for client connections on {}", addr);
        if let Some(t) = &o.tls {
            // `handshake_first` without a fallback delay overrides `allow_non_tls`.
            let tls_first_only = t.handshake_first == Some(std::time::Duration::ZERO);
            if o.allow_non_tls && !tls_first_only {
                tracing::info!("TLS available for client connections");
            } else {
                tracing::info!("TLS required for client connections");
            }
            if tls_first_only {
                tracing::warn!(
                    "Clients that are not using \"TLS Handshake First\" option will fail to connect"
                );
            }
        }
        if shared.auth.required() {
            tracing::info!("Server requires authentication for client connections");
        }
        let done = shared.accept_done.clone();
        let accept = accept::accept_loop(shared.clone(), l, tasks.clone());
        tasks.spawn(async move {
            accept.await;
            done.cancel();
        });
        // Before the routes: their INFO carries our leafnode address.
        if let Some(lf) = &shared.leafnodes {
            crate::leaf::start(&shared, lf).await?;
        }
        if let Some(cl) = &shared.cluster {
            let co = &cl.opts;
            let l = crate::util::net::listen((co.host.as_str(), co.port))
                .await
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("can't listen for routes on {}:{}: {e}", co.host, co.port),
                    )
                })?;
            let addr = l.local_addr()?;
            let _ = cl.listen_addr.set(addr);
            tracing::info!("Cluster name is {}", cl.name());
            tracing::info!("Listening for route connections on {}", addr);
            tasks.spawn(accept::route_accept_loop(shared.clone(), cl.clone(), l));
            crate::cluster::discovery::start(&shared, cl);
        }
        if let Some(gw) = &shared.gateway {
            crate::gateway::listen(&shared, gw).await?;
        }
        if let Some(dir) = &o.ports_file_dir {
            ports_file::write(&shared, dir);
        }
        tracing::info!("Server is ready");
        Ok(Server { shared, tasks })
    }

    pub fn client_addr(&self) -> SocketAddr {
        *self
            .shared
            .client_addr
            .get()
            .unwrap_or(&SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.shared.http_addr.get().copied()
    }

    /// `nats://127.0.0.1:<port>` for clients.
    pub fn client_url(&self) -> String {
        let a = self.client_addr();
        let host = if a.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            a.ip().to_string()
        };
        format!("nats://{host}:{}", a.port())
    }

    pub fn id(&self) -> &str {
        &self.shared.id
    }

    pub fn shared(&self) -> &Arc<ServerShared> {
        &self.shared
    }

    /// Enter lame duck mode (see `ServerShared::lame_duck`); the server shuts itself down
    /// at the end (`wait_for_shutdown` returns then); call `shutdown` to finish.
    pub fn lame_duck(&self) {
        self.shared.lame_duck();
    }

    pub fn is_lame_duck(&self) -> bool {
        self.shared.is_lame_duck()
    }

    /// Config reload: apply `new` (see `ServerShared::reload`). What SIGHUP does with the
    /// re-read config file; nothing is applied when an option that cannot change differs.
    pub fn reload(&self, new: Options) -> Result<Vec<String>, String> {
        self.shared.reload(new)
    }

    /// The options in force (the startup ones updated by reloads).
    pub fn options(&self) -> Arc<Options> {
        self.shared.live_opts()
    }

    /// Returns when the server has started shutting down (e.g. at the end of lame duck mode).
    pub async fn wait_for_shutdown(&self) {
        self.shared.shutdown.cancelled().await
    }

    /// Stop accepting, close every connection, and wait for all tasks to end.
    pub async fn shutdown(self) {
        self.shared.begin_shutdown();
        self.tasks.close();
        self.tasks.wait().await;
        if let Some(p) = &self.shared.opts.pid_file {
            let _ = std::fs::remove_file(p);
        }
        if let Some(dir) = &self.shared.opts.ports_file_dir {
            ports_file::remove(dir);
        }
        tracing::info!("Server Exiting..");
    }
}

/// A server's own nkeys: its identity (`N…`, the server id) and its curve key (`X…`).
pub struct ServerKeys {
    pub kp: nkeys::KeyPair,
    pub xkp: nkeys::XKey,
}

impl ServerKeys {
    fn new() -> Self {
        ServerKeys {
            kp: nkeys::KeyPair::new_server(),
            xkp: nkeys::XKey::new(),
        }
    }
}
