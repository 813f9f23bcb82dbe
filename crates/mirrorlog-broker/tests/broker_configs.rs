//! Broker configs at runtime: DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs of the BROKER resource, by Kafka's names and codes.
//!
//! - Every broker config is described with its source and whether it is read-only.
//! - A topic default changed at runtime (`message.max.bytes`) takes effect live on an existing
//!   topic that does not set it, not on one that does, and again after a restart.
//! - The cluster-wide default level (`""`) is overridden by this broker's level.
//! - Static configs, unknown names, bad values and another broker's id are refused with
//!   Kafka's codes, and nothing changes.
//! - `max.connections.per.ip` changed at runtime applies to the next connection.
//! - kafka-python's admin client describes and alters broker configs
//!   (`testdata/interop/broker/admin_apis.py broker`).

mod broker_support;

use broker_support::requests::{create_topic, keyed_batch, produce};
use broker_support::{BrokerProc, Conn};
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig as IncrementalConfig,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use mirrorlog::format::ProducerFields;

const BROKER: i8 = 4;
const TOPIC: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One described config: (value, source, read-only, sensitive).
type Config = (Option<String>, i8, bool, bool);

/// DescribeConfigs (v4) of one resource: its error code and every config by name.
fn describe(c: &mut Conn, resource_type: i8, name: &str) -> (i16, Vec<(String, Config)>) {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = s(name);
    res.configuration_keys = None;
    let mut r = DescribeConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::DescribeConfigs(resp) =
        c.call(ApiKey::DescribeConfigs, 4, RequestKind::DescribeConfigs(r))
    else {
        panic!()
    };
    let out = &resp.results[0];
    let configs = out
        .configs
        .iter()
        .map(|x| {
            (
                x.name.to_string(),
                (
                    x.value.as_ref().map(|v| v.to_string()),
                    x.config_source,
                    x.read_only,
                    x.is_sensitive,
                ),
            )
        })
        .collect();
    (out.error_code, configs)
}

fn config(all: &[(String, Config)], name: &str) -> Config {
    all.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} not described"))
        .1
        .clone()
}

/// AlterConfigs (v2) of one resource, replacing its configs: the error code.
fn alter(c: &mut Conn, resource_type: i8, name: &str, configs: &[(&str, &str)]) -> i16 {
    let mut res = AlterConfigsResource::default();
    res.resource_type = resource_type;
    res.resource_name = s(name);
    for (k, v) in configs {
        let mut x = AlterableConfig::default();
        x.name = s(k);
        x.value = Some(s(v));
        res.configs.push(x);
    }
    let mut r = AlterConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::AlterConfigs(resp) =
        c.call(ApiKey::AlterConfigs, 2, RequestKind::AlterConfigs(r))
    else {
        panic!()
    };
    resp.responses[0].error_code
}

/// IncrementalAlterConfigs (v1) of the broker: (name, operation, value) each.
fn incremental(c: &mut Conn, name: &str, ops: &[(&str, i8, &str)]) -> i16 {
    let mut res = IncrementalResource::default();
    res.resource_type = BROKER;
    res.resource_name = s(name);
    for (k, op, v) in ops {
        let mut x = IncrementalConfig::default();
        x.name = s(k);
        x.config_operation = *op;
        x.value = Some(s(v));
        res.configs.push(x);
    }
    let mut r = IncrementalAlterConfigsRequest::default();
    r.resources.push(res);
    let ResponseKind::IncrementalAlterConfigs(resp) = c.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        RequestKind::IncrementalAlterConfigs(r),
    ) else {
        panic!()
    };
    resp.responses[0].error_code
}

/// A produce of one record with a value of `size` bytes to `topic`-0: its error code.
fn produce_of(c: &mut Conn, topic: &str, size: usize) -> i16 {
    let value = vec![b'v'; size];
    produce(
        c,
        topic,
        keyed_batch(ProducerFields::NONE, &[(b"k", &value)]),
        -1,
    )
    .0
}

const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const MESSAGE_TOO_LARGE: i16 = 10;

#[test]
fn broker_configs_are_described_changed_live_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &["--set", "num.partitions=2"]);
    let mut c = b.connect();
    create_topic(&mut c, "plain", 1, &[]);
    create_topic(&mut c, "own", 1, &[("max.message.bytes", "1048588")]);

    // Sources and read-only flags, as Kafka reports them.
    let (code, all) = describe(&mut c, BROKER, "1");
    assert_eq!(code, 0);
    assert_eq!(
        config(&all, "log.dirs").1,
        4,
        "given at start: STATIC_BROKER_CONFIG"
    );
    assert!(config(&all, "log.dirs").2, "log.dirs is read-only");
    assert_eq!(
        config(&all, "num.partitions"),
        (Some("2".into()), 4, true, false)
    );
    assert_eq!(
        config(&all, "message.max.bytes"),
        (Some("1048588".into()), 5, false, false)
    );
    assert_eq!(
        config(&all, "ssl.keystore.password"),
        (None, 5, false, true)
    );
    assert_eq!(
        describe(&mut c, BROKER, "").1,
        vec![],
        "no dynamic defaults yet"
    );

    // A 10 KB record is within the default 1 MiB; at message.max.bytes=1000 it is too large
    // for the topic that does not set max.message.bytes, at once, and not for the one that does.
    assert_eq!(produce_of(&mut c, "plain", 10_000), 0);
    assert_eq!(
        alter(&mut c, BROKER, "1", &[("message.max.bytes", "1000")]),
        0
    );
    let (_, all) = describe(&mut c, BROKER, "1");
    assert_eq!(
        config(&all, "message.max.bytes"),
        (Some("1000".into()), 2, false, false),
        "DYNAMIC_BROKER_CONFIG"
    );
    assert_eq!(produce_of(&mut c, "plain", 10_000), MESSAGE_TOO_LARGE);
    assert_eq!(produce_of(&mut c, "own", 10_000), 0);
    let (_, topic) = describe(&mut c, TOPIC, "plain");
    assert_eq!(
        config(&topic, "max.message.bytes").0.as_deref(),
        Some("1000")
    );

    // Refusals change nothing: a static config, an unknown name, a bad value, another broker.
    assert_eq!(
        alter(&mut c, BROKER, "1", &[("log.dirs", "/elsewhere")]),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&mut c, BROKER, "1", &[("no.such.config", "1")]),
        INVALID_CONFIG
    );
    assert_eq!(
        alter(&mut c, BROKER, "1", &[("log.retention.ms", "soon")]),
        INVALID_CONFIG
    );
    assert_eq!(
        alter(&mut c, BROKER, "7", &[("log.retention.ms", "1")]),
        INVALID_REQUEST
    );
    let (code, _) = describe(&mut c, BROKER, "7");
    assert_eq!(code, INVALID_REQUEST);
    assert_eq!(produce_of(&mut c, "plain", 10_000), MESSAGE_TOO_LARGE);

    // The cluster-wide default level, under this broker's level.
    assert_eq!(
        alter(&mut c, BROKER, "", &[("log.retention.ms", "7200000")]),
        0
    );
    assert_eq!(
        describe(&mut c, BROKER, "").1,
        vec![(
            "log.retention.ms".to_string(),
            (Some("7200000".to_string()), 3, false, false)
        )]
    );
    // IncrementalAlterConfigs keeps the level's other configs (AlterConfigs would drop them).
    assert_eq!(
        incremental(
            &mut c,
            "1",
            &[
                ("log.retention.ms", 0, "3600000"),
                ("sasl.kerberos.min.time.before.relogin", 0, "58000"),
            ]
        ),
        0
    );
    let (_, all) = describe(&mut c, BROKER, "1");
    assert_eq!(
        config(&all, "log.retention.ms").0.as_deref(),
        Some("3600000")
    );
    assert_eq!(config(&all, "message.max.bytes").0.as_deref(), Some("1000"));
    assert_eq!(
        config(&all, "sasl.kerberos.min.time.before.relogin"),
        (Some("58000".into()), 2, false, false)
    );
    // Deleting the broker's value uncovers the default level's.
    assert_eq!(incremental(&mut c, "1", &[("log.retention.ms", 1, "")]), 0);
    let (_, all) = describe(&mut c, BROKER, "1");
    assert_eq!(
        config(&all, "log.retention.ms"),
        (Some("7200000".into()), 3, false, false)
    );

    // After a restart: the same configs, in effect.
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    assert!(b.terminate().success());
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &["--set", "num.partitions=2"]);
    let mut c = b.connect();
    assert_eq!(produce_of(&mut c, "plain", 10_000), MESSAGE_TOO_LARGE);
    let (_, all) = describe(&mut c, BROKER, "1");
    assert_eq!(config(&all, "message.max.bytes").0.as_deref(), Some("1000"));
    assert_eq!(config(&all, "log.retention.ms").1, 3);

    // AlterConfigs replaces the level: message.max.bytes goes back to its default.
    assert_eq!(alter(&mut c, BROKER, "1", &[]), 0);
    assert_eq!(produce_of(&mut c, "plain", 10_000), 0);
}

#[test]
fn max_connections_per_ip_changed_at_runtime_applies_to_the_next_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = BrokerProc::start(dir.path(), &[]);
    let mut c = b.connect();
    assert_eq!(
        alter(&mut c, BROKER, "1", &[("max.connections.per.ip", "1")]),
        0
    );
    // This connection stays; the next from the same address is closed at once.
    let mut next = b.connect();
    assert!(next.closed());
    assert_eq!(describe(&mut c, BROKER, "1").0, 0);
    assert_eq!(
        alter(&mut c, BROKER, "1", &[("max.connections.per.ip", "0")]),
        INVALID_CONFIG
    );
    assert_eq!(alter(&mut c, BROKER, "1", &[]), 0);
    let mut again = b.connect();
    assert_eq!(describe(&mut again, BROKER, "1").0, 0);
}

#[test]
fn password_configs_are_sealed_at_rest_in_a_private_file_and_never_returned() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--set", "password.encoder.secret=encoder-secret"];
    let b = BrokerProc::start(dir.path(), &flags);
    let mut c = b.connect();
    assert_eq!(
        alter(&mut c, BROKER, "", &[("ssl.key.password", "hunter2")]),
        0
    );
    let file = dir.path().join("broker/broker-configs.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("sealed:v1:"), "{text}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let (code, all) = describe(&mut c, BROKER, "");
    assert_eq!(code, 0);
    let (value, _, _, sensitive) = config(&all, "ssl.key.password");
    assert_eq!((value, sensitive), (None, true));
    // A restart reads it back sealed; the file stays private.
    let (kafka, admin) = (b.kafka.clone(), b.admin.clone());
    assert!(b.terminate().success());
    let b = BrokerProc::start_on(dir.path(), &kafka, &admin, &flags);
    let mut c = b.connect();
    let (_, all) = describe(&mut c, BROKER, "");
    assert!(config(&all, "ssl.key.password").3);
    let again = std::fs::read_to_string(&file).unwrap();
    assert!(!again.contains("hunter2"));
}
