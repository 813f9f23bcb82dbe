//! `mirrorlog-broker`: a single-node broker speaking the Kafka protocol on the mirrorlog engine,
//! so that real clients (librdkafka, kafka-python, kcat) produce to it and consume from it, and
//! so that brokers in separate processes mirror each other over the real Fetch protocol
//! (KIP-1279's topologies, with failover and failback driven from the admin surface).
//!
//! Layout: `config.rs` (flags and file) · `wire.rs` (framing, decode, encode) · `server.rs`
//! (connections) · `handlers/` (one file per family of APIs) · `broker.rs` (shared state and
//! start-up repair) · `topics.rs`, `producer_ids.rs`, `txn.rs` (the broker's durable state,
//! through `store.rs`) · `mirror/` (mirrors and their fetcher, over `client.rs`) · `admin.rs`
//! (HTTP with JSON for the operator).
//!
//! Start-up prints one line to stdout once both listeners accept:
//! `mirrorlog-broker ready kafka=HOST:PORT admin=HOST:PORT` (ports resolved, so `:0` works).
//! SIGTERM or SIGINT shuts down cleanly: listeners closed, mirror fetchers drained, the engine
//! closed (its clean-shutdown marker written).

mod admin;
mod broker;
mod client;
mod config;
mod errors;
mod handlers;
mod mirror;
mod producer_ids;
mod server;
mod store;
mod topics;
mod txn;
mod wire;

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// A request that claims more elements than memory holds reserves address space, not memory
/// (see `ReserveOnlyAlloc`): the protocol crate sizes vectors from untrusted counts.
#[global_allocator]
static ALLOC: mirrorlog::internals::mem::ReserveOnlyAlloc =
    mirrorlog::internals::mem::ReserveOnlyAlloc;

/// How often transactions are checked against their timeout.
const TXN_TIMEOUT_CHECK: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = match config::BrokerConfig::from_args(&args) {
        Ok(config::Command::Help) => {
            println!("{}", config::USAGE);
            return ExitCode::SUCCESS;
        }
        Ok(config::Command::Run(c)) => *c,
        Err(e) => {
            eprintln!("mirrorlog-broker: {e}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let bind =
        |addr| std::net::TcpListener::bind(addr).and_then(|l| l.set_nonblocking(true).map(|()| l));
    let (kafka, admin) = match (bind(config.listen), bind(config.admin_listen)) {
        (Ok(k), Ok(a)) => (k, a),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("mirrorlog-broker: binding the listeners: {e}");
            return ExitCode::from(2);
        }
    };
    if let (Ok(k), Ok(a)) = (kafka.local_addr(), admin.local_addr()) {
        config.listen = k;
        config.admin_listen = a;
    }
    let listen = config.listen;
    let admin_listen = config.admin_listen;
    let dir = broker::state_dir(&config.data_dir);
    let b = match broker::Broker::open(config) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            eprintln!("mirrorlog-broker: {e}");
            return ExitCode::from(1);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mirrorlog-broker: starting the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let served = runtime.block_on(async {
        b.repair().await?;
        let mirrors = mirror::Mirrors::open(&dir).map_err(|e| e.to_string())?;
        let mirrors = Arc::new(tokio::sync::Mutex::new(mirrors));
        mirrors.lock().await.resume_all(&b);
        let kafka = tokio::net::TcpListener::from_std(kafka).map_err(|e| e.to_string())?;
        let admin = tokio::net::TcpListener::from_std(admin).map_err(|e| e.to_string())?;
        let kafka_task = tokio::spawn(server::serve(b.clone(), kafka));
        let admin_task = tokio::spawn(admin::serve(b.clone(), mirrors.clone(), admin));
        let txn_task = tokio::spawn(abort_timed_out(b.clone()));
        println!("mirrorlog-broker ready kafka={listen} admin={admin_listen}");
        let _ = std::io::stdout().flush();
        tracing::info!(kafka = %listen, admin = %admin_listen, "serving");
        shutdown_signal().await;
        tracing::info!("shutting down");
        kafka_task.abort();
        admin_task.abort();
        txn_task.abort();
        mirrors.lock().await.halt_all().await;
        Ok::<_, String>(())
    });
    // Connections' tasks end with the runtime; then the engine is ours alone to close.
    runtime.shutdown_timeout(Duration::from_secs(5));
    if let Err(e) = served {
        eprintln!("mirrorlog-broker: {e}");
        return ExitCode::from(1);
    }
    let b = match Arc::try_unwrap(b) {
        Ok(b) => b,
        Err(_) => {
            eprintln!(
                "mirrorlog-broker: state still shared at shutdown; not closing the engine cleanly"
            );
            return ExitCode::from(1);
        }
    };
    match Arc::try_unwrap(b.engine).map(mirrorlog::engine::Engine::close) {
        Ok(Ok(())) => {
            tracing::info!("engine closed cleanly");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("mirrorlog-broker: closing the engine: {e}");
            ExitCode::from(1)
        }
        Err(_) => {
            eprintln!("mirrorlog-broker: the engine is still shared at shutdown");
            ExitCode::from(1)
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn abort_timed_out(b: broker::Shared) {
    loop {
        tokio::time::sleep(TXN_TIMEOUT_CHECK).await;
        let aborted = b
            .txns
            .lock()
            .await
            .abort_timed_out(&b.engine, txn::now_ms())
            .await;
        for id in aborted {
            tracing::info!(transactional_id = %id, "transaction timed out: aborted, producer fenced");
        }
    }
}
