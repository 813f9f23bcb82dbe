//! `POST /mirrors` in three steps, so that a start either happens whole or not at all:
//!
//! 1. **Plan** (nothing changes): each topic's partition count at the source against the local
//!    one, each partition's mode, and where each local log agrees with the source (its newest
//!    epoch's end at the source, by OffsetForLeaderEpoch: the divergence a Kafka follower
//!    finds), hence how many offsets a start would truncate.
//! 2. **Check**: an existing local topic must share its lineage with the source, whether or
//!    not a truncation would lose records: the local topic's id is the source topic's (a
//!    mirrored topic takes its source's id, so a failback finds it), and the source is the
//!    cluster this mirror recorded. A topic that is not (another topic under the same name)
//!    would get the source's records spliced onto its own log, two histories in one: the start
//!    is refused with each reason (409), unless `force`, which truncates its partitions fully
//!    (every local record goes; the source's follow from its log start) and gives the topic
//!    the source's id. `dry_run` answers the plan here.
//! 3. **Apply**: topics created or grown, then each partition started; a partition that fails
//!    undoes the ones this start switched (the engine's stop, so each is writable again) and
//!    the start answers the failure.
//!
//! Every truncation a start performs (a failback's divergence, a forced start) is in its answer
//! per partition (`truncated`: from, to, records dropped), logged at WARN, and kept with the
//! mirror for `GET /mirrors`.

use super::{bad, failed, source, AdminError};
use crate::broker::Shared;
use crate::net::client::{Client, Security};
use crate::net::wire::topic_name;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, OffsetForLeaderEpochRequest, RequestKind, ResponseKind,
};
use mirrorlog::engine::{
    MirrorStart, Mode, OpenTransactions, PartitionState, StartMirroring, StopMirroring,
    TopicPartition,
};
use mirrorlog::mirror::destination::{agreement, Agreement};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What a topic needs before its partitions start.
#[derive(Debug)]
pub enum TopicStep {
    /// Created with the source's count and id.
    Create { count: i32, id: Option<[u8; 16]> },
    /// Grown to the source's count.
    Grow { count: i32 },
    /// As it is.
    Keep,
}

/// One partition's part in a start.
#[derive(Debug)]
pub struct PartPlan {
    /// The partition.
    pub tp: TopicPartition,
    /// Where it is truncated before mirroring.
    pub truncate_to: MirrorStart,
    /// Its log end now.
    pub log_end: i64,
    /// The topic's id at the source (a forced start gives it to the local topic).
    pub source_id: Option<uuid::Uuid>,
    /// Offsets the truncation removes.
    pub loses: i64,
    /// Records in the offsets it removes (control records included).
    pub records_dropped: i64,
    /// Why its lineage is not the source's (`None`: it is).
    pub unrelated: Option<String>,
}

/// A truncation a start performed, as its answer, the log and `GET /mirrors` report it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Truncation {
    /// The local log end before.
    pub from: i64,
    /// Where the log was cut (its end after).
    pub to: i64,
    /// Records dropped (control records included).
    pub records_dropped: i64,
    /// Whether `force` did it, the topic's lineage not being the source's.
    pub forced: bool,
    /// When (ms since the epoch).
    pub at_ms: i64,
}

/// A whole start, before anything changes.
#[derive(Debug, Default)]
pub struct Plan {
    /// Per topic, in the order asked.
    pub topics: Vec<(String, TopicStep)>,
    /// Partitions of existing topics to start (those already mirroring from this mirror are
    /// left as they are).
    pub parts: Vec<PartPlan>,
    /// Partitions that do not exist yet (a created or grown topic's), started empty.
    pub new_parts: Vec<TopicPartition>,
}

impl Plan {
    /// The reasons a start is refused without `force`.
    pub fn refusals(&self) -> Vec<String> {
        self.parts
            .iter()
            .filter_map(|p| {
                p.unrelated.as_ref().map(|why| {
                    format!(
                        "{}: {why}; force truncates it fully ({} records)",
                        p.tp, p.records_dropped
                    )
                })
            })
            .collect()
    }

    /// The plan as `dry_run` answers it.
    pub fn to_json(&self) -> Value {
        let topics: Vec<Value> = self
            .topics
            .iter()
            .map(|(t, step)| match step {
                TopicStep::Create { count, .. } => json!({"topic": t, "create": count}),
                TopicStep::Grow { count } => json!({"topic": t, "grow_to": count}),
                TopicStep::Keep => json!({"topic": t}),
            })
            .collect();
        let parts: Vec<Value> = self
            .parts
            .iter()
            .map(|p| {
                json!({
                    "topic": p.tp.topic,
                    "partition": p.tp.partition,
                    "log_end": p.log_end,
                    "truncate_to": p.log_end - p.loses,
                    "loses": p.loses,
                    "records_dropped": p.records_dropped,
                    "unrelated": p.unrelated,
                })
            })
            .collect();
        json!({"topics": topics, "partitions": parts, "new_partitions": self.new_parts.len()})
    }
}

/// The identity a start checks a truncation against.
pub struct Lineage<'a> {
    /// The mirror's name.
    pub name: &'a str,
    /// The source cluster id this mirror recorded before (`None`: a new mirror).
    pub recorded_cluster: Option<&'a str>,
    /// The source's cluster id now (`None`: its Metadata is older than v2).
    pub source_cluster: Option<&'a str>,
}

/// Step 1: the plan of starting `topics` (see the module docs). Nothing changes.
///
/// # Errors
/// A topic the source lacks or has fewer partitions of, a partition mirroring from another
/// mirror, a partition without a leader at the source, or a source that cannot be asked.
pub async fn plan(
    b: &Shared,
    view: &source::SourceView,
    topics: &[String],
    security: &Security,
    lineage: &Lineage<'_>,
) -> Result<Plan, AdminError> {
    let counts = source_partitions(view, topics)?;
    let mut plan = Plan::default();
    // One connection per source broker, for the OffsetForLeaderEpoch of each partition at
    // its leader.
    let mut clients: BTreeMap<i32, Client> = BTreeMap::new();
    for (topic, count) in topics.iter().zip(counts) {
        let source_id = view
            .topics
            .get(topic)
            .map(|t| t.topic_id)
            .filter(|id| !id.is_nil());
        let local = b.registry().get(topic).map(|t| (t.partitions, t.id));
        let (existing, local_id) = match local {
            None => {
                plan.topics.push((
                    topic.clone(),
                    TopicStep::Create {
                        count,
                        id: source_id.map(|id| *id.as_bytes()),
                    },
                ));
                plan.new_parts
                    .extend((0..count).map(|p| TopicPartition::new(topic, p)));
                continue;
            }
            // A source has fewer partitions than here: not the topic this one mirrors (Kafka
            // never removes partitions).
            Some((n, _)) if n > count => {
                return Err(bad(format!(
                    "topic {topic} has {n} partitions here and {count} at the source"
                )));
            }
            // The source grew since this topic was made (or mirrored): grow here too.
            Some((n, id)) if n < count => {
                plan.topics.push((topic.clone(), TopicStep::Grow { count }));
                plan.new_parts
                    .extend((n..count).map(|p| TopicPartition::new(topic, p)));
                (n, id)
            }
            Some((n, id)) => {
                plan.topics.push((topic.clone(), TopicStep::Keep));
                (n, id)
            }
        };
        for p in 0..existing {
            let tp = TopicPartition::new(topic, p);
            let state = super::state_of(b, &tp).await?;
            match &state.mode {
                Mode::Mirroring { source } | Mode::Paused { source } if source == lineage.name => {
                    continue;
                }
                Mode::Mirroring { source } | Mode::Paused { source } => {
                    return Err(bad(format!("{tp} is mirroring from {source}")));
                }
                _ => {}
            }
            let leader = view
                .leader(topic, p)
                .ok_or_else(|| failed(format!("{tp} has no leader at the source")))?;
            let client = match clients.entry(leader.broker) {
                std::collections::btree_map::Entry::Occupied(c) => c.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    let addr = view.brokers.get(&leader.broker).ok_or_else(|| {
                        failed(format!(
                            "{tp}: the source names no broker {}",
                            leader.broker
                        ))
                    })?;
                    v.insert(Client::connect_with(addr, security).await.map_err(|e| {
                        AdminError {
                            status: 502,
                            message: e.0,
                        }
                    })?)
                }
            };
            // An existing topic must be the source's, whether or not records would be lost
            // (see the module docs).
            // Not the source's: what `force` does, a full truncation, is the plan (a dry run
            // shows it; without force the start is refused).
            let unrelated = unrelated(lineage, &local_id, source_id.as_ref());
            let truncate_to = if unrelated.is_some() {
                MirrorStart::StartAt(state.log_start)
            } else {
                divergence(b, client, &tp, &state, leader.epoch).await?
            };
            // What stays: `divergence` answers an offset or the LSO.
            let keep = match truncate_to {
                MirrorStart::Offset(o) => o.0,
                MirrorStart::LastStableOffset => state.last_stable_offset.0,
                MirrorStart::StartAt(_) => state.log_start.0,
                MirrorStart::EpochEnd(_) => state.log_end.0,
            };
            let loses = (state.log_end.0 - keep).max(0);
            let records_dropped = records_in(b, &tp, keep, state.log_end.0).await?;
            plan.parts.push(PartPlan {
                tp,
                truncate_to,
                log_end: state.log_end.0,
                source_id,
                loses,
                records_dropped,
                unrelated,
            });
        }
    }
    Ok(plan)
}

/// The records of `tp` in offsets `[from, to)` (control records included), read by their
/// batches' headers.
async fn records_in(
    b: &Shared,
    tp: &TopicPartition,
    from: i64,
    to: i64,
) -> Result<i64, AdminError> {
    use mirrorlog::engine::{Isolation, ReadRequest};
    let mut next = from;
    let mut records = 0i64;
    while next < to {
        let read = b
            .engine
            .read(
                tp,
                ReadRequest::new(mirrorlog::format::Offset(next), 1 << 20, Isolation::LogEnd),
            )
            .await
            .map_err(|e| failed(format!("{tp}: reading what a truncation drops: {e}")))?;
        let before = next;
        for f in mirrorlog::format::frames(&read.records) {
            let h = f.header;
            let (first, last) = (h.base_offset.0.max(next), h.last_offset().0.min(to - 1));
            if last >= first {
                // A batch cut by the range counts its offsets in it (each offset one record).
                records += if first == h.base_offset.0 && last == h.last_offset().0 {
                    i64::from(h.records_count.max(0))
                } else {
                    last - first + 1
                };
            }
            next = next.max(h.last_offset().0.saturating_add(1));
        }
        if next == before {
            break;
        }
    }
    Ok(records)
}

/// Why a local topic whose id is `local_id` does not share its lineage with the source.
fn unrelated(
    lineage: &Lineage<'_>,
    local_id: &[u8; 16],
    source_id: Option<&uuid::Uuid>,
) -> Option<String> {
    if let (Some(was), Some(now)) = (lineage.recorded_cluster, lineage.source_cluster) {
        if was != now {
            return Some(format!(
                "mirror {} recorded source cluster {was:?}, and this source is {now:?}",
                lineage.name
            ));
        }
    }
    let local = uuid::Uuid::from_bytes(*local_id);
    match source_id {
        Some(s) if !local.is_nil() && *s == local => None,
        Some(s) => Some(format!(
            "the local topic (id {local}) is not the source's (id {s}): it was never mirrored \
             from or to it"
        )),
        None => Some("the source gives no topic id to check the local topic against".into()),
    }
}

/// Step 3: creates and grows the topics, then starts each partition; a failure undoes the
/// partitions started so far (see the module docs). The partitions started, with where each
/// mirrors from.
///
/// # Errors
/// The step that failed, with what was undone.
pub async fn apply(
    b: &Shared,
    name: &str,
    plan: Plan,
) -> Result<(Vec<Value>, BTreeMap<String, Truncation>), AdminError> {
    // A forced start gives the source's id to a topic whose lineage was not the source's, once
    // every partition started.
    let adopt: BTreeMap<String, uuid::Uuid> = plan
        .parts
        .iter()
        .filter(|p| p.unrelated.is_some())
        .filter_map(|p| Some((p.tp.topic.to_string(), p.source_id?)))
        .collect();
    let mut truncations = BTreeMap::new();
    for p in plan.parts.iter().filter(|p| p.loses > 0) {
        let t = Truncation {
            from: p.log_end,
            to: p.log_end - p.loses,
            records_dropped: p.records_dropped,
            forced: p.unrelated.is_some(),
            at_ms: crate::coordinator::transactions::now_ms(),
        };
        tracing::warn!(mirror = name, partition = %p.tp, from = t.from, to = t.to,
            records_dropped = t.records_dropped, forced = t.forced,
            "a mirror start truncates the local log");
        truncations.insert(p.tp.to_string(), t);
    }
    for (topic, step) in &plan.topics {
        match step {
            TopicStep::Create { count, id } => b
                .create_topic(topic, *count, BTreeMap::new(), *id)
                .await
                .map(|_| ())
                .map_err(|e| failed(format!("creating {topic}: {e}")))?,
            TopicStep::Grow { count } => b
                .grow_topic(topic, *count, None, false)
                .await
                .map_err(|e| failed(format!("adding partitions to {topic}: {e}")))?,
            TopicStep::Keep => {}
        }
    }
    let starts = plan.parts.into_iter().map(|p| (p.tp, p.truncate_to)).chain(
        plan.new_parts
            .into_iter()
            .map(|tp| (tp, MirrorStart::LastStableOffset)),
    );
    let mut started: Vec<TopicPartition> = Vec::new();
    let mut out = Vec::new();
    for (tp, truncate_to) in starts {
        let r = match injected_failure(&tp) {
            Some(e) => Err(e),
            None => b
                .engine
                .start_mirroring(
                    &tp,
                    StartMirroring {
                        source: name.to_string(),
                        truncate_to,
                    },
                )
                .await
                .map_err(|e| e.to_string()),
        };
        match r {
            Ok(at) => {
                let mut v = json!({"topic": tp.topic, "partition": tp.partition, "from": at.0});
                if let Some(t) = truncations.get(&tp.to_string()) {
                    v["truncated"] = json!(t);
                }
                out.push(v);
                started.push(tp);
            }
            Err(e) => {
                let undone = undo(b, &started).await;
                return Err(failed(format!(
                    "{tp}: {e}; the {} partitions this start switched were made writable \
                     again{undone}",
                    started.len()
                )));
            }
        }
    }
    for (topic, id) in adopt {
        b.registry()
            .set_id(&topic, *id.as_bytes())
            .map_err(|e| failed(format!("{topic}: taking the source's topic id: {e}")))?;
    }
    Ok((out, truncations))
}

/// The test hook's failure for `tp` (`crate::test_hooks_enabled`), if it names it.
fn injected_failure(tp: &TopicPartition) -> Option<String> {
    let at = std::env::var("MIRRORLOG_BROKER_FAIL_START_AT").ok()?;
    (crate::test_hooks::enabled() && at == tp.to_string())
        .then(|| "a start failure injected by the test hook".to_string())
}

/// Returns `parts` to local mode (the engine's stop with a new epoch); what could not be.
async fn undo(b: &Shared, parts: &[TopicPartition]) -> String {
    let mut failures = Vec::new();
    for tp in parts {
        let result = match b.engine.state(tp).await {
            Ok(s) => match super::next_epoch(&s) {
                Ok(leader_epoch) => b
                    .engine
                    .stop_mirroring(
                        tp,
                        StopMirroring {
                            leader_epoch,
                            open_transactions: OpenTransactions::Abort,
                        },
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = result {
            failures.push(format!("{tp}: {e}"));
        }
    }
    if failures.is_empty() {
        String::new()
    } else {
        format!(" (except: {})", failures.join("; "))
    }
}

/// Each topic's partition count at the source.
fn source_partitions(view: &source::SourceView, topics: &[String]) -> Result<Vec<i32>, AdminError> {
    topics
        .iter()
        .map(|t| match view.topics.get(t) {
            Some(x) if x.error_code == 0 => {
                i32::try_from(x.leaders.len()).map_err(|_| failed("too many partitions"))
            }
            Some(x) => Err(bad(format!(
                "topic {t} at the source: {}",
                super::fetch_errors::name(x.error_code)
            ))),
            None => Err(bad(format!("topic {t} is not at the source"))),
        })
        .collect()
}

/// How many OffsetForLeaderEpoch rounds a plan asks at most for one partition (each one moves
/// to a lower local epoch, so a log has as many as it has epochs; past this, the plan keeps the
/// lowest point found, which the fetcher's own check refines).
const DIVERGENCE_ROUNDS_MAX: usize = 64;

/// Where `tp` agrees with the source, found as Kafka's follower finds it
/// (`AbstractFetcherThread.getOffsetTruncationState`, the fetcher's `truncate_where_diverged`):
/// the local newest epoch is sent; the source answers the largest epoch it has at or below it
/// and where that ends. When the local log knows that epoch too, the logs agree up to the
/// lower of the two ends. When it does not, they agree at most up to the local end of the
/// largest local epoch below it, and that epoch is asked next.
async fn divergence(
    b: &Shared,
    client: &mut Client,
    tp: &TopicPartition,
    state: &PartitionState,
    leader_epoch: i32,
) -> Result<MirrorStart, AdminError> {
    let Some(mut epoch) = state.latest_epoch else {
        return Ok(MirrorStart::LastStableOffset);
    };
    if state.log_end <= state.log_start {
        return Ok(MirrorStart::LastStableOffset);
    }
    // Where the local log ends once the rounds so far are applied.
    let mut end = state.log_end;
    for _ in 0..DIVERGENCE_ROUNDS_MAX {
        let (source_epoch, source_end) =
            epoch_end_at_source(client, tp, epoch, leader_epoch).await?;
        if source_end < 0 || source_epoch < 0 {
            // No common epoch: nothing local is known to the source.
            return Ok(MirrorStart::Offset(state.log_start));
        }
        let local = b
            .engine
            .epoch_end_offset(tp, source_epoch)
            .await
            .map_err(|e| failed(format!("{tp}: epoch end offset: {e}")))?;
        match agreement(source_epoch, source_end, local, end) {
            Agreement::Known(at) => return Ok(MirrorStart::Offset(at)),
            Agreement::NoCommonEpoch => return Ok(MirrorStart::Offset(state.log_start)),
            Agreement::AtMost {
                end: at,
                epoch: next,
            } => {
                end = at;
                epoch = next;
            }
        }
    }
    Ok(MirrorStart::Offset(end))
}

/// The source's OffsetForLeaderEpoch answer for `tp` at `epoch`: the largest epoch it has at
/// or below it, and where that ends (-1, -1: none).
async fn epoch_end_at_source(
    client: &mut Client,
    tp: &TopicPartition,
    epoch: i32,
    leader_epoch: i32,
) -> Result<(i32, i64), AdminError> {
    let version = client
        .version(ApiKey::OffsetForLeaderEpoch, 2, 4)
        .map_err(|e| failed(e.0))?;
    let mut req = OffsetForLeaderEpochRequest::default();
    req.replica_id = BrokerId(-1);
    let mut t = OffsetForLeaderTopic::default();
    t.topic = topic_name(&tp.topic);
    let mut p = OffsetForLeaderPartition::default();
    p.partition = tp.partition;
    p.current_leader_epoch = leader_epoch;
    p.leader_epoch = epoch;
    t.partitions.push(p);
    req.topics.push(t);
    let ResponseKind::OffsetForLeaderEpoch(r) = client
        .call(
            ApiKey::OffsetForLeaderEpoch,
            version,
            RequestKind::OffsetForLeaderEpoch(req),
        )
        .await
        .map_err(|e| failed(e.0))?
    else {
        return Err(failed("OffsetForLeaderEpoch answered with another API"));
    };
    let answer = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition == tp.partition)
        .ok_or_else(|| failed("OffsetForLeaderEpoch: no answer for the partition"))?;
    if answer.error_code != 0 {
        return Err(failed(format!(
            "OffsetForLeaderEpoch for {tp}: error {}",
            answer.error_code
        )));
    }
    Ok((answer.leader_epoch, answer.end_offset))
}
