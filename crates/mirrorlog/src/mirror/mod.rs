//! The fetching side of mirroring. The modes, the mode history, the barrier rule and the
//! start/stop sequences live with the partition log (`log::PartitionLog::start_mirroring`,
//! `stop_mirroring`) because recovery replays them; this module is what a destination broker
//! runs on top of the engine: a [`MirrorLink`] mirrors one source partition (on one engine, the
//! source cluster) into one destination partition (on another engine), appending what it
//! fetches as `Origin::Mirror`, bytes untouched.
//!
//! - `link.rs`: the link — its settings, its counters, its endpoints.
//! - `pump.rs`: the pipeline a link runs ([`Pump`]): long-poll fetches from the source at the
//!   destination's end, the next fetch in flight while earlier appends commit, realignment when
//!   the source's retention passed the destination's end, backoff after errors. Its
//!   [`Pump::poll_step`] is what a broker's own runtime drives (a step function over the
//!   engines' futures).
//! - `run.rs`: the ways to run a link: its pump, and the blocking `catch_up`, `run_until`,
//!   `spawn`.
//! - [`destination`]: the destination side of a mirror, shared by a broker's mirror of a Kafka
//!   cluster and the link: per-partition state, whole batches, divergence by epochs, backoff,
//!   lag, and a fetch answer's appends landed as one engine call.

pub mod destination;
mod link;
mod pump;
mod run;

pub use link::{LinkConfig, LinkStats, MirrorLink, FETCH_BYTES_DEFAULT};
pub use pump::{Pump, Step};
