//! The mirror fetcher of one source cluster: the Fetch protocol to the source broker
//! (READ_UNCOMMITTED, from the local log end, long-poll), the fetched batches appended as-is as
//! `Origin::Mirror`, pipelined: the next fetch goes out as soon as the previous answer's appends
//! are queued, at the offsets they will end at, while up to [`APPENDS_IN_FLIGHT_MAX`] appends per
//! partition commit.
//!
//! Per partition:
//! - batches wholly below the next offset (a retry's overlap) are dropped before appending;
//!   a trailing partial batch (a source cutting at `max_bytes`) is left for the next fetch;
//! - `OFFSET_OUT_OF_RANGE` below the source's log start (its retention or DeleteRecords passed
//!   us) realigns the partition (SPEC §3): the batch holding the source's log start is fetched,
//!   the local log is started at that batch's base (`realign_mirror`), and once that batch is
//!   durable the local log start is raised to the source's (`delete_records`); realigns are
//!   counted;
//! - the source's log start, in every fetch answer, is followed as a Kafka follower follows
//!   its leader's: once the local log is durable past it, the local log start is raised to it
//!   (a restart between a realignment and its raise, or the source's later retention or
//!   DeleteRecords, is caught up this way);
//! - `OFFSET_OUT_OF_RANGE` past the source's end (the source lost records: it was truncated or
//!   replaced) stalls the partition with the reason, for the operator;
//! - an append the destination refuses because the partition left mirroring (paused, stopped,
//!   failed) drops it from the fetch until the operator acts.
//!
//! Connection errors reconnect with exponential backoff (10 ms to 1 s), so a source broker that
//! is killed and restarted is picked up where the destination's log ends.

use super::PartStatus;
use crate::client::Client;
use crate::handlers::topic_name;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, RequestKind, ResponseKind};
use mirrorlog::engine::{AppendOutcome, Call, Engine, EngineError, Mode, Origin, TopicPartition};
use mirrorlog::format::{
    Offset, BASE_OFFSET_POS, BATCH_HEADER_SIZE_BYTES, BATCH_LENGTH_MIN, LAST_OFFSET_DELTA_POS,
    LENGTH_POS, LOG_OVERHEAD_BYTES,
};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Appends in flight per partition while the next fetch is out.
pub const APPENDS_IN_FLIGHT_MAX: usize = 4;
/// Bytes asked per partition per fetch.
pub const PARTITION_FETCH_BYTES: i32 = 1 << 20;
/// Bytes asked per fetch.
pub const FETCH_BYTES: i32 = 16 << 20;
/// How long a fetch at the source's end waits for data.
pub const FETCH_WAIT_MS: i32 = 500;
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Everything the fetcher needs.
pub struct FetcherArgs {
    /// The mirror's name (the `source` of the partitions' mode).
    pub name: String,
    /// The source broker.
    pub bootstrap: String,
    /// The engine.
    pub engine: Arc<Engine>,
    /// Per-partition status, shared with the admin surface.
    pub status: Arc<Mutex<Vec<PartStatus>>>,
    /// `true` stops the fetcher (after its appends in flight resolve).
    pub stop: watch::Receiver<bool>,
}

struct Part {
    tp: TopicPartition,
    /// The offset the next fetch asks for.
    next: Offset,
    in_flight: VecDeque<(Call<AppendOutcome>, Offset)>,
    /// The local log start, as last known.
    log_start: Offset,
    /// The source's log start, once it is above ours (after a realignment at a batch base
    /// below it, or when the source's retention or DeleteRecords moved it): raise the local log
    /// start to this once the local log is durable past it, as a Kafka follower follows its
    /// leader's log start.
    raise_log_start: Option<Offset>,
    active: bool,
}

fn lock(s: &Mutex<Vec<PartStatus>>) -> std::sync::MutexGuard<'_, Vec<PartStatus>> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs until `stop`; returns once every append it started has resolved.
pub async fn run(mut args: FetcherArgs) {
    let mut parts: Vec<Part> = lock(&args.status)
        .iter()
        .map(|s| Part {
            tp: s.tp.clone(),
            next: Offset(0),
            in_flight: VecDeque::new(),
            log_start: Offset(0),
            raise_log_start: None,
            active: false,
        })
        .collect();
    let mut backoff = BACKOFF_MIN;
    'connect: while !*args.stop.borrow() {
        refresh(&args, &mut parts).await;
        let mut client = match Client::connect(&args.bootstrap).await {
            Ok(c) => c,
            Err(e) => {
                note_error(&args.status, None, &e.0);
                if wait_or_stop(&mut args.stop, backoff).await {
                    break;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let version = match client.version(ApiKey::Fetch, 4, 12) {
            Ok(v) => v,
            Err(e) => {
                note_error(&args.status, None, &e.0);
                if wait_or_stop(&mut args.stop, BACKOFF_MAX).await {
                    break;
                }
                continue;
            }
        };
        loop {
            if *args.stop.borrow() {
                break 'connect;
            }
            settle(&args, &mut parts, false).await;
            if !parts.iter().any(|p| p.active) {
                // Nothing to fetch (all paused or stopped): look again shortly.
                if wait_or_stop(&mut args.stop, Duration::from_millis(200)).await {
                    break 'connect;
                }
                refresh(&args, &mut parts).await;
                continue;
            }
            if client.in_flight() == 0 {
                if let Err(e) = client
                    .send(ApiKey::Fetch, version, fetch_request(&parts))
                    .await
                {
                    note_error(&args.status, None, &e.0);
                    continue 'connect;
                }
            }
            let answer = tokio::select! {
                a = client.recv() => a,
                _ = args.stop.changed() => break 'connect,
            };
            let resp = match answer {
                Ok(ResponseKind::Fetch(f)) => f,
                Ok(_) => {
                    note_error(&args.status, None, "Fetch answered with another API");
                    continue 'connect;
                }
                Err(e) => {
                    note_error(&args.status, None, &e.0);
                    if wait_or_stop(&mut args.stop, backoff).await {
                        break 'connect;
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue 'connect;
                }
            };
            backoff = BACKOFF_MIN;
            if resp.error_code != 0 {
                note_error(
                    &args.status,
                    None,
                    &format!("fetch error {}", resp.error_code),
                );
                if wait_or_stop(&mut args.stop, BACKOFF_MAX).await {
                    break 'connect;
                }
                continue;
            }
            let by_tp = index(&parts);
            let mut realign = Vec::new();
            for t in resp.responses {
                let name = t.topic.0.to_string();
                for pd in t.partitions {
                    let Some(&i) = by_tp.get(&(name.clone(), pd.partition_index)) else {
                        continue;
                    };
                    let part = &mut parts[i];
                    if !part.active {
                        continue;
                    }
                    {
                        let mut st = lock(&args.status);
                        if let Some(s) = st.get_mut(i) {
                            s.fetches += 1;
                            if pd.high_watermark >= 0 {
                                s.source_high_watermark = pd.high_watermark;
                            }
                            if pd.log_start_offset >= 0 {
                                s.source_log_start = pd.log_start_offset;
                            }
                        }
                    }
                    match pd.error_code {
                        0 => {
                            let records = pd.records.unwrap_or_default();
                            append_fetched(&args, i, part, records);
                            follow_log_start(part, Offset(pd.log_start_offset));
                        }
                        c if c == ResponseError::OffsetOutOfRange.code() => {
                            if pd.log_start_offset > part.next.0 {
                                realign.push((i, Offset(pd.log_start_offset)));
                            } else {
                                let reason = format!(
                                    "the source's log ends at {} below the destination's {}: it lost records; restart mirroring with a truncation",
                                    pd.high_watermark, part.next.0
                                );
                                part.active = false;
                                set_stalled(&args.status, i, &reason);
                            }
                        }
                        c => note_error(
                            &args.status,
                            Some(i),
                            &format!("source partition error {c}"),
                        ),
                    }
                }
            }
            // Pipelining: the next fetch goes out now, at the offsets the queued appends end at.
            if realign.is_empty() {
                if let Err(e) = client
                    .send(ApiKey::Fetch, version, fetch_request(&parts))
                    .await
                {
                    note_error(&args.status, None, &e.0);
                    continue 'connect;
                }
            } else {
                for (i, log_start) in realign {
                    realign_part(&args, &mut client, version, &mut parts[i], i, log_start).await;
                }
            }
        }
    }
    settle(&args, &mut parts, true).await;
}

/// Waits `d` or until stopped; whether stopped.
async fn wait_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

fn index(parts: &[Part]) -> HashMap<(String, i32), usize> {
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.tp.topic.clone(), p.tp.partition), i))
        .collect()
}

fn fetch_request(parts: &[Part]) -> RequestKind {
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = FETCH_WAIT_MS;
    r.min_bytes = 1;
    r.max_bytes = FETCH_BYTES;
    r.isolation_level = 0;
    r.session_id = 0;
    r.session_epoch = -1;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in parts
        .iter()
        .filter(|p| p.active && p.in_flight.len() < APPENDS_IN_FLIGHT_MAX)
    {
        if topics
            .last()
            .is_none_or(|t| t.topic.0.as_str() != p.tp.topic)
        {
            let mut t = FetchTopic::default();
            t.topic = topic_name(&p.tp.topic);
            topics.push(t);
        }
        let mut fp = FetchPartition::default();
        fp.partition = p.tp.partition;
        fp.fetch_offset = p.next.0;
        fp.partition_max_bytes = PARTITION_FETCH_BYTES;
        fp.current_leader_epoch = -1;
        fp.last_fetched_epoch = -1;
        fp.log_start_offset = -1;
        if let Some(t) = topics.last_mut() {
            t.partitions.push(fp);
        }
    }
    r.topics = topics;
    RequestKind::Fetch(r)
}

/// One whole batch in a fetched byte range, from its header: where it is and its last offset.
struct Span {
    pos: usize,
    end: usize,
    last: i64,
}

/// The whole batches of `records`, in order, up to the first cut or malformed header. Only the
/// headers' offsets and lengths are read: the engine validates every batch (CRC included) when
/// it appends them, so checking here would do that work twice.
fn spans(records: &[u8]) -> impl Iterator<Item = Span> + '_ {
    let be_i64 = |at: usize| {
        records
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(i64::from_be_bytes)
    };
    let be_i32 = |at: usize| {
        records
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(i32::from_be_bytes)
    };
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if records.len() < pos + BATCH_HEADER_SIZE_BYTES {
            return None;
        }
        let base = be_i64(pos + BASE_OFFSET_POS)?;
        let len = be_i32(pos + LENGTH_POS).filter(|&l| l >= BATCH_LENGTH_MIN)?;
        let delta = be_i32(pos + LAST_OFFSET_DELTA_POS)?;
        let end = pos + LOG_OVERHEAD_BYTES + usize::try_from(len).ok()?;
        if end > records.len() {
            return None;
        }
        let span = Span {
            pos,
            end,
            last: base + i64::from(delta),
        };
        pos = end;
        Some(span)
    })
}

/// The whole batches of `records` from `next` on: (start, end) byte range and the offset after
/// the last one.
fn whole_batches(records: &[u8], next: Offset) -> (usize, usize, Offset) {
    let (mut start, mut end, mut after) = (None, 0usize, next);
    for s in spans(records) {
        if s.last >= next.0 {
            start.get_or_insert(s.pos);
            after = Offset(s.last + 1);
        }
        end = s.end;
    }
    let start = start.unwrap_or(end);
    (start, end.max(start), after)
}

fn append_fetched(args: &FetcherArgs, i: usize, part: &mut Part, records: bytes::Bytes) {
    let (start, end, after) = whole_batches(&records, part.next);
    if start >= end {
        return;
    }
    let call = args
        .engine
        .append(&part.tp, records.slice(start..end), Origin::Mirror);
    part.in_flight.push_back((call, after));
    part.next = after;
    let mut st = lock(&args.status);
    if let Some(s) = st.get_mut(i) {
        s.bytes_fetched += (end - start) as u64;
    }
}

/// Resolves appends in flight: all of them (`all`), or those done plus the oldest of any
/// partition at its limit. A refused append resets the partition to its durable end.
async fn settle(args: &FetcherArgs, parts: &mut [Part], all: bool) {
    for (i, part) in parts.iter_mut().enumerate() {
        settle_part(args, i, part, all).await;
    }
}

async fn settle_part(args: &FetcherArgs, i: usize, part: &mut Part, all: bool) {
    settle_appends(args, i, part, all).await;
    // Nothing in flight: the local log is durable to `next`.
    if part.in_flight.is_empty() && part.raise_log_start.is_some_and(|ls| part.next >= ls) {
        if let Some(ls) = part.raise_log_start.take() {
            raise_log_start(args, i, part, ls).await;
        }
    }
}

async fn settle_appends(args: &FetcherArgs, i: usize, part: &mut Part, all: bool) {
    loop {
        let must = all || part.in_flight.len() >= APPENDS_IN_FLIGHT_MAX;
        let Some((call, _)) = part.in_flight.front_mut() else {
            break;
        };
        let result = if must {
            let (call, end) = part.in_flight.pop_front().expect("front exists");
            Some((call.await, end))
        } else {
            match call.try_take() {
                Some(r) => {
                    let (_, end) = part.in_flight.pop_front().expect("front exists");
                    Some((r, end))
                }
                None => None,
            }
        };
        let Some((result, end)) = result else { break };
        match result {
            Ok(out) => {
                // Durable past the source's log start: raise the local log start now, not
                // when the pipeline next drains (under steady load it may never), and before
                // the status reports the partition past it.
                if part.raise_log_start.is_some_and(|ls| end >= ls) {
                    if let Some(ls) = part.raise_log_start.take() {
                        raise_log_start(args, i, part, ls).await;
                    }
                }
                let mut st = lock(&args.status);
                if let Some(s) = st.get_mut(i) {
                    s.batches_appended += 1;
                    s.mirrored_end = s.mirrored_end.max(end.0.max(out.last_offset.0 + 1));
                }
            }
            Err(e) => {
                // Everything after a refused append is void: drop it and start again from
                // the durable end.
                for (c, _) in part.in_flight.drain(..) {
                    let _ = c.await;
                }
                on_append_error(args, i, part, &e).await;
                break;
            }
        }
    }
}

/// Notes the source's log start from a fetch answer: a raise is due when it is above ours.
fn follow_log_start(part: &mut Part, source: Offset) {
    if source > part.log_start {
        part.raise_log_start = part.raise_log_start.max(Some(source));
    }
}

async fn raise_log_start(args: &FetcherArgs, i: usize, part: &mut Part, log_start: Offset) {
    match args.engine.delete_records(&part.tp, log_start).await {
        Ok(now) => part.log_start = now,
        Err(e) => note_error(
            &args.status,
            Some(i),
            &format!("raising the log start: {e}"),
        ),
    }
}

async fn on_append_error(args: &FetcherArgs, i: usize, part: &mut Part, e: &EngineError) {
    note_error(&args.status, Some(i), &e.to_string());
    match args.engine.state(&part.tp).await {
        Ok(s) => {
            part.next = s.log_end;
            part.log_start = s.log_start;
            part.active = matches!(&s.mode, Mode::Mirroring { source } if *source == args.name);
            let mut st = lock(&args.status);
            if let Some(x) = st.get_mut(i) {
                x.mirrored_end = s.log_end.0;
            }
        }
        Err(_) => part.active = false,
    }
}

/// Re-reads each partition's mode and end from the engine (at connect, and while idle).
async fn refresh(args: &FetcherArgs, parts: &mut [Part]) {
    for (i, part) in parts.iter_mut().enumerate() {
        if !part.in_flight.is_empty() {
            continue;
        }
        match args.engine.state(&part.tp).await {
            Ok(s) => {
                let mirroring =
                    matches!(&s.mode, Mode::Mirroring { source } if *source == args.name);
                let stalled = lock(&args.status)
                    .get(i)
                    .is_some_and(|x| x.stalled.is_some());
                part.active = mirroring && !stalled;
                part.next = s.log_end;
                part.log_start = s.log_start;
                if let Some(x) = lock(&args.status).get_mut(i) {
                    x.mirrored_end = s.log_end.0;
                }
            }
            Err(_) => part.active = false,
        }
    }
}

async fn realign_part(
    args: &FetcherArgs,
    client: &mut Client,
    version: i16,
    part: &mut Part,
    i: usize,
    log_start: Offset,
) {
    for (c, _) in part.in_flight.drain(..) {
        let _ = c.await;
    }
    // The batch holding the source's log start: its base is where the local log starts.
    let probe = vec![Part {
        tp: part.tp.clone(),
        next: log_start,
        in_flight: VecDeque::new(),
        log_start,
        raise_log_start: None,
        active: true,
    }];
    let RequestKind::Fetch(mut req) = fetch_request(&probe) else {
        return;
    };
    req.max_wait_ms = 0;
    let answer = client
        .call(ApiKey::Fetch, version, RequestKind::Fetch(req))
        .await;
    let records = match answer {
        Ok(ResponseKind::Fetch(f)) => f
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == part.tp.partition && p.error_code == 0)
            .and_then(|p| p.records)
            .unwrap_or_default(),
        _ => bytes::Bytes::new(),
    };
    let base = if records.len() >= 8 {
        Offset(i64::from_be_bytes(records[..8].try_into().unwrap_or([0; 8])).min(log_start.0))
    } else {
        log_start
    };
    let base = base.max(part.next);
    if base > part.next {
        if let Err(e) = args.engine.realign_mirror(&part.tp, base).await {
            note_error(
                &args.status,
                Some(i),
                &format!("realigning at {}: {e}", base.0),
            );
            return;
        }
        part.log_start = base;
    }
    part.next = base;
    part.raise_log_start = (base < log_start).then_some(log_start);
    {
        // Counted before anything is appended, so a caller that sees the log end move sees
        // the realignment too.
        let mut st = lock(&args.status);
        if let Some(s) = st.get_mut(i) {
            s.realigns += 1;
            s.mirrored_end = s.mirrored_end.max(base.0);
        }
    }
    tracing::info!(mirror = %args.name, partition = %part.tp, at = base.0, source_log_start = log_start.0, "realigned at the source's log start");
    // The batch holding the source's log start goes first and alone: once it is durable the
    // local log start is raised (in `settle_part`), before anything past it is appended, so
    // the log never ends past that batch while it still starts below the source.
    let next = part.next.0;
    let first_end = spans(&records).find(|s| s.last >= next).map(|s| s.end);
    match first_end {
        Some(end) if part.raise_log_start.is_some() => {
            append_fetched(args, i, part, records.slice(..end));
            settle_part(args, i, part, true).await;
            // Refused (the partition was reset to its durable end): the next fetch retries.
            if part.raise_log_start.is_none() && part.active {
                append_fetched(args, i, part, records.slice(end..));
            }
        }
        _ => append_fetched(args, i, part, records),
    }
}

/// Least time between two WARN lines about one partition's errors.
const ERROR_WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Whether an error `now_error` of a partition whose last one was `previous`, last logged at
/// WARN at `warned_at`, is logged at WARN: its first error and every change, at most once per
/// [`ERROR_WARN_INTERVAL`]; repeats (and changes inside the interval) at DEBUG.
fn warn_worthy(
    previous: Option<&str>,
    now_error: &str,
    warned_at: Option<Instant>,
    now: Instant,
) -> bool {
    previous != Some(now_error)
        && warned_at.is_none_or(|t| now.saturating_duration_since(t) >= ERROR_WARN_INTERVAL)
}

fn note_error(status: &Mutex<Vec<PartStatus>>, i: Option<usize>, e: &str) {
    let now = Instant::now();
    let mut st = lock(status);
    let mut warned = Vec::new();
    for (j, s) in st.iter_mut().enumerate() {
        if i.is_some_and(|i| i != j) {
            continue;
        }
        if warn_worthy(s.last_error.as_deref(), e, s.warned_at, now) {
            s.warned_at = Some(now);
            warned.push(s.tp.to_string());
        }
        s.errors += 1;
        s.last_error = Some(e.to_string());
    }
    if warned.is_empty() {
        tracing::debug!(error = e, "mirror fetcher");
    } else {
        tracing::warn!(error = e, partitions = %warned.join(","), "mirror partition error");
    }
}

fn set_stalled(status: &Mutex<Vec<PartStatus>>, i: usize, reason: &str) {
    tracing::warn!(reason, "mirror partition stalled");
    if let Some(s) = lock(status).get_mut(i) {
        s.stalled = Some(reason.to_string());
        s.last_error = Some(reason.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};

    #[test]
    fn a_partitions_first_error_and_each_change_warn_at_most_once_per_interval() {
        let t0 = Instant::now();
        let later = t0 + ERROR_WARN_INTERVAL;
        assert!(warn_worthy(None, "e1", None, t0), "the first error");
        assert!(!warn_worthy(Some("e1"), "e1", Some(t0), later), "a repeat");
        assert!(warn_worthy(Some("e1"), "e2", Some(t0), later), "a change");
        assert!(
            !warn_worthy(Some("e1"), "e2", Some(t0), t0 + Duration::from_secs(1)),
            "a change inside the interval"
        );
        let status = Mutex::new(vec![
            PartStatus::new(TopicPartition::new("t", 0)),
            PartStatus::new(TopicPartition::new("t", 1)),
        ]);
        note_error(&status, Some(1), "boom");
        note_error(&status, Some(1), "boom");
        note_error(&status, None, "gone");
        let st = lock(&status);
        assert_eq!((st[0].errors, st[1].errors), (1, 3));
        assert!(st[0].warned_at.is_some() && st[1].warned_at.is_some());
        assert_eq!(st[1].last_error.as_deref(), Some("gone"));
    }

    fn batch(base: i64, n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(BatchOptions {
            base_offset: Offset(base),
            ..BatchOptions::default()
        });
        for _ in 0..n {
            b.push(RecordSpec {
                timestamp: 1,
                key: None,
                value: Some(b"v"),
                headers: &[],
            });
        }
        b.build()
    }

    #[test]
    fn whole_batches_skips_what_is_stored_and_leaves_a_cut_batch() {
        let mut bytes = batch(0, 3);
        let first = bytes.len();
        bytes.extend(batch(3, 2));
        let second = bytes.len();
        bytes.extend(&batch(5, 4)[..30]);
        assert_eq!(whole_batches(&bytes, Offset(0)), (0, second, Offset(5)));
        assert_eq!(whole_batches(&bytes, Offset(3)), (first, second, Offset(5)));
        assert_eq!(whole_batches(&bytes, Offset(5)).0, second);
        assert_eq!(whole_batches(&bytes, Offset(5)).1, second);
        assert_eq!(whole_batches(&[1, 2, 3], Offset(0)), (0, 0, Offset(0)));
    }
}
