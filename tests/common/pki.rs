//! A throwaway PKI for TLS tests: a CA and a node certificate for 127.0.0.1/localhost, as PEM
//! files in a fresh directory removed on drop.

use natsd::tls::TlsOpts;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rcgen::{DistinguishedName, DnType};
#[allow(unused_imports)]
use rcgen::{PublicKeyData, SanType};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

pub struct Pki {
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

impl Pki {
    pub fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!(
            "natsd-pki-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A name of its own: two CAs of one name make a verifier try the wrong one's key.
        let mut ca_name = DistinguishedName::new();
        ca_name.push(DnType::CommonName, format!("natsd test CA {tag}"));
        ca_params.distinguished_name = ca_name;
        let ca =
            CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
        let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params");
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &ca).expect("cert");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write");
        std::fs::write(dir.join("cert.pem"), cert.pem()).expect("write");
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).expect("write");
        Pki { dir, ca }
    }

    /// Mutual TLS with this CA (verify on).
    pub fn opts(&self) -> TlsOpts {
        TlsOpts {
            cert_file: self.dir.join("cert.pem"),
            key_file: self.dir.join("key.pem"),
            ca_file: Some(self.dir.join("ca.pem")),
            verify: true,
            insecure: false,
            timeout: Duration::from_secs(2),
            ..TlsOpts::default()
        }
    }

    /// The same as a `tls {}` block of a nats-server config.
    pub fn go_block(&self) -> String {
        format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: true, timeout: 3 }}",
            self.dir.join("cert.pem").display(),
            self.dir.join("key.pem").display(),
            self.dir.join("ca.pem").display()
        )
    }
}

/// A certificate a test issues: its PEM files and its key's id for `pinned_certs`.
#[allow(dead_code)]
pub struct Issued {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Lower-case hex SHA-256 of the DER SubjectPublicKeyInfo.
    pub spki_sha256: String,
}

#[allow(dead_code)]
impl Pki {
    /// A certificate signed by this CA with `subject` (RDNs in certificate order; rcgen
    /// takes each attribute type once) and `sans`, written as `<name>.pem`/`<name>-key.pem`.
    pub fn issue(&self, name: &str, subject: &[(DnType, &str)], sans: Vec<SanType>) -> Issued {
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name = DistinguishedName::new();
        for (t, v) in subject {
            p.distinguished_name.push(t.clone(), *v);
        }
        p.subject_alt_names = sans;
        let key = KeyPair::generate().expect("key");
        let cert = p.signed_by(&key, &self.ca).expect("cert");
        let (c, k) = (
            self.dir.join(format!("{name}.pem")),
            self.dir.join(format!("{name}-key.pem")),
        );
        std::fs::write(&c, cert.pem()).expect("write");
        std::fs::write(&k, key.serialize_pem()).expect("write");
        let d = ring::digest::digest(&ring::digest::SHA256, &key.subject_public_key_info());
        Issued {
            cert: c,
            key: k,
            spki_sha256: data_encoding::HEXLOWER.encode(d.as_ref()),
        }
    }

    /// The node certificate's (`cert.pem`) key id.
    pub fn node_spki_sha256(&self) -> String {
        use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
        let pem = std::fs::read(self.dir.join("cert.pem")).expect("read");
        let der = CertificateDer::from_pem_slice(&pem).expect("pem");
        natsd::tls::cert::parse(der.as_ref())
            .expect("parse")
            .spki_sha256
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
