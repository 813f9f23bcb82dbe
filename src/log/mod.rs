//! One partition log: segments, offsets per append origin, the producer state, rolling,
//! durable commits, reads, truncation, delete-records (log start checkpointed), retention,
//! `segment.ms` rolls and the leader-epoch checkpoint.
//!
//! Contract:
//! - `append` validates the whole request (format fast path for every batch, client rules for
//!   client appends, offsets for copied appends, producer rules via a staged PSM update) before
//!   anything is written; a rejected append changes nothing.
//! - Client and Coordinator appends get offsets from the log end and the current leader epoch
//!   stamped into the stored copy; Replication and Mirror appends keep every byte, must start at
//!   the log end and increase.
//! - Appended data becomes durable with the next commit round ([`PartitionLog::commit`]); the
//!   high watermark defaults to the durable end, reads never go past it (nor past the last stable
//!   offset at `ReadCommitted`).
//! - A batch that does not fit the active segment rolls it: the segment is sealed (trimmed to
//!   Kafka's bytes, indexes written), the PSM snapshot is written atomically under the next
//!   offset's name, and a new segment starts.
//! - A failed write or fdatasync poisons the log: every later call returns that error.
//!
//! - Modes: clients (and the coordinator) write only in Local; Mirror appends only in
//!   Mirroring, and a corrupt or non-contiguous mirrored batch moves the partition to Failed.
//!   The mode history (`mirror-checkpoint`) decides the barrier rule: a barrier clears the
//!   producer state iff its offset lies in a Local range — here and in recovery's replay alike.

mod epoch_cache;
mod mode_history;

pub use epoch_cache::{CheckpointError, EpochCache, LEADER_EPOCH_CHECKPOINT};
pub use mode_history::{Mode, ModeHistory, ModeHistoryError, RangeKind, MIRROR_CHECKPOINT};

use crate::format::{self, BatchIter, FormatError, Offset, ScanEnd};
use crate::io::{self, FileId, Io, IoError, Op, OpenOptions};
use crate::producer_state::{
    snapshot_file_name, AbortedTxn, BatchInfo, Origin, ProducerStateConfig, ProducerStateError,
    ProducerStateManager,
};
use crate::segment::{self, SealedSegment, SegmentConfig, SegmentError, SegmentWriter};
use std::path::{Path, PathBuf};

/// Settings of a partition log (Kafka names where they exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogConfig {
    /// `segment.bytes`, `index.interval.bytes` and the append buffer.
    pub segment: SegmentConfig,
    /// `producer.id.expiration.ms`.
    pub producer: ProducerStateConfig,
    /// `retention.bytes`: delete the oldest sealed segments while the log is larger.
    pub retention_bytes: Option<u64>,
    /// `retention.ms`: delete sealed segments whose newest record is older.
    pub retention_ms: Option<i64>,
    /// `segment.ms`: roll when a batch is this much newer than the segment's first batch
    /// (Kafka measures from record timestamps the same way).
    pub segment_ms: Option<i64>,
    /// `segment.index.bytes`: roll when the offset index would outgrow it (Kafka's default
    /// 10 MiB when `None`).
    pub segment_index_bytes: Option<u64>,
}

/// Written (synced, atomically) before a sealed segment is reopened — by a truncation or an
/// open — and removed once done: if a crash interrupts the reopen, the next open or recovery
/// finishes it first (cut the segment back to exactly its kept batches, delete every later
/// segment), instead of finding a half-extended file.
pub const SEGMENT_INTENT: &str = "segment-intent";

/// The pending reopen: the segment's base, how many bytes of it are kept.
fn encode_intent(base: Offset, data_len: u64) -> String {
    format!("0\n{} {}\n", base.0, data_len)
}

fn decode_intent(text: &str) -> Option<(Offset, u64)> {
    let mut lines = text.lines();
    if lines.next()? != "0" {
        return None;
    }
    let mut parts = lines.next()?.split_whitespace();
    let base = parts.next()?.parse().ok()?;
    let data_len = parts.next()?.parse().ok()?;
    Some((Offset(base), data_len))
}

/// Records that the sealed segment at `base` is about to be reopened keeping `data_len` bytes.
pub(crate) fn write_intent(
    io: &mut dyn Io,
    dir: &Path,
    base: Offset,
    data_len: u64,
) -> Result<(), LogError> {
    io::write_file_atomically(
        io,
        dir,
        SEGMENT_INTENT,
        encode_intent(base, data_len).as_bytes(),
    )
    .map_err(classify)
}

/// Removes the intent durably (a stale one must never cut data appended later).
pub(crate) fn clear_intent(io: &mut dyn Io, dir: &Path) -> Result<(), LogError> {
    unlink_if_present(io, dir.join(SEGMENT_INTENT)).map_err(classify)?;
    let mut others = Vec::new();
    let d = io::open(
        io,
        dir,
        OpenOptions {
            directory: true,
            ..OpenOptions::default()
        },
    )
    .map_err(classify)?;
    io::run(io, Op::Fsync { file: d }, &mut others)
        .and_then(|c| c.result)
        .map_err(classify)?;
    io::run(io, Op::Close { file: d }, &mut others)
        .and_then(|c| c.result)
        .map_err(classify)?;
    Ok(())
}

/// Finishes a reopen a crash interrupted (see [`SEGMENT_INTENT`]): deletes every segment after
/// the intent's, cuts its file back to the kept bytes (which were durable: they were sealed),
/// and clears the intent. Called first by `open` and by recovery.
///
/// # Errors
/// [`LogError::Corrupt`] if the kept bytes are not whole batches, or an I/O failure.
pub fn finish_interrupted_reopen(io: &mut dyn Io, dir: &Path) -> Result<(), LogError> {
    let Ok(text) = io::read_file(io, &dir.join(SEGMENT_INTENT)) else {
        return Ok(());
    };
    let Some((base, data_len)) = decode_intent(&String::from_utf8_lossy(&text)) else {
        return Err(LogError::Corrupt {
            file: dir.join(SEGMENT_INTENT),
            what: "unreadable reopen intent".to_string(),
        });
    };
    let names = io.list_dir(dir).map_err(classify)?;
    let mut others = Vec::new();
    for later in segment::offsets_named(&names, "log")
        .into_iter()
        .filter(|&b| b > base)
    {
        for path in segment::file_paths(dir, later) {
            match io::run(io, Op::Unlink { path }, &mut others).and_then(|c| c.result) {
                Ok(_)
                | Err(IoError::Os {
                    errno: libc::ENOENT,
                    ..
                }) => {}
                Err(e) => return Err(classify(e)),
            }
        }
    }
    let path = segment::log_path(dir, base);
    let file = io::open(
        io,
        &path,
        OpenOptions {
            write: true,
            direct: true,
            ..OpenOptions::default()
        },
    )
    .map_err(classify)?;
    let kept = io::read_direct(io, file, 0, data_len as usize).map_err(classify)?;
    if kept.len() as u64 != data_len || segment::index_batches(&kept, base, 4096).is_err() {
        return Err(LogError::Corrupt {
            file: path,
            what: format!("the {data_len} bytes a reopen kept are not whole batches"),
        });
    }
    for op in [
        Op::Truncate {
            file,
            len: data_len,
        },
        Op::Fdatasync { file },
        Op::Close { file },
    ] {
        io::run(io, op, &mut others)
            .and_then(|c| c.result)
            .map_err(classify)?;
    }
    clear_intent(io, dir)
}

/// How `assemble_with` rebuilds the producer state.
#[derive(Debug)]
pub enum Replay {
    /// From the newest snapshot at or below the end, then the batches after it.
    FromSnapshot,
    /// From the first batch of the log (snapshots ignored), rewriting derived files.
    FromStart,
    /// Already replayed from the first batch (recovery's single pass): this state and these
    /// aborted transactions; derived files are rewritten as with `FromStart`.
    Rebuilt(Box<(ProducerStateManager, Vec<AbortedTxn>)>),
}

/// The log start offset a `delete_records` moved past its segment's base, made durable before
/// the call returns (Kafka keeps it in `log-start-offset-checkpoint`).
pub const LOG_START_CHECKPOINT: &str = "log-start-offset";

/// The log start of a log whose first segment starts at `first_base` and which ends at `end`:
/// the checkpointed one when it lies in between (a missing or unreadable checkpoint means the
/// first segment's base, as before any `delete_records`).
fn checkpointed_log_start(io: &mut dyn Io, dir: &Path, first_base: Offset, end: Offset) -> Offset {
    io::read_file(io, &dir.join(LOG_START_CHECKPOINT))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.trim().parse::<i64>().ok())
        .map_or(first_base, |o| {
            Offset(o).clamp(first_base, end.max(first_base))
        })
}

/// Paused or Failed, persisted beside the history (absent: the newest range's mode).
pub const MIRROR_MODE_FILE: &str = "mirror-mode";

/// The mode a partition opens in: its newest range's, unless `mirror-mode` says Paused or
/// Failed (a damaged file is ignored: the range's mode is the safe reading).
fn mode_of(io: &mut dyn Io, dir: &Path, history: &ModeHistory) -> Mode {
    let text = io::read_file(io, &dir.join(MIRROR_MODE_FILE))
        .ok()
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    mode_from_files(history, text.as_deref())
}

/// The mode of a partition whose history is `history` and whose `mirror-mode` file holds
/// `mirror_mode` (`None`: no file): the newest range's mode, unless the file says Paused or
/// Failed while mirroring.
#[must_use]
pub fn mode_from_files(history: &ModeHistory, mirror_mode: Option<&str>) -> Mode {
    let base = match history.last_kind() {
        RangeKind::Local => Mode::Local,
        RangeKind::Mirror(source) => Mode::Mirroring { source },
    };
    let Some(text) = mirror_mode else {
        return base;
    };
    match (text.split_once('\n'), &base) {
        (Some(("paused", _)), Mode::Mirroring { source }) => Mode::Paused {
            source: source.clone(),
        },
        (Some(("failed", reason)), Mode::Mirroring { .. }) => Mode::Failed {
            reason: reason.to_string(),
        },
        _ => base,
    }
}

/// The mode history of the log in `dir` ending at `end`: entries starting past the end (left by
/// a truncation a crash cut short) are dropped. A missing file means a log that never mirrored;
/// a damaged one fails the open (the history cannot be rebuilt from the batches).
pub(crate) fn load_history(
    io: &mut dyn Io,
    dir: &Path,
    end: Offset,
) -> Result<ModeHistory, LogError> {
    let path = dir.join(MIRROR_CHECKPOINT);
    let bytes = match io::read_file(io, &path) {
        Ok(b) => b,
        Err(IoError::Os {
            errno: libc::ENOENT,
            ..
        }) => return Ok(ModeHistory::default()),
        Err(e) => return Err(classify(e)),
    };
    let mut history =
        ModeHistory::decode(&String::from_utf8_lossy(&bytes)).map_err(|e| LogError::Corrupt {
            file: path.clone(),
            what: e.to_string(),
        })?;
    let before = history.entries().len();
    history.drop_after(end);
    if history.entries().len() != before {
        // Persist the trimmed history now: appends will reach those offsets again.
        io::write_file_atomically(io, dir, MIRROR_CHECKPOINT, history.encode().as_bytes())
            .map_err(classify)?;
    }
    Ok(history)
}

/// Unlinks `path`; a file that is already gone is fine.
fn unlink_if_present(io: &mut dyn Io, path: PathBuf) -> Result<(), IoError> {
    let mut others = Vec::new();
    match io::run(io, Op::Unlink { path }, &mut others).and_then(|c| c.result) {
        Ok(_)
        | Err(IoError::Os {
            errno: libc::ENOENT,
            ..
        }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The clean-shutdown marker in a partition directory (written by `close`, removed by `open`).
pub const CLEAN_SHUTDOWN_MARKER: &str = "clean-shutdown";

/// Kafka's default `segment.index.bytes`.
pub const SEGMENT_INDEX_BYTES_DEFAULT: u64 = 10 << 20;

/// Read isolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Up to the high watermark.
    ReadUncommitted,
    /// Up to the last stable offset, with the aborted transactions of the range.
    ReadCommitted,
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// First offset of the append (of the original batch for a duplicate).
    pub first_offset: Offset,
    /// Last offset.
    pub last_offset: Offset,
    /// A client retry of a batch already in the log: nothing was written.
    pub duplicate: bool,
}

/// What a read returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Whole batches, starting with the one containing the requested offset.
    pub records: Vec<u8>,
    /// High watermark.
    pub high_watermark: Offset,
    /// Last stable offset.
    pub last_stable_offset: Offset,
    /// Log start offset.
    pub log_start_offset: Offset,
    /// For `ReadCommitted`: aborted transactions overlapping the returned range.
    pub aborted: Vec<AbortedTxn>,
}

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
    /// A copied append (Replication, Mirror) does not start at the log end.
    #[error("append starts at offset {got}, the log end is {expected}")]
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
    /// `EpochEnd(e)` for an epoch the cache does not know.
    #[error("leader epoch {0} is not in the epoch cache")]
    UnknownEpoch(i32),
}

/// Where `start_mirroring` truncates before mirroring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorStart {
    /// The local last stable offset.
    LastStableOffset,
    /// An explicit offset (failback: the other side's `last_mirrored_offset`).
    Offset(Offset),
    /// The end offset of leader epoch `e` in the epoch cache.
    EpochEnd(i32),
}

/// What `stop_mirroring` does with transactions still open in the mirrored data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenTransactions {
    /// Append one ABORT marker per producer with an open transaction (the default).
    #[default]
    Abort,
    /// Truncate the log to the last stable offset first.
    TruncateToLso,
}

/// What `stop_mirroring` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopOutcome {
    /// The log end when mirroring stopped (the other side truncates to it on failback).
    pub last_mirrored_offset: Offset,
    /// Producers whose open transactions got an ABORT marker.
    pub aborted_producers: Vec<i64>,
    /// Where the barrier went.
    pub barrier_offset: Offset,
}

#[derive(Debug)]
struct Sealed {
    meta: SealedSegment,
    file: FileId,
}

/// See the module docs.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    sealed: Vec<Sealed>,
    active: SegmentWriter,
    psm: ProducerStateManager,
    aborted: Vec<AbortedTxn>,
    log_start: Offset,
    leader_epoch: i32,
    managed_high_watermark: Option<Offset>,
    poisoned: Option<LogError>,
    /// A roll sealed a segment but could not write all the files derived from it (indexes,
    /// `.txnindex`, snapshot; ENOSPC): the data is whole and readable, and `close` then leaves
    /// no clean-shutdown marker so that the next open rebuilds them.
    derived_incomplete: bool,
    infos: Vec<BatchInfo>,
    /// Per batch of the append being written: where it is in the request and what the log
    /// needs of its header.
    extents: Vec<Extent>,
    epochs: EpochCache,
    /// Local and mirrored ranges (the barrier rule), persisted in `mirror-checkpoint`.
    history: ModeHistory,
    mode: Mode,
}

#[derive(Debug, Clone, Copy)]
struct Extent {
    start: usize,
    len: usize,
    max_timestamp: i64,
    leader_epoch: i32,
}

impl PartitionLog {
    /// Creates an empty log in the existing directory `dir`.
    ///
    /// # Errors
    /// [`LogError::DiskFull`] or another I/O failure creating the first segment.
    pub fn create(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<Self, LogError> {
        let active =
            SegmentWriter::create(io, dir, Offset(0), config.segment, 0).map_err(classify)?;
        Ok(PartitionLog {
            dir: dir.to_path_buf(),
            config,
            sealed: Vec::new(),
            active,
            psm: ProducerStateManager::new(config.producer),
            aborted: Vec::new(),
            log_start: Offset(0),
            leader_epoch: 0,
            managed_high_watermark: None,
            poisoned: None,
            derived_incomplete: false,
            infos: Vec::new(),
            extents: Vec::new(),
            epochs: EpochCache::default(),
            history: ModeHistory::default(),
            mode: Mode::Local,
        })
    }

    /// Opens the log in `dir`: a cleanly closed one (marker present) is loaded — segments
    /// scanned and validated, the last one reopened as active (its partial page copied into a
    /// commit record first), producer state from the newest snapshot plus replay, epoch cache
    /// and aborted transactions from their files; an empty directory starts a new log. The
    /// marker is removed, so a crash from now on is seen as unclean.
    ///
    /// # Errors
    /// [`LogError::NeedsRecovery`] without the marker (recovery is its own issue),
    /// [`LogError::Corrupt`] for damaged files, or an I/O failure.
    pub fn open(io: &mut dyn Io, dir: &Path, config: LogConfig) -> Result<Self, LogError> {
        finish_interrupted_reopen(io, dir)?;
        let names = io.list_dir(dir).map_err(|e| LogError::Segment(e.into()))?;
        let bases = segment::offsets_named(&names, "log");
        if bases.is_empty() {
            return Self::create(io, dir, config);
        }
        if !names.iter().any(|n| n == CLEAN_SHUTDOWN_MARKER) {
            return Err(LogError::NeedsRecovery {
                dir: dir.to_path_buf(),
            });
        }
        let corrupt = |file: PathBuf, what: String| LogError::Corrupt { file, what };
        let mut sealed = Vec::new();
        let mut aborted = Vec::new();
        let mut last_end = (Offset(0), 0u64);
        let mut expected = bases[0];
        for (i, &base) in bases.iter().enumerate() {
            let path = segment::log_path(dir, base);
            let file = segment::open_for_reads(io, dir, base).map_err(classify)?;
            let bytes = io::read_direct_all(io, file).map_err(classify)?;
            let (next, indexes) =
                segment::index_batches(&bytes, base, config.segment.index_interval_bytes)
                    .map_err(|what| corrupt(path.clone(), what))?;
            if base != expected && i > 0 {
                return Err(corrupt(
                    path,
                    format!("segment starts at {base}, the previous one ends at {expected}"),
                ));
            }
            expected = next;
            if let Ok(txn) = io::read_file(io, &segment::txn_index_path(dir, base)) {
                let entries = crate::producer_state::decode_txn_index(&txn)
                    .map_err(|e| corrupt(segment::txn_index_path(dir, base), e.to_string()))?;
                aborted.extend(entries);
            }
            if i + 1 == bases.len() {
                last_end = (next, bytes.len() as u64);
                let mut others = Vec::new();
                io::run(io, Op::Close { file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| LogError::Segment(e.into()))?;
            } else {
                sealed.push(Sealed {
                    meta: SealedSegment {
                        base_offset: base,
                        next_offset: next,
                        data_len: bytes.len() as u64,
                        indexes,
                    },
                    file,
                });
            }
        }
        let last_base = *bases.last().unwrap_or(&Offset(0));
        write_intent(io, dir, last_base, last_end.1)?;
        let active = SegmentWriter::reopen(
            io,
            dir,
            last_base,
            config.segment,
            0,
            last_end.1,
            last_end.0,
        )
        .map_err(classify)?;
        clear_intent(io, dir)?;
        let epochs = match io::read_file(io, &dir.join(LEADER_EPOCH_CHECKPOINT)) {
            Ok(bytes) => EpochCache::decode(&String::from_utf8_lossy(&bytes))
                .map_err(|e| corrupt(dir.join(LEADER_EPOCH_CHECKPOINT), e.to_string()))?,
            Err(_) => EpochCache::default(),
        };
        let log_start = checkpointed_log_start(io, dir, bases[0], active.next_offset());
        let history = load_history(io, dir, active.next_offset())?;
        let mut log = Self::with_parts(
            io, dir, config, sealed, active, aborted, epochs, log_start, history,
        );
        let snapshots = segment::offsets_named(&names, "snapshot");
        let end = log.log_end();
        log.rebuild_producer_state(io, end, &snapshots)?;
        let mut others = Vec::new();
        io::run(
            io,
            Op::Unlink {
                path: dir.join(CLEAN_SHUTDOWN_MARKER),
            },
            &mut others,
        )
        .and_then(|c| c.result)
        .map_err(|e| LogError::Segment(e.into()))?;
        Ok(log)
    }

    /// A log over opened or recovered parts; the producer state starts empty (the callers
    /// rebuild it) and the mode comes from the history (and `mirror-mode`).
    #[allow(clippy::too_many_arguments)]
    fn with_parts(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        sealed: Vec<Sealed>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        epochs: EpochCache,
        log_start: Offset,
        history: ModeHistory,
    ) -> Self {
        PartitionLog {
            dir: dir.to_path_buf(),
            config,
            sealed,
            active,
            psm: ProducerStateManager::new(config.producer),
            aborted,
            log_start,
            leader_epoch: epochs.latest_epoch().unwrap_or(0),
            managed_high_watermark: None,
            poisoned: None,
            derived_incomplete: false,
            infos: Vec::new(),
            extents: Vec::new(),
            epochs,
            mode: mode_of(io, dir, &history),
            history,
        }
    }

    /// Assembles a log from recovered parts (used by `recovery`): sealed segments with their
    /// open read handles, the active writer, aborted transactions and the epoch cache. The
    /// producer state is then rebuilt from snapshots and a replay.
    ///
    /// # Errors
    /// An I/O failure while rebuilding the producer state.
    pub fn assemble(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        sealed: Vec<(SealedSegment, FileId)>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        epochs: EpochCache,
    ) -> Result<Self, LogError> {
        Self::assemble_with(
            io,
            dir,
            config,
            sealed,
            active,
            aborted,
            epochs,
            Replay::FromSnapshot,
        )
    }

    /// [`PartitionLog::assemble`] choosing how the producer state is rebuilt. Recovery replays
    /// from the start: it has read every byte anyway, and the result does not depend on
    /// snapshot or `.txnindex` files that may be missing or damaged; it then rewrites the
    /// epoch checkpoint and every sealed segment's `.txnindex`, `.index` and `.timeindex`.
    ///
    /// # Errors
    /// An I/O failure while rebuilding or rewriting.
    #[allow(clippy::too_many_arguments)]
    pub fn assemble_with(
        io: &mut dyn Io,
        dir: &Path,
        config: LogConfig,
        sealed: Vec<(SealedSegment, FileId)>,
        active: SegmentWriter,
        aborted: Vec<AbortedTxn>,
        mut epochs: EpochCache,
        replay: Replay,
    ) -> Result<Self, LogError> {
        let first_base = sealed
            .first()
            .map_or(active.base_offset(), |(s, _)| s.base_offset);
        let end = active.next_offset();
        let log_start = checkpointed_log_start(io, dir, first_base, end);
        let history = load_history(io, dir, end)?;
        let epochs_cut = epochs.truncate_from_end(end);
        let sealed = sealed
            .into_iter()
            .map(|(meta, file)| Sealed { meta, file })
            .collect();
        let mut log = Self::with_parts(
            io, dir, config, sealed, active, aborted, epochs, log_start, history,
        );
        log.aborted.retain(|a| a.last_offset < end);
        let snapshots = log.snapshot_offsets(io)?;
        match replay {
            Replay::FromSnapshot => {
                if epochs_cut {
                    log.write_epoch_checkpoint(io)?;
                }
                log.rebuild_producer_state(io, end, &snapshots)?;
            }
            Replay::FromStart | Replay::Rebuilt(_) => {
                log.write_epoch_checkpoint(io)?;
                let mut others = Vec::new();
                // Stray snapshots: past the recovered end (records that never became durable, or
                // a truncation cut short) or before the first segment (its records are gone).
                for b in snapshots.into_iter().filter(|&b| b > end || b < first_base) {
                    let _ = io::run(
                        io,
                        Op::Unlink {
                            path: dir.join(snapshot_file_name(b)),
                        },
                        &mut others,
                    );
                }
                log.aborted.clear();
                if let Replay::Rebuilt(rebuilt) = replay {
                    let (psm, aborted) = *rebuilt;
                    log.psm = psm;
                    log.aborted = aborted;
                } else {
                    log.rebuild_producer_state(io, end, &[])?;
                }
                for i in 0..log.sealed.len() {
                    let meta = &log.sealed[i].meta;
                    let base = meta.base_offset;
                    let files = [
                        (
                            segment::txn_index_path(dir, base),
                            log.txn_index_bytes(meta),
                        ),
                        (
                            segment::offset_index_path(dir, base),
                            meta.indexes.encode_offset_index(),
                        ),
                        (
                            segment::time_index_path(dir, base),
                            meta.indexes.encode_time_index(),
                        ),
                    ];
                    for (path, bytes) in files {
                        io::write_file(io, &path, &bytes).map_err(classify)?;
                    }
                }
            }
        }
        Ok(log)
    }

    /// Closes cleanly: commits, seals the active segment (last page written, file trimmed,
    /// indexes written), snapshots the producer state under the log end, and writes the
    /// clean-shutdown marker last.
    ///
    /// # Errors
    /// Any I/O failure; the marker is then not written and the next open needs recovery.
    pub fn close(mut self, io: &mut dyn Io) -> Result<(), LogError> {
        self.check()?;
        self.commit(io)?;
        let end = self.log_end();
        let placeholder = SegmentWriter::placeholder(self.active.base_offset());
        let active = std::mem::replace(&mut self.active, placeholder);
        let sealed = active.seal(io).map_err(classify)?;
        sealed.write_indexes(io, &self.dir).map_err(classify)?;
        let txn_entries = self.txn_index_bytes(&sealed);
        io::write_file(
            io,
            &segment::txn_index_path(&self.dir, sealed.base_offset),
            &txn_entries,
        )
        .map_err(classify)?;
        io::write_file_atomically(
            io,
            &self.dir,
            &snapshot_file_name(end),
            &self.psm.snapshot(),
        )
        .map_err(classify)?;
        io::write_file_atomically(
            io,
            &self.dir,
            LEADER_EPOCH_CHECKPOINT,
            self.epochs.encode().as_bytes(),
        )
        .map_err(classify)?;
        let mut others = Vec::new();
        for s in self.sealed.drain(..) {
            io::run(io, Op::Close { file: s.file }, &mut others)
                .and_then(|c| c.result)
                .map_err(|e| LogError::Segment(e.into()))?;
        }
        if self.derived_incomplete {
            // A roll could not write some derived files: without the marker the next open
            // recovers, which rewrites every one of them.
            return Ok(());
        }
        io::write_file_atomically(io, &self.dir, CLEAN_SHUTDOWN_MARKER, b"").map_err(classify)?;
        Ok(())
    }

    fn check(&self) -> Result<(), LogError> {
        match &self.poisoned {
            Some(e) => Err(LogError::Poisoned(Box::new(e.clone()))),
            None => Ok(()),
        }
    }

    fn poison(&mut self, error: LogError) -> LogError {
        // ENOSPC during preallocation or a roll changes nothing durable: not poisonous.
        if error != LogError::DiskFull && self.poisoned.is_none() {
            self.poisoned = Some(error.clone());
        }
        error
    }

    /// The producer state.
    #[must_use]
    pub fn producer_state(&self) -> &ProducerStateManager {
        &self.psm
    }

    /// The offset after the last appended batch.
    #[must_use]
    pub fn log_end(&self) -> Offset {
        self.active.next_offset()
    }

    /// The offset after the last durable batch.
    #[must_use]
    pub fn durable_end(&self) -> Offset {
        self.active.durable().next_offset
    }

    /// The log start offset.
    #[must_use]
    pub fn log_start(&self) -> Offset {
        self.log_start
    }

    /// Base offsets of every segment, oldest first (the active one last).
    #[must_use]
    pub fn segment_base_offsets(&self) -> Vec<Offset> {
        let mut v: Vec<_> = self.sealed.iter().map(|s| s.meta.base_offset).collect();
        v.push(self.active.base_offset());
        v
    }

    /// Sets the leader epoch stamped into client and coordinator appends.
    pub fn set_leader_epoch(&mut self, epoch: i32) {
        self.leader_epoch = epoch;
    }

    /// High watermark: the durable end, or the value a replicating broker manages (never past
    /// the durable end).
    #[must_use]
    pub fn high_watermark(&self) -> Offset {
        let durable = self.durable_end();
        self.managed_high_watermark
            .map_or(durable, |hw| hw.min(durable))
    }

    /// Lets a broker doing its own replication manage the high watermark.
    pub fn set_high_watermark(&mut self, high_watermark: Offset) {
        self.managed_high_watermark = Some(high_watermark);
    }

    /// Last stable offset.
    #[must_use]
    pub fn last_stable_offset(&self) -> Offset {
        self.psm.last_stable_offset(self.high_watermark())
    }

    /// Validates and appends `records` (one or more batches). The data is durable after the
    /// next [`PartitionLog::commit`].
    ///
    /// # Errors
    /// Any validation failure (nothing written), or an I/O failure (which poisons the log unless
    /// it is `DiskFull`).
    pub fn append(
        &mut self,
        io: &mut dyn Io,
        records: &[u8],
        origin: Origin,
    ) -> Result<AppendOutcome, LogError> {
        self.check()?;
        match (&self.mode, origin) {
            (Mode::Local, Origin::Mirror)
            | (Mode::Paused { .. } | Mode::Failed { .. }, Origin::Mirror) => {
                return Err(LogError::NotMirroring {
                    mode: self.mode.clone(),
                })
            }
            (
                Mode::Mirroring { .. } | Mode::Paused { .. } | Mode::Failed { .. },
                Origin::Client | Origin::Coordinator,
            ) => {
                return Err(LogError::ReadOnlyPartition {
                    mode: self.mode.clone(),
                })
            }
            _ => {}
        }
        let limit = self
            .active
            .buffer_capacity()
            .min(self.config.segment.segment_bytes as usize);
        if records.len() > limit {
            return Err(LogError::AppendTooLarge {
                bytes: records.len(),
                limit,
            });
        }
        let assigns = matches!(origin, Origin::Client | Origin::Coordinator);
        let log_end = self.log_end();
        let mut next = log_end;
        let mut infos = std::mem::take(&mut self.infos);
        let mut extents = std::mem::take(&mut self.extents);
        infos.clear();
        extents.clear();
        let validated = (|| -> Result<(), LogError> {
            let mut scan = BatchIter::new(records, 0);
            for view in scan.by_ref() {
                if origin == Origin::Client {
                    view.validate_client()?;
                }
                let stored = view.header().base_offset;
                let base = if assigns {
                    next
                } else if infos.is_empty() && stored != log_end {
                    return Err(LogError::NotAtLogEnd {
                        expected: log_end,
                        got: stored,
                    });
                } else if stored < next {
                    return Err(LogError::OffsetsNotIncreasing {
                        previous_last: Offset(next.0 - 1),
                        got: stored,
                    });
                } else {
                    stored
                };
                let info = BatchInfo::from_view(&view, base);
                next = Offset(info.last_offset.0 + 1);
                infos.push(info);
                extents.push(Extent {
                    start: view.position() as usize,
                    len: view.bytes().len(),
                    max_timestamp: view.header().max_timestamp,
                    leader_epoch: view.header().partition_leader_epoch,
                });
            }
            match scan.end() {
                Some(ScanEnd::Clean) => {}
                Some(ScanEnd::Corrupt(e)) => return Err(e.clone().into()),
                Some(ScanEnd::Incomplete {
                    position,
                    needed_bytes,
                    available_bytes,
                }) => {
                    return Err(FormatError::Incomplete {
                        position: *position,
                        needed_bytes: *needed_bytes,
                        available_bytes: *available_bytes,
                    }
                    .into())
                }
                Some(ScanEnd::ZeroFilled { position }) => {
                    return Err(FormatError::Incomplete {
                        position: *position,
                        needed_bytes: format::BATCH_HEADER_SIZE_BYTES as u64,
                        available_bytes: 0,
                    }
                    .into())
                }
                None => {}
            }
            if infos.is_empty() {
                return Err(LogError::EmptyAppend);
            }
            Ok(())
        })();
        // A mirrored batch that is corrupt or does not continue the log stops mirroring of
        // this partition only: it goes Failed with the reason.
        if origin == Origin::Mirror {
            if let Err(e) = &validated {
                self.mode = Mode::Failed {
                    reason: e.to_string(),
                };
                if let Err(io_error) = self.write_mode(io) {
                    self.infos = infos;
                    self.extents = extents;
                    return Err(io_error);
                }
            }
        }
        let result =
            validated.and_then(|()| self.write_validated(io, records, origin, &infos, &extents));
        self.infos = infos;
        self.extents = extents;
        result
    }

    /// The partition's mode.
    #[must_use]
    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    /// The mode history (the barrier rule's ranges).
    #[must_use]
    pub fn mode_history(&self) -> &ModeHistory {
        &self.history
    }

    /// Persists Paused / Failed (or removes the file for Local / Mirroring).
    fn write_mode(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let text = match &self.mode {
            Mode::Paused { .. } => "paused\n".to_string(),
            Mode::Failed { reason } => format!("failed\n{reason}"),
            Mode::Local | Mode::Mirroring { .. } => {
                return unlink_if_present(io, self.dir.join(MIRROR_MODE_FILE))
                    .map_err(|e| self.poison(classify(e)));
            }
        };
        io::write_file_atomically(io, &self.dir, MIRROR_MODE_FILE, text.as_bytes())
            .map_err(|e| self.poison(classify(e)))
    }

    fn write_history(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let text = self.history.encode();
        io::write_file_atomically(io, &self.dir, MIRROR_CHECKPOINT, text.as_bytes())
            .map_err(|e| self.poison(classify(e)))
    }

    /// Starts mirroring from `source` (initial mirroring or failback): truncates to `start`,
    /// records `(log end, mirror <source>)` durably, and accepts Mirror appends from the log end
    /// on. From Local or Failed.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`], [`LogError::UnknownEpoch`], or the truncation's errors.
    pub fn start_mirroring(
        &mut self,
        io: &mut dyn Io,
        source: &str,
        start: MirrorStart,
    ) -> Result<Offset, LogError> {
        self.check()?;
        if !matches!(self.mode, Mode::Local | Mode::Failed { .. }) {
            return Err(LogError::ModeTransition {
                what: "start mirroring",
                mode: self.mode.clone(),
            });
        }
        self.commit(io)?;
        let to = match start {
            MirrorStart::LastStableOffset => self.last_stable_offset(),
            MirrorStart::Offset(o) => o,
            MirrorStart::EpochEnd(e) => {
                self.epoch_end_offset(e).ok_or(LogError::UnknownEpoch(e))?
            }
        };
        if to < self.log_end() {
            self.truncate_to(io, to)?;
        }
        let end = self.log_end();
        self.history
            .record(end, RangeKind::Mirror(source.to_string()));
        self.write_history(io)?;
        self.mode = Mode::Mirroring {
            source: source.to_string(),
        };
        self.write_mode(io)?;
        Ok(end)
    }

    /// Suspends mirroring (no Mirror appends until resumed).
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] unless Mirroring.
    pub fn pause_mirroring(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        match &self.mode {
            Mode::Mirroring { source } => {
                self.mode = Mode::Paused {
                    source: source.clone(),
                };
                self.write_mode(io)
            }
            other => Err(LogError::ModeTransition {
                what: "pause mirroring",
                mode: other.clone(),
            }),
        }
    }

    /// Resumes a paused mirror.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] unless Paused.
    pub fn resume_mirroring(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        match &self.mode {
            Mode::Paused { source } => {
                self.mode = Mode::Mirroring {
                    source: source.clone(),
                };
                self.write_mode(io)
            }
            other => Err(LogError::ModeTransition {
                what: "resume mirroring",
                mode: other.clone(),
            }),
        }
    }

    /// Stops mirroring (failover), in SPEC §3's order, durable before it returns: the log end
    /// becomes `last_mirrored_offset`; `leader_epoch` is stamped from here on; open
    /// transactions get ABORT markers (or the log is truncated to the LSO); the history gets
    /// `(first offset written here, local)`; the barrier is appended and clears the producer
    /// state. From Mirroring, Paused or Failed.
    ///
    /// # Errors
    /// [`LogError::ModeTransition`] from Local, or an I/O failure (the partition is then not
    /// acknowledged as stopped; a retry completes it).
    pub fn stop_mirroring(
        &mut self,
        io: &mut dyn Io,
        leader_epoch: i32,
        open: OpenTransactions,
        now_ms: i64,
    ) -> Result<StopOutcome, LogError> {
        self.check()?;
        if self.mode == Mode::Local {
            return Err(LogError::ModeTransition {
                what: "stop mirroring",
                mode: self.mode.clone(),
            });
        }
        self.commit(io)?;
        let last_mirrored_offset = self.log_end();
        self.set_leader_epoch(leader_epoch);
        if open == OpenTransactions::TruncateToLso {
            let lso = self.last_stable_offset();
            if lso < self.log_end() {
                self.truncate_to(io, lso)?;
            }
        }
        let first_local = self.log_end();
        let history_before = self.history.clone();
        self.history.record(first_local, RangeKind::Local);
        let previous = std::mem::replace(&mut self.mode, Mode::Local);
        let written = (|| -> Result<(Vec<i64>, Offset), LogError> {
            let mut open_txns: Vec<(i64, i16, i32)> = self
                .psm
                .producers()
                .filter(|e| e.current_txn_first_offset.is_some())
                .map(|e| (e.producer_id, e.epoch, e.coordinator_epoch))
                .collect();
            open_txns.sort_unstable();
            let mut aborted = Vec::with_capacity(open_txns.len());
            // One append for all markers: one validation pass, one copy.
            let mut markers = Vec::with_capacity(open_txns.len() * 80);
            for &(producer_id, producer_epoch, coordinator_epoch) in &open_txns {
                markers.extend_from_slice(&format::build_marker(&format::MarkerSpec {
                    base_offset: Offset(0),
                    partition_leader_epoch: leader_epoch,
                    producer_id,
                    producer_epoch,
                    commit: false,
                    coordinator_epoch: coordinator_epoch.max(0),
                    timestamp: now_ms,
                }));
                aborted.push(producer_id);
            }
            if !markers.is_empty() {
                self.append(io, &markers, Origin::Coordinator)?;
            }
            let barrier = format::build_barrier(&format::BarrierSpec {
                base_offset: Offset(0),
                partition_leader_epoch: leader_epoch,
                timestamp: now_ms,
            });
            let at = self.append(io, &barrier, Origin::Coordinator)?.first_offset;
            self.commit(io)?;
            Ok((aborted, at))
        })();
        match written {
            Ok((aborted_producers, barrier_offset)) => {
                // The history last: a crash before it leaves a Mirroring partition with a
                // barrier in a mirrored range (it clears nothing); the retried stop completes.
                self.write_history(io)?;
                self.write_mode(io)?;
                Ok(StopOutcome {
                    last_mirrored_offset,
                    aborted_producers,
                    barrier_offset,
                })
            }
            Err(e) => {
                self.mode = previous;
                self.history = history_before;
                Err(e)
            }
        }
    }

    /// The kind of range the current mode writes.
    fn current_kind(&self) -> RangeKind {
        match &self.mode {
            Mode::Local => RangeKind::Local,
            Mode::Mirroring { source } | Mode::Paused { source } => {
                RangeKind::Mirror(source.clone())
            }
            Mode::Failed { .. } => self.history.last_kind(),
        }
    }

    fn write_validated(
        &mut self,
        io: &mut dyn Io,
        records: &[u8],
        origin: Origin,
        infos: &[BatchInfo],
        extents: &[Extent],
    ) -> Result<AppendOutcome, LogError> {
        let history = &self.history;
        let staged = self.psm.stage(infos, origin, |o| history.is_local(o))?;
        if let Some(original) = staged.duplicate {
            return Ok(AppendOutcome {
                first_offset: original.first_offset(),
                last_offset: original.last_offset,
                duplicate: true,
            });
        }
        let size = records.len() as u64;
        if self.needs_roll(size, infos, extents) {
            self.roll(io)?;
        }
        if (self.active.buffer_room() as u64) < size {
            self.commit(io)?;
        }
        let stamp = matches!(origin, Origin::Client | Origin::Coordinator);
        let mut epochs_changed = false;
        for (info, e) in infos.iter().zip(extents) {
            // Checked once during validation; not again here (the CRC is the cost).
            let result = self.active.append_stamped(
                &records[e.start..e.start + e.len],
                stamp.then_some((info.base_offset, self.leader_epoch)),
                info.last_offset,
                e.max_timestamp,
            );
            if let Err(e) = result {
                return Err(self.poison(classify(e)));
            }
            let epoch = if stamp {
                self.leader_epoch
            } else {
                e.leader_epoch
            };
            epochs_changed |= self.epochs.assign(epoch, info.base_offset);
        }
        if epochs_changed {
            // The batches are in the append buffer already: a failure now must not turn the
            // append into an error the caller would retry (found by the injected-ENOSPC
            // tests: the batch stayed, the producer state missed it). The checkpoint is
            // derived from the batches; on ENOSPC it is written by the next epoch change or
            // `close`, and recovery rebuilds it. Any other failure has poisoned the log.
            match self.write_epoch_checkpoint(io) {
                Ok(()) | Err(LogError::DiskFull) => {}
                Err(e) => return Err(e),
            }
        }
        let completed = self.psm.apply(staged)?;
        self.aborted.extend(
            completed
                .iter()
                .filter_map(crate::producer_state::CompletedTxn::aborted_entry),
        );
        Ok(AppendOutcome {
            first_offset: infos[0].base_offset,
            last_offset: infos[infos.len() - 1].last_offset,
            duplicate: false,
        })
    }

    /// Kafka's roll conditions for an append of `size` bytes: the segment would exceed
    /// `segment.bytes`; a batch is `segment.ms` newer than the segment's first; the offset
    /// index is full; or an offset would not fit the index's 32-bit relative offset.
    fn needs_roll(&self, size: u64, infos: &[BatchInfo], extents: &[Extent]) -> bool {
        let active = &self.active;
        if active.data_len() == 0 {
            return false;
        }
        let full = active.data_len() + size > self.config.segment.segment_bytes;
        let aged = match (
            self.config.segment_ms,
            active.indexes().first_batch_timestamp(),
        ) {
            (Some(ms), Some(first)) => extents
                .iter()
                .any(|e| e.max_timestamp.saturating_sub(first) > ms),
            _ => false,
        };
        let index_bytes = self
            .config
            .segment_index_bytes
            .unwrap_or(SEGMENT_INDEX_BYTES_DEFAULT);
        let index_full = (active.indexes().offset_entries().len() as u64 + 1) * 8 > index_bytes;
        let relative_overflow = infos
            .last()
            .is_some_and(|i| i.last_offset.0 - active.base_offset().0 > i64::from(i32::MAX));
        full || aged || index_full || relative_overflow
    }

    /// Makes everything appended durable (one commit round) and returns the durable end.
    ///
    /// # Errors
    /// An I/O failure, which poisons the log.
    pub fn commit(&mut self, io: &mut dyn Io) -> Result<Offset, LogError> {
        self.check()?;
        match self.active.commit(io) {
            Ok(durable) => Ok(durable.next_offset),
            // A failed round (ENOSPC included: a write into preallocated pages can still meet
            // it, e.g. on thin-provisioned storage) leaves its pages' state unknown: poison.
            Err(e) => Err(self.poison_always(classify(e))),
        }
    }

    /// The leader-epoch cache.
    #[must_use]
    pub fn epoch_cache(&self) -> &EpochCache {
        &self.epochs
    }

    /// End offset of leader epoch `epoch` (for `start_mirroring(EpochEnd(e))`).
    #[must_use]
    pub fn epoch_end_offset(&self, epoch: i32) -> Option<Offset> {
        self.epochs.end_offset(epoch, self.log_end())
    }

    fn write_epoch_checkpoint(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let text = self.epochs.encode();
        io::write_file_atomically(io, &self.dir, LEADER_EPOCH_CHECKPOINT, text.as_bytes())
            .map_err(|e| self.poison(classify(e)))
    }

    /// Total bytes of the log (sealed segments plus the active one's appended data).
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.sealed.iter().map(|s| s.meta.data_len).sum::<u64>() + self.active.data_len()
    }

    /// Advances the log start to `before` (Kafka's DeleteRecords): reads below it fail, and
    /// sealed segments wholly below it are deleted. Returns the new log start.
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`] beyond the high watermark, or an I/O failure.
    pub fn delete_records(&mut self, io: &mut dyn Io, before: Offset) -> Result<Offset, LogError> {
        self.check()?;
        if before > self.high_watermark() {
            return Err(LogError::OffsetOutOfRange {
                offset: before,
                log_start: self.log_start,
                log_end: self.high_watermark(),
            });
        }
        if before <= self.log_start {
            return Ok(self.log_start);
        }
        // Durable before anything is deleted or acknowledged: a restart must not bring the
        // deleted records back.
        io::write_file_atomically(
            io,
            &self.dir,
            LOG_START_CHECKPOINT,
            format!("{}\n", before.0).as_bytes(),
        )
        .map_err(|e| self.poison(classify(e)))?;
        self.log_start = before;
        while self
            .sealed
            .first()
            .is_some_and(|s| s.meta.next_offset <= before)
        {
            self.delete_oldest_segment(io)?;
        }
        if self.epochs.truncate_from_start(before) {
            self.write_epoch_checkpoint(io)?;
        }
        Ok(self.log_start)
    }

    /// Deletes the oldest sealed segments beyond `retention.bytes`, and those whose newest
    /// record is older than `retention.ms` before `now_ms`; the active segment always stays.
    /// Returns how many segments were deleted.
    ///
    /// # Errors
    /// An I/O failure.
    pub fn enforce_retention(&mut self, io: &mut dyn Io, now_ms: i64) -> Result<usize, LogError> {
        self.check()?;
        let mut deleted = 0;
        while let Some(oldest) = self.sealed.first() {
            let over_size = self
                .config
                .retention_bytes
                .is_some_and(|limit| self.size_bytes() - oldest.meta.data_len >= limit);
            let expired = self
                .config
                .retention_ms
                .is_some_and(|ms| oldest.meta.indexes.max_timestamp() < now_ms.saturating_sub(ms));
            if !(over_size || expired) {
                break;
            }
            let next = oldest.meta.next_offset;
            self.delete_oldest_segment(io)?;
            self.log_start = self.log_start.max(next);
            deleted += 1;
        }
        if deleted > 0 && self.epochs.truncate_from_start(self.log_start) {
            self.write_epoch_checkpoint(io)?;
        }
        Ok(deleted)
    }

    fn delete_oldest_segment(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        let segment = self.sealed.remove(0);
        let base = segment.meta.base_offset;
        let mut others = Vec::new();
        let result = io::run(io, Op::Close { file: segment.file }, &mut others)
            .and_then(|c| c.result)
            .and_then(|_| {
                for path in segment::file_paths(&self.dir, base) {
                    io::run(io, Op::Unlink { path }, &mut others)?.result?;
                }
                Ok(())
            });
        result.map_err(|e| self.poison(classify(e)))?;
        self.aborted
            .retain(|a| a.last_offset >= segment.meta.next_offset);
        Ok(())
    }

    /// Truncates the log so that it ends before `offset`: the batch holding `offset` and
    /// everything after it go (Kafka's `truncateTo`; the new end is that batch's base offset).
    /// Later segments are deleted, the segment holding the cut becomes the active one again, the
    /// producer state is rebuilt from the newest snapshot at or below the new end plus a replay,
    /// and the epoch cache and aborted-transaction list are cut. Returns the new log end.
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`] below the log start, or an I/O failure.
    pub fn truncate_to(&mut self, io: &mut dyn Io, offset: Offset) -> Result<Offset, LogError> {
        self.check()?;
        if offset >= self.log_end() {
            return Ok(self.log_end());
        }
        if offset < self.log_start {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        self.commit(io)?;
        let bases_before = self.segment_base_offsets();
        // The segment holding the cut and the cut's position in it.
        let in_active = offset >= self.active.base_offset();
        let (index, base) = if in_active {
            (self.sealed.len(), self.active.base_offset())
        } else {
            let i = self
                .sealed
                .iter()
                .rposition(|s| s.meta.base_offset <= offset)
                .unwrap_or(0);
            (i, self.sealed[i].meta.base_offset)
        };
        let bytes = if in_active {
            self.active
                .read_durable(io, 0, self.active.durable().data_len as usize)?
        } else {
            read_direct(
                io,
                self.sealed[index].file,
                0,
                self.sealed[index].meta.data_len as usize,
            )?
        };
        let (cut_position, new_end) = BatchIter::new(&bytes, 0)
            .find(|b| b.header().last_offset() >= offset)
            .map_or((bytes.len() as u64, offset), |b| {
                (b.position(), b.header().base_offset)
            });
        // Snapshots past the new end describe records about to go: delete them first, so that
        // no crash leaves one to be loaded over the records appended after the truncation.
        for b in self
            .snapshot_offsets(io)?
            .into_iter()
            .filter(|&b| b > new_end)
        {
            unlink_if_present(io, self.dir.join(snapshot_file_name(b)))
                .map_err(|e| self.poison(classify(e)))?;
        }
        let sequence = self.active.sequence();
        if in_active {
            self.active
                .truncate(io, cut_position, new_end)
                .map_err(|e| self.poison(classify(e)))?;
        } else {
            // Reopen the holding segment first (its cut is durable before anything is deleted),
            // then delete everything after it; the intent covers a crash in between.
            write_intent(io, &self.dir, base, cut_position).map_err(|e| self.poison(e))?;
            let reopened = SegmentWriter::reopen(
                io,
                &self.dir,
                base,
                self.config.segment,
                sequence,
                cut_position,
                new_end,
            )
            .map_err(|e| self.poison(classify(e)))?;
            let old_active = std::mem::replace(&mut self.active, reopened);
            let old_base = old_active.base_offset();
            old_active.close(io).map_err(|e| self.poison(classify(e)))?;
            self.delete_segment_files(io, old_base)?;
            while self.sealed.len() > index {
                let Some(s) = self.sealed.pop() else { break };
                let mut others = Vec::new();
                io::run(io, Op::Close { file: s.file }, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| self.poison(classify(e)))?;
                if s.meta.base_offset != base {
                    self.delete_segment_files(io, s.meta.base_offset)?;
                }
            }
            clear_intent(io, &self.dir).map_err(|e| self.poison(e))?;
        }
        if self.epochs.truncate_from_end(new_end) {
            self.write_epoch_checkpoint(io)?;
        }
        // The mode history loses the cut ranges; the mode itself does not change.
        let kind = self.current_kind();
        if self.history.truncate(new_end, kind) {
            self.write_history(io)?;
        }
        let mut snapshots = bases_before;
        snapshots.extend(self.snapshot_offsets(io)?);
        self.rebuild_producer_state(io, new_end, &snapshots)?;
        Ok(new_end)
    }

    /// The `.txnindex` of a sealed segment: the aborted transactions whose ABORT marker it
    /// holds.
    fn txn_index_bytes(&self, sealed: &SealedSegment) -> Vec<u8> {
        self.aborted
            .iter()
            .filter(|a| a.last_offset >= sealed.base_offset && a.last_offset < sealed.next_offset)
            .flat_map(|a| a.encode())
            .collect()
    }

    /// Offsets of the snapshot files in the directory.
    fn snapshot_offsets(&self, io: &mut dyn Io) -> Result<Vec<Offset>, LogError> {
        let names = io
            .list_dir(&self.dir)
            .map_err(|e| LogError::Segment(e.into()))?;
        Ok(names
            .iter()
            .filter_map(|n| n.strip_suffix(".snapshot"))
            .filter_map(|n| n.parse::<i64>().ok())
            .map(Offset)
            .collect())
    }

    fn delete_segment_files(&mut self, io: &mut dyn Io, base: Offset) -> Result<(), LogError> {
        for path in segment::file_paths(&self.dir, base) {
            unlink_if_present(io, path).map_err(|e| self.poison(classify(e)))?;
        }
        Ok(())
    }

    /// Reloads the producer state for a log that now ends at `end`: the newest snapshot at or
    /// below it (newer ones are deleted), then every batch from there replayed with the copy
    /// rules (no sequence checks), as recovery does.
    ///
    /// Snapshots are named by the segment bases they were written at (`bases`, taken before the
    /// truncation). The log has no clock yet, so no producer expires on this load.
    fn rebuild_producer_state(
        &mut self,
        io: &mut dyn Io,
        end: Offset,
        bases: &[Offset],
    ) -> Result<(), LogError> {
        let snapshot_bases: Vec<Offset> =
            bases.iter().copied().filter(|&b| b > Offset(0)).collect();
        let mut loaded_at = self.segment_base_offsets()[0];
        self.psm = ProducerStateManager::new(self.config.producer);
        for &b in snapshot_bases.iter().rev() {
            if b > end {
                continue;
            }
            if let Ok(bytes) = io::read_file(io, &self.dir.join(snapshot_file_name(b))) {
                // A snapshot that does not load is skipped: the replay covers its range.
                if self.psm.load_snapshot(&bytes, i64::MIN / 2).is_ok() {
                    loaded_at = b;
                    break;
                }
            }
        }
        // Snapshots past the new end describe data that no longer exists.
        let mut others = Vec::new();
        for b in snapshot_bases.into_iter().filter(|&b| b > end) {
            let _ = io::run(
                io,
                Op::Unlink {
                    path: self.dir.join(snapshot_file_name(b)),
                },
                &mut others,
            );
        }
        self.aborted.retain(|a| a.last_offset < loaded_at);
        // Replay [loaded_at, end).
        let mut segments: Vec<(Offset, Option<FileId>, u64)> = self
            .sealed
            .iter()
            .map(|s| (s.meta.base_offset, Some(s.file), s.meta.data_len))
            .collect();
        segments.push((
            self.active.base_offset(),
            None,
            self.active.durable().data_len,
        ));
        for (i, &(base, file, len)) in segments.iter().enumerate() {
            let next_base = segments.get(i + 1).map_or(Offset(i64::MAX), |s| s.0);
            if next_base <= loaded_at {
                continue;
            }
            let bytes = match file {
                Some(f) => read_direct(io, f, 0, len as usize)?,
                None => self.active.read_durable(io, 0, len as usize)?,
            };
            let _ = base;
            for b in BatchIter::new(&bytes, 0) {
                if b.header().base_offset < loaded_at || b.header().base_offset >= end {
                    continue;
                }
                let info = BatchInfo::from_view(&b, b.header().base_offset);
                let history = &self.history;
                let staged = self
                    .psm
                    .stage(&[info], Origin::Replication, |o| history.is_local(o))?;
                let completed = self.psm.apply(staged)?;
                self.aborted.extend(
                    completed
                        .iter()
                        .filter_map(crate::producer_state::CompletedTxn::aborted_entry),
                );
            }
        }
        Ok(())
    }

    /// Starts a commit round for everything appended so far without waiting (a shard overlaps
    /// the next appends with the round's I/O). Returns `false` if a round is in flight or there
    /// is nothing new.
    ///
    /// # Errors
    /// A submission failure, which poisons the log.
    pub fn start_commit(&mut self, io: &mut dyn Io) -> Result<bool, LogError> {
        self.check()?;
        self.active
            .start_commit(io)
            .map_err(|e| self.poison_always(classify(e)))
    }

    /// Whether a commit round is in flight.
    #[must_use]
    pub fn round_in_flight(&self) -> bool {
        self.active.round_in_flight()
    }

    /// The operations of the commit round in flight, for routing completions when several
    /// partitions share one `Io`.
    #[must_use]
    pub fn round_ops(&self) -> &[io::OpId] {
        self.active.round_ops()
    }

    /// Feeds a completion of this log's round; returns the new durable end when the round
    /// finished.
    ///
    /// # Errors
    /// The operation's failure, which poisons the log.
    pub fn on_completion(
        &mut self,
        completion: io::Completion,
    ) -> Result<Option<Offset>, LogError> {
        match self.active.on_completion(completion) {
            Ok(durable) => Ok(durable.map(|d| d.next_offset)),
            Err(e) => Err(self.poison_always(classify(e))),
        }
    }

    /// Seals the active segment, snapshots the producer state and starts a new segment.
    ///
    /// # Errors
    /// An I/O failure.
    pub fn roll(&mut self, io: &mut dyn Io) -> Result<(), LogError> {
        self.check()?;
        if self.active.data_len() == 0 {
            // An empty segment stays: a new one would start at the same offset (found by the
            // log model test: two segments with one file name).
            return Ok(());
        }
        let next = self.log_end();
        let span = tracing::info_span!("roll", dir = %self.dir.display(), next = next.0);
        let _enter = span.enter();
        let sequence = self.active.sequence();
        let fresh = match SegmentWriter::create(io, &self.dir, next, self.config.segment, sequence)
        {
            Ok(w) => w,
            Err(e) => return Err(self.poison(classify(e))),
        };
        let old = std::mem::replace(&mut self.active, fresh);
        // From here the roll cannot be undone. Sealing and reopening the old segment need no
        // new space (a write into preallocated pages, a truncate, an open of an existing
        // file): any failure there poisons, ENOSPC included.
        let sealed = match old.seal(io) {
            Ok(s) => s,
            Err(e) => return Err(self.poison_always(classify(e))),
        };
        let file = match segment::open_for_reads(io, &self.dir, sealed.base_offset) {
            Ok(f) => f,
            Err(e) => return Err(self.poison_always(classify(e))),
        };
        // The files derived from the sealed segment are new files: on ENOSPC the segment
        // still joins the log (its data whole and readable), and the next open rebuilds them
        // (found by the injected-ENOSPC tests: the sealed data used to vanish from reads).
        let txn_entries = self.txn_index_bytes(&sealed);
        let snapshot = self.psm.snapshot();
        let derived = sealed
            .write_indexes(io, &self.dir)
            .map_err(classify)
            .and_then(|()| {
                io::write_file(
                    io,
                    &segment::txn_index_path(&self.dir, sealed.base_offset),
                    &txn_entries,
                )
                .and_then(|()| {
                    io::write_file_atomically(io, &self.dir, &snapshot_file_name(next), &snapshot)
                })
                .map_err(classify)
            });
        self.sealed.push(Sealed { meta: sealed, file });
        if let Err(e) = derived {
            self.derived_incomplete = true;
            return Err(self.poison(e));
        }
        Ok(())
    }

    /// Poisons the log with `error` even when it is `DiskFull`: for a step that cannot be
    /// undone, where no retry could succeed.
    fn poison_always(&mut self, error: LogError) -> LogError {
        if self.poisoned.is_none() {
            self.poisoned = Some(error.clone());
        }
        error
    }

    /// Reads whole batches from `offset` (at least one batch, then up to `max_bytes`), never
    /// past the high watermark (or the LSO at `ReadCommitted`).
    ///
    /// # Errors
    /// [`LogError::OffsetOutOfRange`], or an I/O failure.
    pub fn read(
        &mut self,
        io: &mut dyn Io,
        offset: Offset,
        max_bytes: usize,
        isolation: Isolation,
    ) -> Result<ReadResult, LogError> {
        let high_watermark = self.high_watermark();
        let last_stable_offset = self.last_stable_offset();
        let upper = match isolation {
            Isolation::ReadUncommitted => high_watermark,
            Isolation::ReadCommitted => last_stable_offset,
        };
        if offset < self.log_start || offset > self.log_end() {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start,
                log_end: self.log_end(),
            });
        }
        let mut result = ReadResult {
            records: Vec::new(),
            high_watermark,
            last_stable_offset,
            log_start_offset: self.log_start,
            aborted: Vec::new(),
        };
        if offset >= upper {
            return Ok(result);
        }
        // The segment holding `offset`: the last one starting at or before it.
        let sealed_index = self
            .sealed
            .iter()
            .rposition(|s| s.meta.base_offset <= offset);
        let in_active = offset >= self.active.base_offset();
        let (start, end) = match (in_active, sealed_index) {
            (true, _) | (false, None) => (
                self.active.indexes().lookup(offset),
                self.active.durable().data_len,
            ),
            (false, Some(i)) => (
                self.sealed[i].meta.indexes.lookup(offset),
                self.sealed[i].meta.data_len,
            ),
        };
        let mut position = u64::from(start);
        let chunk = max_bytes.max(64 << 10);
        'scan: while position < end {
            let want = chunk.min((end - position) as usize);
            let bytes = match (in_active, sealed_index) {
                (false, Some(i)) => read_direct(io, self.sealed[i].file, position, want)?,
                _ => self.active.read_durable(io, position, want)?,
            };
            let mut scan = BatchIter::new(&bytes, position);
            for b in scan.by_ref() {
                let h = b.header();
                if h.last_offset() < offset {
                    continue;
                }
                if h.last_offset() >= upper
                    || (!result.records.is_empty()
                        && result.records.len() + b.bytes().len() > max_bytes)
                {
                    break 'scan;
                }
                result.records.extend_from_slice(b.bytes());
            }
            match scan.end() {
                Some(ScanEnd::Incomplete { position: p, .. }) if *p > position => position = *p,
                Some(ScanEnd::Incomplete { needed_bytes, .. }) => {
                    // A batch larger than the chunk: read it whole next time.
                    let need = *needed_bytes as usize;
                    let bytes = match (in_active, sealed_index) {
                        (false, Some(i)) => read_direct(io, self.sealed[i].file, position, need)?,
                        _ => self.active.read_durable(io, position, need)?,
                    };
                    if bytes.len() < need {
                        break;
                    }
                    let b = format::inspect(&bytes, position)?;
                    if b.header().last_offset() >= offset {
                        if b.header().last_offset() >= upper {
                            break;
                        }
                        result.records.extend_from_slice(b.bytes());
                        if result.records.len() >= max_bytes {
                            break;
                        }
                    }
                    position += need as u64;
                }
                Some(ScanEnd::Corrupt(e)) => return Err(e.clone().into()),
                _ => break,
            }
        }
        if isolation == Isolation::ReadCommitted {
            let last = format::BatchIter::new(&result.records, 0)
                .last()
                .map_or(offset, |b| b.header().last_offset());
            result.aborted = self
                .aborted
                .iter()
                .filter(|a| a.last_offset >= offset && a.first_offset <= last)
                .copied()
                .collect();
        }
        Ok(result)
    }
}

/// `ENOSPC` anywhere is `DiskFull`; everything else keeps its layer's error.
fn classify(error: impl Into<SegmentError>) -> LogError {
    let error = error.into();
    match error {
        SegmentError::Io(IoError::NoSpace { .. }) => LogError::DiskFull,
        SegmentError::Poisoned(inner)
            if matches!(*inner, SegmentError::Io(IoError::NoSpace { .. })) =>
        {
            LogError::DiskFull
        }
        other => LogError::Segment(other),
    }
}

fn read_direct(
    io: &mut dyn Io,
    file: FileId,
    position: u64,
    len: usize,
) -> Result<Vec<u8>, LogError> {
    io::read_direct(io, file, position, len).map_err(classify)
}
