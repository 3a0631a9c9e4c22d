//! Fuzz the protocol parser (`natsd::proto::parser`): arbitrary bytes, split at arbitrary
//! points, for client and route connections, with default or tiny limits. Asserts that it
//! never panics, always makes progress (an op consumes at least one byte; the number of calls
//! is bounded by ops + chunks), and that the ops and the error are the same however the
//! stream was split (compared with parsing it in one piece).
//!
//! Run: `cargo +nightly fuzz run client_parser` from this directory's parent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use natsd::proto::Kind;

#[path = "parser_drive.rs"]
mod parser_drive;

fuzz_target!(|data: &[u8]| {
    let [mode, seed, rest @ ..] = data else {
        return;
    };
    let kind = if mode & 1 == 0 {
        Kind::Client
    } else {
        Kind::Route
    };
    let lnocu = mode & 4 != 0;
    parser_drive::split_and_whole(kind, parser_drive::limits(*mode, *seed), lnocu, *seed, rest);
});
