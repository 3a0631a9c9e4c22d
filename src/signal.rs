//! `natsd --signal CMD[=PID|PIDFILE]`: signal a running natsd (or nats-server), as
//! `nats-server --signal` does. stop→SIGKILL, quit→SIGINT, reopen→SIGUSR1, reload→SIGHUP,
//! ldm→SIGUSR2, term→SIGTERM. Without a pid, the single running process named `natsd` or
//! `nats-server` (found through /proc) is signalled. The signal is sent with the `kill`
//! command (procps), so natsd needs no libc binding.

use std::path::Path;
use std::process::Command;

/// Process names `--signal` looks for when no pid is given.
pub const PROCESS_NAMES: &[&str] = &["natsd", "nats-server"];

/// The `kill` signal name for a `--signal` command.
pub fn signal_name(command: &str) -> Option<&'static str> {
    Some(match command {
        "stop" => "KILL",
        "quit" => "INT",
        "reopen" => "USR1",
        "reload" => "HUP",
        "ldm" => "USR2",
        "term" => "TERM",
        _ => return None,
    })
}

/// A pid, or the pid in a pid file (nats-server's rule: a path that can be read is a pid
/// file).
pub fn resolve_pid(expr: &str) -> Result<u32, String> {
    let text = match std::fs::read_to_string(expr) {
        Ok(t) => t.trim().to_string(),
        Err(_) => expr.trim().to_string(),
    };
    match text.parse::<u32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("invalid pid: {text}")),
    }
}

/// Running processes named natsd or nats-server, other than this one: (pid, name).
pub fn find_servers() -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) else {
            continue;
        };
        let comm = comm.trim();
        if PROCESS_NAMES.contains(&comm) {
            found.push((pid, comm.to_string()));
        }
    }
    found.sort();
    found
}

/// Send `command` to `pid` (a pid or a pid file), or to the single running server.
pub fn send(command: &str, pid: Option<&str>) -> Result<(), String> {
    let pid = match pid {
        Some(expr) => resolve_pid(expr)?,
        None => match find_servers().as_slice() {
            [] => return Err("no natsd or nats-server processes running".into()),
            [(p, _)] => *p,
            many => {
                let mut msg = String::from("multiple natsd/nats-server processes running:");
                for (p, name) in many {
                    msg.push_str(&format!("\n{p} ({name})"));
                }
                return Err(msg);
            }
        },
    };
    let Some(sig) = signal_name(command) else {
        return Err(format!("unknown signal {command:?}"));
    };
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return Err("no such process".into());
    }
    let out = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .output()
        .map_err(|e| {
            format!("cannot run the kill command (procps) to send SIG{sig} to {pid}: {e}")
        })?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if err.contains("No such process") {
        return Err("no such process".into());
    }
    if err.contains("not permitted") {
        return Err("operation not permitted".into());
    }
    Err(format!("kill -{sig} {pid} failed: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pids() {
        assert_eq!(signal_name("ldm"), Some("USR2"));
        assert_eq!(signal_name("stop"), Some("KILL"));
        assert_eq!(signal_name("bogus"), None);
        assert_eq!(resolve_pid("123"), Ok(123));
        assert_eq!(
            resolve_pid("/nonexistent/x.pid"),
            Err("invalid pid: /nonexistent/x.pid".into())
        );
        let p = std::env::temp_dir().join(format!("natsd-sig-{}.pid", std::process::id()));
        std::fs::write(&p, "4567\n").expect("write");
        assert_eq!(resolve_pid(&p.to_string_lossy()), Ok(4567));
        std::fs::write(&p, "abc").expect("write");
        assert_eq!(
            resolve_pid(&p.to_string_lossy()),
            Err("invalid pid: abc".into())
        );
        let _ = std::fs::remove_file(&p);
        assert!(send("bogus", Some("1"))
            .unwrap_err()
            .contains("unknown signal"));
    }
}
