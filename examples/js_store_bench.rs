//! Micro-benchmark of the JetStream file store: appends of 16 B and 1 KiB messages with a
//! flush every N appends, then sequential and random loads, and a reopen (recovery scan).
//!
//! Run with `cargo run --release --example js_store_bench [messages]` (default 200000).
//! Uses a directory under the system temp dir and removes it afterwards. No fsync (the
//! numbers are for the write(2) path; `sync` cost depends on the disk).

use natsd::jetstream::store::file::FileStore;
use natsd::jetstream::store::{MsgStore, StoreLimits, SyncPolicy};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

fn report(what: &str, ops: u64, bytes: u64, took: Duration) {
    let secs = took.as_secs_f64();
    println!(
        "{what:<40} {ops:>8} ops in {secs:>6.3}s = {:>11.0} ops/s {:>8.1} MB/s",
        ops as f64 / secs,
        bytes as f64 / secs / 1e6
    );
}

/// Resident set size in KiB (Linux), if readable.
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn policy() -> SyncPolicy {
    SyncPolicy {
        interval: Duration::ZERO,
        always: false,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = match std::env::args().nth(1) {
        Some(a) => a.parse()?,
        None => 200_000,
    };
    let root = std::env::temp_dir().join(format!("natsd-js-store-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let result = run(&root, n);
    let _ = std::fs::remove_dir_all(&root);
    result
}

fn run(root: &Path, n: u64) -> Result<(), Box<dyn std::error::Error>> {
    for size in [16usize, 1024] {
        for flush_every in [1u64, 16, 256] {
            let dir = root.join(format!("{size}-{flush_every}"));
            let s = FileStore::open(&dir, StoreLimits::default(), policy())?;
            let data = vec![0x61u8; size];
            let subjects: Vec<String> = (0..64).map(|i| format!("bench.{i}")).collect();
            let count = if size == 1024 { n / 4 } else { n };
            let t = Instant::now();
            for i in 0..count {
                s.store(&subjects[(i % 64) as usize], None, &data, i as i64)?;
                if (i + 1) % flush_every == 0 {
                    s.flush()?;
                }
            }
            s.flush()?;
            let took = t.elapsed();
            report(
                &format!("append {size} B, flush every {flush_every}"),
                count,
                count * size as u64,
                took,
            );
            if flush_every == 256 {
                let t = Instant::now();
                for seq in 1..=count {
                    black_box(s.load(seq)?);
                }
                report(
                    &format!("load {size} B sequential"),
                    count,
                    count * size as u64,
                    t.elapsed(),
                );
                let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
                let t = Instant::now();
                for _ in 0..count {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    black_box(s.load(1 + x % count)?);
                }
                report(
                    &format!("load {size} B random"),
                    count,
                    count * size as u64,
                    t.elapsed(),
                );
                let t = Instant::now();
                let mut next = 0;
                let mut k = 0u64;
                while let Ok(m) = s.load_next(Some("bench.7"), next) {
                    next = m.seq + 1;
                    k += 1;
                }
                report(
                    &format!("load_next filter 1/64 ({size} B)"),
                    k,
                    k * size as u64,
                    t.elapsed(),
                );
                let t = Instant::now();
                for i in 0..4096u64 {
                    s.store(&subjects[(i % 64) as usize], None, &data, i as i64)?;
                    if (i + 1) % 256 == 0 {
                        s.sync()?;
                    }
                }
                report(
                    &format!("append {size} B, sync (fsync) every 256"),
                    4096,
                    4096 * size as u64,
                    t.elapsed(),
                );
                drop(s);
                let rss0 = rss_kib();
                let t = Instant::now();
                let s = FileStore::open(&dir, StoreLimits::default(), policy())?;
                report(
                    &format!("reopen (recovery scan) {size} B"),
                    s.state().msgs,
                    count * size as u64,
                    t.elapsed(),
                );
                // Only the first round is meaningful: later ones reuse freed memory.
                if let (Some(a), Some(b), 16) = (rss0, rss_kib(), size) {
                    println!(
                        "  RSS growth on reopen: {} KiB = {:.0} bytes per message",
                        b.saturating_sub(a),
                        b.saturating_sub(a) as f64 * 1024.0 / s.state().msgs as f64
                    );
                }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    Ok(())
}
