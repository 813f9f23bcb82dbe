//! The per-batch fast path (`format::inspect`: length, magic, CRC, header decode, control
//! classification) against plain CRC-32C over the same bytes, at 1 KiB, 16 KiB and 1 MiB
//! batches. The headline is the ratio printed at the end, measured interleaved in one process:
//! fast-path time / time of the same CRC alone (1.00 means the fast path costs exactly its
//! checksum).
//!
//! Two CRC-32C implementations are measured so the engine's choice is backed by a number:
//! `crc32c` (SSE4.2 `crc32` instruction, 3-way interleaved) and `crc-fast` (carry-less multiply
//! folding, AVX-512/VPCLMULQDQ where present).

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use mirrorlog::format::{self, BatchBuilder, BatchOptions, ProducerFields, RecordSpec};
use std::hint::black_box;
use std::time::Instant;

const SIZES: [(usize, &str); 3] = [(1 << 10, "1KiB"), (16 << 10, "16KiB"), (1 << 20, "1MiB")];
/// Each record carries this much value; a batch holds as many as fit its target size.
const RECORD_VALUE_SIZE_BYTES: usize = 200;

fn batch_of_size(target: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
        },
        ..BatchOptions::default()
    });
    let value = vec![0x5a; RECORD_VALUE_SIZE_BYTES];
    let mut i = 0;
    while b.size_bytes() + RECORD_VALUE_SIZE_BYTES + 16 <= target {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000 + i,
            key: Some(b"key"),
            value: Some(&value),
            headers: &[],
        });
        i += 1;
    }
    b.build()
}

/// The engine's CRC (`format::crc32c`, backed by `crc-fast`).
fn crc_fast(bytes: &[u8]) -> u32 {
    format::crc32c(bytes)
}

/// The `crc32c` crate, kept as the comparison point.
fn crc32c_crate(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("fast_path");
    for (size, name) in SIZES {
        let batch = batch_of_size(size);
        assert_eq!(crc_fast(&batch[21..]), crc32c_crate(&batch[21..]));
        group.throughput(Throughput::Bytes(batch.len() as u64));
        group.bench_with_input(BenchmarkId::new("inspect", name), &batch, |b, batch| {
            b.iter(|| format::inspect(black_box(batch), 0).map(|v| v.header().records_count))
        });
        group.bench_with_input(
            BenchmarkId::new("crc32c_crate", name),
            &batch,
            |b, batch| b.iter(|| crc32c_crate(black_box(&batch[21..]))),
        );
        group.bench_with_input(
            BenchmarkId::new("crc_fast_crate", name),
            &batch,
            |b, batch| b.iter(|| crc_fast(black_box(&batch[21..]))),
        );
    }
    group.finish();
}

/// Interleaved rounds of both, so drift on this shared machine hits both alike; medians.
fn print_ratios() {
    println!("\nfast path vs plain CRC-32C, same bytes, interleaved (median of 31 rounds):");
    for (size, name) in SIZES {
        let batch = batch_of_size(size);
        let iterations = ((64 << 20) / batch.len()).max(1);
        let (mut fast, mut crc, mut other) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..31 {
            let t = Instant::now();
            for _ in 0..iterations {
                black_box(format::inspect(black_box(&batch), 0).is_ok());
            }
            fast.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for _ in 0..iterations {
                black_box(crc32c_crate(black_box(&batch[21..])));
            }
            crc.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for _ in 0..iterations {
                black_box(crc_fast(black_box(&batch[21..])));
            }
            other.push(t.elapsed().as_secs_f64());
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (f, c, o) = (median(&mut fast), median(&mut crc), median(&mut other));
        let gbps = |secs: f64| (batch.len() * iterations) as f64 / secs / 1e9;
        println!(
            "  {name:>6}: inspect {:6.2} GB/s | crc-fast {:6.2} GB/s | crc32c {:6.2} GB/s | inspect/crc-fast time {:.3} | crc-fast/crc32c time {:.3}",
            gbps(f),
            gbps(o),
            gbps(c),
            f / o,
            o / c
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_ratios();
}
