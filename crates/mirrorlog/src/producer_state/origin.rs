//! Where an append comes from ([`Origin`]: the rules differ per origin, design.md §Producer state) and what the
//! PSM needs of each batch ([`BatchInfo`]: its final offsets and producer fields).

use super::BatchMetadata;
use crate::format::{sequence, BatchKind, BatchView, Offset, ProducerFields};

/// Where an append comes from; the rules differ (design.md §Producer state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A producer client of this cluster: offsets assigned, sequences checked, no control batches.
    Client,
    /// A coordinator of this cluster writing markers or the barrier: epochs and coordinator
    /// epochs checked, sequences not.
    Coordinator,
    /// A follower copying its own cluster's leader: offsets kept, lower epochs accepted.
    Replication,
    /// Fetched from another cluster by mirroring: like Replication, offsets kept as-is.
    Mirror,
}

impl Origin {
    /// Whether lower producer and coordinator epochs are accepted (copies of someone else's log).
    #[must_use]
    pub fn accepts_stale_epochs(self) -> bool {
        matches!(self, Origin::Replication | Origin::Mirror)
    }
}

/// What the PSM needs of one batch: its final offsets and producer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    /// First offset (for client appends: the one the log assigned).
    pub base_offset: Offset,
    /// Last offset.
    pub last_offset: Offset,
    /// `producerId`, `producerEpoch`, `baseSequence`.
    pub producer: ProducerFields,
    /// Transactional bit.
    pub transactional: bool,
    /// Data, marker, barrier, …
    pub kind: BatchKind,
    /// `maxTimestamp` for data batches; the record timestamp for control batches.
    pub timestamp: i64,
}

impl BatchInfo {
    /// The PSM's view of a checked batch that will sit at `base_offset`.
    #[must_use]
    pub fn from_view(view: &BatchView<'_>, base_offset: Offset) -> Self {
        let h = view.header();
        let control = h.attributes.is_control();
        BatchInfo {
            base_offset,
            last_offset: Offset(base_offset.0 + i64::from(h.last_offset_delta)),
            producer: h.producer,
            transactional: h.attributes.is_transactional(),
            kind: view.kind(),
            // Control records carry timestampDelta 0: their time is the base timestamp.
            timestamp: if control {
                h.base_timestamp
            } else {
                h.max_timestamp
            },
        }
    }

    /// `lastOffsetDelta`.
    #[must_use]
    pub fn offset_delta(&self) -> i32 {
        (self.last_offset.0 - self.base_offset.0) as i32
    }

    /// Last sequence (Kafka's `lastSequence`: none stays none, otherwise wraps).
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        if self.producer.base_sequence < 0 {
            self.producer.base_sequence
        } else {
            sequence::last_sequence(self.producer.base_sequence, self.offset_delta())
        }
    }

    /// What the producer's history remembers of this batch.
    #[must_use]
    pub fn metadata(&self) -> BatchMetadata {
        BatchMetadata {
            last_seq: self.last_seq(),
            last_offset: self.last_offset,
            offset_delta: self.offset_delta(),
            timestamp: self.timestamp,
        }
    }
}
