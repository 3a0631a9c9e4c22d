//! What each leaf link is told of its account's interest: per `subject` or `subject queue`
//! (nats-server's "smap") whether the peer was told of it, or the queue weight it was told,
//! with `LS+` when a plain subject gains its first interest or a queue's weight changes,
//! `LS-` when it loses its last. A link never hears back its own interest; a link to a hub
//! (a spoke) hears only this server's own clients and the leaves it is the hub of, never
//! what routes or its hub brought.
//!
//! A change is not applied as a delta: the link counts the key again in the account's
//! sublist (under its map's lock) and tells the peer the difference. A subscription is in
//! the sublist before its change is announced, so a link that registers in between sees it
//! in its dump and again in the announcement; counting again makes that harmless (a delta
//! would count it twice, and its `LS-` would later leave interest behind).

use super::Leafnodes;
use crate::account::{Account, SubRef};
use crate::compress::CompressionMode;
use crate::conn::{Conn, ConnKind};
use crate::proto::encode;
use bytes::BytesMut;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// Where an interest change comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// This server's clients and internal subscriptions.
    Local,
    /// A route (another server of this cluster).
    Route,
    /// Leaf connection `cid` (`spoke`: one we dialled).
    Leaf { cid: u64, spoke: bool },
}

/// One registered leaf connection.
pub struct Link {
    pub conn: Arc<Conn>,
    pub acc: Arc<Account>,
    /// We dialled it (we are the leaf).
    pub spoke: bool,
    pub remote_id: String,
    pub remote_name: String,
    /// What the peer was told, by `subject` (1) or `subject queue` (the weight).
    smap: Mutex<HashMap<Vec<u8>, u32>>,
    /// The compression mode in force (`/leafz`).
    pub compression: Mutex<CompressionMode>,
}

fn key(subject: &[u8], queue: Option<&[u8]>) -> Vec<u8> {
    match queue {
        None => subject.to_vec(),
        Some(q) => [subject, b" ", q].concat(),
    }
}

fn line(buf: &mut BytesMut, k: &[u8], n: u32) {
    let (subject, queue) = match k.iter().position(|&b| b == b' ') {
        Some(i) => (&k[..i], Some(&k[i + 1..])),
        None => (k, None),
    };
    if n > 0 {
        encode::write_leaf_plus(buf, subject, queue.map(|q| (q, n)));
    } else {
        encode::write_leaf_minus(buf, subject, queue);
    }
}

impl Link {
    pub fn new(conn: Arc<Conn>, acc: Arc<Account>, spoke: bool, id: &str, name: &str) -> Self {
        Link {
            conn,
            acc,
            spoke,
            remote_id: id.to_string(),
            remote_name: name.to_string(),
            smap: Mutex::new(HashMap::new()),
            compression: Mutex::new(CompressionMode::NotSupported),
        }
    }

    /// Whether a change from `src` is for this link's peer.
    fn hears(&self, src: Src) -> bool {
        match src {
            Src::Leaf { cid, .. } if cid == self.conn.cid => false,
            _ if !self.spoke => true,
            Src::Local | Src::Leaf { spoke: false, .. } => true,
            Src::Route | Src::Leaf { .. } => false,
        }
    }

    /// Where an entry of the account's sublist comes from (None: never told to leaves).
    fn src_of(e: &SubRef) -> Option<Src> {
        Some(match e.conn.kind {
            ConnKind::Client | ConnKind::Internal => Src::Local,
            ConnKind::Route => Src::Route,
            ConnKind::Leaf => Src::Leaf {
                cid: e.conn.cid,
                spoke: e.conn.spoke.load(Relaxed),
            },
            ConnKind::Gateway => return None,
        })
    }

    /// Whether entry `e` is interest of leaf cluster `cluster` (the link's own): a route's on
    /// its behalf, or another leaf connection of that cluster's. Never told back to it
    /// (nats-server's `updateLeafNodes` origin check).
    fn from_cluster(e: &SubRef, cluster: Option<&bytes::Bytes>) -> bool {
        let Some(c) = cluster else {
            return false;
        };
        match e.conn.kind {
            ConnKind::Route => e.leaf_origin() == Some(&c[..]),
            ConnKind::Leaf => e.conn.leaf_cluster() == Some(c),
            _ => false,
        }
    }

    /// What the peer should be told of `subject` / `queue` now: 1 or 0 for a plain subject,
    /// the summed weight of the members it hears for a queue.
    fn recount(&self, subject: &[u8], queue: Option<&[u8]>, lds: &str) -> u32 {
        if !super::perms::may_tell(&self.conn, subject) {
            return 0;
        }
        let own = self.conn.leaf_cluster();
        let heard = |e: &SubRef| {
            Self::src_of(e).is_some_and(|s| self.hears(s)) && !Self::from_cluster(e, own)
        };
        let n = match queue {
            None => self.acc.sublist.fold_exact(subject, None, 0u32, |n, e| {
                if n == 0 && heard(e) {
                    1
                } else {
                    n
                }
            }),
            Some(q) => self.acc.sublist.fold_exact(subject, Some(q), 0u32, |n, e| {
                if heard(e) {
                    n.saturating_add(e.weight.max(1))
                } else {
                    n
                }
            }),
        };
        // Our loop detection subject and the mapping sources stay told whatever else
        // subscribes to them.
        if queue.is_none() && (subject == lds.as_bytes() || self.acc.mappings.is_source(subject)) {
            return 1;
        }
        n
    }

    /// Interest in `subject` / `queue` changed (by `delta`): count it again and tell the
    /// peer what differs from what it was told.
    fn update(&self, subject: &[u8], queue: Option<&[u8]>, delta: i32, lds: &str) {
        let k = key(subject, queue);
        let mut smap = self.smap.lock().unwrap_or_else(|e| e.into_inner());
        let told = smap.get(&k).copied().unwrap_or(0);
        // One more member of a plain subject the peer knows of changes nothing (the common
        // case of many subscribers on one subject stays O(1)).
        if queue.is_none() && delta > 0 && told > 0 {
            return;
        }
        let now = self.recount(subject, queue, lds);
        if now == told {
            return;
        }
        if now == 0 {
            smap.remove(&k);
        } else {
            smap.insert(k.clone(), now);
        }
        if queue.is_some() || (told == 0) != (now == 0) {
            let mut b = BytesMut::with_capacity(k.len() + 24);
            line(&mut b, &k, now);
            self.conn.out.push_now(b.len(), |o| o.extend_from_slice(&b));
        }
    }

    /// Everything the peer must hear now that it registered: the account's interest (as
    /// [`Link::hears`] allows) and our loop detection subject, in one write. What it was
    /// told before (changes announced between its registration and this dump) is replaced:
    /// this snapshot is newer.
    pub fn dump(&self, lds: &str) {
        let mut smap = self.smap.lock().unwrap_or_else(|e| e.into_inner());
        smap.clear();
        let own = self.conn.leaf_cluster();
        self.acc.sublist.for_each(|subject, queue, e| {
            if Self::src_of(e).is_some_and(|s| self.hears(s))
                && !Self::from_cluster(e, own)
                && super::perms::may_tell(&self.conn, subject)
            {
                let n = smap.entry(key(subject, queue)).or_insert(0);
                *n = match queue {
                    Some(_) => n.saturating_add(e.weight.max(1)),
                    None => 1,
                };
            }
        });
        // The account's mapping sources: the peer sends us what it publishes there even
        // without a subscriber on the source itself (nats-server's `forceAddToSmap`).
        for src in self.acc.mappings.sources() {
            if super::perms::may_tell(&self.conn, src.as_bytes()) {
                smap.entry(src.into_bytes()).or_insert(1);
            }
        }
        smap.insert(lds.as_bytes().to_vec(), 1);
        let mut b = BytesMut::with_capacity(smap.len() * 32);
        for (k, n) in smap.iter() {
            line(&mut b, k, *n);
        }
        self.conn.out.push_now(b.len(), |o| o.extend_from_slice(&b));
    }

    /// The number of interest keys the peer was told of (`/leafz` `subscriptions`).
    pub fn num_told(&self) -> usize {
        self.smap.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Leafnodes {
    /// Interest changed in `acc` (by `delta` members, or the weight for a leaf's queue):
    /// tell every link of the account that hears `src`.
    pub fn interest_changed(
        &self,
        acc: &Account,
        subject: &[u8],
        queue: Option<&[u8]>,
        delta: i32,
        src: Src,
    ) {
        let links = self.links.read().unwrap_or_else(|e| e.into_inner());
        for l in links.iter() {
            if l.acc.name == acc.name && l.hears(src) {
                l.update(subject, queue, delta, &self.lds);
            }
        }
    }

    /// `acc`'s mappings changed (a reload): tell its links of the sources that came, take
    /// back those that went (`subjects`: both), as nats-server's `forceAddToSmap` /
    /// `forceRemoveFromSmap`.
    pub fn mappings_changed(&self, acc: &Account, subjects: &[String]) {
        let links = self.links.read().unwrap_or_else(|e| e.into_inner());
        for l in links.iter().filter(|l| l.acc.name == acc.name) {
            for s in subjects {
                l.update(s.as_bytes(), None, 0, &self.lds);
            }
        }
    }

    /// Register a link, then send it its dump (a change announced in between is counted
    /// again there: see the module header).
    pub(super) fn register(&self, link: &Arc<Link>) {
        self.links
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(link.clone());
        link.dump(&self.lds);
    }

    pub(super) fn unregister(&self, link: &Arc<Link>) {
        self.links
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|l| !Arc::ptr_eq(l, link));
    }

    pub(super) fn lds(&self) -> &str {
        &self.lds
    }
}

#[cfg(test)]
mod tests {
    //! The registration race, replayed step by step: a change lands in the sublist, a leaf
    //! registers (its dump sees the change), then the change is announced.

    use super::*;
    use crate::account::Subscription;
    use crate::config::leaf::LeafOpts;
    use bytes::Bytes;

    fn conn(cid: u64, kind: ConnKind) -> Arc<Conn> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        Arc::new(Conn::new(cid, kind, addr, 1 << 20))
    }

    fn sub(c: &Arc<Conn>, subject: &'static str, queue: Option<&'static str>, w: u32) -> SubRef {
        let q = queue.map(|q| Bytes::from_static(q.as_bytes()));
        let s = Subscription::remote(c.clone(), Bytes::from_static(subject.as_bytes()), q, w);
        SubRef(Arc::new(s))
    }

    /// What the link's connection was sent so far.
    fn sent(c: &Conn) -> String {
        let mut b = BytesMut::new();
        c.out.take(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    }

    /// A hub with a registered leaf link (cid 1) on account `$G`, after `before` ran.
    fn setup(before: impl FnOnce(&Account)) -> (Leafnodes, Arc<Account>, Arc<Link>) {
        let lf = Leafnodes::new(LeafOpts::default());
        let acc = Arc::new(Account::new("$G"));
        before(&acc);
        let link = Arc::new(Link::new(
            conn(1, ConnKind::Leaf),
            acc.clone(),
            false,
            "L",
            "L",
        ));
        lf.register(&link);
        (lf, acc, link)
    }

    #[test]
    fn a_subscription_made_while_a_leaf_registers_is_counted_once() {
        let client = conn(2, ConnKind::Client);
        let s = sub(&client, "foo", None, 1);
        let (lf, acc, link) = setup(|acc| {
            acc.sublist.insert(b"foo", None, s.clone()).unwrap();
        });
        assert!(sent(&link.conn).contains("LS+ foo\r\n"));
        // The SUB's announcement arrives after the dump: nothing new for the leaf.
        lf.interest_changed(&acc, b"foo", None, 1, Src::Local);
        assert_eq!(sent(&link.conn), "");
        // The UNSUB: the leaf hears LS- (a double count would have kept the interest).
        acc.sublist.remove(b"foo", None, &s).unwrap();
        lf.interest_changed(&acc, b"foo", None, -1, Src::Local);
        assert_eq!(sent(&link.conn), "LS- foo\r\n");
        assert_eq!(
            link.num_told(),
            1,
            "only the loop detection subject is left"
        );
    }

    #[test]
    fn an_unsubscribe_announced_after_the_dump_keeps_the_other_members() {
        let client = conn(2, ConnKind::Client);
        let (a, b) = (sub(&client, "foo", None, 1), sub(&client, "foo", None, 1));
        let (q1, q2) = (
            sub(&client, "work", Some("g"), 1),
            sub(&client, "work", Some("g"), 1),
        );
        let (lf, acc, link) = setup(|acc| {
            for (subj, q, s) in [(&b"foo"[..], None, &a), (b"foo", None, &b)] {
                acc.sublist.insert(subj, q, s.clone()).unwrap();
            }
            acc.sublist.insert(b"work", Some(b"g"), q1.clone()).unwrap();
            acc.sublist.insert(b"work", Some(b"g"), q2.clone()).unwrap();
            // Removed before the dump, announced after it.
            acc.sublist.remove(b"foo", None, &a).unwrap();
            acc.sublist.remove(b"work", Some(b"g"), &q1).unwrap();
        });
        let dump = sent(&link.conn);
        assert!(
            dump.contains("LS+ foo\r\n") && dump.contains("LS+ work g 1\r\n"),
            "{dump}"
        );
        lf.interest_changed(&acc, b"foo", None, -1, Src::Local);
        lf.interest_changed(&acc, b"work", Some(b"g"), -1, Src::Local);
        // A delta would have taken foo to 0 (LS- while b subscribes) and the group to 0.
        assert_eq!(sent(&link.conn), "");
    }

    #[test]
    fn a_route_queue_weight_is_told_as_counted() {
        let route = conn(3, ConnKind::Route);
        let r = sub(&route, "work", Some("g"), 3);
        let (lf, acc, link) = setup(|_| {});
        sent(&link.conn);
        acc.sublist.insert(b"work", Some(b"g"), r.clone()).unwrap();
        lf.interest_changed(&acc, b"work", Some(b"g"), 1, Src::Route);
        assert_eq!(sent(&link.conn), "LS+ work g 3\r\n");
        acc.sublist.remove(b"work", Some(b"g"), &r).unwrap();
        lf.interest_changed(&acc, b"work", Some(b"g"), -1, Src::Route);
        assert_eq!(sent(&link.conn), "LS- work g\r\n");
    }
}
