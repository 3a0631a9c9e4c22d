//! Logs in nats-server's line style through `tracing`:
//! `[pid] 2026/11/29 09:05:04.123456 [INF] message`. `-D` adds `[DBG]`, `-V` adds `[TRC]`
//! (each on its own, as nats-server's flags are), `-l` sends lines to a file, which `reopen`
//! (SIGUSR1) opens again by name after a log rotation, and which rotates itself past
//! `logfile_size_limit` (`rotate.rs`); `-s`/`-r` send them to syslog instead (`syslog.rs`).

mod rotate;
pub mod syslog;

use rotate::LogFile;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
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

/// Where lines go.
enum Out {
    Stderr,
    File(LogFile),
}

impl Out {
    fn to(file: Option<&Path>) -> Result<Out, String> {
        Ok(match file {
            Some(p) => Out::File(LogFile::open(p)?),
            None => Out::Stderr,
        })
    }
}

/// Where lines go: stderr or a file that can be reopened.
struct Sink {
    out: Mutex<Out>,
    file: Mutex<Option<PathBuf>>,
    logtime: AtomicBool,
    pid: u32,
    /// `logfile_size_limit` (rotation when > 0) and `logfile_max_num` (pruning when > 0).
    size_limit: AtomicI64,
    max_num: AtomicI64,
    /// When set (`-s`, `-r`), lines go to syslog instead of `out`.
    syslog: Mutex<Option<syslog::Syslog>>,
}

impl Sink {
    fn line(&self, tag: &str, msg: impl FnOnce(&mut String)) {
        {
            let mut sl = self.syslog.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(sl) = sl.as_mut() {
                let mut text = String::new();
                msg(&mut text);
                sl.send(tag, &text);
                return;
            }
        }
        let mut line = self.prefix();
        line.push_str(tag);
        line.push(' ');
        msg(&mut line);
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *out {
            Out::Stderr => {
                let mut e = std::io::stderr();
                let _ = e.write_all(line.as_bytes());
                let _ = e.flush();
            }
            Out::File(f) => {
                f.write_line(line.as_bytes());
                let (limit, max) = (self.size_limit.load(Relaxed), self.max_num.load(Relaxed));
                f.rotate_if_past(limit, max, &|| self.prefix());
            }
        }
    }

    /// `[pid] ` and, with `logtime`, the time stamp and a space.
    fn prefix(&self) -> String {
        let mut p = format!("[{}] ", self.pid);
        if self.logtime.load(Relaxed) {
            p.push_str(&crate::util::time::log_stamp(std::time::SystemTime::now()));
            p.push(' ');
        }
        p
    }
}

static SINK: OnceLock<Arc<Sink>> = OnceLock::new();

struct NatsLines(Arc<Sink>);

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
        self.0.line(level_tag(event.metadata().level()), |line| {
            event.record(&mut MessageVisitor(line))
        });
    }
}

/// Install the process-wide logger. Call once, before starting servers. Returns an error
/// text when the log file cannot be opened.
pub fn init(debug: bool, trace: bool, logtime: bool, file: Option<&Path>) -> Result<(), String> {
    DEBUG.store(debug, Relaxed);
    TRACE.store(trace, Relaxed);
    let out = Out::to(file)?;
    let sink = Arc::new(Sink {
        out: Mutex::new(out),
        file: Mutex::new(file.map(Path::to_path_buf)),
        logtime: AtomicBool::new(logtime),
        pid: std::process::id(),
        size_limit: AtomicI64::new(0),
        max_num: AtomicI64::new(0),
        syslog: Mutex::new(None),
    });
    let sub = tracing_subscriber::registry().with(NatsLines(sink.clone()));
    tracing::subscriber::set_global_default(sub).map_err(|e| e.to_string())?;
    let _ = SINK.set(sink);
    Ok(())
}

/// Send log lines to the local syslog daemon (`local`, `-s`) or a remote one (`remote`,
/// `-r URL`; it wins when both are given, as in nats-server). Call after `init`.
pub fn use_syslog(local: bool, remote: Option<&str>) -> Result<(), String> {
    let tag = syslog::program_tag();
    let sl = match remote {
        Some(url) => syslog::Syslog::remote(url, &tag)?,
        None if local => syslog::Syslog::local(&tag)?,
        None => return Ok(()),
    };
    if let Some(sink) = SINK.get() {
        *sink.syslog.lock().unwrap_or_else(|e| e.into_inner()) = Some(sl);
    }
    Ok(())
}

/// Rotate the log file past `size_limit` bytes (`logfile_size_limit`, `--log_size_limit`;
/// 0 or less: never) and keep at most `max_num` files (`logfile_max_num`; 0 or less: all).
/// Call after `init`. A file already past the limit is rotated at the next line, announced
/// by `Rotating logfile...` as nats-server does.
pub fn set_rotation(size_limit: i64, max_num: i64) {
    let Some(sink) = SINK.get() else {
        return;
    };
    sink.size_limit.store(size_limit, Relaxed);
    sink.max_num.store(max_num, Relaxed);
    let past = match &*sink.out.lock().unwrap_or_else(|e| e.into_inner()) {
        Out::File(f) => size_limit > 0 && f.size() > size_limit as u64,
        Out::Stderr => false,
    };
    if past {
        tracing::info!("Rotating logfile...");
    }
}

/// What `reopen` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Reopened {
    /// The log file was opened again by name (a moved file is left to its new name).
    File,
    /// Logging goes to stderr: nothing to reopen.
    NotAFile,
    /// `init` has not run.
    NoLogger,
}

/// SIGUSR1: open the log file again by its name (log rotation), as nats-server does.
pub fn reopen() -> Result<Reopened, String> {
    let Some(sink) = SINK.get() else {
        return Ok(Reopened::NoLogger);
    };
    let Some(p) = sink.file.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
        return Ok(Reopened::NotAFile);
    };
    let f = LogFile::open(&p)?;
    *sink.out.lock().unwrap_or_else(|e| e.into_inner()) = Out::File(f);
    Ok(Reopened::File)
}

/// A `[FTL]` line (nats-server's fatal level, which `tracing` lacks), to the log when it is
/// set up, else to stderr. The caller exits.
pub fn fatal(msg: &str) {
    match SINK.get() {
        Some(sink) => sink.line("[FTL]", |l| l.push_str(msg)),
        None => eprintln!("[{}] [FTL] {msg}", std::process::id()),
    }
}

/// Turn debug/trace on or off at run time (tests, reload).
pub fn set_levels(debug: bool, trace: bool) {
    DEBUG.store(debug, Relaxed);
    TRACE.store(trace, Relaxed);
    tracing::callsite::rebuild_interest_cache();
}

/// Turn the timestamp of log lines on or off (config reload).
pub fn set_logtime(on: bool) {
    if let Some(sink) = SINK.get() {
        sink.logtime.store(on, Relaxed);
    }
}

/// Send log lines to another file, or to stderr with `None` (config reload). The new file is
/// opened before anything changes: on error the old destination stays. Without a logger
/// (`init` not called, e.g. an embedded server) this does nothing.
pub fn set_file(file: Option<&Path>) -> Result<(), String> {
    let Some(sink) = SINK.get() else {
        return Ok(());
    };
    let out = Out::to(file)?;
    *sink.out.lock().unwrap_or_else(|e| e.into_inner()) = out;
    *sink.file.lock().unwrap_or_else(|e| e.into_inner()) = file.map(Path::to_path_buf);
    Ok(())
}
