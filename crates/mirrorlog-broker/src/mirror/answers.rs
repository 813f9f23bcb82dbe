//! The fetcher's own answers: the source's metadata (leaders, brokers, topic ids, partitions
//! added), the topic config sync, the group offset sync and the ACL sync. The partitions'
//! Fetch, OffsetForLeaderEpoch and ListOffsets answers are the engine's mirror pipeline's.

use super::acl_sync;
use super::fetch_errors;
use super::fetcher::{Event, Fetcher};
use super::group_sync;
use super::source::SourceView;
use super::sync_error::SyncError;
use super::topic_sync::{self, SourceConfigs};
use mirrorlog::engine::TopicPartition;
use mirrorlog::mirror::destination::{lock, note_error, set_stalled};
use std::time::Instant;

impl Fetcher {
    pub(super) fn ask_configs(&mut self, now: Instant) {
        if self.configs_out
            || self
                .configs_at
                .is_some_and(|t| now.duration_since(t) < self.args.config_sync_interval)
        {
            return;
        }
        let addrs = self.addrs();
        let security = self.args.security.clone();
        let topics = self.topics.clone();
        self.configs_out = true;
        self.tasks.spawn(async move {
            Event::Configs(topic_sync::source_configs(&addrs, &topics, &security).await)
        });
    }

    pub(super) async fn on_configs(&mut self, r: Result<SourceConfigs, SyncError>, now: Instant) {
        self.configs_out = false;
        self.configs_at = Some(now);
        let at = std::time::SystemTime::now();
        let per_topic: Vec<(String, Result<bool, SyncError>)> = match r {
            Err(e) => self
                .topics
                .iter()
                .map(|t| (t.clone(), Err(e.clone())))
                .collect(),
            Ok(all) => {
                let mut out = Vec::new();
                for t in self.topics.clone() {
                    let r = match all.get(&t) {
                        Some(Ok(c)) => {
                            topic_sync::apply_configs(
                                &self.args.broker,
                                &t,
                                c,
                                &self.args.config_exclude,
                            )
                            .await
                        }
                        Some(Err(e)) => Err(e.clone()),
                        None => Err(SyncError::NotDescribed(t.clone())),
                    };
                    out.push((t, r));
                }
                out
            }
        };
        let mut syncs = self
            .args
            .config_syncs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (topic, r) in per_topic {
            let sync = syncs.entry(topic.clone()).or_default();
            match r {
                Ok(_) => {
                    sync.synced = Some(at);
                    sync.error = None;
                }
                Err(e) => {
                    tracing::debug!(topic, error = %e, "topic config sync");
                    sync.error = Some(e.to_string());
                }
            }
        }
    }

    pub(super) fn ask_groups(&mut self, now: Instant) {
        if self.groups_out
            || self
                .groups_at
                .is_some_and(|t| now.duration_since(t) < self.args.group_sync_interval)
        {
            return;
        }
        let addrs = self.addrs();
        let security = self.args.security.clone();
        let topics = self.topics.clone();
        self.groups_out = true;
        self.tasks.spawn(async move {
            Event::Groups(group_sync::source_groups(&addrs, &topics, &security).await)
        });
    }

    pub(super) async fn on_groups(
        &mut self,
        r: Result<group_sync::SourceGroups, SyncError>,
        now: Instant,
    ) {
        self.groups_out = false;
        self.groups_at = Some(now);
        let groups = match r {
            Ok(g) => {
                self.groups_seen.extend(g.keys().cloned());
                g
            }
            Err(e) => {
                tracing::debug!(error = %e, "group offset sync");
                return;
            }
        };
        let applied = group_sync::apply(&self.args.broker, &groups).await;
        let at = std::time::SystemTime::now();
        let mut st = self
            .args
            .groups_status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (group, r) in applied {
            let s = st.entry(group).or_default();
            match r {
                Ok(group_sync::Synced::Committed(n)) => {
                    s.synced_at = Some(at);
                    s.offsets_synced += n;
                    s.last_error = None;
                    s.skipped_active = false;
                }
                Ok(group_sync::Synced::SkippedActive) => {
                    s.skipped_active = true;
                    s.last_error = None;
                }
                Err(e) => s.last_error = Some(e.to_string()),
            }
        }
    }

    /// Asks the source's ACLs when due. The default scope waits for the first group round,
    /// which names the groups.
    pub(super) fn ask_acls(&mut self, now: Instant) {
        let Some(interval) = self.args.acl_sync else {
            return;
        };
        let due = self
            .acls_at
            .is_none_or(|t| now.duration_since(t) >= interval);
        let scoped = match &self.args.acl_filters {
            None => self.groups_at.is_some(),
            Some(_) => true,
        };
        if self.acls_out || !due || !scoped {
            return;
        }
        self.acls_at = Some(now);
        let ledger = &self.args.acl_ledger;
        if self.args.broker.authorizer.is_none() {
            ledger.failed(&self.args.name, &SyncError::NoAuthorizer);
            return;
        }
        let scope = match &self.args.acl_filters {
            None => acl_sync::Scope::Mirrored {
                topics: self.topics.clone(),
                groups: self.groups_seen.clone(),
            },
            Some(Ok(f)) => acl_sync::Scope::Filters(f.clone()),
            Some(Err(e)) => {
                ledger.failed(&self.args.name, e);
                return;
            }
        };
        let addrs = self.addrs();
        let security = self.args.security.clone();
        self.acls_out = true;
        self.tasks.spawn(async move {
            let r = acl_sync::source_acls(&addrs, &scope, &security).await;
            Event::Acls(scope, r)
        });
    }

    pub(super) fn on_acls(
        &mut self,
        scope: &acl_sync::Scope,
        r: Result<acl_sync::SourceAcls, SyncError>,
        now: Instant,
    ) {
        self.acls_out = false;
        self.acls_at = Some(now);
        let name = &self.args.name;
        let ledger = &self.args.acl_ledger;
        let (Ok(source), Some(authorizer)) = (&r, self.args.broker.authorizer.as_ref()) else {
            if let Err(e) = r {
                tracing::debug!(mirror = name, error = %e, "ACL sync");
                ledger.failed(name, &e);
            }
            return;
        };
        match ledger.apply(name, authorizer, scope, &source.acls, self.args.acl_prune) {
            Ok((added, removed)) => ledger.synced(name, source, added, removed),
            Err(e) => {
                tracing::warn!(mirror = name, error = %e, "ACL sync");
                ledger.failed(name, &e);
            }
        }
    }

    pub(super) fn on_grown(&mut self, topic: &str, r: Result<Vec<TopicPartition>, SyncError>) {
        self.growing = false;
        match r {
            Ok(added) => {
                for tp in added {
                    self.pipeline.add(tp);
                }
                self.source.metadata_due();
            }
            Err(e) => {
                tracing::warn!(topic, error = %e, "partitions added at the source");
                for (i, p) in self.pipeline.parts().iter().enumerate() {
                    if p.tp.topic == topic {
                        note_error(&self.args.status, Some(i), "network", &e.to_string());
                    }
                }
            }
        }
    }

    pub(super) fn apply_metadata(&mut self, view: &SourceView, now: Instant) {
        self.source.apply_brokers(view);
        // A topic whose id changed was deleted and recreated at the source: its partitions
        // stop, nothing of the new log is spliced onto the old.
        let mut recreated = Vec::new();
        for (name, t) in &view.topics {
            if t.topic_id.is_nil() {
                continue;
            }
            match self.args.topic_ids.get(name) {
                Some(id) if !id.is_nil() && *id != t.topic_id => {
                    recreated.push((name.clone(), *id, t.topic_id));
                }
                Some(id) if !id.is_nil() => {}
                _ => {
                    self.args.topic_ids.insert(name.clone(), t.topic_id);
                }
            }
        }
        for (name, was, now_id) in recreated {
            let reason = format!(
                "topic {name} was recreated at the source (id {was}, now {now_id}): the new log is not spliced onto the mirrored one; stop the mirror"
            );
            for (i, part) in self.pipeline.parts_mut().iter_mut().enumerate() {
                if part.tp.topic == name && part.active {
                    part.active = false;
                    set_stalled(&self.args.status, i, None, &reason);
                }
            }
        }
        // Partitions added at the source: created here and mirrored (one topic at a time).
        if !self.growing {
            let grow = view.topics.iter().find_map(|(name, t)| {
                let here = self
                    .pipeline
                    .parts()
                    .iter()
                    .filter(|p| p.tp.topic == *name)
                    .count();
                let there = t.leaders.len();
                (t.error_code == 0 && there > here && self.topics.contains(name))
                    .then(|| (name.clone(), i32::try_from(there).unwrap_or(i32::MAX)))
            });
            if let Some((topic, count)) = grow {
                self.growing = true;
                let (b, mirror) = (self.args.broker.clone(), self.args.name.clone());
                self.tasks.spawn(async move {
                    let r = topic_sync::grow(&b, &mirror, &topic, count).await;
                    Event::Grown(topic, r)
                });
            }
        }
        let mut leaderless = false;
        let mut st = lock(&self.args.status);
        for (i, part) in self.pipeline.parts().iter().enumerate() {
            let leader = view
                .leader(&part.tp.topic, part.tp.partition)
                .filter(|l| view.brokers.contains_key(&l.broker));
            // The pipeline takes it at its next turn; a new leader or epoch is checked for
            // divergence before it is fetched again.
            self.source.set_leader(&part.tp, leader);
            if let Some(s) = st.get_mut(i) {
                s.source_leader = leader.map_or(-1, |l| l.broker);
                s.source_leader_epoch = leader.map_or(-1, |l| l.epoch);
                if leader.is_none() && part.active {
                    let why = match view.topics.get(&part.tp.topic) {
                        None => "the source's metadata does not name the topic".to_string(),
                        Some(t) if t.error_code != 0 => {
                            format!("source metadata: {}", fetch_errors::name(t.error_code))
                        }
                        Some(_) => "the partition has no leader at the source".to_string(),
                    };
                    s.errors += 1;
                    *s.errors_by_kind.entry("metadata".to_string()).or_default() += 1;
                    s.last_error = Some(why);
                }
            }
            leaderless |= part.active && leader.is_none();
        }
        drop(st);
        if leaderless {
            self.metadata_backoff.fail(now);
        } else {
            self.metadata_backoff.reset();
        }
    }
}
