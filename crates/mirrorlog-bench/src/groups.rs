//! `groups`: the group coordinator of `mirrorlog-broker`, in process, over loopback.
//!
//! - `OffsetCommit (1,000 groups)`: a pipelined client of our own commits one offset per
//!   request for 1,000 groups in turn (each group's offset of its own partition, so every
//!   commit is a new value), 5 requests in flight; latency per request, to the durable answer.
//! - `Produce (same size)`: the baseline, the same client and flight producing one record per
//!   request with the key and value sizes of a commit's record, to a 50-partition topic in turn
//!   (as `__consumer_offsets` has 50), `acks=-1`: the same durable append of the same bytes
//!   without the coordinator. Goal: the commit's p99 within 2x the produce's.
//! - `rebalance (10 members)`: ten members, each on its own connection, join an empty group
//!   (KIP-394's two joins), the leader assigns and every member syncs, rejoining as clients do
//!   when the group moves on (heartbeats every 10 ms); the time from the first join to every
//!   member synced in one generation, over 20 groups (`group.initial.rebalance.delay.ms` 0: the
//!   members arrive over a few generations, as they do when a group starts without the delay).

use crate::args::Args;
use crate::measure::{order, progress, Figure, Outcome, Side};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest,
    JoinGroupRequest, OffsetCommitRequest, ProduceRequest, RequestKind, ResponseKind,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};
use mirrorlog_broker::net::client::Client;
use mirrorlog_broker::settings::BrokerConfig;
use mirrorlog_broker::Server;
use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

const GROUPS: usize = 1000;
/// Partitions of the committed topic and of the produce baseline's (`__consumer_offsets`' 50).
const PARTITIONS: i32 = 50;
const IN_FLIGHT: usize = 5;
const MEMBERS: usize = 10;
const REBALANCES: usize = 20;
/// The members' heartbeat interval in the rebalance (a client's default is 3 s; the bench
/// measures the coordinator, not the interval).
const HEARTBEAT: Duration = Duration::from_millis(10);
const COMMITTED: &str = "committed";
const PRODUCED: &str = "produced";
/// The sizes of a commit's record in `__consumer_offsets`: key version 1 with group
/// `g-NNN`, topic `committed` and the partition; value version 3 with an empty metadata.
const KEY_BYTES: usize = 2 + 2 + 5 + 2 + COMMITTED.len() + 4;
const VALUE_BYTES: usize = 2 + 8 + 4 + 2 + 8;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn group_name(i: usize) -> String {
    format!("g-{:03}", i % GROUPS)
}

async fn call(
    c: &mut Client,
    key: ApiKey,
    version: i16,
    body: RequestKind,
) -> Result<ResponseKind, String> {
    c.call(key, version, body).await.map_err(|e| e.0)
}

/// Creates the two topics and `__consumer_offsets` (FindCoordinator makes it).
async fn setup(bootstrap: &str) -> Result<(), String> {
    let mut c = Client::connect(bootstrap).await.map_err(|e| e.0)?;
    let mut r = CreateTopicsRequest::default();
    r.timeout_ms = 30_000;
    for name in [COMMITTED, PRODUCED] {
        let mut t = kafka_protocol::messages::create_topics_request::CreatableTopic::default();
        t.name = TopicName(s(name));
        t.num_partitions = PARTITIONS;
        t.replication_factor = 1;
        r.topics.push(t);
    }
    let ResponseKind::CreateTopics(resp) = call(
        &mut c,
        ApiKey::CreateTopics,
        5,
        RequestKind::CreateTopics(r),
    )
    .await?
    else {
        return Err("CreateTopics answered with another API".into());
    };
    if let Some(t) = resp.topics.iter().find(|t| t.error_code != 0) {
        return Err(format!("CreateTopics {}: error {}", t.name.0, t.error_code));
    }
    let mut f = FindCoordinatorRequest::default();
    f.key_type = 0;
    f.coordinator_keys.push(s("g-000"));
    let ResponseKind::FindCoordinator(resp) = call(
        &mut c,
        ApiKey::FindCoordinator,
        4,
        RequestKind::FindCoordinator(f),
    )
    .await?
    else {
        return Err("FindCoordinator answered with another API".into());
    };
    match resp.coordinators.first() {
        Some(x) if x.error_code == 0 => Ok(()),
        other => Err(format!(
            "FindCoordinator: {:?}",
            other.map(|x| x.error_code)
        )),
    }
}

fn commit_request(i: usize) -> RequestKind {
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(s(&group_name(i)));
    r.generation_id_or_member_epoch = -1;
    r.member_id = s("");
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = (i % PARTITIONS as usize) as i32;
    p.committed_offset = i as i64;
    p.committed_leader_epoch = -1;
    p.committed_metadata = Some(s(""));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = TopicName(s(COMMITTED));
    t.partitions.push(p);
    r.topics.push(t);
    RequestKind::OffsetCommit(r)
}

fn produce_request(i: usize) -> RequestKind {
    let (key, value) = ([b'k'; KEY_BYTES], [b'v'; VALUE_BYTES]);
    let mut b = BatchBuilder::new(BatchOptions::default());
    b.push(RecordSpec {
        timestamp: 0,
        key: Some(&key),
        value: Some(&value),
        headers: &[],
    });
    let mut d = PartitionProduceData::default();
    d.index = (i % PARTITIONS as usize) as i32;
    d.records = Some(b.build().into());
    let mut t = TopicProduceData::default();
    t.name = TopicName(s(PRODUCED));
    t.partition_data.push(d);
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data.push(t);
    RequestKind::Produce(r)
}

/// One pipelined side for `secs`: OffsetCommit or Produce requests, the `next`-th on, kept
/// [`IN_FLIGHT`] deep; latency per request, to its answer.
async fn pipelined(
    side: &mut Side,
    c: &mut Client,
    key: ApiKey,
    version: i16,
    next: &mut usize,
    secs: f64,
    bytes: u64,
) -> Result<(), String> {
    let mut sent: VecDeque<Instant> = VecDeque::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    loop {
        while c.in_flight() < IN_FLIGHT && Instant::now() < deadline {
            let body = match key {
                ApiKey::OffsetCommit => commit_request(*next),
                _ => produce_request(*next),
            };
            *next += 1;
            c.send(key, version, body).await.map_err(|e| e.0)?;
            sent.push_back(Instant::now());
        }
        let Some(at) = sent.pop_front() else { break };
        let answer = c.recv().await.map_err(|e| e.0)?;
        let us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
        let error = match &answer {
            ResponseKind::OffsetCommit(r) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .map(|p| p.error_code)
                .find(|e| *e != 0),
            ResponseKind::Produce(r) => r
                .responses
                .iter()
                .flat_map(|t| &t.partition_responses)
                .map(|p| p.error_code)
                .find(|e| *e != 0),
            _ => Some(-1),
        };
        match error {
            None => {
                side.ops += 1;
                side.bytes += bytes;
                let _ = side.latency_us.record(us.max(1));
            }
            Some(e) => {
                side.errors += 1;
                side.first_error
                    .get_or_insert_with(|| format!("{key:?}: error {e}"));
            }
        }
    }
    side.secs += started.elapsed().as_secs_f64();
    Ok(())
}

/// What the members of one rebalance report: per member, the generation it synced last.
type Synced = std::sync::Arc<std::sync::Mutex<Vec<Option<i32>>>>;

/// One member as a client runs it: join (KIP-394's two joins), sync (the leader assigns every
/// member an empty assignment), then heartbeat every [`HEARTBEAT`]; a join or sync refused
/// because the group moved on, or a heartbeat saying it rebalances, starts over with its id.
/// Runs until `stop`.
async fn member(
    bootstrap: String,
    group: String,
    index: usize,
    synced: Synced,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), String> {
    use std::sync::atomic::Ordering;
    let mut c = Client::connect(&bootstrap).await.map_err(|e| e.0)?;
    let join = |member: &str| {
        let mut r = JoinGroupRequest::default();
        r.group_id = GroupId(s(&group));
        r.session_timeout_ms = 30_000;
        r.rebalance_timeout_ms = 30_000;
        r.member_id = s(member);
        r.protocol_type = s("consumer");
        let mut p = JoinGroupRequestProtocol::default();
        p.name = s("range");
        // A consumer subscription (version 0) to `committed`, no user data.
        p.metadata = bytes::Bytes::from_static(&[
            0, 0, 0, 0, 0, 1, 0, 9, b'c', b'o', b'm', b'm', b'i', b't', b't', b'e', b'd', 0xff,
            0xff, 0xff, 0xff,
        ]);
        r.protocols.push(p);
        RequestKind::JoinGroup(r)
    };
    let mut id = String::new();
    while !stop.load(Ordering::Relaxed) {
        let ResponseKind::JoinGroup(j) = call(&mut c, ApiKey::JoinGroup, 5, join(&id)).await?
        else {
            return Err("JoinGroup answered with another API".into());
        };
        id = j.member_id.to_string();
        match j.error_code {
            0 => {}
            // MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS: again, with the id.
            79 | 27 => continue,
            e => return Err(format!("JoinGroup: error {e}")),
        }
        let mut r = SyncGroupRequest::default();
        r.group_id = GroupId(s(&group));
        r.generation_id = j.generation_id;
        r.member_id = j.member_id.clone();
        for m in &j.members {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = m.member_id.clone();
            r.assignments.push(a);
        }
        let ResponseKind::SyncGroup(sync) =
            call(&mut c, ApiKey::SyncGroup, 3, RequestKind::SyncGroup(r)).await?
        else {
            return Err("SyncGroup answered with another API".into());
        };
        match sync.error_code {
            0 => {}
            27 => continue,
            e => return Err(format!("SyncGroup: error {e}")),
        }
        synced
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)[index] = Some(j.generation_id);
        // Heartbeats until the group moves on (or the round ends).
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            tokio::time::sleep(HEARTBEAT).await;
            let mut h = HeartbeatRequest::default();
            h.group_id = GroupId(s(&group));
            h.generation_id = j.generation_id;
            h.member_id = j.member_id.clone();
            let ResponseKind::Heartbeat(hb) =
                call(&mut c, ApiKey::Heartbeat, 3, RequestKind::Heartbeat(h)).await?
            else {
                return Err("Heartbeat answered with another API".into());
            };
            match hb.error_code {
                0 => {}
                27 => break,
                e => return Err(format!("Heartbeat: error {e}")),
            }
        }
    }
    Ok(())
}

/// `REBALANCES` groups of `MEMBERS` formed from empty: each one's time from the first join to
/// every member synced in one generation.
async fn rebalances(side: &mut Side, bootstrap: &str) -> Result<(), String> {
    use std::sync::atomic::{AtomicBool, Ordering};
    for round in 0..REBALANCES {
        let group = format!("rebalance-{round}");
        let synced: Synced = std::sync::Arc::new(std::sync::Mutex::new(vec![None; MEMBERS]));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let tasks: Vec<_> = (0..MEMBERS)
            .map(|i| {
                tokio::spawn(member(
                    bootstrap.to_string(),
                    group.clone(),
                    i,
                    synced.clone(),
                    stop.clone(),
                ))
            })
            .collect();
        let deadline = started + Duration::from_secs(60);
        let took = loop {
            let settled = {
                let g = synced
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                g[0].is_some() && g.iter().all(|x| *x == g[0])
            };
            if settled {
                break started.elapsed();
            }
            if Instant::now() > deadline || tasks.iter().any(|t| t.is_finished()) {
                stop.store(true, Ordering::Relaxed);
                for t in tasks {
                    t.await.map_err(|e| e.to_string())??;
                }
                return Err(format!(
                    "{group}: {MEMBERS} members not in one generation in 60 s"
                ));
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.map_err(|e| e.to_string())??;
        }
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let _ = side.latency_us.record(us.max(1));
        side.ops += 1;
        side.secs += took.as_secs_f64();
    }
    Ok(())
}

pub(crate) fn groups(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let slice = a.seconds / 2.0;
    let mut config = BrokerConfig::default();
    config.data_dir = dir.join("groups-broker");
    config.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
    config.admin_listen = config.listen;
    config.cluster_id = "bench".into();
    config
        .set("group.initial.rebalance.delay.ms", "0")
        .map_err(|e| e.to_string())?;
    let server = Server::start(config).map_err(|e| e.to_string())?;
    let bootstrap = server.kafka.to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(setup(&bootstrap))?;
    let (mut commits, mut produces, mut rebalance) = (
        Side::new("OffsetCommit (1,000 groups)"),
        Side::new("Produce (same size)"),
        Side::new("rebalance (10 members)"),
    );
    let record_bytes = (KEY_BYTES + VALUE_BYTES) as u64;
    let result: Result<(), String> = rt.block_on(async {
        let mut c = Client::connect(&bootstrap).await.map_err(|e| e.0)?;
        let mut p = Client::connect(&bootstrap).await.map_err(|e| e.0)?;
        let (mut i, mut j) = (0usize, 0usize);
        for round in 0..2 {
            progress(&format!("groups: round {} of 2", round + 1));
            for side in order(round, 2) {
                match side {
                    0 => {
                        pipelined(
                            &mut commits,
                            &mut c,
                            ApiKey::OffsetCommit,
                            8,
                            &mut i,
                            slice,
                            record_bytes,
                        )
                        .await?
                    }
                    _ => {
                        pipelined(
                            &mut produces,
                            &mut p,
                            ApiKey::Produce,
                            9,
                            &mut j,
                            slice,
                            record_bytes,
                        )
                        .await?
                    }
                }
            }
        }
        progress("groups: rebalances");
        rebalances(&mut rebalance, &bootstrap).await
    });
    drop(rt);
    server.shutdown().map_err(|e| e.to_string())?;
    result?;
    let q = |s: &Side, q: f64| s.latency_us.value_at_quantile(q) as f64;
    Ok(Outcome {
        workload: "groups",
        unit: "ops/s",
        notes: vec![format!(
            "OffsetCommit: one offset per request, {GROUPS} groups in turn, {IN_FLIGHT} in flight, durable; Produce: one {}-byte record (a commit record's key and value sizes) per request to {PARTITIONS} partitions in turn, acks=-1, same flight; goal: commit p99 <= 2x produce p99; rebalance: {MEMBERS} members join an empty group and sync, rejoining as clients do (initial delay 0, heartbeats every 10 ms), {REBALANCES} groups, time to every member synced in one generation",
            KEY_BYTES + VALUE_BYTES
        )],
        figures: vec![
            Figure::new("OffsetCommit p99: ratio to Produce p99", q(&commits, 0.99) / q(&produces, 0.99).max(1.0), "x"),
            Figure::new("OffsetCommit/s: ratio to Produce/s", commits.ops_per_sec() / produces.ops_per_sec().max(1e-9), "x"),
            Figure::new("rebalance of 10 members p50", q(&rebalance, 0.5) / 1000.0, "ms"),
            Figure::new("rebalance of 10 members max", q(&rebalance, 1.0) / 1000.0, "ms"),
        ],
        sides: vec![commits, produces, rebalance],
        steps: Vec::new(),
    })
}
