//! Kafka RecordBatch v2: pure decoding, validation and building. No I/O, no partitions.
//!
//! Contract:
//! - Every decoder takes untrusted bytes and returns `Result`; none panics or reads out of
//!   bounds on any input (`clippy::indexing_slicing` is denied in this module, and a proptest
//!   feeds arbitrary bytes).
//! - A buffer that ends inside a batch is [`FormatError::Incomplete`] (or [`ScanEnd::Incomplete`]
//!   when scanning), never confused with corruption; an all-zero header is [`ScanEnd::ZeroFilled`].
//!   A CRC field of 0 is checked like any other value (librdkafka's mock markers carry CRC 0 and
//!   are rejected).
//! - Views borrow the caller's bytes; nothing is copied or decompressed on the append path.
//!   Compressed batches are opaque there: their header is checked, their records are not
//!   walked. The paths that must see inside one (ListOffsets by timestamp, compaction) call
//!   [`BatchView::decompressed_records`] ([`compression`]), bounded by a limit.
//! - [`inspect`] is the per-batch fast path for append and recovery: length, magic, CRC, header
//!   decode and control classification. Full record validation is [`BatchView::validate_records`],
//!   and client rules are [`BatchView::validate_client`].
//!
//! Files: `batch.rs` (headers, views, the scanner), `framing.rs` (the header-only walk over
//! batches), `record.rs` (records and headers), `control.rs` (markers and the barrier),
//! `builder.rs`, `rewrite.rs` (a batch with a subset of its records, as compaction writes it),
//! `compression.rs` (the four codecs, bounded), `crc.rs`, `sequence.rs` (sequence arithmetic),
//! `reader.rs`, `types.rs`, `error.rs`.

#![deny(clippy::indexing_slicing)]

mod batch;
mod builder;
pub mod compression;
pub mod control;
mod crc;
mod error;
mod framing;
pub mod reader;
mod record;
pub mod rewrite;
pub mod sequence;
mod types;

pub use batch::{
    inspect, stamp_base_offset, stamp_partition_leader_epoch, Attributes, BatchHeader, BatchIter,
    BatchKind, BatchView, ClientRules, Compression, ScanEnd, TimestampType, ATTRIBUTES_POS,
    BASE_OFFSET_POS, BASE_SEQUENCE_POS, BATCH_HEADER_SIZE_BYTES, BATCH_LENGTH_MIN,
    CLIENT_DECOMPRESSED_BYTES_MAX_DEFAULT, CRC_POS, LAST_OFFSET_DELTA_POS, LENGTH_POS,
    LOG_OVERHEAD_BYTES, MAGIC_POS, MAGIC_V2, NO_TIMESTAMP, PARTITION_LEADER_EPOCH_POS,
    PRODUCER_ID_POS, RECORDS_COUNT_POS,
};
pub use builder::{
    build_barrier, build_control, build_marker, BarrierSpec, BatchBuilder, BatchOptions,
    MarkerSpec, RecordSpec, BARRIER_BATCH_SIZE_BYTES, MARKER_BATCH_SIZE_BYTES,
};
pub use compression::CodecError;
pub use control::{ControlRecord, ControlType, MIRROR_PID_RESET};
pub use crc::crc32c;
pub use error::{Field, FormatError};
pub use framing::{frames, producer_id_hints, Frame, Framing};
pub use record::{DecompressedRecords, Header, HeaderIter, RecordIter, RecordView};
pub use types::{
    Offset, ProducerFields, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE,
};
