//! Kafka's static broker settings that a stock `server.properties` carries and this broker
//! does not serve (a controller quorum, replication factors, socket buffers), with why each
//! is not in effect (the dynamic ones kept without effect, thread pools among them, are
//! `settings/dynamic.rs`'); and Kafka's lower-precedence synonyms (`broker.id`,
//! `log.retention.hours`, ...), which map to the names this broker serves. A file written for
//! Kafka then starts this broker: what is not in effect is accepted when its value has Kafka's
//! type, logged at start and shown so by DescribeConfigs. A name that is neither Kafka's nor
//! ours is still refused (a typo must not pass silently).

/// The type Kafka's `ConfigDef` gives a setting: its value is checked against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// `true` or `false`.
    Bool,
    /// Any text (a string, a list, a class name).
    Text,
}

impl ValueType {
    /// Whether `value` parses as Kafka parses this type.
    #[must_use]
    pub fn accepts(self, value: &str) -> bool {
        let v = value.trim();
        match self {
            ValueType::Int => v.parse::<i32>().is_ok(),
            ValueType::Long => v.parse::<i64>().is_ok(),
            ValueType::Bool => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
            ValueType::Text => true,
        }
    }

    /// Kafka's name of the type, as its errors write it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ValueType::Int => "INT",
            ValueType::Long => "LONG",
            ValueType::Bool => "BOOLEAN",
            ValueType::Text => "STRING",
        }
    }
}

const ONE_NODE: &str =
    "not in effect: a single-node broker, its own controller (no KRaft quorum, no ZooKeeper)";
const ONE_REPLICA: &str =
    "not in effect: one replica of every partition, each acknowledgement durable on it";
const SOCKETS: &str = "not in effect: sockets keep the operating system's buffer sizes";
const INTERNAL_TOPICS: &str =
    "not in effect: the transaction coordinator keeps its state in broker/transactions.json, not a topic";

/// Every setting accepted and not served: its name, its type and why.
#[rustfmt::skip]
pub const NOT_SERVED: &[(&str, ValueType, &str)] = &[
    ("process.roles", ValueType::Text, ONE_NODE),
    ("controller.quorum.voters", ValueType::Text, ONE_NODE),
    ("controller.quorum.bootstrap.servers", ValueType::Text, ONE_NODE),
    ("controller.listener.names", ValueType::Text, "not in effect: no controller quorum; the listeners it names are not served"),
    ("inter.broker.listener.name", ValueType::Text, ONE_NODE),
    ("inter.broker.protocol.version", ValueType::Text, ONE_NODE),
    ("metadata.log.dir", ValueType::Text, ONE_NODE),
    ("zookeeper.connect", ValueType::Text, ONE_NODE),
    ("zookeeper.connection.timeout.ms", ValueType::Int, ONE_NODE),
    ("zookeeper.session.timeout.ms", ValueType::Int, ONE_NODE),
    ("broker.rack", ValueType::Text, ONE_NODE),
    ("default.replication.factor", ValueType::Int, ONE_REPLICA),
    ("offsets.topic.replication.factor", ValueType::Int, ONE_REPLICA),
    ("transaction.state.log.replication.factor", ValueType::Int, ONE_REPLICA),
    ("transaction.state.log.min.isr", ValueType::Int, ONE_REPLICA),
    ("share.coordinator.state.topic.replication.factor", ValueType::Int, ONE_REPLICA),
    ("share.coordinator.state.topic.min.isr", ValueType::Int, ONE_REPLICA),
    ("replica.lag.time.max.ms", ValueType::Long, ONE_REPLICA),
    ("replica.fetch.max.bytes", ValueType::Int, ONE_REPLICA),
    ("transaction.state.log.num.partitions", ValueType::Int, INTERNAL_TOPICS),
    ("transaction.state.log.segment.bytes", ValueType::Int, INTERNAL_TOPICS),
    ("socket.send.buffer.bytes", ValueType::Int, SOCKETS),
    ("socket.receive.buffer.bytes", ValueType::Int, SOCKETS),
];

/// Whether `name` is one of [`NOT_SERVED`]: its listed name (static), type and reason.
#[must_use]
pub fn not_served(name: &str) -> Option<(&'static str, ValueType, &'static str)> {
    NOT_SERVED.iter().find(|(n, _, _)| *n == name).copied()
}

/// Kafka's coarser synonyms of time settings (`ServerTopicConfigSynonyms`): the broker name,
/// the topic config it sets, and the milliseconds in one of its units. Kafka's precedence is
/// ms over minutes over hours, whatever order a file gives them in.
pub const TIME_SYNONYMS: &[(&str, &str, i64)] = &[
    ("log.retention.hours", "retention.ms", 3_600_000),
    ("log.retention.minutes", "retention.ms", 60_000),
    ("log.roll.hours", "segment.ms", 3_600_000),
    ("log.roll.jitter.hours", "segment.jitter.ms", 3_600_000),
];

/// The topic config `name` sets and its unit in ms, if it is a [`TIME_SYNONYMS`] entry.
#[must_use]
pub fn time_synonym(name: &str) -> Option<(&'static str, i64)> {
    TIME_SYNONYMS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, topic, unit)| (*topic, *unit))
}

/// Where `name` goes among one layer's settings (a file, or the flags): hours first, then
/// minutes, then the rest, so that the finer unit wins as in Kafka.
#[must_use]
pub fn precedence(name: &str) -> u8 {
    if name.ends_with(".hours") && time_synonym(name).is_some() {
        0
    } else if name.ends_with(".minutes") && time_synonym(name).is_some() {
        1
    } else {
        2
    }
}

/// Why a coarser time synonym's value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTime {
    /// Not Kafka's type for these settings.
    #[error("Expected value to be a 32-bit integer")]
    NotAnInt,
    /// Below -1.
    #[error("at least -1 (unlimited)")]
    BelowUnlimited,
}

/// `value` in one of `unit`'s units, as milliseconds; `-1` (unlimited) stays `-1`, as Kafka
/// reads `log.retention.hours=-1`.
///
/// # Errors
/// Not a 32-bit integer (Kafka's type for these), or below -1.
pub fn to_ms(value: &str, unit: i64) -> Result<i64, BadTime> {
    let n: i32 = value.trim().parse().map_err(|_| BadTime::NotAnInt)?;
    match n {
        -1 => Ok(-1),
        n if n < -1 => Err(BadTime::BelowUnlimited),
        // At most i32::MAX hours: within i64's milliseconds.
        n => Ok(i64::from(n) * unit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_parse_as_kafka_parses_them() {
        assert!(ValueType::Int.accepts("3"));
        assert!(!ValueType::Int.accepts("3000000000"));
        assert!(ValueType::Long.accepts("3000000000"));
        assert!(ValueType::Bool.accepts("TRUE"));
        assert!(!ValueType::Bool.accepts("yes"));
        assert!(ValueType::Text.accepts("broker,controller"));
        assert_eq!(
            not_served("socket.send.buffer.bytes").map(|n| n.1),
            Some(ValueType::Int)
        );
        assert!(not_served("log.retention.hours").is_none());
    }

    #[test]
    fn coarse_time_units_convert_and_yield_to_finer_ones() {
        assert_eq!(
            time_synonym("log.retention.hours"),
            Some(("retention.ms", 3_600_000))
        );
        assert_eq!(to_ms("168", 3_600_000), Ok(604_800_000));
        assert_eq!(to_ms("-1", 3_600_000), Ok(-1));
        assert_eq!(to_ms("-2", 60_000), Err(BadTime::BelowUnlimited));
        assert_eq!(to_ms("1.5", 60_000), Err(BadTime::NotAnInt));
        assert_eq!(
            to_ms(&i32::MAX.to_string(), 3_600_000),
            Ok(i64::from(i32::MAX) * 3_600_000)
        );
        let mut names = vec![
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ];
        names.sort_by_key(|n| precedence(n));
        assert_eq!(
            names,
            [
                "log.retention.hours",
                "log.retention.minutes",
                "log.retention.ms"
            ]
        );
    }
}
