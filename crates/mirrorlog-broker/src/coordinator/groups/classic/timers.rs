//! A group's timers: sessions, pending members, the join phase's deadline (and the initial
//! rebalance's delay), and the sync phase's deadline.

use super::{ClassicGroup, JoinTimer, Limits, Member, Persist, State};

impl ClassicGroup {
    /// The earliest timer's deadline.
    pub fn next_deadline(&self) -> Option<i64> {
        let hb = self.members.values().filter_map(|m| m.heartbeat_deadline);
        let pending = self.pending_join.values().copied();
        hb.chain(pending)
            .chain(self.join_timer.map(|(t, _)| t))
            .chain(self.sync_timer.map(|(t, _)| t))
            .min()
    }

    /// Runs every timer due at `now`.
    pub fn tick(&mut self, limits: Limits, now: i64) -> Vec<Persist> {
        let out = self.tick_unchecked(limits, now);
        self.debug_check_invariants();
        out
    }

    fn tick_unchecked(&mut self, limits: Limits, now: i64) -> Vec<Persist> {
        let mut out = Vec::new();
        // Pending members that never joined with their id.
        let expired: Vec<String> = self
            .pending_join
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.pending_join.remove(&id);
            if self.state == State::PreparingRebalance && self.all_joined() {
                out.extend(self.complete_join(now));
            }
        }
        // Sessions.
        let due: Vec<String> = self
            .members
            .values()
            .filter(|m| m.heartbeat_deadline.is_some_and(|t| t <= now))
            .map(|m| m.id.clone())
            .collect();
        for id in due {
            let satisfied = self.members.get(&id).is_some_and(Member::satisfied);
            if satisfied {
                if let Some(m) = self.members.get_mut(&id) {
                    m.heartbeat_deadline = None;
                }
            } else {
                tracing::info!(group = %self.id, member = %id, "member's session expired; removed");
                out.extend(self.remove_and_update(&id, limits, now));
            }
        }
        // The join phase.
        if let Some((t, timer)) = self.join_timer {
            if t <= now {
                match timer {
                    JoinTimer::Initial { delay, remaining }
                        if self.new_member_added && remaining != 0 =>
                    {
                        self.new_member_added = false;
                        let next = limits.initial_rebalance_delay_ms.min(remaining);
                        self.join_timer = Some((
                            now + next,
                            JoinTimer::Initial {
                                delay: next,
                                remaining: (remaining - delay).max(0),
                            },
                        ));
                    }
                    _ => out.extend(self.complete_join(now)),
                }
            }
        }
        // Members that did not sync.
        if let Some((t, generation)) = self.sync_timer {
            if t <= now {
                self.sync_timer = None;
                if generation == self.generation
                    && matches!(self.state, State::CompletingRebalance | State::Stable)
                    && !self.pending_sync.is_empty()
                {
                    let gone: Vec<String> = self.pending_sync.iter().cloned().collect();
                    tracing::info!(group = %self.id, members = ?gone, "members did not sync in time; removed");
                    for id in gone {
                        self.remove(&id);
                    }
                    out.extend(self.prepare_rebalance(limits, now));
                }
            }
        }
        out
    }
}
