//! SaslHandshake and SaslAuthenticate that reach the handlers: after a connection's login
//! (`login.rs` runs it before any handler), or on a listener without SASL. Kafka's `KafkaApis`
//! answers both `ILLEGAL_SASL_STATE`.

use super::str_bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse};

/// SaslHandshake outside a login.
pub fn handshake_refused() -> ResponseKind {
    let mut r = SaslHandshakeResponse::default();
    r.error_code = ResponseError::IllegalSaslState.code();
    ResponseKind::SaslHandshake(r)
}

/// SaslAuthenticate outside a login.
pub fn authenticate_refused() -> ResponseKind {
    let mut r = SaslAuthenticateResponse::default();
    r.error_code = ResponseError::IllegalSaslState.code();
    r.error_message = Some(str_bytes(
        "SaslAuthenticate outside a login: the connection is logged in, or its listener has no SASL",
    ));
    ResponseKind::SaslAuthenticate(r)
}
