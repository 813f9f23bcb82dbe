//! Thread placement: shards pin themselves to a core of the process's allowed set.

use super::{IoError, OpKind};

/// The CPUs this process may run on (`sched_getaffinity`), in increasing order. In a
/// container's cpuset such as `{8-15}` these are 8..=15, not 0..8. Falls back to
/// `0..available_cores()` if the call fails.
#[must_use]
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: passes a live, correctly sized set to fill for the calling thread (pid 0).
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return (0..available_cores()).collect();
    }
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads one bit inside the live set; `cpu` < CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    if cpus.is_empty() {
        (0..available_cores()).collect()
    } else {
        cpus
    }
}

/// The CPU shard `index` is pinned to: the `index`-th of `allowed` (wrapping when there are
/// more shards than CPUs).
#[must_use]
pub fn shard_cpu(allowed: &[usize], index: usize) -> usize {
    if allowed.is_empty() {
        index
    } else {
        allowed[index % allowed.len()]
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_take_the_allowed_cpus_in_order() {
        let cpuset = [8, 9, 10, 11, 12, 13, 14, 15];
        let placed: Vec<usize> = (0..10).map(|i| shard_cpu(&cpuset, i)).collect();
        assert_eq!(placed, [8, 9, 10, 11, 12, 13, 14, 15, 8, 9]);
        assert_eq!(shard_cpu(&[3, 5], 1), 5);
    }

    #[test]
    fn the_allowed_set_is_the_process_affinity() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(cpus.len(), available_cores());
        // Pinning to each allowed CPU works (to a CPU outside the set it would fail).
        let first = shard_cpu(&cpus, 0);
        std::thread::spawn(move || pin_current_thread(first))
            .join()
            .unwrap()
            .unwrap();
    }
}
