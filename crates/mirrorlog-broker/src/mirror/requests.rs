//! The requests the mirror fetcher sends a source broker, built from and parsed into plain
//! per-partition values: Fetch (as a consumer, `replica_id` -1, READ_UNCOMMITTED, with the
//! partition's `current_leader_epoch` as a follower sends it), ListOffsets earliest and latest,
//! and OffsetForLeaderEpoch. Answers come back in the order of the partitions asked; a partition
//! the source left out of its answer gets `UNKNOWN_TOPIC_OR_PARTITION`.

use crate::net::client::{Client, ClientError};
use crate::net::wire::topic_name;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, OffsetForLeaderEpochRequest,
    RequestKind, ResponseKind,
};
use std::collections::HashMap;

/// Bytes asked per partition per fetch.
pub const PARTITION_FETCH_BYTES: i32 = 1 << 20;
/// Bytes asked per fetch.
pub const FETCH_BYTES: i32 = 16 << 20;
/// How long a fetch at the source's end waits for data.
pub const FETCH_WAIT_MS: i32 = 500;

/// Kafka's error code for a partition missing from an answer.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// ListOffsets' timestamps for the log start and the end.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// One partition of a request: where, from which offset (or, for OffsetForLeaderEpoch, the
/// local newest epoch), under which leader epoch: the engine's mirror pipeline's question.
pub use mirrorlog::mirror::Ask;

fn grouped<T>(asks: &[Ask], mut part: impl FnMut(&Ask) -> T) -> Vec<(String, Vec<T>)> {
    let mut topics: Vec<(String, Vec<T>)> = Vec::new();
    for a in asks {
        match topics.last_mut() {
            Some((t, ps)) if *t == a.tp.topic => ps.push(part(a)),
            _ => topics.push((a.tp.topic.clone(), vec![part(a)])),
        }
    }
    topics
}

/// An answer's per-partition values, keyed `(topic, partition)`, put in the order of `asks`;
/// a partition the answer left out gets `missing`.
fn in_ask_order<T: Clone>(
    asks: &[Ask],
    answers: impl IntoIterator<Item = ((String, i32), T)>,
    missing: T,
) -> Vec<T> {
    let mut by: HashMap<(String, i32), T> = answers.into_iter().collect();
    asks.iter()
        .map(|a| {
            by.remove(&(a.tp.topic.clone(), a.tp.partition))
                .unwrap_or_else(|| missing.clone())
        })
        .collect()
}

/// A Fetch of `asks`, waiting up to `max_wait_ms` for data.
pub fn fetch(asks: &[Ask], max_wait_ms: i32) -> RequestKind {
    let mut r = FetchRequest::default();
    r.replica_id = BrokerId(-1);
    r.max_wait_ms = max_wait_ms;
    r.min_bytes = 1;
    r.max_bytes = FETCH_BYTES;
    r.isolation_level = 0;
    r.session_id = 0;
    r.session_epoch = -1;
    r.topics = grouped(asks, |a| {
        let mut fp = FetchPartition::default();
        fp.partition = a.tp.partition;
        fp.fetch_offset = a.offset.0;
        fp.partition_max_bytes = PARTITION_FETCH_BYTES;
        fp.current_leader_epoch = a.current_leader_epoch;
        fp.last_fetched_epoch = -1;
        fp.log_start_offset = -1;
        fp
    })
    .into_iter()
    .map(|(t, ps)| {
        let mut ft = FetchTopic::default();
        ft.topic = topic_name(&t);
        ft.partitions = ps;
        ft
    })
    .collect();
    RequestKind::Fetch(r)
}

/// One partition of a Fetch answer.
#[derive(Debug, Clone, Default)]
pub struct Fetched {
    /// Its error code.
    pub error_code: i16,
    /// The source's high watermark (-1: not given).
    pub high_watermark: i64,
    /// The source's log start (-1: not given, as Kafka answers an out-of-range fetch).
    pub log_start_offset: i64,
    /// The batches.
    pub records: bytes::Bytes,
}

/// A Fetch answer, per partition asked (in order), or its whole-request error code.
pub fn fetched(asks: &[Ask], answer: FetchResponse) -> Result<Vec<Fetched>, i16> {
    if answer.error_code != 0 {
        return Err(answer.error_code);
    }
    let answers = answer.responses.into_iter().flat_map(|t| {
        let name = t.topic.0.to_string();
        t.partitions.into_iter().map(move |p| {
            (
                (name.clone(), p.partition_index),
                Fetched {
                    error_code: p.error_code,
                    high_watermark: p.high_watermark,
                    log_start_offset: p.log_start_offset,
                    records: p.records.unwrap_or_default(),
                },
            )
        })
    });
    let missing = Fetched {
        error_code: UNKNOWN_TOPIC_OR_PARTITION,
        high_watermark: -1,
        log_start_offset: -1,
        records: bytes::Bytes::new(),
    };
    Ok(in_ask_order(asks, answers, missing))
}

/// The source's log start and end of each partition: (error code, earliest, latest).
pub async fn log_range(
    client: &mut Client,
    asks: &[Ask],
) -> Result<Vec<(i16, i64, i64)>, ClientError> {
    let earliest = list_offsets(client, asks, EARLIEST).await?;
    let latest = list_offsets(client, asks, LATEST).await?;
    Ok(earliest
        .into_iter()
        .zip(latest)
        .map(|((e1, lo), (e2, hi))| (if e1 != 0 { e1 } else { e2 }, lo, hi))
        .collect())
}

async fn list_offsets(
    client: &mut Client,
    asks: &[Ask],
    timestamp: i64,
) -> Result<Vec<(i16, i64)>, ClientError> {
    let version = client.version(ApiKey::ListOffsets, 1, 7)?;
    let mut r = ListOffsetsRequest::default();
    r.replica_id = BrokerId(-1);
    r.isolation_level = 0;
    r.topics = grouped(asks, |a| {
        let mut p = ListOffsetsPartition::default();
        p.partition_index = a.tp.partition;
        p.current_leader_epoch = a.current_leader_epoch;
        p.timestamp = timestamp;
        p
    })
    .into_iter()
    .map(|(t, ps)| {
        let mut lt = ListOffsetsTopic::default();
        lt.name = topic_name(&t);
        lt.partitions = ps;
        lt
    })
    .collect();
    let ResponseKind::ListOffsets(answer) = client
        .call(ApiKey::ListOffsets, version, RequestKind::ListOffsets(r))
        .await?
    else {
        return Err(ClientError("ListOffsets answered with another API".into()));
    };
    let answers = answer.topics.into_iter().flat_map(|t| {
        let name = t.name.0.to_string();
        t.partitions
            .into_iter()
            .map(move |p| ((name.clone(), p.partition_index), (p.error_code, p.offset)))
    });
    Ok(in_ask_order(
        asks,
        answers,
        (UNKNOWN_TOPIC_OR_PARTITION, -1),
    ))
}

/// OffsetForLeaderEpoch for each ask (its `offset` holds the local newest epoch): (error code,
/// the source's epoch, its end offset) — `(0, -1, -1)` when the source has no epoch at or below.
pub async fn epoch_ends(
    client: &mut Client,
    asks: &[Ask],
) -> Result<Vec<(i16, i32, i64)>, ClientError> {
    let version = client.version(ApiKey::OffsetForLeaderEpoch, 2, 4)?;
    let mut r = OffsetForLeaderEpochRequest::default();
    r.replica_id = BrokerId(-1);
    r.topics = grouped(asks, |a| {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = a.tp.partition;
        p.current_leader_epoch = a.current_leader_epoch;
        p.leader_epoch = i32::try_from(a.offset.0).unwrap_or(-1);
        p
    })
    .into_iter()
    .map(|(t, ps)| {
        let mut ot = OffsetForLeaderTopic::default();
        ot.topic = topic_name(&t);
        ot.partitions = ps;
        ot
    })
    .collect();
    let ResponseKind::OffsetForLeaderEpoch(answer) = client
        .call(
            ApiKey::OffsetForLeaderEpoch,
            version,
            RequestKind::OffsetForLeaderEpoch(r),
        )
        .await?
    else {
        return Err(ClientError(
            "OffsetForLeaderEpoch answered with another API".into(),
        ));
    };
    let answers = answer.topics.into_iter().flat_map(|t| {
        let name = t.topic.0.to_string();
        t.partitions.into_iter().map(move |p| {
            (
                (name.clone(), p.partition),
                (p.error_code, p.leader_epoch, p.end_offset),
            )
        })
    });
    Ok(in_ask_order(
        asks,
        answers,
        (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
    ))
}
