//! `mirrorlog verify` and `mirrorlog stat`: one read-only pass over a partition directory.
//!
//! The pass reads every segment as recovery would ([`super::segment_data`]), checks every
//! batch (size, magic, CRC, increasing and contiguous offsets), replays the producer state from
//! the first segment's snapshot (or empty) with the barrier rule of the mode history, and then
//! holds each derived file against what the batches say:
//! - after a clean close, `.index` / `.timeindex` of sealed segments equal the ones rebuilt
//!   from the batches, and `.txnindex` lists exactly the transactions aborted there (after an
//!   unclean stop these derived files may be stale — recovery rewrites them all — and are not
//!   held against the batches);
//! - each `N.snapshot` matches the replayed producer state at offset `N` for the producers it
//!   holds (expired producers may be missing from a snapshot, never different);
//! - the mode history decodes, lies within the log, and every switch from mirroring back to
//!   local has its barrier batch;
//! - the active segment's commit record names the offset after its last batch;
//! - below the cleaner's checkpoint (a compacted partition), each key appears once (the newest
//!   record survived), every record has a key, and `.txnindex` lists only aborts whose marker
//!   the segment holds (the cleaner drops those whose transaction's data is gone).
//!
//! Every problem names its file and, where there is one, the byte position.

use super::{file_kind, offset_in_name, FileKind};
use crate::api::{PartitionConfig, TopicPartition};
use crate::format::{BatchIter, BatchKind, Offset, ScanEnd};
use crate::log::{EpochCache, Mode, ModeHistory, RangeKind, LOG_START_CHECKPOINT};
use crate::producer_state::{
    decode_snapshot, decode_txn_index, AbortedTxn, BatchInfo, CompletedTxn, Origin, ProducerEntry,
    ProducerStateConfig, ProducerStateManager,
};
use crate::segment::SegmentIndexes;
use std::path::{Path, PathBuf};

/// One thing wrong, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// Byte position in the file, where the problem has one.
    pub position: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.position {
            Some(p) => write!(f, "{} at position {p}: {}", self.file.display(), self.what),
            None => write!(f, "{}: {}", self.file.display(), self.what),
        }
    }
}

/// What `stat` prints of a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStat {
    /// `topic-partition`.
    pub partition: String,
    /// Log start offset.
    pub log_start: Offset,
    /// Log end offset (after the last durable batch).
    pub log_end: Offset,
    /// High watermark: the durable end (what the engine serves when the embedding broker does
    /// not manage it).
    pub high_watermark: Offset,
    /// Last stable offset.
    pub last_stable: Offset,
    /// `local`, `mirroring from S`, `paused (S)`, `failed: why`.
    pub mode: String,
    /// Producers in the replayed state.
    pub producers: usize,
    /// Transactions open at the end.
    pub open_transactions: usize,
    /// Segment files.
    pub segments: usize,
    /// Durable batch bytes.
    pub bytes: u64,
    /// Whether the last close was clean.
    pub clean_shutdown: bool,
    /// `cleanup.policy`.
    pub cleanup_policy: String,
    /// The cleaner's checkpoint (the first offset not cleaned), if a pass ran.
    pub cleaner_checkpoint: Option<Offset>,
    /// For a compacted partition: the sealed bytes from the checkpoint on, in millionths of
    /// all sealed bytes (Kafka's dirty ratio, before the LSO and lag bounds).
    pub dirty_ratio_ppm: Option<u32>,
}

/// The pass's findings for one partition.
#[derive(Debug, Clone)]
pub struct PartitionReport {
    /// The figures.
    pub stat: PartitionStat,
    /// Everything wrong (empty: clean).
    pub problems: Vec<Problem>,
    /// Batches checked.
    pub batches: u64,
    /// The producer state a replay of the batches gives (from the first segment's snapshot).
    pub producers: Vec<ProducerEntry>,
}

/// Why a directory cannot be inspected at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataDirError {
    /// The path does not exist or cannot be listed.
    #[error("{}: {source}", .path.display())]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Neither a partition directory nor a directory of them.
    #[error("{}: not a mirrorlog data directory (no topic-partition directories with .log files)", .0.display())]
    NotADataDir(PathBuf),
}

fn listing(dir: &Path) -> Result<Vec<String>, DataDirError> {
    let unreadable = |source| DataDirError::Unreadable {
        path: dir.to_path_buf(),
        source,
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(unreadable)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

fn is_partition_dir(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| TopicPartition::from_dir_name(&n.to_string_lossy()))
        .is_some()
        && listing(dir).is_ok_and(|names| names.iter().any(|n| file_kind(n) == FileKind::Log))
}

/// The partition directories of `path`: itself when it is one, else its children that are.
///
/// # Errors
/// [`DataDirError`] when `path` cannot be listed or holds no partition.
pub fn partition_dirs(path: &Path) -> Result<Vec<PathBuf>, DataDirError> {
    if is_partition_dir(path) {
        return Ok(vec![path.to_path_buf()]);
    }
    let dirs: Vec<PathBuf> = listing(path)?
        .into_iter()
        .map(|n| path.join(n))
        .filter(|p| is_partition_dir(p))
        .collect();
    if dirs.is_empty() {
        return Err(DataDirError::NotADataDir(path.to_path_buf()));
    }
    Ok(dirs)
}

/// The pass over one partition directory. `progress` hears the bytes of each segment read.
///
/// # Errors
/// Only when the directory cannot be listed; unreadable or damaged files are problems.
pub fn inspect_partition(
    dir: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<PartitionReport, DataDirError> {
    let names = listing(dir)?;
    let mut problems = Vec::new();
    let mut problem = |file: &Path, position: Option<u64>, what: String| {
        problems.push(Problem {
            file: file.to_path_buf(),
            position,
            what,
        });
    };
    let read = |name: &str| std::fs::read(dir.join(name));
    let text = |name: &str| read(name).ok().and_then(|b| String::from_utf8(b).ok());

    let config = match text("partition.config").map(|t| PartitionConfig::decode(&t)) {
        Some(Ok(c)) => c,
        Some(Err(e)) => {
            problem(&dir.join("partition.config"), None, e.to_string());
            PartitionConfig::default()
        }
        None => PartitionConfig::default(),
    };
    let history = match text(crate::log::MIRROR_CHECKPOINT).map(|t| ModeHistory::decode(&t)) {
        Some(Ok(h)) => h,
        Some(Err(e)) => {
            problem(
                &dir.join(crate::log::MIRROR_CHECKPOINT),
                None,
                e.to_string(),
            );
            ModeHistory::default()
        }
        None => ModeHistory::default(),
    };
    let gaps = match text(crate::log::SEGMENT_GAPS).map(|t| crate::log::decode_gaps(&t)) {
        Some(Ok(g)) => g,
        Some(Err(e)) => {
            problem(&dir.join(crate::log::SEGMENT_GAPS), None, e);
            Vec::new()
        }
        None => Vec::new(),
    };
    let mut bases: Vec<Offset> = names
        .iter()
        .filter(|n| file_kind(n) == FileKind::Log)
        .filter_map(|n| offset_in_name(n))
        .collect();
    bases.sort();
    let snapshots: Vec<Offset> = names
        .iter()
        .filter(|n| file_kind(n) == FileKind::Snapshot)
        .filter_map(|n| offset_in_name(n))
        .collect();
    let file_name = |base: Offset, ext: &str| format!("{:020}.{ext}", base.0);

    // The replay starts from the snapshot named by the first segment (producers whose batches
    // are all in deleted segments live on there), or empty.
    let mut psm = ProducerStateManager::new(ProducerStateConfig::default());
    if let Some(&first) = bases.first() {
        if let Ok(bytes) = read(&file_name(first, "snapshot")) {
            let _ = psm.load_snapshot(&bytes, ProducerStateManager::LOAD_WITHOUT_EXPIRING_MS);
        }
    }
    let mut pending_snapshots: Vec<Offset> = snapshots.clone();
    pending_snapshots.sort();
    // Compaction: below the cleaner's checkpoint every segment was rewritten by a pass, and
    // each key is there at most once (its newest record). A snapshot describes the producers as
    // they were when it was written, before a pass removed batches below it (Kafka keeps only
    // each producer's last batch), so snapshots are not held against a replay of what the
    // cleaner left. What must hold is what recovery relies on: the newest snapshot plus the
    // batches after it give every producer the state a replay of the whole log gives
    // (epoch, coordinator epoch, last sequence and offset, open transaction; a batch the cleaner
    // rebuilt has the largest timestamp of the records it kept, as in Kafka).
    let cleaned_below = text(crate::log::CLEANER_OFFSET_CHECKPOINT)
        .and_then(|t| crate::log::decode_recovery_point(&t));
    if cleaned_below.is_some() {
        pending_snapshots.clear();
    }
    let newest_snapshot = cleaned_below.and_then(|_| {
        let last = *bases.last()?;
        (bases.len() > 1)
            .then(|| read(&file_name(last, "snapshot")).ok())
            .flatten()
            .map(|bytes| (last, bytes))
    });
    let mut from_newest: Option<ProducerStateManager> = None;
    let mut cleaned_keys: std::collections::HashMap<Vec<u8>, Offset> =
        std::collections::HashMap::new();
    // Records below the log start are not mapped by a pass (Kafka's map starts there too):
    // only those from it on are held to one per key.
    let mapped_from = text(LOG_START_CHECKPOINT)
        .and_then(|t| t.trim().parse::<i64>().ok())
        .map_or(Offset(0), Offset);
    // The first segment's snapshot started the replay; one below it is a leftover of deleted
    // segments (retention or delete-records cut short by a stop), which the next open removes.
    pending_snapshots.retain(|&s| bases.first().is_some_and(|&first| s > first));
    let mut next: Option<Offset> = None;
    let clean_shutdown = names
        .iter()
        .any(|n| file_kind(n) == FileKind::CleanShutdown);
    let mut batches = 0u64;
    let mut bytes_total = 0u64;
    // Where mirroring stopped (a Local range right after a Mirror one): from there on, only
    // ABORT/COMMIT markers may come before the barrier.
    let entries = history.entries();
    let mut stops: Vec<Offset> = entries
        .iter()
        .enumerate()
        .filter(|(k, (_, kind))| {
            *kind == RangeKind::Local
                && k.checked_sub(1)
                    .and_then(|j| entries.get(j))
                    .is_some_and(|(_, before)| matches!(before, RangeKind::Mirror(_)))
        })
        .map(|(_, (start, _))| *start)
        // Stops in deleted segments (retention, delete-records) have nothing left to check.
        .filter(|&start| bases.first().is_some_and(|&first| start >= first))
        .rev()
        .collect();
    let mut awaiting_barrier: Option<Offset> = None;
    let history_path = dir.join(crate::log::MIRROR_CHECKPOINT);
    let mut max_epoch: Option<i32> = None;

    for (i, &base) in bases.iter().enumerate() {
        let path = dir.join(file_name(base, "log"));
        if let Some((_, bytes)) = newest_snapshot.as_ref().filter(|(at, _)| *at == base) {
            let mut loaded = ProducerStateManager::new(ProducerStateConfig::default());
            match loaded.load_snapshot(bytes, ProducerStateManager::LOAD_WITHOUT_EXPIRING_MS) {
                Ok(_) => from_newest = Some(loaded),
                Err(e) => problem(&dir.join(file_name(base, "snapshot")), None, e.to_string()),
            }
        }
        let file = match std::fs::read(&path) {
            Ok(f) => f,
            Err(e) => {
                problem(&path, None, format!("cannot read: {e}"));
                continue;
            }
        };
        progress(file.len() as u64);
        let last = i + 1 == bases.len();
        let segment = super::segment_data_at(&path, &file, base);
        // A crash during a roll can leave the previous segment unsealed (recovery seals it);
        // after a clean close every segment but the last is sealed.
        if segment.record.is_some() && !last && clean_shutdown {
            problem(
                &path,
                None,
                "a segment before the last still has commit slots after a clean close".into(),
            );
        }
        if let Some(n) = next {
            if base > n && gaps.contains(&base) {
                // The log's own gap (a truncation into an offset gap, a relative-offset
                // overflow), recorded before the segment was created.
                next = Some(base);
            } else if base != n {
                problem(
                    &path,
                    None,
                    format!(
                        "segment base {} does not follow the previous segment's end {}",
                        base.0, n.0
                    ),
                );
            }
        }
        let mut indexes = SegmentIndexes::new(base, config.index_interval_bytes);
        let mut aborted: Vec<AbortedTxn> = Vec::new();
        let mut scan = BatchIter::new(&segment.data, 0);
        for b in scan.by_ref() {
            let h = *b.header();
            // Offsets increase; a gap is fine (a copied batch after compaction on the source).
            let expected = next.unwrap_or(base);
            if h.base_offset < expected {
                problem(
                    &path,
                    Some(b.position()),
                    format!(
                        "batch base offset {} below {}, the offset after the previous batch",
                        h.base_offset.0, expected.0
                    ),
                );
            }
            while let Some(&s) = pending_snapshots.first() {
                if s > h.base_offset {
                    break;
                }
                check_snapshot(dir, s, &psm, &mut problem);
                pending_snapshots.remove(0);
            }
            indexes.on_append(
                b.position() as u32,
                b.bytes().len() as u32,
                h.last_offset(),
                h.max_timestamp,
            );
            if stops.last().is_some_and(|&x| h.base_offset >= x) {
                awaiting_barrier = stops.pop();
            }
            if let Some(x) = awaiting_barrier {
                match b.kind() {
                    BatchKind::TxnMarker { .. } => {}
                    BatchKind::Barrier => awaiting_barrier = None,
                    _ => {
                        problem(&history_path, None, format!("mirroring stopped at offset {} but the batch at {} comes before any barrier", x.0, h.base_offset.0));
                        awaiting_barrier = None;
                    }
                }
            }
            if h.partition_leader_epoch >= 0 {
                max_epoch = max_epoch.max(Some(h.partition_leader_epoch));
            }
            if cleaned_below.is_some_and(|c| h.last_offset() < c) && !h.attributes.is_control() {
                check_cleaned_keys(&b, mapped_from, &mut cleaned_keys, &path, &mut problem);
            }
            let info = BatchInfo::from_view(&b, h.base_offset);
            if let Some(newest) = from_newest.as_mut() {
                if let Ok(staged) =
                    newest.stage(&[info], Origin::Replication, |o| history.is_local(o))
                {
                    let _ = newest.apply(staged);
                }
            }
            let applied = psm
                .stage(&[info], Origin::Replication, |o| history.is_local(o))
                .and_then(|staged| psm.apply(staged).map(<[CompletedTxn]>::to_vec));
            match applied {
                Ok(done) => aborted.extend(done.iter().filter_map(CompletedTxn::aborted_entry)),
                Err(e) => problem(
                    &path,
                    Some(b.position()),
                    format!(
                        "producer state refuses the batch at offset {}: {e}",
                        h.base_offset.0
                    ),
                ),
            }
            batches += 1;
            bytes_total += b.bytes().len() as u64;
            next = Some(Offset(h.last_offset().0.saturating_add(1)));
        }
        match scan.end() {
            Some(ScanEnd::Clean) | None => {}
            // Only a segment whose creation never finished is zeros from its start and as long as
            // its preallocation (recovery's `untouched`): it holds nothing. Zeros anywhere else, in a
            // sealed segment, are damage to acknowledged data, as recovery sees them too.
            Some(ScanEnd::ZeroFilled { position: 0 })
                if last
                    && segment.record.is_none()
                    && super::untouched(&file, config.segment_bytes) => {}
            Some(end) => problem(
                &path,
                Some(scan.valid_end_position()),
                format!("the batches stop: {end:?}"),
            ),
        }
        if next.is_none() {
            next = Some(base);
        }
        if let Some(r) = &segment.record {
            if Some(r.next_offset) != next {
                problem(&path, None, format!("commit record (sequence {}) says the next offset is {}, the batches end at {}", r.sequence, r.next_offset.0, next.map_or(base.0, |n| n.0)));
            }
        } else if clean_shutdown {
            // Sealed, after a clean close: its derived files must match the batches exactly.
            // (After an unclean stop they may be stale or half-written — a roll the stop cut
            // short — and recovery rewrites every one of them from the batches.)
            let index_path = dir.join(file_name(base, "index"));
            match std::fs::read(&index_path) {
                Ok(bytes) if bytes == indexes.encode_offset_index() => {}
                Ok(_) => problem(
                    &index_path,
                    None,
                    "differs from the index rebuilt from the batches".into(),
                ),
                Err(e) => problem(&index_path, None, format!("cannot read: {e}")),
            }
            let time_path = dir.join(file_name(base, "timeindex"));
            match std::fs::read(&time_path) {
                Ok(bytes) if bytes == indexes.encode_time_index() => {}
                Ok(_) => problem(
                    &time_path,
                    None,
                    "differs from the time index rebuilt from the batches".into(),
                ),
                Err(e) => problem(&time_path, None, format!("cannot read: {e}")),
            }
            let txn_path = dir.join(file_name(base, "txnindex"));
            let found =
                std::fs::read(&txn_path).map_or_else(|_| Ok(Vec::new()), |b| decode_txn_index(&b));
            match found {
                Ok(found) => {
                    let key = |t: &AbortedTxn| (t.producer_id, t.first_offset, t.last_offset);
                    let found: Vec<_> = found.iter().map(key).collect();
                    let want: Vec<_> = aborted.iter().map(key).collect();
                    // A cleaned segment lists the aborts whose transaction still had batches
                    // when the cleaner kept their marker: some of its markers, in order.
                    let cleaned = cleaned_below.is_some_and(|c| next.is_some_and(|n| n <= c));
                    let listed = if cleaned {
                        found.iter().all(|f| want.contains(f))
                    } else {
                        found == want
                    };
                    if !listed {
                        problem(
                            &txn_path,
                            None,
                            format!(
                                "lists {} aborted transactions; the batches abort {}",
                                found.len(),
                                want.len()
                            ),
                        );
                    }
                }
                Err(e) => problem(&txn_path, None, e.to_string()),
            }
        }
    }
    let log_end = next.unwrap_or(Offset(0));
    if let (Some(newest), Some((at, _))) = (&from_newest, &newest_snapshot) {
        let state = |e: &ProducerEntry| {
            let k = kept(e);
            (k.0, k.1, k.2, k.3, k.5)
        };
        for e in newest.producers() {
            let replayed = psm.get(e.producer_id);
            if replayed.as_ref().map(state) != Some(state(&e)) {
                problem(&dir.join(file_name(*at, "snapshot")), None, format!("producer {}: the newest snapshot and the batches after it give {:?}, a replay of the compacted log gives {:?} (epoch, coordinator epoch, last sequence, last offset, open transaction)", e.producer_id, state(&e), replayed.as_ref().map(state)));
            }
        }
    }
    for s in pending_snapshots {
        if s > log_end {
            problem(
                &dir.join(file_name(s, "snapshot")),
                None,
                format!("snapshot at {} is past the log end {}", s.0, log_end.0),
            );
        } else {
            check_snapshot(dir, s, &psm, &mut problem);
        }
    }

    // The mode history lies within the log, and the last stop has its barrier.
    for (start, _) in entries {
        if *start > log_end {
            problem(
                &history_path,
                None,
                format!(
                    "range starting at {} is past the log end {}",
                    start.0, log_end.0
                ),
            );
        }
    }
    if let Some(x) = awaiting_barrier.filter(|&x| x < log_end) {
        problem(
            &history_path,
            None,
            format!(
                "mirroring stopped at offset {} but no barrier batch follows",
                x.0
            ),
        );
    }
    let log_start = {
        let first = bases.first().copied().unwrap_or(Offset(0));
        match text(LOG_START_CHECKPOINT).map(|t| t.trim().parse::<i64>()) {
            Some(Ok(o)) if Offset(o) >= first && Offset(o) <= log_end => Offset(o),
            Some(_) => {
                problem(
                    &dir.join(LOG_START_CHECKPOINT),
                    None,
                    format!("not an offset in [{}, {}]", first.0, log_end.0),
                );
                first
            }
            None => first,
        }
    };
    if let Some(t) = text("leader-epoch-checkpoint") {
        match EpochCache::decode(&t) {
            Ok(cache) => {
                if let Some(&(epoch, start)) = cache.entries().iter().find(|(_, s)| *s > log_end) {
                    problem(
                        &dir.join("leader-epoch-checkpoint"),
                        None,
                        format!(
                            "epoch {epoch} starts at {} past the log end {}",
                            start.0, log_end.0
                        ),
                    );
                }
                if let (Some(latest), Some(seen)) = (cache.latest_epoch(), max_epoch) {
                    if latest < seen {
                        problem(&dir.join("leader-epoch-checkpoint"), None, format!("latest epoch {latest} is older than epoch {seen} found in the batches"));
                    }
                }
            }
            Err(e) => problem(&dir.join("leader-epoch-checkpoint"), None, e.to_string()),
        }
    }

    let mode = match crate::log::mode_from_files(
        &history,
        text(crate::log::MIRROR_MODE_FILE).as_deref(),
    ) {
        Mode::Local => "local".to_string(),
        Mode::Mirroring { source } => format!("mirroring from {source}"),
        Mode::Paused { source } => format!("paused (from {source})"),
        Mode::Failed { reason } => format!("failed: {reason}"),
    };
    let sealed_bytes: Vec<(Offset, u64)> = bases
        .iter()
        .take(bases.len().saturating_sub(1))
        .map(|&b| {
            let len = std::fs::metadata(dir.join(file_name(b, "log"))).map_or(0, |m| m.len());
            (b, len)
        })
        .collect();
    let dirty_ratio_ppm = config.compaction.policy.compact.then(|| {
        let total: u64 = sealed_bytes.iter().map(|(_, l)| l).sum();
        let next_bases: Vec<Offset> = bases.iter().skip(1).copied().collect();
        let dirty: u64 = sealed_bytes
            .iter()
            .zip(next_bases)
            .filter(|(_, end)| cleaned_below.is_none_or(|c| *end > c))
            .map(|((_, l), _)| l)
            .sum();
        if total == 0 {
            0
        } else {
            (u128::from(dirty) * 1_000_000 / u128::from(total)) as u32
        }
    });
    let stat = PartitionStat {
        partition: dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        log_start,
        log_end,
        high_watermark: log_end,
        last_stable: psm.last_stable_offset(log_end),
        mode,
        producers: psm.len(),
        open_transactions: psm.open_transactions().count(),
        segments: bases.len(),
        bytes: bytes_total,
        clean_shutdown: names
            .iter()
            .any(|n| file_kind(n) == FileKind::CleanShutdown),
        cleanup_policy: config.compaction.policy.to_string(),
        cleaner_checkpoint: cleaned_below,
        dirty_ratio_ppm,
    };
    Ok(PartitionReport {
        stat,
        problems,
        batches,
        producers: psm.producers().collect(),
    })
}

/// What a snapshot keeps of a producer (Kafka's layout holds the last batch only).
fn kept(e: &ProducerEntry) -> (i16, i32, i32, Offset, i64, Option<Offset>) {
    (
        e.epoch,
        e.coordinator_epoch,
        e.last_seq(),
        e.last_data_offset(),
        e.last_timestamp,
        e.current_txn_first_offset,
    )
}

/// A data batch below the cleaner's checkpoint: each of its keys must be the only record of
/// that key there (the cleaner kept the newest), and every record has a key.
fn check_cleaned_keys(
    b: &crate::format::BatchView<'_>,
    mapped_from: Offset,
    seen: &mut std::collections::HashMap<Vec<u8>, Offset>,
    path: &Path,
    problem: &mut dyn FnMut(&Path, Option<u64>, String),
) {
    let h = b.header();
    let records = match b.decompressed_records(CLEANED_BATCH_DECOMPRESSED_BYTES_MAX) {
        Ok(r) => r,
        Err(e) => {
            return problem(
                path,
                Some(b.position()),
                format!("cannot read the records: {e}"),
            );
        }
    };
    for r in records.iter() {
        let Ok(r) = r else {
            return problem(path, Some(b.position()), "malformed record".into());
        };
        let offset = Offset(h.base_offset.0 + i64::from(r.offset_delta));
        if offset < mapped_from {
            continue;
        }
        let Some(key) = r.key else {
            problem(
                path,
                Some(b.position()),
                format!(
                    "record at {} below the cleaner's checkpoint has no key",
                    offset.0
                ),
            );
            continue;
        };
        if let Some(earlier) = seen.insert(key.to_vec(), offset) {
            problem(path, Some(b.position()), format!("key {:?} at {} and {}, both below the cleaner's checkpoint: only the newest may survive", String::from_utf8_lossy(key), earlier.0, offset.0));
        }
    }
}

/// Most bytes `verify` decompresses of one batch below the cleaner's checkpoint.
const CLEANED_BATCH_DECOMPRESSED_BYTES_MAX: usize = 1 << 30;

fn check_snapshot(
    dir: &Path,
    at: Offset,
    psm: &ProducerStateManager,
    problem: &mut dyn FnMut(&Path, Option<u64>, String),
) {
    let path = dir.join(format!("{:020}.snapshot", at.0));
    let entries = match std::fs::read(&path).map(|b| decode_snapshot(&b)) {
        Ok(Ok(entries)) => entries,
        Ok(Err(e)) => return problem(&path, None, e.to_string()),
        Err(e) => return problem(&path, None, format!("cannot read: {e}")),
    };
    for e in entries {
        match psm.get(e.producer_id) {
            Some(live) if kept(&live) == kept(&e) => {}
            Some(live) => problem(&path, None, format!("producer {}: snapshot {:?}, replay of the batches {:?} (epoch, coordinator epoch, last sequence, last offset, timestamp, open transaction)", e.producer_id, kept(&e), kept(&live))),
            None => problem(&path, None, format!("producer {} is not in the replay of the batches up to {}", e.producer_id, at.0)),
        }
    }
}
