//! TLS (the TLS half): a CA and a certificate for 127.0.0.1 made here
//! (rcgen), a `mirrorlog-broker` whose Kafka listener speaks TLS with it, librdkafka writing to
//! it over TLS, and a second broker mirroring it over TLS — record for record equal; a mirror
//! whose CA did not sign the certificate, and one speaking plaintext, are refused with the
//! reason. The scenario is `testdata/interop/broker/tls.py`.

mod broker_support;

#[test]
fn a_broker_mirrors_another_over_tls_and_an_untrusted_certificate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let certs = broker_support::certs::write(dir.path());
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let out = broker_support::run_script(
        "tls.py",
        &[
            "mirror",
            &path(&certs.server),
            &path(&certs.ca),
            &path(&certs.other_ca),
        ],
        &[],
    );
    assert!(
        out.contains("ok tls mirror")
            && out.contains("ok untrusted certificate refused")
            && out.contains("ok plaintext to a TLS listener refused"),
        "{out}"
    );
}
