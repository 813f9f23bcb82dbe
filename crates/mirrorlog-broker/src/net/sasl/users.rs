//! The listener's users (`sasl.users.file`): one `user:password` a line (`#` starts a comment;
//! the password is everything after the first `:`, so user names cannot hold one). At load
//! each password becomes its SCRAM-SHA-256 and SCRAM-SHA-512 credentials (a fresh random salt,
//! [`ITERATIONS`] iterations) and is dropped; PLAIN logins are checked against the SHA-256
//! credential. An unknown user is shown a salt derived from its name with a secret made at
//! start, so the exchange does not tell which users exist.

use super::scram::{self, Credential};
use super::{Mechanism, SaslError};
use std::collections::HashMap;
use std::path::Path;

/// Iterations of the credentials made at load (Kafka's default for `kafka-configs`).
pub const ITERATIONS: u32 = 4096;
/// Users in one file at most (each costs two key derivations at start).
pub const USERS_MAX: usize = 10_000;

/// The users a listener accepts.
pub struct Users {
    credentials: HashMap<String, [Credential; 2]>,
    decoy_secret: [u8; 32],
}

/// The `(user, password)` lines of a users file.
///
/// # Errors
/// The file cannot be read, or a line is not `user:password` with both parts non-empty, or a
/// user is named twice, or there are none or more than [`USERS_MAX`].
pub fn read_file(path: &Path) -> Result<Vec<(String, String)>, SaslError> {
    let error = |reason: String| SaslError::UsersFile {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let mut users: Vec<(String, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let at = |what: String| error(format!("line {}: {what}", n + 1));
        let (user, password) = line
            .split_once(':')
            .ok_or_else(|| at("expected user:password".into()))?;
        let user = user.trim();
        if user.is_empty() || password.is_empty() {
            return Err(at("an empty user name or password".into()));
        }
        if users.iter().any(|(u, _)| u == user) {
            return Err(at(format!("user {user:?} named twice")));
        }
        users.push((user.to_string(), password.to_string()));
    }
    if users.is_empty() {
        return Err(error("no users".into()));
    }
    if users.len() > USERS_MAX {
        return Err(error(format!(
            "{} users (at most {USERS_MAX})",
            users.len()
        )));
    }
    Ok(users)
}

impl Users {
    /// The users of `path` (see [`read_file`]), their credentials made.
    ///
    /// # Errors
    /// As [`read_file`].
    pub fn load(path: &Path) -> Result<Self, SaslError> {
        Ok(Self::from_passwords(read_file(path)?))
    }

    /// Users from `(name, password)` pairs.
    pub fn from_passwords(users: Vec<(String, String)>) -> Self {
        let credentials = users
            .into_iter()
            .map(|(user, password)| {
                let make = |m: Mechanism| {
                    let salt = scram::random::<{ scram::SALT_BYTES }>();
                    Credential::derive(m, &password, &salt, ITERATIONS)
                };
                let creds = [make(Mechanism::ScramSha256), make(Mechanism::ScramSha512)];
                (user, creds)
            })
            .collect();
        Users {
            credentials,
            decoy_secret: scram::random::<32>(),
        }
    }

    /// `user`'s credential for a SCRAM mechanism.
    pub fn credential(&self, m: Mechanism, user: &str) -> Option<Credential> {
        let c = self.credentials.get(user)?;
        match m {
            Mechanism::ScramSha512 => Some(c[1].clone()),
            Mechanism::ScramSha256 | Mechanism::Plain => Some(c[0].clone()),
        }
    }

    /// The salt and iterations shown for an unknown `user`: the same each time for that name.
    pub fn decoy(&self, user: &str) -> (Vec<u8>, u32) {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.decoy_secret);
        let salt = ring::hmac::sign(&key, user.as_bytes()).as_ref().to_vec();
        (salt, ITERATIONS)
    }

    /// Whether `password` is `user`'s (PLAIN). An unknown user costs the same derivation.
    pub fn check_password(&self, user: &str, password: &str) -> bool {
        let m = Mechanism::ScramSha256;
        match self.credential(m, user) {
            Some(c) => c.matches(m, password),
            None => {
                let (salt, iterations) = self.decoy(user);
                let _ = Credential::derive(m, password, &salt, iterations);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_users_file_is_read_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users");
        std::fs::write(&p, "# users\nalice:a:b c\n\n  bob :pw\r\n").unwrap();
        assert_eq!(
            read_file(&p).unwrap(),
            vec![
                ("alice".to_string(), "a:b c".to_string()),
                ("bob".to_string(), "pw".to_string())
            ]
        );
        for bad in ["alice\n", ":pw\n", "alice:\n", "a:1\na:2\n", "# none\n"] {
            std::fs::write(&p, bad).unwrap();
            assert!(read_file(&p).is_err(), "{bad:?} accepted");
        }
        assert!(read_file(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn passwords_are_checked_and_decoys_are_stable() {
        let u = Users::from_passwords(vec![("alice".into(), "pw".into())]);
        assert!(u.check_password("alice", "pw"));
        assert!(!u.check_password("alice", "pW"));
        assert!(!u.check_password("bob", "pw"));
        assert_eq!(u.decoy("bob"), u.decoy("bob"));
        assert_ne!(u.decoy("bob").0, u.decoy("carol").0);
        let c256 = u.credential(Mechanism::ScramSha256, "alice").unwrap();
        let c512 = u.credential(Mechanism::ScramSha512, "alice").unwrap();
        assert_ne!(c256.salt, c512.salt);
        assert_eq!(c512.stored_key.len(), 64);
    }
}
