//! Who is told about whom, and when.

use super::*;

#[test]
fn a_newcomer_is_told_about_every_other_peer_and_the_others_about_it() {
    let mut s = Mesh::new(cfg("S", -1));
    step(
        &mut s,
        Event::Accepted {
            conn: 1,
            addr: addr(1),
        },
        0,
    );
    let out = step(
        &mut s,
        Event::Hello {
            conn: 1,
            hello: hello("X", 0),
        },
        0,
    );
    assert!(!out.iter().any(|a| matches!(a, Action::SendGossip { .. })));
    step(
        &mut s,
        Event::Accepted {
            conn: 2,
            addr: addr(2),
        },
        0,
    );
    step(
        &mut s,
        Event::Hello {
            conn: 2,
            hello: hello("Y", 0),
        },
        0,
    );
    step(
        &mut s,
        Event::Accepted {
            conn: 3,
            addr: addr(3),
        },
        0,
    );
    let out = step(
        &mut s,
        Event::Hello {
            conn: 3,
            hello: hello("Z", 0),
        },
        0,
    );
    let gossip: Vec<_> = out
        .iter()
        .filter(|a| matches!(a, Action::SendGossip { .. }))
        .collect();
    assert_eq!(
        gossip,
        vec![
            // We accepted Z: the others must not re-gossip it (nats-server 2.11).
            &Action::SendGossip {
                to: 1,
                about: vec![Arc::from("Z")],
                mode: GossipMode::Disabled
            },
            &Action::SendGossip {
                to: 2,
                about: vec![Arc::from("Z")],
                mode: GossipMode::Disabled
            },
            // Its connections to them must not be announced again: they hear of it above.
            &Action::SendGossip {
                to: 3,
                about: vec![Arc::from("X"), Arc::from("Y")],
                mode: GossipMode::Disabled
            },
        ]
    );
}

/// A nats-server newcomer is told only about our natsd peers; our nats-server peers are told
/// about it and dial it, as they would in a cluster of nats-server alone (which never tells
/// a newcomer), and do not cross their dials.
#[test]
fn a_nats_server_newcomer_is_not_told_about_nats_server_peers() {
    let mut s = Mesh::new(cfg("S", 3));
    let mut conn = 0;
    let mut join = |s: &mut Mesh, id: &str, natsd: bool| {
        conn += 1;
        step(
            s,
            Event::Accepted {
                conn,
                addr: addr(conn as u8),
            },
            0,
        );
        let out = step(
            s,
            Event::Hello {
                conn,
                hello: Hello {
                    natsd,
                    ..hello(id, 3)
                },
            },
            0,
        );
        let told: Vec<(ConnId, Vec<Arc<str>>)> = out
            .into_iter()
            .filter_map(|a| match a {
                Action::SendGossip { to, about, .. } => Some((to, about)),
                _ => None,
            })
            .collect();
        told
    };
    join(&mut s, "G1", false);
    join(&mut s, "N2", true);
    let told = join(&mut s, "G3", false);
    let about = |ids: &[&str]| ids.iter().map(|i| Arc::from(*i)).collect::<Vec<Arc<str>>>();
    assert_eq!(
        told,
        vec![
            (1, about(&["G3"])),
            (2, about(&["G3"])),
            (3, about(&["N2"]))
        ]
    );
    // A natsd newcomer hears of everyone.
    let told = join(&mut s, "N4", true);
    assert_eq!(told.last(), Some(&(4, about(&["G1", "G3", "N2"]))));
}

/// The pinned-account connection of a peer we announced is announced too (nats-server peers
/// open theirs from it); one of a peer that reached us through gossip is not (every pair of
/// a starting cluster is such a peer: announcing each made n³ INFOs).
#[test]
fn pinned_connections_are_announced_only_for_announced_peers() {
    let mut s = Mesh::new(cfg("S", 3));
    let mut conn = 0;
    let mut join = |s: &mut Mesh, id: &str, mode: GossipMode, account: Option<&str>| {
        conn += 1;
        step(
            s,
            Event::Accepted {
                conn,
                addr: addr(conn as u8),
            },
            0,
        );
        step(
            s,
            Event::Hello {
                conn,
                hello: Hello {
                    gossip_mode: mode,
                    account: account.map(Arc::from),
                    ..hello(id, 3)
                },
            },
            0,
        )
    };
    let pinned = |out: &[Action]| -> Vec<Action> {
        out.iter()
            .filter(|a| matches!(a, Action::AnnouncePinned { .. }))
            .cloned()
            .collect()
    };
    // X came to us as its seed: announced, and so is its $SYS connection.
    assert!(pinned(&join(&mut s, "X", GossipMode::Default, None)).is_empty());
    assert_eq!(
        pinned(&join(&mut s, "X", GossipMode::Default, Some("$SYS"))),
        vec![Action::AnnouncePinned {
            peer: Arc::from("X"),
            account: Arc::from("$SYS")
        }]
    );
    // Y dialled us because it was told about us: neither is announced.
    join(&mut s, "Y", GossipMode::Disabled, None);
    assert!(pinned(&join(&mut s, "Y", GossipMode::Disabled, Some("$SYS"))).is_empty());
}

/// A pinned connection we dialled to a peer we announced (our seed) is announced as well:
/// a nats-server peer that joined us before that seed was reached opens its pinned
/// connection to the seed only from this news (without it their `$SYS` connection never
/// formed).
#[test]
fn a_pinned_connection_we_dialled_to_our_seed_is_announced() {
    let mut s = Mesh::new(cfg("S", 3));
    let out = seed(&mut s, vec![addr(1)]);
    let (dial, _, _) = dials(&out)[0].clone();
    step(&mut s, Event::Dialled { dial, conn: 1 }, 0);
    let out = step(
        &mut s,
        Event::Hello {
            conn: 1,
            hello: hello("X", 3),
        },
        0,
    );
    let mut sys = None;
    for (d, _, slot) in dials(&out).into_iter().chain(run_until(&mut s, 5_000)) {
        if slot == Slot::Account(Arc::from("$SYS")) {
            sys = Some(d);
        }
    }
    let sys = sys.expect("a $SYS dial");
    step(&mut s, Event::Dialled { dial: sys, conn: 2 }, 5_000);
    let out = step(
        &mut s,
        Event::Hello {
            conn: 2,
            hello: Hello {
                account: Some(Arc::from("$SYS")),
                ..hello("X", 3)
            },
        },
        5_000,
    );
    assert!(
        out.contains(&Action::AnnouncePinned {
            peer: Arc::from("X"),
            account: Arc::from("$SYS")
        }),
        "{out:?}"
    );
}

/// A peer that reached us because of gossip (its INFO says gossip mode "disabled") is not
/// told about our other peers while a cluster forms — every pair of a starting cluster is
/// such a connection, and telling each made every node parse n² INFOs — but `TELL_LATER`
/// after, in case it links two parts of a cluster that know nothing of each other.
#[test]
fn a_peer_reached_through_gossip_is_told_about_the_others_later() {
    let mut s = Mesh::new(cfg("S", -1));
    for (conn, id) in [(1, "X"), (2, "Y")] {
        accepted(&mut s, conn, hello(id, 0), 0);
    }
    step(
        &mut s,
        Event::Accepted {
            conn: 3,
            addr: addr(3),
        },
        100,
    );
    let out = step(
        &mut s,
        Event::Hello {
            conn: 3,
            hello: Hello {
                gossip_mode: GossipMode::Disabled,
                ..hello("Z", 0)
            },
        },
        100,
    );
    assert!(
        !out.iter().any(|a| matches!(a, Action::SendGossip { .. })),
        "{out:?}"
    );
    let mut told = Vec::new();
    while let Some(t) = s.next_deadline() {
        if t > Duration::from_secs(20) {
            break;
        }
        for a in step(&mut s, Event::Tick, t.as_millis() as u64) {
            if let Action::SendGossip { to, about, mode } = a {
                told.push((t, to, about, mode));
            }
        }
    }
    assert_eq!(told.len(), 1, "{told:?}");
    let (at, to, about, mode) = &told[0];
    assert!(*at >= Duration::from_millis(100) + TELL_LATER, "{at:?}");
    assert_eq!(
        (*to, about.clone(), *mode),
        (
            3,
            vec![Arc::from("X"), Arc::from("Y")],
            GossipMode::Disabled
        )
    );
}

/// A peer that dialled our lowest slot and now pins a new account (its announcement, or its
/// answer to ours) but may never dial it — nats-server dials a newly pinned account only on
/// its configured routes — gets it dialled by us, a while later, at the address its INFO gave;
/// one we dialled first gets it at once, where our dial went.
#[test]
fn a_newly_pinned_account_is_dialled_toward_a_peer_that_dialled_us() {
    let mut s = Mesh::new(cfg("S", 3));
    for (conn, account) in [(1, None), (2, Some("$SYS"))] {
        let h = Hello {
            account: account.map(Arc::from),
            ..hello("X", 3)
        };
        accepted(&mut s, conn, h, 0);
    }
    let pinned = vec![Arc::from("$SYS"), Arc::from("A")];
    let out = step(
        &mut s,
        Event::Reconfigure {
            pool_size: 3,
            pinned,
        },
        100,
    );
    assert!(dials(&out).is_empty(), "{out:?}");
    let out = step(&mut s, Event::PeerPins { id: Arc::from("X") }, 200);
    assert!(dials(&out).is_empty(), "not at once: {out:?}");
    let mut dialled = Vec::new();
    while let Some(t) = s.next_deadline() {
        if t > Duration::from_secs(20) {
            break;
        }
        dialled.extend(dials(&step(&mut s, Event::Tick, t.as_millis() as u64)));
    }
    // X's INFO said it listens at addr(9) (the `hello` helper).
    let got: Vec<(SocketAddr, Slot)> = dialled.into_iter().map(|(_, a, s)| (a, s)).collect();
    assert_eq!(got, vec![(addr(9), Slot::Account(Arc::from("A")))]);
}
