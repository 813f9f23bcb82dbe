//! The broker's own Kafka client, for the mirror fetcher: one connection to a source broker,
//! the versions negotiated with ApiVersions, requests sent and answered in order (Kafka answers
//! a connection's requests in the order they were sent, so a request can be sent before the
//! previous answer is read: `send` then `recv`).

use crate::net::tls::Stream;
use crate::net::wire::{self, decode_response, encode_request, read_frame};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestHeader, RequestKind, ResponseKind, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Largest response accepted from a source (a fetch of many partitions at 1 MiB each).
pub const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// How long one answer may take (a long-poll Fetch waits at most a few seconds).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(35);
/// How long a connection attempt may take (Kafka's `socket.connection.setup.timeout.ms`).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client failure (the caller reconnects).
#[derive(Debug, Clone)]
pub struct ClientError(pub String);

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How a client reaches its broker (Kafka's `security.protocol`): TLS or not, SASL or not.
#[derive(Clone, Default)]
pub struct Security {
    /// TLS with this configuration (the trusted CAs); `None`: plaintext.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// A SASL login after ApiVersions (SaslHandshake v1, then SaslAuthenticate); `None`: none.
    pub sasl: Option<crate::net::sasl::Login>,
}

impl Security {
    /// Plaintext.
    pub const PLAINTEXT: Security = Security {
        tls: None,
        sasl: None,
    };
}

/// A SASL session is ended here at this share of the lifetime the broker gave it (Kafka's
/// clients re-authenticate between 85% and 95% of it; this client reconnects instead).
const SESSION_SHARE: f64 = 0.85;

/// One connection.
pub struct Client {
    stream: Box<dyn Stream>,
    next_correlation: i32,
    versions: HashMap<i16, (i16, i16)>,
    in_flight: VecDeque<(ApiKey, i16, i32)>,
    /// When the broker's SASL session lifetime (KIP-368) makes this connection end.
    session_ends: Option<std::time::Instant>,
}

impl Client {
    /// Connects to `addr` (`HOST:PORT`) in plaintext and asks for its versions.
    pub async fn connect(addr: &str) -> Result<Self, ClientError> {
        Self::connect_with(addr, &Security::PLAINTEXT).await
    }

    /// Connects to `addr` (`HOST:PORT`) as `security` says and asks for its versions.
    pub async fn connect_with(addr: &str, security: &Security) -> Result<Self, ClientError> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| ClientError(format!("connecting to {addr}: timed out")))?
            .map_err(|e| ClientError(format!("connecting to {addr}: {e}")))?;
        tcp.set_nodelay(true).ok();
        let stream: Box<dyn Stream> = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => {
                tokio::time::timeout(CONNECT_TIMEOUT, crate::net::tls::connect(tls, addr, tcp))
                    .await
                    .map_err(|_| ClientError(format!("TLS handshake with {addr}: timed out")))?
                    .map_err(|e| ClientError(e.to_string()))?
            }
        };
        let mut c = Client {
            stream,
            next_correlation: 1,
            versions: HashMap::new(),
            in_flight: VecDeque::new(),
            session_ends: None,
        };
        let ResponseKind::ApiVersions(v) = c
            .call(
                ApiKey::ApiVersions,
                0,
                RequestKind::ApiVersions(ApiVersionsRequest::default()),
            )
            .await?
        else {
            return Err(ClientError("ApiVersions answered with another API".into()));
        };
        if v.error_code != 0 {
            return Err(ClientError(format!("ApiVersions error {}", v.error_code)));
        }
        for k in v.api_keys {
            c.versions.insert(k.api_key, (k.min_version, k.max_version));
        }
        if let Some(login) = &security.sasl {
            c.log_in(login).await?;
        }
        Ok(c)
    }

    /// SaslHandshake v1 naming the mechanism, then SaslAuthenticate until the mechanism is done
    /// (Kafka's order, KIP-152).
    async fn log_in(&mut self, login: &crate::net::sasl::Login) -> Result<(), ClientError> {
        let mechanism = login.mechanism.name();
        let failed = |why: String| {
            ClientError(format!(
                "SASL {mechanism} login as {:?} failed: {why}",
                login.username
            ))
        };
        let hv = self.version(ApiKey::SaslHandshake, 1, 1)?;
        let ResponseKind::SaslHandshake(h) = self
            .call(
                ApiKey::SaslHandshake,
                hv,
                RequestKind::SaslHandshake(
                    SaslHandshakeRequest::default()
                        .with_mechanism(crate::net::wire::str_bytes(mechanism)),
                ),
            )
            .await?
        else {
            return Err(failed("SaslHandshake answered with another API".into()));
        };
        if h.error_code != 0 {
            let accepted: Vec<&str> = h.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(failed(format!(
                "{} (the broker accepts {accepted:?})",
                error_name(h.error_code)
            )));
        }
        let av = self.version(ApiKey::SaslAuthenticate, 0, 2)?;
        let password = login.password.read().map_err(|e| failed(e.to_string()))?;
        let (mut session, mut message) = crate::net::sasl::ClientSession::start(login, &password);
        loop {
            let ResponseKind::SaslAuthenticate(r) = self
                .call(
                    ApiKey::SaslAuthenticate,
                    av,
                    RequestKind::SaslAuthenticate(
                        SaslAuthenticateRequest::default().with_auth_bytes(message.into()),
                    ),
                )
                .await?
            else {
                return Err(failed("SaslAuthenticate answered with another API".into()));
            };
            if r.error_code != 0 {
                let said = r.error_message.as_ref().map_or("", |m| m.as_str());
                return Err(failed(format!("{}: {said}", error_name(r.error_code))));
            }
            match session
                .next(&r.auth_bytes)
                .map_err(|e| failed(e.to_string()))?
            {
                Some(next) => message = next,
                None => {
                    if r.session_lifetime_ms > 0 {
                        let ms = r.session_lifetime_ms as f64 * SESSION_SHARE;
                        self.session_ends =
                            Some(std::time::Instant::now() + Duration::from_millis(ms as u64));
                    }
                    return Ok(());
                }
            }
        }
    }

    /// The highest version of `key` both sides speak, up to `ours_max`.
    pub fn version(&self, key: ApiKey, ours_min: i16, ours_max: i16) -> Result<i16, ClientError> {
        let (lo, hi) = self
            .versions
            .get(&(key as i16))
            .copied()
            .ok_or_else(|| ClientError(format!("the source does not serve {key:?}")))?;
        let v = hi.min(ours_max);
        if v < lo.max(ours_min) {
            return Err(ClientError(format!(
                "no common version of {key:?} (source {lo}..={hi}, ours {ours_min}..={ours_max})"
            )));
        }
        Ok(v)
    }

    /// Sends a request; its answer is read by a later `recv`, in order.
    pub async fn send(
        &mut self,
        key: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<(), ClientError> {
        if self
            .session_ends
            .is_some_and(|t| std::time::Instant::now() >= t)
        {
            return Err(ClientError(
                "the broker's SASL session lifetime is nearly over: reconnecting".into(),
            ));
        }
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(crate::net::wire::str_bytes("mirrorlog-mirror")));
        let frame = encode_request(&header, &body).map_err(|e| ClientError(e.to_string()))?;
        tokio::time::timeout(CALL_TIMEOUT, self.stream.write_all(&frame))
            .await
            .map_err(|_| ClientError("sending: timed out".into()))?
            .map_err(|e| ClientError(format!("sending: {e}")))?;
        self.in_flight.push_back((key, version, correlation_id));
        Ok(())
    }

    /// Reads the answer to the oldest request sent.
    pub async fn recv(&mut self) -> Result<ResponseKind, ClientError> {
        let (key, version, correlation_id) = self
            .in_flight
            .pop_front()
            .ok_or_else(|| ClientError("nothing in flight".into()))?;
        let frame = tokio::time::timeout(
            CALL_TIMEOUT,
            read_frame(&mut self.stream, RESPONSE_BYTES_MAX),
        )
        .await
        .map_err(|_| ClientError("waiting for an answer: timed out".into()))?
        .map_err(|e: wire::WireError| {
            // A TLS record's header read as a frame length (0x15 0x03 ..: an alert; 0x16 0x03
            // ..: a handshake): the broker speaks TLS and this connection does not.
            let tls = matches!(e, wire::WireError::TooLarge { size, .. }
                if matches!(size >> 24, 0x15 | 0x16) && (size >> 16) & 0xff == 0x03);
            if tls {
                ClientError(format!(
                    "reading: {e} — the broker answered with TLS: set security_protocol SSL"
                ))
            } else {
                ClientError(format!("reading: {e}"))
            }
        })?;
        decode_response(key, version, correlation_id, frame).map_err(|e| ClientError(e.to_string()))
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Sends and waits for the answer.
    pub async fn call(
        &mut self,
        key: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, ClientError> {
        self.send(key, version, body).await?;
        self.recv().await
    }
}

/// Kafka's name of an error code with the code (`SASL_AUTHENTICATION_FAILED (58)`), for the
/// reasons logs and the admin surface show.
pub fn error_name(code: i16) -> String {
    use kafka_protocol::error::ResponseError;
    let Some(e) =
        ResponseError::try_from_code(code).filter(|e| !matches!(e, ResponseError::Unknown(_)))
    else {
        return format!("error {code}");
    };
    let mut name = String::new();
    for (i, c) in format!("{e:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    format!("{name} ({code})")
}
