//! Fuzz natsd's S2 stream decoder (`natsd::compress::Decoder`), what a compressed route runs on
//! bytes from a peer: arbitrary data cut into chunks of arbitrary sizes (the first two bytes
//! pick the chunk size, the third the output budget). Asserts that it never panics, that the
//! decoded bytes and the verdict do not depend on where the chunks were cut or on the budget,
//! and that it never holds more than one chunk (the S2 maximum) plus one read of input, nor
//! emits more than one block past its budget.
//!
//! Run (from the repository root):
//! `mkdir -p fuzz/corpus/s2_decoder && cargo +nightly fuzz run s2_decoder
//! fuzz/corpus/s2_decoder fuzz/seeds/s2_decoder`
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use natsd::compress::stream::{Decoder, MAX_BLOCK_SIZE, MAX_COMPRESSED_CHUNK};

/// Decode `data` fed in chunks of `chunk` bytes with output `budget`: the bytes and whether
/// it failed.
fn decode(data: &[u8], chunk: usize, budget: usize) -> (Vec<u8>, bool) {
    let mut d = Decoder::new();
    let mut all = Vec::new();
    let mut out = BytesMut::new();
    for c in data.chunks(chunk.max(1)) {
        d.feed(c);
        loop {
            match d.decode(&mut out, budget) {
                Ok(more) => {
                    // Saturating: the one-piece decode runs with an unlimited budget.
                    let bound = budget.saturating_add(MAX_BLOCK_SIZE);
                    assert!(out.len() <= bound, "emitted {}", out.len());
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
        assert!(
            d.buffered() <= 4 + MAX_COMPRESSED_CHUNK + chunk,
            "holds {} bytes",
            d.buffered()
        );
    }
    (all, false)
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 3 {
        return;
    }
    let chunk = 1 + (u16::from_le_bytes([input[0], input[1]]) as usize % 4096);
    let budget = 1 + (input[2] as usize) * 512;
    let data = &input[3..];
    let whole = decode(data, data.len().max(1), usize::MAX);
    let cut = decode(data, chunk, budget);
    assert_eq!(whole.1, cut.1, "verdicts differ with chunks of {chunk}");
    if !whole.1 {
        assert_eq!(whole.0, cut.0, "bytes differ with chunks of {chunk}");
    }
});
