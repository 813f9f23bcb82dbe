//! The map phase of a pass (Kafka's `buildOffsetMap`): each key's newest offset in the dirty
//! section, aborted batches left out, then the groups of segments the rewrite phase cleans
//! (Kafka's `groupSegmentsBySize`).

use super::super::{LogError, PartitionLog};
use super::{CleanPass, Phase};
use crate::format::{inspect, FormatError, Offset};
use crate::io::Io;

impl PartitionLog {
    /// Maps the keys of one chunk. Returns the bytes read.
    pub(super) fn map_chunk(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
        base: Offset,
        position: u64,
    ) -> Result<usize, LogError> {
        let Some(index) = self.sealed.iter().position(|s| s.base_offset == base) else {
            return self.end_map(io, pass);
        };
        if base >= pass.upper {
            return self.end_map(io, pass);
        }
        let Some(chunk) = self.read_batches_at(io, index, position, pass)? else {
            // The segment's end: the map covers it whole (Kafka fast-forwards across gaps).
            let next = self.sealed[index].next_offset.min(pass.upper);
            pass.map.set_latest_offset(Offset(next.0 - 1));
            pass.phase = match self.sealed.get(index + 1) {
                Some(s) if s.base_offset < pass.upper => Phase::Map {
                    base: s.base_offset,
                    position: 0,
                },
                _ => return self.end_map(io, pass).map(|_| 0),
            };
            return Ok(0);
        };
        let limit = self.config.decompressed_bytes_max();
        let mut at = 0usize;
        while let Some(rest) = chunk.get(at..).filter(|r| !r.is_empty()) {
            let batch = match inspect(rest, position + at as u64) {
                Ok(b) => b,
                Err(FormatError::Incomplete { .. }) if at > 0 => break,
                Err(e) => return Err(self.corrupt(base, e)),
            };
            let h = *batch.header();
            if h.attributes.is_control() {
                pass.txn.on_control_batch(&h, batch.kind());
            } else if !pass.txn.on_data_batch(&h) {
                let decompressed;
                let records =
                    if h.attributes.compression() == Some(crate::format::Compression::None) {
                        batch.records().map_err(|e| self.corrupt(base, e))?
                    } else {
                        decompressed = batch
                            .decompressed_records(limit)
                            .map_err(|e| self.corrupt(base, e))?;
                        decompressed.iter()
                    };
                for record in records {
                    let record = record.map_err(|e| self.corrupt(base, e))?;
                    let offset = Offset(h.base_offset.0 + i64::from(record.offset_delta));
                    if let Some(key) = record.key.filter(|_| offset >= pass.first_dirty) {
                        if pass.map.is_full() || !pass.map.put(key, offset) {
                            // Full: the pass cleans up to the last whole batch mapped.
                            pass.stats.map_bytes_read += at as u64;
                            return self.end_map(io, pass).map(|_| at);
                        }
                    }
                }
            }
            if h.last_offset() >= pass.first_dirty {
                pass.map.set_latest_offset(h.last_offset());
            }
            at += batch.bytes().len();
        }
        pass.stats.map_bytes_read += at as u64;
        pass.phase = Phase::Map {
            base,
            position: position + at as u64,
        };
        Ok(at)
    }

    /// The map is complete: plan the groups and start cleaning.
    pub(super) fn end_map(
        &mut self,
        io: &mut dyn Io,
        pass: &mut CleanPass,
    ) -> Result<usize, LogError> {
        pass.stats.keys_mapped = pass.map.len() as u64;
        let end = Offset(pass.map.latest_offset().0 + 1);
        if end <= pass.first_dirty {
            // Not one whole batch fit: no pass with this map can make progress.
            return Err(LogError::DedupeBufferTooSmall {
                slots: pass.map.slots(),
                offset: pass.first_dirty,
            });
        }
        pass.stats.end_offset = end.max(pass.first_dirty);
        // Kafka's `groupSegmentsBySize` over the segments below the map's end.
        let segment_bytes = self.config.segment.segment_bytes;
        let index_bytes_max = self
            .config
            .segment_index_bytes
            .unwrap_or(super::super::SEGMENT_INDEX_BYTES_DEFAULT);
        let interval = u64::from(self.config.segment.index_interval_bytes.max(1));
        let index_bytes = |len: u64| (len / interval + 1) * 12;
        let candidates: Vec<(Offset, Offset, u64)> = self
            .sealed
            .iter()
            .take_while(|s| s.base_offset < end && s.base_offset < pass.upper)
            .map(|s| (s.base_offset, s.next_offset, s.data_len))
            .collect();
        let mut groups: Vec<Vec<Offset>> = Vec::new();
        let mut i = 0;
        while let Some(&(first_base, mut last_end, len)) = candidates.get(i) {
            let mut group = vec![first_base];
            let (mut size, mut ix) = (len, index_bytes(len));
            i += 1;
            while let Some(&(b, e, l)) = candidates.get(i) {
                if size + l > segment_bytes
                    || ix + index_bytes(l) > index_bytes_max
                    || (l > 0 && e.0 - 1 - first_base.0 > i64::from(i32::MAX))
                {
                    break;
                }
                group.push(b);
                size += l;
                ix += index_bytes(l);
                last_end = e;
                i += 1;
            }
            let _ = last_end;
            groups.push(group);
        }
        pass.groups = groups;
        pass.txn = super::txn::CleanedTransactions::default();
        pass.phase = Phase::Clean {
            group: 0,
            segment: 0,
            position: 0,
            out: None,
        };
        if pass.groups.is_empty() {
            self.finish_pass(io, pass)?;
        }
        Ok(0)
    }
}
