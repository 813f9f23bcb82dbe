//! `compaction`: the log cleaner on a G MiB keyed log (`--compaction-mib`, default 1024) in
//! which 10 % of the keys are live (each key written ten times, 1 KiB values in 64-record
//! batches, 64 MiB segments unless `--segment-mib`, all sealed).
//!
//! - **Cleaning MB/s**, in alternating rounds: `mirrorlog` copies the log (untimed) and cleans
//!   the copy with one pass (`PartitionLog::clean`: map, rewrite, swap); `raw two-pass` does the
//!   I/O a two-pass cleaner cannot avoid with the same I/O sizes — every segment read twice in
//!   1 MiB O_DIRECT reads, the survivors (as many bytes as the cleaner kept, in as many files)
//!   written once in 1 MiB O_DIRECT writes, each file synced. Both count the log's bytes.
//! - **Producers beside the cleaner**: an engine (one shard) holds the log as a partition
//!   while 4 callers append 1 KiB durable batches to another partition of the shard; their
//!   latency is measured alone (the log's policy `delete`: nothing to clean), beside the shard's
//!   background cleaner (policy switched to `compact` live), and alone again.
//! - **Dedupe memory per key**: the map's slot size (the bytes one key takes), and the keys the
//!   default buffer holds.

use crate::args::Args;
use crate::baselines::ring;
use crate::measure::{order, progress, timed, Figure, Outcome, Side};
use mirrorlog::api::{CleanupPolicy, CompactionConfig, Origin};
use mirrorlog::engine::{
    CleanerConfig, Engine, EngineConfig, IoBackend, PartitionConfig, TopicPartition,
};
use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};
use mirrorlog::internals::io::{self, AlignedBuf, FileCaching, Io, Op, OpenOptions, UringIo};
use mirrorlog::internals::log::{LogConfig, OffsetMap, PartitionLog, DEDUPE_BUFFER_BYTES_DEFAULT};
use mirrorlog::internals::producer_state::Origin as LogOrigin;
use mirrorlog::internals::segment;
use std::path::Path;
use std::time::{Duration, Instant};

const RECORDS_PER_BATCH: usize = 64;
const VALUE_BYTES: usize = 1000;
/// Each key is written this many times: 10 % of the records are live.
const WRITES_PER_KEY: u64 = 10;
/// Segment size unless `--segment-mib` sets it.
const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;
/// The dedupe map of the measured pass: the engine's default buffer over 2 shards.
const MAP_BYTES: usize = DEDUPE_BUFFER_BYTES_DEFAULT / 2;
const IO_BYTES: usize = 1 << 20;

fn partition_config(policy: CleanupPolicy, segment_bytes: u64) -> PartitionConfig {
    PartitionConfig {
        segment_bytes,
        compaction: CompactionConfig {
            policy,
            ..CompactionConfig::DEFAULT
        },
        ..PartitionConfig::default()
    }
}

/// Writes the keyed log into `dir` (a partition directory of an engine's data directory):
/// `total` bytes, keys cycling so each is written [`WRITES_PER_KEY`] times, all sealed.
fn build(
    dir: &Path,
    total: u64,
    segment_bytes: u64,
    caching: FileCaching,
) -> Result<(u64, u64), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let config = partition_config(CleanupPolicy::DELETE, segment_bytes);
    std::fs::write(dir.join("partition.config"), config.encode()).map_err(|e| e.to_string())?;
    let mut io = ring(64, caching)?;
    let mut log =
        PartitionLog::create(&mut io, dir, config.log_config()).map_err(|e| e.to_string())?;
    let batch_bytes = (RECORDS_PER_BATCH * (VALUE_BYTES + 30)) as u64;
    let records = total / batch_bytes * RECORDS_PER_BATCH as u64;
    let keys = (records / WRITES_PER_KEY).max(1);
    let value = vec![b'v'; VALUE_BYTES];
    let mut written = 0u64;
    let mut n = 0u64;
    while n < records {
        let mut b = BatchBuilder::new(BatchOptions::default());
        for _ in 0..RECORDS_PER_BATCH {
            let key = format!("key-{:012}", n % keys);
            b.push(RecordSpec {
                timestamp: 1_764_403_200_000,
                key: Some(key.as_bytes()),
                value: Some(&value),
                headers: &[],
            });
            n += 1;
        }
        let batch = b.build();
        log.append(&mut io, &batch, LogOrigin::Client)
            .map_err(|e| e.to_string())?;
        written += batch.len() as u64;
        if n.is_multiple_of(RECORDS_PER_BATCH as u64 * 16) {
            log.commit(&mut io).map_err(|e| e.to_string())?;
            progress(&format!(
                "compaction: wrote {} of {} MiB",
                written >> 20,
                total >> 20
            ));
        }
    }
    log.commit(&mut io).map_err(|e| e.to_string())?;
    log.roll(&mut io).map_err(|e| e.to_string())?;
    log.close(&mut io).map_err(|e| e.to_string())?;
    Ok((written, keys))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    for e in std::fs::read_dir(from).map_err(|e| e.to_string())? {
        let e = e.map_err(|e| e.to_string())?;
        let target = to.join(e.file_name());
        std::fs::copy(e.path(), &target).map_err(|e| e.to_string())?;
        // Written back before the clock starts: an O_DIRECT read of a range still dirty in the
        // page cache waits for its writeback, which would bill the copy to the cleaner (found
        // by timing the pass's phases: each read at half the device's speed).
        std::fs::File::open(&target)
            .and_then(|f| f.sync_all())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The raw two-pass cleaner's I/O over the segments of `dir`: every `.log` read twice in 1 MiB
/// O_DIRECT reads, then `files` output files of `out_bytes` in all written in 1 MiB O_DIRECT
/// writes, each synced. Returns the bytes of the log.
fn raw_two_pass(
    io: &mut UringIo,
    dir: &Path,
    out: &Path,
    out_bytes: u64,
    files: u64,
) -> Result<u64, String> {
    let names = io.list_dir(dir).map_err(|e| e.to_string())?;
    let bases = segment::offsets_named(&names, "log");
    let mut read = 0u64;
    let direct = OpenOptions {
        direct: true,
        ..OpenOptions::default()
    };
    for pass in 0..2 {
        for &b in &bases {
            let file =
                io::open(io, &segment::log_path(dir, b), direct).map_err(|e| e.to_string())?;
            let len = io.file_len(file).map_err(|e| e.to_string())?;
            let mut at = 0u64;
            while at < len {
                let n = (IO_BYTES as u64).min(len - at) as usize;
                let bytes = io::read_direct(io, file, at, n).map_err(|e| e.to_string())?;
                if pass == 0 {
                    read += bytes.len() as u64;
                }
                at += n as u64;
            }
            io::run(io, Op::Close { file }, &mut Vec::new())
                .map_err(|e| e.to_string())?
                .result
                .map_err(|e| e.to_string())?;
        }
    }
    let per_file = out_bytes / files.max(1);
    let mut buf = AlignedBuf::new(IO_BYTES);
    buf.as_mut_slice().fill(0x5a);
    for f in 0..files.max(1) {
        let path = out.join(format!("{f}.out"));
        let file = io::open(
            io,
            &path,
            OpenOptions {
                create: true,
                write: true,
                direct: true,
                ..OpenOptions::default()
            },
        )
        .map_err(|e| e.to_string())?;
        let mut at = 0u64;
        while at < per_file {
            let done = io::run(
                io,
                Op::Write {
                    file,
                    offset: at,
                    buf,
                    range: 0..IO_BYTES,
                },
                &mut Vec::new(),
            )
            .map_err(|e| e.to_string())?;
            buf = done.buf.ok_or("the write kept its buffer")?;
            done.result.map_err(|e| e.to_string())?;
            at += IO_BYTES as u64;
        }
        for op in [
            Op::Truncate {
                file,
                len: per_file,
            },
            Op::Fdatasync { file },
            Op::Close { file },
        ] {
            io::run(io, op, &mut Vec::new())
                .map_err(|e| e.to_string())?
                .result
                .map_err(|e| e.to_string())?;
        }
        let _ = std::fs::remove_file(&path);
    }
    Ok(read)
}

pub(crate) fn compaction(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let root = dir.join("compaction");
    let engine_dir = root.join("engine");
    let src = engine_dir.join("compacted-0");
    let total = a.compaction_mib << 20;
    let segment_bytes = a.segment_mib.map_or(SEGMENT_BYTES_DEFAULT, |m| m << 20);
    let (written, keys) = build(&src, total, segment_bytes, a.caching)?;
    let work = root.join("work").join("compacted-0");
    let out = root.join("raw-out");
    std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
    let log_config: LogConfig =
        partition_config(CleanupPolicy::COMPACT, segment_bytes).log_config();
    let mut io = ring(64, a.caching)?;
    let mut ours = Side::new("mirrorlog");
    let mut raw = Side::new("raw two-pass");
    let (mut kept_bytes, mut files) = (written / WRITES_PER_KEY, (written / segment_bytes).max(1));
    let mut map = OffsetMap::new(MAP_BYTES);
    let mut notes = Vec::new();
    let rounds = 3;
    for round in 0..rounds {
        for side in order(round, 2) {
            progress(&format!("compaction: round {} of {rounds}", round + 1));
            if side == 1 {
                let t = Instant::now();
                raw.bytes += raw_two_pass(&mut io, &src, &out, kept_bytes, files)?;
                raw.secs += t.elapsed().as_secs_f64();
                raw.ops += 1;
                continue;
            }
            copy_dir(&src, &work)?;
            let mut log =
                PartitionLog::open(&mut io, &work, log_config).map_err(|e| e.to_string())?;
            let before = log.size_bytes();
            let t = Instant::now();
            let (stats, m) = log.clean(&mut io, 1_764_403_300_000, map, true);
            let secs = t.elapsed().as_secs_f64();
            map = m;
            let stats = stats
                .map_err(|e| e.to_string())?
                .ok_or("nothing was cleaned")?;
            ours.secs += secs;
            ours.bytes += stats.bytes_read;
            ours.ops += 1;
            let _ = ours.latency_us.record((secs * 1e6) as u64);
            kept_bytes = stats.bytes_written;
            files = stats.segments_written;
            if round == 0 {
                notes.push(format!(
                    "one pass: {} MiB -> {} MiB ({} -> {} records), {} keys mapped ({:.0} % of the map), map phase read {} MiB",
                    before >> 20,
                    log.size_bytes() >> 20,
                    stats.records_read,
                    stats.records_kept,
                    stats.keys_mapped,
                    100.0 * stats.keys_mapped as f64 / map.slots() as f64,
                    stats.map_bytes_read >> 20
                ));
            }
            drop(log);
        }
    }
    let _ = std::fs::remove_dir_all(root.join("work"));

    // Producers on the cleaner's shard.
    progress("compaction: producers beside the cleaner");
    let backend = match a.caching {
        FileCaching::Direct => IoBackend::Uring,
        FileCaching::PageCache => IoBackend::UringPageCache,
    };
    let engine = Engine::open(
        EngineConfig::new(&engine_dir)
            .cluster_id("bench")
            .backend(backend)
            .journal_bytes(a.journal_bytes)
            .shards(1)
            .retention_check_interval_ms(100)
            .cleaner(CleanerConfig {
                backoff_ms: 10,
                ..CleanerConfig::default()
            }),
    )
    .map_err(|e| e.to_string())?;
    let compacted = TopicPartition::new("compacted", 0);
    let producer_tp = TopicPartition::new("produce", 0);
    engine
        .create_partition(&producer_tp, PartitionConfig::default())
        .wait()
        .map_err(|e| e.to_string())?;
    let one_kib = {
        let mut b = BatchBuilder::new(BatchOptions::default());
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000,
            key: Some(b"k"),
            value: Some(&[b'p'; 1000]),
            headers: &[],
        });
        b.build()
    };
    let secs = a.seconds.max(1.0);
    let produce = |side: &mut Side| {
        timed(side, 4, secs, &|_, _| {
            engine
                .append(&producer_tp, one_kib.clone(), Origin::Client)
                .wait()
                .map(|_| one_kib.len() as u64)
                .map_err(|e| e.to_string())
        });
    };
    let mut alone = Side::new("producers alone");
    let mut beside = Side::new("producers beside the cleaner");
    produce(&mut alone);
    engine
        .update_config(
            &compacted,
            partition_config(CleanupPolicy::COMPACT, segment_bytes),
        )
        .wait()
        .map_err(|e| e.to_string())?;
    // The cleaner starts at its next look (10 ms backoff, 100 ms ticks).
    let started = Instant::now();
    while engine.stats().map_err(|e| e.to_string())?[0]
        .cleaner
        .bytes_read
        == 0
    {
        if started.elapsed() > Duration::from_secs(10) {
            return Err("the shard's cleaner did not start".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let read_before = engine.stats().map_err(|e| e.to_string())?[0]
        .cleaner
        .bytes_read;
    produce(&mut beside);
    let cleaner = engine.stats().map_err(|e| e.to_string())?[0].cleaner;
    let cleaned_meanwhile = cleaner.bytes_read - read_before;
    engine
        .update_config(
            &compacted,
            partition_config(CleanupPolicy::DELETE, segment_bytes),
        )
        .wait()
        .map_err(|e| e.to_string())?;
    produce(&mut alone);
    engine.close().map_err(|e| e.to_string())?;
    let ratio = beside.q(0.99) as f64 / (alone.q(0.99) as f64).max(1.0);
    notes.push(format!(
        "producers: 4 callers, 1 KiB durable appends on the cleaner's shard; p99 alone {} us (two windows), beside the cleaner {} us; the cleaner read {} MiB during its window ({:.0} MB/s in the background)",
        alone.q(0.99),
        beside.q(0.99),
        cleaned_meanwhile >> 20,
        cleaned_meanwhile as f64 / secs / 1e6
    ));
    notes.push(format!(
        "{} MiB log, {keys} keys each written {WRITES_PER_KEY} times, {} MiB segments; dedupe map {} MiB ({} keys at Kafka's 0.9 load); {rounds} alternating rounds; goals: >= 0.8x the raw two-pass MB/s, producers' p99 beside the cleaner <= 1.5x alone, <= 24 B of dedupe memory per key",
        written >> 20,
        segment_bytes >> 20,
        MAP_BYTES >> 20,
        MAP_BYTES / mirrorlog::internals::log::DEDUPE_SLOT_BYTES * 9 / 10,
    ));
    let _ = std::fs::remove_dir_all(&root);
    Ok(Outcome {
        workload: "compaction",
        unit: "MB/s",
        notes,
        sides: vec![ours, raw, alone, beside],
        steps: Vec::new(),
        figures: vec![
            Figure::new("producer p99 beside the cleaner / alone", ratio, "x"),
            Figure::new(
                "dedupe bytes per key",
                map.memory_bytes() as f64 / map.slots() as f64,
                "B",
            ),
        ],
    })
}
