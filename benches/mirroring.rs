//! stop_mirroring latency (issue "Cluster mirroring"): a partition mirrors batches leaving 0,
//! 10 or 1000 transactions open, then fails over (ABORT marker per open transaction, barrier,
//! durable) — timed through the engine, p50/p99 over repeated cycles (hdrhistogram). Reference
//! in the same run: one durable 1 KiB client append on the same engine.

use hdrhistogram::Histogram;
use mirrorlog::engine::{
    Engine, EngineConfig, MirrorStart, OpenTransactions, PartitionConfig, StartMirroring,
    StopMirroring, TopicPartition,
};
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use mirrorlog::producer_state::Origin;
use std::time::Instant;

fn batch(producer: i64, seq: i32, transactional: bool, base: Offset) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: base,
        producer: ProducerFields {
            producer_id: producer,
            producer_epoch: 0,
            base_sequence: seq,
        },
        transactional,
        ..BatchOptions::default()
    });
    b.push(RecordSpec {
        timestamp: 1_764_403_200_000,
        key: None,
        value: Some(&[7u8; 100]),
        headers: &[],
    });
    b.build()
}

fn main() {
    let long = std::env::args().any(|a| a == "--bench");
    let cycles = if long { 60 } else { 5 };
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let tp = TopicPartition::new("failover", 0);
    engine
        .create_partition(&tp, PartitionConfig::default())
        .wait()
        .unwrap();
    let mut epoch = 0;
    let mut reference = Histogram::<u64>::new(3).unwrap();
    println!("stop_mirroring latency ({cycles} failovers each):");
    for open in [0usize, 10, 1000] {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for _ in 0..cycles {
            let mut at = engine
                .start_mirroring(
                    &tp,
                    StartMirroring {
                        source: "src".into(),
                        truncate_to: MirrorStart::LastStableOffset,
                    },
                )
                .wait()
                .unwrap();
            // One mirrored fetch: a non-transactional batch, then `open` producers each with a
            // transaction still open.
            let mut fetched = batch(1_000_000, 0, false, at);
            at = Offset(at.0 + 1);
            for p in 0..open {
                fetched.extend(batch(p as i64, 0, true, at));
                at = Offset(at.0 + 1);
            }
            for chunk in chunks(&fetched, 512 << 10) {
                engine.append(&tp, chunk, Origin::Mirror).wait().unwrap();
            }
            epoch += 1;
            let t = Instant::now();
            let out = engine
                .stop_mirroring(
                    &tp,
                    StopMirroring {
                        leader_epoch: epoch,
                        open_transactions: OpenTransactions::Abort,
                    },
                )
                .wait()
                .unwrap();
            h.record(t.elapsed().as_micros() as u64).unwrap();
            assert_eq!(out.aborted_producers.len(), open);
            // The reference: one durable local append.
            let t = Instant::now();
            engine
                .append(
                    &tp,
                    batch(2_000_000, epoch - 1, false, Offset(0)),
                    Origin::Client,
                )
                .wait()
                .unwrap();
            reference.record(t.elapsed().as_micros() as u64).unwrap();
        }
        println!(
            "  {open:>4} open transactions: p50 {:>6} us  p99 {:>6} us",
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99)
        );
    }
    println!(
        "  reference, one durable 1-record client append: p50 {} us  p99 {} us",
        reference.value_at_quantile(0.5),
        reference.value_at_quantile(0.99)
    );
    engine.close().unwrap();
}

/// Whole batches of `bytes`, in chunks of at most about `max` bytes.
fn chunks(bytes: &[u8], max: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut current = Vec::new();
    for b in format::BatchIter::new(bytes, 0) {
        if !current.is_empty() && current.len() + b.bytes().len() > max {
            out.push(std::mem::take(&mut current));
        }
        current.extend_from_slice(b.bytes());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}
