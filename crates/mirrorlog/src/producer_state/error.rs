//! Errors of the producer state layer. The partition is named by the layer above.

use crate::format::Offset;

/// Why an append breaks a producer-state rule. Nothing was changed when one is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerStateError {
    /// The batch's epoch is lower than the producer's (Client and Coordinator origins).
    #[error("producer {producer_id} at offset {offset}: epoch {epoch} is older than the current {current_epoch}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// First offset of the batch.
        offset: Offset,
        /// The batch's epoch.
        epoch: i16,
        /// The producer's epoch.
        current_epoch: i16,
    },
    /// The batch's first sequence does not follow the producer's last (Client origin).
    #[error("producer {producer_id} at offset {offset}: sequence {first_seq} (epoch {epoch}) does not follow last sequence {last_seq} (epoch {current_epoch})")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// First offset of the batch.
        offset: Offset,
        /// The batch's epoch.
        epoch: i16,
        /// The batch's first sequence.
        first_seq: i32,
        /// The producer's epoch before the batch.
        current_epoch: i16,
        /// The producer's last sequence (−1 if none).
        last_seq: i32,
    },
    /// A non-transactional batch while the producer has an open transaction.
    #[error("producer {producer_id} at offset {offset}: non-transactional batch while its transaction from offset {txn_first_offset} is open")]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
        /// First offset of the batch.
        offset: Offset,
        /// First offset of the open transaction.
        txn_first_offset: Offset,
    },
    /// A marker's coordinator epoch is lower than the producer's (Client and Coordinator origins).
    #[error("producer {producer_id} at offset {offset}: coordinator epoch {coordinator_epoch} is older than the current {current_coordinator_epoch}")]
    CoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// Offset of the marker.
        offset: Offset,
        /// The marker's coordinator epoch.
        coordinator_epoch: i32,
        /// The producer's coordinator epoch.
        current_coordinator_epoch: i32,
    },
    /// The append would take the partition past the most producers one table holds.
    #[error("producer {producer_id} at offset {offset}: the partition already tracks the maximum {max} producers")]
    TooManyProducers {
        /// The producer that did not fit.
        producer_id: i64,
        /// First offset of its batch.
        offset: Offset,
        /// The limit.
        max: usize,
    },
    /// `apply` was given a stage that is not the latest (state changed since, or it was applied).
    #[error("staged append is stale: the producer state changed after it was staged")]
    StaleStage,
}
