//! The mirror fetcher of one source cluster, as a Kafka follower fetches from its leaders
//! (`AbstractFetcherThread`, `ReplicaFetcherThread`):
//!
//! - **Routing.** The source's metadata (asked of any broker of the bootstrap list that answers,
//!   then of the brokers it names) gives each partition's leader and leader epoch. There is one
//!   connection per source broker and one request out on each at a time; each partition is
//!   fetched from its leader with its `current_leader_epoch`. The metadata is asked again after
//!   errors that mean the leader moved, when a connection is lost, when a partition has no
//!   leader, and every [`FetcherArgs::config_sync_interval`] (30 s by default; Kafka's
//!   `metadata.max.age.ms` is 5 min, [`METADATA_MAX_AGE`], which is too slow to follow
//!   partitions added at the source and topics recreated there). Every
//!   [`FetcherArgs::group_sync_interval`] the source's group offsets are synced
//!   (`group_sync.rs`), and every [`FetcherArgs::acl_sync`] its ACLs (`acl_sync.rs`).
//! - **Pipelining.** The next fetch to a broker goes out as soon as the previous answer's
//!   appends are queued, at the offsets they will end at, while up to
//!   `APPENDS_IN_FLIGHT_MAX` (the engine's) appends per partition commit. An answer's appends
//!   across all its partitions are one engine call (the engine's
//!   `mirror::destination::Landing`); when it is durable the fetcher wakes, and the
//!   partitions that were at their limit are fetched again.
//! - **One pipeline.** What to ask and when, and what to do with the answers, is the engine's
//!   mirror pipeline (`mirrorlog::mirror::Pipeline`, with its destination side), the same code
//!   the engine's `MirrorLink` runs over another engine. This module is the wire's part: the
//!   source as a `Source` (`wire_source.rs`: routes, connections, fetch sessions, the error
//!   table), the metadata that routes it, and the syncs.
//! - **Errors.** Every Fetch error code is handled by the table of [`super::fetch_errors`];
//!   a partition in error waits out its own jittered backoff, and the others go on.
//! - **Divergence** (KIP-1279's LOG_TRUNCATION). At start and whenever a partition's leader or
//!   leader epoch changes, the local newest epoch is sent as OffsetForLeaderEpoch before the
//!   next fetch, and the local log is truncated where it diverges (an unclean leader election
//!   at the source, a source truncated under us).
//! - **Out of range.** Kafka answers an out-of-range fetch with log start -1, so the source's
//!   log start and end are asked with ListOffsets (earliest, latest): below the log start the
//!   partition is realigned there (design.md §Mirroring); past the end it is truncated (by the epochs, else
//!   to the source's end); inside, it is retried with backoff.
//! - Batches wholly below the next offset (a retry's overlap) are dropped before appending;
//!   a trailing partial batch (a source cutting at its byte limits) is left for the next fetch.
//!   The source's log start, in every fetch answer, is followed as a follower follows its
//!   leader's. An append the destination refuses because the partition left mirroring
//!   (paused, stopped, failed) drops it from the fetch until the operator acts.

use super::fetch_errors::Backoff;
use super::source::{self, SourceView};
use super::topic_sync::SourceConfigs;
use super::wire_source::WireSource;
use super::PartStatus;
use crate::broker::Shared;
use crate::net::client::ClientError;
use mirrorlog::engine::TopicPartition;
use mirrorlog::mirror::destination::{note_error, Landed};
use mirrorlog::mirror::Pipeline;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Kafka's `metadata.max.age.ms` default: the longest a mirror's sync interval may be.
pub const METADATA_MAX_AGE: Duration = Duration::from_secs(300);
/// Least time between two metadata requests (Kafka's `retry.backoff.ms`).
const METADATA_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Everything the fetcher needs.
pub struct FetcherArgs {
    /// The mirror's name (the `source` of the partitions' mode).
    pub name: String,
    /// The source's bootstrap brokers, `HOST:PORT` each.
    pub bootstrap: Vec<String>,
    /// Each topic's id at the source when its mirroring started (nil or absent: taken from
    /// the first metadata).
    pub topic_ids: BTreeMap<String, uuid::Uuid>,
    /// The broker (its engine, its topics: partitions added and configs synced).
    pub broker: Shared,
    /// Topic configs not synced from the source.
    pub config_exclude: Vec<String>,
    /// How the source's brokers are reached (plaintext or TLS).
    pub security: crate::net::client::Security,
    /// How often the source's topics are read again: their configs, and the metadata (ids,
    /// partition counts, leaders) when no error asked for it sooner.
    pub config_sync_interval: Duration,
    /// How often the source's group offsets are synced (`group_sync.rs`).
    pub group_sync_interval: Duration,
    /// Per group, the sync's status, shared with the admin surface.
    pub groups_status: Arc<Mutex<BTreeMap<String, super::group_sync::GroupSyncStatus>>>,
    /// How often the source's ACLs are synced (`None`: not synced; `acl_sync.rs`).
    pub acl_sync: Option<Duration>,
    /// The ACLs synced (`None`: those of the mirrored topics and groups), or why the mirror's
    /// filters do not read.
    pub acl_filters: Option<Result<Vec<crate::acl::AclFilter>, super::acl_sync::BadFilter>>,
    /// Whether ACLs here that the source lacks are removed, not only those the sync created.
    pub acl_prune: bool,
    /// Which ACLs the sync created, and its status, shared with the admin surface.
    pub acl_ledger: Arc<super::acl_sync::AclLedger>,
    /// Each topic's config sync, shared with the admin surface.
    pub config_syncs: super::topic_sync::ConfigSyncs,
    /// Per-partition status, shared with the admin surface; its partitions are the fetcher's.
    pub status: Arc<Mutex<Vec<PartStatus>>>,
    /// Its answers' landings: fetch-to-durable times (shared with the admin surface), and the
    /// fetcher's wake-up when one is durable.
    pub landed: Arc<Landed>,
    /// `true` stops the fetcher (after its appends in flight resolve).
    pub stop: watch::Receiver<bool>,
}

pub(super) enum Event {
    Metadata(Result<SourceView, ClientError>),
    Configs(Result<SourceConfigs, super::sync_error::SyncError>),
    Groups(Result<super::group_sync::SourceGroups, super::sync_error::SyncError>),
    Acls(
        super::acl_sync::Scope,
        Result<super::acl_sync::SourceAcls, super::sync_error::SyncError>,
    ),
    Grown(
        String,
        Result<Vec<TopicPartition>, super::sync_error::SyncError>,
    ),
}

pub(super) struct Fetcher {
    pub(super) args: FetcherArgs,
    pub(super) topics: Vec<String>,
    /// The mirror's partitions and the requests out for them (the engine's pipeline).
    pub(super) pipeline: Pipeline,
    /// The source cluster, routed by its metadata.
    pub(super) source: WireSource,
    /// Metadata and sync requests out.
    pub(super) tasks: JoinSet<Event>,
    pub(super) metadata_out: bool,
    pub(super) metadata_at: Option<Instant>,
    pub(super) metadata_backoff: Backoff,
    /// Rotates the address metadata is asked of first.
    pub(super) turn: usize,
    /// When the source's configs were last asked for.
    pub(super) configs_at: Option<Instant>,
    pub(super) configs_out: bool,
    /// When the source's group offsets were last asked for.
    pub(super) groups_at: Option<Instant>,
    pub(super) groups_out: bool,
    /// Every group the group sync has read from the source (the ACL sync's groups).
    pub(super) groups_seen: std::collections::BTreeSet<String>,
    /// When the source's ACLs were last asked for.
    pub(super) acls_at: Option<Instant>,
    pub(super) acls_out: bool,
    /// A topic growing to the source's partition count.
    pub(super) growing: bool,
}

/// Runs until `stop`; returns once every append it started has resolved.
pub async fn run(args: FetcherArgs) {
    let pipeline = Pipeline::new(
        args.broker.engine.clone(),
        args.name.clone(),
        args.status.clone(),
        args.landed.clone(),
    );
    let mut topics: Vec<String> = pipeline
        .parts()
        .iter()
        .map(|p| p.tp.topic.clone())
        .collect();
    topics.dedup();
    let source = WireSource::new(args.security.clone());
    let mut f = Fetcher {
        args,
        topics,
        pipeline,
        source,
        tasks: JoinSet::new(),
        metadata_out: false,
        metadata_at: None,
        metadata_backoff: Backoff::new(7),
        turn: 0,
        configs_at: None,
        configs_out: false,
        groups_at: None,
        groups_out: false,
        groups_seen: std::collections::BTreeSet::new(),
        acls_at: None,
        acls_out: false,
        growing: false,
    };
    f.pipeline.reread_idle().await;
    loop {
        if *f.args.stop.borrow() {
            break;
        }
        let now = Instant::now();
        f.ask_metadata(now);
        f.ask_configs(now);
        f.ask_groups(now);
        f.ask_acls(now);
        f.pipeline.turn(&mut f.source, now).await;
        let wake = f.pipeline.next_wake(&f.source, now).min(f.next_wake(now));
        let wake = tokio::time::Instant::from_std(wake);
        tokio::select! {
            Some(done) = f.tasks.join_next(), if !f.tasks.is_empty() => {
                if let Ok(event) = done {
                    f.handle(event).await;
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                if !f.pipeline.any_active() {
                    f.pipeline.reread_idle().await;
                }
            }
            () = f.pipeline.answers() => {}
            r = f.args.stop.changed() => if r.is_err() || *f.args.stop.borrow() { break },
        }
    }
    f.tasks.abort_all();
    f.pipeline.finish().await;
}

impl Fetcher {
    fn ask_metadata(&mut self, now: Instant) {
        if self.metadata_out || !self.metadata_backoff.ready(now) {
            return;
        }
        let leaderless = self
            .pipeline
            .parts()
            .iter()
            .any(|p| p.active && p.leader.is_none());
        let aged = self
            .metadata_at
            .is_none_or(|t| now.duration_since(t) >= self.metadata_max_age());
        let soon = self
            .metadata_at
            .is_some_and(|t| now.duration_since(t) < METADATA_MIN_INTERVAL);
        if soon || !(self.source.metadata_is_due() || leaderless || aged) {
            return;
        }
        let addrs = self.addrs();
        let security = self.args.security.clone();
        let topics = self.topics.clone();
        self.metadata_out = true;
        self.source.clear_metadata_due();
        self.tasks.spawn(async move {
            Event::Metadata(source::metadata(&addrs, &topics, &security).await)
        });
    }

    /// How long a metadata view is trusted: the topic sync interval, at most Kafka's default.
    fn metadata_max_age(&self) -> Duration {
        self.args.config_sync_interval.min(METADATA_MAX_AGE)
    }

    pub(super) fn addrs(&mut self) -> Vec<String> {
        // The brokers last named first, then the bootstrap list; a different one first each
        // time, so one that hangs does not hold every refresh.
        let mut addrs: Vec<String> = self.source.addrs();
        for a in &self.args.bootstrap {
            if !addrs.contains(a) {
                addrs.push(a.clone());
            }
        }
        if !addrs.is_empty() {
            let k = self.turn % addrs.len();
            addrs.rotate_left(k);
        }
        self.turn = self.turn.wrapping_add(1);
        addrs
    }

    /// When the loop must look again for the metadata (its backoff, its age, or a refresh
    /// asked for), if nothing else wakes it sooner.
    fn next_wake(&self, now: Instant) -> Instant {
        let mut wake = now + METADATA_MAX_AGE;
        if let Some(t) = self.metadata_backoff.waiting_until(now) {
            wake = wake.min(t);
        }
        if let Some(t) = self.metadata_at {
            wake = wake.min(t + self.metadata_max_age());
            if self.source.metadata_is_due() {
                wake = wake.min(t + METADATA_MIN_INTERVAL);
            }
        }
        wake.max(now + Duration::from_millis(1))
    }

    async fn handle(&mut self, event: Event) {
        let now = Instant::now();
        match event {
            Event::Metadata(r) => {
                self.metadata_out = false;
                self.metadata_at = Some(now);
                match r {
                    Ok(view) => self.apply_metadata(&view, now),
                    Err(e) => {
                        self.metadata_backoff.fail(now);
                        note_error(&self.args.status, None, "network", &e.0);
                    }
                }
            }
            Event::Configs(r) => self.on_configs(r, now).await,
            Event::Groups(r) => self.on_groups(r, now).await,
            Event::Acls(scope, r) => self.on_acls(&scope, r, now),
            Event::Grown(topic, r) => self.on_grown(&topic, r),
        }
    }
}
