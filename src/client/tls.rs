//! Client port TLS: INFO in the clear, the first-byte peek with `allow_non_tls`, the
//! rustls handshake under `tls.timeout`, then the read loop over the TLS halves.

use super::*;

/// Client port TLS as nats-server 2.9: INFO (`tls_required`) in the clear, the
/// `maximum connections` check, then the client's handshake under `tls.timeout`; a client
/// that does not start TLS fails the handshake (no `-ERR` reaches it) and is closed with
/// `TLS Handshake Failure`. With `allow_non_tls` the first byte decides: a TLS record (0x16)
/// means TLS, anything else (or nothing within the timeout) plaintext.
///
/// `handshake_first` (nats-server 2.10+): no INFO in the clear; the client's handshake comes
/// first and INFO (`tls_required`) is the first thing inside TLS. Without a fallback delay
/// this overrides `allow_non_tls`. With one, a client that sends nothing within the delay
/// gets INFO in the clear and the usual flow (so clients of either kind connect); one that
/// sends anything must be starting TLS.
pub(super) async fn serve_tls(
    srv: Arc<ServerShared>,
    conn: Arc<Conn>,
    opts: Arc<crate::config::Options>,
    mut stream: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
) {
    use tokio::io::AsyncWriteExt;
    let timeout = opts
        .tls
        .as_ref()
        .map_or(Duration::from_secs(2), |t| t.timeout);
    let handshake_first = opts.tls.as_ref().and_then(|t| t.handshake_first);
    let allow_non_tls = opts.allow_non_tls;
    let write_deadline = opts.write_deadline;
    let write_cfg = srv.write_cfg(ConnKind::Client, write_deadline);
    let mut c = Client::new(srv.clone(), conn.clone(), opts);
    tracing::debug!("{} - Client connection created", conn.log_prefix());
    let mut tls_first = handshake_first.is_some();
    let registered = c.register_quietly();
    // Lines before the handshake go straight to the socket: there is no writer yet. As
    // nats-server, a max-connections -ERR goes out in the clear (after INFO unless TLS first).
    let mut early = Vec::new();
    if !tls_first {
        early = c.info_line();
        c.trace_out(&early);
    }
    if !registered {
        let err = format!("-ERR '{}'\r\n", errs::MAX_CONNECTIONS);
        c.trace_out(err.as_bytes());
        early.extend_from_slice(err.as_bytes());
    }
    if !early.is_empty() {
        write_early(&conn, &mut stream, &early, write_deadline).await;
    }
    if !registered {
        c.max_connections_exceeded();
    }
    if let Some(wait) = handshake_first.filter(|w| !w.is_zero()) {
        if !conn.is_closed() {
            // Anything within the delay (regardless of what) means the client starts TLS.
            let mut b = [0u8; 1];
            let sent = tokio::select! {
                _ = conn.closed() => false,
                r = tokio::time::timeout(wait, stream.peek(&mut b)) => {
                    matches!(r, Ok(Ok(n)) if n > 0)
                }
            };
            if !sent {
                tls_first = false;
                let info = c.info_line();
                c.trace_out(&info);
                write_early(&conn, &mut stream, &info, write_deadline).await;
            }
        }
    }
    if conn.is_closed() {
        let _ = stream.shutdown().await;
        c.finish();
        return;
    }
    // The first byte tells a TLS ClientHello (0x16) from anything else, without consuming it.
    let deadline = Instant::now() + timeout;
    let mut first = [0u8; 1];
    let peeked = tokio::select! {
        _ = conn.closed() => {
            c.finish();
            return;
        }
        r = tokio::time::timeout_at(deadline, stream.peek(&mut first)) => r,
    };
    let tls_record = match peeked {
        Ok(Ok(n)) if n > 0 => Some(first[0] == 0x16),
        Ok(Ok(_)) => {
            // EOF before any byte.
            if !allow_non_tls {
                tracing::error!("{} - TLS handshake error: EOF", conn.log_prefix());
                conn.close(CloseReason::TlsHandshakeError);
            } else {
                conn.close(CloseReason::ClientClosed);
            }
            c.finish();
            return;
        }
        Ok(Err(e)) => {
            tracing::debug!("{} - read error: {e}", conn.log_prefix());
            conn.close(CloseReason::ReadError);
            c.finish();
            return;
        }
        Err(_) => None,
    };
    if allow_non_tls && !tls_first && tls_record != Some(true) {
        // Plaintext (anything but a TLS record, or nothing within the TLS timeout), as
        // nats-server's `allow_non_tls`.
        let (rd, wr) = stream.into_split();
        let writer = tokio::spawn(writer::run(conn.clone(), wr, write_cfg.clone()));
        driver::read_loop(&mut c, rd).await;
        c.finish();
        let _ = writer.await;
        return;
    }
    tracing::debug!(
        "{} - Starting TLS client connection handshake",
        conn.log_prefix()
    );
    if tls_record == Some(false) {
        // Go's words; and like Go, no alert goes back to a client that does not speak TLS.
        tracing::error!(
            "{} - TLS handshake error: tls: first record does not look like a TLS handshake",
            conn.log_prefix()
        );
        conn.close(CloseReason::TlsHandshakeError);
        // Take in what was sent (Go's handshake read did), so the close is a FIN, not a reset.
        let mut sink = [0u8; 4096];
        let _ = stream.try_read(&mut sink);
        c.finish();
        return;
    }
    let hs = tokio::select! {
        _ = conn.closed() => None,
        r = tokio::time::timeout_at(deadline, acceptor.accept(stream)) => Some(r),
    };
    let mut stream = match hs {
        None => {
            c.finish();
            return;
        }
        Some(Ok(Ok(s))) => s,
        Some(Ok(Err(e))) => {
            tracing::error!("{} - TLS handshake error: {e}", conn.log_prefix());
            conn.close(CloseReason::TlsHandshakeError);
            c.finish();
            return;
        }
        Some(Err(_)) => {
            tracing::error!("{} - TLS handshake error: i/o timeout", conn.log_prefix());
            tracing::error!("{} - TLS handshake timeout", conn.log_prefix());
            conn.close(CloseReason::TlsHandshakeError);
            c.finish();
            return;
        }
    };
    let peer = stream.get_ref().1.peer_certificates();
    let pinned = opts_pinned(&c);
    if let Err(e) = crate::tls::check_pinned(pinned, peer, &conn.log_prefix()) {
        tracing::error!("{} - TLS handshake error: {e}", conn.log_prefix());
        conn.close(CloseReason::TlsHandshakeError);
        let _ = stream.shutdown().await;
        c.finish();
        return;
    }
    let peer_cert = match peer.and_then(|p| p.first()) {
        None => None,
        Some(der) => match crate::tls::cert::parse(der.as_ref()) {
            Ok(pc) => Some(Arc::new(pc)),
            Err(e) => {
                tracing::debug!("{} - peer certificate: {e}", conn.log_prefix());
                None
            }
        },
    };
    let chain = peer.map(|p| Arc::new(p.iter().map(|c| c.as_ref().to_vec()).collect()));
    let (version, suite) = crate::tls::negotiated(stream.get_ref().1);
    tracing::debug!("{} - TLS handshake complete", conn.log_prefix());
    tracing::debug!(
        "{} - TLS version {version}, cipher suite {suite}",
        conn.log_prefix()
    );
    {
        let mut m = conn.meta();
        m.tls_version = version;
        m.tls_cipher_suite = suite;
        m.peer_cert = peer_cert;
        m.peer_chain = chain;
    }
    if tls_first {
        // INFO now, as the first bytes inside TLS.
        let info = crate::server::info_line(&srv.client_hello_json(&conn, &c.nonce, true));
        c.trace_out(&info);
        let wrote = tokio::time::timeout(write_deadline, async {
            stream.write_all(&info).await?;
            stream.flush().await
        })
        .await;
        if !matches!(wrote, Ok(Ok(()))) {
            conn.close(CloseReason::WriteError);
        }
        if conn.is_closed() {
            let _ = stream.shutdown().await;
            c.finish();
            return;
        }
    }
    let (rd, wr) = tokio::io::split(stream);
    let writer = tokio::spawn(writer::run(conn.clone(), wr, write_cfg));
    driver::read_loop(&mut c, rd).await;
    c.finish();
    let _ = writer.await;
}

/// The client port's `pinned_certs`.
fn opts_pinned(c: &Client) -> Option<&std::collections::BTreeSet<String>> {
    c.opts.tls.as_ref().and_then(|t| t.pinned_certs.as_ref())
}

/// Write lines before the handshake (there is no writer yet); a failed or late write closes
/// the connection.
async fn write_early(conn: &Conn, stream: &mut TcpStream, bytes: &[u8], deadline: Duration) {
    use tokio::io::AsyncWriteExt;
    if conn.is_closed() {
        return;
    }
    let wrote = tokio::time::timeout(deadline, stream.write_all(bytes)).await;
    if !matches!(wrote, Ok(Ok(()))) {
        conn.close(CloseReason::WriteError);
    }
}
