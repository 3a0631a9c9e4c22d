//! Protocol tracing for `-V`: one `<<- [OP …]` line per inbound op, as nats-server writes,
//! and for PUB/HPUB a `<<- MSG_PAYLOAD: ["…"]` line (Go-quoted, cut at
//! `max_traced_msg_len` with `...`).

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
        let body = match op {
            Op::Pub { payload, .. } => Some((&[][..], *payload)),
            Op::Hpub {
                header, payload, ..
            } => Some((*header, *payload)),
            _ => None,
        };
        if let Some((h, p)) = body {
            tracing::trace!(
                "{} - <<- MSG_PAYLOAD: [{}]",
                self.conn.log_prefix(),
                traced_payload(h, p, self.opts.max_traced_msg_len)
            );
        }
    }
}

/// Header and payload as nats-server traces them: Go-quoted (`%q`), cut to `max` bytes
/// (0 = whole) with `...` appended inside the quotes.
pub fn traced_payload(header: &[u8], payload: &[u8], max: usize) -> String {
    let mut all = Vec::with_capacity(header.len() + payload.len());
    all.extend_from_slice(header);
    all.extend_from_slice(payload);
    let cut = max > 0 && all.len() > max;
    if cut {
        all.truncate(max);
    }
    let mut out = go_quote(&all);
    if cut {
        out.insert_str(out.len() - 1, "...");
    }
    out
}

/// Go's `strconv.Quote` for bytes: printable UTF-8 as is, the usual escapes, `\xNN` for
/// bytes that are not valid UTF-8.
fn go_quote(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len() + 2);
    out.push('"');
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{7}' => out.push_str("\\a"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\u{b}' => out.push_str("\\v"),
                c if c.is_control() => {
                    let v = c as u32;
                    if v < 0x80 {
                        out.push_str(&format!("\\x{v:02x}"));
                    } else if v <= 0xffff {
                        out.push_str(&format!("\\u{v:04x}"));
                    } else {
                        out.push_str(&format!("\\U{v:08x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for x in chunk.invalid() {
            out.push_str(&format!("\\x{x:02x}"));
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::traced_payload;

    #[test]
    fn payloads_are_quoted_and_cut_as_nats_server_does() {
        assert_eq!(traced_payload(b"", b"hello world", 0), "\"hello world\"");
        assert_eq!(traced_payload(b"", b"hello world", 3), "\"hel...\"");
        assert_eq!(
            traced_payload(b"NATS/1.0\r\n\r\n", b"hello", 0),
            "\"NATS/1.0\\r\\n\\r\\nhello\""
        );
        assert_eq!(
            traced_payload(b"NATS/1.0\r\n\r\n", b"hello", 3),
            "\"NAT...\""
        );
        assert_eq!(
            traced_payload(b"", b"a\"b\\\x00\xff", 0),
            "\"a\\\"b\\\\\\x00\\xff\""
        );
        assert_eq!(traced_payload(b"", b"x", 5), "\"x\"");
    }
}
