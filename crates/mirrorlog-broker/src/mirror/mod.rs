//! Mirrors: named source clusters this broker mirrors topics from, kept in
//! `broker/mirrors.json` (name → bootstrap address and topics) and resumed at start.
//!
//! - **start** (initial mirroring and failback): the source's Metadata gives each topic's
//!   partition count; a missing local topic is created with it. Each partition is truncated to
//!   where it agrees with the source, found as a Kafka follower finds it: the local log's newest
//!   epoch is sent to the source as OffsetForLeaderEpoch, and the answer's end offset (at most
//!   the local end) is the truncation point (`MirrorStart::Offset`). After a failover A→B, A's
//!   newest epoch ends in B's log where B stopped mirroring, so a failback B→A truncates A to
//!   B's `last_mirrored_offset` without the operator giving it. An empty local log starts at
//!   its LSO; the fetcher realigns it if the source's log start is past it (design.md §Mirroring).
//! - **stop** (failover): the fetcher is stopped and its appends drained, then every partition
//!   gets the engine's atomic stop with a bumped leader epoch (newest epoch + 1), ABORT markers
//!   for open transactions and the barrier. The outcome per partition is returned.
//! - **pause** / **resume**: the engine's modes; the fetcher skips paused partitions.

mod answers;
pub mod batches;
pub mod fetch_errors;
pub mod fetch_session;
pub mod fetcher;
pub mod group_sync;
pub mod landing;
pub mod local;
pub mod requests;
pub mod security;
pub mod source;
mod start;
pub mod status;
pub mod sync_error;
pub mod topic_sync;

pub use security::SourceSecurity;
pub use status::PartStatus;

use crate::broker::Shared;
use crate::storage::store::{Document, StoreError};
use mirrorlog::engine::{Mode, OpenTransactions, PartitionState, StopMirroring, TopicPartition};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// One mirror as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorSpec {
    /// The source broker, `HOST:PORT`.
    pub bootstrap: String,
    /// Topics mirrored from it.
    pub topics: Vec<String>,
    /// Each topic's id at the source when its mirroring started (Metadata v10+): a topic
    /// deleted and recreated at the source under the same name has another, and its partitions
    /// stop instead of splicing two logs.
    #[serde(default)]
    pub topic_ids: BTreeMap<String, uuid::Uuid>,
    /// Topic configs not synced from the source (`None`: [`topic_sync::EXCLUDED_DEFAULT`]).
    #[serde(default)]
    pub config_exclude: Option<Vec<String>>,
    /// How often the source's topic configs are read again, in ms (`None`:
    /// [`topic_sync::CONFIG_SYNC_INTERVAL`]).
    #[serde(default)]
    pub config_sync_ms: Option<u64>,
    /// How often the source's group offsets are synced, in ms (`None`:
    /// [`group_sync::GROUP_SYNC_INTERVAL`]).
    #[serde(default)]
    pub group_sync_ms: Option<u64>,
    /// How the source is reached (TLS, SASL).
    #[serde(flatten)]
    pub security: SourceSecurity,
    /// The source's cluster id when it was last started (Metadata v2+): a later start that
    /// would truncate against another cluster is refused without `force`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// The last truncation a start performed on each partition (`TOPIC-PARTITION`), as
    /// `GET /mirrors` shows it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub truncations: BTreeMap<String, start::Truncation>,
}

/// What `POST /mirrors` may set besides the source and topics (`None`: as before, or the
/// default).
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Answer the plan (what each partition would lose) and change nothing.
    pub dry_run: bool,
    /// Truncate partitions whose lineage is not the source's (`start.rs`).
    pub force: bool,
    /// Configs not synced.
    pub exclude: Option<Vec<String>>,
    /// How often, in ms.
    pub interval_ms: Option<u64>,
    /// How often group offsets are synced, in ms.
    pub group_interval_ms: Option<u64>,
    /// How the source is reached (`None`: as before; a new mirror: plaintext).
    pub security: Option<SourceSecurity>,
}

struct Running {
    status: Arc<Mutex<Vec<PartStatus>>>,
    /// Its fetch answers' times from arrival to durable (`landing.rs`).
    landed: Arc<landing::Landed>,
    groups: Arc<Mutex<BTreeMap<String, group_sync::GroupSyncStatus>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// An operator request that could not be carried out.
#[derive(Debug)]
pub struct AdminError {
    /// HTTP status.
    pub status: u16,
    /// Why.
    pub message: String,
}

fn bad(message: impl Into<String>) -> AdminError {
    AdminError {
        status: 400,
        message: message.into(),
    }
}

fn failed(message: impl Into<String>) -> AdminError {
    AdminError {
        status: 500,
        message: message.into(),
    }
}

/// Every mirror of this broker.
pub struct Mirrors {
    doc: Document,
    specs: BTreeMap<String, MirrorSpec>,
    running: BTreeMap<String, Running>,
}

impl Mirrors {
    /// Loads `mirrors.json` from `dir` (nothing runs until [`Mirrors::resume_all`]).
    pub fn open(dir: &std::path::Path) -> Result<Self, StoreError> {
        let doc = Document::new(dir, "mirrors.json")?;
        let specs = doc.load()?.unwrap_or_default();
        Ok(Mirrors {
            doc,
            specs,
            running: BTreeMap::new(),
        })
    }

    /// Starts a fetcher for every stored mirror (at broker start).
    pub fn resume_all(&mut self, b: &Shared) {
        let names: Vec<String> = self.specs.keys().cloned().collect();
        for name in names {
            self.spawn(b, &name);
        }
    }

    fn spawn(&mut self, b: &Shared, name: &str) {
        let Some(spec) = self.specs.get(name) else {
            return;
        };
        let security = match spec.security.client() {
            Ok(s) => s,
            Err(e) => {
                // Its CA file went away since it was started: not run (its partitions show
                // "the mirror is not running"); a new POST /mirrors with a usable one runs it.
                tracing::error!(mirror = name, error = %e, "mirror not started");
                return;
            }
        };
        let mut parts = Vec::new();
        for t in &spec.topics {
            if let Some(topic) = b.registry().get(t) {
                for p in 0..topic.partitions {
                    parts.push(PartStatus::new(TopicPartition::new(t, p)));
                }
            }
        }
        let status = Arc::new(Mutex::new(parts));
        let landed = Arc::new(landing::Landed::default());
        let groups = Arc::new(Mutex::new(BTreeMap::new()));
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(fetcher::run(fetcher::FetcherArgs {
            name: name.to_string(),
            bootstrap: source::bootstrap_list(&spec.bootstrap),
            topic_ids: spec.topic_ids.clone(),
            broker: b.clone(),
            security,
            config_sync_interval: spec
                .config_sync_ms
                .map_or(topic_sync::CONFIG_SYNC_INTERVAL, |ms| {
                    std::time::Duration::from_millis(ms.max(100))
                }),
            config_exclude: spec.config_exclude.clone().unwrap_or_else(|| {
                topic_sync::EXCLUDED_DEFAULT
                    .iter()
                    .map(|s| (*s).to_string())
                    .collect()
            }),
            group_sync_interval: spec
                .group_sync_ms
                .map_or(group_sync::GROUP_SYNC_INTERVAL, |ms| {
                    std::time::Duration::from_millis(ms.max(100))
                }),
            groups_status: groups.clone(),
            status: status.clone(),
            landed: landed.clone(),
            stop: rx,
        }));
        tracing::info!(mirror = name, bootstrap = %spec.bootstrap, topics = ?spec.topics, "mirror fetcher started");
        self.running.insert(
            name.to_string(),
            Running {
                status,
                landed,
                groups,
                stop,
                task,
            },
        );
    }

    async fn halt(&mut self, name: &str) {
        if let Some(r) = self.running.remove(name) {
            let _ = r.stop.send(true);
            let _ = r.task.await;
        }
    }

    /// Stops every fetcher (at shutdown); the stored mirrors resume at the next start.
    pub async fn halt_all(&mut self) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for n in names {
            self.halt(&n).await;
        }
    }

    fn spec(&self, name: &str) -> Result<MirrorSpec, AdminError> {
        self.specs.get(name).cloned().ok_or_else(|| AdminError {
            status: 404,
            message: format!("no mirror {name}"),
        })
    }

    fn save(&self) -> Result<(), AdminError> {
        self.doc
            .store(&self.specs)
            .map_err(|e| failed(e.to_string()))
    }

    /// Starts mirroring `topics` from `bootstrap` under `name` (see the module docs).
    pub async fn start(
        &mut self,
        b: &Shared,
        name: &str,
        bootstrap: &str,
        topics: &[String],
        sync: StartOptions,
    ) -> Result<Value, AdminError> {
        if !crate::storage::topics::valid_name(name) {
            return Err(bad(format!("invalid mirror name {name:?}")));
        }
        if topics.is_empty() {
            return Err(bad("no topics"));
        }
        if let Some(spec) = self.specs.get(name) {
            if spec.bootstrap != bootstrap {
                return Err(bad(format!(
                    "mirror {name} reads from {}, not {bootstrap}",
                    spec.bootstrap
                )));
            }
        }
        let existing = self.specs.get(name);
        let candidate = MirrorSpec {
            bootstrap: bootstrap.to_string(),
            topics: Vec::new(),
            topic_ids: BTreeMap::new(),
            config_exclude: None,
            config_sync_ms: None,
            group_sync_ms: None,
            cluster_id: None,
            truncations: BTreeMap::new(),
            security: sync
                .security
                .clone()
                .or_else(|| existing.map(|s| s.security.clone()))
                .unwrap_or_default(),
        };
        let security = candidate
            .security
            .client()
            .map_err(|e| bad(e.to_string()))?;
        if let Some(login) = &security.sasl {
            login.password.read().map_err(|e| bad(e.to_string()))?;
        }
        let addrs = source::bootstrap_list(bootstrap);
        let view = source::metadata(&addrs, topics, &security)
            .await
            .map_err(|e| AdminError {
                status: 502,
                message: e.0,
            })?;
        let existing_spec_cluster = self.specs.get(name).and_then(|s| s.cluster_id.clone());
        // A topic recreated at the source since this mirror recorded it: its partitions hold
        // the old log, and the new one must not be spliced on.
        if let Some(spec) = self.specs.get(name) {
            for t in topics {
                let now = view.topics.get(t).map(|x| x.topic_id);
                if let (Some(was), Some(now)) = (spec.topic_ids.get(t), now) {
                    if !was.is_nil() && !now.is_nil() && *was != now {
                        return Err(bad(format!(
                            "topic {t} was recreated at the source (id {was}, now {now}): stop mirror {name} before mirroring the new topic"
                        )));
                    }
                }
            }
        }
        let lineage = start::Lineage {
            name,
            recorded_cluster: existing_spec_cluster.as_deref(),
            source_cluster: view.cluster_id.as_deref(),
        };
        let plan = start::plan(b, &view, topics, &security, &lineage).await?;
        let refusals = plan.refusals();
        if sync.dry_run {
            let mut v = plan.to_json();
            v["mirror"] = json!(name);
            v["refused_without_force"] = json!(refusals);
            return Ok(v);
        }
        if !refusals.is_empty() && !sync.force {
            return Err(AdminError {
                status: 409,
                message: format!(
                    "refusing to mirror into topics whose lineage is not the source's (their \
                     records and the source's would be two histories in one log; a dry_run \
                     shows what force would drop): {}",
                    refusals.join("; ")
                ),
            });
        }
        let (started, truncations) = start::apply(b, name, plan).await?;
        self.halt(name).await;
        let spec = self.specs.entry(name.to_string()).or_insert(MirrorSpec {
            bootstrap: bootstrap.to_string(),
            topics: Vec::new(),
            topic_ids: BTreeMap::new(),
            config_exclude: None,
            config_sync_ms: None,
            group_sync_ms: None,
            security: SourceSecurity::default(),
            cluster_id: None,
            truncations: BTreeMap::new(),
        });
        spec.security = candidate.security;
        spec.truncations.extend(truncations);
        if view.cluster_id.is_some() {
            spec.cluster_id.clone_from(&view.cluster_id);
        }
        if sync.exclude.is_some() {
            spec.config_exclude = sync.exclude;
        }
        if sync.interval_ms.is_some() {
            spec.config_sync_ms = sync.interval_ms;
        }
        if sync.group_interval_ms.is_some() {
            spec.group_sync_ms = sync.group_interval_ms;
        }
        for t in topics {
            if !spec.topics.contains(t) {
                spec.topics.push(t.clone());
            }
            if let Some(id) = view.topics.get(t).map(|x| x.topic_id) {
                if !id.is_nil() {
                    spec.topic_ids.insert(t.clone(), id);
                }
            }
        }
        self.save()?;
        self.spawn(b, name);
        Ok(json!({"mirror": name, "started": started}))
    }

    /// Failover: stops the fetcher, then the engine's atomic stop on every partition.
    pub async fn stop(&mut self, b: &Shared, name: &str) -> Result<Value, AdminError> {
        let spec = self.spec(name)?;
        self.halt(name).await;
        let mut out = Vec::new();
        for tp in partitions(b, &spec) {
            let state = state_of(b, &tp).await?;
            let ours = match &state.mode {
                Mode::Mirroring { source } | Mode::Paused { source } => source == name,
                Mode::Failed { .. } => true,
                Mode::Local => false,
            };
            if !ours {
                continue;
            }
            let epoch = next_epoch(&state).map_err(|e| failed(format!("{tp}: {e}")))?;
            let stop = b
                .engine
                .stop_mirroring(
                    &tp,
                    StopMirroring {
                        leader_epoch: epoch,
                        open_transactions: OpenTransactions::Abort,
                    },
                )
                .await
                .map_err(|e| failed(format!("{tp}: {e}")))?;
            out.push(json!({
                "topic": tp.topic,
                "partition": tp.partition,
                "leader_epoch": epoch,
                "last_mirrored_offset": stop.last_mirrored_offset.0,
                "barrier_offset": stop.barrier_offset.0,
                "aborted_producers": stop.aborted_producers,
            }));
        }
        self.specs.remove(name);
        self.save()?;
        tracing::info!(mirror = name, "mirroring stopped (failover)");
        Ok(json!({"mirror": name, "stopped": out}))
    }

    /// Pauses (`pause`) or resumes every partition of a mirror.
    pub async fn pause(
        &mut self,
        b: &Shared,
        name: &str,
        pause: bool,
    ) -> Result<Value, AdminError> {
        let spec = self.spec(name)?;
        self.halt(name).await;
        let mut changed = 0;
        for tp in partitions(b, &spec) {
            let state = state_of(b, &tp).await?;
            let r = match (&state.mode, pause) {
                (Mode::Mirroring { source }, true) if source == name => {
                    Some(b.engine.pause_mirroring(&tp).await)
                }
                (Mode::Paused { source }, false) if source == name => {
                    Some(b.engine.resume_mirroring(&tp).await)
                }
                _ => None,
            };
            if let Some(r) = r {
                r.map_err(|e| failed(format!("{tp}: {e}")))?;
                changed += 1;
            }
        }
        self.spawn(b, name);
        Ok(json!({"mirror": name, if pause {"paused"} else {"resumed"}: changed}))
    }

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

    /// Every mirror with each partition's mode, ends and lag.
    pub async fn status(&self, b: &Shared) -> Value {
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
            let mut parts = Vec::new();
            let running = self.running.contains_key(name);
            let now = std::time::Instant::now();
            let mut worst: Option<(u64, TopicPartition)> = None;
            for tp in partitions(b, spec) {
                let s = status.iter().find(|s| s.tp == tp);
                let state = b.engine.state(&tp).await;
                let stalled = stalled_reason(&state, s, running);
                let state = state.ok();
                let log_end = state.as_ref().map_or(-1, |s| s.log_end.0);
                let source_hw = s.map_or(-1, |s| s.source_high_watermark);
                let durable_end = state.as_ref().map_or(-1, |s| s.durable_end.0);
                let lag_ms = s.and_then(|s| s.lag_ms(durable_end, now));
                if let Some(ms) = lag_ms {
                    if worst.as_ref().is_none_or(|(w, _)| ms > *w) {
                        worst = Some((ms, tp.clone()));
                    }
                }
                parts.push(json!({
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "mode": state.as_ref().map(|s| mode_name(&s.mode)),
                    "log_end": log_end,
                    // KIP-1279's last mirrored offset (LMO), as the stop reports it: the end
                    // of what was mirrored, the offset a failback truncates to (design.md §Mirroring).
                    "last_mirrored_offset": log_end,
                    "source_high_watermark": source_hw,
                    "source_log_start": s.map_or(-1, |s| s.source_log_start),
                    "lag": if source_hw >= 0 { (source_hw - log_end).max(0) } else { -1 },
                    // How far behind the source in time the durable end is (README, "Lag in
                    // time"); null before the source's first answer.
                    "lag_ms": lag_ms,
                    // How long since the source last answered it (null: never).
                    "source_answer_age_ms": s.and_then(|s| s.answered_at).map(|t| {
                        now.saturating_duration_since(t).as_millis() as u64
                    }),
                    "fetches": s.map_or(0, |s| s.fetches),
                    "batches": s.map_or(0, |s| s.batches_appended),
                    "bytes": s.map_or(0, |s| s.bytes_fetched),
                    "realigns": s.map_or(0, |s| s.realigns),
                    "truncations": s.map_or(0, |s| s.truncations),
                    // The last truncation a start (or failback) performed here, if any.
                    "start_truncation": spec.truncations.get(&tp.to_string()),
                    // When the topic's configs were last synced from the source (Unix ms).
                    "config_synced_at_ms": s.and_then(|s| s.config_synced).and_then(|t| {
                        t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_millis() as u64)
                    }),
                    "config_sync_error": s.and_then(|s| s.config_error.clone()),
                    "source_leader": s.map_or(-1, |s| s.source_leader),
                    "source_leader_epoch": s.map_or(-1, |s| s.source_leader_epoch),
                    "fetch_requests": s.map_or(0, |s| s.fetch_requests),
                    "retries": s.map_or(0, |s| s.retries),
                    // How long its next request still waits out its backoff (0: none).
                    "backoff_ms": s.and_then(|s| s.backoff_until).map_or(0, |t| {
                        t.saturating_duration_since(std::time::Instant::now()).as_millis() as u64
                    }),
                    "errors": s.map_or(0, |s| s.errors),
                    "last_error": s.and_then(|s| s.last_error.clone()),
                    "stalled": stalled,
                }));
            }
            mirrors.push(json!({
                "name": name,
                "bootstrap": spec.bootstrap,
                "topics": spec.topics,
                "running": self.running.contains_key(name),
                "partitions": parts,
                // The partition furthest behind in time (null: no answer yet).
                "worst": worst.map(|(ms, tp)| json!({
                    "topic": tp.topic, "partition": tp.partition, "lag_ms": ms,
                })),
                // KIP-1279's group offset sync, per group (`group_sync.rs`).
                "groups": self.groups_status(name),
                // From each fetch answer's arrival to all its appends durable, since the
                // fetcher started (`landing.rs`); null while not running.
                "fetch_to_durable_us": self.running.get(name).map(|r| r.landed.summary()),
            }));
        }
        json!({"mirrors": mirrors})
    }
}

/// The leader epoch a failover stamps: one past the partition's newest (its own or its
/// source's). A source's epoch at `i32::MAX` leaves none to take: refused, never wrapped.
pub fn next_epoch(
    state: &mirrorlog::engine::PartitionState,
) -> Result<i32, sync_error::EpochExhausted> {
    crate::broker::leader_epoch(state)
        .checked_add(1)
        .ok_or(sync_error::EpochExhausted)
}

/// Why a partition is not progressing, or `None` while it mirrors: the fetcher's stall, else
/// its mode (failed, paused, local) or its mirror not running, or the engine's refusal.
fn stalled_reason(
    state: &Result<PartitionState, mirrorlog::engine::EngineError>,
    status: Option<&PartStatus>,
    running: bool,
) -> Option<String> {
    if let Some(reason) = status.and_then(|s| s.stalled.clone()) {
        return Some(reason);
    }
    match state {
        Err(e) => Some(format!("partition unavailable: {e}")),
        Ok(s) => match &s.mode {
            Mode::Failed { reason } => Some(format!("failed: {reason}")),
            Mode::Paused { .. } => Some("paused".into()),
            Mode::Local => Some("not mirroring: the partition is local".into()),
            Mode::Mirroring { .. } if !running => Some("the mirror is not running".into()),
            Mode::Mirroring { .. } => None,
        },
    }
}

async fn state_of(b: &Shared, tp: &TopicPartition) -> Result<PartitionState, AdminError> {
    b.engine
        .state(tp)
        .await
        .map_err(|e| failed(format!("{tp}: {e}")))
}

/// A mode as the admin surface names it.
pub fn mode_name(m: &Mode) -> String {
    match m {
        Mode::Local => "local".into(),
        Mode::Mirroring { source } => format!("mirroring:{source}"),
        Mode::Paused { source } => format!("paused:{source}"),
        Mode::Failed { reason } => format!("failed: {reason}"),
    }
}

fn partitions(b: &Shared, spec: &MirrorSpec) -> Vec<TopicPartition> {
    let reg = b.registry();
    spec.topics
        .iter()
        .filter_map(|t| reg.get(t).map(|topic| (t, topic.partitions)))
        .flat_map(|(t, n)| (0..n).map(move |p| TopicPartition::new(t, p)))
        .collect()
}
