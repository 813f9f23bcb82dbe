//! Handing the heap's free memory back to the system (glibc's `malloc_trim`), for measurements
//! of resident memory that must not count what earlier work freed but the allocator kept.

/// Returns the allocator's free memory to the system where the C library can (glibc); does
/// nothing elsewhere. Whether anything was released.
pub fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` takes no pointers and only releases memory no allocation owns.
        unsafe { libc::malloc_trim(0) != 0 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
