//! One `Io` shared by the partitions of a shard. A partition's commit round runs asynchronously
//! while the shard serves other requests, and some requests make a partition wait for its own
//! I/O in place (a roll, a read, a truncation: code that reaps completions with
//! `Io::complete`). The multiplexer keeps them apart: completions of operations registered to
//! an owner (a partition's round, the doorbell watch) always go to a stash the shard loop
//! drains; everything else goes to the caller. A segment that waits in place for its own round
//! (a synchronous commit) asks for exactly those operations with `Io::complete_for`, which also
//! takes them out of the stash.
//!
//! A submission waits for room in the ring instead of failing: while the ring is full, it
//! reaps completions (owned ones to the stash, unowned ones kept for `complete`) until the
//! operation fits. Every operation in flight completes on its own, so the wait ends; the shard
//! itself starts rounds only when they fit (`group_commit`), so it never waits here.

use crate::io::{AlignedBuf, Completion, FileId, Io, IoError, Op, OpId};
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// Who gets a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    /// The partition in this slot of the shard.
    Partition(usize),
    /// The shard's doorbell watch.
    Doorbell,
    /// A read-ahead read of the partition in this slot.
    ReadAhead(usize),
    /// The shard's journal (a flush or a release).
    Journal,
}

/// The shard's `Io`, routing completions by owner.
pub(crate) struct ShardIo {
    inner: Box<dyn Io>,
    owners: HashMap<OpId, Owner>,
    stash: VecDeque<(Owner, Completion)>,
    /// Unowned completions reaped while waiting for room, for the next `complete`.
    early: Vec<Completion>,
    scratch: Vec<Completion>,
    /// The shard's pool of idle buffers (by size) that the ring has not registered: partitions
    /// hand their append buffers back when idle and take them again on their next append, so
    /// buffers move between partitions instead of being mapped and unmapped each time.
    idle: HashMap<usize, Vec<AlignedBuf>>,
    idle_bytes: usize,
    /// Reads submitted to the device (the tail cache's figure of merit: none at the tail).
    device_reads: u64,
    /// Bytes submitted in writes (the numerator of write amplification).
    bytes_written: u64,
    /// Owned operations in flight of commit rounds and the journal: appends waiting on the
    /// device, what the read-ahead's fairness policy weighs.
    commit_ops: usize,
}

/// Most bytes of idle buffers a shard keeps for reuse; beyond it they go back to the system.
pub(crate) const IDLE_BUFFER_BYTES_MAX: usize = 16 << 20;

impl ShardIo {
    pub(crate) fn new(inner: Box<dyn Io>) -> Self {
        ShardIo {
            inner,
            owners: HashMap::new(),
            stash: VecDeque::new(),
            early: Vec::new(),
            scratch: Vec::new(),
            idle: HashMap::new(),
            idle_bytes: 0,
            device_reads: 0,
            bytes_written: 0,
            commit_ops: 0,
        }
    }

    /// Whether appends wait on the device: a commit round's or the journal's operation is in
    /// flight.
    pub(crate) fn appends_waiting(&self) -> bool {
        self.commit_ops > 0
    }

    fn tally(&mut self, owner: Owner, delta: isize) {
        if matches!(owner, Owner::Partition(_) | Owner::Journal) {
            self.commit_ops = self.commit_ops.saturating_add_signed(delta);
        }
    }

    /// The owner of a completed operation, if it has one (no longer in flight).
    fn take_owner(&mut self, id: OpId) -> Option<Owner> {
        let owner = self.owners.remove(&id)?;
        self.tally(owner, -1);
        Some(owner)
    }

    /// Bytes submitted in writes so far (segments, commit records, journal, every file).
    pub(crate) fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    fn count(&mut self, op: &Op) {
        match op {
            Op::Read { .. } => self.device_reads += 1,
            Op::Write { range, .. } => self.bytes_written += range.len() as u64,
            _ => {}
        }
    }

    /// Reads submitted to the device so far.
    pub(crate) fn device_reads(&self) -> u64 {
        self.device_reads
    }

    /// Bytes of idle buffers in the shard's pool.
    pub(crate) fn idle_buffer_bytes(&self) -> usize {
        self.idle_bytes
    }

    /// Free places in the ring.
    pub(crate) fn room(&self) -> usize {
        self.inner.capacity().saturating_sub(self.inner.in_flight())
    }

    /// Reaps until `needed` more operations fit in the ring.
    fn make_room(&mut self, needed: usize) -> Result<(), IoError> {
        if needed > self.inner.capacity() {
            return Err(IoError::QueueFull {
                in_flight: self.inner.in_flight(),
            });
        }
        while self.room() < needed {
            let mut batch = std::mem::take(&mut self.scratch);
            self.inner.complete(1, &mut batch)?;
            for c in batch.drain(..) {
                match self.take_owner(c.id) {
                    Some(owner) => self.stash.push_back((owner, c)),
                    None => self.early.push(c),
                }
            }
            self.scratch = batch;
        }
        Ok(())
    }

    /// Routes later completions of `ops` to `owner`.
    pub(crate) fn register(&mut self, ops: &[OpId], owner: Owner) {
        for &id in ops {
            if self.owners.insert(id, owner).is_none() {
                self.tally(owner, 1);
            }
        }
    }

    /// Reaps (waiting for one completion if `block`) and returns every owned completion; an
    /// unowned one (nobody waits for it any more) gets its buffer recycled.
    pub(crate) fn reap(&mut self, block: bool) -> Result<Vec<(Owner, Completion)>, IoError> {
        // Between turns nobody waits in place: what was reaped early for such a wait is done.
        for c in self.early.drain(..) {
            if let Some(buf) = c.buf {
                self.inner.recycle(buf);
            }
        }
        if self.stash.is_empty() || !block {
            let mut got = std::mem::take(&mut self.scratch);
            self.inner
                .complete(usize::from(block && self.stash.is_empty()), &mut got)?;
            for c in got.drain(..) {
                match self.take_owner(c.id) {
                    Some(owner) => self.stash.push_back((owner, c)),
                    None => {
                        if let Some(buf) = c.buf {
                            self.inner.recycle(buf);
                        }
                    }
                }
            }
            self.scratch = got;
        }
        Ok(std::mem::take(&mut self.stash).into())
    }

    /// Puts completions the shard has not handled yet back in front of the stash, in their
    /// order: handled one at a time from there ([`ShardIo::next_stashed`]), each stays where a
    /// wait in place (`complete_for`) finds it while an earlier one is being handled.
    pub(crate) fn restash(&mut self, completions: Vec<(Owner, Completion)>) {
        for c in completions.into_iter().rev() {
            self.stash.push_front(c);
        }
    }

    /// The oldest owned completion not yet handled.
    pub(crate) fn next_stashed(&mut self) -> Option<(Owner, Completion)> {
        self.stash.pop_front()
    }
}

impl Io for ShardIo {
    fn submit(&mut self, op: Op) -> Result<OpId, IoError> {
        self.make_room(1)?;
        self.count(&op);
        self.inner.submit(op)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.inner.flush()
    }

    fn complete(&mut self, min_complete: usize, out: &mut Vec<Completion>) -> Result<(), IoError> {
        // Owned completions (rounds, the doorbell) always go to the stash: code waiting in
        // place gets only its own unowned operations (a segment waiting for its round uses
        // `complete_for`).
        let mut got = self.early.len();
        out.append(&mut self.early);
        let mut first = true;
        while got < min_complete || first {
            first = false;
            let mut batch = std::mem::take(&mut self.scratch);
            // One at a time once something is owed: owned completions may arrive first, and
            // waiting for several could wait for operations that are not in flight.
            self.inner
                .complete(usize::from(got < min_complete), &mut batch)?;
            for c in batch.drain(..) {
                match self.take_owner(c.id) {
                    Some(owner) => self.stash.push_back((owner, c)),
                    None => {
                        out.push(c);
                        got += 1;
                    }
                }
            }
            self.scratch = batch;
        }
        Ok(())
    }

    fn complete_for(&mut self, ids: &[OpId], out: &mut Vec<Completion>) -> Result<(), IoError> {
        let before = out.len();
        let mut i = 0;
        while i < self.early.len() {
            if ids.contains(&self.early[i].id) {
                out.push(self.early.remove(i));
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.stash.len() {
            if ids.contains(&self.stash[i].1.id) {
                if let Some((_, c)) = self.stash.remove(i) {
                    out.push(c);
                }
            } else {
                i += 1;
            }
        }
        while out.len() == before {
            let mut batch = std::mem::take(&mut self.scratch);
            self.inner.complete(1, &mut batch)?;
            for c in batch.drain(..) {
                if ids.contains(&c.id) {
                    self.take_owner(c.id);
                    out.push(c);
                } else if let Some(owner) = self.take_owner(c.id) {
                    self.stash.push_back((owner, c));
                } else {
                    out.push(c);
                }
            }
            self.scratch = batch;
        }
        Ok(())
    }

    fn submit_chain(&mut self, ops: Vec<Op>) -> Result<Vec<OpId>, IoError> {
        self.make_room(ops.len())?;
        for op in &ops {
            self.count(op);
        }
        self.inner.submit_chain(ops)
    }

    fn list_dir(&mut self, dir: &Path) -> Result<Vec<String>, IoError> {
        self.inner.list_dir(dir)
    }

    fn syncfs(&mut self, dir: &Path) -> Result<(), IoError> {
        self.inner.syncfs(dir)
    }

    fn create_dir(&mut self, dir: &Path) -> Result<(), IoError> {
        self.inner.create_dir(dir)
    }

    fn remove_dir(&mut self, dir: &Path) -> Result<(), IoError> {
        self.inner.remove_dir(dir)
    }

    fn file_len(&mut self, file: FileId) -> Result<u64, IoError> {
        self.inner.file_len(file)
    }

    fn buffer(&mut self, capacity: usize) -> AlignedBuf {
        let size =
            capacity.max(1).div_ceil(crate::io::PAGE_SIZE_BYTES) * crate::io::PAGE_SIZE_BYTES;
        if let Some(buf) = self.idle.get_mut(&size).and_then(Vec::pop) {
            self.idle_bytes -= size;
            return buf;
        }
        self.inner.buffer(capacity)
    }

    fn recycle(&mut self, buf: AlignedBuf) {
        let size = buf.capacity();
        if buf.is_registered() || size == 0 || self.idle_bytes + size > IDLE_BUFFER_BYTES_MAX {
            // The ring keeps its registered ones; the rest go back to the system.
            self.inner.recycle(buf);
            return;
        }
        self.idle_bytes += size;
        self.idle.entry(size).or_default().push(buf);
    }

    fn requeue(&mut self, completions: Vec<Completion>) {
        for c in completions {
            match self.take_owner(c.id) {
                Some(owner) => self.stash.push_back((owner, c)),
                None => self.early.push(c),
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{SimConfig, SimIo};

    #[test]
    fn idle_buffers_are_reused_and_bounded() {
        let mut io = ShardIo::new(Box::new(SimIo::new(SimConfig::default())));
        let a = io.buffer(64 << 10);
        let at = a.as_ptr();
        io.recycle(a);
        assert_eq!(io.idle_buffer_bytes(), 64 << 10);
        let again = io.buffer((64 << 10) - 100);
        assert_eq!(again.as_ptr(), at, "the idle buffer of that size is reused");
        assert_eq!(io.idle_buffer_bytes(), 0);
        // Beyond the bound, recycled buffers go back to the system.
        let many: Vec<AlignedBuf> = (0..(IDLE_BUFFER_BYTES_MAX >> 20) + 8)
            .map(|_| io.buffer(1 << 20))
            .collect();
        for b in many {
            io.recycle(b);
        }
        assert_eq!(io.idle_buffer_bytes(), IDLE_BUFFER_BYTES_MAX);
        io.recycle(again);
        assert_eq!(io.idle_buffer_bytes(), IDLE_BUFFER_BYTES_MAX);
    }
}
