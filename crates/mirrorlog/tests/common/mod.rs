//! Helpers shared by the integration tests: seeds, proptest configuration, raw batch crafting.
#![allow(dead_code)]

pub mod compaction;
pub mod partition_log;
pub mod reference_psm;

use mirrorlog::format::{self, reader};
use mirrorlog::internals::log::LogConfig;
use mirrorlog::internals::producer_state::ProducerStateConfig;
use mirrorlog::internals::segment::SegmentConfig;
use proptest::test_runner::{Config, RngSeed};

/// The seed for randomized tests: `MIRRORLOG_SEED` when set, otherwise fresh. Printed so that a
/// failing run (whose stderr cargo shows) can be replayed with `MIRRORLOG_SEED=<seed>`.
pub fn seed(test: &str) -> u64 {
    let seed = match std::env::var("MIRRORLOG_SEED") {
        Ok(s) => s.parse().expect("MIRRORLOG_SEED must be a u64"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    };
    eprintln!("{test}: seed {seed} (replay with MIRRORLOG_SEED={seed})");
    seed
}

/// A proptest configuration with `cases` cases and a replayable seed.
pub fn proptest_config(test: &str, cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed(test)),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The parts of a hand-made batch; `finish` computes `length` and the CRC so that tests can
/// reach record-level checks with otherwise valid bytes.
#[derive(Debug, Clone)]
pub struct RawBatch {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
    pub records: Vec<u8>,
}

impl Default for RawBatch {
    fn default() -> Self {
        RawBatch {
            base_offset: 0,
            partition_leader_epoch: 0,
            magic: 2,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 1000,
            max_timestamp: 1000,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: 1,
            records: Vec::new(),
        }
    }
}

impl RawBatch {
    pub fn finish(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&((49 + self.records.len()) as i32).to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(self.magic as u8);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.attributes.to_be_bytes());
        out.extend_from_slice(&self.last_offset_delta.to_be_bytes());
        out.extend_from_slice(&self.base_timestamp.to_be_bytes());
        out.extend_from_slice(&self.max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.records_count.to_be_bytes());
        out.extend_from_slice(&self.records);
        fix_crc(&mut out);
        out
    }
}

/// Recomputes the CRC of a single batch in place.
pub fn fix_crc(batch: &mut [u8]) {
    let crc = format::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Encodes one record from raw parts; `length` overrides the computed length varint.
pub struct RawRecord<'a> {
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

impl RawRecord<'_> {
    pub fn body(&self) -> Vec<u8> {
        let mut b = vec![0u8];
        reader::put_varlong(&mut b, self.timestamp_delta);
        reader::put_varint(&mut b, self.offset_delta);
        put_nullable(&mut b, self.key);
        put_nullable(&mut b, self.value);
        reader::put_varint(&mut b, self.headers.len() as i32);
        for (k, v) in self.headers {
            reader::put_varint(&mut b, k.len() as i32);
            b.extend_from_slice(k);
            put_nullable(&mut b, *v);
        }
        b
    }

    pub fn encode(&self) -> Vec<u8> {
        with_length(&self.body())
    }
}

pub fn with_length(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    reader::put_varint(&mut out, body.len() as i32);
    out.extend_from_slice(body);
    out
}

pub fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            reader::put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
        None => reader::put_varint(out, -1),
    }
}

/// A log configuration with small segments for tests: `segment_bytes` per segment, an append
/// buffer of `commit_buffer_bytes`, an index entry every `index_interval_bytes`, Kafka's
/// defaults otherwise.
pub const fn log_config(
    segment_bytes: u64,
    index_interval_bytes: u32,
    commit_buffer_bytes: usize,
) -> LogConfig {
    LogConfig {
        segment: SegmentConfig {
            segment_bytes,
            index_interval_bytes,
            commit_buffer_bytes,
            preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
        },
        producer: ProducerStateConfig {
            producer_id_expiration_ms: 86_400_000,
        },
        retention_bytes: None,
        retention_ms: None,
        segment_ms: None,
        segment_index_bytes: None,
        max_message_bytes: mirrorlog::api::MAX_MESSAGE_BYTES_DEFAULT,
        timestamp_before_max_ms: None,
        timestamp_after_max_ms: None,
        compaction: mirrorlog::internals::log::CompactionConfig::DEFAULT,
    }
}

/// The timestamp of `producer_batch`'s records (2025-11-29).
pub const RECORDS_MS: i64 = 1_764_403_200_000;

/// A clock at the time of `producer_batch`'s records, for engines whose tests reopen and expect
/// every producer back: on the wall clock those producers are long past
/// `producer.id.expiration.ms`, and an open expires them (design.md §Producer state).
pub fn records_clock() -> std::sync::Arc<mirrorlog::api::ManualClock> {
    std::sync::Arc::new(mirrorlog::api::ManualClock::new(RECORDS_MS))
}

/// The producer ids the engine tracks on `tp`, sorted.
pub fn producer_ids(
    engine: &mirrorlog::engine::Engine,
    tp: &mirrorlog::engine::TopicPartition,
) -> Vec<i64> {
    let mut ids: Vec<i64> = engine
        .producers(tp)
        .wait()
        .unwrap()
        .iter()
        .map(|e| e.producer_id)
        .collect();
    ids.sort_unstable();
    ids
}

/// A batch of `records` records (no key, `value_len` bytes of value each) from `producer` at
/// epoch 0 starting at sequence `seq`.
pub fn producer_batch(
    producer: i64,
    seq: i32,
    records: i32,
    transactional: bool,
    value_len: usize,
) -> Vec<u8> {
    let mut b = format::BatchBuilder::new(format::BatchOptions {
        producer: format::ProducerFields {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: seq,
        },
        transactional,
        ..format::BatchOptions::default()
    });
    let value = vec![0x5a; value_len];
    for i in 0..records {
        b.push(format::RecordSpec {
            timestamp: 1_764_403_200_000 + i64::from(i),
            key: None,
            value: Some(&value),
            headers: &[],
        });
    }
    b.build()
}

/// A COMMIT or ABORT marker for `producer` at epoch 0, coordinator epoch 0.
pub fn marker(producer: i64, commit: bool) -> Vec<u8> {
    format::build_marker(&format::MarkerSpec {
        base_offset: format::Offset(0),
        partition_leader_epoch: 0,
        producer_id: producer,
        producer_epoch: 0,
        commit,
        coordinator_epoch: 0,
        timestamp: 1_764_403_200_000,
    })
}

/// Every batch of `log` from its start to the high watermark, read back in pieces.
pub fn read_all(
    io: &mut dyn mirrorlog::internals::io::Io,
    log: &mut mirrorlog::internals::log::PartitionLog,
) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut at = log.log_start();
    while at < log.high_watermark() {
        let r = log
            .read(
                io,
                at,
                1 << 20,
                mirrorlog::internals::log::Isolation::ReadUncommitted,
            )
            .unwrap();
        // Nothing from `at` on: the log ends in an offset gap (a truncation into one).
        let Some(last) = format::BatchIter::new(&r.records, 0).last() else {
            assert!(r.records.is_empty(), "whole batches");
            break;
        };
        let last = last.header().last_offset();
        bytes.extend_from_slice(&r.records);
        at = format::Offset(last.0 + 1);
    }
    bytes
}

/// `batch` as the log stores it: base offset and leader epoch stamped.
pub fn stored(mut batch: Vec<u8>, base: format::Offset, epoch: i32) -> Vec<u8> {
    format::stamp_base_offset(&mut batch, base).unwrap();
    format::stamp_partition_leader_epoch(&mut batch, epoch).unwrap();
    batch
}

/// What a producer-state snapshot keeps of a producer: id, epoch, coordinator epoch, last
/// sequence, last data offset, last timestamp, open transaction's first offset. (Kafka's
/// snapshot format holds only each producer's last batch, so the duplicate window after a
/// snapshot load is shorter than after a replay: compare this, not whole entries.)
pub type Kept = (
    i64,
    i16,
    i32,
    i32,
    format::Offset,
    i64,
    Option<format::Offset>,
);

/// [`Kept`] of every producer, sorted.
pub fn snapshot_kept(
    psm: &mirrorlog::internals::producer_state::ProducerStateManager,
) -> Vec<Kept> {
    snapshot_kept_entries(&psm.producers().collect::<Vec<_>>())
}

/// [`Kept`] of a list of producer entries, sorted.
pub fn snapshot_kept_entries(
    entries: &[mirrorlog::internals::producer_state::ProducerEntry],
) -> Vec<Kept> {
    let mut v: Vec<Kept> = entries
        .iter()
        .map(|e| {
            (
                e.producer_id,
                e.epoch,
                e.coordinator_epoch,
                e.last_seq(),
                e.last_data_offset(),
                e.last_timestamp,
                e.current_txn_first_offset,
            )
        })
        .collect();
    v.sort();
    v
}

/// A small xorshift generator for seeded workloads (replayable from the seed).
pub struct Rng(pub u64);

impl Rng {
    /// A value in `[0, n)` (`n` of 0 counts as 1).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// The stored bytes of the batches of `tp` on `engine` with base offsets in `[from, to)`, read
/// through the public API.
pub fn engine_bytes(
    engine: &mirrorlog::engine::Engine,
    tp: &mirrorlog::engine::TopicPartition,
    from: format::Offset,
    to: format::Offset,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = from;
    while at < to {
        let r = engine
            .read(
                tp,
                mirrorlog::engine::ReadRequest::new(
                    at,
                    1 << 20,
                    mirrorlog::internals::log::Isolation::ReadUncommitted,
                ),
            )
            .wait()
            .unwrap();
        if r.records.is_empty() {
            // Nothing readable from `at` (an offset gap at the end, or past the HW).
            return out;
        }
        for b in format::BatchIter::new(&r.records, 0) {
            if b.header().base_offset >= to {
                return out;
            }
            out.extend_from_slice(b.bytes());
            at = format::Offset(b.header().last_offset().0 + 1);
        }
    }
    out
}

/// Every batch of `tp` on `engine` readable at `isolation` from `at` on, read through the
/// public API until a read returns nothing.
pub fn engine_bytes_at(
    engine: &mirrorlog::engine::Engine,
    tp: &mirrorlog::engine::TopicPartition,
    mut at: format::Offset,
    isolation: mirrorlog::internals::log::Isolation,
) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let r = engine
            .read(
                tp,
                mirrorlog::engine::ReadRequest::new(at, 64 << 10, isolation),
            )
            .wait()
            .unwrap();
        let Some(last) = format::BatchIter::new(&r.records, 0).last() else {
            return out;
        };
        at = format::Offset(last.header().last_offset().0 + 1);
        out.extend_from_slice(&r.records);
    }
}

/// A temporary data directory that, when dropped after its engine closed, must pass the
/// `mirrorlog verify` checks (unless the test is already failing).
pub struct VerifiedDir(pub tempfile::TempDir);

impl Drop for VerifiedDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        assert_verifies(self.0.path());
    }
}

/// Every partition under `data_dir` passes the read-only checks of `mirrorlog verify`.
pub fn assert_verifies(data_dir: &std::path::Path) {
    let Ok(dirs) = mirrorlog::inspect::partition_dirs(data_dir) else {
        return; // no partition was ever written
    };
    for d in dirs {
        let report = mirrorlog::inspect::inspect_partition(&d, &mut |_| {}).unwrap();
        assert!(
            report.problems.is_empty(),
            "{}: {:#?}",
            d.display(),
            report.problems
        );
    }
}

/// The repository's root (where `Cargo.lock` is): these helpers are compiled into the tests of
/// the engine and of the crates that share them (the bench, the tool).
pub fn repo_root() -> &'static std::path::Path {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .find(|d| d.join("Cargo.lock").exists())
        .unwrap_or(here)
}

/// The interpreter of the interop venv: `$MIRRORLOG_PYTHON`, else `.venv/bin/python` (which
/// `scripts/test.sh` creates). Not checked for existence.
pub fn venv_python() -> std::path::PathBuf {
    std::env::var_os("MIRRORLOG_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"))
}

/// kafka-python's reading of a log file (`testdata/interop/parse_with_kafka_python.py`): its JSON
/// report. Panics with the script's stderr if it fails.
pub fn parse_with_kafka_python(
    python: &std::path::Path,
    file: &std::path::Path,
) -> serde_json::Value {
    let script = repo_root().join("testdata/interop/parse_with_kafka_python.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "run {} (scripts/test.sh makes .venv): {e}",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Writes the simulated disk's files under `root` (for `mirrorlog verify`, which reads real
/// files).
pub fn export_sim(io: &mirrorlog::internals::io::SimIo, root: &std::path::Path) {
    for p in io.paths() {
        let Some(bytes) = io.file_bytes(&p) else {
            continue;
        };
        let out = root.join(p.strip_prefix("/").unwrap());
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(out, bytes).unwrap();
    }
}

/// Without root or the tools (`mkfs.ext4`, `mount`), a test cannot make its small filesystem.
/// Under CI (`CI` set, as `.ci/run` runs; `scripts/test.sh` installs the tools there) that is a
/// failure, never a pass; on a developer's machine the test says it did not run.
pub fn missing_prerequisite(test: &str, why: &str) {
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false") {
        panic!("{test} cannot run under CI: {why}");
    }
    eprintln!("{test}: NOT RUN (no loop-mounted ext4 here): {why}");
}

/// A loop-mounted ext4 image, unmounted when dropped.
pub struct Mounted {
    _root: tempfile::TempDir,
    pub mount: std::path::PathBuf,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.mount)
            .status();
    }
}

/// Makes an ext4 image of `size` (`truncate -s` syntax: "32M") and loop-mounts it (root only).
pub fn mount_small_ext4(size: &str) -> Result<Mounted, String> {
    use std::process::Command;
    // The effective user, from `id -u` (no libc call needed).
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map_err(|e| format!("cannot run id: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err("not running as root (loop mounts need it)".into());
    }
    let root = tempfile::tempdir_in(std::env::temp_dir()).map_err(|e| e.to_string())?;
    let image = root.path().join("disk.img");
    let mount = root.path().join("mnt");
    std::fs::create_dir(&mount).map_err(|e| e.to_string())?;
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    run(Command::new("truncate").arg("-s").arg(size).arg(&image))?;
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0"])
        .arg(&image))?;
    run(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(&mount))?;
    Ok(Mounted { _root: root, mount })
}

/// Removes the partition's recovery point (`recovery-point-offset-checkpoint`), so that the next
/// recovery scans every segment: for tests of the full scan (damage anywhere is found).
pub fn forget_recovery_point(io: &mut mirrorlog::internals::io::SimIo, dir: &std::path::Path) {
    let path = dir.join(mirrorlog::internals::log::RECOVERY_POINT_CHECKPOINT);
    if io.file_bytes(&path).is_some() {
        mirrorlog::internals::io::run(
            io,
            mirrorlog::internals::io::Op::Unlink { path },
            &mut Vec::new(),
        )
        .unwrap()
        .result
        .unwrap();
        // Durably: the simulated directory forgets an unsynced unlink at a crash.
        mirrorlog::internals::io::fsync_dir(io, dir).unwrap();
    }
}

/// Every read a consumer could make of `log` from every `step`-th offset, both isolations, at
/// most `max_bytes` each: the records as length and digest (a failure prints lines, not
/// megabytes) with the aborted transactions listed.
pub fn observed_reads(
    io: &mut dyn mirrorlog::internals::io::Io,
    log: &mut mirrorlog::internals::log::PartitionLog,
    step: usize,
    max_bytes: usize,
) -> Vec<String> {
    use mirrorlog::internals::log::Isolation;
    let mut out = Vec::new();
    for offset in (log.log_start().0..log.log_end().0).step_by(step) {
        for isolation in [Isolation::ReadUncommitted, Isolation::ReadCommitted] {
            let r = log
                .read(io, format::Offset(offset), max_bytes, isolation)
                .unwrap();
            let digest = r.records.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
            out.push(format!(
                "{offset} {isolation:?} {} bytes {digest:x} {:?}",
                r.records.len(),
                r.aborted
            ));
        }
    }
    out
}

/// Opens the partition log in `dir` as an engine would: cleanly when it was closed cleanly,
/// by recovery otherwise.
pub fn open_or_recover(
    io: &mut dyn mirrorlog::internals::io::Io,
    dir: &std::path::Path,
    config: LogConfig,
) -> Result<mirrorlog::internals::log::PartitionLog, mirrorlog::internals::log::LogError> {
    use mirrorlog::internals::log::{LogError, PartitionLog};
    match PartitionLog::open(io, dir, config) {
        Err(LogError::NeedsRecovery { .. }) => {
            mirrorlog::internals::recovery::recover(io, dir, config)
        }
        other => other,
    }
}

/// Starts mirroring `tp` on `engine` from `source` after truncating to `at`; returns the log
/// end mirroring continues from.
pub fn start_mirroring(
    engine: &mirrorlog::engine::Engine,
    tp: &mirrorlog::engine::TopicPartition,
    source: &str,
    at: mirrorlog::engine::MirrorStart,
) -> format::Offset {
    engine
        .start_mirroring(
            tp,
            mirrorlog::engine::StartMirroring {
                source: source.into(),
                truncate_to: at,
            },
        )
        .wait()
        .unwrap()
}

/// Stops mirroring `tp` on `engine` (failover) at leader epoch `epoch`, aborting open
/// transactions.
pub fn stop_mirroring(
    engine: &mirrorlog::engine::Engine,
    tp: &mirrorlog::engine::TopicPartition,
    epoch: i32,
) -> mirrorlog::engine::StopOutcome {
    engine
        .stop_mirroring(
            tp,
            mirrorlog::engine::StopMirroring {
                leader_epoch: epoch,
                open_transactions: mirrorlog::engine::OpenTransactions::Abort,
            },
        )
        .wait()
        .unwrap()
}
