//! Logs in nats-server's line style through `tracing`:
//! `[pid] 2026/11/29 09:05:04.123456 [INF] message`. `-D` adds `[DBG]`, `-V` adds `[TRC]`
//! (each on its own, as nats-server's flags are), `-l` sends lines to a file, which `reopen`
//! (SIGUSR1) opens again by name after a log rotation; `-s`/`-r` send them to syslog instead
//! (`syslog.rs`).

pub mod syslog;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
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

/// Where lines go: stderr or a file that can be reopened.
struct Sink {
    out: Mutex<Box<dyn Write + Send>>,
    file: Mutex<Option<PathBuf>>,
    logtime: AtomicBool,
    pid: u32,
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
        let mut line = format!("[{}] ", self.pid);
        if self.logtime.load(Relaxed) {
            line.push_str(&crate::util::time::log_stamp(std::time::SystemTime::now()));
            line.push(' ');
        }
        line.push_str(tag);
        line.push(' ');
        msg(&mut line);
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
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

fn open_log(p: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| format!("error opening log file {}: {e}", p.display()))
}

/// Install the process-wide logger. Call once, before starting servers. Returns an error
/// text when the log file cannot be opened.
pub fn init(debug: bool, trace: bool, logtime: bool, file: Option<&Path>) -> Result<(), String> {
    DEBUG.store(debug, Relaxed);
    TRACE.store(trace, Relaxed);
    let out: Box<dyn Write + Send> = match file {
        Some(p) => Box::new(open_log(p)?),
        None => Box::new(std::io::stderr()),
    };
    let sink = Arc::new(Sink {
        out: Mutex::new(out),
        file: Mutex::new(file.map(Path::to_path_buf)),
        logtime: AtomicBool::new(logtime),
        pid: std::process::id(),
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
    let f = open_log(&p)?;
    *sink.out.lock().unwrap_or_else(|e| e.into_inner()) = Box::new(f);
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
    let out: Box<dyn Write + Send> = match file {
        Some(p) => Box::new(open_log(p)?),
        None => Box::new(std::io::stderr()),
    };
    *sink.out.lock().unwrap_or_else(|e| e.into_inner()) = out;
    *sink.file.lock().unwrap_or_else(|e| e.into_inner()) = file.map(Path::to_path_buf);
    Ok(())
}
