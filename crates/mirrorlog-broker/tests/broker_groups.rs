//! Consumer groups: committed offsets durable in `__consumer_offsets` by Kafka's
//! rules and codes, and real clients' groups (rebalancing, sessions, static members).
//!
//! - FindCoordinator for a group makes `__consumer_offsets` (compacted, internal) and answers
//!   this broker.
//! - OffsetCommit with generation -1 is taken; with a generation it is refused as Kafka refuses
//!   a commit from a member the group does not have; bad partitions and oversize metadata get
//!   their codes.
//! - OffsetFetch (one group, and several at v8) answers what was committed, -1 for the rest.
//! - ListGroups and DescribeGroups show the group `Empty`; OffsetDelete and DeleteGroups remove
//!   offsets.
//! - Everything survives a SIGKILL and restart; clients may not write or delete the internal
//!   topic.
//! - Real clients commit and read offsets (`testdata/interop/broker/groups.py`).
//! - Three librdkafka consumers rebalance eagerly, cooperatively and with KIP-848's protocol
//!   (`rebalance.py`); sessions
//!   end, static members rejoin, kafka-python and kcat consume in groups (`membership.py`).

mod broker_support;

use broker_support::requests::{
    batch, commit, commit_request, create_topic, fetch_offsets, group, name, produce,
};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, ListGroupsRequest,
    MetadataRequest, OffsetDeleteRequest, OffsetFetchRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::ProducerFields;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn find_coordinator(c: &mut Conn, g: &str) -> (i16, i32) {
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 0;
    r.coordinator_keys = vec![s(g)];
    let ResponseKind::FindCoordinator(resp) =
        c.call(ApiKey::FindCoordinator, 4, RequestKind::FindCoordinator(r))
    else {
        panic!()
    };
    (
        resp.coordinators[0].error_code,
        resp.coordinators[0].node_id.0,
    )
}

/// OffsetFetch v8 of every offset of several groups: per group, (topic, partition, offset).
fn fetch_groups(c: &mut Conn, groups: &[&str]) -> Vec<Vec<(String, i32, i64)>> {
    let mut r = OffsetFetchRequest::default();
    for g in groups {
        let mut x = OffsetFetchRequestGroup::default();
        x.group_id = group(g);
        x.topics = None;
        r.groups.push(x);
    }
    let ResponseKind::OffsetFetch(resp) =
        c.call(ApiKey::OffsetFetch, 8, RequestKind::OffsetFetch(r))
    else {
        panic!()
    };
    resp.groups
        .iter()
        .map(|g| {
            g.topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
                })
                .collect()
        })
        .collect()
}

fn list_groups(c: &mut Conn) -> Vec<(String, String)> {
    let ResponseKind::ListGroups(resp) = c.call(
        ApiKey::ListGroups,
        5,
        RequestKind::ListGroups(ListGroupsRequest::default()),
    ) else {
        panic!()
    };
    resp.groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.group_state.to_string()))
        .collect()
}

fn describe_group(c: &mut Conn, g: &str) -> (i16, String) {
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![group(g)];
    let ResponseKind::DescribeGroups(resp) =
        c.call(ApiKey::DescribeGroups, 5, RequestKind::DescribeGroups(r))
    else {
        panic!()
    };
    (
        resp.groups[0].error_code,
        resp.groups[0].group_state.to_string(),
    )
}

fn delete_group(c: &mut Conn, g: &str) -> i16 {
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = vec![group(g)];
    let ResponseKind::DeleteGroups(resp) =
        c.call(ApiKey::DeleteGroups, 2, RequestKind::DeleteGroups(r))
    else {
        panic!()
    };
    resp.results[0].error_code
}

fn offset_delete(c: &mut Conn, g: &str, topic: &str, partition: i32) -> (i16, Vec<i16>) {
    let mut p = OffsetDeleteRequestPartition::default();
    p.partition_index = partition;
    let mut t = OffsetDeleteRequestTopic::default();
    t.name = name(topic);
    t.partitions.push(p);
    let mut r = OffsetDeleteRequest::default();
    r.group_id = group(g);
    r.topics.push(t);
    let ResponseKind::OffsetDelete(resp) =
        c.call(ApiKey::OffsetDelete, 0, RequestKind::OffsetDelete(r))
    else {
        panic!()
    };
    let codes = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    (resp.error_code, codes)
}

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_METADATA_TOO_LARGE: i16 = 12;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
const GROUP_ID_NOT_FOUND: i16 = 69;

#[test]
fn offsets_of_groups_without_members_are_committed_fetched_and_survive_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(
        dir.path(),
        &[
            "--set",
            "offsets.topic.num.partitions=4",
            "--set",
            "offset.metadata.max.bytes=16",
        ],
    );
    let mut c = b.connect();
    create_topic(&mut c, "orders", 3, &[]);

    // The coordinator is this broker; __consumer_offsets is made, internal.
    assert_eq!(find_coordinator(&mut c, "billing"), (0, 1));
    let mut m = MetadataRequest::default();
    m.topics = None;
    let ResponseKind::Metadata(meta) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(m))
    else {
        panic!()
    };
    let internal: Vec<_> = meta
        .topics
        .iter()
        .filter(|t| t.is_internal)
        .map(|t| (t.name.as_ref().unwrap().0.to_string(), t.partitions.len()))
        .collect();
    assert_eq!(internal, vec![("__consumer_offsets".to_string(), 4)]);

    // Commits: generation -1 is a simple group's; bad partitions and metadata get their codes.
    assert_eq!(
        commit(
            &mut c,
            8,
            "billing",
            -1,
            &[
                ("orders", 0, 10, "a"),
                ("orders", 1, 20, ""),
                ("orders", 7, 1, ""),
                ("nowhere", 0, 1, ""),
                ("orders", 2, 5, "metadata over sixteen bytes"),
            ]
        ),
        vec![
            0,
            0,
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_OR_PARTITION,
            OFFSET_METADATA_TOO_LARGE
        ]
    );
    assert_eq!(
        commit(&mut c, 8, "billing", -1, &[("orders", 0, 11, "b")]),
        vec![0]
    );
    // A commit from a member: the group has none.
    assert_eq!(
        commit(&mut c, 8, "billing", 3, &[("orders", 0, 99, "")]),
        vec![UNKNOWN_MEMBER_ID]
    );
    assert_eq!(
        commit(&mut c, 8, "fresh", 3, &[("orders", 0, 1, "")]),
        vec![ILLEGAL_GENERATION]
    );
    assert_eq!(
        commit(&mut c, 9, "fresh", 3, &[("orders", 0, 1, "")]),
        vec![GROUP_ID_NOT_FOUND]
    );
    assert_eq!(
        commit(&mut c, 8, "audit", -1, &[("orders", 2, 7, "")]),
        vec![0]
    );

    let want = vec![
        (11, "b".to_string(), 0),
        (20, String::new(), 0),
        (-1, String::new(), 0),
    ];
    assert_eq!(fetch_offsets(&mut c, "billing", "orders", 3), want);
    assert_eq!(
        fetch_groups(&mut c, &["billing", "audit", "nobody"]),
        vec![
            vec![("orders".to_string(), 0, 11), ("orders".to_string(), 1, 20)],
            vec![("orders".to_string(), 2, 7)],
            vec![],
        ]
    );
    let mut groups = list_groups(&mut c);
    groups.sort();
    assert_eq!(
        groups,
        vec![
            ("audit".to_string(), "Empty".to_string()),
            ("billing".to_string(), "Empty".to_string())
        ]
    );
    assert_eq!(describe_group(&mut c, "billing"), (0, "Empty".to_string()));
    assert_eq!(describe_group(&mut c, "nobody"), (0, "Dead".to_string()));

    // Clients may not write or delete the internal topic.
    assert_eq!(
        produce(
            &mut c,
            "__consumer_offsets",
            batch(ProducerFields::NONE, &[b"x"]),
            -1
        )
        .0,
        INVALID_TOPIC_EXCEPTION
    );

    // SIGKILL: what was answered is durable and read back at start-up.
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    b.kill();
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    let mut c = b.connect();
    assert_eq!(fetch_offsets(&mut c, "billing", "orders", 3), want);

    // OffsetDelete and DeleteGroups, durable too.
    assert_eq!(offset_delete(&mut c, "billing", "orders", 1), (0, vec![0]));
    assert_eq!(
        offset_delete(&mut c, "nobody", "orders", 1).0,
        GROUP_ID_NOT_FOUND
    );
    assert_eq!(delete_group(&mut c, "audit"), 0);
    assert_eq!(delete_group(&mut c, "audit"), GROUP_ID_NOT_FOUND);
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    b.kill();
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &[]);
    let mut c = b.connect();
    assert_eq!(
        fetch_offsets(&mut c, "billing", "orders", 2),
        vec![(11, "b".to_string(), 0), (-1, String::new(), 0)]
    );
    assert_eq!(
        list_groups(&mut c),
        vec![("billing".to_string(), "Empty".to_string())]
    );
    assert_eq!(describe_group(&mut c, "audit").1, "Dead");
}

#[test]
fn real_clients_commit_and_read_group_offsets() {
    let out = broker_support::run_script("groups.py", &[], &[]);
    for line in [
        "ok librdkafka commits and reads its offsets",
        "ok a second consumer resumes at the committed offsets",
        "ok committed offsets survive SIGKILL",
        "ok kafka-python commits and reads its offsets",
        "ok kafka-python admin lists, reads and deletes groups",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}

#[test]
fn a_client_that_leaves_mid_request_does_not_leave_the_offsets_topic_half_made() {
    // The first FindCoordinator makes __consumer_offsets; its client closes the connection at
    // once (as librdkafka closes its bootstrap connection). The making must still finish:
    // stopped at an await it would leave the topic half made until a restart, and every later
    // FindCoordinator refused.
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "offsets.topic.num.partitions=200"]);
    let mut gone = b.connect();
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 0;
    r.coordinator_keys = vec![s("early")];
    let f = gone.frame(ApiKey::FindCoordinator, 4, &RequestKind::FindCoordinator(r));
    gone.send_raw(&f).unwrap();
    // Gone while the topic's 200 partitions are being made.
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(gone);
    let mut c = b.connect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match find_coordinator(&mut c, "later") {
            (0, 1) => break,
            other => {
                assert!(std::time::Instant::now() < deadline, "{other:?}");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    assert_eq!(commit(&mut c, 8, "later", -1, &[]), Vec::<i16>::new());
}

#[test]
fn three_librdkafka_consumers_rebalance_in_both_protocols_and_offsets_survive_a_kill() {
    let out = broker_support::run_script("rebalance.py", &[], &[]);
    // The classic protocol's eager and cooperative assignors, and KIP-848's consumer protocol.
    for strategy in ["range", "cooperative-sticky", "consumer"] {
        for step in [
            "c1 joined: settled, [12]",
            "c2 joined: settled, [6, 6]",
            "c3 joined: settled, [4, 4, 4]",
            "c3 left: settled, [6, 6]",
            "c2 left: settled, [12]",
        ] {
            let line = format!("{strategy}: {step}");
            assert!(out.contains(&line), "{line:?} missing:\n{out}");
        }
        let line = format!("g-{strategy}: offsets survived SIGKILL, nothing consumed twice");
        assert!(out.contains(&line), "{line:?} missing:\n{out}");
    }
    assert!(out.contains("rebalance: ok"), "{out}");
}

#[test]
fn sessions_end_static_members_rejoin_and_other_clients_consume_in_groups() {
    let out = broker_support::run_script("membership.py", &[], &[]);
    for line in [
        "session timeout: the frozen member's partitions moved after",
        "static member: restarted within the session timeout, same partitions, no rebalance",
        "kafka-python: a group consumer read 60, committed; the next resumed there",
        "kcat -G: a balanced consumer read all 200 records",
        "membership: ok",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}

#[test]
fn exactly_once_read_process_write_commits_offsets_with_its_transactions() {
    let out = broker_support::run_script("eos.py", &[], &[]);
    for line in [
        "ok read_committed output holds each of 600 inputs exactly once",
        "ok the committed offsets match the input and survive SIGKILL",
        "eos: ok",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}

#[test]
fn pipelined_commits_keep_the_last_one_sent() {
    // A client's asynchronous commits are pipelined on one connection; the group's offset must
    // be the last one sent, as Kafka's in-order handling makes it (librdkafka's 0030 checks
    // this). 200 commits are sent before any answer is read.
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "offsets.topic.num.partitions=2"]);
    let mut c = b.connect();
    create_topic(&mut c, "orders", 1, &[]);
    assert_eq!(find_coordinator(&mut c, "async").0, 0);
    let mut frames = Vec::new();
    for offset in 1..=200 {
        let r = commit_request("async", -1, &[("orders", 0, offset, "")]);
        frames.extend(c.frame(ApiKey::OffsetCommit, 8, &r));
    }
    c.send_raw(&frames).unwrap();
    for _ in 0..200 {
        c.read_frame().unwrap();
    }
    assert_eq!(fetch_offsets(&mut c, "async", "orders", 1)[0].0, 200);
}
