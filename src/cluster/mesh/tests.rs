//! The mesh's rules, one at a time.

use super::*;

mod gossip;
mod reload;
mod storm;

fn cfg(id: &str, pool: i32) -> Config {
    Config {
        server_id: Arc::from(id),
        pool_size: pool,
        pinned: if pool > 0 {
            vec![Arc::from("$SYS")]
        } else {
            Vec::new()
        },
        connect_retries: 1,
        connect_backoff: false,
        rng_seed: 7,
    }
}

fn addr(n: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, n], 6222))
}

fn hello(id: &str, pool: i32) -> Hello {
    Hello {
        id: Arc::from(id),
        url: Arc::from("x"),
        addr: Some(addr(9)),
        pool_size: pool,
        natsd: true,
        ..Default::default()
    }
}

/// An accepted connection `conn` on which `h` arrives at `now_ms`.
fn accepted(m: &mut Mesh, conn: ConnId, h: Hello, now_ms: u64) -> Vec<Action> {
    step(
        m,
        Event::Accepted {
            conn,
            addr: addr(conn as u8),
        },
        now_ms,
    );
    step(m, Event::Hello { conn, hello: h }, now_ms)
}

fn step(m: &mut Mesh, ev: Event, now_ms: u64) -> Vec<Action> {
    let mut out = Vec::new();
    m.handle(ev, Duration::from_millis(now_ms), &mut out);
    out
}

fn dials(out: &[Action]) -> Vec<(DialId, SocketAddr, Slot)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Dial {
                dial, addr, slot, ..
            } => Some((*dial, *addr, slot.clone())),
            _ => None,
        })
        .collect()
}

/// Ticks `m` through every deadline up to `until` ms; returns the dials it asked for.
fn run_until(m: &mut Mesh, until: u64) -> Vec<(DialId, SocketAddr, Slot)> {
    let mut all = Vec::new();
    while let Some(t) = m.next_deadline() {
        let now = t.as_millis() as u64;
        if now > until {
            break;
        }
        all.extend(dials(&step(m, Event::Tick, now)));
    }
    all
}

fn seed(m: &mut Mesh, addrs: Vec<SocketAddr>) -> Vec<Action> {
    let s: Arc<str> = Arc::from("s");
    let out = step(m, Event::AddSeed { seed: s.clone() }, 0);
    assert_eq!(out, vec![Action::Resolve { seed: s.clone() }]);
    step(m, Event::SeedResolved { seed: s, addrs }, 0)
}

#[test]
fn seeds_are_resolved_every_second_and_each_address_dialled_once() {
    let mut m = Mesh::new(cfg("B", -1));
    let out = seed(&mut m, vec![addr(1), addr(2), addr(1)]);
    assert_eq!(dials(&out).len(), 2);
    let next = m.next_deadline().expect("a resolve timer");
    assert!(next >= RETRY && next <= RETRY + Duration::from_millis(100));
    let out = step(&mut m, Event::Tick, next.as_millis() as u64);
    assert_eq!(
        out,
        vec![Action::Resolve {
            seed: Arc::from("s")
        }]
    );
    // Both dials still in flight: nothing new.
    let out = step(
        &mut m,
        Event::SeedResolved {
            seed: Arc::from("s"),
            addrs: vec![addr(1), addr(2)],
        },
        next.as_millis() as u64,
    );
    assert!(dials(&out).is_empty());
}

#[test]
fn an_address_that_led_to_ourselves_is_never_dialled_again() {
    let mut m = Mesh::new(cfg("B", -1));
    let out = seed(&mut m, vec![addr(1)]);
    let (d, _, _) = dials(&out)[0].clone();
    step(&mut m, Event::Dialled { dial: d, conn: 1 }, 1);
    let out = step(
        &mut m,
        Event::Hello {
            conn: 1,
            hello: hello("B", 0),
        },
        2,
    );
    assert_eq!(
        out,
        vec![Action::Close {
            conn: 1,
            why: CloseWhy::SelfRoute
        }]
    );
    step(&mut m, Event::Closed { conn: 1 }, 3);
    assert!(m.is_self(&addr(1)));
    let out = step(
        &mut m,
        Event::SeedResolved {
            seed: Arc::from("s"),
            addrs: vec![addr(1)],
        },
        1500,
    );
    assert!(dials(&out).is_empty());
}

/// A and B dial each other at once: both ends keep the one dialled by A (smaller id).
#[test]
fn both_ends_keep_the_connection_dialled_by_the_smaller_id() {
    for order in [false, true] {
        let mut a = Mesh::new(cfg("A", -1));
        let mut b = Mesh::new(cfg("B", -1));
        let da = dials(&seed(&mut a, vec![addr(2)]))[0].0;
        let db = dials(&seed(&mut b, vec![addr(1)]))[0].0;
        // conn 10: A→B, conn 20: B→A (numbered per end: A sees 10 and 21, B sees 11 and 20).
        step(&mut a, Event::Dialled { dial: da, conn: 10 }, 1);
        step(&mut b, Event::Dialled { dial: db, conn: 20 }, 1);
        step(
            &mut b,
            Event::Accepted {
                conn: 11,
                addr: addr(1),
            },
            1,
        );
        step(
            &mut a,
            Event::Accepted {
                conn: 21,
                addr: addr(2),
            },
            1,
        );
        let (first_a, second_a) = if order { (10, 21) } else { (21, 10) };
        let (first_b, second_b) = if order { (20, 11) } else { (11, 20) };
        let mut all = Vec::new();
        all.extend(step(
            &mut a,
            Event::Hello {
                conn: first_a,
                hello: hello("B", 0),
            },
            2,
        ));
        all.extend(step(
            &mut a,
            Event::Hello {
                conn: second_a,
                hello: hello("B", 0),
            },
            3,
        ));
        all.extend(step(
            &mut b,
            Event::Hello {
                conn: first_b,
                hello: hello("A", 0),
            },
            2,
        ));
        all.extend(step(
            &mut b,
            Event::Hello {
                conn: second_b,
                hello: hello("A", 0),
            },
            3,
        ));
        let a_routes: Vec<ConnId> = a.routes().iter().map(|r| r.2).collect();
        let b_routes: Vec<ConnId> = b.routes().iter().map(|r| r.2).collect();
        assert_eq!(a_routes, vec![10]);
        assert_eq!(b_routes, vec![11]);
        let closes = all
            .iter()
            .filter(|x| {
                matches!(
                    x,
                    Action::Close {
                        why: CloseWhy::Duplicate,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(closes, 2, "{all:?}");
    }
}

/// Two connections dialled by the same server: it closes the newer, the other end waits.
#[test]
fn the_dialler_of_two_duplicates_closes_the_newer() {
    let mut a = Mesh::new(cfg("A", -1));
    let ds = dials(&seed(&mut a, vec![addr(2), addr(3)]));
    step(
        &mut a,
        Event::Dialled {
            dial: ds[0].0,
            conn: 1,
        },
        1,
    );
    step(
        &mut a,
        Event::Dialled {
            dial: ds[1].0,
            conn: 2,
        },
        1,
    );
    step(
        &mut a,
        Event::Hello {
            conn: 2,
            hello: hello("B", 0),
        },
        2,
    );
    let out = step(
        &mut a,
        Event::Hello {
            conn: 1,
            hello: hello("B", 0),
        },
        3,
    );
    assert_eq!(
        out,
        vec![Action::Close {
            conn: 1,
            why: CloseWhy::Duplicate
        }]
    );
    // The acceptor keeps both until then, and switches when the one in use closes.
    let mut b = Mesh::new(cfg("B", -1));
    step(
        &mut b,
        Event::Accepted {
            conn: 7,
            addr: addr(1),
        },
        0,
    );
    step(
        &mut b,
        Event::Accepted {
            conn: 8,
            addr: addr(1),
        },
        0,
    );
    let out = step(
        &mut b,
        Event::Hello {
            conn: 7,
            hello: hello("A", 0),
        },
        1,
    );
    assert!(matches!(
        out[0],
        Action::Register {
            conn: 7,
            first: true,
            ..
        }
    ));
    let out = step(
        &mut b,
        Event::Hello {
            conn: 8,
            hello: hello("A", 0),
        },
        1,
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(b.spare_conns(), 1);
    let out = step(&mut b, Event::Closed { conn: 7 }, 2);
    assert!(matches!(
        out[0],
        Action::Register {
            conn: 8,
            first: false,
            ..
        }
    ));
    assert_eq!(b.spare_conns(), 0);
}

#[test]
fn a_pooled_dialler_opens_the_other_slots_after_the_first() {
    let mut a = Mesh::new(cfg("A", 3));
    let d = dials(&seed(&mut a, vec![addr(2)]))[0].0;
    step(&mut a, Event::Dialled { dial: d, conn: 1 }, 1);
    let out = step(
        &mut a,
        Event::Hello {
            conn: 1,
            hello: hello("B", 2),
        },
        2,
    );
    let slots: Vec<Slot> = dials(&out).into_iter().map(|x| x.2).collect();
    // Mismatch tolerated: the larger pool (3), plus the pinned system account.
    assert_eq!(
        slots,
        vec![
            Slot::Pool(1),
            Slot::Pool(2),
            Slot::Account(Arc::from("$SYS"))
        ]
    );
    // Against a peer without a pool: one route, nothing more.
    let mut a = Mesh::new(cfg("A", 3));
    let d = dials(&seed(&mut a, vec![addr(2)]))[0].0;
    step(&mut a, Event::Dialled { dial: d, conn: 1 }, 1);
    let out = step(
        &mut a,
        Event::Hello {
            conn: 1,
            hello: hello("B", 0),
        },
        2,
    );
    assert!(dials(&out).is_empty());
}

#[test]
fn a_server_without_pool_refuses_a_pinned_account_connection() {
    let mut b = Mesh::new(cfg("B", -1));
    step(
        &mut b,
        Event::Accepted {
            conn: 1,
            addr: addr(1),
        },
        0,
    );
    let mut h = hello("A", 3);
    h.account = Some(Arc::from("$SYS"));
    let out = step(&mut b, Event::Hello { conn: 1, hello: h }, 1);
    assert_eq!(
        out,
        vec![Action::Close {
            conn: 1,
            why: CloseWhy::NoPool
        }]
    );
}

#[test]
fn gossip_is_dialled_after_jitter_and_retried_connect_retries_times() {
    let mut a = Mesh::new(cfg("A", -1));
    step(
        &mut a,
        Event::Accepted {
            conn: 1,
            addr: addr(2),
        },
        0,
    );
    step(
        &mut a,
        Event::Hello {
            conn: 1,
            hello: hello("B", 0),
        },
        0,
    );
    let g = Gossip {
        id: Arc::from("C"),
        url: Arc::from("c"),
        addrs: vec![addr(3)],
        ..Default::default()
    };
    assert!(step(
        &mut a,
        Event::Gossip {
            conn: 1,
            gossip: g.clone()
        },
        0
    )
    .is_empty());
    // A gossip storm about the same server changes nothing.
    assert!(step(&mut a, Event::Gossip { conn: 1, gossip: g }, 0).is_empty());
    let mut attempts = 0;
    let mut now = 0;
    while let Some(t) = a.next_deadline() {
        now = now.max(t.as_millis() as u64);
        for (d, _, _) in dials(&step(&mut a, Event::Tick, now)) {
            attempts += 1;
            step(&mut a, Event::DialFailed { dial: d }, now);
        }
        if now > 10_000 {
            break;
        }
    }
    assert_eq!(attempts, 2, "one attempt plus connect_retries (1)");
}

#[test]
fn connect_backoff_doubles_a_failing_seeds_wait_to_thirty_seconds() {
    let s: Arc<str> = Arc::from("s");
    for (backoff, want) in [
        (true, vec![1u64, 2, 4, 8, 16, 30, 30]),
        (false, vec![1, 1, 1, 1, 1, 1, 1]),
    ] {
        let mut m = Mesh::new(Config {
            connect_backoff: backoff,
            ..cfg("B", -1)
        });
        step(&mut m, Event::AddSeed { seed: s.clone() }, 0);
        let mut now = 0u64;
        let mut waits = Vec::new();
        for _ in 0..want.len() {
            // Nothing answers there: every resolution fails.
            step(&mut m, Event::ResolveFailed { seed: s.clone() }, now);
            let next = m.next_deadline().expect("a resolve timer").as_millis() as u64;
            waits.push((next - now) / 1000);
            now = next;
            let out = step(&mut m, Event::Tick, now);
            assert_eq!(out, vec![Action::Resolve { seed: s.clone() }]);
        }
        assert_eq!(waits, want, "connect_backoff {backoff}");
    }
}

/// A (smaller id) is first reached by B's connection, then its own dial to B lands and wins
/// slot 0: A dialled the surviving slot, so A dials the rest of the pool, at the address its
/// dial reached (B's INFO and its connection's source may name another).
#[test]
fn the_end_whose_dial_wins_slot_zero_late_fills_the_pool_where_it_dialled() {
    let mut m = Mesh::new(cfg("A", 3));
    let out = seed(&mut m, vec![addr(2)]);
    let (d, _, _) = dials(&out)[0].clone();
    step(
        &mut m,
        Event::Accepted {
            conn: 1,
            addr: addr(9),
        },
        1,
    );
    let out = step(
        &mut m,
        Event::Hello {
            conn: 1,
            hello: hello("B", 3),
        },
        2,
    );
    assert!(dials(&out).is_empty(), "not ours to fill: {out:?}");
    step(&mut m, Event::Dialled { dial: d, conn: 2 }, 3);
    let out = step(
        &mut m,
        Event::Hello {
            conn: 2,
            hello: hello("B", 3),
        },
        4,
    );
    assert!(out.contains(&Action::Close {
        conn: 1,
        why: CloseWhy::Duplicate
    }));
    // Where our own dial reached B, not where B's first INFO (addr(9)) suggested.
    assert_eq!(
        dials(&out)
            .into_iter()
            .map(|(_, a, s)| (a, s))
            .collect::<Vec<_>>(),
        vec![
            (addr(2), Slot::Pool(1)),
            (addr(2), Slot::Pool(2)),
            (addr(2), Slot::Account(Arc::from("$SYS")))
        ],
        "{out:?}"
    );
}

/// A seed removed (reload) while the pool it led to is still being dialled: the pool's
/// connections in flight are closed as they land and never dialled again, so no route to
/// the peer survives the removal.
#[test]
fn removing_a_seed_cancels_the_pool_dials_in_flight() {
    let mut m = Mesh::new(cfg("A", 3));
    let out = seed(&mut m, vec![addr(2)]);
    let (d, _, _) = dials(&out)[0].clone();
    step(&mut m, Event::Dialled { dial: d, conn: 1 }, 1);
    let out = step(
        &mut m,
        Event::Hello {
            conn: 1,
            hello: hello("B", 3),
        },
        2,
    );
    let slots = dials(&out);
    assert_eq!(slots.len(), 3, "{out:?}");
    let out = step(
        &mut m,
        Event::RemoveSeed {
            seed: Arc::from("s"),
        },
        3,
    );
    assert_eq!(
        out,
        vec![Action::Close {
            conn: 1,
            why: CloseWhy::Removed
        }]
    );
    // One slot dial connects, one fails, one connects later.
    let out = step(
        &mut m,
        Event::Dialled {
            dial: slots[0].0,
            conn: 2,
        },
        4,
    );
    assert_eq!(
        out,
        vec![Action::Close {
            conn: 2,
            why: CloseWhy::Removed
        }]
    );
    let out = step(&mut m, Event::DialFailed { dial: slots[1].0 }, 5);
    assert!(out.is_empty(), "{out:?}");
    step(&mut m, Event::Closed { conn: 1 }, 6);
    step(&mut m, Event::Closed { conn: 2 }, 6);
    let out = step(
        &mut m,
        Event::Dialled {
            dial: slots[2].0,
            conn: 3,
        },
        7,
    );
    assert_eq!(
        out,
        vec![Action::Close {
            conn: 3,
            why: CloseWhy::Removed
        }]
    );
    step(&mut m, Event::Closed { conn: 3 }, 8);
    // Nothing redials B afterwards.
    let mut t = 8;
    while let Some(next) = m.next_deadline() {
        t = t.max(next.as_millis() as u64);
        let out = step(&mut m, Event::Tick, t);
        assert!(dials(&out).is_empty(), "redialled at {t} ms: {out:?}");
        if t > 120_000 {
            break;
        }
    }
}

/// A pool dial that connects but closes before its handshake (a handshake timeout during a
/// storm) is tried again: the pool is filled in the end.
#[test]
fn a_pool_connection_lost_before_its_handshake_is_dialled_again() {
    let mut m = Mesh::new(cfg("A", 3));
    let out = seed(&mut m, vec![addr(2)]);
    let (d, _, _) = dials(&out)[0].clone();
    step(&mut m, Event::Dialled { dial: d, conn: 1 }, 1);
    let out = step(
        &mut m,
        Event::Hello {
            conn: 1,
            hello: hello("B", 3),
        },
        2,
    );
    let slots = dials(&out);
    assert_eq!(slots.len(), 3, "{out:?}");
    let (lost, _, lost_slot) = slots[0].clone();
    step(
        &mut m,
        Event::Dialled {
            dial: lost,
            conn: 2,
        },
        3,
    );
    step(&mut m, Event::Closed { conn: 2 }, 4);
    let mut t = 4;
    let mut again = Vec::new();
    while again.is_empty() && t < 60_000 {
        let Some(next) = m.next_deadline() else { break };
        t = t.max(next.as_millis() as u64);
        again = dials(&step(&mut m, Event::Tick, t));
    }
    assert_eq!(
        again
            .iter()
            .map(|(_, a, s)| (*a, s.clone()))
            .collect::<Vec<_>>(),
        vec![(addr(2), lost_slot)],
        "at {t} ms"
    );
}

fn nats_server_hello(id: &str) -> Hello {
    Hello {
        natsd: false,
        ..hello(id, 0)
    }
}

fn closes(out: &[Action]) -> Vec<ConnId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Close { conn, .. } => Some(*conn),
            _ => None,
        })
        .collect()
}

/// nats-server closes the duplicate it registered last, by its own order of events: had we
/// closed one too (by the smaller-id rule: here our own dial), the pair could be left with
/// none (tests/reload_routes.rs saw it after a pool-size reload). Both are kept until the
/// peer closes one, whichever it is, and the survivor carries the route.
#[test]
fn a_nats_server_peer_picks_which_duplicate_survives() {
    for peer_keeps in [1, 2] {
        let mut a = Mesh::new(cfg("A", -1));
        let ds = dials(&seed(&mut a, vec![addr(2)]));
        let dialled = Event::Dialled {
            dial: ds[0].0,
            conn: 1,
        };
        step(&mut a, dialled, 1);
        let hello = Event::Hello {
            conn: 1,
            hello: nats_server_hello("B"),
        };
        step(&mut a, hello, 2);
        let out = accepted(&mut a, 2, nats_server_hello("B"), 3);
        assert!(closes(&out).is_empty(), "{out:?}");
        assert_eq!(a.spare_conns(), 1);
        let gone = 3 - peer_keeps;
        let out = step(&mut a, Event::Closed { conn: gone }, 4);
        assert!(closes(&out).is_empty(), "{out:?}");
        assert_eq!(
            a.routes(),
            vec![(Arc::from("B"), Slot::Pool(0), peer_keeps)]
        );
        assert_eq!(a.spare_conns(), 0);
        // Nothing closes later either.
        let later = step(&mut a, Event::Tick, 4 + PEER_CLOSES.as_millis() as u64 + 1);
        assert!(closes(&later).is_empty(), "{later:?}");
    }
}

/// A peer that closes neither (not what nats-server does) loses the spare in time.
#[test]
fn a_spare_the_nats_server_peer_never_closes_goes_in_time() {
    let mut a = Mesh::new(cfg("A", -1));
    accepted(&mut a, 1, nats_server_hello("B"), 0);
    let out = accepted(&mut a, 2, nats_server_hello("B"), 1);
    assert!(closes(&out).is_empty(), "{out:?}");
    let early = step(&mut a, Event::Tick, PEER_CLOSES.as_millis() as u64 - 10);
    assert!(closes(&early).is_empty(), "{early:?}");
    let out = step(&mut a, Event::Tick, PEER_CLOSES.as_millis() as u64 + 2);
    assert_eq!(closes(&out), vec![2]);
    assert_eq!(a.routes(), vec![(Arc::from("B"), Slot::Pool(0), 1)]);
}
