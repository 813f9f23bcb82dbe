//! A call's result on its way from a shard to a caller on any thread.
//!
//! The shard holds a [`Promise`]; the caller holds a [`Call`]: a `Future` for async callers (any
//! runtime: it only stores the waker) with [`Call::wait`] for blocking ones. Underneath, the
//! one-shot [`Pending`] receives the value; dropping the promise unfulfilled (the shard is gone)
//! resolves it with [`Broken`], which the call reports as `ShardStopped`. A call's request is
//! queued when the call is made, in order with every other (see [`Call`]).

use super::{Request, ShardHandle};
use crate::api::EngineError;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};

/// The shard dropped the promise without an answer (it stopped or panicked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Broken;

struct State<T> {
    value: Option<Result<T, Broken>>,
    waker: Option<Waker>,
}

struct Slot<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Slot<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        // A poisoned lock only means a panic elsewhere while holding it; the state is still a
        // plain Option pair.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, value: Result<T, Broken>) {
        let waker = {
            let mut state = self.lock();
            if state.value.is_some() {
                return;
            }
            state.value = Some(value);
            state.waker.take()
        };
        self.ready.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The shard's side: fulfil once.
pub struct Promise<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// The caller's side: a future, or [`Pending::wait`].
#[must_use = "a request's result arrives through its Pending"]
pub struct Pending<T> {
    slot: Arc<Slot<T>>,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending")
    }
}

impl<T> std::fmt::Debug for Promise<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Promise")
    }
}

/// A connected promise and pending result.
pub fn promise<T>() -> (Promise<T>, Pending<T>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State {
            value: None,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Promise {
            slot: Some(slot.clone()),
        },
        Pending { slot },
    )
}

impl<T> Promise<T> {
    /// Hands `value` to the caller.
    pub fn fulfil(mut self, value: T) {
        if let Some(slot) = self.slot.take() {
            slot.set(Ok(value));
        }
    }
}

impl<T> Promise<T> {
    /// Whether nobody waits for the value any more (the caller dropped its `Pending`): a
    /// parked read whose caller went is let go instead of answered.
    pub fn abandoned(&self) -> bool {
        self.slot
            .as_ref()
            .is_some_and(|s| Arc::strong_count(s) == 1)
    }
}

impl<T> Drop for Promise<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            slot.set(Err(Broken));
        }
    }
}

impl<T> Pending<T> {
    /// A result that is ready at once.
    pub fn ready(value: T) -> Self {
        let (p, pending) = promise();
        p.fulfil(value);
        pending
    }

    /// Blocks the calling thread until the result arrives.
    ///
    /// # Errors
    /// [`Broken`] if the shard dropped the request.
    pub fn wait(self) -> Result<T, Broken> {
        let mut state = self.slot.lock();
        loop {
            if let Some(v) = state.value.take() {
                return v;
            }
            state = self
                .slot
                .ready
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// The result if it has arrived, without blocking.
    pub fn try_take(&mut self) -> Option<Result<T, Broken>> {
        self.slot.lock().value.take()
    }
}

impl<T> Future for Pending<T> {
    type Output = Result<T, Broken>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.slot.lock();
        match state.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A request's result: `.await` it on any runtime, or `.wait()`.
///
/// The request is queued to its shard when the call is made, whether or not the queue has room
/// (past its depth it waits in the queue's ordered overflow), so calls take effect in the order
/// they were made: one producer's pipelined appends reach the partition in sequence order.
///
/// Cancel safety: dropping a `Call` does not cancel its request, which takes effect as if the
/// call were awaited; only its result is discarded. (An append dropped this way is still
/// written and made durable.) The one exception is a long-poll read: parked waiting for bytes,
/// it is let go at the shard's next tick once its `Call` is dropped (a fetch whose connection
/// closed holds nothing until its `max_wait`).
#[must_use = "the result of the call arrives through it"]
pub struct Call<T> {
    pending: Option<Pending<Result<T, EngineError>>>,
    shard: usize,
}

impl<T> std::fmt::Debug for Call<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").field("shard", &self.shard).finish()
    }
}

impl<T> Call<T> {
    /// A call answered at once with `e` (the engine is closed).
    pub(crate) fn failed(e: EngineError) -> Self {
        Call {
            pending: Some(Pending::ready(Err(e))),
            shard: 0,
        }
    }

    /// Queues `request` to the shard behind `handle`, in order with every earlier call;
    /// `pending` is the request's result.
    pub(crate) fn new(
        handle: &ShardHandle,
        request: Request,
        pending: Pending<Result<T, EngineError>>,
    ) -> Self {
        // A stopped shard hands the request back; dropping it (and its promise) resolves the
        // pending as broken, which the call reports as `ShardStopped`.
        drop(handle.queue().push(request));
        Call {
            pending: Some(pending),
            shard: handle.index(),
        }
    }

    /// Blocks until the result arrives.
    ///
    /// # Errors
    /// The call's error, or [`EngineError::ShardStopped`].
    pub fn wait(mut self) -> Result<T, EngineError> {
        match self.pending.take() {
            Some(p) => p
                .wait()
                .unwrap_or(Err(EngineError::ShardStopped(self.shard))),
            None => Err(EngineError::ShardStopped(self.shard)),
        }
    }
}

impl<T> Call<T> {
    /// The result if it has arrived, without blocking (`None`: not yet). Once it returned the
    /// result, the call is spent: later calls return `None`, `wait` `ShardStopped`.
    pub fn try_take(&mut self) -> Option<Result<T, EngineError>> {
        let shard = self.shard;
        let r = self.pending.as_mut()?.try_take()?;
        self.pending = None;
        Some(r.unwrap_or(Err(EngineError::ShardStopped(shard))))
    }
}

impl<T> Unpin for Call<T> {}

impl<T> Future for Call<T> {
    type Output = Result<T, EngineError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shard = self.shard;
        match self.pending.as_mut() {
            Some(p) => match Pin::new(p).poll(cx) {
                Poll::Ready(r) => {
                    self.pending = None;
                    Poll::Ready(r.unwrap_or(Err(EngineError::ShardStopped(shard))))
                }
                Poll::Pending => Poll::Pending,
            },
            None => Poll::Ready(Err(EngineError::ShardStopped(shard))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_gets_the_value_from_another_thread() {
        let (p, pending) = promise();
        let t = std::thread::spawn(move || p.fulfil(42));
        assert_eq!(pending.wait(), Ok(42));
        t.join().unwrap();
    }

    #[test]
    fn a_dropped_promise_breaks_the_pending() {
        let (p, pending) = promise::<u8>();
        drop(p);
        assert_eq!(pending.wait(), Err(Broken));
    }

    #[test]
    fn polling_registers_the_waker_and_wakes_on_fulfil() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Count(AtomicUsize);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let (p, mut pending) = promise();
        assert!(Pin::new(&mut pending).poll(&mut cx).is_pending());
        p.fulfil("done");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            Pin::new(&mut pending).poll(&mut cx),
            Poll::Ready(Ok("done"))
        );
    }

    #[test]
    fn calls_take_effect_in_issue_order_past_a_full_queue() {
        use super::super::RequestQueue;
        use crate::api::TopicPartition;
        use crate::format::Offset;
        use crate::io::Doorbell;
        use std::collections::VecDeque;
        let bell = Arc::new(Doorbell::new().unwrap());
        let handle = ShardHandle {
            index: 0,
            queue: Arc::new(RequestQueue::new(1, bell)),
        };
        let mut calls: Vec<Call<Offset>> = (0..5)
            .map(|i| {
                let (reply, pending) = promise();
                let request = Request::TruncateTo {
                    tp: TopicPartition::new("t", 0),
                    offset: Offset(i),
                    reply,
                };
                Call::new(&handle, request, pending)
            })
            .collect();
        // The caller polls the later calls first (which order a runtime polls in is its own
        // business), while the shard takes a request at a time.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut taken = VecDeque::new();
        for _ in 0..6 {
            for c in calls.iter_mut().rev() {
                assert!(Pin::new(c).poll(&mut cx).is_pending());
            }
            handle.queue.take_all(&mut taken);
        }
        let order: Vec<i64> = taken
            .iter()
            .map(|r| match r {
                Request::TruncateTo { offset, .. } => offset.0,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(order, [0, 1, 2, 3, 4]);
    }
}
