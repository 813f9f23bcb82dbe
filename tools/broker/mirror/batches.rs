//! The whole batches of a fetched byte range, read from their headers alone: a source cuts a
//! fetch answer at its byte limits, so its last batch may be partial (left for the next fetch),
//! and a retried fetch may start below what is stored (skipped). The engine validates every batch
//! (CRC included) when it appends them; checking here would do that work twice.

use mirrorlog::format::{
    Offset, BASE_OFFSET_POS, BATCH_HEADER_SIZE_BYTES, BATCH_LENGTH_MIN, LAST_OFFSET_DELTA_POS,
    LENGTH_POS, LOG_OVERHEAD_BYTES,
};

/// One whole batch in a fetched byte range, from its header: where it is and its last offset.
pub struct Span {
    /// Where the batch starts.
    pub pos: usize,
    /// Where it ends.
    pub end: usize,
    /// Its last offset.
    pub last: i64,
}

/// The whole batches of `records`, in order, up to the first cut or malformed header. Only the
/// headers' offsets and lengths are read: the engine validates every batch (CRC included) when
/// it appends them, so checking here would do that work twice.
pub fn spans(records: &[u8]) -> impl Iterator<Item = Span> + '_ {
    let be_i64 = |at: usize| {
        records
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(i64::from_be_bytes)
    };
    let be_i32 = |at: usize| {
        records
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_be_bytes)
    };
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if records.len() < pos + BATCH_HEADER_SIZE_BYTES {
            return None;
        }
        let base = be_i64(pos + BASE_OFFSET_POS)?;
        let len = be_i32(pos + LENGTH_POS).filter(|&l| l >= BATCH_LENGTH_MIN)?;
        let delta = be_i32(pos + LAST_OFFSET_DELTA_POS)?;
        let end = pos + LOG_OVERHEAD_BYTES + usize::try_from(len).ok()?;
        if end > records.len() {
            return None;
        }
        let span = Span {
            pos,
            end,
            last: base + i64::from(delta),
        };
        pos = end;
        Some(span)
    })
}

/// The whole batches of `records` from `next` on: (start, end) byte range and the offset after
/// the last one.
pub fn whole_batches(records: &[u8], next: Offset) -> (usize, usize, Offset) {
    let (mut start, mut end, mut after) = (None, 0usize, next);
    for s in spans(records) {
        if s.last >= next.0 {
            start.get_or_insert(s.pos);
            after = Offset(s.last + 1);
        }
        end = s.end;
    }
    let start = start.unwrap_or(end);
    (start, end.max(start), after)
}

/// `n` one-byte records at `base`, written under leader epoch `epoch` (the mirror's tests).
#[cfg(test)]
pub(super) fn test_batch(base: i64, n: usize, epoch: i32) -> Vec<u8> {
    use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};
    let mut b = BatchBuilder::new(BatchOptions {
        base_offset: Offset(base),
        partition_leader_epoch: epoch,
        ..BatchOptions::default()
    });
    for _ in 0..n {
        b.push(RecordSpec {
            timestamp: 1,
            key: None,
            value: Some(b"v"),
            headers: &[],
        });
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, n: usize) -> Vec<u8> {
        test_batch(base, n, 0)
    }

    #[test]
    fn whole_batches_skips_what_is_stored_and_leaves_a_cut_batch() {
        let mut bytes = batch(0, 3);
        let first = bytes.len();
        bytes.extend(batch(3, 2));
        let second = bytes.len();
        bytes.extend(&batch(5, 4)[..30]);
        assert_eq!(whole_batches(&bytes, Offset(0)), (0, second, Offset(5)));
        assert_eq!(whole_batches(&bytes, Offset(3)), (first, second, Offset(5)));
        assert_eq!(whole_batches(&bytes, Offset(5)).0, second);
        assert_eq!(whole_batches(&bytes, Offset(5)).1, second);
        assert_eq!(whole_batches(&[1, 2, 3], Offset(0)), (0, 0, Offset(0)));
    }
}
