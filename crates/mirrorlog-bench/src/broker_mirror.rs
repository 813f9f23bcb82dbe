//! `broker-mirror`: the path a user runs — two `mirrorlog-broker`s over loopback, a source and
//! a destination mirroring it through `POST /mirrors` — at 1,000 partitions and at 16 (the
//! flat-in-partitions check).
//!
//! For each partition count P, on a fresh pair of brokers:
//! - **Full speed.** A backlog (64 MiB per `--seconds`) is produced to the source's topic
//!   `bulk` first, then a mirror of it is created at the destination. The destination's
//!   durable MB/s is the backlog's bytes over the time from its first durable bytes to its
//!   last, read by ListOffsets every 10 ms (the mirror's start-up — topic creation, metadata,
//!   the first epoch checks — is left out).
//! - **RPO at half the full speed.** A second mirror follows topic `rpo`, created empty and
//!   caught up before the clock starts. Producers write to the source at a fixed offered load
//!   of half the full-speed figure for `--seconds`, and a consumer long-polls every partition
//!   at the destination. For each record, the RPO is the time from its ack at the source
//!   (`acks=all`: durable there) to a destination consumer holding it (durable there: the
//!   destination serves only its durable end); a consumer that got it before the ack counts 0.
//!   The destination's own fetch-to-durable time (each fetch answer's arrival to all its
//!   appends durable) is the mirror's `fetch_to_durable_us` from `GET /mirrors`.
//! - **Checks.** Both brokers are shut down cleanly, every partition's log is compared byte
//!   for byte between them (the segments' bytes in order), and both data directories are
//!   verified read-only as `mirrorlog verify` does.
//!
//! The producer is our own pipelined client (`broker.rs`'s `WireProducer`: idempotent,
//! `acks=-1`, 5 requests in flight), each Produce request one 4-record batch of 1 KiB records
//! for each of 64 partitions in turn, as many producers writing small batches to many
//! partitions would.

use crate::args::Args;
use crate::broker::{wire_producer, WireProducer};
use crate::measure::{histogram, progress, Figure, Outcome, Side};
use crate::report::{MISMATCHED, TO_NARROW, TO_WIDE};
use crate::setup::client_batch_of;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::engine::TopicPartition;
use mirrorlog::format::Offset;
use mirrorlog_broker::mirror_requests::{self as wire, Ask};
use mirrorlog_broker::net::client::Client;
use mirrorlog_broker::settings::BrokerConfig;
use mirrorlog_broker::Server;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The partition counts measured: the wide one (or `--wide-partitions` when fewer), first.
const WIDE: usize = 1_000;
const NARROW: usize = 16;
const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: usize = 4;
/// Partitions per Produce request (a batch each), in turn.
const PARTITIONS_PER_REQUEST: usize = 64;
const IN_FLIGHT: usize = 5;
/// Backlog per `--seconds` for the full-speed phase.
const BACKLOG_PER_SECOND: u64 = 64 << 20;
/// How often the destination's ends are read while it catches up.
const POLL: Duration = Duration::from_millis(10);
/// The most a phase waits for the destination to hold what the source acknowledged.
const CATCH_UP_MAX: Duration = Duration::from_secs(120);
const BULK: &str = "bulk";
/// Problems named in the notes per side (the rest counted).
const PROBLEMS_SHOWN: usize = 5;
const RPO: &str = "rpo";

/// The side's name for `p` partitions.
pub(crate) fn side_name(p: usize) -> String {
    format!("{p} partitions")
}

/// When `mirror-wide` and `broker-mirror` both ran: the wide figure against
/// mirror-wide's engine figure of the same run, on broker-mirror's outcome.
pub(crate) fn against_wide(outcomes: &mut [Outcome]) {
    let wide = outcomes
        .iter()
        .find(|o| o.workload == "mirror-wide")
        .and_then(|o| o.sides.first())
        .map(Side::mb_per_sec);
    let Some(wide) = wide else { return };
    if let Some(o) = outcomes.iter_mut().find(|o| o.workload == "broker-mirror") {
        let ours = o.sides.first().map_or(0.0, Side::mb_per_sec);
        o.figures
            .push(Figure::new(TO_WIDE, ours / wide.max(1e-9), "x"));
    }
}

/// What one partition count measured.
struct Run {
    side: Side,
    /// Per record: ack at the source -> held at the destination, µs.
    rpo: hdrhistogram::Histogram<u64>,
    offered_mb_s: f64,
    achieved_mb_s: f64,
    /// The `rpo` mirror's fetch-to-durable summary (µs).
    fetch_to_durable: serde_json::Value,
    mismatched: u64,
    /// Bytes of log compared between the brokers.
    compared: u64,
    problems: Vec<String>,
}

pub(crate) fn broker_mirror(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let wide = WIDE.min(a.wide_partitions);
    let mut runs = Vec::new();
    for p in [wide, NARROW] {
        progress(&format!("broker-mirror: {p} partitions"));
        runs.push(one_count(
            &rt,
            &dir.join(format!("broker-mirror-{p}")),
            p,
            a,
        )?);
    }
    let mut figures = Vec::new();
    let mut notes = vec![format!(
        "two brokers over loopback, the destination mirroring through POST /mirrors; {RECORD_BYTES}-byte records in {RECORDS_PER_BATCH}-record batches, {PARTITIONS_PER_REQUEST} partitions a Produce request, acks=-1, {IN_FLIGHT} in flight; MB/s: the destination's catch-up of a {} MiB backlog from its first durable bytes to its last; latency: RPO per record (source ack -> destination consumer) at half that speed; goals: wide >= 0.8x narrow and >= 0.8x mirror-wide's engine MB/s, RPO p99 <= 50 ms, every partition byte-identical",
        backlog_bytes(a) >> 20
    )];
    let wide_mb_s = runs[0].side.mb_per_sec();
    let q = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    for (side, r) in ["wide", "narrow"].into_iter().zip(&runs) {
        let ftd = |k: &str| r.fetch_to_durable[k].as_f64().unwrap_or(-1.0) / 1000.0;
        let each: [(&'static str, f64, &'static str); 7] = [
            ("RPO p50", q(&r.rpo, 0.5), "ms"),
            ("RPO p99", q(&r.rpo, 0.99), "ms"),
            ("RPO max", r.rpo.max() as f64 / 1000.0, "ms"),
            ("offered load (half of full speed)", r.offered_mb_s, "MB/s"),
            ("achieved load", r.achieved_mb_s, "MB/s"),
            ("destination fetch-to-durable p50", ftd("p50"), "ms"),
            ("destination fetch-to-durable p99", ftd("p99"), "ms"),
        ];
        for (name, value, unit) in each {
            figures.push(Figure::new(leak(format!("{side}: {name}")), value, unit));
        }
        for problem in r.problems.iter().take(PROBLEMS_SHOWN) {
            notes.push(format!("{}: {problem}", r.side.name));
        }
        if r.problems.len() > PROBLEMS_SHOWN {
            notes.push(format!(
                "{}: and {} more problems",
                r.side.name,
                r.problems.len() - PROBLEMS_SHOWN
            ));
        }
    }
    figures.push(Figure::new(
        TO_NARROW,
        wide_mb_s / runs[1].side.mb_per_sec().max(1e-9),
        "x",
    ));
    figures.push(Figure::new(
        MISMATCHED,
        runs.iter().map(|r| r.mismatched as f64).sum(),
        "",
    ));
    figures.push(Figure::new(
        "bytes compared between the brokers",
        runs.iter().map(|r| r.compared as f64).sum(),
        "bytes",
    ));
    let sides = runs.into_iter().map(|r| r.side).collect();
    Ok(Outcome {
        workload: "broker-mirror",
        unit: "MB/s",
        sides,
        notes,
        steps: Vec::new(),
        figures,
    })
}

/// A figure's name built at run time (a handful per run, kept for the process's life).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn backlog_bytes(a: &Args) -> u64 {
    ((a.seconds * BACKLOG_PER_SECOND as f64) as u64).max(8 << 20)
}

fn broker_config(dir: PathBuf, a: &Args) -> Result<BrokerConfig, String> {
    let mut c = BrokerConfig::default();
    c.data_dir = dir;
    c.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
    c.admin_listen = c.listen;
    c.cluster_id = "bench".into();
    c.topic_defaults.segment_bytes = crate::setup::segment_bytes(a, 64);
    Ok(c)
}

/// One partition count on a fresh pair of brokers.
fn one_count(rt: &tokio::runtime::Runtime, dir: &Path, p: usize, a: &Args) -> Result<Run, String> {
    let (src_dir, dst_dir) = (dir.join("source"), dir.join("destination"));
    let src = Server::start(broker_config(src_dir.clone(), a)?).map_err(|e| e.to_string())?;
    let dst = Server::start(broker_config(dst_dir.clone(), a)?).map_err(|e| e.to_string())?;
    let (src_addr, dst_addr) = (src.kafka.to_string(), dst.kafka.to_string());
    let admin = Admin::new(&dst)?;
    let measured = rt.block_on(async {
        let mut c = Client::connect(&src_addr).await.map_err(|e| e.0)?;
        create_topics(&mut c, &[BULK, RPO], p).await?;
        let mut producer = wire_producer(&src_addr, p).await?;
        // Both mirrors started (their topics empty) before anything is measured.
        let mut d = Client::connect(&dst_addr).await.map_err(|e| e.0)?;
        for topic in [RPO, BULK] {
            admin.create_mirror(topic, &src_addr)?;
            wait_until_served(&mut d, topic, p).await?;
        }
        // Full speed: the backlog produced while its mirror is paused, then resumed.
        admin.call("POST", &format!("/mirrors/{BULK}/pause"), "")?;
        let backlog = produce_backlog(&mut producer, p, backlog_bytes(a)).await?;
        admin.call("POST", &format!("/mirrors/{BULK}/resume"), "")?;
        let side = catch_up(&mut d, p, &backlog, Instant::now()).await?;
        // Steady state before the clock: every partition of `rpo` written and mirrored once (a
        // partition's first append at the destination creates its segment), the mirror
        // restarted (pause, resume: its fetch-to-durable times start afresh), and every
        // partition written and mirrored once more through the new fetcher.
        producer.seqs.iter_mut().for_each(|s| *s = 0);
        for round in 0..2 {
            let ends = produce_round(&mut producer, RPO, p).await?;
            wait_for(&mut d, RPO, p, ends.iter().sum()).await?;
            if round == 0 {
                admin.call("POST", &format!("/mirrors/{RPO}/pause"), "")?;
                admin.call("POST", &format!("/mirrors/{RPO}/resume"), "")?;
            }
        }
        // Half of it, open loop, with the consumer at the destination.
        let offered = side.mb_per_sec() / 2.0;
        let (rpo, achieved) =
            offered_load(&mut producer, &dst_addr, p, offered * 1e6, a.seconds).await?;
        Ok::<_, String>((side, rpo, offered, achieved))
    });
    let fetch_to_durable = admin.fetch_to_durable(RPO);
    dst.shutdown().map_err(|e| e.to_string())?;
    src.shutdown().map_err(|e| e.to_string())?;
    let (side, rpo, offered_mb_s, achieved_mb_s) = measured?;
    let fetch_to_durable = fetch_to_durable?;
    let mut problems = verify(&src_dir);
    problems.extend(verify(&dst_dir));
    let mut compared = 0;
    let mismatched = compare(&src_dir, &dst_dir, p, &mut problems, &mut compared)?;
    let mut side = side;
    side.name = side_name(p);
    side.latency_us = rpo.clone();
    side.errors += problems.len() as u64;
    if side.first_error.is_none() {
        side.first_error = problems.first().cloned();
    }
    Ok(Run {
        side,
        rpo,
        offered_mb_s,
        achieved_mb_s: achieved_mb_s / 1e6,
        fetch_to_durable,
        mismatched,
        compared,
        problems,
    })
}

async fn create_topics(c: &mut Client, names: &[&str], p: usize) -> Result<(), String> {
    let mut r = CreateTopicsRequest::default();
    for name in names {
        let mut t = CreatableTopic::default();
        t.name = TopicName(StrBytes::from_string((*name).to_string()));
        t.num_partitions = p as i32;
        t.replication_factor = 1;
        r.topics.push(t);
    }
    r.timeout_ms = 60_000;
    let version = c.version(ApiKey::CreateTopics, 2, 7).map_err(|e| e.0)?;
    let ResponseKind::CreateTopics(answer) = c
        .call(ApiKey::CreateTopics, version, RequestKind::CreateTopics(r))
        .await
        .map_err(|e| e.0)?
    else {
        return Err("CreateTopics answered with another API".into());
    };
    for t in answer.topics {
        if t.error_code != 0 {
            return Err(format!("CreateTopics {}: error {}", t.name.0, t.error_code));
        }
    }
    Ok(())
}

fn asks(topic: &str, p: usize, next: &[i64]) -> Vec<Ask> {
    (0..p)
        .map(|i| Ask {
            tp: TopicPartition::new(topic, i as i32),
            offset: Offset(next.get(i).copied().unwrap_or(0)),
            current_leader_epoch: -1,
        })
        .collect()
}

/// Every partition's log end at the destination (ListOffsets); an error code fails.
async fn ends(d: &mut Client, topic: &str, p: usize) -> Result<Vec<i64>, String> {
    let ranges = wire::log_range(d, &asks(topic, p, &[]))
        .await
        .map_err(|e| e.0)?;
    ranges
        .into_iter()
        .map(|(code, _, end)| {
            if code == 0 {
                Ok(end)
            } else {
                Err(format!("ListOffsets {topic}: error {code}"))
            }
        })
        .collect()
}

/// Waits until the destination serves every partition of `topic` (the mirror created it).
async fn wait_until_served(d: &mut Client, topic: &str, p: usize) -> Result<(), String> {
    let deadline = Instant::now() + CATCH_UP_MAX;
    loop {
        match ends(d, topic, p).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("the mirror of {topic} did not start: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One Produce request: a batch for each of `parts`; the batch bytes sent.
fn produce_request(w: &mut WireProducer, topic: &str, parts: &[usize]) -> (RequestKind, u64) {
    let value = [0x42u8; RECORD_BYTES];
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    let mut bytes = 0;
    for &i in parts {
        let b = client_batch_of(w.producer_id, w.seqs[i], RECORDS_PER_BATCH, &value);
        w.seqs[i] += RECORDS_PER_BATCH as i32;
        bytes += b.len() as u64;
        let mut d = PartitionProduceData::default();
        d.index = i as i32;
        d.records = Some(b.into());
        t.partition_data.push(d);
    }
    let mut r = ProduceRequest::default();
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data.push(t);
    (RequestKind::Produce(r), bytes)
}

/// The partitions of the `k`th request, in turn.
fn turn(k: u64, p: usize) -> Vec<usize> {
    let n = PARTITIONS_PER_REQUEST.min(p);
    let first = (k as usize * n) % p;
    (0..n).map(|j| (first + j) % p).collect()
}

/// An answered Produce request: each partition's (index, base offset), or the first error.
fn produced(answer: ResponseKind) -> Result<Vec<(i32, i64)>, String> {
    let ResponseKind::Produce(resp) = answer else {
        return Err("Produce answered with another API".into());
    };
    let mut out = Vec::new();
    for p in resp.responses.iter().flat_map(|t| &t.partition_responses) {
        if p.error_code != 0 {
            return Err(format!("partition {}: error {}", p.index, p.error_code));
        }
        out.push((p.index, p.base_offset));
    }
    Ok(out)
}

/// One batch to every partition of `topic`, acknowledged; each partition's end offset.
async fn produce_round(w: &mut WireProducer, topic: &str, p: usize) -> Result<Vec<i64>, String> {
    let requests = p.div_ceil(PARTITIONS_PER_REQUEST.min(p));
    for k in 0..requests {
        let (r, _) = produce_request(w, topic, &turn(k as u64, p));
        w.client
            .send(ApiKey::Produce, w.version, r)
            .await
            .map_err(|e| e.0)?;
    }
    for _ in 0..requests {
        produced(w.client.recv().await.map_err(|e| e.0)?)?;
    }
    Ok(w.seqs.iter().map(|&s| i64::from(s)).collect())
}

/// Waits until the destination holds `total` records of `topic`.
async fn wait_for(d: &mut Client, topic: &str, p: usize, total: i64) -> Result<(), String> {
    let deadline = Instant::now() + CATCH_UP_MAX;
    loop {
        let held: i64 = ends(d, topic, p).await.map_or(0, |e| e.iter().sum());
        if held >= total {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the destination held {held} of {total} records of {topic}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Produces `bytes` to `bulk` as fast as the source takes it; each partition's end offset.
async fn produce_backlog(w: &mut WireProducer, p: usize, bytes: u64) -> Result<Vec<i64>, String> {
    w.seqs.iter_mut().for_each(|s| *s = 0);
    let mut sent = 0u64;
    let mut k = 0u64;
    loop {
        while w.client.in_flight() < IN_FLIGHT && sent < bytes {
            let (r, n) = produce_request(w, BULK, &turn(k, p));
            k += 1;
            sent += n;
            w.client
                .send(ApiKey::Produce, w.version, r)
                .await
                .map_err(|e| e.0)?;
        }
        if w.client.in_flight() == 0 {
            break;
        }
        produced(w.client.recv().await.map_err(|e| e.0)?)?;
    }
    Ok(w.seqs.iter().map(|&s| i64::from(s)).collect())
}

/// Times the destination's catch-up to `backlog` (each partition's end), resumed at
/// `resumed`: the bytes durable after its first poll that saw any, over the time from then to
/// the last (the resumed fetcher's first look is left out); from `resumed` when the first poll
/// that saw any saw all.
async fn catch_up(
    d: &mut Client,
    p: usize,
    backlog: &[i64],
    resumed: Instant,
) -> Result<Side, String> {
    let total: i64 = backlog.iter().sum();
    let batch = client_batch_of(0, 0, RECORDS_PER_BATCH, &[0x42u8; RECORD_BYTES]).len() as u64;
    let bytes_of = |records: i64| records.max(0) as u64 / RECORDS_PER_BATCH as u64 * batch;
    let deadline = Instant::now() + CATCH_UP_MAX;
    let mut first: Option<(Instant, i64)> = None;
    loop {
        let at = Instant::now();
        let held: i64 = match ends(d, BULK, p).await {
            Ok(e) => e.iter().sum(),
            // Not served yet: the mirror is still starting.
            Err(_) => 0,
        };
        if held > 0 && first.is_none() {
            first = Some((at, held));
        }
        if held >= total {
            let (t0, h0) = first.filter(|&(_, h)| h < total).unwrap_or((resumed, 0));
            let mut side = Side::new("");
            side.secs = at.duration_since(t0).as_secs_f64().max(1e-3);
            side.bytes = bytes_of(total - h0);
            side.ops = ((total - h0).max(0) as u64) / RECORDS_PER_BATCH as u64;
            return Ok(side);
        }
        if at > deadline {
            return Err(format!(
                "the destination held {held} of {total} records after {} s",
                CATCH_UP_MAX.as_secs()
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Produces to `rpo` at `rate` bytes/s for `secs` (open loop: request k goes at its scheduled
/// time, or at once when behind) while a destination consumer holds each batch; the RPO per
/// record, and the load achieved (bytes/s).
async fn offered_load(
    w: &mut WireProducer,
    dst: &str,
    p: usize,
    rate: f64,
    secs: f64,
) -> Result<(hdrhistogram::Histogram<u64>, f64), String> {
    let from: Vec<i64> = w.seqs.iter().map(|&s| i64::from(s)).collect();
    let (target, wanted) = tokio::sync::watch::channel(None);
    let consumer = tokio::spawn(consume(dst.to_string(), from.clone(), wanted));
    let batch = client_batch_of(0, 0, RECORDS_PER_BATCH, &[0x42u8; RECORD_BYTES]).len() as f64;
    let per_request = batch * PARTITIONS_PER_REQUEST.min(p) as f64;
    let interval = Duration::from_secs_f64(per_request / rate.max(1.0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let mut acked: HashMap<(i32, i64), Instant> = HashMap::new();
    let mut k = 0u32;
    let mut sent_bytes = 0u64;
    loop {
        let due = started + interval * k;
        let now = Instant::now();
        let sending = due < deadline;
        if sending && due <= now && w.client.in_flight() < IN_FLIGHT {
            let (r, n) = produce_request(w, RPO, &turn(u64::from(k), p));
            k += 1;
            sent_bytes += n;
            w.client
                .send(ApiKey::Produce, w.version, r)
                .await
                .map_err(|e| e.0)?;
        } else if w.client.in_flight() > 0 {
            // Waiting for its time, behind, or done sending: the oldest answer, read at
            // once (the socket holds it until then).
            let answer = w.client.recv().await.map_err(|e| e.0)?;
            let at = Instant::now();
            for key in produced(answer)? {
                acked.insert(key, at);
            }
        } else if sending {
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
        } else {
            break;
        }
    }
    let achieved = sent_bytes as f64 / started.elapsed().as_secs_f64().max(1e-9);
    let ends: Vec<i64> = w.seqs.iter().map(|&s| i64::from(s)).collect();
    let total: i64 = ends.iter().sum::<i64>() - from.iter().sum::<i64>();
    target.send_replace(Some(ends));
    let seen = consumer.await.map_err(|e| format!("the consumer: {e}"))??;
    let mut rpo = histogram();
    for ((i, base), (at, records)) in seen {
        let Some(acked_at) = acked.get(&(i, base)) else {
            return Err(format!(
                "partition {i}: batch at {base} held but never acked"
            ));
        };
        let us =
            u64::try_from(at.saturating_duration_since(*acked_at).as_micros()).unwrap_or(u64::MAX);
        let _ = rpo.record_n(us.max(1), records);
    }
    if rpo.len() != total as u64 {
        return Err(format!(
            "{total} records acked, {} held at the destination",
            rpo.len()
        ));
    }
    Ok((rpo, achieved))
}

/// Each batch the consumer held: (partition, base offset) -> (when, records).
type Held = HashMap<(i32, i64), (Instant, u64)>;

/// Long-polls every partition of `rpo` at the destination from `from` until it holds each
/// partition's end in `wanted` (once the producer sets it), noting when each batch arrived.
async fn consume(
    dst: String,
    from: Vec<i64>,
    mut wanted: tokio::sync::watch::Receiver<Option<Vec<i64>>>,
) -> Result<Held, String> {
    let mut c = Client::connect(&dst).await.map_err(|e| e.0)?;
    let version = c.version(ApiKey::Fetch, 4, 12).map_err(|e| e.0)?;
    let p = from.len();
    let mut next = from;
    let mut held = Held::new();
    let mut give_up: Option<Instant> = None;
    loop {
        if let Some(ends) = wanted.borrow_and_update().as_ref() {
            if next.iter().zip(ends).all(|(n, e)| n >= e) {
                return Ok(held);
            }
            let t = *give_up.get_or_insert_with(|| Instant::now() + CATCH_UP_MAX);
            if Instant::now() > t {
                return Err(format!(
                    "after {} s the destination held {} of {} records",
                    CATCH_UP_MAX.as_secs(),
                    next.iter().sum::<i64>(),
                    ends.iter().sum::<i64>()
                ));
            }
        }
        let asks = asks(RPO, p, &next);
        let ResponseKind::Fetch(answer) = c
            .call(ApiKey::Fetch, version, wire::fetch(&asks, 100))
            .await
            .map_err(|e| e.0)?
        else {
            return Err("Fetch answered with another API".into());
        };
        let at = Instant::now();
        let fetched =
            wire::fetched(&asks, answer).map_err(|code| format!("Fetch: error {code}"))?;
        for (i, f) in fetched.into_iter().enumerate() {
            if f.error_code != 0 {
                return Err(format!("Fetch {RPO}-{i}: error {}", f.error_code));
            }
            for (base, records) in batches(&f.records) {
                if base >= next[i] {
                    held.insert((i as i32, base), (at, records));
                    next[i] = base + records as i64;
                }
            }
        }
    }
}

/// The whole batches of fetched `records`: (base offset, records) each.
fn batches(records: &[u8]) -> Vec<(i64, u64)> {
    let mut out = Vec::new();
    let mut at = 0;
    // Base offset (8), length (4), leader epoch (4), magic (1), CRC (4), attributes (2), last
    // offset delta (4): 27 bytes of header before the delta's end.
    while records.len() >= at + 27 {
        let word = |o: usize, n: usize| &records[at + o..at + o + n];
        let base = i64::from_be_bytes(word(0, 8).try_into().unwrap_or([0; 8]));
        let len = i32::from_be_bytes(word(8, 4).try_into().unwrap_or([0; 4]));
        let delta = i32::from_be_bytes(word(23, 4).try_into().unwrap_or([0; 4]));
        let end = at + 12 + usize::try_from(len).unwrap_or(usize::MAX / 2);
        if len < 0 || end > records.len() {
            break;
        }
        out.push((base, u64::try_from(delta).unwrap_or(0) + 1));
        at = end;
    }
    out
}

/// Where the batches of `records` end: the last whole batch's end.
fn whole_end(records: &[u8]) -> usize {
    let mut at = 0;
    while records.len() >= at + 12 {
        let len = i32::from_be_bytes(records[at + 8..at + 12].try_into().unwrap_or([0; 4]));
        let end = at + 12 + usize::try_from(len).unwrap_or(usize::MAX / 2);
        if len <= 0 || end > records.len() {
            break;
        }
        at = end;
    }
    at
}

/// A partition's log as bytes: its segments' whole batches, in order.
fn log_bytes(dir: &Path) -> Result<Vec<u8>, String> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for n in names {
        let bytes = std::fs::read(&n).map_err(|e| format!("{}: {e}", n.display()))?;
        out.extend_from_slice(&bytes[..whole_end(&bytes)]);
    }
    Ok(out)
}

/// Compares every partition's log between the two brokers; how many differ (each named in
/// `problems`); the bytes compared are added to `compared`.
fn compare(
    src: &Path,
    dst: &Path,
    p: usize,
    problems: &mut Vec<String>,
    compared: &mut u64,
) -> Result<u64, String> {
    let (src, dst) = (
        mirrorlog_broker::log_dir(src),
        mirrorlog_broker::log_dir(dst),
    );
    let mut mismatched = 0;
    for topic in [BULK, RPO] {
        for i in 0..p {
            let name = format!("{topic}-{i}");
            let (a, b) = (log_bytes(&src.join(&name))?, log_bytes(&dst.join(&name))?);
            if a != b {
                mismatched += 1;
                problems.push(format!(
                    "{name}: {} bytes at the source, {} at the destination, not identical",
                    a.len(),
                    b.len(),
                ));
            }
            *compared += a.len() as u64;
        }
    }
    Ok(mismatched)
}

/// A data directory checked read-only as `mirrorlog verify` checks it: every partition, and
/// the shard journals against the segments; each problem found.
fn verify(data_dir: &Path) -> Vec<String> {
    use mirrorlog::inspect;
    let log = mirrorlog_broker::log_dir(data_dir);
    let mut problems = Vec::new();
    match inspect::partition::partition_dirs(&log) {
        Ok(dirs) => {
            for d in dirs {
                match inspect::partition::inspect_partition(&d, &mut |_| {}) {
                    Ok(r) => problems.extend(r.problems.iter().map(ToString::to_string)),
                    Err(e) => problems.push(format!("{}: {e}", d.display())),
                }
            }
        }
        Err(e) => problems.push(format!("{}: {e}", log.display())),
    }
    problems.extend(
        inspect::verify_journals(&log)
            .iter()
            .map(ToString::to_string),
    );
    problems
}

/// The destination's admin surface: its address and token.
struct Admin {
    addr: std::net::SocketAddr,
    token: String,
}

impl Admin {
    fn new(server: &Server) -> Result<Self, String> {
        let (file, addr) = (&server.admin_token_file, server.admin);
        let token = std::fs::read_to_string(file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .trim()
            .to_string();
        Ok(Admin { addr, token })
    }

    /// One request; the answer's body, or an error naming a status other than 200.
    fn call(&self, method: &str, path: &str, body: &str) -> Result<String, String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.addr).map_err(|e| e.to_string())?;
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        )
        .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        if head.starts_with("HTTP/1.1 200") {
            Ok(body.to_string())
        } else {
            Err(format!("{method} {path}: {head} {body}"))
        }
    }

    /// Mirror `topic` (named as it) from `source`.
    fn create_mirror(&self, topic: &str, source: &str) -> Result<(), String> {
        let spec = serde_json::json!({"name": topic, "bootstrap": source, "topics": [topic]});
        self.call("POST", "/mirrors", &spec.to_string()).map(drop)
    }

    /// The mirror `name`'s `fetch_to_durable_us` summary.
    fn fetch_to_durable(&self, name: &str) -> Result<serde_json::Value, String> {
        let body = self.call("GET", "/mirrors", "")?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        v["mirrors"]
            .as_array()
            .and_then(|ms| ms.iter().find(|m| m["name"] == name))
            .map(|m| m["fetch_to_durable_us"].clone())
            .ok_or_else(|| format!("GET /mirrors names no mirror {name}"))
    }
}
