//! Incremental fetch sessions (KIP-227) on the wire, against Kafka's rules
//! (`FetchSession.scala`, `FetchSessionCache`):
//! - a full fetch (epoch 0) opens a session and answers every partition; an incremental one
//!   (the session's next epoch) sends only what changed and hears only about partitions with
//!   records, a moved high watermark or an error;
//! - a partition added by an incremental fetch is answered; forgetting every partition closes
//!   the session (answered sessionless);
//! - a stale epoch gets `INVALID_FETCH_SESSION_EPOCH` (71) and an unknown session
//!   `FETCH_SESSION_ID_NOT_FOUND` (70), each alone, with no partitions and no session;
//! - epoch -1 closes the session it names and is answered sessionless; a client that never
//!   asks for a session (Fetch v6, or epoch -1) is served as before;
//! - a full cache (`max.incremental.fetch.session.cache.slots`) answers a new fetcher
//!   sessionless, with every partition, rather than evicting a session created moments ago;
//! - our own mirror fetcher talks sessions to the broker it mirrors: one session, every fetch
//!   after the first incremental, no session error (`GET /fetch-sessions` on the source), the
//!   records mirrored byte for byte. kafka-python's consumer, which uses sessions by default,
//!   is checked in `testdata/interop/broker/clients.py`.

mod broker_support;

use broker_support::requests::{batch, create_topic, http_get, mirrored, name, Mirrored};
use broker_support::{BrokerProc, Conn};
use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, RequestKind, ResponseKind,
};
use mirrorlog::format::ProducerFields;
use std::time::{Duration, Instant};

const TOPIC: &str = "sessions";

fn produce_to(c: &mut Conn, partition: i32, value: &[u8]) {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(Bytes::from(batch(ProducerFields::NONE, &[value])));
    let mut t = TopicProduceData::default();
    t.name = name(TOPIC);
    t.partition_data.push(p);
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data.push(t);
    let ResponseKind::Produce(resp) = c.call(ApiKey::Produce, 9, RequestKind::Produce(r)) else {
        panic!("not a Produce answer")
    };
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
}

/// A Fetch at `version` with session metadata, the partitions given `(partition, offset)`,
/// and the partitions forgotten; answered at once.
fn fetch(
    c: &mut Conn,
    version: i16,
    session: (i32, i32),
    partitions: &[(i32, i64)],
    forgotten: &[i32],
) -> FetchResponse {
    let mut t = FetchTopic::default();
    t.topic = name(TOPIC);
    for &(p, offset) in partitions {
        let mut fp = FetchPartition::default();
        fp.partition = p;
        fp.fetch_offset = offset;
        fp.partition_max_bytes = 1 << 20;
        t.partitions.push(fp);
    }
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = 0;
    r.min_bytes = 1;
    r.max_bytes = 1 << 24;
    (r.session_id, r.session_epoch) = session;
    if !partitions.is_empty() {
        r.topics.push(t);
    }
    if !forgotten.is_empty() {
        let mut f = ForgottenTopic::default();
        f.topic = name(TOPIC);
        f.partitions = forgotten.to_vec();
        r.forgotten_topics_data.push(f);
    }
    let ResponseKind::Fetch(resp) = c.call(ApiKey::Fetch, version, RequestKind::Fetch(r)) else {
        panic!("not a Fetch answer")
    };
    resp
}

/// The answered partitions: `(partition, records bytes, high watermark)`.
fn answered(resp: &FetchResponse) -> Vec<(i32, usize, i64)> {
    resp.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| {
            (
                p.partition_index,
                p.records.as_ref().map_or(0, Bytes::len),
                p.high_watermark,
            )
        })
        .collect()
}

#[test]
fn an_incremental_session_sends_and_answers_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, TOPIC, 4, &[]);
    produce_to(&mut c, 0, b"zero");

    // Full fetch, epoch 0: a session, every partition answered.
    let full = fetch(&mut c, 12, (0, 0), &[(0, 0), (1, 0), (2, 0)], &[]);
    assert_eq!(full.error_code, 0);
    let id = full.session_id;
    assert_ne!(id, 0, "a session was opened");
    let got = answered(&full);
    assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(got[0].1 > 0 && got[0].2 == 1, "{got:?}");

    // Epoch 1: partition 0 moved past its batch; nothing changed anywhere: nothing answered.
    let r = fetch(&mut c, 12, (id, 1), &[(0, 1)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, id));
    assert_eq!(answered(&r), []);

    // A produce to partition 2: epoch 2 names no partition and hears of partition 2 alone.
    produce_to(&mut c, 2, b"two");
    let r = fetch(&mut c, 12, (id, 2), &[], &[]);
    let got = answered(&r);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0, got[0].2), (2, 1));
    assert!(got[0].1 > 0);

    // Epoch 2 again: stale. An id nobody was given: not found. Each alone, no session.
    let r = fetch(&mut c, 12, (id, 2), &[], &[]);
    assert_eq!((r.error_code, r.session_id), (71, 0));
    assert!(r.responses.is_empty());
    let other = if id == i32::MAX { 1 } else { id + 1 };
    let r = fetch(&mut c, 12, (other, 1), &[], &[]);
    assert_eq!((r.error_code, r.session_id), (70, 0));
    assert!(r.responses.is_empty());

    // The stale epoch changed nothing: epoch 3 is next. Partition 2 moved on (its offset), and
    // partition 3 is added: the new partition is answered (never told), the rest not.
    let r = fetch(&mut c, 12, (id, 3), &[(2, 1), (3, 0)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, id));
    assert_eq!(
        answered(&r).iter().map(|p| p.0).collect::<Vec<_>>(),
        [3],
        "{:?}",
        answered(&r)
    );

    // Forgetting every partition closes the session: answered sessionless.
    let r = fetch(&mut c, 12, (id, 4), &[], &[0, 1, 2, 3]);
    assert_eq!((r.error_code, r.session_id), (0, 0));
    let r = fetch(&mut c, 12, (id, 5), &[], &[]);
    assert_eq!(r.error_code, 70, "the session is gone");

    // Epoch -1 wants no session, and closes the one it names.
    let full = fetch(&mut c, 12, (0, 0), &[(0, 0)], &[]);
    let id = full.session_id;
    assert_ne!(id, 0);
    let r = fetch(&mut c, 12, (id, -1), &[(0, 0), (1, 0)], &[]);
    assert_eq!((r.error_code, r.session_id), (0, 0));
    assert_eq!(answered(&r).len(), 2);
    assert_eq!(fetch(&mut c, 12, (id, 1), &[], &[]).error_code, 70);

    // A client that knows nothing of sessions (v6) is served every partition it names.
    let r = fetch(&mut c, 6, (0, 0), &[(0, 0), (2, 0)], &[]);
    assert_eq!(r.session_id, 0);
    let got = answered(&r);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|p| p.1 > 0));
    assert!(b.terminate().success());
}

#[test]
fn a_full_cache_answers_a_new_fetcher_sessionless_with_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(
        dir.path(),
        &["--set", "max.incremental.fetch.session.cache.slots=1"],
    );
    let mut c = b.connect();
    create_topic(&mut c, TOPIC, 2, &[]);
    produce_to(&mut c, 1, b"one");
    let first = fetch(&mut c, 12, (0, 0), &[(0, 0)], &[]);
    assert_ne!(first.session_id, 0);
    // The only slot holds a session created moments ago: not evicted, even for a larger one.
    let second = fetch(&mut c, 12, (0, 0), &[(0, 0), (1, 0)], &[]);
    assert_eq!((second.error_code, second.session_id), (0, 0));
    assert_eq!(answered(&second).len(), 2);
    assert!(answered(&second)[1].1 > 0);
    // The first session is still served.
    let r = fetch(&mut c, 12, (first.session_id, 1), &[], &[]);
    assert_eq!((r.error_code, r.session_id), (0, first.session_id));
    assert!(b.terminate().success());
}

#[test]
fn a_broker_mirroring_a_broker_fetches_through_one_incremental_session() {
    let Mirrored { src, dst, .. } = &mirrored(TOPIC);
    let (mut s, mut d) = (src.connect(), dst.connect());
    // One batch at a time, each mirrored before the next: every fetch after the first sends
    // nothing but the partition's new offset.
    for i in 1..=20i64 {
        produce_to(&mut s, 0, format!("r{i}").as_bytes());
        let deadline = Instant::now() + Duration::from_secs(30);
        while fetch_hw(&mut d) != i + 1 {
            assert!(
                Instant::now() < deadline,
                "the mirror did not catch up to {}",
                i + 1
            );
        }
    }
    let stats = http_get(src, "/fetch-sessions");
    let body: serde_json::Value =
        serde_json::from_str(stats.split("\r\n\r\n").nth(1).unwrap_or_default()).unwrap();
    assert_eq!(body["sessions"], 1, "{body}");
    assert_eq!(body["partitions"], 1, "{body}");
    assert_eq!(body["session_errors"], 0, "{body}");
    assert!(
        body["incremental_fetches"].as_u64().unwrap() >= 20,
        "{body}"
    );
    // Every byte mirrored as the source stored it.
    assert_eq!(fetch_records(&mut s), fetch_records(&mut d));
}

/// The high watermark of partition 0 (a sessionless fetch).
fn fetch_hw(c: &mut Conn) -> i64 {
    let r = fetch(c, 12, (0, -1), &[(0, 0)], &[]);
    answered(&r)[0].2
}

/// Partition 0's records from offset 0 (a sessionless fetch).
fn fetch_records(c: &mut Conn) -> Bytes {
    let r = fetch(c, 12, (0, -1), &[(0, 0)], &[]);
    r.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default()
}
