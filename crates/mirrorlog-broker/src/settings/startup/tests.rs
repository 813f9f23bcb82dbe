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
        &["--set", "metrics.enabled=yes"],
        &["--set", "metrics.require.token=1"],
    ] {
        assert!(BrokerConfig::from_args(&args(bad)).is_err(), "{bad:?}");
    }
}

fn run(a: &[&str]) -> BrokerConfig {
    match BrokerConfig::from_args(&args(a)) {
        Ok(Command::Run(c)) => *c,
        Ok(_) => panic!("expected a run"),
        Err(e) => panic!("{a:?}: {e}"),
    }
}

fn kafka_file(name: &str) -> String {
    format!(
        "{}/../../testdata/kafka-config/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn kafkas_stock_kraft_file_starts_with_what_is_not_served_listed() {
    let c = run(&["--config", &kafka_file("server.properties")]);
    assert_eq!(c.node_id, 1);
    // `PLAINTEXT://:9092` listens on every interface; the controller listener is not served.
    let plan = c.listener_plan().unwrap();
    assert_eq!(plan.len(), 1, "{plan:?}");
    assert_eq!(plan[0].1, "PLAINTEXT");
    assert_eq!(plan[0].0.addr, "0.0.0.0:9092".parse().unwrap());
    assert_eq!(c.controller_listeners, ["CONTROLLER"]);
    // 168 hours, as retention.ms; Kafka's broker names of topic configs as before.
    assert_eq!(c.topic_defaults.retention_ms, Some(168 * 3_600_000));
    assert_eq!(c.topic_defaults.segment_bytes, 1 << 30);
    assert_eq!(c.retention_check_interval_ms, 300_000);
    assert!(c.given.contains("retention.ms"));
    for key in [
        "process.roles",
        "controller.quorum.bootstrap.servers",
        "controller.listener.names",
        "inter.broker.listener.name",
        "num.network.threads",
        "num.io.threads",
        "num.recovery.threads.per.data.dir",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "offsets.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    ] {
        assert!(c.not_served.contains_key(key), "{key} not listed");
        assert!(
            crate::settings::describe_not_served(key).contains("not in effect"),
            "{key}"
        );
    }
    assert_eq!(c.not_served["process.roles"], "broker,controller");
    // What is served is not listed as not served.
    assert!(!c.not_served.contains_key("log.retention.hours"));
    assert!(!c.not_served.contains_key("num.partitions"));
}

#[test]
fn kafkas_stock_zookeeper_file_starts_with_broker_id_as_node_id() {
    let c = run(&["--config", &kafka_file("server-zookeeper.properties")]);
    assert_eq!(c.node_id, 0);
    assert_eq!(c.group_limits.initial_rebalance_delay_ms, 0);
    assert_eq!(c.topic_defaults.retention_ms, Some(168 * 3_600_000));
    assert!(c.not_served.contains_key("zookeeper.connect"));
    assert!(c.not_served.contains_key("zookeeper.connection.timeout.ms"));
    // No listeners line: the default one.
    assert_eq!(c.listener_plan().unwrap().len(), 1);
}

#[test]
fn the_finer_time_unit_wins_within_a_layer_and_flags_win_over_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("server.properties");
    // ms before hours in the file: ms still wins, as in Kafka.
    std::fs::write(
        &file,
        "log.retention.ms=5000\nlog.retention.hours=1\nlog.roll.hours=2\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let c = run(&["--config", f]);
    assert_eq!(c.topic_defaults.retention_ms, Some(5000));
    assert_eq!(c.topic_defaults.segment_ms, Some(2 * 3_600_000));
    let c = run(&[
        "--set",
        "log.retention.minutes=3",
        "--set",
        "log.retention.hours=1",
    ]);
    assert_eq!(c.topic_defaults.retention_ms, Some(180_000));
    // The flags are a later layer: their hours win over the file's ms.
    let c = run(&["--config", f, "--set", "log.retention.hours=1"]);
    assert_eq!(c.topic_defaults.retention_ms, Some(3_600_000));
    // -1 hours is unlimited, as in Kafka.
    let c = run(&["--set", "log.retention.hours=-1"]);
    assert_eq!(c.topic_defaults.retention_ms, None);
}

#[test]
fn kafkas_keys_not_served_are_still_checked_and_typos_refused() {
    assert!(matches!(
        BrokerConfig::from_args(&args(&["--version"])),
        Ok(Command::Version)
    ));
    let c = run(&["--set", "broker.id=7", "--set", "node.id=7"]);
    assert_eq!(c.node_id, 7);
    for bad in [
        // broker.id and node.id must agree when both are given.
        &["--set", "broker.id=1", "--set", "node.id=2"][..],
        // Kafka's types: an INT setting that is no number.
        &["--set", "num.io.threads=eight"],
        &["--set", "socket.send.buffer.bytes=big"],
        &["--set", "zookeeper.session.timeout.ms=1.5"],
        // A name neither Kafka's nor ours.
        &["--set", "num.netwrok.threads=3"],
        // Coarser units out of Kafka's range.
        &["--set", "log.retention.hours=-2"],
        &["--set", "log.retention.minutes=1.5"],
        &["--set", "log.retention.check.interval.ms=0"],
        // Only controller listeners.
        &[
            "--set",
            "listeners=CONTROLLER://127.0.0.1:9093",
            "--set",
            "controller.listener.names=CONTROLLER",
            "--set",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
        ],
    ] {
        assert!(BrokerConfig::from_args(&args(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn metrics_settings_default_to_counted_and_open_and_are_read() {
    let c = run(&[]);
    assert!(c.metrics_enabled && !c.metrics_require_token);
    let c = run(&[
        "--set",
        "metrics.enabled=false",
        "--set",
        "metrics.require.token=true",
    ]);
    assert!(!c.metrics_enabled && c.metrics_require_token);
}
