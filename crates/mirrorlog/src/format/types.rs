//! Small value types shared by every layer above `format`.
//!
//! Different kinds of positions are different types so that mixing them is a compile error:
//! an [`Offset`] is a Kafka offset (a record's logical number in a partition), a byte position
//! in a buffer or file is a plain `u64` named `position` everywhere.

use std::fmt;

/// A Kafka offset: the logical number of a record in a partition log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    /// The offset `delta` records after this one, or `None` on i64 overflow.
    #[must_use]
    pub fn checked_add(self, delta: i64) -> Option<Offset> {
        self.0.checked_add(delta).map(Offset)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// `producerId` value meaning "no producer" (non-idempotent batches and barriers).
pub const NO_PRODUCER_ID: i64 = -1;
/// `producerEpoch` value meaning "no epoch".
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// `baseSequence` value meaning "no sequence".
pub const NO_SEQUENCE: i32 = -1;
/// `partitionLeaderEpoch` value meaning "not stamped".
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

/// The producer fields of a batch header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerFields {
    /// `producerId`; [`NO_PRODUCER_ID`] when absent.
    pub producer_id: i64,
    /// `producerEpoch`; [`NO_PRODUCER_EPOCH`] when absent.
    pub producer_epoch: i16,
    /// `baseSequence`; [`NO_SEQUENCE`] when absent.
    pub base_sequence: i32,
}

impl ProducerFields {
    /// Fields of a batch written without a producer (plain, non-idempotent, or a barrier).
    pub const NONE: ProducerFields = ProducerFields {
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        base_sequence: NO_SEQUENCE,
    };

    /// Whether the batch carries a producer id (idempotent or transactional).
    #[must_use]
    pub fn has_producer(&self) -> bool {
        self.producer_id >= 0
    }
}
