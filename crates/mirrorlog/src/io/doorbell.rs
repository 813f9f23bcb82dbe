//! A doorbell another thread rings to wake a shard that is waiting on its ring: an `eventfd`
//! whose readability the shard watches with an ordinary operation ([`super::Op::WaitDoorbell`],
//! a one-shot poll on io_uring), so a single `io_uring_enter` waits for disk completions and
//! requests alike.

use super::{IoError, OpKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An `eventfd` counter: [`Doorbell::ring`] from any thread, [`Doorbell::drain`] on the owner.
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell (non-blocking, close-on-exec).
    ///
    /// # Errors
    /// `eventfd`'s failure.
    pub fn new() -> Result<Self, IoError> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a new descriptor that
        // nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(last_error(OpKind::WaitDoorbell));
        }
        // SAFETY: as above: `fd` is open and owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Doorbell { fd })
    }

    /// Wakes the watcher (adds one to the counter; never blocks).
    pub fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our open descriptor. The only failure
        // (EAGAIN at a counter of u64::MAX - 1) means the bell is already ringing.
        let _ = unsafe { libc::write(self.raw(), (&raw const one).cast(), 8) };
    }

    /// Resets the counter; returns how many rings it held.
    pub fn drain(&self) -> u64 {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our open descriptor (non-blocking: EAGAIN
        // when nothing rang, leaving `count` at 0).
        let _ = unsafe { libc::read(self.raw(), (&raw mut count).cast(), 8) };
        count
    }

    /// Waits up to `timeout_ms` (-1: forever) for a ring without consuming it.
    pub fn wait_readable(&self, timeout_ms: i32) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd for the duration of the call.
        unsafe { libc::poll(&raw mut pfd, 1, timeout_ms) > 0 }
    }

    pub(super) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

fn last_error(op: OpKind) -> IoError {
    IoError::from_errno(
        op,
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_count_and_drain() {
        let bell = Doorbell::new().unwrap();
        assert!(!bell.wait_readable(0));
        assert_eq!(bell.drain(), 0);
        bell.ring();
        bell.ring();
        assert!(bell.wait_readable(0));
        assert_eq!(bell.drain(), 2);
        assert!(!bell.wait_readable(0));
        let bell = std::sync::Arc::new(bell);
        let remote = bell.clone();
        let t = std::thread::spawn(move || remote.ring());
        assert!(bell.wait_readable(5_000));
        t.join().unwrap();
    }
}
