"""Parses a log file written by mirrorlog with kafka-python's MemoryRecords and prints every
batch as JSON (one array on stdout). Used by testdata/interop_kafka_python.rs."""
import json
import sys

from kafka.record.memory_records import MemoryRecords

from kafka_python_common import describe_batch


def main(path):
    with open(path, "rb") as f:
        data = f.read()
    records = MemoryRecords(data)
    batches = []
    position = 0
    while records.has_next():
        batch = records.next_batch()
        # Records of uncompressed and gzip batches only: kafka-python needs optional packages
        # to decompress snappy, lz4 and zstd (the CRC covers the compressed bytes regardless).
        batches.append(describe_batch(batch, position, batch.compression_type in (0, 1)))
        position += batch.size_in_bytes
    print(json.dumps({"batches": batches, "valid_bytes": records.valid_bytes(), "size": len(data)}))


if __name__ == "__main__":
    main(sys.argv[1])
