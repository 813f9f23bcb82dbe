//! `mirrorlog-broker`: a single-node broker speaking the Kafka protocol on the mirrorlog engine,
//! so that real clients (librdkafka, kafka-python, kcat) produce to it and consume from it, and
//! so that brokers in separate processes mirror each other over the real Fetch protocol
//! (KIP-1279's topologies, with failover and failback driven from the admin surface).
//!
//! This library is the broker; `main.rs` is its command line, and `mirrorlog-bench broker`
//! embeds a [`Server`] to measure it.
//!
//! Layout, one concern per folder, lowest layer first (a layer imports only those before it;
//! the workspace's `tidy` test holds the order):
//! - `logging.rs`: the process's log, its format and its levels, changed at runtime as
//!   Kafka's broker loggers;
//! - `metrics/`: `GET /metrics`, Prometheus' exposition of what is counted and what is read
//!   when scraped;
//! - `config/`: the settings' shared vocabulary: Kafka's topic configs, their broker-level
//!   synonyms, named listeners;
//! - `storage/`: the broker's own durable documents, the topic registry, secrets at rest, what
//!   did not load at start (damage), the open-file budget;
//! - `acl/`: Kafka's ACLs and their decisions;
//! - `net/`: the wire (framing, every message's fields), TLS, SASL, connection and request
//!   limits, and the client the mirrors use;
//! - `coordinator/`: consumer groups (both protocols), transactions, producer ids;
//! - `settings/`: what a process runs with (flags and file) and the dynamic broker configs;
//! - `broker/`: the shared state those make up, and the start-up that repairs what a crash
//!   left;
//! - `mirror/`: mirrors and their fetchers;
//! - `kafka/`: the Kafka listener, its sessions, and one handler file per family of APIs;
//! - `admin/`: the operator's HTTP surface and who may use it;
//! - `cli/`: the command line: the broker's flags and the `mirrors` subcommand over the admin
//!   surface;
//! - `test_hooks.rs`: the failures tests may inject.

pub mod acl;
mod admin;
mod broker;
pub mod cli;
pub mod config;
mod coordinator;
mod kafka;
pub mod logging;
pub mod metrics;
mod mirror;
pub mod net;
pub mod settings;
mod storage;
#[doc(hidden)]
pub mod test_hooks;

pub use admin::access::TokenError;
pub use broker::{log_dir, state_dir, BrokerError};
/// The requests a mirror sends its source (Fetch, ListOffsets, OffsetForLeaderEpoch), for a
/// client that reads a broker as a mirror does (the benchmark's).
pub use mirror::requests as mirror_requests;
pub use storage::{fd_budget::FdBudgetError, store::StoreError, topics::TopicError};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The unit tests decode hostile frames under the allocator the binary uses (`main.rs`).
#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: mirrorlog::api::ReserveOnlyAlloc = mirrorlog::api::ReserveOnlyAlloc;

/// How often transactions are checked against their timeout.
const TXN_TIMEOUT_CHECK: Duration = Duration::from_secs(1);
/// How often idle transactional ids are looked for (Kafka's
/// `transactional.id.expiration.ms` check runs hourly).
const TXN_ID_EXPIRATION_CHECK: Duration = Duration::from_secs(3600);
/// How often the process checks that every engine shard is alive (`/health` answers at once;
/// the exit follows within this).
const SHARD_CHECK_INTERVAL: Duration = Duration::from_millis(250);

/// Why a broker did not start, or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listeners as configured cannot be served.
    #[error(transparent)]
    Listeners(#[from] config::listeners::ListenerError),
    /// A listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The async runtime, or a socket handed to it, could not be set up.
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
    /// The broker's state (engine, documents) did not open.
    #[error(transparent)]
    Broker(#[from] broker::BrokerError),
    /// The stored mirrors did not load.
    #[error(transparent)]
    Mirrors(#[from] storage::store::StoreError),
    /// The TLS keystore.
    #[error(transparent)]
    Tls(#[from] net::tls::TlsError),
    /// The SASL users file.
    #[error(transparent)]
    Sasl(#[from] net::sasl::SaslError),
    /// The admin token.
    #[error(transparent)]
    AdminToken(#[from] admin::access::TokenError),
    /// Engine shards stopped while serving: the process must not go on with half its
    /// partitions.
    #[error("engine shards {0:?} stopped")]
    ShardsStopped(Vec<usize>),
    /// Something still held the broker's state at shutdown.
    #[error("{0} still shared at shutdown")]
    StillShared(&'static str),
    /// The engine's close failed.
    #[error("closing the engine: {0}")]
    Close(mirrorlog::engine::EngineError),
}

/// A running broker: its runtime, listeners and state.
pub struct Server {
    runtime: tokio::runtime::Runtime,
    broker: broker::Shared,
    mirrors: Arc<tokio::sync::Mutex<mirror::Mirrors>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// SIGTERM's and SIGINT's streams, registered before the broker says it is ready, so a
    /// signal sent as soon as it is ready stops it cleanly rather than killing it. `None`
    /// where they could not be registered (then only Ctrl-C is awaited).
    signals: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
    /// The first Kafka listener's address (its port resolved when `:0` was asked).
    pub kafka: SocketAddr,
    /// Every Kafka listener: its name and address.
    pub listeners: Vec<(String, SocketAddr)>,
    /// The admin listener's address.
    pub admin: SocketAddr,
    /// The file holding the admin surface's bearer token.
    pub admin_token_file: std::path::PathBuf,
}

impl Server {
    /// Binds the listeners, opens the engine (recovering it), repairs what a crash left,
    /// resumes the stored mirrors and starts serving.
    ///
    /// # Errors
    /// A listener that cannot be bound, an engine or a broker file that cannot be opened.
    pub fn start(mut config: settings::BrokerConfig) -> Result<Server, ServerError> {
        let bind = |addr| {
            std::net::TcpListener::bind(addr).and_then(|l| l.set_nonblocking(true).map(|()| l))
        };
        // Kafka's settings given and not served: accepted, and said so once.
        for (key, value) in &config.not_served {
            let why = settings::describe_not_served(key);
            tracing::warn!(setting = %key, value = %value, "{why}");
        }
        // Every listener bound, and what each advertises with its port resolved.
        let mut kafka = Vec::new();
        for (spec, name, protocol) in config.listener_plan()? {
            let socket = bind(spec.addr).map_err(|source| ServerError::Bind {
                addr: spec.addr,
                source,
            })?;
            let bound = socket.local_addr().map_err(ServerError::Runtime)?;
            let (host, port) = config::listeners::advertise(
                &name,
                bound,
                &config.advertised_listeners,
                &config.advertised_host,
            )?;
            let endpoint = config::listeners::Endpoint {
                name,
                protocol,
                host,
                port,
            };
            kafka.push((socket, bound, Arc::new(endpoint)));
        }
        let admin = bind(config.admin_listen).map_err(|source| ServerError::Bind {
            addr: config.admin_listen,
            source,
        })?;
        config.listen = kafka[0].1;
        config.admin_listen = admin.local_addr().map_err(ServerError::Runtime)?;
        let bound: Vec<(String, SocketAddr)> = kafka
            .iter()
            .map(|(_, addr, e)| (e.name.clone(), *addr))
            .collect();
        let (kafka_addr, admin_addr) = (config.listen, config.admin_listen);
        let dir = broker::state_dir(&config.data_dir);
        let token_file = config
            .admin_token_file
            .clone()
            .unwrap_or_else(|| admin::access::default_token_file(&dir));
        let b = Arc::new(broker::Broker::open(config)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("mirrorlog-broker")
            .build()
            .map_err(ServerError::Runtime)?;
        let started = runtime.block_on(async {
            b.repair().await;
            b.load_groups().await;
            let mirrors = mirror::Mirrors::open(&dir)?;
            let mirrors = Arc::new(tokio::sync::Mutex::new(mirrors));
            mirrors.lock().await.resume_all(&b);
            let tls = match &b.config.ssl_keystore {
                Some(path) => Some(tokio_rustls::TlsAcceptor::from(net::tls::server_config(
                    path,
                )?)),
                None => None,
            };
            let sasl = match &b.config.sasl_users_file {
                Some(path) => Some(Arc::new(net::sasl::Accepted {
                    mechanisms: b.config.sasl_mechanisms.clone(),
                    users: net::sasl::Users::load(path)?,
                })),
                None => None,
            };
            let access = match &b.config.admin_token_file {
                Some(file) => {
                    admin::access::Access::load(file, false, b.config.admin_allowed_hosts.clone())?
                }
                None => admin::access::Access::load(
                    &token_file,
                    true,
                    b.config.admin_allowed_hosts.clone(),
                )?,
            };
            let admin = tokio::net::TcpListener::from_std(admin).map_err(ServerError::Runtime)?;
            let mut tasks = vec![
                tokio::spawn(admin::http::serve(
                    b.clone(),
                    mirrors.clone(),
                    admin,
                    access,
                )),
                tokio::spawn(abort_timed_out(b.clone())),
                tokio::spawn(expire_group_offsets(b.clone())),
                tokio::spawn(group_timers(b.clone())),
            ];
            for (socket, _, endpoint) in kafka {
                let socket =
                    tokio::net::TcpListener::from_std(socket).map_err(ServerError::Runtime)?;
                let tls = if endpoint.protocol.tls() {
                    tls.clone()
                } else {
                    None
                };
                let sasl = if endpoint.protocol.sasl() {
                    sasl.clone()
                } else {
                    None
                };
                tasks.push(tokio::spawn(kafka::listener::serve(
                    b.clone(),
                    socket,
                    kafka::listener::Security { tls, sasl },
                    endpoint,
                )));
            }
            use tokio::signal::unix::{signal, SignalKind};
            let signals = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(term), Ok(int)) => Some((term, int)),
                _ => None,
            };
            Ok::<_, ServerError>((mirrors, tasks, signals))
        });
        let (mirrors, tasks, signals) = match started {
            Ok(x) => x,
            Err(e) => {
                runtime.shutdown_timeout(Duration::from_secs(5));
                return Err(e);
            }
        };
        tracing::info!(listeners = ?bound, admin = %admin_addr, "serving");
        Ok(Server {
            runtime,
            broker: b,
            mirrors,
            tasks,
            signals,
            kafka: kafka_addr,
            listeners: bound,
            admin: admin_addr,
            admin_token_file: token_file,
        })
    }

    /// Blocks until SIGTERM or SIGINT (`Ok`), or until a shard of the engine stops (`Err`
    /// naming it): the broker must not go on serving half its partitions, so the caller shuts
    /// down and exits non-zero (a supervisor restarts it, and the partitions recover).
    ///
    /// # Errors
    /// The shards that stopped.
    pub fn wait_for_signal(&mut self) -> Result<(), ServerError> {
        let engine = self.broker.engine.clone();
        let registered = self.signals.as_mut();
        self.runtime.block_on(async move {
            let dead = async {
                loop {
                    let dead = engine.dead_shards();
                    if !dead.is_empty() {
                        return dead;
                    }
                    tokio::time::sleep(SHARD_CHECK_INTERVAL).await;
                }
            };
            let signals = async {
                match registered {
                    Some((term, int)) => {
                        tokio::select! {
                            _ = term.recv() => {},
                            _ = int.recv() => {},
                        }
                    }
                    None => {
                        let _ = tokio::signal::ctrl_c().await;
                    }
                }
            };
            tokio::select! {
                () = signals => Ok(()),
                dead = dead => {
                    tracing::error!(shards = ?dead, "engine shards stopped: shutting down");
                    Err(ServerError::ShardsStopped(dead))
                }
            }
        })
    }

    /// Shuts down cleanly: listeners closed, mirror fetchers drained, connections ended, then
    /// the engine closed (its clean-shutdown marker written).
    ///
    /// # Errors
    /// The engine's close failed, or its state was still shared.
    pub fn shutdown(self) -> Result<(), ServerError> {
        tracing::info!("shutting down");
        for t in &self.tasks {
            t.abort();
        }
        let mirrors = self.mirrors.clone();
        self.runtime
            .block_on(async move { mirrors.lock().await.halt_all().await });
        drop(self.mirrors);
        // Connections' tasks end with the runtime; then the engine is ours alone to close.
        self.runtime.shutdown_timeout(Duration::from_secs(5));
        let b = Arc::try_unwrap(self.broker)
            .map_err(|_| ServerError::StillShared("the broker's state"))?;
        let engine =
            Arc::try_unwrap(b.engine).map_err(|_| ServerError::StillShared("the engine"))?;
        engine.close().map_err(ServerError::Close)?;
        tracing::info!("engine closed cleanly");
        Ok(())
    }
}

/// Every `offsets.retention.check.interval.ms`, committed offsets past their retention go.
async fn expire_group_offsets(b: broker::Shared) {
    let every = Duration::from_millis(b.config.offsets_retention_check_ms);
    loop {
        tokio::time::sleep(every).await;
        b.expire_group_offsets(coordinator::transactions::now_ms())
            .await;
    }
}

/// The classic groups' sessions, join and sync phases (`coordinator/groups/membership.rs`).
async fn group_timers(b: broker::Shared) {
    b.membership.run_timers(&*b).await;
}

/// Every [`TXN_TIMEOUT_CHECK`], transactions open past their timeout are aborted; every
/// [`TXN_ID_EXPIRATION_CHECK`], transactional ids idle past `transactional.id.expiration.ms`
/// are forgotten (so the coordinator's file holds the ids in use, not every id ever seen).
async fn abort_timed_out(b: broker::Shared) {
    let mut last_expiration = std::time::Instant::now();
    loop {
        tokio::time::sleep(TXN_TIMEOUT_CHECK).await;
        let mut txns = b.txns.lock().await;
        let aborted = txns
            .abort_timed_out(&b.engine, coordinator::transactions::now_ms())
            .await;
        for id in aborted {
            tracing::info!(transactional_id = %id, "transaction timed out: aborted, producer fenced");
        }
        if last_expiration.elapsed() >= TXN_ID_EXPIRATION_CHECK {
            last_expiration = std::time::Instant::now();
            let expired = txns.expire_ids(
                coordinator::transactions::now_ms(),
                b.config.txn_id_expiration_ms,
            );
            if !expired.is_empty() {
                tracing::info!(count = expired.len(), "idle transactional ids expired");
            }
        }
    }
}
