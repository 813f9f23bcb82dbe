//! The one mirror pipeline (design.md §Mirroring) over many partitions at once, with another
//! engine as its source (`EngineSource`), driven on the test's thread (`mirror::drive`): the
//! code a broker's mirror runs over the wire. It proves that one fetch answer over many
//! partitions lands as one engine call, that every partition is mirrored byte for byte across
//! shards, that a destination partition paused under the pipeline waits and then catches up
//! while the others go on, and that a partition the source lacks is retried (and counted) alone.

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, MirrorStart, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;
use mirrorlog::mirror::destination::{Landed, PartStatus};
use mirrorlog::mirror::{drive, EngineFetch, EngineSource, Pipeline};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MIRROR: &str = "A";

struct Cluster {
    engine: Arc<Engine>,
    _dir: common::VerifiedDir,
}

fn cluster() -> Cluster {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let config = EngineConfig::new(dir.path()).shards(2).pin_threads(false);
    Cluster {
        engine: Arc::new(Engine::open(config).unwrap()),
        _dir: common::VerifiedDir(dir),
    }
}

fn produce(engine: &Engine, tp: &TopicPartition, seq: &mut i32, batches: usize) {
    for _ in 0..batches {
        let b = common::producer_batch(i64::from(tp.partition) + 1, *seq, 10, false, 50);
        engine.append(tp, b, Origin::Client).wait().unwrap();
        *seq += 10;
    }
}

/// `n` partitions on both sides, the destination's mirroring; a pipeline over all of them.
fn mirror(a: &Cluster, b: &Cluster, n: i32) -> (Vec<TopicPartition>, Pipeline, EngineSource) {
    let tps: Vec<TopicPartition> = (0..n).map(|p| TopicPartition::new("wide", p)).collect();
    for tp in &tps {
        a.engine
            .create_partition(tp, PartitionConfig::default())
            .wait()
            .unwrap();
        b.engine
            .create_partition(tp, PartitionConfig::default())
            .wait()
            .unwrap();
        common::start_mirroring(&b.engine, tp, MIRROR, MirrorStart::LastStableOffset);
    }
    let status = Arc::new(Mutex::new(
        tps.iter().map(|tp| PartStatus::new(tp.clone())).collect(),
    ));
    let pipeline = Pipeline::new(
        b.engine.clone(),
        MIRROR,
        status,
        Arc::new(Landed::default()),
    )
    .with_backoff(Duration::from_millis(1), Duration::from_millis(20));
    let source = EngineSource::new(
        a.engine.clone(),
        tps.iter().map(|tp| (tp.clone(), tp.clone())),
        EngineFetch {
            max_bytes: 1 << 20,
            max_wait: Duration::ZERO,
            min_bytes: 1,
        },
    );
    (tps, pipeline, source)
}

fn assert_mirrored(a: &Engine, b: &Engine, tp: &TopicPartition) {
    let end = a.state(tp).wait().unwrap().log_end;
    assert_eq!(b.state(tp).wait().unwrap().log_end, end, "{tp}");
    assert_eq!(
        common::engine_bytes(b, tp, Offset(0), end),
        common::engine_bytes(a, tp, Offset(0), end),
        "{tp} byte for byte"
    );
}

#[test]
fn one_answer_over_many_partitions_lands_as_one_call_and_each_is_mirrored_as_is() {
    let (a, b) = (cluster(), cluster());
    let (tps, mut pipeline, mut source) = mirror(&a, &b, 12);
    let mut seqs = vec![0; tps.len()];
    for (tp, seq) in tps.iter().zip(&mut seqs) {
        produce(&a.engine, tp, seq, 1);
    }
    drive(&mut pipeline, &mut source, Pipeline::caught_up).unwrap();
    for tp in &tps {
        assert_mirrored(&a.engine, &b.engine, tp);
    }
    let landed = |p: &Pipeline| {
        let st = p.status().lock().unwrap();
        (st.iter().map(|s| s.batches_appended).sum::<u64>(), st.len())
    };
    assert_eq!(landed(&pipeline), (12, 12), "a batch each");
    // One request asked for all twelve (one route), and its answer was one landing.
    let st = pipeline.status().lock().unwrap().clone();
    assert!(
        st.iter().all(|s| s.fetch_requests >= 1 && s.errors == 0),
        "{st:?}"
    );
    // More on every partition, several batches each: still mirrored as-is.
    for (tp, seq) in tps.iter().zip(&mut seqs) {
        produce(&a.engine, tp, seq, 5);
    }
    let mut pipeline = Pipeline::new(
        b.engine.clone(),
        MIRROR,
        pipeline.status().clone(),
        Arc::new(Landed::default()),
    );
    drive(&mut pipeline, &mut source, Pipeline::caught_up).unwrap();
    for tp in &tps {
        assert_mirrored(&a.engine, &b.engine, tp);
    }
    assert_eq!(landed(&pipeline).0, 12 * 6, "counted on across pipelines");
}

#[test]
fn a_landing_is_one_engine_call_for_the_whole_answer() {
    let (a, b) = (cluster(), cluster());
    let (tps, mut pipeline, mut source) = mirror(&a, &b, 8);
    let landed = Arc::new(Landed::default());
    let status = pipeline.status().clone();
    pipeline = Pipeline::new(b.engine.clone(), MIRROR, status, landed.clone());
    for tp in &tps {
        produce(&a.engine, tp, &mut 0, 3);
    }
    drive(&mut pipeline, &mut source, Pipeline::caught_up).unwrap();
    // Every partition's three batches came in its first fetch answer, and the eight
    // partitions' appends were one landing.
    assert_eq!(landed.summary().answers, 1, "{:?}", landed.summary());
    for tp in &tps {
        assert_mirrored(&a.engine, &b.engine, tp);
    }
}

#[test]
fn a_paused_partition_waits_while_the_others_go_on() {
    let (a, b) = (cluster(), cluster());
    let (tps, mut pipeline, mut source) = mirror(&a, &b, 4);
    let paused = &tps[2];
    b.engine.pause_mirroring(paused).wait().unwrap();
    let mut seqs = vec![0; tps.len()];
    for (tp, seq) in tps.iter().zip(&mut seqs) {
        produce(&a.engine, tp, seq, 4);
    }
    drive(&mut pipeline, &mut source, Pipeline::caught_up).unwrap();
    for tp in tps.iter().filter(|tp| *tp != paused) {
        assert_mirrored(&a.engine, &b.engine, tp);
    }
    assert_eq!(
        b.engine.state(paused).wait().unwrap().log_end,
        Offset(0),
        "paused: nothing fetched"
    );
    // Resumed: a new pipeline (as a broker's mirror restarts on resume) brings it level.
    b.engine.resume_mirroring(paused).wait().unwrap();
    let mut pipeline = Pipeline::new(
        b.engine.clone(),
        MIRROR,
        pipeline.status().clone(),
        Arc::new(Landed::default()),
    );
    drive(&mut pipeline, &mut source, Pipeline::caught_up).unwrap();
    for tp in &tps {
        assert_mirrored(&a.engine, &b.engine, tp);
    }
}

#[test]
fn a_partition_the_source_lacks_is_retried_alone() {
    let (a, b) = (cluster(), cluster());
    let (tps, _, _) = mirror(&a, &b, 3);
    let missing = TopicPartition::new("wide", 9);
    b.engine
        .create_partition(&missing, PartitionConfig::default())
        .wait()
        .unwrap();
    common::start_mirroring(&b.engine, &missing, MIRROR, MirrorStart::LastStableOffset);
    // The source engine lacks partition 9: its reads fail, it is retried with backoff and
    // counted, and the others are mirrored.
    let mut all: Vec<TopicPartition> = tps.clone();
    all.push(missing.clone());
    let status = Arc::new(Mutex::new(
        all.iter().map(|tp| PartStatus::new(tp.clone())).collect(),
    ));
    let mut pipeline = Pipeline::new(
        b.engine.clone(),
        MIRROR,
        status.clone(),
        Arc::new(Landed::default()),
    )
    .with_backoff(Duration::from_millis(1), Duration::from_millis(5));
    let mut source = EngineSource::new(
        a.engine.clone(),
        all.iter().map(|tp| (tp.clone(), tp.clone())),
        EngineFetch {
            max_bytes: 1 << 20,
            max_wait: Duration::ZERO,
            min_bytes: 1,
        },
    );
    for tp in &tps {
        produce(&a.engine, tp, &mut 0, 2);
    }
    let mut turns = 0;
    drive(&mut pipeline, &mut source, |p| {
        turns += 1;
        let errors = p.status().lock().unwrap()[3].errors;
        tps.iter()
            .all(|tp| b.engine.state(tp).wait().unwrap().log_end >= Offset(20))
            && errors >= 2
    })
    .unwrap();
    for tp in &tps {
        assert_mirrored(&a.engine, &b.engine, tp);
    }
    let st = status.lock().unwrap();
    assert!(st[3].errors >= 2, "{:?}", st[3]);
    assert!(st[..3].iter().all(|s| s.errors == 0), "{st:?}");
    assert!(turns > 0);
}
