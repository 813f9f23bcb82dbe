//! Connection limits by Kafka's names, over all listeners (Kafka's `ConnectionQuotas`), and
//! changeable while serving (both are dynamic broker configs, `broker_configs.rs`):
//! - `max.connections`: a listener takes a place before it accepts; with none free it stops
//!   accepting until a connection closes, so new ones wait in the kernel's backlog, as Kafka's
//!   acceptor waits;
//! - `max.connections.per.ip`: a connection from an address that already has that many is
//!   closed at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The limits and the connections they count.
pub struct ConnectionLimits {
    max: AtomicUsize,
    per_ip_max: AtomicUsize,
    open: AtomicUsize,
    freed: Notify,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// A place taken before accepting; given back when dropped.
pub struct Place {
    limits: Arc<ConnectionLimits>,
}

/// A connection's count in its address's total; given back when dropped.
pub struct IpSlot {
    ip: IpAddr,
    limits: Arc<ConnectionLimits>,
}

impl ConnectionLimits {
    /// Limits of `max` connections, `per_ip_max` from one address.
    pub fn new(max: usize, per_ip_max: usize) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            max: AtomicUsize::new(max),
            per_ip_max: AtomicUsize::new(per_ip_max),
            open: AtomicUsize::new(0),
            freed: Notify::new(),
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Changes both limits; connections already open stay.
    pub fn set(&self, max: usize, per_ip_max: usize) {
        self.max.store(max, Ordering::Release);
        self.per_ip_max.store(per_ip_max, Ordering::Release);
        self.freed.notify_waiters();
    }

    /// (`max.connections`, `max.connections.per.ip`) in effect.
    pub fn get(&self) -> (usize, usize) {
        (
            self.max.load(Ordering::Acquire),
            self.per_ip_max.load(Ordering::Acquire),
        )
    }

    fn try_take(&self) -> bool {
        let max = self.max.load(Ordering::Acquire);
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// A place for one more connection, waiting until one is free.
    pub async fn place(self: &Arc<Self>) -> Place {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.try_take() {
                return Place {
                    limits: self.clone(),
                };
            }
            freed.await;
        }
    }

    /// Counts one more connection from `ip`, unless it already has `max.connections.per.ip`.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<IpSlot> {
        let max = self.per_ip_max.load(Ordering::Acquire);
        let mut m = self
            .per_ip
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = m.entry(ip).or_default();
        if *n >= max {
            if *n == 0 {
                m.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(IpSlot {
            ip,
            limits: self.clone(),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.limits.open.fetch_sub(1, Ordering::AcqRel);
        self.limits.freed.notify_waiters();
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut m = self
            .limits
            .per_ip
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn places_wait_and_limits_change_live() {
        let l = ConnectionLimits::new(1, 1);
        let a = l.place().await;
        let l2 = l.clone();
        let waiting = tokio::spawn(async move { l2.place().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        // Raising the limit lets the waiter in without anything closing.
        l.set(2, 1);
        let b = waiting.await.unwrap();
        drop((a, b));
        let ip: IpAddr = [10, 0, 0, 1].into();
        let s = l.admit(ip).unwrap();
        assert!(l.admit(ip).is_none());
        l.set(2, 2);
        let t = l.admit(ip).unwrap();
        drop((s, t));
        assert!(l.per_ip.lock().unwrap().is_empty());
    }
}
