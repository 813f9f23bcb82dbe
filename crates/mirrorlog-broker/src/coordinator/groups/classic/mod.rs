//! One group of Kafka's classic membership protocol: its state machine (Empty,
//! PreparingRebalance, CompletingRebalance, Stable; Dead is a group gone from the map), its
//! members and their timers, as Kafka's `ClassicGroup` and `GroupMetadataManager` run them.
//!
//! - **Joining.** A dynamic member without an id gets one and `MEMBER_ID_REQUIRED` (KIP-394,
//!   JoinGroup v4+), and is pending until it joins with it. A join starts a rebalance; the join
//!   phase completes when every member has rejoined, or at the rebalance timeout (the members
//!   that did not rejoin are removed). The first rebalance of an empty group waits
//!   `group.initial.rebalance.delay.ms`, again for each new member, up to the rebalance timeout.
//!   The generation is then bumped, the protocol chosen by vote among those every member
//!   supports, and every member answered; the leader gets the members and their metadata.
//! - **Syncing.** The leader's SyncGroup carries the assignment; it is stored (a group metadata
//!   record, durable) before any member gets its part, and the group is Stable. Members that do
//!   not sync within the rebalance timeout are removed and the group rebalances.
//! - **Staying.** A heartbeat within `session.timeout.ms` keeps a member; past it the member is
//!   removed and the group rebalances. Members awaiting a join or sync answer are kept alive,
//!   except new ones, which must complete their first join within five minutes (Kafka's
//!   new-member join timeout).
//! - **Static members** (KIP-345, `group.instance.id`): a rejoin with a new member id replaces
//!   the old one (which is fenced, `FENCED_INSTANCE_ID`) and keeps its assignment; in a Stable
//!   group whose protocol would not change, without a rebalance.
//!
//! Everything here is synchronous and runs under the coordinator's lock
//! ([`super::membership`]); answers travel through oneshot channels, and a change that must be
//! stored before it is answered comes back as a [`Persist`] that the caller writes and then
//! hands to [`ClassicGroup::persisted`].

mod join;
mod member;
mod sync;
mod timers;
mod types;

pub use types::*;

use super::records::{GroupValue, MemberValue};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use member::Member;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The join phase's timer.
#[derive(Debug, Clone, Copy)]
pub(super) enum JoinTimer {
    /// Complete the join phase.
    Complete,
    /// The initial rebalance's delay: extend it if members were added, else complete.
    Initial { delay: i64, remaining: i64 },
}

/// One classic group.
pub struct ClassicGroup {
    id: String,
    state: State,
    previous: State,
    state_since_ms: i64,
    generation: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    static_members: HashMap<String, String>,
    /// Pending members (KIP-394): their session deadline.
    pending_join: HashMap<String, i64>,
    pending_sync: BTreeSet<String>,
    join_timer: Option<(i64, JoinTimer)>,
    new_member_added: bool,
    sync_timer: Option<(i64, i32)>,
}

/// A member id: the client id (or instance id) and a random UUID, as Kafka makes them.
pub(super) fn new_member_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    // `SystemRandom` fails only when the OS has no randomness; the id then still differs
    // from every other by the time.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes[..16].copy_from_slice(
            &std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
                .to_be_bytes(),
        );
    }
    format!(
        "{prefix}-{}",
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    )
}

impl ClassicGroup {
    /// A new, empty group.
    pub fn new(id: &str, now: i64) -> Self {
        ClassicGroup {
            id: id.to_string(),
            state: State::Empty,
            previous: State::Empty,
            state_since_ms: now,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_join: HashMap::new(),
            pending_sync: BTreeSet::new(),
            join_timer: None,
            new_member_added: false,
            sync_timer: None,
        }
    }

    /// A group as stored: Stable with its members (their sessions start now) or Empty.
    pub fn loaded(id: &str, v: &GroupValue, now: i64) -> Self {
        let mut g = ClassicGroup::new(id, now);
        g.generation = v.generation;
        g.protocol_type = (!v.protocol_type.is_empty()).then(|| v.protocol_type.clone());
        g.protocol_name = v.protocol.clone();
        g.leader = v.leader.clone();
        if v.current_state_timestamp >= 0 {
            g.state_since_ms = v.current_state_timestamp;
        }
        for m in &v.members {
            let session = m.session_timeout;
            let member = Member {
                id: m.member_id.clone(),
                instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: if m.rebalance_timeout == -1 {
                    session
                } else {
                    m.rebalance_timeout
                },
                session_timeout_ms: session,
                protocols: vec![Protocol {
                    name: v.protocol.clone().unwrap_or_default(),
                    metadata: Bytes::from(m.subscription.clone()),
                }],
                assignment: Bytes::from(m.assignment.clone()),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat_deadline: Some(now + i64::from(session)),
            };
            if let Some(i) = &member.instance_id {
                g.static_members.insert(i.clone(), member.id.clone());
            }
            g.members.insert(member.id.clone(), member);
        }
        if g.members.is_empty() {
            // An empty group leads nobody, whatever its record says.
            g.leader = None;
        } else {
            g.state = State::Stable;
            if g.leader.as_ref().is_none_or(|l| !g.members.contains_key(l)) {
                g.leader = g.members.keys().next().cloned();
            }
        }
        g
    }

    /// The first of the group's invariants that does not hold, or `None`:
    /// - an Empty group has no members;
    /// - a group has a leader exactly when it has members, and its leader is a member;
    /// - each static member's instance id maps to it, and every mapping names a member with
    ///   that instance id;
    /// - members awaiting a sync are members; members pending a join are not yet members;
    /// - the generation is not negative.
    ///
    /// Used at load ([`super::membership::Membership::restore`]: a stored group that breaks one
    /// is not restored but reported damaged) and after every change ([`Self::check_invariants`]).
    pub fn invariant_violation(&self) -> Option<String> {
        if self.state == State::Empty && !self.members.is_empty() {
            return Some(format!("Empty with {} members", self.members.len()));
        }
        match &self.leader {
            Some(l) if !self.members.contains_key(l) => {
                return Some(format!("its leader {l:?} is not a member"));
            }
            None if !self.members.is_empty() => return Some("members but no leader".into()),
            _ => {}
        }
        let statics = super::static_members::violation(
            &self.static_members,
            self.members
                .values()
                .map(|m| (m.id.as_str(), m.instance_id.as_deref())),
            |id| self.members.get(id).map(|m| m.instance_id.as_deref()),
        );
        if statics.is_some() {
            return statics;
        }
        if let Some(id) = self
            .pending_sync
            .iter()
            .find(|id| !self.members.contains_key(*id))
        {
            return Some(format!("{id:?} awaits a sync but is not a member"));
        }
        if let Some(id) = self
            .pending_join
            .keys()
            .find(|id| self.members.contains_key(*id))
        {
            return Some(format!("{id:?} is both pending and a member"));
        }
        if self.generation < 0 {
            return Some(format!("generation {}", self.generation));
        }
        None
    }

    /// Asserts the group's invariants ([`Self::invariant_violation`]).
    ///
    /// # Panics
    /// When one does not hold: a bug in the protocol's code, never a property of a request.
    pub fn check_invariants(&self) {
        if let Some(v) = self.invariant_violation() {
            panic!("classic group {:?} ({}): {v}", self.id, self.state.name());
        }
    }

    /// [`Self::check_invariants`] when debug assertions are on (tests, CI), after every change.
    pub(super) fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// The group's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its state.
    pub fn state(&self) -> State {
        self.state
    }

    /// When it entered its state (ms since the epoch).
    pub fn state_since(&self) -> i64 {
        self.state_since_ms
    }

    /// Its generation.
    #[cfg(test)]
    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// Its protocol type, or "".
    pub fn protocol_type(&self) -> &str {
        self.protocol_type.as_deref().unwrap_or("")
    }

    /// Its selected protocol, when Stable (DescribeGroups shows it only then).
    pub fn protocol_when_stable(&self) -> &str {
        match self.state {
            State::Stable => self.protocol_name.as_deref().unwrap_or(""),
            _ => "",
        }
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.state == State::Empty
    }

    /// How many members it has now.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// The members as DescribeGroups shows them: id, instance id, client id, host, and (when
    /// Stable) metadata and assignment.
    pub fn described_members(&self) -> Vec<(String, Option<String>, String, String, Bytes, Bytes)> {
        let stable = self.state == State::Stable;
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| {
                let (meta, assignment) = if stable {
                    (m.metadata(&protocol), m.assignment.clone())
                } else {
                    (Bytes::new(), Bytes::new())
                };
                (
                    m.id.clone(),
                    m.instance_id.clone(),
                    m.client_id.clone(),
                    m.client_host.clone(),
                    meta,
                    assignment,
                )
            })
            .collect()
    }

    /// The topics the members subscribe to, when the group speaks the consumer protocol and
    /// its metadata parses (Kafka's `computeSubscribedTopics`); `None` when unknown.
    pub fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = BTreeSet::new();
        for m in self.members.values() {
            topics.extend(super::consumer_protocol::subscribed_topics(
                &m.metadata(protocol),
            )?);
        }
        Some(topics)
    }

    pub(super) fn transition(&mut self, to: State, now: i64) {
        self.previous = self.state;
        self.state = to;
        self.state_since_ms = now;
    }

    pub(super) fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            State::Stable | State::CompletingRebalance | State::Empty
        )
    }

    pub(super) fn awaiting_join_count(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    pub(super) fn all_joined(&self) -> bool {
        self.pending_join.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    pub(super) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// The protocols every member supports.
    pub(super) fn candidates(&self) -> BTreeSet<String> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            for p in &m.protocols {
                *counts.entry(p.name.as_str()).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter(|(_, n)| *n == self.members.len())
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// Kafka's `supportsProtocols`: an empty group takes any non-empty type and protocols; a
    /// group with members the same type and one protocol every member supports.
    pub(super) fn supports(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == State::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        let candidates = self.candidates();
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| candidates.contains(&p.name))
    }

    /// The protocol chosen by vote: each member votes for its most preferred candidate.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidates();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(name, _)| name.to_string())
    }

    /// Kafka's `validateMember`: a static member's id must be the one its instance id maps to.
    pub(super) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(i) = instance_id {
            match self.static_members.get(i) {
                None => return Err(ResponseError::UnknownMemberId),
                Some(id) if id != member_id => return Err(ResponseError::FencedInstanceId),
                Some(_) => {}
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        }
    }

    pub(super) fn current_members(&self) -> Vec<(String, Option<String>, Bytes)> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata(&protocol)))
            .collect()
    }

    pub(super) fn generation_answer(&self, member_id: &str, members: bool) -> JoinAnswer {
        JoinAnswer {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if members {
                self.current_members()
            } else {
                Vec::new()
            },
            skip_assignment: false,
        }
    }

    /// The group as stored now, with `assignment` (or each member's own).
    pub fn snapshot(&self, assignment: Option<&HashMap<String, Bytes>>) -> GroupValue {
        let protocol = self.protocol_name.clone();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_since_ms,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: m.metadata(protocol.as_deref().unwrap_or("")).to_vec(),
                    assignment: assignment
                        .and_then(|a| a.get(&m.id))
                        .unwrap_or(&m.assignment)
                        .to_vec(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests;
