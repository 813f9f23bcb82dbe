//! ACLs: per principal, resource and operation, served by DescribeAcls, CreateAcls
//! and DeleteAcls and enforced on every request, by Kafka's rules and codes.
//!
//! A SASL_PLAINTEXT broker with users `admin` (a super user), `alice` and `bob`, and Kafka's
//! authorizer turned on: each request below is made as one of them over raw frames, and its
//! answer's code checked, for every API that checks ACLs. ACLs survive a restart. Real
//! clients' side (kafka-python's admin client and librdkafka's, producers and consumers served
//! and refused) is `testdata/interop/broker/acls.py`.

mod broker_support;

use broker_support::requests::{
    authenticate, batch, create_topic_answer, fetch, handshake, name, produce,
};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, DescribeClusterRequest,
    FindCoordinatorRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    RequestKind, ResponseKind, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::ProducerFields;

const AUTHORIZER: &str =
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

struct Acls {
    _dir: tempfile::TempDir,
    users: std::path::PathBuf,
}

impl Acls {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let users = dir.path().join("users");
        std::fs::write(&users, "admin:admin-pw\nalice:alice-pw\nbob:bob-pw\n").unwrap();
        Acls { _dir: dir, users }
    }

    fn start(&self, data: &std::path::Path, listen: &str, admin: &str) -> BrokerProc {
        BrokerProc::start_on(
            data,
            listen,
            admin,
            &[
                "--set",
                "sasl.enabled.mechanisms=PLAIN",
                "--set",
                &format!("sasl.users.file={}", self.users.display()),
                "--set",
                AUTHORIZER,
                "--set",
                "super.users=User:admin",
                "--set",
                "auto.create.topics.enable=false",
            ],
        )
    }
}

/// A connection logged in as `user` (password `<user>-pw`).
fn login(b: &BrokerProc, user: &str) -> Conn {
    let mut c = b.connect();
    assert_eq!(handshake(&mut c, 1, "PLAIN").0, 0);
    let token = format!("\0{user}\0{user}-pw");
    assert_eq!(authenticate(&mut c, token.as_bytes()).0, 0);
    c
}

/// An ACL on a topic: (name, pattern 3 literal / 4 prefixed, principal, operation, permission).
fn topic_acl(topic: &str, pattern: i8, principal: &str, op: i8, permission: i8) -> AclCreation {
    let mut a = AclCreation::default();
    a.resource_type = 2;
    a.resource_name = s(topic);
    a.resource_pattern_type = pattern;
    a.principal = s(principal);
    a.host = s("*");
    a.operation = op;
    a.permission_type = permission;
    a
}

fn create_acls(c: &mut Conn, acls: Vec<AclCreation>) -> Vec<i16> {
    let mut r = CreateAclsRequest::default();
    r.creations = acls;
    let ResponseKind::CreateAcls(resp) = c.call(ApiKey::CreateAcls, 3, RequestKind::CreateAcls(r))
    else {
        panic!()
    };
    resp.results.iter().map(|x| x.error_code).collect()
}

/// One ACL as DescribeAcls answers it: (resource name, pattern, principal, operation,
/// permission).
type Described = (String, i8, String, i8, i8);

/// DescribeAcls of every ACL of `principal` (None: all): the error code, and each ACL as
/// (resource name, pattern, principal, operation, permission).
fn describe_acls(c: &mut Conn, principal: Option<&str>) -> (i16, Vec<Described>) {
    let mut r = DescribeAclsRequest::default();
    r.resource_type_filter = 1;
    r.resource_name_filter = None;
    r.pattern_type_filter = 1;
    r.principal_filter = principal.map(s);
    r.host_filter = None;
    r.operation = 1;
    r.permission_type = 1;
    let ResponseKind::DescribeAcls(resp) =
        c.call(ApiKey::DescribeAcls, 3, RequestKind::DescribeAcls(r))
    else {
        panic!()
    };
    let mut out = Vec::new();
    for res in &resp.resources {
        for a in &res.acls {
            out.push((
                res.resource_name.to_string(),
                res.pattern_type,
                a.principal.to_string(),
                a.operation,
                a.permission_type,
            ));
        }
    }
    (resp.error_code, out)
}

/// DeleteAcls of every ACL of `principal`: per filter, the code and how many were removed.
fn delete_acls_of(c: &mut Conn, principal: &str) -> (i16, usize) {
    let mut f = DeleteAclsFilter::default();
    f.resource_type_filter = 1;
    f.resource_name_filter = None;
    f.pattern_type_filter = 1;
    f.principal_filter = Some(s(principal));
    f.host_filter = None;
    f.operation = 1;
    f.permission_type = 1;
    let mut r = DeleteAclsRequest::default();
    r.filters.push(f);
    let ResponseKind::DeleteAcls(resp) = c.call(ApiKey::DeleteAcls, 3, RequestKind::DeleteAcls(r))
    else {
        panic!()
    };
    let x = &resp.filter_results[0];
    (x.error_code, x.matching_acls.len())
}

/// The topics a Metadata of every topic lists.
fn listed(c: &mut Conn) -> Vec<String> {
    let mut r = MetadataRequest::default();
    r.topics = None;
    let ResponseKind::Metadata(m) = c.call(ApiKey::Metadata, 12, RequestKind::Metadata(r)) else {
        panic!()
    };
    m.topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect()
}

fn list_offsets(c: &mut Conn, topic: &str) -> i16 {
    let mut p = kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = -1;
    let mut t = kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions.push(p);
    let mut r = ListOffsetsRequest::default();
    r.replica_id = kafka_protocol::messages::BrokerId(-1);
    r.topics.push(t);
    let ResponseKind::ListOffsets(resp) =
        c.call(ApiKey::ListOffsets, 7, RequestKind::ListOffsets(r))
    else {
        panic!()
    };
    resp.topics[0].partitions[0].error_code
}

fn describe_cluster(c: &mut Conn) -> i16 {
    let mut r = DescribeClusterRequest::default();
    r.endpoint_type = 1;
    let ResponseKind::DescribeCluster(resp) =
        c.call(ApiKey::DescribeCluster, 1, RequestKind::DescribeCluster(r))
    else {
        panic!()
    };
    resp.error_code
}

fn init_producer_id(c: &mut Conn, transactional_id: Option<&str>) -> i16 {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = transactional_id.map(|t| TransactionalId(s(t)));
    r.transaction_timeout_ms = 60_000;
    r.producer_id = kafka_protocol::messages::ProducerId(-1);
    r.producer_epoch = -1;
    let ResponseKind::InitProducerId(resp) =
        c.call(ApiKey::InitProducerId, 4, RequestKind::InitProducerId(r))
    else {
        panic!()
    };
    resp.error_code
}

fn find_txn_coordinator(c: &mut Conn, transactional_id: &str) -> i16 {
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 1;
    r.coordinator_keys = vec![s(transactional_id)];
    let ResponseKind::FindCoordinator(resp) =
        c.call(ApiKey::FindCoordinator, 4, RequestKind::FindCoordinator(r))
    else {
        panic!()
    };
    resp.coordinators[0].error_code
}

const READ: i8 = 3;
const WRITE: i8 = 4;
const ALL: i8 = 2;
const DENY: i8 = 2;
const ALLOW: i8 = 3;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const INVALID_REQUEST: i16 = 42;

#[test]
fn acls_are_enforced_on_every_request_and_survive_a_restart() {
    let acls = Acls::new();
    let data = tempfile::tempdir().unwrap();
    let broker = acls.start(data.path(), "127.0.0.1:0", "127.0.0.1:0");
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let mut bob = login(&broker, "bob");
    let one = || batch(ProducerFields::NONE, &[b"x"]);

    // No ACL covers anything: only the super user may act (allow.everyone.if.no.acl.found is
    // false, Kafka's default).
    assert_eq!(
        create_topic_answer(&mut alice, "orders", 1, 1, &[], false).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    for topic in ["orders", "orders-secret", "other"] {
        assert_eq!(
            create_topic_answer(&mut admin, topic, 1, 1, &[], false).0,
            0
        );
    }
    assert_eq!(listed(&mut alice), Vec::<String>::new());
    assert_eq!(listed(&mut admin).len(), 3);
    assert_eq!(
        produce(&mut alice, "orders", one(), -1).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        fetch(&mut alice, "orders", 0, 0).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        list_offsets(&mut alice, "orders"),
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(describe_cluster(&mut alice), CLUSTER_AUTHORIZATION_FAILED);
    assert_eq!(
        describe_acls(&mut alice, None).0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        create_acls(
            &mut alice,
            vec![topic_acl("orders", LITERAL, "User:alice", ALL, ALLOW)]
        ),
        vec![CLUSTER_AUTHORIZATION_FAILED]
    );
    assert_eq!(
        init_producer_id(&mut alice, None),
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(
        init_producer_id(&mut alice, Some("t1")),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    assert_eq!(
        find_txn_coordinator(&mut alice, "t1"),
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );

    // The super user grants: alice writes "orders"; bob reads every topic starting "ord" but
    // is denied everything on "orders-secret"; a malformed principal is refused alone.
    assert_eq!(
        create_acls(
            &mut admin,
            vec![
                topic_acl("orders", LITERAL, "User:alice", WRITE, ALLOW),
                topic_acl("ord", PREFIXED, "User:bob", READ, ALLOW),
                topic_acl("orders-secret", LITERAL, "User:bob", ALL, DENY),
                topic_acl("orders", LITERAL, "bob", READ, ALLOW),
            ]
        ),
        vec![0, 0, 0, INVALID_REQUEST]
    );
    assert_eq!(produce(&mut alice, "orders", one(), -1), (0, 0));
    assert_eq!(
        fetch(&mut alice, "orders", 0, 0).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(
        produce(&mut bob, "orders", one(), -1).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    let (code, hw, _) = fetch(&mut bob, "orders", 0, 0);
    assert_eq!((code, hw), (0, 1));
    assert_eq!(
        fetch(&mut bob, "orders-secret", 0, 0).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(list_offsets(&mut bob, "orders"), 0, "READ implies DESCRIBE");
    // WRITE implies DESCRIBE too; the listings show what each may describe.
    assert_eq!(listed(&mut alice), vec!["orders".to_string()]);
    assert_eq!(listed(&mut bob), vec!["orders".to_string()]);
    // WRITE on a topic lets an idempotent producer have an id (Kafka's rule).
    assert_eq!(init_producer_id(&mut alice, None), 0);
    assert_eq!(
        init_producer_id(&mut bob, None),
        CLUSTER_AUTHORIZATION_FAILED
    );

    let (code, mut all) = describe_acls(&mut admin, None);
    assert_eq!(code, 0);
    all.sort();
    assert_eq!(
        all,
        vec![
            (
                "ord".to_string(),
                PREFIXED,
                "User:bob".to_string(),
                READ,
                ALLOW
            ),
            (
                "orders".to_string(),
                LITERAL,
                "User:alice".to_string(),
                WRITE,
                ALLOW
            ),
            (
                "orders-secret".to_string(),
                LITERAL,
                "User:bob".to_string(),
                ALL,
                DENY
            ),
        ]
    );
    assert_eq!(describe_acls(&mut admin, Some("User:alice")).1.len(), 1);

    // Restart: the ACLs are durable.
    let (listen, admin_listen) = (broker.kafka.clone(), broker.admin.clone());
    assert!(broker.terminate().success());
    let broker = acls.start(data.path(), &listen, &admin_listen);
    let mut admin = login(&broker, "admin");
    let mut alice = login(&broker, "alice");
    let mut bob = login(&broker, "bob");
    assert_eq!(describe_acls(&mut admin, None).1.len(), 3);
    assert_eq!(produce(&mut alice, "orders", one(), -1), (0, 1));
    assert_eq!(fetch(&mut bob, "orders", 0, 0).1, 2);

    // Deleting alice's ACL takes her write away at once.
    assert_eq!(
        delete_acls_of(&mut alice, "User:alice").0,
        CLUSTER_AUTHORIZATION_FAILED
    );
    assert_eq!(delete_acls_of(&mut admin, "User:alice"), (0, 1));
    assert_eq!(
        produce(&mut alice, "orders", one(), -1).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(describe_acls(&mut admin, None).1.len(), 2);
}

#[test]
fn without_an_authorizer_everything_is_allowed_and_the_acl_apis_are_disabled() {
    let data = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(data.path(), &[]);
    let mut c = broker.connect();
    // SECURITY_DISABLED (54), Kafka's answer when no authorizer is configured.
    assert_eq!(describe_acls(&mut c, None).0, 54);
    assert_eq!(
        create_acls(&mut c, vec![topic_acl("t", LITERAL, "User:x", READ, ALLOW)]),
        vec![54]
    );
    assert_eq!(delete_acls_of(&mut c, "User:x").0, 54);
    assert_eq!(create_topic_answer(&mut c, "t", 1, 1, &[], false).0, 0);
    assert_eq!(
        produce(&mut c, "t", batch(ProducerFields::NONE, &[b"x"]), -1),
        (0, 0)
    );
    assert_eq!(describe_cluster(&mut c), 0);
}

#[test]
fn allow_everyone_if_no_acl_found_opens_only_uncovered_resources() {
    let data = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(
        data.path(),
        &[
            "--set",
            AUTHORIZER,
            "--set",
            "allow.everyone.if.no.acl.found=true",
            "--set",
            "auto.create.topics.enable=false",
        ],
    );
    // A PLAINTEXT connection is User:ANONYMOUS.
    let mut c = broker.connect();
    for t in ["open", "closed"] {
        assert_eq!(create_topic_answer(&mut c, t, 1, 1, &[], false).0, 0);
    }
    assert_eq!(
        create_acls(
            &mut c,
            vec![topic_acl("closed", LITERAL, "User:someone", READ, ALLOW)]
        ),
        vec![0]
    );
    let one = || batch(ProducerFields::NONE, &[b"x"]);
    assert_eq!(produce(&mut c, "open", one(), -1), (0, 0));
    assert_eq!(
        produce(&mut c, "closed", one(), -1).0,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(listed(&mut c), vec!["open".to_string()]);
}

#[test]
fn real_clients_manage_acls_and_are_served_or_refused_by_them() {
    let out = broker_support::run_script("acls.py", &[], &[]);
    for line in [
        "ok kafka-python admin creates and describes ACLs",
        "ok CreateAcls refused to a non-super user",
        "ok librdkafka producer served and refused by ACL",
        "ok kafka-python consumer served and refused by ACL",
        "ok librdkafka admin deletes an ACL and it takes effect",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}

/// Sends `body` (API `key` at `version`) and answers the response.
fn ask(c: &mut Conn, key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
    c.call(key, version, body)
}

#[test]
fn every_other_api_refuses_a_principal_without_acls_with_kafkas_code() {
    use kafka_protocol::messages::*;
    let acls = Acls::new();
    let data = tempfile::tempdir().unwrap();
    let broker = acls.start(data.path(), "127.0.0.1:0", "127.0.0.1:0");
    let mut admin = login(&broker, "admin");
    assert_eq!(
        create_topic_answer(&mut admin, "orders", 1, 1, &[], false).0,
        0
    );
    assert_eq!(
        broker_support::requests::commit(&mut admin, 8, "g", -1, &[("orders", 0, 1, "")]),
        vec![0]
    );
    let mut alice = login(&broker, "alice");
    let t = || name("orders");
    const GROUP_AUTHORIZATION_FAILED: i16 = 30;

    // Topic APIs: TOPIC_AUTHORIZATION_FAILED (29).
    let mut r = DeleteTopicsRequest::default();
    r.topic_names = vec![t()];
    let ResponseKind::DeleteTopics(x) = ask(
        &mut alice,
        ApiKey::DeleteTopics,
        5,
        RequestKind::DeleteTopics(r),
    ) else {
        panic!()
    };
    assert_eq!(x.responses[0].error_code, TOPIC_AUTHORIZATION_FAILED);

    let mut p = delete_records_request::DeleteRecordsPartition::default();
    p.offset = 1;
    let mut dt = delete_records_request::DeleteRecordsTopic::default();
    dt.name = t();
    dt.partitions.push(p);
    let mut r = DeleteRecordsRequest::default();
    r.topics.push(dt);
    let ResponseKind::DeleteRecords(x) = ask(
        &mut alice,
        ApiKey::DeleteRecords,
        2,
        RequestKind::DeleteRecords(r),
    ) else {
        panic!()
    };
    assert_eq!(
        x.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );

    let mut ct = create_partitions_request::CreatePartitionsTopic::default();
    ct.name = t();
    ct.count = 2;
    let mut r = CreatePartitionsRequest::default();
    r.topics.push(ct);
    let ResponseKind::CreatePartitions(x) = ask(
        &mut alice,
        ApiKey::CreatePartitions,
        3,
        RequestKind::CreatePartitions(r),
    ) else {
        panic!()
    };
    assert_eq!(x.results[0].error_code, TOPIC_AUTHORIZATION_FAILED);

    let mut op = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
    op.current_leader_epoch = -1;
    let mut ot = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
    ot.topic = t();
    ot.partitions.push(op);
    let mut r = OffsetForLeaderEpochRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics.push(ot);
    let ResponseKind::OffsetForLeaderEpoch(x) = ask(
        &mut alice,
        ApiKey::OffsetForLeaderEpoch,
        4,
        RequestKind::OffsetForLeaderEpoch(r),
    ) else {
        panic!()
    };
    assert_eq!(
        x.topics[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );

    // Configs: the topic's (29), the broker's (31).
    for (resource_type, name_, code) in [
        (2i8, "orders", TOPIC_AUTHORIZATION_FAILED),
        (4, "1", CLUSTER_AUTHORIZATION_FAILED),
    ] {
        let mut res = describe_configs_request::DescribeConfigsResource::default();
        res.resource_type = resource_type;
        res.resource_name = s(name_);
        res.configuration_keys = None;
        let mut r = DescribeConfigsRequest::default();
        r.resources.push(res);
        let ResponseKind::DescribeConfigs(x) = ask(
            &mut alice,
            ApiKey::DescribeConfigs,
            4,
            RequestKind::DescribeConfigs(r),
        ) else {
            panic!()
        };
        assert_eq!(x.results[0].error_code, code);

        let mut res = alter_configs_request::AlterConfigsResource::default();
        res.resource_type = resource_type;
        res.resource_name = s(name_);
        let mut r = AlterConfigsRequest::default();
        r.resources.push(res);
        let ResponseKind::AlterConfigs(x) = ask(
            &mut alice,
            ApiKey::AlterConfigs,
            2,
            RequestKind::AlterConfigs(r),
        ) else {
            panic!()
        };
        assert_eq!(x.responses[0].error_code, code);

        let mut res = incremental_alter_configs_request::AlterConfigsResource::default();
        res.resource_type = resource_type;
        res.resource_name = s(name_);
        let mut r = IncrementalAlterConfigsRequest::default();
        r.resources.push(res);
        let ResponseKind::IncrementalAlterConfigs(x) = ask(
            &mut alice,
            ApiKey::IncrementalAlterConfigs,
            1,
            RequestKind::IncrementalAlterConfigs(r),
        ) else {
            panic!()
        };
        assert_eq!(x.responses[0].error_code, code);
    }

    // The cluster: DescribeLogDirs (31 from v3).
    let ResponseKind::DescribeLogDirs(x) = ask(
        &mut alice,
        ApiKey::DescribeLogDirs,
        4,
        RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
    ) else {
        panic!()
    };
    assert_eq!(
        (x.error_code, x.results.len()),
        (CLUSTER_AUTHORIZATION_FAILED, 0)
    );

    // Transactions: AddPartitionsToTxn and EndTxn (53).
    let mut at = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default();
    at.name = t();
    at.partitions = vec![0];
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = TransactionalId(s("t1"));
    r.v3_and_below_producer_id = ProducerId(1);
    r.v3_and_below_topics.push(at);
    let ResponseKind::AddPartitionsToTxn(x) = ask(
        &mut alice,
        ApiKey::AddPartitionsToTxn,
        3,
        RequestKind::AddPartitionsToTxn(r),
    ) else {
        panic!()
    };
    assert_eq!(
        x.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    let mut r = EndTxnRequest::default();
    r.transactional_id = TransactionalId(s("t1"));
    r.producer_id = ProducerId(1);
    let ResponseKind::EndTxn(x) = ask(&mut alice, ApiKey::EndTxn, 3, RequestKind::EndTxn(r)) else {
        panic!()
    };
    assert_eq!(x.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);

    // Groups: GROUP_AUTHORIZATION_FAILED (30); ListGroups lists none of them.
    assert_eq!(
        broker_support::requests::commit(&mut alice, 8, "g", -1, &[("orders", 0, 2, "")]),
        vec![GROUP_AUTHORIZATION_FAILED]
    );
    let mut r = OffsetFetchRequest::default();
    r.group_id = broker_support::requests::group("g");
    r.topics = None;
    let ResponseKind::OffsetFetch(x) = ask(
        &mut alice,
        ApiKey::OffsetFetch,
        7,
        RequestKind::OffsetFetch(r),
    ) else {
        panic!()
    };
    assert_eq!(x.error_code, GROUP_AUTHORIZATION_FAILED);
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![broker_support::requests::group("g")];
    let ResponseKind::DescribeGroups(x) = ask(
        &mut alice,
        ApiKey::DescribeGroups,
        5,
        RequestKind::DescribeGroups(r),
    ) else {
        panic!()
    };
    assert_eq!(x.groups[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = vec![broker_support::requests::group("g")];
    let ResponseKind::DeleteGroups(x) = ask(
        &mut alice,
        ApiKey::DeleteGroups,
        2,
        RequestKind::DeleteGroups(r),
    ) else {
        panic!()
    };
    assert_eq!(x.results[0].error_code, GROUP_AUTHORIZATION_FAILED);
    // The membership APIs of both protocols, and the transactional offsets.
    assert_eq!(
        broker_support::members::join(&mut alice, "g", "", None, 10_000, "range").error,
        GROUP_AUTHORIZATION_FAILED
    );
    assert_eq!(
        broker_support::members::sync(&mut alice, "g", "m", 1, &[]).0,
        GROUP_AUTHORIZATION_FAILED
    );
    assert_eq!(
        broker_support::members::heartbeat(&mut alice, "g", "m", None, 1),
        GROUP_AUTHORIZATION_FAILED
    );
    let mut r = LeaveGroupRequest::default();
    r.group_id = broker_support::requests::group("g");
    r.member_id = s("m");
    let ResponseKind::LeaveGroup(x) = ask(
        &mut alice,
        ApiKey::LeaveGroup,
        2,
        RequestKind::LeaveGroup(r),
    ) else {
        panic!()
    };
    assert_eq!(x.error_code, GROUP_AUTHORIZATION_FAILED);
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = broker_support::requests::group("g");
    r.member_id = s("m");
    r.rebalance_timeout_ms = 1000;
    r.subscribed_topic_names = Some(vec![broker_support::requests::name("orders")]);
    r.topic_partitions = Some(Vec::new());
    let ResponseKind::ConsumerGroupHeartbeat(x) = ask(
        &mut alice,
        ApiKey::ConsumerGroupHeartbeat,
        1,
        RequestKind::ConsumerGroupHeartbeat(r),
    ) else {
        panic!()
    };
    assert_eq!(x.error_code, GROUP_AUTHORIZATION_FAILED);
    let mut r = ConsumerGroupDescribeRequest::default();
    r.group_ids = vec![broker_support::requests::group("g")];
    let ResponseKind::ConsumerGroupDescribe(x) = ask(
        &mut alice,
        ApiKey::ConsumerGroupDescribe,
        0,
        RequestKind::ConsumerGroupDescribe(r),
    ) else {
        panic!()
    };
    assert_eq!(x.groups[0].error_code, GROUP_AUTHORIZATION_FAILED);
    let mut r = AddOffsetsToTxnRequest::default();
    r.transactional_id = TransactionalId(s("t1"));
    r.producer_id = ProducerId(1);
    r.group_id = broker_support::requests::group("g");
    let ResponseKind::AddOffsetsToTxn(x) = ask(
        &mut alice,
        ApiKey::AddOffsetsToTxn,
        3,
        RequestKind::AddOffsetsToTxn(r),
    ) else {
        panic!()
    };
    assert_eq!(x.error_code, TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = TransactionalId(s("t1"));
    r.producer_id = ProducerId(1);
    r.group_id = broker_support::requests::group("g");
    let mut t =
        kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic::default();
    t.name = broker_support::requests::name("orders");
    let mut p =
        kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
    p.committed_offset = 2;
    t.partitions.push(p);
    r.topics.push(t);
    let ResponseKind::TxnOffsetCommit(x) = ask(
        &mut alice,
        ApiKey::TxnOffsetCommit,
        3,
        RequestKind::TxnOffsetCommit(r),
    ) else {
        panic!()
    };
    assert_eq!(
        x.topics[0].partitions[0].error_code,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    );
    let ResponseKind::ListGroups(x) = ask(
        &mut alice,
        ApiKey::ListGroups,
        5,
        RequestKind::ListGroups(ListGroupsRequest::default()),
    ) else {
        panic!()
    };
    assert!(x.groups.is_empty());
    let ResponseKind::ListGroups(x) = ask(
        &mut admin,
        ApiKey::ListGroups,
        5,
        RequestKind::ListGroups(ListGroupsRequest::default()),
    ) else {
        panic!()
    };
    assert_eq!(x.groups.len(), 1);
    // Nothing was changed by any of them.
    assert_eq!(
        broker_support::requests::fetch_offsets(&mut admin, "g", "orders", 1)[0].0,
        1
    );
}
