"""ACLs with real clients: kafka-python's admin client and librdkafka's manage them,
producers and consumers of both are refused or served by them.

A SASL_PLAINTEXT broker (PLAIN; users admin, alice, bob) with Kafka's authorizer on and
`super.users=User:admin`. As admin, kafka-python creates a topic and ACLs (alice may WRITE
"orders"; bob may READ every topic starting "ord"), and describes them back. librdkafka's
producer as alice is served, as bob refused with TOPIC_AUTHORIZATION_FAILED; kafka-python's
consumer as bob reads what alice wrote, as alice is refused. librdkafka's admin client (as
admin) deletes alice's ACL, after which her produce is refused. A non-super user's CreateAcls
is refused with CLUSTER_AUTHORIZATION_FAILED.

Usage: python acls.py   (crates/mirrorlog-broker/tests/broker_acls.rs)
"""

import os

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType)
from confluent_kafka.admin import ResourceType as CResourceType
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient,
                         NewTopic, ResourcePattern, ResourcePatternFilter, ResourceType)
from kafka.admin import ACLResourcePatternType as Pattern
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError

from harness import SCRATCH, Broker

QUIET = {"log_level": 3}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def librdkafka(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-pw", **QUIET}


def kafka_python(user):
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": f"{user}-pw"}


def produce_one(bootstrap, user, value):
    """librdkafka's delivery result of one record to orders-0: None, or the error's code."""
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000,
                  **librdkafka(user)})
    result = []
    p.produce("orders", value=value, partition=0,
              on_delivery=lambda err, msg: result.append(err))
    p.flush(15)
    assert len(result) == 1, f"no delivery report for {user}"
    return None if result[0] is None else result[0].code()


def read_all(bootstrap, user):
    """kafka-python's consumer of orders-0 from the start: the values, or the error."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000,
                      **kafka_python(user))
    tp = TopicPartition("orders", 0)
    c.assign([tp])
    c.seek(tp, 0)
    try:
        return [m.value for m in c]
    except TopicAuthorizationFailedError as e:
        return e
    finally:
        c.close()


def main():
    users = os.path.join(SCRATCH, "users")
    with open(users, "w") as f:
        f.write("admin:admin-pw\nalice:alice-pw\nbob:bob-pw\n")
    b = Broker("acl", extra=["--set", "sasl.enabled.mechanisms=PLAIN",
                             "--set", f"sasl.users.file={users}",
                             "--set", f"authorizer.class.name={AUTHORIZER}",
                             "--set", "super.users=User:admin",
                             "--set", "auto.create.topics.enable=false"]).start()

    admin = KafkaAdminClient(bootstrap_servers=b.kafka, **kafka_python("admin"))
    admin.create_topics([NewTopic("orders", 1, 1)])
    created = admin.create_acls([
        ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "orders", Pattern.LITERAL)),
        ACL("User:bob", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "ord", Pattern.PREFIXED)),
    ])
    assert not created["failed"] and len(created["succeeded"]) == 2, created
    acls, error = admin.describe_acls(ACLFilter(
        None, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.TOPIC, "orders", Pattern.MATCH)))
    assert error.errno == 0, error
    seen = sorted((a.principal, a.operation.name, a.resource_pattern.resource_name,
                   a.resource_pattern.pattern_type.name) for a in acls)
    assert seen == [("User:alice", "WRITE", "orders", "LITERAL"),
                    ("User:bob", "READ", "ord", "PREFIXED")], seen
    print("ok kafka-python admin creates and describes ACLs", flush=True)

    # A user who is not a super user may not change ACLs.
    alice_admin = KafkaAdminClient(bootstrap_servers=b.kafka, **kafka_python("alice"))
    refused = alice_admin.create_acls([
        ACL("User:alice", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, "*", Pattern.LITERAL))])
    # kafka-python lists the error class of each failed creation.
    assert refused["failed"] == [ClusterAuthorizationFailedError], refused
    alice_admin.close()
    admin.close()
    print("ok CreateAcls refused to a non-super user", flush=True)

    assert produce_one(b.kafka, "alice", b"from alice") is None
    assert produce_one(b.kafka, "bob", b"from bob") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    print("ok librdkafka producer served and refused by ACL", flush=True)

    assert read_all(b.kafka, "bob") == [b"from alice"]
    assert isinstance(read_all(b.kafka, "alice"), TopicAuthorizationFailedError)
    print("ok kafka-python consumer served and refused by ACL", flush=True)

    ca = AdminClient({"bootstrap.servers": b.kafka, **librdkafka("admin")})
    futures = ca.delete_acls([AclBindingFilter(
        CResourceType.ANY, None, ResourcePatternType.ANY, "User:alice", None,
        AclOperation.ANY, AclPermissionType.ANY)])
    deleted = list(futures.values())[0].result(timeout=30)
    assert len(deleted) == 1 and deleted[0].name == "orders", deleted
    left = ca.describe_acls(AclBindingFilter(
        CResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY)).result(timeout=30)
    assert [(x.principal, x.name) for x in left] == [("User:bob", "ord")], left
    assert produce_one(b.kafka, "alice", b"again") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    print("ok librdkafka admin deletes an ACL and it takes effect", flush=True)
    b.stop()


if __name__ == "__main__":
    main()
