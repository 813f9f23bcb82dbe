//! SASL, one code for both ends, as Kafka speaks it (KIP-43, KIP-84, KIP-152): PLAIN and
//! SCRAM-SHA-256/512. The mirror fetcher logs in to a source with a [`Login`] (its password read
//! from a file or the environment each time it connects, never from a command line or a stored
//! mirror spec) through [`ClientSession`]; the broker's Kafka listener checks logins with a
//! [`ServerSession`] against its [`Users`]. The Kafka framing (SaslHandshake, SaslAuthenticate)
//! is the connection's work: `client.rs` and `kafka/listener.rs`.

mod error;
mod plain;
pub mod scram;
pub mod users;

pub use error::SaslError;
pub use scram::ServerStep;
pub use users::Users;

/// A SASL mechanism served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// PLAIN (RFC 4616): the password itself, so only over TLS in earnest.
    Plain,
    /// SCRAM-SHA-256 (RFC 7677).
    ScramSha256,
    /// SCRAM-SHA-512.
    ScramSha512,
}

impl Mechanism {
    /// Every mechanism served.
    pub const ALL: [Mechanism; 3] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
    ];

    /// Its name, as Kafka's `sasl.mechanism` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    /// The mechanism named `name`.
    ///
    /// # Errors
    /// A name not served, with the names that are.
    pub fn parse(name: &str) -> Result<Self, SaslError> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| SaslError::NotServed(name.to_string()))
    }
}

/// Where a client's password is read from, each time it is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// A file; its one line (a final newline is not part of the password).
    File(std::path::PathBuf),
    /// An environment variable of the broker's process.
    Env(String),
}

impl Secret {
    /// The password.
    ///
    /// # Errors
    /// The file cannot be read, the variable is not set, or the password is empty.
    pub fn read(&self) -> Result<String, SaslError> {
        let password = match self {
            Secret::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| self.error(e.to_string()))?;
                text.strip_suffix('\n')
                    .map(|t| t.strip_suffix('\r').unwrap_or(t))
                    .unwrap_or(&text)
                    .to_string()
            }
            Secret::Env(name) => {
                std::env::var(name).map_err(|_| self.error(format!("{name} is not set")))?
            }
        };
        if password.is_empty() {
            return Err(self.error("empty".into()));
        }
        Ok(password)
    }

    fn error(&self, reason: String) -> SaslError {
        let from = match self {
            Secret::File(path) => format!("the file {}", path.display()),
            Secret::Env(name) => format!("the environment variable {name}"),
        };
        SaslError::Password { from, reason }
    }
}

/// How a client logs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// The user name.
    pub username: String,
    /// The password's source.
    pub password: Secret,
}

/// The client's side of one login.
pub enum ClientSession {
    /// PLAIN, its one message sent: the server's answer ends it.
    Plain,
    /// SCRAM, waiting for the server-first message.
    ScramFirst(scram::Client),
    /// SCRAM, waiting for the server-final message.
    ScramFinal(scram::Client),
    /// Over.
    Done,
}

impl ClientSession {
    /// Starts a login with `password`; the bytes are the first message.
    pub fn start(login: &Login, password: &str) -> (Self, Vec<u8>) {
        match login.mechanism {
            Mechanism::Plain => (
                ClientSession::Plain,
                plain::message(&login.username, password),
            ),
            m => {
                let (c, first) = scram::Client::new(m, &login.username, password);
                (ClientSession::ScramFirst(c), first)
            }
        }
    }

    /// Takes the server's answer: `Some` is the next message to send, `None` ends the login.
    ///
    /// # Errors
    /// The server's answer is not what the mechanism expects (SCRAM: the server did not prove
    /// it holds the credential).
    pub fn next(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match std::mem::replace(self, ClientSession::Done) {
            ClientSession::Plain => Ok(None),
            ClientSession::ScramFirst(mut c) => {
                let fin = c.final_message(server)?;
                *self = ClientSession::ScramFinal(c);
                Ok(Some(fin))
            }
            ClientSession::ScramFinal(c) => c.check_final(server).map(|()| None),
            ClientSession::Done => Err(SaslError::OutOfTurn("an answer after the login ended")),
        }
    }
}

/// What a listener accepts: its mechanisms (Kafka's `sasl.enabled.mechanisms`) and users.
pub struct Accepted {
    /// Mechanisms, in the order configured.
    pub mechanisms: Vec<Mechanism>,
    /// Users.
    pub users: Users,
}

/// The server's side of one login.
pub struct ServerSession {
    mechanism: Mechanism,
    scram: scram::Server,
}

impl ServerSession {
    /// A login by `mechanism`.
    pub fn new(mechanism: Mechanism) -> Self {
        ServerSession {
            mechanism,
            scram: scram::Server::First,
        }
    }

    /// Takes the client's next message.
    ///
    /// # Errors
    /// Why the login failed (for the log; the client is told only that it failed).
    pub fn step(&mut self, users: &Users, message: &[u8]) -> Result<ServerStep, SaslError> {
        let m = self.mechanism;
        match m {
            Mechanism::Plain => {
                let (user, password) = plain::parse(message)?;
                if users.check_password(&user, &password) {
                    Ok(ServerStep::Done {
                        user,
                        last: Vec::new(),
                    })
                } else {
                    Err(SaslError::Refused(format!(
                        "wrong user name or password (user {user:?})"
                    )))
                }
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let lookup = |u: &str| users.credential(m, u);
                let decoy = |u: &str| users.decoy(u);
                self.scram.step(m, message, &lookup, &decoy)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client session against a server session, for each mechanism, through the same types
    /// the connections drive.
    #[test]
    fn sessions_log_in_with_the_right_password_only() {
        let users = Users::from_passwords(vec![("mirror".into(), "s3cret".into())]);
        for m in Mechanism::ALL {
            for (password, ok) in [("s3cret", true), ("guess", false)] {
                let login = Login {
                    mechanism: m,
                    username: "mirror".into(),
                    password: Secret::Env("UNUSED".into()),
                };
                let (mut c, mut msg) = ClientSession::start(&login, password);
                let mut s = ServerSession::new(m);
                let result = loop {
                    match s.step(&users, &msg) {
                        Err(e) => break Err(e.to_string()),
                        Ok(ServerStep::Continue(b)) => match c.next(&b) {
                            Ok(Some(next)) => msg = next,
                            Ok(None) => break Err("client ended early".into()),
                            Err(e) => break Err(e.to_string()),
                        },
                        Ok(ServerStep::Done { user, last }) => {
                            break c
                                .next(&last)
                                .map(|rest| {
                                    assert!(rest.is_none());
                                    user
                                })
                                .map_err(|e| e.to_string())
                        }
                    }
                };
                assert_eq!(result.is_ok(), ok, "{m:?} {password}: {result:?}");
                if ok {
                    assert_eq!(result.unwrap(), "mirror");
                }
            }
        }
        assert_eq!(
            Mechanism::parse("SCRAM-SHA-512").unwrap(),
            Mechanism::ScramSha512
        );
        assert!(matches!(
            Mechanism::parse("GSSAPI"),
            Err(SaslError::NotServed(n)) if n == "GSSAPI"
        ));
    }

    #[test]
    fn a_password_is_read_from_a_file_or_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        assert_eq!(Secret::File(f.clone()).read().unwrap(), "s3cret");
        std::fs::write(&f, "").unwrap();
        assert!(Secret::File(f).read().is_err());
        assert!(Secret::File(dir.path().join("none")).read().is_err());
        assert!(matches!(
            Secret::Env("MIRRORLOG_TEST_SURELY_UNSET_PW".into()).read(),
            Err(SaslError::Password { reason, .. }) if reason.contains("not set")
        ));
    }
}
