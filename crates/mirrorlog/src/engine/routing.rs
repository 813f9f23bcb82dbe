//! Routing: which shard serves a partition (a placement override, else a stable hash of its
//! name), and a call sent to that shard.

use super::Engine;
use crate::api::{EngineError, TopicPartition};
use crate::shard::{promise, Call, Reply, Request};

impl Engine {
    /// The shard serving `tp`: the placement override, else a stable hash.
    #[must_use]
    pub fn shard_of(&self, tp: &TopicPartition) -> usize {
        self.config
            .placement
            .get(tp)
            .copied()
            .unwrap_or((tp.placement_hash() % self.shards.len() as u64) as usize)
    }

    pub(super) fn call<T>(
        &self,
        tp: &TopicPartition,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Call<T> {
        if self.closed {
            return Call::failed(EngineError::ShardStopped(self.shard_of(tp)));
        }
        let (reply, pending) = promise();
        Call::new(&self.shards[self.shard_of(tp)], make(reply), pending)
    }
}
