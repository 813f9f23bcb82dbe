//! Memory and CPU helpers for the hot data structures (the PSM's producer table), kept apart
//! from `io/`: they do no I/O. Like `io/`, this is a module where `unsafe` is allowed, and every
//! `unsafe` block carries a `// SAFETY:` comment giving the reason.
//!
//! - [`HugeVec`]: a fixed-capacity vector in one 2 MiB-aligned mapping, resident only as far as
//!   filled and collapsed into one huge page when full.
//! - [`prefetch_write`], [`prefetch_read`]: cache hints that retire at once.
//! - [`release_free_heap`]: the allocator's free memory back to the system (for measurements).
//! - [`ReserveOnlyAlloc`]: a global allocator under which a hostile length prefix reserves
//!   address space, not memory (for processes decoding untrusted requests).

#![allow(unsafe_code)]

mod huge;
mod prefetch;
mod reserve_alloc;
mod trim;

pub use huge::{HugeVec, MapFailed, HUGE_PAGE_SIZE_BYTES};
pub use prefetch::{prefetch_read, prefetch_write};
pub use reserve_alloc::{ReserveOnlyAlloc, RESERVE_ONLY_BYTES_MIN};
pub use trim::release_free_heap;
