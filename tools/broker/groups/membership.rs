//! The classic groups of this coordinator ([`super::classic`]): the map of groups under one
//! lock, the requests that wait on them, the writes of their metadata records, and the timer
//! task that ends sessions, join phases and sync phases.
//!
//! A change that must be durable before it is answered (a generation's assignment, a static
//! member's new id) is written through a [`Store`] after the lock is released, then handed
//! back to its group. Two writes of one group may reach the log in another order than their
//! changes; loading takes the stored value with the highest generation since the group's last
//! tombstone, so the order does not matter ([`Loaded`]).

use super::classic::{ClassicGroup, Join, JoinAnswer, Limits, Persist, Reply, State, SyncAnswer};
use super::records::GroupValue;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// A stored group record's write: `Ok` once durable.
pub type Stored<'a> = Pin<Box<dyn Future<Output = Result<(), ResponseError>> + Send + 'a>>;

/// Where group metadata records are written (the broker's `__consumer_offsets`).
pub trait Store: Send + Sync {
    /// Writes `value` as `group`'s metadata record, durably.
    fn store<'a>(&'a self, group: &'a str, value: GroupValue) -> Stored<'a>;
}

/// The longest the timer task sleeps without being woken.
const TIMER_IDLE: Duration = Duration::from_millis(500);

/// The group records read at start-up: per group, the value with the highest generation since
/// its last tombstone.
#[derive(Default)]
pub struct Loaded(HashMap<String, Option<GroupValue>>);

impl Loaded {
    /// Takes a record read in log order (`None`: a tombstone).
    pub fn take(&mut self, group: String, value: Option<GroupValue>) {
        let slot = self.0.entry(group).or_default();
        match (value, slot.as_ref()) {
            (None, _) => *slot = None,
            (Some(v), Some(have)) if v.generation < have.generation => {}
            (Some(v), _) => *slot = Some(v),
        }
    }
}

/// The classic groups.
pub struct Membership {
    groups: Mutex<HashMap<String, ClassicGroup>>,
    limits: Limits,
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
    pub fn new(limits: Limits) -> Self {
        Membership {
            groups: Mutex::new(HashMap::new()),
            limits,
            wake: tokio::sync::Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, ClassicGroup>> {
        self.groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the groups read at start-up; their members' sessions start now.
    pub fn restore(&self, loaded: Loaded) -> usize {
        let now = crate::txn::now_ms();
        let mut map = self.lock();
        for (id, value) in loaded.0 {
            if let Some(v) = value {
                map.insert(id.clone(), ClassicGroup::loaded(&id, &v, now));
            }
        }
        self.wake.notify_one();
        map.len()
    }

    /// Writes `first` and whatever its outcome leads to.
    async fn persist(&self, store: &dyn Store, group: &str, first: Persist) {
        let mut next = Some(first);
        while let Some(p) = next.take() {
            let stored = store.store(group, p.value).await;
            if let Err(e) = &stored {
                tracing::warn!(%group, error = ?e, "storing group metadata failed");
            }
            let now = crate::txn::now_ms();
            next = self
                .lock()
                .get_mut(group)
                .and_then(|g| g.persisted(p.then, stored, self.limits, now));
        }
        self.wake.notify_one();
    }

    /// A JoinGroup of `group`.
    pub async fn join(&self, store: &dyn Store, group: &str, j: Join) -> JoinAnswer {
        let now = crate::txn::now_ms();
        let member_id = j.member_id.clone();
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
        let now = crate::txn::now_ms();
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
        let now = crate::txn::now_ms();
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

    /// Whether `group` may take an offset commit from this member and generation: `Ok(None)`
    /// when no classic group of that id exists.
    pub fn validate_commit(
        &self,
        group: &str,
        member: (&str, Option<&str>),
        generation: i32,
        transactional: bool,
    ) -> Option<Result<(), ResponseError>> {
        self.lock()
            .get(group)
            .map(|g| g.validate_commit(member.0, member.1, generation, transactional))
    }

    /// `group` as DescribeGroups shows it, if it exists.
    pub fn describe(&self, group: &str) -> Option<Described> {
        self.lock().get(group).map(|g| Described {
            state: g.state().name(),
            protocol_type: g.protocol_type().to_string(),
            protocol: g.protocol_when_stable().to_string(),
            members: g.described_members(),
        })
    }

    /// Every group: id, state, protocol type.
    pub fn list(&self) -> Vec<(String, &'static str, String)> {
        self.lock()
            .values()
            .map(|g| {
                (
                    g.id().to_string(),
                    g.state().name(),
                    g.protocol_type().to_string(),
                )
            })
            .collect()
    }

    /// The state of `group`, if it exists.
    pub fn state(&self, group: &str) -> Option<State> {
        self.lock().get(group).map(ClassicGroup::state)
    }

    /// When `group` became empty, if it is a classic group with a protocol type and no
    /// members (its offsets expire counted from then, as Kafka counts them).
    pub fn empty_since(&self, group: &str) -> Option<i64> {
        self.lock()
            .get(group)
            .filter(|g| g.is_empty() && !g.protocol_type().is_empty())
            .map(ClassicGroup::state_since)
    }

    /// The topics `group`'s members subscribe to, when known.
    pub fn subscribed_topics(&self, group: &str) -> Option<BTreeSet<String>> {
        self.lock()
            .get(group)
            .and_then(ClassicGroup::subscribed_topics)
    }

    /// Removes `group` if it has no members (DeleteGroups): `Err(NON_EMPTY_GROUP)` if it has.
    pub fn remove_if_empty(&self, group: &str) -> Result<bool, ResponseError> {
        let mut map = self.lock();
        match map.get(group) {
            None => Ok(false),
            Some(g) if g.is_empty() => {
                map.remove(group);
                Ok(true)
            }
            Some(_) => Err(ResponseError::NonEmptyGroup),
        }
    }

    /// Empty groups (no members) older than `cutoff_ms`.
    pub fn empty_before(&self, cutoff_ms: i64) -> Vec<String> {
        self.lock()
            .values()
            .filter(|g| g.is_empty() && g.state_since() <= cutoff_ms)
            .map(|g| g.id().to_string())
            .collect()
    }

    /// Runs the groups' timers until the process ends: sessions, join and sync phases.
    pub async fn run_timers(&self, store: &dyn Store) {
        loop {
            let now = crate::txn::now_ms();
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
            for (group, p) in due {
                self.persist(store, &group, p).await;
            }
            let wait = u64::try_from((next - crate::txn::now_ms()).max(1)).unwrap_or(1);
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        }
    }
}
