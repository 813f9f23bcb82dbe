//! Gaps librdkafka's own test suite found (`scripts/librdkafka-suite.sh` runs the
//! suite), each held here against Kafka's behaviour on the wire:
//! - DeleteRecords with a negative offset other than -1 is `OFFSET_OUT_OF_RANGE` (Kafka's
//!   `ReplicaManager.deleteRecordsOnLocalLog`), not a silent no-op (librdkafka 0081);
//! - Metadata's authorized operations, without an authorizer, are every operation Kafka's
//!   `AclEntry.supportedOperations` lists (librdkafka 0081's DescribeTopics / DescribeCluster);
//! - CreateTopics takes every topic config Kafka documents within Kafka's bounds
//!   (`delete.retention.ms`, librdkafka 0129; `segment.bytes` down to 14), refuses what Kafka
//!   refuses, and DescribeConfigs says what is in effect;
//! - Metadata requests racing to auto-create one topic all get it (or `LEADER_NOT_AVAILABLE`
//!   while it is created), never `UNKNOWN_TOPIC_OR_PARTITION`.

mod broker_support;

use broker_support::requests::{
    create_topic, create_topic_answer, describe_configs, name, produce,
};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DeleteRecordsRequest, MetadataRequest, MetadataResponse, RequestKind, ResponseKind,
};
use mirrorlog::format::ProducerFields;

const OFFSET_OUT_OF_RANGE: i16 = 1;
const LEADER_NOT_AVAILABLE: i16 = 5;
const INVALID_CONFIG: i16 = 40;

fn delete_records(c: &mut Conn, topic: &str, offset: i64) -> (i16, i64) {
    let mut p = DeleteRecordsPartition::default();
    p.partition_index = 0;
    p.offset = offset;
    let mut t = DeleteRecordsTopic::default();
    t.name = name(topic);
    t.partitions.push(p);
    let mut r = DeleteRecordsRequest::default();
    r.topics.push(t);
    r.timeout_ms = 10_000;
    let ResponseKind::DeleteRecords(resp) =
        c.call(ApiKey::DeleteRecords, 2, RequestKind::DeleteRecords(r))
    else {
        panic!("not a DeleteRecords answer")
    };
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

#[test]
fn delete_records_below_zero_is_out_of_range_and_minus_one_is_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "dr", 1, &[]);
    let values: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d"];
    let one = broker_support::requests::batch(ProducerFields::NONE, &values);
    assert_eq!(produce(&mut c, "dr", one, -1).0, 0);
    assert_eq!(delete_records(&mut c, "dr", 1), (0, 1));
    // librdkafka sends its OFFSET_INVALID (-1001) as it is; Kafka refuses every negative offset
    // but the high-watermark sentinel. The log start stays where it was.
    for negative in [-2, -1001, i64::MIN] {
        assert_eq!(
            delete_records(&mut c, "dr", negative),
            (OFFSET_OUT_OF_RANGE, -1),
            "{negative}"
        );
    }
    assert_eq!(delete_records(&mut c, "dr", 1), (0, 1), "nothing moved");
    assert_eq!(delete_records(&mut c, "dr", 5).0, OFFSET_OUT_OF_RANGE);
    assert_eq!(
        delete_records(&mut c, "dr", -1),
        (0, 4),
        "-1: the high watermark"
    );
}

fn metadata(c: &mut Conn, version: i16, topic: &str, ops: bool) -> MetadataResponse {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    r.allow_auto_topic_creation = true;
    r.include_topic_authorized_operations = ops;
    r.include_cluster_authorized_operations = ops && version <= 10;
    let ResponseKind::Metadata(resp) = c.call(ApiKey::Metadata, version, RequestKind::Metadata(r))
    else {
        panic!("not a Metadata answer")
    };
    resp
}

#[test]
fn authorized_operations_are_every_supported_operation_without_an_authorizer() {
    // AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
    // CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
    let topic_ops: i32 = [3, 4, 5, 6, 7, 8, 10, 11].iter().map(|op| 1 << op).sum();
    let cluster_ops: i32 = [5, 7, 8, 9, 10, 11, 12].iter().map(|op| 1 << op).sum();
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "ops", 1, &[]);
    let v10 = metadata(&mut c, 10, "ops", true);
    assert_eq!(v10.topics[0].topic_authorized_operations, topic_ops);
    assert_eq!(v10.cluster_authorized_operations, cluster_ops);
    let v12 = metadata(&mut c, 12, "ops", true);
    assert_eq!(v12.topics[0].topic_authorized_operations, topic_ops);
    // Not asked for: Kafka's "omitted" value.
    let plain = metadata(&mut c, 10, "ops", false);
    assert_eq!(plain.topics[0].topic_authorized_operations, i32::MIN);
    assert_eq!(plain.cluster_authorized_operations, i32::MIN);
}

/// CreateTopics of one partition at the broker's replication factor (-1).
fn create_with(c: &mut Conn, topic: &str, configs: &[(&str, &str)]) -> (i16, Option<String>) {
    create_topic_answer(c, topic, 1, -1, configs, false)
}

/// (name, value, documentation) of every config DescribeConfigs v4 answers for `topic`.
fn describe(c: &mut Conn, topic: &str) -> Vec<(String, String, String)> {
    describe_configs(c, 2, topic)
        .into_iter()
        .map(|d| (d.name, d.value.unwrap_or_default(), d.documentation))
        .collect()
}

#[test]
fn every_topic_config_kafka_accepts_is_accepted_and_described_with_its_effect() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    // librdkafka 0129 creates its topic with delete.retention.ms; Kafka's minimum segment.bytes
    // is 14 (the engine raises it to 65536 and says so).
    let accepted: &[(&str, &str)] = &[
        ("delete.retention.ms", "1000"),
        ("segment.bytes", "14"),
        ("cleanup.policy", "compact,delete"),
        ("min.cleanable.dirty.ratio", "0.1"),
        ("message.timestamp.type", "CreateTime"),
        ("retention.ms", "3600000"),
    ];
    assert_eq!(create_with(&mut c, "kafka-configs", accepted), (0, None));
    let described = describe(&mut c, "kafka-configs");
    let get = |n: &str| {
        described
            .iter()
            .find(|(name, _, _)| name == n)
            .unwrap_or_else(|| panic!("{n} not described"))
            .clone()
    };
    let (_, value, doc) = get("segment.bytes");
    assert_eq!(value, "14");
    assert!(doc.starts_with("in effect as 65536"), "{doc}");
    let (_, value, doc) = get("delete.retention.ms");
    assert_eq!((value.as_str(), doc.as_str()), ("1000", "in effect"));
    let (_, _, doc) = get("flush.ms");
    assert!(doc.starts_with("stored, not in effect"), "{doc}");
    let (_, value, doc) = get("retention.ms");
    assert_eq!((value.as_str(), doc.as_str()), ("3600000", "in effect"));
    assert_eq!(get("cleanup.policy").2, "in effect");
    // Defaults are described too (Kafka describes every topic config).
    assert_eq!(get("min.insync.replicas").1, "1");
    assert!(described.len() >= 36, "{}", described.len());
    // The topic is compacted: a record without a key is refused as Kafka refuses it
    // (INVALID_RECORD); a keyed one is taken (the segment is the engine's minimum).
    let values: Vec<&[u8]> = vec![b"x"];
    let keyless = broker_support::requests::batch(ProducerFields::NONE, &values);
    assert_eq!(produce(&mut c, "kafka-configs", keyless, -1).0, 87);
    // KIP-467: which records failed, each with Kafka's LogValidator message, so that a client
    // fails those and re-sends the rest (librdkafka's 0011 counts them).
    let mixed = {
        use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};
        let mut b = BatchBuilder::new(BatchOptions::default());
        for key in [Some(&b"k"[..]), None, Some(&b"k"[..])] {
            b.push(RecordSpec {
                timestamp: 1_700_000_000_000,
                key,
                value: Some(b"v"),
                headers: &[],
            });
        }
        b.build()
    };
    let ResponseKind::Produce(r) = c.call(
        ApiKey::Produce,
        9,
        broker_support::requests::produce_request("kafka-configs", mixed, -1),
    ) else {
        panic!("not a Produce answer")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 87);
    let indexes: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, [1]);
    assert!(p.record_errors[0]
        .batch_index_error_message
        .as_ref()
        .unwrap()
        .contains(
            "Compacted topic cannot accept message without key in topic partition kafka-configs-0"
        ));
    assert!(p
        .error_message
        .as_ref()
        .unwrap()
        .starts_with("One or more records have been rejected due to 1 record errors"));
    let keyed = broker_support::requests::keyed_batch(ProducerFields::NONE, &[(b"k", b"x")]);
    assert_eq!(produce(&mut c, "kafka-configs", keyed, -1).0, 0);
    // The cleaner's counters, per shard, on the admin surface.
    let cleaner = broker_support::requests::http_get(&b, "/cleaner");
    assert!(cleaner.starts_with("HTTP/1.1 200"), "{cleaner}");
    for field in [
        "\"passes\"",
        "\"bytes_read\"",
        "\"backlog_bytes\"",
        "\"max_dirty_ratio\"",
    ] {
        assert!(cleaner.contains(field), "{field} in {cleaner}");
    }

    // What Kafka refuses: out of its bounds, not in its lists, not a topic config.
    for (i, bad) in [
        ("segment.bytes", "13"),
        ("delete.retention.ms", "-1"),
        ("cleanup.policy", "archive"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("compression.type", "brotli"),
        ("message.timestamp.type", "WallTime"),
        ("remote.storage.enable", "true"),
        ("no.such.config", "1"),
    ]
    .into_iter()
    .enumerate()
    {
        let topic = format!("refused-{i}");
        let (code, message) = create_with(&mut c, &topic, &[bad]);
        assert_eq!(code, INVALID_CONFIG, "{bad:?}: {message:?}");
        assert!(message.unwrap_or_default().contains(bad.0), "{bad:?}");
    }
}

#[test]
fn metadata_requests_racing_to_auto_create_a_topic_all_get_it() {
    // Before: the request that lost the race answered UNKNOWN_TOPIC_OR_PARTITION for a topic
    // that existed. Kafka answers the topic, or LEADER_NOT_AVAILABLE while it is created.
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "num.partitions=8"]);
    for round in 0..5 {
        let topic = format!("raced-{round}");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let answers: Vec<i16> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let mut c = b.connect();
                    let barrier = barrier.clone();
                    let topic = topic.clone();
                    s.spawn(move || {
                        barrier.wait();
                        metadata(&mut c, 12, &topic, false).topics[0].error_code
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            answers.iter().all(|&c| c == 0 || c == LEADER_NOT_AVAILABLE),
            "round {round}: {answers:?}"
        );
        assert!(answers.contains(&0), "round {round}: {answers:?}");
    }
}
