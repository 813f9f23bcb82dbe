//! What a mirror asks of its source, whatever the source is: a Kafka cluster over the wire (the
//! broker's mirror), or another engine in this process (a [`super::MirrorLink`]'s
//! [`super::EngineSource`]). The [`super::Pipeline`] decides what to ask and does everything
//! with the answers; a [`Source`] only carries the questions.
//!
//! Three questions, each for many partitions at once, each sent to one route (a source broker,
//! the leader of every partition asked; one request out per route at a time):
//! - **fetch** at each partition's next offset (a long-poll at the source's end);
//! - **epoch ends** (OffsetForLeaderEpoch): where the largest epoch at or below the asked one
//!   ends at the source, to find where the local log diverges;
//! - **log ranges** (ListOffsets earliest and latest), after a fetch out of range, with the
//!   source's first batch at its log start when that is past the asked offset (a realignment
//!   starts at that batch's base).
//!
//! A partition's error is typed by what it calls for ([`ErrorAction`]), as Kafka's follower
//! fetcher reads Fetch error codes; a request that got no answer at all (a lost connection) is a
//! [`RequestError`]. A source that learns from an error that its routes are stale (a leader
//! moved) refreshes them itself; the pipeline only backs the partition off.

use super::destination::Leader;
use crate::engine::TopicPartition;
use crate::format::Offset;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// One partition's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// The partition (the destination's name for it; a source maps it to its own).
    pub tp: TopicPartition,
    /// For a fetch and a log range: the offset asked. For epoch ends: the leader epoch asked.
    pub offset: Offset,
    /// The leader epoch the asker knows the route's leader by (-1: none; Kafka's
    /// `current_leader_epoch`, which fences a stale leader).
    pub current_leader_epoch: i32,
}

/// One partition's fetch answer.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// The source's high watermark (-1: not given).
    pub high_watermark: i64,
    /// The source's log start (-1: not given).
    pub log_start: i64,
    /// The record bytes: whole batches, the last perhaps cut at the source's byte limits.
    pub records: bytes::Bytes,
}

/// One partition's epoch end: the largest epoch the source has at or below the one asked, and
/// where it ends there (both -1: the source has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEnd {
    /// The epoch.
    pub epoch: i32,
    /// Where it ends (exclusive).
    pub end: i64,
}

/// One partition's log range at the source.
#[derive(Debug, Clone, Default)]
pub struct LogRange {
    /// The source's log start.
    pub earliest: i64,
    /// The source's high watermark.
    pub latest: i64,
    /// When the log start lies past the offset asked (and not past the end): the source's
    /// fetch at its log start, whose first batch's base is where a realignment starts. Empty
    /// otherwise.
    pub probe: bytes::Bytes,
}

/// What a partition's error calls for (Kafka's follower fetcher's reading of Fetch error
/// codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorAction {
    /// The offset asked is outside the source's log: its range is asked next.
    OutOfRange,
    /// The route (leader, or its epoch) is stale: the source refreshes it; retry with backoff.
    Reroute,
    /// Retry with backoff.
    Retry,
    /// Stop fetching the partition and show the reason: retrying cannot help.
    Stall,
}

/// A partition's error, as the source answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartError {
    /// What it calls for.
    pub action: ErrorAction,
    /// Its name, as the status counts errors by kind (a Kafka error name, for a wire source).
    pub kind: String,
}

/// A request that got no answer: every partition it asked for is noted with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestError {
    /// The kind errors are counted under (`network` for a wire source).
    pub kind: String,
    /// What happened.
    pub reason: String,
}

/// A request's answer on its way: per partition asked, in the order asked, its answer or its
/// error; or the request's own error.
pub type Answers<T> =
    Pin<Box<dyn Future<Output = Result<Vec<Result<T, PartError>>, RequestError>> + Send>>;

/// A mirror's source (see the module docs). A request's future owns what it needs (it is
/// polled by the pipeline, on whatever runtime drives it, or none).
pub trait Source {
    /// The leader of `tp` at the source as last known: where its requests go (`None`: none
    /// known now; the partition waits).
    fn leader(&self, tp: &TopicPartition) -> Option<Leader>;

    /// Whether a request may go to `route` at `now` (a route backing off after a lost
    /// connection may not).
    fn ready(&self, route: i32, now: Instant) -> bool {
        let _ = (route, now);
        true
    }

    /// When a route not ready at `now` will be, if any waits.
    fn wake_at(&self, now: Instant) -> Option<Instant> {
        let _ = now;
        None
    }

    /// Fetches each ask's partition from its offset.
    fn fetch(&mut self, route: i32, asks: Vec<Ask>) -> Answers<Fetched>;

    /// Each ask's epoch end (its `offset` is the epoch asked).
    fn epoch_ends(&mut self, route: i32, asks: Vec<Ask>) -> Answers<EpochEnd>;

    /// Each ask's log range (its `offset` is the one that was out of range).
    fn log_ranges(&mut self, route: i32, asks: Vec<Ask>) -> Answers<LogRange>;
}
