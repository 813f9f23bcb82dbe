//! Calls over many partitions at once, one request per shard instead of one per partition:
//! - `Engine::append_many`: a mirror destination's fetch answer, a batch for each of hundreds
//!   of partitions, made durable together. The shard takes the whole answer in one turn, so
//!   its rounds go into the same journal flush, and the caller waits once.
//! - `Engine::read_many`: a fetch's reads of hundreds of partitions, answered together.
//! - `Engine::wait_any`: a long-poll fetch's wait for the first of its partitions to have
//!   bytes (Kafka's `DelayedFetch`).

use super::Engine;
use crate::api::{EngineError, PartitionAppend, ReadRequest, TopicPartition};
use crate::log::{AppendOutcome, ReadResult};
use crate::producer_state::Origin;
use crate::shard::{promise, Call, Request};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The result of a many-partition call: every partition's result in the order given, once
/// each is answered. `.await` it on any runtime, or `.wait()`.
///
/// Cancel safety as [`Call`]'s: dropping it does not cancel the calls.
#[must_use = "the results arrive through it"]
#[derive(Debug)]
pub struct Many<T> {
    /// Per shard: its call and the positions of its partitions in the request.
    calls: Vec<(Call<Answers<T>>, Vec<usize>)>,
    results: Vec<Option<Result<T, EngineError>>>,
}

/// One shard's answer: each of its partitions' results.
type Answers<T> = Vec<Result<T, EngineError>>;

/// The result of [`Engine::append_many`]: each append's, once durable or refused.
pub type AppendMany = Many<AppendOutcome>;
/// The result of [`Engine::read_many`]: each read's.
pub type ReadMany = Many<ReadResult>;

impl Engine {
    /// `items` by shard: each shard's items and their positions in `items`.
    fn by_shard<X>(
        &self,
        items: Vec<X>,
        tp: impl Fn(&X) -> &TopicPartition,
    ) -> Vec<(Vec<X>, Vec<usize>)> {
        let mut per_shard: Vec<(Vec<X>, Vec<usize>)> =
            (0..self.shards.len()).map(|_| Default::default()).collect();
        for (i, x) in items.into_iter().enumerate() {
            let (ours, at) = &mut per_shard[self.shard_of(tp(&x))];
            ours.push(x);
            at.push(i);
        }
        per_shard
    }

    /// One request per shard holding any of `items`, made by `request`; positions of a shard
    /// that cannot be asked (the engine closed) get `ShardStopped` in `results`.
    fn many<X, T>(
        &self,
        items: Vec<X>,
        tp: impl Fn(&X) -> &TopicPartition,
        mut request: impl FnMut(Vec<X>, crate::shard::Reply<Vec<Result<T, EngineError>>>) -> Request,
    ) -> Many<T> {
        let mut results: Vec<Option<Result<T, EngineError>>> =
            (0..items.len()).map(|_| None).collect();
        let mut calls = Vec::new();
        for (shard, (items, at)) in self.by_shard(items, tp).into_iter().enumerate() {
            if items.is_empty() {
                continue;
            }
            if self.closed {
                for &i in &at {
                    results[i] = Some(Err(EngineError::ShardStopped(shard)));
                }
                continue;
            }
            let (reply, pending) = promise();
            let call = Call::new(&self.shards[shard], request(items, reply), pending);
            calls.push((call, at));
        }
        Many { calls, results }
    }

    /// Appends to many partitions as one call (each entry as [`Engine::append`], or as
    /// [`Engine::append_following`] when it names `follows`), all from `origin`.
    ///
    /// Each partition's append is independent: one refused changes nothing for the others.
    /// Appends to one partition take effect in the order given, and in order with this
    /// thread's other calls. The answer comes when every append is durable or refused.
    pub fn append_many(&self, appends: Vec<PartitionAppend>, origin: Origin) -> AppendMany {
        self.many(
            appends,
            |a| &a.tp,
            |appends, reply| Request::AppendMany {
                appends,
                origin,
                reply,
            },
        )
    }

    /// Reads many partitions as one call, each as [`Engine::read`] (its own `ReadRequest`);
    /// the answer comes when every read is answered. A read that may wait (`max_wait`) holds
    /// the whole answer back until it is answered: to wait for the first of many, use
    /// [`Engine::wait_any`].
    pub fn read_many(&self, reads: Vec<(TopicPartition, ReadRequest)>) -> ReadMany {
        self.many(
            reads,
            |r| &r.0,
            |reads, reply| Request::ReadMany { reads, reply },
        )
    }

    /// Long-polls many partitions as one call: each read as [`Engine::read`] (parked until its
    /// `min_bytes` are readable or its `max_wait` passes), and the answer is the position of
    /// the first one answered, with data or at its deadline. The others are let go. With no
    /// reads nothing could wake it: it answers at once, `ShardStopped(0)`.
    pub fn wait_any(&self, reads: Vec<(TopicPartition, ReadRequest)>) -> WaitAny {
        let mut calls = Vec::new();
        for (shard, (reads, at)) in self.by_shard(reads, |r| &r.0).into_iter().enumerate() {
            if reads.is_empty() {
                continue;
            }
            if self.closed {
                return WaitAny {
                    calls: Vec::new(),
                    closed: Some(shard),
                };
            }
            let (reply, pending) = promise();
            let request = Request::WaitAny { reads, reply };
            calls.push((Call::new(&self.shards[shard], request, pending), at));
        }
        let closed = calls.is_empty().then_some(0);
        WaitAny { calls, closed }
    }
}

impl<T> Many<T> {
    /// Blocks until every append is answered.
    pub fn wait(mut self) -> Vec<Result<T, EngineError>> {
        for (call, at) in std::mem::take(&mut self.calls) {
            let answer = call.wait();
            place(&mut self.results, &at, answer);
        }
        self.finish()
    }

    fn finish(&mut self) -> Vec<Result<T, EngineError>> {
        std::mem::take(&mut self.results)
            .into_iter()
            // Every position belongs to exactly one shard's call, answered above.
            .map(|r| r.unwrap_or(Err(EngineError::ShardStopped(0))))
            .collect()
    }
}

/// Puts one shard's answer in its partitions' positions (its error in each of them).
fn place<T>(
    results: &mut [Option<Result<T, EngineError>>],
    at: &[usize],
    answer: Result<Vec<Result<T, EngineError>>, EngineError>,
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

impl<T> Unpin for Many<T> {}

impl<T> Future for Many<T> {
    type Output = Vec<Result<T, EngineError>>;

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

/// The result of [`Engine::wait_any`]: the position of the first read answered. Dropping it
/// lets every read still parked go at its shard's next tick.
#[must_use = "the answer arrives through it"]
#[derive(Debug)]
pub struct WaitAny {
    /// Per shard: its call and the positions of its reads in the request.
    calls: Vec<(Call<usize>, Vec<usize>)>,
    /// The engine was closed, or nothing was asked: this shard's `ShardStopped` at once.
    closed: Option<usize>,
}

impl WaitAny {
    /// Blocks the calling thread until the first read is answered.
    ///
    /// # Errors
    /// The first answer's error, or `ShardStopped`.
    pub fn wait(mut self) -> Result<usize, EngineError> {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        loop {
            if let Poll::Ready(v) = Pin::new(&mut self).poll(&mut cx) {
                return v;
            }
            std::thread::park();
        }
    }
}

impl Unpin for WaitAny {}

impl Future for WaitAny {
    type Output = Result<usize, EngineError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(shard) = self.closed {
            return Poll::Ready(Err(EngineError::ShardStopped(shard)));
        }
        for (call, at) in &mut self.calls {
            if let Poll::Ready(answer) = Pin::new(call).poll(cx) {
                let at = std::mem::take(at);
                return Poll::Ready(answer.map(|i| at.get(i).copied().unwrap_or(0)));
            }
        }
        Poll::Pending
    }
}
