//! A server-to-server TLS stream (route, gateway), either side of the handshake, as one
//! `AsyncRead + AsyncWrite` type, and the handshake itself: nats-server 2.9 does it first, on
//! both sides, before any protocol line.

use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A TLS stream, either side.
pub enum TlsStream {
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            TlsStream::Server(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            TlsStream::Client(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            TlsStream::Server(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            TlsStream::Client(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            TlsStream::Server(s) => Pin::new(s.as_mut()).poll_flush(cx),
            TlsStream::Client(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            TlsStream::Server(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            TlsStream::Client(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Which side of the handshake we are.
pub enum Side<'a> {
    Accept(&'a TlsAcceptor),
    /// Dialling `host` (the name the peer's certificate must carry).
    Connect(&'a TlsConnector, &'a str),
}

/// The TLS handshake on a new connection, bounded by `timeout` (at least 500 ms); then, as
/// nats-server, the peer's certificate against `pinned` (`pinned_certs`).
pub async fn handshake(
    stream: TcpStream,
    side: Side<'_>,
    timeout: std::time::Duration,
    pinned: Option<&std::collections::BTreeSet<String>>,
) -> Result<TlsStream, String> {
    let deadline = timeout.max(std::time::Duration::from_millis(500));
    let s = match side {
        Side::Accept(a) => {
            let s = tokio::time::timeout(deadline, a.accept(stream))
                .await
                .map_err(|_| "timeout".to_string())?
                .map_err(|e| e.to_string())?;
            TlsStream::Server(Box::new(s))
        }
        Side::Connect(c, host) => {
            let name = crate::tls::server_name(host)?;
            let s = tokio::time::timeout(deadline, c.connect(name, stream))
                .await
                .map_err(|_| "timeout".to_string())?
                .map_err(|e| e.to_string())?;
            TlsStream::Client(Box::new(s))
        }
    };
    let peer = s.common().peer_certificates();
    let prefix = s.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    crate::tls::check_pinned(pinned, peer, &prefix)?;
    Ok(s)
}

impl TlsStream {
    fn common(&self) -> &tokio_rustls::rustls::CommonState {
        match self {
            TlsStream::Server(s) => s.get_ref().1,
            TlsStream::Client(s) => s.get_ref().1,
        }
    }

    fn peer_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            TlsStream::Server(s) => s.get_ref().0.peer_addr().ok(),
            TlsStream::Client(s) => s.get_ref().0.peer_addr().ok(),
        }
    }

    /// Record the session in `conn`'s meta as a client's is recorded: TLS version, cipher
    /// suite, the peer's certificate and the chain it presented (`/connz`, auth callout's
    /// `client_tls`).
    pub fn record(&self, conn: &crate::conn::Conn) {
        let c = self.common();
        let (version, suite) = crate::tls::negotiated(c);
        let chain = c
            .peer_certificates()
            .map(|p| std::sync::Arc::new(p.iter().map(|c| c.as_ref().to_vec()).collect()));
        let mut m = conn.meta();
        m.tls_version = version;
        m.tls_cipher_suite = suite;
        m.peer_cert = self.peer_cert();
        m.peer_chain = chain;
    }

    /// What the peer's certificate says (`None`: it sent none, or it could not be read).
    pub fn peer_cert(&self) -> Option<std::sync::Arc<crate::tls::cert::PeerCert>> {
        let der = self.common().peer_certificates()?.first()?;
        crate::tls::cert::parse(der.as_ref())
            .ok()
            .map(std::sync::Arc::new)
    }
}
