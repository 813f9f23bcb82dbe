//! The destination side of a mirrored partition: its appends in flight (pipelined, resolved in
//! order), the raise of its log start to the source's, its realignment at the source's log
//! start (design.md §Mirroring), its truncation where it diverges from the source (OffsetForLeaderEpoch,
//! KIP-1279's LOG_TRUNCATION), and its mode and end re-read from the engine. A whole fetch
//! answer, over many partitions, lands as one engine call ([`Local::land`]).
//!
//! Its methods only await the engine's calls, so any runtime (or none) drives them.

use super::backoff::Backoff;
use super::batches::{pieces, spans, whole_batches};
use super::epochs::Agreement;
use super::landing::{Landed, Landing};
use super::status::{lock, note_error, set_stalled, PartStatus};
use crate::engine::{Engine, EngineError, Mode, PartitionAppend, TopicPartition};
use crate::format::Offset;
use crate::log::LogError;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A partition's leader at the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    /// The leader's broker id.
    pub broker: i32,
    /// Its leader epoch (-1: the source's Metadata is older than v7).
    pub epoch: i32,
}

/// Appends in flight per partition while the next fetch is out.
pub const APPENDS_IN_FLIGHT_MAX: usize = 4;

/// One append in flight: its place in its answer's [`Landing`], and the offset it ends at.
#[derive(Debug)]
pub struct InFlight {
    /// The answer's appends.
    pub landing: Arc<Landing>,
    /// This partition's position in it.
    pub at: usize,
    /// The offset the append ends at.
    pub end: Offset,
    /// Its record bytes (`mirrorlog_mirror_bytes_written_total` once durable).
    pub bytes: u64,
    /// Its batches.
    pub batches: u64,
}

/// One append made of fetched batches, before it is sent.
#[derive(Debug)]
pub struct Piece {
    /// The append.
    pub append: PartitionAppend,
    /// The offset it ends at.
    pub end: Offset,
    /// Its batches.
    pub batches: u64,
}

/// What the fetcher keeps per partition.
pub struct Part {
    /// The partition (same name on both sides).
    pub tp: TopicPartition,
    /// The offset the next fetch asks for.
    pub next: Offset,
    /// Appends in flight, oldest first.
    pub in_flight: VecDeque<InFlight>,
    /// The local log start, as last known.
    pub log_start: Offset,
    /// The source's log start, once it is above ours (after a realignment at a batch base
    /// below it, or when the source's retention or DeleteRecords moved it): raise the local log
    /// start to this once the local log is durable past it, as a Kafka follower follows its
    /// leader's log start.
    pub raise_log_start: Option<Offset>,
    /// Mirroring from this mirror and not stalled.
    pub active: bool,
    /// Its leader at the source, from the last metadata.
    pub leader: Option<Leader>,
    /// Retry spacing after its errors.
    pub backoff: Backoff,
    /// In a request now out.
    pub busy: bool,
    /// Where the local log diverges from the source is to be found (OffsetForLeaderEpoch)
    /// before the next fetch: at start, when the source's leader or its epoch changed, and past
    /// the source's end.
    pub check: bool,
    /// The source answered out of range: its log start and end are to be found (ListOffsets).
    pub out_of_range: bool,
    /// Past the source's end: where to truncate to when the epochs find no divergence
    /// (Kafka's follower truncates to the leader's end).
    pub truncate_floor: Option<Offset>,
    /// The most the destination takes in one append, once it refused more
    /// (`AppendTooLarge`): fetched bytes then go in pieces of whole batches up to it.
    pub append_limit: Option<usize>,
    /// The partition's mode as last read from the engine (`None`: not read, or unknown).
    pub mode: Option<Mode>,
}

impl Part {
    /// A partition not yet read from the engine, the `index`th of its fetcher (which spreads
    /// the partitions' backoff jitter).
    pub fn new(tp: TopicPartition, index: usize) -> Self {
        let seed = 0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1);
        Part {
            tp,
            next: Offset(0),
            in_flight: VecDeque::new(),
            log_start: Offset(0),
            raise_log_start: None,
            active: false,
            leader: None,
            backoff: Backoff::new(seed),
            busy: false,
            check: true,
            out_of_range: false,
            truncate_floor: None,
            append_limit: None,
            mode: None,
        }
    }
}

/// What a source's answer says of one partition besides its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerHead {
    /// The source's high watermark (-1: not given).
    pub high_watermark: i64,
    /// The source's log start (-1: not given).
    pub log_start: i64,
    /// The answer carried no error.
    pub ok: bool,
}

/// One partition's answer without an error: where the source's log starts, and its records
/// (whole batches, the last perhaps cut by the source's byte limits).
#[derive(Debug, Clone)]
pub struct Answered {
    /// The source's log start (-1: not given).
    pub log_start: i64,
    /// The fetched bytes.
    pub records: bytes::Bytes,
}

/// The engine, the mirror's name and the status the admin surface reads.
pub struct Local<'a> {
    /// The engine.
    pub engine: &'a Engine,
    /// The mirror's name (the `source` of the partitions' mode).
    pub name: &'a str,
    /// Per-partition status.
    pub status: &'a Mutex<Vec<PartStatus>>,
    /// Where its landings report (`landing.rs`).
    pub landed: &'a Arc<Landed>,
}

impl Local<'_> {
    /// The appends of the whole batches of `records` from `part.next` on, to be made with the
    /// rest of its answer ([`Landing`]): one, or pieces of whole batches up to the most the
    /// destination takes at once once it refused more (`AppendTooLarge`); `part.next` moves
    /// past them, and the caller puts them in `part.in_flight` once made. Empty: nothing to
    /// append.
    ///
    /// A batch no source can have sent ([`super::batches::Impossible`]) stops this partition's
    /// mirror, with the reason in `GET /mirrors`; nothing of the answer is appended.
    pub fn fetched_appends(&self, i: usize, part: &mut Part, records: bytes::Bytes) -> Vec<Piece> {
        let (start, end, after, count) = match whole_batches(&records, part.next) {
            Ok(w) => w,
            Err(impossible) => {
                part.active = false;
                set_stalled(
                    self.status,
                    i,
                    None,
                    &format!("the source sent an impossible batch: {}", impossible.0),
                );
                return Vec::new();
            }
        };
        if start >= end {
            return Vec::new();
        }
        let offsets = u64::try_from(after.0 - part.next.0).unwrap_or(0);
        if let Some(s) = lock(self.status).get_mut(i) {
            s.bytes_fetched += (end - start) as u64;
            s.offsets_fetched += offsets;
        }
        let whole = records.slice(start..end);
        let cut = match part.append_limit {
            Some(limit) if whole.len() > limit => pieces(&whole, limit),
            // Within the destination's limit (the common case): one piece, no second walk.
            _ => vec![(0, whole.len(), count, after)],
        };
        let mut out = Vec::new();
        for (from, to, batches, piece_end) in cut {
            // Made to follow the appends in flight: when one of them is refused, this one is
            // refused too instead of landing past the hole the refused one leaves.
            let append =
                PartitionAppend::new(part.tp.clone(), whole.slice(from..to)).following(part.next);
            part.next = piece_end.max(part.next);
            out.push(Piece {
                append,
                end: part.next,
                batches: batches as u64,
            });
        }
        part.next = part.next.max(after);
        out
    }

    /// Notes the source's answer for partition `i` at `now`: its high watermark and log start
    /// (-1: not given), and whether it carried an error. An answer without one counts for the
    /// lag in time ([`PartStatus::note_answer`]) and ends the partition's retries.
    pub fn note_answered(&self, i: usize, answer: &AnswerHead, now: Instant) {
        if let Some(s) = lock(self.status).get_mut(i) {
            s.fetches += 1;
            if answer.high_watermark >= 0 {
                s.source_high_watermark = answer.high_watermark;
            }
            if answer.log_start >= 0 {
                s.source_log_start = answer.log_start;
            }
            if answer.ok {
                s.retries = 0;
                s.backoff_until = None;
                s.note_answer(answer.high_watermark, now);
            }
        }
    }

    /// Lands one fetch answer that arrived at `arrived`: each partition's whole batches past
    /// its `next`, all of them as one engine call ([`Landing`]), each partition's append put
    /// in its `in_flight`; each partition's log start follows the source's. `answered` holds
    /// the partitions the source answered without an error (their answers already noted with
    /// [`Local::note_answered`]), by index into `parts`.
    pub fn land(&self, parts: &mut [Part], answered: Vec<(usize, Answered)>, arrived: Instant) {
        let mut pieces = Vec::new();
        for (i, a) in answered {
            let Some(part) = parts.get_mut(i) else {
                continue;
            };
            part.backoff.reset();
            pieces.extend(
                self.fetched_appends(i, part, a.records)
                    .into_iter()
                    .map(|p| (i, p)),
            );
            if a.log_start >= 0 {
                Local::follow_log_start(part, Offset(a.log_start));
            }
        }
        for (i, in_flight) in self.start_landing(pieces, arrived) {
            if let Some(part) = parts.get_mut(i) {
                part.in_flight.push_back(in_flight);
            }
        }
    }

    /// Makes the appends of the whole batches of `records` from `part.next` on, alone (a
    /// realignment's, outside any answer's landing).
    fn append_fetched(&self, i: usize, part: &mut Part, records: bytes::Bytes) {
        let pieces = self.fetched_appends(i, part, records);
        let landed =
            self.start_landing(pieces.into_iter().map(|p| (i, p)).collect(), Instant::now());
        part.in_flight.extend(landed.into_iter().map(|(_, f)| f));
    }

    /// Sends `pieces` (each with its partition's index) as one landing: each one's append in
    /// flight, with its index, in the order given (none: nothing sent).
    fn start_landing(
        &self,
        pieces: Vec<(usize, Piece)>,
        arrived: Instant,
    ) -> Vec<(usize, InFlight)> {
        if pieces.is_empty() {
            return Vec::new();
        }
        let mut placed = Vec::with_capacity(pieces.len());
        let appends = pieces
            .into_iter()
            .map(|(i, p)| {
                placed.push((i, p.end, p.append.batches.len() as u64, p.batches));
                p.append
            })
            .collect();
        let landing = Landing::start(self.engine, appends, arrived, self.landed.clone());
        placed
            .into_iter()
            .enumerate()
            .map(|(at, (i, end, bytes, batches))| {
                let in_flight = InFlight {
                    landing: landing.clone(),
                    at,
                    end,
                    bytes,
                    batches,
                };
                (i, in_flight)
            })
            .collect()
    }

    /// Resolves appends in flight: all of them (`all`), or those done; then a due raise of the
    /// log start.
    pub async fn settle(&self, i: usize, part: &mut Part, all: bool) {
        self.settle_appends(i, part, all).await;
        // Nothing in flight: the local log is durable to `next`.
        if part.in_flight.is_empty() && part.raise_log_start.is_some_and(|ls| part.next >= ls) {
            if let Some(ls) = part.raise_log_start.take() {
                self.raise_log_start(i, part, ls).await;
            }
        }
    }

    async fn settle_appends(&self, i: usize, part: &mut Part, all: bool) {
        while let Some(front) = part.in_flight.front() {
            let result = if all {
                Some(front.landing.take(front.at).await)
            } else {
                front.landing.try_take(front.at)
            };
            let Some(result) = result else { break };
            let (end, bytes, batches) = part
                .in_flight
                .pop_front()
                .map_or((part.next, 0, 0), |f| (f.end, f.bytes, f.batches));
            match result {
                Ok(out) => {
                    // Durable past the source's log start: raise the local log start now, not
                    // when the pipeline next drains (under steady load it may never), and
                    // before the status reports the partition past it.
                    if part.raise_log_start.is_some_and(|ls| end >= ls) {
                        if let Some(ls) = part.raise_log_start.take() {
                            self.raise_log_start(i, part, ls).await;
                        }
                    }
                    if let Some(s) = lock(self.status).get_mut(i) {
                        s.batches_appended += batches;
                        s.bytes_written += bytes;
                        s.mirrored_end = s
                            .mirrored_end
                            .max(end.0.max(out.last_offset.0.saturating_add(1)));
                    }
                }
                Err(e) => {
                    // Everything after a refused append is void: drop it and start again from
                    // the durable end.
                    for f in part.in_flight.drain(..) {
                        let _ = f.landing.take(f.at).await;
                    }
                    self.on_append_error(i, part, &e).await;
                    break;
                }
            }
        }
    }

    /// Notes the source's log start from a fetch answer: a raise is due when it is above ours.
    pub fn follow_log_start(part: &mut Part, source: Offset) {
        if source > part.log_start {
            part.raise_log_start = part.raise_log_start.max(Some(source));
        }
    }

    async fn raise_log_start(&self, i: usize, part: &mut Part, log_start: Offset) {
        match self.engine.delete_records(&part.tp, log_start).await {
            Ok(now) => part.log_start = now,
            Err(e) => note_error(
                self.status,
                Some(i),
                "local",
                &format!("raising the log start: {e}"),
            ),
        }
    }

    /// A refused append: noted, the partition re-read (it may have left mirroring), and its
    /// next fetch backed off (a refusal that repeats — a batch larger than the local append
    /// buffer until the config sync raises it — must not spin).
    async fn on_append_error(&self, i: usize, part: &mut Part, e: &EngineError) {
        note_error(self.status, Some(i), "local", &e.to_string());
        if let EngineError::Log {
            source: LogError::AppendTooLarge { limit, .. },
            ..
        } = e
        {
            // The destination takes no more than this in one append: fetched bytes go in
            // pieces from now on (else the same fetch would be refused for ever).
            part.append_limit = Some(*limit);
        }
        let now = Instant::now();
        part.backoff.fail(now);
        if let Some(s) = lock(self.status).get_mut(i) {
            s.retries = part.backoff.failures();
            s.backoff_until = part.backoff.waiting_until(now);
        }
        self.reread(i, part).await;
    }

    /// Re-reads the partition's mode, start and end from the engine (nothing in flight).
    pub async fn reread(&self, i: usize, part: &mut Part) {
        match self.engine.state(&part.tp).await {
            Ok(s) => {
                let mirroring =
                    matches!(&s.mode, Mode::Mirroring { source } if *source == self.name);
                let stalled = lock(self.status)
                    .get(i)
                    .is_some_and(|x| x.stalled.is_some());
                part.active = mirroring && !stalled;
                part.mode = Some(s.mode.clone());
                part.next = s.log_end;
                part.log_start = s.log_start;
                if let Some(x) = lock(self.status).get_mut(i) {
                    x.mirrored_end = s.log_end.0;
                }
            }
            Err(_) => {
                part.active = false;
                part.mode = None;
            }
        }
    }

    /// The local newest leader epoch, to ask the source where it ends (`None`: an empty log,
    /// nothing to check).
    pub async fn newest_epoch(&self, i: usize, part: &mut Part) -> Option<i32> {
        self.settle(i, part, true).await;
        match self.engine.state(&part.tp).await {
            Ok(s) if s.log_end > s.log_start => {
                part.next = s.log_end;
                s.latest_epoch
            }
            _ => None,
        }
    }

    /// The source's answer to OffsetForLeaderEpoch for the local newest epoch: `epoch` (the
    /// largest the source has at or below ours) ending at `end`. Truncates where the two logs
    /// diverge, as Kafka's follower does (`AbstractFetcherThread.getOffsetTruncationState`):
    /// when the local log knows `epoch` too, at `end`; when it does not, at its own end of the
    /// largest epoch below `epoch`, and asks again. Past the source's end with no divergence
    /// found, at the source's end. A source that knows no epoch at or below ours holds another
    /// log (a recreated topic): the partition stalls with the reason, nothing is truncated.
    pub async fn truncate_where_diverged(&self, i: usize, part: &mut Part, epoch: i32, end: i64) {
        let Ok(state) = self.engine.state(&part.tp).await else {
            part.active = false;
            return;
        };
        let log_end = state.log_end;
        if end < 0 || epoch < 0 {
            part.check = false;
            if let Some(floor) = part.truncate_floor.take() {
                self.truncate(i, part, floor.min(log_end), log_end).await;
                return;
            }
            let reason = format!(
                "the source knows no leader epoch at or below this partition's newest ({}): it holds another log (a recreated topic?); stop the mirror and start it again to truncate",
                state.latest_epoch.unwrap_or(-1)
            );
            part.active = false;
            set_stalled(self.status, i, None, &reason);
            return;
        }
        let local = match self.engine.epoch_end_offset(&part.tp, epoch).await {
            Ok(l) => l,
            Err(e) => {
                note_error(
                    self.status,
                    Some(i),
                    "local",
                    &format!("epoch end offset: {e}"),
                );
                return;
            }
        };
        let (mut target, done) = match super::epochs::agreement(epoch, end, local, log_end) {
            Agreement::Known(at) => (at, true),
            Agreement::AtMost { end: at, .. } => (at, false),
            // Handled above (a negative epoch or end).
            Agreement::NoCommonEpoch => (log_end, true),
        };
        if done && target >= log_end {
            if let Some(floor) = part.truncate_floor {
                target = floor.min(log_end);
            }
        }
        if done {
            part.truncate_floor = None;
        }
        part.check = !done;
        self.truncate(i, part, target, log_end).await;
    }

    async fn truncate(&self, i: usize, part: &mut Part, target: Offset, log_end: Offset) {
        if target >= log_end {
            part.next = log_end;
            return;
        }
        let target = target.max(part.log_start);
        match self.engine.truncate_to(&part.tp, target).await {
            Ok(end) => {
                tracing::warn!(mirror = %self.name, partition = %part.tp, from = log_end.0, to = end.0, "truncated where the local log diverges from the source");
                part.next = end;
                if let Some(s) = lock(self.status).get_mut(i) {
                    s.truncations += 1;
                    s.mirrored_end = end.0;
                }
            }
            Err(e) => {
                note_error(
                    self.status,
                    Some(i),
                    "local",
                    &format!("truncating to {}: {e}", target.0),
                );
                self.reread(i, part).await;
            }
        }
    }

    /// Realigns a partition whose end is below the source's log start `log_start` (design.md §Mirroring):
    /// `records` is the source's fetch at `log_start`, whose first batch's base is where the
    /// local log starts; that batch is appended alone, and once durable the local log start is
    /// raised to the source's, before anything past it is appended.
    pub async fn realign(
        &self,
        i: usize,
        part: &mut Part,
        log_start: Offset,
        records: bytes::Bytes,
    ) {
        for f in part.in_flight.drain(..) {
            let _ = f.landing.take(f.at).await;
        }
        let base = if records.len() >= 8 {
            Offset(i64::from_be_bytes(records[..8].try_into().unwrap_or([0; 8])).min(log_start.0))
        } else {
            log_start
        };
        let base = base.max(part.next);
        if base > part.next {
            if let Err(e) = self.engine.realign_mirror(&part.tp, base).await {
                note_error(
                    self.status,
                    Some(i),
                    "local",
                    &format!("realigning at {}: {e}", base.0),
                );
                return;
            }
            part.log_start = base;
        }
        part.next = base;
        part.raise_log_start = (base < log_start).then_some(log_start);
        // Counted before anything is appended, so a caller that sees the log end move sees the
        // realignment too.
        if let Some(s) = lock(self.status).get_mut(i) {
            s.realigns += 1;
            s.mirrored_end = s.mirrored_end.max(base.0);
        }
        tracing::info!(mirror = %self.name, partition = %part.tp, at = base.0, source_log_start = log_start.0, "realigned at the source's log start");
        let next = part.next.0;
        let first_end = spans(&records)
            .map_while(Result::ok)
            .find(|s| s.last >= next)
            .map(|s| s.end);
        match first_end {
            Some(end) if part.raise_log_start.is_some() => {
                self.append_fetched(i, part, records.slice(..end));
                self.settle(i, part, true).await;
                // Refused (the partition was reset to its durable end): the next fetch retries.
                if part.raise_log_start.is_none() && part.active {
                    self.append_fetched(i, part, records.slice(end..));
                }
            }
            _ => self.append_fetched(i, part, records),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineConfig, MirrorStart, Origin, PartitionConfig, StartMirroring};
    use crate::mirror::run::block_on;

    fn batch(base: i64, n: usize, epoch: i32) -> bytes::Bytes {
        bytes::Bytes::from(super::super::batches::test_batch(base, n, epoch))
    }

    /// One answer's appends to two partitions are one landing: both durable together, the
    /// fetcher woken and the time noted; the next answer's append follows the first; a refused
    /// append voids the ones after it in its partition (and only there), and the partition is
    /// read again from its durable end.
    #[test]
    fn an_answer_lands_as_one_call_and_a_refusal_voids_what_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let engine =
            Engine::open(EngineConfig::new(dir.path()).shards(2).pin_threads(false)).unwrap();
        let (a, b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let start = || StartMirroring {
            source: "src".into(),
            truncate_to: MirrorStart::LastStableOffset,
        };
        for tp in [&a, &b] {
            engine
                .create_partition(tp, PartitionConfig::default())
                .wait()
                .unwrap();
            engine.start_mirroring(tp, start()).wait().unwrap();
        }
        let status = Mutex::new(vec![PartStatus::new(a.clone()), PartStatus::new(b.clone())]);
        let landed = Arc::new(Landed::default());
        let local = Local {
            engine: &engine,
            name: "src",
            status: &status,
            landed: &landed,
        };
        let mut parts = [Part::new(a.clone(), 0), Part::new(b.clone(), 1)];
        block_on(async {
            // One answer: a batch for each partition, noted and landed as the fetcher does.
            let land = |parts: &mut [Part], batches: [(usize, bytes::Bytes); 2]| {
                let now = Instant::now();
                let mut answered = Vec::new();
                for (i, records) in batches {
                    let head = AnswerHead {
                        high_watermark: 100,
                        log_start: 0,
                        ok: true,
                    };
                    local.note_answered(i, &head, now);
                    answered.push((
                        i,
                        Answered {
                            log_start: 0,
                            records,
                        },
                    ));
                }
                local.land(parts, answered, now);
            };
            land(&mut parts, [(0, batch(0, 10, 1)), (1, batch(0, 5, 1))]);
            assert!(parts.iter().all(|p| p.in_flight.len() == 1));
            landed.landed().await;
            for (i, part) in parts.iter_mut().enumerate() {
                local.settle(i, part, false).await;
                assert!(part.in_flight.is_empty(), "resolved without waiting");
            }
            assert_eq!(landed.summary().answers, 1);
            let ends: Vec<i64> = lock(&status).iter().map(|s| s.mirrored_end).collect();
            assert_eq!(ends, [10, 5]);
            // Partition 1 is paused under the fetcher; its next two appends are refused
            // (the second follows the first), partition 0's land.
            engine.pause_mirroring(&b).await.unwrap();
            land(&mut parts, [(0, batch(10, 10, 1)), (1, batch(5, 5, 1))]);
            land(&mut parts, [(0, batch(20, 10, 1)), (1, batch(10, 5, 1))]);
            for (i, part) in parts.iter_mut().enumerate() {
                local.settle(i, part, true).await;
                assert!(part.in_flight.is_empty());
            }
        });
        assert_eq!(landed.summary().answers, 3, "each answer timed once");
        assert_eq!(lock(&status)[0].fetches, 3);
        let st = lock(&status);
        assert_eq!(st[0].mirrored_end, 30);
        assert_eq!(st[0].errors, 0);
        assert_eq!(
            st[1].errors, 1,
            "one refusal noted, the void one after it is not"
        );
        drop(st);
        assert!(!parts[1].active, "read again: paused, not fetched");
        assert_eq!(parts[1].next, Offset(5), "read again from its durable end");
        assert_eq!(engine.state(&a).wait().unwrap().log_end, Offset(30));
        assert_eq!(engine.state(&b).wait().unwrap().log_end, Offset(5));
        engine.close().unwrap();
    }

    /// Kafka's follower truncation (`getOffsetTruncationState`) on a local log of epochs 1
    /// (offsets 0-9) and 3 (10-19): a source answering epoch 2 (which the local log does not
    /// know) truncates to the local end of epoch 1 and asks again; an answer for a known epoch
    /// truncates to its end; past the source's end with no divergence, to the source's end; a
    /// source with no epoch at or below ours stalls the partition, truncating nothing.
    #[test]
    fn divergence_is_truncated_as_a_kafka_follower_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let engine =
            Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
        let tp = TopicPartition::new("t", 0);
        engine
            .create_partition(&tp, PartitionConfig::default())
            .wait()
            .unwrap();
        let start = StartMirroring {
            source: "src".into(),
            truncate_to: MirrorStart::LastStableOffset,
        };
        engine.start_mirroring(&tp, start).wait().unwrap();
        let fill = |from: i64| {
            if from < 10 {
                engine
                    .append(&tp, batch(0, 10, 1), Origin::Mirror)
                    .wait()
                    .unwrap();
            }
            engine
                .append(&tp, batch(10, 10, 3), Origin::Mirror)
                .wait()
                .unwrap();
        };
        fill(0);
        let status = Mutex::new(vec![PartStatus::new(tp.clone())]);
        let landed = Arc::new(Landed::default());
        let local = Local {
            engine: &engine,
            name: "src",
            status: &status,
            landed: &landed,
        };
        let mut part = Part::new(tp.clone(), 1);
        part.active = true;
        let end = |e: &Engine| e.state(&tp).wait().unwrap().log_end;
        block_on(async {
            // Epoch 2 is not known here: to the end of epoch 1, and ask again.
            local.truncate_where_diverged(0, &mut part, 2, 15).await;
            assert_eq!((end(&engine), part.check), (Offset(10), true));
            // Epoch 1 is: its end at the source (10) is where the logs agree.
            local.truncate_where_diverged(0, &mut part, 1, 10).await;
            assert_eq!((end(&engine), part.check), (Offset(10), false));
        });
        fill(10);
        block_on(async {
            // The same epoch ending at 15 at the source: truncated to 15.
            part.check = true;
            local.truncate_where_diverged(0, &mut part, 3, 15).await;
            assert_eq!((end(&engine), part.check), (Offset(15), false));
            // Past the source's end (12) with the epochs agreeing to our end: to its end.
            part.truncate_floor = Some(Offset(12));
            local.truncate_where_diverged(0, &mut part, 3, 100).await;
            assert_eq!((end(&engine), part.truncate_floor), (Offset(12), None));
            // No epoch in common: stalled with the reason, nothing truncated.
            local.truncate_where_diverged(0, &mut part, -1, -1).await;
            assert_eq!(end(&engine), Offset(12));
            assert!(!part.active);
        });
        let st = lock(&status);
        assert_eq!(st[0].truncations, 3);
        assert!(st[0]
            .stalled
            .as_deref()
            .is_some_and(|s| s.contains("another log")));
        drop(st);
        engine.close().unwrap();
    }
}
