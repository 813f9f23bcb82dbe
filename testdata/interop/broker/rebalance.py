"""Consumer groups rebalancing with librdkafka: three consumers of one group on a
12-partition topic join one by one and leave one by one, with the classic protocol's eager
assignor (`range`) and cooperative one (`cooperative-sticky`), and with KIP-848's consumer
protocol (`group.protocol=consumer`: the broker assigns, `uniform`).

- After each join and each leave, once the group settles, every partition has exactly one
  owner and the owners share the partitions evenly.
- Records produced between the steps are all consumed (at least once; each consumer commits
  what it processed before it gives partitions up, so none is lost).
- The committed offsets survive a broker SIGKILL and restart: a new consumer of the group
  resumes at them, consuming nothing twice.

Usage: python rebalance.py   (crates/mirrorlog-broker/tests/broker_groups.rs)
"""

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from harness import Broker

QUIET = {"log_level": 3}
PARTITIONS = 12
SETTLE_S = 60


class Member:
    """A consumer, its name, and the set of (partition, offset) consumed that it adds to."""

    def __init__(self, c, name, seen):
        self.c, self.name, self.seen = c, name, seen

    def poll(self, t):
        return self.c.poll(t)

    def assignment(self):
        return self.c.assignment()

    def commit(self, **kw):
        return self.c.commit(**kw)

    def committed(self, *a):
        return self.c.committed(*a)

    def close(self):
        self.c.close()


def consumer(bootstrap, group, strategy, name, seen, topic):
    def on_revoke(cons, parts):
        # Commit what was processed before the partitions go (eager: all; cooperative: those).
        try:
            cons.commit(asynchronous=False)
        except Exception as e:  # _NO_OFFSET: nothing consumed since the last commit
            if "NO_OFFSET" not in str(e):
                raise

    if strategy == "consumer":
        # KIP-848: the broker assigns; sessions and heartbeats are its settings.
        protocol = {"group.protocol": "consumer"}
    else:
        protocol = {"partition.assignment.strategy": strategy,
                    "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  **protocol, **QUIET})
    c.subscribe([topic], on_revoke=on_revoke)
    return Member(c, name, seen)


def pump(consumers, seconds):
    end = time.time() + seconds
    while time.time() < end:
        for c in consumers:
            m = c.poll(0.05)
            if m is None:
                continue
            assert not m.error(), m.error()
            c.seen.add((m.partition(), m.offset()))


def settle(consumers, why):
    """Polls every consumer until each partition has exactly one owner, shared evenly."""
    deadline = time.time() + SETTLE_S
    while time.time() < deadline:
        pump(consumers, 0.5)
        owned = [sorted(p.partition for p in c.assignment()) for c in consumers]
        flat = [p for o in owned for p in o]
        even = max(len(o) for o in owned) - min(len(o) for o in owned) <= 1
        if sorted(flat) == list(range(PARTITIONS)) and even:
            print(f"  {why}: settled, {[len(o) for o in owned]}", flush=True)
            return owned
    raise AssertionError(f"{why}: not settled in {SETTLE_S}s: {owned}")


def commit_all(consumers):
    for c in consumers:
        if c.assignment():
            try:
                c.commit(asynchronous=False)
            except Exception as e:
                assert "NO_OFFSET" in str(e), e


def run(b, strategy):
    group, topic, topic_records = f"g-{strategy}", f"orders-{strategy}", []
    KafkaAdminClient(bootstrap_servers=b.kafka).create_topics([NewTopic(topic, PARTITIONS, 1)])
    p = Producer({"bootstrap.servers": b.kafka, **QUIET})

    def produce(n):
        for i in range(n):
            p.produce(topic, value=b"x", partition=(len(topic_records) + i) % PARTITIONS)
        assert p.flush(30) == 0
        topic_records.extend(range(n))

    seen = set()
    active = []
    for name in ("c1", "c2", "c3"):
        produce(120)
        active.append(consumer(b.kafka, group, strategy, name, seen, topic))
        settle(active, f"{strategy}: {name} joined")
    for _ in range(2):
        produce(120)
        pump(active, 2)
        gone = active.pop()
        commit_all([gone])
        gone.close()
        settle(active, f"{strategy}: {gone.name} left")
    produce(120)
    deadline = time.time() + 30
    while len(seen) < len(topic_records) and time.time() < deadline:
        pump(active, 0.5)
    assert len(seen) == len(topic_records), \
        f"{strategy}: consumed {len(seen)} distinct records of {len(topic_records)}"
    commit_all(active)
    committed = active[0].committed([TopicPartition(topic, i) for i in range(PARTITIONS)], 30)
    for c in active:
        c.close()
    return group, topic, {tp.partition: tp.offset for tp in committed}


def main():
    b = Broker("rebalance", extra=["--set", "offsets.topic.num.partitions=5",
                                   "--set", "group.initial.rebalance.delay.ms=0",
                                   "--set", "group.consumer.heartbeat.interval.ms=500"]).start()
    results = [run(b, s) for s in ("range", "cooperative-sticky", "consumer")]

    b.kill()
    b.start()
    for group, topic, offsets in results:
        assert sum(offsets.values()) == 120 * 6, offsets
        seen = set()
        c = consumer(b.kafka, group, "range", "after-restart", seen, topic)
        got = c.committed([TopicPartition(topic, i) for i in range(PARTITIONS)], 30)
        assert {tp.partition: tp.offset for tp in got} == offsets, (got, offsets)
        settle([c], f"{group} after SIGKILL")
        pump([c], 3)
        assert not seen, f"{group}: consumed {len(seen)} records again after the restart"
        c.close()
        print(f"  {group}: offsets survived SIGKILL, nothing consumed twice", flush=True)
    b.stop()
    print("rebalance: ok")


if __name__ == "__main__":
    main()
