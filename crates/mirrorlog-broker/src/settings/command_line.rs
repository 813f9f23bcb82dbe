//! The broker's command line, parsed by `clap`: the flags that run a broker, each the short
//! form of a setting of the file (`--data-dir` is `log.dirs`, `--set KEY=VALUE` any), and its
//! help text. The binary adds its subcommands to [`command`] (`cli/`), so the broker's flags
//! and the mirror command line share one parser, one help style and one error style.

use clap::{Arg, ArgAction, ArgMatches};

/// Each flag and the setting it gives (`None`: `--config`, the file; `Some("")`: `--set`).
const FLAGS: &[(&str, &str, Option<&str>, &str)] = &[
    ("config", "FILE", None, "A file of Kafka-style key=value lines (a Kafka server.properties works); a flag given too wins"),
    ("data-dir", "DIR", Some("log.dirs"), "The data directory [default: target/mirrorlog-broker/data]"),
    ("listen", "HOST:PORT", Some("listeners"), "The Kafka listener, or NAME://HOST:PORT,.. [default: 127.0.0.1:9092]"),
    ("admin-listen", "HOST:PORT", Some("admin.listener"), "The admin surface, HTTP with JSON [default: 127.0.0.1:9644]"),
    ("advertised-host", "HOST", Some("advertised.host"), "The host clients are told (for listeners advertised.listeners does not name)"),
    ("cluster-id", "ID", Some("cluster.id"), "The cluster id [default: mirrorlog]"),
    ("node-id", "N", Some("node.id"), "This broker's id [default: 1]"),
    ("shards", "N", Some("shards"), "Engine shards [default: one per core]"),
    ("set", "KEY=VALUE", Some(""), "Any setting of the file, on the command line (repeatable)"),
];

/// The settings a file or `--set` takes, after the flags' help.
const SETTINGS: &str = "\
Settings (a file's key=value lines, or --set): log.dirs, listeners, advertised.listeners,
listener.security.protocol.map, admin.listener, cluster.id, node.id, num.partitions,
segment.bytes, segment.ms, retention.bytes, retention.ms, max.message.bytes,
producer.id.expiration.ms, socket.request.max.bytes, transaction.max.timeout.ms,
transactional.id.expiration.ms, password.encoder.secret, auto.create.topics.enable,
max.connections, max.connections.per.ip, connections.max.idle.ms, request.timeout.ms,
queued.max.requests, fetch.max.bytes, journal.bytes, journal.group.window.us, log.format
(text, json), log.level, metrics.enabled, metrics.require.token (GET /metrics),
log.retention.check.interval.ms, ssl.keystore.location (PEM: key and
certificate chain; the listener then speaks TLS), sasl.enabled.mechanisms (PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512) with sasl.users.file (user:password lines), admin.token.file
(the admin surface's bearer token; default <log.dirs>/broker/admin.token, made at first
start), admin.allowed.hosts, offsets.topic.num.partitions, offsets.retention.minutes,
offsets.retention.check.interval.ms, offset.metadata.max.bytes, group.min.session.timeout.ms,
group.max.session.timeout.ms, group.initial.rebalance.delay.ms, group.max.size,
group.consumer.session.timeout.ms, group.consumer.heartbeat.interval.ms,
group.consumer.max.size, authorizer.class.name (Kafka's StandardAuthorizer or AclAuthorizer)
with super.users and allow.everyone.if.no.acl.found, and every topic config as a default.
Flags win over the file. A stock Kafka server.properties starts the broker: broker.id and
log.retention.hours (.minutes, log.roll.hours) map to node.id and retention.ms (segment.ms),
and Kafka's settings this broker does not serve (process.roles, controller.quorum.voters,
controller.listener.names, zookeeper.connect, replication factors, thread counts, socket
buffers, ...) are accepted, logged at start and described as not in effect.";

/// The broker's command: its flags, help and version (the binary adds subcommands).
#[must_use]
pub fn command() -> clap::Command {
    clap::Command::new("mirrorlog-broker")
        .version(env!("CARGO_PKG_VERSION"))
        .about("A single-node Kafka-protocol broker on the mirrorlog engine, with mirrors between clusters")
        .args(FLAGS.iter().map(|&(name, value, _, help)| {
            Arg::new(name)
                .long(name)
                .value_name(value)
                .help(help)
                .action(ArgAction::Append)
        }))
        .after_help(SETTINGS)
}

/// The flags of `m` as they were given, in order: the file (`--config`, its last), and each
/// other flag as (setting, value) (`--set`'s as given, `KEY=VALUE`, under the key `""`).
#[must_use]
pub fn ordered(m: &ArgMatches) -> (Option<String>, Vec<(String, String)>) {
    let mut file = None;
    let mut given: Vec<(usize, String, String)> = Vec::new();
    for &(name, _, key, _) in FLAGS {
        let (Some(mut values), Some(at)) = (m.get_many::<String>(name), m.indices_of(name)) else {
            continue;
        };
        match key {
            None => file = values.next_back().cloned(),
            Some(key) => {
                for (v, i) in values.zip(at) {
                    given.push((i, key.to_string(), v.clone()));
                }
            }
        }
    }
    given.sort_by_key(|g| g.0);
    (file, given.into_iter().map(|(_, k, v)| (k, v)).collect())
}
