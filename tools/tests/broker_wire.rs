//! The broker on the wire, with hand-made requests (the `kafka-protocol` crate encodes them):
//! - bad input: an ApiVersions at an unknown version gets `UNSUPPORTED_VERSION` with the list;
//!   unknown API keys, unsupported versions, oversize and negative frame sizes, truncated and
//!   mutated frames, and a count claiming 2^31 elements close the connection, and the broker goes
//!   on serving (a seeded fuzz loop of mutated valid frames, replayable by `MIRRORLOG_SEED`);
//! - Kafka's error codes for the engine's refusals: unknown topic (3), CRC mismatch (2), a
//!   sequence gap (45), an older producer epoch (47), a read-only (mirroring) partition (44), a
//!   batch over `max.message.bytes` (10), bad `acks` (21); a retried batch is answered with its
//!   first offset and stored once;
//! - Fetch long-poll: answered as soon as a produce lands, or after `max_wait_ms` with nothing;
//! - producer ids are never handed out twice, across a clean restart and a SIGKILL;
//! - a failed `acks=0` produce closes the connection;
//! - Fetch, ListOffsets and OffsetForLeaderEpoch check `current_leader_epoch` as Kafka does;
//! - a fenced transactional producer gets the code its request version knows (47 or 90).

mod broker_support;

use broker_support::{BrokerProc, Conn};
use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, ApiVersionsRequest, BrokerId, CreateTopicsRequest,
    EndTxnRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, ProducerId, RequestKind, ResponseKind, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::{BatchBuilder, BatchOptions, Offset, ProducerFields, RecordSpec};
use std::time::{Duration, Instant};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn create_topic(c: &mut Conn, topic: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    for (k, v) in configs {
        let mut c = CreatableTopicConfig::default();
        c.name = StrBytes::from_string(k.to_string());
        c.value = Some(StrBytes::from_string(v.to_string()));
        t.configs.push(c);
    }
    let mut r = CreateTopicsRequest::default();
    r.topics.push(t);
    r.timeout_ms = 30_000;
    let ResponseKind::CreateTopics(resp) =
        c.call(ApiKey::CreateTopics, 7, RequestKind::CreateTopics(r))
    else {
        panic!("not a CreateTopics answer")
    };
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

fn batch(producer: ProducerFields, values: &[&[u8]]) -> Vec<u8> {
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

/// A Produce of `records` to `topic`-0 with `acks`.
fn produce_request(topic: &str, records: Vec<u8>, acks: i16) -> RequestKind {
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
fn produce(c: &mut Conn, topic: &str, records: Vec<u8>, acks: i16) -> (i16, i64) {
    let ResponseKind::Produce(resp) =
        c.call(ApiKey::Produce, 9, produce_request(topic, records, acks))
    else {
        panic!("not a Produce answer")
    };
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

fn fetch(c: &mut Conn, topic: &str, offset: i64, max_wait_ms: i32) -> (i16, i64, Bytes) {
    fetch_at_epoch(c, topic, offset, max_wait_ms, -1)
}

/// A fetch of `topic`-0 naming `current_leader_epoch` (-1: none).
fn fetch_at_epoch(
    c: &mut Conn,
    topic: &str,
    offset: i64,
    max_wait_ms: i32,
    current_leader_epoch: i32,
) -> (i16, i64, Bytes) {
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
    let ResponseKind::Fetch(resp) = c.call(ApiKey::Fetch, 11, RequestKind::Fetch(r)) else {
        panic!("not a Fetch answer")
    };
    let p = &resp.responses[0].partitions[0];
    (
        p.error_code,
        p.high_watermark,
        p.records.clone().unwrap_or_default(),
    )
}

fn init_producer_id(c: &mut Conn) -> (i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = None;
    r.transaction_timeout_ms = 60_000;
    let ResponseKind::InitProducerId(resp) =
        c.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(r))
    else {
        panic!("not an InitProducerId answer")
    };
    assert_eq!(resp.error_code, 0);
    (resp.producer_id.0, resp.producer_epoch)
}

fn api_versions_ok(b: &BrokerProc) {
    let mut c = b.connect();
    let ResponseKind::ApiVersions(v) = c.call(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(ApiVersionsRequest::default()),
    ) else {
        panic!("not an ApiVersions answer")
    };
    assert_eq!(v.error_code, 0);
    assert!(v
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));
}

#[test]
fn bad_frames_close_the_connection_and_the_broker_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProc::start(dir.path(), &["--set", "socket.request.max.bytes=1048576"]);

    // ApiVersions at a version we do not speak: UNSUPPORTED_VERSION (35) with our list, at v0.
    let mut c = b.connect();
    let mut f = c.frame(
        ApiKey::ApiVersions,
        3,
        &RequestKind::ApiVersions(ApiVersionsRequest::default()),
    );
    f[6..8].copy_from_slice(&99i16.to_be_bytes());
    c.send_raw(&f).unwrap();
    let frame = c.read_frame().unwrap();
    assert_eq!(
        &frame[4..6],
        &35i16.to_be_bytes(),
        "error code UNSUPPORTED_VERSION"
    );
    api_versions_ok(&b);

    let metadata = |c: &mut Conn| {
        c.frame(
            ApiKey::Metadata,
            9,
            &RequestKind::Metadata(MetadataRequest::default()),
        )
    };
    // An unknown API key; an unsupported Metadata version; sizes over the limit and negative.
    let mut bad: Vec<Vec<u8>> = Vec::new();
    let mut f = metadata(&mut c);
    f[4..6].copy_from_slice(&999i16.to_be_bytes());
    bad.push(f);
    let mut f = metadata(&mut c);
    f[6..8].copy_from_slice(&50i16.to_be_bytes());
    bad.push(f);
    bad.push((2i32 << 20).to_be_bytes().to_vec());
    bad.push((-5i32).to_be_bytes().to_vec());
    // Too short for a header.
    bad.push([0, 0, 0, 3, 0, 3, 0].to_vec());
    // Metadata v9 whose topic array claims 2^31 - 1 entries (compact: varint 2^31) of 72
    // bytes each: 154 GB, which the system allocator refuses and Rust aborts on; the broker's
    // allocator reserves it as address space and the decode fails at the frame's end.
    let mut f = metadata(&mut c);
    let mut body = bytes::BytesMut::new();
    kafka_protocol::protocol::Encodable::encode(&MetadataRequest::default(), &mut body, 9).unwrap();
    f.truncate(f.len() - body.len());
    f.extend([0x80, 0x80, 0x80, 0x80, 0x08, 0, 0, 0]);
    let n = i32::try_from(f.len() - 4).unwrap();
    f[..4].copy_from_slice(&n.to_be_bytes());
    bad.push(f);
    for (i, frame) in bad.iter().enumerate() {
        let mut c = b.connect();
        c.send_raw(frame).unwrap();
        assert!(c.closed(), "bad frame {i} did not close the connection");
        api_versions_ok(&b);
    }
    // Every truncation of a valid Produce closes (the size prefix says more than comes, then EOF)
    // or is refused; the broker stays up.
    let mut c = b.connect();
    create_topic(&mut c, "w", 1, &[]);
    let produce = produce_request("w", batch(ProducerFields::NONE, &[b"x"]), -1);
    let valid = c.frame(ApiKey::Produce, 9, &produce);
    for cut in (4..valid.len()).step_by(7) {
        let mut f = valid[..cut].to_vec();
        let n = i32::try_from(cut - 4).unwrap();
        f[..4].copy_from_slice(&n.to_be_bytes());
        let mut c = b.connect();
        c.send_raw(&f).unwrap();
        assert!(c.closed(), "a Produce cut at {cut} was answered");
    }
    api_versions_ok(&b);
    assert!(b.running());
    assert!(b.terminate().success());
}

#[test]
fn fuzzed_frames_never_take_the_broker_down() {
    let seed = std::env::var("MIRRORLOG_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!(
        "fuzzed_frames_never_take_the_broker_down: seed {seed} (replay with MIRRORLOG_SEED={seed})"
    );
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let dir = tempfile::tempdir().unwrap();
    let mut b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "f", 1, &[]);
    let mut seeds: Vec<Vec<u8>> = Vec::new();
    let mut r = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name("f"));
    r.topics = Some(vec![t]);
    for v in [1, 4, 9, 12] {
        seeds.push(c.frame(ApiKey::Metadata, v, &RequestKind::Metadata(r.clone())));
    }
    let produce = produce_request("f", batch(ProducerFields::NONE, &[b"fuzz", b"me"]), 1);
    for v in [3, 8, 9, 12] {
        seeds.push(c.frame(ApiKey::Produce, v, &produce));
    }
    let mut fp = FetchPartition::default();
    fp.partition_max_bytes = 1000;
    let mut ft = FetchTopic::default();
    ft.topic = name("f");
    ft.partitions.push(fp);
    let mut fr = FetchRequest::default();
    fr.replica_id = BrokerId(-1);
    fr.topics.push(ft);
    for v in [4, 11, 12] {
        seeds.push(c.frame(ApiKey::Fetch, v, &RequestKind::Fetch(fr.clone())));
    }
    let mut answered = 0;
    for i in 0..600 {
        let mut f = seeds[(next() as usize) % seeds.len()].clone();
        let flips = 1 + next() % 6;
        for _ in 0..flips {
            let at = 4 + (next() as usize) % (f.len() - 4);
            match next() % 3 {
                0 => f[at] = next() as u8,
                1 => f[at] ^= 1 << (next() % 8),
                _ => f[at] = [0x00, 0x7f, 0x80, 0xff][(next() % 4) as usize],
            }
        }
        let mut conn = b.connect();
        conn.stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        conn.send_raw(&f).unwrap();
        // Either an answer or a closed connection; both are fine, a hang or a crash is not.
        let mut size = [0u8; 4];
        if std::io::Read::read_exact(&mut conn.stream, &mut size).is_ok() {
            answered += 1;
        }
        if i % 50 == 0 {
            assert!(b.running(), "the broker died at frame {i} (seed {seed})");
            api_versions_ok(&b);
        }
    }
    assert!(b.running(), "seed {seed}");
    api_versions_ok(&b);
    eprintln!("{answered} of 600 mutated frames answered, the rest closed");
    assert!(b.terminate().success());
}

/// A Produce frame with `acks=0` (no answer comes).
fn produce_silently(c: &mut Conn, topic: &str, records: Vec<u8>) {
    let f = c.frame(ApiKey::Produce, 9, &produce_request(topic, records, 0));
    c.send_raw(&f).unwrap();
}

#[test]
fn a_failed_acks_0_produce_closes_the_connection_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "z", 1, &[]);
    // A good one: no answer, the connection stays, and the next request on it (answered in
    // order, after the append resolved) sees the record.
    produce_silently(&mut c, "z", batch(ProducerFields::NONE, &[b"a", b"b"]));
    let (code, high_watermark, records) = fetch(&mut c, "z", 0, 0);
    assert_eq!((code, high_watermark), (0, 2));
    assert!(!records.is_empty());
    // One the handler refuses (an unknown topic): closed, the client's only way to learn.
    produce_silently(&mut c, "nope", batch(ProducerFields::NONE, &[b"x"]));
    assert!(
        c.closed(),
        "an acks=0 produce to an unknown topic left the connection open"
    );
    // One the engine refuses (a corrupt batch): closed too, and nothing was stored.
    let mut c = b.connect();
    let mut bad = batch(ProducerFields::NONE, &[b"x"]);
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    produce_silently(&mut c, "z", bad);
    assert!(
        c.closed(),
        "a corrupt acks=0 produce left the connection open"
    );
    let mut c = b.connect();
    assert_eq!(fetch(&mut c, "z", 0, 0).1, 2);
    api_versions_ok(&b);
}

/// `topic`-0's leader epoch as Metadata reports it.
fn metadata_epoch(c: &mut Conn, topic: &str) -> i32 {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    let ResponseKind::Metadata(m) = c.call(ApiKey::Metadata, 9, RequestKind::Metadata(r)) else {
        panic!("not a Metadata answer")
    };
    m.topics[0].partitions[0].leader_epoch
}

/// ListOffsets (latest) of `topic`-0 naming `current_leader_epoch`: its error code.
fn list_offsets_at_epoch(c: &mut Conn, topic: &str, current_leader_epoch: i32) -> i16 {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.current_leader_epoch = current_leader_epoch;
    p.timestamp = -1;
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions.push(p);
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics.push(t);
    let ResponseKind::ListOffsets(resp) =
        c.call(ApiKey::ListOffsets, 7, RequestKind::ListOffsets(r))
    else {
        panic!("not a ListOffsets answer")
    };
    resp.topics[0].partitions[0].error_code
}

/// OffsetForLeaderEpoch of `topic`-0's epoch `epoch` naming `current_leader_epoch`: its
/// error code.
fn epoch_end_at_epoch(c: &mut Conn, topic: &str, epoch: i32, current_leader_epoch: i32) -> i16 {
    let mut p = OffsetForLeaderPartition::default();
    p.partition = 0;
    p.current_leader_epoch = current_leader_epoch;
    p.leader_epoch = epoch;
    let mut t = OffsetForLeaderTopic::default();
    t.topic = name(topic);
    t.partitions.push(p);
    let mut r = OffsetForLeaderEpochRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics.push(t);
    let ResponseKind::OffsetForLeaderEpoch(resp) = c.call(
        ApiKey::OffsetForLeaderEpoch,
        4,
        RequestKind::OffsetForLeaderEpoch(r),
    ) else {
        panic!("not an OffsetForLeaderEpoch answer")
    };
    resp.topics[0].partitions[0].error_code
}

#[test]
fn a_stale_or_future_current_leader_epoch_gets_kafkas_epoch_errors() {
    let (src_dir, dst_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let src = BrokerProc::start(src_dir.path(), &[]);
    let dst = BrokerProc::start(dst_dir.path(), &[]);
    let mut s = src.connect();
    create_topic(&mut s, "ep", 1, &[]);
    assert_eq!(
        produce(&mut s, "ep", batch(ProducerFields::NONE, &[b"a"]), -1),
        (0, 0)
    );
    let mirror = format!(
        r#"{{"name":"src","bootstrap":"{}","topics":["ep"]}}"#,
        src.kafka
    );
    assert!(http_post(&dst.admin, "/mirrors", &mirror).starts_with("HTTP/1.1 200"));
    let mut d = dst.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fetch(&mut d, "ep", 0, 100).1 != 1 {
        assert!(Instant::now() < deadline, "the mirror did not catch up");
    }
    let before = metadata_epoch(&mut d, "ep");
    // Failover bumps the epoch: a client that read the metadata before it is behind.
    let stop = http_post(&dst.admin, "/mirrors/src/stop", "");
    assert!(stop.starts_with("HTTP/1.1 200"), "{stop}");
    let epoch = metadata_epoch(&mut d, "ep");
    assert!(
        epoch > before,
        "{epoch} after the failover, {before} before"
    );
    const FENCED_LEADER_EPOCH: i16 = 74;
    const UNKNOWN_LEADER_EPOCH: i16 = 75;
    for (asked, code) in [
        (before, FENCED_LEADER_EPOCH),
        (epoch, 0),
        (epoch + 1, UNKNOWN_LEADER_EPOCH),
        (-1, 0),
    ] {
        assert_eq!(
            fetch_at_epoch(&mut d, "ep", 0, 0, asked).0,
            code,
            "Fetch at {asked}"
        );
        assert_eq!(
            list_offsets_at_epoch(&mut d, "ep", asked),
            code,
            "ListOffsets at {asked}"
        );
        assert_eq!(
            epoch_end_at_epoch(&mut d, "ep", before, asked),
            code,
            "OffsetForLeaderEpoch at {asked}"
        );
    }
    // The source never failed over: its epoch is where it was, and it is served there.
    assert_eq!(metadata_epoch(&mut s, "ep"), before);
    assert_eq!(fetch_at_epoch(&mut s, "ep", 0, 0, before).0, 0);
}

#[test]
fn engine_refusals_get_kafkas_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "e", 1, &[("max.message.bytes", "2000")]);

    // Unknown topic, for Produce and Fetch.
    assert_eq!(
        produce(&mut c, "nope", batch(ProducerFields::NONE, &[b"x"]), -1).0,
        3
    );
    // A partition error answers a waiting fetch at once, as Kafka does.
    let asked = Instant::now();
    assert_eq!(fetch(&mut c, "nope", 0, 5_000).0, 3);
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    // Bad acks.
    assert_eq!(
        produce(&mut c, "e", batch(ProducerFields::NONE, &[b"x"]), 5).0,
        21
    );
    // A CRC mismatch.
    let mut corrupt = batch(ProducerFields::NONE, &[b"x"]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(produce(&mut c, "e", corrupt, -1).0, 2);
    // Over max.message.bytes.
    let big = vec![7u8; 4000];
    assert_eq!(
        produce(&mut c, "e", batch(ProducerFields::NONE, &[&big]), -1).0,
        10
    );

    // An idempotent producer: a retry is answered with the first offset and stored once; a
    // sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch INVALID_PRODUCER_EPOCH.
    let (pid, epoch) = init_producer_id(&mut c);
    let fields = |epoch: i16, seq: i32| ProducerFields {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
    };
    assert_eq!(
        produce(&mut c, "e", batch(fields(epoch, 0), &[b"a", b"b"]), -1),
        (0, 0)
    );
    assert_eq!(
        produce(&mut c, "e", batch(fields(epoch, 2), &[b"c"]), -1),
        (0, 2)
    );
    assert_eq!(
        produce(&mut c, "e", batch(fields(epoch, 2), &[b"c"]), -1),
        (0, 2),
        "retry"
    );
    assert_eq!(
        produce(&mut c, "e", batch(fields(epoch, 9), &[b"d"]), -1).0,
        45
    );
    assert_eq!(
        produce(&mut c, "e", batch(fields(epoch + 1, 0), &[b"e"]), -1),
        (0, 3)
    );
    assert_eq!(
        produce(&mut c, "e", batch(fields(epoch, 3), &[b"f"]), -1).0,
        47
    );
    let (err, hw, records) = fetch(&mut c, "e", 0, 0);
    assert_eq!((err, hw), (0, 4));
    let count = mirrorlog::format::BatchIter::new(&records, 0).count();
    assert_eq!(count, 3, "the retry was stored once");

    // A partition that mirrors is read-only to clients: POLICY_VIOLATION.
    let src_dir = tempfile::tempdir().unwrap();
    let src = BrokerProc::start(src_dir.path(), &[]);
    create_topic(&mut src.connect(), "m", 1, &[]);
    let body = format!(
        r#"{{"name":"src","bootstrap":"{}","topics":["m"]}}"#,
        src.kafka
    );
    let answer = http_post(&b.admin, "/mirrors", &body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        produce(&mut c, "m", batch(ProducerFields::NONE, &[b"x"]), -1).0,
        44
    );
    drop(src);
}

fn http_post(addr: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_fetch_at_the_end_waits_for_the_next_produce_or_its_max_wait() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "lp", 1, &[]);
    let started = Instant::now();
    let (err, _, records) = fetch(&mut c, "lp", 0, 700);
    let waited = started.elapsed();
    assert_eq!(err, 0);
    assert!(records.is_empty());
    assert!(
        waited >= Duration::from_millis(690),
        "answered after {waited:?}, before max_wait"
    );
    let addr = b.kafka.clone();
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut c = Conn::new(&addr);
        produce(&mut c, "lp", batch(ProducerFields::NONE, &[b"wake"]), -1)
    });
    let started = Instant::now();
    let (err, hw, records) = fetch(&mut c, "lp", 0, 10_000);
    let waited = started.elapsed();
    assert_eq!((err, hw), (0, 1));
    assert!(!records.is_empty());
    assert!(
        waited < Duration::from_secs(5),
        "the produce did not wake the fetch: {waited:?}"
    );
    assert_eq!(producer.join().unwrap(), (0, 0));
}

#[test]
fn producer_ids_are_never_reused_across_restarts_and_kills() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = std::collections::HashSet::new();
    let b = BrokerProc::start(dir.path(), &[]);
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    for _ in 0..3 {
        assert!(seen.insert(init_producer_id(&mut b.connect()).0));
    }
    assert!(b.terminate().success());
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    for _ in 0..3 {
        assert!(seen.insert(init_producer_id(&mut b.connect()).0));
    }
    b.kill();
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    for _ in 0..3 {
        assert!(
            seen.insert(init_producer_id(&mut b.connect()).0),
            "{seen:?}"
        );
    }
    assert!(b.terminate().success());
}

fn txn_init(c: &mut Conn, id: &str, version: i16, expected: Option<(i64, i16)>) -> (i16, i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(TransactionalId(StrBytes::from_string(id.to_string())));
    r.transaction_timeout_ms = 60_000;
    let (pid, epoch) = expected.unwrap_or((-1, -1));
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    let ResponseKind::InitProducerId(resp) = c.call(
        ApiKey::InitProducerId,
        version,
        RequestKind::InitProducerId(r),
    ) else {
        panic!("not an InitProducerId answer")
    };
    (resp.error_code, resp.producer_id.0, resp.producer_epoch)
}

fn add_partition(
    c: &mut Conn,
    id: &str,
    topic: &str,
    (pid, epoch): (i64, i16),
    version: i16,
) -> i16 {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = name(topic);
    t.partitions = vec![0];
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    r.v3_and_below_producer_id = ProducerId(pid);
    r.v3_and_below_producer_epoch = epoch;
    r.v3_and_below_topics = vec![t];
    let ResponseKind::AddPartitionsToTxn(resp) = c.call(
        ApiKey::AddPartitionsToTxn,
        version,
        RequestKind::AddPartitionsToTxn(r),
    ) else {
        panic!("not an AddPartitionsToTxn answer")
    };
    resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

fn end_txn(c: &mut Conn, id: &str, (pid, epoch): (i64, i16), version: i16) -> i16 {
    let mut r = EndTxnRequest::default();
    r.transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    r.committed = true;
    let ResponseKind::EndTxn(resp) = c.call(ApiKey::EndTxn, version, RequestKind::EndTxn(r)) else {
        panic!("not an EndTxn answer")
    };
    resp.error_code
}

#[test]
fn a_fenced_producer_gets_the_code_its_request_version_knows() {
    // Kafka's KafkaApis: PRODUCER_FENCED (90) exists from InitProducerId v4 and from
    // AddPartitionsToTxn and EndTxn v2 on; older versions get INVALID_PRODUCER_EPOCH (47),
    // which a client speaking only them understands (see the *Response classes' notes).
    const FENCED: i16 = 90;
    const INVALID_EPOCH: i16 = 47;
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "t", 1, &[]);
    let (code, pid, old_epoch) = txn_init(&mut c, "app", 0, None);
    assert_eq!(code, 0);
    let old = (pid, old_epoch);
    assert_eq!(add_partition(&mut c, "app", "t", old, 0), 0);
    // A second producer takes the transactional id over: the first one's epoch is fenced.
    let (code, _, new_epoch) = txn_init(&mut c, "app", 0, None);
    assert_eq!(code, 0);
    assert!(new_epoch > old_epoch);
    for (version, want) in [
        (0, INVALID_EPOCH),
        (1, INVALID_EPOCH),
        (2, FENCED),
        (3, FENCED),
    ] {
        assert_eq!(
            add_partition(&mut c, "app", "t", old, version),
            want,
            "AddPartitionsToTxn v{version}"
        );
        assert_eq!(
            end_txn(&mut c, "app", old, version),
            want,
            "EndTxn v{version}"
        );
    }
    // InitProducerId names the producer it expects from v3 on.
    for (version, want) in [(3, INVALID_EPOCH), (4, FENCED)] {
        assert_eq!(
            txn_init(&mut c, "app", version, Some(old)).0,
            want,
            "InitProducerId v{version}"
        );
    }
}

fn create_topic_code(
    c: &mut Conn,
    topic: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> i16 {
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = 2;
    t.replication_factor = 1;
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
    resp.topics[0].error_code
}

#[test]
fn settings_the_engine_refuses_are_refused_before_anything_is_written() {
    // `segment.bytes=2048` parses, but the engine's bound is 64 KiB: it used to leave a
    // durable half-created topic that start-up repair then failed on (issue 36). Kafka's
    // INVALID_CONFIG (40), nothing written, and validate_only answers the same.
    const INVALID_CONFIG: i16 = 40;
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    let bad: &[(&str, &str)] = &[("segment.bytes", "2048")];
    assert_eq!(create_topic_code(&mut c, "half", bad, true), INVALID_CONFIG);
    assert_eq!(
        create_topic_code(&mut c, "half", bad, false),
        INVALID_CONFIG
    );
    assert_eq!(
        create_topic_code(&mut c, "half", &[], true),
        0,
        "validate_only, good settings"
    );
    assert_eq!(
        metadata_topic_code(&mut c, "half"),
        3,
        "validate_only created nothing"
    );
    drop(c);
    assert!(b.terminate().success());
    // The broker starts again on the same directory, and the name is free.
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    assert_eq!(create_topic_code(&mut c, "half", &[], false), 0);
    assert_eq!(metadata_topic_code(&mut c, "half"), 0);
}

fn metadata_topic_code(c: &mut Conn, topic: &str) -> i16 {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    r.allow_auto_topic_creation = false;
    let ResponseKind::Metadata(resp) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(r))
    else {
        panic!("not a Metadata answer")
    };
    resp.topics[0].error_code
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_dead_shard_fails_health_and_the_broker_exits_non_zero() {
    // Supervision (issue 36): a shard thread that stops (the test hook stops it as a fatal
    // ring failure would) makes /health answer 503 within a second, and the process exits
    // non-zero instead of serving half its partitions. The test hook is served only with
    // MIRRORLOG_BROKER_TEST_HOOKS=1.
    let dir = tempfile::tempdir().unwrap();
    let plain = BrokerProc::start(dir.path(), &["--shards", "2"]);
    assert!(http_post(&plain.admin, "/test-hooks/halt-shard/0", "").starts_with("HTTP/1.1 404"));
    assert!(plain.terminate().success());
    let mut b = BrokerProc::start_with_env(
        dir.path(),
        "127.0.0.1:0",
        "127.0.0.1:0",
        &["--shards", "2"],
        &[("MIRRORLOG_BROKER_TEST_HOOKS", "1")],
    );
    assert!(http_get(&b.admin, "/health").starts_with("HTTP/1.1 200"));
    let halted = http_post(&b.admin, "/test-hooks/halt-shard/0", "");
    assert!(halted.starts_with("HTTP/1.1 200"), "{halted}");
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        // The process may already be exiting: a refused connection counts as failed health.
        let health = std::net::TcpStream::connect(&b.admin)
            .ok()
            .map(|_| http_get(&b.admin, "/health"));
        if health
            .as_deref()
            .is_none_or(|h| h.starts_with("HTTP/1.1 503"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "health still ok: {health:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.running() {
        assert!(Instant::now() < deadline, "the broker did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = b.child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
}

#[test]
fn a_fetch_asking_for_a_gibibyte_gets_at_most_fetch_max_bytes() {
    // Kafka's ReplicaManager.readFromLog: the answer's limit is the smaller of the request's
    // max_bytes and the broker's fetch.max.bytes, applied while reading (each partition reads
    // at most what is left; only the first batch may pass it). Issue 36.
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "fetch.max.bytes=65536"]);
    let mut c = b.connect();
    create_topic(&mut c, "big", 1, &[]);
    let value = vec![7u8; 4000];
    let one = batch(ProducerFields::NONE, &[&value, &value]);
    for _ in 0..40 {
        assert_eq!(produce(&mut c, "big", one.clone(), -1).0, 0);
    }
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.fetch_offset = 0;
    fp.partition_max_bytes = i32::MAX;
    let mut t = FetchTopic::default();
    t.topic = name("big");
    t.partitions.push(fp);
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = 0;
    r.min_bytes = 1;
    r.max_bytes = 1 << 30;
    r.topics.push(t);
    let ResponseKind::Fetch(resp) = c.call(ApiKey::Fetch, 11, RequestKind::Fetch(r)) else {
        panic!("not a Fetch answer")
    };
    let p = &resp.responses[0].partitions[0];
    let got = p.records.clone().unwrap_or_default();
    assert_eq!(p.error_code, 0);
    assert!(
        got.len() <= 65536 && got.len() > 65536 - one.len(),
        "{} bytes of {} stored",
        got.len(),
        40 * one.len()
    );
}

fn add_partitions(
    c: &mut Conn,
    id: &str,
    parts: &[&str],
    (pid, epoch): (i64, i16),
) -> Vec<(String, i16)> {
    use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(StrBytes::from_string(id.to_string()));
    r.v3_and_below_producer_id = ProducerId(pid);
    r.v3_and_below_producer_epoch = epoch;
    for topic in parts {
        let mut t = AddPartitionsToTxnTopic::default();
        t.name = name(topic);
        t.partitions = vec![0];
        r.v3_and_below_topics.push(t);
    }
    let ResponseKind::AddPartitionsToTxn(resp) = c.call(
        ApiKey::AddPartitionsToTxn,
        3,
        RequestKind::AddPartitionsToTxn(r),
    ) else {
        panic!("not an AddPartitionsToTxn answer")
    };
    resp.results_by_topic_v3_and_below
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.results_by_partition[0].partition_error_code,
            )
        })
        .collect()
}

#[test]
fn a_transaction_naming_a_mirroring_partition_is_refused_at_add_partitions() {
    // A mirroring partition takes no local writes, markers included: adding it to a
    // transaction used to succeed and leave the coordinator in Prepare* at EndTxn (issue 36).
    // It gets the code its Produce gets (POLICY_VIOLATION, 44), and, as Kafka does when one
    // partition is refused, the others OPERATION_NOT_ATTEMPTED (55); after the failover it can
    // be added.
    let (src_dir, dst_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let src = BrokerProc::start(src_dir.path(), &[]);
    let dst = BrokerProc::start(dst_dir.path(), &[]);
    let mut s = src.connect();
    create_topic(&mut s, "m", 1, &[]);
    assert_eq!(
        produce(&mut s, "m", batch(ProducerFields::NONE, &[b"a"]), -1),
        (0, 0)
    );
    let mirror = format!(
        r#"{{"name":"src","bootstrap":"{}","topics":["m"]}}"#,
        src.kafka
    );
    assert!(http_post(&dst.admin, "/mirrors", &mirror).starts_with("HTTP/1.1 200"));
    let mut d = dst.connect();
    create_topic(&mut d, "local", 1, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while fetch(&mut d, "m", 0, 100).1 != 1 {
        assert!(Instant::now() < deadline, "the mirror did not catch up");
    }
    let (code, pid, epoch) = txn_init(&mut d, "t1", 3, None);
    assert_eq!(code, 0);
    let got = add_partitions(&mut d, "t1", &["local", "m"], (pid, epoch));
    assert_eq!(got, vec![("local".to_string(), 55), ("m".to_string(), 44)]);
    let stop = http_post(&dst.admin, "/mirrors/src/stop", "");
    assert!(stop.starts_with("HTTP/1.1 200"), "{stop}");
    let got = add_partitions(&mut d, "t1", &["local", "m"], (pid, epoch));
    assert_eq!(got, vec![("local".to_string(), 0), ("m".to_string(), 0)]);
    assert_eq!(end_txn(&mut d, "t1", (pid, epoch), 3), 0);
}
