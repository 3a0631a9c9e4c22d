//! The `natsd` command: flags -> `Options`, logging, run the server until a signal.

use natsd::config::flags::{self, Command};
use natsd::{Options, Server};
use std::process::ExitCode;

fn main() -> ExitCode {
    let opts: Options = match flags::parse(std::env::args().skip(1)) {
        Ok(Command::Run(o)) => *o,
        Ok(Command::Version) => {
            println!("{}", flags::version_line());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Help) => {
            print!("{}", flags::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
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
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("natsd: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(run(opts))
}

async fn run(opts: Options) -> ExitCode {
    // Handlers first: tools send signals as soon as they read "Server is ready", and a signal
    // that arrives before the handler is installed kills the process without a shutdown.
    let signals = Signals::install();
    let server = match Server::start(opts).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("natsd: {e}");
            return ExitCode::from(1);
        }
    };
    let code = signals.wait().await;
    server.shutdown().await;
    code
}

/// SIGINT exits 0, SIGTERM exits 1 after shutdown, as nats-server does.
#[cfg(unix)]
struct Signals(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

#[cfg(unix)]
impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Signals(Some((int, term))),
            _ => Signals(None),
        }
    }

    async fn wait(self) -> ExitCode {
        let Some((mut int, mut term)) = self.0 else {
            let _ = tokio::signal::ctrl_c().await;
            return ExitCode::SUCCESS;
        };
        tokio::select! {
            _ = int.recv() => {
                tracing::debug!("Trapped \"interrupt\" signal");
                ExitCode::SUCCESS
            }
            _ = term.recv() => {
                tracing::debug!("Trapped \"terminated\" signal");
                ExitCode::from(1)
            }
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

    async fn wait(self) -> ExitCode {
        let _ = tokio::signal::ctrl_c().await;
        ExitCode::SUCCESS
    }
}
