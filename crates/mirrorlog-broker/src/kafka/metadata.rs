//! ApiVersions, Metadata (one broker: this one leads every partition), FindCoordinator (this
//! broker coordinates every transaction and group).

use super::{str_bytes, topic_name};
use crate::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::broker::Shared;
use crate::kafka::session::Session;
use crate::net::wire::{supported, SUPPORTED};
use crate::storage::topics::TopicError;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, BrokerId, FindCoordinatorRequest,
    FindCoordinatorResponse, MetadataRequest, MetadataResponse, ResponseKind,
};
use mirrorlog::engine::TopicPartition;

/// The operations Kafka's `AclEntry.supportedOperations` lists for a topic.
const TOPIC_OPERATIONS: &[Operation] = &[
    Operation::Read,
    Operation::Write,
    Operation::Create,
    Operation::Delete,
    Operation::Alter,
    Operation::Describe,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
];
/// ... and for the cluster.
const CLUSTER_OPERATIONS: &[Operation] = &[
    Operation::Create,
    Operation::Alter,
    Operation::Describe,
    Operation::ClusterAction,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
    Operation::IdempotentWrite,
];

/// The cluster operations the session may do, as `cluster_authorized_operations` answers them
/// (Kafka's `AuthHelper.authorizedOperations`: every supported one with no authorizer).
pub fn cluster_authorized_operations(b: &Shared, who: &Session) -> i32 {
    who.authorized_operations(b, ResourceType::Cluster, CLUSTER_NAME, CLUSTER_OPERATIONS)
}

/// One key's answer: its error code and message.
async fn coordinator_answer(
    b: &Shared,
    who: &Session,
    key_type: i8,
    key: &str,
) -> (i16, Option<String>) {
    let (resource, refusal) = if key_type == 1 {
        (
            ResourceType::TransactionalId,
            ResponseError::TransactionalIdAuthorizationFailed,
        )
    } else {
        (ResourceType::Group, ResponseError::GroupAuthorizationFailed)
    };
    if !who.may(b, Operation::Describe, resource, key) {
        return (refusal.code(), None);
    }
    match key_type {
        1 => (0, None),
        0 if key.is_empty() => (
            ResponseError::InvalidRequest.code(),
            Some("an empty group id".into()),
        ),
        0 => match b.offsets_partition(key).await {
            Ok(_) => (0, None),
            Err(e) => {
                tracing::warn!(group = key, error = %e, "no __consumer_offsets partition");
                (
                    ResponseError::CoordinatorNotAvailable.code(),
                    Some(format!("__consumer_offsets is not ready: {e}")),
                )
            }
        },
        other => (
            ResponseError::InvalidRequest.code(),
            Some(format!(
                "key type {other}: groups (0) and transactions (1) are coordinated"
            )),
        ),
    }
}

/// Every supported API with its versions.
pub fn api_versions(_r: &ApiVersionsRequest, _version: i16) -> ResponseKind {
    ResponseKind::ApiVersions(api_versions_body(0))
}

/// The whole frame answering an ApiVersions at a version we do not speak: `UNSUPPORTED_VERSION`
/// with our versions, at version 0, so the client retries lower (Kafka's answer). Sent by the
/// listener's request loop and by its SASL phase alike.
///
/// # Errors
/// The response did not encode.
pub fn api_versions_refusal(
    correlation_id: i32,
) -> Result<bytes::Bytes, crate::net::wire::CodecError> {
    let body =
        ResponseKind::ApiVersions(api_versions_body(ResponseError::UnsupportedVersion.code()));
    crate::net::wire::encode_response(
        kafka_protocol::messages::ApiKey::ApiVersions,
        0,
        correlation_id,
        &body,
    )
}

/// The ApiVersions body with `error_code` (Kafka answers an unsupported ApiVersions version
/// with `UNSUPPORTED_VERSION` and this list, at version 0).
pub fn api_versions_body(error_code: i16) -> ApiVersionsResponse {
    let mut r = ApiVersionsResponse::default();
    r.error_code = error_code;
    r.api_keys = SUPPORTED
        .iter()
        .filter_map(|(key, _, _)| {
            let (min, max) = supported(*key)?;
            let mut v = ApiVersion::default();
            v.api_key = *key as i16;
            v.min_version = min;
            v.max_version = max;
            Some(v)
        })
        .collect();
    r
}

/// Metadata: the one broker, and the topics asked for (all when `topics` is null), with
/// `UNKNOWN_TOPIC_OR_PARTITION` for those not here (created first when the client allows it
/// and `auto.create.topics.enable` is on).
///
/// ACLs (Kafka's): a topic the session may not DESCRIBE is left out of an all-topics answer and
/// answered `TOPIC_AUTHORIZATION_FAILED` when named; auto-creation needs CREATE on the cluster
/// or the topic (`TOPIC_AUTHORIZATION_FAILED` otherwise).
pub async fn metadata(b: &Shared, who: &Session, r: MetadataRequest, version: i16) -> ResponseKind {
    let here = &who.endpoint;
    let node = BrokerId(b.config.node_id);
    let mut resp = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = node;
    broker.host = str_bytes(&here.host);
    broker.port = i32::from(here.port);
    resp.brokers = vec![broker];
    resp.cluster_id = Some(str_bytes(&b.config.cluster_id));
    resp.controller_id = node;
    // Asked for in v8–v10 (KIP-700 moved it to DescribeCluster); else Kafka's "not asked".
    if r.include_cluster_authorized_operations && (8..=10).contains(&version) {
        resp.cluster_authorized_operations = cluster_authorized_operations(b, who);
    }
    let every_topic = || -> Vec<String> {
        let names: Vec<String> = b.registry().ready().map(|(n, _)| n.clone()).collect();
        names
            .into_iter()
            .filter(|n| who.may_topic(b, Operation::Describe, n))
            .collect()
    };
    // Topics asked for by id (v10+, KIP-516: a null name and an id, as KIP-848's consumers
    // resolve their assignment) are answered under their name; an id no topic has is
    // `UNKNOWN_TOPIC_ID`.
    let mut unknown_ids = Vec::new();
    let names: Vec<String> = match &r.topics {
        // Version 0 has no null list: an empty one asks for every topic.
        Some(list) if list.is_empty() && version == 0 => every_topic(),
        None => every_topic(),
        Some(list) => {
            let by_id: std::collections::BTreeMap<uuid::Uuid, String> = b
                .registry()
                .ready()
                .map(|(n, t)| (uuid::Uuid::from_bytes(t.id), n.clone()))
                .collect();
            list.iter()
                .filter_map(|t| match &t.name {
                    Some(n) => Some(n.0.to_string()),
                    None if t.topic_id.is_nil() => None,
                    None => {
                        let name = by_id.get(&t.topic_id).cloned();
                        if name.is_none() {
                            unknown_ids.push(t.topic_id);
                        }
                        name
                    }
                })
                .collect()
        }
    };
    // Names and ids are sets, as Kafka's `MetadataRequest.topics` is: a name asked many
    // times is answered once.
    let names = super::distinct(names);
    for id in super::distinct(unknown_ids) {
        let mut t = MetadataResponseTopic::default();
        t.topic_id = id;
        t.error_code = ResponseError::UnknownTopicId.code();
        resp.topics.push(t);
    }
    for name in names {
        let mut t = MetadataResponseTopic::default();
        t.name = Some(topic_name(&name));
        if !who.may_topic(b, Operation::Describe, &name) {
            t.error_code = ResponseError::TopicAuthorizationFailed.code();
            resp.topics.push(t);
            continue;
        }
        if r.include_topic_authorized_operations && version >= 8 {
            t.topic_authorized_operations =
                who.authorized_operations(b, ResourceType::Topic, &name, TOPIC_OPERATIONS);
        }
        let mut found = b.registry().get(&name).cloned();
        // Before v4 every Metadata for a named topic may create it (Kafka's behaviour).
        let may_create = r.topics.is_some() && (r.allow_auto_topic_creation || version < 4);
        let creates = found.is_none()
            && may_create
            && b.config.auto_create_topics
            && crate::storage::topics::valid_name(&name);
        if creates
            && !who.may_cluster(b, Operation::Create)
            && !who.may_topic(b, Operation::Create, &name)
        {
            t.error_code = ResponseError::TopicAuthorizationFailed.code();
            resp.topics.push(t);
            continue;
        }
        if creates && name == crate::coordinator::groups::OFFSETS_TOPIC {
            // Internal topics are the broker's, made with their own settings (as Kafka's
            // `AutoTopicCreationManager` makes them), never a client's `num.partitions`.
            match b.offsets_topic().await {
                Ok(_) => found = b.registry().get(&name).cloned(),
                Err(e) => {
                    tracing::warn!(topic = %name, error = %e, "creating the internal topic failed")
                }
            }
        } else if creates {
            match b
                .create_topic(&name, b.config.num_partitions, Default::default(), None)
                .await
            {
                Ok(topic) => found = Some(topic),
                // Another request created it first (creations are serialized): it is served.
                Err(TopicError::Exists) => found = b.registry().get(&name).cloned(),
                Err(e) => tracing::warn!(topic = %name, error = %e, "auto-create failed"),
            }
        }
        match found {
            // Being created (its partitions on the way): Kafka's answer while a new topic's
            // leaders are not yet there, which clients retry.
            None if b.registry().creating(&name) => {
                t.error_code = ResponseError::LeaderNotAvailable.code();
            }
            None => {
                t.error_code = if crate::storage::topics::valid_name(&name) {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    ResponseError::InvalidTopicException.code()
                };
            }
            Some(topic) => {
                t.topic_id = uuid::Uuid::from_bytes(topic.id);
                t.is_internal = name == crate::coordinator::groups::OFFSETS_TOPIC;
                let states: Vec<_> = (0..topic.partitions)
                    .map(|p| b.engine.state(&TopicPartition::new(&name, p)))
                    .collect();
                for (p, state) in (0..topic.partitions).zip(states) {
                    let mut part = MetadataResponsePartition::default();
                    part.partition_index = p;
                    part.leader_id = node;
                    part.replica_nodes = vec![node];
                    part.isr_nodes = vec![node];
                    match state.await {
                        Ok(s) => {
                            part.leader_epoch = super::leader_epoch(&s);
                        }
                        Err(e) => {
                            part.error_code = crate::kafka::errors::code(&e);
                            part.leader_id = BrokerId(-1);
                        }
                    }
                    t.partitions.push(part);
                }
            }
        }
        resp.topics.push(t);
    }
    ResponseKind::Metadata(resp)
}

/// FindCoordinator: this broker coordinates every transaction (key type 1) and group (0); a
/// group's first request makes `__consumer_offsets` (`COORDINATOR_NOT_AVAILABLE`, which
/// clients retry, if that fails).
///
/// ACLs: DESCRIBE on the transactional id (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`) or the group
/// (`GROUP_AUTHORIZATION_FAILED`).
pub async fn find_coordinator(
    b: &Shared,
    who: &Session,
    r: &FindCoordinatorRequest,
    version: i16,
) -> ResponseKind {
    let here = &who.endpoint;
    let keys: Vec<String> = if version >= 4 {
        r.coordinator_keys.iter().map(|k| k.to_string()).collect()
    } else {
        vec![r.key.to_string()]
    };
    let mut answers = Vec::with_capacity(keys.len());
    for key in &keys {
        answers.push(coordinator_answer(b, who, r.key_type, key).await);
    }
    let node = BrokerId(b.config.node_id);
    let host = str_bytes(&here.host);
    let port = i32::from(here.port);
    let mut resp = FindCoordinatorResponse::default();
    if version >= 4 {
        for (key, (code, msg)) in r.coordinator_keys.iter().zip(answers) {
            let mut c = Coordinator::default();
            c.key = key.clone();
            c.error_code = code;
            c.error_message = msg.as_deref().map(str_bytes);
            if code == 0 {
                c.node_id = node;
                c.host = host.clone();
                c.port = port;
            } else {
                c.node_id = BrokerId(-1);
                c.port = -1;
            }
            resp.coordinators.push(c);
        }
    } else {
        let (code, msg) = answers.pop().unwrap_or((0, None));
        resp.error_code = code;
        resp.error_message = msg.as_deref().map(str_bytes);
        if code == 0 {
            resp.node_id = node;
            resp.host = host;
            resp.port = port;
        } else {
            resp.node_id = BrokerId(-1);
            resp.port = -1;
        }
    }
    ResponseKind::FindCoordinator(resp)
}
