//! `natsd topology up|check FILE`: a local cluster (or a super-cluster: several clusters joined
//! by gateways; either with leaves attached over leafnode connections) from a topology file. `up` starts every
//! node on 127.0.0.1 as a child process of this binary, seeded to the first node, waits until
//! each node's `/routez` shows a route to every other node, prints the URLs and runs until
//! Ctrl-C/SIGTERM, then stops every node. `check` compares a running cluster's `/routez` with
//! the file. The format is `file.rs` (natsd's config language); see `topology/README.md`.

pub mod check;
pub mod file;
pub mod launch;
pub mod leaves;

pub use file::{Cluster, Node, Ports, Topology};

use std::process::ExitCode;

pub const USAGE: &str = "\
usage: natsd topology up [--timeout SECS] FILE [-- NODE_FLAGS...]
       natsd topology check FILE [MONITOR_URL...]

  up     start every node of FILE on 127.0.0.1, wait for the full mesh (and gateways, and
         leaves attached),
         print the URLs, stop every node on Ctrl-C or SIGTERM (NODE_FLAGS, e.g. -D, go to
         every node)
  check  compare each node's /routez (and /gatewayz in a super-cluster, /leafz with leaves)
         with FILE (monitoring URLs from the file's `http` ports, or given one per node, then
         one per leaf, in the file's order); exit 1 when the mesh differs

exit status: 0 ok, 1 the cluster failed or differs, 2 a bad command line or file";

pub const UP_USAGE: &str = "usage: natsd topology up [--timeout SECS] FILE [-- NODE_FLAGS...]";
pub const CHECK_USAGE: &str = "usage: natsd topology check FILE [MONITOR_URL...]";

/// `natsd topology ARGS...` (the arguments after `topology`).
pub fn main(args: &[String]) -> ExitCode {
    match args.first().map(String::as_str) {
        Some("up") => launch::main(&args[1..]),
        Some("check") => check::main(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(USAGE, &format!("unknown topology command {other:?}")),
        None => usage_error(USAGE, "missing command: up or check"),
    }
}

/// The error, the usage, exit 2.
pub(crate) fn usage_error(usage: &str, msg: &str) -> ExitCode {
    eprintln!("natsd topology: {msg}");
    eprintln!("{usage}");
    ExitCode::from(2)
}
