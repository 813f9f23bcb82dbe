//! Kafka's topic configs: every name `LogConfig`'s `ConfigDef` documents (apache/kafka 4.0), its
//! type and bounds, checked as Kafka checks them, and what the engine does with each.
//!
//! A topic config Kafka accepts is accepted here: a value is refused only where Kafka refuses
//! it (`INVALID_CONFIG`). Each one is then
//! - **applied**: the engine has the behaviour, and the value goes into the partitions'
//!   [`PartitionConfig`] — raised to the engine's own minimum where its page-aligned layout
//!   needs more than Kafka's (`segment.bytes` 65536, not 14), never refused;
//! - or **stored, not in effect**: kept with the topic and reported as such by DescribeConfigs,
//!   with the reason (one replica, batches stored as the producer wrote them).
//!
//! [`describe`] says which, and the value in effect, for DescribeConfigs and CreateTopics.

use crate::config::error::ConfigError;

/// Partitions per topic at most (a CreateTopics asking more is refused with `INVALID_PARTITIONS`).
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;
use mirrorlog::engine::PartitionConfig;

/// A config's type and bounds, as Kafka's `ConfigDef` has them.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `INT` within bounds.
    Int(i64, i64),
    /// `LONG` within bounds.
    Long(i64, i64),
    /// `DOUBLE` within bounds.
    Double(f64, f64),
    /// `BOOLEAN`: `true` or `false`, any case.
    Bool,
    /// `LIST` of these, comma-separated (`ValidList.in`).
    ListOf(&'static [&'static str]),
    /// `STRING`, one of these (`ValidString.in`).
    OneOf(&'static [&'static str]),
    /// `compression.gzip.level`: 1–9, or -1 (Deflater's default).
    GzipLevel,
    /// `message.format.version` (`MetadataVersionValidator`): a Kafka version such as `3.0` or
    /// `3.0-IV1`.
    Version,
    /// `*.replication.throttled.replicas` (`ThrottledReplicaListValidator`): empty, `*`, or
    /// `partition:broker` pairs.
    Throttled,
}

/// One topic config.
struct Def {
    name: &'static str,
    kind: Kind,
    /// Kafka's default, as DescribeConfigs shows it.
    default: &'static str,
    /// `None`: applied by the engine; else why it is stored and not in effect.
    not_in_effect: Option<&'static str>,
}

const I32: i64 = i32::MAX as i64;
const ONE_REPLICA: &str = "stored, not in effect: one replica, every acknowledgement durable on it";
const AS_WRITTEN: &str =
    "stored, not in effect: batches are stored exactly as producers wrote them";
const NO_TIERING: &str = "stored, not in effect: mirrorlog has no tiered storage";
const DURABLE: &str =
    "stored, not in effect: every acknowledged append is already durable (one flush per round)";

#[rustfmt::skip]
const DEFS: &[Def] = &[
    Def { name: "cleanup.policy", kind: Kind::ListOf(&["compact", "delete"]), default: "delete", not_in_effect: None },
    Def { name: "compression.type", kind: Kind::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), default: "producer", not_in_effect: Some(AS_WRITTEN) },
    Def { name: "compression.gzip.level", kind: Kind::GzipLevel, default: "-1", not_in_effect: Some(AS_WRITTEN) },
    Def { name: "compression.lz4.level", kind: Kind::Int(1, 17), default: "9", not_in_effect: Some(AS_WRITTEN) },
    Def { name: "compression.zstd.level", kind: Kind::Int(-131_072, 22), default: "3", not_in_effect: Some(AS_WRITTEN) },
    Def { name: "delete.retention.ms", kind: Kind::Long(0, i64::MAX), default: "86400000", not_in_effect: None },
    Def { name: "file.delete.delay.ms", kind: Kind::Long(0, i64::MAX), default: "60000", not_in_effect: Some("stored, not in effect: deleted segments are removed at once, durably") },
    Def { name: "flush.messages", kind: Kind::Long(1, i64::MAX), default: "9223372036854775807", not_in_effect: Some(DURABLE) },
    Def { name: "flush.ms", kind: Kind::Long(0, i64::MAX), default: "9223372036854775807", not_in_effect: Some(DURABLE) },
    Def { name: "follower.replication.throttled.replicas", kind: Kind::Throttled, default: "", not_in_effect: Some(ONE_REPLICA) },
    Def { name: "index.interval.bytes", kind: Kind::Int(0, I32), default: "4096", not_in_effect: None },
    Def { name: "leader.replication.throttled.replicas", kind: Kind::Throttled, default: "", not_in_effect: Some(ONE_REPLICA) },
    Def { name: "local.retention.bytes", kind: Kind::Long(-2, i64::MAX), default: "-2", not_in_effect: Some(NO_TIERING) },
    Def { name: "local.retention.ms", kind: Kind::Long(-2, i64::MAX), default: "-2", not_in_effect: Some(NO_TIERING) },
    Def { name: "max.compaction.lag.ms", kind: Kind::Long(1, i64::MAX), default: "9223372036854775807", not_in_effect: None },
    Def { name: "max.message.bytes", kind: Kind::Int(0, I32), default: "1048588", not_in_effect: None },
    Def { name: "message.downconversion.enable", kind: Kind::Bool, default: "true", not_in_effect: Some("stored, not in effect: Fetch below v4 is not served, so nothing is down-converted") },
    Def { name: "message.format.version", kind: Kind::Version, default: "3.0-IV1", not_in_effect: Some("stored, not in effect: every batch is RecordBatch v2") },
    Def { name: "message.timestamp.after.max.ms", kind: Kind::Long(0, i64::MAX), default: "9223372036854775807", not_in_effect: None },
    Def { name: "message.timestamp.before.max.ms", kind: Kind::Long(0, i64::MAX), default: "9223372036854775807", not_in_effect: None },
    Def { name: "message.timestamp.difference.max.ms", kind: Kind::Long(0, i64::MAX), default: "9223372036854775807", not_in_effect: None },
    Def { name: "message.timestamp.type", kind: Kind::OneOf(&["CreateTime", "LogAppendTime"]), default: "CreateTime", not_in_effect: Some(AS_WRITTEN) },
    Def { name: "min.cleanable.dirty.ratio", kind: Kind::Double(0.0, 1.0), default: "0.5", not_in_effect: None },
    Def { name: "min.compaction.lag.ms", kind: Kind::Long(0, i64::MAX), default: "0", not_in_effect: None },
    Def { name: "min.insync.replicas", kind: Kind::Int(1, I32), default: "1", not_in_effect: Some(ONE_REPLICA) },
    Def { name: "preallocate", kind: Kind::Bool, default: "false", not_in_effect: Some("stored, not in effect: the engine always reserves the active segment in steps (preallocate.step.bytes)") },
    Def { name: "remote.log.copy.disable", kind: Kind::Bool, default: "false", not_in_effect: Some(NO_TIERING) },
    Def { name: "remote.log.delete.on.disable", kind: Kind::Bool, default: "false", not_in_effect: Some(NO_TIERING) },
    Def { name: "remote.storage.enable", kind: Kind::Bool, default: "false", not_in_effect: Some(NO_TIERING) },
    Def { name: "retention.bytes", kind: Kind::Long(i64::MIN, i64::MAX), default: "-1", not_in_effect: None },
    Def { name: "retention.ms", kind: Kind::Long(-1, i64::MAX), default: "604800000", not_in_effect: None },
    Def { name: "segment.bytes", kind: Kind::Int(14, I32), default: "1073741824", not_in_effect: None },
    Def { name: "segment.index.bytes", kind: Kind::Int(4, I32), default: "10485760", not_in_effect: None },
    Def { name: "segment.jitter.ms", kind: Kind::Long(0, i64::MAX), default: "0", not_in_effect: Some("stored, not in effect: segments roll at segment.ms exactly") },
    Def { name: "segment.ms", kind: Kind::Long(1, i64::MAX), default: "604800000", not_in_effect: None },
    Def { name: "unclean.leader.election.enable", kind: Kind::Bool, default: "false", not_in_effect: Some(ONE_REPLICA) },
    // mirrorlog's own (a broker-wide setting in Kafka), kept per topic.
    Def { name: "producer.id.expiration.ms", kind: Kind::Long(1, i64::MAX), default: "86400000", not_in_effect: None },
];

fn def(name: &str) -> Option<&'static Def> {
    DEFS.iter().find(|d| d.name == name)
}

/// Checks `value` against Kafka's type and bounds for `name`.
///
/// # Errors
/// [`ConfigError::Unknown`] for a name Kafka does not know at topic level, or
/// [`ConfigError::Invalid`] with Kafka's reason.
pub fn check(name: &str, value: &str) -> Result<(), ConfigError> {
    let d = def(name).ok_or_else(|| ConfigError::Unknown(name.into()))?;
    let invalid = |reason: String| ConfigError::Invalid {
        key: name.into(),
        value: value.into(),
        reason,
    };
    let v = value.trim();
    let in_range = |min: i64, max: i64| -> Result<(), ConfigError> {
        let n: i64 = v
            .parse()
            .map_err(|_| invalid("expected a whole number".into()))?;
        if n < min || n > max {
            return Err(invalid(format!("value must be in [{min}, {max}]")));
        }
        Ok(())
    };
    match d.kind {
        Kind::Int(min, max) | Kind::Long(min, max) => in_range(min, max)?,
        Kind::Double(min, max) => {
            let n: f64 = v.parse().map_err(|_| invalid("expected a number".into()))?;
            if !(min..=max).contains(&n) {
                return Err(invalid(format!("value must be in [{min}, {max}]")));
            }
        }
        Kind::Bool => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(invalid("expected true or false".into()));
            }
        }
        Kind::ListOf(allowed) => {
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !allowed.contains(&item) {
                    return Err(invalid(format!("{item:?} is not one of {allowed:?}")));
                }
            }
        }
        Kind::OneOf(allowed) => {
            if !allowed.contains(&v) {
                return Err(invalid(format!("expected one of {allowed:?}")));
            }
        }
        Kind::GzipLevel => {
            in_range(-1, 9)?;
            if v == "0" {
                return Err(invalid("value must be -1 or in [1, 9]".into()));
            }
        }
        Kind::Version => {
            let (version, iv) = v.split_once("-IV").unwrap_or((v, "0"));
            let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            if !version.split('.').all(numeric) || !numeric(iv) {
                return Err(invalid("expected a Kafka version such as 3.0-IV1".into()));
            }
        }
        Kind::Throttled => {
            let pair = |s: &str| {
                s.split_once(':').is_some_and(|(p, b)| {
                    p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
                })
            };
            if !(v.is_empty() || v == "*" || v.split(',').all(pair)) {
                return Err(invalid(
                    "expected empty, * or partition:broker pairs separated by commas".into(),
                ));
            }
        }
    }
    // Kafka's `LogConfig.validateRemoteStorageOnlyIfSystemEnabled`.
    if name == "remote.storage.enable" && v.eq_ignore_ascii_case("true") {
        return Err(invalid(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured \
             with remote log storage."
                .into(),
        ));
    }
    Ok(())
}

/// Checks `value` as Kafka does ([`check`]), then applies it to `config` where the engine has
/// the behaviour, raised to the engine's minimum where Kafka's is smaller.
///
/// # Errors
/// As [`check`].
pub fn apply(config: &mut PartitionConfig, name: &str, value: &str) -> Result<(), ConfigError> {
    check(name, value)?;
    let v = value.trim();
    // `check` has parsed every number below; a failure here cannot happen, and answers 0.
    let n = v.parse::<i64>().unwrap_or(0);
    let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
    match name {
        "segment.bytes" => config.segment_bytes = unsigned(n).max(SEGMENT_BYTES_MIN),
        "segment.ms" => config.segment_ms = Some(n),
        "retention.bytes" => config.retention_bytes = u64::try_from(n).ok(),
        // Kafka's 0 deletes every sealed segment at once; 1 ms is the engine's equivalent.
        "retention.ms" => config.retention_ms = (n >= 0).then_some(n.max(1)),
        "max.message.bytes" => {
            config.max_message_bytes = usize::try_from(n)
                .unwrap_or(0)
                .clamp(MAX_MESSAGE_BYTES_MIN, MAX_MESSAGE_BYTES_MAX);
        }
        "index.interval.bytes" => {
            config.index_interval_bytes = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        }
        "segment.index.bytes" => {
            config.segment_index_bytes = unsigned(n).max(SEGMENT_INDEX_BYTES_MIN);
        }
        "producer.id.expiration.ms" => config.producer_id_expiration_ms = n,
        // Kafka's `LogConfig`: each bound left at its default (Long.MAX) takes the deprecated
        // `message.timestamp.difference.max.ms`; so a default here changes nothing, and the
        // difference fills only a bound not set.
        "message.timestamp.before.max.ms" if n != i64::MAX => {
            config.message_timestamp_before_max_ms = Some(n);
        }
        "message.timestamp.after.max.ms" if n != i64::MAX => {
            config.message_timestamp_after_max_ms = Some(n);
        }
        "message.timestamp.difference.max.ms" if n != i64::MAX => {
            config.message_timestamp_before_max_ms.get_or_insert(n);
            config.message_timestamp_after_max_ms.get_or_insert(n);
        }
        "cleanup.policy" => {
            if let Some(policy) = mirrorlog::api::CleanupPolicy::parse(v) {
                config.compaction.policy = policy;
            }
        }
        "delete.retention.ms" => config.compaction.delete_retention_ms = n,
        "min.compaction.lag.ms" => config.compaction.min_compaction_lag_ms = n,
        "max.compaction.lag.ms" => config.compaction.max_compaction_lag_ms = n,
        "min.cleanable.dirty.ratio" => {
            if let Some(ppm) = mirrorlog::api::dirty_ratio_ppm(v) {
                config.compaction.min_cleanable_dirty_ratio_ppm = ppm;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The engine's smallest `segment.bytes` (its page-aligned segments with commit records).
pub const SEGMENT_BYTES_MIN: u64 = 64 << 10;
/// The smallest `max.message.bytes` the engine takes: an empty batch's header.
pub const MAX_MESSAGE_BYTES_MIN: usize = 61;
/// The largest `max.message.bytes` the engine takes: its largest append buffer.
pub const MAX_MESSAGE_BYTES_MAX: usize = mirrorlog::engine::APPEND_BUFFER_BYTES_MAX;
/// The smallest `segment.index.bytes` the engine takes: one entry.
pub const SEGMENT_INDEX_BYTES_MIN: u64 = 8;

/// Makes settings that are each valid fit together as the engine needs, once all are applied
/// (whatever their order): a batch fits in a segment and in the append buffer.
pub fn fit(config: &mut PartitionConfig) {
    let segment = usize::try_from(config.segment_bytes).unwrap_or(usize::MAX);
    config.max_message_bytes = config.max_message_bytes.min(segment);
    config.append_buffer_bytes = config.append_buffer_bytes.max(config.max_message_bytes);
}

/// What DescribeConfigs says of one config of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Described {
    /// Kafka's name.
    pub name: &'static str,
    /// The value as set (or Kafka's default).
    pub value: String,
    /// Whether the topic sets it (else the default).
    pub set: bool,
    /// Whether the engine applies it, and how: "in effect", "in effect as N (...)", or why not.
    pub effect: String,
    /// Kafka's `ConfigType` code (DescribeConfigs v3): 1 boolean, 2 string, 3 int, 5 long,
    /// 6 double, 7 list.
    pub config_type: i8,
}

/// Every topic config for a topic created with `set` over `defaults` (the broker's), with what
/// is in effect.
pub fn describe(
    set: &std::collections::BTreeMap<String, String>,
    defaults: &PartitionConfig,
) -> Vec<Described> {
    let mut applied = *defaults;
    for (k, v) in set {
        // Stored settings passed `check` when the topic was created.
        let _ = apply(&mut applied, k, v);
    }
    fit(&mut applied);
    DEFS.iter()
        .map(|d| {
            let given = set.get(d.name);
            let value = given.map_or_else(|| default_value(d, defaults), Clone::clone);
            let effect = match d.not_in_effect {
                Some(why) => why.to_string(),
                None => match in_effect(d.name, &applied) {
                    Some(actual) if actual != value.trim() => format!(
                        "in effect as {actual} (the engine's bounds: {})",
                        bound_note(d.name)
                    ),
                    _ => "in effect".to_string(),
                },
            };
            Described {
                name: d.name,
                value,
                set: given.is_some(),
                effect,
                config_type: match d.kind {
                    Kind::Bool => 1,
                    Kind::OneOf(_) | Kind::Version => 2,
                    Kind::Int(..) | Kind::GzipLevel => 3,
                    Kind::Long(..) => 5,
                    Kind::Double(..) => 6,
                    Kind::ListOf(_) | Kind::Throttled => 7,
                },
            }
        })
        .collect()
}

/// The value the engine runs with, in Kafka's terms, for the applied configs.
fn in_effect(name: &str, c: &PartitionConfig) -> Option<String> {
    Some(match name {
        "segment.bytes" => c.segment_bytes.to_string(),
        "segment.ms" => c.segment_ms?.to_string(),
        "retention.bytes" => c.retention_bytes.map_or(-1, |b| b as i64).to_string(),
        "retention.ms" => c.retention_ms.unwrap_or(-1).to_string(),
        "max.message.bytes" => c.max_message_bytes.to_string(),
        "index.interval.bytes" => c.index_interval_bytes.to_string(),
        "segment.index.bytes" => c.segment_index_bytes.to_string(),
        "producer.id.expiration.ms" => c.producer_id_expiration_ms.to_string(),
        "message.timestamp.before.max.ms" => c
            .message_timestamp_before_max_ms
            .unwrap_or(i64::MAX)
            .to_string(),
        "message.timestamp.after.max.ms" => c
            .message_timestamp_after_max_ms
            .unwrap_or(i64::MAX)
            .to_string(),
        "cleanup.policy" => c.compaction.policy.to_string(),
        "delete.retention.ms" => c.compaction.delete_retention_ms.to_string(),
        "min.compaction.lag.ms" => c.compaction.min_compaction_lag_ms.to_string(),
        "max.compaction.lag.ms" => c.compaction.max_compaction_lag_ms.to_string(),
        "min.cleanable.dirty.ratio" => (f64::from(c.compaction.min_cleanable_dirty_ratio_ppm)
            / f64::from(mirrorlog::api::DIRTY_RATIO_PPM_MAX))
        .to_string(),
        _ => return None,
    })
}

/// The default shown for `d`: the broker's where the engine applies it, else Kafka's.
fn default_value(d: &Def, defaults: &PartitionConfig) -> String {
    match (d.not_in_effect, in_effect(d.name, defaults)) {
        (None, Some(v)) => v,
        _ => d.default.to_string(),
    }
}

fn bound_note(name: &str) -> &'static str {
    match name {
        "segment.bytes" => "at least 65536, its page-aligned segment layout",
        "max.message.bytes" => "61 to 256 MiB, and at most segment.bytes",
        "retention.ms" => "0 acts as 1 ms",
        "index.interval.bytes" => "0 acts as 1",
        "segment.index.bytes" => "at least one 8-byte entry",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_bounds_accept_what_kafka_accepts_and_refuse_the_rest() {
        for (k, v) in [
            ("segment.bytes", "14"),
            ("delete.retention.ms", "0"),
            ("cleanup.policy", "compact,delete"),
            ("compression.gzip.level", "-1"),
            ("compression.zstd.level", "-131072"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("message.format.version", "3.0-IV1"),
            ("leader.replication.throttled.replicas", "0:1,1:1"),
            ("preallocate", "TRUE"),
            ("retention.bytes", "-5"),
        ] {
            check(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        for (k, v) in [
            ("segment.bytes", "13"),
            ("segment.bytes", "2147483648"),
            ("delete.retention.ms", "-1"),
            ("cleanup.policy", "delete,archive"),
            ("compression.gzip.level", "0"),
            ("compression.type", "brotli"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.insync.replicas", "0"),
            ("retention.ms", "-2"),
            ("preallocate", "yes"),
            ("remote.storage.enable", "true"),
            ("leader.replication.throttled.replicas", "0-1"),
        ] {
            assert!(
                matches!(check(k, v), Err(ConfigError::Invalid { .. })),
                "{k}={v}"
            );
        }
        assert!(matches!(
            check("no.such.config", "1"),
            Err(ConfigError::Unknown(_))
        ));
    }

    #[test]
    fn values_below_the_engines_minimum_are_raised_and_said_so() {
        let mut c = PartitionConfig::default();
        apply(&mut c, "segment.bytes", "14").unwrap();
        apply(&mut c, "max.message.bytes", "0").unwrap();
        fit(&mut c);
        assert_eq!(c.segment_bytes, SEGMENT_BYTES_MIN);
        assert_eq!(c.max_message_bytes, MAX_MESSAGE_BYTES_MIN);
        c.validate().unwrap();
        let mut big = PartitionConfig::default();
        apply(&mut big, "max.message.bytes", "2147483647").unwrap();
        apply(&mut big, "segment.bytes", "14").unwrap();
        fit(&mut big);
        big.validate().unwrap();
        assert_eq!(big.max_message_bytes, 64 << 10, "at most a segment");
        let set = [("segment.bytes".to_string(), "14".to_string())].into();
        let d = describe(&set, &PartitionConfig::default());
        let seg = d.iter().find(|d| d.name == "segment.bytes").unwrap();
        assert!(seg.set);
        assert_eq!(seg.value, "14");
        assert!(
            seg.effect.starts_with("in effect as 65536"),
            "{}",
            seg.effect
        );
        let dr = d.iter().find(|d| d.name == "delete.retention.ms").unwrap();
        assert!(!dr.set);
        assert_eq!(dr.value, "86400000");
        assert_eq!(dr.effect, "in effect");
        let fd = d.iter().find(|d| d.name == "flush.ms").unwrap();
        assert!(fd.effect.starts_with("stored, not in effect"));
        assert_eq!(d.len(), DEFS.len());
    }
}
