//! The broker-level names of Kafka's topic configs (`log.retention.ms` for `retention.ms`, ...):
//! one table, read by the static settings (a broker file's defaults) and the dynamic broker
//! configs alike, so that neither needs the other for it.

/// Kafka's broker name of each topic config (`ServerTopicConfigSynonyms`), and mirrorlog's
/// `producer.id.expiration.ms` (a broker config in Kafka, per topic here).
pub const TOPIC_SYNONYMS: &[(&str, &str)] = &[
    ("log.segment.bytes", "segment.bytes"),
    ("log.roll.ms", "segment.ms"),
    ("log.roll.jitter.ms", "segment.jitter.ms"),
    ("log.index.size.max.bytes", "segment.index.bytes"),
    ("log.flush.interval.messages", "flush.messages"),
    ("log.flush.interval.ms", "flush.ms"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.retention.ms", "retention.ms"),
    ("message.max.bytes", "max.message.bytes"),
    ("log.index.interval.bytes", "index.interval.bytes"),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms"),
    ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
    ("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
    ("log.segment.delete.delay.ms", "file.delete.delay.ms"),
    (
        "log.cleaner.min.cleanable.ratio",
        "min.cleanable.dirty.ratio",
    ),
    ("log.cleanup.policy", "cleanup.policy"),
    (
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
    ),
    ("min.insync.replicas", "min.insync.replicas"),
    ("compression.type", "compression.type"),
    ("compression.gzip.level", "compression.gzip.level"),
    ("compression.lz4.level", "compression.lz4.level"),
    ("compression.zstd.level", "compression.zstd.level"),
    ("log.preallocate", "preallocate"),
    ("log.message.timestamp.type", "message.timestamp.type"),
    (
        "log.message.timestamp.difference.max.ms",
        "message.timestamp.difference.max.ms",
    ),
    (
        "log.message.timestamp.before.max.ms",
        "message.timestamp.before.max.ms",
    ),
    (
        "log.message.timestamp.after.max.ms",
        "message.timestamp.after.max.ms",
    ),
    (
        "log.message.downconversion.enable",
        "message.downconversion.enable",
    ),
    ("log.local.retention.ms", "local.retention.ms"),
    ("log.local.retention.bytes", "local.retention.bytes"),
    ("producer.id.expiration.ms", "producer.id.expiration.ms"),
];

/// The topic config a broker-level name stands for.
pub fn topic_synonym(name: &str) -> Option<&'static str> {
    TOPIC_SYNONYMS
        .iter()
        .find(|(b, _)| *b == name)
        .map(|(_, t)| *t)
}
