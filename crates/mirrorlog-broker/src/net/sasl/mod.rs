//! SASL, one code for both ends, as Kafka speaks it (KIP-43, KIP-84, KIP-152): PLAIN and
//! SCRAM-SHA-256/512. The mirror fetcher logs in to a source with a [`Login`] (its password read
//! from a file or the environment each time it connects, never from a command line or a stored
//! mirror spec) through [`ClientSession`]; the broker's Kafka listener checks logins with a
//! [`ServerSession`] against its [`Users`]. The Kafka framing (SaslHandshake, SaslAuthenticate)
//! is the connection's work: `client.rs` and `kafka/listener.rs`.

mod plain;
pub mod scram;
pub mod users;

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
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                format!(
                    "SASL mechanism {name:?} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
                )
            })
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
    pub fn read(&self) -> Result<String, String> {
        let password = match self {
            Secret::File(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("reading the password file {}: {e}", path.display()))?;
                text.strip_suffix('\n')
                    .map(|t| t.strip_suffix('\r').unwrap_or(t))
                    .unwrap_or(&text)
                    .to_string()
            }
            Secret::Env(name) => std::env::var(name).map_err(|_| {
                format!("the environment variable {name} (the password) is not set")
            })?,
        };
        if password.is_empty() {
            return Err("the SASL password is empty".into());
        }
        Ok(password)
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
    pub fn next(&mut self, server: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match std::mem::replace(self, ClientSession::Done) {
            ClientSession::Plain => Ok(None),
            ClientSession::ScramFirst(mut c) => {
                let fin = c.final_message(server)?;
                *self = ClientSession::ScramFinal(c);
                Ok(Some(fin))
            }
            ClientSession::ScramFinal(c) => c.check_final(server).map(|()| None),
            ClientSession::Done => Err("a SASL answer after the login ended".into()),
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
    pub fn step(&mut self, users: &Users, message: &[u8]) -> Result<ServerStep, String> {
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
                    Err(format!("wrong user name or password (user {user:?})"))
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
                        Err(e) => break Err(e),
                        Ok(ServerStep::Continue(b)) => match c.next(&b) {
                            Ok(Some(next)) => msg = next,
                            Ok(None) => break Err("client ended early".into()),
                            Err(e) => break Err(e),
                        },
                        Ok(ServerStep::Done { user, last }) => {
                            break c.next(&last).map(|rest| {
                                assert!(rest.is_none());
                                user
                            })
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
            Mechanism::parse("SCRAM-SHA-512"),
            Ok(Mechanism::ScramSha512)
        );
        assert!(Mechanism::parse("GSSAPI")
            .unwrap_err()
            .contains("not served"));
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
        assert!(Secret::Env("MIRRORLOG_TEST_SURELY_UNSET_PW".into())
            .read()
            .unwrap_err()
            .contains("not set"));
    }
}
