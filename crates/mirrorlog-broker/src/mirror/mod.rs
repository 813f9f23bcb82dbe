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
//!   for open transactions and the barrier. The outcome per partition is returned, and kept
//!   (`broker/mirrors-stopped.json`) for `GET /mirrors` until `DELETE /mirrors/NAME`.
//! - **pause** / **resume**: the engine's modes; the fetcher skips paused partitions.
//! - **report** (`report.rs`): what `GET /mirrors` and `/health` show of each mirror.
//!
//! The pipeline (what to ask and when, and each partition's destination side: its appends,
//! realignment, truncation, backoff and lag) is the engine's `mirror::Pipeline`, the same code
//! the engine's `MirrorLink` runs; this module is what a mirror of a Kafka cluster over the
//! wire adds to it: the source as a `Source` (`wire_source.rs`), its metadata and the syncs.

pub mod acl_sync;
mod answers;
pub mod fetch_errors;
pub mod fetch_session;
pub mod fetcher;
pub mod group_sync;
mod report;
pub mod requests;
pub mod security;
pub mod source;
mod start;
pub mod sync_error;
pub mod topic_sync;
pub mod wire_source;

pub use mirrorlog::mirror::destination::PartStatus;
pub use security::SourceSecurity;

use mirrorlog::mirror::destination::{self as destination, Landed};

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
    /// How often the source's ACLs are synced, in ms (`None`: [`acl_sync::ACL_SYNC_INTERVAL`];
    /// 0: not synced).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl_sync_ms: Option<u64>,
    /// The ACLs synced, when not those of the mirrored topics and groups (`acl_sync.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl_filters: Option<Vec<acl_sync::AclFilterSpec>>,
    /// Remove every ACL here in scope that the source does not have, not only those the
    /// sync created.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub acl_prune: bool,
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
    /// How often ACLs are synced, in ms (0: not).
    pub acl_interval_ms: Option<u64>,
    /// The ACLs synced (`Some(None)`: back to the mirrored topics' and groups').
    pub acl_filters: Option<Option<Vec<acl_sync::AclFilterSpec>>>,
    /// Whether ACLs here that the source lacks are removed.
    pub acl_prune: Option<bool>,
    /// How the source is reached (`None`: as before; a new mirror: plaintext).
    pub security: Option<SourceSecurity>,
}

/// What a fetcher leaves to the next one of its mirror (a pause, a resume, topics added).
#[derive(Default)]
struct Known {
    /// Its partitions' status.
    parts: Vec<PartStatus>,
    /// Its topics' config syncs.
    configs: BTreeMap<String, topic_sync::ConfigSync>,
}

struct Running {
    /// When its fetcher started.
    started: std::time::Instant,
    status: Arc<Mutex<Vec<PartStatus>>>,
    /// Each topic's config sync.
    config_syncs: topic_sync::ConfigSyncs,
    /// Its fetch answers' times from arrival to durable (`mirror::destination::Landed`).
    landed: Arc<Landed>,
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

/// A mirror a failover stopped, kept in `broker/mirrors-stopped.json` and listed by
/// `GET /mirrors` (under `stopped`) until `DELETE /mirrors/NAME` or a new start of that name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoppedMirror {
    /// Its source, as it was.
    pub bootstrap: String,
    /// Its topics.
    pub topics: Vec<String>,
    /// When it was stopped (Unix ms).
    pub stopped_at_ms: u64,
    /// The stop's outcome per partition (leader epoch, last mirrored offset, barrier offset,
    /// producers aborted), as `POST /mirrors/NAME/stop` answered it.
    pub outcome: Vec<Value>,
}

/// Every mirror of this broker.
pub struct Mirrors {
    doc: Document,
    specs: BTreeMap<String, MirrorSpec>,
    running: BTreeMap<String, Running>,
    stopped_doc: Document,
    stopped: BTreeMap<String, StoppedMirror>,
    /// Which ACLs each mirror's sync created, and its status (`acl_sync.rs`).
    acls: Arc<acl_sync::AclLedger>,
}

impl Mirrors {
    /// Loads `mirrors.json` from `dir` (nothing runs until [`Mirrors::resume_all`]), and the
    /// stopped mirrors' records (a record that does not read back is logged and left out: it
    /// describes, it does not run).
    pub fn open(dir: &std::path::Path) -> Result<Self, StoreError> {
        let doc = Document::new(dir, "mirrors.json")?;
        let specs = doc.load()?.unwrap_or_default();
        let stopped_doc = Document::new(dir, "mirrors-stopped.json")?;
        let stopped = stopped_doc.load().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "stopped mirrors' records left out");
            None
        });
        Ok(Mirrors {
            doc,
            specs,
            running: BTreeMap::new(),
            stopped_doc,
            stopped: stopped.unwrap_or_default(),
            acls: Arc::new(acl_sync::AclLedger::open(dir)?),
        })
    }

    fn save_stopped(&self) -> Result<(), AdminError> {
        self.stopped_doc
            .store(&self.stopped)
            .map_err(|e| failed(e.to_string()))
    }

    /// Forgets a stopped mirror's record (`DELETE /mirrors/NAME`). A mirror that runs is not
    /// deleted: 409, stop it first.
    pub fn delete(&mut self, name: &str) -> Result<Value, AdminError> {
        if self.specs.contains_key(name) {
            return Err(AdminError {
                status: 409,
                message: format!(
                    "mirror {name} is not stopped: stop it first (POST /mirrors/{name}/stop)"
                ),
            });
        }
        if self.stopped.remove(name).is_none() {
            return Err(AdminError {
                status: 404,
                message: format!("no mirror {name}"),
            });
        }
        self.save_stopped()?;
        Ok(json!({"deleted": name}))
    }

    /// Starts a fetcher for every stored mirror (at broker start).
    pub fn resume_all(&mut self, b: &Shared) {
        let names: Vec<String> = self.specs.keys().cloned().collect();
        for name in names {
            self.spawn(b, &name, Known::default());
        }
    }

    /// Starts the fetcher of `name`. A restart (a pause, a resume, topics added) carries the
    /// partitions' status over from `known`, the last fetcher's: counters keep counting, and
    /// what the source last said stays with its age (a lag is shown only from a fresh answer).
    fn spawn(&mut self, b: &Shared, name: &str, known: Known) {
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
        let mut parts_known: BTreeMap<TopicPartition, PartStatus> =
            known.parts.into_iter().map(|s| (s.tp.clone(), s)).collect();
        let mut parts = Vec::new();
        for t in &spec.topics {
            if let Some(topic) = b.registry().get(t) {
                for p in 0..topic.partitions {
                    let tp = TopicPartition::new(t, p);
                    parts.push(match parts_known.remove(&tp) {
                        Some(s) => s.restarted(),
                        None => PartStatus::new(tp),
                    });
                }
            }
        }
        let status = Arc::new(Mutex::new(parts));
        let landed = Arc::new(Landed::default());
        let config_syncs: topic_sync::ConfigSyncs = Arc::new(Mutex::new(known.configs));
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
            acl_sync: spec
                .acl_sync_ms
                .map_or(Some(acl_sync::ACL_SYNC_INTERVAL), |ms| {
                    (ms > 0).then(|| std::time::Duration::from_millis(ms.max(100)))
                }),
            acl_filters: spec
                .acl_filters
                .as_ref()
                .map(|f| f.iter().map(acl_sync::AclFilterSpec::filter).collect()),
            acl_prune: spec.acl_prune,
            acl_ledger: self.acls.clone(),
            status: status.clone(),
            config_syncs: config_syncs.clone(),
            landed: landed.clone(),
            stop: rx,
        }));
        tracing::info!(mirror = name, bootstrap = %spec.bootstrap, topics = ?spec.topics, "mirror fetcher started");
        self.running.insert(
            name.to_string(),
            Running {
                started: std::time::Instant::now(),
                status,
                config_syncs,
                landed,
                groups,
                stop,
                task,
            },
        );
    }

    /// Stops the fetcher of `name`, once its appends in flight resolve; its partitions' last
    /// status.
    async fn halt(&mut self, name: &str) -> Known {
        let Some(r) = self.running.remove(name) else {
            return Known::default();
        };
        let _ = r.stop.send(true);
        let _ = r.task.await;
        let parts = destination::lock(&r.status).clone();
        let configs = r
            .config_syncs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Known { parts, configs }
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
        if let Some(Some(filters)) = &sync.acl_filters {
            if filters.len() > acl_sync::ACL_FILTERS_MAX {
                return Err(bad(format!(
                    "acl_filters: {} filters, at most {} (each is a DescribeAcls request to the \
                     source every round)",
                    filters.len(),
                    acl_sync::ACL_FILTERS_MAX
                )));
            }
            for f in filters {
                f.filter().map_err(|e| bad(e.to_string()))?;
            }
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
            acl_sync_ms: None,
            acl_filters: None,
            acl_prune: false,
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
        let known = self.halt(name).await;
        let spec = self.specs.entry(name.to_string()).or_insert(MirrorSpec {
            bootstrap: bootstrap.to_string(),
            topics: Vec::new(),
            topic_ids: BTreeMap::new(),
            config_exclude: None,
            config_sync_ms: None,
            group_sync_ms: None,
            acl_sync_ms: None,
            acl_filters: None,
            acl_prune: false,
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
        if sync.acl_interval_ms.is_some() {
            spec.acl_sync_ms = sync.acl_interval_ms;
        }
        if let Some(filters) = sync.acl_filters {
            spec.acl_filters = filters;
        }
        if let Some(prune) = sync.acl_prune {
            spec.acl_prune = prune;
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
        // A stopped mirror's record of this name is replaced by the mirror now started.
        if self.stopped.remove(name).is_some() {
            self.save_stopped()?;
        }
        self.spawn(b, name, known);
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
        // The ACLs it synced stay in force, as the destination's own.
        self.acls
            .forget(name)
            .map_err(|e| failed(format!("the mirror's ACL record: {e}")))?;
        let stopped_at_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.stopped.insert(
            name.to_string(),
            StoppedMirror {
                bootstrap: spec.bootstrap.clone(),
                topics: spec.topics.clone(),
                stopped_at_ms,
                outcome: out.clone(),
            },
        );
        self.save_stopped()?;
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
        let known = self.halt(name).await;
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
        self.spawn(b, name, known);
        Ok(json!({"mirror": name, if pause {"paused"} else {"resumed"}: changed}))
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
