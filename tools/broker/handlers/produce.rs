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
use crate::errors;
use crate::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};
use mirrorlog::engine::{AppendOutcome, Call, Origin, TopicPartition};

enum Started {
    Error(ResponseError, Option<String>),
    Append(Call<AppendOutcome>),
}

/// Starts the appends of `r`; the reply resolves when they are durable.
///
/// ACLs (Kafka's): a transactional produce needs WRITE on its transactional id (every partition
/// gets `TRANSACTIONAL_ID_AUTHORIZATION_FAILED` otherwise), each topic WRITE on the topic
/// (`TOPIC_AUTHORIZATION_FAILED`).
pub fn produce(b: &Shared, who: &Session, r: ProduceRequest, _version: i16) -> Reply {
    let acks = r.acks;
    let valid_acks = matches!(acks, -1..=1);
    let txn_denied = r
        .transactional_id
        .as_ref()
        .is_some_and(|id| !who.may(b, Operation::Write, ResourceType::TransactionalId, id));
    let mut topics: Vec<(String, Vec<(i32, Started)>)> = Vec::with_capacity(r.topic_data.len());
    for t in r.topic_data {
        let name = t.name.0.to_string();
        let denied = txn_denied || !who.may_topic(b, Operation::Write, &name);
        let mut parts = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let started = if !valid_acks {
                Started::Error(ResponseError::InvalidRequiredAcks, None)
            } else if txn_denied {
                Started::Error(ResponseError::TransactionalIdAuthorizationFailed, None)
            } else if denied {
                Started::Error(ResponseError::TopicAuthorizationFailed, None)
            } else if name == crate::groups::OFFSETS_TOPIC {
                // Kafka: clients never append to an internal topic.
                Started::Error(
                    ResponseError::InvalidTopicException,
                    Some(format!("Cannot append to internal topic {name}")),
                )
            } else if !b.has_partition(&name, p.index) {
                Started::Error(ResponseError::UnknownTopicOrPartition, None)
            } else {
                match p.records {
                    Some(records) if !records.is_empty() => Started::Append(b.engine.append(
                        &TopicPartition::new(&name, p.index),
                        records,
                        Origin::Client,
                    )),
                    _ => Started::Error(
                        ResponseError::CorruptMessage,
                        Some("a produce without records".into()),
                    ),
                }
            };
            parts.push((p.index, started));
        }
        topics.push((name, parts));
    }
    if acks == 0 {
        // No one to answer. As Kafka does, a failure closes the connection once the appends
        // resolve (in request order), so the client notices and refreshes its metadata.
        return Reply::None(Box::pin(async move {
            let mut failed = false;
            for (name, parts) in topics {
                for (index, started) in parts {
                    let error = match started {
                        Started::Error(code, _) => Some(code.to_string()),
                        Started::Append(call) => call.await.err().map(|e| e.to_string()),
                    };
                    if let Some(error) = error {
                        tracing::info!(topic = %name, partition = index, %error, "acks=0 produce failed: closing the connection");
                        failed = true;
                    }
                }
            }
            failed
        }));
    }
    let started = std::time::Instant::now();
    later(async move {
        let mut resp = ProduceResponse::default();
        for (name, parts) in topics {
            let mut t = TopicProduceResponse::default();
            t.name = topic_name(&name);
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
                    Started::Append(call) => match call.await {
                        Ok(out) => p.base_offset = out.first_offset.0,
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
