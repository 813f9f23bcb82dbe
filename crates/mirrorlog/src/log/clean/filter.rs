//! Kafka's cleaner rules for one batch (`Cleaner.cleanInto`'s filter, `MemoryRecords.filterTo`):
//! which batches go whole, which stay (perhaps emptied), and which records they keep.
//!
//! - A data batch of an aborted transaction is discarded with its records.
//! - A COMMIT or ABORT marker whose transaction has no batch left is discarded once its
//!   delete horizon has passed; until then it is kept and gets a horizon if it has none.
//! - Any other control batch (the mirroring barrier, KRaft records) is kept as it is.
//! - A record is kept if it is past the map's latest offset, or if it is its key's newest
//!   record and either has a value or is a tombstone whose batch's horizon has not passed. A
//!   record without a key is removed (Kafka counts it invalid).
//! - A batch that is some producer's last (its last data offset, or its last marker when it
//!   has no data) is kept even when emptied, so that producer's sequence and epoch survive;
//!   so is the last batch of a cleaned segment (see `mod.rs`) and of the pass.
//! - A batch that keeps all its records and needs no new horizon is copied byte for byte;
//!   otherwise it is rebuilt ([`crate::format::rewrite`]). A batch gets a horizon
//!   (`now + delete.retention.ms`) the first time the cleaner keeps a tombstone in it or keeps
//!   it as a marker of an emptied transaction.

use super::offset_map::OffsetMap;
use super::txn::CleanedTransactions;
use crate::format::rewrite::{delete_horizon_ms, rebuild_batch, write_empty_batch};
use crate::format::{BatchView, FormatError, Offset, RecordView};
use std::collections::HashMap;

/// A producer's last batch, as the producer state remembers it (Kafka's `LastRecord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct LastRecord {
    /// Its last data batch's last offset, if it has written data.
    pub(super) last_data_offset: Option<Offset>,
    /// Its epoch.
    pub(super) epoch: i16,
}

/// What the rules need besides the batch.
pub(super) struct Rules<'a> {
    pub(super) map: &'a mut OffsetMap,
    pub(super) txn: &'a mut CleanedTransactions,
    pub(super) last_records: &'a HashMap<i64, LastRecord>,
    pub(super) now_ms: i64,
    pub(super) delete_retention_ms: i64,
    /// The first offset the pass does not clean (Kafka's `upperBoundOffsetOfCleaningRound`).
    pub(super) round_upper: Offset,
    /// The most bytes one batch's records may decompress to.
    pub(super) decompressed_bytes_max: usize,
}

/// What the rules did with one batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Filtered {
    /// Records read.
    pub(super) records_read: u64,
    /// Records kept.
    pub(super) records_kept: u64,
    /// Records without a key in a data batch (removed).
    pub(super) keyless: u64,
    /// The largest timestamp of what was written (when something was).
    pub(super) max_timestamp: i64,
}

/// Applies the rules to `batch`; what is kept is appended to `out` (nothing when the batch
/// goes). `keep_as_last` keeps the batch (emptied if need be) as the last of its cleaned
/// segment.
///
/// # Errors
/// A batch whose records cannot be read (a codec failure, more than the decompression bound).
pub(super) fn filter_batch(
    rules: &mut Rules<'_>,
    batch: &BatchView<'_>,
    keep_as_last: bool,
    out: &mut Vec<u8>,
) -> Result<Filtered, FormatError> {
    let h = *batch.header();
    let control = h.attributes.is_control();
    let horizon = delete_horizon_ms(&h);
    let can_discard = if control {
        rules.txn.on_control_batch(&h, batch.kind())
    } else {
        rules.txn.on_data_batch(&h)
    };
    let discard_records = if control {
        can_discard && horizon.is_some_and(|t| t <= rules.now_ms)
    } else {
        can_discard
    };
    let producer_last = h.producer.has_producer()
        && rules
            .last_records
            .get(&h.producer.producer_id)
            .is_some_and(|last| match last.last_data_offset {
                Some(offset) => h.last_offset() == offset,
                None => control && h.producer.producer_epoch == last.epoch,
            });
    let next_offset = Offset(h.last_offset().0 + 1);
    let retain_empty = producer_last || next_offset == rules.round_upper || keep_as_last;
    let mut result = Filtered {
        max_timestamp: h.max_timestamp,
        ..Filtered::default()
    };
    if discard_records && !retain_empty {
        result.records_read = u64::from(h.records_count.max(0) as u32);
        return Ok(result);
    }
    let marker_of_emptied_txn = can_discard && control;
    let decompressed;
    let records: Vec<RecordView<'_>> =
        if h.attributes.compression() == Some(crate::format::Compression::None) {
            batch.records()?.collect::<Result<_, _>>()?
        } else {
            decompressed = batch.decompressed_records(rules.decompressed_bytes_max)?;
            decompressed.iter().collect::<Result<_, _>>()?
        };
    result.records_read = records.len() as u64;
    let mut kept = Vec::with_capacity(records.len());
    let mut tombstones = false;
    for record in &records {
        let offset = Offset(h.base_offset.0 + i64::from(record.offset_delta));
        let keep = if discard_records {
            false
        } else if control || offset > rules.map.latest_offset() {
            true
        } else if let Some(key) = record.key {
            let newest = rules.map.get(key).is_none_or(|found| offset >= found);
            let retain_tombstone = horizon.is_none_or(|t| rules.now_ms < t);
            newest && (record.value.is_some() || retain_tombstone)
        } else {
            result.keyless += 1;
            false
        };
        if keep {
            tombstones |= record.value.is_none();
            kept.push(*record);
        }
    }
    result.records_kept = kept.len() as u64;
    if kept.is_empty() {
        if retain_empty {
            write_empty_batch(&h, out);
            result.max_timestamp = h.max_timestamp;
        }
        return Ok(result);
    }
    let needs_horizon = (tombstones && !control || marker_of_emptied_txn) && horizon.is_none();
    if kept.len() == records.len() && !needs_horizon {
        out.extend_from_slice(batch.bytes());
        return Ok(result);
    }
    let horizon = if needs_horizon {
        Some(rules.now_ms.saturating_add(rules.delete_retention_ms))
    } else {
        horizon
    };
    let start = out.len();
    rebuild_batch(batch, &kept, horizon, out)?;
    if let Some(header) = out
        .get(start..start + crate::format::BATCH_HEADER_SIZE_BYTES)
        .and_then(|b| b.try_into().ok())
    {
        result.max_timestamp = crate::format::BatchHeader::decode(header).max_timestamp;
    }
    Ok(result)
}
