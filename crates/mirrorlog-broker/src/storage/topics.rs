//! Topics: names, ids, partition counts and per-topic settings, one file per topic in
//! `broker/topics/NAME.json`, so that a change of one topic writes that topic's file alone (a
//! request creating many topics costs one small write each, not one rewrite of every topic
//! each), and a file that does not read back fails that topic alone (`damage.rs`). A
//! `broker/topics.json` of an earlier version (every topic in one document) is split into
//! these files at open, then removed.
//!
//! The engine knows partitions; a topic is the broker's. Creating one is a registry entry in
//! state `creating` (durable), then its partitions, then `ready`; deleting one is `deleting`
//! (durable), then its partitions removed, then the entry. The broker finishes either at start,
//! so a crash never leaves a topic half there: Metadata lists only `ready` topics, and a topic's
//! partitions are either all served or being removed.

use crate::config::topic::apply as set_topic_config;
use crate::config::ConfigError;
use crate::storage::store::{Document, StoreError};
use mirrorlog::engine::{Engine, EngineError, PartitionConfig, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a topic is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopicState {
    /// Its partitions are being created.
    Creating,
    /// Served.
    Ready,
    /// Its partitions are being removed.
    Deleting,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topic {
    /// Kafka's topic id (KIP-516), 16 random bytes.
    pub id: [u8; 16],
    /// Partitions.
    pub partitions: i32,
    /// Settings given at creation (Kafka's names), over the broker's defaults.
    pub configs: BTreeMap<String, String>,
    /// Its state.
    pub state: TopicState,
    /// CreatePartitions in progress: the count being grown to (durable before the new
    /// partitions are created; start-up repair finishes it). Served with `partitions` until done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growing_to: Option<i32>,
}

impl Topic {
    /// Every partition the engine may hold for this topic (a growth included).
    pub fn partitions_held(&self) -> i32 {
        self.partitions.max(self.growing_to.unwrap_or(0))
    }

    /// The first invariant of topic `name`'s entry that does not hold, or `None`: the name is
    /// one Kafka accepts; the partition count is within 1..=`PARTITIONS_PER_TOPIC_MAX`; a
    /// growth in progress is of a ready topic, to a larger count within the same bound.
    /// Checked for every entry loaded (one that breaks it is damaged, not served: a stored
    /// count of two billion must not make start-up create two billion partitions) and, with
    /// debug assertions, after every change ([`Registry::check_invariants`]).
    pub fn invariant_violation(&self, name: &str) -> Option<String> {
        let max = crate::config::PARTITIONS_PER_TOPIC_MAX;
        if !valid_name(name) {
            return Some(format!("{name:?} is not a valid topic name"));
        }
        if !(1..=max).contains(&self.partitions) {
            return Some(format!(
                "{} partitions (1..={max} are allowed)",
                self.partitions
            ));
        }
        match self.growing_to {
            Some(to) if to <= self.partitions || to > max => Some(format!(
                "growing from {} to {to} partitions",
                self.partitions
            )),
            Some(_) if self.state != TopicState::Ready => {
                Some(format!("growing while {:?}", self.state))
            }
            _ => None,
        }
    }
}

/// Every topic, by name.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Topics {
    /// The topics.
    pub topics: BTreeMap<String, Topic>,
}

/// Why a topic could not be created or deleted.
#[derive(Debug)]
pub enum TopicError {
    /// Kafka's rules for names.
    InvalidName(String),
    /// It exists.
    Exists,
    /// It does not.
    Unknown,
    /// A partition count out of range.
    InvalidPartitions(i32),
    /// CreatePartitions asked for no increase (Kafka's `INVALID_PARTITIONS`, its message).
    NotAnIncrease(String),
    /// CreatePartitions' assignments do not fit (Kafka's `INVALID_REPLICA_ASSIGNMENT`).
    Assignment(String),
    /// A setting.
    Config(ConfigError),
    /// The engine refused.
    Engine(EngineError),
    /// The registry's file.
    Store(StoreError),
    /// The partitions would not fit in the process's open-file limit (`fd_budget.rs`).
    Resources(super::fd_budget::FdBudgetError),
}

impl std::fmt::Display for TopicError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TopicError::InvalidName(n) => write!(f, "invalid topic name {n:?}"),
            TopicError::Exists => write!(f, "topic exists"),
            TopicError::Unknown => write!(f, "no such topic"),
            TopicError::InvalidPartitions(n) => write!(f, "invalid partition count {n}"),
            TopicError::NotAnIncrease(m) | TopicError::Assignment(m) => write!(f, "{m}"),
            TopicError::Config(e) => write!(f, "{e}"),
            TopicError::Engine(e) => write!(f, "{e}"),
            TopicError::Store(e) => write!(f, "{e}"),
            TopicError::Resources(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for TopicError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TopicError::Config(e) => Some(e),
            TopicError::Engine(e) => Some(e),
            TopicError::Resources(e) => Some(e),
            _ => None,
        }
    }
}

/// Kafka's `Topic.validate`: 1–249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// The internal topic of consumer groups' offsets and metadata (Kafka's name).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Whether `name` is one of the broker's internal topics (made by the broker alone, with its
/// own settings; clients may not create, grow, delete, trim or write them).
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC
}

/// The registry and its files.
pub struct Registry {
    dir: std::path::PathBuf,
    topics: Topics,
}

/// The registry's directory under the broker's.
const TOPICS_DIR: &str = "topics";
/// An earlier version's single document.
const LEGACY_DOCUMENT: &str = "topics.json";

impl Registry {
    /// Loads every topic's file from `dir/topics/` (after splitting an earlier version's
    /// `dir/topics.json` into them). A file that does not read back is not loaded: its topic's
    /// name and the reason are returned, for the caller to report as damaged.
    pub fn open(dir: &std::path::Path) -> Result<(Self, Vec<(String, String)>), StoreError> {
        let topics_dir = dir.join(TOPICS_DIR);
        let mut registry = Registry {
            dir: topics_dir.clone(),
            topics: Topics::default(),
        };
        let mut damaged = Vec::new();
        std::fs::create_dir_all(&topics_dir).map_err(|e| StoreError {
            path: topics_dir.clone(),
            reason: e.to_string(),
        })?;
        let legacy = Document::new(dir, LEGACY_DOCUMENT)?;
        if let Some(old) = legacy.load::<serde_json::Value>()? {
            let entries = old
                .get("topics")
                .and_then(serde_json::Value::as_object)
                .cloned()
                .unwrap_or_default();
            for (name, entry) in entries {
                match serde_json::from_value::<Topic>(entry) {
                    Ok(topic) => match topic.invariant_violation(&name) {
                        // Never a file named by what is not a topic name.
                        Some(why) => damaged.push((name, format!("{LEGACY_DOCUMENT}: {why}"))),
                        None => registry.file(&name)?.store(&topic)?,
                    },
                    Err(e) => damaged.push((name, format!("{LEGACY_DOCUMENT}: {e}"))),
                }
            }
            legacy.remove()?;
        }
        let listing = std::fs::read_dir(&topics_dir).map_err(|e| StoreError {
            path: topics_dir.clone(),
            reason: e.to_string(),
        })?;
        for entry in listing {
            let path = entry
                .map_err(|e| StoreError {
                    path: topics_dir.clone(),
                    reason: e.to_string(),
                })?
                .path();
            let file_name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let Some(name) = file_name.strip_suffix(".json") else {
                // A temporary file a crash left: its write never completed.
                continue;
            };
            if !valid_name(name) {
                damaged.push((name.to_string(), format!("{file_name}: not a topic's file")));
                continue;
            }
            match registry.file(name)?.load::<Topic>() {
                Ok(Some(topic)) => match topic.invariant_violation(name) {
                    None => {
                        registry.topics.topics.insert(name.to_string(), topic);
                    }
                    Some(why) => damaged.push((name.to_string(), why)),
                },
                Ok(None) => {}
                Err(e) => damaged.push((name.to_string(), e.reason)),
            }
        }
        registry.debug_check_invariants();
        Ok((registry, damaged))
    }

    /// Asserts every entry's invariants ([`Topic::invariant_violation`]).
    ///
    /// # Panics
    /// When one does not hold: a bug in the registry's changes (entries loaded from disk that
    /// break one are never taken in).
    pub fn check_invariants(&self) {
        for (name, topic) in &self.topics.topics {
            if let Some(v) = topic.invariant_violation(name) {
                panic!("topic registry: {name}: {v}");
            }
        }
    }

    /// [`Registry::check_invariants`] when debug assertions are on (tests, CI).
    fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// The file of topic `name` (never outside the registry's directory: a name that could
    /// not be a file's there, which no topic's is, has none).
    fn file(&self, name: &str) -> Result<Document, StoreError> {
        if name.is_empty() || name.contains(['/', '\0']) {
            return Err(StoreError {
                path: self.dir.clone(),
                reason: format!("{name:?} names no file of the registry"),
            });
        }
        Document::new(&self.dir, &format!("{name}.json"))
    }

    /// Writes topic `name`'s file (or removes it when the topic is gone), durably.
    fn store(&self, name: &str) -> Result<(), StoreError> {
        let file = self.file(name)?;
        match self.topics.topics.get(name) {
            Some(topic) => file.store(topic),
            None => file.remove(),
        }
    }

    /// Removes what is left of a topic whose file did not read back (the operator's way out).
    pub fn forget(&mut self, name: &str) -> Result<(), StoreError> {
        self.topics.topics.remove(name);
        self.debug_check_invariants();
        self.store(name)
    }
    /// A ready topic.
    pub fn get(&self, name: &str) -> Option<&Topic> {
        self.topics
            .topics
            .get(name)
            .filter(|t| t.state == TopicState::Ready)
    }

    /// Whether `name` is being created (registered, its partitions on the way).
    pub fn creating(&self, name: &str) -> bool {
        self.topics
            .topics
            .get(name)
            .is_some_and(|t| t.state == TopicState::Creating)
    }

    /// Every ready topic, by name.
    pub fn ready(&self) -> impl Iterator<Item = (&String, &Topic)> {
        self.topics
            .topics
            .iter()
            .filter(|(_, t)| t.state == TopicState::Ready)
    }

    /// Every topic with its state (for the start-up repair).
    pub fn all(&self) -> Vec<(String, Topic)> {
        self.topics
            .topics
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect()
    }

    /// A ready topic's partitions' settings.
    pub fn partition_config(
        defaults: &PartitionConfig,
        topic: &Topic,
    ) -> Result<PartitionConfig, ConfigError> {
        let mut c = *defaults;
        for (k, v) in &topic.configs {
            set_topic_config(&mut c, k, v)?;
        }
        crate::config::topic::fit(&mut c);
        Ok(c)
    }

    /// Everything a new topic must pass before anything of it is written (CreateTopics'
    /// `validate_only` answers with this alone): its name, that it does not exist, its partition
    /// count, and its settings both as the parser reads them and against the engine's own
    /// bounds (`PartitionConfig::validate`): a setting the parser accepts but the engine
    /// refuses (`segment.bytes=2048`) used to leave a durable half-created topic that start-up
    /// repair then failed on.
    ///
    /// # Errors
    /// The first check that fails.
    pub fn check_new(
        &self,
        defaults: &PartitionConfig,
        name: &str,
        partitions: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<PartitionConfig, TopicError> {
        if !valid_name(name) {
            return Err(TopicError::InvalidName(name.into()));
        }
        if self.topics.topics.contains_key(name) {
            return Err(TopicError::Exists);
        }
        if !(1..=crate::config::PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
            return Err(TopicError::InvalidPartitions(partitions));
        }
        settings(defaults, configs)
    }

    /// What AlterConfigs checks before anything is written: the topic exists and is ready, and
    /// its new settings pass the parser and the engine's own bounds. The partitions' settings.
    ///
    /// # Errors
    /// The first check that fails.
    pub fn check_configs(
        &self,
        defaults: &PartitionConfig,
        name: &str,
        configs: &BTreeMap<String, String>,
    ) -> Result<PartitionConfig, TopicError> {
        match self.topics.topics.get(name) {
            Some(t) if t.state == TopicState::Ready => settings(defaults, configs),
            _ => Err(TopicError::Unknown),
        }
    }

    /// Replaces a topic's configs durably (checked by [`Registry::check_configs`]).
    pub fn set_configs(
        &mut self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), TopicError> {
        self.update(name, |t| t.configs = configs)
    }
}

/// A topic's partitions' settings from its configs, checked by the parser and against the
/// engine's own bounds (`PartitionConfig::validate`): a setting the parser accepts but the
/// engine refuses (`segment.bytes=2048`) must be refused before anything is written.
pub fn settings(
    defaults: &PartitionConfig,
    configs: &BTreeMap<String, String>,
) -> Result<PartitionConfig, TopicError> {
    let mut c = *defaults;
    for (k, v) in configs {
        set_topic_config(&mut c, k, v).map_err(TopicError::Config)?;
    }
    crate::config::topic::fit(&mut c);
    c.validate().map_err(|e| {
        TopicError::Config(ConfigError::Invalid {
            key: match &e {
                EngineError::Config { name, .. } => (*name).to_string(),
                _ => String::new(),
            },
            value: String::new(),
            reason: e.to_string(),
        })
    })?;
    Ok(c)
}

impl Registry {
    /// Records a new topic as `creating` (durable) once it passes [`Registry::check_new`]; the
    /// caller creates its partitions and then calls [`Registry::set_state`] with `Ready`. The
    /// topic id is `id` when given (a mirrored topic takes its source's), else a random one.
    pub fn begin_create(
        &mut self,
        defaults: &PartitionConfig,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        id: Option<[u8; 16]>,
    ) -> Result<Topic, TopicError> {
        self.check_new(defaults, name, partitions, &configs)?;
        let topic = Topic {
            id: id.unwrap_or_else(random_id),
            partitions,
            configs,
            state: TopicState::Creating,
            growing_to: None,
        };
        self.topics.topics.insert(name.into(), topic.clone());
        self.debug_check_invariants();
        if let Err(e) = self.store(name) {
            self.topics.topics.remove(name);
            return Err(TopicError::Store(e));
        }
        Ok(topic)
    }

    /// What CreatePartitions checks before anything is written (`validate_only` answers with
    /// this alone), as Kafka's `ReplicationControlManager.createPartitions`: the topic is ready,
    /// `count` is an increase within the per-topic limit, and `assignments` (when given, one
    /// list of broker ids per new partition) name only this broker.
    ///
    /// # Errors
    /// The first check that fails.
    pub fn check_grow(
        &self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        node_id: i32,
    ) -> Result<Topic, TopicError> {
        let topic = self.get(name).ok_or(TopicError::Unknown)?;
        if count <= topic.partitions {
            return Err(TopicError::NotAnIncrease(format!(
                "Topic currently has {} partitions, {count} would not be an increase.",
                topic.partitions
            )));
        }
        if count > crate::config::PARTITIONS_PER_TOPIC_MAX {
            return Err(TopicError::InvalidPartitions(count));
        }
        if let Some(a) = assignments {
            let added = count - topic.partitions;
            if usize::try_from(added).ok() != Some(a.len()) {
                return Err(TopicError::Assignment(format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) \
                     were specified.",
                    a.len()
                )));
            }
            if a.iter().any(|ids| ids.is_empty()) {
                return Err(TopicError::Assignment(
                    "An assignment names no broker.".into(),
                ));
            }
            if let Some(id) = a.iter().flatten().find(|&&id| id != node_id) {
                return Err(TopicError::Assignment(format!(
                    "The manual partition assignment includes broker {id}, but no such broker is \
                     registered."
                )));
            }
        }
        Ok(topic.clone())
    }

    /// Records durably that `name` grows to `count` partitions (after [`Registry::check_grow`]);
    /// the caller creates them and then calls [`Registry::finish_grow`].
    pub fn begin_grow(&mut self, name: &str, count: i32) -> Result<(), TopicError> {
        self.update(name, |t| t.growing_to = Some(count))
    }

    /// The growth is done: the topic is served with its new count.
    pub fn finish_grow(&mut self, name: &str) -> Result<(), TopicError> {
        self.update(name, |t| {
            t.partitions = t.partitions_held();
            t.growing_to = None;
        })
    }

    /// Changes a topic's entry durably (or not at all).
    fn update(&mut self, name: &str, change: impl FnOnce(&mut Topic)) -> Result<(), TopicError> {
        let t = self
            .topics
            .topics
            .get_mut(name)
            .ok_or(TopicError::Unknown)?;
        let before = t.clone();
        change(t);
        self.debug_check_invariants();
        if let Err(e) = self.store(name) {
            self.topics.topics.insert(name.into(), before);
            return Err(TopicError::Store(e));
        }
        Ok(())
    }

    /// Gives a topic another id durably (a forced mirror start: it takes its source's).
    pub fn set_id(&mut self, name: &str, id: [u8; 16]) -> Result<(), TopicError> {
        self.update(name, |t| t.id = id)
    }

    /// Moves a topic to `state` durably.
    pub fn set_state(&mut self, name: &str, state: TopicState) -> Result<(), TopicError> {
        self.update(name, |t| t.state = state)
    }

    /// Removes a topic's entry durably (its partitions are gone).
    pub fn remove(&mut self, name: &str) -> Result<(), TopicError> {
        let t = self.topics.topics.remove(name).ok_or(TopicError::Unknown)?;
        if let Err(e) = self.store(name) {
            self.topics.topics.insert(name.into(), t);
            return Err(TopicError::Store(e));
        }
        Ok(())
    }
}

/// Creates each partition of `name` that the engine does not have yet.
pub async fn create_partitions(
    engine: &Engine,
    name: &str,
    partitions: i32,
    config: &PartitionConfig,
) -> Result<(), EngineError> {
    for p in 0..partitions {
        match engine
            .create_partition(&TopicPartition::new(name, p), *config)
            .await
        {
            Ok(()) | Err(EngineError::PartitionExists(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The partitions of topic `name` the engine keeps in `log_dir` (its directories are
/// `NAME-PARTITION`; another topic's cannot match, since a partition number is all digits and
/// a topic `NAME-1` keeps `NAME-1-0`), for a topic whose entry no longer says how many it has.
pub fn partitions_on_disk(log_dir: &std::path::Path, name: &str) -> std::io::Result<Vec<i32>> {
    let prefix = format!("{name}-");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(log_dir)? {
        let entry = entry?;
        if let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .filter(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|rest| rest.parse::<i32>().ok())
        {
            found.push(p);
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// Removes each partition of `name` that the engine still has.
pub async fn delete_partitions(
    engine: &Engine,
    name: &str,
    partitions: i32,
) -> Result<(), EngineError> {
    for p in 0..partitions {
        match engine.delete_partition(&TopicPartition::new(name, p)).await {
            Ok(()) | Err(EngineError::UnknownPartition(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// 16 bytes from the kernel's random source (a topic id), never all zero (Kafka's "no id").
pub fn random_id() -> [u8; 16] {
    use std::io::Read as _;
    let mut id = [0u8; 16];
    loop {
        let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut id));
        if read.is_err() {
            // No random source: time and process id still make ids unique on this broker.
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            id = (t ^ (u128::from(std::process::id()) << 64)).to_be_bytes();
        }
        if id != [0; 16] {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kafkas_rules() {
        assert!(valid_name("orders.v1_x-2"));
        for bad in ["", ".", "..", "a b", "é", &"x".repeat(250)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_registry_keeps_its_topics_and_their_states_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let config = PartitionConfig::default();
        let (mut r, _) = Registry::open(dir.path()).unwrap();
        let t = r
            .begin_create(&config, "a", 3, BTreeMap::new(), None)
            .unwrap();
        assert!(r.get("a").is_none(), "creating is not served");
        r.set_state("a", TopicState::Ready).unwrap();
        assert!(matches!(
            r.begin_create(&config, "a", 1, BTreeMap::new(), None),
            Err(TopicError::Exists)
        ));
        let mut bad = BTreeMap::new();
        bad.insert("segment.bytes".to_string(), "1".to_string());
        assert!(matches!(
            r.begin_create(&config, "b", 1, bad, None),
            Err(TopicError::Config(_))
        ));
        let (r2, damaged) = Registry::open(dir.path()).unwrap();
        assert!(damaged.is_empty());
        assert_eq!(
            r2.get("a"),
            Some(&Topic {
                state: TopicState::Ready,
                ..t
            })
        );
        assert!(r2.get("b").is_none());
    }

    #[test]
    fn entries_that_break_an_invariant_are_damaged_and_the_rest_load() {
        let dir = tempfile::tempdir().unwrap();
        let config = PartitionConfig::default();
        let (mut r, _) = Registry::open(dir.path()).unwrap();
        let good = r
            .begin_create(&config, "good", 2, BTreeMap::new(), None)
            .unwrap();
        r.set_state("good", TopicState::Ready).unwrap();
        let entry = |partitions: i32, state: &str, growing: Option<i32>| {
            let mut v = serde_json::json!({
                "id": vec![7u8; 16], "partitions": partitions, "configs": {}, "state": state,
            });
            if let Some(to) = growing {
                v["growing_to"] = to.into();
            }
            v.to_string()
        };
        let topics = dir.path().join(TOPICS_DIR);
        let planted = [
            ("huge.json", entry(2_000_000_000, "creating", None)),
            ("none.json", entry(0, "ready", None)),
            ("shrink.json", entry(4, "ready", Some(3))),
            ("early.json", entry(1, "creating", Some(2))),
            ("not a name.json", entry(1, "ready", None)),
        ];
        for (file, body) in &planted {
            std::fs::write(topics.join(file), body).unwrap();
        }
        let (r2, mut damaged) = Registry::open(dir.path()).unwrap();
        damaged.sort();
        let names: Vec<&str> = damaged.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["early", "huge", "none", "not a name", "shrink"]);
        let reason = |n: &str| &damaged.iter().find(|(d, _)| d == n).unwrap().1;
        assert!(
            reason("huge").contains("2000000000 partitions"),
            "{damaged:?}"
        );
        assert!(
            reason("shrink").contains("growing from 4 to 3"),
            "{damaged:?}"
        );
        assert!(
            reason("early").contains("growing while Creating"),
            "{damaged:?}"
        );
        assert!(
            reason("not a name").contains("not a topic's file"),
            "{damaged:?}"
        );
        assert_eq!(
            r2.get("good"),
            Some(&Topic {
                state: TopicState::Ready,
                ..good
            })
        );
        r2.check_invariants();
    }

    #[test]
    #[should_panic(expected = "topic registry: t: 0 partitions")]
    fn a_change_that_breaks_an_invariant_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, _) = Registry::open(dir.path()).unwrap();
        r.begin_create(&PartitionConfig::default(), "t", 1, BTreeMap::new(), None)
            .unwrap();
        r.topics.topics.get_mut("t").unwrap().partitions = 0;
        r.check_invariants();
    }

    #[test]
    fn no_file_is_named_outside_the_registry() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _) = Registry::open(dir.path()).unwrap();
        for bad in ["", "../x", "a/b", "a\0b"] {
            assert!(r.file(bad).is_err(), "{bad:?}");
        }
        assert!(r.file("ok").is_ok());
    }
}
