//! The fetching side of mirroring. The modes, the mode history, the barrier rule and the
//! start/stop sequences live with the partition log (`log::PartitionLog::start_mirroring`,
//! `stop_mirroring`) because recovery replays them; this module is what a destination broker
//! runs on top of the engine: a [`MirrorLink`] mirrors one source partition (on one engine, the
//! source cluster) into one destination partition (on another engine), appending what it
//! fetches as `Origin::Mirror`, bytes untouched.
//!
//! One pipeline does it for every destination, whatever the source:
//! - [`destination`]: the destination side of each partition: its state and steps (appends in
//!   flight, realignment, truncation by leader epochs, its log start following the source's),
//!   whole batches, backoff, status and the lag in time, and a fetch answer's appends over many
//!   partitions landed as one engine call.
//! - `source.rs`: the [`Source`] trait: multi-partition fetches, epoch ends
//!   (OffsetForLeaderEpoch) and log ranges (ListOffsets), routed to each partition's leader,
//!   errors typed by what they call for. The broker implements it over the Kafka wire.
//! - `pipeline/`: the [`Pipeline`]: what to ask each route and when, and what to do with each
//!   answer (Kafka's follower fetcher's rules); driven by any runtime through its futures.
//! - `engine_source.rs`: [`EngineSource`], another engine in this process as a source.
//! - `link.rs`: [`MirrorLink`], one source partition into one destination partition: settings
//!   and counters over the pipeline and an engine source.
//! - `run.rs`: [`drive`], which runs a pipeline on the calling thread, and the link's blocking
//!   `catch_up`, `run_until` and `spawn`.

pub mod destination;
mod engine_source;
mod link;
mod pipeline;
mod run;
mod source;

pub use engine_source::{EngineFetch, EngineSource};
pub use link::{LinkConfig, LinkStats, MirrorLink, FETCH_BYTES_DEFAULT};
pub use pipeline::{Pipeline, IDLE_POLL};
pub use run::drive;
pub use source::{
    Answers, Ask, EpochEnd, ErrorAction, Fetched, LogRange, PartError, RequestError, Source,
};
