//! Compaction and mirroring (design.md §Mirroring): a compacted source's partition is mirrored as-is, its
//! gaps and emptied batches included, and the destination never compacts it while it mirrors;
//! after failover the destination compacts it itself; after failback the old source holds the
//! destination's bytes again from the failover point, and every key's newest value is the
//! same on both sides. Each cluster's directory passes `mirrorlog verify` at the end.

mod common;

use mirrorlog::api::{CleanupPolicy, CompactionConfig, Isolation, Origin};
use mirrorlog::engine::{
    Engine, EngineConfig, MirrorStart, PartitionConfig, ReadRequest, TopicPartition,
};
use mirrorlog::format::{
    BatchBuilder, BatchIter, BatchOptions, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::mirror::MirrorLink;
use std::collections::BTreeMap;
use std::sync::Arc;

struct Cluster {
    engine: Arc<Engine>,
    _dir: common::VerifiedDir,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
    Cluster {
        engine: Arc::new(engine),
        _dir: common::VerifiedDir(dir),
    }
}

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 16 << 10,
        append_buffer_bytes: 1 << 20,
        compaction: CompactionConfig {
            policy: CleanupPolicy::COMPACT,
            ..CompactionConfig::DEFAULT
        },
        ..PartitionConfig::default()
    }
}

/// `rounds` batches of producer `pid` from `*seq`, each writing 10 of 30 keys, values tagged.
fn produce(
    engine: &Engine,
    tp: &TopicPartition,
    pid: i64,
    seq: &mut i32,
    rounds: usize,
    tag: &str,
) {
    for round in 0..rounds {
        let mut b = BatchBuilder::new(BatchOptions {
            producer: ProducerFields {
                producer_id: pid,
                producer_epoch: 0,
                base_sequence: *seq,
            },
            ..BatchOptions::default()
        });
        let value = format!("{tag}-{round}-").repeat(20);
        for i in 0..10 {
            let key = format!("key-{}", (round * 10 + i) % 30);
            b.push(RecordSpec {
                timestamp: common::RECORDS_MS,
                key: Some(key.as_bytes()),
                value: Some(value.as_bytes()),
                headers: &[],
            });
        }
        engine.append(tp, b.build(), Origin::Client).wait().unwrap();
        *seq += 10;
    }
}

/// What a consumer of the compacted topic ends with: each key's newest value.
fn table(engine: &Engine, tp: &TopicPartition) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let bytes = common::engine_bytes_at(engine, tp, Offset(0), Isolation::ReadCommitted);
    let mut out = BTreeMap::new();
    for batch in BatchIter::new(&bytes, 0) {
        if batch.header().attributes.is_control() {
            continue;
        }
        for r in batch.records().unwrap() {
            let r = r.unwrap();
            out.insert(r.key.unwrap().to_vec(), r.value.unwrap().to_vec());
        }
    }
    out
}

fn end(engine: &Engine, tp: &TopicPartition) -> Offset {
    engine.state(tp).wait().unwrap().log_end
}

#[test]
fn compacted_source_mirrored_as_is_then_failover_compaction_and_failback() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("changelog", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    let mut seq_a = 0;
    produce(&a.engine, &tp, 1, &mut seq_a, 150, "a");
    let cleaned = a
        .engine
        .clean(&tp)
        .wait()
        .unwrap()
        .expect("the source compacts");
    assert!(cleaned.records_kept < cleaned.records_read);
    produce(&a.engine, &tp, 1, &mut seq_a, 10, "a2");

    // B mirrors A as-is: gaps and all.
    common::start_mirroring(&b.engine, &tp, "A", MirrorStart::Offset(Offset(0)));
    let link = MirrorLink::new(a.engine.clone(), tp.clone(), b.engine.clone(), tp.clone());
    link.catch_up().unwrap();
    let e = end(&a.engine, &tp);
    assert_eq!(end(&b.engine, &tp), e);
    assert_eq!(
        common::engine_bytes(&b.engine, &tp, Offset(0), e),
        common::engine_bytes(&a.engine, &tp, Offset(0), e),
        "the destination stores the compacted source's bytes"
    );
    let gapped = common::engine_bytes(&b.engine, &tp, Offset(0), e);
    let records: i64 = BatchIter::new(&gapped, 0)
        .map(|b| i64::from(b.header().records_count))
        .sum();
    assert!(
        records < e.0 / 2,
        "the source's gaps were copied, not filled"
    );
    // Never compacted while mirroring, whatever is asked.
    assert_eq!(b.engine.clean(&tp).wait().unwrap(), None);

    // Failover: B stops, takes local writes, and compacts by itself.
    let out = common::stop_mirroring(&b.engine, &tp, 2);
    assert_eq!(out.last_mirrored_offset, e);
    let mut seq_b = 0;
    produce(&b.engine, &tp, 50, &mut seq_b, 120, "b");
    let before = common::engine_bytes(&b.engine, &tp, Offset(0), end(&b.engine, &tp));
    let stats = b
        .engine
        .clean(&tp)
        .wait()
        .unwrap()
        .expect("Local now: B compacts");
    assert!(stats.records_kept < stats.records_read);
    let after = common::engine_bytes(&b.engine, &tp, Offset(0), end(&b.engine, &tp));
    assert!(after.len() < before.len());
    let barrier_kept = BatchIter::new(&after, 0)
        .any(|batch| batch.header().base_offset == e && batch.header().attributes.is_control());
    assert!(
        barrier_kept,
        "B's barrier at {} survives its compaction",
        e.0
    );

    // Failback: A truncates to the failover point and mirrors B as-is from there.
    common::start_mirroring(
        &a.engine,
        &tp,
        "B",
        MirrorStart::Offset(out.last_mirrored_offset),
    );
    let back = MirrorLink::new(b.engine.clone(), tp.clone(), a.engine.clone(), tp.clone());
    back.catch_up().unwrap();
    let e2 = end(&b.engine, &tp);
    assert_eq!(end(&a.engine, &tp), e2);
    assert_eq!(
        common::engine_bytes(&a.engine, &tp, e, e2),
        common::engine_bytes(&b.engine, &tp, e, e2),
        "byte-identical from the failover point"
    );
    assert_eq!(
        table(&a.engine, &tp),
        table(&b.engine, &tp),
        "the same newest value per key"
    );
    // A stops mirroring (B fails back over to it) and compacts: still the same table.
    common::stop_mirroring(&a.engine, &tp, 3);
    a.engine.clean(&tp).wait().unwrap();
    assert_eq!(table(&a.engine, &tp), table(&b.engine, &tp));
    let r = a
        .engine
        .read(
            &tp,
            ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadCommitted),
        )
        .wait()
        .unwrap();
    assert!(!r.records.is_empty());
}
