//! The destination side of a mirror, whatever its source is and whatever runs it: what a
//! broker mirroring a Kafka cluster over the wire and a [`super::MirrorLink`] between two
//! engines in one process share. It knows nothing of the wire and owns no runtime: its calls
//! are the engine's, which are futures.
//!
//! - `batches.rs`: a fetch answer's whole batches (a cut last batch is left for the next
//!   fetch, a retry's overlap skipped, a header no source can have sent refused).
//! - `epochs.rs`: where a local log agrees with its source, by leader epochs (Kafka's
//!   follower divergence step).
//! - `backoff.rs`: the jittered, bounded retry delays of a partition.
//! - `status.rs`: what is reported of each partition: counters, errors, stalls, and the lag
//!   in time.
//! - `landing.rs`: one fetch answer's appends over many partitions as one engine call, and
//!   its fetch-to-durable time.
//! - `partition.rs`: each partition's state and its steps: appends in flight (resolved in
//!   order), the log start following the source's, realignment at the source's log start,
//!   truncation by leader epochs, and a whole fetch answer landed at once.

mod backoff;
mod batches;
mod epochs;
mod landing;
mod partition;
mod status;

pub use backoff::{Backoff, BACKOFF_MAX, BACKOFF_MIN};
pub use batches::{pieces, spans, whole_batches, Impossible, Span};
pub use epochs::{agreement, Agreement};
pub use landing::{AppendResult, Landed, LandedSummary, Landing};
pub use partition::{AnswerHead, Answered, InFlight, Leader, Local, Part, APPENDS_IN_FLIGHT_MAX};
pub use status::{lock, note_error, set_stalled, PartStatus, ANSWER_FRESH};
