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
//! - a Fetch asking for more than `fetch.max.bytes` gets at most that.
//!
//! Transactions on the wire are in `broker_txn.rs`, topic validation and supervision in
//! `broker_admin.rs`; the request helpers in `broker_support/requests.rs`.

mod broker_support;

use broker_support::requests::{
    batch, create_topic, fetch, fetch_at_epoch, http_post, mirrored, name, produce,
    produce_request, Mirrored,
};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, FetchRequest, InitProducerIdRequest, ListOffsetsRequest,
    MetadataRequest, OffsetForLeaderEpochRequest, RequestKind, ResponseKind,
};
use mirrorlog::format::ProducerFields;
use std::time::{Duration, Instant};

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
    let Mirrored { src, dst, .. } = &mirrored("ep");
    let (mut s, mut d) = (src.connect(), dst.connect());
    let before = metadata_epoch(&mut d, "ep");
    // Failover bumps the epoch: a client that read the metadata before it is behind.
    let stop = http_post(dst, "/mirrors/src/stop", "");
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
    let answer = http_post(&b, "/mirrors", &body);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        produce(&mut c, "m", batch(ProducerFields::NONE, &[b"x"]), -1).0,
        44
    );
    drop(src);
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

#[test]
fn a_wide_fetch_keeps_kafkas_limits_in_partition_order() {
    // Kafka's readFromLog, partition by partition in the request's order: the first partition
    // with data gets its first batch whole past its partition_max_bytes (minOneMessage), the
    // rest at most their own limit and what is left of max_bytes, a first batch larger than
    // that nothing. The broker reads the partitions at once and reads again in order from the
    // first whose answer the limits would have cut: the answer is the same.
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    let big = vec![1u8; 8000];
    let small = vec![2u8; 3000];
    let sizes: [&[&[u8]]; 4] = [&[], &[&big], &[&small, &small, &small], &[&big]];
    let mut batches = Vec::new();
    for (i, values) in sizes.iter().enumerate() {
        let topic = format!("limits{i}");
        create_topic(&mut c, &topic, 1, &[]);
        let mut stored = Vec::new();
        for v in values.iter() {
            let one = batch(ProducerFields::NONE, &[v]);
            assert_eq!(produce(&mut c, &topic, one.clone(), -1).0, 0);
            stored.push(one.len());
        }
        batches.push(stored);
    }
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = 0;
    r.min_bytes = 1;
    r.max_bytes = 12_000;
    for i in 0..4 {
        let mut fp = FetchPartition::default();
        fp.partition = 0;
        fp.fetch_offset = 0;
        fp.partition_max_bytes = 4_000;
        let mut t = FetchTopic::default();
        t.topic = name(&format!("limits{i}"));
        t.partitions.push(fp);
        r.topics.push(t);
    }
    let ResponseKind::Fetch(resp) = c.call(ApiKey::Fetch, 11, RequestKind::Fetch(r)) else {
        panic!("not a Fetch answer")
    };
    let got: Vec<(i16, i64, usize)> = resp
        .responses
        .iter()
        .map(|t| {
            let p = &t.partitions[0];
            let n = p.records.as_ref().map_or(0, |r| r.len());
            (p.error_code, p.high_watermark, n)
        })
        .collect();
    assert_eq!(
        got,
        [
            (0, 0, 0),
            // The first with data: its 8 KB batch whole, past its 4,000.
            (0, 1, batches[1][0]),
            // 4,000 of its own and of what is left: one 3 KB batch.
            (0, 3, batches[2][0]),
            // What is left (about 1 KB) holds no batch of 8 KB.
            (0, 1, 0),
        ]
    );
    assert!(b.terminate().success());
}

#[test]
fn a_fetch_asking_for_a_gibibyte_gets_at_most_fetch_max_bytes() {
    // Kafka's ReplicaManager.readFromLog: the answer's limit is the smaller of the request's
    // max_bytes and the broker's fetch.max.bytes, applied while reading (each partition reads
    // at most what is left; only the first batch may pass it).
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
