//! An inbound server-to-server op as nats-server's `-V` trace shows it (`<<- [RS+ $G foo]`):
//! the verb and its arguments as they came, message sizes instead of payloads.

use super::parser::Op;
use std::borrow::Cow;

fn s(b: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// Adds ` <word>` for each non-empty word.
fn words(t: &mut String, ws: &[&[u8]]) {
    for w in ws.iter().filter(|w| !w.is_empty()) {
        t.push(' ');
        t.push_str(&s(w));
    }
}

/// The trace text of `op` read from a route or gateway (`leaf`: false) or a leafnode
/// connection (`LMSG`, no account).
pub fn op_text(op: &Op<'_>, leaf: bool) -> String {
    let mut t = String::new();
    match op {
        Op::Rmsg(m) => {
            t.push_str(match (m.header.is_some(), leaf) {
                (true, _) => "HMSG",
                (false, true) => "LMSG",
                (false, false) => "RMSG",
            });
            let account: &[u8] = if leaf { b"" } else { m.account };
            words(&mut t, &[account, m.subject, m.reply.unwrap_or(b"")]);
            for q in m.queues {
                words(&mut t, &[q]);
            }
            let hdr = m.header.map_or(0, <[u8]>::len);
            if m.header.is_some() {
                t.push_str(&format!(" {hdr}"));
            }
            t.push_str(&format!(" {}", hdr + m.payload.len()));
        }
        Op::RsPlus {
            account,
            subject,
            queue,
        } => {
            t.push_str("RS+");
            words(&mut t, &[account, subject]);
            if let Some((q, w)) = queue {
                t.push_str(&format!(" {} {w}", s(q)));
            }
        }
        Op::RsMinus {
            account,
            subject,
            queue,
        } => {
            t.push_str("RS-");
            words(&mut t, &[account, subject, queue.unwrap_or(b"")]);
        }
        Op::LsPlus {
            origin,
            account,
            subject,
            queue,
        } => {
            t.push_str("LS+");
            words(&mut t, &[origin, account, subject]);
            if let Some((q, w)) = queue {
                t.push_str(&format!(" {} {w}", s(q)));
            }
        }
        Op::LsMinus {
            origin,
            account,
            subject,
            queue,
        } => {
            t.push_str("LS-");
            words(
                &mut t,
                &[
                    origin.unwrap_or(b""),
                    account,
                    subject,
                    queue.unwrap_or(b""),
                ],
            );
        }
        Op::Connect(j) => t = format!("CONNECT {}", s(j)),
        Op::Info(j) => t = format!("INFO {}", s(j)),
        Op::Ping => t.push_str("PING"),
        Op::Pong => t.push_str("PONG"),
        Op::Ok => t.push_str("+OK"),
        Op::Err(e) => t = format!("-ERR '{}'", s(e)),
        Op::AccPlus(a) => t = format!("A+ {}", s(a)),
        Op::AccMinus(a) => t = format!("A- {}", s(a)),
        other => t = format!("{other:?}"),
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::parser::{Kind, Limits, Parser};

    fn traced(kind: Kind, wire: &[u8]) -> String {
        let mut p = Parser::new(kind, Limits::default());
        let (op, _) = p.parse(wire).expect("parses").expect("an op");
        op_text(&op, kind == Kind::Leaf)
    }

    #[test]
    fn route_ops_read_as_on_the_wire() {
        assert_eq!(traced(Kind::Route, b"RS+ $G foo\r\n"), "RS+ $G foo");
        assert_eq!(
            traced(Kind::Route, b"RS+ $G foo bar 3\r\n"),
            "RS+ $G foo bar 3"
        );
        assert_eq!(traced(Kind::Route, b"RS- $G foo bar\r\n"), "RS- $G foo bar");
        assert_eq!(
            traced(Kind::Route, b"RMSG $G foo _INBOX.1 2\r\nhi\r\n"),
            "RMSG $G foo _INBOX.1 2"
        );
        assert_eq!(
            traced(Kind::Route, b"HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
            "HMSG $G foo 12 14"
        );
        assert_eq!(traced(Kind::Route, b"PING\r\n"), "PING");
    }

    #[test]
    fn leaf_ops_read_as_on_the_wire() {
        assert_eq!(traced(Kind::Leaf, b"LS+ foo\r\n"), "LS+ foo");
        assert_eq!(traced(Kind::Leaf, b"LMSG foo 2\r\nhi\r\n"), "LMSG foo 2");
    }
}
