"""Mirroring librdkafka's mock cluster as it ships in confluent-kafka (`test.mock.num.brokers`),
whose transaction markers carry CRC 0 (its mock does not compute it): the partition holding a
committed transaction fails at the first marker, with the reason on the admin surface, after
storing the data before it; a partition of plain idempotent data beside it mirrors whole.

Usage: python mock_source.py markers   (crates/mirrorlog-broker/tests/mirror_real_sources.rs runs it)
"""

import sys
import time

from confluent_kafka import Producer

from harness import Broker

QUIET = {"log_level": 3}


class Source:
    """A mirror's source as the harness names one: its bootstrap list."""

    def __init__(self, kafka):
        self.kafka = kafka


def markers():
    # The anchor client starts the mock cluster, which lives as long as it.
    anchor = Producer({"test.mock.num.brokers": 3, **QUIET})
    brokers = anchor.list_topics(timeout=10).brokers.values()
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in brokers)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "t1", **QUIET})
    txn.init_transactions(30)
    txn.begin_transaction()
    for n in range(10):
        txn.produce("txn", value=b"in a transaction %d" % n, key=b"k%d" % n, partition=0)
    txn.commit_transaction(30)
    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **QUIET})
    for n in range(10):
        plain.produce("txn", value=b"plain %d" % n, key=b"k%d" % n, partition=1)
    assert plain.flush(30) == 0
    b = Broker("dst").start()
    b.mirror("mock", Source(bootstrap), ["txn"])
    deadline = time.time() + 60
    while True:
        parts = {p["partition"]: p for p in b.admin("GET", "/mirrors")["mirrors"][0]["partitions"]}
        p0, p1 = parts.get(0, {}), parts.get(1, {})
        reason = p0.get("stalled") or ""
        if "crc" in reason and p1.get("log_end") == 10:
            assert "failed" in reason, reason
            # The ten records before the marker are stored; nothing from the marker on.
            assert p0["log_end"] == 10, p0
            print(f"ok mock markers: {reason}")
            break
        assert time.time() < deadline, parts
        time.sleep(0.2)
    b.stop()


if __name__ == "__main__":
    {"markers": markers}[sys.argv[1]]()
