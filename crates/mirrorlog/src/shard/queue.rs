//! The bounded request queue of one shard. Callers on any thread push; the shard takes
//! everything at once, at most `depth` requests a turn.
//!
//! Requests take effect in the order they were pushed, whoever pushes them: an idempotent
//! producer's pipelined appends must reach the partition in its sequence order. Three ways in:
//! - [`RequestQueue::push`] (what every `Call` uses) never refuses for room: past the depth the
//!   request waits in an ordered overflow that the shard admits from, `depth` a turn, as it
//!   takes. Its memory is bounded by the callers' outstanding calls (each holds one request's
//!   result), as before; the shard's turns stay bounded by the depth.
//! - [`RequestQueue::push_blocking`] waits until the queue has room and no overflow, then pushes
//!   (backpressure for a blocking caller).
//! - [`RequestQueue::try_push`] hands the request back when the queue is full or has an overflow
//!   (an async caller parks its waker with [`RequestQueue::wait_for_room`]).
//!
//! The doorbell rings when the queue goes from empty to non-empty: the shard takes the whole
//! queue before it waits, so a push into a non-empty queue is always seen without a ring.

use crate::io::Doorbell;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;

struct Inner<T> {
    items: VecDeque<T>,
    /// Pushed past the depth, in order; admitted by `take_all`. Non-empty only while `items`
    /// was full when they came, so everything here is newer than everything in `items`.
    overflow: VecDeque<T>,
    room_wakers: Vec<Waker>,
    closed: bool,
}

/// Slots allocated up front (a deeper queue grows as it fills).
const QUEUE_PREALLOCATED_MAX: usize = 4096;

/// A bounded multi-producer queue drained by one shard.
pub struct RequestQueue<T> {
    inner: Mutex<Inner<T>>,
    room: Condvar,
    depth: usize,
    doorbell: Arc<Doorbell>,
}

/// Why a push did not happen.
#[derive(Debug)]
pub enum PushError<T> {
    /// The queue is at its depth: retry when there is room.
    Full(T),
    /// The shard stopped taking requests.
    Closed(T),
}

impl<T> RequestQueue<T> {
    /// A queue of `depth` requests whose pushes ring `doorbell`.
    #[must_use]
    pub fn new(depth: usize, doorbell: Arc<Doorbell>) -> Self {
        RequestQueue {
            inner: Mutex::new(Inner {
                items: VecDeque::with_capacity(depth.min(QUEUE_PREALLOCATED_MAX)),
                overflow: VecDeque::new(),
                room_wakers: Vec::new(),
                closed: false,
            }),
            room: Condvar::new(),
            depth: depth.max(1),
            doorbell,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Pushes if there is room.
    ///
    /// # Errors
    /// [`PushError::Full`] or [`PushError::Closed`], handing the request back.
    // The request comes back by value so that a caller can retry it without a copy.
    #[allow(clippy::result_large_err)]
    pub fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(PushError::Closed(item));
        }
        if inner.items.len() >= self.depth || !inner.overflow.is_empty() {
            return Err(PushError::Full(item));
        }
        let was_empty = inner.items.is_empty();
        inner.items.push_back(item);
        drop(inner);
        if was_empty {
            self.doorbell.ring();
        }
        Ok(())
    }

    /// Pushes in order: into the queue if it has room and no overflow, else at the end of the
    /// overflow, which the shard admits from as it takes.
    ///
    /// # Errors
    /// The request back if the shard stopped.
    #[allow(clippy::result_large_err)]
    pub fn push(&self, item: T) -> Result<(), T> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(item);
        }
        let was_empty = inner.items.is_empty() && inner.overflow.is_empty();
        if inner.items.len() < self.depth && inner.overflow.is_empty() {
            inner.items.push_back(item);
        } else {
            inner.overflow.push_back(item);
        }
        drop(inner);
        if was_empty {
            self.doorbell.ring();
        }
        Ok(())
    }

    /// Pushes, waiting for room while the queue is full.
    ///
    /// # Errors
    /// The request back if the shard stopped.
    pub fn push_blocking(&self, mut item: T) -> Result<(), T> {
        loop {
            match self.try_push(item) {
                Ok(()) => return Ok(()),
                Err(PushError::Closed(i)) => return Err(i),
                Err(PushError::Full(i)) => {
                    item = i;
                    let inner = self.lock();
                    if (inner.items.len() >= self.depth || !inner.overflow.is_empty())
                        && !inner.closed
                    {
                        drop(
                            self.room
                                .wait(inner)
                                .unwrap_or_else(std::sync::PoisonError::into_inner),
                        );
                    }
                }
            }
        }
    }

    /// Registers `waker` to be woken when the shard next takes requests (room appears).
    pub fn wait_for_room(&self, waker: &Waker) {
        let mut inner = self.lock();
        if (inner.items.len() < self.depth && inner.overflow.is_empty()) || inner.closed {
            waker.wake_by_ref();
        } else {
            inner.room_wakers.push(waker.clone());
        }
    }

    /// Takes every queued request and up to `depth` of the overflow after them, in order (the
    /// shard's side), and wakes those waiting for room.
    pub fn take_all(&self, into: &mut VecDeque<T>) {
        let wakers = {
            let mut inner = self.lock();
            into.append(&mut inner.items);
            let admitted = inner.overflow.len().min(self.depth);
            into.extend(inner.overflow.drain(..admitted));
            std::mem::take(&mut inner.room_wakers)
        };
        self.room.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Requests waiting (in the queue and its overflow).
    #[must_use]
    pub fn len(&self) -> usize {
        let inner = self.lock();
        inner.items.len() + inner.overflow.len()
    }

    /// Whether no request waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops taking requests; returns those still queued, in order.
    pub fn close(&self) -> VecDeque<T> {
        let (items, wakers) = {
            let mut inner = self.lock();
            inner.closed = true;
            let mut items = std::mem::take(&mut inner.items);
            items.append(&mut inner.overflow);
            (items, std::mem::take(&mut inner.room_wakers))
        };
        self.room.notify_all();
        for w in wakers {
            w.wake();
        }
        items
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_pushes_back_and_rings_once_per_batch() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let q = RequestQueue::new(2, bell.clone());
        q.try_push(1).unwrap();
        q.try_push(2).unwrap();
        assert!(matches!(q.try_push(3), Err(PushError::Full(3))));
        assert_eq!(bell.drain(), 1, "one ring for the empty-to-non-empty push");
        let mut got = VecDeque::new();
        q.take_all(&mut got);
        assert_eq!(got, [1, 2]);
        q.try_push(3).unwrap();
        assert_eq!(bell.drain(), 1);
    }

    #[test]
    fn a_blocked_pusher_proceeds_when_the_shard_takes() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let q = Arc::new(RequestQueue::new(1, bell));
        q.try_push(0).unwrap();
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.push_blocking(1).unwrap());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(q.len(), 1, "the second push waits for room");
        let mut got = VecDeque::new();
        q.take_all(&mut got);
        t.join().unwrap();
        q.take_all(&mut got);
        assert_eq!(got, [0, 1]);
        let leftover = q.close();
        assert!(leftover.is_empty());
        assert!(matches!(q.try_push(5), Err(PushError::Closed(5))));
    }

    #[test]
    fn pushes_past_the_depth_keep_their_order() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let q = RequestQueue::new(2, bell);
        for i in 0..7 {
            q.push(i).unwrap();
        }
        assert!(
            matches!(q.try_push(99), Err(PushError::Full(99))),
            "no overtaking the overflow"
        );
        assert_eq!(q.len(), 7);
        let mut got = VecDeque::new();
        q.take_all(&mut got);
        assert_eq!(got, [0, 1, 2, 3], "the queue, then `depth` of the overflow");
        q.push(7).unwrap();
        q.take_all(&mut got);
        q.take_all(&mut got);
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7]);
        q.push(8).unwrap();
        assert_eq!(q.close(), [8]);
        assert_eq!(q.push(9), Err(9));
    }
}
