//! Segment file framing: the file magic, the record layout, and CRC-32C.
//!
//! A segment file is `MAGIC` followed by records, each:
//!
//! ```text
//! 0   u32 len        whole record, this field and the checksum included (little endian)
//! 4   u8  kind       MSG, DEL (tombstone), SEQS (sequence floor / last), ERASED
//! 5   u8  flags      bit 0: the message has a header block (possibly empty)
//! 6   u16 subj_len
//! 8   u32 hdr_len
//! 12  u64 seq
//! 20  i64 ts         unix nanos (SEQS: the last sequence)
//! 28  subject, header, data
//! len-4 u32 crc32c of bytes [0, len-4)
//! ```
//!
//! The checksum is CRC-32C (Castagnoli) computed here with slicing-by-8 tables built at
//! compile time: no dependency, ~1-2 GB/s, enough for per-record checks on append and load.

/// Segment file magic: name and format version (last byte).
pub const MAGIC: &[u8; 8] = b"NJSBLK\x00\x01";
/// The part of the magic that identifies a segment whatever its version.
pub const MAGIC_PREFIX: &[u8] = b"NJSBLK\x00";
/// Fixed record header before the subject.
pub const HDR: usize = 28;
/// Header plus checksum: a record's size beyond subject, header and data.
pub const OVERHEAD: usize = HDR + 4;
/// Upper bound for one record: recovery never allocates more than this for a length field.
pub const MAX_RECORD: usize = 64 << 20;

pub const KIND_MSG: u8 = 1;
/// Tombstone: message `seq` was removed.
pub const KIND_DEL: u8 = 2;
/// Every sequence below `seq` is gone; `ts` holds the last sequence, the body the last
/// timestamp (8 bytes).
pub const KIND_SEQS: u8 = 3;
/// A message record overwritten in place by an erase (same length, zeroed body).
pub const KIND_ERASED: u8 = 4;

pub const FLAG_HDR: u8 = 1;

/// The fixed header of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecHdr {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub subj_len: u16,
    pub hdr_len: u32,
    pub seq: u64,
    pub ts: i64,
}

impl RecHdr {
    pub fn parse(b: &[u8]) -> Option<RecHdr> {
        let b: &[u8; HDR] = b.get(..HDR)?.try_into().ok()?;
        Some(RecHdr {
            len: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            kind: b[4],
            flags: b[5],
            subj_len: u16::from_le_bytes([b[6], b[7]]),
            hdr_len: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            seq: u64::from_le_bytes([b[12], b[13], b[14], b[15], b[16], b[17], b[18], b[19]]),
            ts: i64::from_le_bytes([b[20], b[21], b[22], b[23], b[24], b[25], b[26], b[27]]),
        })
    }

    /// Structural checks that need no body: a failing header is never trusted for a length.
    pub fn check(&self) -> Result<(), &'static str> {
        let len = self.len as usize;
        if len < OVERHEAD {
            return Err("record length below the minimum");
        }
        if len > MAX_RECORD {
            return Err("record length above the maximum");
        }
        if self.subj_len as usize + self.hdr_len as usize + OVERHEAD > len {
            return Err("subject/header lengths exceed the record");
        }
        match self.kind {
            KIND_MSG => {
                if self.subj_len == 0 {
                    return Err("message without a subject");
                }
            }
            KIND_ERASED => {}
            KIND_DEL if len == OVERHEAD => {}
            KIND_SEQS if len == OVERHEAD + 8 => {}
            KIND_DEL | KIND_SEQS => return Err("bad length for a control record"),
            _ => return Err("unknown record kind"),
        }
        Ok(())
    }

    /// Body lengths: (subject, header, data).
    pub fn parts(&self) -> (usize, usize, usize) {
        let s = self.subj_len as usize;
        let h = self.hdr_len as usize;
        (s, h, self.len as usize - OVERHEAD - s - h)
    }
}

/// Does the record's trailing checksum match its bytes? `rec` is the whole record.
pub fn verify(rec: &[u8]) -> bool {
    if rec.len() < OVERHEAD {
        return false;
    }
    let (body, sum) = rec.split_at(rec.len() - 4);
    crc32c(body).to_le_bytes() == sum
}

/// Record length for a message (may exceed `MAX_RECORD`; the caller checks).
pub fn msg_record_len(subject: &str, header: Option<&[u8]>, data: &[u8]) -> usize {
    OVERHEAD + subject.len() + header.map_or(0, <[u8]>::len) + data.len()
}

#[allow(clippy::too_many_arguments)]
fn encode(
    buf: &mut Vec<u8>,
    kind: u8,
    flags: u8,
    seq: u64,
    ts: i64,
    subject: &[u8],
    header: &[u8],
    data: &[u8],
) -> usize {
    let len = OVERHEAD + subject.len() + header.len() + data.len();
    let start = buf.len();
    buf.reserve(len);
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.push(kind);
    buf.push(flags);
    buf.extend_from_slice(&(subject.len() as u16).to_le_bytes());
    buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&ts.to_le_bytes());
    buf.extend_from_slice(subject);
    buf.extend_from_slice(header);
    buf.extend_from_slice(data);
    let crc = crc32c(&buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
    len
}

/// Append a message record; the caller has checked the subject fits in u16 and the record in
/// `MAX_RECORD`.
pub fn encode_msg(
    buf: &mut Vec<u8>,
    seq: u64,
    ts: i64,
    subject: &str,
    header: Option<&[u8]>,
    data: &[u8],
) -> usize {
    let flags = if header.is_some() { FLAG_HDR } else { 0 };
    encode(
        buf,
        KIND_MSG,
        flags,
        seq,
        ts,
        subject.as_bytes(),
        header.unwrap_or(&[]),
        data,
    )
}

pub fn encode_del(buf: &mut Vec<u8>, seq: u64) -> usize {
    encode(buf, KIND_DEL, 0, seq, 0, &[], &[], &[])
}

pub fn encode_seqs(buf: &mut Vec<u8>, floor: u64, last_seq: u64, last_ts: i64) -> usize {
    encode(
        buf,
        KIND_SEQS,
        0,
        floor,
        last_seq as i64,
        &[],
        &[],
        &last_ts.to_le_bytes(),
    )
}

/// An ERASED record of exactly `len` bytes (len >= OVERHEAD) for `seq`, zero body.
pub fn encode_erased(len: usize, seq: u64) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len);
    let zeros = vec![0u8; len.saturating_sub(OVERHEAD)];
    encode(&mut buf, KIND_ERASED, 0, seq, 0, &[], &[], &zeros);
    buf
}

/// The body of a SEQS record: the last timestamp.
pub fn seqs_last_ts(rec: &[u8]) -> i64 {
    match rec
        .get(HDR..HDR + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
    {
        Some(b) => i64::from_le_bytes(b),
        None => 0,
    }
}

use std::sync::OnceLock;

const POLY: u32 = 0x82F6_3B78;

const fn make_table() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut c = t[0][i];
        let mut k = 1;
        while k < 8 {
            c = t[0][(c & 0xff) as usize] ^ (c >> 8);
            t[k][i] = c;
            k += 1;
        }
        i += 1;
    }
    t
}

static TABLE: [[u32; 256]; 8] = make_table();

/// CRC-32C (Castagnoli) of `data`: with the CPU's CRC32 instruction where there is one
/// (SSE 4.2; about 6× the table's speed on 1 KiB records, where the table took a third of the
/// file store's publish path), else by table.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

/// The CRC-32C of `A` followed by `data`, given `crc`, the CRC-32C of `A` (0 for nothing):
/// a record's checksum over pieces that are not in one buffer.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2, checked just above (the answer is cached).
            return unsafe { crc32c_sse42(crc, data) };
        }
    }
    crc32c_table(crc, data)
}

/// Bytes per lane of [`crc32c_sse42`]'s three interleaved CRCs.
const LANE: usize = 256;

/// Tables that advance a CRC register over `LANE` (`[0]`) and `2 * LANE` (`[1]`) zero
/// bytes: the register is linear in its bits, so four byte-indexed tables cover it.
fn shift_tables() -> &'static [[[u32; 256]; 4]; 2] {
    static T: OnceLock<Box<[[[u32; 256]; 4]; 2]>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Box::new([[[0u32; 256]; 4]; 2]);
        for (which, tables) in t.iter_mut().enumerate() {
            let zeros = LANE * (which + 1);
            for (k, table) in tables.iter_mut().enumerate() {
                for (b, slot) in table.iter_mut().enumerate() {
                    let mut c = (b as u32) << (8 * k);
                    for _ in 0..zeros {
                        c = TABLE[0][(c & 0xff) as usize] ^ (c >> 8);
                    }
                    *slot = c;
                }
            }
        }
        t
    })
}

fn shift(t: &[[u32; 256]; 4], c: u32) -> u32 {
    t[0][(c & 0xff) as usize]
        ^ t[1][((c >> 8) & 0xff) as usize]
        ^ t[2][((c >> 16) & 0xff) as usize]
        ^ t[3][(c >> 24) as usize]
}

/// CRC-32C with the SSE 4.2 `crc32` instruction, 8 bytes at a time. Blocks of three
/// [`LANE`]s run as three independent CRCs (the instruction's latency is three times its
/// throughput), then joined: a register run over `B` after `A` is `A`'s shifted over
/// `len(B)` zero bytes, XOR `B`'s from zero.
///
/// # Safety
/// The CPU must support SSE 4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn crc32c_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let word = |b: &[u8], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(w)
    };
    let mut c = !crc;
    let mut rest = data;
    if rest.len() >= 3 * LANE {
        let t = shift_tables();
        while rest.len() >= 3 * LANE {
            let (a, tail) = rest.split_at(LANE);
            let (b, tail) = tail.split_at(LANE);
            let (d, tail) = tail.split_at(LANE);
            let (mut c0, mut c1, mut c2) = (u64::from(c), 0u64, 0u64);
            for i in (0..LANE).step_by(8) {
                c0 = _mm_crc32_u64(c0, word(a, i));
                c1 = _mm_crc32_u64(c1, word(b, i));
                c2 = _mm_crc32_u64(c2, word(d, i));
            }
            c = shift(&t[1], c0 as u32) ^ shift(&t[0], c1 as u32) ^ c2 as u32;
            rest = tail;
        }
    }
    let mut c = u64::from(c);
    let mut chunks = rest.chunks_exact(8);
    for ch in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(ch);
        c = _mm_crc32_u64(c, u64::from_le_bytes(w));
    }
    let mut c = c as u32;
    for &b in chunks.remainder() {
        c = _mm_crc32_u8(c, b);
    }
    !c
}

/// CRC-32C by slicing-by-8 tables (any CPU).
fn crc32c_table(crc: u32, data: &[u8]) -> u32 {
    let t = &TABLE;
    let mut c = !crc;
    let mut chunks = data.chunks_exact(8);
    for ch in &mut chunks {
        let lo = u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]) ^ c;
        let hi = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
        c = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = t[0][((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_instruction_and_table_agree() {
        assert_eq!(crc32c_table(0, b"123456789"), 0xE306_9283);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for n in (0..64).chain([255, 767, 768, 769, 1024, 1031, 1536, 2311, 4096, 5000]) {
            for off in 0..3 {
                let d = &data[off..off + n.min(data.len() - off)];
                assert_eq!(crc32c(d), crc32c_table(0, d), "n={n} off={off}");
            }
        }
    }

    #[test]
    fn crc32c_over_pieces_is_the_crc_of_the_whole() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for cut in [0, 1, 7, 8, 25, 767, 768, 1000, 2999, 3000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(&data), "cut {cut}");
            assert_eq!(
                crc32c_table(crc32c_table(0, a), b),
                crc32c(&data),
                "table, cut {cut}"
            );
        }
    }

    #[test]
    fn crc32c_known_vectors() {
        assert_eq!(crc32c(b""), 0);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        // Slicing and bytewise paths agree at every split length.
        let data: Vec<u8> = (0..100u8).collect();
        for n in 0..data.len() {
            let mut c = !0u32;
            for &b in &data[..n] {
                c = TABLE[0][((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
            }
            assert_eq!(crc32c(&data[..n]), !c, "n={n}");
        }
    }

    #[test]
    fn record_roundtrip_and_checks() {
        let mut buf = Vec::new();
        let n = encode_msg(&mut buf, 7, 42, "a.b", Some(b"NATS/1.0\r\n\r\n"), b"hi");
        assert_eq!(n, buf.len());
        let h = RecHdr::parse(&buf).expect("header");
        assert_eq!((h.kind, h.seq, h.ts, h.len as usize), (KIND_MSG, 7, 42, n));
        assert!(h.check().is_ok());
        assert_eq!(h.parts(), (3, 12, 2));
        assert!(verify(&buf));
        buf[HDR + 1] ^= 1;
        assert!(!verify(&buf));

        let mut b = Vec::new();
        encode_seqs(&mut b, 5, 9, -3);
        let h = RecHdr::parse(&b).expect("header");
        assert!(h.check().is_ok() && verify(&b));
        assert_eq!((h.seq, h.ts, seqs_last_ts(&b)), (5, 9, -3));

        let e = encode_erased(n, 7);
        assert_eq!(e.len(), n);
        assert!(verify(&e));
        let bad = RecHdr { len: u32::MAX, ..h };
        assert!(bad.check().is_err());
    }
}
