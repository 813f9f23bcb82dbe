//! How a mirror reaches its source, as Kafka's client settings name it: `security_protocol`
//! (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT`, `SASL_SSL`), `ssl_ca_location` (the CAs' PEM file)
//! and, with SASL, `sasl_mechanism` (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`),
//! `sasl_username` and the password's source: `sasl_password_file` or `sasl_password_env`.
//! The password itself is never stored with the mirror nor given on a command line: it is read
//! from its file or variable each time a connection logs in, so a rotated password is used
//! from the next connection on.

use crate::net::client::Security;
use crate::net::sasl::{Login, Mechanism, Secret};
use serde::{Deserialize, Serialize};

/// A mirror's security settings, as stored with it and as `POST /mirrors` gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceSecurity {
    /// Kafka's `security.protocol` (`None`: `PLAINTEXT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_protocol: Option<String>,
    /// With `SSL` or `SASL_SSL`: the PEM file of the CAs the source's certificates are checked
    /// against (librdkafka's `ssl.ca.location`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_ca_location: Option<String>,
    /// With `SASL_*`: the mechanism.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_mechanism: Option<String>,
    /// With `SASL_*`: the user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_username: Option<String>,
    /// With `SASL_*`: a file holding the password (one line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_password_file: Option<String>,
    /// With `SASL_*`: an environment variable of the broker holding the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_password_env: Option<String>,
}

/// The JSON keys of [`SourceSecurity`]: a `POST /mirrors` naming any of them replaces the
/// mirror's settings as a whole.
pub const KEYS: [&str; 6] = [
    "security_protocol",
    "ssl_ca_location",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password_file",
    "sasl_password_env",
];

/// Why a mirror's security settings cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecurityError {
    /// A protocol Kafka does not name.
    #[error("unknown security_protocol {0:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")]
    UnknownProtocol(String),
    /// A setting the protocol needs is missing.
    #[error("security_protocol {protocol} needs {needs}")]
    Needs {
        /// The protocol.
        protocol: String,
        /// What it needs.
        needs: &'static str,
    },
    /// A setting given that the protocol does not use.
    #[error("{given} given but security_protocol is {protocol}")]
    NotForProtocol {
        /// The setting(s).
        given: &'static str,
        /// The protocol.
        protocol: String,
    },
    /// The CA file.
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsError),
    /// The SASL mechanism.
    #[error(transparent)]
    Sasl(#[from] crate::net::sasl::SaslError),
}

impl SourceSecurity {
    /// The client side of these settings (the CA file read; the password not yet).
    ///
    /// # Errors
    /// An unknown protocol or mechanism, a setting missing for the protocol or given without
    /// it, or a CA file that cannot be used.
    pub fn client(&self) -> Result<Security, SecurityError> {
        let needs = |needs| SecurityError::Needs {
            protocol: self.protocol().to_string(),
            needs,
        };
        let not_for = |given| SecurityError::NotForProtocol {
            given,
            protocol: self.protocol().to_string(),
        };
        let protocol = self.protocol();
        let (tls, sasl) = match protocol {
            "PLAINTEXT" => (false, false),
            "SSL" => (true, false),
            "SASL_PLAINTEXT" => (false, true),
            "SASL_SSL" => (true, true),
            other => return Err(SecurityError::UnknownProtocol(other.to_string())),
        };
        let tls = match (tls, &self.ssl_ca_location) {
            (true, Some(ca)) => Some(crate::net::tls::client_config(std::path::Path::new(ca))?),
            (true, None) => return Err(needs("ssl_ca_location (a PEM file)")),
            (false, Some(_)) => return Err(not_for("ssl_ca_location is")),
            (false, None) => None,
        };
        let sasl = if sasl {
            Some(self.login()?)
        } else {
            let given = [
                &self.sasl_mechanism,
                &self.sasl_username,
                &self.sasl_password_file,
                &self.sasl_password_env,
            ];
            if given.iter().any(|x| x.is_some()) {
                return Err(not_for("sasl_* settings are"));
            }
            None
        };
        Ok(Security { tls, sasl })
    }

    fn protocol(&self) -> &str {
        self.security_protocol.as_deref().unwrap_or("PLAINTEXT")
    }

    fn login(&self) -> Result<Login, SecurityError> {
        let needs = |needs| SecurityError::Needs {
            protocol: self.protocol().to_string(),
            needs,
        };
        let mechanism = self
            .sasl_mechanism
            .as_deref()
            .ok_or_else(|| needs("sasl_mechanism"))?;
        let username = self
            .sasl_username
            .clone()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| needs("sasl_username"))?;
        let password = match (&self.sasl_password_file, &self.sasl_password_env) {
            (Some(f), None) => Secret::File(f.into()),
            (None, Some(v)) => Secret::Env(v.clone()),
            _ => {
                return Err(needs(
                    "one of sasl_password_file and sasl_password_env (the password is never \
                     given inline)",
                ))
            }
        };
        Ok(Login {
            mechanism: Mechanism::parse(mechanism)?,
            username,
            password,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sec(json: serde_json::Value) -> Result<Security, SecurityError> {
        serde_json::from_value::<SourceSecurity>(json)
            .unwrap()
            .client()
    }

    #[test]
    fn settings_are_checked_as_a_whole() {
        assert!(sec(serde_json::json!({})).unwrap().sasl.is_none());
        let ok = sec(serde_json::json!({"security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "m",
            "sasl_password_env": "PW"}))
        .unwrap();
        let login = ok.sasl.unwrap();
        assert_eq!(login.mechanism, Mechanism::ScramSha512);
        assert_eq!(login.password, Secret::Env("PW".into()));
        for (bad, says) in [
            (
                serde_json::json!({"security_protocol": "TLS"}),
                "unknown security_protocol",
            ),
            (
                serde_json::json!({"security_protocol": "SSL"}),
                "ssl_ca_location",
            ),
            (
                serde_json::json!({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                "sasl_username": "m", "sasl_password_env": "PW"}),
                "ssl_ca_location",
            ),
            (
                serde_json::json!({"security_protocol": "SASL_PLAINTEXT",
                "sasl_username": "m", "sasl_password_env": "PW"}),
                "sasl_mechanism",
            ),
            (
                serde_json::json!({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_password_env": "PW"}),
                "sasl_username",
            ),
            (
                serde_json::json!({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_username": "m"}),
                "sasl_password_file",
            ),
            (
                serde_json::json!({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                "sasl_username": "m", "sasl_password_env": "PW",
                "sasl_password_file": "/pw"}),
                "one of",
            ),
            (
                serde_json::json!({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                "sasl_username": "m", "sasl_password_env": "PW"}),
                "not served",
            ),
            (
                serde_json::json!({"sasl_mechanism": "PLAIN"}),
                "security_protocol is PLAINTEXT",
            ),
        ] {
            let e = sec(bad.clone())
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(says), "{bad}: {e:?}");
        }
    }
}
