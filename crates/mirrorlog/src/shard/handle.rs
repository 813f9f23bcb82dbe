//! [`ShardHandle`]: how other threads send requests to a shard (its bounded queue, waiting or
//! not when full).

use super::{PushError, Request, RequestQueue};
use crate::api::EngineError;
use std::sync::Arc;

/// Submits requests to a shard from any thread.
#[derive(Clone)]
pub struct ShardHandle {
    pub(super) index: usize,
    pub(super) queue: Arc<RequestQueue<Request>>,
}

impl ShardHandle {
    /// The shard's position.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Queues `request`, waiting while the queue is full.
    ///
    /// # Errors
    /// [`EngineError::ShardStopped`] (the request's reply resolves as broken too).
    pub fn send(&self, request: Request) -> Result<(), EngineError> {
        self.queue
            .push_blocking(request)
            .map_err(|_| EngineError::ShardStopped(self.index))
    }

    /// Queues `request` if there is room.
    ///
    /// # Errors
    /// The request back when the queue is full or closed.
    // The request comes back by value so that a caller can retry it without a copy.
    #[allow(clippy::result_large_err)]
    pub fn try_send(&self, request: Request) -> Result<(), PushError<Request>> {
        self.queue.try_push(request)
    }

    /// The queue (for async callers waiting for room).
    #[must_use]
    pub fn queue(&self) -> &RequestQueue<Request> {
        &self.queue
    }
}
