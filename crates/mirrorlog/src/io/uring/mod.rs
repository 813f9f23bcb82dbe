//! The io_uring backend: one ring per shard, set up `SINGLE_ISSUER | DEFER_TASKRUN` when the
//! kernel offers them (plain otherwise), driven only from the thread that created it.
//!
//! Every in-flight operation lives in `ops`, indexed by the `user_data` of its SQE, and owns the
//! buffer and path strings the kernel reads or writes; it leaves `ops` only when its final
//! completion is reaped. A short write or read is continued by pushing a new SQE for the rest
//! under the same slot; `EINTR`/`EAGAIN` push the same SQE again. Each in-flight operation has
//! at most one SQE outstanding and there are at most `capacity` of them, so neither the
//! submission queue nor the completion queue (twice as large) can overflow.

mod reap;
mod sqe;

use super::{validate, AlignedBuf, Completion, FileId, Io, IoError, Op, OpId};
use io_uring::{squeue, IoUring};
use std::ffi::CString;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// When the kernel runs io_uring's completion work (which also issues the next member of a
/// linked chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRun {
    /// `SINGLE_ISSUER | DEFER_TASKRUN`: only when this thread enters the ring to wait. Fewest
    /// interruptions; chains advance only while the thread is in `complete`.
    Deferred,
    /// `SINGLE_ISSUER | COOP_TASKRUN`: at the thread's next transition to the kernel, without
    /// an interrupt.
    Cooperative,
    /// Neither flag: the kernel interrupts the thread to run completion work, so chains advance
    /// while the thread computes, at the cost of those interruptions.
    Interrupt,
}

/// How a file opened for direct I/O is really opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileCaching {
    /// `O_DIRECT`: writes go to the device, bypassing the page cache (production).
    #[default]
    Direct,
    /// Through the page cache, for filesystems without `O_DIRECT`. Alignment rules stay;
    /// performance figures are not comparable with `Direct`.
    PageCache,
}

/// Slots in the ring's registered-buffer table.
const FIXED_BUFFERS_MAX: u16 = 64;

/// Gives every ring a distinct identity for its registered buffers.
static NEXT_RING_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Largest transfer one SQE carries; longer ones are continued.
const TRANSFER_SIZE_BYTES_MAX: usize = 1 << 30;
/// Ring size used by [`UringIo::new`] callers that have no better idea.
pub const RING_ENTRIES_DEFAULT: u32 = 256;

#[derive(Debug)]
struct FileSlot {
    fd: OwnedFd,
    direct: bool,
    in_flight: usize,
}

#[derive(Debug)]
struct InFlight {
    id: OpId,
    op: Op,
    /// Bytes transferred so far (writes and reads).
    progress: usize,
    /// NUL-terminated copies of the paths the kernel reads (open, rename, unlink).
    paths: [Option<CString>; 2],
    /// The raw descriptor of the file (also for `Close`, whose `OwnedFd` was released).
    fd: RawFd,
    /// Chains: the slot of the previous and next operation.
    link_prev: Option<usize>,
    link_next: Option<usize>,
    /// Canceled by the kernel because an earlier chain member was short or retried; it is
    /// pushed again when that member completes.
    held: bool,
}

/// See the module docs.
pub struct UringIo {
    ring: IoUring,
    capacity: usize,
    deferred_taskrun: bool,
    files: Vec<Option<FileSlot>>,
    free_files: Vec<u32>,
    ops: Vec<Option<InFlight>>,
    free_ops: Vec<usize>,
    in_flight: usize,
    next_id: u64,
    /// The chain successor of the operation `finish` last removed.
    finished_next: Option<usize>,
    /// This ring's identity in registered buffers' tags.
    ring_id: u64,
    /// Next free slot of the registered-buffer table; `None` once registration is unavailable
    /// (not supported, memlock limit) or the table is used up. Slots are never reused: a
    /// registered buffer the caller drops keeps its pages pinned until the ring goes, which
    /// leaks memory but can never make a later transfer use stale pages.
    fixed_next: Option<u16>,
    /// Registered buffers handed back by `recycle`, ready for `buffer`.
    fixed_free: Vec<AlignedBuf>,
    /// Whether `direct` opens get `O_DIRECT`.
    caching: FileCaching,
    /// Most bytes one read or write SQE carries ([`TRANSFER_SIZE_BYTES_MAX`], or less under
    /// fault injection: [`UringIo::cap_transfers`]).
    transfer_cap: usize,
    /// CQEs copied out of the ring by `complete`, kept for the next call.
    cqes: Vec<(u64, i32)>,
    /// Completions given back by `requeue`, delivered first by the next `complete`.
    requeued: Vec<Completion>,
}

impl std::fmt::Debug for UringIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringIo")
            .field("capacity", &self.capacity)
            .field("deferred_taskrun", &self.deferred_taskrun)
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

fn c_path(path: &Path) -> Result<CString, IoError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| IoError::BadPath(path.to_path_buf()))
}

impl UringIo {
    /// A ring with room for `entries` operations in flight.
    ///
    /// # Errors
    /// [`IoError::Ring`] when io_uring cannot be set up (disabled, or no memory).
    pub fn new(entries: u32) -> Result<Self, IoError> {
        Self::with_task_run(entries, TaskRun::Deferred)
    }

    /// A ring with room for `entries` operations in flight and the given task-work mode.
    ///
    /// # Errors
    /// [`IoError::Ring`] when io_uring cannot be set up.
    pub fn with_task_run(entries: u32, task_run: TaskRun) -> Result<Self, IoError> {
        let entries = entries.max(2).next_power_of_two();
        let mut builder = IoUring::builder();
        match task_run {
            TaskRun::Deferred => {
                builder.setup_single_issuer().setup_defer_taskrun();
            }
            TaskRun::Cooperative => {
                builder.setup_single_issuer().setup_coop_taskrun();
            }
            TaskRun::Interrupt => {}
        }
        let (ring, deferred_taskrun) = match builder.build(entries) {
            Ok(ring) => (ring, task_run == TaskRun::Deferred),
            Err(_) => (
                IoUring::new(entries).map_err(|e| IoError::Ring {
                    errno: e.raw_os_error().unwrap_or(libc::EIO),
                })?,
                false,
            ),
        };
        let capacity = ring.params().sq_entries() as usize;
        Ok(UringIo {
            ring,
            capacity,
            deferred_taskrun,
            files: Vec::new(),
            free_files: Vec::new(),
            ops: Vec::new(),
            free_ops: Vec::new(),
            in_flight: 0,
            next_id: 0,
            finished_next: None,
            ring_id: NEXT_RING_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            fixed_next: None,
            fixed_free: Vec::new(),
            caching: FileCaching::Direct,
            transfer_cap: TRANSFER_SIZE_BYTES_MAX,
            cqes: Vec::with_capacity(entries as usize * 2),
            requeued: Vec::new(),
        })
        .map(|mut io: UringIo| {
            if io
                .ring
                .submitter()
                .register_buffers_sparse(u32::from(FIXED_BUFFERS_MAX))
                .is_ok()
            {
                io.fixed_next = Some(0);
            }
            io
        })
    }

    /// Sets how files opened with `direct: true` are opened from now on.
    /// [`FileCaching::PageCache`] drops `O_DIRECT` (for filesystems that refuse it, such as
    /// tmpfs) while every operation keeps the alignment rules of direct I/O, so the code
    /// above runs unchanged; durability still comes from `fdatasync`.
    #[must_use]
    pub fn with_caching(mut self, caching: FileCaching) -> Self {
        self.caching = caching;
        self
    }

    /// How files asked for `direct` are opened.
    #[must_use]
    pub fn caching(&self) -> FileCaching {
        self.caching
    }

    /// Whether the ring runs with `SINGLE_ISSUER | DEFER_TASKRUN`.
    #[must_use]
    pub fn deferred_taskrun(&self) -> bool {
        self.deferred_taskrun
    }

    fn file_slot(&mut self, file: FileId) -> Result<&mut FileSlot, IoError> {
        self.files
            .get_mut(file.0 as usize)
            .and_then(Option::as_mut)
            .ok_or(IoError::UnknownFile(file))
    }

    fn add_file(&mut self, fd: OwnedFd, direct: bool) -> FileId {
        let slot = FileSlot {
            fd,
            direct,
            in_flight: 0,
        };
        match self.free_files.pop() {
            Some(i) => {
                self.files[i as usize] = Some(slot);
                FileId(i)
            }
            None => {
                self.files.push(Some(slot));
                FileId((self.files.len() - 1) as u32)
            }
        }
    }

    fn push(&mut self, index: usize) {
        self.push_linked(index, false);
    }

    /// Submits what is queued and waits for `want` completions. Under `DEFER_TASKRUN` the
    /// kernel runs the ring's task work (which posts completions and issues the next member
    /// of a chain) only in an enter that asks for events, so every enter asks, also one that
    /// does not wait: otherwise a shard busy enough never to wait would stop harvesting.
    fn enter(&mut self, want: usize) -> std::io::Result<usize> {
        if !self.deferred_taskrun || want > 0 {
            return self.ring.submit_and_wait(want);
        }
        let queued = self.ring.submission().len() as u32;
        // SAFETY: io_uring_enter without an argument structure (null, with the size of an
        // unused type). The queued SQEs were pushed by `push_linked`, whose safety argument
        // covers their buffers until their completions are reaped.
        unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                queued,
                0,
                io_uring::EnterFlags::GETEVENTS.bits(),
                None,
            )
        }
    }

    /// Fault injection for tests: from now on every read or write SQE carries at most `bytes`
    /// (rounded down to whole pages, at least one), so each longer transfer completes short
    /// and is continued, as a short transfer from the kernel is. Chain members behind such a
    /// transfer wait for all of it (an `fdatasync` linked to the first part would not cover
    /// the rest).
    #[doc(hidden)]
    pub fn cap_transfers(&mut self, bytes: usize) {
        let page = super::PAGE_SIZE_BYTES;
        self.transfer_cap = (bytes / page * page).clamp(page, TRANSFER_SIZE_BYTES_MAX);
    }

    /// Whether the rest of the operation in slot `index` takes more than one SQE (a read or
    /// write longer than the transfer cap). Its chain successors must not be linked to its
    /// first SQE: the kernel would start them when that part completes, not the whole.
    fn needs_several_sqes(&self, index: usize) -> bool {
        let Some(Some(f)) = self.ops.get(index) else {
            return false;
        };
        let rest = match &f.op {
            Op::Write { range, .. } => range.len() - f.progress,
            Op::Read { len, .. } => len - f.progress,
            _ => 0,
        };
        rest > self.transfer_cap
    }

    /// Pushes the chain members from `first` on, linked, up to and including one that takes
    /// several SQEs; the members after that one are held (pushed when it completes).
    fn push_chain_from(&mut self, first: usize) {
        let mut at = Some(first);
        while let Some(i) = at {
            // After the first, only held members are pushed (the others are with the kernel).
            let following = self
                .ops
                .get(i)
                .and_then(Option::as_ref)
                .and_then(|f| f.link_next)
                .filter(|&x| {
                    self.ops
                        .get(x)
                        .and_then(Option::as_ref)
                        .is_some_and(|g| g.held)
                });
            let split = self.needs_several_sqes(i);
            if let Some(Some(f)) = self.ops.get_mut(i) {
                f.held = false;
            }
            self.push_linked(i, following.is_some() && !split);
            if split {
                let mut rest = self
                    .ops
                    .get(i)
                    .and_then(Option::as_ref)
                    .and_then(|f| f.link_next);
                while let Some(r) = rest {
                    let Some(Some(f)) = self.ops.get_mut(r) else {
                        break;
                    };
                    f.held = true;
                    rest = f.link_next;
                }
                return;
            }
            at = following;
        }
    }

    fn push_linked(&mut self, index: usize, link: bool) {
        let mut entry = self.entry(index);
        if link {
            entry = entry.flags(squeue::Flags::IO_LINK);
        }
        // SAFETY: the SQE points into the buffer and path strings owned by `self.ops[index]`,
        // which stays in place (heap memory that moving the `InFlight` does not move) until the
        // operation's final completion is reaped in `handle`; `Drop` waits for every in-flight
        // operation before freeing anything. The descriptor stays open for as long: files with
        // operations in flight cannot be closed, and a `Close` owns its raw descriptor.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        // At most `capacity` operations with one SQE each: the queue has room by construction.
        debug_assert!(pushed.is_ok(), "submission queue full");
        if pushed.is_err() {
            // Unreachable by the bound above; flush and retry rather than lose the operation.
            let _ = self.ring.submit();
            // SAFETY: as above.
            let _ = unsafe { self.ring.submission().push(&entry) };
        }
    }
}

impl Io for UringIo {
    fn submit(&mut self, op: Op) -> Result<OpId, IoError> {
        if self.in_flight >= self.capacity {
            return Err(IoError::QueueFull {
                in_flight: self.in_flight,
            });
        }
        let index = self.prepare(op)?;
        self.push(index);
        Ok(self.ops[index].as_ref().map_or(OpId(u64::MAX), |f| f.id))
    }

    fn submit_chain(&mut self, ops: Vec<Op>) -> Result<Vec<OpId>, IoError> {
        if self.in_flight + ops.len() > self.capacity {
            return Err(IoError::QueueFull {
                in_flight: self.in_flight,
            });
        }
        // Validate every member before queuing any, so a refused chain leaves nothing behind.
        for op in &ops {
            super::chainable(op)?;
            if let Some(file) = op.file() {
                let direct = self.file_slot(file)?.direct;
                validate(op, direct)?;
            }
        }
        let mut indexes: Vec<usize> = Vec::with_capacity(ops.len());
        for op in ops {
            let index = self.prepare(op)?;
            if let Some(&prev) = indexes.last() {
                if let Some(Some(f)) = self.ops.get_mut(prev) {
                    f.link_next = Some(index);
                }
                if let Some(Some(f)) = self.ops.get_mut(index) {
                    f.link_prev = Some(prev);
                }
            }
            indexes.push(index);
        }
        // Every member after the first waits to be pushed; `push_chain_from` pushes them,
        // linked, up to one that takes several SQEs.
        for &index in indexes.iter().skip(1) {
            if let Some(Some(f)) = self.ops.get_mut(index) {
                f.held = true;
            }
        }
        if let Some(&first) = indexes.first() {
            self.push_chain_from(first);
        }
        Ok(indexes
            .iter()
            .map(|&i| self.ops[i].as_ref().map_or(OpId(u64::MAX), |f| f.id))
            .collect())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        while !self.ring.submission().is_empty() {
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    return Err(IoError::Ring {
                        errno: e.raw_os_error().unwrap_or(libc::EIO),
                    })
                }
            }
        }
        Ok(())
    }

    fn complete(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> Result<(), IoError> {
        let mut delivered = self.requeued.len();
        out.append(&mut self.requeued);
        let want = min_complete.min(self.in_flight + delivered);
        loop {
            let wait = want.saturating_sub(delivered);
            match self.enter(wait) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    return Err(IoError::Ring {
                        errno: e.raw_os_error().unwrap_or(libc::EIO),
                    })
                }
            }
            // The CQEs are copied out before any is handled (handling pushes continuations),
            // into a vector kept between calls: no allocation per reap.
            let mut cqes = std::mem::take(&mut self.cqes);
            cqes.extend(
                self.ring
                    .completion()
                    .map(|cqe| (cqe.user_data(), cqe.result())),
            );
            for &(user_data, res) in &cqes {
                let before = out.len();
                self.handle_into(user_data as usize, res, out);
                delivered += out.len() - before;
            }
            cqes.clear();
            self.cqes = cqes;
            if delivered >= want {
                // Continuations pushed while handling are handed over now.
                return self.flush();
            }
        }
    }

    fn buffer(&mut self, capacity: usize) -> AlignedBuf {
        let wanted = capacity.max(1).div_ceil(super::PAGE_SIZE_BYTES) * super::PAGE_SIZE_BYTES;
        if let Some(i) = self.fixed_free.iter().position(|b| b.capacity() == wanted) {
            return self.fixed_free.swap_remove(i);
        }
        let mut buf = AlignedBuf::new(capacity);
        let Some(index) = self.fixed_next.filter(|&i| i < FIXED_BUFFERS_MAX) else {
            return buf;
        };
        let iovec = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.capacity(),
        };
        // SAFETY: the iovec describes `buf`'s whole allocation. The kernel pins those pages
        // for as long as the slot is registered, so even if the caller frees `buf`, the slot
        // never refers to memory someone else owns; and only a buffer carrying this slot's
        // unique tag (this one) is ever submitted as a fixed transfer on it.
        let registered = unsafe {
            self.ring
                .submitter()
                .register_buffers_update(u32::from(index), &[iovec], None)
        };
        match registered {
            Ok(()) => {
                buf.fixed = Some(super::buffer::FixedTag {
                    ring: self.ring_id,
                    index,
                });
                self.fixed_next = Some(index + 1);
            }
            // ENOMEM (memlock limit), EOPNOTSUPP…: fall back to plain buffers from now on.
            Err(_) => self.fixed_next = None,
        }
        buf
    }

    fn recycle(&mut self, buf: AlignedBuf) {
        if buf.fixed.is_some_and(|t| t.ring == self.ring_id) {
            self.fixed_free.push(buf);
        }
    }

    fn syncfs(&mut self, dir: &Path) -> Result<(), IoError> {
        let fail = |e: std::io::Error| {
            IoError::from_errno(super::OpKind::Syncfs, e.raw_os_error().unwrap_or(libc::EIO))
        };
        let d = std::fs::File::open(dir).map_err(fail)?;
        // SAFETY: `d` is an open descriptor for the call's duration; syncfs reads nothing
        // from memory.
        let r = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&d)) };
        if r == 0 {
            Ok(())
        } else {
            Err(fail(std::io::Error::last_os_error()))
        }
    }

    fn list_dir(&mut self, dir: &Path) -> Result<Vec<String>, IoError> {
        let os_error = |e: std::io::Error| {
            IoError::from_errno(
                super::OpKind::ListDir,
                e.raw_os_error().unwrap_or(libc::EIO),
            )
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(os_error)? {
            let entry = entry.map_err(os_error)?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn create_dir(&mut self, dir: &Path) -> Result<(), IoError> {
        let os_error = |e: std::io::Error| {
            IoError::from_errno(
                super::OpKind::Directory,
                e.raw_os_error().unwrap_or(libc::EIO),
            )
        };
        if dir.is_dir() {
            return Ok(());
        }
        std::fs::create_dir_all(dir).map_err(os_error)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::File::open(parent)
                .and_then(|d| d.sync_all())
                .map_err(os_error)?;
        }
        Ok(())
    }

    fn remove_dir(&mut self, dir: &Path) -> Result<(), IoError> {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => {
                return Err(IoError::from_errno(
                    super::OpKind::Directory,
                    e.raw_os_error().unwrap_or(libc::EIO),
                ))
            }
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
        }
        Ok(())
    }

    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        let fd = self.file_slot(file)?.fd.as_raw_fd();
        // SAFETY: `stat` is plain data that fstat fills in full on success; `fd` is open
        // (the slot owns it).
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `stat` outlives the call.
        if unsafe { libc::fstat(fd, &mut stat) } != 0 {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            return Err(IoError::from_errno(super::OpKind::FileLen, errno));
        }
        Ok(stat.st_size as u64)
    }

    fn requeue(&mut self, mut completions: Vec<Completion>) {
        self.requeued.append(&mut completions);
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

impl UringIo {
    /// Validates `op`, takes what it needs (paths, descriptor) and parks it in a slot; the
    /// caller pushes its SQE.
    fn prepare(&mut self, op: Op) -> Result<usize, IoError> {
        let mut paths = [None, None];
        let mut fd = -1;
        match &op {
            Op::Open { path, .. } | Op::Unlink { path } => paths[0] = Some(c_path(path)?),
            Op::Rename { from, to } => {
                paths[0] = Some(c_path(from)?);
                paths[1] = Some(c_path(to)?);
            }
            Op::Close { file } => {
                let in_flight = self.file_slot(*file)?.in_flight;
                if in_flight > 0 {
                    return Err(IoError::FileBusy {
                        file: *file,
                        in_flight,
                    });
                }
                // The descriptor moves into the operation; the kernel closes it.
                if let Some(slot) = self.files[file.0 as usize].take() {
                    fd = slot.fd.into_raw_fd();
                    self.free_files.push(file.0);
                }
            }
            _ => {
                if let Some(file) = op.file() {
                    let slot = self.file_slot(file)?;
                    validate(&op, slot.direct)?;
                    slot.in_flight += 1;
                    fd = slot.fd.as_raw_fd();
                }
            }
        }
        let id = OpId(self.next_id);
        self.next_id += 1;
        let inflight = InFlight {
            id,
            op,
            progress: 0,
            paths,
            fd,
            link_prev: None,
            link_next: None,
            held: false,
        };
        let index = match self.free_ops.pop() {
            Some(i) => {
                self.ops[i] = Some(inflight);
                i
            }
            None => {
                self.ops.push(Some(inflight));
                self.ops.len() - 1
            }
        };
        self.in_flight += 1;
        Ok(index)
    }
}

impl Drop for UringIo {
    fn drop(&mut self) {
        // Buffers and paths may be in the kernel's hands: wait for every operation before any
        // of them is freed. If the ring fails, leak them instead of freeing memory in use.
        let mut sink = Vec::new();
        while self.in_flight > 0 {
            sink.clear();
            if self.complete(self.in_flight, &mut sink).is_err() {
                for op in self.ops.drain(..).flatten() {
                    std::mem::forget(op);
                }
                return;
            }
        }
    }
}
