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
//!   [`APPENDS_IN_FLIGHT_MAX`] appends per partition commit. An answer's appends across all
//!   its partitions are one engine call (the engine's `mirror::destination::Landing`); when
//!   it is durable the fetcher wakes, and the partitions that were at their limit are fetched
//!   again.
//! - **What is not the wire's** lives in the engine's `mirror::destination`, shared with the
//!   engine's `MirrorLink`: each partition's state and steps, whole batches, divergence by
//!   epochs, backoff, the lag in time. This module keeps routing, connections, fetch
//!   sessions, the error table and the syncs.
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
use super::fetch_session::FetchSession;
use super::requests::{self, Ask};
use super::source::{self, SourceView};
use super::topic_sync::SourceConfigs;
use super::PartStatus;
use crate::broker::Shared;
use crate::net::client::{Client, ClientError};
use kafka_protocol::messages::{ApiKey, FetchResponse, RequestKind, ResponseKind};
use mirrorlog::engine::TopicPartition;
use mirrorlog::format::Offset;
use mirrorlog::mirror::destination::{lock, note_error};
use mirrorlog::mirror::destination::{Landed, Local, Part};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use mirrorlog::mirror::destination::APPENDS_IN_FLIGHT_MAX;

/// Kafka's `metadata.max.age.ms` default: the longest a mirror's sync interval may be.
pub const METADATA_MAX_AGE: Duration = Duration::from_secs(300);
/// Least time between two metadata requests (Kafka's `retry.backoff.ms`).
const METADATA_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// How often partitions that are all idle (paused, stopped, stalled) are looked at again.
const IDLE_POLL: Duration = Duration::from_millis(200);

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

/// One source broker's connection.
pub(super) struct Conn {
    pub(super) addr: String,
    pub(super) client: Option<Client>,
    /// The connection's incremental fetch session (`fetch_session.rs`); out with the client
    /// while a request is, new with each connection.
    pub(super) session: Option<Box<FetchSession>>,
    /// A request or a connection attempt is out.
    pub(super) busy: bool,
    pub(super) backoff: Backoff,
}

/// A request's kind.
#[derive(Clone, Copy)]
pub(super) enum Op {
    Fetch,
    /// OffsetForLeaderEpoch.
    Check,
    /// ListOffsets earliest and latest, and a fetch at the log start where it is past ours.
    Range,
}

pub(super) enum Answer {
    Fetch(FetchResponse),
    Check(Vec<(i16, i32, i64)>),
    Range(Vec<(i16, i64, i64)>, Vec<bytes::Bytes>),
}

pub(super) enum Event {
    Connected(i32, Result<Client, ClientError>),
    Answered {
        broker: i32,
        parts: Vec<usize>,
        asks: Vec<Ask>,
        client: Option<Client>,
        session: Option<Box<FetchSession>>,
        result: Result<Answer, ClientError>,
    },
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
    pub(super) parts: Vec<Part>,
    pub(super) conns: BTreeMap<i32, Conn>,
    pub(super) tasks: JoinSet<Event>,
    pub(super) metadata_due: bool,
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
    let parts: Vec<Part> = lock(&args.status)
        .iter()
        .enumerate()
        .map(|(i, s)| Part::new(s.tp.clone(), i))
        .collect();
    let mut topics: Vec<String> = parts.iter().map(|p| p.tp.topic.clone()).collect();
    topics.dedup();
    let mut f = Fetcher {
        args,
        topics,
        parts,
        conns: BTreeMap::new(),
        tasks: JoinSet::new(),
        metadata_due: true,
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
    f.reread_all().await;
    loop {
        if *f.args.stop.borrow() {
            break;
        }
        f.settle(false).await;
        let now = Instant::now();
        f.ask_metadata(now);
        f.ask_configs(now);
        f.ask_groups(now);
        f.ask_acls(now);
        f.dispatch(now).await;
        let wake = tokio::time::Instant::from_std(f.next_wake(now));
        tokio::select! {
            Some(done) = f.tasks.join_next(), if !f.tasks.is_empty() => {
                if let Ok(event) = done {
                    f.handle(event).await;
                }
            }
            _ = tokio::time::sleep_until(wake) => {
                if !f.parts.iter().any(|p| p.active) {
                    f.reread_all().await;
                }
            }
            () = f.args.landed.landed() => {}
            r = f.args.stop.changed() => if r.is_err() || *f.args.stop.borrow() { break },
        }
    }
    f.tasks.abort_all();
    f.settle(true).await;
}

impl Fetcher {
    async fn settle(&mut self, all: bool) {
        let local = local(&self.args);
        for (i, part) in self.parts.iter_mut().enumerate() {
            local.settle(i, part, all).await;
        }
    }

    /// Every idle partition's mode and end from the engine (at start, and while all idle).
    async fn reread_all(&mut self) {
        let local = local(&self.args);
        for (i, part) in self.parts.iter_mut().enumerate() {
            if part.in_flight.is_empty() && !part.busy {
                local.reread(i, part).await;
            }
        }
    }

    fn ask_metadata(&mut self, now: Instant) {
        if self.metadata_out || !self.metadata_backoff.ready(now) {
            return;
        }
        let leaderless = self.parts.iter().any(|p| p.active && p.leader.is_none());
        let aged = self
            .metadata_at
            .is_none_or(|t| now.duration_since(t) >= self.metadata_max_age());
        let soon = self
            .metadata_at
            .is_some_and(|t| now.duration_since(t) < METADATA_MIN_INTERVAL);
        if soon || !(self.metadata_due || leaderless || aged) {
            return;
        }
        let addrs = self.addrs();
        let security = self.args.security.clone();
        let topics = self.topics.clone();
        self.metadata_out = true;
        self.metadata_due = false;
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
        let mut addrs: Vec<String> = self.conns.values().map(|c| c.addr.clone()).collect();
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

    /// Sends each idle broker its next request: a connection if it has none, else the
    /// divergence checks due, else the out-of-range lookups due, else a fetch.
    async fn dispatch(&mut self, now: Instant) {
        let brokers: Vec<i32> = self.conns.keys().copied().collect();
        for b in brokers {
            let Some(conn) = self.conns.get(&b) else {
                continue;
            };
            if conn.busy || !conn.backoff.ready(now) {
                continue;
            }
            let led: Vec<usize> = (0..self.parts.len())
                .filter(|&i| {
                    let p = &self.parts[i];
                    p.active && !p.busy && p.leader.is_some_and(|l| l.broker == b)
                })
                .collect();
            if led.is_empty() {
                continue;
            }
            if conn.client.is_none() {
                self.connect(b);
                continue;
            }
            let ready = |p: &Part| p.backoff.ready(now);
            let checks: Vec<usize> = led
                .iter()
                .copied()
                .filter(|&i| self.parts[i].check && ready(&self.parts[i]))
                .collect();
            if !checks.is_empty() {
                self.send_checks(b, checks).await;
                continue;
            }
            let ranges: Vec<usize> = led
                .iter()
                .copied()
                .filter(|&i| {
                    let p = &self.parts[i];
                    p.out_of_range && !p.check && ready(p)
                })
                .collect();
            if !ranges.is_empty() {
                let local = local(&self.args);
                for &i in &ranges {
                    local.settle(i, &mut self.parts[i], true).await;
                }
                self.send(b, Op::Range, ranges);
                continue;
            }
            let fetch: Vec<usize> = led
                .into_iter()
                .filter(|&i| {
                    let p = &self.parts[i];
                    !p.check
                        && !p.out_of_range
                        && ready(p)
                        && p.in_flight.len() < APPENDS_IN_FLIGHT_MAX
                })
                .collect();
            if !fetch.is_empty() {
                self.send(b, Op::Fetch, fetch);
            }
        }
    }

    fn connect(&mut self, b: i32) {
        let Some(conn) = self.conns.get_mut(&b) else {
            return;
        };
        conn.busy = true;
        let addr = conn.addr.clone();
        let security = self.args.security.clone();
        self.tasks.spawn(async move {
            let r = Client::connect_with(&addr, &security).await;
            let r = r.and_then(|c| c.version(ApiKey::Fetch, 4, 12).map(|_| c));
            Event::Connected(b, r)
        });
    }

    /// OffsetForLeaderEpoch for `checks`, with each one's newest local epoch (a partition with
    /// an empty log has nothing to check).
    async fn send_checks(&mut self, b: i32, checks: Vec<usize>) {
        let local = local(&self.args);
        let parts = &mut self.parts;
        let mut asked = Vec::new();
        let mut epochs = Vec::new();
        for i in checks {
            match local.newest_epoch(i, &mut parts[i]).await {
                Some(e) => {
                    asked.push(i);
                    epochs.push(e);
                }
                None => {
                    parts[i].check = false;
                    parts[i].truncate_floor = None;
                }
            }
        }
        if asked.is_empty() {
            return;
        }
        let asks: Vec<Ask> = asked
            .iter()
            .zip(epochs)
            .map(|(&i, e)| Ask {
                tp: self.parts[i].tp.clone(),
                offset: Offset(i64::from(e)),
                current_leader_epoch: self.parts[i].leader.map_or(-1, |l| l.epoch),
            })
            .collect();
        self.spawn(b, Op::Check, asked, asks);
    }

    fn send(&mut self, b: i32, op: Op, parts: Vec<usize>) {
        let asks: Vec<Ask> = parts
            .iter()
            .map(|&i| Ask {
                tp: self.parts[i].tp.clone(),
                offset: self.parts[i].next,
                current_leader_epoch: self.parts[i].leader.map_or(-1, |l| l.epoch),
            })
            .collect();
        if matches!(op, Op::Fetch) {
            let mut st = lock(&self.args.status);
            for &i in &parts {
                if let Some(s) = st.get_mut(i) {
                    s.fetch_requests += 1;
                }
            }
        }
        self.spawn(b, op, parts, asks);
    }

    fn spawn(&mut self, b: i32, op: Op, parts: Vec<usize>, asks: Vec<Ask>) {
        let Some(conn) = self.conns.get_mut(&b) else {
            return;
        };
        let Some(mut client) = conn.client.take() else {
            return;
        };
        let mut session = conn.session.take().unwrap_or_default();
        conn.busy = true;
        for &i in &parts {
            self.parts[i].busy = true;
        }
        self.tasks.spawn(async move {
            let result = request(&mut client, &mut session, op, &asks).await;
            let ok = result.is_ok();
            Event::Answered {
                broker: b,
                parts,
                asks,
                client: ok.then_some(client),
                // A connection that failed takes its session with it.
                session: ok.then_some(session),
                result,
            }
        });
    }

    /// When the loop must look again with nothing answered: the first backoff to end, the
    /// metadata's age, or the idle poll.
    fn next_wake(&self, now: Instant) -> Instant {
        let mut wake = now + IDLE_POLL;
        for p in self.parts.iter().filter(|p| p.active) {
            if let Some(t) = p.backoff.waiting_until(now) {
                wake = wake.min(t);
            }
        }
        for c in self.conns.values() {
            if let Some(t) = c.backoff.waiting_until(now) {
                wake = wake.min(t);
            }
        }
        if let Some(t) = self.metadata_backoff.waiting_until(now) {
            wake = wake.min(t);
        }
        if let Some(t) = self.metadata_at {
            wake = wake.min(t + self.metadata_max_age());
            if self.metadata_due {
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
            Event::Connected(b, r) => {
                let led = self.led_by(b);
                let Some(conn) = self.conns.get_mut(&b) else {
                    return;
                };
                conn.busy = false;
                match r {
                    Ok(c) => {
                        conn.client = Some(c);
                        conn.session = Some(Box::default());
                    }
                    Err(e) => {
                        conn.backoff.fail(now);
                        self.metadata_due = true;
                        for i in led {
                            note_error(&self.args.status, Some(i), "network", &e.0);
                        }
                    }
                }
            }
            Event::Answered {
                broker,
                parts,
                asks,
                client,
                session,
                result,
            } => {
                for &i in &parts {
                    self.parts[i].busy = false;
                }
                let conn = self.conns.get_mut(&broker);
                let result = match result {
                    Ok(a) => {
                        if let Some(conn) = conn {
                            conn.busy = false;
                            conn.client = client;
                            conn.session = session;
                            conn.backoff.reset();
                        }
                        a
                    }
                    Err(e) => {
                        if let Some(conn) = conn {
                            conn.busy = false;
                            conn.client = None;
                            conn.session = None;
                            conn.backoff.fail(now);
                        }
                        self.metadata_due = true;
                        for &i in &parts {
                            note_error(&self.args.status, Some(i), "network", &e.0);
                        }
                        return;
                    }
                };
                match result {
                    Answer::Fetch(f) => self.on_fetched(broker, &parts, &asks, f, now),
                    Answer::Check(ends) => self.on_checked(broker, &parts, ends, now).await,
                    Answer::Range(ranges, probes) => {
                        self.on_ranges(broker, &parts, ranges, probes, now).await;
                    }
                }
            }
        }
    }

    fn led_by(&self, b: i32) -> Vec<usize> {
        (0..self.parts.len())
            .filter(|&i| self.parts[i].leader.is_some_and(|l| l.broker == b))
            .collect()
    }
}

pub(super) fn local(args: &FetcherArgs) -> Local<'_> {
    Local {
        engine: &args.broker.engine,
        name: &args.name,
        status: &args.status,
        landed: &args.landed,
    }
}

/// One request on its connection (the client is returned with the answer). A Fetch goes
/// through the connection's incremental session (Fetch v7+).
async fn request(
    client: &mut Client,
    session: &mut FetchSession,
    op: Op,
    asks: &[Ask],
) -> Result<Answer, ClientError> {
    match op {
        Op::Fetch => {
            let version = client.version(ApiKey::Fetch, 4, 12)?;
            let mut r = requests::fetch(asks, requests::FETCH_WAIT_MS);
            let sessions = version >= 7;
            if let (true, RequestKind::Fetch(f)) = (sessions, &mut r) {
                session.prepare(f, asks);
            }
            match client.call(ApiKey::Fetch, version, r).await? {
                ResponseKind::Fetch(f) if sessions => Ok(Answer::Fetch(session.receive(asks, f))),
                ResponseKind::Fetch(f) => Ok(Answer::Fetch(f)),
                _ => Err(ClientError("Fetch answered with another API".into())),
            }
        }
        Op::Check => Ok(Answer::Check(requests::epoch_ends(client, asks).await?)),
        Op::Range => {
            let ranges = requests::log_range(client, asks).await?;
            // Past the local end the source's log start begins inside a batch whose base is
            // where the local log is to start: fetch it.
            let realign: Vec<Ask> = asks
                .iter()
                .zip(&ranges)
                .filter(|(a, r)| r.0 == 0 && r.1 > a.offset.0 && !(r.2 >= 0 && a.offset.0 > r.2))
                .map(|(a, r)| Ask {
                    offset: Offset(r.1),
                    ..a.clone()
                })
                .collect();
            let mut probes = vec![bytes::Bytes::new(); asks.len()];
            if !realign.is_empty() {
                let version = client.version(ApiKey::Fetch, 4, 12)?;
                let ResponseKind::Fetch(f) = client
                    .call(ApiKey::Fetch, version, requests::fetch(&realign, 0))
                    .await?
                else {
                    return Err(ClientError("Fetch answered with another API".into()));
                };
                let fetched = requests::fetched(&realign, f).unwrap_or_default();
                for (a, f) in realign.iter().zip(fetched) {
                    if let Some(k) = asks.iter().position(|x| x.tp == a.tp) {
                        if f.error_code == 0 {
                            probes[k] = f.records;
                        }
                    }
                }
            }
            Ok(Answer::Range(ranges, probes))
        }
    }
}
