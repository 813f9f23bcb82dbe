//! [`ReserveOnlyAlloc`]: a global allocator for processes that decode untrusted length
//! prefixes with code they do not own.
//!
//! Protocol decoders commonly reserve a vector's capacity from the count a message claims
//! (`Vec::with_capacity(n)`) before reading its `n` elements. A hostile 30-byte request that
//! claims 2^31 elements of 200 bytes asks for 400 GiB; the system allocator's `mmap` is refused
//! under the kernel's overcommit heuristic (more than RAM and swap), and Rust aborts the whole
//! process on a refused allocation. A panic could be caught; an abort cannot.
//!
//! This allocator serves every allocation from the system allocator except those of at least
//! [`RESERVE_ONLY_BYTES_MIN`], which it maps itself with `MAP_NORESERVE`: the kernel grants
//! address space without committing memory, pages are only backed when touched, and the decoder
//! fails at the end of the frame long before it touches more than the frame's size. Legitimate
//! allocations that large behave as usual (anonymous zero pages, backed on first write). The
//! price is one `mmap`/`munmap` pair per such allocation, which for allocations of 1 GiB and
//! more is noise.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations of at least this many bytes are mapped with `MAP_NORESERVE`.
pub const RESERVE_ONLY_BYTES_MIN: usize = 1 << 30;

/// Pages are 4 KiB at least; `mmap` aligns to the page, so a larger alignment goes to `System`.
const MAP_ALIGN_MAX: usize = 4096;

/// See the module docs. Use as `#[global_allocator] static A: ReserveOnlyAlloc = ReserveOnlyAlloc;`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReserveOnlyAlloc;

impl ReserveOnlyAlloc {
    fn maps(layout: Layout) -> bool {
        layout.size() >= RESERVE_ONLY_BYTES_MIN && layout.align() <= MAP_ALIGN_MAX
    }
}

// SAFETY: every pointer handed out is either the system allocator's (and returned to it with the
// same layout) or a fresh private anonymous mapping of `layout.size()` bytes, page aligned (which
// satisfies any `align <= 4096`), unmapped with the same size; `maps` decides both ways from the
// layout alone, so an allocation is always freed by the side that made it.
unsafe impl GlobalAlloc for ReserveOnlyAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !Self::maps(layout) {
            // SAFETY: the caller's contract for `alloc` is passed on unchanged.
            return unsafe { System.alloc(layout) };
        }
        // SAFETY: an anonymous private mapping touches no existing memory; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                layout.size(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !Self::maps(layout) {
            // SAFETY: the caller's contract for `alloc_zeroed` is passed on unchanged.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // SAFETY: as `alloc`; anonymous mappings read as zero.
        unsafe { self.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !Self::maps(layout) {
            // SAFETY: `ptr` came from `System` with this layout (`maps` is false both times).
            unsafe { System.dealloc(ptr, layout) };
            return;
        }
        // SAFETY: `ptr` is a mapping of `layout.size()` bytes made by `alloc`.
        unsafe {
            libc::munmap(ptr.cast(), layout.size());
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `layout.align()` with `new_size` is a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if !Self::maps(layout) && !Self::maps(new_layout) {
            // SAFETY: both sides the system allocator's; the caller's contract passed on.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // SAFETY: a fresh allocation, the common prefix copied, the old one freed by its side.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claimed_capacity_far_past_memory_is_granted_and_freed() {
        let a = ReserveOnlyAlloc;
        // 1 TiB: far more than any test machine has, refused by the system allocator.
        let layout = Layout::from_size_align(1 << 40, 8).unwrap();
        // SAFETY: a valid non-zero layout; the pointer is written once, then freed with it.
        unsafe {
            let p = a.alloc(layout);
            assert!(!p.is_null());
            *p = 7;
            assert_eq!(*p, 7);
            let q = a.realloc(p, layout, 64);
            assert_eq!(*q, 7);
            a.dealloc(q, Layout::from_size_align(64, 8).unwrap());
        }
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: as above.
        unsafe {
            let p = a.alloc_zeroed(small);
            assert_eq!(*p, 0);
            a.dealloc(p, small);
        }
    }
}
