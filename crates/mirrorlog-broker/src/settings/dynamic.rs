//! Broker configs: the BROKER resource of DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs (Kafka's `kafka-configs.sh --entity-type brokers`).
//!
//! Every broker config this broker has, by Kafka's name, is one of:
//! - **static**: set at start (file or flags) and read-only, as Kafka's non-dynamic configs are;
//!   an AlterConfigs of one is `INVALID_REQUEST` ("Cannot update these configs dynamically");
//! - **a topic default** under Kafka's broker name (`log.retention.ms`, `log.segment.bytes`,
//!   `message.max.bytes`, ..., Kafka's `ServerTopicConfigSynonyms`): dynamic, checked as the
//!   topic config is, and applied at once to new topics and live to every partition of the
//!   topics that do not set it themselves (Kafka's `DynamicLogConfig`);
//! - **a connection limit** (`max.connections`, `max.connections.per.ip`): dynamic, applied to
//!   the next connection accepted;
//! - **kept**: one of Kafka's other dynamic broker configs, which this broker has no use for
//!   (TLS keystores it reads as PEM at start, Kerberos, thread pools, the cleaner's buffers):
//!   accepted when its value has Kafka's type, stored, and described with the reason it is
//!   not in effect, so that tools written for Kafka work.
//!
//! A name that is none of these is `INVALID_CONFIG` (Kafka accepts and stores unknown broker
//! configs; a typo here is refused instead).
//!
//! Dynamic values are stored durably in `broker/broker-configs.json`, per level as Kafka has
//! them: the cluster-wide default (resource name `""`, `DYNAMIC_DEFAULT_BROKER_CONFIG`) and this
//! broker's (its node id, `DYNAMIC_BROKER_CONFIG`), which wins over the default, which wins over
//! the static value. They are applied again at start.

use crate::settings::BrokerConfig;
use crate::storage::store::{Document, StoreError};
use mirrorlog::engine::PartitionConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Kafka's `DescribeConfigsResponse.ConfigSource` codes.
pub mod source {
    /// A topic's own config.
    pub const TOPIC: i8 = 1;
    /// This broker's dynamic config.
    pub const DYNAMIC_BROKER: i8 = 2;
    /// The cluster-wide dynamic default.
    pub const DYNAMIC_DEFAULT_BROKER: i8 = 3;
    /// Set at start.
    pub const STATIC_BROKER: i8 = 4;
    /// Kafka's default.
    pub const DEFAULT: i8 = 5;
}

/// Kafka's `ConfigType` codes (DescribeConfigs v3+).
mod kind {
    pub const BOOLEAN: i8 = 1;
    pub const STRING: i8 = 2;
    pub const INT: i8 = 3;
    pub const LONG: i8 = 5;
    pub const DOUBLE: i8 = 6;
    pub const LIST: i8 = 7;
    pub const CLASS: i8 = 8;
    pub const PASSWORD: i8 = 9;
}

/// What a broker config is here.
enum Entry {
    /// Set at start, read-only; its value now.
    Static {
        config_type: i8,
        value: fn(&BrokerConfig) -> String,
    },
    /// The broker-level name of the topic config `topic`.
    TopicDefault { topic: &'static str },
    /// `max.connections`, `max.connections.per.ip`: its static value.
    Limit { value: fn(&BrokerConfig) -> usize },
    /// One of Kafka's dynamic broker configs with no use here.
    Kept {
        config_type: i8,
        default: Option<&'static str>,
        why: &'static str,
    },
    /// One of Kafka's static broker configs with no use here (`config/server_keys.rs`):
    /// accepted at start, read-only.
    NotServed { config_type: i8, why: &'static str },
}

const TLS: &str = "stored, not in effect: the listener's TLS is the PEM keystore \
                   ssl.keystore.location, read at start";
const KERBEROS: &str = "stored, not in effect: GSSAPI (Kerberos) is not offered";
const THREADS: &str =
    "stored, not in effect: the engine runs one thread per shard, the broker a tokio runtime";
const CLEANER: &str = "stored, not in effect: the log cleaner runs on each shard's thread";
const UNUSED: &str = "stored, not in effect: this broker has no use for it";

fn list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub use crate::config::synonyms::{topic_synonym, TOPIC_SYNONYMS};

#[rustfmt::skip]
fn entry(name: &str) -> Option<Entry> {
    use kind::*;
    if let Some(topic) = topic_synonym(name) {
        return Some(Entry::TopicDefault { topic });
    }
    if let Some((_, ty, why)) = crate::config::server_keys::not_served(name) {
        use crate::config::server_keys::ValueType;
        let config_type = match ty {
            ValueType::Int => INT,
            ValueType::Long => LONG,
            ValueType::Bool => BOOLEAN,
            ValueType::Text => STRING,
        };
        return Some(Entry::NotServed { config_type, why });
    }
    let s = |value: fn(&BrokerConfig) -> String| Entry::Static { config_type: STRING, value };
    let typed = |config_type: i8, value: fn(&BrokerConfig) -> String| Entry::Static { config_type, value };
    let kept = |config_type: i8, default: Option<&'static str>, why: &'static str| Entry::Kept { config_type, default, why };
    Some(match name {
        "log.dirs" => s(|c| c.data_dir.display().to_string()),
        "listeners" => s(|c| c.listener_plan().map(|l| list(l.iter().map(|(spec, n, _)| format!("{n}://{}", spec.addr)))).unwrap_or_default()),
        "advertised.listeners" => s(|c| list(c.advertised_listeners.iter().map(|(n, h, p)| format!("{n}://{h}:{p}")))),
        "listener.security.protocol.map" => s(|c| list(c.protocol_map.iter().map(|(n, p)| format!("{n}:{}", p.name())))),
        "node.id" => typed(INT, |c| c.node_id.to_string()),
        "num.partitions" => typed(INT, |c| c.num_partitions.to_string()),
        "socket.request.max.bytes" => typed(INT, |c| c.request_bytes_max.to_string()),
        "fetch.max.bytes" => typed(INT, |c| c.fetch_bytes_max.to_string()),
        "max.incremental.fetch.session.cache.slots" => typed(INT, |c| c.fetch_session_slots.to_string()),
        "queued.max.requests" => typed(INT, |c| c.queued_max_requests.to_string()),
        "auto.create.topics.enable" => typed(BOOLEAN, |c| c.auto_create_topics.to_string()),
        "connections.max.idle.ms" => typed(LONG, |c| c.connection_idle_ms.to_string()),
        "request.timeout.ms" => typed(INT, |c| c.request_timeout_ms.to_string()),
        "transaction.max.timeout.ms" => typed(INT, |c| c.txn_timeout_ms_max.to_string()),
        "offsets.topic.num.partitions" => typed(INT, |c| c.offsets_topic_partitions.to_string()),
        "offsets.retention.minutes" => typed(INT, |c| (c.offsets_retention_ms / 60_000).to_string()),
        "offsets.retention.check.interval.ms" => typed(LONG, |c| c.offsets_retention_check_ms.to_string()),
        "log.retention.check.interval.ms" => typed(LONG, |c| c.retention_check_interval_ms.to_string()),
        "log.format" => s(|c| c.log_format.name().to_string()),
        "log.level" => s(|c| c.log_level.clone()),
        "metrics.enabled" => typed(BOOLEAN, |c| c.metrics_enabled.to_string()),
        "metrics.require.token" => typed(BOOLEAN, |c| c.metrics_require_token.to_string()),
        "offset.metadata.max.bytes" => typed(INT, |c| c.offset_metadata_max_bytes.to_string()),
        "group.min.session.timeout.ms" => typed(INT, |c| c.group_session_timeout_ms.0.to_string()),
        "group.max.session.timeout.ms" => typed(INT, |c| c.group_session_timeout_ms.1.to_string()),
        "group.initial.rebalance.delay.ms" => typed(INT, |c| c.group_limits.initial_rebalance_delay_ms.to_string()),
        "group.max.size" => typed(INT, |c| c.group_limits.max_size.to_string()),
        "group.consumer.session.timeout.ms" => typed(INT, |c| c.consumer_groups.session_timeout_ms.to_string()),
        "group.consumer.heartbeat.interval.ms" => typed(INT, |c| c.consumer_groups.heartbeat_interval_ms.to_string()),
        "group.consumer.max.size" => typed(INT, |c| c.consumer_groups.max_size.to_string()),
        "ssl.keystore.location" => s(|c| c.ssl_keystore.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
        "sasl.enabled.mechanisms" => typed(LIST, |c| list(c.sasl_mechanisms.iter().map(|m| m.name()))),
        "authorizer.class.name" => typed(STRING, |c| if c.authorizer { crate::settings::AUTHORIZER_CLASSES[0].to_string() } else { String::new() }),
        "super.users" => s(|c| c.acl.super_users.join(";")),
        "allow.everyone.if.no.acl.found" => typed(BOOLEAN, |c| c.acl.allow_if_no_acl.to_string()),
        "max.connections" => Entry::Limit { value: |c| c.connections_max },
        "max.connections.per.ip" => Entry::Limit { value: |c| c.connections_per_ip_max },
        // Kafka's other dynamic broker configs (`DynamicBrokerConfig.AllDynamicConfigs`).
        "ssl.keystore.type" | "ssl.truststore.type" => kept(STRING, Some("JKS"), TLS),
        "ssl.truststore.location" | "ssl.protocol" | "ssl.provider" | "ssl.keymanager.algorithm"
        | "ssl.trustmanager.algorithm" | "ssl.secure.random.implementation" | "ssl.client.auth"
        | "ssl.endpoint.identification.algorithm" => kept(STRING, None, TLS),
        "ssl.keystore.password" | "ssl.key.password" | "ssl.keystore.key" | "ssl.keystore.certificate.chain"
        | "ssl.truststore.password" | "ssl.truststore.certificates" | "sasl.jaas.config" => kept(PASSWORD, None, TLS),
        "ssl.enabled.protocols" | "ssl.cipher.suites" => kept(LIST, None, TLS),
        "ssl.engine.factory.class" => kept(CLASS, None, TLS),
        "sasl.kerberos.service.name" => kept(STRING, None, KERBEROS),
        "sasl.kerberos.kinit.cmd" => kept(STRING, Some("/usr/bin/kinit"), KERBEROS),
        "sasl.kerberos.ticket.renew.window.factor" => kept(DOUBLE, Some("0.8"), KERBEROS),
        "sasl.kerberos.ticket.renew.jitter" => kept(DOUBLE, Some("0.05"), KERBEROS),
        "sasl.kerberos.min.time.before.relogin" => kept(LONG, Some("60000"), KERBEROS),
        "sasl.kerberos.principal.to.local.rules" => kept(LIST, Some("DEFAULT"), KERBEROS),
        "sasl.login.refresh.window.factor" | "sasl.login.refresh.window.jitter" => kept(DOUBLE, None, UNUSED),
        "sasl.login.refresh.min.period.seconds" | "sasl.login.refresh.buffer.seconds" => kept(INT, None, UNUSED),
        "num.io.threads" => kept(INT, Some("8"), THREADS),
        "num.network.threads" => kept(INT, Some("3"), THREADS),
        "num.replica.fetchers" => kept(INT, Some("1"), THREADS),
        "num.recovery.threads.per.data.dir" => kept(INT, Some("2"), THREADS),
        "background.threads" => kept(INT, Some("10"), THREADS),
        "log.cleaner.threads" => kept(INT, Some("1"), CLEANER),
        "log.cleaner.dedupe.buffer.size" => kept(LONG, Some("134217728"), CLEANER),
        "log.cleaner.io.buffer.size" => kept(INT, Some("524288"), CLEANER),
        "log.cleaner.io.buffer.load.factor" => kept(DOUBLE, Some("0.9"), CLEANER),
        "log.cleaner.io.max.bytes.per.second" => kept(DOUBLE, Some("1.7976931348623157E308"), CLEANER),
        "log.cleaner.backoff.ms" => kept(LONG, Some("15000"), CLEANER),
        "metric.reporters" => kept(LIST, Some(""), UNUSED),
        "max.connection.creation.rate" => kept(INT, Some("2147483647"), UNUSED),
        "max.connections.per.ip.overrides" => kept(STRING, Some(""), UNUSED),
        "transaction.partition.verification.enable" => kept(BOOLEAN, Some("true"), UNUSED),
        _ => return None,
    })
}

/// Every broker config name, in the order DescribeConfigs lists them.
fn names() -> Vec<&'static str> {
    const OTHERS: &[&str] = &[
        "log.dirs",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "node.id",
        "num.partitions",
        "log.retention.check.interval.ms",
        "log.format",
        "log.level",
        "metrics.enabled",
        "metrics.require.token",
        "socket.request.max.bytes",
        "fetch.max.bytes",
        "queued.max.requests",
        "auto.create.topics.enable",
        "connections.max.idle.ms",
        "request.timeout.ms",
        "transaction.max.timeout.ms",
        "ssl.keystore.location",
        "sasl.enabled.mechanisms",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "max.connections",
        "max.connections.per.ip",
        "ssl.keystore.type",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.protocol",
        "ssl.provider",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.endpoint.identification.algorithm",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.keystore.key",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
        "sasl.jaas.config",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "ssl.engine.factory.class",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "num.io.threads",
        "num.network.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        "metric.reporters",
        "max.connection.creation.rate",
        "max.connections.per.ip.overrides",
        "transaction.partition.verification.enable",
    ];
    TOPIC_SYNONYMS
        .iter()
        .map(|(b, _)| *b)
        .chain(OTHERS.iter().copied())
        .chain(
            crate::config::server_keys::NOT_SERVED
                .iter()
                .map(|(n, _, _)| *n),
        )
        .collect()
}

/// Why the setting `name`, given at start, is not in effect (a static or a kept dynamic
/// config with no use here).
pub fn describe_not_served(name: &str) -> &'static str {
    match entry(name) {
        Some(Entry::NotServed { why, .. } | Entry::Kept { why, .. }) => why,
        _ => "not in effect",
    }
}

/// A static setting (file or flags) of one of the dynamic configs kept without effect:
/// `None` when `name` is not one, else whether `value` has its type.
pub fn check_kept_static(name: &str, value: &str) -> Option<Result<(), NotOfType>> {
    match entry(name)? {
        Entry::Kept { config_type, .. } => Some(check_kept(config_type, value)),
        _ => None,
    }
}

/// A value not of its config's type, in Kafka's words.
#[derive(Debug, thiserror::Error)]
#[error("Invalid value {value} for configuration: Expected value to be a {ty}")]
pub struct NotOfType {
    value: String,
    ty: &'static str,
}

/// Checks a value against its kept config's type, as Kafka's `ConfigDef` parses it.
fn check_kept(config_type: i8, value: &str) -> Result<(), NotOfType> {
    let v = value.trim();
    let ok = match config_type {
        kind::INT => v.parse::<i32>().is_ok(),
        kind::LONG => v.parse::<i64>().is_ok(),
        kind::DOUBLE => v.parse::<f64>().is_ok(),
        kind::BOOLEAN => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        let ty = match config_type {
            kind::INT => "INT",
            kind::LONG => "LONG",
            kind::DOUBLE => "DOUBLE",
            _ => "BOOLEAN",
        };
        Err(NotOfType {
            value: value.to_string(),
            ty,
        })
    }
}

/// Why a change of broker configs is refused, with Kafka's code.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `INVALID_REQUEST`: a static config, or a resource name that is not this broker.
    Request(String),
    /// `INVALID_CONFIG`: an unknown name or a bad value.
    Config(String),
}

/// The two dynamic levels, as stored.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Levels {
    /// The cluster-wide default (resource name `""`).
    pub default: BTreeMap<String, String>,
    /// This broker's (its node id).
    pub broker: BTreeMap<String, String>,
}

/// Which level a resource name addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `""`.
    Default,
    /// This broker's node id.
    Broker,
}

/// The level `name` addresses on broker `node_id`.
pub fn level(name: &str, node_id: i32) -> Result<Level, Refusal> {
    if name.is_empty() {
        Ok(Level::Default)
    } else if name.parse::<i32>() == Ok(node_id) {
        Ok(Level::Broker)
    } else {
        Err(Refusal::Request(format!(
            "Unexpected broker id, expected {node_id} but received {name}"
        )))
    }
}

/// Checks one level's new configs: every name known and dynamic, every value of its type.
pub fn check(configs: &BTreeMap<String, String>) -> Result<(), Refusal> {
    let mut fixed = Vec::new();
    for (k, v) in configs {
        match entry(k) {
            None => return Err(Refusal::Config(format!("unknown broker config {k}"))),
            Some(Entry::Static { .. } | Entry::NotServed { .. }) => fixed.push(k.clone()),
            Some(Entry::TopicDefault { topic }) => crate::config::topic::check(topic, v)
                .map_err(|e| Refusal::Config(format!("{k}: {e}")))?,
            Some(Entry::Limit { .. }) => {
                let n: i64 = v.trim().parse().map_err(|_| {
                    Refusal::Config(format!(
                        "Invalid value {v} for configuration {k}: Expected value to be an INT"
                    ))
                })?;
                if !(1..=i64::from(i32::MAX)).contains(&n) {
                    return Err(Refusal::Config(format!(
                        "Invalid value {v} for configuration {k}: at least 1 (a broker that accepts no connection cannot be reconfigured)"
                    )));
                }
            }
            Some(Entry::Kept { config_type, .. }) => {
                check_kept(config_type, v).map_err(|m| Refusal::Config(format!("{k}: {m}")))?
            }
        }
    }
    if fixed.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Request(format!(
            "Cannot update these configs dynamically: [{}]",
            fixed.join(", ")
        )))
    }
}

/// The effective value of a dynamic config over both levels, and its source.
fn dynamic<'a>(levels: &'a Levels, name: &str) -> Option<(&'a String, i8)> {
    levels
        .broker
        .get(name)
        .map(|v| (v, source::DYNAMIC_BROKER))
        .or_else(|| {
            levels
                .default
                .get(name)
                .map(|v| (v, source::DYNAMIC_DEFAULT_BROKER))
        })
}

/// The topic defaults with the dynamic ones over the static ones.
pub fn topic_defaults(config: &BrokerConfig, levels: &Levels) -> PartitionConfig {
    let mut d = config.topic_defaults;
    for (broker_name, topic) in TOPIC_SYNONYMS {
        if let Some((v, _)) = dynamic(levels, broker_name) {
            // Stored values passed `check`.
            let _ = crate::config::topic::apply(&mut d, topic, v);
        }
    }
    d
}

/// The connection limits in effect: (`max.connections`, `max.connections.per.ip`).
pub fn connection_limits(config: &BrokerConfig, levels: &Levels) -> (usize, usize) {
    let get = |name: &str, fallback: usize| {
        dynamic(levels, name)
            .and_then(|(v, _)| v.trim().parse().ok())
            .unwrap_or(fallback)
    };
    (
        get("max.connections", config.connections_max),
        get("max.connections.per.ip", config.connections_per_ip_max),
    )
}

/// One described broker config.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    /// Kafka's name.
    pub name: std::borrow::Cow<'static, str>,
    /// Its value (`None` for a password).
    pub value: Option<String>,
    /// Where it comes from ([`source`]).
    pub source: i8,
    /// Not dynamic.
    pub read_only: bool,
    /// A password.
    pub sensitive: bool,
    /// Kafka's `ConfigType`.
    pub config_type: i8,
    /// Whether this broker applies it.
    pub effect: String,
}

/// Every broker config of `level`: this broker's, all of them with their sources; the default
/// level, only its dynamic values (as Kafka describes the cluster default).
pub fn describe(config: &BrokerConfig, levels: &Levels, level: Level) -> Vec<Described> {
    let defaults = topic_defaults(config, levels);
    let topic_values = crate::config::topic::describe(&BTreeMap::new(), &defaults);
    let mut out = Vec::new();
    for name in names() {
        let Some(e) = entry(name) else { continue };
        let dynamic = match level {
            Level::Broker => dynamic(levels, name),
            Level::Default => levels
                .default
                .get(name)
                .map(|v| (v, source::DYNAMIC_DEFAULT_BROKER)),
        };
        if level == Level::Default && dynamic.is_none() {
            continue;
        }
        let given = |names: &[&str]| {
            if names.iter().any(|n| config.given.contains(*n)) {
                source::STATIC_BROKER
            } else {
                source::DEFAULT
            }
        };
        let d = match e {
            Entry::Static { config_type, value } => Described {
                name: name.into(),
                value: Some(value(config)),
                source: given(&[name]),
                read_only: true,
                sensitive: false,
                config_type,
                effect: "in effect (static: set at start)".into(),
            },
            Entry::TopicDefault { topic } => {
                let t = topic_values.iter().find(|d| d.name == topic);
                Described {
                    name: name.into(),
                    value: t.map(|t| t.value.clone()),
                    source: dynamic.map_or_else(|| given(&[name, topic]), |(_, s)| s),
                    read_only: false,
                    sensitive: false,
                    config_type: t.map_or(kind::STRING, |t| t.config_type),
                    effect: t.map_or_else(String::new, |t| {
                        format!("the default of topics' {topic}: {}", t.effect)
                    }),
                }
            }
            Entry::Limit { value } => Described {
                name: name.into(),
                value: Some(dynamic.map_or_else(|| value(config).to_string(), |(v, _)| v.clone())),
                source: dynamic.map_or_else(|| given(&[name]), |(_, s)| s),
                read_only: false,
                sensitive: false,
                config_type: kind::INT,
                effect: "in effect for the next connection accepted".into(),
            },
            Entry::Kept {
                config_type,
                default,
                why,
            } => {
                let sensitive = config_type == kind::PASSWORD;
                let given = config.not_served.get(name);
                Described {
                    name: name.into(),
                    value: if sensitive {
                        None
                    } else {
                        dynamic
                            .map(|(v, _)| v.clone())
                            .or(given.cloned())
                            .or(default.map(String::from))
                    },
                    source: dynamic.map_or(
                        given.map_or(source::DEFAULT, |_| source::STATIC_BROKER),
                        |(_, s)| s,
                    ),
                    read_only: false,
                    sensitive,
                    config_type,
                    effect: why.into(),
                }
            }
            Entry::NotServed { config_type, why } => {
                // Listed only when given: Kafka's defaults of what is not served say nothing.
                let Some(value) = config.not_served.get(name) else {
                    continue;
                };
                Described {
                    name: name.into(),
                    value: Some(value.clone()),
                    source: source::STATIC_BROKER,
                    read_only: true,
                    sensitive: false,
                    config_type,
                    effect: why.into(),
                }
            }
        };
        out.push(d);
    }
    out
}

/// The stored dynamic configs.
pub struct Store {
    doc: Document,
    secrets: crate::storage::secrets::SecretBox,
}

/// Whether `name` is a PASSWORD-type config (sealed at rest, never described).
pub fn is_password(name: &str) -> bool {
    matches!(
        entry(name),
        Some(Entry::Kept {
            config_type: kind::PASSWORD,
            ..
        })
    )
}

impl Store {
    /// Opens `broker-configs.json` in `dir`, and checks what it holds. PASSWORD-type values
    /// are sealed with the broker's key (`secrets.rs`; `password.encoder.secret` when set):
    /// plain ones an earlier version stored are sealed and the file rewritten at once.
    pub fn open(
        dir: &std::path::Path,
        encoder_secret: Option<&str>,
    ) -> Result<(Self, Levels), StoreError> {
        let doc = Document::new(dir, "broker-configs.json")?;
        let secrets =
            crate::storage::secrets::SecretBox::open(dir, encoder_secret).map_err(|e| {
                StoreError {
                    path: dir.join(crate::storage::secrets::KEY_FILE),
                    reason: e.to_string(),
                }
            })?;
        let levels: Levels = doc.load()?.unwrap_or_default();
        for l in [&levels.default, &levels.broker] {
            check(l).map_err(|e| StoreError {
                path: dir.join("broker-configs.json"),
                reason: format!("a stored broker config is not valid: {e:?}"),
            })?;
            for (k, v) in l.iter().filter(|(k, _)| is_password(k)) {
                if crate::storage::secrets::SecretBox::is_sealed(v) {
                    if let Err(e) = secrets.open_value(v) {
                        tracing::error!(config = %k, error = %e, "a stored password config does not open with this broker's key (password.encoder.secret changed?)");
                    }
                }
            }
        }
        let store = Store { doc, secrets };
        let plain = [&levels.default, &levels.broker].iter().any(|l| {
            l.iter()
                .any(|(k, v)| is_password(k) && !crate::storage::secrets::SecretBox::is_sealed(v))
        });
        let levels = if plain || store.doc.exists() {
            store.store(&levels)?
        } else {
            levels
        };
        Ok((store, levels))
    }

    /// Stores `levels`, durably, readable by the broker's user alone, with every
    /// PASSWORD-type value sealed; the levels as stored (sealed).
    pub fn store(&self, levels: &Levels) -> Result<Levels, StoreError> {
        let seal = |l: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, StoreError> {
            l.iter()
                .map(|(k, v)| {
                    let v = if is_password(k) && !crate::storage::secrets::SecretBox::is_sealed(v) {
                        self.secrets.seal(v).map_err(|e| StoreError {
                            path: std::path::PathBuf::from("broker-configs.json"),
                            reason: e.to_string(),
                        })?
                    } else {
                        v.clone()
                    };
                    Ok((k.clone(), v))
                })
                .collect()
        };
        let sealed = Levels {
            default: seal(&levels.default)?,
            broker: seal(&levels.broker)?,
        };
        self.doc.store_private(&sealed)?;
        Ok(sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_listed_name_has_an_entry_and_names_are_unique() {
        let all = names();
        for n in &all {
            assert!(entry(n).is_some(), "{n}");
        }
        let unique: std::collections::BTreeSet<_> = all.iter().collect();
        assert_eq!(unique.len(), all.len());
    }

    #[test]
    fn changes_are_checked_as_kafka_checks_them() {
        assert_eq!(check(&map(&[("log.retention.ms", "60000")])), Ok(()));
        assert_eq!(
            check(&map(&[("sasl.kerberos.min.time.before.relogin", "58000")])),
            Ok(())
        );
        assert!(matches!(
            check(&map(&[("log.dirs", "/x"), ("node.id", "2")])),
            Err(Refusal::Request(m)) if m.contains("Cannot update these configs dynamically")
        ));
        assert!(matches!(
            check(&map(&[("log.retention.ms", "soon")])),
            Err(Refusal::Config(_))
        ));
        assert!(matches!(
            check(&map(&[("num.io.threads", "x")])),
            Err(Refusal::Config(_))
        ));
        assert!(matches!(
            check(&map(&[("max.connections", "0")])),
            Err(Refusal::Config(_))
        ));
        assert!(matches!(
            check(&map(&[("no.such.config", "1")])),
            Err(Refusal::Config(_))
        ));
        assert_eq!(level("", 1), Ok(Level::Default));
        assert_eq!(level("1", 1), Ok(Level::Broker));
        assert!(matches!(level("2", 1), Err(Refusal::Request(_))));
    }

    #[test]
    fn dynamic_values_win_by_level_and_are_described_with_their_source() {
        let config = BrokerConfig::default();
        let levels = Levels {
            default: map(&[("log.retention.ms", "1000"), ("max.connections", "5")]),
            broker: map(&[("log.retention.ms", "2000"), ("ssl.key.password", "secret")]),
        };
        assert_eq!(topic_defaults(&config, &levels).retention_ms, Some(2000));
        assert_eq!(connection_limits(&config, &levels).0, 5);
        let all = describe(&config, &levels, Level::Broker);
        let get = |n: &str| all.iter().find(|d| d.name == n).unwrap().clone();
        let r = get("log.retention.ms");
        assert_eq!(
            (r.value.as_deref(), r.source, r.read_only),
            (Some("2000"), 2, false)
        );
        let m = get("max.connections");
        assert_eq!((m.value.as_deref(), m.source), (Some("5"), 3));
        let p = get("ssl.key.password");
        assert_eq!((p.value, p.sensitive, p.source), (None, true, 2));
        let l = get("log.dirs");
        assert!(l.read_only && l.source == source::DEFAULT);
        let d = describe(&config, &levels, Level::Default);
        assert_eq!(d.len(), 2, "{d:?}");
    }
}
