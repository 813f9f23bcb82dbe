//! The broker's configuration: the static settings read at start (`startup.rs`: flags and a
//! file of Kafka's keys), its named listeners (`listeners.rs`), Kafka's topic configs and what
//! the engine does with each (`topic.rs`), and the dynamic broker configs (`dynamic.rs`). The
//! broker-level names of topic configs (`log.retention.ms` for `retention.ms`, ...) are one
//! table (`synonyms.rs`) that the others read.

pub mod dynamic;
mod error;
pub mod listeners;
mod startup;
pub mod synonyms;
pub mod topic;

pub use error::ConfigError;
pub use startup::*;
