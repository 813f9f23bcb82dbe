//! The `mirrorlog-broker` command line, one `clap` parser for all of it: the flags that run a
//! broker (`settings/command_line.rs`) and the `mirrors` subcommand, which drives a running
//! broker's mirrors over its admin surface (`mirrors.rs`, through `admin_client.rs`). Help,
//! errors and `--version` read alike for both.

pub mod admin_client;
pub mod mirrors;

use crate::config::ConfigError;
use crate::settings::BrokerConfig;

/// What the command line asked for.
pub enum Invocation {
    /// Run a broker.
    Run(Box<BrokerConfig>),
    /// Drive a running broker's mirrors: the `mirrors` subcommand's arguments.
    Mirrors(clap::ArgMatches),
    /// Print this help and exit 0.
    Help(String),
    /// Print the version and exit 0.
    Version,
}

/// The whole command: the broker's flags and its subcommands.
#[must_use]
pub fn command() -> clap::Command {
    crate::settings::command_line::command().subcommand(mirrors::command())
}

/// Parses the command line (without the program name).
///
/// # Errors
/// A command line clap refuses ([`ConfigError::Usage`]), or a setting's error.
pub fn parse(args: &[String]) -> Result<Invocation, ConfigError> {
    let argv = std::iter::once("mirrorlog-broker".to_string()).chain(args.iter().cloned());
    let m = match command().try_get_matches_from(argv) {
        Ok(m) => m,
        Err(e) => {
            return match e.kind() {
                clap::error::ErrorKind::DisplayHelp => Ok(Invocation::Help(e.render().to_string())),
                clap::error::ErrorKind::DisplayVersion => Ok(Invocation::Version),
                _ => Err(ConfigError::Usage(e.render().to_string())),
            }
        }
    };
    match m.subcommand() {
        Some(("mirrors", sub)) => Ok(Invocation::Mirrors(sub.clone())),
        _ => BrokerConfig::from_matches(&m).map(|c| Invocation::Run(Box::new(c))),
    }
}
