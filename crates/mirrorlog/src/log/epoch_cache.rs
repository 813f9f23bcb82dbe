//! The leader-epoch cache: `(epoch, start offset)` per leader epoch seen in the log, persisted
//! as Kafka's `leader-epoch-checkpoint` text file:
//!
//! ```text
//! 0            version
//! 2            entry count
//! 0 0          epoch start_offset
//! 3 1500
//! ```
//!
//! Entries increase in both epoch and start offset. `start_mirroring(EpochEnd(e))` asks for the
//! end offset of epoch `e`: the start of the first later epoch, or the log end for the latest.

use crate::format::Offset;

/// The checkpoint file name in a partition directory.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// Why a checkpoint file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Line `line` (1-based) is not what the format requires.
    #[error("checkpoint line {line}: {what}")]
    Malformed {
        /// Line number.
        line: usize,
        /// What was wrong.
        what: &'static str,
    },
}

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EpochCache {
    entries: Vec<(i32, Offset)>,
}

impl EpochCache {
    /// Entries, oldest first.
    #[must_use]
    pub fn entries(&self) -> &[(i32, Offset)] {
        &self.entries
    }

    /// The latest epoch.
    #[must_use]
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|&(e, _)| e)
    }

    /// Records that `epoch` starts at `start`; ignored unless it is newer than the latest.
    /// Returns whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start: Offset) -> bool {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| epoch <= latest) {
            return false;
        }
        self.entries.push((epoch, start));
        true
    }

    /// The end offset of `epoch`: the start of the first later epoch, or `log_end` when `epoch`
    /// is the latest (or later). `None` when `epoch` predates every entry.
    #[must_use]
    pub fn end_offset(&self, epoch: i32, log_end: Offset) -> Option<Offset> {
        let first = self.entries.first()?;
        if epoch < first.0 {
            return None;
        }
        Some(
            self.entries
                .iter()
                .find(|&&(e, _)| e > epoch)
                .map_or(log_end, |&(_, start)| start),
        )
    }

    /// Kafka's `endOffsetFor` (OffsetsForLeaderEpoch): the latest epoch ends at `log_end`; an
    /// older one at the start of the first later epoch, answered with the largest known epoch
    /// at or below it (epochs can jump: KIP-1279 bumps a destination's by large steps), or
    /// with itself when it predates every entry. `(-1, -1)` for -1, for an epoch past the
    /// latest, and for an empty cache.
    #[must_use]
    pub fn end_offset_for(&self, requested: i32, log_end: Offset) -> (i32, Offset) {
        const UNDEFINED: (i32, Offset) = (-1, Offset(-1));
        if requested < 0 {
            return UNDEFINED;
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end);
        }
        let Some(&(_, higher_start)) = self.entries.iter().find(|&&(e, _)| e > requested) else {
            return UNDEFINED;
        };
        let floor = self.entries.iter().rev().find(|&&(e, _)| e <= requested);
        (floor.map_or(requested, |&(e, _)| e), higher_start)
    }

    /// The epoch of the batch at `offset`: the last entry starting at or before it.
    #[must_use]
    pub fn epoch_for(&self, offset: Offset) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|&&(_, start)| start <= offset)
            .map(|&(e, _)| e)
    }

    /// Drops entries starting at or after `end` (log truncation). Returns whether it changed.
    pub fn truncate_from_end(&mut self, end: Offset) -> bool {
        let before = self.entries.len();
        self.entries.retain(|&(_, start)| start < end);
        before != self.entries.len()
    }

    /// Moves the start to `log_start` (delete-records, retention): entries wholly below it go,
    /// the one spanning it starts there. Returns whether it changed.
    pub fn truncate_from_start(&mut self, log_start: Offset) -> bool {
        let spanning = self
            .entries
            .iter()
            .rposition(|&(_, start)| start <= log_start);
        let Some(i) = spanning else { return false };
        let changed = i > 0 || self.entries[0].1 != log_start;
        self.entries.drain(..i);
        if let Some(first) = self.entries.first_mut() {
            first.1 = log_start;
        }
        changed
    }

    /// The checkpoint file text.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = format!("0\n{}\n", self.entries.len());
        for (epoch, start) in &self.entries {
            out.push_str(&format!("{epoch} {}\n", start.0));
        }
        out
    }

    /// Parses checkpoint text.
    ///
    /// # Errors
    /// [`CheckpointError`] naming the first bad line.
    pub fn decode(text: &str) -> Result<Self, CheckpointError> {
        let mut lines = text.lines();
        let bad = |line, what| CheckpointError::Malformed { line, what };
        if lines.next() != Some("0") {
            return Err(bad(1, "version must be 0"));
        }
        let count: usize = lines
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or(bad(2, "count is not a number"))?;
        let mut cache = EpochCache::default();
        for i in 0..count {
            let line = lines.next().ok_or(bad(3 + i, "missing entry"))?;
            let mut parts = line.split_whitespace();
            let epoch: i32 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or(bad(3 + i, "bad epoch"))?;
            let start: i64 = parts
                .next()
                .and_then(|p| p.parse().ok())
                .ok_or(bad(3 + i, "bad start offset"))?;
            if parts.next().is_some() {
                return Err(bad(3 + i, "trailing fields"));
            }
            if cache
                .entries
                .last()
                .is_some_and(|&(e, s)| epoch <= e || Offset(start) < s)
            {
                return Err(bad(3 + i, "entries must increase"));
            }
            cache.entries.push((epoch, Offset(start)));
        }
        if lines.any(|l| !l.trim().is_empty()) {
            return Err(bad(3 + count, "more entries than the count"));
        }
        Ok(cache)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        let mut c = EpochCache::default();
        for &(e, o) in entries {
            assert!(c.assign(e, Offset(o)));
        }
        c
    }

    /// The cases of Kafka's `LeaderEpochFileCacheTest` for `endOffsetFor`.
    #[test]
    fn end_offset_for_answers_as_kafka() {
        let leo = Offset(20);
        // shouldReturnLogEndOffsetIfLatestEpochRequested
        let c = cache(&[(2, 6), (3, 8), (4, 11)]);
        assert_eq!(c.end_offset_for(4, leo), (4, leo));
        // shouldReturnUndefinedOffsetIfUndefinedEpochRequested
        assert_eq!(c.end_offset_for(-1, leo), (-1, Offset(-1)));
        // shouldReturnUnsupportedIfNoEpochRecorded (and for an undefined epoch)
        let empty = EpochCache::default();
        assert_eq!(empty.end_offset_for(0, leo), (-1, Offset(-1)));
        assert_eq!(empty.end_offset_for(-1, leo), (-1, Offset(-1)));
        // shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch
        let c = cache(&[(5, 11), (6, 12)]);
        assert_eq!(c.end_offset_for(4, leo), (4, Offset(11)));
        // shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch
        let c = cache(&[(1, 11), (2, 13)]);
        assert_eq!(c.end_offset_for(1, leo), (1, Offset(13)));
        // shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested
        let c = cache(&[(0, 10), (2, 13), (4, 17)]);
        assert_eq!(c.end_offset_for(0, leo), (0, Offset(13)));
        assert_eq!(c.end_offset_for(1, leo), (0, Offset(13)));
        assert_eq!(c.end_offset_for(2, leo), (2, Offset(17)));
        assert_eq!(c.end_offset_for(3, leo), (2, Offset(17)));
        // shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked
        let c = cache(&[(2, 100)]);
        assert_eq!(c.end_offset_for(3, Offset(100)), (-1, Offset(-1)));
        // A destination's epoch jumped by a large step (KIP-1279): the epochs between belong
        // to the one before the jump.
        let c = cache(&[(0, 0), (7, 50), (1_000_007, 90)]);
        assert_eq!(c.end_offset_for(500, leo), (7, Offset(90)));
        assert_eq!(c.end_offset_for(1_000_007, leo), (1_000_007, leo));
        assert_eq!(c.epoch_for(Offset(89)), Some(7));
        assert_eq!(c.epoch_for(Offset(90)), Some(1_000_007));
    }

    #[test]
    fn assign_end_offsets_truncation_and_text_round_trip() {
        let mut c = EpochCache::default();
        assert!(c.assign(0, Offset(0)));
        assert!(!c.assign(0, Offset(10)), "an epoch starts once");
        assert!(c.assign(3, Offset(100)));
        assert!(c.assign(5, Offset(250)));
        assert!(!c.assign(4, Offset(300)), "epochs only grow");
        assert_eq!(c.end_offset(0, Offset(400)), Some(Offset(100)));
        assert_eq!(
            c.end_offset(2, Offset(400)),
            Some(Offset(100)),
            "an unseen epoch ends where the next starts"
        );
        assert_eq!(c.end_offset(5, Offset(400)), Some(Offset(400)));
        assert_eq!(c.end_offset(-1, Offset(400)), None);
        let text = c.encode();
        assert_eq!(text, "0\n3\n0 0\n3 100\n5 250\n");
        assert_eq!(EpochCache::decode(&text), Ok(c.clone()));
        assert!(c.truncate_from_end(Offset(250)));
        assert_eq!(c.latest_epoch(), Some(3));
        assert!(c.truncate_from_start(Offset(120)));
        assert_eq!(c.entries(), &[(3, Offset(120))]);
        for bad in [
            "1\n0\n",
            "0\nx\n",
            "0\n2\n1 5\n",
            "0\n2\n3 5\n2 9\n",
            "0\n1\n1 5 6\n",
            "0\n0\n1 1\n",
        ] {
            assert!(EpochCache::decode(bad).is_err(), "{bad:?}");
        }
    }
}
