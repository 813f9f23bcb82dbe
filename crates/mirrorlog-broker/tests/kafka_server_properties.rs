//! A stock `server.properties` from Kafka's distribution starts the broker
//! (`testdata/kafka-config/server.properties`, Kafka 4.x's KRaft file, its ports changed to
//! free ones and its `log.dirs` overridden by `--data-dir`):
//! - the broker serves the PLAINTEXT listener on every interface and advertises
//!   `localhost`, and not the controller listener;
//! - the settings it does not serve are logged at start, one line each, and DescribeConfigs
//!   shows them read-only, as given, with why they are not in effect;
//! - `log.retention.hours=168` is in effect as `log.retention.ms` (604800000);
//! - records go in and come back.

mod broker_support;

use broker_support::requests::{create_topic, describe_configs, fetch, metadata, produce};
use broker_support::BrokerProc;
use kafka_protocol::messages::ResponseKind;
use mirrorlog::format::{BatchBuilder, BatchOptions, RecordSpec};
use mirrorlog_broker::settings::Command;
use std::process::Stdio;

const BROKER: i8 = 4;
const STATIC_BROKER_CONFIG: i8 = 4;

/// A port nothing listens on now, on every interface.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("0.0.0.0:0").expect("a free port");
    l.local_addr().expect("its address").port()
}

#[test]
fn kafkas_stock_server_properties_starts_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let stock = std::fs::read_to_string(
        broker_support::repo().join("testdata/kafka-config/server.properties"),
    )
    .expect("the stock file");
    let (kafka_port, controller_port) = (free_port(), free_port());
    let file = dir.path().join("server.properties");
    std::fs::write(
        &file,
        stock
            .replace(":9092", &format!(":{kafka_port}"))
            .replace(":9093", &format!(":{controller_port}")),
    )
    .unwrap();
    let log = dir.path().join("broker.log");
    let data = dir.path().join("data");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"));
    command
        .arg("--config")
        .arg(&file)
        .arg("--data-dir")
        .arg(&data)
        .args(["--admin-listen", "127.0.0.1:0"])
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()));
    let broker = BrokerProc::run(command, &data);
    // Only the PLAINTEXT listener, on every interface; the controller's is not served.
    assert_eq!(
        broker.listeners,
        format!("PLAINTEXT://0.0.0.0:{kafka_port}")
    );
    assert!(broker.kafka.ends_with(&format!(":{kafka_port}")));
    assert!(std::net::TcpStream::connect(("127.0.0.1", controller_port)).is_err());
    let mut c = broker.connect();

    // Clients are told localhost and the port, as advertised.listeners says.
    let ResponseKind::Metadata(m) = metadata(&mut c) else {
        panic!("not a Metadata answer")
    };
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.brokers[0].node_id.0, 1);
    assert_eq!(m.brokers[0].host.to_string(), "localhost");
    assert_eq!(m.brokers[0].port, i32::from(kafka_port));

    // Records go in and come back (stamped now: 168 hours of retention are in effect, and
    // an older record could be gone at the first retention check).
    create_topic(&mut c, "stock", 1, &[]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut b = BatchBuilder::new(BatchOptions::default());
    for v in [b"one", b"two"] {
        b.push(RecordSpec {
            timestamp: now,
            key: None,
            value: Some(v),
            headers: &[],
        });
    }
    let (code, base) = produce(&mut c, "stock", b.build(), -1);
    assert_eq!((code, base), (0, 0));
    let (code, hw, records) = fetch(&mut c, "stock", 0, 0);
    assert_eq!((code, hw), (0, 2));
    assert!(records.windows(3).any(|w| w == b"two"));

    // DescribeConfigs: what is not served, as given, read-only, with the reason.
    let configs = describe_configs(&mut c, BROKER, "1");
    let get = |name: &str| {
        let d = configs
            .iter()
            .find(|x| x.name == name)
            .unwrap_or_else(|| panic!("{name} not described"))
            .clone();
        (d.name, d.value, d.source, d.read_only, d.documentation)
    };
    for (name, value) in [
        ("process.roles", "broker,controller"),
        ("controller.listener.names", "CONTROLLER"),
        ("inter.broker.listener.name", "PLAINTEXT"),
        ("socket.send.buffer.bytes", "102400"),
        ("offsets.topic.replication.factor", "1"),
        ("transaction.state.log.min.isr", "1"),
        ("share.coordinator.state.topic.replication.factor", "1"),
    ] {
        let (_, v, source, read_only, doc) = get(name);
        assert_eq!(v.as_deref(), Some(value), "{name}");
        assert_eq!(source, STATIC_BROKER_CONFIG, "{name}");
        assert!(read_only, "{name}");
        assert!(doc.contains("not in effect"), "{name}: {doc}");
    }
    // The thread counts are dynamic configs kept without effect: the file's value, static.
    let (_, v, source, _, doc) = get("num.io.threads");
    assert_eq!((v.as_deref(), source), (Some("8"), STATIC_BROKER_CONFIG));
    assert!(doc.contains("not in effect"), "{doc}");
    // In effect: 168 hours of retention, the retention check, the segment size.
    let (_, v, source, _, _) = get("log.retention.ms");
    assert_eq!(
        (v.as_deref(), source),
        (Some("604800000"), STATIC_BROKER_CONFIG)
    );
    let (_, v, source, read_only, _) = get("log.retention.check.interval.ms");
    assert_eq!(
        (v.as_deref(), source, read_only),
        (Some("300000"), STATIC_BROKER_CONFIG, true)
    );
    let (_, v, _, _, _) = get("log.segment.bytes");
    assert_eq!(v.as_deref(), Some("1073741824"));
    drop(c);

    // Shut down cleanly; the log names every setting not in effect, once.
    assert!(broker.terminate().success());
    let text = std::fs::read_to_string(&log).unwrap();
    // Every setting of the file this broker does not serve, as its settings read them.
    let Ok(Command::Run(config)) = mirrorlog_broker::settings::BrokerConfig::from_args(&[
        "--config".to_string(),
        file.display().to_string(),
    ]) else {
        panic!("the file does not read as a run")
    };
    assert!(config.not_served.len() >= 14, "{:?}", config.not_served);
    for name in config.not_served.keys() {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.contains(&format!("setting={name} ")) && l.contains("not in effect"))
            .collect();
        assert_eq!(lines.len(), 1, "{name}: {text}");
    }
}

#[test]
fn every_binary_answers_version() {
    let broker = std::process::Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(broker.status.success());
    assert_eq!(
        String::from_utf8_lossy(&broker.stdout).trim(),
        format!("mirrorlog-broker {}", env!("CARGO_PKG_VERSION"))
    );
    let tool = std::process::Command::new(broker_support::tool_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(tool.status.success());
    assert!(
        String::from_utf8_lossy(&tool.stdout).starts_with("mirrorlog "),
        "{tool:?}"
    );
}
