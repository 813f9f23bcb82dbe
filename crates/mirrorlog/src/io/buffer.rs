//! 4 KiB-aligned heap buffers for O_DIRECT I/O, and a pool that recycles them.
//!
//! O_DIRECT on ext4 requires the memory address, the file offset and the length of every
//! transfer to be multiples of the logical block size; this engine always uses
//! [`PAGE_SIZE_BYTES`] (4 KiB), which satisfies every block size up to it.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Alignment and granularity of every O_DIRECT transfer.
pub const PAGE_SIZE_BYTES: usize = 4096;

const _: () = assert!(PAGE_SIZE_BYTES.is_power_of_two());

/// Buffers from this size on are mappings of their own (`AlignedBuf::mapped`).
const MAPPED_MIN_BYTES: usize = 64 << 10;

/// A zero-initialised, page-aligned heap buffer with a fixed capacity (a multiple of the page
/// size). Moving an `AlignedBuf` never moves its bytes, so an in-flight operation can own it
/// while the kernel writes into or reads from its memory.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    capacity: usize,
    /// Set when an io_uring registered this buffer (see `UringIo`'s registered buffers): the
    /// ring's identity and the buffer's index in its table. A unique token, never an address:
    /// a new allocation at a freed registered buffer's address is not registered.
    pub(crate) fixed: Option<FixedTag>,
}

/// Identifies a registered buffer: which ring, which slot of its buffer table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FixedTag {
    pub(crate) ring: u64,
    pub(crate) index: u16,
}

// SAFETY: `AlignedBuf` owns its allocation exclusively (like `Box<[u8]>`); nothing else aliases
// it, so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `capacity` bytes rounded up to whole pages (at least one page).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1).div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES;
        if capacity >= MAPPED_MIN_BYTES {
            return Self::mapped(capacity);
        }
        let layout = Self::layout(capacity);
        // SAFETY: `layout` has a non-zero size (at least one page) and a valid power-of-two
        // alignment, as `alloc_zeroed` requires.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout);
        };
        AlignedBuf {
            ptr,
            capacity,
            fixed: None,
        }
    }

    /// A buffer of its own anonymous mapping: zeroed by the kernel, resident only where
    /// touched, and given back to the system when dropped (a heap allocator would keep freed
    /// append buffers resident: thousands of idle partitions' worth).
    fn mapped(capacity: usize) -> Self {
        // SAFETY: an anonymous private mapping of `capacity` bytes (a non-zero multiple of the
        // page size) at an address the kernel picks; no file, no fixed address.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                capacity,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        let Some(ptr) = (raw != libc::MAP_FAILED)
            .then_some(raw.cast::<u8>())
            .and_then(NonNull::new)
        else {
            alloc::handle_alloc_error(Self::layout(capacity));
        };
        AlignedBuf {
            ptr,
            capacity,
            fixed: None,
        }
    }

    /// A buffer of no bytes that owns no memory: the place of a buffer handed back (a writer
    /// idle long enough to return its append buffer holds one).
    #[must_use]
    pub fn empty() -> Self {
        AlignedBuf {
            ptr: NonNull::dangling(),
            capacity: 0,
            fixed: None,
        }
    }

    fn layout(capacity: usize) -> Layout {
        match Layout::from_size_align(capacity, PAGE_SIZE_BYTES) {
            Ok(layout) => layout,
            // Only a capacity near isize::MAX fails here; treat it like an allocation failure.
            Err(_) => alloc::handle_alloc_error(Layout::new::<[u8; PAGE_SIZE_BYTES]>()),
        }
    }

    /// Whether an io_uring registered this buffer (its transfers then skip pinning pages).
    #[must_use]
    pub fn is_registered(&self) -> bool {
        self.fixed.is_some()
    }

    /// Capacity in bytes (a multiple of [`PAGE_SIZE_BYTES`]).
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The whole buffer.
    #[must_use]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to `capacity` initialised (zeroed at allocation) bytes owned by
        // `self` (or is dangling, non-null and aligned, with `capacity` 0: `empty()`); the
        // shared borrow of `self` prevents mutation for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.capacity) }
    }

    /// The whole buffer, mutably.
    #[must_use]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice` (an empty buffer's slice has no bytes), and the exclusive
        // borrow of `self` makes this the only reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.capacity) }
    }

    /// Raw pointer for handing the memory to the kernel.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Raw pointer for handing the memory to the kernel (writes only read it).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity == 0 {
            // `empty()`: nothing was allocated.
            return;
        }
        if self.capacity >= MAPPED_MIN_BYTES {
            // SAFETY: `ptr` is the start of this buffer's own mapping of `capacity` bytes
            // (`mapped`), unmapped once; nothing else refers to it any more.
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.capacity) };
            return;
        }
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.capacity)) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// A free list of equally sized [`AlignedBuf`]s: steady-state appends allocate nothing.
#[derive(Debug)]
pub struct BufferPool {
    buffer_size_bytes: usize,
    free: Vec<AlignedBuf>,
    free_max: usize,
}

impl BufferPool {
    /// A pool of buffers of `buffer_size_bytes` (rounded up to pages), keeping at most
    /// `free_max` idle ones.
    #[must_use]
    pub fn new(buffer_size_bytes: usize, free_max: usize) -> Self {
        BufferPool {
            buffer_size_bytes: buffer_size_bytes.max(1).div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES,
            free: Vec::new(),
            free_max,
        }
    }

    /// Size of every buffer.
    #[must_use]
    pub fn buffer_size_bytes(&self) -> usize {
        self.buffer_size_bytes
    }

    /// A buffer from the free list, or a new one. Its contents are whatever the last user left.
    pub fn take(&mut self) -> AlignedBuf {
        self.free
            .pop()
            .unwrap_or_else(|| AlignedBuf::new(self.buffer_size_bytes))
    }

    /// A buffer from the free list, if one is idle.
    pub fn try_take(&mut self) -> Option<AlignedBuf> {
        self.free.pop()
    }

    /// Returns a buffer; one of another size, or beyond `free_max`, is handed back.
    pub fn give(&mut self, buf: AlignedBuf) -> Option<AlignedBuf> {
        if buf.capacity() == self.buffer_size_bytes && self.free.len() < self.free_max {
            self.free.push(buf);
            None
        } else {
            Some(buf)
        }
    }

    /// Every idle buffer, emptying the pool.
    pub fn drain(&mut self) -> impl Iterator<Item = AlignedBuf> + '_ {
        self.free.drain(..)
    }

    /// Idle buffers held.
    #[must_use]
    pub fn idle(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_page_aligned_zeroed_and_rounded_up() {
        let mut b = AlignedBuf::new(5000);
        assert_eq!(b.capacity(), 8192);
        assert_eq!(b.as_ptr() as usize % PAGE_SIZE_BYTES, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[8191] = 7;
        assert_eq!(b.as_slice()[8191], 7);
        assert_eq!(AlignedBuf::new(0).capacity(), PAGE_SIZE_BYTES);
        let mut big = AlignedBuf::new(1 << 20);
        assert_eq!(big.as_ptr() as usize % PAGE_SIZE_BYTES, 0);
        assert!(big.as_slice().iter().all(|&x| x == 0));
        big.as_mut_slice()[(1 << 20) - 1] = 9;
        assert_eq!(big.as_slice()[(1 << 20) - 1], 9);
        drop(big);
        let mut e = AlignedBuf::empty();
        assert_eq!(e.capacity(), 0);
        assert!(e.as_slice().is_empty() && e.as_mut_slice().is_empty());
    }

    #[test]
    fn pool_recycles_up_to_its_limit() {
        let mut pool = BufferPool::new(10_000, 1);
        let a = pool.take();
        let b = pool.take();
        assert_eq!(a.capacity(), 12_288);
        let a_ptr = a.as_ptr();
        assert!(pool.give(a).is_none());
        assert!(pool.give(b).is_some(), "beyond free_max it comes back");
        assert_eq!(pool.idle(), 1);
        assert_eq!(pool.take().as_ptr(), a_ptr);
        assert!(
            pool.give(AlignedBuf::new(4096)).is_some(),
            "a buffer of another size is not kept"
        );
        assert_eq!(pool.idle(), 0);
    }
}
