//! # mirrorlog
//!
//! An embeddable storage engine for Kafka-compatible partition logs that implements the storage
//! side of Kafka's cluster mirroring (KIP-1279): a destination stores fetched record batches
//! exactly as the source wrote them, and when mirroring stops a *barrier* batch wipes the
//! producer state so local producers start clean.
//!
//! Layers, lowest first (a layer never imports one above it):
//! - [`format`](mod@format): Kafka RecordBatch v2 views, validation and builders (pure, no I/O).
//! - [`io`]: the `Io` seam — io_uring backend, simulated disk, aligned buffers. Knows nothing of
//!   Kafka; the only module with `unsafe`.
//! - [`producer_state`]: the per-partition producer state manager (PSM).
//! - [`segment`]: one segment's write path (write-once pages, commit records) and indexes.
//! - [`log`]: one partition log: appends per origin, rolls, commits, reads.
//! - [`recovery`]: open-time repair of a partition that was not closed cleanly.
//! - [`shard`]: the thread-per-core runtime: one ring, queue and doorbell per shard, group
//!   commit across its partitions.
//! - [`engine`]: the public handle a broker embeds ([`engine::Engine`]).
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
pub mod io;
pub mod log;
pub mod mem;
pub mod mirror;
pub mod producer_state;
pub mod recovery;
pub mod segment;
pub mod shard;
