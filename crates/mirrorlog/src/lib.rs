//! # mirrorlog
//!
//! An embeddable storage engine for Kafka-compatible partition logs that implements the storage
//! side of Kafka's cluster mirroring (KIP-1279): a destination stores fetched record batches
//! exactly as the source wrote them, and when mirroring stops a *barrier* batch wipes the
//! producer state so local producers start clean.
//!
//! The public API is four modules:
//! - [`engine`]: the handle a broker embeds ([`engine::Engine`]): partitions, appends, reads,
//!   mirroring start and stop, every call a future with `.wait()`.
//! - [`api`]: the vocabulary of those calls — partition names, per-partition configuration with
//!   Kafka's names, requests, results, modes and [`api::EngineError`].
//! - [`format`](mod@format): Kafka RecordBatch v2 views, validation and builders (pure, no I/O).
//! - [`mirror`]: [`mirror::MirrorLink`], the fetching side of mirroring over two engines; and
//!   [`inspect`], read-only views of a data directory (what the `mirrorlog` tool prints).
//!
//! Below them, the engine's layers, lowest first (a layer never imports one above it): `io`
//! (the `Io` seam: io_uring backend, simulated disk, aligned buffers; knows nothing of Kafka),
//! `mem` (huge-page vector, cache hints; with `io` the only modules allowed to switch off
//! the compiler's memory-safety checks: the workspace denies it everywhere else),
//! `producer_state` (the PSM), `segment` (one segment's write path and indexes), `log` (one
//! partition log), `recovery` (open-time repair), `shard` (the thread-per-core runtime). They are
//! private to the crate; the tools, benches, tests and fuzz targets reach them through
//! `mirrorlog::internals`, which is hidden from the docs and not part of the API: nothing there
//! is stable.
//!
//! See `ARCHITECTURE.md` for the layers still to come and the data flow between them.
//!
//! ```
//! use mirrorlog::format::{self, BatchBuilder, BatchOptions, BatchKind, RecordSpec};
//!
//! let mut builder = BatchBuilder::new(BatchOptions::default());
//! builder.push(RecordSpec { timestamp: 1_700_000_000_000, key: Some(b"k"), value: Some(b"v"), headers: &[] });
//! let bytes = builder.build();
//! let batch = format::inspect(&bytes, 0)?;
//! assert_eq!(batch.kind(), BatchKind::Data);
//! assert_eq!(batch.header().records_count, 1);
//! # Ok::<(), mirrorlog::format::FormatError>(())
//! ```

pub mod api;
pub mod engine;
pub mod format;
pub mod inspect;
pub mod mirror;

mod clock;
mod io;
mod journal;
mod log;
mod mem;
mod producer_state;
mod recovery;
mod segment;
mod shard;

/// The engine's layers below the API, for the tools, benches, tests and fuzz targets of this
/// repository. Not part of the API: embedders use [`engine`], [`api`], [`format`](mod@format), [`mirror`]
/// and [`inspect`]; anything here may change without notice.
#[doc(hidden)]
pub mod internals {
    /// See `src/clock.rs`.
    pub mod clock {
        pub use crate::clock::*;
    }
    /// See `src/io/mod.rs`.
    pub mod io {
        pub use crate::io::*;
    }
    /// See `src/journal/mod.rs`.
    pub mod journal {
        pub use crate::journal::*;
    }
    /// See `src/log/mod.rs`.
    pub mod log {
        pub use crate::log::*;
    }
    /// See `src/mem/mod.rs`.
    pub mod mem {
        pub use crate::mem::*;
    }
    /// See `src/producer_state/mod.rs`.
    pub mod producer_state {
        pub use crate::producer_state::*;
    }
    /// See `src/recovery/mod.rs`.
    pub mod recovery {
        pub use crate::recovery::*;
    }
    /// See `src/segment/mod.rs`.
    pub mod segment {
        pub use crate::segment::*;
    }
    /// See `src/shard/mod.rs`.
    pub mod shard {
        pub use crate::shard::*;
    }
}
