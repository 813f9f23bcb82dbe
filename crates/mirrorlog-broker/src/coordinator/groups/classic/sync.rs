//! The sync phase and a Stable group's requests: SyncGroup, the stored assignment, Heartbeat,
//! LeaveGroup, and the check of an offset commit against the membership.

use super::{AfterPersist, ClassicGroup, JoinAnswer, Limits, Persist, Reply, State, SyncAnswer};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::HashMap;
use tokio::sync::oneshot;

impl ClassicGroup {
    /// A SyncGroup.
    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> (Reply<SyncAnswer>, Option<Persist>) {
        let out = self.sync_unchecked(member_id, instance_id, generation, protocol, assignments);
        self.debug_check_invariants();
        out
    }

    fn sync_unchecked(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> (Reply<SyncAnswer>, Option<Persist>) {
        if self.state == State::Empty {
            return (
                Reply::Now(SyncAnswer::error(ResponseError::UnknownMemberId)),
                None,
            );
        }
        if let Err(e) = self.validate_member(member_id, instance_id) {
            return (Reply::Now(SyncAnswer::error(e)), None);
        }
        if generation != self.generation {
            return (
                Reply::Now(SyncAnswer::error(ResponseError::IllegalGeneration)),
                None,
            );
        }
        let (ptype, pname) = protocol;
        let inconsistent = |asked: Option<&str>, have: &Option<String>| {
            asked.is_some_and(|a| have.as_deref() != Some(a))
        };
        if inconsistent(ptype, &self.protocol_type) || inconsistent(pname, &self.protocol_name) {
            return (
                Reply::Now(SyncAnswer::error(ResponseError::InconsistentGroupProtocol)),
                None,
            );
        }
        match self.state {
            State::PreparingRebalance => (
                Reply::Now(SyncAnswer::error(ResponseError::RebalanceInProgress)),
                None,
            ),
            State::Stable => {
                self.pending_sync.remove(member_id);
                let assignment = self
                    .members
                    .get(member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                (
                    Reply::Now(SyncAnswer {
                        error: None,
                        protocol_type: self.protocol_type.clone(),
                        protocol_name: self.protocol_name.clone(),
                        assignment,
                    }),
                    None,
                )
            }
            State::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                if let Some(m) = self.members.get_mut(member_id) {
                    m.awaiting_sync = Some(tx);
                }
                self.pending_sync.remove(member_id);
                if self.pending_sync.is_empty() {
                    self.sync_timer = None;
                }
                if self.leader.as_deref() != Some(member_id) {
                    return (Reply::Wait(rx), None);
                }
                let mut assignment: HashMap<String, Bytes> = assignments.into_iter().collect();
                for id in self.members.keys() {
                    assignment.entry(id.clone()).or_default();
                }
                assignment.retain(|id, _| self.members.contains_key(id));
                let value = self.snapshot(Some(&assignment));
                let persist = Persist {
                    value,
                    then: AfterPersist::Assignment {
                        generation: self.generation,
                        assignment,
                    },
                };
                (Reply::Wait(rx), Some(persist))
            }
            State::Empty => (
                Reply::Now(SyncAnswer::error(ResponseError::UnknownMemberId)),
                None,
            ),
        }
    }

    /// Takes the outcome of storing a [`Persist`]: `Ok` once it is durable, else its error.
    pub fn persisted(
        &mut self,
        then: AfterPersist,
        stored: Result<(), ResponseError>,
        limits: Limits,
        now: i64,
    ) -> Option<Persist> {
        let out = self.persisted_unchecked(then, stored, limits, now);
        self.debug_check_invariants();
        out
    }

    fn persisted_unchecked(
        &mut self,
        then: AfterPersist,
        stored: Result<(), ResponseError>,
        limits: Limits,
        now: i64,
    ) -> Option<Persist> {
        match then {
            AfterPersist::Nothing => None,
            AfterPersist::Assignment {
                generation,
                assignment,
            } => {
                if self.state != State::CompletingRebalance || self.generation != generation {
                    return None;
                }
                match stored {
                    Ok(()) => {
                        let (ptype, pname) =
                            (self.protocol_type.clone(), self.protocol_name.clone());
                        for m in self.members.values_mut() {
                            m.assignment = assignment.get(&m.id).cloned().unwrap_or_default();
                            let answer = SyncAnswer {
                                error: None,
                                protocol_type: ptype.clone(),
                                protocol_name: pname.clone(),
                                assignment: m.assignment.clone(),
                            };
                            if m.answer_sync(answer) {
                                m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
                            }
                        }
                        self.transition(State::Stable, now);
                        None
                    }
                    Err(e) => {
                        self.propagate_error(e, now);
                        self.rebalance_or_complete_join(limits, now)
                    }
                }
            }
            AfterPersist::StaticRejoin {
                new_id,
                old_id,
                old,
                old_leader,
                skip_assignment_supported,
            } => {
                let m = self.members.get(&new_id)?;
                match stored {
                    Ok(()) => {
                        let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                        let mut answer = self.generation_answer(&new_id, false);
                        if skip_assignment_supported {
                            if is_leader {
                                answer.members = self.current_members();
                            }
                            answer.skip_assignment = is_leader;
                        } else {
                            answer.leader = old_leader.unwrap_or_default();
                        }
                        if let Some(m) = self.members.get_mut(&new_id) {
                            m.answer_join(answer);
                        }
                    }
                    Err(e) => {
                        // Back to the old member id, as before the join.
                        let instance = m.instance_id.clone();
                        if let Some(mut m) = self.members.remove(&new_id) {
                            m.answer_join(
                                JoinAnswer {
                                    leader: old_leader.clone().unwrap_or_default(),
                                    ..self.generation_answer("", false)
                                }
                                .with_error(e),
                            );
                            m.id = old_id.clone();
                            (m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms) = old;
                            self.members.insert(old_id.clone(), m);
                        }
                        if let Some(i) = instance {
                            self.static_members.insert(i, old_id.clone());
                        }
                        if self.leader.as_deref() == Some(new_id.as_str()) {
                            self.leader = Some(old_id);
                        }
                    }
                }
                None
            }
        }
    }

    // ---- Heartbeat, LeaveGroup ----

    /// A Heartbeat.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Option<ResponseError> {
        let out = self.heartbeat_unchecked(member_id, instance_id, generation, now);
        self.debug_check_invariants();
        out
    }

    fn heartbeat_unchecked(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Option<ResponseError> {
        if let Err(e) = self.validate_member(member_id, instance_id) {
            return Some(e);
        }
        if generation != self.generation {
            return Some(ResponseError::IllegalGeneration);
        }
        let state = self.state;
        let m = self.members.get_mut(member_id)?;
        match state {
            State::Empty => Some(ResponseError::UnknownMemberId),
            State::PreparingRebalance => {
                m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
                Some(ResponseError::RebalanceInProgress)
            }
            State::CompletingRebalance | State::Stable => {
                m.heartbeat_deadline = Some(now + i64::from(m.session_timeout_ms));
                None
            }
        }
    }

    /// A LeaveGroup of `members` (member id, instance id): each one's error.
    pub fn leave(
        &mut self,
        members: &[(String, Option<String>)],
        limits: Limits,
        now: i64,
    ) -> (Vec<Option<ResponseError>>, Option<Persist>) {
        let out = self.leave_unchecked(members, limits, now);
        self.debug_check_invariants();
        out
    }

    fn leave_unchecked(
        &mut self,
        members: &[(String, Option<String>)],
        limits: Limits,
        now: i64,
    ) -> (Vec<Option<ResponseError>>, Option<Persist>) {
        let mut out = Vec::new();
        let mut left = 0;
        for (member_id, instance_id) in members {
            let result = if member_id.is_empty() {
                // An administrative removal by instance id.
                match instance_id
                    .as_ref()
                    .and_then(|i| self.static_members.get(i))
                    .cloned()
                {
                    Some(id) => {
                        self.leave_one(&id);
                        Ok(())
                    }
                    None => Err(ResponseError::UnknownMemberId),
                }
            } else if self.pending_join.contains_key(member_id) {
                self.pending_join.remove(member_id);
                Ok(())
            } else {
                self.validate_member(member_id, instance_id.as_deref())
                    .map(|()| self.leave_one(member_id))
            };
            if result.is_ok() {
                left += 1;
            }
            out.push(result.err());
        }
        let persist = if left == 0 {
            None
        } else {
            match self.state {
                State::Stable | State::CompletingRebalance => {
                    self.rebalance_or_complete_join(limits, now)
                }
                State::PreparingRebalance => self.maybe_complete_join(now),
                State::Empty => None,
            }
        };
        (out, persist)
    }

    pub(super) fn leave_one(&mut self, id: &str) {
        if let Some(m) = self.members.get_mut(id) {
            m.answer_join(JoinAnswer::error("", ResponseError::UnknownMemberId));
        }
        self.remove(id);
    }

    // ---- OffsetCommit ----

    /// Kafka's `validateOffsetCommit` for a group with this state.
    pub fn validate_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        transactional: bool,
    ) -> Result<(), ResponseError> {
        if generation < 0 && self.state == State::Empty {
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation != self.generation {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if !transactional && self.state != State::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        if !transactional && self.state == State::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }
}
