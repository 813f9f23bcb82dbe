//! SASL (the SASL half): PLAIN and SCRAM-SHA-256/512 on the Kafka listener
//! and in the mirror fetcher, through one code (`net/sasl/`).
//!
//! - Real clients and two brokers (`testdata/interop/broker/sasl.py`): librdkafka and kafka-python
//!   log in over SASL_SSL with a certificate made here; a wrong password is refused; a broker
//!   mirrors another over SASL_SSL with SCRAM-SHA-512, its password from a file; a changed
//!   password shows in the mirror's status, and the rotated one is used once written.
//! - The listener's rules byte by byte (SASL_PLAINTEXT, raw frames): nothing is served before
//!   the login; an unknown mechanism, a wrong password and a second handshake get Kafka's
//!   codes; handshake v0's bare tokens work; the broker's own client logs in by each mechanism.

mod broker_support;

use broker_support::requests::{authenticate, handshake, metadata};
use broker_support::BrokerProc;
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, RequestKind, ResponseKind, SaslAuthenticateRequest,
};
use mirrorlog_broker::net::client::{Client, Security};
use mirrorlog_broker::net::sasl::{Login, Mechanism, Secret};

#[test]
fn brokers_and_real_clients_log_in_over_sasl_ssl_and_a_wrong_password_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let certs = broker_support::certs::write(dir.path());
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let out = broker_support::run_script(
        "sasl.py",
        &["mirror", &path(&certs.server), &path(&certs.ca)],
        &[],
    );
    for line in [
        "ok clients",
        "ok wrong password refused",
        "ok sasl mirror",
        "ok refused login shown",
        "ok rotated password used",
        "ok wrong password from the environment refused",
    ] {
        assert!(out.contains(line), "{line:?} missing:\n{out}");
    }
}

#[test]
fn the_listener_serves_nothing_before_a_login_and_answers_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:alice-secret\n").unwrap();
    let broker = BrokerProc::start(
        &dir.path().join("data"),
        &[
            "--set",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "--set",
            &format!("sasl.users.file={}", users.display()),
        ],
    );

    // A request before the login: the connection closes, unanswered.
    let mut c = broker.connect();
    let f = c.frame(
        ApiKey::Metadata,
        12,
        &RequestKind::Metadata(MetadataRequest::default()),
    );
    c.send_raw(&f).unwrap();
    assert!(c.closed(), "Metadata served before a login");

    // A mechanism not enabled: UNSUPPORTED_SASL_MECHANISM (33) with the enabled ones.
    let mut c = broker.connect();
    assert_eq!(
        handshake(&mut c, 1, "GSSAPI"),
        (
            33,
            vec![
                "PLAIN".to_string(),
                "SCRAM-SHA-256".into(),
                "SCRAM-SHA-512".into()
            ]
        )
    );
    assert!(c.closed());

    // A wrong password: SASL_AUTHENTICATION_FAILED (58) with a message, then closed.
    let mut c = broker.connect();
    assert_eq!(handshake(&mut c, 1, "PLAIN").0, 0);
    let (code, message, _) = authenticate(&mut c, b"\0alice\0guess");
    assert_eq!(code, 58);
    assert!(message.unwrap().contains("Authentication failed"));
    assert!(c.closed());

    // SaslAuthenticate before a handshake: closed.
    let mut c = broker.connect();
    let f = c.frame(
        ApiKey::SaslAuthenticate,
        2,
        &RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default()),
    );
    c.send_raw(&f).unwrap();
    assert!(c.closed());

    // PLAIN with handshake v1, after ApiVersions; then served, and a second handshake is
    // ILLEGAL_SASL_STATE (34), as in Kafka.
    let mut c = broker.connect();
    let versions = c.call(
        ApiKey::ApiVersions,
        3,
        RequestKind::ApiVersions(Default::default()),
    );
    let ResponseKind::ApiVersions(v) = versions else {
        panic!()
    };
    assert!(v
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::SaslAuthenticate as i16 && k.max_version == 2));
    assert_eq!(handshake(&mut c, 1, "PLAIN").0, 0);
    assert_eq!(authenticate(&mut c, b"alice\0alice\0alice-secret").0, 0);
    assert!(matches!(metadata(&mut c), ResponseKind::Metadata(_)));
    assert_eq!(handshake(&mut c, 1, "PLAIN").0, 34);
    assert_eq!(authenticate(&mut c, b"\0alice\0alice-secret").0, 34);

    // Handshake v0: the token goes bare (length and bytes), and its answer comes back bare.
    let mut c = broker.connect();
    assert_eq!(handshake(&mut c, 0, "PLAIN").0, 0);
    let token = b"\0alice\0alice-secret";
    let mut bare = (token.len() as i32).to_be_bytes().to_vec();
    bare.extend_from_slice(token);
    c.send_raw(&bare).unwrap();
    assert!(c.read_frame().unwrap().is_empty());
    assert!(matches!(metadata(&mut c), ResponseKind::Metadata(_)));

    // The broker's own client (the mirror fetcher's) by each mechanism; a wrong password is an
    // error that names the mechanism, the user and Kafka's code.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let good = dir.path().join("good");
    let bad = dir.path().join("bad");
    std::fs::write(&good, "alice-secret\n").unwrap();
    std::fs::write(&bad, "alice-secreT\n").unwrap();
    for m in Mechanism::ALL {
        for (file, ok) in [(&good, true), (&bad, false)] {
            let security = Security {
                tls: None,
                sasl: Some(Login {
                    mechanism: m,
                    username: "alice".into(),
                    password: Secret::File(file.clone()),
                }),
            };
            let r = runtime.block_on(async {
                let mut client = Client::connect_with(&broker.kafka, &security).await?;
                client
                    .call(
                        ApiKey::Metadata,
                        12,
                        RequestKind::Metadata(MetadataRequest::default()),
                    )
                    .await
            });
            match r {
                Ok(ResponseKind::Metadata(_)) => assert!(ok, "{m:?} logged in with a bad password"),
                Ok(other) => panic!("{other:?}"),
                Err(e) => {
                    assert!(!ok, "{m:?}: {e}");
                    assert!(
                        e.0.contains(m.name())
                            && e.0.contains("\"alice\"")
                            && e.0.contains("SASL_AUTHENTICATION_FAILED (58)"),
                        "{e}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_listener_without_sasl_answers_a_handshake_illegal_sasl_state() {
    let dir = tempfile::tempdir().unwrap();
    let broker = BrokerProc::start(dir.path(), &[]);
    let mut c = broker.connect();
    assert_eq!(handshake(&mut c, 1, "PLAIN").0, 34);
    assert!(matches!(metadata(&mut c), ResponseKind::Metadata(_)));
}

#[test]
fn a_bad_sasl_setting_is_refused_at_start_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice\n").unwrap();
    let broker = env!("CARGO_BIN_EXE_mirrorlog-broker");
    for (args, says) in [
        (
            vec!["--set", "sasl.enabled.mechanisms=GSSAPI"],
            "not served",
        ),
        (
            vec!["--set", "sasl.enabled.mechanisms=PLAIN"],
            "given together",
        ),
        (
            vec!["--set", &*format!("sasl.users.file={}", users.display())],
            "expected user:password",
        ),
    ] {
        let out = std::process::Command::new(broker)
            .args(["--data-dir", dir.path().join("d").to_str().unwrap()])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    }
}
