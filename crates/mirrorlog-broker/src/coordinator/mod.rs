//! The coordinators a single node runs: consumer groups, their offsets and membership in both
//! protocols (`groups/`), transactions (`transactions/`), the producer ids they and
//! idempotent producers are given (`producer_ids.rs`), and the incremental fetch sessions
//! fetchers keep between requests (`fetch_sessions.rs`).

pub mod fetch_sessions;
pub mod groups;
pub mod producer_ids;
pub mod transactions;
