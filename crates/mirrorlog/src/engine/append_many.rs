//! `Engine::append_many`: the appends of many partitions as one call — a mirror
//! destination's fetch answer, a batch for each of hundreds of partitions, made durable
//! together. One request per shard instead of one per partition: the shard takes the whole
//! answer in one turn, so its rounds go into the same journal flush, and the caller waits once.

use super::Engine;
use crate::api::{EngineError, PartitionAppend};
use crate::log::AppendOutcome;
use crate::producer_state::Origin;
use crate::shard::{promise, Call, PartResult, Request};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The result of [`Engine::append_many`]: every partition's result in the order given, once
/// each is durable or refused. `.await` it on any runtime, or `.wait()`.
///
/// Cancel safety as [`Call`]'s: dropping it does not cancel the appends.
#[must_use = "the results of the appends arrive through it"]
#[derive(Debug)]
pub struct AppendMany {
    /// Per shard: its call and the positions of its partitions in the request.
    calls: Vec<(Call<Vec<PartResult>>, Vec<usize>)>,
    results: Vec<Option<PartResult>>,
}

impl Engine {
    /// Appends to many partitions as one call (each entry as [`Engine::append`], or as
    /// [`Engine::append_following`] when it names `follows`), all from `origin`.
    ///
    /// Each partition's append is independent: one refused changes nothing for the others.
    /// Appends to one partition take effect in the order given, and in order with this
    /// thread's other calls. The answer comes when every append is durable or refused.
    pub fn append_many(&self, appends: Vec<PartitionAppend>, origin: Origin) -> AppendMany {
        let mut results: Vec<Option<PartResult>> = (0..appends.len()).map(|_| None).collect();
        let mut per_shard: Vec<(Vec<PartitionAppend>, Vec<usize>)> =
            (0..self.shards.len()).map(|_| Default::default()).collect();
        for (i, a) in appends.into_iter().enumerate() {
            let (ours, at) = &mut per_shard[self.shard_of(&a.tp)];
            ours.push(a);
            at.push(i);
        }
        let mut calls = Vec::new();
        for (shard, (appends, at)) in per_shard.into_iter().enumerate() {
            if appends.is_empty() {
                continue;
            }
            if self.closed {
                for &i in &at {
                    results[i] = Some(Err(EngineError::ShardStopped(shard)));
                }
                continue;
            }
            let (reply, pending) = promise();
            let request = Request::AppendMany {
                appends,
                origin,
                reply,
            };
            calls.push((Call::new(&self.shards[shard], request, pending), at));
        }
        AppendMany { calls, results }
    }
}

impl AppendMany {
    /// Blocks until every append is answered.
    pub fn wait(mut self) -> Vec<Result<AppendOutcome, EngineError>> {
        for (call, at) in std::mem::take(&mut self.calls) {
            let answer = call.wait();
            place(&mut self.results, &at, answer);
        }
        self.finish()
    }

    fn finish(&mut self) -> Vec<PartResult> {
        std::mem::take(&mut self.results)
            .into_iter()
            // Every position belongs to exactly one shard's call, answered above.
            .map(|r| r.unwrap_or(Err(EngineError::ShardStopped(0))))
            .collect()
    }
}

/// Puts one shard's answer in its partitions' positions (its error in each of them).
fn place(
    results: &mut [Option<PartResult>],
    at: &[usize],
    answer: Result<Vec<PartResult>, EngineError>,
) {
    match answer {
        Ok(answers) => {
            for (&i, r) in at.iter().zip(answers) {
                results[i] = Some(r);
            }
        }
        Err(e) => {
            for &i in at {
                results[i] = Some(Err(e.clone()));
            }
        }
    }
}

impl Unpin for AppendMany {}

impl Future for AppendMany {
    type Output = Vec<PartResult>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut i = 0;
        while i < self.calls.len() {
            match Pin::new(&mut self.calls[i].0).poll(cx) {
                Poll::Ready(answer) => {
                    let (_, at) = self.calls.swap_remove(i);
                    place(&mut self.results, &at, answer);
                }
                Poll::Pending => i += 1,
            }
        }
        if self.calls.is_empty() {
            Poll::Ready(self.finish())
        } else {
            Poll::Pending
        }
    }
}
