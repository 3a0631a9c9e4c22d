//! Fuzz the protocol parser (`natsd::proto::parser`): arbitrary bytes, split at arbitrary
//! points, for client, route and leafnode connections, with default or tiny limits. Asserts that it
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
    // Bit 0: a route (bit 2: it takes `LS- <origin>`); else bit 2: a leafnode connection.
    let lnocu = mode & 4 != 0;
    let kind = match (mode & 1 != 0, lnocu) {
        (true, _) => Kind::Route,
        (false, true) => Kind::Leaf,
        (false, false) => Kind::Client,
    };
    parser_drive::split_and_whole(kind, parser_drive::limits(*mode, *seed), lnocu, *seed, rest);
});
