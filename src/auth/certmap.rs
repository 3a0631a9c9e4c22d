//! `verify_and_map`: the user a client certificate names, found as nats-server finds it.

use super::{Credentials, UserEntry};
use crate::tls::cert::PeerCert;
use crate::tls::dn::Dn;
use std::collections::HashMap;

/// The configured user `cert` maps to, in nats-server's order: each SAN email, each SAN DNS
/// name, each SAN URI (a user of that exact name); then a user whose name, read as a DN,
/// equals the subject (RDN by RDN, then in any RDN order); then the subject as Go writes
/// it with the domain components appended (`CN=…,O=…,DC=…`), then without them. Users not
/// allowed on this connection type are skipped.
pub(super) fn mapped_user<'a>(
    cert: &PeerCert,
    users: &'a HashMap<String, UserEntry>,
    c: &Credentials<'_>,
) -> Option<(&'a str, &'a UserEntry)> {
    let exact = |name: &str| {
        users
            .get_key_value(name)
            .filter(|(_, e)| e.allows(c))
            .map(|(k, e)| (k.as_str(), e))
    };
    let sans = [
        ("email", &cert.emails),
        ("SAN", &cert.dns_names),
        ("URI", &cert.uris),
    ];
    for (what, names) in sans {
        if let Some(hit) = names.iter().find_map(|n| exact(n)) {
            tracing::debug!("Using {what} found in cert for auth [{:?}]", hit.0);
            return Some(hit);
        }
    }
    if let Some(subject) = &cert.dn {
        // Sorted, so that which user wins among several is the same every time.
        let mut candidates: Vec<(&String, &UserEntry, Dn)> = users
            .iter()
            .filter(|(_, e)| e.allows(c))
            .filter_map(|(n, e)| Dn::parse(n).ok().map(|dn| (n, e, dn)))
            .collect();
        candidates.sort_by(|a, b| a.0.cmp(b.0));
        let hit = candidates
            .iter()
            .find(|(_, _, dn)| dn.equal(subject))
            .or_else(|| candidates.iter().find(|(_, _, dn)| dn.rdns_match(subject)));
        if let Some((n, e, _)) = hit {
            tracing::debug!("Using DistinguishedNameMatch for auth [{n:?}]");
            return Some((n.as_str(), e));
        }
        tracing::debug!(
            "DistinguishedNameMatch could not be used for auth [{:?}]",
            cert.subject
        );
    }
    if !cert.dcs.is_empty() {
        let with_dcs = format!("{},{}", cert.subject, cert.dcs);
        if let Some(hit) = exact(&with_dcs) {
            tracing::debug!("Using RDNSequence for auth [{:?}]", hit.0);
            return Some(hit);
        }
        tracing::debug!("RDNSequence could not be used for auth [{with_dcs:?}]");
    }
    if let Some(hit) = exact(&cert.subject) {
        tracing::debug!("Using certificate subject for auth [{:?}]", hit.0);
        return Some(hit);
    }
    tracing::debug!("User in cert [{:?}], not found", cert.subject);
    None
}
