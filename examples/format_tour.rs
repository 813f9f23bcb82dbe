//! `mirrorlog-example`: the project's main job until `mirrorlog-bench` exists.
//!
//! Builds a realistic mix of batches (idempotent data, a transaction with its COMMIT marker, an
//! aborted transaction, the barrier), appends them to a file under `target/`, reads the file
//! back, scans it with the format layer's fast path and prints what it found — then times the
//! fast path against plain CRC-32C over the same bytes, the ratio that says whether the per-batch
//! cost is dominated by the checksum.

use mirrorlog::format::{
    self, BarrierSpec, BatchBuilder, BatchIter, BatchKind, BatchOptions, MarkerSpec, Offset,
    ProducerFields, RecordSpec, ScanEnd,
};
use std::time::Instant;

const TIMESTAMP_MS: i64 = 1_764_403_200_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut log = Vec::new();
    let mut next_offset = 0i64;
    let mut append = |log: &mut Vec<u8>, mut batch: Vec<u8>| -> Result<(), format::FormatError> {
        format::stamp_base_offset(&mut batch, Offset(next_offset))?;
        let view = format::inspect(&batch, log.len() as u64)?;
        next_offset = view.header().last_offset().0 + 1;
        log.extend_from_slice(&batch);
        Ok(())
    };
    let value = vec![b'x'; 100];
    for producer_id in 0..4i64 {
        for round in 0..8 {
            let transactional = producer_id % 2 == 1;
            let mut builder = BatchBuilder::new(BatchOptions {
                producer: ProducerFields {
                    producer_id,
                    producer_epoch: 0,
                    base_sequence: round * 10,
                },
                transactional,
                ..BatchOptions::default()
            });
            for i in 0..10 {
                builder.push(RecordSpec {
                    timestamp: TIMESTAMP_MS + i,
                    key: Some(b"key"),
                    value: Some(&value),
                    headers: &[(b"trace", Some(b"1"))],
                });
            }
            append(&mut log, builder.build())?;
            if transactional {
                append(
                    &mut log,
                    format::build_marker(&MarkerSpec {
                        base_offset: Offset(0),
                        partition_leader_epoch: 0,
                        producer_id,
                        producer_epoch: 0,
                        commit: round % 4 != 3,
                        coordinator_epoch: 5,
                        timestamp: TIMESTAMP_MS,
                    }),
                )?;
            }
        }
    }
    append(
        &mut log,
        format::build_barrier(&BarrierSpec {
            base_offset: Offset(0),
            partition_leader_epoch: 1,
            timestamp: TIMESTAMP_MS,
        }),
    )?;

    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/example"));
    std::fs::create_dir_all(dir)?;
    let path = dir.join("00000000000000000000.log");
    std::fs::write(&path, &log)?;
    let read_back = std::fs::read(&path)?;

    let (mut data, mut commits, mut aborts, mut barriers, mut records) = (0, 0, 0, 0, 0);
    let mut scan = BatchIter::new(&read_back, 0);
    for batch in scan.by_ref() {
        batch.validate_records()?;
        records += batch.header().records_count;
        match batch.kind() {
            BatchKind::Data => data += 1,
            BatchKind::TxnMarker { commit: true, .. } => commits += 1,
            BatchKind::TxnMarker { commit: false, .. } => aborts += 1,
            BatchKind::Barrier => barriers += 1,
            _ => {}
        }
    }
    if scan.end() != Some(&ScanEnd::Clean) {
        return Err(format!("scan of {} ended with {:?}", path.display(), scan.end()).into());
    }
    println!(
        "wrote and re-read {} ({} bytes): {data} data batches, {commits} COMMIT, {aborts} ABORT, \
         {barriers} barrier, {records} records, offsets 0..{next_offset}",
        path.display(),
        read_back.len()
    );

    // Fast path vs plain CRC over the same bytes: the ratio is the figure.
    let rounds = 2_000;
    let start = Instant::now();
    let mut batches = 0usize;
    for _ in 0..rounds {
        batches += BatchIter::new(std::hint::black_box(&read_back), 0).count();
    }
    let fast_path = start.elapsed();
    let ranges: Vec<(usize, usize)> = BatchIter::new(&read_back, 0)
        .map(|b| {
            (
                b.position() as usize,
                b.position() as usize + b.bytes().len(),
            )
        })
        .collect();
    let start = Instant::now();
    let mut sink = 0u32;
    for _ in 0..rounds {
        for &(from, to) in &ranges {
            let covered = read_back
                .get(from + format::ATTRIBUTES_POS..to)
                .unwrap_or_default();
            sink ^= format::crc32c(std::hint::black_box(covered));
        }
    }
    let crc_only = start.elapsed();
    let gbps = |d: std::time::Duration| (read_back.len() * rounds) as f64 / d.as_secs_f64() / 1e9;
    println!(
        "fast path: {:.2} GB/s over {batches} batches; CRC-32C alone: {:.2} GB/s; fast path / CRC time {:.2} (sink {sink:#x})",
        gbps(fast_path),
        gbps(crc_only),
        fast_path.as_secs_f64() / crc_only.as_secs_f64()
    );
    Ok(())
}
