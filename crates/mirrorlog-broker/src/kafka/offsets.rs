//! ListOffsets (earliest -2, latest -1, max timestamp -3, or a timestamp; both isolation levels)
//! and OffsetForLeaderEpoch, both straight from the engine's lookups, after Kafka's check of the
//! request's `current_leader_epoch`.

use super::{epoch_refusal, topic_name};
use crate::acl::Operation;
use crate::broker::Shared;
use crate::kafka::errors;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, ResponseKind,
};
use mirrorlog::engine::{Isolation, OffsetSpec, TopicPartition};

/// ListOffsets. ACLs: DESCRIBE on each topic (`TOPIC_AUTHORIZATION_FAILED`).
pub async fn list_offsets(
    b: &Shared,
    who: &Session,
    r: ListOffsetsRequest,
    version: i16,
) -> ResponseKind {
    let isolation = if r.isolation_level == 1 {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    };
    let mut resp = ListOffsetsResponse::default();
    // A partition named twice is looked up for neither: INVALID_REQUEST for each, as Kafka's
    // `ListOffsetsRequest.duplicatePartitions` answers.
    // Counted by the topic's place (a name is kept once, however many partitions name it).
    let mut topic_at = std::collections::HashMap::<&str, usize>::new();
    let mut count = std::collections::HashMap::<(usize, i32), usize>::new();
    for t in &r.topics {
        let next = topic_at.len();
        let at = *topic_at.entry(t.name.0.as_str()).or_insert(next);
        for p in &t.partitions {
            *count.entry((at, p.partition_index)).or_default() += 1;
        }
    }
    let topic_at: std::collections::HashMap<String, usize> = topic_at
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for t in r.topics {
        let name = t.name.0.to_string();
        let at = topic_at[&name];
        let denied = !who.may_topic(b, Operation::Describe, &name);
        let mut out = ListOffsetsTopicResponse::default();
        out.name = topic_name(&name);
        for p in t.partitions {
            let mut o = ListOffsetsPartitionResponse::default();
            o.partition_index = p.partition_index;
            o.timestamp = -1;
            o.offset = -1;
            o.leader_epoch = -1;
            let spec = match p.timestamp {
                -2 => Some(OffsetSpec::Earliest),
                -1 => Some(OffsetSpec::Latest),
                -3 => Some(OffsetSpec::MaxTimestamp),
                t if t >= 0 => Some(OffsetSpec::Timestamp(t)),
                _ => None,
            };
            if denied {
                o.error_code = ResponseError::TopicAuthorizationFailed.code();
            } else if count[&(at, p.partition_index)] > 1 {
                o.error_code = ResponseError::InvalidRequest.code();
            } else if !b.has_partition(&name, p.partition_index) {
                o.error_code = ResponseError::UnknownTopicOrPartition.code();
            } else if let Some(code) = {
                let tp = TopicPartition::new(&name, p.partition_index);
                epoch_refusal(b, &tp, p.current_leader_epoch).await
            } {
                o.error_code = code;
            } else if let Some(spec) = spec {
                let tp = TopicPartition::new(&name, p.partition_index);
                match b.engine.offset_for_timestamp(&tp, spec, isolation).await {
                    Ok(Some(found)) => {
                        o.timestamp = found.timestamp;
                        o.offset = found.offset.0;
                        // The field exists from v4 on; an older version must leave it unset.
                        if version >= 4 {
                            o.leader_epoch = found.leader_epoch.unwrap_or(-1);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => o.error_code = errors::code(&e),
                }
            } else {
                o.error_code = ResponseError::InvalidRequest.code();
            }
            out.partitions.push(o);
        }
        resp.topics.push(out);
    }
    ResponseKind::ListOffsets(resp)
}

/// OffsetForLeaderEpoch. ACLs: a consumer needs DESCRIBE on each topic, a replica
/// (`replica_id` >= 0) CLUSTER_ACTION on the cluster (`TOPIC_AUTHORIZATION_FAILED`).
pub async fn offset_for_leader_epoch(
    b: &Shared,
    who: &Session,
    r: OffsetForLeaderEpochRequest,
) -> ResponseKind {
    let mut resp = OffsetForLeaderEpochResponse::default();
    let replica_denied = r.replica_id.0 >= 0 && !who.may_cluster(b, Operation::ClusterAction);
    // The request is a map of partitions: one named twice is looked up once, as last asked.
    let asked = super::partition_map(r.topics.into_iter().map(|t| {
        let parts = t
            .partitions
            .into_iter()
            .map(|p| (p.partition, (p.current_leader_epoch, p.leader_epoch)));
        (t.topic.0.to_string(), parts)
    }));
    for (name, partitions) in asked {
        let denied = replica_denied || !who.may_topic(b, Operation::Describe, &name);
        let mut out = OffsetForLeaderTopicResult::default();
        out.topic = topic_name(&name);
        for (partition, (current_leader_epoch, leader_epoch)) in partitions {
            let mut e = EpochEndOffset::default();
            e.partition = partition;
            e.leader_epoch = -1;
            e.end_offset = -1;
            let tp = TopicPartition::new(&name, partition);
            if denied {
                e.error_code = ResponseError::TopicAuthorizationFailed.code();
            } else if !b.has_partition(&name, partition) {
                e.error_code = ResponseError::UnknownTopicOrPartition.code();
            } else if let Some(code) = epoch_refusal(b, &tp, current_leader_epoch).await {
                e.error_code = code;
            } else {
                match b.engine.epoch_end_offset(&tp, leader_epoch).await {
                    Ok(found) => {
                        e.leader_epoch = found.leader_epoch;
                        e.end_offset = found.end_offset.0;
                    }
                    Err(err) => e.error_code = errors::code(&err),
                }
            }
            out.partitions.push(e);
        }
        resp.topics.push(out);
    }
    ResponseKind::OffsetForLeaderEpoch(resp)
}
