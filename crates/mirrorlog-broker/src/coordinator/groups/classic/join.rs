//! The join phase: JoinGroup, rebalances, the end of the join phase, members leaving it.

use super::{
    new_member_id, AfterPersist, ClassicGroup, Join, JoinAnswer, JoinTimer, Limits, Member,
    Persist, Reply, State, SyncAnswer, NEW_MEMBER_JOIN_TIMEOUT_MS,
};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

impl ClassicGroup {
    /// A JoinGroup. `Err` when it is refused before the group is touched.
    pub fn join(
        &mut self,
        j: Join,
        limits: Limits,
        now: i64,
    ) -> (Reply<JoinAnswer>, Option<Persist>) {
        let out = self.join_unchecked(j, limits, now);
        self.debug_check_invariants();
        out
    }

    fn join_unchecked(
        &mut self,
        j: Join,
        limits: Limits,
        now: i64,
    ) -> (Reply<JoinAnswer>, Option<Persist>) {
        let known = !j.member_id.is_empty();
        if !self.accepts(&j.member_id, limits.max_size) {
            return (
                Reply::Now(JoinAnswer::error("", ResponseError::GroupMaxSizeReached)),
                None,
            );
        }
        if !self.supports(&j.protocol_type, &j.protocols) {
            let id = if known { j.member_id.as_str() } else { "" };
            return (
                Reply::Now(JoinAnswer::error(
                    id,
                    ResponseError::InconsistentGroupProtocol,
                )),
                None,
            );
        }
        if !known {
            return self.join_new(j, limits, now);
        }
        if self.pending_join.contains_key(&j.member_id) {
            let id = j.member_id.clone();
            return self.add_member(j, id, limits, now);
        }
        if let Err(e) = self.validate_member(&j.member_id, j.instance_id.as_deref()) {
            return (Reply::Now(JoinAnswer::error(&j.member_id, e)), None);
        }
        let Some(member) = self.members.get(&j.member_id) else {
            return (
                Reply::Now(JoinAnswer::error(
                    &j.member_id,
                    ResponseError::UnknownMemberId,
                )),
                None,
            );
        };
        let same = member.protocols == j.protocols;
        match self.state {
            State::PreparingRebalance => self.update_member(j, now, limits),
            State::CompletingRebalance if same => {
                // A member that missed its join answer: the current generation again.
                let leader = self.leader.as_deref() == Some(j.member_id.as_str());
                (
                    Reply::Now(self.generation_answer(&j.member_id, leader)),
                    None,
                )
            }
            State::Stable if same && self.leader.as_deref() != Some(j.member_id.as_str()) => (
                Reply::Now(self.generation_answer(&j.member_id, false)),
                None,
            ),
            State::CompletingRebalance | State::Stable => self.update_member(j, now, limits),
            State::Empty => (
                Reply::Now(JoinAnswer::error(
                    &j.member_id,
                    ResponseError::UnknownMemberId,
                )),
                None,
            ),
        }
    }

    /// Kafka's `acceptJoiningMember` (`group.max.size`).
    pub(super) fn accepts(&self, member_id: &str, max: usize) -> bool {
        match self.state {
            State::Empty => true,
            State::PreparingRebalance => {
                self.members
                    .get(member_id)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || self.awaiting_join_count() < max
            }
            State::CompletingRebalance | State::Stable => {
                self.members.contains_key(member_id) || self.members.len() < max
            }
        }
    }

    pub(super) fn join_new(
        &mut self,
        j: Join,
        limits: Limits,
        now: i64,
    ) -> (Reply<JoinAnswer>, Option<Persist>) {
        let prefix = j.instance_id.clone().unwrap_or_else(|| j.client_id.clone());
        let new_id = new_member_id(&prefix);
        match j.instance_id.clone() {
            Some(instance) => match self.static_members.get(&instance).cloned() {
                Some(old_id) => self.replace_static(j, old_id, new_id, limits, now),
                None => self.add_member(j, new_id, limits, now),
            },
            None if j.requires_member_id => {
                self.pending_join
                    .insert(new_id.clone(), now + i64::from(j.session_timeout_ms));
                (
                    Reply::Now(JoinAnswer::error(&new_id, ResponseError::MemberIdRequired)),
                    None,
                )
            }
            None => self.add_member(j, new_id, limits, now),
        }
    }

    pub(super) fn add_member(
        &mut self,
        j: Join,
        id: String,
        limits: Limits,
        now: i64,
    ) -> (Reply<JoinAnswer>, Option<Persist>) {
        let (tx, rx) = oneshot::channel();
        if self.members.is_empty() {
            self.protocol_type = Some(j.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        if self.state == State::PreparingRebalance && self.previous == State::Empty {
            self.new_member_added = true;
        }
        if let Some(i) = &j.instance_id {
            self.static_members.insert(i.clone(), id.clone());
        }
        self.pending_join.remove(&id);
        self.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: j.instance_id,
                client_id: j.client_id,
                client_host: j.client_host,
                rebalance_timeout_ms: j.rebalance_timeout_ms,
                session_timeout_ms: j.session_timeout_ms,
                protocols: j.protocols,
                assignment: Bytes::new(),
                awaiting_join: Some(tx),
                awaiting_sync: None,
                is_new: true,
                heartbeat_deadline: Some(now + NEW_MEMBER_JOIN_TIMEOUT_MS),
            },
        );
        let persist = self.rebalance_or_complete_join(limits, now);
        (Reply::Wait(rx), persist)
    }

    pub(super) fn update_member(
        &mut self,
        j: Join,
        now: i64,
        limits: Limits,
    ) -> (Reply<JoinAnswer>, Option<Persist>) {
        let (tx, rx) = oneshot::channel();
        if let Some(m) = self.members.get_mut(&j.member_id) {
            m.protocols = j.protocols;
            m.rebalance_timeout_ms = j.rebalance_timeout_ms;
            m.session_timeout_ms = j.session_timeout_ms;
            // A second join from the same member replaces the first's wait.
            m.answer_join(JoinAnswer::error(&m.id, ResponseError::UnknownMemberId));
            m.awaiting_join = Some(tx);
        }
        let persist = self.rebalance_or_complete_join(limits, now);
        (Reply::Wait(rx), persist)
    }

    pub(super) fn replace_static(
        &mut self,
        j: Join,
        old_id: String,
        new_id: String,
        limits: Limits,
        now: i64,
    ) -> (Reply<JoinAnswer>, Option<Persist>) {
        let old_leader = self.leader.clone();
        let Some(mut m) = self.members.remove(&old_id) else {
            return (
                Reply::Now(JoinAnswer::error("", ResponseError::UnknownMemberId)),
                None,
            );
        };
        // The old id's waiters are fenced at once.
        m.answer_join(JoinAnswer::error(&old_id, ResponseError::FencedInstanceId));
        m.answer_sync(SyncAnswer::error(ResponseError::FencedInstanceId));
        let old = (
            m.protocols.clone(),
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
        );
        m.id = new_id.clone();
        m.protocols = j.protocols;
        m.rebalance_timeout_ms = j.rebalance_timeout_ms;
        m.session_timeout_ms = j.session_timeout_ms;
        m.heartbeat_deadline = Some(now + i64::from(j.session_timeout_ms));
        let (tx, rx) = oneshot::channel();
        m.awaiting_join = Some(tx);
        self.members.insert(new_id.clone(), m);
        if self.leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        if let Some(i) = &j.instance_id {
            self.static_members.insert(i.clone(), new_id.clone());
        }
        self.pending_sync.remove(&old_id);
        match self.state {
            State::Stable if self.select_protocol() == self.protocol_name => {
                // No rebalance: store the new id, then answer with the current generation.
                let persist = Persist {
                    value: self.snapshot(None),
                    then: AfterPersist::StaticRejoin {
                        new_id,
                        old_id,
                        old,
                        old_leader,
                        skip_assignment_supported: j.skip_assignment_supported,
                    },
                };
                (Reply::Wait(rx), Some(persist))
            }
            State::CompletingRebalance => {
                let p = self.prepare_rebalance(limits, now);
                (Reply::Wait(rx), p)
            }
            _ => {
                let p = self.rebalance_or_complete_join(limits, now);
                (Reply::Wait(rx), p)
            }
        }
    }

    pub(super) fn rebalance_or_complete_join(
        &mut self,
        limits: Limits,
        now: i64,
    ) -> Option<Persist> {
        if self.can_rebalance() {
            self.prepare_rebalance(limits, now)
        } else {
            self.maybe_complete_join(now)
        }
    }

    pub(super) fn maybe_complete_join(&mut self, now: i64) -> Option<Persist> {
        if self.state == State::PreparingRebalance
            && self.previous != State::Empty
            && self.all_joined()
        {
            self.complete_join(now)
        } else {
            None
        }
    }

    pub(super) fn prepare_rebalance(&mut self, limits: Limits, now: i64) -> Option<Persist> {
        if self.state == State::CompletingRebalance {
            self.propagate_error(ResponseError::RebalanceInProgress, now);
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == State::Empty;
        self.transition(State::PreparingRebalance, now);
        if initial {
            let delay = limits.initial_rebalance_delay_ms;
            let remaining = (self.rebalance_timeout_ms() - delay).max(0);
            self.join_timer = Some((now + delay, JoinTimer::Initial { delay, remaining }));
            None
        } else if self.all_joined() {
            self.complete_join(now)
        } else {
            self.join_timer = Some((now + self.rebalance_timeout_ms(), JoinTimer::Complete));
            None
        }
    }

    /// Ends the join phase: members that did not rejoin (dynamic ones) are removed, the next
    /// generation starts and every member is answered.
    pub(super) fn complete_join(&mut self, now: i64) -> Option<Persist> {
        self.join_timer = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.remove(&id);
        }
        if !self.elect_joined_leader() && !self.members.is_empty() {
            // Nobody rejoined: wait again until sessions remove the silent members.
            self.join_timer = Some((now + self.rebalance_timeout_ms(), JoinTimer::Complete));
            return None;
        }
        self.generation += 1;
        self.pending_sync.clear();
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition(State::Empty, now);
            return Some(Persist {
                value: self.snapshot(None),
                then: AfterPersist::Nothing,
            });
        }
        self.protocol_name = self.select_protocol();
        self.transition(State::CompletingRebalance, now);
        let leader = self.leader.clone();
        let members = self.current_members();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = leader.as_deref() == Some(id.as_str());
            let mut answer = self.generation_answer(&id, false);
            if is_leader {
                answer.members = members.clone();
            }
            if let Some(m) = self.members.get_mut(&id) {
                m.answer_join(answer);
                m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
                m.is_new = false;
            }
            self.pending_sync.insert(id);
        }
        self.sync_timer = Some((now + self.rebalance_timeout_ms(), self.generation));
        None
    }

    /// Kafka's `maybeElectNewJoinedLeader`.
    pub(super) fn elect_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self.members.values().find(|m| m.awaiting_join.is_some()) {
            Some(m) => {
                self.leader = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    pub(super) fn remove(&mut self, id: &str) {
        if let Some(m) = self.members.remove(id) {
            if let Some(i) = &m.instance_id {
                self.static_members.remove(i);
            }
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = self.members.keys().next().cloned();
        }
        self.pending_join.remove(id);
        self.pending_sync.remove(id);
    }

    /// Removes a member whose session ended or who left, answering its waiting join, and
    /// moves the group on.
    pub(super) fn remove_and_update(
        &mut self,
        id: &str,
        limits: Limits,
        now: i64,
    ) -> Option<Persist> {
        if let Some(m) = self.members.get_mut(id) {
            m.answer_join(JoinAnswer::error("", ResponseError::UnknownMemberId));
        }
        self.remove(id);
        match self.state {
            State::Stable | State::CompletingRebalance => {
                self.rebalance_or_complete_join(limits, now)
            }
            State::PreparingRebalance if self.all_joined() => self.complete_join(now),
            _ => None,
        }
    }

    pub(super) fn propagate_error(&mut self, e: ResponseError, now: i64) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
            if m.answer_sync(SyncAnswer::error(e)) {
                m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
            }
        }
    }
}
