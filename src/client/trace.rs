//! Protocol tracing for `-V`: one `<<- [OP …]` line per inbound op, as nats-server writes.

use super::Client;
use crate::proto::parser::Op;

impl Client {
    pub(super) fn trace_op(&self, op: &Op<'_>) {
        let line = match op {
            Op::Pub {
                subject,
                reply,
                payload,
            } => format!(
                "PUB {}{} {}",
                String::from_utf8_lossy(subject),
                reply
                    .map(|r| format!(" {}", String::from_utf8_lossy(r)))
                    .unwrap_or_default(),
                payload.len()
            ),
            Op::Hpub {
                subject,
                reply,
                header,
                payload,
            } => format!(
                "HPUB {}{} {} {}",
                String::from_utf8_lossy(subject),
                reply
                    .map(|r| format!(" {}", String::from_utf8_lossy(r)))
                    .unwrap_or_default(),
                header.len(),
                header.len() + payload.len()
            ),
            Op::Sub {
                subject,
                queue,
                sid,
            } => format!(
                "SUB {}{} {}",
                String::from_utf8_lossy(subject),
                queue
                    .map(|q| format!(" {}", String::from_utf8_lossy(q)))
                    .unwrap_or_default(),
                String::from_utf8_lossy(sid)
            ),
            Op::Unsub { sid, max } => format!(
                "UNSUB {}{}",
                String::from_utf8_lossy(sid),
                max.map(|m| format!(" {m}")).unwrap_or_default()
            ),
            Op::Connect(j) => format!("CONNECT {}", String::from_utf8_lossy(j)),
            Op::Ping => "PING".into(),
            Op::Pong => "PONG".into(),
            other => format!("{other:?}"),
        };
        tracing::trace!("{} - <<- [{line}]", self.conn.log_prefix());
    }
}
