"""ACLs mirrored (`mirror/acl_sync.rs`), with librdkafka over SASL SCRAM.

Two SASL_PLAINTEXT brokers with Kafka's authorizer on, the same users (SCRAM credentials are
not ACLs; each cluster has its own), `super.users` admin and mirror. At the source A, admin
creates the ACLs of an application `app` (READ and WRITE on topic orders, READ on its group),
an ACL of a topic that is not mirrored and a cluster ACL. app produces and consumes with
commits there, over SCRAM-SHA-256 and SCRAM-SHA-512. B mirrors orders from A (its fetcher logs
in as mirror with SCRAM-SHA-512) with fast syncs; B has one ACL of its own.

- B gets app's ACLs, and not those out of the mirror's scope; its own ACL is kept;
- an ACL revoked at A goes from B too (the sync made it); B's own stays;
- after a failover the mirrored ACLs stay in force: app's consumer resumes in its group at B
  and its producer writes there, and a user without ACLs is refused, with no ACL made at B by
  hand;
- a failback (A mirrors B) brings back an ACL created at B after the failover; A's own ACLs
  stay.

`edges` (PLAINTEXT brokers, where every client is User:ANONYMOUS, a super user where an
authorizer is on): a mirror's `acl_filters` replace the scope (only transactional-id ACLs are
synced) and `acl_prune` removes the destination's own ACL in that scope; a filter naming no
Kafka value is refused with 400; a source without an authorizer is shown as SECURITY_DISABLED,
a destination without one as not syncing, and neither changes an ACL.

Usage: python acl_mirror.py [failover|edges]   (crates/mirrorlog-broker/tests/mirror_acls.rs)
"""

import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, NewTopic, ResourcePatternType,
                                   ResourceType)

from harness import SCRATCH, Broker

QUIET = {"log_level": 3}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
USERS = "admin:admin-pw\nmirror:mirror-pw\napp:app-pw\nnobody:nobody-pw\n"


def scram(user, mechanism="SCRAM-SHA-512"):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": f"{user}-pw", **QUIET}


def start(name, users):
    return Broker(name, extra=["--set", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                               "--set", f"sasl.users.file={users}",
                               "--set", f"authorizer.class.name={AUTHORIZER}",
                               "--set", "super.users=User:admin;User:mirror",
                               "--set", "auto.create.topics.enable=false"]).start()


def acl(principal, rtype, name, op, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def key(b):
    return (b.principal, b.restype.name, b.name, b.resource_pattern_type.name, b.operation.name)


def acls_of(broker):
    admin = AdminClient({"bootstrap.servers": broker.kafka, **scram("admin")})
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    return {key(b) for b in admin.describe_acls(every).result(timeout=30)}


def create_acls(broker, bindings):
    admin = AdminClient({"bootstrap.servers": broker.kafka, **scram("admin")})
    for f in admin.create_acls(bindings).values():
        f.result(timeout=30)


def delete_acl(broker, binding):
    admin = AdminClient({"bootstrap.servers": broker.kafka, **scram("admin")})
    f = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type,
                         binding.principal, binding.host, binding.operation,
                         binding.permission_type)
    for fut in admin.delete_acls([f]).values():
        assert len(fut.result(timeout=30)) == 1


def wait_for(what, check, timeout_s=30):
    deadline = time.time() + timeout_s
    while True:
        value = check()
        if value:
            return value
        assert time.time() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.2)


def produce(broker, user, n, first, mechanism="SCRAM-SHA-256"):
    """n records to orders as `user`; the delivery errors' codes (empty: all delivered)."""
    p = Producer({"bootstrap.servers": broker.kafka, "message.timeout.ms": 15000,
                  **scram(user, mechanism)})
    errors = []
    for i in range(first, first + n):
        p.produce("orders", value=b"order %d" % i, partition=i % 2,
                  on_delivery=lambda err, msg: err and errors.append(err.code()))
    p.flush(30)
    return errors


def consume(broker, user, want, timeout_s=30):
    """Up to `want` records of orders in group app-group as `user`, committing them: the
    values, or the first error's code."""
    c = Consumer({"bootstrap.servers": broker.kafka, "group.id": "app-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  **scram(user)})
    c.subscribe(["orders"])
    out = []
    deadline = time.time() + timeout_s
    try:
        while len(out) < want and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return m.error().code()
            out.append(m.value())
            c.commit(message=m, asynchronous=False)
    finally:
        c.close()
    return out


def scrape(broker):
    """The ACL sync's series of `broker`'s GET /metrics, parsed by Prometheus' own OpenMetrics
    parser: (name, mirror) -> value."""
    import urllib.request
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    with urllib.request.urlopen(f"http://{broker.admin_addr}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {(s.name, s.labels.get("mirror")): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.startswith("mirrorlog_mirror_acl")}


def committed(broker):
    """app-group's committed offsets of orders at `broker`, summed over its partitions."""
    c = Consumer({"bootstrap.servers": broker.kafka, "group.id": "app-group", **scram("admin")})
    try:
        got = c.committed([TopicPartition("orders", p) for p in range(2)], timeout=10)
    finally:
        c.close()
    return sum(max(tp.offset, 0) for tp in got)


def main():
    users = os.path.join(SCRATCH, "users")
    with open(users, "w") as f:
        f.write(USERS)
    password = os.path.join(SCRATCH, "mirror.password")
    with open(password, "w") as f:
        f.write("mirror-pw\n")
    a, b = start("a", users), start("b", users)
    admin_a = AdminClient({"bootstrap.servers": a.kafka, **scram("admin")})
    for f in admin_a.create_topics([NewTopic("orders", 2, 1), NewTopic("payments", 1, 1)],
                                   operation_timeout=30).values():
        f.result(timeout=30)
    app = [acl("User:app", ResourceType.TOPIC, "orders", AclOperation.READ),
           acl("User:app", ResourceType.TOPIC, "orders", AclOperation.WRITE),
           acl("User:app", ResourceType.GROUP, "app-group", AclOperation.READ)]
    outside = [acl("User:app", ResourceType.TOPIC, "payments", AclOperation.READ),
               acl("User:app", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)]
    create_acls(a, app + outside)
    assert produce(a, "app", 40, 0) == []
    assert produce(a, "nobody", 1, 0) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    seen = consume(a, "app", 30)
    assert len(seen) == 30, seen
    print("ok app served at the source over SCRAM", flush=True)

    b_own = acl("User:local", ResourceType.TOPIC, "orders", AclOperation.READ)
    create_acls(b, [b_own])
    b.admin("POST", "/mirrors", {
        "name": "a", "bootstrap": a.kafka, "topics": ["orders"], "group_sync_ms": 300,
        "acl_sync_ms": 300, "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "mirror",
        "sasl_password_file": password})
    b.wait_caught_up("a", a, "orders")
    want = {key(x) for x in app} | {key(b_own)}
    got = wait_for("the app's ACLs at b", lambda: acls_of(b) == want and acls_of(b))
    sync = b.admin("GET", "/mirrors")["mirrors"][0]["acl_sync"]
    assert sync["held"] == 3 and sync["last_error"] is None and sync["synced_at_ms"], sync
    series = scrape(b)
    assert series[("mirrorlog_mirror_acls_synced", "a")] == 3, series
    assert series[("mirrorlog_mirror_acl_sync_failing", "a")] == 0, series
    assert series[("mirrorlog_mirror_acl_sync_timestamp_seconds", "a")] > 1.7e9, series
    print(f"ok ACLs of the mirrored topic and group synced, the others not: {sorted(got)}",
          flush=True)

    temp = acl("User:temp", ResourceType.TOPIC, "orders", AclOperation.READ)
    create_acls(a, [temp])
    wait_for("temp at b", lambda: key(temp) in acls_of(b))
    delete_acl(a, temp)
    wait_for("temp revoked at b", lambda: key(temp) not in acls_of(b))
    assert acls_of(b) == want, acls_of(b)
    print("ok an ACL revoked at the source is revoked here; the destination's own is kept",
          flush=True)

    # app commits more at the source; the group sync carries its offsets to b.
    seen += consume(a, "app", 5)
    assert len(seen) == 35, seen
    wait_for("app-group's offsets at b", lambda: committed(b) == 35)
    b.failover("a")
    assert acls_of(b) == want, acls_of(b)
    sync = b.admin("GET", "/mirrors")
    assert sync["mirrors"] == [], sync
    rest = consume(b, "app", 5)
    assert isinstance(rest, list) and len(rest) == 5, rest
    assert sorted(seen + rest) == sorted(b"order %d" % i for i in range(40)), rest
    assert produce(b, "app", 4, 100, mechanism="SCRAM-SHA-512") == []
    assert produce(b, "nobody", 1, 0) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert consume(b, "nobody", 1) in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                       KafkaError.GROUP_AUTHORIZATION_FAILED)
    print("ok after the failover app is served at b by the mirrored ACLs; nobody is refused",
          flush=True)

    later = acl("User:app2", ResourceType.TOPIC, "orders", AclOperation.READ)
    create_acls(b, [later])
    plan = a.admin("POST", "/mirrors", {
        "name": "b", "bootstrap": b.kafka, "topics": ["orders"], "acl_sync_ms": 300,
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "mirror", "sasl_password_file": password})
    assert plan["mirror"] == "b", plan
    wait_for("app2 at a", lambda: key(later) in acls_of(a))
    have = acls_of(a)
    assert {key(x) for x in outside} <= have and {key(x) for x in app} <= have, have
    assert key(b_own) in have, "b's own ACL is b's, in the mirrored scope: synced back"
    print("ok a failback syncs the ACLs back; the old source's own are kept", flush=True)
    a.stop()
    b.stop()


def plain(name, authorizer):
    extra = ["--set", "auto.create.topics.enable=false"]
    if authorizer:
        extra += ["--set", f"authorizer.class.name={AUTHORIZER}",
                  "--set", "super.users=User:ANONYMOUS"]
    return Broker(name, extra=extra).start()


def anonymous_admin(broker):
    return AdminClient({"bootstrap.servers": broker.kafka, **QUIET})


def plain_acls(broker):
    admin = anonymous_admin(broker)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    return {key(b) for b in admin.describe_acls(every).result(timeout=30)}


def plain_create(broker, bindings):
    admin = anonymous_admin(broker)
    for f in admin.create_acls(bindings).values():
        f.result(timeout=30)


def plain_topic(broker, name="orders"):
    admin = anonymous_admin(broker)
    for f in admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30).values():
        f.result(timeout=30)


def acl_sync_of(broker, name):
    for m in broker.admin("GET", "/mirrors")["mirrors"]:
        if m["name"] == name:
            return m["acl_sync"]
    raise AssertionError(f"no mirror {name}")


def edges():
    s, d = plain("s", True), plain("d", True)
    plain_topic(s)
    txn = acl("User:app", ResourceType.TRANSACTIONAL_ID, "app-", AclOperation.WRITE,
              ResourcePatternType.PREFIXED)
    topic = acl("User:app", ResourceType.TOPIC, "orders", AclOperation.READ)
    plain_create(s, [txn, topic])
    own_txn = acl("User:local", ResourceType.TRANSACTIONAL_ID, "local", AclOperation.WRITE)
    own_topic = acl("User:local", ResourceType.TOPIC, "orders", AclOperation.READ)
    plain_create(d, [own_txn, own_topic])

    code, out = d.admin("POST", "/mirrors", {
        "name": "s", "bootstrap": s.kafka, "topics": ["orders"],
        "acl_filters": [{"operation": "READ_ALL"}]}, ok=False)
    assert code == 400 and "READ_ALL" in out["error"], (code, out)
    code, too_many = d.admin("POST", "/mirrors", {
        "name": "s", "bootstrap": s.kafka, "topics": ["orders"],
        "acl_filters": [{"resource_type": "TOPIC"}] * 65}, ok=False)
    assert code == 400 and "at most 64" in too_many["error"], (code, too_many)
    print(f"ok a filter naming no Kafka value refused: {out['error']}", flush=True)

    d.admin("POST", "/mirrors", {
        "name": "s", "bootstrap": s.kafka, "topics": ["orders"], "acl_sync_ms": 300,
        "acl_filters": [{"resource_type": "TRANSACTIONAL_ID"}], "acl_prune": True})
    want = {key(txn), key(own_topic)}
    wait_for("the filtered ACLs at d", lambda: plain_acls(d) == want)
    sync = acl_sync_of(d, "s")
    assert sync["scope"] == "filters" and sync["prune"] and sync["held"] == 1, sync
    assert sync["at_source"] == 1 and sync["removed"] == 1, sync
    print("ok acl_filters replace the scope and acl_prune removes what the source lacks",
          flush=True)

    c, e = plain("c", False), plain("e", False)
    plain_topic(c, "events")
    before = plain_acls(d)
    d.admin("POST", "/mirrors", {"name": "c", "bootstrap": c.kafka, "topics": ["events"],
                                 "acl_sync_ms": 300, "acl_prune": True})
    sync = wait_for("c's refusal shown",
                    lambda: (acl_sync_of(d, "c")["last_error"] or "") and acl_sync_of(d, "c"))
    assert "SECURITY_DISABLED" in sync["last_error"], sync
    assert plain_acls(d) == before
    e.admin("POST", "/mirrors", {"name": "s", "bootstrap": s.kafka, "topics": ["orders"],
                                 "acl_sync_ms": 300})
    sync = wait_for("e's reason shown",
                    lambda: (acl_sync_of(e, "s")["last_error"] or "") and acl_sync_of(e, "s"))
    assert "no authorizer here" in sync["last_error"], sync
    print(f"ok a source without an authorizer: {acl_sync_of(d, 'c')['last_error']}; "
          f"a destination without one: {sync['last_error']}", flush=True)
    for x in (s, d, c, e):
        x.stop()


if __name__ == "__main__":
    {"failover": main, "edges": edges}[sys.argv[1] if len(sys.argv) > 1 else "failover"]()
