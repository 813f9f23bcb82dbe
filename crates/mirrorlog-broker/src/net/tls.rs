//! TLS, one code for both ends (rustls on ring): the mirror fetcher's connections to a source
//! (`security.protocol=SSL`, the source's CA from `ssl.ca.location`, the server's name or IP
//! address checked against its certificate) and the broker's Kafka listener
//! (`ssl.keystore.location`: a PEM file holding the private key and the certificate chain, as
//! Kafka's PEM keystore does).

use std::path::Path;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// A byte stream a Kafka connection runs over: TCP, or TLS over TCP.
pub trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why TLS could not be set up, or a handshake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A PEM file could not be read, or does not parse.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A PEM file without what it must hold.
    #[error("{}: no PEM {what}", path.display())]
    Missing {
        /// The file.
        path: std::path::PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
    },
    /// rustls refused the certificates or key (of the file named, when one is).
    #[error("{}{source}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    Rustls {
        /// The file.
        path: Option<std::path::PathBuf>,
        /// Why.
        source: rustls::Error,
    },
    /// The host is no valid server name.
    #[error("{host}: not a server name: {reason}")]
    ServerName {
        /// The host.
        host: String,
        /// Why.
        reason: String,
    },
    /// The handshake failed (the peer's certificate not trusted, not for that name, ...).
    #[error("TLS handshake with {addr}: {source}")]
    Handshake {
        /// The peer.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| file(path, source))
}

fn file(path: &Path, source: std::io::Error) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        source,
    }
}

fn refused(path: Option<&Path>) -> impl FnOnce(rustls::Error) -> TlsError {
    let path = path.map(Path::to_path_buf);
    move |source| TlsError::Rustls { path, source }
}

fn certificates(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, TlsError> {
    let pem = read_pem(path)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| file(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Missing {
            path: path.to_path_buf(),
            what: "certificate",
        });
    }
    Ok(certs)
}

/// The client side: trusts the certificates of `ca_location` (PEM) alone.
///
/// # Errors
/// The file cannot be read or holds no usable certificate.
pub fn client_config(ca_location: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certificates(ca_location)? {
        roots.add(c).map_err(refused(Some(ca_location)))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(refused(None))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The server side: the private key and certificate chain of `keystore_location` (PEM).
///
/// # Errors
/// The file cannot be read, or lacks a key or a certificate, or they do not match.
pub fn server_config(keystore_location: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let certs = certificates(keystore_location)?;
    let pem = read_pem(keystore_location)?;
    let key = rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| file(keystore_location, e))?
        .ok_or_else(|| TlsError::Missing {
            path: keystore_location.to_path_buf(),
            what: "private key",
        })?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(refused(None))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(refused(Some(keystore_location)))?;
    Ok(Arc::new(config))
}

/// TLS over `tcp` to `addr` (`HOST:PORT`; the host is the name checked).
///
/// # Errors
/// The host is not a valid server name, or the handshake failed (the peer's certificate not
/// trusted, not for that name, ...).
pub async fn connect(
    config: &Arc<rustls::ClientConfig>,
    addr: &str,
    tcp: tokio::net::TcpStream,
) -> Result<Box<dyn Stream>, TlsError> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
        TlsError::ServerName {
            host: host.to_string(),
            reason: e.to_string(),
        }
    })?;
    let stream = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|source| TlsError::Handshake {
            addr: addr.to_string(),
            source,
        })?;
    Ok(Box::new(stream))
}
