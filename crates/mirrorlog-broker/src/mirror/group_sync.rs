//! KIP-1279's group offset sync: every `group_sync_ms` (60 s by default, the prototype's) the
//! source's committed offsets for the mirrored topics are read and committed here, so that after
//! a failover the groups resume where they were at the source, at most one interval behind.
//!
//! - **Reading.** Each source broker lists the groups it coordinates (ListGroups), and answers
//!   their committed offsets (OffsetFetch v2+, all topics); groups of the consumer protocol and
//!   simple groups (no protocol type) are taken, others (Connect's) are not. A broker that does
//!   not answer leaves its groups for the next round.
//! - **Committing.** Each offset of a mirrored partition here is clamped to the local log range
//!   [log start, high watermark] (a destination behind its source must not let a consumer skip
//!   records it does not have yet) and committed as the group's offset, as one durable batch per
//!   group, when it differs from the one committed here. A group with members here (active on
//!   the destination) is never overwritten: it is skipped, and shown so.
//! - During a failback the mirror runs the other way, and the offsets flow with it.

use super::sync_error::SyncError;
use crate::broker::Shared;
use crate::coordinator::groups::records::{Key, OffsetValue};
use crate::net::client::{Client, ClientError, Security};
use kafka_protocol::messages::{
    ApiKey, GroupId, ListGroupsRequest, OffsetFetchRequest, RequestKind, ResponseKind,
};
use mirrorlog::engine::TopicPartition;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// How often the source's group offsets are read (KIP-1279's prototype: 60 s).
pub const GROUP_SYNC_INTERVAL: Duration = Duration::from_secs(60);

/// One committed offset at the source: (offset, leader epoch).
pub type SourceOffset = (i64, i32);

/// Per group, its committed offsets at the source, by (topic, partition).
pub type SourceGroups = BTreeMap<String, BTreeMap<(String, i32), SourceOffset>>;

/// What `GET /mirrors` shows per group.
#[derive(Debug, Clone, Default)]
pub struct GroupSyncStatus {
    /// When its offsets were last read from the source and applied.
    pub synced_at: Option<SystemTime>,
    /// Offsets committed here by the sync, in all.
    pub offsets_synced: u64,
    /// Why the last round failed for it, if it did.
    pub last_error: Option<String>,
    /// Whether the last round skipped it because it has members here.
    pub skipped_active: bool,
}

/// What one round did for a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synced {
    /// This many offsets were committed (those that differed).
    Committed(u64),
    /// The group has members here: its offsets are its own.
    SkippedActive,
}

/// The committed offsets of every group of the source for `topics`, from every broker of
/// `addrs` that answers (an error only when none does).
pub async fn source_groups(
    addrs: &[String],
    topics: &[String],
    security: &Security,
) -> Result<SourceGroups, SyncError> {
    let mut out = SourceGroups::new();
    let mut failures = Vec::new();
    let mut answered = false;
    for addr in addrs {
        match broker_groups(addr, topics, security).await {
            Ok(groups) => {
                answered = true;
                out.extend(groups);
            }
            Err(e) => failures.push(format!("{addr}: {}", e.0)),
        }
    }
    if answered || addrs.is_empty() {
        Ok(out)
    } else {
        Err(SyncError::Unanswered(ClientError(format!(
            "no source broker answered the group offsets: {}",
            failures.join("; ")
        ))))
    }
}

async fn broker_groups(
    addr: &str,
    topics: &[String],
    security: &Security,
) -> Result<SourceGroups, ClientError> {
    let mut client = Client::connect_with(addr, security).await?;
    let version = client.version(ApiKey::ListGroups, 0, 4)?;
    let ResponseKind::ListGroups(listed) = client
        .call(
            ApiKey::ListGroups,
            version,
            RequestKind::ListGroups(ListGroupsRequest::default()),
        )
        .await?
    else {
        return Err(ClientError("ListGroups: another answer".into()));
    };
    if listed.error_code != 0 {
        return Err(ClientError(format!(
            "ListGroups: {}",
            crate::net::client::error_name(listed.error_code)
        )));
    }
    let fetch_version = client.version(ApiKey::OffsetFetch, 2, 7)?;
    let mut out = SourceGroups::new();
    for g in listed.groups {
        let protocol = g.protocol_type.as_str();
        if !(protocol.is_empty() || protocol == "consumer") {
            continue;
        }
        let mut r = OffsetFetchRequest::default();
        r.group_id = GroupId(g.group_id.0.clone());
        r.topics = None;
        let ResponseKind::OffsetFetch(answer) = client
            .call(
                ApiKey::OffsetFetch,
                fetch_version,
                RequestKind::OffsetFetch(r),
            )
            .await?
        else {
            return Err(ClientError("OffsetFetch: another answer".into()));
        };
        if answer.error_code != 0 {
            // The group moved or is loading: the next round asks again.
            continue;
        }
        let mut offsets = BTreeMap::new();
        for t in answer.topics {
            let topic = t.name.0.to_string();
            if !topics.contains(&topic) {
                continue;
            }
            for p in t.partitions {
                if p.error_code == 0 && p.committed_offset >= 0 {
                    offsets.insert(
                        (topic.clone(), p.partition_index),
                        (p.committed_offset, p.committed_leader_epoch),
                    );
                }
            }
        }
        if !offsets.is_empty() {
            out.insert(g.group_id.0.to_string(), offsets);
        }
    }
    Ok(out)
}

/// Commits `groups`' offsets here, clamped to each local partition's [log start, high
/// watermark], except for groups with members here; per group, what was done, or why it failed.
pub async fn apply(
    b: &Shared,
    groups: &SourceGroups,
) -> BTreeMap<String, Result<Synced, SyncError>> {
    let mut out = BTreeMap::new();
    let now = crate::coordinator::transactions::now_ms();
    for (group, offsets) in groups {
        if b.membership.active(group) {
            out.insert(group.clone(), Ok(Synced::SkippedActive));
            continue;
        }
        let here = b.groups.fetch(group);
        let mut records = Vec::new();
        for ((topic, partition), &(offset, epoch)) in offsets {
            if !b.has_partition(topic, *partition) {
                continue;
            }
            let Ok(state) = b
                .engine
                .state(&TopicPartition::new(topic, *partition))
                .await
            else {
                continue;
            };
            let clamped = offset.clamp(state.log_start.0, state.high_watermark.0);
            // A clamped offset is not the record the source's epoch names.
            let epoch = if clamped == offset { epoch } else { -1 };
            let key = (topic.clone(), *partition);
            if here.get(&key).is_some_and(|v| v.offset == clamped) {
                continue;
            }
            records.push((
                Key::Offset {
                    group: group.clone(),
                    topic: topic.clone(),
                    partition: *partition,
                },
                Some(OffsetValue {
                    offset: clamped,
                    leader_epoch: epoch,
                    metadata: String::new(),
                    commit_timestamp: now,
                }),
            ));
        }
        let n = records.len() as u64;
        let r = if records.is_empty() {
            Ok(Synced::Committed(0))
        } else {
            match b.offsets_partition(group).await {
                Err(e) => Err(SyncError::here("finding its __consumer_offsets partition")(
                    &e,
                )),
                Ok(tp) => b
                    .groups
                    .write(&b.engine, &tp, records, now)
                    .await
                    .map(|()| Synced::Committed(n))
                    .map_err(|e| SyncError::here(format!("committing to {tp}"))(&e)),
            }
        };
        out.insert(group.clone(), r);
    }
    out
}
