//! Route compression throughput: encodes and decodes route-like traffic (RMSG batches as a
//! route's writer flushes them) with natsd's S2 stream codec at each level and prints
//! figures; asserts nothing about timing. Run:
//! `cargo run --release --example compress_bench [-- --secs 1 --batch 65536]`.

use bytes::BytesMut;
use natsd::compress::{Decoder, Encoder, Level};
use std::time::{Duration, Instant};

fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// What the payloads hold. `Alnum`: letters and digits from a xorshift generator (ids, base64:
/// no repeats for LZ to find, the worst case short of random bytes). `Json`: small JSON
/// records with repeating field names and varying numbers, like typical telemetry.
#[derive(Clone, Copy, Debug)]
enum Payload {
    Alnum,
    Json,
}

fn payload(kind: Payload, len: usize, seed: &mut u64, v: &mut Vec<u8>) {
    const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let start = v.len();
    match kind {
        Payload::Alnum => {
            for _ in 0..len {
                v.push(ALNUM[(next(seed) % ALNUM.len() as u64) as usize]);
            }
        }
        Payload::Json => {
            while v.len() - start < len {
                let r = next(seed);
                let rec = format!(
                    "{{\"sensor\":\"s-{}\",\"ts\":{},\"temp\":{}.{},\"ok\":true}}",
                    r % 500,
                    1_764_600_000 + (r >> 20) % 100_000,
                    r % 40,
                    r % 10
                );
                v.extend_from_slice(rec.as_bytes());
            }
            v.truncate(start + len);
        }
    }
}

/// One write batch of RMSGs (the lines around the payloads repeat as on a route).
fn batch(kind: Payload, size: usize, batch_bytes: usize, seed: &mut u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(batch_bytes + size + 64);
    let mut i = 0u64;
    while v.len() < batch_bytes {
        v.extend_from_slice(format!("RMSG $G bench.route.{} {size}\r\n", i % 4).as_bytes());
        payload(kind, size, seed, &mut v);
        v.extend_from_slice(b"\r\n");
        i += 1;
    }
    v
}

struct Figures {
    ratio: f64,
    encode_mbs: f64,
    decode_mbs: f64,
}

fn measure(level: Level, batches: &[Vec<u8>], secs: f64) -> Figures {
    let mut enc = Encoder::new(level);
    let mut out = BytesMut::with_capacity(1 << 20);
    let (mut raw, mut wire, mut n) = (0usize, 0usize, 0usize);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let b = &batches[n % batches.len()];
        out.clear();
        enc.encode(b, &mut out);
        raw += b.len();
        wire += out.len();
        n += 1;
    }
    let encode_mbs = raw as f64 / start.elapsed().as_secs_f64() / 1e6;
    let streams: Vec<BytesMut> = batches
        .iter()
        .map(|b| {
            let mut s = BytesMut::new();
            enc.encode(b, &mut s);
            s
        })
        .collect();
    let mut dec = Decoder::new();
    let mut plain = BytesMut::with_capacity(1 << 20);
    let (mut raw_dec, mut n) = (0usize, 0usize);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let s = &streams[n % streams.len()];
        // As a read loop would: feed what the socket returned, decode with a budget.
        for piece in s.chunks(32 * 1024) {
            dec.feed(piece);
            while dec.decode(&mut plain, 64 * 1024).expect("valid stream") {
                raw_dec += plain.len();
                plain.clear();
            }
        }
        raw_dec += plain.len();
        plain.clear();
        n += 1;
    }
    let decode_mbs = raw_dec as f64 / start.elapsed().as_secs_f64() / 1e6;
    Figures {
        ratio: wire as f64 / raw as f64,
        encode_mbs,
        decode_mbs,
    }
}

fn main() {
    let mut secs = 1.0;
    let mut batch_bytes = 64 * 1024;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--secs" => secs = v.parse().unwrap_or(secs),
            "--batch" => batch_bytes = v.parse().unwrap_or(batch_bytes),
            _ => {
                eprintln!("usage: compress_bench [--secs S] [--batch BYTES]");
                std::process::exit(2);
            }
        }
    }
    println!(
        "batch {batch_bytes} B, {secs} s per figure, one thread; MB/s of uncompressed route bytes"
    );
    println!(
        "{:<6} {:<6} {:<13} {:>7} {:>9} {:>9} {:>11} {:>11}",
        "msg", "data", "level", "ratio", "enc MB/s", "dec MB/s", "enc msg/s", "dec msg/s"
    );
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for (payload, kind) in [
        (16usize, Payload::Alnum),
        (16, Payload::Json),
        (1024, Payload::Alnum),
        (1024, Payload::Json),
    ] {
        let batches: Vec<Vec<u8>> = (0..16)
            .map(|_| batch(kind, payload, batch_bytes, &mut seed))
            .collect();
        // Bytes one message takes on the wire, uncompressed.
        let per_msg = format!("RMSG $G bench.route.0 {payload}\r\n").len() + payload + 2;
        for level in [Level::Uncompressed, Level::Fast, Level::Better, Level::Best] {
            let f = measure(level, &batches, secs);
            println!(
                "{:<6} {:<6} {:<13} {:>7.3} {:>9.0} {:>9.0} {:>11.0} {:>11.0}",
                if payload == 16 { "16 B" } else { "1 KiB" },
                format!("{kind:?}"),
                format!("{level:?}"),
                f.ratio,
                f.encode_mbs,
                f.decode_mbs,
                f.encode_mbs * 1e6 / per_msg as f64,
                f.decode_mbs * 1e6 / per_msg as f64,
            );
        }
    }
}
