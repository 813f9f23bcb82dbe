//! Certificates made in the TLS tests (rcgen): a CA, a server certificate for 127.0.0.1 that it
//! signed (PEM key and chain, as `ssl.keystore.location` takes it), and another CA that did not.

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
use std::path::{Path, PathBuf};

/// A distinguished name of its common name alone (rcgen's default is one name for every
/// certificate, which makes a leaf look self-signed to OpenSSL).
fn named(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A CA's certificate and its key pair.
fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = named(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    (params.self_signed(&key).unwrap(), key)
}

/// The files written into a directory.
pub struct Certs {
    /// The server's key and certificate (PEM).
    pub server: PathBuf,
    /// The CA that signed it (PEM).
    pub ca: PathBuf,
    /// A CA that did not (PEM).
    pub other_ca: PathBuf,
}

/// Writes the certificates into `dir`.
pub fn write(dir: &Path) -> Certs {
    let (ca_cert, ca_key) = ca("mirrorlog test CA");
    let (other_ca, _) = ca("another CA");
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.distinguished_name = named("127.0.0.1");
    let leaf = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
    let certs = Certs {
        server: dir.join("server.pem"),
        ca: dir.join("ca.pem"),
        other_ca: dir.join("other-ca.pem"),
    };
    std::fs::write(
        &certs.server,
        format!("{}{}", leaf_key.serialize_pem(), leaf.pem()),
    )
    .unwrap();
    std::fs::write(&certs.ca, ca_cert.pem()).unwrap();
    std::fs::write(&certs.other_ca, other_ca.pem()).unwrap();
    certs
}
