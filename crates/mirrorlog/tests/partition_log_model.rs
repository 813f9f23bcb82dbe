//! Model-based test of the partition log on the simulated disk: random sequences of client
//! appends (several producers, some transactional with markers), commits, rolls, truncations,
//! delete-records and clean close/open cycles run against the log and against a plain model
//! (the list of batches the log must hold). After every operation, every batch the model holds
//! must read back byte-identical from the log (offsets, leader epochs and all), nothing else may
//! be readable, and the log end, durable end and LSO must match. Replay with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{
    self, BatchBuilder, BatchIter, BatchOptions, MarkerSpec, Offset, ProducerFields, RecordSpec,
};
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::{Isolation, LogConfig, PartitionLog};
use proptest::prelude::*;
use std::path::Path;

const CONFIG: LogConfig = common::log_config(16 << 10, 1024, 16 << 10);

#[derive(Debug, Clone)]
enum Op {
    Append {
        producer: i64,
        records: i32,
        transactional: bool,
    },
    EndTxn {
        producer: i64,
        commit: bool,
    },
    Commit,
    Roll,
    Truncate {
        back: u8,
    },
    DeleteRecords {
        fraction: u8,
    },
    CloseOpen,
    Epoch,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0i64..3, 1i32..12, any::<bool>()).prop_map(|(producer, records, transactional)| Op::Append { producer, records, transactional }),
        2 => (0i64..3, any::<bool>()).prop_map(|(producer, commit)| Op::EndTxn { producer, commit }),
        3 => Just(Op::Commit),
        1 => Just(Op::Roll),
        1 => any::<u8>().prop_map(|back| Op::Truncate { back }),
        1 => any::<u8>().prop_map(|fraction| Op::DeleteRecords { fraction }),
        1 => Just(Op::CloseOpen),
        1 => Just(Op::Epoch),
    ]
}

/// What the model knows of one producer: next sequence and whether a transaction is open.
#[derive(Debug, Clone, Copy, Default)]
struct Producer {
    next_seq: i32,
    in_txn: bool,
}

struct Model {
    /// Every batch the log holds, as stored (offsets and epoch stamped).
    batches: Vec<Vec<u8>>,
    producers: [Producer; 3],
    log_start: Offset,
    epoch: i32,
}

impl Model {
    fn end(&self) -> Offset {
        self.batches
            .last()
            .map_or(self.log_start.max(Offset(0)), |b| {
                Offset(format::inspect(b, 0).unwrap().header().last_offset().0 + 1)
            })
    }
}

fn run(ops: &[Op]) {
    let mut io = SimIo::new(SimConfig {
        seed: 7,
        ..SimConfig::default()
    });
    let dir = Path::new("/sim/model-0");
    let mut log = PartitionLog::create(&mut io, dir, CONFIG).unwrap();
    let mut model = Model {
        batches: Vec::new(),
        producers: [Producer::default(); 3],
        log_start: Offset(0),
        epoch: 0,
    };
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Append {
                producer,
                records,
                transactional,
            } => {
                let expected_first = model.end();
                let p = &mut model.producers[producer as usize];
                let transactional = transactional || p.in_txn;
                let mut b = BatchBuilder::new(BatchOptions {
                    producer: ProducerFields {
                        producer_id: producer,
                        producer_epoch: 0,
                        base_sequence: p.next_seq,
                    },
                    transactional,
                    ..BatchOptions::default()
                });
                for i in 0..records {
                    b.push(RecordSpec {
                        timestamp: 1_764_403_200_000 + i64::from(i),
                        key: None,
                        value: Some(&[7; 50]),
                        headers: &[],
                    });
                }
                let bytes = b.build();
                let out = log
                    .append(&mut io, &bytes, Origin::Client)
                    .unwrap_or_else(|e| panic!("step {step}: {e}"));
                assert_eq!(out.first_offset, expected_first, "step {step}");
                let mut stored = bytes;
                format::stamp_base_offset(&mut stored, out.first_offset).unwrap();
                format::stamp_partition_leader_epoch(&mut stored, model.epoch).unwrap();
                p.next_seq += records;
                p.in_txn = transactional;
                model.batches.push(stored);
            }
            Op::EndTxn { producer, commit } => {
                if !model.producers[producer as usize].in_txn {
                    continue;
                }
                let marker = format::build_marker(&MarkerSpec {
                    base_offset: Offset(0),
                    partition_leader_epoch: 0,
                    producer_id: producer,
                    producer_epoch: 0,
                    commit,
                    coordinator_epoch: 0,
                    timestamp: 1_764_403_200_000,
                });
                let out = log.append(&mut io, &marker, Origin::Coordinator).unwrap();
                let mut stored = marker;
                format::stamp_base_offset(&mut stored, out.first_offset).unwrap();
                format::stamp_partition_leader_epoch(&mut stored, model.epoch).unwrap();
                model.batches.push(stored);
                model.producers[producer as usize].in_txn = false;
            }
            Op::Commit => {
                log.commit(&mut io).unwrap();
            }
            Op::Roll => {
                log.roll(&mut io).unwrap();
            }
            Op::Truncate { back } => {
                if model.batches.is_empty() {
                    continue;
                }
                let keep =
                    model.batches.len() - (usize::from(back) % model.batches.len().min(8) + 1);
                let first_kept = format::inspect(&model.batches[0], 0)
                    .unwrap()
                    .header()
                    .base_offset;
                let cut = model
                    .batches
                    .get(keep)
                    .map(|b| format::inspect(b, 0).unwrap().header().base_offset)
                    .unwrap();
                if cut < model.log_start || cut < first_kept {
                    continue;
                }
                let new_end = log.truncate_to(&mut io, cut).unwrap();
                assert_eq!(new_end, cut, "step {step}");
                model.batches.truncate(keep);
                // Rebuild the model's producers from what remains.
                model.producers = [Producer::default(); 3];
                for b in &model.batches {
                    let v = format::inspect(b, 0).unwrap();
                    let h = v.header();
                    let pid = h.producer.producer_id;
                    if pid < 0 {
                        continue;
                    }
                    let p = &mut model.producers[pid as usize];
                    if v.kind() == format::BatchKind::Data {
                        p.next_seq = h.producer.base_sequence + h.records_count;
                        p.in_txn = h.attributes.is_transactional();
                    } else {
                        p.in_txn = false;
                    }
                }
            }
            Op::DeleteRecords { fraction } => {
                log.commit(&mut io).unwrap();
                let hw = log.high_watermark();
                let target = Offset(
                    model.log_start.0 + (hw.0 - model.log_start.0) * i64::from(fraction % 4) / 4,
                );
                let start = log.delete_records(&mut io, target).unwrap();
                model.log_start = start;
            }
            Op::CloseOpen => {
                log.close(&mut io).unwrap();
                log = PartitionLog::open(&mut io, dir, CONFIG).unwrap();
                // Open starts from the first remaining segment, and resumes the latest cached
                // epoch; the broker re-asserts its own, as after any restart.
                model.log_start = log.log_start();
                log.set_leader_epoch(model.epoch);
            }
            Op::Epoch => {
                model.epoch += 1;
                log.set_leader_epoch(model.epoch);
            }
        }
        log.commit(&mut io).unwrap();
        check(&mut io, &mut log, &model, step);
    }
}

fn check(io: &mut SimIo, log: &mut PartitionLog, model: &Model, step: usize) {
    assert_eq!(log.log_end(), model.end(), "step {step}: log end");
    assert_eq!(log.durable_end(), model.end(), "step {step}: durable end");
    let expected: Vec<u8> = model
        .batches
        .iter()
        .filter(|b| format::inspect(b, 0).unwrap().header().last_offset() >= log.log_start())
        .flat_map(|b| b.iter().copied())
        .collect();
    let mut got = Vec::new();
    let mut at = log.log_start();
    while at < log.high_watermark() {
        let r = log
            .read(io, at, 1 << 20, Isolation::ReadUncommitted)
            .unwrap();
        let last = BatchIter::new(&r.records, 0)
            .last()
            .unwrap_or_else(|| panic!("step {step}: nothing at {at}"));
        at = Offset(last.header().last_offset().0 + 1);
        got.extend_from_slice(&r.records);
    }
    assert!(
        got == expected,
        "step {step}: readable bytes differ ({} vs {} bytes)",
        got.len(),
        expected.len()
    );
    let open_txn = model.producers.iter().any(|p| p.in_txn);
    if !open_txn {
        assert_eq!(
            log.last_stable_offset(),
            log.high_watermark(),
            "step {step}: LSO"
        );
    } else {
        // ... below the high watermark, unless delete-records moved the log start up to it:
        // the LSO never falls below the log start (Kafka clamps the first unstable offset to
        // it), so there both are the log start.
        assert!(
            log.last_stable_offset() < log.high_watermark()
                || log.last_stable_offset() == log.log_start(),
            "step {step}: an open transaction holds the LSO"
        );
    }
}

proptest! {
    #![proptest_config(common::proptest_config("partition_log_agrees_with_its_model", 96))]
    #[test]
    fn partition_log_agrees_with_its_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops);
    }
}
