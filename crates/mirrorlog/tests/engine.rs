//! The engine through its public API only: many partitions over 2 shards, callers on several
//! threads appending with every origin, reads, clean close and reopen with everything intact,
//! a full queue as backpressure, configuration errors, a shard driven on the caller's own
//! thread (embedding without the hop), and an unclean stop — a child process killed with
//! SIGKILL mid-stream — after which every acknowledged batch is back.

mod common;

use mirrorlog::api::Isolation;
use mirrorlog::api::Origin;
use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, MirrorStart, PartitionConfig, ReadRequest, StartMirroring,
    TopicPartition,
};
use mirrorlog::format::{self, BatchIter, Offset};
use mirrorlog::internals::io::UringIo;
use mirrorlog::internals::shard::{promise, Request, Shard, ShardConfig};
use std::sync::Arc;

fn small() -> PartitionConfig {
    PartitionConfig {
        segment_bytes: 256 << 10,
        max_message_bytes: 64 << 10,
        append_buffer_bytes: 1 << 20,
        ..PartitionConfig::default()
    }
}

fn read_all(engine: &Engine, tp: &TopicPartition) -> Vec<u8> {
    let state = engine.state(tp).wait().unwrap();
    common::engine_bytes(engine, tp, state.log_start, state.high_watermark)
}

/// Per partition: the stored bytes the callers were acknowledged, in offset order.
type Acked = Vec<(Offset, Vec<u8>)>;

#[test]
fn many_partitions_two_shards_concurrent_callers_every_origin_close_and_reopen() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    // The records' time: the reopen below expects every producer back (on the wall clock they
    // are long expired, and an open expires them).
    let config = EngineConfig::new(dir.path())
        .cluster_id("east")
        .shards(2)
        .clock(common::records_clock());
    let engine = Arc::new(Engine::open(config.clone()).unwrap());
    let partitions: Vec<TopicPartition> = (0..12)
        .map(|i| TopicPartition::new(if i % 2 == 0 { "orders" } else { "mirror.src" }, i))
        .collect();
    for tp in &partitions {
        engine.create_partition(tp, small()).wait().unwrap();
    }
    let used: std::collections::BTreeSet<usize> =
        partitions.iter().map(|tp| engine.shard_of(tp)).collect();
    assert_eq!(used.len(), 2, "the partitions spread over both shards");
    assert!(matches!(
        engine.create_partition(&partitions[0], small()).wait(),
        Err(EngineError::PartitionExists(_))
    ));

    // Client producers and transactions on the "orders" partitions (one thread each), mirrored
    // and replicated batches with their own offsets on the others.
    let mut threads = Vec::new();
    for (t, tp) in partitions.iter().cloned().enumerate() {
        let engine = engine.clone();
        threads.push(std::thread::spawn(move || {
            let mut acked: Acked = Vec::new();
            if tp.topic == "orders" {
                let pid = t as i64;
                let mut seq = 0;
                for i in 0..60 {
                    let txn = i % 10 >= 7;
                    let b = common::producer_batch(pid, seq, 3, txn, 100);
                    let o = engine
                        .append(&tp, b.clone(), Origin::Client)
                        .wait()
                        .unwrap();
                    assert!(!o.duplicate);
                    seq += 3;
                    acked.push((o.first_offset, common::stored(b, o.first_offset, 0)));
                    if i % 10 == 9 {
                        let m = common::marker(pid, i % 20 == 9);
                        let o = engine
                            .append(&tp, m.clone(), Origin::Coordinator)
                            .wait()
                            .unwrap();
                        acked.push((o.first_offset, common::stored(m, o.first_offset, 0)));
                    }
                }
                // A retry of the last data batch is a duplicate: acknowledged, not stored.
                let retry = common::producer_batch(pid, seq - 3, 3, false, 100);
                let dup = engine.append(&tp, retry, Origin::Client).wait();
                assert!(dup.is_err() || dup.unwrap().duplicate);
            } else {
                let origin = if t % 4 == 1 {
                    Origin::Mirror
                } else {
                    Origin::Replication
                };
                if origin == Origin::Mirror {
                    let from = engine
                        .start_mirroring(
                            &tp,
                            StartMirroring {
                                source: "west".into(),
                                truncate_to: MirrorStart::Offset(Offset(0)),
                            },
                        )
                        .wait()
                        .unwrap();
                    assert_eq!(from, Offset(0));
                }
                let mut next = 0i64;
                for i in 0..60 {
                    let b = common::stored(
                        common::producer_batch(1000 + t as i64, i * 2, 2, false, 150),
                        Offset(next),
                        3,
                    );
                    let o = engine.append(&tp, b.clone(), origin).wait().unwrap();
                    assert_eq!(o.first_offset, Offset(next), "copied appends keep offsets");
                    acked.push((o.first_offset, b));
                    next += 2;
                }
            }
            (tp, acked)
        }));
    }
    let results: Vec<(TopicPartition, Acked)> =
        threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (tp, acked) in &results {
        let expected: Vec<u8> = acked.iter().flat_map(|(_, b)| b.clone()).collect();
        assert_eq!(read_all(&engine, tp), expected, "{tp}");
        let state = engine.state(tp).wait().unwrap();
        assert_eq!(state.log_end, state.durable_end);
        assert_eq!(state.high_watermark, state.log_end);
    }
    let stats = engine.stats().unwrap();
    assert_eq!(stats.len(), 2);
    let appends: u64 = stats.iter().map(|s| s.appends).sum();
    assert!(appends >= 12 * 60, "{appends}");
    assert!(stats
        .iter()
        .all(|s| s.commit_rounds > 0 && !s.append_latency_us.is_empty()));
    let producers_before: Vec<_> = results
        .iter()
        .map(|(tp, _)| common::snapshot_kept_entries(&engine.producers(tp).wait().unwrap()))
        .collect();
    let Ok(engine) = Arc::try_unwrap(engine) else {
        panic!("threads done")
    };
    engine.close().unwrap();

    // Reopen: clean, nothing to recover, everything readable, producers as they were.
    let engine = Engine::open(config).unwrap();
    assert!(engine.failed_partitions().is_empty());
    for (i, (tp, acked)) in results.iter().enumerate() {
        let expected: Vec<u8> = acked.iter().flat_map(|(_, b)| b.clone()).collect();
        assert_eq!(read_all(&engine, tp), expected, "{tp} after reopen");
        assert_eq!(
            common::snapshot_kept_entries(&engine.producers(tp).wait().unwrap()),
            producers_before[i]
        );
    }
    // Delete one; it is gone, with its directory.
    engine.delete_partition(&results[0].0).wait().unwrap();
    assert!(matches!(
        engine.state(&results[0].0).wait(),
        Err(EngineError::UnknownPartition(_))
    ));
    assert!(!dir.path().join(results[0].0.dir_name()).exists());
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn a_full_queue_is_backpressure_not_memory() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine =
        Arc::new(Engine::open(EngineConfig::new(dir.path()).shards(1).queue_depth(2)).unwrap());
    let tp = TopicPartition::new("t", 0);
    engine.create_partition(&tp, small()).wait().unwrap();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let engine = engine.clone();
            let tp = tp.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let b = common::producer_batch(t, i, 1, false, 50);
                    engine.append(&tp, b, Origin::Client).wait().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let state = engine.state(&tp).wait().unwrap();
    assert_eq!(state.log_end, Offset(400));
    let stats = engine.stats().unwrap();
    assert!(stats[0].queue_depth <= 2);
}

#[test]
fn one_producers_pipelined_appends_past_a_full_queue_keep_their_order() {
    // An idempotent producer with many appends in flight, a queue of depth 1: every call past
    // the first finds the queue full. They must still reach the partition in issue order (they
    // used to be sent whenever each was awaited, and a later one could overtake an earlier one:
    // OutOfOrderSequence).
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).queue_depth(1)).unwrap();
    let tp = TopicPartition::new("pipelined", 0);
    engine.create_partition(&tp, small()).wait().unwrap();
    for round in 0..4 {
        let calls: Vec<_> = (0..64)
            .map(|i| {
                let b = common::producer_batch(7, round * 64 + i, 1, false, 50);
                engine.append(&tp, b, Origin::Client)
            })
            .collect();
        // Awaited newest first: the order of the waits must not matter.
        let mut offsets: Vec<Offset> = calls
            .into_iter()
            .rev()
            .map(|c| c.wait().unwrap().first_offset)
            .collect();
        offsets.reverse();
        let base = i64::from(round) * 64;
        assert_eq!(offsets, (base..base + 64).map(Offset).collect::<Vec<_>>());
    }
    // Dropping a call does not cancel it: the append still lands.
    drop(engine.append(
        &tp,
        common::producer_batch(7, 256, 1, false, 50),
        Origin::Client,
    ));
    assert_eq!(engine.state(&tp).wait().unwrap().log_end, Offset(257));
    engine.close().unwrap();
}

#[test]
fn configuration_is_validated_with_kafka_names() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let e = Engine::open(EngineConfig::new(dir.path()).shards(0)).unwrap_err();
    assert!(
        matches!(e, EngineError::Config { name: "shards", .. }),
        "{e}"
    );
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let tp = TopicPartition::new("t", 0);
    let e = engine
        .create_partition(
            &tp,
            PartitionConfig {
                segment_bytes: 100,
                ..PartitionConfig::default()
            },
        )
        .wait()
        .unwrap_err();
    assert!(
        matches!(
            e,
            EngineError::Config {
                name: "segment.bytes",
                ..
            }
        ),
        "{e}"
    );
    let e = engine
        .create_partition(&TopicPartition::new("bad/name", 0), small())
        .wait()
        .unwrap_err();
    assert!(matches!(e, EngineError::InvalidPartition(_)), "{e}");
    // max.message.bytes is enforced per batch, with the partition named.
    engine
        .create_partition(
            &tp,
            PartitionConfig {
                max_message_bytes: 1000,
                ..small()
            },
        )
        .wait()
        .unwrap();
    let big = common::producer_batch(1, 0, 1, false, 2000);
    match engine.append(&tp, big, Origin::Client).wait() {
        Err(EngineError::MessageTooLarge {
            partition,
            limit: 1000,
            ..
        }) => assert_eq!(partition, tp),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        engine.state(&TopicPartition::new("nope", 0)).wait(),
        Err(EngineError::UnknownPartition(_))
    ));
}

/// A broker running its own loop drives a shard on its thread: requests go straight in, and
/// turns of `run_once` complete them. Nothing crosses a thread.
#[test]
fn a_shard_driven_on_the_callers_thread() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let io = Box::new(UringIo::new(64).unwrap());
    let mut shard = Shard::new(
        io,
        ShardConfig {
            index: 0,
            data_dir: dir.path().to_path_buf(),
            queue_depth: 16,
            commit_linger_us: 0,
            ..ShardConfig::new(0, std::path::PathBuf::new())
        },
    )
    .unwrap();
    let tp = TopicPartition::new("local", 0);
    let (reply, mut created) = promise();
    shard.submit(Request::Create {
        tp: tp.clone(),
        config: small(),
        reply,
    });
    let created = created.try_take();
    assert!(matches!(created, Some(Ok(Ok(())))), "{created:?}");
    let mut pending = Vec::new();
    for i in 0..20 {
        let (reply, p) = promise();
        shard.submit(Request::Append {
            tp: tp.clone(),
            batches: common::producer_batch(5, i, 1, false, 30).into(),
            origin: Origin::Client,
            follows: None,
            reply: mirrorlog::internals::shard::AppendReply::One(reply),
        });
        pending.push(p);
    }
    // Not durable until the loop turns.
    let mut done: Vec<Option<_>> = pending.iter_mut().map(|p| p.try_take()).collect();
    assert!(done.iter().all(Option::is_none));
    while done.iter().any(Option::is_none) {
        shard.run_once(true).unwrap();
        for (d, p) in done.iter_mut().zip(pending.iter_mut()) {
            if d.is_none() {
                *d = p.try_take();
            }
        }
    }
    let offsets: Vec<Offset> = done
        .into_iter()
        .map(|d| d.unwrap().unwrap().unwrap().first_offset)
        .collect();
    assert_eq!(offsets, (0..20).map(Offset).collect::<Vec<_>>());
    let (reply, state) = promise();
    shard.submit(Request::State {
        tp: tp.clone(),
        reply,
    });
    let state = state.wait().unwrap().unwrap();
    assert_eq!(state.durable_end, Offset(20));
    let (reply, closed) = promise();
    shard.submit(Request::Close { reply });
    assert!(closed.wait().unwrap().unwrap().is_empty());
    assert!(shard.is_closed());
}

const CHILD_ENV: &str = "MIRRORLOG_ENGINE_CHILD_DIR";

/// The child: appends forever to 4 partitions, printing each acknowledgement.
#[test]
fn child_appends_until_killed() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return; // only runs as the child of the SIGKILL test
    };
    let engine = Engine::open(EngineConfig::new(&dir).shards(2)).unwrap();
    let tps: Vec<TopicPartition> = (0..4).map(|p| TopicPartition::new("k", p)).collect();
    for tp in &tps {
        engine.create_partition(tp, small()).wait().unwrap();
    }
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        let tp = &tps[i % 4];
        let b = common::producer_batch(i as i64 % 4, (i / 4) as i32 * 2, 2, false, 200);
        let o = engine.append(tp, b, Origin::Client).wait().unwrap();
        writeln!(out, "ACK {} {} {}", tp.partition, o.first_offset.0, i).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_mid_stream_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new(exe)
        .args([
            "--exact",
            "child_appends_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (counted, count) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut acks = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("ACK ") {
                let v: Vec<i64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
                acks.push((v[0] as i32, Offset(v[1]), v[2] as usize));
                let _ = counted.send(acks.len());
            }
        }
        acks
    });
    // The kill lands mid-stream: after enough acknowledgements (however long a loaded machine
    // takes to start the child, or its disk to sync: a shared host's disk once stalled this
    // test's first appends for over a minute), then a little later, while appends are in flight.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while let Ok(n) =
        count.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        if n > 100 {
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SIGKILL: no destructor, no close, no flush.
    child.kill().unwrap();
    child.wait().unwrap();
    let acks = reader.join().unwrap();
    eprintln!(
        "the child had {} appends acknowledged when it was killed",
        acks.len()
    );
    assert!(
        acks.len() > 50,
        "the child acknowledged appends: {}",
        acks.len()
    );
    // What the kill left on disk already reads as consistent (the torn round past the newest
    // commit record is not part of any segment's durable bytes).
    common::assert_verifies(dir.path());
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(2)).unwrap();
    assert!(
        engine.failed_partitions().is_empty(),
        "{:?}",
        engine.failed_partitions()
    );
    for (partition, offset, i) in acks {
        let tp = TopicPartition::new("k", partition);
        let r = engine
            .read(&tp, ReadRequest::new(offset, 1, Isolation::ReadUncommitted))
            .wait()
            .unwrap_or_else(|e| panic!("{tp} offset {offset}: {e}"));
        let expected = common::stored(
            common::producer_batch(i as i64 % 4, (i / 4) as i32 * 2, 2, false, 200),
            offset,
            0,
        );
        let got = format::inspect(&r.records, 0).unwrap();
        assert_eq!(got.bytes(), &expected[..], "{tp} offset {offset}");
    }
    engine.close().unwrap();
    // Recovered and closed: the directory passes `mirrorlog verify`'s checks.
    common::assert_verifies(dir.path());
}

/// Regression (found by the bench's tail-read workload): a read on a partition whose commit
/// round was in flight reaped the round's completions inside its own wait and dropped them, so
/// the round never finished and its appends were never acknowledged. Producers and readers on
/// the same partitions must all finish.
#[test]
fn reads_during_commit_rounds_do_not_lose_acknowledgements() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Arc::new(Engine::open(EngineConfig::new(dir.path()).shards(2)).unwrap());
    let tps: Vec<TopicPartition> = (0..4).map(|p| TopicPartition::new("tail", p)).collect();
    for tp in &tps {
        engine.create_partition(tp, small()).wait().unwrap();
    }
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut threads = Vec::new();
    for (p, tp) in tps.iter().cloned().enumerate() {
        let (producer_engine, done_tx, producer_tp) = (engine.clone(), done_tx.clone(), tp.clone());
        threads.push(std::thread::spawn(move || {
            let (engine, tp) = (producer_engine, producer_tp);
            for seq in 0..300 {
                let b = common::producer_batch(p as i64, seq, 1, false, 900);
                engine.append(&tp, b, Origin::Client).wait().unwrap();
            }
            done_tx.send(()).unwrap();
        }));
        let (engine, stop) = (engine.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut at = Offset(0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = engine
                    .read(
                        &tp,
                        ReadRequest::new(at, 1 << 20, Isolation::ReadUncommitted),
                    )
                    .wait();
                if let Some(last) = r.ok().and_then(|r| {
                    BatchIter::new(&r.records, 0)
                        .last()
                        .map(|b| b.header().last_offset())
                }) {
                    at = Offset(last.0 + 1);
                }
            }
        }));
    }
    for _ in 0..tps.len() {
        done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("every producer's appends are acknowledged");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    for tp in &tps {
        assert_eq!(engine.state(tp).wait().unwrap().durable_end, Offset(300));
    }
}

/// The page-cache backend (for filesystems that refuse O_DIRECT) serves partitions through
/// the same code: appends acknowledged, a close and reopen gives back the same bytes.
#[test]
fn the_page_cache_backend_serves_and_reopens() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("cached", 0);
    let config = EngineConfig::new(dir.path())
        .shards(1)
        .backend(mirrorlog::engine::IoBackend::UringPageCache);
    let engine = Engine::open(config.clone()).unwrap();
    engine.create_partition(&tp, small()).wait().unwrap();
    let mut acked = Vec::new();
    for seq in 0..50 {
        let b = common::producer_batch(7, seq, 1, false, 100);
        engine
            .append(&tp, b.clone(), Origin::Client)
            .wait()
            .unwrap();
        acked.push(b);
    }
    engine.close().unwrap();
    let engine = Engine::open(config.clone()).unwrap();
    let stored = read_all(&engine, &tp);
    assert_eq!(BatchIter::new(&stored, 0).count(), 50);
    // The bytes match what was sent but for the offsets the log assigned.
    let mut expected = Vec::new();
    for (i, b) in acked.into_iter().enumerate() {
        expected.extend(common::stored(b, Offset(i as i64), 0));
    }
    assert!(
        stored == expected,
        "the bytes read back differ from those acknowledged"
    );
    engine.close().unwrap();
}

/// A data directory is one engine's: a second open while the first runs is refused with a
/// typed error, and the directory opens again once the first is closed.
#[test]
fn a_second_engine_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let config = EngineConfig::new(dir.path()).shards(1);
    let first = Engine::open(config.clone()).unwrap();
    let tp = TopicPartition::new("locked", 0);
    first.create_partition(&tp, small()).wait().unwrap();
    match Engine::open(config.clone()) {
        Err(EngineError::DataDirLocked(path)) => assert_eq!(path, dir.path()),
        other => panic!("expected DataDirLocked, got {other:?}"),
    }
    first.close().unwrap();
    let again = Engine::open(config).unwrap();
    assert!(again.state(&tp).wait().is_ok());
    again.close().unwrap();
}

/// The turn lookahead: once a partition tracks more producers than the cache holds
/// (`LOOKAHEAD_MIN_PRODUCERS`, re-checked on every tick), the shard prefetches every queued
/// append's producer slot before serving the turn. The appends keep their outcomes and order:
/// pipelined bursts from thousands of producers, every offset where it belongs, every producer
/// at its last sequence.
#[test]
fn turns_over_a_large_producer_table_look_ahead_and_change_no_outcome() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(
        EngineConfig::new(dir.path())
            .shards(1)
            .clock(common::records_clock()),
    )
    .unwrap();
    let tp = TopicPartition::new("lookahead", 0);
    let config = PartitionConfig {
        segment_bytes: 4 << 20,
        ..small()
    };
    engine.create_partition(&tp, config).wait().unwrap();
    let producers = mirrorlog::internals::shard::LOOKAHEAD_MIN_PRODUCERS as i64 + 500;
    let mut next = Offset(0);
    let mut burst = |from: i64, to: i64, seq: i32| {
        let calls: Vec<_> = (from..to)
            .map(|p| {
                engine.append(
                    &tp,
                    common::producer_batch(p, seq, 1, false, 20),
                    Origin::Client,
                )
            })
            .collect();
        for c in calls {
            assert_eq!(c.wait().unwrap().first_offset, next);
            next = Offset(next.0 + 1);
        }
    };
    for start in (0..producers).step_by(1024) {
        burst(start, (start + 1024).min(producers), 0);
    }
    // Bursts until a tick has switched the lookahead on (the timer ticks at least once a
    // second), then more: each producer's second batch, in order.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seq = 1;
    loop {
        burst(0, 512, seq);
        seq += 1;
        let turns: u64 = engine
            .stats()
            .unwrap()
            .iter()
            .map(|s| s.lookahead_turns)
            .sum();
        if turns > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lookahead never came on"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    burst(0, 512, seq);
    let state = engine.state(&tp).wait().unwrap();
    assert_eq!(state.producer_count, producers as usize);
    assert_eq!(state.log_end, next);
    let entries = engine.producers(&tp).wait().unwrap();
    for e in entries {
        let expected = if e.producer_id < 512 { seq } else { 0 };
        assert_eq!(e.last_seq(), expected, "producer {}", e.producer_id);
    }
    engine.close().unwrap();
}

#[test]
fn a_dead_shard_is_reported_and_its_partitions_get_a_typed_error() {
    // Supervision: a shard whose thread ends (a fatal ring failure; the test hook
    // stops it the same way) is listed by `dead_shards` within a second, its partitions answer
    // `ShardStopped`, the other shard serves on, and close reports the failure.
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(2).pin_threads(false)).unwrap();
    let tps: Vec<TopicPartition> = (0..8).map(|p| TopicPartition::new("s", p)).collect();
    for tp in &tps {
        engine.create_partition(tp, small()).wait().unwrap();
    }
    let (on0, on1): (Vec<_>, Vec<_>) = tps.iter().partition(|tp| engine.shard_of(tp) == 0);
    assert!(
        !on0.is_empty() && !on1.is_empty(),
        "both shards hold partitions"
    );
    assert!(engine.dead_shards().is_empty());
    engine.halt_shard_for_tests(0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while engine.dead_shards() != [0] {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            engine.dead_shards()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let b = common::producer_batch(1, 0, 1, false, 10);
    let refused = engine.append(on0[0], b.clone(), Origin::Client).wait();
    assert!(
        matches!(refused, Err(mirrorlog::api::EngineError::ShardStopped(0))),
        "{refused:?}"
    );
    engine.append(on1[0], b, Origin::Client).wait().unwrap();
    assert!(engine.close().is_err(), "close reports the dead shard");
}

#[test]
fn a_managed_high_watermark_survives_a_reopen() {
    // Kafka keeps the high watermark in `replication-offset-checkpoint` (it was reset
    // to the log end on reopen, exposing records the broker had not exposed). Written on the
    // shard's tick when it moved and at a clean close; bounded by the log as always.
    let dir = tempfile::tempdir().unwrap();
    let tp = TopicPartition::new("hw", 0);
    {
        let engine =
            Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
        engine.create_partition(&tp, small()).wait().unwrap();
        for seq in 0..5 {
            let b = common::producer_batch(1, seq * 2, 2, false, 20);
            engine.append(&tp, b, Origin::Client).wait().unwrap();
        }
        engine.set_high_watermark(&tp, Offset(4)).wait().unwrap();
        assert_eq!(engine.state(&tp).wait().unwrap().high_watermark, Offset(4));
        // The timer's tick writes it (at least once a second).
        let file = dir
            .path()
            .join("hw-0")
            .join(mirrorlog::internals::log::HIGH_WATERMARK_CHECKPOINT);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !std::fs::read_to_string(&file).is_ok_and(|t| t.ends_with(" 4\n")) {
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint written"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n1\nhw 0 4\n");
        engine.set_high_watermark(&tp, Offset(6)).wait().unwrap();
        engine.close().unwrap();
    }
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).pin_threads(false)).unwrap();
    let state = engine.state(&tp).wait().unwrap();
    assert_eq!(
        (state.high_watermark, state.log_end),
        (Offset(6), Offset(10))
    );
    let r = engine
        .read(
            &tp,
            ReadRequest::new(Offset(0), 1 << 20, Isolation::ReadUncommitted),
        )
        .wait()
        .unwrap();
    let last = BatchIter::new(&r.records, 0)
        .last()
        .unwrap()
        .header()
        .last_offset();
    assert_eq!(last, Offset(5), "nothing past the high watermark is served");
    engine.close().unwrap();
}

/// `journal.bytes = 0` turns the journal off: rounds sync their own files, no journal file is
/// kept, and an engine reopened without one after running with one replays and removes it.
#[test]
fn the_journal_can_be_turned_off() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let journals = |d: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| mirrorlog::internals::journal::shard_of(n).is_some())
            .collect()
    };
    let tp = TopicPartition::new("j", 0);
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    engine.create_partition(&tp, small()).wait().unwrap();
    let append = |engine: &Engine, seqs: std::ops::Range<i32>| {
        for i in seqs {
            let b = common::producer_batch(3, i, 1, false, 100);
            engine.append(&tp, b, Origin::Client).wait().unwrap();
        }
    };
    append(&engine, 0..10);
    let with = engine.stats().unwrap()[0].journal_rounds;
    assert!(with >= 10, "{with} journal rounds");
    engine.close().unwrap();
    assert_eq!(journals(dir.path()), vec!["journal-0.mlj".to_string()]);
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).journal_bytes(0)).unwrap();
    assert!(journals(dir.path()).is_empty(), "replayed and removed");
    append(&engine, 10..20);
    let s = &engine.stats().unwrap()[0];
    assert_eq!(s.journal_rounds, 0);
    assert!(s.fdatasyncs >= 10, "each round synced its own file");
    assert_eq!(engine.state(&tp).wait().unwrap().durable_end, Offset(20));
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}
