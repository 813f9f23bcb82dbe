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

fn read_pem(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

fn certificates(path: &Path) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    let pem = read_pem(path)?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate", path.display()));
    }
    Ok(certs)
}

/// The client side: trusts the certificates of `ca_location` (PEM) alone.
///
/// # Errors
/// The file cannot be read or holds no usable certificate.
pub fn client_config(ca_location: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certificates(ca_location)? {
        roots
            .add(c)
            .map_err(|e| format!("{}: {e}", ca_location.display()))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The server side: the private key and certificate chain of `keystore_location` (PEM).
///
/// # Errors
/// The file cannot be read, or lacks a key or a certificate, or they do not match.
pub fn server_config(keystore_location: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs = certificates(keystore_location)?;
    let pem = read_pem(keystore_location)?;
    let key = rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| format!("{}: {e}", keystore_location.display()))?
        .ok_or_else(|| format!("{}: no PEM private key", keystore_location.display()))?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("{}: {e}", keystore_location.display()))?;
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
) -> Result<Box<dyn Stream>, String> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: not a server name: {e}"))?;
    let stream = tokio_rustls::TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
    Ok(Box::new(stream))
}
