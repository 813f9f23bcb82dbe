//! One answer for many partitions' appends (`Engine::append_many`): a mirror destination's
//! fetch answer carries a batch for each of hundreds of partitions, and its caller wants one
//! answer when all of them are durable, not a call, a wake-up and an acknowledgement each.
//!
//! The shard splits the request into ordinary appends, in order, each answering through a
//! [`AppendReply::Part`] of one shared [`Gather`]; the last part to be answered fulfils the
//! caller's reply with every partition's result in the request's order. A part dropped
//! unanswered (the shard stopped) answers `ShardStopped`, so the caller is never left waiting.

use super::Reply;
use crate::api::EngineError;
use crate::log::AppendOutcome;
use std::sync::{Arc, Mutex};

/// One partition's result in a gathered answer.
pub type PartResult = Result<AppendOutcome, EngineError>;

/// Where an append's result goes: its own caller, or one part of a gathered answer.
#[derive(Debug)]
pub enum AppendReply {
    /// An `Engine::append` call's.
    One(Reply<AppendOutcome>),
    /// Part of an `Engine::append_many` call's.
    Part(GatherPart),
}

impl AppendReply {
    /// Hands the append's result to whoever waits for it.
    pub fn fulfil(self, value: PartResult) {
        match self {
            AppendReply::One(reply) => reply.fulfil(value),
            AppendReply::Part(part) => part.fulfil(value),
        }
    }
}

/// The results of one `append_many` request to one shard, gathered until the last one.
#[derive(Debug)]
pub struct Gather {
    state: Mutex<GatherState>,
    shard: usize,
}

#[derive(Debug)]
struct GatherState {
    results: Vec<Option<PartResult>>,
    left: usize,
    reply: Option<Reply<Vec<PartResult>>>,
}

impl Gather {
    /// A gather of `parts` results for `reply`, and its parts, in order. With no parts the
    /// reply is fulfilled at once (with no results).
    pub fn split(parts: usize, shard: usize, reply: Reply<Vec<PartResult>>) -> Vec<GatherPart> {
        if parts == 0 {
            reply.fulfil(Ok(Vec::new()));
            return Vec::new();
        }
        let gather = Arc::new(Gather {
            state: Mutex::new(GatherState {
                results: (0..parts).map(|_| None).collect(),
                left: parts,
                reply: Some(reply),
            }),
            shard,
        });
        (0..parts)
            .map(|index| GatherPart {
                gather: Some(gather.clone()),
                index,
            })
            .collect()
    }

    fn set(&self, index: usize, value: PartResult) {
        let done = {
            let mut state = self
                .state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match state.results.get_mut(index) {
                Some(slot @ None) => *slot = Some(value),
                // Answered already (never expected: a part is consumed by its answer).
                _ => return,
            }
            state.left -= 1;
            if state.left > 0 {
                return;
            }
            let results: Vec<PartResult> = std::mem::take(&mut state.results)
                .into_iter()
                .map(|r| r.unwrap_or(Err(EngineError::ShardStopped(self.shard))))
                .collect();
            state.reply.take().map(|reply| (reply, results))
        };
        if let Some((reply, results)) = done {
            reply.fulfil(Ok(results));
        }
    }
}

/// One partition's place in a [`Gather`]: answered once; dropped unanswered, it answers
/// `ShardStopped`.
#[derive(Debug)]
pub struct GatherPart {
    gather: Option<Arc<Gather>>,
    index: usize,
}

impl GatherPart {
    /// This partition's result.
    pub fn fulfil(mut self, value: PartResult) {
        if let Some(gather) = self.gather.take() {
            gather.set(self.index, value);
        }
    }
}

impl Drop for GatherPart {
    fn drop(&mut self) {
        if let Some(gather) = self.gather.take() {
            let shard = gather.shard;
            gather.set(self.index, Err(EngineError::ShardStopped(shard)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Offset;
    use crate::shard::promise;

    fn outcome(first: i64) -> AppendOutcome {
        AppendOutcome {
            first_offset: Offset(first),
            last_offset: Offset(first),
            duplicate: false,
        }
    }

    #[test]
    fn the_answer_comes_with_the_last_part_in_the_request_order() {
        let (reply, pending) = promise();
        let mut parts = Gather::split(3, 0, reply);
        let third = parts.pop().unwrap();
        let second = parts.pop().unwrap();
        let first = parts.pop().unwrap();
        third.fulfil(Ok(outcome(30)));
        first.fulfil(Err(EngineError::ShardStopped(9)));
        let mut pending = pending;
        assert!(
            pending.try_take().is_none(),
            "answered before the last part"
        );
        second.fulfil(Ok(outcome(20)));
        let results = pending.try_take().unwrap().unwrap().unwrap();
        assert_eq!(results.len(), 3);
        assert_eq!(results[0], Err(EngineError::ShardStopped(9)));
        assert_eq!(results[1].as_ref().unwrap().first_offset, Offset(20));
        assert_eq!(results[2].as_ref().unwrap().first_offset, Offset(30));
    }

    #[test]
    fn a_part_dropped_unanswered_answers_shard_stopped() {
        let (reply, pending) = promise();
        let mut parts = Gather::split(2, 4, reply);
        parts.pop().unwrap().fulfil(Ok(outcome(1)));
        drop(parts);
        let results = pending.wait().unwrap().unwrap();
        assert_eq!(results[0], Err(EngineError::ShardStopped(4)));
        assert!(results[1].is_ok());
    }

    #[test]
    fn no_parts_is_answered_at_once() {
        let (reply, pending) = promise();
        assert!(Gather::split(0, 0, reply).is_empty());
        assert_eq!(pending.wait().unwrap().unwrap(), Vec::new());
    }
}
