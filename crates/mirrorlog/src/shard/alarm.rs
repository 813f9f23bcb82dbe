//! Wake-ups at a deadline for shards that wait on their ring: one thread for the process rings
//! a shard's doorbell when the deadline it asked for comes (a long-poll read's `max_wait`), so
//! the shard's single wait covers completions, requests and deadlines without polling. A shard
//! driven by its embedder's loop (`run_once(false)`) checks its deadlines on every turn and
//! needs no alarm.

use crate::io::Doorbell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Instant;

/// One pending wake-up.
struct Wake {
    at: Instant,
    seq: u64,
    doorbell: Weak<Doorbell>,
}

impl PartialEq for Wake {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Wake {}
impl PartialOrd for Wake {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Wake {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Pending {
    heap: BinaryHeap<Reverse<Wake>>,
    seq: u64,
}

/// The process's alarm thread (started on first use).
pub(super) struct Alarm {
    pending: Mutex<Pending>,
    changed: Condvar,
}

impl Alarm {
    /// The alarm, its thread started if this is the first use. `None` if the thread could not
    /// be started (deadlines are then met on the shard's next turn only).
    pub(super) fn get() -> Option<&'static Alarm> {
        static ALARM: OnceLock<Option<&'static Alarm>> = OnceLock::new();
        *ALARM.get_or_init(|| {
            let alarm: &'static Alarm = Box::leak(Box::new(Alarm {
                pending: Mutex::new(Pending::default()),
                changed: Condvar::new(),
            }));
            std::thread::Builder::new()
                .name("mirrorlog-alarm".into())
                .spawn(move || alarm.run())
                .ok()
                .map(|_| alarm)
        })
    }

    /// Rings `doorbell` at `at` (at once if it has passed). A doorbell dropped meanwhile is
    /// skipped.
    pub(super) fn wake_at(&self, at: Instant, doorbell: &Arc<Doorbell>) {
        let Ok(mut p) = self.pending.lock() else {
            return;
        };
        p.seq += 1;
        let seq = p.seq;
        p.heap.push(Reverse(Wake {
            at,
            seq,
            doorbell: Arc::downgrade(doorbell),
        }));
        drop(p);
        self.changed.notify_one();
    }

    fn run(&self) {
        let Ok(mut p) = self.pending.lock() else {
            return;
        };
        loop {
            let now = Instant::now();
            while p.heap.peek().is_some_and(|Reverse(w)| w.at <= now) {
                if let Some(Reverse(w)) = p.heap.pop() {
                    if let Some(bell) = w.doorbell.upgrade() {
                        bell.ring();
                    }
                }
            }
            let next = p.heap.peek().map(|Reverse(w)| w.at);
            p = match next {
                None => match self.changed.wait(p) {
                    Ok(g) => g,
                    Err(_) => return,
                },
                Some(at) => match self
                    .changed
                    .wait_timeout(p, at.saturating_duration_since(now))
                {
                    Ok((g, _)) => g,
                    Err(_) => return,
                },
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rings_at_the_deadline_not_before() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let alarm = Alarm::get().expect("alarm thread");
        let start = Instant::now();
        alarm.wake_at(start + Duration::from_millis(60), &bell);
        alarm.wake_at(
            start + Duration::from_millis(5),
            &Arc::new(Doorbell::new().unwrap()),
        );
        assert!(bell.wait_readable(2_000), "rung");
        assert!(
            start.elapsed() >= Duration::from_millis(60),
            "{:?}",
            start.elapsed()
        );
        assert_eq!(bell.drain(), 1);
    }
}
