//! Bad topic settings are refused with Kafka's code before anything is written, through each
//! API that takes them — CreateTopics, AlterConfigs and IncrementalAlterConfigs — and the
//! broker restarts cleanly after each: a table of settings out of Kafka's bounds,
//! of the wrong type, not in its lists, not a topic config, or a feature not served.

mod broker_support;

use broker_support::requests::{create_topic, create_topic_answer};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, IncrementalAlterConfigsRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

/// Kafka's `INVALID_CONFIG`.
const INVALID_CONFIG: i16 = 40;
/// Kafka's `ConfigResource.Type.TOPIC`.
const TOPIC: i8 = 2;

const BAD: &[(&str, &str)] = &[
    ("segment.bytes", "13"),
    ("segment.bytes", "abc"),
    ("segment.ms", "0"),
    ("segment.ms", "-5"),
    ("retention.ms", "-2"),
    ("retention.ms", "1h"),
    ("retention.bytes", "lots"),
    ("max.message.bytes", "-1"),
    ("max.message.bytes", "1.5"),
    ("cleanup.policy", "archive"),
    ("compression.type", "brotli"),
    ("message.timestamp.type", "WallTime"),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "-0.1"),
    ("delete.retention.ms", "-1"),
    ("min.compaction.lag.ms", "-1"),
    ("max.compaction.lag.ms", "0"),
    ("index.interval.bytes", "-1"),
    ("segment.index.bytes", "3"),
    ("segment.jitter.ms", "-1"),
    ("file.delete.delay.ms", "-1"),
    ("flush.messages", "0"),
    ("flush.ms", "-1"),
    ("min.insync.replicas", "0"),
    ("unclean.leader.election.enable", "maybe"),
    ("preallocate", "sometimes"),
    ("compression.gzip.level", "10"),
    ("compression.zstd.level", "23"),
    ("compression.lz4.level", "18"),
    ("message.timestamp.before.max.ms", "-1"),
    ("remote.storage.enable", "true"),
    ("no.such.config", "1"),
];

fn alter(c: &mut Conn, topic: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let mut config = AlterableConfig::default();
    config.name = StrBytes::from_string(key.to_string());
    config.value = Some(StrBytes::from_string(value.to_string()));
    let mut resource = AlterConfigsResource::default();
    resource.resource_type = TOPIC;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configs.push(config);
    let mut r = AlterConfigsRequest::default();
    r.resources.push(resource);
    let ResponseKind::AlterConfigs(resp) =
        c.call(ApiKey::AlterConfigs, 2, RequestKind::AlterConfigs(r))
    else {
        panic!("not an AlterConfigs answer")
    };
    let x = &resp.responses[0];
    (
        x.error_code,
        x.error_message.as_ref().map(|m| m.to_string()),
    )
}

fn alter_incrementally(c: &mut Conn, topic: &str, key: &str, value: &str) -> (i16, Option<String>) {
    let mut config = incremental::AlterableConfig::default();
    config.name = StrBytes::from_string(key.to_string());
    config.config_operation = 0; // SET
    config.value = Some(StrBytes::from_string(value.to_string()));
    let mut resource = incremental::AlterConfigsResource::default();
    resource.resource_type = TOPIC;
    resource.resource_name = StrBytes::from_string(topic.to_string());
    resource.configs.push(config);
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources.push(resource);
    let ResponseKind::IncrementalAlterConfigs(resp) = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        RequestKind::IncrementalAlterConfigs(r),
    ) else {
        panic!("not an IncrementalAlterConfigs answer")
    };
    let x = &resp.responses[0];
    (
        x.error_code,
        x.error_message.as_ref().map(|m| m.to_string()),
    )
}

#[test]
fn every_bad_setting_is_refused_by_each_api_and_the_broker_restarts_after_each() {
    assert!(BAD.len() >= 30);
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "kept", 2, &[("retention.ms", "3600000")]);
    for (i, &(key, value)) in BAD.iter().enumerate() {
        let topic = format!("refused-{i}");
        let (code, message) = create_topic_answer(&mut c, &topic, 1, 1, &[(key, value)], false);
        assert_eq!(
            code, INVALID_CONFIG,
            "CreateTopics {key}={value}: {message:?}"
        );
        let (code, message) = alter(&mut c, "kept", key, value);
        assert_eq!(
            code, INVALID_CONFIG,
            "AlterConfigs {key}={value}: {message:?}"
        );
        assert!(
            message.unwrap_or_default().contains(key),
            "AlterConfigs {key}"
        );
        let (code, message) = alter_incrementally(&mut c, "kept", key, value);
        assert_eq!(
            code, INVALID_CONFIG,
            "IncrementalAlterConfigs {key}={value}: {message:?}"
        );
        // Nothing was written: the broker restarts, the refused topic does not exist, and the
        // kept one is as it was.
        drop(c);
        let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
        assert!(b.terminate().success(), "{key}={value}: a clean stop");
        b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
        c = b.connect();
        let (code, _) = create_topic_answer(&mut c, &topic, 1, 1, &[], true);
        assert_eq!(code, 0, "{topic} was not created by the refused request");
        let (code, _) = alter(&mut c, "kept", "retention.ms", "3600000");
        assert_eq!(code, 0, "the kept topic still takes a good setting");
    }
}
