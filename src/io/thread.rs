//! Thread placement: shards pin themselves to a core.

use super::{IoError, OpKind};

/// Cores this process may run on (`sched_getaffinity`), at least 1.
#[must_use]
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Pins the calling thread to core `core` (`sched_setaffinity`).
///
/// # Errors
/// The system call's failure (e.g. `EINVAL` for a core outside the process's set).
pub fn pin_current_thread(core: usize) -> Result<(), IoError> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit inside the live set; `core` is bounded by the set's size
    // below (CPU_SETSIZE bits).
    unsafe { libc::CPU_SET(core % libc::CPU_SETSIZE as usize, &mut set) };
    // SAFETY: passes a live, correctly sized set for the calling thread (pid 0).
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(IoError::from_errno(
            OpKind::Affinity,
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL),
        ));
    }
    Ok(())
}
