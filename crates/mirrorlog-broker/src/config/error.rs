//! Why a setting could not be used: the one error type of the configuration layer, shared by
//! its parsers (flags and file, topic configs, dynamic configs).

use std::path::PathBuf;

/// A setting that could not be used.
#[derive(Debug)]
pub enum ConfigError {
    /// A key or flag this broker does not know.
    Unknown(String),
    /// The command line as its parser refuses it (the message says why and how to get help).
    Usage(String),
    /// A value out of range or not parsable.
    Invalid {
        /// The key (Kafka's name) or flag.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The configuration file could not be read.
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::Unknown(k) => write!(f, "unknown setting {k:?}"),
            ConfigError::Usage(m) => write!(f, "{}", m.trim_end()),
            ConfigError::Invalid { key, value, reason } => {
                write!(f, "{key} = {value:?}: {reason}")
            }
            ConfigError::File { path, reason } => write!(f, "{}: {reason}", path.display()),
        }
    }
}

impl std::error::Error for ConfigError {}
