//! A restart always comes back: start-up with one group whose record does not read back, one
//! transaction whose markers can no longer be written (its partition became a mirror's) and one
//! topic whose creation cannot be finished serves everything else, names the three in
//! `/health` and `GET /topics`, refuses the damaged group with `COORDINATOR_NOT_AVAILABLE`, and
//! offers a way out for each, after which the broker is healthy across another restart.

mod broker_support;

use broker_support::requests::{
    batch, commit, create_topic, fetch_offsets, group, http, http_get, http_post, name, produce,
};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, DeleteGroupsRequest, EndTxnRequest, InitProducerIdRequest,
    ProduceRequest, ProducerId, RequestKind, ResponseKind, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::engine::{Engine, EngineConfig, Origin, TopicPartition};
use mirrorlog::format::{BatchBuilder, BatchOptions, ProducerFields, RecordSpec};
use serde_json::Value;

fn body(answer: &str) -> Value {
    serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// Kafka's partition of `__consumer_offsets` for `group` (Java's `String.hashCode`).
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let hash = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    (if hash == i32::MIN { 0 } else { hash.abs() }) % partitions
}

/// A transaction of `id` left open on `topic`-0 with one record: its producer id and epoch.
fn open_transaction(c: &mut Conn, id: &str, topic: &str) -> (i64, i16) {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = Some(txn_id(id));
    r.transaction_timeout_ms = 600_000;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let ResponseKind::InitProducerId(init) =
        c.call(ApiKey::InitProducerId, 3, RequestKind::InitProducerId(r))
    else {
        panic!()
    };
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = name(topic);
    t.partitions = vec![0];
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = txn_id(id);
    r.v3_and_below_producer_id = ProducerId(pid);
    r.v3_and_below_producer_epoch = epoch;
    r.v3_and_below_topics = vec![t];
    let ResponseKind::AddPartitionsToTxn(added) = c.call(
        ApiKey::AddPartitionsToTxn,
        3,
        RequestKind::AddPartitionsToTxn(r),
    ) else {
        panic!()
    };
    assert_eq!(
        added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    let mut b = BatchBuilder::new(BatchOptions {
        producer: ProducerFields {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: 0,
        },
        transactional: true,
        ..BatchOptions::default()
    });
    b.push(RecordSpec {
        timestamp: 1,
        key: None,
        value: Some(b"in the transaction"),
        headers: &[],
    });
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(bytes::Bytes::from(b.build()));
    let mut td = TopicProduceData::default();
    td.name = name(topic);
    td.partition_data.push(p);
    let mut r = ProduceRequest::default();
    r.transactional_id = Some(txn_id(id));
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data.push(td);
    let ResponseKind::Produce(resp) = c.call(ApiKey::Produce, 9, RequestKind::Produce(r)) else {
        panic!()
    };
    assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
    (pid, epoch)
}

fn end_txn(c: &mut Conn, id: &str, (pid, epoch): (i64, i16)) -> i16 {
    let mut r = EndTxnRequest::default();
    r.transactional_id = txn_id(id);
    r.producer_id = ProducerId(pid);
    r.producer_epoch = epoch;
    r.committed = true;
    let ResponseKind::EndTxn(resp) = c.call(ApiKey::EndTxn, 3, RequestKind::EndTxn(r)) else {
        panic!()
    };
    resp.error_code
}

#[test]
fn a_damaged_group_a_stuck_transaction_and_a_half_made_topic_fail_alone_with_ways_out() {
    let (source_dir, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let source = BrokerProc::start(source_dir.path(), &[]);
    let mut cs = source.connect();
    create_topic(&mut cs, "tx", 1, &[]);
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "kept", 1, &[]);
    create_topic(&mut c, "tx", 1, &[]);
    assert_eq!(
        produce(&mut c, "kept", batch(ProducerFields::NONE, &[b"k"]), -1).0,
        0
    );
    assert_eq!(
        commit(&mut c, 8, "good", -1, &[("kept", 0, 1, "")]),
        vec![0]
    );
    assert_eq!(commit(&mut c, 8, "bad", -1, &[("kept", 0, 1, "")]), vec![0]);

    // A transaction whose partition becomes a mirror's before its commit: EndTxn cannot write
    // the marker, and the transaction stays PrepareCommit.
    let producer = open_transaction(&mut c, "stuck", "tx");
    let forced = http_post(
        &b,
        "/mirrors",
        &format!(
            r#"{{"name":"src","bootstrap":"{}","topics":["tx"],"force":true}}"#,
            source.kafka
        ),
    );
    assert!(forced.starts_with("HTTP/1.1 200"), "{forced}");
    assert_ne!(end_txn(&mut c, "stuck", producer), 0);
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    assert!(b.terminate().success());

    // A group metadata record that does not read back, written while the broker is down.
    {
        let engine =
            Engine::open(EngineConfig::new(dir.path().join("log")).cluster_id("mirrorlog"))
                .unwrap();
        let tp = TopicPartition::new("__consumer_offsets", offsets_partition("bad", 50));
        let key = [&[0u8, 2, 0, 3][..], b"bad"].concat();
        let mut bb = BatchBuilder::new(BatchOptions::default());
        bb.push(RecordSpec {
            timestamp: 1,
            key: Some(&key),
            value: Some(&[0, 3, 0xff, 0xff]),
            headers: &[],
        });
        engine
            .append(&tp, bytes::Bytes::from(bb.build()), Origin::Client)
            .wait()
            .unwrap();
        engine.close().unwrap();
    }
    // A topic whose creation cannot be finished (its settings are refused by the engine).
    std::fs::write(
        dir.path().join("broker/topics/half.json"),
        r#"{"id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partitions":2,"configs":{"segment.bytes":"1"},"state":"creating"}"#,
    )
    .unwrap();

    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    let health = body(&http_get(&b, "/health"));
    assert_eq!(health["ok"], false, "{health}");
    assert_eq!(health["status"], "degraded");
    let damaged = &health["damaged"];
    assert!(damaged["groups"]["bad"].is_string(), "{health}");
    assert!(damaged["transactions"]["stuck"].is_string(), "{health}");
    assert!(damaged["topics"]["half"].is_string(), "{health}");
    assert_eq!(body(&http_get(&b, "/topics"))["damaged"][0]["name"], "half");

    // Everything else is served: records, the good group's offsets, new work.
    let mut c = b.connect();
    assert_eq!(fetch_offsets(&mut c, "good", "kept", 1)[0].0, 1);
    assert_eq!(
        produce(&mut c, "kept", batch(ProducerFields::NONE, &[b"n"]), -1),
        (0, 1)
    );
    assert_eq!(
        commit(&mut c, 8, "good", -1, &[("kept", 0, 2, "")]),
        vec![0]
    );
    // The damaged group is refused until deleted.
    assert_eq!(
        commit(&mut c, 8, "bad", -1, &[("kept", 0, 2, "")]),
        vec![15]
    );

    // The ways out.
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = vec![group("bad")];
    let ResponseKind::DeleteGroups(deleted) =
        c.call(ApiKey::DeleteGroups, 2, RequestKind::DeleteGroups(r))
    else {
        panic!()
    };
    assert_eq!(deleted.results[0].error_code, 0);
    let finished = http_post(&b, "/transactions/stuck/finish", "");
    assert!(finished.starts_with("HTTP/1.1 200"), "{finished}");
    let f = &body(&finished)["finished"];
    assert_eq!(f["outcome"], "commit", "{finished}");
    assert_eq!(f["skipped"][0][0], "tx", "{finished}");
    let dropped = http(&b, "DELETE", "/topics/half", "");
    assert!(dropped.starts_with("HTTP/1.1 200"), "{dropped}");
    assert_eq!(body(&http_get(&b, "/health"))["ok"], true);
    assert_eq!(commit(&mut c, 8, "bad", -1, &[("kept", 0, 2, "")]), vec![0]);

    // And across another restart: nothing damaged, everything kept.
    assert!(b.terminate().success());
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    assert_eq!(body(&http_get(&b, "/health"))["ok"], true);
    let mut c = b.connect();
    assert_eq!(fetch_offsets(&mut c, "bad", "kept", 1)[0].0, 2);
    assert_eq!(fetch_offsets(&mut c, "good", "kept", 1)[0].0, 2);
}

/// A group metadata value (version 3) whose two members claim one `group.instance.id`.
fn twins_value() -> Vec<u8> {
    let string = |v: &mut Vec<u8>, s: &str| {
        v.extend_from_slice(&i16::try_from(s.len()).unwrap().to_be_bytes());
        v.extend_from_slice(s.as_bytes());
    };
    let mut v = 3i16.to_be_bytes().to_vec();
    string(&mut v, "consumer");
    v.extend_from_slice(&1i32.to_be_bytes()); // generation
    string(&mut v, "range"); // protocol
    string(&mut v, "m1"); // leader
    v.extend_from_slice(&(-1i64).to_be_bytes()); // current state timestamp
    v.extend_from_slice(&2i32.to_be_bytes());
    for member in ["m1", "m2"] {
        string(&mut v, member);
        string(&mut v, "one-instance");
        string(&mut v, "client");
        string(&mut v, "/127.0.0.1");
        v.extend_from_slice(&30_000i32.to_be_bytes());
        v.extend_from_slice(&10_000i32.to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes()); // subscription
        v.extend_from_slice(&0i32.to_be_bytes()); // assignment
    }
    v
}

#[test]
fn stored_state_that_breaks_an_invariant_is_damaged_and_the_rest_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    create_topic(&mut c, "kept", 1, &[]);
    assert_eq!(
        produce(&mut c, "kept", batch(ProducerFields::NONE, &[b"k"]), -1).0,
        0
    );
    assert_eq!(
        commit(&mut c, 8, "good", -1, &[("kept", 0, 1, "")]),
        vec![0]
    );
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    assert!(b.terminate().success());

    // Written while the broker is down, each readable but impossible:
    // a topic being created with two billion partitions (served as stored, start-up would
    // create every one of them before it answers anything),
    std::fs::write(
        dir.path().join("broker/topics/huge.json"),
        r#"{"id":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16],"partitions":2000000000,"configs":{},"state":"creating"}"#,
    )
    .unwrap();
    // a transaction with a negative producer id that holds partitions while Empty,
    let txns = dir.path().join("broker/transactions.json");
    let mut doc: Value = std::fs::read_to_string(&txns)
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap_or_else(|_| serde_json::json!({"coordinator_epoch": 0, "txns": {}}));
    doc["txns"]["impossible"] = serde_json::json!({
        "producer_id": -7, "producer_epoch": 0, "timeout_ms": 60000, "state": "empty",
        "partitions": [["kept", 0]], "started_ms": 0, "updated_ms": 0,
    });
    std::fs::write(&txns, doc.to_string()).unwrap();
    // and a classic group whose two members hold one static instance id.
    {
        let engine =
            Engine::open(EngineConfig::new(dir.path().join("log")).cluster_id("mirrorlog"))
                .unwrap();
        let tp = TopicPartition::new("__consumer_offsets", offsets_partition("twins", 50));
        let key = [&[0u8, 2, 0, 5][..], b"twins"].concat();
        let value = twins_value();
        let mut bb = BatchBuilder::new(BatchOptions::default());
        bb.push(RecordSpec {
            timestamp: 1,
            key: Some(&key),
            value: Some(&value),
            headers: &[],
        });
        engine
            .append(&tp, bytes::Bytes::from(bb.build()), Origin::Client)
            .wait()
            .unwrap();
        engine.close().unwrap();
    }

    let started = std::time::Instant::now();
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "start-up took {:?}",
        started.elapsed()
    );
    let health = body(&http_get(&b, "/health"));
    assert_eq!(health["status"], "degraded", "{health}");
    let damaged = &health["damaged"];
    let reason = |kind: &str, name: &str| damaged[kind][name].as_str().unwrap_or("").to_string();
    assert!(
        reason("topics", "huge").contains("2000000000 partitions"),
        "{health}"
    );
    assert!(
        reason("transactions", "impossible").contains("producer id -7"),
        "{health}"
    );
    assert!(
        reason("groups", "twins").contains("one-instance"),
        "{health}"
    );

    // Everything else is served.
    let mut c = b.connect();
    assert_eq!(fetch_offsets(&mut c, "good", "kept", 1)[0].0, 1);
    assert_eq!(
        produce(&mut c, "kept", batch(ProducerFields::NONE, &[b"n"]), -1),
        (0, 1)
    );
    // The damaged group is refused until deleted.
    assert_eq!(
        commit(&mut c, 8, "twins", -1, &[("kept", 0, 2, "")]),
        vec![15]
    );

    // The ways out: drop the topic, forget the transaction, delete the group.
    let dropped = http(&b, "DELETE", "/topics/huge", "");
    assert!(dropped.starts_with("HTTP/1.1 200"), "{dropped}");
    let finished = http_post(&b, "/transactions/impossible/finish", "");
    assert!(finished.starts_with("HTTP/1.1 200"), "{finished}");
    assert_eq!(body(&finished)["finished"]["outcome"], "forgotten");
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = vec![group("twins")];
    let ResponseKind::DeleteGroups(deleted) =
        c.call(ApiKey::DeleteGroups, 2, RequestKind::DeleteGroups(r))
    else {
        panic!()
    };
    assert_eq!(deleted.results[0].error_code, 0);
    assert_eq!(body(&http_get(&b, "/health"))["ok"], true);
    assert_eq!(
        commit(&mut c, 8, "twins", -1, &[("kept", 0, 2, "")]),
        vec![0]
    );

    assert!(b.terminate().success());
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    assert_eq!(body(&http_get(&b, "/health"))["ok"], true);
    let mut c = b.connect();
    assert_eq!(fetch_offsets(&mut c, "twins", "kept", 1)[0].0, 2);
    let topics = body(&http_get(&b, "/topics"));
    assert!(!topics.to_string().contains("huge"), "{topics}");
}
