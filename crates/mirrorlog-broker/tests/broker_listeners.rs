//! Named listeners and `advertised.listeners`: a client on another host (a network
//! namespace joined by a veth pair) reaches the broker through the address its listener
//! advertises, and one told loopback cannot; each listener advertises its own address and
//! speaks its own protocol. The cross-host scenario is `testdata/interop/broker/netns.py` (root:
//! CI runs as root).

mod broker_support;

use broker_support::requests::{authenticate, handshake, metadata};
use broker_support::BrokerProc;
use kafka_protocol::messages::{ApiKey, MetadataRequest, RequestKind, ResponseKind};

#[test]
fn a_remote_client_reaches_the_broker_through_its_advertised_listener() {
    let out = broker_support::run_script("netns.py", &["remote"], &[]);
    assert!(
        out.contains("ok remote client through advertised.listeners: consumed 50")
            && out.contains("ok advertising loopback strands the remote client"),
        "{out}"
    );
}

#[test]
fn each_listener_advertises_its_own_address_and_speaks_its_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:pw\n").unwrap();
    let b = BrokerProc::start(
        &dir.path().join("data"),
        &[
            "--set",
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "--set",
            "advertised.listeners=SASL_PLAINTEXT://broker.example:9999",
            "--set",
            "sasl.enabled.mechanisms=PLAIN",
            "--set",
            &format!("sasl.users.file={}", users.display()),
        ],
    );
    // The plaintext listener (the first, `kafka=`) serves at once and advertises itself.
    let mut c = b.connect();
    let ResponseKind::Metadata(m) = metadata(&mut c) else {
        panic!()
    };
    let port: i32 = b.kafka.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(
        (m.brokers[0].host.as_str(), m.brokers[0].port),
        ("127.0.0.1", port)
    );
    // The SASL one requires a login first, and advertises what it was told to.
    let sasl = b.listener("SASL_PLAINTEXT");
    let mut s = broker_support::Conn::new(&sasl);
    let f = s.frame(
        ApiKey::Metadata,
        12,
        &RequestKind::Metadata(MetadataRequest::default()),
    );
    s.send_raw(&f).unwrap();
    assert!(s.closed(), "Metadata served before a login");
    let mut s = broker_support::Conn::new(&sasl);
    assert_eq!(handshake(&mut s, 1, "PLAIN").0, 0);
    assert_eq!(authenticate(&mut s, b"\0alice\0pw").0, 0);
    let ResponseKind::Metadata(m) = metadata(&mut s) else {
        panic!()
    };
    assert_eq!(
        (m.brokers[0].host.as_str(), m.brokers[0].port),
        ("broker.example", 9999)
    );
}
