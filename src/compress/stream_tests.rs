//! Tests of the S2 stream codec (`stream.rs`): round trips at every level, chunking and output
//! budgets, corrupt and oversized input, and cross-checks with the `minlz` crate's own stream
//! reader and writer.

use super::*;
use std::io::{Read, Write};

const LEVELS: [Level; 4] = [Level::Uncompressed, Level::Fast, Level::Better, Level::Best];

/// Route-like traffic: RMSG lines with small payloads, compressible as real traffic is.
fn route_traffic(msgs: usize, payload: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..msgs {
        v.extend_from_slice(
            format!("RMSG $G orders.eu.{} _INBOX.abc.{} {payload}\r\n", i % 7, i).as_bytes(),
        );
        v.extend((0..payload).map(|j| b'a' + ((i + j) % 26) as u8));
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// Bytes that do not compress (xorshift).
fn noise(n: usize, mut seed: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

fn encode(level: Level, input: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    Encoder::new(level).encode(input, &mut out);
    out
}

/// Appends a chunk header: type and 24-bit little-endian length.
fn push_header(s: &mut BytesMut, chunk_type: u8, len: usize) {
    s.extend_from_slice(&[chunk_type, len as u8, (len >> 8) as u8, (len >> 16) as u8]);
}

/// Appends a whole data chunk: header, checksum of `data`, `body`.
fn push_chunk(s: &mut BytesMut, chunk_type: u8, data: &[u8], body: &[u8]) {
    push_header(s, chunk_type, CHECKSUM + body.len());
    s.extend_from_slice(&minlz::crc::crc(data).to_le_bytes());
    s.extend_from_slice(body);
}

fn decode_all(stream: &[u8]) -> Result<BytesMut, DecodeError> {
    let mut d = Decoder::new();
    d.feed(stream);
    let mut out = BytesMut::new();
    while d.decode(&mut out, usize::MAX)? {}
    Ok(out)
}

#[test]
fn checksum_is_the_masked_crc32c() {
    for n in [0usize, 1, 15, 16, 17, 1000, 70_000] {
        let data = noise(n, n as u64 + 1);
        assert_eq!(checksum(&data), minlz::crc::crc(&data), "{n} bytes");
    }
    // The framing format's reference value: masked CRC-32C of "123456789" (0xe3069283).
    assert_eq!(
        checksum(b"123456789"),
        0xe306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8)
    );
}

#[test]
fn round_trip_every_level_and_size() {
    let inputs = [
        b"PING\r\n".to_vec(),
        route_traffic(1, 16),
        route_traffic(200, 16),
        route_traffic(50, 1024),
        noise(70_000, 7),
        route_traffic(3000, 1024), // > 3 MiB: several 1 MiB chunks
    ];
    for level in LEVELS {
        for input in &inputs {
            let stream = encode(level, input);
            assert_eq!(
                &stream[..10],
                STREAM_IDENTIFIER,
                "{level:?} starts with the identifier"
            );
            assert_eq!(
                decode_all(&stream).unwrap(),
                &input[..],
                "{level:?} {} bytes",
                input.len()
            );
        }
    }
}

#[test]
fn levels_compress_route_traffic_and_uncompressed_stores() {
    let input = route_traffic(500, 16);
    let stored = encode(Level::Uncompressed, &input);
    assert_eq!(stored.len(), 10 + 8 + input.len(), "one stored chunk");
    assert_eq!(stored[10], CHUNK_UNCOMPRESSED);
    for level in [Level::Fast, Level::Better, Level::Best] {
        let s = encode(level, &input);
        assert_eq!(s[10], CHUNK_COMPRESSED);
        assert!(
            s.len() < input.len() / 2,
            "{level:?}: {} of {}",
            s.len(),
            input.len()
        );
    }
    // Incompressible data is stored even at Best.
    assert_eq!(encode(Level::Best, &noise(5000, 3))[10], CHUNK_UNCOMPRESSED);
    assert!(
        encode(Level::Fast, b"").is_empty(),
        "an empty batch writes nothing"
    );
}

#[test]
fn chunks_hold_at_most_one_block() {
    let input = route_traffic(3000, 1024);
    let stream = encode(Level::Fast, &input);
    let mut d = Decoder::new();
    d.feed(&stream);
    let mut out = BytesMut::new();
    // With a budget of one byte every call decodes exactly one data chunk.
    let mut sizes = Vec::new();
    loop {
        let before = out.len();
        let more = d.decode(&mut out, 1).unwrap();
        sizes.push(out.len() - before);
        if !more {
            break;
        }
    }
    assert_eq!(out, &input[..]);
    assert!(sizes.iter().all(|&n| n <= BLOCK_SIZE), "{sizes:?}");
    assert_eq!(
        sizes.iter().filter(|&&n| n == BLOCK_SIZE).count(),
        input.len() / BLOCK_SIZE
    );
}

#[test]
fn byte_at_a_time_and_odd_splits() {
    let input = route_traffic(300, 100);
    for level in LEVELS {
        // Several batches, each its own stream (as each flush is), back to back.
        let mut enc = Encoder::new(level);
        let mut stream = BytesMut::new();
        for part in input.chunks(7_777) {
            enc.encode(part, &mut stream);
        }
        for step in [1usize, 3, 4, 9, 10, 11, 4096] {
            let mut d = Decoder::new();
            let mut out = BytesMut::new();
            for piece in stream.chunks(step) {
                d.feed(piece);
                while d.decode(&mut out, 64 * 1024).unwrap() {}
            }
            assert_eq!(out, &input[..], "{level:?} fed {step} bytes at a time");
            assert_eq!(d.buffered(), 0);
        }
    }
}

#[test]
fn reading_straight_into_the_input_buffer() {
    let input = route_traffic(10, 16);
    let stream = encode(Level::Fast, &input);
    let mut d = Decoder::new();
    d.input().extend_from_slice(&stream[..5]);
    let mut out = BytesMut::new();
    assert!(!d.decode(&mut out, 1024).unwrap());
    d.input().extend_from_slice(&stream[5..]);
    assert!(!d.decode(&mut out, 1024).unwrap());
    assert_eq!(out, &input[..]);
}

#[test]
fn the_budget_bounds_output_whatever_the_ratio() {
    // 40 chunks of 4 MiB of zeros: ~160 MiB from a few KiB of input (a decompression bomb).
    let zeros = vec![0u8; MAX_BLOCK_SIZE];
    let block = minlz::encode(&zeros);
    let mut stream = BytesMut::from(&STREAM_IDENTIFIER[..]);
    for _ in 0..40 {
        push_chunk(&mut stream, CHUNK_COMPRESSED, &zeros, &block);
    }
    assert!(stream.len() < 64 * 1024, "{}", stream.len());
    let mut d = Decoder::new();
    d.feed(&stream);
    let mut out = BytesMut::new();
    let mut total = 0;
    let mut calls = 0;
    while d.decode(&mut out, 64 * 1024).unwrap() {
        assert!(
            out.len() <= MAX_BLOCK_SIZE,
            "one call decodes at most one block past the budget"
        );
        total += out.len();
        out.clear();
        calls += 1;
    }
    total += out.len();
    assert_eq!(total, 40 * MAX_BLOCK_SIZE);
    assert_eq!(calls, 39);
}

#[test]
fn stream_must_start_with_the_identifier() {
    let stream = encode(Level::Fast, b"hello world");
    let err = decode_all(&stream[10..]).unwrap_err();
    assert_eq!(
        err,
        DecodeError::MissingStreamIdentifier {
            chunk_type: CHUNK_UNCOMPRESSED
        }
    );
    // Plain protocol text (a peer that did not switch) is refused on its first 4 bytes.
    let mut d = Decoder::new();
    d.feed(b"PING");
    assert!(matches!(
        d.decode(&mut BytesMut::new(), 1024),
        Err(DecodeError::MissingStreamIdentifier { .. })
    ));
    let mut bad = BytesMut::from(&stream[..]);
    bad[5] = b'X';
    assert_eq!(
        decode_all(&bad).unwrap_err(),
        DecodeError::BadStreamIdentifier
    );
    bad = BytesMut::from(&stream[..]);
    bad[1] = 7;
    assert_eq!(
        decode_all(&bad).unwrap_err(),
        DecodeError::BadStreamIdentifier
    );
}

#[test]
fn corrupted_input_is_an_error_not_a_panic() {
    let input = route_traffic(40, 64);
    let stream = encode(Level::Better, &input);
    // A checksum or body byte flipped.
    for at in [14, 20, stream.len() / 2, stream.len() - 1] {
        let mut bad = BytesMut::from(&stream[..]);
        bad[at] ^= 0x55;
        let err = decode_all(&bad).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::ChecksumMismatch
                    | DecodeError::Corrupt
                    | DecodeError::BlockTooLarge { .. }
            ),
            "flip at {at}: {err}"
        );
    }
    // Random mutations and random garbage after a valid identifier: never a panic.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..2000 {
        let mut bad = BytesMut::from(&stream[..]);
        let r = noise(4, seed.wrapping_add(round));
        let at = 10 + (usize::from(r[0]) << 8 | usize::from(r[1])) % (bad.len() - 10);
        bad[at] = r[2];
        let _ = decode_all(&bad);
        let mut garbage = BytesMut::from(&STREAM_IDENTIFIER[..]);
        garbage.extend_from_slice(&noise(64, seed));
        let _ = decode_all(&garbage);
        seed = seed.rotate_left(7) ^ round;
    }
}

#[test]
fn errors_are_sticky() {
    let mut d = Decoder::new();
    d.feed(b"\x05\x00\x00\x00xxxx");
    let e = d.decode(&mut BytesMut::new(), 100).unwrap_err();
    assert_eq!(e, DecodeError::MissingStreamIdentifier { chunk_type: 5 });
    d.feed(STREAM_IDENTIFIER);
    assert_eq!(d.decode(&mut BytesMut::new(), 100).unwrap_err(), e);
}

#[test]
fn truncated_input_waits_and_keeps_what_it_has() {
    let input = route_traffic(100, 16);
    let stream = encode(Level::Fast, &input);
    let mut d = Decoder::new();
    d.feed(&stream[..stream.len() - 1]);
    let mut out = BytesMut::new();
    assert!(!d.decode(&mut out, usize::MAX).unwrap());
    assert!(out.is_empty(), "no partial block is emitted");
    assert_eq!(d.buffered(), stream.len() - 10 - 1);
}

#[test]
fn oversize_and_undersize_chunks_are_refused_from_their_header() {
    let header = |t: u8, len: usize| {
        let mut s = BytesMut::from(&STREAM_IDENTIFIER[..]);
        push_header(&mut s, t, len);
        s
    };
    // Only the 4-byte header has arrived: refused without waiting for (or buffering) the body.
    let big = MAX_COMPRESSED_CHUNK + 1;
    assert_eq!(
        decode_all(&header(CHUNK_COMPRESSED, big)).unwrap_err(),
        DecodeError::ChunkTooLarge {
            chunk_type: 0,
            len: big,
            max: MAX_COMPRESSED_CHUNK
        }
    );
    let big = CHECKSUM + MAX_BLOCK_SIZE + 1;
    assert!(matches!(
        decode_all(&header(CHUNK_UNCOMPRESSED, big)).unwrap_err(),
        DecodeError::ChunkTooLarge { chunk_type: 1, .. }
    ));
    assert_eq!(
        decode_all(&header(CHUNK_COMPRESSED, 3)).unwrap_err(),
        DecodeError::ChunkTooShort {
            chunk_type: 0,
            len: 3
        }
    );
    assert_eq!(
        decode_all(&header(0x02, 0)).unwrap_err(),
        DecodeError::ReservedChunk(2)
    );
    assert_eq!(
        decode_all(&header(0x7f, 9)).unwrap_err(),
        DecodeError::ReservedChunk(0x7f)
    );
    // A block claiming to decode to more than 4 MiB.
    let mut s = header(CHUNK_COMPRESSED, CHECKSUM + 5);
    s.extend_from_slice(&[0, 0, 0, 0]);
    s.extend_from_slice(&[0x81, 0x80, 0x80, 0x02]); // varint 4 MiB + 1
    s.extend_from_slice(&[0]);
    assert_eq!(
        decode_all(&s).unwrap_err(),
        DecodeError::BlockTooLarge {
            len: MAX_BLOCK_SIZE + 1,
            max: MAX_BLOCK_SIZE
        }
    );
    let txt = DecodeError::ChunkTooLarge {
        chunk_type: 0,
        len: 5_000_000,
        max: MAX_COMPRESSED_CHUNK,
    }
    .to_string();
    assert!(
        txt.starts_with("s2: chunk type 0x00 of 5000000 bytes is larger than the maximum"),
        "{txt}"
    );
}

#[test]
fn skippable_chunks_are_dropped_as_they_arrive() {
    let input = route_traffic(20, 16);
    let body = encode(Level::Fast, &input);
    let mut s = BytesMut::from(&body[..10]);
    // A 1 MiB padding chunk, then the data.
    let pad = 1 << 20;
    push_header(&mut s, 0xfe, pad);
    s.extend_from_slice(&vec![0u8; pad]);
    s.extend_from_slice(&body[10..]);
    let mut d = Decoder::new();
    let mut out = BytesMut::new();
    for piece in s.chunks(64 * 1024) {
        d.feed(piece);
        while d.decode(&mut out, 1 << 16).unwrap() {}
        assert!(d.buffered() <= 64 * 1024, "padding is not buffered");
    }
    assert_eq!(out, &input[..]);
}

#[test]
fn snappy_framed_streams_are_read_with_the_snappy_block_limit() {
    let data = route_traffic(5, 16);
    let mut s = BytesMut::from(&b"\xff\x06\x00\x00sNaPpY"[..]);
    push_chunk(&mut s, CHUNK_UNCOMPRESSED, &data, &data);
    assert_eq!(decode_all(&s).unwrap(), &data[..]);
    let big = CHECKSUM + (1 << 16) + 1;
    let mut s = BytesMut::from(&b"\xff\x06\x00\x00sNaPpY"[..]);
    push_header(&mut s, CHUNK_UNCOMPRESSED, big);
    assert!(matches!(
        decode_all(&s).unwrap_err(),
        DecodeError::ChunkTooLarge { .. }
    ));
}

/// The crate's own std::io stream reader and writer agree with ours, both ways, including its
/// padding and index chunks.
#[test]
fn cross_check_with_the_crates_stream_reader_and_writer() {
    let input = route_traffic(2500, 1024);
    for level in LEVELS {
        let ours = encode(level, &input);
        let mut back = Vec::new();
        minlz::Reader::new(&ours[..])
            .read_to_end(&mut back)
            .unwrap();
        assert!(
            back == input,
            "{level:?}: the crate's reader reads our stream"
        );
    }
    for make in [
        |v: Vec<u8>| minlz::Writer::new(v),
        |v: Vec<u8>| minlz::Writer::with_padding(v, 4096),
        |v: Vec<u8>| minlz::Writer::with_index(v),
        |v: Vec<u8>| minlz::Writer::with_block_size(v, 64 * 1024),
    ] {
        let mut w = make(Vec::new());
        w.write_all(&input).unwrap();
        w.flush().unwrap();
        let theirs = w.reset(Vec::new());
        assert!(
            decode_all(&theirs).unwrap() == input,
            "we read the crate's stream"
        );
    }
}

/// Decodes `data` fed `chunk` bytes at a time with output `budget`; the bytes and whether it
/// failed. Checks the memory bounds on the way.
fn decode_cut(data: &[u8], chunk: usize, budget: usize) -> (Vec<u8>, bool) {
    let mut d = Decoder::new();
    let mut all = Vec::new();
    let mut out = BytesMut::new();
    for c in data.chunks(chunk.max(1)) {
        d.feed(c);
        loop {
            match d.decode(&mut out, budget) {
                Ok(more) => {
                    assert!(out.len() <= budget.saturating_add(MAX_BLOCK_SIZE));
                    all.extend_from_slice(&out);
                    out.clear();
                    if !more {
                        break;
                    }
                }
                Err(_) => {
                    all.extend_from_slice(&out);
                    return (all, true);
                }
            }
        }
        assert!(d.buffered() <= HEADER + MAX_COMPRESSED_CHUNK + chunk);
    }
    (all, false)
}

/// What the fuzz target (fuzz/fuzz_targets/s2_decoder.rs) checks, on mutated streams: where
/// the input is cut and the output budget change neither the bytes nor the verdict.
#[test]
fn chunking_and_budget_do_not_change_the_result() {
    let input = route_traffic(300, 40);
    let mut stream = BytesMut::new();
    let mut enc = Encoder::new(Level::Fast);
    for (i, part) in input.chunks(2000).enumerate() {
        enc.set_level(LEVELS[i % 4]);
        enc.encode(part, &mut stream);
    }
    let mut seed = 0x1234_5678_9abc_def0u64;
    for round in 0..300u64 {
        let r = noise(8, seed ^ round);
        let mut data = stream.to_vec();
        if round > 0 {
            // Flip, drop or insert a byte somewhere.
            let at = (usize::from(r[0]) << 8 | usize::from(r[1])) % data.len();
            match r[2] % 3 {
                0 => data[at] ^= r[3] | 1,
                1 => {
                    data.remove(at);
                }
                _ => data.insert(at, r[3]),
            }
        }
        let chunk = 1 + (usize::from(r[4]) << 8 | usize::from(r[5])) % 4096;
        let budget = 1 + usize::from(r[6]) * 512;
        let whole = decode_cut(&data, data.len(), usize::MAX);
        let cut = decode_cut(&data, chunk, budget);
        assert_eq!(
            whole.1, cut.1,
            "round {round}: verdicts differ (chunk {chunk})"
        );
        assert!(
            whole.0 == cut.0,
            "round {round}: bytes differ (chunk {chunk})"
        );
        if round == 0 {
            assert!(!whole.1 && whole.0 == input);
        }
        seed = seed.rotate_left(9) ^ round;
    }
}

#[test]
fn snappy_framed_streams_read_back() {
    let text: Vec<u8> = (0..200_000u32)
        .flat_map(|i| format!("{{\"n\":{}}}", i % 97).into_bytes())
        .collect();
    let noise: Vec<u8> = (0..70_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for input in [&b"x"[..], &text[..], &noise[..]] {
        let s = snappy_framed(input);
        assert_eq!(&s[..10], b"\xff\x06\x00\x00sNaPpY");
        let mut d = Decoder::new();
        d.feed(&s);
        let mut out = BytesMut::new();
        while d.decode(&mut out, usize::MAX).expect("decodes") {}
        assert_eq!(&out[..], input);
        let mut theirs = Vec::new();
        std::io::Read::read_to_end(&mut minlz::Reader::new(&s[..]), &mut theirs).expect("minlz");
        assert_eq!(theirs, input);
    }
}
