//! `queued.max.requests` (Kafka's name and default, 500): at most that many requests, over all
//! connections, are being served at once. A connection whose next request finds the queue full
//! stops reading its socket until a place frees (Kafka mutes the channel the same way), so a
//! flood of requests waits in the clients' sockets, not in the broker's memory.
//!
//! A request holds its place from the moment it is read until its answer is ready. A long-poll
//! Fetch gives its place back when it parks (Kafka's fetch purgatory holds no queue slot), so
//! parked reads never starve other requests.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Kafka's `queued.max.requests` default.
pub const QUEUED_MAX_REQUESTS_DEFAULT: usize = 500;

/// The broker-wide bound and its counters.
pub struct RequestQueue {
    places: Arc<Semaphore>,
    max: usize,
    in_queue: AtomicUsize,
    peak: AtomicUsize,
    waited: AtomicU64,
}

/// One request's place, given back when dropped or [`Queued::release`]d.
pub struct Queued {
    place: Option<(OwnedSemaphorePermit, Arc<RequestQueue>)>,
}

/// What `GET /requests` shows.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct QueueStats {
    /// `queued.max.requests`.
    pub queued_max: usize,
    /// Requests holding a place now.
    pub queued: usize,
    /// The most that held places at once since start.
    pub queued_peak: usize,
    /// Requests that found the queue full and waited for a place.
    pub waited: u64,
}

impl RequestQueue {
    /// A queue of `max` places (at least one).
    pub fn new(max: usize) -> Arc<Self> {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(RequestQueue {
            places: Arc::new(Semaphore::new(max)),
            max,
            in_queue: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            waited: AtomicU64::new(0),
        })
    }

    /// A place for one request, waiting for one when all are taken.
    pub async fn enter(self: &Arc<Self>) -> Queued {
        let permit = match self.places.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                self.waited.fetch_add(1, Ordering::Relaxed);
                match self.places.clone().acquire_owned().await {
                    Ok(p) => p,
                    // The semaphore is never closed; were it, the request goes unbounded
                    // rather than hang.
                    Err(_) => return Queued { place: None },
                }
            }
        };
        let now = self.in_queue.fetch_add(1, Ordering::AcqRel) + 1;
        self.peak.fetch_max(now, Ordering::AcqRel);
        Queued {
            place: Some((permit, self.clone())),
        }
    }

    /// The counters.
    pub fn stats(&self) -> QueueStats {
        QueueStats {
            queued_max: self.max,
            queued: self.in_queue.load(Ordering::Acquire),
            queued_peak: self.peak.load(Ordering::Acquire),
            waited: self.waited.load(Ordering::Relaxed),
        }
    }
}

impl Queued {
    /// Gives the place back now (a Fetch about to park).
    pub fn release(&mut self) {
        if let Some((permit, q)) = self.place.take() {
            q.in_queue.fetch_sub(1, Ordering::AcqRel);
            drop(permit);
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn places_are_bounded_waited_for_and_given_back() {
        let q = RequestQueue::new(2);
        let a = q.enter().await;
        let mut b = q.enter().await;
        assert_eq!(q.stats().queued, 2);
        // Full: a third waits until one is released.
        let q2 = q.clone();
        let third = tokio::spawn(async move { q2.enter().await });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!third.is_finished());
        b.release();
        let c = third.await.unwrap();
        let s = q.stats();
        assert_eq!(
            (s.queued, s.queued_peak, s.waited, s.queued_max),
            (2, 2, 1, 2)
        );
        drop((a, c));
        assert_eq!(q.stats().queued, 0);
    }
}
