//! Config reloads of the pool size.

use super::*;

/// A peer we reached through gossip with one connection (no pool) loses it to a reload that
/// pools the routes: we dial it again, although the closed connection's task reports its end
/// after our redial timer is due (the claim on its address went with our close).
#[test]
fn a_gossiped_peer_closed_by_a_new_pool_size_is_dialled_again() {
    let mut a = Mesh::new(cfg("A", -1));
    accepted(&mut a, 1, hello("B", 0), 0);
    let g = Gossip {
        id: Arc::from("C"),
        url: Arc::from("c"),
        addrs: vec![addr(3)],
        ..Default::default()
    };
    step(&mut a, Event::Gossip { conn: 1, gossip: g }, 0);
    let first = run_until(&mut a, 1_000);
    assert_eq!(first.len(), 1, "{first:?}");
    let (d, to, _) = first[0].clone();
    assert_eq!(to, addr(3));
    step(&mut a, Event::Dialled { dial: d, conn: 2 }, 1_000);
    step(
        &mut a,
        Event::Hello {
            conn: 2,
            hello: hello("C", 0),
        },
        1_000,
    );
    let out = step(
        &mut a,
        Event::Reconfigure {
            pool_size: 3,
            pinned: vec![Arc::from("$SYS")],
        },
        2_000,
    );
    assert!(
        out.contains(&Action::Close {
            conn: 2,
            why: CloseWhy::Reload
        }),
        "{out:?}"
    );
    // Our redial timer comes before the closed connection's end is reported.
    let mut again = run_until(&mut a, 2_200);
    step(&mut a, Event::Closed { conn: 2 }, 2_300);
    again.extend(run_until(&mut a, 10_000));
    let to: Vec<SocketAddr> = again.iter().map(|(_, a, _)| *a).collect();
    assert!(to.contains(&addr(3)), "C is dialled again: {again:?}");
}

/// A nats-server peer whose only connection to us is a pinned account's it dialled (what
/// it redials after a reload that pooled the routes) never dials the pool: we do, a while
/// later, at the address its INFO gave.
#[test]
fn the_pool_of_a_nats_server_peer_that_dialled_only_a_pinned_account_is_dialled() {
    let mut s = Mesh::new(cfg("S", 3));
    let h = Hello {
        account: Some(Arc::from("$SYS")),
        natsd: false,
        ..hello("X", 3)
    };
    let out = accepted(&mut s, 1, h, 0);
    assert!(dials(&out).is_empty(), "not at once: {out:?}");
    let got: Vec<(SocketAddr, Slot)> = run_until(&mut s, 20_000)
        .into_iter()
        .map(|(_, a, s)| (a, s))
        .collect();
    let want: Vec<(SocketAddr, Slot)> = (0..3).map(|i| (addr(9), Slot::Pool(i))).collect();
    assert_eq!(got, want);
}

/// A nats-server peer that dialled our pool, with the `$SYS` connection we dialled (it never
/// dials a pinned account on a route it did not configure): a reload closes all of them,
/// the peer dials its pool again at once, and our old `$SYS` connection's end is reported
/// after the new pool registered. We dial `$SYS` again (before, nobody did, and the pair
/// stayed without it: tests/reload_routes.rs, a compression reload on a loaded machine).
#[test]
fn a_pinned_connection_lost_behind_a_nats_server_peers_new_pool_is_dialled_again() {
    let mut s = Mesh::new(cfg("S", 3));
    let pool = |i: u16| Hello {
        pool_idx: i,
        natsd: false,
        ..hello("X", 3)
    };
    for i in 0..3u16 {
        accepted(&mut s, u64::from(i) + 1, pool(i), 0);
    }
    // `defer()` after its first dial, we dial the `$SYS` connection it never will.
    let ds = run_until(&mut s, 10_000);
    assert_eq!(
        ds.iter()
            .map(|(_, a, s)| (*a, s.clone()))
            .collect::<Vec<_>>(),
        vec![(addr(9), Slot::Account(Arc::from("$SYS")))]
    );
    step(
        &mut s,
        Event::Dialled {
            dial: ds[0].0,
            conn: 4,
        },
        10_000,
    );
    let sys = Hello {
        account: Some(Arc::from("$SYS")),
        natsd: false,
        ..hello("X", 3)
    };
    step(
        &mut s,
        Event::Hello {
            conn: 4,
            hello: sys,
        },
        10_000,
    );
    assert_eq!(s.routes().len(), 4);
    // The reload: every connection closes; the peer's new pool comes before the ends of
    // our old connections are reported (each new one waits as a spare for its slot).
    for i in 0..3u16 {
        accepted(&mut s, u64::from(i) + 5, pool(i), 20_000);
    }
    for c in 1..=4 {
        step(&mut s, Event::Closed { conn: c }, 20_001);
    }
    assert_eq!(s.routes().len(), 3, "the new pool: {:?}", s.routes());
    let again: Vec<(SocketAddr, Slot)> = run_until(&mut s, 40_000)
        .into_iter()
        .map(|(_, a, s)| (a, s))
        .collect();
    assert_eq!(again, vec![(addr(9), Slot::Account(Arc::from("$SYS")))]);
}
