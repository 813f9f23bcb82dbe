//! Cluster mirroring end to end through the public API, engines in one process standing in for
//! clusters and `MirrorLink`s pumping between them (design.md §Mirroring): active-passive with an open
//! transaction at failover, failback three times in alternating directions, fan-out, fan-in
//! and a chain with failovers in the middle and at the end. Every destination's log is checked
//! byte for byte against its source, and every producer state against the barrier rule. When
//! a test ends, each cluster's data directory passes `mirrorlog verify`'s checks.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, MirrorStart, Mode, PartitionConfig, TopicPartition};
use mirrorlog::format::{BatchIter, BatchKind, Offset};
use mirrorlog::mirror::MirrorLink;
use std::sync::Arc;

struct Cluster {
    engine: Arc<Engine>,
    // Dropped after the engine (fields drop in order), so it checks closed files.
    _dir: common::VerifiedDir,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
    Cluster {
        engine: Arc::new(engine),
        _dir: common::VerifiedDir(dir),
    }
}

fn config() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 128 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 1 << 20,
        ..PartitionConfig::default()
    }
}

/// Local client traffic on `tp`: idempotent producer `pid`, a committed transaction from
/// `pid + 1`, and (if `leave_open`) a transaction from `pid + 2` left open.
fn produce(engine: &Engine, tp: &TopicPartition, pid: i64, seq: &mut [i32; 3], leave_open: bool) {
    for i in 0..6 {
        let b = common::producer_batch(pid, seq[0], 2, false, 60 + i);
        engine.append(tp, b, Origin::Client).wait().unwrap();
        seq[0] += 2;
    }
    for _ in 0..2 {
        let b = common::producer_batch(pid + 1, seq[1], 1, true, 40);
        engine.append(tp, b, Origin::Client).wait().unwrap();
        seq[1] += 1;
    }
    engine
        .append(tp, common::marker(pid + 1, true), Origin::Coordinator)
        .wait()
        .unwrap();
    if leave_open {
        let b = common::producer_batch(pid + 2, seq[2], 1, true, 40);
        engine.append(tp, b, Origin::Client).wait().unwrap();
        seq[2] += 1;
    }
}

fn start(engine: &Engine, tp: &TopicPartition, source: &str, at: MirrorStart) -> Offset {
    common::start_mirroring(engine, tp, source, at)
}

fn stop(engine: &Engine, tp: &TopicPartition, epoch: i32) -> mirrorlog::engine::StopOutcome {
    common::stop_mirroring(engine, tp, epoch)
}

fn end(engine: &Engine, tp: &TopicPartition) -> Offset {
    engine.state(tp).wait().unwrap().log_end
}

#[test]
fn active_passive_failover_with_an_open_transaction() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("orders", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    start(&b.engine, &tp, "A/orders-0", MirrorStart::Offset(Offset(0)));
    let link = MirrorLink::new(a.engine.clone(), tp.clone(), b.engine.clone(), tp.clone());
    let mut seq = [0; 3];
    produce(&a.engine, &tp, 1, &mut seq, true);
    link.catch_up().unwrap();
    // B is read-only to clients while mirroring.
    assert!(b
        .engine
        .append(
            &tp,
            common::producer_batch(50, 0, 1, false, 10),
            Origin::Client
        )
        .wait()
        .is_err());
    let a_end = end(&a.engine, &tp);
    assert_eq!(
        common::engine_bytes(&b.engine, &tp, Offset(0), a_end),
        common::engine_bytes(&a.engine, &tp, Offset(0), a_end),
        "B stores A's batches as-is"
    );
    assert_eq!(common::producer_ids(&b.engine, &tp), vec![1, 2, 3]);

    let out = stop(&b.engine, &tp, 7);
    assert_eq!(out.last_mirrored_offset, a_end);
    assert_eq!(
        out.aborted_producers,
        vec![3],
        "the open transaction is aborted"
    );
    // After the mirrored range: the ABORT marker, then the barrier.
    let tail = common::engine_bytes(&b.engine, &tp, a_end, end(&b.engine, &tp));
    let kinds: Vec<BatchKind> = BatchIter::new(&tail, 0).map(|v| v.kind()).collect();
    assert_eq!(kinds.len(), 2);
    assert_eq!(
        BatchIter::new(&tail, 0)
            .last()
            .unwrap()
            .header()
            .base_offset,
        out.barrier_offset
    );
    assert!(matches!(kinds[1], BatchKind::Barrier));
    let state = b.engine.state(&tp).wait().unwrap();
    assert_eq!(state.mode, Mode::Local);
    assert_eq!(
        state.producer_count, 0,
        "the barrier wiped the producer state"
    );
    assert_eq!(state.last_stable_offset, state.log_end);
    // A new local producer reusing A's producer id 1 from sequence 0 is accepted.
    let o = b
        .engine
        .append(
            &tp,
            common::producer_batch(1, 0, 1, false, 10),
            Origin::Client,
        )
        .wait()
        .unwrap();
    assert_eq!(o.first_offset, state.log_end);
    assert!(!o.duplicate);
}

#[test]
fn failback_three_times_in_alternating_directions() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("pay", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    let mut seq = [0; 3];
    produce(&a.engine, &tp, 1, &mut seq, false);
    // (active, passive): the active produces, the passive mirrors it.
    let mut active = &a.engine;
    let mut passive = &b.engine;
    start(passive, &tp, "A", MirrorStart::Offset(Offset(0)));
    let mut epoch = 1;
    for round in 0..4 {
        let link = MirrorLink::new(active.clone(), tp.clone(), passive.clone(), tp.clone());
        link.catch_up().unwrap();
        // The active writes more that never reaches the passive (lost in the failover).
        let unmirrored_from = end(active, &tp);
        produce(active, &tp, 900 + round as i64 * 10, &mut [0; 3], false);
        assert!(end(active, &tp) > unmirrored_from);
        // Failover to the passive: it stops, writes its barrier, takes local writes.
        epoch += 1;
        let out = stop(passive, &tp, epoch);
        assert_eq!(passive.state(&tp).wait().unwrap().producer_count, 0);
        let pid = 100 + round as i64 * 10;
        let mut local = [0; 3];
        produce(passive, &tp, pid, &mut local, false);
        // The old active fails back: it truncates to what the passive had mirrored and
        // mirrors the passive's records as-is, its PSM not cleared by the passive's barrier.
        assert_eq!(out.last_mirrored_offset, unmirrored_from);
        start(
            active,
            &tp,
            "peer",
            MirrorStart::Offset(out.last_mirrored_offset),
        );
        assert_eq!(
            end(active, &tp),
            unmirrored_from,
            "truncated to the passive's copy"
        );
        let back = MirrorLink::new(passive.clone(), tp.clone(), active.clone(), tp.clone());
        back.catch_up().unwrap();
        let e = end(passive, &tp);
        assert_eq!(end(active, &tp), e);
        assert_eq!(
            common::engine_bytes(active, &tp, Offset(0), e),
            common::engine_bytes(passive, &tp, Offset(0), e),
            "round {round}: byte-identical logs"
        );
        let held = common::producer_ids(active, &tp);
        assert!(
            held.contains(&pid) && held.contains(&(pid + 1)),
            "round {round}: the mirrored barrier did not clear the mirroring side: {held:?}"
        );
        std::mem::swap(&mut active, &mut passive);
        // Now `active` is the side that took local writes, `passive` mirrors it. Before the
        // next round the passive is Mirroring already.
        assert!(matches!(
            passive.state(&tp).wait().unwrap().mode,
            Mode::Mirroring { .. }
        ));
    }
    // Finally the mirroring side stops: its own barrier clears its producer state.
    epoch += 1;
    stop(passive, &tp, epoch);
    assert_eq!(passive.state(&tp).wait().unwrap().producer_count, 0);
}

#[test]
fn fan_out_and_fan_in() {
    let (a, b, c) = (cluster(), cluster(), cluster());
    let x = TopicPartition::new("x", 0);
    let y = TopicPartition::new("y", 0);
    // Fan-out: A.x → B.x and A.x → C.x; fan-in: A.x → C.x and B.y → C.y.
    a.engine.create_partition(&x, config()).wait().unwrap();
    b.engine.create_partition(&x, config()).wait().unwrap();
    b.engine.create_partition(&y, config()).wait().unwrap();
    c.engine.create_partition(&x, config()).wait().unwrap();
    c.engine.create_partition(&y, config()).wait().unwrap();
    start(&b.engine, &x, "A/x", MirrorStart::Offset(Offset(0)));
    start(&c.engine, &x, "A/x", MirrorStart::Offset(Offset(0)));
    start(&c.engine, &y, "B/y", MirrorStart::Offset(Offset(0)));
    let (mut sa, mut sb) = ([0; 3], [0; 3]);
    produce(&a.engine, &x, 1, &mut sa, true);
    produce(&b.engine, &y, 20, &mut sb, false);
    let ab = MirrorLink::new(a.engine.clone(), x.clone(), b.engine.clone(), x.clone());
    let ac = MirrorLink::new(a.engine.clone(), x.clone(), c.engine.clone(), x.clone());
    let bc = MirrorLink::new(b.engine.clone(), y.clone(), c.engine.clone(), y.clone());
    for l in [&ab, &ac, &bc] {
        l.catch_up().unwrap();
    }
    // Stop B.x only: C.x and C.y keep mirroring, their producer states intact.
    stop(&b.engine, &x, 3);
    assert_eq!(common::producer_ids(&b.engine, &x), Vec::<i64>::new());
    produce(&a.engine, &x, 1, &mut sa, false);
    ac.catch_up().unwrap();
    let e = end(&a.engine, &x);
    assert_eq!(
        common::engine_bytes(&c.engine, &x, Offset(0), e),
        common::engine_bytes(&a.engine, &x, Offset(0), e)
    );
    assert_eq!(common::producer_ids(&c.engine, &x), vec![1, 2, 3]);
    // Fan-in: stopping C.x writes a barrier in C.x only.
    stop(&c.engine, &x, 3);
    assert_eq!(common::producer_ids(&c.engine, &x), Vec::<i64>::new());
    assert_eq!(common::producer_ids(&c.engine, &y), vec![20, 21]);
    assert!(matches!(
        c.engine.state(&y).wait().unwrap().mode,
        Mode::Mirroring { .. }
    ));
    let e = end(&b.engine, &y);
    assert_eq!(
        common::engine_bytes(&c.engine, &y, Offset(0), e),
        common::engine_bytes(&b.engine, &y, Offset(0), e)
    );
}

#[test]
fn chain_with_failover_in_the_middle_and_at_the_end() {
    let nodes: Vec<Cluster> = (0..4).map(|_| cluster()).collect();
    let tp = TopicPartition::new("chain", 0);
    for n in &nodes {
        n.engine.create_partition(&tp, config()).wait().unwrap();
    }
    for (i, n) in nodes.iter().enumerate().skip(1) {
        start(
            &n.engine,
            &tp,
            &format!("node{}", i - 1),
            MirrorStart::Offset(Offset(0)),
        );
    }
    let links: Vec<MirrorLink> = (1..4)
        .map(|i| {
            MirrorLink::new(
                nodes[i - 1].engine.clone(),
                tp.clone(),
                nodes[i].engine.clone(),
                tp.clone(),
            )
        })
        .collect();
    let mut seq = [0; 3];
    produce(&nodes[0].engine, &tp, 1, &mut seq, true);
    for l in &links {
        l.catch_up().unwrap();
    }
    // Failover at B (node 1): B writes its barrier; C and D store it as-is without clearing.
    stop(&nodes[1].engine, &tp, 2);
    assert_eq!(
        common::producer_ids(&nodes[1].engine, &tp),
        Vec::<i64>::new()
    );
    produce(&nodes[1].engine, &tp, 40, &mut [0; 3], false);
    for l in &links[1..] {
        l.catch_up().unwrap();
    }
    let e = end(&nodes[1].engine, &tp);
    for n in &nodes[2..] {
        assert_eq!(
            common::engine_bytes(&n.engine, &tp, Offset(0), e),
            common::engine_bytes(&nodes[1].engine, &tp, Offset(0), e)
        );
        let ids = common::producer_ids(&n.engine, &tp);
        assert!(
            ids.contains(&1) && ids.contains(&3) && ids.contains(&40),
            "a mirrored barrier clears nothing downstream: {ids:?}"
        );
    }
    // Failover at D (node 3): only D clears.
    stop(&nodes[3].engine, &tp, 3);
    assert_eq!(
        common::producer_ids(&nodes[3].engine, &tp),
        Vec::<i64>::new()
    );
    assert!(!common::producer_ids(&nodes[2].engine, &tp).is_empty());
    assert!(!common::producer_ids(&nodes[0].engine, &tp).is_empty());
}

/// `start_mirroring` truncating to the end of a leader epoch (from the epoch cache), and a
/// link running on its own thread until the destination caught up.
#[test]
fn start_at_an_epoch_end_and_a_background_link() {
    let (a, b) = (cluster(), cluster());
    let tp = TopicPartition::new("epochs", 0);
    a.engine.create_partition(&tp, config()).wait().unwrap();
    b.engine.create_partition(&tp, config()).wait().unwrap();
    start(&b.engine, &tp, "A", MirrorStart::Offset(Offset(0)));
    let mut seq = [0; 3];
    produce(&a.engine, &tp, 1, &mut seq, false);
    let stop_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let link = MirrorLink::new(a.engine.clone(), tp.clone(), b.engine.clone(), tp.clone());
    let runner = link.clone().spawn(stop_flag.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while link.lag().unwrap() > 0 {
        assert!(std::time::Instant::now() < deadline, "the link catches up");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    stop_flag.store(true, std::sync::atomic::Ordering::Relaxed);
    runner.join().unwrap().unwrap();
    // B fails over at epoch 5 and writes locally; then B mirrors again from the end of epoch 0
    // (A's data, as mirrored): its own epoch-5 records are truncated away.
    let mirrored_end = end(&b.engine, &tp);
    stop(&b.engine, &tp, 5);
    produce(&b.engine, &tp, 60, &mut [0; 3], false);
    assert!(end(&b.engine, &tp) > mirrored_end);
    let from = start(&b.engine, &tp, "A", MirrorStart::EpochEnd(0));
    assert_eq!(from, mirrored_end);
    assert_eq!(end(&b.engine, &tp), mirrored_end);
}

#[test]
fn a_start_past_the_log_end_is_refused_and_names_start_at() {
    // `MirrorStart::Offset` truncates; it cannot move a log forward. On an empty destination,
    // Offset(1000) used to start mirroring at 0 and answer Ok(0).
    let c = cluster();
    let tp = TopicPartition::new("orders", 0);
    c.engine.create_partition(&tp, config()).wait().unwrap();
    let refused = c
        .engine
        .start_mirroring(
            &tp,
            mirrorlog::engine::StartMirroring {
                source: "A".into(),
                truncate_to: MirrorStart::Offset(Offset(1000)),
            },
        )
        .wait();
    let err = refused.expect_err("a start past the log end");
    let text = err.to_string();
    assert!(text.contains("StartAt") && text.contains("1000"), "{text}");
    assert!(
        matches!(
            &err,
            mirrorlog::api::EngineError::Log {
                source: mirrorlog::internals::log::LogError::StartPastLogEnd {
                    asked: Offset(1000),
                    log_end: Offset(0)
                },
                ..
            }
        ),
        "{err:?}"
    );
    // Nothing changed: still Local, and StartAt is the way to start there.
    assert_eq!(c.engine.state(&tp).wait().unwrap().mode, Mode::Local);
    assert_eq!(
        start(&c.engine, &tp, "A", MirrorStart::StartAt(Offset(1000))),
        Offset(1000)
    );
    assert_eq!(c.engine.state(&tp).wait().unwrap().log_start, Offset(1000));
}
