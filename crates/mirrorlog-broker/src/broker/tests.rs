//! The broker's start-up and its repairs, on a data directory of its own.

use super::*;
use crate::coordinator::groups::records::{Key, OffsetValue};

fn config(dir: &std::path::Path) -> BrokerConfig {
    BrokerConfig {
        data_dir: dir.to_path_buf(),
        shards: Some(1),
        journal_bytes: 0,
        offsets_topic_partitions: 2,
        ..BrokerConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_expire_after_their_retention_durably() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::open(config(dir.path())).unwrap();
    b.repair().await;
    b.create_topic("t", 1, Default::default(), None)
        .await
        .unwrap();
    let now = crate::coordinator::transactions::now_ms();
    let commit = |group: &str, at: i64| {
        (
            Key::Offset {
                group: group.into(),
                topic: "t".into(),
                partition: 0,
            },
            Some(OffsetValue {
                offset: 5,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: at,
            }),
        )
    };
    for (group, at) in [("old", now - 1000), ("new", now)] {
        let tp = b.offsets_partition(group).await.unwrap();
        b.groups
            .write(&b.engine, &tp, vec![commit(group, at)], at)
            .await
            .unwrap();
    }
    let retention = b.config.offsets_retention_ms;
    // One millisecond short of the old commit's retention: nothing goes.
    b.expire_group_offsets(now - 1000 + retention - 1).await;
    assert_eq!(b.groups.list(), vec!["new".to_string(), "old".to_string()]);
    b.expire_group_offsets(now - 1000 + retention).await;
    assert_eq!(b.groups.list(), vec!["new".to_string()]);
    drop(b);
    // The tombstone is durable: read back at start-up, the old group stays gone.
    let b = Broker::open(config(dir.path())).unwrap();
    b.repair().await;
    b.load_groups().await;
    assert_eq!(b.groups.list(), vec!["new".to_string()]);
    assert_eq!(b.groups.fetch("new")[&("t".to_string(), 0)].offset, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactions_offsets_are_the_groups_at_commit_gone_at_abort_and_so_when_loaded() {
    use mirrorlog::engine::{Origin, TopicPartition};
    use mirrorlog::format::{build_marker, MarkerSpec, Offset};
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::open(config(dir.path())).unwrap();
    b.repair().await;
    b.create_topic("t", 2, Default::default(), None)
        .await
        .unwrap();
    let tp = b.offsets_partition("g").await.unwrap();
    let offset = |partition: i32, offset: i64| {
        (
            Key::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition,
            },
            OffsetValue {
                offset,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: 1,
            },
        )
    };
    let marker = |pid: i64, commit: bool| {
        bytes::Bytes::from(build_marker(&MarkerSpec {
            base_offset: Offset(0),
            partition_leader_epoch: 0,
            producer_id: pid,
            producer_epoch: 0,
            commit,
            coordinator_epoch: 0,
            timestamp: 1,
        }))
    };
    let end = |pid: i64, commit: bool| {
        let (b, tp) = (&b, &tp);
        async move {
            b.engine
                .append(tp, marker(pid, commit), Origin::Coordinator)
                .await
                .unwrap();
            b.groups.complete_txn(tp.partition, pid, commit).unwrap();
        }
    };
    // Producer 7 commits partition 0 at 5; producer 8 aborts partition 1 at 9; producer 9
    // leaves partition 1 at 3 open.
    for (pid, (p, o)) in [(7, (0, 5)), (8, (1, 9)), (9, (1, 3))] {
        b.groups
            .write_txn(&b.engine, &tp, (pid, 0), vec![offset(p, o)], 1)
            .await
            .unwrap();
    }
    assert!(
        b.groups.fetch("g").is_empty(),
        "pending offsets are not the group's"
    );
    assert!(b.groups.has_pending("g", "t", 0) && b.groups.has_pending("g", "t", 1));
    end(7, true).await;
    end(8, false).await;
    let committed = |b: &Broker| {
        b.groups
            .fetch("g")
            .into_iter()
            .map(|((_, p), v)| (p, v.offset))
            .collect::<Vec<_>>()
    };
    assert_eq!(committed(&b), vec![(0, 5)]);
    assert!(!b.groups.has_pending("g", "t", 0));
    assert!(
        b.groups.has_pending("g", "t", 1),
        "producer 9's is still open"
    );
    drop(b);
    // Loaded from the log: the same, producer 9's still pending until its marker.
    let b = Broker::open(config(dir.path())).unwrap();
    b.repair().await;
    b.load_groups().await;
    assert_eq!(committed(&b), vec![(0, 5)]);
    assert!(b.groups.has_pending("g", "t", 1));
    let tp = TopicPartition::new(crate::coordinator::groups::OFFSETS_TOPIC, tp.partition);
    b.engine
        .append(&tp, marker(9, true), Origin::Coordinator)
        .await
        .unwrap();
    b.groups.complete_txn(tp.partition, 9, true).unwrap();
    assert_eq!(committed(&b), vec![(0, 5), (1, 3)]);
}
