//! Kafka's error code for every engine error a request can meet.
//!
//! | engine | Kafka |
//! |---|---|
//! | unknown partition | `UNKNOWN_TOPIC_OR_PARTITION` (3) |
//! | a batch that does not validate (CRC, size, magic, records) | `CORRUPT_MESSAGE` (2) |
//! | over `max.message.bytes`, append over the request limit | `MESSAGE_TOO_LARGE` (10) |
//! | older producer epoch | `INVALID_PRODUCER_EPOCH` (47) |
//! | sequence gap | `OUT_OF_ORDER_SEQUENCE_NUMBER` (45) |
//! | non-transactional batch inside a transaction | `INVALID_TXN_STATE` (48) |
//! | older coordinator epoch | `TRANSACTION_COORDINATOR_FENCED` (52) |
//! | read-only partition (mirroring, paused, failed) | `POLICY_VIOLATION` (44), with the mode in the message: KIP-1279's `READ_ONLY_TOPIC` needs a Produce version clients do not send yet |
//! | offset outside the log | `OFFSET_OUT_OF_RANGE` (1) |
//! | device full, I/O failure, poisoned or corrupt partition | `KAFKA_STORAGE_ERROR` (56) |
//! | shard stopped (shutting down) | `NOT_LEADER_OR_FOLLOWER` (6), retriable |
//! | anything else | `UNKNOWN_SERVER_ERROR` (-1) |

use kafka_protocol::error::ResponseError;
use mirrorlog::engine::EngineError;

/// The code and a message for `e`.
pub fn code(e: &EngineError) -> i16 {
    kind(e).code()
}

/// The Kafka error for `e`.
pub fn kind(e: &EngineError) -> ResponseError {
    use mirrorlog::internals::log::LogError;
    use mirrorlog::internals::producer_state::ProducerStateError as P;
    match e {
        EngineError::UnknownPartition(_) | EngineError::InvalidPartition(_) => {
            ResponseError::UnknownTopicOrPartition
        }
        EngineError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        EngineError::ShardStopped(_) => ResponseError::NotLeaderOrFollower,
        EngineError::Failed { .. } | EngineError::Io(_) => ResponseError::KafkaStorageError,
        EngineError::Log { source, .. } => match source {
            LogError::ProducerState(p) => match p {
                P::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
                P::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
                P::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
                P::CoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
                _ => ResponseError::UnknownServerError,
            },
            LogError::Format(_) | LogError::EmptyAppend => ResponseError::CorruptMessage,
            LogError::AppendTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::ReadOnlyPartition { .. } => ResponseError::PolicyViolation,
            LogError::DiskFull
            | LogError::Poisoned(_)
            | LogError::NeedsRecovery { .. }
            | LogError::Corrupt { .. }
            | LogError::Unreadable { .. }
            | LogError::Segment(_) => ResponseError::KafkaStorageError,
            _ => ResponseError::UnknownServerError,
        },
        _ => ResponseError::UnknownServerError,
    }
}
