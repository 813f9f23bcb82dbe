//! The `mirrorlog-broker` command line, one `clap` parser for all of it: the flags that run a
//! broker (`settings/command_line.rs`); the `mirrors` subcommand, which drives a running
//! broker's mirrors over its admin surface (`mirrors.rs`, through `admin_client.rs`); and the
//! `topics` and `groups` subcommands, which speak Kafka to its listener as Kafka's own tools do
//! (`topics.rs`, `groups.rs`, through `kafka.rs`). Help, errors and `--version` read alike for
//! all of them.

pub mod admin_client;
pub mod groups;
pub mod kafka;
pub mod mirrors;
pub mod topics;

use serde_json::Value;

use crate::config::ConfigError;
use crate::settings::BrokerConfig;

/// What the command line asked for.
pub enum Invocation {
    /// Run a broker.
    Run(Box<BrokerConfig>),
    /// Drive a running broker's mirrors: the `mirrors` subcommand's arguments.
    Mirrors(clap::ArgMatches),
    /// Topics over the Kafka listener: the `topics` subcommand's arguments.
    Topics(clap::ArgMatches),
    /// Groups over the Kafka listener: the `groups` subcommand's arguments.
    Groups(clap::ArgMatches),
    /// Print this help and exit 0.
    Help(String),
    /// Print the version and exit 0.
    Version,
}

/// The whole command: the broker's flags and its subcommands.
#[must_use]
pub fn command() -> clap::Command {
    crate::settings::command_line::command()
        .subcommand(mirrors::command())
        .subcommand(topics::command())
        .subcommand(groups::command())
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
        Some(("topics", sub)) => Ok(Invocation::Topics(sub.clone())),
        Some(("groups", sub)) => Ok(Invocation::Groups(sub.clone())),
        _ => BrokerConfig::from_matches(&m).map(|c| Invocation::Run(Box::new(c))),
    }
}

/// Columns padded to their widest cell.
pub(crate) fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  "));
            }
        }
        l.trim_end().to_string()
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out.push('\n');
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// A JSON value as a cell: strings bare, null as `-`.
pub(crate) fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
