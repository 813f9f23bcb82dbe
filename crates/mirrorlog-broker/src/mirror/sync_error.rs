//! Why a sync from a source (topic configs, added partitions, group offsets) did not happen.
//! The fetcher shows it in the mirror's status and tries again at the next round.

use crate::net::client::ClientError;

/// A sync that failed, for a topic or a group or for the whole round.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// No source broker answered (each one's failure).
    #[error("{0}")]
    Unanswered(ClientError),
    /// The source answered an error for a resource.
    #[error("source {api} of {resource}: error {code}: {message}")]
    Refused {
        /// The request.
        api: &'static str,
        /// The topic or group.
        resource: String,
        /// Kafka's error code.
        code: i16,
        /// The source's message.
        message: String,
    },
    /// The source left out a topic it was asked about.
    #[error("the source did not describe {0}")]
    NotDescribed(String),
    /// The topic is not here.
    #[error("topic {0} is not here")]
    NotHere(String),
    /// This broker has no authorizer, so no ACLs to sync into.
    #[error("no authorizer here (authorizer.class.name is not set): ACLs are not synced")]
    NoAuthorizer,
    /// Applying it here failed.
    #[error("{doing}: {reason}")]
    Here {
        /// What was being done.
        doing: String,
        /// What the broker or engine said.
        reason: String,
    },
}

impl SyncError {
    /// A failure applying the sync here.
    pub fn here(doing: impl Into<String>) -> impl FnOnce(&dyn std::fmt::Display) -> SyncError {
        let doing = doing.into();
        move |reason| SyncError::Here {
            doing,
            reason: reason.to_string(),
        }
    }
}

/// Why a failover could not stamp a new leader epoch.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the leader epoch is at its maximum: no failover can follow it")]
pub struct EpochExhausted;
