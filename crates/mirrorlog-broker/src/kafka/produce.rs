//! Produce: record batch v2 only; every partition's records are one engine append as
//! `Origin::Client` (offsets assigned, sequences and epochs checked by the engine's PSM), queued
//! before the next request is read. `acks` 1 and -1 are answered when the append is durable (one
//! node: every ack is a durable ack); `acks=0` gets no response, and a failure of one closes the
//! connection, as Kafka does. A client's retry of a batch
//! already stored is answered with the stored batch's offset and no error, as Kafka answers a
//! duplicate it finds in its producer state.

use super::{later, str_bytes, topic_name, Reply};
use crate::acl::{Operation, ResourceType};
use crate::broker::Shared;
use crate::kafka::errors;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::engine::{AppendOutcome, Call, Origin, TopicPartition};
use mirrorlog::format::frames;

/// The most characters of a topic name a log line carries (a request may name one of 32,767
/// bytes; a valid one has at most 249).
const LOGGED_NAME_CHARS_MAX: usize = 249;

enum Started {
    Error(ResponseError, Option<String>),
    /// The append and its records' bytes (counted in `GET /metrics` once durable).
    Append(Call<AppendOutcome>, u64),
}

/// A topic's name (as a string, and the request's bytes for its metrics label) and each of its
/// partitions' append started or refused.
type TopicStarted = (String, StrBytes, Vec<(i32, Started)>);

/// Starts the appends of `r`; the reply resolves when they are durable.
///
/// Transactional records need a transactional id the session may WRITE (Kafka's
/// `handleProduceRequest`): without one, or without the ACL, every partition gets
/// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED` and nothing is appended (a transactional batch with
/// no coordinator behind it would pin the partition's LSO for ever). Each topic needs WRITE on
/// the topic (`TOPIC_AUTHORIZATION_FAILED`). From version 3 a partition carries exactly one
/// batch (`INVALID_RECORD` otherwise, as Kafka's `ProduceRequest.validateRecords`).
pub fn produce(b: &Shared, who: &Session, r: ProduceRequest, version: i16) -> Reply {
    let acks = r.acks;
    let valid_acks = matches!(acks, -1..=1);
    let transactional = r.topic_data.iter().any(|t| {
        t.partition_data.iter().any(|p| {
            p.records.as_deref().is_some_and(|records| {
                frames(records)
                    .next()
                    .is_some_and(|f| f.header.attributes.is_transactional())
            })
        })
    });
    let txn_denied = transactional
        && r.transactional_id
            .as_ref()
            .is_none_or(|id| !who.may(b, Operation::Write, ResourceType::TransactionalId, id));
    let mut topics: Vec<TopicStarted> = Vec::with_capacity(r.topic_data.len());
    for t in r.topic_data {
        let name = t.name.0.to_string();
        let label = t.name.0;
        let denied = txn_denied || !who.may_topic(b, Operation::Write, &name);
        let mut parts = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let started = if !valid_acks {
                Started::Error(ResponseError::InvalidRequiredAcks, None)
            } else if txn_denied {
                Started::Error(ResponseError::TransactionalIdAuthorizationFailed, None)
            } else if denied {
                Started::Error(ResponseError::TopicAuthorizationFailed, None)
            } else if name == crate::coordinator::groups::OFFSETS_TOPIC {
                // Kafka: clients never append to an internal topic.
                Started::Error(
                    ResponseError::InvalidTopicException,
                    Some(format!("Cannot append to internal topic {name}")),
                )
            } else if !b.has_partition(&name, p.index) {
                Started::Error(ResponseError::UnknownTopicOrPartition, None)
            } else if let Some(refusal) = batch_count_refusal(version, p.records.as_deref()) {
                Started::Error(ResponseError::InvalidRecord, Some(refusal))
            } else {
                match p.records {
                    Some(records) if !records.is_empty() => {
                        let bytes = records.len() as u64;
                        let call = b.engine.append(
                            &TopicPartition::new(&name, p.index),
                            records,
                            Origin::Client,
                        );
                        Started::Append(call, bytes)
                    }
                    _ => Started::Error(
                        ResponseError::CorruptMessage,
                        Some("a produce without records".into()),
                    ),
                }
            };
            parts.push((p.index, started));
        }
        topics.push((name, label, parts));
    }
    if acks == 0 {
        // No one to answer. As Kafka does, a failure closes the connection once the appends
        // resolve (in request order), so the client notices and refreshes its metadata.
        let b = b.clone();
        return Reply::None(Box::pin(async move {
            // One line per request, whatever it names: a request listing 10^5 partitions under
            // a 32 KiB name must not write 3 GB of log (found by the wire fuzzer's long run).
            let (mut first, mut failures) = (None, 0usize);
            for (name, label, parts) in topics {
                let mut appended = 0;
                for (index, started) in parts {
                    let error = match started {
                        Started::Error(code, _) => Some(code.to_string()),
                        Started::Append(call, bytes) => match call.await {
                            Ok(_) => {
                                appended += bytes;
                                None
                            }
                            Err(e) => Some(e.to_string()),
                        },
                    };
                    if let Some(error) = error {
                        failures += 1;
                        first.get_or_insert_with(|| (name.clone(), index, error));
                    }
                }
                b.metrics.bytes_in(&label, appended);
            }
            if let Some((name, index, error)) = &first {
                let topic: String = name.chars().take(LOGGED_NAME_CHARS_MAX).collect();
                tracing::info!(%topic, partition = index, %error, failures,
                    "acks=0 produce failed: closing the connection");
            }
            first.is_some()
        }));
    }
    let started = std::time::Instant::now();
    let b = b.clone();
    later(async move {
        let mut resp = ProduceResponse::default();
        for (name, label, parts) in topics {
            let mut t = TopicProduceResponse::default();
            t.name = topic_name(&name);
            let mut appended = 0;
            for (index, started) in parts {
                let mut p = PartitionProduceResponse::default();
                p.index = index;
                p.log_append_time_ms = -1;
                p.log_start_offset = -1;
                match started {
                    Started::Error(code, message) => {
                        p.error_code = code.code();
                        p.base_offset = -1;
                        p.error_message = message.as_deref().map(str_bytes);
                    }
                    Started::Append(call, bytes) => match call.await {
                        Ok(out) => {
                            appended += bytes;
                            p.base_offset = out.first_offset.0;
                        }
                        Err(e) => {
                            p.error_code = errors::code(&e);
                            p.base_offset = -1;
                            p.error_message = Some(str_bytes(&e.to_string()));
                            // KIP-467 (Produce v8+): which records failed, so that the client
                            // fails those and retries none of the rest as failed themselves.
                            if let Some((records, summary)) = errors::record_errors(&e) {
                                p.record_errors = records
                                    .into_iter()
                                    .map(|(i, m)| {
                                        let mut r = BatchIndexAndErrorMessage::default();
                                        r.batch_index = i;
                                        r.batch_index_error_message = Some(str_bytes(&m));
                                        r
                                    })
                                    .collect();
                                p.error_message = Some(str_bytes(&summary));
                            }
                        }
                    },
                }
                t.partition_responses.push(p);
            }
            b.metrics.bytes_in(&label, appended);
            resp.responses.push(t);
        }
        tracing::trace!(
            elapsed_us = started.elapsed().as_micros() as u64,
            partitions = resp
                .responses
                .iter()
                .map(|t| t.partition_responses.len())
                .sum::<usize>(),
            "produce answered"
        );
        ResponseKind::Produce(resp)
    })
}

/// Kafka's refusal of a version 3+ partition that does not carry exactly one batch. Bytes that
/// are not a batch at all are left to the engine's validation (`CORRUPT_MESSAGE`).
fn batch_count_refusal(version: i16, records: Option<&[u8]>) -> Option<String> {
    if version < 3 {
        return None;
    }
    let records = records.unwrap_or_default();
    let mut walk = frames(records);
    match (walk.next(), walk.next()) {
        (None, _) if records.is_empty() => Some(format!(
            "Produce requests with version {version} must have at least one record batch per partition"
        )),
        (Some(_), Some(_)) => Some(format!(
            "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
        )),
        _ => None,
    }
}
