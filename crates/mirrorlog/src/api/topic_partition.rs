//! A partition's name: topic and partition number, Kafka's naming rules, its directory name,
//! and the stable hash that places it on a shard.

use super::EngineError;
use std::fmt;

/// A topic partition; its directory is `<data_dir>/<topic>-<partition>` as in Kafka.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name (Kafka's rules: 1–249 of `[a-zA-Z0-9._-]`).
    pub topic: String,
    /// Partition number (≥ 0).
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    #[must_use]
    pub fn new(topic: &str, partition: i32) -> Self {
        TopicPartition {
            topic: topic.to_string(),
            partition,
        }
    }

    /// The directory name, `topic-partition`.
    #[must_use]
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name back (`a-b-3` is topic `a-b`, partition 3).
    #[must_use]
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        let partition = partition.parse().ok().filter(|&p: &i32| p >= 0)?;
        let tp = TopicPartition::new(topic, partition);
        tp.validate().ok()?;
        Some(tp)
    }

    /// Checks Kafka's topic-name rules and a non-negative partition.
    ///
    /// # Errors
    /// [`EngineError::InvalidPartition`].
    pub fn validate(&self) -> Result<(), EngineError> {
        let ok_name = !self.topic.is_empty()
            && self.topic.len() <= 249
            && self.topic != "."
            && self.topic != ".."
            && self
                .topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
        if ok_name && self.partition >= 0 {
            Ok(())
        } else {
            Err(EngineError::InvalidPartition(self.clone()))
        }
    }

    /// Stable placement hash (FNV-1a over the directory name): the same partition lands on
    /// the same shard in every run with the same shard count.
    #[must_use]
    pub fn placement_hash(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.dir_name().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
