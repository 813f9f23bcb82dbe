//! Why the broker could not open, or a damaged topic could not be finished or dropped.

use crate::config::ConfigError;
use crate::storage::fd_budget::FdBudgetError;
use crate::storage::store::StoreError;
use crate::storage::topics::TopicError;
use mirrorlog::engine::EngineError;

/// Why the broker could not open, or a damaged topic could not be finished or dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// One of the broker's documents.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine would not open.
    #[error("opening the engine: {0}")]
    Engine(Box<EngineError>),
    /// Too few file descriptors for the partitions held.
    #[error(transparent)]
    Files(#[from] FdBudgetError),
    /// A topic's settings.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A step of a topic's creation, growth or deletion.
    #[error("{doing}: {source}")]
    Partitions {
        /// What was being done.
        doing: String,
        /// What the engine said.
        source: Box<EngineError>,
    },
    /// The topic registry refused a change.
    #[error(transparent)]
    Topic(Box<TopicError>),
    /// The partitions on disk could not be listed.
    #[error("listing its partitions: {0}")]
    Listing(std::io::Error),
    /// A damaged topic with no entry to finish.
    #[error("topic {0} has no entry to finish: drop it instead")]
    NothingToFinish(String),
    /// `drop` of a topic that is not damaged.
    #[error("topic {0} is not damaged: delete it with DeleteTopics")]
    NotDamaged(String),
}

impl BrokerError {
    pub(super) fn partitions(doing: impl Into<String>) -> impl FnOnce(EngineError) -> BrokerError {
        let doing = doing.into();
        move |source| BrokerError::Partitions {
            doing,
            source: Box::new(source),
        }
    }
}

impl From<TopicError> for BrokerError {
    fn from(e: TopicError) -> Self {
        BrokerError::Topic(Box::new(e))
    }
}
