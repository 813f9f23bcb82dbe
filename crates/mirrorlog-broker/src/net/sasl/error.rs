//! Why a login, or the set-up of one, failed.

use std::path::PathBuf;

/// A SASL failure, at either end. The Kafka listener tells a client only that its
/// authentication failed; the variant and its text are for the broker's log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SaslError {
    /// A mechanism this broker does not serve.
    #[error("SASL mechanism {0:?} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")]
    NotServed(String),
    /// A part of a mechanism that is not served (channel binding, delegation tokens, a
    /// mandatory extension).
    #[error("{0} is not served")]
    FeatureNotServed(&'static str),
    /// A client's password could not be read from where its login says.
    #[error("the SASL password ({from}): {reason}")]
    Password {
        /// The file or environment variable.
        from: String,
        /// Why.
        reason: String,
    },
    /// A users file that cannot be used.
    #[error("{}: {reason}", path.display())]
    UsersFile {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the line number, where one line is).
        reason: String,
    },
    /// A message that does not follow the mechanism.
    #[error("a malformed SASL message: {0}")]
    Malformed(String),
    /// The server refused the client: an unknown user, a wrong password, an authorization id
    /// that is not the user.
    #[error("authentication failed: {0}")]
    Refused(String),
    /// The server did not prove it holds the user's credential, or said no (client side).
    #[error("the server: {0}")]
    Server(String),
    /// A message after the exchange ended, or before its turn.
    #[error("a SASL message out of turn: {0}")]
    OutOfTurn(&'static str),
}
