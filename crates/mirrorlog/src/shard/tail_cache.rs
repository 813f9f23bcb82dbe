//! The shard's tail cache (design.md §Runtime, Redpanda's batch cache in spirit): the batches each append
//! stored, as stored (offsets and leader epoch stamped), kept in memory so that a consumer at
//! the tail never causes a device read. Filled on append only — a lagging reader's device
//! reads never enter it, so they cannot evict what tail readers use — bounded by
//! `tail_cache_bytes` per shard, evicted oldest first across the shard. Entries become
//! readable when durable: a read returns only batches below its bound (high watermark, LSO or
//! durable end), as every read does.
//!
//! A partition's entries are contiguous: each starts at the log end the previous one left. An
//! append the cache does not see (a stop's markers and barrier, written by the log itself)
//! breaks that and drops the partition's entries, as does every request that cuts or moves the
//! log (truncation, DeleteRecords, mirroring start, realignment).

use super::{Part, Shard};
use crate::api::EngineError;
use crate::format::{self, BatchIter, Offset};
use crate::log::{Collected, ReadResult};
use crate::producer_state::Origin;
use bytes::{Bytes, BytesMut};
use std::collections::VecDeque;

/// Default bytes of the tail cache per shard.
pub const TAIL_CACHE_BYTES_DEFAULT: usize = 64 << 20;

/// One append's stored batches.
pub(super) struct Cached {
    id: u64,
    /// The log end before the append (a gap before its first batch is covered).
    from: Offset,
    /// The log end after it.
    next: Offset,
    bytes: Bytes,
}

/// The shard-wide bound and eviction order.
pub(super) struct TailCache {
    cap_bytes: usize,
    bytes: usize,
    /// `(slot, id, len)` in append order; entries already dropped are skipped.
    order: VecDeque<(usize, u64, usize)>,
    live: usize,
    next_id: u64,
    pub(super) hits: u64,
}

impl TailCache {
    pub(super) fn new(cap_bytes: usize) -> Self {
        TailCache {
            cap_bytes,
            bytes: 0,
            order: VecDeque::new(),
            live: 0,
            next_id: 0,
            hits: 0,
        }
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// `records` as the log stored them: the batches from `first_offset` on, with the offsets a
/// client append was given and its leader epoch stamped (a copied append kept its own).
fn stored_copy(records: &Bytes, origin: Origin, first_offset: Offset, epoch: i32) -> Bytes {
    if matches!(origin, Origin::Client | Origin::Coordinator) {
        let mut copy = BytesMut::from(&records[..]);
        let mut next = first_offset;
        let mut at = 0usize;
        for b in BatchIter::new(records, 0) {
            let len = b.bytes().len();
            let delta = i64::from(b.header().last_offset_delta);
            if let Some(batch) = copy.get_mut(at..at + len) {
                // Whole, validated batches: stamping cannot fail.
                let _ = format::stamp_base_offset(batch, next);
                let _ = format::stamp_partition_leader_epoch(batch, epoch);
            }
            next = Offset(next.0 + delta + 1);
            at += len;
        }
        copy.freeze()
    } else {
        // A mirrored retry skipped the batches the log held: the rest went in.
        let skip = BatchIter::new(records, 0)
            .take_while(|b| b.header().last_offset() < first_offset)
            .map(|b| b.bytes().len())
            .sum::<usize>();
        records.slice(skip..)
    }
}

impl Shard {
    /// After an append to the partition in `slot` went in (staged, not yet durable): its
    /// stored batches join the cache. `from` is the log end before it.
    pub(super) fn cache_append(
        &mut self,
        slot: usize,
        from: Offset,
        records: &Bytes,
        origin: Origin,
        first_offset: Offset,
    ) {
        if self.tail.cap_bytes == 0 {
            return;
        }
        let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if part.tail.back().is_some_and(|c| c.next != from) {
            Self::drop_entries(&mut self.tail, part);
        }
        let bytes = stored_copy(records, origin, first_offset, part.log.leader_epoch());
        if bytes.len() > self.tail.cap_bytes {
            return Self::drop_entries(&mut self.tail, part);
        }
        let id = self.tail.next_id;
        self.tail.next_id += 1;
        self.tail.bytes += bytes.len();
        self.tail.live += 1;
        self.tail.order.push_back((slot, id, bytes.len()));
        part.tail.push_back(Cached {
            id,
            from,
            next: part.log.log_end(),
            bytes,
        });
        self.evict();
    }

    /// Drops the oldest entries until the cache fits.
    fn evict(&mut self) {
        while self.tail.bytes > self.tail.cap_bytes {
            let Some((slot, id, len)) = self.tail.order.pop_front() else {
                break;
            };
            let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if part.tail.front().is_some_and(|c| c.id == id) {
                part.tail.pop_front();
                self.tail.bytes -= len;
                self.tail.live -= 1;
            }
        }
        // Entries dropped with their partition leave their place in the order: compact it
        // when they are most of it.
        if self.tail.order.len() > 2 * self.tail.live + 64 {
            let slots = &self.slots;
            self.tail.order.retain(|&(slot, id, _)| {
                slots
                    .get(slot)
                    .and_then(Option::as_ref)
                    .is_some_and(|p| p.tail.iter().any(|c| c.id == id))
            });
        }
    }

    fn drop_entries(cache: &mut TailCache, part: &mut Part) {
        for c in part.tail.drain(..) {
            cache.bytes -= c.bytes.len();
            cache.live -= 1;
        }
    }

    /// Forgets the cached batches of `tp` and its read-ahead (its log was cut or moved).
    pub(super) fn forget_tail_of(&mut self, tp: &crate::api::TopicPartition) {
        let Some(&slot) = self.by_name.get(tp) else {
            return;
        };
        if let Some(part) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            Self::drop_entries(&mut self.tail, part);
        }
        self.drop_read_ahead(slot);
    }

    /// A read of the partition in `slot` answered from the cache, when the cache holds its
    /// offset (`None`: the log reads it).
    pub(super) fn read_cached(
        &mut self,
        slot: usize,
        request: &crate::api::ReadRequest,
    ) -> Option<Result<ReadResult, EngineError>> {
        let part = self.slots.get_mut(slot).and_then(Option::as_mut)?;
        let offset = request.offset;
        let log = &mut part.log;
        let (first, last_entry) = (part.tail.front()?, part.tail.back()?);
        // Only when the cache holds everything from `offset` to the log end (an append it did
        // not see leaves it short until the next one drops it).
        if offset < first.from
            || last_entry.next < log.log_end()
            || offset < log.log_start()
            || offset > log.log_end()
        {
            return None;
        }
        let upper = log.read_bound(request.isolation);
        // The entry holding `offset`: the first that ends past it.
        let start = part.tail.partition_point(|c| c.next <= offset);
        let floor = if request.min_one_batch { 0 } else { usize::MAX };
        // One append's batches are a slice of its entry (no copy); several are joined once.
        let mut records = Collected::default();
        let mut last = None;
        'entries: for c in part.tail.range(start..) {
            for b in BatchIter::new(&c.bytes, 0) {
                let h = b.header();
                if h.last_offset() < offset {
                    continue;
                }
                let size = b.bytes().len();
                if h.last_offset() >= upper
                    || (records.len() != floor && records.len() + size > request.max_bytes)
                {
                    break 'entries;
                }
                let at = b.position() as usize;
                records.push(&c.bytes, at, at + size);
                last = Some(h.last_offset());
            }
        }
        let result = log
            .read_result(
                &mut self.io,
                offset,
                records.finish(),
                last,
                request.isolation,
            )
            .map_err(|source| EngineError::Log {
                partition: part.tp.clone(),
                source,
            });
        self.tail.hits += 1;
        Some(result)
    }
}
