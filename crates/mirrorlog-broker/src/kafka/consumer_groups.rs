//! ConsumerGroupHeartbeat and ConsumerGroupDescribe: KIP-848's consumer protocol
//! (`groups/consumer/`), topics by id on the wire, by name inside. ACLs as Kafka's: READ on the
//! group to heartbeat (and DESCRIBE on each subscribed topic, `TOPIC_AUTHORIZATION_FAILED`),
//! DESCRIBE on the group to describe it.

use super::{str_bytes, topic_name};
use crate::acl::{Operation, ResourceType};
use crate::broker::Shared;
use crate::coordinator::groups::consumer::assignor::Partitions;
use crate::coordinator::groups::consumer::Heartbeat;
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member, TopicPartitions as DescribedTopic,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, ResponseKind,
};
use std::collections::BTreeMap;
use uuid::Uuid;

/// Every ready topic's id, by name.
fn topic_ids(b: &Shared) -> BTreeMap<String, Uuid> {
    b.registry()
        .all()
        .into_iter()
        .map(|(name, t)| (name, Uuid::from_bytes(t.id)))
        .collect()
}

/// The operations Kafka lists for a group.
const GROUP_OPERATIONS: &[Operation] = &[Operation::Read, Operation::Describe, Operation::Delete];

/// ConsumerGroupHeartbeat (v0–v1; librdkafka 2.12 speaks v1, with its own member ids). Run
/// here, in the connection's request order (the changes it makes are queued to
/// `__consumer_offsets` in the order they are made); the returned future answers once they
/// are durable.
pub fn heartbeat(
    b: &Shared,
    who: &Session,
    r: ConsumerGroupHeartbeatRequest,
    client_id: String,
) -> impl std::future::Future<Output = ResponseKind> + Send + 'static {
    let (mut resp, write) = begin_heartbeat(b, who, r, client_id);
    async move {
        if let Some(w) = write {
            if let Err(e) = w.await {
                resp.error_code = e.code();
                resp.error_message = Some(str_bytes("storing the group's state failed"));
                resp.assignment = None;
            }
        }
        ResponseKind::ConsumerGroupHeartbeat(resp)
    }
}

/// The heartbeat's answer, and the write of what it changed.
fn begin_heartbeat(
    b: &Shared,
    who: &Session,
    r: ConsumerGroupHeartbeatRequest,
    client_id: String,
) -> (
    ConsumerGroupHeartbeatResponse,
    Option<crate::coordinator::groups::membership::Stored<'static>>,
) {
    let mut resp = ConsumerGroupHeartbeatResponse::default();
    resp.heartbeat_interval_ms = b.membership.consumer_heartbeat_interval_ms();
    resp.member_id = Some(r.member_id.clone());
    resp.member_epoch = r.member_epoch;
    let group = r.group_id.0.to_string();
    let fail = |mut resp: ConsumerGroupHeartbeatResponse, e: ResponseError, why: String| {
        resp.error_code = e.code();
        resp.error_message = Some(str_bytes(&why));
        (resp, None)
    };
    // Kafka's request checks (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
    let invalid = if group.is_empty() {
        Some("GroupId can't be empty.")
    } else if r.member_id.is_empty() {
        Some("MemberId can't be empty.")
    } else if r.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        Some("InstanceId can't be empty.")
    } else if r.rack_id.as_ref().is_some_and(|i| i.is_empty()) {
        Some("RackId can't be empty.")
    } else if r.member_epoch == 0 && r.rebalance_timeout_ms == -1 {
        Some("RebalanceTimeoutMs must be provided in first request.")
    } else if r.member_epoch == 0 && r.topic_partitions.as_ref().is_none_or(|p| !p.is_empty()) {
        Some("TopicPartitions must be empty when (re-)joining.")
    } else if r.member_epoch == 0
        && r.subscribed_topic_names.is_none()
        && r.subscribed_topic_regex.is_none()
    {
        Some("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    } else if r.member_epoch == -2 && r.instance_id.is_none() {
        Some("InstanceId can't be null.")
    } else if r.member_epoch < -2 {
        Some("MemberEpoch is invalid.")
    } else {
        None
    };
    if let Some(why) = invalid {
        return fail(resp, ResponseError::InvalidRequest, why.to_string());
    }
    if !who.may(b, Operation::Read, ResourceType::Group, &group) {
        return fail(
            resp,
            ResponseError::GroupAuthorizationFailed,
            format!("Not authorized to read group {group}."),
        );
    }
    if let Some(refusal) = b.group_refusal(&group) {
        return fail(
            resp,
            refusal,
            format!("Group {group} did not load at start-up; delete it to start it anew."),
        );
    }
    let subscribed: Option<Vec<String>> = r
        .subscribed_topic_names
        .as_ref()
        .map(|ts| ts.iter().map(|t| t.0.to_string()).collect());
    if let Some(denied) = subscribed
        .iter()
        .flatten()
        .find(|t| !who.may_topic(b, Operation::Describe, t))
    {
        return fail(
            resp,
            ResponseError::TopicAuthorizationFailed,
            format!("Not authorized to describe topic {denied}."),
        );
    }
    let ids = topic_ids(b);
    let by_id: BTreeMap<Uuid, &String> = ids.iter().map(|(n, id)| (*id, n)).collect();
    let owned: Option<Partitions> = r.topic_partitions.as_ref().map(|tps| {
        let mut out = Partitions::new();
        for tp in tps {
            // A topic deleted since is owned no more.
            if let Some(name) = by_id.get(&tp.topic_id) {
                out.entry((*name).clone())
                    .or_default()
                    .extend(tp.partitions.iter().copied());
            }
        }
        out
    });
    let hb = Heartbeat {
        member_id: r.member_id.to_string(),
        member_epoch: r.member_epoch,
        instance_id: r.instance_id.as_ref().map(|i| i.to_string()),
        rack_id: r.rack_id.as_ref().map(|i| i.to_string()),
        rebalance_timeout_ms: r.rebalance_timeout_ms,
        subscribed_topics: subscribed,
        subscribed_regex: r.subscribed_topic_regex.as_ref().map(|x| x.to_string()),
        server_assignor: r.server_assignor.as_ref().map(|x| x.to_string()),
        owned,
        client_id,
        client_host: format!("/{}", who.host),
    };
    match b.membership.consumer_heartbeat(&**b, &group, hb) {
        Err((e, why)) => fail(resp, e, why),
        Ok((answer, write)) => {
            resp.member_id = Some(str_bytes(&answer.member_id));
            resp.member_epoch = answer.member_epoch;
            resp.assignment = answer.assignment.map(|a| {
                let mut out = Assignment::default();
                for (topic, partitions) in a {
                    if let Some(id) = ids.get(&topic) {
                        let mut tp = TopicPartitions::default();
                        tp.topic_id = *id;
                        tp.partitions = partitions.into_iter().collect();
                        out.topic_partitions.push(tp);
                    }
                }
                out
            });
            (resp, write)
        }
    }
}

fn described_assignment(a: &Partitions, ids: &BTreeMap<String, Uuid>) -> DescribedAssignment {
    let mut out = DescribedAssignment::default();
    for (topic, partitions) in a {
        if let Some(id) = ids.get(topic) {
            let mut tp = DescribedTopic::default();
            tp.topic_id = *id;
            tp.topic_name = topic_name(topic);
            tp.partitions = partitions.iter().copied().collect();
            out.topic_partitions.push(tp);
        }
    }
    out
}

/// ConsumerGroupDescribe: a consumer-protocol group's state, epochs, assignor and members
/// with their current and target assignments; another group id is `GROUP_ID_NOT_FOUND`.
pub fn describe(b: &Shared, who: &Session, r: &ConsumerGroupDescribeRequest) -> ResponseKind {
    let mut resp = ConsumerGroupDescribeResponse::default();
    let ids = topic_ids(b);
    for id in &r.group_ids {
        let group = id.0.to_string();
        let mut d = DescribedGroup::default();
        d.group_id = id.clone();
        d.authorized_operations = i32::MIN;
        if !who.may(b, Operation::Describe, ResourceType::Group, &group) {
            d.error_code = ResponseError::GroupAuthorizationFailed.code();
        } else if let Some(refusal) = b.group_refusal(&group) {
            d.error_code = refusal.code();
        } else {
            match b.membership.consumer_describe(&group) {
                None => {
                    d.error_code = ResponseError::GroupIdNotFound.code();
                    d.error_message = Some(str_bytes(&format!(
                        "Group {group} not found or not a consumer group."
                    )));
                }
                Some((state, (epoch, assignment_epoch, assignor), members)) => {
                    d.group_state = str_bytes(state);
                    d.group_epoch = epoch;
                    d.assignment_epoch = assignment_epoch;
                    d.assignor_name = str_bytes(&assignor);
                    for m in members {
                        let mut out = Member::default();
                        out.member_id = str_bytes(&m.member_id);
                        out.instance_id = m.instance_id.map(|i| str_bytes(&i));
                        out.rack_id = m.rack_id.map(|i| str_bytes(&i));
                        out.member_epoch = m.epoch;
                        out.client_id = str_bytes(&m.client_id);
                        out.client_host = str_bytes(&m.client_host);
                        out.subscribed_topic_names =
                            m.topics.iter().map(|t| topic_name(t)).collect();
                        out.subscribed_topic_regex = m.regex.map(|x| str_bytes(&x));
                        out.assignment = described_assignment(&m.assigned, &ids);
                        out.target_assignment = described_assignment(&m.target, &ids);
                        // KIP-1099: a member of the consumer protocol.
                        out.member_type = 1;
                        d.members.push(out);
                    }
                    if r.include_authorized_operations {
                        d.authorized_operations = who.authorized_operations(
                            b,
                            ResourceType::Group,
                            &group,
                            GROUP_OPERATIONS,
                        );
                    }
                }
            }
        }
        resp.groups.push(d);
    }
    ResponseKind::ConsumerGroupDescribe(resp)
}
