//! The settings a broker runs with: the static ones read at start from flags and a file of
//! Kafka's keys (`startup.rs`), and the dynamic broker configs, changed at runtime and stored
//! (`dynamic.rs`). Each value's type is owned by the layer that uses it (SASL mechanisms by
//! `net/`, ACL settings by `acl/`, group limits by `coordinator/`); the vocabulary shared with
//! the lower layers (topic configs, listeners, synonyms) is `config/`.

pub mod command_line;
pub mod dynamic;
mod startup;

pub use dynamic::describe_not_served;
pub use startup::*;
