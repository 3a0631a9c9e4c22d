//! Micro-benchmark of the interest trie: match throughput on the cache-hit path, on a
//! miss-heavy path, from several threads, and insert/remove throughput.
//!
//! Run with `cargo run --release --example sublist_bench`. Uses only std and `natsd::sublist`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use natsd::sublist::{SubEntry, Sublist};

/// A stand-in for a subscription handle: cheap to clone, identified by id.
#[derive(Clone)]
struct Sub(Arc<u64>);

impl SubEntry for Sub {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

fn report(what: &str, ops: u64, took: Duration) {
    let secs = took.as_secs_f64();
    println!(
        "{what:<44} {ops:>10} ops in {secs:>7.3}s = {:>12.0} ops/s ({:>7.1} ns/op)",
        ops as f64 / secs,
        secs * 1e9 / ops as f64
    );
}

/// 10k subscriptions of varied shapes: literals, `*`, `>` and queue groups.
fn populate(sl: &Sublist<Sub>) -> Vec<(String, Option<&'static str>, Sub)> {
    let mut subs = Vec::new();
    for i in 0..10_000u64 {
        let (subject, queue) = match i % 10 {
            0..=5 => (format!("orders.{}.{}", i % 100, i / 100), None),
            6 => (format!("orders.*.{}", i / 100), None),
            7 => (format!("orders.{}.>", i % 100), None),
            8 => (format!("orders.{}.{}", i % 100, i / 100), Some("workers")),
            _ => (format!("telemetry.{}.*.temp", i % 500), None),
        };
        let sub = Sub(Arc::new(i));
        if sl
            .insert(subject.as_bytes(), queue.map(str::as_bytes), sub.clone())
            .is_ok()
        {
            subs.push((subject, queue, sub));
        }
    }
    subs
}

fn bench_matches(sl: &Sublist<Sub>, subjects: &[Vec<u8>], n: u64) -> (Duration, usize) {
    bench_matches_from(sl, subjects, 0, n)
}

/// `n` lookups cycling through `subjects`, starting at index `first`.
fn bench_matches_from(
    sl: &Sublist<Sub>,
    subjects: &[Vec<u8>],
    first: u64,
    n: u64,
) -> (Duration, usize) {
    let start = Instant::now();
    let mut fanout = 0;
    for i in first..first + n {
        let r = sl.matches(&subjects[i as usize % subjects.len()]);
        fanout += black_box(r.len());
    }
    (start.elapsed(), fanout)
}

fn main() {
    let sl: Sublist<Sub> = Sublist::new();
    let start = Instant::now();
    let subs = populate(&sl);
    report("insert 10k varied subs", subs.len() as u64, start.elapsed());

    // Cache-hit path: 1,000 hot subjects (fits in the cache).
    let hot: Vec<Vec<u8>> = (0..1_000u64)
        .map(|i| format!("orders.{}.{}", i % 100, i / 10).into_bytes())
        .collect();
    bench_matches(&sl, &hot, 100_000); // warm
    let n = 10_000_000;
    let (took, fanout) = bench_matches(&sl, &hot, n);
    report("matches, cache hits (1k hot subjects)", n, took);
    println!("    avg fan-out {:.2}", fanout as f64 / n as f64);

    // Miss-heavy: 200k distinct subjects cycle through a cache of a few thousand.
    let cold: Vec<Vec<u8>> = (0..200_000u64)
        .map(|i| format!("orders.{}.{}", i % 100, i).into_bytes())
        .collect();
    let n = 10_000_000;
    let (took, _) = bench_matches(&sl, &cold, n);
    report("matches, miss-heavy (200k subjects)", n, took);

    // Cache hits from several threads at once.
    let threads = std::thread::available_parallelism().map_or(4, |p| p.get().min(8));
    let per = 5_000_000u64;
    let start = Instant::now();
    std::thread::scope(|sc| {
        for t in 0..threads as u64 {
            // Each thread starts elsewhere in the list, like publishers on different subjects.
            let (sl, hot) = (&sl, &hot);
            sc.spawn(move || bench_matches_from(sl, hot, t * 397, per));
        }
    });
    report(
        &format!("matches, cache hits, {threads} threads (total)"),
        per * threads as u64,
        start.elapsed(),
    );

    // Insert/remove churn of distinct literal subjects with a warm cache.
    let n = 1_000_000u64;
    let start = Instant::now();
    for i in 0..n {
        let subject = format!("churn.{}.{}", i % 1000, i);
        let sub = Sub(Arc::new(i));
        let _ = sl.insert(subject.as_bytes(), None, sub.clone());
        let _ = sl.remove(subject.as_bytes(), None, &sub);
    }
    report("insert+remove literal (pairs)", n, start.elapsed());

    // Wildcard churn must scan the cache for affected entries.
    let n = 100_000u64;
    let start = Instant::now();
    for i in 0..n {
        let subject = format!("churn.*.{}", i % 1000);
        let sub = Sub(Arc::new(i));
        let _ = sl.insert(subject.as_bytes(), None, sub.clone());
        let _ = sl.remove(subject.as_bytes(), None, &sub);
    }
    report(
        "insert+remove wildcard, full cache (pairs)",
        n,
        start.elapsed(),
    );

    let start = Instant::now();
    for (subject, queue, sub) in &subs {
        let _ = sl.remove(subject.as_bytes(), queue.map(str::as_bytes), sub);
    }
    report("remove 10k varied subs", subs.len() as u64, start.elapsed());

    let st = sl.stats();
    println!(
        "stats: subs={} cache={} inserts={} removes={} matches={} hit_rate={:.3}",
        st.num_subscriptions,
        st.num_cache,
        st.num_inserts,
        st.num_removes,
        st.num_matches,
        st.cache_hit_rate
    );
}
