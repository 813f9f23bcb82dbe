//! ACLs (issue 36): per principal, resource and operation, served by DescribeAcls, CreateAcls
//! and DeleteAcls and enforced on every request, by Kafka's rules and codes.
//!
//! A SASL_PLAINTEXT broker with users `admin` (a super user), `alice` and `bob`, and Kafka's
//! authorizer turned on: each request below is made as one of them over raw frames, and its
//! answer's code checked. ACLs survive a restart. Real clients' side (kafka-python's admin
//! client and librdkafka's, producers and consumers served and refused) is
//! `tests/interop/broker/acls.py`.

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
