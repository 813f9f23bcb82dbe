//! OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete, as
//! Kafka's `KafkaApis` and group coordinator answer them:
//! - a commit is checked against the group's membership (`coordinator/groups/classic/`): generation -1
//!   with no member is taken for a group with no members (a simple group, made by it); else
//!   the member and generation must be the group's (`UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`,
//!   `ILLEGAL_GENERATION`, `REBALANCE_IN_PROGRESS` while the assignment is awaited), and a
//!   generation for a group that does not exist is `GROUP_ID_NOT_FOUND` (v9+) or
//!   `ILLEGAL_GENERATION`;
//! - metadata over `offset.metadata.max.bytes` is `OFFSET_METADATA_TOO_LARGE`, a partition not
//!   here `UNKNOWN_TOPIC_OR_PARTITION`;
//! - a partition with no committed offset is fetched as offset -1, no error;
//! - groups are of type `classic`; a group with only offsets is `Empty` with no protocol type;
//!   DescribeGroups shows members, and their metadata and assignment when `Stable`;
//! - DeleteGroups of a group with members is `NON_EMPTY_GROUP`; OffsetDelete of a topic the
//!   members subscribe to is `GROUP_SUBSCRIBED_TO_TOPIC`.
//!
//! ACLs: committing needs READ on the group and each topic; fetching and describing DESCRIBE on
//! the group (topics the session may not DESCRIBE are left out of an all-topics fetch);
//! deleting DELETE on the group (and READ on each topic, for OffsetDelete); listing DESCRIBE on
//! the cluster, or only the groups the session may DESCRIBE.

use super::{str_bytes, topic_name};
use crate::acl::{Operation, ResourceType};
use crate::broker::Shared;
use crate::coordinator::groups::records::{Key, OffsetValue};
use crate::coordinator::groups::GroupError;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
    ResponseKind,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use std::collections::{BTreeMap, BTreeSet};

/// Kafka's state of a group with no members.
const EMPTY: &str = "Empty";
/// Kafka's state of a group that does not exist (DescribeGroups before v6).
const DEAD: &str = "Dead";
/// Kafka's type of a group of the classic protocol.
const CLASSIC: &str = "classic";

/// The operations Kafka lists for a group (`authorized_operations`).
const GROUP_OPERATIONS: &[Operation] = &[Operation::Read, Operation::Describe, Operation::Delete];

fn may_group(b: &Shared, who: &Session, op: Operation, group: &str) -> bool {
    who.may(b, op, ResourceType::Group, group)
}

/// Per partition of a topic, its error (none: taken).
type Answers = Vec<(i32, Option<ResponseError>)>;

/// Per topic each partition's error, and the records of the partitions taken.
type Checked = (Vec<(String, Answers)>, Vec<(Key, OffsetValue)>);

/// One partition's offset a commit asks for (OffsetCommit's and TxnOffsetCommit's fields).
struct Asked {
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: Option<String>,
}

/// The partitions a commit asks for: OffsetCommit's and TxnOffsetCommit's topics are types of
/// the same fields.
/// A commit's partitions as the map Kafka makes of them: a partition named twice is committed
/// once, as its last entry asks (a group id may be 32 KiB: each record carries it, so each
/// distinct partition is one record, never one per entry). The answer keeps the request's
/// topic entries in their order, without the entries a later one replaced.
macro_rules! asked {
    ($topics:expr) => {{
        let mut last = std::collections::HashMap::<(&str, i32), (usize, usize)>::new();
        for (i, t) in $topics.iter().enumerate() {
            for (j, p) in t.partitions.iter().enumerate() {
                last.insert((t.name.0.as_str(), p.partition_index), (i, j));
            }
        }
        $topics
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let parts = t
                    .partitions
                    .iter()
                    .enumerate()
                    .filter(|(j, p)| {
                        last.get(&(t.name.0.as_str(), p.partition_index)) == Some(&(i, *j))
                    })
                    .map(|(_, p)| Asked {
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                    });
                (t.name.0.to_string(), parts.collect())
            })
            .collect()
    }};
}

/// The checks of each partition of a commit, as Kafka makes them: the whole request's refusal
/// (`whole`) for every partition, else READ on the topic, the partition here, the metadata
/// within `offset.metadata.max.bytes`. Per topic each partition's error, and the records of
/// those taken.
fn check_commits(
    b: &Shared,
    who: &Session,
    group: &str,
    whole: Option<ResponseError>,
    asked: Vec<(String, Vec<Asked>)>,
    now: i64,
) -> Checked {
    let mut answers = Vec::new();
    let mut writes = Vec::new();
    for (topic, partitions) in asked {
        let topic_denied = whole.is_none() && !who.may_topic(b, Operation::Read, &topic);
        let mut parts = Vec::new();
        for p in partitions {
            let metadata = p.metadata.unwrap_or_default();
            let error = if let Some(e) = whole {
                Some(e)
            } else if topic_denied {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if !b.has_partition(&topic, p.partition) {
                Some(ResponseError::UnknownTopicOrPartition)
            } else if metadata.len() > b.config.offset_metadata_max_bytes {
                Some(ResponseError::OffsetMetadataTooLarge)
            } else {
                let key = Key::Offset {
                    group: group.to_string(),
                    topic: topic.clone(),
                    partition: p.partition,
                };
                writes.push((
                    key,
                    OffsetValue {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata,
                        commit_timestamp: now,
                    },
                ));
                None
            };
            parts.push((p.partition, error));
        }
        answers.push((topic, parts));
    }
    (answers, writes)
}

/// OffsetCommit. Checked and started here, in the connection's request order (its batch is
/// queued to the engine before the next request is read, so a client's pipelined commits
/// reach the log in the order it sent them); the returned future answers once it is durable.
pub fn offset_commit(
    b: &Shared,
    who: &Session,
    r: OffsetCommitRequest,
    version: i16,
) -> impl std::future::Future<Output = ResponseKind> + Send + 'static {
    let group = r.group_id.0.to_string();
    let now = crate::coordinator::transactions::now_ms();
    // Kafka's refusal of the whole request, every partition answered with it.
    let whole: Option<ResponseError> = if group.is_empty() {
        Some(ResponseError::InvalidGroupId)
    } else if !may_group(b, who, Operation::Read, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else if let Some(refusal) = b.group_refusal(&group) {
        Some(refusal)
    } else {
        let instance = r.group_instance_id.as_ref().map(|i| i.to_string());
        let member = (r.member_id.as_str(), instance.as_deref());
        let generation = r.generation_id_or_member_epoch;
        match b
            .membership
            .validate_commit(&group, member, generation, false)
        {
            Some(checked) => checked.err(),
            // A group with offsets only has no members.
            None if generation < 0 => None,
            None if b.groups.exists(&group) => Some(ResponseError::UnknownMemberId),
            None if version >= 9 => Some(ResponseError::GroupIdNotFound),
            None => Some(ResponseError::IllegalGeneration),
        }
    };
    let (answers, writes) = check_commits(b, who, &group, whole, asked!(r.topics), now);
    let writes: Vec<_> = writes.into_iter().map(|(k, v)| (k, Some(v))).collect();
    // The valid partitions' offsets are one batch, durable before the answer.
    let started = if writes.is_empty() {
        None
    } else {
        Some(match b.offsets_partition_now(&group) {
            Some(tp) => Ok(b.groups.start_write(&b.engine, &tp, writes, now)),
            None => Err(writes),
        })
    };
    let b = b.clone();
    async move {
        let written = match started {
            None => None,
            Some(started) => {
                let done = match started {
                    Ok(w) => b.groups.finish_write(w).await,
                    // No __consumer_offsets yet (a commit before any FindCoordinator): made now.
                    Err(writes) => match b.offsets_partition(&group).await {
                        Ok(tp) => b.groups.write(&b.engine, &tp, writes, now).await,
                        Err(e) => {
                            tracing::warn!(%group, error = %e, "no __consumer_offsets partition");
                            return commit_response(
                                answers,
                                Some(ResponseError::CoordinatorNotAvailable),
                            );
                        }
                    },
                };
                done.err().map(|e| {
                    tracing::warn!(%group, error = %e, "committing offsets failed");
                    ResponseError::CoordinatorNotAvailable
                })
            }
        };
        commit_response(answers, written)
    }
}

/// The OffsetCommit response: each partition's own error, else the write's.
fn commit_response(
    answers: Vec<(String, Answers)>,
    written: Option<ResponseError>,
) -> ResponseKind {
    let mut resp = OffsetCommitResponse::default();
    for (topic, parts) in answers {
        let mut t = OffsetCommitResponseTopic::default();
        t.name = topic_name(&topic);
        for (partition, error) in parts {
            let mut p = OffsetCommitResponsePartition::default();
            p.partition_index = partition;
            p.error_code = error.or(written).map_or(0, |e| e.code());
            t.partitions.push(p);
        }
        resp.topics.push(t);
    }
    ResponseKind::OffsetCommit(resp)
}

/// TxnOffsetCommit: a transaction's offsets for `group`, written to its partition of
/// `__consumer_offsets` as a transactional batch of the producer; the group's once the
/// transaction commits (its marker there, which AddOffsetsToTxn arranged), gone if it aborts.
/// Checked as Kafka checks it: the producer's transaction must be open with that partition
/// (`INVALID_TXN_STATE`, `PRODUCER_FENCED`, `INVALID_PRODUCER_ID_MAPPING`), and a member and
/// generation, when given, must be the group's. ACLs: WRITE on the transactional id, READ on
/// the group and on each topic.
pub async fn txn_offset_commit(
    b: &Shared,
    who: &Session,
    r: TxnOffsetCommitRequest,
) -> ResponseKind {
    let group = r.group_id.0.to_string();
    let txn_id = r.transactional_id.0.to_string();
    let now = crate::coordinator::transactions::now_ms();
    let tp = if group.is_empty() {
        Err(ResponseError::InvalidGroupId)
    } else if !who.may(b, Operation::Write, ResourceType::TransactionalId, &txn_id) {
        Err(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !may_group(b, who, Operation::Read, &group) {
        Err(ResponseError::GroupAuthorizationFailed)
    } else if let Some(refusal) = b.group_refusal(&group) {
        Err(refusal)
    } else {
        b.offsets_partition(&group)
            .await
            .map_err(|_| ResponseError::CoordinatorNotAvailable)
    };
    let whole: Option<ResponseError> = match &tp {
        Err(e) => Some(*e),
        Ok(tp) => {
            let instance = r.group_instance_id.as_ref().map(|i| i.to_string());
            let member = (r.member_id.as_str(), instance.as_deref());
            let in_txn = b.txns.lock().await.check_ongoing(
                &txn_id,
                r.producer_id.0,
                r.producer_epoch,
                &(tp.topic.to_string(), tp.partition),
            );
            match (
                in_txn,
                b.membership
                    .validate_commit(&group, member, r.generation_id, true),
            ) {
                (Err(e), _) | (Ok(()), Some(Err(e))) => Some(e),
                // A group that does not exist takes a commit without a generation.
                (Ok(()), None) if r.generation_id >= 0 => Some(ResponseError::IllegalGeneration),
                (Ok(()), _) => None,
            }
        }
    };
    let (answers, writes) = check_commits(b, who, &group, whole, asked!(r.topics), now);
    let written = match (&tp, writes.is_empty()) {
        (Ok(tp), false) => {
            let producer = (r.producer_id.0, r.producer_epoch);
            match b
                .groups
                .write_txn(&b.engine, tp, producer, writes, now)
                .await
            {
                Ok(()) => None,
                Err(e) => {
                    tracing::warn!(%group, error = %e, "a transaction's offsets were not written");
                    Some(match e {
                        GroupError::Engine(e) => match crate::kafka::errors::kind(&e) {
                            ResponseError::InvalidProducerEpoch => ResponseError::ProducerFenced,
                            ResponseError::KafkaStorageError
                            | ResponseError::UnknownServerError => {
                                ResponseError::CoordinatorNotAvailable
                            }
                            other => other,
                        },
                        GroupError::Record(_) => ResponseError::CoordinatorNotAvailable,
                    })
                }
            }
        }
        _ => None,
    };
    let mut resp = TxnOffsetCommitResponse::default();
    for (topic, parts) in answers {
        let mut t = TxnOffsetCommitResponseTopic::default();
        t.name = topic_name(&topic);
        for (partition, error) in parts {
            let mut p = TxnOffsetCommitResponsePartition::default();
            p.partition_index = partition;
            p.error_code = error.or(written).map_or(0, |e| e.code());
            t.partitions.push(p);
        }
        resp.topics.push(t);
    }
    ResponseKind::TxnOffsetCommit(resp)
}

/// One group's fetch: its error, and per topic the partitions' (index, offset, epoch, metadata,
/// error).
type Fetched = (i16, Vec<(String, Vec<(i32, i64, i32, String, i16)>)>);

/// `require_stable` (v7+, a `read_committed` consumer): a partition with offsets of an open
/// transaction is `UNSTABLE_OFFSET_COMMIT`, which the client retries.
fn fetch_group(
    b: &Shared,
    who: &Session,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Fetched {
    if group.is_empty() {
        return (ResponseError::InvalidGroupId.code(), Vec::new());
    }
    if !may_group(b, who, Operation::Describe, group) {
        return (ResponseError::GroupAuthorizationFailed.code(), Vec::new());
    }
    if let Some(refusal) = b.group_refusal(group) {
        return (refusal.code(), Vec::new());
    }
    let committed = b.groups.fetch(group);
    let asked: Vec<(String, Vec<i32>)> = match topics {
        Some(t) => t,
        None => {
            // Every committed offset of the group, of the topics the session may describe.
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (topic, partition) in committed.keys() {
                if who.may_topic(b, Operation::Describe, topic) {
                    by_topic.entry(topic.clone()).or_default().push(*partition);
                }
            }
            by_topic.into_iter().collect()
        }
    };
    let out = asked
        .into_iter()
        .map(|(topic, partitions)| {
            let denied = !who.may_topic(b, Operation::Describe, &topic);
            let parts = partitions
                .into_iter()
                .map(|p| match committed.get(&(topic.clone(), p)) {
                    _ if denied => (
                        p,
                        -1,
                        -1,
                        String::new(),
                        ResponseError::TopicAuthorizationFailed.code(),
                    ),
                    _ if require_stable && b.groups.has_pending(group, &topic, p) => (
                        p,
                        -1,
                        -1,
                        String::new(),
                        ResponseError::UnstableOffsetCommit.code(),
                    ),
                    Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone(), 0),
                    None => (p, -1, -1, String::new(), 0),
                })
                .collect();
            (topic, parts)
        })
        .collect();
    (0, out)
}

/// The response's topics of one group's fetch; the v8+ and older responses have types of the
/// same fields.
macro_rules! fetched_topics {
    ($topics:expr, $topic:ty, $partition:ty) => {
        $topics
            .into_iter()
            .map(|(topic, parts)| {
                let mut t = <$topic>::default();
                t.name = topic_name(&topic);
                for (partition, offset, epoch, metadata, error) in parts {
                    let mut p = <$partition>::default();
                    p.partition_index = partition;
                    p.committed_offset = offset;
                    p.committed_leader_epoch = epoch;
                    p.metadata = Some(str_bytes(&metadata));
                    p.error_code = error;
                    t.partitions.push(p);
                }
                t
            })
            .collect()
    };
}

/// OffsetFetch: one group (v1–v7) or several (v8+).
pub fn offset_fetch(
    b: &Shared,
    who: &Session,
    r: &OffsetFetchRequest,
    version: i16,
) -> ResponseKind {
    let mut resp = OffsetFetchResponse::default();
    if version >= 8 {
        for g in &r.groups {
            let topics = g.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            let (error, topics) =
                fetch_group(b, who, g.group_id.0.as_str(), topics, r.require_stable);
            let mut out = OffsetFetchResponseGroup::default();
            out.group_id = g.group_id.clone();
            out.error_code = error;
            out.topics = fetched_topics!(
                topics,
                OffsetFetchResponseTopics,
                OffsetFetchResponsePartitions
            );
            resp.groups.push(out);
        }
    } else {
        let topics = r.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let (error, topics) = fetch_group(b, who, r.group_id.0.as_str(), topics, r.require_stable);
        resp.error_code = error;
        resp.topics = fetched_topics!(
            topics,
            OffsetFetchResponseTopic,
            OffsetFetchResponsePartition
        );
    }
    ResponseKind::OffsetFetch(resp)
}

/// Every group (with membership, or with offsets only): id, state, protocol type, type.
fn all_groups(b: &Shared) -> BTreeMap<String, (&'static str, String, &'static str)> {
    let mut all: BTreeMap<String, (&'static str, String, &'static str)> = b
        .groups
        .list()
        .into_iter()
        .map(|g| (g, (EMPTY, String::new(), CLASSIC)))
        .collect();
    for (group, state, protocol_type, kind) in b.membership.list() {
        all.insert(group, (state, protocol_type, kind));
    }
    all
}

/// ListGroups, with the state (v4) and type (v5) filters.
pub fn list_groups(b: &Shared, who: &Session, r: &ListGroupsRequest) -> ResponseKind {
    let mut resp = ListGroupsResponse::default();
    let all = who.may_cluster(b, Operation::Describe);
    for (group, (state, protocol_type, kind)) in all_groups(b) {
        let state_ok = r.states_filter.is_empty()
            || r.states_filter
                .iter()
                .any(|s| s.as_str().eq_ignore_ascii_case(state));
        let type_ok = r.types_filter.is_empty()
            || r.types_filter
                .iter()
                .any(|t| t.as_str().eq_ignore_ascii_case(kind));
        if state_ok && type_ok && (all || may_group(b, who, Operation::Describe, &group)) {
            let mut g = ListedGroup::default();
            g.group_id = GroupId(str_bytes(&group));
            g.protocol_type = str_bytes(&protocol_type);
            g.group_state = str_bytes(state);
            g.group_type = str_bytes(kind);
            resp.groups.push(g);
        }
    }
    ResponseKind::ListGroups(resp)
}

/// DescribeGroups: a group's state, protocol and members (their metadata and assignment when
/// `Stable`); a group with offsets only is `Empty`; one that does not exist `Dead` (Kafka's
/// answer before v6).
pub fn describe_groups(b: &Shared, who: &Session, r: &DescribeGroupsRequest) -> ResponseKind {
    let mut resp = DescribeGroupsResponse::default();
    for id in &r.groups {
        let group = id.0.to_string();
        let mut d = DescribedGroup::default();
        d.group_id = id.clone();
        d.protocol_type = str_bytes("");
        d.protocol_data = str_bytes("");
        d.error_message = None;
        d.authorized_operations = i32::MIN;
        if !may_group(b, who, Operation::Describe, &group) {
            d.error_code = ResponseError::GroupAuthorizationFailed.code();
            d.group_state = str_bytes(DEAD);
        } else if let Some(refusal) = b.group_refusal(&group) {
            d.error_code = refusal.code();
            d.group_state = str_bytes(DEAD);
        } else {
            if let Some(g) = b.membership.describe(&group) {
                d.group_state = str_bytes(g.state);
                d.protocol_type = str_bytes(&g.protocol_type);
                d.protocol_data = str_bytes(&g.protocol);
                for (member, instance, client, host, metadata, assignment) in g.members {
                    let mut m = DescribedGroupMember::default();
                    m.member_id = str_bytes(&member);
                    m.group_instance_id = instance.map(|i| str_bytes(&i));
                    m.client_id = str_bytes(&client);
                    m.client_host = str_bytes(&host);
                    m.member_metadata = metadata;
                    m.member_assignment = assignment;
                    d.members.push(m);
                }
            } else {
                d.group_state = str_bytes(if b.groups.exists(&group) { EMPTY } else { DEAD });
            }
            if r.include_authorized_operations {
                d.authorized_operations =
                    who.authorized_operations(b, ResourceType::Group, &group, GROUP_OPERATIONS);
            }
        }
        resp.groups.push(d);
    }
    ResponseKind::DescribeGroups(resp)
}

/// Whether `group` exists: with members, or with committed offsets.
fn exists(b: &Shared, group: &str) -> bool {
    b.membership.exists(group) || b.groups.exists(group)
}

/// DeleteGroups: every committed offset of each group, then the group.
pub async fn delete_groups(b: &Shared, who: &Session, r: DeleteGroupsRequest) -> ResponseKind {
    let mut resp = DeleteGroupsResponse::default();
    for id in r.groups_names {
        let group = id.0.to_string();
        let result = if !may_group(b, who, Operation::Delete, &group) {
            Err(ResponseError::GroupAuthorizationFailed)
        } else if b.group_refusal(&group).is_some() {
            // The way out for a group that did not load (it was not restored): every record of
            // it tombstoned.
            b.delete_damaged_group(&group).await
        } else if !exists(b, &group) {
            Err(ResponseError::GroupIdNotFound)
        } else if let Err(e) = b.membership.remove_if_empty(&group) {
            Err(e)
        } else {
            let offsets = b.groups.fetch(&group).into_keys().collect();
            b.delete_group_offsets(&group, offsets, true).await
        };
        let mut out = DeletableGroupResult::default();
        out.group_id = id;
        out.error_code = result.err().map_or(0, |e| e.code());
        resp.results.push(out);
    }
    ResponseKind::DeleteGroups(resp)
}

/// OffsetDelete: some of a group's committed offsets.
pub async fn offset_delete(b: &Shared, who: &Session, r: OffsetDeleteRequest) -> ResponseKind {
    let group = r.group_id.0.to_string();
    let mut resp = OffsetDeleteResponse::default();
    if !may_group(b, who, Operation::Delete, &group) {
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ResponseKind::OffsetDelete(resp);
    }
    if let Some(refusal) = b.group_refusal(&group) {
        resp.error_code = refusal.code();
        return ResponseKind::OffsetDelete(resp);
    }
    if !exists(b, &group) {
        resp.error_code = ResponseError::GroupIdNotFound.code();
        return ResponseKind::OffsetDelete(resp);
    }
    // A group with members keeps the offsets of the topics they subscribe to; one whose
    // subscriptions are not known (not the consumer protocol) keeps them all.
    let subscribed = if b.membership.active(&group) {
        b.membership.subscribed_topics(
            &group,
            &crate::coordinator::groups::membership::Store::topics(&**b),
        )
    } else {
        Some(BTreeSet::new())
    };
    let Some(subscribed) = subscribed else {
        resp.error_code = ResponseError::NonEmptyGroup.code();
        return ResponseKind::OffsetDelete(resp);
    };
    let mut deleting = Vec::new();
    let mut answers = Vec::new();
    for t in &r.topics {
        let topic = t.name.0.to_string();
        let denied = !who.may_topic(b, Operation::Read, &topic);
        let mut parts = Vec::new();
        for p in &t.partitions {
            let error = if denied {
                Some(ResponseError::TopicAuthorizationFailed)
            } else if !b.has_partition(&topic, p.partition_index) {
                Some(ResponseError::UnknownTopicOrPartition)
            } else if subscribed.contains(&topic) {
                Some(ResponseError::GroupSubscribedToTopic)
            } else {
                deleting.push((topic.clone(), p.partition_index));
                None
            };
            parts.push((p.partition_index, error));
        }
        answers.push((topic, parts));
    }
    let written = if deleting.is_empty() {
        None
    } else {
        b.delete_group_offsets(&group, deleting, false).await.err()
    };
    for (topic, parts) in answers {
        let mut t = OffsetDeleteResponseTopic::default();
        t.name = topic_name(&topic);
        for (partition, error) in parts {
            let mut p = OffsetDeleteResponsePartition::default();
            p.partition_index = partition;
            p.error_code = error.or(written).map_or(0, |e| e.code());
            t.partitions.push(p);
        }
        resp.topics.push(t);
    }
    ResponseKind::OffsetDelete(resp)
}
