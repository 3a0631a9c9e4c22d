//! A replicated stream's log entries, in a compact binary form (they are the bulk of a
//! stream group's traffic and log):
//!
//! - `1` **messages**: `u64 proposer | i64 ts | u32 count`, then per message
//!   `str16 subject | str16 reply | u8 has_header | [bytes32 header] | bytes32 data`;
//! - `2` **an API request** that changes the stream (purge, message delete, update):
//!   `u64 proposer | i64 ts | str16 subject | str16 reply | bytes32 payload`.
//!
//! Integers are little endian; `str16`/`bytes32` are a length (u16/u32) and the bytes.
//! The leader chooses `ts`, so every replica stores the same timestamps; `proposer` is the
//! process whose client waits for the answer (a token random at each start: only that
//! process answers, and never an entry replayed after a restart).

use bytes::Bytes;

const MSGS: u8 = 1;
const API: u8 = 2;

/// One message a client published into the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct PubMsg {
    pub subject: String,
    pub reply: String,
    pub header: Option<Bytes>,
    pub payload: Bytes,
}

impl PubMsg {
    /// What it adds to an entry.
    pub fn encoded_len(&self) -> usize {
        2 + self.subject.len()
            + 2
            + self.reply.len()
            + 1
            + self.header.as_ref().map_or(0, |h| 4 + h.len())
            + 4
            + self.payload.len()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Msgs {
        proposer: u64,
        ts: i64,
        msgs: Vec<PubMsg>,
    },
    Api {
        proposer: u64,
        ts: i64,
        subject: String,
        reply: String,
        payload: Bytes,
    },
}

fn put_str16(out: &mut Vec<u8>, s: &str) {
    // Subjects and replies are far below 64 KiB (max_control_line is 4 KiB); cut, never wrap.
    let b = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_bytes32(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Entry::Msgs { proposer, ts, msgs } => {
                out.reserve(21 + msgs.iter().map(PubMsg::encoded_len).sum::<usize>());
                out.push(MSGS);
                out.extend_from_slice(&proposer.to_le_bytes());
                out.extend_from_slice(&ts.to_le_bytes());
                out.extend_from_slice(&(msgs.len() as u32).to_le_bytes());
                for m in msgs {
                    put_str16(&mut out, &m.subject);
                    put_str16(&mut out, &m.reply);
                    match &m.header {
                        Some(h) => {
                            out.push(1);
                            put_bytes32(&mut out, h);
                        }
                        None => out.push(0),
                    }
                    put_bytes32(&mut out, &m.payload);
                }
            }
            Entry::Api {
                proposer,
                ts,
                subject,
                reply,
                payload,
            } => {
                out.push(API);
                out.extend_from_slice(&proposer.to_le_bytes());
                out.extend_from_slice(&ts.to_le_bytes());
                put_str16(&mut out, subject);
                put_str16(&mut out, reply);
                put_bytes32(&mut out, payload);
            }
        }
        out
    }

    /// Bad bytes are an error naming what was wrong, never a panic.
    pub fn decode(b: &[u8]) -> Result<Entry, String> {
        let mut r = Reader { b, at: 0 };
        let kind = r.u8()?;
        let proposer = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "short")?);
        let ts = i64::from_le_bytes(r.take(8)?.try_into().map_err(|_| "short")?);
        let e = match kind {
            MSGS => {
                let n = r.u32()? as usize;
                // Each message takes at least 13 bytes: a count beyond that is damage.
                if n > r.left() / 13 + 1 {
                    return Err(format!("entry claims {n} messages in {} bytes", r.left()));
                }
                let mut msgs = Vec::with_capacity(n);
                for _ in 0..n {
                    let subject = r.str16()?;
                    let reply = r.str16()?;
                    let header = match r.u8()? {
                        0 => None,
                        1 => Some(Bytes::copy_from_slice(r.bytes32()?)),
                        f => return Err(format!("bad header flag {f}")),
                    };
                    let payload = Bytes::copy_from_slice(r.bytes32()?);
                    msgs.push(PubMsg {
                        subject,
                        reply,
                        header,
                        payload,
                    });
                }
                Entry::Msgs { proposer, ts, msgs }
            }
            API => Entry::Api {
                proposer,
                ts,
                subject: r.str16()?,
                reply: r.str16()?,
                payload: Bytes::copy_from_slice(r.bytes32()?),
            },
            k => return Err(format!("unknown entry kind {k}")),
        };
        if r.left() != 0 {
            return Err(format!("{} bytes after the entry", r.left()));
        }
        Ok(e)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.left() < n {
            return Err(format!("entry cut short at byte {}", self.at));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn str16(&mut self) -> Result<String, String> {
        let b = self.take(2)?;
        let n = u16::from_le_bytes([b[0], b[1]]) as usize;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| "a subject that is not UTF-8".to_string())
    }

    fn bytes32(&mut self) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_an_error() {
        let e = Entry::Msgs {
            proposer: 7,
            ts: 1_700_000_000_000_000_000,
            msgs: vec![
                PubMsg {
                    subject: "orders.1".into(),
                    reply: "_INBOX.x".into(),
                    header: Some(Bytes::from_static(b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n")),
                    payload: Bytes::from_static(b"hello"),
                },
                PubMsg {
                    subject: "orders.2".into(),
                    reply: String::new(),
                    header: None,
                    payload: Bytes::new(),
                },
            ],
        };
        let b = e.encode();
        assert_eq!(Entry::decode(&b), Ok(e));
        let a = Entry::Api {
            proposer: 1,
            ts: 2,
            subject: "$JS.API.STREAM.PURGE.S".into(),
            reply: "r".into(),
            payload: Bytes::from_static(b"{}"),
        };
        assert_eq!(Entry::decode(&a.encode()), Ok(a));
        for cut in 0..b.len() {
            assert!(Entry::decode(&b[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(Entry::decode(&bad).is_err());
        // A huge count in a short entry is refused before anything is reserved.
        let mut huge = b[..17].to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(Entry::decode(&huge).is_err());
    }

    /// A log entry comes from a peer: damage of any kind is an error, never a panic, and
    /// whatever decodes encodes back to the same entry (a deterministic fuzz loop over
    /// mutations of valid entries and random bytes).
    #[test]
    fn mutated_entries_never_panic_and_what_decodes_round_trips() {
        use rand::{rngs::StdRng, Rng, SeedableRng};
        let valid = [
            Entry::Msgs {
                proposer: 3,
                ts: 5,
                msgs: vec![PubMsg {
                    subject: "a.b".into(),
                    reply: "r".into(),
                    header: Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")),
                    payload: Bytes::from_static(b"xyz"),
                }],
            }
            .encode(),
            Entry::Api {
                proposer: 1,
                ts: 2,
                subject: "$NATSD.JS.COPY".into(),
                reply: String::new(),
                payload: Bytes::from_static(b"{}"),
            }
            .encode(),
        ];
        let mut rng = StdRng::seed_from_u64(16);
        for round in 0..20_000 {
            let mut b = if round % 5 == 0 {
                let n = rng.random_range(0..64);
                (0..n).map(|_| rng.random::<u8>()).collect::<Vec<u8>>()
            } else {
                valid[round % 2].clone()
            };
            for _ in 0..rng.random_range(1..4) {
                if b.is_empty() {
                    break;
                }
                let i = rng.random_range(0..b.len());
                match rng.random_range(0..3) {
                    0 => b[i] = rng.random(),
                    1 => b.truncate(i),
                    _ => b.insert(i, rng.random()),
                }
            }
            if let Ok(e) = Entry::decode(&b) {
                assert_eq!(Entry::decode(&e.encode()), Ok(e), "round {round}");
            }
        }
    }
}
