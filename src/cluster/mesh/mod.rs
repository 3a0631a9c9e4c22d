//! The route mesh as a deterministic, sans-io state machine: which seed or gossiped address to
//! dial and when, self-route detection, which of two duplicate connections survives, which
//! pool slots to open, and whom to tell about a newcomer. [`Mesh::handle`] takes an [`Event`]
//! and the current time and pushes [`Action`]s; it does no I/O, holds no lock, reads no clock
//! and draws its randomness from a seeded `SmallRng`, so the same inputs always give the same
//! outputs. The tokio layer (`discovery.rs`, `route.rs`) feeds it events and carries out its
//! actions; `sim.rs` (tests) runs many nodes of it over an in-memory network with virtual time.
//! Files: this one has the types, seeds, dials and closes; `hello.rs` a peer's first INFO;
//! `gossip.rs` gossip and gossiped dials; `pool.rs` pool slots.
//!
//! Rules (docs/architecture.md, "Routes"):
//! - Slots: with both ends pooling, `max(P_local, P_remote)` pool slots plus one per pinned
//!   account; otherwise one slot (`Pool(0)`). The dialler of the lowest registered slot dials
//!   the missing ones (retry 1 s, doubling to 30 s); the larger id, when it dialled from
//!   gossip, only once its connection has held the slot for `DEFER_TO_SMALLER`. A pinned
//!   account's slot still missing `defer()` after a peer's first dial, or after its
//!   connection was lost, we dial even when the peer holds the lowest slot (nats-server
//!   never dials a pinned account on a route it did not configure).
//! - Duplicates, per (peer, slot): a connection dialled by the server with the smaller id beats
//!   one dialled by the other; between two dialled by the same server, that server closes the
//!   newer one and the other end keeps both until then. Both ends agree without talking.
//!   A nats-server peer closes the one it registered last: we keep both until it has.
//! - Seeds are resolved every second (plus 0–100 ms jitter) forever and every address that is
//!   not self, not being dialled and not known to lead to a connected peer is dialled.
//!   Gossiped peers are dialled after 0–100 ms jitter, `connect_retries` more times on failure.
//! - Gossip: when the first connection to a peer registers, the newcomer is told about every
//!   other peer (for any two peers u and v of w, whichever joined w last is told about the
//!   other, so a connected graph closes into a full mesh, also after a partition heals), and
//!   the others about the newcomer as nats-server does (2.11 gossip modes). The side with the
//!   larger id waits before dialling a gossiped peer (the other side's dial wins), unless a
//!   nats-server peer told it: nats-server never tells the newcomer, so no such dial comes.

mod gossip;
mod hello;
mod pool;
mod reload;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A connection, as numbered by the driver (the connection id `cid`).
pub type ConnId = u64;
/// A dial, as numbered by the mesh.
pub type DialId = u64;

/// Between resolutions of a configured seed, and between attempts of a gossiped peer.
pub const RETRY: Duration = Duration::from_secs(1);
/// How long a duplicate connection to a nats-server peer is kept for the peer to close one of
/// the two (it does so as it registers the second); after that we close the spare ourselves.
pub const PEER_CLOSES: Duration = Duration::from_secs(5);
/// How long the larger id of a pair told about each other waits for the smaller one's dial
/// before dialling itself (a handshake in a storm of starting nodes can take over a second).
pub const DEFER_TO_SMALLER: Duration = Duration::from_secs(2);
/// The longest such wait, however slow handshakes are.
pub const MAX_DEFER: Duration = Duration::from_secs(10);
/// When a peer reached through gossip hears of our other peers.
pub const TELL_LATER: Duration = Duration::from_secs(5);
/// Recent handshakes (dial to the peer's INFO) the wait is scaled by.
const HANDSHAKE_SAMPLES: usize = 16;

/// Longest wait between attempts to open a missing pool slot.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
const JITTER_MS: u64 = 100;

/// nats-server 2.11's `gossip_mode` in a route INFO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GossipMode {
    #[default]
    Default,
    Disabled,
    Override,
}

impl GossipMode {
    pub fn from_wire(v: u8) -> Self {
        match v {
            1 => GossipMode::Disabled,
            2 => GossipMode::Override,
            _ => GossipMode::Default,
        }
    }

    pub fn wire(self) -> u8 {
        match self {
            GossipMode::Default => 0,
            GossipMode::Disabled => 1,
            GossipMode::Override => 2,
        }
    }
}

/// One of the connections between two servers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// Pool connection `idx` (the only one, 0, when either end has no pool).
    Pool(u16),
    /// The connection dedicated to a pinned account.
    Account(Arc<str>),
}

#[derive(Clone, Debug)]
pub struct Config {
    pub server_id: Arc<str>,
    /// `pool_size`: > 0 pools that many connections per peer; ≤ 0 one route, as 2.9.
    pub pool_size: i32,
    /// Pinned accounts (the system account included by the caller); ignored without a pool.
    pub pinned: Vec<Arc<str>>,
    /// Extra attempts for a gossiped peer.
    pub connect_retries: u32,
    /// `connect_backoff` (nats-server 2.12): a seed that leads to no peer is tried again after
    /// 1 s, doubling to 30 s; once it does, every second again.
    pub connect_backoff: bool,
    /// Seeds the RNG (jitter).
    pub rng_seed: u64,
}

/// The first INFO a peer sent on a connection.
#[derive(Clone, Debug, Default)]
pub struct Hello {
    pub id: Arc<str>,
    /// Where the others can dial it (its gossip URL), opaque to the mesh.
    pub url: Arc<str>,
    /// That URL's address, when known.
    pub addr: Option<SocketAddr>,
    /// `route_pool_size` (0 when absent: no pool).
    pub pool_size: i32,
    /// `route_pool_idx`.
    pub pool_idx: u16,
    /// `route_account`: the connection is dedicated to that account.
    pub account: Option<Arc<str>>,
    pub gossip_mode: GossipMode,
    /// The peer is natsd (its INFO says `natsd`): it tells a newcomer about its other peers,
    /// where nats-server tells only the others about the newcomer.
    pub natsd: bool,
}

/// An INFO about another server, received on a route.
#[derive(Clone, Debug, Default)]
pub struct Gossip {
    pub id: Arc<str>,
    pub url: Arc<str>,
    /// The URL resolved (by the driver).
    pub addrs: Vec<SocketAddr>,
    pub account: Option<Arc<str>>,
    pub gossip_mode: GossipMode,
}

#[derive(Clone, Debug)]
pub enum Event {
    /// Time passed (call at [`Mesh::next_deadline`] at the latest).
    Tick,
    /// Start dialling a configured seed (startup, reload).
    AddSeed {
        seed: Arc<str>,
    },
    /// Stop dialling a configured seed and close the connections it dialled (reload).
    RemoveSeed {
        seed: Arc<str>,
    },
    SeedResolved {
        seed: Arc<str>,
        addrs: Vec<SocketAddr>,
    },
    ResolveFailed {
        seed: Arc<str>,
    },
    DialFailed {
        dial: DialId,
    },
    /// The dial connected; `conn` numbers the connection from now on.
    Dialled {
        dial: DialId,
        conn: ConnId,
    },
    Accepted {
        conn: ConnId,
        addr: SocketAddr,
    },
    /// An accepted connection's CONNECT named the server dialling it (its INFO, the `Hello`,
    /// comes later: a dialler negotiating compression holds it for a round trip).
    Connecting {
        conn: ConnId,
        id: Arc<str>,
    },
    /// The peer's own first INFO on `conn`.
    Hello {
        conn: ConnId,
        hello: Hello,
    },
    Gossip {
        conn: ConnId,
        gossip: Gossip,
    },
    Closed {
        conn: ConnId,
    },
    /// A config reload changed the pool size or the pinned accounts (the system account
    /// included; ignored without a pool).
    Reconfigure {
        pool_size: i32,
        pinned: Vec<Arc<str>>,
    },
    /// Peer `id` announced an account it pins now, or answered our announcement.
    PeerPins {
        id: Arc<str>,
    },
}

/// Why the mesh closes a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseWhy {
    /// It leads back to this server.
    SelfRoute,
    /// Another connection holds its (peer, slot).
    Duplicate,
    /// A pinned-account connection where an end has no pool (nats-server's `-ERR 'Not
    /// possible to have a dedicated route for account "X" between those servers'`).
    NoPool,
    /// A pinned-account connection for an account we do not pin.
    UnknownAccount,
    /// `route_pool_idx` out of range.
    BadPoolIdx,
    /// A pool-slot dial reached another server than the peer it was for.
    WrongPeer,
    /// Its configured seed was removed (reload).
    Removed,
    /// A reload changed the pool size (pool connections) or unpinned its account.
    Reload,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Resolve a seed; answer with `SeedResolved` or `ResolveFailed`.
    Resolve {
        seed: Arc<str>,
    },
    /// Connect to `addr`; answer with `Dialled` or `DialFailed`. Our INFO on it carries the
    /// slot (`route_pool_idx` / `route_account`) and `gossip_mode`.
    Dial {
        dial: DialId,
        addr: SocketAddr,
        url: Arc<str>,
        slot: Slot,
        mode: GossipMode,
    },
    /// `conn` now carries (peer, slot): send our interest on it. `first` when it is the
    /// first connection to that peer.
    Register {
        conn: ConnId,
        peer: Arc<str>,
        slot: Slot,
        first: bool,
    },
    Close {
        conn: ConnId,
        why: CloseWhy,
    },
    /// Send on `to` the INFO of each peer in `about` (its gossip URL as `ip`) with
    /// `gossip_mode`.
    SendGossip {
        to: ConnId,
        about: Vec<Arc<str>>,
        mode: GossipMode,
    },
    /// Send to every other pooled peer the INFO of `peer`'s connection pinned to `account`
    /// (`route_account`, gossip mode "disabled"): what makes nats-server peers open theirs.
    /// Only for a peer we announced (as nats-server forwards each connection it accepted
    /// unless it came of gossip).
    AnnouncePinned {
        peer: Arc<str>,
        account: Arc<str>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Resolve(Arc<str>),
    /// A spare connection the peer has not closed yet.
    Spare(ConnId),
    Pending(Arc<str>),
    Slots(Arc<str>),
    /// Tell the peer on this (gossip-made) connection about our other peers.
    Tell(ConnId),
    /// Dial the pinned-account connections a peer that dialled us (or that now pins an
    /// account) has still not opened.
    Pinned(Arc<str>),
}

#[derive(Clone, Debug)]
enum Origin {
    Seed(Arc<str>),
    /// Learned by gossip (or a lost gossiped route being redialled): the peer id.
    Gossip(Arc<str>),
    /// A missing pool slot of a connected peer.
    Slot(Arc<str>),
}

#[derive(Clone, Debug)]
struct Dial {
    addr: SocketAddr,
    url: Arc<str>,
    slot: Slot,
    origin: Origin,
    mode: GossipMode,
    /// When it was asked for (set by `Mesh::dial`).
    started: Duration,
}

impl Dial {
    fn claims_addr(&self) -> bool {
        !matches!(self.origin, Origin::Slot(_))
    }
}

struct Conn {
    addr: SocketAddr,
    dial: Option<Dial>,
    /// (peer, slot) once its Hello was accepted.
    at: Option<(Arc<str>, Slot)>,
    closing: bool,
    /// Why we closed it.
    why: Option<CloseWhy>,
    /// When its Hello was accepted.
    since: Duration,
    /// Accepted: the server its CONNECT named, before its Hello.
    connecting: Option<Arc<str>>,
    /// Closed by us: its dial's claim on the address is gone already.
    released: bool,
}

struct Peer {
    url: Arc<str>,
    addr: Option<SocketAddr>,
    /// The peer's `route_pool_size`.
    pool: i32,
    /// Connections by slot; the first of each is the one in use, the others were dialled by
    /// the peer, which closes all but one.
    slots: BTreeMap<Slot, Vec<ConnId>>,
    /// Slot dials in flight.
    dialing: BTreeSet<Slot>,
    /// We dialled one of its connections.
    dialled: bool,
    /// Accounts the peer refused a dedicated connection for.
    refused: BTreeSet<Arc<str>>,
    backoff: Duration,
    /// We told our other peers about it (its pinned-account connections are announced too).
    announced: bool,
    /// It is natsd (`Hello::natsd`).
    natsd: bool,
    /// Dialled after nats-server told us about it (`Pending::told_alone`).
    told_alone: bool,
}

struct Pending {
    url: Arc<str>,
    addrs: Vec<SocketAddr>,
    attempts_left: u32,
    mode: GossipMode,
    /// We have the larger id and were told about it then: its dial (which would win) may be
    /// on its way, so ours waits `defer()` from then, re-measured when the timer fires.
    deferred_from: Option<Duration>,
    /// Told about it by nats-server, which does not tell it about us: no dial of its will
    /// come, so neither ours nor our pool's waits for one.
    told_alone: bool,
}

/// Counters, for tests and monitoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub dials: u64,
    pub closes: u64,
    pub registered: u64,
}

pub struct Mesh {
    cfg: Config,
    rng: SmallRng,
    seeds: BTreeMap<Arc<str>, bool>,
    /// The wait before a seed's next resolution (grows with `connect_backoff`).
    seed_backoff: HashMap<Arc<str>, Duration>,
    conns: HashMap<ConnId, Conn>,
    dials: HashMap<DialId, Dial>,
    /// How long our latest dials took from the dial to the peer's INFO (newest last).
    handshakes: std::collections::VecDeque<Duration>,
    /// Dials in flight whose connection is to be closed as soon as it is made (their seed
    /// was removed).
    cancelled: HashSet<DialId>,
    next_dial: DialId,
    /// Addresses with a seed or gossip dial (or the connection it made) in flight.
    dialing: HashSet<SocketAddr>,
    self_addrs: HashSet<SocketAddr>,
    /// The server last found behind an address we dialled.
    addr_ids: HashMap<SocketAddr, Arc<str>>,
    peers: BTreeMap<Arc<str>, Peer>,
    pending: HashMap<Arc<str>, Pending>,
    timers: BinaryHeap<Reverse<(Duration, u64, Timer)>>,
    timer_seq: u64,
    now: Duration,
    stats: Stats,
}

impl Mesh {
    pub fn new(cfg: Config) -> Self {
        Mesh {
            rng: SmallRng::seed_from_u64(cfg.rng_seed),
            cfg,
            seeds: BTreeMap::new(),
            seed_backoff: HashMap::new(),
            conns: HashMap::new(),
            dials: HashMap::new(),
            handshakes: std::collections::VecDeque::new(),
            cancelled: HashSet::new(),
            next_dial: 1,
            dialing: HashSet::new(),
            self_addrs: HashSet::new(),
            addr_ids: HashMap::new(),
            peers: BTreeMap::new(),
            pending: HashMap::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            now: Duration::ZERO,
            stats: Stats::default(),
        }
    }

    pub fn server_id(&self) -> &Arc<str> {
        &self.cfg.server_id
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// When the mesh next needs a `Tick`.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.timers.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The connections in use: (peer, slot, connection), in order.
    pub fn routes(&self) -> Vec<(Arc<str>, Slot, ConnId)> {
        let mut v = Vec::new();
        for (id, p) in &self.peers {
            for (slot, conns) in &p.slots {
                if let Some(c) = conns.first() {
                    v.push((id.clone(), slot.clone(), *c));
                }
            }
        }
        v
    }

    /// Connections that hold a slot but are not the one in use (the peer closes them).
    pub fn spare_conns(&self) -> usize {
        let spare = |p: &Peer| p.slots.values().map(|c| c.len() - 1).sum::<usize>();
        self.peers.values().map(spare).sum()
    }

    pub fn has_peer(&self, id: &str) -> bool {
        self.peers.contains_key(id)
    }

    pub fn is_self(&self, addr: &SocketAddr) -> bool {
        self.self_addrs.contains(addr)
    }

    /// Handle one event at `now` (time since any fixed origin, never going back); the
    /// resulting actions are appended to `out`.
    pub fn handle(&mut self, ev: Event, now: Duration, out: &mut Vec<Action>) {
        self.now = self.now.max(now);
        match ev {
            Event::Tick => self.tick(out),
            Event::AddSeed { seed } => {
                if self.seeds.insert(seed.clone(), true).is_none() {
                    out.push(Action::Resolve { seed });
                }
            }
            Event::RemoveSeed { seed } => {
                self.seed_backoff.remove(&seed);
                self.remove_seed(&seed, out)
            }
            Event::SeedResolved { seed, addrs } => self.resolved(seed, Some(addrs), out),
            Event::ResolveFailed { seed } => self.resolved(seed, None, out),
            Event::DialFailed { dial } => self.dial_failed(dial),
            Event::Dialled { dial, conn } => self.dialled(dial, conn, out),
            Event::Accepted { conn, addr } => {
                self.conns.insert(
                    conn,
                    Conn {
                        addr,
                        dial: None,
                        at: None,
                        closing: false,
                        why: None,
                        since: Duration::ZERO,
                        connecting: None,
                        released: false,
                    },
                );
            }
            Event::Connecting { conn, id } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.connecting = Some(id);
                }
            }
            Event::Hello { conn, hello } => self.hello(conn, hello, out),
            Event::Gossip { conn, gossip } => self.gossip(conn, gossip),
            Event::Closed { conn } => self.closed(conn, out),
            Event::Reconfigure { pool_size, pinned } => self.reconfigure(pool_size, pinned, out),
            Event::PeerPins { id } => self.peer_pins(&id, out),
        }
    }

    fn jitter(&mut self) -> Duration {
        Duration::from_millis(self.rng.random_range(0..=JITTER_MS))
    }

    fn arm(&mut self, at: Duration, t: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, t)));
    }

    fn tick(&mut self, out: &mut Vec<Action>) {
        while let Some(Reverse((at, _, _))) = self.timers.peek() {
            if *at > self.now {
                break;
            }
            let Some(Reverse((_, _, t))) = self.timers.pop() else {
                break;
            };
            match t {
                Timer::Resolve(seed) => {
                    if self.seeds.get(&seed) == Some(&false) {
                        self.seeds.insert(seed.clone(), true);
                        out.push(Action::Resolve { seed });
                    }
                }
                Timer::Pending(id) => self.try_pending(id, out),
                Timer::Slots(id) => self.fill_slots(&id, out),
                Timer::Spare(conn) => self.spare_expired(conn, out),
                Timer::Tell(conn) => self.tell_later(conn, out),
                Timer::Pinned(id) => self.dial_missing_pinned(&id, out),
            }
        }
    }

    fn remove_seed(&mut self, seed: &Arc<str>, out: &mut Vec<Action>) {
        if self.seeds.remove(seed).is_none() {
            return;
        }
        let by_seed =
            |c: &Conn| matches!(&c.dial, Some(Dial { origin: Origin::Seed(s), .. }) if s == seed);
        // The peers that seed led to: the other connections we dialled to them (pool slots,
        // pinned accounts) go too.
        let reached: HashSet<Arc<str>> = self
            .conns
            .values()
            .filter(|c| by_seed(c))
            .filter_map(|c| c.at.as_ref().map(|(id, _)| id.clone()))
            .collect();
        let mut victims: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                !c.closing
                    && (by_seed(c)
                        || matches!(&c.dial, Some(Dial { origin: Origin::Slot(id), .. }) if reached.contains(id)))
            })
            .map(|(id, _)| *id)
            .collect();
        victims.sort_unstable();
        for c in victims {
            self.close(c, CloseWhy::Removed, out);
        }
        // Pool and pinned dials to those peers still in flight: closed once made.
        let slot_dials: Vec<DialId> = self
            .dials
            .iter()
            .filter(|(_, d)| matches!(&d.origin, Origin::Slot(id) if reached.contains(id)))
            .map(|(id, _)| *id)
            .collect();
        self.cancelled.extend(slot_dials);
    }

    fn resolved(&mut self, seed: Arc<str>, addrs: Option<Vec<SocketAddr>>, out: &mut Vec<Action>) {
        if !self.seeds.contains_key(&seed) {
            return;
        }
        self.seeds.insert(seed.clone(), false);
        let mut addrs = addrs.unwrap_or_default();
        addrs.sort_unstable();
        addrs.dedup();
        // Before claiming: does this seed already lead to a peer (or to us)?
        let reached = addrs.iter().any(|a| {
            self.self_addrs.contains(a)
                || self
                    .addr_ids
                    .get(a)
                    .is_some_and(|id| self.peers.contains_key(id))
        });
        for addr in addrs {
            if self.claim(addr) {
                let d = Dial {
                    addr,
                    url: seed.clone(),
                    slot: Slot::Pool(0),
                    origin: Origin::Seed(seed.clone()),
                    mode: GossipMode::Default,
                    started: Duration::ZERO,
                };
                self.dial(d, out);
            }
        }
        let backoff = self.cfg.connect_backoff;
        let wait = self.seed_backoff.entry(seed.clone()).or_insert(RETRY);
        let delay = if reached || !backoff {
            *wait = RETRY;
            RETRY
        } else {
            let d = *wait;
            *wait = (d * 2).min(MAX_BACKOFF);
            d
        };
        let at = self.now + delay + self.jitter();
        self.arm(at, Timer::Resolve(seed));
    }

    /// True (and `addr` taken) when it is worth dialling.
    fn claim(&mut self, addr: SocketAddr) -> bool {
        if self.self_addrs.contains(&addr) || self.dialing.contains(&addr) {
            return false;
        }
        if let Some(id) = self.addr_ids.get(&addr) {
            if self.peers.contains_key(id) {
                return false;
            }
        }
        self.dialing.insert(addr)
    }

    fn dial(&mut self, mut d: Dial, out: &mut Vec<Action>) {
        d.started = self.now;
        let dial = self.next_dial;
        self.next_dial += 1;
        self.stats.dials += 1;
        out.push(Action::Dial {
            dial,
            addr: d.addr,
            url: d.url.clone(),
            slot: d.slot.clone(),
            mode: d.mode,
        });
        self.dials.insert(dial, d);
    }

    /// A dial (or the connection it made) is over.
    fn dial_over(&mut self, d: &Dial) {
        if d.claims_addr() {
            self.dialing.remove(&d.addr);
        }
        if let Origin::Slot(id) = &d.origin {
            if let Some(p) = self.peers.get_mut(id) {
                p.dialing.remove(&d.slot);
            }
        }
    }

    fn dial_failed(&mut self, dial: DialId) {
        let Some(d) = self.dials.remove(&dial) else {
            return;
        };
        if self.cancelled.remove(&dial) {
            self.dial_over(&d);
            return;
        }
        self.dial_over(&d);
        match &d.origin {
            Origin::Seed(_) => {}
            Origin::Gossip(id) => {
                let id = id.clone();
                let Some(p) = self.pending.get_mut(&id) else {
                    return;
                };
                if p.attempts_left == 0 {
                    self.pending.remove(&id);
                } else {
                    self.arm(self.now + RETRY, Timer::Pending(id));
                }
            }
            Origin::Slot(id) => self.slot_retry(&id.clone()),
        }
    }

    fn dialled(&mut self, dial: DialId, conn: ConnId, out: &mut Vec<Action>) {
        let Some(d) = self.dials.remove(&dial) else {
            return;
        };
        let removed = matches!(&d.origin, Origin::Seed(s) if !self.seeds.contains_key(s))
            | self.cancelled.remove(&dial);
        self.conns.insert(
            conn,
            Conn {
                addr: d.addr,
                dial: Some(d),
                at: None,
                closing: false,
                why: None,
                since: Duration::ZERO,
                connecting: None,
                released: false,
            },
        );
        if removed {
            self.close(conn, CloseWhy::Removed, out);
        }
    }

    fn close(&mut self, conn: ConnId, why: CloseWhy, out: &mut Vec<Action>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            if c.closing {
                return;
            }
            c.closing = true;
            c.why = Some(why);
            // The address it dialled is free to be dialled again at once: its task may report
            // its end after a redial is due.
            if let Some(d) = c.dial.as_ref().filter(|d| d.claims_addr() && !c.released) {
                self.dialing.remove(&d.addr);
                c.released = true;
            }
        }
        self.stats.closes += 1;
        out.push(Action::Close { conn, why });
    }
}
