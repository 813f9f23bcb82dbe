"""Group offsets with real clients (the part served so far): consumers that assign
their partitions and commit under a group id, and the admin clients' group calls.

- librdkafka: a consumer with `group.id` assigns a 3-partition topic, reads part of it and
  commits synchronously; `committed()` answers those offsets; a second consumer of the same
  group assigning the partitions at the stored offset resumes exactly there; the broker is
  killed (SIGKILL) and restarted, and the offsets are still committed.
- kafka-python: a consumer with `group_id` commits explicit offsets and reads them back with
  `committed()`; its admin client lists the groups, lists a group's offsets and deletes a
  group.

Usage: python groups.py   (crates/mirrorlog-broker/tests/broker_groups.rs)
"""

from confluent_kafka import OFFSET_STORED, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from harness import SCRATCH, Broker

QUIET = {"log_level": 3}
TOPIC = "events"


def librdkafka_consumer(bootstrap, group):
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "enable.partition.eof": True, **QUIET})


def read(c, n):
    """Up to `n` records (fewer if every partition reached its end), as (partition, offset)."""
    got, eof = [], set()
    while len(got) < n and len(eof) < 3:
        m = c.poll(10)
        assert m is not None, "no message in 10 s"
        if m.error():
            assert m.error().code() == -191, m.error()  # _PARTITION_EOF
            eof.add(m.partition())
            continue
        got.append((m.partition(), m.offset()))
    return got


def main():
    b = Broker("g", extra=["--set", "offsets.topic.num.partitions=5"]).start()
    admin = KafkaAdminClient(bootstrap_servers=b.kafka)
    admin.create_topics([NewTopic(TOPIC, 3, 1)])
    p = Producer({"bootstrap.servers": b.kafka, **QUIET})
    for n in range(300):
        p.produce(TOPIC, value=b"%d" % n, partition=n % 3)
    assert p.flush(30) == 0

    # librdkafka: read 90 records, commit, read the commit back. A consumer's synchronous commit
    # fails at once while its group coordinator is not yet known (_WAIT_COORD, retriable), so
    # it first asks for the committed offsets, which waits for the coordinator.
    c = librdkafka_consumer(b.kafka, "rk-group")
    none = c.committed([TopicPartition(TOPIC, i) for i in range(3)], timeout=30)
    assert [tp.offset for tp in none] == [-1001] * 3, none
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(3)])
    seen = read(c, 90)
    ends = {}
    for partition, offset in seen:
        ends[partition] = max(ends.get(partition, -1), offset + 1)
    c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset
                 for tp in c.committed([TopicPartition(TOPIC, i) for i in range(3)], timeout=10)}
    assert committed == {i: ends.get(i, -1001) for i in range(3)}, (committed, ends)
    c.close()
    print("ok librdkafka commits and reads its offsets", flush=True)

    # A second consumer of the group resumes at the stored offsets: nothing twice, no gap.
    c2 = librdkafka_consumer(b.kafka, "rk-group")
    c2.assign([TopicPartition(TOPIC, i, OFFSET_STORED) for i in range(3)])
    rest = read(c2, 1000)
    c2.close()
    firsts = {}
    for partition, offset in rest:
        firsts.setdefault(partition, offset)
    assert len(seen) + len(rest) == 300, (len(seen), len(rest))
    assert all(firsts[i] == ends.get(i, 0) for i in firsts), (firsts, ends)
    print("ok a second consumer resumes at the committed offsets", flush=True)

    b.kill()
    b.start()
    c3 = librdkafka_consumer(b.kafka, "rk-group")
    after = {tp.partition: tp.offset
             for tp in c3.committed([TopicPartition(TOPIC, i) for i in range(3)], timeout=30)}
    c3.close()
    assert after == committed, (after, committed)
    print("ok committed offsets survive SIGKILL", flush=True)

    # kafka-python: explicit commits, read back; the admin client's group calls.
    kc = KafkaConsumer(bootstrap_servers=b.kafka, group_id="kp-group",
                       enable_auto_commit=False)
    tps = [KTopicPartition(TOPIC, i) for i in range(3)]
    kc.assign(tps)
    kc.commit({tp: OffsetAndMetadata(10 * (tp.partition + 1), "kp", -1) for tp in tps})
    assert [kc.committed(tp) for tp in tps] == [10, 20, 30], [kc.committed(tp) for tp in tps]
    kc.close()
    print("ok kafka-python commits and reads its offsets", flush=True)

    admin = KafkaAdminClient(bootstrap_servers=b.kafka)
    listed = admin.list_groups()
    assert sorted((g["group_id"], g["group_state"]) for g in listed) == \
        [("kp-group", "Empty"), ("rk-group", "Empty")], listed
    # Both groups' offsets in one OffsetFetch (v8).
    offsets = admin.list_group_offsets({"kp-group": None, "rk-group": None})
    assert {tp.partition: om.offset for tp, om in offsets["kp-group"].items()} == \
        {0: 10, 1: 20, 2: 30}, offsets
    assert {tp.partition: om.offset for tp, om in offsets["rk-group"].items()} == \
        {p: o for p, o in committed.items() if o >= 0}, offsets
    deleted = admin.delete_groups(["kp-group"])
    assert deleted == {"kp-group": "OK"}, deleted
    left = [g["group_id"] for g in admin.list_groups()]
    assert left == ["rk-group"], left
    admin.close()
    print("ok kafka-python admin lists, reads and deletes groups", flush=True)
    b.stop()


def broker_log_tail(lines=40):
    """The broker's log, for a failure's diagnosis."""
    import glob
    import os
    import sys
    for path in sorted(glob.glob(os.path.join(SCRATCH, "g.*.log"))):
        with open(path, errors="replace") as f:
            text = [line for line in f if "TRACE" not in line]
        sys.stderr.write(f"--- {path} ---\n" + "".join(text[:lines] + ["...\n"] + text[-10:]))


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        broker_log_tail()
        raise
