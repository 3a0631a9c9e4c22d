//! natsd's stream snapshot format (what `$JS.API.STREAM.SNAPSHOT` sends and
//! `$JS.API.STREAM.RESTORE` takes): pure encoding and a streaming, validating decoder, no I/O.
//! nats-server sends an s2-compressed tar of its own file store; natsd's stores differ, so
//! its snapshots are its own (docs/jetstream-filestore.md, "Snapshots").
//!
//! Layout: the 8-byte magic `NJSSNAP\x01` (format version in the last byte), then records
//! `u8 kind | u32 len | body[len] | u32 crc32c(kind, len, body)` (little endian):
//! HEAD (JSON [`Head`]) first, CONSUMER (JSON [`ConsumerRec`]) records, MSG records in
//! increasing sequence order (`u64 seq | i64 ts | u8 flags | u16 subject len | u32 header
//! len | subject | header | data`, flags bit 0: a header block is present), and END
//! (`u64 messages | u32 consumers`, the counts sent). Nothing may follow END.
//!
//! The decoder is fed chunks as they come (cut anywhere) and yields records as soon as they
//! are whole; it holds at most one record plus one chunk ([`MAX_RECORD`] bounds a record).

use super::persist::ConsumerState;
use super::store::file::record::crc32c;
use super::store::StoredMsg;
use super::types::{valid_name, ConsumerConfig, StreamConfig};
use crate::subject::is_valid_literal_subject;
use bytes::{Buf, Bytes, BytesMut};
use serde::{Deserialize, Serialize};

pub const MAGIC: &[u8; 8] = b"NJSSNAP\x01";
const MAGIC_PREFIX: &[u8] = b"NJSSNAP";
/// The largest record accepted (a message of nats-server's largest `max_payload`, 64 MiB,
/// plus its subject and framing).
pub const MAX_RECORD: usize = (64 << 20) + (64 << 10);

const KIND_HEAD: u8 = 1;
const KIND_CONSUMER: u8 = 2;
const KIND_MSG: u8 = 3;
const KIND_END: u8 = 4;
const FLAG_HDR: u8 = 1;
/// kind + len before the body, crc after it.
const FRAME: usize = 5;
const MSG_FIXED: usize = 8 + 8 + 1 + 2 + 4;

/// The stream as it was when the snapshot started.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Head {
    pub stream: String,
    pub config: StreamConfig,
    /// Unix nanos the stream was created.
    pub created: i64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub last_ts: i64,
    /// Messages in the stream when the snapshot started (those removed meanwhile are not
    /// sent; END counts what was).
    pub messages: u64,
}

/// One consumer: its configuration and progress.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct ConsumerRec {
    pub name: String,
    pub config: ConsumerConfig,
    pub created: i64,
    pub state: ConsumerState,
    /// A replicated stream's consumer's origin (its group's snapshots); none in backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::jetstream::persist::Origin>,
}

/// One decoded record.
#[derive(Debug, PartialEq)]
pub enum Item {
    Head(Box<Head>),
    Consumer(Box<ConsumerRec>),
    Msg(StoredMsg),
    End,
}

fn frame(buf: &mut Vec<u8>, kind: u8, body_len: usize, body: impl FnOnce(&mut Vec<u8>)) {
    let start = buf.len();
    buf.push(kind);
    buf.extend_from_slice(&(body_len as u32).to_le_bytes());
    body(buf);
    let crc = crc32c(&buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
}

fn json_record<T: Serialize>(buf: &mut Vec<u8>, kind: u8, v: &T) -> Result<(), String> {
    let body = serde_json::to_vec(v).map_err(|e| format!("encoding a snapshot record: {e}"))?;
    frame(buf, kind, body.len(), |b| b.extend_from_slice(&body));
    Ok(())
}

pub fn encode_magic(buf: &mut Vec<u8>) {
    buf.extend_from_slice(MAGIC);
}

pub fn encode_head(buf: &mut Vec<u8>, h: &Head) -> Result<(), String> {
    json_record(buf, KIND_HEAD, h)
}

pub fn encode_consumer(buf: &mut Vec<u8>, c: &ConsumerRec) -> Result<(), String> {
    json_record(buf, KIND_CONSUMER, c)
}

pub fn encode_msg(buf: &mut Vec<u8>, m: &StoredMsg) {
    let hdr = m.header.as_deref().unwrap_or(&[]);
    let len = MSG_FIXED + m.subject.len() + hdr.len() + m.data.len();
    frame(buf, KIND_MSG, len, |b| {
        b.extend_from_slice(&m.seq.to_le_bytes());
        b.extend_from_slice(&m.ts.to_le_bytes());
        b.push(if m.header.is_some() { FLAG_HDR } else { 0 });
        b.extend_from_slice(&(m.subject.len() as u16).to_le_bytes());
        b.extend_from_slice(&(hdr.len() as u32).to_le_bytes());
        b.extend_from_slice(m.subject.as_bytes());
        b.extend_from_slice(hdr);
        b.extend_from_slice(&m.data);
    });
}

pub fn encode_end(buf: &mut Vec<u8>, messages: u64, consumers: u32) {
    frame(buf, KIND_END, 12, |b| {
        b.extend_from_slice(&messages.to_le_bytes());
        b.extend_from_slice(&consumers.to_le_bytes());
    });
}

/// A streaming snapshot reader: [`Decoder::feed`] chunks, take records with
/// [`Decoder::next_item`], and call [`Decoder::finish`] at the end of the data.
#[derive(Default)]
pub struct Decoder {
    buf: BytesMut,
    /// Bytes consumed so far (for error positions).
    offset: u64,
    magic: bool,
    head: Option<(u64, u64)>,
    last_msg: u64,
    messages: u64,
    consumers: u32,
    ended: bool,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder::default()
    }

    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes held that do not make a whole record yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole record, `None` when more data is needed.
    pub fn next_item(&mut self) -> Result<Option<Item>, String> {
        if !self.magic {
            let n = self.buf.len().min(MAGIC.len());
            if self.buf[..n] != MAGIC[..n] {
                if n >= MAGIC_PREFIX.len() && self.buf[..MAGIC_PREFIX.len()] == *MAGIC_PREFIX {
                    return Err(format!(
                        "unsupported snapshot format version {}",
                        self.buf[7]
                    ));
                }
                return Err("not a natsd snapshot (bad magic)".to_string());
            }
            if n < MAGIC.len() {
                return Ok(None);
            }
            self.buf.advance(MAGIC.len());
            self.offset += MAGIC.len() as u64;
            self.magic = true;
        }
        if self.buf.len() < FRAME {
            return Ok(None);
        }
        if self.ended {
            return Err(format!("data after the end record at byte {}", self.offset));
        }
        let kind = self.buf[0];
        let len = u32::from_le_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if !(KIND_HEAD..=KIND_END).contains(&kind) {
            return Err(format!(
                "unknown record kind {kind} at byte {}",
                self.offset
            ));
        }
        if len > MAX_RECORD {
            return Err(format!(
                "record of {len} bytes at byte {} is over the limit of {MAX_RECORD}",
                self.offset
            ));
        }
        if self.buf.len() < FRAME + len + 4 {
            return Ok(None);
        }
        let rec = self.buf.split_to(FRAME + len + 4).freeze();
        let at = self.offset;
        self.offset += rec.len() as u64;
        let crc = u32::from_le_bytes([
            rec[FRAME + len],
            rec[FRAME + len + 1],
            rec[FRAME + len + 2],
            rec[FRAME + len + 3],
        ]);
        if crc32c(&rec[..FRAME + len]) != crc {
            return Err(format!("checksum mismatch in the record at byte {at}"));
        }
        let body = rec.slice(FRAME..FRAME + len);
        let item = self
            .item(kind, body)
            .map_err(|e| format!("{e} (record at byte {at})"))?;
        Ok(Some(item))
    }

    fn item(&mut self, kind: u8, body: Bytes) -> Result<Item, String> {
        if kind != KIND_HEAD && self.head.is_none() {
            return Err("the snapshot does not start with its head record".to_string());
        }
        match kind {
            KIND_HEAD => {
                if self.head.is_some() {
                    return Err("a second head record".to_string());
                }
                let h: Head =
                    serde_json::from_slice(&body).map_err(|e| format!("bad head record: {e}"))?;
                // Sequences past i64::MAX would overflow the stores' arithmetic.
                if h.last_seq >= i64::MAX as u64 || h.first_seq > h.last_seq + 1 {
                    return Err(format!(
                        "bad sequences in the head record: first {}, last {}",
                        h.first_seq, h.last_seq
                    ));
                }
                self.head = Some((h.first_seq, h.last_seq));
                Ok(Item::Head(Box::new(h)))
            }
            KIND_CONSUMER => {
                let c: ConsumerRec = serde_json::from_slice(&body)
                    .map_err(|e| format!("bad consumer record: {e}"))?;
                // The name becomes a directory name.
                if !valid_name(&c.name) {
                    return Err(format!("bad consumer name {:?}", c.name));
                }
                self.consumers += 1;
                Ok(Item::Consumer(Box::new(c)))
            }
            KIND_MSG => {
                let m = decode_msg(body)?;
                let (first, last) = self.head.unwrap_or_default();
                if m.seq <= self.last_msg || m.seq < first || m.seq > last {
                    return Err(format!(
                        "message sequence {} out of order or outside {first}..={last}",
                        m.seq
                    ));
                }
                self.last_msg = m.seq;
                self.messages += 1;
                Ok(Item::Msg(m))
            }
            _ => {
                if body.len() != 12 {
                    return Err("bad end record".to_string());
                }
                let mut b = &body[..];
                let (msgs, cons) = (b.get_u64_le(), b.get_u32_le());
                if msgs != self.messages || cons != self.consumers {
                    return Err(format!(
                        "the end record counts {msgs} messages and {cons} consumers, the \
                         snapshot held {} and {}",
                        self.messages, self.consumers
                    ));
                }
                self.ended = true;
                Ok(Item::End)
            }
        }
    }

    /// The data ended: it must have ended with the END record.
    pub fn finish(&self) -> Result<(), String> {
        if !self.ended {
            return Err(format!("snapshot truncated after {} bytes", self.offset));
        }
        if !self.buf.is_empty() {
            return Err(format!("data after the end record at byte {}", self.offset));
        }
        Ok(())
    }
}

fn decode_msg(body: Bytes) -> Result<StoredMsg, String> {
    if body.len() < MSG_FIXED {
        return Err("message record too short".to_string());
    }
    let mut b = &body[..];
    let seq = b.get_u64_le();
    let ts = b.get_i64_le();
    let flags = b.get_u8();
    let subj_len = b.get_u16_le() as usize;
    let hdr_len = b.get_u32_le() as usize;
    if subj_len == 0 || MSG_FIXED + subj_len + hdr_len > body.len() {
        return Err("message record lengths do not fit".to_string());
    }
    let subj = &body[MSG_FIXED..MSG_FIXED + subj_len];
    // Restored messages go out on the wire: their subjects must be valid ones.
    if !is_valid_literal_subject(subj) {
        return Err("message subject is not a valid subject".to_string());
    }
    let subject = std::str::from_utf8(subj)
        .map_err(|_| "message subject is not UTF-8".to_string())?
        .to_string();
    let h = MSG_FIXED + subj_len;
    let header = (flags & FLAG_HDR != 0).then(|| body.slice(h..h + hdr_len));
    Ok(StoredMsg {
        subject,
        seq,
        ts,
        header,
        data: body.slice(h + hdr_len..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<u8>, Vec<Item>) {
        let head = Head {
            stream: "S".into(),
            config: StreamConfig {
                name: "S".into(),
                ..Default::default()
            },
            created: 7,
            first_seq: 2,
            last_seq: 9,
            last_ts: 90,
            messages: 2,
        };
        let con = ConsumerRec {
            name: "D".into(),
            config: ConsumerConfig::default(),
            created: 8,
            origin: None,
            state: ConsumerState {
                sseq: 5,
                dseq: 3,
                pending: vec![(4, 2, 40, 1)],
                redelivered: vec![],
            },
        };
        let m1 = StoredMsg {
            subject: "a.b".into(),
            seq: 2,
            ts: 20,
            header: Some(Bytes::from_static(b"NATS/1.0\r\nX: y\r\n\r\n")),
            data: Bytes::from_static(b"one"),
        };
        let m2 = StoredMsg {
            subject: "c".into(),
            seq: 5,
            ts: 50,
            header: None,
            data: Bytes::new(),
        };
        let mut buf = Vec::new();
        encode_magic(&mut buf);
        encode_head(&mut buf, &head).unwrap();
        encode_consumer(&mut buf, &con).unwrap();
        encode_msg(&mut buf, &m1);
        encode_msg(&mut buf, &m2);
        encode_end(&mut buf, 2, 1);
        let items = vec![
            Item::Head(Box::new(head)),
            Item::Consumer(Box::new(con)),
            Item::Msg(m1),
            Item::Msg(m2),
            Item::End,
        ];
        (buf, items)
    }

    fn decode_in(buf: &[u8], chunk: usize) -> Result<Vec<Item>, String> {
        let mut d = Decoder::new();
        let mut out = Vec::new();
        for c in buf.chunks(chunk) {
            d.feed(c);
            while let Some(i) = d.next_item()? {
                out.push(i);
            }
        }
        d.finish()?;
        Ok(out)
    }

    #[test]
    fn round_trip_in_any_chunking() {
        let (buf, items) = sample();
        for chunk in [1, 3, 7, 64, buf.len()] {
            assert_eq!(decode_in(&buf, chunk).unwrap(), items, "chunk {chunk}");
        }
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error() {
        let (buf, _) = sample();
        for n in 0..buf.len() {
            assert!(decode_in(&buf[..n], 5).is_err(), "truncated at {n}");
        }
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x10;
            assert!(decode_in(&b, 11).is_err(), "flip at {i}");
        }
        let mut b = buf.clone();
        b.push(0);
        assert!(decode_in(&b, 4).is_err(), "trailing byte");
    }

    #[test]
    fn subjects_and_consumer_names_that_could_do_harm_are_refused() {
        let (buf, items) = sample();
        let (Item::Head(head), Item::Consumer(con)) = (&items[0], &items[1]) else {
            panic!("sample order");
        };
        let start = |b: &mut Vec<u8>| {
            encode_magic(b);
            encode_head(b, head).unwrap();
        };
        for subject in ["a b", "a.*", "a..b", "a\r\nPUB x 1"] {
            let mut b = Vec::new();
            start(&mut b);
            let m = StoredMsg {
                subject: subject.into(),
                seq: 2,
                ts: 1,
                header: None,
                data: Bytes::new(),
            };
            encode_msg(&mut b, &m);
            encode_end(&mut b, 1, 0);
            let e = decode_in(&b, 64).unwrap_err();
            assert!(e.contains("not a valid subject"), "{subject:?}: {e}");
        }
        let mut b = Vec::new();
        start(&mut b);
        let mut evil = (**con).clone();
        evil.name = "../../x".into();
        encode_consumer(&mut b, &evil).unwrap();
        assert!(decode_in(&b, 64).unwrap_err().contains("bad consumer name"));
        assert!(decode_in(&buf, 64).is_ok());
    }

    #[test]
    fn impossible_head_sequences_are_refused() {
        let (_, items) = sample();
        let Item::Head(head) = &items[0] else {
            panic!("sample order");
        };
        for (first, last) in [(1, u64::MAX), (9, 3), (0, i64::MAX as u64)] {
            let mut h = (**head).clone();
            (h.first_seq, h.last_seq) = (first, last);
            let mut b = Vec::new();
            encode_magic(&mut b);
            encode_head(&mut b, &h).unwrap();
            let e = decode_in(&b, 64).unwrap_err();
            assert!(e.contains("bad sequences"), "{first} {last}: {e}");
        }
    }

    #[test]
    fn oversized_record_is_refused_before_buffering() {
        let mut buf = MAGIC.to_vec();
        buf.push(KIND_MSG);
        buf.extend_from_slice(&u32::MAX.to_le_bytes());
        let mut d = Decoder::new();
        d.feed(&buf);
        assert!(d.next_item().unwrap_err().contains("over the limit"));
    }
}
