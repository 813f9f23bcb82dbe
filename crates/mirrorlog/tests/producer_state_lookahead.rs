//! The lookahead of a turn changes nothing: staging a turn's appends after
//! prefetching every append's producer slot gives exactly the results and the state of staging
//! them one by one, for arbitrary mixes of origins, producers (few, so most appends hit
//! existing entries; and many, for the multi-batch index), duplicates (retries of earlier
//! appends), rejections (wrong sequences and epochs, markers without transactions) and
//! barriers. Each append of a turn is validated against the state the appends before it left.
//! Replay a failure with `MIRRORLOG_SEED`.

mod common;

use mirrorlog::format::{BatchKind, Offset, ProducerFields};
use mirrorlog::internals::producer_state::{
    BatchInfo, Origin, ProducerStateConfig, ProducerStateManager,
};
use proptest::prelude::*;

/// One batch before offsets are assigned.
#[derive(Debug, Clone)]
enum Gen {
    Data {
        producer: i64,
        epoch: i16,
        seq: i32,
        records: i32,
        transactional: bool,
    },
    Marker {
        producer: i64,
        epoch: i16,
        commit: bool,
    },
    Barrier,
}

#[derive(Debug, Clone)]
enum Step {
    Append {
        origin: Origin,
        batches: Vec<Gen>,
        barrier_local: bool,
    },
    /// The client append `back` appends ago, again.
    Retry { back: usize },
}

fn gen_batch(producers: i64) -> impl Strategy<Value = Gen> {
    prop_oneof![
        8 => (0..producers, 0i16..2, 0i32..12, 1i32..4, any::<bool>()).prop_map(
            |(producer, epoch, seq, records, transactional)| Gen::Data {
                producer,
                epoch,
                seq: seq * 3,
                records,
                transactional,
            }
        ),
        2 => (0..producers, 0i16..2, any::<bool>())
            .prop_map(|(producer, epoch, commit)| Gen::Marker { producer, epoch, commit }),
        1 => Just(Gen::Barrier),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let origin = prop_oneof![
        4 => Just(Origin::Client),
        2 => Just(Origin::Coordinator),
        1 => Just(Origin::Replication),
        2 => Just(Origin::Mirror),
    ];
    prop_oneof![
        8 => (origin.clone(), proptest::collection::vec(gen_batch(5), 1..4), any::<bool>())
            .prop_map(|(origin, batches, barrier_local)| Step::Append { origin, batches, barrier_local }),
        1 => (origin, proptest::collection::vec(gen_batch(40), 9..30), any::<bool>())
            .prop_map(|(origin, batches, barrier_local)| Step::Append { origin, batches, barrier_local }),
        2 => (0usize..6).prop_map(|back| Step::Retry { back }),
    ]
}

/// A turn's appends, with offsets from `log_end` on (a rejected append's offsets are simply
/// never used; the log would refuse it before writing).
fn infos(
    turn: &[Step],
    log_end: &mut i64,
    clients: &mut Vec<BatchInfo>,
) -> Vec<(Origin, Vec<BatchInfo>, bool)> {
    let mut out = Vec::new();
    for s in turn {
        match s {
            Step::Retry { back } => {
                if let Some(b) = clients.iter().rev().nth(*back) {
                    out.push((Origin::Client, vec![*b], false));
                }
            }
            Step::Append {
                origin,
                batches,
                barrier_local,
            } => {
                let mut v = Vec::new();
                for g in batches {
                    let at = Offset(*log_end);
                    let info = match *g {
                        Gen::Data {
                            producer,
                            epoch,
                            seq,
                            records,
                            transactional,
                        } => BatchInfo {
                            base_offset: at,
                            last_offset: Offset(at.0 + i64::from(records) - 1),
                            producer: ProducerFields {
                                producer_id: producer,
                                producer_epoch: epoch,
                                base_sequence: seq,
                            },
                            transactional,
                            kind: BatchKind::Data,
                            timestamp: 1_000 + at.0,
                        },
                        Gen::Marker {
                            producer,
                            epoch,
                            commit,
                        } => BatchInfo {
                            base_offset: at,
                            last_offset: at,
                            producer: ProducerFields {
                                producer_id: producer,
                                producer_epoch: epoch,
                                base_sequence: -1,
                            },
                            transactional: true,
                            kind: BatchKind::TxnMarker {
                                commit,
                                coordinator_epoch: 0,
                            },
                            timestamp: 1_000 + at.0,
                        },
                        Gen::Barrier => BatchInfo {
                            base_offset: at,
                            last_offset: at,
                            producer: ProducerFields::NONE,
                            transactional: false,
                            kind: BatchKind::Barrier,
                            timestamp: 1_000 + at.0,
                        },
                    };
                    if *origin == Origin::Client && info.kind != BatchKind::Data {
                        continue;
                    }
                    *log_end = info.last_offset.0 + 1;
                    v.push(info);
                }
                if v.is_empty() {
                    continue;
                }
                if *origin == Origin::Client && v.len() == 1 {
                    clients.push(v[0]);
                }
                out.push((*origin, v, *barrier_local));
            }
        }
    }
    out
}

/// What one append gave: the duplicate's offsets and completed transactions, or the error.
type Outcome = Result<(Option<(Offset, Offset)>, Vec<String>), String>;

fn run(
    psm: &mut ProducerStateManager,
    infos: &[BatchInfo],
    origin: Origin,
    local: bool,
) -> Outcome {
    let staged = psm
        .stage(infos, origin, |_| local)
        .map_err(|e| e.to_string())?;
    let duplicate = staged.duplicate.map(|d| (d.first_offset(), d.last_offset));
    let completed = psm
        .apply(staged)
        .map_err(|e| e.to_string())?
        .iter()
        .map(|c| format!("{c:?}"))
        .collect();
    Ok((duplicate, completed))
}

fn state(psm: &ProducerStateManager) -> (Vec<String>, Vec<u8>) {
    let mut entries: Vec<String> = psm.producers().map(|e| format!("{e:?}")).collect();
    entries.sort();
    (entries, psm.snapshot())
}

proptest! {
    #![proptest_config(common::proptest_config("producer_state_lookahead", 256))]

    #[test]
    fn a_turn_staged_with_lookahead_equals_its_appends_staged_one_by_one(
        turns in proptest::collection::vec(proptest::collection::vec(step(), 1..12), 1..8),
    ) {
        let config = ProducerStateConfig::default();
        let (mut ahead, mut plain) = (ProducerStateManager::new(config), ProducerStateManager::new(config));
        let (mut log_end, mut clients) = (0i64, Vec::new());
        for turn in &turns {
            let appends = infos(turn, &mut log_end, &mut clients);
            // The lookahead: every append's producers, before the first is staged.
            for (_, batches, _) in &appends {
                for b in batches {
                    ahead.prefetch_producer(b.producer.producer_id);
                }
            }
            for (origin, batches, local) in &appends {
                let a = run(&mut ahead, batches, *origin, *local);
                let p = run(&mut plain, batches, *origin, *local);
                prop_assert_eq!(a, p, "{:?} {:?}", origin, batches);
            }
            prop_assert_eq!(state(&ahead), state(&plain));
        }
    }
}
