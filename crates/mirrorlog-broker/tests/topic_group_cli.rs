//! The topic and group command lines (`mirrorlog-broker topics ...`, `groups ...`) against a
//! running broker over its Kafka listener, as `kafka-topics.sh`, `kafka-configs.sh` and
//! `kafka-consumer-groups.sh` are used: a topic created with configs, listed, described with
//! its partitions' ends and the configs set on it, altered (set and put back), deleted; a
//! group's committed offsets described with the lag to the log end; exit codes a script can
//! use (0 done, 1 refused, 2 usage, 3 no answer).

mod broker_support;

use broker_support::requests::{batch, commit, produce};
use broker_support::BrokerProc;
use mirrorlog::format::ProducerFields;
use serde_json::Value;

/// Runs `mirrorlog-broker WHAT ARGS.. --bootstrap B`: (exit code, stdout, stderr).
fn cli(b: &BrokerProc, what: &str, args: &[&str]) -> (i32, String, String) {
    let tail = ["--bootstrap", b.kafka.as_str()];
    broker_support::run_cli([what].iter().chain(args).chain(&tail))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn topics_are_created_described_altered_and_deleted_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let (code, out, err) = cli(
        &b,
        "topics",
        &[
            "create",
            "orders",
            "--partitions",
            "3",
            "--config",
            "retention.ms=86400000",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "orders: created with 3 partitions");
    // Made twice: Kafka's TOPIC_ALREADY_EXISTS, exit 1.
    let (code, _, err) = cli(&b, "topics", &["create", "orders"]);
    assert_eq!(code, 1);
    assert!(err.contains("TOPIC_ALREADY_EXISTS"), "{err}");

    let (code, out, _) = cli(&b, "topics", &["list", "--json"]);
    assert_eq!(code, 0);
    let listed = json(&out);
    let orders = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == "orders")
        .expect("orders listed");
    assert_eq!(orders["partitions"], 3);

    // Two records on partition 0 (the helper writes there): its end is 2.
    let mut c = b.connect();
    for _ in 0..2 {
        assert_eq!(
            produce(&mut c, "orders", batch(ProducerFields::NONE, &[b"x"]), -1).0,
            0
        );
    }
    let (code, out, _) = cli(&b, "topics", &["describe", "orders", "--json"]);
    assert_eq!(code, 0);
    let d = json(&out);
    assert_eq!(d["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(d["partitions"][0]["log_end"], 2, "{d}");
    assert_eq!(d["partitions"][1]["log_end"], 0, "{d}");
    assert_eq!(d["configs"]["retention.ms"], "86400000", "{d}");
    let (code, out, _) = cli(&b, "topics", &["describe", "orders"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("PARTITION"), "{out}");
    assert!(out.contains("retention.ms=86400000"), "{out}");

    // Set one config, put another back to its default.
    let (code, out, err) = cli(
        &b,
        "topics",
        &[
            "alter",
            "orders",
            "--set",
            "cleanup.policy=compact",
            "--delete",
            "retention.ms",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "orders: 1 set, 1 put back to default");
    let d = json(&cli(&b, "topics", &["describe", "orders", "--json"]).1);
    assert_eq!(d["configs"]["cleanup.policy"], "compact", "{d}");
    assert!(d["configs"].get("retention.ms").is_none(), "{d}");
    // A value out of Kafka's bounds is refused with its code.
    let (code, _, err) = cli(
        &b,
        "topics",
        &["alter", "orders", "--set", "segment.bytes=12"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("INVALID_CONFIG"), "{err}");
    // Nothing to alter, or a pair without '=': usage.
    assert_eq!(cli(&b, "topics", &["alter", "orders"]).0, 2);
    assert_eq!(cli(&b, "topics", &["alter", "orders", "--set", "x"]).0, 2);

    let (code, out, _) = cli(&b, "topics", &["delete", "orders"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "orders: deleted");
    let (code, _, err) = cli(&b, "topics", &["describe", "orders"]);
    assert_eq!(code, 1);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{err}");
    assert!(b.terminate().success());
}

#[test]
fn a_groups_lag_per_partition_and_the_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    broker_support::requests::create_topic(&mut c, "events", 1, &[]);
    for _ in 0..5 {
        assert_eq!(
            produce(&mut c, "events", batch(ProducerFields::NONE, &[b"e"]), -1).0,
            0
        );
    }
    // A group that committed offset 3 of the 5 records: lag 2.
    assert_eq!(
        commit(&mut c, 8, "readers", -1, &[("events", 0, 3, "")]),
        vec![0]
    );

    let (code, out, _) = cli(&b, "groups", &["list", "--json"]);
    assert_eq!(code, 0);
    let groups = json(&out);
    assert!(
        groups
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["group"] == "readers"),
        "{groups}"
    );
    let (code, out, _) = cli(&b, "groups", &["describe", "readers", "--json"]);
    assert_eq!(code, 0);
    let d = json(&out);
    let p = &d["partitions"][0];
    assert_eq!(p["topic"], "events", "{d}");
    assert_eq!(p["committed"], 3, "{d}");
    assert_eq!(p["log_end"], 5, "{d}");
    assert_eq!(p["lag"], 2, "{d}");
    let (code, out, _) = cli(&b, "groups", &["describe", "readers"]);
    assert_eq!(code, 0);
    let row = out
        .lines()
        .find(|l| l.starts_with("events"))
        .expect("a partition row");
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols, ["events", "0", "3", "5", "2"], "{out}");

    // Usage errors are 2; a broker that does not answer is 3.
    let (code, _, _) = cli(&b, "groups", &["frobnicate"]);
    assert_eq!(code, 2);
    let port = b.kafka.rsplit(':').next().unwrap().to_string();
    assert!(b.terminate().success());
    let gone = format!("127.0.0.1:{port}");
    let (code, _, err) = broker_support::run_cli(["groups", "list", "--bootstrap", &gone]);
    assert_eq!(code, 3, "{err}");
}
