//! The Kafka listener: one task per connection, a reader and a writer.
//!
//! The reader decodes each frame and starts it ([`crate::handlers::dispatch`]) in order; the
//! writer awaits the responses in the same order and writes them. At most
//! [`REQUESTS_IN_FLIGHT_MAX`] requests of a connection are in flight; past that the reader
//! waits, so a client that pipelines without reading is slowed, never served from unbounded
//! memory. A frame that cannot be served closes the connection (Kafka's behaviour), except an
//! ApiVersions at a version we do not speak, which gets `UNSUPPORTED_VERSION` with our versions
//! at version 0 so the client can retry lower. A failed `acks=0` produce closes it too, after
//! everything before it is answered.

use crate::broker::Shared;
use crate::handlers::{self, Pending, Reply, Silent};
use crate::wire::{self, WireError};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Requests of one connection started and not yet answered, at most.
pub const REQUESTS_IN_FLIGHT_MAX: usize = 64;

enum Outgoing {
    Reply {
        key: ApiKey,
        version: i16,
        correlation_id: i32,
        pending: Pending,
    },
    Frame(Bytes),
    /// No response; close the connection if the future says so.
    Silent(Silent),
}

/// Accepts connections until the task is dropped.
pub async fn serve(b: Shared, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                tracing::debug!(%peer, "connection");
                let b = b.clone();
                tokio::spawn(async move {
                    match connection(&b, stream).await {
                        Ok(()) | Err(WireError::Closed) => {}
                        Err(e) => tracing::info!(%peer, error = %e, "closing connection"),
                    }
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn connection(b: &Shared, stream: TcpStream) -> Result<(), WireError> {
    stream.set_nodelay(true).ok();
    let (mut rd, wr) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Outgoing>(REQUESTS_IN_FLIGHT_MAX);
    // Dropped when the writer ends, which ends the reader too.
    let (writer_alive, mut writer_gone) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(async move {
        let _alive = writer_alive;
        let mut wr = BufWriter::new(wr);
        while let Some(out) = rx.recv().await {
            let frame = match out {
                Outgoing::Frame(f) => f,
                Outgoing::Silent(close) => {
                    if close.await {
                        break;
                    }
                    continue;
                }
                Outgoing::Reply {
                    key,
                    version,
                    correlation_id,
                    pending,
                } => {
                    let body = pending.await;
                    match wire::encode_response(key, version, correlation_id, &body) {
                        Ok(f) => f,
                        Err(e) => {
                            tracing::error!(?key, version, error = %e, "a response did not encode");
                            break;
                        }
                    }
                }
            };
            if wire::write_frame(&mut wr, &frame).await.is_err() {
                break;
            }
            // Write at once when nothing else is ready to go with it.
            if rx.is_empty() && wr.flush().await.is_err() {
                break;
            }
        }
        let _ = wr.shutdown().await;
    });
    let result = loop {
        let read = tokio::select! {
            read = wire::read_frame(&mut rd, b.config.request_bytes_max) => read,
            _ = &mut writer_gone => break Ok(()),
        };
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
                match handlers::dispatch(b, request) {
                    Reply::Later(pending) => Outgoing::Reply {
                        key,
                        version,
                        correlation_id,
                        pending,
                    },
                    Reply::None(close) => Outgoing::Silent(close),
                }
            }
            Err(WireError::UnsupportedVersion {
                key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) => {
                let body = ResponseKind::ApiVersions(handlers::api_versions_body(
                    ResponseError::UnsupportedVersion.code(),
                ));
                match wire::encode_response(ApiKey::ApiVersions, 0, correlation_id, &body) {
                    Ok(f) => Outgoing::Frame(f),
                    Err(_) => break Ok(()),
                }
            }
            Err(e) => break Err(e),
        };
        let sent = tokio::select! {
            sent = tx.send(out) => sent.is_ok(),
            _ = &mut writer_gone => false,
        };
        if !sent {
            break Ok(());
        }
    };
    // Answer what was started, then close.
    drop(tx);
    let _ = writer.await;
    result
}
