//! The `mirrorlog-broker` command (the broker itself is the library beside this file, `lib.rs`).
//!
//! Start-up prints one line to stdout once both listeners accept:
//! `mirrorlog-broker ready kafka=HOST:PORT admin=HOST:PORT listeners=NAME://HOST:PORT,..` (ports
//! resolved, so `:0` works; `kafka` is the first listener).
//! `mirrorlog-broker mirrors ...` drives a running broker's mirrors instead (`cli/mirrors.rs`:
//! exit 0 done, 1 refused, 2 usage, 3 no answer).
//! SIGTERM or SIGINT shuts down cleanly: listeners closed, mirror fetchers drained, the engine
//! closed (its clean-shutdown marker written); exit 0. Bad flags exit 2, a failed start 1, and
//! a shard of the engine that stops (its partitions no longer served) exits 1 after closing
//! the rest.

use mirrorlog_broker::cli::{self, Invocation};
use mirrorlog_broker::Server;
use std::io::Write as _;
use std::process::ExitCode;

/// A request that claims more elements than memory holds reserves address space, not memory
/// (see `ReserveOnlyAlloc`): the protocol crate sizes vectors from untrusted counts.
#[global_allocator]
static ALLOC: mirrorlog::api::ReserveOnlyAlloc = mirrorlog::api::ReserveOnlyAlloc;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match cli::parse(&args) {
        Ok(Invocation::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Version) => {
            println!("mirrorlog-broker {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(Invocation::Mirrors(m)) => return ExitCode::from(cli::mirrors::run(&m)),
        Ok(Invocation::Topics(m)) => return ExitCode::from(cli::topics::run(&m)),
        Ok(Invocation::Groups(m)) => return ExitCode::from(cli::groups::run(&m)),
        Ok(Invocation::Run(c)) => *c,
        Err(e) => {
            eprintln!("mirrorlog-broker: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = mirrorlog_broker::logging::init(config.log_format, &config.log_level) {
        eprintln!("mirrorlog-broker: {e}");
        return ExitCode::from(1);
    }
    let mut server = match Server::start(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mirrorlog-broker: {e}");
            return ExitCode::from(1);
        }
    };
    let listeners: Vec<String> = server
        .listeners
        .iter()
        .map(|(name, addr)| format!("{name}://{addr}"))
        .collect();
    println!(
        "mirrorlog-broker ready kafka={} admin={} listeners={}",
        server.kafka,
        server.admin,
        listeners.join(",")
    );
    let _ = std::io::stdout().flush();
    if let Some(pause) = mirrorlog_broker::test_hooks::ready_delay() {
        std::thread::sleep(pause);
    }
    let stopped = server.wait_for_signal();
    let closed = server.shutdown();
    if let Err(e) = &stopped {
        // A shard died: the rest is closed cleanly, and the exit says the broker failed.
        eprintln!("mirrorlog-broker: {e}");
        if let Err(e) = closed {
            eprintln!("mirrorlog-broker: {e}");
        }
        return ExitCode::from(1);
    }
    match closed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mirrorlog-broker: {e}");
            ExitCode::from(1)
        }
    }
}
