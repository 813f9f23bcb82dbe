"""Produces with a real client and saves what the broker stored, as fixtures.

librdkafka (through confluent-kafka) produces to its own built-in mock cluster
(`test.mock.num.brokers`): idempotent producers with every compression codec, a plain
(non-idempotent) producer, and a transactional producer that commits, aborts and commits again.
Then the partition is fetched raw over the Kafka protocol with kafka-python's protocol classes
(FetchRequest v4, read uncommitted), so the fixture is exactly the bytes the broker returns:
the clients' batches as they built them, with the broker's offsets. The mock's own transaction
markers carry CRC 0 (librdkafka's mock does not compute it); they are kept as fetched, and the
tests say what the engine does with them.

Writes to OUT_DIR:
  batches.bin   the fetched batches, concatenated
  batches.json  kafka-python's decoding of each batch (header fields, CRC validity, and the
                records, every codec decompressed), plus what was produced

Usage: python confluent_fixtures.py OUT_DIR
(`scripts/test.sh` runs it into target/interop/confluent_kafka on every test run; the copy in
testdata/fixtures/confluent_kafka/ is a committed run of it, used when the venv is absent.)
"""
import io
import json
import os
import socket
import struct
import sys

from confluent_kafka import Producer
from kafka.protocol.old.fetch import FetchRequest, FetchResponse
from kafka.record.memory_records import MemoryRecords

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_python_common import describe_batch  # noqa: E402

TOPIC = "interop"
PARTITION = 0
QUIET = {"log_level": 3}


def produce_all(bootstrap):
    """Every producer shape; returns what was produced, for the record."""
    produced = []

    def send(conf, n, tag, headers=True):
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **QUIET, **conf})
        for i in range(n):
            p.produce(
                TOPIC,
                partition=PARTITION,
                key=None if i % 5 == 4 else f"{tag}-key-{i}".encode(),
                value=None if i % 7 == 6 else (f"{tag} value {i} " * (1 + i % 4)).encode(),
                headers=[("h", f"{i}".encode()), ("empty", b"")] if headers and i % 3 == 0 else None,
            )
            if i % 10 == 9:
                p.flush(10)
        assert p.flush(10) == 0, f"{tag}: not all delivered"
        produced.append({"producer": tag, "messages": n})

    send({"enable.idempotence": True, "compression.type": "none"}, 30, "idempotent-none")
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        send({"enable.idempotence": True, "compression.type": codec}, 20, f"idempotent-{codec}")
    send({"enable.idempotence": False, "acks": 1, "compression.type": "none"}, 10, "plain", headers=False)

    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": "interop-txn", **QUIET})
    t.init_transactions(10)
    for outcome, n in [("commit", 5), ("abort", 4), ("commit", 6)]:
        t.begin_transaction()
        for i in range(n):
            t.produce(TOPIC, partition=PARTITION, key=f"txn-{outcome}-{i}".encode(), value=b"x" * (10 + i))
        t.flush(10)
        if outcome == "commit":
            t.commit_transaction(10)
        else:
            t.abort_transaction(10)
        produced.append({"producer": f"transactional-{outcome}", "messages": n})
    return produced


def fetch_raw(host, port):
    """The partition's stored batches, from offset 0 to the high watermark, as fetched."""
    sock = socket.create_connection((host, port), timeout=10)
    out = b""
    offset = 0
    correlation = 0
    while True:
        correlation += 1
        request = FetchRequest[4](
            replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=16 << 20, isolation_level=0,
            topics=[(TOPIC, [(PARTITION, offset, 16 << 20)])],
        )
        request.with_header(correlation_id=correlation, client_id="mirrorlog-fixtures")
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", read_exact(sock, 4))[0]
        body = io.BytesIO(read_exact(sock, size))
        body.read(4)  # correlation id
        response = FetchResponse[4].decode(body)
        topic, partitions = response.responses[0]
        _, error, high_watermark, _, _, records = partitions[0]
        assert error == 0, f"fetch error {error}"
        batches = MemoryRecords(records)
        got = b""
        last = None
        while batches.has_next():
            b = batches.next_batch()
            got += records[len(got):len(got) + b.size_in_bytes]
            last = b.base_offset + b.last_offset_delta
        out += got
        if last is None or last + 1 >= high_watermark:
            return out, high_watermark
        offset = last + 1


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError("broker closed the connection")
        data += chunk
    return data


def main(out_dir):
    # A client with test.mock.num.brokers starts the mock cluster and lives as long as it.
    anchor = Producer({"test.mock.num.brokers": 1, **QUIET})
    broker = list(anchor.list_topics(timeout=10).brokers.values())[0]
    bootstrap = f"{broker.host}:{broker.port}"
    produced = produce_all(bootstrap)
    raw, high_watermark = fetch_raw(broker.host, broker.port)
    decoded = []
    records = MemoryRecords(raw)
    position = 0
    while records.has_next():
        batch = records.next_batch()
        # Every codec's records (kafka-python's optional codec packages are pinned in
        # requirements.txt), decoded independently of the engine.
        d = describe_batch(batch, position)
        decoded.append(d)
        position += batch.size_in_bytes
    assert position == len(raw)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "batches.bin"), "wb") as f:
        f.write(raw)
    with open(os.path.join(out_dir, "batches.json"), "w") as f:
        json.dump({"high_watermark": high_watermark, "produced": produced, "batches": decoded}, f, indent=1)
    print(f"{out_dir}: {len(decoded)} batches, {len(raw)} bytes, high watermark {high_watermark}")


if __name__ == "__main__":
    main(sys.argv[1])
