//! `POST /mirrors` never truncates a partition that was not mirrored from or to its source
//! without being told to (issue 36): a local topic that only shares a name with the source's
//! is refused with the reason, `dry_run` answers what each partition would lose and changes
//! nothing, and `force` then truncates exactly there. A failback (the topic's id is the
//! source's, as a mirrored topic takes it) needs no force: the topology suites run those. A
//! start that fails at one partition returns the ones it switched to local mode (a test hook
//! makes the failure).

mod broker_support;

use broker_support::requests::{batch, create_topic, fetch, http_get, http_post, produce};
use broker_support::BrokerProc;
use mirrorlog::format::ProducerFields;
use serde_json::Value;
use std::time::{Duration, Instant};

fn body(answer: &str) -> Value {
    serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap()
}

fn status(answer: &str) -> u16 {
    answer.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_topic_that_only_shares_a_name_is_not_truncated_without_force_and_dry_run_says_where() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = BrokerProc::start(da.path(), &[]);
    let b = BrokerProc::start(db.path(), &[]);
    let (mut ca, mut cb) = (a.connect(), b.connect());
    create_topic(&mut ca, "orders", 1, &[]);
    create_topic(&mut cb, "orders", 1, &[]);
    let five: Vec<&[u8]> = vec![b"a"; 5];
    let eight: Vec<&[u8]> = vec![b"local"; 8];
    assert_eq!(
        produce(&mut ca, "orders", batch(ProducerFields::NONE, &five), -1).0,
        0
    );
    assert_eq!(
        produce(&mut cb, "orders", batch(ProducerFields::NONE, &eight), -1).0,
        0
    );
    let start = |extra: &str| {
        http_post(
            &b,
            "/mirrors",
            &format!(
                r#"{{"name":"a","bootstrap":"{}","topics":["orders"]{extra}}}"#,
                a.kafka
            ),
        )
    };

    // Refused, with the partition, what it would lose and why.
    let refused = start("");
    assert_eq!(status(&refused), 409, "{refused}");
    let why = body(&refused)["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("orders-0 would lose 3 offsets") && why.contains("not the source's"),
        "{why}"
    );

    // dry_run: the plan, and nothing changed.
    let dry = body(&start(r#","dry_run":true"#));
    let part = &dry["partitions"][0];
    assert_eq!(part["log_end"], 8, "{dry}");
    assert_eq!(part["loses"], 3, "{dry}");
    assert_eq!(part["truncate_to"], 5, "{dry}");
    assert!(part["unrelated"].as_str().unwrap().contains("id"), "{dry}");
    let topics = body(&http_get(&b, "/topics"));
    let p0 = &topics["topics"][0]["partitions"][0];
    assert_eq!(
        (p0["log_end"].as_i64(), p0["mode"].as_str()),
        (Some(8), Some("local"))
    );
    assert!(body(&http_get(&b, "/mirrors"))["mirrors"]
        .as_array()
        .unwrap()
        .is_empty());

    // force: truncated exactly where dry_run said, then mirrored.
    let forced = start(r#","force":true"#);
    assert_eq!(status(&forced), 200, "{forced}");
    assert_eq!(body(&forced)["started"][0]["from"], part["truncate_to"]);
    assert_eq!(
        produce(&mut ca, "orders", batch(ProducerFields::NONE, &[b"b"]), -1).1,
        5
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, hw, _) = fetch(&mut cb, "orders", 0, 100);
        if code == 0 && hw == 6 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the forced mirror did not catch up: {code} {hw}"
        );
    }
}

#[test]
fn a_start_failing_at_one_partition_returns_the_others_to_local_mode() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = BrokerProc::start(da.path(), &[]);
    let b = BrokerProc::start_with_env(
        db.path(),
        "127.0.0.1:0",
        "127.0.0.1:0",
        &[],
        &[
            ("MIRRORLOG_BROKER_TEST_HOOKS", "1"),
            ("MIRRORLOG_BROKER_FAIL_START_AT", "orders-2"),
        ],
    );
    let (mut ca, mut cb) = (a.connect(), b.connect());
    create_topic(&mut ca, "orders", 3, &[]);
    create_topic(&mut cb, "orders", 3, &[]);
    let answer = http_post(
        &b,
        "/mirrors",
        &format!(
            r#"{{"name":"a","bootstrap":"{}","topics":["orders"]}}"#,
            a.kafka
        ),
    );
    assert_eq!(status(&answer), 500, "{answer}");
    let why = body(&answer)["error"].as_str().unwrap().to_string();
    assert!(
        why.contains("orders-2") && why.contains("the 2 partitions this start switched"),
        "{why}"
    );
    // Every partition is local (writable) again, and no mirror was recorded.
    let topics = body(&http_get(&b, "/topics"));
    let modes: Vec<&str> = topics["topics"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["local", "local", "local"]);
    assert_eq!(
        produce(
            &mut cb,
            "orders",
            batch(ProducerFields::NONE, &[b"mine"]),
            -1
        )
        .0,
        0,
        "orders-0 takes writes again"
    );
    assert!(body(&http_get(&b, "/mirrors"))["mirrors"]
        .as_array()
        .unwrap()
        .is_empty());
}
