//! The broker's shared state: the engine, the topic registry, the producer-id allocator, the
//! transaction coordinator and the mirrors, and the start-up that repairs what a crash left.
//!
//! Layout of the data directory: `log/` is the engine's (every partition, `mirrorlog verify`
//! and `dump` read it), `broker/` the broker's own documents (`store.rs`).

mod error;

pub use error::BrokerError;

use crate::config::ConfigError;
use crate::coordinator::producer_ids::ProducerIds;
use crate::coordinator::transactions::Coordinator;
use crate::settings::dynamic as broker_configs;
use crate::settings::BrokerConfig;
use crate::storage::damage::{Damage, Kind};
use crate::storage::topics::{self, Registry, TopicState};
use mirrorlog::engine::{Engine, EngineConfig, EngineError, PartitionConfig, TopicPartition};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

/// The shared state (one per process, behind an `Arc`).
pub struct Broker {
    /// The configuration.
    pub config: BrokerConfig,
    /// The engine (shared with the mirror fetchers).
    pub engine: Arc<Engine>,
    /// Topics.
    pub topics: Mutex<Registry>,
    /// Producer ids (async: the coordinator allocates while awaiting the engine).
    pub producer_ids: tokio::sync::Mutex<ProducerIds>,
    /// Transactions (async: its operations await the engine while holding it).
    pub txns: tokio::sync::Mutex<Coordinator>,
    /// Serializes topic creation and deletion (they await the engine between registry writes).
    pub topic_changes: tokio::sync::Mutex<()>,
    /// The ACLs and their decisions, when `authorizer.class.name` is set (`acl/`).
    pub authorizer: Option<crate::acl::Authorizer>,
    /// `queued.max.requests` (`request_queue.rs`).
    pub queue: std::sync::Arc<crate::net::request_queue::RequestQueue>,
    /// `max.connections`, `max.connections.per.ip` in effect (`connection_limits.rs`).
    pub connection_limits: Arc<crate::net::connection_limits::ConnectionLimits>,
    /// What `GET /metrics` counts as it happens (`metrics/`).
    pub metrics: crate::metrics::Metrics,
    /// Group offsets (`groups/`), shared with the transaction coordinator's marker listener.
    pub groups: Arc<crate::coordinator::groups::Groups>,
    /// Classic groups' membership (`coordinator/groups/membership.rs`).
    pub membership: crate::coordinator::groups::membership::Membership,
    /// The dynamic broker configs (`config/dynamic.rs`), stored and in effect.
    dynamic: Mutex<(broker_configs::Store, broker_configs::Levels)>,
    /// What start-up could not load or finish (`damage.rs`): each piece fails alone.
    damage: Mutex<Damage>,
    /// Incremental fetch sessions (`coordinator/fetch_sessions.rs`).
    pub fetch_sessions: Mutex<crate::coordinator::fetch_sessions::FetchSessions>,
}

/// The engine's directory under a data directory.
pub fn log_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("log")
}

/// The broker's own files under a data directory.
pub fn state_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("broker")
}

impl Broker {
    /// Opens the engine (recovering it) and the broker's files. Blocking; call before serving.
    ///
    /// # Errors
    /// A broker document that cannot be read, too few file descriptors for the partitions,
    /// or an engine that does not open.
    pub fn open(config: BrokerConfig) -> Result<Self, BrokerError> {
        let mut ec = EngineConfig::new(log_dir(&config.data_dir)).cluster_id(&config.cluster_id);
        if let Some(n) = config.shards {
            ec = ec.shards(n);
        }
        ec.journal_bytes = config.journal_bytes;
        ec.journal_group_window_us = config.journal_group_window_us;
        ec.retention_check_interval_ms = config.retention_check_interval_ms;
        let dir = state_dir(&config.data_dir);
        let mut damage = Damage::default();
        let (topics, unreadable) = Registry::open(&dir)?;
        for (name, reason) in unreadable {
            damage.mark(
                Kind::Topic,
                &name,
                format!("its entry does not read back: {reason}"),
            );
        }
        // Descriptors for every partition, before the engine opens one (`fd_budget.rs`).
        let partitions: u64 = topics
            .all()
            .iter()
            .map(|(_, t)| u64::try_from(t.partitions_held()).unwrap_or(0))
            .sum();
        let segments = crate::storage::fd_budget::segment_files(&log_dir(&config.data_dir));
        if let Some(warning) = crate::storage::fd_budget::check(
            crate::storage::fd_budget::open_now()?,
            crate::storage::fd_budget::soft_limit()?,
            (partitions, segments),
            config.connections_max as u64,
        )? {
            tracing::warn!("{warning}");
        }
        let engine = Engine::open(ec).map_err(|e| BrokerError::Engine(Box::new(e)))?;
        for (tp, e) in engine.failed_partitions() {
            tracing::error!(partition = %tp, error = %e, "partition failed at open; not served");
        }
        let producer_ids = ProducerIds::open(&dir)?;
        let (mut txns, unreadable) = Coordinator::open(&dir)?;
        for (id, reason) in unreadable {
            damage.mark(
                Kind::Transaction,
                &id,
                format!("its entry does not read back: {reason}"),
            );
        }
        // A transaction's offsets (TxnOffsetCommit) are the group's at its COMMIT marker.
        let groups = Arc::new(crate::coordinator::groups::Groups::default());
        let listener = groups.clone();
        txns.set_listener(Arc::new(move |tp, pid, commit| {
            if &*tp.topic == crate::coordinator::groups::OFFSETS_TOPIC {
                if let Err(e) = listener.complete_txn(tp.partition, pid, commit) {
                    tracing::warn!(partition = %tp, error = %e, "completing a transaction's offsets");
                }
            }
        }));
        let (store, levels) =
            broker_configs::Store::open(&dir, config.password_encoder_secret.as_deref())?;
        let (connections_max, per_ip_max) = broker_configs::connection_limits(&config, &levels);
        let authorizer = if config.authorizer {
            Some(crate::acl::Authorizer::open(&dir, config.acl.clone())?)
        } else {
            None
        };
        Ok(Broker {
            engine: Arc::new(engine),
            topics: Mutex::new(topics),
            producer_ids: tokio::sync::Mutex::new(producer_ids),
            txns: tokio::sync::Mutex::new(txns),
            topic_changes: tokio::sync::Mutex::new(()),
            authorizer,
            queue: crate::net::request_queue::RequestQueue::new(config.queued_max_requests),
            connection_limits: crate::net::connection_limits::ConnectionLimits::new(
                connections_max,
                per_ip_max,
            ),
            metrics: crate::metrics::Metrics::new(config.metrics_enabled),
            dynamic: Mutex::new((store, levels)),
            damage: Mutex::new(damage),
            fetch_sessions: Mutex::new(crate::coordinator::fetch_sessions::FetchSessions::new(
                config.fetch_session_slots,
            )),
            groups,
            membership: crate::coordinator::groups::membership::Membership::new(
                config.group_limits,
                config.consumer_groups,
            ),
            config,
        })
    }

    /// Finishes what a crash left: topics being created get their missing partitions, topics
    /// being deleted lose theirs, transactions being ended get their markers. A topic or a
    /// transaction that cannot be finished is marked damaged (`damage.rs`) and the rest go on:
    /// a restart always comes back.
    pub async fn repair(&self) {
        let all = self.registry().all();
        for (name, topic) in all {
            if let Err(e) = self.finish_topic(&name, &topic).await {
                self.damage().mark(Kind::Topic, &name, e.to_string());
            }
        }
        let stuck = self.txns.lock().await.recover(&self.engine).await;
        for (id, reason) in stuck {
            self.damage().mark(Kind::Transaction, &id, reason);
        }
    }

    /// Finishes one topic's creation, growth or deletion that a crash (or a failure) cut.
    async fn finish_topic(&self, name: &str, topic: &topics::Topic) -> Result<(), BrokerError> {
        match topic.state {
            TopicState::Ready if topic.growing_to.is_some() => {
                let config = self.partition_config(topic)?;
                topics::create_partitions(&self.engine, name, topic.partitions_held(), &config)
                    .await
                    .map_err(BrokerError::partitions("adding partitions"))?;
                self.registry().finish_grow(name)?;
                tracing::info!(topic = %name, "finished adding partitions a crash interrupted");
            }
            TopicState::Ready => {}
            TopicState::Creating => {
                let config = self.partition_config(topic)?;
                topics::create_partitions(&self.engine, name, topic.partitions, &config)
                    .await
                    .map_err(BrokerError::partitions("creating its partitions"))?;
                self.registry().set_state(name, TopicState::Ready)?;
                tracing::info!(topic = %name, "finished creating a topic a crash interrupted");
            }
            TopicState::Deleting => {
                topics::delete_partitions(&self.engine, name, topic.partitions_held())
                    .await
                    .map_err(BrokerError::partitions("deleting its partitions"))?;
                self.registry().remove(name)?;
                tracing::info!(topic = %name, "finished deleting a topic a crash interrupted");
            }
        }
        Ok(())
    }

    /// The operator's way out for a damaged topic: its creation, growth or deletion is tried
    /// again; done, it is no longer damaged.
    ///
    /// # Errors
    /// The topic has no entry, or a step failed again (it stays damaged, with this reason).
    pub async fn finish_damaged_topic(&self, name: &str) -> Result<(), BrokerError> {
        let _serial = self.topic_changes.lock().await;
        let topic = self
            .registry()
            .all()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| BrokerError::NothingToFinish(name.to_string()))?;
        match self.finish_topic(name, &topic).await {
            Ok(()) => {
                self.damage().clear(Kind::Topic, name);
                Ok(())
            }
            Err(e) => {
                self.damage().mark(Kind::Topic, name, e.to_string());
                Err(e)
            }
        }
    }

    /// The operator's other way out for a damaged topic: every partition the engine holds of it
    /// is deleted, then its entry. Only a damaged topic is dropped this way (a served one goes
    /// through DeleteTopics).
    ///
    /// # Errors
    /// The topic is not damaged, or a partition or its entry could not be deleted.
    pub async fn drop_damaged_topic(&self, name: &str) -> Result<(), BrokerError> {
        let _serial = self.topic_changes.lock().await;
        if self.damage().get(Kind::Topic, name).is_none() {
            return Err(BrokerError::NotDamaged(name.to_string()));
        }
        let held = topics::partitions_on_disk(&log_dir(&self.config.data_dir), name)
            .map_err(BrokerError::Listing)?;
        for p in held {
            let tp = TopicPartition::new(name, p);
            match self.engine.delete_partition(&tp).await {
                Ok(()) | Err(EngineError::UnknownPartition(_)) => {}
                Err(e) => return Err(BrokerError::partitions(format!("deleting {tp}"))(e)),
            }
        }
        self.registry().forget(name)?;
        self.damage().clear(Kind::Topic, name);
        tracing::warn!(topic = %name, "a damaged topic was dropped by the operator");
        Ok(())
    }

    /// What start-up could not load or finish (`damage.rs`).
    pub fn damage(&self) -> MutexGuard<'_, Damage> {
        self.damage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The partition of `__consumer_offsets` that holds `group`; the topic is made first when
    /// it does not exist (Kafka makes it at the first group request).
    pub async fn offsets_partition(
        &self,
        group: &str,
    ) -> Result<mirrorlog::engine::TopicPartition, topics::TopicError> {
        let n = self.offsets_topic().await?;
        Ok(mirrorlog::engine::TopicPartition::new(
            crate::coordinator::groups::OFFSETS_TOPIC,
            crate::coordinator::groups::partition_for(group, n),
        ))
    }

    /// The partition count of `__consumer_offsets`, made first when it does not exist: by the
    /// broker alone, with Kafka's settings for it (compacted, `offsets.topic.num.partitions`
    /// partitions, its segment size), whatever request needed it.
    pub async fn offsets_topic(&self) -> Result<i32, topics::TopicError> {
        use crate::coordinator::groups::{OFFSETS_TOPIC, OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT};
        if let Some(n) = self.registry().get(OFFSETS_TOPIC).map(|t| t.partitions) {
            return Ok(n);
        }
        let configs = [
            ("cleanup.policy".to_string(), "compact".to_string()),
            (
                "segment.bytes".to_string(),
                OFFSETS_TOPIC_SEGMENT_BYTES_DEFAULT.to_string(),
            ),
        ]
        .into_iter()
        .collect();
        match self
            .create_topic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_partitions,
                configs,
                None,
            )
            .await
        {
            Ok(t) => Ok(t.partitions),
            // Made by a request that came first (creations are serialized).
            Err(topics::TopicError::Exists) => self
                .registry()
                .get(OFFSETS_TOPIC)
                .map(|t| t.partitions)
                .ok_or(topics::TopicError::Unknown),
            Err(e) => Err(e),
        }
    }

    /// The partition of `__consumer_offsets` that holds `group`, if the topic exists (no wait:
    /// a commit started in request order needs it at once; the first group request of a
    /// client, FindCoordinator, has made the topic).
    pub fn offsets_partition_now(&self, group: &str) -> Option<mirrorlog::engine::TopicPartition> {
        use crate::coordinator::groups::{partition_for, OFFSETS_TOPIC};
        let n = self.registry().get(OFFSETS_TOPIC).map(|t| t.partitions)?;
        Some(mirrorlog::engine::TopicPartition::new(
            OFFSETS_TOPIC,
            partition_for(group, n),
        ))
    }

    /// Reads the committed offsets and the groups' metadata in `__consumer_offsets` (if it
    /// exists) into memory.
    /// A group whose records do not read back is damaged (`damage.rs`) and not restored; the
    /// others load.
    pub async fn load_groups(&self) {
        let topic = crate::coordinator::groups::OFFSETS_TOPIC;
        let Some(n) = self.registry().get(topic).map(|t| t.partitions) else {
            return;
        };
        let started = std::time::Instant::now();
        let mut loaded = crate::coordinator::groups::membership::Loaded::default();
        let (records, unloaded) = self.groups.load(&self.engine, n, &mut loaded).await;
        for (group, (keys, reason)) in unloaded.groups {
            loaded.forget(&group);
            self.groups.set_damaged_keys(&group, keys);
            self.damage().mark(Kind::Group, &group, reason);
        }
        for at in unloaded.records {
            self.damage().mark_record(at);
        }
        let names = crate::coordinator::groups::membership::Store::topic_ids(self)
            .into_iter()
            .map(|(name, id)| (id, name))
            .collect();
        let topics = crate::coordinator::groups::membership::Store::topics(self);
        let (classic, consumer, refused) = self.membership.restore(loaded, &names, &topics);
        for (group, reason) in refused {
            self.damage().mark(Kind::Group, &group, reason);
        }
        tracing::info!(
            records,
            groups = self.groups.list().len(),
            classic,
            consumer,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "groups loaded"
        );
    }

    /// Tombstones for `offsets` of `group` (and the group itself when `whole`), durable.
    pub async fn delete_group_offsets(
        &self,
        group: &str,
        offsets: Vec<(String, i32)>,
        whole: bool,
    ) -> Result<(), kafka_protocol::error::ResponseError> {
        use crate::coordinator::groups::records::{Key, OffsetValue};
        use kafka_protocol::error::ResponseError;
        let records: Vec<(Key, Option<OffsetValue>)> = offsets
            .into_iter()
            .map(|(topic, partition)| {
                (
                    Key::Offset {
                        group: group.to_string(),
                        topic,
                        partition,
                    },
                    None,
                )
            })
            .collect();
        let tp = self
            .offsets_partition(group)
            .await
            .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
        let failed = |e: crate::coordinator::groups::GroupError| {
            tracing::warn!(%group, error = %e, "deleting offsets failed");
            ResponseError::CoordinatorNotAvailable
        };
        self.groups
            .write(
                &self.engine,
                &tp,
                records,
                crate::coordinator::transactions::now_ms(),
            )
            .await
            .map_err(failed)?;
        if whole {
            self.groups
                .delete_group(&self.engine, &tp, group)
                .await
                .map_err(failed)?;
        }
        Ok(())
    }

    /// The way out for a group that did not load (it was not restored): every record of it
    /// tombstoned (its offsets that did load, its metadata and epochs, and the records that
    /// did not read back), then it is no longer damaged and starts anew.
    pub async fn delete_damaged_group(
        &self,
        group: &str,
    ) -> Result<(), kafka_protocol::error::ResponseError> {
        let offsets = self.groups.fetch(group).into_keys().collect();
        self.delete_group_offsets(group, offsets, true).await?;
        self.damage().clear(Kind::Group, group);
        tracing::warn!(%group, "a damaged group was deleted");
        Ok(())
    }

    /// Kafka's answer to a request for a damaged group (`damage.rs`): it is not served until
    /// the operator deletes it.
    pub fn group_refusal(&self, group: &str) -> Option<kafka_protocol::error::ResponseError> {
        self.damage()
            .get(Kind::Group, group)
            .map(|_| kafka_protocol::error::ResponseError::CoordinatorNotAvailable)
    }

    /// Deletes the committed offsets older than `offsets.retention.minutes` (tombstones,
    /// durable), as Kafka expires them: a group with members keeps its offsets; an empty
    /// classic group's expire counted from when it became empty, a simple group's from their
    /// commit. An empty classic group left with no offsets is deleted (its tombstone).
    pub async fn expire_group_offsets(&self, now_ms: i64) {
        let cutoff = now_ms.saturating_sub(self.config.offsets_retention_ms);
        let base = |group: &str, committed: i64| {
            if self.membership.active(group) {
                None
            } else {
                Some(self.membership.empty_since(group).unwrap_or(committed))
            }
        };
        for (group, partitions) in self.groups.expired(cutoff, base) {
            let tp = match self.offsets_partition(&group).await {
                Ok(tp) => tp,
                Err(e) => {
                    tracing::warn!(%group, error = %e, "expiring offsets: no __consumer_offsets");
                    continue;
                }
            };
            let records = partitions
                .iter()
                .map(|(topic, partition)| {
                    (
                        crate::coordinator::groups::records::Key::Offset {
                            group: group.clone(),
                            topic: topic.clone(),
                            partition: *partition,
                        },
                        None,
                    )
                })
                .collect();
            match self.groups.write(&self.engine, &tp, records, now_ms).await {
                Ok(()) => {
                    tracing::info!(%group, offsets = partitions.len(), "committed offsets expired")
                }
                Err(e) => tracing::warn!(%group, error = %e, "expiring offsets failed"),
            }
        }
        for group in self.membership.empty_before(now_ms) {
            if self.groups.exists(&group)
                || !matches!(self.membership.remove_if_empty(&group), Ok(true))
            {
                continue;
            }
            let stored = match self.offsets_partition(&group).await {
                Ok(tp) => self
                    .groups
                    .delete_group(&self.engine, &tp, &group)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match stored {
                Ok(()) => tracing::info!(%group, "empty group without offsets deleted"),
                Err(e) => tracing::warn!(%group, error = %e, "deleting an empty group failed"),
            }
        }
        self.groups.prune(now_ms);
    }

    /// The topics' defaults in effect: the static ones with the dynamic broker configs over them.
    pub fn topic_defaults(&self) -> PartitionConfig {
        broker_configs::topic_defaults(&self.config, &self.dynamic().1)
    }

    fn dynamic(&self) -> MutexGuard<'_, (broker_configs::Store, broker_configs::Levels)> {
        self.dynamic
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The dynamic broker configs of `level`, as stored.
    pub fn broker_config_levels(&self) -> broker_configs::Levels {
        self.dynamic().1.clone()
    }

    /// Replaces the dynamic broker configs of one level (Kafka's AlterConfigs of a BROKER
    /// resource; IncrementalAlterConfigs passes the level's map changed): every value checked,
    /// and every topic's partitions' settings under the new defaults checked against the
    /// engine's bounds, before anything is written; then stored durably, then applied: the
    /// connection limits at once, the topic defaults live to every partition of the topics
    /// that do not set them. With `validate_only`, the checks alone.
    pub async fn alter_broker_configs(
        &self,
        level: broker_configs::Level,
        configs: std::collections::BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), broker_configs::Refusal> {
        use broker_configs::{Level, Refusal};
        broker_configs::check(&configs)?;
        let _serial = self.topic_changes.lock().await;
        let mut levels = self.dynamic().1.clone();
        match level {
            Level::Default => levels.default = configs,
            Level::Broker => levels.broker = configs,
        }
        let defaults = broker_configs::topic_defaults(&self.config, &levels);
        let topics = self.registry().all();
        let mut changes = Vec::new();
        for (name, topic) in &topics {
            let config = topics::settings(&defaults, &topic.configs).map_err(|e| {
                Refusal::Config(format!("topic {name} under the new defaults: {e}"))
            })?;
            changes.push((name.clone(), topic.partitions_held(), config));
        }
        if validate_only {
            return Ok(());
        }
        {
            let mut d = self.dynamic();
            let sealed =
                d.0.store(&levels)
                    .map_err(|e| Refusal::Config(format!("storing broker configs: {e}")))?;
            d.1 = sealed;
        }
        let (max, per_ip) = broker_configs::connection_limits(&self.config, &levels);
        self.connection_limits.set(max, per_ip);
        for (name, partitions, config) in changes {
            for p in 0..partitions {
                let tp = mirrorlog::engine::TopicPartition::new(&name, p);
                // A partition that fails here is reported by the engine on its own; the
                // stored configs are the truth a restart applies.
                if let Err(e) = self.engine.update_config(&tp, config).await {
                    tracing::warn!(partition = %tp, error = %e, "a new topic default was not applied");
                }
            }
        }
        tracing::info!(?level, "broker configs changed");
        Ok(())
    }

    /// The topic registry.
    pub fn registry(&self) -> MutexGuard<'_, Registry> {
        self.topics
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A topic's partitions' settings.
    ///
    /// # Errors
    /// A stored setting the engine's config cannot take.
    pub fn partition_config(&self, topic: &topics::Topic) -> Result<PartitionConfig, ConfigError> {
        Registry::partition_config(&self.topic_defaults(), topic)
    }

    /// Whether `tp` is a partition of a ready topic.
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.registry()
            .get(topic)
            .is_some_and(|t| (0..t.partitions).contains(&partition))
    }

    /// Creates a topic (registry `creating`, partitions, `ready`), with the topic id `id` when
    /// given (a mirrored topic takes its source's), else a random one.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: std::collections::BTreeMap<String, String>,
        id: Option<[u8; 16]>,
    ) -> Result<topics::Topic, topics::TopicError> {
        let _serial = self.topic_changes.lock().await;
        crate::storage::fd_budget::room_for(u64::try_from(partitions).unwrap_or(0))
            .map_err(topics::TopicError::Resources)?;
        let topic =
            self.registry()
                .begin_create(&self.topic_defaults(), name, partitions, configs, id)?;
        let config = self
            .partition_config(&topic)
            .map_err(topics::TopicError::Config)?;
        topics::create_partitions(&self.engine, name, partitions, &config)
            .await
            .map_err(topics::TopicError::Engine)?;
        self.registry().set_state(name, TopicState::Ready)?;
        tracing::info!(topic = name, partitions, "topic created");
        Ok(topics::Topic {
            state: TopicState::Ready,
            ..topic
        })
    }

    /// Adds partitions to a topic (Kafka's CreatePartitions): `growing_to` recorded durably, the
    /// new partitions created, then the count; start-up repair finishes a growth a crash cut.
    /// With `validate_only`, the checks alone.
    pub async fn grow_topic(
        &self,
        name: &str,
        count: i32,
        assignments: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<(), topics::TopicError> {
        let _serial = self.topic_changes.lock().await;
        let topic = self
            .registry()
            .check_grow(name, count, assignments, self.config.node_id)?;
        if validate_only {
            return Ok(());
        }
        crate::storage::fd_budget::room_for(u64::try_from(count - topic.partitions).unwrap_or(0))
            .map_err(topics::TopicError::Resources)?;
        let config = self
            .partition_config(&topic)
            .map_err(topics::TopicError::Config)?;
        self.registry().begin_grow(name, count)?;
        topics::create_partitions(&self.engine, name, count, &config)
            .await
            .map_err(topics::TopicError::Engine)?;
        self.registry().finish_grow(name)?;
        tracing::info!(topic = name, partitions = count, "partitions added");
        Ok(())
    }

    /// Replaces a topic's configs (Kafka's AlterConfigs, and a mirror's config sync): every
    /// setting checked by the parser and against the engine's bounds before anything is
    /// written, then the configs stored durably, then each partition's settings changed live
    /// (`Engine::update_config`). With `validate_only`, the checks alone.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        configs: std::collections::BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), topics::TopicError> {
        let _serial = self.topic_changes.lock().await;
        let config = self
            .registry()
            .check_configs(&self.topic_defaults(), name, &configs)?;
        if validate_only {
            return Ok(());
        }
        let partitions = self
            .registry()
            .get(name)
            .map(topics::Topic::partitions_held)
            .ok_or(topics::TopicError::Unknown)?;
        self.registry().set_configs(name, configs)?;
        for p in 0..partitions {
            let tp = mirrorlog::engine::TopicPartition::new(name, p);
            self.engine
                .update_config(&tp, config)
                .await
                .map_err(topics::TopicError::Engine)?;
        }
        tracing::info!(topic = name, "topic configs changed");
        Ok(())
    }

    /// Deletes a topic (registry `deleting`, partitions, entry).
    pub async fn delete_topic(&self, name: &str) -> Result<(), topics::TopicError> {
        let _serial = self.topic_changes.lock().await;
        let partitions = self
            .registry()
            .get(name)
            .map(topics::Topic::partitions_held)
            .ok_or(topics::TopicError::Unknown)?;
        self.registry().set_state(name, TopicState::Deleting)?;
        topics::delete_partitions(&self.engine, name, partitions)
            .await
            .map_err(topics::TopicError::Engine)?;
        self.registry().remove(name)?;
        tracing::info!(topic = name, "topic deleted");
        Ok(())
    }
}

/// A shared broker.
pub type Shared = Arc<Broker>;

/// A partition's leader epoch, as Metadata reports it and as requests' `current_leader_epoch`
/// is checked against: the epoch this broker writes (bumped at each failover) or the newest in
/// the log (a mirror's source's), whichever is newer.
pub fn leader_epoch(s: &mirrorlog::engine::PartitionState) -> i32 {
    s.leader_epoch.max(s.latest_epoch.unwrap_or(0))
}

/// Group metadata records go to the group's partition of `__consumer_offsets`.
impl crate::coordinator::groups::membership::Store for Broker {
    fn store<'a>(
        &'a self,
        group: &'a str,
        value: crate::coordinator::groups::records::GroupValue,
    ) -> crate::coordinator::groups::membership::Stored<'a> {
        Box::pin(async move {
            use kafka_protocol::error::ResponseError;
            let tp = self
                .offsets_partition(group)
                .await
                .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
            self.groups
                .write_group(&self.engine, &tp, group, Some(&value))
                .await
                .map_err(|e| {
                    tracing::warn!(%group, error = %e, "writing group metadata failed");
                    ResponseError::CoordinatorNotAvailable
                })
        })
    }

    fn topic_ids(&self) -> std::collections::BTreeMap<String, uuid::Uuid> {
        self.registry()
            .all()
            .into_iter()
            .filter(|(_, t)| t.state == TopicState::Ready)
            .map(|(name, t)| (name, uuid::Uuid::from_bytes(t.id)))
            .collect()
    }

    fn append_now(
        &self,
        group: &str,
        records: &[(Vec<u8>, Option<Vec<u8>>)],
    ) -> Option<crate::coordinator::groups::membership::Stored<'static>> {
        let tp = self.offsets_partition_now(group)?;
        let call = self.groups.start_records(&self.engine, &tp, records);
        let group = group.to_string();
        Some(Box::pin(async move {
            call.await.map(|_| ()).map_err(|e| {
                tracing::warn!(%group, error = %e, "writing group records failed");
                kafka_protocol::error::ResponseError::CoordinatorNotAvailable
            })
        }))
    }

    fn topics(&self) -> std::collections::BTreeMap<String, i32> {
        self.registry()
            .all()
            .into_iter()
            .filter(|(_, t)| t.state == TopicState::Ready)
            .map(|(name, t)| (name, t.partitions))
            .collect()
    }
}

#[cfg(test)]
mod tests;
