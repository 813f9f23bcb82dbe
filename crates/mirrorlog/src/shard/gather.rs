//! One answer for many partitions' calls (`Engine::append_many`, `Engine::read_many`): a
//! mirror destination's fetch answer carries a batch for each of hundreds of partitions, and a
//! fetch of a thousand partitions reads each; their callers want one answer when all of them
//! are done, not a call, a wake-up and an answer each. And one answer for the first of many
//! long-poll reads (`Engine::wait_any`): a fetch that waits for any of its partitions to have
//! bytes.
//!
//! The shard splits the request into ordinary appends or reads, in order, each answering
//! through a part of one shared [`Gather`]; the last part to be answered fulfils the caller's
//! reply with every partition's result in the request's order. A part dropped unanswered (the
//! shard stopped) answers `ShardStopped`, so the caller is never left waiting. An [`AnyPart`]
//! instead answers for all its siblings: the first one answered fulfils the caller's reply,
//! and the rest are let go as their caller's are.

use super::Reply;
use crate::api::EngineError;
use crate::log::{AppendOutcome, ReadResult};
use std::sync::{Arc, Mutex};

/// One partition's append result in a gathered answer.
pub type PartResult = Result<AppendOutcome, EngineError>;

/// Where an append's result goes: its own caller, or one part of a gathered answer.
#[derive(Debug)]
pub enum AppendReply {
    /// An `Engine::append` call's.
    One(Reply<AppendOutcome>),
    /// Part of an `Engine::append_many` call's.
    Part(GatherPart<AppendOutcome>),
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

/// Where a read's result goes: its own caller, one part of a gathered answer, or one of many
/// reads the first of which answers.
#[derive(Debug)]
pub enum ReadReply {
    /// An `Engine::read` call's.
    One(Reply<ReadResult>),
    /// Part of an `Engine::read_many` call's.
    Part(GatherPart<ReadResult>),
    /// One of an `Engine::wait_any` call's.
    Any(AnyPart),
}

impl ReadReply {
    /// Hands the read's result to whoever waits for it.
    pub fn fulfil(self, value: Result<ReadResult, EngineError>) {
        match self {
            ReadReply::One(reply) => reply.fulfil(value),
            ReadReply::Part(part) => part.fulfil(value),
            ReadReply::Any(any) => any.fulfil(value),
        }
    }

    /// Whether nobody waits for this result any more: a parked read is then let go.
    pub fn abandoned(&self) -> bool {
        match self {
            ReadReply::One(reply) => reply.abandoned(),
            ReadReply::Part(part) => part.abandoned(),
            ReadReply::Any(any) => any.abandoned(),
        }
    }
}

/// The results of one many-partition request to one shard, gathered until the last one.
#[derive(Debug)]
pub struct Gather<T> {
    state: Mutex<GatherState<T>>,
    shard: usize,
}

#[derive(Debug)]
struct GatherState<T> {
    results: Vec<Option<Result<T, EngineError>>>,
    left: usize,
    reply: Option<Reply<Vec<Result<T, EngineError>>>>,
}

impl<T> Gather<T> {
    /// A gather of `parts` results for `reply`, and its parts, in order. With no parts the
    /// reply is fulfilled at once (with no results).
    pub fn split(
        parts: usize,
        shard: usize,
        reply: Reply<Vec<Result<T, EngineError>>>,
    ) -> Vec<GatherPart<T>> {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, GatherState<T>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, index: usize, value: Result<T, EngineError>) {
        let done = {
            let mut state = self.lock();
            match state.results.get_mut(index) {
                Some(slot @ None) => *slot = Some(value),
                // Answered already (never expected: a part is consumed by its answer).
                _ => return,
            }
            state.left -= 1;
            if state.left > 0 {
                return;
            }
            let results: Vec<Result<T, EngineError>> = std::mem::take(&mut state.results)
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
pub struct GatherPart<T> {
    gather: Option<Arc<Gather<T>>>,
    index: usize,
}

impl<T> GatherPart<T> {
    /// This partition's result.
    pub fn fulfil(mut self, value: Result<T, EngineError>) {
        if let Some(gather) = self.gather.take() {
            gather.set(self.index, value);
        }
    }

    /// Whether the caller dropped the gathered call.
    pub fn abandoned(&self) -> bool {
        self.gather
            .as_ref()
            .is_some_and(|g| g.lock().reply.as_ref().is_some_and(|r| r.abandoned()))
    }
}

/// One of the reads of an `Engine::wait_any` request to one shard: the first answered fulfils
/// the caller's reply with its position; the others are then abandoned (a parked one is let go
/// at the shard's next tick). All dropped unanswered (the shard stopped), the reply breaks,
/// which its call reports as `ShardStopped`.
#[derive(Debug)]
pub struct AnyPart {
    reply: Arc<Mutex<Option<Reply<usize>>>>,
    index: usize,
}

impl AnyPart {
    /// `parts` reads of which the first answered fulfils `reply` with its index (an error with
    /// the error). With no parts the reply is fulfilled at once, with `ShardStopped`: nothing
    /// can wake it.
    pub fn split(parts: usize, shard: usize, reply: Reply<usize>) -> Vec<AnyPart> {
        if parts == 0 {
            reply.fulfil(Err(EngineError::ShardStopped(shard)));
            return Vec::new();
        }
        let shared = Arc::new(Mutex::new(Some(reply)));
        (0..parts)
            .map(|index| AnyPart {
                reply: shared.clone(),
                index,
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Reply<usize>>> {
        self.reply
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This read's result: the first one answers the call.
    pub fn fulfil(self, value: Result<ReadResult, EngineError>) {
        let reply = self.lock().take();
        if let Some(reply) = reply {
            reply.fulfil(value.map(|_| self.index));
        }
    }

    /// Whether the call was answered (by a sibling) or its caller went.
    pub fn abandoned(&self) -> bool {
        self.lock().as_ref().is_none_or(|r| r.abandoned())
    }
}

impl<T> Drop for GatherPart<T> {
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
        assert!(Gather::<AppendOutcome>::split(0, 0, reply).is_empty());
        assert_eq!(pending.wait().unwrap().unwrap(), Vec::new());
    }

    fn read() -> ReadResult {
        ReadResult {
            records: bytes::Bytes::new(),
            high_watermark: Offset(0),
            last_stable_offset: Offset(0),
            log_start_offset: Offset(0),
            aborted: Vec::new(),
            bytes_after: 0,
        }
    }

    #[test]
    fn the_first_of_any_answers_and_its_siblings_are_abandoned() {
        let (reply, pending) = promise();
        let mut parts = AnyPart::split(3, 0, reply);
        let third = parts.pop().unwrap();
        let second = parts.pop().unwrap();
        assert!(!second.abandoned());
        second.fulfil(Ok(read()));
        assert!(third.abandoned(), "answered by a sibling: let go");
        third.fulfil(Err(EngineError::ShardStopped(0)));
        assert_eq!(pending.wait().unwrap(), Ok(1));
    }

    #[test]
    fn any_dropped_unanswered_breaks_and_a_gone_caller_abandons() {
        let (reply, pending) = promise::<Result<usize, EngineError>>();
        drop(AnyPart::split(2, 0, reply));
        assert!(pending.wait().is_err(), "the shard stopped");
        let (reply, pending) = promise::<Result<usize, EngineError>>();
        let parts = AnyPart::split(2, 0, reply);
        drop(pending);
        assert!(parts.iter().all(AnyPart::abandoned));
        let (reply, pending) =
            promise::<Result<Vec<Result<ReadResult, EngineError>>, EngineError>>();
        let parts = Gather::split(2, 0, reply);
        assert!(!parts[0].abandoned());
        drop(pending);
        assert!(parts[0].abandoned());
    }
}
