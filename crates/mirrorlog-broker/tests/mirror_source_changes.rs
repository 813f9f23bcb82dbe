//! A source's topic changing under a running mirror (design.md §Mirroring), with
//! `mirrorlog-broker` on both sides and librdkafka's admin client making the changes at the
//! source, as an operator would:
//! - the mirrored topic takes the source's topic id and its configs (DescribeConfigs);
//! - a config changed at the source (`retention.ms`, `max.message.bytes` raised to 4 MiB) is
//!   followed, and a 3 MiB batch produced under it is mirrored;
//! - partitions added at the source are created and mirrored;
//! - a topic deleted and recreated at the source stops its partitions with the reason, and
//!   nothing of the new topic is spliced onto the mirrored log.

mod broker_support;

use broker_support::clients::{
    consume, partitions_status, producer, send, start_mirror_with, wait_caught_up,
};
use broker_support::BrokerProc;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, DescribeConfigsRequest, MetadataRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::Producer;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const TOPIC: &str = "changing";

fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn opts() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)))
}

/// The topic's id, by Metadata v12.
fn topic_id(b: &BrokerProc) -> uuid::Uuid {
    let mut c = b.connect();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(broker_support::requests::name(TOPIC));
    let mut r = MetadataRequest::default();
    r.topics = Some(vec![t]);
    let ResponseKind::Metadata(m) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(r)) else {
        panic!("not a Metadata answer");
    };
    m.topics[0].topic_id
}

/// The topic's configs set (not defaults), by DescribeConfigs.
fn configs_set(b: &BrokerProc) -> BTreeMap<String, String> {
    let mut c = b.connect();
    let mut res = DescribeConfigsResource::default();
    res.resource_type = 2;
    res.resource_name = StrBytes::from_static_str(TOPIC);
    res.configuration_keys = None;
    let mut r = DescribeConfigsRequest::default();
    r.resources = vec![res];
    let ResponseKind::DescribeConfigs(d) =
        c.call(ApiKey::DescribeConfigs, 4, RequestKind::DescribeConfigs(r))
    else {
        panic!("not a DescribeConfigs answer");
    };
    d.results[0]
        .configs
        .iter()
        .filter(|c| c.config_source != 5)
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
            )
        })
        .collect()
}

fn wait_for(b: &BrokerProc, what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "waiting for {what}: {:?}",
            partitions_status(b)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_sources_ids_configs_added_partitions_and_recreated_topic_are_followed() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // No auto-creation at the source: the producer refreshes its metadata every half second,
    // and a refresh between the deletion and the re-creation below would create the topic
    // itself (as Kafka's auto-creation would), so that CreateTopics finds it there (a race
    // a loaded CI machine met).
    let a = BrokerProc::start(da.path(), &["--set", "auto.create.topics.enable=false"]);
    let b = BrokerProc::start(db.path(), &[]);
    let at_a = admin(&a.kafka);
    let topic = NewTopic::new(TOPIC, 2, TopicReplication::Fixed(1))
        .set("retention.ms", "3600000")
        .set("segment.ms", "86400000");
    for r in block_on(at_a.create_topics([&topic], &opts())).unwrap() {
        r.unwrap();
    }
    // The producer learns of partitions added within half a second (librdkafka's default is
    // 5 minutes).
    let p = producer(
        &a.kafka,
        &[
            ("message.max.bytes", "5000000"),
            ("topic.metadata.refresh.interval.ms", "500"),
        ],
    );
    for n in 0..40 {
        send(&p, TOPIC, (n % 2) as i32, n, b"first");
    }
    p.flush(Duration::from_secs(30)).unwrap();
    start_mirror_with(
        &b,
        serde_json::json!({"name": "a", "bootstrap": a.kafka, "topics": [TOPIC], "config_sync_ms": 300}),
    );
    wait_caught_up(&b, &a.kafka, TOPIC, 2);
    assert_eq!(topic_id(&b), topic_id(&a), "the source's topic id");
    wait_for(&b, "the source's configs", || {
        configs_set(&b).get("retention.ms").map(String::as_str) == Some("3600000")
    });
    assert_eq!(configs_set(&b), configs_set(&a));

    // A config changed at the source, and a 3 MiB batch under the new limit.
    let change = AlterConfig::new(ResourceSpecifier::Topic(TOPIC))
        .set("retention.ms", "7200000")
        .set("segment.ms", "86400000")
        .set("max.message.bytes", "4194304");
    for r in block_on(at_a.alter_configs([&change], &opts())).unwrap() {
        r.unwrap();
    }
    send(&p, TOPIC, 0, 1000, &vec![3u8; 3 << 20]);
    p.flush(Duration::from_secs(30)).unwrap();
    wait_for(&b, "the changed configs", || {
        let c = configs_set(&b);
        c.get("retention.ms").map(String::as_str) == Some("7200000")
            && c.get("max.message.bytes").map(String::as_str) == Some("4194304")
    });
    wait_caught_up(&b, &a.kafka, TOPIC, 2);
    let here = consume(&b.kafka, TOPIC, 2);
    assert!(
        here.iter()
            .any(|r| r.value.as_ref().is_some_and(|v| v.len() == 3 << 20)),
        "the 3 MiB record was mirrored"
    );
    assert!(here == consume(&a.kafka, TOPIC, 2));
    let st = partitions_status(&b);
    assert!(
        st.iter()
            .all(|p| p["config_synced_at_ms"].as_u64().is_some()),
        "{st:?}"
    );

    // Partitions added at the source.
    for r in block_on(at_a.create_partitions([&NewPartitions::new(TOPIC, 4)], &opts())).unwrap() {
        r.unwrap();
    }
    for n in 0..40 {
        send(&p, TOPIC, (n % 4) as i32, 2000 + n, b"second");
    }
    p.flush(Duration::from_secs(30)).unwrap();
    wait_for(&b, "the added partitions", || {
        partitions_status(&b).len() == 4
    });
    wait_caught_up(&b, &a.kafka, TOPIC, 4);
    assert!(consume(&b.kafka, TOPIC, 4) == consume(&a.kafka, TOPIC, 4));
    let mirrored_ends: Vec<i64> = partitions_status(&b)
        .iter()
        .map(|p| p["log_end"].as_i64().unwrap())
        .collect();

    // The topic deleted and recreated at the source: its partitions stop, nothing spliced.
    for r in block_on(at_a.delete_topics(&[TOPIC], &opts())).unwrap() {
        r.unwrap();
    }
    let again = NewTopic::new(TOPIC, 4, TopicReplication::Fixed(1));
    for r in block_on(at_a.create_topics([&again], &opts())).unwrap() {
        r.unwrap();
    }
    for n in 0..400 {
        send(&p, TOPIC, (n % 4) as i32, 5000 + n, b"a new topic");
    }
    p.flush(Duration::from_secs(30)).unwrap();
    wait_for(&b, "the recreated topic to stop its partitions", || {
        partitions_status(&b).iter().all(|p| {
            p["stalled"]
                .as_str()
                .is_some_and(|s| s.contains("recreated at the source"))
        })
    });
    let ends: Vec<i64> = partitions_status(&b)
        .iter()
        .map(|p| p["log_end"].as_i64().unwrap())
        .collect();
    assert_eq!(ends, mirrored_ends, "nothing of the new topic was appended");
    // Nor does starting the mirror again splice it.
    let body = serde_json::json!({"name": "a", "bootstrap": a.kafka, "topics": [TOPIC]});
    let again = broker_support::requests::http_post(&b, "/mirrors", &body.to_string());
    assert!(
        again.starts_with("HTTP/1.1 400") && again.contains("recreated at the source"),
        "{again}"
    );
    a.terminate();
    b.terminate();
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A source that lost records the mirror holds (restored from an older copy): the fetch past
/// its end is out of range, ListOffsets finds its end below the local one, and the partition is
/// truncated (by OffsetForLeaderEpoch, here to the source's end: the copy has the same epochs)
/// and mirrors on from there — it does not stall.
#[test]
fn a_source_that_lost_records_truncates_the_mirror_instead_of_stalling() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let copy = tempfile::tempdir().unwrap();
    let a = BrokerProc::start(da.path(), &[]);
    let b = BrokerProc::start(db.path(), &[]);
    let at_a = admin(&a.kafka);
    let topic = NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1));
    for r in block_on(at_a.create_topics([&topic], &opts())).unwrap() {
        r.unwrap();
    }
    drop(at_a);
    let produce = |a: &BrokerProc, from: u64, n: u64, value: &[u8]| {
        let p = producer(&a.kafka, &[]);
        for i in from..from + n {
            send(&p, TOPIC, 0, i, value);
        }
        p.flush(Duration::from_secs(30)).unwrap();
    };
    produce(&a, 0, 100, b"kept");
    start_mirror_with(
        &b,
        serde_json::json!({"name": "a", "bootstrap": a.kafka, "topics": [TOPIC]}),
    );
    wait_caught_up(&b, &a.kafka, TOPIC, 1);
    // A copy of the source at 100 records; then 50 more, mirrored.
    let (kafka, admin_addr) = (a.kafka.clone(), a.admin.clone());
    assert!(a.terminate().success());
    copy_dir(da.path(), copy.path());
    let a = BrokerProc::start_on(da.path(), &kafka, &admin_addr, &[]);
    produce(&a, 100, 50, b"lost");
    wait_caught_up(&b, &a.kafka, TOPIC, 1);
    assert_eq!(partitions_status(&b)[0]["log_end"].as_i64(), Some(150));
    // The source comes back from the copy: it ends at 100, then takes 30 more.
    assert!(a.terminate().success());
    std::fs::remove_dir_all(da.path()).unwrap();
    copy_dir(copy.path(), da.path());
    let a = BrokerProc::start_on(da.path(), &kafka, &admin_addr, &[]);
    produce(&a, 200, 30, b"after the restore");
    wait_for(&b, "the truncation", || {
        partitions_status(&b)[0]["truncations"].as_u64() == Some(1)
    });
    produce(&a, 300, 20, b"later");
    wait_caught_up(&b, &a.kafka, TOPIC, 1);
    let st = partitions_status(&b);
    assert_eq!(st[0]["log_end"].as_i64(), Some(150), "{st:?}");
    assert!(st[0]["stalled"].is_null(), "{st:?}");
    // What the source took after the truncation point is mirrored.
    let (here, there) = (consume(&b.kafka, TOPIC, 1), consume(&a.kafka, TOPIC, 1));
    assert_eq!(here.len(), there.len());
    assert!(here[130..] == there[130..]);
    assert!(here[..100] == there[..100]);
    a.terminate();
    b.terminate();
}
