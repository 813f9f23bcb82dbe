//! TLS (issue 32's security, the TLS half): a CA and a certificate for 127.0.0.1 made here
//! (rcgen), a `mirrorlog-broker` whose Kafka listener speaks TLS with it, librdkafka writing to
//! it over TLS, and a second broker mirroring it over TLS — record for record equal; a mirror
//! whose CA did not sign the certificate, and one speaking plaintext, are refused with the
//! reason. The scenario is `tests/interop/broker/tls.py`.

mod broker_support;

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};

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

#[test]
fn a_broker_mirrors_another_over_tls_and_an_untrusted_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ca_cert, ca_key) = ca("mirrorlog test CA");
    let (other_ca, _) = ca("another CA");
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.distinguished_name = named("127.0.0.1");
    let leaf = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
    let server = dir.path().join("server.pem");
    let ca_pem = dir.path().join("ca.pem");
    let other_pem = dir.path().join("other-ca.pem");
    std::fs::write(
        &server,
        format!("{}{}", leaf_key.serialize_pem(), leaf.pem()),
    )
    .unwrap();
    std::fs::write(&ca_pem, ca_cert.pem()).unwrap();
    std::fs::write(&other_pem, other_ca.pem()).unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let out = broker_support::run_script(
        "tls.py",
        &["mirror", &path(&server), &path(&ca_pem), &path(&other_pem)],
        &[],
    );
    assert!(
        out.contains("ok tls mirror")
            && out.contains("ok untrusted certificate refused")
            && out.contains("ok plaintext to a TLS listener refused"),
        "{out}"
    );
}
