//! KIP-1279's group offset sync, `mirrorlog-broker` on both sides: a mirror reads the
//! source's committed offsets for its topics every `group_sync_ms` and commits them at the
//! destination, clamped to the destination's log, so a group resumes there after a failover.
//!
//! - An offset committed at the source shows at the destination within a few intervals, and a
//!   later commit replaces it.
//! - An offset past the destination's high watermark is clamped to it.
//! - Offsets of topics the mirror does not carry are not synced.
//! - A group with a member at the destination (active there) is skipped, and shown so.
//! - `GET /mirrors` shows each group's sync; after the failover the synced offsets are the
//!   group's, and a consumer of the group resumes there; after the failback the group's newer
//!   offsets flow back to the first cluster.
//! - A librdkafka group consumer (`subscribe()`) resumes after a failover and a failback at
//!   its synced offsets, nothing skipped or read twice (`group_failover.py`).

mod broker_support;

use broker_support::clients::start_mirror_with;
use broker_support::members::{join, sync};
use broker_support::requests::{
    batch, commit, create_topic, fetch, fetch_offsets, http_get, http_post, produce,
};
use broker_support::BrokerProc;
use mirrorlog::format::ProducerFields;
use std::time::{Duration, Instant};

fn mirrors(b: &BrokerProc) -> serde_json::Value {
    let answer = http_get(b, "/mirrors");
    serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

/// Waits until `group`'s committed offset of `topic`-0 at `b` is `want`.
fn wait_offset(b: &BrokerProc, group: &str, topic: &str, want: i64) {
    let mut c = b.connect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = fetch_offsets(&mut c, group, topic, 1)[0].0;
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{group}: {got} at the destination, not {want}; {}",
            mirrors(b)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn committed_offsets_follow_the_mirror_clamped_and_resume_after_failover() {
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let src = BrokerProc::start(dirs.0.path(), &["--set", "offsets.topic.num.partitions=3"]);
    let dst = BrokerProc::start(
        dirs.1.path(),
        &[
            "--set",
            "offsets.topic.num.partitions=3",
            "--set",
            "group.initial.rebalance.delay.ms=0",
        ],
    );
    let mut s = src.connect();
    create_topic(&mut s, "t", 1, &[]);
    create_topic(&mut s, "unmirrored", 1, &[]);
    for n in 0..10u8 {
        let value = [b'0' + n];
        assert_eq!(
            produce(&mut s, "t", batch(ProducerFields::NONE, &[&value]), -1).0,
            0
        );
    }
    assert_eq!(commit(&mut s, 8, "app", -1, &[("t", 0, 4, "")]), vec![0]);
    // Past the source's own end (Kafka does not check committed offsets).
    assert_eq!(
        commit(&mut s, 8, "ahead", -1, &[("t", 0, 1000, "")]),
        vec![0]
    );
    assert_eq!(
        commit(&mut s, 8, "elsewhere", -1, &[("unmirrored", 0, 0, "")]),
        vec![0]
    );
    assert_eq!(commit(&mut s, 8, "busy", -1, &[("t", 0, 3, "")]), vec![0]);

    // "busy" has a member at the destination: it is active there, and never overwritten.
    let mut d = dst.connect();
    let first = join(&mut d, "busy", "", None, 120_000, "range");
    let j = join(&mut d, "busy", &first.member_id, None, 120_000, "range");
    assert_eq!(j.error, 0);
    assert_eq!(sync(&mut d, "busy", &j.member_id, j.generation, &[]).0, 0);
    start_mirror_with(
        &dst,
        serde_json::json!({"name": "src", "bootstrap": src.kafka, "topics": ["t"],
                           "group_sync_ms": 200}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while fetch(&mut d, "t", 0, 100).1 != 10 {
        assert!(Instant::now() < deadline, "the mirror did not catch up");
    }
    wait_offset(&dst, "app", "t", 4);
    // Clamped to the destination's high watermark.
    wait_offset(&dst, "ahead", "t", 10);
    // A later commit at the source replaces the synced one.
    assert_eq!(commit(&mut s, 8, "app", -1, &[("t", 0, 7, "")]), vec![0]);
    wait_offset(&dst, "app", "t", 7);
    assert_eq!(fetch_offsets(&mut d, "elsewhere", "unmirrored", 1)[0].0, -1);

    let status = mirrors(&dst);
    let groups = status["mirrors"][0]["groups"].as_array().unwrap().clone();
    let app = groups.iter().find(|g| g["group"] == "app").unwrap();
    assert!(app["offsets_synced"].as_u64().unwrap() >= 2, "{status}");
    assert!(app["synced_at_ms"].as_u64().is_some(), "{status}");
    assert!(
        !groups.iter().any(|g| g["group"] == "elsewhere"),
        "{status}"
    );
    let busy = groups.iter().find(|g| g["group"] == "busy").unwrap();
    assert_eq!(busy["skipped_active"], true, "{status}");
    assert_eq!(busy["offsets_synced"], 0, "{status}");
    assert_eq!(fetch_offsets(&mut d, "busy", "t", 1)[0].0, -1);

    // Failover: the synced offsets are the group's; its consumer resumes at 7.
    assert!(http_post(&dst, "/mirrors/src/stop", "").starts_with("HTTP/1.1 200"));
    let at = fetch_offsets(&mut d, "app", "t", 1)[0].0;
    assert_eq!(at, 7);
    // The stop's barrier batch is offset 10 (design.md §Mirroring).
    let (code, hw, records) = fetch(&mut d, "t", at, 0);
    assert_eq!((code, hw), (0, 11));
    assert!(!records.is_empty());

    // The group goes on at the destination; then failback: the source mirrors the destination,
    // and the offsets flow the other way.
    assert_eq!(commit(&mut d, 8, "app", -1, &[("t", 0, 9, "")]), vec![0]);
    start_mirror_with(
        &src,
        serde_json::json!({"name": "back", "bootstrap": dst.kafka, "topics": ["t"],
                           "group_sync_ms": 200}),
    );
    wait_offset(&src, "app", "t", 9);
}

#[test]
fn a_librdkafka_group_resumes_after_failover_and_failback_at_its_synced_offsets() {
    let out = broker_support::run_script("group_failover.py", &[], &[]);
    for line in [
        "ok after the failover the group resumed on B at its committed offsets: nothing skipped, nothing read twice",
        "ok after the failback the group resumed on A at what it committed on B",
        "group_failover: ok",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}
