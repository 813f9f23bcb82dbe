//! The Kafka listener's SASL phase (`sasl.enabled.mechanisms`): what a connection may do before
//! it is logged in, as Kafka's `SaslServerAuthenticator` allows it. ApiVersions may come first;
//! then SaslHandshake names a mechanism (one not enabled gets `UNSUPPORTED_SASL_MECHANISM` with
//! the enabled ones, and the connection closes); then the mechanism's messages travel in
//! SaslAuthenticate requests (handshake v1) or as bare length-prefixed tokens (handshake v0).
//! A failed login is answered `SASL_AUTHENTICATION_FAILED` (v1; v0 has no way to say it) and
//! the connection closed; any other request before the login ends closes it too. The whole
//! phase is bounded by [`LOGIN_TIMEOUT`], each frame by [`LOGIN_FRAME_MAX`].

use crate::kafka as handlers;
use crate::net::sasl::{Accepted, Mechanism, SaslError, ServerSession, ServerStep};
use crate::net::tls::Stream;
use crate::net::wire::{self, WireError};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// How long a connection may take from its first byte to the end of its login.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest frame read before the login ends (Kafka's `sasl.server.max.receive.size`).
pub const LOGIN_FRAME_MAX: usize = 524_288;
/// Kafka's message for a failed login (the reason stays in our log: telling a client whether
/// the user or the password was wrong would help one guess).
const FAILED: &str = "Authentication failed: invalid user name or password";

/// Why a connection was closed before its login ended.
#[derive(Debug)]
pub enum LoginError {
    /// The socket failed or the peer closed it.
    Wire(WireError),
    /// The login was refused by its mechanism.
    Sasl(SaslError),
    /// The login's requests were not followed; the reason.
    Refused(String),
    /// It took longer than [`LOGIN_TIMEOUT`].
    TimedOut,
}

impl std::fmt::Display for LoginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoginError::Wire(e) => write!(f, "{e}"),
            LoginError::Sasl(e) => write!(f, "SASL login refused: {e}"),
            LoginError::Refused(why) => write!(f, "SASL login refused: {why}"),
            LoginError::TimedOut => write!(f, "SASL login took over {LOGIN_TIMEOUT:?}"),
        }
    }
}

/// Runs the login on `stream`; the user name logged in as.
///
/// # Errors
/// Why the connection is to be closed.
pub async fn log_in(
    stream: &mut Box<dyn Stream>,
    accepted: &Accepted,
) -> Result<String, LoginError> {
    tokio::time::timeout(LOGIN_TIMEOUT, exchange(stream, accepted))
        .await
        .map_err(|_| LoginError::TimedOut)?
}

async fn send(
    stream: &mut Box<dyn Stream>,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<(), LoginError> {
    let frame = wire::encode_response(key, version, correlation_id, body)
        .map_err(|e| LoginError::Refused(format!("a response did not encode: {e}")))?;
    write(stream, &frame).await
}

/// Writes a whole frame and flushes it (the client waits for each answer).
async fn write(stream: &mut Box<dyn Stream>, frame: &[u8]) -> Result<(), LoginError> {
    wire::write_frame(stream, frame)
        .await
        .map_err(LoginError::Wire)?;
    stream
        .flush()
        .await
        .map_err(|e| LoginError::Wire(WireError::Io(e)))
}

fn refused(why: impl Into<String>) -> LoginError {
    LoginError::Refused(why.into())
}

async fn exchange(stream: &mut Box<dyn Stream>, accepted: &Accepted) -> Result<String, LoginError> {
    // The mechanism chosen, and whether its tokens come bare (handshake v0).
    let mut session: Option<(ServerSession, bool)> = None;
    loop {
        let frame = wire::read_frame(stream, LOGIN_FRAME_MAX)
            .await
            .map_err(LoginError::Wire)?;
        if let Some((s, true)) = &mut session {
            // Handshake v0: the frame is the mechanism's token itself, answered the same way.
            match s.step(&accepted.users, &frame).map_err(LoginError::Sasl)? {
                ServerStep::Continue(out) => send_bare(stream, &out).await?,
                ServerStep::Done { user, last } => {
                    send_bare(stream, &last).await?;
                    return Ok(user);
                }
            }
            continue;
        }
        let request = match wire::decode_request(frame) {
            Ok(r) => r,
            Err(WireError::UnsupportedVersion {
                key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) => {
                let frame = handlers::api_versions_refusal(correlation_id)
                    .map_err(|e| LoginError::Refused(format!("a response did not encode: {e}")))?;
                write(stream, &frame).await?;
                continue;
            }
            Err(e) => return Err(LoginError::Wire(e)),
        };
        let (key, version) = (request.key, request.header.request_api_version);
        let correlation_id = request.header.correlation_id;
        match request.body {
            RequestKind::ApiVersions(_) if session.is_none() => {
                let body = ResponseKind::ApiVersions(handlers::api_versions_body(0));
                send(stream, key, version, correlation_id, &body).await?;
            }
            RequestKind::SaslHandshake(r) if session.is_none() => {
                let enabled = accepted
                    .mechanisms
                    .iter()
                    .map(|m| handlers::str_bytes(m.name()))
                    .collect();
                let chosen = Mechanism::parse(r.mechanism.as_str())
                    .ok()
                    .filter(|m| accepted.mechanisms.contains(m));
                let mut resp = SaslHandshakeResponse::default();
                resp.mechanisms = enabled;
                if chosen.is_none() {
                    resp.error_code = ResponseError::UnsupportedSaslMechanism.code();
                }
                send(
                    stream,
                    key,
                    version,
                    correlation_id,
                    &ResponseKind::SaslHandshake(resp),
                )
                .await?;
                let Some(m) = chosen else {
                    return Err(refused(format!(
                        "mechanism {:?} is not enabled",
                        r.mechanism.as_str()
                    )));
                };
                session = Some((ServerSession::new(m), version == 0));
            }
            RequestKind::SaslAuthenticate(r) => {
                let Some((s, false)) = &mut session else {
                    return Err(refused("SaslAuthenticate before SaslHandshake"));
                };
                let mut resp = SaslAuthenticateResponse::default();
                let outcome = s.step(&accepted.users, &r.auth_bytes);
                match &outcome {
                    Ok(ServerStep::Continue(out) | ServerStep::Done { last: out, .. }) => {
                        resp.auth_bytes = Bytes::copy_from_slice(out);
                    }
                    Err(_) => {
                        resp.error_code = ResponseError::SaslAuthenticationFailed.code();
                        resp.error_message = Some(handlers::str_bytes(FAILED));
                    }
                }
                send(
                    stream,
                    key,
                    version,
                    correlation_id,
                    &ResponseKind::SaslAuthenticate(resp),
                )
                .await?;
                match outcome.map_err(LoginError::Sasl)? {
                    ServerStep::Continue(_) => {}
                    ServerStep::Done { user, .. } => return Ok(user),
                }
            }
            _ => return Err(refused(format!("a {key:?} request before the login ended"))),
        }
    }
}

/// A bare token (handshake v0): its length and its bytes.
async fn send_bare(stream: &mut Box<dyn Stream>, token: &[u8]) -> Result<(), LoginError> {
    let mut frame = BytesMut::with_capacity(4 + token.len());
    frame.put_i32(i32::try_from(token.len()).unwrap_or(i32::MAX));
    frame.put_slice(token);
    write(stream, &frame).await
}
