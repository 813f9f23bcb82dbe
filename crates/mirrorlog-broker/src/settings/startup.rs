//! The broker's configuration: flags, and a file of Kafka-style `key=value` lines
//! (`--config FILE`; a flag given too wins). Names are Kafka's where Kafka has one.
//!
//! | flag | file key | default |
//! |---|---|---|
//! | `--data-dir` | `log.dirs` | `target/mirrorlog-broker/data` (the embedded directory) |
//! | `--listen` | `listeners` | `127.0.0.1:9092`; or `NAME://HOST:PORT,..` (`listeners.rs`) |
//! | | `advertised.listeners` | none: `NAME://HOST:PORT,..`, what each listener tells clients |
//! | | `listener.security.protocol.map` | none: `NAME:PROTOCOL,..` for names that are not a protocol |
//! | `--admin-listen` | `admin.listener` | `127.0.0.1:9644` (HTTP with JSON) |
//! | `--advertised-host` | `advertised.host` | each listener's own host (for listeners `advertised.listeners` does not name) |
//! | `--cluster-id` | `cluster.id` | `mirrorlog` |
//! | `--node-id` | `node.id` (or Kafka's `broker.id`; equal when both are given) | `1` |
//! | `--shards` | `shards` | one per core |
//! | | `journal.bytes` | `134217728` (128 MiB per shard; `0`: no journal, each round syncs its partition's file) |
//! | | `journal.group.window.us` | `0` (a journal flush waits for nothing more) |
//! | | `num.partitions` | `1` |
//! | | `segment.bytes`, `segment.ms`, `retention.bytes`, `retention.ms`, `max.message.bytes`, `producer.id.expiration.ms` | the engine's |
//! | | `socket.request.max.bytes` | `104857600` |
//! | | `fetch.max.bytes` | `57671680` (Kafka's: a Fetch answers at most this, whatever it asks) |
//! | | `transaction.max.timeout.ms` | `900000` |
//! | | `transactional.id.expiration.ms` | `604800000` (Kafka's 7 days): a transactional id idle this long is forgotten |
//! | | `password.encoder.secret` | none: PASSWORD-type dynamic configs are sealed at rest with a key derived from it; without it, with a random key in `<log.dirs>/broker/password.key` (0600) |
//! | | `auto.create.topics.enable` | `true` |
//! | | `max.connections` | `10000` (Kafka's is unbounded): past it, a new connection is closed at once (Kafka's acceptor waits instead) |
//! | | `max.connections.per.ip` | unbounded (Kafka's): past it, a new connection is closed |
//! | | `queued.max.requests` | `500` (Kafka's): requests served at once over all connections; past it, connections stop being read until one is answered (`request_queue.rs`) |
//! | | `connections.max.idle.ms` | `600000` (Kafka's): idle connections are closed |
//! | | `request.timeout.ms` | `30000` (Kafka clients' name and default): a request frame begun must arrive whole, and a response begun must be written whole, within it, or the connection is closed |
//! | | `ssl.keystore.location` | none: a PEM file with the private key and certificate chain; the Kafka listener then speaks TLS (Kafka's `SSL` listener) |
//! | | `sasl.enabled.mechanisms` | none: a list of `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`; the Kafka listener then requires a SASL login (`SASL_PLAINTEXT`, or `SASL_SSL` with a keystore) |
//! | | `admin.token.file` | `<log.dirs>/broker/admin.token`, made at the first start: the bearer token every admin change needs |
//! | | `admin.allowed.hosts` | none: host names the admin surface answers besides addresses and `localhost` |
//! | | `sasl.users.file` | none (required with `sasl.enabled.mechanisms`): `user:password` lines, the users the listener accepts |
//! | | `offsets.topic.num.partitions` | `50` (Kafka's): partitions of `__consumer_offsets`, made at the first group request |
//! | | `offsets.retention.minutes` | `10080` (Kafka's 7 days): a group's committed offset expires this long after its commit |
//! | | `offsets.retention.check.interval.ms` | `600000` (Kafka's) |
//! | | `offset.metadata.max.bytes` | `4096` (Kafka's): a commit's metadata string at most, else `OFFSET_METADATA_TOO_LARGE` |
//! | | `group.min.session.timeout.ms`, `group.max.session.timeout.ms` | `6000`, `1800000` (Kafka's): a JoinGroup's session timeout outside is `INVALID_SESSION_TIMEOUT` |
//! | | `group.initial.rebalance.delay.ms` | `3000` (Kafka's): an empty group's first rebalance waits this long for more members |
//! | | `group.max.size` | unbounded (Kafka's): members past it get `GROUP_MAX_SIZE_REACHED` |
//! | | `group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms`, `group.consumer.max.size` | `45000`, `5000`, unbounded (Kafka's): KIP-848's consumer-protocol groups |
//! | | `authorizer.class.name` | none (every request allowed); Kafka's `org.apache.kafka.metadata.authorizer.StandardAuthorizer` or `kafka.security.authorizer.AclAuthorizer` turns on the ACLs (`acl/`) |
//! | | `super.users` | none: `;`-separated principals (`User:name`) that may do anything |
//! | | `allow.everyone.if.no.acl.found` | `false` (Kafka's): a resource no ACL covers is denied |
//!
//! | | `log.format` | `text`; `json`: one JSON object a line, with `tracing`'s fields (`logging.rs`) |
//! | | `log.level` | `INFO` (Kafka's level names; `RUST_LOG`, when set, wins): the root logger at start; loggers change at runtime through Kafka's BROKER_LOGGER resource |
//! | | `metrics.enabled` | `true`: count requests, bytes per topic and connections for `GET /metrics` (`metrics/`); `false` leaves what a scrape reads |
//! | | `metrics.require.token` | `false`: `GET /metrics` is read without the admin token, as every GET is; `true` asks it |
//! | | `log.retention.check.interval.ms` | `300000` (Kafka's): how often each shard applies retention |
//! | | `log.retention.hours`, `log.retention.minutes`, `log.roll.hours`, `log.roll.jitter.hours` | Kafka's coarser synonyms of `retention.ms`, `segment.ms`, `segment.jitter.ms`; within a file or the flags the finer unit wins |
//! | | Kafka's settings not served (`config/server_keys.rs`; `controller.listener.names` also drops the listeners it names) | accepted when of Kafka's type, logged at start, described as not in effect |
//!
//! Every value is checked when read: a bad one is a [`ConfigError`] naming the key, never a
//! panic.

use crate::config::listeners::{ListenerSpec, Protocol};
use crate::config::ConfigError;
use mirrorlog::engine::PartitionConfig;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The embedded default data directory (relative to the working directory), so that
/// `cargo run --bin mirrorlog-broker` from the repository starts a usable broker.
pub const DATA_DIR_DEFAULT: &str = "target/mirrorlog-broker/data";
/// Kafka's `socket.request.max.bytes` default.
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;
/// Kafka's `fetch.max.bytes` default (55 MiB).
pub const FETCH_BYTES_MAX_DEFAULT: usize = 57_671_680;
/// Kafka's `transaction.max.timeout.ms` default.
pub const TXN_TIMEOUT_MS_MAX_DEFAULT: i32 = 900_000;
/// `max.connections` default. Kafka's is unbounded; each connection holds a descriptor and
/// buffers, so a broker that is safe to expose bounds them.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;
/// Kafka's `connections.max.idle.ms` default (10 minutes).
pub const CONNECTION_IDLE_MS_DEFAULT: u64 = 600_000;
/// `request.timeout.ms` default (Kafka clients' 30 s).
pub const REQUEST_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// The values of `authorizer.class.name` that turn on the built-in authorizer: Kafka's
/// authorizers, whose rules it follows.
pub const AUTHORIZER_CLASSES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];
pub use crate::config::PARTITIONS_PER_TOPIC_MAX;

/// The configuration of one broker process.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The data directory: the engine's partitions under `log/`, the broker's own files under
    /// `broker/`.
    pub data_dir: PathBuf,
    /// The Kafka listener.
    pub listen: SocketAddr,
    /// The admin listener (HTTP, JSON).
    pub admin_listen: SocketAddr,
    /// The host put in Metadata answers.
    pub advertised_host: String,
    /// `listeners`, as given (empty: one bare listener at `listen`).
    pub listeners: Vec<ListenerSpec>,
    /// `advertised.listeners`: name, host, port.
    pub advertised_listeners: Vec<(String, String, u16)>,
    /// `listener.security.protocol.map`.
    pub protocol_map: Vec<(String, Protocol)>,
    /// The cluster id (stored in the data directory; a mismatch refuses to open).
    pub cluster_id: String,
    /// This broker's id in Metadata.
    pub node_id: i32,
    /// Engine shards (`None`: one per core).
    pub shards: Option<usize>,
    /// `journal.bytes`: each shard's journal (0: none).
    pub journal_bytes: u64,
    /// `journal.group.window.us`: how long a journal flush waits for more rounds.
    pub journal_group_window_us: u64,
    /// Partitions of a topic created without a count.
    pub num_partitions: i32,
    /// Defaults of every new topic's partitions.
    pub topic_defaults: PartitionConfig,
    /// Largest request frame accepted; larger ones close the connection.
    pub request_bytes_max: usize,
    /// Largest `transaction.timeout.ms` a producer may ask for.
    pub txn_timeout_ms_max: i32,
    /// `transactional.id.expiration.ms`: a transactional id idle this long is forgotten.
    pub txn_id_expiration_ms: i64,
    /// `password.encoder.secret`: the key PASSWORD-type dynamic configs are sealed with at
    /// rest (`secrets.rs`; without it, a random key the broker makes in its directory).
    pub password_encoder_secret: Option<String>,
    /// `fetch.max.bytes`: the most one Fetch answer holds (Kafka takes the smaller of this and
    /// the request's `max_bytes`).
    pub fetch_bytes_max: usize,
    /// `max.incremental.fetch.session.cache.slots`: incremental fetch sessions held at once
    /// (`coordinator/fetch_sessions.rs`; 0: every fetch is sessionless).
    pub fetch_session_slots: usize,
    /// `auto.create.topics.enable`: Metadata for an unknown topic creates it (Kafka's default).
    pub auto_create_topics: bool,
    /// `max.connections`: connections served at once, over all listeners; a connection past
    /// it is closed at once (`connection_limits.rs`).
    pub connections_max: usize,
    /// `max.connections.per.ip`: connections from one address at once; a connection past it is
    /// closed at once (Kafka's `ConnectionQuotas`).
    pub connections_per_ip_max: usize,
    /// `queued.max.requests`: requests being served at once, over all connections
    /// (`request_queue.rs`).
    pub queued_max_requests: usize,
    /// `connections.max.idle.ms`: a connection with no request in flight and no frame read or
    /// written for this long is closed (Kafka's default 10 minutes).
    pub connection_idle_ms: u64,
    /// `request.timeout.ms`: a request frame begun must arrive whole, and a response begun be
    /// written whole, within it (a client gives up on a request after the same time).
    pub request_timeout_ms: u64,
    /// `ssl.keystore.location`: a PEM file holding the private key and certificate chain; when
    /// set, the Kafka listener speaks TLS only (Kafka's `SSL` listener).
    pub ssl_keystore: Option<PathBuf>,
    /// `sasl.enabled.mechanisms`: when not empty, the Kafka listener requires a SASL login by
    /// one of these (Kafka's `SASL_PLAINTEXT` listener, `SASL_SSL` with a keystore).
    pub sasl_mechanisms: Vec<crate::net::sasl::Mechanism>,
    /// `sasl.users.file`: the users the listener accepts (`crate::net::sasl::users`).
    pub sasl_users_file: Option<PathBuf>,
    /// `admin.token.file`: the admin surface's bearer token (`None`: made in the data
    /// directory, `admin/access.rs`).
    pub admin_token_file: Option<PathBuf>,
    /// `admin.allowed.hosts`: names the admin surface may be reached by, besides addresses and
    /// `localhost`.
    pub admin_allowed_hosts: Vec<String>,
    /// `authorizer.class.name`: whether ACLs are enforced (`acl/`).
    pub authorizer: bool,
    /// `super.users` and `allow.everyone.if.no.acl.found`.
    pub acl: crate::acl::AuthorizerConfig,
    /// `offsets.topic.num.partitions`.
    pub offsets_topic_partitions: i32,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_ms: u64,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    /// `group.min.session.timeout.ms` and `group.max.session.timeout.ms`.
    pub group_session_timeout_ms: (i32, i32),
    /// `group.initial.rebalance.delay.ms` and `group.max.size`.
    pub group_limits: crate::coordinator::groups::classic::Limits,
    /// `group.consumer.session.timeout.ms`, `group.consumer.heartbeat.interval.ms`,
    /// `group.consumer.max.size` (KIP-848's groups).
    pub consumer_groups: crate::coordinator::groups::consumer::Settings,
    /// The keys set at start (file or flags), which DescribeConfigs reports as
    /// `STATIC_BROKER_CONFIG`.
    pub given: std::collections::BTreeSet<String>,
    /// `log.retention.check.interval.ms`: how often each shard applies retention.
    pub retention_check_interval_ms: u64,
    /// Kafka's settings given and not served here (`config/server_keys.rs`, and the dynamic
    /// configs kept without effect): name → value as given. Logged at start, described as
    /// not in effect.
    pub not_served: std::collections::BTreeMap<String, String>,
    /// `controller.listener.names`: listeners of a controller quorum, not served.
    pub controller_listeners: Vec<String>,
    /// `log.format`: `text` or `json` (`logging.rs`).
    pub log_format: crate::logging::LogFormat,
    /// `log.level`: the root logger's level at start, a Kafka level name (`RUST_LOG`, when
    /// set, wins); changed at runtime through the BROKER_LOGGER resource.
    pub log_level: String,
    /// `metrics.enabled`: count requests, bytes per topic and connections for `GET /metrics`
    /// (default true; what is read when scraped is served either way).
    pub metrics_enabled: bool,
    /// `metrics.require.token`: `GET /metrics` needs the admin token too (default false:
    /// readable by any allowed host, as every GET is).
    pub metrics_require_token: bool,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            data_dir: PathBuf::from(DATA_DIR_DEFAULT),
            listen: SocketAddr::from(([127, 0, 0, 1], 9092)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 9644)),
            advertised_host: String::new(),
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            protocol_map: Vec::new(),
            cluster_id: "mirrorlog".into(),
            node_id: 1,
            shards: None,
            journal_bytes: mirrorlog::engine::JOURNAL_BYTES_DEFAULT,
            journal_group_window_us: 0,
            num_partitions: 1,
            topic_defaults: PartitionConfig::default(),
            request_bytes_max: REQUEST_BYTES_MAX_DEFAULT,
            txn_timeout_ms_max: TXN_TIMEOUT_MS_MAX_DEFAULT,
            txn_id_expiration_ms: crate::coordinator::transactions::TXN_ID_EXPIRATION_MS_DEFAULT,
            password_encoder_secret: None,
            fetch_bytes_max: FETCH_BYTES_MAX_DEFAULT,
            fetch_session_slots: crate::coordinator::fetch_sessions::CACHE_SLOTS_DEFAULT,
            auto_create_topics: true,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            connections_per_ip_max: usize::MAX,
            queued_max_requests: crate::net::request_queue::QUEUED_MAX_REQUESTS_DEFAULT,
            connection_idle_ms: CONNECTION_IDLE_MS_DEFAULT,
            request_timeout_ms: REQUEST_TIMEOUT_MS_DEFAULT,
            ssl_keystore: None,
            sasl_mechanisms: Vec::new(),
            sasl_users_file: None,
            admin_token_file: None,
            admin_allowed_hosts: Vec::new(),
            authorizer: false,
            acl: crate::acl::AuthorizerConfig::default(),
            given: std::collections::BTreeSet::new(),
            retention_check_interval_ms: mirrorlog::engine::RETENTION_CHECK_INTERVAL_MS_DEFAULT,
            not_served: std::collections::BTreeMap::new(),
            controller_listeners: Vec::new(),
            log_format: crate::logging::LogFormat::Text,
            log_level: "INFO".into(),
            metrics_enabled: true,
            metrics_require_token: false,
            offsets_topic_partitions: crate::coordinator::groups::OFFSETS_TOPIC_PARTITIONS_DEFAULT,
            offsets_retention_ms: crate::coordinator::groups::OFFSETS_RETENTION_MINUTES_DEFAULT
                * 60_000,
            offsets_retention_check_ms:
                crate::coordinator::groups::OFFSETS_RETENTION_CHECK_MS_DEFAULT,
            offset_metadata_max_bytes:
                crate::coordinator::groups::OFFSET_METADATA_MAX_BYTES_DEFAULT,
            group_session_timeout_ms: crate::coordinator::groups::SESSION_TIMEOUT_MS_DEFAULTS,
            group_limits: crate::coordinator::groups::classic::Limits::default(),
            consumer_groups: crate::coordinator::groups::consumer::Settings::default(),
        }
    }
}

/// What the command line asked for.
pub enum Command {
    /// Run the broker.
    Run(Box<BrokerConfig>),
    /// Print this help and exit.
    Help(String),
    /// Print the version and exit.
    Version,
}

impl BrokerConfig {
    /// Parses the broker's flags (without the program name; `command_line.rs`).
    ///
    /// # Errors
    /// A flag clap refuses ([`ConfigError::Usage`]), or a setting's error.
    pub fn from_args(args: &[String]) -> Result<Command, ConfigError> {
        let argv = std::iter::once("mirrorlog-broker".to_string()).chain(args.iter().cloned());
        match super::command_line::command().try_get_matches_from(argv) {
            Ok(m) => Self::from_matches(&m).map(|c| Command::Run(Box::new(c))),
            Err(e) => match e.kind() {
                clap::error::ErrorKind::DisplayHelp => Ok(Command::Help(e.render().to_string())),
                clap::error::ErrorKind::DisplayVersion => Ok(Command::Version),
                _ => Err(ConfigError::Usage(e.render().to_string())),
            },
        }
    }

    /// The configuration the parsed flags `m` give: the file's settings, then the flags' in
    /// the order given (flags win).
    ///
    /// # Errors
    /// A setting's error, or a file that cannot be read.
    pub fn from_matches(m: &clap::ArgMatches) -> Result<BrokerConfig, ConfigError> {
        let (file, flags) = super::command_line::ordered(m);
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(flags.len());
        for (key, value) in flags {
            if key.is_empty() {
                let (k, v) = value.split_once('=').ok_or_else(|| ConfigError::Invalid {
                    key: "--set".into(),
                    value: value.clone(),
                    reason: "expected KEY=VALUE".into(),
                })?;
                pairs.push((k.trim().into(), v.trim().into()));
            } else {
                pairs.push((key, value));
            }
        }
        let file = file.map(PathBuf::from);
        let mut config = BrokerConfig::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(&path).map_err(|e| ConfigError::File {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            config.set_layer(parse_properties(&text))?;
        }
        config.set_layer(pairs)?;
        if config.sasl_mechanisms.is_empty() != config.sasl_users_file.is_none() {
            return Err(ConfigError::Invalid {
                key: "sasl.enabled.mechanisms".into(),
                value: format!("{:?}", config.sasl_mechanisms),
                reason: "sasl.enabled.mechanisms and sasl.users.file are given together".into(),
            });
        }
        // Kafka refuses to advertise the non-routable meta-address (`KafkaConfig`'s check of
        // `advertised.listeners`): clients given 0.0.0.0 connect to themselves. Checked here with
        // the listeners' configured addresses, again at start with the bound ones.
        for (spec, name, _) in config.listener_plan().map_err(|e| ConfigError::Invalid {
            key: "listeners".into(),
            value: format!("{:?}", config.listeners),
            reason: e.to_string(),
        })? {
            crate::config::listeners::advertise(
                &name,
                spec.addr,
                &config.advertised_listeners,
                &config.advertised_host,
            )
            .map_err(|e| ConfigError::Invalid {
                key: "advertised.listeners".into(),
                value: config.advertised_host.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(config)
    }

    /// Each listener with its name and protocol (one bare listener at `listen` when
    /// `listeners` was not given).
    ///
    /// # Errors
    /// A name with no protocol, a TLS listener without `ssl.keystore.location`, or a SASL one
    /// without `sasl.enabled.mechanisms`.
    pub fn listener_plan(
        &self,
    ) -> Result<Vec<(ListenerSpec, String, Protocol)>, crate::config::listeners::ListenerError>
    {
        use crate::config::listeners::ListenerError;
        let specs = if self.listeners.is_empty() {
            vec![ListenerSpec {
                name: None,
                addr: self.listen,
            }]
        } else {
            // A controller quorum's listeners (`controller.listener.names`) are not served.
            let served: Vec<ListenerSpec> = self
                .listeners
                .iter()
                .filter(|l| {
                    l.name
                        .as_ref()
                        .is_none_or(|n| !self.controller_listeners.contains(n))
                })
                .cloned()
                .collect();
            if served.is_empty() {
                return Err(ListenerError::Layout(
                    "every listener is a controller listener (controller.listener.names)",
                ));
            }
            served
        };
        let tls = self.ssl_keystore.is_some();
        let sasl = !self.sasl_mechanisms.is_empty();
        let named = crate::config::listeners::protocols(&specs, &self.protocol_map, tls, sasl)?;
        let mut out = Vec::new();
        for (spec, (name, protocol)) in specs.into_iter().zip(named) {
            if protocol.tls() && !tls {
                return Err(ListenerError::NeedsTls(name));
            }
            if protocol.sasl() && !sasl {
                return Err(ListenerError::NeedsSasl(name));
            }
            out.push((spec, name, protocol));
        }
        Ok(out)
    }

    /// Sets one layer's keys (a file's, or the flags'), as Kafka reads one file: coarser
    /// synonyms first so that finer ones win (`log.retention.hours` < `.minutes` < `.ms`),
    /// and `broker.id` and `node.id` equal when both are given.
    ///
    /// # Errors
    /// A key's error, or `broker.id` and `node.id` that differ.
    pub fn set_layer(&mut self, mut pairs: Vec<(String, String)>) -> Result<(), ConfigError> {
        let id = |name: &str| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_string())
        };
        if let (Some(broker), Some(node)) = (id("broker.id"), id("node.id")) {
            if broker != node {
                return Err(ConfigError::Invalid {
                    key: "broker.id".into(),
                    value: broker,
                    reason: format!("must equal node.id ({node}) when both are given"),
                });
            }
        }
        pairs.sort_by_key(|(k, _)| crate::config::server_keys::precedence(k));
        for (k, v) in pairs {
            self.set(&k, &v)?;
        }
        Ok(())
    }

    /// Sets one key (Kafka's name) from its text.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        self.set_key(key, value)?;
        self.given.insert(key.to_string());
        if let Some((topic, _)) = crate::config::server_keys::time_synonym(key) {
            // Described as the topic default it set.
            self.given.insert(topic.to_string());
        }
        Ok(())
    }

    fn set_key(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let invalid = |reason: &str| ConfigError::Invalid {
            key: key.into(),
            value: value.into(),
            reason: reason.into(),
        };
        let d = &mut self.topic_defaults;
        match key {
            "log.dirs" | "log.dir" => self.data_dir = PathBuf::from(value),
            "listeners" => {
                self.listeners = crate::config::listeners::parse_listeners(value)
                    .map_err(|r| invalid(&r.to_string()))?;
                self.listen = self.listeners[0].addr;
            }
            "advertised.listeners" => {
                self.advertised_listeners = crate::config::listeners::parse_advertised(value)
                    .map_err(|r| invalid(&r.to_string()))?;
            }
            "listener.security.protocol.map" => {
                self.protocol_map = crate::config::listeners::parse_protocol_map(value)
                    .map_err(|r| invalid(&r.to_string()))?;
            }
            "admin.listener" => {
                self.admin_listen = parse_listener(value).map_err(|r| invalid(&r.to_string()))?;
            }
            "advertised.host" => self.advertised_host = value.into(),
            "cluster.id" => {
                if value.is_empty() {
                    return Err(invalid("must not be empty"));
                }
                self.cluster_id = value.into();
            }
            "node.id" | "broker.id" => {
                self.node_id = parse_num(value, 0, i32::MAX).map_err(|r| invalid(&r.to_string()))?
            }
            "shards" => {
                self.shards = Some(parse_num(value, 1, 1024).map_err(|r| invalid(&r.to_string()))?);
            }
            "journal.bytes" => {
                let bytes: u64 = parse_num(value, 0, mirrorlog::engine::JOURNAL_BYTES_MAX)
                    .map_err(|r| invalid(&r.to_string()))?;
                if bytes != 0 {
                    mirrorlog::engine::check_journal_bytes(bytes)
                        .map_err(|e| invalid(&format!("{e}; or 0 for no journal")))?;
                }
                self.journal_bytes = bytes;
            }
            "journal.group.window.us" => {
                self.journal_group_window_us =
                    parse_num(value, 0, mirrorlog::engine::JOURNAL_GROUP_WINDOW_US_MAX)
                        .map_err(|r| invalid(&r.to_string()))?;
            }
            "num.partitions" => {
                self.num_partitions = parse_num(value, 1, PARTITIONS_PER_TOPIC_MAX)
                    .map_err(|r| invalid(&r.to_string()))?;
            }
            "socket.request.max.bytes" => {
                self.request_bytes_max =
                    parse_num(value, 1024, 1 << 30).map_err(|r| invalid(&r.to_string()))?;
            }
            "fetch.max.bytes" => {
                self.fetch_bytes_max =
                    parse_num(value, 1024, 1 << 30).map_err(|r| invalid(&r.to_string()))?;
            }
            "max.incremental.fetch.session.cache.slots" => {
                self.fetch_session_slots =
                    parse_num(value, 0, 1 << 20).map_err(|r| invalid(&r.to_string()))?;
            }
            "auto.create.topics.enable" => {
                self.auto_create_topics = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("expected true or false")),
                };
            }
            "max.connections" => {
                self.connections_max =
                    parse_num(value, 1, i32::MAX as usize).map_err(|r| invalid(&r.to_string()))?;
            }
            "max.connections.per.ip" => {
                self.connections_per_ip_max =
                    parse_num(value, 1, i32::MAX as usize).map_err(|r| invalid(&r.to_string()))?;
            }
            "queued.max.requests" => {
                self.queued_max_requests =
                    parse_num(value, 1, 1_000_000).map_err(|r| invalid(&r.to_string()))?;
            }
            "request.timeout.ms" => {
                self.request_timeout_ms =
                    parse_num(value, 1, i32::MAX as u64).map_err(|r| invalid(&r.to_string()))?;
            }
            "connections.max.idle.ms" => {
                self.connection_idle_ms =
                    parse_num(value, 1, i64::MAX as u64).map_err(|r| invalid(&r.to_string()))?;
            }
            "ssl.keystore.location" => {
                // Read here, so that a bad file is refused at start with its reason.
                crate::net::tls::server_config(std::path::Path::new(value))
                    .map_err(|r| invalid(&r.to_string()))?;
                self.ssl_keystore = Some(PathBuf::from(value));
            }
            "sasl.enabled.mechanisms" => {
                let mut ms = Vec::new();
                for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    let m = crate::net::sasl::Mechanism::parse(name)
                        .map_err(|r| invalid(&r.to_string()))?;
                    if !ms.contains(&m) {
                        ms.push(m);
                    }
                }
                self.sasl_mechanisms = ms;
            }
            "admin.token.file" => self.admin_token_file = Some(PathBuf::from(value)),
            "admin.allowed.hosts" => {
                self.admin_allowed_hosts = value
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(str::to_string)
                    .collect();
            }
            "sasl.users.file" => {
                // Read here, so that a bad file is refused at start with its reason.
                crate::net::sasl::users::read_file(std::path::Path::new(value))
                    .map_err(|r| invalid(&r.to_string()))?;
                self.sasl_users_file = Some(PathBuf::from(value));
            }
            "offsets.topic.num.partitions" => {
                self.offsets_topic_partitions = parse_num(value, 1, PARTITIONS_PER_TOPIC_MAX)
                    .map_err(|r| invalid(&r.to_string()))?;
            }
            "offsets.retention.minutes" => {
                let minutes: i64 = parse_num(value, 1, i64::from(i32::MAX))
                    .map_err(|r| invalid(&r.to_string()))?;
                self.offsets_retention_ms = minutes * 60_000;
            }
            "log.format" => {
                self.log_format = crate::logging::LogFormat::parse(value)
                    .ok_or_else(|| invalid("expected text or json"))?;
            }
            "metrics.enabled" | "metrics.require.token" => {
                let on = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("expected true or false")),
                };
                if key == "metrics.enabled" {
                    self.metrics_enabled = on;
                } else {
                    self.metrics_require_token = on;
                }
            }
            "log.level" => {
                crate::logging::level(value).map_err(|e| invalid(&e.to_string()))?;
                self.log_level = value.trim().to_ascii_uppercase();
            }
            "log.retention.check.interval.ms" => {
                self.retention_check_interval_ms =
                    parse_num(value, 1, i64::MAX as u64).map_err(|r| invalid(&r.to_string()))?;
            }
            "offsets.retention.check.interval.ms" => {
                self.offsets_retention_check_ms =
                    parse_num(value, 1, i64::MAX as u64).map_err(|r| invalid(&r.to_string()))?;
            }
            "offset.metadata.max.bytes" => {
                self.offset_metadata_max_bytes =
                    parse_num(value, 0, i32::MAX as usize).map_err(|r| invalid(&r.to_string()))?;
            }
            "group.min.session.timeout.ms" | "group.max.session.timeout.ms" => {
                let ms = parse_num(value, 1, i32::MAX).map_err(|r| invalid(&r.to_string()))?;
                let (min, max) = &mut self.group_session_timeout_ms;
                *(if key.contains("min") { min } else { max }) = ms;
            }
            "group.initial.rebalance.delay.ms" => {
                self.group_limits.initial_rebalance_delay_ms =
                    parse_num(value, 0, i64::from(i32::MAX))
                        .map_err(|r| invalid(&r.to_string()))?;
            }
            "group.max.size" => {
                self.group_limits.max_size =
                    parse_num(value, 1, i32::MAX as usize).map_err(|r| invalid(&r.to_string()))?;
            }
            "group.consumer.session.timeout.ms" => {
                self.consumer_groups.session_timeout_ms = parse_num(value, 1, i64::from(i32::MAX))
                    .map_err(|r| invalid(&r.to_string()))?;
            }
            "group.consumer.heartbeat.interval.ms" => {
                self.consumer_groups.heartbeat_interval_ms =
                    parse_num(value, 1, i32::MAX).map_err(|r| invalid(&r.to_string()))?;
            }
            "group.consumer.max.size" => {
                self.consumer_groups.max_size =
                    parse_num(value, 1, i32::MAX as usize).map_err(|r| invalid(&r.to_string()))?;
            }
            "authorizer.class.name" => {
                self.authorizer = match value.trim() {
                    "" => false,
                    v if AUTHORIZER_CLASSES.contains(&v) => true,
                    _ => {
                        return Err(invalid(&format!(
                            "the built-in authorizer is named {}, or empty for none",
                            AUTHORIZER_CLASSES.join(" or ")
                        )))
                    }
                };
            }
            "super.users" => {
                let mut users = Vec::new();
                for p in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
                    match p.split_once(':') {
                        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                            users.push(p.to_string());
                        }
                        _ => return Err(invalid(&format!("{p:?} is not a principal Type:name"))),
                    }
                }
                self.acl.super_users = users;
            }
            "allow.everyone.if.no.acl.found" => {
                self.acl.allow_if_no_acl = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("expected true or false")),
                };
            }
            "transaction.max.timeout.ms" => {
                self.txn_timeout_ms_max =
                    parse_num(value, 1, i32::MAX).map_err(|r| invalid(&r.to_string()))?;
            }
            "password.encoder.secret" => {
                if value.is_empty() {
                    return Err(invalid("must not be empty"));
                }
                self.password_encoder_secret = Some(value.to_string());
            }
            "transactional.id.expiration.ms" => {
                self.txn_id_expiration_ms = parse_num(value, 1, i64::from(i32::MAX))
                    .map_err(|r| invalid(&r.to_string()))?;
            }
            // Kafka's broker names of topic configs (`log.retention.ms`, `message.max.bytes`,
            // ...) set the topic defaults, as the topic names do.
            _ => {
                use crate::config::server_keys::{not_served, time_synonym, to_ms};
                if let Some((topic, unit)) = time_synonym(key) {
                    let ms = to_ms(value, unit).map_err(|r| invalid(&r.to_string()))?;
                    return set_topic_config(d, topic, &ms.to_string());
                }
                let checked = match not_served(key) {
                    Some((_, ty, _)) if !ty.accepts(value) => {
                        Some(Err(format!("Expected value to be a {}", ty.name())))
                    }
                    Some(_) => Some(Ok(())),
                    None => crate::settings::dynamic::check_kept_static(key, value)
                        .map(|r| r.map_err(|e| e.to_string())),
                };
                if let Some(checked) = checked {
                    checked.map_err(|r| invalid(&r))?;
                    if key == "controller.listener.names" {
                        self.controller_listeners = value
                            .split(',')
                            .map(|n| n.trim().to_ascii_uppercase())
                            .filter(|n| !n.is_empty())
                            .collect();
                    }
                    self.not_served.insert(key.to_string(), value.to_string());
                    return Ok(());
                }
                let topic = crate::config::synonyms::topic_synonym(key).unwrap_or(key);
                return set_topic_config(d, topic, value);
            }
        }
        Ok(())
    }
}

/// Sets one of a topic's settings (Kafka's topic-level names, checked against Kafka's bounds and
/// applied where the engine has the behaviour: `topic.rs`) on `config`.
pub use crate::config::topic::apply as set_topic_config;

/// `key=value` lines; `#` and `!` start comments; blank lines skipped.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `HOST:PORT`, or Kafka's `PLAINTEXT://HOST:PORT`.
fn parse_listener(value: &str) -> Result<SocketAddr, NotAnAddress> {
    let v = value.strip_prefix("PLAINTEXT://").unwrap_or(value);
    let v = v.replace("localhost", "127.0.0.1");
    v.parse().map_err(NotAnAddress)
}

/// Why a listener address did not parse.
#[derive(Debug, thiserror::Error)]
#[error("expected HOST:PORT with an IP address ({0})")]
struct NotAnAddress(std::net::AddrParseError);

/// Why a number did not parse.
#[derive(Debug, thiserror::Error)]
enum NotInRange {
    #[error("not a number")]
    NotANumber,
    #[error("must be in {min}..={max}")]
    OutOfRange { min: String, max: String },
}

fn parse_num<T>(value: &str, min: T, max: T) -> Result<T, NotInRange>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let v: T = value.trim().parse().map_err(|_| NotInRange::NotANumber)?;
    if v < min || v > max {
        return Err(NotInRange::OutOfRange {
            min: min.to_string(),
            max: max.to_string(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests;
