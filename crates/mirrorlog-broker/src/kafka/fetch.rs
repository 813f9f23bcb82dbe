//! Fetch: several partitions per request, both isolation levels with aborted transactions, the
//! log start offset, and long-poll through the engine's parked reads (`min_bytes`/`max_wait`:
//! nothing here polls).
//!
//! Every partition is read at once without waiting. If the request's `min_bytes` are not there
//! and `max_wait_ms` allows, each partition's read is parked in the engine until its read bound
//! moves past the fetch offset; the first one that wakes with data (or the deadline) ends the
//! wait, and every partition is read again. The response's size follows Kafka's rules: each
//! partition at most `partition_max_bytes`, the whole at most `max_bytes`, except that the first
//! batch of the first partition with data is returned whole (the engine's
//! `min_one_batch`), so a consumer always progresses. A partition whose `current_leader_epoch`
//! is stale or ahead is answered with Kafka's epoch error and not read.

use super::{epoch_refusal, topic_name};
use crate::acl::Operation;
use crate::broker::Shared;
use crate::coordinator::fetch_sessions::{Answer, Context, Key, Wants, INVALID_SESSION_ID};
use crate::kafka::errors;
use crate::kafka::session::Session;
use crate::net::request_queue::Queued;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, ProducerId, ResponseKind};
use mirrorlog::engine::{Isolation, ReadRequest, ReadResult, TopicPartition};
use mirrorlog::format::Offset;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait honoured (Kafka's clients ask 500 ms; replicas up to a few seconds).
pub const FETCH_WAIT_MS_MAX: i32 = 30_000;

struct Wanted {
    topic: usize,
    /// The partition, named only when it is here: a partition of no topic here costs no copy
    /// of its (up to 32 KiB) topic name.
    tp: Option<TopicPartition>,
    partition: i32,
    offset: i64,
    max_bytes: usize,
    /// Answered with this error, not read: an unknown partition, or a stale or future
    /// `current_leader_epoch`.
    refused: Option<i16>,
}

/// Serves a Fetch. ACLs (Kafka's): a consumer's fetch needs READ on each topic, a replica's
/// (`replica_id` >= 0) CLUSTER_ACTION on the cluster; a partition refused gets
/// `TOPIC_AUTHORIZATION_FAILED` and is not read.
/// `place` (its place in `queued.max.requests`) is given back when the fetch parks.
pub async fn fetch(
    b: &Shared,
    who: &Session,
    r: FetchRequest,
    version: i16,
    mut place: Option<Queued>,
) -> ResponseKind {
    let replica_denied = r.replica_id.0 >= 0 && !who.may_cluster(b, Operation::ClusterAction);
    let isolation = if r.replica_id.0 >= 0 {
        Isolation::LogEnd
    } else if r.isolation_level == 1 {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    };
    // Kafka's fetch data is a map (`FetchRequest.fetchData`): a topic named twice is one topic,
    // and a partition named twice is read once, as its last entry asks, where it first came.
    let requested = fetch_data(&r);
    // The session (Fetch v7+, `coordinator/fetch_sessions.rs`): which partitions to read, which to answer.
    let now_ms = now_ms();
    let context = if version >= 7 {
        let forgotten: Vec<Key> = r
            .forgotten_topics_data
            .iter()
            .flat_map(|t| {
                let name: Arc<str> = Arc::from(t.topic.0.as_str());
                t.partitions.iter().map(move |&p| (name.clone(), p))
            })
            .collect();
        b.fetch_sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .context(
                r.session_id,
                r.session_epoch,
                &requested,
                &forgotten,
                now_ms,
            )
    } else {
        Context::Sessionless
    };
    let parts = match context {
        Context::Error(code) => {
            // Kafka's `SessionErrorContext`: the error alone, no partitions, no session.
            let mut resp = FetchResponse::default();
            resp.error_code = code;
            resp.session_id = INVALID_SESSION_ID;
            return ResponseKind::Fetch(resp);
        }
        Context::Incremental { ref partitions, .. } => partitions.clone(),
        Context::Full | Context::Sessionless => requested,
    };
    let mut wanted: Vec<Wanted> = Vec::with_capacity(parts.len());
    let mut checks = Vec::with_capacity(parts.len());
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut topic_at = std::collections::HashMap::<Arc<str>, (usize, bool)>::new();
    // A topic's facts are found once per run of its partitions (one name, one `Arc`): a name
    // is hashed and looked up per topic, not per partition (100,000 partitions under a
    // 32 KiB name must not hash 3 GB).
    let mut last: Option<(Arc<str>, usize, bool, i32)> = None;
    for ((name, partition), wants) in &parts {
        let (i, denied, count) = match &last {
            Some((n, i, denied, count)) if Arc::ptr_eq(n, name) => (*i, *denied, *count),
            _ => {
                let (i, denied) = *topic_at.entry(name.clone()).or_insert_with(|| {
                    names.push(name.clone());
                    let denied = replica_denied || !who.may_topic(b, Operation::Read, name);
                    (names.len() - 1, denied)
                });
                let count = b.registry().get(name).map_or(0, |t| t.partitions);
                last = Some((name.clone(), i, denied, count));
                (i, denied, count)
            }
        };
        let known = (0..count).contains(partition);
        let refused = if denied {
            Some(ResponseError::TopicAuthorizationFailed.code())
        } else {
            (!known).then(|| ResponseError::UnknownTopicOrPartition.code())
        };
        let tp = refused
            .is_none()
            .then(|| TopicPartition::new(name, *partition));
        checks.push(
            tp.as_ref()
                .map(|tp| epoch_refusal(b, tp, wants.current_leader_epoch)),
        );
        wanted.push(Wanted {
            topic: i,
            tp,
            partition: *partition,
            offset: wants.fetch_offset,
            max_bytes: usize::try_from(wants.max_bytes.max(0)).unwrap_or(0),
            refused,
        });
    }
    for (w, check) in wanted.iter_mut().zip(checks) {
        if let Some(check) = check {
            w.refused = check.await;
        }
    }
    // Kafka's `fetchMaxBytes`: the request's limit, never past the broker's `fetch.max.bytes`.
    let total_max = usize::try_from(r.max_bytes.max(0))
        .unwrap_or(0)
        .min(b.config.fetch_bytes_max);
    let min_bytes = usize::try_from(r.min_bytes.max(0)).unwrap_or(0);
    let wait = Duration::from_millis(
        u64::try_from(r.max_wait_ms.clamp(0, FETCH_WAIT_MS_MAX)).unwrap_or(0),
    );
    let deadline = Instant::now() + wait;

    let mut results = read_all(b, &wanted, isolation, total_max).await;
    loop {
        let have: usize = results
            .iter()
            .map(|r| r.as_ref().map_or(0, |x| x.records.len()))
            .sum();
        // An error is answered at once, as Kafka answers a fetch with a partition error.
        let failed = results.iter().any(Result::is_err);
        let now = Instant::now();
        if have >= min_bytes.max(1) || failed || now >= deadline {
            break;
        }
        // Park every known partition's read until its bound moves or the deadline passes; a
        // parked fetch holds no place in queued.max.requests.
        if let Some(p) = place.as_mut() {
            p.release();
        }
        let left = deadline - now;
        // Only whether a batch arrives matters here: one batch at most is read, and the first
        // partition answered (with bytes, an error, or at the deadline) ends the wait.
        let parked: Vec<(TopicPartition, ReadRequest)> = wanted
            .iter()
            .filter(|w| w.refused.is_none())
            .filter_map(|w| {
                let req = ReadRequest::new(Offset(w.offset), 1, isolation).wait_for(1, left);
                Some((w.tp.clone()?, req))
            })
            .collect();
        if parked.is_empty() {
            tokio::time::sleep(left).await;
            break;
        }
        // One call per shard; the reads still parked when it answers are let go at their
        // shard's next tick (as they are when the connection goes and this future with it),
        // not held to their deadline.
        let _ = b.engine.wait_any(parked).await;
        results = read_all(b, &wanted, isolation, total_max).await;
    }

    // Kafka's size rules over the whole response.
    let mut answered: Vec<(usize, PartitionData)> = Vec::with_capacity(wanted.len());
    let mut used = 0usize;
    for (w, result) in wanted.iter().zip(results) {
        let mut p = PartitionData::default();
        p.partition_index = w.partition;
        match result {
            Err(code) => {
                p.error_code = errors::for_version(ApiKey::Fetch, version, code);
                // Kafka's answer to any partition error, out of range included
                // (`ReplicaManager.createLogReadResult`): no high watermark, no log start. A
                // follower or a mirror finds them with ListOffsets.
                p.high_watermark = -1;
                p.last_stable_offset = -1;
                p.log_start_offset = -1;
                p.records = Some(bytes::Bytes::new());
            }
            Ok(read) => {
                p.high_watermark = read.high_watermark.0;
                p.last_stable_offset = read.last_stable_offset.0;
                p.log_start_offset = read.log_start_offset.0;
                p.aborted_transactions = (isolation == Isolation::ReadCommitted).then(|| {
                    read.aborted
                        .iter()
                        .map(|a| {
                            let mut t = AbortedTransaction::default();
                            t.producer_id = ProducerId(a.producer_id);
                            t.first_offset = a.first_offset.0;
                            t
                        })
                        .collect()
                });
                let len = read.records.len();
                if used > 0 && used + len > total_max {
                    p.records = Some(bytes::Bytes::new());
                } else {
                    used += len;
                    p.records = Some(read.records);
                }
            }
        }
        if version < 4 {
            p.aborted_transactions = None;
        }
        answered.push((w.topic, p));
    }
    let answer_of = |p: &PartitionData| Answer {
        records_bytes: p.records.as_ref().map_or(0, bytes::Bytes::len),
        error_code: p.error_code,
        high_watermark: p.high_watermark,
        log_start_offset: p.log_start_offset,
    };
    let mut resp = FetchResponse::default();
    resp.session_id = match context {
        Context::Full => {
            let told = parts
                .iter()
                .zip(&answered)
                .map(|((key, wants), (_, p))| (key.clone(), *wants, answer_of(p)))
                .collect();
            b.fetch_sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .open(told, r.replica_id.0 >= 0, now_ms)
        }
        Context::Incremental { id, .. } => {
            let answers: Vec<(Key, Answer)> = parts
                .iter()
                .zip(&answered)
                .map(|((key, _), (_, p))| (key.clone(), answer_of(p)))
                .collect();
            let keep = b
                .fetch_sessions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .answered(id, &answers);
            let mut keep = keep.into_iter();
            answered.retain(|_| keep.next().unwrap_or(true));
            id
        }
        Context::Sessionless | Context::Error(_) => INVALID_SESSION_ID,
    };
    // Topics in the order they first came, each with its answered partitions in order.
    let mut topic_slot: Vec<Option<usize>> = vec![None; names.len()];
    // Record bytes sent per topic (`GET /metrics`), counted once per topic.
    let mut sent: Vec<u64> = Vec::new();
    for (topic, p) in answered {
        let slot = *topic_slot[topic].get_or_insert_with(|| {
            let mut t = FetchableTopicResponse::default();
            t.topic = topic_name(&names[topic]);
            resp.responses.push(t);
            sent.push(0);
            resp.responses.len() - 1
        });
        sent[slot] += p.records.as_ref().map_or(0, |r| r.len() as u64);
        resp.responses[slot].partitions.push(p);
    }
    for (t, bytes) in resp.responses.iter().zip(sent) {
        b.metrics.bytes_out(&t.topic.0, bytes);
    }
    ResponseKind::Fetch(resp)
}

/// The request's partitions as Kafka's `fetchData` map holds them: a topic named twice is one
/// topic, a partition named twice is read once, as its last entry asks, where it first came.
fn fetch_data(r: &FetchRequest) -> Vec<(Key, Wants)> {
    let mut out: Vec<(Key, Wants)> = Vec::new();
    // Each name hashed once per topic entry; partitions keyed by the topic's index.
    let mut names = std::collections::HashMap::<&str, (usize, Arc<str>)>::new();
    let mut at = std::collections::HashMap::<(usize, i32), usize>::new();
    for t in &r.topics {
        let next = names.len();
        let (index, name) = names
            .entry(t.topic.0.as_str())
            .or_insert_with(|| (next, Arc::from(t.topic.0.as_str())))
            .clone();
        for p in &t.partitions {
            let wants = Wants {
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
            };
            match at.entry((index, p.partition)) {
                std::collections::hash_map::Entry::Occupied(i) => out[*i.get()].1 = wants,
                std::collections::hash_map::Entry::Vacant(i) => {
                    i.insert(out.len());
                    out.push(((name.clone(), p.partition), wants));
                }
            }
        }
    }
    out
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A wanted partition's partition, or the error it is answered with unread.
fn refused(w: &Wanted) -> Result<&TopicPartition, i16> {
    match (w.refused, &w.tp) {
        (None, Some(tp)) => Ok(tp),
        (code, _) => Err(code.unwrap_or(ResponseError::UnknownTopicOrPartition.code())),
    }
}

/// Reads every wanted partition as Kafka's `readFromLog` does, in order: each at most its
/// `partition_max_bytes` and what is left of `limit_bytes`, the first batch of the first
/// partition with data whole whatever its size (`min_one_batch`), the rest only within the
/// limits. So an answer never holds more than `limit_bytes` plus one batch.
///
/// All are read at once (`Engine::read_many`, one call per shard), each with the whole limit
/// and `min_one_batch`; in order, a result within what the sequential read would have allowed
/// it is that read's result. From the first that is not (the response limit binding, or a
/// batch past a partition's own limit), the rest are read one by one as before.
async fn read_all(
    b: &Shared,
    wanted: &[Wanted],
    isolation: Isolation,
    limit_bytes: usize,
) -> Vec<Result<ReadResult, i16>> {
    let request = |w: &Wanted, max: usize, min_one_batch: bool| {
        let mut req = ReadRequest::new(Offset(w.offset), w.max_bytes.min(max), isolation);
        req.min_one_batch = min_one_batch;
        req
    };
    let reads: Vec<(TopicPartition, ReadRequest)> = wanted
        .iter()
        .filter_map(|w| Some((refused(w).ok()?.clone(), request(w, limit_bytes, true))))
        .collect();
    let mut at_once = b.engine.read_many(reads).await.into_iter();
    let mut out = Vec::with_capacity(wanted.len());
    let mut left = limit_bytes;
    let mut min_one_batch = true;
    let mut exact = true;
    for w in wanted {
        let tp = match refused(w) {
            Ok(tp) => tp,
            Err(code) => {
                out.push(Err(code));
                continue;
            }
        };
        let fast = at_once.next();
        let allowed = if min_one_batch {
            usize::MAX
        } else {
            w.max_bytes.min(left)
        };
        let read = match fast {
            Some(r) if exact && r.as_ref().map_or(true, |r| r.records.len() <= allowed) => r,
            _ => {
                exact = false;
                b.engine.read(tp, request(w, left, min_one_batch)).await
            }
        };
        let read = read.map_err(|e| errors::code(&e));
        if let Ok(r) = &read {
            if !r.records.is_empty() {
                min_one_batch = false;
                left = left.saturating_sub(r.records.len());
            }
        }
        out.push(read);
    }
    out
}
