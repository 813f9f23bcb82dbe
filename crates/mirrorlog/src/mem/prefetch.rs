//! Cache hints: asking the CPU to start fetching memory that will soon be written, without
//! waiting for it.
//!
//! A plain load also brings a line into the cache, but the instruction cannot retire until the
//! data arrives, so a load issued only to warm a line holds up everything behind it for a full
//! memory latency. A prefetch retires at once and the line arrives in the background.

/// Starts fetching the cache lines of `value`, which are about to be written (x86-64: the
/// write-intent hint, which compiles to `prefetchw` where the build enables the `prfchw`
/// target feature and to `prefetcht0` otherwise — a line no other core holds arrives
/// exclusive either way, ready to be written; elsewhere nothing). Never faults and changes
/// nothing observable.
#[inline(always)]
pub fn prefetch_write<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_ET0};
        let first = std::ptr::from_ref(value).cast::<i8>();
        let last = first.wrapping_add(std::mem::size_of::<T>().saturating_sub(1));
        // SAFETY: a prefetch is a hint: it never faults, even for an invalid address, and
        // changes no memory. Both addresses lie within (or at the end of) `value`.
        unsafe {
            _mm_prefetch::<_MM_HINT_ET0>(first);
            _mm_prefetch::<_MM_HINT_ET0>(last);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Starts fetching the cache line holding `value`, which is about to be read (x86-64:
/// `prefetcht0`; elsewhere nothing). Never faults and changes nothing observable.
#[inline(always)]
pub fn prefetch_read<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint: it never faults, even for an invalid address, and
        // changes no memory. The address is `value`'s.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast::<i8>());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
