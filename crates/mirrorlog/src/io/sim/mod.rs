//! The simulated backend: an in-memory disk with the same contract as io_uring, deterministic by
//! seed, for tests of everything above the `Io` seam.
//!
//! - Queued operations complete in a seeded random order, and a random number of them per
//!   [`Io::complete`] call (at least the minimum asked), so code that assumes an order the kernel
//!   does not promise fails here.
//! - Every file keeps its current bytes and its *durable* bytes (as of its last completed
//!   fdatasync/fsync); [`SimIo::crash`] returns the disk a power cut would leave: durable bytes
//!   only. (Torn sectors and per-write survival are the recovery issue's refinement.)
//! - Directory entries are durable only once their directory is fsynced: a power cut forgets a
//!   create, rename or unlink made since (a new file vanishes, a renamed one is back under its
//!   old name, an unlinked one returns with its durable bytes), as POSIX allows and ext4 does.
//! - Every completed write is recorded ([`WriteRecord`]) so tests can check which byte ranges
//!   were ever overwritten.
//! - Faults on demand: a disk capacity (`ENOSPC` beyond it), fdatasync failures (`EIO`), the
//!   nth operation of a kind ([`Fault`]) and every read of a named file ([`SimIo::fail_reads_of`]).

mod crash;

use super::{validate, Completion, Done, FallocateMode, FileId, Io, IoError, Op, OpId, OpKind};
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// `v.resize(len, 0)`, a block of zeros at a time: `resize` writes byte by byte, which is
/// slow without optimization, and the crash sweeps (debug builds) grew their images by
/// megabytes at every cut, spending half their time there.
fn resize_zeroed(v: &mut Vec<u8>, len: usize) {
    static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
    if len <= v.len() {
        v.truncate(len);
        return;
    }
    v.reserve(len - v.len());
    while v.len() < len {
        let n = (len - v.len()).min(ZEROS.len());
        v.extend_from_slice(&ZEROS[..n]);
    }
}

/// Settings of a simulated disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Most operations in flight.
    pub capacity: usize,
    /// Total bytes the disk holds (file sizes and preallocations); `None` for unlimited.
    pub disk_capacity_bytes: Option<u64>,
    /// Fail every fdatasync/fsync (of a file or a directory) from this (0-based) one on with
    /// `EIO`.
    pub fail_syncs_from: Option<u64>,
    /// Power cut after this many executed operations: every later one fails with `EIO` and
    /// changes nothing, so a test can take [`SimIo::crash`] at any point of any operation.
    pub power_cut_after_ops: Option<u64>,
    /// Injected failures: each fails one operation of its kind, changing nothing.
    pub faults: Vec<Fault>,
}

/// One injected failure: the `nth` (0-based) operation of kind `kind` fails with `errno` and
/// changes nothing (a write writes no byte, a rename renames nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Which operations.
    pub kind: OpKind,
    /// Which one of them, counting from 0.
    pub nth: u64,
    /// The error it returns (`EIO`, `ENOSPC`, ...).
    pub errno: i32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            capacity: 256,
            disk_capacity_bytes: None,
            fail_syncs_from: None,
            power_cut_after_ops: None,
            faults: Vec::new(),
        }
    }
}

/// One completed write: which bytes of which file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// The operation.
    pub id: OpId,
    /// The file's path.
    pub path: PathBuf,
    /// File byte range written.
    pub range: Range<u64>,
}

#[derive(Debug, Clone, Default)]
struct SimFile {
    /// Identity (an inode number): survives renames; what the durable namespace refers to.
    id: u64,
    data: Vec<u8>,
    durable: Vec<u8>,
    /// Bytes reserved by fallocate beyond the size (`KeepSize`).
    reserved_bytes: u64,
    /// Changes since the last sync, in order: what a power cut may keep, drop or tear.
    unsynced: Vec<Unsynced>,
}

/// A change not yet covered by a completed fdatasync/fsync.
#[derive(Debug, Clone)]
enum Unsynced {
    Write { offset: u64, bytes: Vec<u8> },
    Resize { len: u64 },
}

/// The sector size a torn write tears at.
pub const SECTOR_SIZE_BYTES: usize = 512;

/// What a power cut does to the writes that were not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashModel {
    /// Every unsynced change is lost: the disk holds exactly the synced bytes.
    DropUnsynced,
    /// Each unsynced write, independently and by seed, survives whole, is lost, or is torn at
    /// 512-byte sectors (each sector old, new, or garbage); each unsynced size change
    /// survives or is lost. Synced data always survives.
    Torn,
}

impl SimFile {
    /// Makes every change durable: the unsynced ones replayed onto the durable image in order,
    /// rather than the whole file copied per sync.
    fn sync(&mut self) {
        for change in self.unsynced.drain(..) {
            match change {
                Unsynced::Write { offset, bytes } => {
                    let end = offset as usize + bytes.len();
                    if self.durable.len() < end {
                        resize_zeroed(&mut self.durable, end);
                    }
                    self.durable[offset as usize..end].copy_from_slice(&bytes);
                }
                Unsynced::Resize { len } => resize_zeroed(&mut self.durable, len as usize),
            }
        }
        debug_assert!(
            self.durable.len() == self.data.len(),
            "durable image diverged"
        );
    }

    fn footprint(&self) -> u64 {
        (self.data.len() as u64).max(self.reserved_bytes)
    }
}

#[derive(Debug, Clone)]
struct OpenFile {
    path: PathBuf,
    direct: bool,
    writable: bool,
    in_flight: usize,
}

/// See the module docs.
#[derive(Debug)]
pub struct SimIo {
    config: SimConfig,
    rng: u64,
    files: BTreeMap<PathBuf, SimFile>,
    /// The namespace as of each directory's last fsync: name → file identity. A power cut
    /// keeps exactly these names.
    durable_names: BTreeMap<PathBuf, u64>,
    /// Files unlinked or replaced since their directory's last fsync, still named durably.
    orphans: BTreeMap<u64, SimFile>,
    next_file_id: u64,
    open: Vec<Option<OpenFile>>,
    /// Queued chains (a plain submission is a chain of one), run in a seeded random order.
    queue: Vec<std::collections::VecDeque<(OpId, Op)>>,
    queued_ops: usize,
    next_id: u64,
    syncs: u64,
    executed: u64,
    reads: u64,
    /// Bytes read per path, for tests that check what an operation never reads.
    read_bytes: BTreeMap<PathBuf, u64>,
    /// Completions given back by `requeue`, delivered first by the next `complete`.
    requeued: Vec<Completion>,
    writes: Vec<WriteRecord>,
    /// Operations executed so far, per kind (for [`Fault::nth`]).
    per_kind: Vec<(OpKind, u64)>,
    /// Files every read of which fails with the errno ([`SimIo::fail_reads_of`]).
    unreadable: BTreeMap<PathBuf, i32>,
}

impl SimIo {
    /// An empty disk.
    #[must_use]
    pub fn new(config: SimConfig) -> Self {
        SimIo {
            rng: config.seed ^ 0x9E37_79B9_7F4A_7C15,
            config,
            files: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            orphans: BTreeMap::new(),
            next_file_id: 1,
            open: Vec::new(),
            queue: Vec::new(),
            queued_ops: 0,
            next_id: 0,
            syncs: 0,
            executed: 0,
            reads: 0,
            read_bytes: BTreeMap::new(),
            requeued: Vec::new(),
            writes: Vec::new(),
            per_kind: Vec::new(),
            unreadable: BTreeMap::new(),
        }
    }

    fn random(&mut self, bound: usize) -> usize {
        // xorshift64*: deterministic and good enough to shuffle completions.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound.max(1) as u64) as usize
    }

    /// Every write completed so far, in completion order.
    #[must_use]
    pub fn writes(&self) -> &[WriteRecord] {
        &self.writes
    }

    /// Current bytes of `path`.
    #[must_use]
    pub fn file_bytes(&self, path: &Path) -> Option<&[u8]> {
        self.files.get(path).map(|f| f.data.as_slice())
    }

    /// Overwrites `bytes` at `position` of `path`, durably, as a disk fault would (extending
    /// the file with zeroes if needed). For tests that damage a disk image.
    pub fn damage(&mut self, path: &Path, position: u64, bytes: &[u8]) {
        let Some(file) = self.files.get_mut(path) else {
            return;
        };
        let start = position as usize;
        let end = start + bytes.len();
        for image in [&mut file.data, &mut file.durable] {
            if image.len() < end {
                resize_zeroed(image, end);
            }
            if let Some(range) = image.get_mut(start..end) {
                range.copy_from_slice(bytes);
            }
        }
    }

    /// Paths of all files, sorted.
    #[must_use]
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.keys().cloned().collect()
    }

    /// Reads executed so far.
    #[must_use]
    pub fn read_ops(&self) -> u64 {
        self.reads
    }

    /// Bytes read from `path` so far (by any handle).
    #[must_use]
    pub fn read_bytes_of(&self, path: &Path) -> u64 {
        self.read_bytes.get(path).copied().unwrap_or(0)
    }

    /// Operations executed so far (for choosing a power-cut point).
    #[must_use]
    pub fn executed_ops(&self) -> u64 {
        self.executed
    }

    /// Plans a power cut `ops` operations from now (`None`: no cut): those execute, and every
    /// later one fails with `EIO` and changes nothing, as with
    /// [`SimConfig::power_cut_after_ops`] counted from here.
    pub fn set_power_cut_in(&mut self, ops: Option<u64>) {
        self.config.power_cut_after_ops = ops.map(|n| self.executed + n);
    }

    /// Makes every later read of `path` (by any handle, opened before or after) fail with
    /// `errno` and read nothing, as a bad sector under a small file does; opening it still
    /// works. `None` heals it. Not carried over by [`SimIo::crash`].
    pub fn fail_reads_of(&mut self, path: &Path, errno: Option<i32>) {
        match errno {
            Some(e) => self.unreadable.insert(path.to_path_buf(), e),
            None => self.unreadable.remove(path),
        };
    }

    /// The errno reads of `op`'s file fail with ([`SimIo::fail_reads_of`]), if any.
    fn unreadable_errno(&self, op: &Op) -> Option<i32> {
        let Op::Read { file, .. } = op else {
            return None;
        };
        let path = &self.open_file(*file).ok()?.path;
        self.unreadable.get(path).copied()
    }

    /// Changes the disk capacity (to fill or free the disk during a test).
    pub fn set_disk_capacity(&mut self, bytes: Option<u64>) {
        self.config.disk_capacity_bytes = bytes;
    }

    fn used_bytes(&self) -> u64 {
        self.files.values().map(SimFile::footprint).sum()
    }

    /// Whether growing `path` to a footprint of `footprint` bytes fits the disk.
    fn fits(&self, path: &Path, footprint: u64) -> bool {
        let Some(limit) = self.config.disk_capacity_bytes else {
            return true;
        };
        let current = self.files.get(path).map_or(0, SimFile::footprint);
        footprint <= current || self.used_bytes() - current + footprint <= limit
    }

    fn open_file(&self, file: FileId) -> Result<&OpenFile, IoError> {
        self.open
            .get(file.0 as usize)
            .and_then(Option::as_ref)
            .ok_or(IoError::UnknownFile(file))
    }

    /// Operations of `kind` executed so far.
    #[must_use]
    pub fn ops_of(&self, kind: OpKind) -> u64 {
        self.per_kind
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }

    /// Plans `fault` with its `nth` counted from now: the `nth` (0-based) next operation of
    /// its kind fails.
    pub fn inject(&mut self, fault: Fault) {
        let done = self.ops_of(fault.kind);
        self.config.faults.push(Fault {
            nth: done + fault.nth,
            ..fault
        });
    }

    /// The errno of the injected fault this operation of `kind` hits, if any.
    fn injected(&mut self, kind: OpKind) -> Option<i32> {
        let n = match self.per_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, count)) => {
                *count += 1;
                *count - 1
            }
            None => {
                self.per_kind.push((kind, 1));
                0
            }
        };
        if self
            .config
            .power_cut_after_ops
            .is_some_and(|cut| self.executed > cut)
        {
            return Some(libc::EIO);
        }
        self.config
            .faults
            .iter()
            .find(|f| f.kind == kind && f.nth == n)
            .map(|f| f.errno)
    }

    fn execute(&mut self, id: OpId, op: Op) -> Completion {
        let kind = op.kind();
        self.executed += 1;
        let injected = self.injected(kind);
        if let Some(errno) = injected.or_else(|| self.unreadable_errno(&op)) {
            if let Some(file) = op.file() {
                if let Some(Some(f)) = self.open.get_mut(file.0 as usize) {
                    f.in_flight = f.in_flight.saturating_sub(1);
                }
            }
            let buf = match op {
                Op::Write { buf, .. } | Op::Read { buf, .. } => Some(buf),
                _ => None,
            };
            return Completion {
                id,
                result: Err(IoError::from_errno(kind, errno)),
                buf,
            };
        }
        if let Some(file) = op.file() {
            if let Some(Some(f)) = self.open.get_mut(file.0 as usize) {
                f.in_flight = f.in_flight.saturating_sub(1);
            }
        }
        let path_of = |s: &SimIo, file: FileId| s.open_file(file).map(|f| f.path.clone());
        let mut buf_back = None;
        let result = (|| -> Result<Done, IoError> {
            match op {
                // Picked only once rung (see `complete`).
                Op::WaitDoorbell { .. } => Ok(Done::Ok),
                Op::Open { path, options } => {
                    if !options.directory && !self.files.contains_key(&path) {
                        if !options.create {
                            return Err(IoError::from_errno(kind, libc::ENOENT));
                        }
                        let f = self.new_file();
                        self.files.insert(path.clone(), f);
                    }
                    let entry = OpenFile {
                        path,
                        direct: options.direct,
                        writable: options.write,
                        in_flight: 0,
                    };
                    let free = self.open.iter().position(Option::is_none);
                    let index = match free {
                        Some(i) => {
                            self.open[i] = Some(entry);
                            i
                        }
                        None => {
                            self.open.push(Some(entry));
                            self.open.len() - 1
                        }
                    };
                    Ok(Done::Opened(FileId(index as u32)))
                }
                Op::Write {
                    file,
                    offset,
                    buf,
                    range,
                } => {
                    let path = path_of(self, file);
                    let writable = self.open_file(file).is_ok_and(|f| f.writable);
                    let written = range.len();
                    let result = path.and_then(|path| {
                        if !writable {
                            return Err(IoError::from_errno(kind, libc::EBADF));
                        }
                        let end = offset + written as u64;
                        let size = self.files.get(&path).map_or(0, |f| f.data.len() as u64);
                        if !self.fits(&path, end.max(size)) {
                            return Err(IoError::NoSpace { op: kind });
                        }
                        let f = self.file_mut(&path);
                        if f.data.len() < end as usize {
                            resize_zeroed(&mut f.data, end as usize);
                        }
                        f.data[offset as usize..end as usize]
                            .copy_from_slice(&buf.as_slice()[range.clone()]);
                        f.unsynced.push(Unsynced::Write {
                            offset,
                            bytes: buf.as_slice()[range].to_vec(),
                        });
                        self.writes.push(WriteRecord {
                            id,
                            path,
                            range: offset..end,
                        });
                        Ok(Done::Transferred { bytes: written })
                    });
                    buf_back = Some(buf);
                    result
                }
                Op::Read {
                    file,
                    offset,
                    mut buf,
                    len,
                } => {
                    self.reads += 1;
                    let result = path_of(self, file).map(|path| {
                        let data = self.files.get(&path).map_or(&[][..], |f| &f.data[..]);
                        let start = (offset as usize).min(data.len());
                        let end = (offset as usize + len).min(data.len());
                        buf.as_mut_slice()[..end - start].copy_from_slice(&data[start..end]);
                        *self.read_bytes.entry(path).or_default() += (end - start) as u64;
                        Done::Transferred { bytes: end - start }
                    });
                    buf_back = Some(buf);
                    result
                }
                Op::Fdatasync { file } | Op::Fsync { file } => {
                    let path = path_of(self, file)?;
                    let n = self.syncs;
                    self.syncs += 1;
                    if self.config.fail_syncs_from.is_some_and(|from| n >= from) {
                        return Err(IoError::from_errno(kind, libc::EIO));
                    }
                    if !self.files.contains_key(&path) {
                        // An open directory: its entries become durable.
                        self.sync_dir(&path);
                        return Ok(Done::Ok);
                    }
                    if let Some(f) = self.files.get_mut(&path) {
                        f.sync();
                    }
                    Ok(Done::Ok)
                }
                Op::Fallocate {
                    file,
                    offset,
                    len,
                    mode,
                } => {
                    let path = path_of(self, file)?;
                    let end = offset + len;
                    let current = self.files.get(&path).map_or(0, SimFile::footprint);
                    if !self.fits(&path, end.max(current)) {
                        return Err(IoError::NoSpace { op: kind });
                    }
                    let f = self.file_mut(&path);
                    match mode {
                        FallocateMode::Extend => {
                            if (f.data.len() as u64) < end {
                                resize_zeroed(&mut f.data, end as usize);
                                f.unsynced.push(Unsynced::Resize { len: end });
                            }
                        }
                        FallocateMode::KeepSize => f.reserved_bytes = f.reserved_bytes.max(end),
                    }
                    Ok(Done::Ok)
                }
                Op::Truncate { file, len } => {
                    let path = path_of(self, file)?;
                    if !self.fits(&path, len) {
                        return Err(IoError::NoSpace { op: kind });
                    }
                    let f = self.file_mut(&path);
                    resize_zeroed(&mut f.data, len as usize);
                    f.unsynced.push(Unsynced::Resize { len });
                    f.reserved_bytes = f.reserved_bytes.min(len.max(f.reserved_bytes));
                    Ok(Done::Ok)
                }
                Op::Rename { from, to } => {
                    let f = self
                        .files
                        .remove(&from)
                        .ok_or(IoError::from_errno(kind, libc::ENOENT))?;
                    if let Some(replaced) = self.files.insert(to.clone(), f) {
                        self.forget(replaced);
                    }
                    for open in self.open.iter_mut().flatten() {
                        if open.path == from {
                            open.path = to.clone();
                        }
                    }
                    Ok(Done::Ok)
                }
                Op::Unlink { path } => {
                    let f = self
                        .files
                        .remove(&path)
                        .ok_or(IoError::from_errno(kind, libc::ENOENT))?;
                    self.forget(f);
                    Ok(Done::Ok)
                }
                Op::Close { file } => {
                    self.open_file(file)?;
                    self.open[file.0 as usize] = None;
                    Ok(Done::Ok)
                }
            }
        })();
        Completion {
            id,
            result,
            buf: buf_back,
        }
    }
}

impl SimIo {
    /// Checks `op` as a submission would and counts it against its file.
    fn admit(&mut self, op: &Op) -> Result<(), IoError> {
        if let Some(file) = op.file() {
            let f = self.open_file(file)?;
            if let Op::Close { .. } = op {
                if f.in_flight > 0 {
                    return Err(IoError::FileBusy {
                        file,
                        in_flight: f.in_flight,
                    });
                }
            } else {
                validate(op, f.direct)?;
            }
        }
        if let Op::Open { path, .. } | Op::Unlink { path } = op {
            if path.as_os_str().is_empty() {
                return Err(IoError::BadPath(path.clone()));
            }
        }
        Ok(())
    }

    fn count_in(&mut self, op: &Op) {
        if let Some(file) = op.file() {
            if let Some(Some(f)) = self.open.get_mut(file.0 as usize) {
                f.in_flight += 1;
            }
        }
    }

    fn next_id(&mut self) -> OpId {
        let id = OpId(self.next_id);
        self.next_id += 1;
        id
    }
}

impl Io for SimIo {
    fn submit(&mut self, op: Op) -> Result<OpId, IoError> {
        if self.queued_ops >= self.config.capacity {
            return Err(IoError::QueueFull {
                in_flight: self.queued_ops,
            });
        }
        self.admit(&op)?;
        self.count_in(&op);
        let id = self.next_id();
        self.queue
            .push(std::collections::VecDeque::from([(id, op)]));
        self.queued_ops += 1;
        Ok(id)
    }

    fn submit_chain(&mut self, ops: Vec<Op>) -> Result<Vec<OpId>, IoError> {
        if self.queued_ops + ops.len() > self.config.capacity {
            return Err(IoError::QueueFull {
                in_flight: self.queued_ops,
            });
        }
        for op in &ops {
            super::chainable(op)?;
            self.admit(op)?;
        }
        let mut chain = std::collections::VecDeque::with_capacity(ops.len());
        for op in ops {
            self.count_in(&op);
            let id = self.next_id();
            chain.push_back((id, op));
        }
        let ids = chain.iter().map(|(id, _)| *id).collect();
        self.queued_ops += chain.len();
        self.queue.push(chain);
        Ok(ids)
    }

    fn complete(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> Result<(), IoError> {
        let mut produced = self.requeued.len();
        out.append(&mut self.requeued);
        // One operation at a time from a random chain, so a crash can fall between the members
        // of a chain (writes done, their fdatasync not).
        let min = min_complete.min(self.queued_ops + produced);
        let extra = self.random(self.queued_ops + 1);
        while self.queued_ops > 0 && (produced < min || produced < extra) {
            // A doorbell wait runs only once rung, and is waited for only when nothing else
            // is queued and the caller still needs a completion.
            let waits_unrung = |chain: &std::collections::VecDeque<(OpId, Op)>| matches!(chain.front(), Some((_, Op::WaitDoorbell { doorbell })) if !doorbell.wait_readable(0));
            let ready: Vec<usize> = (0..self.queue.len())
                .filter(|&i| !waits_unrung(&self.queue[i]))
                .collect();
            let pick = if ready.is_empty() {
                if produced >= min {
                    break;
                }
                let Some(i) = self.queue.iter().position(|c| {
                    matches!(c.front(), Some((_, Op::WaitDoorbell { doorbell })) if doorbell.wait_readable(-1))
                }) else {
                    continue;
                };
                i
            } else {
                ready[self.random(ready.len())]
            };
            let Some((id, op)) = self.queue[pick].pop_front() else {
                self.queue.swap_remove(pick);
                continue;
            };
            self.queued_ops -= 1;
            let completion = self.execute(id, op);
            let failed = completion.result.is_err();
            out.push(completion);
            produced += 1;
            if failed {
                // The rest of the chain never runs.
                let rest: Vec<_> = self.queue[pick].drain(..).collect();
                for (id, op) in rest {
                    self.queued_ops -= 1;
                    if let Some(file) = op.file() {
                        if let Some(Some(f)) = self.open.get_mut(file.0 as usize) {
                            f.in_flight = f.in_flight.saturating_sub(1);
                        }
                    }
                    let kind = op.kind();
                    let buf = match op {
                        Op::Write { buf, .. } | Op::Read { buf, .. } => Some(buf),
                        _ => None,
                    };
                    out.push(Completion {
                        id,
                        result: Err(IoError::Canceled { op: kind }),
                        buf,
                    });
                    produced += 1;
                }
            }
            if self.queue[pick].is_empty() {
                self.queue.swap_remove(pick);
            }
        }
        Ok(())
    }

    fn syncfs(&mut self, _dir: &Path) -> Result<(), IoError> {
        // One operation of the sweep's count, like any other; it makes every file's changes
        // durable (not the directories' entries: those need their fsync).
        self.executed += 1;
        if let Some(errno) = self.injected(super::OpKind::Syncfs) {
            return Err(IoError::from_errno(super::OpKind::Syncfs, errno));
        }
        let n = self.syncs;
        self.syncs += 1;
        if self.config.fail_syncs_from.is_some_and(|from| n >= from) {
            return Err(IoError::from_errno(super::OpKind::Syncfs, libc::EIO));
        }
        for f in self.files.values_mut() {
            f.sync();
        }
        Ok(())
    }

    fn list_dir(&mut self, dir: &Path) -> Result<Vec<String>, IoError> {
        // Directories exist implicitly in the simulation: a directory with no files is empty.
        Ok(self
            .files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn create_dir(&mut self, _dir: &Path) -> Result<(), IoError> {
        // Directories exist implicitly in the simulation.
        Ok(())
    }

    fn remove_dir(&mut self, dir: &Path) -> Result<(), IoError> {
        let busy = self.open.iter().flatten().any(|f| f.path.starts_with(dir));
        if busy {
            return Err(IoError::from_errno(super::OpKind::Directory, libc::EBUSY));
        }
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        for p in gone {
            if let Some(f) = self.files.remove(&p) {
                self.forget(f);
            }
        }
        Ok(())
    }

    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        let path = &self.open_file(file)?.path;
        Ok(self.files.get(path).map_or(0, |f| f.data.len() as u64))
    }

    fn requeue(&mut self, mut completions: Vec<Completion>) {
        self.requeued.append(&mut completions);
    }

    fn in_flight(&self) -> usize {
        self.queued_ops
    }

    fn capacity(&self) -> usize {
        self.config.capacity
    }
}
