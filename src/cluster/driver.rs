//! The tokio side of the mesh (`mesh.rs`): route tasks, the resolver, dials and one timer task
//! feed it events under one mutex, and this module carries out the actions it returns —
//! resolve, dial, register, close, send gossip. The mesh decides; nothing here does.

use super::mesh::{self, Action, CloseWhy, ConnId, Event, Mesh, Slot};
use super::route::{self, Solicit};
use super::url::RouteUrl;
use super::{Cluster, RouteEntry};
use crate::conn::{CloseReason, Conn};
use crate::proto::info::ServerInfo;
use crate::server::ServerShared;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

const DIAL_TIMEOUT: Duration = Duration::from_secs(1);

/// What became of a connection's first INFO.
pub enum Verdict {
    /// It carries its slot now (`first`: the first connection to that server).
    Registered {
        first: bool,
    },
    /// Kept, unused, until its peer closes the duplicate it dialled.
    Spare,
    /// Refused as nats-server refuses it (the route sends the matching `-ERR`): a pinned
    /// route without pools, for an account we do not pin, a pool index out of range.
    Refused(CloseWhy),
    Close(CloseReason),
}

pub fn new_mesh(cl: &super::ClusterOpts, server_id: &str) -> Mesh {
    let pool = cl.pool();
    Mesh::new(mesh::Config {
        server_id: Arc::from(server_id),
        pool_size: pool.map_or(-1, |n| n as i32),
        // The system account is in the list already (Server::start), while pooling is on.
        pinned: match pool {
            Some(_) => cl
                .pinned_accounts
                .iter()
                .map(|a| Arc::from(a.as_str()))
                .collect(),
            None => Vec::new(),
        },
        connect_retries: cl.connect_retries,
        connect_backoff: cl.connect_backoff,
        rng_seed: rand::random(),
    })
}

fn why(w: CloseWhy) -> CloseReason {
    match w {
        CloseWhy::SelfRoute | CloseWhy::Duplicate => CloseReason::DuplicateRoute,
        CloseWhy::Removed => CloseReason::ClientClosed,
        CloseWhy::Reload => CloseReason::RouteRemoved,
        CloseWhy::NoPool
        | CloseWhy::UnknownAccount
        | CloseWhy::BadPoolIdx
        | CloseWhy::WrongPeer => CloseReason::ProtocolViolation,
    }
}

pub(super) fn addr_of(url: &str) -> Option<SocketAddr> {
    let u = RouteUrl::parse(url).ok()?;
    Some(SocketAddr::new(u.host.parse::<IpAddr>().ok()?, u.port))
}

/// What the mesh decided for one event, with the registry already following it.
struct Decided {
    /// Actions about the calling route's own connection.
    mine: Vec<Action>,
    others: Vec<Action>,
    /// Spares the mesh promoted, stored: each with `first`.
    promoted: Vec<(Arc<RouteEntry>, bool)>,
    /// The caller's entry was registered and stored.
    stored_mine: bool,
}

impl Cluster {
    /// Feed the mesh one event and carry out what it decides. Actions about `me` (the calling
    /// route's own connection) are returned instead.
    pub(crate) fn feed(
        self: &Arc<Self>,
        srv: &Arc<ServerShared>,
        ev: Event,
        me: Option<ConnId>,
    ) -> Vec<Action> {
        let Decided {
            mine,
            others,
            promoted,
            ..
        } = self.decide_storing(ev, me, None);
        for (e, first) in promoted {
            self.on_registered(srv, &e, first);
        }
        for a in others {
            self.perform(srv, a);
        }
        mine
    }

    /// The mesh's actions for `ev` (those about `me`, and the others), and the registry follows the mesh's registrations before the mesh lock is
    /// released: `mine` (the calling route's entry, when the mesh registers it) and spares it
    /// promotes. Stored later, a registration decided first could land after a newer one for
    /// the same slot and replace it, leaving the registry a connection short once the older
    /// one closed (a pool slot missing from /routez while the mesh counted it). Returns the
    /// promoted spares (for `on_registered`) and whether `mine` was stored.
    fn decide_storing(
        &self,
        ev: Event,
        me: Option<ConnId>,
        mine: Option<&Arc<RouteEntry>>,
    ) -> Decided {
        let mut out = Vec::new();
        let mut promoted = Vec::new();
        let mut stored_mine = false;
        {
            let mut m = self.mesh.lock().unwrap_or_else(|e| e.into_inner());
            m.handle(ev, self.epoch.elapsed(), &mut out);
            for a in &out {
                let Action::Register { conn, first, .. } = a else {
                    continue;
                };
                let entry = super::lock(&self.spares).remove(conn);
                if let (true, Some(e)) = (Some(*conn) == me, mine) {
                    stored_mine = self.store(e);
                } else if let Some(e) = entry {
                    if self.store(&e) {
                        promoted.push((e, *first));
                    }
                }
            }
        }
        self.wake.notify_one();
        let split = out.into_iter().partition(|a| {
            matches!(a, Action::Register { conn, .. } | Action::Close { conn, .. } if Some(*conn) == me)
        });
        Decided {
            mine: split.0,
            others: split.1,
            promoted,
            stored_mine,
        }
    }

    fn perform(self: &Arc<Self>, srv: &Arc<ServerShared>, a: Action) {
        match a {
            Action::Resolve { seed } => {
                srv.tasks
                    .spawn(resolve_seed(srv.clone(), self.clone(), seed));
            }
            Action::Dial {
                dial,
                addr,
                url,
                slot,
                mode,
            } => {
                srv.tasks.spawn(dial_task(
                    srv.clone(),
                    self.clone(),
                    dial,
                    addr,
                    url,
                    slot,
                    mode.wire(),
                ));
            }
            // Stored (a spare taking over its slot) under the mesh lock in `decide_storing`.
            Action::Register { .. } => {}
            Action::Close { conn, why: w } => {
                if let Some(c) = super::lock(&self.live).get(&conn) {
                    tracing::debug!("{} - Closing route: {w:?}", c.log_prefix());
                    c.close(why(w));
                }
            }
            Action::AnnouncePinned { peer, account } => {
                let entry = super::lock(&self.routes)
                    .get(&*peer)
                    .and_then(|p| p.pinned.get(&account).cloned());
                if let Some(e) = entry {
                    let line = route::gossip_json(&e, mesh::GossipMode::Disabled.wire());
                    self.broadcast_except(&peer, |r| (!r.no_pool).then(|| line.clone()));
                }
            }
            Action::SendGossip { to, about, mode } => {
                let Some(c) = super::lock(&self.live).get(&to).cloned() else {
                    return;
                };
                for id in about {
                    if let Some(r) = self.primary_of(&id) {
                        let line = route::gossip_json(&r, mode.wire());
                        c.out.push_now(line.len(), |b| b.extend_from_slice(&line));
                    }
                }
            }
        }
    }

    /// A route connection starts: the mesh learns it (dialled or accepted).
    pub(crate) fn conn_started(
        self: &Arc<Self>,
        srv: &Arc<ServerShared>,
        conn: &Arc<Conn>,
        dial: Option<u64>,
    ) {
        super::lock(&self.live).insert(conn.cid, conn.clone());
        let ev = match dial {
            Some(dial) => Event::Dialled {
                dial,
                conn: conn.cid,
            },
            None => Event::Accepted {
                conn: conn.cid,
                addr: conn.addr,
            },
        };
        for a in self.feed(srv, ev, Some(conn.cid)) {
            if let Action::Close { why: w, .. } = a {
                conn.close(why(w));
            }
        }
    }

    /// A route connection ended.
    pub(crate) fn conn_ended(self: &Arc<Self>, srv: &Arc<ServerShared>, conn: &Conn) {
        super::lock(&self.live).remove(&conn.cid);
        super::lock(&self.spares).remove(&conn.cid);
        self.feed(srv, Event::Closed { conn: conn.cid }, None);
    }

    /// The peer's first INFO on `conn` (`entry` is None when it is ourselves).
    pub(crate) fn hello(
        self: &Arc<Self>,
        srv: &Arc<ServerShared>,
        conn: &Conn,
        hello: mesh::Hello,
        entry: Option<&Arc<RouteEntry>>,
    ) -> Verdict {
        let ev = Event::Hello {
            conn: conn.cid,
            hello,
        };
        // Listed as a spare before the mesh decides: should it keep this connection as a
        // spare, another route task may promote it (its slot's active connection closing)
        // as soon as the mesh lock is released, and the promotion takes the entry from here.
        // Filled afterwards, such a promotion found nothing and the connection stayed open
        // but unregistered at this end while the peer counted it (the dialler holding its
        // INFO for compression made that window easy to hit).
        if let Some(entry) = entry {
            super::lock(&self.spares).insert(conn.cid, entry.clone());
        }
        let Decided {
            mine,
            others,
            promoted,
            stored_mine: stored,
        } = self.decide_storing(ev, Some(conn.cid), entry);
        let mut verdict = Verdict::Spare;
        for a in mine {
            match a {
                Action::Close {
                    why: w @ (CloseWhy::NoPool | CloseWhy::UnknownAccount | CloseWhy::BadPoolIdx),
                    ..
                } => verdict = Verdict::Refused(w),
                Action::Close { why: w, .. } => verdict = Verdict::Close(why(w)),
                Action::Register { first, .. } => verdict = Verdict::Registered { first },
                _ => {}
            }
        }
        // Registered (and stored) before the rest is carried out: gossip about it needs its
        // entry.
        if entry.is_some() {
            match verdict {
                Verdict::Registered { .. } => {
                    if !stored {
                        verdict = Verdict::Close(CloseReason::ServerShutdown);
                    }
                }
                // Listed above (or already promoted and stored by another task).
                Verdict::Spare => {}
                Verdict::Refused(_) | Verdict::Close(_) => {
                    super::lock(&self.spares).remove(&conn.cid);
                }
            }
        }
        for (e, first) in promoted {
            self.on_registered(srv, &e, first);
        }
        for a in others {
            self.perform(srv, a);
        }
        verdict
    }
}

impl Cluster {
    /// The peer's connection that speaks for it (gossip about it).
    fn primary_of(&self, id: &str) -> Option<Arc<RouteEntry>> {
        super::lock(&self.routes)
            .get(id)
            .and_then(|p| p.primary().cloned())
    }

    /// `entry` carries its slot now: our interest on it; for a server's first connection, the
    /// gateway URL it knows and clients' `connect_urls`. (The INFO of a pinned account's
    /// connection that tells pooled peers of nats-server to open theirs is the mesh's
    /// `AnnouncePinned`.)
    pub(crate) fn on_registered(
        self: &Arc<Self>,
        srv: &Arc<ServerShared>,
        entry: &Arc<RouteEntry>,
        first: bool,
    ) {
        self.dump(&srv.accounts.all(), entry);
        if first {
            let gateway_url = entry.info().gateway_url.clone();
            crate::gateway::peer_url(srv, &entry.remote_id, &gateway_url);
            crate::gateway::to_new_route(srv, &entry.conn);
            srv.cluster_changed();
        }
    }
}

/// Resolve `host` (an IP literal, or a name through hickory-resolver with resolv.conf and
/// /etc/hosts) to socket addresses.
pub async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let resolver = hickory_resolver::TokioResolver::builder_tokio()
        .map_err(|e| format!("resolver: {e}"))?
        .build();
    let ips = resolver
        .lookup_ip(host)
        .await
        .map_err(|e| format!("lookup {host}: {e}"))?;
    let mut v: Vec<SocketAddr> = ips.iter().map(|ip| SocketAddr::new(ip, port)).collect();
    v.sort();
    v.dedup();
    if v.is_empty() {
        return Err(format!("lookup {host}: no addresses"));
    }
    Ok(v)
}

async fn resolve_seed(srv: Arc<ServerShared>, cl: Arc<Cluster>, seed: Arc<str>) {
    let ev = match RouteUrl::parse(&seed) {
        Err(e) => {
            tracing::error!("{e}");
            Event::ResolveFailed { seed }
        }
        Ok(url) => match resolve(&url.host, url.port).await {
            Ok(addrs) => Event::SeedResolved { seed, addrs },
            Err(e) => {
                let n = {
                    let mut f = super::lock(&cl.resolve_failures);
                    let n = f.entry(seed.to_string()).or_insert(0);
                    *n += 1;
                    *n
                };
                // First failures and then every minute, to keep the log readable.
                if n <= 3 || n % 60 == 0 {
                    tracing::error!("Error resolving route {url}: {e} (attempt {n})");
                }
                Event::ResolveFailed { seed }
            }
        },
    };
    if let Event::SeedResolved { seed, .. } = &ev {
        super::lock(&cl.resolve_failures).remove(&**seed);
    }
    if !srv.is_shutting_down() {
        cl.feed(&srv, ev, None);
    }
}

/// A failed route dial, logged as nats-server does: an error at the first attempt and every
/// `connect_error_reports` (`reconnect_error_reports` once the address was connected), else
/// at debug level.
fn dial_failed(srv: &ServerShared, cl: &Cluster, addr: SocketAddr, e: &str) {
    let (attempts, connected) = {
        let mut f = super::lock(&cl.dial_failures);
        let n = f.entry(addr).or_insert((0, false));
        n.0 += 1;
        *n
    };
    let line =
        format!("Error trying to connect to route (attempt {attempts}): dial tcp {addr}: {e}");
    if srv.live_opts().report_connect_err(!connected, attempts) {
        tracing::error!("{line}");
    } else {
        tracing::debug!("{line}");
    }
}

async fn dial_task(
    srv: Arc<ServerShared>,
    cl: Arc<Cluster>,
    dial: u64,
    addr: SocketAddr,
    url: Arc<str>,
    slot: Slot,
    gossip_mode: u8,
) {
    let parsed = RouteUrl::parse(&url);
    let stream = match (&parsed, srv.is_shutting_down()) {
        (Ok(_), false) => {
            tracing::debug!("Trying to connect to route on {addr} ({url})");
            match tokio::time::timeout(DIAL_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(s)) => {
                    super::lock(&cl.dial_failures).insert(addr, (0, true));
                    Some(s)
                }
                Ok(Err(e)) => {
                    dial_failed(&srv, &cl, addr, &e.to_string());
                    None
                }
                Err(_) => {
                    dial_failed(&srv, &cl, addr, "i/o timeout");
                    None
                }
            }
        }
        _ => None,
    };
    let (Some(stream), Ok(mut u)) = (stream, parsed) else {
        cl.feed(&srv, Event::DialFailed { dial }, None);
        return;
    };
    let configured = super::lock(&cl.configured).contains(&*url);
    if !configured && u.user.is_none() {
        u.user = cl.opts.username.clone();
        u.pass = cl.opts.password.clone().or_else(|| cl.opts.token.clone());
    }
    let sol = Solicit {
        url: u,
        configured,
        dial,
        slot,
        gossip_mode,
    };
    route::run(srv, cl, stream, addr, Some(sol)).await;
}

/// The timer: `Tick` the mesh at its deadlines until shutdown.
pub async fn timer(srv: Arc<ServerShared>, cl: Arc<Cluster>) {
    loop {
        let next = cl
            .mesh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .next_deadline();
        let sleep = match next {
            Some(d) => d.saturating_sub(cl.epoch.elapsed()),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {
                if srv.is_shutting_down() {
                    return;
                }
                cl.feed(&srv, Event::Tick, None);
            }
            _ = cl.wake.notified() => {}
            _ = srv.shutdown_signal() => return,
        }
    }
}

/// An INFO about another server arrived on a route: the mesh decides whether to dial it.
pub fn gossip(srv: &Arc<ServerShared>, cl: &Arc<Cluster>, conn: &Conn, info: &ServerInfo) {
    if info.ip.is_empty() {
        return;
    }
    let g = mesh::Gossip {
        id: Arc::from(info.server_id.as_str()),
        url: Arc::from(info.ip.as_str()),
        addrs: Vec::new(),
        account: (!info.route_account.is_empty()).then(|| Arc::from(info.route_account.as_str())),
        gossip_mode: mesh::GossipMode::from_wire(info.gossip_mode),
    };
    let cid = conn.cid;
    if let Some(a) = addr_of(&info.ip) {
        let g = mesh::Gossip {
            addrs: vec![a],
            ..g
        };
        cl.feed(
            srv,
            Event::Gossip {
                conn: cid,
                gossip: g,
            },
            None,
        );
        return;
    }
    let Ok(u) = RouteUrl::parse(&info.ip) else {
        tracing::debug!("Ignoring gossiped route {:?}", info.ip);
        return;
    };
    let (srv2, cl2) = (srv.clone(), cl.clone());
    srv.tasks.spawn(async move {
        match resolve(&u.host, u.port).await {
            Ok(addrs) => {
                let g = mesh::Gossip { addrs, ..g };
                cl2.feed(
                    &srv2,
                    Event::Gossip {
                        conn: cid,
                        gossip: g,
                    },
                    None,
                );
            }
            Err(e) => tracing::debug!("Error resolving implicit route {u}: {e}"),
        }
    });
}
