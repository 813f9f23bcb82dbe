//! JoinGroup, SyncGroup, Heartbeat and LeaveGroup: the classic membership protocol
//! (`coordinator/groups/classic/`, `coordinator/groups/membership.rs`), checked as Kafka's `KafkaApis` and group
//! coordinator service check them: an empty group id is `INVALID_GROUP_ID`, a session timeout
//! outside `group.min.session.timeout.ms`..`group.max.session.timeout.ms` is
//! `INVALID_SESSION_TIMEOUT`, and every request needs READ on the group
//! (`GROUP_AUTHORIZATION_FAILED`).

use super::str_bytes;
use crate::acl::{Operation, ResourceType};
use crate::broker::Shared;
use crate::coordinator::groups::classic::{Join, JoinAnswer, Protocol, SyncAnswer};
use crate::kafka::session::Session;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ResponseKind, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

fn may_read(b: &Shared, who: &Session, group: &str) -> bool {
    who.may(b, Operation::Read, ResourceType::Group, group)
}

fn opt(s: Option<&StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

/// A nullable string field that older versions carry as non-null: "" there.
fn nullable(s: Option<String>, nullable_from: i16, version: i16) -> Option<StrBytes> {
    match s {
        Some(s) => Some(str_bytes(&s)),
        None if version < nullable_from => Some(str_bytes("")),
        None => None,
    }
}

/// The JoinGroup response for `a`.
fn join_response(a: JoinAnswer, version: i16) -> ResponseKind {
    let mut r = JoinGroupResponse::default();
    r.error_code = a.error.map_or(0, |e| e.code());
    r.generation_id = a.generation;
    r.protocol_type = a.protocol_type.map(|s| str_bytes(&s));
    r.protocol_name = nullable(a.protocol_name, 7, version);
    r.leader = str_bytes(&a.leader);
    r.skip_assignment = a.skip_assignment;
    r.member_id = str_bytes(&a.member_id);
    r.members = a
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = str_bytes(&id);
            m.group_instance_id = instance.map(|i| str_bytes(&i));
            m.metadata = metadata;
            m
        })
        .collect();
    ResponseKind::JoinGroup(r)
}

fn join_refused(member_id: &str, e: ResponseError, version: i16) -> ResponseKind {
    join_response(
        JoinAnswer {
            error: Some(e),
            generation: -1,
            member_id: member_id.to_string(),
            ..JoinAnswer::default()
        },
        version,
    )
}

/// JoinGroup: answered when the group's join phase completes (or at once when refused, or
/// when a new member is told its id).
pub async fn join_group(
    b: &Shared,
    who: &Session,
    r: JoinGroupRequest,
    version: i16,
    client_id: String,
) -> ResponseKind {
    let group = r.group_id.0.to_string();
    let member_id = r.member_id.to_string();
    if group.is_empty() {
        return join_refused(&member_id, ResponseError::InvalidGroupId, version);
    }
    if !may_read(b, who, &group) {
        return join_refused(&member_id, ResponseError::GroupAuthorizationFailed, version);
    }
    if let Some(refusal) = b.group_refusal(&group) {
        return join_refused(&member_id, refusal, version);
    }
    let (min, max) = b.config.group_session_timeout_ms;
    if r.session_timeout_ms < min || r.session_timeout_ms > max {
        return join_refused(&member_id, ResponseError::InvalidSessionTimeout, version);
    }
    let join = Join {
        member_id,
        instance_id: opt(r.group_instance_id.as_ref()),
        protocol_type: r.protocol_type.to_string(),
        protocols: r
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        session_timeout_ms: r.session_timeout_ms,
        // Version 0 has no rebalance timeout: the session timeout is it.
        rebalance_timeout_ms: if version == 0 {
            r.session_timeout_ms
        } else {
            r.rebalance_timeout_ms
        },
        client_id,
        client_host: format!("/{}", who.host),
        requires_member_id: version >= 4,
        skip_assignment_supported: version >= 9,
    };
    let answer = b.membership.join(&**b, &group, join).await;
    join_response(answer, version)
}

fn sync_response(a: SyncAnswer, version: i16) -> ResponseKind {
    let mut r = SyncGroupResponse::default();
    r.error_code = a.error.map_or(0, |e| e.code());
    // Versions 5+ carry the protocol; they are nullable there.
    if version >= 5 {
        r.protocol_type = a.protocol_type.map(|s| str_bytes(&s));
        r.protocol_name = a.protocol_name.map(|s| str_bytes(&s));
    }
    r.assignment = a.assignment;
    ResponseKind::SyncGroup(r)
}

/// SyncGroup: the leader's carries the assignment; every member's is answered with its part
/// once the assignment is stored.
pub async fn sync_group(
    b: &Shared,
    who: &Session,
    r: SyncGroupRequest,
    version: i16,
) -> ResponseKind {
    let group = r.group_id.0.to_string();
    let refused = |e: ResponseError| {
        sync_response(
            SyncAnswer {
                error: Some(e),
                ..SyncAnswer::default()
            },
            version,
        )
    };
    if group.is_empty() {
        return refused(ResponseError::InvalidGroupId);
    }
    if !may_read(b, who, &group) {
        return refused(ResponseError::GroupAuthorizationFailed);
    }
    if let Some(refusal) = b.group_refusal(&group) {
        return refused(refusal);
    }
    let member = r.member_id.to_string();
    let instance = opt(r.group_instance_id.as_ref());
    let (ptype, pname) = (opt(r.protocol_type.as_ref()), opt(r.protocol_name.as_ref()));
    let assignments = r
        .assignments
        .into_iter()
        .map(|a| (a.member_id.to_string(), a.assignment))
        .collect();
    let answer = b
        .membership
        .sync(
            &**b,
            &group,
            (&member, instance.as_deref()),
            r.generation_id,
            (ptype.as_deref(), pname.as_deref()),
            assignments,
        )
        .await;
    sync_response(answer, version)
}

/// Heartbeat.
pub fn heartbeat(b: &Shared, who: &Session, r: &HeartbeatRequest) -> ResponseKind {
    let group = r.group_id.0.as_str();
    let error = if group.is_empty() {
        Some(ResponseError::InvalidGroupId)
    } else if !may_read(b, who, group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else if let Some(refusal) = b.group_refusal(group) {
        Some(refusal)
    } else {
        let instance = opt(r.group_instance_id.as_ref());
        b.membership.heartbeat(
            group,
            (r.member_id.as_str(), instance.as_deref()),
            r.generation_id,
        )
    };
    let mut resp = HeartbeatResponse::default();
    resp.error_code = error.map_or(0, |e| e.code());
    ResponseKind::Heartbeat(resp)
}

/// LeaveGroup: one member (v0–v2) or several, by member id or instance id (v3+).
pub async fn leave_group(
    b: &Shared,
    who: &Session,
    r: LeaveGroupRequest,
    version: i16,
) -> ResponseKind {
    let group = r.group_id.0.to_string();
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        r.members
            .iter()
            .map(|m| (m.member_id.to_string(), opt(m.group_instance_id.as_ref())))
            .collect()
    } else {
        vec![(r.member_id.to_string(), None)]
    };
    let mut resp = LeaveGroupResponse::default();
    let result = if group.is_empty() {
        Err(ResponseError::InvalidGroupId)
    } else if !may_read(b, who, &group) {
        Err(ResponseError::GroupAuthorizationFailed)
    } else if let Some(refusal) = b.group_refusal(&group) {
        Err(refusal)
    } else {
        b.membership.leave(&**b, &group, &members).await
    };
    match result {
        Err(e) => resp.error_code = e.code(),
        Ok(errors) if version < 3 => {
            resp.error_code = errors.first().copied().flatten().map_or(0, |e| e.code());
        }
        Ok(errors) => {
            for ((member_id, instance), error) in members.into_iter().zip(errors) {
                let mut m = MemberResponse::default();
                m.member_id = str_bytes(&member_id);
                m.group_instance_id = instance.map(|i| str_bytes(&i));
                m.error_code = error.map_or(0, |e| e.code());
                resp.members.push(m);
            }
        }
    }
    ResponseKind::LeaveGroup(resp)
}
