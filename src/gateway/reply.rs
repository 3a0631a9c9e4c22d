//! `_GR_.` reply routing (spec §4.6). A request whose reply subject matches a subscription
//! created in the last 2 s (the remote cluster may not know that inbox yet) leaves with the
//! reply `_GR_.<hash6(our gateway name)>.<hash6(our server id)>.<reply>`. The receiving
//! server strips the prefix for its clients and remembers reply → routed reply, so that the
//! answer published to the plain reply goes straight back to our cluster, to our server.

use crate::subject::pattern_matches;
use bytes::{Bytes, BytesMut};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const GR_PREFIX: &[u8] = b"_GR_.";
/// nats-server's `defaultGatewayRecentSubExpiration`.
pub const RECENT_SUB: Duration = Duration::from_secs(2);
/// How long a received routed reply is remembered.
pub const REPLY_TTL: Duration = Duration::from_secs(120);
/// Bounds: recent subscriptions and remembered replies kept at most.
const MAX_RECENT: usize = 8192;
const MAX_REPLIES: usize = 65536;

/// nats-server's `getHashSize(x, 6)` (`util::ids::hash_into`).
pub fn hash6(x: &[u8]) -> [u8; 6] {
    let mut out = [0u8; 6];
    crate::util::ids::hash_into(x, &mut out);
    out
}

/// `_GR_.<cluster>.<server>.<reply>`.
pub fn routed_reply(cluster: &[u8; 6], server: &[u8; 6], reply: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(GR_PREFIX.len() + 14 + reply.len());
    b.extend_from_slice(GR_PREFIX);
    b.extend_from_slice(cluster);
    b.extend_from_slice(b".");
    b.extend_from_slice(server);
    b.extend_from_slice(b".");
    b.extend_from_slice(reply);
    b.freeze()
}

/// Split `_GR_.<c6>.<s6>.<rest>`; `None` when `subject` is not of that form.
pub fn parse(subject: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let rest = subject.strip_prefix(GR_PREFIX)?;
    if rest.len() < 15 || rest[6] != b'.' || rest[13] != b'.' {
        return None;
    }
    Some((&rest[..6], &rest[7..13], &rest[14..]))
}

/// Plain reply → (routed reply, expiry), per account.
type ReplyMap = HashMap<String, HashMap<Bytes, (Bytes, Instant)>>;

#[derive(Default)]
pub struct Replies {
    /// Local subscriptions of the last `RECENT_SUB`: (when, account, subject).
    recent: Mutex<VecDeque<(Instant, String, Bytes)>>,
    num_recent: AtomicUsize,
    /// account → plain reply → (routed reply, expiry).
    map: Mutex<ReplyMap>,
    num_map: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Replies {
    /// A local plain subscription appeared.
    pub fn sub_created(&self, acc: &str, subject: &Bytes) {
        let now = Instant::now();
        let mut q = lock(&self.recent);
        while q
            .front()
            .is_some_and(|(t, _, _)| now.duration_since(*t) > RECENT_SUB)
            || q.len() >= MAX_RECENT
        {
            q.pop_front();
        }
        q.push_back((now, acc.to_string(), subject.clone()));
        self.num_recent.store(q.len(), Relaxed);
    }

    /// Does a subscription of the last 2 s in `acc` match `reply`?
    pub fn has_recent_sub(&self, acc: &str, reply: &[u8]) -> bool {
        if self.num_recent.load(Relaxed) == 0 {
            return false;
        }
        let now = Instant::now();
        let mut q = lock(&self.recent);
        while q
            .front()
            .is_some_and(|(t, _, _)| now.duration_since(*t) > RECENT_SUB)
        {
            q.pop_front();
        }
        self.num_recent.store(q.len(), Relaxed);
        q.iter()
            .any(|(_, a, s)| a == acc && pattern_matches(s, reply))
    }

    /// Remember that `plain` in `acc` answers to `routed` (a received `_GR_.` reply).
    pub fn remember(&self, acc: &str, plain: &[u8], routed: &[u8]) {
        let now = Instant::now();
        let mut m = lock(&self.map);
        if self.num_map.load(Relaxed) >= MAX_REPLIES {
            for per in m.values_mut() {
                per.retain(|_, (_, exp)| *exp > now);
            }
            m.retain(|_, per| !per.is_empty());
            if m.values().map(HashMap::len).sum::<usize>() >= MAX_REPLIES {
                m.clear();
            }
        }
        m.entry(acc.to_string()).or_default().insert(
            Bytes::copy_from_slice(plain),
            (Bytes::copy_from_slice(routed), now + REPLY_TTL),
        );
        self.num_map
            .store(m.values().map(HashMap::len).sum(), Relaxed);
    }

    /// The routed subject for a publish to `subject` in `acc`, if it answers a routed reply.
    pub fn routed_for(&self, acc: &str, subject: &[u8]) -> Option<Bytes> {
        if self.num_map.load(Relaxed) == 0 {
            return None;
        }
        let mut m = lock(&self.map);
        let per = m.get_mut(acc)?;
        let (routed, exp) = per.get(subject)?.clone();
        if exp <= Instant::now() {
            per.remove(subject);
            self.num_map.fetch_sub(1, Relaxed);
            return None;
        }
        Some(routed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_as_nats_server() {
        // Spec §4.6: `_GR_.Q9nuOZ.JuPUTi.` = hash6("C2") + hash6(G's server id).
        assert_eq!(&hash6(b"C2"), b"Q9nuOZ");
        assert_eq!(
            &hash6(b"NA5LFTJ5X4DGASPT7G3IIU3OKEZXT2CF7I4BNVAT3E2ZOQEC6RYNCIVS"),
            b"JuPUTi"
        );
    }

    #[test]
    fn parse_and_build() {
        let r = routed_reply(b"Q9nuOZ", b"JuPUTi", b"_INBOX.g.1");
        assert_eq!(&r[..], b"_GR_.Q9nuOZ.JuPUTi._INBOX.g.1");
        let (c, s, rest) = parse(&r).expect("parse");
        assert_eq!(
            (c, s, rest),
            (&b"Q9nuOZ"[..], &b"JuPUTi"[..], &b"_INBOX.g.1"[..])
        );
        assert!(parse(b"_GR_.short").is_none());
        assert!(parse(b"_GR_.Q9nuOZxJuPUTi.x").is_none());
        assert!(parse(b"foo.bar").is_none());
    }

    #[test]
    fn recent_subs_and_reply_map() {
        let r = Replies::default();
        assert!(!r.has_recent_sub("$G", b"_INBOX.a.1"));
        r.sub_created("$G", &Bytes::from_static(b"_INBOX.a.*"));
        assert!(r.has_recent_sub("$G", b"_INBOX.a.1"));
        assert!(!r.has_recent_sub("A", b"_INBOX.a.1"));
        assert!(r.routed_for("$G", b"x").is_none());
        r.remember("$G", b"_INBOX.g.1", b"_GR_.Q9nuOZ.JuPUTi._INBOX.g.1");
        assert_eq!(
            r.routed_for("$G", b"_INBOX.g.1").as_deref(),
            Some(&b"_GR_.Q9nuOZ.JuPUTi._INBOX.g.1"[..])
        );
        assert!(r.routed_for("A", b"_INBOX.g.1").is_none());
    }
}
