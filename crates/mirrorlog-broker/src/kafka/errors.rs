//! Kafka's error code for every engine error a request can meet.
//!
//! | engine | Kafka |
//! |---|---|
//! | unknown partition | `UNKNOWN_TOPIC_OR_PARTITION` (3) |
//! | a batch that does not validate (CRC, size, magic, records) | `CORRUPT_MESSAGE` (2) |
//! | a record without a key for a compacted topic | `INVALID_RECORD` (87) |
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
//!
//! Some codes are newer than some request versions: a client that speaks only the older
//! version does not know them and fails with an unknown error. [`for_version`] answers those
//! versions with the code Kafka's `KafkaApis` sends them instead.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;

/// `code` as Kafka answers it to version `version` of `api` (`KafkaApis`, and the `*Response`
/// classes' "for version <= n" notes):
/// - `PRODUCER_FENCED` (90) is `INVALID_PRODUCER_EPOCH` (47) to InitProducerId below v4 and to
///   AddPartitionsToTxn and EndTxn below v2 (`handleInitProducerIdRequest`,
///   `handleAddPartitionsToTxnRequest`, `handleEndTxnRequest`);
/// - `KAFKA_STORAGE_ERROR` (56) is `NOT_LEADER_OR_FOLLOWER` (6) to Fetch up to v5
///   (`maybeDownConvertStorageError`), so that an old consumer refreshes its metadata and
///   retries instead of failing.
#[must_use]
pub fn for_version(api: ApiKey, version: i16, code: i16) -> i16 {
    let fenced = ResponseError::ProducerFenced.code();
    let storage = ResponseError::KafkaStorageError.code();
    match api {
        ApiKey::InitProducerId if version < 4 && code == fenced => {
            ResponseError::InvalidProducerEpoch.code()
        }
        ApiKey::AddPartitionsToTxn | ApiKey::AddOffsetsToTxn | ApiKey::EndTxn
            if version < 2 && code == fenced =>
        {
            ResponseError::InvalidProducerEpoch.code()
        }
        ApiKey::Fetch if version <= 5 && code == storage => {
            ResponseError::NotLeaderOrFollower.code()
        }
        _ => code,
    }
}
use mirrorlog::engine::EngineError;

/// Kafka's per-record errors for `e` (KIP-467's `record_errors`) and its summary message, when
/// the engine refused records of a batch one by one: each keyless record of a compacted
/// partition, with Kafka's `LogValidator` wording.
pub fn record_errors(e: &EngineError) -> Option<(Vec<(i32, String)>, String)> {
    use mirrorlog::api::LogError;
    let EngineError::Log {
        partition,
        source: LogError::KeylessRecordInCompactedLog { indexes, .. },
    } = e
    else {
        return None;
    };
    let errors: Vec<(i32, String)> = indexes
        .iter()
        .map(|&i| {
            (
                i32::try_from(i).unwrap_or(i32::MAX),
                format!(
                    "Compacted topic cannot accept message without key in topic partition {partition}"
                ),
            )
        })
        .collect();
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    let summary = format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    );
    Some((errors, summary))
}

/// The code and a message for `e`.
pub fn code(e: &EngineError) -> i16 {
    kind(e).code()
}

/// The Kafka error for `e`.
pub fn kind(e: &EngineError) -> ResponseError {
    use mirrorlog::api::LogError;
    use mirrorlog::api::ProducerStateError as P;
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
            LogError::Format(f) => format_kind(f),
            LogError::EmptyAppend => ResponseError::CorruptMessage,
            LogError::KeylessRecordInCompactedLog { .. } => ResponseError::InvalidRecord,
            LogError::AppendTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::ReadOnlyPartition { .. } => ResponseError::PolicyViolation,
            LogError::DiskFull
            | LogError::TooManyOpenFiles { .. }
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

/// Kafka's code for a batch refused by the format's rules: bytes that are not a batch
/// (length, magic, CRC, a payload that does not decompress) are `CORRUPT_MESSAGE`, as Kafka's
/// `CorruptRecordException`; a batch whose records break `LogValidator`'s rules (count, offset
/// deltas, control records, sequences) is `INVALID_RECORD`, as its `InvalidRecordException`;
/// a timestamp out of bounds is `INVALID_TIMESTAMP`.
fn format_kind(f: &mirrorlog::format::FormatError) -> ResponseError {
    use mirrorlog::format::FormatError as F;
    match f {
        F::TimestampOutOfRange { .. } => ResponseError::InvalidTimestamp,
        F::NoRecords { .. }
        | F::OffsetDeltaMismatch { .. }
        | F::RecordCountMismatch { .. }
        | F::LastOffsetDeltaMismatch { .. }
        | F::ControlBatchFromClient { .. }
        | F::MissingSequence { .. } => ResponseError::InvalidRecord,
        _ => ResponseError::CorruptMessage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_newer_than_the_version_are_down_converted_at_kafkas_boundaries() {
        let fenced = ResponseError::ProducerFenced.code();
        let epoch = ResponseError::InvalidProducerEpoch.code();
        let storage = ResponseError::KafkaStorageError.code();
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        let cases = [
            (ApiKey::InitProducerId, 3, fenced, epoch),
            (ApiKey::InitProducerId, 4, fenced, fenced),
            (ApiKey::AddPartitionsToTxn, 1, fenced, epoch),
            (ApiKey::AddPartitionsToTxn, 2, fenced, fenced),
            (ApiKey::EndTxn, 1, fenced, epoch),
            (ApiKey::EndTxn, 2, fenced, fenced),
            (ApiKey::Fetch, 5, storage, not_leader),
            (ApiKey::Fetch, 6, storage, storage),
            (ApiKey::Produce, 3, storage, storage),
            (ApiKey::EndTxn, 0, epoch, epoch),
        ];
        for (api, version, code, want) in cases {
            assert_eq!(for_version(api, version, code), want, "{api:?} v{version}");
        }
    }
}
