//! An account server for the URL resolver tests (`resolver_url.rs`, `resolver_url_tls.rs`):
//! `GET <path><key>` answers the account JWT it serves (or 404; the base URL itself, which
//! nats-server asks when it starts, gets an empty 200), over plain HTTP or HTTPS. Its TLS
//! configuration can be changed while it runs (a rotated certificate), and it counts the
//! handshakes that failed. Every answer closes the connection (`Connection: close`).

use nkeys::KeyPair;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_rustls::rustls::ServerConfig;

type Tls = Arc<Mutex<Option<Arc<ServerConfig>>>>;

#[derive(Default)]
struct State {
    jwts: Mutex<HashMap<String, String>>,
    gets: Mutex<Vec<String>>,
    failed_handshakes: AtomicUsize,
}

pub struct AccountServer {
    pub addr: SocketAddr,
    state: Arc<State>,
    tls: Tls,
}

impl AccountServer {
    /// Plain HTTP.
    pub async fn start() -> AccountServer {
        Self::start_with(None).await
    }

    /// HTTPS with `tls` (a client certificate is required when it verifies clients).
    pub async fn start_tls(tls: Arc<ServerConfig>) -> AccountServer {
        Self::start_with(Some(tls)).await
    }

    async fn start_with(tls: Option<Arc<ServerConfig>>) -> AccountServer {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let state: Arc<State> = Arc::default();
        let tls: Tls = Arc::new(Mutex::new(tls));
        let (st, t) = (state.clone(), tls.clone());
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                let st = st.clone();
                let cfg = t.lock().expect("tls").clone();
                tokio::spawn(async move {
                    let Some(cfg) = cfg else {
                        return answer(s, &st).await;
                    };
                    let accept = tokio_rustls::TlsAcceptor::from(cfg).accept(s);
                    match accept.into_fallible().await {
                        Ok(tls) => answer(tls, &st).await,
                        Err((_, mut s)) => {
                            st.failed_handshakes.fetch_add(1, Relaxed);
                            // Read what the client still sends before closing, so that it
                            // gets the alert rather than a reset.
                            let _ = s.shutdown().await;
                            let mut sink = [0u8; 4096];
                            let drain = async {
                                while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
                            };
                            let _ = tokio::time::timeout(super::DEADLINE, drain).await;
                        }
                    }
                });
            }
        });
        AccountServer { addr, state, tls }
    }

    /// The base URL nats-server's resolver is given.
    pub fn url(&self) -> String {
        let scheme = if self.tls.lock().expect("tls").is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}/jwt/v1/accounts/", self.addr)
    }

    /// New connections get `tls` from now on.
    pub fn set_tls(&self, tls: Arc<ServerConfig>) {
        *self.tls.lock().expect("tls") = Some(tls);
    }

    pub fn serve(&self, acc: &KeyPair, jwt: &str) {
        let mut j = self.state.jwts.lock().expect("jwts");
        j.insert(acc.public_key(), jwt.to_string());
    }

    /// Whether `acc`'s JWT was asked for.
    pub fn fetched(&self, acc: &KeyPair) -> bool {
        let key = acc.public_key();
        let gets = self.state.gets.lock().expect("gets");
        gets.iter().any(|p| p.ends_with(&key))
    }

    /// How many TLS handshakes failed (an untrusted or missing certificate on either side).
    pub fn failed_handshakes(&self) -> usize {
        self.state.failed_handshakes.load(Relaxed)
    }
}

/// Read one request from `s` and answer it.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, st: &State) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let path = head.split(' ').nth(1).unwrap_or("").to_string();
    let key = path.rsplit('/').next().unwrap_or("").to_string();
    st.gets.lock().expect("gets").push(path);
    let jwt = st.jwts.lock().expect("jwts").get(&key).cloned();
    let (status, body) = match jwt {
        Some(t) => ("200 OK", t),
        // The base URL itself (nats-server asks it when it starts).
        None if key.is_empty() => ("200 OK", String::new()),
        None => ("404 Not Found", String::new()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/jwt\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes()).await;
    let _ = s.shutdown().await;
}
