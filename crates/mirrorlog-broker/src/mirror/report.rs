//! The operator's view of the mirrors (`GET /mirrors`, `/health`): each mirror's state, each
//! partition's ends, lag and why it is not progressing, the group syncs, and the stopped
//! mirrors' records. What is shown is true: a lag is known only from a fresh answer
//! ([`super::destination::ANSWER_FRESH`]), a paused mirror says paused, a source that serves
//! nothing makes the mirror `unreachable`.

use super::{mode_name, partitions, Mirrors, PartStatus};
use crate::broker::Shared;
use crate::metrics::snapshot::{MirrorAcls, MirrorPartition};
use mirrorlog::engine::{Mode, TopicPartition};
use mirrorlog::mirror::destination::{self, LandedSummary};
use serde_json::{json, Value};
use std::collections::BTreeMap;

impl Mirrors {
    /// Per group the sync has seen: when it was last synced (Unix ms), the offsets it committed
    /// here, and its last error.
    fn groups_status(&self, name: &str) -> Value {
        let Some(r) = self.running.get(name) else {
            return json!([]);
        };
        let groups = r
            .groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Value::Array(
            groups
                .iter()
                .map(|(group, g)| {
                    json!({
                        "group": group,
                        "synced_at_ms": g.synced_at.and_then(|t| {
                            t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_millis() as u64)
                        }),
                        "offsets_synced": g.offsets_synced,
                        "skipped_active": g.skipped_active,
                        "last_error": g.last_error,
                    })
                })
                .collect(),
        )
    }

    /// The ACL sync of `name`: its settings, when it last synced (Unix ms), the source's ACLs
    /// in scope then, the ACLs here it created (held now, added and removed in all), and its
    /// last error.
    fn acl_status(&self, name: &str, spec: &super::MirrorSpec) -> Value {
        let (s, held) = self.acls.view(name);
        let interval = spec.acl_sync_ms.unwrap_or(
            u64::try_from(super::acl_sync::ACL_SYNC_INTERVAL.as_millis()).unwrap_or(u64::MAX),
        );
        json!({
            "enabled": interval > 0,
            "interval_ms": interval,
            "scope": if spec.acl_filters.is_some() { "filters" } else { "mirrored topics and groups" },
            "filters": spec.acl_filters,
            "prune": spec.acl_prune,
            "synced_at_ms": s.synced_at.and_then(|t| {
                t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_millis() as u64)
            }),
            "at_source": s.at_source,
            "unreadable_at_source": s.unreadable,
            "held": held,
            // The record of the ACLs the syncs made did not read back at start (set aside).
            "record_damaged": self.acls.damaged(),
            "added": s.added,
            "removed": s.removed,
            "last_error": s.last_error,
        })
    }

    /// Every mirror with each partition's mode, ends and lag.
    pub async fn status(&self, b: &Shared) -> Value {
        self.view(b).await.json
    }

    /// What `GET /mirrors` shows, and the same figures typed for `GET /metrics`.
    async fn view(&self, b: &Shared) -> View {
        let mut typed = View::default();
        let mut mirrors = Vec::new();
        for (name, spec) in &self.specs {
            let status: Vec<PartStatus> = self
                .running
                .get(name)
                .map(|r| {
                    r.status
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone()
                })
                .unwrap_or_default();
            // Each partition's status found through a map, not a scan per partition.
            let by_tp: BTreeMap<&TopicPartition, &PartStatus> =
                status.iter().map(|s| (&s.tp, s)).collect();
            let configs = self
                .running
                .get(name)
                .map(|r| {
                    r.config_syncs
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone()
                })
                .unwrap_or_default();
            let mut parts = Vec::new();
            let started = self.running.get(name).map(|r| r.started);
            let running = started.is_some();
            let now = std::time::Instant::now();
            let mut worst: Option<(u64, TopicPartition)> = None;
            let (mut paused, mut answering) = (0usize, 0usize);
            for tp in partitions(b, spec) {
                let s = by_tp.get(&tp).copied();
                let config = configs.get(&tp.topic);
                let state = b.engine.state(&tp).await;
                // How long the source has been silent for this partition while its fetcher
                // runs (`None`: not running).
                let silent = s.zip(started).map(|(s, since)| s.silent_for(since, now));
                let fresh = running && s.is_some_and(|s| s.fresh(now));
                let stalled = stalled_reason(state.as_ref().map(|s| &s.mode), s, running, silent);
                let state = state.ok();
                if state
                    .as_ref()
                    .is_some_and(|st| matches!(&st.mode, Mode::Paused { source } if source == name))
                {
                    paused += 1;
                } else if silent.is_some_and(|d| d <= destination::ANSWER_FRESH) {
                    // Answered lately, or its fetcher started lately.
                    answering += 1;
                }
                let log_end = state.as_ref().map_or(-1, |s| s.log_end.0);
                let source_hw = s.map_or(-1, |s| s.source_high_watermark);
                let durable_end = state.as_ref().map_or(-1, |s| s.durable_end.0);
                // Known only from a fresh answer: else unknown (null), beside the answer's age.
                let lag_ms = s.filter(|_| fresh).and_then(|s| s.lag_ms(durable_end, now));
                let is_paused = state
                    .as_ref()
                    .is_some_and(|st| matches!(&st.mode, Mode::Paused { .. }));
                // A bound that holds when the lag is not known: a record the source
                // acknowledged after its last answer is younger than that answer's age, and
                // the older ones are what `lag_ms` counts. So it rises while the source is
                // silent or the partition paused; with fresh answers it is `lag_ms`.
                let since_ms = |t: std::time::Instant| {
                    u64::try_from(now.saturating_duration_since(t).as_millis()).unwrap_or(u64::MAX)
                };
                let lag_ms_at_most = match lag_ms {
                    Some(ms) if !is_paused => Some(ms),
                    // The status outlives a pause (its fetcher's restart), so a paused
                    // partition's bound runs from its last answer before the pause.
                    _ => s.and_then(|s| {
                        let seen = s.lag_ms(durable_end, now).unwrap_or(0);
                        Some(seen.max(since_ms(s.answered_at?)))
                    }),
                };
                let lag = (fresh && source_hw >= 0).then(|| (source_hw - log_end).max(0));
                if let Some(ms) = lag_ms {
                    if worst.as_ref().is_none_or(|(w, _)| ms > *w) {
                        worst = Some((ms, tp.clone()));
                    }
                }
                let lag_bytes = lag.and_then(|l| s.and_then(|s| s.lag_bytes(l)));
                typed.partitions.push(MirrorPartition {
                    mirror: name.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    mode: state
                        .as_ref()
                        .map(|s| mode_name(&s.mode))
                        .unwrap_or_default(),
                    lag_records: lag,
                    lag_bytes,
                    lag_ms: lag_ms_at_most,
                    bytes_fetched: s.map_or(0, |s| s.bytes_fetched),
                    bytes_written: s.map_or(0, |s| s.bytes_written),
                    errors: s.map(|s| s.errors_by_kind.clone()).unwrap_or_default(),
                    stalled: stalled.is_some(),
                });
                parts.push(json!({
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "mode": state.as_ref().map(|s| mode_name(&s.mode)),
                    "log_end": log_end,
                    // The durable end here (what a consumer reads up to; the lag in time is
                    // measured from it).
                    "durable_end": durable_end,
                    // KIP-1279's last mirrored offset (LMO), as the stop reports it: the end
                    // of what was mirrored, the offset a failback truncates to (design.md §Mirroring).
                    "last_mirrored_offset": log_end,
                    "source_high_watermark": source_hw,
                    "source_log_start": s.map_or(-1, |s| s.source_log_start),
                    // Records behind the source's high watermark; null unless the source
                    // answered within `ANSWER_FRESH` (10 s).
                    "lag": lag,
                    // The lag in bytes: `lag` times the bytes per offset this partition
                    // fetched (an estimate; 0 when caught up, null when `lag` is).
                    "lag_bytes": lag_bytes,
                    // How far behind the source in time the durable end is (README, "Lag in
                    // time"); null before the source's first answer or when it is not fresh.
                    "lag_ms": lag_ms,
                    // At most this far behind in time: `lag_ms` while answers are fresh and
                    // the partition fetched; else a bound from the last answer's age that rises
                    // while the source is silent or the partition paused (null: no answer yet).
                    "lag_ms_at_most": lag_ms_at_most,
                    // How long since the source last answered it (null: never).
                    "source_answer_age_ms": s.and_then(|s| s.answered_at).map(|t| {
                        now.saturating_duration_since(t).as_millis() as u64
                    }),
                    "fetches": s.map_or(0, |s| s.fetches),
                    "batches": s.map_or(0, |s| s.batches_appended),
                    "bytes": s.map_or(0, |s| s.bytes_fetched),
                    // Record bytes appended here and durable.
                    "bytes_written": s.map_or(0, |s| s.bytes_written),
                    "realigns": s.map_or(0, |s| s.realigns),
                    "truncations": s.map_or(0, |s| s.truncations),
                    // The last truncation a start (or failback) performed here, if any.
                    "start_truncation": spec.truncations.get(&tp.to_string()),
                    // When the topic's configs were last synced from the source (Unix ms).
                    "config_synced_at_ms": config.and_then(|c| c.synced).and_then(|t| {
                        t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_millis() as u64)
                    }),
                    "config_sync_error": config.and_then(|c| c.error.clone()),
                    "source_leader": s.map_or(-1, |s| s.source_leader),
                    "source_leader_epoch": s.map_or(-1, |s| s.source_leader_epoch),
                    "fetch_requests": s.map_or(0, |s| s.fetch_requests),
                    "retries": s.map_or(0, |s| s.retries),
                    // How long its next request still waits out its backoff (0: none).
                    "backoff_ms": s.and_then(|s| s.backoff_until).map_or(0, |t| {
                        t.saturating_duration_since(std::time::Instant::now()).as_millis() as u64
                    }),
                    "errors": s.map_or(0, |s| s.errors),
                    // By kind: the source's Kafka error name, network, metadata or local.
                    "errors_by_kind": s.map(|s| s.errors_by_kind.clone()).unwrap_or_default(),
                    "last_error": s.and_then(|s| s.last_error.clone()),
                    "stalled": stalled,
                }));
            }
            let total = parts.len();
            let state = mirror_state(running, total, paused, answering);
            typed.states.push((name.clone(), state.to_string()));
            let (acls, held) = self.acls.view(name);
            typed.acl_syncs.push(MirrorAcls {
                mirror: name.clone(),
                // Off, or with no authorizer here (nothing to sync into): no series.
                enabled: spec.acl_sync_ms != Some(0) && b.authorizer.is_some(),
                held: held as u64,
                synced_at: acls.synced_at.and_then(|t| {
                    t.duration_since(std::time::UNIX_EPOCH)
                        .ok()
                        .map(|d| d.as_secs_f64())
                }),
                failing: acls.last_error.is_some(),
            });
            mirrors.push(json!({
                "name": name,
                "bootstrap": spec.bootstrap,
                "topics": spec.topics,
                // "running", "paused" (every partition), "unreachable" (no partition answered
                // within 10 s) or "not running".
                "state": state,
                // Fetching: running and not every partition paused.
                "running": running && !(total > 0 && paused == total),
                "partitions": parts,
                // The partition furthest behind in time (null: no answer yet).
                "worst": worst.map(|(ms, tp)| json!({
                    "topic": tp.topic, "partition": tp.partition, "lag_ms": ms,
                })),
                // KIP-1279's group offset sync, per group (`group_sync.rs`).
                "groups": self.groups_status(name),
                // The ACL sync (`acl_sync.rs`).
                "acl_sync": self.acl_status(name, spec),
                // From each fetch answer's arrival to all its appends durable, since the
                // fetcher started (`mirror::destination::Landed`); null while not running.
                "fetch_to_durable_us": self.running.get(name).map(|r| summary_json(&r.landed.summary())),
            }));
        }
        let stopped: Vec<Value> = self
            .stopped
            .iter()
            .map(|(name, s)| {
                json!({
                    "name": name,
                    "state": "stopped",
                    "bootstrap": s.bootstrap,
                    "topics": s.topics,
                    "stopped_at_ms": s.stopped_at_ms,
                    "outcome": s.outcome,
                })
            })
            .collect();
        typed.json = json!({"mirrors": mirrors, "stopped": stopped});
        typed
    }
}

impl Mirrors {
    /// The mirrors whose fetcher runs and whose source answered none of their unpaused
    /// partitions within [`destination::ANSWER_FRESH`]: name and why, for `/health`.
    pub async fn unreachable(&self, b: &Shared) -> Vec<Value> {
        let all = self.status(b).await;
        all["mirrors"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .filter(|m| m["state"] == "unreachable")
                    .map(|m| {
                        let why = m["partitions"]
                            .as_array()
                            .and_then(|ps| ps.iter().find_map(|p| p["stalled"].as_str()))
                            .unwrap_or("the source has not served it");
                        json!({"name": m["name"], "reason": why})
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A mirror's state as `GET /mirrors` names it, from whether its fetcher runs, its
/// partitions, those paused, and the others the source answered within
/// [`destination::ANSWER_FRESH`] (or whose fetcher started within it).
fn mirror_state(running: bool, total: usize, paused: usize, answering: usize) -> &'static str {
    if !running {
        "not running"
    } else if total > 0 && paused == total {
        "paused"
    } else if total > paused && answering == 0 {
        "unreachable"
    } else {
        "running"
    }
}

/// Why a partition is not progressing, or `None` while it mirrors: the fetcher's stall, else
/// its mode (failed, paused, local), its mirror not running, the engine's refusal, or a source
/// silent for it past [`destination::ANSWER_FRESH`] (`silent`: for how long, while running).
fn stalled_reason(
    mode: Result<&Mode, &mirrorlog::engine::EngineError>,
    status: Option<&PartStatus>,
    running: bool,
    silent: Option<std::time::Duration>,
) -> Option<String> {
    if let Some(reason) = status.and_then(|s| s.stalled.clone()) {
        return Some(reason);
    }
    match mode {
        Err(e) => Some(format!("partition unavailable: {e}")),
        Ok(mode) => match mode {
            Mode::Failed { reason } => Some(format!("failed: {reason}")),
            Mode::Paused { .. } => Some("paused".into()),
            Mode::Local => Some("not mirroring: the partition is local".into()),
            Mode::Mirroring { .. } if !running => Some("the mirror is not running".into()),
            Mode::Mirroring { .. } => match silent.filter(|d| *d > destination::ANSWER_FRESH) {
                None => None,
                Some(d) => {
                    let last = status.and_then(|s| s.last_error.as_deref());
                    Some(format!(
                        "the source has not served it for {} s{}",
                        d.as_secs(),
                        last.map_or_else(String::new, |e| format!(": {e}"))
                    ))
                }
            },
        },
    }
}

impl Mirrors {
    /// What `GET /metrics` shows of the mirrors: each mirror's state and each partition, read
    /// from the same view as `GET /mirrors` (so both say the same: a lag unknown there is
    /// absent here).
    pub async fn metrics_view(
        &self,
        b: &Shared,
    ) -> (Vec<(String, String)>, Vec<MirrorPartition>, Vec<MirrorAcls>) {
        let view = self.view(b).await;
        (view.states, view.partitions, view.acl_syncs)
    }
}

/// The mirrors as `GET /mirrors` shows them, and typed for `GET /metrics`.
#[derive(Default)]
struct View {
    /// `GET /mirrors`' answer.
    json: Value,
    /// Each mirror's name and state.
    states: Vec<(String, String)>,
    /// Each mirrored partition.
    partitions: Vec<MirrorPartition>,
    /// Each mirror's ACL sync.
    acl_syncs: Vec<MirrorAcls>,
}

/// A mirror's fetch-to-durable times as `GET /mirrors` shows them (µs).
fn summary_json(s: &LandedSummary) -> Value {
    json!({
        "answers": s.answers,
        "p50": s.p50_us,
        "p99": s.p99_us,
        "p999": s.p999_us,
        "max": s.max_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_mirror_is_named_by_what_its_partitions_do() {
        assert_eq!(mirror_state(false, 3, 0, 3), "not running");
        assert_eq!(mirror_state(true, 3, 3, 0), "paused");
        assert_eq!(mirror_state(true, 3, 1, 0), "unreachable");
        assert_eq!(mirror_state(true, 3, 1, 1), "running");
        assert_eq!(
            mirror_state(true, 0, 0, 0),
            "running",
            "nothing to fetch yet"
        );
    }

    #[test]
    fn a_silent_source_stalls_a_mirroring_partition_after_the_fresh_window() {
        let tp = TopicPartition::new("t", 0);
        let mirroring = Mode::Mirroring {
            source: "east".into(),
        };
        let state = Ok(&mirroring);
        let mut s = PartStatus::new(tp);
        s.last_error = Some("connection refused".into());
        let fresh = Some(destination::ANSWER_FRESH);
        assert_eq!(stalled_reason(state, Some(&s), true, fresh), None);
        let late = Some(destination::ANSWER_FRESH + Duration::from_secs(2));
        assert_eq!(
            stalled_reason(state, Some(&s), true, late).as_deref(),
            Some("the source has not served it for 12 s: connection refused")
        );
        assert_eq!(
            stalled_reason(state, Some(&s), false, None).as_deref(),
            Some("the mirror is not running")
        );
    }
}
