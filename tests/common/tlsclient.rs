//! A raw client over TLS for the tests (`tls_map.rs`, `auth_callout.rs`): a rustls client
//! trusting a test PKI's CA, presenting one of its certificates or none, reading lines.

use super::pki::{Issued, Pki};
use super::DEADLINE;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A line protocol over TLS.
pub struct Tls {
    s: tokio_rustls::client::TlsStream<TcpStream>,
    buf: Vec<u8>,
}

impl Tls {
    pub async fn send(&mut self, t: &str) {
        // A refused peer may be gone already: what it answered is what the test reads.
        let _ = self.s.write_all(t.as_bytes()).await;
        let _ = self.s.flush().await;
    }

    /// The next line; `None` once the server closed (or after the deadline).
    pub async fn line(&mut self) -> Option<String> {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let l: Vec<u8> = self.buf.drain(..=i).collect();
                return Some(String::from_utf8_lossy(&l).trim_end().to_string());
            }
            let mut b = [0u8; 4096];
            match tokio::time::timeout_at(end, self.s.read(&mut b)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&b[..n]),
                _ => return None,
            }
        }
    }

    /// The next line that is not INFO or PING.
    pub async fn answer(&mut self) -> Option<String> {
        loop {
            let l = self.line().await?;
            if !l.starts_with("INFO ") && l != "PING" {
                return Some(l);
            }
        }
    }
}

/// A rustls client trusting the test CA, presenting `cert` when given.
pub fn connector(pki: &Pki, cert: Option<&Issued>) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(pki.dir.join("ca.pem")).expect("ca");
    for c in CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.expect("ca pem")).expect("root");
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let cfg = match cert {
        None => b.with_no_client_auth(),
        Some(i) => {
            let c = std::fs::read(&i.cert).expect("cert");
            let chain: Vec<_> = CertificateDer::pem_slice_iter(&c)
                .map(|c| c.expect("pem"))
                .collect();
            let k = std::fs::read(&i.key).expect("key");
            let key = PrivateKeyDer::from_pem_slice(&k).expect("key pem");
            b.with_client_auth_cert(chain, key).expect("client cert")
        }
    };
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

/// Over TLS to `addr` presenting `cert`; `info_first`: the server's INFO comes in the clear
/// before the handshake (the client port), else the handshake comes first (routes,
/// gateways). `None`: the handshake failed.
pub async fn tls_to(
    addr: SocketAddr,
    pki: &Pki,
    cert: Option<&Issued>,
    info_first: bool,
) -> Option<Tls> {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    if info_first {
        let mut b = [0u8; 1];
        loop {
            tcp.read_exact(&mut b).await.expect("INFO");
            if b[0] == b'\n' {
                break;
            }
        }
    }
    let name = ServerName::try_from("localhost").expect("name");
    let s = tokio::time::timeout(DEADLINE, connector(pki, cert).connect(name, tcp))
        .await
        .expect("handshake in time")
        .ok()?;
    Some(Tls { s, buf: Vec::new() })
}
