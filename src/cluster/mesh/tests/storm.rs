//! The rules against duplicate-route churn when a storm of starting nodes slows handshakes:
//! the larger id's wait, a peer's dial in its handshake, a gossiped pool filled late.

use super::*;

/// `m` accepted B (pool `b_pool`) at 0 ms; returns B's gossip about C (at 10.0.0.3).
fn connected_to_b_told_about_c(m: &mut Mesh, b_pool: i32) -> Gossip {
    step(
        m,
        Event::Accepted {
            conn: 1,
            addr: addr(2),
        },
        0,
    );
    step(
        m,
        Event::Hello {
            conn: 1,
            hello: hello("B", b_pool),
        },
        0,
    );
    Gossip {
        id: Arc::from("C"),
        url: Arc::from("c"),
        addrs: vec![addr(3)],
        ..Default::default()
    }
}

/// Tick `z`'s deadlines until it dials C (10.0.0.3): the dial and when (ms).
fn dial_to_c(z: &mut Mesh) -> (DialId, u64) {
    loop {
        let t = z.next_deadline().expect("a dial to C");
        let now = t.as_millis() as u64;
        let d = dials(&step(z, Event::Tick, now));
        if let Some(d) = d.into_iter().find(|d| d.1 == addr(3)) {
            return (d.0, now);
        }
        assert!(now < 10_000, "C never dialled");
    }
}

/// Z (the larger id) and C were both told about each other; Z's deferred dial reached C first.
/// Returns Z's mesh with its gossip dial registered at `t` ms (no pool dials yet) and `t`.
fn larger_end_holding_slot_zero_by_gossip() -> (Mesh, u64) {
    let mut z = Mesh::new(cfg("Z", 3));
    let g = connected_to_b_told_about_c(&mut z, 3);
    step(&mut z, Event::Gossip { conn: 1, gossip: g }, 0);
    let (dial, now) = dial_to_c(&mut z);
    assert!(
        now >= DEFER_TO_SMALLER.as_millis() as u64,
        "the larger id defers"
    );
    step(&mut z, Event::Dialled { dial, conn: 2 }, now);
    let out = step(
        &mut z,
        Event::Hello {
            conn: 2,
            hello: hello("C", 3),
        },
        now,
    );
    assert!(
        dials(&out).is_empty(),
        "the losing end of a likely race does not fill its pool at once: {out:?}"
    );
    (z, now)
}

#[test]
fn the_larger_id_fills_a_gossiped_pool_only_if_its_connection_keeps_slot_zero() {
    // The smaller id's dial arrives: it wins slot 0 and Z opens no pool connection of its own
    // (each would be closed as a duplicate of C's).
    let (mut z, t) = larger_end_holding_slot_zero_by_gossip();
    step(
        &mut z,
        Event::Accepted {
            conn: 3,
            addr: addr(3),
        },
        t + 300,
    );
    let out = step(
        &mut z,
        Event::Hello {
            conn: 3,
            hello: hello("C", 3),
        },
        t + 300,
    );
    assert!(out.contains(&Action::Close {
        conn: 2,
        why: CloseWhy::Duplicate
    }));
    let later = run_until(&mut z, t + 10_000);
    assert!(
        later.iter().all(|d| d.1 != addr(3)),
        "no pool dials to C: {later:?}"
    );

    // Nothing comes from C: once the slot has been held for DEFER_TO_SMALLER, Z fills it.
    let (mut z, t) = larger_end_holding_slot_zero_by_gossip();
    let later = run_until(&mut z, t + 10_000);
    let slots: Vec<Slot> = later
        .into_iter()
        .filter(|d| d.1 == addr(3))
        .map(|d| d.2)
        .collect();
    assert_eq!(
        slots,
        vec![
            Slot::Pool(1),
            Slot::Pool(2),
            Slot::Account(Arc::from("$SYS"))
        ]
    );
}

/// Z (larger id, no pool) accepted B at 0 ms and is told about C by B at `told` ms.
fn larger_told_about_c(told: u64) -> Mesh {
    let mut z = Mesh::new(cfg("Z", -1));
    let g = connected_to_b_told_about_c(&mut z, 0);
    step(&mut z, Event::Gossip { conn: 1, gossip: g }, told);
    z
}

/// When (ms) Z first dials C, ticking every deadline up to 60 s.
fn first_dial_to_c(z: &mut Mesh) -> Option<u64> {
    while let Some(t) = z.next_deadline() {
        let now = t.as_millis() as u64;
        if now > 60_000 {
            return None;
        }
        if dials(&step(z, Event::Tick, now))
            .iter()
            .any(|d| d.1 == addr(3))
        {
            return Some(now);
        }
    }
    None
}

#[test]
fn the_larger_ids_wait_grows_with_slow_handshakes() {
    // Fast handshakes: the wait is DEFER_TO_SMALLER (plus jitter).
    let mut z = larger_told_about_c(0);
    let at = first_dial_to_c(&mut z).expect("dialled");
    assert!((2_000..2_200).contains(&at), "dialled at {at} ms");

    // Z's own dials took 1.5 s from dial to INFO (a storm on a busy machine): three times
    // that, measured when the timer fires.
    let mut z = larger_told_about_c(0);
    let d = dials(&seed(&mut z, vec![addr(5)]))[0].0;
    step(&mut z, Event::Dialled { dial: d, conn: 9 }, 10);
    step(
        &mut z,
        Event::Hello {
            conn: 9,
            hello: hello("D", 0),
        },
        1_500,
    );
    let at = first_dial_to_c(&mut z).expect("dialled");
    assert!((4_500..4_700).contains(&at), "dialled at {at} ms");
}

#[test]
fn the_larger_id_does_not_cross_a_dial_of_the_peer_in_its_handshake() {
    let mut z = larger_told_about_c(0);
    // C's dial reached Z and its CONNECT named C; its INFO is a round trip away.
    step(
        &mut z,
        Event::Accepted {
            conn: 2,
            addr: addr(7),
        },
        1_000,
    );
    step(
        &mut z,
        Event::Connecting {
            conn: 2,
            id: Arc::from("C"),
        },
        1_000,
    );
    // Z's deferred dial comes due while that handshake is still going: it waits again.
    let mut now = 0;
    while let Some(t) = z.next_deadline() {
        now = t.as_millis() as u64;
        if now > 5_000 {
            break;
        }
        let out = step(&mut z, Event::Tick, now);
        assert!(
            dials(&out).iter().all(|d| d.1 != addr(3)),
            "dialled C across its own dial at {now} ms"
        );
    }
    // The handshake fails (C's connection closes before its INFO): Z dials C after all.
    step(&mut z, Event::Closed { conn: 2 }, now);
    assert!(first_dial_to_c(&mut z).is_some(), "C never dialled");
}

/// Told about C by a nats-server peer, which never tells the newcomer about us: the larger
/// id dials at once (jitter only) and fills the pool as soon as its first connection
/// registers, where a natsd informer makes it wait for C's dial (the tests above).
#[test]
fn told_by_nats_server_the_larger_id_dials_at_once_and_fills_the_pool() {
    let mut z = Mesh::new(cfg("Z", 3));
    step(
        &mut z,
        Event::Accepted {
            conn: 1,
            addr: addr(2),
        },
        0,
    );
    let b = Hello {
        natsd: false,
        ..hello("B", 3)
    };
    step(&mut z, Event::Hello { conn: 1, hello: b }, 0);
    let g = Gossip {
        id: Arc::from("C"),
        url: Arc::from("c"),
        addrs: vec![addr(3)],
        ..Default::default()
    };
    step(&mut z, Event::Gossip { conn: 1, gossip: g }, 0);
    let (dial, at) = dial_to_c(&mut z);
    assert!(at <= 100, "dialled at {at} ms, not at once");
    step(&mut z, Event::Dialled { dial, conn: 2 }, at);
    let mut slots: Vec<Slot> = dials(&step(
        &mut z,
        Event::Hello {
            conn: 2,
            hello: hello("C", 3),
        },
        at,
    ))
    .into_iter()
    .chain(run_until(&mut z, at + 100))
    .filter(|d| d.1 == addr(3))
    .map(|d| d.2)
    .collect();
    slots.sort();
    assert_eq!(
        slots,
        vec![
            Slot::Pool(1),
            Slot::Pool(2),
            Slot::Account(Arc::from("$SYS"))
        ]
    );
}
