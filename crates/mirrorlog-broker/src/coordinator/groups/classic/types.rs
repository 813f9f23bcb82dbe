//! The classic protocol's requests, answers and settings, as the group sees them.

use super::super::records::GroupValue;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::HashMap;
use tokio::sync::oneshot;

/// Kafka's `group.classic.new.member.join.timeout.ms`: how long a new member's first join may
/// wait for its rebalance.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

/// The classic protocol's states (Kafka's names, as DescribeGroups and ListGroups show them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No members.
    Empty,
    /// Waiting for the members to (re)join.
    PreparingRebalance,
    /// Waiting for the leader's assignment.
    CompletingRebalance,
    /// Members have their assignment.
    Stable,
}

impl State {
    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::PreparingRebalance => "PreparingRebalance",
            State::CompletingRebalance => "CompletingRebalance",
            State::Stable => "Stable",
        }
    }
}

/// The group-level settings the protocol runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `group.initial.rebalance.delay.ms` (Kafka's default: 3000).
    pub initial_rebalance_delay_ms: i64,
    /// `group.max.size` (Kafka's default: unbounded, `Integer.MAX_VALUE`).
    pub max_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            initial_rebalance_delay_ms: 3000,
            max_size: i32::MAX as usize,
        }
    }
}

/// One protocol a member supports: its name (an assignor) and metadata (its subscription).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    /// The name.
    pub name: String,
    /// The member's metadata for it.
    pub metadata: Bytes,
}

/// A JoinGroup, as the group sees it.
#[derive(Debug, Clone)]
pub struct Join {
    /// The member id asked with (empty: a new member).
    pub member_id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// The protocol type (`consumer`).
    pub protocol_type: String,
    /// The protocols in the member's order of preference.
    pub protocols: Vec<Protocol>,
    /// `session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// The rebalance timeout (`max.poll.interval.ms`).
    pub rebalance_timeout_ms: i32,
    /// The client id of the request.
    pub client_id: String,
    /// The client's address, as Kafka shows it (`/127.0.0.1`).
    pub client_host: String,
    /// Whether the request's version requires a known member id (v4+).
    pub requires_member_id: bool,
    /// Whether the request's version can carry `skip_assignment` (v9+).
    pub skip_assignment_supported: bool,
}

/// A JoinGroup's answer.
#[derive(Debug, Clone, Default)]
pub struct JoinAnswer {
    /// The error, if any.
    pub error: Option<ResponseError>,
    /// The generation.
    pub generation: i32,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// To the leader: every member's id, instance id and metadata.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// Whether the leader is to skip the assignment (a static leader rejoining, KIP-814).
    pub skip_assignment: bool,
}

impl JoinAnswer {
    pub(super) fn error(member_id: &str, e: ResponseError) -> Self {
        JoinAnswer {
            error: Some(e),
            generation: -1,
            member_id: member_id.to_string(),
            ..JoinAnswer::default()
        }
    }
}

/// A SyncGroup's answer.
#[derive(Debug, Clone, Default)]
pub struct SyncAnswer {
    /// The error, if any.
    pub error: Option<ResponseError>,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl SyncAnswer {
    pub(super) fn error(e: ResponseError) -> Self {
        SyncAnswer {
            error: Some(e),
            ..SyncAnswer::default()
        }
    }
}

/// An answer now, or one to wait for.
pub enum Reply<T> {
    /// Answered.
    Now(T),
    /// Answered when the group moves on.
    Wait(oneshot::Receiver<T>),
}

/// A group metadata record to store; once stored (or not), [`ClassicGroup::persisted`] takes
/// `then`.
pub struct Persist {
    /// The record's value.
    pub value: GroupValue,
    /// What follows its write.
    pub then: AfterPersist,
}

/// What a stored group record completes.
pub enum AfterPersist {
    /// Nothing waits on it (the group became empty).
    Nothing,
    /// The leader's assignment of `generation`: the members get their parts.
    Assignment {
        /// The generation it is for.
        generation: i32,
        /// Every member's assignment.
        assignment: HashMap<String, Bytes>,
    },
    /// A static member replaced in a Stable group without a rebalance.
    StaticRejoin {
        /// The new member id.
        new_id: String,
        /// The id it replaced.
        old_id: String,
        /// The member's settings before.
        old: (Vec<Protocol>, i32, i32),
        /// The leader before.
        old_leader: Option<String>,
        /// Whether the answer may say `skip_assignment`.
        skip_assignment_supported: bool,
    },
}

impl JoinAnswer {
    pub(super) fn with_error(mut self, e: ResponseError) -> Self {
        self.error = Some(e);
        self
    }
}
