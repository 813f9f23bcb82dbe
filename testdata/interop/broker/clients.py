"""Real clients against one mirrorlog-broker process: librdkafka (confluent-kafka), kafka-python
and kcat, unmodified. Run by crates/mirrorlog-broker/tests/broker_clients.rs; see harness.py for the environment.

Checks:
- librdkafka: every codec (none, gzip, snappy, lz4, zstd) with headers, null keys and null
  values, produced idempotently and read back record for record at both isolation levels;
- an idempotent producer with five requests in flight, in batches of ten: every record stored
  exactly once, in order (retries over a broker restart are in faults.py, retries of one
  batch on the wire in crates/mirrorlog-broker/tests/broker_wire.rs);
- a transactional producer that commits and aborts, in turns: `read_committed` sees exactly the
  committed records, `read_uncommitted` sees all, and ListOffsets' LSO is the end;
- kafka-python: admin create/delete, produce with gzip, consume, ListOffsets by time; a
  consumer that talks incremental fetch sessions (KIP-227) reads 8 partitions in one session;
- kcat: `-L` lists the broker and topics; produce and consume round trip.
"""

import shutil
import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from harness import Broker, consume, create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


create = create_topic


def every_codec(bs):
    for codec in CODECS:
        topic = f"codec-{codec}"
        create(bs, topic, 2)
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True,
                      "compression.type": codec, "linger.ms": 5})
        sent, errors = [], []

        def ack(err, msg):
            if err:
                errors.append(err)

        for i in range(400):
            key = None if i % 4 == 0 else f"k{i}".encode()
            value = None if i % 7 == 0 else (f"value-{i}-" * (i % 13)).encode()
            headers = [("h", f"{i}".encode()), ("empty", b"")] if i % 3 else None
            p.produce(topic, key=key, value=value, partition=i % 2, headers=headers,
                      on_delivery=ack)
            sent.append((i % 2, key, value, headers))
        assert p.flush(30) == 0 and not errors, f"{codec}: {errors[:3]}"
        for iso in ["read_committed", "read_uncommitted"]:
            got = consume(bs, topic, 2, iso, want=400)
            for part in (0, 1):
                mine = [(k, v, h) for (pp, k, v, h) in sent if pp == part]
                theirs = [(k, v, h) for (pp, _, k, v, h) in got if pp == part]
                norm = [(k, v, [tuple(x) for x in h] if h else None) for k, v, h in theirs]
                assert norm == mine, f"{codec} {iso} partition {part} differs"
                offsets = [o for (pp, o, *_ ) in got if pp == part]
                assert offsets == list(range(len(mine))), f"{codec}: offsets {offsets[:5]}"
        print(f"ok codec {codec}: 400 records, headers and nulls intact")


def idempotent_retries(bs):
    topic = "idempotent"
    create(bs, topic, 1)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 0,
                  "max.in.flight.requests.per.connection": 5, "batch.num.messages": 10})
    errors = []
    for i in range(3000):
        p.produce(topic, value=f"{i}".encode(),
                  on_delivery=lambda e, m: e and errors.append(e))
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and not errors, errors[:3]
    got = consume(bs, topic, 1, "read_uncommitted", want=3000)
    values = [int(v) for (_, _, _, v, _) in got]
    assert values == list(range(3000)), f"idempotent: {len(values)} records, first gap " \
        f"{next((i, v) for i, v in enumerate(values) if v != i) if values != list(range(len(values))) else None}"
    print("ok idempotent producer, 5 in flight: 3000 records exactly once, in order")


def transactions(bs):
    topic = "txn"
    create(bs, topic, 2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "clients-txn", "linger.ms": 1})
    p.init_transactions(30)
    committed = []
    for round_ in range(6):
        p.begin_transaction()
        batch = [f"r{round_}-{i}".encode() for i in range(50)]
        for i, v in enumerate(batch):
            p.produce(topic, value=v, partition=i % 2)
        p.flush(30)
        if round_ % 2 == 0:
            p.commit_transaction(30)
            committed.extend(batch)
        else:
            p.abort_transaction(30)
    got = consume(bs, topic, 2, "read_committed")
    assert sorted(v for (*_, v, _) in got) == sorted(committed), \
        f"read_committed: {len(got)} vs {len(committed)}"
    everything = consume(bs, topic, 2, "read_uncommitted")
    assert len(everything) == 300, len(everything)
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "isolation.level": "read_committed"})
    for part in (0, 1):
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        assert lo == 0 and hi > 150, (lo, hi)
    c.close()
    # A second producer with the same transactional.id fences the first.
    p2 = Producer({"bootstrap.servers": bs, "transactional.id": "clients-txn"})
    p2.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"zombie", partition=0)
    try:
        p.commit_transaction(10)
        raise AssertionError("a fenced producer committed")
    except Exception as e:  # KafkaException: fenced
        assert "fenced" in str(e).lower() or "epoch" in str(e).lower(), e
    print("ok transactional producer: read_committed sees exactly the 150 committed records; "
          "a second init fences the first")


def kafka_python(bs):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    from kafka.admin import NewTopic as KNewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([KNewTopic("kp", 3, 1)])
    a.create_topics([KNewTopic("kp-gone", 1, 1)])
    a.delete_topics(["kp-gone"])
    assert "kp-gone" not in a.list_topics() and "kp" in a.list_topics()
    p = KafkaProducer(bootstrap_servers=bs, compression_type="gzip", acks="all",
                      enable_idempotence=True)
    t0 = int(time.time() * 1000)
    fs = [p.send("kp", key=b"k" if i % 2 else None, value=f"v{i}".encode(), partition=i % 3,
                 headers=[("x", b"y")]) for i in range(300)]
    p.flush()
    assert all(f.succeeded() for f in fs)
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [KTP("kp", i) for i in range(3)]
    c.assign(tps)
    c.seek_to_beginning()
    got = list(c)
    assert len(got) == 300 and all(m.headers == [("x", b"y")] for m in got), len(got)
    assert c.end_offsets(tps) == {tp: 100 for tp in tps}
    found = c.offsets_for_times({tps[0]: t0})[tps[0]]
    assert found is not None and found.offset == 0, found
    assert c.offsets_for_times({tps[0]: int(time.time() * 1000) + 3_600_000})[tps[0]] is None
    print("ok kafka-python: admin create/delete, gzip produce, consume, ListOffsets by time")


def kafka_python_fetch_sessions(bs):
    """kafka-python talks incremental fetch sessions (KIP-227) by default: a consumer of 8
    partitions reads records produced before and while it consumes, every one in order, and its
    session with the broker is still the first one, many epochs on (a session error would have
    made it start over with a new session)."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP
    create(bs, "kps", 8)
    p = KafkaProducer(bootstrap_servers=bs, acks="all")
    for i in range(200):
        p.send("kps", value=f"a{i}".encode(), partition=i % 8)
    p.flush()
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=3000,
                      fetch_max_wait_ms=100)
    tps = [KTP("kps", i) for i in range(8)]
    c.assign(tps)
    c.seek_to_beginning()
    got = []
    sessions = set()

    def consume_until(n):
        deadline = time.time() + 60
        while len(got) < n and time.time() < deadline:
            for batch in c.poll(timeout_ms=200).values():
                got.extend(batch)
            for h in c._fetcher._session_handlers.values():
                if h.next_metadata.session_id:
                    sessions.add(h.next_metadata.session_id)
        assert len(got) == n, (len(got), n)

    consume_until(200)
    # Then ten rounds of 20 records, each consumed before the next is produced: each round
    # is at least one incremental fetch that hears of the partitions written to.
    for r in range(10):
        for i in range(r * 20, r * 20 + 20):
            p.send("kps", value=f"b{i}".encode(), partition=i % 8)
        p.flush()
        consume_until(200 + r * 20 + 20)
    for tp in range(8):
        values = [m.value.decode() for m in got if m.partition == tp]
        want = [f"a{i}" for i in range(tp, 200, 8)] + [f"b{i}" for i in range(tp, 200, 8)]
        assert values == want, (tp, values[:4])
    handlers = list(c._fetcher._session_handlers.values())
    assert handlers, "the consumer never fetched"
    epochs = [h.next_metadata.epoch for h in handlers]
    assert len(sessions) == 1 and all(e > 10 for e in epochs), (sessions, epochs)
    c.close()
    print(f"ok kafka-python fetch sessions: 400 records over 8 partitions, one session, epoch {max(epochs)}")


def kcat(bs):
    exe = shutil.which("kcat")
    assert exe, "kcat is not installed (scripts/test.sh installs it)"
    meta = subprocess.run([exe, "-b", bs, "-L"], capture_output=True, timeout=30, check=True)
    text = meta.stdout.decode()
    assert "1 brokers" in text and 'topic "kp"' in text, text
    create(bs, "kcat", 1)
    lines = "".join(f"key{i}:value{i}\n" for i in range(100))
    subprocess.run([exe, "-b", bs, "-P", "-t", "kcat", "-p", "0", "-K:"], input=lines.encode(),
                   timeout=30, check=True)
    out = subprocess.run([exe, "-b", bs, "-C", "-t", "kcat", "-p", "0", "-o", "beginning", "-e",
                          "-f", "%o %k %s\n"], capture_output=True, timeout=30, check=True)
    got = out.stdout.decode().splitlines()
    assert got == [f"{i} key{i} value{i}" for i in range(100)], got[:3]
    print("ok kcat: -L metadata, 100 records produced and consumed")


def main():
    b = Broker("clients").start()
    try:
        every_codec(b.kafka)
        idempotent_retries(b.kafka)
        transactions(b.kafka)
        kafka_python(b.kafka)
        kafka_python_fetch_sessions(b.kafka)
        kcat(b.kafka)
    finally:
        if b.alive():
            b.stop()
    b.verify()
    print("all client checks passed")


if __name__ == "__main__":
    sys.exit(main())
