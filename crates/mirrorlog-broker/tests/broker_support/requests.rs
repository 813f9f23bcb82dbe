//! Hand-made requests for the broker tests (the `kafka-protocol` crate encodes them): topics,
//! produce and fetch of partition 0, the admin surface's HTTP, and a mirrored pair of brokers.

use super::{BrokerProc, Conn};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, FetchRequest, MetadataRequest, ProduceRequest,
    RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::{BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use std::time::{Duration, Instant};

pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// A CreateTopics (v7) of one topic: its error code and message.
pub fn create_topic_answer(
    c: &mut Conn,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    for (k, v) in configs {
        let mut c = CreatableTopicConfig::default();
        c.name = StrBytes::from_string(k.to_string());
        c.value = Some(StrBytes::from_string(v.to_string()));
        t.configs.push(c);
    }
    let mut r = CreateTopicsRequest::default();
    r.topics.push(t);
    r.timeout_ms = 30_000;
    r.validate_only = validate_only;
    let ResponseKind::CreateTopics(resp) =
        c.call(ApiKey::CreateTopics, 7, RequestKind::CreateTopics(r))
    else {
        panic!("not a CreateTopics answer")
    };
    let t = &resp.topics[0];
    (
        t.error_code,
        t.error_message.as_ref().map(ToString::to_string),
    )
}

/// Creates `topic` (one replica), asserting it was created.
pub fn create_topic(c: &mut Conn, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let (code, message) = create_topic_answer(c, topic, partitions, 1, configs, false);
    assert_eq!(code, 0, "{message:?}");
}

pub fn batch(producer: ProducerFields, values: &[&[u8]]) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: Offset(0),
        producer,
        ..BatchOptions::default()
    });
    for v in values {
        b.push(RecordSpec {
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(v),
            headers: &[],
        });
    }
    b.build()
}

/// A batch of keyed records (`(key, value)` each).
pub fn keyed_batch(producer: ProducerFields, records: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: Offset(0),
        producer,
        ..BatchOptions::default()
    });
    for (k, v) in records {
        b.push(RecordSpec {
            timestamp: 1_700_000_000_000,
            key: Some(k),
            value: Some(v),
            headers: &[],
        });
    }
    b.build()
}

/// A Produce of `records` to `topic`-0 with `acks`.
pub fn produce_request(topic: &str, records: Vec<u8>, acks: i16) -> RequestKind {
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(Bytes::from(records));
    let mut t = TopicProduceData::default();
    t.name = name(topic);
    t.partition_data.push(p);
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 30_000;
    r.topic_data.push(t);
    RequestKind::Produce(r)
}

/// Produces `records` to `topic`-0 with `acks`; the partition's (error code, base offset).
pub fn produce(c: &mut Conn, topic: &str, records: Vec<u8>, acks: i16) -> (i16, i64) {
    let ResponseKind::Produce(resp) =
        c.call(ApiKey::Produce, 9, produce_request(topic, records, acks))
    else {
        panic!("not a Produce answer")
    };
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

pub fn fetch(c: &mut Conn, topic: &str, offset: i64, max_wait_ms: i32) -> (i16, i64, Bytes) {
    fetch_at_epoch(c, topic, offset, max_wait_ms, -1)
}

/// A fetch of `topic`-0 naming `current_leader_epoch` (-1: none).
pub fn fetch_at_epoch(
    c: &mut Conn,
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
    current_leader_epoch: i32,
) -> (i16, i64, Bytes) {
    let r = fetch_request(topic, offset, max_wait_ms, current_leader_epoch);
    let ResponseKind::Fetch(resp) = c.call(ApiKey::Fetch, 11, r) else {
        panic!("not a Fetch answer")
    };
    let p = &resp.responses[0].partitions[0];
    (
        p.error_code,
        p.high_watermark,
        p.records.clone().unwrap_or_default(),
    )
}

/// A Fetch (v11) of `topic`-0 from `offset`, waiting up to `max_wait_ms` for one byte.
pub fn fetch_request(
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
    current_leader_epoch: i32,
) -> RequestKind {
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.current_leader_epoch = current_leader_epoch;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = name(topic);
    t.partitions.push(fp);
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = 1 << 24;
    r.topics.push(t);
    RequestKind::Fetch(r)
}

/// The admin surface's bearer token, as the broker made it in its data directory.
pub fn admin_token(broker: &BrokerProc) -> String {
    let file = broker.data_dir.join("broker/admin.token");
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .to_string()
}

/// One HTTP request to the admin surface (with its token and a loopback Host); the whole
/// answer, head and body.
pub fn http(broker: &BrokerProc, method: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&broker.admin).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\ncontent-length: {}\r\n\r\n{body}",
        broker.admin,
        admin_token(broker),
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

pub fn http_post(broker: &BrokerProc, path: &str, body: &str) -> String {
    http(broker, "POST", path, body)
}

pub fn http_get(broker: &BrokerProc, path: &str) -> String {
    http(broker, "GET", path, "")
}

/// A source broker holding `topic` (one partition, one record) and a destination mirroring it
/// as mirror `src`, caught up; the directories live as long as it.
pub struct Mirrored {
    pub src: BrokerProc,
    pub dst: BrokerProc,
    pub _dirs: (tempfile::TempDir, tempfile::TempDir),
}

pub fn mirrored(topic: &str) -> Mirrored {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let src = BrokerProc::start(dirs.0.path(), &[]);
    let dst = BrokerProc::start(dirs.1.path(), &[]);
    let mut s = src.connect();
    create_topic(&mut s, topic, 1, &[]);
    assert_eq!(
        produce(&mut s, topic, batch(ProducerFields::NONE, &[b"a"]), -1),
        (0, 0)
    );
    let mirror = format!(
        r#"{{"name":"src","bootstrap":"{}","topics":["{topic}"]}}"#,
        src.kafka
    );
    assert!(http_post(&dst, "/mirrors", &mirror).starts_with("HTTP/1.1 200"));
    let mut d = dst.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fetch(&mut d, topic, 0, 100).1 != 1 {
        assert!(Instant::now() < deadline, "the mirror did not catch up");
    }
    Mirrored {
        src,
        dst,
        _dirs: dirs,
    }
}

/// SaslHandshake of `mechanism`: its error code and the mechanisms the broker names.
pub fn handshake(c: &mut Conn, version: i16, mechanism: &'static str) -> (i16, Vec<String>) {
    let r = c.call(
        ApiKey::SaslHandshake,
        version,
        RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism)),
        ),
    );
    let ResponseKind::SaslHandshake(h) = r else {
        panic!("{r:?}")
    };
    let names = h.mechanisms.iter().map(|m| m.to_string()).collect();
    (h.error_code, names)
}

/// SaslAuthenticate (v2) of `token`: error code, message and the broker's bytes.
pub fn authenticate(c: &mut Conn, token: &[u8]) -> (i16, Option<String>, Bytes) {
    let r = c.call(
        ApiKey::SaslAuthenticate,
        2,
        RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token)),
        ),
    );
    let ResponseKind::SaslAuthenticate(a) = r else {
        panic!("{r:?}")
    };
    (
        a.error_code,
        a.error_message.map(|m| m.to_string()),
        a.auth_bytes,
    )
}

/// Metadata (v12) of every topic.
pub fn metadata(c: &mut Conn) -> ResponseKind {
    c.call(
        ApiKey::Metadata,
        12,
        RequestKind::Metadata(MetadataRequest::default()),
    )
}

/// A `GroupId` from a `&str`.
pub fn group(g: &str) -> kafka_protocol::messages::GroupId {
    kafka_protocol::messages::GroupId(StrBytes::from_string(g.to_string()))
}

/// OffsetCommit at `version` of (topic, partition, offset, metadata) each: the codes in order.
pub fn commit(
    c: &mut Conn,
    version: i16,
    g: &str,
    generation: i32,
    offsets: &[(&str, i32, i64, &str)],
) -> Vec<i16> {
    let r = commit_request(g, generation, offsets);
    let ResponseKind::OffsetCommit(resp) = c.call(ApiKey::OffsetCommit, version, r) else {
        panic!()
    };
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// An OffsetCommit of (topic, partition, offset, metadata) each, without a member.
pub fn commit_request(g: &str, generation: i32, offsets: &[(&str, i32, i64, &str)]) -> RequestKind {
    let mut r = kafka_protocol::messages::OffsetCommitRequest::default();
    r.group_id = group(g);
    r.generation_id_or_member_epoch = generation;
    r.member_id = StrBytes::from_static_str("");
    r.retention_time_ms = -1;
    for (topic, partition, offset, metadata) in offsets {
        let mut p =
            kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition::default(
            );
        p.partition_index = *partition;
        p.committed_offset = *offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = Some(StrBytes::from_string(metadata.to_string()));
        let mut t =
            kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic::default();
        t.name = name(topic);
        t.partitions.push(p);
        r.topics.push(t);
    }
    RequestKind::OffsetCommit(r)
}

/// OffsetFetch (v7) of `topic` partitions 0..n of one group: (offset, metadata, code) each.
pub fn fetch_offsets(c: &mut Conn, g: &str, topic: &str, n: i32) -> Vec<(i64, String, i16)> {
    let mut t = kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default();
    t.name = name(topic);
    t.partition_indexes = (0..n).collect();
    let mut r = kafka_protocol::messages::OffsetFetchRequest::default();
    r.group_id = group(g);
    r.topics = Some(vec![t]);
    let ResponseKind::OffsetFetch(resp) =
        c.call(ApiKey::OffsetFetch, 7, RequestKind::OffsetFetch(r))
    else {
        panic!()
    };
    assert_eq!(resp.error_code, 0);
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.committed_offset,
                p.metadata
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
                p.error_code,
            )
        })
        .collect()
}

/// One config as DescribeConfigs (v4, with documentation) describes it.
#[derive(Debug, Clone)]
pub struct DescribedConfig {
    pub name: String,
    pub value: Option<String>,
    /// Kafka's `ConfigSource` code.
    pub source: i8,
    pub read_only: bool,
    /// What the broker says of it (whether it is in effect, and why not).
    pub documentation: String,
}

/// DescribeConfigs (v4, with documentation) of every config of one resource (`resource_type`:
/// 2 a topic, 4 a broker); its error code must be 0.
pub fn describe_configs(c: &mut Conn, resource_type: i8, name: &str) -> Vec<DescribedConfig> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    let mut res = DescribeConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = StrBytes::from_string(name.to_string());
    res.configuration_keys = None; // every config
    let mut r = DescribeConfigsRequest::default();
    r.resources.push(res);
    r.include_documentation = true;
    let ResponseKind::DescribeConfigs(resp) =
        c.call(ApiKey::DescribeConfigs, 4, RequestKind::DescribeConfigs(r))
    else {
        panic!("not a DescribeConfigs answer")
    };
    let out = &resp.results[0];
    assert_eq!(out.error_code, 0, "{:?}", out.error_message);
    out.configs
        .iter()
        .map(|x| DescribedConfig {
            name: x.name.to_string(),
            value: x.value.as_ref().map(ToString::to_string),
            source: x.config_source,
            read_only: x.read_only,
            documentation: x
                .documentation
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
        })
        .collect()
}
