//! Reads of sealed segments through the ring (SPEC §6): a read the tail cache does not hold
//! and a sealed segment does is not waited for in place — the shard goes on serving appends and
//! other reads. Each partition keeps one read-ahead window on the segment its reader is in:
//! large O_DIRECT reads (`READ_AHEAD_CHUNK_BYTES`, `READ_AHEAD_CHUNKS` in flight) from the
//! read's batch boundary on, so that a consumer catching up finds its next fetch already read.
//! A read is answered when the chunks from its position hold its answer, with one copy (the
//! chunks' bytes gathered; the answer is a slice of them); whatever it cannot
//! get that way (a gap before the next segment, a failed read, a segment deleted meanwhile) is
//! read the synchronous way, which reports errors as every read does.

use super::mux::Owner;
use super::{Reply, Shard};
use crate::api::{EngineError, ReadRequest};
use crate::format::Offset;
use crate::io::{AlignedBuf, Done, FileId, Io, Op, OpId, PAGE_SIZE_BYTES};
use crate::log::{FromBytes, ReadParams, ReadResult, SealedRead};
use std::collections::VecDeque;

/// Size of one read-ahead read.
pub const READ_AHEAD_CHUNK_BYTES: usize = 2 << 20;
/// Read-ahead reads in flight per partition.
pub const READ_AHEAD_CHUNKS: usize = 4;

/// One read of the window.
struct Chunk {
    position: u64,
    id: OpId,
    /// The buffer and the bytes read, once complete (`None` bytes: the read failed).
    done: Option<(AlignedBuf, Option<usize>)>,
}

/// A partition's read-ahead over one sealed segment.
pub(super) struct Window {
    base: Offset,
    file: FileId,
    data_len: u64,
    chunks: VecDeque<Chunk>,
    /// Where the next chunk starts.
    next: u64,
}

/// A read waiting for the window.
pub(super) struct DeviceRead {
    request: ReadRequest,
    reply: Reply<ReadResult>,
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
        reply: Reply<ReadResult>,
    ) -> Option<(ReadRequest, Reply<ReadResult>)> {
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
        None
    }

    /// A new window at `plan`'s batch boundary (the old one's reads in flight are recycled as
    /// they complete).
    fn reset_window(&mut self, slot: usize, plan: &SealedRead) {
        let old = self
            .slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|p| p.window.take());
        if let Some(old) = old {
            self.recycle_window(old);
        }
        let page = PAGE_SIZE_BYTES as u64;
        if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            part.window = Some(Window {
                base: plan.base,
                file: plan.file,
                data_len: plan.data_len,
                chunks: VecDeque::new(),
                next: plan.start - plan.start % page,
            });
        }
    }

    /// Gives back the window's buffers; a read still in flight gives its own back when it
    /// completes (its completion finds no chunk).
    fn recycle_window(&mut self, w: Window) {
        for c in w.chunks {
            if let Some((buf, _)) = c.done {
                self.io.recycle(buf);
            }
        }
    }

    /// Keeps `READ_AHEAD_CHUNKS` reads in flight ahead of the partition's readers, while its
    /// segment is still part of the log.
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
                self.recycle_window(w);
            }
            return;
        }
        let Some(w) = part.window.as_mut() else {
            return;
        };
        while w.chunks.len() < READ_AHEAD_CHUNKS && w.next < w.data_len {
            let rest =
                (w.data_len - w.next).div_ceil(PAGE_SIZE_BYTES as u64) as usize * PAGE_SIZE_BYTES;
            let len = READ_AHEAD_CHUNK_BYTES.min(rest);
            let buf = self.io.buffer(len);
            let op = Op::Read {
                file: w.file,
                offset: w.next,
                buf,
                len,
            };
            match self.io.submit(op) {
                Ok(id) => {
                    self.io.register(&[id], Owner::ReadAhead(slot));
                    w.chunks.push_back(Chunk {
                        position: w.next,
                        id,
                        done: None,
                    });
                    w.next += len as u64;
                }
                Err(_) => break,
            }
        }
    }

    /// A read-ahead read completed.
    pub(super) fn on_read_ahead(&mut self, slot: usize, c: crate::io::Completion) {
        let chunk = self
            .slots
            .get_mut(slot)
            .and_then(Option::as_mut)
            .and_then(|p| p.window.as_mut())
            .and_then(|w| w.chunks.iter_mut().find(|k| k.id == c.id));
        let Some(chunk) = chunk else {
            if let Some(buf) = c.buf {
                self.io.recycle(buf);
            }
            return;
        };
        let got = match c.result {
            Ok(Done::Transferred { bytes }) => Some(bytes),
            _ => None,
        };
        chunk.done = Some((c.buf.unwrap_or_else(AlignedBuf::empty), got));
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
            let gathered = part
                .window
                .as_ref()
                .filter(|w| w.base == base)
                .map(|w| gather(w, start, request.max_bytes.saturating_mul(2).max(1 << 20)));
            let outcome = match gathered {
                Some(Gathered::Bytes(bytes, to_end)) => part.log.read_from_bytes(
                    &mut self.io,
                    bytes,
                    start,
                    to_end,
                    ReadParams {
                        offset: request.offset,
                        max_bytes: request.max_bytes,
                        isolation: request.isolation,
                        min_one_batch: request.min_one_batch,
                    },
                ),
                Some(Gathered::Wait) => return,
                Some(Gathered::Failed) | None => Ok(FromBytes::Elsewhere),
            };
            let Some(read) = part.device_reads.pop_front() else {
                return;
            };
            match outcome {
                Ok(FromBytes::Done(result, end)) => {
                    Self::consume(&mut self.io, part.window.as_mut(), end);
                    read.reply.fulfil(Ok(result));
                }
                Ok(FromBytes::NeedMore) => {
                    // Wait for more of the window; give up when it has nothing more to read.
                    let more = part.window.as_ref().is_some_and(|w| {
                        w.next < w.data_len || w.chunks.iter().any(|c| c.done.is_none())
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

    /// Drops the window's chunks wholly before `end` (read by now).
    fn consume(io: &mut super::ShardIo, window: Option<&mut Window>, end: u64) {
        let Some(w) = window else { return };
        while w
            .chunks
            .front()
            .is_some_and(|c| c.done.is_some() && c.position + READ_AHEAD_CHUNK_BYTES as u64 <= end)
        {
            if let Some(Chunk {
                done: Some((buf, _)),
                ..
            }) = w.chunks.pop_front()
            {
                io.recycle(buf);
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
            self.recycle_window(w);
        }
    }
}

/// What the window holds from a position.
enum Gathered {
    /// Bytes from the position, and whether they reach the segment's end.
    Bytes(Vec<u8>, bool),
    /// The chunk holding the position is still being read.
    Wait,
    /// A read failed, or the window does not hold the position.
    Failed,
}

/// The window's bytes from `start` on, up to about `want` of them, through the completed
/// chunks in order.
fn gather(w: &Window, start: u64, want: usize) -> Gathered {
    let mut out = Vec::new();
    let mut at = start;
    for c in &w.chunks {
        let Some((buf, got)) = &c.done else {
            return if out.is_empty() {
                Gathered::Wait
            } else {
                Gathered::Bytes(out, false)
            };
        };
        let Some(got) = *got else {
            return Gathered::Failed;
        };
        let end = c.position + got as u64;
        if end <= at {
            continue;
        }
        if c.position > at {
            return Gathered::Failed;
        }
        let from = (at - c.position) as usize;
        let valid_end = (w.data_len.min(end) - c.position) as usize;
        out.extend_from_slice(buf.as_slice().get(from..valid_end).unwrap_or_default());
        at = c.position + valid_end as u64;
        if at >= w.data_len {
            return Gathered::Bytes(out, true);
        }
        if out.len() >= want {
            return Gathered::Bytes(out, false);
        }
    }
    if out.is_empty() {
        if w.next >= w.data_len {
            Gathered::Failed
        } else {
            Gathered::Wait
        }
    } else {
        Gathered::Bytes(out, false)
    }
}
