//! The vocabulary of the broker's settings, below every other layer: why a setting could not
//! be used (`error.rs`), Kafka's topic configs and what the engine does with each (`topic.rs`),
//! the broker-level names of topic configs (`synonyms.rs`), Kafka's settings accepted and not
//! served, with Kafka's coarser synonyms (`server_keys.rs`), and named listeners
//! (`listeners.rs`). The settings a process runs with, read from flags and a file, and the
//! dynamic broker configs are `settings/`, which build on these and on the layers that own
//! each value's type.

mod error;
pub mod listeners;
pub mod server_keys;
pub mod synonyms;
pub mod topic;

pub use error::ConfigError;
pub use topic::PARTITIONS_PER_TOPIC_MAX;
