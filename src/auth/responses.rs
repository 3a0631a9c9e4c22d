//! Response permissions (a user JWT's `resp { max, ttl }`): a client may publish to the
//! reply subject of a message it received, even where its publish permissions deny it, at
//! most `max` times and within `ttl` of the delivery — nats-server's `client.replies`
//! (`client.go` `deliverMsg`, `pubAllowedFullCheck`, `responseAllowed`, `pruneReplyPerms`).
//! The tracker lives on the connection ([`crate::conn::Conn::responses`]): deliveries record
//! reply subjects from the publisher's task, the client's own task checks its publishes.

use super::CompiledPerms;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// nats-server's defaults for a 0 `max` or `ttl`.
pub const DEFAULT_MAX: i64 = 1;
pub const DEFAULT_TTL: Duration = Duration::from_secs(120);
/// Prune after this many new replies, or this long (nats-server's `replyPermLimit`,
/// `replyPruneTime`).
const PRUNE_EVERY: usize = 4096;
const PRUNE_AFTER: Duration = Duration::from_secs(1);

/// How many responses per reply subject (`max`; negative: any) and for how long (`ttl`;
/// `None`: forever).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponsePerm {
    pub max: i64,
    pub ttl: Option<Duration>,
}

impl ResponsePerm {
    /// A JWT's `resp` object (`ttl` in nanoseconds), with nats-server's defaults for 0.
    pub fn from_jwt(v: &serde_json::Value) -> Option<ResponsePerm> {
        if !v.is_object() {
            return None;
        }
        let max = match v["max"].as_i64().unwrap_or(0) {
            0 => DEFAULT_MAX,
            n => n,
        };
        let ttl = match v["ttl"].as_i64().unwrap_or(0) {
            0 => Some(DEFAULT_TTL),
            n if n < 0 => None,
            n => Some(Duration::from_nanos(n as u64)),
        };
        Some(ResponsePerm { max, ttl })
    }
}

struct Reply {
    at: Instant,
    sent: i64,
}

#[derive(Default)]
struct Table {
    replies: HashMap<Vec<u8>, Reply>,
    since_prune: usize,
    last_prune: Option<Instant>,
}

/// One connection's reply subjects it may answer.
pub struct Responses {
    perm: ResponsePerm,
    /// The client's publish permissions (a reply they allow anyway is not tracked).
    perms: Arc<CompiledPerms>,
    table: Mutex<Table>,
}

impl Responses {
    pub fn new(perm: ResponsePerm, perms: Arc<CompiledPerms>) -> Self {
        Responses {
            perm,
            perms,
            table: Mutex::new(Table::default()),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A message with reply subject `reply` was delivered to this client.
    pub fn track(&self, reply: &[u8]) {
        if self.perms.can_publish(reply) {
            return;
        }
        let now = Instant::now();
        let mut t = self.table();
        t.replies.insert(reply.to_vec(), Reply { at: now, sent: 0 });
        t.since_prune += 1;
        let stale = t.last_prune.is_none_or(|l| now - l > PRUNE_AFTER);
        if t.since_prune > PRUNE_EVERY || stale {
            let perm = self.perm;
            t.replies.retain(|_, r| !expired(perm, r, now, r.sent));
            t.since_prune = 0;
            t.last_prune = Some(now);
        }
    }

    /// Whether a publish to `subject` (which the permissions deny) answers a tracked reply;
    /// each one counts against `max`.
    pub fn allow(&self, subject: &[u8]) -> bool {
        let now = Instant::now();
        let mut t = self.table();
        let Some(r) = t.replies.get_mut(subject) else {
            return false;
        };
        r.sent += 1;
        let over = (self.perm.max > 0 && r.sent > self.perm.max)
            || self.perm.ttl.is_some_and(|ttl| now - r.at > ttl);
        if over {
            t.replies.remove(subject);
        }
        !over
    }
}

/// Used up (at `sent` answers) or past its time.
fn expired(perm: ResponsePerm, r: &Reply, now: Instant, sent: i64) -> bool {
    (perm.max > 0 && sent >= perm.max) || perm.ttl.is_some_and(|ttl| now - r.at > ttl)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Permissions, SubjectPermission};

    #[test]
    fn replies_are_answered_max_times() {
        let perms = Arc::new(CompiledPerms::new(&Permissions {
            allow_responses: None,
            publish: Some(SubjectPermission {
                allow: vec!["ok".into()],
                deny: vec![],
            }),
            subscribe: None,
        }));
        let perm = ResponsePerm::from_jwt(&serde_json::json!({"max": 2})).expect("resp");
        assert_eq!(perm.ttl, Some(DEFAULT_TTL));
        let r = Responses::new(perm, perms);
        assert!(!r.allow(b"_INBOX.1"));
        r.track(b"_INBOX.1");
        r.track(b"ok");
        assert!(r.allow(b"_INBOX.1"));
        assert!(r.allow(b"_INBOX.1"));
        assert!(!r.allow(b"_INBOX.1"));
        assert!(!r.allow(b"ok"), "allowed anyway, not tracked");
        // Past its ttl: refused (and forgotten).
        r.track(b"_INBOX.2");
        if let Some(e) = r.table().replies.get_mut(&b"_INBOX.2"[..]) {
            e.at = e.at.checked_sub(DEFAULT_TTL * 2).unwrap_or(e.at);
        }
        assert!(!r.allow(b"_INBOX.2"));
        let forever = ResponsePerm::from_jwt(&serde_json::json!({"max": -1, "ttl": -1}));
        assert_eq!(forever, Some(ResponsePerm { max: -1, ttl: None }));
        assert_eq!(ResponsePerm::from_jwt(&serde_json::Value::Null), None);
    }
}
