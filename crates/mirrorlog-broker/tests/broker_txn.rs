//! Transactions on the wire (hand-made requests):
//! - a fenced transactional producer gets the code its request version knows (47 before
//!   AddPartitionsToTxn/EndTxn v2 and InitProducerId v4, 90 from them on), as Kafka's
//!   `KafkaApis` answers;
//! - a transaction naming a mirroring partition is refused at AddPartitionsToTxn.

mod broker_support;

use broker_support::requests::{create_topic, http_post, mirrored, name, Mirrored};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, EndTxnRequest, InitProducerIdRequest, ProducerId,
    RequestKind, ResponseKind, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

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
    // transaction used to succeed and leave the coordinator in Prepare* at EndTxn.
    // It gets the code its Produce gets (POLICY_VIOLATION, 44), and, as Kafka does when one
    // partition is refused, the others OPERATION_NOT_ATTEMPTED (55); after the failover it can
    // be added.
    let Mirrored { dst, .. } = &mirrored("m");
    let mut d = dst.connect();
    create_topic(&mut d, "local", 1, &[]);
    let (code, pid, epoch) = txn_init(&mut d, "t1", 3, None);
    assert_eq!(code, 0);
    let got = add_partitions(&mut d, "t1", &["local", "m"], (pid, epoch));
    assert_eq!(got, vec![("local".to_string(), 55), ("m".to_string(), 44)]);
    let stop = http_post(dst, "/mirrors/src/stop", "");
    assert!(stop.starts_with("HTTP/1.1 200"), "{stop}");
    let got = add_partitions(&mut d, "t1", &["local", "m"], (pid, epoch));
    assert_eq!(got, vec![("local".to_string(), 0), ("m".to_string(), 0)]);
    assert_eq!(end_txn(&mut d, "t1", (pid, epoch), 3), 0);
}
