//! The bad-input catalogue at the public API: every malformed batch the format layer knows,
//! the wrong origin for the partition's mode, mirrored offsets not at the log end, control
//! batches from clients, oversize and empty appends, unknown partitions, bad names and
//! configurations, and calls to a shard after its `Close`. Each returns its typed error and
//! changes nothing: the log end, the producer state and every stored byte are the same after,
//! and the partition keeps accepting good appends.

mod common;

use mirrorlog::engine::{
    Engine, EngineConfig, EngineError, MirrorStart, PartitionConfig, PartitionState,
    StartMirroring, TopicPartition,
};
use mirrorlog::format::{self, FormatError, Offset};
use mirrorlog::internals::io::{SimConfig, SimIo};
use mirrorlog::internals::log::LogError;
use mirrorlog::internals::producer_state::{Origin, ProducerStateError};
use mirrorlog::internals::shard::{promise, Request, Shard, ShardConfig};

fn config() -> PartitionConfig {
    PartitionConfig {
        max_message_bytes: 64 << 10,
        ..PartitionConfig::default()
    }
}

/// What must not change.
#[derive(Debug, PartialEq)]
struct Snapshot {
    state: (Offset, Offset, Offset, usize),
    producers: Vec<common::Kept>,
    bytes: Vec<u8>,
}

fn snapshot(engine: &Engine, tp: &TopicPartition) -> Snapshot {
    let s: PartitionState = engine.state(tp).wait().unwrap();
    Snapshot {
        state: (s.log_start, s.log_end, s.high_watermark, s.producer_count),
        producers: common::snapshot_kept_entries(&engine.producers(tp).wait().unwrap()),
        bytes: common::engine_bytes(engine, tp, s.log_start, s.high_watermark),
    }
}

fn good(seq: i32) -> Vec<u8> {
    common::producer_batch(1, seq, 2, false, 100)
}

/// Flips `f` over a copy of a good batch and recomputes the CRC (so the fault is the field's,
/// not the checksum's).
fn with(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = good(2);
    f(&mut b);
    let crc = format::crc32c(&b[format::CRC_POS + 4..]);
    b[format::CRC_POS..format::CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// A malformed batch: its name, its bytes, and the error it must get.
type Case = (&'static str, Vec<u8>, fn(&FormatError) -> bool);

fn format_error(r: Result<mirrorlog::internals::log::AppendOutcome, EngineError>) -> FormatError {
    match r {
        Err(EngineError::Log {
            source: LogError::Format(e),
            ..
        }) => e,
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn malformed_batches_are_refused_with_their_error_and_change_nothing() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let tp = TopicPartition::new("bad", 0);
    engine.create_partition(&tp, config()).wait().unwrap();
    engine.append(&tp, good(0), Origin::Client).wait().unwrap();
    let before = snapshot(&engine, &tp);

    let g = good(2);
    let header = format::BATCH_HEADER_SIZE_BYTES;
    let cases: Vec<Case> = vec![
        ("truncated header", g[..30].to_vec(), |e| {
            matches!(e, FormatError::Incomplete { .. })
        }),
        ("truncated batch", g[..g.len() - 5].to_vec(), |e| {
            matches!(e, FormatError::Incomplete { .. })
        }),
        (
            "length below the minimum",
            with(|b| b[8..12].copy_from_slice(&10i32.to_be_bytes())),
            |e| matches!(e, FormatError::LengthTooSmall { .. }),
        ),
        ("magic 1", with(|b| b[16] = 1), |e| {
            matches!(e, FormatError::InvalidMagic { .. })
        }),
        (
            "flipped payload byte",
            {
                let mut b = g.clone();
                let n = b.len();
                b[n - 3] ^= 0xff;
                b
            },
            |e| matches!(e, FormatError::CrcMismatch { .. }),
        ),
        ("unknown codec 7", with(|b| b[22] |= 7), |e| {
            matches!(e, FormatError::UnknownCompression { .. })
        }),
        (
            "negative records count",
            with(|b| b[57..61].copy_from_slice(&(-1i32).to_be_bytes())),
            |e| matches!(e, FormatError::NegativeRecordCount { .. }),
        ),
        (
            "records count too high",
            with(|b| b[57..61].copy_from_slice(&5i32.to_be_bytes())),
            |e| {
                matches!(
                    e,
                    FormatError::RecordCountMismatch { .. }
                        | FormatError::LastOffsetDeltaMismatch { .. }
                )
            },
        ),
        (
            "negative last offset delta",
            with(|b| b[23..27].copy_from_slice(&(-1i32).to_be_bytes())),
            |e| matches!(e, FormatError::NegativeLastOffsetDelta { .. }),
        ),
        (
            "last offset delta inconsistent",
            with(|b| b[23..27].copy_from_slice(&7i32.to_be_bytes())),
            |e| matches!(e, FormatError::LastOffsetDeltaMismatch { .. }),
        ),
        (
            "missing sequence for a producer",
            with(|b| b[53..57].copy_from_slice(&(-1i32).to_be_bytes())),
            |e| matches!(e, FormatError::MissingSequence { .. }),
        ),
        (
            "record fields that do not fit the record",
            with(|b| b[header] = 0x7e),
            |e| {
                matches!(
                    e,
                    FormatError::RecordSizeMismatch { .. }
                        | FormatError::FieldOverrun { .. }
                        | FormatError::RecordCountMismatch { .. }
                        | FormatError::InvalidLength { .. }
                        | FormatError::HeaderCountTooLarge { .. }
                )
            },
        ),
        (
            "control batch from a client",
            common::marker(1, true),
            |e| matches!(e, FormatError::ControlBatchFromClient { .. }),
        ),
        (
            "trailing bytes after a batch",
            {
                let mut b = g.clone();
                b.extend_from_slice(&[1, 2, 3]);
                b
            },
            |e| matches!(e, FormatError::Incomplete { .. }),
        ),
    ];
    for (name, bytes, expected) in &cases {
        let e = format_error(engine.append(&tp, bytes.clone(), Origin::Client).wait());
        assert!(expected(&e), "{name}: {e:?}");
        assert_eq!(snapshot(&engine, &tp), before, "{name} changed something");
    }
    // A good batch after a bad one in the same append: all or nothing.
    let mut mixed = good(2);
    mixed.extend(with(|b| b[16] = 1));
    assert!(engine.append(&tp, mixed, Origin::Client).wait().is_err());
    assert_eq!(
        snapshot(&engine, &tp),
        before,
        "a half-bad append changed something"
    );

    // Other refusals: empty, too large, out-of-sequence producer.
    assert!(matches!(
        engine.append(&tp, Vec::new(), Origin::Client).wait(),
        Err(EngineError::Log {
            source: LogError::EmptyAppend,
            ..
        })
    ));
    let huge = common::producer_batch(1, 2, 1, false, 70 << 10);
    assert!(matches!(
        engine.append(&tp, huge, Origin::Client).wait(),
        Err(EngineError::MessageTooLarge { .. })
    ));
    assert!(matches!(
        engine.append(&tp, good(9), Origin::Client).wait(),
        Err(EngineError::Log {
            source: LogError::ProducerState(ProducerStateError::OutOfOrderSequence { .. }),
            ..
        })
    ));
    assert_eq!(snapshot(&engine, &tp), before);
    // And the partition is as good as before.
    engine.append(&tp, good(2), Origin::Client).wait().unwrap();
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn wrong_origin_for_the_mode_and_offsets_not_at_the_log_end() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let tp = TopicPartition::new("modes", 0);
    engine.create_partition(&tp, config()).wait().unwrap();
    engine.append(&tp, good(0), Origin::Client).wait().unwrap();
    // Local: a mirrored batch is refused.
    let before = snapshot(&engine, &tp);
    let mirrored = common::stored(common::producer_batch(7, 0, 1, false, 10), Offset(2), 3);
    assert!(matches!(
        engine.append(&tp, mirrored.clone(), Origin::Mirror).wait(),
        Err(EngineError::Log {
            source: LogError::NotMirroring { .. },
            ..
        })
    ));
    assert_eq!(snapshot(&engine, &tp), before);
    // Mirroring: a client batch is refused, a mirrored one overlapping stored offsets too.
    let at = engine
        .start_mirroring(
            &tp,
            StartMirroring {
                source: "src".into(),
                truncate_to: MirrorStart::LastStableOffset,
            },
        )
        .wait()
        .unwrap();
    let before = snapshot(&engine, &tp);
    assert!(matches!(
        engine.append(&tp, good(2), Origin::Client).wait(),
        Err(EngineError::Log {
            source: LogError::ReadOnlyPartition { .. },
            ..
        })
    ));
    assert!(matches!(
        engine
            .append(&tp, common::marker(7, true), Origin::Coordinator)
            .wait(),
        Err(EngineError::Log {
            source: LogError::ReadOnlyPartition { .. },
            ..
        })
    ));
    // Below the log end with bytes other than those stored: the mirror diverged. (A batch
    // past the log end is a gap on the source, accepted as a Kafka follower's append is.)
    assert!(at.0 > 0, "the local appends above moved the log end");
    let behind = common::stored(
        common::producer_batch(7, 0, 1, false, 10),
        Offset(at.0 - 1),
        3,
    );
    assert!(matches!(
        engine.append(&tp, behind, Origin::Mirror).wait(),
        Err(EngineError::Log {
            source: LogError::NotAtLogEnd { .. },
            ..
        })
    ));
    assert_eq!(snapshot(&engine, &tp), before);
    // The mirror then takes the right batch (a batch at the wrong offset is the source's
    // inconsistency: it fails the mirror, which a restart at the log end clears).
    let state = engine.state(&tp).wait().unwrap();
    if !matches!(state.mode, mirrorlog::engine::Mode::Mirroring { .. }) {
        engine
            .start_mirroring(
                &tp,
                StartMirroring {
                    source: "src".into(),
                    truncate_to: MirrorStart::Offset(state.log_end),
                },
            )
            .wait()
            .unwrap();
    }
    let right = common::stored(common::producer_batch(7, 0, 1, false, 10), at, 3);
    engine.append(&tp, right, Origin::Mirror).wait().unwrap();
    engine.close().unwrap();
    common::assert_verifies(dir.path());
}

#[test]
fn unknown_partitions_bad_names_and_bad_configs() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    let nobody = TopicPartition::new("nobody", 3);
    assert!(matches!(
        engine.append(&nobody, good(0), Origin::Client).wait(),
        Err(EngineError::UnknownPartition(_))
    ));
    assert!(matches!(
        engine.state(&nobody).wait(),
        Err(EngineError::UnknownPartition(_))
    ));
    assert!(matches!(
        engine.delete_partition(&nobody).wait(),
        Err(EngineError::UnknownPartition(_))
    ));
    for bad in [
        TopicPartition::new("", 0),
        TopicPartition::new("a/b", 0),
        TopicPartition::new("ok", -1),
        TopicPartition::new("..", 0),
    ] {
        assert!(
            matches!(
                engine.create_partition(&bad, config()).wait(),
                Err(EngineError::InvalidPartition(_))
            ),
            "{bad:?}"
        );
    }
    let bad_config = PartitionConfig {
        segment_bytes: 10,
        ..PartitionConfig::default()
    };
    assert!(matches!(
        engine
            .create_partition(&TopicPartition::new("cfg", 0), bad_config)
            .wait(),
        Err(EngineError::Config { .. })
    ));
    engine.close().unwrap();
    // Nothing was created by any of it (the engine's own lock and shard journals aside).
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| {
            n != ".lock" && mirrorlog::internals::journal::shard_of(&n.to_string_lossy()).is_none()
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn calls_after_close_are_refused_with_a_typed_error() {
    // The engine's `close` consumes it: calls after close do not compile. A shard driven on
    // the caller's thread (the embedding path) can still be handed requests after its Close.
    let io = Box::new(SimIo::new(SimConfig::default()));
    let mut shard = Shard::new(
        io,
        ShardConfig {
            index: 0,
            data_dir: "/sim/closed".into(),
            queue_depth: 8,
            commit_linger_us: 0,
            ..ShardConfig::new(0, std::path::PathBuf::new())
        },
    )
    .unwrap();
    let tp = TopicPartition::new("closing", 0);
    let (reply, created) = promise();
    shard.submit(Request::Create {
        tp: tp.clone(),
        config: config(),
        reply,
    });
    created.wait().unwrap().unwrap();
    let (reply, closed) = promise();
    shard.submit(Request::Close { reply });
    assert!(closed.wait().unwrap().unwrap().is_empty());
    assert!(shard.is_closed());
    let (reply, appended) = promise();
    shard.submit(Request::Append {
        tp: tp.clone(),
        batches: good(0).into(),
        origin: Origin::Client,
        follows: None,
        reply: mirrorlog::internals::shard::AppendReply::One(reply),
    });
    let r = appended.wait().unwrap();
    assert!(
        matches!(
            r,
            Err(EngineError::UnknownPartition(_) | EngineError::ShardStopped(_))
        ),
        "{r:?}"
    );
    // A handle to a shard that is gone: the send is refused.
    let handle = shard.handle();
    drop(shard);
    let (reply, _pending) = promise();
    assert!(matches!(
        handle.send(Request::State { tp, reply }),
        Err(EngineError::ShardStopped(0))
    ));
}

#[test]
fn configuration_values_that_would_abort_are_refused() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    // A queue whose slots could not be allocated.
    assert!(matches!(
        Engine::open(
            EngineConfig::new(dir.path())
                .shards(1)
                .queue_depth(usize::MAX)
        ),
        Err(EngineError::Config {
            name: "queue_depth",
            ..
        })
    ));
    // Journal settings out of their bounds: typed errors naming the key, nothing opened.
    for bytes in [
        4096,
        (1 << 20) + 1,
        mirrorlog::engine::JOURNAL_BYTES_MAX + 4096,
        u64::MAX,
    ] {
        assert!(
            matches!(
                Engine::open(EngineConfig::new(dir.path()).shards(1).journal_bytes(bytes)),
                Err(EngineError::Config {
                    name: "journal.bytes",
                    ..
                })
            ),
            "journal.bytes {bytes}"
        );
    }
    let mut windowed = EngineConfig::new(dir.path()).shards(1);
    windowed.journal_group_window_us = mirrorlog::engine::JOURNAL_GROUP_WINDOW_US_MAX + 1;
    assert!(matches!(
        Engine::open(windowed),
        Err(EngineError::Config {
            name: "journal.group.window.us",
            ..
        })
    ));
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    // An append buffer no machine could allocate.
    let huge = PartitionConfig {
        append_buffer_bytes: usize::MAX,
        ..config()
    };
    assert!(matches!(
        engine
            .create_partition(&TopicPartition::new("huge", 0), huge)
            .wait(),
        Err(EngineError::Config {
            name: "append buffer",
            ..
        })
    ));
    engine.close().unwrap();
}

#[test]
fn a_mirror_source_the_history_cannot_hold_is_refused_and_the_partition_still_opens() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("src", 0);
    let at_records = || {
        EngineConfig::new(dir.path())
            .shards(1)
            .clock(common::records_clock())
    };
    let engine = Engine::open(at_records()).unwrap();
    engine.create_partition(&tp, config()).wait().unwrap();
    engine.append(&tp, good(0), Origin::Client).wait().unwrap();
    let before = snapshot(&engine, &tp);
    for source in ["", "east\nlocal", "a\rb", &"x".repeat(2000)] {
        let r = engine
            .start_mirroring(
                &tp,
                StartMirroring {
                    source: source.to_string(),
                    truncate_to: MirrorStart::LastStableOffset,
                },
            )
            .wait();
        assert!(
            matches!(
                r,
                Err(EngineError::Log {
                    source: LogError::InvalidMirrorSource { .. },
                    ..
                })
            ),
            "{source:?}: {r:?}"
        );
    }
    assert_eq!(snapshot(&engine, &tp), before);
    engine.close().unwrap();
    // The history on disk still decodes: the partition opens and keeps accepting appends.
    let engine = Engine::open(at_records()).unwrap();
    assert!(engine.failed_partitions().is_empty());
    assert_eq!(snapshot(&engine, &tp), before);
    engine.append(&tp, good(2), Origin::Client).wait().unwrap();
    engine.close().unwrap();
}

#[test]
fn a_data_directory_of_another_cluster_is_refused() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("orders", 0);
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).cluster_id("east")).unwrap();
    engine.create_partition(&tp, config()).wait().unwrap();
    engine.append(&tp, good(0), Origin::Client).wait().unwrap();
    engine.close().unwrap();
    match Engine::open(EngineConfig::new(dir.path()).shards(1).cluster_id("west")) {
        Err(EngineError::ClusterIdMismatch {
            stored, configured, ..
        }) => assert_eq!((stored.as_str(), configured.as_str()), ("east", "west")),
        other => panic!("{other:?}"),
    }
    // Without an id the engine adopts the stored one; with the same id it opens as before.
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1)).unwrap();
    assert_eq!(engine.config().cluster_id, "east");
    assert_eq!(engine.state(&tp).wait().unwrap().log_end, Offset(2));
    engine.close().unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path()).shards(1).cluster_id("east")).unwrap();
    engine.close().unwrap();
    // A cluster id with a line break could not be stored: refused.
    let other = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    assert!(matches!(
        Engine::open(EngineConfig::new(other.path()).shards(1).cluster_id("a\nb")),
        Err(EngineError::Config {
            name: "cluster.id",
            ..
        })
    ));
}

#[test]
fn a_damaged_length_in_a_sealed_segment_is_corrupt_not_a_huge_allocation() {
    use mirrorlog::internals::log::{Isolation, PartitionLog};
    let mut io = SimIo::new(SimConfig::default());
    let dir = std::path::Path::new("/sim/len-0");
    let mut log =
        PartitionLog::create(&mut io, dir, common::log_config(16 << 10, 1024, 16 << 10)).unwrap();
    for seq in (0..60).step_by(2) {
        log.append(
            &mut io,
            &common::producer_batch(1, seq, 2, false, 400),
            Origin::Client,
        )
        .unwrap();
    }
    log.commit(&mut io).unwrap();
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 2, "a sealed segment");
    // The first batch's length field (bytes 8..12) says almost 2 GiB.
    let path = mirrorlog::internals::segment::log_path(dir, bases[0]);
    io.damage(&path, 8, &0x7fff_fff0u32.to_be_bytes());
    match log.read(&mut io, bases[0], 1 << 20, Isolation::ReadUncommitted) {
        Err(LogError::Corrupt { file, what }) => {
            assert_eq!(file, path);
            assert!(what.contains("position 0"), "{what}");
        }
        other => panic!("{other:?}"),
    }
}
