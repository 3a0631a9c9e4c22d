//! Fuzz natsd's snapshot decoder (`natsd::jetstream::snapshot::Decoder`), what a restore runs
//! on bytes from a client: arbitrary data cut into chunks of arbitrary sizes (the first two
//! bytes pick the chunk size). Asserts that it never panics, that the records and the
//! verdict do not depend on where the chunks were cut, and that it never holds more than one
//! record plus one chunk.
//!
//! Run (from the repository root):
//! `mkdir -p fuzz/corpus/snapshot_decoder && cargo +nightly fuzz run snapshot_decoder
//! fuzz/corpus/snapshot_decoder fuzz/seeds/snapshot_decoder`
#![no_main]

use libfuzzer_sys::fuzz_target;
use natsd::jetstream::snapshot::{Decoder, MAX_RECORD};

/// Decode `data` in chunks of `chunk` bytes: the records' debug texts and the verdict.
fn decode(data: &[u8], chunk: usize) -> (Vec<String>, Result<(), String>) {
    let mut d = Decoder::new();
    let mut items = Vec::new();
    for c in data.chunks(chunk.max(1)) {
        d.feed(c);
        assert!(d.buffered() <= MAX_RECORD + 9 + chunk, "holds {} bytes", d.buffered());
        loop {
            match d.next_item() {
                Ok(Some(i)) => items.push(format!("{i:?}")),
                Ok(None) => break,
                Err(e) => return (items, Err(e)),
            }
        }
    }
    let verdict = d.finish();
    (items, verdict)
}

fuzz_target!(|input: &[u8]| {
    if input.len() < 2 {
        return;
    }
    let chunk = 1 + (u16::from_le_bytes([input[0], input[1]]) as usize % 4096);
    let data = &input[2..];
    let whole = decode(data, data.len().max(1));
    let cut = decode(data, chunk);
    // Errors may be found at another byte when cut differently only if the data is bad:
    // the records before the error and whether it is an error are the same.
    assert_eq!(whole.0, cut.0, "records differ with chunks of {chunk}");
    assert_eq!(whole.1.is_ok(), cut.1.is_ok(), "verdicts differ with chunks of {chunk}");
});
