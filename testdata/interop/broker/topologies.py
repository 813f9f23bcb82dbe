"""KIP-1279's topologies across processes: each broker its own mirrorlog-broker process on
loopback, mirroring over the real Fetch protocol, driven from the admin surface, with librdkafka
producers and consumers. Run by crates/mirrorlog-broker/tests/broker_topologies.rs; see harness.py.

- active-passive A→B: an idempotent and a transactional producer on A while B mirrors; failover
  with a transaction open (B aborts it and writes its barrier); fresh producers on B, whose ids
  collide with A's, are accepted; a consumer on B reads A's committed records then B's, each once,
  in order; B stores A's batches byte for byte up to its last mirrored offset;
- failback B→A and back, three times: the side that starts mirroring is truncated where the
  other stopped (records written after the failover are dropped), then stores the other's log
  byte for byte, barriers included, and clears its producers only at its own stop;
- fan-out A→B, A→C: independent destinations; stopping B leaves C mirroring;
- fan-in A→C (topic x), B→C (topic y): stopping one mirror writes barriers only in its topic;
- chain A→B→C with failover in the middle: C stores B's barrier as-is without clearing its
  producers, then B's new records;
- a source whose log start moved (DeleteRecords inside a batch) into an empty destination: the
  destination realigns (counted), starts at the source's log start and stores the rest byte for
  byte; then pause (no progress while the source grows) and resume (catches up).
Every data directory passes `mirrorlog verify` at the end.
"""

import sys
import threading
import time

from confluent_kafka import Producer

from harness import Broker, barrier_at, consume, create_topic, same_batches


def create(b, name, partitions):
    create_topic(b.kafka, name, partitions)


def produce(b, topic, values, partitions, **conf):
    p = Producer(dict({"bootstrap.servers": b.kafka, "enable.idempotence": True,
                       "linger.ms": 2}, **conf))
    errors = []
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions,
                  on_delivery=lambda e, m: e and errors.append(e))
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]


def read_all(b, topic, partitions, isolation="read_committed", timeout_s=60):
    """Each partition's values, in offset order."""
    out = {p: [] for p in range(partitions)}
    for (p, _, _, v, _) in consume(b.kafka, topic, partitions, isolation, timeout_s=timeout_s):
        out[p].append(v)
    return out


def producers(b, topic):
    return {p["partition"]: p["producers"] for p in b.partitions(topic)}


def active_passive_and_failback():
    a, bb = Broker("ap-a").start(), Broker("ap-b").start()
    create(a, "orders", 2)
    produce(a, "orders", [f"a-pre-{i}".encode() for i in range(500)], 2)
    # B starts mirroring while an idempotent and a transactional producer write to A.
    stop = threading.Event()
    sent_live = []

    def live():
        p = Producer({"bootstrap.servers": a.kafka, "enable.idempotence": True, "linger.ms": 1})
        i = 0
        while not stop.is_set():
            v = f"a-live-{i}".encode()
            p.produce("orders", value=v, partition=i % 2)
            sent_live.append(v)
            i += 1
            if i % 50 == 0:
                p.flush(30)
                time.sleep(0.01)
        assert p.flush(60) == 0

    t = threading.Thread(target=live)
    t.start()
    txp = Producer({"bootstrap.servers": a.kafka, "transactional.id": "ap-txn", "linger.ms": 1})
    txp.init_transactions(30)
    committed = []
    bb.mirror("a", a, ["orders"])
    for round_ in range(4):
        txp.begin_transaction()
        vals = [f"a-txn-{round_}-{i}".encode() for i in range(40)]
        for i, v in enumerate(vals):
            txp.produce("orders", value=v, partition=i % 2)
        txp.flush(30)
        if round_ % 2 == 0:
            txp.commit_transaction(30)
            committed += vals
        else:
            txp.abort_transaction(30)
    stop.set()
    t.join()
    # A transaction left open at the failover.
    txp.begin_transaction()
    for i in range(10):
        txp.produce("orders", value=f"a-open-{i}".encode(), partition=i % 2)
    txp.flush(30)
    bb.wait_caught_up("a", a, "orders")
    out = bb.failover("a")["stopped"]
    last = {s["partition"]: s["last_mirrored_offset"] for s in out}
    assert all(s["aborted_producers"] for s in out), f"the open transaction was not aborted: {out}"
    for s in out:
        barrier_at(bb, "orders", s["partition"], s["barrier_offset"])
    assert all(n == 0 for n in producers(bb, "orders").values()), producers(bb, "orders")
    same_batches(bb, a, "orders", 2, upto=last)
    # Fresh producers on B: B's allocator starts where A's did, so the ids collide with A's.
    produce(bb, "orders", [f"b-{i}".encode() for i in range(300)], 2)
    txb = Producer({"bootstrap.servers": bb.kafka, "transactional.id": "ap-txn-b"})
    txb.init_transactions(30)
    txb.begin_transaction()
    for i in range(20):
        txb.produce("orders", value=f"b-txn-{i}".encode(), partition=i % 2)
    txb.commit_transaction(30)
    got = read_all(bb, "orders", 2)
    want_a = {f"a-pre-{i}".encode() for i in range(500)} | set(sent_live) | set(committed)
    for p, values in got.items():
        seen_b = False
        for v in values:
            if v.startswith(b"b-"):
                seen_b = True
            else:
                assert not seen_b, f"an A record after B's on partition {p}: {v}"
        assert len(values) == len(set(values)), f"duplicates on partition {p}"
    every = [v for vs in got.values() for v in vs]
    assert {v for v in every if not v.startswith(b"b-")} == want_a, "A's committed records differ"
    assert sum(1 for v in every if v.startswith(b"b-")) == 320
    assert not any(v.startswith(b"a-open") or v.startswith(b"a-txn-1") or v.startswith(b"a-txn-3")
                   for v in every)
    print(f"ok active-passive: {len(want_a)} A records then 320 B records on B, each once, in order")

    # Failback, three times: the mirroring side is truncated where the other stopped.
    src, dst, src_name = bb, a, "b"
    for n in range(3):
        # Written to the old source after the failover: never seen by the other side.
        produce(dst, "orders", [f"lost-{n}-{i}".encode() for i in range(30)], 2)
        dst.mirror(src_name, src, ["orders"])
        dst.wait_caught_up(src_name, src, "orders")
        same_batches(dst, src, "orders", 2)
        before = producers(dst, "orders")
        assert any(before.values()), "mirrored producers should be tracked"
        out = dst.failover(src_name)["stopped"]
        for s in out:
            barrier_at(dst, "orders", s["partition"], s["barrier_offset"])
        assert all(v == 0 for v in producers(dst, "orders").values())
        produce(dst, "orders", [f"back-{n}-{i}".encode() for i in range(50)], 2)
        got = read_all(dst, "orders", 2)
        every = [v for vs in got.values() for v in vs]
        assert not any(v.startswith(b"lost-") for v in every), "a truncated record came back"
        assert len(every) == len(set(every))
        src, dst = dst, src
        src_name = "a" if src is a else "b"
    print("ok failback three times: truncated at the other side's last mirrored offset, "
          "byte-identical, barriers at each stop")
    for b in (a, bb):
        b.stop()
        b.verify()


def fan_out_and_fan_in():
    a, b, c = Broker("fo-a").start(), Broker("fo-b").start(), Broker("fo-c").start()
    create(a, "x", 3)
    create(b, "y", 2)
    produce(a, "x", [f"x{i}".encode() for i in range(600)], 3)
    produce(b, "y", [f"y{i}".encode() for i in range(400)], 2)
    # Fan-out A→B and A→C for x; fan-in B→C for y beside it.
    b.mirror("a", a, ["x"])
    c.mirror("a", a, ["x"])
    c.mirror("b", b, ["y"])
    for dst in (b, c):
        dst.wait_caught_up("a", a, "x")
    c.wait_caught_up("b", b, "y")
    same_batches(b, a, "x", 3)
    same_batches(c, a, "x", 3)
    same_batches(c, b, "y", 2)
    # Stopping B's mirror leaves C mirroring A.
    out = b.failover("a")["stopped"]
    produce(a, "x", [f"x-more-{i}".encode() for i in range(90)], 3)
    c.wait_caught_up("a", a, "x")
    same_batches(c, a, "x", 3)
    assert all(p["mode"] == "mirroring:a" for p in c.partitions("x"))
    assert all(p["mode"] == "local" for p in b.partitions("x"))
    for s in out:
        barrier_at(b, "x", s["partition"], s["barrier_offset"])
    print("ok fan-out: independent destinations; B's stop leaves C mirroring A")
    # Fan-in: stopping C's mirror of A writes barriers in x only; y keeps mirroring B.
    y_before = {p["partition"]: p["log_end"] for p in c.partitions("y")}
    out = c.failover("a")["stopped"]
    assert {s["topic"] for s in out} == {"x"}
    for s in out:
        barrier_at(c, "x", s["partition"], s["barrier_offset"])
    assert all(p["mode"] == "mirroring:b" for p in c.partitions("y"))
    assert {p["partition"]: p["log_end"] for p in c.partitions("y")} == y_before
    produce(b, "y", [f"y-more-{i}".encode() for i in range(40)], 2)
    c.wait_caught_up("b", b, "y")
    same_batches(c, b, "y", 2)
    print("ok fan-in: stopping one mirror writes barriers only in its own topic")
    for x in (a, b, c):
        x.stop()
        x.verify()


def chain():
    a, b, c = Broker("ch-a").start(), Broker("ch-b").start(), Broker("ch-c").start()
    create(a, "z", 2)
    produce(a, "z", [f"a{i}".encode() for i in range(400)], 2)
    b.mirror("a", a, ["z"])
    c.mirror("b", b, ["z"])
    b.wait_caught_up("a", a, "z")
    c.wait_caught_up("b", b, "z")
    same_batches(c, a, "z", 2)
    out = b.failover("a")["stopped"]
    produce(b, "z", [f"b{i}".encode() for i in range(100)], 2)
    c.wait_caught_up("b", b, "z")
    same_batches(c, b, "z", 2)
    for s in out:
        barrier_at(c, "z", s["partition"], s["barrier_offset"])
    # C is still mirroring: B's barrier is stored as-is and clears nothing there.
    assert all(p["mode"] == "mirroring:b" for p in c.partitions("z"))
    assert all(n > 0 for n in producers(c, "z").values()), producers(c, "z")
    got = read_all(c, "z", 2)
    every = [v for vs in got.values() for v in vs]
    assert len(every) == 500 and len(set(every)) == 500
    print("ok chain A→B→C: failover in the middle, C stores B's barrier as-is, then B's records")
    for x in (a, b, c):
        x.stop()
        x.verify()


def retention_and_pause():
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP
    a, b = Broker("rt-a").start(), Broker("rt-b").start()
    create(a, "r", 2)
    # Batches of ten records, so that a log start of 1005 falls inside one.
    p = Producer({"bootstrap.servers": a.kafka, "enable.idempotence": True,
                  "linger.ms": 50, "batch.num.messages": 10})
    for i in range(3000):
        p.produce("r", value=f"r{i}".encode(), partition=i % 2)
    assert p.flush(60) == 0
    admin = KafkaAdminClient(bootstrap_servers=a.kafka)
    admin.delete_records({KTP("r", 0): 1005, KTP("r", 1): 600})
    starts = {x["partition"]: x["log_start"] for x in a.partitions("r")}
    assert starts == {0: 1005, 1: 600}, starts
    b.mirror("a", a, ["r"])
    b.wait_caught_up("a", a, "r")
    mine = {x["partition"]: x["log_start"] for x in b.partitions("r")}
    assert mine == starts, f"log starts {mine} vs the source's {starts}"
    status = b.admin("GET", "/mirrors")["mirrors"][0]["partitions"]
    assert all(x["realigns"] >= 1 for x in status), status
    # Byte for byte from the batch holding the source's log start on.
    for part in (0, 1):
        src = [x for x in a.batches("r", part) if x["last_offset"] >= starts[part]]
        dst = [x for x in b.batches("r", part) if x["last_offset"] >= starts[part]]
        assert src == dst, f"r-{part} differs after the realignment"
    got = read_all(b, "r", 2)
    assert len(got[0]) == 1500 - 1005 and len(got[1]) == 1500 - 600, {k: len(v) for k, v in got.items()}
    print("ok retention: realigned at the source's log start, inside a batch; byte-identical after")
    # The source's log start moves again, inside what the destination holds: the destination
    # follows it, as a Kafka follower follows its leader's log start.
    admin.delete_records({KTP("r", 0): 1203, KTP("r", 1): 800})
    starts = {x["partition"]: x["log_start"] for x in a.partitions("r")}
    assert starts == {0: 1203, 1: 800}, starts
    deadline = time.time() + 30
    while {x["partition"]: x["log_start"] for x in b.partitions("r")} != starts:
        assert time.time() < deadline, (b.partitions("r"), starts)
        time.sleep(0.1)
    print("ok retention: the destination follows the source's later DeleteRecords")
    # Pause: nothing arrives while the source grows; resume: caught up.
    b.admin("POST", "/mirrors/a/pause")
    assert all(x["mode"] == "paused:a" for x in b.partitions("r"))
    ends = {x["partition"]: x["log_end"] for x in b.partitions("r")}
    # GET /mirrors: the last mirrored offset is the stop's (the log end, a failback's
    # truncation point), and a partition that is not progressing says why.
    status = b.admin("GET", "/mirrors")["mirrors"][0]["partitions"]
    assert {x["partition"]: x["last_mirrored_offset"] for x in status} == ends, status
    assert all(x["stalled"] == "paused" for x in status), status
    produce(a, "r", [f"more{i}".encode() for i in range(200)], 2)
    time.sleep(1.0)
    assert {x["partition"]: x["log_end"] for x in b.partitions("r")} == ends
    b.admin("POST", "/mirrors/a/resume")
    b.wait_caught_up("a", a, "r")
    assert all(x["mode"] == "mirroring:a" for x in b.partitions("r"))
    status = b.admin("GET", "/mirrors")["mirrors"][0]["partitions"]
    assert all(x["stalled"] is None for x in status), status
    print("ok pause and resume: no progress while paused, caught up after")
    for x in (a, b):
        x.stop()
        x.verify()


def main():
    which = sys.argv[1:] or ["active-passive", "fan", "chain", "retention"]
    if "active-passive" in which:
        active_passive_and_failback()
    if "fan" in which:
        fan_out_and_fan_in()
    if "chain" in which:
        chain()
    if "retention" in which:
        retention_and_pause()
    print("all topology checks passed")


if __name__ == "__main__":
    sys.exit(main())
