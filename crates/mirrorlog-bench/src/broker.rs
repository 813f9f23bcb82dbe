//! `broker`: produce through `mirrorlog-broker` with a real client library — librdkafka, through
//! the `rdkafka` crate with its bundled librdkafka — against the same workload through the engine
//! API, in the same run, sides alternating; and the end-to-end latency from a produce's ack to a
//! long-polling consumer holding the record.
//!
//! Every side writes P partitions of 1 KiB records in 16 KiB batches from idempotent
//! producers, 5 batches in flight per partition, every ack durable:
//! - `broker (librdkafka)`: one librdkafka producer per partition (`acks=all`, idempotent,
//!   `batch.size` 16 records, `linger.ms` 100, up to 5 requests in flight) to an in-process
//!   broker on loopback, each warmed up before the clock starts. Its latency is per record,
//!   from `produce()` to the delivery report (librdkafka's batching time included).
//! - `engine API`: 16-record batches of the same records appended as `Origin::Client`, 5 in
//!   flight per partition from one thread, as a broker's handler issues them. Its latency is per
//!   batch, from the call to the durable ack.
//! - `broker (own client)`: the same batches to the same broker from a pipelined client of our
//!   own (`WireProducer`): each Produce request carries one batch of every partition, 5 requests
//!   in flight. Its latency is per request. It separates what the broker costs from what
//!   librdkafka costs on the same cores; the goal stays librdkafka's.
//!
//! - `broker (own client), 50 slowloris`: the same, while 50 connections each begin a 4 KiB
//!   request and drip one byte of it every 500 ms: its p99 against the side without them is
//!   the figure of the broker's isolation from slow clients (goal: within 1.2x).
//!
//! - `broker (own client), metrics off`: the same against a second broker started with
//!   `metrics.enabled=false`, while the first (metrics counted) is scraped at `GET /metrics`
//!   every [`SCRAPE_EVERY`] during its own side: MB/s with metrics ÷ without is what the
//!   metrics cost (goal: at most 2 %, a ratio ≥ 0.98).
//!
//! While the broker side runs, a librdkafka consumer long-polls every partition from the end
//! (`fetch.wait.max.ms` 500, `fetch.min.bytes` 1); for every 16th record the time from its
//! delivery report to the consumer holding it is recorded (a consumer that got it first counts 0).

use crate::args::Args;
use crate::measure::{histogram, order, progress, Errors, Figure, Outcome, Side};
use crate::metrics_cost::{
    measured, median, metrics_ns_per_request, process_cpu_seconds, with_scraper, MetricsPair,
    Scrapes, METRICS_PAIRS_PER_ROUND, SCRAPE_EVERY,
};
use crate::setup::{client_batch_of, engine_for, segment_bytes};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, ProduceRequest, ProducerId, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::engine::{Call, Origin, PartitionConfig};
use mirrorlog_broker::net::client::Client;
use mirrorlog_broker::settings::BrokerConfig;
use mirrorlog_broker::Server;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset as KOffset, TopicPartitionList};
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Partitions written on both sides.
const PARTITIONS: usize = 4;
/// Bytes per record value.
const RECORD_BYTES: usize = 1024;
/// Records per batch (16 KiB batches).
const RECORDS_PER_BATCH: usize = 16;
/// Appends (API side) or requests (librdkafka) in flight.
const IN_FLIGHT: usize = 5;
/// librdkafka's `linger.ms`: batches fill to 16 KiB long before it, so it only bounds a
/// partial batch's wait; a short linger made librdkafka's broker threads spin on this 2-core
/// machine (5 ms: 26 MB/s, 100 ms: 61 MB/s in one run each).
const LINGER_MS: u32 = 100;
/// Every this many records is followed end to end.
const E2E_SAMPLE: i64 = 16;
const TOPIC: &str = "bench";
/// The side driven by our own pipelined client.
const WIRE_SIDE: &str = "broker (own client)";
/// The same side while [`SLOWLORIS`] connections drip partial requests at the broker.
const SLOWLORIS_SIDE: &str = "broker (own client), 50 slowloris";
/// Connections that each begin a 4 KiB request and send one byte of it every
/// [`SLOWLORIS_DRIP`] (the broker closes them at `request.timeout.ms`, 30 s).
const SLOWLORIS: usize = 50;
const SLOWLORIS_DRIP: Duration = Duration::from_millis(500);
/// The side against the broker that counts no metrics.
const METRICS_OFF_SIDE: &str = "broker (own client), metrics off";
type Acks = Arc<Mutex<HashMap<(i32, i64), Instant>>>;
/// What the end-to-end consumer saw: (partition, offset) and when.
type Seen = Arc<Mutex<Vec<((i32, i64), Instant)>>>;

struct Delivery {
    /// Off during the producers' warm-up (connection, InitProducerId, metadata): those
    /// deliveries are not counted.
    measuring: AtomicBool,
    latency_us: Mutex<hdrhistogram::Histogram<u64>>,
    acked: std::sync::atomic::AtomicU64,
    errors: Errors,
    acks: Acks,
}

struct Ctx(Arc<Delivery>);

impl ClientContext for Ctx {}

impl ProducerContext for Ctx {
    type DeliveryOpaque = Box<Instant>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Self::DeliveryOpaque) {
        let now = Instant::now();
        if !self.0.measuring.load(Ordering::Relaxed) {
            if let Err((e, _)) = result {
                self.0.errors.record(e);
            }
            return;
        }
        match result {
            Ok(m) => {
                let us = u64::try_from(now.duration_since(*sent).as_micros()).unwrap_or(u64::MAX);
                let _ = self
                    .0
                    .latency_us
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .record(us.max(1));
                self.0.acked.fetch_add(1, Ordering::Relaxed);
                if m.offset() % E2E_SAMPLE == 0 {
                    self.0
                        .acks
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert((m.partition(), m.offset()), now);
                }
            }
            Err((e, _)) => self.0.errors.record(e),
        }
    }
}

/// The engine API side for `secs`.
fn api_side(side: &mut Side, engine: &mirrorlog::engine::Engine, seqs: &mut [i32], secs: f64) {
    let tps: Vec<_> = (0..PARTITIONS)
        .map(|p| mirrorlog::engine::TopicPartition::new(TOPIC, p as i32))
        .collect();
    let value = vec![0x42u8; RECORD_BYTES];
    let mut in_flight: Vec<VecDeque<(Call<mirrorlog::engine::AppendOutcome>, Instant)>> =
        (0..PARTITIONS).map(|_| VecDeque::new()).collect();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let settle =
        |side: &mut Side, call: Call<mirrorlog::engine::AppendOutcome>, at: Instant| match call
            .wait()
        {
            Ok(_) => {
                side.ops += RECORDS_PER_BATCH as u64;
                side.bytes += (RECORDS_PER_BATCH * RECORD_BYTES) as u64;
                let us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
                let _ = side.latency_us.record(us.max(1));
            }
            Err(e) => {
                side.errors += 1;
                side.first_error.get_or_insert_with(|| e.to_string());
            }
        };
    while Instant::now() < deadline {
        for p in 0..PARTITIONS {
            if in_flight[p].len() >= IN_FLIGHT {
                if let Some((call, at)) = in_flight[p].pop_front() {
                    settle(side, call, at);
                }
            }
            let b = client_batch_of(1_000 + p as i64, seqs[p], RECORDS_PER_BATCH, &value);
            seqs[p] += RECORDS_PER_BATCH as i32;
            in_flight[p].push_back((engine.append(&tps[p], b, Origin::Client), Instant::now()));
        }
    }
    for q in &mut in_flight {
        while let Some((call, at)) = q.pop_front() {
            settle(side, call, at);
        }
    }
    side.secs += started.elapsed().as_secs_f64();
}

fn client(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    c
}

/// A pipelined client of our own on one connection (the broker's `Client`: kafka-protocol's
/// encoding, requests sent before the previous answer is read): an idempotent producer whose
/// every Produce request carries one 16-record batch of each partition, `IN_FLIGHT` requests in
/// flight, so 5 batches per partition as on the API side. It measures the broker with a client
/// that costs little CPU and packs partitions into a request, which librdkafka does not.
pub(crate) struct WireProducer {
    pub(crate) client: Client,
    pub(crate) version: i16,
    pub(crate) producer_id: i64,
    /// Each partition's next sequence number.
    pub(crate) seqs: Vec<i32>,
}

/// A connected idempotent producer (its id from InitProducerId) for `partitions` partitions.
pub(crate) async fn wire_producer(
    bootstrap: &str,
    partitions: usize,
) -> Result<WireProducer, String> {
    let mut client = Client::connect(bootstrap).await.map_err(|e| e.0)?;
    let version = client.version(ApiKey::Produce, 3, 12).map_err(|e| e.0)?;
    let init = client
        .version(ApiKey::InitProducerId, 0, 4)
        .map_err(|e| e.0)?;
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = None;
    r.transaction_timeout_ms = 60_000;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    let ResponseKind::InitProducerId(pid) = client
        .call(ApiKey::InitProducerId, init, RequestKind::InitProducerId(r))
        .await
        .map_err(|e| e.0)?
    else {
        return Err("InitProducerId answered with another API".into());
    };
    if pid.error_code != 0 || pid.producer_epoch != 0 {
        return Err(format!(
            "InitProducerId: error {}, epoch {}",
            pid.error_code, pid.producer_epoch
        ));
    }
    Ok(WireProducer {
        client,
        version,
        producer_id: pid.producer_id.0,
        seqs: vec![0; partitions],
    })
}

/// The wire side for `secs`: requests kept `IN_FLIGHT` deep; latency per request.
async fn wire_side(side: &mut Side, w: &mut WireProducer, secs: f64) -> Result<(), String> {
    let value = vec![0x42u8; RECORD_BYTES];
    let mut sent: VecDeque<Instant> = VecDeque::new();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    // At least one request, however short the slice: a side always has a figure.
    let mut sent_any = false;
    loop {
        while w.client.in_flight() < IN_FLIGHT && (!sent_any || Instant::now() < deadline) {
            sent_any = true;
            let mut t = TopicProduceData::default();
            t.name = TopicName(StrBytes::from_static_str(TOPIC));
            for p in 0..PARTITIONS {
                let b = client_batch_of(w.producer_id, w.seqs[p], RECORDS_PER_BATCH, &value);
                w.seqs[p] += RECORDS_PER_BATCH as i32;
                let mut d = PartitionProduceData::default();
                d.index = p as i32;
                d.records = Some(b.into());
                t.partition_data.push(d);
            }
            let mut r = ProduceRequest::default();
            r.acks = -1;
            r.timeout_ms = 30_000;
            r.topic_data.push(t);
            w.client
                .send(ApiKey::Produce, w.version, RequestKind::Produce(r))
                .await
                .map_err(|e| e.0)?;
            sent.push_back(Instant::now());
        }
        let Some(at) = sent.pop_front() else { break };
        let ResponseKind::Produce(resp) = w.client.recv().await.map_err(|e| e.0)? else {
            return Err("Produce answered with another API".into());
        };
        let us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
        let _ = side.latency_us.record(us.max(1));
        for p in resp.responses.iter().flat_map(|t| &t.partition_responses) {
            if p.error_code == 0 {
                side.ops += RECORDS_PER_BATCH as u64;
                side.bytes += (RECORDS_PER_BATCH * RECORD_BYTES) as u64;
            } else {
                side.errors += 1;
                side.first_error.get_or_insert_with(|| {
                    format!("partition {}: error {}", p.index, p.error_code)
                });
            }
        }
    }
    side.secs += started.elapsed().as_secs_f64();
    Ok(())
}

/// Runs `f` while [`SLOWLORIS`] connections drip bytes of unfinished requests at `bootstrap`.
fn with_slowloris<T>(bootstrap: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    use std::io::Write;
    let mut conns = Vec::with_capacity(SLOWLORIS);
    for _ in 0..SLOWLORIS {
        let mut c = std::net::TcpStream::connect(bootstrap).map_err(|e| e.to_string())?;
        // A 4096-byte frame's size, then its body one byte at a time.
        c.write_all(&4096i32.to_be_bytes())
            .map_err(|e| e.to_string())?;
        conns.push(c);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let dripper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for c in &mut conns {
                    let _ = c.write_all(&[0]);
                }
                std::thread::sleep(SLOWLORIS_DRIP);
            }
        })
    };
    let out = f();
    stop.store(true, Ordering::Relaxed);
    let _ = dripper.join();
    Ok(out)
}

/// A broker on loopback over `dir`, counting metrics or not, with the bench topic made through
/// librdkafka's admin client (CreateTopics).
fn bench_broker(
    dir: &Path,
    config: PartitionConfig,
    metrics: bool,
    rt: &tokio::runtime::Runtime,
) -> Result<Server, String> {
    let mut broker_config = BrokerConfig::default();
    broker_config.data_dir = dir.to_path_buf();
    broker_config.listen = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
    broker_config.admin_listen = broker_config.listen;
    broker_config.cluster_id = "bench".into();
    broker_config.num_partitions = PARTITIONS as i32;
    broker_config.topic_defaults = config;
    broker_config.metrics_enabled = metrics;
    let server = Server::start(broker_config).map_err(|e| e.to_string())?;
    let admin: AdminClient<DefaultClientContext> = client(&server.kafka.to_string())
        .create()
        .map_err(|e| e.to_string())?;
    let created = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(
                TOPIC,
                PARTITIONS as i32,
                TopicReplication::Fixed(1),
            )],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .map_err(|e| format!("CreateTopics: {e}"))?;
    for r in created {
        r.map_err(|(t, e)| format!("CreateTopics {t}: {e}"))?;
    }
    Ok(server)
}

/// The librdkafka side for `secs`, with the end-to-end consumer running beside it.
fn broker_side(
    side: &mut Side,
    bootstrap: &str,
    secs: f64,
    e2e: &mut hdrhistogram::Histogram<u64>,
) -> Result<(), String> {
    let delivery = Arc::new(Delivery {
        measuring: AtomicBool::new(false),
        latency_us: Mutex::new(histogram()),
        acked: 0.into(),
        errors: Errors::default(),
        acks: Arc::new(Mutex::new(HashMap::new())),
    });
    // The consumer: every partition from its end, long-polling.
    let consumer: BaseConsumer = client(bootstrap)
        .set("group.id", "bench-unused")
        .set("enable.auto.commit", "false")
        .set("fetch.wait.max.ms", "500")
        .set("fetch.min.bytes", "1")
        .create()
        .map_err(|e| format!("librdkafka consumer: {e}"))?;
    let mut list = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        list.add_partition_offset(TOPIC, p as i32, KOffset::End)
            .map_err(|e| e.to_string())?;
    }
    consumer.assign(&list).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let (stop, seen) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
                    if m.offset() % E2E_SAMPLE == 0 {
                        let at = Instant::now();
                        seen.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(((m.partition(), m.offset()), at));
                    }
                }
            }
        })
    };
    // Let the consumer's assignment settle before the clock starts.
    std::thread::sleep(Duration::from_millis(300));
    // One producer per partition: librdkafka puts one partition in a Produce request and keeps
    // at most 5 requests in flight per connection with idempotence, so this is what gives the
    // broker side the API side's 5 appends in flight per partition. Each connects and gets its
    // producer id before the clock starts.
    let ready = std::sync::Barrier::new(PARTITIONS + 1);
    let go: Mutex<Option<Instant>> = Mutex::new(None);
    let go_ready = std::sync::Barrier::new(PARTITIONS + 1);
    let (ready, go, go_ready) = (&ready, &go, &go_ready);
    let mut started = Instant::now();
    let produced: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..PARTITIONS)
            .map(|p| {
                let delivery = delivery.clone();
                scope.spawn(move || {
                    produce_partition(bootstrap, p as i32, secs, delivery, ready, go, go_ready)
                })
            })
            .collect();
        ready.wait();
        delivery.measuring.store(true, Ordering::Relaxed);
        started = Instant::now();
        *go.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(started);
        go_ready.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a producer thread panicked".into()))
            })
            .collect()
    });
    for r in produced {
        r?;
    }
    side.secs += started.elapsed().as_secs_f64();
    let acked = delivery.acked.load(Ordering::Relaxed);
    side.ops += acked;
    side.bytes += acked * RECORD_BYTES as u64;
    side.latency_us
        .add(
            &*delivery
                .latency_us
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .map_err(|e| e.to_string())?;
    side.absorb_errors(&delivery.errors);
    // Give the consumer its last long-poll, then match its records with their acks.
    std::thread::sleep(Duration::from_millis(700));
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let acks = delivery
        .acks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (key, at) in seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        if let Some(acked_at) = acks.get(key) {
            let us = u64::try_from(at.saturating_duration_since(*acked_at).as_micros())
                .unwrap_or(u64::MAX);
            let _ = e2e.record(us.max(1));
        }
    }
    Ok(())
}

/// One librdkafka producer writing partition `p` until `deadline`, then flushed.
fn produce_partition(
    bootstrap: &str,
    p: i32,
    secs: f64,
    delivery: Arc<Delivery>,
    ready: &std::sync::Barrier,
    go: &Mutex<Option<Instant>>,
    go_ready: &std::sync::Barrier,
) -> Result<(), String> {
    let value = vec![0x42u8; RECORD_BYTES];
    // Creation and a warm-up record, so that the connection, the producer id and the metadata
    // are there before the clock starts (not counted). The barriers are passed whatever happens.
    let setup = || -> Result<ThreadedProducer<Ctx>, String> {
        let producer: ThreadedProducer<Ctx> = client(bootstrap)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", LINGER_MS.to_string())
            .set(
                "batch.size",
                (RECORDS_PER_BATCH * (RECORD_BYTES + 16)).to_string(),
            )
            .set(
                "max.in.flight.requests.per.connection",
                IN_FLIGHT.to_string(),
            )
            .set("compression.type", "none")
            // The client's queue holds twice what is in flight, so that its latency is the
            // ack's and not a backlog's (the API side queues nothing beyond its 5 in flight).
            .set(
                "queue.buffering.max.messages",
                (2 * IN_FLIGHT * RECORDS_PER_BATCH).to_string(),
            )
            .create_with_context(Ctx(delivery))
            .map_err(|e| format!("librdkafka producer: {e}"))?;
        producer
            .send(
                BaseRecord::<(), [u8], Box<Instant>>::with_opaque_to(
                    TOPIC,
                    Box::new(Instant::now()),
                )
                .payload(&value[..])
                .partition(p),
            )
            .map_err(|(e, _)| format!("warm-up produce: {e}"))?;
        producer
            .flush(Duration::from_secs(30))
            .map_err(|e| format!("warm-up flush: {e}"))?;
        Ok(producer)
    };
    let producer = setup();
    ready.wait();
    go_ready.wait();
    let producer = producer?;
    let started = go
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .unwrap_or_else(Instant::now);
    let deadline = started + Duration::from_secs_f64(secs);
    while Instant::now() < deadline {
        let mut record =
            BaseRecord::<(), [u8], Box<Instant>>::with_opaque_to(TOPIC, Box::new(Instant::now()))
                .payload(&value[..])
                .partition(p);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, r)) => {
                    if Instant::now() > deadline + Duration::from_secs(30) {
                        return Err(format!(
                            "librdkafka's queue stayed full 30 s past the slice: {e}"
                        ));
                    }
                    if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) {
                        // The producer's own thread serves delivery reports, which make room.
                        std::thread::sleep(Duration::from_micros(100));
                        record = r;
                    } else {
                        return Err(format!("produce: {e}"));
                    }
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(60))
        .map_err(|e| format!("flush: {e}"))
}

pub(crate) fn broker(dir: &Path, a: &Args) -> Result<Outcome, String> {
    let slice = a.seconds / 2.0;
    let segment = segment_bytes(a, 64);
    let config = PartitionConfig {
        segment_bytes: segment,
        ..PartitionConfig::default()
    };
    let engine = engine_for(&dir.join("broker-api"), a)?;
    crate::setup::create_partitions(&engine, TOPIC, PARTITIONS, config)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let server = bench_broker(&dir.join("broker-server"), config, true, &rt)?;
    let bootstrap = server.kafka.to_string();
    let quiet = bench_broker(&dir.join("broker-server-no-metrics"), config, false, &rt)?;
    let mut wire = rt.block_on(wire_producer(&bootstrap, PARTITIONS))?;
    let mut wire_quiet = rt.block_on(wire_producer(&quiet.kafka.to_string(), PARTITIONS))?;
    let mut seqs = vec![0i32; PARTITIONS];
    let (mut ours, mut api, mut own, mut loris, mut off) = (
        Side::new("broker (librdkafka)"),
        Side::new("engine API"),
        Side::new(WIRE_SIDE),
        Side::new(SLOWLORIS_SIDE),
        Side::new(METRICS_OFF_SIDE),
    );
    let mut e2e = histogram();
    let mut scrapes = Scrapes::default();
    // The metrics-on side's seconds, in all (what the scrapes' time is a share of).
    let mut on_secs = 0.0;
    // The metrics sides, in short pairs. Per pair: MB/s, and the whole process's CPU time
    // (both brokers, the clients, the scraper) per MB, which is what the metrics cost less
    // bound to the disk's moods than MB/s.
    let mut pairs: Vec<MetricsPair> = Vec::new();
    // The metrics-off side's process CPU seconds and requests, in all.
    let (mut off_cpu, mut off_requests) = (0.0, 0u64);
    let pair_slice = slice / METRICS_PAIRS_PER_ROUND as f64;
    for round in 0..2 {
        progress(&format!("broker: round {} of 2", round + 1));
        for s in order(round, 4) {
            match s {
                0 => broker_side(&mut ours, &bootstrap, slice, &mut e2e)?,
                1 => api_side(&mut api, &engine, &mut seqs, slice),
                2 => {
                    for k in 0..METRICS_PAIRS_PER_ROUND {
                        let mut on_side = |own: &mut Side| {
                            let secs = own.secs;
                            let (done, n) = with_scraper(server.admin, || {
                                rt.block_on(wire_side(own, &mut wire, pair_slice))
                            });
                            on_secs += own.secs - secs;
                            scrapes.answered += n.answered;
                            scrapes.secs += n.secs;
                            done
                        };
                        let mut off_side = |off: &mut Side| {
                            let (cpu, ops) = (process_cpu_seconds(), off.ops);
                            let r = rt.block_on(wire_side(off, &mut wire_quiet, pair_slice));
                            off_cpu += process_cpu_seconds() - cpu;
                            off_requests +=
                                (off.ops - ops) / (PARTITIONS * RECORDS_PER_BATCH) as u64;
                            r
                        };
                        let (on, off_m) = if (round + k) % 2 == 0 {
                            let on = measured(&mut own, &mut on_side)?;
                            (on, measured(&mut off, &mut off_side)?)
                        } else {
                            let off_m = measured(&mut off, &mut off_side)?;
                            (measured(&mut own, &mut on_side)?, off_m)
                        };
                        pairs.push(MetricsPair {
                            on_mb_per_sec: on.0,
                            on_cpu_per_mb: on.1,
                            off_mb_per_sec: off_m.0,
                            off_cpu_per_mb: off_m.1,
                        });
                    }
                }
                _ => with_slowloris(&bootstrap, || {
                    rt.block_on(wire_side(&mut loris, &mut wire, slice))
                })??,
            }
        }
    }
    let mb_ratios: Vec<f64> = pairs
        .iter()
        .map(|p| p.on_mb_per_sec / p.off_mb_per_sec.max(1e-9))
        .collect();
    let cpu_ratios: Vec<f64> = pairs
        .iter()
        .map(|p| p.on_cpu_per_mb / p.off_cpu_per_mb.max(1e-18))
        .collect();
    let counting_ns = metrics_ns_per_request(
        TOPIC,
        (PARTITIONS * RECORDS_PER_BATCH * RECORD_BYTES) as u64,
    );
    let cpu_ns_per_request = off_cpu * 1e9 / (off_requests as f64).max(1.0);
    let listed = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    drop((wire, wire_quiet));
    server.shutdown().map_err(|e| e.to_string())?;
    quiet.shutdown().map_err(|e| e.to_string())?;
    engine.close().map_err(|e| e.to_string())?;
    let q = |h: &hdrhistogram::Histogram<u64>, q: f64| h.value_at_quantile(q) as f64;
    Ok(Outcome {
        workload: "broker",
        unit: "MB/s",
        notes: vec![
            format!(
                "metrics pairs (on then off, order swapped each pair, {pair_slice:.2} s a side): MB/s ratios {}; CPU per MB ratios {}",
                listed(&mb_ratios),
                listed(&cpu_ratios),
            ),
            format!(
            "{PARTITIONS} partitions, {RECORD_BYTES}-byte records in {}-KiB batches, idempotent, durable acks, {IN_FLIGHT} in flight; librdkafka latency per record (batching included), the API's per batch, our client's per request (a batch of every partition); end-to-end: ack -> long-polling consumer, every {E2E_SAMPLE}th record; goal >= 0.8x the engine API's MB/s; with {SLOWLORIS} slowloris connections (a byte of an unfinished request every {} ms each) our client's p99 within 1.2x of its p99 without; metrics: our client against a broker with metrics.enabled=false, the counting one scraped every {} s, goal >= 0.98x",
            (RECORDS_PER_BATCH * RECORD_BYTES) >> 10,
            SLOWLORIS_DRIP.as_millis(),
            SCRAPE_EVERY.as_secs(),
        )],
        figures: vec![
            Figure::new(
                "broker with our pipelined client: MB/s ratio to the engine API",
                own.mb_per_sec() / api.mb_per_sec().max(1e-9),
                "x",
            ),
            Figure::new(
                "our client's p99 with 50 slowloris connections: ratio to without",
                q(&loris.latency_us, 0.99) / q(&own.latency_us, 0.99).max(1.0),
                "x",
            ),
            Figure::new(
                "metrics counted and scraped: our client's MB/s ratio to metrics off (median of pairs)",
                median(mb_ratios),
                "x",
            ),
            Figure::new(
                "metrics counted and scraped: our client's p99 ratio to metrics off",
                q(&own.latency_us, 0.99) / q(&off.latency_us, 0.99).max(1.0),
                "x",
            ),
            Figure::new(
                "metrics counted and scraped: process CPU per MB, ratio to metrics off (median of pairs)",
                median(cpu_ratios),
                "x",
            ),
            Figure::new("scrapes of GET /metrics answered", scrapes.answered as f64, "scrapes"),
            Figure::new(
                "scrapes' time (request to whole answer) as a share of the metrics side's time",
                100.0 * scrapes.secs / on_secs.max(1e-9),
                "%",
            ),
            Figure::new(
                "metrics counting per request, done alone",
                counting_ns,
                "ns",
            ),
            Figure::new(
                "metrics counting per request: share of the process's CPU per request (metrics off)",
                100.0 * counting_ns / cpu_ns_per_request.max(1e-9),
                "%",
            ),
            Figure::new("end-to-end p50 (ack -> consumer)", q(&e2e, 0.5), "us"),
            Figure::new("end-to-end p99 (ack -> consumer)", q(&e2e, 0.99), "us"),
            Figure::new("end-to-end samples", e2e.len() as f64, "records"),
        ],
        sides: vec![ours, api, own, loris, off],
        steps: Vec::new(),
    })
}
