//! The one header-only walk over concatenated batches: each batch's position, header and bytes,
//! found through the `length` fields alone. No CRC, no look at the records: for the places that
//! need a batch's boundaries or header fields before (or instead of) the validated pass of
//! [`inspect`](super::inspect) — cache hints, a request's batch count, a fetched answer's last
//! offset, a read's cut at whole batches.
//!
//! The walk stops at the first batch whose header is cut short, whose `length` is below the
//! smallest a batch can have, or which runs past the buffer; [`Framing::stopped_at`] says where.
//! Nothing here panics on any input.

use super::batch::{BatchHeader, BATCH_HEADER_SIZE_BYTES, BATCH_LENGTH_MIN, LOG_OVERHEAD_BYTES};

/// One batch found by [`frames`].
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Where the batch starts in the walked buffer.
    pub position: usize,
    /// Its header, decoded and not validated.
    pub header: BatchHeader,
    /// Its bytes (header included).
    pub bytes: &'a [u8],
}

/// The walk (see the module docs).
#[derive(Debug, Clone)]
pub struct Framing<'a> {
    data: &'a [u8],
    at: usize,
    done: bool,
}

/// Walks the batches of `data` by their headers.
#[must_use]
pub fn frames(data: &[u8]) -> Framing<'_> {
    Framing {
        data,
        at: 0,
        done: false,
    }
}

impl Framing<'_> {
    /// The position just past the last batch returned: the buffer's length when the walk ended
    /// on a batch boundary at its end.
    #[must_use]
    pub fn stopped_at(&self) -> usize {
        self.at
    }

    /// The declared size of the batch the walk stopped at because the buffer ends inside it
    /// (its header whole and its `length` possible): what the batch would need, though its
    /// bytes are not all there. `None` while walking, at the end of the buffer, or for a
    /// header cut short or an impossible `length`.
    #[must_use]
    pub fn cut_batch_size(&self) -> Option<usize> {
        self.cut_header().map(|h| h.size_bytes())
    }

    /// The header of the batch the walk stopped at because the buffer ends inside it (see
    /// [`Framing::cut_batch_size`]).
    #[must_use]
    pub fn cut_header(&self) -> Option<BatchHeader> {
        if !self.done {
            return None;
        }
        let rest = self.data.get(self.at..)?;
        let header = BatchHeader::decode(rest.first_chunk::<BATCH_HEADER_SIZE_BYTES>()?);
        (header.length >= BATCH_LENGTH_MIN).then_some(header)
    }

    /// Whether the walk has reached the end of the buffer exactly (every byte was in a batch).
    #[must_use]
    pub fn at_end(&self) -> bool {
        self.at == self.data.len()
    }
}

impl<'a> Iterator for Framing<'a> {
    type Item = Frame<'a>;

    fn next(&mut self) -> Option<Frame<'a>> {
        if self.done {
            return None;
        }
        let frame = (|| {
            let rest = self.data.get(self.at..)?;
            let header = BatchHeader::decode(rest.first_chunk::<BATCH_HEADER_SIZE_BYTES>()?);
            if header.length < BATCH_LENGTH_MIN {
                return None;
            }
            let size = usize::try_from(header.length)
                .ok()?
                .checked_add(LOG_OVERHEAD_BYTES)?;
            let bytes = rest.get(..size)?;
            Some(Frame {
                position: self.at,
                header,
                bytes,
            })
        })();
        match frame {
            Some(f) => {
                self.at += f.bytes.len();
                Some(f)
            }
            None => {
                self.done = true;
                None
            }
        }
    }
}

/// The producer ids of the batches in `data`, read from the headers alone ([`frames`])
/// — no CRC, no validation: a hint for warming caches ahead of the real, validated pass (which
/// reports any damage). The batch the buffer ends inside counts (its header is whole); the walk
/// stops there, or at a header cut short or a length that is impossible.
pub fn producer_id_hints(data: &[u8]) -> impl Iterator<Item = i64> + '_ {
    let mut walk = frames(data);
    let mut cut_told = false;
    std::iter::from_fn(move || match walk.next() {
        Some(f) => Some(f.header.producer.producer_id),
        // The batch the buffer ends inside has its header: still a hint.
        None if !cut_told => {
            cut_told = true;
            walk.cut_header().map(|h| h.producer.producer_id)
        }
        None => None,
    })
}

// Tests index their own fixtures.
#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::format::{BatchBuilder, BatchOptions, RecordSpec};

    fn batch(values: &[&[u8]]) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions::default());
        for v in values {
            b.push(RecordSpec {
                timestamp: 1,
                key: None,
                value: Some(v),
                headers: &[],
            });
        }
        b.build()
    }

    #[test]
    fn batches_are_found_whole_and_a_cut_or_impossible_one_ends_the_walk() {
        let mut data = batch(&[b"a"]);
        let first = data.len();
        data.extend(batch(&[b"bb", b"cc"]));
        let found: Vec<(usize, i32)> = frames(&data)
            .map(|f| (f.position, f.header.records_count))
            .collect();
        assert_eq!(found, vec![(0, 1), (first, 2)]);
        let mut walk = frames(&data);
        walk.by_ref().for_each(drop);
        assert!(walk.at_end());
        for cut in 0..data.len() {
            let mut walk = frames(&data[..cut]);
            let n = walk.by_ref().count();
            assert_eq!(n, usize::from(cut >= first), "cut at {cut}");
            assert!(!walk.at_end() || cut == 0 || cut == first);
        }
        // A length below a header's, or negative, stops the walk at once.
        for length in [-1i32, 0, 48, i32::MIN] {
            let mut bad = data.clone();
            bad[8..12].copy_from_slice(&length.to_be_bytes());
            assert_eq!(frames(&bad).count(), 0, "length {length}");
        }
    }
}
