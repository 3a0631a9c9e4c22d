//! TLS settings (`tls { cert_file, key_file, ca_file, verify, insecure, timeout, cipher_suites,
//! curve_preferences }`) turned into rustls configurations, and nats-server's names for what a
//! handshake negotiated. Pure setup: no sockets. Certificates and keys are PEM files.

pub mod cert;
pub mod dn;
pub mod system_roots;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

/// A `tls {}` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsOpts {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// CA bundle that peers' certificates must chain to.
    pub ca_file: Option<PathBuf>,
    /// Require and verify the peer's certificate on accepted connections.
    pub verify: bool,
    /// Do not verify the server's certificate when dialling (testing only).
    pub insecure: bool,
    pub timeout: Duration,
    /// nats-server (Go) cipher suite names; empty: rustls' defaults. As in Go, they restrict
    /// TLS 1.2 only: the TLS 1.3 suites stay enabled.
    pub cipher_suites: Vec<String>,
    /// Key exchange groups in order of preference (`X25519`, `CurveP256`, `CurveP384`); empty:
    /// rustls' defaults.
    pub curve_preferences: Vec<String>,
    /// Client port only (2.10+ `handshake_first`): the client starts TLS before any INFO.
    /// `Some(ZERO)`: always (`true`); `Some(d)`: if the client sends nothing within `d`,
    /// INFO goes out in the clear as usual (`"300ms"`, `"auto"` = 50 ms); `None`: off.
    pub handshake_first: Option<Duration>,
    /// `verify_and_map`: the client's user is the one its certificate names (implies
    /// `verify`).
    pub verify_and_map: bool,
    /// `pinned_certs`: lower-case hex SHA-256 of the peer certificates' SubjectPublicKeyInfo;
    /// a peer whose key is not listed is refused after the handshake. `None`: no pinning (an
    /// empty list is none, as nats-server).
    pub pinned_certs: Option<BTreeSet<String>>,
    /// `verify_cert_and_check_known_urls` (routes, gateways; implies `verify`): an accepted
    /// peer's certificate must carry a DNS name matching the host of a configured URL.
    pub check_known_urls: bool,
}

impl Default for TlsOpts {
    fn default() -> Self {
        TlsOpts {
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            ca_file: None,
            verify: false,
            insecure: false,
            timeout: Duration::from_secs(2),
            cipher_suites: Vec::new(),
            curve_preferences: Vec::new(),
            handshake_first: None,
            verify_and_map: false,
            pinned_certs: None,
            check_known_urls: false,
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

use rustls::crypto::ring::cipher_suite as cs;

/// nats-server's cipher suite names (its `cipherMap`, Go's names) and rustls' suites; `None`:
/// known to nats-server but not offered by rustls (CBC, RC4, 3DES, RSA key exchange).
const CIPHERS: &[(&str, Option<rustls::SupportedCipherSuite>)] = &[
    ("TLS_AES_128_GCM_SHA256", Some(cs::TLS13_AES_128_GCM_SHA256)),
    ("TLS_AES_256_GCM_SHA384", Some(cs::TLS13_AES_256_GCM_SHA384)),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        Some(cs::TLS13_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Some(cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Some(cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        Some(cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Some(cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Some(cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        Some(cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    ("TLS_RSA_WITH_RC4_128_SHA", None),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", None),
];

/// A `cipher_suites` entry: nats-server's `unrecognized cipher X` for a name Go does not know.
pub fn cipher_suite(name: &str) -> Result<rustls::SupportedCipherSuite, String> {
    match CIPHERS.iter().find(|(n, _)| *n == name) {
        Some((_, Some(s))) => Ok(*s),
        Some((_, None)) => Err(format!(
            "cipher {name} is not supported by natsd (rustls offers only AEAD suites with \
             ECDHE key exchange)"
        )),
        None => Err(format!("unrecognized cipher {name}")),
    }
}

/// A `curve_preferences` entry (Go's names).
pub fn curve(name: &str) -> Result<&'static dyn rustls::crypto::SupportedKxGroup, String> {
    use rustls::crypto::ring::kx_group;
    match name {
        "X25519" => Ok(kx_group::X25519),
        "CurveP256" => Ok(kx_group::SECP256R1),
        "CurveP384" => Ok(kx_group::SECP384R1),
        "CurveP521" => Err(format!(
            "curve preference {name} is not supported by natsd (rustls/ring has no P-521 key \
             exchange)"
        )),
        _ => Err(format!("unrecognized curve preference {name}")),
    }
}

/// The crypto provider for `o`: rustls' ring defaults narrowed by `cipher_suites` and
/// `curve_preferences`.
fn provider_for(o: &TlsOpts) -> Result<Arc<rustls::crypto::CryptoProvider>, String> {
    let mut p = rustls::crypto::ring::default_provider();
    // Go's preference (with AES hardware): AES-128-GCM first, then AES-256-GCM, then
    // ChaCha20; servers pick by their own order, so clients see nats-server's choices.
    p.cipher_suites = CIPHERS.iter().filter_map(|(_, s)| *s).collect();
    if !o.cipher_suites.is_empty() {
        let mut suites: Vec<rustls::SupportedCipherSuite> = p
            .cipher_suites
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .copied()
            .collect();
        for n in &o.cipher_suites {
            let s = cipher_suite(n)?;
            if !suites.iter().any(|x| x.suite() == s.suite()) {
                suites.push(s);
            }
        }
        p.cipher_suites = suites;
    }
    if !o.curve_preferences.is_empty() {
        p.kx_groups = o
            .curve_preferences
            .iter()
            .map(|n| curve(n))
            .collect::<Result<_, _>>()?;
    }
    Ok(Arc::new(p))
}

/// nats-server's `/connz` `tls_version` (`"1.3"`) and `tls_cipher_suite` (Go's name) for a
/// finished handshake.
pub fn negotiated(c: &rustls::CommonState) -> (String, String) {
    let version = match c.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "1.3".to_string(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "1.2".to_string(),
        Some(v) => format!("{v:?}"),
        None => String::new(),
    };
    let suite = match c.negotiated_cipher_suite() {
        Some(s) => CIPHERS
            .iter()
            .find(|(_, x)| x.is_some_and(|x| x.suite() == s.suite()))
            .map(|(n, _)| n.to_string())
            .unwrap_or_else(|| format!("{:?}", s.suite())),
        None => String::new(),
    };
    (version, suite)
}

/// The `pinned_certs` of the block that governs connections of `kind` (the `cluster`,
/// `gateway` or `leafnodes` block's `tls`) in options `o` — the live ones, which a reload
/// may change.
pub fn live_pins(
    o: &crate::config::Options,
    kind: crate::conn::ConnKind,
) -> Option<BTreeSet<String>> {
    use crate::conn::ConnKind;
    let tls = match kind {
        ConnKind::Route => o.cluster.as_ref().and_then(|c| c.tls.as_ref()),
        ConnKind::Gateway => o.gateway.as_ref().and_then(|g| g.tls.as_ref()),
        ConnKind::Leaf => o.leafnodes.as_ref().and_then(|l| l.tls.as_ref()),
        _ => o.tls.as_ref(),
    };
    tls.and_then(|t| t.pinned_certs.clone())
}

/// A `pinned_certs` entry as nats-server takes it: 64 hex digits, kept in lower case.
pub fn pinned_cert_key(entry: &str) -> Result<String, String> {
    let e = entry.to_ascii_lowercase();
    if e.len() == 64 && e.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(e)
    } else {
        Err(format!(
            "error parsing tls config, 'pinned_certs' key {e} does not look like hex-encoded \
             sha256 of DER encoded SubjectPublicKeyInfo"
        ))
    }
}

/// nats-server's check after a handshake: with `pinned_certs`, the peer's first certificate's
/// key must be listed (`certificate not pinned` otherwise; the reason goes to the debug log
/// with `prefix`).
pub fn check_pinned(
    pinned: Option<&BTreeSet<String>>,
    peer: Option<&[CertificateDer<'_>]>,
    prefix: &str,
) -> Result<(), String> {
    let Some(pinned) = pinned else {
        return Ok(());
    };
    let Some(first) = peer.and_then(|c| c.first()) else {
        tracing::debug!(
            "{prefix} - Failed pinned cert test as client did not provide a certificate"
        );
        return Err("certificate not pinned".into());
    };
    let d = ring::digest::digest(&ring::digest::SHA256, spki_of(first).unwrap_or_default());
    let key = data_encoding::HEXLOWER.encode(d.as_ref());
    if pinned.contains(&key) {
        Ok(())
    } else {
        tracing::debug!("{prefix} - Failed pinned cert test for key id: {key}");
        Err("certificate not pinned".into())
    }
}

/// `verify_cert_and_check_known_urls` as nats-server checks an accepted route or gateway:
/// one of the certificate's SAN DNS names (only those: not its IP addresses, emails or
/// subject) matches the host of one of `urls` (its configured routes, or its gateways'
/// URLs). Labels compare without case; a `*` left-most label matches any one label.
pub fn known_url_peer<'a>(
    cert: Option<&cert::PeerCert>,
    urls: impl IntoIterator<Item = &'a String>,
) -> bool {
    let Some(cert) = cert else {
        return false;
    };
    let hosts: Vec<String> = urls
        .into_iter()
        .filter_map(|u| crate::cluster::url::RouteUrl::parse(u).ok())
        .map(|u| u.host.to_ascii_lowercase())
        .collect();
    let hit = cert.dns_names.iter().find(|name| {
        let labels: Vec<String> = name
            .to_ascii_lowercase()
            .split('.')
            .map(String::from)
            .collect();
        hosts.iter().any(|h| {
            let host: Vec<&str> = h.split('.').collect();
            host.len() == labels.len()
                && labels
                    .iter()
                    .zip(&host)
                    .enumerate()
                    .all(|(i, (l, h))| (i == 0 && l == "*") || l == h)
        })
    });
    match hit {
        Some(name) => tracing::debug!("Using SAN found in cert for auth [{name:?}]"),
        None => tracing::debug!("User in cert [{:?}], not found", cert.subject),
    }
    hit.is_some()
}

/// An accepted route's or gateway's certificate as nats-server's `isRouterAuthorized` /
/// `isGatewayAuthorized` judge it when its block's tls has `verify_cert_and_check_known_urls`
/// (a DNS name naming a host of `urls`) or `verify_and_map` (one of its names, as they are,
/// is the block's `authorization` user: its password is not asked for). `None` when
/// neither is on: the CONNECT's credentials decide.
pub fn peer_cert_authorized<'a>(
    t: Option<&TlsOpts>,
    cert: Option<&cert::PeerCert>,
    user: Option<&str>,
    urls: impl IntoIterator<Item = &'a String>,
) -> Option<bool> {
    let t = t.filter(|t| t.verify_and_map || t.check_known_urls)?;
    if t.check_known_urls && known_url_peer(cert, urls) {
        return Some(true);
    }
    let mapped = t.verify_and_map
        && cert
            .zip(user)
            .is_some_and(|(c, u)| c.names().iter().any(|n| n == u));
    Some(mapped)
}

/// The SubjectPublicKeyInfo of a DER certificate.
fn spki_of<'a>(c: &'a CertificateDer<'_>) -> Option<&'a [u8]> {
    cert::spki(c.as_ref()).ok()
}

fn read(path: &PathBuf, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("error reading {what} {}: {e}", path.display()))
}

/// The DER certificates of a PEM file (a `ca_file`).
pub fn der_certs(path: &PathBuf) -> Result<Vec<Vec<u8>>, String> {
    Ok(certs(path)?.iter().map(|c| c.as_ref().to_vec()).collect())
}

fn certs(path: &PathBuf) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, "certificate file")?;
    let v: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    let v = v.map_err(|e| format!("error parsing certificates in {}: {e}", path.display()))?;
    if v.is_empty() {
        return Err(format!("no certificate found in {}", path.display()));
    }
    Ok(v)
}

fn key(path: &PathBuf) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path, "key file")?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| format!("error parsing private key in {}: {e}", path.display()))
}

fn roots(path: &PathBuf) -> Result<rustls::RootCertStore, String> {
    let mut store = rustls::RootCertStore::empty();
    for c in certs(path)? {
        store
            .add(c)
            .map_err(|e| format!("bad CA certificate in {}: {e}", path.display()))?;
    }
    Ok(store)
}

/// Configuration for accepting TLS connections.
pub fn server_config(o: &TlsOpts) -> Result<Arc<rustls::ServerConfig>, String> {
    let builder = rustls::ServerConfig::builder_with_provider(provider_for(o)?)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if o.verify {
        let ca = o.ca_file.as_ref().ok_or(
            "tls verify needs a ca_file to verify peers against (natsd does not use the \
                 system's CA store)",
        )?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots(ca)?),
            provider(),
        )
        .build()
        .map_err(|e| format!("tls verify: {e}"))?;
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let cfg = builder
        .with_single_cert(certs(&o.cert_file)?, key(&o.key_file)?)
        .map_err(|e| format!("tls certificate/key: {e}"))?;
    let mut cfg = cfg;
    cfg.ignore_client_order = true;
    Ok(Arc::new(cfg))
}

/// Configuration for dialling TLS connections (routes, gateways, leafnode remotes);
/// presents our certificate to the peer. natsd verifies these peers against a `ca_file`.
pub fn client_config(o: &TlsOpts) -> Result<Arc<rustls::ClientConfig>, String> {
    if !o.insecure && o.ca_file.is_none() {
        return Err("tls needs a ca_file to verify servers against (or insecure: true)".into());
    }
    dial_config(o)
}

/// A dialler's configuration as Go's from nats-server's `GenTLSConfig`: the server is
/// verified against `ca_file`, or without one against the system's trust store
/// (`tls/system_roots.rs`), or not at all with `insecure`; our certificate is presented when the block
/// names one (the URL resolver's `resolver_tls`).
pub fn dial_config(o: &TlsOpts) -> Result<Arc<rustls::ClientConfig>, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider_for(o)?)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
    } else {
        let trusted = match &o.ca_file {
            Some(ca) => roots(ca)?,
            None => system_roots::load()?,
        };
        builder.with_root_certificates(trusted)
    };
    let cfg = if o.cert_file.as_os_str().is_empty() && o.key_file.as_os_str().is_empty() {
        builder.with_no_client_auth()
    } else {
        builder
            .with_client_auth_cert(certs(&o.cert_file)?, key(&o.key_file)?)
            .map_err(|e| format!("tls certificate/key: {e}"))?
    };
    Ok(Arc::new(cfg))
}

/// The name to verify a dialled server as: its IP address or DNS name.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("bad TLS server name {host:?}: {e}"))
}

/// Go's words (`crypto/tls`, `crypto/x509`) for a TLS exchange that failed as a client: what
/// nats-server's HTTP client reports (after `Get "url": `). Other errors as they are.
pub fn go_client_error(e: &std::io::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    let Some(r) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return e.to_string();
    };
    match r {
        E::InvalidCertificate(c) => {
            let why = match c {
                // A bad signature: an issuer of the same name that did not sign it (Go adds
                // "possibly because of … while trying to verify candidate authority …").
                C::UnknownIssuer | C::BadSignature => {
                    "certificate signed by unknown authority".to_string()
                }
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    "certificate is not valid for the server's name".to_string()
                }
                C::Expired
                | C::ExpiredContext { .. }
                | C::NotValidYet
                | C::NotValidYetContext { .. } => {
                    "certificate has expired or is not yet valid".to_string()
                }
                other => format!("{other:?}"),
            };
            format!("tls: failed to verify certificate: x509: {why}")
        }
        E::AlertReceived(a) => {
            let name = match a {
                A::UnknownCA => "unknown certificate authority".to_string(),
                A::ProtocolVersion => "protocol version not supported".to_string(),
                A::CertificateExpired => "expired certificate".to_string(),
                // `CertificateRequired` -> `certificate required`, as Go names the rest.
                other => {
                    let mut n = String::new();
                    for ch in format!("{other:?}").chars() {
                        if ch.is_ascii_uppercase() && !n.is_empty() {
                            n.push(' ');
                        }
                        n.push(ch.to_ascii_lowercase());
                    }
                    n
                }
            };
            format!("remote error: tls: {name}")
        }
        other => format!("tls: {other}"),
    }
}

/// `insecure: true`: accept any server certificate (signatures are still checked).
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
