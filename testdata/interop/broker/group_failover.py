"""Failover with group offsets (KIP-1279's group offset sync), real clients only.

A librdkafka group consumer (`subscribe()`) consumes on A while B mirrors A and syncs the
group's committed offsets every 500 ms. After the failover the same group, consuming on B,
resumes where it committed on A: no record skipped, and none read twice (it committed before
the failover, so B's synced offsets are its own). Then B fails back to A (A mirrors B, the
offsets flow back), and the group resumes on A at what it committed on B, the same way.

Usage: python group_failover.py   (crates/mirrorlog-broker/tests/mirror_groups.rs)
"""

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from harness import Broker

QUIET = {"log_level": 3}
TOPIC = "events"
PARTITIONS = 3
SYNC_MS = 500
SETTINGS = ["--set", "offsets.topic.num.partitions=3",
            "--set", "group.initial.rebalance.delay.ms=0"]


def produce(b, prefix, n):
    p = Producer({"bootstrap.servers": b.kafka, **QUIET})
    for i in range(n):
        p.produce(TOPIC, value=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def consumer(b):
    c = Consumer({"bootstrap.servers": b.kafka, "group.id": "app", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000, **QUIET})
    c.subscribe([TOPIC])
    return c


def consume(b, n, timeout_s=60):
    """The group consumes `n` records on `b`, commits them and leaves: (partition, offset,
    value) each, and the first offset it read per partition."""
    c = consumer(b)
    got, first = [], {}
    deadline = time.time() + timeout_s
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert not m.error(), m.error()
        first.setdefault(m.partition(), m.offset())
        got.append((m.partition(), m.offset(), m.value().decode()))
    assert len(got) == n, f"consumed {len(got)} of {n} on {b.name}"
    c.commit(asynchronous=False)
    c.close()
    return got, first


def committed(b):
    """The group's committed offsets on `b` (a partition without one: 0, where it starts)."""
    c = Consumer({"bootstrap.servers": b.kafka, "group.id": "app", **QUIET})
    got = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
    c.close()
    return {tp.partition: max(tp.offset, 0) for tp in got}


def wait_synced(dst, src, timeout_s=30):
    """Until `dst` has the group's offsets `src` has; how long it took."""
    want, t0 = committed(src), time.time()
    while time.time() < t0 + timeout_s:
        if committed(dst) == want:
            return time.time() - t0
        time.sleep(0.1)
    raise AssertionError(f"{dst.name} has {committed(dst)}, not {want}: {dst.admin('GET', '/mirrors')}")


def mirror(dst, name, src):
    dst.admin("POST", "/mirrors", {"name": name, "bootstrap": src.kafka, "topics": [TOPIC],
                                   "group_sync_ms": SYNC_MS})


def main():
    a = Broker("gf-a", extra=SETTINGS).start()
    b = Broker("gf-b", extra=SETTINGS).start()
    KafkaAdminClient(bootstrap_servers=a.kafka).create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    produce(a, "a", 300)
    mirror(b, "a", a)

    # The group consumes on A; B syncs its offsets.
    on_a, _ = consume(a, 150)
    took = wait_synced(b, a)
    print(f"  B synced the group's offsets {took:.1f}s after its commit on A", flush=True)
    produce(a, "a-late", 60)
    b.wait_caught_up("a", a, TOPIC)

    # Failover: the group resumes on B exactly where it committed on A.
    at_failover = committed(b)
    b.failover("a")
    on_b, first = consume(b, 210)
    # Where each partition resumed: at the committed offset (a record at the log end would be
    # the stop's barrier, which consumers skip).
    assert all(first[p] >= at_failover[p] for p in first), (first, at_failover)
    seen_a = {v for (_, _, v) in on_a}
    seen_b = {v for (_, _, v) in on_b}
    assert not seen_a & seen_b, "records read twice across the failover"
    want = {f"a-{i}" for i in range(300)} | {f"a-late-{i}" for i in range(60)}
    assert seen_a | seen_b == want, f"{len(want - seen_a - seen_b)} records skipped"
    print("ok after the failover the group resumed on B at its committed offsets: nothing "
          "skipped, nothing read twice", flush=True)

    # The group goes on at B; then failback: A mirrors B, the offsets flow back.
    produce(b, "b", 90)
    on_b2, _ = consume(b, 45)
    mirror(a, "b", b)
    a.wait_caught_up("b", b, TOPIC)
    wait_synced(a, b)
    at_failback = committed(a)
    a.failover("b")
    on_a2, first = consume(a, 45)
    assert all(first[p] >= at_failback[p] for p in first), (first, at_failback)
    seen = {v for (_, _, v) in on_b2} | {v for (_, _, v) in on_a2}
    assert len(seen) == 90 and all(v.startswith("b-") for v in seen), sorted(seen)[:5]
    print("ok after the failback the group resumed on A at what it committed on B", flush=True)
    a.stop()
    b.stop()
    print("group_failover: ok")


if __name__ == "__main__":
    main()
