//! CreateTopics, CreatePartitions, DeleteTopics, DeleteRecords.
//!
//! ACLs, as Kafka's `KafkaApis` checks them (a refused topic gets `TOPIC_AUTHORIZATION_FAILED`
//! and nothing is done to it): CreateTopics needs CREATE on the cluster or the topic (its
//! configs are answered only with DESCRIBE_CONFIGS on it), CreatePartitions ALTER on the topic,
//! DeleteTopics and DeleteRecords DELETE on it (a topic named by id whose name the session may
//! not DESCRIBE is `UNKNOWN_TOPIC_ID`, so its existence is not told).

use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::broker::Shared;
use crate::kafka::errors;
use crate::kafka::session::Session;
use crate::storage::topics::TopicError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    ResponseKind,
};
use mirrorlog::engine::TopicPartition;
use mirrorlog::format::Offset;
use std::collections::BTreeMap;

/// Kafka's error code for a topic change that failed.
pub fn topic_error(e: &TopicError) -> ResponseError {
    match e {
        TopicError::InvalidName(_) => ResponseError::InvalidTopicException,
        TopicError::Exists => ResponseError::TopicAlreadyExists,
        TopicError::Unknown => ResponseError::UnknownTopicOrPartition,
        TopicError::InvalidPartitions(_) | TopicError::NotAnIncrease(_) => {
            ResponseError::InvalidPartitions
        }
        TopicError::Assignment(_) => ResponseError::InvalidReplicaAssignment,
        TopicError::Config(_) => ResponseError::InvalidConfig,
        TopicError::Engine(e) => errors::kind(e),
        TopicError::Store(_) => ResponseError::KafkaStorageError,
        TopicError::Resources(_) => ResponseError::PolicyViolation,
    }
}

/// CreateTopics: one replica (replication factor -1 or 1), settings by Kafka's topic names.
pub async fn create_topics(
    b: &Shared,
    who: &Session,
    r: CreateTopicsRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = CreateTopicsResponse::default();
    let cluster_create = who.may_cluster(b, Operation::Create);
    // A name given twice creates nothing: one INVALID_REQUEST answer for it, as Kafka's
    // `ControllerApis.createTopics` answers.
    let mut count = std::collections::HashMap::<String, usize>::new();
    for t in &r.topics {
        *count.entry(t.name.0.to_string()).or_default() += 1;
    }
    for name in super::distinct(r.topics.iter().map(|t| t.name.0.to_string())) {
        if count[&name] > 1 {
            let mut out = CreatableTopicResult::default();
            out.name = topic_name(&name);
            out.error_code = ResponseError::InvalidRequest.code();
            out.error_message = Some(str_bytes("Duplicate topic name."));
            out.num_partitions = -1;
            out.replication_factor = -1;
            resp.topics.push(out);
        }
    }
    for t in r.topics {
        let name = t.name.0.to_string();
        if count[&name] > 1 {
            continue;
        }
        let mut out = CreatableTopicResult::default();
        out.name = topic_name(&name);
        let partitions = if t.num_partitions == -1 {
            if t.assignments.is_empty() {
                b.config.num_partitions
            } else {
                i32::try_from(t.assignments.len()).unwrap_or(i32::MAX)
            }
        } else {
            t.num_partitions
        };
        let mut configs = BTreeMap::new();
        for c in &t.configs {
            if let Some(v) = &c.value {
                configs.insert(c.name.to_string(), v.to_string());
            }
        }
        let result = if !cluster_create && !who.may_topic(b, Operation::Create, &name) {
            Err((
                ResponseError::TopicAuthorizationFailed,
                "Authorization failed.".into(),
            ))
        } else if crate::storage::topics::is_internal(&name) {
            // The broker makes its internal topics itself, with their own settings.
            Err((
                ResponseError::InvalidRequest,
                format!("Creation of internal topic {name} is prohibited."),
            ))
        } else if !(t.replication_factor == -1 || t.replication_factor == 1) {
            Err((
                ResponseError::InvalidReplicationFactor,
                format!(
                    "replication factor {} on a single-node broker",
                    t.replication_factor
                ),
            ))
        } else if t
            .assignments
            .iter()
            .any(|a| a.broker_ids.iter().any(|id| id.0 != b.config.node_id))
        {
            Err((
                ResponseError::InvalidReplicaAssignment,
                "replicas assigned to another broker".into(),
            ))
        } else if r.validate_only {
            // The same checks a real create makes before writing anything.
            b.registry()
                .check_new(&b.topic_defaults(), &name, partitions, &configs)
                .map(|_| None)
                .map_err(|e| (topic_error(&e), e.to_string()))
        } else {
            b.create_topic(&name, partitions, configs.clone(), None)
                .await
                .map(Some)
                .map_err(|e| (topic_error(&e), e.to_string()))
        };
        match result {
            Ok(topic) => {
                // Kafka's success carries a null message.
                out.error_message = None;
                if let Some(topic) = topic {
                    out.topic_id = uuid::Uuid::from_bytes(topic.id);
                }
                out.num_partitions = partitions;
                out.replication_factor = 1;
                if version >= 5 && !who.may_topic(b, Operation::DescribeConfigs, &name) {
                    out.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
                } else if version >= 5 {
                    // Kafka answers every config of the new topic, with where it comes from.
                    let described = crate::config::topic::describe(&configs, &b.topic_defaults());
                    out.configs = Some(
                        described
                            .into_iter()
                            .map(|d| {
                                let mut c = CreatableTopicConfigs::default();
                                c.name = str_bytes(d.name);
                                c.value = Some(str_bytes(&d.value));
                                c.config_source = if d.set { 1 } else { 5 };
                                c
                            })
                            .collect(),
                    );
                }
            }
            Err((code, message)) => {
                out.error_code = code.code();
                out.error_message = Some(str_bytes(&message));
                out.num_partitions = -1;
                out.replication_factor = -1;
            }
        }
        resp.topics.push(out);
    }
    ResponseKind::CreateTopics(resp)
}

/// CreatePartitions: a topic's partition count grows (never shrinks); a topic named twice in
/// one request is `INVALID_REQUEST` for both, as Kafka answers it.
pub async fn create_partitions(
    b: &Shared,
    who: &Session,
    r: CreatePartitionsRequest,
) -> ResponseKind {
    let mut resp = CreatePartitionsResponse::default();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for t in &r.topics {
        *seen.entry(t.name.0.to_string()).or_default() += 1;
    }
    for t in r.topics {
        let name = t.name.0.to_string();
        let mut out = CreatePartitionsTopicResult::default();
        out.name = topic_name(&name);
        let assignments: Option<Vec<Vec<i32>>> = t.assignments.as_ref().map(|a| {
            a.iter()
                .map(|p| p.broker_ids.iter().map(|id| id.0).collect())
                .collect()
        });
        let result = if seen[&name] > 1 {
            Err((
                ResponseError::InvalidRequest,
                "Duplicate topic in request.".to_string(),
            ))
        } else if !who.may_topic(b, Operation::Alter, &name) {
            Err((
                ResponseError::TopicAuthorizationFailed,
                "Authorization failed.".to_string(),
            ))
        } else if crate::storage::topics::is_internal(&name) {
            // Its partition count places every group; changing it would lose them.
            Err((
                ResponseError::InvalidRequest,
                format!("The partition count of internal topic {name} is the broker's."),
            ))
        } else {
            b.grow_topic(&name, t.count, assignments.as_deref(), r.validate_only)
                .await
                .map_err(|e| (topic_error(&e), e.to_string()))
        };
        match result {
            Ok(()) => out.error_message = None,
            Err((code, message)) => {
                out.error_code = code.code();
                out.error_message = Some(str_bytes(&message));
            }
        }
        resp.results.push(out);
    }
    ResponseKind::CreatePartitions(resp)
}

/// DeleteTopics, by name (every version) or by id (v6).
pub async fn delete_topics(
    b: &Shared,
    who: &Session,
    r: DeleteTopicsRequest,
    version: i16,
) -> ResponseKind {
    let mut asked: Vec<(Option<String>, uuid::Uuid)> = r
        .topic_names
        .iter()
        .map(|n| (Some(n.0.to_string()), uuid::Uuid::nil()))
        .collect();
    asked.extend(
        r.topics
            .iter()
            .map(|t| (t.name.as_ref().map(|n| n.0.to_string()), t.topic_id)),
    );
    // A name or id given twice deletes nothing: INVALID_REQUEST for it, as Kafka answers.
    let mut count = std::collections::HashMap::<(Option<String>, uuid::Uuid), usize>::new();
    for key in &asked {
        *count.entry(key.clone()).or_default() += 1;
    }
    let mut resp = DeleteTopicsResponse::default();
    for (name, id) in super::distinct(asked) {
        if count[&(name.clone(), id)] > 1 {
            let mut out = DeletableTopicResult::default();
            out.topic_id = id;
            out.name = name.as_deref().map(topic_name);
            out.error_code = ResponseError::InvalidRequest.code();
            if version >= 5 {
                out.error_message = Some(str_bytes(if out.name.is_some() {
                    "Duplicate topic name."
                } else {
                    "Duplicate topic id."
                }));
            }
            resp.responses.push(out);
            continue;
        }
        let by_id = name.is_none();
        let name = name
            .or_else(|| {
                b.registry()
                    .ready()
                    .find(|(_, t)| uuid::Uuid::from_bytes(t.id) == id)
                    .map(|(n, _)| n.clone())
            })
            .filter(|n| !by_id || who.may_topic(b, Operation::Describe, n));
        let mut out = DeletableTopicResult::default();
        out.topic_id = id;
        match name {
            None => {
                out.error_code = ResponseError::UnknownTopicId.code();
            }
            Some(name) if !who.may_topic(b, Operation::Delete, &name) => {
                out.name = Some(topic_name(&name));
                out.error_code = ResponseError::TopicAuthorizationFailed.code();
            }
            // Every group's offsets live there while they are served: refused (Kafka would
            // delete it; the coordinator here keeps serving from it).
            Some(name) if crate::storage::topics::is_internal(&name) => {
                out.name = Some(topic_name(&name));
                out.error_code = ResponseError::InvalidTopicException.code();
                if version >= 5 {
                    out.error_message = Some(str_bytes(
                        "the internal topic __consumer_offsets holds every group's offsets",
                    ));
                }
            }
            Some(name) => {
                out.name = Some(topic_name(&name));
                if let Err(e) = b.delete_topic(&name).await {
                    out.error_code = topic_error(&e).code();
                    if version >= 5 {
                        out.error_message = Some(str_bytes(&e.to_string()));
                    }
                }
            }
        }
        resp.responses.push(out);
    }
    ResponseKind::DeleteTopics(resp)
}

/// DeleteRecords: the log start moves to the offset (-1: the high watermark).
pub async fn delete_records(b: &Shared, who: &Session, r: DeleteRecordsRequest) -> ResponseKind {
    let mut resp = DeleteRecordsResponse::default();
    // Kafka's request is a map of partitions: one named twice is done once, as last asked.
    let asked = super::partition_map(r.topics.into_iter().map(|t| {
        let parts = t
            .partitions
            .into_iter()
            .map(|p| (p.partition_index, p.offset));
        (t.name.0.to_string(), parts)
    }));
    for (name, partitions) in asked {
        let denied = !who.may_topic(b, Operation::Delete, &name);
        let mut out = DeleteRecordsTopicResult::default();
        out.name = topic_name(&name);
        for (partition_index, offset) in partitions {
            let mut o = DeleteRecordsPartitionResult::default();
            o.partition_index = partition_index;
            o.low_watermark = -1;
            if denied {
                o.error_code = ResponseError::TopicAuthorizationFailed.code();
            } else if crate::storage::topics::is_internal(&name) {
                // Kafka: "Cannot delete records of internal topic".
                o.error_code = ResponseError::InvalidTopicException.code();
            } else if !b.has_partition(&name, partition_index) {
                o.error_code = ResponseError::UnknownTopicOrPartition.code();
            } else {
                let tp = TopicPartition::new(&name, partition_index);
                let before = if offset == -1 {
                    b.engine.state(&tp).await.map(|s| s.high_watermark)
                } else {
                    Ok(Offset(offset))
                };
                match before {
                    Ok(before) => match b.engine.delete_records(&tp, before).await {
                        Ok(start) => o.low_watermark = start.0,
                        Err(e) => o.error_code = errors::code(&e),
                    },
                    Err(e) => o.error_code = errors::code(&e),
                }
            }
            out.partitions.push(o);
        }
        resp.topics.push(out);
    }
    ResponseKind::DeleteRecords(resp)
}
