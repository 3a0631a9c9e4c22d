//! The S2 stream format (klauspost/compress/s2, the framing nats-server speaks on a compressed
//! route or leafnode), sans-io: an [`Encoder`] that turns one write batch into a complete
//! stream (stream identifier first, then chunks of at most 1 MiB of input, as Go's `s2.Writer`
//! with `WriterConcurrency(1)` does on each flush: `Reset` + `Write` + `Close`), and an
//! incremental [`Decoder`] fed with whatever the socket returned. Block (de)compression is the
//! `minlz` crate's; the framing, checksums and limits are here. No I/O, no tokio.

use bytes::{Buf, BytesMut};
use std::fmt;

const CHUNK_COMPRESSED: u8 = 0x00;
const CHUNK_UNCOMPRESSED: u8 = 0x01;
const CHUNK_STREAM_ID: u8 = 0xff;
/// Chunk types up to this one are reserved and unskippable (a reader must fail on them).
const LAST_UNSKIPPABLE: u8 = 0x7f;
const MAGIC_BODY: &[u8; 6] = b"S2sTwO";
const MAGIC_BODY_SNAPPY: &[u8; 6] = b"sNaPpY";
/// The stream identifier chunk every S2 stream starts with.
pub const STREAM_IDENTIFIER: &[u8; 10] = b"\xff\x06\x00\x00S2sTwO";
const HEADER: usize = 4;
const CHECKSUM: usize = 4;

/// Input bytes per chunk written by the encoder (Go's `defaultBlockSize`).
pub const BLOCK_SIZE: usize = 1 << 20;
/// The largest decoded block a reader accepts (Go's `maxBlockSize`); a larger one is refused.
pub const MAX_BLOCK_SIZE: usize = 4 << 20;
/// Decoded-size limit of a block in a Snappy-framed stream (`sNaPpY` identifier).
const MAX_SNAPPY_BLOCK_SIZE: usize = 1 << 16;
/// The largest compressed chunk body: checksum + `MaxEncodedLen(MAX_BLOCK_SIZE)` (a 4-byte
/// length varint and at most 4 bytes of literal header on top of the data).
pub const MAX_COMPRESSED_CHUNK: usize = CHECKSUM + MAX_BLOCK_SIZE + 4 + 4;

/// CRC-32C (Castagnoli), slice-by-16: the crate's own checksum is bytewise, about 4× slower,
/// and checksums cost as much as uncompressed framing itself.
static CRC32C: crc::Crc<u32, crc::Table<16>> =
    crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// The stream format's masked checksum of a chunk's uncompressed data.
fn checksum(data: &[u8]) -> u32 {
    CRC32C
        .checksum(data)
        .rotate_right(15)
        .wrapping_add(0xa282_ead8)
}

/// How hard the encoder works; the `s2_*` compression modes map onto these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// Every chunk stored uncompressed (framing and checksums only): `s2_uncompressed`.
    Uncompressed,
    Fast,
    Better,
    Best,
}

/// Writes S2 streams. Keeps the block encoder's hash tables between batches, so a long-lived
/// connection does not reallocate them on every flush.
pub struct Encoder {
    level: Level,
    blocks: minlz::Encoder,
}

impl Encoder {
    pub fn new(level: Level) -> Self {
        Encoder {
            level,
            blocks: minlz::Encoder::new(),
        }
    }

    pub fn level(&self) -> Level {
        self.level
    }

    /// Changes the level for the next batch (s2_auto re-selects it after each PONG).
    pub fn set_level(&mut self, level: Level) {
        self.level = level;
    }

    /// Appends `input` to `out` as one complete S2 stream: the stream identifier, then one
    /// chunk per [`BLOCK_SIZE`] bytes of input, each compressed unless that would not make it
    /// smaller (or the level is `Uncompressed`). An empty batch writes nothing.
    pub fn encode(&mut self, input: &[u8], out: &mut BytesMut) {
        if input.is_empty() {
            return;
        }
        out.reserve(STREAM_IDENTIFIER.len() + input.len() + HEADER + CHECKSUM);
        out.extend_from_slice(STREAM_IDENTIFIER);
        for block in input.chunks(BLOCK_SIZE) {
            self.encode_block(block, out);
        }
    }

    fn encode_block(&mut self, block: &[u8], out: &mut BytesMut) {
        let sum = checksum(block);
        let compressed = match self.level {
            Level::Uncompressed => None,
            Level::Fast => Some(self.blocks.encode(block)),
            Level::Better => Some(self.blocks.encode_better(block)),
            Level::Best => Some(self.blocks.encode_best(block)),
        };
        // Like Go's writer, store the block as is when compressing does not pay: the reader
        // then copies instead of decoding.
        let worth = |c: &Vec<u8>| c.len() < block.len() - block.len() / 32;
        let (kind, body) = match &compressed {
            Some(c) if worth(c) => (CHUNK_COMPRESSED, c.as_slice()),
            _ => (CHUNK_UNCOMPRESSED, block),
        };
        let len = CHECKSUM + body.len();
        out.extend_from_slice(&[kind, len as u8, (len >> 8) as u8, (len >> 16) as u8]);
        out.extend_from_slice(&sum.to_le_bytes());
        out.extend_from_slice(body);
    }
}

/// `input` as one Snappy-framed stream (`sNaPpY` identifier, chunks of at most 64 KiB of
/// input), as Go's `s2.NewWriter(w, s2.WriterSnappyCompat())` writes it: what nats-server
/// sends for `Content-Encoding: snappy` (a message trace event). Our [`Decoder`] reads it.
pub fn snappy_framed(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + input.len() + 8);
    out.extend_from_slice(&[CHUNK_STREAM_ID, 6, 0, 0]);
    out.extend_from_slice(MAGIC_BODY_SNAPPY);
    for block in input.chunks(MAX_SNAPPY_BLOCK_SIZE) {
        let sum = checksum(block);
        let c = minlz::encode_snappy(block);
        let (kind, body) = if c.len() < block.len() - block.len() / 32 {
            (CHUNK_COMPRESSED, c.as_slice())
        } else {
            (CHUNK_UNCOMPRESSED, block)
        };
        let len = CHECKSUM + body.len();
        out.extend_from_slice(&[kind, len as u8, (len >> 8) as u8, (len >> 16) as u8]);
        out.extend_from_slice(&sum.to_le_bytes());
        out.extend_from_slice(body);
    }
    out
}

/// Why a compressed stream was refused. Once a decoder has failed it keeps failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream did not start with a stream identifier chunk.
    MissingStreamIdentifier { chunk_type: u8 },
    /// A stream identifier chunk of the wrong length or with an unknown magic.
    BadStreamIdentifier,
    /// A data chunk too short to hold its checksum.
    ChunkTooShort { chunk_type: u8, len: usize },
    /// A data chunk longer than the S2 maximum (refused before it is buffered).
    ChunkTooLarge {
        chunk_type: u8,
        len: usize,
        max: usize,
    },
    /// A block whose decoded size is above the maximum.
    BlockTooLarge { len: usize, max: usize },
    /// A compressed block that does not decode.
    Corrupt,
    /// A chunk whose checksum does not match its data.
    ChecksumMismatch,
    /// A reserved, unskippable chunk type (0x02–0x7f).
    ReservedChunk(u8),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::MissingStreamIdentifier { chunk_type } => write!(
                f,
                "s2: corrupt input: stream does not start with a stream identifier (chunk type 0x{chunk_type:02x})"
            ),
            DecodeError::BadStreamIdentifier => write!(f, "s2: corrupt input: bad stream identifier"),
            DecodeError::ChunkTooShort { chunk_type, len } => write!(
                f,
                "s2: corrupt input: chunk type 0x{chunk_type:02x} of {len} bytes is too short"
            ),
            DecodeError::ChunkTooLarge { chunk_type, len, max } => write!(
                f,
                "s2: chunk type 0x{chunk_type:02x} of {len} bytes is larger than the maximum of {max}"
            ),
            DecodeError::BlockTooLarge { len, max } => write!(
                f,
                "s2: decoded block of {len} bytes is larger than the maximum of {max}"
            ),
            DecodeError::Corrupt => write!(f, "s2: corrupt input"),
            DecodeError::ChecksumMismatch => write!(f, "s2: corrupt input, crc mismatch"),
            DecodeError::ReservedChunk(t) => write!(f, "s2: unsupported input: reserved chunk type 0x{t:02x}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Reads an S2 (or Snappy-framed) stream incrementally.
///
/// The driver appends what the socket returned ([`Decoder::feed`], or reads straight into
/// [`Decoder::input`]), then calls [`Decoder::decode`] with an output budget until it returns
/// `Ok(false)`, parsing the decoded bytes in between; it reads the socket again only then. That
/// way memory stays bounded: the input holds at most one partial chunk (a chunk above the S2
/// maximum is refused as soon as its 4-byte header arrives) plus one read, and one `decode`
/// call overshoots its budget by at most one block ([`MAX_BLOCK_SIZE`]), whatever the
/// compression ratio of the input.
#[derive(Default)]
pub struct Decoder {
    input: BytesMut,
    /// A stream identifier has been seen (the first chunk must be one).
    started: bool,
    /// The last stream identifier was Snappy's: blocks are limited to 64 KiB.
    snappy: bool,
    /// Bytes of a skippable chunk (padding, index, reserved 0x80–0xfe) still to drop.
    skip: usize,
    failed: Option<DecodeError>,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends compressed bytes as they came off the socket.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// The buffer of compressed bytes not yet decoded, for reading the socket straight into it.
    pub fn input(&mut self) -> &mut BytesMut {
        &mut self.input
    }

    /// Compressed bytes held that are not decoded yet (a partial chunk, or chunks left over
    /// when the last `decode` hit its budget).
    pub fn buffered(&self) -> usize {
        self.input.len()
    }

    /// Decodes whole chunks from the fed input, appending the data to `out`, until `out` has
    /// grown by at least `budget` bytes or no whole chunk is left. Returns `Ok(true)` when it
    /// stopped for the budget (call again: more may be ready), `Ok(false)` when it needs more
    /// input. On error the data of the chunks before the bad one stays in `out`.
    pub fn decode(&mut self, out: &mut BytesMut, budget: usize) -> Result<bool, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let start = out.len();
        let r = self.decode_chunks(out, start, budget);
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    fn decode_chunks(
        &mut self,
        out: &mut BytesMut,
        start: usize,
        budget: usize,
    ) -> Result<bool, DecodeError> {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(self.input.len());
                self.input.advance(n);
                self.skip -= n;
                if self.skip > 0 {
                    return Ok(false);
                }
            }
            if out.len() - start >= budget && !self.input.is_empty() {
                return Ok(true);
            }
            if self.input.len() < HEADER {
                return Ok(false);
            }
            let chunk_type = self.input[0];
            let len = usize::from(self.input[1])
                | usize::from(self.input[2]) << 8
                | usize::from(self.input[3]) << 16;
            if !self.started && chunk_type != CHUNK_STREAM_ID {
                return Err(DecodeError::MissingStreamIdentifier { chunk_type });
            }
            match chunk_type {
                CHUNK_COMPRESSED | CHUNK_UNCOMPRESSED => {
                    let max = if chunk_type == CHUNK_COMPRESSED {
                        MAX_COMPRESSED_CHUNK
                    } else {
                        CHECKSUM + self.max_block()
                    };
                    if len < CHECKSUM {
                        return Err(DecodeError::ChunkTooShort { chunk_type, len });
                    }
                    if len > max {
                        return Err(DecodeError::ChunkTooLarge {
                            chunk_type,
                            len,
                            max,
                        });
                    }
                    if self.input.len() < HEADER + len {
                        return Ok(false);
                    }
                    let chunk = &self.input[HEADER..HEADER + len];
                    let (sum, body) = chunk.split_at(CHECKSUM);
                    let sum = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
                    let at = out.len();
                    if chunk_type == CHUNK_COMPRESSED {
                        decode_block(body, self.max_block(), out)?;
                    } else {
                        out.extend_from_slice(body);
                    }
                    if checksum(&out[at..]) != sum {
                        out.truncate(at);
                        return Err(DecodeError::ChecksumMismatch);
                    }
                    self.input.advance(HEADER + len);
                }
                CHUNK_STREAM_ID => {
                    if len != MAGIC_BODY.len() {
                        return Err(DecodeError::BadStreamIdentifier);
                    }
                    if self.input.len() < HEADER + len {
                        return Ok(false);
                    }
                    let magic = &self.input[HEADER..HEADER + len];
                    self.snappy = if magic == MAGIC_BODY {
                        false
                    } else if magic == MAGIC_BODY_SNAPPY {
                        true
                    } else {
                        return Err(DecodeError::BadStreamIdentifier);
                    };
                    self.started = true;
                    self.input.advance(HEADER + len);
                }
                0x02..=LAST_UNSKIPPABLE => return Err(DecodeError::ReservedChunk(chunk_type)),
                _ => {
                    // Padding (0xfe), index (0x99) and reserved skippable chunks: dropped as
                    // they arrive, never buffered (their 24-bit length is at most 16 MiB).
                    self.input.advance(HEADER);
                    self.skip = len;
                }
            }
        }
    }

    fn max_block(&self) -> usize {
        if self.snappy {
            MAX_SNAPPY_BLOCK_SIZE
        } else {
            MAX_BLOCK_SIZE
        }
    }
}

/// Decodes one S2 block (a varint decoded length, then the block) onto the end of `out`.
fn decode_block(body: &[u8], max: usize, out: &mut BytesMut) -> Result<(), DecodeError> {
    let (n, _) = minlz::decode_len(body).map_err(|_| DecodeError::Corrupt)?;
    if n > max {
        return Err(DecodeError::BlockTooLarge { len: n, max });
    }
    let at = out.len();
    out.resize(at + n, 0);
    match minlz::decode_into(&mut out[at..], body) {
        Ok(written) if written == n => Ok(()),
        _ => {
            out.truncate(at);
            Err(DecodeError::Corrupt)
        }
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
