//! The writer task of a connection: waits for a kick, swaps the outbound buffer out and writes
//! it in one call under the write deadline. On close it flushes what is queued and shuts the
//! socket down.

use super::{CloseReason, Conn};
use bytes::BytesMut;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// How long a closing connection may take to flush its last bytes.
const FINAL_FLUSH: Duration = Duration::from_secs(1);

pub async fn run<W: AsyncWrite + Unpin>(conn: Arc<Conn>, mut w: W, write_deadline: Duration) {
    let mut spare = BytesMut::new();
    loop {
        let closed = conn.out.take(&mut spare);
        if !spare.is_empty() {
            let deadline = if closed { FINAL_FLUSH } else { write_deadline };
            match tokio::time::timeout(deadline, w.write_all(&spare)).await {
                Ok(Ok(())) => {
                    conn.out.signal_drained();
                    continue;
                }
                Ok(Err(e)) => {
                    tracing::debug!("{} - write error: {e}", conn.log_prefix());
                    conn.close(CloseReason::WriteError);
                    break;
                }
                Err(_) => {
                    if !closed {
                        tracing::info!(
                            "{} - Slow Consumer Detected: WriteDeadline of {:?} exceeded with {} chunks of {} total bytes.",
                            conn.log_prefix(),
                            write_deadline,
                            1,
                            spare.len()
                        );
                        conn.close(CloseReason::SlowConsumerWriteDeadline);
                    }
                    break;
                }
            }
        }
        if closed {
            break;
        }
        tokio::select! {
            _ = conn.out.wait() => {}
            _ = conn.closed() => {}
        }
    }
    conn.out.release();
    let _ = tokio::time::timeout(FINAL_FLUSH, w.shutdown()).await;
}
