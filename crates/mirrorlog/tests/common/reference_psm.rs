//! A reference producer-state manager for tests and benches: the design.md §Producer state rules written the
//! plainest way, on `std::collections` (HashMap of entries with a VecDeque history, BTreeMap of
//! open transactions). Every append works on a clone of the whole state that replaces it only if
//! the append is valid: obviously all-or-nothing, obviously slow. It shares no code with
//! `src/producer_state` beyond the format types and the error enum it must agree on.
#![allow(dead_code)]

use mirrorlog::format::{BatchKind, Offset};
use mirrorlog::internals::producer_state::{BatchInfo, CompletedTxn, Origin, ProducerStateError};
use std::collections::{BTreeMap, HashMap, VecDeque};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefBatch {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefEntry {
    pub epoch: i16,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    pub txn_first_offset: Option<i64>,
    pub batches: VecDeque<RefBatch>,
}

impl RefEntry {
    fn empty() -> Self {
        RefEntry {
            epoch: -1,
            coordinator_epoch: -1,
            last_timestamp: -1,
            txn_first_offset: None,
            batches: VecDeque::new(),
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RefPsm {
    pub entries: HashMap<i64, RefEntry>,
    /// first offset → producer id.
    pub ongoing: BTreeMap<i64, i64>,
    pub expiration_ms: i64,
}

/// What an append did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefOutcome {
    Duplicate { first_offset: i64, last_offset: i64 },
    Appended { completed: Vec<CompletedTxn> },
}

fn wrap_add(seq: i32, n: i32) -> i32 {
    ((i64::from(seq) + i64::from(n)) % (1i64 << 31)) as i32
}

impl RefPsm {
    pub fn new(expiration_ms: i64) -> Self {
        RefPsm {
            expiration_ms,
            ..RefPsm::default()
        }
    }

    pub fn append(
        &mut self,
        batches: &[BatchInfo],
        origin: Origin,
        barrier_local: bool,
    ) -> Result<RefOutcome, ProducerStateError> {
        let mut next = self.clone();
        // Epoch of each producer before this append, for the "unknown epoch" sequence rule.
        let mut before: HashMap<i64, i16> = HashMap::new();
        let mut completed: Vec<CompletedTxn> = Vec::new();
        let stale_ok = matches!(origin, Origin::Replication | Origin::Mirror);
        for b in batches {
            let pid = b.producer.producer_id;
            let epoch = b.producer.producer_epoch;
            match b.kind {
                BatchKind::Barrier => {
                    if barrier_local {
                        next.entries.clear();
                        next.ongoing.clear();
                        before.clear();
                    }
                    continue;
                }
                BatchKind::OtherControl { .. } => continue,
                _ if pid < 0 => continue,
                BatchKind::EmptyControl => {
                    // Kafka creates the producer's entry (empty, or unchanged if it exists).
                    next.entries.entry(pid).or_insert_with(RefEntry::empty);
                    continue;
                }
                _ => {}
            }
            let committed_epoch = *before
                .entry(pid)
                .or_insert_with(|| next.entries.get(&pid).map_or(-1, |e| e.epoch));
            let e = next.entries.entry(pid).or_insert_with(RefEntry::empty);
            let offset = b.base_offset;
            if epoch < e.epoch && !stale_ok {
                return Err(ProducerStateError::InvalidProducerEpoch {
                    producer_id: pid,
                    offset,
                    epoch,
                    current_epoch: e.epoch,
                });
            }
            let delta = (b.last_offset.0 - b.base_offset.0) as i32;
            let first_seq = b.producer.base_sequence;
            let last_seq = if first_seq < 0 {
                first_seq
            } else {
                wrap_add(first_seq, delta)
            };
            match b.kind {
                BatchKind::TxnMarker {
                    commit,
                    coordinator_epoch,
                } => {
                    if e.coordinator_epoch > coordinator_epoch && !stale_ok {
                        return Err(ProducerStateError::CoordinatorFenced {
                            producer_id: pid,
                            offset,
                            coordinator_epoch,
                            current_coordinator_epoch: e.coordinator_epoch,
                        });
                    }
                    if let Some(first) = e.txn_first_offset.take() {
                        next.ongoing.remove(&first);
                        completed.push(CompletedTxn {
                            producer_id: pid,
                            first_offset: Offset(first),
                            last_offset: offset,
                            aborted: !commit,
                            last_stable_offset: Offset(-1), // filled below
                        });
                    }
                    e.set_epoch(epoch);
                    e.coordinator_epoch = coordinator_epoch;
                    e.last_timestamp = b.timestamp;
                }
                _ => {
                    if origin == Origin::Client && batches.len() == 1 && epoch == e.epoch {
                        if let Some(d) = e
                            .batches
                            .iter()
                            .find(|d| d.first_seq == first_seq && d.last_seq == last_seq)
                        {
                            return Ok(RefOutcome::Duplicate {
                                first_offset: d.first_offset,
                                last_offset: d.last_offset,
                            });
                        }
                    }
                    if origin == Origin::Client {
                        let ok = if epoch != e.epoch {
                            first_seq == 0 || e.epoch == -1
                        } else {
                            let last = e.last_seq();
                            committed_epoch == -1
                                || i64::from(first_seq) == i64::from(last) + 1
                                || (first_seq == 0 && last == i32::MAX)
                        };
                        if !ok {
                            return Err(ProducerStateError::OutOfOrderSequence {
                                producer_id: pid,
                                offset,
                                epoch,
                                first_seq,
                                current_epoch: e.epoch,
                                last_seq: e.last_seq(),
                            });
                        }
                    }
                    e.set_epoch(epoch);
                    e.batches.push_back(RefBatch {
                        first_seq: if last_seq < 0 { -1 } else { first_seq },
                        last_seq,
                        first_offset: b.base_offset.0,
                        last_offset: b.last_offset.0,
                        timestamp: b.timestamp,
                    });
                    if e.batches.len() > 5 {
                        e.batches.pop_front();
                    }
                    e.last_timestamp = b.timestamp;
                    match (e.txn_first_offset, b.transactional) {
                        (Some(first), false) => {
                            return Err(ProducerStateError::InvalidTxnState {
                                producer_id: pid,
                                offset,
                                txn_first_offset: Offset(first),
                            })
                        }
                        (None, true) => {
                            e.txn_first_offset = Some(offset.0);
                            next.ongoing.insert(offset.0, pid);
                        }
                        _ => {}
                    }
                }
            }
        }
        // lastStableOffset as Kafka computes it after the whole append: the earliest transaction
        // of another producer that is open at the end or completes later in this append.
        for i in 0..completed.len() {
            let me = completed[i].producer_id;
            let open = next.ongoing.iter().find(|(_, &p)| p != me).map(|(&o, _)| o);
            let later = completed[i + 1..]
                .iter()
                .filter(|c| c.producer_id != me)
                .map(|c| c.first_offset.0)
                .min();
            let lso = [open, later].into_iter().flatten().min();
            completed[i].last_stable_offset = Offset(lso.unwrap_or(completed[i].last_offset.0 + 1));
        }
        *self = next;
        Ok(RefOutcome::Appended { completed })
    }

    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    pub fn remove_expired(&mut self, now_ms: i64) {
        let expiration = self.expiration_ms;
        self.entries
            .retain(|_, e| e.txn_first_offset.is_some() || now_ms - e.last_timestamp < expiration);
    }

    /// What a snapshot keeps: the newest batch only, minus producers expired at `now_ms`.
    pub fn reload_from_snapshot(&mut self, now_ms: i64) {
        for e in self.entries.values_mut() {
            while e.batches.len() > 1 {
                e.batches.pop_front();
            }
            if let Some(b) = e.batches.back_mut() {
                // The snapshot stores one timestamp per producer: its last timestamp.
                b.timestamp = e.last_timestamp;
            }
        }
        self.remove_expired(now_ms);
        self.ongoing = self
            .entries
            .iter()
            .filter_map(|(&p, e)| e.txn_first_offset.map(|o| (o, p)))
            .collect();
    }
}
