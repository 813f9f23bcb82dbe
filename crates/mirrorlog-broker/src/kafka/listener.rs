//! The Kafka listener: one task per connection, a reader and a writer.
//!
//! The reader decodes each frame and starts it ([`crate::kafka::dispatch`]) in order; the
//! writer awaits the responses in the same order and writes them. At most
//! [`REQUESTS_IN_FLIGHT_MAX`] requests of a connection are in flight; past that the reader
//! waits, so a client that pipelines without reading is slowed, never served from unbounded
//! memory. A frame that cannot be served closes the connection (Kafka's behaviour), except an
//! ApiVersions at a version we do not speak, which gets `UNSUPPORTED_VERSION` with our versions
//! at version 0 so the client can retry lower. A failed `acks=0` produce closes it too, after
//! everything before it is answered.
//!
//! Request limits: at most `queued.max.requests` requests over all connections are served at
//! once (`request_queue.rs`); a connection whose request finds no place is not read until one
//! frees.
//!
//! Connection limits, by Kafka's names (`connection_limits.rs`, over all listeners): at most
//! `max.connections` are served at once, and one address has at most
//! `max.connections.per.ip`; a connection past either is closed at once; a connection with no request in flight and nothing read or written for
//! `connections.max.idle.ms` is closed (a parked long-poll Fetch is in flight, so never idle;
//! a frame read or written counts, stray bytes that never complete one do not). A request
//! frame begun must arrive whole, and a response begun be written whole, within
//! `request.timeout.ms` (a slow-drip sender and a client that does not read its answers are
//! closed, not held).
//!
//! Security: with `ssl.keystore.location` a connection first completes its TLS handshake; with
//! `sasl.enabled.mechanisms` it then logs in (`login.rs`) before any request reaches a handler.
//! Its requests are served as its session's (`session.rs`: the principal and address the ACLs
//! are checked against).

use crate::broker::Shared;
use crate::kafka::session::Session;
use crate::kafka::{self as handlers, Pending, Reply, Silent};
use crate::net::wire::{self, WireError};
use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Requests of one connection started and not yet answered, at most.
pub const REQUESTS_IN_FLIGHT_MAX: usize = 64;

enum Outgoing {
    Reply {
        key: ApiKey,
        version: i16,
        correlation_id: i32,
        pending: Pending,
        /// When the request arrived (its latency in `GET /metrics` ends at the encoded answer).
        arrived: Instant,
        /// Where that latency goes (`None`: metrics off).
        latency: Option<prometheus_client::metrics::histogram::Histogram>,
    },
    Frame(Bytes),
    /// No response; close the connection if the future says so.
    Silent(Silent),
}

/// How long a TLS handshake may take before the connection is closed.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a listener requires of its connections.
pub struct Security {
    /// TLS, its handshake bounded by [`TLS_HANDSHAKE_TIMEOUT`].
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// A SASL login first (`login.rs`).
    pub sasl: Option<Arc<crate::net::sasl::Accepted>>,
}

/// Accepts connections of the listener `endpoint` until the task is dropped, each secured as
/// `security` says; its requests are answered as that listener's (Metadata advertises its
/// address).
pub async fn serve(
    b: Shared,
    listener: TcpListener,
    security: Security,
    endpoint: Arc<crate::config::listeners::Endpoint>,
) {
    let Security { tls, sasl } = security;
    let mut backoff = crate::net::accept_backoff::AcceptBackoff::new("kafka");
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff.succeeded();
                // Past max.connections (over all listeners) or max.connections.per.ip, the new
                // connection is closed at once with nothing written.
                let Some(slot) = b.connection_limits.place() else {
                    tracing::info!(%peer, max = b.connection_limits.get().0,
                        "closing a connection past max.connections");
                    drop(stream);
                    continue;
                };
                let Some(ip_slot) = b.connection_limits.admit(peer.ip()) else {
                    tracing::info!(%peer, max = b.connection_limits.get().1,
                        "closing a connection past max.connections.per.ip");
                    drop(stream);
                    continue;
                };
                tracing::debug!(%peer, "connection");
                let b = b.clone();
                let tls = tls.clone();
                let sasl = sasl.clone();
                let endpoint = endpoint.clone();
                tokio::spawn(async move {
                    let _slots = (slot, ip_slot);
                    let _counted = b.metrics.connection(&endpoint.name);
                    stream.set_nodelay(true).ok();
                    let mut stream: Box<dyn crate::net::tls::Stream> = match tls {
                        None => Box::new(stream),
                        Some(acceptor) => {
                            match tokio::time::timeout(
                                TLS_HANDSHAKE_TIMEOUT,
                                acceptor.accept(stream),
                            )
                            .await
                            {
                                Ok(Ok(s)) => Box::new(s),
                                Ok(Err(e)) => {
                                    tracing::info!(%peer, error = %e, "TLS handshake failed");
                                    return;
                                }
                                Err(_) => {
                                    tracing::info!(%peer, "TLS handshake timed out");
                                    return;
                                }
                            }
                        }
                    };
                    let mut user = None;
                    if let Some(accepted) = &sasl {
                        match crate::kafka::login::log_in(&mut stream, accepted).await {
                            Ok(name) => {
                                tracing::debug!(%peer, user = name, "logged in");
                                user = Some(name);
                            }
                            Err(e) => {
                                tracing::info!(%peer, error = %e, "closing connection");
                                return;
                            }
                        }
                    }
                    let session = Arc::new(Session::new(user.as_deref(), peer.ip(), endpoint));
                    match connection(&b, stream, &session).await {
                        Ok(()) | Err(WireError::Closed) => {}
                        Err(e) => tracing::info!(%peer, error = %e, "closing connection"),
                    }
                });
            }
            Err(e) => tokio::time::sleep(backoff.failed(&e)).await,
        }
    }
}

/// What the idle check needs of a connection: requests in flight, and when it last read or
/// wrote a frame.
struct Activity {
    in_flight: AtomicUsize,
    last: Mutex<Instant>,
}

impl Activity {
    fn touch(&self) {
        *self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    /// Resolves once the connection has been idle for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = *self
                .last
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let quiet = last.elapsed();
            if quiet >= idle && self.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            tokio::time::sleep(idle.saturating_sub(quiet).max(idle / 8)).await;
        }
    }
}

async fn connection(
    b: &Shared,
    stream: Box<dyn crate::net::tls::Stream>,
    session: &Arc<Session>,
) -> Result<(), WireError> {
    let (mut rd, wr) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::channel::<Outgoing>(REQUESTS_IN_FLIGHT_MAX);
    // Dropped when the writer ends, which ends the reader too.
    let (writer_alive, mut writer_gone) = tokio::sync::oneshot::channel::<()>();
    let activity = Arc::new(Activity {
        in_flight: AtomicUsize::new(0),
        last: Mutex::new(Instant::now()),
    });
    let idle = Duration::from_millis(b.config.connection_idle_ms);
    let limit = Duration::from_millis(b.config.request_timeout_ms);
    let writer_activity = activity.clone();
    // This connection's request counters, by its last API and version.
    let mut counted = crate::metrics::RequestHandles::default();
    let writer = tokio::spawn(async move {
        let activity = writer_activity;
        let _alive = writer_alive;
        let mut wr = BufWriter::new(wr);
        while let Some(out) = rx.recv().await {
            let frame = match out {
                Outgoing::Frame(f) => f,
                Outgoing::Silent(close) => {
                    let close = close.await;
                    activity.in_flight.fetch_sub(1, Ordering::AcqRel);
                    if close {
                        break;
                    }
                    continue;
                }
                Outgoing::Reply {
                    key,
                    version,
                    correlation_id,
                    pending,
                    arrived,
                    latency,
                } => {
                    let body = pending.await;
                    match wire::encode_response(key, version, correlation_id, &body) {
                        Ok(f) => {
                            crate::metrics::observe_latency(latency.as_ref(), arrived);
                            f
                        }
                        Err(e) => {
                            tracing::error!(?key, version, error = %e, "a response did not encode");
                            break;
                        }
                    }
                }
            };
            // A response begun is written whole within request.timeout.ms, or the client is
            // not reading and the connection goes (its answers would hold memory for nothing).
            let written = tokio::time::timeout(limit, async {
                wire::write_frame(&mut wr, &frame).await?;
                if rx.is_empty() {
                    wr.flush().await.map_err(WireError::Io)?;
                }
                Ok::<(), WireError>(())
            })
            .await;
            if !matches!(written, Ok(Ok(()))) {
                if written.is_err() {
                    tracing::info!(
                        ?limit,
                        "closing a connection that does not read its answers"
                    );
                }
                break;
            }
            activity.touch();
            activity.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        let _ = wr.shutdown().await;
    });
    let result = loop {
        let read = tokio::select! {
            read = wire::read_frame_within(&mut rd, b.config.request_bytes_max, Some(limit)) => read,
            _ = &mut writer_gone => break Ok(()),
            () = activity.idle_for(idle) => {
                tracing::debug!(idle_ms = b.config.connection_idle_ms, "closing an idle connection");
                break Ok(());
            }
        };
        activity.touch();
        let frame = match read {
            Ok(f) => f,
            Err(e) => break Err(e),
        };
        let out = match wire::decode_request(frame) {
            Ok(request) => {
                tracing::trace!(key = ?request.key, version = request.header.request_api_version, "request");
                let key = request.key;
                let version = request.header.request_api_version;
                let correlation_id = request.header.correlation_id;
                let arrived = Instant::now();
                let latency = b.metrics.request(&mut counted, key as i16, version);
                // queued.max.requests: with the queue full, this connection is not read until
                // a place frees.
                let queued = tokio::select! {
                    q = b.queue.enter() => q,
                    _ = &mut writer_gone => break Ok(()),
                };
                match handlers::dispatch(b, request, session, queued) {
                    Reply::Later(pending) => Outgoing::Reply {
                        key,
                        version,
                        correlation_id,
                        pending,
                        arrived,
                        latency,
                    },
                    Reply::None(close) => Outgoing::Silent(close),
                }
            }
            Err(WireError::UnsupportedVersion {
                key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) => match handlers::api_versions_refusal(correlation_id) {
                Ok(f) => Outgoing::Frame(f),
                Err(_) => break Ok(()),
            },
            Err(e) => break Err(e),
        };
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        let sent = tokio::select! {
            sent = tx.send(out) => sent.is_ok(),
            _ = &mut writer_gone => false,
        };
        if !sent {
            break Ok(());
        }
    };
    // The peer is gone (end of stream, or the socket failed): nobody reads the answers, so
    // the requests in flight are dropped, and a parked long-poll read with them (the engine
    // lets it go at its next tick), as Kafka drops a closed connection's requests. Otherwise
    // (a frame that cannot be served, a failed acks=0 produce): answer what was started, then
    // close.
    if matches!(result, Err(WireError::Closed | WireError::Io(_))) {
        writer.abort();
    }
    drop(tx);
    let _ = writer.await;
    result
}
