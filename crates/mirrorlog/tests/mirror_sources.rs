//! Mirroring real sources (design.md §Mirroring): a source whose log start is 10,000 (after
//! DeleteRecords, inside a batch, and after time retention) into an empty destination; a
//! source with gaps (batches removed as compaction would); a source deleting records under a
//! running link; a chain of four with retention at the head and a failover in the middle;
//! failback after the source's retention moved; fetches larger than the destination takes in
//! one append. Every destination is checked byte for byte
//! against its source from the source's log start, its log start equal, the producer states
//! against the barrier rule, and every data directory passes `mirrorlog verify` at the end.

mod common;

use mirrorlog::api::{ManualClock, Origin};
use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, MirrorStart, Mode, PartitionConfig, TopicPartition,
};
use mirrorlog::format::{BatchIter, BatchKind, Offset};
use mirrorlog::mirror::{LinkConfig, MirrorLink};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Cluster {
    engine: Arc<Engine>,
    _dir: common::VerifiedDir,
}

fn cluster_with(clock: Option<Arc<ManualClock>>) -> Cluster {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut config = EngineConfig::new(dir.path()).shards(1).pin_threads(false);
    if let Some(clock) = clock {
        config = config.clock(clock).retention_check_interval_ms(20);
    }
    Cluster {
        engine: Arc::new(Engine::open(config).unwrap()),
        _dir: common::VerifiedDir(dir),
    }
}

fn cluster() -> Cluster {
    cluster_with(None)
}

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 64 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 1 << 20,
        ..PartitionConfig::default()
    }
}

fn start(engine: &Engine, tp: &TopicPartition, source: &str, at: MirrorStart) -> Offset {
    common::start_mirroring(engine, tp, source, at)
}

fn stop(engine: &Engine, tp: &TopicPartition, epoch: i32) -> Offset {
    common::stop_mirroring(engine, tp, epoch).barrier_offset
}

fn state(engine: &Engine, tp: &TopicPartition) -> mirrorlog::engine::PartitionState {
    engine.state(tp).wait().unwrap()
}

/// `batches` client batches of `records` records from `producer`, its sequence in `seq`.
fn produce(engine: &Engine, tp: &TopicPartition, producer: i64, seq: &mut i32, batches: usize) {
    const RECORDS: i32 = 50;
    for _ in 0..batches {
        let b = common::producer_batch(producer, *seq, RECORDS, false, 20);
        engine.append(tp, b, Origin::Client).wait().unwrap();
        *seq += RECORDS;
    }
}

fn link(from: &Cluster, to: &Cluster, tp: &TopicPartition) -> MirrorLink {
    MirrorLink::new(
        from.engine.clone(),
        tp.clone(),
        to.engine.clone(),
        tp.clone(),
    )
    .with_config(LinkConfig {
        fetch_bytes: 16 << 10,
        max_wait: Duration::from_millis(50),
        appends_in_flight: 3,
        ..LinkConfig::default()
    })
}

/// The destination holds the source's batches byte for byte from the source's log start, and
/// starts where it starts.
fn assert_mirrors(source: &Engine, destination: &Engine, tp: &TopicPartition) {
    let s = state(source, tp);
    let d = state(destination, tp);
    assert_eq!(d.log_start, s.log_start, "log starts");
    assert_eq!(d.log_end, s.log_end, "log ends");
    let from = s.log_start;
    assert_eq!(
        common::engine_bytes(destination, tp, from, d.log_end),
        common::engine_bytes(source, tp, from, s.log_end),
        "byte for byte from {from}"
    );
}

#[test]
fn a_source_whose_log_start_is_10000_after_delete_records_into_an_empty_destination() {
    for cut_inside_a_batch in [false, true] {
        let (a, b) = (cluster(), cluster());
        let tp = TopicPartition::new("deleted", 0);
        a.engine.create_partition(&tp, config()).wait().unwrap();
        b.engine.create_partition(&tp, config()).wait().unwrap();
        let mut seq = 0;
        produce(&a.engine, &tp, 1, &mut seq, 260);
        // 10,000 is a batch boundary (batches of 50); 10,020 lies inside one.
        let log_start = Offset(if cut_inside_a_batch { 10_020 } else { 10_000 });
        a.engine.delete_records(&tp, log_start).wait().unwrap();
        assert_eq!(state(&a.engine, &tp).log_start, log_start);
        start(&b.engine, &tp, "A/deleted-0", MirrorStart::LastStableOffset);
        let l = link(&a, &b, &tp);
        l.catch_up().unwrap();
        assert_mirrors(&a.engine, &b.engine, &tp);
        let stats = l.stats();
        assert_eq!(stats.realigns, 1, "{stats:?}");
        assert_eq!(stats.lag_offsets, 0);
        assert_eq!(stats.lag_bytes, 0);
        // The destination's first batch is the source's holding its log start.
        let first = common::engine_bytes(&b.engine, &tp, log_start, Offset(log_start.0 + 1));
        let base = BatchIter::new(&first, 0)
            .next()
            .unwrap()
            .header()
            .base_offset;
        assert_eq!(base, Offset(10_000));
        // The producer state is the source's (copied, no barrier).
        assert_eq!(common::producer_ids(&b.engine, &tp), vec![1]);
        // More source traffic flows on.
        produce(&a.engine, &tp, 1, &mut seq, 5);
        l.catch_up().unwrap();
        assert_mirrors(&a.engine, &b.engine, &tp);
        // A restart of the destination keeps its log start.
        drop(l);
        let b_dir = b._dir.0.path().to_path_buf();
        let Cluster { engine, _dir } = b;
        Arc::into_inner(engine).unwrap().close().unwrap();
        let reopened =
            Engine::open(EngineConfig::new(&b_dir).shards(1).pin_threads(false)).unwrap();
        assert_eq!(state(&reopened, &tp).log_start, log_start);
        reopened.close().unwrap();
        drop(_dir);
    }
}

#[test]
fn a_source_whose_retention_moved_its_log_start_past_10000() {
    let clock = common::records_clock();
    let a = cluster_with(Some(clock.clone()));
    let b = cluster();
    let tp = TopicPartition::new("aged", 0);
    let retained = PartitionConfig {
        retention_ms: Some(60_000),
        ..config()
    };
    a.engine.create_partition(&tp, retained).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    let mut seq = 0;
    produce(&a.engine, &tp, 1, &mut seq, 220);
    // Records are an hour old at the clock; new ones a moment later are not.
    clock.advance(3_600_000);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while state(&a.engine, &tp).log_start < Offset(10_000) {
        assert!(std::time::Instant::now() < deadline, "retention ran");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut fresh = common::producer_batch(2, 0, 50, false, 20);
    fresh[27..35].copy_from_slice(&(common::RECORDS_MS + 3_600_000).to_be_bytes());
    fresh[35..43].copy_from_slice(&(common::RECORDS_MS + 3_600_000).to_be_bytes());
    common::fix_crc(&mut fresh);
    a.engine.append(&tp, fresh, Origin::Client).wait().unwrap();
    start(&b.engine, &tp, "A/aged-0", MirrorStart::LastStableOffset);
    let l = link(&a, &b, &tp);
    l.catch_up().unwrap();
    assert_mirrors(&a.engine, &b.engine, &tp);
    assert_eq!(l.stats().realigns, 1);
    assert!(state(&b.engine, &tp).log_start >= Offset(10_000));
}

/// A source whose batches have gaps (a compacted topic): the destination's appends start past
/// its end, reads into the gaps return the next batch, and the copy is the source's.
#[test]
fn a_source_with_gaps_as_compaction_leaves_them() {
    let (origin, a, b) = (cluster(), cluster(), cluster());
    let tp = TopicPartition::new("compacted", 0);
    for c in [&origin, &a, &b] {
        c.engine.create_partition(&tp, config()).wait().unwrap();
    }
    // A holds what compaction left of a log: batches with offsets missing between them. It is
    // itself a mirror (the only way to store batches at chosen offsets), of nothing live.
    start(&a.engine, &tp, "origin", MirrorStart::LastStableOffset);
    let mut at = 0i64;
    for i in 0..120 {
        let b = common::stored(
            common::producer_batch(i % 4, 0, 3, false, 400),
            Offset(at),
            2,
        );
        a.engine.append(&tp, b, Origin::Mirror).wait().unwrap();
        at += 3 + [0, 5, 0, 40, 1][(i % 5) as usize];
    }
    start(
        &b.engine,
        &tp,
        "A/compacted-0",
        MirrorStart::LastStableOffset,
    );
    let l = link(&a, &b, &tp);
    l.catch_up().unwrap();
    assert_mirrors(&a.engine, &b.engine, &tp);
    assert_eq!(l.stats().realigns, 0);
    assert_eq!(
        common::producer_ids(&b.engine, &tp),
        common::producer_ids(&a.engine, &tp)
    );
    drop(origin);
}

/// The source deletes records under a running link, past what the destination has, while its
/// producer keeps writing: the link realigns by itself and the copy stays exact.
#[test]
fn a_source_deleting_records_under_a_running_link() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("moving", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    start(&b.engine, &tp, "A/moving-0", MirrorStart::LastStableOffset);
    let mut seq = 0;
    produce(&a.engine, &tp, 1, &mut seq, 20);
    let l = link(&a, &b, &tp);
    l.catch_up().unwrap();
    // The link runs; the destination is paused a while so the source's deletion passes it.
    let stop_flag = Arc::new(AtomicBool::new(false));
    let runner = l.clone().spawn(stop_flag.clone());
    b.engine.pause_mirroring(&tp).wait().unwrap();
    produce(&a.engine, &tp, 1, &mut seq, 40);
    let hw = state(&a.engine, &tp).high_watermark;
    a.engine
        .delete_records(&tp, Offset(hw.0 - 75))
        .wait()
        .unwrap();
    b.engine.resume_mirroring(&tp).wait().unwrap();
    produce(&a.engine, &tp, 1, &mut seq, 10);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while state(&b.engine, &tp).log_end < state(&a.engine, &tp).log_end {
        assert!(
            std::time::Instant::now() < deadline,
            "caught up: {:?}",
            l.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    stop_flag.store(true, Ordering::Relaxed);
    runner.join().unwrap().unwrap();
    let stats = l.stats();
    assert!(stats.realigns >= 1, "{stats:?}");
    assert!(
        stats.errors >= 1,
        "the paused destination refused appends: {stats:?}"
    );
    assert_mirrors(&a.engine, &b.engine, &tp);
}

/// A→B→C→D with retention at the head: every hop aligns at the head's log start and holds
/// its bytes; B fails over in the middle: its barrier clears only its producer state, C and D
/// store it as-is; then B's own producer's batches flow down the chain.
#[test]
fn a_chain_of_four_with_retention_at_the_head() {
    let nodes: Vec<Cluster> = (0..4).map(|_| cluster()).collect();
    let tp = TopicPartition::new("chain", 0);
    for n in &nodes {
        n.engine.create_partition(&tp, config()).wait().unwrap();
    }
    let mut seq = 0;
    produce(&nodes[0].engine, &tp, 1, &mut seq, 240);
    nodes[0]
        .engine
        .delete_records(&tp, Offset(10_000))
        .wait()
        .unwrap();
    for (i, n) in nodes.iter().enumerate().skip(1) {
        start(
            &n.engine,
            &tp,
            &format!("node{}", i - 1),
            MirrorStart::LastStableOffset,
        );
    }
    let links: Vec<MirrorLink> = (1..4)
        .map(|i| link(&nodes[i - 1], &nodes[i], &tp))
        .collect();
    for l in &links {
        l.catch_up().unwrap();
    }
    for i in 1..4 {
        assert_mirrors(&nodes[0].engine, &nodes[i].engine, &tp);
        assert_eq!(links[i - 1].stats().realigns, 1);
    }
    // B fails over; its barrier goes down the chain as stored bytes.
    let barrier = stop(&nodes[1].engine, &tp, 9);
    assert_eq!(state(&nodes[1].engine, &tp).producer_count, 0);
    produce(&nodes[1].engine, &tp, 1, &mut 0, 3);
    for l in &links[1..] {
        l.catch_up().unwrap();
    }
    for i in 2..4 {
        assert_mirrors(&nodes[1].engine, &nodes[i].engine, &tp);
        let kind = common::engine_bytes(&nodes[i].engine, &tp, barrier, Offset(barrier.0 + 1));
        assert!(matches!(
            BatchIter::new(&kind, 0).next().map(|b| b.kind()),
            Some(BatchKind::Barrier)
        ));
        // Mirrored barriers clear nothing: C and D keep the producers (A's and B's new one).
        assert_eq!(common::producer_ids(&nodes[i].engine, &tp), vec![1]);
        assert!(matches!(
            state(&nodes[i].engine, &tp).mode,
            Mode::Mirroring { .. }
        ));
    }
}

/// A→B, failover to B, B's producer writes and B's retention (DeleteRecords) moves past A's
/// end; failback B→A realigns A at B's log start, and A's later stop clears A's producer state.
#[test]
fn failback_after_the_sources_retention_moved() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("back", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    let mut seq = 0;
    produce(&a.engine, &tp, 1, &mut seq, 30);
    start(&b.engine, &tp, "A/back-0", MirrorStart::LastStableOffset);
    link(&a, &b, &tp).catch_up().unwrap();
    let a_end = state(&a.engine, &tp).log_end;
    stop(&b.engine, &tp, 5);
    produce(&b.engine, &tp, 7, &mut 0, 240);
    let b_end = state(&b.engine, &tp).high_watermark;
    b.engine
        .delete_records(&tp, Offset(b_end.0 - 500))
        .wait()
        .unwrap();
    assert!(state(&b.engine, &tp).log_start > a_end);
    // Failback: A mirrors B from B's last mirrored offset (A's end)... which B deleted.
    start(&a.engine, &tp, "B/back-0", MirrorStart::Offset(a_end));
    let back = link(&b, &a, &tp);
    back.catch_up().unwrap();
    assert_eq!(back.stats().realigns, 1);
    assert_mirrors(&b.engine, &a.engine, &tp);
    // A mirrors B's producer 7; B's barrier was deleted with its range. A's stop clears it.
    assert_eq!(common::producer_ids(&a.engine, &tp), vec![7]);
    stop(&a.engine, &tp, 11);
    assert_eq!(state(&a.engine, &tp).producer_count, 0);
    // A local producer on A starts clean, reusing id 7 from sequence 0.
    let o = a
        .engine
        .append(
            &tp,
            common::producer_batch(7, 0, 1, false, 10),
            Origin::Client,
        )
        .wait()
        .unwrap();
    assert!(!o.duplicate);
}

/// An append sent to follow others finds the log where they would have left it, or is
/// refused whole: a pipelined writer whose earlier append was refused never stores the later
/// one past a hole.
#[test]
fn an_append_meant_to_follow_a_refused_one_is_refused_and_leaves_no_hole() {
    let b = cluster();
    let tp = TopicPartition::new("follows", 0);
    b.engine.create_partition(&tp, config()).wait().unwrap();
    start(&b.engine, &tp, "A/follows-0", MirrorStart::LastStableOffset);
    let batch = |seq: i32, base: i64| {
        common::stored(
            common::producer_batch(1, seq, 10, false, 20),
            Offset(base),
            0,
        )
    };
    let first = b
        .engine
        .append_following(&tp, batch(0, 0), Origin::Mirror, Offset(0))
        .wait()
        .unwrap();
    assert_eq!(first.last_offset, Offset(9));
    // Offsets 10..20 were sent before this one and refused: it must not land at 20.
    let e = b
        .engine
        .append_following(&tp, batch(20, 20), Origin::Mirror, Offset(20))
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::AppendOutOfOrder {
                follows: Offset(20),
                log_end: Offset(10),
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        state(&b.engine, &tp).log_end,
        Offset(10),
        "nothing appended"
    );
    // Once the missing records land, what follows them does.
    b.engine
        .append_following(&tp, batch(10, 10), Origin::Mirror, Offset(10))
        .wait()
        .unwrap();
    b.engine
        .append_following(&tp, batch(20, 20), Origin::Mirror, Offset(20))
        .wait()
        .unwrap();
    assert_eq!(state(&b.engine, &tp).log_end, Offset(30));
}

/// A link whose fetches (512 KiB, from the source's 1 MiB segments) are larger than the
/// destination takes in one append (its segment, 64 KiB): the first append is refused as too large, and from then on the fetched bytes
/// go in pieces of whole batches; the link catches up instead of refetching the same bytes
/// forever.
#[test]
fn fetches_larger_than_the_destinations_appends_go_in_pieces() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("wide-fetch", 0);
    let source = PartitionConfig {
        segment_bytes: 1 << 20,
        ..config()
    };
    a.engine.create_partition(&tp, source).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    let mut seq = 0;
    produce(&a.engine, &tp, 1, &mut seq, 400);
    start(
        &b.engine,
        &tp,
        "A/wide-fetch-0",
        MirrorStart::LastStableOffset,
    );
    let l = link(&a, &b, &tp).with_config(LinkConfig {
        fetch_bytes: 512 << 10,
        max_wait: Duration::from_millis(50),
        appends_in_flight: 3,
        backoff_min: Duration::from_millis(1),
        ..LinkConfig::default()
    });
    let (done, finished) = std::sync::mpsc::channel();
    let catching_up = l.clone();
    std::thread::spawn(move || {
        let _ = done.send(catching_up.catch_up());
    });
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the link caught up")
        .unwrap();
    assert_mirrors(&a.engine, &b.engine, &tp);
    let stats = l.stats();
    assert_eq!(stats.errors, 1, "refused once: {:?}", stats.last_error);
}

/// As-is means as-is (design.md §Mirroring): a source whose `max.message.bytes` is larger than the
/// destination's (a 3 MiB batch under 4 MiB there, 64 KiB here) is mirrored whole, while a
/// client append of the same batch here is refused by the local limit. The one bound on a
/// mirrored batch is physical — the append buffer and the segment it must fit in whole — and a
/// batch past it is refused with a typed error, changing nothing.
#[test]
fn a_mirrored_batch_over_the_local_max_message_bytes_is_stored_as_is() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("large", 0);
    let large = PartitionConfig {
        max_message_bytes: 4 << 20,
        segment_bytes: 8 << 20,
        append_buffer_bytes: 4 << 20,
        ..config()
    };
    a.engine.create_partition(&tp, large).wait().unwrap();
    b.engine
        .create_partition(
            &tp,
            PartitionConfig {
                max_message_bytes: 64 << 10,
                ..large
            },
        )
        .wait()
        .unwrap();
    let batch = common::producer_batch(7, 0, 3, false, 1 << 20);
    assert!(batch.len() > 3 << 20);
    a.engine
        .append(&tp, batch.clone(), Origin::Client)
        .wait()
        .unwrap();
    start(&b.engine, &tp, "A/large-0", MirrorStart::LastStableOffset);
    let l = link(&a, &b, &tp);
    l.catch_up().unwrap();
    assert_mirrors(&a.engine, &b.engine, &tp);
    // The same bytes from a local client are refused by the local limit.
    let local = TopicPartition::new("large", 1);
    b.engine
        .create_partition(
            &local,
            PartitionConfig {
                max_message_bytes: 64 << 10,
                ..large
            },
        )
        .wait()
        .unwrap();
    assert!(matches!(
        b.engine
            .append(&local, batch.clone(), Origin::Client)
            .wait(),
        Err(mirrorlog::engine::EngineError::MessageTooLarge { .. })
    ));
    // A mirroring partition whose append buffer cannot hold the batch refuses it, typed, and
    // stays as it was.
    let small = TopicPartition::new("large", 2);
    b.engine.create_partition(&small, config()).wait().unwrap();
    start(
        &b.engine,
        &small,
        "A/large-0",
        MirrorStart::LastStableOffset,
    );
    let stored = common::stored(batch, Offset(0), 0);
    assert!(matches!(
        b.engine.append(&small, stored, Origin::Mirror).wait(),
        Err(mirrorlog::engine::EngineError::MessageTooLarge { limit, .. }) if limit == 64 << 10
    ));
    assert_eq!(state(&b.engine, &small).log_end, Offset(0));
}

/// A link reports its lag in time as a broker's mirror does: a destination paused under a
/// running link while its source takes records falls behind by the time since the source's
/// first answer that showed them (here at least 300 ms after 400 ms paused: the link's fetch
/// saw them, its append was refused); once resumed and caught up, the lag reads 0.
#[test]
fn the_links_lag_in_time_is_the_age_of_what_it_has_not_made_durable() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("lagging", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    start(&b.engine, &tp, "A/lagging-0", MirrorStart::LastStableOffset);
    let mut seq = 0;
    produce(&a.engine, &tp, 1, &mut seq, 5);
    let l = link(&a, &b, &tp);
    assert_eq!(l.stats().lag_ms, None, "no answer yet");
    l.catch_up().unwrap();
    assert_eq!(l.stats().lag_ms, Some(0), "caught up");
    let stop_flag = Arc::new(AtomicBool::new(false));
    let fetched = l.stats().fetches;
    let runner = l.clone().spawn(stop_flag.clone());
    // The runner is fetching (its long-polls answer every 50 ms) before the pause, so that it
    // sees the records the source takes next and fails to make them durable here.
    let deadline = Instant::now() + Duration::from_secs(30);
    while l.stats().fetches < fetched + 2 {
        assert!(Instant::now() < deadline, "fetching: {:?}", l.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    b.engine.pause_mirroring(&tp).wait().unwrap();
    produce(&a.engine, &tp, 1, &mut seq, 5);
    std::thread::sleep(Duration::from_millis(400));
    let behind = l.stats();
    let lag = behind.lag_ms.expect("answered");
    assert!((300..5_000).contains(&lag), "{behind:?}");
    b.engine.resume_mirroring(&tp).wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while l.stats().lag_ms != Some(0)
        || state(&b.engine, &tp).log_end < state(&a.engine, &tp).log_end
    {
        assert!(Instant::now() < deadline, "caught up: {:?}", l.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    stop_flag.store(true, Ordering::Relaxed);
    runner.join().unwrap().unwrap();
    assert_mirrors(&a.engine, &b.engine, &tp);
}
