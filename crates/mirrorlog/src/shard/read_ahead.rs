//! Reads of sealed segments through the ring (design.md §Runtime): a read the tail cache does not hold
//! and a sealed segment does is not waited for in place — the shard goes on serving appends and
//! other reads. Each partition keeps one read-ahead window on the segment its readers are in:
//! large O_DIRECT reads (`READ_AHEAD_CHUNK_BYTES`) from a read's batch boundary on, so that a
//! consumer catching up finds its next fetch already read. Several reads of the partition may
//! wait at once (a pipelined consumer, two consumers close together): the window answers them
//! in order.
//!
//! - **Shared answers.** A chunk that completes becomes a [`Bytes`] over its buffer, and an
//!   answer is a slice of it: no copy. Only a batch that straddles two chunks is copied (its
//!   answer gathers the two). The buffer comes back to the shard's pool when its last slice
//!   is dropped, on whatever thread ([`Lent`]).
//! - **Depth.** A window keeps up to `depth` chunks (read or in flight). The depth grows by
//!   one, to `READ_AHEAD_DEPTH_MAX`, each time a read arrives to find its chunk still being
//!   read (the reader keeps up with the device), and shrinks by one, to
//!   `READ_AHEAD_DEPTH_MIN`, each time a read arrives to find more than two chunks read ahead
//!   of it (the reader is slower than the device: the memory would only wait).
//! - **Fairness** with appends. While a commit round or a journal flush of the shard is in
//!   flight (appends wait on the device), a window submits a chunk only when none of its own
//!   is in flight: appends then queue behind one chunk at most, never behind `depth` of them.
//!   Otherwise it fills its depth.
//! - **Memory.** The shard's windows hold at most `READ_AHEAD_SHARD_BYTES`; a window that
//!   gets no chunk under that bound answers its reads the synchronous way. A window unread for
//!   `READ_AHEAD_IDLE_MS` is dropped on the shard's tick.
//!
//! Whatever the window cannot answer (a gap before the next segment, a failed read, a segment
//! deleted meanwhile, no memory left) is read the synchronous way, which reports errors as
//! every read does.

use super::mux::Owner;
use super::{ReadReply, Shard};
use crate::api::{EngineError, ReadRequest};
use crate::format::Offset;
use crate::io::{AlignedBuf, Done, FileId, Io, Op, OpId, PAGE_SIZE_BYTES};
use crate::log::{FromBytes, ReadParams, SealedRead};
use bytes::Bytes;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Size of one read-ahead read.
pub const READ_AHEAD_CHUNK_BYTES: usize = 4 << 20;
/// Most chunks a window keeps (read or in flight): 32 MiB, the raw reader's bytes in flight.
pub const READ_AHEAD_DEPTH_MAX: usize = 8;
/// Fewest chunks a window keeps.
pub const READ_AHEAD_DEPTH_MIN: usize = 1;
/// A new window's depth (a window on the next segment keeps its predecessor's).
const READ_AHEAD_DEPTH_START: usize = 2;
/// A window's reads in flight while the shard's appends wait on the device (measured: with 1,
/// catch-up fell to 0.41–0.78 of the raw reader and the producers' p99 did not improve).
pub const READ_AHEAD_IN_FLIGHT_WHILE_APPENDS_WAIT: usize = 4;
/// Most bytes all the shard's windows hold.
pub const READ_AHEAD_SHARD_BYTES: usize = 128 << 20;
/// A window nobody read for this long is dropped.
pub const READ_AHEAD_IDLE_MS: u64 = 5_000;

/// Buffers lent out inside answers come back here when their last slice is dropped.
type Returns = Arc<Mutex<Vec<AlignedBuf>>>;

/// A chunk's buffer inside a [`Bytes`]: its read bytes, and the way home.
struct Lent {
    buf: AlignedBuf,
    len: usize,
    home: Returns,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_slice().get(..self.len).unwrap_or_default()
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let buf = std::mem::replace(&mut self.buf, AlignedBuf::empty());
        self.home
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(buf);
    }
}

/// The shard's read-ahead memory (see the module docs).
pub(super) struct ReadAheadPool {
    returns: Returns,
    free: Vec<AlignedBuf>,
    /// Bytes of the chunks in the shard's windows.
    held_bytes: usize,
    /// Answers gathered across two chunks (copied).
    pub(super) seam_copies: u64,
}

impl ReadAheadPool {
    pub(super) fn new() -> Self {
        ReadAheadPool {
            returns: Arc::new(Mutex::new(Vec::new())),
            free: Vec::new(),
            held_bytes: 0,
            seam_copies: 0,
        }
    }

    /// Bytes of the chunks in the shard's windows.
    pub(super) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// A buffer for a chunk of `len` bytes: a returned one of that size, or a new one.
    fn take(&mut self, io: &mut dyn Io, len: usize) -> AlignedBuf {
        let returned =
            std::mem::take(&mut *self.returns.lock().unwrap_or_else(PoisonError::into_inner));
        for buf in returned {
            self.keep(io, buf);
        }
        match self.free.iter().position(|b| b.capacity() == len) {
            Some(i) => self.free.swap_remove(i),
            None => io.buffer(len),
        }
    }

    /// Keeps a full-size chunk buffer for reuse while the pool and the windows stay within
    /// the shard's bound; anything else goes back to the `Io`.
    fn keep(&mut self, io: &mut dyn Io, buf: AlignedBuf) {
        let kept = self.free.len() * READ_AHEAD_CHUNK_BYTES;
        if buf.capacity() == READ_AHEAD_CHUNK_BYTES
            && kept + self.held_bytes < READ_AHEAD_SHARD_BYTES
        {
            self.free.push(buf);
        } else {
            io.recycle(buf);
        }
    }
}

/// What a chunk holds.
enum ChunkState {
    Reading,
    /// Its bytes (to the segment's end at most).
    Read(Bytes),
    Failed,
}

/// One read of the window.
struct Chunk {
    position: u64,
    /// Its buffer's size (counted in the shard's bound).
    len: usize,
    id: OpId,
    state: ChunkState,
}

/// A partition's read-ahead over one sealed segment.
pub(super) struct Window {
    base: Offset,
    file: FileId,
    data_len: u64,
    chunks: VecDeque<Chunk>,
    /// Where the next chunk starts.
    next: u64,
    depth: usize,
    last_read: Instant,
}

impl Window {
    fn in_flight(&self) -> usize {
        self.chunks
            .iter()
            .filter(|c| matches!(c.state, ChunkState::Reading))
            .count()
    }

    /// Chunks read and wholly after `position`.
    fn read_ahead_of(&self, position: u64) -> usize {
        self.chunks
            .iter()
            .filter(|c| c.position > position && matches!(c.state, ChunkState::Read(_)))
            .count()
    }
}

/// A read waiting for the window.
pub(super) struct DeviceRead {
    request: ReadRequest,
    reply: ReadReply,
    base: Offset,
    start: u64,
}

impl Shard {
    /// Serves `request` through the partition's read-ahead window if a sealed segment holds
    /// it; hands it back otherwise.
    pub(super) fn read_sealed(
        &mut self,
        slot: usize,
        request: ReadRequest,
        reply: ReadReply,
    ) -> Option<(ReadRequest, ReadReply)> {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return Some((request, reply));
        };
        let plan = part
            .log
            .sealed_read_at(&mut self.io, request.offset, request.isolation);
        let Ok(Some(plan)) = plan else {
            return Some((request, reply));
        };
        let keep = part.window.as_ref().is_some_and(|w| {
            let from = w.chunks.front().map_or(w.next, |c| c.position);
            w.base == plan.base && w.file == plan.file && (from..=w.next).contains(&plan.start)
        });
        if !keep {
            self.reset_window(slot, &plan);
        }
        if let Some(w) = self.window_mut(slot) {
            // The reader's pace against the device's: ahead of it, more depth; behind, less.
            w.last_read = Instant::now();
            if w.read_ahead_of(plan.start) > 2 {
                w.depth = w.depth.saturating_sub(1).max(READ_AHEAD_DEPTH_MIN);
            }
        }
        if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            part.device_reads.push_back(DeviceRead {
                request,
                reply,
                base: plan.base,
                start: plan.start,
            });
        }
        self.fill_window(slot);
        self.answer_device_reads(slot);
        let waiting = self
            .slots
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|p| !p.device_reads.is_empty());
        if let Some(w) = self.window_mut(slot).filter(|_| waiting) {
            w.depth = (w.depth + 1).min(READ_AHEAD_DEPTH_MAX);
        }
        self.fill_window(slot);
        None
    }

    fn window_mut(&mut self, slot: usize) -> Option<&mut Window> {
        self.slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|p| p.window.as_mut())
    }

    /// A new window at `plan`'s batch boundary, with the old one's depth (the old one's
    /// reads in flight are recycled as they complete).
    fn reset_window(&mut self, slot: usize, plan: &SealedRead) {
        let old = self
            .slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|p| p.window.take());
        let depth = old.as_ref().map_or(READ_AHEAD_DEPTH_START, |w| w.depth);
        if let Some(old) = old {
            self.release_window(old);
        }
        let page = PAGE_SIZE_BYTES as u64;
        if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            part.window = Some(Window {
                base: plan.base,
                file: plan.file,
                data_len: plan.data_len,
                chunks: VecDeque::new(),
                next: plan.start - plan.start % page,
                depth,
                last_read: Instant::now(),
            });
        }
    }

    /// Takes the window's chunks out of the shard's bound; their buffers come back when the
    /// answers sharing them are dropped, or, for reads in flight, when they complete (their
    /// completions find no chunk).
    fn release_window(&mut self, w: Window) {
        for c in w.chunks {
            self.read_ahead.held_bytes -= c.len;
        }
    }

    /// Fills the partition's window to its depth (one read in flight at most while appends
    /// wait on the device), within the shard's bound, while its segment is still part of the
    /// log.
    fn fill_window(&mut self, slot: usize) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let Some((base, file)) = part.window.as_ref().map(|w| (w.base, w.file)) else {
            return;
        };
        if part.log.sealed_file(base) != Some(file) {
            // Deleted or cut: its file may be closed, its descriptor reused.
            if let Some(w) = part.window.take() {
                self.release_window(w);
            }
            return;
        }
        let Some(w) = part.window.as_mut() else {
            return;
        };
        let in_flight_max = if self.io.appends_waiting() {
            READ_AHEAD_IN_FLIGHT_WHILE_APPENDS_WAIT
        } else {
            w.depth
        };
        let mut in_flight = w.in_flight();
        while w.chunks.len() < w.depth && in_flight < in_flight_max && w.next < w.data_len {
            let rest =
                (w.data_len - w.next).div_ceil(PAGE_SIZE_BYTES as u64) as usize * PAGE_SIZE_BYTES;
            let len = READ_AHEAD_CHUNK_BYTES.min(rest);
            if self.read_ahead.held_bytes + len > READ_AHEAD_SHARD_BYTES {
                break;
            }
            let buf = self.read_ahead.take(&mut self.io, len);
            let op = Op::Read {
                file: w.file,
                offset: w.next,
                buf,
                len,
            };
            match self.io.submit(op) {
                Ok(id) => {
                    self.io.register(&[id], Owner::ReadAhead(slot));
                    self.read_ahead.held_bytes += len;
                    w.chunks.push_back(Chunk {
                        position: w.next,
                        len,
                        id,
                        state: ChunkState::Reading,
                    });
                    w.next += len as u64;
                    in_flight += 1;
                }
                Err(_) => break,
            }
        }
    }

    /// A read-ahead read completed.
    pub(super) fn on_read_ahead(&mut self, slot: usize, c: crate::io::Completion) {
        let home = self.read_ahead.returns.clone();
        let window = self
            .slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|p| p.window.as_mut());
        let Some((data_len, chunk)) = window.and_then(|w| {
            let data_len = w.data_len;
            w.chunks
                .iter_mut()
                .find(|k| k.id == c.id)
                .map(|k| (data_len, k))
        }) else {
            if let Some(buf) = c.buf {
                self.read_ahead.keep(&mut self.io, buf);
            }
            return;
        };
        chunk.state = match (c.result, c.buf) {
            (Ok(Done::Transferred { bytes }), Some(buf)) => {
                let len = (bytes as u64).min(data_len.saturating_sub(chunk.position)) as usize;
                ChunkState::Read(Bytes::from_owner(Lent { buf, len, home }))
            }
            (_, buf) => {
                if let Some(buf) = buf {
                    self.read_ahead.keep(&mut self.io, buf);
                }
                ChunkState::Failed
            }
        };
        self.answer_device_reads(slot);
        self.fill_window(slot);
    }

    /// Answers the partition's waiting reads, oldest first, as far as the window holds them.
    fn answer_device_reads(&mut self, slot: usize) {
        loop {
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                return;
            };
            let Some(front) = part.device_reads.front() else {
                return;
            };
            let (request, base, start) = (front.request, front.base, front.start);
            let params = ReadParams {
                offset: request.offset,
                max_bytes: request.max_bytes,
                isolation: request.isolation,
                min_one_batch: request.min_one_batch,
            };
            let window = part.window.as_ref().filter(|w| w.base == base);
            let mut outcome = match window.map(|w| slice_at(w, start)) {
                Some(Gathered::Bytes(bytes, to_end)) => {
                    part.log
                        .read_from_bytes(&mut self.io, bytes, start, to_end, params)
                }
                Some(Gathered::Wait) => return,
                Some(Gathered::Failed) | None => Ok(FromBytes::Elsewhere),
            };
            if matches!(outcome, Ok(FromBytes::NeedMore)) {
                // The first batch goes on in the next chunk: gather the two (a copy).
                let want = request.max_bytes.max(1 << 20);
                outcome = match window.map(|w| across(w, start, want)) {
                    Some(Gathered::Bytes(bytes, to_end)) => {
                        self.read_ahead.seam_copies += 1;
                        part.log
                            .read_from_bytes(&mut self.io, bytes, start, to_end, params)
                    }
                    Some(Gathered::Wait) => return,
                    Some(Gathered::Failed) | None => Ok(FromBytes::Elsewhere),
                };
            }
            let Some(read) = part.device_reads.pop_front() else {
                return;
            };
            match outcome {
                Ok(FromBytes::Done(result, end)) => {
                    let w = part.window.as_mut();
                    Self::consume(&mut self.read_ahead, w, end);
                    read.reply.fulfil(Ok(result));
                }
                Ok(FromBytes::NeedMore) => {
                    // Wait for more of the window; give up when it has nothing more to read.
                    let more = part.window.as_ref().is_some_and(|w| {
                        w.next < w.data_len
                            || w.chunks
                                .iter()
                                .any(|c| matches!(c.state, ChunkState::Reading))
                    });
                    if more {
                        part.device_reads.push_front(read);
                        return;
                    }
                    self.read_in_place(slot, read);
                }
                Ok(FromBytes::Elsewhere) => self.read_in_place(slot, read),
                Err(source) => read.reply.fulfil(Err(EngineError::Log {
                    partition: part.tp.clone(),
                    source,
                })),
            }
        }
    }

    /// Drops the window's chunks wholly before `end` (read by now; answers may still share
    /// their buffers).
    fn consume(pool: &mut ReadAheadPool, window: Option<&mut Window>, end: u64) {
        let Some(w) = window else { return };
        while w.chunks.front().is_some_and(|c| {
            matches!(c.state, ChunkState::Read(_)) && c.position + c.len as u64 <= end
        }) {
            if let Some(c) = w.chunks.pop_front() {
                pool.held_bytes -= c.len;
            }
        }
    }

    /// Serves `read` the synchronous way (the tail cache did not hold it either).
    fn read_in_place(&mut self, slot: usize, read: DeviceRead) {
        let r = self.read_in_log(slot, &read.request);
        read.reply.fulfil(r);
    }

    /// Answers every read waiting for the partition's window the synchronous way and drops
    /// the window (its log is about to be cut, moved or closed).
    pub(super) fn drop_read_ahead(&mut self, slot: usize) {
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let reads: Vec<DeviceRead> = part.device_reads.drain(..).collect();
        let window = part.window.take();
        for read in reads {
            self.read_in_place(slot, read);
        }
        if let Some(w) = window {
            self.release_window(w);
        }
    }

    /// Drops the windows nobody read for `READ_AHEAD_IDLE_MS` (on the shard's tick).
    pub(super) fn drop_idle_read_ahead(&mut self) {
        let idle = Duration::from_millis(READ_AHEAD_IDLE_MS);
        for slot in 0..self.slots.len() {
            let stale = self.slots[slot].as_ref().is_some_and(|p| {
                p.device_reads.is_empty()
                    && p.window
                        .as_ref()
                        .is_some_and(|w| w.last_read.elapsed() >= idle)
            });
            if stale {
                self.drop_read_ahead(slot);
            }
        }
    }
}

/// What the window holds from a position.
enum Gathered {
    /// Bytes from the position, and whether they reach the segment's end.
    Bytes(Bytes, bool),
    /// The chunk holding the position is still being read.
    Wait,
    /// A read failed, or the window does not hold the position.
    Failed,
}

/// The bytes of the chunk holding `start`, from `start` on: a slice, no copy.
fn slice_at(w: &Window, start: u64) -> Gathered {
    for c in &w.chunks {
        if start >= c.position + c.len as u64 {
            continue;
        }
        if start < c.position {
            return Gathered::Failed;
        }
        return match &c.state {
            ChunkState::Reading => Gathered::Wait,
            ChunkState::Failed => Gathered::Failed,
            ChunkState::Read(bytes) => {
                let end = c.position + bytes.len() as u64;
                if start >= end {
                    Gathered::Failed
                } else {
                    let from = (start - c.position) as usize;
                    Gathered::Bytes(bytes.slice(from..), end >= w.data_len)
                }
            }
        };
    }
    // Nothing holds it: the window could not read it (no memory left) or the segment ends.
    Gathered::Failed
}

/// The window's bytes from `start` on, up to about `want` of them, through the read chunks
/// in order: a copy, for a batch that straddles two chunks.
fn across(w: &Window, start: u64, want: usize) -> Gathered {
    let mut out = Vec::new();
    let mut at = start;
    for c in &w.chunks {
        let bytes = match &c.state {
            ChunkState::Reading if out.is_empty() => return Gathered::Wait,
            ChunkState::Reading => break,
            ChunkState::Failed => return Gathered::Failed,
            ChunkState::Read(bytes) => bytes,
        };
        let end = c.position + bytes.len() as u64;
        if end <= at {
            continue;
        }
        if c.position > at {
            return Gathered::Failed;
        }
        out.extend_from_slice(bytes.get((at - c.position) as usize..).unwrap_or_default());
        at = end;
        if at >= w.data_len {
            return Gathered::Bytes(out.into(), true);
        }
        if out.len() >= want {
            break;
        }
    }
    if out.is_empty() {
        Gathered::Failed
    } else {
        Gathered::Bytes(out.into(), false)
    }
}
