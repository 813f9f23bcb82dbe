//! Who may use the admin surface: every change (any method but GET) carries the bearer token
//! (`Authorization: Bearer TOKEN`), and every request names a host it may be reached by, so a
//! web page cannot drive it through the operator's browser (DNS rebinding: a page's own name
//! resolving to loopback; cross-site requests: a foreign `Origin`).
//!
//! The token is read from `admin.token.file`; without one the broker makes a random token at
//! its first start in `<log.dirs>/broker/admin.token` (mode 0600) and keeps it there, so the
//! surface is never open by default and an operator on the host reads the file. A host is
//! accepted when it is an IP address, `localhost`, or named in `admin.allowed.hosts`.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Bytes of randomness in a token made here (hex-encoded).
const TOKEN_BYTES: usize = 32;

/// The admin surface's rules.
#[derive(Clone)]
pub struct Access {
    token: String,
    allowed_hosts: Vec<String>,
}

/// Why a request is refused, with its HTTP status.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 401 (no or a wrong token), 403 (a host or origin not allowed) or 400 (no Host).
    pub status: u16,
    /// Why.
    pub message: String,
}

/// Where the token is kept when `admin.token.file` is not given.
pub fn default_token_file(state_dir: &Path) -> PathBuf {
    state_dir.join("admin.token")
}

/// Why the admin token could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The file (or its directory) could not be read, made or written.
    #[error("{doing} the admin token {}: {source}", path.display())]
    Io {
        /// What was being done.
        doing: &'static str,
        /// The file or directory.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds no token.
    #[error("the admin token file {} is empty", .0.display())]
    Empty(std::path::PathBuf),
}

fn io(doing: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> TokenError {
    let path = path.to_path_buf();
    move |source| TokenError::Io {
        doing,
        path,
        source,
    }
}

impl Access {
    /// The token of `file` (its one line), made first when `create` and the file is missing.
    ///
    /// # Errors
    /// The file cannot be read or written, or holds an empty token.
    pub fn load(file: &Path, create: bool, allowed_hosts: Vec<String>) -> Result<Self, TokenError> {
        if create && !file.exists() {
            write_new_token(file)?;
        }
        let text = std::fs::read_to_string(file).map_err(io("reading", file))?;
        let token = text.trim().to_string();
        if token.is_empty() {
            return Err(TokenError::Empty(file.to_path_buf()));
        }
        Ok(Access {
            token,
            allowed_hosts,
        })
    }

    /// Checks one request: its method (any but GET needs the token), `Host`, `Origin` and
    /// `Authorization` headers.
    ///
    /// # Errors
    /// Why it is refused.
    #[cfg(test)]
    pub fn check(
        &self,
        method: &str,
        host: Option<&str>,
        origin: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<(), Refusal> {
        self.check_with(method != "GET", host, origin, authorization)
    }

    /// As [`Access::check`], the token asked for when `needs_token` (every change, and a
    /// read the configuration gates: `GET /metrics` with `metrics.require.token=true`).
    ///
    /// # Errors
    /// Why it is refused.
    pub fn check_with(
        &self,
        needs_token: bool,
        host: Option<&str>,
        origin: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<(), Refusal> {
        let host = host.ok_or_else(|| Refusal {
            status: 400,
            message: "the request names no Host".into(),
        })?;
        if !self.host_allowed(host) {
            return Err(Refusal {
                status: 403,
                message: format!(
                    "Host {host:?} is not an address, localhost or in admin.allowed.hosts"
                ),
            });
        }
        if let Some(origin) = origin {
            let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
            if !self.host_allowed(origin_host) {
                return Err(Refusal {
                    status: 403,
                    message: format!("Origin {origin:?} is not allowed"),
                });
            }
        }
        if !needs_token {
            return Ok(());
        }
        let given = authorization
            .and_then(|a| {
                a.strip_prefix("Bearer ")
                    .or_else(|| a.strip_prefix("bearer "))
            })
            .map(str::trim);
        match given {
            Some(t) if crate::net::sasl::scram::same(t.as_bytes(), self.token.as_bytes()) => Ok(()),
            Some(_) => Err(Refusal {
                status: 401,
                message: "wrong bearer token".into(),
            }),
            None => Err(Refusal {
                status: 401,
                message: "this request needs Authorization: Bearer TOKEN (the token is in \
                          admin.token.file, by default <log.dirs>/broker/admin.token)"
                    .into(),
            }),
        }
    }

    /// `host` (with or without a port; IPv6 in brackets) is an address, `localhost`, or
    /// allowed by name.
    fn host_allowed(&self, host: &str) -> bool {
        let name = if let Some(rest) = host.strip_prefix('[') {
            rest.split_once(']').map_or(rest, |(ip, _)| ip)
        } else {
            host.rsplit_once(':')
                .filter(|(_, port)| port.bytes().all(|c| c.is_ascii_digit()))
                .map_or(host, |(h, _)| h)
        };
        name.parse::<std::net::IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || self
                .allowed_hosts
                .iter()
                .any(|a| a.eq_ignore_ascii_case(name))
    }
}

fn write_new_token(file: &Path) -> Result<(), TokenError> {
    use std::fmt::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let bytes = crate::net::sasl::scram::random::<TOKEN_BYTES>();
    let mut token = String::with_capacity(TOKEN_BYTES * 2 + 1);
    for b in bytes {
        let _ = write!(token, "{b:02x}");
    }
    token.push('\n');
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(io("making the directory of", file))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)
        .map_err(io("creating", file))?;
    f.write_all(token.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(io("writing", file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_need_the_token_and_hosts_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broker/admin.token");
        let a = Access::load(&file, true, vec!["broker.example".into()]).unwrap();
        let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
        assert_eq!(token.len(), 64);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // Loaded again: the same token.
        let again = Access::load(&file, true, Vec::new()).unwrap();
        assert_eq!(again.token, token);
        let bearer = format!("Bearer {token}");
        let host = Some("127.0.0.1:9644");
        assert_eq!(a.check("GET", host, None, None), Ok(()));
        assert_eq!(a.check("POST", host, None, Some(&bearer)), Ok(()));
        assert_eq!(a.check("POST", host, None, None).unwrap_err().status, 401);
        assert_eq!(
            a.check("POST", host, None, Some("Bearer nope"))
                .unwrap_err()
                .status,
            401
        );
        for ok in [
            "localhost:9644",
            "[::1]:9644",
            "10.0.0.5",
            "Broker.Example:80",
        ] {
            assert_eq!(a.check("GET", Some(ok), None, None), Ok(()), "{ok}");
        }
        for bad in ["evil.example:9644", "127.0.0.1.evil.example"] {
            assert_eq!(
                a.check("GET", Some(bad), None, None).unwrap_err().status,
                403
            );
        }
        assert_eq!(a.check("GET", None, None, None).unwrap_err().status, 400);
        assert_eq!(
            a.check("POST", host, Some("https://evil.example"), Some(&bearer))
                .unwrap_err()
                .status,
            403
        );
        assert_eq!(
            a.check("POST", host, Some("http://localhost:9644"), Some(&bearer)),
            Ok(())
        );
        // A given file that does not exist is not made.
        assert!(Access::load(&dir.path().join("none"), false, Vec::new()).is_err());
    }
}
