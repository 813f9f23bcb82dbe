//! The bounded request queue of one shard. Callers on any thread push; the shard takes
//! everything at once. A full queue is backpressure: [`RequestQueue::push_blocking`] waits for
//! room, [`RequestQueue::try_push`] hands the request back (an async caller parks its waker with
//! [`RequestQueue::wait_for_room`]). Memory is bounded by the depth, never by the callers.
//!
//! The doorbell rings when the queue goes from empty to non-empty: the shard takes the whole
//! queue before it waits, so a push into a non-empty queue is always seen without a ring.

use crate::io::Doorbell;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::task::Waker;

struct Inner<T> {
    items: VecDeque<T>,
    room_wakers: Vec<Waker>,
    closed: bool,
}

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
                items: VecDeque::with_capacity(depth),
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
        if inner.items.len() >= self.depth {
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
                    if inner.items.len() >= self.depth && !inner.closed {
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
        if inner.items.len() < self.depth || inner.closed {
            waker.wake_by_ref();
        } else {
            inner.room_wakers.push(waker.clone());
        }
    }

    /// Takes every queued request (the shard's side) and wakes those waiting for room.
    pub fn take_all(&self, into: &mut VecDeque<T>) {
        let wakers = {
            let mut inner = self.lock();
            into.append(&mut inner.items);
            std::mem::take(&mut inner.room_wakers)
        };
        self.room.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Requests waiting.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Whether no request waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops taking requests; returns those still queued.
    pub fn close(&self) -> VecDeque<T> {
        let (items, wakers) = {
            let mut inner = self.lock();
            inner.closed = true;
            (
                std::mem::take(&mut inner.items),
                std::mem::take(&mut inner.room_wakers),
            )
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
}
