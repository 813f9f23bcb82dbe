//! The Kafka listeners, as Kafka names and advertises them.
//!
//! - `listeners`: `NAME://HOST:PORT[,NAME://HOST:PORT..]`. A name's security protocol comes
//!   from `listener.security.protocol.map` (`NAME:PROTOCOL,..`; the four protocol names map to
//!   themselves): `PLAINTEXT`, `SSL` (TLS, `ssl.keystore.location`), `SASL_PLAINTEXT` and
//!   `SASL_SSL` (a login first, `sasl.enabled.mechanisms`). A bare `HOST:PORT` is the one
//!   listener of older configurations: TLS when a keystore is set, SASL when mechanisms are.
//! - `advertised.listeners`: `NAME://HOST:PORT` per listener, the address clients are told
//!   (Metadata, FindCoordinator, DescribeCluster) on a connection through that listener; a
//!   listener not named advertises `advertised.host` (or its own address) and its port. An
//!   unspecified address (`0.0.0.0`, `::`) is never advertised: clients would connect to
//!   themselves.

use std::net::SocketAddr;

/// A listener's security protocol (Kafka's `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Plain TCP.
    Plaintext,
    /// TLS.
    Ssl,
    /// A SASL login over plain TCP.
    SaslPlaintext,
    /// A SASL login over TLS.
    SaslSsl,
}

impl Protocol {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Plaintext => "PLAINTEXT",
            Protocol::Ssl => "SSL",
            Protocol::SaslPlaintext => "SASL_PLAINTEXT",
            Protocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Protocol::Plaintext,
            Protocol::Ssl,
            Protocol::SaslPlaintext,
            Protocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }

    /// Whether it speaks TLS.
    pub fn tls(self) -> bool {
        matches!(self, Protocol::Ssl | Protocol::SaslSsl)
    }

    /// Whether it requires a SASL login.
    pub fn sasl(self) -> bool {
        matches!(self, Protocol::SaslPlaintext | Protocol::SaslSsl)
    }
}

/// One listener as configured (its name `None`: a bare `HOST:PORT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Its name.
    pub name: Option<String>,
    /// Where it listens (port 0: the kernel picks).
    pub addr: SocketAddr,
}

/// Why listeners as configured cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenerError {
    /// An entry that does not have the form its setting needs.
    #[error("{entry:?}: expected {expected}")]
    Syntax {
        /// The entry.
        entry: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A listening address that is no IP address and port.
    #[error("{entry:?}: expected HOST:PORT with an IP address ({source})")]
    Address {
        /// The entry.
        entry: String,
        /// Why it did not parse.
        source: std::net::AddrParseError,
    },
    /// A listener named, or advertised, twice.
    #[error("listener {0} is named twice")]
    Twice(String),
    /// Bare and named listeners mixed, or none.
    #[error("{0}")]
    Layout(&'static str),
    /// A name that is no protocol and is not mapped to one.
    #[error("listener {0}: not a protocol name, and not in listener.security.protocol.map")]
    UnknownProtocol(String),
    /// A listener that would advertise `0.0.0.0` or `::`.
    #[error(
        "listener {name} would advertise the meta-address {host}: clients cannot connect to \
         it; set advertised.listeners ({name}://HOST:PORT) or --advertised-host to a name \
         or address they reach (listening on {bound} is fine)"
    )]
    Unspecified {
        /// The listener.
        name: String,
        /// The host it would advertise.
        host: String,
        /// Where it listens.
        bound: SocketAddr,
    },
    /// A TLS listener without a keystore.
    #[error("listener {0} speaks TLS: set ssl.keystore.location")]
    NeedsTls(String),
    /// A SASL listener without mechanisms.
    #[error("listener {0} requires SASL: set sasl.enabled.mechanisms and sasl.users.file")]
    NeedsSasl(String),
}

/// The address of `HOST:PORT` (an IP address; `localhost` is 127.0.0.1; no host, as in
/// Kafka's `PLAINTEXT://:9092`, is every interface).
fn address(value: &str) -> Result<SocketAddr, ListenerError> {
    let value_or_any = if value.starts_with(':') {
        format!("0.0.0.0{value}")
    } else {
        value.to_string()
    };
    value_or_any
        .replace("localhost", "127.0.0.1")
        .parse()
        .map_err(|source| ListenerError::Address {
            entry: value.to_string(),
            source,
        })
}

fn syntax(entry: &str, expected: &'static str) -> ListenerError {
    ListenerError::Syntax {
        entry: entry.to_string(),
        expected,
    }
}

/// `[NAME://]HOST:PORT` entries of `listeners`.
///
/// # Errors
/// An entry that does not parse, a name used twice, or a bare entry among named ones.
pub fn parse_listeners(value: &str) -> Result<Vec<ListenerSpec>, ListenerError> {
    let mut out: Vec<ListenerSpec> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, addr) = match entry.split_once("://") {
            Some((n, a)) => (Some(n.to_ascii_uppercase()), a),
            None => (None, entry),
        };
        let spec = ListenerSpec {
            name,
            addr: address(addr)?,
        };
        if out.iter().any(|l| l.name == spec.name) {
            return Err(match &spec.name {
                Some(n) => ListenerError::Twice(n.clone()),
                None => ListenerError::Layout("a bare HOST:PORT listener must be the only one"),
            });
        }
        out.push(spec);
    }
    if out.is_empty() {
        return Err(ListenerError::Layout("no listener"));
    }
    if out.len() > 1 && out.iter().any(|l| l.name.is_none()) {
        return Err(ListenerError::Layout(
            "with several listeners each is NAME://HOST:PORT",
        ));
    }
    Ok(out)
}

/// `NAME://HOST:PORT` entries of `advertised.listeners` (any host name).
///
/// # Errors
/// An entry without a name, a port, or with a name twice.
pub fn parse_advertised(value: &str) -> Result<Vec<(String, String, u16)>, ListenerError> {
    const FORM: &str = "NAME://HOST:PORT";
    let mut out: Vec<(String, String, u16)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, addr) = entry.split_once("://").ok_or_else(|| syntax(entry, FORM))?;
        let (host, port) = addr.rsplit_once(':').ok_or_else(|| syntax(entry, FORM))?;
        let port: u16 = port
            .parse()
            .map_err(|_| syntax(entry, "NAME://HOST:PORT with a port number"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(syntax(entry, "NAME://HOST:PORT with a host"));
        }
        let name = name.to_ascii_uppercase();
        if out.iter().any(|(n, _, _)| *n == name) {
            return Err(ListenerError::Twice(name));
        }
        out.push((name, host.to_string(), port));
    }
    Ok(out)
}

/// `NAME:PROTOCOL` entries of `listener.security.protocol.map`.
///
/// # Errors
/// An entry that does not parse, or an unknown protocol.
pub fn parse_protocol_map(value: &str) -> Result<Vec<(String, Protocol)>, ListenerError> {
    value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let (name, protocol) = entry
                .split_once(':')
                .ok_or_else(|| syntax(entry, "NAME:PROTOCOL"))?;
            let protocol = Protocol::parse(&protocol.to_ascii_uppercase()).ok_or_else(|| {
                syntax(
                    entry,
                    "NAME:PROTOCOL, the protocol PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                )
            })?;
            Ok((name.to_ascii_uppercase(), protocol))
        })
        .collect()
}

/// A listener resolved: its name, protocol and bound address, and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Its name.
    pub name: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// The host clients are told.
    pub host: String,
    /// The port clients are told.
    pub port: u16,
}

/// Each listener's name and protocol: a named one's by the map (or its own name), a bare
/// one's by `tls` and `sasl` (the settings of older configurations).
///
/// # Errors
/// A name that is no protocol and not in the map.
pub fn protocols(
    specs: &[ListenerSpec],
    map: &[(String, Protocol)],
    tls: bool,
    sasl: bool,
) -> Result<Vec<(String, Protocol)>, ListenerError> {
    specs
        .iter()
        .map(|l| match &l.name {
            Some(n) => map
                .iter()
                .find(|(m, _)| m == n)
                .map(|(_, p)| *p)
                .or_else(|| Protocol::parse(n))
                .map(|p| (n.clone(), p))
                .ok_or_else(|| ListenerError::UnknownProtocol(n.clone())),
            None => {
                let p = match (tls, sasl) {
                    (false, false) => Protocol::Plaintext,
                    (true, false) => Protocol::Ssl,
                    (false, true) => Protocol::SaslPlaintext,
                    (true, true) => Protocol::SaslSsl,
                };
                Ok((p.name().to_string(), p))
            }
        })
        .collect()
}

/// What a listener bound at `bound` advertises: its `advertised.listeners` entry, else
/// `advertised_host` (or the bound address) with the bound port.
///
/// # Errors
/// The address would be unspecified (`0.0.0.0`, `::`).
pub fn advertise(
    name: &str,
    bound: SocketAddr,
    advertised: &[(String, String, u16)],
    advertised_host: &str,
) -> Result<(String, u16), ListenerError> {
    let (host, port) = match advertised.iter().find(|(n, _, _)| n == name) {
        Some((_, h, p)) => (h.clone(), *p),
        None if !advertised_host.is_empty() => (advertised_host.to_string(), bound.port()),
        None => (bound.ip().to_string(), bound.port()),
    };
    if host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified())
    {
        return Err(ListenerError::Unspecified {
            name: name.to_string(),
            host,
            bound,
        });
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_parse_as_kafka_writes_them() {
        let l = parse_listeners("PLAINTEXT://127.0.0.1:9092, sasl_ssl://0.0.0.0:9094").unwrap();
        assert_eq!(l[1].name.as_deref(), Some("SASL_SSL"));
        assert_eq!(parse_listeners("localhost:9092").unwrap()[0].name, None);
        for bad in [
            "",
            "a:b",
            "X://1.2.3.4:1,X://1.2.3.4:2",
            "1.2.3.4:1,X://1.2.3.4:2",
        ] {
            assert!(parse_listeners(bad).is_err(), "{bad}");
        }
        let map = parse_protocol_map("INTERNAL:PLAINTEXT,external:sasl_ssl").unwrap();
        let specs =
            parse_listeners("INTERNAL://127.0.0.1:1,EXTERNAL://0.0.0.0:2,SSL://[::1]:3").unwrap();
        assert_eq!(
            protocols(&specs, &map, false, false).unwrap(),
            vec![
                ("INTERNAL".to_string(), Protocol::Plaintext),
                ("EXTERNAL".to_string(), Protocol::SaslSsl),
                ("SSL".to_string(), Protocol::Ssl)
            ]
        );
        assert!(protocols(
            &parse_listeners("OTHER://1.2.3.4:1").unwrap(),
            &map,
            false,
            false
        )
        .is_err());
        let bare = parse_listeners("127.0.0.1:1").unwrap();
        assert_eq!(
            protocols(&bare, &[], true, true).unwrap()[0].1,
            Protocol::SaslSsl
        );
        let adv = parse_advertised("EXTERNAL://broker.example:9094,INTERNAL://[::1]:1").unwrap();
        let bound: SocketAddr = "0.0.0.0:5555".parse().unwrap();
        assert_eq!(
            advertise("EXTERNAL", bound, &adv, "").unwrap(),
            ("broker.example".to_string(), 9094)
        );
        assert_eq!(advertise("INTERNAL", bound, &adv, "").unwrap().0, "::1");
        assert!(advertise("OTHER", bound, &adv, "").is_err());
        assert_eq!(
            advertise("OTHER", bound, &adv, "10.0.0.1").unwrap(),
            ("10.0.0.1".to_string(), 5555)
        );
        assert!(parse_advertised("broker:1").is_err());
        assert!(parse_advertised("A://h:x").is_err());
    }
}
