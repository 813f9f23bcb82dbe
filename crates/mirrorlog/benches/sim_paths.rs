//! CPU cost of the append path and the recovery scan, on the simulated disk (issue
//! "mirrorlog-bench", criterion benches): no device in the way, so these track the engine's own
//! work per batch (validation, PSM staging, the copy into the append buffer, round bookkeeping;
//! for recovery, streaming validation, indexing and replay). The simulated disk's own copies are
//! included (they dominate the scan: every simulated read copies out of an in-memory file).
//! After criterion, a same-run reference: CRC-32C over the same bytes, the floor any append or
//! scan pays.

use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use mirrorlog::api::Origin;
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::{LogConfig, MirrorStart, PartitionLog};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::SegmentConfig;
use std::path::Path;
use std::time::Instant;

const CONFIG: LogConfig = LogConfig {
    segment: SegmentConfig {
        segment_bytes: 64 << 20,
        index_interval_bytes: 4096,
        commit_buffer_bytes: 2 << 20,
        preallocate_step_bytes: mirrorlog::internals::segment::PREALLOCATE_STEP_BYTES_DEFAULT,
    },
    producer: mirrorlog::internals::producer_state::ProducerStateConfig {
        producer_id_expiration_ms: 86_400_000,
    },
    retention_bytes: None,
    retention_ms: None,
    segment_ms: None,
    segment_index_bytes: None,
    max_message_bytes: mirrorlog::api::MAX_MESSAGE_BYTES_DEFAULT,
    timestamp_before_max_ms: None,
    timestamp_after_max_ms: None,
    compaction: mirrorlog::api::CompactionConfig::DEFAULT,
};

/// A 1 MiB fetch of 16 KiB batches from 4 producers.
fn fetch() -> Vec<Vec<u8>> {
    let value = [0x61u8; 1000];
    (0..64)
        .map(|i| {
            let mut b = BatchBuilder::new(BatchOptions {
                producer: ProducerFields {
                    producer_id: i % 4,
                    producer_epoch: 0,
                    base_sequence: 0,
                },
                ..BatchOptions::default()
            });
            while b.size_bytes() + 1020 <= 16 << 10 {
                b.push(RecordSpec {
                    timestamp: 1_764_403_200_000,
                    key: None,
                    value: Some(&value),
                    headers: &[],
                });
            }
            b.build()
        })
        .collect()
}

fn stamped(batches: &[Vec<u8>], mut next: i64) -> (Vec<u8>, i64) {
    let mut out = Vec::with_capacity(1 << 20);
    for b in batches {
        let at = out.len();
        out.extend_from_slice(b);
        format::stamp_base_offset(&mut out[at..], Offset(next)).unwrap();
        next += i64::from(format::inspect(b, 0).unwrap().header().last_offset_delta) + 1;
    }
    (out, next)
}

fn mirrored_log(io: &mut SimIo, dir: &Path, chunks: usize) -> i64 {
    let mut log = PartitionLog::create(io, dir, CONFIG).unwrap();
    log.start_mirroring(io, "src", MirrorStart::Offset(Offset(0)))
        .unwrap();
    let batches = fetch();
    let mut next = 0;
    for _ in 0..chunks {
        let (chunk, n) = stamped(&batches, next);
        next = n;
        log.append(io, &chunk, Origin::Mirror).unwrap();
        log.commit(io).unwrap();
    }
    next
}

fn bench(c: &mut Criterion) {
    let batches = fetch();
    let mut group = c.benchmark_group("sim");
    group.throughput(Throughput::Bytes(
        batches.iter().map(Vec::len).sum::<usize>() as u64,
    ));
    group.bench_function("append 1 MiB mirrored fetch + commit", |b| {
        let mut io = SimIo::new(SimConfig::default());
        let dir = Path::new("/sim/append");
        let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
        log.start_mirroring(&mut io, "src", MirrorStart::Offset(Offset(0)))
            .unwrap();
        let mut next = 0;
        b.iter(|| {
            if next > 40_000 {
                // Keep the simulated disk small: start over.
                log.truncate_to(&mut io, Offset(0)).unwrap();
                next = 0;
            }
            let (chunk, n) = stamped(&batches, next);
            next = n;
            log.append(&mut io, &chunk, Origin::Mirror).unwrap();
            log.commit(&mut io).unwrap();
        });
    });
    group.throughput(Throughput::Bytes(32 << 20));
    group.sample_size(10);
    group.bench_function("recovery scan of 32 MiB", |b| {
        let mut io = SimIo::new(SimConfig::default());
        let dir = Path::new("/sim/scan");
        mirrored_log(&mut io, dir, 32);
        b.iter_batched(
            || io.crash(3),
            |mut disk| recovery::recover(&mut disk, dir, CONFIG).unwrap(),
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

/// The floor: CRC-32C of 32 MiB of the same batches, timed the same way, for a ratio.
fn print_reference() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = Path::new("/sim/reference");
    mirrored_log(&mut io, dir, 32);
    let bytes: Vec<u8> = fetch().concat().repeat(32);
    let reps = 5;
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(crc_fast::checksum(
            crc_fast::CrcAlgorithm::Crc32Iscsi,
            &bytes,
        ));
    }
    let crc = t.elapsed().as_secs_f64() / f64::from(reps);
    let mut scan = 0.0;
    for i in 0..reps {
        let mut disk = io.crash(u64::from(i as u32));
        let t = Instant::now();
        std::hint::black_box(recovery::recover(&mut disk, dir, CONFIG).unwrap());
        scan += t.elapsed().as_secs_f64();
    }
    let scan = scan / f64::from(reps);
    println!(
        "recovery scan on the simulated disk: {:.0} MB/s; CRC-32C alone {:.0} MB/s; scan/CRC time {:.2}",
        bytes.len() as f64 / scan / 1e6,
        bytes.len() as f64 / crc / 1e6,
        scan / crc
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_reference();
}
