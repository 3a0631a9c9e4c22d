//! A leaf's CONNECT (the fields natsd reads and sends) and how a hub authenticates it.

use crate::auth::{nonempty, Authenticator, Credentials, Identity};
use crate::config::leaf::{LeafOpts, RemoteCreds};
use std::net::IpAddr;

/// The leaf CONNECT fields natsd reads (nats-server 2.9 and 2.15 send these and more).
#[derive(serde::Deserialize, serde::Serialize, Default, Debug)]
#[serde(default)]
pub(super) struct LeafConnect {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub server_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub headers: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pass: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub auth_token: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub jwt: String,
    /// An nkey user's public key, and its signature of the hub's INFO `nonce` (also sent
    /// with a user JWT).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nkey: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sig: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub remote_account: String,
    /// The dialler acts as the hub of this connection (a remote's `hub: true`).
    #[serde(rename = "is_hub", skip_serializing_if = "std::ops::Not::not")]
    pub hub: bool,
    /// A leaf's `deny_imports`: the hub must not send it these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny_pub: Vec<String>,
    /// The leaf's JetStream domain.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// The leaf's negotiated compression mode (nats-server 2.10+).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub compress_mode: String,
}

impl LeafConnect {
    /// The CONNECT's credentials as a client's (a leaf logging in as a client does: the
    /// connection type `LEAFNODE`), with our nonce, its address and certificate.
    pub(super) fn creds<'a>(
        &'a self,
        nonce: &'a [u8],
        host: IpAddr,
        cert: Option<&'a crate::tls::cert::PeerCert>,
    ) -> Credentials<'a> {
        Credentials {
            user: nonempty(&self.user),
            pass: nonempty(&self.pass),
            token: nonempty(&self.auth_token),
            nkey: nonempty(&self.nkey),
            sig: nonempty(&self.sig),
            nonce,
            jwt: nonempty(&self.jwt),
            host: Some(host),
            leaf: true,
            cert,
        }
    }
}

/// The account a leaf CONNECT binds to, or None when its credentials are wrong. The
/// `leafnodes { authorization }` block decides when it has credentials (users, a user and
/// password, a token, or an `nkey` that must sign the nonce); without them a leaf
/// logs in as a client does (users, tokens, nkeys, user JWTs in operator mode — connection
/// type `LEAFNODE`), and when the server needs no auth at all it binds to the block's
/// `account` (nats-server's `isLeafNodeAuthorized`).
pub(super) fn authenticate(
    auth: &Authenticator,
    o: &LeafOpts,
    ci: &LeafConnect,
    nonce: &[u8],
    host: IpAddr,
    cert: Option<&crate::tls::cert::PeerCert>,
) -> Option<Identity> {
    let default = o
        .account
        .clone()
        .unwrap_or_else(|| crate::account::GLOBAL_ACCOUNT.to_string());
    let bind = |account: String| Identity {
        user: ci.user.clone(),
        account,
        perms: None,
        expires: 0,
        jwt_limits: None,
        name_tag: String::new(),
    };
    if !o.users.is_empty() {
        let mapped = o.tls.as_ref().is_some_and(|t| t.verify_and_map);
        let u = if mapped {
            // nats-server: the certificate names one of these users (its names as they are;
            // no DN matching here); the user's password, if any, is still checked.
            let Some(cert) = cert else {
                tracing::debug!("User required in cert, no TLS connection state");
                return None;
            };
            let names = cert.names();
            let u = names
                .iter()
                .find_map(|n| o.users.iter().find(|u| u.user == *n))?;
            if !ci.user.is_empty() {
                tracing::warn!(
                    "User {:?} found in connect proto, but user required from cert",
                    ci.user
                );
            }
            u
        } else {
            o.users.iter().find(|u| u.user == ci.user)?
        };
        let presented = if mapped { &u.user } else { &ci.user };
        return crate::auth::peer_credentials_ok(
            None,
            Some(&u.user),
            Some(&u.password),
            presented,
            &ci.pass,
        )
        .then(|| bind(u.account.clone().unwrap_or(default)));
    }
    if let Some(key) = &o.nkey {
        // nats-server: the CONNECT's nkey must be this one, and have signed our nonce.
        let signed = ci.nkey == *key && crate::auth::nonce_signed(key, nonce, Some(&ci.sig));
        return signed.then(|| bind(default));
    }
    if o.token.is_none() && o.username.is_none() {
        if !auth.required() {
            return Some(bind(default));
        }
        return auth.authenticate(ci.creds(nonce, host, cert));
    }
    let presented = if ci.pass.is_empty() && !ci.auth_token.is_empty() {
        (ci.user.as_str(), ci.auth_token.as_str())
    } else {
        (ci.user.as_str(), ci.pass.as_str())
    };
    crate::auth::peer_credentials_ok(
        o.token.as_deref(),
        o.username.as_deref(),
        o.password.as_deref(),
        presented.0,
        presented.1,
    )
    .then(|| bind(default))
}

/// A remote's own credentials (`credentials` file or `nkey` seed) put into its CONNECT: the
/// user JWT, the public key, and the signature of the hub's `nonce` (read at every dial, as
/// nats-server does, so a renewed file is picked up).
pub(super) fn sign(creds: &RemoteCreds, nonce: &[u8], ci: &mut LeafConnect) -> Result<(), String> {
    let seed = match creds {
        RemoteCreds::None => return Ok(()),
        RemoteCreds::File(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading credentials file {path:?}: {e}"))?;
            let (jwt, seed) = crate::jwt::parse_creds(&text)
                .map_err(|e| format!("credentials file {path:?}: {e}"))?;
            ci.jwt = jwt;
            seed
        }
        RemoteCreds::Seed(seed) => seed.clone(),
    };
    let kp = nkeys::KeyPair::from_seed(&seed).map_err(|e| format!("bad nkey seed: {e}"))?;
    let sig = kp
        .sign(nonce)
        .map_err(|e| format!("signing the hub's nonce: {e}"))?;
    ci.sig = data_encoding::BASE64URL_NOPAD.encode(&sig);
    if matches!(creds, RemoteCreds::Seed(_)) {
        ci.nkey = kp.public_key();
    }
    Ok(())
}

/// The start of a hub's `-ERR` for a leaf under its `min_version` (the version follows, quoted).
pub(crate) const MIN_VERSION_REJECTED: &str =
    "connection rejected since minimum version required is";

/// `major.minor.patch` of a semantic version (a pre-release or build suffix allowed, no
/// leading zeros), as nats-server's `versionComponents`; None when it is not one.
pub(crate) fn version(v: &str) -> Option<(u64, u64, u64)> {
    let core = v.split(['-', '+']).next().unwrap_or("");
    let mut parts = core.split('.');
    let mut next = || -> Option<u64> {
        let p = parts.next()?;
        let ok = !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && (p == "0" || !p.starts_with('0'));
        ok.then(|| p.parse().ok()).flatten()
    };
    let v = (next()?, next()?, next()?);
    parts.next().is_none().then_some(v)
}

/// Is `v` a version at least `min` (false when either is not a version)?
pub(crate) fn version_at_least(v: &str, min: &str) -> bool {
    matches!((version(v), version(min)), (Some(a), Some(b)) if a >= b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_nats_server_reads_them() {
        assert_eq!(version("2.15.1"), Some((2, 15, 1)));
        assert_eq!(version("2.11.0-RC.2"), Some((2, 11, 0)));
        for bad in ["", "2.10", "v2.10.0", "2.010.0", "2.10.0.1", "a.b.c"] {
            assert_eq!(version(bad), None, "{bad}");
        }
        assert!(version_at_least("2.10.0", "2.8.0"));
        assert!(version_at_least("2.8.0", "2.8.0"));
        assert!(!version_at_least("2.7.9", "2.8.0"));
        assert!(!version_at_least("", "2.8.0"), "no version is too old");
    }
}
