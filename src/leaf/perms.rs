//! Leafnode permissions, as nats-server 2.15.1 applies them (watched on loopback:
//! docs/nats-server-behaviour.md §33). A connection's permissions are `Conn::leaf_perms`:
//! `publish` denies what is never sent over it, `subscribe` denies interest never told to it.
//!
//! - A remote's `deny_exports` is its connection's publish deny: no message on those subjects
//!   goes to the hub, and the hub's literal `LS+` for one is ignored (logged at debug).
//! - A remote's `deny_imports` is its subscribe deny: no `LS+` is sent for interest it covers,
//!   a message on such a subject from the hub is dropped, and the hub is told in CONNECT
//!   `deny_pub`.
//! - A hub takes a leaf's CONNECT `deny_pub` as that connection's publish deny: no message on
//!   those subjects goes to the leaf, and a literal `LS+` for one is a violation (`-ERR
//!   'Permissions Violation for Subscription to "x"'`, the connection closed).

use crate::auth::CompiledPerms;
use crate::config::{Permissions, SubjectPermission};
use crate::conn::Conn;
use std::sync::Arc;

fn deny(subjects: &[String]) -> Option<SubjectPermission> {
    let valid: Vec<String> = subjects
        .iter()
        .filter(|s| crate::subject::is_valid_subject(s.as_bytes()))
        .cloned()
        .collect();
    (!valid.is_empty()).then(|| SubjectPermission {
        allow: Vec::new(),
        deny: valid,
    })
}

fn compile(publish: &[String], subscribe: &[String]) -> Option<Arc<CompiledPerms>> {
    let p = Permissions {
        publish: deny(publish),
        subscribe: deny(subscribe),
    };
    (p.publish.is_some() || p.subscribe.is_some()).then(|| Arc::new(CompiledPerms::new(&p)))
}

/// A remote's permissions (nats-server's `newLeafNodeCfg`): exports denied to publish,
/// imports denied to subscribe.
pub fn remote(deny_imports: &[String], deny_exports: &[String]) -> Option<Arc<CompiledPerms>> {
    compile(deny_exports, deny_imports)
}

/// A hub's permissions for a leaf that sent CONNECT `deny_pub` (its `deny_imports`); invalid
/// subjects in it are skipped, as nats-server's `mergeDenyPermissions` does.
pub fn hub(deny_pub: &[String]) -> Option<Arc<CompiledPerms>> {
    compile(deny_pub, &[])
}

/// Subjects a peer's `LS+` and a spoke's inbound messages are not checked for: loop detection,
/// gateway-routed replies, service-import replies and JetStream acks.
fn exempt(subject: &[u8]) -> bool {
    [&b"$LDS."[..], b"$GR.", b"_GR_.", b"_R_.", b"$JS.ACK."]
        .iter()
        .any(|p| subject.starts_with(p))
}

/// May a message on `subject` be sent over `conn` (a leaf's publish permission)?
pub fn may_send(conn: &Conn, subject: &[u8]) -> bool {
    conn.leaf_may_send(subject)
}

/// May interest in `subject` (a pattern) be told to the peer of `conn`?
pub fn may_tell(conn: &Conn, subject: &[u8]) -> bool {
    exempt(subject)
        || conn
            .leaf_perms
            .get()
            .is_none_or(|p| p.can_subscribe(subject))
}

/// A peer's `LS+` for `subject` that its permissions refuse: a literal subject we may not
/// send to it (nats-server checks literal subjects only).
pub fn refuses_interest(conn: &Conn, subject: &[u8]) -> bool {
    !exempt(subject) && !crate::subject::has_wildcard(subject) && !may_send(conn, subject)
}

/// May a spoke take a message on `subject` from its hub (its `deny_imports`)?
pub fn may_receive(conn: &Conn, subject: &[u8]) -> bool {
    may_tell(conn, subject)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::ConnKind;

    fn leaf(perms: Option<Arc<CompiledPerms>>) -> Conn {
        let c = Conn::new(1, ConnKind::Leaf, ([127, 0, 0, 1], 0).into(), 1 << 20);
        if let Some(p) = perms {
            let _ = c.leaf_perms.set(p);
        }
        c
    }

    #[test]
    fn a_remotes_denies_split_into_what_it_sends_and_what_it_is_told() {
        let c = leaf(remote(
            &["imp.deny".into(), "imq.>".into()],
            &["exp.deny".into()],
        ));
        // deny_exports: not sent, and the hub's literal interest in it refused.
        assert!(!may_send(&c, b"exp.deny"));
        assert!(may_send(&c, b"exp.ok"));
        assert!(refuses_interest(&c, b"exp.deny"));
        assert!(!refuses_interest(&c, b"exp.*"), "only literal subjects");
        // deny_imports: not told (a covered wildcard neither), not received.
        assert!(!may_tell(&c, b"imp.deny"));
        assert!(!may_tell(&c, b"imq.x"));
        assert!(!may_tell(&c, b"imq.*"));
        assert!(
            may_tell(&c, b"imp.*"),
            "a wildcard that only overlaps is told"
        );
        assert!(!may_receive(&c, b"imp.deny"));
        assert!(may_receive(&c, b"imp.ok"));
        // Imports do not limit sending, exports do not limit interest.
        assert!(may_send(&c, b"imp.deny"));
        assert!(may_tell(&c, b"exp.deny"));
    }

    #[test]
    fn internal_subjects_are_never_refused() {
        let c = leaf(remote(&[">".into()], &[">".into()]));
        for s in [&b"$LDS.abc"[..], b"_GR_.x.y", b"$GR.x", b"_R_.abc.def"] {
            assert!(may_tell(&c, s) && !refuses_interest(&c, s), "{s:?}");
        }
        assert!(may_receive(&c, b"$JS.ACK.S.C.1.2.3.4.5"));
        assert!(!may_tell(&c, b"foo"));
    }

    #[test]
    fn no_denies_no_permissions() {
        assert!(remote(&[], &[]).is_none());
        assert!(
            hub(&["foo..bar".into()]).is_none(),
            "invalid subjects skipped"
        );
        let c = leaf(hub(&["a.b".into()]));
        assert!(!may_send(&c, b"a.b") && may_tell(&c, b"a.b"));
        let open = leaf(None);
        assert!(may_send(&open, b"x") && may_tell(&open, b"x") && may_receive(&open, b"x"));
    }
}
