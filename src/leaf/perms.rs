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
//! - On every link, whatever was configured, JetStream's own traffic stays on its side
//!   (nats-server's `addLeafNodeConnection`): `$JS.API.>`, `$KV.>` and `$OBJ.>` are denied
//!   both ways (the system account's link also `$JSC.>` and `$NRG.>`: natsd never extends a
//!   JetStream domain over a leaf), so each side's JetStream answers only its own clients
//!   and the other's is reached by its domain, `$JS.<domain>.API.>`. A server whose
//!   JetStream has a domain the peer does not share sends no `$JS.<domain>.API.>` over it.

use crate::auth::CompiledPerms;
use crate::config::{Permissions, SubjectPermission};
use crate::conn::Conn;
use std::sync::Arc;

fn valid(subjects: &[String]) -> Vec<String> {
    subjects
        .iter()
        .filter(|s| crate::subject::is_valid_subject(s.as_bytes()))
        .cloned()
        .collect()
}

/// One direction: an allow list (when there is one) and the valid deny subjects.
fn rules(allow: Option<&[String]>, deny: &[String]) -> Option<SubjectPermission> {
    let deny = valid(deny);
    (allow.is_some() || !deny.is_empty()).then(|| SubjectPermission {
        allow: allow.map(valid).unwrap_or_default(),
        deny,
    })
}

/// JetStream traffic no link of an ordinary account carries (`denyAllClientJs`).
const DENY_CLIENT_JS: [&str; 3] = ["$JS.API.>", "$KV.>", "$OBJ.>"];
/// ... nor one of the system account (`denyAllJs`).
const DENY_ALL_JS: [&str; 5] = ["$JSC.>", "$NRG.>", "$JS.API.>", "$KV.>", "$OBJ.>"];

/// One link's permissions: the configured denies (a spoke: its remote's `deny_exports` to
/// publish, `deny_imports` to subscribe; a hub: the leaf's CONNECT `deny_pub` to publish,
/// invalid subjects skipped as nats-server's `mergeDenyPermissions` does), then JetStream's.
pub struct LinkPerms<'a> {
    /// What may be sent over the link (None: anything not denied): a hub's from the
    /// user the leaf logged in as (its subscribe rules), a leaf's from the hub's INFO
    /// `export`.
    pub allow_pub: Option<&'a [String]>,
    pub deny_pub: &'a [String],
    /// What interest may be told to the peer and taken from it: a leaf's from the hub's
    /// INFO `import`.
    pub allow_sub: Option<&'a [String]>,
    pub deny_sub: &'a [String],
    /// The link is bound to the system account.
    pub system: bool,
    /// This server's JetStream domain, when its JetStream runs with one.
    pub domain: Option<&'a str>,
    /// The peer's domain (INFO or CONNECT `domain`; empty: none).
    pub remote_domain: &'a str,
}

impl LinkPerms<'_> {
    pub fn compile(&self) -> Arc<CompiledPerms> {
        let js: &[&str] = if self.system {
            &DENY_ALL_JS
        } else {
            &DENY_CLIENT_JS
        };
        let with_js = |own: &[String]| -> Vec<String> {
            own.iter()
                .cloned()
                .chain(js.iter().map(|s| s.to_string()))
                .collect()
        };
        let mut publish = with_js(self.deny_pub);
        if let Some(d) = self.domain.filter(|d| *d != self.remote_domain) {
            publish.push(format!("$JS.{d}.API.>"));
        }
        Arc::new(CompiledPerms::new(&Permissions {
            publish: rules(self.allow_pub, &publish),
            subscribe: rules(self.allow_sub, &with_js(self.deny_sub)),
            allow_responses: None,
        }))
    }
}

/// Subjects a peer's `LS+` and a spoke's inbound messages are not checked for: loop detection,
/// gateway-routed replies, service-import replies and JetStream acks.
pub(super) fn exempt(subject: &[u8]) -> bool {
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

    fn link(deny_pub: &[String], deny_sub: &[String]) -> Option<Arc<CompiledPerms>> {
        Some(
            LinkPerms {
                allow_pub: None,
                deny_pub,
                allow_sub: None,
                deny_sub,
                system: false,
                domain: None,
                remote_domain: "",
            }
            .compile(),
        )
    }

    fn remote(imports: &[String], exports: &[String]) -> Option<Arc<CompiledPerms>> {
        link(exports, imports)
    }

    fn hub(deny_pub: &[String]) -> Option<Arc<CompiledPerms>> {
        link(deny_pub, &[])
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
    fn invalid_subjects_are_skipped_and_no_permissions_deny_nothing() {
        let c = leaf(hub(&["foo..bar".into(), "a.b".into()]));
        assert!(!may_send(&c, b"a.b") && may_tell(&c, b"a.b"));
        assert!(may_send(&c, b"foo.x"));
        let open = leaf(None);
        assert!(may_send(&open, b"x") && may_tell(&open, b"x") && may_receive(&open, b"x"));
    }

    #[test]
    fn jetstream_stays_on_its_side_and_a_domain_is_reached_by_name() {
        let perms = |system, domain, remote_domain| {
            leaf(Some(
                LinkPerms {
                    allow_pub: None,
                    deny_pub: &[],
                    allow_sub: None,
                    deny_sub: &[],
                    system,
                    domain,
                    remote_domain,
                }
                .compile(),
            ))
        };
        let c = perms(false, Some("hub"), "leaf");
        for s in [&b"$JS.API.STREAM.INFO.S"[..], b"$KV.b.k", b"$OBJ.o.x"] {
            assert!(
                !may_send(&c, s) && !may_tell(&c, s) && !may_receive(&c, s),
                "{s:?}"
            );
        }
        // The peer's domain crosses; ours stays here (its requests are for us).
        assert!(may_send(&c, b"$JS.leaf.API.STREAM.INFO.S"));
        assert!(!may_send(&c, b"$JS.hub.API.STREAM.INFO.S"));
        assert!(may_tell(&c, b"$JS.hub.API.STREAM.INFO.*"));
        // The same domain on both sides: nothing of it is held back.
        let same = perms(false, Some("d"), "d");
        assert!(may_send(&same, b"$JS.d.API.INFO"));
        // Cluster and Raft traffic only on the system account's link.
        assert!(may_send(&c, b"$NRG.x") && may_send(&c, b"$JSC.x"));
        let sys = perms(true, None, "");
        assert!(!may_send(&sys, b"$NRG.x") && !may_tell(&sys, b"$JSC.>"));
    }
}
