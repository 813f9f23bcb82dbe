//! `POST /mirrors` never mixes two histories and never drops records silently: a local topic
//! that only shares a name with the source's (another topic id) is refused with 409 naming
//! both ids, even when nothing would be lost; `dry_run` answers what `force` would drop and
//! changes nothing; `force` truncates it fully, says so, and the topic takes the source's id.
//! A failback (the topic's id is the source's, as a mirrored topic takes it) needs no force,
//! and the records its truncation drops are in its answer and in `GET /mirrors`. A start that
//! fails at one partition returns the ones it switched to local mode (a test hook makes the
//! failure).

mod broker_support;

use broker_support::requests::{batch, create_topic, fetch, http_get, http_post, produce};
use broker_support::BrokerProc;
use mirrorlog::format::ProducerFields;
use serde_json::Value;
use std::time::{Duration, Instant};

fn body(answer: &str) -> Value {
    serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

fn status(answer: &str) -> u16 {
    answer.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A topic's id, as Metadata (v12) answers it.
fn topic_id(c: &mut broker_support::Conn, topic: &str) -> uuid::Uuid {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestKind, ResponseKind};
    let mut r = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(broker_support::requests::name(topic));
    r.topics = Some(vec![t]);
    let ResponseKind::Metadata(resp) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(r))
    else {
        panic!()
    };
    resp.topics[0].topic_id
}

/// Waits until `topic`-0 at `b` has a high watermark of `hw`.
fn wait_for_hw(c: &mut broker_support::Conn, topic: &str, hw: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, now, _) = fetch(c, topic, 0, 100);
        if code == 0 && now == hw {
            return;
        }
        assert!(Instant::now() < deadline, "{topic}: {code} {now}, not {hw}");
    }
}

#[test]
fn an_unrelated_local_topic_is_refused_naming_both_ids_and_force_truncates_it_fully() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let east = BrokerProc::start(da.path(), &[]);
    let west = BrokerProc::start(db.path(), &[]);
    let (mut ce, mut cw) = (east.connect(), west.connect());
    // East's `pay` holds [a]; west has its own `pay` holding [b]: nothing would be lost by a
    // truncation, and the two logs are still two histories.
    create_topic(&mut ce, "pay", 1, &[]);
    create_topic(&mut cw, "pay", 1, &[]);
    assert_eq!(
        produce(&mut ce, "pay", batch(ProducerFields::NONE, &[b"a"]), -1).0,
        0
    );
    assert_eq!(
        produce(&mut cw, "pay", batch(ProducerFields::NONE, &[b"b"]), -1).0,
        0
    );
    let (east_id, west_id) = (topic_id(&mut ce, "pay"), topic_id(&mut cw, "pay"));
    assert_ne!(east_id, west_id);
    let start = |extra: &str| {
        http_post(
            &west,
            "/mirrors",
            &format!(
                r#"{{"name":"east","bootstrap":"{}","topics":["pay"]{extra}}}"#,
                east.kafka
            ),
        )
    };

    // Refused, naming the partition, both topic ids and what force would drop.
    let refused = start("");
    assert_eq!(status(&refused), 409, "{refused}");
    let why = body(&refused)["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("pay-0")
            && why.contains(&east_id.to_string())
            && why.contains(&west_id.to_string())
            && why.contains("1 records"),
        "{why}"
    );

    // dry_run: the full truncation force would do, and nothing changed.
    let dry = body(&start(r#","dry_run":true"#));
    let part = &dry["partitions"][0];
    assert_eq!(
        (
            &part["log_end"],
            &part["truncate_to"],
            &part["records_dropped"]
        ),
        (&Value::from(1), &Value::from(0), &Value::from(1)),
        "{dry}"
    );
    let topics = body(&http_get(&west, "/topics"));
    let p0 = &topics["topics"][0]["partitions"][0];
    assert_eq!(
        (p0["log_end"].as_i64(), p0["mode"].as_str()),
        (Some(1), Some("local"))
    );
    assert!(body(&http_get(&west, "/mirrors"))["mirrors"]
        .as_array()
        .unwrap()
        .is_empty());

    // force: west's record goes, the truncation is reported, east's history is west's.
    let forced = start(r#","force":true"#);
    assert_eq!(status(&forced), 200, "{forced}");
    let truncated = &body(&forced)["started"][0]["truncated"];
    assert_eq!(
        (
            &truncated["from"],
            &truncated["to"],
            &truncated["records_dropped"],
            &truncated["forced"]
        ),
        (
            &Value::from(1),
            &Value::from(0),
            &Value::from(1),
            &Value::Bool(true)
        ),
        "{forced}"
    );
    assert_eq!(
        produce(&mut ce, "pay", batch(ProducerFields::NONE, &[b"c"]), -1).1,
        1
    );
    wait_for_hw(&mut cw, "pay", 2);
    let (_, _, records) = fetch(&mut cw, "pay", 0, 0);
    let (_, _, source) = fetch(&mut ce, "pay", 0, 0);
    assert_eq!(records, source, "west holds east's log, byte for byte");
    assert_eq!(
        topic_id(&mut cw, "pay"),
        east_id,
        "west's topic took the source's id"
    );
    let mirrors = body(&http_get(&west, "/mirrors"));
    assert_eq!(
        mirrors["mirrors"][0]["partitions"][0]["start_truncation"]["records_dropped"], 1,
        "{mirrors}"
    );
}

#[test]
fn a_failbacks_truncation_is_reported_with_the_records_it_dropped() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let east = BrokerProc::start(da.path(), &[]);
    let west = BrokerProc::start(db.path(), &[]);
    let (mut ce, mut cw) = (east.connect(), west.connect());
    create_topic(&mut ce, "pay", 1, &[]);
    let two: Vec<&[u8]> = vec![b"x"; 2];
    assert_eq!(
        produce(&mut ce, "pay", batch(ProducerFields::NONE, &two), -1).0,
        0
    );
    let started = http_post(
        &west,
        "/mirrors",
        &format!(
            r#"{{"name":"east","bootstrap":"{}","topics":["pay"]}}"#,
            east.kafka
        ),
    );
    assert_eq!(status(&started), 200, "{started}");
    wait_for_hw(&mut cw, "pay", 2);
    // Failover to west; east, not told, takes three more records.
    let stopped = http_post(&west, "/mirrors/east/stop", "");
    assert_eq!(status(&stopped), 200, "{stopped}");
    let three: Vec<&[u8]> = vec![b"lost"; 3];
    assert_eq!(
        produce(&mut ce, "pay", batch(ProducerFields::NONE, &three), -1).0,
        0
    );
    // Failback: east mirrors west and drops its three, saying so.
    let failback = http_post(
        &east,
        "/mirrors",
        &format!(
            r#"{{"name":"west","bootstrap":"{}","topics":["pay"]}}"#,
            west.kafka
        ),
    );
    assert_eq!(status(&failback), 200, "{failback}");
    let truncated = &body(&failback)["started"][0]["truncated"];
    assert_eq!(
        (
            &truncated["from"],
            &truncated["to"],
            &truncated["records_dropped"],
            &truncated["forced"]
        ),
        (
            &Value::from(5),
            &Value::from(2),
            &Value::from(3),
            &Value::Bool(false)
        ),
        "{failback}"
    );
    let mirrors = body(&http_get(&east, "/mirrors"));
    assert_eq!(
        mirrors["mirrors"][0]["partitions"][0]["start_truncation"]["to"], 2,
        "{mirrors}"
    );
}

#[test]
fn a_start_failing_at_one_partition_returns_the_others_to_local_mode() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = BrokerProc::start(da.path(), &[]);
    let b = BrokerProc::start_with_env(
        db.path(),
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[],
        &[
            ("MIRRORLOG_BROKER_TEST_HOOKS", "1"),
            ("MIRRORLOG_BROKER_FAIL_START_AT", "orders-2"),
        ],
    );
    let (mut ca, mut cb) = (a.connect(), b.connect());
    create_topic(&mut ca, "orders", 3, &[]);
    create_topic(&mut cb, "orders", 3, &[]);
    // The topics were made apart (their ids differ): the start needs force.
    let answer = http_post(
        &b,
        "/mirrors",
        &format!(
            r#"{{"name":"a","bootstrap":"{}","topics":["orders"],"force":true}}"#,
            a.kafka
        ),
    );
    assert_eq!(status(&answer), 500, "{answer}");
    let why = body(&answer)["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("orders-2") && why.contains("the 2 partitions this start switched"),
        "{why}"
    );
    // Every partition is local (writable) again, and no mirror was recorded.
    let topics = body(&http_get(&b, "/topics"));
    let modes: Vec<&str> = topics["topics"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["local", "local", "local"]);
    assert_eq!(
        produce(
            &mut cb,
            "orders",
            batch(ProducerFields::NONE, &[b"mine"]),
            -1
        )
        .0,
        0,
        "orders-0 takes writes again"
    );
    assert!(body(&http_get(&b, "/mirrors"))["mirrors"]
        .as_array()
        .unwrap()
        .is_empty());
}
