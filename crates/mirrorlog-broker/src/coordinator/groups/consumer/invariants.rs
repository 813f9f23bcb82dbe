//! A consumer group's invariants: what every change keeps true, checked after each change
//! with debug assertions on, and of every group restored from its records (one that breaks
//! them is damaged, not served).

use super::ConsumerGroup;
use std::collections::BTreeMap;

impl ConsumerGroup {
    /// The first of the group's invariants that does not hold, or `None`:
    /// - the assignment epoch is at most the group epoch, and so is every member's epoch;
    /// - each static member's instance id maps to it, and every mapping names a member with
    ///   that instance id;
    /// - target assignments are members';
    /// - no partition is owned (assigned, or being revoked) by two members: a partition moves
    ///   to its new owner only once the old one has released it.
    ///
    /// Used at load ([`super::membership::Membership::restore`]: a stored group that breaks one
    /// is not restored but reported damaged) and after every change ([`Self::check_invariants`]).
    pub fn invariant_violation(&self) -> Option<String> {
        if self.assignment_epoch > self.group_epoch {
            return Some(format!(
                "assignment epoch {} past group epoch {}",
                self.assignment_epoch, self.group_epoch
            ));
        }
        let mut owner: BTreeMap<(&str, i32), &str> = BTreeMap::new();
        for m in self.members.values() {
            if m.epoch > self.group_epoch {
                return Some(format!(
                    "member {:?} at epoch {} past group epoch {}",
                    m.id, m.epoch, self.group_epoch
                ));
            }
            for (topic, partitions) in m.assigned.iter().chain(&m.revoking) {
                for &p in partitions {
                    if let Some(other) = owner.insert((topic.as_str(), p), &m.id) {
                        if other != m.id {
                            return Some(format!(
                                "{topic}-{p} is owned by both {other:?} and {:?}",
                                m.id
                            ));
                        }
                    }
                }
            }
        }
        let statics = super::super::static_members::violation(
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
            .target
            .keys()
            .find(|id| !self.members.contains_key(*id))
        {
            return Some(format!("a target assignment for {id:?}, not a member"));
        }
        None
    }

    /// Asserts the group's invariants ([`Self::invariant_violation`]).
    ///
    /// # Panics
    /// When one does not hold: a bug in the protocol's code, never a property of a request.
    pub fn check_invariants(&self) {
        if let Some(v) = self.invariant_violation() {
            panic!("consumer group {:?} ({}): {v}", self.id, self.state());
        }
    }

    /// [`Self::check_invariants`] when debug assertions are on (tests, CI), after every change.
    pub(super) fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }
}
