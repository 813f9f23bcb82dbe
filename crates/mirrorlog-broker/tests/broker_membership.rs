//! The classic membership protocol over raw frames: Kafka's codes for each refusal,
//! a group's metadata durable across a SIGKILL (its member carries on with the same
//! generation after the restart), and the group APIs that depend on membership
//! (commits by members, DeleteGroups of a group with members, OffsetDelete of a subscribed
//! topic). Real clients rebalancing are `broker_groups.rs`'s scripts.

mod broker_support;

use broker_support::members::{heartbeat, join, s, sync};
use broker_support::requests::{create_topic, group, name};
use broker_support::{BrokerProc, Conn};
use bytes::Bytes;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DescribeGroupsRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetDeleteRequest, RequestKind, ResponseKind,
};

const ILLEGAL_GENERATION: i16 = 22;
const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
const UNKNOWN_MEMBER_ID: i16 = 25;
const INVALID_SESSION_TIMEOUT: i16 = 26;
const REBALANCE_IN_PROGRESS: i16 = 27;
const INVALID_GROUP_ID: i16 = 24;
const NON_EMPTY_GROUP: i16 = 68;
const MEMBER_ID_REQUIRED: i16 = 79;
const FENCED_INSTANCE_ID: i16 = 82;
const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;

fn commit(c: &mut Conn, g: &str, member: &str, generation: i32) -> i16 {
    let mut r = OffsetCommitRequest::default();
    r.group_id = group(g);
    r.generation_id_or_member_epoch = generation;
    r.member_id = s(member);
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = 5;
    p.committed_leader_epoch = -1;
    p.committed_metadata = Some(s(""));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = name("orders");
    t.partitions.push(p);
    r.topics.push(t);
    let ResponseKind::OffsetCommit(resp) =
        c.call(ApiKey::OffsetCommit, 8, RequestKind::OffsetCommit(r))
    else {
        panic!()
    };
    resp.topics[0].partitions[0].error_code
}

/// DescribeGroups: state, protocol, member ids.
fn describe(c: &mut Conn, g: &str) -> (String, String, Vec<String>) {
    let mut r = DescribeGroupsRequest::default();
    r.groups.push(group(g));
    let ResponseKind::DescribeGroups(resp) =
        c.call(ApiKey::DescribeGroups, 5, RequestKind::DescribeGroups(r))
    else {
        panic!()
    };
    let d = &resp.groups[0];
    (
        d.group_state.to_string(),
        d.protocol_data.to_string(),
        d.members.iter().map(|m| m.member_id.to_string()).collect(),
    )
}

/// One dynamic member joins `g` alone (KIP-394's two joins) and syncs: its id and generation.
fn join_alone(c: &mut Conn, g: &str) -> (String, i32) {
    let first = join(c, g, "", None, 10_000, "range");
    assert_eq!(first.error, MEMBER_ID_REQUIRED);
    let j = join(c, g, &first.member_id, None, 10_000, "range");
    assert_eq!((j.error, j.members), (0, 1));
    assert_eq!(j.leader, j.member_id);
    assert_eq!(j.protocol.as_deref(), Some("range"));
    let (e, a) = sync(c, g, &j.member_id, j.generation, &[(&j.member_id, b"p0")]);
    assert_eq!((e, &a[..]), (0, &b"p0"[..]));
    (j.member_id, j.generation)
}

#[test]
fn a_group_is_joined_synced_and_survives_a_kill_with_kafkas_codes_for_each_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        "--set",
        "offsets.topic.num.partitions=2",
        "--set",
        "group.initial.rebalance.delay.ms=0",
    ];
    let b = BrokerProc::start(dir.path(), &settings);
    let mut c = b.connect();
    create_topic(&mut c, "orders", 1, &[]);

    // Refused before the group is touched.
    assert_eq!(
        join(&mut c, "", "", None, 10_000, "range").error,
        INVALID_GROUP_ID
    );
    assert_eq!(
        join(&mut c, "g", "", None, 1000, "range").error,
        INVALID_SESSION_TIMEOUT,
        "under group.min.session.timeout.ms"
    );
    assert_eq!(
        join(&mut c, "g", "made-up", None, 10_000, "range").error,
        UNKNOWN_MEMBER_ID
    );

    let (member, generation) = join_alone(&mut c, "g");
    assert_eq!(generation, 1);
    assert_eq!(heartbeat(&mut c, "g", &member, None, generation), 0);
    assert_eq!(
        heartbeat(&mut c, "g", &member, None, generation + 1),
        ILLEGAL_GENERATION
    );
    assert_eq!(
        heartbeat(&mut c, "g", "nobody", None, generation),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        join(&mut c, "g", "", None, 10_000, "roundrobin").error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    // Commits: the member's with its generation; others refused.
    assert_eq!(commit(&mut c, "g", &member, generation), 0);
    assert_eq!(
        commit(&mut c, "g", &member, generation + 1),
        ILLEGAL_GENERATION
    );
    assert_eq!(commit(&mut c, "g", "", -1), UNKNOWN_MEMBER_ID);
    assert_eq!(
        describe(&mut c, "g"),
        ("Stable".into(), "range".into(), vec![member.clone()])
    );
    // The group has a member: it cannot be deleted, nor the offsets of its topic.
    let mut d = DeleteGroupsRequest::default();
    d.groups_names.push(group("g"));
    let ResponseKind::DeleteGroups(resp) =
        c.call(ApiKey::DeleteGroups, 2, RequestKind::DeleteGroups(d))
    else {
        panic!()
    };
    assert_eq!(resp.results[0].error_code, NON_EMPTY_GROUP);
    let mut o = OffsetDeleteRequest::default();
    o.group_id = group("g");
    let mut t = OffsetDeleteRequestTopic::default();
    t.name = name("orders");
    let mut p = OffsetDeleteRequestPartition::default();
    p.partition_index = 0;
    t.partitions.push(p);
    o.topics.push(t);
    let ResponseKind::OffsetDelete(resp) =
        c.call(ApiKey::OffsetDelete, 0, RequestKind::OffsetDelete(o))
    else {
        panic!()
    };
    assert_eq!(
        resp.topics[0].partitions[0].error_code,
        GROUP_SUBSCRIBED_TO_TOPIC
    );

    // SIGKILL: the stored generation and member are loaded; the member carries on.
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    b.kill();
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &settings);
    let mut c = b.connect();
    assert_eq!(heartbeat(&mut c, "g", &member, None, generation), 0);
    assert_eq!(
        describe(&mut c, "g"),
        ("Stable".into(), "range".into(), vec![member.clone()])
    );
    let (e, a) = sync(&mut c, "g", &member, generation, &[]);
    assert_eq!((e, &a[..]), (0, &b"p0"[..]), "the assignment was stored");

    // A second member joins: the first is told to rejoin, and both are in generation 2.
    let first = join(&mut c, "g", "", None, 10_000, "range");
    assert_eq!(first.error, MEMBER_ID_REQUIRED);
    let mut c2 = b.connect();
    let second_id = first.member_id.clone();
    let second = std::thread::spawn(move || {
        let j = join(&mut c2, "g", &second_id, None, 10_000, "range");
        (j.error, j.generation, j.members)
    });
    // Wait for the rebalance to begin (the second join is parked).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while heartbeat(&mut c, "g", &member, None, generation) != REBALANCE_IN_PROGRESS {
        assert!(std::time::Instant::now() < deadline, "no rebalance");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let j = join(&mut c, "g", &member, None, 10_000, "range");
    assert_eq!(
        (j.error, j.generation, j.members),
        (0, 2, 2),
        "the leader sees both"
    );
    assert_eq!(second.join().unwrap(), (0, 2, 0));

    // LeaveGroup v3 by member id: the one left rebalances alone.
    let mut l = LeaveGroupRequest::default();
    l.group_id = group("g");
    let mut m = kafka_protocol::messages::leave_group_request::MemberIdentity::default();
    m.member_id = s(&first.member_id);
    l.members.push(m);
    let ResponseKind::LeaveGroup(resp) = c.call(ApiKey::LeaveGroup, 3, RequestKind::LeaveGroup(l))
    else {
        panic!()
    };
    assert_eq!((resp.error_code, resp.members[0].error_code), (0, 0));
    b.terminate();
}

#[test]
fn a_static_member_with_a_new_id_fences_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(
        dir.path(),
        &[
            "--set",
            "offsets.topic.num.partitions=1",
            "--set",
            "group.initial.rebalance.delay.ms=0",
        ],
    );
    let mut c = b.connect();
    create_topic(&mut c, "orders", 1, &[]);
    // A static member joins without KIP-394's round trip.
    let j = join(&mut c, "s", "", Some("inst"), 10_000, "range");
    assert_eq!((j.error, j.generation), (0, 1));
    assert!(j.member_id.starts_with("inst-"), "{}", j.member_id);
    assert_eq!(
        sync(&mut c, "s", &j.member_id, 1, &[(&j.member_id, b"a")]).0,
        0
    );
    let again = join(&mut c, "s", "", Some("inst"), 10_000, "range");
    assert_eq!((again.error, again.generation), (0, 1), "no rebalance");
    assert_ne!(again.member_id, j.member_id);
    assert_eq!(
        heartbeat(&mut c, "s", &j.member_id, Some("inst"), 1),
        FENCED_INSTANCE_ID
    );
    assert_eq!(heartbeat(&mut c, "s", &again.member_id, Some("inst"), 1), 0);
    assert_eq!(
        sync(&mut c, "s", &again.member_id, 1, &[]),
        (0, Bytes::from_static(b"a"))
    );
    b.terminate();
}

/// A ConsumerGroupHeartbeat (v1): (error, epoch, assigned partitions of `orders` if answered).
fn consumer_heartbeat(
    c: &mut Conn,
    member: &str,
    epoch: i32,
    owned: &[i32],
    topic_id: uuid::Uuid,
) -> (i16, i32, Option<Vec<i32>>) {
    use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
    let mut r = kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default();
    r.group_id = group("kip848");
    r.member_id = s(member);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = if epoch == 0 { 30_000 } else { -1 };
    if epoch == 0 {
        r.subscribed_topic_names = Some(vec![name("orders")]);
    }
    let mut tp = TopicPartitions::default();
    tp.topic_id = topic_id;
    tp.partitions = owned.to_vec();
    r.topic_partitions = Some(if owned.is_empty() {
        Vec::new()
    } else {
        vec![tp]
    });
    let ResponseKind::ConsumerGroupHeartbeat(resp) = c.call(
        ApiKey::ConsumerGroupHeartbeat,
        1,
        RequestKind::ConsumerGroupHeartbeat(r),
    ) else {
        panic!()
    };
    let assigned = resp.assignment.map(|a| {
        a.topic_partitions
            .iter()
            .flat_map(|t| t.partitions.clone())
            .collect()
    });
    (resp.error_code, resp.member_epoch, assigned)
}

#[test]
fn a_consumer_protocol_member_carries_on_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let settings = ["--set", "offsets.topic.num.partitions=1"];
    let b = BrokerProc::start(dir.path(), &settings);
    let mut c = b.connect();
    create_topic(&mut c, "orders", 3, &[]);
    let mut m = kafka_protocol::messages::MetadataRequest::default();
    m.topics = None;
    let ResponseKind::Metadata(meta) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(m))
    else {
        panic!()
    };
    let id = meta.topics[0].topic_id;
    // FindCoordinator makes __consumer_offsets, where the group's records go.
    let mut f = kafka_protocol::messages::FindCoordinatorRequest::default();
    f.key_type = 0;
    f.coordinator_keys = vec![s("kip848")];
    c.call(ApiKey::FindCoordinator, 4, RequestKind::FindCoordinator(f));
    let (e, epoch, assigned) = consumer_heartbeat(&mut c, "m-1", 0, &[], id);
    assert_eq!(
        (e, epoch, assigned.as_deref()),
        (0, 1, Some(&[0, 1, 2][..]))
    );
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    b.kill();
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &settings);
    let mut c = b.connect();
    // The member is known, with its epoch and partitions: no fencing, nothing to rejoin.
    let (e, epoch, _) = consumer_heartbeat(&mut c, "m-1", 1, &[0, 1, 2], id);
    assert_eq!((e, epoch), (0, 1));
    // A second member: the first is asked to give partitions up, as before the restart.
    let (e, epoch, assigned) = consumer_heartbeat(&mut c, "m-2", 0, &[], id);
    assert_eq!((e, epoch, assigned), (0, 2, Some(Vec::new())));
    let (e, epoch, assigned) = consumer_heartbeat(&mut c, "m-1", 1, &[0, 1, 2], id);
    assert_eq!((e, epoch), (0, 1));
    assert_eq!(assigned.map(|a| a.len()), Some(2));
    b.terminate();
}
