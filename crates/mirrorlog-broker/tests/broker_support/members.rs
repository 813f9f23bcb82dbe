//! The classic membership protocol's requests over raw frames, as a consumer sends them.

#![allow(dead_code)]

use super::requests::group;
use super::Conn;
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, HeartbeatRequest, JoinGroupRequest, RequestKind, ResponseKind, SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;

pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A consumer protocol subscription (version 0) to `topics`.
pub fn subscription(topics: &[&str]) -> Bytes {
    let mut out = vec![0, 0];
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&(t.len() as i16).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(out)
}

pub struct Joined {
    pub error: i16,
    pub member_id: String,
    pub generation: i32,
    pub leader: String,
    pub members: usize,
    pub protocol: Option<String>,
}

pub fn join(
    c: &mut Conn,
    g: &str,
    member_id: &str,
    instance: Option<&str>,
    session_ms: i32,
    protocol: &str,
) -> Joined {
    let mut r = JoinGroupRequest::default();
    r.group_id = group(g);
    r.session_timeout_ms = session_ms;
    r.rebalance_timeout_ms = 10_000;
    r.member_id = s(member_id);
    r.group_instance_id = instance.map(s);
    r.protocol_type = s("consumer");
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s(protocol);
    p.metadata = subscription(&["orders"]);
    r.protocols.push(p);
    let ResponseKind::JoinGroup(resp) = c.call(ApiKey::JoinGroup, 7, RequestKind::JoinGroup(r))
    else {
        panic!()
    };
    Joined {
        error: resp.error_code,
        member_id: resp.member_id.to_string(),
        generation: resp.generation_id,
        leader: resp.leader.to_string(),
        members: resp.members.len(),
        protocol: resp.protocol_name.map(|p| p.to_string()),
    }
}

pub fn sync(
    c: &mut Conn,
    g: &str,
    member: &str,
    generation: i32,
    assignment: &[(&str, &[u8])],
) -> (i16, Bytes) {
    let mut r = SyncGroupRequest::default();
    r.group_id = group(g);
    r.generation_id = generation;
    r.member_id = s(member);
    for (m, a) in assignment {
        let mut x = SyncGroupRequestAssignment::default();
        x.member_id = s(m);
        x.assignment = Bytes::copy_from_slice(a);
        r.assignments.push(x);
    }
    let ResponseKind::SyncGroup(resp) = c.call(ApiKey::SyncGroup, 5, RequestKind::SyncGroup(r))
    else {
        panic!()
    };
    (resp.error_code, resp.assignment)
}

pub fn heartbeat(
    c: &mut Conn,
    g: &str,
    member: &str,
    instance: Option<&str>,
    generation: i32,
) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = group(g);
    r.member_id = s(member);
    r.group_instance_id = instance.map(s);
    r.generation_id = generation;
    let ResponseKind::Heartbeat(resp) = c.call(ApiKey::Heartbeat, 4, RequestKind::Heartbeat(r))
    else {
        panic!()
    };
    resp.error_code
}
