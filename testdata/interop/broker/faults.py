"""SIGKILL across processes while mirroring and producing. Run by crates/mirrorlog-broker/tests/broker_faults.rs;
see harness.py. Replayable: the seed is printed and taken from MIRRORLOG_SEED.

A (source) takes a librdkafka idempotent producer (acks=all, retrying across restarts) and a
transactional one committing in turns; B mirrors A. At random moments the source or the
destination broker is killed with SIGKILL and restarted on the same ports. Afterwards:
- every acknowledged record is in A exactly once (the producers' retries after a restart are
  recognised as duplicates by the recovered producer state), and every committed transaction
  is visible at read_committed;
- B resumed mirroring by itself after each kill and stores A's log byte for byte;
- both data directories pass `mirrorlog verify`.
"""

import os
import random
import sys
import threading
import time

from confluent_kafka import Producer

from harness import Broker, consume, create_topic, same_batches

KILLS = int(os.environ.get("MIRRORLOG_BROKER_KILLS", "6"))


def main():
    seed = int(os.environ.get("MIRRORLOG_SEED", str(random.randrange(1 << 32))))
    print(f"seed {seed} (replay with MIRRORLOG_SEED={seed})", flush=True)
    rng = random.Random(seed)
    a, b = Broker("fault-a").start(), Broker("fault-b").start()
    create_topic(a.kafka, "f", 2)
    b.mirror("a", a, ["f"])

    stop = threading.Event()
    acked, failed = [], []
    committed = []

    def idempotent():
        p = Producer({"bootstrap.servers": a.kafka, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 2, "message.timeout.ms": 300000,
                      "reconnect.backoff.max.ms": 200})

        def ack(err, msg):
            (failed if err else acked).append(err or msg.value())

        i = 0
        while not stop.is_set():
            p.produce("f", value=f"i-{i}".encode(), partition=i % 2, on_delivery=ack)
            i += 1
            if i % 20 == 0:
                p.poll(0.005)
        assert p.flush(300) == 0, "idempotent producer did not drain"

    def transactional():
        p = Producer({"bootstrap.servers": a.kafka, "transactional.id": "fault-txn",
                      "linger.ms": 2, "message.timeout.ms": 300000,
                      "transaction.timeout.ms": 300000, "reconnect.backoff.max.ms": 200})
        p.init_transactions(120)
        n = 0
        while not stop.is_set():
            vals = [f"t-{n}-{i}".encode() for i in range(10)]
            try:
                p.begin_transaction()
                for i, v in enumerate(vals):
                    p.produce("f", value=v, partition=i % 2)
                p.commit_transaction(120)
                committed.extend(vals)
            except Exception as e:  # a kill mid-transaction: abort and go on
                err = e.args[0] if e.args else None
                if err is not None and hasattr(err, "txn_requires_abort") and err.txn_requires_abort():
                    p.abort_transaction(120)
                elif err is not None and hasattr(err, "retriable") and err.retriable():
                    continue
                else:
                    raise
            n += 1

    threads = [threading.Thread(target=idempotent), threading.Thread(target=transactional)]
    for t in threads:
        t.start()
    kills = []
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.3, 1.5))
        victim = rng.choice([a, b])
        victim.kill()
        kills.append(victim.name)
        time.sleep(rng.uniform(0.05, 0.4))
        victim.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(timeout=600)
        assert not t.is_alive(), "a producer thread hung"
    assert not failed, f"deliveries failed: {failed[:3]}"
    b.wait_caught_up("a", a, "f", timeout_s=120)

    values = [v for (_, _, _, v, _) in consume(a.kafka, "f", 2, "read_committed")]
    idem = [v for v in values if v.startswith(b"i-")]
    assert len(idem) == len(set(idem)), \
        f"duplicated records: {len(idem) - len(set(idem))}"
    missing = set(acked) - set(idem)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    missing_txn = set(committed) - set(values)
    assert not missing_txn, f"{len(missing_txn)} committed transactional records lost"
    a.stop()
    b.stop()
    same_batches(b, a, "f", 2)
    a.verify()
    b.verify()
    print(f"ok faults: kills {kills}; {len(acked)} acknowledged and {len(committed)} committed "
          f"records, none lost or duplicated; B byte-identical to A")


if __name__ == "__main__":
    sys.exit(main())
