//! What the mirror fetcher does with each Fetch error code, as Kafka's follower fetcher
//! (`AbstractFetcherThread.processFetchRequest`) and consumer fetcher do, and the per-partition
//! backoff that spaces its retries.
//!
//! | code | name | action |
//! |---:|---|---|
//! | 0 | NONE | append the batches |
//! | 1 | OFFSET_OUT_OF_RANGE | ListOffsets earliest and latest at the leader: below its log start, realign there; past its end, truncate (OffsetForLeaderEpoch, else to its end); inside, retry with backoff |
//! | 3 | UNKNOWN_TOPIC_OR_PARTITION | refresh metadata, retry with backoff |
//! | 5 | LEADER_NOT_AVAILABLE | refresh metadata, retry with backoff |
//! | 6 | NOT_LEADER_OR_FOLLOWER | refresh metadata, retry with backoff at the new leader |
//! | 9 | REPLICA_NOT_AVAILABLE | refresh metadata, retry with backoff |
//! | 56 | KAFKA_STORAGE_ERROR | refresh metadata, retry with backoff |
//! | 74 | FENCED_LEADER_EPOCH | refresh metadata (our epoch is stale), retry with backoff |
//! | 75 | UNKNOWN_LEADER_EPOCH | refresh metadata (the leader lags our epoch), retry with backoff |
//! | 100 | UNKNOWN_TOPIC_ID | refresh metadata, retry with backoff |
//! | 103 | INCONSISTENT_TOPIC_ID | refresh metadata, retry with backoff |
//! | 29 | TOPIC_AUTHORIZATION_FAILED | retry with backoff; the reason shows until the source's ACLs allow the read |
//! | 31 | CLUSTER_AUTHORIZATION_FAILED | as 29 |
//! | 109 | OFFSET_MOVED_TO_TIERED_STORAGE | stall the partition with the reason: a consumer fetch (ours) is served from remote storage, so only a follower gets it |
//! | any other | | retry with backoff (Kafka's `partitionsWithError`) |
//!
//! A whole-request error (Fetch v7+'s top-level `error_code`) counts as that error for each
//! partition of the request. A lost connection backs off the connection to that broker and
//! refreshes metadata; its partitions are asked again once it is back. Backoff is per
//! partition, exponential from 100 ms to 1 s with ±20 % jitter (Kafka's
//! `retry.backoff.ms` / `retry.backoff.max.ms`, KIP-580: the engine's mirror destination's
//! [`Backoff`]), and one partition's backoff never delays another's fetches.

pub use mirrorlog::mirror::destination::Backoff;

/// What one partition's Fetch error code calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Batches to append.
    Append,
    /// Find the source's log start and end, then realign, truncate or retry.
    OutOfRange,
    /// The leader (or our view of it) is stale: refresh metadata and retry with backoff.
    Reroute,
    /// Retry with backoff.
    Retry,
    /// Stop fetching the partition and show the reason: retrying cannot help.
    Stall,
}

/// The table above, as code.
pub fn action(code: i16) -> Action {
    match code {
        0 => Action::Append,
        1 => Action::OutOfRange,
        3 | 5 | 6 | 9 | 56 | 74 | 75 | 100 | 103 => Action::Reroute,
        109 => Action::Stall,
        _ => Action::Retry,
    }
}

/// Kafka's name of a Fetch error code, for the reasons the admin surface shows.
pub fn name(code: i16) -> String {
    crate::net::client::error_name(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_the_table_has_its_action() {
        assert_eq!(action(0), Action::Append);
        assert_eq!(action(1), Action::OutOfRange);
        for c in [3, 5, 6, 9, 56, 74, 75, 100, 103] {
            assert_eq!(action(c), Action::Reroute, "{}", name(c));
        }
        for c in [-1, 2, 7, 13, 29, 31, 35, 76, 999] {
            assert_eq!(action(c), Action::Retry, "{}", name(c));
        }
        assert_eq!(action(109), Action::Stall);
        assert_eq!(name(6), "NOT_LEADER_OR_FOLLOWER (6)");
        assert_eq!(name(-1), "UNKNOWN_SERVER_ERROR (-1)");
        assert_eq!(name(58), "SASL_AUTHENTICATION_FAILED (58)");
        assert_eq!(name(100), "UNKNOWN_TOPIC_ID (100)");
        assert_eq!(name(109), "OFFSET_MOVED_TO_TIERED_STORAGE (109)");
        assert_eq!(name(4242), "error 4242");
    }
}
