//! Fuzz the config language (`natsd::config::conf`) and its mapping onto `Options`
//! (`natsd::config::file::load_str`): arbitrary bytes (the valid UTF-8 prefix when they are
//! not UTF-8, as `parse_file` refuses the rest). Asserts that neither panics, that both finish
//! quickly (no super-linear blow-up), that parsing is deterministic, and that an error's line
//! lies inside the input.
//!
//! Inputs that `include` an absolute or parent path are skipped, so the fuzzer never reads
//! devices or large files of the machine (`include /dev/zero`); relative includes of small
//! files beside the fuzz crate still run.
//!
//! Run (from the repository root):
//! `mkdir -p fuzz/corpus/config_parser && cargo +nightly fuzz run config_parser
//! fuzz/corpus/config_parser fuzz/seeds/config_parser -- -dict=fuzz/config_parser.dict`
#![no_main]

use libfuzzer_sys::fuzz_target;
use natsd::config::{conf, file};
use std::time::Duration;

/// Generous: the parser is linear; this only catches pathological (quadratic or worse) cases.
/// Measured in this thread's CPU time, so a loaded machine (a run at `nice 19` beside
/// builds) does not fail it: wall time did, twice, on inputs that take 0.1 s alone.
const LIMIT: Duration = Duration::from_secs(2);

/// This thread's CPU time so far.
fn cpu_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn check_error(text: &str, e: &conf::ConfigError) {
    let _ = e.to_string();
    if e.file.is_none() && e.line > 0 {
        let lines = text.split('\n').count();
        assert!(
            (e.line as usize) <= lines,
            "error line {} beyond the input's {lines} lines: {e}",
            e.line
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let text = match std::str::from_utf8(data) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&data[..e.valid_up_to()]).unwrap_or(""),
    };
    let lower = text.to_ascii_lowercase();
    if lower.contains("include") && (text.contains('/') || text.contains('\\')) {
        return;
    }

    let t = cpu_now();
    let first = conf::parse_str(text);
    let took = cpu_now().saturating_sub(t);
    assert!(took < LIMIT, "parse_str took {took:?} of CPU");
    match &first {
        Ok(_) => {}
        Err(e) => check_error(text, e),
    }
    // Deterministic: the same text parses to the same tree or the same error (compared as
    // Debug text: a NaN float is not equal to itself).
    let again = conf::parse_str(text);
    assert_eq!(
        format!("{first:?}"),
        format!("{again:?}"),
        "two parses differ"
    );

    let t = cpu_now();
    let loaded = file::load_str(text);
    let took = cpu_now().saturating_sub(t);
    assert!(took < LIMIT, "load_str took {took:?} of CPU");
    match loaded {
        Ok(l) => {
            // What loads is a valid configuration.
            assert_eq!(l.options.validate(), Ok(()));
            for w in &l.warnings {
                let _ = w.to_string();
            }
        }
        Err(e) => {
            check_error(text, &e);
            // A file that does not parse does not load, with the same error, marked as a
            // syntax error of the server's config file (`ConfigError::parse_error`).
            if let Err(pe) = &first {
                assert_eq!(
                    e,
                    pe.clone().parse_error(),
                    "load_str and parse_str disagree"
                );
            }
        }
    }
});
