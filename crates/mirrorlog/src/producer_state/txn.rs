//! Transactions: the index of open transactions ordered by first offset, completed
//! transactions, and the 34-byte aborted-transaction entries of a segment's `.txnindex`.
//!
//! Open transactions live in two structures: a table from producer id to first offset (the
//! authority) and a vector of `(first offset, producer id)` in offset order, used to find the
//! first unstable offset. Transactions open at increasing offsets, so opening is a push at the
//! end; closing only removes from the table, and stale vector entries are dropped lazily when they
//! reach the front (or in one sweep once they outnumber the live ones), so every operation is
//! amortized constant time and `clear` is constant time.

use super::table::{Table, TableFull};
use crate::format::Offset;

/// Size of one `.txnindex` entry.
pub const ABORTED_TXN_SIZE_BYTES: usize = 34;
/// The `.txnindex` entry version this engine writes.
pub const ABORTED_TXN_VERSION: i16 = 0;

/// A transaction a COMMIT or ABORT marker closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of the transaction's first batch.
    pub first_offset: Offset,
    /// Offset of the marker.
    pub last_offset: Offset,
    /// ABORT (`true`) or COMMIT.
    pub aborted: bool,
    /// The last stable offset when it completed: the first offset of the earliest transaction
    /// of another producer still open, else `last_offset + 1` (Kafka's `lastStableOffset`).
    pub last_stable_offset: Offset,
}

impl CompletedTxn {
    /// The `.txnindex` entry, for an aborted transaction.
    #[must_use]
    pub fn aborted_entry(&self) -> Option<AbortedTxn> {
        self.aborted.then_some(AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        })
    }
}

/// One `.txnindex` entry: version i16, producerId i64, firstOffset i64, lastOffset i64,
/// lastStableOffset i64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortedTxn {
    /// The producer.
    pub producer_id: i64,
    /// First offset of the aborted transaction.
    pub first_offset: Offset,
    /// Offset of its ABORT marker.
    pub last_offset: Offset,
    /// Last stable offset when it was aborted.
    pub last_stable_offset: Offset,
}

/// Why bytes are not a valid `.txnindex` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AbortedTxnError {
    /// Fewer than 34 bytes.
    #[error("aborted-transaction entry at position {position} is truncated ({available_bytes} of 34 bytes)")]
    Truncated {
        /// Position of the entry.
        position: u64,
        /// Bytes present.
        available_bytes: usize,
    },
    /// A version this engine does not read.
    #[error("aborted-transaction entry at position {position} has version {version}, expected 0")]
    UnsupportedVersion {
        /// Position of the entry.
        position: u64,
        /// Stored version.
        version: i16,
    },
}

impl AbortedTxn {
    /// The 34-byte encoding.
    #[must_use]
    pub fn encode(&self) -> [u8; ABORTED_TXN_SIZE_BYTES] {
        let mut out = [0u8; ABORTED_TXN_SIZE_BYTES];
        let fields: [&[u8]; 5] = [
            &ABORTED_TXN_VERSION.to_be_bytes(),
            &self.producer_id.to_be_bytes(),
            &self.first_offset.0.to_be_bytes(),
            &self.last_offset.0.to_be_bytes(),
            &self.last_stable_offset.0.to_be_bytes(),
        ];
        let mut at = 0;
        for field in fields {
            out[at..at + field.len()].copy_from_slice(field);
            at += field.len();
        }
        out
    }

    /// Decodes one entry from the start of `bytes`; `position` names it in errors.
    ///
    /// # Errors
    /// [`AbortedTxnError`] for a short buffer or an unknown version.
    pub fn decode(bytes: &[u8], position: u64) -> Result<Self, AbortedTxnError> {
        let mut r = crate::format::reader::Reader::new(bytes);
        let truncated = AbortedTxnError::Truncated {
            position,
            available_bytes: bytes.len(),
        };
        let version = r.i16().ok_or(truncated)?;
        let (Some(producer_id), Some(first), Some(last), Some(lso)) =
            (r.i64(), r.i64(), r.i64(), r.i64())
        else {
            return Err(truncated);
        };
        if version != ABORTED_TXN_VERSION {
            return Err(AbortedTxnError::UnsupportedVersion { position, version });
        }
        Ok(AbortedTxn {
            producer_id,
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        })
    }
}

/// Decodes a whole `.txnindex` file.
///
/// # Errors
/// The first bad entry (a trailing partial entry is `Truncated`).
pub fn decode_txn_index(bytes: &[u8]) -> Result<Vec<AbortedTxn>, AbortedTxnError> {
    bytes
        .chunks(ABORTED_TXN_SIZE_BYTES)
        .enumerate()
        .map(|(i, entry)| AbortedTxn::decode(entry, (i * ABORTED_TXN_SIZE_BYTES) as u64))
        .collect()
}

/// The open transactions of a partition (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct OpenTxns {
    /// Producer id → first offset (the table's cold column is unused here: a byte each).
    by_producer: Table<i64, u8>,
    by_offset: Vec<(Offset, i64)>,
}

/// Stale entries tolerated in `by_offset` beyond twice the live count before a sweep.
const STALE_SLACK: usize = 64;

impl OpenTxns {
    pub(crate) fn new() -> Self {
        OpenTxns {
            by_producer: Table::new(-1, 0),
            by_offset: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.by_producer.len()
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.by_producer.memory_bytes()
            + self.by_offset.capacity() * std::mem::size_of::<(Offset, i64)>()
    }

    pub(crate) fn first_offset_of(&self, producer_id: i64) -> Option<Offset> {
        self.by_producer.get_hot(producer_id).map(|&o| Offset(o))
    }

    pub(crate) fn clear(&mut self) {
        self.by_producer.clear();
        self.by_offset.clear();
    }

    fn is_live(&self, (first, producer_id): (Offset, i64)) -> bool {
        self.by_producer.get_hot(producer_id) == Some(&first.0)
    }

    /// Opens (or re-points) `producer_id`'s transaction at `first`.
    pub(crate) fn open(&mut self, producer_id: i64, first: Offset) -> Result<(), TableFull> {
        if self.first_offset_of(producer_id) == Some(first) {
            return Ok(());
        }
        self.by_producer.insert(producer_id, first.0, 0)?;
        let entry = (first, producer_id);
        match self.by_offset.last() {
            Some(&(last, _)) if last >= first => {
                // Only snapshot loading, or a caller reusing offsets, opens at or below the
                // last entry. A stale entry equal to this one (the producer's transaction at
                // `first` closed, and one opens there again) is live again: keep it once.
                let from = self.by_offset.partition_point(|&(o, _)| o < first);
                let to = self.by_offset.partition_point(|&(o, _)| o <= first);
                if !self.by_offset[from..to].contains(&entry) {
                    self.by_offset.insert(to, entry);
                }
            }
            _ => self.by_offset.push(entry),
        }
        Ok(())
    }

    pub(crate) fn close(&mut self, producer_id: i64) {
        if self.by_producer.remove(producer_id).is_some() {
            self.tidy();
        }
    }

    /// Drops stale entries at the front, and sweeps all of them once they dominate.
    pub(crate) fn tidy(&mut self) {
        let stale_front = self
            .by_offset
            .iter()
            .take_while(|&&e| !self.is_live(e))
            .count();
        self.by_offset.drain(..stale_front);
        if self.by_offset.len() > 2 * self.by_producer.len() + STALE_SLACK {
            let live = std::mem::take(&mut self.by_offset);
            self.by_offset = live.into_iter().filter(|&e| self.is_live(e)).collect();
        }
    }

    /// First offset of the earliest open transaction.
    pub(crate) fn first_unstable_offset(&self) -> Option<Offset> {
        // The front is live after every `tidy`.
        self.by_offset.first().map(|&(o, _)| o)
    }

    /// First offset of the earliest open transaction of a producer other than `producer_id`.
    pub(crate) fn first_open_excluding(&self, producer_id: i64) -> Option<Offset> {
        self.by_offset
            .iter()
            .find(|&&(o, p)| p != producer_id && self.is_live((o, p)))
            .map(|&(o, _)| o)
    }

    /// Open transactions in first-offset order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Offset, i64)> + '_ {
        self.by_offset.iter().copied().filter(|&e| self.is_live(e))
    }

    pub(crate) fn check_invariants(&self) {
        self.by_producer.check_invariants();
        let live: Vec<_> = self.iter().collect();
        assert_eq!(
            live.len(),
            self.by_producer.len(),
            "every open transaction is ordered once"
        );
        assert!(
            live.windows(2).all(|w| w[0].0 <= w[1].0),
            "ordered by first offset"
        );
        if let Some(&front) = self.by_offset.first() {
            assert!(self.is_live(front), "the front is live");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aborted_entry_round_trips_in_34_bytes() {
        let e = AbortedTxn {
            producer_id: 77,
            first_offset: Offset(10),
            last_offset: Offset(20),
            last_stable_offset: Offset(15),
        };
        let bytes = e.encode();
        assert_eq!(bytes.len(), 34);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &77i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&bytes, 0), Ok(e));
        assert!(matches!(
            AbortedTxn::decode(&bytes[..33], 68),
            Err(AbortedTxnError::Truncated {
                position: 68,
                available_bytes: 33
            })
        ));
        let mut v1 = bytes;
        v1[1] = 1;
        assert!(matches!(
            AbortedTxn::decode(&v1, 0),
            Err(AbortedTxnError::UnsupportedVersion { version: 1, .. })
        ));
    }

    #[test]
    fn open_close_and_first_unstable_offset() {
        let mut t = OpenTxns::new();
        t.open(1, Offset(10)).unwrap();
        t.open(2, Offset(20)).unwrap();
        t.open(3, Offset(30)).unwrap();
        assert_eq!(t.first_unstable_offset(), Some(Offset(10)));
        assert_eq!(t.first_open_excluding(1), Some(Offset(20)));
        t.close(2);
        assert_eq!(t.first_open_excluding(1), Some(Offset(30)));
        t.close(1);
        assert_eq!(t.first_unstable_offset(), Some(Offset(30)));
        t.check_invariants();
        t.clear();
        assert_eq!(t.first_unstable_offset(), None);
        t.check_invariants();
    }

    #[test]
    fn a_transaction_reopened_at_the_offset_of_its_closed_one_is_ordered_once() {
        // Found by the lookahead property test: producer 4's transaction at 9 closes behind
        // producer 7's older one (so its entry stays, stale), then opens at 9 again (a caller
        // reusing offsets); the stale entry is live again and must not be pushed twice.
        let mut t = OpenTxns::new();
        t.open(7, Offset(4)).unwrap();
        t.open(4, Offset(9)).unwrap();
        t.close(4);
        t.open(4, Offset(9)).unwrap();
        t.check_invariants();
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [(Offset(4), 7), (Offset(9), 4)]
        );
        t.close(7);
        assert_eq!(t.first_unstable_offset(), Some(Offset(9)));
        t.close(4);
        assert_eq!(t.first_unstable_offset(), None);
        t.check_invariants();
    }

    #[test]
    fn stale_entries_are_swept() {
        let mut t = OpenTxns::new();
        t.open(0, Offset(0)).unwrap();
        for i in 1..10_000 {
            t.open(i, Offset(i)).unwrap();
            t.close(i);
        }
        assert!(t.by_offset.len() <= 2 + STALE_SLACK + 1);
        t.check_invariants();
    }
}
