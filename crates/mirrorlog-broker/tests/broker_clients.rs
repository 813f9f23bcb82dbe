//! Real clients against one `mirrorlog-broker` process, unmodified: librdkafka through
//! confluent-kafka (every codec with headers and null keys and values, an idempotent producer
//! with five requests in flight, a transactional producer committing and aborting, consumers at
//! both isolation levels, fencing by a second producer), kafka-python (admin, produce, consume,
//! ListOffsets by time) and kcat (`-L`, produce, consume). The checks are in
//! `testdata/interop/broker/clients.py`; the clients are installed by `scripts/test.sh`.

mod broker_support;

#[test]
fn librdkafka_kafka_python_and_kcat_produce_and_consume_through_the_broker() {
    let out = broker_support::run_script("clients.py", &[], &[]);
    assert!(out.contains("all client checks passed"), "{out}");
    for check in [
        "codec zstd",
        "idempotent producer",
        "transactional producer",
        "kafka-python",
        "kafka-python fetch sessions",
        "kcat",
    ] {
        assert!(
            out.contains(&format!("ok {check}")),
            "{check} did not run:\n{out}"
        );
    }
}
