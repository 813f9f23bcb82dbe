//! Connection limits by Kafka's names, over all listeners (Kafka's `ConnectionQuotas`), and
//! changeable while serving (both are dynamic broker configs, `config/dynamic.rs`):
//! - `max.connections`: a connection accepted when that many are open is closed at once, with
//!   nothing written (a clean close: the client sees the end of the stream and retries with its
//!   backoff). Kafka's acceptor instead stops accepting, leaving the client in the kernel's
//!   backlog until its connection-setup timeout; a broker that is safe to expose refuses at
//!   once, so a client learns it and a flood of connections does not fill the backlog;
//! - `max.connections.per.ip`: a connection from an address that already has that many is
//!   closed at once (Kafka's behaviour).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The limits and the connections they count.
pub struct ConnectionLimits {
    max: AtomicUsize,
    per_ip_max: AtomicUsize,
    open: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection's count in `max.connections`; given back when dropped.
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
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Changes both limits; connections already open stay.
    pub fn set(&self, max: usize, per_ip_max: usize) {
        self.max.store(max, Ordering::Release);
        self.per_ip_max.store(per_ip_max, Ordering::Release);
    }

    /// (`max.connections`, `max.connections.per.ip`) in effect.
    pub fn get(&self) -> (usize, usize) {
        (
            self.max.load(Ordering::Acquire),
            self.per_ip_max.load(Ordering::Acquire),
        )
    }

    /// Counts one more connection, unless `max.connections` are open.
    pub fn place(self: &Arc<Self>) -> Option<Place> {
        let max = self.max.load(Ordering::Acquire);
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Place {
                limits: self.clone(),
            })
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

    #[test]
    fn places_are_refused_past_the_limit_and_limits_change_live() {
        let l = ConnectionLimits::new(1, 1);
        let a = l.place().unwrap();
        assert!(l.place().is_none());
        l.set(2, 1);
        let b = l.place().unwrap();
        assert!(l.place().is_none());
        drop(a);
        let c = l.place().unwrap();
        drop((b, c));
        assert_eq!(l.open.load(Ordering::Acquire), 0);
        let ip: IpAddr = [10, 0, 0, 1].into();
        let s = l.admit(ip).unwrap();
        assert!(l.admit(ip).is_none());
        l.set(2, 2);
        let t = l.admit(ip).unwrap();
        drop((s, t));
        assert!(l.per_ip.lock().unwrap().is_empty());
    }
}
