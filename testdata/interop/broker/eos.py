"""Exactly once, read-process-write: a librdkafka consumer in a group reads `in`,
and a transactional producer writes each record's transform to `out` and commits the
consumer's offsets in the same transaction (`send_offsets_to_transaction`, which sends
AddOffsetsToTxn and TxnOffsetCommit). Every third transaction is aborted, and the consumer
rewinds to its committed offsets, as an application that failed mid-batch does.

- A `read_committed` consumer of `out` sees each input record exactly once.
- The group's committed offsets are the end of `in`, and were only ever those of committed
  transactions (an aborted transaction's offsets are never visible).
- Offsets stay committed across a broker SIGKILL and restart.

Usage: python eos.py   (crates/mirrorlog-broker/tests/broker_groups.rs)
"""

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from harness import Broker, consume

QUIET = {"log_level": 3}
PARTITIONS = 3
RECORDS = 600


def committed(c):
    got = c.committed([TopicPartition("in", p) for p in range(PARTITIONS)], timeout=30)
    return {tp.partition: tp.offset for tp in got}


def main():
    b = Broker("eos", extra=["--set", "offsets.topic.num.partitions=3",
                             "--set", "group.initial.rebalance.delay.ms=0"]).start()
    KafkaAdminClient(bootstrap_servers=b.kafka).create_topics(
        [NewTopic("in", PARTITIONS, 1), NewTopic("out", PARTITIONS, 1)])
    p = Producer({"bootstrap.servers": b.kafka, **QUIET})
    for n in range(RECORDS):
        p.produce("in", key=b"%d" % n, value=b"%d" % n, partition=n % PARTITIONS)
    assert p.flush(30) == 0

    c = Consumer({"bootstrap.servers": b.kafka, "group.id": "eos-app",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed", **QUIET})
    c.subscribe(["in"])
    tp = Producer({"bootstrap.servers": b.kafka, "transactional.id": "eos-app-1", **QUIET})
    tp.init_transactions(30)

    txns, aborted, deadline = 0, 0, time.time() + 120
    done = {}
    while time.time() < deadline:
        batch = c.consume(50, 1.0)
        batch = [m for m in batch if not m.error()]
        if not batch:
            if sum(committed(c).values()) == RECORDS:
                break
            continue
        tp.begin_transaction()
        for m in batch:
            tp.produce("out", key=m.key(), value=b"out-" + m.value(), partition=m.partition())
        tp.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        txns += 1
        if txns % 3 == 0:
            # Sent first, so that the aborted records are in the log (an abort drops what is
            # still queued in the client).
            assert tp.flush(30) == 0
            tp.abort_transaction(30)
            aborted += 1
            # The application failed this batch: back to the committed offsets.
            for part, off in committed(c).items():
                c.seek(TopicPartition("in", part, off if off >= 0 else 0))
        else:
            tp.commit_transaction(30)
            done = committed(c)
    else:
        raise AssertionError(f"not done in 120 s: committed {committed(c)}, "
                             f"position {c.position(c.assignment())}, {txns} transactions")
    print(f"  {txns} transactions, {aborted} aborted", flush=True)
    assert aborted >= 2, "too few aborts to mean anything"
    assert sum(done.values()) == RECORDS, done

    out = consume(b.kafka, "out", PARTITIONS, isolation="read_committed", want=RECORDS)
    values = sorted(int(v[4:]) for (_, _, _, v, _) in out)
    assert values == list(range(RECORDS)), \
        f"read_committed saw {len(values)} records, {len(set(values))} distinct"
    # The aborted transactions' records are in the log, invisible to read_committed.
    raw = consume(b.kafka, "out", PARTITIONS, isolation="read_uncommitted", want=RECORDS)
    assert len(raw) > RECORDS, "no aborted record in the log: the test aborted nothing"
    print(f"ok read_committed output holds each of {RECORDS} inputs exactly once "
          f"({len(raw) - RECORDS} aborted records hidden)", flush=True)
    c.close()

    b.kill()
    b.start()
    c = Consumer({"bootstrap.servers": b.kafka, "group.id": "eos-app", **QUIET})
    assert committed(c) == done, (committed(c), done)
    c.close()
    print("ok the committed offsets match the input and survive SIGKILL", flush=True)
    b.stop()
    print("eos: ok")


if __name__ == "__main__":
    main()
