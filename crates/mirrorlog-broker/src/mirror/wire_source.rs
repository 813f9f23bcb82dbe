//! A Kafka cluster as the engine's mirror pipeline's [`Source`]: one connection per source
//! broker (a route), each partition routed to its leader from the source's metadata, requests
//! over Fetch (through the connection's incremental session, v7+), OffsetForLeaderEpoch and
//! ListOffsets, and each partition's error code read by the table of [`super::fetch_errors`].
//!
//! A request's future owns its connection while it is out (taken from the route's slot,
//! connected first if the route has none, given back with the answer). A request that fails
//! takes its connection and session with it, backs the route off and asks for the metadata
//! again; so does an error code that means the leader moved (the table's Reroute).

use super::fetch_errors::{self, Action, Backoff};
use super::fetch_session::FetchSession;
use super::requests::{self, Ask};
use super::source::SourceView;
use crate::net::client::{Client, ClientError, Security};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use mirrorlog::engine::TopicPartition;
use mirrorlog::format::Offset;
use mirrorlog::mirror::destination::Leader;
use mirrorlog::mirror::{
    Answers, EpochEnd, ErrorAction, Fetched, LogRange, PartError, RequestError, Source,
};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A source broker's connection, shared with the request out on it.
struct Conn {
    addr: String,
    client: Option<Client>,
    /// The connection's incremental fetch session: new with each connection.
    session: Option<Box<FetchSession>>,
    backoff: Backoff,
    /// Bumped when the broker's address changes: a request out on the old connection does
    /// not give it back.
    generation: u64,
}

type Slot = Arc<Mutex<Conn>>;

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Conn> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The source cluster over the wire (see the module docs).
pub struct WireSource {
    security: Security,
    conns: BTreeMap<i32, Slot>,
    leaders: HashMap<TopicPartition, Leader>,
    /// Set when the metadata should be asked again (a lost connection, a leader moved).
    metadata_due: Arc<AtomicBool>,
}

impl WireSource {
    /// No broker known yet: the first metadata names them.
    pub fn new(security: Security) -> Self {
        WireSource {
            security,
            conns: BTreeMap::new(),
            leaders: HashMap::new(),
            metadata_due: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Whether the metadata should be asked again.
    pub fn metadata_is_due(&self) -> bool {
        self.metadata_due.load(Ordering::Acquire)
    }

    /// The metadata was asked for.
    pub fn clear_metadata_due(&self) {
        self.metadata_due.store(false, Ordering::Release);
    }

    /// Asks for the metadata again at the next chance.
    pub fn metadata_due(&self) {
        self.metadata_due.store(true, Ordering::Release);
    }

    /// The addresses of the brokers the metadata named.
    pub fn addrs(&self) -> Vec<String> {
        self.conns.values().map(|c| lock(c).addr.clone()).collect()
    }

    /// Takes the brokers of a metadata answer: new ones get a route, one whose address
    /// changed drops its connection.
    pub fn apply_brokers(&mut self, view: &SourceView) {
        for (&id, addr) in &view.brokers {
            match self.conns.get(&id) {
                Some(slot) => {
                    let mut c = lock(slot);
                    if c.addr != *addr {
                        c.addr = addr.clone();
                        c.client = None;
                        c.session = None;
                        c.generation += 1;
                    }
                }
                None => {
                    let conn = Conn {
                        addr: addr.clone(),
                        client: None,
                        session: None,
                        backoff: Backoff::new(u64::from(id.unsigned_abs()) + 11),
                        generation: 0,
                    };
                    self.conns.insert(id, Arc::new(Mutex::new(conn)));
                }
            }
        }
    }

    /// `tp`'s leader at the source is now `leader` (`None`: it has none a route reaches).
    pub fn set_leader(&mut self, tp: &TopicPartition, leader: Option<Leader>) {
        match leader {
            Some(l) => self.leaders.insert(tp.clone(), l),
            None => self.leaders.remove(tp),
        };
    }

    /// Runs `op` on `route`'s connection (connected first if it has none), as one request
    /// out, and reads its answer with `read`.
    fn request<T, Raw, F, Fut>(
        &self,
        route: i32,
        asks: Vec<Ask>,
        op: F,
        read: fn(Raw, &AtomicBool) -> Vec<Result<T, PartError>>,
    ) -> Answers<T>
    where
        T: Send + 'static,
        Raw: Send + 'static,
        F: FnOnce(Client, Option<Box<FetchSession>>, Vec<Ask>) -> Fut + Send + 'static,
        Fut: Future<Output = (Client, Option<Box<FetchSession>>, Result<Raw, ClientError>)>
            + Send
            + 'static,
    {
        let slot = self.conns.get(&route).cloned();
        let security = self.security.clone();
        let due = self.metadata_due.clone();
        Box::pin(async move {
            let Some(slot) = slot else {
                due.store(true, Ordering::Release);
                return Err(RequestError {
                    kind: "network".into(),
                    reason: format!("no connection to source broker {route}"),
                });
            };
            let (addr, client, session, generation) = {
                let mut c = lock(&slot);
                (
                    c.addr.clone(),
                    c.client.take(),
                    c.session.take(),
                    c.generation,
                )
            };
            let connected = match client {
                Some(c) => Ok((c, session)),
                None => Client::connect_with(&addr, &security)
                    .await
                    .and_then(|c| c.version(ApiKey::Fetch, 4, 12).map(|_| c))
                    .map(|c| (c, Some(Box::default()))),
            };
            let result = match connected {
                Ok((client, session)) => {
                    let (client, session, r) = op(client, session, asks).await;
                    if r.is_ok() {
                        let mut c = lock(&slot);
                        if c.generation == generation {
                            c.client = Some(client);
                            c.session = session;
                            c.backoff.reset();
                        }
                    }
                    r
                }
                Err(e) => Err(e),
            };
            match result {
                Ok(raw) => Ok(read(raw, &due)),
                Err(e) => {
                    // A connection that failed takes its session with it.
                    lock(&slot).backoff.fail(Instant::now());
                    due.store(true, Ordering::Release);
                    Err(RequestError {
                        kind: "network".into(),
                        reason: e.0,
                    })
                }
            }
        })
    }
}

/// A partition's error code as the pipeline reads it (the table of [`fetch_errors`]); a
/// Reroute asks for the metadata again.
fn part_error(code: i16, due: &AtomicBool) -> PartError {
    let action = match fetch_errors::action(code) {
        Action::Append | Action::Retry => ErrorAction::Retry,
        Action::OutOfRange => ErrorAction::OutOfRange,
        Action::Reroute => {
            due.store(true, Ordering::Release);
            ErrorAction::Reroute
        }
        Action::Stall => ErrorAction::Stall,
    };
    PartError {
        action,
        kind: fetch_errors::name(code),
    }
}

impl Source for WireSource {
    fn leader(&self, tp: &TopicPartition) -> Option<Leader> {
        self.leaders.get(tp).copied()
    }

    fn ready(&self, route: i32, now: Instant) -> bool {
        self.conns
            .get(&route)
            .is_some_and(|c| lock(c).backoff.ready(now))
    }

    fn wake_at(&self, now: Instant) -> Option<Instant> {
        self.conns
            .values()
            .filter_map(|c| lock(c).backoff.waiting_until(now))
            .min()
    }

    fn fetch(&mut self, route: i32, asks: Vec<Ask>) -> Answers<Fetched> {
        self.request(
            route,
            asks,
            |mut client, session, asks| async move {
                let mut session = session.unwrap_or_default();
                let r = fetch(&mut client, &mut session, &asks).await;
                (client, Some(session), r.map(|a| (asks, a)))
            },
            |(asks, answer), due| match requests::fetched(&asks, answer) {
                Ok(parts) => parts
                    .into_iter()
                    .map(|f| {
                        if f.error_code == 0 {
                            Ok(Fetched {
                                high_watermark: f.high_watermark,
                                log_start: f.log_start_offset,
                                records: f.records,
                            })
                        } else {
                            Err(part_error(f.error_code, due))
                        }
                    })
                    .collect(),
                // The whole request refused (Fetch v7+'s top-level error): each partition of
                // it as if it had that error (Kafka's `partitionsWithError`).
                Err(code) => asks.iter().map(|_| Err(part_error(code, due))).collect(),
            },
        )
    }

    fn epoch_ends(&mut self, route: i32, asks: Vec<Ask>) -> Answers<EpochEnd> {
        self.request(
            route,
            asks,
            |mut client, session, asks| async move {
                let r = requests::epoch_ends(&mut client, &asks).await;
                (client, session, r)
            },
            |ends, due| {
                ends.into_iter()
                    .map(|(code, epoch, end)| {
                        if code == 0 {
                            Ok(EpochEnd { epoch, end })
                        } else {
                            Err(part_error(code, due))
                        }
                    })
                    .collect()
            },
        )
    }

    fn log_ranges(&mut self, route: i32, asks: Vec<Ask>) -> Answers<LogRange> {
        self.request(
            route,
            asks,
            |mut client, session, asks| async move {
                let r = log_ranges(&mut client, &asks).await;
                (client, session, r)
            },
            |ranges, due| {
                ranges
                    .into_iter()
                    .map(|((code, earliest, latest), probe)| {
                        if code == 0 {
                            Ok(LogRange {
                                earliest,
                                latest,
                                probe,
                            })
                        } else {
                            Err(part_error(code, due))
                        }
                    })
                    .collect()
            },
        )
    }
}

/// One Fetch, through the connection's incremental session (Fetch v7+).
async fn fetch(
    client: &mut Client,
    session: &mut FetchSession,
    asks: &[Ask],
) -> Result<kafka_protocol::messages::FetchResponse, ClientError> {
    let version = client.version(ApiKey::Fetch, 4, 12)?;
    let mut r = requests::fetch(asks, requests::FETCH_WAIT_MS);
    let sessions = version >= 7;
    if let (true, RequestKind::Fetch(f)) = (sessions, &mut r) {
        session.prepare(f, asks);
    }
    match client.call(ApiKey::Fetch, version, r).await? {
        ResponseKind::Fetch(f) if sessions => Ok(session.receive(asks, f)),
        ResponseKind::Fetch(f) => Ok(f),
        _ => Err(ClientError("Fetch answered with another API".into())),
    }
}

/// ListOffsets earliest and latest; where the source's log start is past the offset asked
/// (and not past its end), the source's fetch at its log start, whose first batch's base is
/// where the local log is to start.
async fn log_ranges(
    client: &mut Client,
    asks: &[Ask],
) -> Result<Vec<((i16, i64, i64), bytes::Bytes)>, ClientError> {
    let ranges = requests::log_range(client, asks).await?;
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
    Ok(ranges.into_iter().zip(probes).collect())
}
