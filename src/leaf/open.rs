//! Opening a leafnode connection before its protocol runs: TLS as nats-server does it on
//! leafnodes. The hub writes its INFO in the clear (with `tls_required`) and then waits for
//! the leaf's TLS handshake; the leaf reads that INFO, upgrades (when the INFO asks for TLS
//! or its remote has a `tls {}` block), and only then answers, inside TLS. With
//! `handshake_first` on both ends the handshake comes before any byte of protocol and the
//! INFO travels inside TLS. Without TLS the INFO the leaf read is handed to the session as
//! if it had arrived on the driver.

use crate::conn::tls::{handshake, Side, TlsStream};
use crate::proto::info::ServerInfo;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// How long a leaf waits for the hub's first INFO (nats-server's `first_info_timeout` is 1 s;
/// a loaded machine gets more).
pub const FIRST_INFO_TIMEOUT: Duration = Duration::from_secs(2);
/// An INFO longer than this is not a hub's.
const MAX_INFO: usize = 64 * 1024;

/// The leafnode listener's `tls {}`.
pub struct HubTls {
    pub acceptor: TlsAcceptor,
    pub timeout: Duration,
    /// `handshake_first`: TLS before our INFO.
    pub first: bool,
}

/// A remote's `tls {}`.
pub struct RemoteTls {
    pub connector: TlsConnector,
    pub timeout: Duration,
    /// `handshake_first`: TLS before the hub's INFO.
    pub first: bool,
}

impl HubTls {
    pub fn new(o: &crate::tls::TlsOpts) -> Result<HubTls, String> {
        Ok(HubTls {
            acceptor: TlsAcceptor::from(crate::tls::server_config(o)?),
            timeout: o.timeout,
            first: o.handshake_first.is_some(),
        })
    }
}

impl std::fmt::Debug for RemoteTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTls")
            .field("timeout", &self.timeout)
            .field("first", &self.first)
            .finish_non_exhaustive()
    }
}

impl RemoteTls {
    pub fn new(o: &crate::tls::TlsOpts) -> Result<RemoteTls, String> {
        Ok(RemoteTls {
            connector: TlsConnector::from(crate::tls::client_config(o)?),
            timeout: o.timeout,
            first: o.handshake_first.is_some(),
        })
    }
}

/// The connection's byte stream once opened.
pub enum Io {
    Plain(TcpStream),
    Tls(TlsStream),
}

/// An opened connection: its stream, whether our INFO already went out (hub), and the hub's
/// INFO JSON already read (leaf).
pub struct Opened {
    pub io: Io,
    pub info_sent: bool,
    pub hub_info: Option<Vec<u8>>,
}

/// Hub side: `info` is our INFO line, written here in the clear before a TLS upgrade.
pub async fn accept(
    mut stream: TcpStream,
    tls: Option<&HubTls>,
    info: &[u8],
    pinned: Option<&BTreeSet<String>>,
) -> Result<Opened, String> {
    let Some(t) = tls else {
        return Ok(Opened {
            io: Io::Plain(stream),
            info_sent: false,
            hub_info: None,
        });
    };
    if !t.first {
        stream
            .write_all(info)
            .await
            .map_err(|e| format!("writing INFO: {e}"))?;
    }
    let s = handshake(stream, Side::Accept(&t.acceptor), t.timeout, pinned)
        .await
        .map_err(|e| format!("TLS handshake error: {e}"))?;
    Ok(Opened {
        io: Io::Tls(s),
        info_sent: !t.first,
        hub_info: None,
    })
}

/// Leaf side: the TLS handshake with the hub.
async fn connect_tls(
    stream: TcpStream,
    t: &RemoteTls,
    host: &str,
    pinned: Option<&BTreeSet<String>>,
) -> Result<TlsStream, String> {
    let side = Side::Connect(&t.connector, host);
    handshake(stream, side, t.timeout, pinned)
        .await
        .map_err(|e| format!("TLS handshake error: {e}"))
}

/// Leaf side: the hub's INFO (unless TLS comes first), then TLS when either end wants it.
/// `pinned`: the leafnodes block's `pinned_certs` (nats-server checks hubs against them too).
pub async fn dial(
    mut stream: TcpStream,
    tls: Option<&RemoteTls>,
    (host, pinned): (&str, Option<&BTreeSet<String>>),
    first_info: Duration,
) -> Result<Opened, String> {
    if let Some(t) = tls.filter(|t| t.first) {
        let s = connect_tls(stream, t, host, pinned).await?;
        return Ok(Opened {
            io: Io::Tls(s),
            info_sent: false,
            hub_info: None,
        });
    }
    let json = tokio::time::timeout(first_info, read_info(&mut stream))
        .await
        .map_err(|_| "timeout waiting for the hub's INFO".to_string())??;
    let info: ServerInfo =
        serde_json::from_slice(&json).map_err(|e| format!("bad INFO JSON from the hub: {e}"))?;
    let t = match (tls, info.tls_required) {
        (Some(t), _) => t,
        (None, true) => {
            return Err(
                "the hub requires TLS (its INFO says tls_required) but this remote has \
                        no tls {} block"
                    .into(),
            )
        }
        (None, false) => {
            return Ok(Opened {
                io: Io::Plain(stream),
                info_sent: false,
                hub_info: Some(json),
            })
        }
    };
    let s = connect_tls(stream, t, host, pinned).await?;
    Ok(Opened {
        io: Io::Tls(s),
        info_sent: false,
        hub_info: Some(json),
    })
}

/// Read one `INFO {json}\r\n` line, a byte at a time: nothing after it may be consumed (the
/// TLS handshake follows on the same socket).
async fn read_info(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut line = Vec::with_capacity(1024);
    loop {
        let b = stream
            .read_u8()
            .await
            .map_err(|e| format!("reading the hub's INFO: {e}"))?;
        if b == b'\n' {
            break;
        }
        if line.len() >= MAX_INFO {
            return Err(format!("the hub's first line is over {MAX_INFO} bytes"));
        }
        line.push(b);
    }
    let text = line.strip_suffix(b"\r").unwrap_or(&line);
    match text.split_first_chunk::<5>() {
        Some((op, rest)) if op.eq_ignore_ascii_case(b"INFO ") => Ok(rest.trim_ascii().to_vec()),
        _ => Err(format!(
            "expected INFO from the hub, got {:?}",
            String::from_utf8_lossy(&text[..text.len().min(128)])
        )),
    }
}
