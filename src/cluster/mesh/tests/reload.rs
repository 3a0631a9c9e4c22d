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
