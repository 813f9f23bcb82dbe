//! The start-up settings' tests: flags over the file, Kafka's names, the authorizer, typed errors.
use super::*;

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn flags_win_over_the_file_and_topic_defaults_use_kafka_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broker.properties");
    std::fs::write(
        &file,
        "# comment\nlisteners=PLAINTEXT://localhost:19092\nnum.partitions=3\nsegment.bytes=1048576\nretention.ms=-1\n",
    )
    .unwrap();
    let Command::Run(c) = BrokerConfig::from_args(&args(&[
        "--config",
        file.to_str().unwrap(),
        "--listen",
        "127.0.0.1:19093",
        "--set",
        "max.message.bytes=2000000",
    ]))
    .unwrap() else {
        panic!("expected a run")
    };
    assert_eq!(c.listen.port(), 19093);
    assert_eq!(c.num_partitions, 3);
    assert_eq!(c.topic_defaults.segment_bytes, 1 << 20);
    assert_eq!(c.topic_defaults.retention_ms, None);
    assert_eq!(c.topic_defaults.max_message_bytes, 2_000_000);
    assert_eq!(c.advertised_host, "");
    let Command::Run(c) = BrokerConfig::from_args(&args(&[
        "--listen",
        "0.0.0.0:19094",
        "--advertised-host",
        "broker-1.example",
    ]))
    .unwrap() else {
        panic!("expected a run")
    };
    assert_eq!(c.advertised_host, "broker-1.example");
    let Command::Run(c) = BrokerConfig::from_args(&args(&[
        "--set",
        "listeners=INTERNAL://127.0.0.1:19095,EXTERNAL://0.0.0.0:19096",
        "--set",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "--set",
        "advertised.listeners=EXTERNAL://broker-1.example:29096",
    ]))
    .unwrap() else {
        panic!("expected a run")
    };
    let plan = c.listener_plan().unwrap();
    assert_eq!(plan.len(), 2);
    assert_eq!(
        (plan[1].1.as_str(), plan[1].2),
        ("EXTERNAL", Protocol::Plaintext)
    );
    assert_eq!(c.listen.port(), 19095);
    let Command::Run(c) = BrokerConfig::from_args(&args(&[
        "--set",
        "journal.bytes=0",
        "--set",
        "journal.group.window.us=2000",
    ]))
    .unwrap() else {
        panic!("expected a run")
    };
    assert_eq!((c.journal_bytes, c.journal_group_window_us), (0, 2000));
}

#[test]
fn the_authorizer_takes_kafkas_class_names_and_settings() {
    let Command::Run(c) = BrokerConfig::from_args(&args(&[
        "--set",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--set",
        "super.users=User:admin; User:ops",
        "--set",
        "allow.everyone.if.no.acl.found=true",
        "--set",
        "queued.max.requests=7",
    ]))
    .unwrap() else {
        panic!()
    };
    assert!(c.authorizer);
    assert_eq!(c.acl.super_users, vec!["User:admin", "User:ops"]);
    assert!(c.acl.allow_if_no_acl);
    assert_eq!(c.queued_max_requests, 7);
    let Command::Run(d) = BrokerConfig::from_args(&[]).unwrap() else {
        panic!()
    };
    assert!(!d.authorizer && !d.acl.allow_if_no_acl);
    assert_eq!(d.queued_max_requests, 500);
}

#[test]
fn bad_values_are_typed_errors_naming_the_key() {
    for bad in [
        &["--node-id", "-3"][..],
        &["--listen", "nowhere"],
        &["--set", "segment.bytes=12"],
        &["--set", "num.partitions=x"],
        &["--set", "no.such.key=1"],
        // The journal: a page multiple in [1 MiB, 64 GiB], or 0; a window of at most 100 ms.
        &["--set", "journal.bytes=4096"],
        &["--set", "journal.bytes=1048577"],
        &["--set", "journal.bytes=-1"],
        &["--set", "journal.group.window.us=100001"],
        &["--bogus", "1"],
        &["--data-dir"],
        // Kafka: advertised.listeners cannot use the non-routable meta-address.
        &["--listen", "0.0.0.0:9092"],
        &["--listen", "[::]:9092"],
        &["--listen", "127.0.0.1:9092", "--advertised-host", "0.0.0.0"],
        // Named listeners: an unspecified address without its advertised one; TLS or SASL
        // without their settings; a name that is no protocol and not mapped.
        &["--set", "listeners=PLAINTEXT://0.0.0.0:9092"],
        &["--set", "listeners=SSL://127.0.0.1:9093"],
        &["--set", "listeners=SASL_PLAINTEXT://127.0.0.1:9093"],
        &["--set", "listeners=INTERNAL://127.0.0.1:9093"],
        &["--set", "advertised.listeners=PLAINTEXT://host"],
        // Request queue and authorizer settings.
        &["--set", "queued.max.requests=0"],
        &["--set", "queued.max.requests=many"],
        &["--set", "authorizer.class.name=com.example.MyAuthorizer"],
        &["--set", "super.users=admin"],
        &["--set", "super.users=User:"],
        &["--set", "allow.everyone.if.no.acl.found=yes"],
    ] {
        assert!(BrokerConfig::from_args(&args(bad)).is_err(), "{bad:?}");
    }
}
