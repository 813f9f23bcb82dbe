//! What the `topics` and `groups` commands share: a Kafka connection to `--bootstrap` (the
//! broker's Kafka listener, spoken as any admin client speaks it), each call's version agreed
//! with the broker (ApiVersions), and the exit codes the `mirrors` command uses.

use crate::net::client::{error_name, Client};
use clap::{Arg, ArgAction, ArgMatches};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

/// The broker refused the request (a Kafka error code), or what was named does not exist.
pub const EXIT_REFUSED: u8 = super::mirrors::EXIT_REFUSED;
/// No answer: the broker unreachable, or it broke the connection.
pub const EXIT_NO_ANSWER: u8 = super::mirrors::EXIT_NO_ANSWER;

/// Why a command failed: its exit code and the reason for stderr.
pub type Failure = (u8, String);

/// `--bootstrap` and `--json`, on every subcommand.
pub fn global_args() -> [Arg; 2] {
    [
        Arg::new("bootstrap")
            .long("bootstrap")
            .value_name("HOST:PORT")
            .default_value("127.0.0.1:9092")
            .global(true)
            .help("The broker's Kafka listener (PLAINTEXT)"),
        Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .global(true)
            .help("Print JSON instead of tables"),
    ]
}

/// A connection and the runtime it runs on.
pub struct Kafka {
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl Kafka {
    /// Connects to `--bootstrap`.
    ///
    /// # Errors
    /// No runtime, or the broker unreachable ([`EXIT_NO_ANSWER`]).
    pub fn connect(m: &ArgMatches) -> Result<Kafka, Failure> {
        let addr = m
            .get_one::<String>("bootstrap")
            .cloned()
            .unwrap_or_default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| (EXIT_NO_ANSWER, format!("starting a runtime: {e}")))?;
        let client = runtime
            .block_on(Client::connect(&addr))
            .map_err(|e| (EXIT_NO_ANSWER, format!("{addr}: {}", e.0)))?;
        Ok(Kafka { runtime, client })
    }

    /// One request of `key`, at the highest version both sides speak in `min..=max`.
    ///
    /// # Errors
    /// No common version ([`EXIT_REFUSED`]), or no answer ([`EXIT_NO_ANSWER`]).
    pub fn call(
        &mut self,
        key: ApiKey,
        min: i16,
        max: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, Failure> {
        let version = self
            .client
            .version(key, min, max)
            .map_err(|e| (EXIT_REFUSED, e.0))?;
        self.runtime
            .block_on(self.client.call(key, version, body))
            .map_err(|e| (EXIT_NO_ANSWER, format!("{key:?}: {}", e.0)))
    }
}

/// A Kafka error code as a refusal naming what it was for (`None` for 0).
pub fn refused(code: i16, what: &str, message: Option<&str>) -> Option<Failure> {
    (code != 0).then(|| {
        let extra = message.map_or(String::new(), |m| format!(": {m}"));
        (EXIT_REFUSED, format!("{what}: {}{extra}", error_name(code)))
    })
}

/// The first refusal among `answers` (each an error code and its message), naming `what`.
///
/// # Errors
/// That refusal ([`EXIT_REFUSED`]).
pub fn check<'a>(
    answers: impl IntoIterator<Item = (i16, Option<&'a kafka_protocol::protocol::StrBytes>)>,
    what: &str,
) -> Result<(), Failure> {
    for (code, message) in answers {
        if let Some(f) = refused(code, what, message.map(|m| m.as_str())) {
            return Err(f);
        }
    }
    Ok(())
}

/// Prints the outcome and gives the exit code (`prefix` names the command on stderr).
pub fn finish(prefix: &str, outcome: Result<String, Failure>) -> u8 {
    match outcome {
        Ok(text) => {
            println!("{}", text.trim_end());
            super::mirrors::EXIT_OK
        }
        Err((code, why)) => {
            eprintln!("mirrorlog-broker {prefix}: {why}");
            code
        }
    }
}

/// Builds a string the protocol carries.
pub fn s(v: &str) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(v.to_string())
}

/// A topic's name as the protocol carries it.
pub fn topic(v: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(s(v))
}
