//! The partition log's error type, and the mapping of lower layers' failures into it (ENOSPC
//! anywhere is `DiskFull`, EMFILE/ENFILE `TooManyOpenFiles`).

use super::Mode;
use crate::format::{FormatError, Offset};
use crate::io::IoError;
use crate::producer_state::ProducerStateError;
use crate::segment::SegmentError;
use std::path::PathBuf;

/// Why a log operation failed. `#[non_exhaustive]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// A batch of the request is malformed or incomplete.
    #[error("invalid batch in append: {0}")]
    Format(#[from] FormatError),
    /// A producer-state rule rejected the append.
    #[error(transparent)]
    ProducerState(#[from] ProducerStateError),
    /// The segment layer failed.
    #[error(transparent)]
    Segment(#[from] SegmentError),
    /// The disk is full; nothing acknowledged was lost, and appends work again once space is
    /// freed.
    #[error("disk full")]
    DiskFull,
    /// The process (`EMFILE`) or the system (`ENFILE`) has no file descriptor left for a file
    /// the log needed to open; nothing changed, nothing acknowledged was lost, and the call
    /// works again once descriptors are freed or the limit raised (`ulimit -n`).
    #[error("no file descriptor left (errno {errno}): raise the open-file limit")]
    TooManyOpenFiles {
        /// `EMFILE` or `ENFILE`.
        errno: i32,
    },
    /// A copied append (Replication, Mirror) starts below the log end with bytes other than
    /// those stored there.
    #[error("append starts at offset {got}, below the log end {expected}")]
    NotAtLogEnd {
        /// The log end.
        expected: Offset,
        /// The first batch's offset.
        got: Offset,
    },
    /// A copied append's offsets do not increase.
    #[error("batch at offset {got} follows offset {previous_last}")]
    OffsetsNotIncreasing {
        /// Last offset of the previous batch.
        previous_last: Offset,
        /// This batch's base offset.
        got: Offset,
    },
    /// The request holds no batch.
    #[error("append holds no batch")]
    EmptyAppend,
    /// The cleaner's dedupe map cannot hold the keys of one batch at the first dirty offset
    /// (raise `log.cleaner.dedupe.buffer.size`): the partition is not cleaned.
    #[error("the cleaner's dedupe map ({slots} slots) cannot hold the keys of the batch at offset {offset}")]
    DedupeBufferTooSmall {
        /// Slots of the map.
        slots: usize,
        /// The first dirty offset.
        offset: Offset,
    },
    /// A client record without a key, for a compacted partition (Kafka's
    /// `InvalidRecordException`: "Compacted topic cannot accept message without key").
    #[error("compacted topic cannot accept a record without a key (batch at offset {offset}, records {indexes:?})")]
    KeylessRecordInCompactedLog {
        /// The batch's stored `baseOffset`.
        offset: Offset,
        /// Every keyless record's index in the batch, ascending (at least one): a broker
        /// reports each, as Kafka's `record_errors` do (KIP-467).
        indexes: Vec<usize>,
    },
    /// The request is larger than one segment or the append buffer.
    #[error("append of {bytes} bytes exceeds the {limit}-byte limit")]
    AppendTooLarge {
        /// Request size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// A read below the log start or beyond the log end.
    #[error("offset {offset} is outside [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// Asked.
        offset: Offset,
        /// Log start.
        log_start: Offset,
        /// Log end.
        log_end: Offset,
    },
    /// An earlier write or fdatasync failed; the log accepts nothing more.
    #[error("log is poisoned by an earlier failure: {0}")]
    Poisoned(Box<LogError>),
    /// The log was not closed cleanly: open-time recovery must run first (not built yet).
    #[error("log in {dir} was not closed cleanly; recovery is required")]
    NeedsRecovery {
        /// The partition directory.
        dir: PathBuf,
    },
    /// A file of the log is damaged.
    #[error("{file}: {what}")]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A file of the log exists but cannot be read (any failure other than `ENOENT`, which
    /// alone means absent). Kafka fails the log directory on such an error
    /// (`LogDirFailureChannel`); the partition is Failed rather than opened with the file's
    /// state reset to what its absence would mean.
    #[error("{}: cannot be read: {source}", .file.display())]
    Unreadable {
        /// The file.
        file: PathBuf,
        /// The read's failure (its errno).
        source: IoError,
    },
    /// Client (and coordinator) appends need a Local partition.
    #[error("the partition is read-only in mode {mode:?}")]
    ReadOnlyPartition {
        /// The partition's mode.
        mode: Mode,
    },
    /// Mirror appends need a Mirroring partition.
    #[error("mirror appends need mode Mirroring, the partition is {mode:?}")]
    NotMirroring {
        /// The partition's mode.
        mode: Mode,
    },
    /// A mode change the current mode does not allow.
    #[error("cannot {what} in mode {mode:?}")]
    ModeTransition {
        /// The change asked for.
        what: &'static str,
        /// The partition's mode.
        mode: Mode,
    },
    /// A mirror source name the mode history cannot hold (empty, too long, or with a line
    /// break or another control character).
    #[error("invalid mirror source {name:?}: {reason}")]
    InvalidMirrorSource {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `MirrorStart::Offset(o)` past the log end: a start truncates, it cannot move the log
    /// forward. `MirrorStart::StartAt(o)` starts the log at `o` (every local segment removed).
    #[error(
        "cannot start mirroring at offset {asked}: past the log end {log_end} (a start truncates; \
         MirrorStart::StartAt starts the log at an offset past its end)"
    )]
    StartPastLogEnd {
        /// The offset asked.
        asked: Offset,
        /// The log end.
        log_end: Offset,
    },
    /// `EpochEnd(e)` for an epoch the cache does not know.
    #[error("leader epoch {0} is not in the epoch cache")]
    UnknownEpoch(i32),
}

impl LogError {
    /// Whether a Mirror append refused with this error moves the partition to Failed: the
    /// fetched data is wrong (malformed, not continuing the log, breaking a producer-state
    /// rule), as opposed to a refusal of the call (too large, wrong mode) or a failure of the
    /// disk (which poisons or is retried).
    #[must_use]
    pub fn fails_a_mirror(&self) -> bool {
        matches!(
            self,
            LogError::Format(_)
                | LogError::ProducerState(_)
                | LogError::NotAtLogEnd { .. }
                | LogError::OffsetsNotIncreasing { .. }
                | LogError::EmptyAppend
        )
    }
}

/// `ENOSPC` anywhere is `DiskFull`, `EMFILE`/`ENFILE` `TooManyOpenFiles`; everything else keeps
/// its layer's error.
pub(super) fn classify(error: impl Into<SegmentError>) -> LogError {
    let error = error.into();
    match error {
        SegmentError::Io(IoError::NoSpace { .. }) => LogError::DiskFull,
        SegmentError::Io(IoError::Os { errno, .. })
            if errno == libc::EMFILE || errno == libc::ENFILE =>
        {
            LogError::TooManyOpenFiles { errno }
        }
        SegmentError::Poisoned(inner)
            if matches!(*inner, SegmentError::Io(IoError::NoSpace { .. })) =>
        {
            LogError::DiskFull
        }
        other => LogError::Segment(other),
    }
}
