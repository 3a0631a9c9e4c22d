//! Fuzz the route side of the protocol parser (`natsd::proto::parser` with `Kind::Route`,
//! what route and gateway connections run on bytes from a peer): `RS+`/`RS-`, `LS+`/`LS-`,
//! `RMSG`/`HMSG`/`LMSG` in both the account and the account-less (pinned/pool, `lnocu`)
//! forms, `A+`/`A-`, `INFO`/`CONNECT`. Arbitrary bytes split at arbitrary points, with default
//! or tiny limits: never a panic, always progress, the same ops and error however the
//! stream was split. Each `INFO`'s and `CONNECT`'s JSON is also decoded as a route peer's
//! `ServerInfo` and `RouteConnectInfo` (what `cluster/route.rs` does with them): errors are
//! fine, panics are not.
//!
//! Run (from the repository root):
//! `mkdir -p fuzz/corpus/route_parser && cargo +nightly fuzz run route_parser
//! fuzz/corpus/route_parser fuzz/seeds/route_parser -- -dict=fuzz/route_parser.dict`
#![no_main]

use libfuzzer_sys::fuzz_target;
use natsd::proto::info::{RouteConnectInfo, ServerInfo};
use natsd::proto::{Kind, Op, Parser};

#[path = "parser_drive.rs"]
mod parser_drive;

fuzz_target!(|data: &[u8]| {
    let [mode, seed, rest @ ..] = data else {
        return;
    };
    let limits = parser_drive::limits(*mode, *seed);
    let lnocu = mode & 4 != 0;
    parser_drive::split_and_whole(Kind::Route, limits, lnocu, *seed, rest);
    // The handshake's JSON, as the route task decodes it.
    let mut p = Parser::new(Kind::Route, limits);
    p.set_lnocu(lnocu);
    let mut off = 0;
    while let Ok(Some((op, n))) = p.parse(&rest[off..]) {
        match op {
            Op::Info(json) => {
                let _ = serde_json::from_slice::<ServerInfo>(json);
            }
            Op::Connect(json) => {
                let _ = serde_json::from_slice::<RouteConnectInfo>(json);
            }
            _ => {}
        }
        off += n;
    }
});
