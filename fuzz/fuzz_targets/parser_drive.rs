//! Shared by the `client_parser` and `route_parser` targets (not a target itself): feed a
//! byte stream to `natsd::proto::Parser` in chunks and in one piece, and check both agree.

use natsd::proto::{Kind, Limits, ParseError, Parser};

/// Feed `chunks` one after another; return rendered ops and the error, if any.
pub fn drive<'c>(
    kind: Kind,
    limits: Limits,
    lnocu: bool,
    chunks: impl Iterator<Item = &'c [u8]>,
) -> (Vec<String>, Option<ParseError>) {
    let mut p = Parser::new(kind, limits);
    p.set_lnocu(lnocu);
    let mut buf: Vec<u8> = Vec::new();
    let mut ops = Vec::new();
    let mut chunks_fed = 0usize;
    let mut calls = 0usize;
    for c in chunks {
        buf.extend_from_slice(c);
        chunks_fed += 1;
        loop {
            calls += 1;
            // Each call either consumes bytes or waits for the next chunk: no spinning.
            assert!(calls <= ops.len() + chunks_fed, "parser made no progress");
            match p.parse(&buf) {
                Ok(Some((op, n))) => {
                    assert!(n > 0 && n <= buf.len(), "consumed {n} of {}", buf.len());
                    ops.push(format!("{op:?}"));
                    buf.drain(..n);
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = e.err_text();
                    return (ops, Some(e));
                }
            }
        }
    }
    (ops, None)
}

/// Parse `rest` cut into chunks from a small xorshift seeded by `seed` (1..=16 bytes, or
/// 1..=256 when the seed's top bit is set) and in one piece; both must agree. Returns the
/// ops of the one-piece parse.
pub fn split_and_whole(
    kind: Kind,
    limits: Limits,
    lnocu: bool,
    seed: u8,
    rest: &[u8],
) -> Vec<String> {
    let mut x = u32::from(seed) | 0x100;
    let big = seed & 0x80 != 0;
    let mut sizes = std::iter::from_fn(move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        Some(1 + (x as usize) % if big { 256 } else { 16 })
    });
    let mut off = 0;
    let chunks = std::iter::from_fn(|| {
        if off >= rest.len() {
            return None;
        }
        let n = sizes.next().unwrap_or(1).min(rest.len() - off);
        let c = &rest[off..off + n];
        off += n;
        Some(c)
    });
    let split = drive(kind, limits, lnocu, chunks);
    let whole = drive(kind, limits, lnocu, std::iter::once(rest));
    assert_eq!(split, whole, "split parse differs from one-shot parse");
    whole.0
}

/// Default limits, or tiny ones picked by `mode` and `seed` (control line 1..=32 bytes,
/// payload 0..=31) when `mode`'s bit 1 is set.
pub fn limits(mode: u8, seed: u8) -> Limits {
    if mode & 2 == 0 {
        Limits::default()
    } else {
        Limits {
            max_control_line: usize::from(mode >> 3) + 1,
            max_payload: usize::from(seed & 31),
        }
    }
}
