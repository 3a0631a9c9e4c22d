//! Deterministic simulation: many nodes run the real [`Mesh`] over an in-memory network with
//! virtual time — random start order, DNS seeds standing for many nodes, simultaneous dials,
//! per-connection FIFO delivery with random delays (so connections reorder among each other),
//! partitions and heals, kill/restart with a new server id, and mixed pool sizes with pinned
//! accounts. Every run must end in a full mesh with exactly the expected connections per pair,
//! both ends agreeing on each, no self-routes, no spare connections, and no close at all once
//! converged. `MESH_SEED=n` replays one seed; `MESH_SEEDS`/`MESH_NODES` size the sweep.

mod reload;

use super::*;
use rand::seq::SliceRandom;
use std::fmt::Write as _;

#[derive(Clone)]
struct NodeCfg {
    pool: i32,
    pinned: Vec<Arc<str>>,
    seeds: Vec<Arc<str>>,
    connect_retries: u32,
}

struct Node {
    addr: SocketAddr,
    /// `addr` as the URL INFO and gossip carry (formatted once).
    url: Arc<str>,
    gen: u32,
    id: Arc<str>,
    mesh: Option<Mesh>,
    cfg: NodeCfg,
    tick_at: Option<Duration>,
    group: u8,
}

struct SimConn {
    /// Node and generation at each end: 0 the dialler, 1 the acceptor.
    ends: [(usize, u32); 2],
    open: [bool; 2],
    broken: bool,
    slot: Slot,
    last: [Duration; 2],
    /// The dialler's INFO, held until the acceptor's has arrived (route compression is
    /// configured by default, `accept`: nats-server 2.10+ and natsd hold it).
    held: Option<Hello>,
}

enum Kind {
    Ev(Event),
    /// An event about connection end `end` (dropped once that end closed).
    ConnEv(ConnId, Event),
    /// INFOs about other servers, on connection end `end`.
    Gossip(ConnId, Vec<Gossip>),
    /// The other end's close reaches `end`.
    PeerClosed(ConnId),
    Start,
    Kill,
    Partition(Vec<u8>),
    Heal,
    /// A config reload to this pool size and these pinned accounts.
    Reload(i32, Vec<Arc<str>>),
}

struct Item {
    at: Duration,
    node: usize,
    gen: u32,
    kind: Kind,
}

struct Sim {
    rng: SmallRng,
    now: Duration,
    seq: u64,
    /// Due time, sequence and slot in `items`: the heap moves these small keys, not items.
    queue: BinaryHeap<Reverse<(Duration, u64, u32)>>,
    items: Vec<Option<Item>>,
    free: Vec<u32>,
    nodes: Vec<Node>,
    conns: Vec<SimConn>,
    /// Every server id ever, to its node (gossip names ids of dead incarnations too).
    ids: HashMap<Arc<str>, usize>,
    by_addr: HashMap<SocketAddr, usize>,
    actions: Vec<Action>,
    closes: u64,
    events: u64,
    log: Option<String>,
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

const fn end_of(conn: ConnId) -> (usize, usize) {
    ((conn / 2) as usize, (conn % 2) as usize)
}

impl Sim {
    fn push(&mut self, at: Duration, node: usize, gen: u32, kind: Kind) {
        self.seq += 1;
        let it = Item {
            at,
            node,
            gen,
            kind,
        };
        let slot = match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(it);
                i
            }
            None => {
                self.items.push(Some(it));
                (self.items.len() - 1) as u32
            }
        };
        self.queue.push(Reverse((at, self.seq, slot)));
    }

    fn delay(&mut self) -> Duration {
        // Mostly fast, sometimes slow: connections overtake each other.
        if self.rng.random_ratio(1, 10) {
            Duration::from_micros(self.rng.random_range(5_000..40_000))
        } else {
            Duration::from_micros(self.rng.random_range(100..3_000))
        }
    }

    /// Send `ev` on connection end `from` to the other end, after the messages before it.
    fn send(&mut self, from: ConnId, ev: Option<Event>) {
        let to = from ^ 1;
        let kind = match ev {
            Some(ev) => Kind::ConnEv(to, ev),
            None => Kind::PeerClosed(to),
        };
        self.send_kind(from, kind);
    }

    fn send_kind(&mut self, from: ConnId, kind: Kind) {
        let (k, e) = end_of(from);
        let d = self.delay();
        let c = &mut self.conns[k];
        if c.broken || !c.open[e] {
            return;
        }
        let at = (self.now + d).max(c.last[e]);
        c.last[e] = at;
        let (node, gen) = c.ends[1 - e];
        self.push(at, node, gen, kind);
    }

    fn alive(&self, n: usize, gen: u32) -> bool {
        self.nodes[n].gen == gen && self.nodes[n].mesh.is_some()
    }

    fn hello(&self, n: usize, slot: &Slot, mode: GossipMode) -> Hello {
        let node = &self.nodes[n];
        let (pool_idx, account) = match slot {
            Slot::Pool(i) => (*i, None),
            Slot::Account(a) => (0, Some(a.clone())),
        };
        Hello {
            id: node.id.clone(),
            url: node.url.clone(),
            addr: Some(node.addr),
            pool_size: node.cfg.pool.max(0),
            pool_idx,
            account,
            gossip_mode: mode,
            natsd: true,
        }
    }

    fn deliver(&mut self, n: usize, ev: Event) {
        self.events += 1;
        if let Some(log) = &mut self.log {
            let _ = writeln!(log, "{:?} n{n} <- {ev:?}", self.now);
        }
        let mut out = std::mem::take(&mut self.actions);
        if let Some(m) = &mut self.nodes[n].mesh {
            m.handle(ev, self.now, &mut out);
        }
        for a in out.drain(..) {
            self.act(n, a);
        }
        self.actions = out;
        self.schedule_tick(n);
    }

    fn schedule_tick(&mut self, n: usize) {
        let node = &self.nodes[n];
        let Some(d) = node.mesh.as_ref().and_then(Mesh::next_deadline) else {
            return;
        };
        // One tick pending per node, at its earliest deadline: an earlier deadline supersedes
        // the pending tick (which is dropped when it comes up, see `step`).
        let at = d.max(self.now);
        if node.tick_at.is_some_and(|t| t <= at) {
            return;
        }
        let gen = node.gen;
        self.nodes[n].tick_at = Some(at);
        self.push(at, n, gen, Kind::Ev(Event::Tick));
    }

    fn act(&mut self, n: usize, a: Action) {
        if let Some(log) = &mut self.log {
            let _ = writeln!(log, "{:?} n{n} -> {a:?}", self.now);
        }
        let gen = self.nodes[n].gen;
        match a {
            Action::Resolve { seed } => {
                let d = ms(self.rng.random_range(0..5));
                let ev = if self.rng.random_ratio(1, 20) {
                    Event::ResolveFailed { seed }
                } else if &*seed == "all" {
                    // A DNS name for the whole cluster: some answers are partial.
                    let mut addrs: Vec<SocketAddr> = self.nodes.iter().map(|x| x.addr).collect();
                    addrs.shuffle(&mut self.rng);
                    let keep = self.rng.random_range(1..=addrs.len());
                    addrs.truncate(keep);
                    Event::SeedResolved { seed, addrs }
                } else {
                    let k: usize = seed[1..].parse().unwrap_or(0);
                    let addrs = vec![self.nodes[k].addr];
                    Event::SeedResolved { seed, addrs }
                };
                self.push(self.now + d, n, gen, Kind::Ev(ev));
            }
            Action::Dial {
                dial,
                addr,
                slot,
                mode,
                ..
            } => {
                let m = self.by_addr[&addr];
                let target = &self.nodes[m];
                if target.mesh.is_none() {
                    let d = ms(self.rng.random_range(1..10));
                    self.push(self.now + d, n, gen, Kind::Ev(Event::DialFailed { dial }));
                    return;
                }
                if target.group != self.nodes[n].group {
                    self.push(
                        self.now + RETRY,
                        n,
                        gen,
                        Kind::Ev(Event::DialFailed { dial }),
                    );
                    return;
                }
                let k = self.conns.len() as u64;
                let (mgen, now) = (target.gen, self.now);
                self.conns.push(SimConn {
                    ends: [(n, gen), (m, mgen)],
                    open: [true, true],
                    broken: false,
                    slot: slot.clone(),

                    last: [now; 2],
                    held: None,
                });
                let (d_end, a_end) = (2 * k, 2 * k + 1);
                let d1 = self.delay();
                let d2 = self.delay();
                self.push(
                    now + d1,
                    n,
                    gen,
                    Kind::Ev(Event::Dialled { dial, conn: d_end }),
                );
                self.conns[k as usize].last[0] = now + d2;
                let from = SocketAddr::new(self.nodes[n].addr.ip(), 40000);
                let accepted = Event::Accepted {
                    conn: a_end,
                    addr: from,
                };
                self.push(now + d2, m, mgen, Kind::ConnEv(a_end, accepted));
                // Its CONNECT, right behind, names the dialler.
                let connecting = Event::Connecting {
                    conn: a_end,
                    id: self.nodes[n].id.clone(),
                };
                self.push(now + d2, m, mgen, Kind::ConnEv(a_end, connecting));
                // The dialler's INFO goes once the acceptor's has come
                // (it holds it: compression is negotiated first); the acceptor sends its INFO
                // when it accepts (`step`), with its settings of that moment, not before the
                // dialler learned the connection was made.
                let h = self.hello(n, &slot, mode);
                self.conns[k as usize].held = Some(h);
                self.conns[k as usize].last[1] = now + d1;
            }
            Action::Register { .. } => {}
            // For nats-server peers: natsd's mesh opens a peer's pinned connections from its
            // pool (this gossip only repeats what the peer's plain announcement said).
            Action::AnnouncePinned { .. } => {}
            Action::Close { conn, .. } => {
                let (k, e) = end_of(conn);
                if !self.conns[k].open[e] {
                    return;
                }
                self.closes += 1;
                self.send(conn, None);
                self.conns[k].open[e] = false;
                // The connection's task ends and reports it a little later (the mesh may
                // handle timers meanwhile).
                let d = self.delay();
                self.push(self.now + d, n, gen, Kind::Ev(Event::Closed { conn }));
            }
            Action::SendGossip { to, about, mode } => {
                let mut v = Vec::with_capacity(about.len());
                for id in about {
                    let Some(&m) = self.ids.get(&id) else {
                        continue;
                    };
                    let (addr, url) = (self.nodes[m].addr, self.nodes[m].url.clone());
                    v.push(Gossip {
                        id,
                        url,
                        addrs: vec![addr],
                        account: None,
                        gossip_mode: mode,
                    });
                }
                self.send_kind(to, Kind::Gossip(to ^ 1, v));
            }
        }
    }

    fn start(&mut self, n: usize) {
        if self.nodes[n].mesh.is_some() {
            self.kill(n);
        }
        let node = &mut self.nodes[n];
        node.gen += 1;
        let id: String = (0..8)
            .map(|_| char::from(b'A' + self.rng.random_range(0..26u8)))
            .collect();
        let id: Arc<str> = Arc::from(format!("{id}{n}"));
        node.id = id.clone();
        node.tick_at = None;
        let cfg = Config {
            server_id: id.clone(),
            pool_size: node.cfg.pool,
            pinned: node.cfg.pinned.clone(),
            connect_retries: node.cfg.connect_retries,
            connect_backoff: false,
            rng_seed: self.rng.random(),
        };
        node.mesh = Some(Mesh::new(cfg));
        self.ids.insert(id, n);
        for seed in self.nodes[n].cfg.seeds.clone() {
            self.deliver(n, Event::AddSeed { seed });
        }
    }

    fn kill(&mut self, n: usize) {
        self.nodes[n].mesh = None;
        let gen = self.nodes[n].gen;
        for k in 0..self.conns.len() {
            for e in 0..2 {
                if self.conns[k].ends[e] == (n, gen) && self.conns[k].open[e] {
                    // The peer sees a reset after what was already in flight.
                    self.send((2 * k + e) as ConnId, None);
                    self.conns[k].open[e] = false;
                }
            }
        }
    }

    fn partition(&mut self, groups: &[u8]) {
        for (n, g) in groups.iter().enumerate() {
            self.nodes[n].group = *g;
        }
        for k in 0..self.conns.len() {
            let c = &self.conns[k];
            let (a, b) = (c.ends[0].0, c.ends[1].0);
            if c.broken || groups[a] == groups[b] || !(c.open[0] || c.open[1]) {
                continue;
            }
            self.conns[k].broken = true;
            // Each end finds out by itself (ping timeout).
            for e in 0..2 {
                let (node, gen) = self.conns[k].ends[e];
                let d = ms(self.rng.random_range(50..2_000));
                self.push(
                    self.now + d,
                    node,
                    gen,
                    Kind::PeerClosed((2 * k + e) as ConnId),
                );
            }
        }
    }

    fn step(&mut self, it: Item) {
        self.now = it.at;
        let n = it.node;
        if let Some(log) = &mut self.log {
            match &it.kind {
                Kind::Start => writeln!(log, "{:?} n{n} START", self.now),
                Kind::Kill => writeln!(log, "{:?} n{n} KILL", self.now),
                Kind::Partition(g) => writeln!(log, "{:?} PARTITION {g:?}", self.now),
                Kind::Heal => writeln!(log, "{:?} HEAL", self.now),
                _ => Ok(()),
            }
            .unwrap_or(());
        }
        match it.kind {
            Kind::Start => self.start(n),
            Kind::Kill => self.kill(n),
            Kind::Partition(g) => self.partition(&g),
            Kind::Heal => self.partition(&vec![0; self.nodes.len()]),
            Kind::Reload(pool, pinned) => self.reload(n, pool, pinned),
            Kind::Ev(ev) => {
                if !self.alive(n, it.gen) {
                    return;
                }
                if matches!(ev, Event::Tick) {
                    if self.nodes[n].tick_at != Some(it.at) {
                        return; // superseded by an earlier one, which ran
                    }
                    self.nodes[n].tick_at = None;
                }
                self.deliver(n, ev);
            }
            Kind::ConnEv(conn, ev) => {
                let (k, e) = end_of(conn);
                if !self.alive(n, it.gen) || !self.conns[k].open[e] {
                    return;
                }
                if self.conns[k].broken && !matches!(ev, Event::Accepted { .. }) {
                    return;
                }
                // The acceptor's INFO reached the dialler: its held INFO goes out first (not
                // to itself: a route to self is closed without it).
                if let Event::Hello { hello, .. } = &ev {
                    if e == 0 && hello.id != self.nodes[n].id {
                        if let Some(h) = self.conns[k].held.take() {
                            self.send(
                                conn,
                                Some(Event::Hello {
                                    conn: conn ^ 1,
                                    hello: h,
                                }),
                            );
                        }
                    }
                }
                let accepted = matches!(ev, Event::Accepted { .. });
                self.deliver(n, ev);
                // The acceptor's INFO, on accept.
                if accepted && self.conns[k].open[e] {
                    let hello = self.hello(n, &Slot::Pool(0), GossipMode::Default);
                    self.send(
                        conn,
                        Some(Event::Hello {
                            conn: conn ^ 1,
                            hello,
                        }),
                    );
                }
            }
            Kind::Gossip(conn, v) => {
                let (k, e) = end_of(conn);
                if !self.alive(n, it.gen) || !self.conns[k].open[e] || self.conns[k].broken {
                    return;
                }
                for gossip in v {
                    self.deliver(n, Event::Gossip { conn, gossip });
                }
            }
            Kind::PeerClosed(conn) => {
                let (k, e) = end_of(conn);
                if !self.alive(n, it.gen) || !self.conns[k].open[e] {
                    return;
                }
                self.conns[k].open[e] = false;
                self.deliver(n, Event::Closed { conn });
            }
        }
    }

    fn run_until(&mut self, t: Duration) {
        while let Some(&Reverse((at, _, slot))) = self.queue.peek() {
            if at > t {
                break;
            }
            self.queue.pop();
            self.free.push(slot);
            if let Some(it) = self.items[slot as usize].take() {
                self.step(it);
            }
        }
        self.now = t;
    }

    fn expected(&self, a: usize, b: usize) -> BTreeSet<Slot> {
        let (pa, pb) = (self.nodes[a].cfg.pool, self.nodes[b].cfg.pool);
        let mut v = BTreeSet::new();
        if pa > 0 && pb > 0 {
            for i in 0..pa.max(pb) {
                v.insert(Slot::Pool(i as u16));
            }
            for acc in &self.nodes[a].cfg.pinned {
                v.insert(Slot::Account(acc.clone()));
            }
        } else {
            v.insert(Slot::Pool(0));
        }
        v
    }

    /// Full mesh, exactly the expected connections, both ends agreeing; else what is wrong.
    fn check(&self) -> Result<(), String> {
        let n = self.nodes.len();
        let mut routes: Vec<BTreeMap<(Arc<str>, Slot), ConnId>> = Vec::with_capacity(n);
        let mut registered = 0;
        for (i, node) in self.nodes.iter().enumerate() {
            let Some(m) = &node.mesh else {
                return Err(format!("n{i} is down at the end"));
            };
            if m.spare_conns() != 0 {
                return Err(format!("n{i} has {} spare connections", m.spare_conns()));
            }
            let mut map = BTreeMap::new();
            for (peer, slot, c) in m.routes() {
                if peer == node.id {
                    return Err(format!("n{i} has a route to itself"));
                }
                let Some(&j) = self.ids.get(&peer) else {
                    return Err(format!("n{i} has a route to unknown {peer}"));
                };
                if self.nodes[j].id != peer {
                    return Err(format!("n{i} keeps a route to n{j}'s old id {peer}"));
                }
                let (k, e) = end_of(c);
                if !self.conns[k].open[e] || self.conns[k].ends[e] != (i, node.gen) {
                    return Err(format!("n{i} uses closed or foreign conn {c}"));
                }
                map.insert((peer, slot), c);
                registered += 1;
            }
            routes.push(map);
        }
        for a in 0..n {
            for b in 0..n {
                if a == b {
                    continue;
                }
                let want = self.expected(a, b);
                let idb = &self.nodes[b].id;
                let got: BTreeSet<Slot> = routes[a]
                    .keys()
                    .filter(|(p, _)| p == idb)
                    .map(|(_, s)| s.clone())
                    .collect();
                if got != want {
                    return Err(format!("n{a}→n{b}: slots {got:?}, want {want:?}"));
                }
                for s in want {
                    let ca = routes[a][&(idb.clone(), s.clone())];
                    let cb = routes[b][&(self.nodes[a].id.clone(), s.clone())];
                    if ca ^ 1 != cb {
                        return Err(format!("n{a}/n{b} {s:?}: ends disagree ({ca} vs {cb})"));
                    }
                    let c = &self.conns[end_of(ca).0];
                    if c.slot != s {
                        return Err(format!("n{a}/n{b}: conn {ca} dialled for {:?}", c.slot));
                    }
                }
            }
        }
        let open = self.conns.iter().filter(|c| c.open[0] || c.open[1]).count();
        if open * 2 != registered {
            return Err(format!("{open} open connections, {registered} route ends"));
        }
        Ok(())
    }
}

/// What one seed builds and how it went.
struct Outcome {
    result: Result<(), String>,
    closes: u64,
    events: u64,
    desc: String,
}

/// `reloads`: instead of faults, every node reloads its pool size and pinned accounts once
/// (a rolling reload to one new configuration).
fn run_with(seed: u64, nodes: usize, log: bool, reloads: bool) -> Outcome {
    let mut rng = SmallRng::seed_from_u64(seed);
    let seeding = rng.random_range(0..4);
    let pools = rng.random_range(0..3);
    let pinned: Vec<Arc<str>> = if rng.random_bool(0.5) {
        vec![Arc::from("$SYS")]
    } else {
        vec![Arc::from("$SYS"), Arc::from("A")]
    };
    let mut cfgs = Vec::with_capacity(nodes);
    for i in 0..nodes {
        let pool = match pools {
            0 => -1,
            1 => 3,
            _ => [-1, 2, 3][rng.random_range(0..3)],
        };
        let seeds: Vec<Arc<str>> = match seeding {
            0 => vec![Arc::from("all")],
            1 => vec![Arc::from("n0")],
            2 => vec![Arc::from(format!("n{}", rng.random_range(0..i.max(1))))],
            // A few seeds each, one of them an earlier node (so the seed graph is connected).
            _ => {
                let mut v: Vec<Arc<str>> = (0..rng.random_range(0..3))
                    .map(|_| Arc::from(format!("n{}", rng.random_range(0..nodes))))
                    .collect();
                v.push(Arc::from(format!("n{}", rng.random_range(0..i.max(1)))));
                v.sort();
                v.dedup();
                v
            }
        };
        cfgs.push(NodeCfg {
            pool,
            pinned: if pool > 0 { pinned.clone() } else { Vec::new() },
            seeds,
            connect_retries: rng.random_range(0..3),
        });
    }
    let mut sim = Sim {
        rng: SmallRng::seed_from_u64(seed ^ 0x5eed),
        now: Duration::ZERO,
        seq: 0,
        queue: BinaryHeap::new(),
        items: Vec::new(),
        free: Vec::new(),
        nodes: Vec::with_capacity(nodes),
        conns: Vec::new(),
        ids: HashMap::new(),
        by_addr: HashMap::new(),
        actions: Vec::new(),
        closes: 0,
        events: 0,
        log: log.then(String::new),
    };
    for (i, cfg) in cfgs.into_iter().enumerate() {
        let addr = SocketAddr::from(([10, 0, (i / 250) as u8, (i % 250) as u8 + 1], 6222));
        sim.by_addr.insert(addr, i);
        sim.nodes.push(Node {
            addr,
            url: Arc::from(addr.to_string()),
            gen: 0,
            id: Arc::from(""),
            mesh: None,
            cfg,
            tick_at: None,
            group: 0,
        });
    }
    for i in 0..nodes {
        let at = ms(rng.random_range(0..1_000));
        sim.push(at, i, 0, Kind::Start);
    }
    // Faults: partitions that heal, kills followed by a restart under a new id.
    let mut last = ms(1_000);
    let faults = if reloads {
        last = reload::schedule(&mut sim, &mut rng);
        0
    } else {
        rng.random_range(0..3)
    };
    for _ in 0..faults {
        let at = ms(rng.random_range(300..6_000));
        let heal = at + ms(rng.random_range(200..3_000));
        let groups: Vec<u8> = (0..nodes).map(|_| rng.random_range(0..2)).collect();
        sim.push(at, 0, 0, Kind::Partition(groups));
        sim.push(heal, 0, 0, Kind::Heal);
        last = last.max(heal);
    }
    let kills = if reloads { 0 } else { rng.random_range(0..4) };
    for _ in 0..kills {
        let n = rng.random_range(0..nodes);
        let at = ms(rng.random_range(1_100..6_000));
        let back = at + ms(rng.random_range(100..2_000));
        sim.push(at, n, 0, Kind::Kill);
        sim.push(back, n, 0, Kind::Start);
        last = last.max(back);
    }
    let desc = format!(
        "{nodes} nodes, seeding {seeding}, pools {pools}, pinned {pinned:?}, faults until {last:?}"
    );
    // Converged within 30 s of the last fault, then 20 s more without a single close.
    sim.run_until(last + Duration::from_secs(30));
    let mut result = sim.check();
    let closes = sim.closes;
    if result.is_ok() {
        sim.run_until(last + Duration::from_secs(50));
        if sim.closes != closes {
            result = Err(format!("{} closes after convergence", sim.closes - closes));
        } else {
            result = sim.check();
        }
    }
    if let (Some(path), Some(log)) = (std::env::var_os("MESH_LOG"), &sim.log) {
        let _ = std::fs::write(path, log);
    }
    Outcome {
        result,
        closes,
        events: sim.events,
        desc,
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Run `seeds` seeds of `nodes` nodes on a few threads; every failure says how to replay it.
fn sweep(seeds: u64, nodes: usize) {
    sweep_with(seeds, nodes, false)
}

fn sweep_with(seeds: u64, nodes: usize, reloads: bool) {
    if let Ok(s) = std::env::var("MESH_SEED") {
        let seed: u64 = s.parse().unwrap_or(0);
        let o = run_with(seed, nodes, std::env::var("MESH_LOG").is_ok(), reloads);
        assert!(o.result.is_ok(), "seed {seed} ({}): {:?}", o.desc, o.result);
        return;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4)) as u64;
    let results: Vec<(Vec<String>, u64, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let (mut failures, mut closes, mut events) = (Vec::new(), 0, 0);
                    for seed in (t..seeds).step_by(threads as usize) {
                        let o = run_with(seed, nodes, false, reloads);
                        closes += o.closes;
                        events += o.events;
                        if let Err(e) = o.result {
                            failures.push(format!(
                                "seed {seed} ({}): {e}\n  replay: MESH_SEED={seed} \
                                 MESH_NODES={nodes} [MESH_LOG=/tmp/mesh.log] cargo test --lib \
                                 cluster::mesh::sim",
                                o.desc
                            ));
                        }
                    }
                    (failures, closes, events)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (vec!["a thread panicked".into()], 0, 0))
            })
            .collect()
    });
    let mut failures: Vec<String> = Vec::new();
    let (mut closes, mut events) = (0, 0);
    for (f, c, e) in results {
        failures.extend(f);
        closes += c;
        events += e;
    }
    eprintln!("{seeds} seeds × {nodes} nodes: {events} events, {closes} closes");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 1,000 seeds of 10 nodes (`MESH_SEEDS`, `MESH_NODES` to change).
#[test]
fn mesh_converges_under_faults() {
    sweep(env("MESH_SEEDS", 1000), env("MESH_NODES", 10) as usize);
}

/// 50 nodes: 8 seeds in debug; the full 1,000 × 50 sweep is
/// `MESH_SEEDS_50=1000 cargo test --release --lib cluster::mesh::sim::fifty`.
#[test]
fn fifty_nodes_converge_under_faults() {
    if std::env::var("MESH_SEED").is_ok() {
        return;
    }
    sweep(env("MESH_SEEDS_50", 8), 50);
}
