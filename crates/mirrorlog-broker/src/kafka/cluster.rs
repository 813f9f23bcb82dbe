//! DescribeCluster (KIP-700) and DescribeLogDirs: the one broker as the listener the request
//! came through advertises it, and the one log directory with each partition's size.

use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::broker::Shared;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, ResponseKind,
};
use mirrorlog::engine::TopicPartition;

/// Kafka's `DescribeClusterRequest.endpoint_type` for brokers (2 is controllers, which a
/// broker does not answer for).
const ENDPOINT_TYPE_BROKERS: i8 = 1;
/// Kafka's "unknown" for a volume's total and usable bytes.
const UNKNOWN_VOLUME_BYTES: i64 = -1;

/// DescribeCluster: the cluster id, this broker as the controller, and this broker. ACLs:
/// DESCRIBE on the cluster (`CLUSTER_AUTHORIZATION_FAILED`).
pub fn describe_cluster(b: &Shared, who: &Session, r: &DescribeClusterRequest) -> ResponseKind {
    let here = &who.endpoint;
    let mut resp = DescribeClusterResponse::default();
    resp.endpoint_type = ENDPOINT_TYPE_BROKERS;
    if !who.may_cluster(b, Operation::Describe) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        resp.error_message = None;
        return ResponseKind::DescribeCluster(resp);
    }
    if r.endpoint_type != ENDPOINT_TYPE_BROKERS {
        resp.error_code = ResponseError::UnsupportedEndpointType.code();
        resp.error_message = Some(str_bytes(
            "this is a broker: only endpoint_type 1 (brokers) is answered",
        ));
        return ResponseKind::DescribeCluster(resp);
    }
    let node = BrokerId(b.config.node_id);
    resp.cluster_id = str_bytes(&b.config.cluster_id);
    resp.controller_id = node;
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = node;
    broker.host = str_bytes(&here.host);
    broker.port = i32::from(here.port);
    resp.brokers = vec![broker];
    resp.cluster_authorized_operations = if r.include_cluster_authorized_operations {
        super::metadata::cluster_authorized_operations(b, who)
    } else {
        i32::MIN
    };
    ResponseKind::DescribeCluster(resp)
}

/// DescribeLogDirs: the log directory, and for the topics asked (all when null) each
/// partition's size; a partition or topic not here is left out, as Kafka leaves it. ACLs:
/// DESCRIBE on the cluster; refused, the answer is empty (with `CLUSTER_AUTHORIZATION_FAILED`
/// from v3, which has the field), as Kafka's.
pub async fn describe_log_dirs(
    b: &Shared,
    who: &Session,
    r: DescribeLogDirsRequest,
    version: i16,
) -> ResponseKind {
    if !who.may_cluster(b, Operation::Describe) {
        let mut resp = DescribeLogDirsResponse::default();
        if version >= 3 {
            resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        }
        return ResponseKind::DescribeLogDirs(resp);
    }
    // Kafka's partitions here are a set: one named twice is answered once.
    let asked: Vec<(String, Vec<i32>)> = match r.topics {
        Some(topics) => super::partition_map(topics.into_iter().map(|t| {
            (
                t.topic.0.to_string(),
                t.partitions.into_iter().map(|p| (p, ())),
            )
        }))
        .into_iter()
        .map(|(name, parts)| (name, parts.into_iter().map(|(p, ())| p).collect()))
        .collect(),
        None => b
            .registry()
            .ready()
            .map(|(name, t)| (name.clone(), (0..t.partitions).collect()))
            .collect(),
    };
    let mut dir = DescribeLogDirsResult::default();
    dir.log_dir = str_bytes(&crate::broker::log_dir(&b.config.data_dir).to_string_lossy());
    dir.total_bytes = UNKNOWN_VOLUME_BYTES;
    dir.usable_bytes = UNKNOWN_VOLUME_BYTES;
    for (name, partitions) in asked {
        let mut t = DescribeLogDirsTopic::default();
        t.name = topic_name(&name);
        for p in partitions {
            if !b.has_partition(&name, p) {
                continue;
            }
            let Ok(state) = b.engine.state(&TopicPartition::new(&name, p)).await else {
                continue;
            };
            let mut part = DescribeLogDirsPartition::default();
            part.partition_index = p;
            part.partition_size = i64::try_from(state.size_bytes).unwrap_or(i64::MAX);
            t.partitions.push(part);
        }
        if !t.partitions.is_empty() {
            dir.topics.push(t);
        }
    }
    let mut resp = DescribeLogDirsResponse::default();
    resp.results = vec![dir];
    ResponseKind::DescribeLogDirs(resp)
}
