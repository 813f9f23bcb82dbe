//! Mirroring a source that is not ours (design.md §Mirroring): librdkafka's mock
//! cluster, in process through the `rdkafka` crate's `MockCluster`, with 3 brokers and partition
//! leaders spread over them; `mirrorlog-broker` mirrors it as a separate process.
//!
//! - **Lead-in**: 12 partitions written by a librdkafka idempotent producer while leaders move,
//!   a broker goes down and comes back, Fetch answers errors and a broker is slow; the
//!   destination ends record for record equal (keys, values, headers, offsets, timestamps) to
//!   what a consumer of the mock reads.
//! - **A source whose log start moved**: the mock keeps 5 MiB per partition, so writing more
//!   moves its log start past 0; it answers an out-of-range fetch and the mirror realigns.
//! - **Mock markers**: confluent-kafka's mock writes its transaction markers with CRC 0; the
//!   partition fails at the first one with the reason shown (a Python script: that mock lives
//!   in confluent-kafka's librdkafka).
//! - **Backoff**: a partition whose every fetch is answered with an error is fetched at most 20
//!   times a second, and mirrors again once the errors stop.

mod broker_support;

use broker_support::clients::{
    consume, partitions_status, producer, send, start_mirror, wait_caught_up,
};
use broker_support::BrokerProc;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, Producer};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use serde_json::Value;
use std::time::Duration;

type Mock = MockCluster<'static, DefaultProducerContext>;

fn mock(topic: &str, partitions: i32) -> Mock {
    let mock = MockCluster::new(3).expect("mock cluster");
    mock.create_topic(topic, partitions, 1).expect("mock topic");
    for p in 0..partitions {
        mock.partition_leader(topic, p, Some(p % 3 + 1))
            .expect("leader");
    }
    mock
}

#[test]
fn a_three_broker_cluster_is_mirrored_through_leader_moves_broker_faults_and_errors() {
    const TOPIC: &str = "orders";
    const PARTITIONS: i32 = 12;
    let mock = mock(TOPIC, PARTITIONS);
    let bootstrap = mock.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let producer = producer(&bootstrap, &[]);
    let mut n = 0u64;
    let mut produce = |count: u64| {
        for _ in 0..count {
            let p = (n % PARTITIONS as u64) as i32;
            send(&producer, TOPIC, p, n, format!("value-{n}").as_bytes());
            n += 1;
        }
        producer.flush(Duration::from_secs(30)).expect("flush");
    };
    produce(600);
    // The first bootstrap address is down: any other that answers will do.
    start_mirror(&broker, "mock", &format!("127.0.0.1:1,{bootstrap}"), TOPIC);
    produce(600);
    // Leaders move: every partition to the next broker.
    for p in 0..PARTITIONS {
        mock.partition_leader(TOPIC, p, Some((p + 1) % 3 + 1))
            .unwrap();
    }
    produce(600);
    // A broker goes down and comes back.
    mock.broker_down(2).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    mock.broker_up(2).unwrap();
    produce(600);
    // Fetch answers errors, and one broker is slow.
    mock.request_errors(
        RDKafkaApiKey::Fetch,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        ],
    );
    mock.broker_round_trip_time(1, Duration::from_millis(50))
        .unwrap();
    produce(600);
    for p in 0..PARTITIONS {
        mock.partition_leader(TOPIC, p, Some(p % 3 + 1)).unwrap();
    }
    produce(600);
    wait_caught_up(&broker, &bootstrap, TOPIC, PARTITIONS);
    let source = consume(&bootstrap, TOPIC, PARTITIONS);
    let destination = consume(&broker.kafka, TOPIC, PARTITIONS);
    assert_eq!(source.len(), 3600);
    assert_eq!(destination.len(), source.len());
    assert!(
        destination == source,
        "the destination differs from the source"
    );
    let st = partitions_status(&broker);
    let errors: u64 = st.iter().map(|p| p["errors"].as_u64().unwrap_or(0)).sum();
    assert!(errors > 0, "the faults were met: {st:?}");
    for p in &st {
        assert_eq!(
            p["source_leader"].as_i64(),
            Some(p["partition"].as_i64().unwrap() % 3 + 1)
        );
        assert!(p["stalled"].is_null(), "{p}");
    }
    broker.terminate();
}

#[test]
fn a_mock_source_whose_log_start_moved_past_zero_is_realigned() {
    const TOPIC: &str = "retained";
    let mock = mock(TOPIC, 2);
    let bootstrap = mock.bootstrap_servers();
    // 8 MiB per partition: the mock keeps 5 MiB, so its log start moves past 0.
    let producer = producer(&bootstrap, &[("batch.size", "200000")]);
    let value = vec![7u8; 100 << 10];
    for n in 0..160u64 {
        send(&producer, TOPIC, (n % 2) as i32, n, &value);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let watermarks: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let (lo, _) = watermarks
        .fetch_watermarks(TOPIC, 0, Duration::from_secs(10))
        .unwrap();
    assert!(lo > 0, "the mock's log start moved");
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    start_mirror(&broker, "mock", &bootstrap, TOPIC);
    wait_caught_up(&broker, &bootstrap, TOPIC, 2);
    let st = partitions_status(&broker);
    for p in &st {
        assert!(p["realigns"].as_u64().unwrap_or(0) >= 1, "{p}");
    }
    let source = consume(&bootstrap, TOPIC, 2);
    let destination = consume(&broker.kafka, TOPIC, 2);
    assert!(!source.is_empty());
    assert!(
        destination == source,
        "the destination differs from the source"
    );
    broker.terminate();
}

/// librdkafka 2.12's mock (the `rdkafka` crate's) writes no transaction markers at all; the
/// mock of confluent-kafka's librdkafka writes them with CRC 0. The scenario runs there, in
/// `testdata/interop/broker/mock_source.py`.
#[test]
fn the_mocks_crc_zero_transaction_markers_fail_their_partition_with_the_reason() {
    let out = broker_support::run_script("mock_source.py", &["markers"], &[]);
    assert!(out.contains("ok mock markers"), "{out}");
}

#[test]
fn a_partition_whose_fetches_all_fail_is_fetched_at_most_20_times_a_second() {
    const TOPIC: &str = "errors";
    let mock = mock(TOPIC, 1);
    let bootstrap = mock.bootstrap_servers();
    let producer = producer(&bootstrap, &[]);
    for n in 0..10 {
        send(&producer, TOPIC, 0, n, b"before");
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    start_mirror(&broker, "mock", &bootstrap, TOPIC);
    wait_caught_up(&broker, &bootstrap, TOPIC, 1);
    // Every Fetch from now on is answered KAFKA_STORAGE_ERROR (more errors than 20 fetches a
    // second could use up in the window).
    mock.request_errors(
        RDKafkaApiKey::Fetch,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR; 500],
    );
    let requests = |st: &[Value]| st[0]["fetch_requests"].as_u64().unwrap_or(0);
    // Let the fetch out before the errors were pushed come back.
    std::thread::sleep(Duration::from_millis(1000));
    let before = requests(&partitions_status(&broker));
    let window = Duration::from_secs(4);
    std::thread::sleep(window);
    let st = partitions_status(&broker);
    let sent = requests(&st) - before;
    assert!(
        sent as f64 <= 20.0 * window.as_secs_f64(),
        "{sent} fetches in {window:?}: {st:?}"
    );
    assert!(sent >= 2, "it kept retrying: {sent}");
    let last = st[0]["last_error"].as_str().unwrap_or_default();
    assert!(last.contains("KAFKA_STORAGE_ERROR"), "{last}");
    assert!(st[0]["retries"].as_u64().unwrap_or(0) >= 2, "{st:?}");
    // The errors stop: it mirrors again.
    mock.clear_request_errors(RDKafkaApiKey::Fetch);
    for n in 10..20 {
        send(&producer, TOPIC, 0, n, b"after");
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    wait_caught_up(&broker, &bootstrap, TOPIC, 1);
    assert_eq!(
        consume(&broker.kafka, TOPIC, 1),
        consume(&bootstrap, TOPIC, 1)
    );
    broker.terminate();
}
