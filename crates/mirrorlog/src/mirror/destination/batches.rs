//! The whole batches of a fetched byte range, read from their headers alone: a source cuts a
//! fetch answer at its byte limits, so its last batch may be partial (left for the next fetch),
//! and a retried fetch may start below what is stored (skipped). The engine validates every batch
//! (CRC included) when it appends them; checking here would do that work twice.

use crate::format::{frames, Offset};

/// One whole batch in a fetched byte range, from its header: where it is and its last offset.
pub struct Span {
    /// Where the batch starts.
    pub pos: usize,
    /// Where it ends.
    pub end: usize,
    /// Its last offset.
    pub last: i64,
}

/// A batch header no source can have sent: the partition's mirror stops with this reason
/// rather than compute with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Impossible(pub String);

/// The whole batches of `records`, in order, up to the first cut or malformed header (the
/// format's header-only walk; the engine validates every batch, CRC included, when it appends
/// them, so checking here would do that work twice). Offsets and epochs are checked with
/// overflow-free arithmetic: a negative base offset or offset delta, a last offset at or past
/// `i64::MAX` (no offset could follow it) or a leader epoch of `i32::MAX` (no failover could
/// follow it) is [`Impossible`].
pub fn spans(records: &[u8]) -> impl Iterator<Item = Result<Span, Impossible>> + '_ {
    let mut failed = false;
    frames(records).map_while(move |f| {
        if failed {
            return None;
        }
        let h = f.header;
        let last = (h.base_offset.0 >= 0 && h.last_offset_delta >= 0)
            .then(|| h.base_offset.0.checked_add(i64::from(h.last_offset_delta)))
            .flatten()
            .filter(|&last| last < i64::MAX);
        let span = match last {
            Some(_) if h.partition_leader_epoch == i32::MAX => Err(Impossible(format!(
                "a batch at offset {} under leader epoch {}: no later epoch could follow it",
                h.base_offset.0, h.partition_leader_epoch
            ))),
            Some(last) => Ok(Span {
                pos: f.position,
                end: f.position + f.bytes.len(),
                last,
            }),
            None => Err(Impossible(format!(
                "a batch at offset {} with last offset delta {}: its offsets are impossible",
                h.base_offset.0, h.last_offset_delta
            ))),
        };
        failed = span.is_err();
        Some(span)
    })
}

/// The whole batches of `records` from `next` on: their (start, end) byte range, the offset
/// after the last one, and how many they are.
///
/// # Errors
/// The first [`Impossible`] batch.
pub fn whole_batches(
    records: &[u8],
    next: Offset,
) -> Result<(usize, usize, Offset, usize), Impossible> {
    let (mut start, mut end, mut after, mut count) = (None, 0usize, next, 0usize);
    for s in spans(records) {
        let s = s?;
        if s.last >= next.0 {
            start.get_or_insert(s.pos);
            // `spans` admits only last offsets below i64::MAX.
            after = Offset(s.last + 1);
            count += 1;
        }
        end = s.end;
    }
    let start = start.unwrap_or(end);
    Ok((start, end.max(start), after, count))
}

/// `records` (whole batches) cut at batch boundaries into pieces of at most `limit` bytes (a
/// batch larger than `limit` is a piece of its own): each piece's range, its batches, and the
/// offset after it. The last piece runs to the end of `records`.
pub fn pieces(records: &[u8], limit: usize) -> Vec<(usize, usize, usize, Offset)> {
    let mut out = Vec::new();
    let (mut from, mut batches, mut next) = (0usize, 0usize, None);
    for b in frames(records) {
        let (start, len) = (b.position, b.bytes.len());
        if let Some(n) = next.filter(|_| start + len - from > limit) {
            out.push((from, start, batches, n));
            (from, batches) = (start, 0);
        }
        batches += 1;
        next = Some(Offset(b.header.last_offset().0.saturating_add(1)));
    }
    if let Some(n) = next {
        out.push((from, records.len(), batches, n));
    }
    out
}

/// `n` one-byte records at `base`, written under leader epoch `epoch` (the mirror's tests).
#[cfg(test)]
pub(crate) fn test_batch(base: i64, n: usize, epoch: i32) -> Vec<u8> {
    use crate::format::{BatchBuilder, BatchOptions, RecordSpec};
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
        assert_eq!(
            whole_batches(&bytes, Offset(0)),
            Ok((0, second, Offset(5), 2))
        );
        assert_eq!(
            whole_batches(&bytes, Offset(3)),
            Ok((first, second, Offset(5), 1))
        );
        assert_eq!(whole_batches(&bytes, Offset(5)).unwrap().0, second);
        assert_eq!(whole_batches(&bytes, Offset(5)).unwrap().1, second);
        assert_eq!(
            whole_batches(&[1, 2, 3], Offset(0)),
            Ok((0, 0, Offset(0), 0))
        );
    }

    #[test]
    fn offsets_and_epochs_no_source_can_have_are_impossible_not_overflowed() {
        // A batch based near i64::MAX: base + delta overflows, and so would the next offset.
        let near_end = test_batch(i64::MAX - 1, 3, 0);
        assert!(whole_batches(&near_end, Offset(0)).is_err());
        let last_offset_max = test_batch(i64::MAX - 2, 3, 0);
        assert!(whole_batches(&last_offset_max, Offset(0)).is_err());
        let fine = test_batch(i64::MAX - 3, 3, 0);
        assert_eq!(
            whole_batches(&fine, Offset(0)).map(|w| w.2),
            Ok(Offset(i64::MAX))
        );
        assert!(whole_batches(&test_batch(-5, 1, 0), Offset(0)).is_err());
        assert!(whole_batches(&test_batch(0, 1, i32::MAX), Offset(0)).is_err());
        // Good batches before an impossible one still fail the answer: nothing is half taken.
        let mut mixed = batch(0, 2);
        mixed.extend(test_batch(-1, 1, 0));
        assert!(whole_batches(&mixed, Offset(0)).is_err());
    }

    #[test]
    fn fetched_bytes_go_in_pieces_of_whole_batches_up_to_the_limit() {
        let mut records = Vec::new();
        let mut ends = Vec::new();
        for (i, n) in [1usize, 30, 2, 50, 1].iter().enumerate() {
            records.extend_from_slice(&test_batch(i as i64 * 100, *n, 0));
            ends.push(records.len());
        }
        let all = ends.last().copied().unwrap();
        // No limit: one piece, to the end.
        let one = pieces(&records, usize::MAX);
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].0, one[0].1, one[0].2), (0, all, 5));
        let cut = pieces(&records, 400);
        // Pieces cover the bytes in order, end at batch ends, stay within the limit unless one
        // batch is larger alone.
        assert_eq!(cut.first().map(|p| p.0), Some(0));
        assert_eq!(cut.last().map(|p| p.1), Some(all));
        for w in cut.windows(2) {
            assert_eq!(w[0].1, w[1].0);
        }
        for &(from, to, batches, _) in &cut {
            assert!(ends.contains(&to), "{to}");
            assert!(to - from <= 400 || batches == 1, "{from}..{to}");
        }
        assert_eq!(cut.iter().map(|p| p.2).sum::<usize>(), 5);
        assert_eq!(cut.last().map(|p| p.3), Some(Offset(401)));
        assert!(cut.len() >= 3, "{cut:?}");
        assert!(pieces(&[], 10).is_empty());
    }
}
