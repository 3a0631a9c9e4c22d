//! The `natsd` command: flags -> `Options`, logging, run the server until a signal.

use natsd::config::flags::{self, CliError, Command};
use natsd::{Options, Server};
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc. glibc grows a thread's (non-main) arena one page at a
/// time, one `mprotect` per page. A memory stream storing 1 KiB messages hits that every few
/// messages: it was ~20 % of natsd's CPU in that benchmark (docs/benchmarks.md). mimalloc has
/// per-thread heaps and no such growth step. Transparent huge pages stay off (`no_thp`): on these
/// VMs, zeroing fresh 2 MiB pages cost more than the faults they save.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Kept for config reload: the file is read again and these flags applied over it.
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `natsd topology up|check FILE`: a local cluster launcher (src/topology/).
    if args.first().map(String::as_str) == Some("topology") {
        return natsd::topology::main(&args[1..]);
    }
    let opts: Options = match flags::parse_command(args.iter().cloned()) {
        Ok(Command::Run(o)) => *o,
        Ok(Command::Version) => {
            println!("{}", flags::version_line());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Help) => {
            print!("{}", flags::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(Command::HelpTls) => {
            print!("{}", flags::TLS_HELP);
            return ExitCode::SUCCESS;
        }
        Ok(Command::Check(path)) => {
            // nats-server prints the verdict on stderr either way.
            return match flags::check(path.as_deref()) {
                Ok(verdict) => {
                    eprintln!("natsd: {verdict}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("natsd: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Ok(Command::Signal { command, pid }) => {
            return match natsd::signal::send(&command, pid.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("natsd: {e}");
                    ExitCode::from(1)
                }
            };
        }
        Err(CliError::Config(e)) => {
            // As nats-server: the file's error (file:line:col) on stderr, no usage, exit 1.
            eprintln!("natsd: {e}");
            return ExitCode::from(1);
        }
        Err(CliError::Flag(e)) => {
            eprintln!("natsd: {e}");
            eprintln!("{}", flags::USAGE);
            return ExitCode::from(1);
        }
    };
    if let Err(e) = natsd::logging::init(
        opts.debug,
        opts.trace,
        opts.logtime,
        opts.log_file.as_deref(),
    ) {
        eprintln!("natsd: {e}");
        return ExitCode::from(1);
    }
    natsd::logging::set_rotation(opts.log_size_limit, opts.log_max_num);
    if let Err(e) = natsd::logging::use_syslog(opts.syslog, opts.remote_syslog.as_deref()) {
        natsd::logging::fatal(&e);
        return ExitCode::from(1);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            natsd::logging::fatal(&format!("cannot start runtime: {e}"));
            return ExitCode::from(1);
        }
    };
    let to_file = opts.log_file.is_some();
    rt.block_on(run(opts, to_file, args))
}

async fn run(opts: Options, to_file: bool, args: Vec<String>) -> ExitCode {
    // Handlers first: tools send signals as soon as they read "Server is ready", and a signal
    // that arrives before the handler is installed kills the process without a shutdown.
    let mut signals = Signals::install();
    let server = match Server::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            // nats-server: `[FTL] Error listening on port: …` and exit 1.
            natsd::logging::fatal(&e.to_string());
            if to_file {
                eprintln!("natsd: {e}");
            }
            return ExitCode::from(1);
        }
    };
    let code = loop {
        tokio::select! {
            sig = signals.next() => match sig {
                Sig::Interrupt => {
                    tracing::debug!("Trapped \"interrupt\" signal");
                    break ExitCode::SUCCESS;
                }
                Sig::Terminate => {
                    tracing::debug!("Trapped \"terminated\" signal");
                    // A lame duck drain in progress is not cut short (nats-server).
                    if !server.is_lame_duck() {
                        break ExitCode::from(1);
                    }
                }
                Sig::ReopenLog => {
                    tracing::debug!("Trapped \"user defined signal 1\" signal");
                    use natsd::logging::Reopened;
                    match natsd::logging::reopen() {
                        Ok(Reopened::File) => tracing::info!("File log re-opened"),
                        Ok(Reopened::NotAFile) => {
                            tracing::info!("File log re-open ignored, not a file logger")
                        }
                        Ok(Reopened::NoLogger) => {
                            tracing::info!("File log re-open ignored, no logger")
                        }
                        Err(e) => tracing::error!("File log re-open failed: {e}"),
                    }
                }
                Sig::LameDuck => {
                    tracing::debug!("Trapped \"user defined signal 2\" signal");
                    server.lame_duck();
                }
                Sig::Reload => {
                    tracing::debug!("Trapped \"hangup\" signal");
                    // The `Reloaded: …` lines are logged by the server; on error nothing
                    // changed.
                    if let Err(e) = flags::reload_options(&args).and_then(|o| server.reload(o)) {
                        tracing::error!("Failed to reload server configuration: {e}");
                    }
                }
            },
            // The end of lame duck mode.
            _ = server.wait_for_shutdown() => break ExitCode::SUCCESS,
        }
    };
    server.shutdown().await;
    code
}

enum Sig {
    Interrupt,
    Terminate,
    ReopenLog,
    LameDuck,
    Reload,
}

/// SIGINT exits 0, SIGTERM exits 1 after shutdown (ignored during lame duck mode), SIGUSR1
/// reopens the log file, SIGUSR2 enters lame duck mode, SIGHUP reloads the config: as nats-server.
#[cfg(unix)]
struct Signals(Option<[tokio::signal::unix::Signal; 5]>);

#[cfg(unix)]
impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{signal, SignalKind};
        let all = (|| -> std::io::Result<[tokio::signal::unix::Signal; 5]> {
            Ok([
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
                signal(SignalKind::user_defined1())?,
                signal(SignalKind::user_defined2())?,
                signal(SignalKind::hangup())?,
            ])
        })();
        match all {
            Ok(a) => Signals(Some(a)),
            Err(e) => {
                eprintln!("natsd: cannot install signal handlers: {e}");
                Signals(None)
            }
        }
    }

    async fn next(&mut self) -> Sig {
        let Some([int, term, usr1, usr2, hup]) = &mut self.0 else {
            let _ = tokio::signal::ctrl_c().await;
            return Sig::Interrupt;
        };
        tokio::select! {
            _ = int.recv() => Sig::Interrupt,
            _ = term.recv() => Sig::Terminate,
            _ = usr1.recv() => Sig::ReopenLog,
            _ = usr2.recv() => Sig::LameDuck,
            _ = hup.recv() => Sig::Reload,
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> Signals {
        Signals
    }

    async fn next(&mut self) -> Sig {
        let _ = tokio::signal::ctrl_c().await;
        Sig::Interrupt
    }
}
