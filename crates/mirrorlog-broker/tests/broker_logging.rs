//! The broker's log, as a collector and an operator use it:
//! - `log.format=json` writes one JSON object a line, with the level, target and `tracing`'s
//!   fields;
//! - the loggers change at runtime as Kafka's broker loggers do (BROKER_LOGGER, 8):
//!   DescribeConfigs lists them, IncrementalAlterConfigs SETs a level (a DEBUG event then
//!   appears) or DELETEs a logger; a bad level, root removed, another broker's id and
//!   AlterConfigs of loggers are refused with Kafka's codes, changing nothing.

mod broker_support;

use broker_support::requests::describe_configs;
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig as IncrementalConfig,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, IncrementalAlterConfigsRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;
use std::time::{Duration, Instant};

const BROKER_LOGGER: i8 = 8;
const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const SET: i8 = 0;
const DELETE: i8 = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// IncrementalAlterConfigs of broker `node`'s loggers: (logger, operation, level) each; the
/// error code.
fn alter_loggers(c: &mut Conn, node: &str, changes: &[(&str, i8, &str)]) -> i16 {
    let mut res = IncrementalResource::default();
    res.resource_type = BROKER_LOGGER;
    res.resource_name = s(node);
    for (logger, op, level) in changes {
        let mut x = IncrementalConfig::default();
        x.name = s(logger);
        x.config_operation = *op;
        x.value = Some(s(level));
        res.configs.push(x);
    }
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::IncrementalAlterConfigs(resp) = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        RequestKind::IncrementalAlterConfigs(r),
    ) else {
        panic!("not an IncrementalAlterConfigs answer")
    };
    resp.responses[0].error_code
}

/// The loggers as DescribeConfigs gives them: (name, level).
fn loggers(c: &mut Conn) -> Vec<(String, String)> {
    describe_configs(c, BROKER_LOGGER, "1")
        .into_iter()
        .map(|d| (d.name, d.value.unwrap_or_default()))
        .collect()
}

/// The log's lines, each a JSON object.
fn lines(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn debug_connections(log: &std::path::Path) -> usize {
    lines(log)
        .iter()
        .filter(|l| l["level"] == "DEBUG" && l["fields"]["message"] == "connection")
        .count()
}

#[test]
fn json_lines_and_loggers_changed_at_runtime_as_kafkas() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("broker.log");
    let data = dir.path().join("data");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_mirrorlog-broker"));
    command
        .arg("--data-dir")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--set", "log.format=json", "--set", "log.level=INFO"])
        // RUST_LOG, when set, would be root's directives instead of log.level.
        .env_remove("RUST_LOG")
        .stderr(std::fs::File::create(&log).unwrap());
    let b = BrokerProc::run(command, &data);
    let mut c = b.connect();
    // Every line is an object with a time, a level, a target and the event's fields.
    let first = lines(&log);
    assert!(!first.is_empty());
    for l in &first {
        assert!(l["timestamp"].is_string() && l["level"].is_string(), "{l}");
        assert!(l["target"].is_string() && l["fields"].is_object(), "{l}");
    }
    assert!(
        first.iter().any(|l| l["fields"]["message"] == "serving"),
        "{first:?}"
    );
    assert_eq!(loggers(&mut c), [("root".to_string(), "INFO".to_string())]);
    drop(Conn::new(&b.kafka));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(debug_connections(&log), 0, "INFO hides DEBUG");

    // One listener's logger at DEBUG: its DEBUG events appear, nothing else changes.
    let listener = "mirrorlog_broker::kafka::listener";
    assert_eq!(alter_loggers(&mut c, "1", &[(listener, SET, "DEBUG")]), 0);
    assert_eq!(
        loggers(&mut c),
        [
            ("root".to_string(), "INFO".to_string()),
            (listener.to_string(), "DEBUG".to_string())
        ]
    );
    drop(Conn::new(&b.kafka));
    let deadline = Instant::now() + Duration::from_secs(10);
    while debug_connections(&log) == 0 {
        assert!(Instant::now() < deadline, "no DEBUG line after the change");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Refused, changing nothing: a bad level (even beside a good change), root removed,
    // another broker, APPEND, AlterConfigs of loggers.
    let before = loggers(&mut c);
    assert_eq!(
        alter_loggers(
            &mut c,
            "1",
            &[("root", SET, "WARN"), ("mirrorlog", SET, "LOUD")]
        ),
        INVALID_CONFIG
    );
    assert_eq!(
        alter_loggers(&mut c, "1", &[("root", DELETE, "")]),
        INVALID_CONFIG
    );
    assert_eq!(
        alter_loggers(&mut c, "2", &[("root", SET, "WARN")]),
        INVALID_REQUEST
    );
    assert_eq!(
        alter_loggers(&mut c, "1", &[("root", 2, "WARN")]),
        INVALID_REQUEST
    );
    let mut res = AlterConfigsResource::default();
    res.resource_type = BROKER_LOGGER;
    res.resource_name = s("1");
    let mut r = AlterConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::AlterConfigs(resp) =
        c.call(ApiKey::AlterConfigs, 1, RequestKind::AlterConfigs(r))
    else {
        panic!("not an AlterConfigs answer")
    };
    assert_eq!(resp.responses[0].error_code, INVALID_REQUEST);
    assert_eq!(loggers(&mut c), before);

    // DELETE puts the logger back under root.
    assert_eq!(alter_loggers(&mut c, "1", &[(listener, DELETE, "")]), 0);
    assert_eq!(loggers(&mut c), [("root".to_string(), "INFO".to_string())]);
    drop(c);
    assert!(b.terminate().success());
}
