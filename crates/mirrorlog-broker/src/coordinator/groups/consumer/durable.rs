//! A KIP-848 group's durable state: what its records hold ([`Durable`]), the records that
//! take it from one state to the next ([`changes`]), and the group rebuilt from it at start-up.

use super::assignor::Partitions;
use super::records::{Current, MemberMeta, Record, TopicIds};
use super::{ConsumerGroup, Member, MemberState, Settings};
use std::collections::BTreeMap;
use uuid::Uuid;

/// A member's durable state: metadata, current assignment, target (topics by name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DurableMember {
    /// Its metadata.
    pub meta: MemberMeta,
    /// Epoch, previous epoch, state, assigned, revoking.
    pub current: (i32, i32, i8, Partitions, Partitions),
    /// Its target assignment.
    pub target: Partitions,
}

/// A group's durable state (what its records hold), topics by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Durable {
    /// The group epoch.
    pub epoch: i32,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// The members.
    pub members: BTreeMap<String, DurableMember>,
}

fn by_id(p: &Partitions, ids: &BTreeMap<String, Uuid>) -> TopicIds {
    p.iter()
        .filter_map(|(t, ps)| ids.get(t).map(|id| (*id, ps.iter().copied().collect())))
        .collect()
}

/// By topic name: partitions of topics that no longer exist are dropped.
pub fn by_name(t: &TopicIds, names: &BTreeMap<Uuid, String>) -> Partitions {
    t.iter()
        .filter_map(|(id, ps)| {
            names
                .get(id)
                .map(|n| (n.clone(), ps.iter().copied().collect()))
        })
        .collect()
}

/// The records that take `group`'s durable state from `before` to `after`.
pub fn changes(
    group: &str,
    before: &Durable,
    after: &Durable,
    ids: &BTreeMap<String, Uuid>,
) -> Vec<Record> {
    let g = || group.to_string();
    let mut out = Vec::new();
    if before.epoch != after.epoch {
        out.push(Record::GroupEpoch {
            group: g(),
            epoch: Some(after.epoch),
        });
    }
    for (id, m) in &after.members {
        let old = before.members.get(id);
        if old.map(|o| &o.meta) != Some(&m.meta) {
            out.push(Record::Member {
                group: g(),
                member: id.clone(),
                value: Some(m.meta.clone()),
            });
        }
        if old.map(|o| &o.target) != Some(&m.target) {
            out.push(Record::Target {
                group: g(),
                member: id.clone(),
                partitions: Some(by_id(&m.target, ids)),
            });
        }
        if old.map(|o| &o.current) != Some(&m.current) {
            let (epoch, previous_epoch, state, assigned, revoking) = &m.current;
            out.push(Record::Current {
                group: g(),
                member: id.clone(),
                value: Some(Current {
                    epoch: *epoch,
                    previous_epoch: *previous_epoch,
                    state: *state,
                    assigned: by_id(assigned, ids),
                    revoking: by_id(revoking, ids),
                }),
            });
        }
    }
    for id in before
        .members
        .keys()
        .filter(|id| !after.members.contains_key(*id))
    {
        out.push(Record::Current {
            group: g(),
            member: id.clone(),
            value: None,
        });
        out.push(Record::Target {
            group: g(),
            member: id.clone(),
            partitions: None,
        });
        out.push(Record::Member {
            group: g(),
            member: id.clone(),
            value: None,
        });
    }
    if before.assignment_epoch != after.assignment_epoch {
        out.push(Record::TargetEpoch {
            group: g(),
            epoch: Some(after.assignment_epoch),
        });
    }
    out
}

impl ConsumerGroup {
    /// Its durable state.
    pub fn durable(&self) -> Durable {
        Durable {
            epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            members: self
                .members
                .values()
                .map(|m| {
                    let meta = MemberMeta {
                        instance_id: m.instance_id.clone(),
                        rack_id: m.rack_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        topics: m.topics.clone(),
                        regex: m.regex.clone(),
                        rebalance_timeout_ms: m.rebalance_timeout_ms,
                        assignor: m.assignor.clone(),
                    };
                    let current = (
                        m.epoch,
                        m.previous_epoch,
                        m.state.value(),
                        m.assigned.clone(),
                        m.revoking.clone(),
                    );
                    let target = self.target.get(&m.id).cloned().unwrap_or_default();
                    (
                        m.id.clone(),
                        DurableMember {
                            meta,
                            current,
                            target,
                        },
                    )
                })
                .collect(),
        }
    }

    /// A group rebuilt from its records at start-up (`topics`: every topic now); its members'
    /// sessions start `now`.
    pub fn restore(
        id: &str,
        d: Durable,
        topics: &BTreeMap<String, i32>,
        settings: Settings,
        now: i64,
    ) -> Self {
        let mut g = ConsumerGroup::new(id, now);
        g.group_epoch = d.epoch;
        g.assignment_epoch = d.assignment_epoch;
        for (member, dm) in d.members {
            let (epoch, previous_epoch, state, assigned, revoking) = dm.current;
            if let Some(i) = &dm.meta.instance_id {
                g.static_members.insert(i.clone(), member.clone());
            }
            g.target.insert(member.clone(), dm.target);
            g.members.insert(
                member.clone(),
                Member {
                    id: member,
                    instance_id: dm.meta.instance_id,
                    rack_id: dm.meta.rack_id,
                    client_id: dm.meta.client_id,
                    client_host: dm.meta.client_host,
                    rebalance_timeout_ms: dm.meta.rebalance_timeout_ms,
                    topics: dm.meta.topics,
                    regex: dm.meta.regex,
                    assignor: dm.meta.assignor,
                    epoch,
                    previous_epoch,
                    state: MemberState::from_value(state),
                    assigned,
                    revoking,
                    session_deadline: now + settings.session_timeout_ms,
                    revocation_deadline: None,
                },
            );
        }
        // The subscribed topics' partitions as they are: a change while the broker was down
        // moves the group to a new epoch at its first heartbeat, as one while it runs does.
        g.metadata = g
            .subscribed_topics(topics)
            .into_iter()
            .filter_map(|t| topics.get(&t).map(|n| (t, *n)))
            .collect();
        g
    }
}
