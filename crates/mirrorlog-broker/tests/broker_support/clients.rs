//! Real clients for the mirror tests: a librdkafka producer and consumer (the `rdkafka`
//! crate), and the mirror's admin calls and status.

use super::requests::{http_get, http_post};
use super::BrokerProc;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;
use std::time::{Duration, Instant};

/// One record as a consumer sees it.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Seen {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
}

pub fn producer(
    bootstrap: &str,
    extra: &[(&str, &str)],
) -> ThreadedProducer<DefaultProducerContext> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "60000");
    for (k, v) in extra {
        c.set(*k, *v);
    }
    c.create().expect("producer")
}

/// Now, in ms since the epoch (records stamped now stay inside any retention a test sets).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn send(
    p: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    partition: i32,
    n: u64,
    value: &[u8],
) {
    let key = format!("key-{partition}-{n}");
    let headers = OwnedHeaders::new().insert(Header {
        key: "n",
        value: Some(&n.to_be_bytes()[..]),
    });
    let mut record = BaseRecord::to(topic)
        .partition(partition)
        .key(&key)
        .payload(value)
        .headers(headers)
        .timestamp(now_ms() + n as i64);
    loop {
        match p.send(record) {
            Ok(()) => return,
            Err((_, r)) => {
                record = r;
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

/// Everything of `partitions` of `topic` from each one's log start to its high watermark.
pub fn consume(bootstrap: &str, topic: &str, partitions: i32) -> Vec<Seen> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "unused")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .create()
        .expect("consumer");
    let mut list = TopicPartitionList::new();
    let mut ends = Vec::new();
    for p in 0..partitions {
        let (lo, hi) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .expect("watermarks");
        list.add_partition_offset(topic, p, Offset::Offset(lo))
            .unwrap();
        ends.push(hi);
    }
    consumer.assign(&list).unwrap();
    let mut seen = Vec::new();
    let mut next: Vec<i64> = vec![0; partitions as usize];
    let deadline = Instant::now() + Duration::from_secs(60);
    while (0..partitions as usize).any(|p| next[p] < ends[p]) {
        assert!(
            Instant::now() < deadline,
            "consuming {topic} at {bootstrap}"
        );
        let Some(m) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = m.expect("consumer error");
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|x| (x.key.to_string(), x.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        next[m.partition() as usize] = m.offset() + 1;
        seen.push(Seen {
            partition: m.partition(),
            offset: m.offset(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
            timestamp: m.timestamp().to_millis(),
        });
    }
    seen.sort_by_key(|s| (s.partition, s.offset));
    seen
}

pub fn start_mirror(broker: &BrokerProc, name: &str, bootstrap: &str, topic: &str) {
    start_mirror_with(
        broker,
        serde_json::json!({"name": name, "bootstrap": bootstrap, "topics": [topic]}),
    );
}

/// `POST /mirrors` with this body; it must succeed.
pub fn start_mirror_with(broker: &BrokerProc, body: Value) {
    let answer = http_post(broker, "/mirrors", &body.to_string());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

pub fn partitions_status(broker: &BrokerProc) -> Vec<Value> {
    let answer = http_get(broker, "/mirrors");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let v: Value = serde_json::from_str(body).expect("status JSON");
    v["mirrors"][0]["partitions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until every partition's log end and durable end at the destination are its high
/// watermark at the source (from the mock's own watermarks).
pub fn wait_caught_up(broker: &BrokerProc, mock_bootstrap: &str, topic: &str, partitions: i32) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", mock_bootstrap)
        .create()
        .expect("watermark client");
    let ends: Vec<i64> = (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap()
                .1
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let st = partitions_status(broker);
        let done = st.len() == partitions as usize
            && st.iter().all(|p| {
                let end = ends
                    .get(p["partition"].as_i64().unwrap_or(0) as usize)
                    .copied();
                // Durable too: a consumer reads up to the durable end, not the log end.
                p["log_end"].as_i64() == end && p["durable_end"].as_i64() == end
            });
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not caught up to {ends:?}: {}",
            serde_json::to_string_pretty(&st).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
