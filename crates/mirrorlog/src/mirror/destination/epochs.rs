//! Where a local log agrees with its source, by leader epochs, as Kafka's follower finds it
//! (`AbstractFetcherThread.getOffsetTruncationState`): one step of the exchange, shared by the
//! fetcher (at start and on every leader change) and a start's plan.
//!
//! The local newest epoch is sent as OffsetForLeaderEpoch; the source answers the largest
//! epoch it has at or below it, and where that epoch ends there. When the local log knows that
//! epoch too (or knows no epoch at or below it), the logs agree up to the lower of the two
//! ends. When it does not, they agree at most up to the local end of the largest local epoch
//! below it: the local log is cut there and that epoch is asked next.

use crate::engine::EpochEndOffset;
use crate::format::Offset;

/// What one answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// The logs agree up to here, and no further: truncate here, done.
    Known(Offset),
    /// They agree at most up to `end`: truncate there, then ask again for `epoch` (the
    /// largest local epoch below the source's answer).
    AtMost {
        /// Where to cut.
        end: Offset,
        /// The epoch to ask next.
        epoch: i32,
    },
    /// The source has no epoch at or below ours: it holds another log.
    NoCommonEpoch,
}

/// One step: the source answered `source_epoch` ending at `source_end`; `local` is the local
/// log's own end for `source_epoch` (its largest epoch at or below it), `log_end` its end now.
pub fn agreement(
    source_epoch: i32,
    source_end: i64,
    local: EpochEndOffset,
    log_end: Offset,
) -> Agreement {
    if source_end < 0 || source_epoch < 0 {
        return Agreement::NoCommonEpoch;
    }
    // Kafka's `endOffsetForEpoch`: -1 when the local log knows no epoch at or below it it can
    // end; then, as when it knows the epoch itself, the source's end is where the logs agree.
    if local.end_offset.0 < 0 || local.leader_epoch == source_epoch {
        return Agreement::Known(Offset(source_end).min(log_end));
    }
    let end = local.end_offset.min(log_end);
    // Nothing to cut at the local end of the lower epoch, or no lower epoch: asking again
    // would not move.
    if end >= log_end || local.leader_epoch >= source_epoch {
        return Agreement::Known(end);
    }
    Agreement::AtMost {
        end,
        epoch: local.leader_epoch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(leader_epoch: i32, end: i64) -> EpochEndOffset {
        EpochEndOffset {
            leader_epoch,
            end_offset: Offset(end),
        }
    }

    /// A local log of epochs 0 (offsets 0-99) and 2 (100-129); sources answering as Kafka
    /// would for each history.
    #[test]
    fn each_answer_moves_as_a_kafka_follower_moves() {
        let end = Offset(130);
        // The source knows epoch 2 and ends it at 120: agree to 120.
        assert_eq!(
            agreement(2, 120, local(2, 130), end),
            Agreement::Known(Offset(120))
        );
        // It knows epoch 2 past our end: agree to our end.
        assert_eq!(agreement(2, 500, local(2, 130), end), Agreement::Known(end));
        // Its largest epoch at or below 2 is 1, which we lack: cut to our end of epoch 0
        // (100) and ask for 0 next.
        assert_eq!(
            agreement(1, 200, local(0, 100), end),
            Agreement::AtMost {
                end: Offset(100),
                epoch: 0
            }
        );
        // Then epoch 0 ends at 110 there: we keep all of ours (100).
        assert_eq!(
            agreement(0, 110, local(0, 100), Offset(100)),
            Agreement::Known(Offset(100))
        );
        // Or at 90: cut to 90.
        assert_eq!(
            agreement(0, 90, local(0, 100), Offset(100)),
            Agreement::Known(Offset(90))
        );
        // We know no epoch at or below its answer: its end is where we agree.
        assert_eq!(
            agreement(0, 50, local(-1, -1), end),
            Agreement::Known(Offset(50))
        );
        // It knows no epoch at or below ours.
        assert_eq!(
            agreement(-1, -1, local(2, 130), end),
            Agreement::NoCommonEpoch
        );
    }
}
