"""Shared by the kafka-python interop scripts: describe a batch and its records as JSON."""


def describe_batch(batch, position, with_records=True):
    """Header fields and records of one kafka-python DefaultRecordBatch, as plain JSON values
    (records only when `with_records`: decompressing some codecs needs optional packages)."""
    out = {
        "position": position,
        "base_offset": batch.base_offset,
        "leader_epoch": batch.leader_epoch,
        "magic": batch.magic,
        "crc": batch.crc,
        "crc_valid": batch.validate_crc(),
        "attributes": batch.attributes,
        "compression_type": batch.compression_type,
        "timestamp_type": batch.timestamp_type,
        "transactional": bool(batch.is_transactional),
        "control": bool(batch.is_control_batch),
        "last_offset_delta": batch.last_offset_delta,
        "first_timestamp": batch.first_timestamp,
        "max_timestamp": batch.max_timestamp,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "records_count": batch.records_count,
        "records": [],
    }
    if not with_records:
        out["records"] = None
        return out
    for record in batch:
        entry = {
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": None if record.key is None else bytes(record.key).hex(),
            "value": None if record.value is None else bytes(record.value).hex(),
            "headers": [[k, None if v is None else bytes(v).hex()] for k, v in record.headers],
        }
        if batch.is_control_batch:
            entry["control_version"] = record.version
            entry["control_type"] = record.type
        out["records"].append(entry)
    return out
