//! [`ProducerView`]: a borrowed look at one producer's entry, read in place without unpacking.

use super::HotEntry;

/// A borrowed look at one producer's entry; see [`ProducerStateManager::view`](super::ProducerStateManager::view).
#[derive(Debug, Clone, Copy)]
pub struct ProducerView<'a> {
    pub(super) entry: &'a HotEntry,
}

impl ProducerView<'_> {
    /// Current epoch.
    #[must_use]
    pub fn epoch(&self) -> i16 {
        self.entry.epoch()
    }

    /// Last sequence of the newest batch, or [`crate::format::NO_SEQUENCE`].
    #[must_use]
    pub fn last_seq(&self) -> i32 {
        self.entry.last_seq()
    }

    /// Coordinator epoch of the last marker (−1 if none).
    #[must_use]
    pub fn coordinator_epoch(&self) -> i32 {
        self.entry.coordinator_epoch()
    }

    /// Timestamp of the last batch or marker (ms).
    #[must_use]
    pub fn last_timestamp(&self) -> i64 {
        self.entry.last_timestamp()
    }

    /// Whether the producer has an open transaction.
    #[must_use]
    pub fn has_open_transaction(&self) -> bool {
        self.entry.txn_open()
    }
}
