//! A client of the admin surface for the command line: one HTTP/1.1 request per connection
//! (as the surface serves them), with the bearer token, answered with its status and JSON.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// How long the surface may take to answer (a mirror's start asks its source first).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request did not get an answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The token file could not be read.
    #[error("reading the admin token {path}: {source}")]
    Token {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The surface could not be reached, or broke off.
    #[error("the admin surface at {addr}: {source}")]
    Unreachable {
        /// Its address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// What came back is not an HTTP answer.
    #[error("the admin surface at {addr} answered something that is not HTTP")]
    NotHttp {
        /// Its address.
        addr: String,
    },
}

/// The admin surface at `addr`, with the token read from `token_file`.
pub struct AdminClient {
    addr: String,
    token: String,
}

impl AdminClient {
    /// Reads the token.
    ///
    /// # Errors
    /// The token file cannot be read.
    pub fn new(addr: &str, token_file: &Path) -> Result<Self, ClientError> {
        let token = std::fs::read_to_string(token_file).map_err(|source| ClientError::Token {
            path: token_file.display().to_string(),
            source,
        })?;
        Ok(AdminClient {
            addr: addr.to_string(),
            token: token.trim().to_string(),
        })
    }

    /// One request: the answer's status and its body as JSON (`Null` when it is none).
    ///
    /// # Errors
    /// The surface cannot be reached, or does not answer HTTP.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: &Value,
    ) -> Result<(u16, Value), ClientError> {
        let unreachable = |source| ClientError::Unreachable {
            addr: self.addr.clone(),
            source,
        };
        let addr = self
            .addr
            .to_socket_addrs()
            .map_err(unreachable)?
            .next()
            .ok_or_else(|| {
                unreachable(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no address",
                ))
            })?;
        let mut s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(unreachable)?;
        s.set_read_timeout(Some(ANSWER_TIMEOUT))
            .map_err(unreachable)?;
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            self.addr,
            self.token,
            body.len()
        )
        .map_err(unreachable)?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).map_err(unreachable)?;
        let text = String::from_utf8_lossy(&answer);
        let not_http = || ClientError::NotHttp {
            addr: self.addr.clone(),
        };
        let status = text
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(not_http)?;
        let json = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.trim())
            .filter(|b| !b.is_empty())
            .map_or(Value::Null, |b| {
                serde_json::from_str(b).unwrap_or_else(|_| Value::String(b.to_string()))
            });
        Ok((status, json))
    }
}
