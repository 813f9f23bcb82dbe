//! Producer ids, allocated durably in blocks (Kafka's `ProducerIdManager`): the end of the
//! block in use is in `broker/producer-ids.json` before any id of the block is handed out, and
//! a restart starts at the next block, so no id is ever given twice, even after a crash. Ids
//! left in a block when the broker stopped are skipped.

use crate::storage::store::{Document, StoreError};
use serde::{Deserialize, Serialize};

/// Ids reserved per write of the file (Kafka's block size).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    /// Every id below this one may have been handed out.
    reserved_end: i64,
}

/// The allocator.
pub struct ProducerIds {
    doc: Document,
    next: i64,
    reserved_end: i64,
}

impl ProducerIds {
    /// Opens the allocator in `dir`: the next id is the end of the last reserved block.
    pub fn open(dir: &std::path::Path) -> Result<Self, StoreError> {
        let doc = Document::new(dir, "producer-ids.json")?;
        let stored: Stored = doc.load()?.unwrap_or_default();
        if stored.reserved_end < 0 {
            return Err(StoreError {
                path: dir.join("producer-ids.json"),
                reason: format!("negative reserved_end {}", stored.reserved_end),
            });
        }
        Ok(ProducerIds {
            doc,
            next: stored.reserved_end,
            reserved_end: stored.reserved_end,
        })
    }

    /// A producer id never handed out before.
    pub fn allocate(&mut self) -> Result<i64, StoreError> {
        if self.next >= self.reserved_end {
            let end = self
                .next
                .checked_add(PRODUCER_ID_BLOCK_SIZE)
                .ok_or_else(|| StoreError {
                    path: "producer-ids.json".into(),
                    reason: "producer ids exhausted".into(),
                })?;
            self.doc.store(&Stored { reserved_end: end })?;
            self.reserved_end = end;
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_across_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 {
            let mut ids = ProducerIds::open(dir.path()).unwrap();
            for _ in 0..1500 {
                assert!(seen.insert(ids.allocate().unwrap()));
            }
        }
        assert_eq!(seen.len(), 4500);
    }
}
