//! `Engine::update_config` takes effect live and keeps what was written: a raised
//! `max.message.bytes` (with the append buffer that holds a batch whole) admits a batch larger
//! than the active segment's old buffer at once, not from the next segment on; and once the
//! settings are lowered again, a reopen's recovery keeps that batch (acknowledged data written
//! under the old settings is not damage).

mod common;

use mirrorlog::api::Origin;
use mirrorlog::engine::{Engine, EngineConfig, EngineError, PartitionConfig, TopicPartition};
use mirrorlog::format::Offset;

fn open(dir: &std::path::Path) -> Engine {
    Engine::open(
        EngineConfig::new(dir)
            .shards(1)
            .pin_threads(false)
            .clock(common::records_clock()),
    )
    .unwrap()
}

#[test]
fn a_raised_max_message_bytes_admits_a_larger_batch_at_once_and_a_lowered_one_keeps_it() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let tp = TopicPartition::new("grown", 0);
    let small = PartitionConfig {
        segment_bytes: 64 << 20,
        max_message_bytes: 1 << 20,
        append_buffer_bytes: 1 << 20,
        ..PartitionConfig::default()
    };
    let engine = open(dir.path());
    engine.create_partition(&tp, small).wait().unwrap();
    // Something in the active segment first, so that a roll is not what makes room.
    engine
        .append(
            &tp,
            common::producer_batch(1, 0, 2, false, 100),
            Origin::Client,
        )
        .wait()
        .unwrap();
    let large = common::producer_batch(1, 2, 3, false, 1 << 20);
    assert!(large.len() > 3 << 20);
    assert!(matches!(
        engine.append(&tp, large.clone(), Origin::Client).wait(),
        Err(EngineError::MessageTooLarge { .. })
    ));
    let raised = PartitionConfig {
        max_message_bytes: 4 << 20,
        append_buffer_bytes: 4 << 20,
        ..small
    };
    engine.update_config(&tp, raised).wait().unwrap();
    let out = engine
        .append(&tp, large.clone(), Origin::Client)
        .wait()
        .unwrap();
    assert_eq!((out.first_offset, out.last_offset), (Offset(2), Offset(4)));
    let before = engine.state(&tp).wait().unwrap();
    // Lowered again: the batch written under the raised settings is kept by recovery.
    engine.update_config(&tp, small).wait().unwrap();
    let bytes = common::engine_bytes(&engine, &tp, Offset(0), before.log_end);
    engine.close().unwrap();
    // An unclean reopen (the partition's clean-shutdown marker removed) scans the active
    // segment.
    let marker = dir.path().join("grown-0").join("clean-shutdown");
    std::fs::remove_file(&marker).unwrap();
    let engine = open(dir.path());
    let after = engine.state(&tp).wait().unwrap();
    assert_eq!(after.log_end, before.log_end, "nothing lost");
    assert_eq!(
        common::engine_bytes(&engine, &tp, Offset(0), after.log_end),
        bytes
    );
    engine.close().unwrap();
}
