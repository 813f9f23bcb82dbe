//! The process's log: its format (`log.format`: `text`, or `json`, one object a line with
//! `tracing`'s fields, for a collector) and its levels, which change at runtime as Kafka's
//! broker loggers do (the BROKER_LOGGER resource of DescribeConfigs and
//! IncrementalAlterConfigs: `kafka-configs.sh --entity-type broker-loggers`).
//!
//! A logger is `root` (every target; `log.level` at start, or `RUST_LOG`'s directives when
//! that is set) or a target's path (`mirrorlog_broker::mirror`, `mirrorlog::shard`), whose
//! level wins over root's for it. Levels are Kafka's names (`TRACE`, `DEBUG`, `INFO`, `WARN`,
//! `ERROR`, `FATAL` read as `ERROR`, `OFF`), any case.
//!
//! The binary installs the subscriber ([`init`]); an embedder that installs its own keeps it,
//! and the loggers are then not this broker's to change ([`LoggingError::NotInstalled`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines (colour on a terminal).
    #[default]
    Text,
    /// One JSON object a line: time, level, target, message and every field.
    Json,
}

impl LogFormat {
    /// `text` or `json`.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }

    /// Its name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// The root logger's name.
pub const ROOT: &str = "root";

/// Why the loggers could not be set up or changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    /// Not one of Kafka's level names.
    #[error("{0:?} is not a log level (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF)")]
    Level(String),
    /// A logger name that is no target path.
    #[error("{0:?} is not a logger: root, or a target such as mirrorlog_broker::mirror")]
    Logger(String),
    /// Kafka refuses to remove the root logger's level.
    #[error("Removing the log level of the root logger is not allowed")]
    RemoveRoot,
    /// The process's subscriber is not this broker's (an embedder's, or none yet).
    #[error(
        "the log subscriber was not installed by mirrorlog-broker: its loggers are the embedder's"
    )]
    NotInstalled,
    /// Installing the subscriber failed (another one is already global).
    #[error("installing the log subscriber: {0}")]
    Install(String),
}

/// A Kafka level name as a `tracing` directive level.
///
/// # Errors
/// Not one of Kafka's names.
pub fn level(value: &str) -> Result<&'static str, LoggingError> {
    match value.trim().to_ascii_uppercase().as_str() {
        "TRACE" | "ALL" => Ok("trace"),
        "DEBUG" => Ok("debug"),
        "INFO" => Ok("info"),
        "WARN" => Ok("warn"),
        "ERROR" | "FATAL" => Ok("error"),
        "OFF" => Ok("off"),
        _ => Err(LoggingError::Level(value.to_string())),
    }
}

/// Whether `name` can be a target's path (letters, digits, `_` and `::`).
fn valid_logger(name: &str) -> bool {
    !name.is_empty()
        && name.split("::").all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// The levels in effect: root's directives, and each logger set since.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Levels {
    /// Root's directives (a level, or `RUST_LOG`'s directives when it was set at start).
    pub root: String,
    /// Each logger's level.
    pub loggers: BTreeMap<String, &'static str>,
}

impl Levels {
    /// The filter's directives: root's, then each logger's.
    #[must_use]
    pub fn directives(&self) -> String {
        let mut d = self.root.clone();
        for (target, level) in &self.loggers {
            d.push_str(&format!(",{target}={level}"));
        }
        d
    }

    /// Applies `changes` (logger → `Some(level)` to set, `None` to remove) to a copy; every
    /// change checked before any is made.
    ///
    /// # Errors
    /// A bad level or logger name, or root removed.
    pub fn changed(
        &self,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Levels, LoggingError> {
        let mut next = self.clone();
        for (logger, value) in changes {
            match (logger.as_str(), value) {
                (ROOT, None) => return Err(LoggingError::RemoveRoot),
                (ROOT, Some(v)) => next.root = level(v)?.to_string(),
                (target, _) if !valid_logger(target) => {
                    return Err(LoggingError::Logger(target.to_string()))
                }
                (target, Some(v)) => {
                    next.loggers.insert(target.to_string(), level(v)?);
                }
                (target, None) => {
                    next.loggers.remove(target);
                }
            }
        }
        Ok(next)
    }
}

struct Installed {
    handle: reload::Handle<EnvFilter, Registry>,
    levels: Mutex<Levels>,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Installs the process's subscriber on stderr: `format`, root at `root_level` (a Kafka level
/// name) unless `RUST_LOG` is set, whose directives then are root's.
///
/// # Errors
/// A bad level, or a subscriber already installed.
pub fn init(format: LogFormat, root_level: &str) -> Result<(), LoggingError> {
    let root = match std::env::var("RUST_LOG") {
        Ok(d) if EnvFilter::try_new(&d).is_ok() => d,
        _ => level(root_level)?.to_string(),
    };
    let levels = Levels {
        root,
        loggers: BTreeMap::new(),
    };
    let filter = EnvFilter::try_new(levels.directives())
        .map_err(|e| LoggingError::Install(e.to_string()))?;
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let installed = match format {
        LogFormat::Text => Registry::default()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(ansi),
            )
            .try_init(),
        LogFormat::Json => Registry::default()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    installed.map_err(|e| LoggingError::Install(e.to_string()))?;
    INSTALLED
        .set(Installed {
            handle,
            levels: Mutex::new(levels),
        })
        .map_err(|_| LoggingError::Install("installed twice".into()))
}

/// The levels in effect, if this broker installed the subscriber.
#[must_use]
pub fn levels() -> Option<Levels> {
    let i = INSTALLED.get()?;
    Some(
        i.levels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone(),
    )
}

/// Changes loggers at runtime (see [`Levels::changed`]); `validate_only` checks alone.
///
/// # Errors
/// As [`Levels::changed`], or [`LoggingError::NotInstalled`].
pub fn change(
    changes: &BTreeMap<String, Option<String>>,
    validate_only: bool,
) -> Result<(), LoggingError> {
    let i = INSTALLED.get().ok_or(LoggingError::NotInstalled)?;
    let mut levels = i
        .levels
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let next = levels.changed(changes)?;
    if validate_only {
        return Ok(());
    }
    let filter =
        EnvFilter::try_new(next.directives()).map_err(|e| LoggingError::Install(e.to_string()))?;
    i.handle
        .reload(filter)
        .map_err(|e| LoggingError::Install(e.to_string()))?;
    tracing::info!(directives = %next.directives(), "log levels changed");
    *levels = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_level_names_map_to_directives() {
        assert_eq!(level("debug"), Ok("debug"));
        assert_eq!(level("FATAL"), Ok("error"));
        assert_eq!(level("Off"), Ok("off"));
        assert!(level("verbose").is_err());
        assert_eq!(LogFormat::parse("JSON"), Some(LogFormat::Json));
        assert_eq!(LogFormat::parse("xml"), None);
    }

    #[test]
    fn loggers_change_checked_as_a_whole_and_root_stays() {
        let start = Levels {
            root: "info".into(),
            loggers: BTreeMap::new(),
        };
        let set = |pairs: &[(&str, Option<&str>)]| -> BTreeMap<String, Option<String>> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.map(str::to_string)))
                .collect()
        };
        let next = start
            .changed(&set(&[
                ("root", Some("WARN")),
                ("mirrorlog_broker::mirror", Some("DEBUG")),
            ]))
            .unwrap();
        assert_eq!(next.directives(), "warn,mirrorlog_broker::mirror=debug");
        let back = next
            .changed(&set(&[("mirrorlog_broker::mirror", None)]))
            .unwrap();
        assert_eq!(back.directives(), "warn");
        assert_eq!(
            start.changed(&set(&[("root", None)])),
            Err(LoggingError::RemoveRoot)
        );
        // One bad change refuses them all.
        assert!(start
            .changed(&set(&[
                ("root", Some("DEBUG")),
                ("bad name!", Some("INFO"))
            ]))
            .is_err());
        assert!(start.changed(&set(&[("a::b", Some("LOUD"))])).is_err());
        // Not installed in this test process: changes are refused, not lost silently.
        assert_eq!(
            change(&set(&[("root", Some("DEBUG"))]), false),
            Err(LoggingError::NotInstalled)
        );
    }
}
