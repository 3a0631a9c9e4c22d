//! TLS settings (`tls { cert_file, key_file, ca_file, verify, insecure, timeout }`) turned into
//! rustls configurations. Pure setup: no sockets. Certificates and keys are PEM files.

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
        }
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &PathBuf, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("error reading {what} {}: {e}", path.display()))
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
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if o.verify {
        let ca = o
            .ca_file
            .as_ref()
            .ok_or("tls verify needs a ca_file to verify peers against")?;
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
    Ok(Arc::new(cfg))
}

/// Configuration for dialling TLS connections; presents our certificate to the peer.
pub fn client_config(o: &TlsOpts) -> Result<Arc<rustls::ClientConfig>, String> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if o.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider())))
    } else {
        let ca = o
            .ca_file
            .as_ref()
            .ok_or("tls needs a ca_file to verify servers against (or insecure: true)")?;
        builder.with_root_certificates(roots(ca)?)
    };
    let cfg = builder
        .with_client_auth_cert(certs(&o.cert_file)?, key(&o.key_file)?)
        .map_err(|e| format!("tls certificate/key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// The name to verify a dialled server as: its IP address or DNS name.
pub fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_string()).map_err(|e| format!("bad TLS server name {host:?}: {e}"))
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
