//! `mirrorlog dump`: one line per batch (or entry) of a file, chosen by the file's name, like
//! Kafka's `kafka-dump-log.sh`, as text or as one JSON object per line.
//!
//! A `.log` is walked batch by batch on its own, without stopping at a bad CRC: each batch says
//! whether its CRC is valid, and the walk stops only where no batch length can be trusted
//! (zeroes, a length out of range, a torn tail), saying so in a last line.

use super::{file_kind, offset_in_name, segment_data, FileKind, Slot};
use crate::format::{
    self, crc32c, BatchHeader, BatchKind, Compression, ControlRecord, ControlType, FormatError,
    Offset, TimestampType, BATCH_HEADER_SIZE_BYTES,
};
use crate::log::{EpochCache, ModeHistory, RangeKind};
use crate::producer_state::{decode_snapshot, decode_txn_index};
use crate::segment::decode_offset_index;
use serde_json::{json, Map, Value};

/// Bytes a batch's CRC covers from: everything after the `crc` field.
const CRC_COVERS_FROM: usize = format::CRC_POS + 4;
/// Size of one `.timeindex` entry: timestamp i64, relative offset i32.
const TIME_INDEX_ENTRY_SIZE_BYTES: usize = 12;

/// What `dump` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpOptions {
    /// Record-level detail for `.log` files.
    pub records: bool,
    /// One JSON object per line instead of text.
    pub json: bool,
    /// Keys and values longer than this are cut, with `truncated: true`.
    pub value_bytes_max: usize,
    /// Where the file lies: a segment's data directory's shard journals are read with it, so
    /// that what it shows is what the next open will see (`inspect::segment_data_at`).
    pub path: Option<std::path::PathBuf>,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            records: false,
            json: false,
            value_bytes_max: 64,
            path: None,
        }
    }
}

/// The lines `dump` prints for a file named `name` holding `bytes`.
#[must_use]
pub fn dump_file(name: &str, bytes: &[u8], options: &DumpOptions) -> Vec<String> {
    let kind = file_kind(name);
    let objects = match kind {
        FileKind::Log => dump_log(bytes, offset_in_name(name).unwrap_or(Offset(0)), options),
        FileKind::OffsetIndex => dump_offset_index(bytes, offset_in_name(name).unwrap_or(Offset(0))),
        FileKind::TimeIndex => dump_time_index(bytes, offset_in_name(name).unwrap_or(Offset(0))),
        FileKind::TxnIndex => match decode_txn_index(bytes) {
            Ok(entries) => entries
                .iter()
                .map(|t| {
                    json!({"producer_id": t.producer_id, "first_offset": t.first_offset.0,
                        "last_offset": t.last_offset.0, "last_stable_offset": t.last_stable_offset.0})
                })
                .collect(),
            Err(e) => vec![error(&e.to_string())],
        },
        FileKind::Snapshot => match decode_snapshot(bytes) {
            Ok(entries) => entries
                .iter()
                .map(|e| {
                    json!({"producer_id": e.producer_id, "producer_epoch": e.epoch,
                        "last_sequence": e.last_seq(), "last_offset": e.last_data_offset().0,
                        "coordinator_epoch": e.coordinator_epoch, "last_timestamp": e.last_timestamp,
                        "current_txn_first_offset": e.current_txn_first_offset.map(|o| o.0)})
                })
                .collect(),
            Err(e) => vec![error(&e.to_string())],
        },
        FileKind::LeaderEpochCheckpoint => match text(bytes).map(|t| EpochCache::decode(&t)) {
            Some(Ok(cache)) => cache
                .entries()
                .iter()
                .map(|(epoch, start)| json!({"leader_epoch": epoch, "start_offset": start.0}))
                .collect(),
            Some(Err(e)) => vec![error(&e.to_string())],
            None => vec![error("not UTF-8 text")],
        },
        FileKind::MirrorCheckpoint => match text(bytes).map(|t| ModeHistory::decode(&t)) {
            Some(Ok(history)) => history
                .entries()
                .iter()
                .map(|(start, kind)| match kind {
                    RangeKind::Local => json!({"start_offset": start.0, "mode": "local"}),
                    RangeKind::Mirror(source) => {
                        json!({"start_offset": start.0, "mode": "mirror", "source": source})
                    }
                })
                .collect(),
            Some(Err(e)) => vec![error(&e.to_string())],
            None => vec![error("not UTF-8 text")],
        },
        FileKind::SegmentGaps => match text(bytes).map(|t| crate::log::decode_gaps(&t)) {
            Some(Ok(bases)) => bases
                .iter()
                .map(|b| json!({"segment_base_offset": b.0}))
                .collect(),
            Some(Err(e)) => vec![error(&e)],
            None => vec![error("not UTF-8 text")],
        },
        FileKind::RecoveryPoint | FileKind::HighWatermark => {
            let field = if kind == FileKind::RecoveryPoint {
                "recovery_point"
            } else {
                "high_watermark"
            };
            match text(bytes).map(|t| crate::log::decode_recovery_point(&t)) {
                Some(Some(o)) => vec![json!({ field: o.0 })],
                Some(None) => vec![error("not a one-entry offset checkpoint")],
                None => vec![error("not UTF-8 text")],
            }
        }
        FileKind::MirrorMode
        | FileKind::LogStartOffset
        | FileKind::PartitionConfig
        | FileKind::CleanShutdown => match text(bytes) {
            Some(t) => t.lines().map(|l| json!({"line": l})).collect(),
            None => vec![error("not UTF-8 text")],
        },
        FileKind::Journal => dump_journal(bytes),
        FileKind::Unknown => vec![error(&format!(
            "{name}: not a file mirrorlog writes (by its name)"
        ))],
    };
    objects
        .into_iter()
        .map(|o| {
            if options.json {
                o.to_string()
            } else {
                as_text(&o)
            }
        })
        .collect()
}

/// A journal: its superblock, then its live blocks and their entries as recovery reads them,
/// then why the chain ended.
fn dump_journal(bytes: &[u8]) -> Vec<Value> {
    let chain = match crate::journal::read_chain(bytes) {
        Ok(chain) => chain,
        Err(e) => return vec![error(&e.to_string())],
    };
    let sb = chain.superblock;
    let mut out = vec![
        json!({"superblock_sequence": sb.sequence, "start_position": sb.start_position,
        "start_lsn": sb.start_lsn, "journal_bytes": sb.journal_bytes, "shard": sb.shard}),
    ];
    for block in &chain.blocks {
        out.push(json!({"block_position": block.position, "lsn": block.lsn,
            "block_bytes": block.block_bytes, "entries": block.entries.len()}));
        for e in &block.entries {
            out.push(
                json!({"key": e.key, "segment_base": e.segment_base.0, "start": e.start,
                "inline_from": e.inline_from, "end": e.end, "next_offset": e.next_offset.0}),
            );
        }
    }
    let crate::journal::ChainEnd::NoNextBlock(why) = &chain.end;
    out.push(json!({"next_lsn": chain.next_lsn, "head": chain.head, "chain_end": why.to_string()}));
    out
}

fn error(what: &str) -> Value {
    json!({ "error": what })
}

fn text(bytes: &[u8]) -> Option<String> {
    String::from_utf8(bytes.to_vec()).ok()
}

/// `key: value` pairs in the order of the object (serde_json keeps insertion order here).
fn as_text(o: &Value) -> String {
    match o {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}: {s}"),
                Value::Array(items) => format!(
                    "{k}: [{}]",
                    items.iter().map(as_text).collect::<Vec<_>>().join(", ")
                ),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

fn dump_offset_index(bytes: &[u8], base: Offset) -> Vec<Value> {
    match decode_offset_index(bytes, base) {
        Ok(entries) => entries
            .iter()
            .map(|e| json!({"offset": e.offset.0, "position": e.position}))
            .collect(),
        Err(e) => vec![error(&e.to_string())],
    }
}

fn dump_time_index(bytes: &[u8], base: Offset) -> Vec<Value> {
    let mut out: Vec<Value> = bytes
        .chunks_exact(TIME_INDEX_ENTRY_SIZE_BYTES)
        .map(|e| {
            let (ts, rel) = e.split_at(8);
            let timestamp = i64::from_be_bytes(ts.try_into().unwrap_or_default());
            let relative = i32::from_be_bytes(rel.try_into().unwrap_or_default());
            json!({"timestamp": timestamp, "offset": base.0.saturating_add(i64::from(relative))})
        })
        .collect();
    let rest = bytes.len() % TIME_INDEX_ENTRY_SIZE_BYTES;
    if rest != 0 {
        out.push(error(&format!(
            "{rest} trailing bytes: a partial 12-byte entry"
        )));
    }
    out
}

fn dump_log(file: &[u8], base: Offset, options: &DumpOptions) -> Vec<Value> {
    let segment = match &options.path {
        Some(path) => super::segment_data_at(path, file, base),
        None => segment_data(file, base),
    };
    let mut out = Vec::new();
    for (position, slot) in &segment.slots {
        out.push(match slot {
            Slot::Record(r) => json!({
                "commit_slot_position": position, "sequence": r.sequence,
                "data_len": r.data_len, "next_offset": r.next_offset.0,
                "prev_data_len": r.prev_data_len, "tail_bytes": r.tail.len(),
                "segment_id": r.segment_id,
                "in_use": segment.record.as_ref() == Some(r),
            }),
            Slot::Foreign(r) => json!({"commit_slot_position": position,
                "invalid": format!("a record of segment {} (data_len {}): not this segment's", r.base_offset.0, r.data_len)}),
            Slot::Invalid(e) => json!({"commit_slot_position": position, "invalid": e.to_string()}),
        });
    }
    if segment.journal_entries > 0 {
        out.push(json!({"journal_entries_applied": segment.journal_entries,
            "note": "batches past the commit record in use come from the shard journal, as the next open replays them"}));
    }
    let data = &segment.data;
    let mut position = 0usize;
    while position < data.len() {
        let rest = data.get(position..).unwrap_or_default();
        let Some(header_bytes) = rest.first_chunk::<BATCH_HEADER_SIZE_BYTES>() else {
            out.push(tail_note(rest, position, "a partial batch header"));
            break;
        };
        let header = BatchHeader::decode(header_bytes);
        if header.length == 0 && header.magic == 0 {
            out.push(tail_note(rest, position, "a zero header"));
            break;
        }
        if header.length < format::BATCH_LENGTH_MIN || header.size_bytes() > rest.len() {
            out.push(json!({
                "position": position, "base_offset": header.base_offset.0,
                "stop": format!("length {} does not fit the {} bytes left: the walk stops here",
                    header.length, rest.len()),
            }));
            break;
        }
        let bytes = rest.get(..header.size_bytes()).unwrap_or_default();
        out.push(batch_object(bytes, &header, position as u64, options));
        position += header.size_bytes();
    }
    out
}

fn tail_note(rest: &[u8], position: usize, what: &str) -> Value {
    if rest.iter().all(|&b| b == 0) {
        json!({"position": position, "end": format!("{} zero bytes (preallocated, never written)", rest.len())})
    } else {
        json!({"position": position, "end": format!("{} bytes of {what}: a torn or unfinished tail", rest.len())})
    }
}

fn batch_object(bytes: &[u8], h: &BatchHeader, position: u64, options: &DumpOptions) -> Value {
    let computed = crc32c(bytes.get(CRC_COVERS_FROM..).unwrap_or_default());
    // A batch whose only fault is its CRC is still decoded (as if the CRC were right) so the
    // dump shows what it claims to be; `crc_valid` and `error` say it is not valid.
    let mut repaired = Vec::new();
    let crc_error = match format::inspect(bytes, position) {
        Err(e @ FormatError::CrcMismatch { .. }) => {
            repaired.extend_from_slice(bytes);
            if let Some(field) = repaired.get_mut(format::CRC_POS..CRC_COVERS_FROM) {
                field.copy_from_slice(&computed.to_be_bytes());
            }
            Some(e)
        }
        _ => None,
    };
    let checked = if crc_error.is_some() {
        format::inspect(&repaired, position)
    } else {
        format::inspect(bytes, position)
    };
    let last_sequence = if h.producer.base_sequence < 0 {
        -1
    } else {
        crate::format::sequence::last_sequence(h.producer.base_sequence, h.last_offset_delta)
    };
    let mut o = Map::new();
    let mut put = |k: &str, v: Value| {
        o.insert(k.to_string(), v);
    };
    put("base_offset", json!(h.base_offset.0));
    put("last_offset", json!(h.last_offset().0));
    put("count", json!(h.records_count));
    put("position", json!(position));
    put("size", json!(bytes.len()));
    put("magic", json!(h.magic));
    put("crc", json!(h.crc));
    put("crc_valid", json!(h.crc == computed));
    put("attributes", json!(h.attributes.0));
    put(
        "compression",
        json!(match h.attributes.compression() {
            Some(Compression::None) => "none".to_string(),
            Some(Compression::Gzip) => "gzip".to_string(),
            Some(Compression::Snappy) => "snappy".to_string(),
            Some(Compression::Lz4) => "lz4".to_string(),
            Some(Compression::Zstd) => "zstd".to_string(),
            None => format!("unknown({})", h.attributes.codec_bits()),
        }),
    );
    put(
        "timestamp_type",
        json!(match h.attributes.timestamp_type() {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }),
    );
    put("transactional", json!(h.attributes.is_transactional()));
    put("control", json!(h.attributes.is_control()));
    put("producer_id", json!(h.producer.producer_id));
    put("producer_epoch", json!(h.producer.producer_epoch));
    put("base_sequence", json!(h.producer.base_sequence));
    put("last_sequence", json!(last_sequence));
    put("partition_leader_epoch", json!(h.partition_leader_epoch));
    put("base_timestamp", json!(h.base_timestamp));
    put("max_timestamp", json!(h.max_timestamp));
    match &checked {
        Ok(view) => match view.kind() {
            BatchKind::TxnMarker {
                commit,
                coordinator_epoch,
            } => {
                put(
                    "control_type",
                    json!(if commit { "COMMIT" } else { "ABORT" }),
                );
                put("coordinator_epoch", json!(coordinator_epoch));
            }
            BatchKind::Barrier => put("control_type", json!("MIRROR_PID_RESET (barrier)")),
            BatchKind::OtherControl { control_type } => {
                put("control_type", json!(format!("other({control_type})")));
            }
            BatchKind::EmptyControl => put("control_type", json!("empty")),
            BatchKind::Data => {}
        },
        Err(e) => put("error", json!(e.to_string())),
    }
    if let Some(e) = &crc_error {
        put("error", json!(e.to_string()));
    }
    if options.records {
        match &checked {
            Ok(view) if h.attributes.compression() == Some(Compression::None) => {
                put("records", records(view, h, options));
            }
            Ok(_) => put(
                "records",
                json!("compressed: records are not decoded by this tool"),
            ),
            Err(_) => put("records", json!("not decoded: the batch is invalid")),
        }
    }
    Value::Object(o)
}

fn records(view: &format::BatchView<'_>, h: &BatchHeader, options: &DumpOptions) -> Value {
    let Ok(iter) = view.records() else {
        return json!("records do not decode");
    };
    let mut out = Vec::new();
    for r in iter {
        let Ok(r) = r else {
            out.push(json!({"error": "record does not decode"}));
            break;
        };
        let offset = Offset(h.base_offset.0.saturating_add(i64::from(r.offset_delta)));
        let mut o = Map::new();
        o.insert("offset".into(), json!(offset.0));
        o.insert(
            "timestamp".into(),
            json!(h.base_timestamp.saturating_add(r.timestamp_delta)),
        );
        if h.attributes.is_control() {
            if let Ok(c) = ControlRecord::parse(&r, offset) {
                let name = match c.control_type {
                    ControlType::Abort => "ABORT".to_string(),
                    ControlType::Commit => "COMMIT".to_string(),
                    ControlType::MirrorPidReset => "MIRROR_PID_RESET".to_string(),
                    ControlType::Other(n) => format!("other({n})"),
                };
                o.insert("control_type".into(), json!(name));
                o.insert("control_version".into(), json!(c.version));
            }
        }
        let (key, key_cut) = shown(r.key, options.value_bytes_max);
        let (value, value_cut) = shown(r.value, options.value_bytes_max);
        o.insert("key".into(), key);
        o.insert("value".into(), value);
        if key_cut || value_cut {
            o.insert("truncated".into(), json!(true));
        }
        let headers: Vec<Value> = r
            .headers()
            .map(|hd| {
                json!({"key": String::from_utf8_lossy(hd.key),
                    "value": shown(hd.value, options.value_bytes_max).0})
            })
            .collect();
        if !headers.is_empty() {
            o.insert("headers".into(), Value::Array(headers));
        }
        out.push(Value::Object(o));
    }
    Value::Array(out)
}

/// A key or value shown safely: UTF-8 text when it is text without control characters, else
/// `hex:` and the bytes; cut at `max` bytes (second field true when cut).
fn shown(bytes: Option<&[u8]>, max: usize) -> (Value, bool) {
    let Some(bytes) = bytes else {
        return (Value::Null, false);
    };
    let cut = bytes.len() > max;
    let bytes = bytes.get(..max.min(bytes.len())).unwrap_or_default();
    let text = std::str::from_utf8(bytes)
        .ok()
        .filter(|s| !s.chars().any(char::is_control));
    let shown = match text {
        Some(s) => s.to_string(),
        None => format!(
            "hex:{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    };
    (json!(shown), cut)
}
