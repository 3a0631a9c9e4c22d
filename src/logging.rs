//! Logs in nats-server's line style through `tracing`:
//! `[pid] 2026/11/29 09:05:04.123456 [INF] message`. `-D` adds `[DBG]`, `-V` adds `[TRC]`
//! (each on its own, as nats-server's flags are), `-l` sends lines to a file.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

static TRACE: AtomicBool = AtomicBool::new(false);
static DEBUG: AtomicBool = AtomicBool::new(false);

/// True when `-V` is on: protocol tracing is built only then (it costs a format per op).
#[inline]
pub fn trace_enabled() -> bool {
    TRACE.load(Relaxed)
}

fn level_tag(l: &Level) -> &'static str {
    match *l {
        Level::ERROR => "[ERR]",
        Level::WARN => "[WRN]",
        Level::INFO => "[INF]",
        Level::DEBUG => "[DBG]",
        Level::TRACE => "[TRC]",
    }
}

fn wanted(m: &Metadata<'_>) -> bool {
    // Only natsd's own events; dependencies stay quiet.
    if !m.target().starts_with("natsd") {
        return *m.level() <= Level::WARN && m.target() != "hyper";
    }
    match *m.level() {
        Level::TRACE => TRACE.load(Relaxed),
        Level::DEBUG => DEBUG.load(Relaxed),
        _ => true,
    }
}

struct NatsLines {
    out: Mutex<Box<dyn Write + Send>>,
    logtime: bool,
    pid: u32,
}

struct MessageVisitor<'a>(&'a mut String);

impl tracing::field::Visit for MessageVisitor<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

impl<S: Subscriber> Layer<S> for NatsLines {
    fn enabled(&self, m: &Metadata<'_>, _: Context<'_, S>) -> bool {
        wanted(m)
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut line = format!("[{}] ", self.pid);
        if self.logtime {
            line.push_str(&crate::util::time::log_stamp(std::time::SystemTime::now()));
            line.push(' ');
        }
        line.push_str(level_tag(event.metadata().level()));
        line.push(' ');
        event.record(&mut MessageVisitor(&mut line));
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
}

/// Install the process-wide logger. Call once, before starting servers. Returns an error
/// text when the log file cannot be opened.
pub fn init(debug: bool, trace: bool, logtime: bool, file: Option<&Path>) -> Result<(), String> {
    DEBUG.store(debug, Relaxed);
    TRACE.store(trace, Relaxed);
    let out: Box<dyn Write + Send> = match file {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("error opening log file {}: {e}", p.display()))?,
        ),
        None => Box::new(std::io::stderr()),
    };
    let layer = NatsLines {
        out: Mutex::new(out),
        logtime,
        pid: std::process::id(),
    };
    let sub = tracing_subscriber::registry().with(layer);
    tracing::subscriber::set_global_default(sub).map_err(|e| e.to_string())
}

/// Turn debug/trace on or off at run time (tests, reload).
pub fn set_levels(debug: bool, trace: bool) {
    DEBUG.store(debug, Relaxed);
    TRACE.store(trace, Relaxed);
    tracing::callsite::rebuild_interest_cache();
}
