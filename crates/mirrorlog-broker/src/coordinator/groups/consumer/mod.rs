//! One group of KIP-848's consumer protocol (`ConsumerGroupHeartbeat`), as Kafka's
//! `GroupMetadataManager` and `CurrentAssignmentBuilder` run it: the coordinator assigns.
//!
//! - **Epochs.** The group epoch is bumped when a member joins or leaves, when a subscription
//!   changes, and when a subscribed topic's partitions change. A bumped epoch gets a new target
//!   assignment from the group's assignor (`assignor.rs`: `uniform` or `range`, the one most
//!   members ask for).
//! - **Reconciliation.** Each member moves towards its target: partitions it must give up are
//!   revoked first (it keeps its epoch until it reports them gone); partitions still owned by
//!   another member are held back (unreleased) until freed; then it takes the target's epoch.
//!   A member that does not revoke within its rebalance timeout is removed.
//! - **Fencing.** A heartbeat with an epoch the member does not have is `FENCED_MEMBER_EPOCH`
//!   (the previous epoch is accepted when the owned partitions are a subset of the assignment:
//!   the answer that bumped it may have been lost); an unknown member `UNKNOWN_MEMBER_ID`.
//!   Epoch 0 (re)joins and owns nothing; -1 leaves; -2 is a static member leaving for a while
//!   (its assignment waits for its instance id until its session ends).
//! - **Sessions.** A member that does not heartbeat within `group.consumer.session.timeout.ms`
//!   is removed.
//! - **Subscriptions** are topic names or a regular expression (KIP-848's server-side regex,
//!   matched against whole topic names, internal topics excluded).
//!
//! **Durable state** (`records.rs`, Kafka's records): every change of the group's epoch, the
//! target's epoch, a member's metadata, target or current assignment is written to
//! `__consumer_offsets` before the heartbeat that made it is answered ([`ConsumerGroup::durable`]
//! and [`changes`] give what changed); at start-up the groups are rebuilt from them
//! ([`ConsumerGroup::restore`]) and their members carry on with their epochs.

pub mod assignor;
mod durable;
mod invariants;
pub mod records;

pub use durable::{by_name, changes, Durable, DurableMember};

use assignor::{MemberSpec, Partitions};
use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A heartbeat's epoch that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;
/// A static member's epoch that leaves for a while.
pub const LEAVE_STATIC_EPOCH: i32 = -2;

/// The settings the protocol runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `group.consumer.session.timeout.ms` (Kafka's default: 45000).
    pub session_timeout_ms: i64,
    /// `group.consumer.heartbeat.interval.ms` (Kafka's default: 5000).
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.max.size` (Kafka's default: unbounded).
    pub max_size: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5000,
            max_size: i32::MAX as usize,
        }
    }
}

/// A ConsumerGroupHeartbeat, topics by name (the handler maps ids).
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    /// The member id (the client's, KIP-1082).
    pub member_id: String,
    /// Its epoch: 0 joins, -1 leaves, -2 leaves for a while (static).
    pub member_epoch: i32,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// The rack, when given.
    pub rack_id: Option<String>,
    /// The rebalance timeout, or -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// The subscribed topics, when changed.
    pub subscribed_topics: Option<Vec<String>>,
    /// The subscribed regular expression, when changed ("" clears it).
    pub subscribed_regex: Option<String>,
    /// The assignor asked for, when changed.
    pub server_assignor: Option<String>,
    /// The partitions the member owns, when given.
    pub owned: Option<Partitions>,
    /// The client id of the request.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
}

/// A heartbeat's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The member id.
    pub member_id: String,
    /// The member's epoch now.
    pub member_epoch: i32,
    /// Its assignment, when it changed or the request was a full one.
    pub assignment: Option<Partitions>,
}

/// A refusal: Kafka's error and its message.
pub type Refusal = (ResponseError, String);

fn refuse<T>(e: ResponseError, why: impl Into<String>) -> Result<T, Refusal> {
    Err((e, why.into()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
}

impl MemberState {
    /// Kafka's `MemberState` value in its records.
    fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
        }
    }

    fn from_value(v: i8) -> Self {
        match v {
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        }
    }
}

#[derive(Debug, Clone)]
struct Member {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    topics: Vec<String>,
    regex: Option<String>,
    assignor: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    assigned: Partitions,
    revoking: Partitions,
    session_deadline: i64,
    revocation_deadline: Option<i64>,
}

/// A member as ConsumerGroupDescribe shows it.
pub struct DescribedMember {
    /// Member id, instance id, rack, epoch, client id, host.
    pub member_id: String,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// Its rack.
    pub rack_id: Option<String>,
    /// Its epoch.
    pub epoch: i32,
    /// Its client id.
    pub client_id: String,
    /// Its address.
    pub client_host: String,
    /// Its subscribed topics.
    pub topics: Vec<String>,
    /// Its regular expression.
    pub regex: Option<String>,
    /// Its current assignment.
    pub assigned: Partitions,
    /// Its target assignment.
    pub target: Partitions,
}

/// One consumer-protocol group.
pub struct ConsumerGroup {
    id: String,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    static_members: HashMap<String, String>,
    target: BTreeMap<String, Partitions>,
    /// The subscribed topics' partition counts at the last epoch.
    metadata: BTreeMap<String, i32>,
    assignor: String,
    state_since_ms: i64,
}

/// Whether `topic` is matched by `regex` (whole name), internal topics never.
fn matches(regex: &regex::Regex, topic: &str) -> bool {
    !topic.starts_with("__") && regex.is_match(topic)
}

/// Compiled subscriptions kept at most: each distinct pattern is compiled once while it is in
/// use; past this many, the least recently used goes (a client sending a new pattern on every
/// heartbeat costs one compilation each, never memory).
const REGEX_CACHE_ENTRIES_MAX: usize = 1024;

/// Compiled patterns by their text, each with when it was last used.
type RegexCache = HashMap<String, (std::sync::Arc<regex::Regex>, u64)>;

/// The compiled patterns.
static REGEX_CACHE: std::sync::Mutex<Option<RegexCache>> = std::sync::Mutex::new(None);
/// The use counter the cache orders its entries by.
static REGEX_USES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A subscription's regular expression, compiled to match whole topic names. A pattern is
/// compiled once and kept ([`REGEX_CACHE_ENTRIES_MAX`]): every member's every heartbeat asks
/// for it, under the group's lock.
pub fn compile(regex: &str) -> Result<std::sync::Arc<regex::Regex>, Refusal> {
    let used = REGEX_USES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut cache = REGEX_CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some((re, last)) = cache.get_mut(regex) {
        *last = used;
        return Ok(re.clone());
    }
    let compiled = regex::Regex::new(&format!("^(?:{regex})$")).map_err(|e| {
        (
            ResponseError::InvalidRegularExpression,
            format!("SubscribedTopicRegex {regex:?} is not a valid regular expression: {e}"),
        )
    })?;
    if cache.len() >= REGEX_CACHE_ENTRIES_MAX {
        if let Some(oldest) = cache
            .iter()
            .min_by_key(|(_, (_, last))| *last)
            .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
    }
    let compiled = std::sync::Arc::new(compiled);
    cache.insert(regex.to_string(), (compiled.clone(), used));
    Ok(compiled)
}

impl ConsumerGroup {
    /// A new, empty group.
    pub fn new(id: &str, now: i64) -> Self {
        ConsumerGroup {
            id: id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            target: BTreeMap::new(),
            metadata: BTreeMap::new(),
            assignor: assignor::ASSIGNORS[0].to_string(),
            state_since_ms: now,
        }
    }

    /// Its id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether it has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// When it last became empty or got a member.
    pub fn state_since(&self) -> i64 {
        self.state_since_ms
    }

    /// Kafka's state name: Empty, Assigning, Reconciling or Stable.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Group epoch, assignment epoch and assignor.
    pub fn epochs(&self) -> (i32, i32, &str) {
        (self.group_epoch, self.assignment_epoch, &self.assignor)
    }

    /// The members, as ConsumerGroupDescribe shows them.
    pub fn described(&self) -> Vec<DescribedMember> {
        self.members
            .values()
            .map(|m| DescribedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                rack_id: m.rack_id.clone(),
                epoch: m.epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                topics: m.topics.clone(),
                regex: m.regex.clone(),
                assigned: m.assigned.clone(),
                target: self.target.get(&m.id).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The topics the members subscribe to (names and regex matches among `all`).
    pub fn subscribed_topics(&self, all: &BTreeMap<String, i32>) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for m in self.members.values() {
            out.extend(Self::member_topics(m, all));
        }
        out
    }

    fn member_topics(m: &Member, all: &BTreeMap<String, i32>) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = m
            .topics
            .iter()
            .filter(|t| all.contains_key(*t))
            .cloned()
            .collect();
        if let Some(re) = m.regex.as_deref().filter(|r| !r.is_empty()) {
            if let Ok(re) = compile(re) {
                out.extend(all.keys().filter(|t| matches(&re, t)).cloned());
            }
        }
        out
    }

    /// Kafka's commit check for a consumer-protocol group: a member's commit must carry its
    /// epoch (`STALE_MEMBER_EPOCH`); one without a member only when the group is empty.
    pub fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), ResponseError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if epoch != m.epoch {
            return Err(ResponseError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// A ConsumerGroupHeartbeat; `topics`: every topic and its partition count.
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &BTreeMap<String, i32>,
        settings: Settings,
        now: i64,
    ) -> Result<Answer, Refusal> {
        let out = self.heartbeat_unchecked(hb, topics, settings, now);
        self.debug_check_invariants();
        out
    }

    fn heartbeat_unchecked(
        &mut self,
        hb: Heartbeat,
        topics: &BTreeMap<String, i32>,
        settings: Settings,
        now: i64,
    ) -> Result<Answer, Refusal> {
        if let Some(re) = hb.subscribed_regex.as_deref().filter(|r| !r.is_empty()) {
            compile(re)?;
        }
        if let Some(a) = &hb.server_assignor {
            if !assignor::ASSIGNORS.contains(&a.as_str()) {
                return refuse(
                    ResponseError::UnsupportedAssignor,
                    format!(
                        "ServerAssignor {a} is not supported. Supported assignors: {}.",
                        assignor::ASSIGNORS.join(", ")
                    ),
                );
            }
        }
        // Whether the group moves to a new epoch: a new member, a changed subscription.
        let mut bump = match hb.member_epoch {
            LEAVE_EPOCH | LEAVE_STATIC_EPOCH => return self.leave(&hb, topics, now),
            0 => self.join(&hb, settings, now)?,
            _ => {
                self.check_epoch(&hb)?;
                false
            }
        };
        let id = hb.member_id.clone();
        let full = hb.member_epoch == 0
            || (hb.rebalance_timeout_ms != -1
                && hb.subscribed_topics.is_some()
                && hb.owned.is_some());
        let Some(m) = self.members.get_mut(&id) else {
            return refuse(ResponseError::UnknownMemberId, "unknown member");
        };
        let before = m.assigned.clone();
        if hb.rebalance_timeout_ms != -1 {
            m.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if let Some(t) = hb.subscribed_topics {
            let mut t = t;
            t.sort();
            t.dedup();
            bump |= m.topics != t;
            m.topics = t;
        }
        if let Some(re) = hb.subscribed_regex {
            let re = (!re.is_empty()).then_some(re);
            bump |= m.regex != re;
            m.regex = re;
        }
        if let Some(a) = hb.server_assignor {
            m.assignor = Some(a);
        }
        if hb.rack_id.is_some() {
            m.rack_id = hb.rack_id;
        }
        m.client_id = hb.client_id;
        m.client_host = hb.client_host;
        m.session_deadline = now + settings.session_timeout_ms;
        self.refresh(topics, bump);
        self.reconcile(&id, hb.owned.as_ref(), now);
        let m = self
            .members
            .get(&id)
            .ok_or_else(|| (ResponseError::UnknownMemberId, "unknown member".to_string()))?;
        Ok(Answer {
            member_id: id,
            member_epoch: m.epoch,
            assignment: (full || m.assigned != before).then(|| m.assigned.clone()),
        })
    }

    /// A member joins (or rejoins) with epoch 0: it owns nothing. A static member whose
    /// instance left for a while (-2) takes its assignment back under its new id. Whether the
    /// member is new (the group moves to a new epoch).
    fn join(&mut self, hb: &Heartbeat, settings: Settings, now: i64) -> Result<bool, Refusal> {
        if hb
            .owned
            .as_ref()
            .is_some_and(|o| o.values().any(|p| !p.is_empty()))
        {
            return refuse(
                ResponseError::InvalidRequest,
                "TopicPartitions must be empty when (re-)joining.",
            );
        }
        let mut carried: Option<Member> = None;
        if let Some(instance) = &hb.instance_id {
            if let Some(old_id) = self.static_members.get(instance).cloned() {
                if old_id != hb.member_id {
                    if self
                        .members
                        .get(&old_id)
                        .is_some_and(|o| o.epoch != LEAVE_STATIC_EPOCH)
                    {
                        return refuse(
                            ResponseError::UnreleasedInstanceId,
                            format!(
                                "Static member {old_id} with instance id {instance} is not released yet."
                            ),
                        );
                    }
                    carried = self.members.remove(&old_id);
                    if let Some(t) = self.target.remove(&old_id) {
                        self.target.insert(hb.member_id.clone(), t);
                    }
                }
            }
        }
        let existing = self.members.get(&hb.member_id).cloned();
        let new_member = existing.is_none() && carried.is_none();
        if new_member && self.members.len() >= settings.max_size {
            return refuse(
                ResponseError::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    settings.max_size
                ),
            );
        }
        let from = carried.as_ref().or(existing.as_ref());
        let member = Member {
            id: hb.member_id.clone(),
            instance_id: hb
                .instance_id
                .clone()
                .or_else(|| from.and_then(|m| m.instance_id.clone())),
            rack_id: from.and_then(|m| m.rack_id.clone()),
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: hb.rebalance_timeout_ms,
            topics: from.map(|m| m.topics.clone()).unwrap_or_default(),
            regex: from.and_then(|m| m.regex.clone()),
            assignor: from.and_then(|m| m.assignor.clone()),
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            // A returning static member keeps its partitions; a rejoin releases its own.
            assigned: carried.map(|m| m.assigned).unwrap_or_default(),
            revoking: Partitions::new(),
            session_deadline: now + settings.session_timeout_ms,
            revocation_deadline: None,
        };
        if self.members.is_empty() {
            self.state_since_ms = now;
        }
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), hb.member_id.clone());
        }
        self.members.insert(hb.member_id.clone(), member);
        Ok(new_member)
    }

    /// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid` (and the static member's checks).
    fn check_epoch(&self, hb: &Heartbeat) -> Result<(), Refusal> {
        if let Some(instance) = &hb.instance_id {
            match self.static_members.get(instance) {
                None => {
                    return refuse(
                        ResponseError::UnknownMemberId,
                        format!("Instance id {instance} is unknown."),
                    )
                }
                Some(id) if id != &hb.member_id => {
                    return refuse(
                        ResponseError::FencedInstanceId,
                        format!(
                        "Static member {} with instance id {instance} was fenced by member {id}.",
                        hb.member_id
                    ),
                    )
                }
                Some(_) => {}
            }
        }
        let Some(m) = self.members.get(&hb.member_id) else {
            return refuse(
                ResponseError::UnknownMemberId,
                format!(
                    "Member {} is not a member of group {}.",
                    hb.member_id, self.id
                ),
            );
        };
        let subset = hb.owned.as_ref().is_some_and(|o| {
            o.iter().all(|(t, ps)| {
                ps.iter()
                    .all(|p| m.assigned.get(t).is_some_and(|a| a.contains(p)))
            })
        });
        if hb.member_epoch > m.epoch
            || (hb.member_epoch < m.epoch && (hb.member_epoch != m.previous_epoch || !subset))
        {
            return refuse(
                ResponseError::FencedMemberEpoch,
                format!(
                    "The consumer group member has a different member epoch ({}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                    hb.member_epoch, m.epoch
                ),
            );
        }
        Ok(())
    }

    /// A member leaves (-1), or a static member leaves for a while (-2).
    fn leave(
        &mut self,
        hb: &Heartbeat,
        topics: &BTreeMap<String, i32>,
        now: i64,
    ) -> Result<Answer, Refusal> {
        let id = match &hb.instance_id {
            Some(i) => self.static_members.get(i).cloned(),
            None => self
                .members
                .contains_key(&hb.member_id)
                .then(|| hb.member_id.clone()),
        };
        let Some(id) = id else {
            return refuse(
                ResponseError::UnknownMemberId,
                format!(
                    "Member {} is not a member of group {}.",
                    hb.member_id, self.id
                ),
            );
        };
        if hb.member_epoch == LEAVE_STATIC_EPOCH && hb.instance_id.is_some() {
            if let Some(m) = self.members.get_mut(&id) {
                m.epoch = LEAVE_STATIC_EPOCH;
            }
        } else {
            self.remove(&id, now);
            self.refresh(topics, true);
        }
        Ok(Answer {
            member_id: hb.member_id.clone(),
            member_epoch: hb.member_epoch,
            assignment: None,
        })
    }

    /// Removes a member (the caller moves the group to a new epoch).
    fn remove(&mut self, id: &str, now: i64) {
        if let Some(m) = self.members.remove(id) {
            if let Some(i) = &m.instance_id {
                if self.static_members.get(i).is_some_and(|x| x == id) {
                    self.static_members.remove(i);
                }
            }
            self.target.remove(id);
            if self.members.is_empty() {
                self.state_since_ms = now;
            }
        }
    }

    /// A new epoch when `bump` (membership or subscriptions changed) or when the subscribed
    /// topics' partitions changed, one for both; a new target assignment when the epoch is
    /// newer than the target's.
    fn refresh(&mut self, topics: &BTreeMap<String, i32>, bump: bool) {
        let subscribed = self.subscribed_topics(topics);
        let metadata: BTreeMap<String, i32> = subscribed
            .iter()
            .filter_map(|t| topics.get(t).map(|n| (t.clone(), *n)))
            .collect();
        if bump || metadata != self.metadata {
            self.metadata = metadata;
            self.group_epoch += 1;
        }
        if self.group_epoch <= self.assignment_epoch {
            return;
        }
        // The assignor most members ask for (Kafka's preferred server assignor).
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        if let Some((a, _)) = votes.into_iter().max_by_key(|(_, n)| *n) {
            self.assignor = a.to_string();
        }
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| MemberSpec {
                id: &m.id,
                instance_id: m.instance_id.as_deref(),
                topics: Self::member_topics(m, topics),
                previous: self.target.get(&m.id),
            })
            .collect();
        let target = assignor::assign(&self.assignor, &specs, &self.metadata);
        self.target = target;
        self.assignment_epoch = self.group_epoch;
    }

    /// Whether a member other than `id` holds `topic`-`p` (assigned or being revoked).
    fn held_by_other(&self, id: &str, topic: &str, p: i32) -> bool {
        self.members.values().any(|m| {
            m.id != id
                && (m.assigned.get(topic).is_some_and(|s| s.contains(&p))
                    || m.revoking.get(topic).is_some_and(|s| s.contains(&p)))
        })
    }

    /// Kafka's `CurrentAssignmentBuilder`: moves member `id` towards its target.
    fn reconcile(&mut self, id: &str, owned: Option<&Partitions>, now: i64) {
        let Some(m) = self.members.get(id) else {
            return;
        };
        let owns_any = |of: &Partitions| -> bool {
            match owned {
                None => true,
                Some(o) => o
                    .iter()
                    .any(|(t, ps)| of.get(t).is_some_and(|r| ps.iter().any(|p| r.contains(p)))),
            }
        };
        let (epoch, base) = match m.state {
            MemberState::Stable if m.epoch == self.assignment_epoch => return,
            MemberState::UnrevokedPartitions if owns_any(&m.revoking) => return,
            MemberState::UnrevokedPartitions => (m.epoch + 1, m.assigned.clone()),
            _ => (m.epoch, m.assigned.clone()),
        };
        let target = self.target.get(id).cloned().unwrap_or_default();
        let mut assigned = Partitions::new();
        let mut revoking = Partitions::new();
        let mut pending = Partitions::new();
        let mut unreleased = false;
        let topics: BTreeSet<&String> = target.keys().chain(base.keys()).collect();
        for t in topics {
            let want = target.get(t).cloned().unwrap_or_default();
            let have = base.get(t).cloned().unwrap_or_default();
            let keep: BTreeSet<i32> = have.intersection(&want).copied().collect();
            let revoke: BTreeSet<i32> = have.difference(&keep).copied().collect();
            let mut add = BTreeSet::new();
            for p in want.difference(&keep) {
                if self.held_by_other(id, t, *p) {
                    unreleased = true;
                } else {
                    add.insert(*p);
                }
            }
            if !keep.is_empty() {
                assigned.insert(t.clone(), keep);
            }
            if !revoke.is_empty() {
                revoking.insert(t.clone(), revoke);
            }
            if !add.is_empty() {
                pending.insert(t.clone(), add);
            }
        }
        let target_epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(id) else {
            return;
        };
        let set_epoch = |m: &mut Member, e: i32| {
            if m.epoch != e {
                m.previous_epoch = m.epoch;
                m.epoch = e;
            }
        };
        if !revoking.is_empty() && owns_any(&revoking) {
            set_epoch(m, epoch);
            m.state = MemberState::UnrevokedPartitions;
            m.assigned = assigned;
            m.revoking = revoking;
            if m.revocation_deadline.is_none() {
                m.revocation_deadline = Some(now + i64::from(m.rebalance_timeout_ms.max(0)));
            }
            return;
        }
        for (t, ps) in pending {
            assigned.entry(t).or_default().extend(ps);
        }
        set_epoch(m, target_epoch);
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        m.assigned = assigned;
        m.revoking = Partitions::new();
        m.revocation_deadline = None;
    }

    /// The earliest deadline of its members.
    pub fn next_deadline(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline), m.revocation_deadline])
            .flatten()
            .min()
    }

    /// Removes the members whose session ended or that did not revoke in time.
    pub fn tick(&mut self, topics: &BTreeMap<String, i32>, now: i64) {
        self.tick_unchecked(topics, now);
        self.debug_check_invariants();
    }

    fn tick_unchecked(&mut self, topics: &BTreeMap<String, i32>, now: i64) {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|t| t <= now)
            })
            .map(|m| m.id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %self.id, member = %id, "consumer group member's session or revocation timed out; removed");
            self.remove(id, now);
        }
        if !gone.is_empty() {
            self.refresh(topics, true);
        }
    }
}

#[cfg(test)]
mod tests;
