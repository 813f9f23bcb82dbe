//! The classic groups of this coordinator ([`super::classic`]): the map of groups under one
//! lock, the requests that wait on them, the writes of their metadata records, and the timer
//! task that ends sessions, join phases and sync phases.
//!
//! A change that must be durable before it is answered (a generation's assignment, a static
//! member's new id) is written through a [`Store`] after the lock is released, then handed
//! back to its group. Two writes of one group may reach the log in another order than their
//! changes; loading takes the stored value with the highest generation since the group's last
//! tombstone, so the order does not matter ([`Loaded`]).

use super::classic::{ClassicGroup, Join, JoinAnswer, Limits, Persist, Reply, SyncAnswer};
use super::consumer::assignor::Partitions;
use super::consumer::records::{Current, MemberMeta, Record, TopicIds};
use super::consumer::{
    by_name, changes, Answer, ConsumerGroup, DescribedMember, Durable, DurableMember, Heartbeat,
    Refusal, Settings,
};
use super::records::GroupValue;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use uuid::Uuid;

/// A stored group record's write: `Ok` once durable.
pub type Stored<'a> = Pin<Box<dyn Future<Output = Result<(), ResponseError>> + Send + 'a>>;

/// What the groups need of the broker: where group metadata records are written (its
/// `__consumer_offsets`), and its topics.
pub trait Store: Send + Sync {
    /// Writes `value` as `group`'s metadata record, durably.
    fn store<'a>(&'a self, group: &'a str, value: GroupValue) -> Stored<'a>;
    /// Every topic and its partition count (consumer-protocol groups assign them).
    fn topics(&self) -> BTreeMap<String, i32>;
    /// Every topic's id, by name (consumer-protocol groups' records name topics by id).
    fn topic_ids(&self) -> BTreeMap<String, Uuid>;
    /// Queues `records` (key and value bytes, or tombstones) of `group` to its partition now,
    /// in the caller's order; the future answers once they are durable. `None` when
    /// `__consumer_offsets` does not exist yet.
    fn append_now(
        &self,
        group: &str,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Option<Stored<'static>>;
}

/// The records taking a consumer-protocol group from `before` to its state now, queued to
/// `store` (under the group's lock, so that they reach the log in the order of the changes).
fn store_changes(
    store: &dyn Store,
    g: &ConsumerGroup,
    before: &Durable,
    ids: &BTreeMap<String, Uuid>,
) -> Result<Option<Stored<'static>>, ResponseError> {
    let records = changes(g.id(), before, &g.durable(), ids)
        .iter()
        .map(Record::encode)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            tracing::warn!(group = g.id(), error = %e, "a group record does not encode");
            ResponseError::CoordinatorNotAvailable
        })?;
    if records.is_empty() {
        return Ok(None);
    }
    store
        .append_now(g.id(), &records)
        .map(Some)
        .ok_or(ResponseError::CoordinatorNotAvailable)
}

/// A consumer-protocol group described: state, (group epoch, assignment epoch, assignor),
/// members.
pub type ConsumerDescribed = (&'static str, (i32, i32, String), Vec<DescribedMember>);

/// The protocol type and group type of consumer-protocol groups.
const CONSUMER: &str = "consumer";

/// The longest the timer task sleeps without being woken.
const TIMER_IDLE: Duration = Duration::from_millis(500);

/// The group records read at start-up: per classic group, the value with the highest
/// generation since its last tombstone; per consumer-protocol group, its records replayed.
#[derive(Default)]
pub struct Loaded {
    classic: HashMap<String, Option<GroupValue>>,
    consumer: BTreeMap<String, LoadedConsumer>,
}

/// A member's records replayed: metadata, current assignment, target (each `None` when
/// deleted or not seen).
type LoadedMember = (Option<MemberMeta>, Option<Current>, Option<TopicIds>);

/// A consumer-protocol group's records replayed: its epochs, and per member its metadata,
/// current assignment and target (topics by id).
#[derive(Default)]
struct LoadedConsumer {
    epoch: Option<i32>,
    assignment_epoch: i32,
    members: BTreeMap<String, LoadedMember>,
}

impl Loaded {
    /// Drops what was read of `group` (it did not load whole: it is not restored).
    pub fn forget(&mut self, group: &str) {
        self.classic.remove(group);
        self.consumer.remove(group);
    }

    /// Takes a classic group's record read in log order (`None`: a tombstone).
    pub fn take(&mut self, group: String, value: Option<GroupValue>) {
        let slot = self.classic.entry(group).or_default();
        match (value, slot.as_ref()) {
            (None, _) => *slot = None,
            (Some(v), Some(have)) if v.generation < have.generation => {}
            (Some(v), _) => *slot = Some(v),
        }
    }

    /// Takes a consumer-protocol group's record read in log order.
    pub fn take_consumer(&mut self, r: Record) {
        match r {
            Record::GroupEpoch { group, epoch: None } => {
                self.consumer.remove(&group);
            }
            Record::GroupEpoch { group, epoch } => {
                self.consumer.entry(group).or_default().epoch = epoch
            }
            Record::TargetEpoch { group, epoch } => {
                self.consumer.entry(group).or_default().assignment_epoch = epoch.unwrap_or(0);
            }
            Record::Member {
                group,
                member,
                value,
            } => {
                let g = self.consumer.entry(group).or_default();
                g.members.entry(member).or_default().0 = value;
            }
            Record::Current {
                group,
                member,
                value,
            } => {
                let g = self.consumer.entry(group).or_default();
                g.members.entry(member).or_default().1 = value;
            }
            Record::Target {
                group,
                member,
                partitions,
            } => {
                let g = self.consumer.entry(group).or_default();
                g.members.entry(member).or_default().2 = partitions;
            }
        }
    }
}

/// The groups: classic ones, and KIP-848's consumer-protocol ones (one id is one or the
/// other; the locks are taken in that order).
pub struct Membership {
    groups: Mutex<HashMap<String, ClassicGroup>>,
    consumer: Mutex<HashMap<String, ConsumerGroup>>,
    limits: Limits,
    consumer_settings: Settings,
    wake: tokio::sync::Notify,
}

/// A group as DescribeGroups and ListGroups show it.
pub struct Described {
    /// Kafka's state name.
    pub state: &'static str,
    /// The protocol type.
    pub protocol_type: String,
    /// The protocol, when Stable.
    pub protocol: String,
    /// Members: id, instance id, client id, host, metadata, assignment.
    pub members: Vec<(String, Option<String>, String, String, Bytes, Bytes)>,
}

impl Membership {
    /// No groups yet.
    pub fn new(limits: Limits, consumer_settings: Settings) -> Self {
        Membership {
            groups: Mutex::new(HashMap::new()),
            consumer: Mutex::new(HashMap::new()),
            limits,
            consumer_settings,
            wake: tokio::sync::Notify::new(),
        }
    }

    fn consumer_lock(&self) -> MutexGuard<'_, HashMap<String, ConsumerGroup>> {
        self.consumer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ClassicGroup>> {
        self.groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the groups read at start-up (`names`: every topic's name by id; `topics`: their
    /// partition counts); their members' sessions start now. How many of each kind were
    /// restored, and the groups that were not because what was stored breaks an invariant of
    /// the group (`invariant_violation`), with the reason: those are damaged.
    pub fn restore(
        &self,
        loaded: Loaded,
        names: &BTreeMap<Uuid, String>,
        topics: &BTreeMap<String, i32>,
    ) -> (usize, usize, Vec<(String, String)>) {
        let now = crate::coordinator::transactions::now_ms();
        let mut refused = Vec::new();
        let mut map = self.lock();
        for (id, value) in loaded.classic {
            if let Some(v) = value {
                let g = ClassicGroup::loaded(&id, &v, now);
                match g.invariant_violation() {
                    None => {
                        map.insert(id.clone(), g);
                    }
                    Some(why) => refused.push((id, format!("its stored metadata: {why}"))),
                }
            }
        }
        let mut consumer = self.consumer_lock();
        for (id, g) in loaded.consumer {
            let Some(epoch) = g.epoch else { continue };
            let members = g
                .members
                .into_iter()
                .filter_map(|(member, (meta, current, target))| {
                    let meta = meta?;
                    let current =
                        current.map_or((0, 0, 0, Partitions::new(), Partitions::new()), |c| {
                            (
                                c.epoch,
                                c.previous_epoch,
                                c.state,
                                by_name(&c.assigned, names),
                                by_name(&c.revoking, names),
                            )
                        });
                    let target = target.map(|t| by_name(&t, names)).unwrap_or_default();
                    Some((
                        member,
                        DurableMember {
                            meta,
                            current,
                            target,
                        },
                    ))
                })
                .collect();
            let durable = Durable {
                epoch,
                assignment_epoch: g.assignment_epoch,
                members,
            };
            let g = ConsumerGroup::restore(&id, durable, topics, self.consumer_settings, now);
            match g.invariant_violation() {
                None => {
                    consumer.insert(id.clone(), g);
                }
                Some(why) => refused.push((id, format!("its stored records: {why}"))),
            }
        }
        self.wake.notify_one();
        (map.len(), consumer.len(), refused)
    }

    /// Writes `first` and whatever its outcome leads to.
    async fn persist(&self, store: &dyn Store, group: &str, first: Persist) {
        let mut next = Some(first);
        while let Some(p) = next.take() {
            let stored = store.store(group, p.value).await;
            if let Err(e) = &stored {
                tracing::warn!(%group, error = ?e, "storing group metadata failed");
            }
            let now = crate::coordinator::transactions::now_ms();
            next = self
                .lock()
                .get_mut(group)
                .and_then(|g| g.persisted(p.then, stored, self.limits, now));
        }
        self.wake.notify_one();
    }

    /// A JoinGroup of `group`.
    pub async fn join(&self, store: &dyn Store, group: &str, j: Join) -> JoinAnswer {
        let now = crate::coordinator::transactions::now_ms();
        let member_id = j.member_id.clone();
        if !self.classic_may_join(group) {
            // A consumer-protocol group with members.
            return JoinAnswer {
                error: Some(ResponseError::InconsistentGroupProtocol),
                generation: -1,
                member_id,
                ..JoinAnswer::default()
            };
        }
        let (reply, persist) = {
            let mut map = self.lock();
            let g = match map.get_mut(group) {
                Some(g) => g,
                // A group is made by a new member; a member id for a group that does not
                // exist is unknown.
                None if member_id.is_empty() => map
                    .entry(group.to_string())
                    .or_insert_with(|| ClassicGroup::new(group, now)),
                None => {
                    return JoinAnswer {
                        error: Some(ResponseError::UnknownMemberId),
                        generation: -1,
                        member_id,
                        ..JoinAnswer::default()
                    }
                }
            };
            g.join(j, self.limits, now)
        };
        self.wake.notify_one();
        if let Some(p) = persist {
            self.persist(store, group, p).await;
        }
        match reply {
            Reply::Now(a) => a,
            Reply::Wait(rx) => rx.await.unwrap_or_else(|_| JoinAnswer {
                error: Some(ResponseError::CoordinatorNotAvailable),
                generation: -1,
                member_id,
                ..JoinAnswer::default()
            }),
        }
    }

    /// A SyncGroup of `group`.
    pub async fn sync(
        &self,
        store: &dyn Store,
        group: &str,
        member: (&str, Option<&str>),
        generation: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> SyncAnswer {
        let (reply, persist) = {
            let mut map = self.lock();
            let Some(g) = map.get_mut(group) else {
                return SyncAnswer {
                    error: Some(ResponseError::UnknownMemberId),
                    ..SyncAnswer::default()
                };
            };
            g.sync(member.0, member.1, generation, protocol, assignments)
        };
        self.wake.notify_one();
        if let Some(p) = persist {
            self.persist(store, group, p).await;
        }
        match reply {
            Reply::Now(a) => a,
            Reply::Wait(rx) => rx.await.unwrap_or_else(|_| SyncAnswer {
                error: Some(ResponseError::CoordinatorNotAvailable),
                ..SyncAnswer::default()
            }),
        }
    }

    /// A Heartbeat of `group`.
    pub fn heartbeat(
        &self,
        group: &str,
        member: (&str, Option<&str>),
        generation: i32,
    ) -> Option<ResponseError> {
        let now = crate::coordinator::transactions::now_ms();
        match self.lock().get_mut(group) {
            Some(g) => g.heartbeat(member.0, member.1, generation, now),
            None => Some(ResponseError::UnknownMemberId),
        }
    }

    /// A LeaveGroup of `group`: each member's error, or the whole request's.
    pub async fn leave(
        &self,
        store: &dyn Store,
        group: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let now = crate::coordinator::transactions::now_ms();
        let (errors, persist) = {
            let mut map = self.lock();
            let g = map.get_mut(group).ok_or(ResponseError::UnknownMemberId)?;
            g.leave(members, self.limits, now)
        };
        self.wake.notify_one();
        if let Some(p) = persist {
            self.persist(store, group, p).await;
        }
        Ok(errors)
    }

    /// Whether `group` may take an offset commit from this member and generation (a member
    /// epoch, for a consumer-protocol group): `None` when no group of that id has membership.
    pub fn validate_commit(
        &self,
        group: &str,
        member: (&str, Option<&str>),
        generation: i32,
        transactional: bool,
    ) -> Option<Result<(), ResponseError>> {
        if let Some(g) = self.lock().get(group) {
            return Some(g.validate_commit(member.0, member.1, generation, transactional));
        }
        self.consumer_lock()
            .get(group)
            .map(|g| g.validate_commit(member.0, generation))
    }

    /// `group` as DescribeGroups shows it, if it exists (a consumer-protocol group's members
    /// without metadata or assignment, which that protocol does not have).
    pub fn describe(&self, group: &str) -> Option<Described> {
        if let Some(g) = self.lock().get(group) {
            return Some(Described {
                state: g.state().name(),
                protocol_type: g.protocol_type().to_string(),
                protocol: g.protocol_when_stable().to_string(),
                members: g.described_members(),
            });
        }
        self.consumer_lock().get(group).map(|g| Described {
            state: g.state(),
            protocol_type: CONSUMER.to_string(),
            protocol: String::new(),
            members: g
                .described()
                .into_iter()
                .map(|m| {
                    (
                        m.member_id,
                        m.instance_id,
                        m.client_id,
                        m.client_host,
                        Bytes::new(),
                        Bytes::new(),
                    )
                })
                .collect(),
        })
    }

    /// Every group: id, state, protocol type, and group type (`classic` or `consumer`).
    pub fn list(&self) -> Vec<(String, &'static str, String, &'static str)> {
        let mut out: Vec<_> = self
            .lock()
            .values()
            .map(|g| {
                (
                    g.id().to_string(),
                    g.state().name(),
                    g.protocol_type().to_string(),
                    "classic",
                )
            })
            .collect();
        out.extend(self.consumer_lock().values().map(|g| {
            (
                g.id().to_string(),
                g.state(),
                CONSUMER.to_string(),
                CONSUMER,
            )
        }));
        out
    }

    /// Groups and their members counted by group type (`classic`, `consumer`) and Kafka's
    /// state name, for `GET /metrics`: `(type, state) -> (groups, members)`.
    pub fn census(&self) -> std::collections::BTreeMap<(&'static str, &'static str), (u64, u64)> {
        let mut out = std::collections::BTreeMap::new();
        for g in self.lock().values() {
            let e: &mut (u64, u64) = out.entry(("classic", g.state().name())).or_default();
            e.0 += 1;
            e.1 += g.member_count() as u64;
        }
        for g in self.consumer_lock().values() {
            let e: &mut (u64, u64) = out.entry((CONSUMER, g.state())).or_default();
            e.0 += 1;
            e.1 += g.described().len() as u64;
        }
        out
    }

    /// Whether `group` has membership (either protocol), members or not.
    pub fn exists(&self, group: &str) -> bool {
        self.lock().contains_key(group) || self.consumer_lock().contains_key(group)
    }

    /// Whether `group` has members (either protocol).
    pub fn active(&self, group: &str) -> bool {
        self.lock().get(group).is_some_and(|g| !g.is_empty())
            || self
                .consumer_lock()
                .get(group)
                .is_some_and(|g| !g.is_empty())
    }

    /// When `group` became empty, if it is a group of members (a classic one with a protocol
    /// type, or a consumer-protocol one) with none now: its offsets expire counted from then,
    /// as Kafka counts them.
    pub fn empty_since(&self, group: &str) -> Option<i64> {
        if let Some(g) = self.lock().get(group) {
            return (g.is_empty() && !g.protocol_type().is_empty()).then(|| g.state_since());
        }
        self.consumer_lock()
            .get(group)
            .filter(|g| g.is_empty())
            .map(ConsumerGroup::state_since)
    }

    /// The topics `group`'s members subscribe to, when known (`topics`: every topic, for
    /// consumer-protocol regular expressions).
    pub fn subscribed_topics(
        &self,
        group: &str,
        topics: &BTreeMap<String, i32>,
    ) -> Option<BTreeSet<String>> {
        if let Some(g) = self.lock().get(group) {
            return g.subscribed_topics();
        }
        self.consumer_lock()
            .get(group)
            .map(|g| g.subscribed_topics(topics))
    }

    /// Removes `group` if it has no members (DeleteGroups): `Err(NON_EMPTY_GROUP)` if it has.
    pub fn remove_if_empty(&self, group: &str) -> Result<bool, ResponseError> {
        let mut map = self.lock();
        let mut consumer = self.consumer_lock();
        let empty = match (map.get(group), consumer.get(group)) {
            (None, None) => return Ok(false),
            (Some(g), _) => g.is_empty(),
            (None, Some(g)) => g.is_empty(),
        };
        if !empty {
            return Err(ResponseError::NonEmptyGroup);
        }
        map.remove(group);
        consumer.remove(group);
        Ok(true)
    }

    /// Empty groups (no members) that became empty at or before `cutoff_ms`.
    pub fn empty_before(&self, cutoff_ms: i64) -> Vec<String> {
        let mut out: Vec<String> = self
            .lock()
            .values()
            .filter(|g| g.is_empty() && g.state_since() <= cutoff_ms)
            .map(|g| g.id().to_string())
            .collect();
        out.extend(
            self.consumer_lock()
                .values()
                .filter(|g| g.is_empty() && g.state_since() <= cutoff_ms)
                .map(|g| g.id().to_string()),
        );
        out
    }

    /// A ConsumerGroupHeartbeat of `group` (KIP-848). A classic group with members is not a
    /// consumer group (`GROUP_ID_NOT_FOUND`, as Kafka answers); an empty one becomes one. The
    /// changes it made are queued to `store` before this returns (in the order of the
    /// changes); the answer is to be given once the returned write is durable.
    pub fn consumer_heartbeat(
        &self,
        store: &dyn Store,
        group: &str,
        hb: Heartbeat,
    ) -> Result<(Answer, Option<Stored<'static>>), Refusal> {
        let topics = store.topics();
        let ids = store.topic_ids();
        let now = crate::coordinator::transactions::now_ms();
        let answer = {
            let mut classic = self.lock();
            match classic.get(group) {
                Some(g) if !g.is_empty() => {
                    return Err((
                        ResponseError::GroupIdNotFound,
                        format!("Group {group} is not a consumer group."),
                    ))
                }
                Some(_) if hb.member_epoch == 0 => {
                    classic.remove(group);
                }
                _ => {}
            }
            let mut consumer = self.consumer_lock();
            let g = match consumer.get_mut(group) {
                Some(g) => g,
                None if hb.member_epoch == 0 => consumer
                    .entry(group.to_string())
                    .or_insert_with(|| ConsumerGroup::new(group, now)),
                None => {
                    return Err((
                        ResponseError::UnknownMemberId,
                        format!("Member {} is not a member of group {group}.", hb.member_id),
                    ))
                }
            };
            let before = g.durable();
            let answer = g.heartbeat(hb, &topics, self.consumer_settings, now)?;
            let write = store_changes(store, g, &before, &ids)
                .map_err(|e| (e, "__consumer_offsets is not there yet".to_string()))?;
            (answer, write)
        };
        self.wake.notify_one();
        Ok(answer)
    }

    /// `group` as ConsumerGroupDescribe shows it: state, epochs, assignor, members.
    pub fn consumer_describe(&self, group: &str) -> Option<ConsumerDescribed> {
        self.consumer_lock().get(group).map(|g| {
            let (epoch, assignment_epoch, assignor) = g.epochs();
            (
                g.state(),
                (epoch, assignment_epoch, assignor.to_string()),
                g.described(),
            )
        })
    }

    /// The heartbeat interval consumer-protocol members are told.
    pub fn consumer_heartbeat_interval_ms(&self) -> i32 {
        self.consumer_settings.heartbeat_interval_ms
    }

    /// Whether `group` is a classic group's id that a JoinGroup may use: not a consumer-protocol
    /// group with members (an empty one is dropped, as Kafka converts it).
    pub fn classic_may_join(&self, group: &str) -> bool {
        let mut consumer = self.consumer_lock();
        match consumer.get(group) {
            Some(g) if !g.is_empty() => false,
            Some(_) => {
                consumer.remove(group);
                true
            }
            None => true,
        }
    }

    /// Runs the groups' timers until the process ends: sessions, join and sync phases.
    pub async fn run_timers(&self, store: &dyn Store) {
        loop {
            let now = crate::coordinator::transactions::now_ms();
            let mut due = Vec::new();
            let mut next = now + i64::try_from(TIMER_IDLE.as_millis()).unwrap_or(500);
            {
                let mut map = self.lock();
                for g in map.values_mut() {
                    match g.next_deadline() {
                        Some(t) if t <= now => {
                            for p in g.tick(self.limits, now) {
                                due.push((g.id().to_string(), p));
                            }
                            if let Some(t) = g.next_deadline() {
                                next = next.min(t.max(now + 1));
                            }
                        }
                        Some(t) => next = next.min(t),
                        None => {}
                    }
                }
            }
            let topics = {
                let due = self
                    .consumer_lock()
                    .values()
                    .any(|g| g.next_deadline().is_some_and(|t| t <= now));
                due.then(|| store.topics())
            };
            let ids = topics.as_ref().map(|_| store.topic_ids());
            let mut writes = Vec::new();
            for g in self.consumer_lock().values_mut() {
                match g.next_deadline() {
                    Some(t) if t <= now => {
                        if let (Some(topics), Some(ids)) = (&topics, &ids) {
                            let before = g.durable();
                            g.tick(topics, now);
                            match store_changes(store, g, &before, ids) {
                                Ok(w) => writes.extend(w),
                                Err(e) => {
                                    tracing::warn!(group = %g.id(), error = ?e, "a consumer group's changes were not stored")
                                }
                            }
                        }
                    }
                    Some(t) => next = next.min(t),
                    None => {}
                }
                if let Some(t) = g.next_deadline() {
                    next = next.min(t.max(now + 1));
                }
            }
            for w in writes {
                if let Err(e) = w.await {
                    tracing::warn!(error = ?e, "storing a consumer group's changes failed");
                }
            }
            for (group, p) in due {
                self.persist(store, &group, p).await;
            }
            let wait = u64::try_from((next - crate::coordinator::transactions::now_ms()).max(1))
                .unwrap_or(1);
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        }
    }
}
