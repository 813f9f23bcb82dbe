//! What a mirror keeps in step with its source besides the records (KIP-1279 syncs them
//! periodically, as Confluent Cluster Linking and Redpanda Shadowing do):
//!
//! - **configs**: every [`CONFIG_SYNC_INTERVAL`] the source's DescribeConfigs for the mirrored
//!   topics; each config the source sets (its source is not Kafka's default: a topic override or
//!   a broker-wide one), that is not sensitive and that Kafka documents at topic level, becomes
//!   the local topic's, and one the source no longer sets goes back to the default — except the
//!   excluded ones ([`EXCLUDED_DEFAULT`], or the mirror's own list), which stay as the operator
//!   set them here. Changes apply live (`Broker::alter_topic_configs`);
//! - **partitions**: partitions added at the source (seen in the fetcher's metadata) are created
//!   here, started mirroring from their beginning, and fetched.

use super::sync_error::SyncError;
use crate::broker::Shared;
use crate::net::client::{Client, ClientError, Security};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, RequestKind, ResponseKind};
use mirrorlog::engine::{MirrorStart, StartMirroring, TopicPartition};
use std::collections::BTreeMap;
use std::time::Duration;

/// How often the source's topic configs are read again.
/// How a topic's config sync stands: when it last succeeded, and why the last one failed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSync {
    /// When the topic's configs were last synced from the source.
    pub synced: Option<std::time::SystemTime>,
    /// Why the last sync of them failed (`None`: it did not).
    pub error: Option<String>,
}

/// Each mirrored topic's [`ConfigSync`], by topic name, shared with the admin surface.
pub type ConfigSyncs = std::sync::Arc<std::sync::Mutex<BTreeMap<String, ConfigSync>>>;

pub const CONFIG_SYNC_INTERVAL: Duration = Duration::from_secs(30);
/// Configs not synced unless the mirror says otherwise: how the source replicates, not what
/// it stores (MirrorMaker 2's `config.properties.exclude` defaults, less the timestamp
/// settings, which decide what a local producer may write after a failover).
pub const EXCLUDED_DEFAULT: &[&str] = &[
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "min.insync.replicas",
    "unclean.leader.election.enable",
];
/// `DescribeConfigsResponse.ConfigSource.DEFAULT_CONFIG`.
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's `ConfigResource.Type.TOPIC`.
const RESOURCE_TOPIC: i8 = 2;

/// Per topic, the configs the source sets, or why it could not say.
pub type SourceConfigs = BTreeMap<String, Result<BTreeMap<String, String>, SyncError>>;

/// The configs the source sets for each of `topics`, asked of the first of `addrs` that
/// answers.
pub async fn source_configs(
    addrs: &[String],
    topics: &[String],
    security: &Security,
) -> Result<SourceConfigs, SyncError> {
    super::source::from_any(addrs, "DescribeConfigs", |addr| async move {
        describe(&addr, topics, security).await
    })
    .await
    .map_err(SyncError::Unanswered)
}

async fn describe(
    addr: &str,
    topics: &[String],
    security: &Security,
) -> Result<SourceConfigs, ClientError> {
    let mut client = Client::connect_with(addr, security).await?;
    let version = client.version(ApiKey::DescribeConfigs, 1, 4)?;
    let mut r = DescribeConfigsRequest::default();
    r.resources = topics
        .iter()
        .map(|t| {
            let mut res = DescribeConfigsResource::default();
            res.resource_type = RESOURCE_TOPIC;
            res.resource_name = crate::net::wire::str_bytes(t);
            res.configuration_keys = None;
            res
        })
        .collect();
    let ResponseKind::DescribeConfigs(answer) = client
        .call(
            ApiKey::DescribeConfigs,
            version,
            RequestKind::DescribeConfigs(r),
        )
        .await?
    else {
        return Err(ClientError(
            "DescribeConfigs answered with another API".into(),
        ));
    };
    let mut out = SourceConfigs::new();
    for res in answer.results {
        let name = res.resource_name.to_string();
        if res.error_code != 0 {
            let why = res.error_message.map(|m| m.to_string()).unwrap_or_default();
            let refused = SyncError::Refused {
                api: "DescribeConfigs",
                resource: name.clone(),
                code: res.error_code,
                message: why,
            };
            out.insert(name, Err(refused));
            continue;
        }
        let set = res
            .configs
            .into_iter()
            .filter(|c| c.config_source != SOURCE_DEFAULT && !c.is_sensitive)
            .filter_map(|c| Some((c.name.to_string(), c.value?.to_string())))
            .filter(|(k, v)| crate::config::topic::check(k, v).is_ok())
            .collect();
        out.insert(name, Ok(set));
    }
    Ok(out)
}

/// The local topic's configs after a sync: the source's, less the excluded ones, which keep
/// their local values.
pub fn merged(
    local: &BTreeMap<String, String>,
    source: &BTreeMap<String, String>,
    exclude: &[String],
) -> BTreeMap<String, String> {
    let excluded = |k: &str| exclude.iter().any(|x| x == k);
    let mut out: BTreeMap<String, String> = local
        .iter()
        .filter(|(k, _)| excluded(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in source {
        if !excluded(k) {
            out.insert(k.clone(), v.clone());
        }
    }
    out
}

/// Applies the source's configs of `topic` here when they differ; whether anything changed.
pub async fn apply_configs(
    b: &Shared,
    topic: &str,
    source: &BTreeMap<String, String>,
    exclude: &[String],
) -> Result<bool, SyncError> {
    let local = b
        .registry()
        .get(topic)
        .map(|t| t.configs.clone())
        .ok_or_else(|| SyncError::NotHere(topic.to_string()))?;
    let want = merged(&local, source, exclude);
    if want == local {
        return Ok(false);
    }
    b.alter_topic_configs(topic, want, false)
        .await
        .map_err(|e| SyncError::here(format!("applying the source's configs of {topic}"))(&e))?;
    tracing::info!(topic, "topic configs synced from the source");
    Ok(true)
}

/// Grows `topic` here to the source's `count` partitions and starts the new ones mirroring
/// from `mirror`; the new partitions.
pub async fn grow(
    b: &Shared,
    mirror: &str,
    topic: &str,
    count: i32,
) -> Result<Vec<TopicPartition>, SyncError> {
    let held = b.registry().get(topic).map_or(0, |t| t.partitions);
    if count <= held {
        return Ok(Vec::new());
    }
    b.grow_topic(topic, count, None, false)
        .await
        .map_err(|e| SyncError::here(format!("adding partitions to {topic}"))(&e))?;
    let mut added = Vec::new();
    for p in held..count {
        let tp = TopicPartition::new(topic, p);
        b.engine
            .start_mirroring(
                &tp,
                StartMirroring {
                    source: mirror.to_string(),
                    truncate_to: MirrorStart::LastStableOffset,
                },
            )
            .await
            .map_err(|e| SyncError::here(format!("mirroring {tp}"))(&e))?;
        added.push(tp);
    }
    tracing::info!(
        mirror,
        topic,
        partitions = count,
        "partitions added at the source mirrored"
    );
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_takes_the_sources_configs_and_keeps_the_excluded_local_ones() {
        let m = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let local = m(&[
            ("retention.ms", "1000"),
            ("segment.bytes", "1048576"),
            ("min.insync.replicas", "2"),
        ]);
        let source = m(&[
            ("retention.ms", "5000"),
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", "3"),
        ]);
        let exclude: Vec<String> = EXCLUDED_DEFAULT.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            merged(&local, &source, &exclude),
            m(&[
                ("retention.ms", "5000"),
                ("cleanup.policy", "compact"),
                ("min.insync.replicas", "2"),
            ]),
            "segment.bytes, no longer set at the source, goes back to its default"
        );
    }
}
