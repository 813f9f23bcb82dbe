//! The coordinators a single node runs: consumer groups, their offsets and membership in both
//! protocols (`groups/`), transactions (`transactions/`), and the producer ids they and
//! idempotent producers are given (`producer_ids.rs`).

pub mod groups;
pub mod producer_ids;
pub mod transactions;
