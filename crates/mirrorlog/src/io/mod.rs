//! The I/O seam: every file operation of the storage layers goes through [`Io`], so the same
//! production code runs on io_uring ([`UringIo`]) and on an in-memory simulated disk
//! ([`SimIo`]) that tests drive deterministically by seed.
//!
//! Contract (both backends):
//! - Operations are *submitted* ([`Io::submit`]) and *completed* later ([`Io::complete`]), in no
//!   guaranteed order: a caller that needs an order (write, then fdatasync) waits for the first
//!   completion before submitting the second.
//! - An operation owns its buffer and path until its completion is reaped; the buffer comes back
//!   in the [`Completion`]. No buffer is freed or reused while the kernel may touch it, and a file
//!   cannot be closed while operations on it are in flight ([`IoError::FileBusy`]).
//! - At most [`Io::capacity`] operations are in flight; [`Io::submit`] refuses more
//!   ([`IoError::QueueFull`]), which makes completion-queue overflow impossible by construction.
//! - Writes and reads are completed in full: short transfers are continued internally, `EINTR`
//!   and `EAGAIN` are retried. A read stops early only at end of file.
//! - Files opened with [`OpenOptions::direct`] take only page-aligned offsets and lengths
//!   ([`IoError::Misaligned`] otherwise), on both backends.
//! - `ENOSPC` is [`IoError::NoSpace`], distinct from every other failure.
//!
//! With `mem/`, the only module with `unsafe` code (the crate denies it everywhere else); every
//! block carries a `// SAFETY:` comment.
//!
//! Files: `mod.rs` (the trait, operations, errors, `run`), `files.rs` (open, read, write-atomically
//! and directory-sync helpers over any `Io`), `buffer.rs` (4 KiB-aligned buffers and a pool),
//! `doorbell.rs` (the eventfd a shard's ring watches), `thread.rs` (cores and pinning),
//! `uring/` (the io_uring backend: the ring and completions in `mod.rs`, one SQE per `Op` in
//! `sqe.rs`, `reap.rs`), `sim/` (the simulated disk: durable vs. current bytes, directory
//! entries durable only once the directory is fsynced, ENOSPC/EIO injection; `crash.rs`: the
//! disk a power cut leaves, whole or torn at 512-byte sectors).

#![allow(unsafe_code)]

mod buffer;
mod doorbell;
mod files;
mod sim;
mod thread;
mod uring;

pub use buffer::{AlignedBuf, BufferPool, PAGE_SIZE_BYTES};
pub use doorbell::Doorbell;
pub use files::{
    fsync_dir, read_direct, read_direct_all, read_file, read_file_if_present, write_file,
    write_file_atomically, Chunk, SequentialReader,
};
pub use sim::{CrashModel, Fault, SimConfig, SimIo, WriteRecord, SECTOR_SIZE_BYTES};
pub use thread::{allowed_cpus, available_cores, pin_current_thread, shard_cpu};
pub use uring::{FileCaching, TaskRun, UringIo, RING_ENTRIES_DEFAULT};

use std::ops::Range;
use std::path::PathBuf;

/// A file opened through an [`Io`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(pub u32);

/// The identity of one submitted operation, echoed in its [`Completion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// Create it if missing.
    pub create: bool,
    /// Open for writing as well as reading.
    pub write: bool,
    /// Bypass the page cache (`O_DIRECT`): page-aligned transfers only.
    pub direct: bool,
    /// Open a directory (for `fsync` after a rename).
    pub directory: bool,
}

/// `fallocate` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallocateMode {
    /// Allocate and extend the file size (so later writes are in place).
    Extend,
    /// Allocate without changing the size (`FALLOC_FL_KEEP_SIZE`).
    KeepSize,
}

/// An operation. Buffers and paths move into the operation and come back in its completion.
#[derive(Debug)]
#[non_exhaustive]
pub enum Op {
    /// Completes once `doorbell` has been rung (it is not drained: the owner does that). On
    /// io_uring a one-shot poll of the eventfd. The simulator runs it only when nothing else
    /// is queued, so it never holds up disk operations.
    WaitDoorbell {
        /// The doorbell, kept alive while the operation is in flight.
        doorbell: std::sync::Arc<Doorbell>,
    },
    /// Open `path`; completes with [`Done::Opened`].
    Open {
        /// The file.
        path: PathBuf,
        /// How.
        options: OpenOptions,
    },
    /// Write `buf[range]` at `offset`.
    Write {
        /// The file.
        file: FileId,
        /// File offset.
        offset: u64,
        /// Source buffer, returned on completion.
        buf: AlignedBuf,
        /// The bytes of `buf` to write.
        range: Range<usize>,
    },
    /// Read up to `len` bytes at `offset` into the start of `buf`.
    Read {
        /// The file.
        file: FileId,
        /// File offset.
        offset: u64,
        /// Destination buffer, returned on completion.
        buf: AlignedBuf,
        /// Bytes to read (at most the buffer's capacity).
        len: usize,
    },
    /// `fdatasync`.
    Fdatasync {
        /// The file.
        file: FileId,
    },
    /// `fsync` (for directories after a rename).
    Fsync {
        /// The file or directory.
        file: FileId,
    },
    /// `fallocate`.
    Fallocate {
        /// The file.
        file: FileId,
        /// Start.
        offset: u64,
        /// Length.
        len: u64,
        /// Whether the size changes.
        mode: FallocateMode,
    },
    /// `ftruncate`.
    Truncate {
        /// The file.
        file: FileId,
        /// New size.
        len: u64,
    },
    /// `rename(from, to)`, replacing `to`.
    Rename {
        /// Old path.
        from: PathBuf,
        /// New path.
        to: PathBuf,
    },
    /// `unlink(path)`.
    Unlink {
        /// The file.
        path: PathBuf,
    },
    /// Close a file with nothing in flight.
    Close {
        /// The file.
        file: FileId,
    },
}

/// What a completed operation produced.
#[derive(Debug)]
pub enum Done {
    /// `Open` succeeded.
    Opened(FileId),
    /// A write or read moved this many bytes (a read returns fewer only at end of file).
    Transferred {
        /// Bytes moved.
        bytes: usize,
    },
    /// Any other operation succeeded.
    Ok,
}

/// A reaped operation: its id, its result, and its buffer if it had one.
#[derive(Debug)]
pub struct Completion {
    /// The operation.
    pub id: OpId,
    /// What it did.
    pub result: Result<Done, IoError>,
    /// The buffer of a `Write` or `Read`, whatever the result.
    pub buf: Option<AlignedBuf>,
}

/// Operation kinds, for errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// `Op::Open`.
    Open,
    /// `Op::Write`.
    Write,
    /// `Op::Read`.
    Read,
    /// `Op::Fdatasync`.
    Fdatasync,
    /// `Op::Fsync`.
    Fsync,
    /// `Op::Fallocate`.
    Fallocate,
    /// `Op::Truncate`.
    Truncate,
    /// `Op::Rename`.
    Rename,
    /// `Op::Unlink`.
    Unlink,
    /// `Op::Close`.
    Close,
    /// [`Io::list_dir`].
    ListDir,
    /// [`Io::file_len`].
    FileLen,
    /// [`Io::create_dir`] and [`Io::remove_dir`].
    Directory,
    /// [`pin_current_thread`].
    Affinity,
    /// `Op::WaitDoorbell`.
    WaitDoorbell,
    /// [`Io::syncfs`].
    Syncfs,
}

impl Op {
    /// The kind of this operation.
    #[must_use]
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Open { .. } => OpKind::Open,
            Op::Write { .. } => OpKind::Write,
            Op::Read { .. } => OpKind::Read,
            Op::Fdatasync { .. } => OpKind::Fdatasync,
            Op::Fsync { .. } => OpKind::Fsync,
            Op::Fallocate { .. } => OpKind::Fallocate,
            Op::Truncate { .. } => OpKind::Truncate,
            Op::Rename { .. } => OpKind::Rename,
            Op::Unlink { .. } => OpKind::Unlink,
            Op::Close { .. } => OpKind::Close,
            Op::WaitDoorbell { .. } => OpKind::WaitDoorbell,
        }
    }

    /// The file the operation works on, if it names an open one.
    #[must_use]
    pub fn file(&self) -> Option<FileId> {
        match self {
            Op::Write { file, .. }
            | Op::Read { file, .. }
            | Op::Fdatasync { file }
            | Op::Fsync { file }
            | Op::Fallocate { file, .. }
            | Op::Truncate { file, .. }
            | Op::Close { file } => Some(*file),
            Op::Open { .. } | Op::Rename { .. } | Op::Unlink { .. } | Op::WaitDoorbell { .. } => {
                None
            }
        }
    }
}

/// Why an I/O operation failed. `#[non_exhaustive]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IoError {
    /// The device is full (`ENOSPC`).
    #[error("{op:?} failed: no space left on device")]
    NoSpace {
        /// The operation.
        op: OpKind,
    },
    /// Any other operating-system error.
    #[error("{op:?} failed: {}", std::io::Error::from_raw_os_error(*.errno))]
    Os {
        /// The operation.
        op: OpKind,
        /// `errno`.
        errno: i32,
    },
    /// The filesystem refused `O_DIRECT` (`EINVAL` from open, as on tmpfs). Open the engine
    /// with the page-cache backend there, knowing its figures are not comparable.
    #[error("{}: the filesystem does not support O_DIRECT", .path.display())]
    DirectUnsupported {
        /// The file.
        path: std::path::PathBuf,
    },
    /// A write made no progress (returned 0 bytes).
    #[error("write made no progress at offset {offset}")]
    WriteStalled {
        /// Where.
        offset: u64,
    },
    /// An `O_DIRECT` transfer not aligned to [`PAGE_SIZE_BYTES`].
    #[error("{op:?} at offset {offset}, length {len} is not page-aligned on a direct file")]
    Misaligned {
        /// The operation.
        op: OpKind,
        /// File offset.
        offset: u64,
        /// Length.
        len: usize,
    },
    /// A buffer range outside the buffer.
    #[error("{op:?}: range {start}..{end} is outside a buffer of {capacity} bytes")]
    BadRange {
        /// The operation.
        op: OpKind,
        /// Range start.
        start: usize,
        /// Range end.
        end: usize,
        /// Buffer capacity.
        capacity: usize,
    },
    /// [`Io::capacity`] operations are already in flight.
    #[error("{in_flight} operations in flight: reap completions before submitting more")]
    QueueFull {
        /// Operations in flight.
        in_flight: usize,
    },
    /// No such open file.
    #[error("file {0:?} is not open")]
    UnknownFile(FileId),
    /// Operations on the file are still in flight.
    #[error("file {file:?} has {in_flight} operations in flight")]
    FileBusy {
        /// The file.
        file: FileId,
        /// Its in-flight operations.
        in_flight: usize,
    },
    /// A path the operating system cannot take (an interior NUL byte).
    #[error("path {0:?} is not a valid C string")]
    BadPath(PathBuf),
    /// The operation cannot be part of a chain.
    #[error("{op:?} cannot be part of a chain")]
    NotChainable {
        /// The operation.
        op: OpKind,
    },
    /// An earlier operation of the same chain failed, so this one never ran.
    #[error("{op:?} canceled: an earlier operation of its chain failed")]
    Canceled {
        /// The operation.
        op: OpKind,
    },
    /// The ring itself failed (setup or `io_uring_enter`).
    #[error("io_uring: {}", std::io::Error::from_raw_os_error(*.errno))]
    Ring {
        /// `errno`.
        errno: i32,
    },
}

impl IoError {
    /// The error for an errno returned by operation `op`.
    #[must_use]
    pub fn from_errno(op: OpKind, errno: i32) -> Self {
        if errno == libc::ENOSPC {
            IoError::NoSpace { op }
        } else if errno == libc::ECANCELED {
            IoError::Canceled { op }
        } else {
            IoError::Os { op, errno }
        }
    }

    /// Whether this is `ENOENT`: the file (or a directory on its path) does not exist. The
    /// only failure that may be read as "absent"; every other one is a failure.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            IoError::Os {
                errno: libc::ENOENT,
                ..
            }
        )
    }
}

/// Checks the parts of an operation both backends validate the same way before submitting.
pub(crate) fn validate(op: &Op, direct: bool) -> Result<(), IoError> {
    let (kind, offset, buf_capacity, range) = match op {
        Op::Write {
            offset, buf, range, ..
        } => (OpKind::Write, *offset, buf.capacity(), range.clone()),
        Op::Read {
            offset, buf, len, ..
        } => (OpKind::Read, *offset, buf.capacity(), 0..*len),
        _ => return Ok(()),
    };
    if range.start > range.end || range.end > buf_capacity {
        return Err(IoError::BadRange {
            op: kind,
            start: range.start,
            end: range.end,
            capacity: buf_capacity,
        });
    }
    let len = range.end - range.start;
    let aligned = |x: u64| x.is_multiple_of(PAGE_SIZE_BYTES as u64);
    if direct && !(aligned(offset) && aligned(range.start as u64) && aligned(len as u64)) {
        return Err(IoError::Misaligned {
            op: kind,
            offset,
            len,
        });
    }
    Ok(())
}

/// The asynchronous file I/O of one shard. See the module docs for the contract.
pub trait Io {
    /// Queues `op`. It is handed to the kernel (or simulated) no later than the next
    /// [`Io::complete`].
    ///
    /// # Errors
    /// [`IoError::QueueFull`], or a validation error ([`IoError::Misaligned`],
    /// [`IoError::BadRange`], [`IoError::UnknownFile`], [`IoError::FileBusy`],
    /// [`IoError::BadPath`]); the operation is dropped then.
    fn submit(&mut self, op: Op) -> Result<OpId, IoError>;

    /// Hands queued operations over and appends completions to `out`, waiting until at least
    /// `min_complete` are available (never more than are in flight).
    ///
    /// # Errors
    /// [`IoError::Ring`] if the ring itself fails; per-operation failures are in completions.
    fn complete(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> Result<(), IoError>;

    /// Hands queued operations over now, without waiting for any. A caller that queued a
    /// commit round and has other work to do before its next [`Io::complete`] (validating the
    /// next append, say) calls this first, or the round waits for that work. Backends that
    /// run operations inside `complete` (the simulated disk) have nothing to do.
    ///
    /// # Errors
    /// [`IoError::Ring`] if the ring itself fails.
    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }

    /// Queues `ops` as a chain: each starts only after the previous one completed in full;
    /// when one fails, the rest complete with [`IoError::Canceled`]. On io_uring this is a
    /// linked SQE chain (`IOSQE_IO_LINK`), so e.g. the fdatasync after a round's writes starts
    /// without a round trip through user space. Only writes, reads, syncs, fallocate and
    /// truncate can be chained ([`IoError::NotChainable`] otherwise): the kernel does not cancel
    /// a chain after a failed unlink or rename.
    ///
    /// # Errors
    /// As [`Io::submit`], for the whole chain: nothing is queued then.
    fn submit_chain(&mut self, ops: Vec<Op>) -> Result<Vec<OpId>, IoError>;

    /// Names of the entries of directory `dir`, sorted. Synchronous: listing a directory is not
    /// an io_uring operation, and only open-time recovery lists.
    ///
    /// # Errors
    /// The listing's failure (`ENOENT` for a missing directory).
    fn list_dir(&mut self, dir: &std::path::Path) -> Result<Vec<String>, IoError>;

    /// Creates directory `dir` (and missing parents) and makes its entry durable (the parent
    /// is fsynced). Synchronous: creating a partition is a set-up path. Succeeds if it exists.
    ///
    /// # Errors
    /// The operating system's failure.
    fn create_dir(&mut self, dir: &std::path::Path) -> Result<(), IoError>;

    /// Removes directory `dir` and everything in it (no file in it may be open). Synchronous.
    /// Succeeds if it does not exist.
    ///
    /// # Errors
    /// The operating system's failure.
    fn remove_dir(&mut self, dir: &std::path::Path) -> Result<(), IoError>;

    /// The current size in bytes of an open file. Synchronous (`fstat`): only open-time
    /// recovery asks, to find a segment's commit-record slots before streaming its data.
    ///
    /// # Errors
    /// [`IoError::UnknownFile`], or the query's failure.
    fn file_len(&mut self, file: FileId) -> Result<u64, IoError>;

    /// A buffer of at least `capacity` bytes for this backend's transfers (contents
    /// unspecified). On io_uring it is registered with the ring when the memlock limit allows
    /// (transfers then skip pinning its pages per operation); otherwise, and on other backends,
    /// a plain one.
    fn buffer(&mut self, capacity: usize) -> AlignedBuf {
        AlignedBuf::new(capacity)
    }

    /// Takes back a buffer the caller no longer needs, so a registered one is reused rather
    /// than leaked (its registration slot stays pinned otherwise).
    fn recycle(&mut self, buf: AlignedBuf) {
        drop(buf);
    }

    /// Waits for at least one completion, preferring those of `ids` (a segment waiting for its
    /// own commit round). Plain backends just complete one; a shard's routes the rest to their
    /// owners.
    ///
    /// # Errors
    /// As [`Io::complete`].
    fn complete_for(&mut self, ids: &[OpId], out: &mut Vec<Completion>) -> Result<(), IoError> {
        let _ = ids;
        self.complete(1, out)
    }

    /// Gives back completions a caller reaped but does not own (another operation's, reaped
    /// while it waited for its own): the next [`Io::complete`] delivers them first, so a
    /// commit round in flight never loses a completion to a synchronous operation run
    /// meanwhile (found by `benches/log_append.rs`: a step reservation during a round hung it).
    fn requeue(&mut self, completions: Vec<Completion>);

    /// Operations submitted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Makes every write completed so far on the filesystem that holds `dir` durable, the
    /// data and size of every file (Linux `syncfs`: one journal commit and one device flush for
    /// all files, however many were written). Blocking. A directory's entries still need that
    /// directory's fsync: the simulated disk holds callers to it.
    ///
    /// # Errors
    /// The sync's failure (the state of what it covered is then unknown).
    fn syncfs(&mut self, dir: &std::path::Path) -> Result<(), IoError>;

    /// Most operations in flight at once.
    fn capacity(&self) -> usize;
}

/// Submits `op`, then reaps until it completes, returning its completion. Other completions
/// reaped meanwhile are given back to `io` ([`Io::requeue`]) for whoever waits for them;
/// `others` stays empty (kept for the callers' signature). For set-up paths and tests; hot
/// paths batch.
///
/// # Errors
/// The submission error, or a ring failure.
pub fn run<I: Io + ?Sized>(
    io: &mut I,
    op: Op,
    others: &mut Vec<Completion>,
) -> Result<Completion, IoError> {
    let _ = others;
    let id = io.submit(op)?;
    wait_for(io, id)
}

/// Reaps until the operation `id` (submitted earlier) completes, returning its completion; the
/// others reaped meanwhile are given back to `io` ([`Io::requeue`]).
///
/// # Errors
/// A ring failure.
pub fn wait_for<I: Io + ?Sized>(io: &mut I, id: OpId) -> Result<Completion, IoError> {
    let mut reaped = Vec::new();
    let mut not_ours = Vec::new();
    loop {
        if let Err(e) = io.complete(1, &mut reaped) {
            io.requeue(not_ours);
            return Err(e);
        }
        let mut found = None;
        for c in reaped.drain(..) {
            if c.id == id {
                found = Some(c);
            } else {
                not_ours.push(c);
            }
        }
        if let Some(c) = found {
            io.requeue(not_ours);
            return Ok(c);
        }
    }
}

/// Opens `path` through `io` and returns the file (set-up paths and tests).
///
/// # Errors
/// The open's error.
pub fn open<I: Io + ?Sized>(
    io: &mut I,
    path: &std::path::Path,
    options: OpenOptions,
) -> Result<FileId, IoError> {
    let mut others = Vec::new();
    let c = run(
        io,
        Op::Open {
            path: path.to_path_buf(),
            options,
        },
        &mut others,
    )?;
    match c.result? {
        Done::Opened(file) => Ok(file),
        other => unreachable!("open completed with {other:?}"),
    }
}

/// Whether `op` may be part of a chain (see [`Io::submit_chain`]).
pub(crate) fn chainable(op: &Op) -> Result<(), IoError> {
    match op {
        Op::Write { .. }
        | Op::Read { .. }
        | Op::Fdatasync { .. }
        | Op::Fsync { .. }
        | Op::Fallocate { .. }
        | Op::Truncate { .. } => Ok(()),
        _ => Err(IoError::NotChainable { op: op.kind() }),
    }
}
