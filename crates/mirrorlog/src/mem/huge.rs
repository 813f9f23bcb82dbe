//! [`HugeVec`]: a fixed-capacity vector in one 2 MiB-aligned, 2 MiB-long anonymous mapping, so
//! that once full the kernel can back it with a single huge page.
//!
//! Why: the PSM's producer table is read at random. With 4 KiB pages every such read of a
//! large table also misses the TLB, and under virtualisation a TLB miss is a two-level page
//! walk costing about as much as the cache miss itself. One huge page covers 2 MiB with one
//! TLB entry.
//!
//! Memory stays proportional to use: the mapping is reserved, not touched, so only the 4 KiB
//! pages that pushed elements reach are resident. When the last element is pushed the vector
//! asks the kernel to collapse the whole range into one huge page (`MADV_COLLAPSE`, Linux 6.1,
//! synchronous: about a 2 MiB copy, once per fill; 0.5–0.6 ms on the development VM, the first
//! one up to 6 ms while the kernel compacts memory for it). For the PSM that is once per
//! 18,724 new producers, on the append that creates the last of them. If the kernel refuses (transparent huge
//! pages disabled, no free huge page, an older kernel) the vector keeps its 4 KiB pages and
//! works the same; [`HugeVec::collapsed`] says which happened. Nothing here asks for huge pages
//! at fault time (`MADV_HUGEPAGE`), which would make a nearly empty vector resident in full.

use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Bytes of one [`HugeVec`]: one x86-64 / arm64 (4 KiB granule) huge page.
pub const HUGE_PAGE_SIZE_BYTES: usize = 2 << 20;
const PAGE_BYTES: usize = 4096;

const _: () = assert!(HUGE_PAGE_SIZE_BYTES.is_power_of_two());
const _: () = assert!(HUGE_PAGE_SIZE_BYTES.is_multiple_of(PAGE_BYTES));

/// See the module docs. Elements are `Copy`, so nothing is dropped but the mapping.
pub struct HugeVec<T: Copy> {
    /// Start of the 2 MiB-aligned mapping.
    ptr: NonNull<MaybeUninit<T>>,
    len: usize,
    collapsed: bool,
    _owns: PhantomData<T>,
}

// SAFETY: a `HugeVec` owns its mapping exclusively (no aliasing pointer escapes but through
// `&self` / `&mut self` borrows), like a `Box<[T]>`; moving it to another thread moves that
// ownership, so it is `Send` when `T` is.
unsafe impl<T: Copy + Send> Send for HugeVec<T> {}
// SAFETY: shared access only reads initialised elements through `&self`, as for `&[T]`.
unsafe impl<T: Copy + Sync> Sync for HugeVec<T> {}

/// The mapping could not be made (`mmap` failed: out of address space or memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapFailed {
    /// The `errno` of the failed call.
    pub errno: i32,
}

impl<T: Copy> HugeVec<T> {
    /// Elements one vector holds.
    pub const CAPACITY: usize = HUGE_PAGE_SIZE_BYTES / std::mem::size_of::<T>();

    /// An empty vector: reserves the aligned mapping, touches none of it.
    ///
    /// # Errors
    /// [`MapFailed`] when the kernel refuses the mapping.
    pub fn new() -> Result<Self, MapFailed> {
        const { assert!(std::mem::size_of::<T>() > 0 && std::mem::align_of::<T>() <= PAGE_BYTES) };
        // Map twice the size, then unmap what lies outside the aligned 2 MiB in the middle:
        // mmap only promises page alignment.
        let span = 2 * HUGE_PAGE_SIZE_BYTES;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches
        // no existing memory; the result is checked before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(MapFailed {
                errno: std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::ENOMEM),
            });
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE_SIZE_BYTES);
        let head = aligned - start;
        let tail = span - head - HUGE_PAGE_SIZE_BYTES;
        // SAFETY: both ranges lie inside the mapping just made, outside the aligned part we
        // keep, and are page-aligned (the mapping and `aligned` are); nothing points into
        // them.
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((aligned + HUGE_PAGE_SIZE_BYTES) as *mut libc::c_void, tail);
            }
        }
        let ptr = NonNull::new(aligned as *mut MaybeUninit<T>).ok_or(MapFailed {
            errno: libc::ENOMEM,
        })?;
        Ok(HugeVec {
            ptr,
            len: 0,
            collapsed: false,
            _owns: PhantomData,
        })
    }

    /// [`HugeVec::new`], aborting through `handle_alloc_error` if the kernel refuses the
    /// mapping, as any Rust allocation does.
    #[must_use]
    pub fn new_or_abort() -> Self {
        match HugeVec::new() {
            Ok(vec) => vec,
            Err(_) => std::alloc::handle_alloc_error(std::alloc::Layout::new::<
                [u8; HUGE_PAGE_SIZE_BYTES],
            >()),
        }
    }

    /// Elements pushed.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was pushed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the vector is full.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len == Self::CAPACITY
    }

    /// Whether the kernel collapsed the full vector into a huge page.
    #[must_use]
    pub fn collapsed(&self) -> bool {
        self.collapsed
    }

    /// Bytes resident for it: whole 4 KiB pages up to the last element, 2 MiB once full.
    #[must_use]
    pub fn resident_bytes(&self) -> usize {
        if self.is_full() {
            HUGE_PAGE_SIZE_BYTES
        } else {
            (self.len * std::mem::size_of::<T>()).next_multiple_of(PAGE_BYTES)
        }
    }

    /// Appends `value`; the push that fills the vector asks for the huge page.
    ///
    /// # Panics
    /// If the vector is full: callers check [`HugeVec::is_full`] (a caller bug, not a data
    /// error).
    pub fn push(&mut self, value: T) {
        assert!(
            !self.is_full(),
            "HugeVec is full ({} elements)",
            Self::CAPACITY
        );
        // SAFETY: `len < CAPACITY`, so the element lies inside the 2 MiB mapping this vector
        // owns; the pointer is aligned for `T` (the mapping is page-aligned and `T`'s size is
        // a multiple of its alignment).
        unsafe {
            self.ptr
                .as_ptr()
                .add(self.len)
                .write(MaybeUninit::new(value))
        };
        self.len += 1;
        if self.is_full() {
            // SAFETY: the range is exactly this vector's mapping; MADV_COLLAPSE keeps its
            // contents (it copies them into the huge page) and fails harmlessly otherwise.
            let result = unsafe {
                libc::madvise(
                    self.ptr.as_ptr().cast(),
                    HUGE_PAGE_SIZE_BYTES,
                    libc::MADV_COLLAPSE,
                )
            };
            self.collapsed = result == 0;
        }
    }

    /// The pushed elements.
    #[must_use]
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` elements were written by `push`; the borrow of `self` keeps
        // the mapping alive and unaliased by writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<T>(), self.len) }
    }

    /// The pushed elements, mutably.
    #[must_use]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as `as_slice`, with the exclusive borrow of `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().cast::<T>(), self.len) }
    }
}

impl<T: Copy> Drop for HugeVec<T> {
    fn drop(&mut self) {
        // SAFETY: the range is exactly the mapping `new` kept; no borrow of it outlives
        // `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), HUGE_PAGE_SIZE_BYTES);
        }
    }
}

impl<T: Copy> Clone for HugeVec<T> {
    /// Aborts if the kernel refuses a new mapping, as `Vec::clone` does when allocation fails.
    fn clone(&self) -> Self {
        let mut copy = HugeVec::new_or_abort();
        for &value in self.as_slice() {
            copy.push(value);
        }
        copy
    }
}

impl<T: Copy + std::fmt::Debug> std::fmt::Debug for HugeVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HugeVec")
            .field("len", &self.len)
            .field("collapsed", &self.collapsed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Wide {
        a: u64,
        b: [u32; 26],
    }

    #[test]
    fn push_read_write_and_alignment() {
        let mut v: HugeVec<Wide> = HugeVec::new().unwrap();
        assert_eq!(v.ptr.as_ptr() as usize % HUGE_PAGE_SIZE_BYTES, 0);
        assert!(v.is_empty());
        assert_eq!(v.resident_bytes(), 0);
        for i in 0..1000u64 {
            v.push(Wide {
                a: i,
                b: [i as u32; 26],
            });
        }
        assert_eq!(v.len(), 1000);
        assert_eq!(v.as_slice()[999].a, 999);
        v.as_mut_slice()[5].a = 55;
        assert_eq!(v.as_slice()[5].a, 55);
        assert_eq!(
            v.resident_bytes(),
            (1000 * std::mem::size_of::<Wide>()).next_multiple_of(PAGE_BYTES)
        );
        let copy = v.clone();
        assert_eq!(copy.as_slice(), v.as_slice());
        drop(v);
        assert_eq!(copy.len(), 1000);
        assert_eq!(copy.as_slice()[5].a, 55);
    }

    #[test]
    fn filling_collapses_when_the_kernel_can_and_keeps_the_contents() {
        let mut v: HugeVec<u64> = HugeVec::new().unwrap();
        for i in 0..HugeVec::<u64>::CAPACITY as u64 {
            v.push(i * 3);
        }
        assert!(v.is_full());
        assert_eq!(v.resident_bytes(), HUGE_PAGE_SIZE_BYTES);
        // Whether the kernel had a huge page to give depends on the machine; the contents
        // must survive either way.
        assert!(v
            .as_slice()
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as u64 * 3));
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        if thp.contains("[never]") || thp.is_empty() {
            assert!(!v.collapsed());
        }
    }

    #[test]
    #[should_panic(expected = "HugeVec is full")]
    fn pushing_past_capacity_is_a_caller_bug() {
        let mut v: HugeVec<[u64; 32]> = HugeVec::new().unwrap();
        for _ in 0..=HugeVec::<[u64; 32]>::CAPACITY {
            v.push([0; 32]);
        }
    }
}
