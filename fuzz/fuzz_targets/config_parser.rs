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
use std::time::{Duration, Instant};

/// Generous: the parser is linear; this only catches pathological (quadratic or worse) cases.
const LIMIT: Duration = Duration::from_secs(2);

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

    let t = Instant::now();
    let first = conf::parse_str(text);
    assert!(t.elapsed() < LIMIT, "parse_str took {:?}", t.elapsed());
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

    let t = Instant::now();
    let loaded = file::load_str(text);
    assert!(t.elapsed() < LIMIT, "load_str took {:?}", t.elapsed());
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
