//! Interest towards routes: local (client) subscriptions aggregated per account into RS+/RS-
//! — plain interest on 0↔1, queue interest with its member count as weight on every change —
//! and the full dump a route gets when it registers. Interest learned from routes is never
//! re-advertised (one hop).

use super::Cluster;
use crate::account::Account;
use crate::proto::encode;
use bytes::{Bytes, BytesMut};

/// What one local interest change means for routes.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    None,
    Plus(Option<u32>),
    Minus,
}

/// Pure: the RS line a count change needs (`before` → `after` local members).
pub fn change(queue: bool, before: u32, after: u32) -> Change {
    if queue {
        match (before, after) {
            (b, a) if a == b => Change::None,
            (_, 0) => Change::Minus,
            (_, a) => Change::Plus(Some(a)),
        }
    } else {
        match (before, after) {
            (0, a) if a > 0 => Change::Plus(None),
            (b, 0) if b > 0 => Change::Minus,
            _ => Change::None,
        }
    }
}

/// What a route peer takes of a leaf's origin cluster: `LS+ <origin>` (`lnoc`), and the
/// origin in `LS-` too (`lnocu`); without `lnoc`, plain `RS+`/`RS-`.
#[derive(Clone, Copy, Default)]
pub struct PeerForms {
    pub lnoc: bool,
    pub lnocu: bool,
}

impl PeerForms {
    pub fn of(conn: &crate::conn::Conn) -> PeerForms {
        use std::sync::atomic::Ordering::Relaxed;
        PeerForms {
            lnoc: conn.lnoc.load(Relaxed),
            lnocu: conn.lnocu.load(Relaxed),
        }
    }
}

/// One interest line: `RS±`, or for a leaf cluster's interest (`origin`) to a peer that takes
/// it, `LS+ <origin> …` / `LS- [<origin>] …` (nats-server's `addRouteSubOrUnsubProtoToBuf`).
fn encode_change(
    buf: &mut BytesMut,
    (origin, peer): (Option<&[u8]>, PeerForms),
    acc: &[u8],
    subject: &[u8],
    queue: Option<&[u8]>,
    c: &Change,
) {
    let origin = origin.filter(|_| peer.lnoc);
    match (c, origin) {
        (Change::None, _) => {}
        (Change::Plus(w), None) => encode::write_rs_plus(buf, acc, subject, queue.zip(*w)),
        (Change::Plus(w), Some(o)) => encode::write_ls_plus(buf, o, acc, subject, queue.zip(*w)),
        (Change::Minus, None) => encode::write_rs_minus(buf, acc, subject, queue),
        (Change::Minus, Some(o)) => {
            let o = peer.lnocu.then_some(o);
            encode::write_ls_minus(buf, o, acc, subject, queue)
        }
    }
}

impl Cluster {
    /// Record a local subscription change (+1/-1) and tell every route what changed. The
    /// account's interest lock is held while the line is queued on the routes, so a route's
    /// dump and these updates never cross. Routes whose writer must be woken are added to
    /// `kicks` (the caller wakes them after its read batch: one write for many SUBs).
    /// `origin`: the leaf cluster the interest comes from (a leaf connection that named its
    /// cluster), `None` for this server's own.
    pub fn interest_changed(
        &self,
        acc: &Account,
        (subject, queue): (&Bytes, Option<&Bytes>),
        delta: i32,
        origin: Option<&[u8]>,
        kicks: &mut Vec<std::sync::Arc<crate::conn::Conn>>,
    ) {
        let mut rm = acc.route_interest.lock().unwrap_or_else(|e| e.into_inner());
        let (before, after) = rm.add(origin, subject, queue.map(|q| &q[..]), delta);
        let c = change(queue.is_some(), before, after);
        if c == Change::None {
            return;
        }
        let need = 24
            + acc.name.len()
            + subject.len()
            + queue.map_or(0, |q| q.len())
            + origin.map_or(0, <[u8]>::len);
        self.broadcast_account_with(&acc.name, need, kicks, |b, name, conn| {
            let forms = (origin, PeerForms::of(conn));
            encode_change(b, forms, name, subject, queue.map(|q| &q[..]), &c)
        });
    }

    /// Everything this server advertises that `to` carries (every account on a route without
    /// pools; the accounts of its slot on a pooled one; its account, unnamed, on a pinned
    /// one), for a route that just registered.
    pub fn dump(&self, accounts: &[std::sync::Arc<Account>], to: &super::RouteEntry) {
        for acc in accounts {
            if !self.carries(to, &acc.name) {
                continue;
            }
            let name: &[u8] = if to.account.is_some() {
                b""
            } else {
                acc.name.as_bytes()
            };
            let rm = acc.route_interest.lock().unwrap_or_else(|e| e.into_inner());
            if rm.is_empty() {
                continue;
            }
            let mut buf = BytesMut::with_capacity(rm.len() * 32);
            let peer = PeerForms::of(&to.conn);
            for (origin, subject, queue, n) in rm.iter() {
                let c = if queue.is_some() {
                    Change::Plus(Some(n))
                } else {
                    Change::Plus(None)
                };
                encode_change(&mut buf, (origin, peer), name, subject, queue, &c);
            }
            to.conn
                .out
                .push_now(buf.len(), |b| b.extend_from_slice(&buf));
        }
    }
}

impl crate::server::ServerShared {
    /// A local subscription appeared (+1) or went (-1): queue what routes must learn, with
    /// the writer wake-ups deferred to `kicks`.
    #[inline]
    pub fn interest_changed_deferred(
        &self,
        acc: &Account,
        subject: &Bytes,
        queue: Option<&Bytes>,
        delta: i32,
        kicks: &mut Vec<std::sync::Arc<crate::conn::Conn>>,
    ) {
        self.interest_to_routes(acc, subject, queue, delta, kicks);
        if let Some(lf) = &self.leafnodes {
            let q = queue.map(|q| &q[..]);
            lf.interest_changed(acc, subject, q, delta, crate::leaf::Src::Local);
        }
    }

    /// Interest this server now has (its clients', or a leaf's it is the hub of) changed by
    /// `delta`: queue what routes and gateways must learn.
    pub fn interest_to_routes(
        &self,
        acc: &Account,
        subject: &Bytes,
        queue: Option<&Bytes>,
        delta: i32,
        kicks: &mut Vec<std::sync::Arc<crate::conn::Conn>>,
    ) {
        self.interest_to_routes_from(acc, (subject, queue), delta, None, kicks);
    }

    /// [`Self::interest_to_routes`] for interest of leaf cluster `origin` (`None`: our own).
    pub fn interest_to_routes_from(
        &self,
        acc: &Account,
        (subject, queue): (&Bytes, Option<&Bytes>),
        delta: i32,
        origin: Option<&[u8]>,
        kicks: &mut Vec<std::sync::Arc<crate::conn::Conn>>,
    ) {
        if let Some(cl) = &self.cluster {
            cl.interest_changed(acc, (subject, queue), delta, origin, kicks);
        }
        if let Some(gw) = &self.gateway {
            gw.local_interest_changed(&acc.name, subject, queue, delta);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route_interest::RouteInterest;

    #[test]
    fn plain_interest_on_edges_only() {
        assert_eq!(change(false, 0, 1), Change::Plus(None));
        assert_eq!(change(false, 1, 2), Change::None);
        assert_eq!(change(false, 2, 1), Change::None);
        assert_eq!(change(false, 1, 0), Change::Minus);
    }

    #[test]
    fn queue_interest_carries_weight() {
        assert_eq!(change(true, 0, 1), Change::Plus(Some(1)));
        assert_eq!(change(true, 1, 2), Change::Plus(Some(2)));
        assert_eq!(change(true, 2, 1), Change::Plus(Some(1)));
        assert_eq!(change(true, 1, 0), Change::Minus);
        assert_eq!(change(true, 1, 1), Change::None);
    }

    #[test]
    fn counts_by_subject_and_queue() {
        let mut rm = RouteInterest::default();
        assert_eq!(rm.add(None, b"foo", None, 1), (0, 1));
        assert_eq!(rm.add(None, b"foo", None, 1), (1, 2));
        assert_eq!(rm.add(None, b"foo", Some(b"q"), 1), (0, 1));
        assert_eq!(
            rm.add(None, b"foo.bar.baz.a.long.subject.beyond", Some(b"q"), 1),
            (0, 1)
        );
        assert_eq!(rm.len(), 3);
        assert_eq!(rm.add(None, b"foo", None, -1), (2, 1));
        assert_eq!(rm.add(None, b"foo", None, -1), (1, 0));
        assert_eq!(rm.add(None, b"foo", None, -1), (0, 0));
        let mut all: Vec<_> = rm
            .iter()
            .map(|(_, s, q, n)| (s.to_vec(), q.map(<[u8]>::to_vec), n))
            .collect();
        all.sort();
        assert_eq!(
            all,
            vec![
                (b"foo".to_vec(), Some(b"q".to_vec()), 1),
                (
                    b"foo.bar.baz.a.long.subject.beyond".to_vec(),
                    Some(b"q".to_vec()),
                    1
                )
            ]
        );
        for i in 0..1000 {
            rm.add(None, format!("s.{i}").as_bytes(), None, 1);
        }
        for i in 0..1000 {
            rm.add(None, format!("s.{i}").as_bytes(), None, -1);
        }
        assert_eq!(rm.len(), 2);
    }

    #[test]
    fn a_leaf_clusters_interest_is_counted_apart() {
        let mut rm = RouteInterest::default();
        assert_eq!(rm.add(None, b"foo", None, 1), (0, 1));
        // The same subject from leaf cluster LC: its own count, its own LS+.
        assert_eq!(rm.add(Some(b"LC"), b"foo", None, 1), (0, 1));
        assert_eq!(rm.add(Some(b"LC"), b"foo", None, 1), (1, 2));
        assert_eq!(rm.len(), 2);
        assert_eq!(rm.add(Some(b"LC"), b"foo", None, -2), (2, 0));
        assert_eq!(rm.add(Some(b"XX"), b"foo", None, -1), (0, 0));
        let all: Vec<_> = rm
            .iter()
            .map(|(o, s, _, n)| (o.is_some(), s.to_vec(), n))
            .collect();
        assert_eq!(all, vec![(false, b"foo".to_vec(), 1)]);
    }

    #[test]
    fn lines() {
        let mut b = BytesMut::new();
        let own = (None, PeerForms::default());
        encode_change(
            &mut b,
            own,
            b"$G",
            b"bar",
            Some(b"q1"),
            &Change::Plus(Some(2)),
        );
        encode_change(&mut b, own, b"$G", b"bar", Some(b"q1"), &Change::Minus);
        encode_change(&mut b, own, b"$G", b"foo", None, &Change::Plus(None));
        assert_eq!(
            &b[..],
            b"RS+ $G bar q1 2\r\nRS- $G bar q1\r\nRS+ $G foo\r\n"
        );
        // A leaf cluster's interest: with its origin to peers that take it.
        let all = PeerForms {
            lnoc: true,
            lnocu: true,
        };
        let no_u = PeerForms {
            lnoc: true,
            lnocu: false,
        };
        let lc: Option<&[u8]> = Some(b"LC");
        let mut b = BytesMut::new();
        encode_change(&mut b, (lc, all), b"$G", b"foo", None, &Change::Plus(None));
        encode_change(&mut b, (lc, all), b"$G", b"foo", Some(b"q"), &Change::Minus);
        encode_change(&mut b, (lc, no_u), b"$G", b"foo", None, &Change::Minus);
        encode_change(
            &mut b,
            (lc, PeerForms::default()),
            b"$G",
            b"foo",
            None,
            &Change::Plus(None),
        );
        assert_eq!(
            &b[..],
            &b"LS+ LC $G foo\r\nLS- LC $G foo q\r\nLS- $G foo\r\nRS+ $G foo\r\n"[..]
        );
    }
}
